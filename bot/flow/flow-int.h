/*
 * flow-int.h - what the parts of the flow module share, and nothing else in the library
 * includes (the tests do, to reach its internals).
 *
 * Bottom up: flow.c holds the problem list and the flow's small data (names, defaults,
 * flow_free); flow_template.c parses, checks and expands templates; flow_check.c checks the
 * meaning of the built flow (variables in their places, XPath, the safety rules of the post,
 * policy relations); flow_load.c turns the XML into struct flow (parse, RelaxNG, typed
 * attributes, compiled patterns, the co-occurrence rules RelaxNG cannot say) and calls the
 * checks. Each part calls only those below it. Every problem goes through flow_problem() as
 * "file:line: message".
 */
#ifndef APBOT_FLOW_INT_H
#define APBOT_FLOW_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "apbot/flow.h"

#define FLOW_NS "urn:apbot:flow:1"
#define FLOW_PROBLEMS_MAX 200   /* problems kept for the report; the rest are counted */
#define FLOW_LIST_MAX 1000      /* elements of one kind in one place (fields, rules, ...) */
#define FLOW_XPATH_MAX_LEN 1024 /* bytes of one XPath expression */
#define FLOW_XPATH_MAX_DEPTH 32 /* nesting of ( and [ in one XPath (libxml2 recurses) */

struct flow_problem_rec {
    long line;
    char *text; /* "file:line: message" */
};

/* One load: the file, the flow being built, the problems found so far. */
struct flow_ctx {
    const char *path;
    struct flow_problem_rec *probs;
    size_t n_probs; /* problems found (some may not be kept) */
    size_t n_kept;
    struct flow *f;
    const char *text; /* the file, while it is built (for element lines) */
    size_t text_len;
    size_t *line_starts; /* offset of each line in text */
    size_t n_lines;
    const char **sessions; /* ${session.NAME}s the login and its calls capture (borrowed) */
    size_t n_sessions;
};

/* ---- flow.c ------------------------------------------------------------------------------ */

/* Records a problem at line (0: the file as a whole). Cannot fail. */
void flow_problem(struct flow_ctx *c, long line, const char *fmt, ...) APBOT_PRINTF(3, 4);

/* True when a problem was already recorded at line (a follow-on complaint would be noise). */
bool flow_problem_at(const struct flow_ctx *c, long line);

/* Copies the problems into err sorted by line (stable), whole lines only, with a count of
 * what did not fit. err may be NULL. */
void flow_problems_out(struct flow_ctx *c, char *err, size_t errlen);

/* Frees the problems kept (the count stays). */
void flow_problems_free(struct flow_ctx *c);

/* The value an attribute names; the __COUNT value when name is NULL or no such name. */
enum flow_outcome flow_outcome_from_name(const char *name);
enum flow_option flow_option_from_name(const char *name);
enum flow_missing flow_missing_from_name(const char *name);
enum flow_list_by flow_list_by_from_name(const char *name);
enum flow_when flow_when_from_name(const char *name); /* a when-missing value ("any", ...) */

#ifdef APBOT_UNITTEST /* static in the product (base/unittest.h) */
/* The names of the values (the other way, flow_outcome_name and flow_option_name, is in
 * flow.h: the trace prints them); "invalid" for a value out of range. */
const char *flow_missing_name(enum flow_missing m); /* "error", "add", "skip" */
const char *flow_list_by_name(enum flow_list_by b); /* "booked", "invoice" */
#endif

/* flows/flow.rng, embedded at build time (cmake/embed.cmake); NUL-terminated. The loader
 * validates with it; test_flow holds it to the file. */
extern const unsigned char flow_schema_rng[];
extern const size_t flow_schema_rng_len;

/* ---- flow_check.c ---------------------------------------------------------------------- */

/* Runs every semantic check on the built flow c->f, recording problems. */
void flow_check(struct flow_ctx *c);

/* ---- flow_template.c ------------------------------------------------------------------- */

