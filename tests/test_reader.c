/*
 * test_reader.c - choosing and opening an input file, and the bounds every XML reader keeps:
 * reader_sniff as a table (content, never the name, decides); FIFOs, directories and devices
 * refused without blocking and without taking a pipe's data; UTF-16 XML read (BOM or not) and
 * UTF-16 text refused; an oversized file refused before parsing; node, comment, text and depth
 * bombs stopped while parsing; a 12 MB base64 attachment read; and no libxml2 text on stderr.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apbot/invoice.h"
#include "apbot/reader.h"
#include "apbot/vendors.h"
#include "helpers/reader_sink.h"
#include "input/reader-int.h"
#include "input/xmlin-int.h"

/* ---- reader_sniff: the table -------------------------------------------------------------- */

struct sniff_row {
    const char *bytes;
    size_t len; /* 0: strlen */
    enum reader_format want;
};

#define ROW(s, f)                                                                                  \
    {                                                                                              \
        s, sizeof(s) - 1, f                                                                        \
    }

static const struct sniff_row sniff_table[] = {
    ROW("", READER_EMPTY),
    ROW("  \r\n\t", READER_EMPTY),
    ROW("\xEF\xBB\xBF", READER_EMPTY),
    ROW("\xEF\xBB\xBF \n", READER_EMPTY),
    ROW("<Invoice/>", READER_XML),
    ROW("\xEF\xBB\xBF<?xml version='1.0'?>", READER_XML),
    ROW("\n\t <!-- comment first -->", READER_XML),
    ROW("vendor_id,invoice_number\n", READER_CSV),
    ROW("x<y", READER_CSV),
    ROW("\xEF\xBB\xBFvendor_id;invoice_number", READER_CSV),
    ROW("%PDF-1.7\n", READER_PDF),
    ROW("junk before\n%PDF-1.4\n", READER_PDF),
    ROW("<Invoice><cbc:Note>%PDF-1.4</cbc:Note>", READER_XML),
    ROW("\xEF\xBB\xBF<a>%PDF-", READER_XML),
    ROW("\xFF\xFE<\0?\0x\0", READER_XML_UTF16LE),
    ROW("\xFE\xFF\0<\0?", READER_XML_UTF16BE),
    ROW("<\0?\0x\0m\0l\0", READER_XML_UTF16LE),
    ROW("\0<\0?\0x", READER_XML_UTF16BE),
    ROW("\xFF\xFE \0\n\0<\0", READER_XML_UTF16LE),
    ROW("\xFF\xFEv\0e\0n\0", READER_UTF16_TEXT),
    ROW("v\0e\0n\0d\0", READER_UTF16_TEXT),
    ROW("\0v\0e", READER_UTF16_TEXT),
    ROW("\xFF\xFE", READER_EMPTY),
    ROW("\xFE\xFF\0 ", READER_EMPTY),
};

static void test_reader_sniff_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(sniff_table) / sizeof(sniff_table[0]); i++) {
        const struct sniff_row *r = &sniff_table[i];
        enum reader_format got = reader_sniff((const unsigned char *)r->bytes, r->len);
        if (got != r->want)
            fail_msg("row %zu: got %d want %d", i, (int)got, (int)r->want);
    }
    /* a PDF header past the first 1024 bytes is not a PDF header */
    char big[1100];
    memset(big, 'a', sizeof(big));
    memcpy(big + 1030, "%PDF-", 5);
    assert_int_equal(reader_sniff((const unsigned char *)big, sizeof(big)), READER_CSV);
    memcpy(big + 100, "%PDF-", 5);
    assert_int_equal(reader_sniff((const unsigned char *)big, sizeof(big)), READER_PDF);
}

/* ---- files ------------------------------------------------------------------------------- */

static char tmpdir[256];

static int setup_tmp(void **state)
{
    (void)state;
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof(tmpdir), "%s/apbot-reader-XXXXXX", t && *t ? t : "/tmp");
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

static const char *tmp_path(const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", tmpdir, name);
    return buf;
}

