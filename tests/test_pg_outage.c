/*
 * test_pg_outage.c - `apbot run` rides out the queue's outages on PostgreSQL, end to end, on a
 * server of the test's own (tests/lib/pg.sh; the fixture's server must stay up for the tests
 * beside this one) and the simulator's month-end ERP (reference guard off):
 *  - two hosts on one queue; the server is restarted twice (fast shutdown, 3 s down) and every
 *    backend of host A is terminated (pg_terminate_backend) while they work: both hosts exit
 *    0, each logged the outage and its end, and the ground truth holds (no key booked twice,
 *    no re-post of a booked invoice, every item terminal, every completed item booked once);
 *  - a queue that is down when the run starts is waited for, and the run goes on once it is
 *    back;
 *  - a server down past --queue-outage-max stops the run with exit 8, every item where the
 *    queue last recorded it; a crash of the server (immediate shutdown: the deferred changes
 *    not yet flushed may be lost) changes nothing of that; the next run finishes every item.
 * Each test skips, with the reason printed, when there are no PostgreSQL server binaries.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apbot/machine.h"
#include "apbot/store.h"
#include "helpers/e2e.h"
#include "helpers/invariants.h"
#include "helpers/pg_test.h"

#define ITEMS 40

/* The harness on the month-end ERP with its queue in a fresh schema of the own server, and a
 * flow with test timings (settle 6 s > the month-end late commit + index lag; leases of 8 s). */
static bool start(struct e2e *e, struct pgt_own *pg, uint64_t seed)
{
    if (!pgt_own_start(pg))
        return false;
    assert_int_equal(pgt_exec(pg->conn, "CREATE SCHEMA q", false), 0);
    e2e_start(e, "month-end", "down.length_ms = 0\n", seed);
    snprintf(e->db, sizeof(e->db), "%.250s options='-c search_path=q'", pg->conn);
    e->opt.db_path = e->db;
    e2e_flow_copy(e, "connect-timeout-ms=\"2000\"", "connect-timeout-ms=\"500\"");
    e2e_flow_copy(e, "timeout-ms=\"4000\"", "timeout-ms=\"2500\"");
    e2e_flow_copy(e, "backoff-base-ms=\"250\"", "backoff-base-ms=\"50\"");
    e2e_flow_copy(e, "backoff-cap-ms=\"5000\"", "backoff-cap-ms=\"400\"");
    e2e_flow_copy(e, "lease-ms=\"60000\"", "lease-ms=\"8000\"");
    return true;
}

/* Forks `apbot run` to the end (bounded) with its log in dir/NAME and its metrics in
 * dir/NAME.prom; outage_max (the --queue-outage-max) and app (its connections'
 * application_name) may be NULL. */
static pid_t host(struct e2e *e, const char *name, const char *outage_max, const char *app)
{
    const char *args[16] = {"run",           "--flow",        e->flow, "--erp",         e->url,
                            "--until-empty", "--max-seconds", "150",   "--concurrency", "2"};
    size_t n = 10;
    char prom[400];
    snprintf(prom, sizeof(prom), "%s/%s.prom", e->dir, name);
    args[n++] = "--metrics-file";
    args[n++] = prom;
    if (outage_max) {
        args[n++] = "--queue-outage-max";
        args[n++] = outage_max;
    }
    args[n] = NULL;
    char db[sizeof(e->db)];
    snprintf(db, sizeof(db), "%s", e->db);
    if (app)
        snprintf(e->db + strlen(e->db), sizeof(e->db) - strlen(e->db), " application_name=%s", app);
    pid_t pid = e2e_spawn_apbot(e, name, args);
    snprintf(e->db, sizeof(e->db), "%s", db);
    return pid;
}

/* Waits until some item is past `new` (the run is at work), at most 20 s. */
static void wait_busy(struct e2e *e)
{
    for (int i = 0; i < 400; i++) {
        if (e2e_count(e, MACHINE_NEW) < e->n_items)
            return;
        e2e_nap_ms(50);
    }
    fail_msg("no item was claimed within 20 s");
}

static void assert_log_has(struct e2e *e, const char *log, const char *needle)
{
    char *text = e2e_read_file(e, log);
    if (!strstr(text, needle))
        fail_msg("%s has no \"%s\":\n%s", log, needle, text);
    free(text);
}

