/*
 * test_pdfin.c - the Factur-X / ZUGFeRD PDF reader: the published sample PDF (number, type,
 * currency, payable, lines; the same invoice as its XML twin), the attachment-name ranking as a
 * table, and PDFs the test writes itself: without attachments or with only other files
 * (refused: no print images), the invoice in /AF or in the /Names tree, plain or Flate, the best
 * name winning, a decompression bomb, a damaged file, an unsupported filter, an oversized file,
 * and UBL inside a Factur-X PDF (refused: Factur-X carries CII).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "apbot/invoice.h"
#include "apbot/reader.h"
#include "helpers/reader_sink.h"
#include "input/pdfin.h"

static int read_path(const char *path, struct got *g, char *err)
{
    memset(g, 0, sizeof(*g));
    struct invoice_sink sink = {got_accept, got_refuse, g};
    err[0] = '\0';
    return reader_read_file(path, NULL, &sink, err, APBOT_ERR_LEN);
}

static void test_pdfin_sample(void **state)
{
    (void)state;
    char path[1024], twin[1024], err[APBOT_ERR_LEN];
    env_path(path, sizeof(path), "APBOT_SAMPLES", "facturx/invoice_EN16931.pdf");
    env_path(twin, sizeof(twin), "APBOT_SAMPLES", "facturx/factur-x-en16931.xml");
    struct got g, x;
    assert_int_equal(read_path(path, &g, err), APBOT_OK);
    assert_int_equal(g.n_ref, 0);
    assert_int_equal(g.n_inv, 1);
    /* values read off the embedded factur-x.xml (EN 16931 profile) */
    assert_string_equal(g.inv[0].number, "F20260023");
    assert_string_equal(g.inv[0].doc, "invoice");
    assert_string_equal(g.inv[0].ccy, "EUR");
    assert_int_equal(g.inv[0].payable, 10490);
    assert_int_equal(g.inv[0].lines, 3);
    assert_where(g.inv[0].where, "invoice_EN16931.pdf#factur-x.xml#/rsm:CrossIndustryInvoice");
    /* the same invoice as the profile's XML sample */
    assert_int_equal(read_path(twin, &x, err), APBOT_OK);
    assert_string_equal(g.inv[0].key, x.inv[0].key);
    assert_int_equal(g.inv[0].net, x.inv[0].net);
    assert_int_equal(g.inv[0].tax, x.inv[0].tax);
    /* the direct entry gives the same */
    memset(&x, 0, sizeof(x));
    struct invoice_sink sink = {got_accept, got_refuse, &x};
    assert_int_equal(read_path_fd(pdfin_read_fd, path, NULL, &sink, err, sizeof(err)), APBOT_OK);
    assert_string_equal(x.inv[0].key, g.inv[0].key);
    /* libqpdf ran in the child only: this process never mapped it (nor would `apbot run`) */
    FILE *maps = fopen("/proc/self/maps", "r");
    assert_non_null(maps);
    char line[1024];
    bool mapped = false;
    while (fgets(line, sizeof(line), maps))
        mapped = mapped || strstr(line, "libqpdf") != NULL;
    fclose(maps);
    assert_false(mapped);
}

static void test_pdfin_rank_table(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int rank;
    } t[] = {
        {"factur-x.xml", 1},
        {"FACTUR-X.XML", 1},
        {"zugferd-invoice.xml", 2},
        {"ZUGFeRD-invoice.xml", 2},
        {"xrechnung.xml", 3},
        {"factur-x.xml.pdf", 0},
        {"invoice.xml", 0},
        {"Bon_de_livraison.pdf", 0},
        {"", 0},
        {NULL, 0},
        {" factur-x.xml", 0},
        {"factur-x", 0},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        if (pdfin_invoice_rank(t[i].name) != t[i].rank)
            fail_msg("'%s': rank %d want %d", t[i].name ? t[i].name : "(null)",
                     pdfin_invoice_rank(t[i].name), t[i].rank);
}

/* ---- PDFs written here ---------------------------------------------------------------------- */

struct pdf {
    char *b;
    size_t n, cap;
    size_t off[16]; /* object offsets, 1-based */
    int objs;
};

static void pdf_add(struct pdf *p, const void *data, size_t n)
{
    if (p->n + n + 1 > p->cap) {
        p->cap = (p->n + n + 1) * 2;
        p->b = realloc(p->b, p->cap);
        assert_non_null(p->b);
    }
    memcpy(p->b + p->n, data, n);
    p->n += n;
}

