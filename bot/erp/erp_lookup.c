/*
 * erp_lookup.c - reading the ERP's result tables: the check-before-post lookup (pages through
 * the table's next link, the results-screen marker, a page that may be cut, each candidate's
 * detail page, exact compares, <finished>) and the listing of a date range. A table is read
 * from an HTML page (rows by XPath) or from a JSON answer (the elements of an array, columns by
 * pointer); on JSON, the array being there is the results screen and its being empty the
 * no-results marker. The facts a lookup gathered go to decide_lookup(), which alone says
 * whether they prove an absence; this file only fetches, parses and counts honestly.
 */
#include "apbot/erp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "apbot/buf.h"
#include "apbot/clock.h"
#include "apbot/flow.h"
#include "apbot/invoice.h"
#include "apbot/mem.h"
#include "apbot/money.h"
#include "base/unittest.h"
#include "erp/decide.h"
#include "web/http.h"
#include "web/jdoc.h"
#include "web/page.h"
#include "erp-int.h"

/* Result rows a lookup keeps over all its pages; more and the lookup failed. */
#define ERP_LOOKUP_ROWS_MAX 20000
/* Days a listing walks one by one (a flow whose list URL takes one ${date}). */
#define ERP_LIST_DAYS_MAX 62

/* ---- rows -------------------------------------------------------------------------------- */

static void row_free(struct erp_row *r)
{
    free(r->doc);
    free(r->reference);
    free(r->vendor);
    free(r->invoice_number);
    free(r->currency);
    free(r->date);
    free(r->booked);
    free(r->status);
    free(r->doc_type);
    free(r->amount_text);
    memset(r, 0, sizeof(*r));
}

void erp_hits_done(struct erp_hits *h)
{
    if (!h)
        return;
    for (size_t i = 0; i < h->n; i++)
        row_free(&h->rows[i]);
    free(h->rows);
    memset(h, 0, sizeof(*h));
}

void erp_lookup_result_done(struct erp_lookup_result *r)
{
    if (!r)
        return;
    erp_hits_done(&r->hits);
}

int erp_parse_amount(const struct flow_table *t, const char *text, const char *currency,
                     int64_t *ret_minor, char *err, size_t errlen)
{
    char buf[64];
    size_t n = 0;
    const char *p = text;
    char dec = t && t->amount_decimal ? t->amount_decimal : '.';
    char group = t ? t->amount_group : '\0';
    bool seen_dec = false;

    if (!text || !currency)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "no amount or currency");
    while (*p == ' ')
        p++;
    if (*p == '-' || *p == '+')
        buf[n++] = *p++;
    for (; *p; p++) {
        if (n + 2 >= sizeof(buf))
            return apbot_fail(err, errlen, APBOT_E_RANGE, "amount too long");
        if (*p >= '0' && *p <= '9') {
            buf[n++] = *p;
        } else if (*p == dec && !seen_dec) {
            seen_dec = true;
            buf[n++] = '.';
        } else if (group && *p == group && !seen_dec && n > 0 && buf[n - 1] >= '0' &&
                   buf[n - 1] <= '9' && p[1] >= '0' && p[1] <= '9') {
            continue; /* a grouping separator between digits of the integer part */
        } else if (*p == ' ' && p[strspn(p, " ")] == '\0') {
            break; /* trailing blanks */
        } else {
            return apbot_fail(err, errlen, APBOT_E_INVAL, "not an amount: '%.40s'", text);
        }
    }
    buf[n] = '\0';
    return money_parse(buf, currency, MONEY_PLAIN, MONEY_ROUND_REFUSE, ret_minor, err, errlen);
}

/* A row's cells by column name; the table each came from formats its amount. */
struct cells {
    size_t n;
    const char **names;                /* borrowed from the flow */
    char **values;                     /* heap, NULL for an empty cell */
    const struct flow_table **formats; /* borrowed */
};

static void cells_init(struct cells *c, size_t cap)
{
    memset(c, 0, sizeof(*c));
    c->names = apbot_xcalloc(cap ? cap : 1, sizeof(*c->names));
    c->values = apbot_xcalloc(cap ? cap : 1, sizeof(*c->values));
    c->formats = apbot_xcalloc(cap ? cap : 1, sizeof(*c->formats));
}

static void cells_done(struct cells *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->values[i]);
    free(c->names);
    free(c->values);
    free(c->formats);
    memset(c, 0, sizeof(*c));
}

static const char *cells_get(const struct cells *c, const char *name)
{
    for (size_t i = 0; name && i < c->n; i++)
        if (strcmp(c->names[i], name) == 0)
            return c->values[i];
    return NULL;
}

