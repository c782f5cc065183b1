/*
 * store.h - the durable queue: items, their audit events and ERP evidence.
 *
 * One interface for every backend (SQLite, PostgreSQL): nothing here names a
 * database type, and every contract below is what a backend must keep. Every state change is
 * one transaction that updates the item row and appends its audit event; the intent to post
 * is such a change, committed before the form is sent. Items are claimed with a lease (owner
 * + expiry) so two runners on one queue never work the same item. The store knows states by
 * their machine_state values but never decides a transition: the caller passes the step
 * machine_next() computed, and the store persists it.
 *
 * Time. Every duration is in milliseconds. Every function that stamps or compares takes
 * `const struct apbot_now *now` (NULL: the store reads apbot_clock_now() itself). Every
 * safety comparison (lease expiry, due time, settle delay) is made on (boot id, CLOCK_BOOTTIME)
 * stamps kept in the row (`clock_boot`, `next_mono`, `lease_mono`, `settle_mono`); the wall
 * columns (`created_at`, `updated_at`, `next_at`, `lease_until`, `settle_at`, events' `at`)
 * are for people and never decide anything. A row stamped under another boot counts as:
 * lease expired, due now, and its settle delay counted again from the moment this boot
 * first sees it (the store re-stamps it in that same transaction): never shortened.
 * (A backend with a clock of its own, as PostgreSQL's server clock for several hosts, stamps
 * on that clock instead and hands out items whose stamps compare with the `now` its callers
 * pass; the contract is the comparisons, not where the clock is read: see "Backends".)
 *
 * Busy. A write that finds the queue locked waits the busy timeout, then the store retries
 * the whole transaction (bounded, with jitter) before it reports APBOT_E_BUSY. On PostgreSQL
 * the busy timeout is the lock timeout, and a serialization failure, a deadlock or the
 * statement timeout counts as busy too.
 *
 * Unavailable. A queue whose server cannot be reached, or whose connection was lost (a
 * restart, a failover, a cut network, a round trip past its bound), answers APBOT_E_UNAVAIL:
 * store_open when the server does not answer, any call once the connection is gone. It is
 * never retried inside the store, and the handle stays unusable: close it and open the queue
 * again. A change whose transaction was under way is not known to be recorded or not: the
 * row as the queue holds it decides, as after a crash (its lease expires and the item is
 * recovered). Only the PostgreSQL backend answers it; a SQLite file is there or it is not.
 */
#ifndef APBOT_STORE_H
#define APBOT_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "apbot/clock.h"
#include "apbot/error.h"
#include "apbot/machine.h"

struct store;
struct invoice;

/* One queue row. Strings are heap-owned; free with store_item_done(). */
struct store_item {
    int64_t id;
    char key[32];         /* identity key, "AP1-..." */
    char fingerprint[65]; /* content fingerprint, hex */
    enum machine_state state;
    struct machine_counters counters; /* posts, cycles, attempts (settled unused) */
    int64_t next_at;                  /* due time, wall ms: for people */
    int64_t last_post_at;             /* wall ms of the last intent to post, 0 if never */
    int64_t created_at, updated_at;   /* wall ms */
    char *lease_owner;                /* NULL when not leased */
    int64_t lease_until;              /* lease expiry, wall ms: for people */
    /* The clock every safety decision reads; see "Pure decisions" below. */
    char clock_boot[APBOT_BOOT_ID_LEN]; /* boot the *_mono stamps were taken under */
    int64_t next_mono;                  /* due time on CLOCK_BOOTTIME */
    int64_t lease_mono;                 /* lease expiry on CLOCK_BOOTTIME */
    bool has_settle;     /* a post may have reached the ERP: the settle base below is set */
    int64_t settle_mono; /* settle base on CLOCK_BOOTTIME: the moment the last possible send
                          * was recorded (step.settle_mark), or this boot's first sight */
    int64_t settle_at;   /* the settle base as first recorded, wall ms: for people */
    char *payload;       /* canonical invoice JSON */
    char *source;        /* "file:line" or "file#element" it came from */
    char *erp_doc;       /* ERP document number, NULL until known */
    char *reason;        /* last reason (rejection text, review cause), NULL if none */
    /* summary columns, copied from the invoice at enqueue */
    char *vendor_id, *vendor_name, *invoice_number;
    char doc_type[16]; /* "invoice" / "credit-note" */
    char issue_date[11], currency[4];
    int exponent;
    int64_t total; /* payable, minor units */
};
/* Frees the strings of *item (not item itself); NULL and a zeroed item are fine. */
void store_item_done(struct store_item *item);

