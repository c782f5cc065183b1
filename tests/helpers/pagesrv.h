/*
 * pagesrv.h - a tiny HTTP/1.1 server on 127.0.0.1 inside a test that answers canned pages
 * (pages in tests/data/pages, or inline text) per route and per request: the n-th request to a
 * route gets its n-th response, the last one repeats. It records every request (method, path
 * with query, body, Authorization header, which connection it came on and its place there), so
 * a test can see what the driver sent and whether a request rode a reused connection. Bodies
 * may say {{BASE}} (this server's http://127.0.0.1:PORT) and {{OTHER}} (an origin on another
 * port, for off-origin forms). Threads: one to accept, one per connection.
 */
#ifndef APBOT_TESTS_PAGESRV_H
#define APBOT_TESTS_PAGESRV_H

#include <stdbool.h>
#include <stddef.h>

struct pagesrv;

/* One canned answer. */
struct pagesrv_resp {
    int status;          /* 0 = 200 */
    const char *file;    /* a page in tests/data/pages/, or NULL */
    const char *body;    /* inline body when file is NULL (NULL = empty) */
    const char *headers; /* extra header lines, each ending in "\r\n", or NULL */
    const char *type;    /* Content-Type, NULL = text/html; charset=utf-8 */
    bool drop;           /* close the connection without answering */
    bool close;          /* answer, then close the connection */
};

/* One recorded request. */
struct pagesrv_req {
    char method[8];
    char path[2048]; /* with the query */
    char body[8192];
    bool basic;  /* carried an Authorization: Basic header */
    int conn;    /* connection number, from 1 */
    int on_conn; /* its place on that connection, from 1 (1 = a fresh connection) */
    bool fresh;  /* on_conn == 1 */
};

/* Starts a server on an ephemeral loopback port. Aborts the test on failure. */
struct pagesrv *pagesrv_start(void);
/* Stops it (joins every thread). NULL is fine. */
void pagesrv_stop(struct pagesrv *s);
/* "http://127.0.0.1:PORT" (valid while s lives). */
const char *pagesrv_base(const struct pagesrv *s);

/*
 * Adds a route: requests with `method` ("GET", "POST" or "*") whose path equals `path` (the
 * query included; a trailing '*' matches any rest) get resps[0], resps[1], ... in turn, the
 * last one repeating. Routes are tried in the order added. An unrouted request gets 404.
 */
void pagesrv_route(struct pagesrv *s, const char *method, const char *path,
                   const struct pagesrv_resp *resps, size_t n);
/* As pagesrv_route, for requests whose body contains `body_has` (e.g. "action=save"). */
void pagesrv_route_body(struct pagesrv *s, const char *method, const char *path,
                        const char *body_has, const struct pagesrv_resp *resps, size_t n);
/* Forgets every route and recorded request (the connections stay). */
void pagesrv_reset(struct pagesrv *s);

/* Number of requests recorded so far. */
int pagesrv_n_requests(struct pagesrv *s);
/* Copies request i (0-based) into *ret; false when there is no such request. */
bool pagesrv_request(struct pagesrv *s, int i, struct pagesrv_req *ret);
/* Number of recorded requests with method (or "*") whose path starts with prefix. */
int pagesrv_count(struct pagesrv *s, const char *method, const char *prefix);
/* The last recorded request with method whose path starts with prefix; false if none. */
bool pagesrv_last(struct pagesrv *s, const char *method, const char *prefix,
                  struct pagesrv_req *ret);

#endif
