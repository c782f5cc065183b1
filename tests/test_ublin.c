/*
 * test_ublin.c - the UBL reader on every published sample in $APBOT_SAMPLES/ubl (the in-repo
 * copy, tests/data/einvoices/ubl; each file is either in the table of expected values, read off
 * the documents themselves, or in the list of expected refusals; a new sample without an entry
 * fails the test), the vendor mapping
 * (scheme:value, value only, seller name), the identities samples share, and synthetic
 * documents for each refusal path: DOCTYPE, not UBL, no seller id, bad or missing amounts,
 * foreign currencyID, malformed XML; plus type code 381 on an Invoice. And the tax of each
 * line as a flow books it (model/linetax.h): UBL lines state none, so each sample's lines get
 * their share of its tax at their rates (the values worked out apart, with exact fractions),
 * or the sample is named why not (a charge or allowance on the whole document).
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

struct sample {
    const char *file, *vendor, *number, *doc, *issue, *due, *ccy;
    int64_t payable, net, tax;
    size_t lines;
};

/* Values read off the documents (LegalMonetaryTotal, TaxTotal in the document currency,
 * top-level lines); vendor ids unmapped (scheme:value of the first seller identifier). */
static const struct sample samples[] = {
    {"01.01a-INVOICE_ubl.xml", "EM:seller@email.de", "123456XX", "invoice", "2016-04-04", "", "EUR",
     33690, 31486, 2204, 2},
    {"01.18a-INVOICE_ubl.xml", "EM:seller@email.de", "PRG1502112", "invoice", "2015-04-24", "",
     "EUR", 1055530, 887000, 168530, 4},
    {"01.20a-INVOICE_ubl.xml", "EM:seller@email.de", "1234567890", "invoice", "2021-01-25",
     "2021-02-04", "EUR", 35700, 30000, 5700, 2},
    {"01.21a-INVOICE_ubl.xml", "EM:seller@email.de", "18383", "invoice", "2020-11-27", "2020-12-27",
     "EUR", 23300, 23300, 0, 1},
    {"02.03a-INVOICE_ubl.xml", "EM:rechnungsausgang@test.com", "1234567", "invoice", "2018-04-13",
     "2018-04-13", "EUR", 0, 1078125, 204844, 2},
    {"02.05a-INVOICE_ubl.xml", "EM:rechnungsausgang@test.com", "1234567", "invoice", "2019-08-20",
     "2019-08-29", "EUR", 257641, 231194, 26447, 23},
    {"03.01a-INVOICE_ubl.xml", "EM:seller@email.de", "123456789", "invoice", "2019-02-28",
     "2019-03-14", "EUR", -22514, 68728, 11758, 14},
    {"03.05a-INVOICE_ubl.xml", "EM:seller@email.de", "123456789", "invoice", "2018-06-05",
     "2019-03-14", "EUR", 5317159, 4468201, 848958, 3},
    {"03.06a-INVOICE_ubl.xml", "EM:seller@email.de", "112233", "invoice", "2021-04-23",
     "2021-04-28", "EUR", 180400, 150000, 30400, 4},
    {"04.04a-INVOICE_ubl.xml", "EM:seller@email.de", "17794", "invoice", "2021-07-14", "", "EUR",
     417544, 350877, 66667, 1},
    {"Allowance-example.xml", "0088:7300010000001", "Snippet1", "invoice", "2017-11-13",
     "2017-12-01", "EUR", 612500, 590000, 122500, 3},
    {"BIS3_Invoice_negativ.XML", "0184:DK12345678", "12345", "invoice", "2019-01-25", "2019-02-24",
     "DKK", -78217943, -62574354, -15643589, 1},
    {"FT G2G_TD01 con Allegato, Bonifico e Split Payment.xml", "0201:UF6WX8", "1316/85", "invoice",
     "2020-02-13", "", "EUR", 124600, 124600, 27412, 1},
    {"GR-base-example-correct.xml", "9933:801399030", "061828591|01/10/2020|0|1.1|0|1", "invoice",
     "2020-10-01", "2020-12-01", "EUR", 165625, 132500, 33125, 2},
    {"Norwegian-example-1.xml", "0192:123456785", "TOSL108", "invoice", "2013-06-30", "2013-07-20",
     "NOK", 80200, 143650, 36528, 5},
    {"UBL-CreditNote-2.1-Example.xml", "GLN:1234567890123", "TOSL108", "credit-note", "2009-12-15",
     "", "EUR", 72900, 143650, 29220, 5},
    {"UBL-Invoice-2.1-Example.xml", "GLN:1234567890123", "TOSL108", "invoice", "2009-12-15",
     "2009-12-31", "EUR", 72900, 143650, 29220, 5},
    {"base-creditnote-correction.xml", "0088:9482348239847239874", "Snippet1", "credit-note",
     "2017-11-13", "", "EUR", 165625, 132500, 33125, 2},
    {"base-example.xml", "0088:9482348239847239874", "Snippet1", "invoice", "2017-11-13",
     "2017-12-01", "EUR", 165625, 132500, 33125, 2},
    {"base-negative-inv-correction.xml", "0088:9482348239847239874", "Correction1", "invoice",
     "2017-11-13", "2017-12-01", "EUR", -165625, -132500, -33125, 2},
    {"issue116.xml", "0007:5566778899", "2018210", "invoice", "2018-02-08", "2018-03-07", "SEK",
     83000, 70000, 13000, 4},
    {"ubl-tc434-creditnote1.xml", "0201:0000000196", "018304 / 28865", "credit-note", "2019-09-23",
     "", "EUR", 10011, 10011, 0, 1},
    {"ubl-tc434-example10.xml", "57151520", "12115118", "invoice", "2015-01-09", "2015-01-09",
     "EUR", 25033, 22960, 2073, 20},
    {"ubl-tc434-example5.xml", "EM:info@selco.nl", "TOSL110", "invoice", "2013-04-10", "2013-05-10",
     "DKK", 233750, 400000, 67500, 3},
    {"ubl-tc434-example8.xml", "17131139", "1100512149", "invoice", "2014-11-10", "2014-11-24",
     "EUR", 109978, 90891, 19087, 10},
    {"vat-category-E.xml", "0088:7300010000001", "Vat-Z", "invoice", "2018-08-30", "", "GBP",
     120000, 120000, 0, 1},
    {"vat-category-O.xml", "0088:7300010000001", "Vat-O", "invoice", "2018-08-30", "", "SEK",
     320000, 320000, 0, 1},
    {"vat-category-Z.xml", "0088:7300010000001", "Vat-Z", "invoice", "2018-08-30", "", "GBP",
     120000, 120000, 0, 1},
};

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
    char path[1024], sub[512];
    snprintf(sub, sizeof(sub), "ubl/%s", file);
    env_path(path, sizeof(path), "APBOT_SAMPLES", sub);
    read_path(path, vm, g, APBOT_OK);
}

