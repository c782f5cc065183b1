/*
 * test_http.c - the http session against a canned-bytes HTTP server inside the test (POSIX
 * sockets on 127.0.0.1, a thread per connection): answered responses of any status,
 * Retry-After, cookies kept and cleared, HTTP Basic, POST then 303 then GET, and above all the
 * classification of every failure - refused (not sent), TLS handshake refused (not sent),
 * closed without a reply, stalled past the timeout, cut short (Content-Length or chunked),
 * too big, too many redirects, cancelled (unknown) - plus that POSTs and fresh GETs are never
 * re-sent by libcurl on its own when their connection dies, and that a POSTed password never
 * shows up in a response. The hostile part: a second server on another port plays the
 * attacker, and must see nothing - not the password of a login answered 307 to it, not the
 * Basic header, not a request redirected to it by host or port; an https session sends
 * nothing over http; the origin and redirect decisions as tables; and the URL fast paths
 * checked against libcurl's own parser on thousands of generated URLs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "apbot/error.h"
#include "apbot/mem.h"
#include "helpers/xorshift.h"
#include "web/http.h"

/* ---- the canned server ---------------------------------------------------------------- */

#define SRV_MAX_CONN 128
#define SRV_REQ_MAX 16384

struct srv {
    int listen_fd;
    int port;
    bool tls_garbage; /* answer every connection with plain bytes at once (for https) */
    volatile int stop;
    pthread_t accept_thread;
    pthread_mutex_t lock;
    pthread_t conn_threads[SRV_MAX_CONN];
    size_t n_conn;
    /* what the clients sent, under lock */
    int n_requests;
    int n_posts;
    char last_head[SRV_REQ_MAX];
    char last_body[SRV_REQ_MAX];
    char paths[8192];
};

struct conn {
    struct srv *s;
    int fd;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Case-insensitive strstr (strcasestr is a GNU extension). */
static const char *ci_find(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++)
        if (strncasecmp(hay, needle, n) == 0)
            return hay;
    return NULL;
}

static void send_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n <= 0)
            return;
        data += n;
        len -= (size_t)n;
    }
}

static void respond(int fd, int status, const char *reason, const char *extra_headers,
                    const char *body, size_t body_len, bool keep_alive)
{
    char head[2048];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d %s\r\nContent-Type: text/html; charset=utf-8\r\n"
                     "Content-Length: %zu\r\n%s%s\r\n",
                     status, reason, body_len, extra_headers ? extra_headers : "",
                     keep_alive ? "" : "Connection: close\r\n");
    send_all(fd, head, (size_t)n);
    send_all(fd, body, body_len);
}

/* Waits for readable data in 20 ms slices; false when the server stops or the peer is gone. */
static bool wait_readable(struct srv *s, int fd)
{
    while (!s->stop) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, 20);
        if (r > 0)
            return true;
        if (r < 0)
            return false;
    }
    return false;
}

