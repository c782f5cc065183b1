/*
 * store_pg.c - the PostgreSQL backend of the queue (store-int.h), through libpq: one queue
 * shared by several bot hosts.
 *
 * Same tables, same rules as the SQLite backend: a state change is one transaction that
 * updates the row and appends its event; events and evidence are append-only (a trigger
 * refuses UPDATE, DELETE and TRUNCATE); one document belongs to one item, checked in the
 * transaction that sets it under an advisory lock on the document, so two hosts cannot
 * both take it. Transactions run READ COMMITTED with synchronous_commit on, but for the
 * handle's deferred and lazy writes (off; store_sync then flushes the server's WAL: an intent
 * to post is on disk before the form goes out); a claim picks its row with FOR UPDATE SKIP
 * LOCKED, so hosts never wait for each other's claims and never take the same item. A lock
 * timeout, a statement timeout, a serialization failure or a deadlock is "busy": the whole
 * transaction is retried (bounded, store_run_write).
 *
 * Outages. Every round trip is bounded (PG_ROUNDTRIP_MS, on top of the server's statement
 * timeout and the TCP keepalives and user timeout added to the connection string), so a cut
 * network, a frozen server or a pooler that stops forwarding cannot hang a caller. A failure
 * that means the server is gone or the connection is (store_pg_fault: connection exceptions,
 * an administrator's or a crash's shutdown, a round trip past its bound, a read-only server
 * after a failover) is never retried here: the handle is dead, every later call fails at once
 * with APBOT_E_UNAVAIL, and the caller opens the queue again (the runner rides the outage out
 * within a bound). What the lost transaction did is not known: the caller settles it as a
 * crash (the row as the queue recorded it decides).
 *
 * Clocks (store.h, "Backends"): every stamp and comparison uses the server's
 * clock_timestamp(), read once at the start of each transaction (and with each reading
 * query), under the boot id "pg-<queue id>-<server start ms>"; the caller's `now` decides
 * nothing here. Items handed out are translated into this process's CLOCK_BOOTTIME so the
 * pure decisions of store.h still hold for callers. The test hook
 * store_test_trust_caller_clock makes the caller's `now` the clock instead.
 *
 * Text: PostgreSQL stores UTF-8 only; a byte that is not valid UTF-8 is stored as '?'.
 * Schema: the table apbot_schema holds the version; migrations run under an advisory lock.
 */
#include "apbot/store.h"
#include "store-int.h"

#include <errno.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/buf.h"
#include "apbot/mem.h"
#include "base/unittest.h"
#include "store-test.h"

#define PG_NOW "floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
#define PG_PAGE 500 /* rows one reading query fetches at a time */
/* store_enqueue_many: rows one multi-row statement carries at most, and payload bytes */
#define PG_ENQ_CHUNK 1000
#define PG_ENQ_CHUNK_BYTES (8u << 20)
#define PG_ENQ_ARRAY_MAX (64u << 20) /* one array literal, the whole chunk's column */
#define PG_PARAMS_MAX 32             /* parameters of one statement */
/* The connection string's defaults (a setting of the string itself wins): a connection attempt
 * gives up after 10 s; an idle connection whose peer vanished is found by keepalives in 15 +
 * 3 x 5 = 30 s; data the peer does not acknowledge for 30 s drops the connection
 * (tcp_user_timeout, Linux). None of these applies to a Unix socket. */
#define PG_CONNECT_TIMEOUT "10"
#define PG_KEEPALIVES_IDLE "15"
#define PG_KEEPALIVES_INTERVAL "5"
#define PG_KEEPALIVES_COUNT "3"
#define PG_TCP_USER_TIMEOUT "30000"
/* The server cancels a statement of ours that runs longer (busy: the transaction is retried). */
#define PG_STATEMENT_TIMEOUT_MS 20000
/* The longest one round trip may take, measured here: past it the connection counts as lost
 * (a server that is alive answers within its statement timeout, even with an error). */
#define PG_ROUNDTRIP_MS (PG_STATEMENT_TIMEOUT_MS + 10000)
/* The schema's migrations run without a statement timeout, this long at most. */
#define PG_MIGRATE_ROUNDTRIP_MS (15 * 60 * 1000)
/* The audit chain's advisory lock ("apch", with the schema's hash as the second key). */
#define AUDIT_LOCK "1634755432"

/* Forward migrations: entry i brings schema version i to i + 1. Append, never edit. */
static const char *const pg_migrations[] = {
    /* 0 -> 1: the queue as SQLite's version 2 has it */
    "CREATE TABLE items ("
    " id BIGSERIAL PRIMARY KEY,"
    " key TEXT NOT NULL UNIQUE,"
    " fingerprint TEXT NOT NULL,"
    " payload TEXT NOT NULL,"
    " state TEXT NOT NULL,"
    " posts INTEGER NOT NULL DEFAULT 0,"
    " cycles INTEGER NOT NULL DEFAULT 0,"
    " attempts INTEGER NOT NULL DEFAULT 0,"
    " next_at BIGINT NOT NULL,"
    " last_post_at BIGINT NOT NULL DEFAULT 0,"
    " lease_owner TEXT,"
    " lease_until BIGINT NOT NULL DEFAULT 0,"
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
    " total BIGINT NOT NULL,"
    " created_at BIGINT NOT NULL,"
    " updated_at BIGINT NOT NULL,"
    " clock_boot TEXT NOT NULL DEFAULT '',"
    " next_mono BIGINT NOT NULL DEFAULT 0,"
    " lease_mono BIGINT NOT NULL DEFAULT 0,"
    " settle_mono BIGINT,"
    " settle_at BIGINT NOT NULL DEFAULT 0);"
    "CREATE INDEX items_due ON items (state, clock_boot, next_mono, id);"
    "CREATE INDEX items_state_created ON items (state, created_at, id);"
    "CREATE INDEX items_leased ON items (clock_boot, lease_mono) WHERE lease_owner IS NOT NULL;"
    "CREATE INDEX items_doc ON items (erp_doc) WHERE erp_doc IS NOT NULL;"
    "CREATE TABLE events ("
    " id BIGSERIAL PRIMARY KEY,"
    " item_id BIGINT NOT NULL REFERENCES items (id),"
    " at BIGINT NOT NULL,"
    " from_state TEXT,"
    " to_state TEXT NOT NULL,"
    " event TEXT NOT NULL,"
    " detail TEXT,"
    " actor TEXT NOT NULL);"
    "CREATE INDEX events_item ON events (item_id, id);"
    "CREATE TABLE evidence ("
    " id BIGSERIAL PRIMARY KEY,"
    " item_id BIGINT NOT NULL REFERENCES items (id),"
    " at BIGINT NOT NULL,"
    " step TEXT NOT NULL,"
    " method TEXT,"
    " url TEXT,"
    " http_status INTEGER NOT NULL DEFAULT 0,"
    " elapsed_ms BIGINT NOT NULL DEFAULT 0,"
    " transport TEXT,"
    " rule TEXT,"
    " outcome TEXT,"
    " excerpt TEXT);"
    "CREATE INDEX evidence_item ON evidence (item_id, id);"
    "CREATE FUNCTION apbot_append_only() RETURNS trigger LANGUAGE plpgsql AS $$"
    " BEGIN RAISE EXCEPTION '% is append-only', TG_TABLE_NAME"
    " USING ERRCODE = 'restrict_violation'; END $$;"
    "CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events"
    " FOR EACH ROW EXECUTE FUNCTION apbot_append_only();"
    "CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events"
    " FOR EACH STATEMENT EXECUTE FUNCTION apbot_append_only();"
    "CREATE TRIGGER evidence_append_only BEFORE UPDATE OR DELETE ON evidence"
    " FOR EACH ROW EXECUTE FUNCTION apbot_append_only();"
    "CREATE TRIGGER evidence_no_truncate BEFORE TRUNCATE ON evidence"
    " FOR EACH STATEMENT EXECUTE FUNCTION apbot_append_only();"
    "CREATE TABLE late_commits ("
    " flow TEXT PRIMARY KEY,"
    " max_ms BIGINT NOT NULL,"
    " at BIGINT NOT NULL,"
    " observations BIGINT NOT NULL);"
    /* 'queue_id' names this queue in the boot id; 'clock_boot' the boot every row is under */
    "CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "INSERT INTO store_meta (key, value) VALUES"
    " ('queue_id', substr(md5(random()::text || clock_timestamp()::text), 1, 16));",
    /* 1 -> 2: the audit chain (store.h). apbot_event_hash is store_event_hash (store_audit.c)
     * in SQL, byte for byte. A BEFORE INSERT trigger chains every event appended by any
     * statement: it takes the chain's lock (a transaction-level advisory lock per schema, held
     * until commit: the appends of all hosts go one at a time, so the chain is one total
     * order), reads the last event (committed before the lock was granted: READ COMMITTED
     * reads with a fresh snapshot, so the trigger refuses any other isolation level), gives
     * the new one the next id (ids follow the chain, without the sequence's gaps), its
     * prev_hash and hash. A row that comes with its hashes (store_copy carries a chain) keeps
     * them; its id must lie past the last. Nothing is written but the event: no head row,
     * which a batch would update hundreds of times in one transaction. The two SQL functions
     * are STABLE, as convert_to is, so that the planner inlines them into the trigger's
     * expression: declared IMMUTABLE they were not, and each hash cost 40 times as much. The
     * existing history is chained once, in id order. */
    "ALTER TABLE events ADD COLUMN prev_hash BYTEA, ADD COLUMN hash BYTEA;"
    "CREATE FUNCTION apbot_audit_field(t text) RETURNS bytea LANGUAGE sql STABLE AS $$"
    " SELECT CASE WHEN t IS NULL THEN decode('ffffffff', 'hex')"
    " ELSE int4send(octet_length(t)) || convert_to(t, 'UTF8') END $$;"
    "CREATE FUNCTION apbot_event_hash(prev bytea, id bigint, item_id bigint, at bigint,"
    " from_state text, to_state text, event text, detail text, actor text)"
    " RETURNS bytea LANGUAGE sql STABLE AS $$"
    " SELECT sha256(convert_to('APBOT-AUDIT-1', 'UTF8') || prev || int8send(id)"
    " || int8send(item_id) || int8send(at) || apbot_audit_field(from_state)"
    " || apbot_audit_field(to_state) || apbot_audit_field(event) || apbot_audit_field(detail)"
    " || apbot_audit_field(actor)) $$;"
    "DO $$ DECLARE r record; prev bytea := decode(repeat('00', 32), 'hex');"
    " BEGIN"
    " ALTER TABLE events DISABLE TRIGGER events_append_only;"
    " FOR r IN SELECT * FROM events ORDER BY id LOOP"
    "  UPDATE events SET prev_hash = prev, hash = apbot_event_hash(prev, r.id, r.item_id, r.at,"
    "   r.from_state, r.to_state, r.event, r.detail, r.actor) WHERE id = r.id"
    "   RETURNING hash INTO prev;"
    " END LOOP;"
    " ALTER TABLE events ENABLE TRIGGER events_append_only;"
    " END $$;"
    "ALTER TABLE events ALTER COLUMN prev_hash SET NOT NULL, ALTER COLUMN hash SET NOT NULL,"
    " ADD CHECK (length(prev_hash) = 32 AND length(hash) = 32);"
    "CREATE FUNCTION apbot_event_chain() RETURNS trigger LANGUAGE plpgsql AS $$"
    " DECLARE last_id bigint; last_hash bytea;"
    " BEGIN"
    " IF current_setting('transaction_isolation') <> 'read committed' THEN"
    "  RAISE EXCEPTION 'audit events are appended in READ COMMITTED transactions only'"
    "   USING ERRCODE = 'restrict_violation';"
    " END IF;"
    " PERFORM pg_advisory_xact_lock(" AUDIT_LOCK ", hashtext(TG_TABLE_SCHEMA));"
    " SELECT e.id, e.hash INTO last_id, last_hash FROM events e ORDER BY e.id DESC LIMIT 1;"
    " IF NEW.hash IS NULL THEN"
    "  NEW.id := COALESCE(last_id, 0) + 1;"
    "  NEW.prev_hash := COALESCE(last_hash, decode(repeat('00', 32), 'hex'));"
    "  NEW.hash := apbot_event_hash(NEW.prev_hash, NEW.id, NEW.item_id, NEW.at,"
    "   NEW.from_state, NEW.to_state, NEW.event, NEW.detail, NEW.actor);"
    " ELSIF NEW.id <= COALESCE(last_id, 0) THEN"
    "  RAISE EXCEPTION 'event % would go before the last event %', NEW.id, last_id"
    "   USING ERRCODE = 'restrict_violation';"
    " END IF;"
    " RETURN NEW;"
    " END $$;"
    "CREATE TRIGGER events_chain BEFORE INSERT ON events"
    " FOR EACH ROW EXECUTE FUNCTION apbot_event_chain();",
};
#define PG_SCHEMA_VERSION ((int)(sizeof(pg_migrations) / sizeof(pg_migrations[0])))

/* The columns every item query selects, in the order pg_row_item() reads them. */
#define ITEM_COLS                                                                                  \
    "id, key, fingerprint, state, posts, cycles, attempts, next_at, last_post_at, created_at,"     \
    " updated_at, lease_owner, lease_until, payload, source, erp_doc, reason, vendor_id,"          \
    " vendor_name, invoice_number, doc_type, issue_date, currency, exponent, total, clock_boot,"   \
    " next_mono, lease_mono, settle_mono, settle_at"
#define ITEM_NCOLS 30
/* The same, of the table aliased i (where another relation has an id or a state). */
#define ITEM_COLS_I                                                                                \
    "i.id, i.key, i.fingerprint, i.state, i.posts, i.cycles, i.attempts, i.next_at,"               \
    " i.last_post_at, i.created_at, i.updated_at, i.lease_owner, i.lease_until, i.payload,"        \
    " i.source, i.erp_doc, i.reason, i.vendor_id, i.vendor_name, i.invoice_number, i.doc_type,"    \
    " i.issue_date, i.currency, i.exponent, i.total, i.clock_boot, i.next_mono, i.lease_mono,"     \
    " i.settle_mono, i.settle_at"

/* Prepared statements. If you add one: add its SQL in pg_sql at the same index. */
enum pg_q {
    P_ENQUEUE,
    P_ENQUEUE_MANY,
    P_CLAIM,
    P_CLAIM_ID,
    P_RENEW,
    P_GET_ID,
    P_GET_KEY,
    P_LOCK_ID,
    P_LOCK_ID_DOC,
    P_DOC_HOLDER,
    P_APPLY_UPDATE,
    P_EVIDENCE,
    P_EXPIRED,
    P_EACH_ALL,
    P_EACH_STATE,
    P_EVENTS,
    P_EVIDENCE_ROWS,
    P_COUNTS,
    P_NEXT_DUE,
    P_PENDING,
    P_CLOCK,
    P_RESTAMP_ALL,
    P_SET_META_BOOT,
    P_NOTE_LATE,
    P_GET_LATE,
    P__COUNT
};

/* Every event with its audit chain hashes, in chain order (col_event). */
#define EVENT_CHAIN_ALL                                                                            \
    "SELECT id, item_id, at, from_state, to_state, event, detail, actor, prev_hash, hash"          \
    " FROM events ORDER BY id"

/* The server's clock and the queue's boot, with every transaction's first statement. */
#define CLOCK_QUERY "SELECT " PG_NOW ", (SELECT value FROM store_meta WHERE key = 'clock_boot')"

