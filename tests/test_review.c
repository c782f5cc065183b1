/*
 * test_review.c - the review module: the resolve policy as a table (every state against every
 * decision), the checks on names, texts and document numbers, what a lookup answer says about
 * "posted as DOC" (a table of canned answers), the reason in words, the one item JSON shape,
 * and review_decide against the in-process simulated ERP: a verified document is recorded
 * with its audit event, a wrong one is refused with the ERP's evidence kept, a decision on a
 * version the item has left is refused (the optimistic check), an ERP that does not answer
 * refuses only the posted-as-DOC decision, and the queue's order and filters.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/erp.h"
#include "apbot/flow.h"
#include "apbot/invoice.h"
#include "apbot/machine.h"
#include "apbot/review.h"
#include "apbot/store.h"
#include "helpers/e2e.h"
#include "helpers/sim_client.h"

/* ---- the policy ------------------------------------------------------------------------- */

#define Y 1 /* allowed */
#define X 0 /* refused */

/* clang-format off */
static const int policy[MACHINE_STATE__COUNT][REVIEW_ACTION__COUNT] = {
    /*                               posted requeue reject */
    [MACHINE_NEW] =                 {X,     X,      X},
    [MACHINE_CHECKING] =            {X,     X,      X},
    [MACHINE_POSTING] =             {X,     X,      X},
    [MACHINE_RECONCILING] =         {X,     X,      X},
    [MACHINE_COMPLETED] =           {X,     X,      X},
    [MACHINE_BUSINESS_EXCEPTION] =  {Y,     Y,      X},
    [MACHINE_MANUAL_REVIEW] =       {Y,     Y,      Y},
};
/* clang-format on */

static void test_review_policy_table(void **state)
{
    (void)state;
    for (int s = 0; s < MACHINE_STATE__COUNT; s++)
        for (int a = 0; a < REVIEW_ACTION__COUNT; a++) {
            char why[256] = "unchanged";
            int rc = review_allowed((enum machine_state)s, (enum review_action)a, "AP-1", why,
                                    sizeof(why));
            if ((rc == APBOT_OK) != (policy[s][a] == Y))
                fail_msg("%s + %s: rc %d (%s)", machine_state_name(s),
                         review_action_name((enum review_action)a), rc, why);
            if (rc != APBOT_OK && why[0] == '\0')
                fail_msg("%s + %s: refused without a reason", machine_state_name(s),
                         review_action_name((enum review_action)a));
        }
    /* the sentences the CLI prints */
    char why[256];
    assert_int_equal(review_allowed(MACHINE_COMPLETED, REVIEW_REQUEUE, "AP-7", why, sizeof(why)),
                     APBOT_E_STATE);
    assert_non_null(strstr(why, "completed (document AP-7)"));
    assert_int_equal(review_allowed(MACHINE_NEW, REVIEW_REJECT, NULL, why, sizeof(why)),
                     APBOT_E_STATE);
    assert_non_null(strstr(why, "is new: the bot is still working on it"));
    assert_int_equal(review_allowed(MACHINE_STATE_INVALID, REVIEW_POSTED, NULL, why, sizeof(why)),
                     APBOT_E_STATE);
    assert_int_equal(
        review_allowed(MACHINE_MANUAL_REVIEW, REVIEW_ACTION__COUNT, NULL, why, sizeof(why)),
        APBOT_E_STATE);
    /* names round-trip */
    for (int a = 0; a < REVIEW_ACTION__COUNT; a++)
        assert_int_equal(review_action_from_name(review_action_name((enum review_action)a)), a);
    assert_int_equal(review_action_from_name("approve"), REVIEW_ACTION__COUNT);
}

static void test_review_input_checks(void **state)
{
    char long_text[REVIEW_TEXT_MAX + 2];
    (void)state;

    assert_true(review_name_ok("alice"));
    assert_true(review_name_ok("a.b_c-d@example.com"));
    assert_false(review_name_ok(""));
    assert_false(review_name_ok(NULL));
    assert_false(review_name_ok("bad name; rm"));
    assert_false(review_name_ok("<script>"));
    assert_false(review_name_ok("Müller")); /* audit trail names stay ASCII */

    assert_true(review_text_ok("clerk booked it by hand, ticket 42"));
    assert_true(review_text_ok("Müller & Söhne <b>"));
    assert_false(review_text_ok("   "));
    assert_false(review_text_ok(""));
    assert_false(review_text_ok("line\nbreak"));
    assert_false(review_text_ok("esc \x1b[31m"));
    assert_false(review_text_ok("bad utf-8 \xff"));
    memset(long_text, 'x', sizeof(long_text) - 1);
    long_text[sizeof(long_text) - 1] = '\0';
    assert_false(review_text_ok(long_text));
    long_text[REVIEW_TEXT_MAX] = '\0';
    assert_true(review_text_ok(long_text));

    assert_true(review_doc_ok("AP-2026-000123"));
    assert_false(review_doc_ok("AP 1"));
    assert_false(review_doc_ok(""));
    assert_false(review_doc_ok("AP-\x01"));
    assert_false(review_doc_ok("AP-€"));
}

