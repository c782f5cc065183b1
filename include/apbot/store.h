/*
 * store.h - the durable queue: items, their audit events and ERP evidence, in SQLite.
 *
 * WAL mode, synchronous=FULL, a schema version with forward migrations. Every state change
 * is one transaction that updates the item row and appends its audit event; the intent to
 * post is such a change, committed before the form is sent. Items are claimed with a lease
 * (owner + expiry) so two runners on one database never work the same item. The store knows
 * states by their machine_state values but never decides a transition: the caller passes
 * the step machine_next() computed.
 */
#ifndef APBOT_STORE_H
#define APBOT_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "apbot/error.h"
#include "apbot/machine.h"

struct store;
struct invoice;

/* Times are Unix milliseconds (wall clock) everywhere in the store. */

/* One queue row. Strings are heap-owned; free with store_item_done(). */
struct store_item {
    int64_t id;
    char key[32];         /* identity key, "AP1-..." */
    char fingerprint[65]; /* content fingerprint, hex */
    enum machine_state state;
    struct machine_counters counters; /* posts, cycles, attempts (settled unused) */
    int64_t next_at;                  /* due time */
    int64_t last_post_at;             /* when the last intent to post was committed, 0 if never */
    int64_t created_at, updated_at;
    char *lease_owner; /* NULL when not leased */
    int64_t lease_until;
    char *payload; /* canonical invoice JSON */
    char *source;  /* "file:line" or "file#element" it came from */
    char *erp_doc; /* ERP document number, NULL until known */
    char *reason;  /* last reason (rejection text, review cause), NULL if none */
    /* summary columns, copied from the invoice at enqueue */
    char *vendor_id, *vendor_name, *invoice_number;
    char doc_type[16]; /* "invoice" / "credit-note" */
    char issue_date[11], currency[4];
    int exponent;
    int64_t total; /* payable, minor units */
};
void store_item_done(struct store_item *item);

enum store_enqueue_result {
    STORE_ENQ_QUEUED = 0, /* new row */
    STORE_ENQ_ALREADY,    /* same key, same fingerprint: nothing changed */
    STORE_ENQ_CONFLICT,   /* same key, different fingerprint: refused */
};

/*
 * Opens (creating and migrating as needed) the database at path (":memory:" for tests).
 * Returns APBOT_OK and *ret, or an error with detail in err.
 */
int store_open(const char *path, struct store **ret, char *err, size_t errlen) APBOT_MUST_USE;
/* Closes; NULL is fine. */
void store_close(struct store *st);

/* Batches for bulk enqueue: everything between begin and commit is one transaction. */
int store_begin(struct store *st, char *err, size_t errlen) APBOT_MUST_USE;
int store_commit(struct store *st, char *err, size_t errlen) APBOT_MUST_USE;
void store_rollback(struct store *st);

/*
 * Enqueues one invoice (inside a batch or alone). *ret_result says queued/already/conflict;
 * *ret_id is the new or existing item's id. On conflict err names the queued item.
 */
int store_enqueue(struct store *st, const struct invoice *inv, const char *source, int64_t now,
                  enum store_enqueue_result *ret_result, int64_t *ret_id, char *err,
                  size_t errlen) APBOT_MUST_USE;

/*
 * Leases a due item (next_at <= now, no live lease) to owner until now + lease_ms: the oldest
 * due `reconciling` one if any, else the oldest due `new` one. A `new` item is moved to `checking`
 * with its `claimed` event in the same transaction. Returns APBOT_OK and fills *ret (caller frees
 * with store_item_done), or APBOT_E_NOTFOUND when nothing is due.
 */
int store_claim(struct store *st, const char *owner, int64_t now, int64_t lease_ms,
                const struct machine_policy *policy, struct store_item *ret, char *err,
                size_t errlen) APBOT_MUST_USE;

/* Extends the lease of an item the owner holds. APBOT_E_STATE if the lease was lost. */
int store_renew(struct store *st, int64_t id, const char *owner, int64_t now, int64_t lease_ms,
                char *err, size_t errlen) APBOT_MUST_USE;

/* One state change: what the runner learnt and what machine_next() made of it. */
struct store_change {
    enum machine_state from; /* must equal the row's state, else APBOT_E_STATE */
    enum machine_event event;
    const struct machine_step *step;
    int64_t next_at;     /* due time for the next step (caller applied the delay) */
    const char *erp_doc; /* NULL keeps the stored one */
    const char *reason;  /* NULL keeps the stored one, "" clears it */
    const char *detail;  /* free text for the audit event, may be NULL */
    const char *actor;   /* "runner:<owner>", "operator:<name>", "recovery" */
    bool keep_lease;     /* true: the owner continues with this item */
};

/*
 * Applies a change in one transaction: checks state and lease (owner NULL for operator
 * changes, which require no live lease), updates the row (state, counters, next_at, doc,
 * reason, last_post_at when entering posting, lease) and appends the audit event.
 * Returns APBOT_E_STATE when the row moved on or the lease was lost.
 */
int store_apply(struct store *st, int64_t id, const char *owner, const struct store_change *ch,
                int64_t now, char *err, size_t errlen) APBOT_MUST_USE;

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
int store_add_evidence(struct store *st, int64_t item_id, const struct store_evidence *ev,
                       int64_t now, char *err, size_t errlen) APBOT_MUST_USE;

