/*
 * test_e2e_login.c - issue 8, item 1: a wrong password is tried once, not once per session.
 * With APBOT_ERP_PASSWORD wrong and four sessions, on both simulator UIs, the ERP sees exactly
 * one login attempt (counted by the simulator: acme's login page and its one submission,
 * classic's one authenticate request), the run stops with the circuit breaker
 * (APBOT_E_SYSTEMIC in process, exit code 4 through `apbot run`), and no item is touched: all
 * still new, none claimed, nothing booked.
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
#include "helpers/sim_client.h"

#define N_ITEMS 6

/* The simulator's count of requests on its login route for one attempt: acme serves the login
 * page (its one-time _csrf token) and takes its submission; classic's login is one request. */
static long long one_attempt(enum sim_ui ui)
{
    return ui == SIM_UI_ACME ? 2 : 1;
}

static void assert_untouched(struct e2e *e)
{
    assert_int_equal(e2e_count(e, MACHINE_NEW), N_ITEMS);
    assert_int_equal(e2e_count_events(e, "claimed"), 0);
    assert_int_equal(e2e_count_evidence(e), 0);
    assert_int_equal(simc_count_rows(e->port), 0);
    assert_int_equal(simc_stat(e->port, "post") + simc_stat(e->port, "save"), 0);
}

static void wrong_password(enum sim_ui ui)
{
    struct e2e e;
    e2e_start_ui(&e, ui, "calm", NULL, 61);
    e2e_add_many(&e, "PWD", N_ITEMS);
    setenv("APBOT_ERP_PASSWORD", "not-the-password", 1);

    /* In process, four sessions. */
    e.opt.concurrency = 4;
    int rc = e2e_run(&e);
    long long logins = simc_stat(e.port, "login");
    fprintf(stderr, "%s: run %s (%s), %lld login request(s), %d session(s)\n", sim_ui_name(ui),
            apbot_strerror(rc), e.stats.message, logins, e.stats.workers);
    assert_int_equal(e.stats.workers, 4);
    assert_int_equal(rc, APBOT_E_SYSTEMIC);
    assert_int_equal(e.stats.stop, RUNNER_STOP_SYSTEMIC);
    assert_non_null(strstr(e.stats.message, "login"));
    assert_int_equal(logins, one_attempt(ui));
    assert_int_equal(e.stats.logins, 0);
    assert_untouched(&e);

    /* Through the command line, four sessions: exit code 4, one more attempt. */
    const char *args[] = {
        "run",           "--flow", e.flow,          "--erp", e.url, "--until-empty",
        "--concurrency", "4",      "--max-seconds", "60",    NULL};
    pid_t pid = e2e_spawn_apbot(&e, "run.log", args);
    int code = e2e_wait_exit(pid, 70000);
    char *log = e2e_read_file(&e, "run.log");
    long long logins_cli = simc_stat(e.port, "login") - logins;
    fprintf(stderr, "%s: apbot run exit %d, %lld login request(s)\n", sim_ui_name(ui), code,
            logins_cli);
    if (code != 4)
        fprintf(stderr, "%s\n", log);
    assert_int_equal(code, 4);
    assert_non_null(strstr(log, "circuit breaker"));
    assert_null(strstr(log, "not-the-password"));
    free(log);
    assert_int_equal(logins_cli, one_attempt(ui));
    assert_untouched(&e);

    setenv("APBOT_ERP_PASSWORD", "acme-demo", 1);
    e2e_stop(&e);
}

static void test_e2e_login_wrong_password_acme(void **state)
{
    (void)state;
    wrong_password(SIM_UI_ACME);
}

static void test_e2e_login_wrong_password_classic(void **state)
{
    (void)state;
    wrong_password(SIM_UI_CLASSIC);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_e2e_login_wrong_password_acme),
        cmocka_unit_test(test_e2e_login_wrong_password_classic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
