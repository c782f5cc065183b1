/*
 * har.c - a HAR file read under bounds into struct har (see har.h).
 *
 * The JSON is read by web/jdoc (bounded in bytes, values and depth before jansson builds
 * anything; numbers kept as the text written); the entries are then copied out of jansson's
 * tree into plain strings, each under its own bound, and the tree is dropped. Nothing here
 * interprets a request or an answer: which one is the login or the booking is the recorder's
 * question (record_analyse.c).
 */
#include "record/har.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <jansson.h>

#include "apbot/buf.h"
#include "apbot/mem.h"
#include "base/infile.h"
#include "web/jdoc.h"

/* ---- reading the file --------------------------------------------------------------------- */

int har_read(const char *path, struct har **ret, char *err, size_t errlen)
{
    struct apbot_buf b;
    char chunk[65536];
    int fd = -1, rc;

    if (!path || !ret)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "no HAR file");
    rc = infile_open(path, &fd, err, errlen);
    if (rc != APBOT_OK)
        return rc;
    apbot_buf_init(&b, HAR_FILE_MAX);
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0) {
            rc = apbot_fail(err, errlen, APBOT_E_IO, "%s: cannot read", path);
            break;
        }
        if (n == 0)
            break;
        if (apbot_buf_add(&b, chunk, (size_t)n) != APBOT_OK) {
            rc = apbot_fail(err, errlen, APBOT_E_LIMIT,
                            "%s: more than %u bytes: a HAR this large "
                            "is not read (record a shorter session)",
                            path, HAR_FILE_MAX);
            break;
        }
    }
    close(fd);
    if (rc == APBOT_OK)
        rc = har_parse(apbot_buf_str(&b), b.len, ret, err, errlen);
    apbot_buf_wipe_done(&b); /* it holds the password */
    return rc;
}

/* ---- small readers of jansson's tree -------------------------------------------------------- */

/* A member's string (a number's text too), or NULL. */
static const char *har_str(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    if (!v)
        return NULL;
    const char *num = jdoc_number_text(v);
    if (num)
        return num;
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* A copy of s cut to max bytes, "" for NULL. */
static char *har_dup(const char *s, size_t max)
{
    if (!s)
        return apbot_xstrdup("");
    size_t n = strnlen(s, max);
    return apbot_xstrndup(s, n);
}

/* The pairs (headers, cookies, params) of an array of {name, value} objects: at most
 * HAR_HEADERS_MAX, each cut to HAR_TEXT_MAX; HTTP/2 pseudo-headers (":authority") skipped. */
static struct har_pair *har_pairs(const json_t *arr, size_t *ret_n)
{
    struct har_pair *p = NULL;
    size_t n = 0, cap = 0, i;
    json_t *v;

    *ret_n = 0;
    if (!json_is_array(arr))
        return NULL;
    json_array_foreach((json_t *)arr, i, v)
    {
        const char *name = har_str(v, "name"), *value = har_str(v, "value");
        if (!name || name[0] == ':')
            continue;
        if (apbot_grow((void **)&p, &cap, n, sizeof(*p), HAR_HEADERS_MAX) != APBOT_OK)
            break;
        p[n].name = har_dup(name, HAR_TEXT_MAX);
        p[n].value = har_dup(value, HAR_TEXT_MAX);
        n++;
    }
    *ret_n = n;
    return p;
}

static void har_pairs_free(struct har_pair *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        explicit_bzero(p[i].value, strlen(p[i].value));
        free(p[i].name);
        free(p[i].value);
    }
    free(p);
}

const char *har_header(const struct har_pair *h, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(h[i].name, name) == 0)
            return h[i].value;
    return NULL;
}

/* ---- bodies -------------------------------------------------------------------------------- */

static int har_b64(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || c == '-')
        return 62;
    if (c == '/' || c == '_')
        return 63;
    return -1;
}

/* Decodes base64 (standard or URL alphabet, padding and white space allowed) into a heap buffer
 * of at most max bytes; false when it is not base64 or too long. */
static bool har_unbase64(const char *s, size_t len, size_t max, char **ret, size_t *ret_len)
{
    size_t cap = len / 4 * 3 + 4, n = 0;
    unsigned acc = 0;
    int bits = 0;

    if (cap > max + 4)
        return false;
    char *out = apbot_xmalloc(cap + 1);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '=' || c == ' ' || c == '\n' || c == '\r' || c == '\t')
            continue;
        int v = har_b64(c);
        if (v < 0) {
            free(out);
            return false;
        }
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (char)((acc >> bits) & 0xFF);
        }
    }
    if (n > max) {
        explicit_bzero(out, n);
        free(out);
        return false;
    }
    out[n] = '\0';
    *ret = out;
    *ret_len = n;
    return true;
}

