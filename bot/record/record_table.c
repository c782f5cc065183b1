/*
 * record_table.c - the lookup and the listing, as the recording shows them: a search by the
 * reference the person typed (found nothing before the booking, the booked invoice after it),
 * and the day's listing that shows the booked document.
 *
 * The result table is where the answer shows the document: on a page, the row (tr) of the cell
 * that holds the document number, its table found by its id (or a class only it has), every
 * cell of the row named by what it holds (the document, the reference, the vendor, the amount
 * in the ERP's writing, ...); in JSON, the array whose element holds them, each member by its
 * pointer. A search that found nothing gives the page's "no results" marker (what only that
 * page has); a hit without the reference in its row gives the detail page the person opened
 * from it. Every XPath is tried on the recorded page with the web module's own reader before it
 * goes into the draft (page_rows): what the draft says it reads, it reads there.
 */
#define _GNU_SOURCE /* strcasestr */
#include "record/record-int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <jansson.h>
#include <libxml/HTMLparser.h>
#include <libxml/tree.h>

#include "apbot/invoice.h"
#include "apbot/mem.h"
#include "web/http.h"
#include "web/jdoc.h"
#include "web/page.h"

/* ---- the HTML tree of an answer ---------------------------------------------------------------
 */

static xmlDocPtr rec_doc_of(struct rec_ex *x)
{
    if (!x->html)
        return NULL;
    if (!x->doc && x->ans->body_len > 0 && x->ans->body_len < (size_t)2147483647)
        x->doc = htmlReadMemory(x->ans->body, (int)x->ans->body_len, x->ans->url, NULL,
                                HTML_PARSE_RECOVER | HTML_PARSE_NOERROR | HTML_PARSE_NOWARNING |
                                    HTML_PARSE_NONET);
    return x->doc;
}

/* The text of n, white space collapsed and trimmed, into buf. */
static void rec_node_text(xmlNodePtr n, char *buf, size_t len)
{
    xmlChar *c = xmlNodeGetContent(n);
    size_t k = 0;
    bool sp = false;
    for (const xmlChar *p = c; p && *p && k + 2 < len; p++) {
        bool ws =
            *p == ' ' || *p == '\n' || *p == '\r' || *p == '\t' || (*p == 0xC2 && p[1] == 0xA0);
        if (ws) {
            sp = k > 0;
            if (*p == 0xC2)
                p++;
            continue;
        }
        if (sp)
            buf[k++] = ' ';
        sp = false;
        buf[k++] = (char)*p;
    }
    buf[k] = '\0';
    xmlFree(c);
}

static const char *rec_attr(xmlNodePtr n, const char *name, char *buf, size_t len)
{
    xmlChar *v = xmlGetProp(n, BAD_CAST name);
    if (!v)
        return NULL;
    snprintf(buf, len, "%s", (const char *)v);
    xmlFree(v);
    return buf;
}

static bool rec_is(xmlNodePtr n, const char *name)
{
    return n && n->type == XML_ELEMENT_NODE && n->name &&
           strcasecmp((const char *)n->name, name) == 0;
}

/* A walk over a page's elements, depth first, bounded: at most REC_WALK_MAX pending, the
 * rest of a wider page left out (a recorder's guess, never a safety decision). */
#define REC_WALK_MAX 512
struct rec_walk {
    xmlNodePtr stack[REC_WALK_MAX];
    size_t sp;
};

static void rec_walk_start(struct rec_walk *w, xmlDocPtr d)
{
    w->sp = 0;
    xmlNodePtr root = d ? xmlDocGetRootElement(d) : NULL;
    if (root)
        w->stack[w->sp++] = root;
}

/* The next element, or NULL when the walk is over. */
static xmlNodePtr rec_walk_next(struct rec_walk *w)
{
    if (w->sp == 0)
        return NULL;
    xmlNodePtr n = w->stack[--w->sp];
    for (xmlNodePtr c = n->children; c && w->sp < REC_WALK_MAX; c = c->next)
        if (c->type == XML_ELEMENT_NODE)
            w->stack[w->sp++] = c;
    return n;
}

/* An XPath string literal of s, or false (both quotes in s, or too long). */
static bool rec_xlit(const char *s, char *buf, size_t len)
{
    char q = strchr(s, '\'') ? '"' : '\'';
    if (strchr(s, q))
        return false;
    return (size_t)snprintf(buf, len, "%c%s%c", q, s, q) < len;
}

/* ---- naming a recorded value ------------------------------------------------------------------
 */

/* What a column holds, by its recorded text (and its member or class name for a status). */
struct rec_col {
    char name[24];     /* doc, reference, vendor, ... */
    char where[320];   /* XPath relative to the row, or a pointer relative to the element */
    char value[256];   /* as recorded */
    char date_fmt[16]; /* a date column: its pattern */
    char dec, group;   /* an amount column: its writing */
};

struct rec_cols {
    struct rec_col c[16];
    size_t n;
    char date_fmt[16];
    char dec, group;
};

static bool rec_cols_has(const struct rec_cols *cs, const char *name)
{
    for (size_t i = 0; i < cs->n; i++)
        if (strcmp(cs->c[i].name, name) == 0)
            return true;
    return false;
}

static void rec_cols_add(struct rec_cols *cs, const char *name, const char *where,
                         const char *value)
{
    if (rec_cols_has(cs, name) || cs->n >= sizeof(cs->c) / sizeof(*cs->c))
        return;
    struct rec_col *c = &cs->c[cs->n++];
    memset(c, 0, sizeof(*c));
    snprintf(c->name, sizeof(c->name), "%s", name);
    snprintf(c->where, sizeof(c->where), "%s", where);
    snprintf(c->value, sizeof(c->value), "%s", value ? value : "");
}