static const char *const pg_sql[] = {
    /* One statement: the existing row, or a new one with its `enqueued` event. A racing
     * insert of the same key makes both branches empty: the caller runs it again. */
    [P_ENQUEUE] =
        "WITH old AS (SELECT id, fingerprint, source, state FROM items WHERE key = $1),"
        " ins AS (INSERT INTO items (key, fingerprint, payload, state, next_at, source,"
        " vendor_id, vendor_name, invoice_number, doc_type, issue_date, currency, exponent, total,"
        " created_at, updated_at, clock_boot, next_mono)"
        " SELECT $1::text, $2::text, $3::text, 'new', $4::bigint, $5::text, $6::text, $7::text,"
        " $8::text, $9::text, $10::text, $11::text, $12::integer, $13::bigint, $4::bigint,"
        " $4::bigint, $14::text, $15::bigint"
        " WHERE NOT EXISTS (SELECT 1 FROM old) ON CONFLICT (key) DO NOTHING RETURNING id),"
        " ev AS (INSERT INTO events (item_id, at, from_state, to_state, event, detail, actor)"
        " SELECT id, $4::bigint, NULL, 'new', 'enqueued', $5::text, 'enqueue' FROM ins)"
        " SELECT 1, id, NULL, NULL, NULL FROM ins"
        " UNION ALL SELECT 0, id, fingerprint, source, state FROM old",
    /*
     * Several new items at once (store_enqueue_many): the rows come as one array per column
     * (distinct keys, in the order given, so that item ids and their `enqueued` events follow
     * it); a key already queued is answered with its row, a new one inserted with its event.
     * A key a racing insert committed meanwhile is in neither answer: the caller runs it again.
     */
    [P_ENQUEUE_MANY] =
        "WITH input AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[],"
        " $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[],"
        " $11::integer[], $12::bigint[]) WITH ORDINALITY AS t(key, fingerprint, payload, source,"
        " vendor_id, vendor_name, invoice_number, doc_type, issue_date, currency, exponent, total,"
        " ord)),"
        " old AS (SELECT i.id, i.key, i.fingerprint, i.source, i.state FROM items i"
        " WHERE i.key IN (SELECT key FROM input)),"
        " ins AS (INSERT INTO items (key, fingerprint, payload, state, next_at, source, vendor_id,"
        " vendor_name, invoice_number, doc_type, issue_date, currency, exponent, total,"
        " created_at, updated_at, clock_boot, next_mono)"
        " SELECT key, fingerprint, payload, 'new', $13::bigint, source, vendor_id, vendor_name,"
        " invoice_number, doc_type, issue_date, currency, exponent, total, $13::bigint,"
        " $13::bigint, $14::text, $15::bigint FROM input"
        " WHERE key NOT IN (SELECT key FROM old) ORDER BY ord"
        " ON CONFLICT (key) DO NOTHING RETURNING id, key, fingerprint, source),"
        " ev AS (INSERT INTO events (item_id, at, from_state, to_state, event, detail, actor)"
        " SELECT id, $13::bigint, NULL, 'new', 'enqueued', source, 'enqueue' FROM ins"
        " ORDER BY id)"
        " SELECT 1, id, key, fingerprint, source, 'new' FROM ins"
        " UNION ALL SELECT 0, id, key, fingerprint, source, state FROM old",
    /*
     * The whole claim in one statement. store_due and !store_lease_live in SQL: the first due
     * reconciling and finishing rows, and a new row only when neither is due (rows another
     * claim holds are skipped); of these the earlier due (reconciling on a tie), as the
     * SQLite backend picks; leased to $4 and, when new, moved to $3 with its `claimed` event.
     */
    [P_CLAIM] =
        "WITH r AS (SELECT id, state, next_mono, 0 AS pri FROM items WHERE state = 'reconciling'"
        " AND clock_boot = $1 AND next_mono <= $2 AND (lease_owner IS NULL OR lease_mono <= $2)"
        " ORDER BY next_mono, id LIMIT 1 FOR UPDATE SKIP LOCKED),"
        " f AS (SELECT id, state, next_mono, 1 AS pri FROM items WHERE state = 'finishing'"
        " AND clock_boot = $1 AND next_mono <= $2 AND (lease_owner IS NULL OR lease_mono <= $2)"
        " ORDER BY next_mono, id LIMIT 1 FOR UPDATE SKIP LOCKED),"
        " n AS (SELECT id, state, next_mono, 2 AS pri FROM items WHERE state = 'new'"
        " AND clock_boot = $1 AND next_mono <= $2 AND (lease_owner IS NULL OR lease_mono <= $2)"
        " AND NOT EXISTS (SELECT 1 FROM r) AND NOT EXISTS (SELECT 1 FROM f)"
        " ORDER BY next_mono, id LIMIT 1 FOR UPDATE SKIP LOCKED),"
        " pick AS (SELECT id, state FROM (SELECT * FROM r UNION ALL SELECT * FROM f"
        " UNION ALL SELECT * FROM n) c ORDER BY next_mono, pri LIMIT 1),"
        " u AS (UPDATE items i SET state = CASE WHEN p.state = 'new' THEN $3::text"
        " ELSE p.state END, lease_owner = $4, lease_until = $5, lease_mono = $6, updated_at = $7"
        " FROM pick p WHERE i.id = p.id RETURNING " ITEM_COLS_I ", p.state AS from_state),"
        " e AS (INSERT INTO events (item_id, at, from_state, to_state, event, detail, actor)"
        " SELECT id, $7::bigint, from_state, state, 'claimed', $8::text, $9::text FROM u"
        " WHERE from_state <> state)"
        " SELECT * FROM u",
    /* P_CLAIM of the one row $10 (store_claim_id), when it is due and unleased. */
    [P_CLAIM_ID] =
        "WITH pick AS (SELECT id, state FROM items WHERE id = $10"
        " AND state IN ('new', 'reconciling', 'finishing')"
        " AND clock_boot = $1 AND next_mono <= $2 AND (lease_owner IS NULL OR lease_mono <= $2)"
        " FOR UPDATE SKIP LOCKED),"
        " u AS (UPDATE items i SET state = CASE WHEN p.state = 'new' THEN $3::text"
        " ELSE p.state END, lease_owner = $4, lease_until = $5, lease_mono = $6, updated_at = $7"
        " FROM pick p WHERE i.id = p.id RETURNING " ITEM_COLS_I ", p.state AS from_state),"
        " e AS (INSERT INTO events (item_id, at, from_state, to_state, event, detail, actor)"
        " SELECT id, $7::bigint, from_state, state, 'claimed', $8::text, $9::text FROM u"
        " WHERE from_state <> state)"
        " SELECT * FROM u",
    [P_RENEW] = "UPDATE items SET lease_until = $3, lease_mono = $4"
                " WHERE id = $1 AND lease_owner = $2 AND clock_boot = $5",
    [P_GET_ID] = "SELECT " ITEM_COLS ", " PG_NOW " FROM items WHERE id = $1",
    [P_GET_KEY] = "SELECT " ITEM_COLS ", " PG_NOW " FROM items WHERE key = $1",
    [P_LOCK_ID] = "SELECT " ITEM_COLS " FROM items WHERE id = $1 FOR UPDATE",
    /* One document, one item: whoever sets a document number holds this lock on it until
     * commit, and the holder query runs after it (READ COMMITTED: a fresh snapshot). */
    [P_LOCK_ID_DOC] = "SELECT " ITEM_COLS ", pg_advisory_xact_lock(1634758756, hashtext($2))"
                      " FROM items WHERE id = $1 FOR UPDATE",
    [P_DOC_HOLDER] = "SELECT id FROM items WHERE erp_doc = $1 AND id <> $2 ORDER BY id LIMIT 1",
    [P_APPLY_UPDATE] =
        "WITH u AS (UPDATE items SET state = $2, posts = $3, cycles = $4, attempts = $5,"
        " next_at = $6, next_mono = $7, erp_doc = COALESCE($8, erp_doc),"
        " reason = CASE WHEN $9::text IS NULL THEN reason WHEN $9::text = '' THEN NULL"
        " ELSE $9::text END,"
        " last_post_at = CASE WHEN $10::boolean THEN $13::bigint ELSE last_post_at END,"
        " lease_owner = $11, lease_until = $12, lease_mono = $14, clock_boot = $15,"
        " settle_mono = $16::bigint, settle_at = $17, updated_at = $13 WHERE id = $1"
        " RETURNING id)"
        " INSERT INTO events (item_id, at, from_state, to_state, event, detail, actor)"
        " SELECT id, $13::bigint, $18::text, $2::text, $19::text, $20::text, $21::text FROM u",
    [P_EVIDENCE] =
        "INSERT INTO evidence (item_id, at, step, method, url, http_status, elapsed_ms,"
        " transport, rule, outcome, excerpt) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
    [P_EXPIRED] = "SELECT id FROM items WHERE lease_owner IS NOT NULL"
                  " AND (clock_boot <> $1 OR lease_mono <= $2) ORDER BY id LIMIT $3",
    [P_EACH_ALL] = "SELECT " ITEM_COLS ", " PG_NOW " FROM items WHERE id > $1 ORDER BY id LIMIT $2",
    [P_EACH_STATE] = "SELECT " ITEM_COLS ", " PG_NOW " FROM items WHERE state = $1"
                     " AND (created_at, id) > ($2, $3) ORDER BY created_at, id LIMIT $4",
    [P_EVENTS] = "SELECT id, item_id, at, from_state, to_state, event, detail, actor"
                 " FROM events WHERE item_id = $1 ORDER BY id",
    [P_EVIDENCE_ROWS] = "SELECT id, item_id, at, step, method, url, http_status, elapsed_ms,"
                        " transport, rule, outcome, excerpt FROM evidence WHERE item_id = $1"
                        " ORDER BY id",
    [P_COUNTS] = "SELECT state, count(*), min(created_at) FROM items GROUP BY state",
    [P_NEXT_DUE] = "SELECT min(next_mono) FROM items WHERE clock_boot = $1"
                   " AND state IN ('new', 'reconciling', 'finishing')",
    [P_PENDING] = "SELECT EXISTS (SELECT 1 FROM items WHERE state IN ('new', 'checking', "
                  "'posting', 'reconciling', 'finishing'))",
    [P_CLOCK] = CLOCK_QUERY,
    /* store_restamp for every row of another boot (settle_at keeps the original moment). */
    [P_RESTAMP_ALL] = "UPDATE items SET clock_boot = $1, next_mono = $2::bigint, next_at = $3,"
                      " lease_mono = CASE WHEN lease_owner IS NULL THEN 0 ELSE $2::bigint END,"
                      " settle_mono = CASE WHEN settle_mono IS NULL THEN NULL ELSE $2::bigint END"
                      " WHERE clock_boot <> $1",
    [P_SET_META_BOOT] = "INSERT INTO store_meta (key, value) VALUES ('clock_boot', $1)"
                        " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    [P_NOTE_LATE] =
        "INSERT INTO late_commits (flow, max_ms, at, observations) VALUES ($1, $2, $3, 1)"
        " ON CONFLICT (flow) DO UPDATE SET observations = late_commits.observations + 1,"
        " at = CASE WHEN excluded.max_ms > late_commits.max_ms THEN excluded.at"
        " ELSE late_commits.at END, max_ms = GREATEST(late_commits.max_ms, excluded.max_ms)",
    [P_GET_LATE] = "SELECT max_ms, at, observations FROM late_commits WHERE flow = $1",
};
_Static_assert(sizeof(pg_sql) / sizeof(pg_sql[0]) == P__COUNT, "every statement needs SQL");

/* The PostgreSQL handle: the shared part first (store-int.h). */
struct pg {
    struct store base;
    PGconn *conn;                 /* NULL once the connection was lost */
    bool dead;                    /* the connection was lost: every call fails */
    char lost_why[200];           /* what lost it, for every later call's message */
    int rt_ms;                    /* the bound on one round trip (PG_ROUNDTRIP_MS) */
    bool trust;                   /* store_test_trust_caller_clock at open */
    bool prepared[P__COUNT];      /* prepared on this connection */
    char boot[APBOT_BOOT_ID_LEN]; /* this server's boot: "pg-<queue id>-<start ms>" */
    char *password;               /* only to scrub it from messages; NULL when none */
    bool in_load;                 /* between load_begin and load_end */
    /* the current write transaction */
    const struct apbot_now *caller_now; /* what the caller passed (trusted in tests) */
    struct apbot_now txnow;             /* the clock every stamp of it uses */
    bool unsynced; /* a STORE_DEFERRED commit is not known to be flushed (pg_sync) */
};
#define PG(st) ((struct pg *)(st))

/* ---- connection strings -------------------------------------------------------------------- */

bool store_pg_is_conninfo(const char *path);
bool store_pg_has_password(const char *path);

bool store_pg_is_conninfo(const char *path)
{
    char *msg = NULL;
    PQconninfoOption *opts = PQconninfoParse(path, &msg);
    PQfreemem(msg);
    if (!opts)
        return false;
    PQconninfoFree(opts);
    return true;
}

/* The password a connection string carries, heap-owned, or NULL. */
static char *conninfo_password(const char *path)
{
    char *msg = NULL;
    PQconninfoOption *opts = PQconninfoParse(path, &msg);
    PQfreemem(msg);
    char *pw = NULL;
    for (PQconninfoOption *o = opts; o && o->keyword; o++)
        if (strcmp(o->keyword, "password") == 0 && o->val && *o->val)
            pw = apbot_xstrdup(o->val);
    PQconninfoFree(opts);
    return pw;
}

bool store_pg_has_password(const char *path)
{
    char *pw = conninfo_password(path);
    bool has = pw != NULL;
    free(pw);
    return has;
}

/* Replaces every occurrence of secret in buf (NUL-terminated, size len) by ***. */
static void scrub(char *buf, size_t len, const char *secret)
{
    if (!buf || !secret || !*secret)
        return;
    size_t sl = strlen(secret);
    char *hit;
    (void)len; /* the text only shrinks */
    while ((hit = strstr(buf, secret)) != NULL) {
        if (sl >= 3) {
            memcpy(hit, "***", 3);
            memmove(hit + 3, hit + sl, strlen(hit + sl) + 1);
        } else {
            memset(hit, '*', sl);
        }
    }
}

/* ---- errors -------------------------------------------------------------------------------- */

/*
 * What a failed statement means (store-test.h): the server is gone or the connection is
 * (lost), a conflict worth running the whole transaction again (busy), or a failure of the
 * statement itself (failed). Pure; table-tested in test_pg_store.
 */
