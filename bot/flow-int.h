/*
 * flow-int.h - what the three parts of the flow module share, and nothing else includes.
 *
 * flow_load.c turns the XML into struct flow (parse, RelaxNG, typed attributes, compiled
 * patterns, the co-occurrence rules RelaxNG cannot say) and owns the problem list;
 * flow_check.c checks the meaning of the built flow (variables in their places, XPath, the
 * safety rules of the post, policy relations); flow_template.c parses, checks and expands
 * templates. Every problem goes through flow_problem() as "file:line: message".
 */
#ifndef APBOT_FLOW_INT_H
#define APBOT_FLOW_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "apbot/flow.h"

#define FLOW_NS "urn:apbot:flow:1"
#define FLOW_PROBLEMS_MAX 200 /* problems kept for the report; the rest are counted */

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
};

/* Records a problem at line (0: the file as a whole). Cannot fail. */
void flow_problem(struct flow_ctx *c, long line, const char *fmt, ...) APBOT_PRINTF(3, 4);

/* flows/flow.rng, embedded at build time (cmake/embed.cmake); NUL-terminated. */
extern const unsigned char flow_schema_rng[];
extern const size_t flow_schema_rng_len;

/* ---- flow_check.c ---------------------------------------------------------------------- */

/* Runs every semantic check on the built flow c->f, recording problems. */
void flow_check(struct flow_ctx *c);

/* ---- flow_template.c ------------------------------------------------------------------- */

/* Where a template sits decides which variables it may use. */
enum {
    FLOW_P_LOGIN_URL = 1 << 0,
    FLOW_P_LOGIN_FIELD = 1 << 1,
    FLOW_P_LOOKUP = 1 << 2, /* lookup URL and <expect> */
    FLOW_P_STEP_URL = 1 << 3,
    FLOW_P_STEP_FIELD = 1 << 4,
    FLOW_P_LIST_URL = 1 << 5,
};

/*
 * Checks one template: every placeholder names a variable allowed at `place` (a FLOW_P_
 * bit), known formatters with valid arguments applied to values of the right kind. `what`
 * names the place in messages ("lookup get", "field 'x'").
 */
void flow_tpl_check(struct flow_ctx *c, const char *tmpl, unsigned place, long line,
                    const char *what);
/* True when the template has a placeholder of variable `var` (exact name). */
bool flow_tpl_uses(const char *tmpl, const char *var);

/* A date pattern: literal text plus %d %m %Y %y %%. */
bool flow_date_pattern_ok(const char *s, size_t len);
/* s[0..len) is a decimal number in [min, max] (at most 9 digits): *ret gets it. */
bool flow_parse_count(const char *s, size_t len, long min, long max, long *ret);

#endif