static void test_pg_outage_two_hosts_ride_out_restarts(void **state)
{
    (void)state;
    struct pgt_own pg;
    struct e2e e;
    if (!start(&e, &pg, 71))
        skip();
    e2e_add_many(&e, "OUT", ITEMS);

    pid_t a = host(&e, "a.log", NULL, "host-a");
    pid_t b = host(&e, "b.log", NULL, "host-b");
    wait_busy(&e);
    e2e_nap_ms(700);
    assert_int_equal(pgt_own_ctl(&pg, "restart", "3"), 0);
    e2e_nap_ms(1500);
    /* Host A's connections only (its workers' and its calling thread's) end; B's stay. */
    assert_int_equal(pgt_exec(pg.conn,
                              "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                              " WHERE application_name = 'host-a'",
                              false),
                     0);
    e2e_nap_ms(1500);
    assert_int_equal(pgt_own_ctl(&pg, "restart", "3"), 0);

    int ca = e2e_wait_exit(a, 170000), cb = e2e_wait_exit(b, 170000);
    if (ca != 0 || cb != 0) {
        char *la = e2e_read_file(&e, "a.log"), *lb = e2e_read_file(&e, "b.log");
        fail_msg("host A exited %d, host B %d\n--- a.log\n%s\n--- b.log\n%s", ca, cb, la, lb);
    }
    for (int i = 0; i < 2; i++) {
        const char *log = i ? "b.log" : "a.log";
        assert_log_has(&e, log, "msg=\"queue unavailable\"");
        assert_log_has(&e, log, "msg=\"queue available again\"");
        assert_log_has(&e, log, "run: the queue was unavailable");
    }
    e2e_assert_invariants(&e, false);
    assert_int_equal(e2e_count_terminal(&e), ITEMS);
    e2e_stop(&e);
    pgt_own_stop(&pg);
}

static void test_pg_outage_down_at_start_is_waited_for(void **state)
{
    (void)state;
    struct pgt_own pg;
    struct e2e e;
    if (!start(&e, &pg, 72))
        skip();
    e2e_add_many(&e, "STA", 8);
    assert_int_equal(pgt_own_ctl(&pg, "down", "fast"), 0);
    pid_t a = host(&e, "a.log", "60", NULL);
    e2e_nap_ms(2500);
    assert_int_equal(waitpid(a, NULL, WNOHANG), 0); /* still waiting for its queue */
    assert_int_equal(pgt_own_ctl(&pg, "up", NULL), 0);
    assert_int_equal(e2e_wait_exit(a, 120000), 0);
    assert_log_has(&e, "a.log", "msg=\"queue unavailable\"");
    assert_log_has(&e, "a.log", "msg=\"queue available again\"");
    assert_log_has(&e, "a.log.prom", "apbot_run_queue_outages_total 1\n");
    assert_log_has(&e, "a.log.prom", "apbot_run_queue_available 1\n");
    assert_log_has(&e, "a.log.prom", "apbot_run_exit_code 0\n");
    e2e_assert_invariants(&e, false);
    e2e_stop(&e);
    pgt_own_stop(&pg);
}

static void test_pg_outage_past_the_bound_exits_8(void **state)
{
    (void)state;
    struct pgt_own pg;
    struct e2e e;
    if (!start(&e, &pg, 73))
        skip();
    e2e_add_many(&e, "BND", 16);
    pid_t a = host(&e, "a.log", "3", NULL);
    wait_busy(&e);
    e2e_nap_ms(400);
    /* A crash, not a shutdown: the deferred changes not flushed yet may be gone. */
    assert_int_equal(pgt_own_ctl(&pg, "down", "immediate"), 0);
    int64_t t0 = e2e_mono_ms();
    int code = e2e_wait_exit(a, 60000);
    int64_t took = e2e_mono_ms() - t0;
    char *log = e2e_read_file(&e, "a.log");
    printf("queue down past --queue-outage-max 3: exit %d after %lld ms\n", code, (long long)took);
    if (code != 8)
        fail_msg("exit %d, want 8:\n%s", code, log);
    free(log);
    /* The bound, the last reconnection and the stop: well within a minute. */
    assert_true(took < 30000);
    assert_log_has(&e, "a.log", "the queue was unavailable for longer than 3 s");
    assert_log_has(&e, "a.log", "still pending unknown");
    assert_log_has(&e, "a.log.prom", "apbot_run_exit_code 8\n");
    assert_log_has(&e, "a.log.prom", "apbot_run_queue_available 0\n");
    assert_log_has(&e, "a.log.prom", "apbot_run_queue_outages_total 1\n");
    /* Nothing booked twice meanwhile; once the queue is back, the next run finishes it all. */
    assert_int_equal(pgt_own_ctl(&pg, "up", NULL), 0);
    e2e_assert_invariants(&e, true);
    pid_t b = host(&e, "b.log", NULL, NULL);
    assert_int_equal(e2e_wait_exit(b, 170000), 0);
    e2e_assert_invariants(&e, false);
    assert_int_equal(e2e_count_terminal(&e), 16);
    e2e_stop(&e);
    pgt_own_stop(&pg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pg_outage_two_hosts_ride_out_restarts),
        cmocka_unit_test(test_pg_outage_down_at_start_is_waited_for),
        cmocka_unit_test(test_pg_outage_past_the_bound_exits_8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