UNITTEST enum store_pg_fault store_pg_fault(const char *sqlstate, bool connection_bad)
{
    static const struct {
        const char *code; /* a SQLSTATE, or a class of two characters */
        enum store_pg_fault fault;
    } table[] = {
        {"08", STORE_PG_LOST},    /* connection exception (failure, refused, ...) */
        {"57P01", STORE_PG_LOST}, /* admin_shutdown: a fast shutdown, pg_terminate_backend */
        {"57P02", STORE_PG_LOST}, /* crash_shutdown: another backend crashed */
        {"57P03", STORE_PG_LOST}, /* cannot_connect_now: starting up, shutting down */
        {"57P05", STORE_PG_LOST}, /* idle_session_timeout: the server ended the session */
        {"25P03", STORE_PG_LOST}, /* idle_in_transaction_session_timeout: ended too */
        {"53300", STORE_PG_LOST}, /* too_many_connections */
        {"25006", STORE_PG_LOST}, /* read_only_sql_transaction: a standby after a failover;
                                   * a new connection finds the primary (target_session_attrs) */
        {"40001", STORE_PG_BUSY}, /* serialization_failure */
        {"40P01", STORE_PG_BUSY}, /* deadlock_detected */
        {"55P03", STORE_PG_BUSY}, /* lock_not_available: the lock timeout */
        {"57014", STORE_PG_BUSY}, /* query_canceled: the statement timeout */
    };
    if (connection_bad)
        return STORE_PG_LOST;
    if (!sqlstate || strlen(sqlstate) != 5)
        return STORE_PG_FAILED;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (strncmp(sqlstate, table[i].code, strlen(table[i].code)) == 0)
            return table[i].fault;
    return STORE_PG_FAILED;
}

/* A connection that could not be made (store-test.h): unavailable unless the server answers a
 * ping (then it refused us: credentials, database, role - a setting to fix, not weather). */
UNITTEST int store_pg_connect_fault(int ping)
{
    switch ((PGPing)ping) {
    case PQPING_OK:
    case PQPING_NO_ATTEMPT:
        return APBOT_E_IO;
    case PQPING_REJECT:
    case PQPING_NO_RESPONSE:
        return APBOT_E_UNAVAIL;
    }
    return APBOT_E_UNAVAIL;
}

/* The connection is gone: closed now (a server that is still there sees the session end and
 * drops its locks), every later call fails at once. */
static void pg_lose(struct pg *h)
{
    h->dead = true;
    if (h->conn) {
        PQfinish(h->conn);
        h->conn = NULL;
    }
}

/*
 * Fills err from a failed result (NULL: from the connection, or a round trip that brought no
 * result: lost) and returns the mapped code: APBOT_E_BUSY for a retryable conflict,
 * APBOT_E_UNAVAIL for a lost connection (the handle is dead from now on), APBOT_E_DB for the
 * rest. timed_out: the round trip ran past its bound. Never shows the password.
 */
static int pg_fail_ex(struct pg *h, PGresult *res, bool timed_out, char *err, size_t errlen,
                      const char *what)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    if (!msg || !*msg)
        msg = h->conn ? PQerrorMessage(h->conn) : NULL;
    char text[512];
    if (timed_out)
        snprintf(text, sizeof(text), "no answer within %d ms", h->rt_ms);
    else
        snprintf(text, sizeof(text), "%s", msg && *msg ? msg : "unknown error");
    text[strcspn(text, "\n")] = '\0';
    bool bad = !res || !h->conn || PQstatus(h->conn) != CONNECTION_OK;
    int rc = APBOT_E_DB;
    const char *lost = "";
    switch (store_pg_fault(state, bad)) {
    case STORE_PG_LOST:
        pg_lose(h);
        rc = APBOT_E_UNAVAIL;
        lost = "lost the connection to the database: ";
        break;
    case STORE_PG_BUSY:
        rc = APBOT_E_BUSY;
        break;
    case STORE_PG_FAILED:
        break;
    }
    rc = apbot_fail(err, errlen, rc, "store: %s: %s%s%s%s", what, lost, text,
                    state ? " SQLSTATE " : "", state ? state : "");
    if (rc == APBOT_E_UNAVAIL)
        snprintf(h->lost_why, sizeof(h->lost_why), "%.60s: %.130s", what, text);
    if (err)
        scrub(err, errlen, h->password);
    return rc;
}

static int pg_fail(struct pg *h, PGresult *res, char *err, size_t errlen, const char *what)
{
    return pg_fail_ex(h, res, false, err, errlen, what);
}

static int pg_dead(const struct pg *h, char *err, size_t errlen)
{
    int rc = apbot_fail(err, errlen, APBOT_E_UNAVAIL,
                        "store: the connection to the database was lost earlier (%s); open the "
                        "queue again",
                        h->lost_why);
    if (err)
        scrub(err, errlen, h->password);
    return rc;
}

/* ---- one round trip, bounded ---------------------------------------------------------------- */

/* Waits until the connection's socket is ready for events or the deadline (mono ms, 0: none)
 * passes: 1 ready, 0 deadline, -1 error. */
