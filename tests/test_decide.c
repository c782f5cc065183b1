/*
 * test_decide.c - the safety decisions as tables: what an answer to a post step means
 * (before, at and after the committing step), what a page that lacks the step's form, control
 * or button means once the step's rules were tried on it, and when a lookup proves an absence. Each
 * row reads like the design; then every combination of facts is enumerated and the properties that
 * keep an invoice from being booked twice are checked on all of them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>

#include "erp/decide.h"

/* Short names for the tables. */
#define PRE DECIDE_BEFORE_COMMIT
#define COM DECIDE_COMMIT
#define FUP DECIDE_FOLLOWUP
#define ANS DECIDE_TR_ANSWERED
#define NSN DECIDE_TR_NOT_SENT
#define UNK DECIDE_TR_UNKNOWN

#define R_NONE DECIDE_RULE_NONE
#define R_DONE DECIDE_RULE_COMPLETED
#define R_SAVED DECIDE_RULE_SAVED
#define R_REJ DECIDE_RULE_REJECTED
#define R_AE DECIDE_RULE_ALREADY_EXISTS
#define R_NS DECIDE_RULE_NOT_SENT
#define R_SE DECIDE_RULE_SESSION_EXPIRED
#define R_UNK DECIDE_RULE_UNKNOWN

struct post_row {
    const char *what;
    enum decide_phase phase;
    bool fetch, last, data_error, fill_error;
    enum decide_transport transport;
    long status;
    bool via_redirect, aborted;
    enum decide_rule rule;
    bool doc, session_gone, captures_ok, page_ok;
    enum decide_post_verdict want;
    bool want_relogin;
};

