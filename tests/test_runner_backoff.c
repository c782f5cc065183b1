/*
 * test_runner_backoff.c - the runner's full-jitter backoff: every draw within
 * [0, min(cap, base * 2^n)], the ceiling doubling per attempt up to the cap, Retry-After
 * raising the delay but never past RUNNER_RETRY_AFTER_MAX_MS; the reconnections to a lost
 * queue: the same full jitter on their own base and cap, never past the outage's bound, and
 * giving up (-1) once the bound has passed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "helpers/xorshift.h"
#include "run/runner-int.h"

static void test_runner_backoff_full_jitter_bounds(void **state)
{
    (void)state;
    uint64_t rng = 88172645463325252ULL;
    for (int n = 0; n < 12; n++) {
        int64_t ceiling = 250LL << n;
        if (ceiling > 5000)
            ceiling = 5000;
        int64_t lo = INT64_MAX, hi = -1;
        for (int i = 0; i < 4000; i++) {
            int64_t d = runner_backoff_ms(250, 5000, n, 0, xorshift64(&rng));
            assert_true(d >= 0 && d <= ceiling);
            lo = d < lo ? d : lo;
            hi = d > hi ? d : hi;
        }
        /* full jitter: the draws spread over the whole range */
        assert_true(lo < ceiling / 10);
        assert_true(hi > ceiling - ceiling / 10);
    }
    /* a huge attempt count neither overflows nor passes the cap */
    assert_true(runner_backoff_ms(250, 5000, 1000, 0, UINT64_MAX) <= 5000);
}

static void test_runner_backoff_retry_after(void **state)
{
    (void)state;
    /* Retry-After raises the delay above the jitter draw */
    assert_int_equal(runner_backoff_ms(250, 5000, 0, 30000, 7), 30000);
    assert_int_equal(runner_backoff_ms(250, 5000, 0, 0, 0), 0);
    /* but an ERP asking for a day does not park an item for a day */
    assert_int_equal(runner_backoff_ms(250, 5000, 0, 86400000, 7), RUNNER_RETRY_AFTER_MAX_MS);
}

static void test_runner_outage_wait_table(void **state)
{
    (void)state;
    const int64_t T = 1000000; /* the moment the queue was lost (mono ms) */
    static const struct {
        int64_t after; /* now - T */
        long max_ms;   /* the bound */
        int n;         /* the reconnection */
        uint64_t rnd;  /* the draw */
        int64_t want;  /* the wait, or -1: give up */
    } rows[] = {
        /* within the bound: full jitter in [0, min(5000, 100 * 2^n)] */
        {0, 300000, 0, 0, 0},
        {0, 300000, 0, 100, 100},  /* the top of attempt 0's range */
        {0, 300000, 0, 101, 0},    /* rnd % 101 */
        {10, 300000, 3, 800, 800}, /* 100 * 2^3 */
        {10, 300000, 3, 801, 0},
        {10, 300000, 10, 5000, 5000}, /* capped at 5 s */
        {10, 300000, 60, 5000, 5000}, /* a huge n neither overflows nor passes the cap */
        /* the wait never runs past the bound: the last attempt falls on it */
        {298000, 300000, 10, 4000, 2000},
        {300000, 300000, 10, 4000, 0}, /* on the bound: one last attempt at once */
        /* past the bound: give up */
        {300001, 300000, 0, 0, -1},
        {400000, 300000, 5, 7, -1},
        /* a bound of 0 (or 1 ms: --queue-outage-max 0): one attempt at once, then give up */
        {0, 0, 0, 99, 0},
        {1, 0, 1, 99, -1},
        {0, 1, 0, 50, 1},
        {2, 1, 1, 50, -1},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        int64_t got =
            runner_outage_wait_ms(T, T + rows[i].after, rows[i].max_ms, rows[i].n, rows[i].rnd);
        if (got != rows[i].want)
            fail_msg("row %zu: %lld, want %lld", i, (long long)got, (long long)rows[i].want);
    }
    /* Full jitter over many draws: every wait within the ceiling, spread over it. */
    uint64_t rng = 88172645463325252ULL;
    int64_t lo = INT64_MAX, hi = -1;
    for (int i = 0; i < 4000; i++) {
        int64_t d = runner_outage_wait_ms(T, T, 300000, 20, xorshift64(&rng));
        assert_true(d >= 0 && d <= RUNNER_OUTAGE_CAP_MS);
        lo = d < lo ? d : lo;
        hi = d > hi ? d : hi;
    }
    assert_true(lo < RUNNER_OUTAGE_CAP_MS / 10);
    assert_true(hi > RUNNER_OUTAGE_CAP_MS - RUNNER_OUTAGE_CAP_MS / 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runner_backoff_full_jitter_bounds),
        cmocka_unit_test(test_runner_backoff_retry_after),
        cmocka_unit_test(test_runner_outage_wait_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
