/*
 * flow_template.c - flow templates: "${var|formatter:arg|...}" placeholders in literal text.
 *
 * One table of variables (name, kind of value, where in a flow it may be used) and one of
 * formatters serve both the load-time check (flow_tpl_check: unknown names, a variable out of
 * its place or not yet captured, bad arguments, a formatter applied to the wrong kind of value)
 * and the expansion (flow_expand) from the values the caller passes in (struct flow_vars): an
 * invoice and one of its lines, the key, the list dates and page, captured values, a lookup
 * row's cells, the secrets. Expansion output is bounded (FLOW_EXPAND_MAX). Also the key cut
 * and joining a path to the base URL.
 */
#include "apbot/flow.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/buf.h"
#include "apbot/invoice.h"
#include "apbot/linetax.h"
#include "apbot/mem.h"
#include "apbot/money.h"
#include "flow-int.h"

#define FLOW_EXPAND_MAX (64 * 1024) /* bytes of one expanded template */
#define FLOW_MAX_FMTS 8             /* formatters in one placeholder */

/* ---- the variables ------------------------------------------------------------------------ */

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
    FLOW_V_INV_LINE_COUNT,
    FLOW_V_VENDOR_ID,
    FLOW_V_VENDOR_NAME,
    FLOW_V_LINE_N,
    FLOW_V_LINE_I,
    FLOW_V_LINE_NET,
    FLOW_V_LINE_TAX,
    FLOW_V_LINE_GROSS,
    FLOW_V_LINE_GL_ACCOUNT,
    FLOW_V_LINE_DESCRIPTION,
    FLOW_V_LINE_QUANTITY,
    FLOW_V_DOC,
    FLOW_V_CAPTURE, /* capture.NAME */
    FLOW_V_ROW,     /* row.COLUMN */
    FLOW_V_SECRET_USER,
    FLOW_V_SECRET_PASSWORD,
    FLOW_V_DATE,
    FLOW_V_FROM,
    FLOW_V_TO,
    FLOW_V_PAGE,
    FLOW_V_OFFSET,
    FLOW_V_LIMIT,
    FLOW_V_SESSION, /* session.NAME */
    FLOW_V_COOKIE,  /* cookie.NAME */
    FLOW_V_REF,     /* ref.NAME.COLUMN */
    FLOW_V_CODE,
    FLOW_V__COUNT
};

enum flow_kind {
    FLOW_K_TEXT = 0,
    FLOW_K_DATE,   /* YYYY-MM-DD or "" */
    FLOW_K_AMOUNT, /* minor units + exponent */
};

/* Families of places (flow-int.h's FLOW_P_ bits). */
#define FLOW_P_STEPS (FLOW_P_STEP_URL | FLOW_P_STEP_FIELD | FLOW_P_LINES)
#define FLOW_P_ITEM (FLOW_P_LOOKUP | FLOW_P_DETAIL_URL | FLOW_P_STEPS)
/* Every request after the login's own. */
#define FLOW_P_SESSION                                                                             \
    (FLOW_P_HEADER | FLOW_P_CALL | FLOW_P_RESOLVE | FLOW_P_ITEM | FLOW_P_LIST_URL)
#define FLOW_P_ANY (FLOW_P_LOGIN_URL | FLOW_P_LOGIN_FIELD | FLOW_P_SESSION)

static const struct {
    const char *name; /* ending in '.': a prefix, the rest of the name is the key */
    enum flow_kind kind;
    unsigned where; /* FLOW_P_ bits where it may be used */
} flow_vars_table[] = {
    [FLOW_V_KEY] = {"key", FLOW_K_TEXT, FLOW_P_ITEM},
    [FLOW_V_INV_NUMBER] = {"invoice.number", FLOW_K_TEXT, FLOW_P_ITEM},
    [FLOW_V_INV_VENDOR_ID] = {"invoice.vendor_id", FLOW_K_TEXT, FLOW_P_ITEM},
    [FLOW_V_INV_VENDOR_NAME] = {"invoice.vendor_name", FLOW_K_TEXT, FLOW_P_ITEM},
    [FLOW_V_INV_DOC_TYPE] = {"invoice.doc_type", FLOW_K_TEXT, FLOW_P_ITEM},
    [FLOW_V_INV_ISSUE_DATE] = {"invoice.issue_date", FLOW_K_DATE, FLOW_P_ITEM},
    [FLOW_V_INV_DUE_DATE] = {"invoice.due_date", FLOW_K_DATE, FLOW_P_ITEM},
    [FLOW_V_INV_CURRENCY] = {"invoice.currency", FLOW_K_TEXT, FLOW_P_ITEM},
    [FLOW_V_INV_PAYABLE] = {"invoice.payable", FLOW_K_AMOUNT, FLOW_P_ITEM},
    [FLOW_V_INV_NET] = {"invoice.net", FLOW_K_AMOUNT, FLOW_P_ITEM},
    [FLOW_V_INV_TAX] = {"invoice.tax", FLOW_K_AMOUNT, FLOW_P_ITEM},
    [FLOW_V_INV_GL_ACCOUNT] = {"invoice.gl_account", FLOW_K_TEXT, FLOW_P_ITEM},
    [FLOW_V_INV_DESCRIPTION] = {"invoice.description", FLOW_K_TEXT, FLOW_P_ITEM},
    [FLOW_V_INV_LINE_COUNT] = {"invoice.line_count", FLOW_K_TEXT, FLOW_P_ITEM},
    [FLOW_V_VENDOR_ID] = {"vendor.id", FLOW_K_TEXT, FLOW_P_ITEM},
    [FLOW_V_VENDOR_NAME] = {"vendor.name", FLOW_K_TEXT, FLOW_P_ITEM},
    [FLOW_V_LINE_N] = {"line.n", FLOW_K_TEXT, FLOW_P_LINES},
    [FLOW_V_LINE_I] = {"line.i", FLOW_K_TEXT, FLOW_P_LINES},
    [FLOW_V_LINE_NET] = {"line.net", FLOW_K_AMOUNT, FLOW_P_LINES},
    [FLOW_V_LINE_TAX] = {"line.tax", FLOW_K_AMOUNT, FLOW_P_LINES},
    [FLOW_V_LINE_GROSS] = {"line.gross", FLOW_K_AMOUNT, FLOW_P_LINES},
    [FLOW_V_LINE_GL_ACCOUNT] = {"line.gl_account", FLOW_K_TEXT, FLOW_P_LINES},
    [FLOW_V_LINE_DESCRIPTION] = {"line.description", FLOW_K_TEXT, FLOW_P_LINES},
    [FLOW_V_LINE_QUANTITY] = {"line.quantity", FLOW_K_TEXT, FLOW_P_LINES},
    [FLOW_V_DOC] = {"doc", FLOW_K_TEXT, FLOW_P_STEPS},
    [FLOW_V_CAPTURE] = {"capture.", FLOW_K_TEXT, FLOW_P_STEPS},
    [FLOW_V_ROW] = {"row.", FLOW_K_TEXT, FLOW_P_DETAIL_URL},
    [FLOW_V_SECRET_USER] = {"secret.user", FLOW_K_TEXT, FLOW_P_LOGIN_FIELD | FLOW_P_HEADER},
    [FLOW_V_SECRET_PASSWORD] = {"secret.password", FLOW_K_TEXT, FLOW_P_LOGIN_FIELD | FLOW_P_HEADER},
    [FLOW_V_DATE] = {"date", FLOW_K_DATE, FLOW_P_LIST_URL},
    [FLOW_V_FROM] = {"from", FLOW_K_DATE, FLOW_P_LIST_URL},
    [FLOW_V_TO] = {"to", FLOW_K_DATE, FLOW_P_LIST_URL},
    [FLOW_V_PAGE] = {"page", FLOW_K_TEXT, FLOW_P_LIST_URL},
    [FLOW_V_OFFSET] = {"offset", FLOW_K_TEXT, FLOW_P_LIST_URL},
    [FLOW_V_LIMIT] = {"limit", FLOW_K_TEXT, FLOW_P_LIST_URL},
    [FLOW_V_SESSION] = {"session.", FLOW_K_TEXT, FLOW_P_SESSION},
    [FLOW_V_COOKIE] = {"cookie.", FLOW_K_TEXT, FLOW_P_ANY},
    [FLOW_V_REF] = {"ref.", FLOW_K_TEXT, FLOW_P_STEPS},
    [FLOW_V_CODE] = {"code", FLOW_K_TEXT, FLOW_P_RESOLVE},
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
    FLOW_F_JSON,  /* json:TYPE, last in a JSON body's whole-string placeholder (flow_json.c) */
    FLOW_F_MINOR, /* an amount in minor units: 1469.13 EUR as 146913 */
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
    [FLOW_F_JSON] = {"json", true},    [FLOW_F_MINOR] = {"minor", false},
};

