/*
 * fuzz_input.h - reading structured values off a fuzzer's input for the structured targets
 * (decide, template, page): bytes, integers, flags and NUL-terminated strings, each taken from
 * the front of the input; an exhausted input reads as zeros and empty strings, so every input
 * is a valid value and libFuzzer's mutations map to small changes of the structure.
 */
#ifndef APBOT_FUZZ_INPUT_H
#define APBOT_FUZZ_INPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A property of a target: a violation is a finding (libFuzzer reports the abort). */
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            abort();                                                                               \
    } while (0)

struct fuzz_in {
    const uint8_t *p;
    size_t n;
};

static inline uint8_t fuzz_byte(struct fuzz_in *in)
{
    if (!in->n)
        return 0;
    in->n--;
    return *in->p++;
}

static inline bool fuzz_bool(struct fuzz_in *in)
{
    return fuzz_byte(in) & 1;
}

static inline uint64_t fuzz_u64(struct fuzz_in *in, size_t bytes)
{
    uint64_t v = 0;
    for (size_t i = 0; i < bytes && i < 8; i++)
        v = v << 8 | fuzz_byte(in);
    return v;
}

/* Up to the next '\n' (not kept) or the end, at most max bytes; heap, NUL-terminated; the
 * text may hold NUL bytes, which end it as a C string. */
static inline char *fuzz_line(struct fuzz_in *in, size_t max)
{
    size_t len = 0;
    while (len < in->n && len < max && in->p[len] != '\n')
        len++;
    char *s = malloc(len + 1);
    if (!s)
        abort();
    memcpy(s, in->p, len);
    s[len] = '\0';
    in->p += len;
    in->n -= len;
    if (in->n && *in->p == '\n') {
        in->p++;
        in->n--;
    }
    return s;
}

#endif
