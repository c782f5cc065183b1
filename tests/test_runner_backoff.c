/*
 * test_runner_backoff.c - the runner's full-jitter backoff: every draw within
 * [0, min(cap, base * 2^n)], the ceiling doubling per attempt up to the cap, Retry-After
 * raising the delay but never past RUNNER_RETRY_AFTER_MAX_MS.
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runner_backoff_full_jitter_bounds),
        cmocka_unit_test(test_runner_backoff_retry_after),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
