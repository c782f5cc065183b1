/*
 * page.c - an ERP page parsed with libxml2's HTML parser, and XPath queries on it (whole
 * page, or relative to each result row). The form a browser would submit is page_form.c's,
 * the page's text (the excerpt, and the rule text outcome rules see) page_text.c's.
 *
 * Pages are untrusted: the parser runs with HTML_PARSE_NONET and recovery on, never prints
 * (its per-thread error handlers are swapped for silent ones while it runs, then restored)
 * and never fails on bad markup - any body yields a page, at worst an empty one, on which
 * every query finds nothing. Walks over the tree are iterative, so deep nesting cannot
 * exhaust the stack. libxml2 2.9 is thread-safe once xmlInitParser has run (done once here);
 * each thread queries through an XPath context of its own, so several threads may use
 * different pages at the same time. One page is used by one thread at a time. A page's tree
 * lives in an arena (xmlarena.h) made while it is parsed and dropped with the page. Plain
 * pages are built by page_fast.c instead of libxml2's parser, into the same tree
 * (page-int.h); the plain location paths flows use are evaluated by page_path.c instead of
 * by libxml2's XPath, into the same node sets. Deciding what a page means (outcome rules) is
 * match's job, not this module's.
 */
#include "web/page.h"

#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/HTMLparser.h>
#include <libxml/HTMLtree.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/valid.h>
#include <libxml/xmlerror.h>
#include <libxml/xpath.h>

#include "apbot/mem.h"
#include "web/xmlarena.h"
#include "page-int.h"

#define PAGE_RAW_KEEP 1024 /* bytes of the raw body kept for the excerpt of a textless page */

static pthread_once_t page_once = PTHREAD_ONCE_INIT;

static void page_init_once(void)
{
    xmlInitParser();
}

/* ---- silence: libxml2 reports some errors through per-thread global handlers ---- */

static void page_silent_generic(void *ctx, const char *msg, ...)
{
    (void)ctx;
    (void)msg;
}

static void page_silent_structured(void *ctx, xmlErrorPtr error)
{
    (void)ctx;
    (void)error;
}

void page_quiet_begin(struct page_quiet *q)
{
    pthread_once(&page_once, page_init_once);
    q->generic = xmlGenericError;
    q->generic_ctx = xmlGenericErrorContext;
    q->structured = xmlStructuredError;
    q->structured_ctx = xmlStructuredErrorContext;
    xmlSetGenericErrorFunc(NULL, page_silent_generic);
    xmlSetStructuredErrorFunc(NULL, page_silent_structured);
}

void page_quiet_end(const struct page_quiet *q)
{
    xmlSetGenericErrorFunc(q->generic_ctx, q->generic);
    xmlSetStructuredErrorFunc(q->structured_ctx, q->structured);
}

/* ---- small helpers ---- */

/* Heap copy of s without leading/trailing white space (ASCII and no-break space). */
static char *page_trim_dup(const char *s)
{
    size_t sl;
    while (*s && page_is_space(s, &sl))
        s += sl;
    size_t n = strlen(s);
    while (n > 0) {
        if (page_is_space(s + n - 1, &sl) && sl == 1)
            n--;
        else if (n >= 2 && (unsigned char)s[n - 2] == 0xC2 && (unsigned char)s[n - 1] == 0xA0)
            n -= 2;
        else
            break;
    }
    char *out = apbot_xmalloc(n + 1);
    memcpy(out, s, n);
    out[n] = '\0';
    return out;
}

/* ---- parsing ---- */

void page_set_err(char *err, size_t errlen, const char *what, const char *msg)
{
    if (!err || !errlen)
        return;
    char clean[256];
    size_t j = 0;
    for (const char *m = msg ? msg : "error"; *m && j + 1 < sizeof(clean); m++)
        clean[j++] = (*m == '\n' || *m == '\r') ? ' ' : *m;
    while (j > 0 && clean[j - 1] == ' ')
        j--;
    clean[j] = '\0';
    snprintf(err, errlen, "%s: %s", what, clean);
}

