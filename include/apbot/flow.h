/*
 * flow.h - a flow: how to drive one ERP's screens, loaded from XML (flows/NAME.xml), validated
 * against flows/flow.rng with libxml2's RelaxNG, then checked semantically (variables in their
 * places, PCRE2 patterns, XPath, the safety rules of the post). The loaded flow is plain data
 * the runner, the ERP session and the report read; it owns every string and compiled pattern.
 * What to do with it (HTTP, pages, states) is theirs; docs/writing-flows.md is the reference
 * of the language.
 *
 * Templates: "${name}" or "${name|formatter:arg|...}", formatters applied left to right.
 * Variables, and where a flow may use them (checked at load):
 *   key, invoice.number, invoice.vendor_id, invoice.vendor_name, invoice.doc_type,
 *   invoice.issue_date, invoice.due_date, invoice.currency, invoice.payable, invoice.net,
 *   invoice.tax, invoice.gl_account and invoice.description (first line's),
 *   invoice.line_count, vendor.id, vendor.name ............ lookup (URL, <detail get>,
 *                                                           <expect>, <finished>) and post
 *   line.n (1-based), line.net, line.tax, line.gross, line.gl_account,
 *   line.description, line.quantity ........................ only inside <lines>
 *   doc, capture.NAME ....................................... post steps after the step that
 *                                                           captures them
 *   row.COLUMN ............................................. only in <detail get>
 *   secret.user, secret.password ............................ only login field values and
 *                                                           bodies, and <header> values
 *   date, from, to, page, offset, limit ..................... only in <list>
 *   session.NAME ........................................... after the login (and its <then>
 *                                                           call) that captures it: headers,
 *                                                           lookup, post, list, resolve
 *   cookie.NAME ............................................. wherever a request is composed
 *   ref.NAME.COLUMN ......................................... post steps: a column of what
 *                                                           <resolve name="NAME"> found
 *                                                           (inside lines when its code is
 *                                                           one per line)
 *   code .................................................... only in <resolve>'s request
 * Formatters: date:<pattern of %d %m %Y %y %%>, amount:<dec><group> ("amount:,." gives
 * 1.234,56), abs, map:a=b,c=d (no mapping: APBOT_E_DATA), upper, lower, trunc:N, url, and in
 * a JSON body, last and alone in its string, json:TYPE (string, int, number, decimal, date,
 * bool, raw): the string becomes a JSON value of that type (an empty value becomes null).
 * The key is cut to policy.key_length characters.
 * Amount expressions: in place of a variable, "${line.net + line.tax}", "${-invoice.tax}",
 * "${(invoice.net + invoice.tax) * 19% half-up}": amounts of the invoice (one currency) added,
 * subtracted, negated and taken at a rate with a named rounding (half-up, half-even, up,
 * down), exactly in minor units; checked at load like a variable, and an amount like one.
 */
#ifndef APBOT_FLOW_H
#define APBOT_FLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "apbot/error.h"

struct match_re;
struct invoice;
struct invoice_line;
struct linetax;
struct json_t; /* jansson's value (web/jdoc.h): a JSON body template, numbers kept exact */

/* What a response means. If you add one, add its name in flow.c. */
enum flow_outcome {
    FLOW_OUT_COMPLETED = 0,   /* every step done, booked: the document number is the rule's
                               * (?<doc>...) group, else the doc captured at or before the
                               * committing step */
    FLOW_OUT_REJECTED,        /* validation message: (?<reason>...) is kept */
    FLOW_OUT_ALREADY_EXISTS,  /* the ERP says this document exists: (?<doc>...) if it names it */
    FLOW_OUT_NOT_SENT,        /* provably not processed (overload before processing, ...) */
    FLOW_OUT_SESSION_EXPIRED, /* login page instead of the answer: not processed, log in again */
    FLOW_OUT_UNKNOWN,         /* ambiguous: reconcile */
    FLOW_OUT_SAVED,           /* committing step only, with steps after it: the ERP holds the
                               * document as DOC ((?<doc>...) or <capture name="doc">); run the
                               * follow-up steps on it, never post again */
    FLOW_OUT__COUNT
};
const char *flow_outcome_name(enum flow_outcome o); /* "completed", "rejected", ... */

