/*
 * flow.h - a flow: how to drive one ERP's screens, loaded from XML (flows/NAME.xml), validated
 * against flows/flow.rng with libxml2's RelaxNG, then checked semantically (variables,
 * PCRE2 patterns, XPath, a post with a `completed` rule). The loaded flow is plain data
 * the runner and the report read; it owns every string and compiled pattern.
 *
 * Templates: "${name}" or "${name|formatter:arg}". Variables: key, invoice.number,
 * invoice.vendor_id, invoice.vendor_name, invoice.doc_type, invoice.issue_date,
 * invoice.due_date, invoice.currency, invoice.payable, invoice.net, invoice.tax,
 * invoice.gl_account (first line's), invoice.description (first line's), vendor.id,
 * secret.user, secret.password (from APBOT_ERP_USER / APBOT_ERP_PASSWORD only), date,
 * page. Formatters: date:<strftime-like pattern of %d %m %Y %y>, amount:<dec><group>
 * (e.g. "amount:,." for 1.234,56; group may be omitted), map:a=b,c=d, upper, lower,
 * trunc:N, url (percent-encode). The key is cut to policy.key_length characters.
 * Also: vendor.name (= invoice.vendor_name) and the formatter abs (amount without its sign).
 * Formatters chain left to right: ${invoice.payable|abs|amount:,.}. Where a variable may be
 * used is checked at load: secret.* only in form fields, date/page only in the list URL,
 * invoice/key values only in the lookup and the post. docs/writing-flows.md has the details.
 */
#ifndef APBOT_FLOW_H
#define APBOT_FLOW_H

#include <stdbool.h>
#include <stddef.h>

#include "apbot/error.h"

struct match_re;
struct invoice;

/* What a response means. If you add one, add its name in flow.c. */
enum flow_outcome {
    FLOW_OUT_COMPLETED = 0,   /* booked: the rule's (?<doc>...) group is the document number */
    FLOW_OUT_REJECTED,        /* validation message: (?<reason>...) is kept */
    FLOW_OUT_ALREADY_EXISTS,  /* the ERP says this document exists: (?<doc>...) if it names it */
    FLOW_OUT_NOT_SENT,        /* provably not processed (overload before processing, ...) */
    FLOW_OUT_SESSION_EXPIRED, /* login page instead of the answer: not processed, log in again */
    FLOW_OUT_UNKNOWN,         /* ambiguous: reconcile */
    FLOW_OUT__COUNT
};
const char *flow_outcome_name(enum flow_outcome o); /* "completed", "rejected", ... */

/* One ordered outcome rule: status spec AND body pattern must both match (NULL = any). */
struct flow_rule {
    char *name; /* for evidence, e.g. "posted-banner" */
    enum flow_outcome outcome;
    char *status;          /* match_status spec or NULL */
    struct match_re *body; /* or NULL */
    int line;              /* line in the flow file */
};

struct flow_field {
    char *name;  /* form control name */
    char *value; /* template */
    int line;
};

/* A form to fill: found by XPath on the current page, hidden fields kept. */
struct flow_form {
    char *xpath;
    struct flow_field *fields;
    size_t n_fields;
    char *submit; /* name of the submit button to press, or NULL */
    int line;
};

/* One step of a multi-step entry. */
struct flow_step {
    char *name;
    char *get; /* URL template to fetch the page first, or NULL: use the last answer */
    struct flow_form form;
    bool commits;            /* true on the step whose submit may book the document; steps before it
                              * can never book, so an ambiguous answer there is "not sent" */
    struct flow_rule *rules; /* step rules, tried first (e.g. a rejection at "check") */
    size_t n_rules;
    int line;
};

struct flow_column {
    char *name;  /* "doc", "reference", "amount", "vendor", "invoice_number", "date", ... */
    char *xpath; /* relative to the row */
    int line;
};

