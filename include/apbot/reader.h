/*
 * reader.h - what the invoice readers (csvin, ublin) hand their results to.
 *
 * A reader streams: it calls sink->accept once per good invoice and sink->refuse once per
 * bad one (with file, line or element path, and reason), and carries on with the rest of the
 * file. Its return code reports only file-level failure (cannot open, no header, not XML).
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

/* Reads a CSV file (see docs/input-formats.md). vendors may be NULL. */
int csvin_read(const char *path, const struct vendor_map *vendors, const struct invoice_sink *sink,
               char *err, size_t errlen) APBOT_MUST_USE;

/* Reads one UBL 2.1 Invoice or CreditNote document. vendors may be NULL. */
int ublin_read(const char *path, const struct vendor_map *vendors, const struct invoice_sink *sink,
               char *err, size_t errlen) APBOT_MUST_USE;

/*
 * One CSV row as csvin_each_row hands it over: fields (NUL-terminated, valid only during the
 * call), their count and the physical line the row starts on (1-based). A non-zero return
 * stops the read and is returned by csvin_each_row.
 */
typedef int (*csvin_row_fn)(void *ctx, char *const *fields, size_t n, size_t line);

/*
 * The RFC 4180 row driver the CSV reader and the vendor map share (libcsv, strict quoting):
 * skips a UTF-8 BOM, uses `delim` (',' or ';', or 0 to sniff it from the header line), streams
 * the file in bounded memory (fields over 64 KiB, rows over 256 fields are refused) and calls
 * fn once per row, header included. Returns APBOT_OK, fn's code, APBOT_E_IO (cannot open or
 * read) or APBOT_E_PARSE / APBOT_E_LIMIT with "path:line: reason" in err.
 */
int csvin_each_row(const char *path, int delim, csvin_row_fn fn, void *ctx, char *err,
                   size_t errlen) APBOT_MUST_USE;

/* Picks the reader by content (XML or CSV) and reads. */
int reader_read_file(const char *path, const struct vendor_map *vendors,
                     const struct invoice_sink *sink, char *err, size_t errlen) APBOT_MUST_USE;

#endif
