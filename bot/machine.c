/*
 * machine.c - the per-item state machine of DESIGN.md as one pure function.
 *
 * Each state has one function that handles the events allowed in it and refuses the rest
 * with APBOT_E_STATE. Counters travel in and out by value so the caller persists exactly
 * what the step says, in the same transaction as the state. Nothing here reads a clock:
 * "the settle delay has passed" arrives as counters->settled.
 */
#include "apbot/machine.h"

#include <string.h>

static const char *const state_names[] = {
    [MACHINE_NEW] = "new",
    [MACHINE_CHECKING] = "checking",
    [MACHINE_POSTING] = "posting",
    [MACHINE_RECONCILING] = "reconciling",
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
    [MACHINE_EV_NOT_FOUND] = "not-found",
    [MACHINE_EV_LOOKUP_FAILED] = "lookup-failed",
    [MACHINE_EV_CONFIRMED] = "confirmed",
    [MACHINE_EV_REJECTED] = "rejected",
    [MACHINE_EV_NOT_SENT] = "not-sent",
    [MACHINE_EV_UNKNOWN] = "unknown",
    [MACHINE_EV_ALREADY_EXISTS] = "already-exists",
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
    s->why = why;
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

/* Entering posting commits one more (possibly sent) form against the post budget. */
static int start_post(struct machine_step *s, struct machine_counters c,
                      const struct machine_policy *p, const char *why)
{
    if (c.posts >= p->max_posts)
        return go(s, MACHINE_MANUAL_REVIEW, MACHINE_DELAY_NONE, c,
                  "not found in the ERP and the post budget is spent");
    c.posts++;
    c.cycles = 0;
    return go(s, MACHINE_POSTING, MACHINE_DELAY_NONE, c, why);
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
        /* A deliberate fresh start: the lookup runs again before any post. */
        c.posts = c.cycles = c.attempts = 0;
        return go(s, MACHINE_NEW, MACHINE_DELAY_NONE, c, "operator: requeued");
    case MACHINE_EV_RESOLVE_REJECT:
        if (st == MACHINE_BUSINESS_EXCEPTION)
            return APBOT_E_STATE;
        return go(s, MACHINE_BUSINESS_EXCEPTION, MACHINE_DELAY_NONE, c, "operator: rejected");
    default:
        return APBOT_E_STATE;
    }
}

static int from_new(enum machine_event ev, struct machine_counters c, struct machine_step *s)
{
    if (ev == MACHINE_EV_CLAIMED)
        return go(s, MACHINE_CHECKING, MACHINE_DELAY_NONE, c, "claimed: look the key up first");
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
    case MACHINE_EV_NOT_FOUND:
        return start_post(s, c, p, "not in the ERP: intent to post committed");
    case MACHINE_EV_LOOKUP_FAILED:
        return transient(s, c, p, "lookup failed before posting: nothing was sent");
    case MACHINE_EV_LEASE_EXPIRED:
        return go(s, MACHINE_NEW, MACHINE_DELAY_NONE, c,
                  "lease expired while checking: nothing was sent");
    case MACHINE_EV_RELEASED:
        return go(s, MACHINE_NEW, MACHINE_DELAY_NONE, c, "released before anything was sent");
    default:
        return APBOT_E_STATE;
    }
}

static int from_posting(enum machine_event ev, struct machine_counters c,
                        const struct machine_policy *p, struct machine_step *s)
{
    switch (ev) {
    case MACHINE_EV_CONFIRMED:
        return go(s, MACHINE_COMPLETED, MACHINE_DELAY_NONE, c, "posted: success banner matched");
    case MACHINE_EV_REJECTED:
        return go(s, MACHINE_BUSINESS_EXCEPTION, MACHINE_DELAY_NONE, c,
                  "rejected by ERP validation");
    case MACHINE_EV_NOT_SENT:
        /* Provably never processed: the form does not count against the post budget. */
        if (c.posts > 0)
            c.posts--;
        return transient(s, c, p, "post not sent: back off and check again");
    case MACHINE_EV_UNKNOWN:
        c.cycles = 0;
        return go(s, MACHINE_RECONCILING, MACHINE_DELAY_SETTLE, c,
                  "outcome unknown: reconcile after the settle delay, never re-post blind");
    case MACHINE_EV_ALREADY_EXISTS:
        c.cycles = 0;
        return go(s, MACHINE_RECONCILING, MACHINE_DELAY_NONE, c,
                  "ERP says it already exists: adopt the existing document");
    case MACHINE_EV_LEASE_EXPIRED:
        c.cycles = 0;
        return go(s, MACHINE_RECONCILING, MACHINE_DELAY_SETTLE, c,
                  "lease expired while posting: the form may have reached the ERP");
    case MACHINE_EV_RELEASED:
        /* Only when the committing step was never sent (systemic stop before it). */
        if (c.posts > 0)
            c.posts--;
        return go(s, MACHINE_NEW, MACHINE_DELAY_NONE, c,
                  "released before the committing step was sent");
    default:
        return APBOT_E_STATE;
    }
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
    case MACHINE_EV_NOT_FOUND:
        /* Only an absence seen after the settle delay is a confirmed absence. */
        if (!c.settled)
            return go(s, MACHINE_RECONCILING, MACHINE_DELAY_SETTLE, c,
                      "not found yet, but the settle delay has not passed");
        return start_post(s, c, p, "confirmed absent after the settle delay: post again");
    case MACHINE_EV_LOOKUP_FAILED:
        c.cycles++;
        if (c.cycles >= p->max_cycles)
            return go(s, MACHINE_MANUAL_REVIEW, MACHINE_DELAY_NONE, c,
                      "reconciliation lookups kept failing");
        return go(s, MACHINE_RECONCILING, MACHINE_DELAY_BACKOFF, c,
                  "reconciliation lookup failed: back off");
    case MACHINE_EV_LEASE_EXPIRED:
        return go(s, MACHINE_RECONCILING, MACHINE_DELAY_SETTLE, c,
                  "lease expired while reconciling");
    case MACHINE_EV_RELEASED:
        return go(s, MACHINE_RECONCILING, MACHINE_DELAY_NONE, c, "released untouched");
    default:
        return APBOT_E_STATE;
    }
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
    case MACHINE_COMPLETED:
        rc = APBOT_E_STATE; /* final: not even an operator undoes a booking here */
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