static void test_ublin_every_sample(void **state)
{
    (void)state;
    struct got *g = calloc(1, sizeof(*g));
    for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
        const struct sample *s = &samples[i];
        read_sample(s->file, NULL, g);
        if (g->n_inv != 1 || g->n_ref != 0)
            fail_msg("%s: %zu accepted, %zu refused (%s)", s->file, g->n_inv, g->n_ref,
                     g->n_ref ? g->ref[0].reason : "");
        const struct got_inv *o = &g->inv[0];
        if (strcmp(o->vendor, s->vendor) || strcmp(o->number, s->number) ||
            strcmp(o->doc, s->doc) || strcmp(o->issue, s->issue) || strcmp(o->due, s->due) ||
            strcmp(o->ccy, s->ccy) || o->payable != s->payable || o->net != s->net ||
            o->tax != s->tax || o->lines != s->lines)
            fail_msg("%s: got %s/%s/%s %s due '%s' %s pay %lld net %lld tax %lld lines %zu",
                     s->file, o->vendor, o->number, o->doc, o->issue, o->due, o->ccy,
                     (long long)o->payable, (long long)o->net, (long long)o->tax, o->lines);
    }
    free(g);
}

/* The tax of each line of a sample: "=" taxes as stated (a sample without tax), "~" shares
 * worked out from the rates, "!" cannot be told (why names the cause). */
struct sample_taxes {
    const char *file;
    char how;
    size_t n;
    int64_t tax[GOT_LINE_TAXES];
    const char *why;
};