static void test_review_reason_words(void **state)
{
    char buf[64];
    (void)state;
    assert_string_equal(
        review_reason_words("the ERP holds this key with a different vendor or amount; last "
                            "outcome: found-conflict: ERP document AP-1 has amount 9",
                            buf, sizeof(buf)),
        "the ERP holds this key with a different vendor or amount");
    assert_string_equal(
        review_reason_words("E104: Posting period 11/2026 is closed.", buf, sizeof(buf)),
        "E104: Posting period 11/2026 is closed.");
    assert_string_equal(review_reason_words(NULL, buf, sizeof(buf)), "");
    assert_string_equal(review_reason_words("abcdef", buf, 4), "abc");
}

/* ---- what a lookup answer says ---------------------------------------------------------- */

struct vrow {
    const char *what;
    enum erp_answer answer;
    int n;               /* hits */
    const char *docs[2]; /* their documents */
    int64_t amounts[2];  /* their amounts (EUR cents) */
    const char *claimed; /* the document the person claims */
    enum review_verify want;
    const char *sentence; /* a part of the sentence */
};

/* clang-format off */
static const struct vrow vtable[] = {
    {"held as claimed", ERP_FOUND, 1, {"AP-1"}, {11900}, "AP-1", REVIEW_VERIFIED, "verified in the ERP: key"},
    {"held as another document", ERP_FOUND, 1, {"AP-2"}, {11900}, "AP-1", REVIEW_CONFLICT, "as document AP-2, not AP-1"},
    {"held with another amount", ERP_FOUND, 1, {"AP-1"}, {99900}, "AP-1", REVIEW_CONFLICT, "999.00 EUR, but the invoice is 119.00 EUR"},
    {"held twice", ERP_FOUND, 2, {"AP-1", "AP-3"}, {11900, 11900}, "AP-1", REVIEW_CONFLICT, "2 times (a duplicate)"},
    {"not held", ERP_NOT_FOUND, 0, {NULL}, {0}, "AP-1", REVIEW_ABSENT, "holds no document for key"},
    {"lookup failed", ERP_FAILED, 0, {NULL}, {0}, "AP-1", REVIEW_UNREADABLE, "the ERP lookup failed"},
    {"a draft, not posted", ERP_FOUND_UNFINISHED, 1, {"AP-1"}, {11900}, "AP-1", REVIEW_CONFLICT, "saved but not finished"},
};
/* clang-format on */

static void test_review_verify_classify(void **state)
{
    struct store_item it;
    (void)state;

    memset(&it, 0, sizeof(it));
    snprintf(it.key, sizeof(it.key), "AP1-TESTKEY");
    it.vendor_id = "100001";
    snprintf(it.currency, sizeof(it.currency), "EUR");
    snprintf(it.doc_type, sizeof(it.doc_type), "invoice");
    it.exponent = 2;
    it.total = 11900;
    for (size_t i = 0; i < sizeof(vtable) / sizeof(vtable[0]); i++) {
        const struct vrow *v = &vtable[i];
        struct erp_lookup_result res;
        struct erp_row rows[2];
        char what[512];
        enum review_verify got;

        memset(&res, 0, sizeof(res));
        memset(rows, 0, sizeof(rows));
        res.answer = v->answer;
        snprintf(res.detail, sizeof(res.detail), "HTTP 503");
        for (int k = 0; k < v->n; k++) {
            rows[k].doc = (char *)v->docs[k];
            rows[k].vendor = (char *)"100001";
            rows[k].currency = (char *)"EUR";
            rows[k].amount_text = (char *)"x";
            rows[k].has_amount = true;
            rows[k].amount = v->amounts[k];
            rows[k].exponent = 2;
        }
        res.hits.rows = rows;
        res.hits.n = (size_t)v->n;
        got = review_verify_classify(&it, v->claimed, &res, what, sizeof(what));
        if (got != v->want || !strstr(what, v->sentence))
            fail_msg("%s: %s '%s'", v->what, review_verify_name(got), what);
    }
}

