/*
 * report.c - builds the daily reconciliation: walks the queue, reads one booking day's ERP
 * listing through the flow, joins the two on the (cut) key and classifies what it sees into
 * the balance, matched records, drift and hints. Completed items the listing lacks are looked
 * up by key before they count as missing (they may have been booked on another day);
 * manual-review items are looked up (bounded) to tell the operator whether the ERP holds
 * them. Rendering lives in report_render.c; the join rules are explained in docs/report.md.
 */
#include "apbot/report.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "apbot/buf.h"
#include "apbot/erp.h"
#include "apbot/flow.h"
#include "apbot/invoice.h"
#include "apbot/machine.h"
#include "apbot/mem.h"
#include "apbot/money.h"
#include "apbot/store.h"
#include "erp/docmatch.h"

#define REPORT_DEFAULT_LOOKUPS 200

/*
 * What one report holds in memory: the whole queue, the whole listing (itself bounded by the
 * flow's max-pages per walk) and the findings, at most a few per item and per row. Each item
 * or row takes about half a kilobyte with its strings, so these lie far past what fits in
 * memory and never cut a real report short; they bound the arrays' size arithmetic. Past one
 * the report fails (APBOT_E_LIMIT): a partial report must never pass for a reconciliation.
 */
#define REPORT_ITEMS_MAX 100000000
#define REPORT_ROWS_MAX 100000000
#define REPORT_FINDINGS_MAX 400000000

static const char *const report_kind_names[] = {
    [REPORT_DUPLICATE] = "duplicate",
    [REPORT_MISSING] = "missing",
    [REPORT_ORPHAN] = "orphan",
    [REPORT_AMOUNT_MISMATCH] = "amount-mismatch",
    [REPORT_DOC_MISMATCH] = "doc-mismatch",
    [REPORT_BOOKED_EXCEPTION] = "booked-exception",
    [REPORT_UNACCOUNTED] = "unaccounted",
    [REPORT_REVIEW_HELD] = "review-held",
    [REPORT_REVIEW_OPEN] = "review-open",
    [REPORT_EXCEPTION] = "exception",
    [REPORT_PENDING] = "pending",
    [REPORT_OTHER_DAY] = "other-day",
};
_Static_assert(sizeof(report_kind_names) / sizeof(report_kind_names[0]) == REPORT_KIND__COUNT,
               "every report_kind needs a name");

const char *report_kind_name(enum report_kind k)
{
    if ((int)k < 0 || k >= REPORT_KIND__COUNT)
        return "invalid";
    return report_kind_names[k];
}

bool report_kind_is_drift(enum report_kind k)
{
    switch (k) {
    case REPORT_DUPLICATE:
    case REPORT_MISSING:
    case REPORT_ORPHAN:
    case REPORT_AMOUNT_MISMATCH:
    case REPORT_DOC_MISMATCH:
    case REPORT_BOOKED_EXCEPTION:
        return true;
    case REPORT_UNACCOUNTED:
    case REPORT_REVIEW_HELD:
    case REPORT_REVIEW_OPEN:
    case REPORT_EXCEPTION:
    case REPORT_PENDING:
    case REPORT_OTHER_DAY:
    case REPORT_KIND__COUNT:
        return false;
    }
    return false;
}

void report_local_date(int64_t ms, char buf[11])
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;

    if (!localtime_r(&t, &tm) || strftime(buf, 11, "%Y-%m-%d", &tm) != 10)
        memcpy(buf, "0000-00-00", 11);
}

const char *report_local_time(int64_t ms, const char *fallback, char *buf, size_t len)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;

    if (!localtime_r(&t, &tm) || strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm) == 0)
        snprintf(buf, len, "%s", fallback);
    return buf;
}

const char *report_format_age(int64_t ms, char *buf, size_t len)
{
    int64_t m = ms > 0 ? ms / 60000 : 0;
    if (m >= 24 * 60)
        snprintf(buf, len, "%lldd %lldh", (long long)(m / 1440), (long long)(m % 1440 / 60));
    else if (m >= 60)
        snprintf(buf, len, "%lldh %02lldm", (long long)(m / 60), (long long)(m % 60));
    else
        snprintf(buf, len, "%lldm", (long long)m);
    return buf;
}

int report_doc_cmp(const char *a, const char *b)
{
    if (!a || !b)
        return a ? 1 : b ? -1 : 0;
    while (*a && *b) {
        if (*a >= '0' && *a <= '9' && *b >= '0' && *b <= '9') {
            const char *za = a, *zb = b;
            while (*a == '0')
                a++;
            while (*b == '0')
                b++;
            size_t da = 0, db = 0;
            while (a[da] >= '0' && a[da] <= '9')
                da++;
            while (b[db] >= '0' && b[db] <= '9')
                db++;
            if (da != db)
                return da < db ? -1 : 1; /* more significant digits: the larger number */
            int c = memcmp(a, b, da);
            if (c)
                return c < 0 ? -1 : 1;
            size_t lza = (size_t)(a - za), lzb = (size_t)(b - zb);
            if (lza != lzb)
                return lza > lzb ? -1 : 1; /* "007" before "7": the order stays total */
            a += da;
            b += db;
            continue;
        }
        if (*a != *b)
            return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
        a++;
        b++;
    }
    return *a ? 1 : *b ? -1 : 0;
}

/* ---- the report object ---------------------------------------------------------------- */

struct report {
    struct report_summary sum;
    char *flow_name;
    struct report_finding *f;
    size_t n, cap;
    struct report_money *money; /* sorted by currency once built */
    size_t n_money, cap_money;
    struct report_money_diff *diffs;
    size_t n_diffs, cap_diffs;
    struct report_activity activity;
};

