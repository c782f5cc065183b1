/*
 * serve.c - the review page's server (see serve.h): libmicrohttpd with a thread per connection,
 * and the guards every request passes before a page (serve_today.c, serve_queue.c,
 * serve_item.c, serve_report.c) sees it.
 *
 * What it guards, in the order a request meets it: the Host header on loopback (DNS
 * rebinding), the method and body size, who is asking (serve_auth.c: a trusted proxy's
 * header or the session behind the cookie) and whether they may ask for this (a page needs a
 * signed-in person wherever people sign in, a decision a reviewer), then for a POST the
 * form's content type, its origin and the cookie's CSRF token (checked with the form). Pages
 * are never cached, never framed and run no script (Content-Security-Policy without
 * script-src). Each request opens the queue itself and closes it when answered, so a running
 * `apbot run` is never held up for longer than one of the store's own transactions.
 */
#include "office/serve-int.h"

#include <arpa/inet.h>
#include <libxml/parser.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "apbot/buf.h"
#include "apbot/mem.h"
#include "apbot/review.h"
#include "apbot/secret.h"
#include "apbot/store.h"
#include "base/unittest.h"

#define SERVE_BODY_MAX 16384 /* bytes of a POST body at most */

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

int serve_exposure_ok(const struct serve_addr *a, bool reviewers, const char *password, char *err,
                      size_t errlen)
{
    if (a->loopback || reviewers)
        return APBOT_OK;
    if (!password || !*password)
        return apbot_fail(err, errlen, APBOT_E_INVAL,
                          "refusing to listen on %s, which is not loopback, where nobody needs to "
                          "sign in: give a reviewers file (--reviewers FILE, apbot reviewer add) "
                          "or set APBOT_REVIEW_PASSWORD",
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

UNITTEST bool serve_origin_ok(const char *origin, const char *referer, const char *scheme,
                              const char *host_header)
{
    char want[160];
    size_t n;

    if (!host_header)
        return false;
    n = (size_t)snprintf(want, sizeof(want), "%s://%s", scheme, host_header);
    if (n >= sizeof(want))
        return false;
    if (origin)
        return strcasecmp(origin, want) == 0;
    if (referer)
        return strncasecmp(referer, want, n) == 0 && (referer[n] == '/' || referer[n] == '\0');
    return true;
}

/* Per request: its body. */
struct req {
    struct apbot_buf body;
    bool too_big;
};

/* ---- answers ---------------------------------------------------------------------------- */

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

enum MHD_Result serve_send(struct serve_ctx *c, int status, const char *type, const void *data,
                           size_t len, bool cacheable)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);
    enum MHD_Result rc;
    char cookie[2][256];

    if (!r)
        return MHD_NO;
    safe_headers(r, cacheable);
    MHD_add_response_header(r, "Content-Type", type);
    for (int i = 0, n = serve_cookies(c, cookie); i < n; i++)
        MHD_add_response_header(r, "Set-Cookie", cookie[i]);
    if (c->retry_after)
        MHD_add_response_header(r, "Retry-After", c->retry_after);
    if (status == MHD_HTTP_UNAUTHORIZED && c->basic_challenge)
        MHD_add_response_header(r, "WWW-Authenticate",
                                "Basic realm=\"apbot metrics\", charset=\"UTF-8\"");
    rc = MHD_queue_response(c->conn, (unsigned int)status, r);
    MHD_destroy_response(r);
    return rc;
}

enum MHD_Result serve_redirect(struct serve_ctx *c, const char *location)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    enum MHD_Result rc;
    char cookie[2][256];

    if (!r)
        return MHD_NO;
    safe_headers(r, false);
    MHD_add_response_header(r, "Location", location);
    for (int i = 0, n = serve_cookies(c, cookie); i < n; i++)
        MHD_add_response_header(r, "Set-Cookie", cookie[i]);
    rc = MHD_queue_response(c->conn, MHD_HTTP_SEE_OTHER, r);
    MHD_destroy_response(r);
    return rc;
}

/* ---- dispatch --------------------------------------------------------------------------- */

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

/* The request's context: who asks (serve_auth.c), the cookie and its CSRF token. */
static void ctx_init(struct serve_ctx *c, struct serve_server *s, struct MHD_Connection *conn)
{
    memset(c, 0, sizeof(*c));
    c->s = s;
    c->conn = conn;
    c->now = store_now_ms();
    serve_auth_identify(c);
}

/* Why a request is refused: the answer's status, the page's title and what it says. */
struct refusal {
    int status;
    const char *title, *what;
};

static bool refuse(struct refusal *no, int status, const char *title, const char *what)
{
    no->status = status;
    no->title = title;
    no->what = what;
    return false;
}

/* The guards of every request: the Host on loopback (not from a trusted proxy, which names the
 * page as the browser sees it), the method (GET, HEAD or POST), the body's size. */
