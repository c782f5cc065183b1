/*
 * test_report.c - the daily reconciliation against the in-process simulated ERP. The queue
 * state is built directly (enqueue, claim, apply what machine_next says) and the ERP state
 * by a clerk's hand (simc_book / simc_delete through the admin endpoints), so each drift
 * category is produced on purpose: duplicate, missing, orphan, amount mismatch, document
 * mismatch; then a clean day, the balance buckets, the manual-review hint with its resolve
 * command, a listing longer than one page, every output format, and the balance after a
 * run of the real runner on the `chaos` scenario.
 */
#include <setjmp.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <libxml/HTMLparser.h>
#include <libxml/xpath.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/erp.h"
#include "apbot/flow.h"
#include "apbot/invoice.h"
#include "apbot/machine.h"
#include "apbot/money.h"
#include "apbot/report.h"
#include "apbot/store.h"
#include "helpers/e2e.h"
#include "helpers/sim_client.h"

/* Near-zero service times and no index lag: these tests are about the join, not the ERP. */
static const char fast[] = "slots = 4\n"
                           "service_ms.login = 0\n"
                           "service_ms.form = 0\n"
                           "service_ms.check = 0\n"
                           "service_ms.post = 0\n"
                           "service_ms.search = 0\n"
                           "service_ms.journal = 0\n"
                           "index_lag_ms = 0\n";

struct fx {
    struct e2e e;
    struct store *st;
    struct flow *flow;
    struct erp_session *erp;
    char today[11];
    int n;
};

static void fx_start(struct fx *x, const char *scenario, const char *text)
{
    char err[4096];

    memset(x, 0, sizeof(*x));
    e2e_start(&x->e, scenario, text, 7);
    assert_int_equal(store_open(x->e.db, &x->st, err, sizeof(err)), APBOT_OK);
    if (flow_load(x->e.flow, &x->flow, err, sizeof(err)) != APBOT_OK)
        fail_msg("flow_load: %s", err);
    if (erp_open(x->flow, x->e.url, NULL, &x->erp, err, sizeof(err)) != APBOT_OK)
        fail_msg("erp_open: %s", err);
    erp_set_retries(x->erp, 3);
    report_local_date(store_now_ms(), x->today);
}

static void fx_stop(struct fx *x)
{
    erp_close(x->erp);
    flow_free(x->flow);
    store_close(x->st);
    e2e_stop(&x->e);
}

/* Applies one machine event to item id (leased by "test"). */
static void apply(struct fx *x, int64_t id, enum machine_state from, enum machine_event ev,
                  const char *doc, const char *reason, bool keep_lease)
{
    struct store_item it;
    struct machine_step step;
    struct machine_policy pol = machine_policy_default();
    struct store_change ch;
    char err[APBOT_ERR_LEN];

    assert_int_equal(store_get(x->st, id, &it, err, sizeof(err)), APBOT_OK);
    it.counters.settled = true; /* the report test has no settle delay */
    assert_int_equal(machine_next(from, ev, &it.counters, &pol, &step), APBOT_OK);
    memset(&ch, 0, sizeof(ch));
    ch.from = from;
    ch.event = ev;
    ch.step = &step;
    ch.erp_doc = doc;
    ch.reason = reason;
    ch.detail = "test";
    ch.actor = "runner:test";
    ch.keep_lease = keep_lease;
    if (store_apply(x->st, id, "test", &ch, NULL, NULL, err, sizeof(err)) != APBOT_OK)
        fail_msg("store_apply: %s", err);
    store_item_done(&it);
}

enum target { T_PENDING, T_COMPLETED, T_REVIEW, T_EXCEPTION };

/* Enqueues invoice "<number>" of vendor 100001 for amount (cents, EUR), drives it to target
 * (completed with doc), returns its id and key. */
static int64_t add(struct fx *x, const char *number, int64_t amount, enum target t, const char *doc,
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
    char err[APBOT_ERR_LEN];
    int64_t id;

    e2e_add(&x->e, &in, key);
    assert_int_equal(store_get_by_key(x->st, key, &it, err, sizeof(err)), APBOT_OK);
    id = it.id;
    store_item_done(&it);
    if (t == T_PENDING)
        return id;
    struct machine_step claimed;
    struct machine_counters fresh = {0};
    assert_int_equal(machine_next(MACHINE_NEW, MACHINE_EV_CLAIMED, &fresh, &pol, &claimed),
                     APBOT_OK);
    assert_int_equal(store_claim(x->st, "test", NULL, 60000, &claimed, &it, err, sizeof(err)),
                     APBOT_OK);
    assert_int_equal(it.id, id);
    store_item_done(&it);
    switch (t) {
    case T_COMPLETED:
        apply(x, id, MACHINE_CHECKING, MACHINE_EV_FOUND, doc, NULL, false);
        break;
    case T_REVIEW:
        apply(x, id, MACHINE_CHECKING, MACHINE_EV_FOUND_CONFLICT, NULL,
              "the ERP holds this key with a different amount", false);
        break;
    case T_EXCEPTION:
        apply(x, id, MACHINE_CHECKING, MACHINE_EV_NOT_FOUND, NULL, NULL, true);
        apply(x, id, MACHINE_POSTING, MACHINE_EV_REJECTED, NULL,
              "E104: Posting period 11/2026 is closed.", false);
        break;
    case T_PENDING:
        break;
    }
    return id;
}

/* The document as the ERP's screens show it: the single-page ERP shows a document by its id,
 * the ledger's sequence number. */
static void shown_doc(const struct fx *x, char doc[32])
{
    if (x->e.ui != SIM_UI_SPA)
        return;
    const char *seq = strrchr(doc, '-');
    assert_non_null(seq);
    while (*++seq == '0')
        ;
    memmove(doc, seq, strlen(seq) + 1);
}

/* A clerk books key by hand; returns the document number in doc. */
static void book_dated(struct fx *x, const char *key, const char *amount, const char *date,
                       char doc[32])
{
    char number[32];
    snprintf(number, sizeof(number), "HAND-%d", ++x->n);
    assert_int_equal(simc_book(x->e.port, "100001", number, date, "EUR", amount, key, doc, 32), 0);
    shown_doc(x, doc);
}

static void book(struct fx *x, const char *key, const char *amount, char doc[32])
{
    book_dated(x, key, amount, "2026-11-03", doc);
}