/* ---- against the simulated ERP ---------------------------------------------------------- */

static const char fast[] = "slots = 4\nservice_ms.login = 0\nservice_ms.form = 0\n"
                           "service_ms.check = 0\nservice_ms.post = 0\nservice_ms.search = 0\n"
                           "service_ms.journal = 0\nindex_lag_ms = 0\n";

struct fx {
    struct e2e e;
    struct store *st;
    struct flow *flow;
};

static void fx_start(struct fx *x)
{
    char err[4096];
    memset(x, 0, sizeof(*x));
    e2e_start(&x->e, NULL, fast, 5);
    assert_int_equal(store_open(x->e.db, &x->st, err, sizeof(err)), APBOT_OK);
    if (flow_load(x->e.flow, &x->flow, err, sizeof(err)) != APBOT_OK)
        fail_msg("flow_load: %s", err);
}

static void fx_stop(struct fx *x)
{
    flow_free(x->flow);
    store_close(x->st);
    e2e_stop(&x->e);
}

/* Enqueues "<number>" (vendor 100001, EUR cents) and drives it to manual review (lookup
 * conflict) or a business exception. Returns its id and key. */
static int64_t add(struct fx *x, const char *number, int64_t amount, bool exception,
                   char key[INVOICE_KEY_LEN + 1])
{
    struct e2e_invoice in = {.vendor = "100001",
                             .number = number,
                             .date = "2026-11-03",
                             .currency = "EUR",
                             .amount = amount,
                             .gl = "6000"};
    struct store_item it;
    struct machine_policy pol = machine_policy_default();
    struct machine_step step;
    struct store_change ch;
    char err[APBOT_ERR_LEN];
    int64_t id;

    e2e_add(&x->e, &in, key);
    {
        struct machine_step claimed;
        struct machine_counters fresh = {0};
        assert_int_equal(machine_next(MACHINE_NEW, MACHINE_EV_CLAIMED, &fresh, &pol, &claimed),
                         APBOT_OK);
        assert_int_equal(store_claim(x->st, "test", NULL, 60000, &claimed, &it, err, sizeof(err)),
                         APBOT_OK);
        it.counters.settled = true; /* these tests have no settle delay */
    }
    id = it.id;
    if (exception) {
        assert_int_equal(
            machine_next(MACHINE_CHECKING, MACHINE_EV_NOT_FOUND, &it.counters, &pol, &step),
            APBOT_OK);
        memset(&ch, 0, sizeof(ch));
        ch.from = MACHINE_CHECKING;
        ch.event = MACHINE_EV_NOT_FOUND;
        ch.step = &step;
        ch.actor = "runner:test";
        ch.keep_lease = true;
        assert_int_equal(store_apply(x->st, id, "test", &ch, NULL, NULL, err, sizeof(err)),
                         APBOT_OK);
        it.counters = step.counters;
        assert_int_equal(
            machine_next(MACHINE_POSTING, MACHINE_EV_REJECTED, &it.counters, &pol, &step),
            APBOT_OK);
        ch.from = MACHINE_POSTING;
        ch.event = MACHINE_EV_REJECTED;
        ch.reason = "E104: Posting period 11/2026 is closed.";
    } else {
        assert_int_equal(
            machine_next(MACHINE_CHECKING, MACHINE_EV_FOUND_CONFLICT, &it.counters, &pol, &step),
            APBOT_OK);
        memset(&ch, 0, sizeof(ch));
        ch.from = MACHINE_CHECKING;
        ch.event = MACHINE_EV_FOUND_CONFLICT;
        ch.reason = "the ERP holds this key with a different vendor or amount; last outcome: x";
    }
    ch.step = &step;
    ch.actor = "runner:test";
    ch.keep_lease = false;
    assert_int_equal(store_apply(x->st, id, "test", &ch, NULL, NULL, err, sizeof(err)), APBOT_OK);
    store_item_done(&it);
    return id;
}

static enum machine_state state_of(struct fx *x, int64_t id)
{
    struct store_item it;
    char err[APBOT_ERR_LEN];
    enum machine_state s;
    assert_int_equal(store_get(x->st, id, &it, err, sizeof(err)), APBOT_OK);
    s = it.state;
    store_item_done(&it);
    return s;
}