/* clang-format off */
static const struct post_row post_rows[] = {
 /* what                                            phase fet last data fill tr  st  redir abrt rule    doc  sess capt page  verdict                   relogin */
 {"pre: answered as expected",                       PRE, 0, 0, 0, 0, ANS, 200, 0, 0, R_NONE,  0, 0, 1, 1, DECIDE_NEXT,              0},
 {"pre: page fetch answered",                        PRE, 1, 0, 0, 0, ANS, 200, 0, 0, R_NONE,  0, 0, 1, 1, DECIDE_NEXT,              0},
 {"pre: timeout",                                    PRE, 0, 0, 0, 0, UNK,   0, 0, 0, R_NONE,  0, 0, 1, 0, DECIDE_NOT_SENT,          0},
 {"pre: connection refused",                         PRE, 0, 0, 0, 0, NSN,   0, 0, 0, R_NONE,  0, 0, 1, 0, DECIDE_NOT_SENT,          0},
 {"pre: validation message (HTTP 500)",              PRE, 0, 0, 0, 0, ANS, 500, 0, 0, R_REJ,   0, 0, 1, 0, DECIDE_REJECTED,          0},
 {"pre: ERP says duplicate at check",                PRE, 0, 0, 0, 0, ANS, 200, 0, 0, R_AE,    0, 0, 1, 1, DECIDE_ALREADY_EXISTS,    0},
 {"pre: login page by rule",                         PRE, 0, 0, 0, 0, ANS, 200, 0, 0, R_SE,    0, 0, 1, 1, DECIDE_RESTART,           1},
 {"pre: login page by marker",                       PRE, 0, 0, 0, 0, ANS, 401, 0, 0, R_NONE,  0, 1, 1, 0, DECIDE_RESTART,           1},
 {"pre: login page through a redirect",              PRE, 1, 0, 0, 0, ANS, 200, 1, 0, R_NONE,  0, 1, 1, 1, DECIDE_RESTART,           1},
 {"pre: 503 overload",                               PRE, 0, 0, 0, 0, ANS, 503, 0, 0, R_NS,    0, 0, 1, 0, DECIDE_NOT_SENT,          0},
 {"pre: 500 without a rule",                         PRE, 0, 0, 0, 0, ANS, 500, 0, 0, R_NONE,  0, 0, 1, 0, DECIDE_NOT_SENT,          0},
 {"pre: a success rule cannot book here",            PRE, 0, 0, 0, 0, ANS, 200, 0, 0, R_DONE,  1, 0, 1, 1, DECIDE_NOT_SENT,          0},
 {"pre: capture found nothing",                      PRE, 0, 0, 0, 0, ANS, 200, 0, 0, R_NONE,  0, 0, 0, 1, DECIDE_NOT_SENT,          0},
 {"pre: match budget spent",                         PRE, 0, 0, 0, 0, ANS, 200, 0, 1, R_NONE,  0, 0, 1, 1, DECIDE_NOT_SENT,          0},
 {"pre: no such select option",                      PRE, 0, 0, 1, 0, ANS, 200, 0, 0, R_NONE,  0, 0, 1, 1, DECIDE_REJECTED,          0},
 {"pre: form or button missing",                     PRE, 0, 0, 0, 1, ANS, 200, 0, 0, R_NONE,  0, 0, 1, 1, DECIDE_SYSTEMIC,          0},
 {"commit: its page fetch timed out",                COM, 1, 1, 0, 0, UNK,   0, 0, 0, R_NONE,  0, 0, 1, 0, DECIDE_NOT_SENT,          0},
 {"commit: its page fetch showed the login",         COM, 1, 1, 0, 0, ANS, 200, 0, 0, R_NONE,  0, 1, 1, 1, DECIDE_RESTART,           1},
 {"commit: form missing before the submit",          COM, 0, 1, 0, 1, ANS, 200, 0, 0, R_NONE,  0, 0, 1, 1, DECIDE_SYSTEMIC,          0},
 {"commit: unknown select option",                   COM, 0, 1, 1, 0, ANS, 200, 0, 0, R_NONE,  0, 0, 1, 1, DECIDE_REJECTED,          0},
 {"commit: posted banner with doc",                  COM, 0, 1, 0, 0, ANS, 200, 0, 0, R_DONE,  1, 0, 1, 1, DECIDE_CONFIRMED,         0},
 {"commit: posted banner without doc",               COM, 0, 1, 0, 0, ANS, 200, 0, 0, R_DONE,  0, 0, 1, 1, DECIDE_UNKNOWN,           0},
 {"commit: posted after PRG redirect",               COM, 0, 1, 0, 0, ANS, 200, 1, 0, R_DONE,  1, 0, 1, 1, DECIDE_CONFIRMED,         0},
 {"commit: saved draft, approve follows",            COM, 0, 0, 0, 0, ANS, 200, 0, 0, R_SAVED, 1, 0, 1, 1, DECIDE_SAVED,             0},
 {"commit: saved without a doc",                     COM, 0, 0, 0, 0, ANS, 200, 0, 0, R_SAVED, 0, 0, 1, 1, DECIDE_UNKNOWN,           0},
 {"commit: validation message",                      COM, 0, 1, 0, 0, ANS, 500, 0, 0, R_REJ,   0, 0, 1, 0, DECIDE_REJECTED,          0},
 {"commit: reference exists",                        COM, 0, 1, 0, 0, ANS, 200, 0, 0, R_AE,    1, 0, 1, 1, DECIDE_ALREADY_EXISTS,    0},
 {"commit: timeout after sending",                   COM, 0, 1, 0, 0, UNK,   0, 0, 0, R_NONE,  0, 0, 1, 0, DECIDE_UNKNOWN,           0},
 {"commit: connection refused",                      COM, 0, 1, 0, 0, NSN,   0, 0, 0, R_NONE,  0, 0, 1, 0, DECIDE_NOT_SENT,          0},
 {"commit: 503 before processing",                   COM, 0, 1, 0, 0, ANS, 503, 0, 0, R_NS,    0, 0, 1, 0, DECIDE_NOT_SENT,          0},
 {"commit: 503 at the redirect target",              COM, 0, 1, 0, 0, ANS, 503, 1, 0, R_NS,    0, 0, 1, 0, DECIDE_UNKNOWN,           0},
 {"commit: login page answering the form",           COM, 0, 1, 0, 0, ANS, 200, 0, 0, R_SE,    0, 0, 1, 1, DECIDE_NOT_SENT,          1},
 {"commit: login page at the redirect target",       COM, 0, 1, 0, 0, ANS, 200, 1, 0, R_SE,    0, 0, 1, 1, DECIDE_UNKNOWN,           1},
 {"commit: 401 marker, direct",                      COM, 0, 1, 0, 0, ANS, 401, 0, 0, R_NONE,  0, 1, 1, 0, DECIDE_NOT_SENT,          1},
 {"commit: 303 to the login page",                   COM, 0, 1, 0, 0, ANS, 200, 1, 0, R_NONE,  0, 1, 1, 1, DECIDE_UNKNOWN,           1},
 {"commit: 500 without a rule",                      COM, 0, 1, 0, 0, ANS, 500, 0, 0, R_NONE,  0, 0, 1, 0, DECIDE_UNKNOWN,           0},
 {"commit: garbled page",                            COM, 0, 1, 0, 0, ANS, 200, 0, 0, R_NONE,  0, 0, 1, 1, DECIDE_UNKNOWN,           0},
 {"commit: rule says ambiguous",                     COM, 0, 1, 0, 0, ANS, 200, 0, 0, R_UNK,   0, 0, 1, 1, DECIDE_UNKNOWN,           0},
 {"commit: match budget spent",                      COM, 0, 1, 0, 0, ANS, 200, 0, 1, R_NONE,  0, 0, 1, 1, DECIDE_UNKNOWN,           0},
 {"followup: edit page fetched",                     FUP, 1, 1, 0, 0, ANS, 200, 0, 0, R_NONE,  1, 0, 1, 1, DECIDE_NEXT,              0},
 {"followup: approved",                              FUP, 0, 1, 0, 0, ANS, 200, 0, 0, R_DONE,  1, 0, 1, 1, DECIDE_CONFIRMED,         0},
 {"followup: approved via redirect to empty form",   FUP, 0, 1, 0, 0, ANS, 200, 1, 0, R_DONE,  1, 0, 1, 1, DECIDE_CONFIRMED,         0},
 {"followup: approve timed out",                     FUP, 0, 1, 0, 0, UNK,   0, 0, 0, R_NONE,  1, 0, 1, 0, DECIDE_FOLLOWUP_FAILED,   0},
 {"followup: approve refused",                       FUP, 0, 1, 0, 0, ANS, 500, 0, 0, R_REJ,   1, 0, 1, 0, DECIDE_REJECTED,          0},
 {"followup: 503",                                   FUP, 0, 1, 0, 0, ANS, 503, 0, 0, R_NS,    1, 0, 1, 0, DECIDE_FOLLOWUP_FAILED,   0},
 {"followup: login page answering approve",          FUP, 0, 1, 0, 0, ANS, 401, 0, 0, R_NONE,  1, 1, 1, 0, DECIDE_RESTART_FOLLOWUPS, 1},
 {"followup: login page through a redirect",         FUP, 0, 1, 0, 0, ANS, 200, 1, 0, R_NONE,  1, 1, 1, 1, DECIDE_FOLLOWUP_FAILED,   1},
 {"followup: approve button missing",                FUP, 0, 1, 0, 1, ANS, 200, 0, 0, R_NONE,  1, 0, 1, 1, DECIDE_FOLLOWUP_FAILED,   0},
 {"followup: unrecognised last answer",              FUP, 0, 1, 0, 0, ANS, 200, 0, 0, R_NONE,  1, 0, 1, 1, DECIDE_FOLLOWUP_FAILED,   0},
 {"followup: middle step answered",                  FUP, 0, 0, 0, 0, ANS, 200, 0, 0, R_NONE,  1, 0, 1, 1, DECIDE_NEXT,              0},
 {"followup: a success rule without a doc",          FUP, 0, 1, 0, 0, ANS, 200, 0, 0, R_DONE,  0, 0, 1, 1, DECIDE_FOLLOWUP_FAILED,   0},
};
/* clang-format on */

