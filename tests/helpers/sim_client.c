/*
 * sim_client.c - libcurl helpers for tests against the simulated ERP: admin calls (ledger,
 * stats, faults, scenario keys, drift bookings) and a clerk session with a cookie jar that
 * walks the login and the two-step AP entry. HTML is picked apart with plain string search,
 * which is enough for the simulator's own fixed markup. Compiled into every test executable,
 * so it defines no main and keeps all helpers prefixed simc_.
 */
#include "sim_client.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIMC_MAX_BODY (256u * 1024 * 1024)

struct simc_buf {
    char *data;
    size_t len;
    bool overflow;
};

/* Appends k bytes at p to b, keeping it NUL-terminated, when b stays within max bytes.
 * Returns 0 when kept, 1 when over max (b->overflow set, b unchanged), -1 when out of memory. */
static int buf_append(struct simc_buf *b, const char *p, size_t k, size_t max)
{
    if (b->len + k + 1 > max) {
        b->overflow = true;
        return 1;
    }
    char *q = realloc(b->data, b->len + k + 1);
    if (!q)
        return -1;
    b->data = q;
    memcpy(b->data + b->len, p, k);
    b->len += k;
    b->data[b->len] = '\0';
    return 0;
}

/* Body bytes: past SIMC_MAX_BODY the transfer is aborted. */
static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
    size_t k = size * n;
    return buf_append(arg, p, k, SIMC_MAX_BODY) == 0 ? k : 0;
}

/* Header lines (arg may be NULL: not kept): past 64 KiB they are dropped, the transfer goes on. */
static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    size_t k = size * n;
    if (!arg)
        return k;
    return buf_append(arg, p, k, 64 * 1024) < 0 ? 0 : k;
}

static int perform(CURL *h, unsigned short port, const char *method, const char *path,
                   const char *body, long timeout_ms, long *ret_status, struct simc_buf *out,
                   struct simc_buf *headers)
{
    char url[2048];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", (unsigned)port, path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 10000L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    /* A fresh connection per request: on a reused keep-alive connection libcurl silently
     * re-sends a request the server dropped without answering, which would hide the
     * simulator's dropped-connection faults from the tests. */
    curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, headers);
    if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body ? body : ""));
    } else {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    }
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    if (rc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (ret_status)
        *ret_status = status;
    return (int)rc;
}

int simc_request_headers(unsigned short port, const char *method, const char *path,
                         const char *body, long timeout_ms, long *ret_status, char **ret_body,
                         char **ret_headers)
{
    CURL *h = curl_easy_init();
    struct simc_buf b = {NULL, 0, false}, hd = {NULL, 0, false};
    if (!h)
        return (int)CURLE_FAILED_INIT;
    int rc = perform(h, port, method, path, body, timeout_ms, ret_status, &b, &hd);
    curl_easy_cleanup(h);
    if (ret_body)
        *ret_body = b.data;
    else
        free(b.data);
    if (ret_headers)
        *ret_headers = hd.data;
    else
        free(hd.data);
    return rc;
}

int simc_request(unsigned short port, const char *method, const char *path, const char *body,
                 long timeout_ms, long *ret_status, char **ret_body)
{
    return simc_request_headers(port, method, path, body, timeout_ms, ret_status, ret_body, NULL);
}