enum store_enqueue_result {
    STORE_ENQ_QUEUED = 0, /* new row */
    STORE_ENQ_ALREADY,    /* same key, same fingerprint: nothing changed */
    STORE_ENQ_CONFLICT,   /* same key, different fingerprint: refused */
};

/*
 * Opens (creating and migrating as needed) the queue at path (":memory:" for tests; a
 * PostgreSQL URI or connection string, see "Backends"). A new database file and its
 * companions (-wal, -shm) are created readable by the owner only (0600): they hold invoices
 * and evidence. Returns APBOT_OK and *ret (close with store_close), or an error with detail
 * in err, never showing a password (APBOT_E_IO: cannot open, or a server that answers refused
 * the connection; APBOT_E_UNAVAIL: the server does not answer or takes no connections now;
 * APBOT_E_DB: a schema newer than this apbot, or a database error; APBOT_E_INVAL: a URI of no
 * known kind).
 */
int store_open(const char *path, struct store **ret, char *err, size_t errlen) APBOT_MUST_USE;
/* Closes; NULL is fine. A handle is for one thread at a time. */
void store_close(struct store *st);

/*
 * Batches for bulk enqueue: everything between begin and commit is one transaction, and
 * operations inside it are all-or-nothing each. A batch holds the write lock: keep it short.
 * A failed commit leaves the batch open (retry store_commit or store_rollback).
 */
int store_begin(struct store *st, char *err, size_t errlen) APBOT_MUST_USE;
int store_commit(struct store *st, char *err, size_t errlen) APBOT_MUST_USE;
void store_rollback(struct store *st);

/*
 * Enqueues one invoice (inside a batch or alone), due at once. *ret_result says
 * queued/already/conflict; *ret_id is the new or existing item's id. On conflict err names
 * the queued item (and the call still returns APBOT_OK). The `enqueued` event is appended.
 */
int store_enqueue(struct store *st, const struct invoice *inv, const char *source,
                  const struct apbot_now *now, enum store_enqueue_result *ret_result,
                  int64_t *ret_id, char *err, size_t errlen) APBOT_MUST_USE;

/*
 * Bulk enqueue: one invoice ready for the queue (what store_enqueue derives from it - the
 * identity key, the fingerprint, the canonical payload and the summary columns - made once by
 * store_enqueue_prepare, so that the invoice itself need not outlive the call), and what
 * store_enqueue_many made of it. Free with store_enqueue_req_done.
 */
struct store_enqueue_req {
    char key[32];
    char fingerprint[65];
    char *payload, *source, *vendor_id, *vendor_name, *invoice_number; /* heap-owned */
    char doc_type[16], issue_date[11], currency[4];
    int exponent;
    int64_t total;
    /* set by store_enqueue_many */
    enum store_enqueue_result result;
    int64_t id;   /* the new or existing item's id */
    char *detail; /* STORE_ENQ_CONFLICT: names the queued item (heap-owned), else NULL */
};
/* Derives *ret from inv (source: "file:line", copied; may be NULL). APBOT_OK, or the reason
 * the invoice cannot be queued (no key, no canonical form: a refusal) with *ret untouched. */
int store_enqueue_prepare(const struct invoice *inv, const char *source,
                          struct store_enqueue_req *ret, char *err, size_t errlen) APBOT_MUST_USE;
/* Frees what req owns; NULL and a zeroed req are fine. */
void store_enqueue_req_done(struct store_enqueue_req *req);
/*
 * Enqueues reqs[0..n-1] in one transaction (the open batch's, or one of its own that commits
 * synchronously): the same rules as store_enqueue, in order - a key seen earlier in reqs counts
 * as queued by then (same fingerprint: already; another: a conflict naming it). Each req's
 * result, id and detail are set on APBOT_OK; on failure nothing of reqs is queued (outside a
 * batch) and err says why (APBOT_E_BUSY after the retries, APBOT_E_UNAVAIL, APBOT_E_DB). The
 * PostgreSQL backend sends them as a few multi-row statements instead of one round trip each.
 */