static int pg_poll(struct pg *h, short events, int64_t deadline)
{
    int fd = PQsocket(h->conn);
    if (fd < 0)
        return -1;
    for (int i = 0; i < 1000000; i++) {
        int timeout = -1;
        if (deadline > 0) {
            int64_t left = deadline - apbot_clock_mono_ms();
            if (left <= 0)
                return 0;
            timeout = left > INT_MAX ? INT_MAX : (int)left;
        }
        struct pollfd pfd = {.fd = fd, .events = events};
        int n = poll(&pfd, 1, timeout);
        if (n > 0)
            return 1;
        if (n == 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
    return -1;
}

/*
 * Collects the answer to what was just sent (sent: the send call's result), within the round
 * trip's bound: the last result, or the first error among them (as PQexec). NULL when no
 * result came (the connection failed, or *ret_timeout: the bound ran out); the caller then
 * counts the connection as lost, whatever it may still say: its state is not known.
 */
static PGresult *pg_collect(struct pg *h, int sent, bool *ret_timeout)
{
    *ret_timeout = false;
    if (!sent)
        return NULL;
    int64_t deadline = h->rt_ms > 0 ? apbot_clock_mono_ms() + h->rt_ms : 0;
    for (int f; (f = PQflush(h->conn)) != 0;) {
        int w = f < 0 ? -1 : pg_poll(h, POLLIN | POLLOUT, deadline);
        *ret_timeout = w == 0;
        if (w <= 0 || !PQconsumeInput(h->conn))
            return NULL;
    }
    PGresult *keep = NULL;
    for (;;) {
        while (PQisBusy(h->conn)) {
            int w = pg_poll(h, POLLIN, deadline);
            *ret_timeout = w == 0;
            if (w <= 0 || !PQconsumeInput(h->conn)) {
                PQclear(keep);
                return NULL;
            }
        }
        PGresult *r = PQgetResult(h->conn);
        if (!r)
            break;
        if (keep && PQresultStatus(keep) == PGRES_FATAL_ERROR) {
            PQclear(r);
        } else {
            PQclear(keep);
            keep = r;
        }
    }
    return keep;
}

/*
 * A round trip's result when its status is a success (tuples or command), else NULL with err
 * filled and *ret_rc set (pg_fail_ex). res: what pg_collect returned.
 */
static PGresult *pg_checked(struct pg *h, PGresult *res, bool timed_out, int *ret_rc, char *err,
                            size_t errlen, const char *what)
{
    ExecStatusType s = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (res && (s == PGRES_TUPLES_OK || s == PGRES_COMMAND_OK))
        return res;
    *ret_rc = pg_fail_ex(h, res, timed_out, err, errlen, what);
    PQclear(res);
    return NULL;
}

/* ---- statements ---------------------------------------------------------------------------- */

/* Parameters of one statement, all as text (NULL = SQL NULL). */
struct pp {
    const char *v[PG_PARAMS_MAX];
    char num[PG_PARAMS_MAX][24];
    char *own[PG_PARAMS_MAX]; /* cleaned copies, freed by pp_done */
    int n;
};

static void pp_i64(struct pp *p, int64_t x)
{
    snprintf(p->num[p->n], sizeof(p->num[0]), "%" PRId64, x);
    p->v[p->n] = p->num[p->n];
    p->n++;
}

static void pp_bool(struct pp *p, bool b)
{
    p->v[p->n++] = b ? "t" : "f";
}

/* The length of the valid UTF-8 sequence at u[i] (of n bytes), 0 when it is not valid. */
static size_t utf8_seq(const unsigned char *u, size_t i, size_t n)
{
    unsigned c = u[i];
    size_t len = c < 0x80                 ? 1
                 : c >= 0xC2 && c <= 0xDF ? 2
                 : (c & 0xF0) == 0xE0     ? 3
                 : c >= 0xF0 && c <= 0xF4 ? 4
                                          : 0;
    if (len == 0 || i + len > n)
        return 0;
    for (size_t k = 1; k < len; k++)
        if ((u[i + k] & 0xC0) != 0x80)
            return 0;
    if (len == 3 && ((c == 0xE0 && u[i + 1] < 0xA0) || (c == 0xED && u[i + 1] >= 0xA0)))
        return 0; /* overlong, or a surrogate */
    if (len == 4 && ((c == 0xF0 && u[i + 1] < 0x90) || (c == 0xF4 && u[i + 1] >= 0x90)))
        return 0;
    return len;
}

/* s cut to max bytes at a UTF-8 boundary, with every byte that is not UTF-8 made '?': s
 * itself when it needs neither, else a copy in *ret_own (the caller frees it). */
static const char *pg_clean(const char *s, size_t max, char **ret_own)
{
    *ret_own = NULL;
    const unsigned char *u = (const unsigned char *)s;
    size_t n = store_text_cut(s, max);
    bool clean = s[n] == '\0';
    for (size_t i = 0, len; clean && i < n; i += len)
        clean = (len = utf8_seq(u, i, n)) != 0;
    if (clean)
        return s; /* as it is: no copy */
    char *copy = apbot_xmalloc(n + 1);
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t len = utf8_seq(u, i, n);
        if (len == 0) {
            copy[o++] = '?';
            i++;
        } else {
            memcpy(copy + o, s + i, len);
            o += len;
            i += len;
        }
    }
    copy[o] = '\0';
    *ret_own = copy;
    return copy;
}

/* Text cut to max bytes at a UTF-8 boundary, with every byte that is not UTF-8 made '?'. */
static void pp_text_max(struct pp *p, const char *s, size_t max)
{
    if (!s) {
        p->v[p->n++] = NULL;
        return;
    }
    p->v[p->n] = pg_clean(s, max, &p->own[p->n]);
    p->n++;
}

static void pp_text(struct pp *p, const char *s)
{
    pp_text_max(p, s, SIZE_MAX / 2);
}

static void pp_done(struct pp *p)
{
    for (int i = 0; i < p->n; i++)
        free(p->own[i]);
}

/*
 * Runs prepared statement q with p's parameters. Returns the result when its status is a
 * success (tuples or command), else NULL with err filled and *ret_rc set; p is released.
 */
static PGresult *pg_run(struct pg *h, enum pg_q q, struct pp *p, int *ret_rc, char *err,
                        size_t errlen, const char *what)
{
    PGresult *res = NULL;
    bool timed_out = false;
    char name[16];
    snprintf(name, sizeof(name), "apbot_q%d", (int)q);
    if (h->dead) {
        *ret_rc = pg_dead(h, err, errlen);
        goto out;
    }
    if (!h->prepared[q]) {
        res = pg_collect(h, PQsendPrepare(h->conn, name, pg_sql[q], 0, NULL), &timed_out);
        res = pg_checked(h, res, timed_out, ret_rc, err, errlen, what);
        if (!res)
            goto out;
        PQclear(res);
        h->prepared[q] = true;
    }
    res = pg_collect(
        h, PQsendQueryPrepared(h->conn, name, p ? p->n : 0, p ? p->v : NULL, NULL, NULL, 0),
        &timed_out);
    res = pg_checked(h, res, timed_out, ret_rc, err, errlen, what);
out:
    if (p)
        pp_done(p);
    return res;
}

/* Runs plain SQL (no parameters, possibly several statements); the last result is kept. */
static PGresult *pg_exec(struct pg *h, const char *sql, int *ret_rc, char *err, size_t errlen,
                         const char *what)
{
    if (h->dead) {
        *ret_rc = pg_dead(h, err, errlen);
        return NULL;
    }
    bool timed_out = false;
    PGresult *res = pg_collect(h, PQsendQuery(h->conn, sql), &timed_out);
    return pg_checked(h, res, timed_out, ret_rc, err, errlen, what);
}

/* Runs sql with p's parameters (unprepared); p is released. */
static PGresult *pg_exec_params(struct pg *h, const char *sql, struct pp *p, int *ret_rc, char *err,
                                size_t errlen, const char *what)
{
    PGresult *res = NULL;
    if (h->dead) {
        *ret_rc = pg_dead(h, err, errlen);
    } else {
        bool timed_out = false;
        res = pg_collect(h, PQsendQueryParams(h->conn, sql, p->n, NULL, p->v, NULL, NULL, 0),
                         &timed_out);
        res = pg_checked(h, res, timed_out, ret_rc, err, errlen, what);
    }
    pp_done(p);
    return res;
}

static int pg_exec_ok(struct pg *h, const char *sql, char *err, size_t errlen, const char *what)
{
    int rc = APBOT_OK;
    PGresult *res = pg_exec(h, sql, &rc, err, errlen, what);
    PQclear(res);
    return res ? APBOT_OK : rc;
}

/* ---- reading rows --------------------------------------------------------------------------- */

static int64_t col_i64(const PGresult *res, int row, int col)
{
    if (PQgetisnull(res, row, col))
        return 0;
    return strtoll(PQgetvalue(res, row, col), NULL, 10);
}

static int col_int(const PGresult *res, int row, int col)
{
    int64_t v = col_i64(res, row, col);
    return v < 0 ? 0 : v > 1000000 ? 1000000 : (int)v;
}

static char *col_dup(const PGresult *res, int row, int col)
{
    return PQgetisnull(res, row, col) ? NULL : apbot_xstrdup(PQgetvalue(res, row, col));
}

static const char *col_str(const PGresult *res, int row, int col)
{
    return PQgetisnull(res, row, col) ? NULL : PQgetvalue(res, row, col);
}

static void col_copy(const PGresult *res, int row, int col, char *buf, size_t len)
{
    snprintf(buf, len, "%s", PQgetvalue(res, row, col));
}

/* A bytea column in the text protocol's hex form ("\\x" + 64 digits) into 32 bytes; false
 * when NULL or of another length. */
static bool col_hash(const PGresult *res, int row, int col, unsigned char out[STORE_HASH_LEN])
{
    if (PQgetisnull(res, row, col))
        return false;
    const char *v = PQgetvalue(res, row, col);
    char text[2 * STORE_HASH_LEN + 8];
    if (strncmp(v, "\\x", 2) != 0 || strlen(v) != 2 + 2 * STORE_HASH_LEN)
        return false;
    snprintf(text, sizeof(text), "0:%s", v + 2);
    struct store_audit_head h;
    if (store_audit_parse_head(text, &h) != APBOT_OK)
        return false;
    memcpy(out, h.hash, STORE_HASH_LEN);
    return true;
}

/* An event row of columns id, item_id, at, from_state, to_state, event, detail, actor and,
 * when the result has them and prev and hash are given, prev_hash and hash (decoded into
 * prev and hash, the caller's), valid while res is. */
static struct store_event_row col_event(const PGresult *res, int i, unsigned char *prev,
                                        unsigned char *hash)
{
    struct store_event_row row = {
        .id = col_i64(res, i, 0),
        .item_id = col_i64(res, i, 1),
        .at = col_i64(res, i, 2),
        .from = col_str(res, i, 3),
        .to = col_str(res, i, 4),
        .event = col_str(res, i, 5),
        .detail = col_str(res, i, 6),
        .actor = col_str(res, i, 7),
    };
    if (prev && hash && PQnfields(res) >= 10) {
        if (col_hash(res, i, 8, prev))
            row.prev_hash = prev;
        if (col_hash(res, i, 9, hash))
            row.hash = hash;
    }
    return row;
}

/* Reads row `row` (ITEM_COLS from column 0) into *it, raw: stamps on the server's clock. */
static void pg_row_item(const PGresult *res, int row, struct store_item *it)
{
    memset(it, 0, sizeof(*it));
    it->id = col_i64(res, row, 0);
    col_copy(res, row, 1, it->key, sizeof(it->key));
    col_copy(res, row, 2, it->fingerprint, sizeof(it->fingerprint));
    it->state = machine_state_from_name(col_str(res, row, 3));
    it->counters.posts = col_int(res, row, 4);
    it->counters.cycles = col_int(res, row, 5);
    it->counters.attempts = col_int(res, row, 6);
    it->next_at = col_i64(res, row, 7);
    it->last_post_at = col_i64(res, row, 8);
    it->created_at = col_i64(res, row, 9);
    it->updated_at = col_i64(res, row, 10);
    it->lease_owner = col_dup(res, row, 11);
    it->lease_until = col_i64(res, row, 12);
    it->payload = col_dup(res, row, 13);
    it->source = col_dup(res, row, 14);
    it->erp_doc = col_dup(res, row, 15);
    it->reason = col_dup(res, row, 16);
    it->vendor_id = col_dup(res, row, 17);
    it->vendor_name = col_dup(res, row, 18);
    it->invoice_number = col_dup(res, row, 19);
    col_copy(res, row, 20, it->doc_type, sizeof(it->doc_type));
    col_copy(res, row, 21, it->issue_date, sizeof(it->issue_date));
    col_copy(res, row, 22, it->currency, sizeof(it->currency));
    it->exponent = (int)col_i64(res, row, 23);
    it->total = col_i64(res, row, 24);
    col_copy(res, row, 25, it->clock_boot, sizeof(it->clock_boot));
    it->next_mono = col_i64(res, row, 26);
    it->lease_mono = col_i64(res, row, 27);
    it->has_settle = !PQgetisnull(res, row, 28);
    it->settle_mono = it->has_settle ? col_i64(res, row, 28) : 0;
    it->settle_at = col_i64(res, row, 29);
}

/* The clock a decision of this backend uses: the caller's (trusted, tests) or the server's. */
static struct apbot_now pg_now_of(const struct pg *h, const struct apbot_now *caller,
                                  int64_t server_ms)
{
    if (h->trust && caller)
        return *caller;
    struct apbot_now n = {.wall_ms = server_ms, .mono_ms = server_ms};
    snprintf(n.boot, sizeof(n.boot), "%s", h->boot);
    return n;
}

/*
 * Hands an item out in the caller's clock: its server stamps, read when the server's clock
 * said server_ms, become this process's CLOCK_BOOTTIME stamps, measured from local_mono (a
 * reading taken after the answer arrived, so every stamp looks later than it is, never
 * earlier). A row of another server boot belongs to no boot for the caller.
 */
static void pg_item_out(const struct pg *h, struct store_item *it, int64_t server_ms,
                        int64_t local_mono)
{
    if (h->trust)
        return;
    if (!apbot_clock_same_boot(it->clock_boot, h->boot)) {
        it->clock_boot[0] = '\0';
        return;
    }
    it->next_mono = local_mono + (it->next_mono - server_ms);
    if (it->lease_owner)
        it->lease_mono = local_mono + (it->lease_mono - server_ms);
    if (it->has_settle)
        it->settle_mono = local_mono + (it->settle_mono - server_ms);
    snprintf(it->clock_boot, sizeof(it->clock_boot), "%s", apbot_clock_boot_id());
}

/* ---- transactions ---------------------------------------------------------------------------- */

/*
 * Inside a write transaction: brings every row under now->boot when the queue is under
 * another (store_restamp's rule, in SQL), as the SQLite backend does.
 */
static int pg_ensure_boot(struct pg *h, const struct apbot_now *now, const char *queue_boot,
                          char *err, size_t errlen)
{
    if (apbot_clock_same_boot(queue_boot, now->boot))
        return APBOT_OK;
    struct pp p = {.n = 0};
    pp_text(&p, now->boot);
    pp_i64(&p, now->mono_ms);
    pp_i64(&p, now->wall_ms);
    int rc = APBOT_OK;
    PGresult *res =
        pg_run(h, P_RESTAMP_ALL, &p, &rc, err, errlen, "re-stamping rows of another boot");
    if (!res)
        return rc;
    PQclear(res);
    p = (struct pp){.n = 0};
    pp_text(&p, now->boot);
    res = pg_run(h, P_SET_META_BOOT, &p, &rc, err, errlen, "recording the queue's boot");
    if (!res)
        return rc;
    PQclear(res);
    return APBOT_OK;
}

static void pg_tx_rollback(struct pg *h)
{
    if (h->dead)
        return;
    if (h->base.in_batch)
        (void)pg_exec_ok(h, "ROLLBACK TO SAVEPOINT store_op; RELEASE SAVEPOINT store_op", NULL, 0,
                         "rollback");
    else
        (void)pg_exec_ok(h, "ROLLBACK", NULL, 0, "rollback");
}

/* Begins a write transaction (a savepoint inside a batch), reads the clock, fixes the boot. */
static int pg_tx_begin(struct store *st, char *err, size_t errlen)
{
    struct pg *h = PG(st);
    int rc = APBOT_OK;
    /* A deferred or lazy write commits without waiting for the server's WAL flush
     * (store_set_durability; pg_sync flushes). A batch commits synchronously. */
    const char *begin = st->in_batch ? "SAVEPOINT store_op; " CLOCK_QUERY
                        : st->durability != STORE_SYNC
                            ? "BEGIN; SET LOCAL synchronous_commit = off; " CLOCK_QUERY
                            : "BEGIN; " CLOCK_QUERY;
    PGresult *res = pg_exec(h, begin, &rc, err, errlen, "beginning a transaction");
    if (!res) {
        if (!h->dead && !st->in_batch)
            (void)pg_exec_ok(h, "ROLLBACK", NULL, 0, "rollback");
        return rc;
    }
    h->txnow = pg_now_of(h, h->caller_now, col_i64(res, 0, 0));
    char queue_boot[APBOT_BOOT_ID_LEN];
    snprintf(queue_boot, sizeof(queue_boot), "%s", PQgetvalue(res, 0, 1));
    PQclear(res);
    rc = pg_ensure_boot(h, &h->txnow, queue_boot, err, errlen);
    if (rc)
        pg_tx_rollback(h); /* store_run_write ends only what began */
    return rc;
}

static int pg_tx_end(struct store *st, int r, char *err, size_t errlen)
{
    struct pg *h = PG(st);
    if (r == APBOT_OK) {
        PGresult *res = pg_exec(h, st->in_batch ? "RELEASE SAVEPOINT store_op" : "COMMIT", &r, err,
                                errlen, "committing");
        if (res) {
            /* COMMIT of a transaction that failed answers ROLLBACK: nothing was written. */
            if (!st->in_batch && strcmp(PQcmdStatus(res), "COMMIT") != 0)
                r = apbot_fail(err, errlen, APBOT_E_DB, "store: the transaction was rolled back");
            else if (!st->in_batch && st->durability == STORE_DEFERRED)
                h->unsynced = true;
            PQclear(res);
            return r;
        }
    }
    pg_tx_rollback(h);
    return r;
}

static int pg_run_write(struct pg *h, const struct apbot_now *now, store_tx_body body, void *ctx,
                        char *err, size_t errlen)
{
    if (h->dead)
        return pg_dead(h, err, errlen);
    h->caller_now = now;
    int r = store_run_write(&h->base, pg_tx_begin, pg_tx_end, body, ctx, err, errlen);
    h->caller_now = NULL;
    return r;
}

/* A write transaction with nothing in it but what pg_tx_begin does (the boot). */
static int noop_body(struct store *st, void *ctx, char *err, size_t errlen)
{
    (void)st;
    (void)ctx;
    (void)err;
    (void)errlen;
    return APBOT_OK;
}

/*
 * For readers that compare stamps: the clock (the server's, or the caller's in tests) and
 * the queue brought under its boot (a write transaction only when the boot changed).
 */
static int pg_reader_clock(struct pg *h, const struct apbot_now *caller, struct apbot_now *ret,
                           char *err, size_t errlen)
{
    int rc = APBOT_OK;
    PGresult *res = pg_run(h, P_CLOCK, NULL, &rc, err, errlen, "reading the clock");
    if (!res)
        return rc;
    *ret = pg_now_of(h, caller, col_i64(res, 0, 0));
    bool same = apbot_clock_same_boot(PQgetvalue(res, 0, 1), ret->boot);
    PQclear(res);
    if (same)
        return APBOT_OK;
    if (h->base.in_batch)
        return pg_ensure_boot(h, ret, "", err, errlen);
    return pg_run_write(h, caller, noop_body, NULL, err, errlen);
}

/* ---- open and migrate ------------------------------------------------------------------------ */

static int pg_migrate(struct pg *h, char *err, size_t errlen)
{
    int rc = APBOT_OK;
    /* Fast path: the version table says we are current (an error here - no table yet - is
     * not one: the slow path below finds out). */
    bool timed_out = false;
    PGresult *res =
        pg_collect(h, PQsendQuery(h->conn, "SELECT version FROM apbot_schema"), &timed_out);
    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
        atoi(PQgetvalue(res, 0, 0)) == PG_SCHEMA_VERSION) {
        PQclear(res);
        return APBOT_OK;
    }
    if (!res || PQstatus(h->conn) != CONNECTION_OK) {
        rc = pg_fail_ex(h, res, timed_out, err, errlen, "reading the schema version");
        PQclear(res);
        return rc;
    }
    PQclear(res);
    /* A migration of a large history may take long: no statement timeout, a long bound. */
    int rt = h->rt_ms;
    h->rt_ms = PG_MIGRATE_ROUNDTRIP_MS;
    rc = pg_exec_ok(h,
                    "BEGIN; SET LOCAL statement_timeout = 0;"
                    " SELECT pg_advisory_xact_lock(hashtext('apbot-schema:' ||"
                    " current_schema()));"
                    "CREATE TABLE IF NOT EXISTS apbot_schema (version INTEGER NOT NULL)",
                    err, errlen, "locking the schema");
    if (rc)
        goto fail;
    res = pg_exec(h, "SELECT version FROM apbot_schema", &rc, err, errlen,
                  "reading the schema version");
    if (!res)
        goto fail;
    int v = PQntuples(res) ? atoi(PQgetvalue(res, 0, 0)) : -1;
    PQclear(res);
    if (v < 0) {
        rc = pg_exec_ok(h, "INSERT INTO apbot_schema (version) VALUES (0)", err, errlen,
                        "recording the schema version");
        if (rc)
            goto fail;
        v = 0;
    }
    if (v > PG_SCHEMA_VERSION) {
        rc = apbot_fail(err, errlen, APBOT_E_DB,
                        "store: database schema version %d is newer than this apbot (%d)", v,
                        PG_SCHEMA_VERSION);
        goto fail;
    }
    for (; v < PG_SCHEMA_VERSION; v++) {
        rc = pg_exec_ok(h, pg_migrations[v], err, errlen, "migrating the schema");
        if (rc)
            goto fail;
        char sql[64];
        snprintf(sql, sizeof(sql), "UPDATE apbot_schema SET version = %d", v + 1);
        rc = pg_exec_ok(h, sql, err, errlen, "recording the schema version");
        if (rc)
            goto fail;
    }
    rc = pg_exec_ok(h, "COMMIT", err, errlen, "committing the schema");
    if (rc == APBOT_OK) {
        h->rt_ms = rt;
        return APBOT_OK;
    }
fail:
    if (!h->dead)
        (void)pg_exec_ok(h, "ROLLBACK", NULL, 0, "rollback");
    h->rt_ms = rt;
    return rc;
}

static const struct store_ops pg_ops;

/* The module does not print (STYLE.md): the server's notices go nowhere. */
static void quiet_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

static void pg_close(struct store *st)
{
    struct pg *h = PG(st);
    if (h->conn)
        PQfinish(h->conn);
    if (h->password) {
        memset(h->password, 0, strlen(h->password));
        free(h->password);
    }
    free(h);
}

int store_pg_open(const char *conninfo, struct store **ret, char *err, size_t errlen)
{
    struct pg *h = apbot_xcalloc(1, sizeof(*h));
    int rc = store_base_init(&h->base, &pg_ops, err, errlen);
    if (rc) {
        free(h);
        return rc;
    }
    h->trust = store_caller_clock_trusted();
    h->password = conninfo_password(conninfo);
    h->rt_ms = PG_ROUNDTRIP_MS;
    h->base.server_clock = true;
    char shown[512];
    store_path_display(conninfo, shown, sizeof(shown));
    /* Ours first, so the connection string's own settings override them: a bounded connect,
     * keepalives and a user timeout that find a dead server or a cut network (a host stuck on
     * a dead connection would only sit there; see PG_KEEPALIVES_IDLE). */
    const char *const keys[] = {"connect_timeout",     "fallback_application_name",
                                "keepalives",          "keepalives_idle",
                                "keepalives_interval", "keepalives_count",
                                "tcp_user_timeout",    "dbname",
                                "client_encoding",     NULL};
    const char *const vals[] = {PG_CONNECT_TIMEOUT,
                                "apbot",
                                "1",
                                PG_KEEPALIVES_IDLE,
                                PG_KEEPALIVES_INTERVAL,
                                PG_KEEPALIVES_COUNT,
                                PG_TCP_USER_TIMEOUT,
                                conninfo,
                                "UTF8", /* after the string: not overridden */
                                NULL};
    h->conn = PQconnectdbParams(keys, vals, 1);
    if (!h->conn || PQstatus(h->conn) != CONNECTION_OK) {
        char text[512];
        snprintf(text, sizeof(text), "%s", h->conn ? PQerrorMessage(h->conn) : "out of memory");
        for (char *nl; (nl = strchr(text, '\n')) != NULL;)
            *nl = nl[1] ? ' ' : '\0';
        /* Down, or refusing us? Only a server that answers can say it refused. */
        rc = h->conn ? store_pg_connect_fault(PQpingParams(keys, vals, 1)) : APBOT_E_IO;
        rc = apbot_fail(err, errlen, rc, "store: cannot connect to %s: %s%s", shown, text,
                        rc == APBOT_E_UNAVAIL ? " (the server is unavailable)" : "");
        if (err)
            scrub(err, errlen, h->password);
        goto fail;
    }
    PQsetNoticeProcessor(h->conn, quiet_notice, NULL); /* notices are not errors: never print */
    /* Non-blocking: every round trip is sent and awaited by pg_collect, within its bound. */
    if (PQsetnonblocking(h->conn, 1) != 0) {
        rc = pg_fail(h, NULL, err, errlen, "setting up the connection");
        goto fail;
    }
    /* Every transaction: READ COMMITTED (the document lock relies on a fresh snapshot per
     * statement), durable at commit, bounded lock waits and statements, times in UTC; and a
     * session of ours that stalls inside a transaction (a host cut off mid-write) is ended by
     * the server after a minute, so its row locks cannot hold the other hosts up. */
    char setup[512];
    snprintf(setup, sizeof(setup),
             "SET default_transaction_isolation = 'read committed';"
             "SET default_transaction_read_only = off;"
             "SET synchronous_commit = on;"
             "SET client_min_messages = warning;"
             "SET lock_timeout = 5000;"
             "SET statement_timeout = %d;"
             "SET idle_in_transaction_session_timeout = 60000;"
             "SET TIME ZONE 'UTC'",
             PG_STATEMENT_TIMEOUT_MS);
    rc = pg_exec_ok(h, setup, err, errlen, "setting up the session");
    if (rc)
        goto fail;
    rc = pg_migrate(h, err, errlen);
    if (rc)
        goto fail;
    PGresult *res = pg_exec(h,
                            "SELECT (SELECT value FROM store_meta WHERE key = 'queue_id'),"
                            " floor(extract(epoch FROM pg_postmaster_start_time()) * 1000)::bigint",
                            &rc, err, errlen, "reading the queue's identity");
    if (!res)
        goto fail;
    snprintf(h->boot, sizeof(h->boot), "pg-%.16s-%s", PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1));
    PQclear(res);
    *ret = &h->base;
    return APBOT_OK;
