/*
 * flow_json.c - JSON bodies in flows: a <json> element's text read as a template, checked where
 * it stands, and expanded into the JSON a single-page ERP's web client would send.
 *
 * The template is JSON itself (read by web/jdoc, so literal numbers keep their text). Its
 * strings carry ${...} placeholders: a string that is one placeholder ending in |json:TYPE
 * becomes a JSON value of that type, every other string stays one string; an object
 * {"$each-line": T} becomes the array of T expanded once per invoice line. The output is
 * written here, not pasted: a value is always one JSON value, escaped (web/jdoc's writer), so a
 * vendor name with a quote, a backslash or a line break cannot change the call's shape.
 * Decimals and dates take the ERP's encoding (<json-values>). The template expansion itself is
 * flow_template.c's.
 */
#include "apbot/flow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "apbot/buf.h"
#include "apbot/invoice.h"
#include "apbot/linetax.h"
#include "apbot/mem.h"
#include "web/jdoc.h"
#include "flow-int.h"

#define FLOW_JSON_EACH_LINE "$each-line"
#define FLOW_JSON_TEMPLATE_MAX (256 * 1024) /* bytes of a <json> element's text */

/* ---- at load -------------------------------------------------------------------------- */

struct json_t *flow_json_compile(struct flow_ctx *c, const char *text, long line, const char *what)
{
    struct jdoc_limits lim = {
        .max_bytes = FLOW_JSON_TEMPLATE_MAX, .max_nodes = 20000, .max_depth = 32};
    struct jdoc *d = NULL;
    char err[256];

    if (jdoc_parse(text, strlen(text), &lim, &d, err, sizeof(err)) != APBOT_OK) {
        flow_problem(c, line, "%s: the JSON body is not JSON: %s", what, err);
        return NULL;
    }
    json_t *root = json_incref((json_t *)jdoc_root(d));
    jdoc_free(d);
    return root;
}

/* Is v the single-member object {"$each-line": T}? Then T. */
static const json_t *each_line(const json_t *v)
{
    if (!json_is_object(v) || json_object_size(v) != 1)
        return NULL;
    return json_object_get(v, FLOW_JSON_EACH_LINE);
}

void flow_json_check(struct flow_ctx *c, const struct json_t *tpl, const struct flow_scope *sc,
                     long line, const char *what)
{
    const json_t *v = tpl;
    const char *k;
    json_t *m;
    size_t i;

    switch (jdoc_kind(v)) {
    case JDOC_STRING: {
        struct flow_scope s = *sc;
        s.json_value = true;
        flow_tpl_check(c, json_string_value(v), &s, line, what);
        break;
    }
    case JDOC_ARRAY:
        json_array_foreach((json_t *)v, i, m) flow_json_check(c, m, sc, line, what);
        break;
    case JDOC_OBJECT: {
        const json_t *t = each_line(v);
        if (t) {
            struct flow_scope ls = *sc;
            if (!(sc->place & (FLOW_P_STEP_FIELD | FLOW_P_LINES))) {
                flow_problem(c, line,
                             "%s: {\"$each-line\": ...} only in a post step's body (there are "
                             "invoice lines only there)",
                             what);
                break;
            }
            ls.place = FLOW_P_LINES;
            flow_json_check(c, t, &ls, line, what);
            break;
        }
        json_object_foreach((json_t *)v, k, m)
        {
            if (strstr(k, "${") || strcmp(k, FLOW_JSON_EACH_LINE) == 0)
                flow_problem(c, line,
                             "%s: member name \"%s\": names are written as they are (no ${...}; "
                             "\"$each-line\" only as the one member of its object)",
                             what, k);
            flow_json_check(c, m, sc, line, what);
        }
        break;
    }
    case JDOC_NULL:
    case JDOC_BOOL:
    case JDOC_NUMBER:
        break;
    }
}

bool flow_json_uses(const struct json_t *tpl, const char *var)
{
    const char *k;
    json_t *m;
    size_t i;

    switch (jdoc_kind(tpl)) {
    case JDOC_STRING:
        return flow_tpl_uses(json_string_value(tpl), var);
    case JDOC_ARRAY:
        json_array_foreach((json_t *)tpl, i, m) if (flow_json_uses(m, var)) return true;
        return false;
    case JDOC_OBJECT:
        json_object_foreach((json_t *)tpl, k, m) if (flow_json_uses(m, var)) return true;
        return false;
    case JDOC_NULL:
    case JDOC_BOOL:
    case JDOC_NUMBER:
        break;
    }
    return false;
}

/* ---- expansion --------------------------------------------------------------------------- */

struct flow_jx {
    const struct flow *f;
    struct flow_vars vars; /* a copy: line and line_n change inside $each-line */
    struct apbot_buf out;
    char *err;
    size_t errlen;
};

