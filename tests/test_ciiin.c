/*
 * test_ciiin.c - the CII D16B reader on every sample in $APBOT_SAMPLES/cii and every Factur-X
 * XML in $APBOT_SAMPLES/facturx (each file has a row of expected values, read off the documents
 * with xmllint, or is an expected refusal; a new sample without an entry fails the test); the
 * UBL and CII versions of the same case give the same identity key and totals; the profiles
 * without lines (BASIC WL booked as one line per VAT breakdown, MINIMUM refused); and synthetic
 * documents for each refusal path: type codes other than 380/381, date formats, currencyID,
 * missing amounts, a breakdown that does not add up, DOCTYPE; sub-lines; line tax; the vendor
 * map; the reader picked by content whatever the file is called. And the tax of each line as
 * a flow books it (model/linetax.h): stated where the lines give it and it adds up, else each
 * line's share of the document's tax at its rate (values worked out apart, with exact
 * fractions), or why it cannot be told.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apbot/invoice.h"
#include "apbot/reader.h"
#include "apbot/vendors.h"
#include "helpers/reader_sink.h"
#include "input/ciiin.h"

struct sample {
    const char *file, *vendor, *number, *doc, *issue, *due, *ccy;
    int64_t payable, net, tax;
    size_t lines;
};

/* Values read off the documents (ExchangedDocument, the header monetary summation, the
 * TaxTotalAmount in the document currency, IncludedSupplyChainTradeLineItem count); vendor ids
 * unmapped (scheme:value of the first seller identifier: URIID, ID/GlobalID, legal, tax). */
static const struct sample samples[] = {
    {"cii/01.01a-INVOICE_uncefact.xml", "EM:seller@email.de", "123456XX", "invoice", "2016-04-04",
     "", "EUR", 33690, 31486, 2204, 2},
    {"cii/01.21a-INVOICE_uncefact.xml", "EM:seller@email.de", "18383", "invoice", "2020-11-27",
     "2020-12-27", "EUR", 23300, 23300, 0, 1},
    {"cii/02.03a-INVOICE_uncefact.xml", "EM:rechnungsausgang@test.com", "1234567", "invoice",
     "2018-04-13", "2018-04-13", "EUR", 0, 1078125, 204844, 2},
    {"cii/03.01a-INVOICE_uncefact.xml", "EM:seller@email.de", "123456789", "invoice", "2019-02-28",
     "2019-03-14", "EUR", -22514, 68728, 11758, 14},
    {"cii/CII-BR-CO-10-RoundingIssue.xml", "VA:DE 123 456 789", "0", "invoice", "2021-03-26",
     "2021-03-26", "EUR", 0, 0, 0, 4},
    {"cii/CII_business_example_Z.xml", "57151520", "2016166", "invoice", "2015-01-09", "2015-01-09",
     "EUR", 1169387, 1169387, 0, 3},
    {"cii/CII_example5.xml", "EM:info@selco.nl", "TOSL110", "invoice", "2013-04-10", "2013-05-10",
     "DKK", 233750, 400000, 67500, 3},
    {"cii/huf_example_cii.xml", "5201", "21/001003559/996", "invoice", "2021-10-05", "2021-11-01",
     "HUF", 8785900, 6918000, 1867900, 3},
    {"facturx/factur-x-basic.xml", "EM:moi@seller.com", "F20260023", "invoice", "2026-01-31",
     "2026-03-02", "EUR", 10490, 10000, 490, 3},
    /* BASIC WL has no lines: one line per VAT breakdown (four) */
    {"facturx/factur-x-basicwl.xml", "EM:moi@seller.com", "F20260023", "invoice", "2026-01-31",
     "2026-03-02", "EUR", 10490, 10000, 490, 4},
    {"facturx/factur-x-en16931.xml", "EM:moi@seller.com", "F20260023", "invoice", "2026-01-31",
     "2026-03-02", "EUR", 10490, 10000, 490, 3},
    {"facturx/factur-x-extended.xml", "EM:moi@seller.com", "F20260023", "invoice", "2026-01-31",
     "2026-03-02", "EUR", 10490, 10000, 490, 3},
};

/* Read by other tests or refused on purpose: the PDF (test_pdfin.c) and MINIMUM (below). */
static const char *const not_in_table[] = {"facturx/invoice_EN16931.pdf",
                                           "facturx/factur-x-minimum.xml"};

static void read_path(const char *path, const struct vendor_map *vm, struct got *g, int want_rc)
{
    memset(g, 0, sizeof(*g));
    struct invoice_sink sink = {got_accept, got_refuse, g};
    char err[APBOT_ERR_LEN] = "";
    int rc = reader_read_file(path, vm, &sink, err, sizeof(err));
    if (rc != want_rc)
        fail_msg("%s: rc %d want %d (%s)", path, rc, want_rc, err);
}

static void read_sample(const char *file, const struct vendor_map *vm, struct got *g)
{
    char path[1024];
    env_path(path, sizeof(path), "APBOT_SAMPLES", file);
    read_path(path, vm, g, APBOT_OK);
}