fail:
    pg_close(&h->base);
    return rc;
}

/* The bound on one round trip of st (tests: a cut connection found in a test's time);
 * APBOT_E_INVAL for another backend. */
UNITTEST int store_pg_set_roundtrip_ms(struct store *st, int ms)
{
    if (!st || st->ops != &pg_ops || ms <= 0)
        return APBOT_E_INVAL;
    PG(st)->rt_ms = ms;
    return APBOT_OK;
}

/* The value of a connection option as libpq uses it for st's connection (its defaults and the
 * string's) into buf; APBOT_E_NOTFOUND when it has none, APBOT_E_INVAL without a connection. */
UNITTEST int store_pg_option(struct store *st, const char *key, char *buf, size_t len)
{
    if (!st || st->ops != &pg_ops || !PG(st)->conn || !key || !buf || !len)
        return APBOT_E_INVAL;
    PQconninfoOption *opts = PQconninfo(PG(st)->conn);
    int rc = APBOT_E_NOTFOUND;
    for (PQconninfoOption *o = opts; o && o->keyword; o++)
        if (strcmp(o->keyword, key) == 0 && o->val) {
            snprintf(buf, len, "%s", o->val);
            rc = APBOT_OK;
        }
    PQconninfoFree(opts);
    return rc;
}

/* ---- batches ------------------------------------------------------------------------------ */

static int pg_begin(struct store *st, char *err, size_t errlen)
{
    return pg_exec_ok(PG(st), "BEGIN", err, errlen, "beginning a batch");
}

static int pg_commit(struct store *st, char *err, size_t errlen)
{
    struct pg *h = PG(st);
    int r = APBOT_OK;
    PGresult *res = pg_exec(h, "COMMIT", &r, err, errlen, "committing a batch");
    if (!res)
        return r;
    r = strcmp(PQcmdStatus(res), "COMMIT") == 0
            ? APBOT_OK
            : apbot_fail(err, errlen, APBOT_E_DB, "store: the batch was rolled back");
    PQclear(res);
    return r;
}

static void pg_rollback(struct store *st)
{
    struct pg *h = PG(st);
    if (!h->dead && PQtransactionStatus(h->conn) != PQTRANS_IDLE)
        (void)pg_exec_ok(h, "ROLLBACK", NULL, 0, "rollback");
}

/* ---- enqueue ---------------------------------------------------------------------------- */

struct enqueue_op {
    const struct store_new_item *ni;
    enum store_enqueue_result result;
    int64_t id;
};

static int enqueue_body(struct store *st, void *ctx, char *err, size_t errlen)
{
    struct pg *h = PG(st);
    struct enqueue_op *op = ctx;
    const struct store_new_item *ni = op->ni;
    const struct apbot_now *now = &h->txnow;
    const char *source = ni->source ? ni->source : "";
    for (int attempt = 0; attempt < 3; attempt++) {
        struct pp p = {.n = 0};
        pp_text(&p, ni->key);
        pp_text(&p, ni->fingerprint);
        pp_text(&p, ni->payload);
        pp_i64(&p, now->wall_ms);
        pp_text_max(&p, source, STORE_TEXT_MAX);
        pp_text(&p, ni->vendor_id);
        pp_text(&p, ni->vendor_name);
        pp_text(&p, ni->invoice_number);
        pp_text(&p, ni->doc_type);
        pp_text(&p, ni->issue_date);
        pp_text(&p, ni->currency);
        pp_i64(&p, ni->exponent);
        pp_i64(&p, ni->total);
        pp_text(&p, now->boot);
        pp_i64(&p, now->mono_ms);
        int rc = APBOT_OK;
        PGresult *res = pg_run(h, P_ENQUEUE, &p, &rc, err, errlen, "enqueueing");
        if (!res)
            return rc;
        if (PQntuples(res) == 0) {
            PQclear(res); /* a racing insert of this key committed meanwhile: look again */
            continue;
        }
        op->id = col_i64(res, 0, 1);
        if (col_i64(res, 0, 0) == 1) {
            op->result = STORE_ENQ_QUEUED;
        } else if (strcmp(PQgetvalue(res, 0, 2), ni->fingerprint) == 0) {
            op->result = STORE_ENQ_ALREADY;
        } else {
            op->result = STORE_ENQ_CONFLICT;
            apbot_fail(err, errlen, APBOT_E_CONFLICT,
                       "same identity as queued item #%" PRId64 " (%s, from %s, state %s) "
                       "but different content; not queued",
                       op->id, ni->key, PQgetvalue(res, 0, 3), PQgetvalue(res, 0, 4));
        }
        PQclear(res);
        return APBOT_OK;
    }
    return apbot_fail(err, errlen, APBOT_E_BUSY, "store: enqueue of %s raced three times", ni->key);
}

static int pg_enqueue(struct store *st, const struct store_new_item *ni,
                      const struct apbot_now *now, enum store_enqueue_result *ret_result,
                      int64_t *ret_id, char *err, size_t errlen)
{
    struct enqueue_op op = {.ni = ni};
    int r = pg_run_write(PG(st), now, enqueue_body, &op, err, errlen);
    if (r)
        return r;
    *ret_result = op.result;
    *ret_id = op.id;
    return APBOT_OK;
}

/* ---- bulk enqueue ------------------------------------------------------------------------ */

/* Appends one element to an array literal in b: "," unless first, then NULL, or the text
 * (pg_clean's, max bytes) double-quoted with '\\' and '"' escaped. */
static int arr_text(struct apbot_buf *b, bool first, const char *s, size_t max)
{
    if (!first && apbot_buf_add(b, ",", 1) != APBOT_OK)
        return APBOT_E_LIMIT;
    if (!s)
        return apbot_buf_adds(b, "NULL");
    char *own = NULL;
    const char *t = pg_clean(s, max, &own);
    int rc = apbot_buf_add(b, "\"", 1);
    for (const char *q = t; rc == APBOT_OK && *q;) {
        size_t run = strcspn(q, "\\\"");
        rc = apbot_buf_add(b, q, run);
        q += run;
        if (rc == APBOT_OK && *q) {
            char esc[2] = {'\\', *q++};
            rc = apbot_buf_add(b, esc, 2);
        }
    }
    if (rc == APBOT_OK)
        rc = apbot_buf_add(b, "\"", 1);
    free(own);
    return rc;
}

static int arr_i64(struct apbot_buf *b, bool first, int64_t v)
{
    return apbot_buf_addf(b, "%s%" PRId64, first ? "" : ",", v);
}

/* The columns of P_ENQUEUE_MANY's arrays, in its parameter order. */
enum enq_col {
    EC_KEY,
    EC_FP,
    EC_PAYLOAD,
    EC_SOURCE,
    EC_VENDOR_ID,
    EC_VENDOR_NAME,
    EC_NUMBER,
    EC_DOC_TYPE,
    EC_DATE,
    EC_CURRENCY,
    EC_EXPONENT,
    EC_TOTAL,
    EC__COUNT
};

struct enqm_op {
    struct store_enqueue_req *reqs;
    size_t n;
    size_t *by_key;  /* indices sorted by key, then index: a key's first req leads */
    size_t *leader;  /* per req: the index of the first req with its key */
    char **row_fp;   /* per leader: the fingerprint of the row its key has now */
    char **row_from; /* ... its source */
    char **row_state;
    size_t *send; /* leaders still to be sent, in order */
};

/* qsort has no context: the reqs being sorted, for by_key_cmp (one thread per store). */
static _Thread_local const struct store_enqueue_req *sort_reqs;

static int by_key_cmp(const void *a, const void *b)
{
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    int c = strcmp(sort_reqs[i].key, sort_reqs[j].key);
    return c ? c : (i > j) - (i < j);
}

/* The leader of key (the first req with it), found in by_key; n when none. */
static size_t enqm_find(const struct enqm_op *op, const char *key)
{
    size_t lo = 0, hi = op->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(op->reqs[op->by_key[mid]].key, key);
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < op->n && strcmp(op->reqs[op->by_key[lo]].key, key) == 0 ? op->by_key[lo] : op->n;
}

/* Sends leaders send[0..m-1] as one statement and records what each came to; a leader the
 * answer does not name stays unset (row_fp NULL). */
static int enqm_chunk(struct pg *h, struct enqm_op *op, const size_t *send, size_t m, char *err,
                      size_t errlen)
{
    const struct apbot_now *now = &h->txnow;
    struct apbot_buf col[EC__COUNT];
    int rc = APBOT_OK;
    for (int c = 0; c < EC__COUNT; c++) {
        apbot_buf_init(&col[c], PG_ENQ_ARRAY_MAX);
        if (apbot_buf_add(&col[c], "{", 1) != APBOT_OK)
            rc = APBOT_E_LIMIT;
    }
    for (size_t k = 0; k < m && rc == APBOT_OK; k++) {
        const struct store_enqueue_req *r = &op->reqs[send[k]];
        bool first = k == 0;
        const size_t any = SIZE_MAX / 2;
        if (arr_text(&col[EC_KEY], first, r->key, any) ||
            arr_text(&col[EC_FP], first, r->fingerprint, any) ||
            arr_text(&col[EC_PAYLOAD], first, r->payload, any) ||
            arr_text(&col[EC_SOURCE], first, r->source ? r->source : "", STORE_TEXT_MAX) ||
            arr_text(&col[EC_VENDOR_ID], first, r->vendor_id, any) ||
            arr_text(&col[EC_VENDOR_NAME], first, r->vendor_name, any) ||
            arr_text(&col[EC_NUMBER], first, r->invoice_number, any) ||
            arr_text(&col[EC_DOC_TYPE], first, r->doc_type, any) ||
            arr_text(&col[EC_DATE], first, r->issue_date, any) ||
            arr_text(&col[EC_CURRENCY], first, r->currency, any) ||
            arr_i64(&col[EC_EXPONENT], first, r->exponent) ||
            arr_i64(&col[EC_TOTAL], first, r->total))
            rc = APBOT_E_LIMIT;
    }
    struct pp p = {.n = 0};
    for (int c = 0; c < EC__COUNT && rc == APBOT_OK; c++) {
        if (apbot_buf_add(&col[c], "}", 1) != APBOT_OK)
            rc = APBOT_E_LIMIT;
        p.v[p.n++] = apbot_buf_str(&col[c]);
    }
    PGresult *res = NULL;
    if (rc != APBOT_OK) {
        rc = apbot_fail(err, errlen, APBOT_E_LIMIT, "store: a bulk enqueue's rows are too large");
    } else {
        pp_i64(&p, now->wall_ms);
        pp_text(&p, now->boot);
        pp_i64(&p, now->mono_ms);
        res = pg_run(h, P_ENQUEUE_MANY, &p, &rc, err, errlen, "enqueueing");
    }
    for (int i = 0; res && i < PQntuples(res); i++) {
        size_t l = enqm_find(op, PQgetvalue(res, i, 2));
        if (l >= op->n || op->row_fp[l])
            continue; /* not ours (cannot be), or named twice */
        struct store_enqueue_req *r = &op->reqs[l];
        r->id = col_i64(res, i, 1);
        op->row_fp[l] = apbot_xstrdup(PQgetvalue(res, i, 3));
        op->row_from[l] = apbot_xstrdup(PQgetvalue(res, i, 4));
        op->row_state[l] = apbot_xstrdup(PQgetvalue(res, i, 5));
        if (col_i64(res, i, 0) == 1)
            r->result = STORE_ENQ_QUEUED;
        else if (strcmp(op->row_fp[l], r->fingerprint) == 0)
            r->result = STORE_ENQ_ALREADY;
        else
            r->result = STORE_ENQ_CONFLICT;
    }
    PQclear(res);
    for (int c = 0; c < EC__COUNT; c++)
        apbot_buf_done(&col[c]);
    return rc;
}

/* Frees what the last attempt learnt, for the next (store_run_write may run the body again). */
static void enqm_reset(struct enqm_op *op)
{
    for (size_t i = 0; i < op->n; i++) {
        free(op->row_fp[i]);
        free(op->row_from[i]);
        free(op->row_state[i]);
        op->row_fp[i] = op->row_from[i] = op->row_state[i] = NULL;
        free(op->reqs[i].detail);
        op->reqs[i].detail = NULL;
        op->reqs[i].id = 0;
        op->reqs[i].result = STORE_ENQ_QUEUED;
    }
}

static int enqm_body(struct store *st, void *ctx, char *err, size_t errlen)
{
    struct pg *h = PG(st);
    struct enqm_op *op = ctx;
    enqm_reset(op);
    /* The audit chain's lock before any key, the lock the events' trigger takes (same keys:
     * the schema of the `events` the inserts resolve to). Taken at the first event instead, a
     * batch held it while inserting keys that another batch of the same invoices, in another
     * order, had inserted and waited on: a deadlock PostgreSQL broke by failing one. Bulk
     * enqueues now go one after the other from their start; they did from their first event. */
    int lrc = pg_exec_ok(h,
                         "SELECT pg_advisory_xact_lock(" AUDIT_LOCK ", hashtext(n.nspname))"
                         " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                         " WHERE c.oid = 'events'::regclass",
                         err, errlen, "taking the audit chain's lock");
    if (lrc)
        return lrc;
    /* The leaders, in order, in chunks; the ones a racing insert hid are sent again (a fresh
     * snapshot per statement shows them), three times at most. */
    size_t left = 0;
    for (size_t i = 0; i < op->n; i++)
        if (op->leader[i] == i)
            op->send[left++] = i;
    for (int round = 0; left > 0; round++) {
        if (round == 3)
            return apbot_fail(err, errlen, APBOT_E_BUSY, "store: enqueue of %s raced three times",
                              op->reqs[op->send[0]].key);
        for (size_t k = 0; k < left;) {
            size_t m = 0, bytes = 0;
            while (k + m < left && m < PG_ENQ_CHUNK && (m == 0 || bytes < PG_ENQ_CHUNK_BYTES))
                bytes += strlen(op->reqs[op->send[k + m++]].payload);
            int rc = enqm_chunk(h, op, op->send + k, m, err, errlen);
            if (rc)
                return rc;
            k += m;
        }
        size_t still = 0;
        for (size_t k = 0; k < left; k++)
            if (!op->row_fp[op->send[k]])
                op->send[still++] = op->send[k];
        left = still;
    }
    /* Every req against the row its key has now: a leader's own (queued, already, conflict),
     * and a follower as if enqueued after its leader. */
    for (size_t i = 0; i < op->n; i++) {
        struct store_enqueue_req *r = &op->reqs[i];
        size_t l = op->leader[i];
        const char *fp = op->row_fp[l], *from = op->row_from[l], *state = op->row_state[l];
        if (l != i) {
            bool queued_here = op->reqs[l].result == STORE_ENQ_QUEUED;
            fp = queued_here ? op->reqs[l].fingerprint : fp;
            r->id = op->reqs[l].id;
            r->result = strcmp(fp, r->fingerprint) == 0 ? STORE_ENQ_ALREADY : STORE_ENQ_CONFLICT;
            state = queued_here ? "new" : state;
        }
        if (r->result == STORE_ENQ_CONFLICT) {
            char detail[APBOT_ERR_LEN];
            store_conflict_detail(detail, sizeof(detail), r->id, r->key, from, state);
            r->detail = apbot_xstrdup(detail);
        }
    }
    return APBOT_OK;
}