static char *xprintf(const char *fmt, ...) APBOT_PRINTF(1, 2);
static char *xprintf(const char *fmt, ...)
{
    va_list ap;
    char *s;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        abort(); /* only a bad format or a text past INT_MAX: the formats are constants */
    s = apbot_xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

static void finding_free(struct report_finding *x)
{
    /* every string of a finding was duplicated for it by add_finding */
    free((char *)x->key);
    free((char *)x->state);
    free((char *)x->vendor_id);
    free((char *)x->vendor_name);
    free((char *)x->invoice_number);
    free((char *)x->currency);
    free((char *)x->doc);
    free((char *)x->erp_docs);
    free((char *)x->reason);
    free((char *)x->detail);
    free((char *)x->command);
}

void report_free(struct report *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        finding_free(&r->f[i]);
    free(r->f);
    free(r->flow_name);
    for (size_t i = 0; i < r->n_diffs; i++) {
        free((char *)r->diffs[i].currency);
        free((char *)r->diffs[i].doc);
        free((char *)r->diffs[i].key);
    }
    free(r->diffs);
    free(r->money);
    free(r);
}

const struct report_summary *report_summary(const struct report *r)
{
    return &r->sum;
}

const struct report_finding *report_findings(const struct report *r, size_t *ret_n)
{
    *ret_n = r->n;
    return r->f;
}

const struct report_money *report_money(const struct report *r, size_t *ret_n)
{
    *ret_n = r->n_money;
    return r->money;
}

const struct report_money_diff *report_money_diffs(const struct report *r, size_t *ret_n)
{
    *ret_n = r->n_diffs;
    return r->diffs;
}

const struct report_activity *report_activity(const struct report *r)
{
    return &r->activity;
}

static const char *const diff_why_names[] = {
    [REPORT_DIFF_AMOUNT] = "amount",
    [REPORT_DIFF_UNREADABLE] = "unreadable",
    [REPORT_DIFF_DUPLICATE] = "duplicate",
    [REPORT_DIFF_ORPHAN] = "orphan",
    [REPORT_DIFF_NOT_COMPLETED] = "not-completed",
    [REPORT_DIFF_COMPLETED_OTHER] = "completed-other-day",
    [REPORT_DIFF_OTHER_CURRENCY] = "other-currency",
    [REPORT_DIFF_BOOKED_OTHER_DAY] = "booked-other-day",
    [REPORT_DIFF_MISSING] = "missing",
};
_Static_assert(sizeof(diff_why_names) / sizeof(diff_why_names[0]) == REPORT_DIFF__COUNT,
               "every report_diff_why needs a name");

const char *report_diff_why_name(enum report_diff_why w)
{
    if ((int)w < 0 || w >= REPORT_DIFF__COUNT)
        return "invalid";
    return diff_why_names[w];
}

static const char *const outcome_names[] = {
    [REPORT_OUT_COMPLETED] = "completed",
    [REPORT_OUT_EXCEPTION] = "business-exception",
    [REPORT_OUT_REVIEW] = "manual-review",
    [REPORT_OUT_UNKNOWN] = "unknown",
};
_Static_assert(sizeof(outcome_names) / sizeof(outcome_names[0]) == REPORT_OUT__COUNT,
               "every report_outcome needs a name");

const char *report_outcome_name(enum report_outcome o)
{
    if ((int)o < 0 || o >= REPORT_OUT__COUNT)
        return "invalid";
    return outcome_names[o];
}

enum report_status report_status(const struct report *r)
{
    if (!r->sum.balanced)
        return REPORT_UNBALANCED;
    if (r->sum.drift > 0)
        return REPORT_DRIFT;
    return REPORT_CLEAN;
}

int report_format_from_name(const char *name, enum report_format *ret)
{
    static const struct {
        const char *name;
        enum report_format fmt;
    } names[] = {{"text", REPORT_FMT_TEXT},
                 {"csv", REPORT_FMT_CSV},
                 {"json", REPORT_FMT_JSON},
                 {"html", REPORT_FMT_HTML}};
    for (size_t i = 0; name && i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(name, names[i].name) == 0) {
            *ret = names[i].fmt;
            return APBOT_OK;
        }
    return APBOT_E_INVAL;
}

/* ---- what the build collects ---------------------------------------------------------- */

/* A copy of what the report needs of one queue row. */
struct ritem {
    int64_t id;
    char *key, *cut;
    enum machine_state state;
    int64_t created_at, updated_at;
    char *erp_doc, *reason, *vendor_id, *vendor_name, *invoice_number;
    char doc_type[16], currency[4];
    char issue_date[11]; /* YYYY-MM-DD */
    int exponent;
    int64_t total;
    ssize_t group; /* index of its group in the day's listing, -1 if absent */
    bool expected; /* completed on the day: the day's listing should hold it */
    bool paired;   /* expected, and one listing row was counted against it */
};

/* A copy of one row of the day's listing. */
struct rrow {
    char *doc, *reference, *vendor, *currency, *amount_text, *date;
    int64_t amount;
    int exponent;
    bool has_amount;
};

struct rgroup {
    size_t first, n; /* rows[first .. first+n) share one reference */
};

struct build {
    struct report *r;
    const struct flow *flow;
    struct erp_session *erp;
    const char *date;
    int64_t now;
    int max_lookups;
    struct ritem *items;
    size_t n_items, cap_items;
    struct rrow *rows;
    size_t n_rows, cap_rows;
    struct rgroup *groups;
    size_t n_groups;
    struct ritem **by_cut;      /* the items sorted by cut key (built after collecting) */
    int64_t day_start, day_end; /* the day in local time, [start, end) in ms */
    bool too_many_items;        /* past REPORT_ITEMS_MAX: the walk stopped */
    bool too_many_rows;         /* past REPORT_ROWS_MAX: the walk stopped */
    bool too_many_findings;     /* past REPORT_FINDINGS_MAX: findings were dropped */
};

/* The fields of a finding before they are copied into the report. */
struct fnew {
    enum report_kind kind;
    const struct ritem *item; /* or NULL */
    const char *key;          /* when no item */
    const char *vendor_id;    /* when no item */
    const char *currency;     /* when no item */
    int exponent;
    bool has_amount;
    int64_t amount;
    bool has_erp_amount;
    int64_t erp_amount;
    const char *erp_docs;
    char *detail;  /* taken over */
    char *command; /* taken over */
};

static void add_finding(struct build *b, const struct fnew *n)
{
    struct report *r = b->r;
    struct report_finding *x;
    const struct ritem *it = n->item;

    if (apbot_grow((void **)&r->f, &r->cap, r->n, sizeof(*r->f), REPORT_FINDINGS_MAX) != APBOT_OK) {
        free(n->detail);
        free(n->command);
        b->too_many_findings = true; /* build_finish fails the report */
        return;
    }
    x = &r->f[r->n++];
    memset(x, 0, sizeof(*x));
    x->kind = n->kind;
    x->erp_docs = apbot_xstrdup(n->erp_docs);
    x->detail = n->detail;
    x->command = n->command;
    x->has_erp_amount = n->has_erp_amount;
    x->erp_amount = n->erp_amount;
    if (it) {
        x->item_id = it->id;
        x->key = apbot_xstrdup(it->key);
        x->state = apbot_xstrdup(machine_state_name(it->state));
        x->vendor_id = apbot_xstrdup(it->vendor_id);
        x->vendor_name = apbot_xstrdup(it->vendor_name);
        x->invoice_number = apbot_xstrdup(it->invoice_number);
        x->currency = apbot_xstrdup(it->currency);
        x->exponent = it->exponent;
        x->amount = it->total;
        x->has_amount = true;
        x->doc = apbot_xstrdup(it->erp_doc);
        x->created_at = it->created_at;
        x->age_ms = b->now - it->created_at;
        x->reason = apbot_xstrdup(it->reason);
    } else {
        x->key = apbot_xstrdup(n->key);
        x->vendor_id = apbot_xstrdup(n->vendor_id);
        x->currency = apbot_xstrdup(n->currency);
        x->exponent = n->exponent;
        x->amount = n->amount;
        x->has_amount = n->has_amount;
    }
    r->sum.counts[n->kind]++;
    if (report_kind_is_drift(n->kind))
        r->sum.drift++;
}

/* ---- collecting the queue ------------------------------------------------------------- */

static int collect_item(void *ctx, const struct store_item *si)
{
    struct build *b = ctx;
    struct ritem *it;

    if (apbot_grow((void **)&b->items, &b->cap_items, b->n_items, sizeof(*b->items),
                   REPORT_ITEMS_MAX) != APBOT_OK) {
        b->too_many_items = true;
        return APBOT_E_LIMIT;
    }
    it = &b->items[b->n_items++];
    memset(it, 0, sizeof(*it));
    it->id = si->id;
    it->key = apbot_xstrdup(si->key);
    it->cut = b->flow ? flow_key_cut(b->flow, si->key) : apbot_xstrdup(si->key);
    if (!it->cut)
        abort(); /* only a NULL key cuts to NULL, and every stored item has a key */
    it->state = si->state;
    it->created_at = si->created_at;
    it->updated_at = si->updated_at;
    it->erp_doc = apbot_xstrdup(si->erp_doc);
    it->reason = apbot_xstrdup(si->reason);
    it->vendor_id = apbot_xstrdup(si->vendor_id);
    it->vendor_name = apbot_xstrdup(si->vendor_name);
    it->invoice_number = apbot_xstrdup(si->invoice_number);
    snprintf(it->doc_type, sizeof(it->doc_type), "%s", si->doc_type);
    snprintf(it->currency, sizeof(it->currency), "%s", si->currency);
    snprintf(it->issue_date, sizeof(it->issue_date), "%s", si->issue_date);
    it->exponent = si->exponent;
    it->total = si->total;
    it->group = -1;
    return 0;
}

static int collect_row(void *ctx, const struct erp_row *er)
{
    struct build *b = ctx;
    struct rrow *row;

    if (apbot_grow((void **)&b->rows, &b->cap_rows, b->n_rows, sizeof(*b->rows), REPORT_ROWS_MAX) !=
        APBOT_OK) {
        b->too_many_rows = true;
        return APBOT_E_LIMIT;
    }
    row = &b->rows[b->n_rows++];
    memset(row, 0, sizeof(*row));
    row->doc = apbot_xstrdup(er->doc);
    row->reference = apbot_xstrdup(er->reference);
    row->vendor = apbot_xstrdup(er->vendor);
    row->currency = apbot_xstrdup(er->currency);
    row->amount_text = apbot_xstrdup(er->amount_text);
    row->date = apbot_xstrdup(er->date);
    row->amount = er->amount;
    row->exponent = er->exponent;
    row->has_amount = er->has_amount;
    return 0;
}

static const char *nz(const char *s)
{
    return s ? s : "";
}

static int cmp_row(const void *a, const void *b)
{
    const struct rrow *x = a, *y = b;
    int c = strcmp(nz(x->reference), nz(y->reference));
    return c ? c : strcmp(nz(x->doc), nz(y->doc));
}

static int cmp_cut(const void *a, const void *b)
{
    const struct ritem *x = *(const struct ritem *const *)a;
    const struct ritem *y = *(const struct ritem *const *)b;
    return strcmp(x->cut, y->cut);
}

/* The item whose cut key is cut, or NULL. */
static struct ritem *find_item(struct build *b, const char *cut)
{
    size_t lo = 0, hi = b->n_items;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        struct ritem *it = b->by_cut[mid];
        int c = strcmp(cut, it->cut);
        if (c == 0)
            return it;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* The invoice side of the one matching rule (docmatch.h). */
static void inv_of(const struct ritem *it, struct docmatch_invoice *ret)
{
    memset(ret, 0, sizeof(*ret));
    ret->vendor_id = it->vendor_id;
    ret->currency = it->currency;
    ret->exponent = it->exponent;
    ret->total = it->total;
    ret->credit_note = strcmp(it->doc_type, "credit-note") == 0;
}

/* The record side of an ERP row; an amount the row could not read in a currency of its own is
 * read in the item's (a listing without a currency column). */
static void record_of(const struct flow_table *t, const struct ritem *it, const char *doc,
                      const char *vendor, const char *currency, const char *amount_text,
                      bool has_amount, int64_t amount, int exponent, struct docmatch_record *ret)
{
    memset(ret, 0, sizeof(*ret));
    ret->doc = doc;
    ret->vendor = vendor;
    ret->currency = currency;
    ret->amount_text = amount_text;
    ret->has_amount = has_amount;
    ret->amount = amount;
    ret->exponent = exponent;
    if (!has_amount && amount_text && *amount_text) {
        const char *cur = currency ? currency : it->currency;
        int64_t v = 0;
        if (money_exponent(cur) >= 0 &&
            erp_parse_amount(t, amount_text, cur, &v, NULL, 0) == APBOT_OK) {
            ret->has_amount = true;
            ret->amount = v;
            ret->exponent = money_exponent(cur);
        }
    }
}

static void record_of_rrow(const struct flow_table *t, const struct ritem *it,
                           const struct rrow *row, struct docmatch_record *ret)
{
    record_of(t, it, row->doc, row->vendor, row->currency, row->amount_text, row->has_amount,
              row->amount, row->exponent, ret);
}

static void record_of_hit(const struct flow_table *t, const struct ritem *it,
                          const struct erp_row *h, struct docmatch_record *ret)
{
    record_of(t, it, h->doc, h->vendor, h->currency, h->amount_text, h->has_amount, h->amount,
              h->exponent, ret);
}

/* ---- the join -------------------------------------------------------------------------- */

/* "D1, D2" of a row group, heap. */
static char *group_docs(const struct build *b, const struct rgroup *g)
{
    size_t len = 1;
    char *s;

    for (size_t i = 0; i < g->n; i++)
        len += strlen(nz(b->rows[g->first + i].doc)) + 2;
    s = apbot_xcalloc(1, len);
    for (size_t i = 0; i < g->n; i++) {
        if (i)
            strcat(s, ", ");
        strcat(s, nz(b->rows[g->first + i].doc));
    }
    return s;
}

/* "D1, D2" of lookup hits, heap. */
static char *hits_docs(const struct erp_hits *h)
{
    size_t len = 1;
    char *s;

    for (size_t i = 0; i < h->n; i++)
        len += strlen(nz(h->rows[i].doc)) + 2;
    s = apbot_xcalloc(1, len);
    for (size_t i = 0; i < h->n; i++) {
        if (i)
            strcat(s, ", ");
        strcat(s, nz(h->rows[i].doc));
    }
    return s;
}

/* Compares a completed item with its only ERP record; adds mismatches, counts a match. */
static void check_completed_row(struct build *b, struct ritem *it,
                                const struct docmatch_record *rec, bool *ret_matched)
{
    struct docmatch_invoice inv;
    char why[512];
    unsigned diff;
    bool doc_ok = rec->doc && it->erp_doc && strcmp(rec->doc, it->erp_doc) == 0;
    struct fnew n;

    inv_of(it, &inv);
    diff = docmatch_compare(&inv, rec);
    if (diff != DOCMATCH_SAME) {
        memset(&n, 0, sizeof(n));
        n.kind = REPORT_AMOUNT_MISMATCH;
        n.item = it;
        n.erp_docs = rec->doc;
        n.has_erp_amount = rec->has_amount && rec->exponent == it->exponent;
        n.erp_amount = rec->amount;
        n.detail = xprintf("ERP document %s shows %s.", nz(rec->doc),
                           docmatch_describe(diff, &inv, rec, why, sizeof(why)));
        add_finding(b, &n);
    }
    if (!doc_ok) {
        memset(&n, 0, sizeof(n));
        n.kind = REPORT_DOC_MISMATCH;
        n.item = it;
        n.erp_docs = rec->doc;
        n.has_erp_amount = rec->has_amount && rec->exponent == it->exponent;
        n.erp_amount = rec->amount;
        n.detail = xprintf("The queue recorded document %s; the ERP holds this key as "
                           "document %s.",
                           it->erp_doc ? it->erp_doc : "(none)", nz(rec->doc));
        add_finding(b, &n);
    }
    *ret_matched = diff == DOCMATCH_SAME && doc_ok;
}

static void add_duplicate(struct build *b, struct ritem *it, size_t count, const char *docs)
{
    struct fnew n;
    memset(&n, 0, sizeof(n));
    n.kind = REPORT_DUPLICATE;
    n.item = it;
    n.erp_docs = docs;
    n.detail = xprintf("Booked %zu times in the ERP (documents %s); only one may stay: "
                       "reverse the others.",
                       count, docs);
    add_finding(b, &n);
}

/* Walks the day's listing grouped by reference. */
static void join_listing(struct build *b)
{
    const struct flow_table *t = &b->flow->list.table;
    const size_t plen = strlen(INVOICE_KEY_PREFIX);

    for (size_t gi = 0; gi < b->n_groups; gi++) {
        struct rgroup *g = &b->groups[gi];
        struct rrow *first = &b->rows[g->first];
        struct ritem *it;
        char *docs;

        if (!first->reference || strncmp(first->reference, INVOICE_KEY_PREFIX, plen) != 0)
            continue; /* not an apbot record */
        b->r->sum.erp_apbot_rows += (int64_t)g->n;
        it = find_item(b, first->reference);
        if (!it) {
            for (size_t i = 0; i < g->n; i++) {
                struct rrow *row = &b->rows[g->first + i];
                char a1[48];
                struct fnew n;
                int exp = row->has_amount ? row->exponent : 0;

                memset(&n, 0, sizeof(n));
                n.kind = REPORT_ORPHAN;
                n.key = row->reference;
                n.vendor_id = row->vendor;
                n.currency = row->currency;
                n.exponent = exp;
                n.erp_docs = row->doc;
                n.has_erp_amount = row->has_amount;
                n.erp_amount = row->amount;
                n.detail = xprintf("ERP document %s (vendor %s, %s %s) carries the apbot key "
                                   "%s, which is not in this queue: booked by hand or from "
                                   "another queue.",
                                   nz(row->doc), nz(row->vendor),
                                   row->has_amount ? money_text(row->amount, exp, a1, sizeof(a1))
                                                   : nz(row->amount_text),
                                   nz(row->currency), row->reference);
                add_finding(b, &n);
            }
            continue;
        }
        it->group = (ssize_t)gi;
        docs = group_docs(b, g);
        if (g->n > 1)
            add_duplicate(b, it, g->n, docs);
        switch (it->state) {
        case MACHINE_COMPLETED:
            if (g->n == 1) {
                bool matched = false;
                struct docmatch_record rec;
                record_of_rrow(t, it, first, &rec);
                check_completed_row(b, it, &rec, &matched);
                if (matched)
                    b->r->sum.matched++;
            } else {
                bool any = false;
                for (size_t i = 0; i < g->n; i++)
                    if (it->erp_doc && b->rows[g->first + i].doc &&
                        strcmp(it->erp_doc, b->rows[g->first + i].doc) == 0)
                        any = true;
                if (!any) {
                    struct fnew n;
                    memset(&n, 0, sizeof(n));
                    n.kind = REPORT_DOC_MISMATCH;
                    n.item = it;
                    n.erp_docs = docs;
                    n.detail = xprintf("The queue recorded document %s; the ERP holds this key "
                                       "only as %s.",
                                       it->erp_doc ? it->erp_doc : "(none)", docs);
                    add_finding(b, &n);
                }
            }
            break;
        case MACHINE_BUSINESS_EXCEPTION: {
            struct fnew n;
            memset(&n, 0, sizeof(n));
            n.kind = REPORT_BOOKED_EXCEPTION;
            n.item = it;
            n.erp_docs = docs;
            n.detail = xprintf("Rejected here (%s), yet the ERP holds it as %s: reverse it in "
                               "the ERP, or requeue the item so the bot adopts the document.",
                               it->reason ? it->reason : "no reason recorded", docs);
            add_finding(b, &n);
            break;
        }
        case MACHINE_NEW:
        case MACHINE_CHECKING:
        case MACHINE_POSTING:
        case MACHINE_RECONCILING:
        case MACHINE_FINISHING:
        case MACHINE_MANUAL_REVIEW:
        case MACHINE_STATE__COUNT:
        case MACHINE_STATE_INVALID:
            break; /* hints, below */
        }
        free(docs);
    }
}

/* Looks a key up; counts it. */
static int lookup(struct build *b, const struct ritem *it, struct erp_lookup_result *res, char *err,
                  size_t errlen)
{
    b->r->sum.lookups++;
    /* No invoice: a flow whose lookup compares invoice fields (<expect>) cannot be used for
     * the report's lookups and says so (APBOT_E_INVAL). */
    return erp_lookup(b->erp, it->key, NULL, it->currency, res, err, errlen);
}

/* A completed item of the day that the day's listing lacks: booked on another day, or
 * missing. ERP_FAILED is fatal: a missing record must be proven, not guessed. */
static int check_absent_completed(struct build *b, struct ritem *it, char *err, size_t errlen)
{
    struct erp_lookup_result res;
    struct fnew n;
    int rc;

    memset(&n, 0, sizeof(n));
    n.item = it;
    if (!flow_has_lookup(b->flow)) {
        n.kind = REPORT_MISSING;
        n.detail = xprintf("Completed here as document %s, but the ERP's listing for %s does "
                           "not show it (the flow has no lookup to search other days).",
                           nz(it->erp_doc), b->date);
        add_finding(b, &n);
        return APBOT_OK;
    }
    rc = lookup(b, it, &res, err, errlen);
    if (rc != APBOT_OK)
        return rc;
    switch (res.answer) {
    case ERP_FOUND_UNFINISHED: /* not produced until the ERP driver reads <finished> */
    case ERP_FAILED:
        rc = apbot_fail(err, errlen, APBOT_E_NET, "checking item %lld in the ERP: %s",
                        (long long)it->id, res.detail);
        break;
    case ERP_NOT_FOUND:
        n.kind = REPORT_MISSING;
        n.detail = xprintf("Completed here as document %s, but the ERP holds no record with "
                           "this key (deleted or reversed?).",
                           nz(it->erp_doc));
        add_finding(b, &n);
        break;
    case ERP_FOUND: {
        struct erp_row *h = &res.hits.rows[0];
        if (res.hits.n > 1) {
            char *docs = hits_docs(&res.hits);
            add_duplicate(b, it, res.hits.n, docs);
            free(docs);
        } else if (h->doc && it->erp_doc && strcmp(h->doc, it->erp_doc) == 0) {
            bool matched = false;
            struct docmatch_record rec;
            record_of_hit(&b->flow->lookup.table, it, h, &rec);
            check_completed_row(b, it, &rec, &matched);
            if (matched) {
                n.kind = REPORT_OTHER_DAY;
                n.erp_docs = h->doc;
                n.detail = xprintf("Completed on %s; the ERP booked document %s on %s.", b->date,
                                   h->doc, h->booked ? h->booked : "another day");
                add_finding(b, &n);
            }
        } else {
            bool matched = false;
            struct docmatch_record rec;
            record_of_hit(&b->flow->lookup.table, it, h, &rec);
            check_completed_row(b, it, &rec, &matched);
        }
        break;
    }
    }
    erp_lookup_result_done(&res);
    return rc;
}

/* The review hint of a manual-review item: does the ERP hold it, and how? */
static void review_hint(struct build *b, struct ritem *it)
{
    struct fnew n;
    struct docmatch_invoice inv;
    char why[512];

    inv_of(it, &inv);
    memset(&n, 0, sizeof(n));
    n.item = it;
    n.kind = REPORT_REVIEW_OPEN;
    if (it->group >= 0) {
        struct rgroup *g = &b->groups[it->group];
        struct rrow *row = &b->rows[g->first];
        struct docmatch_record rec;
        unsigned diff;
        record_of_rrow(&b->flow->list.table, it, row, &rec);
        diff = docmatch_compare(&inv, &rec);
        n.erp_docs = row->doc;
        n.has_erp_amount = rec.has_amount && rec.exponent == it->exponent;
        n.erp_amount = rec.amount;
        if (g->n > 1) {
            n.detail = xprintf("Booked %zu times in the ERP (see duplicates): settle the "
                               "duplicates first.",
                               g->n);
        } else if (diff == DOCMATCH_SAME && row->doc) {
            n.kind = REPORT_REVIEW_HELD;
            n.detail = xprintf("The ERP holds it as document %s with the same amount "
                               "(booked %s).",
                               row->doc, b->date);
            n.command = xprintf("apbot resolve %lld --posted %s --flow %s", (long long)it->id,
                                row->doc, nz(b->flow->path));
        } else {
            n.detail = xprintf("The ERP holds this key as document %s with %s: check the "
                               "booking before resolving.",
                               nz(row->doc), docmatch_describe(diff, &inv, &rec, why, sizeof(why)));
        }
        add_finding(b, &n);
        return;
    }
    if (!flow_has_lookup(b->flow) || b->r->sum.lookups >= b->max_lookups) {
        n.detail =
            xprintf("Not checked in the ERP (%s).",
                    flow_has_lookup(b->flow) ? "lookup budget spent" : "the flow has no lookup");
        add_finding(b, &n);
        return;
    }
    {
        struct erp_lookup_result res;
        char lerr[APBOT_ERR_LEN] = "";
        int rc = lookup(b, it, &res, lerr, sizeof(lerr));
        if (rc != APBOT_OK || res.answer == ERP_FAILED || res.answer == ERP_FOUND_UNFINISHED) {
            n.detail = xprintf("Could not check the ERP: %s", rc != APBOT_OK ? lerr : res.detail);
        } else if (res.answer == ERP_NOT_FOUND) {
            n.detail = xprintf("The ERP does not hold it: requeue it (apbot resolve %lld "
                               "--requeue) or reject it.",
                               (long long)it->id);
            n.command = xprintf("apbot resolve %lld --requeue", (long long)it->id);
        } else if (res.hits.n > 1) {
            char *docs = hits_docs(&res.hits);
            add_duplicate(b, it, res.hits.n, docs);
            n.erp_docs = docs;
            n.detail = xprintf("Booked %zu times in the ERP (see duplicates): settle the "
                               "duplicates first.",
                               res.hits.n);
            add_finding(b, &n);
            free(docs);
            erp_lookup_result_done(&res);
            return;
        } else {
            struct erp_row *h = &res.hits.rows[0];
            struct docmatch_record rec;
            unsigned diff;
            record_of_hit(&b->flow->lookup.table, it, h, &rec);
            diff = docmatch_compare(&inv, &rec);
            n.erp_docs = h->doc;
            n.has_erp_amount = rec.has_amount && rec.exponent == it->exponent;
            n.erp_amount = rec.amount;
            if (diff == DOCMATCH_SAME && h->doc) {
                n.kind = REPORT_REVIEW_HELD;
                if (h->booked)
                    n.detail = xprintf("The ERP holds it as document %s with the same amount "
                                       "(booked %s).",
                                       h->doc, h->booked);
                else
                    n.detail =
                        xprintf("The ERP holds it as document %s with the same amount.", h->doc);
                n.command = xprintf("apbot resolve %lld --posted %s --flow %s", (long long)it->id,
                                    h->doc, nz(b->flow->path));
            } else {
                n.detail =
                    xprintf("The ERP holds this key as document %s with %s: check the "
                            "booking before resolving.",
                            nz(h->doc), docmatch_describe(diff, &inv, &rec, why, sizeof(why)));
            }
        }
        add_finding(b, &n); /* copies n.erp_docs, which points into res */
        erp_lookup_result_done(&res);
    }
}

/* The bucket an item is in: every invoice ends in exactly one place. */
enum bucket_id { BUCKET_COMPLETED, BUCKET_EXCEPTION, BUCKET_REVIEW, BUCKET_PENDING, BUCKET_NONE };

static enum bucket_id bucket_id(const struct ritem *it)
{
    switch (it->state) {
    case MACHINE_COMPLETED:
        return it->erp_doc && *it->erp_doc ? BUCKET_COMPLETED : BUCKET_NONE;
    case MACHINE_BUSINESS_EXCEPTION:
        return BUCKET_EXCEPTION;
    case MACHINE_MANUAL_REVIEW:
        return BUCKET_REVIEW;
    case MACHINE_NEW:
    case MACHINE_CHECKING:
    case MACHINE_POSTING:
    case MACHINE_RECONCILING:
    case MACHINE_FINISHING:
        return BUCKET_PENDING;
    case MACHINE_STATE__COUNT:
    case MACHINE_STATE_INVALID:
        break;
    }
    return BUCKET_NONE;
}

static void bucket(struct report_balance *bal, const struct ritem *it, bool *ret_unaccounted)
{
    bal->received++;
    *ret_unaccounted = false;
    switch (bucket_id(it)) {
    case BUCKET_COMPLETED:
        bal->completed++;
        return;
    case BUCKET_EXCEPTION:
        bal->exceptions++;
        return;
    case BUCKET_REVIEW:
        bal->review++;
        return;
    case BUCKET_PENDING:
        bal->pending++;
        return;
    case BUCKET_NONE:
        break;
    }
    bal->unaccounted++;
    *ret_unaccounted = true;
}

/* The same bucket of report_amounts. */
static int64_t *amount_slot(struct report_amounts *a, const struct ritem *it)
{
    switch (bucket_id(it)) {
    case BUCKET_COMPLETED:
        return &a->completed;
    case BUCKET_EXCEPTION:
        return &a->exceptions;
    case BUCKET_REVIEW:
        return &a->review;
    case BUCKET_PENDING:
        return &a->pending;
    case BUCKET_NONE:
        break;
    }
    return &a->unaccounted;
}

static bool balanced(const struct report_balance *bal)
{
    return bal->unaccounted == 0 &&
           bal->received == bal->completed + bal->exceptions + bal->review + bal->pending;
}

/* Orphans by the ERP's document number as people count (report_doc_cmp), then key. */
static int cmp_orphan(const void *a, const void *b)
{
    const struct report_finding *x = a, *y = b;
    int c = report_doc_cmp(x->erp_docs, y->erp_docs);
    return c ? c : strcmp(nz(x->key), nz(y->key));
}

/* Sorts findings by kind (section order), keeping the walk's order inside a kind but for the
 * orphans, which no item orders: those by document number. */
static void sort_findings(struct report *r)
{
    struct report_finding *out;
    size_t k = 0;

    if (r->n < 2)
        return;
    out = apbot_xmalloc(r->n * sizeof(*out));
    for (int kind = 0; kind < REPORT_KIND__COUNT; kind++) {
        size_t first = k;
        for (size_t i = 0; i < r->n; i++)
            if ((int)r->f[i].kind == kind)
                out[k++] = r->f[i];
        if (kind == REPORT_ORPHAN && k - first > 1)
            qsort(out + first, k - first, sizeof(*out), cmp_orphan);
    }
    free(r->f);
    r->f = out;
    r->cap = r->n;
}

static void build_done(struct build *b)
{
    for (size_t i = 0; i < b->n_items; i++) {
        struct ritem *it = &b->items[i];
        free(it->key);
        free(it->cut);
        free(it->erp_doc);
        free(it->reason);
        free(it->vendor_id);
        free(it->vendor_name);
        free(it->invoice_number);
    }
    free(b->items);
    for (size_t i = 0; i < b->n_rows; i++) {
        struct rrow *row = &b->rows[i];
        free(row->doc);
        free(row->reference);
        free(row->vendor);
        free(row->currency);
        free(row->amount_text);
        free(row->date);
    }
    free(b->rows);
    free(b->groups);
    free(b->by_cut);
}

/* ---- money ------------------------------------------------------------------------------ */

#define REPORT_CURRENCIES_MAX 400 /* ISO 4217 has fewer; more is garbage in the queue */
#define REPORT_DIFFS_MAX 1000000

/* The money record of a currency, made on first use; NULL past the bound. */
static struct report_money *money_for(struct report *r, const char *currency, int exponent)
{
    for (size_t i = 0; i < r->n_money; i++)
        if (strcmp(r->money[i].currency, currency) == 0)
            return &r->money[i];
    if (apbot_grow((void **)&r->money, &r->cap_money, r->n_money, sizeof(*r->money),
                   REPORT_CURRENCIES_MAX) != APBOT_OK)
        return NULL;
    struct report_money *m = &r->money[r->n_money++];
    memset(m, 0, sizeof(*m));
    snprintf(m->currency, sizeof(m->currency), "%s", currency);
    m->exponent = exponent;
    return m;
}

/* *acc += v, or APBOT_E_RANGE (with a message) past the money bound. */
static int add_money(int64_t *acc, int64_t v, const char *currency, char *err, size_t errlen)
{
    if (money_add(acc, v) != APBOT_OK)
        return apbot_fail(err, errlen, APBOT_E_RANGE,
                          "report: the %s amounts add up past what apbot can count", currency);
    return APBOT_OK;
}

/* The money buckets of one item (day and total), as bucket() does for counts. */
static int money_item(struct build *b, const struct ritem *it, bool on_day, char *err,
                      size_t errlen)
{
    struct report_money *m = money_for(b->r, it->currency, it->exponent);
    int rc;

    if (!m)
        return apbot_fail(err, errlen, APBOT_E_LIMIT, "report: more than %d currencies",
                          REPORT_CURRENCIES_MAX);
    for (int pass = 0; pass < (on_day ? 2 : 1); pass++) {
        struct report_amounts *am = pass == 0 ? &m->total : &m->day;
        rc = add_money(&am->received, it->total, it->currency, err, errlen);
        if (rc == APBOT_OK)
            rc = add_money(amount_slot(am, it), it->total, it->currency, err, errlen);
        if (rc != APBOT_OK)
            return rc;
    }
    return APBOT_OK;
}

static bool amounts_balance(const struct report_amounts *a)
{
    /* the sums were each checked against overflow, and so is every partial sum here */
    int64_t sum = 0;
    if (money_add(&sum, a->completed) != APBOT_OK || money_add(&sum, a->exceptions) != APBOT_OK ||
        money_add(&sum, a->review) != APBOT_OK || money_add(&sum, a->pending) != APBOT_OK)
        return false;
    return a->unaccounted == 0 && sum == a->received;
}

struct diff_new {
    enum report_diff_why why;
    const char *currency;
    int exponent;
    const char *doc;
    const struct ritem *item;
    const char *key; /* when no item */
    bool has_erp;
    int64_t erp;
    bool has_queue;
    int64_t queue;
};

static int add_diff(struct build *b, const struct diff_new *d, char *err, size_t errlen)
{
    struct report *r = b->r;
    struct report_money *m = money_for(r, d->currency, d->exponent);
    struct report_money_diff *x;
    int64_t delta = 0;
    int rc = APBOT_OK;

    if (!m || apbot_grow((void **)&r->diffs, &r->cap_diffs, r->n_diffs, sizeof(*r->diffs),
                         REPORT_DIFFS_MAX) != APBOT_OK)
        return apbot_fail(err, errlen, APBOT_E_LIMIT, "report: too many differences to list");
    if (d->has_erp)
        rc = add_money(&delta, d->erp, d->currency, err, errlen);
    if (rc == APBOT_OK && d->has_queue)
        rc = add_money(&delta, -d->queue, d->currency, err, errlen);
    if (rc != APBOT_OK)
        return rc;
    x = &r->diffs[r->n_diffs++];
    memset(x, 0, sizeof(*x));
    x->currency = apbot_xstrdup(d->currency);
    x->exponent = d->exponent;
    x->why = d->why;
    x->doc = apbot_xstrdup(d->doc);
    x->item_id = d->item ? d->item->id : 0;
    x->key = apbot_xstrdup(d->item ? d->item->key : d->key);
    x->has_erp_amount = d->has_erp;
    x->erp_amount = d->erp;
    x->has_queue_amount = d->has_queue;
    x->queue_amount = d->queue;
    x->delta = delta;
    return APBOT_OK;
}

static bool has_finding(const struct report *r, enum report_kind k, int64_t item_id)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->f[i].kind == k && r->f[i].item_id == item_id)
            return true;
    return false;
}

