/*
 * store.c - the durable queue in SQLite: items, their append-only audit events and the ERP
 * evidence kept for the morning review.
 *
 * The database runs in WAL mode with synchronous=FULL, foreign keys on and a busy timeout;
 * PRAGMA user_version is the schema version and the migrations below bring any older file
 * forward, in order, each in its own transaction. Every state change is one BEGIN IMMEDIATE
 * transaction that updates the row and appends its event, so a crash leaves either both or
 * neither. Leases: a claimed item carries lease_owner/lease_until; claiming is one write
 * transaction, so two processes can never take the same row. A lease stays its owner's
 * until someone else takes the row over (a claim after expiry, or store_recover), which
 * clears or replaces lease_owner; store_apply only checks that the owner still matches.
 * The store never decides a transition: it persists the machine_step its caller computed,
 * and calls machine_next() itself only for `claimed` (store_claim) and `lease-expired`
 * (store_recover). A state text it cannot map is MACHINE_STATE_INVALID and never acted on.
 * A store handle is for one thread at a time; open one per thread.
 */
#include "apbot/store.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apbot/invoice.h"

#define STORE_BUSY_TIMEOUT_MS 5000
#define STORE_TEXT_MAX 2048 /* url, detail, reason and other short texts are cut here */

/*
 * Forward migrations: entry i brings schema version i to i + 1. Append, never edit a
 * shipped entry. Events and evidence are append-only, enforced by triggers.
 */
static const char *const migrations[] = {
    /* 0 -> 1: the queue, its audit trail and the ERP evidence */
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
    " BEGIN SELECT RAISE(ABORT, 'evidence is append-only'); END;",
};
#define STORE_SCHEMA_VERSION ((int)(sizeof(migrations) / sizeof(migrations[0])))

/* The columns every item query selects, in the order row_to_item() reads them. */
#define ITEM_COLS                                                                                  \
    "id, key, fingerprint, state, posts, cycles, attempts, next_at, last_post_at, created_at,"     \
    " updated_at, lease_owner, lease_until, payload, source, erp_doc, reason, vendor_id,"          \
    " vendor_name, invoice_number, doc_type, issue_date, currency, exponent, total"

/* Cached statements. If you add one: add its SQL in stmt_sql at the same index. */
enum stmt_id {
    Q_BEGIN,
    Q_COMMIT,
    Q_ROLLBACK,
    Q_SAVEPOINT,
    Q_RELEASE,
    Q_ROLLBACK_TO,
    Q_FIND_KEY,
    Q_INSERT_ITEM,
    Q_INSERT_EVENT,
    Q_GET_ID,
    Q_GET_KEY,
    Q_DUE_NEW,
    Q_DUE_RECONCILING,
    Q_CLAIM_UPDATE,
    Q_RENEW,
    Q_APPLY_READ,
    Q_APPLY_UPDATE,
    Q_INSERT_EVIDENCE,
    Q_EXPIRED,
    Q_RECOVER_UPDATE,
    Q_COUNTS,
    Q_OLDEST_PENDING,
    Q_NEXT_DUE,
    Q__COUNT
};

static const char *const stmt_sql[] = {
    [Q_BEGIN] = "BEGIN IMMEDIATE",
    [Q_COMMIT] = "COMMIT",
    [Q_ROLLBACK] = "ROLLBACK",
    [Q_SAVEPOINT] = "SAVEPOINT store_op",
    [Q_RELEASE] = "RELEASE store_op",
    [Q_ROLLBACK_TO] = "ROLLBACK TO store_op",
    [Q_FIND_KEY] = "SELECT id, fingerprint, source, state FROM items WHERE key = ?1",
    [Q_INSERT_ITEM] =
        "INSERT INTO items (key, fingerprint, payload, state, next_at, source, vendor_id,"
        " vendor_name, invoice_number, doc_type, issue_date, currency, exponent, total,"
        " created_at, updated_at)"
        " VALUES (?1, ?2, ?3, 'new', ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?4, ?4)",
    [Q_INSERT_EVENT] = "INSERT INTO events (item_id, at, from_state, to_state, event, detail,"
                       " actor) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [Q_GET_ID] = "SELECT " ITEM_COLS " FROM items WHERE id = ?1",
    [Q_GET_KEY] = "SELECT " ITEM_COLS " FROM items WHERE key = ?1",
    /* New items carry no lease (claiming moves them on), so the first due row is the one. */
    [Q_DUE_NEW] = "SELECT id, next_at FROM items WHERE state = 'new' AND next_at <= ?1"
                  " AND (lease_owner IS NULL OR lease_until <= ?1) ORDER BY next_at, id LIMIT 1",
    [Q_DUE_RECONCILING] =
        "SELECT id, next_at FROM items WHERE state = 'reconciling' AND next_at <= ?1"
        " AND (lease_owner IS NULL OR lease_until <= ?1) ORDER BY next_at, id LIMIT 1",
    [Q_CLAIM_UPDATE] = "UPDATE items SET state = ?2, posts = ?3, cycles = ?4, attempts = ?5,"
                       " lease_owner = ?6, lease_until = ?7, updated_at = ?8 WHERE id = ?1",
    [Q_RENEW] = "UPDATE items SET lease_until = ?3 WHERE id = ?1 AND lease_owner = ?2",
    [Q_APPLY_READ] = "SELECT state, posts, cycles, attempts, lease_owner, lease_until"
                     " FROM items WHERE id = ?1",
    [Q_APPLY_UPDATE] =
        "UPDATE items SET state = ?2, posts = ?3, cycles = ?4, attempts = ?5, next_at = ?6,"
        " erp_doc = COALESCE(?7, erp_doc),"
        " reason = CASE WHEN ?8 IS NULL THEN reason WHEN ?8 = '' THEN NULL ELSE ?8 END,"
        " last_post_at = CASE WHEN ?9 THEN ?12 ELSE last_post_at END,"
        " lease_owner = ?10, lease_until = ?11, updated_at = ?12 WHERE id = ?1",
    [Q_INSERT_EVIDENCE] =
        "INSERT INTO evidence (item_id, at, step, method, url, http_status, elapsed_ms,"
        " transport, rule, outcome, excerpt) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    [Q_EXPIRED] = "SELECT id FROM items WHERE lease_owner IS NOT NULL AND lease_until <= ?1"
                  " ORDER BY id",
    [Q_RECOVER_UPDATE] = "UPDATE items SET state = ?2, posts = ?3, cycles = ?4, attempts = ?5,"
                         " next_at = ?6, lease_owner = NULL, lease_until = 0, updated_at = ?7"
                         " WHERE id = ?1",
    [Q_COUNTS] = "SELECT state, COUNT(*) FROM items GROUP BY state",
    /* One index probe per pending state instead of a scan. */
    [Q_OLDEST_PENDING] =
        "SELECT MIN(m) FROM ("
        " SELECT MIN(created_at) AS m FROM items WHERE state = 'new'"
        " UNION ALL SELECT MIN(created_at) FROM items WHERE state = 'checking'"
        " UNION ALL SELECT MIN(created_at) FROM items WHERE state = 'posting'"
        " UNION ALL SELECT MIN(created_at) FROM items WHERE state = 'reconciling')",
    [Q_NEXT_DUE] = "SELECT MIN(m) FROM ("
                   " SELECT MIN(next_at) AS m FROM items WHERE state = 'new'"
                   " UNION ALL SELECT MIN(next_at) FROM items WHERE state = 'reconciling')",
};
_Static_assert(sizeof(stmt_sql) / sizeof(stmt_sql[0]) == Q__COUNT, "every statement needs SQL");

