/*
 * flow.c - loads a flow file, validates it and expands its templates.
 *
 * Loading is three passes over one libxml2 tree: parse (no network, no entity expansion, no
 * DOCTYPE at all), RelaxNG validation against flows/flow.rng (embedded at build time), then the
 * semantic pass that builds struct flow and collects every problem it finds as "file:line:
 * message": templates naming unknown variables or formatters, PCRE2 patterns and XPath that do not
 * compile, status specs, the safety rules of the post (a `completed` rule that needs a document
 * number, exactly one committing step, no catch-all rule) and the policy ranges. libxml2's own
 * diagnostics are captured through structured error handlers, never printed. Expansion fills
 * templates from an invoice, the key, the list date/page and the secrets the runner passes in;
 * secrets are never stored in the flow. What to do with a flow (HTTP, pages, states) is the
 * runner's.
 */
#include "apbot/flow.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/relaxng.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>
#include <libxml/xpath.h>

#include "apbot/invoice.h"
#include "apbot/match.h"
#include "apbot/mem.h"
#include "apbot/money.h"

#define FLOW_NS "urn:apbot:flow:1"
#define FLOW_EXPAND_MAX (64 * 1024) /* bytes of one expanded template */
#define FLOW_MAX_FMTS 8             /* formatters in one placeholder */

/* The schema: flows/flow.rng, embedded at build time (cmake/embed.cmake, bot/CMakeLists.txt). */
extern const unsigned char flow_schema_rng[];
extern const size_t flow_schema_rng_len;

char *flow_schema_text(void)
{
    return apbot_xstrndup((const char *)flow_schema_rng, flow_schema_rng_len);
}

/* --------------------------------------------------------------------------------------- */

static const char *const flow_outcome_names[] = {
    [FLOW_OUT_COMPLETED] = "completed",
    [FLOW_OUT_REJECTED] = "rejected",
    [FLOW_OUT_ALREADY_EXISTS] = "already-exists",
    [FLOW_OUT_NOT_SENT] = "not-sent",
    [FLOW_OUT_SESSION_EXPIRED] = "session-expired",
    [FLOW_OUT_UNKNOWN] = "unknown",
};
_Static_assert(sizeof(flow_outcome_names) / sizeof(flow_outcome_names[0]) == FLOW_OUT__COUNT,
               "every flow_outcome needs a name");

const char *flow_outcome_name(enum flow_outcome o)
{
    if ((int)o < 0 || o >= FLOW_OUT__COUNT)
        return "invalid";
    return flow_outcome_names[o];
}

enum flow_outcome flow_outcome_from_name(const char *name)
{
    for (int i = 0; name && i < FLOW_OUT__COUNT; i++)
        if (strcmp(flow_outcome_names[i], name) == 0)
            return (enum flow_outcome)i;
    return FLOW_OUT__COUNT;
}

struct flow_policy flow_policy_default(void)
{
    struct flow_policy p = {
        .connect_timeout_ms = 5000,
        .timeout_ms = 30000,
        .settle_ms = 60000,
        .max_posts = 2,
        .max_cycles = 5,
        .max_attempts = 8,
        .max_sessions = 4,
        .key_length = INVOICE_KEY_LEN,
        .backoff_base_ms = 1000,
        .backoff_cap_ms = 60000,
        .lease_ms = 300000,
        .max_body = 4u * 1024u * 1024u,
        .max_redirects = 5,
    };
    return p;
}

/* ---------------------------------------------------------------------------------------
 * Small helpers: a growing array, a bounded growing buffer.
 */

/*
 * Makes room for one more element in an array of n elements of `size` bytes with room for
 * *cap: when full, doubles *cap (starting at `first`) and reallocates. Returns the array,
 * moved or not (v itself is then no longer valid); aborts when memory runs out.
 */
static void *flow_grow(void *v, size_t n, size_t *cap, size_t first, size_t size)
{
    if (n < *cap)
        return v;
    *cap = *cap ? *cap * 2 : first;
    v = realloc(v, *cap * size);
    if (!v)
        abort();
    return v;
}

struct flow_buf {
    char *p;
    size_t len, cap, max;
    bool over; /* something did not fit under max */
};