static void check_sample(const struct sample *s, const struct got *g)
{
    if (g->n_inv != 1 || g->n_ref != 0)
        fail_msg("%s: %zu accepted, %zu refused (%s)", s->file, g->n_inv, g->n_ref,
                 g->n_ref ? g->ref[0].reason : "");
    const struct got_inv *o = &g->inv[0];
    if (strcmp(o->vendor, s->vendor) || strcmp(o->number, s->number) || strcmp(o->doc, s->doc) ||
        strcmp(o->issue, s->issue) || strcmp(o->due, s->due) || strcmp(o->ccy, s->ccy) ||
        o->payable != s->payable || o->net != s->net || o->tax != s->tax || o->lines != s->lines)
        fail_msg("%s: got %s/%s/%s %s due '%s' %s pay %lld net %lld tax %lld lines %zu", s->file,
                 o->vendor, o->number, o->doc, o->issue, o->due, o->ccy, (long long)o->payable,
                 (long long)o->net, (long long)o->tax, o->lines);
}

static void test_ciiin_every_sample(void **state)
{
    (void)state;
    struct got *g = calloc(1, sizeof(*g));
    for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
        read_sample(samples[i].file, NULL, g);
        check_sample(&samples[i], g);
    }
    free(g);
}

/* The direct entry (ciiin_read_mem, not the dispatcher) gives the same. */
/* The tax of each line: "=" as stated, "~" shares worked out from the rates, "!" cannot be told
 * (why names the cause). */
static const struct {
    const char *file;
    char how;
    size_t n;
    int64_t tax[GOT_LINE_TAXES];
    const char *why;
} sample_taxes[] = {
    {"cii/01.01a-INVOICE_uncefact.xml", '~', 2, {2022, 182}, NULL}, /* as its UBL twin */
    {"cii/01.21a-INVOICE_uncefact.xml", '=', 1, {0}, NULL},
    {"cii/02.03a-INVOICE_uncefact.xml", '~', 2, {90131, 114713}, NULL},
    {"cii/03.01a-INVOICE_uncefact.xml",
     '~',
     14,
     {3882, 494, 476, 60, 252, 2982, 1343, 350, 990, 170, 326, 52, 338, 43},
     NULL},
    {"cii/CII-BR-CO-10-RoundingIssue.xml", '=', 4, {0, 0, 0, 0}, NULL},
    {"cii/CII_business_example_Z.xml", '=', 3, {0, 0, 0}, NULL},
    {"cii/CII_example5.xml", '~', 3, {25000, 12500, 30000}, NULL},
    /* the tax rounded to whole forint: 18,678.60 at 27 % */
    {"cii/huf_example_cii.xml", '!', 0, {0}, "is 18,678.60, the document's tax 18,679.00"},
    /* a charge on the whole document (net 95.00 of lines, 100.00 in all) */
    {"facturx/factur-x-basic.xml", '!', 0, {0}, "is 4.20, the document's tax 4.90"},
    {"facturx/factur-x-basicwl.xml", '=', 4, {220, 0, 270, 0}, NULL}, /* the breakdowns' */
    {"facturx/factur-x-en16931.xml", '!', 0, {0}, "is 4.20, the document's tax 4.90"},
    {"facturx/factur-x-extended.xml", '!', 0, {0}, "is 4.20, the document's tax 4.90"},
};

static void test_ciiin_line_taxes(void **state)
{
    (void)state;
    struct got *g = calloc(1, sizeof(*g));
    assert_int_equal(sizeof(sample_taxes) / sizeof(sample_taxes[0]),
                     sizeof(samples) / sizeof(samples[0])); /* every sample has its row */
    for (size_t i = 0; i < sizeof(sample_taxes) / sizeof(sample_taxes[0]); i++) {
        read_sample(sample_taxes[i].file, NULL, g);
        assert_int_equal(g->n_inv, 1);
        const struct got_inv *o = &g->inv[0];
        const char *file = sample_taxes[i].file;
        if (sample_taxes[i].how == '!') {
            if (o->tax_ok || !strstr(o->tax_why, sample_taxes[i].why))
                fail_msg("%s: ok %d, why '%s' lacks '%s'", file, o->tax_ok, o->tax_why,
                         sample_taxes[i].why);
            continue;
        }
        if (!o->tax_ok || o->tax_derived != (sample_taxes[i].how == '~') ||
            o->lines != sample_taxes[i].n)
            fail_msg("%s: ok %d derived %d lines %zu (%s)", file, o->tax_ok, o->tax_derived,
                     o->lines, o->tax_why);
        int64_t sum = 0;
        for (size_t k = 0; k < o->lines; k++) {
            if (o->line_tax[k] != sample_taxes[i].tax[k])
                fail_msg("%s: line %zu tax %lld, want %lld", file, k + 1, (long long)o->line_tax[k],
                         (long long)sample_taxes[i].tax[k]);
            sum += o->line_tax[k];
        }
        assert_int_equal(sum, o->tax);
    }
    free(g);
}

