/*
 * ciiin.h - the UN/CEFACT Cross Industry Invoice (CII D16B) reader: one rsm:CrossIndustryInvoice
 * per file, as ZUGFeRD 2, Factur-X and XRechnung-CII carry it. docs/input-formats.md has the
 * field table and the refusals; xmlin-int.h the XML bounds.
 */
#ifndef APBOT_CIIIN_H
#define APBOT_CIIIN_H

#include <stddef.h>

#include "xmlin-int.h"

/*
 * Reads the parsed CII D16B CrossIndustryInvoice doc (not freed) into ret: the invoice, or the
 * refusal with its place; any other root is refused. An xmlin_doc_fn: reader.c hands it what
 * xmlin_read parsed.
 */
void ciiin_doc(const char *name, xmlDocPtr doc, const struct vendor_map *vendors,
               struct xmlin_result *ret);

/* Parses len bytes in memory (not copied; valid during the call) and reads them with
 * ciiin_doc, handing the invoice or the refusal to sink (xmlin_read); name is what messages
 * call the document (pdfin passes "file.pdf#factur-x.xml"). vendors may be NULL. */
int ciiin_read_mem(const char *name, const void *data, size_t len, const struct vendor_map *vendors,
                   const struct invoice_sink *sink, char *err, size_t errlen) APBOT_MUST_USE;

#endif
