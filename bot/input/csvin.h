/*
 * csvin.h - the CSV invoice reader (one row per invoice line) and the RFC 4180 row driver it
 * shares with the vendor map. docs/input-formats.md describes the columns and the refusals.
 */
#ifndef APBOT_CSVIN_H
#define APBOT_CSVIN_H

#include <stddef.h>

#include "apbot/error.h"

struct vendor_map;
struct invoice_sink;

#define CSVIN_MAX_INVOICES 500000 /* invoices in one file (the split check keeps 16 bytes each) */

/* Reads a CSV file (opened with infile_open: a regular file only). vendors may be NULL. */
int csvin_read(const char *path, const struct vendor_map *vendors, const struct invoice_sink *sink,
               char *err, size_t errlen) APBOT_MUST_USE;

/* The same on an open regular file (read twice from offset 0; fd stays open, the caller
 * closes it); name is what messages call the file. */
int csvin_read_fd(int fd, const char *name, const struct vendor_map *vendors,
                  const struct invoice_sink *sink, char *err, size_t errlen) APBOT_MUST_USE;

/*
 * One CSV row as csvin_each_row hands it over: fields (NUL-terminated, valid only during the
 * call), their count and the physical line the row starts on (1-based; "\n", "\r\n" and a lone
 * "\r" each end a line). A non-zero return stops the read and is returned by csvin_each_row.
 */
typedef int (*csvin_row_fn)(void *ctx, char *const *fields, size_t n, size_t line);

/*
 * The RFC 4180 row driver the CSV reader and the vendor map share (libcsv, strict quoting):
 * skips a UTF-8 BOM, uses `delim` (',' or ';', or 0 to sniff it from the header line), streams
 * the file in bounded memory (fields over 64 KiB, rows over 256 fields are refused) and calls
 * fn once per row, header included. Returns APBOT_OK, fn's code, APBOT_E_IO (cannot open or
 * read, not a regular file) or APBOT_E_PARSE / APBOT_E_LIMIT with "path:line: reason" in err.
 */
int csvin_each_row(const char *path, int delim, csvin_row_fn fn, void *ctx, char *err,
                   size_t errlen) APBOT_MUST_USE;

/* The same on an open regular file, from offset 0 (fd stays open). */
int csvin_each_row_fd(int fd, const char *name, int delim, csvin_row_fn fn, void *ctx, char *err,
                      size_t errlen) APBOT_MUST_USE;

#endif
