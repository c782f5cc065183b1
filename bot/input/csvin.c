/*
 * csvin.c - the CSV invoice reader: one row per invoice line, grouped into invoices.
 *
 * Rows come from the row driver it shares with the vendor map (csvrow.h: libcsv, RFC 4180,
 * line numbers, bounds); csvin_read_fd() turns them into invoices (docs/input-formats.md is
 * the user-facing description):
 *
 * - Pass 1 checks the whole file's syntax and header before anything is accepted, so a file
 *   with broken quoting is refused as a whole instead of half-queued. It also records, per
 *   invoice (vendor after --vendors mapping + invoice number, both normalised), where its rows
 *   start; an invoice whose rows appear in two separate runs is marked "split". The table
 *   holds a 64-bit hash and a line number per invoice (16 bytes), never the rows.
 * - Pass 2 groups contiguous rows into one invoice and hands it to the sink when the group
 *   ends. A bad row refuses its whole invoice (where = "file:line" of the first bad row); a
 *   split invoice is refused as a whole, every part of it, because a partial invoice must
 *   never be booked and two parts must never be silently merged. A row without vendor_id or
 *   invoice_number is refused and also refuses the invoice it interrupts (it may be one of
 *   its lines). Memory is bounded by the largest invoice (at most CSVIN_MAX_LINES lines).
 */
#include "input/csvin.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "apbot/buf.h"
#include "apbot/invoice.h"
#include "apbot/mem.h"
#include "apbot/money.h"
#include "apbot/vendors.h"
#include "input/csvrow.h"

#define CSVIN_MAX_LINES 10000 /* lines in one invoice */
_Static_assert(CSVIN_MAX_LINES <= INVOICE_MAX_LINES, "an invoice holds every line read");

/* ---- columns ------------------------------------------------------------------------ */

enum csvin_col {
    COL_VENDOR_ID,
    COL_INVOICE_NUMBER,
    COL_INVOICE_DATE,
    COL_CURRENCY,
    COL_LINE_NET,
    COL_LINE_TAX,
    COL_VENDOR_NAME,
    COL_DOC_TYPE,
    COL_DUE_DATE,
    COL_LINE_DESCRIPTION,
    COL_LINE_GL_ACCOUNT,
    COL_TOTAL,
    COL__COUNT
};

static const char *const csvin_col_names[] = {
    [COL_VENDOR_ID] = "vendor_id",
    [COL_INVOICE_NUMBER] = "invoice_number",
    [COL_INVOICE_DATE] = "invoice_date",
    [COL_CURRENCY] = "currency",
    [COL_LINE_NET] = "line_net",
    [COL_LINE_TAX] = "line_tax",
    [COL_VENDOR_NAME] = "vendor_name",
    [COL_DOC_TYPE] = "doc_type",
    [COL_DUE_DATE] = "due_date",
    [COL_LINE_DESCRIPTION] = "line_description",
    [COL_LINE_GL_ACCOUNT] = "line_gl_account",
    [COL_TOTAL] = "total",
};
_Static_assert(sizeof(csvin_col_names) / sizeof(csvin_col_names[0]) == COL__COUNT,
               "every column needs a name");
#define COL_N_REQUIRED (COL_LINE_TAX + 1) /* the first six are required */

/* ---- the split-invoice table (pass 1) ---------------------------------------------------- */

struct csvin_seen_slot {
    uint64_t hash;  /* 0 = empty */
    uint32_t first; /* line the first run starts on */
    uint32_t again; /* line a later run starts on, 0 if contiguous */
};

struct csvin_seen {
    struct csvin_seen_slot *slots;
    size_t cap; /* power of two */
    size_t used;
};

static uint64_t csvin_hash(const char *s)
{
    uint64_t h = UINT64_C(1469598103934665603);
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= UINT64_C(1099511628211);
    }
    return h ? h : 1;
}

/*
 * The slot of hash h, or NULL; with insert, a new slot for it. The table doubles when half
 * full and is rehashed into a fresh allocation (so apbot_grow() does not fit); the caller
 * bounds the entries at CSVIN_MAX_INVOICES, so it never passes 1M slots (16 MB).
 */
