/*
 * serve.c - the review page (see serve.h): libmicrohttpd with a thread per connection, pages
 * built as libxml2 trees (every text a text node, escaped by the serialiser), decisions taken
 * through the review module, the day's figures through the report module.
 *
 * What it guards, in the order a request meets it: the Host header on loopback (DNS
 * rebinding), HTTP Basic when a password is set, the method and body size, then for a POST
 * the form's content type, its origin, the session cookie (random, signed with a key made at
 * start) and the CSRF token derived from it. Pages are never cached, never framed and run no
 * script (Content-Security-Policy without script-src). Each request opens the queue itself
 * and closes it when answered, so a running `apbot run` is never held up for longer than one
 * of the store's own transactions.
 */
#include "office/serve-int.h"

#include <arpa/inet.h>
#include <libxml/parser.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "apbot/buf.h"
#include "apbot/erp.h"
#include "apbot/flow.h"
#include "apbot/invoice.h"
#include "apbot/machine.h"
#include "apbot/mem.h"
#include "apbot/money.h"
#include "apbot/report.h"
#include "apbot/review.h"
#include "apbot/store.h"
#include "apbot/text.h"
#include "base/unittest.h"
#include "office/html.h"
#include "office/report_html.h"

#define SERVE_QUEUE_ROWS 1000 /* items one queue page lists */
#define SERVE_FIELDS_MAX 32   /* fields of one form */
#define SESSION_COOKIE "apbot_review"
#define REVIEWER_COOKIE "apbot_reviewer"

/* ---- pure checks ------------------------------------------------------------------------ */

int serve_parse_listen(const char *listen, struct serve_addr *ret, char *err, size_t errlen)
{
    struct serve_addr a;
    const char *colon, *host;
    size_t hlen;
    char *end = NULL;
    unsigned long port;

    memset(&a, 0, sizeof(a));
    if (!listen || !*listen)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "--listen wants HOST:PORT");
    if (listen[0] == '[') {
        const char *close = strchr(listen, ']');
        if (!close || close[1] != ':')
            return apbot_fail(err, errlen, APBOT_E_INVAL, "--listen '%s': want [IPv6]:PORT",
                              listen);
        host = listen + 1;
        hlen = (size_t)(close - host);
        colon = close + 1;
        a.ipv6 = true;
    } else {
        colon = strrchr(listen, ':');
        if (!colon)
            return apbot_fail(err, errlen, APBOT_E_INVAL, "--listen '%s': want HOST:PORT", listen);
        host = listen;
        hlen = (size_t)(colon - listen);
        if (memchr(host, ':', hlen))
            return apbot_fail(err, errlen, APBOT_E_INVAL,
                              "--listen '%s': write an IPv6 address in brackets", listen);
    }
    if (hlen >= sizeof(a.host))
        return apbot_fail(err, errlen, APBOT_E_INVAL, "--listen '%s': address too long", listen);
    memcpy(a.host, host, hlen);
    a.host[hlen] = '\0';
    if (!*a.host)
        snprintf(a.host, sizeof(a.host), "127.0.0.1");
    else if (!a.ipv6 && strcmp(a.host, "localhost") == 0)
        snprintf(a.host, sizeof(a.host), "127.0.0.1");
    if (!colon[1] || colon[1] == '-' || colon[1] == '+')
        return apbot_fail(err, errlen, APBOT_E_INVAL, "--listen '%s': no port", listen);
    port = strtoul(colon + 1, &end, 10);
    if (!end || *end || port > 65535)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "--listen '%s': bad port", listen);
    a.port = (unsigned short)port;
    if (a.ipv6) {
        struct in6_addr in6;
        if (inet_pton(AF_INET6, a.host, &in6) != 1)
            return apbot_fail(err, errlen, APBOT_E_INVAL, "--listen '%s': not an IPv6 address",
                              listen);
        a.loopback = IN6_IS_ADDR_LOOPBACK(&in6);
    } else {
        struct in_addr in4;
        if (inet_pton(AF_INET, a.host, &in4) != 1)
            return apbot_fail(err, errlen, APBOT_E_INVAL,
                              "--listen '%s': give an IP address (or localhost), not a name",
                              listen);
        a.loopback = (ntohl(in4.s_addr) >> 24) == 127;
    }
    *ret = a;
    return APBOT_OK;
}

int serve_exposure_ok(const struct serve_addr *a, const char *password, char *err, size_t errlen)
{
    if (a->loopback)
        return APBOT_OK;
    if (!password || !*password)
        return apbot_fail(err, errlen, APBOT_E_INVAL,
                          "refusing to listen on %s, which is not loopback, without a password: "
                          "set APBOT_REVIEW_PASSWORD (every request then needs it, HTTP Basic)",
                          a->host);
    if (strlen(password) < SERVE_PASSWORD_MIN)
        return apbot_fail(err, errlen, APBOT_E_INVAL,
                          "APBOT_REVIEW_PASSWORD is too short to expose the page on %s (at least "
                          "%d characters)",
                          a->host, SERVE_PASSWORD_MIN);
    return APBOT_OK;
}

UNITTEST bool serve_host_ok(const char *host_header, const struct serve_addr *a,
                            unsigned short port)
{
    char want[96];
    const char *names[3];
    size_t n = 0;

    if (!a->loopback)
        return true; /* a password guards it; a proxy may rename it */
    if (!host_header)
        return false;
    if (a->ipv6) {
        names[n++] = "[::1]";
    } else {
        names[n++] = a->host;
        names[n++] = "localhost";
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(want, sizeof(want), "%s:%u", names[i], (unsigned)port);
        if (strcasecmp(host_header, want) == 0)
            return true;
        if (port == 80 && strcasecmp(host_header, names[i]) == 0)
            return true;
    }
    return false;
}

/* Constant-time equality of two strings (the length is not secret). */
static bool same_secret(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    if (na != nb)
        return false;
    return CRYPTO_memcmp(a, b, na) == 0;
}

UNITTEST bool serve_basic_ok(const char *authorization, const char *password)
{
    unsigned char decoded[1024];
    const char *p;
    size_t len;
    int n;
    char *colon;
    bool ok;

    if (!authorization || !password || !*password)
        return false;
    if (strncasecmp(authorization, "Basic ", 6) != 0)
        return false;
    p = authorization + 6;
    while (*p == ' ')
        p++;
    len = strlen(p);
    if (len == 0 || len % 4 != 0 || len / 4 * 3 >= sizeof(decoded))
        return false;
    n = EVP_DecodeBlock(decoded, (const unsigned char *)p, (int)len);
    if (n < 0)
        return false;
    /* EVP_DecodeBlock counts the padding as zero bytes */
    if (len >= 1 && p[len - 1] == '=')
        n--;
    if (len >= 2 && p[len - 2] == '=')
        n--;
    decoded[n] = '\0';
    if (strlen((char *)decoded) != (size_t)n)
        return false; /* a NUL inside */
    colon = strchr((char *)decoded, ':');
    if (!colon)
        return false;
    ok = same_secret(colon + 1, password);
    OPENSSL_cleanse(decoded, sizeof(decoded));
    return ok;
}

UNITTEST bool serve_origin_ok(const char *origin, const char *referer, const char *host_header)
{
    char want[160];
    size_t n;

    if (!host_header)
        return false;
    n = (size_t)snprintf(want, sizeof(want), "http://%s", host_header);
    if (n >= sizeof(want))
        return false;
    if (origin)
        return strcasecmp(origin, want) == 0;
    if (referer)
        return strncasecmp(referer, want, n) == 0 && (referer[n] == '/' || referer[n] == '\0');
    return true;
}

/* ---- the server ------------------------------------------------------------------------- */

struct server {
    const struct serve_options *opt;
    struct serve_addr addr;
    unsigned short port;   /* the bound port */
    unsigned char key[32]; /* signs session cookies and CSRF tokens; made at start */
    const char *erp_user, *erp_password;
};

/* Per request: its body, and what the handler learnt of its session. */
struct req {
    struct apbot_buf body;
    bool too_big;
};

/* What a page needs to know of its request. */
struct ctx {
    struct server *s;
    struct MHD_Connection *conn;
    char sid[80];                       /* the session cookie's value */
    bool new_sid;                       /* the answer sets it */
    char csrf[65];                      /* the session's token for forms */
    char reviewer[REVIEW_NAME_MAX + 1]; /* the reviewer cookie, when valid */
    bool set_reviewer;                  /* the answer sets the reviewer cookie */
    int64_t now;
};

