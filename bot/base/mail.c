/*
 * mail.c - an Internet message composed from its parts (mail.h): addresses checked, the
 * subject encoded, the body in quoted-printable, attachments in base64, multipart/mixed with
 * CRLF line ends. Sending is web/smtp.c's.
 */
#include "base/mail.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/unittest.h"

#define MAIL_LINE 76 /* encoded characters per line at most (RFC 2045) */

/* ---- addresses -------------------------------------------------------------------------- */

static bool atext(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-/=?^_`{|}~", c));
}

static bool label_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

bool mail_address_ok(const char *s)
{
    const char *at, *p;
    size_t labels = 0, len;

    if (!s || (len = strlen(s)) == 0 || len > MAIL_ADDRESS_MAX)
        return false;
    at = strrchr(s, '@');
    if (!at || at == s || at - s > 64)
        return false;
    /* local part: atoms joined by single dots */
    for (p = s; p < at; p++) {
        if (*p == '.') {
            if (p == s || p + 1 == at || p[1] == '.')
                return false;
        } else if (!atext(*p)) {
            return false;
        }
    }
    /* domain: labels of 1..63, no hyphen at either end, joined by single dots */
    for (p = at + 1;;) {
        const char *start = p;
        while (label_char(*p))
            p++;
        if (p == start || p - start > 63 || *start == '-' || p[-1] == '-')
            return false;
        labels++;
        if (*p == '\0')
            break;
        if (*p != '.')
            return false;
        p++;
    }
    return labels >= 2;
}

int mail_split_list(const char *list, char *store, size_t store_len, const char **ret, size_t max,
                    size_t *ret_n, char *err, size_t errlen)
{
    const char *got[MAIL_RCPT_MAX];
    size_t n = 0, used = 0;
    const char *p = list ? list : "";

    if (max > MAIL_RCPT_MAX)
        max = MAIL_RCPT_MAX;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        if (n == max)
            return apbot_fail(err, errlen, APBOT_E_INVAL, "more than %zu addresses", max);
        if (used + len + 1 > store_len || len > MAIL_ADDRESS_MAX)
            return apbot_fail(err, errlen, APBOT_E_INVAL, "an address too long");
        memcpy(store + used, p, len);
        store[used + len] = '\0';
        if (!mail_address_ok(store + used))
            return apbot_fail(err, errlen, APBOT_E_INVAL,
                              "'%.80s' is not a plain address (local@domain.example)",
                              store + used);
        got[n++] = store + used;
        used += len + 1;
        if (!end)
            break;
        p = end + 1;
    }
    memcpy(ret, got, n * sizeof(*got));
    *ret_n = n;
    return APBOT_OK;
}

/* ---- encodings -------------------------------------------------------------------------- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* n bytes of s (n <= 57) as one base64 line into line (>= 77 bytes); returns its length. */
static size_t b64_line(const unsigned char *s, size_t n, char *line)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)s[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)s[i + 1] << 8;
        if (i + 2 < n)
            v |= s[i + 2];
        line[o++] = b64[(v >> 18) & 63];
        line[o++] = b64[(v >> 12) & 63];
        line[o++] = i + 1 < n ? b64[(v >> 6) & 63] : '=';
        line[o++] = i + 2 < n ? b64[v & 63] : '=';
    }
    line[o] = '\0';
    return o;
}

static int add_base64(struct apbot_buf *out, const char *data, size_t len)
{
    char line[MAIL_LINE + 4];
    int rc = APBOT_OK;
    for (size_t i = 0; i < len && rc == APBOT_OK; i += 57) {
        size_t n = b64_line((const unsigned char *)data + i, len - i < 57 ? len - i : 57, line);
        memcpy(line + n, "\r\n", 3);
        rc = apbot_buf_add(out, line, n + 2);
    }
    return rc;
}

/* Length of the UTF-8 character at s (1 for a byte that starts none). */
static size_t char_len(const unsigned char *s)
{
    size_t n = s[0] < 0xC0 ? 1 : s[0] < 0xE0 ? 2 : s[0] < 0xF0 ? 3 : 4;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 1;
    return n;
}

UNITTEST int mail_subject(const char *subject, struct apbot_buf *out)
{
    char clean[1024];
    size_t n = 0;
    bool plain = true;
    const unsigned char *s = (const unsigned char *)(subject ? subject : "");

    /* control characters (a line break above all) become spaces; cut at a character */
    for (size_t i = 0; s[i] && n < sizeof(clean) - 5;) {
        size_t k = char_len(s + i);
        if (s[i] < 0x20 || s[i] == 0x7F) {
            clean[n++] = ' ';
        } else {
            if (s[i] >= 0x80)
                plain = false;
            memcpy(clean + n, s + i, k);
            n += k;
        }
        i += k;
    }
    clean[n] = '\0';
    /* "=?" would read as the start of an encoded word: encode then too */
    /* within 78 characters with "Subject: " (RFC 5322 2.1.1); longer ones fold as words */
    if (plain && !strstr(clean, "=?") && n <= 78 - 9)
        return apbot_buf_adds(out, clean);
    /* encoded words: "=?UTF-8?B?" + base64 of at most 45 bytes + "?=" <= 75 characters */
    int rc = APBOT_OK;
    bool first = true;
    for (size_t i = 0; i < n && rc == APBOT_OK;) {
        size_t take = 0;
        while (i + take < n) {
            size_t k = char_len((const unsigned char *)clean + i + take);
            if (take + k > 45)
                break;
            take += k;
        }
        char word[80];
        size_t w = b64_line((const unsigned char *)clean + i, take, word);
        (void)w;
        rc = apbot_buf_addf(out, "%s=?UTF-8?B?%s?=", first ? "" : "\r\n ", word);
        first = false;
        i += take;
    }
    return rc;
}

UNITTEST int mail_qp(const char *text, struct apbot_buf *out)
{
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *s = (const unsigned char *)(text ? text : "");
    char line[MAIL_LINE + 8];
    size_t n = 0;
    int rc = APBOT_OK;

    for (size_t i = 0; s[i] && rc == APBOT_OK; i++) {
        char enc[4];
        size_t k = 0;
        if (s[i] == '\n') {
            /* a blank at the end of a line is encoded, lest a relay strips it */
            if (n && (line[n - 1] == ' ' || line[n - 1] == '\t')) {
                unsigned char c = (unsigned char)line[n - 1];
                n--;
                if (n + 3 > MAIL_LINE - 1) {
                    memcpy(line + n, "=\r\n", 3);
                    rc = apbot_buf_add(out, line, n + 3);
                    n = 0;
                }
                line[n++] = '=';
                line[n++] = hex[c >> 4];
                line[n++] = hex[c & 15];
            }
            memcpy(line + n, "\r\n", 2);
            if (rc == APBOT_OK)
                rc = apbot_buf_add(out, line, n + 2);
            n = 0;
            continue;
        }
        if ((s[i] >= 33 && s[i] <= 126 && s[i] != '=') || s[i] == ' ' || s[i] == '\t') {
            enc[k++] = (char)s[i];
        } else {
            enc[k++] = '=';
            enc[k++] = hex[s[i] >> 4];
            enc[k++] = hex[s[i] & 15];
        }
        /* a soft line break keeps every line within 76 characters, the '=' included */
        if (n + k > MAIL_LINE - 1) {
            memcpy(line + n, "=\r\n", 3);
            rc = apbot_buf_add(out, line, n + 3);
            n = 0;
        }
        /* a line may not start with a dot alone or end in a blank: neither happens mid-line */
        memcpy(line + n, enc, k);
        n += k;
    }
    if (rc == APBOT_OK && n) {
        if (line[n - 1] == ' ' || line[n - 1] == '\t') {
            unsigned char c = (unsigned char)line[--n];
            line[n++] = '=';
            line[n++] = hex[c >> 4];
            line[n++] = hex[c & 15];
        }
        memcpy(line + n, "\r\n", 2);
        rc = apbot_buf_add(out, line, n + 2);
    }
    return rc;
}

/* ---- the message ------------------------------------------------------------------------ */

static bool token_ok(const char *s, const char *extra, size_t max)
{
    size_t n = 0;
    if (!s || !*s)
        return false;
    for (; s[n]; n++)
        if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z') ||
              (s[n] >= '0' && s[n] <= '9') || strchr(extra, s[n])))
            return false;
    return n <= max;
}

static bool filename_ok(const char *s)
{
    if (!s || !*s || strlen(s) > 60)
        return false;
    for (; *s; s++)
        if (*s < 0x20 || *s > 0x7E || *s == '"' || *s == '\\')
            return false;
    return true;
}

/* "Fri, 05 Dec 2026 07:00:00 +0100" */
static void rfc5322_date(int64_t t, int off_min, char *buf, size_t len)
{
    static const char *const days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t local = (time_t)(t + (int64_t)off_min * 60);
    struct tm tm;
    int a = off_min < 0 ? -off_min : off_min;

    if (!gmtime_r(&local, &tm)) {
        memset(&tm, 0, sizeof(tm));
        tm.tm_mday = 1;
        tm.tm_year = 70;
        tm.tm_wday = 4;
    }
    snprintf(buf, len, "%s, %02d %s %04d %02d:%02d:%02d %c%02d%02d", days[tm.tm_wday % 7],
             tm.tm_mday, months[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
             tm.tm_sec, off_min < 0 ? '-' : '+', a / 60 % 100, a % 60);
}

/* Checks what goes into a header; APBOT_OK or APBOT_E_INVAL with why. */
static int msg_check(const struct mail_msg *m, char *err, size_t errlen)
{
    if (!mail_address_ok(m->from))
        return apbot_fail(err, errlen, APBOT_E_INVAL, "the sender is not a plain address");
    if (!m->to || m->n_to == 0 || m->n_to > MAIL_RCPT_MAX)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "1..%d recipients", MAIL_RCPT_MAX);
    for (size_t i = 0; i < m->n_to; i++)
        if (!mail_address_ok(m->to[i]))
            return apbot_fail(err, errlen, APBOT_E_INVAL, "a recipient is not a plain address");
    if (!token_ok(m->id, "!#$%&'*+-/=?^_`{|}~.", 200))
        return apbot_fail(err, errlen, APBOT_E_INVAL, "a Message-ID that cannot be written");
    if (!token_ok(m->boundary, "'()+_,-./:=?", 60))
        return apbot_fail(err, errlen, APBOT_E_INVAL, "a boundary that cannot be written");
    if (m->text && strstr(m->text, m->boundary))
        return apbot_fail(err, errlen, APBOT_E_INVAL, "the boundary occurs in the text");
    for (size_t i = 0; i < m->n_att; i++) {
        if (!filename_ok(m->att[i].filename) || !filename_ok(m->att[i].type))
            return apbot_fail(err, errlen, APBOT_E_INVAL,
                              "an attachment name or type that "
                              "cannot be written");
    }
    return APBOT_OK;
}

