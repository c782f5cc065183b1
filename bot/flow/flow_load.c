/*
 * flow_load.c - loads a flow file into struct flow.
 *
 * Four passes over one libxml2 tree: parse (no network, no entity expansion, no DOCTYPE at
 * all, a bounded file size), RelaxNG validation against flows/flow.rng (embedded at build
 * time), the build of struct flow (typed attributes, numbers in their ranges, PCRE2 patterns
 * compiled, and the co-occurrence rules RelaxNG cannot say, such as "a rule needs a status, a
 * pattern or both"), then the semantic checks of flow_check.c on the built flow. Every
 * problem is collected as "file:line: message" into flow.c's problem list and reported at
 * once, sorted by line; libxml2's own diagnostics are captured through structured error
 * handlers, never printed. The loader calls the checks (flow_check.c) and the template grammar
 * (flow_template.c), never the other way round; the flow's names, defaults and flow_free() are
 * flow.c's, below all three.
 */
#include "apbot/flow.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/relaxng.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>

#include <jansson.h>

#include "apbot/buf.h"
#include "apbot/invoice.h"
#include "apbot/mem.h"
#include "apbot/text.h"
#include "web/jdoc.h"
#include "web/match.h"
#include "flow-int.h"

#define FLOW_FILE_MAX (1024 * 1024) /* bytes of a flow file: a hand-written file is far smaller */

/* ---- libxml2 diagnostics, captured instead of printed ------------------------------------ */

#if LIBXML_VERSION >= 21200
#define FLOW_XMLERR const xmlError
#else
#define FLOW_XMLERR xmlError
#endif

static void flow_xml_error(void *ctx, FLOW_XMLERR *e)
{
    struct flow_ctx *c = ctx;
    char msg[512];
    size_t n;
    long line;

    if (!e || e->level < XML_ERR_ERROR)
        return;
    snprintf(msg, sizeof(msg), "%s", e->message ? e->message : "XML error");
    n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        msg[--n] = '\0';
    line = e->line;
    if (line <= 0 && e->node)
        line = xmlGetLineNo((xmlNode *)e->node);
    /* RelaxNG repeats some complaints without a position; the positioned one is enough. */
    if (e->domain == XML_FROM_RELAXNGV && line <= 0)
        return;
    if (e->domain == XML_FROM_RELAXNGV)
        flow_problem(c, line, "schema: %s", msg);
    else
        flow_problem(c, line, "%s", msg);
}

/* ---- reading the validated tree ---------------------------------------------------------- */

static bool flow_is(const xmlNode *n, const char *name)
{
    return n && n->type == XML_ELEMENT_NODE && n->ns &&
           xmlStrEqual(n->ns->href, (const xmlChar *)FLOW_NS) &&
           xmlStrEqual(n->name, (const xmlChar *)name);
}

static xmlNode *flow_first(xmlNode *n)
{
    for (n = n ? n->children : NULL; n; n = n->next)
        if (n->type == XML_ELEMENT_NODE)
            return n;
    return NULL;
}

static xmlNode *flow_next(xmlNode *n)
{
    for (n = n ? n->next : NULL; n; n = n->next)
        if (n->type == XML_ELEMENT_NODE)
            return n;
    return NULL;
}

/*
 * The line where element n starts. libxml2 records the line where its start tag ends, which
 * for a tag written over several lines (<rule name=... NEWLINE >pattern</rule>) is not the
 * line a reader looks for. A start tag cannot contain a literal '<' (not even in attribute
 * values), so the nearest line at or before that one holding "<NAME" is where it starts.
 */
static int flow_line(const struct flow_ctx *c, const xmlNode *n)
{
    long l = xmlGetLineNo(n);
    size_t nl;

    if (l <= 0 || l >= INT32_MAX)
        return 0;
    nl = strlen((const char *)n->name);
    for (long k = l; k > 0 && k > l - 100 && (size_t)k <= c->n_lines; k--) {
        const char *line = c->text + c->line_starts[k - 1];
        const char *end =
            (size_t)k < c->n_lines ? c->text + c->line_starts[k] : c->text + c->text_len;
        for (const char *p = line; p + 1 + nl <= end; p++)
            if (*p == '<' && memcmp(p + 1, n->name, nl) == 0 &&
                (p + 1 + nl == end || strchr(" \t\r\n/>", p[1 + nl])))
                return (int)k;
    }
    return (int)l;
}

static char *flow_prop(const xmlNode *n, const char *name)
{
    xmlChar *v = xmlGetNoNsProp(n, (const xmlChar *)name);
    char *s;

    if (!v)
        return NULL;
    s = apbot_xstrdup((const char *)v);
    xmlFree(v);
    return s;
}

static bool flow_prop_true(const xmlNode *n, const char *name)
{
    char *v = flow_prop(n, name);
    bool yes = v && strcmp(v, "true") == 0;
    free(v);
    return yes;
}

