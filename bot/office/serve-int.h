/*
 * serve-int.h - the inside of the review page (serve.h), shared by its files:
 *   serve.c         the server: libmicrohttpd, the guards (Host, method, size, origin, CSRF,
 *                   who may do what), the answer's headers, dispatch;
 *   serve_auth.c    who is asking: sign-in and sign-out, sessions, the throttle on failed
 *                   sign-ins, the login proxy's header, the reviewers file read again;
 *   serve_tls.c     the certificate and key of --tls-cert/--tls-key, read and checked;
 *   serve_page.c    the frame every page is built in, banners, short pages, the style sheet;
 *   serve_today.c   Today (GET /);
 *   serve_queue.c   the review queue (GET /queue);
 *   serve_item.c    one item (GET /item/ID) and deciding (POST /item/ID/decide);
 *   serve_report.c  the daily report (GET /report);
 *   serve_metrics.c the queue's figures for Prometheus (GET /metrics).
 * A page reads its request's arguments, loads what it shows from the queue (and the ERP),
 * then builds the HTML; each in functions of their own. Every text on a page goes through
 * html.h's cleaned variants.
 */
#ifndef APBOT_OFFICE_SERVE_INT_H
#define APBOT_OFFICE_SERVE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

#include "apbot/review.h"
#include "apbot/reviewers.h"
#include "apbot/serve.h"
#include "apbot/store.h"
#include "base/metrics.h"
#include "office/html.h"

struct store;
struct serve_auth; /* sessions, throttles, the reviewers file as read (serve_auth.c) */

/* Who may sign in (serve_auth.c). */
enum serve_mode {
    SERVE_MODE_OPEN = 0, /* no reviewers file, no password (loopback only): read-only for all */
    SERVE_MODE_SHARED,   /* APBOT_REVIEW_PASSWORD: a name as typed and the one shared password */
    SERVE_MODE_REVIEWERS /* the reviewers file: own passwords and roles, and the login proxy */
};

/* Who is asking, once serve_auth_identify has run. */
struct serve_who {
    bool known; /* signed in, or vouched for by a trusted login proxy */
    char login[REVIEW_NAME_MAX + 1];
    char display[REVIEWERS_DISPLAY_MAX + 1];
    enum reviewers_role role;
    enum review_auth how; /* password, proxy or shared password */
};

/* An IP address as the trusted-proxy list compares it (IPv4-mapped IPv6 as IPv4). */
struct serve_ip {
    int family; /* AF_INET or AF_INET6 */
    unsigned char a[16];
};

#define SERVE_PROXIES_MAX 16
struct serve_proxies {
    size_t n;
    struct serve_ip v[SERVE_PROXIES_MAX];
};

/* The server: made by serve_run, read by every request. */
struct serve_server {
    const struct serve_options *opt;
    struct serve_addr addr;
    unsigned short port;   /* the bound port */
    unsigned char key[32]; /* signs visitors' cookies and CSRF tokens; made at start */
    char *erp_user, *erp_password;
    enum serve_mode mode;
    struct serve_proxies proxies; /* --trusted-proxy */
    bool tls;                     /* served over TLS here */
    char *tls_cert, *tls_key;     /* PEM, for libmicrohttpd (the key wiped at the end) */
    char tls_what[320];           /* the certificate's subject and end, for the log */
    struct serve_auth *auth;
};

#define SERVE_SID_LEN 65 /* a cookie's value: a visitor's RANDOM.MAC or a session's 64 hex */

/* What the answer does with the session cookie. */
enum serve_session_cookie {
    SERVE_SESSION_COOKIE_KEEP = 0, /* nothing */
    SERVE_SESSION_COOKIE_SET,      /* a new session: c->sid */
    SERVE_SESSION_COOKIE_CLEAR     /* signed out, or a session that ended: dropped */
};

/* What a page needs to know of its request. Two cookies: the visitor's (signed, nothing kept on
 * the server; the anchor of the sign-in form's token) and the session's, set at sign-in only,
 * so that an answer to a request that came without cookies (SameSite=Strict, from another
 * site) never overwrites a session. */
