/*
 * machine.h - the per-item state machine, as a pure function.
 *
 * machine_next() maps (state, event, counters, policy) to the next state, the delay before
 * the item is due again, the new counters and whether the settle delay starts again. It does
 * no I/O, reads no clock and touches no database: the runner performs the side effects and
 * the store persists the result in one transaction. Every (state, event) pair is either in
 * the state table of docs/design.md (printed from this function by tools/machine_table.c, and
 * checked against it by tests/t_design.sh) or refused with APBOT_E_STATE.
 * Nothing leaves a terminal state except through an operator resolution, and `completed`
 * only through `doc-conflict` (two items cannot both own one ERP document).
 *
 * The one way into `posting` is a confirmed absence: `not-found` in checking or reconciling
 * with counters.settled true, within the post budget. Nothing leaves `finishing` for
 * `posting`: once the ERP holds a document for the item, it is never posted again.
 */
#ifndef APBOT_MACHINE_H
#define APBOT_MACHINE_H

#include <stdbool.h>

#include "apbot/error.h"

/* If you add a state: add its name in machine.c, its row in the table and its tests. */
enum machine_state {
    MACHINE_NEW = 0,            /* queued, not yet looked up (or sent back after a failure) */
    MACHINE_CHECKING,           /* check-before-post lookup in progress */
    MACHINE_POSTING,            /* intent to post committed; the form may be on its way */
    MACHINE_RECONCILING,        /* outcome ambiguous: find out from the ERP before anything */
    MACHINE_FINISHING,          /* the ERP holds the document (number stored) but steps after
                                 * the committing one (approve, release) are still due */
    MACHINE_COMPLETED,          /* terminal: booked in the ERP exactly once, doc number known */
    MACHINE_BUSINESS_EXCEPTION, /* terminal: the ERP rejected the invoice (validation) */
    MACHINE_MANUAL_REVIEW,      /* terminal: a human decides (budget spent, conflict) */
    MACHINE_STATE__COUNT,
    MACHINE_STATE_INVALID = -1
};

/* If you add an event: add its name in machine.c and its column in the tests. */
enum machine_event {
    MACHINE_EV_CLAIMED = 0,      /* new item leased by a runner */
    MACHINE_EV_FOUND,            /* lookup found the key with the same vendor and amount (and,
                                  * where the flow says what finished means, finished) */
    MACHINE_EV_FOUND_CONFLICT,   /* lookup found the key with a different amount/vendor */
    MACHINE_EV_FOUND_UNFINISHED, /* lookup found the key saved but not finished (a draft) */
    MACHINE_EV_NOT_FOUND,        /* lookup answered: the key is not in the ERP */
    MACHINE_EV_LOOKUP_FAILED,    /* lookup could not be answered (timeout, 5xx, bad page) */
    MACHINE_EV_CONFIRMED,        /* post (or its last follow-up step) answered with success */
    MACHINE_EV_SAVED,            /* the committing step's answer names the saved document;
                                  * follow-up steps are due */
    MACHINE_EV_REJECTED,         /* post or follow-up answered with a validation message */
    MACHINE_EV_NOT_SENT,         /* post provably never reached the ERP's processing */
    MACHINE_EV_UNKNOWN,          /* post outcome ambiguous: timeout, reset, 5xx, unknown page */
    MACHINE_EV_ALREADY_EXISTS,   /* post answered "this document already exists" */
    MACHINE_EV_FOLLOWUP_FAILED,  /* a follow-up step failed or its answer was ambiguous; the
                                  * saved document stands */
    MACHINE_EV_DOC_CONFLICT,     /* the document number is already held by another item */
    MACHINE_EV_LEASE_EXPIRED,    /* crash recovery: the runner holding the lease vanished */
    MACHINE_EV_RELEASED,         /* the runner gives a leased item back untouched (shutdown,
                                  * circuit breaker): from checking, finishing, reconciling, or
                                  * from posting only when the committing step was provably
                                  * never sent */
    MACHINE_EV_RESOLVE_POSTED,   /* operator: the ERP holds it under a verified document */
    MACHINE_EV_RESOLVE_REQUEUE,  /* operator: look it up and try again from the start */
    MACHINE_EV_RESOLVE_REJECT,   /* operator: treat it as a business exception */
    MACHINE_EVENT__COUNT,
    MACHINE_EVENT_INVALID = -1
};

/* What the item must wait for before it is due again. */
enum machine_delay {
    MACHINE_DELAY_NONE = 0, /* due at once */
    MACHINE_DELAY_BACKOFF,  /* exponential backoff with full jitter (Retry-After if larger) */
    MACHINE_DELAY_SETTLE,   /* until the policy's settle delay has passed since the item's
                             * settle base (which this very step may start: settle_mark) */
};

/* Per-item counters kept in the queue row. */
struct machine_counters {
    int posts;    /* forms sent (or possibly sent) so far: intents committed */
    int cycles;   /* failed lookups in the current reconciliation, or failed rounds of
                   * follow-up steps in finishing (each state starts it at 0) */
    int attempts; /* transient failures before anything was sent (lookup failed, not sent) */
    bool settled; /* input only: the settle delay has passed since the item's settle base
                   * (true when no post ever may have reached the ERP); the caller judges it
                   * on the monotonic clock when the lookup began */
};

struct machine_policy {
    int max_posts;    /* >= 1: posts allowed before manual review */
    int max_cycles;   /* >= 1: failed reconciliation lookups (or follow-up rounds in
                       * finishing) before manual review */
    int max_attempts; /* >= 1: transient failures before anything was sent, then review */
};

struct machine_step {
    enum machine_state next;          /* state after the event */
    enum machine_delay delay;         /* when the item is due again */
    struct machine_counters counters; /* counters after the event (settled copied through) */
    bool settle_mark;                 /* a post may have reached the ERP: the settle delay
                                       * starts again now (the store stamps the item's
                                       * settle base); set on every way out of posting but
                                       * not-sent and released */
    const char *why;                  /* static text for the audit trail, never NULL */
};

/* The default policy (max_posts 2, max_cycles 5, max_attempts 8). Cannot fail. */
struct machine_policy machine_policy_default(void);

/*
 * Computes the transition for `event` in `state`. Returns APBOT_OK and fills *ret_step, or
 * APBOT_E_STATE when the pair is not allowed (ret_step untouched), or APBOT_E_INVAL for
 * out-of-range enums or a policy with a bound below 1. Pure: no I/O, no clock.
 */
int machine_next(enum machine_state state, enum machine_event event,
                 const struct machine_counters *counters, const struct machine_policy *policy,
                 struct machine_step *ret_step) APBOT_MUST_USE;

/* True for completed, business-exception and manual-review. Pure. */
bool machine_is_terminal(enum machine_state state);

/* "new", "checking", "posting", "reconciling", "finishing", "completed",
 * "business-exception", "manual-review"; "invalid" for bad values. */
const char *machine_state_name(enum machine_state state);
/* Parses a state name; MACHINE_STATE_INVALID when unknown. */
enum machine_state machine_state_from_name(const char *name);

/* "claimed", "found", "found-conflict", "found-unfinished", "not-found", "lookup-failed",
 * "confirmed", "saved", "rejected", "not-sent", "unknown", "already-exists",
 * "followup-failed", "doc-conflict", "lease-expired", "released", "resolve-posted",
 * "resolve-requeue", "resolve-reject"; "invalid" for bad values. */
const char *machine_event_name(enum machine_event event);
enum machine_event machine_event_from_name(const char *name);

#endif