/* The report as a run's settle delay has it: the ERP read once the last completion is
 * settle_ms old (0: at once, for the tests that set the ERP's records up themselves). */
static struct report *build_settled(struct fx *x, int64_t settle_ms)
{
    struct report_options opt = {.date = x->today, .max_lookups = 0, .settle_ms = settle_ms};
    struct report *r = NULL;
    char err[APBOT_ERR_LEN];
    if (report_build(x->st, x->erp, x->flow, &opt, &r, err, sizeof(err)) != APBOT_OK)
        fail_msg("report_build: %s", err);
    return r;
}

static struct report *build(struct fx *x)
{
    return build_settled(x, 0);
}

static const struct report_finding *find(const struct report *r, enum report_kind k,
                                         int64_t item_id)
{
    size_t n;
    const struct report_finding *f = report_findings(r, &n);
    for (size_t i = 0; i < n; i++)
        if (f[i].kind == k && f[i].item_id == item_id)
            return &f[i];
    return NULL;
}

static int64_t count(const struct report *r, enum report_kind k)
{
    return report_summary(r)->counts[k];
}

/* ---- tests ------------------------------------------------------------------------------ */

static int64_t add_completed_booked(struct fx *x, const char *number, int64_t amount,
                                    const char *erp_amount, const char *doc_override,
                                    char key[INVOICE_KEY_LEN + 1], char doc[32]);

static void test_report_clean_day_and_balance(void **state)
{
    struct fx x;
    char key[4][INVOICE_KEY_LEN + 1], doc[32];
    struct report *r;
    const struct report_summary *s;
    int64_t be, mr;
    (void)state;

    fx_start(&x, NULL, fast);
    book(&x, "placeholder-not-ours", "10.00", doc); /* a record without an apbot key */
    be = add(&x, "INV-C2", 5000, T_EXCEPTION, NULL, key[1]);
    mr = add(&x, "INV-C3", 7000, T_REVIEW, NULL, key[2]);
    add_completed_booked(&x, "INV-C4", 9999, "99.99", NULL, key[3], doc);
    add(&x, "INV-C1", 123456, T_PENDING, NULL, key[0]); /* last: claims take the oldest */

    r = build(&x);
    s = report_summary(r);
    assert_int_equal(report_status(r), REPORT_CLEAN);
    assert_true(s->balanced);
    assert_int_equal(s->drift, 0);
    assert_int_equal(s->matched, 1);
    assert_int_equal(s->erp_rows, 2);
    assert_int_equal(s->erp_apbot_rows, 1);
    assert_int_equal(s->day.received, 4);
    assert_int_equal(s->day.completed, 1);
    assert_int_equal(s->day.exceptions, 1);
    assert_int_equal(s->day.review, 1);
    assert_int_equal(s->day.pending, 1);
    assert_int_equal(s->day.unaccounted, 0);
    assert_int_equal(s->total.received, 4);
    assert_int_equal(count(r, REPORT_PENDING), 1);
    assert_int_equal(count(r, REPORT_EXCEPTION), 1);
    assert_non_null(find(r, REPORT_EXCEPTION, be));
    assert_string_equal(find(r, REPORT_EXCEPTION, be)->reason,
                        "E104: Posting period 11/2026 is closed.");
    /* the ERP does not hold the review item: an open hint suggesting a requeue */
    assert_non_null(find(r, REPORT_REVIEW_OPEN, mr));
    assert_non_null(strstr(find(r, REPORT_REVIEW_OPEN, mr)->command, "--requeue"));
    report_free(r);
    fx_stop(&x);
}

/* Completes item `number` with the document a clerk booked for its key with `erp_amount`. */
static int64_t add_completed_booked(struct fx *x, const char *number, int64_t amount,
                                    const char *erp_amount, const char *doc_override,
                                    char key[INVOICE_KEY_LEN + 1], char doc[32])
{
    struct store_item it;
    struct machine_policy pol = machine_policy_default();
    char err[APBOT_ERR_LEN];
    int64_t id = add(x, number, amount, T_PENDING, NULL, key);

    book(x, key, erp_amount, doc);
    struct machine_step claimed;
    struct machine_counters fresh = {0};
    assert_int_equal(machine_next(MACHINE_NEW, MACHINE_EV_CLAIMED, &fresh, &pol, &claimed),
                     APBOT_OK);
    assert_int_equal(store_claim(x->st, "test", NULL, 60000, &claimed, &it, err, sizeof(err)),
                     APBOT_OK);
    assert_int_equal(it.id, id);
    store_item_done(&it);
    apply(x, id, MACHINE_CHECKING, MACHINE_EV_FOUND, doc_override ? doc_override : doc, NULL,
          false);
    return id;
}

static void test_report_duplicate(void **state)
{
    struct fx x;
    char key[INVOICE_KEY_LEN + 1], d1[32], d2[32];
    struct report *r;
    const struct report_finding *f;
    int64_t id;
    (void)state;

    fx_start(&x, NULL, fast);
    /* the bot's booking, then a clerk books the same invoice again by hand */
    id = add_completed_booked(&x, "INV-D1", 25000, "250.00", NULL, key, d1);
    book(&x, key, "250.00", d2);
    r = build(&x);
    assert_int_equal(report_status(r), REPORT_DRIFT);
    assert_int_equal(count(r, REPORT_DUPLICATE), 1);
    f = find(r, REPORT_DUPLICATE, id);
    assert_non_null(f);
    assert_non_null(strstr(f->erp_docs, d1));
    assert_non_null(strstr(f->erp_docs, d2));
    assert_int_equal(count(r, REPORT_DOC_MISMATCH), 0); /* its own document is among them */
    assert_int_equal(report_summary(r)->matched, 0);
    report_free(r);
    fx_stop(&x);
}

static void test_report_missing(void **state)
{
    struct fx x;
    char key[INVOICE_KEY_LEN + 1], doc[32];
    struct report *r;
    int64_t id;
    (void)state;

    fx_start(&x, NULL, fast);
    /* completed here, then the record is deleted in the ERP by hand */
    id = add_completed_booked(&x, "INV-M1", 4200, "42.00", NULL, key, doc);
    assert_int_equal(simc_delete(x.e.port, doc), 0);
    r = build(&x);
    assert_int_equal(report_status(r), REPORT_DRIFT);
    assert_int_equal(count(r, REPORT_MISSING), 1);
    assert_non_null(find(r, REPORT_MISSING, id));
    assert_true(report_summary(r)->lookups >= 1); /* proven absent by a lookup, not guessed */
    report_free(r);
    fx_stop(&x);
}

