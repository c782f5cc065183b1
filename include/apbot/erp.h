/*
 * erp.h - an ERP session driven by a flow: log in, look a key up, list a date range.
 *
 * The session wraps one http_session (cookies, HTTP Basic from APBOT_ERP_USER /
 * APBOT_ERP_PASSWORD when the flow says <http-basic/>) and the flow's login, lookup and list
 * operations; the post of an invoice through the flow's steps is erp_post.h, on the same
 * session. It knows nothing of the queue or the state machine: it answers "what does the ERP
 * show for this key / these days", and the caller (runner, report, resolve, flow trace) decides
 * what that means. Whether a lookup proves an absence is decide_lookup()'s word alone
 * (decide.h): this module gathers its facts honestly (a page not answered, without its
 * results-screen marker, at the screen's row maximum, with a next page left unread, a
 * candidate's detail page not read, a pattern over its budget: never an absence).
 *
 * Answers are read as the flow says: every pattern (session markers, login success and rules)
 * sees the page with comments, scripts and attribute values blanked (page_rule_text) unless it
 * is raw, and all patterns on one answer share one match budget (match.h): a pattern that
 * exhausts it makes the answer unknown, the evidence naming it. A session marker (status of the
 * first hop or of the answer, Location of the first redirect hop, body) means the session is
 * gone: the GET is repeated after a fresh login, at most ERP_RELOGIN_MAX times (lookups and
 * listings are GETs, so repeating them is safe).
 *
 * Credentials are read from the environment at erp_open and go to the wire only, to the ERP's
 * origin only: they never appear in err, in evidence, in a trace or in any returned string
 * (the user name and password are masked as "***" wherever a page echoes them). Amounts are
 * parsed exactly into minor units with the table's separators and the row's currency (or the
 * caller's). The module never logs: the evidence and trace callbacks let the caller store or
 * print every exchange.
 */
#ifndef APBOT_ERP_H
#define APBOT_ERP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "apbot/error.h"

struct flow;
struct invoice;
struct flow_table;

struct erp_session;

/* Fresh logins tried for one request whose answer is the session-expired page. */
#define ERP_RELOGIN_MAX 2
/* Bytes of page text kept in an exchange's excerpt (the queue keeps up to STORE_EXCERPT_MAX). */
#define ERP_EXCERPT_MAX 2048

/* One HTTP exchange with the ERP, as the session reports it for the record (the queue keeps it
 * as an item's evidence, the review page shows it). Every pointer is valid only during the
 * callback that hands it over. */
struct erp_exchange {
    const char *step;      /* "login", "lookup", "detail", "list", or the post step's name */
    const char *method;    /* "GET" / "POST" */
    const char *url;       /* resolved, without credentials or query secrets */
    int http_status;       /* 0 when nothing was answered */
    int64_t elapsed_ms;    /* from the request to the end of the answer */
    const char *transport; /* "answered", "not-sent: ...", "unknown: ..." (curl's detail) */
    const char *rule;      /* the rule that matched (or the pattern over its budget), or NULL */
    const char *outcome;   /* what the exchange meant (below) */
    const char *excerpt;   /* bounded, secret-free text of the answer, or NULL */
};

/*
 * Called once per HTTP exchange (login, each lookup page, each detail page, each list page, each
 * post exchange) with a filled exchange record: step ("login", "lookup", "detail", "list", or
 * the post step's name), method, URL (resolved, secrets masked), status, elapsed, transport
 * ("answered", "not-sent: ...", "unknown: ..."), the rule that matched (or the pattern that
 * exhausted the budget), outcome ("answered", "logged-in", "refused", "session-expired",
 * "failed"; a lookup's last exchange carries its verdict "found", "found-unfinished",
 * "not-found", "failed"; a post exchange its decide_post verdict) and a bounded excerpt
 * (ERP_EXCERPT_MAX). Every pointer is valid only during the call. Best effort: nothing is
 * returned.
 */
typedef void (*erp_evidence_fn)(void *ctx, const struct erp_exchange *x);

