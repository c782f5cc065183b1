/*
 * transition.c - the one state setter (see transition.h): machine_next() decides, the store
 * persists in one transaction, the log callback hears old -> new. Also the claim of a new
 * item and the recovery of expired leases, so that no state changes anywhere else, and the
 * rule "one ERP document, one item" that spans two rows.
 */
#include "queue/transition.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "apbot/clock.h"
#include "apbot/store.h"

static void report(const struct transition_env *env, const struct store_item *before,
                   enum machine_state to, enum machine_event ev, const struct machine_step *step,
                   const char *doc, const char *reason, const char *detail)
{
    if (!env->log)
        return;
    struct transition_log l = {
        .item = before,
        .from = before->state,
        .to = to,
        .event = ev,
        .doc = doc,
        .reason = reason,
        .detail = detail,
        .why = step ? step->why : NULL,
        .actor = env->actor,
    };
    env->log(env->ctx, &l);
}

/* The step a claim makes of a new item; false if the machine refuses it (a bug). */
static bool claim_step(const struct transition_env *env, struct machine_step *ret)
{
    struct machine_counters c = {.settled = true};
    return machine_next(MACHINE_NEW, MACHINE_EV_CLAIMED, &c, env->policy, ret) == APBOT_OK;
}

/* Logs a claim (of a new item: a reconciliation or a document to finish keeps its state). */
static void report_claim(const struct transition_env *env, const struct store_item *claimed_row,
                         const struct machine_step *claimed)
{
    if (claimed_row->state != claimed->next)
        return;
    struct store_item before = *claimed_row;
    before.state = MACHINE_NEW;
    report(env, &before, claimed->next, MACHINE_EV_CLAIMED, claimed, NULL, NULL, NULL);
}

/* The step the machine makes of ev for item, with "settled" judged at looked (or now). */
static int next_step(const struct transition_env *env, const struct store_item *item,
                     enum machine_event ev, const struct apbot_now *now, int64_t looked_mono,
                     struct machine_step *ret, char *err, size_t errlen)
{
    struct machine_counters c = item->counters;
    struct apbot_now looked = *now;
    if (looked_mono > 0)
        looked.mono_ms = looked_mono;
    c.settled = store_settled(item, &looked, env->settle_ms);
    int rc = machine_next(item->state, ev, &c, env->policy, ret);
    if (rc != APBOT_OK)
        return apbot_fail(
            err, errlen, APBOT_E_INVAL, "item %" PRId64 ": no transition for %s in %s (%s)",
            item->id, machine_event_name(ev), machine_state_name(item->state), apbot_strerror(rc));
    return APBOT_OK;
}

/* Sends the holder of a document to manual review because another item claims it too. */
static void conflict_holder(const struct transition_env *env, int64_t holder, int64_t claimant,
                            const char *doc, const struct apbot_now *now)
{
    struct store_item h;
    struct machine_step step;
    char detail[256];
    if (store_get(env->st, holder, &h, NULL, 0) != APBOT_OK)
        return;
    snprintf(detail, sizeof(detail), "document %.100s is claimed by item #%" PRId64 " too",
             doc ? doc : "?", claimant);
    if (next_step(env, &h, MACHINE_EV_DOC_CONFLICT, now, 0, &step, NULL, 0) == APBOT_OK) {
        struct store_change ch = {
            .from = h.state,
            .event = MACHINE_EV_DOC_CONFLICT,
            .step = &step,
            .settle_ms = env->settle_ms,
            .reason = detail,
            .detail = detail,
            .actor = env->actor,
            .take_over = true,
        };
        if (store_apply(env->st, holder, NULL, &ch, now, NULL, NULL, 0) == APBOT_OK)
            report(env, &h, step.next, MACHINE_EV_DOC_CONFLICT, &step, NULL, detail, detail);
    }
    store_item_done(&h);
}