int page_parse(const char *body, size_t len, const char *url, struct page **ret, char *err,
               size_t errlen)
{
    struct page_quiet q;
    htmlDocPtr doc = NULL;

    if (!ret || (!body && len > 0))
        return apbot_fail(err, errlen, APBOT_E_INVAL, "page: no body");
    if (len > INT_MAX)
        return apbot_fail(err, errlen, APBOT_E_LIMIT, "page: body of %zu bytes is too large", len);

    page_quiet_begin(&q);
    /* The tree and the parser's own allocations go into an arena dropped with the page
     * (xmlarena.h): a fifth of a post's CPU was malloc and free around this parse. */
    struct xmlarena *arena = xmlarena_begin();
    /* Plain pages take the fast path (page_fast.c: the same tree, a third of the cost), their
     * ids left for page_ids. */
    if (len > 0)
        doc = page_fast_parse_ids_later(body, len, url);
    bool ids_later = doc != NULL;
    if (len > 0 && !doc)
        /* encoding NULL: a declared charset (meta) wins; undeclared input is read as UTF-8,
         * and if it is not valid UTF-8 libxml2 falls back to ISO-8859-1 rather than stop. */
        doc = htmlReadMemory(body, (int)len, url, NULL, PAGE_HTML_OPTIONS);
    if (!doc || !xmlDocGetRootElement(doc)) {
        /* Nothing recognisable (empty, binary): an empty page on which nothing matches. */
        if (doc)
            xmlFreeDoc(doc);
        doc = htmlNewDocNoDtD(NULL, NULL);
        if (!doc)
            abort(); /* libxml2 fails here only on out-of-memory (mem.h's policy) */
        xmlNodePtr html = xmlNewDocNode(doc, NULL, BAD_CAST "html", NULL);
        if (!html)
            abort(); /* as above: a constant name, only out-of-memory */
        xmlDocSetRootElement(doc, html);
        ids_later = false; /* the empty page has none */
    }
    /* libxml2 keeps a copy of the parse's last error per thread: made in the arena, it must
     * not outlive it (reset here, while the arena is still the thread's). */
    xmlResetLastError();
    xmlarena_end(arena);
    page_quiet_end(&q);

    size_t url_size = url ? strlen(url) + 1 : 0;
    size_t raw_len = len < PAGE_RAW_KEEP ? len : PAGE_RAW_KEEP;
    size_t size = sizeof(struct page) + url_size + raw_len + 1;
    struct page *p = arena ? xmlarena_alloc(arena, size) : apbot_xmalloc(size);
    memset(p, 0, sizeof(*p));
    p->doc = doc;
    p->arena = arena;
    p->ids_later = ids_later;
    char *tail = (char *)(p + 1);
    if (url) {
        memcpy(tail, url, url_size);
        p->url = tail;
    }
    p->raw = tail + url_size;
    p->raw_len = raw_len;
    if (raw_len)
        memcpy(p->raw, body, raw_len);
    p->raw[raw_len] = '\0';
    *ret = p;
    return APBOT_OK;
}

void page_free(struct page *p)
{
    if (!p)
        return;
    if (p->ids_heap) {
        xmlFreeIDTable(p->doc->ids); /* heap blocks that point into the arena */
        p->doc->ids = NULL;
    }
    if (p->arena) {
        xmlarena_free(p->arena); /* the document and p with it */
        return;
    }
    if (p->doc)
        xmlFreeDoc(p->doc);
    free(p);
}

/* ---- XPath ---- */

/* libxml2 2.9 reports XPath errors to a context's handler by code only (message NULL). */
static const char *page_xpath_reason(int code)
{
    switch (code) {
    case XML_XPATH_NUMBER_ERROR:
        return "bad number";
    case XML_XPATH_UNFINISHED_LITERAL_ERROR:
        return "unfinished literal";
    case XML_XPATH_START_LITERAL_ERROR:
        return "expected a literal";
    case XML_XPATH_VARIABLE_REF_ERROR:
        return "expected $ for a variable reference";
    case XML_XPATH_UNDEF_VARIABLE_ERROR:
        return "undefined variable";
    case XML_XPATH_INVALID_PREDICATE_ERROR:
        return "invalid predicate";
    case XML_XPATH_EXPR_ERROR:
        return "invalid expression";
    case XML_XPATH_UNCLOSED_ERROR:
        return "missing closing bracket";
    case XML_XPATH_UNKNOWN_FUNC_ERROR:
        return "unknown function";
    case XML_XPATH_INVALID_OPERAND:
        return "invalid operand";
    case XML_XPATH_INVALID_TYPE:
        return "invalid type";
    case XML_XPATH_INVALID_ARITY:
        return "wrong number of arguments";
    case XML_XPATH_UNDEF_PREFIX_ERROR:
        return "undefined namespace prefix";
    case XML_XPATH_INVALID_CHAR_ERROR:
        return "invalid character";
    default:
        return "invalid XPath";
    }
}

static void page_xpath_capture(void *ctx, xmlErrorPtr error)
{
    struct page_xerr *e = ctx;
    if (e->set || !error)
        return;
    e->set = true;
    const char *why = error->message ? error->message : page_xpath_reason(error->code);
    if (error->str1 && error->int1 >= 0)
        snprintf(e->msg, sizeof(e->msg), "%s at offset %d of '%.120s'", why, error->int1,
                 error->str1);
    else
        snprintf(e->msg, sizeof(e->msg), "%s", why);
}

