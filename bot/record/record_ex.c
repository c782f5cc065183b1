/*
 * record_ex.c - the HAR's entries as exchanges with the ERP (struct rec_ex): each request
 * paired with its final answer (a redirect's hops followed through the entries the HAR holds
 * for them), its query, form body or JSON body decoded, its answer parsed as what it is (an
 * HTML page, JSON, plain text), and what is no exchange with the ERP set aside: another origin
 * (an analytics script, a font server), the browser's cache, static files, failed requests.
 * The ERP's origin is the one the sample's values were sent to.
 */
#define _GNU_SOURCE /* memmem, strcasestr */
#include "record/record-int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <libxml/tree.h>

#include "apbot/invoice.h"
#include "apbot/mem.h"
#include "apbot/text.h"
#include "web/jdoc.h"
#include "web/page.h"

static const char *const rec_role_names[] = {
    "none", "skipped", "login",     "login page", "after login", "resolve", "page",
    "step", "commit",  "follow-up", "lookup",     "detail",      "list",
};
_Static_assert(sizeof(rec_role_names) / sizeof(*rec_role_names) == REC_ROLE__COUNT,
               "a name for every role");

const char *rec_role_name(enum rec_role r)
{
    return (unsigned)r < REC_ROLE__COUNT ? rec_role_names[r] : "invalid";
}

/* ---- the work budget ------------------------------------------------------------------------ */

/* Searching recorded texts for values is what costs: a hostile HAR of 20,000 entries with large
 * bodies could make it quadratic. Every search counts the bytes it scans against one budget per
 * recording (one recording at a time per thread); once it is spent every search finds nothing
 * and the recording is refused (record_run), never slow without end. */
static _Thread_local uint64_t rec_budget_bytes, rec_budget_used;
static _Thread_local bool rec_budget_over;

void rec_budget_reset(uint64_t bytes)
{
    rec_budget_bytes = bytes;
    rec_budget_used = 0;
    rec_budget_over = false;
}

bool rec_budget_spent(void)
{
    return rec_budget_over;
}

const void *rec_find(const void *hay, size_t len, const void *needle, size_t nlen)
{
    if (!hay || !needle || nlen == 0 || nlen > len)
        return NULL;
    if (rec_budget_bytes) {
        rec_budget_used += len;
        if (rec_budget_used > rec_budget_bytes) {
            rec_budget_over = true;
            return NULL;
        }
    }
    return memmem(hay, len, needle, nlen);
}

/* ---- tokens ------------------------------------------------------------------------------- */

static bool rec_alnum(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

bool rec_has_token(const char *s, size_t len, const char *t)
{
    size_t tl = t ? strlen(t) : 0;
    if (!s || tl == 0 || tl > len)
        return false;
    for (const char *p = s; (size_t)(p - s) + tl <= len;) {
        const char *hit = rec_find(p, len - (size_t)(p - s), t, tl);
        if (!hit)
            return false;
        bool left =
            hit == s || !rec_alnum((unsigned char)hit[-1]) || !rec_alnum((unsigned char)t[0]);
        bool right = (size_t)(hit - s) + tl == len || !rec_alnum((unsigned char)hit[tl]) ||
                     !rec_alnum((unsigned char)t[tl - 1]);
        if (left && right)
            return true;
        p = hit + 1;
    }
    return false;
}

/* ---- decoding ----------------------------------------------------------------------------- */

/* name=value&... decoded into pairs (at most HAR_HEADERS_MAX). */
static struct har_pair *rec_pairs(const char *s, size_t len, size_t *ret_n)
{
    struct har_pair *p = NULL;
    size_t n = 0, cap = 0, i = 0;

    while (i < len) {
        size_t j = i;
        while (j < len && s[j] != '&')
            j++;
        if (j > i) {
            const char *eq = memchr(s + i, '=', j - i);
            size_t nl = eq ? (size_t)(eq - (s + i)) : j - i;
            if (apbot_grow((void **)&p, &cap, n, sizeof(*p), HAR_HEADERS_MAX) != APBOT_OK)
                break;
            p[n].name = text_form_decode(s + i, nl);
            p[n].value =
                eq ? text_form_decode(eq + 1, (size_t)(s + j - eq - 1)) : apbot_xstrdup("");
            n++;
        }
        i = j + 1;
    }
    *ret_n = n;
    return p;
}

static void rec_pairs_free(struct har_pair *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        explicit_bzero(p[i].value, strlen(p[i].value));
        free(p[i].name);
        free(p[i].value);
    }
    free(p);
}