int transition_apply(const struct transition_env *env, struct store_item *item,
                     const struct transition_in *in, struct transition_out *ret, char *err,
                     size_t errlen)
{
    struct apbot_now now;
    struct machine_step step;
    struct transition_out out;
    char reason[700];
    int rc;

    memset(&out, 0, sizeof(out));
    apbot_clock_now(&now);
    rc = next_step(env, item, in->event, &now, in->looked_mono, &step, err, errlen);
    if (rc != APBOT_OK)
        return rc;

    /* Work continues under the lease only where the machine leads to more work now. */
    bool keep = in->keep_lease && env->owner &&
                (step.next == MACHINE_POSTING ||
                 (step.next == MACHINE_FINISHING && step.delay == MACHINE_DELAY_NONE));
    const char *doc = NULL, *why_reason = in->reason;
    switch (step.next) {
    case MACHINE_COMPLETED:
    case MACHINE_FINISHING:
        doc = in->doc && *in->doc ? in->doc : NULL;
        if (step.next == MACHINE_COMPLETED && !why_reason)
            why_reason = "";
        break;
    case MACHINE_MANUAL_REVIEW:
        snprintf(reason, sizeof(reason), "%s; last outcome: %s: %s", step.why,
                 machine_event_name(in->event), in->detail && *in->detail ? in->detail : "-");
        why_reason = reason;
        break;
    case MACHINE_BUSINESS_EXCEPTION:
        if (!why_reason || !*why_reason)
            why_reason = in->detail;
        break;
    case MACHINE_NEW:
    case MACHINE_CHECKING:
    case MACHINE_POSTING:
    case MACHINE_RECONCILING:
    case MACHINE_STATE__COUNT:
    case MACHINE_STATE_INVALID:
        break;
    }
    struct store_change ch = {
        .from = item->state,
        .event = in->event,
        .step = &step,
        .backoff_ms = env->backoff ? env->backoff(env->ctx, &step) : 0,
        .settle_ms = env->settle_ms,
        .erp_doc = doc,
        .reason = why_reason,
        .detail = in->detail,
        .actor = env->actor,
        .keep_lease = keep,
        .take_over = in->take_over,
        .evidence = in->evidence,
        .n_evidence = in->n_evidence,
    };
    int64_t holder = 0;
    struct store_item fresh; /* the row as the change left it */
    struct machine_step claimed;
    bool claim_next = !keep && in->claim_next_lease_ms > 0 && in->claim_into && ret && env->owner &&
                      !in->take_over && claim_step(env, &claimed);
    if (claim_next)
        rc = store_apply_claim(env->st, item->id, env->owner, &ch, &now, &holder, &fresh,
                               in->claim_next_lease_ms, &claimed, in->claim_into, &out.claimed, err,
                               errlen);
    else
        rc = store_apply_get(env->st, item->id, in->take_over ? NULL : env->owner, &ch, &now,
                             &holder, &fresh, err, errlen);
    enum machine_event ev = in->event;
    if (rc == APBOT_E_CONFLICT && in->refuse_conflict) {
        out.conflict_with = holder;
        if (ret)
            *ret = out;
        return apbot_fail(err, errlen, APBOT_E_CONFLICT,
                          "document %s is already held by item #%" PRId64, doc ? doc : "?", holder);
    }
    if (rc == APBOT_E_CONFLICT) {
        /* One document, one item: this one and the holder both go to a human. */
        char detail[300];
        snprintf(detail, sizeof(detail), "document %.100s is already held by item #%" PRId64,
                 doc ? doc : "?", holder);
        conflict_holder(env, holder, item->id, doc, &now);
        ev = MACHINE_EV_DOC_CONFLICT;
        rc = next_step(env, item, ev, &now, 0, &step, err, errlen);
        if (rc != APBOT_OK)
            return rc;
        snprintf(reason, sizeof(reason), "%s; %s", step.why, detail);
        ch.event = ev;
        ch.step = &step;
        ch.erp_doc = NULL;
        ch.reason = reason;
        ch.detail = detail;
        ch.keep_lease = keep = false;
        ch.backoff_ms = 0;
        doc = NULL;
        why_reason = reason;
        out.conflict_with = holder;
        rc = store_apply_get(env->st, item->id, in->take_over ? NULL : env->owner, &ch, &now, NULL,
                             &fresh, err, errlen);
    }
    if (rc != APBOT_OK)
        return rc;

    report(env, item, step.next, ev, &step, doc, why_reason, ch.detail);
    if (out.claimed)
        report_claim(env, in->claim_into, &claimed);
    if (fresh.id == item->id) {
        store_item_done(item);
        *item = fresh;
    } else {
        item->state = step.next;
        item->counters = step.counters;
    }
    out.step = step;
    out.event = ev;
    out.kept = keep;
    if (ret)
        *ret = out;
    return APBOT_OK;
}

int transition_claim(const struct transition_env *env, const struct apbot_now *now,
                     int64_t lease_ms, struct store_item *ret, char *err, size_t errlen)
{
    struct machine_step claimed;
    if (!claim_step(env, &claimed))
        return apbot_fail(err, errlen, APBOT_E_BUG, "the machine refuses new + claimed");
    int rc = store_claim(env->st, env->owner, now, lease_ms, &claimed, ret, err, errlen);
    if (rc != APBOT_OK)
        return rc;
    report_claim(env, ret, &claimed);
    return APBOT_OK;
}

int transition_claim_id(const struct transition_env *env, const struct apbot_now *now, int64_t id,
                        int64_t lease_ms, struct store_item *ret, char *err, size_t errlen)
{
    struct machine_step claimed;
    if (!claim_step(env, &claimed))
        return apbot_fail(err, errlen, APBOT_E_BUG, "the machine refuses new + claimed");
    int rc = store_claim_id(env->st, id, env->owner, now, lease_ms, &claimed, ret, err, errlen);
    if (rc != APBOT_OK)
        return rc;
    report_claim(env, ret, &claimed);
    return APBOT_OK;
}

struct recover_walk {
    const struct transition_env *env;
    int count;
};

static int recover_one(void *ctx, const struct store_item *it)
{
    struct recover_walk *w = ctx;
    struct store_item copy;
    /* The walk hands out a borrowed row; the setter needs its own copy. */
    if (store_get(w->env->st, it->id, &copy, NULL, 0) != APBOT_OK)
        return 0;
    struct transition_in in = {.event = MACHINE_EV_LEASE_EXPIRED, .take_over = true};
    struct machine_step probe;
    struct machine_counters c = copy.counters;
    /* A state without a lease-expired row (a leased terminal item) is left as it is. */
    if (machine_next(copy.state, MACHINE_EV_LEASE_EXPIRED, &c, w->env->policy, &probe) ==
            APBOT_OK &&
        transition_apply(w->env, &copy, &in, NULL, NULL, 0) == APBOT_OK)
        w->count++;
    store_item_done(&copy);
    return 0;
}

int transition_recover(const struct transition_env *env, const struct apbot_now *now,
                       int *ret_count, char *err, size_t errlen)
{
    struct recover_walk w = {.env = env};
    int rc = store_each_expired(env->st, now, 0, recover_one, &w, err, errlen);
    if (ret_count)
        *ret_count = w.count;
    return rc;
}