static void test_report_orphan(void **state)
{
    struct fx x;
    char doc[32];
    struct report *r;
    size_t n;
    const struct report_finding *f;
    (void)state;

    fx_start(&x, NULL, fast);
    /* An ERP that lists by invoice date (classic) shows an orphan on the report of the day its
     * invoice date names; one that lists by booking day, on the day it was booked. */
    book_dated(&x, "AP1-UNKNOWNKEY000000000", "77.70",
               x.flow->list.by == FLOW_LIST_BY_INVOICE ? x.today : "2026-11-03", doc);
    r = build(&x);
    assert_int_equal(report_status(r), REPORT_DRIFT);
    assert_int_equal(count(r, REPORT_ORPHAN), 1);
    f = report_findings(r, &n);
    assert_int_equal(f[0].kind, REPORT_ORPHAN);
    assert_int_equal(f[0].item_id, 0);
    assert_string_equal(f[0].key, "AP1-UNKNOWNKEY000000000");
    assert_string_equal(f[0].erp_docs, doc);
    assert_true(f[0].has_erp_amount);
    assert_int_equal(f[0].erp_amount, 7770);
    report_free(r);
    fx_stop(&x);
}

static void test_report_amount_mismatch(void **state)
{
    struct fx x;
    char key[INVOICE_KEY_LEN + 1], doc[32];
    struct report *r;
    const struct report_finding *f;
    int64_t id;
    (void)state;

    fx_start(&x, NULL, fast);
    id = add_completed_booked(&x, "INV-A1", 100000, "1000.01", NULL, key, doc);
    r = build(&x);
    assert_int_equal(report_status(r), REPORT_DRIFT);
    assert_int_equal(count(r, REPORT_AMOUNT_MISMATCH), 1);
    assert_int_equal(count(r, REPORT_DOC_MISMATCH), 0);
    f = find(r, REPORT_AMOUNT_MISMATCH, id);
    assert_non_null(f);
    assert_int_equal(f->amount, 100000);
    assert_true(f->has_erp_amount);
    assert_int_equal(f->erp_amount, 100001);
    report_free(r);
    fx_stop(&x);
}

static void test_report_doc_mismatch(void **state)
{
    struct fx x;
    char key[INVOICE_KEY_LEN + 1], doc[32];
    struct report *r;
    const struct report_finding *f;
    int64_t id;
    (void)state;

    fx_start(&x, NULL, fast);
    id = add_completed_booked(&x, "INV-X1", 5000, "50.00", "AP-2026-999999", key, doc);
    r = build(&x);
    assert_int_equal(report_status(r), REPORT_DRIFT);
    assert_int_equal(count(r, REPORT_DOC_MISMATCH), 1);
    assert_int_equal(count(r, REPORT_AMOUNT_MISMATCH), 0);
    f = find(r, REPORT_DOC_MISMATCH, id);
    assert_non_null(f);
    assert_string_equal(f->doc, "AP-2026-999999");
    assert_string_equal(f->erp_docs, doc);
    report_free(r);
    fx_stop(&x);
}

static void test_report_review_held_hint(void **state)
{
    struct fx x;
    char key[INVOICE_KEY_LEN + 1], doc[32], want[128];
    struct report *r;
    const struct report_finding *f;
    int64_t id;
    (void)state;

    fx_start(&x, NULL, fast);
    id = add(&x, "INV-R1", 31415, T_REVIEW, NULL, key);
    book(&x, key, "314.15", doc);
    r = build(&x);
    assert_int_equal(report_status(r), REPORT_CLEAN); /* a hint, not drift */
    f = find(r, REPORT_REVIEW_HELD, id);
    assert_non_null(f);
    snprintf(want, sizeof(want), "apbot resolve %lld --posted %s", (long long)id, doc);
    assert_non_null(f->command);
    assert_non_null(strstr(f->command, want));
    report_free(r);
    fx_stop(&x);
}

static void test_report_pagination(void **state)
{
    struct fx x;
    char key[INVOICE_KEY_LEN + 1], doc[32];
    struct report *r;
    const struct report_summary *s;
    (void)state;

    fx_start(&x, NULL, fast);
    if (x.flow->list.table.next == NULL && !x.flow->list.paged) {
        fx_stop(&x);
        skip(); /* this ERP lists a day in one page (classic): nothing to page through */
    }
    /* a page holds 50 journal rows (acme) or the flow's page-size (spa): ten more spill over */
    const int per = x.flow->list.page_size > 0 ? (int)x.flow->list.page_size : 50;
    for (int i = 0; i < per + 10; i++) {
        char ref[32];
        snprintf(ref, sizeof(ref), "AP1-ORPHAN%013d", i);
        book(&x, ref, "1.00", doc);
    }
    add_completed_booked(&x, "INV-P1", 1200, "12.00", NULL, key, doc); /* on page 2 */
    r = build(&x);
    s = report_summary(r);
    assert_int_equal(s->erp_rows, per + 11);
    assert_int_equal(s->erp_pages, 2);
    assert_int_equal(s->counts[REPORT_ORPHAN], per + 10);
    assert_int_equal(s->matched, 1);
    assert_int_equal(report_status(r), REPORT_DRIFT);
    report_free(r);
    fx_stop(&x);
}

/* Renders r in fmt into a heap string. */
static char *render(const struct report *r, enum report_format fmt)
{
    char *buf = NULL;
    size_t len = 0;
    char err[APBOT_ERR_LEN];
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(report_write(r, fmt, f, err, sizeof(err)), APBOT_OK);
    fclose(f);
    return buf;
}

static char *html_id_text(const char *html, const char *id)
{
    htmlDocPtr doc = htmlReadMemory(html, (int)strlen(html), NULL, "UTF-8",
                                    HTML_PARSE_NOERROR | HTML_PARSE_NOWARNING | HTML_PARSE_NONET);
    xmlXPathContextPtr ctx = xmlXPathNewContext(doc);
    char expr[128];
    xmlXPathObjectPtr o;
    char *s;

    snprintf(expr, sizeof(expr), "string(//*[@id='%s'])", id);
    o = xmlXPathEvalExpression((const xmlChar *)expr, ctx);
    s = strdup(o && o->stringval ? (const char *)o->stringval : "");
    xmlXPathFreeObject(o);
    xmlXPathFreeContext(ctx);
    xmlFreeDoc(doc);
    return s;
}