static xmlXPathContextPtr page_xctx(xmlDocPtr doc, struct page_xerr *e)
{
    xmlXPathContextPtr x = xmlXPathNewContext(doc);
    if (!x)
        abort(); /* libxml2 fails here only on out-of-memory (mem.h's policy) */
    e->set = false;
    e->msg[0] = '\0';
    x->error = page_xpath_capture; /* errors go here, not to stderr */
    x->userData = e;
    return x;
}

/*
 * The XPath context for a query on p: one per thread, made on the thread's first query, kept
 * and pointed at each page in turn (a new context registers every XPath function again: about
 * 70,000 instructions, more than most queries cost). A thread runs one query at a time; the
 * context is freed when the thread ends.
 */
static pthread_key_t page_xctx_key;
static pthread_once_t page_xctx_once = PTHREAD_ONCE_INIT;

static void page_xctx_free(void *x)
{
    xmlXPathFreeContext(x);
}

static void page_xctx_key_init(void)
{
    if (pthread_key_create(&page_xctx_key, page_xctx_free) != 0)
        abort(); /* once per process: fails only out of memory or of keys (1024 at least) */
}

xmlXPathContextPtr page_xctx_of(const struct page *p, struct page_xerr *e)
{
    pthread_once(&page_xctx_once, page_xctx_key_init);
    xmlXPathContextPtr x = pthread_getspecific(page_xctx_key);
    if (!x) {
        x = page_xctx(p->doc, e);
        if (pthread_setspecific(page_xctx_key, x) != 0)
            abort(); /* the key is valid (made above): fails only on out-of-memory */
    }
    x->doc = p->doc;
    e->set = false;
    e->msg[0] = '\0';
    x->userData = e;
    x->node = (xmlNodePtr)p->doc;
    x->contextSize = -1;
    x->proximityPosition = -1;
    return x;
}

/*
 * Registers the ids the fast path left for later, before libxml2's XPath evaluates on the
 * page: its id() function reads them, and nothing else the page files do reads them or an
 * attribute's ID type (the paths page_path.c evaluates do not). The registration needs no
 * arena: the thread has none outside page_parse, so the table is on the heap and page_free
 * frees it before the arena it points into.
 */
static void page_ids(const struct page *cp)
{
    struct page *p = (struct page *)cp; /* its lazily made part: one thread uses a page */
    if (!p->ids_later)
        return;
    p->ids_later = false;
    page_fast_ids(p->doc);
    p->ids_heap = p->arena && p->doc->ids;
}

/* Evaluates xpath with node as context (NULL = the document): ns's object or libxml2's (free
 * either with page_obj_free). NULL on error, e filled. */
xmlXPathObjectPtr page_eval(const struct page *p, xmlXPathContextPtr x, xmlNodePtr node,
                            const char *xpath, struct page_xerr *e, struct page_nodes *ns)
{
    struct page_path pp;
    xmlXPathObjectPtr obj =
        page_path_read(xpath, &pp) ? page_path_run(&pp, x->doc, node, ns) : NULL;
    if (obj)
        return obj;
    page_ids(p);
    xmlXPathCompExprPtr comp = xmlXPathCtxtCompile(x, BAD_CAST xpath);
    if (!comp) {
        if (!e->set)
            snprintf(e->msg, sizeof(e->msg), "invalid XPath");
        e->set = true;
        return NULL;
    }
    x->node = node ? node : (xmlNodePtr)x->doc;
    obj = xmlXPathCompiledEval(comp, x);
    xmlXPathFreeCompExpr(comp);
    if (!obj && !e->set) {
        snprintf(e->msg, sizeof(e->msg), "XPath evaluation failed");
        e->set = true;
    }
    return obj;
}

/* Trimmed string value of an XPath result; NULL when empty. */
static char *page_obj_string(xmlXPathObjectPtr obj)
{
    if (!obj)
        return NULL;
    if (obj->type == XPATH_NODESET && (!obj->nodesetval || obj->nodesetval->nodeNr == 0))
        return NULL;
    xmlChar *s = xmlXPathCastToString(obj);
    char *out = page_trim_dup(s ? (const char *)s : "");
    xmlFree(s);
    if (!out[0]) {
        free(out);
        return NULL;
    }
    return out;
}

bool page_has(const struct page *p, const char *xpath)
{
    struct page_quiet q;
    struct page_xerr e;
    struct page_nodes ns;
    bool has = false;

    if (!p || !xpath)
        return false;
    page_quiet_begin(&q);
    xmlXPathContextPtr x = page_xctx_of(p, &e);
    xmlXPathObjectPtr obj = page_eval(p, x, NULL, xpath, &e, &ns);
    if (obj) {
        if (obj->type == XPATH_NODESET)
            has = obj->nodesetval && obj->nodesetval->nodeNr > 0;
        else
            has = xmlXPathCastToBoolean(obj) != 0;
    }
    page_obj_free(obj, &ns);
    page_quiet_end(&q);
    return has;
}