static struct csvin_seen_slot *csvin_seen_find(struct csvin_seen *t, uint64_t h, bool insert)
{
    if (insert && (t->used + 1) * 2 > t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 1024;
        struct csvin_seen_slot *ns = apbot_xcalloc(ncap, sizeof(*ns));
        for (size_t i = 0; i < t->cap; i++) {
            if (!t->slots[i].hash)
                continue;
            size_t j = t->slots[i].hash & (ncap - 1);
            while (ns[j].hash)
                j = (j + 1) & (ncap - 1);
            ns[j] = t->slots[i];
        }
        free(t->slots);
        t->slots = ns;
        t->cap = ncap;
    }
    if (!t->cap)
        return NULL;
    size_t j = h & (t->cap - 1);
    while (t->slots[j].hash) {
        if (t->slots[j].hash == h)
            return &t->slots[j];
        j = (j + 1) & (t->cap - 1);
    }
    if (!insert)
        return NULL;
    t->slots[j].hash = h;
    t->used++;
    return &t->slots[j];
}

/* ---- the reader ----------------------------------------------------------------------- */

struct csvin_ctx {
    const char *path;
    const struct vendor_map *vendors;
    const struct invoice_sink *sink;
    char *err;
    size_t errlen;
    int pass; /* 1 or 2 */
    bool have_header;
    size_t n_header;
    int col[COL__COUNT]; /* field index, -1 when absent */

    struct csvin_seen seen;
    uint64_t run_hash; /* pass 1: hash of the current run, 0 none */

    /* pass 2: the group in progress */
    bool g_active;
    char *g_key;
    size_t g_line;
    bool g_bad;
    size_t g_bad_line;
    char g_reason[APBOT_ERR_LEN];
    bool g_total_given;
    int64_t g_total;
    struct invoice inv;
};

/* The trimmed value of column c in this row, or "" when the column or field is absent. */
static char *csvin_get(const struct csvin_ctx *c, char *const *f, size_t n, enum csvin_col col)
{
    int i = c->col[col];
    if (i < 0 || (size_t)i >= n)
        return (char *)"";
    return csvrow_trim(f[i]);
}

static int csvin_header(struct csvin_ctx *c, char *const *f, size_t n, size_t line)
{
    for (int k = 0; k < COL__COUNT; k++)
        c->col[k] = -1;
    for (size_t i = 0; i < n; i++) {
        char *h = csvrow_trim(f[i]);
        if (*h == '*')
            h = csvrow_trim(h + 1);
        for (int k = 0; k < COL__COUNT; k++) {
            if (strcasecmp(h, csvin_col_names[k]) != 0)
                continue;
            if (c->col[k] >= 0)
                return apbot_fail(c->err, c->errlen, APBOT_E_PARSE,
                                  "%s:%zu: column '%s' appears twice in the header", c->path, line,
                                  csvin_col_names[k]);
            c->col[k] = (int)i;
        }
    }
    char missing[256] = "";
    size_t used = 0;
    for (int k = 0; k < COL_N_REQUIRED; k++) {
        if (c->col[k] >= 0)
            continue;
        int w = snprintf(missing + used, sizeof(missing) - used, "%s%s", used ? ", " : "",
                         csvin_col_names[k]);
        if (w > 0 && (size_t)w < sizeof(missing) - used)
            used += (size_t)w;
    }
    if (used)
        return apbot_fail(c->err, c->errlen, APBOT_E_PARSE,
                          "%s:%zu: header lacks required column(s) %s (need vendor_id, "
                          "invoice_number, invoice_date, currency, line_net, line_tax)",
                          c->path, line, missing);
    c->n_header = n;
    c->have_header = true;
    return APBOT_OK;
}

static bool csvin_row_empty(char *const *f, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (*csvrow_trim(f[i]))
            return false;
    return true;
}

/* The grouping key: normalised (mapped) vendor + '\n' + normalised number. Caller frees. */
static char *csvin_group_key(const struct csvin_ctx *c, const char *vendor, const char *number)
{
    const char *mapped = vendor_map_lookup(c->vendors, vendor);
    char *v = invoice_normalise_id(mapped ? mapped : vendor);
    char *n = invoice_normalise_id(number);
    size_t len = strlen(v) + 1 + strlen(n) + 1;
    char *k = apbot_xmalloc(len);
    snprintf(k, len, "%s\n%s", v, n);
    free(v);
    free(n);
    return k;
}

static void csvin_group_fail(struct csvin_ctx *c, size_t line, const char *fmt, ...)
    APBOT_PRINTF(3, 4);

