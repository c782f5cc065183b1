/*
 * test_runner_retry.c - the runner's list of early retries (runner-int.h): items handed back to
 * `new` with a short backoff come out due first, only once due, one entry per item (a later
 * hand-back moves it), and a full list keeps the entries due soonest.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "run/runner-int.h"

static void test_runner_retries_due_first(void **state)
{
    (void)state;
    static struct runner_retries q;
    memset(&q, 0, sizeof(q));
    assert_int_equal(runner_retries_take(&q, 1000), 0);
    assert_false(runner_retries_due(&q, 1000));
    runner_retries_put(&q, 7, 1500);
    runner_retries_put(&q, 3, 1200);
    runner_retries_put(&q, 9, 1800);
    assert_false(runner_retries_due(&q, 1199));
    assert_int_equal(runner_retries_take(&q, 1199), 0); /* none due yet */
    assert_true(runner_retries_due(&q, 1200));
    assert_int_equal(runner_retries_take(&q, 2000), 3);
    assert_int_equal(runner_retries_take(&q, 2000), 7);
    /* a later hand-back of the same item moves its entry */
    runner_retries_put(&q, 9, 2500);
    runner_retries_put(&q, 4, 2100);
    assert_int_equal(q.n, 2);
    assert_int_equal(runner_retries_take(&q, 2200), 4);
    assert_int_equal(runner_retries_take(&q, 2200), 0);
    assert_int_equal(runner_retries_take(&q, 2500), 9);
    assert_int_equal(q.n, 0);
}

static void test_runner_retries_bounded(void **state)
{
    (void)state;
    static struct runner_retries q;
    memset(&q, 0, sizeof(q));
    for (int i = 0; i < RUNNER_RETRIES_MAX; i++)
        runner_retries_put(&q, 1000 + i, 10000 + i);
    assert_int_equal(q.n, RUNNER_RETRIES_MAX);
    /* full: one due later than all is dropped, one due sooner takes the latest's place */
    runner_retries_put(&q, 1, 99999);
    runner_retries_put(&q, 2, 5000);
    assert_int_equal(q.n, RUNNER_RETRIES_MAX);
    assert_int_equal(runner_retries_take(&q, 5000), 2);
    int64_t last = 0, n = 0;
    for (int64_t id; (id = runner_retries_take(&q, 1 << 30)) != 0; n++) {
        assert_true(id != 1 && id != 1000 + RUNNER_RETRIES_MAX - 1);
        assert_true(id > last); /* due order */
        last = id;
    }
    assert_int_equal(n, RUNNER_RETRIES_MAX - 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runner_retries_due_first),
        cmocka_unit_test(test_runner_retries_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