struct serve_ctx {
    struct serve_server *s;
    struct MHD_Connection *conn;
    char sid[SERVE_SID_LEN + 1];     /* the CSRF token's anchor: the session's id when signed in
                                      * by a session, else the visitor's cookie */
    char visitor[SERVE_SID_LEN + 1]; /* the visitor's cookie */
    bool new_visitor;                /* the answer sets the visitor's cookie */
    bool new_anchor;                 /* the anchor was made for this request: no form had it */
    enum serve_session_cookie session_cookie;
    char csrf[65]; /* the token for this anchor's forms (bound to who) */
    struct serve_who who;
    char client[64];         /* the client's address (behind a trusted proxy: its client's) */
    bool from_proxy;         /* the peer is a trusted proxy */
    bool secure;             /* https: TLS here, or the trusted proxy says so */
    bool proxy_unknown;      /* the trusted proxy names someone not in the reviewers file */
    char proxy_user[65];     /* whom, for the refusal */
    const char *retry_after; /* the answer carries Retry-After: this many seconds */
    bool basic_challenge;    /* a 401 that asks for HTTP Basic (a scraper's) */
    int64_t now;
};

/* ---- the answer (serve.c) --------------------------------------------------------------- */

/* Answers with len bytes of data of this Content-Type, under the safe headers (CSP, no
 * framing, no sniffing; no caching unless cacheable) and the cookie the request set. */
enum MHD_Result serve_send(struct serve_ctx *c, int status, const char *type, const void *data,
                           size_t len, bool cacheable);
/* 303 See Other to location (a path of this page), with the cookie the request set. */
enum MHD_Result serve_redirect(struct serve_ctx *c, const char *location);

/* ---- TLS (serve_tls.c) ------------------------------------------------------------------ */

/* With --tls-cert and --tls-key: reads both (the key under the rule of secret files), checks
 * they are PEM and belong together, sets s->tls. APBOT_OK without them; APBOT_E_INVAL for one
 * without the other; APBOT_E_IO naming the file and why. */
int serve_tls_load(struct serve_server *s, char *err, size_t errlen);
/* Wipes the key and frees both. */
void serve_tls_free(struct serve_server *s);

/* ---- who is asking (serve_auth.c) ------------------------------------------------------- */

/* What a request asks for, as far as who may ask it. */
enum serve_route {
    SERVE_ROUTE_ASSET,   /* GET /app.css */
    SERVE_ROUTE_LOGIN,   /* GET or POST /login */
    SERVE_ROUTE_LOGOUT,  /* POST /logout */
    SERVE_ROUTE_VIEW,    /* GET of a page */
    SERVE_ROUTE_DECIDE,  /* POST /item/ID/decide */
    SERVE_ROUTE_METRICS, /* GET /metrics: a scraper, not a browser */
};
enum serve_access {
    SERVE_ALLOW,
    SERVE_SIGN_IN,     /* a page: to the sign-in page first */
    SERVE_CREDENTIALS, /* a scraper: a login's name and password by HTTP Basic, else 401 */
    SERVE_FORBIDDEN    /* 403, logged */
};

/* The state of a session (serve_session_check). */
enum serve_session_state { SERVE_SESSION_LIVE, SERVE_SESSION_IDLE, SERVE_SESSION_EXPIRED };

/* Failed sign-ins of one name or address, counted in a window that starts at the first. */
struct serve_throttle {
    int64_t since; /* CLOCK_BOOTTIME ms */
    unsigned failures;
};

/* Pure: may someone (known: signed in, or vouched for; role) in this mode ask for this? A
 * page needs someone signed in wherever people sign in; a decision, a reviewer. */
enum serve_access serve_access_decide(enum serve_mode mode, bool known, enum reviewers_role role,
                                      enum serve_route route);

/* Reads the reviewers file (the reviewers mode), the trusted proxies, the limits; APBOT_E_INVAL
 * for options that do not go together, APBOT_E_IO when the reviewers file cannot be read (or
 * is refused: its mode, a line), with why in err. */
int serve_auth_start(struct serve_server *s, char *err, size_t errlen);
void serve_auth_stop(struct serve_server *s);
/* Who asks (c->who), from a trusted proxy's header or the session behind the cookie; the
 * cookie (a new visitor's when it holds none that is valid) and its CSRF token. */
