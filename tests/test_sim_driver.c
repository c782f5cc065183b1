/*
 * test_sim_driver.c - the ERP driver end to end against the in-process simulator, with both
 * user interfaces and their shipped flows (flows/acme.xml, flows/classic.xml), driving
 * erp_login, erp_lookup and erp_post_run directly (no runner, no queue): a multi-line invoice
 * is booked line by line on the right accounts and approved (the simulator's ground truth), an
 * account the ERP does not offer is a data error before anything is saved, a connection
 * dropped after the save leaves a draft the lookup reports unfinished and the follow-up steps
 * approve without a second save, and a cut result list or a garbled no-results page never
 * reads as an absence.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apbot/erp.h"
#include "apbot/flow.h"
#include "apbot/invoice.h"
#include "apbot/money.h"
#include "erp/erp-int.h"
#include "erp/erp_post.h"
#include "helpers/e2e.h"
#include "helpers/sim_client.h"
#include "web/http.h"

/* No search lag: what is booked is searchable at once. */
#define NO_LAG "index_lag_ms = 0\n"

struct drv {
    struct e2e e;
    struct flow *f;
    struct erp_session *s;
};

static void drv_start(struct drv *d, enum sim_ui ui, const char *scenario_text, uint64_t seed)
{
    memset(d, 0, sizeof(*d));
    e2e_start_ui(&d->e, ui, "calm", scenario_text, seed);
}

/* With DRV_TRACE set, every exchange is printed (for debugging a flow). */
static void print_trace(void *ctx, const struct erp_trace *t)
{
    (void)ctx;
    fprintf(stderr, "  %-8s %-4s %s -> %ld %s [%s] rule=%s why=%s\n", t->step, t->method, t->url,
            t->status, t->transport, t->outcome, t->rule ? t->rule : "-", t->why ? t->why : "-");
    for (size_t i = 0; i < t->n_controls && getenv("DRV_TRACE")[0] == '2'; i++)
        fprintf(stderr, "      %s=%.60s (%s)\n", t->controls[i].name, t->controls[i].value,
                t->controls[i].source);
    for (size_t i = 0; i < t->n_captured; i++)
        fprintf(stderr, "      captured %s=%s\n", t->captured_names[i], t->captured_values[i]);
}

/* Loads the (possibly copied) flow and opens a logged-in session. */
static void drv_open(struct drv *d)
{
    char err[APBOT_ERR_LEN] = "";
    if (flow_load(d->e.flow, &d->f, err, sizeof(err)) != APBOT_OK)
        fail_msg("flow: %s", err);
    if (erp_open(d->f, d->e.url, NULL, &d->s, err, sizeof(err)) != APBOT_OK)
        fail_msg("erp_open: %s", err);
    if (getenv("DRV_TRACE"))
        erp_set_trace(d->s, print_trace, NULL);
    if (erp_login(d->s, err, sizeof(err)) != APBOT_OK)
        fail_msg("erp_login: %s", err);
}

static void drv_stop(struct drv *d)
{
    erp_close(d->s);
    flow_free(d->f);
    e2e_stop(&d->e);
}

/* An invoice of vendor 100001 with lines (gl, net in cents, 19% tax rounded down each). */
static void make_invoice(struct invoice *inv, const char *number, const char *const *gl,
                         const int64_t *net, size_t n)
{
    invoice_init(inv);
    invoice_set_str(&inv->vendor_id, "100001");
    invoice_set_str(&inv->vendor_name, "Vendor One");
    invoice_set_str(&inv->invoice_number, number);
    inv->doc_type = INVOICE_DOC_INVOICE;
    snprintf(inv->issue_date, sizeof(inv->issue_date), "2026-11-03");
    snprintf(inv->currency, sizeof(inv->currency), "EUR");
    inv->exponent = 2;
    for (size_t i = 0; i < n; i++) {
        char text[32];
        snprintf(text, sizeof(text), "line %zu of %s", i + 1, number);
        struct invoice_line l = {.description = text,
                                 .gl_account = (char *)gl[i],
                                 .net = net[i],
                                 .tax = net[i] * 19 / 100};
        invoice_add_line(inv, &l);
        inv->net_total += l.net;
        inv->tax_total += l.tax;
    }
    inv->payable = inv->net_total + inv->tax_total;
}

static void key_of(const struct invoice *inv, char key[INVOICE_KEY_LEN + 1])
{
    assert_int_equal(invoice_identity_key(inv, key), APBOT_OK);
}