static const char *write_file(const char *name, const void *data, size_t n, char *buf, size_t len)
{
    tmp_path(name, buf, len);
    FILE *f = fopen(buf, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
    return buf;
}

static int read_any(const char *path, struct got *g, char *err)
{
    memset(g, 0, sizeof(*g));
    struct invoice_sink sink = {got_accept, got_refuse, g};
    err[0] = '\0';
    return reader_read_file(path, NULL, &sink, err, APBOT_ERR_LEN);
}

/* A FIFO is refused at once, without waiting for a writer and without reading its data. */
static void test_reader_fifo_refused_unread(void **state)
{
    (void)state;
    char path[512], err[APBOT_ERR_LEN];
    tmp_path("pipe.csv", path, sizeof(path));
    assert_int_equal(mkfifo(path, 0600), 0);
    struct got g;
    alarm(20); /* a hang fails the test instead of ctest's timeout */
    assert_int_equal(read_any(path, &g, err), APBOT_E_IO);
    assert_has(err, "FIFO");
    assert_int_equal(g.n_inv + g.n_ref, 0);

    /* with data waiting in it: refused, and every byte is still there afterwards */
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "vendor_id,x\n", 12), 12);
    assert_int_equal(read_any(path, &g, err), APBOT_E_IO);
    struct vendor_map *vm = NULL;
    assert_int_equal(vendor_map_load(path, &vm, err, APBOT_ERR_LEN), APBOT_E_IO);
    assert_null(vm);
    char back[32];
    assert_int_equal(read(fd, back, sizeof(back)), 12);
    assert_memory_equal(back, "vendor_id,x\n", 12);
    close(fd);
    alarm(0);
}

static void test_reader_not_a_file(void **state)
{
    (void)state;
    struct got g;
    char err[APBOT_ERR_LEN];
    assert_int_equal(read_any(tmpdir, &g, err), APBOT_E_IO);
    assert_has(err, "a directory");
    assert_int_equal(read_any("/dev/null", &g, err), APBOT_E_IO);
    assert_has(err, "a device");
    char path[512];
    assert_int_equal(read_any(tmp_path("missing.csv", path, sizeof(path)), &g, err), APBOT_E_IO);
    assert_has(err, "cannot open");
}

/* UTF-8 to UTF-16 (little or big endian, optional BOM). Caller frees. */
static unsigned char *to_utf16(const char *s, size_t n, bool le, bool bom, size_t *ret_len)
{
    unsigned char *out = malloc(n * 4 + 2);
    assert_non_null(out);
    size_t o = 0;
    unsigned cps[2];
    if (bom) {
        out[o++] = le ? 0xFF : 0xFE;
        out[o++] = le ? 0xFE : 0xFF;
    }
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        unsigned cp;
        if (c < 0x80) {
            cp = c;
            i += 1;
        } else if (c < 0xE0) {
            cp = (c & 0x1Fu) << 6 | ((unsigned char)s[i + 1] & 0x3Fu);
            i += 2;
        } else if (c < 0xF0) {
            cp = (c & 0x0Fu) << 12 | ((unsigned char)s[i + 1] & 0x3Fu) << 6 |
                 ((unsigned char)s[i + 2] & 0x3Fu);
            i += 3;
        } else {
            cp = (c & 0x07u) << 18 | ((unsigned char)s[i + 1] & 0x3Fu) << 12 |
                 ((unsigned char)s[i + 2] & 0x3Fu) << 6 | ((unsigned char)s[i + 3] & 0x3Fu);
            i += 4;
        }
        size_t k = 0;
        if (cp >= 0x10000) {
            cp -= 0x10000;
            cps[k++] = 0xD800 | (cp >> 10);
            cps[k++] = 0xDC00 | (cp & 0x3FF);
        } else {
            cps[k++] = cp;
        }
        for (size_t j = 0; j < k; j++) {
            out[o++] = (unsigned char)(le ? cps[j] & 0xFF : cps[j] >> 8);
            out[o++] = (unsigned char)(le ? cps[j] >> 8 : cps[j] & 0xFF);
        }
    }
    *ret_len = o;
    return out;
}

static char *slurp(const char *path, size_t *ret_len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n > 0);
    rewind(f);
    char *b = malloc((size_t)n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    b[n] = '\0';
    *ret_len = (size_t)n;
    return b;
}

