/*
 * buf.c - bounded growing buffers and arrays (see buf.h). Leaf module: knows nothing of
 * invoices or ERPs.
 */
#include "apbot/buf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/mem.h"

void apbot_buf_init(struct apbot_buf *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
}

void apbot_buf_done(struct apbot_buf *b)
{
    if (!b)
        return;
    free(b->data);
    apbot_buf_init(b, b->max);
}

void apbot_buf_wipe_done(struct apbot_buf *b)
{
    if (!b)
        return;
    if (b->data)
        explicit_bzero(b->data, b->cap);
    apbot_buf_done(b);
}

void apbot_buf_reset(struct apbot_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

/* Makes room for `more` bytes plus the NUL; the caller checked the maximum. */
static void buf_room(struct apbot_buf *b, size_t more)
{
    size_t need = b->len + more + 1;
    if (need <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    if (cap > b->max + 1)
        cap = b->max + 1 > need ? b->max + 1 : need;
    b->data = apbot_xrealloc(b->data, cap);
    b->cap = cap;
}

int apbot_buf_add(struct apbot_buf *b, const void *p, size_t n)
{
    if (n > b->max || b->len > b->max - n)
        return APBOT_E_LIMIT;
    buf_room(b, n);
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return APBOT_OK;
}

int apbot_buf_adds(struct apbot_buf *b, const char *s)
{
    return apbot_buf_add(b, s, strlen(s));
}

int apbot_buf_vaddf(struct apbot_buf *b, const char *fmt, va_list ap)
{
    char small[256];
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(small, sizeof(small), fmt, copy);
    va_end(copy);
    if (n < 0)
        return APBOT_E_INVAL;
    if ((size_t)n < sizeof(small))
        return apbot_buf_add(b, small, (size_t)n);
    if ((size_t)n > b->max || b->len > b->max - (size_t)n)
        return APBOT_E_LIMIT;
    buf_room(b, (size_t)n);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return APBOT_OK;
}

int apbot_buf_addf(struct apbot_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = apbot_buf_vaddf(b, fmt, ap);
    va_end(ap);
    return rc;
}

const char *apbot_buf_str(const struct apbot_buf *b)
{
    return b->data ? b->data : "";
}

char *apbot_buf_steal(struct apbot_buf *b, size_t *ret_len)
{
    char *p = b->data ? b->data : apbot_xstrdup("");
    if (ret_len)
        *ret_len = b->len;
    apbot_buf_init(b, b->max);
    return p;
}

int apbot_grow(void **arr, size_t *cap, size_t n, size_t size, size_t max)
{
    if (n >= max)
        return APBOT_E_LIMIT;
    if (n < *cap)
        return APBOT_OK;
    size_t c = *cap ? *cap : 8;
    while (c <= n)
        c *= 2;
    if (c > max)
        c = max;
    *arr = apbot_xrealloc(*arr, c * size);
    *cap = c;
    return APBOT_OK;
}