/* Sets cell name (overriding an existing one: a detail page's cells override the row's).
 * The caller made room for every column of the table and the detail. */
static void cells_set(struct cells *c, const char *name, const char *value,
                      const struct flow_table *fmt)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->names[i], name) == 0) {
            free(c->values[i]);
            c->values[i] = value && *value ? apbot_xstrdup(value) : NULL;
            c->formats[i] = fmt;
            return;
        }
    c->names[c->n] = name;
    c->values[c->n] = value && *value ? apbot_xstrdup(value) : NULL;
    c->formats[c->n] = fmt;
    c->n++;
}

static char *cell_dup(const struct cells *c, const char *name)
{
    return apbot_xstrdup(cells_get(c, name));
}

/* Fills *row from named cells (strings heap-owned by row). A row without a currency cell is
 * in `declared` when the flow names the ERP's default currency (currency=); its amount is read
 * in its currency, else in currency_hint (the invoice's, for a lookup). */
static void row_fill(const struct cells *c, const char *declared, const char *currency_hint,
                     struct erp_row *row)
{
    memset(row, 0, sizeof(*row));
    row->doc = cell_dup(c, "doc");
    row->reference = cell_dup(c, "reference");
    row->vendor = cell_dup(c, "vendor");
    row->invoice_number = cell_dup(c, "invoice_number");
    row->currency = cell_dup(c, "currency");
    if (!row->currency && declared)
        row->currency = apbot_xstrdup(declared);
    row->date = cell_dup(c, "date");
    row->booked = cell_dup(c, "booked");
    row->status = cell_dup(c, "status");
    row->doc_type = cell_dup(c, "doc_type");
    row->amount_text = cell_dup(c, "amount");
    const char *cur = row->currency ? row->currency : currency_hint;
    const struct flow_table *fmt = NULL;
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->names[i], "amount") == 0)
            fmt = c->formats[i];
    int64_t minor;
    if (row->amount_text && cur && money_exponent(cur) >= 0 &&
        erp_parse_amount(fmt, row->amount_text, cur, &minor, NULL, 0) == APBOT_OK) {
        row->amount = minor;
        row->exponent = money_exponent(cur);
        row->has_amount = true;
    }
}

static void hits_push(struct erp_hits *h, struct erp_row *row)
{
    if (apbot_grow((void **)&h->rows, &h->cap, h->n, sizeof(*h->rows), ERP_LOOKUP_ROWS_MAX) !=
        APBOT_OK) {
        row_free(row);
        return;
    }
    h->rows[h->n++] = *row;
    memset(row, 0, sizeof(*row));
}

/* Column XPaths of a table, for page_rows. Heap array of borrowed strings. */
static const char **table_xpaths(const struct flow_table *t)
{
    const char **x = apbot_xcalloc(t->n_cols ? t->n_cols : 1, sizeof(*x));
    for (size_t i = 0; i < t->n_cols; i++)
        x[i] = t->cols[i].xpath;
    return x;
}

/* The next-page href on p, or NULL. The flow's XPath may name the link or its @href. */
static char *next_href(const struct page *p, const char *xpath)
{
    char expr[1100];
    if (strstr(xpath, "@href"))
        return page_string(p, xpath);
    if ((size_t)snprintf(expr, sizeof(expr), "(%s)[1]/@href", xpath) >= sizeof(expr))
        return NULL;
    return page_string(p, expr);
}

/* ---- rows of an answer ------------------------------------------------------------------- */

int erp_read_rows(const struct erp_read *a, const struct flow_table *t, erp_cells_fn fn, void *ctx,
                  size_t *ret_n, char *err, size_t errlen)
{
    *ret_n = 0;
    if (a->page) {
        const char **xp = table_xpaths(t);
        int rc = page_rows(a->page, t->rows, xp, t->n_cols, fn, ctx, ret_n, err, errlen);
        free(xp);
        return rc;
    }
    const json_t *rows = a->json ? jdoc_at(jdoc_root(a->json), t->pointer) : NULL;
    if (!json_is_array(rows))
        return apbot_fail(err, errlen, APBOT_E_PARSE, "the answer has no rows array at %s",
                          t->pointer ? t->pointer : "?");
    char **cells = apbot_xcalloc(t->n_cols ? t->n_cols : 1, sizeof(*cells));
    size_t i;
    json_t *row;
    int stop = 0;
    json_array_foreach((json_t *)rows, i, row)
    {
        for (size_t k = 0; k < t->n_cols; k++)
            cells[k] = erp_json_cell(jdoc_at(row, t->cols[k].pointer));
        stop = fn(ctx, (const char *const *)cells, t->n_cols);
        for (size_t k = 0; k < t->n_cols; k++) {
            free(cells[k]);
            cells[k] = NULL;
        }
        (*ret_n)++;
        if (stop)
            break;
    }
    free(cells);
    return stop ? stop : APBOT_OK;
}

