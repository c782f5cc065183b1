/*
 * erp.h - an ERP session driven by a flow: log in, look a key up, read a day's listing.
 *
 * The session wraps one http_session (cookies, optional HTTP Basic from APBOT_ERP_USER /
 * APBOT_ERP_PASSWORD when the flow says basic_auth) and the flow's login, lookup and list
 * operations. It knows nothing of the queue or the state machine: it answers "what does the
 * ERP show for this key / this day", and the caller (runner, report, resolve) decides what
 * that means. Pages answered with the flow's session-expired marker are retried after a
 * fresh login, a bounded number of times (ERP_RELOGIN_MAX); lookups and listings are GETs,
 * so repeating them is always safe. Posting stays with the runner, which may use the same
 * session through erp_http() / erp_login() / erp_url().
 *
 * Credentials are read from the environment at erp_open and go to the wire only: they never
 * appear in err, in evidence or in any returned string. Amounts are parsed exactly into
 * minor units with the table's separators and the row's currency (or the caller's).
 * Modules return errors and never log; the optional evidence callback lets the caller store
 * every exchange (store_add_evidence-shaped, excerpt bounded and secret-free).
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
struct http_session;
struct store_evidence;

struct erp_session;

/* Fresh logins tried for one request whose answer is the session-expired page. */
#define ERP_RELOGIN_MAX 2
/* Bytes of page text kept in evidence excerpts (<= STORE_EXCERPT_MAX). */
#define ERP_EXCERPT_MAX 2048

/*
 * Called once per HTTP exchange (login page, login submit, lookup, each list page) with a
 * filled evidence record: step ("login", "lookup", "list"), method, URL (resolved, never
 * with credentials), status, elapsed, transport name, outcome ("answered", "found",
 * "not-found", "session-expired", "failed", ...) and a bounded excerpt. Every pointer is
 * valid only during the call. The return value is ignored (evidence is best effort).
 */
typedef void (*erp_evidence_fn)(void *ctx, const struct store_evidence *ev);

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

/* The underlying HTTP session (owned by s). */
struct http_session *erp_http(struct erp_session *s);
/* True after a successful erp_login until a session marker (or a failed login) said the
 * session is gone; lookups, listings and posts log in again by themselves when it is false. */
bool erp_logged_in(const struct erp_session *s);
/* The effective base URL (owned by s). */
const char *erp_base_url(const struct erp_session *s);
/* Resolves an expanded flow URL ("/erp/x?y" or absolute) against the base URL. Heap. */
char *erp_url(const struct erp_session *s, const char *expanded);
/* True when body carries the flow's session-expired marker (false if the flow has none). */
bool erp_is_session_expired(const struct erp_session *s, const char *body, size_t len);

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
/* Sets (or clears with fn NULL) the trace callback for every exchange of the session. */
void erp_set_trace(struct erp_session *s, erp_trace_fn fn, void *ctx);

/*
 * Logs in with the flow's login form (clearing cookies first). A flow without a login form
 * succeeds at once (HTTP Basic, if any, rides on every request).
 * Returns APBOT_OK; APBOT_E_NET when the ERP could not be reached or answered a transient
 * error (timeout, 5xx, 429/503) - retry later; APBOT_E_SYSTEMIC when the login was refused,
 * the login form is missing or the page after login lacks the success marker. An answer that
 * is the login page itself is tried up to three times before it counts as a refusal (the ERP may
 * have ended the fresh session at once).
 */
int erp_login(struct erp_session *s, char *err, size_t errlen) APBOT_MUST_USE;

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
    ERP_FOUND = 0,        /* the ERP answered and holds the key: rows has >= 1 exact hit */
    ERP_FOUND_UNFINISHED, /* the ERP holds the key, saved but not finished (the flow's
                           * <finished> column differs): the follow-up steps are due */
    ERP_NOT_FOUND,        /* the ERP answered a clean "no results" (the flow's empty marker, or a
                           * result table none of whose rows carries exactly the key) */
    ERP_FAILED,           /* no usable answer: transport failure, 5xx/429/503, unrecognised page,
                           * still the login page after ERP_RELOGIN_MAX fresh logins */
};

