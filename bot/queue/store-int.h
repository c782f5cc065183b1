/*
 * store-int.h - what the store's backends share, private to bot/queue/ (and the queue's tests).
 *
 * store.c is the thin dispatcher: it checks the arguments of every public call, then calls
 * the backend's operation through the ops table below, a table of function pointers per
 * backend as SQLite's sqlite3_io_methods (sqlite3.h) and git's struct ref_storage_be
 * (refs/refs-internal.h). A backend's handle embeds `struct store` as its first member, so a
 * `struct store *` is a pointer to the backend's own struct. Each operation keeps the contract
 * written in store.h; the pure decisions (store_apply_guard, store_lease_allows,
 * store_step_delay_ms, store_restamp, ...) are shared, so both backends decide the same way on the
 * same stamps: a backend reads and writes rows, and asks these what a row allows.
 *
 * If you add an operation: add it to struct store_ops and to STORE_REQUIRED_OPS below (store.c
 * does not build until their counts agree), to both backends' tables and to the dispatcher.
 * A backend that leaves a required operation NULL builds, but opens no store: its constructor
 * registers its table with store_base_init, which refuses it (APBOT_E_BUG naming the backend
 * and the operation) before anything is opened. Only apply_claim and enqueue_many may be NULL.
 *
 * The functions only the tests call (store_enqueue_raw, store_recover, the busy settings, ...)
 * are declared in store-test.h, for the tests' build only.
 */
#ifndef APBOT_STORE_INT_H
#define APBOT_STORE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "apbot/store.h"

#define STORE_BUSY_TIMEOUT_MS 5000
#define STORE_BUSY_RETRIES 6        /* whole-transaction retries after the busy timeout */
#define STORE_BUSY_PAUSE_BASE_MS 20 /* pause before retry n: in [d/2, d], d = base * 2^n */
#define STORE_BUSY_PAUSE_CAP_MS 1000
#define STORE_TEXT_MAX 2048      /* url, detail, reason and other short texts are cut here */
#define STORE_EXPIRED_MAX 100000 /* items one store_each_expired call lists at most */

struct store_ops;

/* The conflict's message for an invoice keyed key whose identity is queued as item id (from
 * source, in state) with another fingerprint, into buf: the same words on every backend. */
void store_conflict_detail(char *buf, size_t len, int64_t id, const char *key, const char *source,
                           const char *state);

/*
 * A precomputed queue row, what store_enqueue derives from an invoice (key, fingerprint,
 * canonical payload, summary), for the backends' enqueue. All strings but vendor_name and
 * source are required; doc_type is "invoice" / "credit-note"; total is the payable amount in
 * minor units.
 */
struct store_new_item {
    const char *key, *fingerprint, *payload, *source;
    const char *vendor_id, *vendor_name, *invoice_number, *doc_type, *issue_date, *currency;
    int exponent;
    int64_t total;
};

/* The part of every handle the dispatcher reads; each backend's struct starts with it. */
struct store {
    const struct store_ops *ops;
    bool in_batch;                    /* between store_begin and store_commit/rollback */
    int busy_retries;                 /* whole-transaction retries after the busy timeout */
    int64_t busy_retried;             /* how many this handle did */
    uint64_t rng;                     /* xorshift state for the retry jitter */
    enum store_durability durability; /* store_set_durability's; backends read it */
    int64_t syncs;                    /* disk syncs this handle ran (backends count) */
    bool server_clock; /* stamps on a server's clock (store_server_clock): set by the backend */
};

/* Every row of a queue, for store_copy: each callback sees one row, valid during the call. */
struct store_dump {
    int (*item)(void *ctx, const struct store_item *it);
    int (*event)(void *ctx, const struct store_event_row *row);
    int (*evidence)(void *ctx, const struct store_evidence_row *row);
    int (*late)(void *ctx, const char *flow, const struct store_late_commit *lc);
    void *ctx;
};