static void test_ciiin_direct_entry(void **state)
{
    (void)state;
    struct got g;
    memset(&g, 0, sizeof(g));
    char path[1024], err[APBOT_ERR_LEN];
    env_path(path, sizeof(path), "APBOT_SAMPLES", samples[0].file);
    struct invoice_sink sink = {got_accept, got_refuse, &g};
    assert_int_equal(read_path_mem(ciiin_read_mem, path, NULL, &sink, err, sizeof(err)), APBOT_OK);
    check_sample(&samples[0], &g);
}

static void test_ciiin_no_sample_forgotten(void **state)
{
    (void)state;
    const char *dirs[] = {"cii", "facturx"};
    size_t n = 0;
    for (size_t k = 0; k < 2; k++) {
        char dir[1024];
        env_path(dir, sizeof(dir), "APBOT_SAMPLES", dirs[k]);
        DIR *d = opendir(dir);
        assert_non_null(d);
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            char rel[512];
            snprintf(rel, sizeof(rel), "%s/%s", dirs[k], e->d_name);
            n++;
            bool known = false;
            for (size_t i = 0; !known && i < sizeof(samples) / sizeof(samples[0]); i++)
                known = strcmp(rel, samples[i].file) == 0;
            for (size_t i = 0; !known && i < sizeof(not_in_table) / sizeof(not_in_table[0]); i++)
                known = strcmp(rel, not_in_table[i]) == 0;
            if (!known)
                fail_msg("sample %s has no expected values in test_ciiin.c", rel);
        }
        closedir(d);
    }
    assert_int_equal(n, sizeof(samples) / sizeof(samples[0]) +
                            sizeof(not_in_table) / sizeof(not_in_table[0]));
}

/* MINIMUM: totals only, no lines, no VAT breakdown: refused, with the profile named. */
static void test_ciiin_minimum_refused(void **state)
{
    (void)state;
    struct got g;
    read_sample("facturx/factur-x-minimum.xml", NULL, &g);
    assert_int_equal(g.n_inv, 0);
    assert_int_equal(g.n_ref, 1);
    assert_where(g.ref[0].where, "factur-x-minimum.xml#/rsm:CrossIndustryInvoice/"
                                 "rsm:SupplyChainTradeTransaction");
    assert_has(g.ref[0].reason, "no invoice lines and no VAT breakdown");
    assert_has(g.ref[0].reason, "MINIMUM");
}

/* BASIC WL: one line per VAT breakdown, each with its basis, tax and category; they add up to
 * the document's totals. */
struct lines_seen {
    size_t n;
    int64_t net[8], tax[8];
    char cat[8][32], desc[8][96];
};

static int lines_accept(void *ctx, const struct invoice *inv, const char *where)
{
    (void)where;
    struct lines_seen *s = ctx;
    for (size_t i = 0; i < inv->n_lines && s->n < 8; i++, s->n++) {
        s->net[s->n] = inv->lines[i].net;
        s->tax[s->n] = inv->lines[i].tax;
        snprintf(s->cat[s->n], sizeof(s->cat[0]), "%s",
                 inv->lines[i].tax_category ? inv->lines[i].tax_category : "");
        snprintf(s->desc[s->n], sizeof(s->desc[0]), "%s",
                 inv->lines[i].description ? inv->lines[i].description : "");
    }
    return 0;
}

static void lines_refuse(void *ctx, const char *where, const char *reason)
{
    (void)ctx;
    fail_msg("refused: %s: %s", where, reason);
}

static void test_ciiin_basicwl_breakdown_lines(void **state)
{
    (void)state;
    char path[1024], err[APBOT_ERR_LEN];
    env_path(path, sizeof(path), "APBOT_SAMPLES", "facturx/factur-x-basicwl.xml");
    struct lines_seen s;
    memset(&s, 0, sizeof(s));
    struct invoice_sink sink = {lines_accept, lines_refuse, &s};
    assert_int_equal(reader_read_file(path, NULL, &sink, err, sizeof(err)), APBOT_OK);
    assert_int_equal(s.n, 4);
    int64_t net = 0, tax = 0;
    for (size_t i = 0; i < s.n; i++) {
        net += s.net[i];
        tax += s.tax[i];
        assert_has(s.desc[i], "VAT breakdown");
        assert_has(s.desc[i], s.cat[i]);
        assert_true(strlen(s.cat[i]) > 0);
    }
    assert_int_equal(net, 10000); /* TaxBasisTotalAmount 100.00 */
    assert_int_equal(tax, 490);   /* TaxTotalAmount 4.90 */
}