int store_enqueue_many(struct store *st, struct store_enqueue_req *reqs, size_t n,
                       const struct apbot_now *now, char *err, size_t errlen) APBOT_MUST_USE;

/*
 * Leases one due item to owner for lease_ms, in one transaction: the due `reconciling` or
 * `finishing` item due longest if any (an ambiguous outcome or a saved document is settled
 * while its evidence is fresh), else the `new` item due longest. Due: next_mono reached and
 * no live lease. A `new` item moves to claimed->next with a `claimed` event carrying
 * claimed->why, in the same transaction: `claimed` is the step machine_next(MACHINE_NEW,
 * MACHINE_EV_CLAIMED, ...) gave the caller. Only its next and why are used: the row's
 * counters stay (the claimed transition leaves them unchanged). A reconciling or finishing
 * item keeps its state; only its lease changes (no event).
 * Returns APBOT_OK and fills *ret as it now is (free with store_item_done), APBOT_E_NOTFOUND
 * when nothing is due, APBOT_E_BUSY after the retries, APBOT_E_INVAL for bad arguments.
 */
int store_claim(struct store *st, const char *owner, const struct apbot_now *now, int64_t lease_ms,
                const struct machine_step *claimed, struct store_item *ret, char *err,
                size_t errlen) APBOT_MUST_USE;

/*
 * store_claim of one given item: leases item id (as store_claim would, its `claimed` event when
 * new) if it is due now, unleased and in a state a claim looks for (new, reconciling,
 * finishing), whatever else is due. For a runner that knows which item it wants next (one it
 * handed back a moment ago with a short backoff, due again before the older backlog).
 * APBOT_E_NOTFOUND when it is not (taken, not due yet, moved on, gone): nothing changed.
 */
int store_claim_id(struct store *st, int64_t id, const char *owner, const struct apbot_now *now,
                   int64_t lease_ms, const struct machine_step *claimed, struct store_item *ret,
                   char *err, size_t errlen) APBOT_MUST_USE;

/*
 * Extends the lease of an item the owner holds to now + lease_ms. A lease stays its owner's
 * after it expires until another process takes the item over (a claim of an expired
 * reconciling/finishing item, or a take-over change), so a late owner may still renew.
 * APBOT_E_STATE if the lease was lost, APBOT_E_BUSY after the retries.
 */
int store_renew(struct store *st, int64_t id, const char *owner, const struct apbot_now *now,
                int64_t lease_ms, char *err, size_t errlen) APBOT_MUST_USE;

struct store_evidence;

/* One state change: what the caller learnt and what machine_next() made of it. */
struct store_change {
    enum machine_state from; /* must equal the row's state, else APBOT_E_STATE */
    enum machine_event event;
    const struct machine_step *step;
    int64_t backoff_ms;  /* MACHINE_DELAY_BACKOFF: the wait the caller drew (jitter, Retry-After) */
    int64_t settle_ms;   /* MACHINE_DELAY_SETTLE: the settle delay in force */
    const char *erp_doc; /* NULL keeps the stored one; "" is refused */
    const char *reason;  /* NULL keeps the stored one, "" clears it */
    const char *detail;  /* free text for the audit event, may be NULL */
    const char *actor;   /* "runner:<owner>", "operator:<name>", "recovery" */
    bool keep_lease;     /* true: the owner continues with this item (owner != NULL) */
    bool take_over;      /* owner NULL: take the row from whoever holds its lease (see
                          * store_lease_allows); the lease is cleared */
    /* ERP exchanges of this item appended to its evidence in the same transaction (n_evidence
     * of them, stamped now, as store_add_evidence would): the exchanges that led to the
     * change, kept with it. Nothing is appended when the change is refused. */
    const struct store_evidence *evidence;
    size_t n_evidence;
};

/*
 * Applies a change in one transaction: checks state and lease (store_lease_allows), and when
 * ch->erp_doc is set, that no other item holds that document; then updates the row (state,
 * counters, due time = now + store_step_delay_ms, document, reason, last_post_at when
 * entering posting, the settle base when step->settle_mark, lease) and appends the audit
 * event. The row's stamps change: re-read it (store_get) to keep working from it.
 * Returns APBOT_OK; APBOT_E_STATE when the row moved on or the lease was lost/held;
 * APBOT_E_CONFLICT when another item already holds ch->erp_doc: nothing changed, and
 * *ret_holder (may be NULL) gets that item's id, so the caller can apply doc-conflict to both;
 * APBOT_E_NOTFOUND, APBOT_E_INVAL, APBOT_E_BUSY after the retries.
 */
