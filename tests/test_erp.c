/*
 * test_erp.c - the flow-driven ERP session's lookup against the simulated ERP over loopback:
 * a hit counts only when the compared columns are equal exactly, whatever the ERP's search
 * matched (it matches references and vendor invoice numbers by prefix), both for acme.xml's
 * lookup by key and for a lookup by natural key written with <expect>.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/erp.h"
#include "apbot/flow.h"
#include "apbot/http.h"
#include "apbot/invoice.h"
#include "apbot/runner.h"
#include "helpers/e2e.h"
#include "helpers/sim_client.h"

/* No search lag: what is booked is searchable at once. */
#define NO_LAG "index_lag_ms = 0\n"

static struct erp_session *open_session(struct e2e *e, struct flow **ret_flow)
{
    char err[APBOT_ERR_LEN] = "";
    struct flow *f = NULL;
    if (flow_load(e->flow, &f, err, sizeof(err)) != APBOT_OK)
        fail_msg("flow: %s", err);
    struct erp_session *s = NULL;
    if (erp_open(f, e->url, NULL, &s, err, sizeof(err)) != APBOT_OK)
        fail_msg("erp_open: %s", err);
    *ret_flow = f;
    return s;
}

static void make_invoice(struct invoice *inv, const char *vendor, const char *number)
{
    invoice_init(inv);
    inv->vendor_id = strdup(vendor);
    inv->invoice_number = strdup(number);
    assert_non_null(inv->vendor_id);
    assert_non_null(inv->invoice_number);
    inv->doc_type = INVOICE_DOC_INVOICE;
    snprintf(inv->issue_date, sizeof(inv->issue_date), "2026-11-03");
    snprintf(inv->currency, sizeof(inv->currency), "EUR");
    inv->exponent = 2;
    inv->payable = inv->net_total = 12345;
}

static enum erp_answer lookup(struct erp_session *s, const char *key, const struct invoice *inv,
                              char *ret_doc, size_t doclen)
{
    struct erp_lookup_result res;
    char err[APBOT_ERR_LEN] = "";
    if (erp_lookup(s, key, inv, "EUR", &res, err, sizeof(err)) != APBOT_OK)
        fail_msg("erp_lookup: %s", err);
    enum erp_answer a = res.answer;
    if (ret_doc)
        snprintf(ret_doc, doclen, "%s",
                 a == ERP_FOUND && res.hits.n == 1 && res.hits.rows[0].doc ? res.hits.rows[0].doc
                                                                           : "");
    if (a == ERP_FOUND)
        assert_int_equal(res.hits.n, 1);
    erp_lookup_result_done(&res);
    return a;
}

/* acme.xml: the reference search matches by prefix; only the exact reference is a hit. */
static void test_erp_lookup_by_key_is_exact(void **state)
{
    (void)state;
    struct e2e e;
    struct flow *f = NULL;
    e2e_start(&e, "calm", NO_LAG, 5);
    struct erp_session *s = open_session(&e, &f);
    const char *key = "AP1-ABCDEFGHIJKLMNOPQRST";
    char doc[64], booked[64];

    assert_int_equal(lookup(s, key, NULL, doc, sizeof(doc)), ERP_NOT_FOUND);
    /* A longer reference that starts with the key: the ERP lists it, apbot must not. */
    assert_int_equal(simc_book(e.port, "100001", "X-1", "2026-11-03", "EUR", "123.45",
                               "AP1-ABCDEFGHIJKLMNOPQRSTUV", booked, sizeof(booked)),
                     0);
    assert_int_equal(lookup(s, key, NULL, doc, sizeof(doc)), ERP_NOT_FOUND);
    assert_int_equal(simc_book(e.port, "100001", "X-2", "2026-11-03", "EUR", "123.45", key, booked,
                               sizeof(booked)),
                     0);
    assert_int_equal(lookup(s, key, NULL, doc, sizeof(doc)), ERP_FOUND);
    assert_string_equal(doc, booked);

    erp_close(s);
    flow_free(f);
    e2e_stop(&e);
}

/* A lookup by natural key: vendor and vendor invoice number compared with <expect>. */
static void test_erp_lookup_by_natural_key(void **state)
{
    (void)state;
    struct e2e e;
    struct flow *f = NULL;
    e2e_start(&e, "calm", NO_LAG, 6);
    e2e_flow_copy(&e,
                  "<lookup get=\"/erp/ap/invoice/search?reference=${key|url}\" "
                  "key-column=\"reference\">",
                  "<lookup get=\"/erp/ap/invoice/search?vendorNo=${vendor.id|url}&amp;"
                  "vendorInvNo=${invoice.number|url}\">");
    e2e_flow_copy(&e, "    </table>\n  </lookup>",
                  "    </table>\n"
                  "    <expect column=\"vendor\">${vendor.id}</expect>\n"
                  "    <expect column=\"invoice_number\">${invoice.number}</expect>\n"
                  "  </lookup>");
    struct erp_session *s = open_session(&e, &f);
    assert_null(f->lookup.key_column);
    assert_int_equal(f->lookup.n_expect, 2);

    const char *key = "AP1-ZZZZZZZZZZZZZZZZZZZZ";
    struct invoice inv;
    make_invoice(&inv, "100001", "INV-1");
    char doc[64], booked[64];
    struct erp_lookup_result res;
    char err[APBOT_ERR_LEN] = "";

    /* Without the invoice the expects cannot be evaluated: refused, not guessed. */
    assert_int_equal(erp_lookup(s, key, NULL, "EUR", &res, err, sizeof(err)), APBOT_E_INVAL);

    assert_int_equal(lookup(s, key, &inv, doc, sizeof(doc)), ERP_NOT_FOUND);
    /* INV-10 matches INV-1 by prefix in the ERP's search; another vendor's INV-1 differs. */
    assert_int_equal(simc_book(e.port, "100001", "INV-10", "2026-11-03", "EUR", "123.45", "",
                               booked, sizeof(booked)),
                     0);
    assert_int_equal(simc_book(e.port, "100002", "INV-1", "2026-11-03", "EUR", "123.45", "", booked,
                               sizeof(booked)),
                     0);
    assert_int_equal(lookup(s, key, &inv, doc, sizeof(doc)), ERP_NOT_FOUND);
    assert_int_equal(simc_book(e.port, "100001", "INV-1", "2026-11-03", "EUR", "123.45", "", booked,
                               sizeof(booked)),
                     0);
    assert_int_equal(lookup(s, key, &inv, doc, sizeof(doc)), ERP_FOUND);
    assert_string_equal(doc, booked);

    invoice_done(&inv);
    erp_close(s);
    flow_free(f);
    e2e_stop(&e);
}

static int group_setup(void **state)
{
    (void)state;
    return http_global_init() == APBOT_OK ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    http_global_cleanup();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_erp_lookup_by_key_is_exact),
        cmocka_unit_test(test_erp_lookup_by_natural_key),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