/* The same case written in UBL and in CII: same identity key, same totals and currency. */
static void test_ciiin_same_as_ubl(void **state)
{
    (void)state;
    static const char *const pairs[][2] = {
        {"ubl/01.01a-INVOICE_ubl.xml", "cii/01.01a-INVOICE_uncefact.xml"},
        {"ubl/01.21a-INVOICE_ubl.xml", "cii/01.21a-INVOICE_uncefact.xml"},
        {"ubl/02.03a-INVOICE_ubl.xml", "cii/02.03a-INVOICE_uncefact.xml"},
        {"ubl/03.01a-INVOICE_ubl.xml", "cii/03.01a-INVOICE_uncefact.xml"},
        {"ubl/ubl-tc434-example5.xml", "cii/CII_example5.xml"},
    };
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        struct got u, c;
        read_sample(pairs[i][0], NULL, &u);
        read_sample(pairs[i][1], NULL, &c);
        assert_int_equal(u.n_inv, 1);
        assert_int_equal(c.n_inv, 1);
        if (strcmp(u.inv[0].key, c.inv[0].key) != 0 || u.inv[0].payable != c.inv[0].payable ||
            u.inv[0].net != c.inv[0].net || u.inv[0].tax != c.inv[0].tax ||
            strcmp(u.inv[0].ccy, c.inv[0].ccy) != 0 || strcmp(u.inv[0].doc, c.inv[0].doc) != 0 ||
            strcmp(u.inv[0].issue, c.inv[0].issue) != 0 || u.inv[0].lines != c.inv[0].lines)
            fail_msg("%s vs %s: key %s/%s payable %lld/%lld net %lld/%lld tax %lld/%lld",
                     pairs[i][0], pairs[i][1], u.inv[0].key, c.inv[0].key,
                     (long long)u.inv[0].payable, (long long)c.inv[0].payable,
                     (long long)u.inv[0].net, (long long)c.inv[0].net, (long long)u.inv[0].tax,
                     (long long)c.inv[0].tax);
    }
}

static void test_ciiin_vendor_mapping(void **state)
{
    (void)state;
    char vpath[1024];
    env_path(vpath, sizeof(vpath), "APBOT_FIXTURES", "invoices/vendors.csv");
    struct vendor_map *vm = NULL;
    char err[APBOT_ERR_LEN];
    assert_int_equal(vendor_map_load(vpath, &vm, err, sizeof(err)), APBOT_OK);
    struct got u, c;
    /* the map holds "em:info@selco.nl": UBL EndpointID and CII URIID both find it */
    read_sample("ubl/ubl-tc434-example5.xml", vm, &u);
    read_sample("cii/CII_example5.xml", vm, &c);
    assert_string_equal(u.inv[0].vendor, "100009");
    assert_string_equal(c.inv[0].vendor, "100009");
    assert_string_equal(u.inv[0].key, c.inv[0].key);
    /* ubl-tc434-example10's legal CompanyID 57151520 is mapped; the CII business example Z
     * carries the same legal organisation id */
    read_sample("cii/CII_business_example_Z.xml", vm, &c);
    assert_string_equal(c.inv[0].vendor, "100008");
    vendor_map_free(vm);
}

/* ---- synthetic documents ---------------------------------------------------------------- */

static char tmpdir[256];

static int setup_tmp(void **state)
{
    (void)state;
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof(tmpdir), "%s/apbot-ciiin-XXXXXX", t && *t ? t : "/tmp");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_tmp(void **state)
{
    (void)state;
    DIR *d = opendir(tmpdir);
    if (d) {
        struct dirent *e;
        char p[512];
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            snprintf(p, sizeof(p), "%s/%s", tmpdir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    return rmdir(tmpdir);
}

static void synth(const char *name, const char *xml, struct got *g, int want_rc)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(xml, f) >= 0);
    assert_int_equal(fclose(f), 0);
    read_path(path, NULL, g, want_rc);
}

#define CII_OPEN                                                                                   \
    "<rsm:CrossIndustryInvoice "                                                                   \
    "xmlns:rsm=\"urn:un:unece:uncefact:data:standard:CrossIndustryInvoice:100\" "                  \
    "xmlns:ram=\"urn:un:unece:uncefact:data:standard:"                                             \
    "ReusableAggregateBusinessInformationEntity:100\" "                                            \
    "xmlns:udt=\"urn:un:unece:uncefact:data:standard:UnqualifiedDataType:100\">"
#define CII_CLOSE "</rsm:CrossIndustryInvoice>"
#define DOC(type, date)                                                                            \
    "<rsm:ExchangedDocument><ram:ID>C-1</ram:ID><ram:TypeCode>" type "</ram:TypeCode>"             \
    "<ram:IssueDateTime><udt:DateTimeString format=\"102\">" date "</udt:DateTimeString>"          \
    "</ram:IssueDateTime></rsm:ExchangedDocument>"
#define SELLER                                                                                     \
    "<ram:ApplicableHeaderTradeAgreement><ram:SellerTradeParty><ram:Name>S</ram:Name>"             \
    "<ram:GlobalID schemeID=\"0088\">4000001</ram:GlobalID></ram:SellerTradeParty>"                \
    "</ram:ApplicableHeaderTradeAgreement>"
#define LINE(amount, extra)                                                                        \
    "<ram:IncludedSupplyChainTradeLineItem><ram:AssociatedDocumentLineDocument>"                   \
    "<ram:LineID>1</ram:LineID>" extra "</ram:AssociatedDocumentLineDocument>"                     \
    "<ram:SpecifiedTradeProduct><ram:Name>Paper</ram:Name></ram:SpecifiedTradeProduct>"            \
    "<ram:SpecifiedLineTradeSettlement><ram:SpecifiedTradeSettlementLineMonetarySummation>"        \
    "<ram:LineTotalAmount>" amount "</ram:LineTotalAmount>"                                        \
    "</ram:SpecifiedTradeSettlementLineMonetarySummation></ram:SpecifiedLineTradeSettlement>"      \
    "</ram:IncludedSupplyChainTradeLineItem>"
