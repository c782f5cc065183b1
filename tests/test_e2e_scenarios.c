/*
 * test_e2e_scenarios.c - the combined scenarios: a month-end ERP (slow, a few percent of
 * every fault) and chaos (everything, often, short sessions, an outage), each over more
 * than a hundred invoices with four sessions. Every item must end terminal and the
 * simulator's ledger must hold each completed item exactly once, no reference twice.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>

#include "apbot/machine.h"
#include "apbot/runner.h"
#include "helpers/e2e.h"
#include "helpers/invariants.h"
#include "helpers/sim_client.h"

static void run_scenario(const char *scenario, const char *prefix, int n, long settle_ms,
                         uint64_t seed)
{
    struct e2e e;
    e2e_start(&e, scenario, NULL, seed);
    /* The classic ERP needs about three times acme's requests per invoice: a third of the
     * invoices keeps the run about as long. */
    if (e.ui == SIM_UI_CLASSIC)
        n /= 3;
    e2e_add_many(&e, prefix, n);
    e.opt.concurrency = 4;
    e.opt.settle_ms = settle_ms;
    e.opt.max_seconds = 240;
    int rc = e2e_run(&e);
    if (rc != APBOT_OK)
        fprintf(stderr, "run: %s\n", e.stats.message);
    assert_int_equal(rc, APBOT_OK);
    assert_int_equal(e.stats.stop, RUNNER_STOP_EMPTY);
    struct inv_report r;
    int irc = invariants_check(e.db, e.port, 24, false, &r);
    invariants_print(&r);
    assert_int_equal(irc, 0);
    assert_int_equal(r.items, n);
    assert_int_equal(r.duplicated_refs, 0);
    /* Nothing in these scenarios is a validation error: most items complete. */
    assert_int_equal(r.business_exception, 0);
    assert_true(r.completed >= n * 9 / 10);
    fprintf(stderr, "%s: %d invoices, %lld ERP requests, %lld posts sent, %lld s\n", scenario, n,
            simc_stat(e.port, "total"), (long long)e.stats.posts_sent,
            (long long)(e.stats.elapsed_ms / 1000));
    e2e_stop(&e);
}

/* month-end.scn: late commits 2 s + index lag 1 s, so a 3.5 s settle delay. */
static void test_e2e_month_end(void **state)
{
    (void)state;
    run_scenario("month-end", "ME", 150, 3500, 7);
}

/* chaos.scn: late commits 3 s + index lag 2 s, so a 6 s settle delay. */
static void test_e2e_chaos(void **state)
{
    (void)state;
    run_scenario("chaos", "CH", 100, 6000, 13);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_e2e_month_end),
        cmocka_unit_test(test_e2e_chaos),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
