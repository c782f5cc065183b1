/*
 * test_e2e_busy.c - issue 9: a busy database does not end the run. Two `apbot run` processes
 * work one SQLite queue while a third process writes to it: it enqueues invoices in batches
 * that hold the write lock, once for 12 s - more than twice the store's busy timeout (5 s) - so
 * state writes, claims and evidence of both runners find the queue locked past the timeout and
 * must retry and go on. Neither run may exit 1; a last run settles what the writer added; the
 * invariants hold on the ground truth (acme).
 *
 * The writer is this test program again (re-executed with APBOT_TEST_BUSY_WRITER naming the
 * queue), so that it shares no threads with the simulator running in the test.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apbot/invoice.h"
#include "apbot/machine.h"
#include "apbot/money.h"
#include "apbot/runner.h"
#include "apbot/store.h"
#include "helpers/e2e.h"
#include "helpers/invariants.h"
#include "helpers/sim_client.h"

#define WRITER_ENV "APBOT_TEST_BUSY_WRITER"
#define N_UPFRONT 60
/* The writer's batches: how long each holds the write lock (ms). The second outlasts the
 * store's 5 s busy timeout twice over: a runner's evidence write times out on it, and so does
 * the state write after it, unless the store tries the transaction again. */
static const long holds[] = {400, 12000, 400, 300, 600, 400, 300, 500, 400, 300};
#define N_BATCHES (sizeof(holds) / sizeof(holds[0]))
#define PER_BATCH 2

/* ---- the writer process ------------------------------------------------------------------ */

static int writer_main(const char *db)
{
    char err[APBOT_ERR_LEN];
    struct store *st = NULL;
    if (store_open(db, &st, err, sizeof(err)) != APBOT_OK) {
        fprintf(stderr, "writer: %s\n", err);
        return 2;
    }
    e2e_nap_ms(1000); /* the runners are at work by now */
    int n = 0;
    for (size_t b = 0; b < N_BATCHES; b++) {
        int rc = store_begin(st, err, sizeof(err));
        for (int tries = 0; rc == APBOT_E_BUSY && tries < 20; tries++)
            rc = store_begin(st, err, sizeof(err)); /* the runners hold it: wait again */
        if (rc != APBOT_OK) {
            fprintf(stderr, "writer: begin: %s\n", err);
            return 3;
        }
        for (int k = 0; k < PER_BATCH; k++) {
            struct invoice inv;
            char number[32];
            snprintf(number, sizeof(number), "BUSYW-%d", ++n);
            invoice_init(&inv);
            invoice_set_str(&inv.vendor_id, "100013");
            invoice_set_str(&inv.vendor_name, "Writer Vendor");
            invoice_set_str(&inv.invoice_number, number);
            inv.doc_type = INVOICE_DOC_INVOICE;
            snprintf(inv.issue_date, sizeof(inv.issue_date), "2026-11-06");
            snprintf(inv.currency, sizeof(inv.currency), "EUR");
            inv.exponent = 2;
            inv.net_total = inv.payable = 2000 + n;
            struct invoice_line line = {
                .description = "writer", .gl_account = "6000", .net = 2000 + n};
            invoice_add_line(&inv, &line);
            enum store_enqueue_result res;
            int64_t id;
            if (store_enqueue(st, &inv, "writer", NULL, &res, &id, err, sizeof(err)) != APBOT_OK) {
                fprintf(stderr, "writer: enqueue: %s\n", err);
                invoice_done(&inv);
                return 4;
            }
            invoice_done(&inv);
        }
        e2e_nap_ms(holds[b]); /* the write lock stays held */
        rc = store_commit(st, err, sizeof(err));
        for (int tries = 0; rc == APBOT_E_BUSY && tries < 20; tries++)
            rc = store_commit(st, err, sizeof(err));
        if (rc != APBOT_OK) {
            fprintf(stderr, "writer: commit: %s\n", err);
            return 5;
        }
        fprintf(stderr, "writer: batch %zu held the lock %ld ms\n", b + 1, holds[b]);
        e2e_nap_ms(150);
    }
    store_close(st);
    return 0;
}

