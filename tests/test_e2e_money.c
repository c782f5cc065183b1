/*
 * test_e2e_money.c - issue 30's amounts a flow computes, end to end on the classic UI
 * (flows/classic.xml changed as docs/writing-flows.md's "How to: book lines gross" says): each
 * line is booked gross (${line.gross}), the ERP's tax field gets 0, and the total the ERP
 * computed after its update is compared with the invoice's payable before the save
 * (<compare-amount>). Invoices with tax from lines that state it and from UBL documents whose
 * lines state only their rate (their share of the tax, the rounding remainder to the largest
 * remainders), an invoice and a credit note, are booked; the ground truth's lines are the gross
 * amounts and add up to each booking's total, the ERP keeps no tax of its own, the queue keeps
 * the vendor's tax. A UBL invoice whose payable is not its lines gross (a prepaid amount) is a
 * business exception naming both amounts, one whose line taxes cannot be told (a charge on the
 * whole document) is one naming why; neither is saved. The day's report is clean.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/invoice.h"
#include "apbot/machine.h"
#include "apbot/money.h"
#include "apbot/runner.h"
#include "apbot/store.h"
#include "helpers/e2e.h"
#include "helpers/invariants.h"
#include "helpers/sim_client.h"

/* One line of a UBL document written by write_ubl. */
struct uline {
    const char *gl, *net, *category, *percent; /* percent NULL: none given */
};

/* Writes a UBL Invoice (or, with credit, a CreditNote) of vendor 100008 dated 2026-11-05 into
 * the test's directory as `name`; the amounts as text, prepaid NULL for none. Returns the
 * path in buf. */
static const char *write_ubl(const struct e2e *e, const char *name, bool credit, const char *number,
                             const struct uline *lines, size_t n, const char *net, const char *tax,
                             const char *prepaid, const char *payable, char *buf, size_t len)
{
    const char *root = credit ? "CreditNote" : "Invoice";
    const char *line_el = credit ? "CreditNoteLine" : "InvoiceLine";
    snprintf(buf, len, "%s/%s", e->dir, name);
    FILE *f = fopen(buf, "w");
    assert_non_null(f);
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<%s xmlns=\"urn:oasis:names:specification:ubl:schema:xsd:%s-2\"\n"
            "  xmlns:cac=\"urn:oasis:names:specification:ubl:schema:xsd:"
            "CommonAggregateComponents-2\"\n"
            "  xmlns:cbc=\"urn:oasis:names:specification:ubl:schema:xsd:"
            "CommonBasicComponents-2\">\n"
            "  <cbc:ID>%s</cbc:ID>\n  <cbc:IssueDate>2026-11-05</cbc:IssueDate>\n"
            "  <cbc:%sTypeCode>%s</cbc:%sTypeCode>\n"
            "  <cbc:DocumentCurrencyCode>EUR</cbc:DocumentCurrencyCode>\n"
            "  <cac:AccountingSupplierParty><cac:Party>\n"
            "    <cac:PartyIdentification><cbc:ID>100008</cbc:ID></cac:PartyIdentification>\n"
            "    <cac:PartyName><cbc:Name>Isar Catering GmbH</cbc:Name></cac:PartyName>\n"
            "  </cac:Party></cac:AccountingSupplierParty>\n"
            "  <cac:TaxTotal><cbc:TaxAmount currencyID=\"EUR\">%s</cbc:TaxAmount></cac:TaxTotal>\n"
            "  <cac:LegalMonetaryTotal>\n"
            "    <cbc:TaxExclusiveAmount currencyID=\"EUR\">%s</cbc:TaxExclusiveAmount>\n",
            root, root, number, root, credit ? "381" : "380", root, tax, net);
    if (prepaid)
        fprintf(f, "    <cbc:PrepaidAmount currencyID=\"EUR\">%s</cbc:PrepaidAmount>\n", prepaid);
    fprintf(f,
            "    <cbc:PayableAmount currencyID=\"EUR\">%s</cbc:PayableAmount>\n"
            "  </cac:LegalMonetaryTotal>\n",
            payable);
    for (size_t i = 0; i < n; i++) {
        const struct uline *l = &lines[i];
        fprintf(f,
                "  <cac:%s><cbc:ID>%zu</cbc:ID>\n"
                "    <cbc:%sQuantity unitCode=\"C62\">1</cbc:%sQuantity>\n"
                "    <cbc:LineExtensionAmount currencyID=\"EUR\">%s</cbc:LineExtensionAmount>\n"
                "    <cbc:AccountingCost>%s</cbc:AccountingCost>\n"
                "    <cac:Item><cbc:Name>item %zu</cbc:Name><cac:ClassifiedTaxCategory>"
                "<cbc:ID>%s</cbc:ID>",
                line_el, i + 1, credit ? "Credited" : "Invoiced", credit ? "Credited" : "Invoiced",
                l->net, l->gl, i + 1, l->category);
        if (l->percent)
            fprintf(f, "<cbc:Percent>%s</cbc:Percent>", l->percent);
        fprintf(f,
                "<cac:TaxScheme><cbc:ID>VAT</cbc:ID></cac:TaxScheme></cac:ClassifiedTaxCategory>"
                "</cac:Item>\n"
                "    <cac:Price><cbc:PriceAmount currencyID=\"EUR\">%s</cbc:PriceAmount>"
                "</cac:Price>\n  </cac:%s>\n",
                l->net, line_el);
    }
    fprintf(f, "</%s>\n", root);
    assert_int_equal(fclose(f), 0);
    return buf;
}

