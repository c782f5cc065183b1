/*
 * test_csvin.c - the CSV reader on the fixtures in fixtures/invoices: grouping of rows into
 * invoices, sums and the total check, optional columns, ';' with BOM, RFC 4180 quoting with
 * commas and newlines, and every refusal (bad amount, too many decimals, bad date, unknown
 * currency, missing field, field count, split invoice) with its file:line and reason, while
 * the good invoices of the same file still go through; file-level failures (missing column,
 * broken quoting, missing file) accept nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apbot/invoice.h"
#include "apbot/reader.h"
#include "apbot/vendors.h"
#include "helpers/reader_sink.h"
#include "input/csvin.h"

/* Reads fixtures/invoices/<name> through reader_read_file; returns its rc. */
static int read_fixture(const char *name, const struct vendor_map *vm, struct got *g, char *err)
{
    char path[1024], sub[256];
    snprintf(sub, sizeof(sub), "invoices/%s", name);
    env_path(path, sizeof(path), "APBOT_FIXTURES", sub);
    memset(g, 0, sizeof(*g));
    struct invoice_sink sink = {got_accept, got_refuse, g};
    err[0] = '\0';
    return reader_read_file(path, vm, &sink, err, APBOT_ERR_LEN);
}

static void test_csvin_good(void **state)
{
    (void)state;
    struct got g;
    char err[APBOT_ERR_LEN];
    assert_int_equal(read_fixture("good.csv", NULL, &g, err), APBOT_OK);
    assert_int_equal(g.n_ref, 0);
    assert_int_equal(g.n_inv, 4);
    /* two rows, one invoice; total given and equal */
    assert_string_equal(g.inv[0].vendor, "100001");
    assert_string_equal(g.inv[0].number, "INV-1001");
    assert_string_equal(g.inv[0].doc, "invoice");
    assert_string_equal(g.inv[0].issue, "2026-11-03");
    assert_string_equal(g.inv[0].due, "2026-12-03");
    assert_int_equal(g.inv[0].net, 13000);
    assert_int_equal(g.inv[0].tax, 2470);
    assert_int_equal(g.inv[0].payable, 15470);
    assert_int_equal(g.inv[0].lines, 2);
    assert_where(g.inv[0].where, "good.csv:2");
    /* no total, empty doc_type = invoice, "250.5" = 250.50 */
    assert_string_equal(g.inv[1].ccy, "USD");
    assert_int_equal(g.inv[1].payable, 25050);
    assert_string_equal(g.inv[1].doc, "invoice");
    assert_string_equal(g.inv[1].due, "");
    /* 0- and 3-decimal currencies */
    assert_string_equal(g.inv[2].ccy, "JPY");
    assert_int_equal(g.inv[2].payable, 13200);
    assert_string_equal(g.inv[3].ccy, "KWD");
    assert_int_equal(g.inv[3].payable, 10125);
    assert_string_equal(g.inv[3].doc, "credit-note");
}

static void test_csvin_semicolon_bom_crlf(void **state)
{
    (void)state;
    struct got g;
    char err[APBOT_ERR_LEN];
    assert_int_equal(read_fixture("semicolon-bom.csv", NULL, &g, err), APBOT_OK);
    assert_int_equal(g.n_ref, 0);
    assert_int_equal(g.n_inv, 2);
    assert_string_equal(g.inv[0].vendor, "100005"); /* the BOM is not part of the name */
    assert_int_equal(g.inv[0].payable, 1785);
    assert_int_equal(g.inv[0].lines, 2);
    assert_string_equal(g.inv[1].ccy, "CHF");
    assert_where(g.inv[1].where, "semicolon-bom.csv:4");
}

static void test_csvin_quoted(void **state)
{
    (void)state;
    struct got g;
    char err[APBOT_ERR_LEN];
    assert_int_equal(read_fixture("quoted.csv", NULL, &g, err), APBOT_OK);
    assert_int_equal(g.n_ref, 0);
    assert_int_equal(g.n_inv, 2);
    assert_int_equal(g.inv[0].lines, 2);
    assert_int_equal(g.inv[0].payable, 357);
    /* the row after a two-line quoted field starts on physical line 5 */
    assert_where(g.inv[1].where, "quoted.csv:5");
}

