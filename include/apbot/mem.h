/*
 * mem.h - apbot's out-of-memory policy, in one place: allocation that aborts.
 *
 * Every durable byte lives in SQLite, so aborting and restarting is a safe recovery from
 * out-of-memory (a restarted run recovers leases and reconciles); callers never check these
 * results for NULL. A size of 0 allocates 1 byte, so a valid pointer always comes back.
 */
#ifndef APBOT_MEM_H
#define APBOT_MEM_H

#include <stddef.h>

void *apbot_xmalloc(size_t n);
void *apbot_xcalloc(size_t n, size_t size);
void *apbot_xrealloc(void *old, size_t n);
/* A heap copy of s, or NULL when s is NULL. */
char *apbot_xstrdup(const char *s);
/* A heap copy of the n bytes at s plus a terminating NUL. */
char *apbot_xstrndup(const char *s, size_t n);

/* Zero bytes kept after the NUL of a text that pattern matching reads (an HTTP body, a page's
 * rule text). PCRE2's JIT compares 16 bytes at a time with aligned loads and may load the
 * whole block that holds a subject's end: no answer depends on bytes past the NUL, but a
 * memory checker rightly flags a load that reaches past an allocation or into bytes never
 * written. */
#define APBOT_TEXT_PAD 16

#endif