static bool request_ok(const struct serve_ctx *c, const char *method, const struct req *rq,
                       struct refusal *no)
{
    const struct serve_server *s = c->s;
    const char *host = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Host");

    if (!c->from_proxy && !serve_host_ok(host, &s->addr, s->port))
        return refuse(no, MHD_HTTP_MISDIRECTED_REQUEST, "Refused",
                      "This page answers only to its own loopback address.");
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0 && strcmp(method, "POST") != 0)
        return refuse(no, MHD_HTTP_METHOD_NOT_ALLOWED, "Refused", "Only GET and POST.");
    if (rq->too_big)
        return refuse(no, MHD_HTTP_CONTENT_TOO_LARGE, "Refused", "The form is too large.");
    return true;
}

/* The guards of a POST: from a form (its content type), from the page's own origin (Origin or
 * Referer, and Sec-Fetch-Site), with a cookie this server made. The form's CSRF token is
 * checked with the form. */
static bool post_ok(const struct serve_ctx *c, struct refusal *no)
{
    const char *host = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Host");
    const char *type = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Content-Type");
    const char *site = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Sec-Fetch-Site");

    if (!type || strncasecmp(type, "application/x-www-form-urlencoded", 33) != 0)
        return refuse(no, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "Refused",
                      "A decision comes from the page's form.");
    if (!serve_origin_ok(MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Origin"),
                         MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Referer"),
                         c->secure ? "https" : "http", host) ||
        (site && strcmp(site, "same-origin") != 0 && strcmp(site, "none") != 0))
        return refuse(no, MHD_HTTP_FORBIDDEN, "Refused",
                      "A decision must come from this page, not from another site.");
    if (c->new_anchor)
        return refuse(no, MHD_HTTP_FORBIDDEN, "Refused",
                      "This form is not from this page's session. Open the page again and "
                      "send it from there.");
    return true;
}

/* What url asks for with method, and the item (id > 0) for a page or a decision on one. */
static enum serve_route route_of(const char *method, const char *url, int64_t *ret_id,
                                 bool *ret_known)
{
    const bool post = strcmp(method, "POST") == 0;
    bool decide = false;
    int64_t id = item_id_of(url, &decide);

    *ret_id = id;
    *ret_known = true;
    if (strcmp(url, "/app.css") == 0 && !post)
        return SERVE_ROUTE_ASSET;
    if (strcmp(url, "/login") == 0)
        return SERVE_ROUTE_LOGIN;
    if (strcmp(url, "/logout") == 0 && post)
        return SERVE_ROUTE_LOGOUT;
    if (strcmp(url, "/metrics") == 0 && !post)
        return SERVE_ROUTE_METRICS;
    if (post) {
        *ret_known = id > 0 && decide;
        return SERVE_ROUTE_DECIDE;
    }
    *ret_known = strcmp(url, "/") == 0 || strcmp(url, "/queue") == 0 ||
                 strcmp(url, "/report") == 0 || (id > 0 && !decide);
    return SERVE_ROUTE_VIEW;
}

/* A GET (or HEAD) of a page. */
static enum MHD_Result route_get(struct serve_ctx *c, const char *url, int64_t id)
{
    if (strcmp(url, "/") == 0)
        return serve_today(c);
    if (strcmp(url, "/queue") == 0)
        return serve_queue(c);
    if (strcmp(url, "/report") == 0)
        return serve_report(c);
    if (id > 0)
        return serve_item(c, id);
    return serve_simple_page(c, MHD_HTTP_NOT_FOUND, "Not found", "There is no such page.");
}