/*
 * The ERP side of the money: every apbot row of the day's listing is added to its currency's
 * ERP total and every item completed on the day to its currency's expected total; an item is
 * paired with one of its rows (its own document first) and each row or item that does not
 * cancel out becomes a difference row, so the rows of a currency add up exactly to its
 * difference (the test checks that sum independently).
 */
static int money_listing(struct build *b, char *err, size_t errlen)
{
    const struct flow_table *t = &b->flow->list.table;
    const size_t plen = strlen(INVOICE_KEY_PREFIX);
    int rc;

    for (size_t gi = 0; gi < b->n_groups; gi++) {
        struct rgroup *g = &b->groups[gi];
        struct rrow *first = &b->rows[g->first];
        struct ritem *it;
        ssize_t pair = -1;

        if (!first->reference || strncmp(first->reference, INVOICE_KEY_PREFIX, plen) != 0)
            continue;
        it = find_item(b, first->reference);
        /* the row counted against an expected item: its own document, else the first row in
         * the item's currency */
        if (it && it->expected) {
            for (size_t i = 0; i < g->n && pair < 0; i++) {
                struct rrow *row = &b->rows[g->first + i];
                if (row->doc && it->erp_doc && strcmp(row->doc, it->erp_doc) == 0 &&
                    (!row->currency || strcmp(row->currency, it->currency) == 0))
                    pair = (ssize_t)i;
            }
            for (size_t i = 0; i < g->n && pair < 0; i++) {
                struct rrow *row = &b->rows[g->first + i];
                if (!row->currency || strcmp(row->currency, it->currency) == 0)
                    pair = (ssize_t)i;
            }
        }
        for (size_t i = 0; i < g->n; i++) {
            struct rrow *row = &b->rows[g->first + i];
            struct diff_new d;
            struct report_money *m;
            const char *cur;
            int exp;
            bool readable;
            int64_t amount = 0;

            memset(&d, 0, sizeof(d));
            if (it) {
                struct docmatch_record rec;
                struct docmatch_invoice inv;
                record_of_rrow(t, it, row, &rec);
                inv_of(it, &inv);
                cur = row->currency ? row->currency : it->currency;
                exp = money_exponent(cur);
                readable = rec.has_amount && rec.exponent == exp;
                if (readable)
                    amount = strcmp(cur, it->currency) == 0 ? docmatch_as_queued(&inv, rec.amount)
                                                            : rec.amount;
            } else {
                cur = row->currency ? row->currency : "";
                exp = row->has_amount ? row->exponent : money_exponent(cur);
                readable = row->has_amount;
                amount = row->amount;
            }
            if (exp < 0)
                exp = 0;
            m = money_for(b->r, cur, exp);
            if (!m)
                return apbot_fail(err, errlen, APBOT_E_LIMIT, "report: more than %d currencies",
                                  REPORT_CURRENCIES_MAX);
            if (readable) {
                rc = add_money(&m->erp_total, amount, cur, err, errlen);
                if (rc != APBOT_OK)
                    return rc;
                m->erp_docs++;
            } else {
                m->erp_unreadable++;
            }
            d.currency = cur;
            d.exponent = exp;
            d.doc = row->doc;
            d.item = it;
            d.key = row->reference;
            d.has_erp = readable;
            d.erp = amount;
            if ((ssize_t)i == pair) {
                it->paired = true;
                d.has_queue = true;
                d.queue = it->total;
                if (!readable)
                    d.why = REPORT_DIFF_UNREADABLE;
                else if (amount != it->total)
                    d.why = REPORT_DIFF_AMOUNT;
                else
                    continue; /* cancels out */
            } else if (!readable) {
                d.why = REPORT_DIFF_UNREADABLE; /* counted nowhere: listed, delta 0 */
            } else if (!it) {
                d.why = REPORT_DIFF_ORPHAN;
            } else if (it->expected && pair >= 0) {
                d.why = REPORT_DIFF_DUPLICATE;
            } else if (it->expected) {
                d.why = REPORT_DIFF_OTHER_CURRENCY;
            } else if (g->n > 1 && it->state == MACHINE_COMPLETED && i > 0) {
                d.why = REPORT_DIFF_DUPLICATE;
            } else if (it->state == MACHINE_COMPLETED) {
                d.why = REPORT_DIFF_COMPLETED_OTHER;
            } else {
                d.why = REPORT_DIFF_NOT_COMPLETED;
            }
            rc = add_diff(b, &d, err, errlen);
            if (rc != APBOT_OK)
                return rc;
        }
    }
    /* expected items the listing does not hold (in their currency) */
    for (size_t i = 0; i < b->n_items; i++) {
        struct ritem *it = &b->items[i];
        struct diff_new d;
        if (!it->expected || it->paired)
            continue;
        memset(&d, 0, sizeof(d));
        d.why = has_finding(b->r, REPORT_OTHER_DAY, it->id) ? REPORT_DIFF_BOOKED_OTHER_DAY
                                                            : REPORT_DIFF_MISSING;
        d.currency = it->currency;
        d.exponent = it->exponent;
        d.doc = it->erp_doc;
        d.item = it;
        d.has_queue = true;
        d.queue = it->total;
        rc = add_diff(b, &d, err, errlen);
        if (rc != APBOT_OK)
            return rc;
    }
    return APBOT_OK;
}

