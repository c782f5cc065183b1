/*
 * test_pg_two_hosts.c - two bot hosts on one PostgreSQL queue, end to end: two `apbot run`
 * processes (APBOT_BIN; each with its own owner id, host:pid:random) work one queue on the
 * test server of the ctest fixture `pg` against the simulator's chaos scenario (reference
 * guard off, every fault, a down window). Host A is killed with SIGKILL three times at
 * arbitrary moments and restarted; host B runs throughout. Then both run to the end, and the
 * invariants hold on the ERP's ground truth: no key booked twice, no re-post of a booked
 * invoice (reposts_of_booked 0), every item terminal, every completed item booked once with
 * its amount, approved and with its lines. Modelled on test_crash_kill.c; the simulator runs in
 * this process; the flow is a copy of acme.xml with test timings (settle 6 s > the chaos
 * scenario's late commit + index lag; leases of 6 s so a killed host's items come back soon).
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
#include "helpers/pg_test.h"
#include "helpers/sim_client.h"

#define ITEMS 30
#define KILLS 3

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

/* Forks `apbot run` as host NAME on the test's queue and flow; output goes to dir/NAME-N.log. */
static pid_t spawn_host(struct e2e *e, const char *name, int n, int max_seconds)
{
    const char *bin = getenv("APBOT_BIN");
    assert_non_null(bin);
    char log[400], secs[16];
    snprintf(log, sizeof(log), "%s/%s-%d.log", e->dir, name, n);
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

static void test_pg_two_hosts_one_killed(void **state)
{
    (void)state;
    char conn[300], schema[64];
    if (!pgt_new_queue(conn, sizeof(conn), schema, sizeof(schema)))
        skip();
    struct e2e e;
    e2e_start(&e, "chaos", NULL, 41);
    /* The queue is the PostgreSQL schema, not the harness's SQLite file. */
    snprintf(e.db, sizeof(e.db), "%s", conn);
    e.opt.db_path = e.db;
    e2e_flow_copy(&e, "connect-timeout-ms=\"2000\"", "connect-timeout-ms=\"500\"");
    e2e_flow_copy(&e, "timeout-ms=\"4000\"", "timeout-ms=\"1500\"");
    e2e_flow_copy(&e, "backoff-base-ms=\"250\"", "backoff-base-ms=\"50\"");
    e2e_flow_copy(&e, "backoff-cap-ms=\"5000\"", "backoff-cap-ms=\"400\"");
    e2e_flow_copy(&e, "lease-ms=\"60000\"", "lease-ms=\"6000\"");
    e2e_add_many(&e, "TH", ITEMS);

    pid_t b = spawn_host(&e, "b", 1, 150);
    static const long kill_after_ms[KILLS] = {900, 1700, 2600};
    for (int k = 0; k < KILLS; k++) {
        pid_t a = spawn_host(&e, "a", k + 1, 150);
        nap_ms(kill_after_ms[k]);
        kill9(a);
        struct inv_report r;
        int rc = invariants_check(e.db, e.port, 24, true, &r);
        if (rc != 0)
            invariants_print(&r);
        assert_int_equal(rc, 0);
    }
    pid_t a = spawn_host(&e, "a", KILLS + 1, 150);
    assert_int_equal(wait_exit(a, 170000), 0);
    assert_int_equal(wait_exit(b, 170000), 0);
    struct inv_report r;
    int rc = invariants_check(e.db, e.port, 24, false, &r);
    if (rc != 0)
        invariants_print(&r);
    printf("two hosts, host A killed %d times: %d items, %d completed, %d business exceptions, "
           "%d manual review, %d bookings, %d keys booked twice, %lld re-posts of a booked "
           "invoice\n",
           KILLS, r.items, r.completed, r.business_exception, r.manual_review, r.bookings,
           r.duplicated_refs, r.reposts_of_booked);
    assert_int_equal(rc, 0);
    assert_int_equal(r.items, ITEMS);
    assert_int_equal(r.duplicated_refs, 0);
    assert_int_equal(r.reposts_of_booked, 0);
    assert_int_equal(r.pending, 0);
    e2e_stop(&e);
    pgt_drop_queue(schema);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pg_two_hosts_one_killed),
    };
    (void)pgt_server(); /* says SKIP once when there is no server */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