/*
 * What patterns see: every pattern matched on a page (rules, login success, captures, session
 * markers) is meant to see the page with comments, script/style contents and most attribute
 * values blanked (page_rule_text), unless its element says raw="true" (the `raw` fields).
 */

/* A condition on a JSON answer (<json pointer="...">): the value at the RFC 6901 pointer is
 * there and its text (a string as it is, a number as written, true/false/null, an object or
 * array as compact JSON) matches re (NULL: any value); with absent, nothing is there. An answer
 * that is not JSON (an HTML error page, a cut text) meets no condition, not even an absent one:
 * a rule with one never matches it. */
struct flow_json_cond {
    char *pointer;
    struct match_re *re;
    bool absent;
    int line;
};

/* Which page a step rule is tried on (when-missing="..."). Every step rule is tried on the
 * step's answer and, before apbot concludes that the step's form, a control or its button is
 * missing from the page the step works on, on that page; a when-missing rule only on such a
 * page, and only when what is missing is of its kind. If you add one, add its name in flow.c. */
enum flow_when {
    FLOW_WHEN_ALWAYS = 0,      /* no when-missing: the answer, and a page that lacks a control */
    FLOW_WHEN_MISSING_ANY,     /* "any": only a page that lacks the form, a control or the button */
    FLOW_WHEN_MISSING_FORM,    /* "form": only a page without the step's form */
    FLOW_WHEN_MISSING_CONTROL, /* "control": only a page whose form lacks a field's control */
    FLOW_WHEN_MISSING_BUTTON,  /* "button": only a page whose form lacks the button to press */
    FLOW_WHEN__COUNT
};
const char *flow_when_name(enum flow_when w); /* "always", "any", "form", "control", ... */

/* One ordered outcome rule: every condition given must match (NULL = not a condition); a
 * loaded rule has at least one. */
struct flow_rule {
    char *name; /* for evidence, e.g. "posted-banner" */
    enum flow_outcome outcome;
    char *status;                /* match_status spec, or NULL */
    struct match_re *url;        /* on the final URL after redirects, or NULL */
    struct match_re *body;       /* on the body, or NULL */
    bool raw;                    /* body pattern sees the raw page, not the blanked one */
    struct flow_json_cond *json; /* conditions on a JSON answer, all of which must hold */
    size_t n_json;
    char *reason; /* the reason told to a clerk when the rule's patterns name none, or NULL */
    enum flow_when when; /* post step rules: which pages it is tried on */
    int line;            /* line in the flow file */
};

/* A marker of "the session is gone" (<session-expired>): every condition given must match;
 * a loaded marker has at least one. Any marker matching means the session is gone. */
struct flow_marker {
    char *status;              /* match_status spec, or NULL */
    struct match_re *redirect; /* on the resolved Location of the answer's first redirect hop */
    struct match_re *body;     /* on the body, or NULL */
    bool raw;
    int line;
};

/* How a value goes into a <select> control. */
enum flow_option {
    FLOW_OPTION_DEFAULT = 0,  /* no option=: the value must equal an option's value */
    FLOW_OPTION_VALUE,        /* the option whose value equals the text */
    FLOW_OPTION_LABEL,        /* the option whose visible label equals the text */
    FLOW_OPTION_LABEL_PREFIX, /* the option whose visible label starts with the text */
    FLOW_OPTION__COUNT
};
const char *flow_option_name(enum flow_option o); /* "default", "value", "label", ... */

/* A form field; also an <expect> or <finished> compare (name = column, value = template). */
struct flow_field {
    char *name;  /* control name: a template (inside <lines>: "amount_${line.n}") */
    char *value; /* template */
    enum flow_option option;
    int line;
};

