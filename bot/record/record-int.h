/*
 * record-int.h - what the parts of the recorder share, and nothing else in the library
 * includes (the tests do, to reach its internals).
 *
 * Bottom up: har.c reads the HAR; record_values.c renders the sample invoice's values in every
 * form and says which a recorded text is; record_ex.c turns the HAR's entries into exchanges
 * (requests and answers parsed, what each carries); record_tpl.c makes templates of what a
 * request sent (fields, URLs, JSON bodies); record_session.c decides the login and the
 * session; record_post.c the committing request, its document number, the steps before it and
 * the follow-up steps; record_table.c the lookup and the list (HTML rows or a JSON array);
 * record_write.c writes the draft; record.c reads the inputs and runs the parts in order.
 * Every decision the draft could not make is a <todo> (rec_todo) the person answers.
 */
#ifndef APBOT_RECORD_INT_H
#define APBOT_RECORD_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "apbot/buf.h"
#include "apbot/record.h"
#include "record/har.h"
#include "web/page.h"

struct invoice;
struct page;
struct jdoc;
struct json_t;
struct _xmlDoc;

#define REC_FORMS_MAX 4096         /* forms of the sample's values (18 variables, 50 lines) */
#define REC_LINES_MAX 50           /* lines of a sample invoice the recorder reads */
#define REC_MATCH_MAX 32           /* matches of one text */
#define REC_DRAFT_MAX (512 * 1024) /* bytes of the draft (a flow file is at most 1 MiB) */
#define REC_TODOS_MAX 200          /* open decisions of one draft */
#define REC_NOTES_MAX 400          /* lines of the report */
#define REC_FORM_LOOKBACK 64       /* HTML answers searched back for the form a request came from */

/* ---- record_values.c ---------------------------------------------------------------------- */

enum rec_kind {
    REC_KIND_TEXT = 0, /* written as it is: numbers, names, codes */
    REC_KIND_AMOUNT,   /* an amount: amount:DG, abs decided for the whole flow */
    REC_KIND_DATE,     /* a date: date:PATTERN */
    REC_KIND_COUNT,    /* a short value (a line count, a quantity): a value only where the
                        * caller allows one (weak) */
    REC_KIND_DOCTYPE,  /* invoice.doc_type: found through a select offering a credit note */
};

/* One form of one of the sample's values. */
struct rec_form {
    const char *var; /* "invoice.payable", "line.net" (static) */
    char fmt[24];    /* the formatter: "amount:,.", "date:%d.%m.%Y", or "" */
    char *text;      /* what it renders for the sample */
    char *text_abs;  /* amounts: with abs before the format (a credit note's), else NULL */
    size_t line;     /* 0: the invoice's value; n: line n's */
    enum rec_kind kind;
    int rank; /* preference among the forms of one variable: lower first */
};

struct rec_values {
    const struct invoice *inv;
    struct rec_form *forms;
    size_t n, cap;
};

/* A recorded text that is a form of a value. */
struct rec_match {
    const struct rec_form *form;
    bool plain;  /* it is the form as rendered */
    bool abs;    /* it is the form with abs (equal to plain for a positive amount) */
    bool prefix; /* it starts with the form, then sep (a select's label: option label-prefix) */
    char sep[8]; /* with prefix: the separator after the value ("--"), maybe "" */
};

/* Renders every form of every variable for the sample inv (borrowed while v lives). */
void rec_values_init(struct rec_values *v, const struct invoice *inv);
void rec_values_done(struct rec_values *v);
/* The forms text equals, of line `line` (0: the invoice's values); weak admits the short ones.
 * Writes at most max into ret; returns how many. */
size_t rec_values_find(const struct rec_values *v, const char *text, size_t line, bool weak,
                       struct rec_match *ret, size_t max);
/* The forms text starts with, followed by a separator (a select's label). */
size_t rec_values_find_prefix(const struct rec_values *v, const char *text, size_t line,
                              struct rec_match *ret, size_t max);
/* The amounts a decimal number's text is (a JSON number, a tagged decimal): exact, in the
 * sample's currency, the sign aside when abs. */
size_t rec_values_find_amount(const struct rec_values *v, const char *decimal, size_t line,
                              struct rec_match *ret, size_t max);
/* The dates an ISO date (YYYY-MM-DD) is. */
size_t rec_values_find_date(const struct rec_values *v, const char *iso, size_t line,
                            struct rec_match *ret, size_t max);
/* True when text is some form of some value of the sample (not a short one). */
bool rec_values_is_sample(const struct rec_values *v, const char *text);
/* The number of distinct variables (of distinct lines) among the matches. */
size_t rec_match_vars(const struct rec_match *m, size_t n);
/* The match to write among matches of one variable: the ERP's amount style when known
 * (dec '\0': not known), else the lowest rank. NULL for n == 0. */