static void test_report_formats(void **state)
{
    struct fx x;
    char key[INVOICE_KEY_LEN + 1], d1[32], d2[32];
    struct report *r;
    char *text, *csv, *js, *html, *v;
    json_t *root;
    json_error_t jerr;
    size_t lines = 0, n;
    (void)state;

    fx_start(&x, NULL, fast);
    add_completed_booked(&x, "INV-F1", 1000, "10.00", NULL, key, d1);
    book(&x, key, "10.00", d2); /* duplicate */
    book(&x, "AP1-ORPHANFORMATS000000", "1.00", d2);
    r = build(&x);
    (void)report_findings(r, &n);

    text = render(r, REPORT_FMT_TEXT);
    assert_non_null(strstr(text, "DRIFT"));
    assert_non_null(strstr(text, "Duplicates"));

    csv = render(r, REPORT_FMT_CSV);
    {
        size_t money_lines = 0;
        for (const char *p = csv; *p; p++) {
            lines += *p == '\n';
            if (p == csv || p[-1] == '\n')
                money_lines += strncmp(p + 13, "\"money\"", 7) == 0; /* after "YYYY-MM-DD", */
        }
        /* header, one row per finding, and the money rows: per currency 6 buckets x 2, balanced,
         * erp-total, expected, difference; one difference-doc row per difference document */
        size_t nd;
        (void)report_money_diffs(r, &nd);
        assert_int_equal(money_lines, 12 + 4 + nd);
        assert_int_equal(lines, n + 1 + money_lines);
    }
    assert_non_null(strstr(csv, "\"duplicate\""));
    assert_non_null(strstr(csv, "\"money\",\"difference-doc\""));

    js = render(r, REPORT_FMT_JSON);
    root = json_loads(js, 0, &jerr);
    assert_non_null(root);
    assert_string_equal(json_string_value(json_object_get(root, "status")), "drift");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(root, "counts"), "duplicate")), 1);
    assert_int_equal(json_array_size(json_object_get(root, "findings")), n);
    {
        json_t *m = json_array_get(json_object_get(root, "money"), 0);
        assert_string_equal(json_string_value(json_object_get(m, "currency")), "EUR");
        /* one booking of 10.00 expected; the listing holds it twice, and an orphan of 1.00 */
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(m, "difference"), "minor")), 1100);
        assert_string_equal(json_string_value(json_object_get(
                                json_array_get(json_object_get(m, "differences"), 0), "why")),
                            "duplicate");
        assert_int_equal(
            json_array_size(json_object_get(json_object_get(root, "activity"), "hours")), 24);
    }
    json_decref(root);

    html = render(r, REPORT_FMT_HTML);
    v = html_id_text(html, "count-duplicates");
    assert_string_equal(v, "1");
    free(v);
    v = html_id_text(html, "count-received-day");
    assert_string_equal(v, "1");
    free(v);
    v = html_id_text(html, "status");
    assert_non_null(strstr(v, "DRIFT"));
    free(v);
    v = html_id_text(html, "money-EUR-difference");
    assert_string_equal(v, "11.00");
    free(v);
    assert_non_null(strstr(html, "<svg id=\"chart-day\""));
    assert_null(strstr(html, "<script"));

    free(text);
    free(csv);
    free(js);
    free(html);
    report_free(r);
    fx_stop(&x);
}

/* ---- money ------------------------------------------------------------------------------- */

/* Enqueues an invoice of vendor 100001 in currency, drives it to target like add(); for
 * T_COMPLETED a clerk first books it with erp_amount (plain text) and it is completed with that
 * document. Returns its id. */
static int64_t add_money_item(struct fx *x, const char *number, const char *currency,
                              int64_t amount, bool credit_note, enum target t,
                              const char *erp_amount, char doc[32])
{
    struct e2e_invoice in = {.vendor = "100001",
                             .number = number,
                             .date = "2026-11-03",
                             .currency = currency,
                             .amount = amount,
                             .gl = "6000",
                             .credit_note = credit_note};
    char key[INVOICE_KEY_LEN + 1], err[APBOT_ERR_LEN];
    struct store_item it;
    struct machine_policy pol = machine_policy_default();
    int64_t id;

    e2e_add(&x->e, &in, key);
    assert_int_equal(store_get_by_key(x->st, key, &it, err, sizeof(err)), APBOT_OK);
    id = it.id;
    store_item_done(&it);
    if (t == T_PENDING)
        return id;
    if (t == T_COMPLETED) {
        assert_int_equal(simc_book(x->e.port, "100001", number, "2026-11-03", currency, erp_amount,
                                   key, doc, 32),
                         0);
        shown_doc(x, doc);
    }
    {
        struct machine_step claimed;
        struct machine_counters fresh = {0};
        assert_int_equal(machine_next(MACHINE_NEW, MACHINE_EV_CLAIMED, &fresh, &pol, &claimed),
                         APBOT_OK);
        assert_int_equal(store_claim(x->st, "test", NULL, 60000, &claimed, &it, err, sizeof(err)),
                         APBOT_OK);
        it.counters.settled = true; /* these tests have no settle delay */
    }
    assert_int_equal(it.id, id);
    store_item_done(&it);
    switch (t) {
    case T_COMPLETED:
        apply(x, id, MACHINE_CHECKING, MACHINE_EV_FOUND, doc, NULL, false);
        break;
    case T_REVIEW:
        apply(x, id, MACHINE_CHECKING, MACHINE_EV_FOUND_CONFLICT, NULL, "conflict", false);
        break;
    case T_EXCEPTION:
        apply(x, id, MACHINE_CHECKING, MACHINE_EV_NOT_FOUND, NULL, NULL, true);
        apply(x, id, MACHINE_POSTING, MACHINE_EV_REJECTED, NULL, "E104: closed", false);
        break;
    case T_PENDING:
        break;
    }
    return id;
}

static const struct report_money *money_of(const struct report *r, const char *currency)
{
    size_t n;
    const struct report_money *m = report_money(r, &n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(m[i].currency, currency) == 0)
            return &m[i];
    fail_msg("no money record for %s", currency);
    return NULL;
}