/* What a <lines> does when the page lacks the controls of a line. */
enum flow_missing {
    FLOW_MISSING_ERROR = 0, /* every line's controls must exist (a changed form) */
    FLOW_MISSING_ADD,       /* add them to the submission, as the ERP's JavaScript would */
    FLOW_MISSING_SKIP,      /* leave those lines out (a step with repeat="until-lines") */
    FLOW_MISSING__COUNT
};

/* Fields repeated once per invoice line, with line.* variables in names and values. */
struct flow_lines {
    bool present;
    struct flow_field *fields; /* fields[0]'s name tells whether the page has a line's controls */
    size_t n_fields;
    enum flow_missing missing;
    int line;
};

/* A form to fill: found by XPath on the current page, hidden fields kept. */
struct flow_form {
    char *xpath;
    struct flow_field *fields;
    size_t n_fields;
    char *submit;       /* name of the button to press, or NULL */
    char *submit_value; /* with submit: the pressed button's value; NULL = by name alone */
    struct flow_lines lines;
    int line;
};

/* A value read from an answer: the (?<name>...) group of re on the page, or the value at a
 * JSON pointer (its text; with re, re's group of the name on that text). */
struct flow_capture {
    char *name; /* ${capture.NAME} (a step's; "doc" is also ${doc}) or ${session.NAME} */
    struct match_re *re;
    char *pointer; /* JSON: where the value is, or NULL */
    bool raw;
    bool secret; /* a session token: masked wherever the session reports (as the password) */
    int line;
};

/* The ERP's own amount against the invoice's (<compare-amount>), on a step before the committing
 * one: the text a capture read from the ERP's answer (a total the ERP computed after an
 * update, a field of a compute call's JSON answer), read as an amount in the invoice's
 * currency, must equal the amount `equals` names; else the invoice is a business exception
 * naming both, and nothing is booked. Checked once the step is done (after its last round). */
struct flow_compare {
    char *capture;       /* the capture's name (this step's or an earlier one's) */
    char *equals;        /* one amount of the invoice: "${invoice.payable|abs}" */
    char amount_decimal; /* of the ERP's text: '.' (default) or ',' */
    char amount_group;   /* its grouping separator, or '\0' */
    int line;
};

/* A request the flow composes itself (<send>), without fetching a page first: to url, with a
 * JSON body (a template: see flow_json_expand) or form fields, or none (a GET). */
struct flow_send {
    bool present;
    char *url;                 /* template */
    bool post;                 /* POST (the default with a body or fields), else GET */
    struct json_t *json;       /* the JSON body's template, or NULL */
    struct flow_field *fields; /* an x-www-form-urlencoded body, when no JSON */
    size_t n_fields;
    int line;
};

/* One step of a multi-step entry. */
struct flow_step {
    char *name;
    char *get; /* URL template to fetch the page first, or NULL: use the last answer */
    struct flow_form form;
    struct flow_send send;   /* instead of get and form: the request the step sends as it is */
    bool commits;            /* true on the step whose submit may book the document; steps before it
                              * can never book, so an ambiguous answer there is "not sent" */
    bool repeat_until_lines; /* submit again while the answer's form lacks a line's controls
                              * (at most line_count + 1 times); only before the committing step */
    bool skip_known; /* skip="when-known": a round trip whose only use is what the ERP resolves
                      * (an "update" that looks the vendor up): when every <resolve from-step>
                      * of this step knows the invoice's code and the page already has every
                      * line's controls, the step is filled but not submitted, the learnt
                      * controls are set, and the next step (same form, no get) submits it */
    struct flow_rule *rules; /* step rules, tried first (e.g. a rejection at "check") */
    size_t n_rules;
    struct flow_capture *captures; /* applied in order when the step goes on */
    size_t n_captures;
    struct flow_compare *compares; /* the ERP's amounts against the invoice's, once the step
                                    * is done (only before the committing step) */
    size_t n_compares;
    size_t *resolves; /* indexes into flow.resolves of those the step's templates use */
    size_t n_resolves;
    int line;
};

