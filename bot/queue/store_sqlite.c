/*
 * store_sqlite.c - the SQLite backend of the queue (store-int.h): items, their append-only
 * audit events and the ERP evidence kept for the morning review, in one file on one host.
 *
 * The database runs in WAL mode with synchronous=FULL, foreign keys on and a busy timeout;
 * PRAGMA user_version is the schema version and the migrations below bring any older file
 * forward, in order, each in its own transaction. Every write is one BEGIN IMMEDIATE
 * transaction (run_write) that a busy database makes retry, whole, a bounded number of
 * times with a jittered pause; a state change updates the row and appends its event, so a
 * crash leaves either both or neither.
 *
 * Clocks: each row keeps its safety stamps (due, lease, settle base) on CLOCK_BOOTTIME
 * under the row's clock_boot; the wall columns are for people. Every row is under the boot
 * store_meta 'clock_boot' names: the first write under another boot re-stamps every row in
 * that same transaction (store_restamp's rule, in SQL), so every query compares mono
 * stamps of one boot only.
 *
 * Leases: a claimed item carries lease_owner and its expiry; claiming is one write
 * transaction, so two processes can never take the same row. A lease stays its owner's
 * until someone else takes the row over (a claim after expiry, or a take-over change),
 * which clears or replaces lease_owner. The store never decides a transition: it persists
 * the machine_step its caller computed (store_claim takes the claimed step; store_recover
 * is a convenience over store_each_expired + store_apply that calls machine_next itself). A
 * state text it cannot map is MACHINE_STATE_INVALID and never acted on. A store handle is
 * for one thread at a time; open one per thread.
 */
#include "apbot/store.h"
#include "store-int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "apbot/buf.h"
#include "apbot/invoice.h"
#include "apbot/mem.h"

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
    /* 1 -> 2: safety clocks, one document per item, late commits (issue 9). Every safety
     * stamp is on (boot, CLOCK_BOOTTIME); clock_boot '' belongs to no boot, so every row
     * of an older queue is re-stamped when this boot first sees it: due now, leases
     * expired (stop runners before upgrading), and the settle delay counted again for
     * every item that ever posted. settle_at keeps, for people, when the ambiguity began. */
    "ALTER TABLE items ADD COLUMN clock_boot TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE items ADD COLUMN next_mono INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE items ADD COLUMN lease_mono INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE items ADD COLUMN settle_mono INTEGER;" /* NULL: nothing to settle */
    "ALTER TABLE items ADD COLUMN settle_at INTEGER NOT NULL DEFAULT 0;"
    "UPDATE items SET settle_mono = 0, settle_at = MAX(last_post_at, COALESCE("
    " (SELECT MAX(e.at) FROM events e WHERE e.item_id = items.id"
    " AND e.from_state = 'posting' AND e.to_state = 'reconciling'), 0))"
    " WHERE last_post_at > 0;"
    "DROP INDEX items_claim;"
    "DROP INDEX items_lease;"
    /* claim and next-due: due rows of one state under one boot, in due order */
    "CREATE INDEX items_due ON items(state, clock_boot, next_mono);"
    /* recovery looks only at leased rows */
    "CREATE INDEX items_leased ON items(clock_boot, lease_mono) WHERE lease_owner IS NOT NULL;"
    /* one document, one item: who holds a document number (not UNIQUE: an older queue may
     * already hold duplicates, which the report shows; new ones are refused in store_apply) */
    "CREATE INDEX items_doc ON items(erp_doc) WHERE erp_doc IS NOT NULL;"
    "CREATE TABLE late_commits ("
    " flow TEXT PRIMARY KEY,"
    " max_ms INTEGER NOT NULL,"
    " at INTEGER NOT NULL,"
    " observations INTEGER NOT NULL);"
    /* store_meta 'clock_boot': the boot every row's stamps were last brought under */
    "CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);",
    /* 2 -> 3: fewer pages per state change (issue 13: every page a commit writes to the WAL
     * costs the bot about 1% of its CPU per invoice). Events and evidence drop AUTOINCREMENT:
     * their rows are never deleted (the triggers), so a new row's id is still the largest so
     * far plus one and ids still grow in insert order, without the sqlite_sequence page every
     * insert rewrote. The due index keeps only the states a claim looks for: a change between
     * the in-flight states (checking, posting) or into a final one no longer moves an entry
     * in it. Queries must repeat its WHERE term word for word (DUE_STATES) to use it. */
    "CREATE TABLE events_v3 ("
    " id INTEGER PRIMARY KEY,"
    " item_id INTEGER NOT NULL REFERENCES items(id),"
    " at INTEGER NOT NULL,"
    " from_state TEXT,"
    " to_state TEXT NOT NULL,"
    " event TEXT NOT NULL,"
    " detail TEXT,"
    " actor TEXT NOT NULL);"
    "INSERT INTO events_v3 (id, item_id, at, from_state, to_state, event, detail, actor)"
    " SELECT id, item_id, at, from_state, to_state, event, detail, actor FROM events ORDER BY id;"
    "DROP TABLE events;"
    "ALTER TABLE events_v3 RENAME TO events;"
    "CREATE INDEX events_item ON events(item_id, id);"
    "CREATE TRIGGER events_no_update BEFORE UPDATE ON events"
    " BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;"
    "CREATE TRIGGER events_no_delete BEFORE DELETE ON events"
    " BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;"
    "CREATE TABLE evidence_v3 ("
    " id INTEGER PRIMARY KEY,"
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
    "INSERT INTO evidence_v3 (id, item_id, at, step, method, url, http_status, elapsed_ms,"
    " transport, rule, outcome, excerpt)"
    " SELECT id, item_id, at, step, method, url, http_status, elapsed_ms, transport, rule,"
    " outcome, excerpt FROM evidence ORDER BY id;"
    "DROP TABLE evidence;"
    "ALTER TABLE evidence_v3 RENAME TO evidence;"
    "CREATE INDEX evidence_item ON evidence(item_id, id);"
    "CREATE TRIGGER evidence_no_update BEFORE UPDATE ON evidence"
    " BEGIN SELECT RAISE(ABORT, 'evidence is append-only'); END;"
    "CREATE TRIGGER evidence_no_delete BEFORE DELETE ON evidence"
    " BEGIN SELECT RAISE(ABORT, 'evidence is append-only'); END;"
    "DELETE FROM sqlite_sequence WHERE name IN ('events', 'evidence');"
    "DROP INDEX items_due;"
    "CREATE INDEX items_due ON items(state, clock_boot, next_mono)"
    " WHERE (state = 'new' OR state = 'reconciling' OR state = 'finishing');",
    /* 3 -> 4: the audit chain (store.h): every event carries prev_hash and hash, computed when
     * it is appended (add_event). The events table is rebuilt with the two columns NOT NULL
     * (an event without them cannot be appended) and chain_history fills the new table from
     * the old one, chaining the existing history once in id order; AUDIT_REBUILD ends it. */
    "CREATE TABLE events_v4 ("
    " id INTEGER PRIMARY KEY,"
    " item_id INTEGER NOT NULL REFERENCES items(id),"
    " at INTEGER NOT NULL,"
    " from_state TEXT,"
    " to_state TEXT NOT NULL,"
    " event TEXT NOT NULL,"
    " detail TEXT,"
    " actor TEXT NOT NULL,"
    " prev_hash BLOB NOT NULL CHECK (length(prev_hash) = 32),"
    " hash BLOB NOT NULL CHECK (length(hash) = 32));",
};
#define STORE_SCHEMA_VERSION ((int)(sizeof(migrations) / sizeof(migrations[0])))

/* What migration 3 -> 4 runs once chain_history has filled events_v4. */
#define AUDIT_REBUILD                                                                              \
    "DROP TABLE events;"                                                                           \
    "ALTER TABLE events_v4 RENAME TO events;"                                                      \
    "CREATE INDEX events_item ON events(item_id, id);"                                             \
    "CREATE TRIGGER events_no_update BEFORE UPDATE ON events"                                      \
    " BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;"                                   \
    "CREATE TRIGGER events_no_delete BEFORE DELETE ON events"                                      \
    " BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;"

static int chain_history(struct store *st, char *err, size_t errlen);
/* Code a migration runs after its SQL, in its transaction, by the version it starts from. */
static int (*const migration_code[])(struct store *st, char *err, size_t errlen) = {
    [3] = chain_history,
};
_Static_assert(sizeof(migration_code) / sizeof(migration_code[0]) <= STORE_SCHEMA_VERSION,
               "migration code for a migration that does not exist");

/* The page size of a new queue (store_sqlite_open). */
#define STORE_PAGE_SIZE "2048"

/* The partial due index's WHERE term (migration 2 -> 3), which a query must contain as it is
 * written there for SQLite to use the index: the states store_claim looks for. */
#define DUE_STATES "(state = 'new' OR state = 'reconciling' OR state = 'finishing')"

/* The columns every item query selects, in the order row_to_item() reads them. */
#define ITEM_COLS                                                                                  \
    "id, key, fingerprint, state, posts, cycles, attempts, next_at, last_post_at, created_at,"     \
    " updated_at, lease_owner, lease_until, payload, source, erp_doc, reason, vendor_id,"          \
    " vendor_name, invoice_number, doc_type, issue_date, currency, exponent, total, clock_boot,"   \
    " next_mono, lease_mono, settle_mono, settle_at"

/* Every event with its audit chain hashes, in chain order (col_event with hashes). */
#define EVENT_CHAIN_ALL                                                                            \
    "SELECT id, item_id, at, from_state, to_state, event, detail, actor, prev_hash, hash"          \
    " FROM events ORDER BY id"

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
    Q_CHAIN_LAST,
    Q_GET_ID,
    Q_GET_KEY,
    Q_DUE,
    Q_DUE_ID,
    Q_CLAIM_UPDATE,
    Q_RENEW,
    Q_DOC_HOLDER,
    Q_APPLY_UPDATE,
    Q_APPLY_KEEP,
    Q_INSERT_EVIDENCE,
    Q_EXPIRED,
    Q_COUNTS,
    Q_OLDEST_PENDING,
    Q_NEXT_DUE,
    Q_PENDING,
    Q_META_BOOT,
    Q_SET_META_BOOT,
    Q_RESTAMP_ALL,
    Q_NOTE_LATE,
    Q_GET_LATE,
    Q__COUNT
};

