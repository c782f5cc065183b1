/*
 * test_clock.c - the clock module: both clocks and the boot id in one reading, the mono
 * clock unaffected by the wall-clock test hook, the hook atomic across threads, and the
 * same-boot rule as a table. Nothing here changes the machine's clock.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "apbot/clock.h"

static void test_clock_now_reads_both_clocks_and_the_boot(void **state)
{
    (void)state;
    struct apbot_now a, b;
    apbot_clock_now(&a);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t wall = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    apbot_clock_now(&b);
    assert_true(a.wall_ms <= wall + 1 && wall <= b.wall_ms + 1);
    assert_true(a.mono_ms > 0);
    assert_true(b.mono_ms >= a.mono_ms);
    assert_true(strlen(a.boot) > 0);
    assert_string_equal(a.boot, b.boot);
    assert_string_equal(a.boot, apbot_clock_boot_id());

    /* The boot id is the kernel's, where it has one. */
    FILE *fp = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (fp) {
        char line[64] = "";
        assert_non_null(fgets(line, sizeof(line), fp));
        fclose(fp);
        line[strcspn(line, "\n")] = '\0';
        assert_string_equal(a.boot, line);
    }
    /* CLOCK_BOOTTIME is what mono reads. */
    clock_gettime(CLOCK_BOOTTIME, &ts);
    int64_t boot_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    assert_true(b.mono_ms <= boot_ms + 1);
    assert_true(boot_ms - b.mono_ms < 5000);
}

static void test_clock_step_moves_wall_only(void **state)
{
    (void)state;
    struct apbot_now before, after;
    const int64_t steps[] = {10 * 1000, 3600 * 1000, -3600 * 1000, -10 * 1000};
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        apbot_clock_now(&before);
        apbot_clock_test_step_wall(steps[i]);
        apbot_clock_now(&after);
        int64_t dw = after.wall_ms - before.wall_ms;
        int64_t dm = after.mono_ms - before.mono_ms;
        /* the wall moved by the step (plus the little time that passed), mono did not */
        assert_true(dw >= steps[i] && dw <= steps[i] + 2000);
        assert_true(dm >= 0 && dm < 2000);
        assert_true(apbot_clock_wall_ms() >= after.wall_ms);
    }
}

#define STEPPERS 4
#define STEPS_EACH 2000

static void *stepper(void *arg)
{
    (void)arg;
    for (int i = 0; i < STEPS_EACH; i++)
        apbot_clock_test_step_wall(1);
    return NULL;
}

static void test_clock_step_is_atomic_across_threads(void **state)
{
    (void)state;
    int64_t m0 = apbot_clock_mono_ms();
    int64_t w0 = apbot_clock_wall_ms();
    pthread_t t[STEPPERS];
    for (int i = 0; i < STEPPERS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, stepper, NULL), 0);
    for (int i = 0; i < STEPPERS; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    int64_t elapsed = apbot_clock_mono_ms() - m0;
    int64_t dw = apbot_clock_wall_ms() - w0;
    /* every one of the steps landed: no lost update */
    assert_true(dw >= STEPPERS * STEPS_EACH);
    assert_true(dw <= STEPPERS * STEPS_EACH + elapsed + 50);
    apbot_clock_test_step_wall(-STEPPERS * STEPS_EACH);
}

static void test_clock_same_boot_table(void **state)
{
    (void)state;
    static const struct {
        const char *a, *b;
        bool same;
    } rows[] = {
        {"8c6f0b3e-1111-2222-3333-444455556666", "8c6f0b3e-1111-2222-3333-444455556666", true},
        {"8c6f0b3e-1111-2222-3333-444455556666", "8c6f0b3e-1111-2222-3333-444455556667", false},
        {"", "", false}, /* an unstamped row belongs to no boot */
        {NULL, "x", false},
        {"x", NULL, false},
        {NULL, NULL, false},
        {"unknown-boot", "unknown-boot", true},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        if (apbot_clock_same_boot(rows[i].a, rows[i].b) != rows[i].same)
            fail_msg("row %zu: %s / %s", i, rows[i].a ? rows[i].a : "NULL",
                     rows[i].b ? rows[i].b : "NULL");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clock_now_reads_both_clocks_and_the_boot),
        cmocka_unit_test(test_clock_step_moves_wall_only),
        cmocka_unit_test(test_clock_step_is_atomic_across_threads),
        cmocka_unit_test(test_clock_same_boot_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