/* Marks the group in progress bad (first reason wins). */
static void csvin_group_fail(struct csvin_ctx *c, size_t line, const char *fmt, ...)
{
    if (c->g_bad)
        return;
    c->g_bad = true;
    c->g_bad_line = line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->g_reason, sizeof(c->g_reason), fmt, ap);
    va_end(ap);
}

static void csvin_refuse_at(struct csvin_ctx *c, size_t line, const char *reason)
{
    char where[1200];
    snprintf(where, sizeof(where), "%s:%zu", c->path, line);
    c->sink->refuse(c->sink->ctx, where, reason);
}

/* Ends the group in progress: refuses it or hands the invoice to the sink. */
static int csvin_finish_group(struct csvin_ctx *c)
{
    int rc = APBOT_OK;
    if (!c->g_active)
        return APBOT_OK;
    char reason[APBOT_ERR_LEN + 200];
    const char *num = c->inv.invoice_number ? c->inv.invoice_number : "?";
    const char *ven = c->inv.vendor_id ? c->inv.vendor_id : "?";
    if (!c->g_bad) {
        int64_t net = 0, tax = 0;
        for (size_t i = 0; i < c->inv.n_lines; i++) {
            if (money_add(&net, c->inv.lines[i].net) || money_add(&tax, c->inv.lines[i].tax)) {
                csvin_group_fail(c, c->g_line, "the sum of the lines is out of range");
                break;
            }
        }
        int64_t payable = net;
        if (!c->g_bad && money_add(&payable, tax))
            csvin_group_fail(c, c->g_line, "the sum of the lines is out of range");
        if (!c->g_bad && c->g_total_given && c->g_total != payable) {
            char t[40], s[40];
            if (money_format_plain(c->g_total, c->inv.exponent, t, sizeof(t)) ||
                money_format_plain(payable, c->inv.exponent, s, sizeof(s)))
                t[0] = s[0] = '\0';
            csvin_group_fail(c, c->g_line,
                             "total %s does not equal the sum of the lines' net + tax %s %s", t, s,
                             c->inv.currency);
        }
        if (!c->g_bad) {
            c->inv.net_total = net;
            c->inv.tax_total = tax;
            c->inv.payable = payable;
            char verr[APBOT_ERR_LEN];
            if (invoice_validate(&c->inv, verr, sizeof(verr)) != APBOT_OK)
                csvin_group_fail(c, c->g_line, "%s", verr);
        }
    }
    if (c->g_bad) {
        snprintf(reason, sizeof(reason), "invoice %s (vendor %s) refused: %s", num, ven,
                 c->g_reason);
        csvin_refuse_at(c, c->g_bad_line, reason);
    } else {
        char where[1200];
        snprintf(where, sizeof(where), "%s:%zu", c->path, c->g_line);
        rc = c->sink->accept(c->sink->ctx, &c->inv, where);
    }
    invoice_done(&c->inv);
    free(c->g_key);
    c->g_key = NULL;
    c->g_active = false;
    c->g_bad = false;
    c->g_reason[0] = '\0';
    c->g_total_given = false;
    return rc;
}

/* Compares a header-level value on a continuation row with the group's. */
static void csvin_same(struct csvin_ctx *c, size_t line, const char *what, const char *have,
                       const char *now)
{
    if (*now && strcmp(have ? have : "", now) != 0)
        csvin_group_fail(c, line,
                         "line %zu: %s '%.60s' differs from '%.60s' on the invoice's "
                         "first line %zu",
                         line, what, now, have ? have : "", c->g_line);
}

static void csvin_amount(struct csvin_ctx *c, size_t line, const char *what, const char *text,
                         int64_t *ret)
{
    char merr[APBOT_ERR_LEN];
    if (!*text) {
        csvin_group_fail(c, line, "line %zu: %s is empty", line, what);
        return;
    }
    if (money_parse(text, c->inv.currency, MONEY_PLAIN, MONEY_ROUND_REFUSE, ret, merr,
                    sizeof(merr)) != APBOT_OK)
        csvin_group_fail(c, line, "line %zu: %s: %s", line, what, merr);
}