/* Hex HMAC-SHA256 of what under the server's key. */
static void sign(const struct server *s, const char *what, char out[65])
{
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    static const char hex[] = "0123456789abcdef";

    if (!HMAC(EVP_sha256(), s->key, (int)sizeof(s->key), (const unsigned char *)what, strlen(what),
              mac, &len) ||
        len < 32)
        abort(); /* OpenSSL cannot compute SHA-256: nothing is safe to serve */
    for (unsigned i = 0; i < 32; i++) {
        out[2 * i] = hex[mac[i] >> 4];
        out[2 * i + 1] = hex[mac[i] & 15];
    }
    out[64] = '\0';
}

/* A session id is RANDOM.MAC: made here, so one the server did not make is refused. */
static bool session_valid(const struct server *s, const char *sid)
{
    char mac[65], what[64];
    const char *dot;

    if (!sid || strlen(sid) != 32 + 1 + 32)
        return false;
    dot = sid + 32;
    if (*dot != '.')
        return false;
    snprintf(what, sizeof(what), "sid:%.32s", sid);
    sign(s, what, mac);
    return CRYPTO_memcmp(mac, dot + 1, 32) == 0;
}

static void session_new(const struct server *s, char out[80])
{
    unsigned char rnd[16];
    char hexr[33], mac[65], what[64];
    static const char hex[] = "0123456789abcdef";

    if (RAND_bytes(rnd, sizeof(rnd)) != 1)
        abort(); /* no randomness: sessions could be guessed */
    for (unsigned i = 0; i < 16; i++) {
        hexr[2 * i] = hex[rnd[i] >> 4];
        hexr[2 * i + 1] = hex[rnd[i] & 15];
    }
    hexr[32] = '\0';
    snprintf(what, sizeof(what), "sid:%s", hexr);
    sign(s, what, mac);
    snprintf(out, 80, "%s.%.32s", hexr, mac);
}

static void csrf_of(const struct server *s, const char *sid, char out[65])
{
    char what[96];
    snprintf(what, sizeof(what), "csrf:%s", sid);
    sign(s, what, out);
}

/* ---- text for pages --------------------------------------------------------------------- */

/* Every occurrence of the ERP user or password replaced by "***" (heap). */
static char *mask(const struct server *s, const char *text)
{
    struct apbot_buf b;
    const char *u = s->erp_user, *p = s->erp_password;
    size_t ul = u ? strlen(u) : 0, pl = p ? strlen(p) : 0;

    apbot_buf_init(&b, strlen(text) * 3 + 1);
    for (size_t i = 0; text[i];) {
        int rc;
        if (pl && strncmp(text + i, p, pl) == 0) {
            rc = apbot_buf_adds(&b, "***");
            i += pl;
        } else if (ul && strncmp(text + i, u, ul) == 0) {
            rc = apbot_buf_adds(&b, "***");
            i += ul;
        } else {
            rc = apbot_buf_add(&b, text + i, 1);
            i++;
        }
        if (rc != APBOT_OK)
            break; /* cannot happen: three bytes per input byte at most */
    }
    return apbot_buf_steal(&b, NULL);
}

/* ---- building pages --------------------------------------------------------------------- */

static xmlNodePtr a_link(xmlNodePtr parent, const char *href, const char *cls, const char *t)
{
    xmlNodePtr a = html_el_clean(parent, "a", cls, t);
    html_attr_clean(a, "href", href);
    return a;
}

/* URL-encodes s into buf (cut at len). */
static const char *url_encode(const char *s, char *buf, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p && o + 4 < len; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '_' || *p == '.' || *p == '~') {
            buf[o++] = (char)*p;
        } else {
            buf[o++] = '%';
            buf[o++] = hex[*p >> 4];
            buf[o++] = hex[*p & 15];
        }
    }
    buf[o] = '\0';
    return buf;
}

static const char serve_css[] =
    "header{display:flex;flex-wrap:wrap;gap:1.2em;align-items:baseline;"
    "border-bottom:2px solid #345;padding-bottom:.4em;margin-bottom:1em}"
    "header .brand{font-weight:bold;color:#345}"
    "nav a{margin-right:1em;text-decoration:none;color:#234}"
    "nav a.active{font-weight:bold;border-bottom:2px solid #234}"
    "header .where{color:#777;font-size:12px}"
    ".banner{padding:.7em 1em;border-radius:4px;margin:1em 0}"
    ".banner.ok{background:#e3f4e1;border:1px solid #9ccf95}"
    ".banner.refused{background:#fbe0e0;border:1px solid #c00}"
    ".banner.warn{background:#fff1d6;border:1px solid #e3b75f}"
    "pre.excerpt{white-space:pre-wrap;word-break:break-word;background:#f8f8f8;"
    "border:1px solid #ddd;padding:.5em;max-height:24em;overflow:auto;font-size:12px}"
    ".exchange{border-left:3px solid #ccd;padding:.2em .8em;margin:.8em 0}"
    ".exchange .rule{font-weight:bold}"
    ".decisions{display:flex;flex-wrap:wrap;gap:1em;align-items:flex-start}"
    "form.decision{border:1px solid #ccc;border-radius:4px;padding:.6em 1em;min-width:18em;"
    "max-width:28em}"
    "form.decision h3{margin:.2em 0 .5em;font-size:1em}"
    "form.decision label{display:block;margin:.4em 0 .1em;font-weight:bold}"
    "form.decision p.help{color:#555;font-size:12px;margin:.2em 0}"
    "input[type=text],input[type=date],textarea,select{font:inherit;padding:.25em;"
    "box-sizing:border-box;width:100%}"
    "button{font:inherit;padding:.3em 1em;margin-top:.6em}"
    "form.filters{display:flex;flex-wrap:wrap;gap:1em;align-items:flex-end;margin:.5em 0}"
    "form.filters label{display:block;font-weight:bold}"
    "form.filters input,form.filters select{width:auto;min-width:14em}"
    "table.queue td.reason{max-width:32em}"
    "dl.fields{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}"
    "dl.fields dt{font-weight:bold}dl.fields dd{margin:0}"
    ".state{font-weight:bold}"
    "footer{margin-top:2em;color:#777;font-size:12px}"
    "@media print{header nav,form,.no-print{display:none}pre.excerpt{max-height:none}}";

struct page {
    struct html_doc doc;
    xmlNodePtr body, main;
    int status;
};

static void page_start(struct page *p, struct ctx *c, const char *title, const char *active)
{
    static const struct {
        const char *href, *id, *label;
    } nav[] = {{"/", "today", "Today"},
               {"/queue", "queue", "Review queue"},
               {"/queue?tab=exceptions", "exceptions", "Business exceptions"},
               {"/report", "report", "Report"}};
    xmlNodePtr head, meta, n, header, navn;
    char buf[256];

    memset(p, 0, sizeof(*p));
    p->status = MHD_HTTP_OK;
    html_doc_new(&p->doc);
    head = p->doc.head;
    meta = html_el(head, "meta", NULL);
    html_attr(meta, "name", "viewport");
    html_attr(meta, "content", "width=device-width, initial-scale=1");
    snprintf(buf, sizeof(buf), "%s - apbot review", title);
    html_el_clean(head, "title", NULL, buf);
    n = html_el(head, "link", NULL);
    html_attr(n, "rel", "stylesheet");
    html_attr(n, "href", "/app.css");

    p->body = html_el(p->doc.html, "body", NULL);
    header = html_el(p->body, "header", NULL);
    html_el_clean(header, "span", "brand", "apbot review");
    navn = html_el(header, "nav", NULL);
    for (size_t i = 0; i < sizeof(nav) / sizeof(nav[0]); i++)
        a_link(navn, nav[i].href, active && strcmp(active, nav[i].id) == 0 ? "active" : NULL,
               nav[i].label);
    n = html_el(header, "span", "where");
    html_textf_clean(n, "queue %s, flow %s", c->s->opt->db_path,
                     c->s->opt->flow && c->s->opt->flow->name ? c->s->opt->flow->name : "?");
    p->main = html_el(p->body, "main", NULL);
}

/* A banner: cls "ok", "refused" or "warn". */
static xmlNodePtr banner(xmlNodePtr parent, const char *cls, const char *id, const char *t)
{
    char k[32];
    xmlNodePtr n;
    snprintf(k, sizeof(k), "banner %s", cls);
    n = html_el_clean(parent, "div", k, t);
    if (id)
        html_id(n, id);
    html_attr(n, "role", strcmp(cls, "ok") == 0 ? "status" : "alert");
    return n;
}