static int cmp_money(const void *a, const void *b)
{
    return strcmp(((const struct report_money *)a)->currency,
                  ((const struct report_money *)b)->currency);
}

static int cmp_diff(const void *a, const void *b)
{
    const struct report_money_diff *x = a, *y = b;
    int c = strcmp(x->currency, y->currency);
    if (c == 0)
        c = report_doc_cmp(x->doc, y->doc);
    if (c == 0)
        c = x->item_id < y->item_id ? -1 : x->item_id > y->item_id;
    return c;
}

/* The queue's money, and with the ERP read the listing against it. */
static int build_money(struct build *b, char *err, size_t errlen)
{
    struct report *r = b->r;
    int rc;

    for (size_t i = 0; i < b->n_items; i++) {
        struct ritem *it = &b->items[i];
        char created[11];
        report_local_date(it->created_at, created);
        rc = money_item(b, it, strcmp(created, b->date) == 0, err, errlen);
        if (rc != APBOT_OK)
            return rc;
        if (it->expected) {
            struct report_money *m = money_for(r, it->currency, it->exponent);
            if (!m)
                return apbot_fail(err, errlen, APBOT_E_LIMIT, "report: more than %d currencies",
                                  REPORT_CURRENCIES_MAX);
            rc = add_money(&m->expected, it->total, it->currency, err, errlen);
            if (rc != APBOT_OK)
                return rc;
            m->expected_items++;
        }
    }
    if (r->sum.erp_read) {
        rc = money_listing(b, err, errlen);
        if (rc != APBOT_OK)
            return rc;
    }
    for (size_t i = 0; i < r->n_money; i++) {
        struct report_money *m = &r->money[i];
        m->balanced = amounts_balance(&m->day) && amounts_balance(&m->total);
        m->difference = 0;
        if (r->sum.erp_read) {
            rc = add_money(&m->difference, m->erp_total, m->currency, err, errlen);
            if (rc == APBOT_OK)
                rc = add_money(&m->difference, -m->expected, m->currency, err, errlen);
            if (rc != APBOT_OK)
                return rc;
        }
        if (!m->balanced)
            r->sum.balanced = false;
    }
    if (r->n_money > 1)
        qsort(r->money, r->n_money, sizeof(*r->money), cmp_money);
    if (r->n_diffs > 1)
        qsort(r->diffs, r->n_diffs, sizeof(*r->diffs), cmp_diff);
    return APBOT_OK;
}