#define SETTLE(ccy, breakdown, sums)                                                               \
    "<ram:ApplicableHeaderTradeSettlement><ram:InvoiceCurrencyCode>" ccy                           \
    "</ram:InvoiceCurrencyCode>" breakdown                                                         \
    "<ram:SpecifiedTradeSettlementHeaderMonetarySummation>" sums                                   \
    "</ram:SpecifiedTradeSettlementHeaderMonetarySummation></ram:ApplicableHeaderTradeSettlement>"
#define SUMS(net, tax, pay)                                                                        \
    "<ram:TaxBasisTotalAmount>" net "</ram:TaxBasisTotalAmount><ram:TaxTotalAmount "               \
    "currencyID=\"EUR\">" tax "</ram:TaxTotalAmount><ram:DuePayableAmount>" pay                    \
    "</ram:DuePayableAmount>"
#define BREAKDOWN(basis, calc, cat, rate)                                                          \
    "<ram:ApplicableTradeTax><ram:CalculatedAmount>" calc "</ram:CalculatedAmount>"                \
    "<ram:TypeCode>VAT</ram:TypeCode><ram:BasisAmount>" basis "</ram:BasisAmount>"                 \
    "<ram:CategoryCode>" cat "</ram:CategoryCode><ram:RateApplicablePercent>" rate                 \
    "</ram:RateApplicablePercent></ram:ApplicableTradeTax>"
#define TX(lines, settle)                                                                          \
    "<rsm:SupplyChainTradeTransaction>" lines SELLER settle "</rsm:SupplyChainTradeTransaction>"
#define GOOD_TX TX(LINE("100.00", ""), SETTLE("EUR", "", SUMS("100.00", "19.00", "119.00")))

static void test_ciiin_type_codes(void **state)
{
    (void)state;
    struct got g;
    synth("380.xml", CII_OPEN DOC("380", "20261103") GOOD_TX CII_CLOSE, &g, APBOT_OK);
    assert_int_equal(g.n_inv, 1);
    assert_string_equal(g.inv[0].doc, "invoice");
    assert_string_equal(g.inv[0].vendor, "0088:4000001");
    assert_string_equal(g.inv[0].issue, "2026-11-03");
    assert_int_equal(g.inv[0].payable, 11900);
    assert_int_equal(g.inv[0].net, 10000);
    assert_int_equal(g.inv[0].tax, 1900);
    assert_where(g.inv[0].where, "380.xml#/rsm:CrossIndustryInvoice");
    struct got g380 = g;

    synth("381.xml", CII_OPEN DOC("381", "20261103") GOOD_TX CII_CLOSE, &g, APBOT_OK);
    assert_int_equal(g.n_inv, 1);
    assert_string_equal(g.inv[0].doc, "credit-note");
    assert_string_not_equal(g.inv[0].key, g380.inv[0].key);

    static const char *const refused[] = {"384", "389", "326", "751", "80"};
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        char xml[4096];
        snprintf(xml, sizeof(xml), "%s%s%s%s%s%s", CII_OPEN,
                 "<rsm:ExchangedDocument><ram:ID>C-1</ram:ID><ram:TypeCode>", refused[i],
                 "</ram:TypeCode><ram:IssueDateTime><udt:DateTimeString format=\"102\">20261103"
                 "</udt:DateTimeString></ram:IssueDateTime></rsm:ExchangedDocument>",
                 GOOD_TX, CII_CLOSE);
        char path[512];
        snprintf(path, sizeof(path), "%s/tc.xml", tmpdir);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(xml, f);
        fclose(f);
        read_path(path, NULL, &g, APBOT_OK);
        assert_int_equal(g.n_inv, 0);
        assert_int_equal(g.n_ref, 1);
        assert_where(g.ref[0].where,
                     "#/rsm:CrossIndustryInvoice/rsm:ExchangedDocument/ram:TypeCode");
        char want[64];
        snprintf(want, sizeof(want), "type code '%s' is not read", refused[i]);
        assert_has(g.ref[0].reason, want);
    }
    synth("notc.xml",
          CII_OPEN
          "<rsm:ExchangedDocument><ram:ID>C-1</ram:ID></rsm:ExchangedDocument>" GOOD_TX CII_CLOSE,
          &g, APBOT_OK);
    assert_where(g.ref[0].where, "rsm:ExchangedDocument/ram:TypeCode");
    assert_has(g.ref[0].reason, "missing document type code");
}