/* The origin (scheme://host[:port]) of url into buf; false when it has none. */
static bool rec_origin_of(const char *url, char *buf, size_t len)
{
    const char *s = strstr(url, "://");
    if (!s)
        return false;
    const char *e = s + 3;
    while (*e && *e != '/' && *e != '?' && *e != '#')
        e++;
    size_t n = (size_t)(e - url);
    if (n + 1 > len)
        return false;
    memcpy(buf, url, n);
    buf[n] = '\0';
    for (char *c = buf; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    return true;
}

static bool rec_same_origin(const char *url, const char *origin)
{
    char o[512];
    return rec_origin_of(url, o, sizeof(o)) && strcmp(o, origin) == 0;
}

/* A redirect's target made absolute (a HAR may write a relative redirectURL). Heap. */
static char *rec_resolve(const char *base, const char *ref)
{
    char o[512];
    if (strstr(ref, "://") || !rec_origin_of(base, o, sizeof(o)))
        return apbot_xstrdup(ref);
    size_t n = strlen(o) + strlen(base) + strlen(ref) + 2;
    char *out = apbot_xmalloc(n);
    if (ref[0] == '/') {
        snprintf(out, n, "%s%s", o, ref);
    } else {
        const char *path = base + strlen(o);
        const char *q = strpbrk(path, "?#");
        size_t pl = q ? (size_t)(q - path) : strlen(path);
        const char *slash = NULL;
        for (size_t i = 0; i < pl; i++)
            if (path[i] == '/')
                slash = path + i;
        size_t keep = slash ? (size_t)(slash - path) + 1 : 0;
        snprintf(out, n, "%s%.*s%s%s", o, (int)keep, path, keep ? "" : "/", ref);
    }
    return out;
}

static bool rec_ends(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcasecmp(s + a - b, suffix) == 0;
}

/* A static file a page loads (its script, style, images, fonts): never a step. */
static bool rec_is_static(const struct har_entry *e)
{
    static const char *const types[] = {"script",
                                        "stylesheet",
                                        "image",
                                        "font",
                                        "media",
                                        "manifest",
                                        "texttrack",
                                        "ping",
                                        "websocket",
                                        "preflight",
                                        "cspviolationreport",
                                        "signedexchange"};
    static const char *const ext[] = {".js",    ".mjs", ".css", ".png",  ".jpg",
                                      ".jpeg",  ".gif", ".ico", ".svg",  ".woff",
                                      ".woff2", ".ttf", ".map", ".webp", ".eot"};
    for (size_t i = 0; i < sizeof(types) / sizeof(*types); i++)
        if (strcasecmp(e->resource_type, types[i]) == 0)
            return true;
    if (strcmp(e->method, "GET") != 0)
        return false;
    char path[1024];
    snprintf(path, sizeof(path), "%s", e->url);
    path[strcspn(path, "?#")] = '\0';
    for (size_t i = 0; i < sizeof(ext) / sizeof(*ext); i++)
        if (rec_ends(path, ext[i]))
            return true;
    return false;
}

static bool rec_mime_is(const char *mime, const char *what)
{
    return mime && strcasestr(mime, what) != NULL;
}

static const char *rec_skip_ws(const char *s, const char *end)
{
    while (s < end && (*s == ' ' || *s == '\n' || *s == '\r' || *s == '\t'))
        s++;
    return s;
}

/* Parses what the exchange sent and what it was answered. */
static void rec_ex_parse(struct rec_ex *x)
{
    const struct har_entry *e = x->e, *a = x->ans;
    const char *q = strchr(e->url, '?');
    char o[512];

    if (rec_origin_of(e->url, o, sizeof(o)))
        x->path = apbot_xstrdup(e->url + strlen(o));
    else
        x->path = apbot_xstrdup(e->url);
    if (!x->path[0]) {
        free(x->path);
        x->path = apbot_xstrdup("/");
    }
    if (q) {
        size_t ql = strcspn(q + 1, "#");
        x->query = rec_pairs(q + 1, ql, &x->n_query);
    }
    if (e->has_body && e->req_len > 0) {
        const char *b = e->req_body, *end = b + e->req_len;
        const char *f = rec_skip_ws(b, end);
        if (rec_mime_is(e->req_mime, "json") || (f < end && (*f == '{' || *f == '['))) {
            struct jdoc_limits lim = jdoc_limits_for(HAR_BODY_MAX);
            char err[128];
            if (jdoc_parse(b, e->req_len, &lim, &x->jreq, err, sizeof(err)) != APBOT_OK)
                x->jreq = NULL;
        }
        if (!x->jreq && (rec_mime_is(e->req_mime, "x-www-form-urlencoded") ||
                         (!e->req_mime[0] && memchr(b, '=', e->req_len))))
            x->form = rec_pairs(b, e->req_len, &x->n_form);
    }

    const char *body = a->body, *end = a->body + a->body_len;
    const char *f = rec_skip_ws(body, end);
    if (rec_mime_is(a->resp_mime, "json") || (f < end && (*f == '{' || *f == '['))) {
        struct jdoc_limits lim = jdoc_limits_for(HAR_BODY_MAX);
        char err[128];
        if (jdoc_parse(body, a->body_len, &lim, &x->jans, err, sizeof(err)) == APBOT_OK)
            x->json = true;
        else
            x->jans = NULL;
    }
    if (!x->json && (rec_mime_is(a->resp_mime, "html") || rec_mime_is(a->resp_mime, "xml") ||
                     (f < end && *f == '<'))) {
        x->html = true;
        x->rule = page_rule_text(body, a->body_len);
    } else if (!x->json) {
        x->plain = true;
    }
}

struct page *rec_ex_page(struct rec_ex *x)
{
    char err[128];
    if (!x->html)
        return NULL;
    if (!x->page && page_parse(x->ans->body, x->ans->body_len, x->ans->url, &x->page, err,
                               sizeof(err)) != APBOT_OK)
        x->page = NULL;
    return x->page;
}

const char *rec_ex_body(const struct rec_ex *x, size_t *ret_len)
{
    if (ret_len)
        *ret_len = x->ans->body_len;
    return x->ans->body;
}

const char *rec_ex_field(const struct rec_ex *x, const char *name)
{
    for (size_t i = 0; i < x->n_form; i++)
        if (strcmp(x->form[i].name, name) == 0)
            return x->form[i].value;
    for (size_t i = 0; i < x->n_query; i++)
        if (strcmp(x->query[i].name, name) == 0)
            return x->query[i].value;
    return NULL;
}

bool rec_ex_carries(const struct rec_ex *x, const char *text)
{
    if (!text || !*text)
        return false;
    if (rec_has_token(x->e->url, strlen(x->e->url), text) ||
        rec_has_token(x->e->req_body, x->e->req_len, text))
        return true;
    for (size_t i = 0; i < x->n_query; i++)
        if (rec_has_token(x->query[i].value, strlen(x->query[i].value), text))
            return true;
    for (size_t i = 0; i < x->n_form; i++)
        if (rec_has_token(x->form[i].value, strlen(x->form[i].value), text))
            return true;
    return false;
}

bool rec_ex_shows(const struct rec_ex *x, const char *text)
{
    /* a page shows what its text says, not what its attributes hold (a search form echoes the
     * searched reference in its field's value) */
    if (x->html && x->rule)
        return rec_has_token(x->rule, strlen(x->rule), text);
    return rec_has_token(x->ans->body, x->ans->body_len, text);
}

const char *rec_ex_rpc_method(const struct rec_ex *x)
{
    const json_t *m = x->jreq ? json_object_get(jdoc_root(x->jreq), "method") : NULL;
    return json_is_string(m) && !jdoc_number_text(m) ? json_string_value(m) : NULL;
}

bool rec_ex_is_read(const struct rec_ex *x)
{
    static const char *const reads[] = {"search", "read",    "get",    "list",    "find",
                                        "fetch",  "load",    "query",  "count",   "browse",
                                        "view",   "default", "fields", "describe"};
    if (strcmp(x->e->method, "GET") == 0 || strcmp(x->e->method, "HEAD") == 0)
        return true;
    const char *m = rec_ex_rpc_method(x);
    if (!m)
        return false;
    /* the verb is a word of the method's last part: "search_read", "get_preferences" */
    const char *last = strrchr(m, '.');
    last = last ? last + 1 : m;
    for (size_t i = 0; i < sizeof(reads) / sizeof(*reads); i++) {
        size_t n = strlen(reads[i]);
        for (const char *p = last; (p = strcasestr(p, reads[i])) != NULL; p++) {
            bool left = p == last || p[-1] == '_' || p[-1] == '-';
            bool right = p[n] == '\0' || p[n] == '_' || p[n] == '-' || (p[n] >= 'A' && p[n] <= 'Z');
            if (left && right)
                return true;
        }
    }
    return false;
}

/* ---- the sample's values a request carries ------------------------------------------------- */

struct rec_seen {
    const char *var[64];
    size_t line[64];
    size_t n;
};

static void rec_seen_add(struct rec_seen *s, const struct rec_match *m, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        bool dup = false;
        for (size_t j = 0; j < s->n && !dup; j++)
            dup = strcmp(s->var[j], m[i].form->var) == 0 && s->line[j] == m[i].form->line;
        if (!dup && s->n < 64) {
            s->var[s->n] = m[i].form->var;
            s->line[s->n++] = m[i].form->line;
        }
    }
}