struct flow_column {
    char *name;    /* "doc", "reference", "amount", "vendor", "status", ... */
    char *xpath;   /* relative to the row (absolute on a detail page), or NULL */
    char *pointer; /* JSON: the value's pointer relative to the row (to the answer in a detail) */
    int line;
};

/* A result table: rows by XPath, named columns, an explicit "no results" marker; or, on a JSON
 * answer, rows as the elements of the array at `pointer` (an empty array is no results; no
 * array there is no results screen). */
struct flow_table {
    char *rows;    /* XPath of the row nodes (NULL in a detail or a JSON table) */
    char *pointer; /* JSON: the rows' array, or NULL for an HTML table */
    bool json;     /* read from JSON (pointer and the columns' pointers) */
    struct flow_column *cols;
    size_t n_cols;
    char *empty;         /* XPath that exists on an answered page with no hits, or NULL */
    char *next;          /* XPath of the next-page link (href), or NULL */
    char *screen;        /* XPath present on every genuine results page, or NULL (lookup) */
    long max_rows;       /* the screen's row maximum (a full page without next may be cut:
                          * the lookup failed), 0 = none given (lookup) */
    char amount_decimal; /* decimal separator of amounts in this table */
    char amount_group;   /* grouping separator or '\0' */
    char *date_format;   /* pattern of dates in this table, e.g. "%d.%m.%Y" */
    int line;
};

/* A candidate's detail page: opened per candidate row with ${row.COLUMN}; its cells override
 * the row's. Only cols, the amount/date formats and line of the table are used. */
struct flow_detail {
    bool present;
    char *get;             /* URL template using ${row.*} */
    struct flow_send send; /* instead of get */
    struct flow_table table;
};

/* A request after the login whose answer the session keeps (<then>): the context object a
 * single-page ERP wants echoed in every call, a CSRF token. A failure is a failed login. */
struct flow_call {
    char *name;
    struct flow_send send;
    char *success_status;               /* status spec the answer must have, or NULL */
    struct flow_json_cond success_json; /* a JSON condition it must meet (pointer NULL: none) */
    struct match_re *success;           /* a pattern it must match, or NULL */
    bool success_raw;
    struct flow_capture *captures; /* ${session.NAME} */
    size_t n_captures;
    int line;
};

/* One line of every request after the login (<header>): name: prefix + the template's value,
 * base64-encoded when base64. Sent only once every ${session.*} it uses is known. */
struct flow_header {
    char *name;
    char *prefix; /* or NULL */
    char *value;  /* template */
    bool base64;
    int line;
};

/* Reference data (<resolve>): a code the invoice carries (a vendor number, a G/L account) turned
 * into the ERP's ids by a search, once per run per code (cached), its columns then read as
 * ${ref.NAME.COLUMN}. A code the ERP does not hold is a business exception naming it.
 * With from-step, the values are learnt instead from a post step's answer: the values of the
 * controls named by the table's columns (<control name="...">) on that step's form, kept in
 * the same per-run cache under the code, so that the step can be skipped (skip="when-known")
 * for a later invoice with the same code. */
struct flow_resolve {
    char *name;
    char *code;    /* template: the code (invoice values; line.* for one per line) */
    bool per_line; /* code uses line.*: resolved for each line, used inside lines */
    char *get;     /* URL template with ${code}, or NULL with send */
    struct flow_send send;
    struct flow_table table; /* with from_step: columns named after the controls, no XPath */
    char *from_step;         /* the post step whose answer it is learnt from, or NULL */
    size_t from;             /* that step's index (set by the checks) */
    char *match_column;      /* the column that must equal the code exactly ("code" by default) */
    long max_entries;        /* codes kept per run (default 10000) */
    int line;
};

/* How the ERP writes typed values in JSON (<json-values>), for json:decimal and json:date and
 * when reading amounts and dates back. */