char *erp_read_cell(const struct erp_read *a, const struct flow_column *col)
{
    if (a->page)
        return col->xpath ? page_string(a->page, col->xpath) : NULL;
    return a->json && col->pointer ? erp_json_cell(jdoc_at(jdoc_root(a->json), col->pointer))
                                   : NULL;
}

/* ---- the lookup -------------------------------------------------------------------------- */

/* The rows of every page read, as the table shows them. */
struct raw_rows {
    size_t n_cols;
    char **cells;  /* n * n_cols, heap strings or NULL */
    size_t n, cap; /* cap in rows of n_cols cells */
    bool overflow;
};

static int collect_row(void *ctx, const char *const *cells, size_t n)
{
    struct raw_rows *rr = ctx;
    if (apbot_grow((void **)&rr->cells, &rr->cap, rr->n, rr->n_cols * sizeof(*rr->cells),
                   ERP_LOOKUP_ROWS_MAX) != APBOT_OK) {
        rr->overflow = true;
        return 1;
    }
    for (size_t i = 0; i < rr->n_cols; i++)
        rr->cells[rr->n * rr->n_cols + i] = i < n && cells[i] ? apbot_xstrdup(cells[i]) : NULL;
    rr->n++;
    return 0;
}

static void raw_rows_done(struct raw_rows *rr)
{
    for (size_t i = 0; i < rr->n * rr->n_cols; i++)
        free(rr->cells[i]);
    free(rr->cells);
    memset(rr, 0, sizeof(*rr));
}

/* The lookup's exchanges: each reported when the next one comes, the last one with the
 * lookup's verdict. */
struct pending {
    struct erp_xch x;
    bool has;
};

static void pending_push(struct erp_session *s, struct pending *pd, struct erp_xch *x)
{
    if (pd->has)
        erp_xch_report(s, &pd->x, NULL, NULL);
    erp_xch_done(&pd->x);
    pd->x = *x;
    memset(x, 0, sizeof(*x));
    pd->has = true;
}

static void pending_flush(struct erp_session *s, struct pending *pd, const char *outcome,
                          const char *why)
{
    if (pd->has) {
        if (outcome)
            erp_xch_outcome(s, &pd->x, outcome, pd->x.rule, why);
        erp_xch_report(s, &pd->x, NULL, NULL);
    }
    erp_xch_done(&pd->x);
    pd->has = false;
}

/* Everything one lookup works with. */
struct lookup_run {
    struct erp_session *s;
    const struct flow *f;
    const struct flow_lookup *lk;
    const char *cut;
    const char *currency;
    struct flow_vars vars;
    char **expect_val; /* per <expect>: the expanded value */
    char *finished_val;
    struct decide_lookup_facts facts;
    struct pending pend;
    struct erp_lookup_result *ret;
    char why[256]; /* the first failure's detail */
};

static void run_fail_detail(struct lookup_run *lr, const char *fmt, const char *what)
{
    if (!lr->why[0])
        snprintf(lr->why, sizeof(lr->why), fmt, what);
}

/* Reads every page through the next link; collects rows and the page facts. Returns
 * APBOT_E_SYSTEMIC when a login was refused, else APBOT_OK (failures are facts). */
