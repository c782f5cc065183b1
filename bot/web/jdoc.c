/*
 * jdoc.c - JSON answers read under bounds with their numbers kept exact, JSON Pointer, and a
 * writer that puts numbers back byte for byte (see jdoc.h).
 *
 * One linear pass (premark) checks the bounds and the grammar of every number, refuses what
 * could let an ERP's string pass for a number ("\u0000", raw control bytes in a string), and
 * rewrites each number token N as the string "\u0000N"; jansson then parses the rest of the
 * grammar (strings, escapes, UTF-8, structure, duplicate keys). jansson's own tree is used as
 * it is: the marked strings are this file's only convention, and jdoc_kind() is where it is
 * read.
 */
#include "web/jdoc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/buf.h"
#include "apbot/mem.h"

struct jdoc {
    json_t *root;
};

/* The bytes a number token gains when rewritten: the quotes and "\u0000". */
#define JDOC_MARK_GROWTH 8

struct jdoc_limits jdoc_limits_for(size_t max_bytes)
{
    return (struct jdoc_limits){
        .max_bytes = max_bytes, .max_nodes = JDOC_MAX_NODES, .max_depth = JDOC_MAX_DEPTH};
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_hex(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Length of the number token at s (at most n bytes), 0 when there is none or it is malformed. */
static size_t number_len(const char *s, size_t n)
{
    size_t i = 0;
    if (i < n && s[i] == '-')
        i++;
    if (i >= n || !is_digit(s[i]))
        return 0;
    if (s[i] == '0') {
        i++;
    } else {
        while (i < n && is_digit(s[i]))
            i++;
    }
    if (i < n && s[i] == '.') {
        i++;
        if (i >= n || !is_digit(s[i]))
            return 0;
        while (i < n && is_digit(s[i]))
            i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i >= n || !is_digit(s[i]))
            return 0;
        while (i < n && is_digit(s[i]))
            i++;
    }
    return i;
}

bool jdoc_is_number(const char *s, size_t n)
{
    return s && n > 0 && number_len(s, n) == n;
}

/* The string token at text[i] (a '"'): its end after the closing quote, or 0 when it is cut or
 * carries what jdoc refuses (a raw control byte, "\u0000", a bad escape). */
static size_t string_end(const char *t, size_t len, size_t i, char *err, size_t errlen)
{
    for (i++; i < len; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c == '"')
            return i + 1;
        if (c < 0x20) {
            snprintf(err, errlen, "a control byte inside a string at byte %zu", i);
            return 0;
        }
        if (c != '\\')
            continue;
        if (++i >= len)
            break;
        if (t[i] == 'u') {
            if (i + 4 >= len || !is_hex(t[i + 1]) || !is_hex(t[i + 2]) || !is_hex(t[i + 3]) ||
                !is_hex(t[i + 4])) {
                snprintf(err, errlen, "a bad \\u escape at byte %zu", i - 1);
                return 0;
            }
            if (memcmp(t + i + 1, "0000", 4) == 0) {
                snprintf(err, errlen, "a NUL character (\\u0000) in a string at byte %zu", i - 1);
                return 0;
            }
            i += 4;
        }
    }
    snprintf(err, errlen, "the text ends inside a string");
    return 0;
}

/*
 * Checks text against lim and copies it into out with every number token N as "\u0000N".
 * Returns APBOT_OK, APBOT_E_LIMIT or APBOT_E_PARSE (err says what and where).
 */
static int premark(const char *t, size_t len, const struct jdoc_limits *lim, struct apbot_buf *out,
                   char *err, size_t errlen)
{
    size_t nodes = 0, i = 0;
    int depth = 0;

    while (i < len) {
        char c = t[i];
        size_t n = 1;
        if (c == '"') {
            n = string_end(t, len, i, err, errlen);
            if (!n)
                return APBOT_E_PARSE;
            n -= i;
            nodes++;
        } else if (c == '{' || c == '[') {
            if (++depth > lim->max_depth) {
                snprintf(err, errlen, "nested deeper than %d at byte %zu", lim->max_depth, i);
                return APBOT_E_LIMIT;
            }
            nodes++;
        } else if (c == '}' || c == ']') {
            depth--;
        } else if (c == '-' || is_digit(c)) {
            n = number_len(t + i, len - i);
            if (!n) {
                snprintf(err, errlen, "a malformed number at byte %zu", i);
                return APBOT_E_PARSE;
            }
            nodes++;
            if (apbot_buf_add(out, "\"\\u0000", 7) != APBOT_OK ||
                apbot_buf_add(out, t + i, n) != APBOT_OK || apbot_buf_add(out, "\"", 1) != APBOT_OK)
                goto full;
            i += n;
            goto counted;
        } else if (c == 't' || c == 'f' || c == 'n') {
            nodes++;
        }
        if (apbot_buf_add(out, t + i, n) != APBOT_OK)
            goto full;
        i += n;
    counted:
        if (nodes > lim->max_nodes) {
            snprintf(err, errlen, "more than %zu values", lim->max_nodes);
            return APBOT_E_LIMIT;
        }
    }
    return APBOT_OK;
full:
    snprintf(err, errlen, "the marked text passes its bound");
    return APBOT_E_LIMIT;
}