enum flow_json_decimal {
    FLOW_JSON_DECIMAL_STRING = 0, /* "120.50" */
    FLOW_JSON_DECIMAL_NUMBER,     /* 120.50, as written */
    FLOW_JSON_DECIMAL_TAGGED,     /* {"__class__": "Decimal", "decimal": "120.50"} */
};
enum flow_json_date {
    FLOW_JSON_DATE_ISO = 0, /* "2026-03-15" */
    FLOW_JSON_DATE_TAGGED,  /* {"__class__": "date", "year": 2026, "month": 3, "day": 15} */
};

struct flow_login {
    bool present;  /* false: no login request (HTTP Basic only, or open) */
    bool has_form; /* false: the login is the one request `method` to `get` (Basic rides on it) */
    char *method;  /* without a form: "GET" (default) or "POST" (no body); NULL with a form */
    char *get;     /* URL of the login page, or of the login request; NULL with send */
    struct flow_form form;    /* when has_form */
    struct flow_send send;    /* a composed login request (a JSON call), instead of get */
    struct match_re *success; /* pattern on the answer after logging in, or NULL */
    char *success_status;     /* status spec the answer must have, or NULL (one of the three) */
    struct flow_json_cond success_json; /* a JSON condition it must meet (pointer NULL: none) */
    bool success_raw;
    struct flow_capture *captures; /* ${session.NAME} from the login's answer */
    size_t n_captures;
    struct flow_rule *rules; /* e.g. refused credentials -> stop the run */
    size_t n_rules;
    struct flow_call *then; /* calls after the login, in order */
    size_t n_then;
    int line;
};

struct flow_lookup {
    char *get; /* URL template, e.g. ".../search?reference=${key|url}"; NULL with send */
    struct flow_send send; /* a composed search request (a JSON call), instead of get */
    struct flow_table table;
    char *key_column;          /* column (of the table or the detail) compared exactly with the
                                * (cut) key before a hit counts; NULL only when n_expect > 0 */
    struct flow_field *expect; /* further exact compares: name = column, value = template
                                * (e.g. vendor = ${vendor.id}); every one must equal its cell */
    size_t n_expect;
    int max_pages;      /* pages read through table.next (default 5); more = lookup failed */
    int max_candidates; /* details opened per lookup (default 10); more = lookup failed */
    struct flow_detail detail;
    struct flow_field finished; /* when has_finished: name = column, value = template; a hit
                                 * whose cell differs is saved but unfinished */
    bool has_finished;
    char *currency; /* currency="EUR": the ERP's default, the currency of a hit whose table and
                     * detail show none (a single-currency screen), or NULL */
    int line;
};

/* Which date a listing selects by. */
enum flow_list_by {
    FLOW_LIST_BY_BOOKED = 0, /* the booking date (default) */
    FLOW_LIST_BY_INVOICE,    /* the invoice date */
    FLOW_LIST_BY__COUNT
};

struct flow_list {
    char *get; /* URL template with ${date} (one day) or ${from}/${to} (a range), ${page};
                * NULL with send */
    struct flow_send send; /* a composed request (a JSON call), instead of get */
    struct flow_table table;
    int max_pages;  /* bound on pages read */
    long page_size; /* rows a page holds (${limit}; ${offset} = (page - 1) * page_size), 0 =
                     * not given; a page with fewer rows is the last */
    bool paged;     /* the request pages by ${page} or ${offset} (set by the checks) */
    bool range;     /* the request takes ${from} and ${to}, not one ${date} (set by the checks) */
    enum flow_list_by by;
    char *currency; /* currency="EUR": the ERP's default, the currency of a row that shows none
                     * (a listing without a currency column), or NULL */
    int line;
};

/*
 * The policy numbers. flow_policy_default() is the one place their defaults live (the runner,
 * the ERP session and docs/writing-flows.md take them from there; test_flow checks the
 * guide's table against it). Default and reason, per field:
 */