/* Sums per currency and state computed here, from the store, independently of the report. */
struct sums {
    int64_t received[3], completed[3], exceptions[3], review[3], pending[3];
};
static const char *const sum_cur[3] = {"EUR", "USD", "JPY"};

static int sum_item(void *ctx, const struct store_item *it)
{
    struct sums *s = ctx;
    for (int c = 0; c < 3; c++) {
        if (strcmp(it->currency, sum_cur[c]) != 0)
            continue;
        s->received[c] += it->total;
        if (it->state == MACHINE_COMPLETED)
            s->completed[c] += it->total;
        else if (it->state == MACHINE_BUSINESS_EXCEPTION)
            s->exceptions[c] += it->total;
        else if (it->state == MACHINE_MANUAL_REVIEW)
            s->review[c] += it->total;
        else
            s->pending[c] += it->total;
    }
    return 0;
}

/* The balance in money, exact per currency, against sums taken from the store directly; and
 * the differences add up to each currency's difference. */
static void check_money(struct fx *x, const struct report *r)
{
    struct sums s;
    char err[APBOT_ERR_LEN];
    size_t nm, nd;
    const struct report_money *m = report_money(r, &nm);
    const struct report_money_diff *d = report_money_diffs(r, &nd);

    memset(&s, 0, sizeof(s));
    assert_int_equal(store_each(x->st, MACHINE_STATE_INVALID, sum_item, &s, err, sizeof(err)),
                     APBOT_OK);
    for (int c = 0; c < 3; c++) {
        const struct report_money *mm = NULL;
        for (size_t i = 0; i < nm; i++)
            if (strcmp(m[i].currency, sum_cur[c]) == 0)
                mm = &m[i];
        if (!mm) {
            assert_int_equal(s.received[c], 0);
            continue;
        }
        assert_int_equal(mm->total.received, s.received[c]);
        assert_int_equal(mm->total.completed, s.completed[c]);
        assert_int_equal(mm->total.exceptions, s.exceptions[c]);
        assert_int_equal(mm->total.review, s.review[c]);
        assert_int_equal(mm->total.pending, s.pending[c]);
        assert_int_equal(mm->total.unaccounted, 0);
        assert_true(mm->balanced);
    }
    for (size_t i = 0; i < nm; i++) {
        int64_t sum = 0;
        for (size_t j = 0; j < nd; j++)
            if (strcmp(d[j].currency, m[i].currency) == 0) {
                sum += d[j].delta;
                assert_non_null(d[j].doc); /* every difference names its document */
            }
        assert_int_equal(sum, m[i].difference);
        if (report_summary(r)->erp_read)
            assert_int_equal(m[i].difference, m[i].erp_total - m[i].expected);
    }
}

static void test_report_money(void **state)
{
    struct fx x;
    char da[32], db[32], dc[32], dd[32], dup[32];
    struct report *r;
    const struct report_money *eur, *usd, *jpy;
    const struct report_money_diff *d;
    size_t nd;
    int64_t a;
    (void)state;

    fx_start(&x, NULL, fast);
    a = add_money_item(&x, "M-A", "EUR", 10000, false, T_COMPLETED, "100.00", da);
    /* a credit note: queued negative, booked positive (the flow posts |amount|) */
    add_money_item(&x, "M-B", "EUR", -2500, true, T_COMPLETED, "25.00", db);
    add_money_item(&x, "M-C", "USD", 5000, false, T_COMPLETED, "50.00", dc);
    add_money_item(&x, "M-D", "JPY", 1200, false, T_COMPLETED, "1200", dd);
    add_money_item(&x, "M-E", "EUR", 3000, false, T_EXCEPTION, NULL, NULL);
    add_money_item(&x, "M-F", "EUR", 4000, false, T_REVIEW, NULL, NULL);
    add_money_item(&x, "M-G", "EUR", 6001, false, T_PENDING, NULL, NULL);

    r = build(&x);
    assert_int_equal(report_status(r), REPORT_CLEAN);
    check_money(&x, r);
    eur = money_of(r, "EUR");
    usd = money_of(r, "USD");
    jpy = money_of(r, "JPY");
    assert_int_equal(eur->exponent, 2);
    assert_int_equal(jpy->exponent, 0);
    /* the queue: received = completed + exception + review + pending, exactly */
    assert_int_equal(eur->day.received, 10000 - 2500 + 3000 + 4000 + 6001);
    assert_int_equal(eur->day.completed, 7500);
    assert_int_equal(eur->day.exceptions, 3000);
    assert_int_equal(eur->day.review, 4000);
    assert_int_equal(eur->day.pending, 6001);
    assert_int_equal(usd->day.received, 5000);
    assert_int_equal(jpy->day.completed, 1200);
    /* the ERP: the listing's apbot documents against what was completed today; the credit
     * note counts with its own sign */
    assert_int_equal(eur->erp_total, 7500);
    assert_int_equal(eur->erp_docs, 2);
    assert_int_equal(eur->expected, 7500);
    assert_int_equal(eur->expected_items, 2);
    assert_int_equal(eur->difference, 0);
    assert_int_equal(usd->difference, 0);
    assert_int_equal(jpy->erp_total, 1200);
    assert_int_equal(jpy->difference, 0);
    (void)report_money_diffs(r, &nd);
    assert_int_equal(nd, 0);
    report_free(r);

    /* break it on purpose: the ERP's amount of M-A changes by one cent, and the USD invoice
     * is booked a second time */
    assert_int_equal(simc_amend(x.e.port, da, "100.01"), 0);
    {
        struct store_item it;
        char err[APBOT_ERR_LEN];
        int64_t cid = a + 2;
        assert_int_equal(store_get(x.st, cid, &it, err, sizeof(err)), APBOT_OK);
        assert_string_equal(it.invoice_number, "M-C");
        assert_int_equal(simc_book(x.e.port, "100001", "M-C", "2026-11-03", "USD", "50.00", it.key,
                                   dup, sizeof(dup)),
                         0);
        shown_doc(&x, dup);
        store_item_done(&it);
    }
    r = build(&x);
    assert_int_equal(report_status(r), REPORT_DRIFT);
    check_money(&x, r);
    eur = money_of(r, "EUR");
    usd = money_of(r, "USD");
    assert_int_equal(eur->erp_total, 7501);
    assert_int_equal(eur->difference, 1);
    assert_int_equal(usd->difference, 5000);
    d = report_money_diffs(r, &nd);
    assert_int_equal(nd, 2);
    /* sorted by currency: the EUR cent, named with its document, then the USD duplicate */
    assert_string_equal(d[0].currency, "EUR");
    assert_string_equal(d[0].doc, da);
    assert_int_equal(d[0].item_id, a);
    assert_int_equal(d[0].why, REPORT_DIFF_AMOUNT);
    assert_int_equal(d[0].erp_amount, 10001);
    assert_int_equal(d[0].queue_amount, 10000);
    assert_int_equal(d[0].delta, 1);
    assert_string_equal(d[1].currency, "USD");
    assert_string_equal(d[1].doc, dup);
    assert_int_equal(d[1].why, REPORT_DIFF_DUPLICATE);
    assert_int_equal(d[1].delta, 5000);
    {
        char *text = render(r, REPORT_FMT_TEXT);
        char want[128];
        snprintf(want, sizeof(want),
                 "%s #%lld the ERP shows another amount: ERP 100.01, "
                 "queue 100.00, share 0.01",
                 da, (long long)a);
        assert_non_null(strstr(text, want));
        free(text);
    }
    report_free(r);

    /* the document disappears from the ERP: the difference names the queue's document */
    assert_int_equal(simc_delete(x.e.port, da), 0);
    r = build(&x);
    check_money(&x, r);
    eur = money_of(r, "EUR");
    assert_int_equal(eur->difference, -10000);
    d = report_money_diffs(r, &nd);
    assert_string_equal(d[0].doc, da);
    assert_int_equal(d[0].why, REPORT_DIFF_MISSING);
    assert_false(d[0].has_erp_amount);
    report_free(r);
    fx_stop(&x);
}