/* ---- the day's activity ------------------------------------------------------------------- */

#define REPORT_RUNS_MAX 1000

struct run_acc {
    char owner[160];
    int64_t first, last, items, outcomes[REPORT_OUT__COUNT];
    int64_t last_item; /* the item last counted in items */
};

struct activity_walk {
    struct build *b;
    struct run_acc *runs;
    size_t n_runs, cap_runs;
    int64_t item_id;
};

static int activity_event(void *ctx, const struct store_event_row *e)
{
    struct activity_walk *w = ctx;
    struct report_activity *a = &w->b->r->activity;
    enum report_outcome out;
    char owner[160];
    struct run_acc *run = NULL;
    time_t t;
    struct tm tm;
    const char *slash;
    size_t n;

    if (e->at < w->b->day_start || e->at >= w->b->day_end || !e->actor || !e->to ||
        strncmp(e->actor, "runner:", 7) != 0)
        return 0;
    if (strcmp(e->to, "completed") == 0)
        out = REPORT_OUT_COMPLETED;
    else if (strcmp(e->to, "business-exception") == 0)
        out = REPORT_OUT_EXCEPTION;
    else if (strcmp(e->to, "manual-review") == 0)
        out = REPORT_OUT_REVIEW;
    else if (strcmp(e->to, "reconciling") == 0 && e->from && strcmp(e->from, "reconciling") != 0)
        out = REPORT_OUT_UNKNOWN;
    else
        return 0;
    t = (time_t)(e->at / 1000);
    if (!localtime_r(&t, &tm) || tm.tm_hour < 0 || tm.tm_hour > 23)
        return 0;
    a->per_hour[tm.tm_hour][out]++;

    /* the run: the runner's owner without its worker suffix ("/w3") */
    slash = strchr(e->actor + 7, '/');
    n = slash ? (size_t)(slash - (e->actor + 7)) : strlen(e->actor + 7);
    if (n >= sizeof(owner))
        n = sizeof(owner) - 1;
    memcpy(owner, e->actor + 7, n);
    owner[n] = '\0';
    for (size_t i = 0; i < w->n_runs; i++)
        if (strcmp(w->runs[i].owner, owner) == 0)
            run = &w->runs[i];
    if (!run) {
        if (apbot_grow((void **)&w->runs, &w->cap_runs, w->n_runs, sizeof(*w->runs),
                       REPORT_RUNS_MAX) != APBOT_OK)
            return 0; /* a thousand runs in one day: the chart is still right */
        run = &w->runs[w->n_runs++];
        memset(run, 0, sizeof(*run));
        memcpy(run->owner, owner, n + 1);
        run->first = e->at;
    }
    if (e->at < run->first)
        run->first = e->at;
    if (e->at > run->last)
        run->last = e->at;
    run->outcomes[out]++;
    if (run->last_item != w->item_id) {
        run->items++;
        run->last_item = w->item_id;
    }
    return 0;
}