int jdoc_parse(const char *text, size_t len, const struct jdoc_limits *lim, struct jdoc **ret,
               char *err, size_t errlen)
{
    struct apbot_buf out;
    json_error_t je;
    char e[200] = "";
    int rc;

    if (!text || !lim || !ret)
        return APBOT_E_INVAL;
    if (len > lim->max_bytes) {
        snprintf(err, errlen, "%zu bytes of JSON, more than %zu", len, lim->max_bytes);
        return APBOT_E_LIMIT;
    }
    apbot_buf_init(&out, len + lim->max_nodes * JDOC_MARK_GROWTH + 16);
    rc = premark(text, len, lim, &out, e, sizeof(e));
    if (rc != APBOT_OK) {
        snprintf(err, errlen, "%s", e);
        apbot_buf_done(&out);
        return rc;
    }
    json_t *root = json_loadb(out.data ? out.data : "", out.len,
                              JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &je);
    apbot_buf_done(&out);
    if (!root) {
        /* je's position is in the marked text: the line and the message are what helps */
        snprintf(err, errlen, "not JSON: %s (line %d)", je.text, je.line);
        return APBOT_E_PARSE;
    }
    *ret = apbot_xcalloc(1, sizeof(**ret));
    (*ret)->root = root;
    return APBOT_OK;
}

void jdoc_free(struct jdoc *d)
{
    if (!d)
        return;
    json_decref(d->root);
    free(d);
}

const json_t *jdoc_root(const struct jdoc *d)
{
    return d ? d->root : NULL;
}

const char *jdoc_number_text(const json_t *v)
{
    if (!json_is_string(v) || json_string_length(v) < 2 || json_string_value(v)[0] != '\0')
        return NULL;
    return json_string_value(v) + 1;
}

enum jdoc_kind jdoc_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return JDOC_OBJECT;
    case JSON_ARRAY:
        return JDOC_ARRAY;
    case JSON_STRING:
        return jdoc_number_text(v) ? JDOC_NUMBER : JDOC_STRING;
    case JSON_INTEGER:
    case JSON_REAL:
        return JDOC_NUMBER;
    case JSON_TRUE:
    case JSON_FALSE:
        return JDOC_BOOL;
    case JSON_NULL:
        break;
    }
    return JDOC_NULL;
}

json_t *jdoc_number(const char *text)
{
    size_t n = text ? strlen(text) : 0;
    if (!jdoc_is_number(text, n))
        return NULL;
    char *b = apbot_xmalloc(n + 2);
    b[0] = '\0';
    memcpy(b + 1, text, n + 1);
    json_t *v = json_stringn_nocheck(b, n + 1);
    free(b);
    if (!v)
        abort(); /* jansson fails only on out-of-memory (mem.h's policy) */
    return v;
}

bool jdoc_pointer_ok(const char *p)
{
    if (!p)
        return false;
    if (!*p)
        return true;
    if (*p != '/')
        return false;
    for (; *p; p++)
        if (*p == '~' && p[1] != '0' && p[1] != '1')
            return false;
    return true;
}

/* The next reference token of a pointer at *pp (after its '/'), unescaped into tok (room len):
 * its length, or SIZE_MAX when it does not fit. *pp moves to the next '/' or the end. */
static size_t next_token(const char **pp, char *tok, size_t len)
{
    const char *p = *pp;
    size_t n = 0;
    for (; *p && *p != '/'; p++) {
        char c = *p;
        if (c == '~') {
            c = p[1] == '1' ? '/' : '~';
            p++;
        }
        if (n + 1 >= len)
            return SIZE_MAX;
        tok[n++] = c;
    }
    tok[n] = '\0';
    *pp = p;
    return n;
}

const json_t *jdoc_at(const json_t *v, const char *pointer)
{
    char tok[256];
    const char *p = pointer;

    if (!v || !jdoc_pointer_ok(pointer))
        return NULL;
    while (*p) {
        p++; /* the '/' */
        size_t n = next_token(&p, tok, sizeof(tok));
        if (n == SIZE_MAX)
            return NULL;
        if (json_is_object(v)) {
            v = json_object_getn(v, tok, n);
        } else if (json_is_array(v)) {
            if (n == 0 || (n > 1 && tok[0] == '0') || n > 9)
                return NULL;
            size_t idx = 0;
            for (size_t k = 0; k < n; k++) {
                if (!is_digit(tok[k]))
                    return NULL;
                idx = idx * 10 + (size_t)(tok[k] - '0');
            }
            v = json_array_get(v, idx);
        } else {
            return NULL;
        }
        if (!v)
            return NULL;
    }
    return v;
}