static void flow_buf_add(struct flow_buf *b, const char *s, size_t n)
{
    if (b->over || b->len + n > b->max) {
        b->over = true;
        return;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 128;
        while (cap < b->len + n + 1)
            cap *= 2;
        b->p = realloc(b->p, cap);
        if (!b->p)
            abort();
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void flow_buf_str(struct flow_buf *b, const char *s)
{
    flow_buf_add(b, s, strlen(s));
}

/* ---------------------------------------------------------------------------------------
 * Problems: every one kept (up to FLOW_PROBLEMS_MAX of them), reported sorted by line as
 * "file:line: message".
 */
#define FLOW_PROBLEMS_MAX 200

struct flow_problem_rec {
    long line;
    char *text; /* "file:line: message" */
};

struct flow_ctx {
    const char *path;
    struct flow_problem_rec *probs;
    size_t n_probs; /* problems found (some may not be kept) */
    size_t n_kept;
    struct flow *f;
    bool key_written; /* some post field writes ${key} */
};

static void flow_problem(struct flow_ctx *c, long line, const char *fmt, ...) APBOT_PRINTF(3, 4);

static void flow_problem(struct flow_ctx *c, long line, const char *fmt, ...)
{
    char msg[1024], text[1200];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    c->n_probs++;
    if (c->n_kept == FLOW_PROBLEMS_MAX)
        return;
    if (line > 0)
        snprintf(text, sizeof(text), "%s:%ld: %s", c->path, line, msg);
    else
        snprintf(text, sizeof(text), "%s: %s", c->path, msg);
    if (!c->probs)
        c->probs = apbot_xcalloc(FLOW_PROBLEMS_MAX, sizeof(*c->probs));
    c->probs[c->n_kept].line = line;
    c->probs[c->n_kept].text = apbot_xstrdup(text);
    c->n_kept++;
}

static void flow_problems_free(struct flow_ctx *c)
{
    for (size_t i = 0; i < c->n_kept; i++)
        free(c->probs[i].text);
    free(c->probs);
    c->probs = NULL;
    c->n_kept = 0;
}

/* Copies the problems into err sorted by line (stable), whole lines only, with a count of
 * what did not fit. */
static void flow_problems_out(struct flow_ctx *c, char *err, size_t errlen)
{
    size_t used = 0, hidden = c->n_probs - c->n_kept;
    char tail[80];

    if (!err || !errlen)
        return;
    err[0] = '\0';
    /* Insertion sort: a handful of problems, and it keeps equal lines in order found. */
    for (size_t i = 1; i < c->n_kept; i++) {
        struct flow_problem_rec r = c->probs[i];
        size_t j = i;
        while (j > 0 && c->probs[j - 1].line > r.line) {
            c->probs[j] = c->probs[j - 1];
            j--;
        }
        c->probs[j] = r;
    }
    for (size_t i = 0; i < c->n_kept; i++) {
        size_t n = strlen(c->probs[i].text);
        bool last = i + 1 == c->n_kept && hidden == 0;
        /* Leave room for the "(N more problems not shown)" note unless this is the last. */
        if (hidden == 0 && used + n + 1 + (last ? 0 : 48) < errlen) {
            if (used)
                err[used++] = '\n';
            memcpy(err + used, c->probs[i].text, n + 1);
            used += n;
        } else {
            hidden++;
        }
    }
    if (hidden) {
        if (used == 0 && c->n_kept) {
            snprintf(err, errlen, "%s", c->probs[0].text); /* its beginning, at least */
        } else {
            snprintf(tail, sizeof(tail), "%s(%zu more problems not shown)", used ? "\n" : "",
                     hidden);
            if (used + strlen(tail) < errlen)
                memcpy(err + used, tail, strlen(tail) + 1);
        }
    }
}

/* ---------------------------------------------------------------------------------------
 * libxml2 diagnostics, captured instead of printed.
 */
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

struct flow_xpath_err {
    char msg[256];
};

static void flow_xpath_error(void *ctx, FLOW_XMLERR *e)
{
    struct flow_xpath_err *x = ctx;
    size_t n;

    if (!e || x->msg[0])
        return;
    snprintf(x->msg, sizeof(x->msg), "%s", e->message ? e->message : "invalid expression");
    n = strlen(x->msg);
    while (n && (x->msg[n - 1] == '\n' || x->msg[n - 1] == ' '))
        x->msg[--n] = '\0';
}

/* True when xpath compiles as XPath 1.0; why gets libxml2's reason otherwise. */
static bool flow_xpath_ok(const char *xpath, char *why, size_t whylen)
{
    struct flow_xpath_err x = {{0}};
    xmlStructuredErrorFunc old = xmlStructuredError;
    void *old_ctx = xmlStructuredErrorContext;
    xmlXPathCompExprPtr comp;

    xmlSetStructuredErrorFunc(&x, flow_xpath_error);
    comp = xmlXPathCompile((const xmlChar *)xpath);
    xmlSetStructuredErrorFunc(old_ctx, old);
    if (comp) {
        xmlXPathFreeCompExpr(comp);
        return true;
    }
    snprintf(why, whylen, "%s", x.msg[0] ? x.msg : "invalid expression");
    return false;
}

/* ---------------------------------------------------------------------------------------
 * Templates: "${var|fmt:arg|fmt}" placeholders in literal text.
 */
enum flow_var_id {
    FLOW_V_KEY = 0,
    FLOW_V_INV_NUMBER,
    FLOW_V_INV_VENDOR_ID,
    FLOW_V_INV_VENDOR_NAME,
    FLOW_V_INV_DOC_TYPE,
    FLOW_V_INV_ISSUE_DATE,
    FLOW_V_INV_DUE_DATE,
    FLOW_V_INV_CURRENCY,
    FLOW_V_INV_PAYABLE,
    FLOW_V_INV_NET,
    FLOW_V_INV_TAX,
    FLOW_V_INV_GL_ACCOUNT,
    FLOW_V_INV_DESCRIPTION,
    FLOW_V_VENDOR_ID,
    FLOW_V_VENDOR_NAME,
    FLOW_V_SECRET_USER,
    FLOW_V_SECRET_PASSWORD,
    FLOW_V_DATE,
    FLOW_V_PAGE,
    FLOW_V__COUNT
};

enum flow_kind {
    FLOW_K_TEXT = 0,
    FLOW_K_DATE,   /* YYYY-MM-DD or "" */
    FLOW_K_AMOUNT, /* minor units + exponent */
};

/* Where a template sits decides which variables it may use. */
enum {
    FLOW_C_LOGIN_URL = 1 << 0,
    FLOW_C_LOGIN_FIELD = 1 << 1,
    FLOW_C_LOOKUP = 1 << 2, /* lookup URL and <expect> */
    FLOW_C_STEP_URL = 1 << 3,
    FLOW_C_STEP_FIELD = 1 << 4,
    FLOW_C_LIST_URL = 1 << 5,
};
#define FLOW_C_ITEM (FLOW_C_LOOKUP | FLOW_C_STEP_URL | FLOW_C_STEP_FIELD)
#define FLOW_C_SECRET (FLOW_C_LOGIN_FIELD | FLOW_C_STEP_FIELD)

static const struct {
    const char *name;
    enum flow_kind kind;
    unsigned where;
} flow_vars_table[] = {
    [FLOW_V_KEY] = {"key", FLOW_K_TEXT, FLOW_C_ITEM},
    [FLOW_V_INV_NUMBER] = {"invoice.number", FLOW_K_TEXT, FLOW_C_ITEM},
    [FLOW_V_INV_VENDOR_ID] = {"invoice.vendor_id", FLOW_K_TEXT, FLOW_C_ITEM},
    [FLOW_V_INV_VENDOR_NAME] = {"invoice.vendor_name", FLOW_K_TEXT, FLOW_C_ITEM},
    [FLOW_V_INV_DOC_TYPE] = {"invoice.doc_type", FLOW_K_TEXT, FLOW_C_ITEM},
    [FLOW_V_INV_ISSUE_DATE] = {"invoice.issue_date", FLOW_K_DATE, FLOW_C_ITEM},
    [FLOW_V_INV_DUE_DATE] = {"invoice.due_date", FLOW_K_DATE, FLOW_C_ITEM},
    [FLOW_V_INV_CURRENCY] = {"invoice.currency", FLOW_K_TEXT, FLOW_C_ITEM},
    [FLOW_V_INV_PAYABLE] = {"invoice.payable", FLOW_K_AMOUNT, FLOW_C_ITEM},
    [FLOW_V_INV_NET] = {"invoice.net", FLOW_K_AMOUNT, FLOW_C_ITEM},
    [FLOW_V_INV_TAX] = {"invoice.tax", FLOW_K_AMOUNT, FLOW_C_ITEM},
    [FLOW_V_INV_GL_ACCOUNT] = {"invoice.gl_account", FLOW_K_TEXT, FLOW_C_ITEM},
    [FLOW_V_INV_DESCRIPTION] = {"invoice.description", FLOW_K_TEXT, FLOW_C_ITEM},
    [FLOW_V_VENDOR_ID] = {"vendor.id", FLOW_K_TEXT, FLOW_C_ITEM},
    [FLOW_V_VENDOR_NAME] = {"vendor.name", FLOW_K_TEXT, FLOW_C_ITEM},
    [FLOW_V_SECRET_USER] = {"secret.user", FLOW_K_TEXT, FLOW_C_SECRET},
    [FLOW_V_SECRET_PASSWORD] = {"secret.password", FLOW_K_TEXT, FLOW_C_SECRET},
    [FLOW_V_DATE] = {"date", FLOW_K_DATE, FLOW_C_LIST_URL},
    [FLOW_V_PAGE] = {"page", FLOW_K_TEXT, FLOW_C_LIST_URL},
};
_Static_assert(sizeof(flow_vars_table) / sizeof(flow_vars_table[0]) == FLOW_V__COUNT,
               "every flow variable needs a table row");

enum flow_fmt_id {
    FLOW_F_DATE = 0,
    FLOW_F_AMOUNT,
    FLOW_F_ABS,
    FLOW_F_MAP,
    FLOW_F_UPPER,
    FLOW_F_LOWER,
    FLOW_F_TRUNC,
    FLOW_F_URL,
    FLOW_F__COUNT
};

static const struct {
    const char *name;
    bool arg; /* takes ":arg" (required) */
} flow_fmts_table[] = {
    [FLOW_F_DATE] = {"date", true},    [FLOW_F_AMOUNT] = {"amount", true},
    [FLOW_F_ABS] = {"abs", false},     [FLOW_F_MAP] = {"map", true},
    [FLOW_F_UPPER] = {"upper", false}, [FLOW_F_LOWER] = {"lower", false},
    [FLOW_F_TRUNC] = {"trunc", true},  [FLOW_F_URL] = {"url", false},
};
_Static_assert(sizeof(flow_fmts_table) / sizeof(flow_fmts_table[0]) == FLOW_F__COUNT,
               "every formatter needs a table row");

/* One parsed placeholder; spans point into the template. */
struct flow_ph {
    const char *var;
    size_t var_len;
    struct {
        const char *name, *arg;
        size_t name_len, arg_len;
        bool has_arg;
    } fmt[FLOW_MAX_FMTS];
    size_t n_fmt;
};

/* Parses the placeholder body starting at s (just after "${"). Returns the position after
 * the closing brace, or NULL with *why set. */
static const char *flow_ph_parse(const char *s, struct flow_ph *ph, const char **why)
{
    const char *p = s;

    memset(ph, 0, sizeof(*ph));
    ph->var = p;
    while (*p && *p != '|' && *p != '}' && *p != '$' && *p != '{')
        p++;
    ph->var_len = (size_t)(p - ph->var);
    if (!*p || *p == '$' || *p == '{') {
        *why = "unterminated ${...}";
        return NULL;
    }
    while (*p == '|') {
        if (ph->n_fmt == FLOW_MAX_FMTS) {
            *why = "too many formatters in one ${...}";
            return NULL;
        }
        p++;
        ph->fmt[ph->n_fmt].name = p;
        while (*p && *p != '|' && *p != '}' && *p != ':')
            p++;
        ph->fmt[ph->n_fmt].name_len = (size_t)(p - ph->fmt[ph->n_fmt].name);
        if (*p == ':') {
            p++;
            ph->fmt[ph->n_fmt].has_arg = true;
            ph->fmt[ph->n_fmt].arg = p;
            while (*p && *p != '|' && *p != '}')
                p++;
            ph->fmt[ph->n_fmt].arg_len = (size_t)(p - ph->fmt[ph->n_fmt].arg);
        }
        ph->n_fmt++;
        if (!*p) {
            *why = "unterminated ${...}";
            return NULL;
        }
    }
    return p + 1; /* *p == '}' */
}

static int flow_var_lookup(const char *name, size_t len)
{
    for (int i = 0; i < FLOW_V__COUNT; i++)
        if (strlen(flow_vars_table[i].name) == len &&
            memcmp(flow_vars_table[i].name, name, len) == 0)
            return i;
    return -1;
}

static int flow_fmt_lookup(const char *name, size_t len)
{
    for (int i = 0; i < FLOW_F__COUNT; i++)
        if (strlen(flow_fmts_table[i].name) == len &&
            memcmp(flow_fmts_table[i].name, name, len) == 0)
            return i;
    return -1;
}

/* A date pattern: literal text plus %d %m %Y %y %%. */
static bool flow_date_pattern_ok(const char *s, size_t len)
{
    if (len == 0)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] != '%')
            continue;
        if (i + 1 >= len)
            return false;
        i++;
        if (!strchr("dmYy%", s[i]))
            return false;
    }
    return true;
}