/* The types json:TYPE names. */
static const char *const flow_json_types[] = {"string", "int",  "number", "decimal",
                                              "date",   "bool", "raw"};
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

    /* Only the formatters counted in n_fmt are set (and ever read): clearing all
     * FLOW_MAX_FMTS of them for every placeholder cost more than the parse. */
    ph->n_fmt = 0;
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
        ph->fmt[ph->n_fmt].arg = NULL;
        ph->fmt[ph->n_fmt].arg_len = 0;
        ph->fmt[ph->n_fmt].has_arg = false;
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

/*
 * The variable a placeholder names: its id and, for a prefix variable (capture., row.), the
 * rest of the name in *ret_key and *ret_key_len. -1 when unknown (a prefix with nothing after it
 * included).
 */
static int flow_var_lookup(const char *name, size_t len, const char **ret_key, size_t *ret_key_len)
{
    *ret_key = NULL;
    *ret_key_len = 0;
    if (len == 0)
        return -1; /* no name is empty, and name[0] is not the name's */
    for (int i = 0; i < FLOW_V__COUNT; i++) {
        const char *vn = flow_vars_table[i].name;
        if (vn[0] != name[0])
            continue; /* most of the table, without measuring it */
        size_t vl = strlen(vn);
        if (vn[vl - 1] == '.') {
            if (len > vl && memcmp(vn, name, vl) == 0) {
                *ret_key = name + vl;
                *ret_key_len = len - vl;
                return i;
            }
        } else if (vl == len && memcmp(vn, name, len) == 0) {
            return i;
        }
    }
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

/* ---- amount expressions ------------------------------------------------------------------ */

/*
 * In place of a variable a placeholder may hold an expression over the invoice's amounts:
 *
 *     expr    = term *( ("+" / "-") term )
 *     term    = unary *( "*" RATE "%" ROUNDING )      RATE: 19, 7.5 (0..1000, 4 decimals)
 *     unary   = "-" unary / "(" expr ")" / VARIABLE    ROUNDING: half-up half-even up down
 *
 * with blanks between the tokens as one likes, but around a binary '-' (a name may hold a '-':
 * ${cookie.XSRF-TOKEN}). The placeholder is an expression when it holds a blank, '+', '*',
 * '(', ')' or '%', or starts with '-'. Every operand is an amount variable of the invoice, so
 * one currency; the result is an amount (formatters as for a variable). Parsed into at most
 * FLOW_X_NODES nodes, FLOW_X_DEPTH deep, at load (flow_expr_check) and at each expansion
 * (flow_expr_eval), which computes in minor units, each step bounded by MONEY_MAX_MINOR.
 */
#define FLOW_X_NODES 32 /* operands and operators in one expression */
#define FLOW_X_DEPTH 16 /* nesting of parentheses and unary minus */

enum flow_x_op {
    FLOW_X_VAR = 0, /* an amount variable */
    FLOW_X_NEG,     /* -a */
    FLOW_X_ADD,     /* a + b */
    FLOW_X_SUB,     /* a - b */
    FLOW_X_RATE,    /* a * rate%, rounded */
};

struct flow_x_node {
    enum flow_x_op op;
    int a, b;         /* operand nodes */
    const char *name; /* FLOW_X_VAR: the variable's name, in the template */
    size_t name_len;
    int64_t rate; /* FLOW_X_RATE: money.h's units */
    enum money_rounding rounding;
};

struct flow_x {
    struct flow_x_node n[FLOW_X_NODES];
    int count;
    int root;
    const char *p, *end; /* what is left to read */
    const char *why;     /* the first problem (static text), or NULL */
};

/* The rounding rules an expression names, and money.h's for each. */
static const struct {
    const char *name;
    enum money_rounding rule;
} flow_x_roundings[] = {
    {"half-up", MONEY_ROUND_HALF_UP},
    {"half-even", MONEY_ROUND_HALF_EVEN},
    {"up", MONEY_ROUND_UP},
    {"down", MONEY_ROUND_DOWN},
};

static bool flow_x_is_blank(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

/* True when the placeholder's variable span is an expression, not one name. */
static bool flow_expr_is(const char *s, size_t len)
{
    if (len > 0 && s[0] == '-')
        return true;
    for (size_t i = 0; i < len; i++)
        if (flow_x_is_blank(s[i]) || strchr("+*()%", s[i]))
            return true;
    return false;
}

static void flow_x_blanks(struct flow_x *x)
{
    while (x->p < x->end && flow_x_is_blank(*x->p))
        x->p++;
}

static int flow_x_fail(struct flow_x *x, const char *why)
{
    if (!x->why)
        x->why = why;
    return -1;
}

static int flow_x_node(struct flow_x *x, enum flow_x_op op, int a, int b)
{
    if (x->count == FLOW_X_NODES)
        return flow_x_fail(x, "too long (at most 32 operands and operators)");
    memset(&x->n[x->count], 0, sizeof(x->n[0]));
    x->n[x->count].op = op;
    x->n[x->count].a = a;
    x->n[x->count].b = b;
    return x->count++;
}

static bool flow_x_name_char(char ch, bool first)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' ||
           (!first && ((ch >= '0' && ch <= '9') || ch == '.' || ch == '-'));
}

static int flow_x_expr(struct flow_x *x, int depth);

static int flow_x_unary(struct flow_x *x, int depth)
{
    int a;

    if (depth > FLOW_X_DEPTH)
        return flow_x_fail(x, "nested too deep");
    flow_x_blanks(x);
    if (x->p == x->end)
        return flow_x_fail(x, "an amount is missing at the end");
    if (*x->p == '-') {
        x->p++;
        a = flow_x_unary(x, depth + 1);
        return a < 0 ? -1 : flow_x_node(x, FLOW_X_NEG, a, -1);
    }
    if (*x->p == '(') {
        x->p++;
        a = flow_x_expr(x, depth + 1);
        if (a < 0)
            return -1;
        flow_x_blanks(x);
        if (x->p == x->end || *x->p != ')')
            return flow_x_fail(x, "a '(' is not closed");
        x->p++;
        return a;
    }
    if (!flow_x_name_char(*x->p, true))
        return flow_x_fail(x, *x->p >= '0' && *x->p <= '9'
                                  ? "a number alone is no amount (write AMOUNT * RATE% ROUNDING)"
                                  : "an amount variable is expected");
    const char *name = x->p;
    while (x->p < x->end && flow_x_name_char(*x->p, false))
        x->p++;
    a = flow_x_node(x, FLOW_X_VAR, -1, -1);
    if (a >= 0) {
        x->n[a].name = name;
        x->n[a].name_len = (size_t)(x->p - name);
    }
    return a;
}

/* "* 19% half-up" after an operand: the rate and its rounding into node r. */
static int flow_x_rate(struct flow_x *x, int a)
{
    const char *num;
    int r;

    x->p++; /* '*' */
    flow_x_blanks(x);
    num = x->p;
    while (x->p < x->end && ((*x->p >= '0' && *x->p <= '9') || *x->p == '.'))
        x->p++;
    if (x->p == num || x->p == x->end || *x->p != '%')
        return flow_x_fail(x, "'*' takes a rate in percent (AMOUNT * 19% half-up)");
    r = flow_x_node(x, FLOW_X_RATE, a, -1);
    if (r < 0)
        return -1;
    if (money_rate_parse(num, (size_t)(x->p - num), &x->n[r].rate) != APBOT_OK)
        return flow_x_fail(x, "a rate is 0 to 1000 percent with at most 4 decimals");
    x->p++; /* '%' */
    flow_x_blanks(x);
    const char *word = x->p;
    while (x->p < x->end && ((*x->p >= 'a' && *x->p <= 'z') || *x->p == '-'))
        x->p++;
    for (size_t i = 0; i < sizeof(flow_x_roundings) / sizeof(flow_x_roundings[0]); i++)
        if (strlen(flow_x_roundings[i].name) == (size_t)(x->p - word) &&
            memcmp(flow_x_roundings[i].name, word, (size_t)(x->p - word)) == 0) {
            x->n[r].rounding = flow_x_roundings[i].rule;
            return r;
        }
    return flow_x_fail(x, "a rate needs its rounding after the '%': half-up, half-even, up or "
                          "down");
}

static int flow_x_term(struct flow_x *x, int depth)
{
    int a = flow_x_unary(x, depth);

    for (;;) {
        if (a < 0)
            return -1;
        flow_x_blanks(x);
        if (x->p == x->end || *x->p != '*')
            return a;
        a = flow_x_rate(x, a);
    }
}

static int flow_x_expr(struct flow_x *x, int depth)
{
    int a = flow_x_term(x, depth);

    for (;;) {
        if (a < 0)
            return -1;
        flow_x_blanks(x);
        if (x->p == x->end || (*x->p != '+' && *x->p != '-'))
            return a;
        enum flow_x_op op = *x->p == '+' ? FLOW_X_ADD : FLOW_X_SUB;
        x->p++;
        int b = flow_x_term(x, depth);
        a = b < 0 ? -1 : flow_x_node(x, op, a, b);
    }
}

/* Parses s[0..len) into x. False with x->why set when it is not an expression. */
static bool flow_x_parse(const char *s, size_t len, struct flow_x *x)
{
    x->count = 0;
    x->why = NULL;
    x->p = s;
    x->end = s + len;
    x->root = flow_x_expr(x, 0);
    if (x->root >= 0) {
        flow_x_blanks(x);
        if (x->p != x->end)
            x->root = flow_x_fail(x, *x->p == ')' ? "a ')' has no '('"
                                                  : "an operator (+, -, *) is expected here");
    }
    return x->root >= 0;
}

/* A date pattern: literal text plus %d %m %Y %y %%. */
bool flow_date_pattern_ok(const char *s, size_t len)
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

bool flow_parse_count(const char *s, size_t len, long min, long max, long *ret)
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

/* Why variable v is not available at a place (the family's rule). */
static const char *flow_var_hint(int v)
{
    switch ((enum flow_var_id)v) {
    case FLOW_V_SECRET_USER:
    case FLOW_V_SECRET_PASSWORD:
        return " (secrets only go into the login's field values and body and into <header> "
               "values, never into URLs, lookups, post steps or lists)";
    case FLOW_V_DATE:
    case FLOW_V_FROM:
    case FLOW_V_TO:
    case FLOW_V_PAGE:
    case FLOW_V_OFFSET:
    case FLOW_V_LIMIT:
        return " (only in <list>)";
    case FLOW_V_SESSION:
        return " (only after the login or <then> call that captures it)";
    case FLOW_V_REF:
        return " (only in post steps)";
    case FLOW_V_CODE:
        return " (only in <resolve>'s request)";
    case FLOW_V_COOKIE:
        return "";
    case FLOW_V_LINE_N:
    case FLOW_V_LINE_I:
    case FLOW_V_LINE_NET:
    case FLOW_V_LINE_TAX:
    case FLOW_V_LINE_GROSS:
    case FLOW_V_LINE_GL_ACCOUNT:
    case FLOW_V_LINE_DESCRIPTION:
    case FLOW_V_LINE_QUANTITY:
        return " (only inside <lines>)";
    case FLOW_V_DOC:
    case FLOW_V_CAPTURE:
        return " (only in post steps after the step that captures it)";
    case FLOW_V_ROW:
        return " (only in <detail get>)";
    case FLOW_V_KEY:
    case FLOW_V_INV_NUMBER:
    case FLOW_V_INV_VENDOR_ID:
    case FLOW_V_INV_VENDOR_NAME:
    case FLOW_V_INV_DOC_TYPE:
    case FLOW_V_INV_ISSUE_DATE:
    case FLOW_V_INV_DUE_DATE:
    case FLOW_V_INV_CURRENCY:
    case FLOW_V_INV_PAYABLE:
    case FLOW_V_INV_NET:
    case FLOW_V_INV_TAX:
    case FLOW_V_INV_GL_ACCOUNT:
    case FLOW_V_INV_DESCRIPTION:
    case FLOW_V_INV_LINE_COUNT:
    case FLOW_V_VENDOR_ID:
    case FLOW_V_VENDOR_NAME:
    case FLOW_V__COUNT:
        break;
    }
    return " (invoice values only in <lookup> and <post>)";
}

static bool flow_names_have(const char *const *names, size_t n, const char *key, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (names[i] && strlen(names[i]) == len && memcmp(names[i], key, len) == 0)
            return true;
    return false;
}

/* The resolve of the flow named by the first n bytes of name, or NULL. */
static const struct flow_resolve *flow_resolve_named(const struct flow *f, const char *name,
                                                     size_t n)
{
    for (size_t i = 0; f && i < f->n_resolves; i++)
        if (f->resolves[i].name && strlen(f->resolves[i].name) == n &&
            memcmp(f->resolves[i].name, name, n) == 0)
            return &f->resolves[i];
    return NULL;
}

/* ${ref.NAME.COLUMN}: a resolve of that name with that column, one per line only in lines. */
static void flow_ref_check(struct flow_ctx *c, const char *key, size_t klen,
                           const struct flow_scope *sc, long line, const char *what)
{
    const char *dot = memchr(key, '.', klen);
    const struct flow_resolve *r = dot ? flow_resolve_named(c->f, key, (size_t)(dot - key)) : NULL;
    bool col = false;

    if (!dot || dot == key || dot + 1 == key + klen) {
        flow_problem(c, line, "%s: ${ref.%.*s}: write ${ref.NAME.COLUMN}", what, (int)klen, key);
        return;
    }
    if (!r) {
        flow_problem(c, line, "%s: ${ref.%.*s}: no <resolve name=\"%.*s\">", what, (int)klen, key,
                     (int)(dot - key), key);
        return;
    }
    for (size_t i = 0; i < r->table.n_cols; i++)
        col = col || (r->table.cols[i].name &&
                      strlen(r->table.cols[i].name) == (size_t)(key + klen - dot - 1) &&
                      memcmp(r->table.cols[i].name, dot + 1, (size_t)(key + klen - dot - 1)) == 0);
    if (!col)
        flow_problem(c, line, "%s: ${ref.%.*s}: resolve '%s' has no column '%.*s'", what, (int)klen,
                     key, r->name, (int)(key + klen - dot - 1), dot + 1);
    else if (r->per_line && !(sc->place & FLOW_P_LINES))
        flow_problem(c, line,
                     "%s: ${ref.%.*s}: resolve '%s' looks up one code per invoice line (its code "
                     "uses line.*): use it inside <lines> or {\"$each-line\": ...}",
                     what, (int)klen, key, r->name);
}

/* The variables usable in scope sc, as a list for a message ("key, invoice.number, ..."). */
static const char *flow_vars_here(const struct flow_scope *sc, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < FLOW_V__COUNT && at + 1 < len; i++) {
        if (!(flow_vars_table[i].where & sc->place))
            continue;
        const char *n = flow_vars_table[i].name;
        bool prefix = n[strlen(n) - 1] == '.';
        int w = snprintf(buf + at, len - at, "%s%s%s", at ? ", " : "", n,
                         prefix ? (i == FLOW_V_REF ? "NAME.COLUMN" : "NAME") : "");
        if (w < 0 || (size_t)w >= len - at)
            break;
        at += (size_t)w;
    }
    return at ? buf : "none";
}