/* The answer's headers, safe by default. */
static void safe_headers(struct MHD_Response *r, bool cacheable)
{
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'none'; style-src 'self'; img-src 'self'; "
                            "form-action 'self'; frame-ancestors 'none'; base-uri 'none'");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "same-origin");
    MHD_add_response_header(r, "Cache-Control", cacheable ? "private, max-age=300" : "no-store");
    if (!cacheable)
        MHD_add_response_header(r, "Pragma", "no-cache");
}

static enum MHD_Result send_bytes(struct ctx *c, int status, const char *type, const void *data,
                                  size_t len, bool cacheable)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);
    enum MHD_Result rc;
    char cookie[256];

    if (!r)
        return MHD_NO;
    safe_headers(r, cacheable);
    MHD_add_response_header(r, "Content-Type", type);
    if (c->new_sid) {
        snprintf(cookie, sizeof(cookie), "%s=%s; Path=/; HttpOnly; SameSite=Strict", SESSION_COOKIE,
                 c->sid);
        MHD_add_response_header(r, "Set-Cookie", cookie);
    }
    if (c->set_reviewer) {
        snprintf(cookie, sizeof(cookie), "%s=%s; Path=/; HttpOnly; SameSite=Strict; Max-Age=%d",
                 REVIEWER_COOKIE, c->reviewer, 30 * 24 * 3600);
        MHD_add_response_header(r, "Set-Cookie", cookie);
    }
    if (status == MHD_HTTP_UNAUTHORIZED)
        MHD_add_response_header(r, "WWW-Authenticate",
                                "Basic realm=\"apbot review\", "
                                "charset=\"UTF-8\"");
    rc = MHD_queue_response(c->conn, (unsigned int)status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result page_send(struct ctx *c, struct page *p)
{
    xmlChar *mem;
    size_t size;
    enum MHD_Result rc;
    xmlNodePtr foot = html_el(p->body, "footer", NULL);
    char when[32];

    html_textf_clean(foot, "apbot %s, page made %s", APBOT_VERSION,
                     report_local_time(c->now, "?", when, sizeof(when)));
    mem = html_doc_dump(&p->doc, &size);
    if (!mem)
        return MHD_NO;
    rc = send_bytes(c, p->status, "text/html; charset=utf-8", mem, size, false);
    xmlFree(mem);
    return rc;
}

/* A short page that says one thing (errors, refusals). */
static enum MHD_Result simple_page(struct ctx *c, int status, const char *title, const char *what)
{
    struct page p;
    page_start(&p, c, title, NULL);
    p.status = status;
    html_el_clean(p.main, "h1", NULL, title);
    banner(p.main, status < 400 ? "ok" : "refused", "message", what);
    return page_send(c, &p);
}

/* ---- shared pieces ---------------------------------------------------------------------- */

static const char *age_text(int64_t ms, char *buf, size_t len)
{
    return report_format_age(ms, buf, len);
}

static struct store *open_store(struct ctx *c, char *err, size_t errlen)
{
    struct store *st = NULL;
    if (store_open(c->s->opt->db_path, &st, err, errlen) != APBOT_OK)
        return NULL;
    return st;
}

static enum MHD_Result store_failed(struct ctx *c, const char *err)
{
    char buf[APBOT_ERR_LEN + 64];
    snprintf(buf, sizeof(buf), "The queue could not be read: %s", err);
    return simple_page(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "Queue unavailable", buf);
}

static void dl_row(xmlNodePtr dl, const char *term, const char *value)
{
    html_el_clean(dl, "dt", NULL, term);
    html_el_clean(dl, "dd", NULL, value && *value ? value : "-");
}

/* ---- Today ------------------------------------------------------------------------------ */

/* Builds today's report: with the ERP when it answers, else the queue's half alone (why in
 * erp_err). */
static struct report *today_report(struct ctx *c, struct store *st, const char *date, char *erp_err,
                                   size_t errlen)
{
    struct report_options opt;
    struct report *r = NULL;
    struct erp_session *erp = NULL;
    char err[APBOT_ERR_LEN];
    const struct flow *f = c->s->opt->flow;
    int rc;

    memset(&opt, 0, sizeof(opt));
    opt.date = date;
    opt.now = c->now;
    opt.max_lookups = -1; /* the hints are on the report page, not here */
    erp_err[0] = '\0';
    if (f && f->list.get) {
        rc = erp_open(f, c->s->opt->erp_url, NULL, &erp, err, sizeof(err));
        if (rc == APBOT_OK)
            rc = report_build(st, erp, f, &opt, &r, err, sizeof(err));
        erp_close(erp);
        if (rc == APBOT_OK)
            return r;
        snprintf(erp_err, errlen, "%s", err);
    } else {
        snprintf(erp_err, errlen, "the flow has no list operation");
    }
    if (report_build_queue(st, f, &opt, &r, err, sizeof(err)) != APBOT_OK) {
        snprintf(erp_err, errlen, "%s", err);
        return NULL;
    }
    return r;
}

static void last_run(xmlNodePtr parent, const struct report *r)
{
    const struct report_activity *a = report_activity(r);
    char t1[32], t2[32];
    xmlNodePtr p = html_el(parent, "p", "last-run");
    html_id(p, "last-run");
    if (!a->last_run[0]) {
        html_text_clean(p, "No run of the bot today.");
        return;
    }
    html_textf_clean(
        p,
        "Last run today: %s, from %s to %s, %lld item(s): completed %lld, business exception "
        "%lld, manual review %lld, outcome unknown %lld.",
        a->last_run, report_local_time(a->last_run_first, "?", t1, sizeof(t1)),
        report_local_time(a->last_run_last, "?", t2, sizeof(t2)), (long long)a->last_run_items,
        (long long)a->last_run_outcomes[REPORT_OUT_COMPLETED],
        (long long)a->last_run_outcomes[REPORT_OUT_EXCEPTION],
        (long long)a->last_run_outcomes[REPORT_OUT_REVIEW],
        (long long)a->last_run_outcomes[REPORT_OUT_UNKNOWN]);
}

static enum MHD_Result page_today(struct ctx *c)
{
    struct page p;
    struct store *st;
    struct store_counts counts;
    struct report *r;
    char err[APBOT_ERR_LEN], erp_err[APBOT_ERR_LEN], date[11], buf[256], age[32];
    xmlNodePtr table, tr, td, sec, cards;
    const struct report_summary *sum;

    st = open_store(c, err, sizeof(err));
    if (!st)
        return store_failed(c, err);
    if (store_counts(st, &counts, err, sizeof(err)) != APBOT_OK) {
        store_close(st);
        return store_failed(c, err);
    }
    report_local_date(c->now, date);
    r = today_report(c, st, date, erp_err, sizeof(erp_err));
    store_close(st);

    page_start(&p, c, "Today", "today");
    snprintf(buf, sizeof(buf), "Today, %s", date);
    html_el_clean(p.main, "h1", NULL, buf);

    if (r && !report_summary(r)->erp_read) {
        char msg[APBOT_ERR_LEN + 256];
        snprintf(msg, sizeof(msg),
                 "The ERP could not be read (%s): the queue's figures below are complete; the "
                 "ERP's total and the difference are missing until it answers.",
                 erp_err);
        banner(p.main, "warn", "erp-status", msg);
    }
    /* the queue now, and the balance in items, side by side */
    cards = html_el(p.main, "div", "cards");
    sec = html_el(cards, "section", "card states");
    html_el_clean(sec, "h2", NULL, "The queue now");
    table = html_el(sec, "table", "states");
    html_id(table, "states");
    for (int s = 0; s < MACHINE_STATE__COUNT; s++) {
        char id[64], n[32];
        tr = html_el(table, "tr", NULL);
        html_el_clean(tr, "th", NULL, machine_state_name((enum machine_state)s));
        snprintf(id, sizeof(id), "state-%s", machine_state_name((enum machine_state)s));
        snprintf(n, sizeof(n), "%lld", (long long)counts.by_state[s]);
        td = html_el_clean(tr, "td", "count", n);
        html_id(td, id);
    }
    tr = html_el(table, "tr", "total");
    html_el_clean(tr, "th", NULL, "total");
    snprintf(buf, sizeof(buf), "%lld", (long long)counts.total);
    html_id(html_el_clean(tr, "td", "count", buf), "state-total");
    {
        xmlNodePtr para = html_el(sec, "p", NULL);
        html_id(para, "oldest-pending");
        if (counts.oldest_pending_at > 0)
            html_textf_clean(para, "Oldest pending item: waiting %s. ",
                             age_text(c->now - counts.oldest_pending_at, age, sizeof(age)));
        else
            html_text_clean(para, "Nothing pending. ");
        para = html_el(sec, "p", NULL);
        html_id(para, "review-depth");
        html_textf_clean(para,
                         "Review depth: %lld manual-review item(s), %lld business exception(s). ",
                         (long long)counts.by_state[MACHINE_MANUAL_REVIEW],
                         (long long)counts.by_state[MACHINE_BUSINESS_EXCEPTION]);
        a_link(para, "/queue", NULL, "Open the review queue");
    }

    if (!r) {
        xmlNodePtr b =
            banner(p.main, "refused", "erp-status", "The day's figures could not be made: ");
        html_text_clean(b, erp_err);
        return page_send(c, &p);
    }
    sum = report_summary(r);

    /* the balance in items */
    sec = html_el(cards, "section", "card balance");
    html_id(sec, "balance");
    html_el_clean(sec, "h2", NULL,
                  sum->balanced ? "Balance: balanced"
                                : "Balance: DOES NOT BALANCE (see the report)");
    report_html_balance(r, sec, "received today", "whole queue");
    report_html_money(r, p.main);
    report_html_chart(r, p.main);
    last_run(p.main, r);
    {
        xmlNodePtr para = html_el(p.main, "p", "no-print");
        a_link(para, "/report", NULL, "The full reconciliation report for today");
    }
    report_free(r);
    return page_send(c, &p);
}

/* ---- the review queue ------------------------------------------------------------------- */

struct reason_count {
    char words[256];
    int n;
};

static enum MHD_Result page_queue(struct ctx *c)
{
    const char *tab = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "tab");
    const char *vendor = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "vendor");
    const char *reason = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "reason");
    bool exceptions = tab && strcmp(tab, "exceptions") == 0;
    struct review_filter all = {.manual_review = !exceptions, .exceptions = exceptions};
    struct review_filter flt = all;
    struct review_queue q, qall;
    struct store *st;
    struct store_counts counts;
    struct reason_count *reasons = NULL;
    size_t n_reasons = 0, cap_reasons = 0;
    struct page p;
    char err[APBOT_ERR_LEN], buf[512];
    xmlNodePtr tabs, form, n, table, tr, td, sel;

    if (vendor && strlen(vendor) > 200)
        vendor = NULL;
    if (reason && strlen(reason) > 500)
        reason = NULL;
    flt.vendor = vendor;
    flt.reason = reason;
    st = open_store(c, err, sizeof(err));
    if (!st)
        return store_failed(c, err);
    if (store_counts(st, &counts, err, sizeof(err)) != APBOT_OK ||
        review_queue_load(st, &flt, &q, err, sizeof(err)) != APBOT_OK) {
        store_close(st);
        return store_failed(c, err);
    }
    /* the reasons of the whole tab, for the filter */
    if (review_queue_load(st, &all, &qall, err, sizeof(err)) != APBOT_OK) {
        review_queue_done(&q);
        store_close(st);
        return store_failed(c, err);
    }
    store_close(st);
    for (size_t i = 0; i < qall.n; i++) {
        char words[256];
        size_t k;
        review_reason_words(qall.v[i].item.reason, words, sizeof(words));
        for (k = 0; k < n_reasons; k++)
            if (strcmp(reasons[k].words, words) == 0)
                break;
        if (k == n_reasons) {
            if (apbot_grow((void **)&reasons, &cap_reasons, n_reasons, sizeof(*reasons), 500) !=
                APBOT_OK)
                continue;
            snprintf(reasons[n_reasons].words, sizeof(reasons[n_reasons].words), "%s", words);
            reasons[n_reasons++].n = 0;
        }
        reasons[k].n++;
    }
    review_queue_done(&qall);

    page_start(&p, c, exceptions ? "Business exceptions" : "Review queue",
               exceptions ? "exceptions" : "queue");
    html_el_clean(p.main, "h1", NULL, exceptions ? "Business exceptions" : "Review queue");
    tabs = html_el(p.main, "p", "tabs no-print");
    snprintf(buf, sizeof(buf), "Manual review (%lld)",
             (long long)counts.by_state[MACHINE_MANUAL_REVIEW]);
    a_link(tabs, "/queue", exceptions ? NULL : "active", buf);
    html_text_clean(tabs, " | ");
    snprintf(buf, sizeof(buf), "Business exceptions (%lld)",
             (long long)counts.by_state[MACHINE_BUSINESS_EXCEPTION]);
    a_link(tabs, "/queue?tab=exceptions", exceptions ? "active" : NULL, buf);

    form = html_el(p.main, "form", "filters");
    html_attr(form, "method", "get");
    html_attr(form, "action", "/queue");
    if (exceptions) {
        n = html_el(form, "input", NULL);
        html_attr(n, "type", "hidden");
        html_attr(n, "name", "tab");
        html_attr(n, "value", "exceptions");
    }
    n = html_el(form, "div", NULL);
    html_attr(html_el_clean(n, "label", NULL, "Vendor (id or name)"), "for", "f-vendor");
    n = html_el(n, "input", NULL);
    html_attr(n, "type", "text");
    html_id(n, "f-vendor");
    html_attr(n, "name", "vendor");
    html_attr_clean(n, "value", vendor ? vendor : "");
    n = html_el(form, "div", NULL);
    html_attr(html_el_clean(n, "label", NULL, "Reason"), "for", "f-reason");
    sel = html_el(n, "select", NULL);
    html_id(sel, "f-reason");
    html_attr(sel, "name", "reason");
    n = html_el_clean(sel, "option", NULL, "any reason");
    html_attr(n, "value", "");
    for (size_t i = 0; i < n_reasons; i++) {
        snprintf(buf, sizeof(buf), "%s (%d)", reasons[i].words, reasons[i].n);
        n = html_el_clean(sel, "option", NULL, buf);
        html_attr_clean(n, "value", reasons[i].words);
        if (reason && strcmp(reason, reasons[i].words) == 0)
            html_attr(n, "selected", "selected");
    }
    free(reasons);
    html_el_clean(form, "button", NULL, "Filter");
    if ((vendor && *vendor) || (reason && *reason))
        a_link(form, exceptions ? "/queue?tab=exceptions" : "/queue", NULL, "clear");

    if (q.n == 0) {
        html_el_clean(p.main, "p", "empty",
                      (vendor && *vendor) || (reason && *reason) ? "No item matches the filters."
                                                                 : "Nothing to review.");
    } else {
        snprintf(buf, sizeof(buf), "%zu item(s), oldest first%s", q.n,
                 q.n > SERVE_QUEUE_ROWS ? " (the first 1000 shown: filter for the rest)" : "");
        html_el_clean(p.main, "p", NULL, buf);
        table = html_el(p.main, "table", "queue");
        html_id(table, "queue");
        tr = html_el(table, "tr", NULL);
        {
            static const char *const cols[] = {"Item",  "Vendor", "Invoice", "Date",
                                               "Total", "Reason", "Waiting", "Last ERP exchange"};
            for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++)
                html_el_clean(tr, "th", NULL, cols[i]);
        }
        for (size_t i = 0; i < q.n && i < SERVE_QUEUE_ROWS; i++) {
            const struct review_entry *e = &q.v[i];
            const struct store_item *it = &e->item;
            char href[64], amount[48], words[512], age[32], idtxt[32];
            tr = html_el(table, "tr", "item");
            snprintf(idtxt, sizeof(idtxt), "%lld", (long long)it->id);
            html_attr(tr, "data-id", idtxt);
            td = html_el(tr, "td", "id");
            snprintf(href, sizeof(href), "/item/%lld", (long long)it->id);
            snprintf(idtxt, sizeof(idtxt), "#%lld", (long long)it->id);
            a_link(td, href, "open", idtxt);
            td = html_el_clean(tr, "td", "vendor", it->vendor_id);
            if (it->vendor_name) {
                html_el(td, "br", NULL);
                html_el_clean(td, "span", "vendor-name", it->vendor_name);
            }
            html_el_clean(tr, "td", "invoice", it->invoice_number);
            html_el_clean(tr, "td", "date", it->issue_date);
            snprintf(buf, sizeof(buf), "%s %s",
                     money_text(it->total, it->exponent, amount, sizeof(amount)), it->currency);
            html_el_clean(tr, "td", "amount", buf);
            html_el_clean(tr, "td", "reason",
                          review_reason_words(it->reason, words, sizeof(words)));
            html_el_clean(tr, "td", "age", age_text(c->now - it->updated_at, age, sizeof(age)));
            td = html_el(tr, "td", "last");
            if (e->has_last) {
                html_textf_clean(td, "%s, HTTP %d, %s", e->last.step ? e->last.step : "?",
                                 e->last.http_status, e->last.outcome ? e->last.outcome : "?");
                if (e->last.rule)
                    html_textf_clean(td, ", rule %s", e->last.rule);
            } else {
                html_text_clean(td, "none recorded");
            }
        }
    }
    review_queue_done(&q);
    return page_send(c, &p);
}

