/*
 * test_docmatch.c - the one matching rule as a table: vendor, currency, amount in minor units,
 * the sign flip allowed only for credit notes, records that show no (readable) amount; plus
 * the amount as the queue writes it and the sentences that name each difference.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "apbot/erp.h"
#include "apbot/store.h"
#include "erp/docmatch.h"

#define V DOCMATCH_VENDOR
#define C DOCMATCH_CURRENCY
#define A DOCMATCH_AMOUNT
#define U DOCMATCH_AMOUNT_UNREADABLE
#define Z DOCMATCH_NO_AMOUNT

struct row {
    const char *what;
    /* the invoice */
    const char *vendor;
    const char *currency;
    int64_t total;
    bool credit_note;
    /* the ERP record */
    const char *erp_vendor;
    const char *erp_currency;
    const char *erp_text;
    bool has_amount;
    int64_t erp_amount;
    int erp_exponent;
    unsigned want;
};

/* clang-format off */
static const struct row table[] = {
    {"same everything",              "100001", "EUR", 11900, false, "100001", "EUR", "119,00", true, 11900, 2, 0},
    {"ERP shows no vendor/currency", "100001", "EUR", 11900, false, NULL, NULL, "119,00", true, 11900, 2, 0},
    {"one cent more",                "100001", "EUR", 11900, false, "100001", "EUR", "119,01", true, 11901, 2, A},
    {"sign flip, invoice",           "100001", "EUR", 11900, false, "100001", "EUR", "-119,00", true, -11900, 2, A},
    {"sign flip, credit note",       "100001", "EUR", -11900, true, "100001", "EUR", "119,00", true, 11900, 2, 0},
    {"credit note as written",       "100001", "EUR", -11900, true, "100001", "EUR", "-119,00", true, -11900, 2, 0},
    {"credit note, other amount",    "100001", "EUR", -11900, true, "100001", "EUR", "118,00", true, 11800, 2, A},
    {"other vendor",                 "100001", "EUR", 11900, false, "100002", "EUR", "119,00", true, 11900, 2, V},
    {"other currency",               "100001", "EUR", 11900, false, "100001", "USD", "119,00", true, 11900, 2, C},
    {"other exponent",               "100001", "EUR", 11900, false, "100001", NULL, "11900", true, 11900, 0, A},
    {"unreadable amount",            "100001", "EUR", 11900, false, "100001", "EUR", "1l9,00", false, 0, 0, U},
    {"no amount shown",              "100001", "EUR", 11900, false, "100001", "EUR", NULL, false, 0, 0, Z},
    {"empty amount cell",            "100001", "EUR", 11900, false, "100001", "EUR", "", false, 0, 0, Z},
    {"everything differs",           "100001", "EUR", 11900, false, "100009", "JPY", "5", true, 5, 2, V | C | A},
    {"zero invoice",                 "100001", "EUR", 0, false, "100001", "EUR", "0,00", true, 0, 2, 0},
};
/* clang-format on */

static void fill(const struct row *r, struct docmatch_invoice *inv, struct docmatch_record *rec)
{
    memset(inv, 0, sizeof(*inv));
    memset(rec, 0, sizeof(*rec));
    inv->vendor_id = r->vendor;
    inv->currency = r->currency;
    inv->exponent = 2;
    inv->total = r->total;
    inv->credit_note = r->credit_note;
    rec->doc = "AP-2026-000001";
    rec->vendor = r->erp_vendor;
    rec->currency = r->erp_currency;
    rec->amount_text = r->erp_text;
    rec->has_amount = r->has_amount;
    rec->amount = r->erp_amount;
    rec->exponent = r->erp_exponent;
}