static pid_t spawn_writer(struct e2e *e)
{
    char log[400];
    snprintf(log, sizeof(log), "%s/writer.log", e->dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        setenv(WRITER_ENV, e->db, 1);
        execl("/proc/self/exe", "test_e2e_busy", (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* ---- the test ---------------------------------------------------------------------------- */

static void print_log(struct e2e *e, const char *name)
{
    char *log = e2e_read_file(e, name);
    fprintf(stderr, "---- %s\n%s\n", name, log);
    free(log);
}

/* The run's length from its summary line ("run: stopped (empty) after N s: ..."), or -1. */
static int run_seconds(struct e2e *e, const char *name)
{
    char *log = e2e_read_file(e, name);
    const char *p = strstr(log, "run: stopped (");
    int secs = -1;
    if (p)
        p = strstr(p, ") after ");
    if (!p || sscanf(p, ") after %d s", &secs) != 1)
        secs = -1;
    free(log);
    return secs;
}

static void test_e2e_busy_database(void **state)
{
    (void)state;
    struct e2e e;
    e2e_start_ui(&e, SIM_UI_ACME, "calm",
                 "index_lag_ms = 200\nservice_ms.post = 80..150\nservice_ms.search = 10..20\n", 91);
    /* The runners' policy: test timings, and a lease longer than the writer's longest hold. */
    e2e_flow_copy(&e, "connect-timeout-ms=\"2000\"", "connect-timeout-ms=\"500\"");
    e2e_flow_copy(&e, " timeout-ms=\"4000\"", " timeout-ms=\"1500\"");
    e2e_flow_copy(&e, "settle-ms=\"6000\"", "settle-ms=\"2500\"");
    e2e_flow_copy(&e, "backoff-base-ms=\"250\"", "backoff-base-ms=\"50\"");
    e2e_flow_copy(&e, "backoff-cap-ms=\"5000\"", "backoff-cap-ms=\"400\"");
    e2e_add_many(&e, "BUSY", N_UPFRONT);

    const char *args[] = {
        "run",           "--flow", e.flow,          "--erp", e.url, "--until-empty",
        "--concurrency", "2",      "--max-seconds", "90",    NULL};
    pid_t run1 = e2e_spawn_apbot(&e, "run-1.log", args);
    pid_t run2 = e2e_spawn_apbot(&e, "run-2.log", args);
    pid_t writer = spawn_writer(&e);
    int wcode = e2e_wait_exit(writer, 120000);
    int code1 = e2e_wait_exit(run1, 120000);
    int code2 = e2e_wait_exit(run2, 120000);
    fprintf(stderr, "busy: writer exit %d, apbot run exits %d and %d\n", wcode, code1, code2);
    if (wcode != 0 || code1 != 0 || code2 != 0) {
        print_log(&e, "writer.log");
        print_log(&e, "run-1.log");
        print_log(&e, "run-2.log");
    }
    assert_int_equal(wcode, 0);
    assert_int_equal(code1, 0);
    assert_int_equal(code2, 0);
    /* Both were at work through the writer's 12 s hold (else this proved nothing). */
    assert_true(run_seconds(&e, "run-1.log") >= 12);
    assert_true(run_seconds(&e, "run-2.log") >= 12);

    /* What the writer added after the runners emptied the queue is settled by one more run. */
    e.n_items = N_UPFRONT + (int)(N_BATCHES * PER_BATCH);
    int rc = e2e_run(&e);
    if (rc != APBOT_OK)
        fprintf(stderr, "last run: %s\n", e.stats.message);
    assert_int_equal(rc, APBOT_OK);
    struct inv_report r;
    int irc = invariants_check(e.db, e.port, 24, false, &r);
    invariants_print(&r);
    assert_int_equal(irc, 0);
    assert_int_equal(r.items, e.n_items);
    assert_int_equal(r.completed, e.n_items);
    assert_int_equal(simc_count_rows(e.port), e.n_items);
    e2e_stop(&e);
}

int main(void)
{
    const char *writer_db = getenv(WRITER_ENV);
    if (writer_db && *writer_db)
        return writer_main(writer_db);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_e2e_busy_database),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