const struct rec_match *rec_match_best(const struct rec_match *m, size_t n, char dec, char group);
/* Learns the ERP's amount style from matches: a grouped form that alone matched. */
void rec_values_style(const struct rec_match *m, size_t n, char *dec, char *group);
/* The template of a match: "${var|abs|fmt<extra>}" plus the separator of a prefix match;
 * extra ("|trunc:30", "|json:decimal") goes last inside. */
void rec_match_template(const struct rec_match *m, bool use_abs, const char *extra, char *buf,
                        size_t len);

/* ---- record_ex.c: the exchanges ------------------------------------------------------------ */

/* What the recorder made of an exchange. */
enum rec_role {
    REC_ROLE_NONE = 0,   /* not (yet) part of the draft */
    REC_ROLE_SKIPPED,    /* not an exchange with the ERP: another origin, the browser's cache,
                          * a static file, no answer, a later hop of a redirect */
    REC_ROLE_LOGIN,      /* the login request */
    REC_ROLE_LOGIN_PAGE, /* the page holding the login form */
    REC_ROLE_THEN,       /* a call after the login whose answer the session keeps */
    REC_ROLE_RESOLVE,    /* a search that turned a code into an id the booking sent */
    REC_ROLE_PAGE,       /* the page a step's form came from */
    REC_ROLE_STEP,       /* a step before the committing one */
    REC_ROLE_COMMIT,     /* the committing request */
    REC_ROLE_FOLLOWUP,   /* a follow-up step (approve, post) on the document */
    REC_ROLE_LOOKUP,     /* a search for the reference */
    REC_ROLE_DETAIL,     /* a hit's detail page the lookup opens */
    REC_ROLE_LIST,       /* the day's listing */
    REC_ROLE__COUNT
};
const char *rec_role_name(enum rec_role r);

/* One exchange: a request and its final answer (after the redirect hops the HAR holds). */
struct rec_ex {
    const struct har_entry *e;   /* the request */
    const struct har_entry *ans; /* its final answer (e itself without redirects) */
    size_t hops;                 /* redirects followed to get there */
    char *path;                  /* the URL without scheme, host and port ("/erp/login?x=1") */
    struct har_pair *query;      /* the URL's query, decoded */
    size_t n_query;
    struct har_pair *form; /* an x-www-form-urlencoded body, decoded */
    size_t n_form;
    struct jdoc *jreq;      /* a JSON body, or NULL */
    struct jdoc *jans;      /* a JSON answer, or NULL */
    struct page *page;      /* an HTML answer, parsed (NULL when it is none) */
    struct _xmlDoc *doc;    /* the same as libxml2's tree, for the recorder's own reading */
    char *rule;             /* an HTML answer as outcome patterns see it (page_rule_text) */
    bool html, json, plain; /* the answer's kind */
    size_t values;          /* distinct values of the sample the request carries */
    enum rec_role role;
    /* rec_form_find's answer for this request, once found (the search is costly) */
    bool form_known, form_found;
    size_t form_page;
    int form_index;
    char *form_xpath;
};

/* ---- the recorder --------------------------------------------------------------------------- */

/* An open decision: a <todo> in the draft. */
struct rec_todo {
    char id[48];  /* "errors-check", "value-amount" (unique in the draft) */
    size_t entry; /* the HAR entry it comes from (1-based), 0: none */
    char *text;   /* what to decide */
};

/* A <resolve> the booking's ids came from. */
struct rec_resolve {
    char name[40];
    size_t ex;            /* the search */
    char code_tmpl[160];  /* the code: "${vendor.id}", "${line.gl_account}", "EXP" */
    char code_value[128]; /* as recorded */
    char pointer[256];    /* the records' array in the answer */
    bool per_line;
    struct {
        char name[48];
        char pointer[160];
    } cols[8]; /* cols[0]: the code's column */
    size_t n_cols;
};

/* A value the session keeps: captured from the login's (or a <then> call's) answer. */
struct rec_sess {
    char name[40];
    size_t ex;                  /* the exchange whose answer holds it */
    char pointer[256];          /* where, a JSON pointer */
    const struct json_t *value; /* borrowed from that answer */
    char *text;                 /* its text */
    bool secret;                /* a token: masked like the password */
    bool in_body;               /* later requests send it in their bodies */
};

/* A token a page holds that a header sends: captured by a <then> call fetching that page. */
struct rec_pagecap {
    char name[40];
    size_t ex; /* the page's exchange */
    char *re;  /* the capture's pattern */
};