struct store {
    sqlite3 *db;
    sqlite3_stmt *stmt[Q__COUNT]; /* prepared on first use, finalised by store_close */
    bool in_batch;                /* between store_begin and store_commit/rollback */
};

int64_t store_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Maps a SQLite result to ours: busy/locked is "retry later", the rest a database error. */
static int db_rc(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_DONE:
    case SQLITE_ROW:
        return APBOT_OK;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return APBOT_E_BUSY;
    default:
        return APBOT_E_DB;
    }
}

/* Fills err from the connection's last error; returns the mapped code. */
static int db_fail(struct store *st, int rc, char *err, size_t errlen, const char *what)
{
    return apbot_fail(err, errlen, db_rc(rc), "store: %s: %s", what,
                      st && st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc));
}

/* The cached statement `id`, reset and unbound, or NULL with err filled. */
static sqlite3_stmt *stmt_get(struct store *st, enum stmt_id id, char *err, size_t errlen)
{
    if (!st->stmt[id]) {
        int rc = sqlite3_prepare_v3(st->db, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT,
                                    &st->stmt[id], NULL);
        if (rc != SQLITE_OK) {
            (void)db_fail(st, rc, err, errlen, "prepare");
            return NULL;
        }
    }
    return st->stmt[id];
}

/* Resets a statement after use so it releases its read snapshot. */
static void stmt_done(sqlite3_stmt *s)
{
    if (s) {
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
    }
}

/* Runs a cached statement that returns no rows. */
static int stmt_exec(struct store *st, enum stmt_id id, char *err, size_t errlen)
{
    sqlite3_stmt *s = stmt_get(st, id, err, errlen);
    if (!s)
        return APBOT_E_DB;
    int rc = sqlite3_step(s);
    stmt_done(s);
    if (rc != SQLITE_DONE)
        return db_fail(st, rc, err, errlen, stmt_sql[id]);
    return APBOT_OK;
}

static int bind_text(sqlite3_stmt *s, int i, const char *v)
{
    if (!v)
        return sqlite3_bind_null(s, i);
    return sqlite3_bind_text(s, i, v, -1, SQLITE_TRANSIENT);
}

/*
 * Binds text cut to at most max bytes, never inside a UTF-8 sequence: excerpts of untrusted
 * pages and free-text details stay bounded in the database.
 */
static int bind_text_max(sqlite3_stmt *s, int i, const char *v, size_t max)
{
    if (!v)
        return sqlite3_bind_null(s, i);
    size_t n = strnlen(v, max + 1);
    if (n > max) {
        n = max;
        while (n > 0 && ((unsigned char)v[n] & 0xC0) == 0x80)
            n--;
    }
    return sqlite3_bind_text(s, i, v, (int)n, SQLITE_TRANSIENT);
}

static char *col_dup(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    if (!t)
        return NULL;
    char *d = strdup((const char *)t);
    if (!d)
        abort(); /* out-of-memory policy: abort; the queue is durable */
    return d;
}

static void col_copy(sqlite3_stmt *s, int i, char *buf, size_t len)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    snprintf(buf, len, "%s", t ? (const char *)t : "");
}

static enum machine_state col_state(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    return machine_state_from_name((const char *)t);
}

static int col_int(sqlite3_stmt *s, int i)
{
    sqlite3_int64 v = sqlite3_column_int64(s, i);
    return v < 0 ? 0 : v > 1000000 ? 1000000 : (int)v;
}

void store_item_done(struct store_item *item)
{
    if (!item)
        return;
    free(item->lease_owner);
    free(item->payload);
    free(item->source);
    free(item->erp_doc);
    free(item->reason);
    free(item->vendor_id);
    free(item->vendor_name);
    free(item->invoice_number);
    item->lease_owner = item->payload = item->source = item->erp_doc = item->reason = NULL;
    item->vendor_id = item->vendor_name = item->invoice_number = NULL;
}