static int n_evidence(struct fx *x, int64_t id, const char *step_prefix)
{
    struct review_item r;
    char err[APBOT_ERR_LEN];
    int n = 0;
    assert_int_equal(review_item_load(x->st, id, &r, err, sizeof(err)), APBOT_OK);
    for (size_t i = 0; i < r.n_evidence; i++)
        if (r.evidence[i].step &&
            strncmp(r.evidence[i].step, step_prefix, strlen(step_prefix)) == 0)
            n++;
    review_item_done(&r);
    return n;
}

static void test_review_decide_posted(void **state)
{
    struct fx x;
    char key[INVOICE_KEY_LEN + 1], doc[32], err[APBOT_ERR_LEN];
    struct review_decision d;
    struct review_result res;
    struct review_item r;
    int64_t id, v0;
    (void)state;

    fx_start(&x);
    id = add(&x, "RV-1", 11900, false, key);
    assert_int_equal(
        simc_book(x.e.port, "100001", "RV-1", "2026-11-03", "EUR", "119.00", key, doc, sizeof(doc)),
        0);
    assert_int_equal(review_version(x.st, id, &v0, err, sizeof(err)), APBOT_OK);
    assert_true(v0 > 0);

    /* a wrong document: refused, the ERP's answer kept as evidence */
    memset(&d, 0, sizeof(d));
    d.id = id;
    d.action = REVIEW_POSTED;
    d.doc = "AP-2026-999999";
    d.operator_name = "alice";
    d.display_name = "Alice Example";
    d.auth = REVIEW_AUTH_PASSWORD;
    d.note = "clerk says so";
    d.require_note = true;
    d.expect_version = v0;
    assert_int_equal(review_decide(x.st, x.flow, x.e.url, &d, &res), APBOT_OK);
    assert_int_equal(res.verdict, REVIEW_REFUSED);
    assert_int_equal(res.verify.verdict, REVIEW_CONFLICT);
    assert_non_null(strstr(res.message, "not AP-2026-999999"));
    assert_true(res.verify.n_exchanges >= 1);
    assert_null(strstr(res.verify.exchanges[0].url, "acme-demo"));
    review_result_done(&res);
    assert_int_equal(state_of(&x, id), MACHINE_MANUAL_REVIEW);
    assert_true(n_evidence(&x, id, "verify:") >= 1);

    /* a note is required where the caller says so */
    d.doc = doc;
    d.note = NULL;
    assert_int_equal(review_decide(x.st, x.flow, x.e.url, &d, &res), APBOT_OK);
    assert_int_equal(res.verdict, REVIEW_INVALID);
    review_result_done(&res);

    /* the right document: recorded, audited, completed */
    d.note = "ticket 42";
    assert_int_equal(review_decide(x.st, x.flow, x.e.url, &d, &res), APBOT_OK);
    if (res.verdict != REVIEW_DONE)
        fail_msg("posted: %s", res.message);
    assert_int_equal(res.from, MACHINE_MANUAL_REVIEW);
    assert_int_equal(res.to, MACHINE_COMPLETED);
    assert_true(res.version > v0);
    review_result_done(&res);
    assert_int_equal(review_item_load(x.st, id, &r, err, sizeof(err)), APBOT_OK);
    assert_int_equal(r.item.state, MACHINE_COMPLETED);
    assert_string_equal(r.item.erp_doc, doc);
    assert_string_equal(r.events[r.n_events - 1].actor, "operator:alice");
    assert_non_null(strstr(r.events[r.n_events - 1].detail, "verified in the ERP"));
    assert_non_null(strstr(r.events[r.n_events - 1].detail,
                           "note: ticket 42; by alice (Alice Example), signed in with their own "
                           "password"));
    review_item_done(&r);

    /* a display name that cannot be recorded is a malformed decision */
    d.display_name = "line\nbreak";
    assert_int_equal(review_decide(x.st, x.flow, x.e.url, &d, &res), APBOT_OK);
    assert_int_equal(res.verdict, REVIEW_INVALID);
    review_result_done(&res);
    d.display_name = "Alice Example";

    /* the same decision again, on the version it was taken on: refused as stale */
    assert_int_equal(review_decide(x.st, x.flow, x.e.url, &d, &res), APBOT_OK);
    assert_int_equal(res.verdict, REVIEW_REFUSED);
    assert_true(res.stale);
    review_result_done(&res);

    /* one document, one item: another item cannot be recorded as the same document, even
     * forced (the ERP does not hold its key, the reason says why it is forced) */
    {
        char key2[INVOICE_KEY_LEN + 1];
        int64_t other = add(&x, "RV-9", 500, false, key2);
        memset(&d, 0, sizeof(d));
        d.id = other;
        d.action = REVIEW_POSTED;
        d.doc = doc;
        d.force = "booked on paper";
        d.operator_name = "alice";
        assert_int_equal(review_decide(x.st, x.flow, x.e.url, &d, &res), APBOT_OK);
        assert_int_equal(res.verdict, REVIEW_REFUSED);
        assert_int_equal(res.verify.verdict, REVIEW_ABSENT);
        assert_non_null(strstr(res.message, "already held by item #"));
        review_result_done(&res);
        assert_int_equal(state_of(&x, other), MACHINE_MANUAL_REVIEW);
    }
    fx_stop(&x);
}

