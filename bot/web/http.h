/*
 * http.h - one ERP web session over libcurl (OpenSSL): cookies, timeouts, redirects followed
 * within the ERP's origin only, bounded responses, TLS verification, optional HTTP Basic.
 *
 * The session knows the ERP's origin (scheme, host and port of its base URL) and sends
 * nothing anywhere else: a request for another origin is refused before anything is sent
 * (APBOT_E_ORIGIN), redirects are followed by this module (never by libcurl) only when they
 * stay on the origin, and an https origin never sends a byte over http. So passwords in a
 * form body and the Basic header never leave the origin.
 *
 * Every exchange is classified by what the ERP can have seen:
 *   HTTP_ANSWERED  a complete HTTP response arrived (whatever its status);
 *   HTTP_NOT_SENT  provably never reached the ERP's processing (connect refused or failed,
 *                  name not resolved, TLS handshake refused) - safe to retry;
 *   HTTP_UNKNOWN   the request may have been processed (timeout after connecting, reset,
 *                  empty reply, a body shorter than its Content-Length or cut mid-way, a
 *                  transfer error, too many redirects) - never re-post blind.
 * Exchanges run on a per-session curl multi handle in short poll slices, so a cancel flag
 * (SIGTERM, --max-seconds) interrupts a wait. The module never logs and never stores request
 * bodies: secrets in form fields go to the wire only.
 */
#ifndef APBOT_HTTP_H
#define APBOT_HTTP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "apbot/error.h"

struct http_session;

struct http_options {
    const char *origin;      /* the ERP's base URL (http or https, no user:pass@): its scheme,
                              * host and port are the only ones this session talks to */
    long connect_timeout_ms; /* > 0 */
    long timeout_ms;         /* whole exchange, > 0 */
    long max_redirects;      /* >= 0: same-origin redirects followed per request */
    size_t max_body;         /* response bodies beyond this are cut (truncated = true) */
    bool verify_tls;         /* false only when the flow explicitly opts out */
    const char *ca_file;     /* NULL = system store */
    const char *basic_user;  /* non-NULL: HTTP Basic on every request */
    const char *basic_password;
    const char *user_agent; /* NULL = "apbot/<version>" */
    atomic_int *cancel;     /* non-NULL: a non-zero value aborts the exchange (UNKNOWN,
                             * or NOT_SENT if nothing was sent yet) */
};

enum http_transport {
    HTTP_ANSWERED = 0,
    HTTP_NOT_SENT,
    HTTP_UNKNOWN,
};

struct http_field {
    const char *name;
    const char *value;
};

/* One request. */
struct http_request {
    const char *method;              /* "GET" (also for NULL) or "POST" */
    const char *url;                 /* absolute, on the session's origin */
    const struct http_field *fields; /* POST: the form body, x-www-form-urlencoded (none =
                                      * an empty body); GET: none allowed */
    size_t n_fields;
    const char *body; /* POST instead of fields: these body_len bytes as they are (a
                       * JSON call), sent with content_type; GET: none allowed */
    size_t body_len;
    const char *content_type;         /* with body: its Content-Type ("application/json") */
    const struct http_field *headers; /* request headers besides the session's own (a session
                                       * token, a CSRF token): names are tokens, values carry
                                       * no CR, LF or NUL; Host, Content-Length, Content-Type,
                                       * Transfer-Encoding, Connection, Expect and Cookie are
                                       * the session's and refused here. Sent on every hop,
                                       * like the body only to the origin. */
    size_t n_headers;
    bool fresh;      /* sent once per hop: libcurl may not re-send it on its own after its
                      * (kept-alive) connection died - such a re-send is refused and the exchange
                      * ends unknown (not sent if no byte had left); it rides a kept-alive
                      * connection only if that was idle under 2 s. Every committing exchange
                      * sets it, whatever its method; POSTs always get it. */
    bool reads_only; /* a GET of a page the flow only reads (a lookup, a listing, the page a
                      * step fills in): it changes nothing in the ERP. For the gate below;
                      * anything else may change the ERP (POSTs, submitted forms, logins). */
};

struct http_response {
    enum http_transport transport;
    long status; /* 0 unless answered */
    char *body;  /* NUL-terminated and zero-padded (mem.h), heap; NULL unless answered */
    size_t body_len;
    bool truncated;        /* the response exceeded max_body: the transfer was stopped and
                            * the exchange is HTTP_UNKNOWN (a cut page may hide the banner or
                            * a result row, so it is never a clean answer); body stays NULL */
    char *effective_url;   /* the last hop's URL, heap, may be NULL */
    long retry_after_s;    /* Retry-After in seconds, -1 if absent */
    int64_t date_ms;       /* the answer's Date header: the server's clock when it answered,
                            * Unix ms (whole seconds); 0 if absent or unreadable */
    long redirects;        /* redirects followed; > 0 means status and body are the last hop's */
    long first_status;     /* the first hop's status (= status without redirects); 0 if none */
    char *first_location;  /* the first hop's Location resolved against its URL, heap, when it
                            * was a redirect (followed or not); else NULL */
    bool redirect_blocked; /* a redirect leaving the origin (or unusable) was not followed:
                            * status and body are that 3xx answer's */
    int64_t elapsed_ms;
    char detail[256]; /* curl's error text or "" */
};

