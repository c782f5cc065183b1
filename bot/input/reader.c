/*
 * reader.c - the dispatcher: opens an input file safely and picks the invoice reader by its
 * content.
 *
 * The open is infile_open() (base/infile.h): anything but a regular file is refused before a
 * byte is read, so a pipe's data stays where it is. The readers sit below this file and never
 * call back into it (it includes them, not they it). reader_sniff() looks only at the first
 * bytes, in this order: UTF-16 (a BOM, or an ASCII first character as two bytes, one NUL) is
 * XML when its first character is '<' and refused otherwise; a '<' after an optional UTF-8 BOM
 * and blanks is XML; "%PDF-" in the first 1024 bytes is a PDF (Factur-X/ZUGFeRD); anything
 * else is CSV. The file name and extension are never trusted (samples come as .xml, .XML and
 * with spaces and commas in the name). XML is parsed once and the root element with its
 * namespace picks UBL 2.1 or CII D16B.
 */
#include "apbot/reader.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reader-int.h"
#include "xmlin-int.h"

#include "base/infile.h"
#include "base/unittest.h"
#include "input/ciiin.h"
#include "input/csvin.h"
#include "input/pdfin.h"
#include "input/ublin.h"

#define READER_HEAD 1024 /* bytes sniffed; a PDF header may sit anywhere in the first 1024 */

static bool reader_blank(unsigned c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

UNITTEST enum reader_format reader_sniff(const unsigned char *head, size_t n)
{
    if (n > READER_HEAD)
        n = READER_HEAD;

    /* UTF-16: a BOM, or an ASCII first character written as two bytes, one of them NUL. */
    int le = -1;
    size_t i = 0;
    if (n >= 2 && head[0] == 0xFF && head[1] == 0xFE) {
        le = 1;
        i = 2;
    } else if (n >= 2 && head[0] == 0xFE && head[1] == 0xFF) {
        le = 0;
        i = 2;
    } else if (n >= 2 && head[0] != 0 && head[1] == 0) {
        le = 1;
    } else if (n >= 2 && head[0] == 0 && head[1] != 0) {
        le = 0;
    }
    if (le >= 0) {
        for (; i + 1 < n; i += 2) {
            unsigned u = le ? (unsigned)head[i] | (unsigned)head[i + 1] << 8
                            : (unsigned)head[i] << 8 | (unsigned)head[i + 1];
            if (reader_blank(u))
                continue;
            if (u == '<')
                return le ? READER_XML_UTF16LE : READER_XML_UTF16BE;
            return READER_UTF16_TEXT;
        }
        return n < READER_HEAD ? READER_EMPTY : READER_UTF16_TEXT;
    }

    /* UTF-8 XML: a '<' after an optional BOM and blanks, whatever follows it. */
    i = n >= 3 && head[0] == 0xEF && head[1] == 0xBB && head[2] == 0xBF ? 3 : 0;
    while (i < n && reader_blank(head[i]))
        i++;
    if (i < n && head[i] == '<')
        return READER_XML;

    /* A PDF header may follow some junk (PDF readers accept it in the first 1024 bytes). */
    static const char pdf[] = "%PDF-";
    for (size_t k = 0; k + sizeof(pdf) - 1 <= n; k++)
        if (memcmp(head + k, pdf, sizeof(pdf) - 1) == 0)
            return READER_PDF;

    if (i == n)
        return n < READER_HEAD ? READER_EMPTY : READER_CSV;
    return READER_CSV;
}

/* XML by its root: CII CrossIndustryInvoice or UBL; any other root is refused naming both. */
static void reader_xml_doc(const char *name, xmlDocPtr doc, const struct vendor_map *vendors,
                           struct xmlin_result *ret)
{
    xmlNodePtr root = xmlDocGetRootElement(doc);
    const char *href = root->ns ? (const char *)root->ns->href : "";
    if (strcmp(href, XMLIN_NS_CII_RSM) == 0) {
        ciiin_doc(name, doc, vendors, ret);
    } else if (strcmp(href, XMLIN_NS_UBL_INVOICE) == 0 || strcmp(href, XMLIN_NS_UBL_CREDIT) == 0) {
        ublin_doc(name, doc, vendors, ret);
    } else {
        ret->refused = true;
        snprintf(ret->where, sizeof(ret->where), "%s#/%.60s", name, (const char *)root->name);
        snprintf(ret->reason, sizeof(ret->reason),
                 "not a UBL 2.1 Invoice or CreditNote nor a CII D16B CrossIndustryInvoice (root "
                 "element '%.60s' in namespace '%.120s')",
                 (const char *)root->name, href);
    }
}

int reader_read_file(const char *path, const struct vendor_map *vendors,
                     const struct invoice_sink *sink, char *err, size_t errlen)
{
    int fd = -1;
    int rc = infile_open(path, &fd, err, errlen);
    if (rc)
        return rc;
    unsigned char head[READER_HEAD];
    ssize_t n;
    do
        n = pread(fd, head, sizeof(head), 0);
    while (n < 0 && errno == EINTR);
    struct stat st;
    if (n < 0 || fstat(fd, &st) != 0) {
        rc = apbot_fail(err, errlen, APBOT_E_IO, "%s: read error: %s", path, strerror(errno));
        goto out;
    }
    enum reader_format fmt = reader_sniff(head, (size_t)n);
    struct xmlin_src src = {.fd = fd};
    switch (fmt) {
    case READER_EMPTY:
        rc = apbot_fail(err, errlen, APBOT_E_PARSE, "%s: empty file", path);
        break;
    case READER_UTF16_TEXT:
        rc = apbot_fail(err, errlen, APBOT_E_PARSE,
                        "%s: UTF-16 text that is not XML: apbot reads CSV in UTF-8 (save it as "
                        "\"CSV UTF-8\")",
                        path);
        break;
    case READER_XML_UTF16LE:
    case READER_XML_UTF16BE:
        /* Without a BOM libxml2 cannot tell UTF-16 from UTF-8 by itself: say which. */
        if (!(head[0] == 0xFF && head[1] == 0xFE) && !(head[0] == 0xFE && head[1] == 0xFF))
            src.encoding = fmt == READER_XML_UTF16LE ? "UTF-16LE" : "UTF-16BE";
        __attribute__((fallthrough)); /* gcc takes a comment, clang only this */
    case READER_XML:
        if ((unsigned long long)st.st_size > XMLIN_MAX_BYTES) {
            rc = apbot_fail(err, errlen, APBOT_E_LIMIT,
                            "%s: larger than %u MiB: apbot reads XML invoices up to that size",
                            path, XMLIN_MAX_BYTES >> 20);
            break;
        }
        rc = xmlin_read(path, &src, reader_xml_doc, vendors, sink, err, errlen);
        break;
    case READER_PDF:
        rc = pdfin_read_fd(fd, path, vendors, sink, err, errlen);
        break;
    case READER_CSV:
        rc = csvin_read_fd(fd, path, vendors, sink, err, errlen);
        break;
    }
out:
    close(fd);
    return rc;
}
