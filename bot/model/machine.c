/*
 * machine.c - the per-item state machine of docs/design.md as one pure function.
 *
 * Each state has one function that handles the events allowed in it and refuses the rest
 * with APBOT_E_STATE; every switch names every event (no default:), so a new event is a
 * compile error until each state has decided about it. Counters travel in and out by value
 * so the caller persists exactly what the step says, in the same transaction as the state.
 * Nothing here reads a clock: "the settle delay has passed" arrives as counters->settled,
 * and "the settle delay starts again" leaves as step->settle_mark.
 */
#include "apbot/machine.h"

#include <string.h>

static const char *const state_names[] = {
    [MACHINE_NEW] = "new",
    [MACHINE_CHECKING] = "checking",
    [MACHINE_POSTING] = "posting",
    [MACHINE_RECONCILING] = "reconciling",
    [MACHINE_FINISHING] = "finishing",
    [MACHINE_COMPLETED] = "completed",
    [MACHINE_BUSINESS_EXCEPTION] = "business-exception",
    [MACHINE_MANUAL_REVIEW] = "manual-review",
};
_Static_assert(sizeof(state_names) / sizeof(state_names[0]) == MACHINE_STATE__COUNT,
               "every machine_state needs a name");

static const char *const event_names[] = {
    [MACHINE_EV_CLAIMED] = "claimed",
    [MACHINE_EV_FOUND] = "found",
    [MACHINE_EV_FOUND_CONFLICT] = "found-conflict",
    [MACHINE_EV_FOUND_UNFINISHED] = "found-unfinished",
    [MACHINE_EV_NOT_FOUND] = "not-found",
    [MACHINE_EV_LOOKUP_FAILED] = "lookup-failed",
    [MACHINE_EV_CONFIRMED] = "confirmed",
    [MACHINE_EV_SAVED] = "saved",
    [MACHINE_EV_REJECTED] = "rejected",
    [MACHINE_EV_NOT_SENT] = "not-sent",
    [MACHINE_EV_UNKNOWN] = "unknown",
    [MACHINE_EV_ALREADY_EXISTS] = "already-exists",
    [MACHINE_EV_FOLLOWUP_FAILED] = "followup-failed",
    [MACHINE_EV_DOC_CONFLICT] = "doc-conflict",
    [MACHINE_EV_LEASE_EXPIRED] = "lease-expired",
    [MACHINE_EV_RELEASED] = "released",
    [MACHINE_EV_RESOLVE_POSTED] = "resolve-posted",
    [MACHINE_EV_RESOLVE_REQUEUE] = "resolve-requeue",
    [MACHINE_EV_RESOLVE_REJECT] = "resolve-reject",
};
_Static_assert(sizeof(event_names) / sizeof(event_names[0]) == MACHINE_EVENT__COUNT,
               "every machine_event needs a name");

struct machine_policy machine_policy_default(void)
{
    return (struct machine_policy){.max_posts = 2, .max_cycles = 5, .max_attempts = 8};
}

bool machine_is_terminal(enum machine_state state)
{
    return state == MACHINE_COMPLETED || state == MACHINE_BUSINESS_EXCEPTION ||
           state == MACHINE_MANUAL_REVIEW;
}

const char *machine_state_name(enum machine_state state)
{
    if ((int)state < 0 || state >= MACHINE_STATE__COUNT)
        return "invalid";
    return state_names[state];
}

enum machine_state machine_state_from_name(const char *name)
{
    for (int i = 0; name && i < MACHINE_STATE__COUNT; i++)
        if (strcmp(name, state_names[i]) == 0)
            return (enum machine_state)i;
    return MACHINE_STATE_INVALID;
}

const char *machine_event_name(enum machine_event event)
{
    if ((int)event < 0 || event >= MACHINE_EVENT__COUNT)
        return "invalid";
    return event_names[event];
}

enum machine_event machine_event_from_name(const char *name)
{
    for (int i = 0; name && i < MACHINE_EVENT__COUNT; i++)
        if (strcmp(name, event_names[i]) == 0)
            return (enum machine_event)i;
    return MACHINE_EVENT_INVALID;
}