static void test_report_queue_only(void **state)
{
    struct fx x;
    char doc[32], err[APBOT_ERR_LEN];
    struct report *r = NULL;
    struct report_options opt;
    const struct report_money *eur;
    (void)state;

    fx_start(&x, NULL, fast);
    add_money_item(&x, "Q-A", "EUR", 10000, false, T_COMPLETED, "100.00", doc);
    add_money_item(&x, "Q-B", "EUR", 500, false, T_REVIEW, NULL, NULL);
    memset(&opt, 0, sizeof(opt));
    opt.date = x.today;
    /* no ERP at all: the queue's half */
    assert_int_equal(report_build_queue(x.st, NULL, &opt, &r, err, sizeof(err)), APBOT_OK);
    assert_false(report_summary(r)->erp_read);
    assert_true(report_summary(r)->balanced);
    eur = money_of(r, "EUR");
    assert_int_equal(eur->total.received, 10500);
    assert_int_equal(eur->erp_total, 0);
    assert_int_equal(eur->expected, 10000);
    assert_int_equal(count(r, REPORT_REVIEW_OPEN), 1);
    check_money(&x, r);
    report_free(r);
    fx_stop(&x);
}

static void test_report_chaos_balance(void **state)
{
    struct fx x;
    struct report *r;
    const struct report_summary *s;
    static const char *const faults[] = {
        "fault.timeout_after_commit",  "fault.late_commit",       "fault.error500_before_commit",
        "fault.error500_after_commit", "fault.overload503",       "fault.overload429",
        "fault.drop_before_commit",    "fault.drop_after_commit", "fault.session_expiry",
        "fault.garbled_after_commit"};
    (void)state;

    fx_start(&x, "chaos", "down.length_ms = 0\n");
    e2e_add_many(&x.e, "CHAOS", 12);
    /* chaos.scn: late commits 3 s + search lag 2 s, so the settle delay must exceed 5 s. The
     * harness's 2.5 s is for calm scenarios; with it a confirmed absence can be wrong and a
     * re-post may be booked twice (docs/design.md: the settle delay must outlast both). */
    x.e.opt.settle_ms = 6000;
    x.e.opt.max_seconds = 40;
    (void)e2e_run(&x.e);
    /* read the ERP calmly: the test is about what the chaotic run left behind. The search
     * index still lags 2 s, so the report waits out the run's settle delay as `apbot report`
     * does: read at once, a document confirmed by its post answer a moment ago is not yet in
     * the listing nor found by its key, and shows as missing (about 1 run in 5 under load). */
    for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++)
        assert_int_equal(simc_set(x.e.port, faults[i], "0"), 0);
    r = build_settled(&x, x.e.opt.settle_ms);
    s = report_summary(r);
    if (!s->balanced) {
        /* say why before failing: the report's own text names every unaccounted item */
        char *text = render(r, REPORT_FMT_TEXT);
        print_error("not balanced:\n%s\n", text);
        free(text);
    }
    assert_true(s->balanced);
    assert_int_equal(s->total.received, 12);
    assert_int_equal(s->day.received, 12);
    assert_int_equal(s->total.completed + s->total.exceptions + s->total.review + s->total.pending,
                     12);
    /* the two promises: nothing booked twice, nothing completed that the ERP lacks */
    assert_int_equal(s->counts[REPORT_DUPLICATE], 0);
    assert_int_equal(s->counts[REPORT_MISSING], 0);
    assert_int_equal(s->counts[REPORT_ORPHAN], 0);
    assert_int_equal(s->counts[REPORT_AMOUNT_MISMATCH], 0);
    assert_int_equal(s->counts[REPORT_DOC_MISMATCH], 0);
    assert_int_equal(s->matched + s->counts[REPORT_OTHER_DAY], s->total.completed);
    /* and in money, per currency, exactly; the differences, if any, add up */
    check_money(&x, r);
    {
        size_t nm;
        const struct report_money *m = report_money(r, &nm);
        assert_true(nm >= 1);
        for (size_t i = 0; i < nm; i++) {
            int64_t sum = m[i].total.completed + m[i].total.exceptions + m[i].total.review +
                          m[i].total.pending;
            assert_int_equal(sum, m[i].total.received);
        }
    }
    report_free(r);
    fx_stop(&x);
}

/* ---- a report a clerk can read --------------------------------------------------------- */