/* Appends s to b percent-encoded (all but unreserved characters); false past b's bound. */
static bool add_escaped(struct apbot_buf *b, const char *s)
{
    static const char hexd[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char enc[3] = {'%', hexd[*p >> 4], hexd[*p & 15]};
        bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                     (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' || *p == '~' ||
                     *p == '/';
        if (apbot_buf_add(b, plain ? (const char *)p : enc, plain ? 1 : 3) != APBOT_OK)
            return false;
    }
    return true;
}

/* MHD_get_connection_values' callback: one query argument more, "k=v" (encoded). */
static enum MHD_Result add_argument(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value)
{
    struct apbot_buf *b = cls;
    (void)kind;
    if ((b->len && apbot_buf_adds(b, "&") != APBOT_OK) || !add_escaped(b, key) ||
        apbot_buf_adds(b, "=") != APBOT_OK || !add_escaped(b, value ? value : ""))
        return MHD_NO;
    return MHD_YES;
}

/* The sign-in page, to come back to url with its query afterwards (cut when too long). */
static enum MHD_Result to_sign_in(struct serve_ctx *c, const char *url)
{
    struct apbot_buf q, loc;
    enum MHD_Result rc;

    apbot_buf_init(&q, 480);
    apbot_buf_init(&loc, 2048);
    MHD_get_connection_values(c->conn, MHD_GET_ARGUMENT_KIND, add_argument, &q);
    /* next=PATH?QUERY, the whole of it encoded once more as one argument */
    if (apbot_buf_adds(&loc, "/login?next=") != APBOT_OK || !add_escaped(&loc, url) ||
        (q.len && (!add_escaped(&loc, "?") || !add_escaped(&loc, apbot_buf_str(&q))))) {
        apbot_buf_reset(&loc);
        if (apbot_buf_adds(&loc, "/login") != APBOT_OK)
            abort(); /* a constant far below the bound */
    }
    rc = serve_redirect(c, apbot_buf_str(&loc));
    apbot_buf_done(&q);
    apbot_buf_done(&loc);
    return rc;
}

/* A request that may not be made by whoever makes it: 403, logged. */
static enum MHD_Result forbidden(struct serve_ctx *c, enum serve_route route, int64_t id)
{
    if (route == SERVE_ROUTE_DECIDE && c->who.known) {
        serve_log(c, "warn", "refused: %s %s may not decide (item=%lld from=%s)",
                  reviewers_role_name(c->who.role), c->who.login, (long long)id, c->client);
        return serve_simple_page(c, MHD_HTTP_FORBIDDEN, "Refused",
                                 "You may look at the queue, not decide: your role is viewer.");
    }
    serve_log(c, "warn", "refused: a decision from someone not signed in (item=%lld from=%s)",
              (long long)id, c->client);
    return serve_simple_page(c, MHD_HTTP_FORBIDDEN, "Refused",
                             c->s->mode == SERVE_MODE_OPEN
                                 ? "Nobody decides on this page: it runs without reviewers. "
                                   "Start apbot serve with a reviewers file to decide here."
                                 : "Sign in first: only a signed-in reviewer decides.");
}

#define BASIC_TEXT "GET /metrics wants a login's name and password (HTTP Basic).\n"

/* A whole request: its context, the guards, who may ask for it, then the page or the form. */
static enum MHD_Result handle(struct serve_server *s, struct MHD_Connection *conn, const char *url,
                              const char *method, struct req *rq)
{
    struct serve_ctx c;
    struct refusal no;
    enum serve_route route;
    bool known;
    int64_t id;
    char buf[160];

    ctx_init(&c, s, conn);
    if (!request_ok(&c, method, rq, &no))
        return serve_simple_page(&c, no.status, no.title, no.what);
    route = route_of(method, url, &id, &known);
    if (c.proxy_unknown && route != SERVE_ROUTE_ASSET) {
        snprintf(buf, sizeof(buf),
                 "Your company's login says you are %s, who is not among this page's reviewers.",
                 c.proxy_user);
        return serve_simple_page(&c, MHD_HTTP_FORBIDDEN, "Not a reviewer here", buf);
    }
    if (strcmp(method, "POST") == 0 && !post_ok(&c, &no))
        return serve_simple_page(&c, no.status, no.title, no.what);
    switch (serve_access_decide(s->mode, c.who.known, c.who.role, route)) {
    case SERVE_ALLOW:
        break;
    case SERVE_SIGN_IN:
        return to_sign_in(&c, url);
    case SERVE_CREDENTIALS:
        if (serve_auth_basic(&c))
            break;
        return serve_send(&c, MHD_HTTP_UNAUTHORIZED, "text/plain; charset=utf-8", BASIC_TEXT,
                          sizeof(BASIC_TEXT) - 1, false);
    case SERVE_FORBIDDEN:
        if (!known)
            break; /* not a decision at all: said below */
        return forbidden(&c, route, id);
    }
    switch (route) {
    case SERVE_ROUTE_ASSET:
        return serve_send_css(&c);
    case SERVE_ROUTE_LOGIN:
        return strcmp(method, "POST") == 0 ? serve_login_post(&c, apbot_buf_str(&rq->body))
                                           : serve_login_get(&c);
    case SERVE_ROUTE_LOGOUT:
        return serve_logout(&c, apbot_buf_str(&rq->body));
    case SERVE_ROUTE_VIEW:
        return route_get(&c, url, known ? id : 0);
    case SERVE_ROUTE_METRICS:
        return serve_metrics(&c);
    case SERVE_ROUTE_DECIDE:
        break;
    }
    if (!known)
        return serve_simple_page(&c, MHD_HTTP_METHOD_NOT_ALLOWED, "Refused",
                                 "Only decisions, sign-in and sign-out are posted.");
    return serve_decide(&c, id, apbot_buf_str(&rq->body));
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

/* The socket address to bind for a, its port included. APBOT_E_INVAL when a->host is no
 * address. */
static int listen_sockaddr(const struct serve_addr *a, struct sockaddr_storage *ss, char *err,
                           size_t errlen)
{
    memset(ss, 0, sizeof(*ss));
    if (a->ipv6) {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons(a->port);
        if (inet_pton(AF_INET6, a->host, &a6->sin6_addr) != 1)
            return apbot_fail(err, errlen, APBOT_E_INVAL, "bad address %s", a->host);
    } else {
        struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
        a4->sin_family = AF_INET;
        a4->sin_port = htons(a->port);
        if (inet_pton(AF_INET, a->host, &a4->sin_addr) != 1)
            return apbot_fail(err, errlen, APBOT_E_INVAL, "bad address %s", a->host);
    }
    return APBOT_OK;
}

/* GnuTLS's priorities for the page: its defaults, but TLS 1.2 and 1.3 only. */
#define SERVE_TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

/* libmicrohttpd on sa: a thread per connection, at most 64 connections (32 from one address),
 * idle ones closed after 60 s, 128 KiB of memory each; https with s's certificate when s->tls.
 * NULL when it cannot listen. */
static struct MHD_Daemon *start_daemon(struct serve_server *s, const struct sockaddr *sa)
{
    unsigned int flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD;
    /* libmicrohttpd keeps the pointers: they live in s until the daemon stops */
    struct MHD_OptionItem tls[] = {
        {s->tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, s->tls_cert},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, s->tls_key},
        {MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)SERVE_TLS_PRIORITIES},
        {MHD_OPTION_END, 0, NULL},
    };

    if (s->addr.ipv6)
        flags |= MHD_USE_IPv6;
    if (s->tls)
        flags |= MHD_USE_TLS;
    return MHD_start_daemon(
        flags, s->addr.port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, sa,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)64,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)32, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned int)60, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(128 * 1024),
        MHD_OPTION_ARRAY, tls, MHD_OPTION_END);
}

