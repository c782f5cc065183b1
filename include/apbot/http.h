/*
 * http.h - one ERP web session over libcurl (OpenSSL): cookies, timeouts, bounded
 * redirects and response size, TLS verification, optional HTTP Basic on every request.
 *
 * Every exchange is classified by what the ERP can have seen:
 *   HTTP_ANSWERED  a complete HTTP response arrived (whatever its status);
 *   HTTP_NOT_SENT  provably never reached the ERP's processing (connect refused or failed,
 *                  name not resolved, TLS handshake refused) - safe to retry;
 *   HTTP_UNKNOWN   the request may have been processed (timeout after connecting, reset,
 *                  empty or truncated reply) - never re-post blind.
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
    long connect_timeout_ms; /* > 0 */
    long timeout_ms;         /* whole exchange, > 0 */
    long max_redirects;      /* >= 0 */
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

struct http_response {
    enum http_transport transport;
    long status; /* 0 unless answered */
    char *body;  /* NUL-terminated, heap; NULL unless answered */
    size_t body_len;
    bool truncated;      /* the response exceeded max_body: the transfer was stopped and
                          * the exchange is HTTP_UNKNOWN (a cut page may hide the banner or
                          * a result row, so it is never a clean answer); body stays NULL */
    char *effective_url; /* after redirects, heap, may be NULL */
    long retry_after_s;  /* Retry-After in seconds, -1 if absent */
    long redirects;      /* redirects followed; > 0 means status and body are the last hop's */
    int64_t elapsed_ms;
    char detail[256]; /* curl's error text or "" */
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

/*
 * GET url, or POST fields as application/x-www-form-urlencoded. Fills *ret (free with
 * http_response_done). Returns APBOT_OK whenever the exchange was classified (even not
 * sent or unknown: read ret->transport); an error only for bad arguments or out of memory.
 * A url that is not an absolute http:// or https:// URL is a bad argument (APBOT_E_INVAL,
 * *ret untouched). POSTs always use a fresh connection that is closed afterwards, so libcurl
 * can never re-send one on its own after a keep-alive connection died.
 */
int http_get(struct http_session *s, const char *url, struct http_response *ret) APBOT_MUST_USE;
int http_post_form(struct http_session *s, const char *url, const struct http_field *fields,
                   size_t n_fields, struct http_response *ret) APBOT_MUST_USE;
void http_response_done(struct http_response *r);

/* Resolves ref (absolute, or relative like "/erp/x" or "x?y") against base. Heap result. */
char *http_resolve_url(const char *base, const char *ref);
/* Percent-encodes s for a query string. Heap result. */
char *http_escape(const char *s);

#endif
