/*
 * test_pg_store.c - what only the PostgreSQL backend does, on the real test server of the
 * ctest fixture `pg`, with the server's own clock (no trusted caller clock):
 *  - items come back in the caller's CLOCK_BOOTTIME (the pure decisions of store.h hold);
 *  - a client whose clock is skewed (wall stepped, a fake mono, another boot id) can neither
 *    take a live lease, nor recover it, nor shorten a settle delay: the server's clock rules;
 *  - leases and settle delays do expire on the server's clock as real time passes;
 *  - two processes with two threads each claim one queue: no item is claimed twice (SKIP
 *    LOCKED), no busy error surfaces;
 *  - a connection lost mid-item behaves like a crash: the store fails (unavailable) and stays
 *    failed, the lease expires, another host recovers the item into reconciliation; the queue
 *    opens again at once; a connection that goes silent (a proxy that stops forwarding, nothing
 *    closed) ends the call within the round-trip bound; the keepalive and user-timeout defaults
 *    of the connection string, and the string's own values over them;
 *  - what a failure means: the table of SQLSTATEs (lost, busy, failed) and of failed connects;
 *  - passwords: never in a message (store_path_display table, a refused login), PGPASSWORD
 *    logs in; invalid UTF-8 in evidence is stored, not refused;
 *  - store_copy: SQLite -> PostgreSQL -> SQLite keeps every row (ids, stamps, events,
 *    evidence, late commits), verified; a non-empty target is refused; the audit chain is
 *    carried and verifies on every copy to the same head;
 *  - the audit chain: two processes appending at once make one chain without gaps; a queue of
 *    schema 1 has its history chained when it is opened.
 * Every test skips, with the reason printed, when there is no test server.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "apbot/clock.h"
#include "apbot/machine.h"
#include "apbot/store.h"
#include "helpers/pg_test.h"
#include "queue/store-test.h"

struct fx {
    char conn[512];
    char schema[64];
    struct store *st;
    struct machine_policy pol;
    struct machine_step claimed;
    char err[APBOT_ERR_LEN];
};

static int fx_setup(void **state)
{
    if (!pgt_server()) {
        *state = NULL;
        return 0;
    }
    struct fx *f = calloc(1, sizeof(*f));
    if (!f || !pgt_new_queue(f->conn, sizeof(f->conn), f->schema, sizeof(f->schema)))
        return -1;
    if (store_open(f->conn, &f->st, f->err, sizeof(f->err)) != APBOT_OK) {
        fprintf(stderr, "%s\n", f->err);
        return -1;
    }
    f->pol = machine_policy_default();
    struct machine_counters fresh = {0};
    if (machine_next(MACHINE_NEW, MACHINE_EV_CLAIMED, &fresh, &f->pol, &f->claimed) != APBOT_OK)
        return -1;
    *state = f;
    return 0;
}

static int fx_teardown(void **state)
{
    struct fx *f = *state;
    if (!f)
        return 0;
    store_close(f->st);
    pgt_drop_queue(f->schema);
    free(f);
    return 0;
}

#define NEED_SERVER(f)                                                                             \
    do {                                                                                           \
        if (!(f))                                                                                  \
            skip();                                                                                \
    } while (0)

static void nap_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static int64_t enq(struct store *st, int n)
{
    char key[32], fp[65];
    snprintf(key, sizeof(key), "AP1-PG%018d", n);
    snprintf(fp, sizeof(fp), "%064d", n);
    struct store_new_item ni = {.key = key,
                                .fingerprint = fp,
                                .payload = "{}",
                                .source = "t.csv:1",
                                .vendor_id = "V1",
                                .invoice_number = "I1",
                                .doc_type = "invoice",
                                .issue_date = "2024-01-31",
                                .currency = "EUR",
                                .exponent = 2,
                                .total = 100};
    enum store_enqueue_result r;
    int64_t id = 0;
    char err[APBOT_ERR_LEN];
    if (store_enqueue_raw(st, &ni, NULL, &r, &id, err, sizeof(err)) != APBOT_OK)
        fail_msg("enqueue: %s", err);
    return id;
}

/* The audit chain verifies and holds n events, ids 1..n. */
static struct store_audit_result assert_chain(struct store *st, int64_t n)
{
    struct store_audit_result r;
    char err[APBOT_ERR_LEN];
    assert_int_equal(store_audit_verify(st, NULL, &r, err, sizeof(err)), APBOT_OK);
    if (r.kind != STORE_AUDIT_INTACT)
        fail_msg("the chain does not verify: %s: %s", store_audit_kind_name(r.kind), r.detail);
    assert_int_equal(r.events, n);
    assert_int_equal(r.last_good.event_id, n);
    return r;
}

/* Applies machine_next(ev) to the item as owner (keeping the lease while not terminal). */
static int step(struct fx *f, struct store *st, int64_t id, const char *owner,
                enum machine_event ev, int64_t settle_ms, const struct apbot_now *now)
{
    struct store_item it;
    int rc = store_get(st, id, &it, f->err, sizeof(f->err));
    if (rc)
        return rc;
    struct machine_step s;
    struct machine_counters c = it.counters;
    c.settled = store_settled(&it, now, settle_ms);
    rc = machine_next(it.state, ev, &c, &f->pol, &s);
    if (rc == APBOT_OK) {
        struct store_change ch = {.from = it.state,
                                  .event = ev,
                                  .step = &s,
                                  .settle_ms = settle_ms,
                                  .actor = "test",
                                  .keep_lease = !machine_is_terminal(s.next) &&
                                                s.next != MACHINE_NEW && owner != NULL};
        rc = store_apply(st, id, owner, &ch, now, NULL, f->err, sizeof(f->err));
    }
    store_item_done(&it);
    return rc;
}

/* A reading of a badly skewed host: wall and mono two hours ahead, under another boot. */
static struct apbot_now skewed(void)
{
    struct apbot_now n;
    apbot_clock_now(&n);
    n.wall_ms += 2 * 3600 * 1000;
    n.mono_ms += 2 * 3600 * 1000;
    snprintf(n.boot, sizeof(n.boot), "%s", "skewed-host-boot-0000");
    return n;
}

/* ---- the server's clock, seen from the caller ---- */

