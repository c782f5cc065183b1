/*
 * erp-int.h - what the parts of the ERP driver share, and nothing else includes.
 *
 * erp.c holds the session (credentials, the http session, the login, fetching a screen with
 * bounded re-logins) and the reporting of exchanges (evidence and trace, secrets masked);
 * erp_lookup.c reads result tables (lookup with pages and detail pages, listings);
 * erp_post.c drives the steps of a post; erp_resolve.c turns codes into the ERP's ids. An
 * answer is read through one struct erp_view: the blanked text every pattern sees
 * (page_rule_text), the JSON every pointer reads (web/jdoc), and one match budget for all.
 * A request the flow composes (<send>) is built by erp_send_prepare and goes out through
 * erp_request, which adds the session's headers (<header>) once the login made them.
 */
#ifndef APBOT_ERP_INT_H
#define APBOT_ERP_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "apbot/erp.h"
#include "apbot/flow.h"
#include "web/http.h"
#include "web/match.h"

struct flow_rule;
struct flow_marker;
struct flow_send;
struct flow_vars;
struct flow_capture;
struct http_field;
struct http_request;
struct http_response;
struct jdoc;
struct json_t;
struct page;
struct erp_refs;
struct flow_table;
struct flow_column;

#define ERP_SECRETS_MAX 16 /* secret values a session masks besides the user and password */

struct erp_session {
    const struct flow *flow;
    struct http_session *http;
    char *base_url;
    char *user;     /* secret: wiped on close, masked in every output */
    char *password; /* secret */
    bool logged_in;
    bool refused; /* the last erp_login was refused (credentials): see erp_login_refused */
    int retries;  /* extra tries of a transiently failed GET */
    atomic_int *cancel;
    erp_evidence_fn evidence;
    void *evidence_ctx;
    erp_trace_fn trace;
    void *trace_ctx;
    erp_gate_fn gate; /* erp_set_gate: before every request that may change the ERP */
    void *gate_ctx;
    /* ${session.NAME}: what the login and its <then> calls captured (values heap, secret
     * ones wiped) */
    char **sess_names, **sess_values;
    size_t n_sess;
    /* the flow's <header>s as composed from them, sent on every request after the login */
    struct http_field *headers;
    size_t n_headers;
    /* values masked wherever the session reports, besides the user and password: secret
     * captures and the headers made of them (borrowed from sess_values and headers) */
    const char *secrets[ERP_SECRETS_MAX];
    size_t n_secrets;
    char *cookie_tmp[4]; /* cookies handed to the last expansion (borrowed until the next) */
    size_t n_cookie_tmp;
    struct erp_refs *refs; /* the resolve cache: the run's (erp_set_refs) or the session's */
    bool own_refs;
};

/* ---- reading one answer ------------------------------------------------------------------ */

/* One answer as the patterns see it. Set up with erp_view_init, free with erp_view_done. */
struct erp_view {
    const struct http_response *r;
    char *blank; /* page_rule_text of the body, made when a pattern first needs it */
    struct match_budget budget;
    bool aborted;          /* a pattern stopped before deciding */
    char aborted_what[96]; /* which ("rule NAME", "session marker (flow line N)", ...) */
    struct jdoc *json;     /* the body read as JSON, when a pointer first needs it */
    bool json_tried;       /* ... tried once: json NULL then means "not JSON" */
    char json_why[160];    /* why it is not JSON */
};

void erp_view_init(struct erp_view *v, const struct erp_session *s, const struct http_response *r);
void erp_view_done(struct erp_view *v);

/* Runs re on the answer's body (raw or blanked) under the view's budget. An abort is recorded
 * in the view under `what`. *ret_m as match_run. */
enum match_outcome erp_view_body(struct erp_view *v, const struct match_re *re, bool raw,
                                 const char *what, struct match_result **ret_m);

/*
 * The first rule of rules[0..n) whose every condition matches (status on the final answer,
 * url on the final URL, the body pattern), with its groups in *ret_m (may be NULL on return;
 * free with match_result_free). NULL when none matched or a pattern aborted (then v->aborted:
 * an earlier rule that could not be decided must not be overtaken by a later one).
 */
const struct flow_rule *erp_view_rules(struct erp_view *v, const struct flow_rule *rules, size_t n,
                                       struct match_result **ret_m);
/* The same for a page that lacks the step's form, a control or its button (`missing`, one of
 * FLOW_WHEN_MISSING_FORM, _CONTROL, _BUTTON): the rules without when-missing and those whose
 * when-missing is that kind or "any". erp_view_rules skips when-missing rules: an answer lacks
 * nothing. */
const struct flow_rule *erp_view_rules_missing(struct erp_view *v, const struct flow_rule *rules,
                                               size_t n, enum flow_when missing,
                                               struct match_result **ret_m);