/* Text content with surrounding ASCII whitespace trimmed; heap, never NULL. */
static char *flow_text(const xmlNode *n)
{
    xmlChar *v = xmlNodeGetContent(n);
    const char *s = v ? (const char *)v : "";
    size_t len;
    char *out;

    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++;
    len = strlen(s);
    while (len &&
           (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\n' || s[len - 1] == '\r'))
        len--;
    out = apbot_xstrndup(s, len);
    xmlFree(v);
    return out;
}

/*
 * Makes room for element n of an array with room for *cap; a problem (and false) past
 * FLOW_LIST_MAX elements, so that a huge file cannot grow an array without bound.
 */
static bool flow_room(struct flow_ctx *c, void **arr, size_t *cap, size_t n, size_t size, long line,
                      const char *what)
{
    if (apbot_grow(arr, cap, n, size, FLOW_LIST_MAX) != APBOT_OK) {
        flow_problem(c, line, "more than %d %s", FLOW_LIST_MAX, what);
        return false;
    }
    return true;
}

/* Compiles a pattern; NULL (and a problem) when it does not compile. */
static struct match_re *flow_pattern(struct flow_ctx *c, const char *pattern, long line,
                                     const char *what)
{
    struct match_re *re = NULL;
    char why[APBOT_ERR_LEN];

    if (match_compile(pattern, &re, why, sizeof(why)) != APBOT_OK) {
        flow_problem(c, line, "%s: bad pattern: %s", what, why);
        return NULL;
    }
    return re;
}

/* Fills *ret from a <field name=...>, <expect column=...> or <finished column=...> element. */
static void flow_read_field(struct flow_ctx *c, xmlNode *k, const char *name_attr,
                            struct flow_field *ret)
{
    char *option = flow_prop(k, "option");
    enum flow_option o = flow_option_from_name(option);

    ret->name = flow_prop(k, name_attr);
    ret->value = flow_text(k);
    ret->line = flow_line(c, k);
    ret->option = o == FLOW_OPTION__COUNT ? FLOW_OPTION_DEFAULT : o;
    free(option);
}

/* Appends every <field> from `first` on (up to the first non-field) to *fields. Returns the
 * first element that is not a <field>. */
static xmlNode *flow_build_fields(struct flow_ctx *c, xmlNode *first, struct flow_field **fields,
                                  size_t *n, size_t *cap)
{
    xmlNode *k;

    for (k = first; k && flow_is(k, "field"); k = flow_next(k)) {
        if (!flow_room(c, (void **)fields, cap, *n, sizeof(**fields), flow_line(c, k),
                       "fields in one form"))
            continue;
        memset(&(*fields)[*n], 0, sizeof(**fields));
        flow_read_field(c, k, "name", &(*fields)[(*n)++]);
    }
    return k;
}

static void flow_build_form(struct flow_ctx *c, xmlNode *n, struct flow_form *fm)
{
    size_t cap = 0, lcap = 0;
    xmlNode *k;

    fm->xpath = flow_prop(n, "xpath");
    fm->submit = flow_prop(n, "submit");
    fm->submit_value = flow_prop(n, "submit-value");
    fm->line = flow_line(c, n);
    /* fields, then optionally <lines> and more fields (the schema's order) */
    k = flow_build_fields(c, flow_first(n), &fm->fields, &fm->n_fields, &cap);
    if (k && flow_is(k, "lines")) {
        struct flow_lines *ln = &fm->lines;
        char *missing = flow_prop(k, "missing");
        enum flow_missing m = flow_missing_from_name(missing);

        ln->present = true;
        ln->line = flow_line(c, k);
        ln->missing = m == FLOW_MISSING__COUNT ? FLOW_MISSING_ERROR : m;
        free(missing);
        (void)flow_build_fields(c, flow_first(k), &ln->fields, &ln->n_fields, &lcap);
        (void)flow_build_fields(c, flow_next(k), &fm->fields, &fm->n_fields, &cap);
    }
}

/* A <json pointer="..." [absent]>pattern</json> condition of a rule, or a <success json="...">
 * attribute with the success element's pattern. */
static void flow_build_json_cond(struct flow_ctx *c, char *pointer, const char *pattern,
                                 bool absent, long line, const char *what, struct flow_json_cond *j)
{
    char w[200];

    j->pointer = pointer;
    j->absent = absent;
    j->line = (int)line;
    snprintf(w, sizeof(w), "%s json \"%s\"", what, pointer ? pointer : "");
    if (pointer && !jdoc_pointer_ok(pointer))
        flow_problem(c, line,
                     "%s: not a JSON pointer (RFC 6901: \"\" or \"/a/0/b\", \"~\" only as ~0 "
                     "or ~1)",
                     w);
    if (*pattern && absent)
        flow_problem(c, line, "%s: absent=\"true\" with a pattern (nothing to match)", w);
    else if (*pattern)
        j->re = flow_pattern(c, pattern, line, w);
}

static void flow_build_rule(struct flow_ctx *c, xmlNode *n, struct flow_rule *r)
{
    char *outcome = flow_prop(n, "outcome");
    char *url = flow_prop(n, "url");
    char *when = flow_prop(n, "when-missing");
    char *pattern = NULL;
    enum flow_outcome o = flow_outcome_from_name(outcome);
    enum flow_when w = when ? flow_when_from_name(when) : FLOW_WHEN_ALWAYS;
    char what[160];
    size_t cap = 0;
    bool success_json = false;

    r->name = flow_prop(n, "name");
    r->status = flow_prop(n, "status");
    r->raw = flow_prop_true(n, "raw");
    r->reason = flow_prop(n, "reason");
    r->line = flow_line(c, n);
    r->outcome = o == FLOW_OUT__COUNT ? FLOW_OUT_UNKNOWN : o;
    snprintf(what, sizeof(what), "rule '%s'", r->name ? r->name : "");
    if (o == FLOW_OUT__COUNT)
        flow_problem(c, r->line, "%s: unknown outcome '%s'", what, outcome ? outcome : "");
    r->when = w == FLOW_WHEN__COUNT ? FLOW_WHEN_ALWAYS : w;
    if (w == FLOW_WHEN__COUNT)
        flow_problem(c, r->line, "%s: when-missing=\"%s\": expected form, control, button or any",
                     what, when);
    for (xmlNode *k = flow_first(n); k; k = flow_next(k)) {
        if (!flow_is(k, "json") ||
            !flow_room(c, (void **)&r->json, &cap, r->n_json, sizeof(*r->json), flow_line(c, k),
                       "JSON conditions in one rule"))
            continue;
        struct flow_json_cond *j = &r->json[r->n_json++];
        char *jp = flow_text(k);
        memset(j, 0, sizeof(*j));
        flow_build_json_cond(c, flow_prop(k, "pointer"), jp, flow_prop_true(k, "absent"),
                             flow_line(c, k), what, j);
        /* a present value matched by a pattern needing text says more than a status alone */
        success_json = success_json || (j->re && !j->absent && !match_exec(j->re, "", 0, NULL));
        free(jp);
    }
    /* with JSON conditions the element's text is theirs, not a body pattern */
    pattern = r->n_json ? apbot_xstrdup("") : flow_text(n);
    if (*pattern)
        r->body = flow_pattern(c, pattern, r->line, what);
    if (url) {
        char uwhat[200];
        snprintf(uwhat, sizeof(uwhat), "%s url", what);
        r->url = flow_pattern(c, url, r->line, uwhat);
    }
    if (!*pattern && !r->status && !url && !r->n_json)
        flow_problem(c, r->line,
                     "%s: matches every answer; give it a status, a url, a pattern or more", what);
    else if ((o == FLOW_OUT_COMPLETED || o == FLOW_OUT_SAVED) && !*pattern && !url && !success_json)
        flow_problem(c, r->line,
                     "%s: a %s rule needs a pattern, a url or a JSON value it matches: a status "
                     "(or a value merely present) would be a catch-all success",
                     what, flow_outcome_name(o));
    free(outcome);
    free(url);
    free(when);
    free(pattern);
}

/* Builds the <rule> elements from `first` on; returns the first element that is not one. */
static xmlNode *flow_build_rules(struct flow_ctx *c, xmlNode *first, struct flow_rule **ret,
                                 size_t *ret_n)
{
    size_t cap = 0;
    xmlNode *k;

    for (k = first; k && flow_is(k, "rule"); k = flow_next(k)) {
        if (!flow_room(c, (void **)ret, &cap, *ret_n, sizeof(**ret), flow_line(c, k),
                       "rules in one place"))
            continue;
        memset(&(*ret)[*ret_n], 0, sizeof(**ret));
        flow_build_rule(c, k, &(*ret)[(*ret_n)++]);
    }
    return k;
}

/* A positive number attribute in [min, max] into *ret (left as is when absent). */
static void flow_number(struct flow_ctx *c, xmlNode *n, const char *attr, long min, long max,
                        long *ret, const char *what)
{
    char *v = flow_prop(n, attr);
    long x = 0;

    if (!v)
        return;
    if (!flow_parse_count(v, strlen(v), min, max, &x))
        flow_problem(c, flow_line(c, n), "%s: %s '%s' out of range %ld..%ld", what, attr, v, min,
                     max);
    else
        *ret = x;
    free(v);
}

/* The formatting attributes and the columns of a <table> or a <detail>. */
static void flow_build_table(struct flow_ctx *c, xmlNode *n, struct flow_table *t)
{
    char *dec = flow_prop(n, "amount-decimal");
    char *grp = flow_prop(n, "amount-group");
    size_t cap = 0;

    t->line = flow_line(c, n);
    t->rows = flow_prop(n, "rows");
    t->pointer = flow_prop(n, "pointer");
    t->json = t->pointer != NULL;
    if (t->pointer && !jdoc_pointer_ok(t->pointer))
        flow_problem(c, t->line, "table pointer \"%s\": not a JSON pointer (RFC 6901)", t->pointer);
    t->empty = flow_prop(n, "empty");
    t->next = flow_prop(n, "next");
    t->screen = flow_prop(n, "screen");
    flow_number(c, n, "max-rows", 1, 100000, &t->max_rows, "table");
    t->date_format = flow_prop(n, "date-format");
    t->amount_decimal = dec && *dec ? dec[0] : '.';
    t->amount_group = grp && *grp ? grp[0] : '\0';
    free(dec);
    free(grp);
    if (!t->date_format)
        t->date_format = apbot_xstrdup("%Y-%m-%d");
    for (xmlNode *k = flow_first(n); k; k = flow_next(k)) {
        struct flow_column *col;

        if (!flow_is(k, "column"))
            continue;
        if (!flow_room(c, (void **)&t->cols, &cap, t->n_cols, sizeof(*t->cols), flow_line(c, k),
                       "columns in one table"))
            break;
        col = &t->cols[t->n_cols++];
        col->name = flow_prop(k, "name");
        col->xpath = flow_prop(k, "xpath");
        col->pointer = flow_prop(k, "pointer");
        col->line = flow_line(c, k);
        if (col->pointer && !jdoc_pointer_ok(col->pointer))
            flow_problem(c, col->line, "column '%s': pointer \"%s\" is not a JSON pointer",
                         col->name ? col->name : "", col->pointer);
    }
}

/* A <send>: its URL, method, and a JSON body or form fields. */
static void flow_build_send(struct flow_ctx *c, xmlNode *n, struct flow_send *s)
{
    char *method = flow_prop(n, "method");
    size_t cap = 0;

    s->present = true;
    s->url = flow_prop(n, "url");
    s->line = flow_line(c, n);
    for (xmlNode *k = flow_first(n); k; k = flow_next(k)) {
        if (flow_is(k, "json")) {
            char *text = flow_text(k);
            s->json = flow_json_compile(c, text, flow_line(c, k), "send");
            free(text);
        }
    }
    (void)flow_build_fields(c, flow_first(n), &s->fields, &s->n_fields, &cap);
    s->post = method ? strcmp(method, "POST") == 0 : (s->json || s->n_fields);
    if (!s->post && (s->json || s->n_fields))
        flow_problem(c, s->line,
                     "send: method=\"GET\" with a body (a GET carries its values in "
                     "the URL)");
    free(method);
}

/* The <send> among n's children, if any. */
static void flow_find_send(struct flow_ctx *c, xmlNode *n, struct flow_send *s)
{
    for (xmlNode *k = flow_first(n); k; k = flow_next(k))
        if (flow_is(k, "send"))
            flow_build_send(c, k, s);
}

/* A <capture>: a (?<NAME>...) pattern, or a JSON pointer (and optionally a pattern on its
 * value's text); secret marks a session token. */
static void flow_build_capture(struct flow_ctx *c, xmlNode *r, struct flow_capture *cp)
{
    char *pat = flow_text(r), what[160];

    memset(cp, 0, sizeof(*cp));
    cp->name = flow_prop(r, "name");
    cp->raw = flow_prop_true(r, "raw");
    cp->secret = flow_prop_true(r, "secret");
    cp->pointer = flow_prop(r, "json");
    cp->line = flow_line(c, r);
    snprintf(what, sizeof(what), "capture '%s'", cp->name ? cp->name : "");
    if (cp->pointer && !jdoc_pointer_ok(cp->pointer))
        flow_problem(c, cp->line, "%s: json \"%s\" is not a JSON pointer (RFC 6901)", what,
                     cp->pointer);
    if (*pat)
        cp->re = flow_pattern(c, pat, cp->line, what);
    else if (!cp->pointer)
        flow_problem(c, cp->line,
                     "%s: empty pattern (it needs a (?<%s>...) group, or json=\"...\")", what,
                     cp->name ? cp->name : "name");
    free(pat);
}

/* Appends the <capture> children of n to *caps. */
static void flow_build_captures(struct flow_ctx *c, xmlNode *n, struct flow_capture **caps,
                                size_t *n_caps)
{
    size_t cap = 0;
    for (xmlNode *k = flow_first(n); k; k = flow_next(k)) {
        if (!flow_is(k, "capture") || !flow_room(c, (void **)caps, &cap, *n_caps, sizeof(**caps),
                                                 flow_line(c, k), "captures in one place"))
            continue;
        flow_build_capture(c, k, &(*caps)[(*n_caps)++]);
    }
}

/* A <success>: status, JSON condition and pattern, at least one given. */
static void flow_build_success(struct flow_ctx *c, xmlNode *k, char **ret_status,
                               struct flow_json_cond *ret_json, struct match_re **ret_re,
                               bool *ret_raw, const char *what)
{
    char *pat = flow_text(k);
    char *json = flow_prop(k, "json");

    *ret_status = flow_prop(k, "status");
    *ret_raw = flow_prop_true(k, "raw");
    if (json) {
        flow_build_json_cond(c, json, pat, false, flow_line(c, k), what, ret_json);
    } else if (*pat) {
        *ret_re = flow_pattern(c, pat, flow_line(c, k), what);
    }
    if (!*pat && !*ret_status && !json)
        flow_problem(c, flow_line(c, k),
                     "%s: give a status, a pattern, a json pointer or more (what does a good "
                     "answer look like?)",
                     what);
    free(pat);
}

/* A <session-expired> marker: status, redirect and body, all that are given must match. */
static void flow_build_marker(struct flow_ctx *c, xmlNode *k, struct flow_marker *m)
{
    char *redirect = flow_prop(k, "redirect");
    char *pat = flow_text(k);

    m->line = flow_line(c, k);
    m->status = flow_prop(k, "status");
    m->raw = flow_prop_true(k, "raw");
    if (redirect)
        m->redirect = flow_pattern(c, redirect, m->line, "session-expired redirect");
    if (*pat)
        m->body = flow_pattern(c, pat, m->line, "session-expired");
    if (!m->status && !redirect && !*pat)
        flow_problem(c, m->line,
                     "session-expired: give a status, a redirect or a pattern (an empty marker "
                     "would match every answer)");
    free(redirect);
    free(pat);
}

static void flow_build_erp(struct flow_ctx *c, xmlNode *n)
{
    struct flow *f = c->f;
    size_t cap = 0, hcap = 0;

    f->base_url = flow_prop(n, "base-url");
    f->erp_line = flow_line(c, n);
    f->tls_verify = true;
    for (xmlNode *k = flow_first(n); k; k = flow_next(k)) {
        if (flow_is(k, "tls")) {
            char *verify = flow_prop(k, "verify");
            f->ca_file = flow_prop(k, "ca-file");
            f->tls_verify = !(verify && strcmp(verify, "false") == 0);
            if (!f->tls_verify && f->ca_file)
                flow_problem(c, flow_line(c, k),
                             "tls: verify=\"false\" and ca-file contradict each other");
            free(verify);
        } else if (flow_is(k, "http-basic")) {
            f->basic_auth = true;
        } else if (flow_is(k, "json-values")) {
            char *dec = flow_prop(k, "decimal"), *date = flow_prop(k, "date");
            f->json_decimal = !dec                         ? FLOW_JSON_DECIMAL_STRING
                              : strcmp(dec, "number") == 0 ? FLOW_JSON_DECIMAL_NUMBER
                              : strcmp(dec, "tagged") == 0 ? FLOW_JSON_DECIMAL_TAGGED
                                                           : FLOW_JSON_DECIMAL_STRING;
            f->json_date =
                date && strcmp(date, "tagged") == 0 ? FLOW_JSON_DATE_TAGGED : FLOW_JSON_DATE_ISO;
            free(dec);
            free(date);
        } else if (flow_is(k, "header")) {
            if (!flow_room(c, (void **)&f->headers, &hcap, f->n_headers, sizeof(*f->headers),
                           flow_line(c, k), "<header> elements"))
                continue;
            struct flow_header *h = &f->headers[f->n_headers++];
            char *enc = flow_prop(k, "encode");
            memset(h, 0, sizeof(*h));
            h->name = flow_prop(k, "name");
            h->prefix = flow_prop(k, "prefix");
            h->value = flow_text(k);
            h->base64 = enc && strcmp(enc, "base64") == 0;
            h->line = flow_line(c, k);
            free(enc);
        } else if (flow_is(k, "session-expired")) {
            if (!flow_room(c, (void **)&f->session_expired, &cap, f->n_session_expired,
                           sizeof(*f->session_expired), flow_line(c, k),
                           "<session-expired> markers"))
                continue;
            memset(&f->session_expired[f->n_session_expired], 0, sizeof(*f->session_expired));
            flow_build_marker(c, k, &f->session_expired[f->n_session_expired++]);
        }
    }
}

static void flow_build_login(struct flow_ctx *c, xmlNode *n)
{
    struct flow_login *l = &c->f->login;
    size_t ccap = 0, tcap = 0;
    xmlNode *k;

    l->present = true;
    l->line = flow_line(c, n);
    l->get = flow_prop(n, "get");
    l->method = flow_prop(n, "method");
    for (k = flow_first(n); k && !flow_is(k, "rule"); k = flow_next(k)) {
        if (flow_is(k, "form")) {
            l->has_form = true;
            flow_build_form(c, k, &l->form);
        } else if (flow_is(k, "send")) {
            flow_build_send(c, k, &l->send);
        } else if (flow_is(k, "success")) {
            flow_build_success(c, k, &l->success_status, &l->success_json, &l->success,
                               &l->success_raw, "login success");
        } else if (flow_is(k, "capture")) {
            if (!flow_room(c, (void **)&l->captures, &ccap, l->n_captures, sizeof(*l->captures),
                           flow_line(c, k), "captures of the login"))
                continue;
            flow_build_capture(c, k, &l->captures[l->n_captures++]);
        }
    }
    if (l->has_form && l->method)
        flow_problem(c, l->line,
                     "login: method=\"%s\" is for a login without <form> (a form says its own "
                     "method)",
                     l->method);
    if (l->send.present && (l->get || l->method))
        flow_problem(c, l->line,
                     "login: get and method are for a login page or request; with <send> the "
                     "request is composed there");
    if (!l->send.present && !l->get)
        flow_problem(c, l->line, "login: give get=\"URL\" (the login page or request) or <send>");
    if (!l->has_form && !l->send.present && !l->method)
        l->method = apbot_xstrdup("GET");
    k = flow_build_rules(c, k, &l->rules, &l->n_rules);
    for (; k; k = flow_next(k)) {
        if (!flow_is(k, "then") || !flow_room(c, (void **)&l->then, &tcap, l->n_then,
                                              sizeof(*l->then), flow_line(c, k), "<then> calls"))
            continue;
        struct flow_call *t = &l->then[l->n_then++];
        memset(t, 0, sizeof(*t));
        t->name = flow_prop(k, "name");
        t->line = flow_line(c, k);
        flow_find_send(c, k, &t->send);
        for (xmlNode *s = flow_first(k); s; s = flow_next(s))
            if (flow_is(s, "success"))
                flow_build_success(c, s, &t->success_status, &t->success_json, &t->success,
                                   &t->success_raw, "then success");
        flow_build_captures(c, k, &t->captures, &t->n_captures);
    }
}

static void flow_build_lookup(struct flow_ctx *c, xmlNode *n)
{
    struct flow_lookup *lk = &c->f->lookup;
    size_t cap = 0;
    long v;

    lk->line = flow_line(c, n);
    lk->get = flow_prop(n, "get");
    lk->key_column = flow_prop(n, "key-column");
    lk->currency = flow_prop(n, "currency");
    v = 5;
    flow_number(c, n, "max-pages", 1, 100, &v, "lookup");
    lk->max_pages = (int)v;
    v = 10;
    flow_number(c, n, "max-candidates", 1, 100, &v, "lookup");
    lk->max_candidates = (int)v;
    for (xmlNode *k = flow_first(n); k; k = flow_next(k)) {
        if (flow_is(k, "table")) {
            flow_build_table(c, k, &lk->table);
        } else if (flow_is(k, "send")) {
            flow_build_send(c, k, &lk->send);
        } else if (flow_is(k, "detail")) {
            lk->detail.present = true;
            lk->detail.get = flow_prop(k, "get");
            flow_find_send(c, k, &lk->detail.send);
            flow_build_table(c, k, &lk->detail.table);
            /* a detail's columns say how its answer is read: JSON when they have pointers */
            lk->detail.table.json =
                lk->detail.table.n_cols > 0 && lk->detail.table.cols[0].pointer != NULL;
        } else if (flow_is(k, "expect")) {
            if (!flow_room(c, (void **)&lk->expect, &cap, lk->n_expect, sizeof(*lk->expect),
                           flow_line(c, k), "<expect> elements"))
                continue;
            memset(&lk->expect[lk->n_expect], 0, sizeof(*lk->expect));
            flow_read_field(c, k, "column", &lk->expect[lk->n_expect++]);
        } else if (flow_is(k, "finished")) {
            lk->has_finished = true;
            flow_read_field(c, k, "column", &lk->finished);
        }
    }
}

/* The <compare-amount> children of step element n. */
static void flow_build_compares(struct flow_ctx *c, xmlNode *n, struct flow_step *s)
{
    size_t cap = 0;
    for (xmlNode *k = flow_first(n); k; k = flow_next(k)) {
        if (!flow_is(k, "compare-amount") ||
            !flow_room(c, (void **)&s->compares, &cap, s->n_compares, sizeof(*s->compares),
                       flow_line(c, k), "compare-amount elements in one step"))
            continue;
        struct flow_compare *cm = &s->compares[s->n_compares++];
        char *dec = flow_prop(k, "amount-decimal");
        char *grp = flow_prop(k, "amount-group");
        memset(cm, 0, sizeof(*cm));
        cm->capture = flow_prop(k, "capture");
        cm->equals = flow_prop(k, "equals");
        cm->amount_decimal = dec && *dec ? dec[0] : '.';
        cm->amount_group = grp && *grp ? grp[0] : '\0';
        cm->line = flow_line(c, k);
        free(dec);
        free(grp);
    }
}

static void flow_build_step(struct flow_ctx *c, xmlNode *k, struct flow_step *s)
{
    char *repeat = flow_prop(k, "repeat");
    xmlNode *r;

    s->name = flow_prop(k, "name");
    s->get = flow_prop(k, "get");
    s->line = flow_line(c, k);
    s->commits = flow_prop_true(k, "commits");
    s->repeat_until_lines = repeat && strcmp(repeat, "until-lines") == 0;
    free(repeat);
    char *skip = flow_prop(k, "skip");
    s->skip_known = skip && strcmp(skip, "when-known") == 0;
    free(skip);
    for (r = flow_first(k); r && !flow_is(r, "form") && !flow_is(r, "send"); r = flow_next(r))
        ;
    if (r && flow_is(r, "form"))
        flow_build_form(c, r, &s->form);
    else if (r)
        flow_build_send(c, r, &s->send);
    if (s->send.present && s->get)
        flow_problem(c, s->line,
                     "step '%s': get fetches a page to fill a <form>; a <send> step sends its "
                     "request as it is (drop get)",
                     s->name ? s->name : "");
    (void)flow_build_rules(c, r ? flow_next(r) : NULL, &s->rules, &s->n_rules);
    flow_build_captures(c, k, &s->captures, &s->n_captures);
    flow_build_compares(c, k, s);
}

static void flow_build_post(struct flow_ctx *c, xmlNode *n)
{
    struct flow *f = c->f;
    size_t cap = 0;

    f->post_line = flow_line(c, n);
    for (xmlNode *k = flow_first(n); k; k = flow_next(k)) {
        if (flow_is(k, "step")) {
            if (!flow_room(c, (void **)&f->steps, &cap, f->n_steps, sizeof(*f->steps),
                           flow_line(c, k), "steps"))
                continue;
            memset(&f->steps[f->n_steps], 0, sizeof(*f->steps));
            flow_build_step(c, k, &f->steps[f->n_steps++]);
        } else if (flow_is(k, "outcomes")) {
            f->outcomes_line = flow_line(c, k);
            (void)flow_build_rules(c, flow_first(k), &f->outcomes, &f->n_outcomes);
        }
    }
}

static void flow_build_list(struct flow_ctx *c, xmlNode *n)
{
    struct flow_list *ls = &c->f->list;
    char *by = flow_prop(n, "by");
    enum flow_list_by b = flow_list_by_from_name(by);
    long v = 100;

    ls->line = flow_line(c, n);
    ls->get = flow_prop(n, "get");
    ls->currency = flow_prop(n, "currency");
    flow_number(c, n, "max-pages", 1, 10000, &v, "list");
    ls->max_pages = (int)v;
    flow_number(c, n, "page-size", 1, 100000, &ls->page_size, "list");
    ls->by = b == FLOW_LIST_BY__COUNT ? FLOW_LIST_BY_BOOKED : b;
    free(by);
    for (xmlNode *k = flow_first(n); k; k = flow_next(k)) {
        if (flow_is(k, "table"))
            flow_build_table(c, k, &ls->table);
        else if (flow_is(k, "send"))
            flow_build_send(c, k, &ls->send);
    }
}

static void flow_build_resolve(struct flow_ctx *c, xmlNode *n, struct flow_resolve *r)
{
    memset(r, 0, sizeof(*r));
    r->name = flow_prop(n, "name");
    r->code = flow_prop(n, "code");
    r->get = flow_prop(n, "get");
    r->match_column = flow_prop(n, "match-column");
    r->max_entries = 10000;
    r->line = flow_line(c, n);
    flow_number(c, n, "max-entries", 1, 1000000, &r->max_entries, "resolve");
    if (!r->match_column)
        r->match_column = apbot_xstrdup("code");
    r->from_step = flow_prop(n, "from-step");
    size_t ccap = 0;
    for (xmlNode *k = flow_first(n); k; k = flow_next(k)) {
        if (flow_is(k, "send")) {
            flow_build_send(c, k, &r->send);
        } else if (flow_is(k, "table")) {
            flow_build_table(c, k, &r->table);
        } else if (flow_is(k, "control") &&
                   flow_room(c, (void **)&r->table.cols, &ccap, r->table.n_cols,
                             sizeof(*r->table.cols), flow_line(c, k), "controls of one resolve")) {
            /* learnt from a step: a column per control, read on that step's form */
            struct flow_column *col = &r->table.cols[r->table.n_cols++];
            memset(col, 0, sizeof(*col));
            col->name = flow_prop(k, "name");
            col->line = flow_line(c, k);
        }
    }
    if (r->from_step)
        r->table.line = r->line;
    else if (!r->get == !r->send.present)
        flow_problem(c, r->line, "resolve '%s': give get=\"URL\" or <send>, one of the two",
                     r->name ? r->name : "");
}

static void flow_policy_num(struct flow_ctx *c, xmlNode *n, const char *attr, long min, long max,
                            long *ret, const char *hint)
{
    char *s = flow_prop(n, attr);
    const char *p = s;
    long v = 0;
    size_t len;

    if (!s)
        return;
    while (*p == ' ' || *p == '+')
        p++;
    len = strlen(p);
    while (len && p[len - 1] == ' ')
        len--;
    /* Leading zeros would only hide typos: trim them, keep one digit. */
    while (len > 1 && *p == '0') {
        p++;
        len--;
    }
    if (!flow_parse_count(p, len, min, max, &v))
        flow_problem(c, flow_line(c, n), "policy %s=\"%s\": out of range %ld..%ld%s", attr, s, min,
                     max, hint ? hint : "");
    else
        *ret = v;
    free(s);
}

static void flow_build_policy(struct flow_ctx *c, xmlNode *n)
{
    struct flow_policy *p = &c->f->policy;
    long v;

    c->f->policy_line = n ? flow_line(c, n) : 0;
    if (!n)
        return;
    flow_policy_num(c, n, "connect-timeout-ms", 100, 600000, &p->connect_timeout_ms, NULL);
    flow_policy_num(c, n, "timeout-ms", 100, 3600000, &p->timeout_ms, NULL);
    flow_policy_num(c, n, "settle-ms", 0, 86400000, &p->settle_ms, NULL);
    v = p->max_posts;
    flow_policy_num(c, n, "max-posts", 1, 10, &v, NULL);
    p->max_posts = (int)v;
    v = p->max_cycles;
    flow_policy_num(c, n, "max-cycles", 1, 1000, &v, NULL);
    p->max_cycles = (int)v;
    v = p->max_attempts;
    flow_policy_num(c, n, "max-attempts", 1, 1000, &v, NULL);
    p->max_attempts = (int)v;
    v = p->max_sessions;
    flow_policy_num(c, n, "max-sessions", 1, 64, &v, NULL);
    p->max_sessions = (int)v;
    v = p->key_length;
    flow_policy_num(c, n, "key-length", (long)strlen(INVOICE_KEY_PREFIX) + INVOICE_KEY_MIN_DIGITS,
                    INVOICE_KEY_LEN, &v,
                    " (\"" INVOICE_KEY_PREFIX "\" plus at least 12 digest characters, at most the "
                    "full key)");
    p->key_length = (int)v;
    flow_policy_num(c, n, "backoff-base-ms", 1, 3600000, &p->backoff_base_ms, NULL);
    flow_policy_num(c, n, "backoff-cap-ms", 1, 86400000, &p->backoff_cap_ms, NULL);
    flow_policy_num(c, n, "lease-ms", 1000, 86400000, &p->lease_ms, NULL);
    v = (long)p->max_body;
    flow_policy_num(c, n, "max-body-bytes", 4096, 256L * 1024 * 1024, &v, NULL);
    p->max_body = (size_t)v;
    flow_policy_num(c, n, "max-redirects", 0, 20, &p->max_redirects, NULL);
}

static void flow_build(struct flow_ctx *c, xmlNode *root)
{
    struct flow *f = c->f;
    xmlNode *policy = NULL;
    size_t rcap = 0;

    f->name = flow_prop(root, "name");
    f->line = flow_line(c, root);
    f->policy = flow_policy_default();
    for (xmlNode *k = flow_first(root); k; k = flow_next(k)) {
        if (flow_is(k, "erp"))
            flow_build_erp(c, k);
        else if (flow_is(k, "login"))
            flow_build_login(c, k);
        else if (flow_is(k, "lookup"))
            flow_build_lookup(c, k);
        else if (flow_is(k, "resolve") &&
                 flow_room(c, (void **)&f->resolves, &rcap, f->n_resolves, sizeof(*f->resolves),
                           flow_line(c, k), "<resolve> elements"))
            flow_build_resolve(c, k, &f->resolves[f->n_resolves++]);
        else if (flow_is(k, "post"))
            flow_build_post(c, k);
        else if (flow_is(k, "list"))
            flow_build_list(c, k);
        else if (flow_is(k, "policy"))
            policy = k;
    }
    flow_build_policy(c, policy);
}

/* ---- loading ----------------------------------------------------------------------------- */

static int flow_validate(struct flow_ctx *c, xmlDoc *doc)
{
    xmlRelaxNGParserCtxtPtr pctx = NULL;
    xmlRelaxNGPtr schema = NULL;
    xmlRelaxNGValidCtxtPtr vctx = NULL;
    struct flow_ctx sc = {.path = "flow.rng"};
    int rc = APBOT_OK;

    pctx = xmlRelaxNGNewMemParserCtxt((const char *)flow_schema_rng, (int)flow_schema_rng_len);
    if (!pctx)
        abort(); /* the schema is built in: libxml2 fails here only on out-of-memory */
    xmlRelaxNGSetParserStructuredErrors(pctx, flow_xml_error, &sc);
    schema = xmlRelaxNGParse(pctx);
    if (!schema) {
        flow_problem(c, 0, "internal error: the built-in schema does not compile: %s",
                     sc.n_kept ? sc.probs[0].text : "");
        rc = APBOT_E_BUG;
        goto out;
    }
    vctx = xmlRelaxNGNewValidCtxt(schema);
    if (!vctx)
        abort(); /* libxml2 fails here only on out-of-memory (mem.h's policy) */
    xmlRelaxNGSetValidStructuredErrors(vctx, flow_xml_error, c);
    if (xmlRelaxNGValidateDoc(vctx, doc) != 0) {
        if (c->n_probs == 0)
            flow_problem(c, 0, "schema: the document does not match flows/flow.rng");
        rc = APBOT_E_PARSE;
    }
out:
    xmlRelaxNGFreeValidCtxt(vctx);
    xmlRelaxNGFree(schema);
    xmlRelaxNGFreeParserCtxt(pctx);
    flow_problems_free(&sc);
    return rc;
}

/*
 * Open decisions: a draft `apbot flow record` wrote carries a <todo> (in the flow's namespace)
 * wherever it could not decide (docs/recording.md). A flow with one never loads, whatever else
 * it holds: each is a problem naming its line, its id and what to decide, and the schema is
 * not applied until none is left (its complaints about a <todo> would hide what matters).
 * Returns the number found.
 */
#define FLOW_TODO_TEXT_MAX 400 /* bytes of a <todo>'s text repeated in its problem */

static size_t flow_todos(struct flow_ctx *c, const xmlNode *n, int depth)
{
    size_t found = 0;

    for (; n && depth < 256; n = n->next) {
        if (n->type != XML_ELEMENT_NODE)
            continue;
        if (flow_is(n, "todo")) {
            xmlChar *id = xmlGetProp(n, (const xmlChar *)"id");
            xmlChar *text = xmlNodeGetContent(n);
            char what[FLOW_TODO_TEXT_MAX + 8];
            size_t w = 0;
            bool space = false;
            /* one line: white space runs collapsed, cut at a character boundary */
            for (const xmlChar *t = text; t && *t && w < FLOW_TODO_TEXT_MAX + 4; t++) {
                if (*t == ' ' || *t == '\t' || *t == '\n' || *t == '\r') {
                    space = w > 0;
                    continue;
                }
                if (space)
                    what[w++] = ' ';
                space = false;
                what[w++] = (char)*t;
            }
            what[w] = '\0';
            text_cut_utf8(what, FLOW_TODO_TEXT_MAX);
            w = strlen(what);
            flow_problem(c, xmlGetLineNo((xmlNode *)n),
                         "open decision%s%s%s: %s (decide, put what you decided in place of this "
                         "<todo>, check again)",
                         id ? " '" : "", id ? (const char *)id : "", id ? "'" : "",
                         w ? what : "a <todo> without text");
            xmlFree(id);
            xmlFree(text);
            found++;
            continue;
        }
        found += flow_todos(c, n->children, depth + 1);
    }
    return found;
}

/* Reads the whole file, at most FLOW_FILE_MAX bytes, into *ret (heap). */
static int flow_read_file(const char *path, struct apbot_buf *ret, char *err, size_t errlen)
{
    FILE *fp = fopen(path, "rb");
    char chunk[8192];
    size_t n;
    int rc = APBOT_OK;

    if (!fp)
        return apbot_fail(err, errlen, APBOT_E_IO, "%s: cannot open: %s", path, strerror(errno));
    while ((n = fread(chunk, 1, sizeof(chunk), fp)) > 0) {
        if (apbot_buf_add(ret, chunk, n) != APBOT_OK) {
            rc = apbot_fail(err, errlen, APBOT_E_LIMIT, "%s: larger than %d bytes: not a flow",
                            path, FLOW_FILE_MAX);
            break;
        }
    }
    if (rc == APBOT_OK && ferror(fp))
        rc = apbot_fail(err, errlen, APBOT_E_IO, "%s: cannot read: %s", path, strerror(errno));
    fclose(fp);
    return rc;
}

/* Where each line of the file starts, for flow_line(). */
static void flow_index_lines(struct flow_ctx *c, const struct apbot_buf *text)
{
    size_t n = 1, k = 0;

    c->text = apbot_buf_str(text);
    c->text_len = text->len;
    for (size_t i = 0; i < text->len; i++)
        n += c->text[i] == '\n';
    c->line_starts = apbot_xmalloc(n * sizeof(*c->line_starts));
    c->line_starts[k++] = 0;
    for (size_t i = 0; i < text->len; i++)
        if (c->text[i] == '\n')
            c->line_starts[k++] = i + 1;
    c->n_lines = n;
}

int flow_load(const char *path, struct flow **ret, char *err, size_t errlen)
{
    struct flow_ctx c = {.path = path ? path : "(null)"};
    xmlStructuredErrorFunc old = xmlStructuredError;
    void *old_ctx = xmlStructuredErrorContext;
    struct apbot_buf text;
    xmlDoc *doc = NULL;
    int rc;

    if (!path || !ret)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "no flow file");
    if (err && errlen)
        err[0] = '\0';
    apbot_buf_init(&text, FLOW_FILE_MAX);
    rc = flow_read_file(path, &text, err, errlen);
    if (rc != APBOT_OK) {
        apbot_buf_done(&text);
        return rc;
    }
    /* No network, no entity substitution, no DTD loading: a flow is plain data. */
    xmlSetStructuredErrorFunc(&c, flow_xml_error);
    doc = xmlReadMemory(apbot_buf_str(&text), (int)text.len, path, NULL,
                        XML_PARSE_NONET | XML_PARSE_NOCDATA);
    xmlSetStructuredErrorFunc(old_ctx, old);
    flow_index_lines(&c, &text);
    if (!doc) {
        if (c.n_probs == 0)
            flow_problem(&c, 0, "cannot read the file");
        rc = APBOT_E_PARSE;
        goto out;
    }
    if (doc->intSubset || doc->extSubset) {
        long dl = xmlGetLineNo((xmlNode *)(doc->intSubset ? doc->intSubset : doc->extSubset));
        flow_problem(&c, dl > 0 ? dl : 0, "a flow must not have a DOCTYPE (no DTDs, no entities)");
        rc = APBOT_E_PARSE;
        goto out;
    }
    if (c.n_probs) { /* recoverable parse errors still mean a broken file */
        rc = APBOT_E_PARSE;
        goto out;
    }
    if (flow_todos(&c, xmlDocGetRootElement(doc), 0) > 0) {
        rc = APBOT_E_INVAL;
        goto out;
    }
    rc = flow_validate(&c, doc);
    if (rc != APBOT_OK)
        goto out;
    c.f = apbot_xcalloc(1, sizeof(*c.f));
    c.f->path = apbot_xstrdup(path);
    flow_build(&c, xmlDocGetRootElement(doc));
    flow_check(&c);
    if (c.n_probs) {
        rc = APBOT_E_INVAL;
        goto out;
    }
    *ret = c.f;
    c.f = NULL;
out:
    if (rc != APBOT_OK)
        flow_problems_out(&c, err, errlen);
    flow_free(c.f);
    xmlFreeDoc(doc);
    flow_problems_free(&c);
    free(c.sessions);
    free(c.line_starts);
    apbot_buf_done(&text);
    return rc;
}