static void test_docmatch_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        struct docmatch_invoice inv;
        struct docmatch_record rec;
        char why[512];
        unsigned got;

        fill(&table[i], &inv, &rec);
        got = docmatch_compare(&inv, &rec);
        if (got != table[i].want)
            fail_msg("%s: diff 0x%x, want 0x%x", table[i].what, got, table[i].want);
        docmatch_describe(got, &inv, &rec, why, sizeof(why));
        /* a sentence exactly when something differs */
        if ((got == DOCMATCH_SAME) != (why[0] == '\0'))
            fail_msg("%s: sentence '%s' for diff 0x%x", table[i].what, why, got);
    }
}

static void test_docmatch_sentences(void **state)
{
    struct docmatch_invoice inv;
    struct docmatch_record rec;
    char why[512];
    (void)state;

    fill(&table[2], &inv, &rec);
    docmatch_describe(docmatch_compare(&inv, &rec), &inv, &rec, why, sizeof(why));
    assert_string_equal(why, "119.01 EUR, but the invoice is 119.00 EUR");

    fill(&table[13], &inv, &rec);
    docmatch_describe(docmatch_compare(&inv, &rec), &inv, &rec, why, sizeof(why));
    assert_non_null(strstr(why, "vendor 100009, but the invoice's vendor is 100001"));
    assert_non_null(strstr(why, "; currency JPY, but the invoice is in EUR"));
    assert_non_null(strstr(why, "; 0.05 JPY, but the invoice is 119.00 EUR"));

    fill(&table[10], &inv, &rec);
    docmatch_describe(docmatch_compare(&inv, &rec), &inv, &rec, why, sizeof(why));
    assert_non_null(strstr(why, "cannot be read ('1l9,00')"));

    /* cut, never overrun */
    fill(&table[13], &inv, &rec);
    docmatch_describe(docmatch_compare(&inv, &rec), &inv, &rec, why, 12);
    assert_int_equal(strlen(why), 11);
}

static void test_docmatch_as_queued(void **state)
{
    struct docmatch_invoice inv = {.vendor_id = "1", .currency = "EUR", .exponent = 2};
    (void)state;

    inv.total = -500;
    inv.credit_note = true;
    assert_int_equal(docmatch_as_queued(&inv, 500), -500); /* shown positive */
    assert_int_equal(docmatch_as_queued(&inv, -500), -500);
    assert_int_equal(docmatch_as_queued(&inv, 400), -400); /* another amount, same sign rule */
    inv.credit_note = false;
    inv.total = 500;
    assert_int_equal(docmatch_as_queued(&inv, -500), -500); /* an invoice is never flipped */
    assert_int_equal(docmatch_as_queued(&inv, 0), 0);
}

static void test_docmatch_from_rows(void **state)
{
    struct store_item it;
    struct erp_row row;
    struct docmatch_invoice inv;
    struct docmatch_record rec;
    (void)state;

    memset(&it, 0, sizeof(it));
    memset(&row, 0, sizeof(row));
    it.vendor_id = "100001";
    snprintf(it.currency, sizeof(it.currency), "EUR");
    snprintf(it.doc_type, sizeof(it.doc_type), "credit-note");
    it.exponent = 2;
    it.total = -2500;
    row.doc = "AP-1";
    row.vendor = "100001";
    row.amount_text = "25,00";
    row.has_amount = true;
    row.amount = 2500;
    row.exponent = 2;
    inv = docmatch_invoice_of(it.vendor_id, it.currency, it.exponent, it.total, it.doc_type);
    docmatch_record_of_row(&row, &rec);
    assert_true(inv.credit_note);
    assert_string_equal(rec.doc, "AP-1");
    assert_int_equal(docmatch_compare(&inv, &rec), DOCMATCH_SAME);
    snprintf(it.doc_type, sizeof(it.doc_type), "invoice");
    inv = docmatch_invoice_of(it.vendor_id, it.currency, it.exponent, it.total, it.doc_type);
    assert_int_equal(docmatch_compare(&inv, &rec), DOCMATCH_AMOUNT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_docmatch_table),
        cmocka_unit_test(test_docmatch_sentences),
        cmocka_unit_test(test_docmatch_as_queued),
        cmocka_unit_test(test_docmatch_from_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