static const struct sample_taxes sample_taxes[] = {
    {"01.01a-INVOICE_ubl.xml", '~', 2, {2022, 182}, NULL},
    {"01.18a-INVOICE_ubl.xml", '~', 4, {127300, 28500, 8550, 4180}, NULL},
    {"01.20a-INVOICE_ubl.xml", '~', 2, {-1900, 7600}, NULL}, /* a negative line */
    {"01.21a-INVOICE_ubl.xml", '=', 1, {0}, NULL},           /* reverse charge */
    {"02.03a-INVOICE_ubl.xml", '~', 2, {90131, 114713}, NULL},
    {"02.05a-INVOICE_ubl.xml",
     '!',
     0,
     {0},
     "is 283.47 to 283.62 (each line rounded either way), "
     "the document's tax 264.47"},
    {"03.01a-INVOICE_ubl.xml",
     '~',
     14,
     {3882, 494, 476, 60, 252, 2982, 1343, 350, 990, 170, 326, 52, 338, 43},
     NULL},
    {"03.05a-INVOICE_ubl.xml", '~', 3, {622, 131335, 717001}, NULL},
    {"03.06a-INVOICE_ubl.xml", '~', 4, {19000, 1900, 0, 9500}, NULL}, /* S and Z */
    {"04.04a-INVOICE_ubl.xml", '~', 1, {66667}, NULL},
    {"Allowance-example.xml", '~', 3, {100000, 0, 22500}, NULL}, /* an exempt line */
    {"BIS3_Invoice_negativ.XML", '~', 1, {-15643589}, NULL},     /* the mirror of 156,435.885 */
    {"FT G2G_TD01 con Allegato, Bonifico e Split Payment.xml", '~', 1, {27412}, NULL},
    {"GR-base-example-correct.xml", '!', 0, {0}, "is 325.00, the document's tax 331.25"},
    {"Norwegian-example-1.xml", '~', 5, {31825, -59, 74, 0, 4688}, NULL},
    {"UBL-CreditNote-2.1-Example.xml", '~', 5, {25460, -40, 50, 0, 3750}, NULL},
    {"UBL-Invoice-2.1-Example.xml", '~', 5, {25460, -40, 50, 0, 3750}, NULL},
    {"base-creditnote-correction.xml", '!', 0, {0}, "is 325.00, the document's tax 331.25"},
    {"base-example.xml", '!', 0, {0}, "is 325.00, the document's tax 331.25"},
    {"base-negative-inv-correction.xml", '!', 0, {0}, "is -325.00, the document's tax -331.25"},
    {"issue116.xml", '~', 4, {600, 600, 1800, 10000}, NULL}, /* three rates */
    {"ubl-tc434-creditnote1.xml", '=', 1, {0}, NULL},        /* exempt */
    {"ubl-tc434-example10.xml",
     '~',
     20,
     {119, 59, 50, 87, 210, 210, 64, 9, 86, 50, 99, 60, 20, 227, 23, 160, 196, 391, 613, -660},
     NULL},
    {"ubl-tc434-example5.xml", '~', 3, {25000, 12500, 30000}, NULL},
    {"ubl-tc434-example8.xml",
     '~',
     10,
     {2957, 339, 3520, 1864, 772, 1186, 1750, 3997, 1348, 1354},
     NULL},
    {"vat-category-E.xml", '=', 1, {0}, NULL},
    {"vat-category-O.xml", '=', 1, {0}, NULL}, /* no rate at all */
    {"vat-category-Z.xml", '=', 1, {0}, NULL},
};

/* Checks one sample's line taxes against its row; shared in shape with test_ciiin. */
static void check_taxes(const struct got_inv *o, const struct sample_taxes *t)
{
    if (t->how == '!') {
        if (o->tax_ok)
            fail_msg("%s: line taxes told, want '%s'", t->file, t->why);
        if (!strstr(o->tax_why, t->why) || !strstr(o->tax_why, "cannot be told"))
            fail_msg("%s: why '%s' lacks '%s'", t->file, o->tax_why, t->why);
        return;
    }
    if (!o->tax_ok || o->tax_derived != (t->how == '~') || o->lines != t->n)
        fail_msg("%s: ok %d derived %d lines %zu (%s)", t->file, o->tax_ok, o->tax_derived,
                 o->lines, o->tax_why);
    int64_t sum = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (o->line_tax[i] != t->tax[i])
            fail_msg("%s: line %zu tax %lld, want %lld", t->file, i + 1, (long long)o->line_tax[i],
                     (long long)t->tax[i]);
        sum += o->line_tax[i];
    }
    if (sum != o->tax)
        fail_msg("%s: the lines' tax %lld is not the invoice's %lld", t->file, (long long)sum,
                 (long long)o->tax);
}