int mail_compose(const struct mail_msg *m, struct apbot_buf *out, char *err, size_t errlen)
{
    char date[64];
    int rc = msg_check(m, err, errlen);
    const char *domain;

    if (rc != APBOT_OK)
        return rc;
    domain = strrchr(m->from, '@') + 1;
    rfc5322_date(m->date, m->utc_offset_min, date, sizeof(date));
    rc = apbot_buf_addf(out, "Date: %s\r\nFrom: %s\r\nTo: ", date, m->from);
    for (size_t i = 0; i < m->n_to && rc == APBOT_OK; i++)
        rc = apbot_buf_addf(out, "%s%s", i ? ",\r\n " : "", m->to[i]);
    if (rc == APBOT_OK)
        rc = apbot_buf_adds(out, "\r\nSubject: ");
    if (rc == APBOT_OK)
        rc = mail_subject(m->subject, out);
    if (rc == APBOT_OK)
        rc = apbot_buf_addf(out,
                            "\r\nMessage-ID: <%s@%s>\r\nMIME-Version: 1.0\r\n"
                            "Auto-Submitted: auto-generated\r\n"
                            "Content-Type: multipart/mixed;\r\n boundary=\"%s\"\r\n\r\n"
                            "This is a message in MIME format.\r\n"
                            "--%s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                            "Content-Transfer-Encoding: quoted-printable\r\n\r\n",
                            m->id, domain, m->boundary, m->boundary);
    if (rc == APBOT_OK)
        rc = mail_qp(m->text, out);
    for (size_t i = 0; i < m->n_att && rc == APBOT_OK; i++) {
        const struct mail_part *a = &m->att[i];
        rc = apbot_buf_addf(out,
                            "--%s\r\nContent-Type: %s;\r\n name=\"%s\"\r\n"
                            "Content-Transfer-Encoding: base64\r\n"
                            "Content-Disposition: attachment;\r\n filename=\"%s\"\r\n\r\n",
                            m->boundary, a->type, a->filename, a->filename);
        if (rc == APBOT_OK)
            rc = add_base64(out, a->data, a->len);
    }
    if (rc == APBOT_OK)
        rc = apbot_buf_addf(out, "--%s--\r\n", m->boundary);
    if (rc != APBOT_OK)
        return apbot_fail(err, errlen, rc, "the message is larger than %zu bytes", out->max);
    return APBOT_OK;
}

int mail_token(char out[MAIL_TOKEN_LEN])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char r[16];
    if (getentropy(r, sizeof(r)) != 0)
        return APBOT_E_IO;
    for (size_t i = 0; i < sizeof(r); i++) {
        out[2 * i] = hex[r[i] >> 4];
        out[2 * i + 1] = hex[r[i] & 15];
    }
    out[32] = '\0';
    return APBOT_OK;
}
