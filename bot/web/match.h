/*
 * match.h - PCRE2 patterns for outcome rules and markers, with named groups, run under a
 * per-page work budget.
 *
 * PCRE2's own match limit counts per start position, so on a page of n bytes one rule may
 * cost n times the limit (a `(?:a|.*.*.*[XY])` marker held a worker 105 s on a 2 MB page).
 * Here every pattern step is counted against a struct match_budget that the caller creates
 * for one page and shares between every pattern it runs on that page: when it runs out, or
 * when its cancel flag is raised, the pattern stops with MATCH_ABORTED, and so does every
 * later pattern on the same budget. ABORTED is neither a match nor a no-match: the caller
 * treats the answer as unknown and names the rule in its evidence.
 */
#ifndef APBOT_MATCH_H
#define APBOT_MATCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "apbot/error.h"

struct match_re;
struct match_result;

/* The budget of a page of len bytes: MATCH_BUDGET_BASE + MATCH_BUDGET_PER_BYTE * len steps,
 * at most MATCH_BUDGET_MAX. Ordinary rules spend 0.2-0.5 steps per byte each (figures in
 * match.c), so a page has room for dozens of them; a runaway pattern stops after 0.3 s on a
 * 2 MB page (0.8 s on a loaded machine); the cancel flag is polled at every step. */
#define MATCH_BUDGET_BASE 1000000u
#define MATCH_BUDGET_PER_BYTE 32u
#define MATCH_BUDGET_MAX 512000000u

/*
 * The work budget of one page. A small stack struct: set it up with match_budget_init, pass
 * it to every match_run on the page, read its fields, never write them. One budget is used
 * by one thread at a time. Needs no cleanup.
 */
struct match_budget {
    uint64_t left;            /* steps still allowed */
    uint64_t used;            /* steps spent so far */
    const atomic_int *cancel; /* non-NULL: a non-zero value stops the pattern under way
                               * at its next step */
    bool exhausted;           /* a pattern ran out of steps */
    bool cancelled;           /* the cancel flag stopped a pattern */
    bool limited;             /* a PCRE2 memory or depth limit stopped a pattern */
};

/* Result of one pattern on one page. */
enum match_outcome {
    MATCH_NONE = 0, /* ran to its end without a match */
    MATCH_FOUND,    /* matched */
    MATCH_ABORTED,  /* stopped before deciding (budget, cancel, PCRE2 limit): unknown */
};

/* "none" / "found" / "aborted". */
const char *match_outcome_name(enum match_outcome o);

/* The steps a page of len bytes gets (see MATCH_BUDGET_BASE). Cannot fail. */
uint64_t match_budget_for(size_t len);
/* Starts a budget of `steps` watching cancel (may be NULL): for a page,
 * match_budget_init(&b, match_budget_for(len), cancel). Cannot fail. */
void match_budget_init(struct match_budget *b, uint64_t steps, const atomic_int *cancel);
/* Why the budget stopped a pattern: "work budget exhausted", "cancelled", "PCRE2 limit", or
 * NULL when it has not. Static text. */
const char *match_budget_reason(const struct match_budget *b);

/* Compiles pattern (UTF, invalid UTF in subjects tolerated; JIT when the platform has it).
 * err gets PCRE2's message and offset. */
int match_compile(const char *pattern, struct match_re **ret, char *err,
                  size_t errlen) APBOT_MUST_USE;
void match_free(struct match_re *re); /* NULL is fine */
/* The source pattern, valid while re lives. */
const char *match_pattern(const struct match_re *re);

/*
 * Matches subject[0..len) spending steps of b. On MATCH_FOUND, when ret is non-NULL, *ret
 * gets a result holding the named groups (free with match_result_free); otherwise *ret is
 * untouched. A budget already spent or cancelled gives MATCH_ABORTED at once, without work;
 * so do bad arguments (re or b NULL, subject NULL with len > 0).
 */
enum match_outcome match_run(const struct match_re *re, const char *subject, size_t len,
                             struct match_budget *b, struct match_result **ret) APBOT_MUST_USE;

/* match_run on a budget of its own (match_budget_for(len), no cancel flag), for one-off checks
 * (flow load). True only on MATCH_FOUND: an aborted match reads as false, so pages use
 * match_run, which tells the two apart. */
bool match_exec(const struct match_re *re, const char *subject, size_t len,
                struct match_result **ret);
/* Named group value (heap copy) or NULL when unset/unknown. */
char *match_group(const struct match_result *m, const char *name);
void match_result_free(struct match_result *m);
/* The groups of a and b as one result (a's first; a group b sets that a left unset is b's).
 * Takes both (either may be NULL); the result is freed with match_result_free. */
struct match_result *match_result_join(struct match_result *a, struct match_result *b);

/* For tests and evidence: the needle set match_compile derived (match.c), one literal string
 * per top-level alternative, of which every match contains one; match_run answers MATCH_NONE
 * without work on a page that holds none. Returns the count and points *ret (may be NULL) at
 * the strings, valid while re lives; 0 (and NULL) when the pattern has no set and always
 * runs. */
size_t match_needles(const struct match_re *re, const char *const **ret);

/*
 * True when re can match no text made from subject[0..len) by turning some of its bytes into
 * `fill` (subject itself is one): re has a needle set, and each needle has a run of bytes
 * between its `fill` bytes (its longest) that subject does not hold. A needle in such a text
 * would have every byte that is not `fill` from subject, at the same places, so it holds no
 * needle, and match_run answers on it MATCH_NONE without work - or MATCH_ABORTED on a spent or
 * cancelled budget, as on any subject. False when unsure. One memmem per needle, no budget.
 */
bool match_excludes(const struct match_re *re, const char *subject, size_t len, char fill);

/* True when the pattern has a named group `name`, e.g. "doc". */
bool match_has_group(const struct match_re *re, const char *name);

/* True when status (e.g. 503) matches a status spec: "200", "5xx", "429,503", "4xx,500". */
bool match_status(const char *spec, long status);
/* True when spec is a well-formed status spec. */
bool match_status_valid(const char *spec);

#endif