static struct decide_post_facts facts_of(const struct post_row *r)
{
    struct decide_post_facts f = {
        .phase = r->phase,
        .fetch = r->fetch,
        .last = r->last,
        .data_error = r->data_error,
        .fill_error = r->fill_error,
        .transport = r->transport,
        .status = r->status,
        .via_redirect = r->via_redirect,
        .match_aborted = r->aborted,
        .rule = r->rule,
        .doc = r->doc,
        .session_gone = r->session_gone,
        .captures_ok = r->captures_ok,
        .page_ok = r->page_ok,
    };
    return f;
}

static void test_decide_post_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(post_rows) / sizeof(post_rows[0]); i++) {
        const struct post_row *r = &post_rows[i];
        struct decide_post_facts f = facts_of(r);
        struct decide_post d = decide_post(&f);
        if (d.verdict != r->want || d.relogin != r->want_relogin)
            fail_msg("%s: got %s relogin %d, want %s relogin %d (%s)", r->what,
                     decide_post_verdict_name(d.verdict), d.relogin,
                     decide_post_verdict_name(r->want), r->want_relogin, d.why);
        assert_non_null(d.why);
    }
}

/* A page that lacks the step's form, control or button: what the step's rules, tried on that
 * page, make of it. Nothing of the step was sent in any row. */