static int lookup_pages(struct lookup_run *lr, const char *first_url, struct raw_rows *rr,
                        char *err, size_t errlen)
{
    const struct flow_table *t = &lr->lk->table;
    const struct flow_send *send = lr->lk->send.present ? &lr->lk->send : NULL;
    const int max_pages = lr->lk->max_pages > 0 ? lr->lk->max_pages : 5;
    char *url = first_url ? apbot_xstrdup(first_url) : NULL;
    int rc = APBOT_OK;

    rr->n_cols = t->n_cols;
    for (int page_no = 1; url || (send && page_no == 1); page_no++) {
        struct page *p = NULL;
        struct erp_read a;
        struct erp_xch x;
        struct erp_fetch_info info;
        char ferr[APBOT_ERR_LEN] = "";
        size_t before = rr->n, n_rows = 0;
        char note[160];

        memset(&x, 0, sizeof(x));
        rc = erp_fetch_req(lr->s, "lookup", url, page_no == 1 ? send : NULL, &lr->vars, t->json, &a,
                           &x, &info, ferr, sizeof(ferr));
        p = a.page;
        lr->ret->http_status = info.status;
        lr->ret->retry_after_s = info.retry_after_s;
        if (rc == APBOT_OK && info.date_ms > 0) {
            lr->ret->erp_date_ms = info.date_ms;
            lr->ret->erp_date_mono = apbot_clock_mono_ms();
        }
        if (rc == APBOT_E_SYSTEMIC) {
            apbot_fail(err, errlen, rc, "%s", ferr);
            break;
        }
        if (rc == APBOT_E_DATA) {
            apbot_fail(err, errlen, rc, "%s", ferr);
            break;
        }
        if (rc != APBOT_OK) {
            lr->facts.answered = false;
            lr->facts.match_aborted = lr->facts.match_aborted || info.match_aborted;
            run_fail_detail(lr, "%s", ferr);
            rc = APBOT_OK;
            break;
        }
        free(url);
        url = NULL;
        if (t->json) {
            /* the rows array is the results screen; empty, the no-results marker */
            const json_t *arr = jdoc_at(jdoc_root(a.json), t->pointer);
            if (!json_is_array(arr)) {
                lr->facts.screen_ok = false;
                run_fail_detail(lr, "the lookup's answer has no rows array at %s", t->pointer);
            } else if (json_array_size(arr) == 0) {
                lr->facts.empty_marker = true;
            }
        }
        if (t->screen && !page_has(p, t->screen)) {
            char num[16];
            snprintf(num, sizeof(num), "%d", page_no);
            lr->facts.screen_ok = false;
            run_fail_detail(lr, "lookup page %s lacks the results-screen marker", num);
        }
        if (t->empty && page_has(p, t->empty))
            lr->facts.empty_marker = true;
        if ((lr->facts.screen_ok &&
             erp_read_rows(&a, t, collect_row, rr, &n_rows, NULL, 0) != APBOT_OK) ||
            rr->overflow) {
            lr->facts.answered = false;
            run_fail_detail(lr, "%s",
                            rr->overflow ? "lookup: too many result rows"
                                         : "lookup: the result table cannot be read");
        }
        n_rows = rr->n - before;
        lr->facts.rows += n_rows;
        char *next = t->next && p ? next_href(p, t->next) : NULL;
        const bool has_next = next && *next;
        if (t->max_rows > 0 && (long)n_rows >= t->max_rows && !has_next) {
            lr->facts.cut = true;
            run_fail_detail(lr, "%s",
                            "a result page holds the screen's row maximum: it may be cut");
        }
        snprintf(note, sizeof(note), "page %d: %zu row(s)%s", page_no, n_rows,
                 has_next ? ", a next page" : "");
        erp_xch_outcome(lr->s, &x, "answered", NULL, note);
        pending_push(lr->s, &lr->pend, &x);
        if (has_next && lr->facts.answered) {
            if (page_no >= max_pages) {
                lr->facts.more = true;
                run_fail_detail(lr, "%s", "the results go on past the lookup's max-pages");
            } else {
                url = http_resolve_url(info.final_url ? info.final_url : first_url, next);
                if (!url) {
                    lr->facts.answered = false;
                    run_fail_detail(lr, "%s", "the next-page link cannot be followed");
                }
            }
        }
        free(next);
        free(info.final_url);
        erp_read_done(&a);
        erp_xch_done(&x);
    }
    free(url);
    return rc;
}

/* Opens one candidate's detail page and merges its cells into c. Returns APBOT_E_SYSTEMIC for
 * a refused login, APBOT_OK otherwise (*ret_ok false when the page was not read). */
