/*
 * reader.h - reader_read_file(), which opens an input file safely and reads it with the
 * invoice reader its content calls for (csvin, ublin, ciiin, pdfin).
 *
 * A reader streams: it hands each good invoice and each refusal (with file, line or element
 * path, and reason) to a struct invoice_sink (invoice.h) and carries on with the rest of the
 * file. Its return code reports only file-level failure (cannot open, not a regular file, no
 * header, not XML, a size bound passed). The readers sit below this dispatcher, each with its
 * own private header (input/csvin.h, input/ublin.h, input/ciiin.h, input/pdfin.h).
 */
#ifndef APBOT_READER_H
#define APBOT_READER_H

#include <stddef.h>

#include "apbot/error.h"
#include "apbot/invoice.h"

struct vendor_map;

/*
 * Opens path (a regular file only, anything else refused unread), tells its format by its
 * first bytes (never by its name) and reads it with the reader for its content: CSV (csvin),
 * UBL 2.1 or CII D16B XML (chosen by the root element and its namespace), a Factur-X/ZUGFeRD
 * PDF (pdfin). vendors may be NULL. Returns the reader's code, or APBOT_E_IO / APBOT_E_PARSE /
 * APBOT_E_LIMIT for the file as a whole, with err.
 */
int reader_read_file(const char *path, const struct vendor_map *vendors,
                     const struct invoice_sink *sink, char *err, size_t errlen) APBOT_MUST_USE;

#endif