static void test_csvin_bad_amount(void **state)
{
    (void)state;
    struct got g;
    char err[APBOT_ERR_LEN];
    assert_int_equal(read_fixture("bad-amount.csv", NULL, &g, err), APBOT_OK);
    assert_int_equal(g.n_inv, 2); /* BA-1 and BA-3 still go through */
    assert_string_equal(g.inv[0].number, "BA-1");
    assert_string_equal(g.inv[1].number, "BA-3");
    assert_int_equal(g.n_ref, 1); /* the whole of BA-2, once */
    assert_where(g.ref[0].where, "bad-amount.csv:4");
    assert_has(g.ref[0].reason, "BA-2");
    assert_has(g.ref[0].reason, "line_net");
    assert_has(g.ref[0].reason, "'twelve'");
}

static void test_csvin_too_many_decimals(void **state)
{
    (void)state;
    struct got g;
    char err[APBOT_ERR_LEN];
    assert_int_equal(read_fixture("too-many-decimals.csv", NULL, &g, err), APBOT_OK);
    assert_int_equal(g.n_ref, 2);
    assert_has(g.ref[0].reason, "more decimals than EUR allows (2)");
    assert_has(g.ref[1].reason, "more decimals than JPY allows (0)");
    assert_int_equal(g.n_inv, 1);
    assert_int_equal(g.inv[0].payable, 1357); /* KWD 1.234 + 0.123 */
}

static void test_csvin_total_mismatch(void **state)
{
    (void)state;
    struct got g;
    char err[APBOT_ERR_LEN];
    assert_int_equal(read_fixture("total-mismatch.csv", NULL, &g, err), APBOT_OK);
    assert_int_equal(g.n_inv, 1);
    assert_int_equal(g.n_ref, 1);
    assert_where(g.ref[0].where, "total-mismatch.csv:3");
    assert_has(g.ref[0].reason,
               "total 178.49 does not equal the sum of the lines' net + tax 178.50");
}

static void test_csvin_bad_date(void **state)
{
    (void)state;
    struct got g;
    char err[APBOT_ERR_LEN];
    assert_int_equal(read_fixture("bad-date.csv", NULL, &g, err), APBOT_OK);
    assert_int_equal(g.n_ref, 3);
    assert_has(g.ref[0].reason, "invoice_date '2026-02-30' is not a valid date");
    assert_has(g.ref[1].reason, "invoice_date '03.11.2026'");
    assert_has(g.ref[2].reason, "due_date '2026-13-01'");
    assert_where(g.ref[2].where, "bad-date.csv:4");
    assert_int_equal(g.n_inv, 1);
    assert_string_equal(g.inv[0].number, "BD-4");
}

static void test_csvin_unknown_currency(void **state)
{
    (void)state;
    struct got g;
    char err[APBOT_ERR_LEN];
    assert_int_equal(read_fixture("unknown-currency.csv", NULL, &g, err), APBOT_OK);
    assert_int_equal(g.n_ref, 1);
    assert_has(g.ref[0].reason, "unknown currency 'XYZ'");
    assert_int_equal(g.n_inv, 1);
    assert_string_equal(g.inv[0].ccy, "EUR"); /* "eur" is accepted, upper-cased */
}

static void test_csvin_missing_field(void **state)
{
    (void)state;
    struct got g;
    char err[APBOT_ERR_LEN];
    assert_int_equal(read_fixture("missing-field.csv", NULL, &g, err), APBOT_OK);
    assert_int_equal(g.n_inv, 1);
    assert_string_equal(g.inv[0].number, "MF-4");
    assert_int_equal(g.n_ref, 4);
    assert_where(g.ref[0].where, "missing-field.csv:4");
    assert_has(g.ref[0].reason, "vendor_id is empty");
    assert_where(g.ref[1].where, "missing-field.csv:3");
    assert_has(g.ref[1].reason, "line_tax is empty");
    assert_has(g.ref[2].reason, "invoice_date is empty");
    assert_has(g.ref[3].reason, "has 5 fields, the header has 6");
}

static void test_csvin_split_invoice(void **state)
{
    (void)state;
    struct got g;
    char err[APBOT_ERR_LEN];
    assert_int_equal(read_fixture("split-invoice.csv", NULL, &g, err), APBOT_OK);
    /* both parts of SP-1 / sp-1 refused (never merged, never half-booked) */
    assert_int_equal(g.n_ref, 2);
    assert_where(g.ref[0].where, "split-invoice.csv:2");
    assert_where(g.ref[1].where, "split-invoice.csv:4");
    assert_has(g.ref[0].reason, "not contiguous");
    assert_int_equal(g.n_inv, 2);
    assert_string_equal(g.inv[0].number, "SP-2");
    assert_string_equal(g.inv[1].number, "SP-3");
}