/* json:TYPE: a known type, last, and the whole of a JSON body's string; decimal and date take
 * the kind of value they encode. */
static void flow_json_fmt_check(struct flow_ctx *c, const struct flow_ph *ph, size_t i, int kind,
                                bool allowed, long line, const char *what)
{
    const char *arg = ph->fmt[i].arg;
    size_t alen = ph->fmt[i].arg_len;
    const char *type = NULL;

    for (size_t t = 0; t < sizeof(flow_json_types) / sizeof(flow_json_types[0]); t++)
        if (strlen(flow_json_types[t]) == alen && memcmp(flow_json_types[t], arg, alen) == 0)
            type = flow_json_types[t];
    if (!type) {
        flow_problem(c, line,
                     "%s: json:%.*s: unknown type (string, int, number, decimal, date, bool, raw)",
                     what, (int)alen, arg);
        return;
    }
    if (!allowed || i + 1 != ph->n_fmt) {
        flow_problem(c, line,
                     "%s: json:%s only in a JSON body, last in a placeholder that is the whole "
                     "string (\"${...|json:%s}\"): the string then becomes that JSON value",
                     what, type, type);
        return;
    }
    if (strcmp(type, "decimal") == 0 && kind == FLOW_K_DATE)
        flow_problem(c, line, "%s: json:decimal of a date (${%.*s})", what, (int)ph->var_len,
                     ph->var);
    if (strcmp(type, "date") == 0 && kind == FLOW_K_AMOUNT)
        flow_problem(c, line, "%s: json:date of an amount (${%.*s})", what, (int)ph->var_len,
                     ph->var);
}