static char *key_dup(const char *k)
{
    char *d = strdup(k);
    assert_non_null(d);
    return d;
}

/* Enqueues one UBL document; returns its key (heap). */
static char *add_ubl(struct e2e *e, const char *name, bool credit, const char *number,
                     const struct uline *lines, size_t n, const char *net, const char *tax,
                     const char *prepaid, const char *payable)
{
    char path[512], keys[1][25];
    write_ubl(e, name, credit, number, lines, n, net, tax, prepaid, payable, path, sizeof(path));
    assert_int_equal(e2e_add_file(e, path, keys, 1), 1);
    return key_dup(keys[0]);
}

/* The amounts of doc's lines in lines.csv, in line order, joined by '|'. */
static void doc_lines(const char *csv, const char *doc, char *out, size_t len)
{
    size_t at = 0;
    out[0] = '\0';
    for (const char *p = csv; p && *p;) {
        const char *end = strchr(p, '\n');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char row[512];
        snprintf(row, sizeof(row), "%.*s", (int)(n < sizeof(row) ? n : sizeof(row) - 1), p);
        /* doc,line,gl_account,amount,description */
        char *f[5] = {row, NULL, NULL, NULL, NULL};
        for (int k = 1; k < 5 && f[k - 1]; k++) {
            char *c = strchr(f[k - 1], ',');
            if (c) {
                *c = '\0';
                f[k] = c + 1;
            }
        }
        if (f[3] && strcmp(f[0], doc) == 0)
            at += (size_t)snprintf(out + at, len - at, "%s%s", at ? "|" : "", f[3]);
        p = end ? end + 1 : NULL;
    }
}

static void item_of(struct e2e *e, const char *key, struct store_item *it)
{
    e2e_get_item(e, key, it);
}

/* The ERP's own tax of a booking (/_sim/document), minor units. */
static long long erp_tax(struct e2e *e, const char *doc)
{
    char path[128];
    long status = 0;
    char *body = NULL;
    snprintf(path, sizeof(path), "/_sim/document?doc=%s", doc);
    assert_int_equal(simc_request(e->port, "GET", path, NULL, 5000, &status, &body), 0);
    assert_int_equal(status, 200);
    json_t *j = json_loads(body, 0, NULL);
    assert_non_null(j);
    json_t *tax = json_object_get(j, "tax");
    assert_true(json_is_integer(tax));
    long long v = (long long)json_integer_value(tax);
    json_decref(j);
    free(body);
    return v;
}