/* ---- one item --------------------------------------------------------------------------- */

/* The outcome of a decision, shown above the item. */
struct verdict_view {
    bool present;
    int64_t id; /* the item decided on */
    const struct review_result *res;
    /* what the reviewer typed, shown again when the decision is refused */
    const char *action, *doc, *reason, *reviewer, *note;
};

static void exchange_view(struct ctx *c, xmlNodePtr parent, const struct review_exchange *x)
{
    xmlNodePtr sec = html_el(parent, "section", "exchange"), head, pre;
    char when[32], *m;

    head = html_el(sec, "p", "exchange-head");
    html_textf_clean(head, "%s  %s %s ",
                     x->at ? report_local_time(x->at, "-", when, sizeof(when)) : "-",
                     x->step ? x->step : "?", x->method ? x->method : "");
    m = mask(c->s, x->url ? x->url : "");
    html_el_clean(head, "code", "url", m);
    free(m);
    head = html_el(sec, "p", NULL);
    html_textf_clean(head, "HTTP %d in %lld ms, %s, outcome %s", x->http_status,
                     (long long)x->elapsed_ms, x->transport ? x->transport : "?",
                     x->outcome ? x->outcome : "?");
    if (x->rule) {
        html_text_clean(head, ", rule that matched: ");
        html_el_clean(head, "span", "rule", x->rule);
    } else {
        html_text_clean(head, ", no rule matched");
    }
    if (x->excerpt && *x->excerpt) {
        char *lines;
        m = mask(c->s, x->excerpt);
        lines = html_clean_lines(m);
        pre = html_el(sec, "pre", "excerpt");
        html_text(pre, lines); /* cleaned line by line */
        free(lines);
        free(m);
    }
}