static void test_report_doc_order(void **state)
{
    (void)state;
    /* in order, each before the next */
    static const char *const order[] = {
        "",
        "00",
        "0",
        "1",
        "3",
        "007",
        "7",
        "10",
        "100",
        "AP-1",
        "AP-2",
        "AP-10",
        "AP-2026-000009",
        "AP-2026-000010",
        "AP-2026-000100",
        "AP-2027-000001",
        "AP-2027-000001a",
        "B",
        "b",
    };
    const size_t n = sizeof(order) / sizeof(order[0]);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(report_doc_cmp(order[i], order[i]), 0);
        for (size_t j = i + 1; j < n; j++) {
            if (report_doc_cmp(order[i], order[j]) >= 0 || report_doc_cmp(order[j], order[i]) <= 0)
                fail_msg("'%s' should sort before '%s'", order[i], order[j]);
        }
    }
    assert_true(report_doc_cmp(NULL, "1") < 0);
    assert_true(report_doc_cmp("1", NULL) > 0);
    assert_int_equal(report_doc_cmp(NULL, NULL), 0);
    /* a run of digits longer than any integer type still compares */
    assert_true(report_doc_cmp("9999999999999999999999998", "9999999999999999999999999") < 0);
}

/* The text of every node the XPath expr selects, joined by "|" (heap). */
static char *html_xpath_texts(const char *html, const char *expr)
{
    htmlDocPtr doc = htmlReadMemory(html, (int)strlen(html), NULL, "UTF-8",
                                    HTML_PARSE_NOERROR | HTML_PARSE_NOWARNING | HTML_PARSE_NONET);
    xmlXPathContextPtr ctx = xmlXPathNewContext(doc);
    xmlXPathObjectPtr o = xmlXPathEvalExpression((const xmlChar *)expr, ctx);
    size_t len = 1;
    char *s = calloc(1, 1);
    for (int i = 0; o && o->nodesetval && i < o->nodesetval->nodeNr; i++) {
        xmlChar *t = xmlNodeGetContent(o->nodesetval->nodeTab[i]);
        len += strlen((const char *)t) + 1;
        s = realloc(s, len);
        if (i)
            strcat(s, "|");
        strcat(s, (const char *)t);
        xmlFree(t);
    }
    xmlXPathFreeObject(o);
    xmlXPathFreeContext(ctx);
    xmlFreeDoc(doc);
    return s;
}

static int count_char(const char *s, char c)
{
    int n = 0;
    for (; *s; s++)
        n += *s == c;
    return n;
}

#define ORPHANS 12

/*
 * The classic ERP's report without a currency column (list_currency = off), as the listing of a
 * single-currency company: flows/classic.xml declares its default currency (currency="EUR"), so
 * the amounts of another queue's bookings are read and counted in EUR, not in a currency
 * "(none)" as "the ERP's amount cannot be read". The twelve orphans come grouped: a count, the
 * money per currency, the first five by document number and a link to all of them. The header
 * says which days were read and why. Without the declaration (a copy of the flow) the amounts
 * cannot be read - the bucket "(none)" then shows in the ERP's table, never as an empty row of
 * the balance.
 */
