/*
 * test_crash_frozen.c - a host frozen past its lease never sends a form on the lease it lost,
 * on both backends (a SQLite file, and a schema on the PostgreSQL server of the ctest fixture
 * `pg`). Host A (`apbot run`, one session) commits the intent to post an invoice and is
 * stopped with SIGSTOP while it fills the ERP's form (the simulator's entry page and check take
 * 700 ms each); host B starts beside it, recovers the item once A's lease ran out (posting ->
 * reconciling, the settle delay counted from then), finds it absent and posts it. Only then is
 * A continued (SIGCONT). A freezes at one of two places:
 *  - inside an exchange with the ERP (the check): its answer comes too late, and the change A
 *    then asks for is refused (the item was taken over);
 *  - inside the queue's write before the committing request (the test holds SQLite's write
 *    lock, or the evidence table's lock, so that A waits there, and releases it once A is
 *    stopped). SQLite: A goes on to the lease check right before the committing request,
 *    which finds the lease lost. PostgreSQL: A is frozen inside a transaction, whose row locks
 *    hold the item from everyone until the server ends A's session (a minute of
 *    idle_in_transaction_session_timeout; here the test ends it at once, as an administrator
 *    or a pooler would): A finds its connection gone, and a queue it cannot reach makes it
 *    send nothing.
 * Either way A drops the item: the ERP saw exactly one committing request for it (the
 * simulator's count of posts), booked it once, and no re-post of a booked reference; both
 * hosts exit 0, and A's log says why it let go.
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

#include <libpq-fe.h>
#include <sqlite3.h>

#include "apbot/machine.h"
#include "apbot/store.h"
#include "helpers/e2e.h"
#include "helpers/pg_test.h"
#include "helpers/sim_client.h"

/* `apbot run` as host NAME (its connections' application_name on PostgreSQL). */
static pid_t host(struct e2e *e, const char *name, bool pg)
{
    const char *args[] = {
        "run",           "--flow", e->flow,         "--erp", e->url, "--until-empty",
        "--max-seconds", "120",    "--concurrency", "1",     NULL};
    char db[sizeof(e->db)], log[64];
    snprintf(db, sizeof(db), "%s", e->db);
    if (pg)
        snprintf(e->db + strlen(e->db), sizeof(e->db) - strlen(e->db), " application_name=%s",
                 name);
    snprintf(log, sizeof(log), "%s.log", name);
    pid_t pid = e2e_spawn_apbot(e, log, args);
    snprintf(e->db, sizeof(e->db), "%s", db);
    return pid;
}

/* Where host A is stopped. */
enum freeze_at {
    AT_EXCHANGE, /* in the ERP's check */
    AT_QUEUE,    /* in the queue's write before the committing request */
};

/* A lock that makes host A wait in its next write of evidence: PostgreSQL's evidence table
 * (the test's session), or SQLite's write lock. */
struct queue_lock {
    PGconn *pg;
    sqlite3 *lite;
};