/* Fills *s; returns APBOT_OK so a case can `return go(...)`. */
static int go(struct machine_step *s, enum machine_state next, enum machine_delay delay,
              struct machine_counters c, const char *why)
{
    s->next = next;
    s->delay = delay;
    s->counters = c;
    s->settle_mark = false;
    s->why = why;
    return APBOT_OK;
}

/* go() for a way out of posting on which the form may have reached the ERP: whatever the ERP
 * does with it later (a late commit) must be waited out before any absence is believed. */
static int go_sent(struct machine_step *s, enum machine_state next, enum machine_delay delay,
                   struct machine_counters c, const char *why)
{
    (void)go(s, next, delay, c, why);
    s->settle_mark = true;
    return APBOT_OK;
}

/* A transient failure before anything was sent: back off, or give up after the budget. */
static int transient(struct machine_step *s, struct machine_counters c,
                     const struct machine_policy *p, const char *why)
{
    c.attempts++;
    if (c.attempts >= p->max_attempts)
        return go(s, MACHINE_MANUAL_REVIEW, MACHINE_DELAY_NONE, c,
                  "transient failures exhausted the attempt budget");
    return go(s, MACHINE_NEW, MACHINE_DELAY_BACKOFF, c, why);
}

/* A failed round in reconciling or finishing: back off in the same state, or give up. */
static int cycle(struct machine_step *s, enum machine_state st, struct machine_counters c,
                 const struct machine_policy *p, const char *why_again, const char *why_done)
{
    c.cycles++;
    if (c.cycles >= p->max_cycles)
        return go(s, MACHINE_MANUAL_REVIEW, MACHINE_DELAY_NONE, c, why_done);
    return go(s, st, MACHINE_DELAY_BACKOFF, c, why_again);
}

/*
 * `not-found` in checking or reconciling: only an absence seen after the settle delay is a
 * confirmed absence, and only a confirmed absence within the post budget starts a post.
 * Entering posting commits one more (possibly sent) form against the budget.
 */
static int absent(struct machine_step *s, enum machine_state st, struct machine_counters c,
                  const struct machine_policy *p)
{
    if (!c.settled) {
        if (st == MACHINE_CHECKING)
            return go(s, MACHINE_NEW, MACHINE_DELAY_SETTLE, c,
                      "not found, but the settle delay since the last post has not passed:"
                      " look again after it");
        return go(s, MACHINE_RECONCILING, MACHINE_DELAY_SETTLE, c,
                  "not found yet, but the settle delay has not passed");
    }
    if (c.posts >= p->max_posts)
        return go(s, MACHINE_MANUAL_REVIEW, MACHINE_DELAY_NONE, c,
                  "not found in the ERP and the post budget is spent");
    c.posts++;
    c.cycles = 0;
    return go(s, MACHINE_POSTING, MACHINE_DELAY_NONE, c,
              st == MACHINE_CHECKING ? "not in the ERP: intent to post committed"
                                     : "confirmed absent after the settle delay: post again");
}

/* The ERP holds the document but its follow-up steps are due: finishing, on a fresh budget. */
static int to_finishing(struct machine_step *s, struct machine_counters c, const char *why)
{
    c.cycles = 0;
    return go(s, MACHINE_FINISHING, MACHINE_DELAY_NONE, c, why);
}

static int doc_conflict(struct machine_step *s, struct machine_counters c)
{
    return go(s, MACHINE_MANUAL_REVIEW, MACHINE_DELAY_NONE, c,
              "the ERP document is already held by another item: one document, one item");
}

static int from_new(enum machine_event ev, struct machine_counters c, struct machine_step *s)
{
    switch (ev) {
    case MACHINE_EV_CLAIMED:
        return go(s, MACHINE_CHECKING, MACHINE_DELAY_NONE, c, "claimed: look the key up first");
    case MACHINE_EV_DOC_CONFLICT:
        return doc_conflict(s, c);
    case MACHINE_EV_FOUND:
    case MACHINE_EV_FOUND_CONFLICT:
    case MACHINE_EV_FOUND_UNFINISHED:
    case MACHINE_EV_NOT_FOUND:
    case MACHINE_EV_LOOKUP_FAILED:
    case MACHINE_EV_CONFIRMED:
    case MACHINE_EV_SAVED:
    case MACHINE_EV_REJECTED:
    case MACHINE_EV_NOT_SENT:
    case MACHINE_EV_UNKNOWN:
    case MACHINE_EV_ALREADY_EXISTS:
    case MACHINE_EV_FOLLOWUP_FAILED:
    case MACHINE_EV_LEASE_EXPIRED:
    case MACHINE_EV_RELEASED:
    case MACHINE_EV_RESOLVE_POSTED:
    case MACHINE_EV_RESOLVE_REQUEUE:
    case MACHINE_EV_RESOLVE_REJECT:
    case MACHINE_EVENT__COUNT:
    case MACHINE_EVENT_INVALID:
        break;
    }
    return APBOT_E_STATE;
}