static void decision_forms(struct ctx *c, xmlNodePtr parent, const struct review_item *r,
                           const struct verdict_view *v)
{
    static const struct {
        enum review_action action;
        const char *title, *help, *button;
    } forms[] = {
        {REVIEW_POSTED, "Posted in the ERP as document",
         "apbot looks the invoice's key up in the ERP and records it only when the ERP holds it "
         "as this document with the invoice's amount. This needs the ERP.",
         "Check in the ERP and record"},
        {REVIEW_REQUEUE, "Requeue",
         "Back to the bot: it looks the key up in the ERP again before it would post anything.",
         "Requeue"},
        {REVIEW_REJECT, "Reject",
         "A business exception: the invoice will not be booked. Give the reason.", "Reject"},
    };
    const struct store_item *it = &r->item;
    xmlNodePtr sec, box, form, n;
    char action[64], ver[32], why[256];
    const char *reviewer = v->reviewer && *v->reviewer ? v->reviewer : c->reviewer;

    sec = html_el(parent, "section", "decide no-print");
    html_id(sec, "decide");
    html_el_clean(sec, "h2", NULL, "Decide");
    box = html_el(sec, "div", "decisions");
    snprintf(action, sizeof(action), "/item/%lld/decide", (long long)it->id);
    snprintf(ver, sizeof(ver), "%lld", (long long)r->version);
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        const char *name = review_action_name(forms[i].action);
        bool again = v->present && v->action && strcmp(v->action, name) == 0;
        char id[64];
        if (review_allowed(it->state, forms[i].action, it->erp_doc, why, sizeof(why)) != APBOT_OK)
            continue;
        form = html_el(box, "form", "decision");
        snprintf(id, sizeof(id), "form-%s", name);
        html_id(form, id);
        html_attr(form, "method", "post");
        html_attr(form, "action", action);
        html_el_clean(form, "h3", NULL, forms[i].title);
        html_el_clean(form, "p", "help", forms[i].help);
        n = html_el(form, "input", NULL);
        html_attr(n, "type", "hidden");
        html_attr(n, "name", "csrf");
        html_attr(n, "value", c->csrf);
        n = html_el(form, "input", NULL);
        html_attr(n, "type", "hidden");
        html_attr(n, "name", "version");
        html_attr(n, "value", ver);
        n = html_el(form, "input", NULL);
        html_attr(n, "type", "hidden");
        html_attr(n, "name", "action");
        html_attr(n, "value", name);
        if (forms[i].action == REVIEW_POSTED || forms[i].action == REVIEW_REJECT) {
            const bool posted = forms[i].action == REVIEW_POSTED;
            snprintf(id, sizeof(id), "%s-%s", name, posted ? "doc" : "reason");
            html_attr(html_el_clean(form, "label", NULL, posted ? "Document number" : "Reason"),
                      "for", id);
            n = html_el(form, "input", NULL);
            html_attr(n, "type", "text");
            html_id(n, id);
            html_attr(n, "name", posted ? "doc" : "reason");
            html_attr(n, "required", "required");
            html_attr(n, "autocomplete", "off");
            if (again)
                html_attr_clean(n, "value", posted ? v->doc : v->reason);
        }
        snprintf(id, sizeof(id), "%s-reviewer", name);
        html_attr(html_el_clean(form, "label", NULL, "Your name"), "for", id);
        n = html_el(form, "input", NULL);
        html_attr(n, "type", "text");
        html_id(n, id);
        html_attr(n, "name", "reviewer");
        html_attr(n, "required", "required");
        html_attr(n, "pattern", "[A-Za-z0-9._@-]{1,64}");
        html_attr(n, "title", "letters, digits, . _ - @");
        if (reviewer && *reviewer)
            html_attr_clean(n, "value", reviewer);
        snprintf(id, sizeof(id), "%s-note", name);
        html_attr(html_el_clean(form, "label", NULL, "Note (why; goes into the audit trail)"),
                  "for", id);
        n = html_el(form, "textarea", NULL);
        html_id(n, id);
        html_attr(n, "name", "note");
        html_attr(n, "rows", "2");
        html_attr(n, "required", "required");
        if (again && v->note)
            html_text_clean(n, v->note);
        html_el_clean(form, "button", NULL, forms[i].button);
    }
}

static void verdict_banner(struct ctx *c, xmlNodePtr parent, const struct verdict_view *v)
{
    const struct review_result *res = v->res;
    xmlNodePtr b;

    switch (res->verdict) {
    case REVIEW_DONE:
        banner(parent, "ok", "verdict", res->message);
        break;
    case REVIEW_INVALID:
        b = banner(parent, "refused", "verdict", "Not recorded: ");
        html_text_clean(b, res->message);
        break;
    case REVIEW_REFUSED:
        b = banner(parent, "refused", "verdict", "Refused, nothing was recorded: ");
        html_text_clean(b, res->message);
        if (res->stale)
            html_text_clean(b, ". The page below shows the item as it is now.");
        if (res->verify.verdict == REVIEW_ABSENT)
            html_textf_clean(
                b,
                ". If it is booked in a way the ERP cannot show (on paper, say), record it "
                "from the command line with a reason: apbot resolve %lld --posted DOC --flow "
                "FILE --force REASON",
                (long long)v->id);
        break;
    case REVIEW_UNVERIFIABLE:
        b = banner(parent, "warn", "verdict", "The ERP did not answer, nothing was recorded: ");
        html_text_clean(b, res->message);
        break;
    case REVIEW_FAILED:
        b = banner(parent, "refused", "verdict", "The queue could not record it: ");
        html_text_clean(b, res->message);
        break;
    }
    if (res->verify.n_exchanges > 0) {
        xmlNodePtr sec = html_el(parent, "section", "verification");
        html_id(sec, "verification");
        html_el_clean(sec, "h2", NULL, "What the ERP answered");
        html_el_clean(sec, "p", "what", res->verify.what);
        for (size_t i = 0; i < res->verify.n_exchanges; i++)
            exchange_view(c, sec, &res->verify.exchanges[i]);
    }
}