/* Checks that variable v (key: the rest of a prefix name) may be used in scope sc. */
static void flow_var_check(struct flow_ctx *c, int v, const char *key, size_t klen,
                           const struct flow_scope *sc, long line, const char *what)
{
    const char *hint = sc->hint ? sc->hint : "";
    bool found = false;

    if (!(flow_vars_table[v].where & sc->place)) {
        flow_problem(c, line, "%s: ${%s%.*s} is not available here%s", what,
                     flow_vars_table[v].name, (int)klen, key ? key : "", flow_var_hint(v));
        return;
    }
    switch ((enum flow_var_id)v) {
    case FLOW_V_SECRET_USER:
    case FLOW_V_SECRET_PASSWORD:
        if (sc->name)
            flow_problem(c, line,
                         "%s: ${%s} in a field name: secrets only go into login form field "
                         "values",
                         what, flow_vars_table[v].name);
        break;
    case FLOW_V_DOC:
        if (!sc->doc)
            flow_problem(c, line,
                         "%s: ${doc} is not captured before this step (a saved rule or <capture "
                         "name=\"doc\"> on an earlier step)%s",
                         what, hint);
        break;
    case FLOW_V_CAPTURE:
        if (!flow_names_have(sc->captures, sc->n_captures, key, klen))
            flow_problem(c, line, "%s: ${capture.%.*s}: no earlier step captures '%.*s'%s", what,
                         (int)klen, key, (int)klen, key, hint);
        break;
    case FLOW_V_SESSION:
        if (!flow_names_have(sc->sessions, sc->n_sessions, key, klen))
            flow_problem(c, line,
                         "%s: ${session.%.*s}: no <capture name=\"%.*s\"> of the login or of a "
                         "<then> call before here",
                         what, (int)klen, key, (int)klen, key);
        break;
    case FLOW_V_REF:
        flow_ref_check(c, key, klen, sc, line, what);
        break;
    case FLOW_V_ROW:
        for (size_t i = 0; sc->rows && i < sc->rows->n_cols; i++)
            found = found || (sc->rows->cols[i].name && strlen(sc->rows->cols[i].name) == klen &&
                              memcmp(sc->rows->cols[i].name, key, klen) == 0);
        if (!found)
            flow_problem(c, line, "%s: ${row.%.*s}: '%.*s' is not a column of the lookup table",
                         what, (int)klen, key, (int)klen, key);
        break;
    case FLOW_V_KEY:
    case FLOW_V_INV_NUMBER:
    case FLOW_V_INV_VENDOR_ID:
    case FLOW_V_INV_VENDOR_NAME:
    case FLOW_V_INV_DOC_TYPE:
    case FLOW_V_INV_ISSUE_DATE:
    case FLOW_V_INV_DUE_DATE:
    case FLOW_V_INV_CURRENCY:
    case FLOW_V_INV_PAYABLE:
    case FLOW_V_INV_NET:
    case FLOW_V_INV_TAX:
    case FLOW_V_INV_GL_ACCOUNT:
    case FLOW_V_INV_DESCRIPTION:
    case FLOW_V_INV_LINE_COUNT:
    case FLOW_V_VENDOR_ID:
    case FLOW_V_VENDOR_NAME:
    case FLOW_V_LINE_N:
    case FLOW_V_LINE_I:
    case FLOW_V_LINE_NET:
    case FLOW_V_LINE_TAX:
    case FLOW_V_LINE_GROSS:
    case FLOW_V_LINE_GL_ACCOUNT:
    case FLOW_V_LINE_DESCRIPTION:
    case FLOW_V_LINE_QUANTITY:
    case FLOW_V_DATE:
    case FLOW_V_FROM:
    case FLOW_V_TO:
    case FLOW_V_PAGE:
    case FLOW_V_OFFSET:
    case FLOW_V_LIMIT:
    case FLOW_V_COOKIE:
    case FLOW_V_CODE:
    case FLOW_V__COUNT:
        break;
    }
}