struct rec {
    const struct record_request *rq;
    const struct har *har;
    const struct invoice *inv;
    struct rec_values vals;
    const char *user;     /* APBOT_ERP_USER, or NULL */
    const char *password; /* APBOT_ERP_PASSWORD, or NULL */
    char today[2][11];    /* the recording's day (YYYY-MM-DD, UTC and local) */

    char origin[512]; /* scheme://host:port of the ERP */
    struct rec_ex *ex;
    size_t n_ex;

    /* what was decided, for the draft */
    char *key_ref;     /* the reference the person typed (the key's place), or NULL */
    size_t commit;     /* index into ex of the committing request, or SIZE_MAX */
    char *doc;         /* the document number its answer showed */
    char dec, group;   /* the ERP's amount style ('\0': not seen) */
    bool use_abs;      /* amounts are written positive (the ERP takes a credit note's type) */
    char *doctype_map; /* "|map:invoice=KR,credit-note=KG", or NULL */
    bool json_tagged_decimal, json_number_decimal, json_tagged_date;
    bool basic;       /* HTTP Basic on every request */
    char *owned_user; /* the user name read from Basic credentials */
    size_t login;     /* index into ex of the login, or SIZE_MAX */
    size_t followups[16];
    size_t n_followups;
    const char *login_user;    /* the user name as recorded (borrowed), or NULL */
    const char *doctype_value; /* what the recording sent for the sample's document type */
    bool doctype_map_done;
    struct rec_resolve resolves[16];
    size_t n_resolves;
    struct rec_sess sess[16];
    size_t n_sess;
    struct rec_pagecap pagecap[4];
    size_t n_pagecap;
    struct rec_todo *pending; /* open decisions not yet written (rec_todo_flush) */
    size_t n_pending, cap_pending;

    /* the draft, section by section */
    struct apbot_buf erp, markers, login_x, lookup, resolves_x, post, list;
    bool full; /* a section passed its bound: the draft is not written */

    struct rec_todo *todos;
    size_t n_todos, cap_todos;
    char **notes; /* the report's lines: what was decided and why */
    size_t n_notes, cap_notes;
    size_t max_answer; /* bytes of the largest recorded answer */
};

/* Does a member or field name name what differs from invoice to invoice by an id of the ERP's
 * (a vendor, supplier, party, partner, an account, a currency)? (record_json.c) */
bool rec_key_is_entity(const char *key);
/* Records an open decision (id made unique) and writes its <todo> into b, indented. */
void rec_todo(struct rec *r, struct apbot_buf *b, const char *indent, const char *id, size_t entry,
              const char *fmt, ...) APBOT_PRINTF(6, 7);
/* Records an open decision to be written by the next rec_todo_flush (made inside a value,
 * written beside the element that holds it). */
void rec_todo_later(struct rec *r, const char *id, size_t entry, const char *fmt, ...)
    APBOT_PRINTF(4, 5);
/* Writes the pending open decisions into b, indented. */
void rec_todo_flush(struct rec *r, struct apbot_buf *b, const char *indent);
/* A word usable as a name in the flow ([a-z][a-z0-9_]*) from s, into buf; fallback when none. */
void rec_word(const char *s, const char *fallback, char *buf, size_t len);
/* Records a line of the report. */
void rec_note(struct rec *r, const char *fmt, ...) APBOT_PRINTF(2, 3);

/* ---- record_ex.c -------------------------------------------------------------------------- */

/* The work budget of one recording: bytes its searches of recorded texts may scan. */
#define REC_BUDGET_BYTES (24ull * 1024 * 1024 * 1024)
void rec_budget_reset(uint64_t bytes);
/* True once the budget is spent: searches found nothing since, the recording is refused. */
bool rec_budget_spent(void);
/* memmem under the budget (NULL once it is spent). */
const void *rec_find(const void *hay, size_t len, const void *needle, size_t nlen);
/* Builds r->ex from the HAR: requests paired with their final answers, skipped what is no
 * exchange with the ERP, parsed what the later parts read. */
void rec_ex_build(struct rec *r);
void rec_ex_free(struct rec *r);
/* The page of an HTML answer (parsed once, on first use), or NULL. */
struct page *rec_ex_page(struct rec_ex *x);
/* The value of the first query or form field named name, or NULL. */
const char *rec_ex_field(const struct rec_ex *x, const char *name);
/* True when the request (URL and body) carries text as a token (not inside a longer word). */
bool rec_ex_carries(const struct rec_ex *x, const char *text);
/* True when the answer (its body) holds text as a token. */
bool rec_ex_shows(const struct rec_ex *x, const char *text);
/* True when s holds t at a token boundary (no letter or digit on either side). */
bool rec_has_token(const char *s, size_t len, const char *t);
/* The answer's body (the final hop's), "" when none. */
const char *rec_ex_body(const struct rec_ex *x, size_t *ret_len);
/* True when the exchange reads (a GET, a JSON-RPC read) rather than writes. */
bool rec_ex_is_read(const struct rec_ex *x);
/* The JSON-RPC method the body names ("model.account.invoice.create"), or NULL. */
const char *rec_ex_rpc_method(const struct rec_ex *x);