/* What a redirect answer makes this module do (http_redirect_decide). */
enum http_redirect {
    HTTP_REDIRECT_NONE = 0, /* not a redirect: the answer stands */
    HTTP_REDIRECT_GET,      /* 301/302/303 on the origin: follow with a body-less GET */
    HTTP_REDIRECT_SAME,     /* 307/308 on the origin: follow with the same method and body */
    HTTP_REDIRECT_BLOCKED,  /* a redirect off the origin or to no usable URL: not followed,
                             * the 3xx is the answer */
};

/* Returns "answered" / "not-sent" / "unknown". */
const char *http_transport_name(enum http_transport t);

/* Process-wide libcurl init/cleanup; call once from main or a test. */
int http_global_init(void) APBOT_MUST_USE;
void http_global_cleanup(void);

/* Opens a session (cookie engine on, empty jar). Copies what it needs from opt. */
int http_session_new(const struct http_options *opt, struct http_session **ret, char *err,
                     size_t errlen) APBOT_MUST_USE;
/* NULL is fine. */
void http_session_free(struct http_session *s);
/* Forgets every cookie (a fresh login follows). */
void http_session_clear_cookies(struct http_session *s);
/* The value of the session's cookie `name` (the ERP's origin is its only host), heap; NULL when
 * the jar holds none. A double-submit CSRF token is read this way. */
char *http_session_cookie(struct http_session *s, const char *name);
/* True when name: value may go into a request's headers (see struct http_request). Pure. */
bool http_header_ok(const char *name, const char *value);

/*
 * A gate every exchange passes before anything of it is sent: fn sees the request and
 * returns false to keep it back - the exchange is then HTTP_NOT_SENT with fn's reason
 * (written into why, at most whylen bytes) as its detail. It runs once per exchange, before
 * the first hop (the redirects it follows are the same exchange). The runner makes its
 * queue's deferred writes durable here before any request that may change the ERP: nothing
 * that could book goes out while a state change before it is not on disk. fn NULL removes
 * the gate.
 */
typedef bool (*http_gate_fn)(void *ctx, const struct http_request *req, char *why, size_t whylen);
void http_set_gate(struct http_session *s, http_gate_fn fn, void *ctx);

/*
 * Sends req and follows same-origin redirects (at most max_redirects; more is HTTP_UNKNOWN).
 * Fills *ret (free with http_response_done). Returns APBOT_OK whenever the exchange was
 * classified (even not sent or unknown: read ret->transport); otherwise nothing was sent and
 * *ret is untouched: APBOT_E_INVAL for bad arguments (a url that is not an absolute http:// or
 * https:// URL, carries user:pass@, a method other than GET/POST, fields or a body on a GET,
 * both fields and a body, a header refused above), APBOT_E_ORIGIN for a url off the session's
 * origin.
 */
int http_request(struct http_session *s, const struct http_request *req,
                 struct http_response *ret) APBOT_MUST_USE;
/* http_request GET url, not fresh. */
int http_get(struct http_session *s, const char *url, struct http_response *ret) APBOT_MUST_USE;
/* http_request POST fields to url (fresh, as every POST). */
int http_post_form(struct http_session *s, const char *url, const struct http_field *fields,
                   size_t n_fields, struct http_response *ret) APBOT_MUST_USE;
void http_response_done(struct http_response *r);

/* Resolves ref (absolute, or relative like "/erp/x" or "x?y") against base. Heap result. */
char *http_resolve_url(const char *base, const char *ref);
/* Percent-encodes s for a query string. Heap result. */
char *http_escape(const char *s);

/* True when a and b are absolute http(s) URLs of one origin: same scheme, host (any case)
 * and port (the scheme's default when absent), neither with user:pass@. Pure. */
bool http_same_origin(const char *a, const char *b);

#ifdef APBOT_UNITTEST /* static in the product (base/unittest.h) */
/* The value of a Date header (an HTTP-date, blanks around it allowed) as Unix ms; 0 when it
 * cannot be read, is before 1970 or is 128 bytes or longer. An IMF-fixdate ("Sun, 06 Nov 1994
 * 08:49:37 GMT", what RFC 9110 has servers send) is read here, anything else by libcurl's
 * curl_getdate, with the same result (test_http compares them). Pure. */
int64_t http_date_ms(const char *v, size_t len);
/* True when url is "plain" (web/http.c, struct http_plain), a shape that
 * http_same_origin, http_request and http_resolve_url answer without libcurl's URL parser.
 * Against a plain base, http_resolve_url also resolves a reference "/p" (not "//...")
 * without it when "http://h" followed by "/p" is plain. Pure. */
bool http_url_is_plain(const char *url);
/* What to do with an answer of `status` whose Location, resolved, is `location` (NULL when
 * absent or unresolvable), for a session on `origin`. 300, 304 and other 3xx without a
 * Location are no redirects. Pure. */
enum http_redirect http_redirect_decide(const char *origin, long status, const char *location);
#endif

#endif