static void test_ciiin_dates(void **state)
{
    (void)state;
    struct got g;
    synth("d1.xml", CII_OPEN DOC("380", "20260230") GOOD_TX CII_CLOSE, &g, APBOT_OK);
    assert_int_equal(g.n_ref, 1);
    assert_where(g.ref[0].where, "rsm:ExchangedDocument/ram:IssueDateTime/udt:DateTimeString");
    assert_has(g.ref[0].reason, "'20260230' is not a valid date");
    synth("d2.xml", CII_OPEN DOC("380", "2026-11-03") GOOD_TX CII_CLOSE, &g, APBOT_OK);
    assert_has(g.ref[0].reason, "is not a valid date (YYYYMMDD, format 102)");
    synth("d3.xml",
          CII_OPEN
          "<rsm:ExchangedDocument><ram:ID>C-1</ram:ID><ram:TypeCode>380</ram:TypeCode>"
          "<ram:IssueDateTime><udt:DateTimeString format=\"610\">202611"
          "</udt:DateTimeString></ram:IssueDateTime></rsm:ExchangedDocument>" GOOD_TX CII_CLOSE,
          &g, APBOT_OK);
    assert_has(g.ref[0].reason, "date format '610' is not read");
    /* a due date from the payment terms */
    synth("due.xml",
          CII_OPEN DOC("380", "20261103")
              TX(LINE("100.00", ""),
                 SETTLE("EUR",
                        "<ram:SpecifiedTradePaymentTerms><ram:DueDateDateTime><udt:DateTimeString "
                        "format=\"102\">20261203</udt:DateTimeString></ram:DueDateDateTime>"
                        "</ram:SpecifiedTradePaymentTerms>",
                        SUMS("100.00", "19.00", "119.00"))) CII_CLOSE,
          &g, APBOT_OK);
    assert_int_equal(g.n_inv, 1);
    assert_string_equal(g.inv[0].due, "2026-12-03");
}

static void test_ciiin_amounts(void **state)
{
    (void)state;
    struct got g;
    /* too many decimals in the payable amount */
    synth("dec.xml",
          CII_OPEN DOC("380", "20261103")
              TX(LINE("100.00", ""), SETTLE("EUR", "", SUMS("100.00", "19.00", "119.001")))
                  CII_CLOSE,
          &g, APBOT_OK);
    assert_int_equal(g.n_ref, 1);
    assert_where(g.ref[0].where, "ram:SpecifiedTradeSettlementHeaderMonetarySummation/"
                                 "ram:DuePayableAmount");
    assert_has(g.ref[0].reason, "more decimals than EUR allows");
    /* a foreign currencyID on the payable amount */
    synth("ccy.xml",
          CII_OPEN DOC("380", "20261103")
              TX(LINE("100.00", ""),
                 SETTLE("EUR", "",
                        "<ram:DuePayableAmount currencyID=\"SEK\">1.00</ram:DuePayableAmount>"))
                  CII_CLOSE,
          &g, APBOT_OK);
    assert_has(g.ref[0].reason, "currencyID 'SEK' differs from the document currency EUR");
    /* no DuePayableAmount */
    synth("nopay.xml",
          CII_OPEN DOC("380", "20261103")
              TX(LINE("100.00", ""), SETTLE("EUR", "",
                                            "<ram:TaxBasisTotalAmount>1.00"
                                            "</ram:TaxBasisTotalAmount>")) CII_CLOSE,
          &g, APBOT_OK);
    assert_where(g.ref[0].where, "ram:DuePayableAmount");
    assert_has(g.ref[0].reason, "missing");
    /* no currency */
    synth("noccy.xml",
          CII_OPEN DOC("380", "20261103")
              TX(LINE("100.00", ""), "<ram:ApplicableHeaderTradeSettlement/>") CII_CLOSE,
          &g, APBOT_OK);
    assert_where(g.ref[0].where, "ram:InvoiceCurrencyCode");
    /* a bad line amount names the line */
    synth("line.xml",
          CII_OPEN DOC("380", "20261103") TX(LINE("100.00", "") LINE("abc", ""),
                                             SETTLE("EUR", "", SUMS("100.00", "19.00", "119.00")))
              CII_CLOSE,
          &g, APBOT_OK);
    assert_where(g.ref[0].where,
                 "ram:IncludedSupplyChainTradeLineItem[2]/ram:SpecifiedLineTradeSettlement/"
                 "ram:SpecifiedTradeSettlementLineMonetarySummation/ram:LineTotalAmount");
    /* a tax total in another currency (the VAT accounting currency) is not this document's */
    synth("vatccy.xml",
          CII_OPEN DOC("380", "20261103")
              TX(LINE("100.00", ""),
                 SETTLE("EUR", "",
                        SUMS("100.00", "19.00", "119.00") "<ram:TaxTotalAmount currencyID=\"SEK\">"
                                                          "210.00</ram:TaxTotalAmount>")) CII_CLOSE,
          &g, APBOT_OK);
    assert_int_equal(g.n_inv, 1);
    assert_int_equal(g.inv[0].tax, 1900);
}