int serve_run(const struct serve_options *opt, char *err, size_t errlen)
{
    struct serve_options o = *opt;
    struct serve_server s;
    struct sockaddr_storage ss;
    struct MHD_Daemon *d;
    const union MHD_DaemonInfo *info;
    int rc;

    if (o.session_idle_s == 0)
        o.session_idle_s = SERVE_SESSION_IDLE_S;
    if (o.session_max_s == 0)
        o.session_max_s = SERVE_SESSION_MAX_S;
    memset(&s, 0, sizeof(s));
    s.opt = &o;
    rc = serve_parse_listen(o.listen ? o.listen : SERVE_DEFAULT_LISTEN, &s.addr, err, errlen);
    if (rc == APBOT_OK)
        rc = serve_exposure_ok(&s.addr, o.reviewers_path != NULL, o.password, err, errlen);
    if (rc == APBOT_OK)
        rc = listen_sockaddr(&s.addr, &ss, err, errlen);
    if (rc != APBOT_OK)
        return rc;
    if (RAND_bytes(s.key, sizeof(s.key)) != 1)
        return apbot_fail(err, errlen, APBOT_E_BUG, "no randomness for the session key");
    rc = serve_tls_load(&s, err, errlen);
    if (rc != APBOT_OK)
        return rc;
    rc = serve_auth_start(&s, err, errlen);
    if (rc != APBOT_OK) {
        serve_tls_free(&s);
        return rc;
    }
    xmlInitParser();

    s.erp_user = secret_dup(SECRET_ERP_USER);
    s.erp_password = secret_dup(SECRET_ERP_PASSWORD);
    d = start_daemon(&s, (const struct sockaddr *)&ss);
    if (!d) {
        secret_free(s.erp_user);
        secret_free(s.erp_password);
        serve_auth_stop(&s);
        rc = apbot_fail(err, errlen, APBOT_E_IO, "cannot listen on %s:%u (in use?%s)", s.addr.host,
                        (unsigned)s.addr.port, s.tls ? " or GnuTLS refused the certificate" : "");
        serve_tls_free(&s);
        return rc;
    }
    if (s.tls && o.log) {
        fprintf(o.log, "apbot serve: https with the %s\n", s.tls_what);
        fflush(o.log);
    }
    info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    s.port = info && info->port ? info->port : s.addr.port;
    if (o.announce) {
        const char *scheme = s.tls ? "https" : "http";
        if (s.addr.ipv6)
            fprintf(o.announce, "listening on %s://[%s]:%u\n", scheme, s.addr.host,
                    (unsigned)s.port);
        else
            fprintf(o.announce, "listening on %s://%s:%u\n", scheme, s.addr.host, (unsigned)s.port);
        fflush(o.announce);
    }
    while (!atomic_load(o.stop)) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    MHD_stop_daemon(d);
    OPENSSL_cleanse(s.key, sizeof(s.key));
    secret_free(s.erp_user);
    secret_free(s.erp_password);
    serve_auth_stop(&s);
    serve_tls_free(&s);
    return APBOT_OK;
}
