/*
 * csvin.h - the CSV invoice reader (one row per invoice line, rows read by the row driver in
 * csvrow.h). docs/input-formats.md describes the columns and the refusals.
 */
#ifndef APBOT_CSVIN_H
#define APBOT_CSVIN_H

#include <stddef.h>

#include "apbot/error.h"

struct vendor_map;
struct invoice_sink;

#define CSVIN_MAX_INVOICES 500000 /* invoices in one file (the split check keeps 16 bytes each) */

/* Reads a CSV file open on fd (a regular file: reader_read_file opens it safely; read twice
 * from offset 0; fd stays open, the caller closes it); name is what messages call the file.
 * vendors may be NULL. */
int csvin_read_fd(int fd, const char *name, const struct vendor_map *vendors,
                  const struct invoice_sink *sink, char *err, size_t errlen) APBOT_MUST_USE;

#endif
