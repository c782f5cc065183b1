/*
 * vendors.c - the --vendors map: seller identifiers found in invoices -> ERP vendor numbers.
 *
 * Loaded once from a CSV (header `source_id,vendor_id[,vendor_name]`, matched by name, case-
 * insensitive, a leading '*' ignored; ',' or ';' sniffed) through the row driver and trim it
 * shares with the invoice CSV reader (csvrow.h), kept as an array sorted by the normalised
 * source id and searched with bsearch. Source ids are compared after invoice_normalise_id(), so
 * "0088:7315458756324", " 0088:7315458756324 " and a lower-case VAT id all match. Which forms of a
 * seller id to try (with or without a scheme prefix) is the reader's business; this module only
 * maps strings. The same source id twice with the same vendor is allowed; with a different vendor
 * it is an error naming both lines, never a silent last-one-wins. The vendor_name column is
 * checked like the others (valid UTF-8) and not kept: nothing reads it.
 */
#include "apbot/vendors.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "apbot/buf.h"
#include "apbot/invoice.h"
#include "apbot/mem.h"
#include "input/csvrow.h"

#define VENDORS_MAX_ENTRIES 1000000

struct vendor_entry {
    char *source; /* normalised */
    char *vendor_id;
    size_t line;
};

struct vendor_map {
    struct vendor_entry *e;
    size_t n, cap;
};

struct vendors_load {
    struct vendor_map *vm;
    const char *path;
    int col_source, col_vendor, col_name;
    bool have_header;
    char *err;
    size_t errlen;
};

static int vendors_row(void *ctx, char *const *f, size_t n, size_t line)
{
    struct vendors_load *l = ctx;
    if (!l->have_header) {
        l->col_source = l->col_vendor = l->col_name = -1;
        for (size_t i = 0; i < n; i++) {
            char *h = csvrow_trim(f[i]);
            if (*h == '*')
                h = csvrow_trim(h + 1);
            if (strcasecmp(h, "source_id") == 0)
                l->col_source = (int)i;
            else if (strcasecmp(h, "vendor_id") == 0)
                l->col_vendor = (int)i;
            else if (strcasecmp(h, "vendor_name") == 0)
                l->col_name = (int)i;
        }
        if (l->col_source < 0 || l->col_vendor < 0)
            return apbot_fail(l->err, l->errlen, APBOT_E_PARSE,
                              "%s:%zu: header must name the columns source_id and vendor_id",
                              l->path, line);
        l->have_header = true;
        return APBOT_OK;
    }
    bool empty = true;
    for (size_t i = 0; i < n; i++)
        if (*csvrow_trim(f[i]))
            empty = false;
    if (empty)
        return APBOT_OK;
    const char *src = (size_t)l->col_source < n ? csvrow_trim(f[l->col_source]) : "";
    const char *ven = (size_t)l->col_vendor < n ? csvrow_trim(f[l->col_vendor]) : "";
    const char *name =
        l->col_name >= 0 && (size_t)l->col_name < n ? csvrow_trim(f[l->col_name]) : "";
    if (!*src || !*ven)
        return apbot_fail(l->err, l->errlen, APBOT_E_PARSE, "%s:%zu: %s is empty", l->path, line,
                          !*src ? "source_id" : "vendor_id");
    if (!invoice_utf8_valid(src) || !invoice_utf8_valid(ven) || !invoice_utf8_valid(name))
        return apbot_fail(l->err, l->errlen, APBOT_E_PARSE, "%s:%zu: not valid UTF-8", l->path,
                          line);
    struct vendor_map *vm = l->vm;
    if (apbot_grow((void **)&vm->e, &vm->cap, vm->n, sizeof(*vm->e), VENDORS_MAX_ENTRIES) !=
        APBOT_OK)
        return apbot_fail(l->err, l->errlen, APBOT_E_LIMIT, "%s:%zu: more than %d entries", l->path,
                          line, VENDORS_MAX_ENTRIES);
    struct vendor_entry *e = &vm->e[vm->n++];
    e->source = invoice_normalise_id(src);
    e->vendor_id = apbot_xstrdup(ven);
    e->line = line;
    return APBOT_OK;
}

static int vendors_cmp(const void *a, const void *b)
{
    const struct vendor_entry *x = a, *y = b;
    int c = strcmp(x->source, y->source);
    if (c)
        return c;
    return x->line < y->line ? -1 : x->line > y->line;
}

int vendor_map_load(const char *path, struct vendor_map **ret, char *err, size_t errlen)
{
    struct vendor_map *vm = apbot_xcalloc(1, sizeof(*vm));
    struct vendors_load l = {.vm = vm, .path = path, .err = err, .errlen = errlen};
    int rc = csvrow_each(path, 0, vendors_row, &l, err, errlen);
    if (rc)
        goto fail;
    if (!l.have_header) {
        rc = apbot_fail(err, errlen, APBOT_E_PARSE, "%s: no header row", path);
        goto fail;
    }
    if (vm->n)
        qsort(vm->e, vm->n, sizeof(*vm->e), vendors_cmp);
    /* Duplicates are adjacent now: same target is harmless, a different one is an error. */
    size_t w = 0;
    for (size_t i = 0; i < vm->n; i++) {
        if (w > 0 && strcmp(vm->e[w - 1].source, vm->e[i].source) == 0) {
            if (strcmp(vm->e[w - 1].vendor_id, vm->e[i].vendor_id) != 0) {
                rc = apbot_fail(err, errlen, APBOT_E_CONFLICT,
                                "%s:%zu: source_id '%s' maps to %s here but to %s on line %zu",
                                path, vm->e[i].line, vm->e[i].source, vm->e[i].vendor_id,
                                vm->e[w - 1].vendor_id, vm->e[w - 1].line);
                /* keep the array consistent for vendor_map_free */
                for (size_t j = i; j < vm->n; j++)
                    vm->e[w++] = vm->e[j];
                vm->n = w;
                goto fail;
            }
            free(vm->e[i].source);
            free(vm->e[i].vendor_id);
            continue;
        }
        vm->e[w++] = vm->e[i];
    }
    vm->n = w;
    *ret = vm;
    return APBOT_OK;
fail:
    vendor_map_free(vm);
    return rc;
}

void vendor_map_free(struct vendor_map *vm)
{
    if (!vm)
        return;
    for (size_t i = 0; i < vm->n; i++) {
        free(vm->e[i].source);
        free(vm->e[i].vendor_id);
    }
    free(vm->e);
    free(vm);
}

static const struct vendor_entry *vendors_find(const struct vendor_map *vm, const char *source_id)
{
    if (!vm || !vm->n || !source_id)
        return NULL;
    char *norm = invoice_normalise_id(source_id);
    struct vendor_entry key = {.source = norm};
    const struct vendor_entry *lo = vm->e;
    size_t n = vm->n;
    const struct vendor_entry *hit = NULL;
    while (n) {
        size_t half = n / 2;
        int c = strcmp(key.source, lo[half].source);
        if (c == 0) {
            hit = &lo[half];
            break;
        }
        if (c > 0) {
            lo += half + 1;
            n -= half + 1;
        } else {
            n = half;
        }
    }
    free(norm);
    return hit;
}

const char *vendor_map_lookup(const struct vendor_map *vm, const char *source_id)
{
    const struct vendor_entry *e = vendors_find(vm, source_id);
    return e ? e->vendor_id : NULL;
}
