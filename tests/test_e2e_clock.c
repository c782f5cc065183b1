/*
 * test_e2e_clock.c - issue 9, hole 1: the wall clock steps (+10 s, +1 h, -1 h) while items
 * are reconciling after timeouts and late commits, against the in-process simulator (acme, the
 * UI whose search shows the booking time), with the runner working in a thread of this process
 * and the step made through the test hook apbot_clock_test_step_wall (the machine's clock is
 * never touched; the simulator keeps the real time, as an ERP on another host would).
 *
 * Each test goes in three batches: (1) posts whose connection dropped and whose bookings land
 * 1.5 s later, the clock stepped while they reconcile (before the bookings land); (2) a timeout
 * and late commits on posts made after the step; (3) a post answered 500 before the commit,
 * whose re-post needs a confirmed absence after the settle delay.
 * It asserts on the ground truth: no reference booked twice, no re-post of a booked reference,
 * every item completed with its lines; and nothing waits longer than the settle delay because
 * of the step: each batch settles within BATCH_BOUND_MS (settle delay + client timeout + a
 * margin for a loaded machine) of its start, the settle delay in force is still the one set
 * (no late commit "observed" across the step) and no late commit longer than it is recorded.
 *
 * A settle delay measured on the wall clock fails this: +10 s and +1 h make the reconciliation
 * look up before the late commits land and post them again; -1 h parks every item for an hour.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "apbot/clock.h"
#include "apbot/machine.h"
#include "apbot/runner.h"
#include "apbot/store.h"
#include "helpers/e2e.h"
#include "helpers/invariants.h"
#include "helpers/sim_client.h"

#define SETTLE_MS 2500
#define TIMEOUT_MS 1500
/* Late commits of 1.5 s land inside the settle delay (with the index lag); replies stalled
 * 3 s outlast the client's timeout. */
#define LATE_COMMIT_MS 1500
#define SCENARIO "stall_ms = 3000\nlate_commit_ms = 1500\nindex_lag_ms = 200\n"
/* The ERP shows booking times and its clock (HTTP Date) in whole seconds: an observed late
 * commit may read up to a second longer than it was. */
#define LATE_READ_MAX_MS (LATE_COMMIT_MS + 1000)
/* The longest a batch may take after its start: a timeout, the longest settle delay the run
 * may rightly use (twice the late commits it reads, see below), a re-post and the lookups
 * around them, plus 4 s for a loaded machine: 10.5 s. A step the settle delay fell for takes
 * an hour (-1 h) or books twice (+10 s, +1 h). */
#define BATCH_BOUND_MS (TIMEOUT_MS + 2 * LATE_READ_MAX_MS + 4000)

static void add_batch(struct e2e *e, const char *prefix, int first, int n)
{
    for (int i = first; i < first + n; i++) {
        char number[32], vendor[16], date[16];
        snprintf(number, sizeof(number), "%s-%d", prefix, i);
        snprintf(vendor, sizeof(vendor), "%d", 100001 + i % 40);
        snprintf(date, sizeof(date), "2026-11-%02d", 1 + i % 28);
        struct e2e_invoice inv = {vendor,          number, date,  "EUR",
                                  10000 + i * 101, "6000", false, NULL};
        e2e_add(e, &inv, NULL);
    }
}

/* Waits (at most 40 s) until every queued item is terminal; returns the time it took since
 * `since`, or -1 (the test fails after the runner thread has been stopped). */
static int64_t settle_all(struct e2e *e, int64_t since, const char *what)
{
    if (!e2e_wait_count(e, MACHINE_STATE_INVALID, e->n_items, 40000)) {
        fprintf(stderr, "clock: %s: %d of %d items terminal after 40 s (%d reconciling, %d new)\n",
                what, e2e_count_terminal(e), e->n_items, e2e_count(e, MACHINE_RECONCILING),
                e2e_count(e, MACHINE_NEW));
        return -1;
    }
    int64_t took = e2e_mono_ms() - since;
    fprintf(stderr, "clock: %s settled %" PRId64 " ms after its start\n", what, took);
    return took;
}