static void pdf_printf(struct pdf *p, const char *fmt, ...) APBOT_PRINTF(2, 3);
static void pdf_printf(struct pdf *p, const char *fmt, ...)
{
    char tmp[4096];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    assert_true(k >= 0 && (size_t)k < sizeof(tmp));
    pdf_add(p, tmp, (size_t)k);
}

static int pdf_obj(struct pdf *p)
{
    p->objs++;
    p->off[p->objs] = p->n;
    pdf_printf(p, "%d 0 obj\n", p->objs);
    return p->objs;
}

struct att {
    const char *name;
    const char *data;
    size_t len;
    const char *filter; /* NULL none, "/FlateDecode", "/ASCIIHexDecode" (data taken as given) */
};

/* A one-page PDF with the attachments in /Names /EmbeddedFiles (names) and/or /AF (af). */
static void pdf_build(struct pdf *p, const struct att *atts, int n_att, bool names, bool af)
{
    memset(p, 0, sizeof(*p));
    pdf_printf(p, "%%PDF-1.7\n%%\xE2\xE3\xCF\xD3\n");
    int spec[4];
    for (int i = 0; i < n_att; i++) {
        const struct att *a = &atts[i];
        unsigned char *data = (unsigned char *)a->data;
        uLongf zlen = a->len;
        unsigned char *z = NULL;
        if (a->filter && strcmp(a->filter, "/FlateDecode") == 0) {
            zlen = compressBound(a->len);
            z = malloc(zlen);
            assert_non_null(z);
            assert_int_equal(compress2(z, &zlen, data, a->len, 9), Z_OK);
            data = z;
        }
        int s = pdf_obj(p);
        pdf_printf(p, "<< /Type /EmbeddedFile /Subtype /text#2Fxml /Length %lu%s%s >>\nstream\n",
                   (unsigned long)zlen, a->filter ? " /Filter " : "", a->filter ? a->filter : "");
        pdf_add(p, data, zlen);
        pdf_printf(p, "\nendstream\nendobj\n");
        free(z);
        spec[i] = pdf_obj(p);
        pdf_printf(p,
                   "<< /Type /Filespec /F (%s) /UF (%s) /EF << /F %d 0 R /UF %d 0 R >> "
                   "/AFRelationship /Data >>\nendobj\n",
                   a->name, a->name, s, s);
    }
    int pages = pdf_obj(p);
    pdf_printf(p, "<< /Type /Pages /Kids [%d 0 R] /Count 1 >>\nendobj\n", pages + 1);
    pdf_obj(p);
    pdf_printf(p, "<< /Type /Page /Parent %d 0 R /MediaBox [0 0 595 842] >>\nendobj\n", pages);
    int cat = pdf_obj(p);
    pdf_printf(p, "<< /Type /Catalog /Pages %d 0 R", pages);
    if (names && n_att) {
        pdf_printf(p, " /Names << /EmbeddedFiles << /Names [");
        for (int i = 0; i < n_att; i++)
            pdf_printf(p, " (%s) %d 0 R", atts[i].name, spec[i]);
        pdf_printf(p, " ] >> >>");
    }
    if (af && n_att) {
        pdf_printf(p, " /AF [");
        for (int i = 0; i < n_att; i++)
            pdf_printf(p, " %d 0 R", spec[i]);
        pdf_printf(p, " ]");
    }
    pdf_printf(p, " >>\nendobj\n");
    size_t xref = p->n;
    pdf_printf(p, "xref\n0 %d\n0000000000 65535 f \n", p->objs + 1);
    for (int i = 1; i <= p->objs; i++)
        pdf_printf(p, "%010zu 00000 n \n", p->off[i]);
    pdf_printf(p, "trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%zu\n%%%%EOF\n", p->objs + 1,
               cat, xref);
}

static const char *pdf_file(const struct pdf *p, char *buf, size_t len)
{
    const char *t = getenv("TMPDIR");
    snprintf(buf, len, "%s/apbot-pdfin-XXXXXX", t && *t ? t : "/tmp");
    int fd = mkstemp(buf);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, p->b, p->n), (ssize_t)p->n);
    close(fd);
    return buf;
}

/* Builds and reads a PDF; returns the reader's code. */
static int read_pdf(const struct att *atts, int n_att, bool names, bool af, struct got *g,
                    char *err)
{
    struct pdf p;
    pdf_build(&p, atts, n_att, names, af);
    char path[512];
    pdf_file(&p, path, sizeof(path));
    int rc = read_path(path, g, err);
    unlink(path);
    free(p.b);
    return rc;
}