static void test_ciiin_lines(void **state)
{
    (void)state;
    struct got g;
    /* a sub-line (ParentLineID) is part of its parent; an INFORMATION line is not booked */
    synth("sub.xml",
          CII_OPEN DOC("380", "20261103")
              TX(LINE("100.00", "") LINE("60.00", "<ram:ParentLineID>1</ram:ParentLineID>") LINE(
                     "5.00", "<ram:LineStatusReasonCode>INFORMATION</ram:LineStatusReasonCode>"),
                 SETTLE("EUR", "", SUMS("100.00", "19.00", "119.00"))) CII_CLOSE,
          &g, APBOT_OK);
    assert_int_equal(g.n_inv, 1);
    assert_int_equal(g.inv[0].lines, 1);
    /* no lines: one line per VAT breakdown; they must add up to the totals */
    synth("wl.xml",
          CII_OPEN DOC("380", "20261103") TX("", SETTLE("EUR",
                                                        BREAKDOWN("60.00", "11.40", "S", "19")
                                                            BREAKDOWN("40.00", "7.60", "S", "19"),
                                                        SUMS("100.00", "19.00", "119.00")))
              CII_CLOSE,
          &g, APBOT_OK);
    assert_int_equal(g.n_inv, 1);
    assert_int_equal(g.inv[0].lines, 2);
    synth("wlbad.xml",
          CII_OPEN DOC("380", "20261103")
              TX("", SETTLE("EUR", BREAKDOWN("60.00", "11.40", "S", "19"),
                            SUMS("100.00", "19.00", "119.00"))) CII_CLOSE,
          &g, APBOT_OK);
    assert_int_equal(g.n_inv, 0);
    assert_where(g.ref[0].where, "rsm:SupplyChainTradeTransaction/"
                                 "ram:ApplicableHeaderTradeSettlement");
    assert_has(g.ref[0].reason, "does not add up to the totals (net 100.00, tax 19.00)");
    synth("none.xml",
          CII_OPEN DOC("380", "20261103") TX("", SETTLE("EUR", "", SUMS("1.00", "0", "1.00")))
              CII_CLOSE,
          &g, APBOT_OK);
    assert_int_equal(g.n_inv, 0);
}

/* A line that gives its tax and its rate (CII lets it): stated taxes that add up are taken as
 * they are; lines that give none share the tax by their rates, a credit note (381) as written;
 * some lines stating a tax that does not add up cannot be told. */
#define TLINE(amount, cat, rate, calc)                                                             \
    "<ram:IncludedSupplyChainTradeLineItem><ram:AssociatedDocumentLineDocument>"                   \
    "<ram:LineID>1</ram:LineID></ram:AssociatedDocumentLineDocument>"                              \
    "<ram:SpecifiedTradeProduct><ram:Name>Paper</ram:Name></ram:SpecifiedTradeProduct>"            \
    "<ram:SpecifiedLineTradeSettlement><ram:ApplicableTradeTax><ram:TypeCode>VAT</"                \
    "ram:TypeCode>" calc "<ram:CategoryCode>" cat "</ram:CategoryCode>" rate                       \
    "</ram:ApplicableTradeTax>"                                                                    \
    "<ram:SpecifiedTradeSettlementLineMonetarySummation>"                                          \
    "<ram:LineTotalAmount>" amount "</ram:LineTotalAmount>"                                        \
    "</ram:SpecifiedTradeSettlementLineMonetarySummation></ram:SpecifiedLineTradeSettlement>"      \
    "</ram:IncludedSupplyChainTradeLineItem>"
#define RATE(r) "<ram:RateApplicablePercent>" r "</ram:RateApplicablePercent>"
#define CALC(c) "<ram:CalculatedAmount>" c "</ram:CalculatedAmount>"

static void test_ciiin_line_taxes_synthetic(void **state)
{
    (void)state;
    struct got g;
    /* shares: 33.33 and 66.67 at 7.5 % is 2.49975 + 5.00025 = 7.50 */
    synth("share.xml",
          CII_OPEN DOC("381", "20261103")
              TX(TLINE("33.33", "S", RATE("7.5"), "") TLINE("66.67", "S", RATE("7.5"), "")
                     TLINE("10.00", "E", "", ""),
                 SETTLE("EUR", "", SUMS("110.00", "7.50", "117.50"))) CII_CLOSE,
          &g, APBOT_OK);
    assert_int_equal(g.n_inv, 1);
    assert_true(g.inv[0].tax_ok && g.inv[0].tax_derived);
    assert_int_equal(g.inv[0].line_tax[0], 250); /* the larger remainder, .975 */
    assert_int_equal(g.inv[0].line_tax[1], 500);
    assert_int_equal(g.inv[0].line_tax[2], 0); /* exempt, no rate given */
    /* stated and adding up: as stated, even when the rate would say otherwise */
    synth("stated.xml",
          CII_OPEN DOC("380", "20261103") TX(TLINE("50.00", "S", RATE("19"), CALC("9.51"))
                                                 TLINE("50.00", "S", RATE("19"), CALC("9.49")),
                                             SETTLE("EUR", "", SUMS("100.00", "19.00", "119.00")))
              CII_CLOSE,
          &g, APBOT_OK);
    assert_true(g.inv[0].tax_ok && !g.inv[0].tax_derived);
    assert_int_equal(g.inv[0].line_tax[0], 951);
    assert_int_equal(g.inv[0].line_tax[1], 949);
    /* one line states a tax, the other none: cannot be told */
    synth("partial.xml",
          CII_OPEN DOC("380", "20261103")
              TX(TLINE("50.00", "S", RATE("19"), CALC("9.50")) TLINE("50.00", "S", RATE("19"), ""),
                 SETTLE("EUR", "", SUMS("100.00", "19.00", "119.00"))) CII_CLOSE,
          &g, APBOT_OK);
    assert_false(g.inv[0].tax_ok);
    assert_has(g.inv[0].tax_why, "the invoice's lines state 9.50 of tax in all, the invoice 19.00");
    /* a standard-rated line without its rate: cannot be told, the line named */
    synth("norate.xml",
          CII_OPEN DOC("380", "20261103")
              TX(TLINE("50.00", "S", RATE("19"), "") TLINE("50.00", "S", "", ""),
                 SETTLE("EUR", "", SUMS("100.00", "19.00", "119.00"))) CII_CLOSE,
          &g, APBOT_OK);
    assert_false(g.inv[0].tax_ok);
    assert_has(g.inv[0].tax_why, "line 2 has the tax category 'S' without a rate");
}