/* One backend. Arguments were checked by the dispatcher; `now` is never NULL. */
struct store_ops {
    const char *name; /* "sqlite", "postgresql" */
    void (*close)(struct store *st);
    int (*begin)(struct store *st, char *err, size_t errlen);
    int (*commit)(struct store *st, char *err, size_t errlen);
    void (*rollback)(struct store *st);
    int (*enqueue)(struct store *st, const struct store_new_item *ni, const struct apbot_now *now,
                   enum store_enqueue_result *ret_result, int64_t *ret_id, char *err,
                   size_t errlen);
    int (*claim)(struct store *st, const char *owner, const struct apbot_now *now, int64_t lease_ms,
                 const struct machine_step *claimed, struct store_item *ret, char *err,
                 size_t errlen);
    /* store_claim_id */
    int (*claim_id)(struct store *st, int64_t id, const char *owner, const struct apbot_now *now,
                    int64_t lease_ms, const struct machine_step *claimed, struct store_item *ret,
                    char *err, size_t errlen);
    int (*renew)(struct store *st, int64_t id, const char *owner, const struct apbot_now *now,
                 int64_t lease_ms, char *err, size_t errlen);
    /* ret_item (may be NULL): the row as the change left it, read in the same transaction
     * where the backend can, filled only on APBOT_OK */
    int (*apply)(struct store *st, int64_t id, const char *owner, const struct store_change *ch,
                 const struct apbot_now *now, int64_t *ret_holder, struct store_item *ret_item,
                 char *err, size_t errlen);
    /* store_apply_claim in one transaction (NULL: store.c makes it an apply, then a claim);
     * called only with an owner, a valid change and a valid claim */
    int (*apply_claim)(struct store *st, int64_t id, const char *owner,
                       const struct store_change *ch, const struct apbot_now *now,
                       int64_t *ret_holder, struct store_item *ret_item, int64_t lease_ms,
                       const struct machine_step *claimed, struct store_item *ret_next,
                       bool *ret_claimed, char *err, size_t errlen);
    /* store_enqueue_many's reqs (n >= 1) in one transaction, each req's result, id and detail
     * set on APBOT_OK (NULL: store.c enqueues them one by one in a transaction) */
    int (*enqueue_many)(struct store *st, struct store_enqueue_req *reqs, size_t n,
                        const struct apbot_now *now, char *err, size_t errlen);
    /* n >= 1 exchanges in one transaction */
    int (*add_evidence)(struct store *st, int64_t item_id, const struct store_evidence *ev,
                        size_t n, const struct apbot_now *now, char *err, size_t errlen);
    int (*each_expired)(struct store *st, const struct apbot_now *now, int64_t limit,
                        store_item_fn fn, void *ctx, char *err, size_t errlen);
    /* by key when key is not NULL, else by id */
    int (*get)(struct store *st, int64_t id, const char *key, struct store_item *ret, char *err,
               size_t errlen);
    int (*each_limit)(struct store *st, enum machine_state state, int64_t limit, store_item_fn fn,
                      void *ctx, char *err, size_t errlen);
    int (*each_event)(struct store *st, int64_t item_id, store_event_fn fn, void *ctx, char *err,
                      size_t errlen);
    int (*each_evidence)(struct store *st, int64_t item_id, store_evidence_fn fn, void *ctx,
                         char *err, size_t errlen);
    int (*counts)(struct store *st, struct store_counts *ret, char *err, size_t errlen);
    /* store_final_sums; max >= 1 */
    int (*final_sums)(struct store *st, int64_t from_ms, int64_t to_ms, struct store_final_sum *ret,
                      size_t max, size_t *ret_n, char *err, size_t errlen);
    int (*pending)(struct store *st, bool *ret_any, char *err, size_t errlen);
    int (*next_due)(struct store *st, const struct apbot_now *now, int64_t *ret_wait_ms, char *err,
                    size_t errlen);
    int (*schema_version)(struct store *st, int *ret_version, char *err, size_t errlen);
    void (*set_busy_timeout)(struct store *st, int ms);
    /* store_sync: every STORE_DEFERRED write of the handle on disk */
    int (*sync)(struct store *st, char *err, size_t errlen);
    int (*note_late_commit)(struct store *st, const char *flow_name, int64_t ms,
                            const struct apbot_now *now, char *err, size_t errlen);
    int (*late_commit)(struct store *st, const char *flow_name, struct store_late_commit *ret,
                       char *err, size_t errlen);
    /* store_copy: every row in id order, and the tally of what was dumped, in one snapshot
     * that keeps writers out; an item in a state this version does not know is refused
     * (APBOT_E_STATE): it would not survive the copy */
    int (*dump)(struct store *st, const struct store_dump *d, struct store_tally *ret_tally,
                char *err, size_t errlen);
    /* store_copy's target: one transaction that refuses a non-empty queue (APBOT_E_STATE),
     * rows inserted as they are (ids and stamps kept), ended by load_end (commit or not) */
    int (*load_begin)(struct store *st, char *err, size_t errlen);
    int (*load_item)(struct store *st, const struct store_item *it, char *err, size_t errlen);
    int (*load_event)(struct store *st, const struct store_event_row *row, char *err,
                      size_t errlen);
    int (*load_evidence)(struct store *st, const struct store_evidence_row *row, char *err,
                         size_t errlen);
    int (*load_late)(struct store *st, const char *flow, const struct store_late_commit *lc,
                     char *err, size_t errlen);
    int (*load_end)(struct store *st, bool commit, char *err, size_t errlen);
    /* rows per table and items per state, one snapshot (inside a load: what it holds) */
    int (*tally)(struct store *st, struct store_tally *ret, char *err, size_t errlen);
    /* store_audit_verify's rows: every event with prev_hash and hash, in id order, in one read
     * snapshot that writers do not wait for; a non-zero return of fn stops the walk and is
     * returned */
    int (*each_chained)(struct store *st, store_event_fn fn, void *ctx, char *err, size_t errlen);
    /* store_audit_head: the last event by id with at < before_ms (item_id, at, hash filled);
     * event_id 0 when none */
    int (*audit_head)(struct store *st, int64_t before_ms, struct store_audit_head *ret, char *err,
                      size_t errlen);
};