int store_apply(struct store *st, int64_t id, const char *owner, const struct store_change *ch,
                const struct apbot_now *now, int64_t *ret_holder, char *err,
                size_t errlen) APBOT_MUST_USE;

/* store_apply that also fills *ret_item with the row as the change left it (free with
 * store_item_done), on APBOT_OK only; ret_item->id is 0 when the change is done but the row
 * could not be read back (PostgreSQL reads after its commit). SQLite builds it from the row
 * its write transaction read and the values it wrote, without reading it again: a store_get
 * after store_apply costs a read transaction (its locks) and, with other connections writing,
 * page reads (~4 fcntl and ~4 pread per invoice at 16 sessions), and a read inside the
 * transaction ~20,000 instructions. */
int store_apply_get(struct store *st, int64_t id, const char *owner, const struct store_change *ch,
                    const struct apbot_now *now, int64_t *ret_holder, struct store_item *ret_item,
                    char *err, size_t errlen) APBOT_MUST_USE;

/*
 * store_apply_get by owner, then the claim of the next due item for owner (store_claim with
 * lease_ms and claimed), for a worker that lets go of one item and goes on with the next:
 * where the backend can, both in one transaction (SQLite: the two share the pages they write,
 * and one commit instead of two; ~4 pages and a transaction per invoice). The change is what
 * store_apply_get would make and its result is that call's; the claim comes after it (nothing
 * is claimed when the change is refused or fails) and is best effort: *ret_claimed (false
 * when nothing was due or the claim could not be made; a failed claim never undoes the
 * change) says whether *ret_next holds a claimed row (free with store_item_done).
 */
int store_apply_claim(struct store *st, int64_t id, const char *owner,
                      const struct store_change *ch, const struct apbot_now *now,
                      int64_t *ret_holder, struct store_item *ret_item, int64_t lease_ms,
                      const struct machine_step *claimed, struct store_item *ret_next,
                      bool *ret_claimed, char *err, size_t errlen) APBOT_MUST_USE;

/* One ERP exchange kept for the morning review. Excerpt must already be secret-free. */
struct store_evidence {
    const char *step;   /* "login", "lookup", "entry", "check", "post", "reconcile", ... */
    const char *method; /* "GET" / "POST" */
    const char *url;    /* without credentials or query secrets */
    int http_status;    /* 0 when no answer */
    int64_t elapsed_ms;
    const char *transport; /* "answered", "not-sent", "unknown" + curl detail */
    const char *rule;      /* outcome rule that matched, NULL if none */
    const char *outcome;   /* "completed", "rejected", ..., "unknown" */
    const char *excerpt;   /* bounded page excerpt, may be NULL */
};
/* Evidence excerpts are cut to this many bytes (at a UTF-8 boundary) when stored. */
#define STORE_EXCERPT_MAX 4096
/* Appends one exchange to an item's evidence (append-only), stamped now (wall). */
int store_add_evidence(struct store *st, int64_t item_id, const struct store_evidence *ev,
                       const struct apbot_now *now, char *err, size_t errlen) APBOT_MUST_USE;
/* Appends n exchanges (ev[0..n-1], in order) to an item's evidence in one transaction. */
int store_add_evidence_n(struct store *st, int64_t item_id, const struct store_evidence *ev,
                         size_t n, const struct apbot_now *now, char *err,
                         size_t errlen) APBOT_MUST_USE;

/* Calls fn for each item; the item is valid only during the call. A non-zero return from fn
 * stops the walk and is returned. */
typedef int (*store_item_fn)(void *ctx, const struct store_item *item);

/*
 * Crash recovery, the store half: calls fn for every item whose lease has expired at now
 * (or was stamped under another boot), oldest id first, at most limit items (0 = all). The
 * list is taken first, so fn may call back into the store (typically store_apply of
 * lease-expired with take_over); an item whose lease was renewed meanwhile is skipped.
 */
