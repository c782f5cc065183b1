/*
 * csvrow.h - the RFC 4180 row driver and the field trim that both CSV readers use: the invoice
 * CSV (csvin) and the vendor map (vendors). docs/input-formats.md has the CSV rules.
 */
#ifndef APBOT_CSVROW_H
#define APBOT_CSVROW_H

#include <stddef.h>

#include "apbot/error.h"

/*
 * One CSV row as csvrow_each hands it over: fields (NUL-terminated, valid only during the
 * call, writable: csvrow_trim may be applied in place), their count and the physical line the
 * row starts on (1-based; "\n", "\r\n" and a lone "\r" each end a line). A non-zero return
 * stops the read and is returned by csvrow_each.
 */
typedef int (*csvrow_fn)(void *ctx, char *const *fields, size_t n, size_t line);

/*
 * Reads the open regular file fd from offset 0 (fd stays open; the caller closes it) with
 * libcsv, strict quoting: skips a UTF-8 BOM, uses `delim` (',' or ';', or 0 to sniff it from the
 * header line), streams the file in bounded memory (fields over 64 KiB, rows over 256 fields
 * are refused) and calls fn once per row, header included; name is what messages call the file.
 * Returns APBOT_OK, fn's code, APBOT_E_IO (cannot seek or read) or APBOT_E_PARSE /
 * APBOT_E_LIMIT with "name:line: reason" in err.
 */
int csvrow_each_fd(int fd, const char *name, int delim, csvrow_fn fn, void *ctx, char *err,
                   size_t errlen) APBOT_MUST_USE;

/* The same on path, opened with infile_open (a regular file only: APBOT_E_IO otherwise). */
int csvrow_each(const char *path, int delim, csvrow_fn fn, void *ctx, char *err,
                size_t errlen) APBOT_MUST_USE;

/* Trims ASCII blanks (space, tab, CR, LF) off both ends of s in place; returns the start. */
char *csvrow_trim(char *s);

#endif