struct erp_lookup_result {
    enum erp_answer answer;
    struct erp_hits hits; /* exact-key hits (reference == cut key), ERP_FOUND only */
    long http_status;     /* of the last exchange, 0 if none answered */
    long retry_after_s;   /* Retry-After of the last answer, -1 if none */
    char detail[256];     /* why ERP_FAILED (secret-free), else "" */
};
/* Frees the hits. NULL is fine. */
void erp_lookup_result_done(struct erp_lookup_result *r);

/*
 * Looks the (full identity) key up with the flow's lookup: expands lookup.get with the key
 * (cut to policy.key_length by the flow) and the invoice, logs in first if needed, and keeps
 * only rows whose key_column equals the cut key exactly (the ERP's search may match by
 * prefix) and whose <expect> columns equal their expanded values (a lookup by natural key has
 * only those). inv may be NULL for a flow without <expect>. currency, when non-NULL, is used
 * to parse amounts of rows that show no currency column.
 * Returns APBOT_OK with *ret filled (answer FOUND / NOT_FOUND / FAILED; free with
 * erp_lookup_result_done) whenever the exchange was classified; APBOT_E_SYSTEMIC when the
 * login was refused; APBOT_E_INVAL for a flow without lookup; *ret is then empty.
 */
int erp_lookup(struct erp_session *s, const char *key, const struct invoice *inv,
               const char *currency, struct erp_lookup_result *ret, char *err,
               size_t errlen) APBOT_MUST_USE;

/*
 * Reads the listing of one booking day (date "YYYY-MM-DD") through every page: follows the
 * table's next-page link while there is one (or, without a next XPath, increments ${page}
 * until a page has no rows), at most list.max_pages pages. fn is called for every row in
 * page order (the row is valid only during the call; a non-zero return stops the walk and is
 * returned). *ret_pages (may be NULL) gets the number of pages read.
 * Returns APBOT_OK when the whole day was read; APBOT_E_NET when a page could not be read
 * (after bounded re-logins); APBOT_E_LIMIT when max_pages was reached and the ERP still
 * shows a next page (the listing would be incomplete, which a reconciliation must never
 * take for complete); APBOT_E_SYSTEMIC when the login was refused; APBOT_E_INVAL for a flow
 * without a list operation or a bad date.
 *
 * erp_list_range reads the dates from..to (inclusive, "YYYY-MM-DD") by the date the flow's
 * list selects by (list.by: booking or invoice date): one walk with ${from}/${to} when the
 * list URL has them, else each day in turn with ${date} (at most 62 days, else
 * APBOT_E_LIMIT). erp_list_day(s, d, ...) is erp_list_range(s, d, d, ...).
 */
typedef int (*erp_row_fn)(void *ctx, const struct erp_row *row);
int erp_list_range(struct erp_session *s, const char *from, const char *to, erp_row_fn fn,
                   void *ctx, int *ret_pages, char *err, size_t errlen) APBOT_MUST_USE;
int erp_list_day(struct erp_session *s, const char *date, erp_row_fn fn, void *ctx, int *ret_pages,
                 char *err, size_t errlen) APBOT_MUST_USE;

/*
 * Parses an amount as a result table shows it (the table's decimal and grouping
 * separators, a leading '-' allowed) in currency's exponent. Exact: no rounding.
 * Returns APBOT_OK and *ret_minor, or APBOT_E_INVAL / APBOT_E_RANGE (ret untouched).
 */
int erp_parse_amount(const struct flow_table *t, const char *text, const char *currency,
                     int64_t *ret_minor, char *err, size_t errlen) APBOT_MUST_USE;

#endif