static int pg_enqueue_many(struct store *st, struct store_enqueue_req *reqs, size_t n,
                           const struct apbot_now *now, char *err, size_t errlen)
{
    struct enqm_op op = {.reqs = reqs, .n = n};
    op.by_key = apbot_xcalloc(n, sizeof(*op.by_key));
    op.leader = apbot_xcalloc(n, sizeof(*op.leader));
    op.send = apbot_xcalloc(n, sizeof(*op.send));
    op.row_fp = apbot_xcalloc(n, sizeof(*op.row_fp));
    op.row_from = apbot_xcalloc(n, sizeof(*op.row_from));
    op.row_state = apbot_xcalloc(n, sizeof(*op.row_state));
    for (size_t i = 0; i < n; i++)
        op.by_key[i] = i;
    sort_reqs = reqs;
    qsort(op.by_key, n, sizeof(*op.by_key), by_key_cmp);
    sort_reqs = NULL;
    for (size_t k = 0; k < n; k++) {
        size_t i = op.by_key[k];
        bool same = k > 0 && strcmp(reqs[op.by_key[k - 1]].key, reqs[i].key) == 0;
        op.leader[i] = same ? op.leader[op.by_key[k - 1]] : i;
    }
    int rc = pg_run_write(PG(st), now, enqm_body, &op, err, errlen);
    for (size_t i = 0; i < n; i++) {
        free(op.row_fp[i]);
        free(op.row_from[i]);
        free(op.row_state[i]);
    }
    free(op.by_key);
    free(op.leader);
    free(op.send);
    free(op.row_fp);
    free(op.row_from);
    free(op.row_state);
    return rc;
}

/* ---- reading one item ---------------------------------------------------------------------- */

/*
 * Reads one item with the server's clock (P_GET_ID / P_GET_KEY): *ret raw (server stamps)
 * and *ret_server_ms, and *ret_local the local mono clock after the answer.
 */
static int pg_get_raw(struct pg *h, int64_t id, const char *key, struct store_item *ret,
                      int64_t *ret_server_ms, int64_t *ret_local, char *err, size_t errlen)
{
    struct pp p = {.n = 0};
    if (key)
        pp_text(&p, key);
    else
        pp_i64(&p, id);
    int rc = APBOT_OK;
    PGresult *res = pg_run(h, key ? P_GET_KEY : P_GET_ID, &p, &rc, err, errlen, "reading an item");
    if (!res)
        return rc;
    int64_t local = apbot_clock_mono_ms();
    if (PQntuples(res) == 0) {
        PQclear(res);
        return key ? apbot_fail(err, errlen, APBOT_E_NOTFOUND, "no item with key %s", key)
                   : apbot_fail(err, errlen, APBOT_E_NOTFOUND, "no item #%" PRId64, id);
    }
    pg_row_item(res, 0, ret);
    *ret_server_ms = col_i64(res, 0, ITEM_NCOLS);
    *ret_local = local;
    PQclear(res);
    return APBOT_OK;
}

static int pg_get(struct store *st, int64_t id, const char *key, struct store_item *ret, char *err,
                  size_t errlen)
{
    struct pg *h = PG(st);
    struct store_item it;
    int64_t server_ms = 0, local = 0;
    int r = pg_get_raw(h, id, key, &it, &server_ms, &local, err, errlen);
    if (r)
        return r;
    pg_item_out(h, &it, server_ms, local);
    *ret = it;
    return APBOT_OK;
}

/* ---- claim and leases --------------------------------------------------------------------- */

struct claim_op {
    const char *owner;
    int64_t lease_ms;
    const struct machine_step *claimed;
    int64_t want_id;      /* store_claim_id: this row or none (0: the first due) */
    struct store_item it; /* the result, valid when have_item */
    bool have_item;
};

static int claim_body(struct store *st, void *ctx, char *err, size_t errlen)
{
    struct pg *h = PG(st);
    struct claim_op *op = ctx;
    const struct apbot_now *now = &h->txnow;
    if (op->have_item) {
        store_item_done(&op->it); /* a retried attempt starts over */
        op->have_item = false;
    }
    char actor[160];
    snprintf(actor, sizeof(actor), "runner:%s", op->owner);
    struct pp p = {.n = 0};
    pp_text(&p, now->boot);
    pp_i64(&p, now->mono_ms);
    pp_text(&p, machine_state_name(op->claimed->next));
    pp_text(&p, op->owner);
    pp_i64(&p, now->wall_ms + op->lease_ms);
    pp_i64(&p, now->mono_ms + op->lease_ms);
    pp_i64(&p, now->wall_ms);
    pp_text_max(&p, op->claimed->why ? op->claimed->why : "claimed", STORE_TEXT_MAX);
    pp_text(&p, actor);
    if (op->want_id)
        pp_i64(&p, op->want_id);
    int rc = APBOT_OK;
    PGresult *res =
        pg_run(h, op->want_id ? P_CLAIM_ID : P_CLAIM, &p, &rc, err, errlen, "claiming an item");
    if (!res)
        return rc;
    int64_t local = apbot_clock_mono_ms();
    if (PQntuples(res) == 0) {
        PQclear(res);
        return apbot_fail(err, errlen, APBOT_E_NOTFOUND, "nothing is due");
    }
    pg_row_item(res, 0, &op->it);
    PQclear(res);
    pg_item_out(h, &op->it, now->mono_ms, local);
    op->have_item = true;
    return APBOT_OK;
}

static int pg_claim_id(struct store *st, int64_t id, const char *owner, const struct apbot_now *now,
                       int64_t lease_ms, const struct machine_step *claimed, struct store_item *ret,
                       char *err, size_t errlen)
{
    struct claim_op op = {.owner = owner, .lease_ms = lease_ms, .claimed = claimed, .want_id = id};
    int r = pg_run_write(PG(st), now, claim_body, &op, err, errlen);
    if (r) {
        if (op.have_item)
            store_item_done(&op.it);
        return r;
    }
    *ret = op.it;
    return APBOT_OK;
}

static int pg_claim(struct store *st, const char *owner, const struct apbot_now *now,
                    int64_t lease_ms, const struct machine_step *claimed, struct store_item *ret,
                    char *err, size_t errlen)
{
    struct claim_op op = {.owner = owner, .lease_ms = lease_ms, .claimed = claimed};
    int r = pg_run_write(PG(st), now, claim_body, &op, err, errlen);
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
    int64_t lease_ms;
};

static int renew_body(struct store *st, void *ctx, char *err, size_t errlen)
{
    struct pg *h = PG(st);
    struct renew_op *op = ctx;
    const struct apbot_now *now = &h->txnow;
    struct pp p = {.n = 0};
    pp_i64(&p, op->id);
    pp_text(&p, op->owner);
    pp_i64(&p, now->wall_ms + op->lease_ms);
    pp_i64(&p, now->mono_ms + op->lease_ms);
    pp_text(&p, now->boot);
    int rc = APBOT_OK;
    PGresult *res = pg_run(h, P_RENEW, &p, &rc, err, errlen, "renewing a lease");
    if (!res)
        return rc;
    bool one = strcmp(PQcmdTuples(res), "1") == 0;
    PQclear(res);
    if (!one)
        return apbot_fail(err, errlen, APBOT_E_STATE,
                          "item #%" PRId64 ": lease lost (not held by %s)", op->id, op->owner);
    return APBOT_OK;
}

static int pg_renew(struct store *st, int64_t id, const char *owner, const struct apbot_now *now,
                    int64_t lease_ms, char *err, size_t errlen)
{
    struct renew_op op = {.id = id, .owner = owner, .lease_ms = lease_ms};
    return pg_run_write(PG(st), now, renew_body, &op, err, errlen);
}

/* ---- apply ------------------------------------------------------------------------------ */

struct apply_op {
    int64_t id;
    const char *owner;
    const struct store_change *ch;
    int64_t holder; /* APBOT_E_CONFLICT: the item holding the document */
};

/* The id of another item holding doc, 0 if none (the caller holds the document's lock). */
static int doc_holder(struct pg *h, const char *doc, int64_t id, int64_t *ret_holder, char *err,
                      size_t errlen)
{
    struct pp p = {.n = 0};
    int rc = APBOT_OK;
    PGresult *res;
    pp_text_max(&p, doc, STORE_TEXT_MAX);
    pp_i64(&p, id);
    res = pg_run(h, P_DOC_HOLDER, &p, &rc, err, errlen, "looking up the document's holder");
    if (!res)
        return rc;
    *ret_holder = PQntuples(res) ? col_i64(res, 0, 0) : 0;
    PQclear(res);
    return APBOT_OK;
}

static int insert_evidence(struct pg *h, int64_t item_id, const struct store_evidence *ev,
                           char *err, size_t errlen);

static int apply_body(struct store *st, void *ctx, char *err, size_t errlen)
{
    struct pg *h = PG(st);
    struct apply_op *op = ctx;
    const struct store_change *ch = op->ch;
    const struct apbot_now *now = &h->txnow;
    op->holder = 0;
    struct pp p = {.n = 0};
    pp_i64(&p, op->id);
    if (ch->erp_doc)
        pp_text_max(&p, ch->erp_doc, STORE_TEXT_MAX);
    int rc = APBOT_OK;
    PGresult *res =
        pg_run(h, ch->erp_doc ? P_LOCK_ID_DOC : P_LOCK_ID, &p, &rc, err, errlen, "reading an item");
    if (!res)
        return rc;
    if (PQntuples(res) == 0) {
        PQclear(res);
        return apbot_fail(err, errlen, APBOT_E_NOTFOUND, "no item #%" PRId64, op->id);
    }
    struct store_item it;
    pg_row_item(res, 0, &it);
    char state_text[64];
    snprintf(state_text, sizeof(state_text), "%s", PQgetvalue(res, 0, 3));
    PQclear(res);
    (void)store_restamp(&it, now);

    /* What the guard reads, under the locks taken above (the row FOR UPDATE, and with a
     * document the document's advisory lock): the row on the server's clock, its state text,
     * and who holds the document, read after the lock in a fresh snapshot (READ COMMITTED),
     * so a holder that committed while this transaction waited for the lock is seen. */
    int r = APBOT_OK;
    if (ch->erp_doc) {
        r = doc_holder(h, ch->erp_doc, op->id, &op->holder, err, errlen);
        if (r)
            goto out;
    }
    r = store_apply_guard(&it, state_text, op->holder, op->owner, ch, now, err, errlen);
    if (r)
        goto out;

    /* The evidence first: the event's insert takes the audit chain's lock (every host's
     * appends wait for it until this transaction ends), so it is the last statement. */
    for (size_t i = 0; i < ch->n_evidence; i++) {
        r = insert_evidence(h, op->id, &ch->evidence[i], err, errlen);
        if (r)
            goto out;
    }
    const struct machine_step *step = ch->step;
    int64_t delay = store_step_delay_ms(&it, step, now, ch->backoff_ms, ch->settle_ms);
    bool keep = op->owner && ch->keep_lease;
    if (step->settle_mark) {
        it.has_settle = true;
        it.settle_mono = now->mono_ms;
        it.settle_at = now->wall_ms;
    }
    char detail[STORE_TEXT_MAX];
    store_event_detail(step, ch->detail, detail, sizeof(detail));
    p = (struct pp){.n = 0};
    pp_i64(&p, op->id);
    pp_text(&p, machine_state_name(step->next));
    pp_i64(&p, step->counters.posts);
    pp_i64(&p, step->counters.cycles);
    pp_i64(&p, step->counters.attempts);
    pp_i64(&p, now->wall_ms + delay);
    pp_i64(&p, now->mono_ms + delay);
    pp_text_max(&p, ch->erp_doc, STORE_TEXT_MAX);
    pp_text_max(&p, ch->reason, STORE_TEXT_MAX);
    pp_bool(&p, step->next == MACHINE_POSTING && it.state != MACHINE_POSTING);
    pp_text(&p, keep ? op->owner : NULL);
    pp_i64(&p, keep ? it.lease_until : 0);
    pp_i64(&p, now->wall_ms);
    pp_i64(&p, keep ? it.lease_mono : 0);
    pp_text(&p, now->boot);
    if (it.has_settle)
        pp_i64(&p, it.settle_mono);
    else
        pp_text(&p, NULL);
    pp_i64(&p, it.settle_at);
    pp_text(&p, machine_state_name(it.state));
    pp_text(&p, machine_event_name(ch->event));
    pp_text_max(&p, detail, STORE_TEXT_MAX);
    pp_text(&p, ch->actor ? ch->actor : (op->owner ? op->owner : "operator"));
    res = pg_run(h, P_APPLY_UPDATE, &p, &rc, err, errlen, "updating an item");
    if (!res) {
        r = rc;
        goto out;
    }
    PQclear(res);
out:
    store_item_done(&it);
    return r;
}

static int pg_apply(struct store *st, int64_t id, const char *owner, const struct store_change *ch,
                    const struct apbot_now *now, int64_t *ret_holder, struct store_item *ret_item,
                    char *err, size_t errlen)
{
    struct apply_op op = {.id = id, .owner = owner, .ch = ch};
    int r = pg_run_write(PG(st), now, apply_body, &op, err, errlen);
    if (r == APBOT_E_CONFLICT)
        *ret_holder = op.holder;
    /* A read after the commit: one more round trip either way. A failed read leaves the
     * change done and ret_item->id 0 (store_apply_get). */
    if (r == APBOT_OK && ret_item) {
        struct store_item it;
        memset(ret_item, 0, sizeof(*ret_item));
        if (pg_get(st, id, NULL, &it, NULL, 0) == APBOT_OK)
            *ret_item = it;
    }
    return r;
}

/* ---- evidence --------------------------------------------------------------------------- */

struct evidence_op {
    int64_t item_id;
    const struct store_evidence *ev;
    size_t n;
};

static int insert_evidence(struct pg *h, int64_t item_id, const struct store_evidence *ev,
                           char *err, size_t errlen)
{
    struct pp p = {.n = 0};
    pp_i64(&p, item_id);
    pp_i64(&p, h->txnow.wall_ms);
    pp_text_max(&p, ev->step, 64);
    pp_text_max(&p, ev->method, 16);
    pp_text_max(&p, ev->url, STORE_TEXT_MAX);
    pp_i64(&p, ev->http_status);
    pp_i64(&p, ev->elapsed_ms);
    pp_text_max(&p, ev->transport, 512);
    pp_text_max(&p, ev->rule, 256);
    pp_text_max(&p, ev->outcome, 64);
    pp_text_max(&p, ev->excerpt, STORE_EXCERPT_MAX);
    int rc = APBOT_OK;
    PGresult *res = pg_run(h, P_EVIDENCE, &p, &rc, err, errlen, "adding evidence");
    if (!res)
        return rc;
    PQclear(res);
    return APBOT_OK;
}

