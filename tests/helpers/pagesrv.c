/*
 * pagesrv.c - the canned-page HTTP server of the driver's unit tests (see pagesrv.h). Plain
 * POSIX sockets, HTTP/1.1 with Content-Length bodies and keep-alive, nothing more.
 */
#include "pagesrv.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define PS_MAX_ROUTES 64
#define PS_MAX_RESPS 8
#define PS_MAX_CONN 256
#define PS_MAX_REQS 512
#define PS_HEAD_MAX 16384

struct route {
    char method[8];
    char path[1024];
    char body_has[256]; /* "" = any body */
    struct pagesrv_resp resps[PS_MAX_RESPS];
    char *bodies[PS_MAX_RESPS]; /* loaded and substituted */
    size_t n;
    size_t used; /* requests served */
};

struct pagesrv {
    int fd;
    int port;
    char base[64];
    char other[64];
    volatile int stop;
    pthread_t accept_thread;
    pthread_mutex_t lock;
    pthread_t threads[PS_MAX_CONN];
    int conns[PS_MAX_CONN];
    size_t n_threads;
    int n_conn;
    struct route routes[PS_MAX_ROUTES];
    size_t n_routes;
    struct pagesrv_req *reqs;
    int n_reqs;
};

struct conn_arg {
    struct pagesrv *s;
    int fd;
    int conn;
};

static void die(const char *what)
{
    fprintf(stderr, "pagesrv: %s\n", what);
    abort();
}

/* Replaces every "{{BASE}}" and "{{OTHER}}" in text. Heap. */
static char *substitute(const struct pagesrv *s, const char *text)
{
    size_t len = strlen(text), cap = len + 1;
    for (const char *p = text; (p = strstr(p, "{{")) != NULL; p += 2)
        cap += 64;
    char *out = malloc(cap);
    if (!out)
        abort();
    size_t o = 0;
    for (const char *p = text; *p;) {
        if (strncmp(p, "{{BASE}}", 8) == 0) {
            o += (size_t)snprintf(out + o, cap - o, "%s", s->base);
            p += 8;
        } else if (strncmp(p, "{{OTHER}}", 9) == 0) {
            o += (size_t)snprintf(out + o, cap - o, "%s", s->other);
            p += 9;
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
    return out;
}

static char *load_page(const char *name)
{
    const char *src = getenv("APBOT_SRC");
    char path[1024];
    snprintf(path, sizeof(path), "%s/tests/data/pages/%s", src && *src ? src : ".", name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "pagesrv: cannot open %s\n", path);
        abort();
    }
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            buf = realloc(buf, cap);
            if (!buf)
                abort();
        }
        size_t n = fread(buf + len, 1, 4096, f);
        len += n;
        if (n < 4096)
            break;
    }
    fclose(f);
    buf[len] = '\0';
    return buf;
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

static bool wait_readable(struct pagesrv *s, int fd)
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

static const char *ci_find(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++)
        if (strncasecmp(hay, needle, n) == 0)
            return hay;
    return NULL;
}