#define CII(number)                                                                                \
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<rsm:CrossIndustryInvoice "                       \
    "xmlns:rsm=\"urn:un:unece:uncefact:data:standard:CrossIndustryInvoice:100\" "                  \
    "xmlns:ram=\"urn:un:unece:uncefact:data:standard:"                                             \
    "ReusableAggregateBusinessInformationEntity:100\" "                                            \
    "xmlns:udt=\"urn:un:unece:uncefact:data:standard:UnqualifiedDataType:100\">"                   \
    "<rsm:ExchangedDocument><ram:ID>" number "</ram:ID><ram:TypeCode>380</ram:TypeCode>"           \
    "<ram:IssueDateTime><udt:DateTimeString format=\"102\">20261103</udt:DateTimeString>"          \
    "</ram:IssueDateTime></rsm:ExchangedDocument><rsm:SupplyChainTradeTransaction>"                \
    "<ram:IncludedSupplyChainTradeLineItem><ram:SpecifiedLineTradeSettlement>"                     \
    "<ram:SpecifiedTradeSettlementLineMonetarySummation><ram:LineTotalAmount>100.00"               \
    "</ram:LineTotalAmount></ram:SpecifiedTradeSettlementLineMonetarySummation>"                   \
    "</ram:SpecifiedLineTradeSettlement></ram:IncludedSupplyChainTradeLineItem>"                   \
    "<ram:ApplicableHeaderTradeAgreement><ram:SellerTradeParty><ram:Name>S</ram:Name>"             \
    "<ram:SpecifiedTaxRegistration><ram:ID schemeID=\"VA\">DE123</ram:ID>"                         \
    "</ram:SpecifiedTaxRegistration></ram:SellerTradeParty></ram:ApplicableHeaderTradeAgreement>"  \
    "<ram:ApplicableHeaderTradeSettlement><ram:InvoiceCurrencyCode>EUR</ram:InvoiceCurrencyCode>"  \
    "<ram:SpecifiedTradeSettlementHeaderMonetarySummation><ram:TaxBasisTotalAmount>100.00"         \
    "</ram:TaxBasisTotalAmount><ram:TaxTotalAmount currencyID=\"EUR\">19.00</ram:TaxTotalAmount>"  \
    "<ram:DuePayableAmount>119.00</ram:DuePayableAmount>"                                          \
    "</ram:SpecifiedTradeSettlementHeaderMonetarySummation></ram:ApplicableHeaderTradeSettlement>" \
    "</rsm:SupplyChainTradeTransaction></rsm:CrossIndustryInvoice>\n"

static const char cii_f1[] = CII("F-1");
static const char cii_x1[] = CII("X-1");

/* No invoice attached: refused with the words users see, at the file. */
static void test_pdfin_print_image_refused(void **state)
{
    (void)state;
    struct got g;
    char err[APBOT_ERR_LEN];
    assert_int_equal(read_pdf(NULL, 0, true, true, &g, err), APBOT_OK);
    assert_int_equal(g.n_inv, 0);
    assert_int_equal(g.n_ref, 1);
    assert_string_equal(g.ref[0].reason, PDFIN_NO_DATA);
    assert_has(g.ref[0].reason, "a PDF without Factur-X/ZUGFeRD data: cannot read invoices from "
                                "print images");
    /* other embedded files are not invoice data */
    struct att other = {"notes.xml", cii_f1, sizeof(cii_f1) - 1, NULL};
    assert_int_equal(read_pdf(&other, 1, true, true, &g, err), APBOT_OK);
    assert_int_equal(g.n_inv, 0);
    assert_string_equal(g.ref[0].reason, PDFIN_NO_DATA);
}

static void test_pdfin_embedded_found(void **state)
{
    (void)state;
    struct got g;
    char err[APBOT_ERR_LEN];
    struct att plain = {"factur-x.xml", cii_f1, sizeof(cii_f1) - 1, NULL};
    struct att flate = {"factur-x.xml", cii_f1, sizeof(cii_f1) - 1, "/FlateDecode"};
    /* in the name tree only, in /AF only, plain and Flate */
    for (int v = 0; v < 4; v++) {
        int rc = read_pdf(v & 1 ? &flate : &plain, 1, !(v & 2), v & 2, &g, err);
        if (rc != APBOT_OK || g.n_inv != 1)
            fail_msg("variant %d: rc %d (%s), refused %zu (%s)", v, rc, err, g.n_ref,
                     g.n_ref ? g.ref[0].reason : "");
        assert_string_equal(g.inv[0].number, "F-1");
        assert_int_equal(g.inv[0].payable, 11900);
        assert_where(g.inv[0].where, "#factur-x.xml#/rsm:CrossIndustryInvoice");
    }
    /* the best-ranked name wins, whatever the order */
    struct att two[] = {{"xrechnung.xml", cii_x1, sizeof(cii_x1) - 1, NULL},
                        {"factur-x.xml", cii_f1, sizeof(cii_f1) - 1, "/FlateDecode"}};
    assert_int_equal(read_pdf(two, 2, true, true, &g, err), APBOT_OK);
    assert_string_equal(g.inv[0].number, "F-1");
    struct att zug[] = {{"Bon.pdf", "x", 1, NULL},
                        {"ZUGFeRD-invoice.xml", cii_x1, sizeof(cii_x1) - 1, NULL}};
    assert_int_equal(read_pdf(zug, 2, true, false, &g, err), APBOT_OK);
    assert_string_equal(g.inv[0].number, "X-1");
    assert_where(g.inv[0].where, "#ZUGFeRD-invoice.xml#/rsm:CrossIndustryInvoice");
}