/* The amount variables usable in scope sc, as a list for a message. */
static const char *flow_amounts_here(const struct flow_scope *sc, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < FLOW_V__COUNT && at + 1 < len; i++) {
        if (!(flow_vars_table[i].where & sc->place) || flow_vars_table[i].kind != FLOW_K_AMOUNT)
            continue;
        int w = snprintf(buf + at, len - at, "%s%s", at ? ", " : "", flow_vars_table[i].name);
        if (w < 0 || (size_t)w >= len - at)
            break;
        at += (size_t)w;
    }
    return at ? buf : "none";
}

/* Checks an expression placeholder: its syntax, and every operand an amount variable allowed
 * in scope sc. Records the problems; cannot fail. */
static void flow_expr_check(struct flow_ctx *c, const struct flow_ph *ph,
                            const struct flow_scope *sc, long line, const char *what)
{
    struct flow_x x;
    char here[512];

    if (!flow_x_parse(ph->var, ph->var_len, &x)) {
        flow_problem(c, line,
                     "%s: ${%.*s}: %s (an expression adds and subtracts amounts of the invoice: "
                     "${line.net + line.tax}, ${-invoice.tax}, ${invoice.net * 19%% half-up})",
                     what, (int)ph->var_len, ph->var, x.why);
        return;
    }
    for (int i = 0; i < x.count; i++) {
        const struct flow_x_node *nd = &x.n[i];
        const char *key;
        size_t klen;
        int v;

        if (nd->op != FLOW_X_VAR)
            continue;
        v = flow_var_lookup(nd->name, nd->name_len, &key, &klen);
        if (v < 0) {
            const char *dash = memchr(nd->name, '-', nd->name_len);
            flow_problem(c, line, "%s: ${%.*s}: unknown variable '%.*s' (amounts here: %s)%s", what,
                         (int)ph->var_len, ph->var, (int)nd->name_len, nd->name,
                         flow_amounts_here(sc, here, sizeof(here)),
                         dash ? "; a '-' between two amounts needs blanks around it" : "");
            continue;
        }
        if (flow_vars_table[v].kind != FLOW_K_AMOUNT) {
            flow_problem(c, line,
                         "%s: ${%.*s}: '%.*s' is %s, not an amount: an expression takes the "
                         "invoice's amounts only, all in its currency (amounts here: %s)",
                         what, (int)ph->var_len, ph->var, (int)nd->name_len, nd->name,
                         flow_vars_table[v].kind == FLOW_K_DATE ? "a date" : "text",
                         flow_amounts_here(sc, here, sizeof(here)));
            continue;
        }
        flow_var_check(c, v, key, klen, sc, line, what);
    }
}

/* Checks one template (flow-int.h). */
void flow_tpl_check(struct flow_ctx *c, const char *tmpl, const struct flow_scope *sc, long line,
                    const char *what)
{
    const char *p = tmpl;

    if (!tmpl)
        return;
    while ((p = strstr(p, "${")) != NULL) {
        struct flow_ph ph;
        const char *why = NULL, *key;
        const char *next = flow_ph_parse(p + 2, &ph, &why);
        size_t klen;
        int v;
        enum flow_kind kind;

        if (!next) {
            flow_problem(c, line, "%s: %s in \"%s\"", what, why, tmpl);
            return;
        }
        /* an expression first: a prefix variable (row., cookie.) would take any rest */
        bool expr = flow_expr_is(ph.var, ph.var_len);
        v = expr ? -1 : flow_var_lookup(ph.var, ph.var_len, &key, &klen);
        if (expr) {
            flow_expr_check(c, &ph, sc, line, what);
            kind = FLOW_K_AMOUNT;
        } else if (v < 0) {
            char known[1024];
            bool dash = memchr(ph.var, '-', ph.var_len) != NULL;
            flow_problem(c, line, "%s: unknown variable ${%.*s} (here: %s)%s", what,
                         (int)ph.var_len, ph.var, flow_vars_here(sc, known, sizeof(known)),
                         dash ? "; to subtract, write blanks around the '-' (${invoice.payable "
                                "- invoice.tax})"
                              : "");
            p = next;
            continue;
        } else {
            flow_var_check(c, v, key, klen, sc, line, what);
            kind = flow_vars_table[v].kind;
        }
        bool whole = p == tmpl && *next == '\0';
        for (size_t i = 0; i < ph.n_fmt; i++) {
            int fid = flow_fmt_lookup(ph.fmt[i].name, ph.fmt[i].name_len);
            const char *arg = ph.fmt[i].arg;
            size_t alen = ph.fmt[i].arg_len;
            long n;

            if (fid < 0) {
                flow_problem(
                    c, line,
                    "%s: unknown formatter '%.*s' in ${%.*s...} (formatters: date:PATTERN, "
                    "amount:DG, minor, abs, map:a=b,..., upper, lower, trunc:N, url, and in "
                    "a JSON body json:TYPE)",
                    what, (int)ph.fmt[i].name_len, ph.fmt[i].name, (int)ph.var_len, ph.var);
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
            case FLOW_F_MINOR:
                if (kind != FLOW_K_AMOUNT)
                    flow_problem(c, line, "%s: 'minor' writes an amount, not ${%.*s}", what,
                                 (int)ph.var_len, ph.var);
                kind = FLOW_K_TEXT;
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
            case FLOW_F_JSON:
                flow_json_fmt_check(c, &ph, i, kind, sc->json_value && whole, line, what);
                kind = FLOW_K_TEXT;
                break;
            case FLOW_F__COUNT:
                break;
            }
        }
        p = next;
    }
}

void flow_amount_tpl_check(struct flow_ctx *c, const char *tmpl, const struct flow_scope *sc,
                           long line, const char *what)
{
    struct flow_ph ph;
    const char *why = NULL, *key;
    const char *next =
        tmpl && strncmp(tmpl, "${", 2) == 0 ? flow_ph_parse(tmpl + 2, &ph, &why) : NULL;
    size_t klen;
    bool amount = next && !*next;

    if (amount && !flow_expr_is(ph.var, ph.var_len)) {
        int v = flow_var_lookup(ph.var, ph.var_len, &key, &klen);
        amount = v < 0 || flow_vars_table[v].kind == FLOW_K_AMOUNT; /* unknown: said below */
    }
    for (size_t i = 0; amount && i < ph.n_fmt; i++)
        amount = ph.fmt[i].name_len == 3 && memcmp(ph.fmt[i].name, "abs", 3) == 0;
    if (!amount) {
        flow_problem(c, line,
                     "%s: \"%s\" is not one amount of the invoice: write one placeholder of an "
                     "amount or an amount expression, as ${invoice.payable} or "
                     "${invoice.net + invoice.tax|abs} (of the formatters only abs keeps an "
                     "amount)",
                     what, tmpl ? tmpl : "");
        return;
    }
    flow_tpl_check(c, tmpl, sc, line, what);
}