static void test_csvin_file_level_failures(void **state)
{
    (void)state;
    struct got g;
    char err[APBOT_ERR_LEN];
    assert_int_equal(read_fixture("missing-column.csv", NULL, &g, err), APBOT_E_PARSE);
    assert_has(err, "missing-column.csv:1: header lacks required column(s) currency");
    assert_int_equal(g.n_inv + g.n_ref, 0);

    /* broken quoting: nothing from the file is accepted, not even the good first row */
    assert_int_equal(read_fixture("bad-quoting.csv", NULL, &g, err), APBOT_E_PARSE);
    assert_has(err, "bad-quoting.csv:3: malformed CSV quoting");
    assert_int_equal(g.n_inv + g.n_ref, 0);

    assert_int_equal(read_fixture("no-such-file.csv", NULL, &g, err), APBOT_E_IO);
    assert_has(err, "cannot open");
}

static void test_csvin_vendor_mapping(void **state)
{
    (void)state;
    char vpath[1024];
    env_path(vpath, sizeof(vpath), "APBOT_FIXTURES", "invoices/vendors.csv");
    struct vendor_map *vm = NULL;
    char err[APBOT_ERR_LEN];
    assert_int_equal(vendor_map_load(vpath, &vm, err, sizeof(err)), APBOT_OK);
    struct got g;
    assert_int_equal(read_fixture("base-example-as-csv.csv", vm, &g, err), APBOT_OK);
    assert_int_equal(g.n_inv, 1);
    assert_string_equal(g.inv[0].vendor, "100001"); /* 0088:9482348239847239874 mapped */
    assert_int_equal(g.inv[0].payable, 165625);
    assert_int_equal(g.inv[0].net, 132500);
    assert_int_equal(g.inv[0].tax, 33125);
    /* without the map the source id is the vendor id */
    assert_int_equal(read_fixture("base-example-as-csv.csv", NULL, &g, err), APBOT_OK);
    assert_string_equal(g.inv[0].vendor, "0088:9482348239847239874");
    vendor_map_free(vm);
}

struct counts {
    size_t accepted, refused, jpy, usd, kwd, blocked, unknown;
};

static int count_accept(void *ctx, const struct invoice *inv, const char *where)
{
    (void)where;
    struct counts *c = ctx;
    c->accepted++;
    c->jpy += strcmp(inv->currency, "JPY") == 0;
    c->usd += strcmp(inv->currency, "USD") == 0;
    c->kwd += strcmp(inv->currency, "KWD") == 0;
    c->blocked += strcmp(inv->vendor_id, "100090") == 0;
    c->unknown += strcmp(inv->vendor_id, "100099") == 0;
    return 0;
}

static void count_refuse(void *ctx, const char *where, const char *reason)
{
    (void)where;
    (void)reason;
    ((struct counts *)ctx)->refused++;
}

static void count_file(const char *name, struct counts *c)
{
    char path[1024], sub[256];
    snprintf(sub, sizeof(sub), "invoices/%s", name);
    env_path(path, sizeof(path), "APBOT_FIXTURES", sub);
    memset(c, 0, sizeof(*c));
    struct invoice_sink sink = {count_accept, count_refuse, c};
    char err[APBOT_ERR_LEN];
    if (read_path_fd(csvin_read_fd, path, NULL, &sink, err, sizeof(err)))
        fail_msg("%s", err);
}

/* The committed demo files (tools/gen_invoices.c --month-end): 400 invoices, 5 refused. */
static void test_csvin_month_end(void **state)
{
    (void)state;
    struct counts c;
    count_file("month-end.csv", &c);
    assert_int_equal(c.accepted, 395);
    assert_int_equal(c.refused, 5);
    assert_int_equal(c.blocked, 2);
    assert_int_equal(c.unknown, 2);
    assert_true(c.jpy > 0 && c.usd > 0 && c.kwd > 0);
    count_file("month-end-resubmit.csv", &c);
    assert_int_equal(c.accepted, 30);
    assert_int_equal(c.refused, 0);
    count_file("month-end-conflict.csv", &c);
    assert_int_equal(c.accepted, 1);
    assert_int_equal(c.refused, 0);
}

/* Writes n bytes to a fresh temp file; the path goes into buf. */
static const char *tmp_csv(const char *data, size_t n, char *buf, size_t len)
{
    const char *t = getenv("TMPDIR");
    snprintf(buf, len, "%s/apbot-csvin-XXXXXX", t && *t ? t : "/tmp");
    int fd = mkstemp(buf);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, n), (ssize_t)n);
    close(fd);
    return buf;
}