/* Names a recorded cell: "doc", "reference", ... or NULL. Learns the table's formats. */
static const char *rec_col_name(struct rec *r, struct rec_cols *cs, const char *text,
                                const char *hint)
{
    struct rec_match m[REC_MATCH_MAX];
    size_t n;

    if (!text || !*text)
        return NULL;
    if (r->doc && strcmp(text, r->doc) == 0)
        return "doc";
    if (r->key_ref && strcmp(text, r->key_ref) == 0)
        return "reference";
    n = rec_values_find(&r->vals, text, 0, false, m, REC_MATCH_MAX);
    for (size_t i = 0; i < n; i++) {
        const struct rec_form *f = m[i].form;
        if (strcmp(f->var, "invoice.payable") == 0) {
            if (!cs->dec && strncmp(f->fmt, "amount:", 7) == 0 && rec_match_vars(m, n) == 1) {
                cs->dec = f->fmt[7];
                cs->group = f->fmt[8];
            }
            return "amount";
        }
        if (strcmp(f->var, "invoice.issue_date") == 0 || strcmp(f->var, "invoice.due_date") == 0) {
            if (!cs->date_fmt[0])
                snprintf(cs->date_fmt, sizeof(cs->date_fmt), "%s", f->fmt + 5);
            return strcmp(f->var, "invoice.issue_date") == 0 ? "date" : "due_date";
        }
        if (strcmp(f->var, "vendor.id") == 0)
            return "vendor";
        if (strcmp(f->var, "vendor.name") == 0)
            return "vendor_name";
        if (strcmp(f->var, "invoice.number") == 0)
            return "invoice_number";
        if (strcmp(f->var, "invoice.currency") == 0)
            return "currency";
    }
    /* the day of the booking */
    for (int d = 0; d < 2; d++) {
        char tmpl[32], out[32];
        static const char *const pats[] = {"%Y-%m-%d", "%d.%m.%Y", "%m/%d/%Y", "%d/%m/%Y"};
        for (size_t p = 0; p < sizeof(pats) / sizeof(*pats); p++) {
            struct tm tm;
            memset(&tm, 0, sizeof(tm));
            if (sscanf(r->today[d], "%d-%d-%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday) != 3)
                continue;
            tm.tm_year -= 1900;
            tm.tm_mon -= 1;
            snprintf(tmpl, sizeof(tmpl), "%s", pats[p]);
            size_t ol = strftime(out, sizeof(out), tmpl, &tm);
            /* the day, maybe with the time after it ("05.12.2026 14:03:07") */
            if (ol && strncmp(out, text, ol) == 0 &&
                (text[ol] == '\0' || text[ol] == ' ' || text[ol] == 'T')) {
                if (!cs->date_fmt[0])
                    snprintf(cs->date_fmt, sizeof(cs->date_fmt), "%s", pats[p]);
                return "booked";
            }
        }
    }
    if (r->doctype_value && strcmp(text, r->doctype_value) == 0)
        return "doc_type";
    if (hint && (strcasestr(hint, "status") || strcasestr(hint, "state")))
        return "status";
    return NULL;
}

/* ---- an HTML result table ------------------------------------------------------------------- */

/* The td (or th) under `under` whose text is want, first in document order. */
static xmlNodePtr rec_find_cell(xmlNodePtr n, const char *want, int depth)
{
    for (; n && depth < 256; n = n->next) {
        if (n->type != XML_ELEMENT_NODE)
            continue;
        if (rec_is(n, "td")) {
            char t[512];
            rec_node_text(n, t, sizeof(t));
            if (strcmp(t, want) == 0)
                return n;
        }
        xmlNodePtr hit = rec_find_cell(n->children, want, depth + 1);
        if (hit)
            return hit;
    }
    return NULL;
}

/* An XPath that finds exactly element n (a table, a form) by its id or a class only it has. */
static bool rec_unique_xpath(struct page *pg, xmlNodePtr n, char *buf, size_t len)
{
    const char *attrs[] = {"id", "class", "name"};
    for (size_t a = 0; a < 3; a++) {
        char v[256], lit[300], q[1200];
        if (!rec_attr(n, attrs[a], v, sizeof(v)) || !v[0] || !rec_xlit(v, lit, sizeof(lit)))
            continue;
        snprintf(buf, len, "//%s[@%s=%s]", (const char *)n->name, attrs[a], lit);
        snprintf(q, sizeof(q), "count(%.1100s)", buf);
        char *cnt = page_string(pg, q);
        bool one = cnt && strcmp(cnt, "1") == 0;
        free(cnt);
        if (one)
            return true;
    }
    return false;
}

struct rec_table {
    bool ok;
    bool json;
    char rows[640];    /* HTML: rows XPath */
    char pointer[256]; /* JSON: the array */
    struct rec_cols cols;
    size_t n_rows; /* rows the recorded answer has */
};

static int rec_count_row(void *ctx, const char *const *cells, size_t n)
{
    (void)cells;
    (void)n;
    (*(size_t *)ctx)++;
    return 0;
}

/* The table of an HTML answer: the row of the cell that holds `want`. */
static void rec_html_table(struct rec *r, struct rec_ex *x, const char *want, struct rec_table *t)
{
    memset(t, 0, sizeof(*t));
    xmlDocPtr d = rec_doc_of(x);
    struct page *pg = rec_ex_page(x);
    if (!d || !pg || !want)
        return;
    xmlNodePtr cell = rec_find_cell(xmlDocGetRootElement(d), want, 0);
    if (!cell)
        return;
    xmlNodePtr tr = cell->parent;
    while (tr && !rec_is(tr, "tr"))
        tr = tr->parent;
    xmlNodePtr table = tr ? tr->parent : NULL;
    const char *mid = "";
    if (table && (rec_is(table, "tbody") || rec_is(table, "thead") || rec_is(table, "tfoot"))) {
        mid = rec_is(table, "tbody") ? "/tbody" : "";
        table = table->parent;
    }
    if (!tr || !rec_is(table, "table") || (mid[0] == '\0' && !rec_is(tr->parent, "table")))
        return;
    char txp[512];
    if (!rec_unique_xpath(pg, table, txp, sizeof(txp)))
        return;
    snprintf(t->rows, sizeof(t->rows), "%s%s/tr[td]", txp, mid);

    /* the row's cells: by a class only that cell has, else by place */
    size_t idx = 0;
    for (xmlNodePtr c = tr->children; c; c = c->next) {
        if (!rec_is(c, "td"))
            continue;
        idx++;
        char text[512], cls[128], where[320], lit[160];
        rec_node_text(c, text, sizeof(text));
        where[0] = '\0';
        if (rec_attr(c, "class", cls, sizeof(cls)) && cls[0] && rec_xlit(cls, lit, sizeof(lit))) {
            size_t same = 0;
            for (xmlNodePtr o = tr->children; o; o = o->next) {
                char oc[128];
                same +=
                    rec_is(o, "td") && rec_attr(o, "class", oc, sizeof(oc)) && strcmp(oc, cls) == 0;
            }
            if (same == 1)
                snprintf(where, sizeof(where), "td[@class=%s]", lit);
        }
        if (!where[0])
            snprintf(where, sizeof(where), "td[%zu]", idx);
        const char *name = rec_col_name(r, &t->cols, text, cls);
        if (name)
            rec_cols_add(&t->cols, name, where, text);
    }
    /* held to the web module's reading of the recorded page */
    const char *xps[16];
    for (size_t i = 0; i < t->cols.n; i++)
        xps[i] = t->cols.c[i].where;
    size_t rows = 0;
    char err[256];
    if (page_rows(pg, t->rows, xps, t->cols.n, rec_count_row, &rows, NULL, err, sizeof(err)) !=
            APBOT_OK ||
        rows == 0)
        return;
    t->n_rows = rows;
    t->ok = rec_cols_has(&t->cols, "doc") || rec_cols_has(&t->cols, "reference");
}

/* ---- a JSON result table ----------------------------------------------------------------------
 */

static bool rec_json_holds(const json_t *o, const char *want)
{
    const char *k;
    json_t *m;
    json_object_foreach((json_t *)o, k, m)
    {
        const char *t = jdoc_number_text(m);
        t = t ? t : (json_is_string(m) ? json_string_value(m) : NULL);
        if (t && strcmp(t, want) == 0)
            return true;
    }
    return false;
}

/* The array (depth-bounded) one of whose objects holds want. */
static bool rec_json_array(const json_t *v, const char *want, char *ptr, size_t len, int depth,
                           const json_t **ret_obj)
{
    const char *k;
    json_t *m;
    size_t i, at = strlen(ptr);
    if (depth > 6)
        return false;
    if (json_is_array(v)) {
        json_array_foreach((json_t *)v, i, m) if (json_is_object(m) && rec_json_holds(m, want))
        {
            *ret_obj = m;
            return true;
        }
        return false;
    }
    if (!json_is_object(v))
        return false;
    json_object_foreach((json_t *)v, k, m)
    {
        if (strchr(k, '/') || strchr(k, '~'))
            continue;
        snprintf(ptr + at, len - at, "/%s", k);
        if (rec_json_array(m, want, ptr, len, depth + 1, ret_obj))
            return true;
        ptr[at] = '\0';
    }
    return false;
}

static void rec_json_table(struct rec *r, struct rec_ex *x, const char *want, struct rec_table *t)
{
    const json_t *obj = NULL;
    memset(t, 0, sizeof(*t));
    t->json = true;
    if (!x->jans || !want ||
        !rec_json_array(jdoc_root(x->jans), want, t->pointer, sizeof(t->pointer), 0, &obj))
        return;
    const char *k;
    json_t *m;
    json_object_foreach((json_t *)obj, k, m)
    {
        char where[320], text[256] = "", iso[16];
        if (strchr(k, '/') || strchr(k, '~'))
            continue;
        snprintf(where, sizeof(where), "/%s", k);
        const char *num = jdoc_number_text(m);
        if (num)
            snprintf(text, sizeof(text), "%s", num);
        else if (json_is_string(m))
            snprintf(text, sizeof(text), "%s", json_string_value(m));
        const char *name = NULL;
        /* a tagged date or decimal: the ERP's typed values (<json-values>) */
        const char *cls =
            json_is_object(m) ? json_string_value(json_object_get(m, "__class__")) : NULL;
        if (cls && strcasecmp(cls, "date") == 0) {
            const char *y = jdoc_number_text(json_object_get(m, "year"));
            const char *mo = jdoc_number_text(json_object_get(m, "month"));
            const char *d = jdoc_number_text(json_object_get(m, "day"));
            if (y && mo && d) {
                snprintf(iso, sizeof(iso), "%04ld-%02ld-%02ld", strtol(y, NULL, 10),
                         strtol(mo, NULL, 10), strtol(d, NULL, 10));
                snprintf(text, sizeof(text), "%s", iso);
            }
        } else if (cls && strcasecmp(cls, "Decimal") == 0 &&
                   json_is_string(json_object_get(m, "decimal"))) {
            snprintf(text, sizeof(text), "%s", json_string_value(json_object_get(m, "decimal")));
        }
        if (text[0]) {
            struct rec_match mm[REC_MATCH_MAX];
            if (rec_values_find_amount(&r->vals, text, 0, mm, REC_MATCH_MAX) &&
                strcmp(mm[0].form->var, "invoice.payable") == 0 && (cls || strchr(text, '.')))
                name = "amount";
            else
                name = rec_col_name(r, &t->cols, text, k);
        }
        if (!name && (strcasestr(k, "status") || strcasestr(k, "state")))
            name = "status";
        if (name)
            rec_cols_add(&t->cols, name, where, text);
    }
    t->ok = rec_cols_has(&t->cols, "doc") || rec_cols_has(&t->cols, "reference");
    const json_t *arr = jdoc_at(jdoc_root(x->jans), t->pointer);
    t->n_rows = arr && json_is_array(arr) ? json_array_size(arr) : 0;
}

/* ---- paging by the URL ----------------------------------------------------------------------- */

/* The value of query parameter name in the URL template *get replaced by tmpl (the first
 * occurrence after '?' or '&'). True when it was there. */
static bool rec_query_set(char **get, const char *name, const char *tmpl)
{
    size_t nl = strlen(name);
    for (char *p = strchr(*get, '?'); p; p = strchr(p + 1, '&')) {
        if (strncmp(p + 1, name, nl) != 0 || p[1 + nl] != '=')
            continue;
        char *v = p + 2 + nl, *e = v + strcspn(v, "&#");
        size_t n = strlen(*get) - (size_t)(e - v) + strlen(tmpl) + 1;
        char *out = apbot_xmalloc(n);
        snprintf(out, n, "%.*s%s%s", (int)(v - *get), *get, tmpl, e);
        free(*get);
        *get = out;
        return true;
    }
    return false;
}

/* A listing's paging as its URL shows it, on the first page recorded: an offset that is 0 with
 * a page size (offset=0&limit=50, start=0&rows=50, $skip=0&$top=50: ${offset}, ${limit},
 * page-size), or a page number that is 1 (page=1, with its size where one is sent). Rewrites
 * *get; returns what was found (for the report) or NULL. */
static const char *rec_list_paging(const struct rec_ex *x, char **get, long *page_size)
{
    static const char *const offset[] = {"offset", "start", "skip", "$skip", "first", "from_row"};
    static const char *const limit[] = {"limit",    "size",    "pagesize", "page_size", "page-size",
                                        "per_page", "perpage", "per-page", "rows",      "max",
                                        "count",    "$top",    "top",      "maxresults"};
    static const char *const page[] = {"page",       "pageno",      "page_no",
                                       "pagenumber", "page_number", "pagenum"};
    const char *off = NULL, *lim = NULL, *pg = NULL;
    long size = 0;

    for (size_t q = 0; q < x->n_query; q++) {
        const char *n = x->query[q].name, *v = x->query[q].value;
        char *end = NULL;
        long num = strtol(v, &end, 10);
        if (!*v || *end)
            continue;
        for (size_t i = 0; i < sizeof(offset) / sizeof(*offset) && num == 0 && !off; i++)
            if (strcasecmp(n, offset[i]) == 0)
                off = n;
        for (size_t i = 0; i < sizeof(limit) / sizeof(*limit) && num > 0 && num <= 100000 && !lim;
             i++)
            if (strcasecmp(n, limit[i]) == 0) {
                lim = n;
                size = num;
            }
        for (size_t i = 0; i < sizeof(page) / sizeof(*page) && num == 1 && !pg; i++)
            if (strcasecmp(n, page[i]) == 0)
                pg = n;
    }
    if (off && lim && rec_query_set(get, off, "${offset}") && rec_query_set(get, lim, "${limit}")) {
        *page_size = size;
        return "offset and limit";
    }
    if (pg && rec_query_set(get, pg, "${page}")) {
        if (lim && rec_query_set(get, lim, "${limit}"))
            *page_size = size;
        return "page number";
    }
    return NULL;
}

/* ---- writing a table ---------------------------------------------------------------------------
 */

static void rec_write_table(struct rec *r, struct apbot_buf *b, const struct rec_table *t,
                            const char *extra, const char *indent)
{
    if (t->json) {
        rec_addf(r, b, "%s<table pointer=\"", indent);
        rec_addx(r, b, t->pointer);
        rec_add(r, b, "\"");
    } else {
        rec_addf(r, b, "%s<table rows=\"", indent);
        rec_addx(r, b, t->rows);
        rec_add(r, b, "\"");
    }
    if (extra)
        rec_add(r, b, extra);
    if (!t->json && t->cols.dec) {
        rec_addf(r, b, "\n%s       amount-decimal=\"%c\" amount-group=\"", indent, t->cols.dec);
        if (t->cols.group)
            rec_addn(r, b, &t->cols.group, 1);
        rec_add(r, b, "\"");
    } else if (!t->json && rec_cols_has(&t->cols, "amount")) {
        rec_add(r, b, " amount-decimal=\".\" amount-group=\"\"");
    }
    if (!t->json && t->cols.date_fmt[0])
        rec_addf(r, b, " date-format=\"%s\"", t->cols.date_fmt);
    rec_add(r, b, ">\n");
    for (size_t i = 0; i < t->cols.n; i++) {
        rec_addf(r, b, "%s  <column name=\"%s\" %s=\"", indent, t->cols.c[i].name,
                 t->json ? "pointer" : "xpath");
        rec_addx(r, b, t->cols.c[i].where);
        rec_add(r, b, "\"/>\n");
    }
    rec_addf(r, b, "%s</table>\n", indent);
}

/* ---- a detail page: what the person opened from a hit ------------------------------------------
 */

struct rec_detail {
    bool ok;
    char get[1024];
    struct rec_cols cols;
};

/* The elements of a detail page that hold values: an input by its name, an element by its id. */
static void rec_detail_walk(struct rec *r, xmlNodePtr n, struct rec_cols *cs, int depth)
{
    for (; n && depth < 256; n = n->next) {
        if (n->type != XML_ELEMENT_NODE)
            continue;
        char v[256], name[128], lit[160], where[320];
        if (rec_is(n, "input") && rec_attr(n, "name", name, sizeof(name)) &&
            rec_attr(n, "value", v, sizeof(v)) && rec_xlit(name, lit, sizeof(lit))) {
            const char *cn = rec_col_name(r, cs, v, name);
            snprintf(where, sizeof(where), "//input[@name=%s]/@value", lit);
            if (cn)
                rec_cols_add(cs, cn, where, v);
        } else if (rec_attr(n, "id", name, sizeof(name)) && rec_xlit(name, lit, sizeof(lit)) &&
                   n->children != NULL && !rec_is(n, "form") && !rec_is(n, "table")) {
            char text[256];
            rec_node_text(n, text, sizeof(text));
            const char *cn = rec_col_name(r, cs, text, name);
            snprintf(where, sizeof(where), "//%s[@id=%s]", (const char *)n->name, lit);
            if (cn)
                rec_cols_add(cs, cn, where, text);
        }
        rec_detail_walk(r, n->children, cs, depth + 1);
    }
}

static void rec_find_detail(struct rec *r, size_t hit, const struct rec_table *t,
                            struct rec_detail *d)
{
    memset(d, 0, sizeof(*d));
    for (size_t j = hit + 1; j < r->n_ex; j++) {
        struct rec_ex *x = &r->ex[j];
        /* the reference anywhere on the page: a detail page shows it in a read-only field */
        if (x->role == REC_ROLE_SKIPPED || strcmp(x->e->method, "GET") != 0 || !x->html ||
            !r->key_ref || !rec_has_token(x->ans->body, x->ans->body_len, r->key_ref))
            continue;
        /* its URL carries a cell of the hit row */
        for (size_t c = 0; c < t->cols.n; c++) {
            if (!t->cols.c[c].value[0] || !rec_ex_carries(x, t->cols.c[c].value))
                continue;
            char tmpl[96];
            snprintf(tmpl, sizeof(tmpl), "${row.%s|url}", t->cols.c[c].name);
            struct rec_url_subst sub = {t->cols.c[c].value, tmpl};
            char *get = rec_url_template(x->path, &sub, 1);
            snprintf(d->get, sizeof(d->get), "%s", get);
            free(get);
            xmlDocPtr doc = rec_doc_of(x);
            if (doc)
                rec_detail_walk(r, xmlDocGetRootElement(doc), &d->cols, 0);
            d->ok = rec_cols_has(&d->cols, "reference");
            if (d->ok) {
                if (x->role == REC_ROLE_NONE)
                    x->role = REC_ROLE_DETAIL;
                rec_note(r,
                         "lookup: a hit's row has no reference: its detail page (entry %zu, "
                         "opened by the %s) shows it",
                         x->e->index, t->cols.c[c].name);
                return;
            }
            memset(&d->cols, 0, sizeof(d->cols));
        }
    }
}

/* ---- the lookup
 * ---------------------------------------------------------------------------------- */

/* The status a table (or detail) column showed after the last follow-up step: what a finished
 * document shows. */
static bool rec_finished_value(struct rec *r, char *buf, size_t len)
{
    size_t after = r->n_followups ? r->followups[r->n_followups - 1] : r->commit;
    for (size_t j = r->n_ex; j-- > after + 1;) {
        struct rec_ex *x = &r->ex[j];
        if (x->role == REC_ROLE_SKIPPED || !r->doc)
            continue;
        struct rec_table t;
        if (x->json)
            rec_json_table(r, x, r->doc, &t);
        else
            rec_html_table(r, x, r->doc, &t);
        for (size_t c = 0; c < t.cols.n; c++)
            if (strcmp(t.cols.c[c].name, "status") == 0 && t.cols.c[c].value[0]) {
                snprintf(buf, len, "%s", t.cols.c[c].value);
                return true;
            }
    }
    return false;
}

/* An id of the page `with` has and the page `without` lacks: the no-results marker. */
static bool rec_marker(struct rec *r, struct rec_ex *with, struct rec_ex *without, char *buf,
                       size_t len)
{
    (void)r;
    xmlDocPtr d = rec_doc_of(with);
    struct page *pw = rec_ex_page(with), *po = without ? rec_ex_page(without) : NULL;
    if (!d || !pw)
        return false;
    int best_rank = 100;
    struct rec_walk w;
    rec_walk_start(&w, d);
    for (xmlNodePtr n; (n = rec_walk_next(&w)) != NULL;) {
        char id[128], lit[160], xp[320];
        if (!rec_attr(n, "id", id, sizeof(id)) || !rec_xlit(id, lit, sizeof(lit)))
            continue;
        snprintf(xp, sizeof(xp), "//%s[@id=%s]", (const char *)n->name, lit);
        if (!page_has(pw, xp) || (po && page_has(po, xp)))
            continue;
        int rank = 10;
        if (strcasestr(id, "no") || strcasestr(id, "empty") || strcasestr(id, "none"))
            rank = 0;
        if (rank < best_rank) {
            snprintf(buf, len, "%s", xp);
            best_rank = rank;
        }
    }
    return best_rank < 100;
}

void rec_lookup(struct rec *r)
{
    struct apbot_buf *b = &r->lookup;
    size_t hit = SIZE_MAX, empty = SIZE_MAX;

    if (!r->key_ref) {
        rec_todo(r, b, "  ", "lookup", 0,
                 "The recording shows no search for the reference typed into the invoice (or "
                 "the recorder could not tell which field holds it: give --key-field NAME). "
                 "Write <lookup> by hand: a search by the key, its results table, its "
                 "no-results marker.");
        return;
    }
    for (size_t i = 0; i < r->n_ex; i++) {
        struct rec_ex *x = &r->ex[i];
        if (x->role != REC_ROLE_NONE || !rec_ex_is_read(x))
            continue;
        bool carries =
            rec_ex_carries(x, r->key_ref) || (x->e->req_body && strstr(x->e->req_body, r->key_ref));
        if (!carries)
            continue;
        bool shows = (r->doc && rec_ex_shows(x, r->doc)) || rec_ex_shows(x, r->key_ref);
        if (shows)
            hit = i;
        else if (empty == SIZE_MAX)
            empty = i;
    }
    if (hit == SIZE_MAX) {
        rec_todo(r, b, "  ", "lookup", empty != SIZE_MAX ? r->ex[empty].e->index : 0,
                 "No search for the reference '%s' found the booked invoice in the recording. "
                 "Search for it again after saving (the ERP's search may lag behind) and record "
                 "again, or write <lookup> by hand.",
                 r->key_ref);
        return;
    }
    struct rec_ex *hx = &r->ex[hit];
    hx->role = REC_ROLE_LOOKUP;
    if (empty != SIZE_MAX)
        r->ex[empty].role = REC_ROLE_LOOKUP;
    struct rec_table t;
    if (hx->json)
        rec_json_table(r, hx, r->doc ? r->doc : r->key_ref, &t);
    else
        rec_html_table(r, hx, r->doc ? r->doc : r->key_ref, &t);
    if (!t.ok && r->doc) {
        if (hx->json)
            rec_json_table(r, hx, r->key_ref, &t);
        else
            rec_html_table(r, hx, r->key_ref, &t);
    }

    /* the request */
    rec_add(r, b, "  <lookup");
    char *get = NULL, *body = NULL;
    if (hx->jreq) {
        struct rec_jctx jc = {.at = hit};
        body = rec_json_body(r, hx, &jc);
    } else {
        struct rec_url_subst sub = {r->key_ref, "${key|url}"};
        get = rec_url_template(hx->path, &sub, 1);
        rec_add(r, b, " get=\"");
        rec_addx(r, b, get);
        rec_add(r, b, "\"");
    }
    struct rec_detail d = {0};
    if (t.ok && !rec_cols_has(&t.cols, "reference") && !t.json)
        rec_find_detail(r, hit, &t, &d);
    bool keycol =
        rec_cols_has(&t.cols, "reference") || (d.ok && rec_cols_has(&d.cols, "reference"));
    if (keycol)
        rec_add(r, b, " key-column=\"reference\"");
    rec_add(r, b, ">\n");
    if (body) {
        rec_add(r, b, "    <send url=\"");
        rec_addx(r, b, hx->path);
        rec_add(r, b, "\">\n      <json>");
        rec_addx(r, b, body);
        rec_add(r, b, "</json>\n    </send>\n");
    }
    if (empty != SIZE_MAX)
        rec_note(r,
                 "lookup: entry %zu (%s %s) found the booked invoice by the reference; entry %zu "
                 "before it found nothing",
                 hx->e->index, hx->e->method, hx->path, r->ex[empty].e->index);
    else
        rec_note(r, "lookup: entry %zu (%s %s) found the booked invoice by the reference",
                 hx->e->index, hx->e->method, hx->path);

    if (!t.ok) {
        rec_todo(r, b, "    ", "lookup-table", hx->e->index,
                 "Entry %zu's answer shows the invoice, but the recorder found no table row (or "
                 "JSON array element) holding its document number %s: write the <table> (rows, "
                 "a doc column, a reference column).",
                 hx->e->index, r->doc ? r->doc : "");
    } else {
        char extra[1024] = "";
        if (!t.json) {
            char mark[400] = "", screen[700] = "";
            struct rec_ex *ex = empty != SIZE_MAX ? &r->ex[empty] : NULL;
            if (ex && rec_marker(r, ex, hx, mark, sizeof(mark))) {
                char lit[480];
                struct apbot_buf e;
                apbot_buf_init(&e, sizeof(lit));
                rec_addx(r, &e, mark);
                snprintf(extra, sizeof(extra), " empty=\"%s\"", apbot_buf_str(&e));
                apbot_buf_done(&e);
            }
            struct rec_formref fr;
            if (rec_form_find(r, hit, &fr)) {
                struct page *ph = rec_ex_page(hx);
                struct page *pe = ex ? rec_ex_page(ex) : NULL;
                if (ph && page_has(ph, fr.xpath) && (!pe || page_has(pe, fr.xpath)))
                    snprintf(screen, sizeof(screen), "%s", fr.xpath);
                rec_formref_done(&fr);
            }
            if (screen[0]) {
                struct apbot_buf e;
                apbot_buf_init(&e, 2048);
                rec_addx(r, &e, screen);
                size_t l = strlen(extra);
                snprintf(extra + l, sizeof(extra) - l, "\n           screen=\"%s\"",
                         apbot_buf_str(&e));
                apbot_buf_done(&e);
            }
            if (!mark[0])
                rec_todo_later(r, "lookup-empty", hx->e->index,
                               "What does the search page show when nothing is found? The "
                               "recording has no search that found nothing%s. Add "
                               "empty=\"XPATH\" to the lookup's <table> (without it no search "
                               "proves an invoice absent, and nothing is ever posted).",
                               empty != SIZE_MAX ? " apart from the page it shows anyway" : "");
        }
        rec_write_table(r, b, &t, extra, "    ");
        rec_todo_flush(r, b, "    ");
        if (d.ok) {
            rec_add(r, b, "    <detail get=\"");
            rec_addx(r, b, d.get);
            rec_add(r, b, "\"");
            if (d.cols.dec) {
                rec_addf(r, b, " amount-decimal=\"%c\" amount-group=\"", d.cols.dec);
                if (d.cols.group)
                    rec_addn(r, b, &d.cols.group, 1);
                rec_add(r, b, "\"");
            }
            if (d.cols.date_fmt[0])
                rec_addf(r, b, " date-format=\"%s\"", d.cols.date_fmt);
            rec_add(r, b, ">\n");
            for (size_t i = 0; i < d.cols.n; i++) {
                rec_addf(r, b, "      <column name=\"%s\" xpath=\"", d.cols.c[i].name);
                rec_addx(r, b, d.cols.c[i].where);
                rec_add(r, b, "\"/>\n");
            }
            rec_add(r, b, "    </detail>\n");
        }
        if (!keycol)
            rec_todo(r, b, "    ", "lookup-key", hx->e->index,
                     "The search's rows do not show the reference '%s', and no page the person "
                     "opened from a hit does: which column (or detail page) shows the key, so "
                     "that a hit is compared exactly? Add it and key-column=\"reference\".",
                     r->key_ref);
        if (r->n_followups > 0) {
            char fin[256];
            bool has_status =
                rec_cols_has(&t.cols, "status") || (d.ok && rec_cols_has(&d.cols, "status"));
            if (has_status && rec_finished_value(r, fin, sizeof(fin))) {
                rec_add(r, b, "    <finished column=\"status\">");
                rec_addx(r, b, fin);
                rec_add(r, b, "</finished>\n");
                rec_note(r,
                         "lookup: a finished document's status is '%s' (as shown after the "
                         "last follow-up step)",
                         fin);
            } else {
                rec_todo(r, b, "    ", "lookup-finished", hx->e->index,
                         "The booking has follow-up steps: which column tells a finished "
                         "document from a saved draft, and what does it show when finished? "
                         "Write <finished column=\"status\">VALUE</finished> (the column in the "
                         "table or the detail), so that a draft found after a crash gets its "
                         "follow-up steps instead of passing for a booking.");
            }
        }
    }
    rec_add(r, b, "  </lookup>\n");
    free(get);
    free(body);
}

/* A link of page x (an <a href>) that leads to y's URL: its XPath (by id, rel, class or its
 * text) into buf, as "...@href". */
static bool rec_next_link(struct rec *r, struct rec_ex *x, struct rec_ex *y, char *buf, size_t len)
{
    (void)r;
    xmlDocPtr d = rec_doc_of(x);
    struct page *pg = rec_ex_page(x);
    if (!d || !pg)
        return false;
    struct rec_walk w;
    rec_walk_start(&w, d);
    for (xmlNodePtr n; (n = rec_walk_next(&w)) != NULL;) {
        char href[2048];
        if (!rec_is(n, "a") || !rec_attr(n, "href", href, sizeof(href)))
            continue;
        char *abs = http_resolve_url(x->ans->url, href);
        har_url_drop_session(abs);
        bool same = abs && strcmp(abs, y->e->url) == 0;
        free(abs);
        if (!same)
            continue;
        const char *attrs[] = {"id", "rel", "class"};
        for (size_t a = 0; a < 3; a++) {
            char v[128], lit[160], q[400];
            if (!rec_attr(n, attrs[a], v, sizeof(v)) || !v[0] || !rec_xlit(v, lit, sizeof(lit)))
                continue;
            snprintf(buf, len, "//a[@%s=%s]/@href", attrs[a], lit);
            snprintf(q, sizeof(q), "count(//a[@%s=%s])", attrs[a], lit);
            char *cnt = page_string(pg, q);
            bool one = cnt && strcmp(cnt, "1") == 0;
            free(cnt);
            if (one)
                return true;
        }
        char text[128], lit[160];
        rec_node_text(n, text, sizeof(text));
        if (text[0] && rec_xlit(text, lit, sizeof(lit))) {
            snprintf(buf, len, "//a[normalize-space(.)=%s]/@href", lit);
            return true;
        }
    }
    return false;
}

/* ---- the list ----------------------------------------------------------------------------------
 */

/* The recording's dates as the list request may write them (today's and the invoice's). */
static bool rec_list_date(struct rec *r, const char *text, const char **ret_which, char *fmt,
                          size_t flen)
{
    static const char *const pats[] = {"%Y-%m-%d", "%d.%m.%Y", "%m/%d/%Y", "%d/%m/%Y",
                                       "%Y%m%d",   "%d-%m-%Y", "%m-%d-%Y", "%Y/%m/%d"};
    const char *days[3] = {r->today[0], r->today[1], r->inv->issue_date};
    for (int d = 0; d < 3; d++)
        for (size_t p = 0; p < sizeof(pats) / sizeof(*pats); p++) {
            struct tm tm;
            char out[32];
            memset(&tm, 0, sizeof(tm));
            if (sscanf(days[d], "%d-%d-%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday) != 3)
                continue;
            tm.tm_year -= 1900;
            tm.tm_mon -= 1;
            if (strftime(out, sizeof(out), pats[p], &tm) && strcmp(out, text) == 0) {
                *ret_which = d < 2 ? "booked" : "invoice";
                snprintf(fmt, flen, "%s", pats[p]);
                return true;
            }
        }
    return false;
}

/* The dates a listing's JSON request sends (strings or tagged dates, depth-bounded), at most
 * 2, into d; which day they are into *which. */
static size_t rec_list_jdates(struct rec *r, const json_t *v, int depth, struct rec_ldate *d,
                              size_t n, const char **which)
{
    char iso[16], fmt[16];
    const char *w = NULL, *k;
    json_t *m;
    size_t i;

    if (depth > 16 || n >= 2)
        return n;
    if (rec_json_tagged_date(v, iso, sizeof(iso))) {
        if (rec_list_date(r, iso, &w, fmt, sizeof(fmt))) {
            snprintf(d[n].text, sizeof(d[n].text), "%s", iso);
            d[n].fmt[0] = '\0';
            d[n].tagged = true;
            *which = *which ? *which : w;
            n++;
        }
        return n;
    }
    if (json_is_string(v) && !jdoc_number_text(v)) {
        const char *s = json_string_value(v);
        if (strlen(s) < sizeof(d[n].text) && rec_list_date(r, s, &w, fmt, sizeof(fmt))) {
            snprintf(d[n].text, sizeof(d[n].text), "%s", s);
            snprintf(d[n].fmt, sizeof(d[n].fmt), "%s", fmt);
            d[n].tagged = false;
            *which = *which ? *which : w;
            n++;
        }
        return n;
    }
    if (json_is_array(v))
        json_array_foreach((json_t *)v, i, m) n = rec_list_jdates(r, m, depth + 1, d, n, which);
    else if (json_is_object(v))
        json_object_foreach((json_t *)v, k, m) n = rec_list_jdates(r, m, depth + 1, d, n, which);
    return n;
}

/* The listing rec_list found: the request that lists the day and the dates it sends. */
struct rec_listing {
    size_t list;    /* the listing's first page */
    size_t shown;   /* the page of the listing that shows the document */
    char next[400]; /* the link the person paged on by, or "" */
    const char *by; /* "invoice": it lists by invoice date; else by booking date */
    size_t n_dates; /* query dates (1: the day, 2: from and to) */
    char fmts[2][16], names[2][64], values[2][64];
    struct rec_ldate ldates[2]; /* a JSON listing's dates (n_ldates > 0) */
    size_t n_ldates;
};

/* The dates query of x sends, at most 2, into f, nm and vl; which day they are into *which. */
static size_t rec_list_qdates(struct rec *r, const struct rec_ex *x, char f[2][16], char nm[2][64],
                              char vl[2][64], const char **which)
{
    size_t nd = 0;
    for (size_t q = 0; q < x->n_query && nd < 2; q++) {
        char fmt[16];
        const char *w = NULL;
        if (rec_list_date(r, x->query[q].value, &w, fmt, sizeof(fmt))) {
            snprintf(f[nd], sizeof(f[nd]), "%s", fmt);
            snprintf(nm[nd], sizeof(nm[nd]), "%s", x->query[q].name);
            snprintf(vl[nd], sizeof(vl[nd]), "%s", x->query[q].value);
            *which = *which ? *which : w;
            nd++;
        }
    }
    return nd;
}

/* The first read after the commit that sends a day and shows the document (on its page or a
 * page its links led to): true with ls filled, false when the recording has none. */
static bool rec_list_find(struct rec *r, struct rec_listing *ls)
{
    for (size_t i = r->commit == SIZE_MAX ? 0 : r->commit + 1; i < r->n_ex && r->doc; i++) {
        struct rec_ex *x = &r->ex[i];
        if (x->role != REC_ROLE_NONE || !rec_ex_is_read(x) ||
            (r->key_ref && rec_ex_carries(x, r->key_ref)))
            continue;
        /* the document on this page, or on a page its links led to (the person paged on) */
        size_t on = SIZE_MAX;
        char nx[400] = "";
        if (rec_ex_shows(x, r->doc))
            on = i;
        for (size_t j = i + 1; on == SIZE_MAX && j < r->n_ex && j <= i + 40; j++) {
            struct rec_ex *y = &r->ex[j];
            if (y->role != REC_ROLE_NONE || !rec_ex_is_read(y) || !rec_ex_shows(y, r->doc))
                continue;
            if (rec_next_link(r, x, y, nx, sizeof(nx)))
                on = j;
        }
        if (on == SIZE_MAX)
            continue;
        const char *which = NULL;
        char f[2][16], nm[2][64], vl[2][64];
        size_t nd = rec_list_qdates(r, x, f, nm, vl, &which);
        if (nd == 0 && x->jreq && x->json) {
            /* a single-page client's listing: a JSON call sending the day */
            struct rec_ldate jd[2];
            memset(jd, 0, sizeof(jd));
            nd = rec_list_jdates(r, jdoc_root(x->jreq), 0, jd, 0, &which);
            if (nd > 0) {
                memcpy(ls->ldates, jd, sizeof(ls->ldates));
                ls->n_ldates = nd;
            }
        }
        if (nd == 0)
            continue;
        ls->list = i;
        ls->shown = on;
        snprintf(ls->next, sizeof(ls->next), "%s", nx);
        ls->n_dates = nd;
        ls->by = which;
        memcpy(ls->fmts, f, sizeof(ls->fmts));
        memcpy(ls->names, nm, sizeof(ls->names));
        memcpy(ls->values, vl, sizeof(ls->values));
        return true; /* the first page of the first listing */
    }
    return false;
}

/* <list> as a JSON call: its body with the dates as the list's variables; one page (a call's
 * paging is the ERP's own: said in the report). */
static void rec_list_write_json(struct rec *r, const struct rec_listing *ls,
                                const struct rec_table *t)
{
    struct apbot_buf *b = &r->list;
    struct rec_ex *lx = &r->ex[ls->list];
    const char *by = ls->by;
    size_t n_ldates = ls->n_ldates;
    long psize = 0;
    struct rec_jctx jc = {
        .at = ls->list, .ldates = ls->ldates, .n_ldates = n_ldates, .page_size = &psize};
    char *body = rec_json_body(r, lx, &jc);
    rec_add(r, b, "  <list");
    if (by && strcmp(by, "invoice") == 0)
        rec_add(r, b, " by=\"invoice\"");
    if (psize > 0)
        rec_addf(r, b, " page-size=\"%ld\"", psize);
    else
        rec_add(r, b, " max-pages=\"1\"");
    rec_add(r, b, ">\n    <send url=\"");
    rec_addx(r, b, lx->path);
    rec_add(r, b, "\">\n      <json>");
    rec_addx(r, b, body ? body : "");
    rec_add(r, b, "</json>\n    </send>\n");
    free(body);
    if (t->ok)
        rec_write_table(r, b, t, NULL, "    ");
    else
        rec_todo(r, b, "    ", "list-table", lx->e->index,
                 "Entry %zu lists the booked document, but the recorder found no JSON array "
                 "element holding it: write the <table>.",
                 lx->e->index);
    rec_note(r,
             "list: entry %zu (%s %s), a JSON call, lists the day by %s date (%zu date%s of "
             "its body as %s)",
             lx->e->index, lx->e->method, lx->path,
             by && strcmp(by, "invoice") == 0 ? "invoice" : "booking", n_ldates,
             n_ldates == 1 ? "" : "s", n_ldates == 1 ? "${date}" : "${from} and ${to}");
    if (psize > 0)
        rec_note(r,
                 "list: paged by its body's offset and limit (${offset}, ${limit}, "
                 "page-size=\"%ld\": a page shorter than that is the last); check that "
                 "they are what the recorder took them for",
                 psize);
    else
        rec_note(r,
                 "list: one call recorded (%zu rows), no paging found in it: if the ERP pages "
                 "a long day, write its offset and limit as ${offset} and ${limit} with "
                 "page-size",
                 t->n_rows);
    rec_add(r, b, "  </list>\n");
}

/* The listing's URL (path) with its dates as ${date}, or ${from} and ${to}. Heap. */
static char *rec_list_url(const struct rec_listing *ls, const char *path)
{
    const char(*fmts)[16] = ls->fmts, (*names)[64] = ls->names, (*values)[64] = ls->values;
    char t0[96], t1[96];
    struct rec_url_subst sub[2];
    size_t ns = 0;
    if (ls->n_dates == 1) {
        snprintf(t0, sizeof(t0), "${date|date:%s|url}", fmts[0]);
        sub[ns++] = (struct rec_url_subst){values[0], t0};
    } else {
        snprintf(t0, sizeof(t0), "${from|date:%s|url}", fmts[0]);
        snprintf(t1, sizeof(t1), "${to|date:%s|url}", fmts[1]);
        sub[ns++] = (struct rec_url_subst){values[0], t0};
        if (strcmp(values[0], values[1]) != 0)
            sub[ns++] = (struct rec_url_subst){values[1], t1};
    }
    char *get = rec_url_template(path, sub, ns);
    if (ls->n_dates == 2 && strcmp(values[0], values[1]) == 0) {
        /* both ends the same day: the first parameter is the start, the second the end */
        char key[80];
        snprintf(key, sizeof(key), "%s=", names[1]);
        char *at = strstr(get, key);
        char *first = strstr(get, t0);
        if (at && first && at > first) {
            char *end = strstr(at, t0);
            if (end) {
                size_t n = strlen(get) + strlen(t1) + 1;
                char *out = apbot_xmalloc(n);
                snprintf(out, n, "%.*s%s%s", (int)(end - get), get, t1, end + strlen(t0));
                free(get);
                get = out;
            }
        }
    }
    return get;
}

/* <list get="..."> with its table: paged by a next link, by the URL, or one page. */
static void rec_list_write_get(struct rec *r, const struct rec_listing *ls,
                               const struct rec_table *t)
{
    struct apbot_buf *b = &r->list;
    struct rec_ex *lx = &r->ex[ls->list];
    const char *by = ls->by, *next = ls->next;
    char *get = rec_list_url(ls, lx->path);
    long page_size = 0;
    const char *paging = next[0] ? NULL : rec_list_paging(lx, &get, &page_size);
    rec_add(r, b, "  <list get=\"");
    rec_addx(r, b, get);
    rec_add(r, b, "\"");
    if (by && strcmp(by, "invoice") == 0)
        rec_add(r, b, " by=\"invoice\"");
    if (page_size > 0)
        rec_addf(r, b, " page-size=\"%ld\"", page_size);
    if (!next[0] && !paging)
        rec_add(r, b, " max-pages=\"1\""); /* no paging recorded: one page is the listing */
    rec_add(r, b, ">\n");
    rec_note(r, "list: entry %zu (%s) lists the day by %s date (%s)", lx->e->index, lx->path,
             by && strcmp(by, "invoice") == 0 ? "invoice" : "booking", get);
    free(get);
    if (!t->ok) {
        rec_todo(r, b, "    ", "list-table", lx->e->index,
                 "Entry %zu lists the booked document, but the recorder found no table row "
                 "holding it: write the <table>.",
                 lx->e->index);
    } else if (next[0]) {
        struct apbot_buf e;
        char extra[600];
        apbot_buf_init(&e, 2048);
        rec_addx(r, &e, next);
        snprintf(extra, sizeof(extra), " next=\"%.560s\"", apbot_buf_str(&e));
        apbot_buf_done(&e);
        rec_write_table(r, b, t, extra, "    ");
        rec_note(r, "list: the document was on a later page (entry %zu), reached by the link %s",
                 r->ex[ls->shown].e->index, next);
    } else if (paging) {
        rec_write_table(r, b, t, NULL, "    ");
        rec_note(r, "list: paged by its URL's %s (a page shorter than page-size is the last)",
                 paging);
    } else {
        rec_write_table(r, b, t, NULL, "    ");
        rec_note(r,
                 "list: one page recorded (%zu rows): if the ERP pages a long day, add "
                 "next=\"XPATH\" (the next page's link) to its table, or ${page} to its URL",
                 t->n_rows);
    }
    rec_add(r, b, "  </list>\n");
}

void rec_list(struct rec *r)
{
    struct rec_listing ls = {.list = SIZE_MAX, .shown = SIZE_MAX};

    if (!rec_list_find(r, &ls)) {
        rec_todo(r, &r->list, "  ", "list", 0,
                 "The recording shows no listing of a day (or a date range) that shows the "
                 "booked document %s. apbot report reads the day's records from it: write "
                 "<list> by hand (its request with ${date}, or ${from} and ${to}, and its table), "
                 "or open the day's list in the ERP while recording.",
                 r->doc ? r->doc : "");
        return;
    }
    r->ex[ls.list].role = REC_ROLE_LIST;
    r->ex[ls.shown].role = REC_ROLE_LIST;
    struct rec_table t;
    if (r->ex[ls.shown].json)
        rec_json_table(r, &r->ex[ls.shown], r->doc, &t);
    else
        rec_html_table(r, &r->ex[ls.shown], r->doc, &t);
    if (ls.n_ldates > 0)
        rec_list_write_json(r, &ls, &t);
    else
        rec_list_write_get(r, &ls, &t);
}

/* ---- selects of every recorded page (the document type of a JSON client) ------------------------
 */

void rec_page_selects(struct rec *r,
                      bool (*fn)(struct rec *, const struct page_select *, const char *),
                      const char *sent)
{
    for (size_t i = 0; i < r->n_ex; i++) {
        struct rec_ex *x = &r->ex[i];
        xmlDocPtr d = x->role != REC_ROLE_SKIPPED ? rec_doc_of(x) : NULL;
        if (!d)
            continue;
        struct rec_walk w;
        rec_walk_start(&w, d);
        for (xmlNodePtr n; (n = rec_walk_next(&w)) != NULL;) {
            if (!rec_is(n, "select"))
                continue;
            struct page_option opts[64];
            char vals[64][128], labels[64][128];
            struct page_select s = {.name = (char *)"", .options = opts};
            char nm[128];
            if (rec_attr(n, "name", nm, sizeof(nm)) || rec_attr(n, "id", nm, sizeof(nm)))
                s.name = nm;
            for (xmlNodePtr o = n->children; o && s.n_options < 64; o = o->next) {
                if (!rec_is(o, "option"))
                    continue;
                size_t k = s.n_options++;
                rec_node_text(o, labels[k], sizeof(labels[k]));
                if (!rec_attr(o, "value", vals[k], sizeof(vals[k])))
                    snprintf(vals[k], sizeof(vals[k]), "%s", labels[k]);
                opts[k] = (struct page_option){.value = vals[k],
                                               .label = labels[k],
                                               .disabled = xmlHasProp(o, BAD_CAST "disabled")};
            }
            if (fn(r, &s, sent))
                return;
        }
    }
}
