/*
 * test_crash_kill.c - crash recovery of the real `apbot run` process (APBOT_BIN): SIGKILL
 * before the post (intent committed, check step still running, nothing booked), after the
 * post before the reply (booked, reply stalled), during reconciliation (lookup in flight),
 * and at arbitrary moments of a faulty run. Each time a restarted `apbot run` must settle
 * every item with no reference booked twice. Also: the CLI's circuit-breaker exit code.
 * The simulator runs in this process; the flow is a copy of acme.xml with test timings.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "apbot/machine.h"
#include "apbot/store.h"
#include "helpers/e2e.h"
#include "helpers/invariants.h"
#include "helpers/sim_client.h"

#define SCENARIO "stall_ms = 20000\nlate_commit_ms = 1000\nindex_lag_ms = 200\n"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Starts a test with a flow whose policy suits a crash test (short timeouts and lease). */
static void crash_start(struct e2e *e, const char *scenario_text, uint64_t seed)
{
    e2e_start(e, "calm", scenario_text, seed);
    e2e_flow_copy(e, "connect-timeout-ms=\"2000\"", "connect-timeout-ms=\"500\"");
    e2e_flow_copy(e, "timeout-ms=\"4000\"", "timeout-ms=\"1500\"");
    e2e_flow_copy(e, "settle-ms=\"6000\"", "settle-ms=\"2500\"");
    e2e_flow_copy(e, "backoff-base-ms=\"250\"", "backoff-base-ms=\"50\"");
    e2e_flow_copy(e, "backoff-cap-ms=\"5000\"", "backoff-cap-ms=\"400\"");
    e2e_flow_copy(e, "lease-ms=\"60000\"", "lease-ms=\"6000\"");
}

