/*
 * buf.h - the one way apbot grows a byte buffer or an array, always under a maximum.
 *
 * As curl's dynbuf: a struct apbot_buf is created with the largest size it may ever reach
 * (ERP pages, input files and templates are untrusted), grows by doubling, keeps its bytes
 * NUL-terminated, and refuses an append that would pass the maximum (APBOT_E_LIMIT, buffer
 * unchanged) instead of growing without bound. Out of memory aborts (mem.h). For arrays,
 * apbot_grow() makes room for one more element under a maximum count.
 *
 * The struct's fields are visible so it can live on the stack; treat them as read-only.
 */
#ifndef APBOT_BUF_H
#define APBOT_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "apbot/error.h"

struct apbot_buf {
    char *data; /* NUL-terminated once anything was added; NULL while empty */
    size_t len; /* bytes held, without the NUL */
    size_t cap; /* bytes allocated (hands off) */
    size_t max; /* the most bytes len may ever reach */
};

/* Starts an empty buffer that may hold up to max bytes. Cannot fail. */
void apbot_buf_init(struct apbot_buf *b, size_t max);
/* Frees the bytes (wiping them first when wipe: they may hold a secret); b is empty and
 * reusable with the same maximum. NULL is fine. */
void apbot_buf_done(struct apbot_buf *b);
void apbot_buf_wipe_done(struct apbot_buf *b);
/* Empties the buffer, keeping its allocation. */
void apbot_buf_reset(struct apbot_buf *b);

/* Appends n bytes. APBOT_E_LIMIT (b unchanged) when len + n would pass the maximum. */
int apbot_buf_add(struct apbot_buf *b, const void *p, size_t n) APBOT_MUST_USE;
/* Appends a NUL-terminated string. */
int apbot_buf_adds(struct apbot_buf *b, const char *s) APBOT_MUST_USE;
/* Appends printf-style text; APBOT_E_LIMIT (b unchanged) when it does not fit. */
int apbot_buf_addf(struct apbot_buf *b, const char *fmt, ...) APBOT_PRINTF(2, 3) APBOT_MUST_USE;
int apbot_buf_vaddf(struct apbot_buf *b, const char *fmt, va_list ap) APBOT_MUST_USE;

/* The bytes as a string: "" while empty, never NULL. Valid until the next change. */
const char *apbot_buf_str(const struct apbot_buf *b);
/* Hands the bytes over (heap, NUL-terminated, "" when empty; the caller frees) and leaves b
 * empty. *ret_len (may be NULL) gets the length. */
char *apbot_buf_steal(struct apbot_buf *b, size_t *ret_len);

/*
 * Makes room for element n (0-based) in the array *arr of elements of `size` bytes with room
 * for *cap: doubles *cap (from 8) as needed, never past max elements. Returns APBOT_OK, or
 * APBOT_E_LIMIT when n >= max (*arr and *cap unchanged). *arr may move.
 */
int apbot_grow(void **arr, size_t *cap, size_t n, size_t size, size_t max) APBOT_MUST_USE;

#endif