/*
 * Opens a session for flow f (which must outlive the session). base_url overrides
 * f->base_url when non-NULL and non-empty. Reads APBOT_ERP_USER / APBOT_ERP_PASSWORD now
 * (required when the flow logs in by form or uses HTTP Basic: APBOT_E_SYSTEMIC otherwise,
 * without naming any value). cancel, when non-NULL, aborts waits (see http.h). Does not
 * log in yet: the first lookup/list does that, or call erp_login. Needs http_global_init().
 * Returns APBOT_OK and *ret (free with erp_close), or an error with detail in err.
 */
int erp_open(const struct flow *f, const char *base_url, atomic_int *cancel,
             struct erp_session **ret, char *err, size_t errlen) APBOT_MUST_USE;
/* Closes the session; NULL is fine. Credentials held in memory are wiped. */
void erp_close(struct erp_session *s);

/*
 * Lets lookups and listings repeat a GET that failed transiently (not answered, 429, 5xx)
 * up to `retries` more times, waiting Retry-After (or 250 ms doubling), at most 5 s each.
 * Default 0: the runner counts every failure through its own backoff; the report and
 * resolve, which have no queue to come back to, ask for a few.
 */
void erp_set_retries(struct erp_session *s, int retries);

/* Sets (or clears with fn NULL) the evidence callback. */
void erp_set_evidence(struct erp_session *s, erp_evidence_fn fn, void *ctx);

/*
 * The gate every request of the session that may change the ERP passes before anything of it
 * is sent: a login, a submitted form, a step of a post, a probe - anything but the GET of a
 * page the flow only reads (a lookup, a listing, the page a step fills in). fn returns false to
 * hold the request back: it is then not sent, its transport "not-sent: " with fn's reason
 * (written into why, at most whylen bytes). The runner makes its queue's deferred writes
 * durable here, so that nothing that could book leaves while a state change before it is not
 * on disk (the intent to post before the filled form). fn NULL removes the gate.
 */
typedef bool (*erp_gate_fn)(void *ctx, char *why, size_t whylen);
void erp_set_gate(struct erp_session *s, erp_gate_fn fn, void *ctx);

/* True after a successful erp_login until a session marker (or a failed login, or a post that
 * lost its session) said the session is gone; lookups, listings and posts log in again by
 * themselves when it is false. */
bool erp_logged_in(const struct erp_session *s);
/* The effective base URL (owned by s). */
const char *erp_base_url(const struct erp_session *s);
/* Resolves an expanded flow URL ("/erp/x?y" or absolute) against the base URL. Heap. */
char *erp_url(const struct erp_session *s, const char *expanded);

/*
 * One exchange explained, for `apbot flow trace`: what was asked, what was found on the page,
 * what was submitted and where each value came from, which rule matched and what it meant.
 * Every pointer is valid only during the callback; secrets are masked ("***").
 */
struct erp_trace_control {
    const char *name;
    const char *value;  /* as submitted, secrets masked */
    const char *source; /* "page default", "template", "option chosen by label '5700--Office
                         * Supplies'", "added (not on the page)", "button pressed", ... */
};
struct erp_trace {
    const char *step;           /* "login", "lookup", "detail", "list", or the post step's name */
    const char *method;         /* "GET" / "POST" */
    const char *url;            /* without credentials */
    long status;                /* 0 when nothing was answered */
    const char *transport;      /* "answered", "not-sent: ...", "unknown: ..." */
    long redirects;             /* redirects followed */
    const char *first_location; /* Location of the first redirect hop, or NULL */
    const char *form;           /* XPath of the form filled for this exchange, or NULL */
    const char *body;           /* the body of a request the flow composed (<send>: a JSON
                                 * call), secrets masked, or NULL */
    const struct erp_trace_control *controls; /* every control submitted, in order */
    size_t n_controls;
    const char *rule;    /* the rule that matched, or NULL */
    const char *outcome; /* what the exchange meant: "next", "saved", "found", "not-found", ... */
    const char *why;     /* why, in words (the decision's reason) */
    const char *const *captured_names; /* values captured from the answer */
    const char *const *captured_values;
    size_t n_captured;
    const char *excerpt; /* bounded, secret-free text of the answer, or NULL */
};
typedef void (*erp_trace_fn)(void *ctx, const struct erp_trace *t);
/* Sets (or clears with fn NULL) the trace callback for every exchange of the session (a post's
 * exchanges go to its hooks' trace instead when it has one, see erp_post.h). */