/* What every state change sets (Q_APPLY_UPDATE, Q_APPLY_KEEP). */
#define APPLY_SET                                                                                  \
    "state = ?2, posts = ?3, cycles = ?4, attempts = ?5, next_at = ?6, next_mono = ?7,"            \
    " erp_doc = COALESCE(?8, erp_doc),"                                                            \
    " reason = CASE WHEN ?9 IS NULL THEN reason WHEN ?9 = '' THEN NULL ELSE ?9 END,"               \
    " last_post_at = CASE WHEN ?10 THEN ?13 ELSE last_post_at END,"                                \
    " settle_mono = ?16, settle_at = ?17, updated_at = ?13"

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
        " created_at, updated_at, clock_boot, next_mono)"
        " VALUES (?1, ?2, ?3, 'new', ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?4, ?4, ?14, ?15)",
    [Q_INSERT_EVENT] = "INSERT INTO events (id, item_id, at, from_state, to_state, event, detail,"
                       " actor, prev_hash, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    /* the audit chain's head: the last event (the rightmost page of the table, which the
     * insert after it writes anyway) */
    [Q_CHAIN_LAST] = "SELECT id, hash FROM events ORDER BY id DESC LIMIT 1",
    [Q_GET_ID] = "SELECT " ITEM_COLS " FROM items WHERE id = ?1",
    [Q_GET_KEY] = "SELECT " ITEM_COLS " FROM items WHERE key = ?1",
    /* store_due and !store_lease_live in SQL, for one state, on the items_due index. Rows of
     * another boot were re-stamped by the caller's transaction first. */
    [Q_DUE] = "SELECT id, next_mono FROM items WHERE " DUE_STATES " AND state = ?1"
              " AND clock_boot = ?2"
              " AND next_mono <= ?3 AND (lease_owner IS NULL OR lease_mono <= ?3)"
              " ORDER BY next_mono, id LIMIT 1",
    /* Q_DUE for one given row (store_claim_id), of whichever due state. */
    [Q_DUE_ID] =
        "SELECT id, next_mono FROM items WHERE id = ?1 AND " DUE_STATES " AND clock_boot = ?2"
        " AND next_mono <= ?3 AND (lease_owner IS NULL OR lease_mono <= ?3)",
    [Q_CLAIM_UPDATE] =
        "UPDATE items SET state = ?2, lease_owner = ?3, lease_until = ?4, lease_mono = ?5,"
        " clock_boot = ?6, next_at = ?7, next_mono = ?8, settle_mono = ?9, updated_at = ?10"
        " WHERE id = ?1",
    [Q_RENEW] = "UPDATE items SET lease_until = ?3, lease_mono = ?4"
                " WHERE id = ?1 AND lease_owner = ?2 AND clock_boot = ?5",
    [Q_DOC_HOLDER] = "SELECT id FROM items WHERE erp_doc = ?1 AND id <> ?2 ORDER BY id LIMIT 1",
    [Q_APPLY_UPDATE] = "UPDATE items SET " APPLY_SET
                       ", lease_owner = ?11, lease_until = ?12, lease_mono = ?14, clock_boot = ?15"
                       " WHERE id = ?1",
    /* Q_APPLY_UPDATE for a change that keeps the lease as the row has it, under the boot it
     * is under: the lease columns and clock_boot are left out of SET, so neither the leased
     * index nor (for a state outside DUE_STATES) the due index is rewritten. Same parameters;
     * ?11, ?12, ?14 and ?15 are not used. */
    [Q_APPLY_KEEP] = "UPDATE items SET " APPLY_SET " WHERE id = ?1",
    [Q_INSERT_EVIDENCE] =
        "INSERT INTO evidence (item_id, at, step, method, url, http_status, elapsed_ms,"
        " transport, rule, outcome, excerpt) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    /* Through the partial index of leased rows, then sorted: "ORDER BY id LIMIT" alone made
     * the planner walk the whole table in id order (every second, 100,000 rows at month-end);
     * the + keeps it from using the primary key for the order. */
    [Q_EXPIRED] = "SELECT id FROM items WHERE lease_owner IS NOT NULL"
                  " AND (clock_boot <> ?1 OR lease_mono <= ?2) ORDER BY +id LIMIT ?3",
    [Q_COUNTS] = "SELECT state, COUNT(*) FROM items GROUP BY state",
    /* One index probe per pending state instead of a scan. */
    [Q_OLDEST_PENDING] = "SELECT MIN(m) FROM ("
                         " SELECT MIN(created_at) AS m FROM items WHERE state = 'new'"
                         " UNION ALL SELECT MIN(created_at) FROM items WHERE state = 'checking'"
                         " UNION ALL SELECT MIN(created_at) FROM items WHERE state = 'posting'"
                         " UNION ALL SELECT MIN(created_at) FROM items WHERE state = 'reconciling'"
                         " UNION ALL SELECT MIN(created_at) FROM items WHERE state = 'finishing')",
    [Q_NEXT_DUE] = "SELECT MIN(m) FROM ("
                   " SELECT MIN(next_mono) AS m FROM items WHERE " DUE_STATES
                   " AND state = 'new' AND clock_boot = ?1"
                   " UNION ALL SELECT MIN(next_mono) FROM items WHERE " DUE_STATES
                   " AND state = 'reconciling' AND clock_boot = ?1"
                   " UNION ALL SELECT MIN(next_mono) FROM items WHERE " DUE_STATES
                   " AND state = 'finishing' AND clock_boot = ?1)",
    [Q_PENDING] = "SELECT EXISTS (SELECT 1 FROM items WHERE state IN ('new', 'checking', "
                  "'posting', 'reconciling', 'finishing'))",
    [Q_META_BOOT] = "SELECT value FROM store_meta WHERE key = 'clock_boot'",
    [Q_SET_META_BOOT] = "INSERT INTO store_meta (key, value) VALUES ('clock_boot', ?1)"
                        " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    /* store_restamp for every row of another boot (settle_at keeps the original moment). */
    [Q_RESTAMP_ALL] = "UPDATE items SET clock_boot = ?1, next_mono = ?2, next_at = ?3,"
                      " lease_mono = CASE WHEN lease_owner IS NULL THEN 0 ELSE ?2 END,"
                      " settle_mono = CASE WHEN settle_mono IS NULL THEN NULL ELSE ?2 END"
                      " WHERE clock_boot <> ?1",
    [Q_NOTE_LATE] =
        "INSERT INTO late_commits (flow, max_ms, at, observations) VALUES (?1, ?2, ?3, 1)"
        " ON CONFLICT (flow) DO UPDATE SET observations = observations + 1,"
        " at = CASE WHEN excluded.max_ms > max_ms THEN excluded.at ELSE at END,"
        " max_ms = MAX(max_ms, excluded.max_ms)",
    [Q_GET_LATE] = "SELECT max_ms, at, observations FROM late_commits WHERE flow = ?1",
};
_Static_assert(sizeof(stmt_sql) / sizeof(stmt_sql[0]) == Q__COUNT, "every statement needs SQL");

/* One SQLite connection and its cached statements (prepared on first use). */
struct sq_conn {
    sqlite3 *db;
    sqlite3_stmt *stmt[Q__COUNT];
    int busy_ms; /* the busy timeout set on db */
};

/* The SQLite handle: the shared part first (store-int.h). */
struct sq {
    struct store base;
    struct sq_conn own;   /* the handle's connection: reads, batches, writes without a turn */
    struct sq_conn *cur;  /* what statements run on: &own, or the file's writer in the turn */
    struct sq_file *file; /* what this process's connections to the file share (or NULL) */
    bool group;           /* WAL mode with the group-commit hook (synchronous=NORMAL) */
    bool in_turn;         /* run_write holds the writer turn: the hook defers the sync */
    uint64_t sync_due;    /* the commit run_write made in its turn (0: none) */
    uint64_t unsynced;    /* the last STORE_DEFERRED commit not known on disk (0: none) */
};
#define SQ(st) ((struct sq *)(st))
#define SQDB(st) (SQ(st)->cur->db)

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
                      st && SQDB(st) ? sqlite3_errmsg(SQDB(st)) : sqlite3_errstr(rc));
}

