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

#endif