static int from_checking(enum machine_event ev, struct machine_counters c,
                         const struct machine_policy *p, struct machine_step *s)
{
    switch (ev) {
    case MACHINE_EV_FOUND:
        return go(s, MACHINE_COMPLETED, MACHINE_DELAY_NONE, c,
                  "already in the ERP: adopted its document number");
    case MACHINE_EV_FOUND_CONFLICT:
        return go(s, MACHINE_MANUAL_REVIEW, MACHINE_DELAY_NONE, c,
                  "the ERP holds this key with a different vendor or amount");
    case MACHINE_EV_FOUND_UNFINISHED:
        return to_finishing(s, c, "a draft carrying our key is in the ERP: finish it");
    case MACHINE_EV_NOT_FOUND:
        return absent(s, MACHINE_CHECKING, c, p);
    case MACHINE_EV_LOOKUP_FAILED:
        return transient(s, c, p, "lookup failed before posting: nothing was sent");
    case MACHINE_EV_LEASE_EXPIRED:
        return go(s, MACHINE_NEW, MACHINE_DELAY_NONE, c,
                  "lease expired while checking: nothing was sent");
    case MACHINE_EV_RELEASED:
        return go(s, MACHINE_NEW, MACHINE_DELAY_NONE, c, "released before anything was sent");
    case MACHINE_EV_DOC_CONFLICT:
        return doc_conflict(s, c);
    case MACHINE_EV_CLAIMED:
    case MACHINE_EV_CONFIRMED:
    case MACHINE_EV_SAVED:
    case MACHINE_EV_REJECTED:
    case MACHINE_EV_NOT_SENT:
    case MACHINE_EV_UNKNOWN:
    case MACHINE_EV_ALREADY_EXISTS:
    case MACHINE_EV_FOLLOWUP_FAILED:
    case MACHINE_EV_RESOLVE_POSTED:
    case MACHINE_EV_RESOLVE_REQUEUE:
    case MACHINE_EV_RESOLVE_REJECT:
    case MACHINE_EVENT__COUNT:
    case MACHINE_EVENT_INVALID:
        break;
    }
    return APBOT_E_STATE;
}

/*
 * posting: every way out on which the form may have reached the ERP marks the settle base
 * (go_sent); only not-sent and released (provably never sent) give the post back.
 */
