/*
 * test_store.c - the store's conformance suite, run against both backends: migrations,
 * enqueue results, claim order and lease exclusivity (two connections, and two forked
 * processes hammering one queue), store_apply's state and lease checks with exactly one
 * event per change, evidence, crash recovery, counts and the readers (get, each, events),
 * the boot and settle rules, one document per item, late commits and busy retries.
 *
 * Every case runs once on SQLite (a fresh file in a temporary directory) and once on
 * PostgreSQL (a fresh schema on the test server of the ctest fixture `pg`), with the
 * caller's clock trusted (store_test_trust_caller_clock) so one timeline of fake readings
 * drives both. A few cases are SQLite's own (file modes, ":memory:", an old file's
 * migration). What only PostgreSQL does (the server's clock, SKIP LOCKED across processes, a
 * lost connection) is in test_pg_store.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "apbot/clock.h"
#include "apbot/invoice.h"
#include "apbot/machine.h"
#include "apbot/store.h"
#include "helpers/pg_test.h"
#include "queue/store-int.h"
#include "queue/store-test.h"

#define T0 INT64_C(1700000000000) /* a fixed wall "now" in Unix ms */
#define M0 INT64_C(5000000)       /* the mono clock at T0 */
#define BOOT_A "boot-a-0000-0000-0000-000000000000"
#define BOOT_B "boot-b-0000-0000-0000-000000000000"
/* The audit chain's hashes of events 1 and 4 of test_store_audit_check_table's chain: the
 * serialisation, version 1, pinned. */
#define AUDIT_KAT_1 "54f94ae46919f44ea4cce211e855c5c47df37d5387c65423433d9865d776675a"
#define AUDIT_KAT_4 "6e04941588c32b702c2f025b17a10d0382ca8f50d81287dce5d439a2393becb7"

/* A clock reading at wall ms, mono moving with it, under boot A. */
#define AT(ms) (&(struct apbot_now){.wall_ms = (ms), .mono_ms = (ms)-T0 + M0, .boot = BOOT_A})
/* A reading whose wall and mono disagree (the wall clock was stepped), or another boot. */
static struct apbot_now now_of(int64_t wall, int64_t mono, const char *boot)
{
    struct apbot_now n = {.wall_ms = wall, .mono_ms = mono};
    snprintf(n.boot, sizeof(n.boot), "%s", boot);
    return n;
}
#define AT2(wall, mono, b) ((struct apbot_now[]){now_of((wall), (mono), (b))})

enum backend { BK_SQLITE, BK_PG };

struct fx {
    enum backend bk;
    char dir[96];
    char path[512];  /* the SQLite file, or the PostgreSQL connection string */
    char schema[64]; /* PostgreSQL: the test's own schema */
    struct store *st;
    struct machine_policy pol;
    struct machine_step claimed; /* machine_next(new, claimed) */
    int64_t settle_ms;           /* what step_item passes as the settle delay */
    char err[APBOT_ERR_LEN];
};