char *page_string(const struct page *p, const char *xpath)
{
    struct page_quiet q;
    struct page_xerr e;
    struct page_nodes ns;

    if (!p || !xpath)
        return NULL;
    page_quiet_begin(&q);
    xmlXPathContextPtr x = page_xctx_of(p, &e);
    xmlXPathObjectPtr obj = page_eval(p, x, NULL, xpath, &e, &ns);
    char *out = page_obj_string(obj);
    page_obj_free(obj, &ns);
    page_quiet_end(&q);
    return out;
}

/* A column of page_rows: a path read here, or libxml2's compiled expression (made when the
 * path meets a tree page_path_run does not walk). */
struct page_col {
    struct page_path path;
    bool is_path;
    xmlXPathCompExprPtr comp;
};

/* Columns page_rows keeps on the stack (a flow's tables have 8 or 9); more go to the heap. */
#define PAGE_ROWS_ROOM 12

int page_rows(const struct page *p, const char *rows_xpath, const char *const *col_xpaths,
              size_t n_cols, page_row_fn fn, void *ctx, size_t *ret_rows, char *err, size_t errlen)
{
    struct page_quiet q;
    struct page_xerr e;
    struct page_col cols_room[PAGE_ROWS_ROOM], *cols = cols_room;
    char *cells_room[PAGE_ROWS_ROOM], **cells = cells_room;
    struct page_nodes rows_ns, cell_ns;
    xmlXPathObjectPtr rows = NULL;
    size_t n_rows = 0;
    int rc = APBOT_OK;

    if (!p || !rows_xpath || (n_cols > 0 && !col_xpaths))
        return apbot_fail(err, errlen, APBOT_E_INVAL, "page_rows: bad arguments");

    page_quiet_begin(&q);
    xmlXPathContextPtr x = page_xctx_of(p, &e);
    if (n_cols > PAGE_ROWS_ROOM) {
        cols = apbot_xcalloc(n_cols, sizeof(*cols));
        cells = apbot_xcalloc(n_cols, sizeof(*cells));
    } else {
        memset(cols, 0, n_cols * sizeof(*cols));
        memset(cells, 0, n_cols * sizeof(*cells));
    }
    for (size_t c = 0; c < n_cols; c++) {
        cols[c].is_path = col_xpaths[c] && page_path_read(col_xpaths[c], &cols[c].path);
        if (cols[c].is_path)
            continue; /* a path libxml2 compiles without fail */
        page_ids(p);
        cols[c].comp = col_xpaths[c] ? xmlXPathCtxtCompile(x, BAD_CAST col_xpaths[c]) : NULL;
        if (!cols[c].comp) {
            page_set_err(err, errlen, "column XPath", e.set ? e.msg : "missing or invalid");
            rc = APBOT_E_INVAL;
            goto out;
        }
    }
    rows = page_eval(p, x, NULL, rows_xpath, &e, &rows_ns);
    if (!rows) {
        page_set_err(err, errlen, "rows XPath", e.msg);
        rc = APBOT_E_INVAL;
        goto out;
    }
    if (rows->type != XPATH_NODESET) {
        rc = apbot_fail(err, errlen, APBOT_E_INVAL, "rows XPath does not select nodes");
        goto out;
    }
    int nr = rows->nodesetval ? rows->nodesetval->nodeNr : 0;
    for (int i = 0; i < nr; i++) {
        xmlNodePtr row = rows->nodesetval->nodeTab[i];
        for (size_t c = 0; c < n_cols; c++) {
            xmlXPathObjectPtr v = NULL;
            if (cols[c].is_path)
                v = page_path_run(&cols[c].path, p->doc, row, &cell_ns);
            if (!v && !cols[c].comp) {
                page_ids(p);
                cols[c].comp = xmlXPathCtxtCompile(x, BAD_CAST col_xpaths[c]);
            }
            if (!v && cols[c].comp) {
                x->node = row;
                x->contextSize = -1;
                x->proximityPosition = -1;
                v = xmlXPathCompiledEval(cols[c].comp, x);
            }
            cells[c] = page_obj_string(v);
            page_obj_free(v, &cell_ns);
        }
        n_rows++;
        int frc = fn ? fn(ctx, (const char *const *)cells, n_cols) : 0;
        for (size_t c = 0; c < n_cols; c++) {
            free(cells[c]);
            cells[c] = NULL;
        }
        if (frc != 0) {
            rc = frc;
            goto out;
        }
    }
    if (ret_rows)
        *ret_rows = n_rows;
out:
    for (size_t c = 0; c < n_cols; c++)
        if (cols[c].comp)
            xmlXPathFreeCompExpr(cols[c].comp);
    if (cols != cols_room) {
        free(cols);
        free(cells);
    }
    page_obj_free(rows, &rows_ns);
    page_quiet_end(&q);
    return rc;
}