struct flow_policy {
    long connect_timeout_ms; /* 5000: a healthy ERP accepts a connection within a second */
    long timeout_ms;         /* 30000: an ERP's slowest normal answer under load, with margin */
    long settle_ms;          /* 60000: must outlast the ERP's late commits and search lag; at
                              * least timeout_ms (a request may commit a timeout after give-up) */
    int max_posts;           /* 2: posts of one invoice (each after a proven absence), then a
                              * human looks */
    int max_cycles;          /* 5: failed reconciliation lookups before manual review */
    int max_attempts;        /* 8: transient failures before anything was sent, then review */
    int max_sessions;        /* 4: concurrent ERP sessions (licences often count them) */
    int key_length;          /* 24 (INVOICE_KEY_LEN): the whole key fits most reference fields */
    long backoff_base_ms;    /* 1000: first backoff step (full jitter) */
    long backoff_cap_ms;     /* 60000: largest backoff: a minute keeps an outage cheap */
    long lease_ms;           /* 300000: an item stays one run's for 5 minutes between renewals;
                              * much longer than any exchange, short enough after a crash */
    size_t max_body;         /* 4 MiB: largest response read (ERP screens are far smaller) */
    long max_redirects;      /* 5: redirects followed per request */
};

struct flow {
    char *path;
    char *name;
    char *base_url;  /* default ERP URL, overridden by --erp / APBOT_ERP_URL; no user:pass@ */
    bool tls_verify; /* false only with an explicit opt-out in the flow */
    char *ca_file;   /* or NULL */
    bool basic_auth; /* send APBOT_ERP_USER/PASSWORD as HTTP Basic on every request */
    enum flow_json_decimal json_decimal;
    enum flow_json_date json_date;
    struct flow_header *headers; /* sent on every request after the login */
    size_t n_headers;
    struct flow_marker *session_expired; /* any one matching: the session is gone */
    size_t n_session_expired;
    struct flow_login login;
    struct flow_lookup lookup;
    struct flow_step *steps; /* the post, in order */
    size_t n_steps;
    struct flow_rule *outcomes; /* final outcome rules for the post (the last step's answer) */
    size_t n_outcomes;
    struct flow_list list;
    struct flow_resolve *resolves; /* reference data the post steps use */
    size_t n_resolves;
    struct flow_policy policy;
    /* lines in the flow file, for messages (0 when absent) */
    int line, erp_line, post_line, outcomes_line, policy_line;
};

/*
 * Loads and validates a flow. On failure returns APBOT_E_PARSE (not XML, DOCTYPE, schema),
 * APBOT_E_INVAL (semantic problems), APBOT_E_IO or APBOT_E_LIMIT (file over 1 MiB), leaves
 * *ret untouched and writes every problem found (one per line, "file:line: message", sorted
 * by line) into err. On success *ret is the caller's (flow_free).
 */
int flow_load(const char *path, struct flow **ret, char *err, size_t errlen) APBOT_MUST_USE;
void flow_free(struct flow *f); /* NULL is fine */

/* Index of the committing step (a loaded flow has exactly one); 0 for a flow without. */
size_t flow_commit_index(const struct flow *f);
/* Whether the flow can look a key up / list a day (by a GET or a composed request). */
bool flow_has_lookup(const struct flow *f);
bool flow_has_list(const struct flow *f);

/* Values the templates can use. Any pointer may be NULL and any count 0 (the variable is then
 * empty). Borrowed: nothing is kept after flow_expand returns. */
