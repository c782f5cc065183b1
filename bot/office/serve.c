/*
 * serve.c - the review page's server (see serve.h): libmicrohttpd with a thread per connection,
 * and the guards every request passes before a page (serve_today.c, serve_queue.c,
 * serve_item.c, serve_report.c) sees it.
 *
 * What it guards, in the order a request meets it: the Host header on loopback (DNS
 * rebinding), HTTP Basic when a password is set, the method and body size, then for a POST
 * the form's content type, its origin, the session cookie (random, signed with a key made at
 * start) and the CSRF token derived from it (checked with the form, serve_item.c). Pages are
 * never cached, never framed and run no script (Content-Security-Policy without script-src).
 * Each request opens the queue itself and closes it when answered, so a running `apbot run`
 * is never held up for longer than one of the store's own transactions.
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

/* ---- sessions --------------------------------------------------------------------------- */

/* Per request: its body, and what the handler learnt of its session. */
struct req {
    struct apbot_buf body;
    bool too_big;
};

/* Hex HMAC-SHA256 of what under the server's key. */
static void sign(const struct serve_server *s, const char *what, char out[65])
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
static bool session_valid(const struct serve_server *s, const char *sid)
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

static void session_new(const struct serve_server *s, char out[80])
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

static void csrf_of(const struct serve_server *s, const char *sid, char out[65])
{
    char what[96];
    snprintf(what, sizeof(what), "csrf:%s", sid);
    sign(s, what, out);
}

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

/* The request's context: its session (the cookie when this server made it, else a new one),
 * the session's CSRF token and the reviewer cookie when it holds a usable name. */
static void ctx_init(struct serve_ctx *c, struct serve_server *s, struct MHD_Connection *conn)
{
    const char *cookie = MHD_lookup_connection_value(conn, MHD_COOKIE_KIND, SESSION_COOKIE);
    const char *rev = MHD_lookup_connection_value(conn, MHD_COOKIE_KIND, REVIEWER_COOKIE);

    memset(c, 0, sizeof(*c));
    c->s = s;
    c->conn = conn;
    c->now = store_now_ms();
    if (session_valid(s, cookie)) {
        snprintf(c->sid, sizeof(c->sid), "%s", cookie);
    } else {
        session_new(s, c->sid);
        c->new_sid = true;
    }
    csrf_of(s, c->sid, c->csrf);
    if (rev && review_name_ok(rev))
        snprintf(c->reviewer, sizeof(c->reviewer), "%s", rev);
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

/* The guards of every request: the Host on loopback, HTTP Basic when there is a password, the
 * method (GET, HEAD or POST), the body's size. */
static bool request_ok(const struct serve_ctx *c, const char *method, const struct req *rq,
                       struct refusal *no)
{
    const struct serve_server *s = c->s;
    const char *host = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Host");

    if (!serve_host_ok(host, &s->addr, s->port))
        return refuse(no, MHD_HTTP_MISDIRECTED_REQUEST, "Refused",
                      "This page answers only to its own loopback address.");
    if (s->opt->password && *s->opt->password &&
        !serve_basic_ok(MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Authorization"),
                        s->opt->password))
        return refuse(no, MHD_HTTP_UNAUTHORIZED, "Sign in",
                      "This page needs the review password (HTTP Basic).");
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0 && strcmp(method, "POST") != 0)
        return refuse(no, MHD_HTTP_METHOD_NOT_ALLOWED, "Refused", "Only GET and POST.");
    if (rq->too_big)
        return refuse(no, MHD_HTTP_CONTENT_TOO_LARGE, "Refused", "The form is too large.");
    return true;
}

/* The guards of a POST: only a decision (decide_path), from the page's form (its content
 * type), from the page's own origin (Origin or Referer, and Sec-Fetch-Site), in a session this
 * server made. The form's CSRF token is checked with the form (serve_decide). */
