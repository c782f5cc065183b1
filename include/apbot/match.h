/*
 * match.h - PCRE2 patterns for outcome rules and markers, with named groups.
 */
#ifndef APBOT_MATCH_H
#define APBOT_MATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "apbot/error.h"

struct match_re;
struct match_result;

/* Compiles pattern (UTF, no JIT requirement). err gets PCRE2's message and offset. */
int match_compile(const char *pattern, struct match_re **ret, char *err,
                  size_t errlen) APBOT_MUST_USE;
void match_free(struct match_re *re); /* NULL is fine */
/* The source pattern, valid while re lives. */
const char *match_pattern(const struct match_re *re);

/* Matches subject[0..len). Returns true on a match and, when ret is non-NULL, a result
 * holding the named groups (free with match_result_free). A match limit bounds the work. */
bool match_exec(const struct match_re *re, const char *subject, size_t len,
                struct match_result **ret);
/* Named group value (heap copy) or NULL when unset/unknown. */
char *match_group(const struct match_result *m, const char *name);
void match_result_free(struct match_result *m);

/* True when the pattern has a named group `name`, e.g. "doc". */
bool match_has_group(const struct match_re *re, const char *name);

/* True when status (e.g. 503) matches a status spec: "200", "5xx", "429,503", "4xx,500". */
bool match_status(const char *spec, long status);
/* True when spec is a well-formed status spec. */
bool match_status_valid(const char *spec);

#endif