static void test_report_classic_list_without_currency(void **state)
{
    struct fx x;
    char key[INVOICE_KEY_LEN + 1], doc[32], err[APBOT_ERR_LEN];
    struct report *r;
    int64_t orphans_minor = 0;
    (void)state;

    if (e2e_test_ui() != SIM_UI_CLASSIC)
        skip(); /* the classic UI's listing (test_report_classic) */
    char text_scn[sizeof(fast) + 64];
    snprintf(text_scn, sizeof(text_scn), "%slist_currency = off\n", fast);
    fx_start(&x, NULL, text_scn);
    add_completed_booked(&x, "INV-CUR1", 4200, "42.00", NULL, key, doc);
    for (int i = 1; i <= ORPHANS; i++) {
        char ref[32], amount[16];
        snprintf(ref, sizeof(ref), "AP1-OTHERQUEUE%09d", i);
        snprintf(amount, sizeof(amount), "%d.%02d", 10 + i, i);
        orphans_minor += (10 + i) * 100 + i;
        book_dated(&x, ref, amount, x.today, doc);
    }
    /* the listing really lacks the column */
    {
        long status = 0;
        struct simc_session *ss = simc_session_new(x.e.port, 0);
        assert_int_equal(simc_classic_login(ss, "clerk", "acme-demo"), 0);
        assert_int_equal(simc_get(ss, "/app/ap/list?from=01/01/2026&to=12/31/2026", &status), 0);
        assert_int_equal(status, 200);
        assert_non_null(strstr(simc_body(ss), "<th>Amount</th>"));
        assert_null(strstr(simc_body(ss), "<th>Currency</th>"));
        simc_session_free(ss);
    }
    r = build(&x);
    const struct report_summary *s = report_summary(r);
    assert_true(s->list_by_invoice);
    assert_int_equal(s->counts[REPORT_ORPHAN], ORPHANS);
    assert_int_equal(s->matched, 1);
    {
        size_t nm;
        const struct report_money *m = report_money(r, &nm);
        assert_int_equal(nm, 1); /* EUR only: no "(none)" bucket */
        assert_string_equal(m[0].currency, "EUR");
        assert_int_equal(m[0].erp_unreadable, 0);
        assert_int_equal(m[0].erp_docs, ORPHANS + 1);
        assert_int_equal(m[0].erp_total, 4200 + orphans_minor);
        assert_int_equal(m[0].difference, orphans_minor);
    }
    {
        size_t n;
        const struct report_finding *f = report_findings(r, &n);
        const char *prev = NULL;
        for (size_t i = 0; i < n; i++) {
            if (f[i].kind != REPORT_ORPHAN)
                continue;
            assert_true(f[i].has_erp_amount);
            assert_string_equal(f[i].currency, "EUR");
            if (prev)
                assert_true(report_doc_cmp(prev, f[i].erp_docs) < 0); /* by document number */
            prev = f[i].erp_docs;
        }
    }
    char *text = render(r, REPORT_FMT_TEXT), *html = render(r, REPORT_FMT_HTML),
         *js = render(r, REPORT_FMT_JSON);
    char want[160], sum[48];
    money_text(orphans_minor, 2, sum, sizeof(sum));
    /* text: grouped, the first five, then a count of the rest */
    assert_null(strstr(text, "(none)"));
    assert_null(strstr(text, "cannot be read"));
    snprintf(want, sizeof(want), "%d ERP document(s) carry an apbot key this queue does not know",
             ORPHANS);
    assert_non_null(strstr(text, want));
    snprintf(want, sizeof(want), "EUR %s in %d document(s)", sum, ORPHANS);
    assert_non_null(strstr(text, want));
    snprintf(want, sizeof(want), "... and %d more", ORPHANS - 5);
    assert_non_null(strstr(text, want));
    assert_non_null(strstr(text, "is the day the bot worked, not an invoice date"));
    assert_non_null(strstr(text, "This ERP lists by invoice date"));
    /* HTML: the group's money, five rows, the link, and all of them at the end */
    assert_null(strstr(html, "(none)"));
    char *v = html_id_text(html, "orphans-EUR-amount");
    assert_string_equal(v, sum);
    free(v);
    v = html_id_text(html, "orphans-EUR-count");
    snprintf(want, sizeof(want), "%d", ORPHANS);
    assert_string_equal(v, want);
    free(v);
    v = html_xpath_texts(
        html, "//*[@id='section-orphans']//tr[@data-kind='orphan']/td[@class='erp-docs']");
    assert_int_equal(count_char(v, '|'), 4);
    free(v);
    v = html_xpath_texts(html, "//*[@id='section-orphans']//a[@href='#orphans-all']");
    snprintf(want, sizeof(want), "all %d orphans", ORPHANS);
    assert_string_equal(v, want);
    free(v);
    v = html_xpath_texts(html, "//*[@id='orphans-all']//tr[@data-kind='orphan']");
    assert_int_equal(count_char(v, '|'), ORPHANS - 1);
    free(v);
    v = html_xpath_texts(html, "//*[@id='days']/@data-listed-by");
    assert_string_equal(v, "invoice");
    free(v);
    {
        json_error_t jerr;
        json_t *root = json_loads(js, 0, &jerr);
        assert_non_null(root);
        json_t *o = json_object_get(root, "orphans");
        assert_int_equal(json_integer_value(json_object_get(o, "count")), ORPHANS);
        json_t *eur = json_array_get(json_object_get(o, "money"), 0);
        assert_string_equal(json_string_value(json_object_get(eur, "currency")), "EUR");
        assert_int_equal(json_integer_value(json_object_get(eur, "minor")), orphans_minor);
        assert_non_null(
            strstr(json_string_value(json_object_get(json_object_get(root, "erp"), "days")),
                   "lists by invoice date"));
        json_decref(root);
    }
    free(text);
    free(html);
    free(js);
    report_free(r);

    /* Without the declaration the ERP's amounts cannot be read: the bucket "(none)". */
    erp_close(x.erp);
    flow_free(x.flow);
    x.erp = NULL;
    x.flow = NULL;
    e2e_flow_copy(&x.e, " currency=\"EUR\"", "");
    if (flow_load(x.e.flow, &x.flow, err, sizeof(err)) != APBOT_OK)
        fail_msg("flow_load: %s", err);
    assert_null(x.flow->list.currency);
    if (erp_open(x.flow, x.e.url, NULL, &x.erp, err, sizeof(err)) != APBOT_OK)
        fail_msg("erp_open: %s", err);
    r = build(&x);
    {
        size_t nm;
        const struct report_money *m = report_money(r, &nm);
        assert_int_equal(nm, 2);
        assert_string_equal(m[0].currency, ""); /* sorted first */
        assert_int_equal(m[0].erp_unreadable, ORPHANS);
        html = render(r, REPORT_FMT_HTML);
        /* shown in the ERP's table, where it has something; not in the balance, where not */
        v = html_xpath_texts(html, "//table[@id='money-erp']//th[.='(none)']");
        assert_string_equal(v, "(none)");
        free(v);
        v = html_xpath_texts(html, "//table[@id='money-day' or @id='money-total']//th[.='(none)']");
        assert_string_equal(v, "");
        free(v);
        free(html);
        char *csv = render(r, REPORT_FMT_CSV);
        /* the bucket rows of EUR only; the ERP totals of both */
        const char *first = strstr(csv, "\"received-day\"");
        assert_non_null(first);
        assert_null(strstr(first + 1, "\"received-day\""));
        first = strstr(csv, "\"erp-total\"");
        assert_non_null(first);
        assert_non_null(strstr(first + 1, "\"erp-total\""));
        free(csv);
    }
    report_free(r);
    fx_stop(&x);
}

/* Waiting for the settle delay before the ERP is read: the table of report_settle_wait_ms. */
static void test_report_settle_wait(void **state)
{
    (void)state;
    static const struct {
        int64_t now, last_done, settle, want;
    } rows[] = {
        {100000, 0, 6000, 0},              /* nothing completed on the day */
        {100000, 90000, 6000, 0},          /* the last completion is older than the delay */
        {100000, 94000, 6000, 0},          /* exactly the delay ago */
        {100000, 95000, 6000, 1000},       /* a second short of it */
        {100000, 99700, 6000, 5700},       /* a moment ago: the ERP's index may lag */
        {100000, 100000, 6000, 6000},      /* this very moment */
        {100000, 500000, 6000, 6000},      /* stamped in the future (a clock step): one delay */
        {100000, 99700, 0, 0},             /* no delay asked (the review page) */
        {100000, 99700, -5, 0},            /* nonsense delay */
        {100000, INT64_MAX - 10, 6000, 0}, /* no overflow */
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        int64_t got = report_settle_wait_ms(rows[i].now, rows[i].last_done, rows[i].settle);
        if (got != rows[i].want)
            fail_msg("row %zu: %" PRId64 " ms, want %" PRId64, i, got, rows[i].want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_report_settle_wait),
        cmocka_unit_test(test_report_clean_day_and_balance),
        cmocka_unit_test(test_report_duplicate),
        cmocka_unit_test(test_report_missing),
        cmocka_unit_test(test_report_orphan),
        cmocka_unit_test(test_report_amount_mismatch),
        cmocka_unit_test(test_report_doc_mismatch),
        cmocka_unit_test(test_report_review_held_hint),
        cmocka_unit_test(test_report_pagination),
        cmocka_unit_test(test_report_formats),
        cmocka_unit_test(test_report_money),
        cmocka_unit_test(test_report_queue_only),
        cmocka_unit_test(test_report_chaos_balance),
        cmocka_unit_test(test_report_doc_order),
        cmocka_unit_test(test_report_classic_list_without_currency),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