int store_each_expired(struct store *st, const struct apbot_now *now, int64_t limit,
                       store_item_fn fn, void *ctx, char *err, size_t errlen) APBOT_MUST_USE;

/* Fetches one item by id (APBOT_E_NOTFOUND if none). *ret untouched on failure. */
int store_get(struct store *st, int64_t id, struct store_item *ret, char *err,
              size_t errlen) APBOT_MUST_USE;
/* Fetches one item by identity key (APBOT_E_NOTFOUND if none). */
int store_get_by_key(struct store *st, const char *key, struct store_item *ret, char *err,
                     size_t errlen) APBOT_MUST_USE;

/* Calls fn for each item in `state` (MACHINE_STATE_INVALID = all), oldest first; fn may call
 * back into the store. */
int store_each(struct store *st, enum machine_state state, store_item_fn fn, void *ctx, char *err,
               size_t errlen) APBOT_MUST_USE;
/* store_each, stopping after `limit` items (0 = no limit). */
int store_each_limit(struct store *st, enum machine_state state, int64_t limit, store_item_fn fn,
                     void *ctx, char *err, size_t errlen) APBOT_MUST_USE;

/* Audit events and evidence of one item, oldest first; valid only during the call. */
struct store_event_row {
    int64_t id, item_id, at; /* at: wall ms */
    const char *from, *to, *event, *detail, *actor;
    /* the audit chain (below): STORE_HASH_LEN bytes each; NULL where a reader does not read them
     * (store_each_event) or the row carries none */
    const unsigned char *prev_hash, *hash;
};
typedef int (*store_event_fn)(void *ctx, const struct store_event_row *row);
int store_each_event(struct store *st, int64_t item_id, store_event_fn fn, void *ctx, char *err,
                     size_t errlen) APBOT_MUST_USE;
struct store_evidence_row {
    int64_t id, item_id, at; /* at: wall ms */
    struct store_evidence ev;
};
typedef int (*store_evidence_fn)(void *ctx, const struct store_evidence_row *row);
int store_each_evidence(struct store *st, int64_t item_id, store_evidence_fn fn, void *ctx,
                        char *err, size_t errlen) APBOT_MUST_USE;

/* Counts per state (one snapshot), oldest pending item's created_at (wall, 0 if none). */
struct store_counts {
    int64_t by_state[MACHINE_STATE__COUNT];
    int64_t total; /* includes rows in a state this version does not know */
    int64_t oldest_pending_at;
};
int store_counts(struct store *st, struct store_counts *ret, char *err,
                 size_t errlen) APBOT_MUST_USE;

/*
 * What a day settled: the items in a final state (completed, business-exception,
 * manual-review) whose last change fell in [from_ms, to_ms) of the wall clock (updated_at:
 * for people, as the daily report counts "completed on the day"), per state and currency, in
 * items and money, read in one snapshot. Up to max rows into ret, sorted by state and
 * currency, *ret_n of them; APBOT_E_LIMIT when there are more. A scan of the queue's rows
 * (an index would cost every completion a page more): on SQLite ~0.2 s per 100,000 items,
 * the columns it reads sitting past each row's payload.
 */
struct store_final_sum {
    enum machine_state state;
    char currency[4];
    int exponent;
    int64_t items;
    int64_t amount; /* the payable totals, minor units */
};
int store_final_sums(struct store *st, int64_t from_ms, int64_t to_ms, struct store_final_sum *ret,
                     size_t max, size_t *ret_n, char *err, size_t errlen) APBOT_MUST_USE;

/* Whether any item is pending (new, checking, posting, reconciling or finishing): a few
 * index probes, where store_counts reads every row - for a loop that polls (apbot run
 * --until-empty on a queue of 100,000). */
int store_pending(struct store *st, bool *ret_any, char *err, size_t errlen) APBOT_MUST_USE;

/*
 * How long until the next new/reconciling/finishing item is due, for sleeping: *ret_wait_ms
 * is 0 when one is due now, -1 when none is pending. (A due item may still be leased.)
 */
int store_next_due(struct store *st, const struct apbot_now *now, int64_t *ret_wait_ms, char *err,
                   size_t errlen) APBOT_MUST_USE;

/* The wall clock in Unix ms (apbot_clock_wall_ms): for people and reports, never a delay. */
int64_t store_now_ms(void);