/*
 * Crash recovery: every item whose lease expired before now goes through the machine's
 * lease-expired event (checking -> new, posting/reconciling -> reconciling), one
 * transaction each. *ret_count gets the number of items recovered (may be NULL).
 */
int store_recover(struct store *st, int64_t now, const struct machine_policy *policy,
                  int *ret_count, char *err, size_t errlen) APBOT_MUST_USE;

/* Fetches one item by id (APBOT_E_NOTFOUND if none). */
int store_get(struct store *st, int64_t id, struct store_item *ret, char *err,
              size_t errlen) APBOT_MUST_USE;
/* Fetches one item by identity key (APBOT_E_NOTFOUND if none). */
int store_get_by_key(struct store *st, const char *key, struct store_item *ret, char *err,
                     size_t errlen) APBOT_MUST_USE;

/* Calls fn for each item in `state` (MACHINE_STATE_INVALID = all), oldest first. A non-zero
 * return from fn stops the walk and is returned. The item is valid only during the call. */
typedef int (*store_item_fn)(void *ctx, const struct store_item *item);
int store_each(struct store *st, enum machine_state state, store_item_fn fn, void *ctx, char *err,
               size_t errlen);

/* Audit events and evidence of one item, oldest first; valid only during the call. */
struct store_event_row {
    int64_t id, item_id, at;
    const char *from, *to, *event, *detail, *actor;
};
typedef int (*store_event_fn)(void *ctx, const struct store_event_row *row);
int store_each_event(struct store *st, int64_t item_id, store_event_fn fn, void *ctx, char *err,
                     size_t errlen);
struct store_evidence_row {
    int64_t id, item_id, at;
    struct store_evidence ev;
};
typedef int (*store_evidence_fn)(void *ctx, const struct store_evidence_row *row);
int store_each_evidence(struct store *st, int64_t item_id, store_evidence_fn fn, void *ctx,
                        char *err, size_t errlen);

/* Counts per state, oldest pending item's created_at (0 if none). */
struct store_counts {
    int64_t by_state[MACHINE_STATE__COUNT];
    int64_t total;
    int64_t oldest_pending_at;
};
int store_counts(struct store *st, struct store_counts *ret, char *err,
                 size_t errlen) APBOT_MUST_USE;

/* The earliest next_at among due-able items (new/reconciling), 0 if none; for sleeping. */
int store_next_due(struct store *st, int64_t *ret_at, char *err, size_t errlen) APBOT_MUST_USE;

/* Wall clock in Unix milliseconds. */
int64_t store_now_ms(void);

/* ---- Additions (store engineer): everything above is the original contract. ---- */

/* The database's schema version (PRAGMA user_version; after store_open, the newest). */
int store_schema_version(struct store *st, int *ret_version, char *err,
                         size_t errlen) APBOT_MUST_USE;

/* Evidence excerpts are cut to this many bytes (at a UTF-8 boundary) when stored. */
#define STORE_EXCERPT_MAX 4096

/*
 * A precomputed queue row, for store_enqueue_raw: what store_enqueue derives from an invoice
 * (key, fingerprint, canonical payload, summary). All strings but vendor_name and source are
 * required; doc_type is "invoice" / "credit-note"; total is the payable amount in minor units.
 */
struct store_new_item {
    const char *key, *fingerprint, *payload, *source;
    const char *vendor_id, *vendor_name, *invoice_number, *doc_type, *issue_date, *currency;
    int exponent;
    int64_t total;
};
/* store_enqueue without the invoice model: same results, same event, same batching. */
int store_enqueue_raw(struct store *st, const struct store_new_item *item, int64_t now,
                      enum store_enqueue_result *ret_result, int64_t *ret_id, char *err,
                      size_t errlen) APBOT_MUST_USE;

/*
 * store_recover, with the flow's settle delay: an item the machine sends to reconciling
 * "after the settle delay" becomes due at max(now, last_post_at + settle_ms). store_recover
 * is this with settle_ms 0: the item is due at once, which is safe because the machine only
 * treats "not found" as a confirmed absence when the caller says the settle delay has passed
 * (counters.settled, which the runner computes from when the ambiguity began).
 *
 * Leases and crashes: a lease stays its owner's after it expires until another process
 * takes the item over (store_claim of an expired reconciling item, or recovery); either
 * clears or replaces lease_owner, so the old owner's next store_apply/store_renew fails with
 * APBOT_E_STATE. A late-but-unchallenged owner may still apply its result.
 */
int store_recover_settle(struct store *st, int64_t now, int64_t settle_ms,
                         const struct machine_policy *policy, int *ret_count, char *err,
                         size_t errlen) APBOT_MUST_USE;

/* Sets how long a call waits for another process's write lock before APBOT_E_BUSY (default
 * 5000 ms). Cannot fail. */
void store_set_busy_timeout(struct store *st, int ms);

/* store_each, stopping after `limit` items (0 = no limit). */
int store_each_limit(struct store *st, enum machine_state state, int64_t limit, store_item_fn fn,
                     void *ctx, char *err, size_t errlen);

#endif
