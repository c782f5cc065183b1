/*
 * test_store.c - the SQLite queue: migrations, enqueue results, claim order and lease
 * exclusivity (two connections, and two forked processes hammering one file), store_apply's
 * state and lease checks with exactly one event per change, evidence, crash recovery,
 * counts and the readers (get, each, events). Each test gets a fresh database file in a
 * temporary directory, because several tests need a second connection.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apbot/clock.h"
#include "apbot/invoice.h"
#include "apbot/machine.h"
#include "apbot/store.h"

#define T0 INT64_C(1700000000000) /* a fixed wall "now" in Unix ms */
#define M0 INT64_C(5000000)       /* the mono clock at T0 */
#define BOOT_A "boot-a-0000-0000-0000-000000000000"
#define BOOT_B "boot-b-0000-0000-0000-000000000000"

/* A clock reading at wall ms, mono moving with it, under boot A. */
#define AT(ms) (&(struct apbot_now){.wall_ms = (ms), .mono_ms = (ms)-T0 + M0, .boot = BOOT_A})
/* A reading whose wall and mono disagree (the wall clock was stepped), or another boot. */
#define AT2(wall, mono, b) (&(struct apbot_now){.wall_ms = (wall), .mono_ms = (mono), .boot = (b)})

struct fx {
    char dir[96];
    char path[128];
    struct store *st;
    struct machine_policy pol;
    struct machine_step claimed; /* machine_next(new, claimed) */
    int64_t settle_ms;           /* what step_item passes as the settle delay */
    char err[APBOT_ERR_LEN];
};

static int fx_setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    if (!f)
        return -1;
    const char *tmp = getenv("TMPDIR");
    snprintf(f->dir, sizeof(f->dir), "%s/apbot-store-XXXXXX",
             tmp && *tmp && strlen(tmp) < 64 ? tmp : "/tmp");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->path, sizeof(f->path), "%s/q.db", f->dir);
    if (store_open(f->path, &f->st, f->err, sizeof(f->err)) != APBOT_OK) {
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
    store_close(f->st);
    char p[192];
    const char *suffix[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
        snprintf(p, sizeof(p), "%s%s", f->path, suffix[i]);
        unlink(p);
    }
    rmdir(f->dir);
    free(f);
    return 0;
}

/* A synthetic queue row; n picks the key, variant the content. */
static struct store_new_item mk_item(int n, int variant, char key[32], char fp[65])
{
    snprintf(key, 32, "AP1-TEST%016d", n);
    snprintf(fp, 65, "%064d", n * 10 + variant);
    return (struct store_new_item){
        .key = key,
        .fingerprint = fp,
        .payload = "{\"v\":1}",
        .source = "month-end.csv:2",
        .vendor_id = "V100",
        .vendor_name = "Acme Supplies",
        .invoice_number = "INV-1",
        .doc_type = "invoice",
        .issue_date = "2024-01-31",
        .currency = "EUR",
        .exponent = 2,
        .total = 123450,
    };
}

static int64_t enq(struct fx *f, int n, int variant, int64_t now,
                   enum store_enqueue_result *ret_result)
{
    char key[32], fp[65];
    struct store_new_item it = mk_item(n, variant, key, fp);
    enum store_enqueue_result res = STORE_ENQ_QUEUED;
    int64_t id = 0;
    int rc = store_enqueue_raw(f->st, &it, AT(now), &res, &id, f->err, sizeof(f->err));
    if (rc != APBOT_OK)
        fail_msg("enqueue: %s", f->err);
    if (ret_result)
        *ret_result = res;
    return id;
}

static int count_event(void *ctx, const struct store_event_row *row)
{
    (void)row;
    (*(int *)ctx)++;
    return 0;
}

static int n_events(struct fx *f, int64_t id)
{
    int n = 0;
    assert_int_equal(store_each_event(f->st, id, count_event, &n, f->err, sizeof(f->err)),
                     APBOT_OK);
    return n;
}

struct last_event {
    char from[32], to[32], event[32], actor[64], detail[256];
};

static int grab_event(void *ctx, const struct store_event_row *row)
{
    struct last_event *e = ctx;
    snprintf(e->from, sizeof(e->from), "%s", row->from ? row->from : "");
    snprintf(e->to, sizeof(e->to), "%s", row->to);
    snprintf(e->event, sizeof(e->event), "%s", row->event);
    snprintf(e->actor, sizeof(e->actor), "%s", row->actor);
    snprintf(e->detail, sizeof(e->detail), "%s", row->detail ? row->detail : "");
    return 0;
}

static struct last_event last_event(struct fx *f, int64_t id)
{
    struct last_event e;
    memset(&e, 0, sizeof(e));
    assert_int_equal(store_each_event(f->st, id, grab_event, &e, f->err, sizeof(f->err)), APBOT_OK);
    return e;
}

static enum machine_state state_of(struct fx *f, int64_t id)
{
    struct store_item it;
    assert_int_equal(store_get(f->st, id, &it, f->err, sizeof(f->err)), APBOT_OK);
    enum machine_state s = it.state;
    store_item_done(&it);
    return s;
}