/* The answer's body from content {text, encoding}. */
static void har_content(const json_t *content, struct har_entry *e)
{
    const json_t *t = json_object_get(content, "text");
    const char *enc = har_str(content, "encoding");

    e->body = apbot_xstrdup("");
    e->body_len = 0;
    if (!json_is_string(t) || jdoc_number_text(t))
        return;
    const char *s = json_string_value(t);
    size_t len = json_string_length(t);
    if (enc && strcasecmp(enc, "base64") == 0) {
        char *out = NULL;
        size_t n = 0;
        if (!har_unbase64(s, len, HAR_BODY_MAX, &out, &n)) {
            e->body_dropped = true;
            return;
        }
        free(e->body);
        e->body = out;
        e->body_len = n;
        return;
    }
    if (len > HAR_BODY_MAX) {
        e->body_dropped = true;
        return;
    }
    free(e->body);
    e->body = apbot_xstrndup(s, len);
    e->body_len = strlen(e->body); /* jdoc refuses "\u0000": no NUL inside */
}

static bool har_unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '*';
}

/* Appends s form-encoded (application/x-www-form-urlencoded, as a browser writes it). */
static int har_form_add(struct apbot_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    int rc = APBOT_OK;
    for (const unsigned char *p = (const unsigned char *)s; *p && rc == APBOT_OK; p++) {
        char enc[3] = {'%', hex[*p >> 4], hex[*p & 15]};
        if (har_unreserved(*p))
            rc = apbot_buf_add(b, p, 1);
        else if (*p == ' ')
            rc = apbot_buf_add(b, "+", 1);
        else
            rc = apbot_buf_add(b, enc, 3);
    }
    return rc;
}

/* The request's body from postData {mimeType, text, params}: the text as sent; a HAR that
 * gives only params (some exporters) has them written back in form encoding. */
static void har_post(const json_t *pd, struct har_entry *e)
{
    const json_t *t = json_object_get(pd, "text");

    e->has_body = true;
    e->req_mime = har_dup(har_str(pd, "mimeType"), HAR_TEXT_MAX);
    if (json_is_string(t) && !jdoc_number_text(t) && json_string_length(t) > 0) {
        size_t len = json_string_length(t);
        e->req_body = apbot_xstrndup(json_string_value(t), len > HAR_BODY_MAX ? HAR_BODY_MAX : len);
        e->req_len = strlen(e->req_body);
        return;
    }
    size_t n = 0;
    struct har_pair *params = har_pairs(json_object_get(pd, "params"), &n);
    struct apbot_buf b;
    apbot_buf_init(&b, HAR_BODY_MAX);
    for (size_t i = 0; i < n; i++) {
        if ((i && apbot_buf_add(&b, "&", 1) != APBOT_OK) || har_form_add(&b, params[i].name) ||
            apbot_buf_add(&b, "=", 1) != APBOT_OK || har_form_add(&b, params[i].value))
            break;
    }
    har_pairs_free(params, n);
    e->req_body = apbot_buf_steal(&b, &e->req_len);
}

/* ---- entries ------------------------------------------------------------------------------- */

static bool har_entry_read(const json_t *je, struct har_entry *e, char *err, size_t errlen)
{
    const json_t *rq = json_object_get(je, "request");
    const json_t *rs = json_object_get(je, "response");
    const char *method = har_str(rq, "method"), *url = har_str(rq, "url");

    if (!json_is_object(rq) || !method || !url || !*method || !*url) {
        snprintf(err, errlen, "entry %zu has no request with a method and a URL", e->index);
        return false;
    }
    e->started = har_dup(har_str(je, "startedDateTime"), 64);
    e->method = har_dup(method, 32);
    for (char *m = e->method; *m; m++)
        if (*m >= 'a' && *m <= 'z')
            *m = (char)(*m - 'a' + 'A');
    e->url = har_dup(url, HAR_TEXT_MAX);
    har_url_drop_session(e->url);
    e->req_headers = har_pairs(json_object_get(rq, "headers"), &e->n_req_headers);
    const json_t *pd = json_object_get(rq, "postData");
    if (json_is_object(pd)) {
        har_post(pd, e);
    } else {
        e->req_mime = apbot_xstrdup("");
        e->req_body = apbot_xstrdup("");
    }

    const char *status = json_is_object(rs) ? har_str(rs, "status") : NULL;
    long st = status ? strtol(status, NULL, 10) : 0;
    e->status = st >= 100 && st <= 999 ? (int)st : 0;
    e->resp_headers = har_pairs(json_object_get(rs, "headers"), &e->n_resp_headers);
    const json_t *content = json_object_get(rs, "content");
    e->resp_mime = har_dup(har_str(content, "mimeType"), 256);
    har_content(content, e);
    e->redirect = har_dup(har_str(rs, "redirectURL"), HAR_TEXT_MAX);
    e->resource_type = har_dup(har_str(je, "_resourceType"), 32);

    /* Answered by the browser's cache, not by the ERP: Chromium writes _fromCache ("memory",
     * "disk"); a 304 carries no body of its own. Firefox marks a cache hit with a
     * cache.afterRequest and nothing transferred. */
    const json_t *fc = json_object_get(je, "_fromCache");
    const json_t *cache = json_object_get(je, "cache");
    const char *transfer = har_str(rs, "_transferSize");
    e->from_cache = (fc && !json_is_false(fc) && !json_is_null(fc)) || e->status == 304 ||
                    (json_is_object(json_object_get(cache, "afterRequest")) && transfer &&
                     strcmp(transfer, "0") == 0);
    return true;
}

