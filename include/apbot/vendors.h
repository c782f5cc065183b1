/*
 * vendors.h - the --vendors map: a CSV that maps the seller identifiers found in e-invoices
 * (endpoint ids, VAT ids, legal ids, names) to the ERP's vendor numbers.
 *
 * Format: header row `source_id,vendor_id[,vendor_name]`; source_id is matched after
 * invoice_normalise_id(); a scheme prefix is allowed ("0088:7315458756324"). vendor_name, for
 * the people who keep the file, must be valid UTF-8 and is not used.
 */
#ifndef APBOT_VENDORS_H
#define APBOT_VENDORS_H

#include <stddef.h>

#include "apbot/error.h"

struct vendor_map;

/* Loads the map; errors name the file and line. */
int vendor_map_load(const char *path, struct vendor_map **ret, char *err,
                    size_t errlen) APBOT_MUST_USE;
/* NULL is fine. */
void vendor_map_free(struct vendor_map *vm);
/* The ERP vendor id for a seller identifier, or NULL. Valid while vm lives. vm may be NULL. */
const char *vendor_map_lookup(const struct vendor_map *vm, const char *source_id);

#endif