struct flow_vars {
    const struct invoice *inv; /* invoice.*, vendor.*; its exponent also formats line amounts */
    const char *key;           /* full identity key; cut to policy.key_length on expansion */
    const char *date;          /* YYYY-MM-DD: the listed day */
    const char *from, *to;     /* YYYY-MM-DD: the listed range */
    int page;                  /* list page, from 1 */
    const char *user;          /* secret.user */
    const char *password;      /* secret.password */
    const char *doc;           /* the document number captured so far */
    const char *const *capture_names; /* capture.NAME = capture_values[i] */
    const char *const *capture_values;
    size_t n_captures;
    const char *const *row_names; /* row.COLUMN = row_values[i] (a lookup candidate's cells) */
    const char *const *row_values;
    size_t n_row;
    const struct invoice_line *line;  /* line.*: the line being filled in a <lines> */
    size_t line_n;                    /* its number, 1-based; 0 = none */
    const struct linetax *taxes;      /* the tax of inv's lines (model/linetax.h), worked out
                                       * once; NULL: worked out for each placeholder that needs
                                       * it (${line.tax}, ${line.gross}) */
    long page_size;                   /* list: ${limit}, and ${offset} = (page - 1) * page_size */
    const char *code;                 /* ${code}: the code a <resolve> looks up */
    const char *const *session_names; /* session.NAME = session_values[i] */
    const char *const *session_values;
    size_t n_session;
    /* ref.NAME.COLUMN and cookie.NAME are asked of the caller: var is the whole variable name
     * ("ref.party.id", "cookie.csrftoken", len bytes), line_n the line being expanded (0 for
     * none). The text is borrowed until the expansion returns; NULL is empty. No I/O: a
     * caller resolves what a request needs before expanding it. */
    const char *(*find)(void *ctx, const char *var, size_t len, size_t line_n);
    void *find_ctx;
};

/*
 * Expands a template (a field value or a templated field name). Heap result in *ret; on
 * failure *ret is untouched and err says why: APBOT_E_DATA when the invoice carries a value
 * the flow cannot take (a map: without a mapping for it; a business exception, never a
 * retry), APBOT_E_INVAL for a value of the wrong shape, APBOT_E_LIMIT past 64 KiB. Unknown
 * variables were refused at load time.
 */
int flow_expand(const struct flow *f, const char *tmpl, const struct flow_vars *vars, char **ret,
                char *err, size_t errlen) APBOT_MUST_USE;

/*
 * Expands a JSON body template (struct flow_send's json) into JSON text (heap, *ret_len bytes
 * without the NUL): a string that is one placeholder ending in |json:TYPE becomes a JSON value
 * of that type (decimal and date in the ERP's encoding, <json-values>; an empty value null),
 * every other string is expanded as text and stays one JSON string (quotes, backslashes and
 * line breaks escaped: a value can never break out of it), {"$each-line": T} becomes an array
 * of T expanded once per invoice line (with line.* set), numbers stay as written. Errors as
 * flow_expand, and APBOT_E_INVAL for a value that is not of its type (an id that is not an
 * integer, raw text that is not JSON), APBOT_E_LIMIT past FLOW_JSON_MAX bytes.
 */
#define FLOW_JSON_MAX (1024 * 1024)
int flow_json_expand(const struct flow *f, const struct json_t *tpl, const struct flow_vars *vars,
                     char **ret, size_t *ret_len, char *err, size_t errlen) APBOT_MUST_USE;

/*
 * Expands a template that is one amount (a <compare-amount>'s equals: one placeholder of an
 * amount variable or expression, formatters that keep an amount, `abs`): *ret_minor and
 * *ret_exponent (the invoice's). APBOT_E_DATA as flow_expand (a line tax that cannot be told,
 * a sum out of range), APBOT_E_INVAL when it is no amount (no invoice, a template of another
 * shape: refused at load). Outputs untouched on failure.
 */
int flow_expand_amount(const struct flow *f, const char *tmpl, const struct flow_vars *vars,
                       int64_t *ret_minor, int *ret_exponent, char *err,
                       size_t errlen) APBOT_MUST_USE;

/* tmpl itself when it has no placeholder ("${") and is not too long to expand: flow_expand
 * would give a copy of it, whatever the vars. NULL otherwise (expand it). */
const char *flow_literal(const char *tmpl);

/* The key as the flow writes it (first key_length characters). Heap; NULL for NULL. */
char *flow_key_cut(const struct flow *f, const char *key);

/* The defaults of every policy number (what a flow without <policy> gets). Cannot fail. */
struct flow_policy flow_policy_default(void);

#endif