static int fx_setup_bk(void **state, enum backend bk)
{
    struct fx *f = calloc(1, sizeof(*f));
    if (!f)
        return -1;
    f->bk = bk;
    const char *tmp = getenv("TMPDIR");
    snprintf(f->dir, sizeof(f->dir), "%s/apbot-store-XXXXXX",
             tmp && *tmp && strlen(tmp) < 64 ? tmp : "/tmp");
    if (!mkdtemp(f->dir))
        return -1;
    if (bk == BK_PG) {
        if (!pgt_new_queue(f->path, sizeof(f->path), f->schema, sizeof(f->schema)))
            return -1;
    } else {
        snprintf(f->path, sizeof(f->path), "%s/q.db", f->dir);
    }
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

static int fx_setup(void **state)
{
    return fx_setup_bk(state, BK_SQLITE);
}

static int fx_setup_pg(void **state)
{
    return fx_setup_bk(state, BK_PG);
}

static int fx_teardown(void **state)
{
    struct fx *f = *state;
    /* Whatever a case did through the store, every event it appended is chained: the chain
     * verifies, holds every event and ends at the last one (store.h, "The audit chain"). */
    struct store_audit_result ar;
    struct store_tally t;
    int bad = 0;
    if (f->st && (store_audit_verify(f->st, NULL, &ar, f->err, sizeof(f->err)) != APBOT_OK ||
                  store_tally(f->st, &t, f->err, sizeof(f->err)) != APBOT_OK)) {
        fprintf(stderr, "teardown: %s\n", f->err);
        bad = -1;
    } else if (f->st && (ar.kind != STORE_AUDIT_INTACT || ar.events != t.events ||
                         ar.last_good.event_id != t.head_event_id)) {
        fprintf(stderr,
                "teardown: the audit chain does not verify (%s: %s; %" PRId64 " of %" PRId64
                " events, head #%" PRId64 ")\n",
                store_audit_kind_name(ar.kind), ar.detail, ar.events, t.events, t.head_event_id);
        bad = -1;
    }
    store_close(f->st);
    if (f->bk == BK_PG)
        pgt_drop_queue(f->schema);
    char p[600];
    const char *suffix[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; f->bk == BK_SQLITE && i < sizeof(suffix) / sizeof(suffix[0]); i++) {
        snprintf(p, sizeof(p), "%s%s", f->path, suffix[i]);
        unlink(p);
    }
    rmdir(f->dir);
    free(f);
    return bad;
}

/* A second, raw connection to a queue, for what the store API cannot do. */
struct raw {
    sqlite3 *db;
    PGconn *pg;
};

static struct raw raw_open(enum backend bk, const char *path)
{
    struct raw r = {NULL, NULL};
    if (bk == BK_PG) {
        r.pg = PQconnectdb(path);
        if (PQstatus(r.pg) != CONNECTION_OK)
            fail_msg("raw connection: %s", PQerrorMessage(r.pg));
    } else {
        if (sqlite3_open(path, &r.db) != SQLITE_OK)
            fail_msg("raw connection: %s", sqlite3_errmsg(r.db));
        sqlite3_busy_timeout(r.db, 5000);
    }
    return r;
}

/* Runs sql (several statements allowed); 0 when it succeeded. */
static int raw_exec(struct raw *r, const char *sql)
{
    if (r->db)
        return sqlite3_exec(r->db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
    PGresult *res = PQexec(r->pg, sql);
    ExecStatusType st = PQresultStatus(res);
    PQclear(res);
    return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK ? 0 : -1;
}

/* Takes the queue's write lock: no store writes an item until COMMIT or ROLLBACK. */
static int raw_lock(struct raw *r)
{
    return raw_exec(r, r->db ? "BEGIN IMMEDIATE" : "BEGIN; LOCK TABLE items IN EXCLUSIVE MODE");
}

static void raw_close(struct raw *r)
{
    if (r->db)
        sqlite3_close(r->db);
    if (r->pg)
        PQfinish(r->pg);
    r->db = NULL;
    r->pg = NULL;
}

/* One WAL position of the PostgreSQL server behind conninfo (expr: a pg_lsn expression). */
static void pg_wal_lsn(const char *conninfo, const char *expr, char *ret, size_t len)
{
    struct raw r = raw_open(BK_PG, conninfo);
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT %s", expr);
    PGresult *res = PQexec(r.pg, sql);
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
        fail_msg("%s: %s", sql, PQerrorMessage(r.pg));
    snprintf(ret, len, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    raw_close(&r);
}

/* Whether the server's WAL is flushed to disk at or past lsn. */
static bool pg_wal_flushed_past(const char *conninfo, const char *lsn)
{
    char sql[128], got[8];
    snprintf(sql, sizeof(sql), "pg_current_wal_flush_lsn() >= '%s'::pg_lsn", lsn);
    pg_wal_lsn(conninfo, sql, got, sizeof(got));
    return strcmp(got, "t") == 0;
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
    c.settled = store_settled(&it, AT(now), f->settle_ms); /* as a runner judges it */
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
            .keep_lease = !machine_is_terminal(step.next) && step.next != MACHINE_NEW,
        };
        rc = store_apply(st, id, owner, &ch, AT(now), NULL, f->err, sizeof(f->err));
    }
    store_item_done(&it);
    return rc;
}

static void assert_same_item(const struct store_item *a, const struct store_item *b);

/* Claims the next item; the row store_claim hands back is the row a fresh read finds. */
static int64_t claim_id(struct fx *f, struct store *st, const char *owner, int64_t now)
{
    struct store_item it, fresh;
    int rc = store_claim(st, owner, AT(now), 30000, &f->claimed, &it, f->err, sizeof(f->err));
    if (rc == APBOT_E_NOTFOUND)
        return 0;
    if (rc != APBOT_OK)
        fail_msg("claim: %s", f->err);
    assert_int_equal(store_get(st, it.id, &fresh, f->err, sizeof(f->err)), APBOT_OK);
    assert_same_item(&it, &fresh);
    store_item_done(&fresh);
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

    /* The append-only triggers are in place (and WAL on SQLite). */
    struct store_evidence ev = {.step = "lookup", .method = "GET", .url = "/x"};
    assert_int_equal(store_add_evidence(f->st, id, &ev, AT(T0), f->err, sizeof(f->err)), APBOT_OK);
    struct raw db = raw_open(f->bk, f->path);
    if (f->bk == BK_SQLITE) {
        sqlite3_stmt *s = NULL;
        assert_int_equal(sqlite3_prepare_v2(db.db, "PRAGMA journal_mode", -1, &s, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_step(s), SQLITE_ROW);
        assert_string_equal((const char *)sqlite3_column_text(s, 0), "wal");
        sqlite3_finalize(s);
        /* a new queue has 2 KiB pages (fewer bytes written per state change) */
        assert_int_equal(sqlite3_prepare_v2(db.db, "PRAGMA page_size", -1, &s, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_step(s), SQLITE_ROW);
        assert_int_equal(sqlite3_column_int(s, 0), 2048);
        sqlite3_finalize(s);
    } else {
        assert_int_not_equal(raw_exec(&db, "TRUNCATE events"), 0);
        assert_int_not_equal(raw_exec(&db, "TRUNCATE evidence"), 0);
    }
    assert_int_not_equal(raw_exec(&db, "DELETE FROM events"), 0);
    assert_int_not_equal(raw_exec(&db, "UPDATE events SET actor = 'x'"), 0);
    assert_int_not_equal(raw_exec(&db, "DELETE FROM evidence"), 0);
    assert_int_equal(n_events(f, id), 1);
    /* A database from a newer apbot is refused, not touched. */
    assert_int_equal(raw_exec(&db, f->bk == BK_SQLITE ? "PRAGMA user_version = 999"
                                                      : "UPDATE apbot_schema SET version = 999"),
                     0);
    raw_close(&db);
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
    /* Another connection holds the write lock: a claim waits, retries once, then says busy. */
    struct raw raw = raw_open(f->bk, f->path);
    assert_int_equal(raw_lock(&raw), 0);
    store_set_busy_timeout(f->st, 50);
    store_set_busy_retries(f->st, 1);
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
    assert_int_equal(store_busy_retried(f->st), 2);
    assert_int_equal(raw_exec(&raw, "COMMIT"), 0);
    raw_close(&raw);
    assert_int_equal(claim_id(f, f->st, "w", T0 + 1), 1);

    /* A file that cannot be opened, a server that does not answer (unavailable: weather, try
     * again later) and one that answers but refuses the connection (a setting to fix). */
    struct store *st = NULL;
    const char *bad = f->bk == BK_SQLITE ? "/nonexistent-dir/q.db"
                                         : "host=/nonexistent-dir dbname=apbot connect_timeout=2";
    assert_int_equal(store_open(bad, &st, f->err, sizeof(f->err)),
                     f->bk == BK_SQLITE ? APBOT_E_IO : APBOT_E_UNAVAIL);
    assert_null(st);
    assert_non_null(strstr(f->err, "/nonexistent-dir"));
    if (f->bk == BK_PG) {
        char refused[700];
        snprintf(refused, sizeof(refused), "%s dbname=no_such_database_here", pgt_server());
        assert_int_equal(store_open(refused, &st, f->err, sizeof(f->err)), APBOT_E_IO);
        assert_null(st);
        assert_non_null(strstr(f->err, "no_such_database_here"));
    }
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

/* A row as store_enqueue_prepare makes it (without an invoice): item n, fingerprint variant
 * v; vendor_name NULL for every third, quotes and a backslash for the others. */
static struct store_enqueue_req mk_req(int n, int variant, const char *source)
{
    struct store_enqueue_req r;
    memset(&r, 0, sizeof(r));
    snprintf(r.key, sizeof(r.key), "AP1-TEST%016d", n);
    snprintf(r.fingerprint, sizeof(r.fingerprint), "%064d", n * 10 + variant);
    r.payload = strdup("{\"v\":\"a \\\"quoted\\\" one\"}");
    r.source = source ? strdup(source) : NULL;
    r.vendor_id = strdup("V100");
    r.vendor_name = n % 3 ? strdup("Acme \"Supplies\" \\ {Ltd}, NULL") : NULL;
    r.invoice_number = strdup("INV-1");
    snprintf(r.doc_type, sizeof(r.doc_type), "invoice");
    snprintf(r.issue_date, sizeof(r.issue_date), "2024-01-31");
    snprintf(r.currency, sizeof(r.currency), "EUR");
    r.exponent = 2;
    r.total = 123450 + n;
    return r;
}

static void test_store_enqueue_many(void **state)
{
    struct fx *f = *state;
    int64_t one = enq(f, 1, 0, T0, NULL), two = enq(f, 2, 0, T0, NULL);
    struct store_enqueue_req r[] = {
        mk_req(10, 0, "a.csv:1"),     /* 0 new */
        mk_req(1, 0, "a.csv:2"),      /* 1 already queued before */
        mk_req(2, 1, "a.csv:3"),      /* 2 conflicts with what was queued before */
        mk_req(11, 0, "a.csv:4"),     /* 3 new */
        mk_req(10, 0, "a.csv:5"),     /* 4 the same as 0: already, by then */
        mk_req(11, 1, "a.csv:6"),     /* 5 conflicts with 3 */
        mk_req(12, 0, "b\xff.csv:7"), /* 6 new, a source that is not UTF-8 */
        mk_req(2, 0, "a.csv:8"),      /* 7 the same as queued before: already */
        mk_req(13, 0, NULL),          /* 8 new, no source */
    };
    const size_t n = sizeof(r) / sizeof(r[0]);
    assert_int_equal(store_enqueue_many(f->st, r, n, AT(T0 + 1), f->err, sizeof(f->err)), APBOT_OK);
    static const enum store_enqueue_result want[] = {
        STORE_ENQ_QUEUED, STORE_ENQ_ALREADY, STORE_ENQ_CONFLICT,
        STORE_ENQ_QUEUED, STORE_ENQ_ALREADY, STORE_ENQ_CONFLICT,
        STORE_ENQ_QUEUED, STORE_ENQ_ALREADY, STORE_ENQ_QUEUED,
    };
    for (size_t i = 0; i < n; i++) {
        if (r[i].result != want[i])
            fail_msg("req %zu: result %d, want %d", i, (int)r[i].result, (int)want[i]);
        assert_true((r[i].detail != NULL) == (want[i] == STORE_ENQ_CONFLICT));
    }
    /* New items get ids in the order given; the others name the row their key has. */
    assert_true(r[0].id > two && r[3].id > r[0].id && r[6].id > r[3].id && r[8].id > r[6].id);
    assert_int_equal(r[1].id, one);
    assert_int_equal(r[2].id, two);
    assert_int_equal(r[4].id, r[0].id);
    assert_int_equal(r[5].id, r[3].id);
    assert_int_equal(r[7].id, two);
    /* A conflict names the queued item as store_enqueue does. */
    char want_detail[APBOT_ERR_LEN];
    snprintf(want_detail, sizeof(want_detail),
             "same identity as queued item #%" PRId64 " (AP1-TEST%016d, from a.csv:4, state new) "
             "but different content; not queued",
             r[3].id, 11);
    assert_string_equal(r[5].detail, want_detail);
    assert_non_null(strstr(r[2].detail, "from month-end.csv:2, state new"));
    /* The rows as given, one `enqueued` event each; nothing else changed. */
    for (size_t i = 0; i < n; i++) {
        struct store_item it;
        assert_int_equal(store_get(f->st, r[i].id, &it, f->err, sizeof(f->err)), APBOT_OK);
        assert_int_equal(n_events(f, r[i].id), 1);
        if (want[i] == STORE_ENQ_QUEUED && i != 6) {
            assert_string_equal(it.key, r[i].key);
            assert_string_equal(it.fingerprint, r[i].fingerprint);
            assert_string_equal(it.payload, r[i].payload);
            assert_string_equal(it.source, r[i].source ? r[i].source : "");
            if (r[i].vendor_name)
                assert_string_equal(it.vendor_name, r[i].vendor_name);
            else
                assert_null(it.vendor_name);
            assert_int_equal(it.total, r[i].total);
            assert_int_equal(it.state, MACHINE_NEW);
        }
        store_item_done(&it);
    }
    for (size_t i = 0; i < n; i++)
        store_enqueue_req_done(&r[i]);
    struct store_counts c;
    assert_int_equal(store_counts(f->st, &c, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(c.total, 6);

    /* Many at once (past one statement's rows on PostgreSQL), a few twice. */
    enum { MANY = 2500 };
    struct store_enqueue_req *m = calloc(MANY + 10, sizeof(*m));
    assert_non_null(m);
    for (int i = 0; i < MANY; i++)
        m[i] = mk_req(1000 + i, 0, "many.csv");
    for (int i = 0; i < 10; i++)
        m[MANY + i] = mk_req(1000 + i * 100, 0, "many.csv");
    assert_int_equal(store_enqueue_many(f->st, m, MANY + 10, AT(T0 + 2), f->err, sizeof(f->err)),
                     APBOT_OK);
    for (int i = 0; i < MANY + 10; i++) {
        assert_int_equal(m[i].result, i < MANY ? STORE_ENQ_QUEUED : STORE_ENQ_ALREADY);
        if (i > 0 && i < MANY)
            assert_true(m[i].id > m[i - 1].id);
        store_enqueue_req_done(&m[i]);
    }
    free(m);
    assert_int_equal(store_counts(f->st, &c, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(c.total, 6 + MANY);

    /* Inside a batch it is the batch's: rolled back with it. */
    struct store_enqueue_req b[2] = {mk_req(9000, 0, "x"), mk_req(9001, 0, "y")};
    assert_int_equal(store_begin(f->st, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(store_enqueue_many(f->st, b, 2, AT(T0 + 3), f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(b[0].result, STORE_ENQ_QUEUED);
    store_rollback(f->st);
    store_enqueue_req_done(&b[0]);
    store_enqueue_req_done(&b[1]);
    assert_int_equal(store_counts(f->st, &c, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(c.total, 6 + MANY);
    /* An incomplete row is refused before anything is written. */
    struct store_enqueue_req bad = mk_req(9002, 0, "z");
    free(bad.payload);
    bad.payload = NULL;
    assert_int_equal(store_enqueue_many(f->st, &bad, 1, NULL, f->err, sizeof(f->err)),
                     APBOT_E_INVAL);
    store_enqueue_req_done(&bad);
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

/* store_claim_id: the one item asked for, when it is due and free, before older due items;
 * anything else (not due, leased, in a state no claim looks for, unknown) is NOTFOUND and
 * changes nothing. */
static void test_store_claim_given_item(void **state)
{
    struct fx *f = *state;
    int64_t a = enq(f, 1, 0, T0 + 10, NULL);
    int64_t b = enq(f, 2, 0, T0 + 20, NULL);
    int64_t c = enq(f, 3, 0, T0 + 5000, NULL);
    struct store_item it;

    assert_int_equal(store_claim_id(f->st, b, "w1", AT(T0 + 100), 30000, &f->claimed, &it, f->err,
                                    sizeof(f->err)),
                     APBOT_OK);
    assert_int_equal(it.id, b);
    assert_int_equal(it.state, MACHINE_CHECKING);
    assert_string_equal(it.lease_owner, "w1");
    struct store_item fresh;
    assert_int_equal(store_get(f->st, b, &fresh, f->err, sizeof(f->err)), APBOT_OK);
    assert_same_item(&it, &fresh);
    store_item_done(&fresh);
    store_item_done(&it);
    assert_int_equal(n_events(f, b), 2);
    assert_string_equal(last_event(f, b).event, "claimed");

    /* in checking now, c not due yet, no such item: nothing */
    int64_t ids[] = {b, c, c + 1000};
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        memset(&it, 0, sizeof(it));
        assert_int_equal(store_claim_id(f->st, ids[i], "w2", AT(T0 + 100), 30000, &f->claimed, &it,
                                        f->err, sizeof(f->err)),
                         APBOT_E_NOTFOUND);
        assert_int_equal(it.id, 0);
    }
    assert_int_equal(n_events(f, b), 2);
    assert_int_equal(state_of(f, c), MACHINE_NEW);
    assert_int_equal(store_claim_id(f->st, 0, "w2", AT(T0 + 100), 30000, &f->claimed, &it, f->err,
                                    sizeof(f->err)),
                     APBOT_E_INVAL);

    /* a reconciling item under a live lease is not free; once it expired it is, and keeps its
     * state without an event */
    assert_int_equal(step_item(f, f->st, b, "w1", MACHINE_EV_NOT_FOUND, T0 + 200, NULL, NULL),
                     APBOT_OK);
    assert_int_equal(step_item(f, f->st, b, "w1", MACHINE_EV_ALREADY_EXISTS, T0 + 200, NULL, NULL),
                     APBOT_OK);
    assert_int_equal(state_of(f, b), MACHINE_RECONCILING);
    assert_int_equal(store_claim_id(f->st, b, "w2", AT(T0 + 300), 30000, &f->claimed, &it, f->err,
                                    sizeof(f->err)),
                     APBOT_E_NOTFOUND);
    int events = n_events(f, b);
    assert_int_equal(store_claim_id(f->st, b, "w2", AT(T0 + 100 + 30001), 30000, &f->claimed, &it,
                                    f->err, sizeof(f->err)),
                     APBOT_OK);
    assert_int_equal(it.state, MACHINE_RECONCILING);
    assert_string_equal(it.lease_owner, "w2");
    store_item_done(&it);
    assert_int_equal(n_events(f, b), events);

    /* the others are claimed as ever: a, then c once due */
    assert_int_equal(claim_id(f, f->st, "w3", T0 + 40000), a);
    assert_int_equal(store_claim_id(f->st, c, "w3", AT(T0 + 40000), 30000, &f->claimed, &it, f->err,
                                    sizeof(f->err)),
                     APBOT_OK);
    assert_int_equal(it.id, c);
    store_item_done(&it);
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
    /* A batch open on one connection: SQLite makes every other writer wait (then busy);
     * PostgreSQL lets the other claim go on without seeing the batch's rows. */
    assert_int_equal(store_begin(f->st, f->err, sizeof(f->err)), APBOT_OK);
    (void)enq(f, 3, 0, T0, NULL);
    if (f->bk == BK_SQLITE) {
        sqlite3 *raw = NULL;
        assert_int_equal(sqlite3_open(f->path, &raw), SQLITE_OK);
        sqlite3_busy_timeout(raw, 50);
        assert_int_not_equal(sqlite3_exec(raw, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(raw);
    } else {
        assert_int_equal(claim_id(f, st2, "p2", T0 + 10), 0);
    }
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

/*
 * A backend registers its ops table when it opens a store (store_base_init, first thing in
 * its constructor): a copy of this backend's table with any one required operation NULL is
 * refused with APBOT_E_BUG naming the backend and the operation, and so is a table without a
 * name; apply_claim alone may be NULL (store_apply_claim then makes an apply and a claim).
 */
static void test_store_backend_ops_are_checked(void **state)
{
    struct fx *f = *state;
    const struct store_ops *real = f->st->ops;
    struct store probe;
    char err[APBOT_ERR_LEN], want[APBOT_ERR_LEN];
    memset(&probe, 0, sizeof(probe));
    assert_int_equal(store_base_init(&probe, real, err, sizeof(err)), APBOT_OK);
    assert_ptr_equal(probe.ops, real);

    int refused = 0;
#define NULL_ONE(op)                                                                               \
    do {                                                                                           \
        struct store_ops bad = *real;                                                              \
        bad.op = NULL;                                                                             \
        memset(&probe, 0, sizeof(probe));                                                          \
        assert_int_equal(store_base_init(&probe, &bad, err, sizeof(err)), APBOT_E_BUG);            \
        assert_null(probe.ops);                                                                    \
        snprintf(want, sizeof(want), "store: the %s backend has no %s operation", real->name,      \
                 #op);                                                                             \
        assert_string_equal(err, want);                                                            \
        refused++;                                                                                 \
    } while (0);
    STORE_REQUIRED_OPS(NULL_ONE)
#undef NULL_ONE
    assert_int_equal(refused, 34);

    struct store_ops bad = *real;
    bad.name = NULL;
    assert_int_equal(store_base_init(&probe, &bad, err, sizeof(err)), APBOT_E_BUG);
    assert_string_equal(err, "store: a backend without a name");
    bad = *real;
    bad.apply_claim = NULL;
    assert_int_equal(store_base_init(&probe, &bad, err, sizeof(err)), APBOT_OK);
}

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

static void assert_same_text(const char *a, const char *b)
{
    if (!a || !b)
        assert_ptr_equal(a, b);
    else
        assert_string_equal(a, b);
}

/* Every column of two reads of one row. */
static void assert_same_item(const struct store_item *a, const struct store_item *b)
{
    assert_int_equal(a->id, b->id);
    assert_string_equal(a->key, b->key);
    assert_string_equal(a->fingerprint, b->fingerprint);
    assert_int_equal(a->state, b->state);
    assert_int_equal(a->counters.posts, b->counters.posts);
    assert_int_equal(a->counters.cycles, b->counters.cycles);
    assert_int_equal(a->counters.attempts, b->counters.attempts);
    assert_int_equal(a->next_at, b->next_at);
    assert_int_equal(a->last_post_at, b->last_post_at);
    assert_int_equal(a->created_at, b->created_at);
    assert_int_equal(a->updated_at, b->updated_at);
    assert_same_text(a->lease_owner, b->lease_owner);
    assert_int_equal(a->lease_until, b->lease_until);
    assert_string_equal(a->clock_boot, b->clock_boot);
    assert_int_equal(a->next_mono, b->next_mono);
    assert_int_equal(a->lease_mono, b->lease_mono);
    assert_int_equal(a->has_settle, b->has_settle);
    assert_int_equal(a->settle_mono, b->settle_mono);
    assert_int_equal(a->settle_at, b->settle_at);
    assert_same_text(a->payload, b->payload);
    assert_same_text(a->source, b->source);
    assert_same_text(a->erp_doc, b->erp_doc);
    assert_same_text(a->reason, b->reason);
    assert_same_text(a->vendor_id, b->vendor_id);
    assert_same_text(a->vendor_name, b->vendor_name);
    assert_same_text(a->invoice_number, b->invoice_number);
    assert_string_equal(a->doc_type, b->doc_type);
    assert_string_equal(a->issue_date, b->issue_date);
    assert_string_equal(a->currency, b->currency);
    assert_int_equal(a->exponent, b->exponent);
    assert_int_equal(a->total, b->total);
}

/* store_apply_get hands back the row exactly as a store_get after the change reads it, and
 * touches *ret_item only when the change is made. */
static void test_store_apply_get_returns_the_row(void **state)
{
    struct fx *f = *state;
    int64_t id = enq(f, 1, 0, T0, NULL), other = enq(f, 2, 0, T0, NULL);
    assert_int_equal(claim_id(f, f->st, "w", T0 + 1), id);
    assert_int_equal(claim_id(f, f->st, "w", T0 + 1), other);
    struct machine_counters c = {.settled = true};
    struct machine_step to_posting, to_unknown, confirmed;
    assert_int_equal(machine_next(MACHINE_CHECKING, MACHINE_EV_NOT_FOUND, &c, &f->pol, &to_posting),
                     APBOT_OK);
    c = to_posting.counters;
    assert_int_equal(machine_next(MACHINE_POSTING, MACHINE_EV_UNKNOWN, &c, &f->pol, &to_unknown),
                     APBOT_OK);
    struct store_change ch = {.from = MACHINE_CHECKING,
                              .event = MACHINE_EV_NOT_FOUND,
                              .step = &to_posting,
                              .settle_ms = f->settle_ms,
                              .reason = "r1",
                              .detail = "test",
                              .actor = "runner:w",
                              .keep_lease = true};
    struct store_item got, want;

    /* refused: *ret_item untouched */
    memset(&got, 0xa5, sizeof(got));
    struct store_item poison = got;
    ch.from = MACHINE_POSTING;
    assert_int_equal(
        store_apply_get(f->st, id, "w", &ch, AT(T0 + 2), NULL, &got, f->err, sizeof(f->err)),
        APBOT_E_STATE);
    assert_memory_equal(&got, &poison, sizeof(got));

    /* into posting, lease kept, then into reconciling with a settle mark and a backoff */
    ch.from = MACHINE_CHECKING;
    assert_int_equal(
        store_apply_get(f->st, id, "w", &ch, AT(T0 + 3), NULL, &got, f->err, sizeof(f->err)),
        APBOT_OK);
    assert_int_equal(store_get(f->st, id, &want, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(got.state, MACHINE_POSTING);
    assert_string_equal(got.reason, "r1");
    assert_string_equal(got.lease_owner, "w");
    assert_same_item(&got, &want);
    store_item_done(&got);
    store_item_done(&want);
    ch = (struct store_change){.from = MACHINE_POSTING,
                               .event = MACHINE_EV_UNKNOWN,
                               .step = &to_unknown,
                               .settle_ms = f->settle_ms,
                               .backoff_ms = 700,
                               .detail = "timeout",
                               .actor = "runner:w",
                               .keep_lease = true};
    assert_int_equal(
        store_apply_get(f->st, id, "w", &ch, AT(T0 + 4), NULL, &got, f->err, sizeof(f->err)),
        APBOT_OK);
    assert_int_equal(store_get(f->st, id, &want, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(got.state, to_unknown.next);
    assert_same_item(&got, &want);
    store_item_done(&got);
    store_item_done(&want);

    /* a document another item holds: APBOT_E_CONFLICT, *ret_item untouched */
    c = (struct machine_counters){.settled = true};
    assert_int_equal(machine_next(MACHINE_CHECKING, MACHINE_EV_FOUND, &c, &f->pol, &confirmed),
                     APBOT_OK);
    ch = (struct store_change){.from = MACHINE_CHECKING,
                               .event = MACHINE_EV_FOUND,
                               .step = &confirmed,
                               .erp_doc = "D-1",
                               .detail = "test",
                               .actor = "runner:w"};
    assert_int_equal(
        store_apply_get(f->st, other, "w", &ch, AT(T0 + 5), NULL, &got, f->err, sizeof(f->err)),
        APBOT_OK);
    assert_int_equal(got.state, confirmed.next);
    assert_string_equal(got.erp_doc, "D-1");
    assert_null(got.lease_owner);
    store_item_done(&got);
    int64_t holder = 0;
    memset(&got, 0xa5, sizeof(got));
    ch.from = to_unknown.next;
    ch.event = MACHINE_EV_FOUND;
    c = to_unknown.counters;
    c.settled = true;
    assert_int_equal(machine_next(to_unknown.next, MACHINE_EV_FOUND, &c, &f->pol, &confirmed),
                     APBOT_OK);
    ch.step = &confirmed;
    assert_int_equal(
        store_apply_get(f->st, id, "w", &ch, AT(T0 + 6), &holder, &got, f->err, sizeof(f->err)),
        APBOT_E_CONFLICT);
    assert_int_equal(holder, other);
    assert_memory_equal(&got, &poison, sizeof(got));

    /* A long reason is cut where a fresh read finds it (at a character boundary), "" clears
     * it, and an operator's take-over clears the lease: each time the returned row is the
     * row a fresh read finds. */
    char longr[3001];
    for (size_t i = 0; i + 2 <= 3000; i += 2)
        memcpy(longr + i, "\xC3\xA9", 2); /* e acute, 1,500 times */
    longr[3000] = '\0';
    const char *reasons[] = {longr, "", NULL};
    struct machine_step again;
    for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) {
        struct store_item cur;
        assert_int_equal(store_get(f->st, id, &cur, f->err, sizeof(f->err)), APBOT_OK);
        c = cur.counters;
        c.settled = true;
        assert_int_equal(machine_next(cur.state, MACHINE_EV_LOOKUP_FAILED, &c, &f->pol, &again),
                         APBOT_OK);
        bool last = i + 1 == sizeof(reasons) / sizeof(reasons[0]);
        ch = (struct store_change){.from = cur.state,
                                   .event = MACHINE_EV_LOOKUP_FAILED,
                                   .step = &again,
                                   .backoff_ms = 300,
                                   .reason = reasons[i],
                                   .detail = "test",
                                   .actor = last ? "operator:test" : "runner:w",
                                   .keep_lease = !last,
                                   .take_over = last};
        store_item_done(&cur);
        /* the take-over comes once the lease has run out (a day later) */
        int64_t at = last ? T0 + 86400000 : T0 + 7 + (int64_t)i;
        assert_int_equal(store_apply_get(f->st, id, last ? NULL : "w", &ch, AT(at), NULL, &got,
                                         f->err, sizeof(f->err)),
                         APBOT_OK);
        assert_int_equal(store_get(f->st, id, &want, f->err, sizeof(f->err)), APBOT_OK);
        assert_same_item(&got, &want);
        if (i == 0) {
            assert_true(strlen(got.reason) < 3000);
            assert_int_equal(strlen(got.reason) % 2, 0); /* never half a character */
        } else {
            assert_null(got.reason);
        }
        if (last)
            assert_null(got.lease_owner);
        else
            assert_string_equal(got.lease_owner, "w");
        store_item_done(&got);
        store_item_done(&want);
    }
}

/* The change of a checked item found in the ERP as D-1, by worker w (found: its step). */
static struct store_change found_change(struct fx *f, struct machine_step *found)
{
    struct machine_counters c = {.settled = true};
    assert_int_equal(machine_next(MACHINE_CHECKING, MACHINE_EV_FOUND, &c, &f->pol, found),
                     APBOT_OK);
    return (struct store_change){.from = MACHINE_CHECKING,
                                 .event = MACHINE_EV_FOUND,
                                 .step = found,
                                 .erp_doc = "D-1",
                                 .detail = "test",
                                 .actor = "runner:w"};
}

/* store_apply_claim: the change as store_apply_get makes it, then the next due item claimed
 * for the same owner (with its claimed event), both rows as a fresh read finds them; nothing
 * due claims nothing; a refused change claims nothing and changes nothing. */
static void test_store_apply_claim(void **state)
{
    struct fx *f = *state;
    int64_t a = enq(f, 1, 0, T0, NULL), b = enq(f, 2, 0, T0, NULL);
    assert_int_equal(claim_id(f, f->st, "w", T0 + 1), a);
    struct machine_step found;
    struct store_change ch = found_change(f, &found);
    struct store_item got, next, want;
    bool claimed = true;
    int64_t holder = 0;

    /* refused (not the row's state): nothing changes, nothing is claimed */
    ch.from = MACHINE_POSTING;
    assert_int_equal(store_apply_claim(f->st, a, "w", &ch, AT(T0 + 2), &holder, &got, 30000,
                                       &f->claimed, &next, &claimed, f->err, sizeof(f->err)),
                     APBOT_E_STATE);
    assert_false(claimed);
    assert_int_equal(state_of(f, a), MACHINE_CHECKING);
    assert_int_equal(state_of(f, b), MACHINE_NEW);

    /* made: a completed, b claimed by w */
    ch.from = MACHINE_CHECKING;
    assert_int_equal(store_apply_claim(f->st, a, "w", &ch, AT(T0 + 3), &holder, &got, 30000,
                                       &f->claimed, &next, &claimed, f->err, sizeof(f->err)),
                     APBOT_OK);
    assert_true(claimed);
    assert_int_equal(got.state, found.next);
    assert_string_equal(got.erp_doc, "D-1");
    assert_int_equal(store_get(f->st, a, &want, f->err, sizeof(f->err)), APBOT_OK);
    assert_same_item(&got, &want);
    store_item_done(&want);
    assert_int_equal(next.id, b);
    assert_int_equal(next.state, f->claimed.next);
    assert_string_equal(next.lease_owner, "w");
    assert_int_equal(next.lease_until, T0 + 3 + 30000);
    assert_int_equal(store_get(f->st, b, &want, f->err, sizeof(f->err)), APBOT_OK);
    assert_same_item(&next, &want);
    store_item_done(&want);
    struct last_event le = last_event(f, b);
    assert_string_equal(le.event, "claimed");
    assert_string_equal(le.to, machine_state_name(f->claimed.next));
    store_item_done(&got);
    store_item_done(&next);

    /* D-1 is a's: refused, holder named */
    assert_int_equal(store_apply_claim(f->st, b, "w", &ch, AT(T0 + 4), &holder, &got, 30000,
                                       &f->claimed, &next, &claimed, f->err, sizeof(f->err)),
                     APBOT_E_CONFLICT);
    assert_int_equal(holder, a);
    assert_false(claimed);
    /* made, nothing due: the change alone */
    ch.erp_doc = "D-2";
    assert_int_equal(store_apply_claim(f->st, b, "w", &ch, AT(T0 + 5), &holder, &got, 30000,
                                       &f->claimed, &next, &claimed, f->err, sizeof(f->err)),
                     APBOT_OK);
    assert_false(claimed);
    assert_int_equal(got.state, found.next);
    store_item_done(&got);
    assert_int_equal(state_of(f, b), found.next);
}

/* store_apply_claim whose claim fails (a trigger refuses b's claim; SQLite, where the two
 * share a transaction): that transaction fails whole, then the change is made alone - a's
 * change in the queue once, with its one event, b untouched, nothing claimed. */
static void test_store_apply_claim_failed_claim(void **state)
{
    struct fx *f = *state;
    if (f->bk != BK_SQLITE)
        skip(); /* PostgreSQL applies, then claims: nothing to undo */
    int64_t a = enq(f, 1, 0, T0, NULL), b = enq(f, 2, 0, T0, NULL);
    assert_int_equal(claim_id(f, f->st, "w", T0 + 1), a);
    struct raw r = raw_open(f->bk, f->path);
    char sql[256];
    snprintf(sql, sizeof(sql),
             "CREATE TRIGGER no_claim BEFORE UPDATE ON items WHEN NEW.id = %lld"
             " AND NEW.lease_owner IS NOT NULL BEGIN SELECT RAISE(ABORT, 'test: no claim'); END",
             (long long)b);
    assert_int_equal(raw_exec(&r, sql), 0);

    struct machine_step found;
    struct store_change ch = found_change(f, &found);
    struct store_item got, next;
    bool claimed = true;
    int64_t holder = 0;
    int events = n_events(f, a);
    assert_int_equal(store_apply_claim(f->st, a, "w", &ch, AT(T0 + 2), &holder, &got, 30000,
                                       &f->claimed, &next, &claimed, f->err, sizeof(f->err)),
                     APBOT_OK);
    assert_false(claimed);
    assert_int_equal(got.state, found.next);
    store_item_done(&got);
    assert_int_equal(state_of(f, a), found.next);
    assert_int_equal(n_events(f, a), events + 1);
    assert_int_equal(state_of(f, b), MACHINE_NEW);
    assert_int_equal(n_events(f, b), 1);

    assert_int_equal(raw_exec(&r, "DROP TRIGGER no_claim"), 0);
    raw_close(&r);
    assert_int_equal(claim_id(f, f->st, "w", T0 + 3), b);
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

/*
 * What a day settled (store_final_sums): the items whose last change into a final state fell
 * in the window, per state and currency, in items and money; items still pending, and those
 * settled before or after the window, are not counted; a row past max is APBOT_E_LIMIT.
 */
static void test_store_final_sums(void **state)
{
    struct fx *f = *state;
    char key[32], fp[65];
    enum store_enqueue_result res;
    int64_t yen = 0;
    struct store_final_sum rows[8];
    size_t n = 99;

    for (int i = 1; i <= 5; i++)
        (void)enq(f, i, 0, T0, NULL);
    struct store_new_item jp = mk_item(6, 0, key, fp);
    jp.currency = "JPY";
    jp.exponent = 0;
    jp.total = 5000;
    assert_int_equal(store_enqueue_raw(f->st, &jp, AT(T0), &res, &yen, f->err, sizeof(f->err)),
                     APBOT_OK);
    for (int i = 1; i <= 6; i++)
        assert_true(claim_id(f, f->st, "w", T0 + 100) > 0);
    /* in the window [T0 + 1000, T0 + 5000): 1 and 2 completed, 6 (JPY) completed, 3 to review */
    assert_int_equal(step_item(f, f->st, 1, "w", MACHINE_EV_FOUND, T0 + 1000, "D-1", NULL),
                     APBOT_OK);
    assert_int_equal(step_item(f, f->st, 2, "w", MACHINE_EV_FOUND, T0 + 4999, "D-2", NULL),
                     APBOT_OK);
    assert_int_equal(step_item(f, f->st, yen, "w", MACHINE_EV_FOUND, T0 + 2000, "D-6", NULL),
                     APBOT_OK);
    assert_int_equal(
        step_item(f, f->st, 3, "w", MACHINE_EV_FOUND_CONFLICT, T0 + 3000, NULL, "amount differs"),
        APBOT_OK);
    /* after it: 4 completed; 5 stays checking */
    assert_int_equal(step_item(f, f->st, 4, "w", MACHINE_EV_FOUND, T0 + 5000, "D-4", NULL),
                     APBOT_OK);

    assert_int_equal(
        store_final_sums(f->st, T0 + 1000, T0 + 5000, rows, 8, &n, f->err, sizeof(f->err)),
        APBOT_OK);
    assert_int_equal(n, 3);
    /* sorted by state, then currency */
    assert_int_equal(rows[0].state, MACHINE_COMPLETED);
    assert_string_equal(rows[0].currency, "EUR");
    assert_int_equal(rows[0].exponent, 2);
    assert_int_equal(rows[0].items, 2);
    assert_int_equal(rows[0].amount, 2 * 123450);
    assert_int_equal(rows[1].state, MACHINE_COMPLETED);
    assert_string_equal(rows[1].currency, "JPY");
    assert_int_equal(rows[1].exponent, 0);
    assert_int_equal(rows[1].items, 1);
    assert_int_equal(rows[1].amount, 5000);
    assert_int_equal(rows[2].state, MACHINE_MANUAL_REVIEW);
    assert_string_equal(rows[2].currency, "EUR");
    assert_int_equal(rows[2].items, 1);
    assert_int_equal(rows[2].amount, 123450);

    /* a wider window takes item 4 in; an empty one nothing */
    assert_int_equal(store_final_sums(f->st, T0, T0 + 10000, rows, 8, &n, f->err, sizeof(f->err)),
                     APBOT_OK);
    assert_int_equal(n, 3);
    assert_int_equal(rows[0].items, 3);
    assert_int_equal(
        store_final_sums(f->st, T0 + 6000, T0 + 6000, rows, 8, &n, f->err, sizeof(f->err)),
        APBOT_OK);
    assert_int_equal(n, 0);
    /* more rows than room */
    n = 77;
    assert_int_equal(store_final_sums(f->st, T0, T0 + 10000, rows, 2, &n, f->err, sizeof(f->err)),
                     APBOT_E_LIMIT);
    assert_int_equal(n, 77); /* untouched */
    assert_int_equal(store_final_sums(f->st, T0 + 1, T0, rows, 8, &n, f->err, sizeof(f->err)),
                     APBOT_E_INVAL);
}

static void test_store_unknown_state_is_left_alone(void **state)
{
    struct fx *f = *state;
    int64_t id = enq(f, 1, 0, T0, NULL);
    struct raw db = raw_open(f->bk, f->path);
    assert_int_equal(
        raw_exec(&db, "UPDATE items SET state = 'parked', lease_owner = 'x', lease_until = 1"), 0);
    raw_close(&db);
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

/* ---- durability ---- */

/*
 * STORE_DEFERRED: a write is committed and seen by every reader at once, runs no disk sync of
 * its own, and store_sync makes it durable with one; a SIGKILL of the writer keeps it. LAZY
 * writes are not waited for; a synchronous write covers the deferred ones before it. On
 * PostgreSQL every commit is durable as it returns: there is nothing to sync.
 */
static void test_store_durability(void **state)
{
    struct fx *f = *state;
    bool sq = f->bk == BK_SQLITE;
    int64_t id = enq(f, 1, 0, T0, NULL);
    int64_t id2 = enq(f, 2, 0, T0, NULL);
    int64_t s0 = store_syncs(f->st);
    if (sq)
        assert_true(s0 >= 1); /* the synchronous enqueues */
    else
        assert_int_equal(s0, 0);

    assert_int_equal(store_set_durability(f->st, STORE_DEFERRED), STORE_SYNC);
    assert_int_equal(claim_id(f, f->st, "r1", T0 + 1), id);
    assert_int_equal(store_syncs(f->st), s0); /* no sync of its own */
    struct store *other = NULL;
    assert_int_equal(store_open(f->path, &other, f->err, sizeof(f->err)), APBOT_OK);
    struct store_item it;
    assert_int_equal(store_get(other, id, &it, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(it.state, MACHINE_CHECKING); /* committed: the other handle sees it */
    assert_string_equal(it.lease_owner, "r1");
    store_item_done(&it);
    /* PostgreSQL: the deferred commit waits for no WAL flush; store_sync flushes the server's
     * WAL past it (the test server's WAL writer sleeps 10 s, so nothing else does it here
     * unless another test's synchronous commit on the same server happens to) */
    char lsn[64] = "";
    if (!sq)
        pg_wal_lsn(f->path, "pg_current_wal_insert_lsn()", lsn, sizeof(lsn));
    assert_int_equal(store_sync(f->st, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(store_syncs(f->st), s0 + 1);
    if (!sq)
        assert_true(pg_wal_flushed_past(f->path, lsn));
    assert_int_equal(store_sync(f->st, f->err, sizeof(f->err)), APBOT_OK); /* nothing left */
    assert_int_equal(store_syncs(f->st), s0 + 1);

    /* a lazy write: store_sync does not wait for it */
    assert_int_equal(store_set_durability(f->st, STORE_LAZY), STORE_DEFERRED);
    struct store_evidence ev = {.step = "check", .method = "GET", .transport = "answered"};
    assert_int_equal(store_add_evidence(f->st, id, &ev, AT(T0 + 2), f->err, sizeof(f->err)),
                     APBOT_OK);
    assert_int_equal(store_sync(f->st, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(store_syncs(f->st), s0 + 1);

    /* deferred, then synchronous: on SQLite the synchronous write's sync covers both; on
     * PostgreSQL store_sync still flushes (one more small transaction) */
    (void)store_set_durability(f->st, STORE_DEFERRED);
    assert_int_equal(step_item(f, f->st, id, "r1", MACHINE_EV_NOT_FOUND, T0 + 3, NULL, NULL),
                     APBOT_OK);
    (void)store_set_durability(f->st, STORE_SYNC);
    assert_int_equal(claim_id(f, f->st, "r1", T0 + 4), id2);
    assert_int_equal(store_syncs(f->st), s0 + (sq ? 2 : 1));
    assert_int_equal(store_sync(f->st, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(store_syncs(f->st), s0 + 2);

    /* a deferred write survives a SIGKILL of its writer before any sync */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct store *cs = NULL;
        if (store_open(f->path, &cs, f->err, sizeof(f->err)) != APBOT_OK)
            _exit(2);
        (void)store_set_durability(cs, STORE_DEFERRED);
        if (step_item(f, cs, id, "r1", MACHINE_EV_CONFIRMED, T0 + 5, "D-77", NULL) != APBOT_OK)
            _exit(3);
        raise(SIGKILL);
        _exit(4);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    assert_int_equal(store_get(other, id, &it, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(it.state, MACHINE_COMPLETED);
    assert_string_equal(it.erp_doc, "D-77");
    store_item_done(&it);
    store_close(other);
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

    /* store_pending: anything new, in flight, settling or finishing - until all is settled */
    bool any = false;
    assert_int_equal(store_pending(f->st, &any, f->err, sizeof(f->err)), APBOT_OK);
    assert_true(any);
    assert_int_equal(step_item(f, f->st, 1, "w", MACHINE_EV_FOUND, T0 + 10001, "D-1", NULL),
                     APBOT_OK);
    for (int64_t id = 4; id <= 5; id++) {
        assert_int_equal(claim_id(f, f->st, "w", T0 + 10002), id);
        assert_true(store_pending(f->st, &any, f->err, sizeof(f->err)) == APBOT_OK && any);
        assert_int_equal(
            step_item(f, f->st, id, "w", MACHINE_EV_FOUND_CONFLICT, T0 + 10003, NULL, "why"),
            APBOT_OK);
    }
    assert_int_equal(store_pending(f->st, &any, f->err, sizeof(f->err)), APBOT_OK);
    assert_false(any);
}

/* ---- the audit chain ---- */

static struct store_audit_result audit(struct fx *f, const struct store_audit_head *expect)
{
    struct store_audit_result r;
    if (store_audit_verify(f->st, expect, &r, f->err, sizeof(f->err)) != APBOT_OK)
        fail_msg("audit verify: %s", f->err);
    return r;
}

static void assert_intact(struct fx *f)
{
    struct store_audit_result r = audit(f, NULL);
    if (r.kind != STORE_AUDIT_INTACT)
        fail_msg("the chain does not verify: %s: %s", store_audit_kind_name(r.kind), r.detail);
}

/* Asserts verify finds kind at event id, with the last good event before it. */
static struct store_audit_result assert_break(struct fx *f, enum store_audit_kind kind, int64_t id,
                                              int64_t last_good)
{
    struct store_audit_result r = audit(f, NULL);
    if (r.kind != kind || r.event_id != id || r.last_good.event_id != last_good)
        fail_msg("want %s at #%" PRId64 " after #%" PRId64 ", got %s at #%" PRId64
                 " after #%" PRId64 ": %s",
                 store_audit_kind_name(kind), id, last_good, store_audit_kind_name(r.kind),
                 r.event_id, r.last_good.event_id, r.detail);
    return r;
}

static void raw_ok(struct raw *r, const char *sql)
{
    if (raw_exec(r, sql) != 0)
        fail_msg("%s: %s", sql, r->db ? sqlite3_errmsg(r->db) : PQerrorMessage(r->pg));
}

static void raw_okf(struct raw *r, const char *fmt, ...) APBOT_PRINTF(2, 3);
static void raw_okf(struct raw *r, const char *fmt, ...)
{
    char sql[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof(sql), fmt, ap);
    va_end(ap);
    raw_ok(r, sql);
}

/* Every event's id, item and hashes as the backend reads them for verification. */
struct chain_rows {
    int n;
    struct store_event_row row[64];
    unsigned char prev[64][STORE_HASH_LEN], hash[64][STORE_HASH_LEN];
    char text[64][5][256];
};

static int chain_row(void *ctx, const struct store_event_row *r)
{
    struct chain_rows *c = ctx;
    if (c->n >= 64)
        return -1;
    int i = c->n++;
    const char *t[5] = {r->from, r->to, r->event, r->detail, r->actor};
    const char **dst[5] = {&c->row[i].from, &c->row[i].to, &c->row[i].event, &c->row[i].detail,
                           &c->row[i].actor};
    c->row[i] = (struct store_event_row){.id = r->id, .item_id = r->item_id, .at = r->at};
    for (int k = 0; k < 5; k++) {
        snprintf(c->text[i][k], sizeof(c->text[i][k]), "%s", t[k] ? t[k] : "");
        *dst[k] = t[k] ? c->text[i][k] : NULL;
    }
    assert_non_null(r->prev_hash);
    assert_non_null(r->hash);
    memcpy(c->prev[i], r->prev_hash, STORE_HASH_LEN);
    memcpy(c->hash[i], r->hash, STORE_HASH_LEN);
    c->row[i].prev_hash = c->prev[i];
    c->row[i].hash = c->hash[i];
    return 0;
}

static void chain_read(struct fx *f, struct chain_rows *c)
{
    memset(c, 0, sizeof(*c));
    assert_int_equal(f->st->ops->each_chained(f->st, chain_row, c, f->err, sizeof(f->err)),
                     APBOT_OK);
}

/* A hash as an SQL literal of the backend. */
static const char *hash_sql(struct fx *f, const unsigned char h[STORE_HASH_LEN], char *buf,
                            size_t len)
{
    char hex[2 * STORE_HASH_LEN + 1];
    store_audit_hex(h, hex);
    snprintf(buf, len, f->bk == BK_SQLITE ? "X'%s'" : "'\\x%s'::bytea", hex);
    return buf;
}

/* A history that goes through every path that appends an event: enqueue (alone and in a
 * batch), claim, apply, apply with evidence and then a claim in one call, a take-over, crash
 * recovery; a detail in multi-byte UTF-8, and NULLs (an enqueued event has no from). */
static void audit_history(struct fx *f)
{
    for (int i = 1; i <= 3; i++)
        (void)enq(f, i, 0, T0 + i, NULL);
    assert_int_equal(store_begin(f->st, f->err, sizeof(f->err)), APBOT_OK);
    (void)enq(f, 4, 0, T0 + 4, NULL);
    (void)enq(f, 5, 0, T0 + 5, NULL);
    assert_int_equal(store_commit(f->st, f->err, sizeof(f->err)), APBOT_OK);
    int64_t a = claim_id(f, f->st, "w", T0 + 10);
    int64_t b = claim_id(f, f->st, "w", T0 + 11);
    assert_int_equal(step_item(f, f->st, a, "w", MACHINE_EV_NOT_FOUND, T0 + 20, NULL, NULL),
                     APBOT_OK);
    struct store_item it;
    assert_int_equal(store_get(f->st, a, &it, f->err, sizeof(f->err)), APBOT_OK);
    struct machine_step step, next;
    assert_int_equal(machine_next(it.state, MACHINE_EV_CONFIRMED, &it.counters, &f->pol, &step),
                     APBOT_OK);
    store_item_done(&it);
    struct store_evidence ev = {.step = "post", .method = "POST", .url = "/ap", .excerpt = "ok"};
    struct store_change ch = {.from = MACHINE_POSTING,
                              .event = MACHINE_EV_CONFIRMED,
                              .step = &step,
                              .erp_doc = "AP-1",
                              .detail =
                                  "Zahlung f\xc3\xbcr M\xc3\xbcller \xe2\x80\x93 \xe6\x94\xaf",
                              .actor = "runner:w",
                              .evidence = &ev,
                              .n_evidence = 1};
    struct store_item done, claimed;
    bool got = false;
    assert_int_equal(store_apply_claim(f->st, a, "w", &ch, AT(T0 + 30), NULL, &done, 30000,
                                       &f->claimed, &claimed, &got, f->err, sizeof(f->err)),
                     APBOT_OK);
    store_item_done(&done);
    assert_true(got);
    store_item_done(&claimed);
    /* b's lease runs out: taken over as recovery does */
    assert_int_equal(store_get(f->st, b, &it, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(machine_next(it.state, MACHINE_EV_LEASE_EXPIRED, &it.counters, &f->pol, &next),
                     APBOT_OK);
    store_item_done(&it);
    struct store_change rel = {.from = MACHINE_CHECKING,
                               .event = MACHINE_EV_LEASE_EXPIRED,
                               .step = &next,
                               .detail = "",
                               .actor = "recovery",
                               .take_over = true};
    assert_int_equal(
        store_apply(f->st, b, NULL, &rel, AT(T0 + 31000 + 10), NULL, f->err, sizeof(f->err)),
        APBOT_OK);
    int n = 0;
    assert_int_equal(store_recover(f->st, AT(T0 + 100000), &f->pol, &n, f->err, sizeof(f->err)),
                     APBOT_OK);
    assert_true(n >= 1);
}

/*
 * The chain on both backends: a history through every path verifies, with as many events as
 * the queue holds and ids 1..n in order; then each way of rewriting the record after the fact
 * is found at the first event it touches, and the record restored verifies again. The append-
 * only triggers are dropped first, as someone with the database's owner rights would.
 */
static void test_store_audit_chain_detects_tampering(void **state)
{
    struct fx *f = *state;
    audit_history(f);
    struct store_audit_result r = audit(f, NULL);
    assert_int_equal(r.kind, STORE_AUDIT_INTACT);
    struct store_tally t;
    assert_int_equal(store_tally(f->st, &t, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(r.events, t.events);
    assert_true(t.events >= 12);
    assert_int_equal(r.last_good.event_id, t.head_event_id);
    assert_memory_equal(r.last_good.hash, t.head_hash, STORE_HASH_LEN);
    struct chain_rows c;
    chain_read(f, &c);
    assert_int_equal(c.n, t.events);
    for (int i = 0; i < c.n; i++)
        assert_int_equal(c.row[i].id, i + 1); /* ids follow the chain, no gaps */
    const int64_t n = c.n;
    struct store_audit_head head = r.last_good;

    struct raw db = raw_open(f->bk, f->path);
    if (f->bk == BK_SQLITE)
        raw_ok(&db, "DROP TRIGGER events_no_update; DROP TRIGGER events_no_delete");
    else
        raw_ok(&db, "ALTER TABLE events DISABLE TRIGGER USER");

    /* An UPDATE of a past event's content: each column the hash covers. */
    static const char *const edits[][2] = {
        {"detail = detail || 'x'", "detail = substr(detail, 1, length(detail) - 1)"},
        {"at = at + 1", "at = at - 1"},
        {"actor = 'operator:mallory'", NULL},
        {"to_state = 'tampered'", NULL},
        {"item_id = 1", NULL},
    };
    for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
        int64_t id = 4 + (int64_t)i;
        char undo[256];
        struct chain_rows *o = &c;
        const struct store_event_row *orig = &o->row[id - 1];
        if (edits[i][1])
            snprintf(undo, sizeof(undo), "%s", edits[i][1]);
        else if (strncmp(edits[i][0], "actor", 5) == 0)
            snprintf(undo, sizeof(undo), "actor = '%s'", orig->actor);
        else if (strncmp(edits[i][0], "to_state", 8) == 0)
            snprintf(undo, sizeof(undo), "to_state = '%s'", orig->to);
        else
            snprintf(undo, sizeof(undo), "item_id = %" PRId64, orig->item_id);
        if (orig->item_id == 1 && strncmp(edits[i][0], "item_id", 7) == 0)
            continue; /* no change to find */
        raw_okf(&db, "UPDATE events SET %s WHERE id = %" PRId64, edits[i][0], id);
        r = assert_break(f, STORE_AUDIT_CHANGED, id, id - 1);
        assert_int_equal(r.item_id, edits[i][0][0] == 'i' ? 1 : orig->item_id);
        assert_non_null(strstr(r.detail, "no longer matches its hash"));
        raw_okf(&db, "UPDATE events SET %s WHERE id = %" PRId64, undo, id);
        assert_intact(f);
    }
    /* The hash column itself. */
    char lit[160];
    raw_okf(&db, "UPDATE events SET hash = %s WHERE id = 2",
            hash_sql(f, c.hash[0], lit, sizeof(lit)));
    (void)assert_break(f, STORE_AUDIT_CHANGED, 2, 1);
    raw_okf(&db, "UPDATE events SET hash = %s WHERE id = 2",
            hash_sql(f, c.hash[1], lit, sizeof(lit)));
    assert_intact(f);

    /* A reordered pair: two events swap their ids (each row moves whole)... */
    raw_ok(&db, "UPDATE events SET id = -1 WHERE id = 6; UPDATE events SET id = 6 WHERE id = 5;"
                " UPDATE events SET id = 5 WHERE id = -1");
    r = assert_break(f, STORE_AUDIT_ORDER, 5, 4);
    assert_non_null(strstr(r.detail, "appended as #6"));
    raw_ok(&db, "UPDATE events SET id = -1 WHERE id = 6; UPDATE events SET id = 6 WHERE id = 5;"
                " UPDATE events SET id = 5 WHERE id = -1");
    assert_intact(f);
    /* ... or their contents (here the items they belong to). */
    int64_t x = 0, y = 0;
    for (int64_t i = 1; i < n && !x; i++)
        if (c.row[i].item_id != c.row[i - 1].item_id)
            x = i, y = i + 1; /* ids of two neighbours of different items */
    assert_true(x > 0);
    raw_okf(&db,
            "UPDATE events SET item_id = CASE id WHEN %" PRId64 " THEN %" PRId64 " ELSE %" PRId64
            " END WHERE id IN (%" PRId64 ", %" PRId64 ")",
            x, c.row[y - 1].item_id, c.row[x - 1].item_id, x, y);
    (void)assert_break(f, STORE_AUDIT_CHANGED, x, x - 1);
    raw_okf(&db,
            "UPDATE events SET item_id = CASE id WHEN %" PRId64 " THEN %" PRId64 " ELSE %" PRId64
            " END WHERE id IN (%" PRId64 ", %" PRId64 ")",
            x, c.row[x - 1].item_id, c.row[y - 1].item_id, x, y);
    assert_intact(f);

    /* A deleted event: the next one no longer follows the one before the gap. */
    raw_ok(&db, "CREATE TABLE saved AS SELECT * FROM events WHERE id IN (7, 8)");
    raw_ok(&db, "DELETE FROM events WHERE id = 7");
    r = assert_break(f, STORE_AUDIT_MISSING, 8, 6);
    assert_int_equal(r.missing_from, 7);
    assert_int_equal(r.missing_to, 7);
    assert_non_null(strstr(r.detail, "event #7 is missing"));
    raw_ok(&db, "DELETE FROM events WHERE id = 8");
    r = assert_break(f, STORE_AUDIT_MISSING, 9, 6);
    assert_int_equal(r.missing_to, 8);
    raw_ok(&db, "INSERT INTO events SELECT * FROM saved");
    assert_intact(f);
    /* The first event. */
    raw_ok(&db, "DROP TABLE saved; CREATE TABLE saved AS SELECT * FROM events WHERE id = 1");
    raw_ok(&db, "DELETE FROM events WHERE id = 1");
    r = assert_break(f, STORE_AUDIT_MISSING, 2, 0);
    assert_int_equal(r.missing_from, 1);
    raw_ok(&db, "INSERT INTO events SELECT * FROM saved");
    assert_intact(f);
    /* The last event: nothing comes after it to tell; the kept head does. */
    raw_okf(&db, "DROP TABLE saved; CREATE TABLE saved AS SELECT * FROM events WHERE id = %" PRId64,
            n);
    raw_okf(&db, "DELETE FROM events WHERE id = %" PRId64, n);
    assert_int_equal(audit(f, NULL).kind, STORE_AUDIT_INTACT);
    r = audit(f, &head);
    assert_int_equal(r.kind, STORE_AUDIT_HEAD);
    assert_int_equal(r.event_id, n);
    assert_int_equal(r.last_good.event_id, n - 1);
    assert_int_equal(r.missing_from, n);
    assert_non_null(strstr(r.detail, "were deleted"));
    raw_ok(&db, "INSERT INTO events SELECT * FROM saved");
    assert_intact(f);
    assert_int_equal(audit(f, &head).kind, STORE_AUDIT_INTACT);

    /* An event rewritten with a hash that matches its new content: the next event no longer
     * follows it. Rewriting every event after it too leaves a chain that verifies - which only
     * the kept head tells from the original. */
    struct store_event_row w = c.row[3];
    w.detail = "approved by nobody";
    unsigned char h[STORE_HASH_LEN], prevh[STORE_HASH_LEN];
    store_event_hash(c.prev[3], &w, h);
    raw_okf(&db, "UPDATE events SET detail = '%s', hash = %s WHERE id = 4", w.detail,
            hash_sql(f, h, lit, sizeof(lit)));
    r = assert_break(f, STORE_AUDIT_ORDER, 5, 4);
    assert_non_null(strstr(r.detail, "was not appended after event #4"));
    memcpy(prevh, h, STORE_HASH_LEN);
    char lit2[160];
    for (int64_t i = 5; i <= n; i++) {
        store_event_hash(prevh, &c.row[i - 1], h);
        raw_okf(&db, "UPDATE events SET prev_hash = %s, hash = %s WHERE id = %" PRId64,
                hash_sql(f, prevh, lit, sizeof(lit)), hash_sql(f, h, lit2, sizeof(lit2)), i);
        memcpy(prevh, h, STORE_HASH_LEN);
    }
    assert_int_equal(audit(f, NULL).kind, STORE_AUDIT_INTACT);
    r = audit(f, &head);
    assert_int_equal(r.kind, STORE_AUDIT_HEAD);
    assert_int_equal(r.event_id, n);
    assert_non_null(strstr(r.detail, "rewritten"));
    /* A head kept before the rewrite began (event 3) still holds. */
    struct store_audit_head early = {.event_id = 3};
    memcpy(early.hash, c.hash[2], STORE_HASH_LEN);
    assert_int_equal(audit(f, &early).kind, STORE_AUDIT_INTACT);
    /* Put back as it was, so the teardown finds the chain intact. */
    raw_okf(&db, "UPDATE events SET detail = '%s' WHERE id = 4", c.row[3].detail);
    for (int64_t i = 4; i <= n; i++)
        raw_okf(&db, "UPDATE events SET prev_hash = %s, hash = %s WHERE id = %" PRId64,
                hash_sql(f, c.prev[i - 1], lit, sizeof(lit)),
                hash_sql(f, c.hash[i - 1], lit2, sizeof(lit2)), i);
    assert_int_equal(audit(f, &head).kind, STORE_AUDIT_INTACT);
    raw_close(&db);
}

/* The head as of a moment: the last event stamped before it; a head kept on day one still
 * verifies after day two's events. */
static void test_store_audit_head_of_a_day(void **state)
{
    struct fx *f = *state;
    const int64_t day = INT64_C(86400000);
    struct store_audit_head h;
    assert_int_equal(store_audit_head(f->st, 0, &h, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(h.event_id, 0);
    assert_memory_equal(h.hash, store_audit_genesis, STORE_HASH_LEN);
    int64_t a = enq(f, 1, 0, T0, NULL);
    (void)enq(f, 2, 0, T0 + 1000, NULL);
    (void)enq(f, 3, 0, T0 + day, NULL);
    assert_int_equal(store_audit_head(f->st, T0, &h, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(h.event_id, 0);
    assert_int_equal(store_audit_head(f->st, T0 + 1, &h, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(h.event_id, 1);
    assert_int_equal(h.item_id, a);
    assert_int_equal(h.at, T0);
    struct store_audit_head day1;
    assert_int_equal(store_audit_head(f->st, T0 + day, &day1, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(day1.event_id, 2);
    assert_int_equal(claim_id(f, f->st, "w", T0 + day + 5), a);
    assert_int_equal(store_audit_head(f->st, 0, &h, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(h.event_id, 4);
    struct store_audit_result r = audit(f, &day1);
    assert_int_equal(r.kind, STORE_AUDIT_INTACT);
    assert_int_equal(r.last_good.event_id, 4);
    assert_memory_equal(r.last_good.hash, h.hash, STORE_HASH_LEN);
    /* A head that never was: another hash for event 2, or an event the queue never had. */
    struct store_audit_head bad = day1;
    bad.hash[0] ^= 1;
    r = audit(f, &bad);
    assert_int_equal(r.kind, STORE_AUDIT_HEAD);
    assert_int_equal(r.event_id, 2);
    bad = day1;
    bad.event_id = 99;
    assert_int_equal(audit(f, &bad).kind, STORE_AUDIT_HEAD);
    /* The kept form parses back. */
    char hex[2 * STORE_HASH_LEN + 1], token[96];
    store_audit_hex(day1.hash, hex);
    snprintf(token, sizeof(token), "%" PRId64 ":%s", day1.event_id, hex);
    assert_int_equal(store_audit_parse_head(token, &bad), APBOT_OK);
    assert_int_equal(bad.event_id, 2);
    assert_memory_equal(bad.hash, day1.hash, STORE_HASH_LEN);
}

/* ---- the audit chain's decision (pure) ---- */

/* Four events chained as apbot appends them. */
struct chain4 {
    struct store_event_row r[4];
    unsigned char prev[4][STORE_HASH_LEN], hash[4][STORE_HASH_LEN];
};

static void chain4_make(struct chain4 *c)
{
    static const struct store_event_row base[4] = {
        {.id = 1,
         .item_id = 1,
         .at = T0,
         .to = "new",
         .event = "enqueued",
         .detail = "month-end.csv:2",
         .actor = "enqueue"},
        {.id = 2,
         .item_id = 1,
         .at = T0 + 5,
         .from = "new",
         .to = "checking",
         .event = "claimed",
         .detail = "claimed: look the key up first",
         .actor = "runner:w"},
        {.id = 3,
         .item_id = 2,
         .at = T0 + 9,
         .to = "new",
         .event = "enqueued",
         .detail = NULL,
         .actor = "enqueue"},
        {.id = 4,
         .item_id = 1,
         .at = T0 + 12,
         .from = "checking",
         .to = "posting",
         .event = "not-found",
         .detail = "Zahlung f\xc3\xbcr M\xc3\xbcller",
         .actor = "runner:w"},
    };
    for (int i = 0; i < 4; i++) {
        c->r[i] = base[i];
        memcpy(c->prev[i], i ? c->hash[i - 1] : store_audit_genesis, STORE_HASH_LEN);
        store_event_hash(c->prev[i], &c->r[i], c->hash[i]);
        c->r[i].prev_hash = c->prev[i];
        c->r[i].hash = c->hash[i];
    }
}

static void test_store_audit_check_table(void **state)
{
    (void)state;
    struct chain4 c;
    chain4_make(&c);
    char d[320];
    /* The serialisation is pinned: a change of it must be a new version (a new tag). */
    char hex[2 * STORE_HASH_LEN + 1];
    store_audit_hex(c.hash[0], hex);
    assert_string_equal(hex, AUDIT_KAT_1);
    store_audit_hex(c.hash[3], hex);
    assert_string_equal(hex, AUDIT_KAT_4);
    /* Unambiguous: NULL is not "", and no text can take bytes from its neighbour. */
    unsigned char h1[STORE_HASH_LEN], h2[STORE_HASH_LEN];
    struct store_event_row a = c.r[0], b = c.r[0];
    b.from = "";
    store_event_hash(NULL, &a, h1);
    store_event_hash(NULL, &b, h2);
    assert_memory_not_equal(h1, h2, STORE_HASH_LEN);
    a.detail = "ab", a.actor = "c";
    b = a;
    b.detail = "a", b.actor = "bc";
    store_event_hash(NULL, &a, h1);
    store_event_hash(NULL, &b, h2);
    assert_memory_not_equal(h1, h2, STORE_HASH_LEN);
    store_event_hash(NULL, &c.r[0], h1); /* NULL prev is the genesis */
    assert_memory_equal(h1, c.hash[0], STORE_HASH_LEN);

    /* Rows made from the chain, one per case. */
    struct store_event_row changed = c.r[1], at = c.r[1], flipped = c.r[1], nofrom = c.r[1],
                           unchained = c.r[1], swap_a = c.r[2], swap_b = c.r[1], moved = c.r[2],
                           rewritten = c.r[1];
    changed.detail = "claimed: looked up by someone else";
    at.at++;
    unsigned char badhash[STORE_HASH_LEN], moved_hash[STORE_HASH_LEN], rw_hash[STORE_HASH_LEN];
    memcpy(badhash, c.hash[1], STORE_HASH_LEN);
    badhash[31] ^= 0x80;
    flipped.hash = badhash;
    nofrom.from = NULL;
    unchained.hash = NULL;
    swap_a.id = 2; /* event 3 at id 2, event 2 at id 3 */
    swap_b.id = 3;
    moved.id = 2; /* event 3's content, re-hashed as if it followed event 2, put at id 2 */
    moved.prev_hash = c.hash[1];
    store_event_hash(moved.prev_hash, &moved, moved_hash);
    moved.hash = moved_hash;
    struct store_event_row moved1 = moved; /* the same at id 1 */
    unsigned char moved1_hash[STORE_HASH_LEN];
    moved1.id = 1;
    store_event_hash(moved1.prev_hash, &moved1, moved1_hash);
    moved1.hash = moved1_hash;
    rewritten.detail = "approved by nobody"; /* event 2 rewritten with a fitting hash */
    store_event_hash(rewritten.prev_hash, &rewritten, rw_hash);
    rewritten.hash = rw_hash;

    static const char *const none = NULL;
    const struct {
        const struct store_event_row *prev, *cur, *next;
        enum store_audit_kind want;
        const char *says;
    } table[] = {
        {NULL, &c.r[0], &c.r[1], STORE_AUDIT_INTACT, none},
        {&c.r[0], &c.r[1], &c.r[2], STORE_AUDIT_INTACT, none},
        {&c.r[2], &c.r[3], NULL, STORE_AUDIT_INTACT, none},
        {NULL, &c.r[0], NULL, STORE_AUDIT_INTACT, none},
        {&c.r[0], &changed, &c.r[2], STORE_AUDIT_CHANGED, "event #2 (item #1) no longer matches"},
        {&c.r[0], &at, &c.r[2], STORE_AUDIT_CHANGED, "no longer matches its hash"},
        {&c.r[0], &flipped, &c.r[2], STORE_AUDIT_CHANGED, "no longer matches its hash"},
        {&c.r[0], &nofrom, &c.r[2], STORE_AUDIT_CHANGED, "no longer matches its hash"},
        {&c.r[0], &unchained, &c.r[2], STORE_AUDIT_UNCHAINED, "carries no hash"},
        {&c.r[0], &swap_a, &swap_b, STORE_AUDIT_ORDER,
         "event #2 (item #2) holds the event "
         "appended as #3"},
        {&c.r[0], &c.r[2], &c.r[3], STORE_AUDIT_MISSING, "event #2 is missing before event #3"},
        {&c.r[0], &c.r[3], NULL, STORE_AUDIT_MISSING, "events #2 to #3 are missing"},
        {NULL, &c.r[1], &c.r[2], STORE_AUDIT_MISSING, "event #1 is missing before event #2"},
        {NULL, &c.r[2], &c.r[3], STORE_AUDIT_MISSING, "events #1 to #2 are missing"},
        {&c.r[0], &moved, &c.r[3], STORE_AUDIT_ORDER, "was not appended after event #1"},
        {NULL, &moved1, NULL, STORE_AUDIT_ORDER, "is the first event but was appended after"},
        {&c.r[0], &rewritten, &c.r[2], STORE_AUDIT_INTACT, none}, /* found at the next one: */
        {&rewritten, &c.r[2], &c.r[3], STORE_AUDIT_ORDER,
         "event #3 (item #2) was not appended "
         "after event #2"},
    };
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        d[0] = '\0';
        enum store_audit_kind k =
            store_audit_check(table[i].prev, table[i].cur, table[i].next, d, sizeof(d));
        if (k != table[i].want || (table[i].says && !strstr(d, table[i].says)))
            fail_msg("case %zu: want %s (%s), got %s: %s", i, store_audit_kind_name(table[i].want),
                     table[i].says ? table[i].says : "-", store_audit_kind_name(k), d);
    }
    /* Kept heads parse strictly. */
    struct store_audit_head h;
    store_audit_hex(c.hash[3], hex);
    char tok[96];
    snprintf(tok, sizeof(tok), "4:%s", hex);
    assert_int_equal(store_audit_parse_head(tok, &h), APBOT_OK);
    assert_int_equal(h.event_id, 4);
    assert_memory_equal(h.hash, c.hash[3], STORE_HASH_LEN);
    snprintf(tok, sizeof(tok), "#4:%s", hex);
    assert_int_equal(store_audit_parse_head(tok, &h), APBOT_OK);
    const char *bad[] = {"", "4", "4:", "x:00", "4:abc", "-4:00", "99999999999999999999:00"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(store_audit_parse_head(bad[i], &h), APBOT_E_INVAL);
    snprintf(tok, sizeof(tok), "4:%.63sg", hex);
    assert_int_equal(store_audit_parse_head(tok, &h), APBOT_E_INVAL);
    snprintf(tok, sizeof(tok), "4:%s0", hex);
    assert_int_equal(store_audit_parse_head(tok, &h), APBOT_E_INVAL);
}

/* ---- pure decisions (the same for every backend) ---- */

/* An item carrying only the stamps the decisions read. lease_owner is borrowed: never pass
 * the result to store_item_done. */
static struct store_item stamps(const char *boot, int64_t next_mono, const char *owner,
                                int64_t lease_mono, bool has_settle, int64_t settle_mono)
{
    struct store_item it;
    memset(&it, 0, sizeof(it));
    snprintf(it.clock_boot, sizeof(it.clock_boot), "%s", boot);
    it.next_mono = next_mono;
    it.lease_owner = (char *)owner;
    it.lease_mono = lease_mono;
    it.has_settle = has_settle;
    it.settle_mono = settle_mono;
    return it;
}

static void test_store_settle_table(void **state)
{
    (void)state;
    static const struct {
        bool has;
        const char *boot;
        int64_t base, now_mono, now_wall;
        const char *now_boot;
        int64_t settle_ms, want_wait;
        const char *note;
    } rows[] = {
        {false, BOOT_A, 0, 1000, T0, BOOT_A, 5000, 0, "nothing posted: settled"},
        {true, BOOT_A, 1000, 1000, T0, BOOT_A, 5000, 5000, "just marked"},
        {true, BOOT_A, 1000, 5999, T0, BOOT_A, 5000, 1, "1 ms short"},
        {true, BOOT_A, 1000, 6000, T0, BOOT_A, 5000, 0, "exactly passed"},
        {true, BOOT_A, 1000, 6000, T0 - 3600000, BOOT_A, 5000, 0, "wall stepped back: no matter"},
        {true, BOOT_A, 1000, 1200, T0 + 3600000, BOOT_A, 5000, 4800, "wall +1 h: no matter"},
        {true, BOOT_A, 1000, 1200, T0 + 10000, BOOT_A, 5000, 4800, "wall +10 s: no matter"},
        {true, BOOT_A, 9000, 1000, T0, BOOT_A, 5000, 13000, "base ahead: never shortened"},
        {true, BOOT_A, 1000, 999999, T0, BOOT_B, 5000, 5000, "another boot: counted again"},
        {true, BOOT_A, 999999, 10, T0, BOOT_B, 5000, 5000, "another boot, small mono"},
        {true, "", 0, 999999, T0, BOOT_B, 5000, 5000, "an unstamped (migrated) row"},
        {true, BOOT_A, 1000, 1000, T0, BOOT_A, 0, 0, "no settle delay configured"},
        {false, BOOT_A, 0, 1000, T0, BOOT_B, 5000, 0, "nothing posted, any boot"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct store_item it = stamps(rows[i].boot, 0, NULL, 0, rows[i].has, rows[i].base);
        const struct apbot_now *now = AT2(rows[i].now_wall, rows[i].now_mono, rows[i].now_boot);
        int64_t wait = store_settle_wait_ms(&it, now, rows[i].settle_ms);
        if (wait != rows[i].want_wait)
            fail_msg("row %zu (%s): wait %" PRId64 ", want %" PRId64, i, rows[i].note, wait,
                     rows[i].want_wait);
        assert_int_equal(store_settled(&it, now, rows[i].settle_ms), rows[i].want_wait == 0);
    }
}

static void test_store_step_delay_table(void **state)
{
    (void)state;
    static const struct {
        enum machine_delay delay;
        bool mark, has_settle;
        int64_t base, now_mono;
        const char *now_boot;
        int64_t backoff_ms, settle_ms, want;
        const char *note;
    } rows[] = {
        {MACHINE_DELAY_NONE, false, true, 100, 200, BOOT_A, 700, 5000, 0, "now"},
        {MACHINE_DELAY_NONE, true, true, 100, 200, BOOT_A, 700, 5000, 0, "now, even if marked"},
        {MACHINE_DELAY_BACKOFF, false, false, 0, 200, BOOT_A, 700, 5000, 700, "the drawn backoff"},
        {MACHINE_DELAY_BACKOFF, false, false, 0, 200, BOOT_A, -5, 5000, 0, "never negative"},
        {MACHINE_DELAY_SETTLE, true, false, 0, 200, BOOT_A, 700, 5000, 5000, "posting -> unknown"},
        {MACHINE_DELAY_SETTLE, true, true, 100, 4000, BOOT_A, 700, 5000, 5000,
         "a new mark restarts it"},
        {MACHINE_DELAY_SETTLE, false, true, 100, 4000, BOOT_A, 700, 5000, 1100,
         "reconciling keeps its base"},
        {MACHINE_DELAY_SETTLE, false, true, 100, 9000, BOOT_A, 700, 5000, 0, "already settled"},
        {MACHINE_DELAY_SETTLE, false, true, 100, 9000, BOOT_B, 700, 5000, 5000,
         "another boot: counted again"},
        {MACHINE_DELAY_SETTLE, false, false, 0, 9000, BOOT_A, 700, 5000, 0, "nothing to settle"},
        {MACHINE_DELAY_SETTLE, true, true, 100, 200, BOOT_A, 700, 0, 0, "no settle delay"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct store_item it = stamps(BOOT_A, 0, NULL, 0, rows[i].has_settle, rows[i].base);
        struct machine_step step = {.next = MACHINE_RECONCILING,
                                    .delay = rows[i].delay,
                                    .settle_mark = rows[i].mark,
                                    .why = "t"};
        int64_t got = store_step_delay_ms(&it, &step, AT2(T0, rows[i].now_mono, rows[i].now_boot),
                                          rows[i].backoff_ms, rows[i].settle_ms);
        if (got != rows[i].want)
            fail_msg("row %zu (%s): %" PRId64 ", want %" PRId64, i, rows[i].note, got,
                     rows[i].want);
    }
}

static void test_store_due_and_lease_table(void **state)
{
    (void)state;
    static const struct {
        const char *boot, *owner;
        int64_t next_mono, lease_mono, now_mono;
        const char *now_boot;
        bool due, live;
    } rows[] = {
        {BOOT_A, NULL, 100, 0, 100, BOOT_A, true, false},
        {BOOT_A, NULL, 101, 0, 100, BOOT_A, false, false},
        {BOOT_A, "w", 100, 200, 150, BOOT_A, true, true},
        {BOOT_A, "w", 100, 200, 200, BOOT_A, true, false}, /* expires at its stamp */
        {BOOT_A, "w", 900, 9000, 10, BOOT_B, true, false}, /* another boot: due, expired */
        {"", "w", 900, 9000, 10, BOOT_B, true, false},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct store_item it =
            stamps(rows[i].boot, rows[i].next_mono, rows[i].owner, rows[i].lease_mono, false, 0);
        const struct apbot_now *now = AT2(T0, rows[i].now_mono, rows[i].now_boot);
        if (store_due(&it, now) != rows[i].due || store_lease_live(&it, now) != rows[i].live)
            fail_msg("row %zu: due %d live %d", i, store_due(&it, now), store_lease_live(&it, now));
    }
}

static void test_store_lease_allows_table(void **state)
{
    (void)state;
    enum { LIVE, EXPIRED, NONE };
    static const struct {
        int lease;         /* the row's lease */
        const char *owner; /* the caller */
        bool take_over;
        enum machine_event ev;
        int want;
        const char *note;
    } rows[] = {
        {LIVE, "w", false, MACHINE_EV_FOUND, APBOT_OK, "the owner"},
        {EXPIRED, "w", false, MACHINE_EV_FOUND, APBOT_OK, "a late but unchallenged owner"},
        {LIVE, "x", false, MACHINE_EV_FOUND, APBOT_E_STATE, "someone else"},
        {NONE, "w", false, MACHINE_EV_FOUND, APBOT_E_STATE, "lease lost"},
        {LIVE, "w", true, MACHINE_EV_FOUND, APBOT_E_INVAL, "owner + take_over"},
        {LIVE, NULL, false, MACHINE_EV_RESOLVE_POSTED, APBOT_E_STATE, "operator vs live lease"},
        {EXPIRED, NULL, false, MACHINE_EV_RESOLVE_POSTED, APBOT_OK, "operator, expired lease"},
        {NONE, NULL, false, MACHINE_EV_RESOLVE_POSTED, APBOT_OK, "operator, no lease"},
        {EXPIRED, NULL, true, MACHINE_EV_LEASE_EXPIRED, APBOT_OK, "recovery"},
        {LIVE, NULL, true, MACHINE_EV_LEASE_EXPIRED, APBOT_E_STATE, "recovery vs live lease"},
        {NONE, NULL, true, MACHINE_EV_LEASE_EXPIRED, APBOT_E_STATE, "already recovered"},
        {LIVE, NULL, true, MACHINE_EV_DOC_CONFLICT, APBOT_OK, "one document, one item"},
        {NONE, NULL, true, MACHINE_EV_DOC_CONFLICT, APBOT_OK, "doc-conflict, no lease"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct store_item it = stamps(BOOT_A, 0, rows[i].lease == NONE ? NULL : "w",
                                      rows[i].lease == LIVE ? 500 : 100, false, 0);
        int got = store_lease_allows(&it, AT2(T0, 300, BOOT_A), rows[i].owner, rows[i].take_over,
                                     rows[i].ev);
        if (got != rows[i].want)
            fail_msg("row %zu (%s): %d, want %d", i, rows[i].note, got, rows[i].want);
    }
}

/*
 * store_apply's guard, the one decision both backends make before they write a change: the
 * row's state, its lease, the document's holder, in that order, with their results and
 * messages (the conformance cases above drive the same decisions through each backend).
 */
static void test_store_apply_guard_table(void **state)
{
    (void)state;
    enum { LIVE, EXPIRED, NONE };
    static const struct {
        enum machine_state row;  /* the row's state (INVALID: a text this version cannot map) */
        int lease;               /* the row's lease, held by "w" */
        enum machine_state from; /* the change's */
        const char *owner;       /* the caller */
        bool take_over;
        enum machine_event ev;
        const char *doc; /* ch->erp_doc */
        int64_t holder;  /* another item holding it, 0 if none */
        int want;
        const char *msg; /* err, exactly ("" when APBOT_OK) */
    } rows[] = {
        /* the owner's change */
        {MACHINE_CHECKING, LIVE, MACHINE_CHECKING, "w", false, MACHINE_EV_NOT_FOUND, NULL, 0,
         APBOT_OK, ""},
        {MACHINE_CHECKING, EXPIRED, MACHINE_CHECKING, "w", false, MACHINE_EV_NOT_FOUND, NULL, 0,
         APBOT_OK, ""},
        {MACHINE_RECONCILING, LIVE, MACHINE_RECONCILING, "w", false, MACHINE_EV_FOUND, "D-1", 0,
         APBOT_OK, ""},
        /* the state first: nothing else is looked at */
        {MACHINE_CHECKING, LIVE, MACHINE_POSTING, "w", false, MACHINE_EV_CONFIRMED, "D-9", 0,
         APBOT_E_STATE, "item #7 is checking, not posting"},
        {MACHINE_CHECKING, NONE, MACHINE_POSTING, "x", false, MACHINE_EV_CONFIRMED, "D-9", 8,
         APBOT_E_STATE, "item #7 is checking, not posting"},
        {MACHINE_STATE_INVALID, NONE, MACHINE_NEW, NULL, false, MACHINE_EV_RESOLVE_REQUEUE, NULL, 0,
         APBOT_E_STATE, "item #7 is in unknown state 'parked'; not touched"},
        {MACHINE_STATE_INVALID, LIVE, MACHINE_NEW, "w", false, MACHINE_EV_FOUND, "D-1", 8,
         APBOT_E_STATE, "item #7 is in unknown state 'parked'; not touched"},
        /* then the lease */
        {MACHINE_CHECKING, LIVE, MACHINE_CHECKING, "x", false, MACHINE_EV_NOT_FOUND, NULL, 0,
         APBOT_E_STATE, "item #7: lease lost (held by w)"},
        {MACHINE_CHECKING, NONE, MACHINE_CHECKING, "w", false, MACHINE_EV_NOT_FOUND, NULL, 0,
         APBOT_E_STATE, "item #7: lease lost (held by nobody)"},
        {MACHINE_RECONCILING, LIVE, MACHINE_RECONCILING, "x", false, MACHINE_EV_FOUND, "D-1", 8,
         APBOT_E_STATE, "item #7: lease lost (held by w)"},
        {MACHINE_CHECKING, LIVE, MACHINE_CHECKING, "w", true, MACHINE_EV_NOT_FOUND, NULL, 0,
         APBOT_E_INVAL, "item #7: lease lost (held by w)"},
        {MACHINE_MANUAL_REVIEW, LIVE, MACHINE_MANUAL_REVIEW, NULL, false, MACHINE_EV_RESOLVE_POSTED,
         "D-1", 0, APBOT_E_STATE, "item #7 is leased by w; try again when it is released"},
        {MACHINE_MANUAL_REVIEW, EXPIRED, MACHINE_MANUAL_REVIEW, NULL, false,
         MACHINE_EV_RESOLVE_POSTED, "D-1", 0, APBOT_OK, ""},
        {MACHINE_MANUAL_REVIEW, NONE, MACHINE_MANUAL_REVIEW, NULL, false, MACHINE_EV_RESOLVE_POSTED,
         NULL, 0, APBOT_OK, ""},
        {MACHINE_POSTING, EXPIRED, MACHINE_POSTING, NULL, true, MACHINE_EV_LEASE_EXPIRED, NULL, 0,
         APBOT_OK, ""},
        {MACHINE_POSTING, LIVE, MACHINE_POSTING, NULL, true, MACHINE_EV_LEASE_EXPIRED, NULL, 0,
         APBOT_E_STATE, "item #7 is leased by w; try again when it is released"},
        {MACHINE_POSTING, NONE, MACHINE_POSTING, NULL, true, MACHINE_EV_LEASE_EXPIRED, NULL, 0,
         APBOT_E_STATE, "item #7 is not leased: nothing to take over"},
        {MACHINE_FINISHING, LIVE, MACHINE_FINISHING, NULL, true, MACHINE_EV_DOC_CONFLICT, NULL, 0,
         APBOT_OK, ""},
        /* then the document */
        {MACHINE_RECONCILING, LIVE, MACHINE_RECONCILING, "w", false, MACHINE_EV_FOUND, "D-1", 8,
         APBOT_E_CONFLICT, "document D-1 is already held by item #8; item #7 not changed"},
        {MACHINE_MANUAL_REVIEW, NONE, MACHINE_MANUAL_REVIEW, NULL, false, MACHINE_EV_RESOLVE_POSTED,
         "D-1", 9, APBOT_E_CONFLICT,
         "document D-1 is already held by item #9; item #7 not changed"},
        {MACHINE_CHECKING, LIVE, MACHINE_CHECKING, "w", false, MACHINE_EV_NOT_FOUND, NULL, 8,
         APBOT_OK, ""}, /* no document set: a holder does not matter */
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct store_item it = stamps(BOOT_A, 0, rows[i].lease == NONE ? NULL : "w",
                                      rows[i].lease == LIVE ? 500 : 100, false, 0);
        it.id = 7;
        it.state = rows[i].row;
        struct machine_step step = {.next = MACHINE_COMPLETED, .why = "t"};
        struct store_change ch = {.from = rows[i].from,
                                  .event = rows[i].ev,
                                  .step = &step,
                                  .erp_doc = rows[i].doc,
                                  .take_over = rows[i].take_over};
        char err[APBOT_ERR_LEN] = "";
        int got = store_apply_guard(&it, rows[i].row == MACHINE_STATE_INVALID ? "parked" : NULL,
                                    rows[i].holder, rows[i].owner, &ch, AT2(T0, 300, BOOT_A), err,
                                    sizeof(err));
        if (got != rows[i].want || strcmp(err, rows[i].msg) != 0)
            fail_msg("row %zu: %d '%s', want %d '%s'", i, got, err, rows[i].want, rows[i].msg);
    }
    /* A row of another boot, re-stamped as the backends do before the guard: its lease has
     * expired, so recovery may take it and an operator may act. */
    struct store_item it = stamps(BOOT_B, 0, "w", 999999, false, 0);
    it.id = 7;
    it.state = MACHINE_POSTING;
    assert_true(store_restamp(&it, AT2(T0, 300, BOOT_A)));
    struct machine_step step = {.next = MACHINE_RECONCILING, .why = "t"};
    struct store_change ch = {.from = MACHINE_POSTING,
                              .event = MACHINE_EV_LEASE_EXPIRED,
                              .step = &step,
                              .take_over = true};
    char err[APBOT_ERR_LEN];
    assert_int_equal(
        store_apply_guard(&it, NULL, 0, NULL, &ch, AT2(T0, 300, BOOT_A), err, sizeof(err)),
        APBOT_OK);
}

static void test_store_restamp_table(void **state)
{
    (void)state;
    /* same boot: untouched */
    struct store_item it = stamps(BOOT_A, 900, "w", 950, true, 800);
    assert_false(store_restamp(&it, AT2(T0, 10, BOOT_A)));
    assert_int_equal(it.next_mono, 900);
    assert_int_equal(it.lease_mono, 950);
    assert_int_equal(it.settle_mono, 800);
    /* another boot: due now, lease expired, settle counted again from now */
    it = stamps(BOOT_A, 900, "w", 950, true, 800);
    it.settle_at = T0 - 5;
    assert_true(store_restamp(&it, AT2(T0 + 7, 10, BOOT_B)));
    assert_string_equal(it.clock_boot, BOOT_B);
    assert_int_equal(it.next_mono, 10);
    assert_int_equal(it.next_at, T0 + 7);
    assert_int_equal(it.lease_mono, 10);
    assert_false(store_lease_live(&it, AT2(T0 + 7, 10, BOOT_B)));
    assert_int_equal(it.settle_mono, 10);
    assert_int_equal(it.settle_at, T0 - 5); /* for people: when it began */
    assert_false(store_settled(&it, AT2(T0 + 7, 10 + 4999, BOOT_B), 5000));
    assert_true(store_settled(&it, AT2(T0 + 7, 10 + 5000, BOOT_B), 5000));
    /* nothing to settle stays so; no lease stays unleased */
    it = stamps("", 900, NULL, 0, false, 0);
    assert_true(store_restamp(&it, AT2(T0, 10, BOOT_B)));
    assert_false(it.has_settle);
    assert_int_equal(it.lease_mono, 0);
}

/* ---- clocks in the queue ---- */

static struct store_item get(struct fx *f, int64_t id)
{
    struct store_item it;
    assert_int_equal(store_get(f->st, id, &it, f->err, sizeof(f->err)), APBOT_OK);
    return it;
}

/* Claims one item with a clock reading of the test's choosing. 0 when nothing is due. */
static int64_t claim_at(struct fx *f, const char *owner, const struct apbot_now *now)
{
    struct store_item it;
    int rc = store_claim(f->st, owner, now, 30000, &f->claimed, &it, f->err, sizeof(f->err));
    if (rc == APBOT_E_NOTFOUND)
        return 0;
    if (rc != APBOT_OK)
        fail_msg("claim: %s", f->err);
    int64_t id = it.id;
    store_item_done(&it);
    return id;
}

/*
 * The settle delay and the due time run on the mono clock: a wall clock stepped +10 s or
 * +1 h does not make a reconciliation due, a step back does not stall it, and the settle
 * base is the moment the ambiguity was recorded (not the intent, not the event log).
 */
static void test_store_settle_runs_on_mono_not_wall(void **state)
{
    struct fx *f = *state;
    f->settle_ms = 60000;
    int64_t id = enq(f, 1, 0, T0, NULL);
    assert_int_equal(claim_id(f, f->st, "w", T0 + 10), id);
    assert_int_equal(step_item(f, f->st, id, "w", MACHINE_EV_NOT_FOUND, T0 + 20, NULL, NULL),
                     APBOT_OK);
    struct store_item it = get(f, id);
    assert_int_equal(it.state, MACHINE_POSTING);
    assert_false(it.has_settle); /* an intent is not a send */
    store_item_done(&it);
    assert_int_equal(step_item(f, f->st, id, "w", MACHINE_EV_UNKNOWN, T0 + 100, NULL, NULL),
                     APBOT_OK);
    it = get(f, id);
    assert_int_equal(it.state, MACHINE_RECONCILING);
    assert_true(it.has_settle);
    assert_int_equal(it.settle_mono, M0 + 100);
    assert_int_equal(it.settle_at, T0 + 100);
    assert_int_equal(it.next_mono, M0 + 100 + 60000);
    assert_int_equal(it.next_at, T0 + 100 + 60000);
    assert_string_equal(it.clock_boot, BOOT_A);

    /* +10 s and +1 h on the wall, 0.2 s on the mono clock: not due, not settled. */
    const int64_t steps[] = {10000, 3600000, -3600000};
    for (size_t i = 0; i < 3; i++) {
        const struct apbot_now *now = AT2(T0 + 300 + 60000 + steps[i], M0 + 300, BOOT_A);
        assert_false(store_settled(&it, now, 60000));
        assert_int_equal(store_settle_wait_ms(&it, now, 60000), 59800);
    }
    store_item_done(&it);
    /* the lease was kept (keep_lease): it expires on the mono clock too */
    assert_int_equal(claim_at(f, "x", AT2(T0 + 3600000, M0 + 30009, BOOT_A)), 0);
    assert_int_equal(claim_at(f, "x", AT2(T0 + 60000 + 3600000, M0 + 300, BOOT_A)), 0);
    /* The wall clock stepped back an hour: due on time all the same. */
    assert_int_equal(claim_at(f, "x", AT2(T0 - 3600000, M0 + 100 + 60000 - 1, BOOT_A)), 0);
    assert_int_equal(claim_at(f, "x", AT2(T0 - 3600000, M0 + 100 + 60000, BOOT_A)), id);
    it = get(f, id);
    assert_true(store_settled(&it, AT2(T0 - 3600000, M0 + 100 + 60000, BOOT_A), 60000));
    store_item_done(&it);

    /* A post provably never sent does not restart the settle delay. */
    int64_t ns = enq(f, 2, 0, T0, NULL);
    assert_int_equal(claim_id(f, f->st, "w", T0 + 1000), ns);
    assert_int_equal(step_item(f, f->st, ns, "w", MACHINE_EV_NOT_FOUND, T0 + 1001, NULL, NULL),
                     APBOT_OK);
    assert_int_equal(step_item(f, f->st, ns, "w", MACHINE_EV_NOT_SENT, T0 + 1002, NULL, NULL),
                     APBOT_OK);
    it = get(f, ns);
    assert_int_equal(it.state, MACHINE_NEW);
    assert_false(it.has_settle);
    assert_true(store_settled(&it, AT(T0 + 1003), 60000));
    store_item_done(&it);
}

/* resolve --requeue: the settle delay still counts from the item's last possible send. */
static void test_store_requeue_keeps_the_settle_base(void **state)
{
    struct fx *f = *state;
    f->settle_ms = 10000;
    int64_t id = enq(f, 1, 0, T0, NULL);
    assert_int_equal(claim_id(f, f->st, "w", T0 + 1), id);
    assert_int_equal(step_item(f, f->st, id, "w", MACHINE_EV_NOT_FOUND, T0 + 2, NULL, NULL),
                     APBOT_OK);
    assert_int_equal(step_item(f, f->st, id, "w", MACHINE_EV_UNKNOWN, T0 + 100, NULL, NULL),
                     APBOT_OK);
    assert_int_equal(
        step_item(f, f->st, id, "w", MACHINE_EV_FOUND_CONFLICT, T0 + 200, NULL, "amount differs"),
        APBOT_OK);
    assert_int_equal(state_of(f, id), MACHINE_MANUAL_REVIEW);
    assert_int_equal(step_item(f, f->st, id, NULL, MACHINE_EV_RESOLVE_REQUEUE, T0 + 300, NULL, ""),
                     APBOT_OK);
    assert_int_equal(claim_id(f, f->st, "w", T0 + 400), id);
    /* checking, 0.3 s after the ambiguity: not found is no confirmed absence yet */
    assert_int_equal(step_item(f, f->st, id, "w", MACHINE_EV_NOT_FOUND, T0 + 400, NULL, NULL),
                     APBOT_OK);
    struct store_item it = get(f, id);
    assert_int_equal(it.state, MACHINE_NEW);
    assert_int_equal(it.counters.posts, 0);
    assert_int_equal(it.next_mono, M0 + 100 + 10000); /* from the base, not from now */
    store_item_done(&it);
    assert_int_equal(claim_id(f, f->st, "w2", T0 + 100 + 10000 - 1), 0);
    assert_int_equal(claim_id(f, f->st, "w2", T0 + 100 + 10000), id);
    assert_int_equal(
        step_item(f, f->st, id, "w2", MACHINE_EV_NOT_FOUND, T0 + 100 + 10000, NULL, NULL),
        APBOT_OK);
    assert_int_equal(state_of(f, id), MACHINE_POSTING);
}

/*
 * After a reboot (another boot id) every row counts as due now with its lease expired, and
 * its settle delay is counted again from when this boot first sees it, in that transaction.
 */
static void test_store_another_boot_restamps(void **state)
{
    struct fx *f = *state;
    f->settle_ms = 60000;
    int64_t rec = enq(f, 1, 0, T0, NULL);
    int64_t chk = enq(f, 2, 0, T0, NULL);
    int64_t later = enq(f, 3, 0, T0, NULL);
    assert_int_equal(claim_id(f, f->st, "w", T0 + 10), rec);
    assert_int_equal(step_item(f, f->st, rec, "w", MACHINE_EV_NOT_FOUND, T0 + 20, NULL, NULL),
                     APBOT_OK);
    assert_int_equal(step_item(f, f->st, rec, "w", MACHINE_EV_UNKNOWN, T0 + 100, NULL, NULL),
                     APBOT_OK);
    assert_int_equal(claim_id(f, f->st, "w", T0 + 10), chk);
    /* `later` backs off for an hour */
    assert_int_equal(claim_id(f, f->st, "w", T0 + 10), later);
    struct store_item it = get(f, later);
    struct machine_step step;
    assert_int_equal(machine_next(it.state, MACHINE_EV_LOOKUP_FAILED, &it.counters, &f->pol, &step),
                     APBOT_OK);
    store_item_done(&it);
    struct store_change ch = {.from = MACHINE_CHECKING,
                              .event = MACHINE_EV_LOOKUP_FAILED,
                              .step = &step,
                              .backoff_ms = 3600000,
                              .actor = "runner:w"};
    assert_int_equal(store_apply(f->st, later, "w", &ch, AT(T0 + 20), NULL, f->err, sizeof(f->err)),
                     APBOT_OK);
    /* Under boot A the reconciliation is 1 ms from settled. */
    it = get(f, rec);
    assert_int_equal(store_settle_wait_ms(&it, AT(T0 + 100 + 59999), 60000), 1);
    store_item_done(&it);

    /* Reboot: boot B, whose mono clock starts small. */
    const int64_t B0 = 50;
    const int64_t wall = T0 + 100 + 59999;
    /* Everything is due at once, leases expired: the reconciliation goes first ... */
    assert_int_equal(claim_at(f, "after", AT2(wall, B0, BOOT_B)), rec);
    it = get(f, rec);
    assert_string_equal(it.clock_boot, BOOT_B);
    assert_string_equal(it.lease_owner, "after");
    assert_int_equal(it.settle_mono, B0); /* counted again from first sight */
    assert_int_equal(it.settle_at, T0 + 100);
    assert_false(store_settled(&it, AT2(wall, B0 + 59999, BOOT_B), 60000)); /* never shortened */
    assert_true(store_settled(&it, AT2(wall, B0 + 60000, BOOT_B), 60000));
    store_item_done(&it);
    /* ... the checking item's lease expired, the hour of backoff is over */
    int n = 0;
    assert_int_equal(
        store_recover(f->st, AT2(wall, B0 + 1, BOOT_B), &f->pol, &n, f->err, sizeof(f->err)),
        APBOT_OK);
    assert_int_equal(n, 1);
    assert_int_equal(state_of(f, chk), MACHINE_NEW);
    assert_int_equal(claim_at(f, "after", AT2(wall, B0 + 2, BOOT_B)), later);
    assert_int_equal(claim_at(f, "after", AT2(wall, B0 + 2, BOOT_B)), chk);

    /* A second handle under the same boot does not re-stamp again. */
    struct store *st2 = NULL;
    assert_int_equal(store_open(f->path, &st2, f->err, sizeof(f->err)), APBOT_OK);
    int64_t wait = -7;
    assert_int_equal(
        store_next_due(st2, AT2(wall, B0 + 5000, BOOT_B), &wait, f->err, sizeof(f->err)), APBOT_OK);
    store_close(st2);
    it = get(f, rec);
    assert_int_equal(it.settle_mono, B0);
    store_item_done(&it);
}

/* Whatever boot wrote a row last, every row stays visible to the next writer. */
static void test_store_rows_of_any_boot_stay_claimable(void **state)
{
    struct fx *f = *state;
    int64_t a = enq(f, 1, 0, T0, NULL); /* boot A */
    char key[32], fp[65];
    struct store_new_item ni = mk_item(2, 0, key, fp);
    enum store_enqueue_result r;
    int64_t b = 0;
    assert_int_equal(
        store_enqueue_raw(f->st, &ni, AT2(T0 + 1, 7, BOOT_B), &r, &b, f->err, sizeof(f->err)),
        APBOT_OK);
    struct store_item it = get(f, a);
    assert_string_equal(it.clock_boot, BOOT_B); /* brought under B with the new row */
    store_item_done(&it);
    assert_int_equal(claim_at(f, "w", AT(T0 + 2)), a);
    assert_int_equal(claim_at(f, "w", AT(T0 + 2)), b);
}

/* ---- one document, one item ---- */

/* step_item, returning the holder on a conflict. */
static int step_doc(struct fx *f, int64_t id, const char *owner, enum machine_event ev, int64_t now,
                    const char *doc, int64_t *ret_holder)
{
    struct store_item it = get(f, id);
    struct machine_step step;
    struct machine_counters c = it.counters;
    c.settled = true;
    int rc = machine_next(it.state, ev, &c, &f->pol, &step);
    if (rc == APBOT_OK) {
        struct store_change ch = {
            .from = it.state,
            .event = ev,
            .step = &step,
            .erp_doc = doc,
            .actor = owner ? "runner:test" : "operator:test",
            .keep_lease = owner && !machine_is_terminal(step.next),
            .take_over = !owner && ev == MACHINE_EV_DOC_CONFLICT,
        };
        rc = store_apply(f->st, id, owner, &ch, AT(now), ret_holder, f->err, sizeof(f->err));
    }
    store_item_done(&it);
    return rc;
}

static void test_store_one_document_one_item(void **state)
{
    struct fx *f = *state;
    int64_t x = enq(f, 1, 0, T0, NULL);
    int64_t y = enq(f, 2, 0, T0, NULL);
    assert_int_equal(claim_id(f, f->st, "w", T0 + 1), x);
    assert_int_equal(claim_id(f, f->st, "w", T0 + 1), y);
    assert_int_equal(step_doc(f, x, "w", MACHINE_EV_FOUND, T0 + 2, "D-1", NULL), APBOT_OK);

    /* y's lookup answers the same document: refused, nothing changed, x named. */
    int events = n_events(f, y);
    int64_t holder = -1;
    assert_int_equal(step_doc(f, y, "w", MACHINE_EV_FOUND, T0 + 3, "D-1", &holder),
                     APBOT_E_CONFLICT);
    assert_int_equal(holder, x);
    char want[32];
    snprintf(want, sizeof(want), "#%" PRId64, x);
    assert_non_null(strstr(f->err, want));
    assert_int_equal(n_events(f, y), events);
    struct store_item it = get(f, y);
    assert_int_equal(it.state, MACHINE_CHECKING);
    assert_null(it.erp_doc);
    assert_string_equal(it.lease_owner, "w");
    store_item_done(&it);

    /* The caller sends both to a human: y as its owner, x (completed) by take-over. */
    assert_int_equal(step_doc(f, y, "w", MACHINE_EV_DOC_CONFLICT, T0 + 4, NULL, NULL), APBOT_OK);
    assert_int_equal(step_doc(f, x, NULL, MACHINE_EV_DOC_CONFLICT, T0 + 4, NULL, NULL), APBOT_OK);
    assert_int_equal(state_of(f, x), MACHINE_MANUAL_REVIEW);
    assert_int_equal(state_of(f, y), MACHINE_MANUAL_REVIEW);
    it = get(f, x);
    assert_string_equal(it.erp_doc, "D-1"); /* the evidence stays */
    store_item_done(&it);

    /* An operator cannot give y the same document either; another one is fine. */
    holder = -1;
    assert_int_equal(step_doc(f, y, NULL, MACHINE_EV_RESOLVE_POSTED, T0 + 5, "D-1", &holder),
                     APBOT_E_CONFLICT);
    assert_int_equal(holder, x);
    assert_int_equal(step_doc(f, y, NULL, MACHINE_EV_RESOLVE_POSTED, T0 + 5, "D-2", NULL),
                     APBOT_OK);
    /* An empty document number is no document. */
    assert_int_equal(step_doc(f, x, NULL, MACHINE_EV_RESOLVE_POSTED, T0 + 6, "", NULL),
                     APBOT_E_INVAL);

    /* The same item may carry its own document on: saved as D-5, finished as D-5. */
    int64_t z = enq(f, 3, 0, T0, NULL);
    assert_int_equal(claim_id(f, f->st, "w", T0 + 10), z);
    assert_int_equal(step_doc(f, z, "w", MACHINE_EV_NOT_FOUND, T0 + 11, NULL, NULL), APBOT_OK);
    assert_int_equal(step_doc(f, z, "w", MACHINE_EV_SAVED, T0 + 12, "D-5", NULL), APBOT_OK);
    it = get(f, z);
    assert_int_equal(it.state, MACHINE_FINISHING);
    assert_string_equal(it.erp_doc, "D-5");
    assert_true(it.has_settle); /* the committing step went out */
    assert_string_equal(it.lease_owner, "w");
    store_item_done(&it);

    /* A live runner's item goes to review too: one document, one item outranks its work. */
    int64_t v = enq(f, 4, 0, T0, NULL);
    assert_int_equal(claim_id(f, f->st, "w2", T0 + 20), v);
    holder = -1;
    assert_int_equal(step_doc(f, v, "w2", MACHINE_EV_FOUND, T0 + 21, "D-5", &holder),
                     APBOT_E_CONFLICT);
    assert_int_equal(holder, z);
    assert_int_equal(step_doc(f, z, NULL, MACHINE_EV_DOC_CONFLICT, T0 + 22, NULL, NULL), APBOT_OK);
    assert_int_equal(state_of(f, z), MACHINE_MANUAL_REVIEW);
    /* its runner finds out at its next write */
    assert_int_equal(store_renew(f->st, z, "w", AT(T0 + 23), 1000, f->err, sizeof(f->err)),
                     APBOT_E_STATE);
    assert_int_equal(step_doc(f, z, "w", MACHINE_EV_CONFIRMED, T0 + 23, "D-5", NULL),
                     APBOT_E_STATE);
}

/* ---- recovery: the store half ---- */

struct expired_seen {
    int n;
    int64_t ids[8];
};

static int note_expired(void *ctx, const struct store_item *it)
{
    struct expired_seen *e = ctx;
    if (e->n < 8)
        e->ids[e->n] = it->id;
    e->n++;
    return 0;
}

static void test_store_expired_and_take_over(void **state)
{
    struct fx *f = *state;
    int64_t a = enq(f, 1, 0, T0, NULL);
    int64_t b = enq(f, 2, 0, T0, NULL);
    (void)enq(f, 3, 0, T0, NULL);                                 /* never leased */
    assert_int_equal(claim_id(f, f->st, "dead", T0), a);          /* expires T0 + 30000 */
    assert_int_equal(claim_id(f, f->st, "alive", T0 + 20000), b); /* expires T0 + 50000 */

    struct expired_seen e = {0};
    assert_int_equal(
        store_each_expired(f->st, AT(T0 + 29999), 0, note_expired, &e, f->err, sizeof(f->err)),
        APBOT_OK);
    assert_int_equal(e.n, 0);
    assert_int_equal(
        store_each_expired(f->st, AT(T0 + 30000), 0, note_expired, &e, f->err, sizeof(f->err)),
        APBOT_OK);
    assert_int_equal(e.n, 1);
    assert_int_equal(e.ids[0], a);

    /* The caller applies lease-expired with take_over. */
    struct store_item it = get(f, a);
    struct machine_step step;
    assert_int_equal(machine_next(it.state, MACHINE_EV_LEASE_EXPIRED, &it.counters, &f->pol, &step),
                     APBOT_OK);
    store_item_done(&it);
    struct store_change ch = {.from = MACHINE_CHECKING,
                              .event = MACHINE_EV_LEASE_EXPIRED,
                              .step = &step,
                              .actor = "recovery",
                              .take_over = true};
    assert_int_equal(store_apply(f->st, a, "x", &ch, AT(T0 + 30001), NULL, f->err, sizeof(f->err)),
                     APBOT_E_INVAL); /* take_over is for owner-less changes */
    assert_int_equal(store_apply(f->st, a, NULL, &ch, AT(T0 + 30001), NULL, f->err, sizeof(f->err)),
                     APBOT_OK);
    it = get(f, a);
    assert_int_equal(it.state, MACHINE_NEW);
    assert_null(it.lease_owner);
    store_item_done(&it);
    struct last_event le = last_event(f, a);
    assert_string_equal(le.event, "lease-expired");
    assert_string_equal(le.actor, "recovery");
    /* A second recoverer finds nothing to take over. */
    ch.from = MACHINE_NEW;
    assert_int_equal(store_apply(f->st, a, NULL, &ch, AT(T0 + 30002), NULL, f->err, sizeof(f->err)),
                     APBOT_E_STATE);
    /* A live lease is not taken over. */
    ch.from = MACHINE_CHECKING;
    assert_int_equal(store_apply(f->st, b, NULL, &ch, AT(T0 + 30002), NULL, f->err, sizeof(f->err)),
                     APBOT_E_STATE);
    assert_int_equal(state_of(f, b), MACHINE_CHECKING);
    /* The dead owner is refused; the living one renews and goes on. */
    assert_int_equal(step_item(f, f->st, a, "dead", MACHINE_EV_NOT_FOUND, T0 + 30003, NULL, NULL),
                     APBOT_E_STATE);
    assert_int_equal(store_renew(f->st, b, "alive", AT(T0 + 30003), 60000, f->err, sizeof(f->err)),
                     APBOT_OK);
    memset(&e, 0, sizeof(e));
    assert_int_equal(
        store_each_expired(f->st, AT(T0 + 60000), 0, note_expired, &e, f->err, sizeof(f->err)),
        APBOT_OK);
    assert_int_equal(e.n, 0);
}

/* ---- late commits ---- */

static void test_store_late_commits(void **state)
{
    struct fx *f = *state;
    struct store_late_commit lc = {.max_ms = -1};
    assert_int_equal(store_late_commit(f->st, "classic", &lc, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(lc.max_ms, 0);
    assert_int_equal(lc.at, 0);
    assert_int_equal(lc.observations, 0);
    assert_int_equal(
        store_note_late_commit(f->st, "classic", 5000, AT(T0 + 1), f->err, sizeof(f->err)),
        APBOT_OK);
    assert_int_equal(
        store_note_late_commit(f->st, "classic", 12000, AT(T0 + 2), f->err, sizeof(f->err)),
        APBOT_OK);
    assert_int_equal(
        store_note_late_commit(f->st, "classic", 8000, AT(T0 + 3), f->err, sizeof(f->err)),
        APBOT_OK);
    assert_int_equal(store_note_late_commit(f->st, "acme", 700, AT(T0 + 4), f->err, sizeof(f->err)),
                     APBOT_OK);
    assert_int_equal(store_late_commit(f->st, "classic", &lc, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(lc.max_ms, 12000);
    assert_int_equal(lc.at, T0 + 2);
    assert_int_equal(lc.observations, 3);
    assert_int_equal(store_late_commit(f->st, "acme", &lc, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(lc.max_ms, 700);
    assert_int_equal(store_note_late_commit(f->st, "classic", -1, AT(T0), f->err, sizeof(f->err)),
                     APBOT_E_INVAL);
    assert_int_equal(store_note_late_commit(f->st, "", 1, AT(T0), f->err, sizeof(f->err)),
                     APBOT_E_INVAL);
    /* kept across handles (and runs) */
    store_close(f->st);
    assert_int_equal(store_open(f->path, &f->st, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(store_late_commit(f->st, "classic", &lc, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(lc.max_ms, 12000);
}

/* ---- a busy database does not end the run ---- */

static int64_t mono_now(void)
{
    return apbot_clock_mono_ms();
}

static void test_store_busy_retries_are_bounded(void **state)
{
    struct fx *f = *state;
    (void)enq(f, 1, 0, T0, NULL);
    struct raw raw = raw_open(f->bk, f->path);
    assert_int_equal(raw_lock(&raw), 0);
    store_set_busy_timeout(f->st, 20);
    store_set_busy_retries(f->st, 3);
    int64_t t = mono_now();
    struct store_item it = {.id = -7};
    assert_int_equal(
        store_claim(f->st, "w", AT(T0 + 1), 1000, &f->claimed, &it, f->err, sizeof(f->err)),
        APBOT_E_BUSY);
    int64_t took = mono_now() - t;
    assert_int_equal(it.id, -7);
    assert_int_equal(store_busy_retried(f->st), 3);
    /* four attempts of 20 ms plus pauses of at least 10 + 20 + 40 ms */
    assert_true(took >= 4 * 20 + 70);
    assert_int_equal(raw_exec(&raw, "ROLLBACK"), 0);
    raw_close(&raw);
}

struct holder {
    struct raw db;
    int hold_ms;
};

static void *release_later(void *arg)
{
    struct holder *h = arg;
    struct timespec ts = {.tv_sec = h->hold_ms / 1000, .tv_nsec = (h->hold_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    (void)raw_exec(&h->db, "COMMIT");
    return NULL;
}

/* A write lock held far longer than the busy timeout: the store retries and gets through. */
static void test_store_busy_retry_outlasts_a_lock(void **state)
{
    struct fx *f = *state;
    int64_t id = enq(f, 1, 0, T0, NULL);
    assert_int_equal(claim_id(f, f->st, "w", T0 + 1), id);
    struct holder h = {.db = raw_open(f->bk, f->path), .hold_ms = 200};
    assert_int_equal(raw_lock(&h.db), 0);
    store_set_busy_timeout(f->st, 10);
    /* 20 retries span well over ten seconds: far beyond the 200 ms hold, on any machine */
    store_set_busy_retries(f->st, 20);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, release_later, &h), 0);
    assert_int_equal(store_renew(f->st, id, "w", AT(T0 + 2), 30000, f->err, sizeof(f->err)),
                     APBOT_OK);
    assert_int_equal(pthread_join(t, NULL), 0);
    raw_close(&h.db);
    assert_true(store_busy_retried(f->st) >= 1); /* the lock was held 20x the timeout */
}

#define PRESSURE_ITEMS 24
#define PRESSURE_ROUNDS 40

/* Holds the write lock 80 ms of every 100 for ~2 s; writes "1" to fd once it first holds. */
static int pressure(enum backend bk, const char *path, int fd)
{
    struct raw db = raw_open(bk, path);
    if (raw_exec(&db, "CREATE TABLE IF NOT EXISTS pressure (n INTEGER)") != 0)
        return 21;
    int64_t end = mono_now() + 2000;
    bool told = false;
    for (int n = 0; mono_now() < end; n++) {
        if (raw_lock(&db) != 0)
            continue;
        char sql[64];
        snprintf(sql, sizeof(sql), "INSERT INTO pressure VALUES (%d)", n);
        (void)raw_exec(&db, sql);
        if (!told) {
            char one = '1';
            if (write(fd, &one, 1) != 1)
                return 22;
            told = true;
        }
        struct timespec hold = {.tv_nsec = 80 * 1000000L}, gap = {.tv_nsec = 20 * 1000000L};
        nanosleep(&hold, NULL);
        if (raw_exec(&db, "COMMIT") != 0)
            return 23;
        nanosleep(&gap, NULL);
    }
    raw_close(&db);
    return 0;
}

struct tally {
    int64_t claims, applies, renewals, retried;
};

/*
 * A worker: claims, renews twice, records a failed lookup (attempts + 1, due again at once),
 * PRESSURE_ROUNDS times, under a busy timeout far below the pressure's hold. Any error that
 * surfaces is a failure (exit code); the tally goes to fd.
 */
static int worker(const char *path, const char *owner, int fd)
{
    struct store *st = NULL;
    char err[APBOT_ERR_LEN];
    if (store_open(path, &st, err, sizeof(err)) != APBOT_OK)
        return 30;
    store_set_busy_timeout(st, 20);
    store_set_busy_retries(st, 60); /* a window far longer than the pressure lasts */
    struct machine_policy pol = {.max_posts = 2, .max_cycles = 5, .max_attempts = 100000};
    struct machine_counters fresh = {0};
    struct machine_step claimed;
    if (machine_next(MACHINE_NEW, MACHINE_EV_CLAIMED, &fresh, &pol, &claimed) != APBOT_OK)
        return 31;
    struct tally t = {0};
    for (int round = 0; round < PRESSURE_ROUNDS;) {
        struct store_item it;
        int rc = store_claim(st, owner, NULL, 60000, &claimed, &it, err, sizeof(err));
        if (rc == APBOT_E_NOTFOUND) {
            struct timespec ts = {.tv_nsec = 2 * 1000000L};
            nanosleep(&ts, NULL);
            continue;
        }
        if (rc != APBOT_OK) {
            fprintf(stderr, "%s: claim: %s\n", owner, err);
            return 32;
        }
        t.claims++;
        for (int k = 0; k < 2; k++) {
            if (store_renew(st, it.id, owner, NULL, 60000, err, sizeof(err)) != APBOT_OK) {
                fprintf(stderr, "%s: renew: %s\n", owner, err);
                return 33;
            }
            t.renewals++;
        }
        struct machine_step step;
        if (machine_next(it.state, MACHINE_EV_LOOKUP_FAILED, &it.counters, &pol, &step) != APBOT_OK)
            return 34;
        struct store_change ch = {.from = it.state,
                                  .event = MACHINE_EV_LOOKUP_FAILED,
                                  .step = &step,
                                  .backoff_ms = 0,
                                  .actor = owner};
        rc = store_apply(st, it.id, owner, &ch, NULL, NULL, err, sizeof(err));
        store_item_done(&it);
        if (rc != APBOT_OK) {
            fprintf(stderr, "%s: apply: %s\n", owner, err);
            return 35;
        }
        t.applies++;
        round++;
    }
    t.retried = store_busy_retried(st);
    store_close(st);
    if (write(fd, &t, sizeof(t)) != (ssize_t)sizeof(t))
        return 36;
    return 0;
}

struct event_tally {
    int claimed, failed;
};

static int tally_event(void *ctx, const struct store_event_row *row)
{
    struct event_tally *t = ctx;
    t->claimed += strcmp(row->event, "claimed") == 0;
    t->failed += strcmp(row->event, "lookup-failed") == 0;
    return 0;
}

static void test_store_busy_two_processes_under_write_pressure(void **state)
{
    struct fx *f = *state;
    for (int i = 0; i < PRESSURE_ITEMS; i++)
        (void)enq(f, i, 0, T0, NULL);
    /* The workers read the real clock: their first write re-stamps these rows (another
     * boot id than the test's), due at once. */
    int pp[2];
    assert_int_equal(pipe(pp), 0);
    pid_t pres = fork();
    assert_true(pres >= 0);
    if (pres == 0) {
        close(pp[0]);
        _exit(pressure(f->bk, f->path, pp[1]));
    }
    close(pp[1]);
    char one = 0;
    assert_int_equal(read(pp[0], &one, 1), 1); /* the pressure holds the lock */
    close(pp[0]);

    int fds[2][2];
    pid_t pid[2];
    for (int k = 0; k < 2; k++) {
        assert_int_equal(pipe(fds[k]), 0);
        pid[k] = fork();
        assert_true(pid[k] >= 0);
        if (pid[k] == 0) {
            close(fds[k][0]);
            _exit(worker(f->path, k ? "worker-b" : "worker-a", fds[k][1]));
        }
        close(fds[k][1]);
    }
    struct tally sum = {0};
    for (int k = 0; k < 2; k++) {
        struct tally t;
        assert_int_equal(read(fds[k][0], &t, sizeof(t)), (ssize_t)sizeof(t));
        close(fds[k][0]);
        int status = 0;
        assert_int_equal(waitpid(pid[k], &status, 0), pid[k]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0); /* no error surfaced */
        assert_int_equal(t.claims, PRESSURE_ROUNDS);
        assert_int_equal(t.applies, PRESSURE_ROUNDS);
        assert_int_equal(t.renewals, 2 * PRESSURE_ROUNDS);
        sum.claims += t.claims;
        sum.applies += t.applies;
        sum.retried += t.retried;
    }
    int status = 0;
    assert_int_equal(waitpid(pres, &status, 0), pres);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    printf("two workers under write pressure: %" PRId64 " claims, %" PRId64 " applies, %" PRId64
           " busy transactions retried, none surfaced\n",
           sum.claims, sum.applies, sum.retried);
    assert_true(sum.retried > 0); /* the pressure held the lock 4x the timeout, 80% of the time */

    /* No lost update: every apply is in the counters and in the events, exactly once. */
    int64_t attempts = 0;
    struct event_tally et = {0};
    for (int i = 1; i <= PRESSURE_ITEMS; i++) {
        struct store_item it = get(f, i);
        attempts += it.counters.attempts;
        assert_null(it.lease_owner);
        assert_int_equal(it.state, MACHINE_NEW);
        store_item_done(&it);
        assert_int_equal(store_each_event(f->st, i, tally_event, &et, f->err, sizeof(f->err)),
                         APBOT_OK);
    }
    assert_int_equal(attempts, sum.applies);
    assert_int_equal(et.failed, sum.applies);
    assert_int_equal(et.claimed, sum.claims);
}

/* ---- files ---- */

/* Items in the queue at path, read through a handle of its own (an absolute path). */
static int64_t queued_at(const char *path)
{
    struct store *st = NULL;
    struct store_counts c;
    char err[APBOT_ERR_LEN];
    if (store_open(path, &st, err, sizeof(err)) != APBOT_OK ||
        store_counts(st, &c, err, sizeof(err)))
        fail_msg("%s", err);
    store_close(st);
    return c.total;
}

/*
 * The writes a process's handles make in their turns run on one connection to the file,
 * opened by the first such write, by the handles' path. That path must still name the file
 * the handles have open: here the process changed directory, and "q.db" now names another
 * queue, which must not receive the write.
 */
static void test_store_writer_connection_stays_on_its_file(void **state)
{
    struct fx *f = *state;
    char cwd[512], other[200], mine[200];
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    snprintf(other, sizeof(other), "%s/other", f->dir);
    assert_int_equal(mkdir(other, 0700), 0);
    snprintf(mine, sizeof(mine), "%s/mine.db", f->dir);

    assert_int_equal(chdir(f->dir), 0);
    struct store *a = NULL, *b = NULL;
    assert_int_equal(store_open("mine.db", &a, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(chdir(other), 0);
    assert_int_equal(store_open("mine.db", &b, f->err, sizeof(f->err)), APBOT_OK); /* another */

    char key[32], fp[65];
    struct store_new_item it = mk_item(1, 0, key, fp);
    enum store_enqueue_result res;
    int64_t id = 0;
    assert_int_equal(store_enqueue_raw(a, &it, AT(T0), &res, &id, f->err, sizeof(f->err)),
                     APBOT_OK);
    it = mk_item(2, 0, key, fp);
    assert_int_equal(store_enqueue_raw(a, &it, AT(T0), &res, &id, f->err, sizeof(f->err)),
                     APBOT_OK);
    store_close(a);
    store_close(b);
    assert_int_equal(chdir(cwd), 0);

    char theirs[600];
    snprintf(theirs, sizeof(theirs), "%s/mine.db", other);
    assert_int_equal(queued_at(mine), 2);
    assert_int_equal(queued_at(theirs), 0);
    const char *suffix[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
        char p[700];
        snprintf(p, sizeof(p), "%s%s", mine, suffix[i]);
        unlink(p);
        snprintf(p, sizeof(p), "%s%s", theirs, suffix[i]);
        unlink(p);
    }
    rmdir(other);
}

static void test_store_files_are_private(void **state)
{
    struct fx *f = *state;
    char path[160], p[200];
    snprintf(path, sizeof(path), "%s/private.db", f->dir);
    mode_t old = umask(0); /* the worst umask: SQLite alone would create 0644 */
    struct store *st = NULL;
    assert_int_equal(store_open(path, &st, f->err, sizeof(f->err)), APBOT_OK);
    char key[32], fp[65];
    struct store_new_item ni = mk_item(1, 0, key, fp);
    enum store_enqueue_result r;
    int64_t id;
    assert_int_equal(store_enqueue_raw(st, &ni, AT(T0), &r, &id, f->err, sizeof(f->err)), APBOT_OK);
    umask(old);
    const char *suffix[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), "%s%s", path, suffix[i]);
        struct stat sb;
        if (stat(p, &sb) != 0)
            fail_msg("%s: missing", p);
        if ((sb.st_mode & 0777) != 0600)
            fail_msg("%s: mode %03o, want 600", p, (unsigned)(sb.st_mode & 0777));
    }
    store_close(st);
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), "%s%s", path, suffix[i]);
        unlink(p);
    }
}

/* ---- migrations ---- */

/* Schema version 1 exactly as shipped (migration 0 -> 1 of store.c, frozen). */
static const char v1_schema[] =
    "CREATE TABLE items ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " key TEXT NOT NULL UNIQUE,"
    " fingerprint TEXT NOT NULL,"
    " payload TEXT NOT NULL,"
    " state TEXT NOT NULL,"
    " posts INTEGER NOT NULL DEFAULT 0,"
    " cycles INTEGER NOT NULL DEFAULT 0,"
    " attempts INTEGER NOT NULL DEFAULT 0,"
    " next_at INTEGER NOT NULL,"
    " last_post_at INTEGER NOT NULL DEFAULT 0,"
    " lease_owner TEXT,"
    " lease_until INTEGER NOT NULL DEFAULT 0,"
    " erp_doc TEXT,"
    " reason TEXT,"
    " source TEXT NOT NULL,"
    " vendor_id TEXT NOT NULL,"
    " vendor_name TEXT,"
    " invoice_number TEXT NOT NULL,"
    " doc_type TEXT NOT NULL,"
    " issue_date TEXT NOT NULL,"
    " currency TEXT NOT NULL,"
    " exponent INTEGER NOT NULL,"
    " total INTEGER NOT NULL,"
    " created_at INTEGER NOT NULL,"
    " updated_at INTEGER NOT NULL);"
    /* claim: due items of one state in next_at order; also serves the counts per state */
    "CREATE INDEX items_claim ON items(state, next_at);"
    /* oldest pending per state, and list/each in age order */
    "CREATE INDEX items_state_created ON items(state, created_at);"
    /* recovery looks only at leased rows */
    "CREATE INDEX items_lease ON items(lease_until) WHERE lease_owner IS NOT NULL;"
    "CREATE TABLE events ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " item_id INTEGER NOT NULL REFERENCES items(id),"
    " at INTEGER NOT NULL,"
    " from_state TEXT,"
    " to_state TEXT NOT NULL,"
    " event TEXT NOT NULL,"
    " detail TEXT,"
    " actor TEXT NOT NULL);"
    "CREATE INDEX events_item ON events(item_id, id);"
    "CREATE TABLE evidence ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " item_id INTEGER NOT NULL REFERENCES items(id),"
    " at INTEGER NOT NULL,"
    " step TEXT NOT NULL,"
    " method TEXT,"
    " url TEXT,"
    " http_status INTEGER NOT NULL DEFAULT 0,"
    " elapsed_ms INTEGER NOT NULL DEFAULT 0,"
    " transport TEXT,"
    " rule TEXT,"
    " outcome TEXT,"
    " excerpt TEXT);"
    "CREATE INDEX evidence_item ON evidence(item_id, id);"
    "CREATE TRIGGER events_no_update BEFORE UPDATE ON events"
    " BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;"
    "CREATE TRIGGER events_no_delete BEFORE DELETE ON events"
    " BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;"
    "CREATE TRIGGER evidence_no_update BEFORE UPDATE ON evidence"
    " BEGIN SELECT RAISE(ABORT, 'evidence is append-only'); END;"
    "CREATE TRIGGER evidence_no_delete BEFORE DELETE ON evidence"
    " BEGIN SELECT RAISE(ABORT, 'evidence is append-only'); END;";

/*
 * A version-1 queue (wall-clock stamps only) is brought forward: its rows belong to no boot,
 * so the first write re-stamps them (due now, leases expired, the settle delay counted again
 * for every item that ever posted), and settle_at keeps when its ambiguity began.
 */
static void test_store_migrates_a_version_1_queue(void **state)
{
    struct fx *f = *state;
    char path[160];
    snprintf(path, sizeof(path), "%s/v1.db", f->dir);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, v1_schema, NULL, NULL, NULL), SQLITE_OK);
    char sql[1024];
    /* a reconciling item leased by a runner of the old version, posted at T0 + 10 and
     * ambiguous since T0 + 40; a completed one holding D-1 */
    snprintf(sql, sizeof(sql),
             "INSERT INTO items (key, fingerprint, payload, state, posts, next_at, last_post_at,"
             " lease_owner, lease_until, source, vendor_id, invoice_number, doc_type, issue_date,"
             " currency, exponent, total, created_at, updated_at) VALUES"
             " ('AP1-OLD1', 'f1', '{}', 'reconciling', 1, %lld, %lld, 'old-runner', %lld, 's',"
             " 'V1', 'I1', 'invoice', '2024-01-31', 'EUR', 2, 100, %lld, %lld),"
             " ('AP1-OLD2', 'f2', '{}', 'completed', 1, %lld, %lld, NULL, 0, 's', 'V1', 'I2',"
             " 'invoice', '2024-01-31', 'EUR', 2, 100, %lld, %lld);"
             "UPDATE items SET erp_doc = 'D-1' WHERE key = 'AP1-OLD2';"
             "INSERT INTO events (item_id, at, from_state, to_state, event, actor) VALUES"
             " (1, %lld, 'posting', 'reconciling', 'unknown', 'runner:old');"
             "INSERT INTO evidence (item_id, at, step, excerpt) VALUES (1, 7, 'post', 'timed out'),"
             " (2, 8, 'post', 'booked');"
             "PRAGMA user_version = 1;",
             (long long)(T0 + 9999999), (long long)(T0 + 10), (long long)(T0 + 9999999),
             (long long)T0, (long long)T0, (long long)T0, (long long)(T0 + 10), (long long)T0,
             (long long)T0, (long long)(T0 + 40));
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);

    struct store *st = NULL;
    assert_int_equal(store_open(path, &st, f->err, sizeof(f->err)), APBOT_OK);
    int v = 0;
    assert_int_equal(store_schema_version(st, &v, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(v, 4);
    /* 3 -> 4 chained the old history once, in id order: it verifies, and its head is the
     * old event. */
    struct store_audit_result ar;
    assert_int_equal(store_audit_verify(st, NULL, &ar, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(ar.kind, STORE_AUDIT_INTACT);
    assert_int_equal(ar.events, 1);
    assert_int_equal(ar.last_good.event_id, 1);
    /* 2 -> 3 rebuilt events and evidence without AUTOINCREMENT: every row kept with its id,
     * still append-only, and no sequence row left behind. */
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT (SELECT group_concat(id || ':' || item_id || ':' ||"
                                        " to_state, ',') FROM events),"
                                        " (SELECT group_concat(id || ':' || excerpt, ',') FROM"
                                        " evidence), (SELECT count(*) FROM sqlite_sequence WHERE"
                                        " name IN ('events', 'evidence'))",
                                        -1, &q, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(q, 0), "1:1:reconciling");
    assert_string_equal((const char *)sqlite3_column_text(q, 1), "1:timed out,2:booked");
    assert_int_equal(sqlite3_column_int(q, 2), 0);
    sqlite3_finalize(q);
    assert_int_not_equal(sqlite3_exec(db, "DELETE FROM events", NULL, NULL, NULL), SQLITE_OK);
    assert_int_not_equal(sqlite3_exec(db, "UPDATE evidence SET step = 'x'", NULL, NULL, NULL),
                         SQLITE_OK);
    assert_int_not_equal(sqlite3_exec(db, "DELETE FROM evidence", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    struct store_item it;
    assert_int_equal(store_get(st, 1, &it, f->err, sizeof(f->err)), APBOT_OK);
    assert_string_equal(it.clock_boot, "");
    assert_true(it.has_settle);
    assert_int_equal(it.settle_at, T0 + 40);
    assert_false(store_settled(&it, AT(T0 + 9999999), 60000)); /* belongs to no boot */
    store_item_done(&it);
    /* First sight under boot A: due now (the old lease counts as expired) */
    struct store_item c;
    assert_int_equal(
        store_claim(st, "new-runner", AT(T0 + 100), 30000, &f->claimed, &c, f->err, sizeof(f->err)),
        APBOT_OK);
    assert_int_equal(c.id, 1);
    assert_string_equal(c.clock_boot, BOOT_A);
    assert_int_equal(c.settle_mono, M0 + 100);
    assert_false(store_settled(&c, AT(T0 + 100 + 59999), 60000));
    assert_true(store_settled(&c, AT(T0 + 100 + 60000), 60000));
    store_item_done(&c);
    /* The old duplicate-prone document still counts for one document, one item. */
    assert_int_equal(store_get(st, 2, &it, f->err, sizeof(f->err)), APBOT_OK);
    assert_string_equal(it.erp_doc, "D-1");
    store_item_done(&it);
    struct machine_step step;
    struct machine_counters cnt = {.posts = 1, .settled = true};
    assert_int_equal(machine_next(MACHINE_RECONCILING, MACHINE_EV_FOUND, &cnt, &f->pol, &step),
                     APBOT_OK);
    struct store_change ch = {
        .from = MACHINE_RECONCILING, .event = MACHINE_EV_FOUND, .step = &step, .erp_doc = "D-1"};
    int64_t holder = 0;
    assert_int_equal(
        store_apply(st, 1, "new-runner", &ch, AT(T0 + 200), &holder, f->err, sizeof(f->err)),
        APBOT_E_CONFLICT);
    assert_int_equal(holder, 2);
    struct store_evidence ev = {.step = "lookup", .method = "GET", .url = "/x"};
    assert_int_equal(store_add_evidence(st, 1, &ev, AT(T0 + 300), f->err, sizeof(f->err)),
                     APBOT_OK);
    /* The events appended since go on from the migrated chain. */
    ch.erp_doc = "D-3";
    assert_int_equal(
        store_apply(st, 1, "new-runner", &ch, AT(T0 + 400), &holder, f->err, sizeof(f->err)),
        APBOT_OK);
    assert_int_equal(store_audit_verify(st, NULL, &ar, f->err, sizeof(f->err)), APBOT_OK);
    assert_int_equal(ar.kind, STORE_AUDIT_INTACT);
    assert_int_equal(ar.events, 2);
    assert_int_equal(ar.last_good.event_id, 2);
    store_close(st);
    /* New rows continue after the migrated ones. */
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT group_concat(id || ':' || step, ',') FROM"
                                        " evidence",
                                        -1, &q, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(q, 0), "1:post,2:post,3:lookup");
    sqlite3_finalize(q);
    sqlite3_close(db);
    const char *suffix[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(sql, sizeof(sql), "%s%s", path, suffix[i]);
        unlink(sql);
    }
}

int main(void)
{
    /* One timeline of fake clock readings for both backends (PostgreSQL would read its own). */
    store_test_trust_caller_clock(true);
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
#define P(fn) cmocka_unit_test_setup_teardown(fn, fx_setup_pg, fx_teardown)
#define BOTH(X)                                                                                    \
    X(test_store_migrates_fresh_and_reopens), X(test_store_busy_and_bad_path),                     \
        X(test_store_enqueue_queued_already_conflict), X(test_store_enqueue_batches),              \
        X(test_store_enqueue_many), X(test_store_enqueue_invoice),                                 \
        X(test_store_claim_order_and_due), X(test_store_claim_given_item),                         \
        X(test_store_claim_two_connections), X(test_store_claim_forked_processes),                 \
        X(test_store_apply_checks_state_and_lease), X(test_store_apply_get_returns_the_row),       \
        X(test_store_apply_claim), X(test_store_apply_claim_failed_claim),                         \
        X(test_store_operator_resolution), X(test_store_unknown_state_is_left_alone),              \
        X(test_store_evidence_round_trip), X(test_store_durability),                               \
        X(test_store_recover_after_crash), X(test_store_counts_and_each),                          \
        X(test_store_final_sums), X(test_store_settle_runs_on_mono_not_wall),                      \
        X(test_store_requeue_keeps_the_settle_base), X(test_store_another_boot_restamps),          \
        X(test_store_rows_of_any_boot_stay_claimable), X(test_store_one_document_one_item),        \
        X(test_store_expired_and_take_over), X(test_store_late_commits),                           \
        X(test_store_busy_retries_are_bounded), X(test_store_busy_retry_outlasts_a_lock),          \
        X(test_store_busy_two_processes_under_write_pressure),                                     \
        X(test_store_backend_ops_are_checked), X(test_store_audit_chain_detects_tampering),        \
        X(test_store_audit_head_of_a_day)
    const struct CMUnitTest sqlite_tests[] = {
        BOTH(T),
        cmocka_unit_test(test_store_memory_db_opens),
        cmocka_unit_test(test_store_settle_table),
        cmocka_unit_test(test_store_step_delay_table),
        cmocka_unit_test(test_store_due_and_lease_table),
        cmocka_unit_test(test_store_lease_allows_table),
        cmocka_unit_test(test_store_apply_guard_table),
        cmocka_unit_test(test_store_restamp_table),
        cmocka_unit_test(test_store_audit_check_table),
        T(test_store_files_are_private),
        T(test_store_migrates_a_version_1_queue),
        T(test_store_writer_connection_stays_on_its_file),
    };
    const struct CMUnitTest pg_tests[] = {BOTH(P)};
#undef BOTH
#undef P
#undef T
    int failed = cmocka_run_group_tests_name("store on sqlite", sqlite_tests, NULL, NULL);
    if (pgt_server())
        failed += cmocka_run_group_tests_name("store on postgresql", pg_tests, NULL, NULL);
    return failed;
}
