/*
 * test_settle.c - the settle delay's pure decisions (run/settle.c) as tables: the delay in
 * force for a late commit (runner_settle_in_force), the upper bound a reconciliation proves
 * without a booking time (settle_late_bound), and which method a flow's lookup allows
 * (runner_settle_method, over the bundled flows). A run of the bound through the raise: late
 * commits of one size settle the delay after one raise, and a commit found at the first look
 * raises nothing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "apbot/flow.h"
#include "apbot/runner.h"
#include "run/runner-int.h"

static void test_settle_in_force(void **state)
{
    (void)state;
    static const struct {
        int64_t policy, late, want;
    } t[] = {
        {6000, 0, 6000},     /* nothing seen */
        {6000, -5, 6000},    /* nonsense */
        {6000, 2999, 6000},  /* below half the delay */
        {6000, 3000, 6000},  /* half: twice it is the delay itself */
        {6000, 3001, 6002},  /* past half: twice the late commit */
        {6000, 7000, 14000}, /* later than the delay itself */
        {60000, 45000, 90000},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        int64_t got = runner_settle_in_force(t[i].policy, t[i].late);
        if (got != t[i].want)
            fail_msg("row %zu: policy %lld, late %lld: got %lld, want %lld", i,
                     (long long)t[i].policy, (long long)t[i].late, (long long)got,
                     (long long)t[i].want);
    }
}

static void test_settle_late_bound(void **state)
{
    (void)state;
    static const struct {
        int64_t gave_up, absent_at, found_at, want;
        const char *why;
    } t[] = {
        {1000, 4000, 7500, 6500, "missed at the first look, found after the delay"},
        {1000, 4000, 4001, 3001, "found a moment after the miss"},
        {1000, 0, 7500, 0, "no lookup missed it: found at the first look"},
        {1000, 1000, 7500, 0, "a miss at the give-up itself is no evidence"},
        {1000, 900, 7500, 0, "a miss before the give-up (an earlier post) proves nothing"},
        {1000, 4000, 4000, 0, "found no later than it was missed: out of order"},
        {1000, 4000, 3000, 0, "found before the miss: out of order"},
        {0, 5, 10, 10, "stamps from the boot's start"},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        int64_t got = settle_late_bound(t[i].gave_up, t[i].absent_at, t[i].found_at);
        if (got != t[i].want)
            fail_msg("row %zu (%s): got %lld, want %lld", i, t[i].why, (long long)got,
                     (long long)t[i].want);
    }
}

/*
 * The bound fed into the raise, as a run of lookups makes it: the first look at half the delay
 * in force, then the delay, an ERP that makes a document visible `late` ms after the give-up
 * and a lookup that takes `lookup` ms. Returns the delay in force after `rounds` unknown
 * outcomes, each raising it as settle.c does.
 */
static int64_t run_rounds(int64_t settle, int64_t late, int64_t lookup, int rounds)
{
    int64_t max_late = 0;
    for (int i = 0; i < rounds; i++) {
        int64_t gave_up = 100000 * (i + 1);
        int64_t first = gave_up + settle / 2, second = gave_up + settle;
        int64_t visible = gave_up + late;
        int64_t bound = 0;
        if (visible > first) /* missed at the first look */
            bound = settle_late_bound(gave_up, first, second + lookup);
        if (bound > max_late)
            max_late = bound;
        settle = runner_settle_in_force(settle, max_late);
    }
    return settle;
}

static void test_settle_bound_raises_once(void **state)
{
    (void)state;
    /* found at the first look: nothing learnt, however slow the lookups */
    assert_int_equal(run_rounds(6000, 0, 500, 10), 6000);
    assert_int_equal(run_rounds(6000, 2900, 2000, 10), 6000);
    /* visible after the first look, before the delay: one raise to about twice the delay,
     * then the first look (at the raised delay's half) finds it and it stays there */
    assert_int_equal(run_rounds(6000, 4000, 200, 1), 12400);
    assert_int_equal(run_rounds(6000, 4000, 200, 10), 12400);
    /* the bound is never below the true lateness: the raised delay outlasts it */
    for (int64_t late = 3100; late < 6000; late += 300)
        assert_true(run_rounds(6000, late, 100, 10) > late);
}

static void test_settle_method_of_flows(void **state)
{
    (void)state;
    static const struct {
        const char *file;
        enum runner_settle_method want;
    } t[] = {
        {"flows/acme.xml", RUNNER_SETTLE_BOOKING_TIME},    /* its search shows bookedOn */
        {"flows/classic.xml", RUNNER_SETTLE_LOOKUP_BOUND}, /* a CGI-era search without it */
        {"flows/spa.xml", RUNNER_SETTLE_LOOKUP_BOUND},     /* its lookup reads no post_date */
    };
    const char *src = getenv("APBOT_SRC");
    assert_non_null(src);
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        char path[512], err[4096];
        struct flow *f = NULL;
        snprintf(path, sizeof(path), "%s/%s", src, t[i].file);
        if (flow_load(path, &f, err, sizeof(err)) != APBOT_OK)
            fail_msg("%s: %s", path, err);
        assert_int_equal(runner_settle_method(f), t[i].want);
        flow_free(f);
    }
    assert_string_equal(runner_settle_method_name(RUNNER_SETTLE_BOOKING_TIME), "booking-time");
    assert_string_equal(runner_settle_method_name(RUNNER_SETTLE_LOOKUP_BOUND), "lookup-bound");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_settle_in_force),
        cmocka_unit_test(test_settle_late_bound),
        cmocka_unit_test(test_settle_bound_raises_once),
        cmocka_unit_test(test_settle_method_of_flows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