/* Appends s (n bytes of UTF-8) as a JSON string. */
static int write_string(struct apbot_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t run = 0;
    if (apbot_buf_add(b, "\"", 1) != APBOT_OK)
        return APBOT_E_LIMIT;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[7];
        size_t en = 0;
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            en = 2;
        } else if (c < 0x20) {
            esc[0] = '\\';
            en = 2;
            switch (c) {
            case '\n':
                esc[1] = 'n';
                break;
            case '\r':
                esc[1] = 'r';
                break;
            case '\t':
                esc[1] = 't';
                break;
            case '\b':
                esc[1] = 'b';
                break;
            case '\f':
                esc[1] = 'f';
                break;
            default:
                memcpy(esc + 1, "u00", 3);
                esc[4] = hex[c >> 4];
                esc[5] = hex[c & 15];
                en = 6;
                break;
            }
        } else {
            continue;
        }
        if (apbot_buf_add(b, s + run, i - run) != APBOT_OK || apbot_buf_add(b, esc, en) != APBOT_OK)
            return APBOT_E_LIMIT;
        run = i + 1;
    }
    if (apbot_buf_add(b, s + run, n - run) != APBOT_OK || apbot_buf_add(b, "\"", 1) != APBOT_OK)
        return APBOT_E_LIMIT;
    return APBOT_OK;
}

int jdoc_write(struct apbot_buf *b, const json_t *v)
{
    const char *num;
    int rc = APBOT_OK;

    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *k;
        json_t *m;
        bool first = true;
        if (apbot_buf_add(b, "{", 1) != APBOT_OK)
            return APBOT_E_LIMIT;
        json_object_foreach((json_t *)v, k, m)
        {
            if ((!first && apbot_buf_add(b, ",", 1) != APBOT_OK) ||
                write_string(b, k, strlen(k)) != APBOT_OK || apbot_buf_add(b, ":", 1) != APBOT_OK ||
                jdoc_write(b, m) != APBOT_OK)
                return APBOT_E_LIMIT;
            first = false;
        }
        return apbot_buf_add(b, "}", 1) == APBOT_OK ? APBOT_OK : APBOT_E_LIMIT;
    }
    case JSON_ARRAY: {
        size_t i;
        json_t *m;
        if (apbot_buf_add(b, "[", 1) != APBOT_OK)
            return APBOT_E_LIMIT;
        json_array_foreach((json_t *)v, i, m)
        {
            if ((i > 0 && apbot_buf_add(b, ",", 1) != APBOT_OK) || jdoc_write(b, m) != APBOT_OK)
                return APBOT_E_LIMIT;
        }
        return apbot_buf_add(b, "]", 1) == APBOT_OK ? APBOT_OK : APBOT_E_LIMIT;
    }
    case JSON_STRING:
        num = jdoc_number_text(v);
        if (num)
            return apbot_buf_adds(b, num) == APBOT_OK ? APBOT_OK : APBOT_E_LIMIT;
        return write_string(b, json_string_value(v), json_string_length(v));
    case JSON_INTEGER:
        rc = apbot_buf_addf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return rc == APBOT_OK ? APBOT_OK : APBOT_E_LIMIT;
    case JSON_REAL:
        /* never built here, and never written: a double is not an amount */
        return APBOT_E_INVAL;
    case JSON_TRUE:
        return apbot_buf_adds(b, "true") == APBOT_OK ? APBOT_OK : APBOT_E_LIMIT;
    case JSON_FALSE:
        return apbot_buf_adds(b, "false") == APBOT_OK ? APBOT_OK : APBOT_E_LIMIT;
    case JSON_NULL:
        break;
    }
    return apbot_buf_adds(b, "null") == APBOT_OK ? APBOT_OK : APBOT_E_LIMIT;
}

char *jdoc_text(const json_t *v, size_t max)
{
    struct apbot_buf b;
    const char *num;

    if (!v)
        return NULL;
    switch (json_typeof(v)) {
    case JSON_STRING:
        num = jdoc_number_text(v);
        if (num)
            return apbot_xstrdup(num);
        if (max && json_string_length(v) > max)
            return NULL;
        return apbot_xstrndup(json_string_value(v), json_string_length(v));
    case JSON_TRUE:
        return apbot_xstrdup("true");
    case JSON_FALSE:
        return apbot_xstrdup("false");
    case JSON_NULL:
        return apbot_xstrdup("null");
    case JSON_OBJECT:
    case JSON_ARRAY:
    case JSON_INTEGER:
    case JSON_REAL:
        break;
    }
    apbot_buf_init(&b, max ? max : SIZE_MAX / 2);
    if (jdoc_write(&b, v) != APBOT_OK) {
        apbot_buf_done(&b);
        return NULL;
    }
    return apbot_buf_steal(&b, NULL);
}