struct missing_row {
    const char *what;
    enum decide_phase phase;
    bool missing; /* the form, a control or the button is missing (not merely different) */
    bool aborted;
    enum decide_rule rule;
    bool doc;
    enum decide_post_verdict want;
    bool want_relogin;
};

/* clang-format off */
static const struct missing_row missing_rows[] = {
 /* what                                                   phase miss abrt rule    doc  verdict                   relogin */
 {"pre: no rule explains the missing button",               PRE, 1, 0, R_NONE,  0, DECIDE_SYSTEMIC,          0},
 {"pre: two buttons match (not missing): rules not asked",  PRE, 0, 0, R_REJ,   0, DECIDE_SYSTEMIC,          0},
 {"pre: closed period leaves Save out: rejected",           PRE, 1, 0, R_REJ,   0, DECIDE_REJECTED,          0},
 {"pre: vendor picker instead of the form: rejected",       PRE, 1, 0, R_REJ,   0, DECIDE_REJECTED,          0},
 {"pre: the page says the invoice exists",                  PRE, 1, 0, R_AE,    0, DECIDE_ALREADY_EXISTS,    0},
 {"pre: the page is the login",                             PRE, 1, 0, R_SE,    0, DECIDE_RESTART,           1},
 {"pre: the page says try later",                           PRE, 1, 0, R_NS,    0, DECIDE_NOT_SENT,          0},
 {"pre: a rule calls the page ambiguous",                   PRE, 1, 0, R_UNK,   0, DECIDE_NOT_SENT,          0},
 {"pre: a rule's pattern ran out of budget",                PRE, 1, 1, R_NONE,  0, DECIDE_NOT_SENT,          0},
 {"commit: Save button missing, closed period",             COM, 1, 0, R_REJ,   0, DECIDE_REJECTED,          0},
 {"commit: Save button missing, no rule",                   COM, 1, 0, R_NONE,  0, DECIDE_SYSTEMIC,          0},
 {"commit: a success rule on the unsubmitted page",         COM, 1, 0, R_DONE,  1, DECIDE_NOT_SENT,          0},
 {"commit: a saved rule on the unsubmitted page",           COM, 1, 0, R_SAVED, 1, DECIDE_NOT_SENT,          0},
 {"commit: a rule calls the page ambiguous",                COM, 1, 0, R_UNK,   0, DECIDE_NOT_SENT,          0},
 {"followup: approved by someone meanwhile",                FUP, 1, 0, R_DONE,  1, DECIDE_CONFIRMED,         0},
 {"followup: finished, but no document number known",      FUP, 1, 0, R_DONE,  0, DECIDE_FOLLOWUP_FAILED,   0},
 {"followup: no rule explains the missing Approve",         FUP, 1, 0, R_NONE,  1, DECIDE_FOLLOWUP_FAILED,   0},
 {"followup: the ERP refuses the approve",                  FUP, 1, 0, R_REJ,   1, DECIDE_REJECTED,          0},
 {"followup: the page is the login",                        FUP, 1, 0, R_SE,    1, DECIDE_RESTART_FOLLOWUPS, 1},
 {"followup: the page says it already exists",              FUP, 1, 0, R_AE,    1, DECIDE_FOLLOWUP_FAILED,   0},
 {"followup: a rule's pattern ran out of budget",           FUP, 1, 1, R_DONE,  1, DECIDE_FOLLOWUP_FAILED,   0},
};
/* clang-format on */