const char *flow_tpl_json_type(const char *tmpl, char **ret_plain)
{
    struct flow_ph ph;
    const char *why;

    if (!tmpl || strncmp(tmpl, "${", 2) != 0)
        return NULL;
    const char *next = flow_ph_parse(tmpl + 2, &ph, &why);
    if (!next || *next || ph.n_fmt == 0)
        return NULL;
    size_t last = ph.n_fmt - 1;
    if (ph.fmt[last].name_len != 4 || memcmp(ph.fmt[last].name, "json", 4) != 0)
        return NULL;
    const char *type = NULL;
    for (size_t t = 0; t < sizeof(flow_json_types) / sizeof(flow_json_types[0]); t++)
        if (strlen(flow_json_types[t]) == ph.fmt[last].arg_len &&
            memcmp(flow_json_types[t], ph.fmt[last].arg, ph.fmt[last].arg_len) == 0)
            type = flow_json_types[t];
    if (!type)
        return NULL;
    /* the template up to the '|' before json, then the closing brace */
    size_t head = (size_t)(ph.fmt[last].name - 1 - tmpl);
    char *plain = apbot_xmalloc(head + 2);
    memcpy(plain, tmpl, head);
    memcpy(plain + head, "}", 2);
    *ret_plain = plain;
    return type;
}

/* True when the name s[0..len) is var, or of var's family when var ends in '.'. */
static bool flow_name_is(const char *s, size_t len, const char *var, size_t vl)
{
    return var[vl - 1] == '.' ? len > vl && memcmp(s, var, vl) == 0
                              : len == vl && memcmp(s, var, vl) == 0;
}

bool flow_tpl_uses(const char *tmpl, const char *var)
{
    const char *p = tmpl;
    size_t vl = strlen(var);

    while (p && (p = strstr(p, "${")) != NULL) {
        struct flow_ph ph;
        struct flow_x x;
        const char *why;
        const char *next = flow_ph_parse(p + 2, &ph, &why);
        if (!next)
            return false;
        if (flow_name_is(ph.var, ph.var_len, var, vl))
            return true;
        /* an expression's operands (one that does not parse was refused at load) */
        if (flow_expr_is(ph.var, ph.var_len) && flow_x_parse(ph.var, ph.var_len, &x))
            for (int i = 0; i < x.count; i++)
                if (x.n[i].op == FLOW_X_VAR && flow_name_is(x.n[i].name, x.n[i].name_len, var, vl))
                    return true;
        p = next;
    }
    return false;
}

/* ---- expansion ------------------------------------------------------------------------------ */

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

/* The value of names[i] whose name is key[0..klen), or NULL. */
static const char *flow_named(const char *const *names, const char *const *values, size_t n,
                              const char *key, size_t klen)
{
    for (size_t i = 0; names && values && i < n; i++)
        if (names[i] && strlen(names[i]) == klen && memcmp(names[i], key, klen) == 0)
            return values[i];
    return NULL;
}

/* An amount value: minor units in the invoice's currency exponent. */
static int flow_val_amount(const struct invoice *inv, int64_t minor, enum flow_var_id v,
                           struct flow_val *ret, char *err, size_t errlen)
{
    if (inv->exponent < 0 || inv->exponent > 9)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "${%s}: currency '%s' has no exponent",
                          flow_vars_table[v].name, inv->currency);
    ret->minor = minor;
    ret->exponent = inv->exponent;
    return APBOT_OK;
}

/* The tax of the line vars->line (its share when the invoice's lines state none: linetax.h)
 * into *ret; APBOT_E_DATA, naming v, when it cannot be told. */
static int flow_line_tax(enum flow_var_id v, const struct flow_vars *vars, int64_t *ret, char *err,
                         size_t errlen)
{
    const struct invoice *inv = vars->inv;
    const struct linetax *t = vars->taxes;
    struct linetax own;
    size_t i = vars->line_n;
    int rc = APBOT_OK;

    if (i < 1 || i > inv->n_lines || vars->line != &inv->lines[i - 1]) {
        *ret = vars->line->tax; /* a line given on its own: what it states */
        return APBOT_OK;
    }
    if (!t || t->n != inv->n_lines) {
        linetax_init(&own, inv);
        t = &own;
    }
    if (t->ok)
        *ret = t->tax[i - 1];
    else
        rc = apbot_fail(err, errlen, APBOT_E_DATA, "${%s}: %s", flow_vars_table[v].name, t->why);
    if (t == &own)
        linetax_done(&own);
    return rc;
}

/* snprintf(num, 32, "%zu", n) without printf's machinery. Returns num. */
static char *flow_utoa(char num[32], size_t n)
{
    char digits[32];
    size_t k = 0;
    do {
        digits[k++] = (char)('0' + n % 10);
        n /= 10;
    } while (n);
    for (size_t i = 0; i < k; i++)
        num[i] = digits[k - 1 - i];
    num[k] = '\0';
    return num;
}

/*
 * The value of variable v into *ret (ret->text heap, or an amount). With ret_ref non-NULL, a
 * value that is text as it stands (not the key, not an amount) is not copied: *ret_ref points
 * at it (into vars, num or a static string) and ret->text stays NULL; else *ret_ref is NULL.
 */