static void test_pdfin_refusals(void **state)
{
    (void)state;
    struct got g;
    char err[APBOT_ERR_LEN];
    /* a decompression bomb: 17 MiB of blanks in a few KB of Flate data */
    size_t big = 17u << 20;
    char *blank = malloc(big);
    assert_non_null(blank);
    memset(blank, ' ', big);
    memcpy(blank, "<a>", 3);
    struct att bomb = {"factur-x.xml", blank, big, "/FlateDecode"};
    assert_int_equal(read_pdf(&bomb, 1, true, true, &g, err), APBOT_E_LIMIT);
    assert_has(err, "larger than 16 MiB decompressed");
    free(blank);
    assert_int_equal(g.n_inv + g.n_ref, 0);

    /* a filter apbot does not decode */
    struct att hex = {"factur-x.xml", "3C613E", 6, "/ASCIIHexDecode"};
    assert_int_equal(read_pdf(&hex, 1, true, true, &g, err), APBOT_E_PARSE);
    assert_has(err, "uses filter /ASCIIHexDecode");

    /* UBL inside a Factur-X PDF: Factur-X carries CII */
    static const char ubl[] =
        "<Invoice xmlns=\"urn:oasis:names:specification:ubl:schema:xsd:Invoice-2\"/>";
    struct att u = {"factur-x.xml", ubl, sizeof(ubl) - 1, NULL};
    assert_int_equal(read_pdf(&u, 1, true, true, &g, err), APBOT_OK);
    assert_int_equal(g.n_inv, 0);
    assert_has(g.ref[0].reason, "not a CII D16B CrossIndustryInvoice");

    /* a damaged PDF: refused as a file, with qpdf's reason, never repaired */
    char path[512];
    struct pdf p = {0};
    pdf_printf(&p, "%%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\nno xref here\n%%%%EOF\n");
    pdf_file(&p, path, sizeof(path));
    assert_int_equal(read_path(path, &g, err), APBOT_E_PARSE);
    assert_has(err, "not a readable PDF");
    unlink(path);
    free(p.b);

    /* a good PDF with a broken cross-reference offset: qpdf could rebuild it by scanning the
     * file, but damaged PDFs are refused, not repaired */
    struct att ok = {"factur-x.xml", cii_f1, sizeof(cii_f1) - 1, NULL};
    pdf_build(&p, &ok, 1, true, true);
    char *sx = strstr(p.b, "startxref\n");
    assert_non_null(sx);
    char *d = sx + 10;
    while (d[1] >= '0' && d[1] <= '9')
        *d++ = '0';
    *d = '5'; /* the offset now points into the header line */
    pdf_file(&p, path, sizeof(path));
    assert_int_equal(read_path(path, &g, err), APBOT_E_PARSE);
    assert_has(err, "not a readable PDF");
    assert_int_equal(g.n_inv + g.n_ref, 0);
    unlink(path);
    free(p.b);

    /* oversized: refused before qpdf sees it (a sparse file) */
    memset(&p, 0, sizeof(p));
    pdf_printf(&p, "%%PDF-1.7\n");
    pdf_file(&p, path, sizeof(path));
    assert_int_equal(truncate(path, (off_t)PDFIN_MAX_BYTES + 1), 0);
    assert_int_equal(read_path(path, &g, err), APBOT_E_LIMIT);
    assert_has(err, "larger than 32 MiB");
    unlink(path);
    free(p.b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pdfin_sample),
        cmocka_unit_test(test_pdfin_rank_table),
        cmocka_unit_test(test_pdfin_print_image_refused),
        cmocka_unit_test(test_pdfin_embedded_found),
        cmocka_unit_test(test_pdfin_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