static bool flow_amount_arg_ok(const char *s, size_t len)
{
    if (len < 1 || len > 2 || (s[0] != '.' && s[0] != ','))
        return false;
    return len == 1 || (s[1] != s[0] && strchr(".,' ", s[1]) != NULL);
}

/* Finds `key` in a "a=b,c=d" map; returns true and the value span. */
static bool flow_map_find(const char *map, size_t len, const char *key, const char **ret_v,
                          size_t *ret_vlen)
{
    const char *p = map, *end = map + len;

    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *item_end = comma ? comma : end;
        const char *eq = memchr(p, '=', (size_t)(item_end - p));
        if (eq && (size_t)(eq - p) == strlen(key) && memcmp(p, key, strlen(key)) == 0) {
            *ret_v = eq + 1;
            *ret_vlen = (size_t)(item_end - eq - 1);
            return true;
        }
        p = item_end + 1;
    }
    return false;
}

static bool flow_map_ok(const char *map, size_t len)
{
    const char *p = map, *end = map + len;

    if (len == 0)
        return false;
    while (p <= end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *item_end = comma ? comma : end;
        const char *eq = memchr(p, '=', (size_t)(item_end - p));
        if (!eq || eq == p)
            return false;
        if (!comma)
            break;
        p = comma + 1;
    }
    return true;
}

static bool flow_parse_count(const char *s, size_t len, long min, long max, long *ret)
{
    long v = 0;

    if (len == 0 || len > 9)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    if (v < min || v > max)
        return false;
    *ret = v;
    return true;
}

/*
 * Checks one template: every placeholder names a variable allowed at `where`, known
 * formatters with valid arguments applied to values of the right kind. `what` names the
 * place for messages. Sets c->key_written when a post field uses ${key}.
 */
static void flow_tpl_check(struct flow_ctx *c, const char *tmpl, unsigned where, long line,
                           const char *what)
{
    const char *p = tmpl;

    if (!tmpl)
        return;
    while ((p = strstr(p, "${")) != NULL) {
        struct flow_ph ph;
        const char *why = NULL;
        const char *next = flow_ph_parse(p + 2, &ph, &why);
        int v;
        enum flow_kind kind;

        if (!next) {
            flow_problem(c, line, "%s: %s in \"%s\"", what, why, tmpl);
            return;
        }
        v = flow_var_lookup(ph.var, ph.var_len);
        if (v < 0) {
            flow_problem(c, line, "%s: unknown variable ${%.*s}", what, (int)ph.var_len, ph.var);
            p = next;
            continue;
        }
        if (!(flow_vars_table[v].where & where)) {
            const char *hint = "";
            if (flow_vars_table[v].where == FLOW_C_SECRET)
                hint = " (secrets only go into form fields, never into URLs)";
            else if (flow_vars_table[v].where == FLOW_C_LIST_URL)
                hint = " (only in <list get>)";
            else
                hint = " (invoice values only in <lookup> and <post>)";
            flow_problem(c, line, "%s: ${%s} is not available here%s", what,
                         flow_vars_table[v].name, hint);
        }
        if (v == FLOW_V_KEY && (where & FLOW_C_STEP_FIELD))
            c->key_written = true;
        kind = flow_vars_table[v].kind;
        for (size_t i = 0; i < ph.n_fmt; i++) {
            int fid = flow_fmt_lookup(ph.fmt[i].name, ph.fmt[i].name_len);
            const char *arg = ph.fmt[i].arg;
            size_t alen = ph.fmt[i].arg_len;
            long n;

            if (fid < 0) {
                flow_problem(c, line, "%s: unknown formatter '%.*s' in ${%.*s...}", what,
                             (int)ph.fmt[i].name_len, ph.fmt[i].name, (int)ph.var_len, ph.var);
                kind = FLOW_K_TEXT;
                continue;
            }
            if (flow_fmts_table[fid].arg != ph.fmt[i].has_arg) {
                flow_problem(c, line, "%s: formatter '%s' %s", what, flow_fmts_table[fid].name,
                             flow_fmts_table[fid].arg ? "needs an argument (name:arg)"
                                                      : "takes no argument");
                kind = FLOW_K_TEXT;
                continue;
            }
            switch ((enum flow_fmt_id)fid) {
            case FLOW_F_DATE:
                if (kind != FLOW_K_DATE)
                    flow_problem(c, line, "%s: 'date' formats a date, not ${%.*s}", what,
                                 (int)ph.var_len, ph.var);
                else if (!flow_date_pattern_ok(arg, alen))
                    flow_problem(c, line,
                                 "%s: bad date pattern '%.*s' (use %%d %%m %%Y %%y and text)", what,
                                 (int)alen, arg);
                kind = FLOW_K_TEXT;
                break;
            case FLOW_F_AMOUNT:
                if (kind != FLOW_K_AMOUNT)
                    flow_problem(c, line, "%s: 'amount' formats an amount, not ${%.*s}", what,
                                 (int)ph.var_len, ph.var);
                else if (!flow_amount_arg_ok(arg, alen))
                    flow_problem(c, line,
                                 "%s: bad amount format '%.*s' (decimal '.' or ',' then an "
                                 "optional different grouping '.', ',', ' ' or ''')",
                                 what, (int)alen, arg);
                kind = FLOW_K_TEXT;
                break;
            case FLOW_F_ABS:
                if (kind != FLOW_K_AMOUNT)
                    flow_problem(c, line, "%s: 'abs' applies to an amount, not ${%.*s}", what,
                                 (int)ph.var_len, ph.var);
                break;
            case FLOW_F_MAP:
                if (!flow_map_ok(arg, alen)) {
                    flow_problem(c, line, "%s: bad map '%.*s' (expected from=to,from=to)", what,
                                 (int)alen, arg);
                } else if (v == FLOW_V_INV_DOC_TYPE && i == 0) {
                    const char *mv;
                    size_t ml;
                    for (int t = 0; t < INVOICE_DOC__COUNT; t++) {
                        const char *tn = t == INVOICE_DOC_INVOICE ? "invoice" : "credit-note";
                        if (!flow_map_find(arg, alen, tn, &mv, &ml))
                            flow_problem(c, line, "%s: map has no entry for document type '%s'",
                                         what, tn);
                    }
                }
                kind = FLOW_K_TEXT;
                break;
            case FLOW_F_TRUNC:
                if (!flow_parse_count(arg, alen, 1, 100000, &n))
                    flow_problem(c, line, "%s: trunc needs a length 1..100000, not '%.*s'", what,
                                 (int)alen, arg);
                kind = FLOW_K_TEXT;
                break;
            case FLOW_F_UPPER:
            case FLOW_F_LOWER:
            case FLOW_F_URL:
                kind = FLOW_K_TEXT;
                break;
            case FLOW_F__COUNT:
                break;
            }
        }
        p = next;
    }
}