/* Adds one row to the group in progress (which it may start). */
static void csvin_add_row(struct csvin_ctx *c, char *const *f, size_t n, size_t line)
{
    bool first = c->inv.n_lines == 0 && !c->g_bad && !c->inv.vendor_id;
    if (first) {
        const char *v = csvin_get(c, f, n, COL_VENDOR_ID);
        const char *mapped = vendor_map_lookup(c->vendors, v);
        invoice_set_str(&c->inv.vendor_id, mapped ? mapped : v);
        invoice_set_str(&c->inv.invoice_number, csvin_get(c, f, n, COL_INVOICE_NUMBER));
    }
    if (n != c->n_header)
        csvin_group_fail(c, line, "line %zu has %zu fields, the header has %zu", line, n,
                         c->n_header);
    if (c->g_bad)
        return;

    const char *date = csvin_get(c, f, n, COL_INVOICE_DATE);
    char *ccy = csvin_get(c, f, n, COL_CURRENCY);
    const char *name = csvin_get(c, f, n, COL_VENDOR_NAME);
    const char *dt = csvin_get(c, f, n, COL_DOC_TYPE);
    const char *due = csvin_get(c, f, n, COL_DUE_DATE);
    const char *total = csvin_get(c, f, n, COL_TOTAL);
    for (char *p = ccy; *p; p++)
        if (*p >= 'a' && *p <= 'z')
            *p = (char)(*p - 'a' + 'A');

    if (first) {
        if (*name)
            invoice_set_str(&c->inv.vendor_name, name);
        if (!*date) {
            csvin_group_fail(c, line, "line %zu: invoice_date is empty", line);
            return;
        }
        if (!invoice_date_valid(date)) {
            csvin_group_fail(c, line,
                             "line %zu: invoice_date '%.40s' is not a valid date (YYYY-MM-DD)",
                             line, date);
            return;
        }
        memcpy(c->inv.issue_date, date, 11);
        if (*due) {
            if (!invoice_date_valid(due)) {
                csvin_group_fail(c, line,
                                 "line %zu: due_date '%.40s' is not a valid date (YYYY-MM-DD)",
                                 line, due);
                return;
            }
            memcpy(c->inv.due_date, due, 11);
        }
        if (!*ccy) {
            csvin_group_fail(c, line, "line %zu: currency is empty", line);
            return;
        }
        int e = money_exponent(ccy);
        if (e < 0) {
            csvin_group_fail(c, line, "line %zu: unknown currency '%.20s'", line, ccy);
            return;
        }
        memcpy(c->inv.currency, ccy, 4);
        c->inv.exponent = e;
        if (*dt) {
            enum invoice_doc_type t = invoice_doc_type_from_name(dt);
            if (t == INVOICE_DOC_INVALID) {
                csvin_group_fail(c, line,
                                 "line %zu: doc_type '%.40s' is neither 'invoice' nor "
                                 "'credit-note'",
                                 line, dt);
                return;
            }
            c->inv.doc_type = t;
        }
    } else {
        if (*date && strcmp(date, c->inv.issue_date) != 0)
            csvin_same(c, line, "invoice_date", c->inv.issue_date, date);
        if (*due && strcmp(due, c->inv.due_date) != 0)
            csvin_same(c, line, "due_date", c->inv.due_date, due);
        csvin_same(c, line, "currency", c->inv.currency, ccy);
        if (*name && c->inv.vendor_name)
            csvin_same(c, line, "vendor_name", c->inv.vendor_name, name);
        else if (*name)
            invoice_set_str(&c->inv.vendor_name, name);
        if (*dt && invoice_doc_type_from_name(dt) != c->inv.doc_type)
            csvin_same(c, line, "doc_type", invoice_doc_type_name(c->inv.doc_type), dt);
        if (c->g_bad)
            return;
    }

    if (*total) {
        int64_t t = 0;
        csvin_amount(c, line, "total", total, &t);
        if (c->g_bad)
            return;
        if (c->g_total_given && t != c->g_total) {
            csvin_group_fail(c, line, "line %zu: total '%.40s' differs from an earlier line's",
                             line, total);
            return;
        }
        c->g_total_given = true;
        c->g_total = t;
    }

    struct invoice_line l = {0};
    csvin_amount(c, line, "line_net", csvin_get(c, f, n, COL_LINE_NET), &l.net);
    csvin_amount(c, line, "line_tax", csvin_get(c, f, n, COL_LINE_TAX), &l.tax);
    if (c->g_bad)
        return;
    if (c->inv.n_lines >= CSVIN_MAX_LINES) {
        csvin_group_fail(c, line, "more than %d lines in one invoice", CSVIN_MAX_LINES);
        return;
    }
    const char *desc = csvin_get(c, f, n, COL_LINE_DESCRIPTION);
    const char *gl = csvin_get(c, f, n, COL_LINE_GL_ACCOUNT);
    l.description = *desc ? (char *)desc : NULL;
    l.gl_account = *gl ? (char *)gl : NULL;
    invoice_add_line(&c->inv, &l);
}