/* Reads a row selected with ITEM_COLS into *it (strings heap-owned). */
static void row_to_item(sqlite3_stmt *s, struct store_item *it)
{
    memset(it, 0, sizeof(*it));
    it->id = sqlite3_column_int64(s, 0);
    col_copy(s, 1, it->key, sizeof(it->key));
    col_copy(s, 2, it->fingerprint, sizeof(it->fingerprint));
    it->state = col_state(s, 3);
    it->counters.posts = col_int(s, 4);
    it->counters.cycles = col_int(s, 5);
    it->counters.attempts = col_int(s, 6);
    it->next_at = sqlite3_column_int64(s, 7);
    it->last_post_at = sqlite3_column_int64(s, 8);
    it->created_at = sqlite3_column_int64(s, 9);
    it->updated_at = sqlite3_column_int64(s, 10);
    it->lease_owner = col_dup(s, 11);
    it->lease_until = sqlite3_column_int64(s, 12);
    it->payload = col_dup(s, 13);
    it->source = col_dup(s, 14);
    it->erp_doc = col_dup(s, 15);
    it->reason = col_dup(s, 16);
    it->vendor_id = col_dup(s, 17);
    it->vendor_name = col_dup(s, 18);
    it->invoice_number = col_dup(s, 19);
    col_copy(s, 20, it->doc_type, sizeof(it->doc_type));
    col_copy(s, 21, it->issue_date, sizeof(it->issue_date));
    col_copy(s, 22, it->currency, sizeof(it->currency));
    it->exponent = sqlite3_column_int(s, 23);
    it->total = sqlite3_column_int64(s, 24);
}

/*
 * Write transactions: BEGIN IMMEDIATE takes the write lock up front (so the busy timeout
 * applies and no read-to-write upgrade can fail half-way); inside a batch a savepoint keeps
 * one operation all-or-nothing without ending the batch.
 */
static int tx_begin(struct store *st, char *err, size_t errlen)
{
    return stmt_exec(st, st->in_batch ? Q_SAVEPOINT : Q_BEGIN, err, errlen);
}

static int tx_commit(struct store *st, char *err, size_t errlen)
{
    return stmt_exec(st, st->in_batch ? Q_RELEASE : Q_COMMIT, err, errlen);
}

static void tx_rollback(struct store *st)
{
    if (st->in_batch) {
        (void)stmt_exec(st, Q_ROLLBACK_TO, NULL, 0);
        (void)stmt_exec(st, Q_RELEASE, NULL, 0);
    } else if (!sqlite3_get_autocommit(st->db)) {
        (void)stmt_exec(st, Q_ROLLBACK, NULL, 0);
    }
}

/*
 * Ends what tx_begin opened, given the operation's result r: commits when r is APBOT_OK, rolls
 * back when it is not or when the commit fails. Returns r, or the commit's error.
 */
static int tx_end(struct store *st, int r, char *err, size_t errlen)
{
    if (r == APBOT_OK)
        r = tx_commit(st, err, errlen);
    if (r)
        tx_rollback(st);
    return r;
}

static int exec_sql(struct store *st, const char *sql, char *err, size_t errlen)
{
    char *msg = NULL;
    int rc = sqlite3_exec(st->db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        int r = apbot_fail(err, errlen, db_rc(rc), "store: %s", msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        return r;
    }
    return APBOT_OK;
}

static int user_version(struct store *st, int *ret, char *err, size_t errlen)
{
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(st->db, "PRAGMA user_version", -1, &s, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) {
        int r = db_fail(st, rc, err, errlen, "reading the schema version");
        sqlite3_finalize(s);
        return r;
    }
    *ret = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    return APBOT_OK;
}

/* Brings the schema forward, one migration per transaction; safe against a racing opener. */
static int migrate(struct store *st, char *err, size_t errlen)
{
    int v = 0;
    int rc = user_version(st, &v, err, errlen);
    if (rc)
        return rc;
    if (v > STORE_SCHEMA_VERSION)
        return apbot_fail(err, errlen, APBOT_E_DB,
                          "store: database schema version %d is newer than this apbot (%d)", v,
                          STORE_SCHEMA_VERSION);
    while (v < STORE_SCHEMA_VERSION) {
        rc = exec_sql(st, "BEGIN IMMEDIATE", err, errlen);
        if (rc)
            return rc;
        /* Another process may have migrated while we waited for the lock. */
        rc = user_version(st, &v, err, errlen);
        if (rc == APBOT_OK && v < STORE_SCHEMA_VERSION) {
            char pragma[64];
            snprintf(pragma, sizeof(pragma), "PRAGMA user_version = %d", v + 1);
            rc = exec_sql(st, migrations[v], err, errlen);
            if (rc == APBOT_OK)
                rc = exec_sql(st, pragma, err, errlen);
            if (rc == APBOT_OK)
                v++;
        }
        if (rc == APBOT_OK)
            rc = exec_sql(st, "COMMIT", err, errlen);
        if (rc) {
            (void)exec_sql(st, "ROLLBACK", NULL, 0);
            return rc;
        }
    }
    return APBOT_OK;
}

int store_open(const char *path, struct store **ret, char *err, size_t errlen)
{
    if (!path || !ret)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: no database path");
    struct store *st = calloc(1, sizeof(*st));
    if (!st)
        abort();
    int r;
    int rc = sqlite3_open_v2(
        path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        r = apbot_fail(err, errlen, db_rc(rc) == APBOT_E_BUSY ? APBOT_E_BUSY : APBOT_E_IO,
                       "store: cannot open %s: %s", path,
                       st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc));
        goto fail;
    }
    sqlite3_busy_timeout(st->db, STORE_BUSY_TIMEOUT_MS);
    /* journal_mode answers a row ("wal", or "memory" for :memory:); exec ignores it. */
    r = exec_sql(st,
                 "PRAGMA journal_mode = WAL;"
                 "PRAGMA synchronous = FULL;"
                 "PRAGMA foreign_keys = ON;",
                 err, errlen);
    if (r)
        goto fail;
    r = migrate(st, err, errlen);
    if (r)
        goto fail;
    *ret = st;
    return APBOT_OK;
fail:
    store_close(st);
    return r;
}

void store_close(struct store *st)
{
    if (!st)
        return;
    for (int i = 0; i < Q__COUNT; i++)
        sqlite3_finalize(st->stmt[i]);
    sqlite3_close(st->db);
    free(st);
}

int store_begin(struct store *st, char *err, size_t errlen)
{
    if (st->in_batch)
        return apbot_fail(err, errlen, APBOT_E_STATE, "store: a batch is already open");
    int rc = stmt_exec(st, Q_BEGIN, err, errlen);
    if (rc == APBOT_OK)
        st->in_batch = true;
    return rc;
}