static enum MHD_Result item_page(struct ctx *c, int64_t id, const struct verdict_view *v,
                                 int status)
{
    struct review_item r;
    struct store *st;
    struct invoice inv;
    struct page p;
    char err[APBOT_ERR_LEN], buf[512], a1[48], when[32], title[64];
    xmlNodePtr sec, dl, table, tr, h;
    bool have_inv;
    int rc;

    st = open_store(c, err, sizeof(err));
    if (!st)
        return store_failed(c, err);
    rc = review_item_load(st, id, &r, err, sizeof(err));
    store_close(st);
    if (rc == APBOT_E_NOTFOUND) {
        snprintf(buf, sizeof(buf), "There is no item #%lld in the queue.", (long long)id);
        return simple_page(c, MHD_HTTP_NOT_FOUND, "No such item", buf);
    }
    if (rc != APBOT_OK)
        return store_failed(c, err);
    have_inv = invoice_from_json(r.item.payload, &inv, err, sizeof(err)) == APBOT_OK;

    snprintf(title, sizeof(title), "Item #%lld", (long long)id);
    page_start(&p, c, title, NULL);
    p.status = status;
    h = html_el(p.main, "h1", NULL);
    html_textf_clean(h, "Item #%lld: ", (long long)id);
    html_id(html_el_clean(h, "span", "state", machine_state_name(r.item.state)), "item-state");
    if (v && v->present)
        verdict_banner(c, p.main, v);

    /* the invoice */
    sec = html_el(p.main, "section", "invoice");
    html_id(sec, "invoice");
    html_el_clean(sec, "h2", NULL, "Invoice");
    dl = html_el(sec, "dl", "fields");
    dl_row(dl, "Vendor", r.item.vendor_id);
    {
        xmlNodePtr dd;
        html_el_clean(dl, "dt", NULL, "Vendor name");
        dd = html_el_clean(dl, "dd", NULL, r.item.vendor_name ? r.item.vendor_name : "-");
        html_id(dd, "vendor-name");
    }
    dl_row(dl, "Invoice number", r.item.invoice_number);
    dl_row(dl, "Type", r.item.doc_type);
    dl_row(dl, "Issued", r.item.issue_date);
    dl_row(dl, "Due", have_inv ? inv.due_date : NULL);
    if (have_inv) {
        snprintf(buf, sizeof(buf), "%s %s", money_text(inv.net_total, inv.exponent, a1, sizeof(a1)),
                 inv.currency);
        dl_row(dl, "Net", buf);
        snprintf(buf, sizeof(buf), "%s %s", money_text(inv.tax_total, inv.exponent, a1, sizeof(a1)),
                 inv.currency);
        dl_row(dl, "Tax", buf);
    }
    snprintf(buf, sizeof(buf), "%s %s", money_text(r.item.total, r.item.exponent, a1, sizeof(a1)),
             r.item.currency);
    {
        xmlNodePtr dd;
        html_el_clean(dl, "dt", NULL, "Payable");
        dd = html_el_clean(dl, "dd", "amount", buf);
        html_id(dd, "payable");
    }
    dl_row(dl, "Key", r.item.key);
    dl_row(dl, "ERP document", r.item.erp_doc);
    {
        xmlNodePtr dd;
        html_el_clean(dl, "dt", NULL, "Reason");
        dd = html_el_clean(dl, "dd", NULL, r.item.reason ? r.item.reason : "-");
        html_id(dd, "reason");
    }
    dl_row(dl, "Source", r.item.source);
    snprintf(buf, sizeof(buf), "%s (waiting %s)",
             report_local_time(r.item.created_at, "-", when, sizeof(when)),
             age_text(c->now - r.item.created_at, a1, sizeof(a1)));
    dl_row(dl, "Received", buf);
    dl_row(dl, "Last change", report_local_time(r.item.updated_at, "-", when, sizeof(when)));
    snprintf(buf, sizeof(buf), "posts %d, lookup cycles %d, transient attempts %d",
             r.item.counters.posts, r.item.counters.cycles, r.item.counters.attempts);
    dl_row(dl, "Counters", buf);
    snprintf(buf, sizeof(buf), "%lld", (long long)r.version);
    dl_row(dl, "Version", buf);

    if (have_inv && inv.n_lines > 0) {
        table = html_el(sec, "table", "lines");
        html_id(table, "lines");
        tr = html_el(table, "tr", NULL);
        {
            static const char *const cols[] = {"#",   "Description", "G/L account", "Quantity",
                                               "Net", "Tax",         "Tax category"};
            for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++)
                html_el_clean(tr, "th", NULL, cols[i]);
        }
        for (size_t i = 0; i < inv.n_lines; i++) {
            const struct invoice_line *l = &inv.lines[i];
            tr = html_el(table, "tr", NULL);
            snprintf(buf, sizeof(buf), "%zu", i + 1);
            html_el_clean(tr, "td", NULL, buf);
            html_el_clean(tr, "td", NULL, l->description);
            html_el_clean(tr, "td", NULL, l->gl_account);
            html_el_clean(tr, "td", NULL, l->quantity);
            html_el_clean(tr, "td", "amount", money_text(l->net, inv.exponent, a1, sizeof(a1)));
            html_el_clean(tr, "td", "amount", money_text(l->tax, inv.exponent, a1, sizeof(a1)));
            html_el_clean(tr, "td", NULL, l->tax_category);
        }
    }
    if (have_inv)
        invoice_done(&inv);

    if (r.item.state == MACHINE_MANUAL_REVIEW || r.item.state == MACHINE_BUSINESS_EXCEPTION) {
        struct verdict_view none = {0};
        decision_forms(c, p.main, &r, v ? v : &none);
    }

    /* the timeline */
    sec = html_el(p.main, "section", "timeline");
    html_id(sec, "timeline");
    html_el_clean(sec, "h2", NULL, "Timeline");
    table = html_el(sec, "table", "events");
    tr = html_el(table, "tr", NULL);
    html_el_clean(tr, "th", NULL, "When");
    html_el_clean(tr, "th", NULL, "From");
    html_el_clean(tr, "th", NULL, "To");
    html_el_clean(tr, "th", NULL, "Event");
    html_el_clean(tr, "th", NULL, "By");
    html_el_clean(tr, "th", NULL, "Detail");
    for (size_t i = 0; i < r.n_events; i++) {
        const struct review_event *e = &r.events[i];
        tr = html_el(table, "tr", "event");
        html_el_clean(tr, "td", NULL, report_local_time(e->at, "-", when, sizeof(when)));
        html_el_clean(tr, "td", NULL, e->from ? e->from : "-");
        html_el_clean(tr, "td", NULL, e->to);
        html_el_clean(tr, "td", NULL, e->event);
        html_el_clean(tr, "td", "actor", e->actor);
        html_el_clean(tr, "td", "detail", e->detail);
    }

    /* every ERP exchange */
    sec = html_el(p.main, "section", "evidence");
    html_id(sec, "evidence");
    snprintf(buf, sizeof(buf), "ERP exchanges (%zu)", r.n_evidence);
    html_el_clean(sec, "h2", NULL, buf);
    if (r.n_evidence == 0)
        html_el_clean(sec, "p", NULL, "None recorded.");
    for (size_t i = 0; i < r.n_evidence; i++)
        exchange_view(c, sec, &r.evidence[i]);
    review_item_done(&r);
    return page_send(c, &p);
}

/* ---- deciding --------------------------------------------------------------------------- */

struct form {
    char *names[SERVE_FIELDS_MAX], *values[SERVE_FIELDS_MAX];
    size_t n;
};

static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Decodes one x-www-form-urlencoded token. Heap. */
static char *form_decode(const char *s, size_t n)
{
    char *out = apbot_xmalloc(n + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '+') {
            out[o++] = ' ';
        } else if (s[i] == '%' && i + 2 < n && hexval((unsigned char)s[i + 1]) >= 0 &&
                   hexval((unsigned char)s[i + 2]) >= 0) {
            out[o++] =
                (char)(hexval((unsigned char)s[i + 1]) * 16 + hexval((unsigned char)s[i + 2]));
            i += 2;
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = '\0';
    return out;
}

static void form_parse(struct form *f, const char *body)
{
    const char *p = body ? body : "";
    memset(f, 0, sizeof(*f));
    while (*p && f->n < SERVE_FIELDS_MAX) {
        size_t len = strcspn(p, "&");
        const char *eq = memchr(p, '=', len);
        if (eq) {
            f->names[f->n] = form_decode(p, (size_t)(eq - p));
            f->values[f->n] = form_decode(eq + 1, len - (size_t)(eq - p) - 1);
            f->n++;
        }
        p += len + (p[len] == '&');
    }
}

static const char *form_get(const struct form *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->names[i], name) == 0)
            return f->values[i];
    return NULL;
}