/* A UTF-16 XML invoice (BOM or not, either byte order) is read as the same invoice. */
static void test_reader_utf16_xml_read(void **state)
{
    (void)state;
    static const char *const files[] = {"ubl/base-example.xml", "cii/huf_example_cii.xml"};
    for (size_t f = 0; f < 2; f++) {
        char src[1024], path[512], err[APBOT_ERR_LEN];
        env_path(src, sizeof(src), "APBOT_SAMPLES", files[f]);
        struct got want, g;
        assert_int_equal(read_any(src, &want, err), APBOT_OK);
        assert_int_equal(want.n_inv, 1);
        size_t n = 0;
        char *utf8 = slurp(src, &n);
        char *decl = strstr(utf8, "encoding=\"UTF-8\"");
        if (decl) /* as a UTF-16 file would say */
            memcpy(decl, "encoding=\"UTF16\"", 16);
        /* variants 4 and 5: no XML declaration and no BOM, so nothing but the NUL bytes says
         * UTF-16 (libxml2 alone would take it for UTF-8) */
        const char *body = utf8;
        const char *decl_end = strncmp(utf8, "<?xml", 5) == 0 ? strstr(utf8, "?>") : NULL;
        if (decl_end)
            body = decl_end + 2;
        for (int v = 0; v < 6; v++) {
            bool le = v & 1, bom = v < 4 && (v & 2);
            const char *text = v < 4 ? utf8 : body;
            size_t len = 0;
            unsigned char *u16 = to_utf16(text, n - (size_t)(text - utf8), le, bom, &len);
            write_file("utf16.xml", u16, len, path, sizeof(path));
            free(u16);
            int rc = read_any(path, &g, err);
            if (rc != APBOT_OK || g.n_inv != 1)
                fail_msg("%s variant %d: rc %d (%s), %zu refused (%s)", files[f], v, rc, err,
                         g.n_ref, g.n_ref ? g.ref[0].reason : "");
            assert_string_equal(g.inv[0].key, want.inv[0].key);
            assert_string_equal(g.inv[0].fp, want.inv[0].fp);
        }
        free(utf8);
    }
}

/* UTF-16 text that is not XML (a CSV saved as "Unicode") is refused, never parsed as CSV. */
static void test_reader_utf16_text_refused(void **state)
{
    (void)state;
    static const char csv[] = "vendor_id,invoice_number,invoice_date,currency,line_net,line_tax\n"
                              "100001,X-1,2026-11-03,EUR,1.00,0\n";
    for (int v = 0; v < 3; v++) {
        size_t len = 0;
        unsigned char *u16 = to_utf16(csv, sizeof(csv) - 1, v != 1, v == 2, &len);
        char path[512], err[APBOT_ERR_LEN];
        write_file("utf16.csv", u16, len, path, sizeof(path));
        free(u16);
        struct got g;
        assert_int_equal(read_any(path, &g, err), APBOT_E_PARSE);
        assert_has(err, "UTF-16 text");
        assert_int_equal(g.n_inv + g.n_ref, 0);
    }
}

/* ---- bounds ------------------------------------------------------------------------------ */

#define UBL_OPEN                                                                                   \
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"                                                 \
    "<Invoice xmlns=\"urn:oasis:names:specification:ubl:schema:xsd:Invoice-2\" "                   \
    "xmlns:cac=\"urn:oasis:names:specification:ubl:schema:xsd:CommonAggregateComponents-2\" "      \
    "xmlns:cbc=\"urn:oasis:names:specification:ubl:schema:xsd:CommonBasicComponents-2\">\n"        \
    "<cbc:ID>B-1</cbc:ID><cbc:IssueDate>2026-11-03</cbc:IssueDate>"                                \
    "<cbc:DocumentCurrencyCode>EUR</cbc:DocumentCurrencyCode>\n"
#define UBL_BODY                                                                                   \
    "<cac:AccountingSupplierParty><cac:Party><cbc:EndpointID schemeID=\"0088\">123"                \
    "</cbc:EndpointID></cac:Party></cac:AccountingSupplierParty>\n"                                \
    "<cac:LegalMonetaryTotal><cbc:PayableAmount currencyID=\"EUR\">100.00</cbc:PayableAmount>"     \
    "</cac:LegalMonetaryTotal>\n"                                                                  \
    "<cac:InvoiceLine><cbc:ID>1</cbc:ID><cbc:LineExtensionAmount currencyID=\"EUR\">100.00"        \
    "</cbc:LineExtensionAmount></cac:InvoiceLine>\n"