static int evidence_body(struct store *st, void *ctx, char *err, size_t errlen)
{
    struct evidence_op *op = ctx;
    for (size_t i = 0; i < op->n; i++) {
        int r = insert_evidence(PG(st), op->item_id, &op->ev[i], err, errlen);
        if (r)
            return r;
    }
    return APBOT_OK;
}

static int pg_add_evidence(struct store *st, int64_t item_id, const struct store_evidence *ev,
                           size_t n, const struct apbot_now *now, char *err, size_t errlen)
{
    struct evidence_op op = {.item_id = item_id, .ev = ev, .n = n};
    return pg_run_write(PG(st), now, evidence_body, &op, err, errlen);
}

/* ---- recovery --------------------------------------------------------------------------- */

static int pg_each_expired(struct store *st, const struct apbot_now *now, int64_t limit,
                           store_item_fn fn, void *ctx, char *err, size_t errlen)
{
    struct pg *h = PG(st);
    struct apbot_now clock;
    int r = pg_reader_clock(h, now, &clock, err, errlen);
    if (r)
        return r;
    struct pp p = {.n = 0};
    pp_text(&p, clock.boot);
    pp_i64(&p, clock.mono_ms);
    pp_i64(&p, limit > 0 ? limit : STORE_EXPIRED_MAX);
    int rc = APBOT_OK;
    PGresult *res = pg_run(h, P_EXPIRED, &p, &rc, err, errlen, "looking for expired leases");
    if (!res)
        return rc;
    /* Collect first, then one item at a time, so fn may write (one transaction each). */
    int n = PQntuples(res);
    int64_t *ids = apbot_xcalloc(n ? (size_t)n : 1, sizeof(*ids));
    for (int i = 0; i < n; i++)
        ids[i] = col_i64(res, i, 0);
    PQclear(res);
    for (int i = 0; i < n; i++) {
        struct store_item it;
        int64_t server_ms = 0, local = 0;
        r = pg_get_raw(h, ids[i], NULL, &it, &server_ms, &local, err, errlen);
        if (r == APBOT_E_NOTFOUND) {
            r = APBOT_OK;
            continue;
        }
        if (r)
            break;
        /* Judged on the backend's own clock: renewed (or finished) since the list was taken
         * means not expired any more. */
        struct apbot_now at = pg_now_of(h, now, server_ms);
        (void)store_restamp(&it, &at);
        if (it.lease_owner && !store_lease_live(&it, &at)) {
            pg_item_out(h, &it, server_ms, local);
            r = fn(ctx, &it);
        }
        store_item_done(&it);
        if (r)
            break;
    }
    free(ids);
    return r;
}

/* ---- readers ---------------------------------------------------------------------------- */

static int pg_each_limit(struct store *st, enum machine_state state, int64_t limit,
                         store_item_fn fn, void *ctx, char *err, size_t errlen)
{
    struct pg *h = PG(st);
    /* Pages by key (id, or created_at and id), so fn may call back into the store. */
    int64_t after_id = 0, after_created = INT64_MIN, seen = 0;
    for (;;) {
        int64_t page = PG_PAGE;
        if (limit > 0 && limit - seen < page)
            page = limit - seen;
        if (page <= 0)
            return APBOT_OK;
        struct pp p = {.n = 0};
        if (state == MACHINE_STATE_INVALID) {
            pp_i64(&p, after_id);
            pp_i64(&p, page);
        } else {
            pp_text(&p, machine_state_name(state));
            pp_i64(&p, after_created);
            pp_i64(&p, after_id);
            pp_i64(&p, page);
        }
        int rc = APBOT_OK;
        PGresult *res = pg_run(h, state == MACHINE_STATE_INVALID ? P_EACH_ALL : P_EACH_STATE, &p,
                               &rc, err, errlen, "listing items");
        if (!res)
            return rc;
        int64_t local = apbot_clock_mono_ms();
        int n = PQntuples(res);
        int r = APBOT_OK;
        for (int i = 0; i < n && r == APBOT_OK; i++) {
            struct store_item it;
            pg_row_item(res, i, &it);
            after_id = it.id;
            after_created = it.created_at;
            pg_item_out(h, &it, col_i64(res, i, ITEM_NCOLS), local);
            r = fn(ctx, &it);
            store_item_done(&it);
            seen++;
        }
        PQclear(res);
        if (r || n < page)
            return r;
    }
}

static int pg_each_event(struct store *st, int64_t item_id, store_event_fn fn, void *ctx, char *err,
                         size_t errlen)
{
    struct pg *h = PG(st);
    struct pp p = {.n = 0};
    pp_i64(&p, item_id);
    int rc = APBOT_OK;
    PGresult *res = pg_run(h, P_EVENTS, &p, &rc, err, errlen, "reading events");
    if (!res)
        return rc;
    int r = APBOT_OK;
    for (int i = 0; i < PQntuples(res) && r == APBOT_OK; i++) {
        struct store_event_row row = col_event(res, i, NULL, NULL);
        r = fn(ctx, &row);
    }
    PQclear(res);
    return r;
}

static void row_evidence(const PGresult *res, int i, struct store_evidence_row *row)
{
    *row = (struct store_evidence_row){
        .id = col_i64(res, i, 0),
        .item_id = col_i64(res, i, 1),
        .at = col_i64(res, i, 2),
        .ev =
            {
                .step = col_str(res, i, 3),
                .method = col_str(res, i, 4),
                .url = col_str(res, i, 5),
                .http_status = (int)col_i64(res, i, 6),
                .elapsed_ms = col_i64(res, i, 7),
                .transport = col_str(res, i, 8),
                .rule = col_str(res, i, 9),
                .outcome = col_str(res, i, 10),
                .excerpt = col_str(res, i, 11),
            },
    };
}

static int pg_each_evidence(struct store *st, int64_t item_id, store_evidence_fn fn, void *ctx,
                            char *err, size_t errlen)
{
    struct pg *h = PG(st);
    struct pp p = {.n = 0};
    pp_i64(&p, item_id);
    int rc = APBOT_OK;
    PGresult *res = pg_run(h, P_EVIDENCE_ROWS, &p, &rc, err, errlen, "reading evidence");
    if (!res)
        return rc;
    int r = APBOT_OK;
    for (int i = 0; i < PQntuples(res) && r == APBOT_OK; i++) {
        struct store_evidence_row row;
        row_evidence(res, i, &row);
        r = fn(ctx, &row);
    }
    PQclear(res);
    return r;
}

static int pg_counts(struct store *st, struct store_counts *ret, char *err, size_t errlen)
{
    struct pg *h = PG(st);
    int rc = APBOT_OK;
    /* One statement: the counts and the oldest age come from one snapshot. */
    PGresult *res = pg_run(h, P_COUNTS, NULL, &rc, err, errlen, "counting items");
    if (!res)
        return rc;
    struct store_counts c;
    memset(&c, 0, sizeof(c));
    for (int i = 0; i < PQntuples(res); i++) {
        enum machine_state state = machine_state_from_name(PQgetvalue(res, i, 0));
        int64_t n = col_i64(res, i, 1);
        int64_t oldest = col_i64(res, i, 2);
        if (state != MACHINE_STATE_INVALID) {
            c.by_state[state] += n;
            if (!machine_is_terminal(state) &&
                (!c.oldest_pending_at || oldest < c.oldest_pending_at))
                c.oldest_pending_at = oldest;
        }
        c.total += n; /* rows in a state this version does not know still count */
    }
    PQclear(res);
    *ret = c;
    return APBOT_OK;
}

static int pg_next_due(struct store *st, const struct apbot_now *now, int64_t *ret_wait_ms,
                       char *err, size_t errlen)
{
    struct pg *h = PG(st);
    struct apbot_now clock;
    int r = pg_reader_clock(h, now, &clock, err, errlen);
    if (r)
        return r;
    struct pp p = {.n = 0};
    pp_text(&p, clock.boot);
    int rc = APBOT_OK;
    PGresult *res = pg_run(h, P_NEXT_DUE, &p, &rc, err, errlen, "finding the next due item");
    if (!res)
        return rc;
    if (PQgetisnull(res, 0, 0)) {
        *ret_wait_ms = -1;
    } else {
        int64_t wait = col_i64(res, 0, 0) - clock.mono_ms;
        *ret_wait_ms = wait > 0 ? wait : 0;
    }
    PQclear(res);
    return APBOT_OK;
}

static int pg_pending(struct store *st, bool *ret_any, char *err, size_t errlen)
{
    struct pg *h = PG(st);
    int rc = APBOT_OK;
    PGresult *res = pg_run(h, P_PENDING, NULL, &rc, err, errlen, "looking for pending items");
    if (!res)
        return rc;
    *ret_any = PQntuples(res) > 0 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return APBOT_OK;
}

static int pg_schema_version(struct store *st, int *ret_version, char *err, size_t errlen)
{
    struct pg *h = PG(st);
    int rc = APBOT_OK;
    PGresult *res = pg_exec(h, "SELECT version FROM apbot_schema", &rc, err, errlen,
                            "reading the schema version");
    if (!res)
        return rc;
    *ret_version = PQntuples(res) ? atoi(PQgetvalue(res, 0, 0)) : 0;
    PQclear(res);
    return APBOT_OK;
}

/* Deferred and lazy writes commit with synchronous_commit off: committed, seen by everyone,
 * kept if this process dies, but on the server's disk only once its WAL is flushed past them.
 * A synchronous commit flushes the WAL up to its own commit record, and so every commit before
 * it (of any session: the WAL is one sequence), but only when the transaction wrote WAL before
 * its commit record: a transaction that only takes an xid (txid_current()) commits without a
 * flush. A transactional logical message is such a write, takes no lock (several hosts sync
 * at once) and leaves no row behind. Whether a synchronous write came in between is not
 * tracked: the flush runs whenever a deferred write is pending. */
static int pg_sync(struct store *st, char *err, size_t errlen)
{
    struct pg *h = PG(st);
    if (!h->unsynced)
        return APBOT_OK;
    if (h->dead)
        return pg_dead(h, err, errlen);
    if (st->in_batch)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store_sync: inside a batch");
    int rc = pg_exec_ok(h, "BEGIN; SELECT pg_logical_emit_message(true, 'apbot', 'sync'); COMMIT",
                        err, errlen, "flushing the server's log");
    if (rc != APBOT_OK) {
        if (!h->dead)
            (void)pg_exec_ok(h, "ROLLBACK", NULL, 0, "rollback");
        return rc;
    }
    h->unsynced = false;
    h->base.syncs++;
    return APBOT_OK;
}

static void pg_set_busy_timeout(struct store *st, int ms)
{
    struct pg *h = PG(st);
    char sql[64];
    snprintf(sql, sizeof(sql), "SET lock_timeout = %d", ms > 0 ? ms : 1);
    (void)pg_exec_ok(h, sql, NULL, 0, "setting the lock timeout");
}

/* ---- late commits ----------------------------------------------------------------------- */

struct late_op {
    const char *flow;
    int64_t ms;
};

static int late_body(struct store *st, void *ctx, char *err, size_t errlen)
{
    struct pg *h = PG(st);
    struct late_op *op = ctx;
    struct pp p = {.n = 0};
    pp_text_max(&p, op->flow, 256);
    pp_i64(&p, op->ms);
    pp_i64(&p, h->txnow.wall_ms);
    int rc = APBOT_OK;
    PGresult *res = pg_run(h, P_NOTE_LATE, &p, &rc, err, errlen, "noting a late commit");
    if (!res)
        return rc;
    PQclear(res);
    return APBOT_OK;
}

static int pg_note_late_commit(struct store *st, const char *flow_name, int64_t ms,
                               const struct apbot_now *now, char *err, size_t errlen)
{
    struct late_op op = {.flow = flow_name, .ms = ms};
    return pg_run_write(PG(st), now, late_body, &op, err, errlen);
}

static int pg_final_sums(struct store *st, int64_t from_ms, int64_t to_ms,
                         struct store_final_sum *ret, size_t max, size_t *ret_n, char *err,
                         size_t errlen)
{
    struct pg *h = PG(st);
    char sql[512];
    int rc = APBOT_OK;
    size_t n = 0;

    /* integers written by this program: nothing to quote; one statement, one snapshot */
    snprintf(sql, sizeof(sql), STORE_FINAL_SUMS_SQL("%" PRId64, "%" PRId64), from_ms, to_ms);
    PGresult *res = pg_exec(h, sql, &rc, err, errlen, "summing the final states");
    if (!res)
        return rc;
    for (int i = 0; i < PQntuples(res) && rc == APBOT_OK; i++) {
        if (n == max) {
            rc = apbot_fail(err, errlen, APBOT_E_LIMIT, "more than %zu states and currencies", max);
            break;
        }
        rc = store_final_sum_row(&ret[n++], PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
                                 (int)col_i64(res, i, 2), col_i64(res, i, 3), col_i64(res, i, 4));
        if (rc != APBOT_OK)
            apbot_fail(err, errlen, rc, "an item in an unknown final state");
    }
    PQclear(res);
    if (rc == APBOT_OK)
        *ret_n = n;
    return rc;
}

static int pg_late_commit(struct store *st, const char *flow_name, struct store_late_commit *ret,
                          char *err, size_t errlen)
{
    struct pg *h = PG(st);
    struct pp p = {.n = 0};
    pp_text_max(&p, flow_name, 256);
    int rc = APBOT_OK;
    PGresult *res = pg_run(h, P_GET_LATE, &p, &rc, err, errlen, "reading late commits");
    if (!res)
        return rc;
    struct store_late_commit lc = {0};
    if (PQntuples(res)) {
        lc.max_ms = col_i64(res, 0, 0);
        lc.at = col_i64(res, 0, 1);
        lc.observations = col_i64(res, 0, 2);
    }
    PQclear(res);
    *ret = lc;
    return APBOT_OK;
}

/* ---- copying a whole queue (store_copy) -------------------------------------------------- */

static int pg_tally(struct store *st, struct store_tally *ret, char *err, size_t errlen)
{
    struct pg *h = PG(st);
    int rc = APBOT_OK;
    /* One statement: one snapshot. */
    PGresult *res = pg_exec(h,
                            "SELECT 'e', count(*), NULL::bytea FROM events UNION ALL"
                            " SELECT 'v', count(*), NULL FROM evidence UNION ALL"
                            " SELECT 'l', count(*), NULL FROM late_commits UNION ALL"
                            " SELECT 's' || state, count(*), NULL FROM items GROUP BY state"
                            " UNION ALL (SELECT 'h', id, hash FROM events ORDER BY id DESC"
                            " LIMIT 1)",
                            &rc, err, errlen, "counting rows");
    if (!res)
        return rc;
    struct store_tally t;
    memset(&t, 0, sizeof(t));
    for (int i = 0; i < PQntuples(res); i++) {
        const char *k = PQgetvalue(res, i, 0);
        int64_t n = col_i64(res, i, 1);
        if (k[0] == 'e') {
            t.events = n;
        } else if (k[0] == 'v') {
            t.evidence = n;
        } else if (k[0] == 'l') {
            t.late_commits = n;
        } else if (k[0] == 'h') {
            t.head_event_id = n;
            if (!col_hash(res, i, 2, t.head_hash))
                memset(t.head_hash, 0, STORE_HASH_LEN);
        } else {
            enum machine_state s = machine_state_from_name(k + 1);
            if (s == MACHINE_STATE_INVALID)
                t.unknown_state += n;
            else
                t.by_state[s] += n;
            t.items += n;
        }
    }
    PQclear(res);
    *ret = t;
    return APBOT_OK;
}