static void test_pg_items_come_back_in_the_callers_clock(void **state)
{
    struct fx *f = *state;
    NEED_SERVER(f);
    int64_t id = enq(f->st, 1);
    struct apbot_now before;
    apbot_clock_now(&before);
    struct store_item it;
    assert_int_equal(store_claim(f->st, "w", NULL, 60000, &f->claimed, &it, f->err, sizeof(f->err)),
                     APBOT_OK);
    struct apbot_now after;
    apbot_clock_now(&after);
    assert_int_equal(it.id, id);
    assert_string_equal(it.clock_boot, apbot_clock_boot_id());
    /* The lease ends 60 s after the claim on the server's clock: in ours, after before + 60 s
     * (never earlier) and not later than the answer + 60 s. */
    assert_true(it.lease_mono >= before.mono_ms + 60000);
    assert_true(it.lease_mono <= after.mono_ms + 60000);
    assert_true(store_lease_live(&it, &after));
    store_item_done(&it);
    /* In the database, stamps are the server's, under its boot id, never this host's. */
    char sql[256];
    snprintf(sql, sizeof(sql),
             "DO $$ BEGIN IF (SELECT count(*) FROM %s.items WHERE clock_boot LIKE 'pg-%%') <> 1"
             " THEN RAISE EXCEPTION 'not under the server''s boot'; END IF; END $$",
             f->schema);
    assert_int_equal(pgt_exec(pgt_server(), sql, false), 0);
}