/* Every operation a backend must fill, as X(name): all of struct store_ops but its name
 * (also required), apply_claim and enqueue_many (optional). store_base_init checks them. */
#define STORE_REQUIRED_OPS(X)                                                                      \
    X(close)                                                                                       \
    X(begin)                                                                                       \
    X(commit)                                                                                      \
    X(rollback)                                                                                    \
    X(enqueue)                                                                                     \
    X(claim)                                                                                       \
    X(claim_id)                                                                                    \
    X(renew)                                                                                       \
    X(apply)                                                                                       \
    X(add_evidence)                                                                                \
    X(each_expired)                                                                                \
    X(get)                                                                                         \
    X(each_limit)                                                                                  \
    X(each_event)                                                                                  \
    X(each_evidence)                                                                               \
    X(counts)                                                                                      \
    X(final_sums)                                                                                  \
    X(pending)                                                                                     \
    X(next_due)                                                                                    \
    X(schema_version)                                                                              \
    X(set_busy_timeout)                                                                            \
    X(sync)                                                                                        \
    X(note_late_commit)                                                                            \
    X(late_commit)                                                                                 \
    X(dump)                                                                                        \
    X(load_begin)                                                                                  \
    X(load_item)                                                                                   \
    X(load_event)                                                                                  \
    X(load_evidence)                                                                               \
    X(load_late)                                                                                   \
    X(load_end)                                                                                    \
    X(tally)                                                                                       \
    X(each_chained)                                                                                \
    X(audit_head)

/* The final states' items and money in [FROM, TO) of updated_at (store_final_sums), with the
 * backend's parameter markers: both backends run this one statement. */
#define STORE_FINAL_SUMS_SQL(FROM, TO)                                                             \
    "SELECT state, currency, exponent, COUNT(*), CAST(SUM(total) AS BIGINT) FROM items"            \
    " WHERE state IN ('completed', 'business-exception', 'manual-review')"                         \
    " AND updated_at >= " FROM " AND updated_at < " TO                                             \
    " GROUP BY state, currency, exponent ORDER BY state, currency, exponent"
/* One row of its answer into *row; APBOT_E_BUG for a state this version does not know. */
int store_final_sum_row(struct store_final_sum *row, const char *state, const char *currency,
                        int exponent, int64_t items, int64_t amount);

/* The backends' constructors: open and migrate the queue at path. */
int store_sqlite_open(const char *path, struct store **ret, char *err, size_t errlen);
int store_pg_open(const char *conninfo, struct store **ret, char *err, size_t errlen);

/* store_test_trust_caller_clock's switch (store-test.h; off in the product): read by a
 * backend with a clock of its own. */
bool store_caller_clock_trusted(void);

/*
 * A backend registers a new handle with its ops table, first thing in its constructor: the
 * table must have a name and every operation of STORE_REQUIRED_OPS, else APBOT_E_BUG naming
 * the backend and the missing operation (st untouched: free it and fail). On APBOT_OK the
 * shared part is filled (the table, busy defaults, jitter seed).
 */
int store_base_init(struct store *st, const struct store_ops *ops, char *err, size_t errlen);

/* The body of one write transaction; writes its results into ctx only (it may run again). */
typedef int (*store_tx_body)(struct store *st, void *ctx, char *err, size_t errlen);
/* A backend's transaction bracket: begin, and end given the body's result (commit when
 * APBOT_OK, else roll back; returns the result or the commit's error). */