/* Forks `apbot run` on the test's queue and flow; output goes to dir/run-N.log. */
static pid_t spawn_run(struct e2e *e, int n, int max_seconds)
{
    const char *bin = getenv("APBOT_BIN");
    assert_non_null(bin);
    char log[400], secs[16];
    snprintf(log, sizeof(log), "%s/run-%d.log", e->dir, n);
    snprintf(secs, sizeof(secs), "%d", max_seconds);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execl(bin, bin, "--db", e->db, "run", "--flow", e->flow, "--erp", e->url, "--until-empty",
              "--max-seconds", secs, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Waits for the child to exit by itself (at most timeout_ms); returns its exit code. */
static int wait_exit(pid_t pid, long timeout_ms)
{
    int64_t until = now_ms() + timeout_ms;
    int status = 0;
    while (now_ms() < until) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        nap_ms(50);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    fail_msg("apbot run did not finish in %ld ms", timeout_ms);
    return -1;
}

static void kill9(pid_t pid)
{
    int status;
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
}

static int count_state(struct e2e *e, enum machine_state s)
{
    struct store *st = NULL;
    struct store_counts c;
    char err[APBOT_ERR_LEN];
    if (store_open(e->db, &st, err, sizeof(err)) != APBOT_OK)
        return -1;
    int rc = store_counts(st, &c, err, sizeof(err));
    store_close(st);
    return rc == APBOT_OK ? (int)c.by_state[s] : -1;
}

/* Polls until an item is in state s (or the ledger has `rows` rows when rows >= 0). */
static bool wait_for(struct e2e *e, int state, int rows, long timeout_ms)
{
    int64_t until = now_ms() + timeout_ms;
    while (now_ms() < until) {
        if (state >= 0 && count_state(e, (enum machine_state)state) > 0)
            return true;
        if (rows >= 0 && simc_count_rows(e->port) >= rows)
            return true;
        nap_ms(state >= 0 ? 20 : 10);
    }
    return false;
}

/* Restarts apbot run until the queue is empty and checks every invariant. */
static void restart_and_check(struct e2e *e, int n)
{
    pid_t pid = spawn_run(e, n, 60);
    assert_int_equal(wait_exit(pid, 70000), 0);
    struct inv_report r;
    int rc = invariants_check(e->db, e->port, 24, false, &r);
    if (rc != 0)
        invariants_print(&r);
    assert_int_equal(rc, 0);
    assert_int_equal(r.duplicated_refs, 0);
}

/* Killed while the steps before the committing request run (acme's check, classic's update,
 * the single-page ERP's id resolves): posting, nothing booked. Restart reconciles, then
 * (after a confirmed absence) posts once more. */
static void test_crash_before_post(void **state)
{
    (void)state;
    struct e2e e;
    crash_start(&e, SCENARIO, 31);
    e2e_add_many(&e, "KB", 1);
    /* the spa UI's resolves are reads of the "form" service class, as the call after its login
     * is: under crash_start's 1.5 s timeout, so that the login goes through (four resolves
     * keep the item in posting for about 5 s) */
    const char *slow = e.ui == SIM_UI_SPA ? "service_ms.form" : "service_ms.check";
    assert_int_equal(simc_set(e.port, slow, e.ui == SIM_UI_SPA ? "1200..1200" : "4000..4000"), 0);
    pid_t pid = spawn_run(&e, 1, 60);
    assert_true(wait_for(&e, MACHINE_POSTING, -1, 10000));
    nap_ms(200);
    kill9(pid);
    assert_int_equal(count_state(&e, MACHINE_POSTING), 1);
    assert_int_equal(simc_count_rows(e.port), 0);
    assert_int_equal(simc_set(e.port, slow, "2..5"), 0);
    restart_and_check(&e, 2);
    assert_int_equal(e2e_count(&e, MACHINE_COMPLETED), 1);
    assert_int_equal(simc_count_rows(e.port), 1);
    e2e_stop(&e);
}

/* Killed after the ERP booked, before its (stalled) reply: the restart finds the booking. */
static void test_crash_after_post_before_reply(void **state)
{
    (void)state;
    struct e2e e;
    crash_start(&e, SCENARIO, 32);
    /* One item: with a second one a slow machine may kill the run while that one is in
     * posting, and a crash in posting rightly counts as a (possibly sent) post. */
    e2e_add_many(&e, "KA", 1);
    assert_int_equal(simc_fault(e.port, "timeout_after_commit", 1), 0);
    pid_t pid = spawn_run(&e, 1, 60);
    assert_true(wait_for(&e, -1, 1, 10000));
    kill9(pid);
    assert_true(count_state(&e, MACHINE_POSTING) >= 1);
    restart_and_check(&e, 2);
    assert_int_equal(e2e_count(&e, MACHINE_COMPLETED), 1);
    assert_int_equal(simc_count_rows(e.port), 1);
    assert_int_equal(e2e_max_posts(&e), 1); /* the booked one was never posted again */
    e2e_stop(&e);
}

/* Killed while a reconciliation lookup is in flight. */
static void test_crash_during_reconciliation(void **state)
{
    (void)state;
    struct e2e e;
    crash_start(&e, "stall_ms = 3000\nlate_commit_ms = 1000\nindex_lag_ms = 200\n", 33);
    e2e_add_many(&e, "KR", 1);
    assert_int_equal(simc_fault(e.port, "drop_after_commit", 1), 0);
    pid_t pid = spawn_run(&e, 1, 60);
    assert_true(wait_for(&e, MACHINE_RECONCILING, -1, 10000));
    /* From now on lookups crawl: the next one (after the settle delay) is cut by the kill. */
    assert_int_equal(simc_set(e.port, "service_ms.search", "5000..5000"), 0);
    nap_ms(3500);
    kill9(pid);
    assert_int_equal(count_state(&e, MACHINE_RECONCILING), 1);
    assert_int_equal(simc_set(e.port, "service_ms.search", "2..5"), 0);
    restart_and_check(&e, 2);
    assert_int_equal(e2e_count(&e, MACHINE_COMPLETED), 1);
    assert_int_equal(simc_count_rows(e.port), 1);
    assert_int_equal(e2e_max_posts(&e), 1);
    e2e_stop(&e);
}

/* A faulty run killed at three arbitrary moments, then run to the end. */
static void test_crash_repeated_kills(void **state)
{
    (void)state;
    struct e2e e;
    crash_start(&e,
                "stall_ms = 3000\nlate_commit_ms = 1000\nindex_lag_ms = 200\n"
                "service_ms.post = 40..80\nservice_ms.check = 20..40\n"
                "fault.timeout_after_commit = 0.1\nfault.late_commit = 0.1\n"
                "fault.drop_after_commit = 0.1\nfault.error500_before_commit = 0.05\n",
                34);
    e2e_add_many(&e, "KK", 30);
    static const long kill_after_ms[] = {700, 1300, 2100};
    for (int k = 0; k < 3; k++) {
        pid_t pid = spawn_run(&e, k + 1, 60);
        nap_ms(kill_after_ms[k]);
        kill9(pid);
        struct inv_report r;
        int rc = invariants_check(e.db, e.port, 24, true, &r);
        if (rc != 0)
            invariants_print(&r);
        assert_int_equal(rc, 0);
    }
    restart_and_check(&e, 9);
    e2e_stop(&e);
}

/* The CLI maps a tripped breaker to exit code 4 and leaves the queue untouched. */
static void test_crash_cli_breaker_exit_code(void **state)
{
    (void)state;
    struct e2e e;
    crash_start(&e, SCENARIO, 35);
    e2e_add_many(&e, "KX", 3);
    setenv("APBOT_ERP_PASSWORD", "wrong", 1);
    pid_t pid = spawn_run(&e, 1, 30);
    assert_int_equal(wait_exit(pid, 40000), 4);
    assert_int_equal(count_state(&e, MACHINE_NEW), 3);
    assert_int_equal(simc_count_rows(e.port), 0);
    e2e_stop(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crash_before_post),
        cmocka_unit_test(test_crash_after_post_before_reply),
        cmocka_unit_test(test_crash_during_reconciliation),
        cmocka_unit_test(test_crash_repeated_kills),
        cmocka_unit_test(test_crash_cli_breaker_exit_code),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