/* Where a template sits decides which variables it may use. */
enum {
    FLOW_P_LOGIN_URL = 1 << 0,
    FLOW_P_LOGIN_FIELD = 1 << 1, /* a login form field's value (or name) */
    FLOW_P_LOOKUP = 1 << 2,      /* lookup URL, <expect>, <finished> */
    FLOW_P_DETAIL_URL = 1 << 3,  /* <detail get> */
    FLOW_P_STEP_URL = 1 << 4,
    FLOW_P_STEP_FIELD = 1 << 5,
    FLOW_P_LINES = 1 << 6,    /* a field inside <lines> (or a JSON body's {"$each-line": ...}) */
    FLOW_P_LIST_URL = 1 << 7, /* <list>'s URL and request */
    FLOW_P_HEADER = 1 << 8,   /* an <erp><header> value */
    FLOW_P_CALL = 1 << 9,     /* a <then> call after the login */
    FLOW_P_RESOLVE = 1 << 10, /* a <resolve>'s request */
};

/* What a template may refer to where it sits. Zero-initialise, then set what applies. */
struct flow_scope {
    unsigned place;              /* one FLOW_P_ bit */
    bool name;                   /* the template is a field name (never a secret) */
    bool doc;                    /* ${doc} is captured by an earlier step */
    const char *const *captures; /* NAMEs usable as ${capture.NAME} */
    size_t n_captures;
    const struct flow_table *rows; /* columns usable as ${row.COLUMN} (detail get) */
    const char *hint;              /* appended to "not captured" messages, or NULL */
    const char *const *sessions;   /* NAMEs usable as ${session.NAME} (captured before here) */
    size_t n_sessions;
    bool json_value; /* the template is a whole string of a JSON body: json:TYPE may end it */
};

/*
 * Checks one template: every placeholder names a variable allowed in scope sc, known
 * formatters with valid arguments applied to values of the right kind. `what` names the
 * place in messages ("lookup get", "field 'x'").
 */
void flow_tpl_check(struct flow_ctx *c, const char *tmpl, const struct flow_scope *sc, long line,
                    const char *what);
/* Checks a template that must be one amount (a <compare-amount>'s equals): one placeholder of
 * an amount variable or expression, no formatter but abs; then as flow_tpl_check. */
void flow_amount_tpl_check(struct flow_ctx *c, const char *tmpl, const struct flow_scope *sc,
                           long line, const char *what);
/* True when the template has a placeholder of variable `var`: the exact name, or with a name
 * ending in '.' ("row.", "line.") any variable of that family. */
bool flow_tpl_uses(const char *tmpl, const char *var);

/* The placeholder a JSON body's string consists of, when it is one placeholder whose last
 * formatter is json:TYPE: the TYPE's name (static) and, in *ret_plain, the template without
 * that formatter (heap). NULL otherwise (*ret_plain untouched). */
const char *flow_tpl_json_type(const char *tmpl, char **ret_plain);

/* ---- flow_json.c ----------------------------------------------------------------------- */

/* A <json> element's text as a template (jansson's tree, numbers kept exact: web/jdoc.h), or
 * NULL with a problem recorded. The caller owns the reference (json_decref). */
struct json_t *flow_json_compile(struct flow_ctx *c, const char *text, long line, const char *what);
/* Checks every string of a JSON template as a template at its place ({"$each-line": ...} in a
 * post step's body makes line.* available inside it). */
void flow_json_check(struct flow_ctx *c, const struct json_t *tpl, const struct flow_scope *sc,
                     long line, const char *what);
/* flow_tpl_uses over every string of a JSON template. */
bool flow_json_uses(const struct json_t *tpl, const char *var);

/* A date pattern: literal text plus %d %m %Y %y %%. */
bool flow_date_pattern_ok(const char *s, size_t len);
/* s[0..len) is a decimal number in [min, max] (at most 9 digits): *ret gets it. */
bool flow_parse_count(const char *s, size_t len, long min, long max, long *ret);

#endif