static void test_ciiin_refusals(void **state)
{
    (void)state;
    struct got g;
    /* no seller identifier and no map */
    synth("noseller.xml",
          CII_OPEN DOC("380", "20261103") "<rsm:SupplyChainTradeTransaction>" LINE(
              "1.00",
              "") "<ram:ApplicableHeaderTradeAgreement><ram:SellerTradeParty><ram:Name>S</ram:Name>"
                  "</ram:SellerTradeParty></ram:ApplicableHeaderTradeAgreement>" SETTLE(
                      "EUR", "",
                      SUMS("1.00", "0", "1.00")) "</rsm:SupplyChainTradeTransaction>" CII_CLOSE,
          &g, APBOT_OK);
    assert_int_equal(g.n_inv, 0);
    /* DOCTYPE refused, entity never expanded */
    synth("dtd.xml",
          "<?xml version=\"1.0\"?><!DOCTYPE x [<!ENTITY a \"C-9\">]>" CII_OPEN
          "<rsm:ExchangedDocument><ram:ID>&a;</ram:ID></rsm:ExchangedDocument>" CII_CLOSE,
          &g, APBOT_OK);
    assert_int_equal(g.n_inv, 0);
    assert_has(g.ref[0].reason, "DOCTYPE");
    /* other XML */
    synth("other.xml", "<x:Order xmlns:x=\"urn:example\"/>", &g, APBOT_OK);
    assert_has(g.ref[0].reason, "nor a CII D16B CrossIndustryInvoice");
    /* the CII reader refuses a UBL document by its root */
    char path[512], err[APBOT_ERR_LEN];
    env_path(path, sizeof(path), "APBOT_SAMPLES", "ubl/base-example.xml");
    memset(&g, 0, sizeof(g));
    struct invoice_sink sink = {got_accept, got_refuse, &g};
    assert_int_equal(read_path_mem(ciiin_read_mem, path, NULL, &sink, err, sizeof(err)), APBOT_OK);
    assert_int_equal(g.n_ref, 1);
    assert_has(g.ref[0].reason, "not a CII D16B CrossIndustryInvoice");
}

/* The content decides: a CII document named .csv is read as CII, a CSV named .xml as CSV. */
static void test_ciiin_by_content(void **state)
{
    (void)state;
    struct got g;
    synth("looks-like.csv", CII_OPEN DOC("380", "20261103") GOOD_TX CII_CLOSE, &g, APBOT_OK);
    assert_int_equal(g.n_inv, 1);
    assert_string_equal(g.inv[0].number, "C-1");
    synth("looks-like.xml",
          "vendor_id,invoice_number,invoice_date,currency,line_net,line_tax\n"
          "100001,X-1,2026-11-03,EUR,1.00,0\n",
          &g, APBOT_OK);
    assert_int_equal(g.n_inv, 1);
    assert_string_equal(g.inv[0].number, "X-1");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ciiin_every_sample),
        cmocka_unit_test(test_ciiin_line_taxes),
        cmocka_unit_test(test_ciiin_direct_entry),
        cmocka_unit_test(test_ciiin_no_sample_forgotten),
        cmocka_unit_test(test_ciiin_minimum_refused),
        cmocka_unit_test(test_ciiin_basicwl_breakdown_lines),
        cmocka_unit_test(test_ciiin_same_as_ubl),
        cmocka_unit_test(test_ciiin_vendor_mapping),
        cmocka_unit_test(test_ciiin_type_codes),
        cmocka_unit_test(test_ciiin_dates),
        cmocka_unit_test(test_ciiin_amounts),
        cmocka_unit_test(test_ciiin_lines),
        cmocka_unit_test(test_ciiin_line_taxes_synthetic),
        cmocka_unit_test(test_ciiin_refusals),
        cmocka_unit_test(test_ciiin_by_content),
    };
    return cmocka_run_group_tests(tests, setup_tmp, teardown_tmp);
}