static int flow_val_get(const struct flow *f, enum flow_var_id v, const char *key, size_t klen,
                        const struct flow_vars *vars, struct flow_val *ret, const char **ret_ref,
                        char num[32], char *err, size_t errlen)
{
    static const struct flow_vars none;
    const struct invoice *inv;
    const struct invoice_line *ln;
    const char *s = NULL;

    if (ret_ref)
        *ret_ref = NULL;
    if (!vars)
        vars = &none;
    inv = vars->inv;
    ln = vars->line;
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
        if (!inv)
            break; /* empty text */
        return flow_val_amount(inv,
                               v == FLOW_V_INV_PAYABLE ? inv->payable
                               : v == FLOW_V_INV_NET   ? inv->net_total
                                                       : inv->tax_total,
                               v, ret, err, errlen);
    case FLOW_V_INV_GL_ACCOUNT:
        s = inv && inv->n_lines ? inv->lines[0].gl_account : NULL;
        break;
    case FLOW_V_INV_DESCRIPTION:
        s = inv && inv->n_lines ? inv->lines[0].description : NULL;
        break;
    case FLOW_V_INV_LINE_COUNT:
        if (inv) {
            s = flow_utoa(num, inv->n_lines);
        }
        break;
    case FLOW_V_LINE_N:
        if (ln && vars->line_n > 0) {
            s = flow_utoa(num, vars->line_n);
        }
        break;
    case FLOW_V_LINE_I:
        if (ln && vars->line_n > 0) {
            s = flow_utoa(num, vars->line_n - 1); /* the index from 0 (JSF, Spring, Rails) */
        }
        break;
    case FLOW_V_LINE_NET:
        if (!inv || !ln)
            break; /* empty text */
        return flow_val_amount(inv, ln->net, v, ret, err, errlen);
    case FLOW_V_LINE_TAX:
    case FLOW_V_LINE_GROSS: {
        int64_t amount = 0;
        if (!inv || !ln)
            break; /* empty text */
        int rc = flow_line_tax(v, vars, &amount, err, errlen);
        if (rc != APBOT_OK)
            return rc;
        if (v == FLOW_V_LINE_GROSS && money_add(&amount, ln->net) != APBOT_OK)
            return apbot_fail(err, errlen, APBOT_E_DATA, "${line.gross}: out of range");
        return flow_val_amount(inv, amount, v, ret, err, errlen);
    }
    case FLOW_V_LINE_GL_ACCOUNT:
        s = ln ? ln->gl_account : NULL;
        break;
    case FLOW_V_LINE_DESCRIPTION:
        s = ln ? ln->description : NULL;
        break;
    case FLOW_V_LINE_QUANTITY:
        s = ln ? ln->quantity : NULL;
        break;
    case FLOW_V_DOC:
        s = vars->doc;
        break;
    case FLOW_V_CAPTURE:
        s = flow_named(vars->capture_names, vars->capture_values, vars->n_captures, key, klen);
        break;
    case FLOW_V_ROW:
        s = flow_named(vars->row_names, vars->row_values, vars->n_row, key, klen);
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
    case FLOW_V_FROM:
        s = vars->from;
        break;
    case FLOW_V_TO:
        s = vars->to;
        break;
    case FLOW_V_PAGE:
        snprintf(num, 32, "%d", vars->page);
        s = num;
        break;
    case FLOW_V_OFFSET:
    case FLOW_V_LIMIT:
        if (vars->page_size > 0) {
            long page = vars->page > 0 ? vars->page : 1;
            snprintf(num, 32, "%ld",
                     v == FLOW_V_LIMIT ? vars->page_size : (page - 1) * vars->page_size);
            s = num;
        }
        break;
    case FLOW_V_SESSION:
        s = flow_named(vars->session_names, vars->session_values, vars->n_session, key, klen);
        break;
    case FLOW_V_COOKIE:
    case FLOW_V_REF:
        /* the whole name, prefix included: the caller's lookup tells the families apart */
        if (vars->find)
            s = vars->find(vars->find_ctx, key - strlen(flow_vars_table[v].name),
                           klen + strlen(flow_vars_table[v].name), vars->line_n);
        break;
    case FLOW_V_CODE:
        s = vars->code;
        break;
    case FLOW_V__COUNT:
        return apbot_fail(err, errlen, APBOT_E_BUG, "bad variable");
    }
    /* A missing value is empty text (an amount or date without a value is no amount). */
    if (!s && ret->kind == FLOW_K_AMOUNT)
        ret->kind = FLOW_K_TEXT;
    if (ret_ref) {
        *ret_ref = s ? s : "";
        return APBOT_OK;
    }
    ret->text = apbot_xstrdup(s ? s : "");
    return APBOT_OK;
}

/* The value of expression node k into *ret (an amount, or empty text when an operand has no
 * value). APBOT_E_DATA when a step leaves the bounds of an amount. */
static int flow_x_eval(const struct flow *f, const struct flow_x *x, int k,
                       const struct flow_vars *vars, struct flow_val *ret, char *err, size_t errlen)
{
    const struct flow_x_node *nd = &x->n[k];
    struct flow_val b;
    const char *key;
    size_t klen;
    char num[32];
    int rc;

    if (nd->op == FLOW_X_VAR) {
        int v = flow_var_lookup(nd->name, nd->name_len, &key, &klen);
        if (v < 0 || flow_vars_table[v].kind != FLOW_K_AMOUNT)
            return apbot_fail(err, errlen, APBOT_E_INVAL, "'%.*s' is no amount variable",
                              (int)nd->name_len, nd->name); /* refused at load */
        return flow_val_get(f, (enum flow_var_id)v, key, klen, vars, ret, NULL, num, err, errlen);
    }
    rc = flow_x_eval(f, x, nd->a, vars, ret, err, errlen);
    if (rc != APBOT_OK || ret->kind != FLOW_K_AMOUNT)
        return rc; /* an operand without a value: the whole is empty */
    switch (nd->op) {
    case FLOW_X_NEG:
        ret->minor = -ret->minor; /* within the bound: amounts are symmetric */
        return APBOT_OK;
    case FLOW_X_RATE:
        if (money_at_rate(ret->minor, nd->rate, nd->rounding, &ret->minor) != APBOT_OK)
            return apbot_fail(err, errlen, APBOT_E_DATA, "an amount at a rate is out of range");
        return APBOT_OK;
    case FLOW_X_ADD:
    case FLOW_X_SUB:
        rc = flow_x_eval(f, x, nd->b, vars, &b, err, errlen);
        if (rc != APBOT_OK || b.kind != FLOW_K_AMOUNT) {
            free(ret->text);
            *ret = b; /* empty text, or nothing on failure */
            return rc;
        }
        if (money_add(&ret->minor, nd->op == FLOW_X_ADD ? b.minor : -b.minor) != APBOT_OK)
            return apbot_fail(err, errlen, APBOT_E_DATA, "a sum is out of range");
        return APBOT_OK;
    case FLOW_X_VAR:
        break;
    }
    return apbot_fail(err, errlen, APBOT_E_BUG, "bad expression node");
}