/* Counts lines.csv rows of doc and checks each against the invoice's line (account, amount). */
static void assert_lines(unsigned short port, const char *doc, const struct invoice *inv)
{
    char *csv = NULL;
    assert_int_equal(simc_lines(port, &csv), 0);
    size_t seen = 0;
    for (char *line = csv, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        char d[64], gl[32], amount[64];
        int n = 0;
        if (sscanf(line, "%63[^,],%d,%31[^,],%63[^,]", d, &n, gl, amount) != 4 ||
            strcmp(d, doc) != 0)
            continue;
        assert_true(n >= 1 && (size_t)n <= inv->n_lines);
        const struct invoice_line *l = &inv->lines[n - 1];
        assert_string_equal(gl, l->gl_account);
        int64_t minor = 0;
        assert_int_equal(
            money_parse(amount, "EUR", MONEY_PLAIN, MONEY_ROUND_REFUSE, &minor, NULL, 0), APBOT_OK);
        assert_int_equal(minor, l->net);
        seen++;
    }
    free(csv);
    assert_int_equal(seen, inv->n_lines);
}

/* The document's status in the ledger. */
static const char *status_of(unsigned short port, const char *doc, char *buf, size_t len)
{
    if (simc_doc_status(port, doc, buf, len) != 0)
        snprintf(buf, len, "(none)");
    return buf;
}

/* ---- a multi-line invoice, booked line by line and approved ------------------------------ */

static void book_multi_line(enum sim_ui ui)
{
    static const char *const gl[] = {"5700", "4400", "6010"};
    static const int64_t net[] = {12000, 3450, 999};
    struct drv d;
    struct invoice inv;
    char key[INVOICE_KEY_LEN + 1], err[APBOT_ERR_LEN] = "", st[32];
    struct erp_post_result res;

    drv_start(&d, ui, NO_LAG, 21);
    drv_open(&d);
    make_invoice(&inv, ui == SIM_UI_CLASSIC ? "ML-C-1" : "ML-A-1", gl, net, 3);
    key_of(&inv, key);

    assert_int_equal(
        erp_post_run(d.s, &inv, key, ERP_POST_FROM_START, NULL, NULL, &res, err, sizeof(err)),
        APBOT_OK);
    if (res.verdict != DECIDE_CONFIRMED)
        fail_msg("verdict %s: %s", decide_post_verdict_name(res.verdict), res.detail);
    assert_true(res.commit_sent);
    assert_true(res.doc[0] != '\0');
    assert_int_equal(simc_count_reference(d.e.port, key), 1);
    assert_string_equal(status_of(d.e.port, res.doc, st, sizeof(st)), "posted");
    assert_lines(d.e.port, res.doc, &inv);
    assert_int_equal(simc_stat(d.e.port, "reposts_of_booked"), 0);

    /* The lookup finds it, finished. */
    struct erp_lookup_result lr;
    assert_int_equal(erp_lookup(d.s, key, &inv, "EUR", &lr, err, sizeof(err)), APBOT_OK);
    assert_int_equal(lr.answer, ERP_FOUND);
    assert_int_equal(lr.hits.n, 1);
    assert_string_equal(lr.hits.rows[0].doc, res.doc);
    assert_true(lr.hits.rows[0].has_amount);
    assert_int_equal(lr.hits.rows[0].amount, inv.payable);
    erp_lookup_result_done(&lr);

    invoice_done(&inv);
    drv_stop(&d);
}

/* classic: eight lines need eight update round trips over pages of ~170 KB per row. */
static void test_sim_driver_classic_eight_lines(void **state)
{
    (void)state;
    static const char *const gl[] = {"4000", "4400", "5000", "5700",
                                     "6000", "6010", "6999", "5700"};
    static const int64_t net[] = {100, 200, 300, 400, 500, 600, 700, 800};
    struct drv d;
    struct invoice inv;
    char key[INVOICE_KEY_LEN + 1], err[APBOT_ERR_LEN] = "", st[32];
    struct erp_post_result res;

    drv_start(&d, SIM_UI_CLASSIC, NO_LAG, 27);
    drv_open(&d);
    make_invoice(&inv, "ML-C-8", gl, net, 8);
    key_of(&inv, key);
    assert_int_equal(
        erp_post_run(d.s, &inv, key, ERP_POST_FROM_START, NULL, NULL, &res, err, sizeof(err)),
        APBOT_OK);
    if (res.verdict != DECIDE_CONFIRMED)
        fail_msg("verdict %s: %s", decide_post_verdict_name(res.verdict), res.detail);
    assert_string_equal(status_of(d.e.port, res.doc, st, sizeof(st)), "posted");
    assert_lines(d.e.port, res.doc, &inv);
    assert_int_equal(simc_stat(d.e.port, "update"), 8);
    invoice_done(&inv);
    drv_stop(&d);
}

