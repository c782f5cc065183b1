/*
 * test_e2e_breaker.c - the circuit breaker: an ERP that refuses the login, an entry form
 * that is not where the flow says (or lacks a field), and an ERP that stays unreachable
 * stop the run with APBOT_E_SYSTEMIC. In-flight items are handed back, untouched items stay
 * queued, and no item is pushed into an exception state by a systemic fault.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/machine.h"
#include "apbot/runner.h"
#include "helpers/e2e.h"
#include "helpers/invariants.h"
#include "helpers/sim_client.h"

#define SCENARIO "stall_ms = 3000\nlate_commit_ms = 1000\nindex_lag_ms = 200\n"

static void assert_tripped(struct e2e *e)
{
    int rc = e2e_run(e);
    assert_int_equal(rc, APBOT_E_SYSTEMIC);
    assert_int_equal(e->stats.stop, RUNNER_STOP_SYSTEMIC);
    assert_true(e->stats.message[0] != '\0');
    fprintf(stderr, "breaker: %s\n", e->stats.message);
    struct inv_report r;
    int irc = invariants_check(e->db, e->port, 24, true, &r);
    if (irc != 0)
        invariants_print(&r);
    assert_int_equal(irc, 0);
    /* Nothing pushed into an exception state, nothing left half-way. */
    assert_int_equal(e2e_count(e, MACHINE_BUSINESS_EXCEPTION), 0);
    assert_int_equal(e2e_count(e, MACHINE_MANUAL_REVIEW), 0);
    assert_int_equal(e2e_count(e, MACHINE_CHECKING), 0);
    assert_int_equal(e2e_count(e, MACHINE_POSTING), 0);
}

/* Wrong password: stop at once, nothing claimed, nothing changed. */
static void test_e2e_breaker_login_refused(void **state)
{
    (void)state;
    struct e2e e;
    e2e_start(&e, "calm", SCENARIO, 21);
    e2e_add_many(&e, "PWD", 5);
    setenv("APBOT_ERP_PASSWORD", "not-the-password", 1);
    assert_tripped(&e);
    assert_non_null(strstr(e.stats.message, "login"));
    assert_int_equal(e2e_count(&e, MACHINE_NEW), 5);
    assert_int_equal(e2e_count_events(&e, "claimed"), 0);
    assert_int_equal(simc_count_rows(e.port), 0);
    e2e_stop(&e);
}

/* The flow points at an entry form the ERP does not have: systemic, items stay new. */
static void test_e2e_breaker_entry_form_missing(void **state)
{
    (void)state;
    struct e2e e;
    e2e_start(&e, "calm", SCENARIO, 22);
    e2e_flow_copy(&e, "//form[@id='apEntry']", "//form[@id='apEntryV2']");
    e2e_add_many(&e, "FORM", 5);
    assert_tripped(&e);
    assert_non_null(strstr(e.stats.message, "apEntryV2"));
    assert_int_equal(e2e_count(&e, MACHINE_NEW), 5);
    assert_int_equal(e2e_max_posts(&e), 0); /* released intents are not counted */
    assert_true(e2e_count_events(&e, "released") >= e2e_count_events(&e, "not-found"));
    assert_int_equal(simc_count_rows(e.port), 0);
    e2e_stop(&e);
}

/* A field of the flow is missing from the entry form: the form changed, stop. */
static void test_e2e_breaker_field_missing(void **state)
{
    (void)state;
    struct e2e e;
    e2e_start(&e, "calm", SCENARIO, 23);
    e2e_flow_copy(&e, "<field name=\"glAccount\">", "<field name=\"glAccountNo\">");
    e2e_add_many(&e, "FIELD", 4);
    assert_tripped(&e);
    assert_non_null(strstr(e.stats.message, "glAccountNo"));
    assert_int_equal(e2e_count(&e, MACHINE_NEW), 4);
    assert_int_equal(simc_count_rows(e.port), 0);
    e2e_stop(&e);
}

/* The ERP goes dark for a minute mid-run: the breaker trips after its window; what was
 * booked is completed, the rest stays queued or reconciling. */
static void test_e2e_breaker_unreachable(void **state)
{
    (void)state;
    struct e2e e;
    e2e_start(&e, "calm",
              SCENARIO "service_ms.post = 50..100\nservice_ms.search = 20..40\n"
                       "down.start_ms = 700\ndown.length_ms = 60000\n",
              24);
    e2e_add_many(&e, "DARK", 30);
    e.opt.breaker_failures = 5;
    e.opt.breaker_window_ms = 1500;
    assert_tripped(&e);
    assert_non_null(strstr(e.stats.message, "unreachable"));
    assert_true(e2e_count(&e, MACHINE_NEW) + e2e_count(&e, MACHINE_RECONCILING) > 0);
    /* Booked: every completed item, plus at most the reconciling ones (ambiguous). */
    int rows = simc_count_rows(e.port);
    assert_true(rows >= e2e_count(&e, MACHINE_COMPLETED));
    assert_true(rows <= e2e_count(&e, MACHINE_COMPLETED) + e2e_count(&e, MACHINE_RECONCILING));
    e2e_stop(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_e2e_breaker_login_refused),
        cmocka_unit_test(test_e2e_breaker_entry_form_missing),
        cmocka_unit_test(test_e2e_breaker_field_missing),
        cmocka_unit_test(test_e2e_breaker_unreachable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