static void test_review_decide_stale_and_policy(void **state)
{
    struct fx x;
    char key[INVOICE_KEY_LEN + 1], err[APBOT_ERR_LEN];
    struct review_decision d;
    struct review_result res;
    int64_t mr, be, v;
    (void)state;

    fx_start(&x);
    mr = add(&x, "RV-2", 5000, false, key);
    be = add(&x, "RV-3", 6000, true, key);

    /* a business exception is not rejected again */
    memset(&d, 0, sizeof(d));
    d.id = be;
    d.action = REVIEW_REJECT;
    d.reason = "again";
    d.operator_name = "bob";
    assert_int_equal(review_decide(x.st, x.flow, x.e.url, &d, &res), APBOT_OK);
    assert_int_equal(res.verdict, REVIEW_REFUSED);
    review_result_done(&res);

    /* requeue it, then a decision taken on what the page showed before is refused */
    assert_int_equal(review_version(x.st, be, &v, err, sizeof(err)), APBOT_OK);
    d.action = REVIEW_REQUEUE;
    d.reason = NULL;
    assert_int_equal(review_decide(x.st, x.flow, x.e.url, &d, &res), APBOT_OK);
    assert_int_equal(res.verdict, REVIEW_DONE);
    assert_non_null(strstr(res.detail, "requeued: looked up again before any post (was: E104"));
    review_result_done(&res);
    assert_int_equal(state_of(&x, be), MACHINE_NEW);
    d.expect_version = v; /* the old page */
    assert_int_equal(review_decide(x.st, x.flow, x.e.url, &d, &res), APBOT_OK);
    assert_int_equal(res.verdict, REVIEW_REFUSED);
    assert_true(res.stale);
    assert_non_null(strstr(res.message, "changed since you saw it"));
    review_result_done(&res);

    /* an unknown item */
    d.id = 9999;
    d.expect_version = 0;
    assert_int_equal(review_decide(x.st, x.flow, x.e.url, &d, &res), APBOT_OK);
    assert_int_equal(res.verdict, REVIEW_REFUSED);
    assert_true(res.not_found);
    review_result_done(&res);

    /* a bad operator name is a malformed decision, whatever the item */
    d.id = mr;
    d.operator_name = "x y";
    assert_int_equal(review_decide(x.st, x.flow, x.e.url, &d, &res), APBOT_OK);
    assert_int_equal(res.verdict, REVIEW_INVALID);
    review_result_done(&res);

    /* the ERP down: posted cannot be verified, requeue and reject still work */
    d.operator_name = "carol";
    d.action = REVIEW_POSTED;
    d.doc = "AP-2026-000001";
    assert_int_equal(review_decide(x.st, x.flow, "http://127.0.0.1:9", &d, &res), APBOT_OK);
    assert_int_equal(res.verdict, REVIEW_UNVERIFIABLE);
    assert_non_null(strstr(res.message, "needs the ERP"));
    review_result_done(&res);
    assert_int_equal(state_of(&x, mr), MACHINE_MANUAL_REVIEW);
    d.action = REVIEW_REJECT;
    d.doc = NULL;
    d.reason = "vendor <b>unknown</b>";
    assert_int_equal(review_decide(x.st, x.flow, "http://127.0.0.1:9", &d, &res), APBOT_OK);
    assert_int_equal(res.verdict, REVIEW_DONE);
    review_result_done(&res);
    assert_int_equal(state_of(&x, mr), MACHINE_BUSINESS_EXCEPTION);
    fx_stop(&x);
}

struct who_row {
    const char *name, *display, *os_user;
    enum review_auth auth;
    const char *want;
};