/* True when one of the flow's session markers matches the answer (status on the first hop or
 * the final answer, redirect on the first hop's Location, body pattern). A pattern that
 * aborts is recorded in the view and does not count as a match. */
bool erp_view_session_gone(struct erp_view *v, const struct flow *f);

/* The answer's body as JSON (under the session's body bound and web/jdoc's limits), or NULL
 * when it is not JSON (v->json_why says why): parsed once per view. */
const struct json_t *erp_view_json(struct erp_view *v);

/*
 * A capture's value from the answer: the text at its JSON pointer (NULL or an absent value:
 * nothing), narrowed by its pattern's group of its name when it has one; or its pattern's
 * group on the body. Heap, NULL when it found nothing or a pattern aborted (recorded).
 */
char *erp_view_capture(struct erp_view *v, const struct flow_capture *c);

/* ---- reporting exchanges ----------------------------------------------------------------- */

/* One submitted control, for a trace (owned copies). */
struct erp_xctl {
    char *name;
    char *value;
    char *source;
};

/* One exchange, ready to report to the evidence and trace callbacks: every string an owned,
 * secret-masked copy. Zero-initialise; erp_xch_done frees it. */
struct erp_xch {
    char step[64];
    const char *method; /* static */
    char *url;
    long status;
    int64_t elapsed_ms;
    char transport[320];
    long redirects;
    char *first_location;
    char *excerpt;
    char *form;
    char *body; /* a composed request's body (masked), for a trace */
    struct erp_xctl *controls;
    size_t n_controls, cap_controls;
    char *rule;
    char outcome[48];
    char *why;
    char **cap_names, **cap_values;
    size_t n_captured;
    bool trace_only; /* nothing was exchanged (a step skipped): a trace shows it, no evidence */
};

/* Fills x from an exchange: the step, method, URL, transport and, when the answer was read,
 * status, redirects and an excerpt of page p (or of the raw body when p is NULL). r may be
 * NULL (nothing was sent: transport "not-sent: <detail>"). */
void erp_xch_begin(const struct erp_session *s, struct erp_xch *x, const char *step,
                   const char *method, const char *url, const struct http_response *r,
                   const struct page *p, const char *not_sent_detail);
void erp_xch_outcome(const struct erp_session *s, struct erp_xch *x, const char *outcome,
                     const char *rule, const char *why);
void erp_xch_control(const struct erp_session *s, struct erp_xch *x, const char *name,
                     const char *value, const char *source);
/* Keeps a masked copy of a composed request's body in x, when the session is traced. */
void erp_xch_body(const struct erp_session *s, struct erp_xch *x, const char *body);
void erp_xch_capture(const struct erp_session *s, struct erp_xch *x, const char *name,
                     const char *value);
/* Hands x to the evidence callback and to trace_fn (NULL: the session's trace callback). */
void erp_xch_report(const struct erp_session *s, const struct erp_xch *x, erp_trace_fn trace_fn,
                    void *trace_ctx);
void erp_xch_done(struct erp_xch *x);

/* Copies s with the session's user name and password replaced by "***". Heap; NULL for NULL. */
char *erp_mask(const struct erp_session *s, const char *text);
/* Masks the secrets inside buf (capacity len) in place. */
void erp_mask_into(const struct erp_session *s, char *buf, size_t len);

/* snprintf(dst, cap, "%s", s) without printf's machinery (cap > 0): s cut to cap - 1 bytes. */
void erp_text_copy(char *dst, size_t cap, const char *s);
/* Appends at most max bytes of s (SIZE_MAX: all of it) to the text dst[0..*at) of capacity cap
 * (*at < cap), as snprintf's "%.*s" would continue it: cut at cap - 1, NUL-terminated, *at
 * moved past what was written. */
void erp_text_put(char *dst, size_t cap, size_t *at, const char *s, size_t max);

/* ---- composing requests ------------------------------------------------------------------ */

/* The template values every request of the session may use: ${session.*}, ${cookie.*} (the
 * find callback, ctx the session), the secrets only when with_secrets (the login's own
 * requests and the headers). Other fields of *v are left as they are. */
void erp_vars_session(struct erp_session *s, struct flow_vars *v, bool with_secrets);
/* The find callback erp_vars_session installs: cookie.NAME from the session's jar. */
const char *erp_find_cookie(void *ctx, const char *var, size_t len, size_t line_n);

/* A <send> made ready to go: the request and what it owns. */
struct erp_send {
    struct http_request req;
    char *url;  /* expanded and resolved, heap */
    char *body; /* the JSON body, heap (wiped: it may carry a password), or NULL */
    size_t body_len;
    struct http_field *fields; /* form fields, values heap */
    size_t n_fields;
};

