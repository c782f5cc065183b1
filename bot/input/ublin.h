/*
 * ublin.h - the UBL 2.1 / Peppol BIS Billing 3 reader: one Invoice or CreditNote per file.
 * docs/input-formats.md has the field table and the refusals; xmlin-int.h the XML bounds.
 */
#ifndef APBOT_UBLIN_H
#define APBOT_UBLIN_H

#include <stddef.h>

#include "apbot/error.h"

struct vendor_map;
struct invoice_sink;

/* Reads one UBL 2.1 Invoice or CreditNote document. vendors may be NULL. */
int ublin_read(const char *path, const struct vendor_map *vendors, const struct invoice_sink *sink,
               char *err, size_t errlen) APBOT_MUST_USE;

/* The same on len bytes in memory (not copied; valid during the call); name is what messages
 * call the document. */
int ublin_read_mem(const char *name, const void *data, size_t len, const struct vendor_map *vendors,
                   const struct invoice_sink *sink, char *err, size_t errlen) APBOT_MUST_USE;

#endif
