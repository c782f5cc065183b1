/*
 * ublin.h - the UBL 2.1 / Peppol BIS Billing 3 reader: one Invoice or CreditNote per file.
 * docs/input-formats.md has the field table and the refusals; xmlin-int.h the XML bounds.
 */
#ifndef APBOT_UBLIN_H
#define APBOT_UBLIN_H

#include "xmlin-int.h"

/*
 * Reads the parsed UBL 2.1 Invoice or CreditNote doc (not freed) into ret: the invoice, or the
 * refusal with its place ("name#/Invoice/cac:LegalMonetaryTotal/cbc:PayableAmount"); any other
 * root is refused. An xmlin_doc_fn: reader.c hands it what xmlin_read parsed.
 */
void ublin_doc(const char *name, xmlDocPtr doc, const struct vendor_map *vendors,
               struct xmlin_result *ret);

#endif