static int jx_limit(struct flow_jx *x)
{
    return apbot_fail(x->err, x->errlen, APBOT_E_LIMIT, "JSON body longer than %d bytes",
                      FLOW_JSON_MAX);
}

static int jx_put(struct flow_jx *x, const char *s, size_t n)
{
    return apbot_buf_add(&x->out, s, n) == APBOT_OK ? APBOT_OK : jx_limit(x);
}

static int jx_puts(struct flow_jx *x, const char *s)
{
    return jx_put(x, s, strlen(s));
}

/* A JSON string of the text s, which must be UTF-8 (JSON is; an ERP would refuse the call or,
 * worse, store something else): a value that is not is refused, never sent. */
static int jx_string(struct flow_jx *x, const char *s)
{
    if (!invoice_utf8_valid(s))
        return apbot_fail(x->err, x->errlen, APBOT_E_INVAL,
                          "a value that is not UTF-8 cannot go into a JSON body");
    json_t *v = json_string_nocheck(s);
    if (!v)
        abort(); /* jansson fails only on out-of-memory (mem.h's policy) */
    int rc = jdoc_write(&x->out, v);
    json_decref(v);
    return rc == APBOT_OK ? APBOT_OK : jx_limit(x);
}

static bool all_digits(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

/* A decimal as this flow's ERP writes it; text is "-123.45" or "120" (checked). */
static int jx_decimal(struct flow_jx *x, const char *text)
{
    const char *d = text[0] == '-' ? text + 1 : text;
    const char *dot = strchr(d, '.');
    size_t ilen = dot ? (size_t)(dot - d) : strlen(d);

    if (!all_digits(d, ilen) || (dot && !all_digits(dot + 1, strlen(dot + 1))))
        return apbot_fail(x->err, x->errlen, APBOT_E_INVAL,
                          "json:decimal of '%.60s', which is no decimal number", text);
    switch (x->f->json_decimal) {
    case FLOW_JSON_DECIMAL_NUMBER:
        return jx_puts(x, text); /* "0120" cannot come from money_format_plain */
    case FLOW_JSON_DECIMAL_TAGGED: {
        int rc = jx_puts(x, "{\"__class__\":\"Decimal\",\"decimal\":");
        if (rc == APBOT_OK)
            rc = jx_string(x, text);
        return rc == APBOT_OK ? jx_puts(x, "}") : rc;
    }
    case FLOW_JSON_DECIMAL_STRING:
        break;
    }
    return jx_string(x, text);
}

/* A date as this flow's ERP writes it; text is YYYY-MM-DD (checked). */
static int jx_date(struct flow_jx *x, const char *t)
{
    if (strlen(t) != 10 || t[4] != '-' || t[7] != '-' || !all_digits(t, 4) ||
        !all_digits(t + 5, 2) || !all_digits(t + 8, 2))
        return apbot_fail(x->err, x->errlen, APBOT_E_INVAL,
                          "json:date of '%.40s', which is no date YYYY-MM-DD", t);
    if (x->f->json_date == FLOW_JSON_DATE_TAGGED) {
        char b[96];
        /* month and day as numbers: 3, not 03 */
        snprintf(b, sizeof(b), "{\"__class__\":\"date\",\"year\":%.4s,\"month\":%d,\"day\":%d}", t,
                 (t[5] - '0') * 10 + (t[6] - '0'), (t[8] - '0') * 10 + (t[9] - '0'));
        return jx_puts(x, b);
    }
    return jx_string(x, t);
}

/* The text of an expanded placeholder written as json:type. */
static int jx_typed(struct flow_jx *x, const char *type, const char *text)
{
    if (strcmp(type, "string") == 0)
        return jx_string(x, text);
    if (!*text)
        return jx_puts(x, "null"); /* an optional value left empty */
    if (strcmp(type, "int") == 0) {
        const char *d = text[0] == '-' ? text + 1 : text;
        if (!all_digits(d, strlen(d)) || strlen(d) > 18 || (d[0] == '0' && d[1]))
            return apbot_fail(x->err, x->errlen, APBOT_E_INVAL,
                              "json:int of '%.60s', which is no integer", text);
        return jx_puts(x, text);
    }
    if (strcmp(type, "number") == 0) {
        if (!jdoc_is_number(text, strlen(text)))
            return apbot_fail(x->err, x->errlen, APBOT_E_INVAL,
                              "json:number of '%.60s', which is no JSON number", text);
        return jx_puts(x, text);
    }
    if (strcmp(type, "decimal") == 0)
        return jx_decimal(x, text);
    if (strcmp(type, "date") == 0)
        return jx_date(x, text);
    if (strcmp(type, "bool") == 0) {
        if (strcmp(text, "true") != 0 && strcmp(text, "false") != 0)
            return apbot_fail(x->err, x->errlen, APBOT_E_INVAL,
                              "json:bool of '%.60s' (true or false)", text);
        return jx_puts(x, text);
    }
    /* raw: a JSON value captured from the ERP (a context object), inserted as JSON */
    struct jdoc_limits lim = jdoc_limits_for(FLOW_JSON_MAX);
    struct jdoc *d = NULL;
    char why[200];
    if (jdoc_parse(text, strlen(text), &lim, &d, why, sizeof(why)) != APBOT_OK)
        return apbot_fail(x->err, x->errlen, APBOT_E_INVAL,
                          "json:raw of a value that is not JSON: %s", why);
    int rc = jdoc_write(&x->out, jdoc_root(d));
    jdoc_free(d);
    return rc == APBOT_OK ? APBOT_OK : jx_limit(x);
}

static int jx_value(struct flow_jx *x, const json_t *v);

static int jx_lines(struct flow_jx *x, const json_t *t)
{
    const struct invoice *inv = x->vars.inv;
    size_t n = inv ? inv->n_lines : 0;
    struct linetax own;
    int rc = jx_puts(x, "[");

    /* the lines' taxes once for the array, unless the caller worked them out */
    bool mine = inv && !x->vars.taxes && flow_json_uses(t, "line.");
    if (mine) {
        linetax_init(&own, inv);
        x->vars.taxes = &own;
    }
    for (size_t i = 0; i < n && rc == APBOT_OK; i++) {
        x->vars.line = &inv->lines[i];
        x->vars.line_n = i + 1;
        if (i)
            rc = jx_puts(x, ",");
        if (rc == APBOT_OK)
            rc = jx_value(x, t);
    }
    x->vars.line = NULL;
    x->vars.line_n = 0;
    if (mine) {
        x->vars.taxes = NULL;
        linetax_done(&own);
    }
    return rc == APBOT_OK ? jx_puts(x, "]") : rc;
}

static int jx_value(struct flow_jx *x, const json_t *v)
{
    const char *k;
    json_t *m;
    size_t i;
    int rc = APBOT_OK;

    switch (jdoc_kind(v)) {
    case JDOC_STRING: {
        const char *tmpl = json_string_value(v);
        char *plain = NULL, *text = NULL;
        const char *type = flow_tpl_json_type(tmpl, &plain);
        rc = flow_expand(x->f, type ? plain : tmpl, &x->vars, &text, x->err, x->errlen);
        if (rc == APBOT_OK)
            rc = type ? jx_typed(x, type, text) : jx_string(x, text);
        if (text)
            explicit_bzero(text, strlen(text)); /* it may be a password */
        free(text);
        free(plain);
        return rc;
    }
    case JDOC_ARRAY:
        rc = jx_puts(x, "[");
        json_array_foreach((json_t *)v, i, m)
        {
            if (rc == APBOT_OK && i)
                rc = jx_puts(x, ",");
            if (rc == APBOT_OK)
                rc = jx_value(x, m);
        }
        return rc == APBOT_OK ? jx_puts(x, "]") : rc;
    case JDOC_OBJECT: {
        const json_t *t = each_line(v);
        if (t)
            return jx_lines(x, t);
        bool first = true;
        rc = jx_puts(x, "{");
        json_object_foreach((json_t *)v, k, m)
        {
            if (rc == APBOT_OK && !first)
                rc = jx_puts(x, ",");
            if (rc == APBOT_OK)
                rc = jx_string(x, k);
            if (rc == APBOT_OK)
                rc = jx_puts(x, ":");
            if (rc == APBOT_OK)
                rc = jx_value(x, m);
            first = false;
        }
        return rc == APBOT_OK ? jx_puts(x, "}") : rc;
    }
    case JDOC_NULL:
    case JDOC_BOOL:
    case JDOC_NUMBER:
        break;
    }
    return jdoc_write(&x->out, v) == APBOT_OK ? APBOT_OK : jx_limit(x);
}

int flow_json_expand(const struct flow *f, const struct json_t *tpl, const struct flow_vars *vars,
                     char **ret, size_t *ret_len, char *err, size_t errlen)
{
    static const struct flow_vars none;
    struct flow_jx x = {.f = f, .vars = vars ? *vars : none, .err = err, .errlen = errlen};

    if (!f || !tpl || !ret)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "no JSON template");
    apbot_buf_init(&x.out, FLOW_JSON_MAX);
    int rc = jx_value(&x, tpl);
    if (rc != APBOT_OK) {
        apbot_buf_wipe_done(&x.out); /* it may hold a secret */
        return rc;
    }
    *ret = apbot_buf_steal(&x.out, ret_len);
    return APBOT_OK;
}