static void queue_lock_take(struct queue_lock *l, const struct e2e *e, bool pg)
{
    memset(l, 0, sizeof(*l));
    if (pg) {
        l->pg = PQconnectdb(e->db);
        assert_int_equal(PQstatus(l->pg), CONNECTION_OK);
        PGresult *r = PQexec(l->pg, "BEGIN; LOCK TABLE evidence IN EXCLUSIVE MODE");
        assert_int_equal(PQresultStatus(r), PGRES_COMMAND_OK);
        PQclear(r);
    } else {
        assert_int_equal(sqlite3_open(e->db, &l->lite), SQLITE_OK);
        assert_int_equal(sqlite3_exec(l->lite, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    }
}

static void queue_lock_release(struct queue_lock *l)
{
    if (l->pg) {
        PQclear(PQexec(l->pg, "ROLLBACK"));
        PQfinish(l->pg);
    }
    if (l->lite) {
        assert_int_equal(sqlite3_exec(l->lite, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(l->lite);
    }
    memset(l, 0, sizeof(*l));
}

static void frozen_host(bool pg, enum freeze_at at)
{
    char conn[300], schema[64];
    if (pg && !pgt_new_queue(conn, sizeof(conn), schema, sizeof(schema)))
        skip();
    struct e2e e;
    e2e_start(&e, "calm",
              "service_ms.form = 700..700\nservice_ms.check = 700..700\nindex_lag_ms = 100\n",
              (pg ? 82 : 81) + 10 * (uint64_t)at);
    if (pg) {
        snprintf(e.db, sizeof(e.db), "%s", conn);
        e.opt.db_path = e.db;
    }
    /* A lease of 7.5 s, the shortest the runner allows for these timeouts; a settle delay
     * of 3 s (the calm ERP commits at once and its index lags 0.1 s). */
    e2e_flow_copy(&e, "connect-timeout-ms=\"2000\"", "connect-timeout-ms=\"500\"");
    e2e_flow_copy(&e, "timeout-ms=\"4000\"", "timeout-ms=\"3000\"");
    e2e_flow_copy(&e, "settle-ms=\"6000\"", "settle-ms=\"3000\"");
    e2e_flow_copy(&e, "lease-ms=\"60000\"", "lease-ms=\"7500\"");
    char key[32];
    struct e2e_invoice inv = {.vendor = "100001",
                              .number = pg ? "FROZEN-PG-1" : "FROZEN-SQ-1",
                              .date = "2026-11-20",
                              .currency = "EUR",
                              .amount = 123456,
                              .gl = "6000"};
    e2e_add(&e, &inv, key);

    pid_t a = host(&e, "frozen_a", pg);
    assert_true(e2e_wait_count(&e, MACHINE_POSTING, 1, 30000));
    struct queue_lock lock;
    if (at == AT_QUEUE) {
        /* Past the entry page and the check, A stores their evidence before the committing
         * request and waits for the lock there (well within its busy retries). */
        queue_lock_take(&lock, &e, pg);
        e2e_nap_ms(2500);
    } else {
        e2e_nap_ms(900); /* past the entry page, into the check */
    }
    assert_int_equal(kill(a, SIGSTOP), 0);
    int64_t frozen_at = e2e_mono_ms();
    if (at == AT_QUEUE && pg)
        assert_int_equal(pgt_exec(pgt_server(),
                                  "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                                  " WHERE application_name = 'frozen_a'",
                                  false),
                         0);
    if (at == AT_QUEUE)
        queue_lock_release(&lock);

    pid_t b = host(&e, "host_b", pg);
    assert_int_equal(e2e_wait_exit(b, 90000), 0);
    assert_int_equal(e2e_count(&e, MACHINE_COMPLETED), 1);
    printf("%s, frozen in %s: host A stopped for %lld ms; host B recovered and posted the item "
           "meanwhile\n",
           pg ? "postgresql" : "sqlite", at == AT_QUEUE ? "the queue" : "an exchange",
           (long long)(e2e_mono_ms() - frozen_at));

    assert_int_equal(kill(a, SIGCONT), 0);
    assert_int_equal(e2e_wait_exit(a, 60000), 0);
    char *log = e2e_read_file(&e, "frozen_a.log");
    /* In the queue: the check before the committing request (SQLite), the queue lost with A's
     * session (PostgreSQL); in an exchange: the apply guard, or the check had the answer come
     * in time. */
    const char *const why[] = {at == AT_EXCHANGE ? "item taken over"
                               : pg              ? "msg=\"queue unavailable\""
                                                 : "lease not renewed",
                               "lease too short", "lease not renewed"};
    const char *line = NULL;
    for (size_t i = 0; i < (at == AT_QUEUE && !pg ? 2 : 3) && !line; i++)
        line = strstr(log, why[i]);
    if (!line)
        fail_msg("host A's log says nothing of the lease it lost:\n%s", log);
    printf("host A after SIGCONT: %.*s\n", (int)strcspn(line, "\n"), line);
    free(log);

    /* One committing request reached the ERP: host B's. */
    assert_int_equal(simc_stat(e.port, "post"), 1);
    assert_int_equal(simc_count_reference(e.port, key), 1);
    assert_int_equal(simc_stat(e.port, "reposts_of_booked"), 0);
    e2e_assert_invariants(&e, false);
    e2e_stop(&e);
    if (pg)
        pgt_drop_queue(schema);
}

static void test_crash_frozen_sqlite_exchange(void **state)
{
    (void)state;
    frozen_host(false, AT_EXCHANGE);
}

static void test_crash_frozen_sqlite_queue(void **state)
{
    (void)state;
    frozen_host(false, AT_QUEUE);
}

static void test_crash_frozen_postgresql_exchange(void **state)
{
    (void)state;
    frozen_host(true, AT_EXCHANGE);
}

static void test_crash_frozen_postgresql_queue(void **state)
{
    (void)state;
    frozen_host(true, AT_QUEUE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crash_frozen_sqlite_exchange),
        cmocka_unit_test(test_crash_frozen_sqlite_queue),
        cmocka_unit_test(test_crash_frozen_postgresql_exchange),
        cmocka_unit_test(test_crash_frozen_postgresql_queue),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