static int open_detail(struct lookup_run *lr, const char *const *row_cells, struct cells *c,
                       bool *ret_ok, char *err, size_t errlen)
{
    const struct flow_table *t = &lr->lk->table;
    const struct flow_detail *d = &lr->lk->detail;
    struct flow_vars vars = lr->vars;
    const char **names = apbot_xcalloc(t->n_cols ? t->n_cols : 1, sizeof(*names));
    const char **values = apbot_xcalloc(t->n_cols ? t->n_cols : 1, sizeof(*values));
    char *tmpl = NULL, *url = NULL;
    char ferr[APBOT_ERR_LEN] = "";
    int rc = APBOT_OK;

    *ret_ok = false;
    for (size_t i = 0; i < t->n_cols; i++) {
        names[i] = t->cols[i].name;
        values[i] = row_cells[i] ? row_cells[i] : "";
    }
    vars.row_names = names;
    vars.row_values = values;
    vars.n_row = t->n_cols;
    erp_vars_session(lr->s, &vars, false); /* a re-login may have renewed them */
    if (d->get && (flow_expand(lr->f, d->get, &vars, &tmpl, ferr, sizeof(ferr)) != APBOT_OK ||
                   !(url = erp_url(lr->s, tmpl)))) {
        run_fail_detail(lr, "detail URL: %s", ferr[0] ? ferr : "does not resolve");
        goto out;
    }
    struct erp_read a;
    struct erp_xch x;
    struct erp_fetch_info info;
    memset(&x, 0, sizeof(x));
    rc = erp_fetch_req(lr->s, "detail", url, d->send.present ? &d->send : NULL, &vars,
                       d->table.json, &a, &x, &info, ferr, sizeof(ferr));
    if (rc == APBOT_E_SYSTEMIC) {
        apbot_fail(err, errlen, rc, "%s", ferr);
        goto out;
    }
    if (rc != APBOT_OK) {
        lr->facts.match_aborted = lr->facts.match_aborted || info.match_aborted;
        run_fail_detail(lr, "%s", ferr);
        rc = APBOT_OK;
        goto out;
    }
    for (size_t i = 0; i < d->table.n_cols; i++) {
        char *v = erp_read_cell(&a, &d->table.cols[i]);
        cells_set(c, d->table.cols[i].name, v, &d->table);
        free(v);
    }
    erp_xch_outcome(lr->s, &x, "answered", NULL, "a candidate's detail page");
    pending_push(lr->s, &lr->pend, &x);
    free(info.final_url);
    erp_read_done(&a);
    erp_xch_done(&x);
    *ret_ok = true;
out:
    free(tmpl);
    free(url);
    free(names);
    free(values);
    return rc;
}

/* True when the merged row carries the key (and every <expect>) exactly. */
static bool is_hit(const struct lookup_run *lr, const struct cells *c)
{
    const struct flow_lookup *lk = lr->lk;
    if (lk->key_column) {
        const char *v = cells_get(c, lk->key_column);
        if (!v || strcmp(v, lr->cut) != 0)
            return false;
    }
    for (size_t i = 0; i < lk->n_expect; i++) {
        const char *v = cells_get(c, lk->expect[i].name);
        if (!v || strcmp(v, lr->expect_val[i]) != 0)
            return false;
    }
    return true;
}

