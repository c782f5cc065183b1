/*
 * serve.h - the review page: a small web server (libmicrohttpd) over the queue database, for
 * the people who work the manual queue each morning.
 *
 * Pages (plain HTML, no script, printable): Today (counts, balance in items and money, the
 * day's chart, the last run), the review queue (manual review, business exceptions; filters
 * by vendor and reason; the order of `apbot review`), one item (the invoice, its timeline,
 * every ERP exchange as text, and the decision forms), and the daily report for a chosen date
 * (what `apbot report --format html` writes); and GET /metrics, the queue's figures for
 * Prometheus (OpenMetrics). Decisions go through the review module exactly as `apbot resolve`
 * does: a posted document is verified in the ERP first, a note is required, every decision is
 * one audit event naming the signed-in person and how they signed in, and a decision taken on
 * a page of an item that has changed since is refused.
 *
 * Who may do what (serve_auth.c): with a reviewers file (reviewers.h) each person signs in on
 * the page with their own password, or a company's login proxy vouches for them in a header
 * (believed only from the trusted proxies' addresses); viewers see everything and decide
 * nothing, reviewers decide. With APBOT_REVIEW_PASSWORD and no reviewers file, a name and the
 * one shared password sign in (the audit says the name was typed). With neither, on loopback
 * only, the pages are read-only. Sessions live on the server behind an HttpOnly,
 * SameSite=Strict cookie (Secure over TLS), made anew at sign-in, ended at sign-out, after an
 * idle and an absolute time limit; failed sign-ins are throttled per name and per address.
 *
 * It runs beside `apbot run` on the same database: every request opens its own connection and
 * holds no lock longer than one store transaction. Only the posted-as-DOC check and the ERP
 * half of the report need the ERP; everything else keeps working while the ERP is down.
 *
 * Safe by default: it binds 127.0.0.1; an address that is not loopback is refused unless a
 * reviewers file or a password (APBOT_REVIEW_PASSWORD) says who may sign in. With a
 * certificate and its key it serves https itself (libmicrohttpd's TLS, TLS 1.2 and 1.3 only).
 * On loopback the Host header must name the loopback address (no DNS rebinding). Every POST
 * carries a CSRF token (an HMAC, under a key made at start, of the session's id or the
 * visitor's cookie and of who is signed in) and must come from the page's own origin. Every
 * answer forbids framing, script and caching of pages; every value from an invoice or the ERP
 * is a text node or an attribute escaped by libxml2's serialiser; secrets never reach a page.
 */
#ifndef APBOT_SERVE_H
#define APBOT_SERVE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "apbot/error.h"

struct flow;

#define SERVE_DEFAULT_LISTEN "127.0.0.1:8470"
#define SERVE_PASSWORD_MIN 12              /* bytes of APBOT_REVIEW_PASSWORD at least */
#define SERVE_PROXY_HEADER "X-Remote-User" /* the login proxy's header, unless told otherwise */
#define SERVE_SESSION_IDLE_S (30 * 60)     /* a session ends after this long unused */
#define SERVE_SESSION_MAX_S (10 * 3600)    /* and this long after sign-in, whatever */

/* Where to listen, parsed. */
struct serve_addr {
    char host[64];       /* the address as given, without brackets ("127.0.0.1", "::1") */
    unsigned short port; /* 0: any free port */
    bool ipv6;
    bool loopback; /* 127.0.0.0/8 or ::1 */
};

/*
 * Parses "HOST:PORT" (HOST an IPv4 address, "[IPv6]" or "localhost"; PORT 0..65535; ":PORT"
 * alone means 127.0.0.1). Pure. APBOT_E_INVAL with a reason for anything else (names other
 * than localhost are refused: the page binds to an address, not to what DNS says).
 */
int serve_parse_listen(const char *listen, struct serve_addr *ret, char *err,
                       size_t errlen) APBOT_MUST_USE;

/*
 * Pure: may the page listen on a? A loopback address always; another only when people must
 * sign in: with a reviewers file, or a password of at least SERVE_PASSWORD_MIN bytes.
 * APBOT_E_INVAL with a reason otherwise.
 */
int serve_exposure_ok(const struct serve_addr *a, bool reviewers, const char *password, char *err,
                      size_t errlen) APBOT_MUST_USE;

struct serve_options {
    const char *db_path;         /* the queue database (must exist) */
    const struct flow *flow;     /* loaded by the caller; outlives the server */
    const char *erp_url;         /* overrides the flow's base URL when non-NULL */
    const char *listen;          /* NULL: SERVE_DEFAULT_LISTEN */
    const char *password;        /* APBOT_REVIEW_PASSWORD, or NULL (unused with reviewers_path) */
    const char *reviewers_path;  /* the reviewers file (reviewers.h), or NULL */
    const char *trusted_proxies; /* IP addresses whose proxy header is believed, comma-separated,
                                  * or NULL (needs reviewers_path) */
    const char *proxy_header;    /* NULL: SERVE_PROXY_HEADER */
    int session_idle_s;          /* 0: SERVE_SESSION_IDLE_S */
    int session_max_s;           /* 0: SERVE_SESSION_MAX_S */
    const char *tls_cert_path;   /* PEM certificate (chain) to serve https with, or NULL */
    const char *tls_key_path;    /* its unencrypted PEM key, readable by the owner only */
    atomic_int *stop;            /* the server returns once this is non-zero */
    FILE *announce;              /* gets "listening on http://HOST:PORT\n" (flushed); may be NULL */
    FILE *log;     /* one line per decision, sign-in and refusal (escaped); may be NULL */
    bool log_json; /* those lines as JSON objects {"time":...,"level":...,"msg":...} */
};

/*
 * Serves until *opt->stop becomes non-zero. Needs http_global_init() (for the ERP). Returns
 * APBOT_OK after a clean stop; APBOT_E_INVAL for a bad or unsafe listen address or options that
 * do not go together (nothing is bound), APBOT_E_IO when the address cannot be bound or a file
 * (the reviewers file, the certificate, its key) cannot be used. Detail in err.
 */
int serve_run(const struct serve_options *opt, char *err, size_t errlen) APBOT_MUST_USE;

#endif