void serve_auth_identify(struct serve_ctx *c);
/* A scraper's HTTP Basic credentials (/metrics), checked as a sign-in is (the reviewers file or
 * the shared password, the same throttle, failures logged), without a session: true when they
 * name someone, who c->who then is. */
bool serve_auth_basic(struct serve_ctx *c);
/* May c's person decide? */
bool serve_may_decide(const struct serve_ctx *c);
/* Is token the CSRF token of c's cookie (constant time)? */
bool serve_csrf_ok(const struct serve_ctx *c, const char *token);
/* The Set-Cookie values the answer to c carries (Secure over https): 0, 1 or 2 of them. */
int serve_cookies(const struct serve_ctx *c, char out[2][256]);
/* GET /login, POST /login (its body), POST /logout (its body). */
enum MHD_Result serve_login_get(struct serve_ctx *c);
enum MHD_Result serve_login_post(struct serve_ctx *c, const char *body);
enum MHD_Result serve_logout(struct serve_ctx *c, const char *body);
/* The "signed in as" part of every page's header, with the sign-out button. */
void serve_auth_header(struct serve_ctx *c, xmlNodePtr header);
/* One line on the log at level ("info", "warn", "error"): "apbot serve: " and the text,
 * escaped, or with log_json the JSON object {"time","level","msg"} (no password ever goes in). */
void serve_log(struct serve_ctx *c, const char *level, const char *fmt, ...) APBOT_PRINTF(3, 4);
/* Parses --trusted-proxy's list of IP addresses (comma-separated; NULL or "" is none). */
int serve_parse_proxies(const char *list, struct serve_proxies *ret, char *err,
                        size_t errlen) APBOT_MUST_USE;

/* ---- the frame (serve_page.c) ----------------------------------------------------------- */

/* A page being built: its document, <body> and <main>, and the status it is sent with. */
struct serve_page {
    struct html_doc doc;
    xmlNodePtr body, main;
    int status;
};

/* Starts a page: head, header and navigation (active: the id of the tab to mark, or NULL). */
void serve_page_start(struct serve_page *p, struct serve_ctx *c, const char *title,
                      const char *active);
/* Adds the footer, sends the page and frees it. */
enum MHD_Result serve_page_send(struct serve_ctx *c, struct serve_page *p);
/* A banner: cls "ok", "refused" or "warn"; id may be NULL. */
xmlNodePtr serve_banner(xmlNodePtr parent, const char *cls, const char *id, const char *t);
/* A short page that says one thing (errors, refusals). */
enum MHD_Result serve_simple_page(struct serve_ctx *c, int status, const char *title,
                                  const char *what);
/* A link. */
xmlNodePtr serve_link(xmlNodePtr parent, const char *href, const char *cls, const char *t);
/* A hidden field of a form. */
void serve_hidden(xmlNodePtr form, const char *name, const char *value);

/* A posted x-www-form-urlencoded body, decoded (serve_page.c). */
#define SERVE_FIELDS_MAX 32 /* fields of one form; the rest are ignored */
struct serve_form {
    char *names[SERVE_FIELDS_MAX], *values[SERVE_FIELDS_MAX];
    size_t n;
};
void serve_form_parse(struct serve_form *f, const char *body);
/* The first value of field name, or NULL. */
const char *serve_form_get(const struct serve_form *f, const char *name);
/* Wipes (a password may be among the values) and frees. */
void serve_form_done(struct serve_form *f);
/* Every occurrence of the ERP user or password replaced by "***" (heap). */
char *serve_mask(const struct serve_server *s, const char *text);
/* The queue, opened for this request (close with store_close); NULL with why in err. */
struct store *serve_store_open(struct serve_ctx *c, char *err, size_t errlen);
/* The page for a queue that could not be read. */
enum MHD_Result serve_store_failed(struct serve_ctx *c, const char *err);
/* GET /app.css: the report's style sheet and the review page's. */
enum MHD_Result serve_send_css(struct serve_ctx *c);

/* ---- the pages -------------------------------------------------------------------------- */