/* Reads one request; false at EOF or stop. */
static bool read_request(struct pagesrv *s, int fd, struct pagesrv_req *rq)
{
    char buf[PS_HEAD_MAX + 8192];
    size_t len = 0;
    char *end = NULL;
    while (!end) {
        if (len >= PS_HEAD_MAX || !wait_readable(s, fd))
            return false;
        ssize_t n = recv(fd, buf + len, PS_HEAD_MAX - len, 0);
        if (n <= 0)
            return false;
        len += (size_t)n;
        buf[len] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    size_t head_len = (size_t)(end - buf) + 4;
    if (sscanf(buf, "%7s %2047s", rq->method, rq->path) != 2)
        return false;
    end[2] = '\0'; /* the head, for header lookups */
    rq->basic = ci_find(buf, "\r\nAuthorization: Basic ") != NULL;
    size_t clen = 0;
    const char *cl = ci_find(buf, "\r\nContent-Length:");
    if (cl)
        clen = strtoul(cl + 17, NULL, 10);
    if (clen >= sizeof(rq->body))
        return false;
    size_t have = len - head_len;
    if (have > clen)
        have = clen;
    memcpy(rq->body, buf + head_len, have);
    while (have < clen) {
        if (!wait_readable(s, fd))
            return false;
        ssize_t n = recv(fd, rq->body + have, clen - have, 0);
        if (n <= 0)
            return false;
        have += (size_t)n;
    }
    rq->body[clen] = '\0';
    return true;
}

static bool route_matches(const struct route *r, const struct pagesrv_req *rq)
{
    if (strcmp(r->method, "*") != 0 && strcmp(r->method, rq->method) != 0)
        return false;
    if (r->body_has[0] && !strstr(rq->body, r->body_has))
        return false;
    size_t n = strlen(r->path);
    if (n > 0 && r->path[n - 1] == '*')
        return strncmp(rq->path, r->path, n - 1) == 0;
    return strcmp(rq->path, r->path) == 0;
}

static void *conn_main(void *arg)
{
    struct conn_arg *ca = arg;
    struct pagesrv *s = ca->s;
    int fd = ca->fd, conn = ca->conn, on_conn = 0;
    free(ca);
    for (;;) {
        struct pagesrv_req rq;
        memset(&rq, 0, sizeof(rq));
        if (!read_request(s, fd, &rq))
            break;
        rq.conn = conn;
        rq.on_conn = ++on_conn;
        rq.fresh = rq.on_conn == 1;
        struct pagesrv_resp resp = {.status = 404, .body = "<p>no route</p>"};
        char *body = NULL;
        pthread_mutex_lock(&s->lock);
        if (s->n_reqs < PS_MAX_REQS)
            s->reqs[s->n_reqs++] = rq;
        for (size_t i = 0; i < s->n_routes; i++) {
            struct route *r = &s->routes[i];
            if (!route_matches(r, &rq))
                continue;
            size_t k = r->used < r->n ? r->used : r->n - 1;
            r->used++;
            resp = r->resps[k];
            body = strdup(r->bodies[k] ? r->bodies[k] : "");
            break;
        }
        pthread_mutex_unlock(&s->lock);
        if (resp.drop) {
            free(body);
            break;
        }
        const char *b = body ? body : resp.body ? resp.body : "";
        char head[4096];
        int n = snprintf(
            head, sizeof(head),
            "HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s%s\r\n",
            resp.status ? resp.status : 200, resp.type ? resp.type : "text/html; charset=utf-8",
            strlen(b), resp.headers ? resp.headers : "", resp.close ? "Connection: close\r\n" : "");
        send_all(fd, head, (size_t)n);
        if (strcmp(rq.method, "HEAD") != 0)
            send_all(fd, b, strlen(b));
        free(body);
        if (resp.close)
            break;
    }
    close(fd);
    return NULL;
}

static void *accept_main(void *arg)
{
    struct pagesrv *s = arg;
    while (!s->stop) {
        struct pollfd p = {.fd = s->fd, .events = POLLIN};
        if (poll(&p, 1, 20) <= 0)
            continue;
        int fd = accept(s->fd, NULL, NULL);
        if (fd < 0)
            continue;
        pthread_mutex_lock(&s->lock);
        if (s->n_threads >= PS_MAX_CONN) {
            pthread_mutex_unlock(&s->lock);
            close(fd);
            continue;
        }
        struct conn_arg *ca = malloc(sizeof(*ca));
        if (!ca)
            abort();
        ca->s = s;
        ca->fd = fd;
        ca->conn = ++s->n_conn;
        if (pthread_create(&s->threads[s->n_threads], NULL, conn_main, ca) == 0)
            s->n_threads++;
        else
            close(fd);
        pthread_mutex_unlock(&s->lock);
    }
    return NULL;
}

struct pagesrv *pagesrv_start(void)
{
    struct pagesrv *s = calloc(1, sizeof(*s));
    if (!s)
        abort();
    s->reqs = calloc(PS_MAX_REQS, sizeof(*s->reqs));
    if (!s->reqs)
        abort();
    pthread_mutex_init(&s->lock, NULL);
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (s->fd < 0)
        die("socket");
    int one = 1;
    setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s->fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(s->fd, 64) != 0)
        die("bind/listen");
    socklen_t al = sizeof(a);
    getsockname(s->fd, (struct sockaddr *)&a, &al);
    s->port = ntohs(a.sin_port);
    snprintf(s->base, sizeof(s->base), "http://127.0.0.1:%d", s->port);
    /* Another origin: the same host on another port (nothing listens there in a test that
     * expects nothing to be sent). */
    snprintf(s->other, sizeof(s->other), "http://127.0.0.1:%d", s->port == 1 ? 2 : 1);
    if (pthread_create(&s->accept_thread, NULL, accept_main, s) != 0)
        die("pthread_create");
    return s;
}