static void rec_seen_text(const struct rec *r, struct rec_seen *s, const char *text)
{
    struct rec_match m[REC_MATCH_MAX];
    size_t lines = r->inv->n_lines < REC_LINES_MAX ? r->inv->n_lines : REC_LINES_MAX;
    for (size_t line = 0; line <= lines; line++) {
        size_t n = rec_values_find(&r->vals, text, line, false, m, REC_MATCH_MAX);
        rec_seen_add(s, m, n);
    }
}

static void rec_seen_json(const struct rec *r, struct rec_seen *s, const json_t *v, int depth)
{
    const char *k;
    json_t *m;
    size_t i;

    if (depth > 32)
        return;
    switch (jdoc_kind(v)) {
    case JDOC_STRING:
        rec_seen_text(r, s, json_string_value(v));
        break;
    case JDOC_NUMBER: {
        struct rec_match mm[REC_MATCH_MAX];
        size_t lines = r->inv->n_lines < REC_LINES_MAX ? r->inv->n_lines : REC_LINES_MAX;
        const char *t = jdoc_number_text(v);
        /* a number is an amount only with decimals or when large: 1, 2 are counts and ids */
        if (t && (strchr(t, '.') || strlen(t) >= 3))
            for (size_t line = 0; line <= lines; line++)
                rec_seen_add(s, mm, rec_values_find_amount(&r->vals, t, line, mm, REC_MATCH_MAX));
        break;
    }
    case JDOC_ARRAY:
        json_array_foreach((json_t *)v, i, m) rec_seen_json(r, s, m, depth + 1);
        break;
    case JDOC_OBJECT:
        json_object_foreach((json_t *)v, k, m) rec_seen_json(r, s, m, depth + 1);
        break;
    case JDOC_NULL:
    case JDOC_BOOL:
        break;
    }
}