void erp_set_trace(struct erp_session *s, erp_trace_fn fn, void *ctx);

/*
 * Logs in (clearing cookies first): with a <form>, fetches the login page, fills the form
 * (hidden fields kept), presses the button and submits it; without one, sends the one request
 * `method` to `get` (HTTP Basic riding on it). A flow without <login> succeeds at once.
 * Before anything is sent, a login form whose action leaves the ERP's origin, or whose method
 * is GET while a field carries a secret, is refused (APBOT_E_SYSTEMIC).
 * The answer: a `rejected` rule, 401 or 403 is a refusal (APBOT_E_SYSTEMIC: stop the run at
 * once, never try the credentials again); a `completed` rule or the <success> conditions
 * (status and/or pattern) a login; no answer, 429/5xx, a `not-sent`/`unknown` rule or a
 * pattern over its budget is transient (APBOT_E_NET); an answer to a login form that is the
 * login page again (a session marker) is ambiguous - the ERP may have ended the fresh session
 * at once - and is tried up to three times before it counts as a refusal; anything else lacks
 * the success marker (APBOT_E_SYSTEMIC).
 */
int erp_login(struct erp_session *s, char *err, size_t errlen) APBOT_MUST_USE;
/* True when the last erp_login failed because the ERP refused it (a `rejected` rule, 401/403,
 * or the login page every time): the credentials will not work; stop the run now, from any
 * session. False after any other outcome (a missing form is systemic too, but not a refusal). */
bool erp_login_refused(const struct erp_session *s);

/*
 * Asks whether the ERP answers at all, for a caller that holds back while it seems silent: one
 * GET of the flow's login page (<login get>, as written), or of the base URL's "/" for a flow
 * without a login, on the session (its cookies, its gate). The answer is not read: no page, no
 * exchange reported to the evidence or trace callbacks, the login state untouched (a long
 * silence may have ended the session: the next lookup or post finds out). Writes the
 * exchange's transport and curl's detail, "answered: ", "not-sent: <detail>" or
 * "unknown: <detail>" (secrets masked), into transport (capacity len > 0). Returns APBOT_OK
 * whenever the exchange was classified, whatever its transport; otherwise nothing was sent
 * (the URL does not resolve or is refused: APBOT_E_INVAL, APBOT_E_ORIGIN) and transport is "".
 */
int erp_probe(struct erp_session *s, char *transport, size_t len) APBOT_MUST_USE;

/* One result row of a lookup or listing. Strings are heap-owned (erp_hits_done frees them);
 * any may be NULL when the flow has no such column or the cell is empty. */
struct erp_row {
    char *doc;            /* column "doc": the ERP document number */
    char *reference;      /* column "reference": where apbot writes its (cut) key */
    char *vendor;         /* column "vendor" */
    char *invoice_number; /* column "invoice_number" */
    char *currency;       /* column "currency" */
    char *date;           /* column "date": the invoice date, as the ERP shows it */
    char *booked;         /* column "booked": the booking date, as the ERP shows it */
    char *status;         /* column "status" (e.g. draft / posted), as the ERP shows it */
    char *doc_type;       /* column "doc_type" */
    char *amount_text;    /* column "amount", as shown */
    int64_t amount;       /* amount_text in minor units, valid when has_amount */
    int exponent;         /* of the currency used to parse the amount, valid when has_amount */
    bool has_amount;      /* false: no amount column, unknown currency or unparsable text */
    bool unfinished;      /* a lookup hit whose <finished> column differs: saved, not finished */
};

/* A set of rows; zero-initialise before use. */
struct erp_hits {
    struct erp_row *rows;
    size_t n;
    size_t cap; /* hands off */
};
/* Frees every row; the struct is empty (reusable) afterwards. NULL is fine. */
void erp_hits_done(struct erp_hits *h);

/* What a lookup concluded. */
enum erp_answer {
    ERP_FOUND = 0,        /* the ERP holds the key: hits has >= 1 exact hit, a finished one
                           * first (decide_lookup: DECIDE_FOUND) */
    ERP_FOUND_UNFINISHED, /* the ERP holds the key, saved but not finished (every hit's
                           * <finished> column differs): the follow-up steps are due on
                           * hits.rows[0].doc */
    ERP_NOT_FOUND,        /* a complete, genuine results screen without the key: every page
                           * answered and read, the screen marker present, none cut, no next
                           * page left, every candidate's detail read, rows or the empty
                           * marker */
    ERP_FAILED,           /* no proof either way (detail says why): never an absence */
};

