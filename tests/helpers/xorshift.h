/*
 * xorshift.h - the tests' pseudo-random numbers: Marsaglia's xorshift64 (13, 7, 17) on a state
 * the test keeps and seeds (never 0), so that every run draws the same cases.
 */
#ifndef APBOT_TEST_XORSHIFT_H
#define APBOT_TEST_XORSHIFT_H

#include <stdint.h>

static inline uint64_t xorshift64(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A number below n, 0 when n is 0 (the modulo's slight bias does not matter to a test). */
static inline uint32_t xorshift_below(uint64_t *s, uint32_t n)
{
    uint64_t v = xorshift64(s);
    return n ? (uint32_t)(v % n) : 0;
}

#endif