static void routes_clear(struct pagesrv *s)
{
    for (size_t i = 0; i < s->n_routes; i++)
        for (size_t k = 0; k < s->routes[i].n; k++)
            free(s->routes[i].bodies[k]);
    s->n_routes = 0;
}

void pagesrv_stop(struct pagesrv *s)
{
    if (!s)
        return;
    s->stop = 1;
    pthread_join(s->accept_thread, NULL);
    for (size_t i = 0; i < s->n_threads; i++)
        pthread_join(s->threads[i], NULL);
    close(s->fd);
    routes_clear(s);
    pthread_mutex_destroy(&s->lock);
    free(s->reqs);
    free(s);
}

const char *pagesrv_base(const struct pagesrv *s)
{
    return s->base;
}

void pagesrv_route(struct pagesrv *s, const char *method, const char *path,
                   const struct pagesrv_resp *resps, size_t n)
{
    pagesrv_route_body(s, method, path, NULL, resps, n);
}

void pagesrv_route_body(struct pagesrv *s, const char *method, const char *path,
                        const char *body_has, const struct pagesrv_resp *resps, size_t n)
{
    if (n == 0 || n > PS_MAX_RESPS)
        die("route: 1..8 responses");
    pthread_mutex_lock(&s->lock);
    if (s->n_routes >= PS_MAX_ROUTES)
        die("too many routes");
    struct route *r = &s->routes[s->n_routes++];
    memset(r, 0, sizeof(*r));
    snprintf(r->method, sizeof(r->method), "%s", method);
    snprintf(r->path, sizeof(r->path), "%s", path);
    snprintf(r->body_has, sizeof(r->body_has), "%s", body_has ? body_has : "");
    for (size_t k = 0; k < n; k++) {
        r->resps[k] = resps[k];
        char *raw =
            resps[k].file ? load_page(resps[k].file) : strdup(resps[k].body ? resps[k].body : "");
        if (!raw)
            abort();
        r->bodies[k] = substitute(s, raw);
        free(raw);
        r->resps[k].file = NULL;
        r->resps[k].body = NULL;
    }
    r->n = n;
    pthread_mutex_unlock(&s->lock);
}

void pagesrv_reset(struct pagesrv *s)
{
    pthread_mutex_lock(&s->lock);
    routes_clear(s);
    s->n_reqs = 0;
    pthread_mutex_unlock(&s->lock);
}

int pagesrv_n_requests(struct pagesrv *s)
{
    pthread_mutex_lock(&s->lock);
    int n = s->n_reqs;
    pthread_mutex_unlock(&s->lock);
    return n;
}

bool pagesrv_request(struct pagesrv *s, int i, struct pagesrv_req *ret)
{
    bool ok = false;
    pthread_mutex_lock(&s->lock);
    if (i >= 0 && i < s->n_reqs) {
        *ret = s->reqs[i];
        ok = true;
    }
    pthread_mutex_unlock(&s->lock);
    return ok;
}

int pagesrv_count(struct pagesrv *s, const char *method, const char *prefix)
{
    int n = 0;
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < s->n_reqs; i++)
        if ((strcmp(method, "*") == 0 || strcmp(method, s->reqs[i].method) == 0) &&
            strncmp(s->reqs[i].path, prefix, strlen(prefix)) == 0)
            n++;
    pthread_mutex_unlock(&s->lock);
    return n;
}

bool pagesrv_last(struct pagesrv *s, const char *method, const char *prefix,
                  struct pagesrv_req *ret)
{
    bool ok = false;
    pthread_mutex_lock(&s->lock);
    for (int i = s->n_reqs; i-- > 0;)
        if ((strcmp(method, "*") == 0 || strcmp(method, s->reqs[i].method) == 0) &&
            strncmp(s->reqs[i].path, prefix, strlen(prefix)) == 0) {
            *ret = s->reqs[i];
            ok = true;
            break;
        }
    pthread_mutex_unlock(&s->lock);
    return ok;
}