/*
 * Durability of this handle's writes:
 *   STORE_SYNC      (the default) a write returns once it is on disk;
 *   STORE_DEFERRED  a write returns once committed: every reader sees it at once and a crash
 *                   of this process keeps it; it is on disk once store_sync returns, or once
 *                   any later synchronous write of this process to the queue has (writes
 *                   reach the disk in commit order, so a loss of power can lose the latest
 *                   writes, never a write without the ones before it);
 *   STORE_LAZY      as deferred, but store_sync does not wait for it: it reaches the disk
 *                   with the next sync of anything. For records that are no state change.
 * Batches (store_begin) commit synchronously whatever is set. PostgreSQL commits deferred and
 * lazy writes with synchronous_commit off, and store_sync flushes the server's WAL past them
 * (one small synchronous transaction, counted in store_syncs). Returns the previous setting. The
 * runner defers its writes and syncs before each request it sends to the ERP, so that
 * nothing reaches the ERP while a state change before it is not on disk.
 */
enum store_durability {
    STORE_SYNC = 0,
    STORE_DEFERRED,
    STORE_LAZY,
};
enum store_durability store_set_durability(struct store *st, enum store_durability d);
/* Waits until every STORE_DEFERRED write of this handle is on disk (sharing a sync that runs
 * anyway, as every write does). APBOT_E_DB when the disk refused: those writes are then not
 * known to be durable, and nothing that depends on them may follow. */
int store_sync(struct store *st, char *err, size_t errlen) APBOT_MUST_USE;
/* Disk syncs this handle ran itself (a commit covered by another's sync runs none): for
 * logs, tests and the benchmark. */
int64_t store_syncs(const struct store *st);

/*
 * Late commits, per flow: the largest observed delay between the moment the client gave up
 * on a post and the moment the ERP committed it (issue 9, hole 2), kept across runs.
 * store_note_late_commit records one observation of ms (>= 0) and keeps the maximum with the
 * wall time it was observed; store_late_commit reads it (all zero when none was observed).
 */
struct store_late_commit {
    int64_t max_ms;       /* the largest observation */
    int64_t at;           /* wall ms when that maximum was observed, 0 if none */
    int64_t observations; /* how many were noted */
};
int store_note_late_commit(struct store *st, const char *flow_name, int64_t ms,
                           const struct apbot_now *now, char *err, size_t errlen) APBOT_MUST_USE;
int store_late_commit(struct store *st, const char *flow_name, struct store_late_commit *ret,
                      char *err, size_t errlen) APBOT_MUST_USE;

/*
 * ---- Backends ----
 *
 * store_open picks the backend by the path's form: a postgresql:// or postgres:// URI, or a
 * libpq key=value connection string ("service=apbot", "host=db1 dbname=ap"), is PostgreSQL
 * (libpq: credentials come from PGPASSWORD, ~/.pgpass or a service file, never from apbot);
 * anything else is a SQLite file (":memory:" for tests). No message of the store shows a
 * password: paths are printed through store_path_display.
 *
 * The clock on PostgreSQL. Every stamp and every comparison the PostgreSQL backend makes
 * (due times, leases, settle bases, expired leases, next due) is on the database server's
 * clock (clock_timestamp(), read in the transaction), under a boot id of its own naming the
 * queue and the server's start: the `now` a caller passes is not used for them, so a host
 * whose clock is skewed can neither shorten a settle delay nor take a live lease. The items
 * it hands out (store_get, store_claim, store_each..., store_each_expired) carry their
 * stamps translated into the caller's own clock (this process's boot id and CLOCK_BOOTTIME,
 * read after the answer arrived, so a stamp can only look later than it is), so the pure
 * decisions below, called with apbot_clock_now(), keep meaning what they say on SQLite.
 * Callers change nothing. A restart of the database server counts as a new boot (settle
 * delays counted again, leases expired); a step of the server's own clock is the one thing
 * it cannot see (docs/postgresql.md).
 */

/* Which backend serves st: "sqlite" or "postgresql" ("none" for NULL). Cannot fail. */
const char *store_backend(const struct store *st);
/* True when st's stamps are on a server's clock (PostgreSQL): the server's restart, which a
 * process holding leases survives, ends every lease at once, sooner than the holder counts
 * it on its own clock; a holder that must know its lease is still live asks the queue
 * (store_renew). False for SQLite, whose clock is the host's. Cannot fail. */
