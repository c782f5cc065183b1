/*
 * reader.h - what the invoice readers (csvin, ublin, ciiin, pdfin) hand their results to, and
 * reader_read_file(), which picks the reader by content.
 *
 * A reader streams: it calls sink->accept once per good invoice and sink->refuse once per
 * bad one (with file, line or element path, and reason), and carries on with the rest of the
 * file. Its return code reports only file-level failure (cannot open, not a regular file, no
 * header, not XML, a size bound passed). Each reader has its own header (csvin.h, ublin.h,
 * ciiin.h, pdfin.h); this one holds what they share.
 */
#ifndef APBOT_READER_H
#define APBOT_READER_H

#include <stddef.h>

#include "apbot/error.h"

struct invoice;
struct vendor_map;

struct invoice_sink {
    /* A good invoice; inv and where ("file:12" or "file#/Invoice") are valid only during
     * the call. A non-zero return aborts the read and is returned by the reader. */
    int (*accept)(void *ctx, const struct invoice *inv, const char *where);
    /* A refused invoice or row: where is "file:12" (CSV line) or "file#/Invoice/cbc:ID". */
    void (*refuse)(void *ctx, const char *where, const char *reason);
    void *ctx;
};

/*
 * The bounds every XML reader applies (UBL, CII, the XML inside a PDF), checked while parsing,
 * never after: memory stays bounded whatever the file holds. Attachments (the text of any
 * EmbeddedDocumentBinaryObject or AttachmentBinaryObject element) are skipped as they stream by
 * and never kept, so they cost time, not memory.
 */
/* bytes in one XML file */
#define READER_XML_MAX_BYTES (64u * 1024 * 1024)
/* nodes in one document: elements, attributes, namespace declarations, texts, comments and PIs
 * (about 6,000 UBL invoice lines) */
#define READER_XML_MAX_NODES 200000
/* bytes of text and attribute values kept (attachments are not kept, so not counted) */
#define READER_XML_MAX_TEXT (4u * 1024 * 1024)
/* element nesting */
#define READER_XML_MAX_DEPTH 128

/* What a file is, judged by its first bytes (reader_sniff). */
enum reader_format {
    READER_CSV = 0,     /* anything not recognised below: the CSV reader decides */
    READER_XML,         /* UTF-8 (optional BOM), first non-blank byte '<' */
    READER_XML_UTF16LE, /* UTF-16 little-endian XML, with or without BOM */
    READER_XML_UTF16BE, /* UTF-16 big-endian XML, with or without BOM */
    READER_PDF,         /* "%PDF-" in the first 1024 bytes */
    READER_UTF16_TEXT,  /* UTF-16 that is not XML (a CSV saved as "Unicode"): refused */
    READER_EMPTY,       /* nothing but a BOM and blanks */
};

/*
 * The format of a file from its first n bytes (up to 1024 are looked at). Pure; the table in
 * test_reader.c is its specification. The file name never matters.
 */
enum reader_format reader_sniff(const unsigned char *head, size_t n);

/*
 * Opens path for reading, refusing anything but a regular file: a FIFO, socket, device or
 * directory is refused without blocking and without reading a byte from it (a pipe's data stays
 * in the pipe). On success *ret_fd is an open descriptor (O_CLOEXEC, blocking) the caller closes.
 * Returns APBOT_E_IO (cannot open; not a regular file) with "path: reason" in err.
 */
int reader_open(const char *path, int *ret_fd, char *err, size_t errlen) APBOT_MUST_USE;

/*
 * Opens path (reader_open), sniffs its first bytes (reader_sniff) and reads it with the reader
 * for its content: CSV (csvin), UBL 2.1 or CII D16B XML (chosen by the root element and its
 * namespace), a Factur-X/ZUGFeRD PDF (pdfin). vendors may be NULL. Returns the reader's code,
 * or APBOT_E_IO / APBOT_E_PARSE / APBOT_E_LIMIT for the file as a whole, with err.
 */
int reader_read_file(const char *path, const struct vendor_map *vendors,
                     const struct invoice_sink *sink, char *err, size_t errlen) APBOT_MUST_USE;

#endif