static int from_posting(enum machine_event ev, struct machine_counters c,
                        const struct machine_policy *p, struct machine_step *s)
{
    switch (ev) {
    case MACHINE_EV_CONFIRMED:
        return go_sent(s, MACHINE_COMPLETED, MACHINE_DELAY_NONE, c,
                       "posted: success banner matched");
    case MACHINE_EV_SAVED:
        c.cycles = 0;
        return go_sent(s, MACHINE_FINISHING, MACHINE_DELAY_NONE, c,
                       "saved in the ERP: run the follow-up steps on the document, never post "
                       "again");
    case MACHINE_EV_REJECTED:
        return go_sent(s, MACHINE_BUSINESS_EXCEPTION, MACHINE_DELAY_NONE, c,
                       "rejected by ERP validation");
    case MACHINE_EV_NOT_SENT:
        /* Provably never processed: the form does not count against the post budget. */
        if (c.posts > 0)
            c.posts--;
        return transient(s, c, p, "post not sent: back off and check again");
    case MACHINE_EV_UNKNOWN:
        c.cycles = 0;
        return go_sent(s, MACHINE_RECONCILING, MACHINE_DELAY_SETTLE, c,
                       "outcome unknown: reconcile after the settle delay, never re-post blind");
    case MACHINE_EV_ALREADY_EXISTS:
        c.cycles = 0;
        return go_sent(s, MACHINE_RECONCILING, MACHINE_DELAY_NONE, c,
                       "ERP says it already exists: adopt the existing document");
    case MACHINE_EV_LEASE_EXPIRED:
        c.cycles = 0;
        return go_sent(s, MACHINE_RECONCILING, MACHINE_DELAY_SETTLE, c,
                       "lease expired while posting: the form may have reached the ERP");
    case MACHINE_EV_RELEASED:
        /* Only when the committing step was never sent (systemic stop before it). */
        if (c.posts > 0)
            c.posts--;
        return go(s, MACHINE_NEW, MACHINE_DELAY_NONE, c,
                  "released before the committing step was sent");
    case MACHINE_EV_DOC_CONFLICT:
        (void)doc_conflict(s, c);
        s->settle_mark = true;
        return APBOT_OK;
    case MACHINE_EV_CLAIMED:
    case MACHINE_EV_FOUND:
    case MACHINE_EV_FOUND_CONFLICT:
    case MACHINE_EV_FOUND_UNFINISHED:
    case MACHINE_EV_NOT_FOUND:
    case MACHINE_EV_LOOKUP_FAILED:
    case MACHINE_EV_FOLLOWUP_FAILED:
    case MACHINE_EV_RESOLVE_POSTED:
    case MACHINE_EV_RESOLVE_REQUEUE:
    case MACHINE_EV_RESOLVE_REJECT:
    case MACHINE_EVENT__COUNT:
    case MACHINE_EVENT_INVALID:
        break;
    }
    return APBOT_E_STATE;
}

static int from_reconciling(enum machine_event ev, struct machine_counters c,
                            const struct machine_policy *p, struct machine_step *s)
{
    switch (ev) {
    case MACHINE_EV_FOUND:
        return go(s, MACHINE_COMPLETED, MACHINE_DELAY_NONE, c, "reconciled: found in the ERP");
    case MACHINE_EV_FOUND_CONFLICT:
        return go(s, MACHINE_MANUAL_REVIEW, MACHINE_DELAY_NONE, c,
                  "the ERP holds this key with a different vendor or amount");
    case MACHINE_EV_FOUND_UNFINISHED:
        return to_finishing(s, c, "reconciled: saved in the ERP but not finished: finish it");
    case MACHINE_EV_NOT_FOUND:
        return absent(s, MACHINE_RECONCILING, c, p);
    case MACHINE_EV_LOOKUP_FAILED:
        return cycle(s, MACHINE_RECONCILING, c, p, "reconciliation lookup failed: back off",
                     "reconciliation lookups kept failing");
    case MACHINE_EV_LEASE_EXPIRED:
        return go(s, MACHINE_RECONCILING, MACHINE_DELAY_SETTLE, c,
                  "lease expired while reconciling");
    case MACHINE_EV_RELEASED:
        return go(s, MACHINE_RECONCILING, MACHINE_DELAY_NONE, c, "released untouched");
    case MACHINE_EV_DOC_CONFLICT:
        return doc_conflict(s, c);
    case MACHINE_EV_CLAIMED:
    case MACHINE_EV_CONFIRMED:
    case MACHINE_EV_SAVED:
    case MACHINE_EV_REJECTED:
    case MACHINE_EV_NOT_SENT:
    case MACHINE_EV_UNKNOWN:
    case MACHINE_EV_ALREADY_EXISTS:
    case MACHINE_EV_FOLLOWUP_FAILED:
    case MACHINE_EV_RESOLVE_POSTED:
    case MACHINE_EV_RESOLVE_REQUEUE:
    case MACHINE_EV_RESOLVE_REJECT:
    case MACHINE_EVENT__COUNT:
    case MACHINE_EVENT_INVALID:
        break;
    }
    return APBOT_E_STATE;
}

/*
 * finishing: the ERP holds the document; only the follow-up steps are retried, on the
 * document, never by posting. Whatever cannot be finished goes to a human.
 */