static void test_decide_post_missing_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(missing_rows) / sizeof(missing_rows[0]); i++) {
        const struct missing_row *r = &missing_rows[i];
        struct decide_post_facts f = {
            .phase = r->phase,
            .last = true,
            .fill_error = true,
            .missing = r->missing,
            .transport = DECIDE_TR_ANSWERED,
            .status = 200,
            .match_aborted = r->aborted,
            .rule = r->rule,
            .doc = r->doc,
            .captures_ok = true,
            .page_ok = true,
        };
        struct decide_post d = decide_post(&f);
        if (d.verdict != r->want || d.relogin != r->want_relogin)
            fail_msg("%s: got %s relogin %d, want %s relogin %d (%s)", r->what,
                     decide_post_verdict_name(d.verdict), d.relogin,
                     decide_post_verdict_name(r->want), r->want_relogin, d.why);
        assert_non_null(d.why);
    }
}

/* Calls fn for every combination of post facts. */
static void each_post_facts(void (*fn)(const struct decide_post_facts *f, long *count), long *count)
{
    static const enum decide_rule rules[] = {R_NONE, R_DONE, R_SAVED, R_REJ,
                                             R_AE,   R_NS,   R_SE,    R_UNK};
    for (int phase = 0; phase < 3; phase++)
        for (int bits = 0; bits < (1 << 11); bits++)
            for (int tr = 0; tr < 3; tr++)
                for (size_t ru = 0; ru < sizeof(rules) / sizeof(rules[0]); ru++) {
                    struct decide_post_facts f = {
                        .phase = (enum decide_phase)phase,
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
                        .missing = bits & 1024,
                        .transport = (enum decide_transport)tr,
                        .status = (bits & 512) ? 200 : 500,
                        .rule = rules[ru],
                    };
                    fn(&f, count);
                }
}

/* The properties that keep an invoice from being booked twice or lost. */
static void post_properties(const struct decide_post_facts *f, long *count)
{
    struct decide_post d = decide_post(f);
    bool committed = f->phase == DECIDE_COMMIT && !f->fetch && !f->data_error && !f->fill_error;
    (*count)++;
    assert_true(d.verdict >= 0 && d.verdict < DECIDE_POST__COUNT);
    assert_non_null(d.why);
    /* After the commit nothing may lead toward another post. */
    if (f->phase == DECIDE_FOLLOWUP)
        assert_true(d.verdict == DECIDE_NEXT || d.verdict == DECIDE_CONFIRMED ||
                    d.verdict == DECIDE_REJECTED || d.verdict == DECIDE_FOLLOWUP_FAILED ||
                    d.verdict == DECIDE_RESTART_FOLLOWUPS);
    /* Once the committing request may have gone out, "not sent" needs proof: nothing was
     * sent, or the ERP's own direct answer says it did not process it. */
    if (committed && (d.verdict == DECIDE_NOT_SENT || d.verdict == DECIDE_RESTART))
        assert_true(
            f->transport == DECIDE_TR_NOT_SENT ||
            (f->transport == DECIDE_TR_ANSWERED && !f->via_redirect && !f->match_aborted &&
             (f->rule == R_NS || f->rule == R_SE || (f->rule == R_NONE && f->session_gone))));
    /* Before the commit nothing can have booked: never unknown. */
    if (f->phase == DECIDE_BEFORE_COMMIT || (f->phase == DECIDE_COMMIT && f->fetch))
        assert_true(d.verdict != DECIDE_UNKNOWN && d.verdict != DECIDE_CONFIRMED &&
                    d.verdict != DECIDE_SAVED && d.verdict != DECIDE_FOLLOWUP_FAILED);
    /* Completed and saved need a document number. */
    if (d.verdict == DECIDE_CONFIRMED || d.verdict == DECIDE_SAVED)
        assert_true(f->doc && f->transport == DECIDE_TR_ANSWERED &&
                    (f->rule == R_DONE || f->rule == R_SAVED));
    /* A page that matches no rule at the committing step is unknown, never success. */
    if (committed && f->transport == DECIDE_TR_ANSWERED && f->rule == R_NONE)
        assert_true(d.verdict == DECIDE_UNKNOWN || d.verdict == DECIDE_NOT_SENT);
    /* Restarting the post is only ever for a session lost before the commit. */
    if (d.verdict == DECIDE_RESTART)
        assert_true(d.relogin && !committed);
    /* A form that is not as the flow says is "the form changed" (systemic, before the commit)
     * unless a rule tried on the page that lacks a control explains it; then never booked
     * (nothing of the step was sent), and finished only after the commit by a success rule. */
    if (f->fill_error && !f->data_error) {
        bool explained = f->missing && f->transport == DECIDE_TR_ANSWERED &&
                         (f->rule != R_NONE || f->match_aborted);
        if (!explained)
            assert_int_equal(d.verdict, f->phase == DECIDE_FOLLOWUP ? DECIDE_FOLLOWUP_FAILED
                                                                    : DECIDE_SYSTEMIC);
        else
            assert_true(d.verdict != DECIDE_SYSTEMIC && d.verdict != DECIDE_UNKNOWN &&
                        d.verdict != DECIDE_SAVED && d.verdict != DECIDE_NEXT);
        if (d.verdict == DECIDE_CONFIRMED)
            assert_true(f->phase == DECIDE_FOLLOWUP && f->rule == R_DONE && f->doc);
    }
}

