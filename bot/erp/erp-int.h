/*
 * erp-int.h - what the parts of the ERP driver share, and nothing else includes.
 *
 * erp.c holds the session (credentials, the http session, the login, fetching a screen with
 * bounded re-logins) and the reporting of exchanges (evidence and trace, secrets masked);
 * erp_lookup.c reads result tables (lookup with pages and detail pages, listings);
 * erp_post.c drives the steps of a post. An answer is read through one struct erp_view:
 * the blanked text every pattern sees (page_rule_text) and one match budget for all of them.
 */
#ifndef APBOT_ERP_INT_H
#define APBOT_ERP_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "apbot/erp.h"
#include "web/match.h"

struct flow_rule;
struct flow_marker;
struct http_response;
struct page;

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
};

/* ---- reading one answer ------------------------------------------------------------------ */

/* One answer as the patterns see it. Set up with erp_view_init, free with erp_view_done. */
struct erp_view {
    const struct http_response *r;
    char *blank; /* page_rule_text of the body, made when a pattern first needs it */
    struct match_budget budget;
    bool aborted;          /* a pattern stopped before deciding */
    char aborted_what[96]; /* which ("rule NAME", "session marker (flow line N)", ...) */
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

/* True when one of the flow's session markers matches the answer (status on the first hop or
 * the final answer, redirect on the first hop's Location, body pattern). A pattern that
 * aborts is recorded in the view and does not count as a match. */
bool erp_view_session_gone(struct erp_view *v, const struct flow *f);

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
    struct erp_xctl *controls;
    size_t n_controls, cap_controls;
    char *rule;
    char outcome[48];
    char *why;
    char **cap_names, **cap_values;
    size_t n_captured;
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