/* Reads one request (head and Content-Length body). Returns false at EOF or stop. */
static bool read_request(struct srv *s, int fd, char *head, char *body, char *method, char *path)
{
    size_t len = 0;
    char *end = NULL;
    static const size_t cap = SRV_REQ_MAX - 1;
    char buf[SRV_REQ_MAX];

    while (!end) {
        if (len >= cap || !wait_readable(s, fd))
            return false;
        ssize_t n = recv(fd, buf + len, cap - len, 0);
        if (n <= 0)
            return false;
        len += (size_t)n;
        buf[len] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    size_t head_len = (size_t)(end - buf) + 4;
    memcpy(head, buf, head_len);
    head[head_len] = '\0';
    if (sscanf(head, "%15s %1023s", method, path) != 2)
        return false;
    size_t clen = 0;
    const char *cl = ci_find(head, "\r\nContent-Length:");
    if (cl)
        clen = strtoul(cl + 17, NULL, 10);
    if (clen >= cap)
        return false;
    size_t have = len - head_len;
    memcpy(body, buf + head_len, have);
    while (have < clen) {
        if (!wait_readable(s, fd))
            return false;
        ssize_t n = recv(fd, body + have, clen - have, 0);
        if (n <= 0)
            return false;
        have += (size_t)n;
    }
    body[clen] = '\0';
    return true;
}

static void stall(struct srv *s, int ms)
{
    int64_t until = now_ms() + ms;
    while (!s->stop && now_ms() < until)
        usleep(5000);
}

static void *conn_main(void *arg)
{
    struct conn *c = arg;
    struct srv *s = c->s;
    int fd = c->fd;
    free(c);

    if (s->tls_garbage) {
        static const char junk[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
        wait_readable(s, fd);
        send_all(fd, junk, sizeof(junk) - 1);
        close(fd);
        return NULL;
    }

    char method[16], path[1024];
    for (;;) {
        char h[SRV_REQ_MAX], b[SRV_REQ_MAX];
        if (!read_request(s, fd, h, b, method, path))
            break;
        pthread_mutex_lock(&s->lock);
        s->n_requests++;
        if (strcmp(method, "POST") == 0)
            s->n_posts++;
        snprintf(s->last_head, sizeof(s->last_head), "%s", h);
        snprintf(s->last_body, sizeof(s->last_body), "%s", b);
        size_t pl = strlen(s->paths);
        snprintf(s->paths + pl, sizeof(s->paths) - pl, "%s %s\n", method, path);
        pthread_mutex_unlock(&s->lock);

        if (strcmp(path, "/ok") == 0) {
            respond(fd, 200, "OK", NULL, "<p>hello</p>", 12, true);
            continue;
        } else if (strcmp(path, "/echo") == 0) {
            respond(fd, 200, "OK", NULL, h, strlen(h), true);
            continue;
        } else if (strcmp(path, "/busy") == 0) {
            respond(fd, 503, "Service Unavailable", "Retry-After: 7\r\n", "busy", 4, false);
        } else if (strcmp(path, "/busy-date") == 0) {
            char hdr[128], date[64];
            time_t t = time(NULL) + 120;
            struct tm tm;
            gmtime_r(&t, &tm);
            strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
            snprintf(hdr, sizeof(hdr), "Retry-After: %s\r\n", date);
            respond(fd, 429, "Too Many Requests", hdr, "slow down", 9, false);
        } else if (strcmp(path, "/dated") == 0) {
            /* a fixed moment, and a header name in another case */
            respond(fd, 200, "OK", "dAtE:  Tue, 03 Nov 2026 08:15:30 GMT \r\n", "ok", 2, true);
            continue;
        } else if (strcmp(path, "/bad-date") == 0) {
            respond(fd, 200, "OK", "Date: yesterday-ish\r\n", "ok", 2, true);
            continue;
        } else if (strcmp(path, "/error500") == 0) {
            respond(fd, 500, "Internal Server Error", NULL, "E104: closed", 12, false);
        } else if (strcmp(path, "/set-cookie") == 0) {
            respond(fd, 200, "OK", "Set-Cookie: JSESSIONID=abc123; Path=/; HttpOnly\r\n", "ok", 2,
                    true);
            continue;
        } else if (strcmp(path, "/login") == 0) {
            respond(fd, 303, "See Other",
                    "Location: /welcome\r\nSet-Cookie: JSESSIONID=s1; Path=/\r\n", "", 0, true);
            continue;
        } else if (strcmp(path, "/welcome") == 0) {
            respond(fd, 200, "OK", NULL, "<h1>Welcome, clerk</h1>", 23, true);
            continue;
        } else if (strncmp(path, "/hop/", 5) == 0) {
            long n = strtol(path + 5, NULL, 10);
            if (n <= 0) {
                respond(fd, 200, "OK", NULL, "landed", 6, true);
            } else {
                char loc[64];
                snprintf(loc, sizeof(loc), "Location: /hop/%ld\r\n", n - 1);
                respond(fd, 302, "Found", loc, "", 0, true);
            }
            continue;
        } else if (strncmp(path, "/to-port/", 9) == 0) {
            /* /to-port/STATUS/PORT: a redirect of that status to another port of this host */
            long status = strtol(path + 9, NULL, 10);
            const char *slash = strchr(path + 9, '/');
            char loc[128];
            snprintf(loc, sizeof(loc), "Location: http://127.0.0.1:%ld/steal\r\n",
                     slash ? strtol(slash + 1, NULL, 10) : 0L);
            respond(fd, (int)status, "Redirect", loc, "moved", 5, true);
            continue;
        } else if (strncmp(path, "/to-host/", 9) == 0) {
            /* /to-host/PORT: 302 to this very server under another host name */
            char loc[128];
            snprintf(loc, sizeof(loc), "Location: http://localhost:%ld/ok\r\n",
                     strtol(path + 9, NULL, 10));
            respond(fd, 302, "Found", loc, "", 0, true);
            continue;
        } else if (strcmp(path, "/to-https") == 0) {
            respond(fd, 302, "Found", "Location: https://127.0.0.1/ok\r\n", "", 0, true);
            continue;
        } else if (strcmp(path, "/to-ftp") == 0) {
            respond(fd, 301, "Moved", "Location: ftp://127.0.0.1/x\r\n", "", 0, true);
            continue;
        } else if (strcmp(path, "/to-nowhere") == 0) {
            respond(fd, 302, "Found", NULL, "no location", 11, true);
            continue;
        } else if (strncmp(path, "/same/", 6) == 0) {
            /* /same/STATUS: a redirect of that status to /echo-body on this origin */
            respond(fd, (int)strtol(path + 6, NULL, 10), "Redirect",
                    "Location: /echo-body?from=same\r\n", "", 0, true);
            continue;
        } else if (strncmp(path, "/echo-body", 10) == 0) {
            respond(fd, 200, "OK", NULL, b, strlen(b), true);
            continue;
        } else if (strcmp(path, "/chunked-cut") == 0) {
            static const char cut[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                      "5\r\nhello\r\n";
            send_all(fd, cut, sizeof(cut) - 1);
        } else if (strcmp(path, "/close") == 0) {
            /* read the request, then hang up without a word */
        } else if (strcmp(path, "/stall") == 0) {
            stall(s, 5000);
        } else if (strcmp(path, "/short") == 0) {
            static const char cut[] = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n<p>only ten";
            send_all(fd, cut, sizeof(cut) - 1);
        } else if (strcmp(path, "/headers-then-stall") == 0) {
            static const char part[] = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n<p>";
            send_all(fd, part, sizeof(part) - 1);
            stall(s, 5000);
        } else if (strncmp(path, "/big/", 5) == 0) {
            size_t n = strtoul(path + 5, NULL, 10);
            char *big = malloc(n + 1);
            memset(big, 'x', n);
            respond(fd, 200, "OK", NULL, big, n, false);
            free(big);
        } else {
            respond(fd, 404, "Not Found", NULL, "nope", 4, false);
        }
        break;
    }
    close(fd);
    return NULL;
}

static void *accept_main(void *arg)
{
    struct srv *s = arg;
    while (!s->stop) {
        struct pollfd p = {.fd = s->listen_fd, .events = POLLIN};
        if (poll(&p, 1, 20) <= 0)
            continue;
        int fd = accept(s->listen_fd, NULL, NULL);
        if (fd < 0)
            continue;
        pthread_mutex_lock(&s->lock);
        if (s->n_conn == SRV_MAX_CONN) {
            pthread_mutex_unlock(&s->lock);
            close(fd);
            continue;
        }
        struct conn *c = malloc(sizeof(*c));
        c->s = s;
        c->fd = fd;
        if (pthread_create(&s->conn_threads[s->n_conn], NULL, conn_main, c) == 0)
            s->n_conn++;
        else
            close(fd);
        pthread_mutex_unlock(&s->lock);
    }
    return NULL;
}

static int listen_loopback(int *ret_port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    socklen_t al = sizeof(a);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    *ret_port = ntohs(a.sin_port);
    return fd;
}

static struct srv *srv_start(bool tls_garbage)
{
    struct srv *s = calloc(1, sizeof(*s));
    assert_non_null(s);
    pthread_mutex_init(&s->lock, NULL);
    s->tls_garbage = tls_garbage;
    s->listen_fd = listen_loopback(&s->port);
    assert_int_equal(listen(s->listen_fd, 64), 0);
    assert_int_equal(pthread_create(&s->accept_thread, NULL, accept_main, s), 0);
    return s;
}

static void srv_stop(struct srv *s)
{
    s->stop = 1;
    pthread_join(s->accept_thread, NULL);
    for (size_t i = 0; i < s->n_conn; i++)
        pthread_join(s->conn_threads[i], NULL);
    close(s->listen_fd);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static int srv_count(struct srv *s, const int *field)
{
    pthread_mutex_lock(&s->lock);
    int v = *field;
    pthread_mutex_unlock(&s->lock);
    return v;
}

static size_t srv_connections(struct srv *s)
{
    pthread_mutex_lock(&s->lock);
    size_t v = s->n_conn;
    pthread_mutex_unlock(&s->lock);
    return v;
}

/* ---- fixtures ------------------------------------------------------------------------- */

struct fx {
    struct srv *srv;
    struct http_session *http;
    struct http_options opt;
    atomic_int cancel;
    char origin[64]; /* http://127.0.0.1:PORT of srv */
    char url[256];
};

static const char *url(struct fx *f, const char *path)
{
    snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%d%s", f->srv->port, path);
    return f->url;
}

/* Options of a session on origin (e.g. f->origin). */
static struct http_options default_options(const char *origin)
{
    struct http_options o;
    memset(&o, 0, sizeof(o));
    o.origin = origin;
    o.connect_timeout_ms = 300;
    o.timeout_ms = 400;
    o.max_redirects = 3;
    o.max_body = 4096;
    o.verify_tls = true;
    return o;
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->srv = srv_start(false);
    snprintf(f->origin, sizeof(f->origin), "http://127.0.0.1:%d", f->srv->port);
    f->opt = default_options(f->origin);
    f->opt.cancel = &f->cancel;
    char err[APBOT_ERR_LEN] = "";
    assert_int_equal(http_session_new(&f->opt, &f->http, err, sizeof(err)), APBOT_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    http_session_free(f->http);
    srv_stop(f->srv);
    free(f);
    return 0;
}

/* ---- tests ---------------------------------------------------------------------------- */

static void test_http_answered_200(void **state)
{
    struct fx *f = *state;
    struct http_response r;

    assert_int_equal(http_get(f->http, url(f, "/ok"), &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_ANSWERED);
    assert_string_equal(http_transport_name(r.transport), "answered");
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, 12);
    assert_string_equal(r.body, "<p>hello</p>");
    static const char zeros[1 + APBOT_TEXT_PAD];
    assert_memory_equal(r.body + r.body_len, zeros, sizeof(zeros));
    assert_false(r.truncated);
    assert_string_equal(r.effective_url, url(f, "/ok"));
    assert_int_equal(r.redirects, 0);
    assert_int_equal(r.retry_after_s, -1);
    assert_true(r.elapsed_ms >= 0 && r.elapsed_ms < 1000);
    assert_string_equal(r.detail, "");
    http_response_done(&r);
    assert_null(r.body);
    http_response_done(&r); /* twice is fine */

    /* a status is an answer too: what it means is the outcome rules' business */
    assert_int_equal(http_get(f->http, url(f, "/error500"), &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_ANSWERED);
    assert_int_equal(r.status, 500);
    assert_string_equal(r.body, "E104: closed");
    http_response_done(&r);

    /* GETs keep one connection alive */
    assert_int_equal(http_get(f->http, url(f, "/ok"), &r), APBOT_OK);
    http_response_done(&r);
    assert_int_equal(srv_connections(f->srv), 2); /* the 500 closed the first */

    /* the default user agent names the program */
    assert_int_equal(http_get(f->http, url(f, "/echo"), &r), APBOT_OK);
    assert_non_null(strstr(r.body, "\r\nUser-Agent: apbot/"));
    assert_null(strstr(r.body, "Authorization:"));
    http_response_done(&r);
}

static void test_http_retry_after(void **state)
{
    struct fx *f = *state;
    struct http_response r;

    assert_int_equal(http_get(f->http, url(f, "/busy"), &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_ANSWERED);
    assert_int_equal(r.status, 503);
    assert_int_equal(r.retry_after_s, 7);
    http_response_done(&r);

    assert_int_equal(http_get(f->http, url(f, "/busy-date"), &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_ANSWERED);
    assert_int_equal(r.status, 429);
    assert_true(r.retry_after_s >= 100 && r.retry_after_s <= 121);
    http_response_done(&r);

    /* a later answer without the header does not inherit it */
    assert_int_equal(http_get(f->http, url(f, "/ok"), &r), APBOT_OK);
    assert_int_equal(r.retry_after_s, -1);
    http_response_done(&r);
}

/* The Date header is the server's clock (the runner places moments on the ERP's clock with
 * it): read to the second, 0 when absent or unreadable, never inherited by a later answer. */
static void test_http_date(void **state)
{
    struct fx *f = *state;
    struct http_response r;

    assert_int_equal(http_get(f->http, url(f, "/dated"), &r), APBOT_OK);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.date_ms, INT64_C(1793693730) * 1000); /* 2026-11-03T08:15:30Z */
    http_response_done(&r);
    assert_int_equal(http_get(f->http, url(f, "/bad-date"), &r), APBOT_OK);
    assert_int_equal(r.date_ms, 0);
    http_response_done(&r);
    assert_int_equal(http_get(f->http, url(f, "/dated"), &r), APBOT_OK);
    http_response_done(&r);
    assert_int_equal(http_get(f->http, url(f, "/ok"), &r), APBOT_OK);
    assert_int_equal(r.date_ms, 0);
    http_response_done(&r);
}

/* What the Date header read as before the IMF-fixdate fast path: the trimmed value up to a
 * NUL, through curl_getdate, 0 when unreadable, too long or not after 1970. */
static int64_t date_ref(const char *v)
{
    size_t len = strlen(v);
    while (len > 0 && strchr("\r\n \t", v[len - 1]))
        len--;
    while (len > 0 && (*v == ' ' || *v == '\t')) {
        v++;
        len--;
    }
    char *text = strndup(v, len);
    time_t when = strlen(text) < 128 ? curl_getdate(text, NULL) : (time_t)-1;
    free(text);
    return when == (time_t)-1 || when <= 0 ? 0 : (int64_t)when * 1000;
}

static void expect_date(const char *text, int64_t want)
{
    int64_t got = http_date_ms(text, strlen(text)), ref = date_ref(text);
    if (got != ref || (want >= 0 && got != want))
        fail_msg("'%s': %lld, curl_getdate %lld, want %lld", text, (long long)got, (long long)ref,
                 (long long)want);
}

/* http_date_ms reads an IMF-fixdate itself and hands anything else to curl_getdate: both give
 * the same for every day from 1970 to 2400 (each weekday name, times across the day), for the
 * edges of the fast path (31 November, 29 February, a leap second, years before 1970 and past
 * 9999, other spellings) and for what is not a date at all. */
static void test_http_date_fast_path(void **state)
{
    (void)state;
    static const char *wday[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun", "mon", "Xyz"};
    static const char *mon[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul",
                                "Aug", "Sep", "Oct", "Nov", "Dec", "jan", "Foo"};
    char text[96];
    expect_date("Tue, 03 Nov 2026 08:15:30 GMT", INT64_C(1793693730) * 1000);
    expect_date("  Thu, 01 Jan 1970 00:00:01 GMT \r\n", 1000);
    expect_date("Thu, 01 Jan 1970 00:00:00 GMT", 0);
    expect_date("Wed, 31 Dec 1969 23:59:59 GMT", 0);
    expect_date("Tuesday, 03-Nov-26 08:15:30 GMT", -1); /* RFC 850: curl_getdate */
    expect_date("Tue Nov  3 08:15:30 2026", -1);        /* asctime: curl_getdate */
    expect_date("Tue, 03 Nov 2026 08:15:30 +0000", -1);
    expect_date("Tue, 31 Nov 2026 08:15:30 GMT", -1);
    expect_date("Sun, 29 Feb 2026 08:15:30 GMT", -1);
    expect_date("Tue, 29 Feb 2028 08:15:30 GMT", -1);
    expect_date("Tue, 29 Feb 2100 08:15:30 GMT", -1);
    expect_date("Tue, 29 Feb 2000 08:15:30 GMT", -1);
    expect_date("Tue, 03 Nov 2026 23:59:60 GMT", -1);
    expect_date("Tue, 03 Nov 2026 24:00:00 GMT", -1);
    expect_date("Tue, 03 Nov 2026 08:61:00 GMT", -1);
    expect_date("Tue, 00 Nov 2026 08:15:30 GMT", -1);
    expect_date("Tue, 03 Nov 12026 08:15:30 GMT", -1);
    expect_date("Tue, 03 Nov 2026 08:15:30 GMTX", -1);
    expect_date("Tue,03 Nov 2026 08:15:30 GMT", -1);
    expect_date("Tue, 3 Nov 2026 08:15:30 GMT", -1);
    expect_date("Tue, 0x Nov 2026 08:15:30 GMT", -1);
    expect_date("", 0);
    expect_date("yesterday-ish", 0);
    for (int year = 1969; year <= 2400; year++)
        for (int m = 0; m < 12; m++)
            for (int d = 1; d <= 31; d++) {
                int i = year * 372 + m * 31 + d;
                snprintf(text, sizeof(text), "%s, %02d %s %04d %02d:%02d:%02d GMT", wday[i % 7], d,
                         mon[m], year, i % 24, (i * 7) % 60, (i * 13) % 60);
                expect_date(text, -1);
            }
    for (int i = 0; i < 20000; i++) {
        snprintf(text, sizeof(text), "%s, %02d %s %04d %02d:%02d:%02d GMT", wday[i % 9], i % 33,
                 mon[i % 14], 1960 + (i * 37) % 8100, i % 25, (i * 7) % 62, (i * 11) % 61);
        expect_date(text, -1);
    }
}

static void test_http_cookies_kept_and_cleared(void **state)
{
    struct fx *f = *state;
    struct http_response r;

    assert_int_equal(http_get(f->http, url(f, "/set-cookie"), &r), APBOT_OK);
    assert_int_equal(r.status, 200);
    http_response_done(&r);
    assert_int_equal(http_get(f->http, url(f, "/echo"), &r), APBOT_OK);
    assert_non_null(strstr(r.body, "\r\nCookie: JSESSIONID=abc123\r\n"));
    http_response_done(&r);

    http_session_clear_cookies(f->http);
    assert_int_equal(http_get(f->http, url(f, "/echo"), &r), APBOT_OK);
    assert_null(strstr(r.body, "Cookie:"));
    http_response_done(&r);
    http_session_clear_cookies(NULL);
}

static void test_http_post_redirect_get_secret_free(void **state)
{
    struct fx *f = *state;
    struct http_response r;
    static const char secret[] = "S3cr3t-P@ss word&x=1";
    const struct http_field fields[] = {
        {"j_username", "clerk"}, {"j_password", secret}, {"_csrf", "t/k+n="}, {"empty", NULL}};

    assert_int_equal(http_post_form(f->http, url(f, "/login"), fields, 4, &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_ANSWERED);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "<h1>Welcome, clerk</h1>");
    assert_string_equal(r.effective_url, url(f, "/welcome"));
    assert_int_equal(r.redirects, 1); /* the page is the redirect target's, not the form's */
    /* the ERP got the form, percent-encoded, once; the 303 was followed by a body-less GET */
    pthread_mutex_lock(&f->srv->lock);
    assert_string_equal(f->srv->paths, "POST /login\nGET /welcome\n");
    assert_non_null(strstr(f->srv->last_head, "GET /welcome HTTP/1.1"));
    assert_null(ci_find(f->srv->last_head, "Content-Length"));
    assert_non_null(strstr(f->srv->last_head, "Cookie: JSESSIONID=s1"));
    pthread_mutex_unlock(&f->srv->lock);
    /* nothing of the request body is kept in the response */
    const char *leaks[] = {"S3cr3t", "S3cr3t-P%40ss%20word", "j_password"};
    for (size_t i = 0; i < 3; i++) {
        assert_null(strstr(r.body, leaks[i]));
        assert_null(strstr(r.effective_url, leaks[i]));
        assert_null(strstr(r.detail, leaks[i]));
    }
    http_response_done(&r);

    /* the body as sent: escaped names and values, NULL value as empty */
    assert_int_equal(http_post_form(f->http, url(f, "/echo"), fields, 4, &r), APBOT_OK);
    assert_int_equal(r.status, 200);
    assert_null(strstr(r.body, "S3cr3t")); /* the server echoes headers only */
    pthread_mutex_lock(&f->srv->lock);
    assert_string_equal(f->srv->last_body,
                        "j_username=clerk&j_password=S3cr3t-P%40ss%20word%26x%3D1"
                        "&_csrf=t%2Fk%2Bn%3D&empty=");
    assert_non_null(strstr(f->srv->last_head, "Content-Type: application/x-www-form-urlencoded"));
    assert_null(strstr(f->srv->last_head, "Expect:"));
    pthread_mutex_unlock(&f->srv->lock);
    http_response_done(&r);

    /* and none in the detail of a failure either */
    assert_int_equal(http_post_form(f->http, url(f, "/close"), fields, 4, &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_UNKNOWN);
    assert_null(strstr(r.detail, "S3cr3t"));
    assert_null(r.body);
    http_response_done(&r);
}

/* A JSON call: the body as given with its type, the request's headers on every hop (a 303's GET
 * too, without the body), a header that would smuggle a line or take over one of the session's
 * refused before anything is sent, and a cookie read back by name. */
static void test_http_json_body_and_headers(void **state)
{
    struct fx *f = *state;
    struct http_response r;
    static const char body[] = "{\"id\":1,\"method\":\"x\",\"params\":[\"\\u00e9\",120.50]}";
    const struct http_field headers[] = {{"Authorization", "Session Y2xlcms6MTpzZWNyZXQ="},
                                         {"X-CSRF-Token", "t0k"}};
    struct http_request req = {.method = "POST",
                               .url = url(f, "/echo"),
                               .body = body,
                               .body_len = strlen(body),
                               .content_type = "application/json",
                               .headers = headers,
                               .n_headers = 2,
                               .fresh = true};

    assert_int_equal(http_request(f->http, &req, &r), APBOT_OK);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\r\nContent-Type: application/json\r\n"));
    assert_non_null(strstr(r.body, "\r\nAuthorization: Session Y2xlcms6MTpzZWNyZXQ=\r\n"));
    assert_non_null(strstr(r.body, "\r\nX-CSRF-Token: t0k\r\n"));
    assert_null(strstr(r.body, "Expect:"));
    http_response_done(&r);
    pthread_mutex_lock(&f->srv->lock);
    assert_string_equal(f->srv->last_body, body); /* byte for byte */
    pthread_mutex_unlock(&f->srv->lock);

    /* a 303 after the POST: the GET carries the headers, not the body or its type */
    req.url = url(f, "/login");
    assert_int_equal(http_request(f->http, &req, &r), APBOT_OK);
    assert_int_equal(r.redirects, 1);
    http_response_done(&r);
    pthread_mutex_lock(&f->srv->lock);
    assert_non_null(strstr(f->srv->last_head, "GET /welcome HTTP/1.1"));
    assert_non_null(strstr(f->srv->last_head, "Authorization: Session Y2xlcms6MTpzZWNyZXQ="));
    assert_null(ci_find(f->srv->last_head, "Content-Type"));
    pthread_mutex_unlock(&f->srv->lock);

    /* a GET with headers: they go, and the next plain request carries none of them */
    struct http_request get = {.url = url(f, "/echo"), .headers = headers, .n_headers = 1};
    assert_int_equal(http_request(f->http, &get, &r), APBOT_OK);
    assert_non_null(strstr(r.body, "Authorization: Session"));
    http_response_done(&r);
    assert_int_equal(http_get(f->http, url(f, "/echo"), &r), APBOT_OK);
    assert_null(strstr(r.body, "Authorization"));
    assert_null(strstr(r.body, "X-CSRF-Token"));
    http_response_done(&r);
    assert_int_equal(http_post_form(f->http, url(f, "/echo"), NULL, 0, &r), APBOT_OK);
    assert_null(strstr(r.body, "Authorization"));
    assert_non_null(strstr(r.body, "application/x-www-form-urlencoded"));
    http_response_done(&r);

    /* refused before sending: smuggled lines, the session's own headers, bodies where none
     * may be */
    int before = f->srv->n_requests;
    const struct http_field bad[][1] = {{{"X-A", "v\r\nX-Evil: 1"}},
                                        {{"X-A", "v\nX"}},
                                        {{"Host", "elsewhere"}},
                                        {{"cookie", "a=b"}},
                                        {{"Content-Length", "9"}},
                                        {{"Bad Name", "v"}},
                                        {{"X:Y", "v"}},
                                        {{"", "v"}},
                                        {{NULL, "v"}},
                                        {{"X-A", NULL}}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct http_request b = {.url = url(f, "/echo"), .headers = bad[i], .n_headers = 1};
        if (http_request(f->http, &b, &r) != APBOT_E_INVAL)
            fail_msg("header %zu was not refused", i);
    }
    struct http_request get_body = {
        .url = url(f, "/echo"), .body = "{}", .body_len = 2, .content_type = "application/json"};
    assert_int_equal(http_request(f->http, &get_body, &r), APBOT_E_INVAL);
    struct http_request untyped = {
        .method = "POST", .url = url(f, "/echo"), .body = "{}", .body_len = 2};
    assert_int_equal(http_request(f->http, &untyped, &r), APBOT_E_INVAL);
    const struct http_field one[] = {{"a", "b"}};
    struct http_request both = {.method = "POST",
                                .url = url(f, "/echo"),
                                .body = "{}",
                                .body_len = 2,
                                .content_type = "application/json",
                                .fields = one,
                                .n_fields = 1};
    assert_int_equal(http_request(f->http, &both, &r), APBOT_E_INVAL);
    struct http_request typed = {.method = "POST",
                                 .url = url(f, "/echo"),
                                 .body = "{}",
                                 .body_len = 2,
                                 .content_type = "text/x\r\nX-Evil: 1"};
    assert_int_equal(http_request(f->http, &typed, &r), APBOT_E_INVAL);
    assert_int_equal(f->srv->n_requests, before); /* nothing left */

    /* the jar by name */
    http_session_clear_cookies(f->http);
    assert_null(http_session_cookie(f->http, "JSESSIONID"));
    assert_int_equal(http_get(f->http, url(f, "/set-cookie"), &r), APBOT_OK);
    http_response_done(&r);
    char *c = http_session_cookie(f->http, "JSESSIONID");
    assert_non_null(c);
    assert_string_equal(c, "abc123");
    free(c);
    assert_null(http_session_cookie(f->http, "JSESSION"));
    assert_null(http_session_cookie(f->http, ""));
    assert_null(http_session_cookie(NULL, "JSESSIONID"));
}

static void test_http_refused_is_not_sent(void **state)
{
    struct fx *f = *state;
    struct http_response r;
    int port;
    int fd = listen_loopback(&port); /* bound, never listening: connect is refused */
    char u[128], origin[64];
    struct http_session *s = NULL;
    snprintf(u, sizeof(u), "http://127.0.0.1:%d/erp/ap/invoice/post", port);
    snprintf(origin, sizeof(origin), "http://127.0.0.1:%d", port);
    struct http_options o = default_options(origin);
    assert_int_equal(http_session_new(&o, &s, NULL, 0), APBOT_OK);

    const struct http_field fields[] = {{"amount", "1,00"}};
    assert_int_equal(http_post_form(s, u, fields, 1, &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_NOT_SENT);
    assert_string_equal(http_transport_name(r.transport), "not-sent");
    assert_int_equal(r.status, 0);
    assert_null(r.body);
    assert_true(strlen(r.detail) > 0);
    http_response_done(&r);

    assert_int_equal(http_get(s, u, &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_NOT_SENT);
    http_response_done(&r);
    close(fd);
    http_session_free(s);

    /* anything but an absolute http(s) URL is a bad argument: nothing happens */
    memset(&r, 0x5a, sizeof(r));
    assert_int_equal(http_get(f->http, "file:///etc/passwd", &r), APBOT_E_INVAL);
    assert_int_equal(http_get(f->http, "/erp/relative", &r), APBOT_E_INVAL);
    assert_int_equal(http_post_form(f->http, "ftp://127.0.0.1/", fields, 1, &r), APBOT_E_INVAL);
    assert_int_equal(r.status, 0x5a5a5a5a5a5a5a5aLL); /* untouched */
}

static void test_http_tls_handshake_failure_is_not_sent(void **state)
{
    struct fx *f = *state;
    struct srv *plain = srv_start(true);
    struct http_response r;
    struct http_session *s = NULL;
    char u[128], origin[64];
    (void)f;
    snprintf(u, sizeof(u), "https://127.0.0.1:%d/erp/ap/invoice/post", plain->port);
    snprintf(origin, sizeof(origin), "https://127.0.0.1:%d", plain->port);
    struct http_options o = default_options(origin);
    assert_int_equal(http_session_new(&o, &s, NULL, 0), APBOT_OK);

    const struct http_field fields[] = {{"amount", "1,00"}};
    assert_int_equal(http_post_form(s, u, fields, 1, &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_NOT_SENT); /* the request never left the TLS layer */
    assert_int_equal(r.status, 0);
    http_response_done(&r);
    http_session_free(s);
    srv_stop(plain);
}

static void test_http_closed_without_reply_is_unknown(void **state)
{
    struct fx *f = *state;
    struct http_response r;

    assert_int_equal(http_get(f->http, url(f, "/close"), &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_UNKNOWN);
    assert_string_equal(http_transport_name(r.transport), "unknown");
    assert_int_equal(r.status, 0);
    assert_null(r.body);
    assert_true(strlen(r.detail) > 0);
    http_response_done(&r);
}

static void test_http_post_never_resent(void **state)
{
    struct fx *f = *state;
    struct http_response r;
    const struct http_field fields[] = {{"formToken", "t1"}};

    assert_int_equal(http_get(f->http, url(f, "/ok"), &r), APBOT_OK);
    http_response_done(&r);
    assert_int_equal(http_get(f->http, url(f, "/ok"), &r), APBOT_OK);
    http_response_done(&r);
    assert_int_equal(srv_connections(f->srv), 1); /* keep-alive for GETs */
    /* ... and for a POST right after: no handshake of its own */
    assert_int_equal(http_post_form(f->http, url(f, "/ok"), fields, 1, &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_ANSWERED);
    http_response_done(&r);
    assert_int_equal(srv_connections(f->srv), 1);

    /* The ERP takes the POST on the kept-alive connection and hangs up. libcurl would send it
     * again by itself on a new connection; refused, it reports, and the ERP saw one POST. */
    assert_int_equal(http_post_form(f->http, url(f, "/close"), fields, 1, &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_UNKNOWN);
    assert_non_null(strstr(r.detail, "not re-sent"));
    http_response_done(&r);
    assert_int_equal(srv_count(f->srv, &f->srv->n_posts), 2);

    /* A POST does not ride a connection idle for 2 s or more (HTTP_ONCE_IDLE_S, 1 whole
     * second), which a server's keep-alive timeout could be closing just then; a GET does. */
    assert_int_equal(http_get(f->http, url(f, "/ok"), &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_ANSWERED);
    http_response_done(&r);
    int conns = srv_connections(f->srv);
    usleep(1300 * 1000);
    assert_int_equal(http_get(f->http, url(f, "/ok"), &r), APBOT_OK);
    http_response_done(&r);
    assert_int_equal(srv_connections(f->srv), conns);
    usleep(2200 * 1000);
    assert_int_equal(http_post_form(f->http, url(f, "/ok"), fields, 1, &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_ANSWERED);
    http_response_done(&r);
    assert_int_equal(srv_connections(f->srv), conns + 1);
    assert_int_equal(srv_count(f->srv, &f->srv->n_posts), 3);
}

static void test_http_stall_times_out_unknown(void **state)
{
    struct fx *f = *state;
    struct http_response r;

    int64_t t0 = now_ms();
    assert_int_equal(http_get(f->http, url(f, "/stall"), &r), APBOT_OK);
    int64_t took = now_ms() - t0;
    assert_int_equal(r.transport, HTTP_UNKNOWN);
    assert_true(took >= 350 && took < 1500);
    assert_true(r.elapsed_ms >= 350);
    assert_non_null(ci_find(r.detail, "timed out"));
    http_response_done(&r);

    /* headers, then nothing: unknown as well */
    t0 = now_ms();
    assert_int_equal(http_get(f->http, url(f, "/headers-then-stall"), &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_UNKNOWN);
    assert_int_equal(r.status, 0);
    assert_true(now_ms() - t0 < 1500);
    http_response_done(&r);
}

static void test_http_short_body_is_unknown(void **state)
{
    struct fx *f = *state;
    struct http_response r;

    assert_int_equal(http_get(f->http, url(f, "/short"), &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_UNKNOWN);
    assert_int_equal(r.status, 0);
    assert_null(r.body);
    assert_false(r.truncated);
    http_response_done(&r);
}

static void test_http_body_over_max_is_truncated_unknown(void **state)
{
    struct fx *f = *state;
    struct http_response r;

    /* exactly max_body is a whole answer */
    assert_int_equal(http_get(f->http, url(f, "/big/4096"), &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_ANSWERED);
    assert_int_equal(r.body_len, 4096);
    assert_int_equal(strlen(r.body), 4096);
    /* zeros after the NUL, inside the allocation, for PCRE2's JIT (mem.h; ASan checks) */
    static const char zeros[1 + APBOT_TEXT_PAD];
    assert_memory_equal(r.body + r.body_len, zeros, sizeof(zeros));
    assert_false(r.truncated);
    http_response_done(&r);

    /* one byte more is cut, and a cut page is never a clean answer */
    assert_int_equal(http_get(f->http, url(f, "/big/4097"), &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_UNKNOWN);
    assert_true(r.truncated);
    assert_null(r.body);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.detail, "4096"));
    http_response_done(&r);

    const struct http_field fields[] = {{"a", "b"}};
    assert_int_equal(http_post_form(f->http, url(f, "/big/100000"), fields, 1, &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_UNKNOWN);
    assert_true(r.truncated);
    http_response_done(&r);
}

static void test_http_redirects_bounded(void **state)
{
    struct fx *f = *state;
    struct http_response r;

    assert_int_equal(http_get(f->http, url(f, "/hop/3"), &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_ANSWERED);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "landed");
    assert_string_equal(r.effective_url, url(f, "/hop/0"));
    assert_int_equal(r.redirects, 3);
    http_response_done(&r);
    pthread_mutex_lock(&f->srv->lock);
    f->srv->paths[0] = '\0';
    pthread_mutex_unlock(&f->srv->lock);

    assert_int_equal(http_get(f->http, url(f, "/hop/4"), &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_UNKNOWN);
    assert_null(r.body);
    assert_non_null(ci_find(r.detail, "redirect"));
    http_response_done(&r);
    pthread_mutex_lock(&f->srv->lock);
    assert_null(strstr(f->srv->paths, "/hop/0")); /* stopped after max_redirects hops */
    pthread_mutex_unlock(&f->srv->lock);
}

struct gate {
    int calls;
    int reads_only; /* calls that said so */
    bool open;
};

static bool gate_fn(void *ctx, const struct http_request *req, char *why, size_t whylen)
{
    struct gate *g = ctx;
    g->calls++;
    g->reads_only += req->reads_only;
    if (!g->open)
        snprintf(why, whylen, "held back: the queue is not on disk");
    return g->open;
}

/* The gate runs once per exchange, before anything is sent (redirects included); a closed
 * gate keeps the request back: not sent, nothing reaches the server, the reason is the
 * detail. */
static void test_http_gate(void **state)
{
    struct fx *f = *state;
    struct http_response r;
    struct gate g = {.open = true};
    http_set_gate(f->http, gate_fn, &g);

    assert_int_equal(http_get(f->http, url(f, "/hop/2"), &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_ANSWERED);
    assert_int_equal(r.redirects, 2);
    http_response_done(&r);
    assert_int_equal(g.calls, 1); /* one exchange, three hops */
    int seen = srv_count(f->srv, &f->srv->n_requests);
    assert_int_equal(seen, 3);

    g.open = false;
    static const struct http_field fields[] = {{"amount", "1,00"}};
    assert_int_equal(http_post_form(f->http, url(f, "/ok"), fields, 1, &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_NOT_SENT);
    assert_int_equal(r.status, 0);
    assert_null(r.body);
    assert_string_equal(r.detail, "held back: the queue is not on disk");
    http_response_done(&r);
    assert_int_equal(http_get(f->http, url(f, "/ok"), &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_NOT_SENT);
    http_response_done(&r);
    assert_int_equal(g.calls, 3);
    assert_int_equal(srv_count(f->srv, &f->srv->n_requests), seen); /* nothing arrived */

    /* the gate sees what the caller says of the request */
    const struct http_request page = {.method = "GET", .url = url(f, "/ok"), .reads_only = true};
    assert_int_equal(http_request(f->http, &page, &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_NOT_SENT);
    http_response_done(&r);
    assert_int_equal(g.calls, 4);
    assert_int_equal(g.reads_only, 1);
    g.calls = 3;

    /* a request refused for its origin never reaches the gate */
    assert_int_equal(http_get(f->http, "http://127.0.0.2:1/x", &r), APBOT_E_ORIGIN);
    assert_int_equal(g.calls, 3);

    http_set_gate(f->http, NULL, NULL);
    assert_int_equal(http_get(f->http, url(f, "/ok"), &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_ANSWERED);
    http_response_done(&r);
    assert_int_equal(g.calls, 3);
}

struct canceller {
    atomic_int *flag;
    int after_ms;
};

static void *cancel_later(void *arg)
{
    struct canceller *c = arg;
    usleep((useconds_t)c->after_ms * 1000);
    *c->flag = 1;
    return NULL;
}

static void test_http_cancel_interrupts(void **state)
{
    struct fx *f = *state;
    struct http_options o = default_options(f->origin);
    struct http_session *slow = NULL;
    struct http_response r;
    atomic_int flag = 0;

    o.timeout_ms = 10000; /* only the cancel can end this */
    o.cancel = &flag;
    assert_int_equal(http_session_new(&o, &slow, NULL, 0), APBOT_OK);

    pthread_t t;
    struct canceller c = {&flag, 150};
    int64_t t0 = now_ms();
    assert_int_equal(pthread_create(&t, NULL, cancel_later, &c), 0);
    const struct http_field fields[] = {{"a", "b"}};
    assert_int_equal(http_post_form(slow, url(f, "/stall"), fields, 1, &r), APBOT_OK);
    int64_t took = now_ms() - t0;
    pthread_join(t, NULL);
    assert_int_equal(r.transport, HTTP_UNKNOWN); /* the POST was out: may be processed */
    assert_true(took >= 140 && took < 600);
    assert_non_null(strstr(r.detail, "cancel"));
    http_response_done(&r);

    /* cancelled before anything was sent: not sent, and the server never saw a connection */
    size_t conns = srv_connections(f->srv);
    assert_int_equal(http_post_form(slow, url(f, "/ok"), fields, 1, &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_NOT_SENT);
    assert_non_null(strstr(r.detail, "cancel"));
    http_response_done(&r);
    assert_int_equal(srv_connections(f->srv), conns);

    /* cleared, the session works again */
    flag = 0;
    assert_int_equal(http_get(slow, url(f, "/ok"), &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_ANSWERED);
    http_response_done(&r);
    http_session_free(slow);
}

static void test_http_basic_auth(void **state)
{
    struct fx *f = *state;
    struct http_options o = default_options(f->origin);
    struct http_session *s = NULL;
    struct http_response r;

    o.basic_user = "clerk";
    o.basic_password = "acme-demo";
    o.user_agent = "apbot-test/1";
    assert_int_equal(http_session_new(&o, &s, NULL, 0), APBOT_OK);
    assert_int_equal(http_get(s, url(f, "/echo"), &r), APBOT_OK);
    assert_int_equal(r.status, 200);
    /* base64("clerk:acme-demo") */
    assert_non_null(strstr(r.body, "\r\nAuthorization: Basic Y2xlcms6YWNtZS1kZW1v\r\n"));
    assert_non_null(strstr(r.body, "\r\nUser-Agent: apbot-test/1\r\n"));
    http_response_done(&r);
    /* on every request, POSTs too */
    const struct http_field fields[] = {{"a", "b"}};
    assert_int_equal(http_post_form(s, url(f, "/echo"), fields, 1, &r), APBOT_OK);
    assert_non_null(strstr(r.body, "Authorization: Basic Y2xlcms6YWNtZS1kZW1v"));
    http_response_done(&r);
    http_session_free(s);
}

static void test_http_bad_arguments(void **state)
{
    (void)state;
    static const char origin[] = "http://127.0.0.1:9";
    struct http_options o = default_options(origin);
    struct http_session *s = (struct http_session *)0x1;
    char err[APBOT_ERR_LEN];

    o.timeout_ms = 0;
    err[0] = '\0';
    assert_int_equal(http_session_new(&o, &s, err, sizeof(err)), APBOT_E_INVAL);
    assert_true(strlen(err) > 0);
    o = default_options(origin);
    o.max_body = 0;
    assert_int_equal(http_session_new(&o, &s, NULL, 0), APBOT_E_INVAL);
    o = default_options(origin);
    o.max_redirects = -1;
    assert_int_equal(http_session_new(&o, &s, NULL, 0), APBOT_E_INVAL);
    o = default_options(origin);
    o.basic_user = "u";
    assert_int_equal(http_session_new(&o, &s, NULL, 0), APBOT_E_INVAL);
    o = default_options(origin);
    o.ca_file = "/nonexistent/apbot-ca.pem";
    assert_int_equal(http_session_new(&o, &s, err, sizeof(err)), APBOT_E_INVAL);
    assert_non_null(strstr(err, "CA file"));
    /* a session needs an origin it can state: http(s), a host, no credentials in it */
    static const char *const bad_origins[] = {
        NULL,
        "",
        "/erp",
        "127.0.0.1:8080",
        "ftp://127.0.0.1/",
        "file:///etc/passwd",
        "http://clerk:pw@127.0.0.1:8080/",
        "http://clerk@127.0.0.1/",
        "http://",
    };
    for (size_t i = 0; i < sizeof(bad_origins) / sizeof(bad_origins[0]); i++) {
        o = default_options(bad_origins[i]);
        err[0] = '\0';
        if (http_session_new(&o, &s, err, sizeof(err)) != APBOT_E_INVAL)
            fail_msg("origin %zu accepted", i);
        assert_non_null(strstr(err, "origin"));
    }
    assert_ptr_equal(s, (struct http_session *)0x1); /* untouched on failure */
    assert_int_equal(http_session_new(NULL, &s, NULL, 0), APBOT_E_INVAL);

    struct http_response r;
    assert_int_equal(http_get(NULL, "http://127.0.0.1/", &r), APBOT_E_INVAL);
    assert_int_equal(http_post_form(NULL, "http://127.0.0.1/", NULL, 0, &r), APBOT_E_INVAL);
    assert_int_equal(http_request(NULL, NULL, &r), APBOT_E_INVAL);

    /* requests: bad methods, a GET with a body, credentials in the URL - nothing sent */
    o = default_options(origin);
    assert_int_equal(http_session_new(&o, &s, NULL, 0), APBOT_OK);
    const struct http_field fl[] = {{"a", "b"}};
    const struct http_request bad[] = {
        {.method = "PUT", .url = "http://127.0.0.1:9/x"},
        {.method = "get", .url = "http://127.0.0.1:9/x"},
        {.method = "GET", .url = "http://127.0.0.1:9/x", .fields = fl, .n_fields = 1},
        {.method = "POST", .url = "http://127.0.0.1:9/x", .fields = NULL, .n_fields = 1},
        {.method = "GET", .url = "http://clerk:pw@127.0.0.1:9/x"},
        {.method = "GET", .url = NULL},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&r, 0x5a, sizeof(r));
        if (http_request(s, &bad[i], &r) != APBOT_E_INVAL)
            fail_msg("bad request %zu accepted", i);
        assert_int_equal(r.status, 0x5a5a5a5a5a5a5a5aLL); /* untouched */
    }
    http_session_free(s);
    http_session_free(NULL);
    http_response_done(NULL);
    assert_string_equal(http_transport_name((enum http_transport)99), "unknown");
}

/* ---- the origin and redirect decisions, as tables ---- */

static void test_http_same_origin_table(void **state)
{
    (void)state;
    static const struct {
        const char *a, *b;
        bool same;
    } cases[] = {
        {"http://erp.example:8080/erp", "http://erp.example:8080/other?x=1", true},
        {"http://erp.example/", "http://ERP.example:80/x", true}, /* default port, any case */
        {"HTTPS://erp.example/", "https://erp.example:443/x", true},
        {"http://127.0.0.1:8080/", "http://127.0.0.1:8081/", false}, /* port */
        {"http://127.0.0.1:8080/", "http://localhost:8080/", false}, /* host, same machine */
        {"https://erp.example/", "http://erp.example/", false},      /* https -> http */
        {"https://erp.example/", "http://erp.example:443/", false},
        {"http://erp.example/", "https://erp.example/", false},
        {"http://erp.example/", "http://erp.example.evil.example/", false},
        {"http://erp.example/", "http://clerk:pw@erp.example/", false}, /* credentials */
        {"http://erp.example/", "ftp://erp.example/", false},
        {"http://erp.example/", "/relative", false},
        {"http://erp.example/", NULL, false},
        {NULL, NULL, false},
        {"http://[::1]:8080/", "http://[::1]:8080/x", true},
        {"http://[::1]:8080/", "http://127.0.0.1:8080/x", false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (http_same_origin(cases[i].a, cases[i].b) != cases[i].same)
            fail_msg("case %zu: %s vs %s", i, cases[i].a ? cases[i].a : "NULL",
                     cases[i].b ? cases[i].b : "NULL");
        if (http_same_origin(cases[i].b, cases[i].a) != cases[i].same)
            fail_msg("case %zu reversed", i);
    }
}

static void test_http_redirect_decide_table(void **state)
{
    (void)state;
    static const char o[] = "https://erp.example:8443/erp";
    static const struct {
        long status;
        const char *location;
        enum http_redirect want;
    } cases[] = {
        {200, NULL, HTTP_REDIRECT_NONE},
        {200, "https://erp.example:8443/x", HTTP_REDIRECT_NONE}, /* a Location is no redirect */
        {301, "https://erp.example:8443/x", HTTP_REDIRECT_GET},
        {302, "https://erp.example:8443/x", HTTP_REDIRECT_GET},
        {303, "https://erp.example:8443/x", HTTP_REDIRECT_GET},
        {307, "https://erp.example:8443/x", HTTP_REDIRECT_SAME},
        {308, "https://erp.example:8443/x", HTTP_REDIRECT_SAME},
        {300, "https://erp.example:8443/x", HTTP_REDIRECT_NONE},
        {304, "https://erp.example:8443/x", HTTP_REDIRECT_NONE},
        {305, "https://erp.example:8443/x", HTTP_REDIRECT_NONE},
        {302, "http://erp.example:8443/x", HTTP_REDIRECT_BLOCKED},  /* https -> http */
        {307, "https://erp.example:9443/x", HTTP_REDIRECT_BLOCKED}, /* another port */
        {303, "https://evil.example:8443/x", HTTP_REDIRECT_BLOCKED},
        {308, "https://u:p@erp.example:8443/x", HTTP_REDIRECT_BLOCKED},
        {301, "javascript:alert(1)", HTTP_REDIRECT_BLOCKED},
        {302, NULL, HTTP_REDIRECT_BLOCKED}, /* unresolvable */
        {404, "http://evil.example/", HTTP_REDIRECT_NONE},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (http_redirect_decide(o, cases[i].status, cases[i].location) != cases[i].want)
            fail_msg("case %zu: %ld %s", i, cases[i].status,
                     cases[i].location ? cases[i].location : "NULL");
}

/* ---- the hostile ERP: a second server on another port must see nothing ---- */

static size_t count_lines(struct srv *s, const char *line)
{
    size_t n = 0, l = strlen(line);
    pthread_mutex_lock(&s->lock);
    for (const char *p = s->paths; (p = strstr(p, line)) != NULL; p += l)
        n++;
    pthread_mutex_unlock(&s->lock);
    return n;
}

static void test_http_login_307_elsewhere_keeps_the_password(void **state)
{
    struct fx *f = *state;
    struct srv *thief = srv_start(false);
    struct http_response r;
    static const char secret[] = "S3cr3t-P@ss";
    const struct http_field fields[] = {{"j_username", "clerk"}, {"j_password", secret}};
    char path[64], want_loc[128];

    for (int status = 307; status <= 308; status++) {
        snprintf(path, sizeof(path), "/to-port/%d/%d", status, thief->port);
        assert_int_equal(http_post_form(f->http, url(f, path), fields, 2, &r), APBOT_OK);
        /* the 3xx is the answer: not followed, flagged, and the target recorded */
        assert_int_equal(r.transport, HTTP_ANSWERED);
        assert_int_equal(r.status, status);
        assert_true(r.redirect_blocked);
        assert_int_equal(r.redirects, 0);
        assert_int_equal(r.first_status, status);
        snprintf(want_loc, sizeof(want_loc), "http://127.0.0.1:%d/steal", thief->port);
        assert_string_equal(r.first_location, want_loc);
        assert_string_equal(r.effective_url, url(f, path));
        assert_string_equal(r.body, "moved");
        http_response_done(&r);
    }
    /* the ERP got the login twice; the other port never saw a connection */
    assert_int_equal(srv_count(f->srv, &f->srv->n_posts), 2);
    assert_int_equal(srv_connections(thief), 0);

    /* on the origin, 307 and 308 repeat the POST with its body; 303 turns it into a GET */
    for (int status = 307; status <= 308; status++) {
        snprintf(path, sizeof(path), "/same/%d", status);
        assert_int_equal(http_post_form(f->http, url(f, path), fields, 2, &r), APBOT_OK);
        assert_int_equal(r.transport, HTTP_ANSWERED);
        assert_int_equal(r.status, 200);
        assert_false(r.redirect_blocked);
        assert_int_equal(r.redirects, 1);
        assert_int_equal(r.first_status, status);
        assert_string_equal(r.first_location, url(f, "/echo-body?from=same"));
        assert_string_equal(r.body, "j_username=clerk&j_password=S3cr3t-P%40ss");
        http_response_done(&r);
    }
    assert_int_equal(count_lines(f->srv, "POST /echo-body?from=same\n"), 2);
    assert_int_equal(http_post_form(f->http, url(f, "/same/303"), fields, 2, &r), APBOT_OK);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, ""); /* the GET carried no body */
    http_response_done(&r);
    assert_int_equal(count_lines(f->srv, "GET /echo-body?from=same\n"), 1);

    /* and a request for the other port itself is refused before anything is sent */
    snprintf(want_loc, sizeof(want_loc), "http://127.0.0.1:%d/steal", thief->port);
    memset(&r, 0x5a, sizeof(r));
    assert_int_equal(http_post_form(f->http, want_loc, fields, 2, &r), APBOT_E_ORIGIN);
    assert_int_equal(r.status, 0x5a5a5a5a5a5a5a5aLL); /* untouched */
    assert_int_equal(srv_connections(thief), 0);
    srv_stop(thief);
}

static void test_http_redirect_off_origin_not_followed(void **state)
{
    struct fx *f = *state;
    struct http_response r;
    char path[64], want[128];

    /* the same server under another host name is another origin */
    snprintf(path, sizeof(path), "/to-host/%d", f->srv->port);
    assert_int_equal(http_get(f->http, url(f, path), &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_ANSWERED);
    assert_int_equal(r.status, 302);
    assert_true(r.redirect_blocked);
    snprintf(want, sizeof(want), "http://localhost:%d/ok", f->srv->port);
    assert_string_equal(r.first_location, want);
    http_response_done(&r);
    assert_int_equal(srv_count(f->srv, &f->srv->n_requests), 1);

    /* another scheme: https from an http origin, or no web scheme at all */
    static const char *const blocked[] = {"/to-https", "/to-ftp"};
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(http_get(f->http, url(f, blocked[i]), &r), APBOT_OK);
        assert_int_equal(r.transport, HTTP_ANSWERED);
        assert_true(r.status == 302 || r.status == 301);
        assert_true(r.redirect_blocked);
        http_response_done(&r);
    }
    assert_int_equal(srv_count(f->srv, &f->srv->n_requests), 3);

    /* a 3xx without a Location is just an answer */
    assert_int_equal(http_get(f->http, url(f, "/to-nowhere"), &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_ANSWERED);
    assert_int_equal(r.status, 302);
    assert_false(r.redirect_blocked);
    assert_null(r.first_location);
    assert_int_equal(r.first_status, 302);
    assert_string_equal(r.body, "no location");
    http_response_done(&r);

    /* without a redirect the first hop is the answer */
    assert_int_equal(http_get(f->http, url(f, "/ok"), &r), APBOT_OK);
    assert_int_equal(r.first_status, 200);
    assert_null(r.first_location);
    assert_false(r.redirect_blocked);
    http_response_done(&r);
}

static void test_http_https_session_sends_nothing_over_http(void **state)
{
    struct fx *f = *state;
    struct http_session *tls = NULL;
    struct http_response r;
    char origin[64], plain[128];

    snprintf(origin, sizeof(origin), "https://127.0.0.1:%d", f->srv->port);
    struct http_options o = default_options(origin);
    assert_int_equal(http_session_new(&o, &tls, NULL, 0), APBOT_OK);
    snprintf(plain, sizeof(plain), "http://127.0.0.1:%d/ok", f->srv->port);
    memset(&r, 0x5a, sizeof(r));
    assert_int_equal(http_get(tls, plain, &r), APBOT_E_ORIGIN);
    const struct http_field fields[] = {{"j_password", "pw"}};
    assert_int_equal(http_post_form(tls, plain, fields, 1, &r), APBOT_E_ORIGIN);
    const struct http_request req = {.method = "GET", .url = plain, .fresh = true};
    assert_int_equal(http_request(tls, &req, &r), APBOT_E_ORIGIN);
    assert_int_equal(r.status, 0x5a5a5a5a5a5a5a5aLL);
    assert_int_equal(srv_connections(f->srv), 0);
    http_session_free(tls);
}

static void test_http_basic_never_leaves_the_origin(void **state)
{
    struct fx *f = *state;
    struct srv *thief = srv_start(false);
    struct http_options o = default_options(f->origin);
    struct http_session *s = NULL;
    struct http_response r;
    char path[64], other[128];

    o.basic_user = "clerk";
    o.basic_password = "acme-demo";
    assert_int_equal(http_session_new(&o, &s, NULL, 0), APBOT_OK);
    for (int status = 301; status <= 308; status++) {
        if (status > 303 && status < 307)
            continue;
        snprintf(path, sizeof(path), "/to-port/%d/%d", status, thief->port);
        assert_int_equal(http_get(s, url(f, path), &r), APBOT_OK);
        assert_int_equal(r.status, status);
        assert_true(r.redirect_blocked);
        http_response_done(&r);
        pthread_mutex_lock(&f->srv->lock); /* the origin got it, as it should */
        assert_non_null(strstr(f->srv->last_head, "Authorization: Basic Y2xlcms6YWNtZS1kZW1v"));
        pthread_mutex_unlock(&f->srv->lock);
    }
    snprintf(other, sizeof(other), "http://127.0.0.1:%d/echo", thief->port);
    assert_int_equal(http_get(s, other, &r), APBOT_E_ORIGIN);
    assert_int_equal(srv_connections(thief), 0);

    /* a redirect within the origin keeps it (the next hop is the ERP too) */
    assert_int_equal(http_get(s, url(f, "/hop/1"), &r), APBOT_OK);
    assert_int_equal(r.redirects, 1);
    http_response_done(&r);
    pthread_mutex_lock(&f->srv->lock);
    assert_non_null(strstr(f->srv->last_head, "GET /hop/0 HTTP/1.1"));
    assert_non_null(strstr(f->srv->last_head, "Authorization: Basic Y2xlcms6YWNtZS1kZW1v"));
    pthread_mutex_unlock(&f->srv->lock);
    http_session_free(s);
    srv_stop(thief);
}

static void test_http_fresh_get_never_resent(void **state)
{
    struct fx *f = *state;
    struct http_response r;
    const struct http_request fresh_ok = {.method = "GET", .url = url(f, "/ok"), .fresh = true};

    /* A fresh GET may ride the kept-alive connection, as the plain ones around it do. */
    assert_int_equal(http_request(f->http, &fresh_ok, &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_ANSWERED);
    http_response_done(&r);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(http_get(f->http, url(f, "/ok"), &r), APBOT_OK);
        http_response_done(&r);
        assert_int_equal(http_request(f->http, &fresh_ok, &r), APBOT_OK);
        http_response_done(&r);
    }
    assert_int_equal(srv_connections(f->srv), 1);

    /* A committing GET that the ERP reads and answers by hanging up: reported unknown, and
     * the ERP saw it exactly once (libcurl's own re-send on a new connection refused). */
    const struct http_request commit = {.method = "GET", .url = url(f, "/close"), .fresh = true};
    assert_int_equal(http_request(f->http, &commit, &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_UNKNOWN);
    assert_non_null(strstr(r.detail, "not re-sent"));
    http_response_done(&r);
    assert_int_equal(count_lines(f->srv, "GET /close\n"), 1);

    /* The same GET, not fresh, on a kept-alive connection: when that dies after the request
     * was read, libcurl sends the request again by itself - what fresh prevents. */
    assert_int_equal(http_get(f->http, url(f, "/ok"), &r), APBOT_OK);
    http_response_done(&r);
    const struct http_request plain = {.method = "GET", .url = url(f, "/close"), .fresh = false};
    assert_int_equal(http_request(f->http, &plain, &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_UNKNOWN);
    http_response_done(&r);
    assert_int_equal(count_lines(f->srv, "GET /close\n"), 3);
}

static void test_http_cut_bodies_are_unknown(void **state)
{
    struct fx *f = *state;
    struct http_response r;

    /* Content-Length 100, ten bytes, then the connection closes */
    assert_int_equal(http_get(f->http, url(f, "/short"), &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_UNKNOWN);
    assert_null(r.body);
    assert_int_equal(r.status, 0);
    assert_true(strlen(r.detail) > 0);
    http_response_done(&r);
    /* chunked, closed before the last chunk */
    assert_int_equal(http_get(f->http, url(f, "/chunked-cut"), &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_UNKNOWN);
    assert_null(r.body);
    http_response_done(&r);
    /* the same after a same-origin redirect: the last hop decides */
    const struct http_field fields[] = {{"a", "b"}};
    assert_int_equal(http_post_form(f->http, url(f, "/short"), fields, 1, &r), APBOT_OK);
    assert_int_equal(r.transport, HTTP_UNKNOWN);
    http_response_done(&r);
}

static void test_http_resolve_and_escape(void **state)
{
    (void)state;
    static const struct {
        const char *base, *ref, *want;
    } cases[] = {
        {"http://h:8080/erp/login", "/erp/home", "http://h:8080/erp/home"},
        {"http://h/erp/ap/invoice/new", "check", "http://h/erp/ap/invoice/check"},
        {"http://h/erp/ap/journal?date=1&page=1", "?date=1&page=2",
         "http://h/erp/ap/journal?date=1&page=2"},
        {"http://h/erp/a/b", "../x", "http://h/erp/x"},
        {"http://h/erp/a", "https://other/y", "https://other/y"},
        {"http://h/erp/a", "//other:81/z", "http://other:81/z"},
        {"http://h/erp/a?q=1#frag", "", "http://h/erp/a?q=1"},
        {NULL, "http://abs/only", "http://abs/only"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *got = http_resolve_url(cases[i].base, cases[i].ref);
        assert_non_null(got);
        assert_string_equal(got, cases[i].want);
        free(got);
    }
    assert_null(http_resolve_url("http://h/", NULL));
    assert_null(http_resolve_url("not a url", "x"));
    assert_null(http_resolve_url(NULL, "relative/only"));

    char *e = http_escape("AP1-ABC_x.y~z");
    assert_string_equal(e, "AP1-ABC_x.y~z");
    free(e);
    e = http_escape("a b&c=d/e?f+g%h");
    assert_string_equal(e, "a%20b%26c%3Dd%2Fe%3Ff%2Bg%25h");
    free(e);
    e = http_escape("Müller");
    assert_string_equal(e, "M%C3%BCller");
    free(e);
    e = http_escape("");
    assert_string_equal(e, "");
    free(e);
    assert_null(http_escape(NULL));
}

/* ---- the URL fast paths against libcurl itself ---- */

/* The origin parts as libcurl's parser gives them: http.c's code before its fast paths. */
static bool curl_origin(const char *url, char **ret_scheme, char **ret_host, char **ret_port)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *port = NULL, *user = NULL, *password = NULL;
    bool ok = false;
    assert_non_null(u);
    if (!url || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK)
        goto out;
    if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        (strcasecmp(scheme, "http") != 0 && strcasecmp(scheme, "https") != 0))
        goto out;
    if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK ||
        curl_url_get(u, CURLUPART_PASSWORD, &password, 0) == CURLUE_OK)
        goto out;
    if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !host || !*host)
        goto out;
    if (curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK)
        goto out;
    *ret_scheme = strdup(scheme);
    *ret_host = strdup(host);
    *ret_port = strdup(port);
    ok = true;
out:
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_free(user);
    curl_free(password);
    curl_url_cleanup(u);
    return ok;
}

/* 1 same origin, 0 not, -1 a has no origin (http_request's APBOT_E_INVAL). */
static int curl_same_origin(const char *a, const char *b)
{
    char *sa = NULL, *ha = NULL, *pa = NULL, *sb = NULL, *hb = NULL, *pb = NULL;
    if (!curl_origin(a, &sa, &ha, &pa))
        return -1;
    int same = curl_origin(b, &sb, &hb, &pb) && strcasecmp(sa, sb) == 0 &&
               strcasecmp(ha, hb) == 0 && strcmp(pa, pb) == 0;
    free(sa);
    free(ha);
    free(pa);
    free(sb);
    free(hb);
    free(pb);
    return same;
}

/* http.c's http_resolve_url before its fast paths. */
static char *curl_resolve(const char *base, const char *ref)
{
    char *got = NULL, *out = NULL;
    if (!ref)
        return NULL;
    CURLU *u = curl_url();
    assert_non_null(u);
    if (base && curl_url_set(u, CURLUPART_URL, base, 0) != CURLUE_OK)
        goto out;
    if (base && !*ref) {
        if (curl_url_set(u, CURLUPART_FRAGMENT, NULL, 0) != CURLUE_OK)
            goto out;
    } else if (curl_url_set(u, CURLUPART_URL, ref, 0) != CURLUE_OK) {
        goto out;
    }
    if (curl_url_get(u, CURLUPART_URL, &got, 0) != CURLUE_OK)
        goto out;
    out = strdup(got);
out:
    curl_free(got);
    curl_url_cleanup(u);
    return out;
}

static uint64_t xs = 0x9e3779b97f4a7c15u; /* fixed seed: the same cases every run */

static unsigned xs_below(unsigned n)
{
    return xorshift_below(&xs, n);
}

/* URL fragments: the good ones make plain URLs, each bad one an edge libcurl treats its own
 * way (case, IPv4 forms, ports, dot segments, escapes, spaces, fragments, control and
 * non-ASCII bytes...). */
enum gen_slot { GEN_SCHEME, GEN_USER, GEN_HOST, GEN_PORT, GEN_PATH, GEN_QUERY, GEN_SLOTS };

#define GEN_LIST(...) ((const char *const[]){__VA_ARGS__, NULL})
static const char *const *const gen_good[GEN_SLOTS] = {
    GEN_LIST("http://", "https://"),
    GEN_LIST(""),
    GEN_LIST("h", "erp.example", "127.0.0.1", "a-b.c", "h.", "a..b", "xn--e1a.example", "localhost",
             "h-", "0.0.0.0", "255.255.255.255", "a1", "10.0.0.254"),
    GEN_LIST("", ":80", ":443", ":8080", ":65535", ":1", ":8443"),
    GEN_LIST("/", "/erp", "/erp/invoice/new", "//", "/%2e", "/%2E%2e/", "/a.b", "/x.", "/~u",
             "/a:b", "/a@b", "/$!*'()+,;=&", "/A-Z_", "/x/", "/%41", "/a%2Fb", "/invoice-7.pdf"),
    GEN_LIST("", "?x=1", "?a=1&b=2", "??", "?a=%20", "?&=", "?.", "?a/b", "?x=1?y", "?q=a:b@c"),
};
static const char *const *const gen_bad[GEN_SLOTS] = {
    GEN_LIST("HTTP://", "Https://", "hTTp://", "ftp://", "http:/", "http:///", "http:", "", "//",
             "file://", "http:\\\\", " http://", "httpx://", "ws://"),
    GEN_LIST("user:pw@", "@", "u@", ":@", "clerk:@"),
    GEN_LIST("ERP.example", "Erp", "H", "-h", ".h", "%41b", "h%2e", "[::1]", "[::FFFF:127.0.0.1]",
             "[fe80::1%25eth0]", "0x7f.1", "127.1", "2130706433", "0177.0.0.1", "256.1.1.1",
             "1.2.3.4.5", "01.2.3.4", "1a.b", "127.0.0.01", "h_x", "", "h\xc3\xa9", "h!", "h\x01",
             "h\x7f", "h h", "h\\x", "1.2.3.", ".", "h~"),
    GEN_LIST(":0", ":080", ":00080", ":65536", ":", ":99999", ":123456", ":8080x", ":+80", ":-1",
             ": 80", "::80", ":0x50"),
    GEN_LIST("/./", "/../", "/.", "/..", "/.hidden", "/%zz", "/%4", "/%", "/a b", "/#frag", "/\\x",
             "/\x01", "/\x7f", "/\xc3\xa9", "/a\tb", "/[x]", "/{x}", "/a|b", "/a\"b", "/<x>",
             "/a^b", "/a`b"),
    GEN_LIST("?", "?q=/./x", "?q=/../", "#frag", "?x#f", "?a b", "?x=%ZZ", "?\x01", "?\xc3\xa9",
             "#", "?x=\\", "?/.", "?#"),
};
static const char *const *const gen_other_refs =
    GEN_LIST("", "x", "../x", "./x", "?q=1", "?", "#f", "//h/x", "//evil.example:81/z", "x?y", ".",
             "..", "\\\\h\\x", " /x", "/ x", "http:x", "http:/x", "mailto:x", "javascript:alert(1)",
             "HTTP://h/x", "%2F%2Fh", "/\\h", "\\/h", ";x", "#");

static const char *gen_pick(const char *const *list)
{
    unsigned n = 0;
    while (list[n])
        n++;
    return list[xs_below(n)];
}

/* One URL as its fragments; path holds 0..3 path pieces. */
struct gen_url {
    const char *slot[GEN_SLOTS];
    char path[256];
    char host[64]; /* a variant's host (gen_variant) */
};

/* Slot i of g: good, or bad when bad is set. */
static void gen_slot(struct gen_url *g, enum gen_slot i, bool bad)
{
    const char *const *const *lists = bad ? gen_bad : gen_good;
    if (i != GEN_PATH) {
        g->slot[i] = gen_pick(lists[i]);
        return;
    }
    unsigned n = xs_below(4), bad_at = bad ? xs_below(n ? n : 1) : 4;
    g->path[0] = '\0';
    for (unsigned k = 0, len = 0; k < (bad && !n ? 1 : n); k++)
        len += (unsigned)snprintf(g->path + len, sizeof(g->path) - len, "%s",
                                  gen_pick(k == bad_at ? gen_bad[GEN_PATH] : gen_good[GEN_PATH]));
    g->slot[GEN_PATH] = g->path;
}

/* All good (70%), one bad slot (22%), or each slot bad at even odds (8%). */
static void gen_new(struct gen_url *g, bool only_path)
{
    unsigned mode = xs_below(100), bad = xs_below(GEN_SLOTS);
    for (int i = 0; i < GEN_SLOTS; i++) {
        if (only_path && i != GEN_PATH && i != GEN_QUERY)
            continue;
        gen_slot(g, (enum gen_slot)i,
                 mode < 70   ? false
                 : mode < 92 ? (unsigned)i == bad
                             : xs_below(2) == 1);
    }
}

/* Slot i of g turned into what libcurl calls the same origin part, or nearly: the scheme or
 * one host letter in uppercase, the default port made explicit or dropped. */
static void gen_variant(struct gen_url *g, enum gen_slot i)
{
    bool https = strncasecmp(g->slot[GEN_SCHEME], "https", 5) == 0;
    if (i == GEN_SCHEME) {
        g->slot[i] =
            https ? (xs_below(2) ? "HTTPS://" : "hTTps://") : (xs_below(2) ? "HTTP://" : "Http://");
    } else if (i == GEN_HOST) {
        snprintf(g->host, sizeof(g->host), "%s", g->slot[GEN_HOST]);
        size_t n = strlen(g->host);
        if (n > 0) {
            size_t k = xs_below((unsigned)n);
            if (g->host[k] >= 'a' && g->host[k] <= 'z')
                g->host[k] = (char)(g->host[k] - 'a' + 'A');
        }
        g->slot[i] = g->host;
    } else if (i == GEN_PORT) {
        g->slot[i] = g->slot[i][0] ? "" : https ? ":443" : ":80";
    } else {
        gen_slot(g, i, false);
    }
}

static void gen_string(const struct gen_url *g, char *out, size_t n)
{
    snprintf(out, n, "%s%s%s%s%s%s", g->slot[GEN_SCHEME], g->slot[GEN_USER], g->slot[GEN_HOST],
             g->slot[GEN_PORT], g->slot[GEN_PATH], g->slot[GEN_QUERY]);
}

static bool gate_closed(void *ctx, const struct http_request *req, char *why, size_t whylen)
{
    (void)ctx;
    (void)req;
    snprintf(why, whylen, "test: closed");
    return false;
}

/*
 * http_same_origin, http_resolve_url and http_request's origin check answer plain URLs
 * without libcurl's parser: over thousands of generated URLs and references near and far
 * from plain, they must answer exactly as libcurl does - and the fast path must have
 * answered a good share of them, or this proves nothing.
 */
static void test_http_url_fast_paths_agree_with_curl(void **state)
{
    (void)state;
    /* what plain means, on the bot's own URLs and the first edges next to them */
    static const struct {
        const char *url;
        bool plain;
    } shapes[] = {
        {"http://127.0.0.1:8080/erp/invoice/new?x=1", true},
        {"https://erp.example", true},
        {"http://h?x=1&y=a:b", true},
        {"http://H/", false},
        {"HTTP://h/", false},
        {"http://127.1/", false},
        {"http://h:080/", false},
        {"http://h:65536/", false},
        {"http://h/./x", false},
        {"http://h/x?", false},
        {"http://h/x#f", false},
        {"http://u@h/", false},
    };
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
        if (http_url_is_plain(shapes[i].url) != shapes[i].plain)
            fail_msg("%s: plain is not %d", shapes[i].url, shapes[i].plain);

    enum { N_CASES = 6000 };
    static const char *const origins[] = {
        "http://127.0.0.1:8080/erp/", "http://h/",      "https://h:443",
        "http://ERP.example:80/",     "https://[::1]/", "http://h:8080",
    };
    enum { N_ORIGINS = sizeof(origins) / sizeof(origins[0]) };
    struct http_session *sessions[N_ORIGINS];
    for (size_t i = 0; i < N_ORIGINS; i++) {
        struct http_options o = default_options(origins[i]);
        char err[APBOT_ERR_LEN] = "";
        assert_int_equal(http_session_new(&o, &sessions[i], err, sizeof(err)), APBOT_OK);
        http_set_gate(sessions[i], gate_closed, NULL);
    }
    unsigned same_fast = 0, same_fast_true = 0, same_curl = 0, res_fast = 0, res_curl = 0;
    unsigned req_fast = 0, req_curl = 0, checks = 0;
    for (unsigned c = 0; c < N_CASES; c++) {
        struct gen_url g1, g2;
        char a[512], b[512], ref[512], probe[600];
        gen_new(&g1, false);
        /* b: a with some slots regenerated or varied, so that many pairs share an origin */
        g2 = g1;
        g2.slot[GEN_PATH] = g2.path;
        for (int i = 0; i < GEN_SLOTS; i++) {
            unsigned how = xs_below(16);
            if (how < 4)
                gen_variant(&g2, (enum gen_slot)i);
            else if (how < 8)
                gen_slot(&g2, (enum gen_slot)i, how == 4);
        }
        gen_string(&g1, a, sizeof(a));
        gen_string(&g2, b, sizeof(b));

        /* same origin, both ways */
        int want = curl_same_origin(a, b) == 1;
        if (http_same_origin(a, b) != want || http_same_origin(b, a) != want)
            fail_msg("case %u: same_origin(\"%s\", \"%s\") is not %d", c, a, b, want);
        bool fast = http_url_is_plain(a) && http_url_is_plain(b);
        same_fast += fast;
        same_fast_true += fast && want;
        same_curl += !fast;

        /* resolve: b absolute (35%), a path reference (50%) or something else */
        unsigned kind = xs_below(20);
        if (kind < 7) {
            snprintf(ref, sizeof(ref), "%s", b);
        } else if (kind < 17) {
            struct gen_url gp = {0};
            gen_new(&gp, true);
            snprintf(ref, sizeof(ref), "%s%s", gp.slot[GEN_PATH], gp.slot[GEN_QUERY]);
        } else {
            struct gen_url gp = {0};
            gen_new(&gp, true);
            snprintf(ref, sizeof(ref), "%s%s", gen_pick(gen_other_refs),
                     xs_below(2) ? gp.slot[GEN_PATH] : "");
        }
        const char *base = xs_below(50) ? a : NULL;
        char *got = http_resolve_url(base, ref), *exp = curl_resolve(base, ref);
        if ((got == NULL) != (exp == NULL) || (got && strcmp(got, exp) != 0))
            fail_msg("case %u: resolve(\"%s\", \"%s\") = \"%s\", libcurl says \"%s\"", c,
                     base ? base : "NULL", ref, got ? got : "NULL", exp ? exp : "NULL");
        free(got);
        free(exp);
        snprintf(probe, sizeof(probe), "http://h%s", ref);
        fast = http_url_is_plain(base) &&
               (http_url_is_plain(ref) ||
                (ref[0] == '/' && ref[1] != '/' && http_url_is_plain(probe)));
        res_fast += fast;
        res_curl += !fast;

        /* the request's origin check, on a session that refuses to send anything */
        const char *const urls[] = {a, b, ref};
        for (size_t k = 0; k < 3; k++) {
            size_t o = (c + k) % N_ORIGINS;
            int cw = curl_same_origin(urls[k], origins[o]);
            int rc_want = cw < 0 ? APBOT_E_INVAL : cw ? APBOT_OK : APBOT_E_ORIGIN;
            struct http_response r;
            const struct http_request req = {.method = "GET", .url = urls[k]};
            int rc = http_request(sessions[o], &req, &r);
            if (rc != rc_want)
                fail_msg("case %u: request \"%s\" on %s: %d, libcurl says %d", c, urls[k],
                         origins[o], rc, rc_want);
            if (rc == APBOT_OK) {
                assert_int_equal(r.transport, HTTP_NOT_SENT);
                http_response_done(&r);
            }
            bool plain = http_url_is_plain(urls[k]) && !strchr(origins[o], '[');
            req_fast += plain;
            req_curl += !plain;
        }
        checks += 2 + 1 + 3;
    }
    print_message("%d cases, %u checks: same_origin fast %u (%u same) / libcurl %u; resolve "
                  "fast %u / libcurl %u; request fast %u / libcurl %u\n",
                  N_CASES, checks, same_fast, same_fast_true, same_curl, res_fast, res_curl,
                  req_fast, req_curl);
    /* both paths well exercised, and the fast one answering true and false */
    assert_true(same_fast > N_CASES / 4 && same_curl > N_CASES / 10);
    assert_true(same_fast_true > N_CASES / 20 && same_fast - same_fast_true > N_CASES / 20);
    assert_true(res_fast > N_CASES / 4 && res_curl > N_CASES / 10);
    assert_true(req_fast > N_CASES / 4 && req_curl > N_CASES / 10);
    for (size_t i = 0; i < N_ORIGINS; i++)
        http_session_free(sessions[i]);
}

int main(void)
{
    /* the test talks to 127.0.0.1 only: no proxy from the environment in between */
    static const char *const proxies[] = {"http_proxy",  "https_proxy", "HTTP_PROXY",
                                          "HTTPS_PROXY", "ALL_PROXY",   "all_proxy"};
    for (size_t i = 0; i < sizeof(proxies) / sizeof(proxies[0]); i++)
        unsetenv(proxies[i]);
    signal(SIGPIPE, SIG_IGN);
    if (http_global_init() != APBOT_OK)
        return 1;
    if (http_global_init() != APBOT_OK) /* counted: a second init is harmless */
        return 1;
    http_global_cleanup();

    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_http_answered_200, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_retry_after, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_date, setup, teardown),
        cmocka_unit_test(test_http_date_fast_path),
        cmocka_unit_test_setup_teardown(test_http_cookies_kept_and_cleared, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_post_redirect_get_secret_free, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_json_body_and_headers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_refused_is_not_sent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_tls_handshake_failure_is_not_sent, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_http_closed_without_reply_is_unknown, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_post_never_resent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_stall_times_out_unknown, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_short_body_is_unknown, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_body_over_max_is_truncated_unknown, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_http_redirects_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_gate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_cancel_interrupts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_basic_auth, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_login_307_elsewhere_keeps_the_password, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_http_redirect_off_origin_not_followed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_http_https_session_sends_nothing_over_http, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_http_basic_never_leaves_the_origin, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_fresh_get_never_resent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_cut_bodies_are_unknown, setup, teardown),
        cmocka_unit_test(test_http_same_origin_table),
        cmocka_unit_test(test_http_redirect_decide_table),
        cmocka_unit_test(test_http_bad_arguments),
        cmocka_unit_test(test_http_resolve_and_escape),
        cmocka_unit_test(test_http_url_fast_paths_agree_with_curl),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    http_global_cleanup();
    return rc;
}