static void form_done(struct form *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->names[i]);
        free(f->values[i]);
    }
}

static enum MHD_Result decide(struct ctx *c, int64_t id, const char *body)
{
    struct form f;
    struct review_decision d;
    struct review_result res;
    struct verdict_view v;
    struct store *st;
    const char *csrf, *version, *action_s, *note;
    char err[APBOT_ERR_LEN], *endp = NULL;
    long long ver;
    int status;
    enum MHD_Result rc;

    form_parse(&f, body);
    csrf = form_get(&f, "csrf");
    if (!csrf || strlen(csrf) != 64 || CRYPTO_memcmp(csrf, c->csrf, 64) != 0) {
        form_done(&f);
        return simple_page(c, MHD_HTTP_FORBIDDEN, "Refused",
                           "This form is not from this page's session (its CSRF token is missing "
                           "or wrong). Open the item again and decide there.");
    }
    version = form_get(&f, "version");
    action_s = form_get(&f, "action");
    ver = version ? strtoll(version, &endp, 10) : 0;
    if (!version || !endp || *endp || ver <= 0) {
        form_done(&f);
        return simple_page(c, MHD_HTTP_BAD_REQUEST, "Refused",
                           "The form does not say which version of the item it was made for.");
    }
    note = form_get(&f, "note");
    memset(&d, 0, sizeof(d));
    d.id = id;
    d.action = review_action_from_name(action_s);
    d.doc = form_get(&f, "doc");
    d.reason = form_get(&f, "reason");
    d.operator_name = form_get(&f, "reviewer");
    d.note = note;
    d.require_note = true;
    d.expect_version = ver;
    if (d.action != REVIEW_POSTED)
        d.doc = NULL;
    if (d.action != REVIEW_REJECT)
        d.reason = NULL;

    st = open_store(c, err, sizeof(err));
    if (!st) {
        form_done(&f);
        return store_failed(c, err);
    }
    if (review_decide(st, c->s->opt->flow, c->s->opt->erp_url, &d, &res) != APBOT_OK) {
        store_close(st);
        form_done(&f);
        return simple_page(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "Error", "internal error");
    }
    store_close(st);
    switch (res.verdict) {
    case REVIEW_DONE:
        status = MHD_HTTP_OK;
        snprintf(c->reviewer, sizeof(c->reviewer), "%s", d.operator_name);
        c->set_reviewer = true;
        break;
    case REVIEW_INVALID:
        status = MHD_HTTP_BAD_REQUEST;
        break;
    case REVIEW_REFUSED:
        status = res.not_found ? MHD_HTTP_NOT_FOUND : MHD_HTTP_CONFLICT;
        break;
    case REVIEW_UNVERIFIABLE:
        status = MHD_HTTP_SERVICE_UNAVAILABLE;
        break;
    case REVIEW_FAILED:
    default:
        status = MHD_HTTP_INTERNAL_SERVER_ERROR;
        break;
    }
    if (c->s->opt->log) {
        char *m = text_escape(res.message, 2048, 0);
        char *who = text_escape(d.operator_name, 128, 0);
        static const char *const verdicts[] = {"done", "invalid", "refused", "unverifiable",
                                               "failed"};
        fprintf(c->s->opt->log, "apbot serve: item=%lld decision=%s by=%s verdict=%s: %s\n",
                (long long)id, review_action_name(d.action), who,
                (size_t)res.verdict < sizeof(verdicts) / sizeof(verdicts[0]) ? verdicts[res.verdict]
                                                                             : "?",
                m);
        fflush(c->s->opt->log);
        free(m);
        free(who);
    }
    memset(&v, 0, sizeof(v));
    v.present = true;
    v.id = id;
    v.res = &res;
    v.action = action_s;
    v.doc = d.doc;
    v.reason = d.reason;
    v.reviewer = d.operator_name;
    v.note = note;
    rc = item_page(c, id, &v, status);
    review_result_done(&res);
    form_done(&f);
    return rc;
}

/* ---- the report ------------------------------------------------------------------------- */

static enum MHD_Result page_report(struct ctx *c)
{
    const char *date = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "date");
    const char *format = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "format");
    const struct flow *f = c->s->opt->flow;
    struct report_options opt;
    struct report *r = NULL;
    struct erp_session *erp = NULL;
    struct store *st;
    struct page p;
    char today[11], err[APBOT_ERR_LEN], buf[APBOT_ERR_LEN + 128];
    enum report_format fmt = REPORT_FMT_HTML;
    xmlNodePtr form, n;
    int rc;

    report_local_date(c->now, today);
    if (!date || !*date)
        date = today;
    if (!invoice_date_valid(date)) {
        snprintf(buf, sizeof(buf), "'%.40s' is not a date (YYYY-MM-DD).", date);
        return simple_page(c, MHD_HTTP_BAD_REQUEST, "Report", buf);
    }
    if (format && *format && report_format_from_name(format, &fmt) != APBOT_OK)
        return simple_page(c, MHD_HTTP_BAD_REQUEST, "Report", "Formats: html, text, csv, json.");
    st = open_store(c, err, sizeof(err));
    if (!st)
        return store_failed(c, err);
    memset(&opt, 0, sizeof(opt));
    opt.date = date;
    opt.now = c->now;
    rc = f && f->list.get ? erp_open(f, c->s->opt->erp_url, NULL, &erp, err, sizeof(err))
                          : apbot_fail(err, sizeof(err), APBOT_E_INVAL,
                                       "the flow has no list operation to read the day's records");
    if (rc == APBOT_OK) {
        erp_set_retries(erp, 1);
        rc = report_build(st, erp, f, &opt, &r, err, sizeof(err));
    }
    erp_close(erp);
    store_close(st);

    if (rc == APBOT_OK && fmt != REPORT_FMT_HTML) {
        char *mem = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&mem, &len);
        enum MHD_Result res;
        static const char *const types[] = {[REPORT_FMT_TEXT] = "text/plain; charset=utf-8",
                                            [REPORT_FMT_CSV] = "text/csv; charset=utf-8",
                                            [REPORT_FMT_JSON] = "application/json",
                                            [REPORT_FMT_HTML] = "text/html; charset=utf-8"};
        if (!out)
            abort(); /* open_memstream fails only on out-of-memory */
        rc = report_write(r, fmt, out, err, sizeof(err));
        fclose(out);
        report_free(r);
        if (rc != APBOT_OK) {
            free(mem);
            return simple_page(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "Report", err);
        }
        res = send_bytes(c, MHD_HTTP_OK, types[fmt], mem, len, false);
        free(mem);
        return res;
    }

    page_start(&p, c, "Report", "report");
    form = html_el(p.main, "form", "filters");
    html_attr(form, "method", "get");
    html_attr(form, "action", "/report");
    n = html_el(form, "div", NULL);
    html_attr(html_el_clean(n, "label", NULL, "Booking day"), "for", "f-date");
    n = html_el(n, "input", NULL);
    html_attr(n, "type", "date");
    html_id(n, "f-date");
    html_attr(n, "name", "date");
    html_attr_clean(n, "value", date);
    html_el_clean(form, "button", NULL, "Show");
    if (rc != APBOT_OK) {
        p.status = MHD_HTTP_SERVICE_UNAVAILABLE;
        snprintf(buf, sizeof(buf),
                 "The ERP could not be read completely, so there is no report (a partial "
                 "listing never passes for a reconciliation): %s",
                 err);
        html_el_clean(p.main, "h1", NULL, "Reconciliation report");
        banner(p.main, "refused", "erp-status", buf);
        return page_send(c, &p);
    }
    {
        xmlNodePtr links = html_el(p.main, "p", "no-print");
        char href[64], enc[32];
        html_text_clean(links, "Download: ");
        static const char *const fmts[] = {"text", "csv", "json"};
        for (size_t i = 0; i < 3; i++) {
            snprintf(href, sizeof(href), "/report?date=%s&format=%s",
                     url_encode(date, enc, sizeof(enc)), fmts[i]);
            a_link(links, href, NULL, fmts[i]);
            html_text_clean(links, " ");
        }
    }
    report_html_body(r, p.main);
    report_free(r);
    return page_send(c, &p);
}