static void test_e2e_money_lines_gross_classic(void **state)
{
    (void)state;
    struct e2e e;
    e2e_start_ui(&e, SIM_UI_CLASSIC, "calm", NULL, 30);
    /* docs/writing-flows.md, "How to: book lines gross" (the comparison needs update's answer
     * every time: the step is never skipped) */
    e2e_flow_copy(&e, " skip=\"when-known\"", "");
    e2e_flow_copy(&e, "<field name=\"amount_${line.n}\">${line.net|abs|amount:.}</field>",
                  "<field name=\"amount_${line.n}\">${line.gross|abs|amount:.}</field>");
    e2e_flow_copy(&e, "<field name=\"tax\">${invoice.tax|abs|amount:.}</field>",
                  "<field name=\"tax\">0.00</field>");
    e2e_flow_copy(&e, "<rule name=\"enter-overload\" outcome=\"not-sent\" status=\"429,503\"/>",
                  "<rule name=\"enter-overload\" outcome=\"not-sent\" status=\"429,503\"/>\n"
                  "      <capture name=\"erp_total\">id=\"computedTotal\"&gt;"
                  "(?&lt;erp_total&gt;[^&lt;]+)&lt;</capture>\n"
                  "      <compare-amount capture=\"erp_total\" equals=\"${invoice.payable|abs}\"\n"
                  "                      amount-decimal=\".\" amount-group=\",\"/>");
    e.lines_gross = true;

    /* lines that state their tax (as a CSV's do) */
    char csv_key[32];
    const struct e2e_line csv_lines[] = {
        {"5700", 12000, 2280, "paper"},
        {"4400", 3450, 655, "drill"},
        {"6010", 999, 189, "toner"},
    };
    struct e2e_invoice head = {"100008", "G-CSV-1", "2026-11-05", "EUR", 0, NULL, false, NULL};
    e2e_add_lines(&e, &head, csv_lines, 3, csv_key);
    /* UBL: two lines at 7 % (XRechnung 01.01a's), 22.04 of tax split 20.22 + 1.82 */
    const struct uline u1[] = {{"5700", "288.79", "S", "7"}, {"6010", "26.07", "S", "7"}};
    char *k1 = add_ubl(&e, "u1.xml", false, "G-UBL-1", u1, 2, "314.86", "22.04", NULL, "336.90");
    /* three categories: 19 %, 7 % and exempt without a rate */
    const struct uline u2[] = {{"5700", "1000.00", "S", "19"},
                               {"4400", "100.00", "S", "7"},
                               {"6000", "500.00", "E", NULL}};
    char *k2 = add_ubl(&e, "u2.xml", false, "G-UBL-2", u2, 3, "1600.00", "197.00", NULL, "1797.00");
    /* ten lines at 21 % (CEN TC434 example 8): the remainders decide seven cents */
    const struct uline u3[] = {{"5700", "140.80", "S", "21"}, {"6000", "16.16", "S", "21"},
                               {"4400", "167.64", "S", "21"}, {"6010", "88.74", "S", "21"},
                               {"5400", "36.75", "S", "21"},  {"5700", "56.50", "S", "21"},
                               {"6000", "83.34", "S", "21"},  {"4400", "190.31", "S", "21"},
                               {"6010", "64.21", "S", "21"},  {"5400", "64.46", "S", "21"}};
    char *k3 = add_ubl(&e, "u3.xml", false, "G-UBL-3", u3, 10, "908.91", "190.87", NULL, "1099.78");
    /* a credit note: 28.50 + 3.7981 = 32.30 */
    const struct uline u4[] = {{"5700", "150.00", "S", "19"}, {"4400", "19.99", "S", "19"}};
    char *k4 = add_ubl(&e, "u4.xml", true, "G-UBL-CN", u4, 2, "169.99", "32.30", NULL, "202.29");
    /* a prepaid amount: the lines gross are 336.90, the payable 300.00 */
    char *k5 =
        add_ubl(&e, "u5.xml", false, "G-UBL-PREPAID", u1, 2, "314.86", "22.04", "36.90", "300.00");
    /* a charge on the whole document: 6.25 of the tax is on no line */
    const struct uline u6[] = {{"5700", "1000.00", "S", "25"}, {"4400", "200.00", "S", "25"}};
    char *k6 =
        add_ubl(&e, "u6.xml", false, "G-UBL-CHARGE", u6, 2, "1225.00", "306.25", NULL, "1531.25");

    int rc = e2e_run(&e);
    if (rc != APBOT_OK)
        fprintf(stderr, "run: %s\n", e.stats.message);
    assert_int_equal(rc, APBOT_OK);
    assert_int_equal(e.stats.stop, RUNNER_STOP_EMPTY);
    /* every completed item booked once with its lines gross; nothing for the exceptions */
    e2e_assert_invariants(&e, false);
    assert_int_equal(e2e_count(&e, MACHINE_COMPLETED), 5);
    assert_int_equal(e2e_count(&e, MACHINE_BUSINESS_EXCEPTION), 2);
    assert_int_equal(simc_stat(e.port, "save"), 5);

    /* the ground truth: the lines gross, adding up to the total; no tax of the ERP's own */
    static const struct {
        const char *what;
        const char *lines;
    } want[] = {
        {"CSV", "142.80|41.05|11.88"},
        {"UBL 7 %", "309.01|27.89"},
        {"UBL three categories", "1190.00|107.00|500.00"},
        {"UBL ten lines", "170.37|19.55|202.84|107.38|44.47|68.36|100.84|230.28|77.69|78.00"},
        {"UBL credit note", "178.50|23.79"},
    };
    const char *keys[] = {csv_key, k1, k2, k3, k4};
    char *csv = NULL;
    assert_int_equal(simc_lines(e.port, &csv), 0);
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        struct store_item it;
        char got[512];
        item_of(&e, keys[i], &it);
        assert_int_equal(it.state, MACHINE_COMPLETED);
        doc_lines(csv, it.erp_doc, got, sizeof(got));
        fprintf(stderr, "%s: %s booked with lines %s\n", want[i].what, it.erp_doc, got);
        if (strcmp(got, want[i].lines) != 0)
            fail_msg("%s: lines %s, want %s", want[i].what, got, want[i].lines);
        /* they add up to the total booked (the payable) */
        int64_t sum = 0;
        for (const char *p = got; *p;) {
            int64_t v = 0;
            char one[32];
            size_t n = strcspn(p, "|");
            snprintf(one, sizeof(one), "%.*s", (int)n, p);
            assert_int_equal(money_parse(one, "EUR", MONEY_PLAIN, MONEY_ROUND_REFUSE, &v, NULL, 0),
                             APBOT_OK);
            sum += v;
            p += n + (p[n] == '|');
        }
        assert_int_equal(sum, it.total < 0 ? -it.total : it.total);
        assert_int_equal(erp_tax(&e, it.erp_doc), 0);
        store_item_done(&it);
    }
    free(csv);

    /* the queue keeps what the vendor wrote: the tax total, and UBL lines without a tax */
    struct store_item it;
    struct invoice inv;
    char err[APBOT_ERR_LEN];
    item_of(&e, k1, &it);
    assert_int_equal(invoice_from_json(it.payload, &inv, err, sizeof(err)), APBOT_OK);
    assert_int_equal(inv.tax_total, 2204);
    assert_int_equal(inv.payable, 33690);
    assert_int_equal(inv.lines[0].tax, 0);
    assert_int_equal(inv.lines[1].tax, 0);
    assert_string_equal(inv.lines[0].tax_category, "S:7");
    invoice_done(&inv);
    store_item_done(&it);

    /* the prepaid invoice: the ERP's total against the payable, both named, nothing saved */
    item_of(&e, k5, &it);
    assert_int_equal(it.state, MACHINE_BUSINESS_EXCEPTION);
    assert_string_equal(it.reason, "the ERP computes 336.90 EUR (erp_total on step 'enter'), but "
                                   "the invoice's amount payable is 300.00 EUR: nothing was "
                                   "booked");
    store_item_done(&it);
    assert_int_equal(simc_count_natural(e.port, "100008", "G-UBL-PREPAID"), 0);
    /* the charge on the document: the line taxes cannot be told, the reason says why */
    item_of(&e, k6, &it);
    assert_int_equal(it.state, MACHINE_BUSINESS_EXCEPTION);
    fprintf(stderr, "charge: %s\n", it.reason);
    assert_non_null(strstr(it.reason, "the lines' tax at their rates is 300.00, the document's "
                                      "tax 306.25"));
    assert_non_null(strstr(it.reason, "cannot be told"));
    store_item_done(&it);
    assert_int_equal(simc_count_natural(e.port, "100008", "G-UBL-CHARGE"), 0);

    /* the day's report: every booking matched, no drift */
    char out[512];
    snprintf(out, sizeof(out), "%s/report.json", e.dir);
    const char *args[] = {"report",   "--flow", e.flow,  "--erp", e.url,
                          "--format", "json",   "--out", out,     NULL};
    pid_t pid = e2e_spawn_apbot(&e, "report.log", args);
    int code = e2e_wait_exit(pid, 60000);
    char *log = e2e_read_file(&e, "report.log");
    if (code != 0)
        fail_msg("apbot report exit %d: %s", code, log);
    free(log);
    json_t *rep = json_load_file(out, 0, NULL);
    assert_non_null(rep);
    assert_string_equal(json_string_value(json_object_get(rep, "status")), "clean");
    assert_int_equal(json_integer_value(json_object_get(rep, "matched")), 5);
    assert_int_equal(json_integer_value(json_object_get(rep, "drift")), 0);
    json_decref(rep);

    free(k1);
    free(k2);
    free(k3);
    free(k4);
    free(k5);
    free(k6);
    e2e_stop(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_e2e_money_lines_gross_classic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