/* The value of an expression placeholder into *ret (as flow_val_get's with ret_ref NULL). */
static int flow_expr_eval(const struct flow *f, const struct flow_ph *ph,
                          const struct flow_vars *vars, struct flow_val *ret, char *err,
                          size_t errlen)
{
    struct flow_x x;
    char why[APBOT_ERR_LEN];

    memset(ret, 0, sizeof(*ret));
    if (!flow_x_parse(ph->var, ph->var_len, &x))
        return apbot_fail(err, errlen, APBOT_E_INVAL, "${%.*s}: %s", (int)ph->var_len, ph->var,
                          x.why); /* refused at load */
    int rc = flow_x_eval(f, &x, x.root, vars, ret, why, sizeof(why));
    if (rc != APBOT_OK) {
        free(ret->text);
        memset(ret, 0, sizeof(*ret));
        return apbot_fail(err, errlen, rc, "${%.*s}: %s", (int)ph->var_len, ph->var, why);
    }
    if (ret->kind != FLOW_K_AMOUNT && !ret->text)
        ret->text = apbot_xstrdup("");
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
    struct apbot_buf b;
    int rc = APBOT_OK;

    if (!*d) { /* an optional date left empty stays empty */
        flow_val_set(val, apbot_xstrdup(""));
        return APBOT_OK;
    }
    if (strlen(d) != 10 || d[4] != '-' || d[7] != '-' || !flow_digits(d, 4) ||
        !flow_digits(d + 5, 2) || !flow_digits(d + 8, 2))
        return apbot_fail(err, errlen, APBOT_E_INVAL, "date '%.40s' is not YYYY-MM-DD", d);
    apbot_buf_init(&b, 256);
    for (size_t i = 0; i < plen && rc == APBOT_OK; i++) {
        if (pat[i] != '%' || i + 1 >= plen) {
            rc = apbot_buf_add(&b, pat + i, 1);
            continue;
        }
        switch (pat[++i]) {
        case 'd':
            rc = apbot_buf_add(&b, d + 8, 2);
            break;
        case 'm':
            rc = apbot_buf_add(&b, d + 5, 2);
            break;
        case 'Y':
            rc = apbot_buf_add(&b, d, 4);
            break;
        case 'y':
            rc = apbot_buf_add(&b, d + 2, 2);
            break;
        case '%':
            rc = apbot_buf_add(&b, "%", 1);
            break;
        default:
            apbot_buf_done(&b);
            return apbot_fail(err, errlen, APBOT_E_INVAL, "bad date pattern '%.*s'", (int)plen,
                              pat);
        }
    }
    if (rc != APBOT_OK) {
        apbot_buf_done(&b);
        return apbot_fail(err, errlen, APBOT_E_LIMIT, "formatted date too long");
    }
    flow_val_set(val, apbot_buf_steal(&b, NULL));
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
    case FLOW_F_MINOR:
        if (val->kind != FLOW_K_AMOUNT || val->text)
            return apbot_fail(err, errlen, APBOT_E_INVAL, "'minor' applied to a non-amount");
        snprintf(buf, sizeof(buf), "%lld", (long long)val->minor);
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
        /* The invoice carries a value this flow cannot take: a business exception. */
        if (!flow_map_find(arg, alen, val->text, &mv, &ml))
            return apbot_fail(err, errlen, APBOT_E_DATA, "no mapping for '%.200s' in map:%.*s",
                              val->text, (int)alen, arg);
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
    case FLOW_F_JSON:
        /* flow_json_expand takes it off before expanding; anywhere else it is refused at load */
        return apbot_fail(err, errlen, APBOT_E_INVAL, "json:%.*s outside a JSON body", (int)alen,
                          arg);
    case FLOW_F__COUNT:
        break;
    }
    return apbot_fail(err, errlen, APBOT_E_BUG, "bad formatter");
}

int flow_expand(const struct flow *f, const char *tmpl, const struct flow_vars *vars, char **ret,
                char *err, size_t errlen)
{
    struct apbot_buf b;
    const char *p = tmpl, *hit;
    int rc = APBOT_OK;

    if (!tmpl || !ret)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "no template");
    apbot_buf_init(&b, FLOW_EXPAND_MAX);
    while ((hit = strstr(p, "${")) != NULL) {
        struct flow_ph ph;
        struct flow_val val;
        const char *why = NULL, *key, *ref;
        const char *next = flow_ph_parse(hit + 2, &ph, &why);
        char num[32];
        size_t klen;
        int v;

        if (apbot_buf_add(&b, p, (size_t)(hit - p)) != APBOT_OK)
            goto too_long;
        if (!next) {
            rc = apbot_fail(err, errlen, APBOT_E_INVAL, "%s", why);
            goto out;
        }
        if (flow_expr_is(ph.var, ph.var_len)) {
            ref = NULL;
            rc = flow_expr_eval(f, &ph, vars, &val, err, errlen);
        } else if ((v = flow_var_lookup(ph.var, ph.var_len, &key, &klen)) < 0) {
            rc = apbot_fail(err, errlen, APBOT_E_INVAL, "unknown variable ${%.*s}", (int)ph.var_len,
                            ph.var);
        } else {
            /* A value without formatters is appended as it stands, not copied first. */
            rc = flow_val_get(f, (enum flow_var_id)v, key, klen, vars, &val,
                              ph.n_fmt == 0 ? &ref : NULL, num, err, errlen);
        }
        if (rc != APBOT_OK)
            goto out;
        if (ph.n_fmt == 0 && ref) {
            if (apbot_buf_adds(&b, ref) != APBOT_OK)
                goto too_long;
            p = next;
            continue;
        }
        for (size_t i = 0; i < ph.n_fmt && rc == APBOT_OK; i++)
            rc = flow_apply(&val, &ph, i, err, errlen);
        if (rc == APBOT_OK)
            rc = flow_val_text(&val, err, errlen);
        if (rc == APBOT_OK && apbot_buf_adds(&b, val.text ? val.text : "") != APBOT_OK) {
            free(val.text);
            goto too_long;
        }
        free(val.text);
        if (rc != APBOT_OK)
            goto out;
        p = next;
    }
    if (apbot_buf_adds(&b, p) != APBOT_OK)
        goto too_long;
    *ret = apbot_buf_steal(&b, NULL);
    return APBOT_OK;
too_long:
    rc = apbot_fail(err, errlen, APBOT_E_LIMIT, "expanded template longer than %d bytes",
                    FLOW_EXPAND_MAX);
out:
    apbot_buf_wipe_done(&b); /* it may hold a secret */
    return rc;
}

int flow_expand_amount(const struct flow *f, const char *tmpl, const struct flow_vars *vars,
                       int64_t *ret_minor, int *ret_exponent, char *err, size_t errlen)
{
    struct flow_ph ph;
    struct flow_val val;
    const char *why = NULL, *key;
    const char *next =
        tmpl && strncmp(tmpl, "${", 2) == 0 ? flow_ph_parse(tmpl + 2, &ph, &why) : NULL;
    char num[32];
    size_t klen;
    int v, rc;

    if (!next || *next)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "'%.100s' is not one amount",
                          tmpl ? tmpl : "");
    if (flow_expr_is(ph.var, ph.var_len))
        rc = flow_expr_eval(f, &ph, vars, &val, err, errlen);
    else if ((v = flow_var_lookup(ph.var, ph.var_len, &key, &klen)) < 0 ||
             flow_vars_table[v].kind != FLOW_K_AMOUNT)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "${%.*s} is no amount", (int)ph.var_len,
                          ph.var);
    else
        rc = flow_val_get(f, (enum flow_var_id)v, key, klen, vars, &val, NULL, num, err, errlen);
    for (size_t i = 0; i < ph.n_fmt && rc == APBOT_OK; i++) {
        if (ph.fmt[i].name_len != 3 || memcmp(ph.fmt[i].name, "abs", 3) != 0)
            rc = apbot_fail(err, errlen, APBOT_E_INVAL, "'%.*s' makes no amount",
                            (int)ph.fmt[i].name_len, ph.fmt[i].name);
        else
            rc = flow_apply(&val, &ph, i, err, errlen);
    }
    if (rc == APBOT_OK && (val.kind != FLOW_K_AMOUNT || val.text))
        rc = apbot_fail(err, errlen, APBOT_E_INVAL, "${%.*s} has no amount here", (int)ph.var_len,
                        ph.var);
    if (rc == APBOT_OK) {
        *ret_minor = val.minor;
        *ret_exponent = val.exponent;
    }
    free(val.text);
    return rc;
}

const char *flow_literal(const char *tmpl)
{
    if (!tmpl || strstr(tmpl, "${") || strlen(tmpl) > FLOW_EXPAND_MAX)
        return NULL;
    return tmpl;
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