static void test_sim_driver_classic_multi_line(void **state)
{
    (void)state;
    book_multi_line(SIM_UI_CLASSIC);
}

static void test_sim_driver_acme_multi_line(void **state)
{
    (void)state;
    book_multi_line(SIM_UI_ACME);
}

/* ---- data errors ------------------------------------------------------------------------- */

/* classic: the account select does not offer 9999: a data error before anything is sent. */
static void test_sim_driver_classic_unknown_account(void **state)
{
    (void)state;
    static const char *const gl[] = {"5700", "9999"};
    static const int64_t net[] = {1000, 2000};
    struct drv d;
    struct invoice inv;
    char key[INVOICE_KEY_LEN + 1], err[APBOT_ERR_LEN] = "";
    struct erp_post_result res;

    drv_start(&d, SIM_UI_CLASSIC, NO_LAG, 22);
    drv_open(&d);
    make_invoice(&inv, "BAD-ACCT-1", gl, net, 2);
    key_of(&inv, key);
    assert_int_equal(
        erp_post_run(d.s, &inv, key, ERP_POST_FROM_START, NULL, NULL, &res, err, sizeof(err)),
        APBOT_OK);
    if (res.verdict != DECIDE_REJECTED || !res.data_error)
        fail_msg("verdict %s: %s", decide_post_verdict_name(res.verdict), res.detail);
    assert_false(res.commit_sent);
    assert_string_equal(res.reason,
                        "the G/L account 9999 is not one this ERP accepts (field account_2)");
    assert_int_equal(simc_count_rows(d.e.port), 0);
    assert_int_equal(simc_stat(d.e.port, "save"), 0);
    invoice_done(&inv);
    drv_stop(&d);
}

/* acme: G/L accounts are text; the ERP's own validation refuses it (E107), nothing booked. */
static void test_sim_driver_acme_unknown_account(void **state)
{
    (void)state;
    static const char *const gl[] = {"5700", "3000"};
    static const int64_t net[] = {1000, 2000};
    struct drv d;
    struct invoice inv;
    char key[INVOICE_KEY_LEN + 1], err[APBOT_ERR_LEN] = "";
    struct erp_post_result res;

    drv_start(&d, SIM_UI_ACME, NO_LAG, 23);
    drv_open(&d);
    make_invoice(&inv, "BAD-ACCT-2", gl, net, 2);
    key_of(&inv, key);
    assert_int_equal(
        erp_post_run(d.s, &inv, key, ERP_POST_FROM_START, NULL, NULL, &res, err, sizeof(err)),
        APBOT_OK);
    if (res.verdict != DECIDE_REJECTED)
        fail_msg("verdict %s: %s", decide_post_verdict_name(res.verdict), res.detail);
    assert_non_null(strstr(res.reason, "E107"));
    assert_false(res.commit_sent);
    assert_int_equal(simc_count_rows(d.e.port), 0);
    invoice_done(&inv);
    drv_stop(&d);
}

/* ---- a drop after the save: the draft is finished, never saved again --------------------- */