/* ---- dispatch --------------------------------------------------------------------------- */

static enum MHD_Result send_css(struct ctx *c)
{
    struct apbot_buf b;
    enum MHD_Result rc;
    apbot_buf_init(&b, 64 * 1024);
    if (apbot_buf_adds(&b, report_html_css()) != APBOT_OK ||
        apbot_buf_adds(&b, serve_css) != APBOT_OK)
        abort(); /* two constant strings far below the bound */
    rc = send_bytes(c, MHD_HTTP_OK, "text/css; charset=utf-8", apbot_buf_str(&b), b.len, true);
    apbot_buf_done(&b);
    return rc;
}

/* "/item/123" or "/item/123/decide": the id (0 when the path is not one of these). */
static int64_t item_id_of(const char *url, bool *ret_decide)
{
    char *end = NULL;
    long long id;
    *ret_decide = false;
    if (strncmp(url, "/item/", 6) != 0 || url[6] < '1' || url[6] > '9')
        return 0;
    id = strtoll(url + 6, &end, 10);
    if (!end || id <= 0)
        return 0;
    if (*end == '\0')
        return id;
    if (strcmp(end, "/decide") == 0) {
        *ret_decide = true;
        return id;
    }
    return 0;
}

static enum MHD_Result handle(struct server *s, struct MHD_Connection *conn, const char *url,
                              const char *method, struct req *rq)
{
    struct ctx c;
    const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host");
    const char *cookie = MHD_lookup_connection_value(conn, MHD_COOKIE_KIND, SESSION_COOKIE);
    const char *rev = MHD_lookup_connection_value(conn, MHD_COOKIE_KIND, REVIEWER_COOKIE);
    bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    bool post = strcmp(method, "POST") == 0;
    bool decide_path = false;
    int64_t id;

    memset(&c, 0, sizeof(c));
    c.s = s;
    c.conn = conn;
    c.now = store_now_ms();
    if (session_valid(s, cookie)) {
        snprintf(c.sid, sizeof(c.sid), "%s", cookie);
    } else {
        session_new(s, c.sid);
        c.new_sid = true;
    }
    csrf_of(s, c.sid, c.csrf);
    if (rev && review_name_ok(rev))
        snprintf(c.reviewer, sizeof(c.reviewer), "%s", rev);

    if (!serve_host_ok(host, &s->addr, s->port))
        return simple_page(&c, MHD_HTTP_MISDIRECTED_REQUEST, "Refused",
                           "This page answers only to its own loopback address.");
    if (s->opt->password && *s->opt->password &&
        !serve_basic_ok(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization"),
                        s->opt->password))
        return simple_page(&c, MHD_HTTP_UNAUTHORIZED, "Sign in",
                           "This page needs the review password (HTTP Basic).");
    if (!get && !post)
        return simple_page(&c, MHD_HTTP_METHOD_NOT_ALLOWED, "Refused", "Only GET and POST.");
    if (rq->too_big)
        return simple_page(&c, MHD_HTTP_CONTENT_TOO_LARGE, "Refused", "The form is too large.");

    id = item_id_of(url, &decide_path);
    if (post) {
        const char *type = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
        const char *site = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Sec-Fetch-Site");
        if (!decide_path)
            return simple_page(&c, MHD_HTTP_METHOD_NOT_ALLOWED, "Refused",
                               "Only decisions are posted.");
        if (!type || strncasecmp(type, "application/x-www-form-urlencoded", 33) != 0)
            return simple_page(&c, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "Refused",
                               "A decision comes from the page's form.");
        if (!serve_origin_ok(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin"),
                             MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Referer"), host) ||
            (site && strcmp(site, "same-origin") != 0 && strcmp(site, "none") != 0))
            return simple_page(&c, MHD_HTTP_FORBIDDEN, "Refused",
                               "A decision must come from this page, not from another site.");
        if (c.new_sid)
            return simple_page(&c, MHD_HTTP_FORBIDDEN, "Refused",
                               "This form is not from this page's session. Open the item again "
                               "and decide there.");
        return decide(&c, id, apbot_buf_str(&rq->body));
    }
    if (strcmp(url, "/") == 0)
        return page_today(&c);
    if (strcmp(url, "/queue") == 0)
        return page_queue(&c);
    if (strcmp(url, "/report") == 0)
        return page_report(&c);
    if (strcmp(url, "/app.css") == 0)
        return send_css(&c);
    if (id > 0 && !decide_path)
        return item_page(&c, id, NULL, MHD_HTTP_OK);
    return simple_page(&c, MHD_HTTP_NOT_FOUND, "Not found", "There is no such page.");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    struct req *rq = *con_cls;
    (void)version;
    if (!rq) {
        rq = apbot_xcalloc(1, sizeof(*rq));
        apbot_buf_init(&rq->body, SERVE_BODY_MAX);
        *con_cls = rq;
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (apbot_buf_add(&rq->body, upload_data, *upload_data_size) != APBOT_OK)
            rq->too_big = true;
        *upload_data_size = 0;
        return MHD_YES;
    }
    return handle(cls, conn, url, method, rq);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct req *rq = *con_cls;
    (void)cls;
    (void)conn;
    (void)toe;
    if (rq) {
        apbot_buf_done(&rq->body);
        free(rq);
        *con_cls = NULL;
    }
}

int serve_run(const struct serve_options *opt, char *err, size_t errlen)
{
    struct server s;
    struct MHD_Daemon *d;
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    const union MHD_DaemonInfo *info;
    unsigned int flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD;
    int rc;

    memset(&s, 0, sizeof(s));
    s.opt = opt;
    rc = serve_parse_listen(opt->listen ? opt->listen : SERVE_DEFAULT_LISTEN, &s.addr, err, errlen);
    if (rc == APBOT_OK)
        rc = serve_exposure_ok(&s.addr, opt->password, err, errlen);
    if (rc != APBOT_OK)
        return rc;
    if (RAND_bytes(s.key, sizeof(s.key)) != 1)
        return apbot_fail(err, errlen, APBOT_E_BUG, "no randomness for the session key");
    s.erp_user = getenv("APBOT_ERP_USER");
    s.erp_password = getenv("APBOT_ERP_PASSWORD");
    xmlInitParser();

    memset(&a4, 0, sizeof(a4));
    memset(&a6, 0, sizeof(a6));
    if (s.addr.ipv6) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons(s.addr.port);
        if (inet_pton(AF_INET6, s.addr.host, &a6.sin6_addr) != 1)
            return apbot_fail(err, errlen, APBOT_E_INVAL, "bad address %s", s.addr.host);
        flags |= MHD_USE_IPv6;
    } else {
        a4.sin_family = AF_INET;
        a4.sin_port = htons(s.addr.port);
        if (inet_pton(AF_INET, s.addr.host, &a4.sin_addr) != 1)
            return apbot_fail(err, errlen, APBOT_E_INVAL, "bad address %s", s.addr.host);
    }
    d = MHD_start_daemon(flags, s.addr.port, NULL, NULL, on_request, &s, MHD_OPTION_SOCK_ADDR,
                         s.addr.ipv6 ? (struct sockaddr *)&a6 : (struct sockaddr *)&a4,
                         MHD_OPTION_NOTIFY_COMPLETED, on_completed, &s, MHD_OPTION_CONNECTION_LIMIT,
                         (unsigned int)64, MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)32,
                         MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)60,
                         MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(128 * 1024), MHD_OPTION_END);
    if (!d)
        return apbot_fail(err, errlen, APBOT_E_IO, "cannot listen on %s:%u (in use?)", s.addr.host,
                          (unsigned)s.addr.port);
    info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    s.port = info && info->port ? info->port : s.addr.port;
    if (opt->announce) {
        if (s.addr.ipv6)
            fprintf(opt->announce, "listening on http://[%s]:%u\n", s.addr.host, (unsigned)s.port);
        else
            fprintf(opt->announce, "listening on http://%s:%u\n", s.addr.host, (unsigned)s.port);
        fflush(opt->announce);
    }
    while (!atomic_load(opt->stop)) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    MHD_stop_daemon(d);
    OPENSSL_cleanse(s.key, sizeof(s.key));
    return APBOT_OK;
}
