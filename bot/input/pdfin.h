/*
 * pdfin.h - the Factur-X / ZUGFeRD PDF reader: the CII invoice a PDF/A-3 carries as an embedded
 * file (factur-x.xml, zugferd-invoice.xml or xrechnung.xml), extracted with libqpdf and read by
 * the CII reader (ciiin). A PDF without one is refused: apbot never reads print images.
 */
#ifndef APBOT_PDFIN_H
#define APBOT_PDFIN_H

#include <stddef.h>

#include "apbot/error.h"

struct vendor_map;
struct invoice_sink;

#define PDFIN_MAX_BYTES (32u * 1024 * 1024)  /* bytes in one PDF file */
#define PDFIN_MAX_XML (16u * 1024 * 1024)    /* bytes of the embedded XML, decompressed */
#define PDFIN_MAX_SECONDS 20                 /* wall-clock time the extraction may take */
#define PDFIN_MAX_MEMORY (96u * 1024 * 1024) /* memory the extracting process may add */
#define PDFIN_NAME_MAX 128                   /* bytes of an embedded file's name kept */

/* The refusal of a PDF that carries no invoice data (the words docs and tests rely on). */
#define PDFIN_NO_DATA "a PDF without Factur-X/ZUGFeRD data: cannot read invoices from print images"

/* Reads a Factur-X/ZUGFeRD PDF open on fd (a regular file; fd stays open): extracts its XML
 * and reads it as CII ("file.pdf#factur-x.xml" in places); name is what messages call the
 * file. A PDF without invoice data is refused through the sink with PDFIN_NO_DATA. vendors may
 * be NULL. */
int pdfin_read_fd(int fd, const char *name, const struct vendor_map *vendors,
                  const struct invoice_sink *sink, char *err, size_t errlen) APBOT_MUST_USE;

#ifdef APBOT_UNITTEST /* static in the product (base/unittest.h) */
/*
 * How well an embedded file's name says "the invoice": 1 factur-x.xml, 2 zugferd-invoice.xml,
 * 3 xrechnung.xml (ASCII case ignored: ZUGFeRD 1 wrote "ZUGFeRD-invoice.xml"), 0 anything else.
 * Pure; the lowest non-zero rank among a PDF's embedded files wins.
 */
int pdfin_invoice_rank(const char *filename);
#endif

#endif