/* Runs query through a cursor, PG_PAGE rows at a time, calling row() for each. */
static int pg_cursor(struct pg *h, const char *query,
                     int (*row)(void *ctx, const PGresult *res, int i), void *ctx, char *err,
                     size_t errlen, const char *what)
{
    char sql[1024];
    snprintf(sql, sizeof(sql), "DECLARE apbot_dump NO SCROLL CURSOR FOR %s", query);
    int r = pg_exec_ok(h, sql, err, errlen, what);
    if (r)
        return r;
    for (;;) {
        int rc = APBOT_OK;
        PGresult *res = pg_exec(h, "FETCH 500 FROM apbot_dump", &rc, err, errlen, what);
        if (!res)
            return rc;
        int n = PQntuples(res);
        for (int i = 0; i < n && r == APBOT_OK; i++)
            r = row(ctx, res, i);
        PQclear(res);
        if (r || n == 0)
            break;
    }
    int c = pg_exec_ok(h, "CLOSE apbot_dump", err, errlen, what);
    return r ? r : c;
}

struct dump_ctx {
    const struct store_dump *d;
    char *err;
    size_t errlen;
};

static int dump_item(void *arg, const PGresult *res, int i)
{
    struct dump_ctx *c = arg;
    struct store_item it;
    pg_row_item(res, i, &it);
    int r;
    if (it.state == MACHINE_STATE_INVALID)
        r = apbot_fail(c->err, c->errlen, APBOT_E_STATE,
                       "item #%" PRId64 " is in a state this apbot does not know: copy the "
                       "queue with the apbot that wrote it",
                       it.id);
    else
        r = c->d->item(c->d->ctx, &it);
    store_item_done(&it);
    return r;
}

static int dump_event(void *arg, const PGresult *res, int i)
{
    struct dump_ctx *c = arg;
    unsigned char prev[STORE_HASH_LEN], hash[STORE_HASH_LEN];
    struct store_event_row row = col_event(res, i, prev, hash);
    return c->d->event(c->d->ctx, &row);
}

static int dump_evidence(void *arg, const PGresult *res, int i)
{
    struct dump_ctx *c = arg;
    struct store_evidence_row row;
    row_evidence(res, i, &row);
    return c->d->evidence(c->d->ctx, &row);
}

static int dump_late(void *arg, const PGresult *res, int i)
{
    struct dump_ctx *c = arg;
    struct store_late_commit lc = {
        .max_ms = col_i64(res, i, 1), .at = col_i64(res, i, 2), .observations = col_i64(res, i, 3)};
    return c->d->late(c->d->ctx, PQgetvalue(res, i, 0), &lc);
}

static int pg_dump(struct store *st, const struct store_dump *d, struct store_tally *ret_tally,
                   char *err, size_t errlen)
{
    struct pg *h = PG(st);
    /* Readers may go on; writers wait until the copy is read (EXCLUSIVE blocks them). */
    int r = pg_exec_ok(h,
                       "BEGIN ISOLATION LEVEL REPEATABLE READ;"
                       "LOCK TABLE items, events, evidence, late_commits IN EXCLUSIVE MODE",
                       err, errlen, "locking the queue for the copy");
    if (r) {
        if (!h->dead)
            (void)pg_exec_ok(h, "ROLLBACK", NULL, 0, "rollback");
        return r;
    }
    struct dump_ctx c = {.d = d, .err = err, .errlen = errlen};
    r = pg_cursor(h, "SELECT " ITEM_COLS " FROM items ORDER BY id", dump_item, &c, err, errlen,
                  "reading items");
    if (r == APBOT_OK)
        r = pg_cursor(h, EVENT_CHAIN_ALL, dump_event, &c, err, errlen, "reading events");
    if (r == APBOT_OK)
        r = pg_cursor(h,
                      "SELECT id, item_id, at, step, method, url, http_status, elapsed_ms,"
                      " transport, rule, outcome, excerpt FROM evidence ORDER BY id",
                      dump_evidence, &c, err, errlen, "reading evidence");
    if (r == APBOT_OK)
        r = pg_cursor(h, "SELECT flow, max_ms, at, observations FROM late_commits ORDER BY flow",
                      dump_late, &c, err, errlen, "reading late commits");
    if (r == APBOT_OK)
        r = pg_tally(st, ret_tally, err, errlen);
    if (!h->dead)
        (void)pg_exec_ok(h, "ROLLBACK", NULL, 0, "ending the copy");
    return r;
}

static int pg_load_begin(struct store *st, char *err, size_t errlen)
{
    struct pg *h = PG(st);
    int r = pg_exec_ok(h,
                       "BEGIN;"
                       "LOCK TABLE items, events, evidence, late_commits IN ACCESS EXCLUSIVE MODE",
                       err, errlen, "locking the target queue");
    struct store_tally t;
    if (r == APBOT_OK)
        r = pg_tally(st, &t, err, errlen);
    if (r == APBOT_OK && (t.items || t.events || t.evidence || t.late_commits))
        r = apbot_fail(err, errlen, APBOT_E_STATE,
                       "store: the target queue is not empty (%" PRId64 " items, %" PRId64
                       " events, %" PRId64 " evidence rows): refused",
                       t.items, t.events, t.evidence);
    if (r) {
        if (!h->dead)
            (void)pg_exec_ok(h, "ROLLBACK", NULL, 0, "rollback");
        return r;
    }
    h->in_load = true;
    return APBOT_OK;
}

static int pg_load_sql(struct pg *h, const char *sql, struct pp *p, char *err, size_t errlen,
                       const char *what)
{
    int r = APBOT_OK;
    PGresult *res = pg_exec_params(h, sql, p, &r, err, errlen, what);
    PQclear(res);
    return res ? APBOT_OK : r;
}

static int pg_load_item(struct store *st, const struct store_item *it, char *err, size_t errlen)
{
    struct pp p = {.n = 0};
    pp_i64(&p, it->id);
    pp_text(&p, it->key);
    pp_text(&p, it->fingerprint);
    pp_text(&p, machine_state_name(it->state));
    pp_i64(&p, it->counters.posts);
    pp_i64(&p, it->counters.cycles);
    pp_i64(&p, it->counters.attempts);
    pp_i64(&p, it->next_at);
    pp_i64(&p, it->last_post_at);
    pp_i64(&p, it->created_at);
    pp_i64(&p, it->updated_at);
    pp_text(&p, it->lease_owner);
    pp_i64(&p, it->lease_until);
    pp_text(&p, it->payload ? it->payload : "");
    pp_text(&p, it->source ? it->source : "");
    pp_text(&p, it->erp_doc);
    pp_text(&p, it->reason);
    pp_text(&p, it->vendor_id ? it->vendor_id : "");
    pp_text(&p, it->vendor_name);
    pp_text(&p, it->invoice_number ? it->invoice_number : "");
    pp_text(&p, it->doc_type);
    pp_text(&p, it->issue_date);
    pp_text(&p, it->currency);
    pp_i64(&p, it->exponent);
    pp_i64(&p, it->total);
    pp_text(&p, it->clock_boot);
    pp_i64(&p, it->next_mono);
    pp_i64(&p, it->lease_mono);
    if (it->has_settle)
        pp_i64(&p, it->settle_mono);
    else
        pp_text(&p, NULL);
    pp_i64(&p, it->settle_at);
    return pg_load_sql(PG(st),
                       "INSERT INTO items (" ITEM_COLS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8,"
                       " $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23,"
                       " $24, $25, $26, $27, $28, $29, $30)",
                       &p, err, errlen, "copying an item");
}

static int pg_load_event(struct store *st, const struct store_event_row *row, char *err,
                         size_t errlen)
{
    struct pp p = {.n = 0};
    pp_i64(&p, row->id);
    pp_i64(&p, row->item_id);
    pp_i64(&p, row->at);
    pp_text(&p, row->from);
    pp_text(&p, row->to);
    pp_text(&p, row->event);
    pp_text(&p, row->detail);
    pp_text(&p, row->actor);
    /* The chain is carried as it is (store_copy): with its hashes the chain trigger keeps the
     * row as it comes; a NULL would fail the table's NOT NULL. */
    char hex[2][2 + 2 * STORE_HASH_LEN + 1];
    for (int i = 0; i < 2; i++) {
        const unsigned char *hsh = i ? row->hash : row->prev_hash;
        if (hsh) {
            hex[i][0] = '\\';
            hex[i][1] = 'x';
            store_audit_hex(hsh, hex[i] + 2);
        }
        p.v[p.n++] = hsh ? hex[i] : NULL;
    }
    return pg_load_sql(PG(st),
                       "INSERT INTO events (id, item_id, at, from_state, to_state, event, detail,"
                       " actor, prev_hash, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8,"
                       " $9::bytea, $10::bytea)",
                       &p, err, errlen, "copying an event");
}

static int pg_load_evidence(struct store *st, const struct store_evidence_row *row, char *err,
                            size_t errlen)
{
    struct pp p = {.n = 0};
    pp_i64(&p, row->id);
    pp_i64(&p, row->item_id);
    pp_i64(&p, row->at);
    pp_text(&p, row->ev.step);
    pp_text(&p, row->ev.method);
    pp_text(&p, row->ev.url);
    pp_i64(&p, row->ev.http_status);
    pp_i64(&p, row->ev.elapsed_ms);
    pp_text(&p, row->ev.transport);
    pp_text(&p, row->ev.rule);
    pp_text(&p, row->ev.outcome);
    pp_text(&p, row->ev.excerpt);
    return pg_load_sql(PG(st),
                       "INSERT INTO evidence (id, item_id, at, step, method, url, http_status,"
                       " elapsed_ms, transport, rule, outcome, excerpt) VALUES ($1, $2, $3, $4,"
                       " $5, $6, $7, $8, $9, $10, $11, $12)",
                       &p, err, errlen, "copying evidence");
}

static int pg_load_late(struct store *st, const char *flow, const struct store_late_commit *lc,
                        char *err, size_t errlen)
{
    struct pp p = {.n = 0};
    pp_text(&p, flow);
    pp_i64(&p, lc->max_ms);
    pp_i64(&p, lc->at);
    pp_i64(&p, lc->observations);
    return pg_load_sql(PG(st),
                       "INSERT INTO late_commits (flow, max_ms, at, observations)"
                       " VALUES ($1, $2, $3, $4)",
                       &p, err, errlen, "copying a late commit");
}

static int pg_load_end(struct store *st, bool commit, char *err, size_t errlen)
{
    struct pg *h = PG(st);
    h->in_load = false;
    int r = APBOT_OK;
    if (commit) {
        /* The sequences go on after the copied ids. */
        r = pg_exec_ok(h,
                       "SELECT setval(pg_get_serial_sequence('items', 'id'),"
                       " GREATEST((SELECT max(id) FROM items), 1),"
                       " (SELECT count(*) > 0 FROM items));"
                       "SELECT setval(pg_get_serial_sequence('events', 'id'),"
                       " GREATEST((SELECT max(id) FROM events), 1),"
                       " (SELECT count(*) > 0 FROM events));"
                       "SELECT setval(pg_get_serial_sequence('evidence', 'id'),"
                       " GREATEST((SELECT max(id) FROM evidence), 1),"
                       " (SELECT count(*) > 0 FROM evidence))",
                       err, errlen, "moving the id sequences");
        if (r == APBOT_OK) {
            PGresult *res = pg_exec(h, "COMMIT", &r, err, errlen, "committing the copy");
            if (res) {
                if (strcmp(PQcmdStatus(res), "COMMIT") != 0)
                    r = apbot_fail(err, errlen, APBOT_E_DB, "store: the copy was rolled back");
                PQclear(res);
                return r;
            }
        }
    }
    if (!h->dead)
        (void)pg_exec_ok(h, "ROLLBACK", NULL, 0, "rollback");
    return r;
}

/* ---- the audit chain ------------------------------------------------------------------ */

struct chained_ctx {
    store_event_fn fn;
    void *ctx;
};

static int chained_row(void *arg, const PGresult *res, int i)
{
    struct chained_ctx *c = arg;
    unsigned char prev[STORE_HASH_LEN], hash[STORE_HASH_LEN];
    struct store_event_row row = col_event(res, i, prev, hash);
    return c->fn(c->ctx, &row);
}

static int pg_each_chained(struct store *st, store_event_fn fn, void *ctx, char *err, size_t errlen)
{
    struct pg *h = PG(st);
    /* One snapshot; nobody waits for a reader. */
    int r = pg_exec_ok(h, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", err, errlen,
                       "reading the audit events");
    if (r)
        return r;
    struct chained_ctx c = {.fn = fn, .ctx = ctx};
    r = pg_cursor(h, EVENT_CHAIN_ALL, chained_row, &c, err, errlen, "reading the audit events");
    if (!h->dead)
        (void)pg_exec_ok(h, "ROLLBACK", NULL, 0, "ending the read");
    return r;
}

static int pg_audit_head(struct store *st, int64_t before_ms, struct store_audit_head *ret,
                         char *err, size_t errlen)
{
    struct pg *h = PG(st);
    char sql[160];
    snprintf(sql, sizeof(sql),
             "SELECT id, item_id, at, hash FROM events WHERE at < %" PRId64
             " ORDER BY id DESC LIMIT 1",
             before_ms);
    int rc = APBOT_OK;
    PGresult *res = pg_exec(h, sql, &rc, err, errlen, "reading the audit chain's head");
    if (!res)
        return rc;
    ret->event_id = 0;
    if (PQntuples(res)) {
        ret->event_id = col_i64(res, 0, 0);
        ret->item_id = col_i64(res, 0, 1);
        ret->at = col_i64(res, 0, 2);
        if (!col_hash(res, 0, 3, ret->hash))
            memset(ret->hash, 0, STORE_HASH_LEN);
    }
    PQclear(res);
    return APBOT_OK;
}

static const struct store_ops pg_ops = {
    .name = "postgresql",
    .close = pg_close,
    .begin = pg_begin,
    .commit = pg_commit,
    .rollback = pg_rollback,
    .enqueue = pg_enqueue,
    .enqueue_many = pg_enqueue_many,
    .claim = pg_claim,
    .claim_id = pg_claim_id,
    .renew = pg_renew,
    .apply = pg_apply,
    .add_evidence = pg_add_evidence,
    .each_expired = pg_each_expired,
    .get = pg_get,
    .each_limit = pg_each_limit,
    .each_event = pg_each_event,
    .each_evidence = pg_each_evidence,
    .counts = pg_counts,
    .pending = pg_pending,
    .next_due = pg_next_due,
    .schema_version = pg_schema_version,
    .set_busy_timeout = pg_set_busy_timeout,
    .sync = pg_sync,
    .note_late_commit = pg_note_late_commit,
    .late_commit = pg_late_commit,
    .final_sums = pg_final_sums,
    .dump = pg_dump,
    .load_begin = pg_load_begin,
    .load_item = pg_load_item,
    .load_event = pg_load_event,
    .load_evidence = pg_load_evidence,
    .load_late = pg_load_late,
    .load_end = pg_load_end,
    .tally = pg_tally,
    .each_chained = pg_each_chained,
    .audit_head = pg_audit_head,
};