static bool flow_tpl_uses(const char *tmpl, enum flow_var_id v)
{
    const char *p = tmpl;

    while (p && (p = strstr(p, "${")) != NULL) {
        struct flow_ph ph;
        const char *why;
        const char *next = flow_ph_parse(p + 2, &ph, &why);
        if (!next)
            return false;
        if (flow_var_lookup(ph.var, ph.var_len) == (int)v)
            return true;
        p = next;
    }
    return false;
}

/* ---------------------------------------------------------------------------------------
 * Expansion.
 */
struct flow_val {
    enum flow_kind kind;
    char *text; /* heap; for FLOW_K_DATE the YYYY-MM-DD value */
    int64_t minor;
    int exponent;
};

static const char *flow_doc_type_name(int t)
{
    switch ((enum invoice_doc_type)t) {
    case INVOICE_DOC_INVOICE:
        return "invoice";
    case INVOICE_DOC_CREDIT_NOTE:
        return "credit-note";
    case INVOICE_DOC__COUNT:
    case INVOICE_DOC_INVALID:
        break;
    }
    return "";
}

static int flow_val_get(const struct flow *f, enum flow_var_id v, const struct flow_vars *vars,
                        struct flow_val *ret, char *err, size_t errlen)
{
    static const struct flow_vars none;
    const struct invoice *inv;
    const char *s = NULL;
    char num[32];

    if (!vars)
        vars = &none;
    inv = vars->inv;
    ret->kind = flow_vars_table[v].kind;
    ret->text = NULL;
    ret->minor = 0;
    ret->exponent = 0;
    switch (v) {
    case FLOW_V_KEY:
        ret->text = vars->key ? flow_key_cut(f, vars->key) : apbot_xstrdup("");
        return APBOT_OK;
    case FLOW_V_INV_NUMBER:
        s = inv ? inv->invoice_number : NULL;
        break;
    case FLOW_V_INV_VENDOR_ID:
    case FLOW_V_VENDOR_ID:
        s = inv ? inv->vendor_id : NULL;
        break;
    case FLOW_V_INV_VENDOR_NAME:
    case FLOW_V_VENDOR_NAME:
        s = inv ? inv->vendor_name : NULL;
        break;
    case FLOW_V_INV_DOC_TYPE:
        s = inv ? flow_doc_type_name(inv->doc_type) : NULL;
        break;
    case FLOW_V_INV_ISSUE_DATE:
        s = inv ? inv->issue_date : NULL;
        break;
    case FLOW_V_INV_DUE_DATE:
        s = inv ? inv->due_date : NULL;
        break;
    case FLOW_V_INV_CURRENCY:
        s = inv ? inv->currency : NULL;
        break;
    case FLOW_V_INV_PAYABLE:
    case FLOW_V_INV_NET:
    case FLOW_V_INV_TAX:
        if (!inv) {
            ret->kind = FLOW_K_TEXT;
            break;
        }
        if (inv->exponent < 0 || inv->exponent > 9)
            return apbot_fail(err, errlen, APBOT_E_INVAL, "${%s}: currency '%s' has no exponent",
                              flow_vars_table[v].name, inv->currency);
        ret->minor = v == FLOW_V_INV_PAYABLE ? inv->payable
                     : v == FLOW_V_INV_NET   ? inv->net_total
                                             : inv->tax_total;
        ret->exponent = inv->exponent;
        return APBOT_OK;
    case FLOW_V_INV_GL_ACCOUNT:
        s = inv && inv->n_lines ? inv->lines[0].gl_account : NULL;
        break;
    case FLOW_V_INV_DESCRIPTION:
        s = inv && inv->n_lines ? inv->lines[0].description : NULL;
        break;
    case FLOW_V_SECRET_USER:
        s = vars->user;
        break;
    case FLOW_V_SECRET_PASSWORD:
        s = vars->password;
        break;
    case FLOW_V_DATE:
        s = vars->date;
        break;
    case FLOW_V_PAGE:
        snprintf(num, sizeof(num), "%d", vars->page);
        s = num;
        break;
    case FLOW_V__COUNT:
        return apbot_fail(err, errlen, APBOT_E_BUG, "bad variable");
    }
    ret->text = apbot_xstrdup(s ? s : "");
    return APBOT_OK;
}

/* Turns an amount into plain text ("-1234.50") so text formatters can work on it. */
static int flow_val_text(struct flow_val *val, char *err, size_t errlen)
{
    char buf[64];

    if (val->kind != FLOW_K_AMOUNT || val->text)
        return APBOT_OK;
    if (money_format_plain(val->minor, val->exponent, buf, sizeof(buf)) != APBOT_OK)
        return apbot_fail(err, errlen, APBOT_E_RANGE, "amount does not format");
    val->text = apbot_xstrdup(buf);
    val->kind = FLOW_K_TEXT;
    return APBOT_OK;
}

static void flow_val_set(struct flow_val *val, char *text)
{
    free(val->text);
    val->text = text;
    val->kind = FLOW_K_TEXT;
}

static bool flow_digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

static int flow_fmt_date(struct flow_val *val, const char *pat, size_t plen, char *err,
                         size_t errlen)
{
    const char *d = val->text ? val->text : "";
    struct flow_buf b = {.max = 256};

    if (!*d) { /* an optional date left empty stays empty */
        flow_val_set(val, apbot_xstrdup(""));
        return APBOT_OK;
    }
    if (strlen(d) != 10 || d[4] != '-' || d[7] != '-' || !flow_digits(d, 4) ||
        !flow_digits(d + 5, 2) || !flow_digits(d + 8, 2))
        return apbot_fail(err, errlen, APBOT_E_INVAL, "date '%s' is not YYYY-MM-DD", d);
    for (size_t i = 0; i < plen; i++) {
        if (pat[i] != '%' || i + 1 >= plen) {
            flow_buf_add(&b, pat + i, 1);
            continue;
        }
        switch (pat[++i]) {
        case 'd':
            flow_buf_add(&b, d + 8, 2);
            break;
        case 'm':
            flow_buf_add(&b, d + 5, 2);
            break;
        case 'Y':
            flow_buf_add(&b, d, 4);
            break;
        case 'y':
            flow_buf_add(&b, d + 2, 2);
            break;
        case '%':
            flow_buf_add(&b, "%", 1);
            break;
        default:
            free(b.p);
            return apbot_fail(err, errlen, APBOT_E_INVAL, "bad date pattern '%.*s'", (int)plen,
                              pat);
        }
    }
    if (b.over) {
        free(b.p);
        return apbot_fail(err, errlen, APBOT_E_LIMIT, "formatted date too long");
    }
    flow_val_set(val, b.p ? b.p : apbot_xstrdup(""));
    return APBOT_OK;
}

static int flow_fmt_trunc(struct flow_val *val, const char *arg, size_t alen, char *err,
                          size_t errlen)
{
    long n;
    size_t chars = 0, i = 0;
    const unsigned char *s = (const unsigned char *)val->text;

    if (!flow_parse_count(arg, alen, 1, 100000, &n))
        return apbot_fail(err, errlen, APBOT_E_INVAL, "bad trunc length '%.*s'", (int)alen, arg);
    /* Count code points: a continuation byte (10xxxxxx) never starts a character. */
    while (s[i]) {
        if ((s[i] & 0xC0) != 0x80) {
            if (chars == (size_t)n)
                break;
            chars++;
        }
        i++;
    }
    val->text[i] = '\0';
    return APBOT_OK;
}

static void flow_fmt_url(struct flow_val *val)
{
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *s = (const unsigned char *)val->text;
    size_t n = strlen(val->text);
    char *out = apbot_xmalloc(n * 3 + 1), *o = out;

    for (size_t i = 0; i < n; i++) {
        unsigned char ch = s[i];
        if (isalnum(ch) || ch == '-' || ch == '.' || ch == '_' || ch == '~') {
            *o++ = (char)ch;
        } else {
            *o++ = '%';
            *o++ = hex[ch >> 4];
            *o++ = hex[ch & 15];
        }
    }
    *o = '\0';
    flow_val_set(val, out);
}