int store_commit(struct store *st, char *err, size_t errlen)
{
    if (!st->in_batch)
        return apbot_fail(err, errlen, APBOT_E_STATE, "store: no batch is open");
    int rc = stmt_exec(st, Q_COMMIT, err, errlen);
    /* A failed COMMIT (busy) leaves the transaction open: the caller retries or rolls back. */
    if (rc == APBOT_OK)
        st->in_batch = false;
    return rc;
}

void store_rollback(struct store *st)
{
    if (!st)
        return;
    if (!sqlite3_get_autocommit(st->db))
        (void)stmt_exec(st, Q_ROLLBACK, NULL, 0);
    st->in_batch = false;
}

/* Appends one audit event; part of the caller's transaction. */
static int add_event(struct store *st, int64_t item_id, int64_t at, const char *from,
                     const char *to, const char *event, const char *detail, const char *actor,
                     char *err, size_t errlen)
{
    sqlite3_stmt *s = stmt_get(st, Q_INSERT_EVENT, err, errlen);
    if (!s)
        return APBOT_E_DB;
    sqlite3_bind_int64(s, 1, item_id);
    sqlite3_bind_int64(s, 2, at);
    bind_text(s, 3, from);
    bind_text(s, 4, to);
    bind_text(s, 5, event);
    bind_text_max(s, 6, detail, STORE_TEXT_MAX);
    bind_text(s, 7, actor ? actor : "unknown");
    int rc = sqlite3_step(s);
    stmt_done(s);
    if (rc != SQLITE_DONE)
        return db_fail(st, rc, err, errlen, "appending an event");
    return APBOT_OK;
}

int store_enqueue_raw(struct store *st, const struct store_new_item *ni, int64_t now,
                      enum store_enqueue_result *ret_result, int64_t *ret_id, char *err,
                      size_t errlen)
{
    if (!st || !ni || !ni->key || !ni->fingerprint || !ni->payload || !ni->vendor_id ||
        !ni->invoice_number || !ni->doc_type || !ni->issue_date || !ni->currency)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: incomplete item");
    const char *source = ni->source ? ni->source : "";
    enum store_enqueue_result result = STORE_ENQ_QUEUED;
    int64_t id = 0;
    int r = tx_begin(st, err, errlen);
    if (r)
        return r;

    sqlite3_stmt *s = stmt_get(st, Q_FIND_KEY, err, errlen);
    if (!s) {
        r = APBOT_E_DB;
        goto out;
    }
    bind_text(s, 1, ni->key);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        id = sqlite3_column_int64(s, 0);
        const char *fp = (const char *)sqlite3_column_text(s, 1);
        if (fp && strcmp(fp, ni->fingerprint) == 0) {
            result = STORE_ENQ_ALREADY;
        } else {
            const char *src = (const char *)sqlite3_column_text(s, 2);
            const char *state = (const char *)sqlite3_column_text(s, 3);
            result = STORE_ENQ_CONFLICT;
            apbot_fail(err, errlen, APBOT_E_CONFLICT,
                       "same identity as queued item #%" PRId64 " (%s, from %s, state %s) "
                       "but different content; not queued",
                       id, ni->key, src ? src : "?", state ? state : "?");
        }
        stmt_done(s);
        goto out;
    }
    stmt_done(s);
    if (rc != SQLITE_DONE) {
        r = db_fail(st, rc, err, errlen, "looking up the key");
        goto out;
    }

    s = stmt_get(st, Q_INSERT_ITEM, err, errlen);
    if (!s) {
        r = APBOT_E_DB;
        goto out;
    }
    bind_text(s, 1, ni->key);
    bind_text(s, 2, ni->fingerprint);
    bind_text(s, 3, ni->payload);
    sqlite3_bind_int64(s, 4, now);
    bind_text_max(s, 5, source, STORE_TEXT_MAX);
    bind_text(s, 6, ni->vendor_id);
    bind_text(s, 7, ni->vendor_name);
    bind_text(s, 8, ni->invoice_number);
    bind_text(s, 9, ni->doc_type);
    bind_text(s, 10, ni->issue_date);
    bind_text(s, 11, ni->currency);
    sqlite3_bind_int(s, 12, ni->exponent);
    sqlite3_bind_int64(s, 13, ni->total);
    rc = sqlite3_step(s);
    stmt_done(s);
    if (rc != SQLITE_DONE) {
        r = db_fail(st, rc, err, errlen, "inserting the item");
        goto out;
    }
    id = sqlite3_last_insert_rowid(st->db);
    r = add_event(st, id, now, NULL, machine_state_name(MACHINE_NEW), "enqueued", source, "enqueue",
                  err, errlen);
out:
    r = tx_end(st, r, err, errlen);
    if (r)
        return r;
    *ret_result = result;
    *ret_id = id;
    return APBOT_OK;
}

int store_enqueue(struct store *st, const struct invoice *inv, const char *source, int64_t now,
                  enum store_enqueue_result *ret_result, int64_t *ret_id, char *err, size_t errlen)
{
    if (!st || !inv)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: no invoice");
    char key[INVOICE_KEY_LEN + 1];
    char fp[INVOICE_FP_LEN + 1];
    int r = invoice_identity_key(inv, key);
    if (r)
        return apbot_fail(err, errlen, r, "store: cannot compute the identity key");
    r = invoice_fingerprint(inv, fp);
    if (r)
        return apbot_fail(err, errlen, r, "store: cannot compute the fingerprint");
    char *payload = invoice_to_json(inv);
    if (!payload)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: invoice has no canonical form");
    struct store_new_item ni = {
        .key = key,
        .fingerprint = fp,
        .payload = payload,
        .source = source,
        .vendor_id = inv->vendor_id,
        .vendor_name = inv->vendor_name,
        .invoice_number = inv->invoice_number,
        .doc_type = invoice_doc_type_name(inv->doc_type),
        .issue_date = inv->issue_date,
        .currency = inv->currency,
        .exponent = inv->exponent,
        .total = inv->payable,
    };
    r = store_enqueue_raw(st, &ni, now, ret_result, ret_id, err, errlen);
    free(payload);
    return r;
}

