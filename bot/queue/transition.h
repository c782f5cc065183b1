/*
 * transition.h - the one state setter: every change of an item's state goes through here.
 *
 * As curl's multistate() ("always use this function to change state"): the caller says what
 * happened (an event, with the document, reason and detail it learnt); transition_apply()
 * asks machine_next() what that means, has the store persist it in one transaction with its
 * audit event, and reports old -> new to the log callback. The runner, the operator's
 * decisions (review/resolve), the claim of a new item and the recovery of expired leases all
 * come through here; the store only persists, the machine only decides.
 *
 * One rule lives here rather than in the store or the machine because it spans two items:
 * one ERP document, one item. When a change would give an item a document another item
 * already holds, both go to manual review (doc-conflict), in this call.
 */
#ifndef APBOT_TRANSITION_H
#define APBOT_TRANSITION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "apbot/error.h"
#include "apbot/machine.h"

struct store;
struct store_item;
struct apbot_now;

/* One state change, as reported to the log callback (valid only during the call). */
struct transition_log {
    const struct store_item *item; /* the item as it was before the change */
    enum machine_state from, to;
    enum machine_event event;
    const char *doc;    /* document set by the change, or NULL */
    const char *reason; /* reason set by the change, or NULL */
    const char *detail; /* what happened, or NULL */
    const char *why;    /* the machine's words for the transition */
    const char *actor;
};

/* Where changes happen and who makes them. Lives as long as the caller likes. */
struct transition_env {
    struct store *st;
    const struct machine_policy *policy;
    int64_t settle_ms; /* the settle delay in force (may grow during a run) */
    const char *owner; /* lease owner (a runner worker), or NULL (operator, recovery) */
    const char *actor; /* for the audit trail: "runner:<owner>", "operator:<name>", ... */
    /* The wait for a backoff delay (jitter, Retry-After), given the step; NULL = 0. */
    int64_t (*backoff)(void *ctx, const struct machine_step *step);
    void (*log)(void *ctx, const struct transition_log *l); /* NULL = no log */
    void *ctx;
};

/* What the caller learnt. Zero-initialise, then set what applies. */
struct store_evidence;

struct transition_in {
    enum machine_event event;
    int64_t looked_mono;  /* when the lookup behind this event began (0 = now): an absence
                           * counts as settled only if the lookup began after the delay */
    const char *doc;      /* the ERP document number learnt, or NULL */
    const char *reason;   /* NULL keeps the stored one, "" clears it */
    const char *detail;   /* for the audit event, may be NULL */
    bool keep_lease;      /* the owner continues with the item (only where the machine's step
                           * leads to more work now: posting, or finishing without delay) */
    bool take_over;       /* recovery and doc-conflict: take the row from whoever holds it */
    bool refuse_conflict; /* an operator's decision: a document another item holds is refused
                           * (APBOT_E_CONFLICT, nothing changed) instead of sending both items
                           * to review */
    /* ERP exchanges of this item stored in the change's transaction (store_change.evidence):
     * only what was exchanged since the item's last durable write, with nothing sent to the
     * ERP after it. Not stored when the change is refused. */
    const struct store_evidence *evidence;
    size_t n_evidence;
    /* > 0, with claim_into: when the owner lets go of the item (not kept), also claim the
     * next due item for env->owner with this lease, in the change's transaction where the
     * store can (store_apply_claim; logged as transition_claim logs); ret->claimed says
     * whether *claim_into holds it (free it with store_item_done). Needs ret. */
    int64_t claim_next_lease_ms;
    struct store_item *claim_into;
};

/* What came of it. */
struct transition_out {
    struct machine_step step; /* as the machine decided (for the doc-conflict: that one) */
    enum machine_event event; /* the event applied (doc-conflict when it came to that) */
    bool kept;                /* the lease stays the owner's: continue with the item */
    int64_t conflict_with;    /* doc-conflict: the other item that holds the document */
    bool claimed;             /* claim_next_lease_ms: *claim_into holds the next item */
};

/*
 * Applies in->event to *item (which must be the caller's current copy of the row). On
 * APBOT_OK *item is re-read from the store (state, counters, stamps) and *ret says what
 * happened. APBOT_E_STATE: the row moved on or the lease is gone (nothing changed: drop the
 * item). APBOT_E_INVAL: the machine refuses the event in this state (a bug in the caller,
 * reported in err). APBOT_E_CONFLICT: only with refuse_conflict, ret->conflict_with holds the
 * document. Other codes: the store failed (err).
 */
int transition_apply(const struct transition_env *env, struct store_item *item,
                     const struct transition_in *in, struct transition_out *ret, char *err,
                     size_t errlen) APBOT_MUST_USE;

/*
 * Leases a due item to env->owner for lease_ms: a due reconciling or finishing item first,
 * else the oldest due new one, which moves to checking (its `claimed` transition, logged).
 * Returns APBOT_OK and *ret (free with store_item_done), APBOT_E_NOTFOUND when nothing is
 * due, or the store's error.
 */
int transition_claim(const struct transition_env *env, const struct apbot_now *now,
                     int64_t lease_ms, struct store_item *ret, char *err,
                     size_t errlen) APBOT_MUST_USE;
/* transition_claim of item id only (store_claim_id): APBOT_E_NOTFOUND when it is not due and
 * free now. */
int transition_claim_id(const struct transition_env *env, const struct apbot_now *now, int64_t id,
                        int64_t lease_ms, struct store_item *ret, char *err,
                        size_t errlen) APBOT_MUST_USE;

/*
 * Crash recovery: every item whose lease expired goes through lease-expired (checking ->
 * new; posting, reconciling -> reconciling after the settle delay; finishing -> finishing),
 * taken over from the vanished owner. *ret_count (may be NULL) gets the number moved.
 */
int transition_recover(const struct transition_env *env, const struct apbot_now *now,
                       int *ret_count, char *err, size_t errlen) APBOT_MUST_USE;

#endif