/* Runs machine_next on the stored item and applies the step as `owner`. */
static int step_item(struct fx *f, struct store *st, int64_t id, const char *owner,
                     enum machine_event ev, int64_t now, const char *doc, const char *reason)
{
    struct store_item it;
    int rc = store_get(st, id, &it, f->err, sizeof(f->err));
    if (rc)
        return rc;
    struct machine_step step;
    struct machine_counters c = it.counters;
    c.settled = true;
    rc = machine_next(it.state, ev, &c, &f->pol, &step);
    if (rc == APBOT_OK) {
        struct store_change ch = {
            .from = it.state,
            .event = ev,
            .step = &step,
            .settle_ms = f->settle_ms,
            .erp_doc = doc,
            .reason = reason,
            .detail = "test",
            .actor = owner ? "runner:test" : "operator:test",
            .keep_lease = !machine_is_terminal(step.next),
        };
        rc = store_apply(st, id, owner, &ch, AT(now), NULL, f->err, sizeof(f->err));
    }
    store_item_done(&it);
    return rc;
}

static int64_t claim_id(struct fx *f, struct store *st, const char *owner, int64_t now)
{
    struct store_item it;
    int rc = store_claim(st, owner, AT(now), 30000, &f->claimed, &it, f->err, sizeof(f->err));
    if (rc == APBOT_E_NOTFOUND)
        return 0;
    if (rc != APBOT_OK)
        fail_msg("claim: %s", f->err);
    int64_t id = it.id;
    store_item_done(&it);
    return id;
}

/* ---- schema ---- */

