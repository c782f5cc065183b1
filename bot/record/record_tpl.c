/*
 * record_tpl.c - what a recorded value becomes in the draft: the key, the document number, a
 * value of the sample with its formatters, or the text as it was typed; and the text helpers
 * the draft's writing needs (XML escaping, PCRE2 literals, a document number's pattern, URL
 * templates).
 */
#include "record/record-int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/mem.h"
#include "apbot/text.h"

size_t rec_utf8_char(const unsigned char *p)
{
    /* RFC 3629: no overlongs, no surrogates, nothing past U+10FFFF */
    if (p[0] < 0x80)
        return 1;
    if (p[0] >= 0xC2 && p[0] <= 0xDF)
        return (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (p[0] >= 0xE0 && p[0] <= 0xEF) {
        unsigned char lo = p[0] == 0xE0 ? 0xA0 : 0x80, hi = p[0] == 0xED ? 0x9F : 0xBF;
        return p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80 ? 3 : 0;
    }
    if (p[0] >= 0xF0 && p[0] <= 0xF4) {
        unsigned char lo = p[0] == 0xF0 ? 0x90 : 0x80, hi = p[0] == 0xF4 ? 0x8F : 0xBF;
        return p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80 && (p[3] & 0xC0) == 0x80 ? 4 : 0;
    }
    return 0;
}

bool rec_utf8_ok(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    while (p < end) {
        size_t k = *p ? rec_utf8_char(p) : 1;
        if (k == 0 || (size_t)(end - p) < k)
            return false;
        p += k;
    }
    return true;
}

int rec_xml(struct apbot_buf *b, const char *s)
{
    int rc = APBOT_OK;
    for (const unsigned char *p = (const unsigned char *)s; p && *p && rc == APBOT_OK; p++) {
        if (*p >= 0x80) {
            /* UTF-8 as it is; a byte that is none is U+FFFD (the draft is UTF-8 XML: a value
             * that is not UTF-8 text is an open decision where it is a value) */
            size_t k = rec_utf8_char(p);
            rc = k ? apbot_buf_add(b, p, k) : apbot_buf_adds(b, "\xEF\xBF\xBD");
            p += k ? k - 1 : 0;
            continue;
        }
        switch (*p) {
        case '&':
            rc = apbot_buf_adds(b, "&amp;");
            break;
        case '<':
            rc = apbot_buf_adds(b, "&lt;");
            break;
        case '>':
            rc = apbot_buf_adds(b, "&gt;");
            break;
        case '"':
            rc = apbot_buf_adds(b, "&quot;");
            break;
        case '\t':
        case '\n':
        case '\r':
            rc = apbot_buf_addf(b, "&#%d;", *p);
            break;
        default:
            /* XML 1.0 has no other control characters: a value holding one is a <todo> */
            rc = *p < 0x20 ? apbot_buf_adds(b, "\xEF\xBF\xBD") : apbot_buf_add(b, p, 1);
            break;
        }
    }
    return rc;
}

void rec_add(struct rec *r, struct apbot_buf *b, const char *s)
{
    if (apbot_buf_adds(b, s ? s : "") != APBOT_OK)
        r->full = true;
}

void rec_addn(struct rec *r, struct apbot_buf *b, const void *p, size_t n)
{
    if (apbot_buf_add(b, p, n) != APBOT_OK)
        r->full = true;
}

void rec_addf(struct rec *r, struct apbot_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (apbot_buf_vaddf(b, fmt, ap) != APBOT_OK)
        r->full = true;
    va_end(ap);
}

void rec_addx(struct rec *r, struct apbot_buf *b, const char *s)
{
    if (rec_xml(b, s) != APBOT_OK)
        r->full = true;
}

char *rec_re_literal(const char *s, size_t len)
{
    struct apbot_buf b;
    apbot_buf_init(&b, 4 * len + 16);
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        int rc;
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            while (i + 1 < len &&
                   (s[i + 1] == ' ' || s[i + 1] == '\t' || s[i + 1] == '\n' || s[i + 1] == '\r'))
                i++;
            rc = apbot_buf_adds(&b, "\\s+");
        } else if (strchr("\\^$.|?*+()[]{}#", c)) {
            char e[3] = {'\\', c, 0};
            rc = apbot_buf_adds(&b, e);
        } else {
            rc = apbot_buf_add(&b, &c, 1);
        }
        if (rc != APBOT_OK)
            break;
    }
    return apbot_buf_steal(&b, NULL);
}

char *rec_re_value(const char *value)
{
    size_t n = strlen(value);
    bool digits = n > 0;
    for (size_t i = 0; i < n; i++)
        digits = digits && value[i] >= '0' && value[i] <= '9';
    if (digits)
        return apbot_xstrdup(value[0] == '0' ? "\\d+" : "[1-9][0-9]*");
    struct apbot_buf b;
    apbot_buf_init(&b, 8 * n + 16);
    for (size_t i = 0; i < n;) {
        if (value[i] >= '0' && value[i] <= '9') {
            while (i < n && value[i] >= '0' && value[i] <= '9')
                i++;
            if (apbot_buf_adds(&b, "\\d+") != APBOT_OK)
                break;
            continue;
        }
        size_t j = i;
        while (j < n && !(value[j] >= '0' && value[j] <= '9'))
            j++;
        char *lit = rec_re_literal(value + i, j - i);
        int rc = apbot_buf_adds(&b, lit);
        free(lit);
        if (rc != APBOT_OK)
            break;
        i = j;
    }
    return apbot_buf_steal(&b, NULL);
}

/* ---- URLs ----------------------------------------------------------------------------------- */