static void test_sim_driver_classic_drop_after_save(void **state)
{
    (void)state;
    static const char *const gl[] = {"6000", "5700"};
    static const int64_t net[] = {5000, 2500};
    struct drv d;
    struct invoice inv;
    char key[INVOICE_KEY_LEN + 1], err[APBOT_ERR_LEN] = "", st[32];
    struct erp_post_result res;
    struct erp_lookup_result lr;

    drv_start(&d, SIM_UI_CLASSIC, NO_LAG, 24);
    drv_open(&d);
    make_invoice(&inv, "DROP-1", gl, net, 2);
    key_of(&inv, key);
    assert_int_equal(simc_fault(d.e.port, "drop_after_commit", 1), 0);
    assert_int_equal(
        erp_post_run(d.s, &inv, key, ERP_POST_FROM_START, NULL, NULL, &res, err, sizeof(err)),
        APBOT_OK);
    if (res.verdict != DECIDE_UNKNOWN)
        fail_msg("verdict %s: %s", decide_post_verdict_name(res.verdict), res.detail);
    assert_true(res.commit_sent);
    assert_int_equal(simc_count_reference(d.e.port, key), 1); /* the draft is booked */

    /* The lookup finds the draft: saved, not finished. */
    assert_int_equal(erp_lookup(d.s, key, &inv, "EUR", &lr, err, sizeof(err)), APBOT_OK);
    if (lr.answer != ERP_FOUND_UNFINISHED)
        fail_msg("lookup answered %d: %s", (int)lr.answer, lr.detail);
    assert_int_equal(lr.hits.n, 1);
    assert_true(lr.hits.rows[0].unfinished);
    char doc[64];
    snprintf(doc, sizeof(doc), "%s", lr.hits.rows[0].doc);
    assert_string_equal(status_of(d.e.port, doc, st, sizeof(st)), "draft");
    erp_lookup_result_done(&lr);

    /* The follow-up steps approve it: no second save. */
    assert_int_equal(
        erp_post_run(d.s, &inv, key, ERP_POST_FROM_FOLLOWUPS, doc, NULL, &res, err, sizeof(err)),
        APBOT_OK);
    if (res.verdict != DECIDE_CONFIRMED)
        fail_msg("follow-ups: %s: %s", decide_post_verdict_name(res.verdict), res.detail);
    assert_string_equal(res.doc, doc);
    assert_false(res.commit_sent);
    assert_string_equal(status_of(d.e.port, doc, st, sizeof(st)), "posted");
    assert_int_equal(simc_count_reference(d.e.port, key), 1);
    assert_int_equal(simc_stat(d.e.port, "save"), 1);
    assert_int_equal(simc_stat(d.e.port, "reposts_of_booked"), 0);
    assert_lines(d.e.port, doc, &inv);

    assert_int_equal(erp_lookup(d.s, key, &inv, "EUR", &lr, err, sizeof(err)), APBOT_OK);
    assert_int_equal(lr.answer, ERP_FOUND);
    erp_lookup_result_done(&lr);
    invoice_done(&inv);
    drv_stop(&d);
}

/* ---- lookups that must not read as an absence -------------------------------------------- */

static void cut_and_garbled(enum sim_ui ui)
{
    static const char *const gl[] = {"6000"};
    static const int64_t net[] = {1000};
    struct drv d;
    struct invoice inv;
    char key[INVOICE_KEY_LEN + 1], err[APBOT_ERR_LEN] = "", booked[64], ref[64];
    struct erp_lookup_result lr;

    drv_start(&d, ui, NO_LAG "search_max_rows = 3\n", 25);
    /* The flow states the screen's maximum. */
    e2e_flow_copy(&d.e, ui == SIM_UI_CLASSIC ? "max-rows=\"100\"" : "max-rows=\"200\"",
                  "max-rows=\"3\"");
    drv_open(&d);
    make_invoice(&inv, "CUT-1", gl, net, 1);
    key_of(&inv, key);

    /* An honest empty screen is an absence. */
    assert_int_equal(erp_lookup(d.s, key, &inv, "EUR", &lr, err, sizeof(err)), APBOT_OK);
    assert_int_equal(lr.answer, ERP_NOT_FOUND);
    erp_lookup_result_done(&lr);

    /* A garbled no-results page is not. */
    assert_int_equal(simc_fault(d.e.port, "search_garbled", 1), 0);
    assert_int_equal(erp_lookup(d.s, key, &inv, "EUR", &lr, err, sizeof(err)), APBOT_OK);
    assert_int_equal(lr.answer, ERP_FAILED);
    erp_lookup_result_done(&lr);

    /* Three references longer than the key: the search shows exactly 3 rows (its maximum),
     * none carrying the key: the list may be cut, so no absence. */
    for (int i = 0; i < 3; i++) {
        snprintf(ref, sizeof(ref), "%sX%d", key, i);
        assert_int_equal(simc_book(d.e.port, "100002", ref + 20, "2026-11-03", "EUR", "10.00", ref,
                                   booked, sizeof(booked)),
                         0);
    }
    assert_int_equal(erp_lookup(d.s, key, &inv, "EUR", &lr, err, sizeof(err)), APBOT_OK);
    if (lr.answer != ERP_FAILED)
        fail_msg("a cut list answered %d", (int)lr.answer);
    assert_non_null(strstr(lr.detail, "cut"));
    erp_lookup_result_done(&lr);
    /* Two such rows (under the maximum) are a complete screen: an absence. */
    assert_int_equal(simc_delete(d.e.port, booked), 0);
    assert_int_equal(erp_lookup(d.s, key, &inv, "EUR", &lr, err, sizeof(err)), APBOT_OK);
    assert_int_equal(lr.answer, ERP_NOT_FOUND);
    erp_lookup_result_done(&lr);
    invoice_done(&inv);
    drv_stop(&d);
}