static int from_finishing(enum machine_event ev, struct machine_counters c,
                          const struct machine_policy *p, struct machine_step *s)
{
    switch (ev) {
    case MACHINE_EV_CONFIRMED:
        return go(s, MACHINE_COMPLETED, MACHINE_DELAY_NONE, c, "finished: every step done");
    case MACHINE_EV_FOUND:
        return go(s, MACHINE_COMPLETED, MACHINE_DELAY_NONE, c,
                  "a lookup shows the document finished");
    case MACHINE_EV_FOUND_UNFINISHED:
        return go(s, MACHINE_FINISHING, MACHINE_DELAY_NONE, c,
                  "still unfinished in the ERP: run the follow-up steps on the document");
    case MACHINE_EV_FOLLOWUP_FAILED:
        return cycle(s, MACHINE_FINISHING, c, p,
                     "follow-up step failed: retry it on the document after a backoff",
                     "saved in the ERP but not finished: the follow-up steps kept failing");
    case MACHINE_EV_LOOKUP_FAILED:
        return cycle(s, MACHINE_FINISHING, c, p, "lookup failed while finishing: back off",
                     "saved in the ERP but not finished: lookups kept failing");
    case MACHINE_EV_NOT_FOUND:
        /* The ERP's search may lag behind its save: only an absence seen after the settle
         * delay (counted from the save) means the document is gone. */
        if (!c.settled)
            return go(s, MACHINE_FINISHING, MACHINE_DELAY_SETTLE, c,
                      "saved but not found yet: the search may lag behind the save; look again "
                      "after the settle delay");
        return go(s, MACHINE_MANUAL_REVIEW, MACHINE_DELAY_NONE, c,
                  "the saved document vanished from the ERP: a human decides, never re-post");
    case MACHINE_EV_REJECTED:
        return go(s, MACHINE_MANUAL_REVIEW, MACHINE_DELAY_NONE, c,
                  "the ERP refused a follow-up step: the saved document exists");
    case MACHINE_EV_FOUND_CONFLICT:
        /* Not a row of the spec's table: a lookup that shows our key with another vendor or
         * amount while we hold a saved document is a conflict for a human, as everywhere. */
        return go(s, MACHINE_MANUAL_REVIEW, MACHINE_DELAY_NONE, c,
                  "the ERP holds this key with a different vendor or amount");
    case MACHINE_EV_LEASE_EXPIRED:
        return go(s, MACHINE_FINISHING, MACHINE_DELAY_NONE, c,
                  "lease expired while finishing: look it up again first");
    case MACHINE_EV_RELEASED:
        return go(s, MACHINE_FINISHING, MACHINE_DELAY_NONE, c, "released untouched");
    case MACHINE_EV_DOC_CONFLICT:
        return doc_conflict(s, c);
    case MACHINE_EV_CLAIMED:
    case MACHINE_EV_SAVED:
    case MACHINE_EV_NOT_SENT:
    case MACHINE_EV_UNKNOWN:
    case MACHINE_EV_ALREADY_EXISTS:
    case MACHINE_EV_RESOLVE_POSTED:
    case MACHINE_EV_RESOLVE_REQUEUE:
    case MACHINE_EV_RESOLVE_REJECT:
    case MACHINE_EVENT__COUNT:
    case MACHINE_EVENT_INVALID:
        break;
    }
    return APBOT_E_STATE;
}

/* completed is final, but two items cannot both own one ERP document. */
static int from_completed(enum machine_event ev, struct machine_counters c, struct machine_step *s)
{
    switch (ev) {
    case MACHINE_EV_DOC_CONFLICT:
        return doc_conflict(s, c);
    case MACHINE_EV_CLAIMED:
    case MACHINE_EV_FOUND:
    case MACHINE_EV_FOUND_CONFLICT:
    case MACHINE_EV_FOUND_UNFINISHED:
    case MACHINE_EV_NOT_FOUND:
    case MACHINE_EV_LOOKUP_FAILED:
    case MACHINE_EV_CONFIRMED:
    case MACHINE_EV_SAVED:
    case MACHINE_EV_REJECTED:
    case MACHINE_EV_NOT_SENT:
    case MACHINE_EV_UNKNOWN:
    case MACHINE_EV_ALREADY_EXISTS:
    case MACHINE_EV_FOLLOWUP_FAILED:
    case MACHINE_EV_LEASE_EXPIRED:
    case MACHINE_EV_RELEASED:
    case MACHINE_EV_RESOLVE_POSTED:
    case MACHINE_EV_RESOLVE_REQUEUE:
    case MACHINE_EV_RESOLVE_REJECT:
    case MACHINE_EVENT__COUNT:
    case MACHINE_EVENT_INVALID:
        break;
    }
    return APBOT_E_STATE; /* not even an operator undoes a booking here */
}