int simc_request_extra(unsigned short port, const char *method, const char *path,
                       const char *const *req_headers, const char *body, long timeout_ms,
                       long *ret_status, char **ret_body, char **ret_headers)
{
    CURL *h = curl_easy_init();
    struct simc_buf b = {NULL, 0, false}, hd = {NULL, 0, false};
    struct curl_slist *list = NULL;
    if (!h)
        return (int)CURLE_FAILED_INIT;
    for (size_t i = 0; req_headers && req_headers[i]; i++) {
        struct curl_slist *more = curl_slist_append(list, req_headers[i]);
        if (!more) {
            curl_slist_free_all(list);
            curl_easy_cleanup(h);
            return (int)CURLE_OUT_OF_MEMORY;
        }
        list = more;
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
    if (strcmp(method, "GET") != 0 && strcmp(method, "POST") != 0)
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    int rc = perform(h, port, method, path, body, timeout_ms, ret_status, &b, &hd);
    curl_easy_cleanup(h);
    curl_slist_free_all(list);
    if (ret_body)
        *ret_body = b.data;
    else
        free(b.data);
    if (ret_headers)
        *ret_headers = hd.data;
    else
        free(hd.data);
    return rc;
}

/* An admin call that must answer 200. Body in *ret (may be NULL). */
static int admin_call(unsigned short port, const char *method, const char *path, const char *body,
                      char **ret)
{
    long status = 0;
    char *out = NULL;
    int rc = simc_request(port, method, path, body, 30000, &status, &out);
    if (rc != 0 || status != 200) {
        free(out);
        return -1;
    }
    if (ret)
        *ret = out ? out : calloc(1, 1);
    else
        free(out);
    return 0;
}

int simc_ledger(unsigned short port, char **ret_csv)
{
    return admin_call(port, "GET", "/_sim/ledger.csv", NULL, ret_csv);
}

int simc_lines(unsigned short port, char **ret_csv)
{
    return admin_call(port, "GET", "/_sim/lines.csv", NULL, ret_csv);
}

int simc_stats(unsigned short port, char **ret_json)
{
    return admin_call(port, "GET", "/_sim/stats", NULL, ret_json);
}

long long simc_stat(unsigned short port, const char *key)
{
    char *json = NULL;
    if (simc_stats(port, &json))
        return -1;
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(json, pat);
    long long v = p ? strtoll(p + strlen(pat), NULL, 10) : -1;
    free(json);
    return v;
}

/* Walks RFC 4180 CSV: calls fn for each record after the header with its fields. */
static int csv_each(const char *csv, void (*fn)(void *ctx, char **fields, int n), void *ctx)
{
    char *fields[16];
    int n = 0, rows = 0;
    size_t cap = strlen(csv) + 1;
    char *cur = malloc(cap); /* one field at a time never exceeds the whole text */
    if (!cur)
        return -1;
    size_t len = 0;
    bool header = true;
    const char *p = csv;
    while (*p) {
        len = 0;
        if (*p == '"') {
            p++;
            while (*p) {
                if (*p == '"' && p[1] == '"') {
                    cur[len++] = '"';
                    p += 2;
                } else if (*p == '"') {
                    p++;
                    break;
                } else {
                    cur[len++] = *p++;
                }
            }
        }
        while (*p && *p != ',' && *p != '\n' && *p != '\r')
            cur[len++] = *p++;
        cur[len] = '\0';
        if (n < 16)
            fields[n++] = strdup(cur);
        if (*p == ',') {
            p++;
            continue;
        }
        if (*p == '\r')
            p++;
        if (*p == '\n')
            p++;
        if (!header && fn)
            fn(ctx, fields, n);
        if (!header)
            rows++;
        header = false;
        for (int i = 0; i < n; i++)
            free(fields[i]);
        n = 0;
    }
    for (int i = 0; i < n; i++)
        free(fields[i]);
    free(cur);
    return rows;
}

struct count_ctx {
    const char *reference;
    int count;
};

static void count_ref(void *arg, char **fields, int n)
{
    struct count_ctx *c = arg;
    if (n >= 7 && strcmp(fields[6], c->reference) == 0)
        c->count++;
}

int simc_count_reference(unsigned short port, const char *reference)
{
    char *csv = NULL;
    if (simc_ledger(port, &csv))
        return -1;
    struct count_ctx c = {reference, 0};
    int rows = csv_each(csv, count_ref, &c);
    free(csv);
    return rows < 0 ? -1 : c.count;
}

struct natural_ctx {
    const char *vendor, *invoice_number;
    int count;
};

static void count_natural(void *arg, char **fields, int n)
{
    struct natural_ctx *c = arg;
    if (n >= 3 && strcmp(fields[1], c->vendor) == 0 && strcmp(fields[2], c->invoice_number) == 0)
        c->count++;
}

int simc_count_natural(unsigned short port, const char *vendor_id, const char *invoice_number)
{
    char *csv = NULL;
    if (simc_ledger(port, &csv))
        return -1;
    struct natural_ctx c = {vendor_id, invoice_number, 0};
    int rows = csv_each(csv, count_natural, &c);
    free(csv);
    return rows < 0 ? -1 : c.count;
}

struct status_ctx {
    const char *doc;
    char *dst;
    size_t len;
    bool found;
};

static void find_status(void *arg, char **fields, int n)
{
    struct status_ctx *c = arg;
    if (n >= 9 && strcmp(fields[0], c->doc) == 0) {
        snprintf(c->dst, c->len, "%s", fields[8]);
        c->found = true;
    }
}

int simc_doc_status(unsigned short port, const char *doc, char *dst, size_t len)
{
    char *csv = NULL;
    if (!len || simc_ledger(port, &csv))
        return -1;
    struct status_ctx c = {doc, dst, len, false};
    int rows = csv_each(csv, find_status, &c);
    free(csv);
    return rows >= 0 && c.found ? 0 : -1;
}

int simc_count_rows(unsigned short port)
{
    char *csv = NULL;
    if (simc_ledger(port, &csv))
        return -1;
    int rows = csv_each(csv, NULL, NULL);
    free(csv);
    return rows;
}

char *simc_escape(const char *s)
{
    char *e = curl_easy_escape(NULL, s ? s : "", 0);
    char *out = e ? strdup(e) : NULL;
    curl_free(e);
    return out;
}

/* Appends "&key=escaped(value)" (no & first) to a malloc'd body. */
static char *form_add(char *body, const char *key, const char *value)
{
    char *v = simc_escape(value);
    size_t old = body ? strlen(body) : 0;
    size_t need = old + strlen(key) + (v ? strlen(v) : 0) + 3;
    char *out = realloc(body, need);
    if (!out) {
        free(v);
        return body;
    }
    snprintf(out + old, need - old, "%s%s=%s", old ? "&" : "", key, v ? v : "");
    free(v);
    return out;
}

int simc_fault(unsigned short port, const char *name, int count)
{
    char body[256];
    snprintf(body, sizeof body, "name=%s&count=%d", name, count);
    return admin_call(port, "POST", "/_sim/fault", body, NULL);
}

int simc_set(unsigned short port, const char *key, const char *value)
{
    char *body = form_add(NULL, key, value);
    int rc = body ? admin_call(port, "POST", "/_sim/set", body, NULL) : -1;
    free(body);
    return rc;
}

int simc_book(unsigned short port, const char *vendor_id, const char *invoice_number,
              const char *invoice_date, const char *currency, const char *amount,
              const char *reference, char *ret_doc, size_t doclen)
{
    char *body = form_add(NULL, "vendor_id", vendor_id);
    body = form_add(body, "invoice_number", invoice_number);
    body = form_add(body, "invoice_date", invoice_date);
    body = form_add(body, "currency", currency);
    body = form_add(body, "amount", amount);
    body = form_add(body, "reference", reference ? reference : "");
    char *out = NULL;
    int rc = admin_call(port, "POST", "/_sim/book", body, &out);
    free(body);
    if (rc == 0 && ret_doc && doclen)
        snprintf(ret_doc, doclen, "%s", out);
    free(out);
    return rc;
}

int simc_amend(unsigned short port, const char *doc, const char *amount)
{
    char *body = form_add(NULL, "doc", doc);
    body = form_add(body, "amount", amount);
    int rc = admin_call(port, "POST", "/_sim/amend", body, NULL);
    free(body);
    return rc;
}

int simc_delete(unsigned short port, const char *doc)
{
    char *body = form_add(NULL, "doc", doc);
    int rc = admin_call(port, "POST", "/_sim/delete", body, NULL);
    free(body);
    return rc;
}

/* ---- session ------------------------------------------------------------------------------ */

struct simc_session {
    CURL *h;
    unsigned short port;
    long timeout_ms;
    struct simc_buf last;
};

struct simc_session *simc_session_new(unsigned short port, long timeout_ms)
{
    struct simc_session *s = calloc(1, sizeof *s);
    if (!s)
        abort();
    s->h = curl_easy_init();
    if (!s->h)
        abort();
    s->port = port;
    s->timeout_ms = timeout_ms > 0 ? timeout_ms : 10000;
    curl_easy_setopt(s->h, CURLOPT_COOKIEFILE, ""); /* cookie engine on, no file */
    return s;
}

void simc_session_free(struct simc_session *s)
{
    if (!s)
        return;
    curl_easy_cleanup(s->h);
    free(s->last.data);
    free(s);
}

static int session_do(struct simc_session *s, const char *method, const char *path,
                      const char *body, long *ret_status)
{
    free(s->last.data);
    memset(&s->last, 0, sizeof s->last);
    return perform(s->h, s->port, method, path, body, s->timeout_ms, ret_status, &s->last, NULL);
}

int simc_get(struct simc_session *s, const char *path, long *ret_status)
{
    return session_do(s, "GET", path, NULL, ret_status);
}

int simc_post(struct simc_session *s, const char *path, const char *body, long *ret_status)
{
    return session_do(s, "POST", path, body, ret_status);
}

const char *simc_body(const struct simc_session *s)
{
    return s->last.data ? s->last.data : "";
}

int simc_last_header(const struct simc_session *s, const char *name, char *dst, size_t len)
{
    struct curl_header *hd = NULL;
    if (!len || curl_easy_header(s->h, name, 0, CURLH_HEADER, -1, &hd) != CURLHE_OK || !hd)
        return -1;
    snprintf(dst, len, "%s", hd->value);
    return 0;
}

/* Decodes the few entities the simulator writes, into dst. */
static void decode_html(const char *p, size_t n, char *dst, size_t len)
{
    static const struct {
        const char *ent;
        char c;
    } ents[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&#39;", '\''}};
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < len;) {
        bool done = false;
        if (p[i] == '&') {
            for (size_t k = 0; k < sizeof ents / sizeof ents[0]; k++) {
                size_t el = strlen(ents[k].ent);
                if (i + el <= n && strncmp(p + i, ents[k].ent, el) == 0) {
                    dst[o++] = ents[k].c;
                    i += el;
                    done = true;
                    break;
                }
            }
        }
        if (!done)
            dst[o++] = p[i++];
    }
    if (len)
        dst[o] = '\0';
}

int simc_field(const char *html, const char *name, char *dst, size_t len)
{
    char pat[256];
    snprintf(pat, sizeof pat, "name=\"%s\"", name);
    const char *p = html ? strstr(html, pat) : NULL;
    if (!p)
        return -1;
    const char *tag_end = strchr(p, '>');
    const char *v = strstr(p, "value=\"");
    if (!v || (tag_end && v > tag_end)) {
        if (len)
            dst[0] = '\0';
        return 0;
    }
    v += strlen("value=\"");
    const char *e = strchr(v, '"');
    if (!e)
        return -1;
    decode_html(v, (size_t)(e - v), dst, len);
    return 0;
}

int simc_message(const char *html, char *dst, size_t len)
{
    const char *p = html ? strstr(html, "<span class=\"msgText\">") : NULL;
    if (!p)
        return -1;
    p += strlen("<span class=\"msgText\">");
    const char *e = strstr(p, "</span>");
    if (!e)
        return -1;
    decode_html(p, (size_t)(e - p), dst, len);
    return 0;
}

int simc_by_id(const char *html, const char *id, char *dst, size_t len)
{
    char pat[256];
    snprintf(pat, sizeof pat, "id=\"%s\"", id);
    const char *p = html ? strstr(html, pat) : NULL;
    if (!p)
        return -1;
    p = strchr(p, '>');
    if (!p)
        return -1;
    p++;
    const char *e = strchr(p, '<');
    if (!e)
        return -1;
    decode_html(p, (size_t)(e - p), dst, len);
    return 0;
}

char *simc_hidden_form(const char *html)
{
    char *body = calloc(1, 1);
    const char *p = html;
    static const char tag[] = "<input type=\"hidden\" name=\"";
    while (p && body && (p = strstr(p, tag)) != NULL) {
        p += strlen(tag);
        const char *e = strchr(p, '"');
        if (!e)
            break;
        char name[128];
        size_t n = (size_t)(e - p) < sizeof name - 1 ? (size_t)(e - p) : sizeof name - 1;
        memcpy(name, p, n);
        name[n] = '\0';
        char value[4096];
        if (simc_field(p - strlen("name=\""), name, value, sizeof value) == 0) {
            if (body[0] == '\0') {
                free(body);
                body = NULL;
            }
            body = form_add(body, name, value);
        }
        p = e;
    }
    return body;
}

int simc_login(struct simc_session *s, const char *user, const char *password)
{
    long status = 0;
    char csrf[128];
    if (simc_get(s, "/erp/login", &status) || status != 200 ||
        simc_field(simc_body(s), "_csrf", csrf, sizeof csrf))
        return -1;
    char *body = form_add(NULL, "j_username", user);
    body = form_add(body, "j_password", password);
    body = form_add(body, "_csrf", csrf);
    int rc = simc_post(s, "/erp/login", body, &status);
    free(body);
    if (rc || status != 303)
        return -1;
    if (simc_get(s, "/erp/home", &status) || status != 200)
        return -1;
    return strstr(simc_body(s), "<h1>Welcome, ") ? 0 : -1;
}

void simc_session_basic(struct simc_session *s, const char *user, const char *password)
{
    if (!user) {
        curl_easy_setopt(s->h, CURLOPT_HTTPAUTH, CURLAUTH_NONE);
        curl_easy_setopt(s->h, CURLOPT_USERNAME, NULL);
        curl_easy_setopt(s->h, CURLOPT_PASSWORD, NULL);
        return;
    }
    curl_easy_setopt(s->h, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(s->h, CURLOPT_USERNAME, user);
    curl_easy_setopt(s->h, CURLOPT_PASSWORD, password ? password : "");
}

int simc_classic_login(struct simc_session *s, const char *user, const char *password)
{
    long status = 0;
    simc_session_basic(s, user, password);
    if (simc_get(s, "/login.pl?action=authenticate&company=ACME", &status) || status != 200)
        return -1;
    return strncmp(simc_body(s), "Success", 7) == 0 ? 0 : -1;
}

int simc_check(struct simc_session *s, const char *fields, long *ret_status)
{
    char token[128];
    int rc = simc_get(s, "/erp/ap/invoice/new", ret_status);
    if (rc)
        return rc;
    if (simc_field(simc_body(s), "formToken", token, sizeof token))
        token[0] = '\0';
    size_t n = strlen(fields) + strlen(token) + 32;
    char *body = malloc(n);
    if (!body)
        abort();
    snprintf(body, n, "%s&formToken=%s", fields, token);
    rc = simc_post(s, "/erp/ap/invoice/check", body, ret_status);
    free(body);
    return rc;
}

int simc_confirm(struct simc_session *s, long *ret_status)
{
    char *body = simc_hidden_form(simc_body(s));
    if (!body)
        abort();
    int rc = simc_post(s, "/erp/ap/invoice/post", body, ret_status);
    free(body);
    return rc;
}

int simc_post_invoice(struct simc_session *s, const char *fields, char *ret_doc, size_t doclen)
{
    long status = 0;
    if (simc_check(s, fields, &status))
        return -1;
    if (!strstr(simc_body(s), "id=\"apConfirm\""))
        return strstr(simc_body(s), "msgText") ? 1 : -1;
    if (simc_confirm(s, &status))
        return -1;
    char doc[64];
    if (simc_by_id(simc_body(s), "docNo", doc, sizeof doc) == 0) {
        if (ret_doc && doclen)
            snprintf(ret_doc, doclen, "%s", doc);
        return 0;
    }
    return strstr(simc_body(s), "msgText") ? 1 : -1;
}

void simc_fields(char *dst, size_t len, const char *vendor_inv_no, const char *reference)
{
    char *inv = simc_escape(vendor_inv_no);
    char *ref = simc_escape(reference);
    snprintf(dst, len,
             "docType=KR&vendorNo=100001&vendorInvNo=%s&invDate=03.11.2026&dueDate="
             "&currency=EUR&amount=1.234%%2C56&glAccount=6000&reference=%s&memo=test",
             inv ? inv : "", ref ? ref : "");
    free(inv);
    free(ref);
}

/* ---- admin over HTTPS ------------------------------------------------------------------------ */

int simc_request_tls(unsigned short port, const char *ca_pem, const char *method, const char *path,
                     const char *body, long timeout_ms, long *ret_status, char **ret_body)
{
    char url[2048];
    struct simc_buf b = {NULL, 0, false};
    if (ret_status)
        *ret_status = 0;
    if (ret_body)
        *ret_body = NULL;
    if (!ca_pem)
        return (int)CURLE_BAD_FUNCTION_ARGUMENT;
    CURL *h = curl_easy_init();
    if (!h)
        return (int)CURLE_FAILED_INIT;
    /* The blob is the simulator's own certificate: verification stays on. */
    struct curl_blob ca = {(void *)ca_pem, strlen(ca_pem), CURL_BLOB_COPY};
    snprintf(url, sizeof url, "https://127.0.0.1:%u%s", (unsigned)port, path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &ca);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 10000L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
    if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body ? body : ""));
    } else {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    }
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    if (rc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    if (ret_status)
        *ret_status = status;
    if (ret_body)
        *ret_body = b.data;
    else
        free(b.data);
    return (int)rc;
}