static void test_ublin_line_taxes(void **state)
{
    (void)state;
    struct got *g = calloc(1, sizeof(*g));
    assert_int_equal(sizeof(sample_taxes) / sizeof(sample_taxes[0]),
                     sizeof(samples) / sizeof(samples[0])); /* every sample has its row */
    for (size_t i = 0; i < sizeof(sample_taxes) / sizeof(sample_taxes[0]); i++) {
        read_sample(sample_taxes[i].file, NULL, g);
        assert_int_equal(g->n_inv, 1);
        check_taxes(&g->inv[0], &sample_taxes[i]);
    }
    free(g);
}

static void test_ublin_trivial_refused(void **state)
{
    (void)state;
    struct got g;
    read_sample("UBL-Invoice-2.1-Example-Trivial.xml", NULL, &g);
    assert_int_equal(g.n_inv, 0);
    assert_int_equal(g.n_ref, 1);
    assert_where(g.ref[0].where,
                 "UBL-Invoice-2.1-Example-Trivial.xml#/Invoice/cac:AccountingSupplierParty/"
                 "cac:Party");
    assert_has(g.ref[0].reason, "no seller identifier");
}

/* Every file in the directory has an entry: nothing is silently untested. */
static void test_ublin_no_sample_forgotten(void **state)
{
    (void)state;
    char dir[1024];
    env_path(dir, sizeof(dir), "APBOT_SAMPLES", "ubl");
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    size_t n = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        n++;
        bool known = strcmp(e->d_name, "UBL-Invoice-2.1-Example-Trivial.xml") == 0;
        for (size_t i = 0; !known && i < sizeof(samples) / sizeof(samples[0]); i++)
            known = strcmp(e->d_name, samples[i].file) == 0;
        if (!known)
            fail_msg("sample %s has no expected values in test_ublin.c", e->d_name);
    }
    closedir(d);
    assert_int_equal(n, sizeof(samples) / sizeof(samples[0]) + 1);
}

static void test_ublin_vendor_mapping(void **state)
{
    (void)state;
    char vpath[1024];
    env_path(vpath, sizeof(vpath), "APBOT_FIXTURES", "invoices/vendors.csv");
    struct vendor_map *vm = NULL;
    char err[APBOT_ERR_LEN];
    assert_int_equal(vendor_map_load(vpath, &vm, err, sizeof(err)), APBOT_OK);
    struct got g;
    read_sample("base-example.xml", vm, &g); /* 0088:9482348239847239874, scheme:value form */
    assert_string_equal(g.inv[0].vendor, "100001");
    read_sample("BIS3_Invoice_negativ.XML", vm, &g); /* map holds the value without scheme */
    assert_string_equal(g.inv[0].vendor, "100005");
    read_sample("ubl-tc434-example5.xml", vm, &g); /* map holds "em:info@selco.nl" */
    assert_string_equal(g.inv[0].vendor, "100009");
    read_sample("ubl-tc434-example10.xml", vm, &g); /* legal CompanyID, no EndpointID */
    assert_string_equal(g.inv[0].vendor, "100008");
    read_sample("UBL-Invoice-2.1-Example-Trivial.xml", vm, &g); /* name not mapped */
    assert_int_equal(g.n_ref, 1);
    vendor_map_free(vm);
}