static void rec_put(struct apbot_buf *b, const void *p, size_t n)
{
    if (apbot_buf_add(b, p, n) != APBOT_OK)
        return; /* cannot happen: the bound leaves room for every template */
}

static const char *rec_subst_find(const struct rec_url_subst *subst, size_t n, const char *v)
{
    for (size_t i = 0; v && *v && i < n; i++)
        if (subst[i].value && strcmp(subst[i].value, v) == 0)
            return subst[i].tmpl;
    return NULL;
}

char *rec_url_template(const char *path, const struct rec_url_subst *subst, size_t n)
{
    struct apbot_buf b;
    size_t len = strlen(path);
    size_t q = strcspn(path, "?#");

    /* a substitution is at most a few dozen bytes for a value of one: room for all */
    apbot_buf_init(&b, 64 * len + 4096);
    /* the path, segment by segment: "/api/invoices/58/approve" names the document */
    for (size_t i = 0; i < q;) {
        size_t j = i;
        while (j < q && path[j] != '/')
            j++;
        char *seg = text_form_decode(path + i, j - i);
        const char *t = rec_subst_find(subst, n, seg);
        if (t)
            rec_put(&b, t, strlen(t));
        else
            rec_put(&b, path + i, j - i);
        free(seg);
        if (j < q)
            rec_put(&b, "/", 1);
        i = j + 1;
    }
    if (path[q] == '?') {
        size_t end = q + 1 + strcspn(path + q + 1, "#");
        rec_put(&b, "?", 1);
        for (size_t i = q + 1; i < end;) {
            size_t j = i;
            while (j < end && path[j] != '&')
                j++;
            const char *eq = memchr(path + i, '=', j - i);
            if (eq) {
                char *val = text_form_decode(eq + 1, (size_t)(path + j - eq - 1));
                const char *t = rec_subst_find(subst, n, val);
                if (t) {
                    rec_put(&b, path + i, (size_t)(eq - (path + i)) + 1);
                    rec_put(&b, t, strlen(t));
                } else
                    rec_put(&b, path + i, j - i);
                free(val);
            } else {
                rec_put(&b, path + i, j - i);
            }
            if (j < end)
                rec_put(&b, "&", 1);
            i = j + 1;
        }
    }
    return apbot_buf_steal(&b, NULL);
}

/* ---- a recorded value ----------------------------------------------------------------------- */

void rec_tpl_value(struct rec *r, const char *value, size_t line, bool weak,
                   const struct rec_select_info *sel, struct rec_tpl *ret)
{
    struct rec_match m[REC_MATCH_MAX];
    size_t n = 0;

    memset(ret, 0, sizeof(*ret));
    snprintf(ret->tmpl, sizeof(ret->tmpl), "%s", value ? value : "");
    if (!value || !*value) {
        ret->how = REC_TPL_LITERAL;
        return;
    }
    if (r->doc && strcmp(value, r->doc) == 0) {
        ret->how = REC_TPL_DOC;
        snprintf(ret->tmpl, sizeof(ret->tmpl), "${doc}");
        snprintf(ret->why, sizeof(ret->why), "the document number");
        return;
    }
    if (r->key_ref) {
        const char *k = strstr(value, r->key_ref);
        if (k) {
            /* the reference the person typed, maybe inside a search pattern ("%REF%") */
            ret->how = REC_TPL_KEY;
            snprintf(ret->tmpl, sizeof(ret->tmpl), "%.*s${key}%s", (int)(k - value), value,
                     k + strlen(r->key_ref));
            snprintf(ret->why, sizeof(ret->why), "the reference typed: the key");
            return;
        }
    }
    n = rec_values_find(&r->vals, value, line, weak, m, REC_MATCH_MAX);
    if (sel && sel->is_select && sel->label && n == 0) {
        /* a select: the option's label may be what names the value */
        n = rec_values_find(&r->vals, sel->label, line, weak, m, REC_MATCH_MAX);
        if (n)
            snprintf(ret->option, sizeof(ret->option), "label");
        else if ((n = rec_values_find_prefix(&r->vals, sel->label, line, m, REC_MATCH_MAX)) > 0)
            snprintf(ret->option, sizeof(ret->option), "label-prefix");
    }
    if (n == 0) {
        ret->how = REC_TPL_LITERAL;
        return;
    }
    if (rec_match_vars(m, n) > 1) {
        ret->how = REC_TPL_AMBIGUOUS;
        size_t w = (size_t)snprintf(ret->why, sizeof(ret->why), "'%s' is", value);
        for (size_t i = 0; i < n && w < sizeof(ret->why); i++) {
            bool dup = false;
            for (size_t j = 0; j < i && !dup; j++)
                dup = strcmp(m[j].form->var, m[i].form->var) == 0;
            if (dup)
                continue;
            char t[128];
            rec_match_template(&m[i], r->use_abs, NULL, t, sizeof(t));
            w += (size_t)snprintf(ret->why + w, sizeof(ret->why) - w, "%s %s", i ? " and" : "", t);
        }
        return;
    }
    const struct rec_match *best = rec_match_best(m, n, r->dec, r->group);
    char extra[32] = "";
    if (sel && sel->maxlength > 0 && best->form->kind == REC_KIND_TEXT && !best->prefix)
        snprintf(extra, sizeof(extra), "|trunc:%d", sel->maxlength);
    ret->how = REC_TPL_VALUE;
    rec_match_template(best, r->use_abs, extra, ret->tmpl, sizeof(ret->tmpl));
    if (best->prefix)
        snprintf(ret->option, sizeof(ret->option), "label-prefix");
    snprintf(ret->why, sizeof(ret->why), "%s%s%s", best->form->var,
             best->form->fmt[0] ? " as " : "", best->form->fmt);
}