/* The cached statement `id`, reset and unbound, or NULL with err filled. */
static sqlite3_stmt *stmt_get(struct store *st, enum stmt_id id, char *err, size_t errlen)
{
    struct sq_conn *c = SQ(st)->cur;
    if (!c->stmt[id]) {
        int rc = sqlite3_prepare_v3(c->db, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT,
                                    &c->stmt[id], NULL);
        if (rc != SQLITE_OK) {
            (void)db_fail(st, rc, err, errlen, "prepare");
            return NULL;
        }
    }
    return c->stmt[id];
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

/* Binds v (NULL: SQL NULL), at most max bytes of it, never cut inside a UTF-8 sequence:
 * excerpts of untrusted pages and free-text details stay bounded in the database. copy:
 * SQLite's private copy (SQLITE_TRANSIENT); without it (SQLITE_STATIC) only for a statement
 * stepped and then reset and unbound (stmt_done) before v can go away, on every path - the
 * writes of a state change, its event and its evidence, where the copies were a malloc, a
 * memcpy and a free each (~30 an invoice, a 1 KiB excerpt among them). */
static int bind_text_as(sqlite3_stmt *s, int i, const char *v, size_t max, bool copy)
{
    if (!v)
        return sqlite3_bind_null(s, i);
    return sqlite3_bind_text(s, i, v, max == SIZE_MAX ? -1 : (int)store_text_cut(v, max),
                             copy ? SQLITE_TRANSIENT : SQLITE_STATIC);
}

static int bind_text(sqlite3_stmt *s, int i, const char *v)
{
    return bind_text_as(s, i, v, SIZE_MAX, true);
}

static int bind_text_max(sqlite3_stmt *s, int i, const char *v, size_t max)
{
    return bind_text_as(s, i, v, max, true);
}

/* bind_text and bind_text_max without SQLite's copy (bind_text_as). */
static int bind_text_now(sqlite3_stmt *s, int i, const char *v)
{
    return bind_text_as(s, i, v, SIZE_MAX, false);
}

static int bind_text_max_now(sqlite3_stmt *s, int i, const char *v, size_t max)
{
    return bind_text_as(s, i, v, max, false);
}

static char *col_dup(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? apbot_xstrdup((const char *)t) : NULL;
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
    col_copy(s, 25, it->clock_boot, sizeof(it->clock_boot));
    it->next_mono = sqlite3_column_int64(s, 26);
    it->lease_mono = sqlite3_column_int64(s, 27);
    it->has_settle = sqlite3_column_type(s, 28) != SQLITE_NULL;
    it->settle_mono = it->has_settle ? sqlite3_column_int64(s, 28) : 0;
    it->settle_at = sqlite3_column_int64(s, 29);
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
    } else if (!sqlite3_get_autocommit(SQDB(st))) {
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

/*
 * What this process's connections to one database file share (one per file, by device and
 * inode, counted by the handles that use it):
 *
 * The writer turn. Writers of one process queue on a mutex before they ask SQLite for the
 * write lock. Without it, threads of one runner (a connection each) met the lock busy and
 * SQLite's busy handler put them to sleep for 1, 2, 5, 10 ... 100 ms at a time however soon
 * the lock came free. Another process still meets the busy timeout as before; batches
 * (store_begin) do not take the turn.
 *
 * Group commit. A write is durable (the WAL synced to disk) before it returns to its caller,
 * as with synchronous=FULL, but the sync is shared: the connection runs synchronous=NORMAL
 * (SQLite writes the commit's WAL frames, releases the write lock, and syncs only at
 * checkpoints) and its WAL hook, which SQLite calls after every commit once the write lock is
 * released, counts the commit. A write made in the writer turn (run_write) hands the turn on
 * first and then waits (sq_wait_synced) until a sync of the WAL that began after its frames
 * were written has completed - starting one itself when none is running; any other commit
 * waits so in the hook. Commits of several workers that land while one sync runs are covered
 * by the next one. Nothing a caller does after a write (an ERP request above all: the intent
 * to post) can happen before that write is on disk; the WAL is written in order, so a later
 * commit on disk means every earlier one is too. A failed sync fails the write: its caller
 * must not act on it. Waiting inside the hook while holding the turn (as this file once did)
 * lets no other writer commit during a sync, so every commit paid an fsync of its own. The
 * hook also runs the passive auto-checkpoint SQLite's own default hook runs (every
 * SQ_CHECKPOINT_FRAMES frames), which it replaces.
 *
 * The writer connection. Writes in the turn run on one connection the file's handles share
 * (opened at the first such write), not on each handle's own. A connection that meets the
 * WAL changed by another connection drops its whole page cache; with a connection per
 * worker, every write transaction began by re-reading from the WAL every page it touched
 * (~78 reads per invoice at 16 sessions). Only the turn's holder uses the writer connection,
 * so it is never used by two threads at once; the handle's own connection still serves its
 * reads and batches. Nothing about a write's durability changes: the same transaction,
 * hook and sync as before, on another connection to the same file.
 */
#define SQ_CHECKPOINT_FRAMES 1000

struct sq_file {
    struct sq_file *next;
    dev_t dev;
    ino_t ino;
    int refs;
    char *path;                  /* where the writer connection opens */
    struct sq_conn writer;       /* the turn's connection (db NULL until the first write) */
    bool writer_failed;          /* it could not be opened: turns write on their own connections */
    pthread_mutex_t writer_turn; /* the writer turn */
    pthread_mutex_t mu;          /* guards the sync state below */
    pthread_cond_t cv;
    uint64_t written; /* commits whose frames are written */
    uint64_t synced;  /* commits known to be on disk */
    bool syncing;     /* a sync runs */
};

static void conn_close(struct sq_conn *c)
{
    for (int i = 0; i < Q__COUNT; i++)
        sqlite3_finalize(c->stmt[i]);
    sqlite3_close(c->db);
    memset(c, 0, sizeof(*c));
}

/* Whether the connection's main database runs in WAL mode. */
static bool conn_wal(sqlite3 *db)
{
    sqlite3_stmt *s = NULL;
    bool wal = false;
    if (sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, NULL) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
        wal = strcmp((const char *)sqlite3_column_text(s, 0), "wal") == 0;
    sqlite3_finalize(s);
    return wal;
}

static pthread_mutex_t sq_files_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sq_file *sq_files;

/* The shared part for the file at path (a new one for the first handle), or NULL. */
static struct sq_file *sq_file_get(const char *path)
{
    struct stat sb;
    if (!path || stat(path, &sb) != 0)
        return NULL;
    pthread_mutex_lock(&sq_files_mu);
    struct sq_file *f = sq_files;
    while (f && !(f->dev == sb.st_dev && f->ino == sb.st_ino))
        f = f->next;
    if (!f) {
        f = apbot_xcalloc(1, sizeof(*f));
        f->dev = sb.st_dev;
        f->ino = sb.st_ino;
        f->path = apbot_xstrdup(path);
        pthread_mutex_init(&f->writer_turn, NULL);
        pthread_mutex_init(&f->mu, NULL);
        pthread_cond_init(&f->cv, NULL);
        f->next = sq_files;
        sq_files = f;
    }
    f->refs++;
    pthread_mutex_unlock(&sq_files_mu);
    return f;
}

static void sq_file_put(struct sq_file *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&sq_files_mu);
    if (--f->refs == 0) {
        struct sq_file **pp = &sq_files;
        while (*pp != f)
            pp = &(*pp)->next;
        *pp = f->next;
        pthread_cond_destroy(&f->cv);
        pthread_mutex_destroy(&f->mu);
        pthread_mutex_destroy(&f->writer_turn);
        conn_close(&f->writer);
        free(f->path);
        free(f);
    }
    pthread_mutex_unlock(&sq_files_mu);
}

static bool same_file(const struct sq_file *f, const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && sb.st_dev == f->dev && sb.st_ino == f->ino;
}

/*
 * The file's writer connection, opened by the first turn that needs it, set up as every
 * handle's own (WAL, synchronous=NORMAL under the group commit, foreign keys); NULL when it
 * cannot be opened (turns then write on their own connections, as before). Only in the turn.
 * The path must still name the file the handles have open, before and after the open (a
 * file renamed into its place meanwhile would take writes meant for the queue in use).
 */
static struct sq_conn *writer_get(struct sq_file *f)
{
    if (f->writer.db || f->writer_failed)
        return f->writer.db ? &f->writer : NULL;
    sqlite3 *db = NULL;
    bool ok = same_file(f, f->path) &&
              sqlite3_open_v2(f->path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                              store_walvfs_name()) == SQLITE_OK &&
              sqlite3_busy_timeout(db, STORE_BUSY_TIMEOUT_MS) == SQLITE_OK &&
              sqlite3_exec(db, "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;", NULL, NULL,
                           NULL) == SQLITE_OK &&
              conn_wal(db) && same_file(f, f->path);
    if (!ok) {
        sqlite3_close(db);
        f->writer_failed = true;
        return NULL;
    }
    f->writer.db = db;
    f->writer.busy_ms = STORE_BUSY_TIMEOUT_MS;
    return &f->writer;
}

/* Syncs the WAL this connection has open. */
static int sq_sync_wal(sqlite3 *db, const char *zdb)
{
    sqlite3_file *wal = NULL;
    int rc = sqlite3_file_control(db, zdb, SQLITE_FCNTL_JOURNAL_POINTER, &wal);
    if (rc != SQLITE_OK || !wal || !wal->pMethods)
        return SQLITE_IOERR_FSYNC; /* a commit in WAL mode without a WAL: never "durable" */
    return wal->pMethods->xSync(wal, SQLITE_SYNC_NORMAL);
}

/*
 * Waits until commit number `mine` of the file is on disk, syncing the WAL through this
 * connection when no sync runs. Returns SQLITE_OK, or the sync's error (the commit must then
 * be treated as failed).
 */
static int sq_wait_synced(struct sq *h, uint64_t mine)
{
    struct sq_file *f = h->file;
    int rc = SQLITE_OK;
    pthread_mutex_lock(&f->mu);
    while (f->synced < mine) {
        if (f->syncing) {
            pthread_cond_wait(&f->cv, &f->mu);
            continue;
        }
        f->syncing = true;
        uint64_t covers = f->written; /* every commit counted so far has its frames written */
        pthread_mutex_unlock(&f->mu);
        rc = sq_sync_wal(h->own.db, "main");
        h->base.syncs++;
        pthread_mutex_lock(&f->mu);
        f->syncing = false;
        if (rc == SQLITE_OK && covers > f->synced)
            f->synced = covers;
        pthread_cond_broadcast(&f->cv);
        if (rc != SQLITE_OK)
            break;
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

/* The WAL hook: writes what the VFS may still hold of this commit (store_walvfs.c), counts the
 * commit and makes it durable (group commit, above; in the writer turn, after the turn), then
 * auto-checkpoints. Every connection that runs synchronous=NORMAL has it; the others sync each
 * commit, and a sync writes what is held. */
static int sq_wal_hook(void *arg, sqlite3 *db, const char *zdb, int frames)
{
    struct sq *h = arg;
    int rc = store_walvfs_flush(db); /* all of this commit is in the file (store_walvfs.c) */
    if (rc != SQLITE_OK)
        return rc;
    pthread_mutex_lock(&h->file->mu);
    uint64_t mine = ++h->file->written;
    pthread_mutex_unlock(&h->file->mu);
    if (h->in_turn)
        h->sync_due = mine;
    else
        rc = sq_wait_synced(h, mine); /* COMMIT reports an error: the caller must not act */
    if (rc == SQLITE_OK && frames >= SQ_CHECKPOINT_FRAMES)
        (void)sqlite3_wal_checkpoint_v2(db, zdb, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    return rc;
}

/*
 * One write transaction through the shared busy-retry loop (store-int.h), in the writer
 * turn. Returns once the write is on disk (STORE_SYNC), or once committed (STORE_DEFERRED:
 * remembered for sq_sync; STORE_LAZY: left to whatever syncs next).
 */
static int run_write(struct store *st, store_tx_body body, void *ctx, char *err, size_t errlen)
{
    struct sq *h = SQ(st);
    pthread_mutex_t *m = st->in_batch || !h->file ? NULL : &h->file->writer_turn;
    if (!m)
        return store_run_write(st, tx_begin, tx_end, body, ctx, err, errlen);
    pthread_mutex_lock(m);
    struct sq_conn *w = h->group ? writer_get(h->file) : NULL;
    if (w) {
        if (w->busy_ms != h->own.busy_ms) {
            sqlite3_busy_timeout(w->db, h->own.busy_ms);
            w->busy_ms = h->own.busy_ms;
        }
        sqlite3_wal_hook(w->db, sq_wal_hook, h); /* this turn's commits are h's */
        h->cur = w;
    }
    h->in_turn = true;
    h->sync_due = 0;
    int r = store_run_write(st, tx_begin, tx_end, body, ctx, err, errlen);
    if (w)
        sqlite3_wal_hook(w->db, NULL, NULL); /* no hook pointing at a handle that may close */
    h->cur = &h->own;
    h->in_turn = false;
    uint64_t due = h->sync_due;
    h->sync_due = 0;
    pthread_mutex_unlock(m);
    if (!due)
        return r;
    if (st->durability == STORE_DEFERRED) {
        h->unsynced = due;
    } else if (st->durability == STORE_SYNC) {
        if (sq_wait_synced(h, due) != SQLITE_OK && r == APBOT_OK)
            r = apbot_fail(err, errlen, APBOT_E_DB,
                           "store: syncing the queue's log to disk failed");
        else
            h->unsynced = 0; /* the WAL is in order: every earlier commit is on disk too */
    }
    return r;
}

static int sq_sync(struct store *st, char *err, size_t errlen)
{
    struct sq *h = SQ(st);
    if (!h->unsynced)
        return APBOT_OK;
    if (sq_wait_synced(h, h->unsynced) != SQLITE_OK)
        return apbot_fail(err, errlen, APBOT_E_DB, "store: syncing the queue's log to disk failed");
    h->unsynced = 0;
    return APBOT_OK;
}

static int exec_sql(struct store *st, const char *sql, char *err, size_t errlen)
{
    char *msg = NULL;
    int rc = sqlite3_exec(SQDB(st), sql, NULL, NULL, &msg);
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
    int rc = sqlite3_prepare_v2(SQDB(st), "PRAGMA user_version", -1, &s, NULL);
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
            if (rc == APBOT_OK && v < (int)(sizeof(migration_code) / sizeof(migration_code[0])) &&
                migration_code[v])
                rc = migration_code[v](st, err, errlen);
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

/*
 * A new database file is created here, owner-only, before SQLite opens it: O_EXCL means no
 * window in which it exists with a wider mode, and SQLite creates -wal and -shm with the
 * database file's mode. An existing file is left as it is; ":memory:" and URIs are SQLite's.
 */
static void create_private(const char *path)
{
    if (!*path || strcmp(path, ":memory:") == 0 || strncmp(path, "file:", 5) == 0)
        return;
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd); /* an empty file is an empty database */
}

static const struct store_ops sq_ops;
static void sq_close(struct store *st);

int store_sqlite_open(const char *path, struct store **ret, char *err, size_t errlen)
{
    struct sq *h = apbot_xcalloc(1, sizeof(*h));
    struct store *st = &h->base;
    int r = store_base_init(st, &sq_ops, err, errlen);
    if (r) {
        free(h);
        return r;
    }
    h->cur = &h->own;
    create_private(path);
    int rc = sqlite3_open_v2(path, &h->own.db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                             store_walvfs_name());
    if (rc != SQLITE_OK) {
        char shown[512];
        store_path_display(path, shown, sizeof(shown));
        r = apbot_fail(err, errlen, db_rc(rc) == APBOT_E_BUSY ? APBOT_E_BUSY : APBOT_E_IO,
                       "store: cannot open %s: %s", shown,
                       SQDB(st) ? sqlite3_errmsg(SQDB(st)) : sqlite3_errstr(rc));
        goto fail;
    }
    sqlite3_busy_timeout(h->own.db, STORE_BUSY_TIMEOUT_MS);
    h->own.busy_ms = STORE_BUSY_TIMEOUT_MS;
    /* Every commit is synced before it returns: by each commit (FULL) until the group commit
     * above is in place, then by the WAL hook (NORMAL + a shared sync). journal_mode answers a
     * row ("wal", or "memory" for :memory:); exec ignores it. A new queue gets 2 KiB pages
     * (STORE_PAGE_SIZE; SQLite ignores the pragma for a file that has pages already): a state
     * change rewrites whole pages of the row, its indexes, its event and its evidence, and a
     * commit writes each to the WAL (checksummed, then synced); with 4 KiB pages that was
     * ~100 KiB per invoice, with 2 KiB ~60 KiB, for 3% fewer instructions and ~5% less CPU at
     * 16 sessions (the kernel's copies and write-back). Rows still fit, as a rule: an item,
     * an event and an evidence row with the runner's 1 KiB excerpt stay under a 2 KiB page's
     * ~2,000 bytes of payload; a long invoice's payload, and evidence with a longer excerpt or
     * URL (the store takes up to 4 KiB and 2 KiB), spill into overflow pages, as such rows did
     * with 4 KiB pages at their sizes. */
    r = exec_sql(st,
                 "PRAGMA page_size = " STORE_PAGE_SIZE ";"
                 "PRAGMA journal_mode = WAL;"
                 "PRAGMA synchronous = FULL;"
                 "PRAGMA foreign_keys = ON;",
                 err, errlen);
    if (r)
        goto fail;
    r = migrate(st, err, errlen);
    if (r)
        goto fail;
    SQ(st)->file = sq_file_get(path);
    if (SQ(st)->file && conn_wal(h->own.db)) {
        h->group = true;
        sqlite3_wal_hook(h->own.db, sq_wal_hook, h);
        /* Its writes go to the writer connection: this one reads, and drops its cache at
         * every read after a commit of the writer's, so a small cache loses nothing. */
        r = exec_sql(st, "PRAGMA synchronous = NORMAL; PRAGMA cache_size = -512;", err, errlen);
        if (r)
            goto fail;
    }
    *ret = st;
    return APBOT_OK;
fail:
    sq_close(st);
    return r;
}

static void sq_close(struct store *st)
{
    (void)sq_sync(st, NULL, 0); /* a deferred write is on disk before its handle goes */
    conn_close(&SQ(st)->own);
    sq_file_put(SQ(st)->file);
    free(st);
}

/* Batches: the dispatcher keeps in_batch. */
static int sq_begin(struct store *st, char *err, size_t errlen)
{
    return stmt_exec(st, Q_BEGIN, err, errlen);
}

static int sq_commit(struct store *st, char *err, size_t errlen)
{
    return stmt_exec(st, Q_COMMIT, err, errlen);
}

static void sq_rollback(struct store *st)
{
    if (!sqlite3_get_autocommit(SQDB(st)))
        (void)stmt_exec(st, Q_ROLLBACK, NULL, 0);
}

/* Whether the queue's rows are all under `boot` (store_meta 'clock_boot'). */
static int queue_boot_is(struct store *st, const char *boot, bool *ret_same, char *err,
                         size_t errlen)
{
    sqlite3_stmt *s = stmt_get(st, Q_META_BOOT, err, errlen);
    if (!s)
        return APBOT_E_DB;
    int rc = sqlite3_step(s);
    *ret_same =
        rc == SQLITE_ROW && apbot_clock_same_boot((const char *)sqlite3_column_text(s, 0), boot);
    stmt_done(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return db_fail(st, rc, err, errlen, "reading the queue's boot");
    return APBOT_OK;
}

/*
 * Inside a write transaction: makes sure every row's stamps are under now->boot. Invariant
 * after every write: all rows are under the boot store_meta names. The first write under
 * another boot re-stamps the rows of the older one (store_restamp's rule, in SQL) and
 * records the new boot, in that same transaction; every other write pays one small read.
 */
static int ensure_boot(struct store *st, const struct apbot_now *now, char *err, size_t errlen)
{
    bool same = false;
    int r = queue_boot_is(st, now->boot, &same, err, errlen);
    if (r || same)
        return r;
    sqlite3_stmt *s = stmt_get(st, Q_RESTAMP_ALL, err, errlen);
    if (!s)
        return APBOT_E_DB;
    bind_text(s, 1, now->boot);
    sqlite3_bind_int64(s, 2, now->mono_ms);
    sqlite3_bind_int64(s, 3, now->wall_ms);
    int rc = sqlite3_step(s);
    stmt_done(s);
    if (rc != SQLITE_DONE)
        return db_fail(st, rc, err, errlen, "re-stamping rows of another boot");
    s = stmt_get(st, Q_SET_META_BOOT, err, errlen);
    if (!s)
        return APBOT_E_DB;
    bind_text(s, 1, now->boot);
    rc = sqlite3_step(s);
    stmt_done(s);
    if (rc != SQLITE_DONE)
        return db_fail(st, rc, err, errlen, "recording the queue's boot");
    return APBOT_OK;
}

/*
 * The audit chain's head, inside the caller's write transaction: the last event's id and hash
 * (0 and the genesis on an empty queue). The transaction holds the queue's write lock, so
 * nothing can append between this read and the caller's insert: the chain is one total order.
 */
static int chain_last(struct store *st, int64_t *ret_id, unsigned char hash[STORE_HASH_LEN],
                      char *err, size_t errlen)
{
    sqlite3_stmt *s = stmt_get(st, Q_CHAIN_LAST, err, errlen);
    if (!s)
        return APBOT_E_DB;
    int rc = sqlite3_step(s);
    int r = APBOT_OK;
    *ret_id = 0;
    memcpy(hash, store_audit_genesis, STORE_HASH_LEN);
    if (rc == SQLITE_ROW) {
        *ret_id = sqlite3_column_int64(s, 0);
        const void *h = sqlite3_column_blob(s, 1);
        if (h && sqlite3_column_bytes(s, 1) == STORE_HASH_LEN)
            memcpy(hash, h, STORE_HASH_LEN);
        else /* the table's CHECK keeps this out; never chain to a guess */
            r = apbot_fail(err, errlen, APBOT_E_DB,
                           "store: event #%" PRId64 " carries no audit hash", *ret_id);
    } else if (rc != SQLITE_DONE) {
        r = db_fail(st, rc, err, errlen, "reading the audit chain's head");
    }
    stmt_done(s);
    return r;
}

/* Appends one audit event, chained to the last (store.h, "The audit chain"); part of the
 * caller's transaction. */
static int add_event(struct store *st, int64_t item_id, int64_t at, const char *from,
                     const char *to, const char *event, const char *detail, const char *actor,
                     char *err, size_t errlen)
{
    int64_t last = 0;
    unsigned char prev[STORE_HASH_LEN], hash[STORE_HASH_LEN];
    int r = chain_last(st, &last, prev, err, errlen);
    if (r)
        return r;
    /* The row as the database will keep it: what is hashed is what is stored. */
    char *cut = NULL;
    if (detail) {
        size_t n = store_text_cut(detail, STORE_TEXT_MAX);
        if (detail[n])
            detail = cut = apbot_xstrndup(detail, n);
    }
    struct store_event_row row = {.id = last + 1,
                                  .item_id = item_id,
                                  .at = at,
                                  .from = from,
                                  .to = to,
                                  .event = event,
                                  .detail = detail,
                                  .actor = actor ? actor : "unknown"};
    store_event_hash(prev, &row, hash);
    sqlite3_stmt *s = stmt_get(st, Q_INSERT_EVENT, err, errlen);
    if (!s) {
        free(cut);
        return APBOT_E_DB;
    }
    sqlite3_bind_int64(s, 1, row.id);
    sqlite3_bind_int64(s, 2, item_id);
    sqlite3_bind_int64(s, 3, at);
    bind_text_now(s, 4, from);
    bind_text_now(s, 5, to);
    bind_text_now(s, 6, event);
    bind_text_now(s, 7, detail);
    bind_text_now(s, 8, row.actor);
    sqlite3_bind_blob(s, 9, prev, STORE_HASH_LEN, SQLITE_STATIC);
    sqlite3_bind_blob(s, 10, hash, STORE_HASH_LEN, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    stmt_done(s);
    free(cut);
    if (rc != SQLITE_DONE)
        return db_fail(st, rc, err, errlen, "appending an event");
    return APBOT_OK;
}

/* An event row as read from columns id, item_id, at, from_state, to_state, event, detail,
 * actor (0-7) and, when hashes, prev_hash and hash (8, 9): NULL where a hash is missing or not
 * 32 bytes. Valid until the statement steps again. */
static struct store_event_row col_event(sqlite3_stmt *s, bool hashes)
{
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
    for (int i = 8; hashes && i < 10; i++) {
        const unsigned char *h = sqlite3_column_blob(s, i);
        if (h && sqlite3_column_bytes(s, i) == STORE_HASH_LEN)
            *(i == 8 ? &row.prev_hash : &row.hash) = h;
    }
    return row;
}

/* Migration 3 -> 4: every event of the old table into events_v4, chained in id order; then
 * the new table takes the old one's place (AUDIT_REBUILD). In the migration's transaction. */
static int chain_history(struct store *st, char *err, size_t errlen)
{
    sqlite3_stmt *q = NULL, *ins = NULL;
    int rc = sqlite3_prepare_v2(SQDB(st),
                                "SELECT id, item_id, at, from_state, to_state, event, detail,"
                                " actor FROM events ORDER BY id",
                                -1, &q, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(SQDB(st),
                                "INSERT INTO events_v4 (id, item_id, at, from_state, to_state,"
                                " event, detail, actor, prev_hash, hash)"
                                " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                                -1, &ins, NULL);
    unsigned char prev[STORE_HASH_LEN], hash[STORE_HASH_LEN];
    memcpy(prev, store_audit_genesis, STORE_HASH_LEN);
    while (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        struct store_event_row row = col_event(q, false);
        store_event_hash(prev, &row, hash);
        sqlite3_bind_int64(ins, 1, row.id);
        sqlite3_bind_int64(ins, 2, row.item_id);
        sqlite3_bind_int64(ins, 3, row.at);
        bind_text_now(ins, 4, row.from);
        bind_text_now(ins, 5, row.to);
        bind_text_now(ins, 6, row.event);
        bind_text_now(ins, 7, row.detail);
        bind_text_now(ins, 8, row.actor);
        sqlite3_bind_blob(ins, 9, prev, STORE_HASH_LEN, SQLITE_STATIC);
        sqlite3_bind_blob(ins, 10, hash, STORE_HASH_LEN, SQLITE_STATIC);
        rc = sqlite3_step(ins);
        sqlite3_reset(ins);
        sqlite3_clear_bindings(ins);
        if (rc == SQLITE_DONE)
            rc = SQLITE_OK;
        memcpy(prev, hash, STORE_HASH_LEN);
    }
    int r =
        rc == SQLITE_DONE ? APBOT_OK : db_fail(st, rc, err, errlen, "chaining the audit events");
    sqlite3_finalize(q);
    sqlite3_finalize(ins);
    if (r == APBOT_OK)
        r = exec_sql(st, AUDIT_REBUILD, err, errlen);
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

/* ---- enqueue ---------------------------------------------------------------------------- */

struct enqueue_op {
    const struct store_new_item *ni;
    const struct apbot_now *now;
    enum store_enqueue_result result;
    int64_t id;
};

static int enqueue_body(struct store *st, void *ctx, char *err, size_t errlen)
{
    struct enqueue_op *op = ctx;
    const struct store_new_item *ni = op->ni;
    const char *source = ni->source ? ni->source : "";
    op->result = STORE_ENQ_QUEUED;
    op->id = 0;
    int r = ensure_boot(st, op->now, err, errlen); /* the new row joins the queue's boot */
    if (r)
        return r;

    sqlite3_stmt *s = stmt_get(st, Q_FIND_KEY, err, errlen);
    if (!s)
        return APBOT_E_DB;
    bind_text(s, 1, ni->key);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        op->id = sqlite3_column_int64(s, 0);
        const char *fp = (const char *)sqlite3_column_text(s, 1);
        if (fp && strcmp(fp, ni->fingerprint) == 0) {
            op->result = STORE_ENQ_ALREADY;
        } else {
            const char *src = (const char *)sqlite3_column_text(s, 2);
            const char *state = (const char *)sqlite3_column_text(s, 3);
            op->result = STORE_ENQ_CONFLICT;
            apbot_fail(err, errlen, APBOT_E_CONFLICT,
                       "same identity as queued item #%" PRId64 " (%s, from %s, state %s) "
                       "but different content; not queued",
                       op->id, ni->key, src ? src : "?", state ? state : "?");
        }
        stmt_done(s);
        return APBOT_OK;
    }
    stmt_done(s);
    if (rc != SQLITE_DONE)
        return db_fail(st, rc, err, errlen, "looking up the key");

    s = stmt_get(st, Q_INSERT_ITEM, err, errlen);
    if (!s)
        return APBOT_E_DB;
    bind_text(s, 1, ni->key);
    bind_text(s, 2, ni->fingerprint);
    bind_text(s, 3, ni->payload);
    sqlite3_bind_int64(s, 4, op->now->wall_ms);
    bind_text_max(s, 5, source, STORE_TEXT_MAX);
    bind_text(s, 6, ni->vendor_id);
    bind_text(s, 7, ni->vendor_name);
    bind_text(s, 8, ni->invoice_number);
    bind_text(s, 9, ni->doc_type);
    bind_text(s, 10, ni->issue_date);
    bind_text(s, 11, ni->currency);
    sqlite3_bind_int(s, 12, ni->exponent);
    sqlite3_bind_int64(s, 13, ni->total);
    bind_text(s, 14, op->now->boot);
    sqlite3_bind_int64(s, 15, op->now->mono_ms);
    rc = sqlite3_step(s);
    stmt_done(s);
    if (rc != SQLITE_DONE)
        return db_fail(st, rc, err, errlen, "inserting the item");
    op->id = sqlite3_last_insert_rowid(SQDB(st));
    return add_event(st, op->id, op->now->wall_ms, NULL, machine_state_name(MACHINE_NEW),
                     "enqueued", source, "enqueue", err, errlen);
}

static int sq_enqueue(struct store *st, const struct store_new_item *ni,
                      const struct apbot_now *now, enum store_enqueue_result *ret_result,
                      int64_t *ret_id, char *err, size_t errlen)
{
    struct enqueue_op op = {.ni = ni, .now = now};
    int r = run_write(st, enqueue_body, &op, err, errlen);
    if (r)
        return r;
    *ret_result = op.result;
    *ret_id = op.id;
    return APBOT_OK;
}

static int sq_get(struct store *st, int64_t id, const char *key, struct store_item *ret, char *err,
                  size_t errlen)
{
    return get_item(st, key ? Q_GET_KEY : Q_GET_ID, id, key, ret, err, errlen);
}

/* ---- claim and leases ------------------------------------------------------------------- */

/* First due, unleased row of one state: *ret_id 0 when none. */
static int first_due(struct store *st, enum machine_state state, const struct apbot_now *now,
                     int64_t *ret_id, int64_t *ret_next, char *err, size_t errlen)
{
    sqlite3_stmt *s = stmt_get(st, Q_DUE, err, errlen);
    if (!s)
        return APBOT_E_DB;
    bind_text_now(s, 1, machine_state_name(state));
    bind_text_now(s, 2, now->boot);
    sqlite3_bind_int64(s, 3, now->mono_ms);
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

struct claim_op {
    const char *owner;
    const struct apbot_now *now;
    int64_t lease_ms;
    const struct machine_step *claimed;
    int64_t want_id;      /* store_claim_id: this row or none (0: the first due) */
    struct store_item it; /* the result, valid when have_item */
    bool have_item;
};

/* Whether row id is due and unleased now (in a state a claim looks for): *ret_id id or 0. */
static int due_id(struct store *st, int64_t id, const struct apbot_now *now, int64_t *ret_id,
                  char *err, size_t errlen)
{
    sqlite3_stmt *s = stmt_get(st, Q_DUE_ID, err, errlen);
    if (!s)
        return APBOT_E_DB;
    sqlite3_bind_int64(s, 1, id);
    bind_text_now(s, 2, now->boot);
    sqlite3_bind_int64(s, 3, now->mono_ms);
    int rc = sqlite3_step(s);
    int r = APBOT_OK;
    *ret_id = 0;
    if (rc == SQLITE_ROW)
        *ret_id = id;
    else if (rc != SQLITE_DONE)
        r = db_fail(st, rc, err, errlen, "looking for a due item");
    stmt_done(s);
    return r;
}

static int claim_body(struct store *st, void *ctx, char *err, size_t errlen)
{
    struct claim_op *op = ctx;
    const struct apbot_now *now = op->now;
    if (op->have_item) {
        store_item_done(&op->it); /* a retried attempt starts over */
        op->have_item = false;
    }
    int r = ensure_boot(st, now, err, errlen);
    if (r)
        return r;

    /*
     * A due reconciliation (or a saved document to finish) goes before any new item: an
     * ambiguous outcome is settled while its evidence is fresh, and a month-end backlog of
     * new items must not hold it back for minutes. They reschedule themselves (settle,
     * backoff), so new items are not starved. Each query uses the items_due index.
     */
    int64_t id_rec = 0, next_rec = 0, id_fin = 0, next_fin = 0, id_new = 0, next_new = 0;
    if (op->want_id) {
        r = due_id(st, op->want_id, now, &id_new, err, errlen);
        if (r)
            return r;
        if (!id_new)
            return apbot_fail(err, errlen, APBOT_E_NOTFOUND, "item #%" PRId64 " is not due",
                              op->want_id);
    } else {
        r = first_due(st, MACHINE_RECONCILING, now, &id_rec, &next_rec, err, errlen);
        if (r == APBOT_OK)
            r = first_due(st, MACHINE_FINISHING, now, &id_fin, &next_fin, err, errlen);
        if (r == APBOT_OK && !id_rec && !id_fin)
            r = first_due(st, MACHINE_NEW, now, &id_new, &next_new, err, errlen);
        if (r)
            return r;
    }
    int64_t id = id_rec && (!id_fin || next_rec <= next_fin) ? id_rec : id_fin ? id_fin : id_new;
    if (!id)
        return apbot_fail(err, errlen, APBOT_E_NOTFOUND, "nothing is due");

    struct store_item it;
    r = get_item(st, Q_GET_ID, id, NULL, &it, err, errlen);
    if (r)
        return r;
    (void)store_restamp(&it, now); /* the rows were brought under this boot; belt and braces */
    enum machine_state next = it.state == MACHINE_NEW ? op->claimed->next : it.state;
    char actor[160];
    snprintf(actor, sizeof(actor), "runner:%s", op->owner);

    sqlite3_stmt *s = stmt_get(st, Q_CLAIM_UPDATE, err, errlen);
    if (!s) {
        r = APBOT_E_DB;
        goto out;
    }
    int64_t lease_until = now->wall_ms + op->lease_ms, lease_mono = now->mono_ms + op->lease_ms;
    sqlite3_bind_int64(s, 1, id);
    bind_text_now(s, 2, machine_state_name(next));
    bind_text_now(s, 3, op->owner);
    sqlite3_bind_int64(s, 4, lease_until);
    sqlite3_bind_int64(s, 5, lease_mono);
    bind_text_now(s, 6, now->boot);
    sqlite3_bind_int64(s, 7, it.next_at);
    sqlite3_bind_int64(s, 8, it.next_mono);
    if (it.has_settle)
        sqlite3_bind_int64(s, 9, it.settle_mono);
    else
        sqlite3_bind_null(s, 9);
    sqlite3_bind_int64(s, 10, now->wall_ms);
    int rc = sqlite3_step(s);
    stmt_done(s);
    if (rc != SQLITE_DONE) {
        r = db_fail(st, rc, err, errlen, "claiming an item");
        goto out;
    }
    if (next != it.state)
        r = add_event(st, id, now->wall_ms, machine_state_name(it.state), machine_state_name(next),
                      machine_event_name(MACHINE_EV_CLAIMED),
                      op->claimed->why ? op->claimed->why : "claimed", actor, err, errlen);
    if (r)
        goto out;
    /* Hand back what is now in the row: the row read above with the values just bound (the
     * UPDATE's SET list; test_store compares it with a fresh read). */
    op->it = it;
    memset(&it, 0, sizeof(it)); /* its strings are op->it's now */
    op->it.state = next;
    free(op->it.lease_owner);
    op->it.lease_owner = apbot_xstrdup(op->owner);
    op->it.lease_until = lease_until;
    op->it.lease_mono = lease_mono;
    snprintf(op->it.clock_boot, sizeof(op->it.clock_boot), "%s", now->boot);
    op->it.updated_at = now->wall_ms;
    op->have_item = true;
out:
    store_item_done(&it);
    return r;
}

static int sq_claim_id(struct store *st, int64_t id, const char *owner, const struct apbot_now *now,
                       int64_t lease_ms, const struct machine_step *claimed, struct store_item *ret,
                       char *err, size_t errlen)
{
    struct claim_op op = {
        .owner = owner, .now = now, .lease_ms = lease_ms, .claimed = claimed, .want_id = id};
    int r = run_write(st, claim_body, &op, err, errlen);
    if (r) {
        if (op.have_item)
            store_item_done(&op.it);
        return r;
    }
    *ret = op.it;
    return APBOT_OK;
}

static int sq_claim(struct store *st, const char *owner, const struct apbot_now *now,
                    int64_t lease_ms, const struct machine_step *claimed, struct store_item *ret,
                    char *err, size_t errlen)
{
    struct claim_op op = {.owner = owner, .now = now, .lease_ms = lease_ms, .claimed = claimed};
    int r = run_write(st, claim_body, &op, err, errlen);
    if (r) {
        if (op.have_item)
            store_item_done(&op.it);
        return r;
    }
    *ret = op.it;
    return APBOT_OK;
}

struct renew_op {
    int64_t id;
    const char *owner;
    const struct apbot_now *now;
    int64_t lease_ms;
};

static int renew_body(struct store *st, void *ctx, char *err, size_t errlen)
{
    struct renew_op *op = ctx;
    int r = ensure_boot(st, op->now, err, errlen);
    if (r)
        return r;
    sqlite3_stmt *s = stmt_get(st, Q_RENEW, err, errlen);
    if (!s)
        return APBOT_E_DB;
    sqlite3_bind_int64(s, 1, op->id);
    bind_text(s, 2, op->owner);
    sqlite3_bind_int64(s, 3, op->now->wall_ms + op->lease_ms);
    sqlite3_bind_int64(s, 4, op->now->mono_ms + op->lease_ms);
    bind_text(s, 5, op->now->boot);
    int rc = sqlite3_step(s);
    stmt_done(s);
    if (rc != SQLITE_DONE)
        return db_fail(st, rc, err, errlen, "renewing a lease");
    if (sqlite3_changes(SQDB(st)) != 1)
        return apbot_fail(err, errlen, APBOT_E_STATE,
                          "item #%" PRId64 ": lease lost (not held by %s)", op->id, op->owner);
    return APBOT_OK;
}

static int sq_renew(struct store *st, int64_t id, const char *owner, const struct apbot_now *now,
                    int64_t lease_ms, char *err, size_t errlen)
{
    struct renew_op op = {.id = id, .owner = owner, .now = now, .lease_ms = lease_ms};
    return run_write(st, renew_body, &op, err, errlen);
}

/* ---- apply ------------------------------------------------------------------------------ */

struct apply_op {
    int64_t id;
    const char *owner;
    const struct store_change *ch;
    const struct apbot_now *now;
    int64_t holder;         /* APBOT_E_CONFLICT: the item holding the document */
    struct store_item *ret; /* NULL, or the row as the change left it (when have_ret) */
    bool have_ret;
};

/* The id of another item holding doc, 0 if none. */
static int doc_holder(struct store *st, const char *doc, int64_t id, int64_t *ret_holder, char *err,
                      size_t errlen)
{
    sqlite3_stmt *s = stmt_get(st, Q_DOC_HOLDER, err, errlen);
    if (!s)
        return APBOT_E_DB;
    bind_text_max(s, 1, doc, STORE_TEXT_MAX);
    sqlite3_bind_int64(s, 2, id);
    int rc = sqlite3_step(s);
    *ret_holder = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
    stmt_done(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return db_fail(st, rc, err, errlen, "looking up the document's holder");
    return APBOT_OK;
}

/* The state text of a row this version cannot map, for the guard's message (best effort:
 * "" when it cannot be read). */
static void unknown_state_text(struct store *st, int64_t id, char *text, size_t len)
{
    sqlite3_stmt *s = NULL;
    text[0] = '\0';
    if (sqlite3_prepare_v2(SQDB(st), "SELECT state FROM items WHERE id = ?1", -1, &s, NULL) ==
        SQLITE_OK) {
        sqlite3_bind_int64(s, 1, id);
        if (sqlite3_step(s) == SQLITE_ROW)
            col_copy(s, 0, text, len);
    }
    sqlite3_finalize(s);
}

static int insert_evidence(struct store *st, int64_t item_id, int64_t at,
                           const struct store_evidence *ev, char *err, size_t errlen);

static int apply_body(struct store *st, void *ctx, char *err, size_t errlen)
{
    struct apply_op *op = ctx;
    const struct store_change *ch = op->ch;
    const struct apbot_now *now = op->now;
    op->holder = 0;
    if (op->have_ret) { /* a retry after SQLITE_BUSY: that attempt's row was rolled back */
        store_item_done(op->ret);
        op->have_ret = false;
    }
    int r = ensure_boot(st, now, err, errlen);
    if (r)
        return r;
    struct store_item it;
    r = get_item(st, Q_GET_ID, op->id, NULL, &it, err, errlen);
    if (r)
        return r;
    (void)store_restamp(&it, now);

    /* What the guard reads, all in this write transaction (it holds the queue's write lock,
     * so nothing read here can change before the UPDATE below): the row, its state text when
     * it is one this version cannot map, and who holds the document (one document, one
     * item: checked in the same write transaction that sets it). */
    char state_text[64] = "";
    if (it.state == MACHINE_STATE_INVALID)
        unknown_state_text(st, op->id, state_text, sizeof(state_text));
    if (ch->erp_doc) {
        r = doc_holder(st, ch->erp_doc, op->id, &op->holder, err, errlen);
        if (r)
            goto out;
    }
    r = store_apply_guard(&it, state_text, op->holder, op->owner, ch, now, err, errlen);
    if (r)
        goto out;

    const struct machine_step *step = ch->step;
    int64_t delay = store_step_delay_ms(&it, step, now, ch->backoff_ms, ch->settle_ms);
    bool keep = op->owner && ch->keep_lease;
    /* The row as this transaction read it already holds the lease the change keeps. */
    bool unchanged_lease = keep && it.lease_owner && strcmp(it.lease_owner, op->owner) == 0 &&
                           strcmp(it.clock_boot, now->boot) == 0;
    if (step->settle_mark) {
        it.has_settle = true;
        it.settle_mono = now->mono_ms;
        it.settle_at = now->wall_ms;
    }
    /* Every value the UPDATE writes, once: bound below, and the returned row is built from
     * them (store_apply_get) instead of being read back. */
    enum machine_state from = it.state;
    int64_t next_at = now->wall_ms + delay, next_mono = now->mono_ms + delay;
    size_t doc_len = ch->erp_doc ? store_text_cut(ch->erp_doc, STORE_TEXT_MAX) : 0;
    size_t reason_len = ch->reason ? store_text_cut(ch->reason, STORE_TEXT_MAX) : 0;
    bool post_mark = step->next == MACHINE_POSTING && from != MACHINE_POSTING;
    int64_t lease_until = keep ? it.lease_until : 0, lease_mono = keep ? it.lease_mono : 0;
    sqlite3_stmt *s = stmt_get(st, unchanged_lease ? Q_APPLY_KEEP : Q_APPLY_UPDATE, err, errlen);
    if (!s) {
        r = APBOT_E_DB;
        goto out;
    }
    sqlite3_bind_int64(s, 1, op->id);
    bind_text_now(s, 2, machine_state_name(step->next));
    sqlite3_bind_int(s, 3, step->counters.posts);
    sqlite3_bind_int(s, 4, step->counters.cycles);
    sqlite3_bind_int(s, 5, step->counters.attempts);
    sqlite3_bind_int64(s, 6, next_at);
    sqlite3_bind_int64(s, 7, next_mono);
    if (ch->erp_doc)
        sqlite3_bind_text(s, 8, ch->erp_doc, (int)doc_len, SQLITE_STATIC);
    else
        sqlite3_bind_null(s, 8);
    if (ch->reason)
        sqlite3_bind_text(s, 9, ch->reason, (int)reason_len, SQLITE_STATIC);
    else
        sqlite3_bind_null(s, 9);
    sqlite3_bind_int(s, 10, post_mark);
    bind_text_now(s, 11, keep ? op->owner : NULL);
    sqlite3_bind_int64(s, 12, lease_until);
    sqlite3_bind_int64(s, 13, now->wall_ms);
    sqlite3_bind_int64(s, 14, lease_mono);
    bind_text_now(s, 15, now->boot);
    if (it.has_settle)
        sqlite3_bind_int64(s, 16, it.settle_mono);
    else
        sqlite3_bind_null(s, 16);
    sqlite3_bind_int64(s, 17, it.settle_at);
    int rc = sqlite3_step(s);
    stmt_done(s);
    if (rc != SQLITE_DONE) {
        r = db_fail(st, rc, err, errlen, "updating an item");
        goto out;
    }

    /* The event keeps the machine's reason and the caller's detail together. */
    char detail[STORE_TEXT_MAX];
    store_event_detail(step, ch->detail, detail, sizeof(detail));
    r = add_event(st, op->id, now->wall_ms, machine_state_name(from),
                  machine_state_name(step->next), machine_event_name(ch->event), detail,
                  ch->actor ? ch->actor : (op->owner ? op->owner : "operator"), err, errlen);
    for (size_t i = 0; r == APBOT_OK && i < ch->n_evidence; i++)
        r = insert_evidence(st, op->id, now->wall_ms, &ch->evidence[i], err, errlen);
    /* The row as the UPDATE above left it (its SET list, value by value; test_store compares
     * it with a fresh read), without reading it back: the row read at the start of this
     * transaction with the values just bound. */
    if (r == APBOT_OK && op->ret) {
        struct store_item *n = op->ret;
        *n = it;
        memset(&it, 0, sizeof(it)); /* its strings are n's now */
        n->state = step->next;
        n->counters = (struct machine_counters){.posts = step->counters.posts,
                                                .cycles = step->counters.cycles,
                                                .attempts = step->counters.attempts};
        n->next_at = next_at;
        n->next_mono = next_mono;
        if (ch->erp_doc) {
            free(n->erp_doc);
            n->erp_doc = apbot_xstrndup(ch->erp_doc, doc_len);
        }
        if (ch->reason) {
            free(n->reason);
            n->reason = *ch->reason ? apbot_xstrndup(ch->reason, reason_len) : NULL;
        }
        if (post_mark)
            n->last_post_at = now->wall_ms;
        if (!unchanged_lease) {
            free(n->lease_owner);
            n->lease_owner = keep ? apbot_xstrdup(op->owner) : NULL;
            n->lease_until = lease_until;
            n->lease_mono = lease_mono;
            snprintf(n->clock_boot, sizeof(n->clock_boot), "%s", now->boot);
        }
        n->updated_at = now->wall_ms;
        op->have_ret = true;
    }
out:
    store_item_done(&it);
    return r;
}

static int sq_apply(struct store *st, int64_t id, const char *owner, const struct store_change *ch,
                    const struct apbot_now *now, int64_t *ret_holder, struct store_item *ret_item,
                    char *err, size_t errlen)
{
    struct apply_op op = {.id = id, .owner = owner, .ch = ch, .now = now, .ret = ret_item};
    int r = run_write(st, apply_body, &op, err, errlen);
    if (r == APBOT_E_CONFLICT)
        *ret_holder = op.holder;
    if (r != APBOT_OK && op.have_ret)
        store_item_done(ret_item); /* read, then the commit (or its sync) failed */
    return r;
}

/* ---- apply, then claim ------------------------------------------------------------------ */

struct apply_claim_op {
    struct apply_op apply;
    struct claim_op claim;
    bool claim_failed; /* this attempt's change went through, its claim did not */
};

/* The change, then the next claim in the same transaction; nothing due commits the change
 * alone. A failed claim fails the transaction (a failed statement may have rolled back more
 * than itself): sq_apply_claim then makes the change alone. */
static int apply_claim_body(struct store *st, void *ctx, char *err, size_t errlen)
{
    struct apply_claim_op *op = ctx;
    op->claim_failed = false;
    int r = apply_body(st, &op->apply, err, errlen);
    if (r)
        return r;
    r = claim_body(st, &op->claim, err, errlen);
    if (r == APBOT_E_NOTFOUND)
        return APBOT_OK;
    op->claim_failed = r != APBOT_OK;
    return r;
}

static int sq_apply_claim(struct store *st, int64_t id, const char *owner,
                          const struct store_change *ch, const struct apbot_now *now,
                          int64_t *ret_holder, struct store_item *ret_item, int64_t lease_ms,
                          const struct machine_step *claimed, struct store_item *ret_next,
                          bool *ret_claimed, char *err, size_t errlen)
{
    struct apply_claim_op op = {
        .apply = {.id = id, .owner = owner, .ch = ch, .now = now, .ret = ret_item},
        .claim = {.owner = owner, .now = now, .lease_ms = lease_ms, .claimed = claimed},
    };
    *ret_claimed = false;
    int r = run_write(st, apply_claim_body, &op, err, errlen);
    if (r == APBOT_OK) {
        if (op.claim.have_item) {
            *ret_next = op.claim.it;
            *ret_claimed = true;
        }
        return APBOT_OK;
    }
    /* What a failed attempt read is dropped. */
    if (op.apply.have_ret)
        store_item_done(ret_item);
    if (op.claim.have_item)
        store_item_done(&op.claim.it);
    if (r == APBOT_E_CONFLICT)
        *ret_holder = op.apply.holder;
    /* The change was refused or failed, or the commit or its sync did (the change may then be
     * in the queue): the answer store_apply would give. Only a failed claim, which failed the
     * transaction before its commit, leaves the change to be made alone (the next claim meets
     * the claim's trouble again and reports it). */
    if (!op.claim_failed)
        return r;
    return sq_apply(st, id, owner, ch, now, ret_holder, ret_item, err, errlen);
}

/* ---- evidence --------------------------------------------------------------------------- */

struct evidence_op {
    int64_t item_id;
    const struct store_evidence *ev;
    size_t n;
    int64_t at;
};

static int insert_evidence(struct store *st, int64_t item_id, int64_t at,
                           const struct store_evidence *ev, char *err, size_t errlen)
{
    sqlite3_stmt *s = stmt_get(st, Q_INSERT_EVIDENCE, err, errlen);
    if (!s)
        return APBOT_E_DB;
    sqlite3_bind_int64(s, 1, item_id);
    sqlite3_bind_int64(s, 2, at);
    bind_text_max_now(s, 3, ev->step, 64);
    bind_text_max_now(s, 4, ev->method, 16);
    bind_text_max_now(s, 5, ev->url, STORE_TEXT_MAX);
    sqlite3_bind_int(s, 6, ev->http_status);
    sqlite3_bind_int64(s, 7, ev->elapsed_ms);
    bind_text_max_now(s, 8, ev->transport, 512);
    bind_text_max_now(s, 9, ev->rule, 256);
    bind_text_max_now(s, 10, ev->outcome, 64);
    bind_text_max_now(s, 11, ev->excerpt, STORE_EXCERPT_MAX);
    int rc = sqlite3_step(s);
    stmt_done(s);
    if (rc != SQLITE_DONE)
        return db_fail(st, rc, err, errlen, "adding evidence");
    return APBOT_OK;
}

static int evidence_body(struct store *st, void *ctx, char *err, size_t errlen)
{
    struct evidence_op *op = ctx;
    for (size_t i = 0; i < op->n; i++) {
        int r = insert_evidence(st, op->item_id, op->at, &op->ev[i], err, errlen);
        if (r)
            return r;
    }
    return APBOT_OK;
}

static int sq_add_evidence(struct store *st, int64_t item_id, const struct store_evidence *ev,
                           size_t n, const struct apbot_now *now, char *err, size_t errlen)
{
    struct evidence_op op = {.item_id = item_id, .ev = ev, .n = n, .at = now->wall_ms};
    return run_write(st, evidence_body, &op, err, errlen);
}

/* ---- recovery --------------------------------------------------------------------------- */

struct boot_op {
    const struct apbot_now *now;
};

static int boot_body(struct store *st, void *ctx, char *err, size_t errlen)
{
    struct boot_op *op = ctx;
    return ensure_boot(st, op->now, err, errlen);
}

/* For the readers that compare stamps: a write transaction only when the boot changed. */
static int ensure_boot_tx(struct store *st, const struct apbot_now *now, char *err, size_t errlen)
{
    if (st->in_batch)
        return ensure_boot(st, now, err, errlen);
    bool same = false;
    int r = queue_boot_is(st, now->boot, &same, err, errlen);
    if (r || same)
        return r;
    struct boot_op op = {.now = now};
    return run_write(st, boot_body, &op, err, errlen);
}

static int sq_each_expired(struct store *st, const struct apbot_now *now, int64_t limit,
                           store_item_fn fn, void *ctx, char *err, size_t errlen)
{
    int r = ensure_boot_tx(st, now, err, errlen);
    if (r)
        return r;
    /* Collect first, then one item at a time, so fn may write (one transaction each). */
    int64_t *ids = NULL;
    size_t n = 0, cap = 0;
    sqlite3_stmt *s = stmt_get(st, Q_EXPIRED, err, errlen);
    if (!s)
        return APBOT_E_DB;
    bind_text(s, 1, now->boot);
    sqlite3_bind_int64(s, 2, now->mono_ms);
    sqlite3_bind_int64(s, 3, limit > 0 ? limit : STORE_EXPIRED_MAX);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (apbot_grow((void **)&ids, &cap, n, sizeof(*ids), STORE_EXPIRED_MAX) != APBOT_OK)
            break; /* bounded by LIMIT too; the rest waits for the next call */
        ids[n++] = sqlite3_column_int64(s, 0);
    }
    stmt_done(s);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        r = db_fail(st, rc, err, errlen, "looking for expired leases");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        struct store_item it;
        r = get_item(st, Q_GET_ID, ids[i], NULL, &it, err, errlen);
        if (r == APBOT_E_NOTFOUND) {
            r = APBOT_OK;
            continue;
        }
        if (r)
            goto out;
        (void)store_restamp(&it, now);
        /* Renewed (or finished) since the list was taken: not expired any more. */
        if (it.lease_owner && !store_lease_live(&it, now))
            r = fn(ctx, &it);
        store_item_done(&it);
        if (r)
            goto out;
    }
out:
    free(ids);
    return r;
}

/* ---- readers ---------------------------------------------------------------------------- */

static int sq_each_limit(struct store *st, enum machine_state state, int64_t limit,
                         store_item_fn fn, void *ctx, char *err, size_t errlen)
{
    /* A private statement, so fn may call back into the store (even store_each). */
    const char *sql = state == MACHINE_STATE_INVALID
                          ? "SELECT " ITEM_COLS " FROM items ORDER BY id LIMIT ?2"
                          : "SELECT " ITEM_COLS " FROM items WHERE state = ?1"
                            " ORDER BY created_at, id LIMIT ?2";
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(SQDB(st), sql, -1, &s, NULL);
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

static int sq_each_event(struct store *st, int64_t item_id, store_event_fn fn, void *ctx, char *err,
                         size_t errlen)
{
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(SQDB(st),
                                "SELECT id, item_id, at, from_state, to_state, event, detail,"
                                " actor FROM events WHERE item_id = ?1 ORDER BY id",
                                -1, &s, NULL);
    if (rc != SQLITE_OK)
        return db_fail(st, rc, err, errlen, "reading events");
    sqlite3_bind_int64(s, 1, item_id);
    int r = APBOT_OK;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        struct store_event_row row = col_event(s, false);
        r = fn(ctx, &row);
        if (r)
            break;
    }
    if (r == APBOT_OK && rc != SQLITE_DONE)
        r = db_fail(st, rc, err, errlen, "reading events");
    sqlite3_finalize(s);
    return r;
}

static int sq_each_evidence(struct store *st, int64_t item_id, store_evidence_fn fn, void *ctx,
                            char *err, size_t errlen)
{
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(SQDB(st),
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

static int sq_counts(struct store *st, struct store_counts *ret, char *err, size_t errlen)
{
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

static int sq_final_sums(struct store *st, int64_t from_ms, int64_t to_ms,
                         struct store_final_sum *ret, size_t max, size_t *ret_n, char *err,
                         size_t errlen)
{
    sqlite3_stmt *s = NULL;
    size_t n = 0;
    int r = APBOT_OK;
    int rc = sqlite3_prepare_v2(SQDB(st), STORE_FINAL_SUMS_SQL("?1", "?2"), -1, &s, NULL);

    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(s, 1, from_ms);
        sqlite3_bind_int64(s, 2, to_ms);
    }
    /* one statement: one read snapshot */
    while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (n == max) {
            r = apbot_fail(err, errlen, APBOT_E_LIMIT, "more than %zu states and currencies", max);
            break;
        }
        r = store_final_sum_row(&ret[n++], (const char *)sqlite3_column_text(s, 0),
                                (const char *)sqlite3_column_text(s, 1), sqlite3_column_int(s, 2),
                                sqlite3_column_int64(s, 3), sqlite3_column_int64(s, 4));
        if (r != APBOT_OK) {
            apbot_fail(err, errlen, r, "an item in an unknown final state");
            break;
        }
        rc = SQLITE_OK;
    }
    if (r == APBOT_OK && rc != SQLITE_DONE)
        r = db_fail(st, rc, err, errlen, "summing the final states");
    sqlite3_finalize(s);
    if (r == APBOT_OK)
        *ret_n = n;
    return r;
}

static int sq_next_due(struct store *st, const struct apbot_now *now, int64_t *ret_wait_ms,
                       char *err, size_t errlen)
{
    int r = ensure_boot_tx(st, now, err, errlen);
    if (r)
        return r;
    sqlite3_stmt *s = stmt_get(st, Q_NEXT_DUE, err, errlen);
    if (!s)
        return APBOT_E_DB;
    bind_text(s, 1, now->boot);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        if (sqlite3_column_type(s, 0) == SQLITE_NULL) {
            *ret_wait_ms = -1;
        } else {
            int64_t wait = sqlite3_column_int64(s, 0) - now->mono_ms;
            *ret_wait_ms = wait > 0 ? wait : 0;
        }
    } else {
        r = db_fail(st, rc, err, errlen, "finding the next due item");
    }
    stmt_done(s);
    return r;
}

static int sq_pending(struct store *st, bool *ret_any, char *err, size_t errlen)
{
    sqlite3_stmt *s = stmt_get(st, Q_PENDING, err, errlen);
    if (!s)
        return APBOT_E_DB;
    int r = APBOT_OK, rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        *ret_any = sqlite3_column_int(s, 0) != 0;
    else
        r = db_fail(st, rc, err, errlen, "looking for pending items");
    stmt_done(s);
    return r;
}

static int sq_schema_version(struct store *st, int *ret_version, char *err, size_t errlen)
{
    return user_version(st, ret_version, err, errlen);
}

/* On the handle's own connection, and on the writer connection in this handle's turns. */
static void sq_set_busy_timeout(struct store *st, int ms)
{
    sqlite3_busy_timeout(SQ(st)->own.db, ms);
    SQ(st)->own.busy_ms = ms;
}

/* ---- late commits ----------------------------------------------------------------------- */

struct late_op {
    const char *flow;
    int64_t ms, at;
};

static int late_body(struct store *st, void *ctx, char *err, size_t errlen)
{
    struct late_op *op = ctx;
    sqlite3_stmt *s = stmt_get(st, Q_NOTE_LATE, err, errlen);
    if (!s)
        return APBOT_E_DB;
    bind_text_max(s, 1, op->flow, 256);
    sqlite3_bind_int64(s, 2, op->ms);
    sqlite3_bind_int64(s, 3, op->at);
    int rc = sqlite3_step(s);
    stmt_done(s);
    if (rc != SQLITE_DONE)
        return db_fail(st, rc, err, errlen, "noting a late commit");
    return APBOT_OK;
}

static int sq_note_late_commit(struct store *st, const char *flow_name, int64_t ms,
                               const struct apbot_now *now, char *err, size_t errlen)
{
    struct late_op op = {.flow = flow_name, .ms = ms, .at = now->wall_ms};
    return run_write(st, late_body, &op, err, errlen);
}

static int sq_late_commit(struct store *st, const char *flow_name, struct store_late_commit *ret,
                          char *err, size_t errlen)
{
    sqlite3_stmt *s = stmt_get(st, Q_GET_LATE, err, errlen);
    if (!s)
        return APBOT_E_DB;
    bind_text_max(s, 1, flow_name, 256);
    int rc = sqlite3_step(s);
    int r = APBOT_OK;
    struct store_late_commit lc = {0};
    if (rc == SQLITE_ROW) {
        lc.max_ms = sqlite3_column_int64(s, 0);
        lc.at = sqlite3_column_int64(s, 1);
        lc.observations = sqlite3_column_int64(s, 2);
    } else if (rc != SQLITE_DONE) {
        r = db_fail(st, rc, err, errlen, "reading late commits");
    }
    stmt_done(s);
    if (r == APBOT_OK)
        *ret = lc;
    return r;
}

/* ---- copying a whole queue (store_copy) -------------------------------------------------- */

/* Rows per table and items per state, inside the caller's transaction. */
static int sq_tally_in(struct store *st, struct store_tally *ret, char *err, size_t errlen)
{
    struct store_tally t;
    memset(&t, 0, sizeof(t));
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(SQDB(st),
                                "SELECT (SELECT COUNT(*) FROM events), (SELECT COUNT(*) FROM"
                                " evidence), (SELECT COUNT(*) FROM late_commits)",
                                -1, &s, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) {
        int r = db_fail(st, rc, err, errlen, "counting rows");
        sqlite3_finalize(s);
        return r;
    }
    t.events = sqlite3_column_int64(s, 0);
    t.evidence = sqlite3_column_int64(s, 1);
    t.late_commits = sqlite3_column_int64(s, 2);
    sqlite3_finalize(s);
    int r = chain_last(st, &t.head_event_id, t.head_hash, err, errlen);
    if (r)
        return r;
    s = stmt_get(st, Q_COUNTS, err, errlen);
    if (!s)
        return APBOT_E_DB;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        enum machine_state state = col_state(s, 0);
        int64_t n = sqlite3_column_int64(s, 1);
        if (state == MACHINE_STATE_INVALID)
            t.unknown_state += n;
        else
            t.by_state[state] += n;
        t.items += n;
    }
    stmt_done(s);
    if (rc != SQLITE_DONE)
        return db_fail(st, rc, err, errlen, "counting items");
    *ret = t;
    return APBOT_OK;
}

static int sq_tally(struct store *st, struct store_tally *ret, char *err, size_t errlen)
{
    bool own = sqlite3_get_autocommit(SQDB(st));
    if (own) {
        int r = exec_sql(st, "BEGIN", err, errlen);
        if (r)
            return r;
    }
    int r = sq_tally_in(st, ret, err, errlen);
    if (own)
        (void)exec_sql(st, "COMMIT", NULL, 0);
    return r;
}

static int sq_dump(struct store *st, const struct store_dump *d, struct store_tally *ret_tally,
                   char *err, size_t errlen)
{
    /* BEGIN IMMEDIATE: no runner writes while the queue is copied. */
    int r = exec_sql(st, "BEGIN IMMEDIATE", err, errlen);
    if (r)
        return r;
    sqlite3_stmt *s = NULL;
    int rc =
        sqlite3_prepare_v2(SQDB(st), "SELECT " ITEM_COLS " FROM items ORDER BY id", -1, &s, NULL);
    while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        struct store_item it;
        row_to_item(s, &it);
        if (it.state == MACHINE_STATE_INVALID)
            r = apbot_fail(err, errlen, APBOT_E_STATE,
                           "item #%" PRId64 " is in a state this apbot does not know: copy the "
                           "queue with the apbot that wrote it",
                           it.id);
        else
            r = d->item(d->ctx, &it);
        store_item_done(&it);
        if (r)
            goto out;
        rc = SQLITE_OK;
    }
    if (rc != SQLITE_DONE) {
        r = db_fail(st, rc, err, errlen, "reading items");
        goto out;
    }
    sqlite3_finalize(s);
    s = NULL;
    rc = sqlite3_prepare_v2(SQDB(st), EVENT_CHAIN_ALL, -1, &s, NULL);
    while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        struct store_event_row row = col_event(s, true);
        r = d->event(d->ctx, &row);
        if (r)
            goto out;
        rc = SQLITE_OK;
    }
    if (rc != SQLITE_DONE) {
        r = db_fail(st, rc, err, errlen, "reading events");
        goto out;
    }
    sqlite3_finalize(s);
    s = NULL;
    rc = sqlite3_prepare_v2(SQDB(st),
                            "SELECT id, item_id, at, step, method, url, http_status, elapsed_ms,"
                            " transport, rule, outcome, excerpt FROM evidence ORDER BY id",
                            -1, &s, NULL);
    while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
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
        r = d->evidence(d->ctx, &row);
        if (r)
            goto out;
        rc = SQLITE_OK;
    }
    if (rc != SQLITE_DONE) {
        r = db_fail(st, rc, err, errlen, "reading evidence");
        goto out;
    }
    sqlite3_finalize(s);
    s = NULL;
    rc = sqlite3_prepare_v2(SQDB(st),
                            "SELECT flow, max_ms, at, observations FROM late_commits ORDER BY flow",
                            -1, &s, NULL);
    while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        struct store_late_commit lc = {.max_ms = sqlite3_column_int64(s, 1),
                                       .at = sqlite3_column_int64(s, 2),
                                       .observations = sqlite3_column_int64(s, 3)};
        r = d->late(d->ctx, (const char *)sqlite3_column_text(s, 0), &lc);
        if (r)
            goto out;
        rc = SQLITE_OK;
    }
    if (rc != SQLITE_DONE) {
        r = db_fail(st, rc, err, errlen, "reading late commits");
        goto out;
    }
    r = sq_tally_in(st, ret_tally, err, errlen);
out:
    sqlite3_finalize(s);
    (void)exec_sql(st, "ROLLBACK", NULL, 0); /* read only: nothing to keep */
    return r;
}

static int sq_load_begin(struct store *st, char *err, size_t errlen)
{
    int r = exec_sql(st, "BEGIN IMMEDIATE", err, errlen);
    if (r)
        return r;
    struct store_tally t;
    r = sq_tally_in(st, &t, err, errlen);
    if (r == APBOT_OK && (t.items || t.events || t.evidence || t.late_commits))
        r = apbot_fail(err, errlen, APBOT_E_STATE,
                       "store: the target queue is not empty (%" PRId64 " items, %" PRId64
                       " events, %" PRId64 " evidence rows): refused",
                       t.items, t.events, t.evidence);
    if (r)
        (void)exec_sql(st, "ROLLBACK", NULL, 0);
    return r;
}

/* Steps one bound INSERT (prepared with result rc) and finalizes it. */
static int load_step(struct store *st, sqlite3_stmt *s, int rc, char *err, size_t errlen,
                     const char *what)
{
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    int r = rc == SQLITE_DONE ? APBOT_OK : db_fail(st, rc, err, errlen, what);
    sqlite3_finalize(s);
    return r;
}

static int sq_load_item(struct store *st, const struct store_item *it, char *err, size_t errlen)
{
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(
        SQDB(st),
        "INSERT INTO items (id, key, fingerprint, state, posts, cycles, attempts, next_at,"
        " last_post_at, created_at, updated_at, lease_owner, lease_until, payload, source,"
        " erp_doc, reason, vendor_id, vendor_name, invoice_number, doc_type, issue_date,"
        " currency, exponent, total, clock_boot, next_mono, lease_mono, settle_mono, settle_at)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,"
        " ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30)",
        -1, &s, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(s, 1, it->id);
        bind_text(s, 2, it->key);
        bind_text(s, 3, it->fingerprint);
        bind_text(s, 4, machine_state_name(it->state));
        sqlite3_bind_int(s, 5, it->counters.posts);
        sqlite3_bind_int(s, 6, it->counters.cycles);
        sqlite3_bind_int(s, 7, it->counters.attempts);
        sqlite3_bind_int64(s, 8, it->next_at);
        sqlite3_bind_int64(s, 9, it->last_post_at);
        sqlite3_bind_int64(s, 10, it->created_at);
        sqlite3_bind_int64(s, 11, it->updated_at);
        bind_text(s, 12, it->lease_owner);
        sqlite3_bind_int64(s, 13, it->lease_until);
        bind_text(s, 14, it->payload ? it->payload : "");
        bind_text(s, 15, it->source ? it->source : "");
        bind_text(s, 16, it->erp_doc);
        bind_text(s, 17, it->reason);
        bind_text(s, 18, it->vendor_id ? it->vendor_id : "");
        bind_text(s, 19, it->vendor_name);
        bind_text(s, 20, it->invoice_number ? it->invoice_number : "");
        bind_text(s, 21, it->doc_type);
        bind_text(s, 22, it->issue_date);
        bind_text(s, 23, it->currency);
        sqlite3_bind_int(s, 24, it->exponent);
        sqlite3_bind_int64(s, 25, it->total);
        bind_text(s, 26, it->clock_boot);
        sqlite3_bind_int64(s, 27, it->next_mono);
        sqlite3_bind_int64(s, 28, it->lease_mono);
        if (it->has_settle)
            sqlite3_bind_int64(s, 29, it->settle_mono);
        else
            sqlite3_bind_null(s, 29);
        sqlite3_bind_int64(s, 30, it->settle_at);
    }
    return load_step(st, s, rc, err, errlen, "copying an item");
}

static int sq_load_event(struct store *st, const struct store_event_row *row, char *err,
                         size_t errlen)
{
    /* The chain is carried as it is (store_copy): a NULL hash fails the table's NOT NULL. */
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(SQDB(st),
                                "INSERT INTO events (id, item_id, at, from_state, to_state, event,"
                                " detail, actor, prev_hash, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6,"
                                " ?7, ?8, ?9, ?10)",
                                -1, &s, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(s, 1, row->id);
        sqlite3_bind_int64(s, 2, row->item_id);
        sqlite3_bind_int64(s, 3, row->at);
        bind_text(s, 4, row->from);
        bind_text(s, 5, row->to);
        bind_text(s, 6, row->event);
        bind_text(s, 7, row->detail);
        bind_text(s, 8, row->actor);
        for (int i = 0; i < 2; i++) {
            const unsigned char *h = i ? row->hash : row->prev_hash;
            if (h)
                sqlite3_bind_blob(s, 9 + i, h, STORE_HASH_LEN, SQLITE_TRANSIENT);
            else
                sqlite3_bind_null(s, 9 + i);
        }
    }
    return load_step(st, s, rc, err, errlen, "copying an event");
}

static int sq_load_evidence(struct store *st, const struct store_evidence_row *row, char *err,
                            size_t errlen)
{
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(
        SQDB(st),
        "INSERT INTO evidence (id, item_id, at, step, method, url, http_status, elapsed_ms,"
        " transport, rule, outcome, excerpt) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10,"
        " ?11, ?12)",
        -1, &s, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(s, 1, row->id);
        sqlite3_bind_int64(s, 2, row->item_id);
        sqlite3_bind_int64(s, 3, row->at);
        bind_text(s, 4, row->ev.step);
        bind_text(s, 5, row->ev.method);
        bind_text(s, 6, row->ev.url);
        sqlite3_bind_int(s, 7, row->ev.http_status);
        sqlite3_bind_int64(s, 8, row->ev.elapsed_ms);
        bind_text(s, 9, row->ev.transport);
        bind_text(s, 10, row->ev.rule);
        bind_text(s, 11, row->ev.outcome);
        bind_text(s, 12, row->ev.excerpt);
    }
    return load_step(st, s, rc, err, errlen, "copying evidence");
}

static int sq_load_late(struct store *st, const char *flow, const struct store_late_commit *lc,
                        char *err, size_t errlen)
{
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(SQDB(st),
                                "INSERT INTO late_commits (flow, max_ms, at, observations)"
                                " VALUES (?1, ?2, ?3, ?4)",
                                -1, &s, NULL);
    if (rc == SQLITE_OK) {
        bind_text(s, 1, flow);
        sqlite3_bind_int64(s, 2, lc->max_ms);
        sqlite3_bind_int64(s, 3, lc->at);
        sqlite3_bind_int64(s, 4, lc->observations);
    }
    return load_step(st, s, rc, err, errlen, "copying a late commit");
}

static int sq_load_end(struct store *st, bool commit, char *err, size_t errlen)
{
    int r = APBOT_OK;
    if (commit) {
        r = exec_sql(st, "COMMIT", err, errlen);
        if (r == APBOT_OK)
            return APBOT_OK;
    }
    (void)exec_sql(st, "ROLLBACK", NULL, 0);
    return r;
}

/* ---- the audit chain ------------------------------------------------------------------ */

static int sq_each_chained(struct store *st, store_event_fn fn, void *ctx, char *err, size_t errlen)
{
    /* One read transaction: a snapshot of the WAL that writers do not wait for. */
    bool own = sqlite3_get_autocommit(SQDB(st));
    int r = own ? exec_sql(st, "BEGIN", err, errlen) : APBOT_OK;
    if (r)
        return r;
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(SQDB(st), EVENT_CHAIN_ALL, -1, &s, NULL);
    while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        struct store_event_row row = col_event(s, true);
        r = fn(ctx, &row);
        if (r)
            break;
        rc = SQLITE_OK;
    }
    if (r == APBOT_OK && rc != SQLITE_DONE)
        r = db_fail(st, rc, err, errlen, "reading the audit events");
    sqlite3_finalize(s);
    if (own)
        (void)exec_sql(st, "COMMIT", NULL, 0);
    return r;
}

static int sq_audit_head(struct store *st, int64_t before_ms, struct store_audit_head *ret,
                         char *err, size_t errlen)
{
    /* Backwards from the last event: a report of a recent day reads only the days after it. */
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(SQDB(st),
                                "SELECT id, item_id, at, hash FROM events WHERE at < ?1"
                                " ORDER BY id DESC LIMIT 1",
                                -1, &s, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(s, 1, before_ms);
        rc = sqlite3_step(s);
    }
    int r = APBOT_OK;
    if (rc == SQLITE_ROW) {
        ret->event_id = sqlite3_column_int64(s, 0);
        ret->item_id = sqlite3_column_int64(s, 1);
        ret->at = sqlite3_column_int64(s, 2);
        const void *h = sqlite3_column_blob(s, 3);
        if (h && sqlite3_column_bytes(s, 3) == STORE_HASH_LEN)
            memcpy(ret->hash, h, STORE_HASH_LEN);
        else
            memset(ret->hash, 0, STORE_HASH_LEN);
    } else if (rc == SQLITE_DONE) {
        ret->event_id = 0;
    } else {
        r = db_fail(st, rc, err, errlen, "reading the audit chain's head");
    }
    sqlite3_finalize(s);
    return r;
}

static const struct store_ops sq_ops = {
    .name = "sqlite",
    .close = sq_close,
    .begin = sq_begin,
    .commit = sq_commit,
    .rollback = sq_rollback,
    .enqueue = sq_enqueue,
    .claim = sq_claim,
    .renew = sq_renew,
    .apply = sq_apply,
    .apply_claim = sq_apply_claim,
    .add_evidence = sq_add_evidence,
    .each_expired = sq_each_expired,
    .get = sq_get,
    .each_limit = sq_each_limit,
    .each_event = sq_each_event,
    .each_evidence = sq_each_evidence,
    .counts = sq_counts,
    .pending = sq_pending,
    .next_due = sq_next_due,
    .claim_id = sq_claim_id,
    .schema_version = sq_schema_version,
    .set_busy_timeout = sq_set_busy_timeout,
    .sync = sq_sync,
    .note_late_commit = sq_note_late_commit,
    .late_commit = sq_late_commit,
    .final_sums = sq_final_sums,
    .dump = sq_dump,
    .load_begin = sq_load_begin,
    .load_item = sq_load_item,
    .load_event = sq_load_event,
    .load_evidence = sq_load_evidence,
    .load_late = sq_load_late,
    .load_end = sq_load_end,
    .tally = sq_tally,
    .each_chained = sq_each_chained,
    .audit_head = sq_audit_head,
};
