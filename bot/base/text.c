/*
 * text.c - escaping untrusted text for terminals and logs (see text.h). Leaf module.
 */
#include "apbot/text.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/mem.h"

/* Length of the valid UTF-8 sequence at p (n bytes left), 0 when it is not one. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    uint32_t cp;
    size_t len;
    if (p[0] < 0x80)
        return 1;
    if (p[0] >= 0xC2 && p[0] <= 0xDF) {
        len = 2;
        cp = p[0] & 0x1F;
    } else if (p[0] >= 0xE0 && p[0] <= 0xEF) {
        len = 3;
        cp = p[0] & 0x0F;
    } else if (p[0] >= 0xF0 && p[0] <= 0xF4) {
        len = 4;
        cp = p[0] & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    if (cp >= 0x80 && cp <= 0x9F)
        return 0; /* C1 controls: escaped like invalid bytes */
    return len;
}

char *text_escape_into(char *dst, size_t len, const char *s, int flags)
{
    size_t o = 0;
    if (!len)
        return dst;
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t n = strlen((const char *)p);
    bool cut = false;
    for (size_t i = 0; i < n;) {
        char tmp[8];
        size_t tl;
        size_t ul = utf8_len(p + i, n - i);
        if (ul == 1 && (p[i] < 0x20 || p[i] == 0x7F) &&
            !((flags & TEXT_KEEP_TAB) && p[i] == '\t')) {
            tl = (size_t)snprintf(tmp, sizeof(tmp), "\\x%02X", p[i]);
            ul = 1;
        } else if (ul == 1 && p[i] == '\\' && !(flags & TEXT_KEEP_BACKSLASH)) {
            memcpy(tmp, "\\\\", 2);
            tl = 2;
        } else if (ul == 0) {
            tl = (size_t)snprintf(tmp, sizeof(tmp), "\\x%02X", p[i]);
            ul = 1;
        } else {
            memcpy(tmp, p + i, ul);
            tl = ul;
        }
        if (o + tl + 1 > len) {
            cut = true;
            break;
        }
        memcpy(dst + o, tmp, tl);
        o += tl;
        i += ul;
    }
    if (cut && len >= 8) {
        while (o + 4 > len) {
            o--;
            while (o > 0 && ((unsigned char)dst[o] & 0xC0) == 0x80)
                o--;
        }
        memcpy(dst + o, "...", 3);
        o += 3;
    }
    dst[o] = '\0';
    return dst;
}

char *text_escape(const char *s, size_t max, int flags)
{
    if (max < 8)
        max = 8;
    size_t n = s ? strlen(s) : 0;
    size_t cap = n * 4 + 1 < max + 1 ? n * 4 + 1 : max + 1;
    if (cap < 8)
        cap = 8;
    char *out = apbot_xmalloc(cap);
    return text_escape_into(out, cap, s, flags);
}

char *text_mask(const char *s, const char *a, const char *b)
{
    if (!s)
        return NULL;
    size_t len = strlen(s);
    size_t alen = a ? strlen(a) : 0, blen = b ? strlen(b) : 0;
    char *out = apbot_xmalloc(len * 3 + 1); /* "***" is at most 3x a one-byte secret */
    size_t o = 0;
    const char *p = s, *na = alen ? strstr(p, a) : NULL, *nb = blen ? strstr(p, b) : NULL;
    while (na || nb) {
        /* the next secret: the earlier one, a where both start at one place */
        bool take_a = na && (!nb || na <= nb);
        const char *at = take_a ? na : nb;
        memcpy(out + o, p, (size_t)(at - p));
        o += (size_t)(at - p);
        memcpy(out + o, "***", 3);
        o += 3;
        p = at + (take_a ? alen : blen);
        /* an occurrence that started inside the one just masked is not one any more */
        if (na && na < p)
            na = strstr(p, a);
        if (nb && nb < p)
            nb = strstr(p, b);
    }
    size_t rest = len - (size_t)(p - s);
    memcpy(out + o, p, rest + 1);
    return out;
}

void text_mask_into(char *buf, size_t len, const char *a, const char *b)
{
    if (!buf || !len || !buf[0])
        return;
    /* Most texts hold neither secret: then the mask is the text itself, which fits. */
    if (!(a && *a && strstr(buf, a)) && !(b && *b && strstr(buf, b)))
        return;
    char *m = text_mask(buf, a, b);
    text_cut_utf8(m, len - 1);
    memcpy(buf, m, strlen(m) + 1);
    free(m);
}

void text_cut_utf8(char *s, size_t max)
{
    size_t len = strlen(s);
    if (len <= max)
        return;
    size_t n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    s[n] = '\0';
}

char *text_base64(const void *s, size_t n)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = s;
    char *out = apbot_xmalloc((n + 2) / 3 * 4 + 1), *o = out;

    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        *o++ = abc[(v >> 18) & 63];
        *o++ = abc[(v >> 12) & 63];
        *o++ = i + 1 < n ? abc[(v >> 6) & 63] : '=';
        *o++ = i + 2 < n ? abc[v & 63] : '=';
    }
    *o = '\0';
    return out;
}

int text_hex_value(int c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

char *text_form_decode(const char *s, size_t n)
{
    char *out = apbot_xmalloc(n + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int hi, lo;
        if (s[i] == '+') {
            out[o++] = ' ';
        } else if (s[i] == '%' && i + 2 < n &&
                   (hi = text_hex_value((unsigned char)s[i + 1])) >= 0 &&
                   (lo = text_hex_value((unsigned char)s[i + 2])) >= 0) {
            out[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = '\0';
    return out;
}