/* A result table: rows by XPath, named columns, an explicit "no results" marker. */
struct flow_table {
    char *rows; /* XPath of the row nodes */
    struct flow_column *cols;
    size_t n_cols;
    char *empty;         /* XPath that exists on an answered page with no hits, or NULL */
    char *next;          /* XPath of the next-page link (href), or NULL (list only) */
    char amount_decimal; /* decimal separator of amounts in this table */
    char amount_group;   /* grouping separator or '\0' */
    char *date_format;   /* pattern of dates in this table, e.g. "%d.%m.%Y" */
    int line;
};

struct flow_login {
    bool present; /* false: no form login (HTTP Basic only, or open) */
    char *get;    /* URL of the login page */
    struct flow_form form;
    struct match_re *success; /* marker on the page after login */
    struct flow_rule *rules;  /* e.g. refused credentials -> systemic */
    size_t n_rules;
    int line;
};

struct flow_lookup {
    char *get; /* URL template, e.g. ".../search?reference=${key|url}" */
    struct flow_table table;
    char *key_column;          /* column compared exactly with the (cut) key before a hit counts;
                                * NULL only when n_expect > 0 (lookup by natural key) */
    struct flow_field *expect; /* further exact compares: name = column, value = template
                                * (e.g. vendor = ${vendor.id}); every one must equal its cell */
    size_t n_expect;
    int line;
};

struct flow_list {
    char *get; /* URL template with ${date} and ${page} */
    struct flow_table table;
    int max_pages; /* bound on pages read */
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
    char *base_url;  /* default ERP URL, overridden by --erp / APBOT_ERP_URL */
    bool tls_verify; /* false only with an explicit opt-out in the flow */
    char *ca_file;   /* or NULL */
    bool basic_auth; /* send APBOT_ERP_USER/PASSWORD as HTTP Basic on every request */
    struct match_re *session_expired; /* marker of the login page shown instead of a screen */
    struct flow_login login;
    struct flow_lookup lookup;
    struct flow_step *steps; /* the post, in order */
    size_t n_steps;
    struct flow_rule *outcomes; /* final outcome rules for the post, in order */
    size_t n_outcomes;
    struct flow_list list;
    struct flow_policy policy;
    /* lines in the flow file, for messages (0 when absent) */
    int line, erp_line, post_line, outcomes_line, policy_line;
};

/*
 * Loads and validates a flow. On failure returns APBOT_E_PARSE/APBOT_E_INVAL and writes every
 * problem found (one per line, "file:line: message") into err.
 */
int flow_load(const char *path, struct flow **ret, char *err, size_t errlen) APBOT_MUST_USE;
void flow_free(struct flow *f); /* NULL is fine */

/* Values the templates can use. Any pointer may be NULL (the variable is then empty). */
struct flow_vars {
    const struct invoice *inv;
    const char *key;      /* full identity key; cut to policy.key_length on expansion */
    const char *date;     /* YYYY-MM-DD for the list */
    int page;             /* list page, from 1 */
    const char *user;     /* secret.user */
    const char *password; /* secret.password */
};

/* Expands a template. Heap result in *ret. Unknown variables were refused at load time. */
int flow_expand(const struct flow *f, const char *tmpl, const struct flow_vars *vars, char **ret,
                char *err, size_t errlen) APBOT_MUST_USE;

/* The key as the flow writes it (first key_length characters). Heap. */
char *flow_key_cut(const struct flow *f, const char *key);

/* FLOW_OUT__COUNT when name is not an outcome name. */
enum flow_outcome flow_outcome_from_name(const char *name);

/* The defaults of every policy number (what a flow without <policy> gets). Cannot fail. */
struct flow_policy flow_policy_default(void);

/*
 * Joins an expanded URL template to the base URL: "http(s)://..." is used as is, "/path"
 * replaces the base's path, anything else is appended after a '/'. Heap; NULL if path is NULL.
 */
char *flow_url(const char *base, const char *path);

/* The RelaxNG schema apbot validates with (a compiled-in copy of flows/flow.rng). Heap. */
char *flow_schema_text(void);

#endif