/* clang-format off */
static const struct who_row who_table[] = {
    {"alice", "Alice Example", NULL, REVIEW_AUTH_PASSWORD,
     "by alice (Alice Example), signed in with their own password"},
    {"alice", NULL, NULL, REVIEW_AUTH_PASSWORD, "by alice, signed in with their own password"},
    {"alice", "", NULL, REVIEW_AUTH_PASSWORD, "by alice, signed in with their own password"},
    {"bob", "Bob B.", NULL, REVIEW_AUTH_PROXY,
     "by bob (Bob B.), identified by the company's login proxy"},
    {"erin", "ignored", NULL, REVIEW_AUTH_SHARED,
     "by erin, signed in with the shared review password (the name is as typed at sign-in)"},
    {"carol", NULL, "root (uid 0)", REVIEW_AUTH_CLI,
     "by carol on the command line, OS user root (uid 0)"},
    {"carol", NULL, NULL, REVIEW_AUTH_CLI, "by carol on the command line, OS user unknown"},
    {"carol", NULL, NULL, REVIEW_AUTH__COUNT, "by carol, authenticated in no known way"},
};
/* clang-format on */

static void test_review_who(void **state)
{
    char buf[512];
    (void)state;
    for (size_t i = 0; i < sizeof(who_table) / sizeof(who_table[0]); i++) {
        const struct who_row *r = &who_table[i];
        struct review_decision d = {.operator_name = r->name,
                                    .display_name = r->display,
                                    .os_user = r->os_user,
                                    .auth = r->auth};
        review_who(&d, buf, sizeof(buf));
        if (strcmp(buf, r->want) != 0)
            fail_msg("row %zu: '%s', want '%s'", i, buf, r->want);
    }
    assert_string_equal(review_auth_name(REVIEW_AUTH_PROXY), "proxy");
    assert_string_equal(review_auth_name(REVIEW_AUTH__COUNT), "invalid");
}

static void test_review_queue_and_json(void **state)
{
    struct fx x;
    char key[INVOICE_KEY_LEN + 1], err[APBOT_ERR_LEN];
    struct review_queue q;
    struct review_filter f = {.manual_review = true};
    int64_t a, b, c;
    json_t *o;
    char *s;
    (void)state;

    fx_start(&x);
    a = add(&x, "Q-1", 100, false, key);
    b = add(&x, "Q-2", 200, true, key);
    c = add(&x, "Q-3", 300, false, key);

    assert_int_equal(review_queue_load(x.st, &f, &q, err, sizeof(err)), APBOT_OK);
    assert_int_equal(q.n, 2);
    assert_int_equal(q.v[0].item.id, a); /* oldest first */
    assert_int_equal(q.v[1].item.id, c);
    assert_true(q.v[0].version > 0);
    review_queue_done(&q);

    f.exceptions = true;
    assert_int_equal(review_queue_load(x.st, &f, &q, err, sizeof(err)), APBOT_OK);
    assert_int_equal(q.n, 3);
    assert_int_equal(q.v[1].item.id, b);
    review_queue_done(&q);

    f.reason = "posting PERIOD"; /* case-insensitive */
    assert_int_equal(review_queue_load(x.st, &f, &q, err, sizeof(err)), APBOT_OK);
    assert_int_equal(q.n, 1);
    assert_int_equal(q.v[0].item.id, b);

    /* the one item shape: names and order */
    o = review_item_json(&q.v[0].item, store_now_ms());
    s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_non_null(strstr(s, "{\"id\":"));
    assert_non_null(strstr(s, "\"currency\":\"EUR\",\"total\":\"2.00\",\"erp_doc\":null,"
                              "\"reason\":\"E104: Posting period 11/2026 is closed.\""));
    assert_non_null(strstr(s, "\"total_minor\":200,\"exponent\":2"));
    assert_non_null(strstr(s, "\"created_at\":\"20"));
    assert_non_null(strstr(s, "\"age_s\":"));
    free(s);
    json_decref(o);
    review_queue_done(&q);

    f.reason = NULL;
    f.vendor = "nobody";
    assert_int_equal(review_queue_load(x.st, &f, &q, err, sizeof(err)), APBOT_OK);
    assert_int_equal(q.n, 0);
    review_queue_done(&q);
    fx_stop(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_review_policy_table),
        cmocka_unit_test(test_review_input_checks),
        cmocka_unit_test(test_review_reason_words),
        cmocka_unit_test(test_review_verify_classify),
        cmocka_unit_test(test_review_decide_posted),
        cmocka_unit_test(test_review_decide_stale_and_policy),
        cmocka_unit_test(test_review_queue_and_json),
        cmocka_unit_test(test_review_who),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