/* Index of the table column called name, or -1. */
static int column_index(const struct flow_table *t, const char *name)
{
    for (size_t i = 0; name && i < t->n_cols; i++)
        if (t->cols[i].name && strcmp(t->cols[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* Judges every collected row: candidates' detail pages opened, exact compares, <finished>. */
static int lookup_rows(struct lookup_run *lr, const struct raw_rows *rr, char *err, size_t errlen)
{
    const struct flow_lookup *lk = lr->lk;
    const struct flow_table *t = &lk->table;
    const bool detail = lk->detail.present;
    const int key_idx = lk->key_column ? column_index(t, lk->key_column) : -1;
    const size_t max_cand = (size_t)(lk->max_candidates > 0 ? lk->max_candidates : 10);
    struct erp_hits finished = {0}, unfinished = {0};
    int rc = APBOT_OK;

    lr->facts.max_candidates = detail ? max_cand : 0;
    lr->facts.details_ok = true;
    for (size_t r = 0; r < rr->n && rc == APBOT_OK; r++) {
        const char *const *row = (const char *const *)&rr->cells[r * rr->n_cols];
        struct cells c;
        cells_init(&c, t->n_cols + (detail ? lk->detail.table.n_cols : 0));
        for (size_t i = 0; i < t->n_cols; i++)
            cells_set(&c, t->cols[i].name, row[i], t);
        if (detail) {
            /* A candidate: its key cell equals the key when the table shows one; any row
             * when it does not (the key is only on the detail page). */
            bool candidate = key_idx < 0 || (row[key_idx] && strcmp(row[key_idx], lr->cut) == 0);
            if (!candidate) {
                cells_done(&c);
                continue;
            }
            lr->facts.candidates++;
            if (lr->facts.candidates > max_cand) {
                run_fail_detail(lr, "%s", "more candidates than the lookup may open");
                cells_done(&c);
                continue;
            }
            bool ok = false;
            rc = open_detail(lr, row, &c, &ok, err, errlen);
            if (!ok) {
                lr->facts.details_ok = false;
                cells_done(&c);
                continue;
            }
        }
        if (is_hit(lr, &c)) {
            struct erp_row hit;
            row_fill(&c, lk->currency, lr->currency, &hit);
            if (lk->has_finished) {
                const char *v = cells_get(&c, lk->finished.name);
                hit.unfinished = !v || strcmp(v, lr->finished_val) != 0;
            }
            lr->facts.hits++;
            if (hit.unfinished) {
                lr->facts.unfinished++;
                hits_push(&unfinished, &hit);
            } else {
                hits_push(&finished, &hit);
            }
        }
        cells_done(&c);
    }
    /* Finished hits first: ERP_FOUND reads rows[0]. */
    for (size_t i = 0; i < finished.n; i++)
        hits_push(&lr->ret->hits, &finished.rows[i]);
    for (size_t i = 0; i < unfinished.n; i++)
        hits_push(&lr->ret->hits, &unfinished.rows[i]);
    erp_hits_done(&finished);
    erp_hits_done(&unfinished);
    return rc;
}

int erp_lookup(struct erp_session *s, const char *key, const struct invoice *inv,
               const char *currency, struct erp_lookup_result *ret, char *err, size_t errlen)
{
    const struct flow *f = s ? s->flow : NULL;
    const struct flow_lookup *lk = f ? &f->lookup : NULL;
    struct lookup_run lr;
    struct raw_rows rr;
    char *tmpl_url = NULL, *url = NULL, *cut = NULL;
    int rc;

    if (!ret)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "erp_lookup: no result");
    memset(ret, 0, sizeof(*ret));
    ret->retry_after_s = -1;
    if (!lk || (!lk->get && !lk->send.present) || (!lk->table.rows && !lk->table.json))
        return apbot_fail(err, errlen, APBOT_E_INVAL, "the flow has no lookup");
    if (!key || !*key)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "lookup without a key");
    if (lk->n_expect > 0 && !inv)
        return apbot_fail(err, errlen, APBOT_E_INVAL,
                          "the flow's lookup compares invoice fields: an invoice is needed");
    if (!lk->key_column && lk->n_expect == 0)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "the flow's lookup compares no column");

    memset(&lr, 0, sizeof(lr));
    memset(&rr, 0, sizeof(rr));
    lr.s = s;
    lr.f = f;
    lr.lk = lk;
    lr.currency = currency;
    lr.ret = ret;
    lr.vars.key = key;
    lr.vars.inv = inv;
    lr.facts.answered = true;
    lr.facts.screen_ok = true;
    lr.expect_val = apbot_xcalloc(lk->n_expect ? lk->n_expect : 1, sizeof(char *));
    for (size_t i = 0; i < lk->n_expect; i++) {
        rc = flow_expand(f, lk->expect[i].value, &lr.vars, &lr.expect_val[i], err, errlen);
        if (rc != APBOT_OK)
            goto out;
    }
    if (lk->has_finished) {
        rc = flow_expand(f, lk->finished.value, &lr.vars, &lr.finished_val, err, errlen);
        if (rc != APBOT_OK)
            goto out;
    }
    if (lk->get) {
        /* a URL with ${session.*} needs the session's values: log in first */
        if (!s->logged_in && strstr(lk->get, "${session.")) {
            rc = erp_login(s, err, errlen);
            if (rc != APBOT_OK) {
                if (rc == APBOT_E_SYSTEMIC)
                    goto out;
                ret->answer = ERP_FAILED;
                snprintf(ret->detail, sizeof(ret->detail), "the login failed");
                rc = APBOT_OK;
                goto out;
            }
        }
        erp_vars_session(s, &lr.vars, false);
        rc = flow_expand(f, lk->get, &lr.vars, &tmpl_url, err, errlen);
        if (rc != APBOT_OK)
            goto out;
        url = erp_url(s, tmpl_url);
    }
    cut = flow_key_cut(f, key);
    if ((lk->get && !url) || !cut) {
        rc = apbot_fail(err, errlen, APBOT_E_INVAL, "lookup URL does not resolve");
        goto out;
    }
    lr.cut = cut;

    rc = lookup_pages(&lr, url, &rr, err, errlen);
    if (rc == APBOT_OK)
        rc = lookup_rows(&lr, &rr, err, errlen);
    if (rc != APBOT_OK) {
        pending_flush(s, &lr.pend, "failed", err);
        goto out;
    }
    struct decide_lookup d = decide_lookup(&lr.facts);
    switch (d.verdict) {
    case DECIDE_FOUND:
        ret->answer = ERP_FOUND;
        break;
    case DECIDE_FOUND_UNFINISHED:
        ret->answer = ERP_FOUND_UNFINISHED;
        break;
    case DECIDE_NOT_FOUND:
        ret->answer = ERP_NOT_FOUND;
        break;
    case DECIDE_LOOKUP_FAILED:
    case DECIDE_LOOKUP__COUNT:
        ret->answer = ERP_FAILED;
        break;
    }
    if (ret->answer == ERP_FAILED || ret->answer == ERP_NOT_FOUND)
        erp_hits_done(&ret->hits);
    if (ret->answer == ERP_FAILED) {
        if (lr.why[0])
            snprintf(ret->detail, sizeof(ret->detail), "%.120s (%.130s)", d.why, lr.why);
        else
            snprintf(ret->detail, sizeof(ret->detail), "%s", d.why);
        erp_mask_into(s, ret->detail, sizeof(ret->detail));
    }
    pending_flush(s, &lr.pend, decide_lookup_verdict_name(d.verdict),
                  ret->answer == ERP_FAILED ? ret->detail : d.why);
    rc = APBOT_OK;
out:
    pending_flush(s, &lr.pend, NULL, NULL);
    if (rc != APBOT_OK)
        erp_lookup_result_done(ret);
    raw_rows_done(&rr);
    for (size_t i = 0; i < lk->n_expect; i++)
        free(lr.expect_val[i]);
    free(lr.expect_val);
    free(lr.finished_val);
    free(tmpl_url);
    free(url);
    free(cut);
    return rc;
}

/* ---- listings ---------------------------------------------------------------------------- */

struct list_walk {
    struct erp_session *s;
    const struct flow_table *t;
    erp_row_fn fn;
    void *ctx;
    int stop; /* the callback's non-zero return */
};

static int list_row(void *ctx, const char *const *cells, size_t n)
{
    struct list_walk *w = ctx;
    struct cells c;
    struct erp_row row;
    int rc;

    cells_init(&c, w->t->n_cols);
    for (size_t i = 0; i < w->t->n_cols; i++)
        cells_set(&c, w->t->cols[i].name, i < n ? cells[i] : NULL, w->t);
    row_fill(&c, w->s->flow->list.currency, NULL, &row);
    cells_done(&c);
    rc = w->fn(w->ctx, &row);
    row_free(&row);
    if (rc != 0)
        w->stop = rc;
    return rc;
}

/* One walk of the list through its pages with vars (date or from/to set). */
static int list_walk(struct erp_session *s, struct flow_vars vars, const char *label, erp_row_fn fn,
                     void *ctx, int *pages, char *err, size_t errlen)
{
    const struct flow *f = s->flow;
    const struct flow_list *ls = &f->list;
    const bool by_template = ls->paged;
    const int max_pages = ls->max_pages > 0 ? ls->max_pages : 100;
    struct list_walk w = {.s = s, .t = &ls->table, .fn = fn, .ctx = ctx};
    char *url = NULL;
    int rc = APBOT_OK;

    vars.page_size = ls->page_size;
    for (int page_no = 1;; page_no++) {
        struct page *p = NULL;
        struct erp_read a;
        struct erp_xch x;
        struct erp_fetch_info info;
        char *next = NULL;
        size_t n_rows = 0;
        bool more;
        char note[160];

        vars.page = page_no;
        erp_vars_session(s, &vars, false); /* a re-login may have renewed them */
        if (!url && !ls->send.present) {
            char *tmpl_url = NULL;
            vars.page = page_no;
            rc = flow_expand(f, ls->get, &vars, &tmpl_url, err, errlen);
            if (rc != APBOT_OK)
                break;
            url = erp_url(s, tmpl_url);
            free(tmpl_url);
            if (!url) {
                rc = apbot_fail(err, errlen, APBOT_E_INVAL, "list URL does not resolve");
                break;
            }
        }
        memset(&x, 0, sizeof(x));
        rc = erp_fetch_req(s, "list", url, ls->send.present ? &ls->send : NULL, &vars, w.t->json,
                           &a, &x, &info, err, errlen);
        if (rc != APBOT_OK)
            break;
        p = a.page;
        (*pages)++;
        rc = erp_read_rows(&a, w.t, list_row, &w, &n_rows, err, errlen);
        if (rc != APBOT_OK || w.stop) {
            erp_xch_outcome(s, &x, w.stop ? "answered" : "failed", NULL,
                            w.stop ? "the caller stopped the walk" : "the table cannot be read");
            erp_xch_report(s, &x, NULL, NULL);
            rc = w.stop ? w.stop : APBOT_E_NET;
            goto next_page;
        }
        if (p && n_rows == 0 && w.t->empty && !page_has(p, w.t->empty)) {
            erp_xch_outcome(s, &x, "failed", NULL, "neither rows nor the no-results marker");
            erp_xch_report(s, &x, NULL, NULL);
            rc = apbot_fail(err, errlen, APBOT_E_NET,
                            "list page %d for %s: unrecognised page (neither rows nor the "
                            "no-results marker)",
                            page_no, label);
            goto next_page;
        }
        if (w.t->next && p) {
            next = next_href(p, w.t->next);
            more = next != NULL && *next;
        } else if (ls->page_size > 0) {
            more = by_template && (long)n_rows >= ls->page_size; /* a short page is the last */
        } else {
            more = by_template && n_rows > 0;
        }
        snprintf(note, sizeof(note), "page %d of %s: %zu row(s)%s", page_no, label, n_rows,
                 more ? ", more pages" : "");
        erp_xch_outcome(s, &x, "answered", NULL, note);
        erp_xch_report(s, &x, NULL, NULL);
        free(url);
        url = NULL;
        if (more && !by_template) {
            url = http_resolve_url(info.final_url ? info.final_url : erp_base_url(s), next);
            if (!url) {
                rc = apbot_fail(err, errlen, APBOT_E_NET, "list: next-page link unusable");
                goto next_page;
            }
        }
        if (more && *pages >= max_pages) {
            rc = apbot_fail(err, errlen, APBOT_E_LIMIT,
                            "list: the ERP shows more than %d pages for %s; the listing would "
                            "be incomplete (raise max-pages in the flow)",
                            max_pages, label);
            goto next_page;
        }
        rc = more ? APBOT_OK : -1; /* -1: the walk is complete */
    next_page:
        free(next);
        free(info.final_url);
        erp_read_done(&a);
        erp_xch_done(&x);
        if (rc == -1) {
            rc = APBOT_OK;
            break;
        }
        if (rc != APBOT_OK)
            break;
    }
    free(url);
    return rc;
}

/* Days since 1970-01-01 of a valid YYYY-MM-DD (proleptic Gregorian). */
static long days_of(const char *d)
{
    long y = strtol(d, NULL, 10), m = strtol(d + 5, NULL, 10), day = strtol(d + 8, NULL, 10);
    y -= m <= 2;
    long era = (y >= 0 ? y : y - 399) / 400;
    long yoe = y - era * 400;
    long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + day - 1;
    long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void date_of(long z, char out[11])
{
    z += 719468;
    long era = (z >= 0 ? z : z - 146096) / 146097;
    long doe = z - era * 146097;
    long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    long y = yoe + era * 400;
    long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    long mp = (5 * doy + 2) / 153;
    long d = doy - (153 * mp + 2) / 5 + 1;
    long m = mp + (mp < 10 ? 3 : -9);
    y += m <= 2;
    char buf[80];
    snprintf(buf, sizeof(buf), "%04ld-%02ld-%02ld", y, m, d);
    memcpy(out, buf, 10);
    out[10] = '\0';
}

int erp_list_range(struct erp_session *s, const char *from, const char *to, erp_row_fn fn,
                   void *ctx, int *ret_pages, char *err, size_t errlen)
{
    const struct flow_list *ls = s ? &s->flow->list : NULL;
    int pages = 0;
    int rc;

    if (ret_pages)
        *ret_pages = 0;
    if (!ls || (!ls->get && !ls->send.present) || (!ls->table.rows && !ls->table.json) || !fn)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "the flow has no list operation");
    if (!from || !to || !invoice_date_valid(from) || !invoice_date_valid(to))
        return apbot_fail(err, errlen, APBOT_E_INVAL, "list: bad date");
    long d0 = days_of(from), d1 = days_of(to);
    if (d1 < d0)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "list: the range ends before it starts");

    struct flow_vars vars;
    memset(&vars, 0, sizeof(vars));
    erp_vars_session(s, &vars, false);
    if (ls->range) {
        char label[40];
        snprintf(label, sizeof(label), "%s..%s", from, to);
        vars.from = from;
        vars.to = to;
        vars.date = from;
        rc = list_walk(s, vars, label, fn, ctx, &pages, err, errlen);
    } else {
        if (d1 - d0 + 1 > ERP_LIST_DAYS_MAX) {
            rc = apbot_fail(err, errlen, APBOT_E_LIMIT,
                            "list: %ld days asked, a listing by day reads at most %d", d1 - d0 + 1,
                            ERP_LIST_DAYS_MAX);
        } else {
            rc = APBOT_OK;
            for (long d = d0; d <= d1 && rc == APBOT_OK; d++) {
                char day[11];
                date_of(d, day);
                vars.date = vars.from = vars.to = day;
                rc = list_walk(s, vars, day, fn, ctx, &pages, err, errlen);
            }
        }
    }
    if (ret_pages)
        *ret_pages = pages;
    return rc;
}

UNITTEST int erp_list_day(struct erp_session *s, const char *date, erp_row_fn fn, void *ctx,
                          int *ret_pages, char *err, size_t errlen)
{
    return erp_list_range(s, date, date, fn, ctx, ret_pages, err, errlen);
}