static void amount_properties(const struct decide_post_facts *f, long *count)
{
    struct decide_post_facts g = *f;
    g.amount_differs = true;
    struct decide_post with = decide_post(&g), without = decide_post(f);
    bool pre = f->phase == DECIDE_BEFORE_COMMIT || (f->phase == DECIDE_COMMIT && f->fetch);
    (*count)++;
    if (with.verdict != without.verdict)
        assert_true(pre && without.verdict == DECIDE_NEXT && with.verdict == DECIDE_REJECTED);
    post_properties(&g, count);
    (*count)--;
}

static void test_decide_post_properties_every_combination(void **state)
{
    (void)state;
    long count = 0;
    each_post_facts(post_properties, &count);
    print_message("post decision: %ld combinations of facts checked\n", count);
    assert_true(count == 3L * 2048 * 3 * 8);
}

/* <compare-amount>: the ERP's own amount differs from the invoice's. Before the committing
 * step, on an answer that is otherwise as expected, a business exception; whatever else the
 * answer says comes first; at and after the commit it changes nothing (flow check keeps the
 * element off those steps; the decision ignores it there all the same). */
static void test_decide_post_amount_differs(void **state)
{
    (void)state;
    static const struct post_row rows[] = {
        /* clang-format off */
 {"pre: ERP total differs",                          PRE, 0, 0, 0, 0, ANS, 200, 0, 0, R_NONE,  0, 0, 1, 1, DECIDE_REJECTED,          0},
 {"pre: differs, and the ERP refused",               PRE, 0, 0, 0, 0, ANS, 500, 0, 0, R_REJ,   0, 0, 1, 0, DECIDE_REJECTED,          0},
 {"pre: differs, but the session is gone",           PRE, 0, 0, 0, 0, ANS, 401, 0, 0, R_NONE,  0, 1, 1, 0, DECIDE_RESTART,           1},
 {"pre: differs, but no answer",                     PRE, 0, 0, 0, 0, UNK,   0, 0, 0, R_NONE,  0, 0, 1, 0, DECIDE_NOT_SENT,          0},
 {"pre: differs, but a capture found nothing",       PRE, 0, 0, 0, 0, ANS, 200, 0, 0, R_NONE,  0, 0, 0, 1, DECIDE_NOT_SENT,          0},
 {"pre: differs, the amount unreadable too",         PRE, 0, 0, 0, 1, ANS, 200, 0, 0, R_NONE,  0, 0, 1, 1, DECIDE_SYSTEMIC,          0},
 {"commit: posted banner, a stray difference",       COM, 0, 1, 0, 0, ANS, 200, 0, 0, R_DONE,  1, 0, 1, 1, DECIDE_CONFIRMED,         0},
 {"commit: garbled page, a stray difference",        COM, 0, 1, 0, 0, ANS, 200, 0, 0, R_NONE,  0, 0, 1, 1, DECIDE_UNKNOWN,           0},
 {"followup: answered, a stray difference",          FUP, 0, 0, 0, 0, ANS, 200, 0, 0, R_NONE,  1, 0, 1, 1, DECIDE_NEXT,              0},
        /* clang-format on */
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct decide_post_facts f = facts_of(&rows[i]);
        f.amount_differs = true;
        struct decide_post d = decide_post(&f);
        if (d.verdict != rows[i].want || d.relogin != rows[i].want_relogin)
            fail_msg("%s: got %s relogin %d, want %s (%s)", rows[i].what,
                     decide_post_verdict_name(d.verdict), d.relogin,
                     decide_post_verdict_name(rows[i].want), d.why);
        if (d.verdict == DECIDE_REJECTED && rows[i].rule == R_NONE)
            assert_string_equal(d.why,
                                "the ERP's own amount differs from the invoice's: nothing was "
                                "booked");
    }
    /* Every combination: a difference changes a verdict only before the commit, and only to
     * a business exception where the step would have gone on. */
    long n = 0;
    each_post_facts(amount_properties, &n);
    assert_true(n == 3L * 2048 * 3 * 8);
}