/* Reads one item by a cached ITEM_COLS query; APBOT_E_NOTFOUND if none. */
static int get_item(struct store *st, enum stmt_id q, int64_t id, const char *key,
                    struct store_item *ret, char *err, size_t errlen)
{
    sqlite3_stmt *s = stmt_get(st, q, err, errlen);
    if (!s)
        return APBOT_E_DB;
    if (key)
        bind_text(s, 1, key);
    else
        sqlite3_bind_int64(s, 1, id);
    int rc = sqlite3_step(s);
    int r = APBOT_OK;
    if (rc == SQLITE_ROW)
        row_to_item(s, ret);
    else if (rc == SQLITE_DONE)
        r = key ? apbot_fail(err, errlen, APBOT_E_NOTFOUND, "no item with key %s", key)
                : apbot_fail(err, errlen, APBOT_E_NOTFOUND, "no item #%" PRId64, id);
    else
        r = db_fail(st, rc, err, errlen, "reading an item");
    stmt_done(s);
    return r;
}

int store_get(struct store *st, int64_t id, struct store_item *ret, char *err, size_t errlen)
{
    return get_item(st, Q_GET_ID, id, NULL, ret, err, errlen);
}

int store_get_by_key(struct store *st, const char *key, struct store_item *ret, char *err,
                     size_t errlen)
{
    if (!key)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: no key");
    return get_item(st, Q_GET_KEY, 0, key, ret, err, errlen);
}

/* First due row of one state: *ret_id 0 when none. */
static int first_due(struct store *st, enum stmt_id q, int64_t now, int64_t *ret_id,
                     int64_t *ret_next, char *err, size_t errlen)
{
    sqlite3_stmt *s = stmt_get(st, q, err, errlen);
    if (!s)
        return APBOT_E_DB;
    sqlite3_bind_int64(s, 1, now);
    int rc = sqlite3_step(s);
    int r = APBOT_OK;
    *ret_id = 0;
    if (rc == SQLITE_ROW) {
        *ret_id = sqlite3_column_int64(s, 0);
        *ret_next = sqlite3_column_int64(s, 1);
    } else if (rc != SQLITE_DONE) {
        r = db_fail(st, rc, err, errlen, "looking for due items");
    }
    stmt_done(s);
    return r;
}

int store_claim(struct store *st, const char *owner, int64_t now, int64_t lease_ms,
                const struct machine_policy *policy, struct store_item *ret, char *err,
                size_t errlen)
{
    if (!st || !owner || !*owner || !policy || !ret || lease_ms <= 0)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: claim needs owner, lease, policy");
    struct store_item it;
    bool have_item = false;
    int r = tx_begin(st, err, errlen);
    if (r)
        return r;

    /*
     * A due reconciliation goes before any new item: an ambiguous outcome is settled while
     * its evidence is fresh, and a month-end backlog of new items must not hold it back for
     * minutes. Reconciling items reschedule themselves (settle, backoff), so new items are
     * not starved. Each query uses the claim index.
     */
    int64_t id_new = 0, next_new = 0, id_rec = 0, next_rec = 0;
    r = first_due(st, Q_DUE_RECONCILING, now, &id_rec, &next_rec, err, errlen);
    if (r == APBOT_OK && !id_rec)
        r = first_due(st, Q_DUE_NEW, now, &id_new, &next_new, err, errlen);
    if (r)
        goto out;
    int64_t id = id_rec ? id_rec : id_new;
    if (!id) {
        r = apbot_fail(err, errlen, APBOT_E_NOTFOUND, "nothing is due");
        goto out;
    }

    r = get_item(st, Q_GET_ID, id, NULL, &it, err, errlen);
    if (r)
        goto out;
    have_item = true;
    struct machine_step step = {.next = it.state, .counters = it.counters, .why = "claimed"};
    if (it.state == MACHINE_NEW) {
        r = machine_next(it.state, MACHINE_EV_CLAIMED, &it.counters, policy, &step);
        if (r) {
            r = apbot_fail(err, errlen, r, "store: item #%" PRId64 " cannot be claimed", id);
            goto out;
        }
    }
    char actor[160];
    snprintf(actor, sizeof(actor), "runner:%s", owner);

    sqlite3_stmt *s = stmt_get(st, Q_CLAIM_UPDATE, err, errlen);
    if (!s) {
        r = APBOT_E_DB;
        goto out;
    }
    sqlite3_bind_int64(s, 1, id);
    bind_text(s, 2, machine_state_name(step.next));
    sqlite3_bind_int(s, 3, step.counters.posts);
    sqlite3_bind_int(s, 4, step.counters.cycles);
    sqlite3_bind_int(s, 5, step.counters.attempts);
    bind_text(s, 6, owner);
    sqlite3_bind_int64(s, 7, now + lease_ms);
    sqlite3_bind_int64(s, 8, now);
    int rc = sqlite3_step(s);
    stmt_done(s);
    if (rc != SQLITE_DONE) {
        r = db_fail(st, rc, err, errlen, "claiming an item");
        goto out;
    }
    if (step.next != it.state)
        r = add_event(st, id, now, machine_state_name(it.state), machine_state_name(step.next),
                      machine_event_name(MACHINE_EV_CLAIMED), step.why, actor, err, errlen);
    if (r)
        goto out;
    /* Hand back what is now in the row. */
    store_item_done(&it);
    have_item = false;
    r = get_item(st, Q_GET_ID, id, NULL, &it, err, errlen);
    if (r == APBOT_OK)
        have_item = true;
out:
    r = tx_end(st, r, err, errlen);
    if (r) {
        if (have_item)
            store_item_done(&it);
        return r;
    }
    *ret = it;
    return APBOT_OK;
}