/*
 * Expands send's URL and body with vars into *ret (erp_send_done frees it). reads_only marks a
 * request that changes nothing (a search) for the gate. Returns APBOT_OK, APBOT_E_DATA (the
 * invoice holds a value the flow cannot take: err names it) or APBOT_E_INVAL / APBOT_E_LIMIT
 * (the flow's template or the ERP's captured value does not make a request: err says why).
 */
int erp_send_prepare(struct erp_session *s, const struct flow_send *send,
                     const struct flow_vars *vars, bool reads_only, struct erp_send *ret, char *err,
                     size_t errlen) APBOT_MUST_USE;
void erp_send_done(struct erp_send *r);

/* http_request with the session's headers added (when the login made any and the request
 * has none of its own). */
int erp_request(struct erp_session *s, const struct http_request *req,
                struct http_response *ret) APBOT_MUST_USE;

/* ---- fetching a screen ------------------------------------------------------------------- */

/* What erp_fetch learnt besides the page. */
struct erp_fetch_info {
    bool answered;      /* a 2xx answer was read and parsed */
    bool match_aborted; /* a session marker exhausted the page's match budget */
    long status;
    long retry_after_s;
    int64_t date_ms; /* the answer's Date header (the ERP's clock), Unix ms; 0 if none */
    char *final_url; /* on APBOT_OK: the URL of the page (after redirects), heap: free it */
};

/* What a read fetched: an HTML page or a JSON document, one of the two (owned). */
struct erp_read {
    struct page *page;
    struct jdoc *json;
};
void erp_read_done(struct erp_read *a);

/*
 * erp_fetch for any read: GET url, or the request send composes (expanded with vars and the
 * session's values once logged in, so ${session.*} are known), read as JSON when json (a
 * 2xx answer that is not JSON fails as an unreadable page does). *ret as erp_fetch's page.
 * APBOT_E_DATA when send cannot be composed from the invoice's values (err says which).
 */
int erp_fetch_req(struct erp_session *s, const char *step, const char *url,
                  const struct flow_send *send, const struct flow_vars *vars, bool json,
                  struct erp_read *ret, struct erp_xch *ret_x, struct erp_fetch_info *ret_info,
                  char *err, size_t errlen) APBOT_MUST_USE;

/* The text of a JSON value as a table cell (erp.c): NULL for null; a tagged decimal or date
 * as its text. Heap. */
char *erp_json_cell(const struct json_t *v);

/*
 * A result table's rows in an answer (erp_lookup.c), each handed to fn as cells in the
 * table's column order (NULL for an empty cell; a non-zero return stops): page_rows on a
 * page, or the elements of the array at t->pointer of a JSON answer, each column read at its
 * pointer from the element. *ret_n gets the rows handed over. APBOT_E_PARSE when a JSON answer
 * has no array there (no results screen: never "no rows"); page_rows's codes otherwise.
 */
typedef int (*erp_cells_fn)(void *ctx, const char *const *cells, size_t n);
int erp_read_rows(const struct erp_read *a, const struct flow_table *t, erp_cells_fn fn, void *ctx,
                  size_t *ret_n, char *err, size_t errlen) APBOT_MUST_USE;
/* One column of a detail answer: its XPath on the page, or its pointer from the JSON's root.
 * Heap, NULL when empty. */
char *erp_read_cell(const struct erp_read *a, const struct flow_column *col);

/*
 * GETs url (a screen of step `step`: "lookup", "detail", "list"); logs in first when needed,
 * and again on a session marker (at most ERP_RELOGIN_MAX times); repeats transient failures
 * up to s->retries times. Every exchange is reported. On APBOT_OK *ret_page is the parsed 2xx
 * page (page_free) and *ret_x the exchange not yet reported (the caller adds its outcome and
 * reports it). APBOT_E_NET: no usable answer (detail in err, already reported);
 * APBOT_E_SYSTEMIC: the login was refused.
 */
int erp_fetch(struct erp_session *s, const char *step, const char *url, struct page **ret_page,
              struct erp_xch *ret_x, struct erp_fetch_info *ret_info, char *err,
              size_t errlen) APBOT_MUST_USE;

/* ---- forms ------------------------------------------------------------------------------- */

struct page_form;
/* The URL a GET form submits to: the action without its query, then the fields (a browser's
 * way). Heap; NULL when longer than 64 KiB. */
char *erp_form_get_url(const struct page_form *form);

#ifdef APBOT_UNITTEST /* static in the product (base/unittest.h) */
/* erp_list_range of the one day date ("YYYY-MM-DD"). */
int erp_list_day(struct erp_session *s, const char *date, erp_row_fn fn, void *ctx, int *ret_pages,
                 char *err, size_t errlen) APBOT_MUST_USE;
#endif

#endif