#define UBL_CLOSE "</Invoice>\n"

/* Writes UBL_OPEN, n copies of unit (with its %zu replaced by the index when present),
 * UBL_BODY and UBL_CLOSE to a file; returns its path. */
static const char *write_repeated(const char *name, const char *unit, size_t n, char *buf,
                                  size_t len)
{
    tmp_path(name, buf, len);
    FILE *f = fopen(buf, "wb");
    assert_non_null(f);
    fputs(UBL_OPEN, f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, unit, i);
    fputs(UBL_BODY UBL_CLOSE, f);
    assert_int_equal(fclose(f), 0);
    return buf;
}

static void expect_limit(const char *path, const char *needle)
{
    struct got g;
    char err[APBOT_ERR_LEN];
    int rc = read_any(path, &g, err);
    if (rc != APBOT_E_LIMIT)
        fail_msg("%s: rc %d (%s), %zu accepted, %zu refused", path, rc, err, g.n_inv, g.n_ref);
    assert_has(err, needle);
    assert_int_equal(g.n_inv + g.n_ref, 0);
}

static void test_reader_xml_bounds(void **state)
{
    (void)state;
    char path[512];
    /* a note is two nodes (the element and its text); just past the bound: refused, just under
     * it (the document's own nodes are well under 200): read */
    expect_limit(write_repeated("nodes.xml", "<cbc:Note>%zu</cbc:Note>\n", XMLIN_MAX_NODES / 2 + 1,
                                path, sizeof(path)),
                 "more than 200000 XML nodes");
    struct got g;
    char err[APBOT_ERR_LEN];
    assert_int_equal(read_any(write_repeated("fewer.xml", "<cbc:Note>%zu</cbc:Note>\n",
                                             XMLIN_MAX_NODES / 2 - 100, path, sizeof(path)),
                              &g, err),
                     APBOT_OK);
    assert_int_equal(g.n_inv, 1);
    /* attributes count as nodes too, and so do comments (never kept) */
    expect_limit(write_repeated("attrs.xml", "<cbc:Note a=\"1\" b=\"2\" c=\"%zu\"/>\n",
                                XMLIN_MAX_NODES / 4 + 1, path, sizeof(path)),
                 "XML nodes");
    expect_limit(
        write_repeated("comments.xml", "<!--%zu-->", XMLIN_MAX_NODES + 1, path, sizeof(path)),
        "XML nodes");
    /* kept text: a 9 MiB note */
    {
        tmp_path("text.xml", path, sizeof(path));
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        fputs(UBL_OPEN "<cbc:Note>", f);
        for (size_t i = 0; i < (9u << 20) / 64; i++)
            fputs("abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijkl", f);
        fputs("</cbc:Note>" UBL_BODY UBL_CLOSE, f);
        fclose(f);
        expect_limit(path, "MiB of text outside attachments");
    }
    /* depth */
    {
        tmp_path("deep.xml", path, sizeof(path));
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        fputs(UBL_OPEN, f);
        for (int i = 0; i < XMLIN_MAX_DEPTH + 10; i++)
            fputs("<cbc:Note>", f);
        for (int i = 0; i < XMLIN_MAX_DEPTH + 10; i++)
            fputs("</cbc:Note>", f);
        fputs(UBL_BODY UBL_CLOSE, f);
        fclose(f);
        expect_limit(path, "nested deeper than");
    }
    /* size: refused before a byte is parsed (a sparse file: no disk used) */
    {
        tmp_path("huge.xml", path, sizeof(path));
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        fputs(UBL_OPEN, f);
        fclose(f);
        assert_int_equal(truncate(path, (off_t)XMLIN_MAX_BYTES + 1), 0);
        expect_limit(path, "larger than 64 MiB");
    }
}