struct lookup_row {
    const char *what;
    bool answered, screen_ok, aborted;
    size_t rows;
    bool empty, more, cut;
    size_t candidates, max_candidates;
    bool details_ok;
    size_t hits, unfinished;
    enum decide_lookup_verdict want;
};

#define L_F DECIDE_FOUND
#define L_U DECIDE_FOUND_UNFINISHED
#define L_N DECIDE_NOT_FOUND
#define L_X DECIDE_LOOKUP_FAILED

/* clang-format off */
static const struct lookup_row lookup_rows[] = {
 /* what                                          ans scr abrt rows empty more cut cand max det hits unf  verdict */
 {"one exact hit",                                 1, 1, 0,   1, 0, 0, 0, 0, 0, 1, 1, 0, L_F},
 {"exact hit, draft status",                       1, 1, 0,   1, 0, 0, 0, 0, 0, 1, 1, 1, L_U},
 {"two hits, one finished",                        1, 1, 0,   2, 0, 0, 0, 0, 0, 1, 2, 1, L_F},
 {"hit on page 1, more pages unread",              1, 1, 0,   9, 0, 1, 0, 0, 0, 1, 1, 0, L_F},
 {"clean no-results screen",                       1, 1, 0,   0, 1, 0, 0, 0, 0, 1, 0, 0, L_N},
 {"prefix matches, none exact",                    1, 1, 0,   3, 0, 0, 0, 0, 0, 1, 0, 0, L_N},
 {"no rows, no marker (unknown page)",             1, 1, 0,   0, 0, 0, 0, 0, 0, 1, 0, 0, L_X},
 {"no-results marker but garbled screen",          1, 0, 0,   0, 1, 0, 0, 0, 0, 1, 0, 0, L_X},
 {"cut at the screen's 200-row maximum",           1, 1, 0, 200, 0, 0, 1, 0, 0, 1, 0, 0, L_X},
 {"next page left unread",                         1, 1, 0,  50, 0, 1, 0, 0, 0, 1, 0, 0, L_X},
 {"a page not answered (timeout, 5xx, cut body)",  0, 1, 0,   0, 1, 0, 0, 0, 0, 1, 0, 0, L_X},
 {"match budget spent",                            1, 1, 1,   0, 1, 0, 0, 0, 0, 1, 0, 0, L_X},
 {"details read, none carries the key",            1, 1, 0,   2, 0, 0, 0, 2, 10, 1, 0, 0, L_N},
 {"a detail page failed",                          1, 1, 0,   2, 0, 0, 0, 2, 10, 0, 0, 0, L_X},
 {"more candidates than may be opened",            1, 1, 0,  12, 0, 0, 0, 12, 10, 1, 0, 0, L_X},
 {"hit through a detail page",                     1, 1, 0,   2, 0, 0, 0, 2, 10, 1, 1, 0, L_F},
};
/* clang-format on */

static void test_decide_lookup_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(lookup_rows) / sizeof(lookup_rows[0]); i++) {
        const struct lookup_row *r = &lookup_rows[i];
        struct decide_lookup_facts f = {
            .answered = r->answered,
            .screen_ok = r->screen_ok,
            .match_aborted = r->aborted,
            .rows = r->rows,
            .empty_marker = r->empty,
            .more = r->more,
            .cut = r->cut,
            .candidates = r->candidates,
            .max_candidates = r->max_candidates,
            .details_ok = r->details_ok,
            .hits = r->hits,
            .unfinished = r->unfinished,
        };
        struct decide_lookup d = decide_lookup(&f);
        if (d.verdict != r->want)
            fail_msg("%s: got %s, want %s (%s)", r->what, decide_lookup_verdict_name(d.verdict),
                     decide_lookup_verdict_name(r->want), d.why);
    }
}