int store_renew(struct store *st, int64_t id, const char *owner, int64_t now, int64_t lease_ms,
                char *err, size_t errlen)
{
    if (!st || !owner || lease_ms <= 0)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: renew needs owner and lease");
    sqlite3_stmt *s = stmt_get(st, Q_RENEW, err, errlen);
    if (!s)
        return APBOT_E_DB;
    sqlite3_bind_int64(s, 1, id);
    bind_text(s, 2, owner);
    sqlite3_bind_int64(s, 3, now + lease_ms);
    int rc = sqlite3_step(s);
    stmt_done(s);
    if (rc != SQLITE_DONE)
        return db_fail(st, rc, err, errlen, "renewing a lease");
    if (sqlite3_changes(st->db) != 1)
        return apbot_fail(err, errlen, APBOT_E_STATE,
                          "item #%" PRId64 ": lease lost (not held by %s)", id, owner);
    return APBOT_OK;
}

int store_apply(struct store *st, int64_t id, const char *owner, const struct store_change *ch,
                int64_t now, char *err, size_t errlen)
{
    if (!st || !ch || !ch->step || (int)ch->from < 0 || ch->from >= MACHINE_STATE__COUNT ||
        (int)ch->step->next < 0 || ch->step->next >= MACHINE_STATE__COUNT || (int)ch->event < 0 ||
        ch->event >= MACHINE_EVENT__COUNT)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: invalid change");
    int r = tx_begin(st, err, errlen);
    if (r)
        return r;

    sqlite3_stmt *s = stmt_get(st, Q_APPLY_READ, err, errlen);
    if (!s) {
        r = APBOT_E_DB;
        goto out;
    }
    sqlite3_bind_int64(s, 1, id);
    int rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) {
        r = rc == SQLITE_DONE ? apbot_fail(err, errlen, APBOT_E_NOTFOUND, "no item #%" PRId64, id)
                              : db_fail(st, rc, err, errlen, "reading an item");
        stmt_done(s);
        goto out;
    }
    enum machine_state cur = col_state(s, 0);
    const char *cur_name = (const char *)sqlite3_column_text(s, 0);
    const char *lease_owner = (const char *)sqlite3_column_text(s, 4);
    int64_t lease_until = sqlite3_column_int64(s, 5);
    if (cur == MACHINE_STATE_INVALID) {
        r = apbot_fail(err, errlen, APBOT_E_STATE,
                       "item #%" PRId64 " is in unknown state '%s'; not touched", id,
                       cur_name ? cur_name : "");
    } else if (cur != ch->from) {
        r = apbot_fail(err, errlen, APBOT_E_STATE, "item #%" PRId64 " is %s, not %s", id,
                       machine_state_name(cur), machine_state_name(ch->from));
    } else if (owner && (!lease_owner || strcmp(lease_owner, owner) != 0)) {
        r = apbot_fail(err, errlen, APBOT_E_STATE, "item #%" PRId64 ": lease lost (held by %s)", id,
                       lease_owner ? lease_owner : "nobody");
    } else if (!owner && lease_owner && lease_until > now) {
        r = apbot_fail(err, errlen, APBOT_E_STATE,
                       "item #%" PRId64 " is leased by %s; try again when it is released", id,
                       lease_owner);
    }
    int64_t keep_until = lease_until;
    stmt_done(s);
    if (r)
        goto out;

    const struct machine_step *step = ch->step;
    bool keep = owner && ch->keep_lease;
    s = stmt_get(st, Q_APPLY_UPDATE, err, errlen);
    if (!s) {
        r = APBOT_E_DB;
        goto out;
    }
    sqlite3_bind_int64(s, 1, id);
    bind_text(s, 2, machine_state_name(step->next));
    sqlite3_bind_int(s, 3, step->counters.posts);
    sqlite3_bind_int(s, 4, step->counters.cycles);
    sqlite3_bind_int(s, 5, step->counters.attempts);
    sqlite3_bind_int64(s, 6, ch->next_at);
    bind_text_max(s, 7, ch->erp_doc, STORE_TEXT_MAX);
    bind_text_max(s, 8, ch->reason, STORE_TEXT_MAX);
    sqlite3_bind_int(s, 9, step->next == MACHINE_POSTING && cur != MACHINE_POSTING);
    bind_text(s, 10, keep ? owner : NULL);
    sqlite3_bind_int64(s, 11, keep ? keep_until : 0);
    sqlite3_bind_int64(s, 12, now);
    rc = sqlite3_step(s);
    stmt_done(s);
    if (rc != SQLITE_DONE) {
        r = db_fail(st, rc, err, errlen, "updating an item");
        goto out;
    }

    /* The event keeps the machine's reason and the caller's detail together. */
    char detail[STORE_TEXT_MAX];
    if (ch->detail && *ch->detail)
        snprintf(detail, sizeof(detail), "%s: %s", step->why ? step->why : "", ch->detail);
    else
        snprintf(detail, sizeof(detail), "%s", step->why ? step->why : "");
    r = add_event(st, id, now, machine_state_name(cur), machine_state_name(step->next),
                  machine_event_name(ch->event), detail,
                  ch->actor ? ch->actor : (owner ? owner : "operator"), err, errlen);
out:
    return tx_end(st, r, err, errlen);
}

int store_add_evidence(struct store *st, int64_t item_id, const struct store_evidence *ev,
                       int64_t now, char *err, size_t errlen)
{
    if (!st || !ev || !ev->step)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: evidence needs a step");
    sqlite3_stmt *s = stmt_get(st, Q_INSERT_EVIDENCE, err, errlen);
    if (!s)
        return APBOT_E_DB;
    sqlite3_bind_int64(s, 1, item_id);
    sqlite3_bind_int64(s, 2, now);
    bind_text_max(s, 3, ev->step, 64);
    bind_text_max(s, 4, ev->method, 16);
    bind_text_max(s, 5, ev->url, STORE_TEXT_MAX);
    sqlite3_bind_int(s, 6, ev->http_status);
    sqlite3_bind_int64(s, 7, ev->elapsed_ms);
    bind_text_max(s, 8, ev->transport, 512);
    bind_text_max(s, 9, ev->rule, 256);
    bind_text_max(s, 10, ev->outcome, 64);
    bind_text_max(s, 11, ev->excerpt, STORE_EXCERPT_MAX);
    /* A single INSERT is its own transaction (or part of the caller's batch). */
    int rc = sqlite3_step(s);
    stmt_done(s);
    if (rc != SQLITE_DONE)
        return db_fail(st, rc, err, errlen, "adding evidence");
    return APBOT_OK;
}