int simc_ledger_tls(unsigned short port, const char *ca_pem, char **ret_csv)
{
    long status = 0;
    char *out = NULL;
    int rc = simc_request_tls(port, ca_pem, "GET", "/_sim/ledger.csv", NULL, 30000, &status, &out);
    if (rc != 0 || status != 200) {
        free(out);
        return -1;
    }
    *ret_csv = out ? out : calloc(1, 1);
    return *ret_csv ? 0 : -1;
}

int simc_count_rows_tls(unsigned short port, const char *ca_pem)
{
    char *csv = NULL;
    if (simc_ledger_tls(port, ca_pem, &csv))
        return -1;
    int rows = csv_each(csv, NULL, NULL);
    free(csv);
    return rows;
}

int simc_count_reference_tls(unsigned short port, const char *ca_pem, const char *reference)
{
    char *csv = NULL;
    if (simc_ledger_tls(port, ca_pem, &csv))
        return -1;
    struct count_ctx c = {reference, 0};
    int rows = csv_each(csv, count_ref, &c);
    free(csv);
    return rows < 0 ? -1 : c.count;
}

long long simc_stat_tls(unsigned short port, const char *ca_pem, const char *key)
{
    long status = 0;
    char *json = NULL;
    int rc = simc_request_tls(port, ca_pem, "GET", "/_sim/stats", NULL, 30000, &status, &json);
    long long v = -1;
    if (rc == 0 && status == 200 && json) {
        char pat[128];
        snprintf(pat, sizeof pat, "\"%s\":", key);
        const char *p = strstr(json, pat);
        v = p ? strtoll(p + strlen(pat), NULL, 10) : -1;
    }
    free(json);
    return v;
}

bool simc_doc_same(const char *ledger_doc, const char *erp_doc)
{
    if (!ledger_doc || !erp_doc)
        return false;
    if (strcmp(ledger_doc, erp_doc) == 0)
        return true;
    const char *seq = strrchr(ledger_doc, '-');
    if (!seq || !erp_doc[0] || erp_doc[0] == '0')
        return false;
    for (const char *p = erp_doc; *p; p++)
        if (*p < '0' || *p > '9')
            return false;
    seq++;
    while (*seq == '0')
        seq++;
    return strcmp(seq, erp_doc) == 0;
}