/* An absence is confirmed only by a complete, genuine results screen: every combination. */
static void test_decide_lookup_absence_needs_proof(void **state)
{
    (void)state;
    long count = 0, absent = 0;
    for (int bits = 0; bits < (1 << 7); bits++)
        for (size_t rows = 0; rows < 3; rows++)
            for (size_t cand = 0; cand < 3; cand++)
                for (size_t maxc = 0; maxc < 3; maxc++)
                    for (size_t hits = 0; hits < 2; hits++) {
                        struct decide_lookup_facts f = {
                            .answered = bits & 1,
                            .screen_ok = bits & 2,
                            .match_aborted = bits & 4,
                            .empty_marker = bits & 8,
                            .more = bits & 16,
                            .cut = bits & 32,
                            .details_ok = bits & 64,
                            .rows = rows,
                            .candidates = cand,
                            .max_candidates = maxc,
                            .hits = hits,
                        };
                        struct decide_lookup d = decide_lookup(&f);
                        count++;
                        if (d.verdict != DECIDE_NOT_FOUND)
                            continue;
                        absent++;
                        assert_true(f.answered && f.screen_ok && !f.match_aborted && !f.more &&
                                    !f.cut && f.hits == 0);
                        assert_true(f.rows > 0 || f.empty_marker);
                        assert_true(f.candidates == 0 ||
                                    (f.details_ok && f.candidates <= f.max_candidates));
                    }
    print_message("lookup decision: %ld combinations, %ld confirmed absences checked\n", count,
                  absent);
    assert_true(absent > 0);
}

/* skip="when-known": a step is left unsubmitted only before the commit, with everything its
 * answer would tell known, every line row there, its fields filled and the learnt controls
 * set; every other combination submits it. */
static void test_decide_skip(void **state)
{
    (void)state;
    static const struct {
        const char *what;
        enum decide_phase phase;
        bool known, lines, filled, set, want;
    } rows[] = {
        {"vendor known, one line, filled", PRE, 1, 1, 1, 1, 1},
        {"first invoice of the vendor: learn it", PRE, 0, 1, 1, 1, 0},
        {"three lines, one row on the page", PRE, 1, 0, 1, 1, 0},
        {"an account the ERP does not offer", PRE, 1, 1, 0, 1, 0},
        {"the form lacks vendor_id", PRE, 1, 1, 1, 0, 0},
        {"the committing step", COM, 1, 1, 1, 1, 0},
        {"a follow-up step", FUP, 1, 1, 1, 1, 0},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct decide_skip_facts f = {rows[i].phase, rows[i].known, rows[i].lines, rows[i].filled,
                                      rows[i].set};
        struct decide_skip d = decide_skip(&f);
        if (d.skip != rows[i].want)
            fail_msg("%s: skip %d, want %d (%s)", rows[i].what, d.skip, rows[i].want, d.why);
        assert_non_null(d.why);
        assert_true(*d.why);
    }
    /* every combination: skipped only when all hold, before the commit */
    for (int bits = 0; bits < 16 * 3; bits++) {
        struct decide_skip_facts f = {(enum decide_phase)(bits / 16), bits & 1, bits & 2, bits & 4,
                                      bits & 8};
        bool all = f.phase == PRE && f.known && f.lines_present && f.filled && f.controls_set;
        assert_int_equal(decide_skip(&f).skip, all);
    }
}

static void test_decide_names(void **state)
{
    (void)state;
    assert_string_equal(decide_post_verdict_name(DECIDE_SAVED), "saved");
    assert_string_equal(decide_post_verdict_name(DECIDE_POST__COUNT), "invalid");
    assert_string_equal(decide_lookup_verdict_name(DECIDE_NOT_FOUND), "not-found");
    assert_string_equal(decide_lookup_verdict_name((enum decide_lookup_verdict) - 1), "invalid");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decide_post_table),
        cmocka_unit_test(test_decide_post_missing_table),
        cmocka_unit_test(test_decide_post_properties_every_combination),
        cmocka_unit_test(test_decide_post_amount_differs),
        cmocka_unit_test(test_decide_lookup_table),
        cmocka_unit_test(test_decide_lookup_absence_needs_proof),
        cmocka_unit_test(test_decide_skip),
        cmocka_unit_test(test_decide_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