static size_t rec_count_values(const struct rec *r, const struct rec_ex *x)
{
    struct rec_seen s = {0};
    for (size_t i = 0; i < x->n_query; i++)
        rec_seen_text(r, &s, x->query[i].value);
    for (size_t i = 0; i < x->n_form; i++)
        rec_seen_text(r, &s, x->form[i].value);
    if (x->jreq)
        rec_seen_json(r, &s, jdoc_root(x->jreq), 0);
    return s.n;
}

/* ---- building ------------------------------------------------------------------------------ */

void rec_ex_build(struct rec *r)
{
    const struct har *h = r->har;
    bool *hop = apbot_xcalloc(h->n ? h->n : 1, sizeof(*hop));

    r->ex = apbot_xcalloc(h->n ? h->n : 1, sizeof(*r->ex));
    r->n_ex = 0;
    for (size_t i = 0; i < h->n; i++) {
        const struct har_entry *e = &h->entries[i];
        struct rec_ex *x = &r->ex[r->n_ex++];
        x->e = x->ans = e;
        if (hop[i]) {
            x->role = REC_ROLE_SKIPPED;
            continue;
        }
        /* Follow the redirect through the hops the HAR holds: the next entry for its target. */
        const struct har_entry *cur = e;
        for (size_t j = i + 1; cur->status >= 300 && cur->status < 400 && cur->redirect[0] &&
                               j < h->n && j <= i + 20 && x->hops < 20;
             j++) {
            char *to = rec_resolve(cur->url, cur->redirect);
            har_url_drop_session(to);
            if (!hop[j] && strcmp(h->entries[j].url, to) == 0) {
                hop[j] = true;
                cur = &h->entries[j];
                x->hops++;
            }
            free(to);
        }
        x->ans = cur;
    }
    free(hop);

    /* Parse what may matter, then find the ERP's origin: where the sample's values went. */
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < r->n_ex; i++) {
        struct rec_ex *x = &r->ex[i];
        if (x->role == REC_ROLE_SKIPPED)
            continue;
        if (x->e->status == 0 || x->e->from_cache || x->ans->from_cache || rec_is_static(x->e) ||
            (strcmp(x->e->method, "GET") == 0 && x->ans->status >= 400 && x->ans->status != 401)) {
            x->role = REC_ROLE_SKIPPED;
            continue;
        }
        rec_ex_parse(x);
        x->values = rec_count_values(r, x);
        if (best == SIZE_MAX || x->values > r->ex[best].values)
            best = i;
    }
    r->origin[0] = '\0';
    if (best != SIZE_MAX)
        (void)rec_origin_of(r->ex[best].e->url, r->origin, sizeof(r->origin));
    for (size_t i = 0; i < r->n_ex; i++) {
        struct rec_ex *x = &r->ex[i];
        if (x->role != REC_ROLE_SKIPPED && r->origin[0] && !rec_same_origin(x->e->url, r->origin))
            x->role = REC_ROLE_SKIPPED;
        if (x->role != REC_ROLE_SKIPPED && x->ans->body_len > r->max_answer)
            r->max_answer = x->ans->body_len;
    }
}

void rec_ex_free(struct rec *r)
{
    for (size_t i = 0; i < r->n_ex; i++) {
        struct rec_ex *x = &r->ex[i];
        free(x->path);
        free(x->form_xpath);
        rec_pairs_free(x->query, x->n_query);
        rec_pairs_free(x->form, x->n_form);
        jdoc_free(x->jreq);
        jdoc_free(x->jans);
        page_free(x->page);
        if (x->doc)
            xmlFreeDoc(x->doc);
        free(x->rule);
    }
    free(r->ex);
    r->ex = NULL;
    r->n_ex = 0;
}