static void har_entry_done(struct har_entry *e)
{
    free(e->started);
    free(e->method);
    free(e->url);
    har_pairs_free(e->req_headers, e->n_req_headers);
    if (e->req_body)
        explicit_bzero(e->req_body, e->req_len);
    free(e->req_body);
    free(e->req_mime);
    har_pairs_free(e->resp_headers, e->n_resp_headers);
    free(e->resp_mime);
    if (e->body)
        explicit_bzero(e->body, e->body_len);
    free(e->body);
    free(e->redirect);
    free(e->resource_type);
}

int har_parse(const char *text, size_t len, struct har **ret, char *err, size_t errlen)
{
    struct jdoc_limits lim = {
        .max_bytes = HAR_FILE_MAX, .max_nodes = HAR_NODES_MAX, .max_depth = HAR_DEPTH_MAX};
    struct jdoc *d = NULL;
    char why[256];
    int rc;

    if (!text || !ret)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "no HAR text");
    rc = jdoc_parse(text, len, &lim, &d, why, sizeof(why));
    if (rc != APBOT_OK)
        return apbot_fail(err, errlen, rc, "not a HAR file: %s", why);
    const json_t *log = json_object_get(jdoc_root(d), "log");
    const json_t *entries = json_object_get(log, "entries");
    if (!json_is_array(entries)) {
        jdoc_free(d);
        return apbot_fail(err, errlen, APBOT_E_PARSE,
                          "not a HAR file: no log.entries array (save the Network tab with "
                          "\"Save all as HAR\")");
    }
    struct har *h = apbot_xcalloc(1, sizeof(*h));
    h->creator = har_dup(har_str(json_object_get(log, "creator"), "name"), 256);
    h->browser = har_dup(har_str(json_object_get(log, "browser"), "name"), 256);
    size_t n = json_array_size(entries);
    h->dropped = n > HAR_ENTRIES_MAX ? n - HAR_ENTRIES_MAX : 0;
    n -= h->dropped;
    h->entries = apbot_xcalloc(n ? n : 1, sizeof(*h->entries));
    for (size_t i = 0; i < n; i++) {
        struct har_entry *e = &h->entries[h->n];
        e->index = i + 1;
        if (!json_is_object(json_array_get(entries, i))) {
            snprintf(why, sizeof(why), "entry %zu is not an object", i + 1);
            rc = APBOT_E_PARSE;
            break;
        }
        bool ok = har_entry_read(json_array_get(entries, i), e, why, sizeof(why));
        h->n++; /* freed with the rest whatever it holds */
        if (!ok) {
            rc = APBOT_E_PARSE;
            break;
        }
    }
    jdoc_free(d);
    if (rc != APBOT_OK) {
        har_free(h);
        return apbot_fail(err, errlen, rc, "not a HAR file: %s", why);
    }
    *ret = h;
    return APBOT_OK;
}

void har_free(struct har *h)
{
    if (!h)
        return;
    for (size_t i = 0; i < h->n; i++)
        har_entry_done(&h->entries[i]);
    free(h->entries);
    free(h->creator);
    free(h->browser);
    free(h);
}

void har_url_drop_session(char *url)
{
    static const char param[] = ";jsessionid=";
    const size_t pl = sizeof(param) - 1;

    if (!url)
        return;
    for (char *p = url; (p = strchr(p, ';')) != NULL;) {
        size_t q = strcspn(url, "?#");
        if ((size_t)(p - url) >= q)
            return; /* the path's parameters only, never the query's text */
        if (strncasecmp(p, param, pl) != 0) {
            p++;
            continue;
        }
        size_t n = pl + strcspn(p + pl, "/;?#");
        memmove(p, p + n, strlen(p + n) + 1);
    }
}