static void test_store_migrates_fresh_and_reopens(void **state)
{
    struct fx *f = *state;
    int v = 0;
    assert_int_equal(store_schema_version(f->st, &v, f->err, sizeof(f->err)), APBOT_OK);
    assert_true(v >= 1);
    int64_t id = enq(f, 1, 0, T0, NULL);
    store_close(f->st);
    f->st = NULL;

    /* Re-open: no migration runs again, the data is there. */
    assert_int_equal(store_open(f->path, &f->st, f->err, sizeof(f->err)), APBOT_OK);
    int v2 = 0;
    assert_int_equal(store_schema_version(f->st, &v2, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(v2, v);
    assert_int_equal(state_of(f, id), MACHINE_NEW);

    /* WAL and the append-only triggers are in place. */
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    sqlite3_stmt *s = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(s, 0), "wal");
    sqlite3_finalize(s);
    assert_int_not_equal(sqlite3_exec(db, "DELETE FROM events", NULL, NULL, NULL), SQLITE_OK);
    assert_int_not_equal(sqlite3_exec(db, "UPDATE events SET actor = 'x'", NULL, NULL, NULL),
                         SQLITE_OK);
    /* A database from a newer apbot is refused, not touched. */
    assert_int_equal(sqlite3_exec(db, "PRAGMA user_version = 999", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    struct store *st2 = NULL;
    assert_int_equal(store_open(f->path, &st2, f->err, sizeof(f->err)), APBOT_E_DB);
    assert_null(st2);
    assert_non_null(strstr(f->err, "newer"));
}

static void test_store_memory_db_opens(void **state)
{
    (void)state;
    struct store *st = NULL;
    char err[APBOT_ERR_LEN];
    assert_int_equal(store_open(":memory:", &st, err, sizeof(err)), APBOT_OK);
    struct store_counts c;
    assert_int_equal(store_counts(st, &c, err, sizeof(err)), APBOT_OK);
    assert_int_equal(c.total, 0);
    assert_int_equal(c.oldest_pending_at, 0);
    store_close(st);
}

static void test_store_busy_and_bad_path(void **state)
{
    struct fx *f = *state;
    (void)enq(f, 1, 0, T0, NULL);
    /* Another connection holds the write lock: a claim waits, then says busy. */
    sqlite3 *raw = NULL;
    assert_int_equal(sqlite3_open(f->path, &raw), SQLITE_OK);
    assert_int_equal(sqlite3_exec(raw, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    store_set_busy_timeout(f->st, 50);
    struct store_item it = {.id = -7};
    assert_int_equal(
        store_claim(f->st, "w", AT(T0 + 1), 1000, &f->claimed, &it, f->err, sizeof(f->err)),
        APBOT_E_BUSY);
    assert_int_equal(it.id, -7);
    char key[32], fp[65];
    struct store_new_item ni = mk_item(2, 0, key, fp);
    enum store_enqueue_result r = STORE_ENQ_ALREADY;
    int64_t id = -7;
    assert_int_equal(store_enqueue_raw(f->st, &ni, AT(T0), &r, &id, f->err, sizeof(f->err)),
                     APBOT_E_BUSY);
    assert_int_equal(id, -7);
    assert_int_equal(sqlite3_exec(raw, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(raw);
    assert_int_equal(claim_id(f, f->st, "w", T0 + 1), 1);

    struct store *st = NULL;
    assert_int_equal(store_open("/nonexistent-dir/q.db", &st, f->err, sizeof(f->err)), APBOT_E_IO);
    assert_null(st);
    assert_non_null(strstr(f->err, "/nonexistent-dir/q.db"));
}

/* ---- enqueue ---- */

static void test_store_enqueue_queued_already_conflict(void **state)
{
    struct fx *f = *state;
    enum store_enqueue_result r;
    int64_t id = enq(f, 7, 0, T0, &r);
    assert_int_equal(r, STORE_ENQ_QUEUED);
    assert_true(id > 0);
    assert_int_equal(n_events(f, id), 1);
    struct last_event e = last_event(f, id);
    assert_string_equal(e.event, "enqueued");
    assert_string_equal(e.to, "new");

    /* Same key, same fingerprint: a no-op with the same id, no event. */
    int64_t id2 = enq(f, 7, 0, T0 + 5, &r);
    assert_int_equal(r, STORE_ENQ_ALREADY);
    assert_int_equal(id2, id);
    assert_int_equal(n_events(f, id), 1);

    /* Same key, different content: refused, err names the queued item. */
    int64_t id3 = enq(f, 7, 1, T0 + 9, &r);
    assert_int_equal(r, STORE_ENQ_CONFLICT);
    assert_int_equal(id3, id);
    char want[32];
    snprintf(want, sizeof(want), "#%" PRId64, id);
    assert_non_null(strstr(f->err, want));
    assert_non_null(strstr(f->err, "month-end.csv:2"));
    assert_non_null(strstr(f->err, "new"));
    assert_int_equal(n_events(f, id), 1);

    struct store_item it;
    assert_int_equal(store_get(f->st, id, &it, f->err, sizeof(f->err)), APBOT_OK);
    char key[32], fp[65];
    (void)mk_item(7, 0, key, fp);
    assert_string_equal(it.fingerprint, fp); /* never overwritten */
    assert_string_equal(it.vendor_id, "V100");
    assert_string_equal(it.doc_type, "invoice");
    assert_string_equal(it.currency, "EUR");
    assert_int_equal(it.total, 123450);
    assert_int_equal(it.created_at, T0);
    store_item_done(&it);
}

static void test_store_enqueue_batches(void **state)
{
    struct fx *f = *state;
    assert_int_equal(store_begin(f->st, f->err, sizeof(f->err)), APBOT_OK);
    for (int i = 0; i < 1000; i++)
        (void)enq(f, i, 0, T0 + i, NULL);
    /* A duplicate inside the same batch sees the uncommitted row. */
    enum store_enqueue_result r;
    (void)enq(f, 5, 0, T0, &r);
    assert_int_equal(r, STORE_ENQ_ALREADY);
    assert_int_equal(store_commit(f->st, f->err, sizeof(f->err)), APBOT_OK);

    assert_int_equal(store_begin(f->st, f->err, sizeof(f->err)), APBOT_OK);
    (void)enq(f, 5000, 0, T0, NULL);
    store_rollback(f->st);

    struct store_counts c;
    assert_int_equal(store_counts(f->st, &c, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(c.total, 1000);
    assert_int_equal(c.by_state[MACHINE_NEW], 1000);
    assert_int_equal(c.oldest_pending_at, T0);
}

static void test_store_enqueue_invoice(void **state)
{
    struct fx *f = *state;
    struct invoice inv;
    invoice_init(&inv);
    inv.vendor_id = strdup("V100");
    inv.vendor_name = strdup("Acme Supplies");
    inv.invoice_number = strdup("INV-2024-001");
    inv.doc_type = INVOICE_DOC_INVOICE;
    snprintf(inv.issue_date, sizeof(inv.issue_date), "2024-01-31");
    snprintf(inv.currency, sizeof(inv.currency), "EUR");
    inv.exponent = 2;
    struct invoice_line line = {.description = "Paper", .net = 100000, .tax = 19000};
    invoice_add_line(&inv, &line);
    inv.net_total = 100000;
    inv.tax_total = 19000;
    inv.payable = 119000;

    enum store_enqueue_result r;
    int64_t id = 0;
    int rc = store_enqueue(f->st, &inv, "a.csv:2", AT(T0), &r, &id, f->err, sizeof(f->err));
    if (rc)
        fail_msg("enqueue: %s", f->err);
    assert_int_equal(r, STORE_ENQ_QUEUED);
    assert_int_equal(store_enqueue(f->st, &inv, "a.csv:2", AT(T0), &r, &id, f->err, sizeof(f->err)),
                     APBOT_OK);
    assert_int_equal(r, STORE_ENQ_ALREADY);

    char key[INVOICE_KEY_LEN + 1];
    assert_int_equal(invoice_identity_key(&inv, key), APBOT_OK);
    struct store_item it;
    assert_int_equal(store_get_by_key(f->st, key, &it, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(it.id, id);
    assert_int_equal(it.total, 119000);
    assert_string_equal(it.invoice_number, "INV-2024-001");
    assert_non_null(it.payload);
    store_item_done(&it);

    /* Different amount, same identity: a conflict. */
    inv.lines[0].net = 100001;
    inv.net_total = 100001;
    inv.payable = 119001;
    assert_int_equal(store_enqueue(f->st, &inv, "b.csv:9", AT(T0), &r, &id, f->err, sizeof(f->err)),
                     APBOT_OK);
    assert_int_equal(r, STORE_ENQ_CONFLICT);
    assert_non_null(strstr(f->err, "a.csv:2"));
    invoice_done(&inv);
}

/* ---- claim and leases ---- */

static void test_store_claim_order_and_due(void **state)
{
    struct fx *f = *state;
    int64_t a = enq(f, 1, 0, T0 + 20, NULL);
    int64_t b = enq(f, 2, 0, T0 + 10, NULL);   /* older due time, newer id */
    int64_t c = enq(f, 3, 0, T0 + 5000, NULL); /* not due yet at T0 + 100 */

    struct store_item it;
    assert_int_equal(
        store_claim(f->st, "w1", AT(T0 + 100), 30000, &f->claimed, &it, f->err, sizeof(f->err)),
        APBOT_OK);
    assert_int_equal(it.id, b);
    assert_int_equal(it.state, MACHINE_CHECKING);
    assert_string_equal(it.lease_owner, "w1");
    assert_int_equal(it.lease_until, T0 + 100 + 30000);
    store_item_done(&it);
    assert_int_equal(n_events(f, b), 2);
    struct last_event e = last_event(f, b);
    assert_string_equal(e.event, "claimed");
    assert_string_equal(e.from, "new");
    assert_string_equal(e.to, "checking");
    assert_string_equal(e.actor, "runner:w1");

    assert_int_equal(claim_id(f, f->st, "w1", T0 + 100), a);
    assert_int_equal(claim_id(f, f->st, "w1", T0 + 100), 0); /* c not due */
    assert_int_equal(claim_id(f, f->st, "w1", T0 + 5000), c);

    int64_t wait = 0;
    assert_int_equal(store_next_due(f->st, AT(T0 + 5000), &wait, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(wait, -1); /* nothing pending is due-able: all three are checking */

    /* A reconciling item with a live lease is not claimable; after expiry it is, and keeps
     * its state (no event: only its lease changes). */
    assert_int_equal(step_item(f, f->st, a, "w1", MACHINE_EV_NOT_FOUND, T0 + 200, NULL, NULL),
                     APBOT_OK);
    assert_int_equal(step_item(f, f->st, a, "w1", MACHINE_EV_ALREADY_EXISTS, T0 + 200, NULL, NULL),
                     APBOT_OK);
    assert_int_equal(state_of(f, a), MACHINE_RECONCILING);
    assert_int_equal(claim_id(f, f->st, "w2", T0 + 300), 0);
    int events = n_events(f, a);
    assert_int_equal(claim_id(f, f->st, "w2", T0 + 100 + 30001), a);
    assert_int_equal(n_events(f, a), events);
    assert_int_equal(state_of(f, a), MACHINE_RECONCILING);
    /* The first owner lost it. */
    assert_int_equal(step_item(f, f->st, a, "w1", MACHINE_EV_FOUND, T0 + 40000, "D-1", NULL),
                     APBOT_E_STATE);
    assert_int_equal(store_renew(f->st, a, "w1", AT(T0 + 40000), 1000, f->err, sizeof(f->err)),
                     APBOT_E_STATE);
    assert_int_equal(store_renew(f->st, a, "w2", AT(T0 + 40000), 1000, f->err, sizeof(f->err)),
                     APBOT_OK);

    /* A due reconciliation goes before a new item that has been due for longer. */
    int64_t d = enq(f, 4, 0, T0 + 1, NULL);
    assert_int_equal(claim_id(f, f->st, "w3", T0 + 42000), a);
    assert_int_equal(claim_id(f, f->st, "w3", T0 + 42000), d);
}

static void test_store_claim_two_connections(void **state)
{
    struct fx *f = *state;
    int64_t a = enq(f, 1, 0, T0, NULL);
    int64_t b = enq(f, 2, 0, T0 + 1, NULL);
    struct store *st2 = NULL;
    assert_int_equal(store_open(f->path, &st2, f->err, sizeof(f->err)), APBOT_OK);

    assert_int_equal(claim_id(f, f->st, "p1", T0 + 10), a);
    assert_int_equal(claim_id(f, st2, "p2", T0 + 10), b);
    assert_int_equal(claim_id(f, st2, "p2", T0 + 10), 0);
    assert_int_equal(claim_id(f, f->st, "p1", T0 + 10), 0);

    /* p2 cannot act on p1's item, p1 can. */
    assert_int_equal(step_item(f, st2, a, "p2", MACHINE_EV_NOT_FOUND, T0 + 20, NULL, NULL),
                     APBOT_E_STATE);
    assert_non_null(strstr(f->err, "lease"));
    assert_int_equal(step_item(f, f->st, a, "p1", MACHINE_EV_NOT_FOUND, T0 + 20, NULL, NULL),
                     APBOT_OK);
    /* A batch open on one connection makes the other's claim wait, then report busy. */
    assert_int_equal(store_begin(f->st, f->err, sizeof(f->err)), APBOT_OK);
    (void)enq(f, 3, 0, T0, NULL);
    sqlite3 *raw = NULL;
    assert_int_equal(sqlite3_open(f->path, &raw), SQLITE_OK);
    sqlite3_busy_timeout(raw, 50);
    assert_int_not_equal(sqlite3_exec(raw, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(raw);
    assert_int_equal(store_commit(f->st, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(claim_id(f, st2, "p2", T0 + 10), a + 2);
    store_close(st2);
}

#define HAMMER_ITEMS 300

/* Child: claims until nothing is due, writing each id to fd. Exit 0 on success. */
static int hammer(const char *path, const char *owner, int fd)
{
    struct store *st = NULL;
    char err[APBOT_ERR_LEN];
    if (store_open(path, &st, err, sizeof(err)) != APBOT_OK)
        return 10;
    struct machine_policy pol = machine_policy_default();
    struct machine_counters fresh = {0};
    struct machine_step claimed;
    if (machine_next(MACHINE_NEW, MACHINE_EV_CLAIMED, &fresh, &pol, &claimed) != APBOT_OK)
        return 13;
    int busy = 0;
    for (;;) {
        struct store_item it;
        int rc = store_claim(st, owner, AT(T0 + 1000000), 60000, &claimed, &it, err, sizeof(err));
        if (rc == APBOT_E_NOTFOUND)
            break;
        if (rc == APBOT_E_BUSY && ++busy < 100)
            continue;
        if (rc != APBOT_OK) {
            fprintf(stderr, "%s: %s\n", owner, err);
            store_close(st);
            return 11;
        }
        int64_t id = it.id;
        store_item_done(&it);
        if (write(fd, &id, sizeof(id)) != (ssize_t)sizeof(id))
            return 12;
    }
    store_close(st);
    return 0;
}

static void test_store_claim_forked_processes(void **state)
{
    struct fx *f = *state;
    assert_int_equal(store_begin(f->st, f->err, sizeof(f->err)), APBOT_OK);
    for (int i = 0; i < HAMMER_ITEMS; i++)
        (void)enq(f, i, 0, T0 + i, NULL);
    assert_int_equal(store_commit(f->st, f->err, sizeof(f->err)), APBOT_OK);

    int fds[2][2];
    pid_t pid[2];
    for (int k = 0; k < 2; k++) {
        assert_int_equal(pipe(fds[k]), 0);
        pid[k] = fork();
        assert_true(pid[k] >= 0);
        if (pid[k] == 0) {
            close(fds[k][0]);
            _exit(hammer(f->path, k ? "child-b" : "child-a", fds[k][1]));
        }
        close(fds[k][1]);
    }
    /* The parent claims too: three processes on one file. */
    int seen[HAMMER_ITEMS + 1];
    memset(seen, 0, sizeof(seen));
    int total = 0;
    int64_t id;
    while ((id = claim_id(f, f->st, "parent", T0 + 1000000)) != 0) {
        assert_true(id >= 1 && id <= HAMMER_ITEMS);
        seen[id]++;
        total++;
    }
    int per[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        while (read(fds[k][0], &id, sizeof(id)) == (ssize_t)sizeof(id)) {
            assert_true(id >= 1 && id <= HAMMER_ITEMS);
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
    assert_int_equal(total, HAMMER_ITEMS);
    for (int i = 1; i <= HAMMER_ITEMS; i++)
        if (seen[i] != 1)
            fail_msg("item %d claimed %d times", i, seen[i]);
    /* Every claim wrote exactly one event. */
    for (int i = 1; i <= HAMMER_ITEMS; i++)
        assert_int_equal(n_events(f, i), 2);
    struct store_counts c;
    assert_int_equal(store_counts(f->st, &c, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(c.by_state[MACHINE_CHECKING], HAMMER_ITEMS);
}

/* ---- apply ---- */

static void test_store_apply_checks_state_and_lease(void **state)
{
    struct fx *f = *state;
    int64_t id = enq(f, 1, 0, T0, NULL);
    assert_int_equal(claim_id(f, f->st, "w", T0 + 1), id);
    int events = n_events(f, id);

    /* Wrong `from`: refused, nothing written. */
    struct machine_step step;
    struct machine_counters c = {.settled = true};
    assert_int_equal(machine_next(MACHINE_POSTING, MACHINE_EV_CONFIRMED, &c, &f->pol, &step),
                     APBOT_OK);
    struct store_change ch = {.from = MACHINE_POSTING,
                              .event = MACHINE_EV_CONFIRMED,
                              .step = &step,
                              .erp_doc = "D-9",
                              .actor = "runner:w"};
    assert_int_equal(store_apply(f->st, id, "w", &ch, AT(T0 + 2), NULL, f->err, sizeof(f->err)),
                     APBOT_E_STATE);
    assert_int_equal(n_events(f, id), events);
    assert_int_equal(state_of(f, id), MACHINE_CHECKING);
    /* Another owner: refused. Operator while the lease is live: refused. */
    assert_int_equal(step_item(f, f->st, id, "intruder", MACHINE_EV_NOT_FOUND, T0, NULL, NULL),
                     APBOT_E_STATE);
    assert_int_equal(step_item(f, f->st, id, NULL, MACHINE_EV_NOT_FOUND, T0 + 2, NULL, NULL),
                     APBOT_E_STATE);
    assert_int_equal(n_events(f, id), events);
    /* Missing item. */
    assert_int_equal(step_item(f, f->st, 999, "w", MACHINE_EV_NOT_FOUND, T0, NULL, NULL),
                     APBOT_E_NOTFOUND);

    /* The owner's change: exactly one event, last_post_at set on entering posting. */
    assert_int_equal(step_item(f, f->st, id, "w", MACHINE_EV_NOT_FOUND, T0 + 3, NULL, "r1"),
                     APBOT_OK);
    assert_int_equal(n_events(f, id), events + 1);
    struct store_item it;
    assert_int_equal(store_get(f->st, id, &it, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(it.state, MACHINE_POSTING);
    assert_int_equal(it.last_post_at, T0 + 3);
    assert_int_equal(it.counters.posts, 1);
    assert_string_equal(it.lease_owner, "w"); /* keep_lease */
    assert_string_equal(it.reason, "r1");
    store_item_done(&it);
    struct last_event e = last_event(f, id);
    assert_string_equal(e.event, "not-found");
    assert_string_equal(e.from, "checking");
    assert_string_equal(e.to, "posting");
    assert_non_null(strstr(e.detail, "test"));

    /* Unknown outcome -> reconciling; reason NULL keeps, doc kept. */
    assert_int_equal(step_item(f, f->st, id, "w", MACHINE_EV_UNKNOWN, T0 + 4, NULL, NULL),
                     APBOT_OK);
    assert_int_equal(step_item(f, f->st, id, "w", MACHINE_EV_FOUND, T0 + 5, "D-42", ""), APBOT_OK);
    assert_int_equal(n_events(f, id), events + 3);
    assert_int_equal(store_get(f->st, id, &it, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(it.state, MACHINE_COMPLETED);
    assert_string_equal(it.erp_doc, "D-42");
    assert_null(it.reason); /* "" cleared it */
    assert_null(it.lease_owner);
    assert_int_equal(it.last_post_at, T0 + 3);
    store_item_done(&it);
    /* Terminal: the machine refuses anything further. */
    assert_int_equal(step_item(f, f->st, id, NULL, MACHINE_EV_RESOLVE_REQUEUE, T0 + 6, NULL, NULL),
                     APBOT_E_STATE);
}

static void test_store_operator_resolution(void **state)
{
    struct fx *f = *state;
    int64_t id = enq(f, 1, 0, T0, NULL);
    assert_int_equal(claim_id(f, f->st, "w", T0), id);
    assert_int_equal(
        step_item(f, f->st, id, "w", MACHINE_EV_FOUND_CONFLICT, T0 + 1, NULL, "amount differs"),
        APBOT_OK);
    assert_int_equal(state_of(f, id), MACHINE_MANUAL_REVIEW);
    assert_int_equal(step_item(f, f->st, id, NULL, MACHINE_EV_RESOLVE_POSTED, T0 + 2, "D-7", NULL),
                     APBOT_OK);
    struct last_event e = last_event(f, id);
    assert_string_equal(e.actor, "operator:test");
    assert_string_equal(e.event, "resolve-posted");
    assert_int_equal(state_of(f, id), MACHINE_COMPLETED);
}

static void test_store_unknown_state_is_left_alone(void **state)
{
    struct fx *f = *state;
    int64_t id = enq(f, 1, 0, T0, NULL);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "UPDATE items SET state = 'parked', lease_owner = 'x',"
                                  " lease_until = 1",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(state_of(f, id), MACHINE_STATE_INVALID);
    assert_int_equal(claim_id(f, f->st, "w", T0 + 10), 0);
    struct machine_step step = {.next = MACHINE_NEW, .why = "x"};
    struct store_change ch = {
        .from = MACHINE_NEW, .event = MACHINE_EV_RESOLVE_REQUEUE, .step = &step};
    assert_int_equal(store_apply(f->st, id, NULL, &ch, AT(T0), NULL, f->err, sizeof(f->err)),
                     APBOT_E_STATE);
    assert_non_null(strstr(f->err, "parked"));
    int n = -1;
    assert_int_equal(store_recover(f->st, AT(T0 + 10), &f->pol, &n, f->err, sizeof(f->err)),
                     APBOT_OK);
    assert_int_equal(n, 0);
    struct store_counts c;
    assert_int_equal(store_counts(f->st, &c, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(c.total, 1);
    assert_int_equal(c.by_state[MACHINE_NEW], 0);
}

/* ---- evidence ---- */

struct ev_seen {
    int n;
    size_t excerpt_len;
    char url[64], rule[32];
    int status;
    int64_t elapsed;
};

static int grab_evidence(void *ctx, const struct store_evidence_row *row)
{
    struct ev_seen *s = ctx;
    s->n++;
    s->excerpt_len = row->ev.excerpt ? strlen(row->ev.excerpt) : 0;
    snprintf(s->url, sizeof(s->url), "%s", row->ev.url ? row->ev.url : "");
    snprintf(s->rule, sizeof(s->rule), "%s", row->ev.rule ? row->ev.rule : "(null)");
    s->status = row->ev.http_status;
    s->elapsed = row->ev.elapsed_ms;
    return 0;
}

static void test_store_evidence_round_trip(void **state)
{
    struct fx *f = *state;
    int64_t id = enq(f, 1, 0, T0, NULL);
    struct store_evidence ev = {.step = "post",
                                .method = "POST",
                                .url = "http://erp/ap/post",
                                .http_status = 200,
                                .elapsed_ms = 1234,
                                .transport = "answered",
                                .rule = "success-banner",
                                .outcome = "completed",
                                .excerpt = "<p>Saved as D-1</p>"};
    assert_int_equal(store_add_evidence(f->st, id, &ev, AT(T0), f->err, sizeof(f->err)), APBOT_OK);
    struct ev_seen s = {0};
    assert_int_equal(store_each_evidence(f->st, id, grab_evidence, &s, f->err, sizeof(f->err)),
                     APBOT_OK);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.url, "http://erp/ap/post");
    assert_string_equal(s.rule, "success-banner");
    assert_int_equal(s.status, 200);
    assert_int_equal(s.elapsed, 1234);

    /* A huge page is cut to the bound, at a UTF-8 boundary; a NULL rule stays NULL. */
    size_t big = 3 * STORE_EXCERPT_MAX;
    char *page = malloc(big + 1);
    assert_non_null(page);
    for (size_t i = 0; i + 1 < big; i += 2) {
        page[i] = (char)0xC3; /* "é" */
        page[i + 1] = (char)0xA9;
    }
    page[big] = '\0';
    ev.excerpt = page;
    ev.rule = NULL;
    ev.url = "http://erp/ap/search";
    assert_int_equal(store_add_evidence(f->st, id, &ev, AT(T0 + 1), f->err, sizeof(f->err)),
                     APBOT_OK);
    free(page);
    memset(&s, 0, sizeof(s));
    assert_int_equal(store_each_evidence(f->st, id, grab_evidence, &s, f->err, sizeof(f->err)),
                     APBOT_OK);
    assert_int_equal(s.n, 2);
    assert_true(s.excerpt_len <= STORE_EXCERPT_MAX);
    assert_true(s.excerpt_len >= STORE_EXCERPT_MAX - 1);
    assert_int_equal(s.excerpt_len % 2, 0);
    assert_string_equal(s.rule, "(null)");
}

/* ---- recovery ---- */

static void test_store_recover_after_crash(void **state)
{
    struct fx *f = *state;
    int64_t chk = enq(f, 1, 0, T0, NULL);
    int64_t post = enq(f, 2, 0, T0 + 1, NULL);
    int64_t rec = enq(f, 3, 0, T0 + 2, NULL);
    int64_t live = enq(f, 4, 0, T0 + 3, NULL);
    assert_int_equal(claim_id(f, f->st, "dead", T0 + 10), chk);
    assert_int_equal(claim_id(f, f->st, "dead", T0 + 10), post);
    assert_int_equal(claim_id(f, f->st, "dead", T0 + 10), rec);
    assert_int_equal(step_item(f, f->st, post, "dead", MACHINE_EV_NOT_FOUND, T0 + 20, NULL, NULL),
                     APBOT_OK);
    assert_int_equal(step_item(f, f->st, rec, "dead", MACHINE_EV_NOT_FOUND, T0 + 20, NULL, NULL),
                     APBOT_OK);
    assert_int_equal(step_item(f, f->st, rec, "dead", MACHINE_EV_UNKNOWN, T0 + 30, NULL, NULL),
                     APBOT_OK);
    /* rec is reconciling and still leased to "dead" (keep_lease). */
    /* live's lease is taken later and has not expired at recovery time. */
    assert_int_equal(claim_id(f, f->st, "alive", T0 + 20000), live);

    int n = -1;
    /* Leases of "dead" run to T0+30010: nothing expired yet. */
    assert_int_equal(store_recover(f->st, AT(T0 + 30005), &f->pol, &n, f->err, sizeof(f->err)),
                     APBOT_OK);
    assert_int_equal(n, 0);
    int ev_post = n_events(f, post);
    assert_int_equal(
        store_recover_settle(f->st, AT(T0 + 40000), 60000, &f->pol, &n, f->err, sizeof(f->err)),
        APBOT_OK);
    assert_int_equal(n, 3);
    assert_int_equal(n_events(f, post), ev_post + 1);

    struct store_item it;
    assert_int_equal(store_get(f->st, chk, &it, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(it.state, MACHINE_NEW);
    assert_null(it.lease_owner);
    assert_int_equal(it.next_at, T0 + 40000);
    store_item_done(&it);
    assert_int_equal(store_get(f->st, post, &it, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(it.state, MACHINE_RECONCILING);
    /* The form may have gone out until the runner died: the settle delay counts from the
     * moment the crash was recorded, never from the intent. */
    assert_int_equal(it.next_at, T0 + 40000 + 60000);
    assert_int_equal(it.next_mono, M0 + 40000 + 60000);
    assert_true(it.has_settle);
    assert_int_equal(it.settle_mono, M0 + 40000);
    assert_int_equal(it.settle_at, T0 + 40000);
    assert_int_equal(it.counters.posts, 1);
    store_item_done(&it);
    assert_int_equal(store_get(f->st, rec, &it, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(it.state, MACHINE_RECONCILING);
    assert_null(it.lease_owner);
    /* already reconciling since T0 + 30: the settle delay keeps its base */
    assert_int_equal(it.settle_mono, M0 + 30);
    assert_int_equal(it.next_mono, M0 + 30 + 60000);
    store_item_done(&it);
    struct last_event e = last_event(f, post);
    assert_string_equal(e.event, "lease-expired");
    assert_string_equal(e.actor, "recovery");
    assert_int_equal(state_of(f, live), MACHINE_CHECKING);

    /* The dead owner coming back is refused. */
    assert_int_equal(step_item(f, f->st, post, "dead", MACHINE_EV_CONFIRMED, T0 + 40001, "D", NULL),
                     APBOT_E_STATE);
    /* checking went back to new, due at once; the reconciling pair waits out the settle
     * delay from their settle base. */
    assert_int_equal(claim_id(f, f->st, "w", T0 + 40001), chk);
    assert_int_equal(claim_id(f, f->st, "w", T0 + 40001), 0);
    assert_int_equal(claim_id(f, f->st, "w", T0 + 30 + 60000 - 1), 0);
    assert_int_equal(claim_id(f, f->st, "w", T0 + 30 + 60000), rec);
    assert_int_equal(step_item(f, f->st, rec, "w", MACHINE_EV_FOUND, T0 + 60031, "D-3", NULL),
                     APBOT_OK);
    assert_int_equal(claim_id(f, f->st, "w", T0 + 40000 + 60000 - 1), 0);
    assert_int_equal(claim_id(f, f->st, "w", T0 + 40000 + 60000), post);

    /* store_recover (no settle delay) makes a reconciling item due at once. */
    assert_int_equal(store_recover(f->st, AT(T0 + 200000), &f->pol, &n, f->err, sizeof(f->err)),
                     APBOT_OK);
    assert_int_equal(n, 3);
    /* Reconciliations first (due now, not settled), then the new items. */
    assert_int_equal(claim_id(f, f->st, "w2", T0 + 200000), post);
    assert_int_equal(claim_id(f, f->st, "w2", T0 + 200000), chk);
    assert_int_equal(claim_id(f, f->st, "w2", T0 + 200000), live);
}

/* ---- counts and readers ---- */

struct collect {
    int n;
    int64_t ids[16];
};

static int collect_item(void *ctx, const struct store_item *it)
{
    struct collect *c = ctx;
    if (c->n < 16)
        c->ids[c->n] = it->id;
    c->n++;
    return 0;
}

static void test_store_counts_and_each(void **state)
{
    struct fx *f = *state;
    for (int i = 1; i <= 5; i++)
        (void)enq(f, i, 0, T0 + i * 1000, NULL);
    assert_int_equal(claim_id(f, f->st, "w", T0 + 10000), 1);
    assert_int_equal(claim_id(f, f->st, "w", T0 + 10000), 2);
    assert_int_equal(
        step_item(f, f->st, 2, "w", MACHINE_EV_FOUND_CONFLICT, T0 + 10000, NULL, "why"), APBOT_OK);
    assert_int_equal(claim_id(f, f->st, "w", T0 + 10000), 3);
    assert_int_equal(step_item(f, f->st, 3, "w", MACHINE_EV_FOUND, T0 + 10000, "D-3", NULL),
                     APBOT_OK);

    struct store_counts c;
    assert_int_equal(store_counts(f->st, &c, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(c.total, 5);
    assert_int_equal(c.by_state[MACHINE_NEW], 2);
    assert_int_equal(c.by_state[MACHINE_CHECKING], 1);
    assert_int_equal(c.by_state[MACHINE_MANUAL_REVIEW], 1);
    assert_int_equal(c.by_state[MACHINE_COMPLETED], 1);
    assert_int_equal(c.oldest_pending_at, T0 + 1000); /* item 1, checking */

    struct collect col = {0};
    assert_int_equal(store_each(f->st, MACHINE_NEW, collect_item, &col, f->err, sizeof(f->err)),
                     APBOT_OK);
    assert_int_equal(col.n, 2);
    assert_int_equal(col.ids[0], 4);
    assert_int_equal(col.ids[1], 5);
    memset(&col, 0, sizeof(col));
    assert_int_equal(
        store_each(f->st, MACHINE_STATE_INVALID, collect_item, &col, f->err, sizeof(f->err)),
        APBOT_OK);
    assert_int_equal(col.n, 5);
    memset(&col, 0, sizeof(col));
    assert_int_equal(store_each_limit(f->st, MACHINE_STATE_INVALID, 3, collect_item, &col, f->err,
                                      sizeof(f->err)),
                     APBOT_OK);
    assert_int_equal(col.n, 3);

    struct store_item it = {.id = -7};
    assert_int_equal(store_get(f->st, 99, &it, f->err, sizeof(f->err)), APBOT_E_NOTFOUND);
    assert_int_equal(it.id, -7); /* untouched */
    assert_int_equal(store_get_by_key(f->st, "AP1-NOPE", &it, f->err, sizeof(f->err)),
                     APBOT_E_NOTFOUND);
    assert_int_equal(store_get(f->st, 3, &it, f->err, sizeof(f->err)), APBOT_OK);
    assert_string_equal(it.erp_doc, "D-3");
    char key[32];
    snprintf(key, sizeof(key), "%s", it.key);
    store_item_done(&it);
    assert_int_equal(store_get_by_key(f->st, key, &it, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(it.id, 3);
    store_item_done(&it);

    int64_t wait = -7;
    assert_int_equal(store_next_due(f->st, AT(T0 + 1000), &wait, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(wait, 3000); /* item 4, due at T0 + 4000 on the mono clock */
    assert_int_equal(store_next_due(f->st, AT(T0 + 4000), &wait, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(wait, 0);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        T(test_store_migrates_fresh_and_reopens),
        cmocka_unit_test(test_store_memory_db_opens),
        T(test_store_busy_and_bad_path),
        T(test_store_enqueue_queued_already_conflict),
        T(test_store_enqueue_batches),
        T(test_store_enqueue_invoice),
        T(test_store_claim_order_and_due),
        T(test_store_claim_two_connections),
        T(test_store_claim_forked_processes),
        T(test_store_apply_checks_state_and_lease),
        T(test_store_operator_resolution),
        T(test_store_unknown_state_is_left_alone),
        T(test_store_evidence_round_trip),
        T(test_store_recover_after_crash),
        T(test_store_counts_and_each),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