struct erp_lookup_result {
    enum erp_answer answer;
    struct erp_hits hits;  /* every exact-key hit, finished ones first (ERP_FOUND and
                            * ERP_FOUND_UNFINISHED only; more than one is a conflict) */
    long http_status;      /* of the last exchange, 0 if none answered */
    long retry_after_s;    /* Retry-After of the last answer, -1 if none */
    int64_t erp_date_ms;   /* the ERP's clock (the Date header of a result page), Unix ms in
                            * whole seconds; 0 when no answer carried one */
    int64_t erp_date_mono; /* CLOCK_BOOTTIME ms when that answer arrived (with erp_date_ms it
                            * places a moment of this process on the ERP's clock) */
    char detail[256];      /* why ERP_FAILED (secret-free), else "" */
};
/* Frees the hits. NULL is fine. */
void erp_lookup_result_done(struct erp_lookup_result *r);

/*
 * Looks the (full identity) key up with the flow's lookup: expands lookup.get with the key
 * (cut to policy.key_length by the flow) and the invoice, logs in first if needed, reads the
 * result pages through the table's next link (at most max-pages), opens each candidate's
 * detail page (at most max-candidates; its cells override the row's), and keeps only rows
 * whose key column equals the cut key exactly (the ERP's search may match by prefix) and whose
 * <expect> columns equal their expanded values (a lookup by natural key has only those); a hit
 * whose <finished> column differs is marked unfinished. The verdict is decide_lookup()'s. inv
 * may be NULL for a flow without <expect>. currency, when non-NULL, parses amounts of rows
 * that show no currency column.
 * Returns APBOT_OK with *ret filled (free with erp_lookup_result_done) whenever the lookup was
 * classified, even as ERP_FAILED; APBOT_E_SYSTEMIC when a login was refused; APBOT_E_INVAL for
 * a flow without lookup or a missing invoice; *ret is then empty.
 */
int erp_lookup(struct erp_session *s, const char *key, const struct invoice *inv,
               const char *currency, struct erp_lookup_result *ret, char *err,
               size_t errlen) APBOT_MUST_USE;

/*
 * Reads the listing of the dates from..to (inclusive, "YYYY-MM-DD"), by the date the flow's list
 * selects by (list.by: booking or invoice date), through every page: follows the table's
 * next-page link while there is one (or, without a next XPath, increments ${page} until a page
 * has no rows), at most list.max_pages pages per walk. fn is called for every row in page
 * order (the row is valid only during the call; a non-zero return stops the walk and is
 * returned). *ret_pages (may be NULL) gets the number of pages read.
 * Returns APBOT_OK when the whole range was read; APBOT_E_NET when a page could not be read
 * (after bounded re-logins); APBOT_E_LIMIT when max_pages was reached and the ERP still
 * shows a next page (the listing would be incomplete, which a reconciliation must never
 * take for complete); APBOT_E_SYSTEMIC when the login was refused; APBOT_E_INVAL for a flow
 * without a list operation, a bad date or a range that ends before it starts.
 *
 * One walk with ${from}/${to} when the list URL has them, else each day in turn with ${date}
 * (at most 62 days, else APBOT_E_LIMIT). One day d is the range d..d.
 */
typedef int (*erp_row_fn)(void *ctx, const struct erp_row *row);
int erp_list_range(struct erp_session *s, const char *from, const char *to, erp_row_fn fn,
                   void *ctx, int *ret_pages, char *err, size_t errlen) APBOT_MUST_USE;

/*
 * Parses an amount as a result table shows it (the table's decimal and grouping
 * separators, a leading '-' allowed) in currency's exponent. Exact: no rounding.
 * Returns APBOT_OK and *ret_minor, or APBOT_E_INVAL / APBOT_E_RANGE (ret untouched).
 */
int erp_parse_amount(const struct flow_table *t, const char *text, const char *currency,
                     int64_t *ret_minor, char *err, size_t errlen) APBOT_MUST_USE;

#endif