static int flow_apply(struct flow_val *val, const struct flow_ph *ph, size_t i, char *err,
                      size_t errlen)
{
    int fid = flow_fmt_lookup(ph->fmt[i].name, ph->fmt[i].name_len);
    const char *arg = ph->fmt[i].arg;
    size_t alen = ph->fmt[i].arg_len;
    const char *mv;
    size_t ml;
    char buf[64];
    int rc;

    if (fid < 0 || flow_fmts_table[fid].arg != ph->fmt[i].has_arg)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "unknown formatter '%.*s'",
                          (int)ph->fmt[i].name_len, ph->fmt[i].name);
    switch ((enum flow_fmt_id)fid) {
    case FLOW_F_DATE:
        if (val->kind != FLOW_K_DATE)
            return apbot_fail(err, errlen, APBOT_E_INVAL, "'date' applied to a non-date");
        return flow_fmt_date(val, arg, alen, err, errlen);
    case FLOW_F_AMOUNT:
        if (val->kind != FLOW_K_AMOUNT || val->text)
            return apbot_fail(err, errlen, APBOT_E_INVAL, "'amount' applied to a non-amount");
        if (!flow_amount_arg_ok(arg, alen))
            return apbot_fail(err, errlen, APBOT_E_INVAL, "bad amount format '%.*s'", (int)alen,
                              arg);
        rc = money_format(val->minor, val->exponent, arg[0], alen == 2 ? arg[1] : '\0', buf,
                          sizeof(buf));
        if (rc != APBOT_OK)
            return apbot_fail(err, errlen, APBOT_E_RANGE, "amount does not format");
        flow_val_set(val, apbot_xstrdup(buf));
        return APBOT_OK;
    case FLOW_F_ABS:
        if (val->kind != FLOW_K_AMOUNT || val->text)
            return apbot_fail(err, errlen, APBOT_E_INVAL, "'abs' applied to a non-amount");
        if (val->minor < -MONEY_MAX_MINOR)
            return apbot_fail(err, errlen, APBOT_E_RANGE, "amount out of range");
        if (val->minor < 0)
            val->minor = -val->minor;
        return APBOT_OK;
    case FLOW_F_MAP:
        if ((rc = flow_val_text(val, err, errlen)) != APBOT_OK)
            return rc;
        if (!flow_map_find(arg, alen, val->text, &mv, &ml))
            return apbot_fail(err, errlen, APBOT_E_INVAL, "map has no entry for '%s'", val->text);
        flow_val_set(val, apbot_xstrndup(mv, ml));
        return APBOT_OK;
    case FLOW_F_UPPER:
    case FLOW_F_LOWER:
        if ((rc = flow_val_text(val, err, errlen)) != APBOT_OK)
            return rc;
        for (char *q = val->text; *q; q++) {
            if (*q >= 'a' && *q <= 'z' && fid == FLOW_F_UPPER)
                *q = (char)(*q - 'a' + 'A');
            else if (*q >= 'A' && *q <= 'Z' && fid == FLOW_F_LOWER)
                *q = (char)(*q - 'A' + 'a');
        }
        val->kind = FLOW_K_TEXT;
        return APBOT_OK;
    case FLOW_F_TRUNC:
        if ((rc = flow_val_text(val, err, errlen)) != APBOT_OK)
            return rc;
        val->kind = FLOW_K_TEXT;
        return flow_fmt_trunc(val, arg, alen, err, errlen);
    case FLOW_F_URL:
        if ((rc = flow_val_text(val, err, errlen)) != APBOT_OK)
            return rc;
        flow_fmt_url(val);
        return APBOT_OK;
    case FLOW_F__COUNT:
        break;
    }
    return apbot_fail(err, errlen, APBOT_E_BUG, "bad formatter");
}

int flow_expand(const struct flow *f, const char *tmpl, const struct flow_vars *vars, char **ret,
                char *err, size_t errlen)
{
    struct flow_buf b = {.max = FLOW_EXPAND_MAX};
    const char *p = tmpl, *hit;
    int rc = APBOT_OK;

    if (!tmpl || !ret)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "no template");
    flow_buf_add(&b, "", 0);
    while ((hit = strstr(p, "${")) != NULL) {
        struct flow_ph ph;
        struct flow_val val;
        const char *why = NULL;
        const char *next = flow_ph_parse(hit + 2, &ph, &why);
        int v;

        flow_buf_add(&b, p, (size_t)(hit - p));
        if (!next) {
            rc = apbot_fail(err, errlen, APBOT_E_INVAL, "%s", why);
            goto out;
        }
        v = flow_var_lookup(ph.var, ph.var_len);
        if (v < 0) {
            rc = apbot_fail(err, errlen, APBOT_E_INVAL, "unknown variable ${%.*s}", (int)ph.var_len,
                            ph.var);
            goto out;
        }
        rc = flow_val_get(f, (enum flow_var_id)v, vars, &val, err, errlen);
        if (rc != APBOT_OK)
            goto out;
        for (size_t i = 0; i < ph.n_fmt && rc == APBOT_OK; i++)
            rc = flow_apply(&val, &ph, i, err, errlen);
        if (rc == APBOT_OK)
            rc = flow_val_text(&val, err, errlen);
        if (rc == APBOT_OK)
            flow_buf_str(&b, val.text ? val.text : "");
        free(val.text);
        if (rc != APBOT_OK)
            goto out;
        p = next;
    }
    flow_buf_str(&b, p);
    if (b.over) {
        rc = apbot_fail(err, errlen, APBOT_E_LIMIT, "expanded template longer than %d bytes",
                        FLOW_EXPAND_MAX);
        goto out;
    }
    *ret = b.p;
    b.p = NULL;
out:
    free(b.p);
    return rc;
}

char *flow_key_cut(const struct flow *f, const char *key)
{
    size_t n;

    if (!key)
        return NULL;
    n = strlen(key);
    if (f && f->policy.key_length > 0 && (size_t)f->policy.key_length < n)
        n = (size_t)f->policy.key_length;
    return apbot_xstrndup(key, n);
}

char *flow_url(const char *base, const char *path)
{
    const char *scheme_end, *host_end;
    size_t blen;
    struct flow_buf b = {.max = SIZE_MAX / 2};

    if (!path)
        return NULL;
    if (!base || strncmp(path, "http://", 7) == 0 || strncmp(path, "https://", 8) == 0)
        return apbot_xstrdup(path);
    blen = strlen(base);
    if (path[0] == '/') {
        scheme_end = strstr(base, "://");
        host_end = scheme_end ? strchr(scheme_end + 3, '/') : NULL;
        blen = host_end ? (size_t)(host_end - base) : blen;
        flow_buf_add(&b, base, blen);
    } else {
        while (blen && base[blen - 1] == '/')
            blen--;
        flow_buf_add(&b, base, blen);
        if (*path)
            flow_buf_add(&b, "/", 1);
    }
    flow_buf_str(&b, path);
    return b.p;
}

/* ---------------------------------------------------------------------------------------
 * Freeing.
 */
static void flow_rules_free(struct flow_rule *r, size_t n)
{
    for (size_t i = 0; r && i < n; i++) {
        free(r[i].name);
        free(r[i].status);
        match_free(r[i].body);
    }
    free(r);
}

static void flow_form_done(struct flow_form *fm)
{
    free(fm->xpath);
    for (size_t i = 0; fm->fields && i < fm->n_fields; i++) {
        free(fm->fields[i].name);
        free(fm->fields[i].value);
    }
    free(fm->fields);
    free(fm->submit);
}

static void flow_table_done(struct flow_table *t)
{
    free(t->rows);
    for (size_t i = 0; t->cols && i < t->n_cols; i++) {
        free(t->cols[i].name);
        free(t->cols[i].xpath);
    }
    free(t->cols);
    free(t->empty);
    free(t->next);
    free(t->date_format);
}