/* A 12 MB base64 attachment is read (it streams past, never kept), not refused. */
static void test_reader_big_attachment_read(void **state)
{
    (void)state;
    char path[512], err[APBOT_ERR_LEN];
    tmp_path("attached.xml", path, sizeof(path));
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(UBL_OPEN "<cac:AdditionalDocumentReference><cbc:ID>att</cbc:ID><cac:Attachment>"
                   "<cbc:EmbeddedDocumentBinaryObject mimeCode=\"application/pdf\" "
                   "filename=\"a.pdf\">",
          f);
    for (size_t i = 0; i < (12u << 20) / 76; i++)
        fputs("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAxMjM0\n", f);
    fputs("</cbc:EmbeddedDocumentBinaryObject></cac:Attachment></cac:AdditionalDocumentReference>"
          "\n" UBL_BODY UBL_CLOSE,
          f);
    fclose(f);
    struct got g;
    assert_int_equal(read_any(path, &g, err), APBOT_OK);
    assert_int_equal(g.n_ref, 0);
    assert_int_equal(g.n_inv, 1);
    assert_int_equal(g.inv[0].payable, 10000);
}

/* Nothing libxml2 says reaches stderr: broken XML, bad UTF-16, a DOCTYPE, a node bomb. */
static void test_reader_stderr_quiet(void **state)
{
    (void)state;
    char log[512], path[512], err[APBOT_ERR_LEN];
    tmp_path("stderr.log", log, sizeof(log));
    fflush(stderr);
    int saved = dup(2);
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    close(fd);
    struct got g;
    int rcs[6];
    static const char broken[] = "<Invoice><cbc:ID>x</Invoice>";
    rcs[0] =
        read_any(write_file("b1.xml", broken, sizeof(broken) - 1, path, sizeof(path)), &g, err);
    static const char bad16[] = "\xFF\xFE<\0a\0\x00\xD8>\0"; /* a lone high surrogate */
    rcs[1] = read_any(write_file("b2.xml", bad16, sizeof(bad16) - 1, path, sizeof(path)), &g, err);
    static const char dtd[] = "<!DOCTYPE a SYSTEM \"http://127.0.0.1:9/x.dtd\"><a/>";
    rcs[2] = read_any(write_file("b3.xml", dtd, sizeof(dtd) - 1, path, sizeof(path)), &g, err);
    static const char latin[] = "<?xml version=\"1.0\" encoding=\"no-such-enc\"?><a/>";
    rcs[3] = read_any(write_file("b4.xml", latin, sizeof(latin) - 1, path, sizeof(path)), &g, err);
    static const char undef[] = "<a>&nope;</a>";
    rcs[4] = read_any(write_file("b5.xml", undef, sizeof(undef) - 1, path, sizeof(path)), &g, err);
    static const char tail[] = "<a/><b/>";
    rcs[5] = read_any(write_file("b6.xml", tail, sizeof(tail) - 1, path, sizeof(path)), &g, err);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    assert_int_equal(rcs[0], APBOT_E_PARSE);
    assert_int_equal(rcs[1], APBOT_E_PARSE);
    assert_int_equal(rcs[2], APBOT_OK); /* refused through the sink: a DOCTYPE */
    assert_int_equal(rcs[3], APBOT_E_PARSE);
    assert_int_equal(rcs[4], APBOT_E_PARSE);
    assert_int_equal(rcs[5], APBOT_E_PARSE);
    assert_has(err, "not well-formed XML");
    size_t n = 0;
    struct stat st;
    assert_int_equal(stat(log, &st), 0);
    n = (size_t)st.st_size;
    if (n) {
        char *b = slurp(log, &n);
        fail_msg("stderr got %zu bytes: %.300s", n, b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reader_sniff_table),
        cmocka_unit_test(test_reader_fifo_refused_unread),
        cmocka_unit_test(test_reader_not_a_file),
        cmocka_unit_test(test_reader_utf16_xml_read),
        cmocka_unit_test(test_reader_utf16_text_refused),
        cmocka_unit_test(test_reader_xml_bounds),
        cmocka_unit_test(test_reader_big_attachment_read),
        cmocka_unit_test(test_reader_stderr_quiet),
    };
    return cmocka_run_group_tests(tests, setup_tmp, teardown_tmp);
}