bool store_server_clock(const struct store *st);
/* True when path names a SQLite file on disk (not ":memory:", not a file: or other URI, not
 * PostgreSQL): the one kind whose existence a caller may check with access(). Pure. */
bool store_path_is_file(const char *path);
/* True when path carries a password (in a URI's user info, or a password= parameter): such a
 * path must not come from the command line, where `ps` shows it. Pure. */
bool store_path_has_password(const char *path);
/* Writes path into buf (len bytes, always terminated) with every password replaced by ***:
 * the only way a path may reach a message or a log. Cannot fail. */
void store_path_display(const char *path, char *buf, size_t len);

#define STORE_HASH_LEN 32 /* a SHA-256 digest */

/* Rows per table and items per state of one queue, read in one snapshot. */
struct store_tally {
    int64_t items, events, evidence, late_commits;
    int64_t by_state[MACHINE_STATE__COUNT];
    int64_t unknown_state; /* items in a state this version does not know */
    /* the audit chain's head: the last event's id (0: none) and hash (the genesis when none) */
    int64_t head_event_id;
    unsigned char head_hash[STORE_HASH_LEN];
};
int store_tally(struct store *st, struct store_tally *ret, char *err, size_t errlen) APBOT_MUST_USE;

/*
 * Copies a whole queue (items with their ids, counters, stamps, leases and documents; every
 * event with its audit chain hashes as they are, every piece of evidence; the late-commit
 * observations) from one store into another, in one transaction on the target, while the
 * source is held against writers. Refuses a target that holds any row (APBOT_E_STATE) and a
 * source item in a state this version does not know (APBOT_E_STATE). Before the target
 * commits, and again after, the rows per table, the items per state and the audit chain's head
 * must equal the source's (else APBOT_E_BUG, nothing committed or, after, reported): the chain
 * is carried, not recomputed, so a head kept before the copy still names the same event and
 * hash after it, and a chain broken on the source is broken on the target alike. Stamps of the
 * source's clock are foreign to the target's: the first write on the target re-stamps them (due
 * now, leases expired, settle delays counted again). Stop the runners before copying. *ret_copied
 * (may be NULL) gets the target's tally.
 */
int store_copy(struct store *from, struct store *to, struct store_tally *ret_copied, char *err,
               size_t errlen) APBOT_MUST_USE;

/*
 * ---- The audit chain ----
 *
 * Every audit event is chained to the one before it, one chain per queue in event id order:
 * its hash is SHA-256 over the hash of the event before it (32 zero bytes for the first) and
 * the event's canonical serialisation, version 1 (docs/operations.md, "The audit chain"):
 *
 *     "APBOT-AUDIT-1" || prev_hash || be64(id) || be64(item_id) || be64(at)
 *         || f(from) || f(to) || f(event) || f(detail) || f(actor)
 *     f(NULL) = be32(0xFFFFFFFF), f(s) = be32(bytes of s) || s
 *
 * Both hashes are kept in the event's row (prev_hash, hash), computed in the transaction that
 * appends it and under the queue's write lock (SQLite) or the chain's advisory lock
 * (PostgreSQL), so the chain is one total order: the event ids, which are assigned in that
 * same order. Anyone who can write the database can still rewrite the chain from some event
 * to its end, or delete its last events; what proves nothing up to a point was changed is a
 * head kept elsewhere (the daily report prints the day's) that the chain still holds.
 */
struct store_audit_head {
    int64_t event_id; /* 0: no event yet */
    int64_t item_id;
    int64_t at; /* the event's wall ms */
    unsigned char hash[STORE_HASH_LEN];
};

/* The chain's head as of before_ms (wall ms, exclusive; 0: now): the last event stamped
 * before it, by id; event_id 0 and the genesis hash when there is none. */
int store_audit_head(struct store *st, int64_t before_ms, struct store_audit_head *ret, char *err,
                     size_t errlen) APBOT_MUST_USE;