/* Recovers one item if its lease is still expired; *ret_done says whether it moved. */
static int recover_one(struct store *st, int64_t id, int64_t now, int64_t settle_ms,
                       const struct machine_policy *policy, bool *ret_done, char *err,
                       size_t errlen)
{
    struct store_item it;
    bool have_item = false;
    bool done = false;
    int r = tx_begin(st, err, errlen);
    if (r)
        return r;
    r = get_item(st, Q_GET_ID, id, NULL, &it, err, errlen);
    if (r)
        goto out;
    have_item = true;
    /* Re-check under the write lock: a runner may have renewed or finished meanwhile. */
    if (!it.lease_owner || it.lease_until > now)
        goto out;
    if (it.state == MACHINE_STATE_INVALID)
        goto out; /* unknown state text: never act on it */

    struct machine_step step;
    int mr = machine_next(it.state, MACHINE_EV_LEASE_EXPIRED, &it.counters, policy, &step);
    if (mr == APBOT_E_STATE) {
        /* A leased item in a state without a lease-expired row (e.g. `new`): just drop the
         * stale lease; no transition, so no event. */
        step.next = it.state;
        step.counters = it.counters;
        step.delay = MACHINE_DELAY_NONE;
        step.why = NULL;
    } else if (mr) {
        r = apbot_fail(err, errlen, mr, "store: cannot recover item #%" PRId64, id);
        goto out;
    }
    int64_t next_at = now;
    switch (step.delay) {
    case MACHINE_DELAY_NONE:
    case MACHINE_DELAY_BACKOFF: /* lease-expired never backs off; due at once if it did */
        break;
    case MACHINE_DELAY_SETTLE:
        if (it.last_post_at + settle_ms > next_at)
            next_at = it.last_post_at + settle_ms;
        break;
    }
    if (step.why == NULL)
        next_at = it.next_at;

    sqlite3_stmt *s = stmt_get(st, Q_RECOVER_UPDATE, err, errlen);
    if (!s) {
        r = APBOT_E_DB;
        goto out;
    }
    sqlite3_bind_int64(s, 1, id);
    bind_text(s, 2, machine_state_name(step.next));
    sqlite3_bind_int(s, 3, step.counters.posts);
    sqlite3_bind_int(s, 4, step.counters.cycles);
    sqlite3_bind_int(s, 5, step.counters.attempts);
    sqlite3_bind_int64(s, 6, next_at);
    sqlite3_bind_int64(s, 7, now);
    int rc = sqlite3_step(s);
    stmt_done(s);
    if (rc != SQLITE_DONE) {
        r = db_fail(st, rc, err, errlen, "recovering an item");
        goto out;
    }
    if (step.why) {
        char detail[256];
        snprintf(detail, sizeof(detail), "%s (lease of %s expired)", step.why, it.lease_owner);
        r = add_event(st, id, now, machine_state_name(it.state), machine_state_name(step.next),
                      machine_event_name(MACHINE_EV_LEASE_EXPIRED), detail, "recovery", err,
                      errlen);
    }
    done = r == APBOT_OK;
out:
    if (have_item)
        store_item_done(&it);
    r = tx_end(st, r, err, errlen);
    if (r)
        return r;
    *ret_done = done;
    return APBOT_OK;
}

int store_recover_settle(struct store *st, int64_t now, int64_t settle_ms,
                         const struct machine_policy *policy, int *ret_count, char *err,
                         size_t errlen)
{
    if (!st || !policy || settle_ms < 0)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: recover needs a policy");
    /* Collect first, then one transaction per item, so a huge recovery never holds the
     * write lock for long and each item's move stands on its own. */
    int64_t *ids = NULL;
    size_t n = 0, cap = 0;
    int r = APBOT_OK;
    sqlite3_stmt *s = stmt_get(st, Q_EXPIRED, err, errlen);
    if (!s)
        return APBOT_E_DB;
    sqlite3_bind_int64(s, 1, now);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            ids = realloc(ids, cap * sizeof(*ids));
            if (!ids)
                abort();
        }
        ids[n++] = sqlite3_column_int64(s, 0);
    }
    stmt_done(s);
    if (rc != SQLITE_DONE) {
        r = db_fail(st, rc, err, errlen, "looking for expired leases");
        goto out;
    }
    int count = 0;
    for (size_t i = 0; i < n; i++) {
        bool done = false;
        r = recover_one(st, ids[i], now, settle_ms, policy, &done, err, errlen);
        if (r)
            goto out;
        count += done;
    }
    if (ret_count)
        *ret_count = count;
out:
    free(ids);
    return r;
}

int store_recover(struct store *st, int64_t now, const struct machine_policy *policy,
                  int *ret_count, char *err, size_t errlen)
{
    return store_recover_settle(st, now, 0, policy, ret_count, err, errlen);
}

int store_each(struct store *st, enum machine_state state, store_item_fn fn, void *ctx, char *err,
               size_t errlen)
{
    return store_each_limit(st, state, 0, fn, ctx, err, errlen);
}

int store_each_limit(struct store *st, enum machine_state state, int64_t limit, store_item_fn fn,
                     void *ctx, char *err, size_t errlen)
{
    if (!st || !fn || (int)state < MACHINE_STATE_INVALID || state >= MACHINE_STATE__COUNT)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: bad arguments to store_each");
    /* A private statement, so fn may call back into the store (even store_each). */
    const char *sql = state == MACHINE_STATE_INVALID
                          ? "SELECT " ITEM_COLS " FROM items ORDER BY id LIMIT ?2"
                          : "SELECT " ITEM_COLS " FROM items WHERE state = ?1"
                            " ORDER BY created_at, id LIMIT ?2";
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(st->db, sql, -1, &s, NULL);
    if (rc != SQLITE_OK)
        return db_fail(st, rc, err, errlen, "listing items");
    if (state != MACHINE_STATE_INVALID)
        bind_text(s, 1, machine_state_name(state));
    sqlite3_bind_int64(s, 2, limit > 0 ? limit : -1);
    int r = APBOT_OK;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        struct store_item it;
        row_to_item(s, &it);
        r = fn(ctx, &it);
        store_item_done(&it);
        if (r)
            break;
    }
    if (r == APBOT_OK && rc != SQLITE_DONE)
        r = db_fail(st, rc, err, errlen, "listing items");
    sqlite3_finalize(s);
    return r;
}

