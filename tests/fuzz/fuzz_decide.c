/*
 * fuzz_decide.c - libFuzzer target: the two pure safety decisions (decide_post, decide_lookup)
 * on facts read from the input, any status and any counts, checked against the properties of
 * tests/test_decide.c that keep an invoice from being booked twice or lost. The table test
 * enumerates every flag combination on two statuses and small counts; this covers the rest of
 * the input space cheaply (a decision is total: a verdict in range, a reason, on every input).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "erp/decide.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void post_properties(const struct decide_post_facts *f)
{
    struct decide_post d = decide_post(f);
    bool committed = f->phase == DECIDE_COMMIT && !f->fetch && !f->data_error && !f->fill_error;
    CHECK((int)d.verdict >= 0 && d.verdict < DECIDE_POST__COUNT && d.why);
    CHECK(decide_post(f).verdict == d.verdict); /* pure */
    /* After the commit nothing may lead toward another post. */
    if (f->phase == DECIDE_FOLLOWUP)
        CHECK(d.verdict == DECIDE_NEXT || d.verdict == DECIDE_CONFIRMED ||
              d.verdict == DECIDE_REJECTED || d.verdict == DECIDE_FOLLOWUP_FAILED ||
              d.verdict == DECIDE_RESTART_FOLLOWUPS);
    /* Once the committing request may have gone out, "not sent" needs proof. */
    if (committed && (d.verdict == DECIDE_NOT_SENT || d.verdict == DECIDE_RESTART))
        CHECK(f->transport == DECIDE_TR_NOT_SENT ||
              (f->transport == DECIDE_TR_ANSWERED && !f->via_redirect && !f->match_aborted &&
               (f->rule == DECIDE_RULE_NOT_SENT || f->rule == DECIDE_RULE_SESSION_EXPIRED ||
                (f->rule == DECIDE_RULE_NONE && f->session_gone))));
    /* Before the commit nothing can have booked: never unknown, never booked. */
    if (f->phase == DECIDE_BEFORE_COMMIT || (f->phase == DECIDE_COMMIT && f->fetch))
        CHECK(d.verdict != DECIDE_UNKNOWN && d.verdict != DECIDE_CONFIRMED &&
              d.verdict != DECIDE_SAVED && d.verdict != DECIDE_FOLLOWUP_FAILED);
    /* Completed and saved need a document number and the ERP's own word. */
    if (d.verdict == DECIDE_CONFIRMED || d.verdict == DECIDE_SAVED)
        CHECK(f->doc && f->transport == DECIDE_TR_ANSWERED && !f->match_aborted &&
              (f->rule == DECIDE_RULE_COMPLETED || f->rule == DECIDE_RULE_SAVED));
    /* A page that matches no rule at the committing step is unknown, never success. */
    if (committed && f->transport == DECIDE_TR_ANSWERED && f->rule == DECIDE_RULE_NONE)
        CHECK(d.verdict == DECIDE_UNKNOWN || d.verdict == DECIDE_NOT_SENT);
    /* Restarting the post is only ever for a session lost before the commit. */
    if (d.verdict == DECIDE_RESTART)
        CHECK(d.relogin && !committed);
    /* The ERP's amount differing (<compare-amount>) turns only a step that would go on before
     * the commit into a business exception. */
    struct decide_post_facts same = *f;
    same.amount_differs = !f->amount_differs;
    struct decide_post other = decide_post(&same);
    if (other.verdict != d.verdict)
        CHECK((f->phase == DECIDE_BEFORE_COMMIT || (f->phase == DECIDE_COMMIT && f->fetch)) &&
              (d.verdict == DECIDE_NEXT || other.verdict == DECIDE_NEXT) &&
              (d.verdict == DECIDE_REJECTED || other.verdict == DECIDE_REJECTED));
    /* A form not as the flow says is systemic (before the commit) unless a rule tried on the
     * page that lacks a control explains it; finished only after the commit. */
    if (f->fill_error && !f->data_error) {
        bool explained = f->missing && f->transport == DECIDE_TR_ANSWERED &&
                         (f->rule != DECIDE_RULE_NONE || f->match_aborted);
        if (!explained)
            CHECK(d.verdict ==
                  (f->phase == DECIDE_FOLLOWUP ? DECIDE_FOLLOWUP_FAILED : DECIDE_SYSTEMIC));
        else
            CHECK(d.verdict != DECIDE_SYSTEMIC && d.verdict != DECIDE_UNKNOWN &&
                  d.verdict != DECIDE_SAVED && d.verdict != DECIDE_NEXT);
        if (d.verdict == DECIDE_CONFIRMED)
            CHECK(f->phase == DECIDE_FOLLOWUP && f->rule == DECIDE_RULE_COMPLETED && f->doc);
    }
}

