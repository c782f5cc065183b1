/*
 * ciiin.h - the UN/CEFACT Cross Industry Invoice (CII D16B) reader: one rsm:CrossIndustryInvoice
 * per file, as ZUGFeRD 2, Factur-X and XRechnung-CII carry it. docs/input-formats.md has the
 * field table and the refusals; xmlin-int.h the XML bounds.
 */
#ifndef APBOT_CIIIN_H
#define APBOT_CIIIN_H

#include <stddef.h>

#include "apbot/error.h"

struct vendor_map;
struct invoice_sink;

/* Reads one CII D16B CrossIndustryInvoice document. vendors may be NULL. */
int ciiin_read(const char *path, const struct vendor_map *vendors, const struct invoice_sink *sink,
               char *err, size_t errlen) APBOT_MUST_USE;

/* The same on len bytes in memory (not copied; valid during the call); name is what messages
 * call the document (pdfin passes "file.pdf#factur-x.xml"). */
int ciiin_read_mem(const char *name, const void *data, size_t len, const struct vendor_map *vendors,
                   const struct invoice_sink *sink, char *err, size_t errlen) APBOT_MUST_USE;

#endif