static void test_pg_skewed_client_cannot_take_a_live_lease(void **state)
{
    struct fx *f = *state;
    NEED_SERVER(f);
    int64_t id = enq(f->st, 1);
    struct store_item it;
    assert_int_equal(
        store_claim(f->st, "host-a", NULL, 60000, &f->claimed, &it, f->err, sizeof(f->err)),
        APBOT_OK);
    store_item_done(&it);

    /* Host B: its wall clock stepped two hours ahead, its readings fake. */
    struct store *b = NULL;
    assert_int_equal(store_open(f->conn, &b, f->err, sizeof(f->err)), APBOT_OK);
    apbot_clock_test_step_wall(2 * 3600 * 1000);
    struct apbot_now sk = skewed();
    assert_int_equal(store_claim(b, "host-b", &sk, 60000, &f->claimed, &it, f->err, sizeof(f->err)),
                     APBOT_E_NOTFOUND);
    int moved = -1;
    assert_int_equal(store_recover(b, &sk, &f->pol, &moved, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(moved, 0);
    struct machine_step s;
    struct machine_counters c = {0};
    assert_int_equal(machine_next(MACHINE_CHECKING, MACHINE_EV_LEASE_EXPIRED, &c, &f->pol, &s),
                     APBOT_OK);
    struct store_change ch = {.from = MACHINE_CHECKING,
                              .event = MACHINE_EV_LEASE_EXPIRED,
                              .step = &s,
                              .actor = "recovery",
                              .take_over = true};
    assert_int_equal(store_apply(b, id, NULL, &ch, &sk, NULL, f->err, sizeof(f->err)),
                     APBOT_E_STATE);
    assert_int_equal(store_renew(b, id, "host-b", &sk, 60000, f->err, sizeof(f->err)),
                     APBOT_E_STATE);
    apbot_clock_test_step_wall(-2 * 3600 * 1000);
    /* The owner is untouched and goes on. */
    assert_int_equal(store_renew(f->st, id, "host-a", NULL, 60000, f->err, sizeof(f->err)),
                     APBOT_OK);
    assert_int_equal(store_get(f->st, id, &it, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(it.state, MACHINE_CHECKING);
    assert_string_equal(it.lease_owner, "host-a");
    store_item_done(&it);
    store_close(b);
}

static void test_pg_skewed_client_cannot_shorten_a_settle_delay(void **state)
{
    struct fx *f = *state;
    NEED_SERVER(f);
    const int64_t settle = 60000;
    int64_t id = enq(f->st, 1);
    struct store_item it;
    assert_int_equal(
        store_claim(f->st, "host-a", NULL, 60000, &f->claimed, &it, f->err, sizeof(f->err)),
        APBOT_OK);
    store_item_done(&it);
    struct apbot_now now;
    apbot_clock_now(&now);
    assert_int_equal(step(f, f->st, id, "host-a", MACHINE_EV_NOT_FOUND, settle, &now), APBOT_OK);
    /* The post's outcome is unknown: reconciling once the settle delay has passed. */
    assert_int_equal(step(f, f->st, id, NULL, MACHINE_EV_UNKNOWN, settle, &now), APBOT_E_STATE);
    assert_int_equal(step(f, f->st, id, "host-a", MACHINE_EV_UNKNOWN, settle, &now), APBOT_OK);
    assert_int_equal(store_get(f->st, id, &it, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(it.state, MACHINE_RECONCILING);
    assert_true(it.has_settle);
    struct apbot_now later;
    apbot_clock_now(&later);
    assert_false(store_settled(&it, &later, settle));
    assert_false(store_due(&it, &later));
    /* The translation is exact arithmetic on our clock: one minute on, it is settled. */
    later.mono_ms += settle + 1000;
    assert_true(store_settled(&it, &later, settle));
    /* A skewed reading is another boot: never settled by it. */
    struct apbot_now sk = skewed();
    assert_false(store_settled(&it, &sk, settle));
    store_item_done(&it);

    /* Host B, two hours ahead: the item is not due, on the server's clock. */
    struct store *b = NULL;
    assert_int_equal(store_open(f->conn, &b, f->err, sizeof(f->err)), APBOT_OK);
    apbot_clock_test_step_wall(2 * 3600 * 1000);
    assert_int_equal(store_claim(b, "host-b", &sk, 60000, &f->claimed, &it, f->err, sizeof(f->err)),
                     APBOT_E_NOTFOUND);
    int64_t wait = -1;
    assert_int_equal(store_next_due(b, &sk, &wait, f->err, sizeof(f->err)), APBOT_OK);
    assert_true(wait > settle - 30000); /* about a minute, however far ahead B's clock is */
    apbot_clock_test_step_wall(-2 * 3600 * 1000);
    store_close(b);
}

static void test_pg_leases_and_settle_run_on_the_servers_clock(void **state)
{
    struct fx *f = *state;
    NEED_SERVER(f);
    int64_t id = enq(f->st, 1);
    struct store_item it;
    assert_int_equal(
        store_claim(f->st, "dead", NULL, 300, &f->claimed, &it, f->err, sizeof(f->err)), APBOT_OK);
    store_item_done(&it);
    struct apbot_now now;
    apbot_clock_now(&now);
    assert_int_equal(step(f, f->st, id, "dead", MACHINE_EV_NOT_FOUND, 400, &now), APBOT_OK);
    /* "dead" never comes back. Its lease is live for another host now... */
    struct store *b = NULL;
    assert_int_equal(store_open(f->conn, &b, f->err, sizeof(f->err)), APBOT_OK);
    int moved = -1;
    assert_int_equal(store_recover_settle(b, NULL, 400, &f->pol, &moved, f->err, sizeof(f->err)),
                     APBOT_OK);
    assert_int_equal(moved, 0);
    /* ...and expired once 300 ms have passed (the sleep guarantees at least that). */
    nap_ms(400);
    assert_int_equal(store_recover_settle(b, NULL, 400, &f->pol, &moved, f->err, sizeof(f->err)),
                     APBOT_OK);
    assert_int_equal(moved, 1);
    assert_int_equal(store_get(b, id, &it, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(it.state, MACHINE_RECONCILING); /* the form may have gone out */
    store_item_done(&it);
    /* Due only after the settle delay, counted on the server from the take-over. */
    nap_ms(500);
    assert_int_equal(store_claim(b, "b", NULL, 60000, &f->claimed, &it, f->err, sizeof(f->err)),
                     APBOT_OK);
    assert_int_equal(it.id, id);
    assert_int_equal(it.state, MACHINE_RECONCILING);
    apbot_clock_now(&now);
    assert_true(store_settled(&it, &now, 400));
    store_item_done(&it);
    store_close(b);
}

/* ---- SKIP LOCKED: two processes, two threads each ---- */

#define CLAIM_ITEMS 400

struct claimer {
    const char *conn;
    char owner[32];
    int64_t ids[CLAIM_ITEMS];
    int n;
    int rc;
};

static void *claim_loop(void *arg)
{
    struct claimer *c = arg;
    struct store *st = NULL;
    char err[APBOT_ERR_LEN];
    c->rc = 10;
    if (store_open(c->conn, &st, err, sizeof(err)) != APBOT_OK)
        return NULL;
    struct machine_policy pol = machine_policy_default();
    struct machine_counters fresh = {0};
    struct machine_step claimed;
    if (machine_next(MACHINE_NEW, MACHINE_EV_CLAIMED, &fresh, &pol, &claimed) != APBOT_OK)
        return NULL;
    for (;;) {
        struct store_item it;
        int rc = store_claim(st, c->owner, NULL, 60000, &claimed, &it, err, sizeof(err));
        if (rc == APBOT_E_NOTFOUND)
            break;
        if (rc != APBOT_OK || c->n >= CLAIM_ITEMS) {
            fprintf(stderr, "%s: %s\n", c->owner, err);
            c->rc = 11;
            store_close(st);
            return NULL;
        }
        c->ids[c->n++] = it.id;
        store_item_done(&it);
    }
    store_close(st);
    c->rc = 0;
    return NULL;
}

/* One process: two threads claiming; writes every id it got to fd. */
static int claim_process(const char *conn, int k, int fd)
{
    struct claimer c[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        memset(&c[i], 0, sizeof(c[i]));
        c[i].conn = conn;
        snprintf(c[i].owner, sizeof(c[i].owner), "host-%d-worker-%d", k, i);
        if (pthread_create(&t[i], NULL, claim_loop, &c[i]) != 0)
            return 20;
    }
    int rc = 0;
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        if (c[i].rc)
            rc = c[i].rc;
        for (int j = 0; j < c[i].n; j++)
            if (write(fd, &c[i].ids[j], sizeof(int64_t)) != (ssize_t)sizeof(int64_t))
                rc = 21;
    }
    return rc;
}

static void test_pg_two_processes_never_claim_one_item_twice(void **state)
{
    struct fx *f = *state;
    NEED_SERVER(f);
    assert_int_equal(store_begin(f->st, f->err, sizeof(f->err)), APBOT_OK);
    for (int i = 0; i < CLAIM_ITEMS; i++)
        (void)enq(f->st, i);
    assert_int_equal(store_commit(f->st, f->err, sizeof(f->err)), APBOT_OK);
    int fds[2][2];
    pid_t pid[2];
    for (int k = 0; k < 2; k++) {
        assert_int_equal(pipe(fds[k]), 0);
        pid[k] = fork();
        assert_true(pid[k] >= 0);
        if (pid[k] == 0) {
            close(fds[k][0]);
            _exit(claim_process(f->conn, k, fds[k][1]));
        }
        close(fds[k][1]);
    }
    static int seen[CLAIM_ITEMS + 1];
    memset(seen, 0, sizeof(seen));
    int total = 0, per[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        int64_t id;
        while (read(fds[k][0], &id, sizeof(id)) == (ssize_t)sizeof(id)) {
            assert_true(id >= 1 && id <= CLAIM_ITEMS);
            seen[id]++;
            per[k]++;
            total++;
        }
        close(fds[k][0]);
        int status = 0;
        assert_int_equal(waitpid(pid[k], &status, 0), pid[k]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    printf("two processes x two threads: %d claims (%d + %d), each item once\n", total, per[0],
           per[1]);
    assert_int_equal(total, CLAIM_ITEMS);
    for (int i = 1; i <= CLAIM_ITEMS; i++)
        if (seen[i] != 1)
            fail_msg("item %d claimed %d times", i, seen[i]);
    struct store_counts c;
    assert_int_equal(store_counts(f->st, &c, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(c.by_state[MACHINE_CHECKING], CLAIM_ITEMS);
    /* Four hosts' worth of appends at once, one chain: every event chained to the one before,
     * ids without a gap, in the order the chain's lock let them in. */
    assert_chain(f->st, 2 * CLAIM_ITEMS);
}

/* ---- bulk enqueues of the same invoices, in opposite orders ---- */

#define BULK_N 2500 /* three of the store's multi-row statements, in one transaction */

struct bulk {
    const char *conn;
    int round;
    bool reversed;
    int queued, already;
    int64_t busy; /* transactions the store ran again (a deadlock is one) */
    int rc;
};

static void *bulk_enqueue(void *arg)
{
    struct bulk *b = arg;
    struct store *st = NULL;
    char err[APBOT_ERR_LEN];
    struct store_enqueue_req *r = calloc(BULK_N, sizeof(*r));
    b->rc = 10;
    if (!r || store_open(b->conn, &st, err, sizeof(err)) != APBOT_OK) {
        free(r);
        return NULL;
    }
    for (int i = 0; i < BULK_N; i++) {
        int n = b->round * BULK_N + (b->reversed ? BULK_N - 1 - i : i);
        snprintf(r[i].key, sizeof(r[i].key), "AP1-BULK%016d", n);
        snprintf(r[i].fingerprint, sizeof(r[i].fingerprint), "%064d", n);
        r[i].payload = strdup("{}");
        r[i].source = strdup("bulk.csv");
        r[i].vendor_id = strdup("V100");
        r[i].invoice_number = strdup("INV-1");
        snprintf(r[i].currency, sizeof(r[i].currency), "EUR");
        r[i].exponent = 2;
        r[i].total = 100 + n;
    }
    if (store_enqueue_many(st, r, BULK_N, NULL, err, sizeof(err)) == APBOT_OK) {
        b->rc = 0;
        for (int i = 0; i < BULK_N; i++) {
            b->queued += r[i].result == STORE_ENQ_QUEUED;
            b->already += r[i].result == STORE_ENQ_ALREADY;
        }
    } else {
        fprintf(stderr, "bulk enqueue: %s\n", err);
    }
    b->busy = store_busy_retried(st);
    for (int i = 0; i < BULK_N; i++)
        store_enqueue_req_done(&r[i]);
    free(r);
    store_close(st);
    return NULL;
}

/* Two hosts enqueue the same invoices at once, one file in the other's order: each invoice is
 * queued once, and neither transaction has to be run again. Before the chain's lock was
 * taken first, each held keys the other waited for while one waited for the chain's lock:
 * PostgreSQL broke the deadlock after a second by failing one, which the store then ran again. */
static void test_pg_bulk_enqueues_do_not_deadlock(void **state)
{
    struct fx *f = *state;
    NEED_SERVER(f);
    for (int round = 0; round < 3; round++) {
        struct bulk b[2];
        pthread_t t[2];
        for (int i = 0; i < 2; i++) {
            memset(&b[i], 0, sizeof(b[i]));
            b[i].conn = f->conn;
            b[i].round = round;
            b[i].reversed = i == 1;
            assert_int_equal(pthread_create(&t[i], NULL, bulk_enqueue, &b[i]), 0);
        }
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
        for (int i = 0; i < 2; i++)
            assert_int_equal(b[i].rc, 0);
        assert_int_equal(b[0].queued + b[1].queued, BULK_N);
        assert_int_equal(b[0].already + b[1].already, BULK_N);
        if (b[0].busy + b[1].busy != 0)
            print_error("round %d: %lld and %lld transactions run again\n", round,
                        (long long)b[0].busy, (long long)b[1].busy);
        assert_int_equal(b[0].busy + b[1].busy, 0);
    }
    struct store_counts c;
    assert_int_equal(store_counts(f->st, &c, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(c.total, 3 * BULK_N);
    assert_chain(f->st, 3 * BULK_N);
}

/* ---- a lost connection is a crash ---- */

static void test_pg_lost_connection_is_a_crash(void **state)
{
    struct fx *f = *state;
    NEED_SERVER(f);
    int64_t id = enq(f->st, 1);
    char conn[640];
    snprintf(conn, sizeof(conn), "%s application_name=lost-%ld", f->conn, (long)getpid());
    struct store *a = NULL;
    assert_int_equal(store_open(conn, &a, f->err, sizeof(f->err)), APBOT_OK);
    struct store_item it;
    assert_int_equal(store_claim(a, "host-a", NULL, 300, &f->claimed, &it, f->err, sizeof(f->err)),
                     APBOT_OK);
    store_item_done(&it);
    struct apbot_now now;
    apbot_clock_now(&now);
    /* The intent to post is committed... */
    assert_int_equal(step(f, a, id, "host-a", MACHINE_EV_NOT_FOUND, 400, &now), APBOT_OK);
    /* ...then the connection dies (a network cut, a failover: the server ends it). */
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
             " WHERE application_name = 'lost-%ld'",
             (long)getpid());
    assert_int_equal(pgt_exec(pgt_server(), sql, false), 0);
    char err[APBOT_ERR_LEN] = "";
    int rc = store_renew(a, id, "host-a", NULL, 300, err, sizeof(err));
    assert_int_equal(rc, APBOT_E_UNAVAIL);
    assert_non_null(strstr(err, "connection"));
    /* Never retried, never half-working: every later call fails at once. */
    assert_int_equal(store_renew(a, id, "host-a", NULL, 300, err, sizeof(err)), APBOT_E_UNAVAIL);
    assert_non_null(strstr(err, "lost"));
    struct store_counts c;
    assert_int_equal(store_counts(a, &c, err, sizeof(err)), APBOT_E_UNAVAIL);
    store_close(a);
    /* The queue opens again at once: a lost connection is not a lost server. */
    assert_int_equal(store_open(conn, &a, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(store_counts(a, &c, err, sizeof(err)), APBOT_OK);
    assert_int_equal(c.by_state[MACHINE_POSTING], 1);
    store_close(a);
    /* Another host recovers it after the lease, into reconciliation: never posted blind. */
    nap_ms(400);
    int moved = -1;
    assert_int_equal(store_recover(f->st, NULL, &f->pol, &moved, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(moved, 1);
    assert_int_equal(store_get(f->st, id, &it, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(it.state, MACHINE_RECONCILING);
    assert_null(it.lease_owner);
    store_item_done(&it);
}

/* ---- what a failure means ---- */

static void test_pg_fault_table(void **state)
{
    (void)state;
    static const struct {
        const char *sqlstate;
        bool bad;
        enum store_pg_fault want;
    } rows[] = {
        /* the server or the connection is gone: open the queue again */
        {NULL, true, STORE_PG_LOST},     /* no result at all, or past the bound */
        {"23505", true, STORE_PG_LOST},  /* whatever it says, the connection is bad */
        {"08006", false, STORE_PG_LOST}, /* connection_failure */
        {"08003", false, STORE_PG_LOST}, /* connection_does_not_exist */
        {"08000", false, STORE_PG_LOST}, /* connection_exception */
        {"57P01", false, STORE_PG_LOST}, /* admin_shutdown: pg_terminate_backend */
        {"57P02", false, STORE_PG_LOST}, /* crash_shutdown */
        {"57P03", false, STORE_PG_LOST}, /* cannot_connect_now */
        {"57P05", false, STORE_PG_LOST}, /* idle_session_timeout */
        {"25P03", false, STORE_PG_LOST}, /* idle in transaction too long */
        {"53300", false, STORE_PG_LOST}, /* too_many_connections */
        {"25006", false, STORE_PG_LOST}, /* read-only: a standby after a failover */
        /* run the whole transaction again */
        {"40001", false, STORE_PG_BUSY}, /* serialization_failure */
        {"40P01", false, STORE_PG_BUSY}, /* deadlock_detected */
        {"55P03", false, STORE_PG_BUSY}, /* lock_not_available */
        {"57014", false, STORE_PG_BUSY}, /* query_canceled: statement timeout */
        /* the statement itself failed: a bug, a constraint, a trigger's refusal */
        {NULL, false, STORE_PG_FAILED}, /* an error without a code */
        {"", false, STORE_PG_FAILED},
        {"08", false, STORE_PG_FAILED}, /* not a SQLSTATE */
        {"080000", false, STORE_PG_FAILED},
        {"23505", false, STORE_PG_FAILED}, /* unique_violation */
        {"23503", false, STORE_PG_FAILED}, /* foreign_key_violation */
        {"23514", false, STORE_PG_FAILED}, /* check_violation */
        {"42P01", false, STORE_PG_FAILED}, /* undefined_table */
        {"23001", false, STORE_PG_FAILED}, /* restrict_violation: append-only */
        {"57000", false, STORE_PG_FAILED}, /* operator_intervention, not listed */
        {"53100", false, STORE_PG_FAILED}, /* disk_full: not weather */
        {"22021", false, STORE_PG_FAILED}, /* character_not_in_repertoire */
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        if (store_pg_fault(rows[i].sqlstate, rows[i].bad) != rows[i].want)
            fail_msg("row %zu (%s, %s): %d, want %d", i,
                     rows[i].sqlstate ? rows[i].sqlstate : "NULL", rows[i].bad ? "bad" : "ok",
                     (int)store_pg_fault(rows[i].sqlstate, rows[i].bad), (int)rows[i].want);
    /* A connection that could not be made: refused by a server that answers is a setting to
     * fix; no answer, or no connections now, is an outage. */
    assert_int_equal(store_pg_connect_fault(PQPING_OK), APBOT_E_IO);
    assert_int_equal(store_pg_connect_fault(PQPING_NO_ATTEMPT), APBOT_E_IO);
    assert_int_equal(store_pg_connect_fault(PQPING_REJECT), APBOT_E_UNAVAIL);
    assert_int_equal(store_pg_connect_fault(PQPING_NO_RESPONSE), APBOT_E_UNAVAIL);
}

/* The connection string's defaults: keepalives and a user timeout unless the string says
 * otherwise; the server's statement timeout is set for the session. */
static void test_pg_connection_defaults(void **state)
{
    struct fx *f = *state;
    NEED_SERVER(f);
    static const struct {
        const char *key, *want;
    } rows[] = {
        {"keepalives", "1"},         {"keepalives_idle", "15"},     {"keepalives_interval", "5"},
        {"keepalives_count", "3"},   {"tcp_user_timeout", "30000"}, {"connect_timeout", "10"},
        {"client_encoding", "UTF8"},
    };
    char v[64];
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        assert_int_equal(store_pg_option(f->st, rows[i].key, v, sizeof(v)), APBOT_OK);
        if (strcmp(v, rows[i].want) != 0)
            fail_msg("%s = %s, want %s", rows[i].key, v, rows[i].want);
    }
    char conn[700];
    snprintf(conn, sizeof(conn),
             "%s keepalives_idle=7 tcp_user_timeout=4000 client_encoding=LATIN1", f->conn);
    struct store *st = NULL;
    assert_int_equal(store_open(conn, &st, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(store_pg_option(st, "keepalives_idle", v, sizeof(v)), APBOT_OK);
    assert_string_equal(v, "7");
    assert_int_equal(store_pg_option(st, "tcp_user_timeout", v, sizeof(v)), APBOT_OK);
    assert_string_equal(v, "4000");
    /* the queue's text is UTF-8 whatever the string asks */
    assert_int_equal(store_pg_option(st, "client_encoding", v, sizeof(v)), APBOT_OK);
    assert_string_equal(v, "UTF8");
    store_close(st);
}

/*
 * A connection that goes silent (no RST, no FIN: a cut network, a frozen pooler) must not
 * hang its caller: a proxy thread forwards between a loopback TCP port and the test server's
 * Unix socket, then stops forwarding without closing anything. The store's next call ends
 * within its round-trip bound with APBOT_E_UNAVAIL, and the ones after it at once.
 */
struct proxy {
    int listen_fd;
    unsigned short port;
    char unix_path[300];
    pthread_t thread;
    atomic_int frozen, stop;
    atomic_int forwarded; /* bytes moved before the freeze */
};

static int proxy_upstream(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(a.sun_path)) {
        close(fd);
        return -1;
    }
    memcpy(a.sun_path, path, strlen(path) + 1);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Forwards for every accepted connection (at most 8), until stop; bounded by its polls. */
static void *proxy_main(void *arg)
{
    struct proxy *px = arg;
    int down[8], up[8], n = 0;
    char buf[16384];
    while (!atomic_load(&px->stop)) {
        struct pollfd pfd[17];
        int k = 0;
        pfd[k++] = (struct pollfd){.fd = px->listen_fd, .events = POLLIN};
        bool frozen = atomic_load(&px->frozen);
        for (int i = 0; i < n && !frozen; i++) {
            pfd[k++] = (struct pollfd){.fd = down[i], .events = POLLIN};
            pfd[k++] = (struct pollfd){.fd = up[i], .events = POLLIN};
        }
        if (poll(pfd, (nfds_t)k, 50) <= 0)
            continue;
        if ((pfd[0].revents & POLLIN) && n < 8) {
            int c = accept(px->listen_fd, NULL, NULL);
            int u = c >= 0 ? proxy_upstream(px->unix_path) : -1;
            if (c >= 0 && u >= 0) {
                down[n] = c;
                up[n++] = u;
            } else if (c >= 0) {
                close(c);
            }
        }
        for (int i = 1; i < k; i++) {
            if (!(pfd[i].revents & (POLLIN | POLLHUP)))
                continue;
            int pair = (i - 1) / 2, from = pfd[i].fd;
            int to = from == down[pair] ? up[pair] : down[pair];
            ssize_t got = read(from, buf, sizeof(buf));
            if (got > 0 && write(to, buf, (size_t)got) == got)
                atomic_fetch_add(&px->forwarded, (int)got);
        }
    }
    for (int i = 0; i < n; i++) {
        close(down[i]);
        close(up[i]);
    }
    return NULL;
}

static bool proxy_start(struct proxy *px)
{
    memset(px, 0, sizeof(*px));
    const char *dir = pgt_env("APBOT_TEST_PG_DIR");
    if (!dir)
        return false;
    snprintf(px->unix_path, sizeof(px->unix_path), "%s/.s.PGSQL.5432", dir);
    px->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (px->listen_fd < 0 || bind(px->listen_fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        listen(px->listen_fd, 8) != 0 ||
        getsockname(px->listen_fd, (struct sockaddr *)&a, &len) != 0)
        return false;
    px->port = ntohs(a.sin_port);
    atomic_init(&px->frozen, 0);
    atomic_init(&px->stop, 0);
    atomic_init(&px->forwarded, 0);
    return pthread_create(&px->thread, NULL, proxy_main, px) == 0;
}

static void proxy_stop(struct proxy *px)
{
    atomic_store(&px->stop, 1);
    pthread_join(px->thread, NULL);
    close(px->listen_fd);
}

static void test_pg_silent_connection_cannot_hang(void **state)
{
    struct fx *f = *state;
    NEED_SERVER(f);
    struct proxy px;
    assert_true(proxy_start(&px));
    char conn[700];
    snprintf(conn, sizeof(conn),
             "host=127.0.0.1 port=%u user=apbot dbname=apbot"
             " options='-c search_path=%s'",
             (unsigned)px.port, f->schema);
    struct store *st = NULL;
    assert_int_equal(store_open(conn, &st, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(store_pg_set_roundtrip_ms(st, 1500), APBOT_OK);
    int64_t id = enq(st, 1);
    struct store_item it;
    assert_int_equal(
        store_claim(st, "host-a", NULL, 60000, &f->claimed, &it, f->err, sizeof(f->err)), APBOT_OK);
    store_item_done(&it);
    assert_true(atomic_load(&px.forwarded) > 0);

    atomic_store(&px.frozen, 1); /* nothing passes any more, nothing is closed */
    nap_ms(100);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char err[APBOT_ERR_LEN] = "";
    assert_int_equal(store_renew(st, id, "host-a", NULL, 60000, err, sizeof(err)), APBOT_E_UNAVAIL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long ms = (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
    printf("a silent connection found after %ld ms (bound 1500 ms): %s\n", ms, err);
    assert_true(ms >= 1400 && ms < 5000);
    assert_non_null(strstr(err, "no answer within 1500 ms"));
    /* dead from now on: at once, without another wait */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct store_counts c;
    assert_int_equal(store_counts(st, &c, err, sizeof(err)), APBOT_E_UNAVAIL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_true((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 100);
    store_close(st);
    proxy_stop(&px);
    /* the item is where the queue recorded it: claimed, leased to host-a */
    assert_int_equal(store_get(f->st, id, &it, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(it.state, MACHINE_CHECKING);
    assert_string_equal(it.lease_owner, "host-a");
    store_item_done(&it);
}

/* ---- passwords and text ---- */

static void test_pg_path_display_table(void **state)
{
    (void)state;
    static const struct {
        const char *in, *want;
    } rows[] = {
        {"postgresql://ap:s3cret@db1:5432/ap", "postgresql://ap:***@db1:5432/ap"},
        {"postgres://ap:s3cret@db1/ap?sslmode=verify-full",
         "postgres://ap:***@db1/ap?sslmode=verify-full"},
        {"postgresql://ap@db1/ap?password=s3cret&sslmode=require",
         "postgresql://ap@db1/ap?password=***&sslmode=require"},
        {"postgresql://db1/ap", "postgresql://db1/ap"},
        {"host=db1 user=ap password=s3cret dbname=ap", "host=db1 user=ap password=*** dbname=ap"},
        {"host=db1 password = 's3 cr\\'et' dbname=ap", "host=db1 password =*** dbname=ap"},
        {"service=apbot", "service=apbot"},
        {"/var/lib/apbot/q.db", "/var/lib/apbot/q.db"},
        {"postgresql://ap:p%40ss@db1/ap", "postgresql://ap:***@db1/ap"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char buf[256];
        store_path_display(rows[i].in, buf, sizeof(buf));
        if (strcmp(buf, rows[i].want) != 0)
            fail_msg("row %zu: '%s' -> '%s', want '%s'", i, rows[i].in, buf, rows[i].want);
        assert_null(strstr(buf, "s3cret"));
    }
    assert_true(store_path_has_password("postgresql://ap:s3cret@db1/ap"));
    assert_true(store_path_has_password("host=db1 password=s3cret"));
    assert_false(store_path_has_password("postgresql://ap@db1/ap"));
    assert_false(store_path_has_password("/tmp/q.db"));
    assert_true(store_path_is_pg("postgresql://db1/ap"));
    assert_true(store_path_is_pg("postgres://db1/ap"));
    assert_true(store_path_is_pg("service=apbot"));
    assert_true(store_path_is_pg("host=/tmp dbname=x"));
    assert_false(store_path_is_pg("a=b.db"));
    assert_false(store_path_is_pg("/tmp/q.db"));
    assert_false(store_path_is_pg(":memory:"));
    assert_true(store_path_is_file("/tmp/q.db"));
    assert_false(store_path_is_file(":memory:"));
    assert_false(store_path_is_file("file:q.db?mode=ro"));
    assert_false(store_path_is_file("postgresq://ap:s3cret@db1/ap"));
    assert_false(store_path_is_file("postgresql://db1/ap"));
}

static void test_pg_passwords_never_echoed(void **state)
{
    struct fx *f = *state;
    NEED_SERVER(f);
    const char *dir = pgt_env("APBOT_TEST_PG_DIR");
    const char *user = pgt_env("APBOT_TEST_PG_PWUSER");
    const char *pw = pgt_env("APBOT_TEST_PG_PASSWORD");
    assert_non_null(dir);
    assert_non_null(user);
    assert_non_null(pw);
    /* A wrong password in the URI: refused, and neither password is in the message. */
    char uri[600];
    snprintf(uri, sizeof(uri), "postgresql://%s:wrong-%s@/apbot?host=%s", user, pw, dir);
    struct store *st = NULL;
    char err[APBOT_ERR_LEN] = "";
    assert_int_equal(store_open(uri, &st, err, sizeof(err)), APBOT_E_IO);
    assert_null(st);
    assert_null(strstr(err, pw));
    assert_non_null(strstr(err, "***"));
    /* A URI of an unknown scheme is refused with the password hidden too. */
    snprintf(uri, sizeof(uri), "postgresq://%s:%s@/apbot", user, pw);
    assert_int_equal(store_open(uri, &st, err, sizeof(err)), APBOT_E_INVAL);
    assert_null(strstr(err, pw));
    /* The libpq way: PGPASSWORD in the environment, nothing in the URI. */
    char sql[200];
    snprintf(sql, sizeof(sql), "CREATE SCHEMA %s_pw AUTHORIZATION %s", f->schema, user);
    assert_int_equal(pgt_exec(pgt_server(), sql, false), 0);
    snprintf(uri, sizeof(uri), "postgresql://%s@/apbot?host=%s&options=-csearch_path%%3D%s_pw",
             user, dir, f->schema);
    assert_int_equal(setenv("PGPASSWORD", pw, 1), 0);
    int rc = store_open(uri, &st, err, sizeof(err));
    unsetenv("PGPASSWORD");
    if (rc != APBOT_OK)
        fail_msg("PGPASSWORD login: %s", err);
    assert_string_equal(store_backend(st), "postgresql");
    store_close(st);
    char pw_schema[96];
    snprintf(pw_schema, sizeof(pw_schema), "%s_pw", f->schema);
    pgt_drop_queue(pw_schema);
}

static int grab_excerpt(void *ctx, const struct store_evidence_row *row)
{
    snprintf(ctx, 64, "%s", row->ev.excerpt ? row->ev.excerpt : "");
    return 0;
}

static void test_pg_invalid_utf8_is_stored_not_refused(void **state)
{
    struct fx *f = *state;
    NEED_SERVER(f);
    int64_t id = enq(f->st, 1);
    struct store_evidence ev = {.step = "lookup",
                                .method = "GET",
                                .url = "/search?q=\xff",
                                .excerpt = "caf\xe9 \xc3\xa9t\xc3"};
    assert_int_equal(store_add_evidence(f->st, id, &ev, NULL, f->err, sizeof(f->err)), APBOT_OK);
    char got[64] = "";
    assert_int_equal(store_each_evidence(f->st, id, grab_excerpt, got, f->err, sizeof(f->err)),
                     APBOT_OK);
    assert_string_equal(got, "caf? \xc3\xa9t?");
}

/* ---- store_copy: a round trip through PostgreSQL ---- */

struct rows {
    char text[64 * 1024];
    size_t len;
};

static void add_text(struct rows *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(r->text + r->len, sizeof(r->text) - r->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        r->len += (size_t)n < sizeof(r->text) - r->len ? (size_t)n : sizeof(r->text) - r->len - 1;
}

static int row_item(void *ctx, const struct store_item *it)
{
    add_text(ctx,
             "I %" PRId64 " %s %s %s %d/%d/%d %" PRId64 " %" PRId64 " %" PRId64 " %s %" PRId64
             " %s %s %s %s %s %" PRId64 " %s %" PRId64 " %" PRId64 " %d %" PRId64 " %" PRId64 "\n",
             it->id, it->key, it->fingerprint, machine_state_name(it->state), it->counters.posts,
             it->counters.cycles, it->counters.attempts, it->next_at, it->last_post_at,
             it->created_at, it->lease_owner ? it->lease_owner : "-", it->lease_until, it->payload,
             it->erp_doc ? it->erp_doc : "-", it->reason ? it->reason : "-", it->vendor_id,
             it->currency, it->total, it->clock_boot, it->next_mono, it->lease_mono, it->has_settle,
             it->settle_mono, it->settle_at);
    return 0;
}

static int row_event(void *ctx, const struct store_event_row *e)
{
    add_text(ctx, "E %" PRId64 " %" PRId64 " %" PRId64 " %s %s %s %s %s\n", e->id, e->item_id,
             e->at, e->from ? e->from : "-", e->to, e->event, e->detail ? e->detail : "-",
             e->actor);
    return 0;
}

static int row_evidence(void *ctx, const struct store_evidence_row *e)
{
    add_text(ctx, "V %" PRId64 " %" PRId64 " %" PRId64 " %s %s %d %s\n", e->id, e->item_id, e->at,
             e->ev.step, e->ev.url ? e->ev.url : "-", e->ev.http_status,
             e->ev.excerpt ? e->ev.excerpt : "-");
    return 0;
}

struct walk {
    struct store *st;
    struct rows *r;
};

static int walk_item(void *ctx, const struct store_item *it)
{
    struct walk *w = ctx;
    row_item(w->r, it);
    char err[APBOT_ERR_LEN];
    if (store_each_event(w->st, it->id, row_event, w->r, err, sizeof(err)) ||
        store_each_evidence(w->st, it->id, row_evidence, w->r, err, sizeof(err)))
        return -1;
    return 0;
}

/* Every row of a queue as text; the items' stamps raw (the caller's clock is trusted). */
static void dump_rows(struct store *st, struct rows *r)
{
    memset(r, 0, sizeof(*r));
    struct walk w = {.st = st, .r = r};
    char err[APBOT_ERR_LEN];
    assert_int_equal(store_each(st, MACHINE_STATE_INVALID, walk_item, &w, err, sizeof(err)),
                     APBOT_OK);
    struct store_late_commit lc;
    assert_int_equal(store_late_commit(st, "acme", &lc, err, sizeof(err)), APBOT_OK);
    add_text(r, "L %" PRId64 " %" PRId64 " %" PRId64 "\n", lc.max_ms, lc.at, lc.observations);
}

static void test_pg_copy_round_trip(void **state)
{
    struct fx *f = *state;
    NEED_SERVER(f);
    /* Untranslated stamps on both sides, so the rows compare as they are. */
    store_test_trust_caller_clock(true);
    char dir[] = "/tmp/apbot-copy-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char a_path[64], c_path[64];
    snprintf(a_path, sizeof(a_path), "%s/a.db", dir);
    snprintf(c_path, sizeof(c_path), "%s/c.db", dir);
    struct store *a = NULL, *b = NULL, *c = NULL;
    assert_int_equal(store_open(a_path, &a, f->err, sizeof(f->err)), APBOT_OK);
    /* A queue with some history: new, checking, posting, reconciling, completed. */
    for (int i = 1; i <= 6; i++)
        (void)enq(a, i);
    struct apbot_now now;
    apbot_clock_now(&now);
    struct store_item it;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(store_claim(a, "w", &now, 60000, &f->claimed, &it, f->err, sizeof(f->err)),
                         APBOT_OK);
        store_item_done(&it);
    }
    assert_int_equal(step(f, a, 2, "w", MACHINE_EV_NOT_FOUND, 5000, &now), APBOT_OK);
    assert_int_equal(step(f, a, 3, "w", MACHINE_EV_NOT_FOUND, 5000, &now), APBOT_OK);
    assert_int_equal(step(f, a, 3, "w", MACHINE_EV_UNKNOWN, 5000, &now), APBOT_OK);
    assert_int_equal(step(f, a, 4, "w", MACHINE_EV_NOT_FOUND, 5000, &now), APBOT_OK);
    struct machine_step s;
    struct machine_counters cnt = {.posts = 1};
    assert_int_equal(machine_next(MACHINE_POSTING, MACHINE_EV_CONFIRMED, &cnt, &f->pol, &s),
                     APBOT_OK);
    struct store_change ch = {.from = MACHINE_POSTING,
                              .event = MACHINE_EV_CONFIRMED,
                              .step = &s,
                              .erp_doc = "AP-2024-000001",
                              .reason = "",
                              .detail = "saved",
                              .actor = "runner:w"};
    assert_int_equal(store_apply(a, 4, "w", &ch, &now, NULL, f->err, sizeof(f->err)), APBOT_OK);
    struct store_evidence ev = {.step = "post",
                                .method = "POST",
                                .url = "/ap",
                                .http_status = 200,
                                .excerpt = "Invoice AP-2024-000001 saved"};
    assert_int_equal(store_add_evidence(a, 4, &ev, &now, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(store_note_late_commit(a, "acme", 8000, &now, f->err, sizeof(f->err)),
                     APBOT_OK);

    /* SQLite -> PostgreSQL (the test's empty schema) -> SQLite. */
    store_close(f->st);
    assert_int_equal(store_open(f->conn, &b, f->err, sizeof(f->err)), APBOT_OK);
    f->st = b;
    struct store_tally t;
    assert_int_equal(store_copy(a, b, &t, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(t.items, 6);
    assert_int_equal(t.by_state[MACHINE_NEW], 2);
    assert_int_equal(t.by_state[MACHINE_CHECKING], 1);
    assert_int_equal(t.by_state[MACHINE_POSTING], 1);
    assert_int_equal(t.by_state[MACHINE_RECONCILING], 1);
    assert_int_equal(t.by_state[MACHINE_COMPLETED], 1);
    assert_int_equal(t.evidence, 1);
    assert_int_equal(t.late_commits, 1);
    assert_true(t.events >= 6 + 4 + 4);
    /* A second copy into the same target is refused: it is not empty. */
    assert_int_equal(store_copy(a, b, NULL, f->err, sizeof(f->err)), APBOT_E_STATE);
    assert_non_null(strstr(f->err, "not empty"));
    assert_int_equal(store_open(c_path, &c, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(store_copy(b, c, NULL, f->err, sizeof(f->err)), APBOT_OK);
    static struct rows ra, rb, rc;
    dump_rows(a, &ra);
    dump_rows(b, &rb);
    dump_rows(c, &rc);
    assert_true(ra.len > 500);
    assert_string_equal(ra.text, rb.text);
    assert_string_equal(ra.text, rc.text);
    /* The audit chain is carried as it is: it verifies on every copy, to the same head (a head
     * kept before the move still holds after it). */
    struct store_audit_result va, vb, vc;
    assert_int_equal(store_audit_verify(a, NULL, &va, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(store_audit_verify(b, &va.last_good, &vb, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(store_audit_verify(c, &va.last_good, &vc, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(va.kind, STORE_AUDIT_INTACT);
    assert_int_equal(vb.kind, STORE_AUDIT_INTACT);
    assert_int_equal(vc.kind, STORE_AUDIT_INTACT);
    assert_int_equal(va.events, t.events);
    assert_int_equal(vb.last_good.event_id, va.last_good.event_id);
    assert_memory_equal(vb.last_good.hash, va.last_good.hash, STORE_HASH_LEN);
    assert_memory_equal(vc.last_good.hash, va.last_good.hash, STORE_HASH_LEN);
    assert_int_equal(t.head_event_id, va.last_good.event_id);
    /* The copy goes on where the source stopped: new ids after the copied ones, new events
     * chained to the copied head. */
    int64_t next = enq(b, 99);
    assert_int_equal(next, 7);
    (void)assert_chain(b, t.events + 1);
    store_close(a);
    store_close(c);
    unlink(a_path);
    unlink(c_path);
    char p[96];
    const char *suffix[] = {"-wal", "-shm"};
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof(p), "%s%s", a_path, suffix[i]);
        unlink(p);
        snprintf(p, sizeof(p), "%s%s", c_path, suffix[i]);
        unlink(p);
    }
    rmdir(dir);
    store_test_trust_caller_clock(false);
}

/*
 * A queue of schema 1 (before the audit chain) is chained when a newer apbot opens it: its
 * events in id order, with the gaps its sequence left, multi-byte and NULL texts; it verifies,
 * and the events appended after go on from its head at the next id.
 */
static void test_pg_migrates_history_into_the_chain(void **state)
{
    struct fx *f = *state;
    NEED_SERVER(f);
    for (int i = 1; i <= 3; i++)
        (void)enq(f->st, i);
    struct apbot_now now;
    apbot_clock_now(&now);
    struct store_item it;
    assert_int_equal(store_claim(f->st, "w", &now, 60000, &f->claimed, &it, f->err, sizeof(f->err)),
                     APBOT_OK);
    store_item_done(&it);
    store_close(f->st);
    f->st = NULL;
    /* Back to schema 1, as an older apbot left it; then history it wrote. */
    assert_int_equal(pgt_exec(f->conn,
                              "DROP TRIGGER events_chain ON events;"
                              "DROP FUNCTION apbot_event_chain();"
                              "ALTER TABLE events DROP COLUMN prev_hash, DROP COLUMN hash;"
                              "DROP FUNCTION apbot_event_hash(bytea, bigint, bigint, bigint, text,"
                              " text, text, text, text);"
                              "DROP FUNCTION apbot_audit_field(text);"
                              "INSERT INTO events (id, item_id, at, from_state, to_state, event,"
                              " detail, actor) VALUES"
                              " (9, 2, 1700000000000, 'new', 'checking', 'claimed',"
                              " 'Zahlung fÃ¼r MÃ¼ller', 'runner:old'),"
                              " (12, 3, 1700000000001, NULL, 'new', 'enqueued', NULL, 'enqueue');"
                              "UPDATE apbot_schema SET version = 1",
                              false),
                     0);
    assert_int_equal(store_open(f->conn, &f->st, f->err, sizeof(f->err)), APBOT_OK);
    struct store_audit_result r;
    assert_int_equal(store_audit_verify(f->st, NULL, &r, f->err, sizeof(f->err)), APBOT_OK);
    if (r.kind != STORE_AUDIT_INTACT)
        fail_msg("%s", r.detail);
    assert_int_equal(r.events, 6);
    assert_int_equal(r.last_good.event_id, 12);
    (void)enq(f->st, 4);
    assert_int_equal(store_audit_verify(f->st, &r.last_good, &r, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(r.kind, STORE_AUDIT_INTACT);
    assert_int_equal(r.events, 7);
    assert_int_equal(r.last_good.event_id, 13);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        T(test_pg_items_come_back_in_the_callers_clock),
        T(test_pg_skewed_client_cannot_take_a_live_lease),
        T(test_pg_skewed_client_cannot_shorten_a_settle_delay),
        T(test_pg_leases_and_settle_run_on_the_servers_clock),
        T(test_pg_two_processes_never_claim_one_item_twice),
        T(test_pg_bulk_enqueues_do_not_deadlock),
        T(test_pg_lost_connection_is_a_crash),
        cmocka_unit_test(test_pg_fault_table),
        T(test_pg_connection_defaults),
        T(test_pg_silent_connection_cannot_hang),
        cmocka_unit_test(test_pg_path_display_table),
        T(test_pg_passwords_never_echoed),
        T(test_pg_invalid_utf8_is_stored_not_refused),
        T(test_pg_copy_round_trip),
        T(test_pg_migrates_history_into_the_chain),
    };
#undef T
    (void)pgt_server(); /* says SKIP once when there is no server */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