typedef int (*store_tx_begin_fn)(struct store *st, char *err, size_t errlen);
typedef int (*store_tx_end_fn)(struct store *st, int r, char *err, size_t errlen);
/*
 * Runs body in one write transaction. APBOT_E_BUSY (lock timeout, serialization failure,
 * deadlock) rolls the whole transaction back and runs it again after a jittered pause, up to
 * busy_retries times; inside a batch there is nothing to retry and the error goes back.
 */
int store_run_write(struct store *st, store_tx_begin_fn begin, store_tx_end_fn end,
                    store_tx_body body, void *ctx, char *err, size_t errlen);

/* How many bytes of v to keep so that it is at most max bytes, never cutting a UTF-8
 * sequence. */
size_t store_text_cut(const char *v, size_t max);

/*
 * store_apply's guard, the one place where it is decided whether a change may be applied to
 * a row; pure (no I/O, no clock), so both backends decide the same way. The backend reads,
 * in the write transaction that will make the change and under the locks it holds for it,
 * what the guard needs: the row `it` (re-stamped for `now` with store_restamp, now being the
 * transaction's clock: the server's on PostgreSQL), the row's state as stored when this
 * version cannot map it (state_text, for the message; may be NULL otherwise) and, when
 * ch->erp_doc is set, the id of another item holding that document (holder, 0 when none;
 * ignored without ch->erp_doc). Then, in this order:
 *   an unknown state (MACHINE_STATE_INVALID)      APBOT_E_STATE, never acted on;
 *   the row's state is not ch->from               APBOT_E_STATE;
 *   store_lease_allows(it, now, owner, ...) no   its result (APBOT_E_STATE, APBOT_E_INVAL);
 *   another item holds ch->erp_doc                APBOT_E_CONFLICT (the caller reports holder);
 * else APBOT_OK: the backend writes the change. err names the refusal and the item.
 */
int store_apply_guard(const struct store_item *it, const char *state_text, int64_t holder,
                      const char *owner, const struct store_change *ch, const struct apbot_now *now,
                      char *err, size_t errlen);

/*
 * The audit chain (store.h): an event's hash, SHA-256 over prev (STORE_HASH_LEN bytes; the
 * genesis for the first event) and row's canonical serialisation, version 1, into out. Reads
 * row's id, item_id, at, from, to, event, detail and actor (its hashes are not read); each text
 * as the database keeps it. The PostgreSQL backend computes the same bytes in SQL
 * (apbot_event_hash, store_pg.c); test_store holds the two to each other. Cannot fail.
 */
void store_event_hash(const unsigned char *prev, const struct store_event_row *row,
                      unsigned char out[STORE_HASH_LEN]);
/* The hash before the first event: 32 zero bytes. */
extern const unsigned char store_audit_genesis[STORE_HASH_LEN];

/* The event detail store_apply writes: the machine's why, then the caller's detail. */
void store_event_detail(const struct machine_step *step, const char *detail, char *buf, size_t len);

/*
 * store_pg.c: what a failed PostgreSQL statement means, given its SQLSTATE (NULL when the
 * result carried none) and whether the connection is bad (or the round trip brought no result,
 * or ran past its bound): LOST for a connection exception (class 08), an administrator's or a
 * crash's shutdown (57P01, 57P02), a server starting up or shutting down (57P03), a session the
 * server ended (57P05, 25P03), too many connections (53300), a read-only server after a
 * failover (25006), and any bad connection; BUSY for a serialization failure, a deadlock, the
 * lock timeout and the statement timeout (40001, 40P01, 55P03, 57014); FAILED for the rest.
 * store_pg_fault decides it (store-test.h).
 */
enum store_pg_fault {
    STORE_PG_FAILED = 0, /* the statement failed: APBOT_E_DB */
    STORE_PG_BUSY,       /* run the whole transaction again: APBOT_E_BUSY */
    STORE_PG_LOST,       /* the server or the connection is gone: APBOT_E_UNAVAIL, handle dead */
};
/*
 * store_walvfs.c: the VFS the SQLite backend opens its files through, the default one except
 * that a WAL frame's header and page reach the file system in one write. Registers it on
 * first use; NULL when it cannot (then the default VFS serves). Its counts are a test hook
 * (store-test.h).
 */
const char *store_walvfs_name(void);
/* Writes a header held by db's WAL (SQLITE_OK, or the write's error); for the WAL hook. */
struct sqlite3;
int store_walvfs_flush(struct sqlite3 *db);

#endif