static int csvin_row(void *vctx, char *const *f, size_t n, size_t line)
{
    struct csvin_ctx *c = vctx;
    if (!c->have_header)
        return csvin_header(c, f, n, line);
    if (csvin_row_empty(f, n))
        return APBOT_OK;

    const char *vendor = csvin_get(c, f, n, COL_VENDOR_ID);
    const char *number = csvin_get(c, f, n, COL_INVOICE_NUMBER);
    bool orphan = !*vendor || !*number;

    if (c->pass == 1) {
        if (orphan) {
            c->run_hash = 0;
            return APBOT_OK;
        }
        char *key = csvin_group_key(c, vendor, number);
        uint64_t h = csvin_hash(key);
        free(key);
        if (h == c->run_hash)
            return APBOT_OK;
        c->run_hash = h;
        struct csvin_seen_slot *s = csvin_seen_find(&c->seen, h, false);
        if (s) {
            if (!s->again)
                s->again = line > UINT32_MAX ? UINT32_MAX : (uint32_t)line;
        } else {
            if (c->seen.used >= CSVIN_MAX_INVOICES)
                return apbot_fail(c->err, c->errlen, APBOT_E_LIMIT,
                                  "%s:%zu: more than %d invoices in one file: split the file",
                                  c->path, line, CSVIN_MAX_INVOICES);
            s = csvin_seen_find(&c->seen, h, true);
            s->first = line > UINT32_MAX ? UINT32_MAX : (uint32_t)line;
            s->again = 0;
        }
        return APBOT_OK;
    }

    if (orphan) {
        char reason[APBOT_ERR_LEN];
        snprintf(reason, sizeof(reason), "row refused: %s is empty",
                 !*vendor ? "vendor_id" : "invoice_number");
        csvin_refuse_at(c, line, reason);
        if (c->g_active)
            csvin_group_fail(c, line, "line %zu has no %s and may be one of this invoice's lines",
                             line, !*vendor ? "vendor_id" : "invoice_number");
        return APBOT_OK;
    }

    char *key = csvin_group_key(c, vendor, number);
    if (c->g_active && strcmp(key, c->g_key) == 0) {
        free(key);
        csvin_add_row(c, f, n, line);
        return APBOT_OK;
    }
    int rc = csvin_finish_group(c);
    if (rc) {
        free(key);
        return rc;
    }
    c->g_active = true;
    c->g_key = key;
    c->g_line = line;
    invoice_init(&c->inv);
    struct csvin_seen_slot *s = csvin_seen_find(&c->seen, csvin_hash(key), false);
    if (s && s->again) {
        const char *mapped = vendor_map_lookup(c->vendors, vendor);
        invoice_set_str(&c->inv.vendor_id, mapped ? mapped : vendor);
        invoice_set_str(&c->inv.invoice_number, number);
        csvin_group_fail(c, line,
                         "its rows are not contiguous (lines from %lu and again from %lu); "
                         "every part of a split invoice is refused, never merged",
                         (unsigned long)s->first, (unsigned long)s->again);
        return APBOT_OK;
    }
    csvin_add_row(c, f, n, line);
    return APBOT_OK;
}

int csvin_read_fd(int fd, const char *path, const struct vendor_map *vendors,
                  const struct invoice_sink *sink, char *err, size_t errlen)
{
    struct csvin_ctx c = {
        .path = path, .vendors = vendors, .sink = sink, .err = err, .errlen = errlen, .pass = 1};
    invoice_init(&c.inv);
    int rc = csvrow_each_fd(fd, path, 0, csvin_row, &c, err, errlen);
    if (rc)
        goto out;
    if (!c.have_header) {
        rc = apbot_fail(err, errlen, APBOT_E_PARSE, "%s: no header row", path);
        goto out;
    }
    c.pass = 2;
    c.have_header = false;
    rc = csvrow_each_fd(fd, path, 0, csvin_row, &c, err, errlen);
    if (rc == APBOT_OK)
        rc = csvin_finish_group(&c);
out:
    invoice_done(&c.inv);
    free(c.g_key);
    free(c.seen.slots);
    return rc;
}