static void lookup_properties(const struct decide_lookup_facts *f)
{
    struct decide_lookup d = decide_lookup(f);
    CHECK((int)d.verdict >= 0 && d.verdict < DECIDE_LOOKUP__COUNT && d.why);
    CHECK(decide_lookup(f).verdict == d.verdict);
    /* An absence is confirmed only by a complete, genuine results screen. */
    if (d.verdict == DECIDE_NOT_FOUND) {
        CHECK(f->answered && f->screen_ok && !f->match_aborted && !f->more && !f->cut &&
              f->hits == 0);
        CHECK(f->rows > 0 || f->empty_marker);
        CHECK(f->candidates == 0 || (f->details_ok && f->candidates <= f->max_candidates));
    }
    /* A hit is a hit: never turned into an absence or a failure by unfinished counts. */
    if (d.verdict == DECIDE_FOUND_UNFINISHED)
        CHECK(f->hits > 0 && f->unfinished > 0);
    if (d.verdict == DECIDE_FOUND)
        CHECK(f->hits > 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const long statuses[] = {0, 200, 201, 302, 303, 401, 403, 429, 500, 503};
    struct fuzz_in in = {data, size};
    while (in.n) {
        uint16_t bits = (uint16_t)fuzz_u64(&in, 2);
        uint8_t sel = fuzz_byte(&in);
        long status = (sel & 0x80) ? (long)(int64_t)fuzz_u64(&in, 8)
                                   : statuses[(sel & 0x7f) % (sizeof(statuses) / sizeof(long))];
        struct decide_post_facts pf = {
            .phase = (enum decide_phase)(fuzz_byte(&in) % 3),
            .fetch = bits & 1,
            .last = bits & 2,
            .data_error = bits & 4,
            .fill_error = bits & 8,
            .via_redirect = bits & 16,
            .match_aborted = bits & 32,
            .doc = bits & 64,
            .session_gone = bits & 128,
            .captures_ok = bits & 256,
            .page_ok = bits & 512,
            .missing = sel & 2,
            .transport = (enum decide_transport)(fuzz_byte(&in) % 3),
            .status = status,
            .rule = (enum decide_rule)(fuzz_byte(&in) % (DECIDE_RULE_UNKNOWN + 1)),
            .amount_differs = (sel & 0x40) != 0,
        };
        post_properties(&pf);

        /* Counts: mostly small (where the decisions turn), sometimes anything. */
        size_t counts[5];
        for (size_t i = 0; i < 5; i++) {
            uint8_t c = fuzz_byte(&in);
            counts[i] = (c & 0x80) ? (size_t)fuzz_u64(&in, 8) : (size_t)(c & 7);
        }
        struct decide_lookup_facts lf = {
            .answered = bits & 1024,
            .screen_ok = bits & 2048,
            .match_aborted = bits & 4096,
            .empty_marker = bits & 8192,
            .more = bits & 16384,
            .cut = bits & 32768,
            .details_ok = sel & 1,
            .rows = counts[0],
            .candidates = counts[1],
            .max_candidates = counts[2],
            .hits = counts[3],
            .unfinished = counts[4],
        };
        lookup_properties(&lf);
    }
    return 0;
}