/* What the page says of a control a value goes into. */
struct rec_select_info {
    bool is_select;
    const char *label; /* the chosen option's label */
    int maxlength;     /* a text input's maxlength, 0: none */
};

/* ---- record_form.c ------------------------------------------------------------------------ */

/* The form a submitted request came from. */
struct rec_formref {
    bool found;
    size_t page_ex;        /* the exchange whose answer holds the form */
    int index;             /* the form's place among the page's forms, from 1 */
    char xpath[640];       /* an XPath that finds it first: by id, name or action */
    struct page_form form; /* as the web module reads it (page defaults, buttons, selects) */
};
/* A control of that form. */
struct rec_control {
    bool in_page;  /* the page has it (a script may have added it) */
    bool password; /* type=password */
    bool hidden;   /* type=hidden */
    struct rec_select_info sel;
    const struct page_select *select; /* a select's options, or NULL */
    const char *page_value;           /* what the page holds, or NULL */
};
/* Finds the form exchange `at` submitted, on the latest recorded page before it. */
bool rec_form_find(struct rec *r, size_t at, struct rec_formref *ret);
void rec_formref_done(struct rec_formref *fr);
/* The page's value of control name, or NULL. */
const char *rec_form_default(const struct rec_formref *fr, const char *name);
/* True when name (with value, NULL: any) is a submit button of the form. */
bool rec_form_is_button(const struct rec_formref *fr, const char *name, const char *value);
size_t rec_form_buttons_named(const struct rec_formref *fr, const char *name);
const struct page_select *rec_form_select(const struct rec_formref *fr, const char *name);
/* What the form says of control name (value: what was sent, to find a select's label). */
void rec_form_control(struct rec *r, const struct rec_formref *fr, const char *name,
                      const char *value, struct rec_control *ret);

/* ---- record_tpl.c ------------------------------------------------------------------------- */

/* The length of the UTF-8 character at p (1-4), 0 when the bytes there are none (p is
 * NUL-terminated). */
size_t rec_utf8_char(const unsigned char *p);
/* True when the n bytes at s are UTF-8 text (NULs aside). */
bool rec_utf8_ok(const char *s, size_t n);
/* Escapes s for XML text or an attribute value into b (a byte that is no UTF-8: U+FFFD). */
int rec_xml(struct apbot_buf *b, const char *s) APBOT_MUST_USE;
/* Appending to a part of the draft; a part that passes its bound sets r->full (the draft is then
 * not written). rec_addx escapes for XML. */
void rec_add(struct rec *r, struct apbot_buf *b, const char *s);
void rec_addn(struct rec *r, struct apbot_buf *b, const void *p, size_t n);
void rec_addf(struct rec *r, struct apbot_buf *b, const char *fmt, ...) APBOT_PRINTF(3, 4);
void rec_addx(struct rec *r, struct apbot_buf *b, const char *s);
/* Escapes s as a PCRE2 literal (white space runs as \s+). Heap. */
char *rec_re_literal(const char *s, size_t len);
/* A pattern for a recorded value (a document number): digit runs as \d+ (a number alone as
 * [1-9][0-9]* when it has no leading zero), the rest literal. Heap. */
char *rec_re_value(const char *value);
/* The template of a recorded URL (its path and query: the key as ${key|url}, the document as
 * ${doc|url}, row values as ${row.COL|url}, dates as the list's), the origin dropped. Heap. */
struct rec_url_subst {
    const char *value; /* a recorded value, decoded */
    const char *tmpl;  /* what it becomes (with |url applied by the caller's template) */
};
char *rec_url_template(const char *path, const struct rec_url_subst *subst, size_t n);

/* The template a recorded field value becomes (for form fields, URL values and JSON strings):
 * the key, the document, a value of the sample (of line `line`), a literal. weak admits short
 * values; a select's options (NULL: none) admit label and label-prefix matches. */