int store_each_event(struct store *st, int64_t item_id, store_event_fn fn, void *ctx, char *err,
                     size_t errlen)
{
    if (!st || !fn)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: bad arguments");
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(st->db,
                                "SELECT id, item_id, at, from_state, to_state, event, detail,"
                                " actor FROM events WHERE item_id = ?1 ORDER BY id",
                                -1, &s, NULL);
    if (rc != SQLITE_OK)
        return db_fail(st, rc, err, errlen, "reading events");
    sqlite3_bind_int64(s, 1, item_id);
    int r = APBOT_OK;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        struct store_event_row row = {
            .id = sqlite3_column_int64(s, 0),
            .item_id = sqlite3_column_int64(s, 1),
            .at = sqlite3_column_int64(s, 2),
            .from = (const char *)sqlite3_column_text(s, 3),
            .to = (const char *)sqlite3_column_text(s, 4),
            .event = (const char *)sqlite3_column_text(s, 5),
            .detail = (const char *)sqlite3_column_text(s, 6),
            .actor = (const char *)sqlite3_column_text(s, 7),
        };
        r = fn(ctx, &row);
        if (r)
            break;
    }
    if (r == APBOT_OK && rc != SQLITE_DONE)
        r = db_fail(st, rc, err, errlen, "reading events");
    sqlite3_finalize(s);
    return r;
}

int store_each_evidence(struct store *st, int64_t item_id, store_evidence_fn fn, void *ctx,
                        char *err, size_t errlen)
{
    if (!st || !fn)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: bad arguments");
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(st->db,
                                "SELECT id, item_id, at, step, method, url, http_status,"
                                " elapsed_ms, transport, rule, outcome, excerpt"
                                " FROM evidence WHERE item_id = ?1 ORDER BY id",
                                -1, &s, NULL);
    if (rc != SQLITE_OK)
        return db_fail(st, rc, err, errlen, "reading evidence");
    sqlite3_bind_int64(s, 1, item_id);
    int r = APBOT_OK;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        struct store_evidence_row row = {
            .id = sqlite3_column_int64(s, 0),
            .item_id = sqlite3_column_int64(s, 1),
            .at = sqlite3_column_int64(s, 2),
            .ev =
                {
                    .step = (const char *)sqlite3_column_text(s, 3),
                    .method = (const char *)sqlite3_column_text(s, 4),
                    .url = (const char *)sqlite3_column_text(s, 5),
                    .http_status = sqlite3_column_int(s, 6),
                    .elapsed_ms = sqlite3_column_int64(s, 7),
                    .transport = (const char *)sqlite3_column_text(s, 8),
                    .rule = (const char *)sqlite3_column_text(s, 9),
                    .outcome = (const char *)sqlite3_column_text(s, 10),
                    .excerpt = (const char *)sqlite3_column_text(s, 11),
                },
        };
        r = fn(ctx, &row);
        if (r)
            break;
    }
    if (r == APBOT_OK && rc != SQLITE_DONE)
        r = db_fail(st, rc, err, errlen, "reading evidence");
    sqlite3_finalize(s);
    return r;
}

int store_counts(struct store *st, struct store_counts *ret, char *err, size_t errlen)
{
    if (!st || !ret)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: bad arguments");
    struct store_counts c;
    memset(&c, 0, sizeof(c));
    /* One read transaction so the counts and the oldest age come from one snapshot. */
    int r = exec_sql(st, st->in_batch ? "SAVEPOINT store_read" : "BEGIN", err, errlen);
    if (r)
        return r;
    sqlite3_stmt *s = stmt_get(st, Q_COUNTS, err, errlen);
    if (!s) {
        r = APBOT_E_DB;
        goto out;
    }
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        enum machine_state state = col_state(s, 0);
        int64_t n = sqlite3_column_int64(s, 1);
        if (state != MACHINE_STATE_INVALID)
            c.by_state[state] += n;
        c.total += n; /* rows in a state this version does not know still count */
    }
    stmt_done(s);
    if (rc != SQLITE_DONE) {
        r = db_fail(st, rc, err, errlen, "counting items");
        goto out;
    }
    s = stmt_get(st, Q_OLDEST_PENDING, err, errlen);
    if (!s) {
        r = APBOT_E_DB;
        goto out;
    }
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        c.oldest_pending_at = sqlite3_column_int64(s, 0); /* NULL reads as 0 */
    else
        r = db_fail(st, rc, err, errlen, "finding the oldest pending item");
    stmt_done(s);
out:
    (void)exec_sql(st, st->in_batch ? "RELEASE store_read" : "COMMIT", NULL, 0);
    if (r)
        return r;
    *ret = c;
    return APBOT_OK;
}

int store_next_due(struct store *st, int64_t *ret_at, char *err, size_t errlen)
{
    if (!st || !ret_at)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: bad arguments");
    sqlite3_stmt *s = stmt_get(st, Q_NEXT_DUE, err, errlen);
    if (!s)
        return APBOT_E_DB;
    int rc = sqlite3_step(s);
    int r = APBOT_OK;
    if (rc == SQLITE_ROW)
        *ret_at = sqlite3_column_int64(s, 0);
    else
        r = db_fail(st, rc, err, errlen, "finding the next due item");
    stmt_done(s);
    return r;
}

int store_schema_version(struct store *st, int *ret_version, char *err, size_t errlen)
{
    if (!st || !ret_version)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: bad arguments");
    return user_version(st, ret_version, err, errlen);
}

void store_set_busy_timeout(struct store *st, int ms)
{
    if (st)
        sqlite3_busy_timeout(st->db, ms < 0 ? 0 : ms);
}