static int read_tmp(const char *data, size_t n, struct got *g, char *err)
{
    char path[512];
    tmp_csv(data, n, path, sizeof(path));
    memset(g, 0, sizeof(*g));
    struct invoice_sink sink = {got_accept, got_refuse, g};
    int rc = reader_read_file(path, NULL, &sink, err, APBOT_ERR_LEN);
    unlink(path);
    return rc;
}

#define HDR "vendor_id,invoice_number,invoice_date,currency,line_net,line_tax"

/* Old Mac line ends (a lone CR) count lines like LF and CRLF do: refusals name the right line. */
static void test_csvin_cr_only_line_numbers(void **state)
{
    (void)state;
    static const char *const eols[] = {"\r", "\n", "\r\n"};
    for (size_t k = 0; k < 3; k++) {
        const char *e = eols[k];
        char data[1024];
        snprintf(data, sizeof(data),
                 HDR "%s100001,A-1,2026-11-03,EUR,1.00,0%s100001,A-2,2026-11-03,EUR,1.005,0%s"
                     "%s100001,A-3,2026-11-03,EUR,\"2.00\",0%s100001,A-4,2026-13-03,EUR,1,0%s",
                 e, e, e, e, e, e);
        struct got g;
        char err[APBOT_ERR_LEN];
        assert_int_equal(read_tmp(data, strlen(data), &g, err), APBOT_OK);
        assert_int_equal(g.n_inv, 2);
        assert_where(g.inv[0].where, ":2");
        assert_where(g.inv[1].where, ":5"); /* line 4 is blank */
        assert_int_equal(g.n_ref, 2);
        assert_where(g.ref[0].where, ":3");
        assert_has(g.ref[0].reason, "line 3:");
        assert_where(g.ref[1].where, ":6");
    }
}

/* A CRLF split across two reads (64 KiB) ends one line, not two. */
static void test_csvin_crlf_across_reads(void **state)
{
    (void)state;
    size_t cap = 200000, n = 0;
    char *data = malloc(cap);
    assert_non_null(data);
    n += (size_t)snprintf(data, cap, HDR ",note\r\n"); /* an unknown column: ignored */
    size_t line = 2;
    /* pad the first row (its ignored note) so that a '\r' is the last byte of the first 64 KiB read
     */
    const char *row = "100001,B-%zu,2026-11-03,EUR,1.00,0,%s\r\n";
    size_t pad = 65536 - n - strlen("100001,B-2,2026-11-03,EUR,1.00,0,") - 1;
    char *desc = malloc(pad + 1);
    assert_non_null(desc);
    memset(desc, 'x', pad);
    desc[pad] = '\0';
    n += (size_t)snprintf(data + n, cap - n, row, line++, desc);
    assert_int_equal(data[65535], '\r');
    for (; line < 10; line++)
        n += (size_t)snprintf(data + n, cap - n, row, line, "d");
    n += (size_t)snprintf(data + n, cap - n, "100001,B-%zu,2026-11-03,EUR,x,0,d\r\n", line);
    struct got g;
    char err[APBOT_ERR_LEN];
    assert_int_equal(read_tmp(data, n, &g, err), APBOT_OK);
    assert_int_equal(g.n_inv, 8);
    assert_int_equal(g.n_ref, 1);
    assert_where(g.ref[0].where, ":10");
    assert_where(g.inv[7].where, ":9");
    free(desc);
    free(data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_csvin_good),
        cmocka_unit_test(test_csvin_semicolon_bom_crlf),
        cmocka_unit_test(test_csvin_quoted),
        cmocka_unit_test(test_csvin_bad_amount),
        cmocka_unit_test(test_csvin_too_many_decimals),
        cmocka_unit_test(test_csvin_total_mismatch),
        cmocka_unit_test(test_csvin_bad_date),
        cmocka_unit_test(test_csvin_unknown_currency),
        cmocka_unit_test(test_csvin_missing_field),
        cmocka_unit_test(test_csvin_split_invoice),
        cmocka_unit_test(test_csvin_file_level_failures),
        cmocka_unit_test(test_csvin_vendor_mapping),
        cmocka_unit_test(test_csvin_month_end),
        cmocka_unit_test(test_csvin_cr_only_line_numbers),
        cmocka_unit_test(test_csvin_crlf_across_reads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