/* Writes text to dir/name and returns the path in buf. */
static const char *write_tmp(const char *dir, const char *name, const char *text, char *buf,
                             size_t len)
{
    snprintf(buf, len, "%s/%s", dir, name);
    FILE *f = fopen(buf, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
    return buf;
}

static char tmpdir[256];

static int setup_tmp(void **state)
{
    (void)state;
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof(tmpdir), "%s/apbot-ublin-XXXXXX", t && *t ? t : "/tmp");
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

#define NS                                                                                         \
    "xmlns=\"urn:oasis:names:specification:ubl:schema:xsd:Invoice-2\" "                            \
    "xmlns:cac=\"urn:oasis:names:specification:ubl:schema:xsd:CommonAggregateComponents-2\" "      \
    "xmlns:cbc=\"urn:oasis:names:specification:ubl:schema:xsd:CommonBasicComponents-2\""
#define SELLER                                                                                     \
    "<cac:AccountingSupplierParty><cac:Party><cbc:EndpointID schemeID=\"0088\">123"                \
    "</cbc:EndpointID></cac:Party></cac:AccountingSupplierParty>"
#define LINE                                                                                       \
    "<cac:InvoiceLine><cbc:ID>1</cbc:ID><cbc:InvoicedQuantity>3</cbc:InvoicedQuantity>"            \
    "<cbc:LineExtensionAmount currencyID=\"EUR\">100.00</cbc:LineExtensionAmount>"                 \
    "<cac:Price><cbc:PriceAmount currencyID=\"EUR\">33.333333333</cbc:PriceAmount></cac:Price>"    \
    "</cac:InvoiceLine>"

static void synth(const char *name, const char *xml, struct got *g, int want_rc)
{
    char path[512];
    read_path(write_tmp(tmpdir, name, xml, path, sizeof(path)), NULL, g, want_rc);
}

static void test_ublin_synthetic(void **state)
{
    (void)state;
    struct got g;

    /* a minimal good one; 9-decimal unit price is fine; 381 on an Invoice -> credit-note */
    synth("ok381.xml",
          "<Invoice " NS "><cbc:ID>X-1</cbc:ID><cbc:IssueDate>2026-11-03</cbc:IssueDate>"
          "<cbc:InvoiceTypeCode>381</cbc:InvoiceTypeCode>"
          "<cbc:DocumentCurrencyCode>EUR</cbc:DocumentCurrencyCode>" SELLER
          "<cac:LegalMonetaryTotal><cbc:PayableAmount currencyID=\"EUR\">119.00"
          "</cbc:PayableAmount></cac:LegalMonetaryTotal>" LINE "</Invoice>",
          &g, APBOT_OK);
    assert_int_equal(g.n_inv, 1);
    assert_string_equal(g.inv[0].doc, "credit-note");
    assert_string_equal(g.inv[0].vendor, "0088:123");
    assert_int_equal(g.inv[0].payable, 11900);
    assert_int_equal(g.inv[0].net, 11900); /* no TaxExclusive/LineExtension, no tax: payable */

    /* too many decimals in PayableAmount: refused with its element path */
    synth("dec.xml",
          "<Invoice " NS "><cbc:ID>X-2</cbc:ID><cbc:IssueDate>2026-11-03</cbc:IssueDate>"
          "<cbc:DocumentCurrencyCode>EUR</cbc:DocumentCurrencyCode>" SELLER
          "<cac:LegalMonetaryTotal><cbc:PayableAmount currencyID=\"EUR\">119.001"
          "</cbc:PayableAmount></cac:LegalMonetaryTotal>" LINE "</Invoice>",
          &g, APBOT_OK);
    assert_int_equal(g.n_ref, 1);
    assert_where(g.ref[0].where, "dec.xml#/Invoice/cac:LegalMonetaryTotal/cbc:PayableAmount");
    assert_has(g.ref[0].reason, "more decimals than EUR allows");

    /* foreign currencyID on the payable amount */
    synth("ccy.xml",
          "<Invoice " NS "><cbc:ID>X-3</cbc:ID><cbc:IssueDate>2026-11-03</cbc:IssueDate>"
          "<cbc:DocumentCurrencyCode>EUR</cbc:DocumentCurrencyCode>" SELLER
          "<cac:LegalMonetaryTotal><cbc:PayableAmount currencyID=\"SEK\">1.00"
          "</cbc:PayableAmount></cac:LegalMonetaryTotal>" LINE "</Invoice>",
          &g, APBOT_OK);
    assert_int_equal(g.n_ref, 1);
    assert_has(g.ref[0].reason, "currencyID 'SEK' differs from the document currency EUR");

    /* missing PayableAmount, missing ID, bad date */
    synth("nopay.xml",
          "<Invoice " NS
          "><cbc:ID>X-4</cbc:ID><cbc:IssueDate>2026-11-03</cbc:IssueDate>" SELLER LINE "</Invoice>",
          &g, APBOT_OK);
    assert_where(g.ref[0].where, "nopay.xml#/Invoice/cac:LegalMonetaryTotal/cbc:PayableAmount");
    assert_has(g.ref[0].reason, "missing");
    synth("noid.xml", "<Invoice " NS "><cbc:IssueDate>2026-11-03</cbc:IssueDate></Invoice>", &g,
          APBOT_OK);
    assert_where(g.ref[0].where, "noid.xml#/Invoice/cbc:ID");
    synth("date.xml",
          "<Invoice " NS "><cbc:ID>X-5</cbc:ID><cbc:IssueDate>2026-02-30</cbc:IssueDate>"
          "</Invoice>",
          &g, APBOT_OK);
    assert_where(g.ref[0].where, "date.xml#/Invoice/cbc:IssueDate");
    assert_has(g.ref[0].reason, "'2026-02-30' is not a valid date");

    /* a bad line amount names the line */
    synth("line.xml",
          "<Invoice " NS "><cbc:ID>X-6</cbc:ID><cbc:IssueDate>2026-11-03</cbc:IssueDate>"
          "<cbc:DocumentCurrencyCode>EUR</cbc:DocumentCurrencyCode>" SELLER
          "<cac:LegalMonetaryTotal><cbc:PayableAmount currencyID=\"EUR\">1.00"
          "</cbc:PayableAmount></cac:LegalMonetaryTotal>" LINE
          "<cac:InvoiceLine><cbc:LineExtensionAmount currencyID=\"EUR\">abc"
          "</cbc:LineExtensionAmount></cac:InvoiceLine></Invoice>",
          &g, APBOT_OK);
    assert_where(g.ref[0].where, "line.xml#/Invoice/cac:InvoiceLine[2]/cbc:LineExtensionAmount");

    /* DOCTYPE (entity tricks) refused, entity never expanded */
    synth("dtd.xml",
          "<?xml version=\"1.0\"?><!DOCTYPE Invoice [<!ENTITY x \"X-7\">]>"
          "<Invoice " NS "><cbc:ID>&x;</cbc:ID></Invoice>",
          &g, APBOT_OK);
    assert_int_equal(g.n_inv, 0);
    assert_has(g.ref[0].reason, "DOCTYPE");

    /* XML that is not UBL */
    synth("other.xml", "<rsm:CrossIndustryInvoice xmlns:rsm=\"urn:x\"/>", &g, APBOT_OK);
    assert_has(g.ref[0].reason, "not a UBL 2.1 Invoice or CreditNote");

    /* not well-formed: a file-level failure, nothing accepted or refused */
    synth("broken.xml", "<Invoice " NS "><cbc:ID>X</cbc:ID>", &g, APBOT_E_PARSE);
    assert_int_equal(g.n_inv + g.n_ref, 0);
}

static void test_ublin_shared_identities(void **state)
{
    (void)state;
    struct got a, b;
    /* vat-category-E copies its ID from -Z: same identity, different content */
    read_sample("vat-category-E.xml", NULL, &a);
    read_sample("vat-category-Z.xml", NULL, &b);
    assert_string_equal(a.inv[0].key, b.inv[0].key);
    assert_string_not_equal(a.inv[0].fp, b.inv[0].fp);
    /* the credit note correcting base-example has the same number but another identity */
    read_sample("base-example.xml", NULL, &a);
    read_sample("base-creditnote-correction.xml", NULL, &b);
    assert_string_not_equal(a.inv[0].key, b.inv[0].key);
    /* reading the same file twice gives the same key and fingerprint */
    read_sample("base-example.xml", NULL, &b);
    assert_string_equal(a.inv[0].key, b.inv[0].key);
    assert_string_equal(a.inv[0].fp, b.inv[0].fp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ublin_every_sample),
        cmocka_unit_test(test_ublin_line_taxes),
        cmocka_unit_test(test_ublin_trivial_refused),
        cmocka_unit_test(test_ublin_no_sample_forgotten),
        cmocka_unit_test(test_ublin_vendor_mapping),
        cmocka_unit_test(test_ublin_synthetic),
        cmocka_unit_test(test_ublin_shared_identities),
    };
    return cmocka_run_group_tests(tests, setup_tmp, teardown_tmp);
}