/* Local midnight of date and of the next day, ms. */
static int day_bounds(const char *date, int64_t *ret_start, int64_t *ret_end)
{
    struct tm tm;
    time_t t0, t1;

    memset(&tm, 0, sizeof(tm));
    if (sscanf(date, "%4d-%2d-%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday) != 3)
        return APBOT_E_INVAL;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    tm.tm_isdst = -1;
    t0 = mktime(&tm);
    memset(&tm, 0, sizeof(tm));
    (void)sscanf(date, "%4d-%2d-%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday);
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    tm.tm_mday += 1;
    tm.tm_isdst = -1;
    t1 = mktime(&tm);
    if (t0 == (time_t)-1 || t1 == (time_t)-1)
        return APBOT_E_INVAL;
    *ret_start = (int64_t)t0 * 1000;
    *ret_end = (int64_t)t1 * 1000;
    return APBOT_OK;
}

/* Reads the audit events of every item that changed on or after the day's start. */
static int build_activity(struct build *b, struct store *st, char *err, size_t errlen)
{
    struct report_activity *a = &b->r->activity;
    struct activity_walk w;
    int rc = APBOT_OK;

    memset(&w, 0, sizeof(w));
    w.b = b;
    for (size_t i = 0; i < b->n_items && rc == APBOT_OK; i++) {
        const struct ritem *it = &b->items[i];
        if (it->updated_at < b->day_start || it->created_at >= b->day_end)
            continue; /* no event of it can fall on the day */
        w.item_id = it->id;
        rc = store_each_event(st, it->id, activity_event, &w, err, errlen);
    }
    if (rc == APBOT_OK) {
        const struct run_acc *last = NULL;
        for (size_t i = 0; i < w.n_runs; i++)
            if (!last || w.runs[i].last > last->last)
                last = &w.runs[i];
        if (last) {
            snprintf(a->last_run, sizeof(a->last_run), "%s", last->owner);
            a->last_run_first = last->first;
            a->last_run_last = last->last;
            a->last_run_items = last->items;
            memcpy(a->last_run_outcomes, last->outcomes, sizeof(a->last_run_outcomes));
        }
        for (int h = 0; h < 24; h++) {
            int64_t sum = 0;
            for (int o = 0; o < REPORT_OUT__COUNT; o++)
                sum += a->per_hour[h][o];
            if (sum > a->max_hour)
                a->max_hour = sum;
        }
    }
    free(w.runs);
    return rc;
}

/* ---- building --------------------------------------------------------------------------- */

/* Starts a build: the report object and the queue snapshot, sorted by cut key. */
static int build_start(struct build *b, struct store *st, const struct flow *f,
                       const struct report_options *opt, struct store_counts *counts, char *err,
                       size_t errlen)
{
    struct report *r;
    int rc;

    memset(b, 0, sizeof(*b));
    if (!opt || !opt->date || !invoice_date_valid(opt->date))
        return apbot_fail(err, errlen, APBOT_E_INVAL, "report: bad date '%s' (want YYYY-MM-DD)",
                          opt && opt->date ? opt->date : "");
    r = apbot_xcalloc(1, sizeof(*r));
    b->r = r;
    b->flow = f;
    b->date = opt->date;
    b->now = opt->now ? opt->now : store_now_ms();
    b->max_lookups = opt->max_lookups > 0   ? opt->max_lookups
                     : opt->max_lookups < 0 ? 0
                                            : REPORT_DEFAULT_LOOKUPS;
    if (day_bounds(opt->date, &b->day_start, &b->day_end) != APBOT_OK)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "report: no such local day '%s'", opt->date);
    snprintf(r->sum.date, sizeof(r->sum.date), "%s", opt->date);
    r->sum.generated_at = b->now;
    r->flow_name = apbot_xstrdup(f ? (f->name ? f->name : f->path) : NULL);
    r->sum.flow_name = r->flow_name;

    struct store_audit_head head;
    rc = store_audit_head(st, b->day_end, &head, err, errlen);
    if (rc != APBOT_OK)
        return rc;
    r->sum.audit_head_id = head.event_id;
    store_audit_hex(head.hash, r->sum.audit_head_hash);
    /* the queue first: the ERP listing is then compared with one consistent snapshot */
    rc = store_counts(st, counts, err, errlen);
    if (rc != APBOT_OK)
        return rc;
    rc = store_each(st, MACHINE_STATE_INVALID, collect_item, b, err, errlen);
    if (b->too_many_items)
        return apbot_fail(err, errlen, APBOT_E_LIMIT, "report: the queue holds more than %d items",
                          REPORT_ITEMS_MAX);
    if (rc != APBOT_OK)
        return rc;
    b->by_cut = apbot_xmalloc((b->n_items ? b->n_items : 1) * sizeof(*b->by_cut));
    for (size_t i = 0; i < b->n_items; i++) {
        char done[11];
        struct ritem *it = &b->items[i];
        b->by_cut[i] = it;
        report_local_date(it->updated_at, done);
        it->expected = it->state == MACHINE_COMPLETED && it->erp_doc && *it->erp_doc &&
                       strcmp(done, opt->date) == 0;
    }
    if (b->n_items > 1)
        qsort(b->by_cut, b->n_items, sizeof(*b->by_cut), cmp_cut);
    return APBOT_OK;
}

/*
 * The dates to list. By booking date: the day itself. By invoice date: every invoice date of
 * the items completed on the day (and the day itself, for orphans dated that day), so each of
 * them can be joined by key wherever the ERP put its date.
 */
static void listing_window(struct build *b, char from[11], char to[11])
{
    snprintf(from, 11, "%s", b->date);
    snprintf(to, 11, "%s", b->date);
    if (b->flow->list.by != FLOW_LIST_BY_INVOICE)
        return;
    for (size_t i = 0; i < b->n_items; i++) {
        const struct ritem *it = &b->items[i];
        if (!it->expected || !invoice_date_valid(it->issue_date))
            continue;
        if (strcmp(it->issue_date, from) < 0)
            snprintf(from, 11, "%s", it->issue_date);
        if (strcmp(it->issue_date, to) > 0)
            snprintf(to, 11, "%s", it->issue_date);
    }
}

/*
 * A listing by invoice date holds the records of items completed on other days too: those are
 * not the day's and are left out (they were, or will be, joined on their own day). Rows of the
 * day's items, rows of items in any other state and rows no item claims (orphans) stay.
 */
static void drop_other_days(struct build *b)
{
    size_t kept = 0;
    for (size_t i = 0; i < b->n_rows; i++) {
        struct rrow *row = &b->rows[i];
        struct ritem *it = row->reference ? find_item(b, row->reference) : NULL;
        if (it && it->state == MACHINE_COMPLETED && !it->expected) {
            free(row->doc);
            free(row->reference);
            free(row->vendor);
            free(row->currency);
            free(row->amount_text);
            free(row->date);
            continue;
        }
        b->rows[kept++] = *row;
    }
    b->n_rows = kept;
}

/* Reads the day's listing and joins it with the queue. */
static int build_listing(struct build *b, char *err, size_t errlen)
{
    struct report *r = b->r;
    int pages = 0;
    char from[11], to[11];
    listing_window(b, from, to);
    int rc = erp_list_range(b->erp, from, to, collect_row, b, &pages, err, errlen);

    if (b->too_many_rows)
        return apbot_fail(err, errlen, APBOT_E_LIMIT,
                          "report: the listing holds more than %d records", REPORT_ROWS_MAX);
    if (rc != APBOT_OK)
        return rc;
    r->sum.list_by_invoice = b->flow->list.by == FLOW_LIST_BY_INVOICE;
    snprintf(r->sum.list_from, sizeof(r->sum.list_from), "%s", from);
    snprintf(r->sum.list_to, sizeof(r->sum.list_to), "%s", to);
    if (r->sum.list_by_invoice)
        drop_other_days(b);
    r->sum.erp_read = true;
    r->sum.erp_pages = pages;
    r->sum.erp_rows = (int64_t)b->n_rows;
    if (b->n_rows > 1)
        qsort(b->rows, b->n_rows, sizeof(*b->rows), cmp_row);
    b->groups = apbot_xcalloc(b->n_rows ? b->n_rows : 1, sizeof(*b->groups));
    for (size_t i = 0; i < b->n_rows; i++) {
        if (b->n_groups > 0 &&
            strcmp(nz(b->rows[b->groups[b->n_groups - 1].first].reference),
                   nz(b->rows[i].reference)) == 0 &&
            b->rows[i].reference) {
            b->groups[b->n_groups - 1].n++;
            continue;
        }
        b->groups[b->n_groups].first = i;
        b->groups[b->n_groups].n = 1;
        b->n_groups++;
    }
    join_listing(b);
    return APBOT_OK;
}

/* The balance and the per-item findings; with the ERP read, the lookups for completed items
 * the listing lacks and for manual-review hints. */
static int build_items(struct build *b, const struct store_counts *counts, char *err, size_t errlen)
{
    struct report *r = b->r;
    int rc;

    for (size_t i = 0; i < b->n_items; i++) {
        struct ritem *it = &b->items[i];
        char created[11], age[32];
        bool unacc = false;

        report_local_date(it->created_at, created);
        bucket(&r->sum.total, it, &unacc);
        if (strcmp(created, b->date) == 0) {
            bool unacc_day = false;
            bucket(&r->sum.day, it, &unacc_day);
        }
        if (unacc) {
            struct fnew n;
            memset(&n, 0, sizeof(n));
            n.kind = REPORT_UNACCOUNTED;
            n.item = it;
            n.detail = it->state == MACHINE_COMPLETED
                           ? xprintf("Completed without a document number.")
                           : xprintf("The queue holds it in an unknown state.");
            add_finding(b, &n);
            continue;
        }
        switch (it->state) {
        case MACHINE_COMPLETED:
            /* An item belongs to the day it was completed on (local time): that is when
             * the bot saw the ERP confirm or hold it, normally the booking day. */
            if (r->sum.erp_read && it->group < 0 && it->expected) {
                rc = check_absent_completed(b, it, err, errlen);
                if (rc != APBOT_OK)
                    return rc;
            }
            break;
        case MACHINE_MANUAL_REVIEW:
            if (r->sum.erp_read) {
                review_hint(b, it);
            } else {
                struct fnew n;
                memset(&n, 0, sizeof(n));
                n.kind = REPORT_REVIEW_OPEN;
                n.item = it;
                n.detail = xprintf("Not checked in the ERP (the ERP was not read).");
                add_finding(b, &n);
            }
            break;
        case MACHINE_BUSINESS_EXCEPTION: {
            struct fnew n;
            memset(&n, 0, sizeof(n));
            n.kind = REPORT_EXCEPTION;
            n.item = it;
            n.detail =
                xprintf("Rejected by the ERP: %s", it->reason ? it->reason : "no reason recorded");
            add_finding(b, &n);
            break;
        }
        case MACHINE_NEW:
        case MACHINE_CHECKING:
        case MACHINE_POSTING:
        case MACHINE_RECONCILING:
        case MACHINE_FINISHING: {
            struct fnew n;
            memset(&n, 0, sizeof(n));
            n.kind = REPORT_PENDING;
            n.item = it;
            report_format_age(b->now - it->created_at, age, sizeof(age));
            if (it->group >= 0) {
                struct rgroup *g = &b->groups[it->group];
                n.erp_docs = b->rows[g->first].doc;
                n.detail = xprintf("%s for %s; the ERP already holds document %s (the bot "
                                   "adopts it on its next lookup).",
                                   machine_state_name(it->state), age, nz(b->rows[g->first].doc));
            } else {
                n.detail = xprintf("%s for %s.", machine_state_name(it->state), age);
            }
            add_finding(b, &n);
            break;
        }
        case MACHINE_STATE__COUNT:
        case MACHINE_STATE_INVALID:
            break;
        }
    }

    /* the store's own count must agree with the walk */
    if (counts->total != r->sum.total.received) {
        struct fnew n;
        memset(&n, 0, sizeof(n));
        n.kind = REPORT_UNACCOUNTED;
        n.detail = xprintf("The queue counts %lld items but %lld were read.",
                           (long long)counts->total, (long long)r->sum.total.received);
        add_finding(b, &n);
        r->sum.total.unaccounted += counts->total > r->sum.total.received
                                        ? counts->total - r->sum.total.received
                                        : r->sum.total.received - counts->total;
        r->sum.total.received = counts->total;
    }
    r->sum.balanced = balanced(&r->sum.day) && balanced(&r->sum.total);
    return APBOT_OK;
}

static int build_finish(struct build *b, struct store *st, int rc, struct report **ret, char *err,
                        size_t errlen)
{
    if (rc == APBOT_OK && b->too_many_findings)
        rc = apbot_fail(err, errlen, APBOT_E_LIMIT, "report: more than %d findings",
                        REPORT_FINDINGS_MAX);
    if (rc == APBOT_OK)
        rc = build_money(b, err, errlen);
    if (rc == APBOT_OK)
        rc = build_activity(b, st, err, errlen);
    if (rc == APBOT_OK)
        sort_findings(b->r);
    build_done(b);
    if (rc != APBOT_OK) {
        report_free(b->r);
        return rc;
    }
    *ret = b->r;
    return APBOT_OK;
}

int64_t report_settle_wait_ms(int64_t now, int64_t last_done, int64_t settle_ms)
{
    if (settle_ms <= 0 || last_done <= 0 || last_done > INT64_MAX - settle_ms)
        return 0;
    int64_t ready = last_done + settle_ms;
    if (ready <= now)
        return 0;
    return ready - now > settle_ms ? settle_ms : ready - now;
}

/* Waits, when the day's last completion is younger than the settle delay, until it is not. */
static void settle_before_reading(const struct build *b, const struct report_options *opt)
{
    int64_t last = 0;
    for (size_t i = 0; i < b->n_items; i++)
        if (b->items[i].expected && b->items[i].updated_at > last)
            last = b->items[i].updated_at;
    int64_t ms = report_settle_wait_ms(store_now_ms(), last, opt->settle_ms);
    if (ms <= 0)
        return;
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int report_build(struct store *st, struct erp_session *erp, const struct flow *f,
                 const struct report_options *opt, struct report **ret, char *err, size_t errlen)
{
    struct build b;
    struct store_counts counts;
    int rc;

    if (!flow_has_list(f))
        return apbot_fail(err, errlen, APBOT_E_INVAL,
                          "report: the flow has no list operation to read the day's records");
    rc = build_start(&b, st, f, opt, &counts, err, errlen);
    if (rc == APBOT_OK) {
        b.erp = erp;
        settle_before_reading(&b, opt);
        rc = build_listing(&b, err, errlen);
    }
    if (rc == APBOT_OK)
        rc = build_items(&b, &counts, err, errlen);
    return build_finish(&b, st, rc, ret, err, errlen);
}

int report_build_queue(struct store *st, const struct flow *f, const struct report_options *opt,
                       struct report **ret, char *err, size_t errlen)
{
    struct build b;
    struct store_counts counts;
    int rc = build_start(&b, st, f, opt, &counts, err, errlen);

    if (rc == APBOT_OK)
        rc = build_items(&b, &counts, err, errlen);
    return build_finish(&b, st, rc, ret, err, errlen);
}