static void step_during_reconciliation(int64_t step_ms, uint64_t seed)
{
    struct e2e e;
    struct e2e_bg bg;
    e2e_start_ui(&e, SIM_UI_ACME, "calm", SCENARIO, seed);
    e.opt.settle_ms = SETTLE_MS;
    e.opt.timeout_ms = TIMEOUT_MS;
    e.opt.until_empty = false; /* the test decides when the run ends */
    e.opt.max_seconds = 150;
    e2e_run_bg(&e, &bg);

    /* (1) Two posts whose connections drop, booked 1.5 s later. Step while they reconcile,
     * before the bookings land. */
    assert_int_equal(simc_fault(e.port, "late_commit", 2), 0);
    add_batch(&e, "CLK1", 1, 2);
    bool reconciling = e2e_wait_count(&e, MACHINE_RECONCILING, 2, 20000);
    int64_t t_step = e2e_mono_ms();
    apbot_clock_test_step_wall(step_ms);
    int64_t took1 = -1, took2 = -1, took3 = -1;
    took1 = settle_all(&e, t_step, "batch 1 (stepped while reconciling)");

    /* (2) Posts made after the step, their give-up moment stamped on the stepped clock: a
     * reply stalled past the timeout (booked at once) and two late commits. */
    if (took1 >= 0) {
        int64_t t2 = e2e_mono_ms();
        (void)simc_fault(e.port, "late_commit", 2);
        (void)simc_fault(e.port, "timeout_after_commit", 1);
        add_batch(&e, "CLK2", 3, 3);
        took2 = settle_all(&e, t2, "batch 2 (posted after the step)");
    }
    /* (3) A 500 before the commit: reconciled, confirmed absent only after the settle delay,
     * posted again. */
    if (took2 >= 0) {
        int64_t t3 = e2e_mono_ms();
        (void)simc_fault(e.port, "error500_before_commit", 1);
        add_batch(&e, "CLK3", 6, 2);
        took3 = settle_all(&e, t3, "batch 3 (a re-post after the step)");
    }

    int rc = e2e_run_join(&bg, true);
    apbot_clock_test_step_wall(-step_ms); /* the hook is process-wide: undo it */
    assert_true(reconciling);
    if (rc != APBOT_OK)
        fprintf(stderr, "run: %s\n", e.stats.message);
    assert_int_equal(rc, APBOT_OK);

    struct inv_report r;
    int irc = invariants_check(e.db, e.port, 24, false, &r);
    invariants_print(&r);
    /* Nothing waited on the step. */
    assert_true(took1 >= 0 && took1 <= BATCH_BOUND_MS);
    assert_true(took2 >= 0 && took2 <= BATCH_BOUND_MS);
    assert_true(took3 >= 0 && took3 <= BATCH_BOUND_MS);
    assert_int_equal(irc, 0);
    assert_int_equal(r.duplicated_refs, 0);
    assert_int_equal(r.reposts_of_booked, 0);
    assert_int_equal(r.completed, e.n_items);
    assert_int_equal(simc_count_rows(e.port), e.n_items);
    /* The faults did happen. */
    assert_int_equal(simc_stat(e.port, "timeout_after_commit"), 1);
    assert_int_equal(simc_stat(e.port, "late_commit"), 4);
    assert_int_equal(simc_stat(e.port, "error500_before_commit"), 1);
    assert_true(e2e_max_posts(&e) == 2); /* the one re-post after the 500 */

    /* A step of apbot's clock is not a late commit of the ERP: what was observed is the
     * simulator's own 1 s (read to the second), and the settle delay grew at most to twice
     * that, never to hours. */
    fprintf(stderr,
            "clock: settle delay in force %" PRId64 " ms, longest late commit %" PRId64 " ms\n",
            e.stats.settle_ms, e.stats.max_late_commit_ms);
    assert_true(e.stats.max_late_commit_ms <= LATE_READ_MAX_MS);
    assert_true(e.stats.settle_ms >= SETTLE_MS);
    assert_true(e.stats.settle_ms <= 2 * LATE_READ_MAX_MS);
    e2e_stop(&e);
}

static void test_e2e_clock_step_forward_10s(void **state)
{
    (void)state;
    step_during_reconciliation(10 * 1000, 31);
}

static void test_e2e_clock_step_forward_1h(void **state)
{
    (void)state;
    step_during_reconciliation(3600 * 1000, 32);
}

static void test_e2e_clock_step_back_1h(void **state)
{
    (void)state;
    step_during_reconciliation(-3600 * 1000, 33);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_e2e_clock_step_forward_10s),
        cmocka_unit_test(test_e2e_clock_step_forward_1h),
        cmocka_unit_test(test_e2e_clock_step_back_1h),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