/* What store_audit_verify found. */
enum store_audit_kind {
    STORE_AUDIT_INTACT = 0, /* every event matches its hash and follows the one before it */
    STORE_AUDIT_CHANGED,    /* an event's content no longer matches its hash */
    STORE_AUDIT_MISSING,    /* events were deleted (an id gap, or the end of the chain) */
    STORE_AUDIT_ORDER,      /* an event does not follow the one before it (moved, swapped) */
    STORE_AUDIT_UNCHAINED,  /* an event carries no hash: not appended by apbot */
    STORE_AUDIT_HEAD,       /* the chain does not hold the head kept earlier */
};
/* "intact", "changed", "missing", "order", "unchained", "head". */
const char *store_audit_kind_name(enum store_audit_kind k);

struct store_audit_result {
    enum store_audit_kind kind;
    int64_t events; /* events read */
    /* the last event that verified, every one before it included (the head when intact) */
    struct store_audit_head last_good;
    int64_t event_id, item_id; /* the first event that does not match (0: none, as at the end) */
    int64_t missing_from, missing_to; /* STORE_AUDIT_MISSING: the ids gone, when known */
    char detail[320];                 /* one sentence naming what differs */
};

/*
 * Recomputes the whole chain, in id order, in one read snapshot (writers go on), and names
 * the first event that does not match. expect (may be NULL): a head kept earlier; the chain
 * must still hold that event with that hash (STORE_AUDIT_HEAD when not), which also catches
 * events deleted from the end. Returns APBOT_OK with *ret filled (kind STORE_AUDIT_INTACT or
 * what broke), or a database error.
 */
int store_audit_verify(struct store *st, const struct store_audit_head *expect,
                       struct store_audit_result *ret, char *err, size_t errlen) APBOT_MUST_USE;

/* Lower-case hex of a hash (65 bytes with the NUL). Cannot fail. */
void store_audit_hex(const unsigned char hash[STORE_HASH_LEN], char out[2 * STORE_HASH_LEN + 1]);
/* Parses a kept head, "ID:HEX" (HEX 64 hex digits) as `apbot audit head` prints it after
 * "event". Pure; APBOT_E_INVAL when malformed. */
int store_audit_parse_head(const char *text, struct store_audit_head *ret) APBOT_MUST_USE;

/*
 * ---- Pure decisions, shared by every backend (no I/O, no clock; table-tested) ----
 *
 * "Foreign" below means: the item's clock_boot is not now->boot (apbot_clock_same_boot), so
 * its mono stamps say nothing about now.
 */

/* The settle delay has passed since the item's settle base: true when it has none (no post
 * ever may have reached the ERP), false when foreign (counted again), else
 * now->mono_ms - settle_mono >= settle_ms. Feed it to counters.settled, judged at the moment
 * the lookup began. */
bool store_settled(const struct store_item *it, const struct apbot_now *now, int64_t settle_ms);
/* The wait before the item is due again after `step` (the item as before the step):
 * DELAY_NONE 0; DELAY_BACKOFF backoff_ms (negative: 0); DELAY_SETTLE settle_ms when the step
 * marks the settle base, else what is left of the settle delay (0 when settled, settle_ms when
 * foreign, else settle_mono + settle_ms - now->mono_ms). */
int64_t store_step_delay_ms(const struct store_item *it, const struct machine_step *step,
                            const struct apbot_now *now, int64_t backoff_ms, int64_t settle_ms);
/* Live lease: held, not foreign, lease_mono still ahead of now. */
bool store_lease_live(const struct store_item *it, const struct apbot_now *now);
/*
 * May a change touch the item's lease? owner set: the row's lease_owner must be owner (an
 * expired but unchallenged lease is still its owner's); take_over is then refused (INVAL).
 * owner NULL, no take_over (an operator): no live lease. owner NULL with take_over
 * (recovery): a lease that has expired; for doc-conflict only, any lease or none (one
 * document, one item outranks a runner's work: its next apply or renew then fails).
 * Returns APBOT_OK, APBOT_E_STATE (not allowed) or APBOT_E_INVAL.
 */
int store_lease_allows(const struct store_item *it, const struct apbot_now *now, const char *owner,
                       bool take_over, enum machine_event event);
/* Re-stamps a foreign item as this boot sees it first: due now (next_at too), lease expired,
 * settle base now (when it has one; settle_at keeps the original moment for people), all
 * under now->boot. Returns true when it did, false (item untouched) when not foreign. */
bool store_restamp(struct store_item *it, const struct apbot_now *now);

#endif