static void test_sim_driver_classic_cut_and_garbled(void **state)
{
    (void)state;
    cut_and_garbled(SIM_UI_CLASSIC);
}

static void test_sim_driver_acme_cut_and_garbled(void **state)
{
    (void)state;
    cut_and_garbled(SIM_UI_ACME);
}

/* acme.xml: the reference search matches by prefix; only the exact reference is a hit. */
static void test_sim_driver_acme_lookup_by_key_is_exact(void **state)
{
    (void)state;
    struct drv d;
    struct erp_lookup_result lr;
    char err[APBOT_ERR_LEN] = "", booked[64];
    const char *key = "AP1-ABCDEFGHIJKLMNOPQRST";

    drv_start(&d, SIM_UI_ACME, NO_LAG, 5);
    drv_open(&d);
    assert_int_equal(erp_lookup(d.s, key, NULL, "EUR", &lr, err, sizeof(err)), APBOT_OK);
    assert_int_equal(lr.answer, ERP_NOT_FOUND);
    erp_lookup_result_done(&lr);
    /* A longer reference that starts with the key: the ERP lists it, apbot must not. */
    assert_int_equal(simc_book(d.e.port, "100001", "X-1", "2026-11-03", "EUR", "123.45",
                               "AP1-ABCDEFGHIJKLMNOPQRSTUV", booked, sizeof(booked)),
                     0);
    assert_int_equal(erp_lookup(d.s, key, NULL, "EUR", &lr, err, sizeof(err)), APBOT_OK);
    assert_int_equal(lr.answer, ERP_NOT_FOUND);
    erp_lookup_result_done(&lr);
    assert_int_equal(simc_book(d.e.port, "100001", "X-2", "2026-11-03", "EUR", "123.45", key,
                               booked, sizeof(booked)),
                     0);
    assert_int_equal(erp_lookup(d.s, key, NULL, "EUR", &lr, err, sizeof(err)), APBOT_OK);
    assert_int_equal(lr.answer, ERP_FOUND);
    assert_int_equal(lr.hits.n, 1);
    assert_string_equal(lr.hits.rows[0].doc, booked);
    assert_int_equal(lr.hits.rows[0].amount, 12345);
    erp_lookup_result_done(&lr);
    drv_stop(&d);
}

/* A lookup by natural key: vendor and vendor invoice number compared with <expect>. */
static void test_sim_driver_acme_lookup_by_natural_key(void **state)
{
    (void)state;
    struct drv d;
    struct erp_lookup_result lr;
    char err[APBOT_ERR_LEN] = "", booked[64];
    const char *key = "AP1-ZZZZZZZZZZZZZZZZZZZZ";
    static const char *const gl[] = {"6000"};
    static const int64_t net[] = {12345};
    struct invoice inv;

    drv_start(&d, SIM_UI_ACME, NO_LAG, 6);
    e2e_flow_copy(&d.e,
                  "<lookup get=\"/erp/ap/invoice/search?reference=${key|url}\" "
                  "key-column=\"reference\">",
                  "<lookup get=\"/erp/ap/invoice/search?vendorNo=${vendor.id|url}&amp;"
                  "vendorInvNo=${invoice.number|url}\">");
    e2e_flow_copy(&d.e, "    </table>\n  </lookup>",
                  "    </table>\n"
                  "    <expect column=\"vendor\">${vendor.id}</expect>\n"
                  "    <expect column=\"invoice_number\">${invoice.number}</expect>\n"
                  "  </lookup>");
    drv_open(&d);
    assert_null(d.f->lookup.key_column);
    assert_int_equal(d.f->lookup.n_expect, 2);
    make_invoice(&inv, "INV-1", gl, net, 1);

    /* Without the invoice the expects cannot be evaluated: refused, not guessed. */
    assert_int_equal(erp_lookup(d.s, key, NULL, "EUR", &lr, err, sizeof(err)), APBOT_E_INVAL);
    assert_int_equal(erp_lookup(d.s, key, &inv, "EUR", &lr, err, sizeof(err)), APBOT_OK);
    assert_int_equal(lr.answer, ERP_NOT_FOUND);
    erp_lookup_result_done(&lr);
    /* INV-10 matches INV-1 by prefix in the ERP's search; another vendor's INV-1 differs. */
    assert_int_equal(simc_book(d.e.port, "100001", "INV-10", "2026-11-03", "EUR", "123.45", "",
                               booked, sizeof(booked)),
                     0);
    assert_int_equal(simc_book(d.e.port, "100002", "INV-1", "2026-11-03", "EUR", "123.45", "",
                               booked, sizeof(booked)),
                     0);
    assert_int_equal(erp_lookup(d.s, key, &inv, "EUR", &lr, err, sizeof(err)), APBOT_OK);
    assert_int_equal(lr.answer, ERP_NOT_FOUND);
    erp_lookup_result_done(&lr);
    assert_int_equal(simc_book(d.e.port, "100001", "INV-1", "2026-11-03", "EUR", "123.45", "",
                               booked, sizeof(booked)),
                     0);
    assert_int_equal(erp_lookup(d.s, key, &inv, "EUR", &lr, err, sizeof(err)), APBOT_OK);
    assert_int_equal(lr.answer, ERP_FOUND);
    assert_string_equal(lr.hits.rows[0].doc, booked);
    erp_lookup_result_done(&lr);
    invoice_done(&inv);
    drv_stop(&d);
}

