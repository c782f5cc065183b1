/*
 * mem.c - allocation that aborts on out-of-memory (see mem.h for why that is safe here).
 */
#include "apbot/mem.h"

#include <stdlib.h>
#include <string.h>

void *apbot_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        abort();
    return p;
}

void *apbot_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        abort();
    return p;
}

void *apbot_xrealloc(void *old, size_t n)
{
    void *p = realloc(old, n ? n : 1);
    if (!p)
        abort();
    return p;
}

char *apbot_xstrndup(const char *s, size_t n)
{
    char *p = apbot_xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *apbot_xstrdup(const char *s)
{
    return s ? apbot_xstrndup(s, strlen(s)) : NULL;
}