static bool post_ok(const struct serve_ctx *c, bool decide_path, struct refusal *no)
{
    const char *host = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Host");
    const char *type = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Content-Type");
    const char *site = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Sec-Fetch-Site");

    if (!decide_path)
        return refuse(no, MHD_HTTP_METHOD_NOT_ALLOWED, "Refused", "Only decisions are posted.");
    if (!type || strncasecmp(type, "application/x-www-form-urlencoded", 33) != 0)
        return refuse(no, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "Refused",
                      "A decision comes from the page's form.");
    if (!serve_origin_ok(MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Origin"),
                         MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Referer"), host) ||
        (site && strcmp(site, "same-origin") != 0 && strcmp(site, "none") != 0))
        return refuse(no, MHD_HTTP_FORBIDDEN, "Refused",
                      "A decision must come from this page, not from another site.");
    if (c->new_sid)
        return refuse(no, MHD_HTTP_FORBIDDEN, "Refused",
                      "This form is not from this page's session. Open the item again and "
                      "decide there.");
    return true;
}

/* A GET (or HEAD): the page at url. */
static enum MHD_Result route_get(struct serve_ctx *c, const char *url)
{
    bool decide_path = false;
    int64_t id = item_id_of(url, &decide_path);

    if (strcmp(url, "/") == 0)
        return serve_today(c);
    if (strcmp(url, "/queue") == 0)
        return serve_queue(c);
    if (strcmp(url, "/report") == 0)
        return serve_report(c);
    if (strcmp(url, "/app.css") == 0)
        return serve_send_css(c);
    if (strcmp(url, "/metrics") == 0)
        return serve_metrics(c);
    if (id > 0 && !decide_path)
        return serve_item(c, id);
    return serve_simple_page(c, MHD_HTTP_NOT_FOUND, "Not found", "There is no such page.");
}

/* A whole request: its context, the guards, then the page or the decision. */
static enum MHD_Result handle(struct serve_server *s, struct MHD_Connection *conn, const char *url,
                              const char *method, struct req *rq)
{
    struct serve_ctx c;
    struct refusal no;
    bool decide_path = false;
    int64_t id;

    ctx_init(&c, s, conn);
    if (!request_ok(&c, method, rq, &no))
        return serve_simple_page(&c, no.status, no.title, no.what);
    if (strcmp(method, "POST") != 0)
        return route_get(&c, url);
    id = item_id_of(url, &decide_path);
    if (!post_ok(&c, decide_path, &no))
        return serve_simple_page(&c, no.status, no.title, no.what);
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

/* libmicrohttpd on sa: a thread per connection, at most 64 connections (32 from one address),
 * idle ones closed after 60 s, 128 KiB of memory each. NULL when it cannot listen. */
static struct MHD_Daemon *start_daemon(struct serve_server *s, const struct sockaddr *sa)
{
    unsigned int flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD;

    if (s->addr.ipv6)
        flags |= MHD_USE_IPv6;
    return MHD_start_daemon(
        flags, s->addr.port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, sa,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)64,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)32, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned int)60, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(128 * 1024), MHD_OPTION_END);
}

int serve_run(const struct serve_options *opt, char *err, size_t errlen)
{
    struct serve_server s;
    struct sockaddr_storage ss;
    struct MHD_Daemon *d;
    const union MHD_DaemonInfo *info;
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
    xmlInitParser();

    rc = listen_sockaddr(&s.addr, &ss, err, errlen);
    if (rc != APBOT_OK)
        return rc;
    s.erp_user = secret_dup(SECRET_ERP_USER);
    s.erp_password = secret_dup(SECRET_ERP_PASSWORD);
    d = start_daemon(&s, (const struct sockaddr *)&ss);
    if (!d) {
        secret_free(s.erp_user);
        secret_free(s.erp_password);
        return apbot_fail(err, errlen, APBOT_E_IO, "cannot listen on %s:%u (in use?)", s.addr.host,
                          (unsigned)s.addr.port);
    }
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
    secret_free(s.erp_user);
    secret_free(s.erp_password);
    return APBOT_OK;
}