/* The listing of each UI over a range: the booked invoice with its reference. */
struct found_ref {
    const char *ref;
    int hits, rows;
};

static int find_ref(void *ctx, const struct erp_row *row)
{
    struct found_ref *f = ctx;
    f->rows++;
    if (row->reference && strcmp(row->reference, f->ref) == 0)
        f->hits++;
    return 0;
}

static void list_range(enum sim_ui ui)
{
    static const char *const gl[] = {"6000"};
    static const int64_t net[] = {1000};
    struct drv d;
    struct invoice inv;
    char key[INVOICE_KEY_LEN + 1], err[APBOT_ERR_LEN] = "";
    struct erp_post_result res;

    drv_start(&d, ui, NO_LAG, 26);
    drv_open(&d);
    make_invoice(&inv, "LIST-1", gl, net, 1);
    key_of(&inv, key);
    assert_int_equal(
        erp_post_run(d.s, &inv, key, ERP_POST_FROM_START, NULL, NULL, &res, err, sizeof(err)),
        APBOT_OK);
    assert_int_equal(res.verdict, DECIDE_CONFIRMED);
    struct found_ref fr = {.ref = key};
    int pages = 0;
    if (ui == SIM_UI_CLASSIC) {
        /* by invoice date: the invoice's own date */
        assert_int_equal(erp_list_range(d.s, "2026-11-01", "2026-11-05", find_ref, &fr, &pages, err,
                                        sizeof(err)),
                         APBOT_OK);
        assert_int_equal(pages, 1);
        assert_int_equal(fr.hits, 1);
        fr.hits = 0;
        assert_int_equal(erp_list_range(d.s, "2026-11-04", "2026-11-05", find_ref, &fr, &pages, err,
                                        sizeof(err)),
                         APBOT_OK);
        assert_int_equal(fr.hits, 0);
    } else {
        /* by booking date: today, one day per walk */
        char today[16];
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        strftime(today, sizeof(today), "%Y-%m-%d", &tm);
        assert_int_equal(erp_list_day(d.s, today, find_ref, &fr, &pages, err, sizeof(err)),
                         APBOT_OK);
        assert_int_equal(fr.hits, 1);
    }
    invoice_done(&inv);
    drv_stop(&d);
}

static void test_sim_driver_classic_list_range(void **state)
{
    (void)state;
    list_range(SIM_UI_CLASSIC);
}

static void test_sim_driver_acme_list_day(void **state)
{
    (void)state;
    list_range(SIM_UI_ACME);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sim_driver_classic_multi_line),
        cmocka_unit_test(test_sim_driver_classic_eight_lines),
        cmocka_unit_test(test_sim_driver_acme_multi_line),
        cmocka_unit_test(test_sim_driver_classic_unknown_account),
        cmocka_unit_test(test_sim_driver_acme_unknown_account),
        cmocka_unit_test(test_sim_driver_classic_drop_after_save),
        cmocka_unit_test(test_sim_driver_classic_cut_and_garbled),
        cmocka_unit_test(test_sim_driver_acme_cut_and_garbled),
        cmocka_unit_test(test_sim_driver_acme_lookup_by_key_is_exact),
        cmocka_unit_test(test_sim_driver_acme_lookup_by_natural_key),
        cmocka_unit_test(test_sim_driver_classic_list_range),
        cmocka_unit_test(test_sim_driver_acme_list_day),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