enum rec_tpl_how {
    REC_TPL_LITERAL = 0, /* no value of the sample: kept as recorded */
    REC_TPL_VALUE,       /* a value of the sample */
    REC_TPL_KEY,         /* the reference the person typed: the key */
    REC_TPL_DOC,         /* the document number */
    REC_TPL_AMBIGUOUS,   /* two variables: an open decision */
};
struct rec_tpl {
    enum rec_tpl_how how;
    char tmpl[256];  /* the template (or the literal) */
    char option[16]; /* select: "", "label", "label-prefix" */
    char why[320];   /* for the report or the todo */
};
void rec_tpl_value(struct rec *r, const char *value, size_t line, bool weak,
                   const struct rec_select_info *sel, struct rec_tpl *ret);

/* ---- record_session.c --------------------------------------------------------------------- */

/* Finds the login and how the session goes on (cookies, Basic, a token in a header, calls
 * after the login); writes <erp>'s session parts into r->erp and <login> into r->login_x. */
void rec_session(struct rec *r);
/* The template a JSON value of a later request is when it came from the session (a captured
 * value): "${session.NAME|json:raw}", or NULL. */
const char *rec_session_value(struct rec *r, const struct json_t *v);

/* ---- record_post.c ------------------------------------------------------------------------ */

/* Finds the committing request and its document number, the steps before it and the
 * follow-up steps after; writes <post> into r->post (and <resolve>s into r->resolves). */
void rec_post(struct rec *r);
/* Whether select s offers a credit note beside the option `sent` (the sample's type): then the
 * document type's map is r->doctype_map. */
bool rec_doctype_from(struct rec *r, const struct page_select *s, const char *sent);

/* ---- record_json.c ------------------------------------------------------------------------ */

/* A date a listing's JSON request sends: the day (or one end of the range) the list asks for. */
struct rec_ldate {
    char text[64]; /* as sent: "2026-12-05", or the ISO date of a tagged date */
    char fmt[16];  /* its strftime pattern ("%Y-%m-%d"); "" for a tagged date */
    bool tagged;   /* {"__class__": "date", ...}: json:date */
};

/* What a JSON body template may use besides the sample's values. */
struct rec_jctx {
    size_t at;              /* the exchange the body is sent in */
    bool login;             /* the login: the user and the password are ${secret.*} */
    bool lines;             /* a post step: an array of the invoice's lines becomes $each-line */
    bool resolves;          /* ids the body sends may come from resolves (a post step) */
    bool doc;               /* the document number is ${doc} */
    bool code;              /* a resolve's request: the code is ${code} */
    const char *code_value; /* its recorded value */
    const char *code_var;   /* the line variable it is ("line.gl_account"), or NULL */
    const char *const *code_list; /* or the recorded list it is one of (per line) */
    size_t n_code_list;
    const struct rec_ldate *ldates; /* a listing's request: its dates are ${date} or ${from} */
    size_t n_ldates;                /* and ${to} (one or two) */
    long *page_size;                /* a listing's: its recorded limit where its paging was
                                       found (${offset}, ${limit}), else 0 */
};
/* {"__class__": "date", "year": 2026, ...}: its ISO text into buf, or false. */
bool rec_json_tagged_date(const struct json_t *v, char *buf, size_t len);
/* The JSON template of exchange x's body (heap, compact JSON text), open decisions recorded in
 * r and noted in *ret_todos; NULL when the body is not JSON. */
char *rec_json_body(struct rec *r, struct rec_ex *x, const struct rec_jctx *jc);

/* ---- record_table.c ----------------------------------------------------------------------- */

/* The lookup (a search for the reference) and the day's listing: r->lookup and r->list. */
void rec_lookup(struct rec *r);
void rec_list(struct rec *r);
/* Calls fn with every select of every recorded page (named or not) until it returns true. */
void rec_page_selects(struct rec *r,
                      bool (*fn)(struct rec *, const struct page_select *, const char *),
                      const char *sent);

/* ---- record.c ------------------------------------------------------------------------------ */

/* Starts a recording of har for the sample inv (both borrowed while r lives). */
void rec_begin(struct rec *r, const struct record_request *rq, const struct har *har,
               const struct invoice *inv);
/* Runs the parts after rec_ex_build: the key, the session, the post, the lookup, the list. */
void rec_analyse(struct rec *r);
/* Frees what r holds; a zeroed r is fine. */
void rec_end(struct rec *r);
/* The length of a secret of the HAR (the password, Basic credentials, a cookie, a session token)
 * text holds, 0 when none. */
size_t rec_secret_in(const struct rec *r, const char *text, size_t len);

/* ---- record_write.c ----------------------------------------------------------------------- */

/* The draft flow's text (heap): r's sections assembled. */
char *rec_draft(struct rec *r, const char *name, size_t exchanges, size_t *ret_len);

#endif