/* Operator resolutions, allowed only from business-exception and manual-review. */
static int resolve(enum machine_state st, enum machine_event ev, struct machine_counters c,
                   struct machine_step *s)
{
    switch (ev) {
    case MACHINE_EV_RESOLVE_POSTED:
        return go(s, MACHINE_COMPLETED, MACHINE_DELAY_NONE, c,
                  "operator: the ERP holds the verified document");
    case MACHINE_EV_RESOLVE_REQUEUE:
        /* A deliberate fresh start: the lookup runs again before any post, and the settle
         * delay still counts from the item's last post (the store keeps its settle base). */
        c.posts = c.cycles = c.attempts = 0;
        return go(s, MACHINE_NEW, MACHINE_DELAY_NONE, c, "operator: requeued");
    case MACHINE_EV_RESOLVE_REJECT:
        if (st == MACHINE_BUSINESS_EXCEPTION)
            return APBOT_E_STATE;
        return go(s, MACHINE_BUSINESS_EXCEPTION, MACHINE_DELAY_NONE, c, "operator: rejected");
    case MACHINE_EV_CLAIMED:
    case MACHINE_EV_FOUND:
    case MACHINE_EV_FOUND_CONFLICT:
    case MACHINE_EV_FOUND_UNFINISHED:
    case MACHINE_EV_NOT_FOUND:
    case MACHINE_EV_LOOKUP_FAILED:
    case MACHINE_EV_CONFIRMED:
    case MACHINE_EV_SAVED:
    case MACHINE_EV_REJECTED:
    case MACHINE_EV_NOT_SENT:
    case MACHINE_EV_UNKNOWN:
    case MACHINE_EV_ALREADY_EXISTS:
    case MACHINE_EV_FOLLOWUP_FAILED:
    case MACHINE_EV_DOC_CONFLICT:
    case MACHINE_EV_LEASE_EXPIRED:
    case MACHINE_EV_RELEASED:
    case MACHINE_EVENT__COUNT:
    case MACHINE_EVENT_INVALID:
        break;
    }
    return APBOT_E_STATE;
}

int machine_next(enum machine_state state, enum machine_event event,
                 const struct machine_counters *counters, const struct machine_policy *policy,
                 struct machine_step *ret_step)
{
    if ((int)state < 0 || state >= MACHINE_STATE__COUNT || (int)event < 0 ||
        event >= MACHINE_EVENT__COUNT || !counters || !policy || !ret_step)
        return APBOT_E_INVAL;
    if (policy->max_posts < 1 || policy->max_cycles < 1 || policy->max_attempts < 1)
        return APBOT_E_INVAL;

    struct machine_step s;
    struct machine_counters c = *counters;
    int rc = APBOT_E_STATE;

    switch (state) {
    case MACHINE_NEW:
        rc = from_new(event, c, &s);
        break;
    case MACHINE_CHECKING:
        rc = from_checking(event, c, policy, &s);
        break;
    case MACHINE_POSTING:
        rc = from_posting(event, c, policy, &s);
        break;
    case MACHINE_RECONCILING:
        rc = from_reconciling(event, c, policy, &s);
        break;
    case MACHINE_FINISHING:
        rc = from_finishing(event, c, policy, &s);
        break;
    case MACHINE_COMPLETED:
        rc = from_completed(event, c, &s);
        break;
    case MACHINE_BUSINESS_EXCEPTION:
    case MACHINE_MANUAL_REVIEW:
        rc = resolve(state, event, c, &s);
        break;
    case MACHINE_STATE__COUNT:
    case MACHINE_STATE_INVALID:
        return APBOT_E_INVAL;
    }
    if (rc == APBOT_OK)
        *ret_step = s;
    return rc;
}