void flow_free(struct flow *f)
{
    if (!f)
        return;
    free(f->path);
    free(f->name);
    free(f->base_url);
    free(f->ca_file);
    match_free(f->session_expired);
    free(f->login.get);
    flow_form_done(&f->login.form);
    match_free(f->login.success);
    flow_rules_free(f->login.rules, f->login.n_rules);
    free(f->lookup.get);
    flow_table_done(&f->lookup.table);
    free(f->lookup.key_column);
    for (size_t i = 0; f->lookup.expect && i < f->lookup.n_expect; i++) {
        free(f->lookup.expect[i].name);
        free(f->lookup.expect[i].value);
    }
    free(f->lookup.expect);
    for (size_t i = 0; f->steps && i < f->n_steps; i++) {
        free(f->steps[i].name);
        free(f->steps[i].get);
        flow_form_done(&f->steps[i].form);
        flow_rules_free(f->steps[i].rules, f->steps[i].n_rules);
    }
    free(f->steps);
    flow_rules_free(f->outcomes, f->n_outcomes);
    free(f->list.get);
    flow_table_done(&f->list.table);
    free(f);
}

/* ---------------------------------------------------------------------------------------
 * Building the struct from the validated tree, checking as we go.
 */
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

static long flow_line(const xmlNode *n)
{
    return xmlGetLineNo(n);
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

static void flow_check_xpath(struct flow_ctx *c, const char *xpath, long line, const char *what)
{
    char why[256];

    if (xpath && !flow_xpath_ok(xpath, why, sizeof(why)))
        flow_problem(c, line, "%s: XPath '%s' does not compile: %s", what, xpath, why);
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

/*
 * Fills *ret from a <field name=...> or <expect column=...> element k: the control or column
 * named by its `name_attr` attribute, its text as the value template (checked for the `where`
 * context, problems labelled "<what> '<name>'") and its line. The strings are the flow's.
 */
static void flow_read_field(struct flow_ctx *c, xmlNode *k, const char *name_attr, unsigned where,
                            const char *what, struct flow_field *ret)
{
    char msg[128];

    ret->name = flow_prop(k, name_attr);
    ret->value = flow_text(k);
    ret->line = (int)flow_line(k);
    snprintf(msg, sizeof(msg), "%s '%s'", what, ret->name ? ret->name : "");
    flow_tpl_check(c, ret->value, where, ret->line, msg);
}

static void flow_build_form(struct flow_ctx *c, xmlNode *n, struct flow_form *fm, unsigned where,
                            const char *what)
{
    size_t cap = 0;
    char msg[128];

    fm->xpath = flow_prop(n, "xpath");
    fm->submit = flow_prop(n, "submit");
    snprintf(msg, sizeof(msg), "%s form", what);
    flow_check_xpath(c, fm->xpath, flow_line(n), msg);
    for (xmlNode *k = flow_first(n); k; k = flow_next(k)) {
        struct flow_field *fd;
        if (!flow_is(k, "field"))
            continue;
        fm->fields = flow_grow(fm->fields, fm->n_fields, &cap, 8, sizeof(*fm->fields));
        fd = &fm->fields[fm->n_fields++];
        flow_read_field(c, k, "name", where, "field", fd);
        for (size_t i = 0; i + 1 < fm->n_fields; i++)
            if (fd->name && fm->fields[i].name && strcmp(fm->fields[i].name, fd->name) == 0)
                flow_problem(c, fd->line, "field '%s' is set twice in this form", fd->name);
    }
}

/* `where_ok` is a bit set of outcomes allowed in this rule list. */
static void flow_build_rule(struct flow_ctx *c, xmlNode *n, struct flow_rule *r, unsigned where_ok,
                            const char *where_name)
{
    char *outcome = flow_prop(n, "outcome");
    char *pattern = flow_text(n);
    enum flow_outcome o = flow_outcome_from_name(outcome);
    char what[160];

    r->name = flow_prop(n, "name");
    r->status = flow_prop(n, "status");
    r->line = (int)flow_line(n);
    r->outcome = o == FLOW_OUT__COUNT ? FLOW_OUT_UNKNOWN : o;
    snprintf(what, sizeof(what), "rule '%s'", r->name ? r->name : "");
    if (o == FLOW_OUT__COUNT)
        flow_problem(c, r->line, "%s: unknown outcome '%s'", what, outcome ? outcome : "");
    else if (!(where_ok & (1u << o)))
        flow_problem(c, r->line, "%s: outcome '%s' is not allowed in %s", what,
                     flow_outcome_name(o), where_name);
    if (r->status && !match_status_valid(r->status))
        flow_problem(c, r->line, "%s: bad status spec '%s' (expected e.g. 200, 5xx, 429,503)", what,
                     r->status);
    if (*pattern)
        r->body = flow_pattern(c, pattern, r->line, what);
    if (!*pattern && !r->status)
        flow_problem(c, r->line, "%s: matches every answer; give it a status, a pattern or both",
                     what);
    if (o == FLOW_OUT_COMPLETED) {
        if (!*pattern)
            flow_problem(c, r->line,
                         "%s: a completed rule needs a pattern with (?<doc>...) for the "
                         "document number",
                         what);
        else if (r->body && !match_has_group(r->body, "doc"))
            flow_problem(c, r->line,
                         "%s: a completed rule needs a (?<doc>...) group for the document "
                         "number",
                         what);
        else if (r->body && match_exec(r->body, "", 0, NULL))
            flow_problem(c, r->line,
                         "%s: a completed rule must not match an empty page (no catch-all "
                         "success)",
                         what);
    }
    free(outcome);
    free(pattern);
}

static void flow_build_rules(struct flow_ctx *c, xmlNode *first, struct flow_rule **ret,
                             size_t *ret_n, unsigned where_ok, const char *where_name)
{
    size_t cap = 0;

    for (xmlNode *k = first; k; k = flow_next(k)) {
        if (!flow_is(k, "rule"))
            continue;
        *ret = flow_grow(*ret, *ret_n, &cap, 8, sizeof(**ret));
        memset(&(*ret)[*ret_n], 0, sizeof(**ret));
        flow_build_rule(c, k, &(*ret)[(*ret_n)++], where_ok, where_name);
    }
}

static const char *const flow_column_names[] = {
    "doc",      "reference", "vendor",   "vendor_name", "invoice_number", "date",
    "due_date", "amount",    "currency", "doc_type",    "booked",
};

static bool flow_table_has(const struct flow_table *t, const char *name)
{
    for (size_t i = 0; name && i < t->n_cols; i++)
        if (t->cols[i].name && strcmp(t->cols[i].name, name) == 0)
            return true;
    return false;
}

static void flow_build_table(struct flow_ctx *c, xmlNode *n, struct flow_table *t, const char *what)
{
    char *dec = flow_prop(n, "amount-decimal");
    char *grp = flow_prop(n, "amount-group");
    long line = flow_line(n);
    size_t cap = 0;
    char msg[128];

    t->rows = flow_prop(n, "rows");
    t->empty = flow_prop(n, "empty");
    t->next = flow_prop(n, "next");
    t->date_format = flow_prop(n, "date-format");
    t->amount_decimal = dec && *dec ? dec[0] : '.';
    t->amount_group = grp && *grp ? grp[0] : '\0';
    if (t->amount_decimal == t->amount_group)
        flow_problem(c, line, "%s table: amount-decimal and amount-group are both '%c'", what,
                     t->amount_decimal);
    free(dec);
    free(grp);
    if (!t->date_format)
        t->date_format = apbot_xstrdup("%Y-%m-%d");
    else if (!flow_date_pattern_ok(t->date_format, strlen(t->date_format)) ||
             !strstr(t->date_format, "%d") || !strstr(t->date_format, "%m") ||
             (!strstr(t->date_format, "%Y") && !strstr(t->date_format, "%y")))
        flow_problem(c, line, "%s table: bad date-format '%s' (needs %%d, %%m and %%Y or %%y)",
                     what, t->date_format);
    snprintf(msg, sizeof(msg), "%s table rows", what);
    flow_check_xpath(c, t->rows, line, msg);
    snprintf(msg, sizeof(msg), "%s table empty", what);
    flow_check_xpath(c, t->empty, line, msg);
    snprintf(msg, sizeof(msg), "%s table next", what);
    flow_check_xpath(c, t->next, line, msg);
    for (xmlNode *k = flow_first(n); k; k = flow_next(k)) {
        struct flow_column *col;
        bool known = false;
        long kl = flow_line(k);

        if (!flow_is(k, "column"))
            continue;
        t->cols = flow_grow(t->cols, t->n_cols, &cap, 8, sizeof(*t->cols));
        col = &t->cols[t->n_cols];
        col->name = flow_prop(k, "name");
        col->xpath = flow_prop(k, "xpath");
        for (size_t i = 0; col->name && i < sizeof(flow_column_names) / sizeof(*flow_column_names);
             i++)
            known = known || strcmp(flow_column_names[i], col->name) == 0;
        if (!known)
            flow_problem(c, kl,
                         "column '%s': unknown name (use doc, reference, vendor, vendor_name, "
                         "invoice_number, date, due_date, amount, currency, doc_type, booked)",
                         col->name ? col->name : "");
        else if (flow_table_has(t, col->name))
            flow_problem(c, kl, "column '%s' is listed twice", col->name);
        snprintf(msg, sizeof(msg), "column '%s'", col->name ? col->name : "");
        flow_check_xpath(c, col->xpath, kl, msg);
        t->n_cols++;
    }
    if (!flow_table_has(t, "doc"))
        flow_problem(c, line, "%s table: needs a 'doc' column (the document number)", what);
}

#define FLOW_RULES_ALL ((1u << FLOW_OUT__COUNT) - 1)
#define FLOW_RULES_LOGIN                                                                           \
    ((1u << FLOW_OUT_REJECTED) | (1u << FLOW_OUT_NOT_SENT) | (1u << FLOW_OUT_UNKNOWN))
#define FLOW_RULES_STEP (FLOW_RULES_ALL & ~(1u << FLOW_OUT_COMPLETED))

static void flow_build_erp(struct flow_ctx *c, xmlNode *n)
{
    struct flow *f = c->f;
    long line = flow_line(n);

    f->base_url = flow_prop(n, "base-url");
    f->tls_verify = true;
    if (f->base_url && strncmp(f->base_url, "http://", 7) != 0 &&
        strncmp(f->base_url, "https://", 8) != 0)
        flow_problem(c, line, "erp: base-url '%s' must start with http:// or https://",
                     f->base_url);
    if (f->base_url && strstr(f->base_url, "${"))
        flow_problem(c, line, "erp: base-url takes no ${...} variables");
    for (xmlNode *k = flow_first(n); k; k = flow_next(k)) {
        if (flow_is(k, "tls")) {
            char *verify = flow_prop(k, "verify");
            f->ca_file = flow_prop(k, "ca-file");
            f->tls_verify = !(verify && strcmp(verify, "false") == 0);
            if (!f->tls_verify && f->ca_file)
                flow_problem(c, flow_line(k),
                             "tls: verify=\"false\" and ca-file contradict each other");
            free(verify);
        } else if (flow_is(k, "http-basic")) {
            f->basic_auth = true;
        } else if (flow_is(k, "session-expired")) {
            char *pat = flow_text(k);
            if (!*pat)
                flow_problem(c, flow_line(k), "session-expired: empty pattern");
            else
                f->session_expired = flow_pattern(c, pat, flow_line(k), "session-expired");
            free(pat);
        }
    }
}

static void flow_build_login(struct flow_ctx *c, xmlNode *n)
{
    struct flow_login *l = &c->f->login;
    xmlNode *k;

    l->present = true;
    l->get = flow_prop(n, "get");
    flow_tpl_check(c, l->get, FLOW_C_LOGIN_URL, flow_line(n), "login get");
    for (k = flow_first(n); k; k = flow_next(k)) {
        if (flow_is(k, "form")) {
            flow_build_form(c, k, &l->form, FLOW_C_LOGIN_FIELD, "login");
        } else if (flow_is(k, "success")) {
            char *pat = flow_text(k);
            if (!*pat)
                flow_problem(c, flow_line(k), "login success: empty pattern");
            else
                l->success = flow_pattern(c, pat, flow_line(k), "login success");
            free(pat);
        } else if (flow_is(k, "rule")) {
            break;
        }
    }
    flow_build_rules(c, k, &l->rules, &l->n_rules, FLOW_RULES_LOGIN, "<login>");
}

static void flow_build_lookup(struct flow_ctx *c, xmlNode *n)
{
    struct flow_lookup *lk = &c->f->lookup;
    long line = flow_line(n);
    size_t cap = 0;

    lk->get = flow_prop(n, "get");
    lk->key_column = flow_prop(n, "key-column");
    flow_tpl_check(c, lk->get, FLOW_C_LOOKUP, line, "lookup get");
    for (xmlNode *k = flow_first(n); k; k = flow_next(k)) {
        if (flow_is(k, "table")) {
            flow_build_table(c, k, &lk->table, "lookup");
        } else if (flow_is(k, "expect")) {
            struct flow_field *e;
            lk->expect = flow_grow(lk->expect, lk->n_expect, &cap, 4, sizeof(*lk->expect));
            e = &lk->expect[lk->n_expect++];
            flow_read_field(c, k, "column", FLOW_C_LOOKUP, "expect", e);
        }
    }
    if (lk->key_column && !flow_table_has(&lk->table, lk->key_column))
        flow_problem(c, line, "lookup: key-column '%s' is not a column of its table",
                     lk->key_column);
    for (size_t i = 0; i < lk->n_expect; i++)
        if (!flow_table_has(&lk->table, lk->expect[i].name))
            flow_problem(c, lk->expect[i].line, "expect: '%s' is not a column of the table",
                         lk->expect[i].name ? lk->expect[i].name : "");
    if (!lk->key_column && lk->n_expect == 0)
        flow_problem(c, line,
                     "lookup: give key-column or <expect> elements: a hit must be compared "
                     "exactly before it is believed");
}

static void flow_build_post(struct flow_ctx *c, xmlNode *n)
{
    struct flow *f = c->f;
    size_t cap = 0, commits = 0;
    bool have_completed = false;

    for (xmlNode *k = flow_first(n); k; k = flow_next(k)) {
        if (flow_is(k, "step")) {
            struct flow_step *s;
            char *cm = flow_prop(k, "commits");
            char msg[160];
            xmlNode *r;

            f->steps = flow_grow(f->steps, f->n_steps, &cap, 4, sizeof(*f->steps));
            s = &f->steps[f->n_steps++];
            memset(s, 0, sizeof(*s));
            s->name = flow_prop(k, "name");
            s->get = flow_prop(k, "get");
            s->line = (int)flow_line(k);
            s->commits = cm && strcmp(cm, "true") == 0;
            free(cm);
            commits += s->commits;
            snprintf(msg, sizeof(msg), "step '%s'", s->name ? s->name : "");
            flow_tpl_check(c, s->get, FLOW_C_STEP_URL, s->line, msg);
            if (f->n_steps == 1 && !s->get)
                flow_problem(c, s->line, "%s: the first step needs get=\"URL\" to fetch the form",
                             msg);
            for (size_t i = 0; i + 1 < f->n_steps; i++)
                if (s->name && f->steps[i].name && strcmp(s->name, f->steps[i].name) == 0)
                    flow_problem(c, s->line, "step name '%s' is used twice", s->name);
            for (r = flow_first(k); r && !flow_is(r, "form"); r = flow_next(r))
                ;
            if (r)
                flow_build_form(c, r, &s->form, FLOW_C_STEP_FIELD, msg);
            snprintf(msg, sizeof(msg), "step '%s'", s->name ? s->name : "");
            flow_build_rules(c, r ? flow_next(r) : NULL, &s->rules, &s->n_rules, FLOW_RULES_STEP,
                             "step rules (completed only in <outcomes>)");
        } else if (flow_is(k, "outcomes")) {
            flow_build_rules(c, flow_first(k), &f->outcomes, &f->n_outcomes, FLOW_RULES_ALL,
                             "<outcomes>");
            for (size_t i = 0; i < f->n_outcomes; i++)
                have_completed = have_completed || f->outcomes[i].outcome == FLOW_OUT_COMPLETED;
            if (!have_completed)
                flow_problem(c, flow_line(k),
                             "post: no rule with outcome=\"completed\" in <outcomes>: nothing "
                             "could ever be confirmed as booked");
        }
    }
    if (commits == 0)
        flow_problem(c, flow_line(n),
                     "post: no step has commits=\"true\" (mark the step whose submit may book "
                     "the document)");
    else if (commits > 1)
        flow_problem(c, flow_line(n),
                     "post: %zu steps have commits=\"true\"; exactly one step may book", commits);
}

static void flow_build_list(struct flow_ctx *c, xmlNode *n)
{
    struct flow_list *ls = &c->f->list;
    char *mp = flow_prop(n, "max-pages");
    long line = flow_line(n), v = 0;

    ls->get = flow_prop(n, "get");
    ls->max_pages = 100;
    if (mp) {
        if (!flow_parse_count(mp, strlen(mp), 1, 10000, &v))
            flow_problem(c, line, "list: max-pages '%s' out of range 1..10000", mp);
        else
            ls->max_pages = (int)v;
    }
    free(mp);
    flow_tpl_check(c, ls->get, FLOW_C_LIST_URL, line, "list get");
    if (ls->get && !flow_tpl_uses(ls->get, FLOW_V_DATE))
        flow_problem(c, line, "list: get must use ${date} (the day listed)");
    for (xmlNode *k = flow_first(n); k; k = flow_next(k))
        if (flow_is(k, "table"))
            flow_build_table(c, k, &ls->table, "list");
    if (ls->table.next == NULL && ls->get && !flow_tpl_uses(ls->get, FLOW_V_PAGE) &&
        ls->max_pages > 1)
        flow_problem(c, line,
                     "list: max-pages > 1 needs ${page} in get or a next link in the table");
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
        flow_problem(c, flow_line(n), "policy %s=\"%s\": out of range %ld..%ld%s", attr, s, min,
                     max, hint ? hint : "");
    else
        *ret = v;
    free(s);
}

static void flow_build_policy(struct flow_ctx *c, xmlNode *n)
{
    struct flow_policy *p = &c->f->policy;
    long v;

    if (n) {
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
        flow_policy_num(
            c, n, "key-length", (long)strlen(INVOICE_KEY_PREFIX) + INVOICE_KEY_MIN_DIGITS,
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
    /* Relations, checked on the final numbers (defaults included). */
    v = n ? flow_line(n) : 0;
    if (p->settle_ms < p->timeout_ms)
        flow_problem(c, v,
                     "policy: settle-ms (%ld) is shorter than timeout-ms (%ld): a reconciliation "
                     "lookup could miss a record the ERP is still committing",
                     p->settle_ms, p->timeout_ms);
    if (p->connect_timeout_ms > p->timeout_ms)
        flow_problem(c, v, "policy: connect-timeout-ms (%ld) is longer than timeout-ms (%ld)",
                     p->connect_timeout_ms, p->timeout_ms);
    if (p->backoff_cap_ms < p->backoff_base_ms)
        flow_problem(c, v, "policy: backoff-cap-ms (%ld) is below backoff-base-ms (%ld)",
                     p->backoff_cap_ms, p->backoff_base_ms);
    if (p->lease_ms <= p->timeout_ms)
        flow_problem(c, v,
                     "policy: lease-ms (%ld) must be longer than timeout-ms (%ld), or another "
                     "process could take an item in the middle of its post",
                     p->lease_ms, p->timeout_ms);
}

/* Every rule name names one rule in evidence. */
static void flow_check_rule_names(struct flow_ctx *c)
{
    struct flow *f = c->f;
    struct {
        struct flow_rule *r;
        size_t n;
    } lists[64];
    size_t nl = 0;

    lists[nl].r = f->login.rules;
    lists[nl++].n = f->login.n_rules;
    for (size_t i = 0; i < f->n_steps && nl < 63; i++) {
        lists[nl].r = f->steps[i].rules;
        lists[nl++].n = f->steps[i].n_rules;
    }
    lists[nl].r = f->outcomes;
    lists[nl++].n = f->n_outcomes;
    for (size_t a = 0; a < nl; a++)
        for (size_t i = 0; i < lists[a].n; i++)
            for (size_t b = 0; b <= a; b++)
                for (size_t j = 0; j < (b == a ? i : lists[b].n); j++)
                    if (lists[a].r[i].name && lists[b].r[j].name &&
                        strcmp(lists[a].r[i].name, lists[b].r[j].name) == 0)
                        flow_problem(c, lists[a].r[i].line,
                                     "rule name '%s' is already used at line %d",
                                     lists[a].r[i].name, lists[b].r[j].line);
}

static void flow_build(struct flow_ctx *c, xmlNode *root)
{
    struct flow *f = c->f;
    xmlNode *policy = NULL;

    f->name = flow_prop(root, "name");
    f->policy = flow_policy_default();
    for (xmlNode *k = flow_first(root); k; k = flow_next(k)) {
        if (flow_is(k, "erp"))
            flow_build_erp(c, k);
        else if (flow_is(k, "login"))
            flow_build_login(c, k);
        else if (flow_is(k, "lookup"))
            flow_build_lookup(c, k);
        else if (flow_is(k, "post"))
            flow_build_post(c, k);
        else if (flow_is(k, "list"))
            flow_build_list(c, k);
        else if (flow_is(k, "policy"))
            policy = k;
    }
    flow_build_policy(c, policy);
    flow_check_rule_names(c);
    if (f->login.present && !f->session_expired)
        flow_problem(c, flow_line(root),
                     "erp: a flow with <login> needs <session-expired>, or a login page shown "
                     "instead of an answer cannot be told from an unknown answer");
    if (!f->login.present && !f->basic_auth)
        flow_problem(c, flow_line(root),
                     "flow: no <login> and no <http-basic/>: how does apbot authenticate?");
    if (f->lookup.key_column && !c->key_written)
        flow_problem(c, flow_line(root),
                     "lookup compares key-column '%s' but no post field writes ${key}: the "
                     "lookup could never find what apbot posted",
                     f->lookup.key_column);
}

/* ---------------------------------------------------------------------------------------
 * Loading.
 */
static int flow_validate(struct flow_ctx *c, xmlDoc *doc)
{
    char *schema_text = flow_schema_text();
    xmlRelaxNGParserCtxtPtr pctx = NULL;
    xmlRelaxNGPtr schema = NULL;
    xmlRelaxNGValidCtxtPtr vctx = NULL;
    struct flow_ctx sc = {.path = "flow.rng"};
    int rc = APBOT_OK;

    pctx = xmlRelaxNGNewMemParserCtxt(schema_text, (int)strlen(schema_text));
    if (!pctx)
        abort();
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
        abort();
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
    free(schema_text);
    return rc;
}

int flow_load(const char *path, struct flow **ret, char *err, size_t errlen)
{
    struct flow_ctx c = {.path = path ? path : "(null)"};
    xmlStructuredErrorFunc old = xmlStructuredError;
    void *old_ctx = xmlStructuredErrorContext;
    xmlDoc *doc = NULL;
    xmlNode *root;
    FILE *fp;
    int rc = APBOT_OK;

    if (!path || !ret)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "no flow file");
    if (err && errlen)
        err[0] = '\0';
    fp = fopen(path, "rb");
    if (!fp)
        return apbot_fail(err, errlen, APBOT_E_IO, "%s: cannot open: %s", path, strerror(errno));
    fclose(fp);
    /* No network, no entity substitution, no DTD loading: a flow is plain data. */
    xmlSetStructuredErrorFunc(&c, flow_xml_error);
    doc = xmlReadFile(path, NULL, XML_PARSE_NONET | XML_PARSE_NOCDATA);
    xmlSetStructuredErrorFunc(old_ctx, old);
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
    rc = flow_validate(&c, doc);
    if (rc != APBOT_OK)
        goto out;
    root = xmlDocGetRootElement(doc);
    c.f = apbot_xcalloc(1, sizeof(*c.f));
    c.f->path = apbot_xstrdup(path);
    flow_build(&c, root);
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
    return rc;
}