enum MHD_Result serve_today(struct serve_ctx *c);            /* GET / (serve_today.c) */
enum MHD_Result serve_queue(struct serve_ctx *c);            /* GET /queue (serve_queue.c) */
enum MHD_Result serve_item(struct serve_ctx *c, int64_t id); /* GET /item/ID (serve_item.c) */
/* POST /item/ID/decide with its x-www-form-urlencoded body (serve_item.c) */
enum MHD_Result serve_decide(struct serve_ctx *c, int64_t id, const char *body);
enum MHD_Result serve_report(struct serve_ctx *c);  /* GET /report (serve_report.c) */
enum MHD_Result serve_metrics(struct serve_ctx *c); /* GET /metrics (serve_metrics.c) */

#define SERVE_METRICS_SUMS 192 /* final states x currencies a day may show */

/* What GET /metrics shows, read from the queue. */
struct serve_metrics_figs {
    int64_t now_ms;
    struct store_counts counts;
    struct store_final_sum sums[SERVE_METRICS_SUMS]; /* today's, store_final_sums */
    size_t n_sums;
    bool settle_known; /* with a flow: the two below */
    int64_t settle_ms, max_late_ms;
};

#ifdef APBOT_UNITTEST /* static in the product (base/unittest.h) */
/* Pure: does a request's Host header name the address a listens on (port = the bound port)?
 * Only checked on loopback, where it is what keeps a rebinding DNS name out. */
bool serve_host_ok(const char *host_header, const struct serve_addr *a, unsigned short port);

/* Pure: is a POST's Origin (or, without one, its Referer) the page's own origin
 * "SCHEME://HOST"? A request without either is accepted (the CSRF token still guards it). */
bool serve_origin_ok(const char *origin, const char *referer, const char *scheme,
                     const char *host_header);

/* Pure (serve_auth.c): the state of a session created and last seen at these times
 * (CLOCK_BOOTTIME ms), under the idle and absolute limits. */
enum serve_session_state serve_session_check(int64_t now, int64_t created, int64_t seen,
                                             int64_t idle_ms, int64_t max_ms);

/* Pure: 0 when another sign-in may be tried now, else the ms until it may. */
int64_t serve_throttle_wait(const struct serve_throttle *t, int64_t now, unsigned max,
                            int64_t window_ms);
/* Counts a failure (a window that has passed starts again). */
void serve_throttle_fail(struct serve_throttle *t, int64_t now, int64_t window_ms);

/* Pure: the page to return to after sign-in: next when it is a path of this page, else "/"
 * (never another site: "//host", "/\host", nor the sign-in page itself). */
const char *serve_next_path(const char *next);
/* Pure: is ip one of list? */
bool serve_ip_listed(const struct serve_proxies *list, const struct serve_ip *ip);
/* Pure: the client a trusted proxy forwards for, into ret: the last address of X-Forwarded-For
 * (the one our proxy added) or, while that one is itself a trusted proxy (chained proxies),
 * the one before it; false when the address to take does not parse. */
bool serve_forwarded_client(const char *xff, const struct serve_proxies *trusted, char *ret,
                            size_t len);
/* Pure: the hash an unknown name is checked against: the first reviewer's with a password,
 * else dummy (a sign-in for a name that does not exist costs what one that does costs). */
const char *serve_decoy_hash(const struct reviewers *rv, const char *dummy);
/* Pure: may name be a header's name (1..64 of letters, digits, - _)? */
bool serve_header_name_ok(const char *name);
/* Pure: the user and password of an Authorization header's HTTP Basic credentials, into user
 * and pw (cut nowhere: false when they do not fit, when it is not Basic, not base64, holds a
 * NUL or no colon). */
bool serve_basic_parse(const char *authorization, char *user, size_t ulen, char *pw, size_t pwlen);

/* Pure: the exposition format an Accept header asks for: OpenMetrics unless it names
 * text/plain and not application/openmetrics-text. */
enum metrics_format serve_metrics_format(const char *accept);
/* Pure: the exposition of f in fmt, appended to out; the writer's result. */
int serve_metrics_render(const struct serve_metrics_figs *f, enum metrics_format fmt,
                         struct apbot_buf *out);
#endif

#endif
