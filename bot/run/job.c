/*
 * job.c - one claimed item's job: what the worker learns of it from the ERP, and each event
 * handed to the one state setter.
 *
 * Per item the worker learns an event from the ERP - a lookup (checking, reconciling, and
 * finishing when claimed), the post through every step (erp_post_run), or the follow-up
 * steps on a saved document - and hands it to the one state setter (transition_apply), which
 * asks the machine and persists the change with its audit event. The intent to post is
 * committed before any step of the form is sent (the session's gate makes it durable: see
 * worker_durable); a saved document is committed before its follow-up steps run; the lease is
 * renewed whenever it would not outlast one more exchange, and once more right before the
 * committing request; what may have been booked is never handed back as untouched (`unknown`,
 * then a reconciliation, never a blind re-post). What an answer means is decided by decide.c,
 * not here; whether a record books this invoice by docmatch.c. Every exchange of the item is
 * kept as its evidence and stored with its next state change.
 *
 * A queue that answers APBOT_E_UNAVAIL (worker_queue_lost) ends the job on the spot: the
 * item stays as the queue last recorded it, whatever the job learnt since (a change the queue
 * may or may not have taken is settled as after a crash: recovery after the lease, a lookup
 * before anything is posted again), and nothing more is sent for it.
 */
#include "run/runner-int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/buf.h"
#include "apbot/erp.h"
#include "apbot/flow.h"
#include "apbot/invoice.h"
#include "apbot/machine.h"
#include "apbot/mem.h"
#include "apbot/store.h"
#include "apbot/text.h"
#include "erp/decide.h"
#include "erp/docmatch.h"
#include "erp/erp_post.h"
#include "queue/transition.h"
#include "run/limiter.h"
#include "run/runmetrics.h"

#define RUNNER_EXCERPT_MAX 1024 /* bytes of page text kept per exchange */
#define RUNNER_FORM_CONFIRM 3   /* pages without the flow's form in a row that trip */
#define RUNNER_JOB_ROUNDS 8     /* events one claim may apply (checking, posting, ...) */
#define RUNNER_PENDING_MAX 64   /* exchanges of one item kept before they are stored */

/* One item in hand: what the worker learnt about it during this claim. */
struct job {
    struct worker *w;
    struct store_item item; /* the row as last read (transition_apply refreshes it) */
    struct invoice inv;
    bool inv_ok;
    int64_t lease_until; /* mono ms */
    int64_t looked_at;   /* mono ms when the last lookup began (0: none) */
    bool lost;           /* lease lost: touch the item no more */
    bool commit_sent;    /* the committing request went on the wire (or may have) */
    bool kept;           /* the last transition kept the lease: work on */
    char doc[128];
    char reason[512];
    char detail[512];
    int64_t retry_after_ms;
};

/* Masks the ERP user and password inside buf (a NUL-terminated text of capacity len). */
static void mask_in_place(const struct runner *r, char *buf, size_t len)
{
    text_mask_into(buf, len, r->password, r->user);
}

/* ---- evidence --------------------------------------------------------------------------- */

/* What an exchange says about the ERP's load, for the limiter. */
static enum limiter_signal load_signal(const struct erp_exchange *ev)
{
    if (ev->http_status == 429 || ev->http_status == 503)
        return LIMITER_OVERLOAD;
    if (ev->transport && strncmp(ev->transport, "unknown", 7) == 0 &&
        strstr(ev->transport, "imed out"))
        return LIMITER_TIMEOUT;
    return LIMITER_OK;
}

static char *dup_or_null(const char *s)
{
    return s ? apbot_xstrdup(s) : NULL;
}

/* Frees the pending exchanges' strings and empties the list. */
static void evidence_drop(struct worker *w)
{
    for (size_t i = 0; i < w->n_pending; i++) {
        struct store_evidence *e = &w->pending[i];
        free((char *)e->step);
        free((char *)e->method);
        free((char *)e->url);
        free((char *)e->transport);
        free((char *)e->rule);
        free((char *)e->outcome);
        free((char *)e->excerpt);
    }
    w->n_pending = 0;
}

/* Stores the pending exchanges of the item in hand in one transaction of their own. */
static void evidence_flush(struct worker *w)
{
    if (!w->n_pending)
        return;
    char err[APBOT_ERR_LEN];
    int rc = w->queue_lost ? APBOT_E_UNAVAIL
                           : store_add_evidence_n(w->st, w->item_id, w->pending, w->n_pending, NULL,
                                                  err, sizeof(err));
    if (rc == APBOT_E_UNAVAIL && (w->queue_lost || worker_queue_lost(w, rc, err))) {
        w->kept_item = w->item_id; /* kept until the queue is back (job_evidence_restore) */
        return;
    }
    if (rc != APBOT_OK)
        runlog_msg(w->r, "warn", "evidence not stored", err);
    evidence_drop(w);
}

void job_evidence_restore(struct worker *w)
{
    char err[APBOT_ERR_LEN];
    if (w->n_pending && w->kept_item &&
        store_add_evidence_n(w->st, w->kept_item, w->pending, w->n_pending, NULL, err,
                             sizeof(err)) != APBOT_OK)
        runlog_msg(w->r, "warn", "evidence not stored", err);
    evidence_drop(w);
    w->kept_item = 0;
}

/*
 * Keeps one exchange of the item in hand (if any), secrets masked, excerpt <= 1 KiB. It is
 * stored with the item's next state change (job_apply), in the same transaction: a separate
 * synchronous write per exchange cost a disk sync each. Exchanges are never held across one
 * that could book: the pending ones are stored before the committing request is sent
 * (hook_before_commit), and whatever is left when the item leaves the worker (job_run).
 */
static void evidence_put(struct worker *w, const struct erp_exchange *ev)
{
    struct runner *r = w->r;
    enum limiter_signal sig = load_signal(ev);
    w->stats.exchanges++;
    breaker_count(r, ev->transport);
    runmetrics_exchange(r->opt->metrics, ev->step, ev->outcome, ev->elapsed_ms, sig);
    if (ev->http_status > 0 || sig == LIMITER_TIMEOUT)
        limiter_sample(r->limiter, ev->step, ev->method, ev->elapsed_ms, sig);
    if (!w->item_id || w->queue_lost)
        return;
    if (w->n_pending >= RUNNER_PENDING_MAX)
        evidence_flush(w);
    if (apbot_grow((void **)&w->pending, &w->cap_pending, w->n_pending, sizeof(*w->pending),
                   RUNNER_PENDING_MAX) != APBOT_OK) {
        evidence_flush(w);
        return;
    }
    struct store_evidence *e = &w->pending[w->n_pending++];
    e->http_status = ev->http_status;
    e->elapsed_ms = ev->elapsed_ms;
    char *excerpt = text_mask(ev->excerpt, r->password, r->user);
    if (excerpt)
        text_cut_utf8(excerpt, RUNNER_EXCERPT_MAX);
    e->step = apbot_xstrdup(w->reconciling && ev->step && strcmp(ev->step, "lookup") == 0
                                ? "reconcile"
                                : (ev->step ? ev->step : "?"));
    e->method = dup_or_null(ev->method);
    e->url = text_mask(ev->url, r->password, r->user);
    e->transport = dup_or_null(ev->transport);
    e->rule = dup_or_null(ev->rule);
    e->outcome = dup_or_null(ev->outcome);
    e->excerpt = excerpt;
}

/* The session's evidence callback (erp_set_evidence). */
void job_evidence(void *ctx, const struct erp_exchange *ev)
{
    evidence_put(ctx, ev);
}

void job_evidence_free(struct worker *w)
{
    evidence_drop(w);
    free(w->pending);
    w->pending = NULL;
    w->cap_pending = 0;
}

/* ---- leases and the state setter ------------------------------------------------------ */

/*
 * Makes sure the lease outlasts one more exchange; prove: renew it even so (the queue's
 * answer proves it is still this worker's). Returns false (and marks the job lost) when
 * another runner took the item over, or the queue is lost.
 */
static bool job_lease(struct job *j, bool prove)
{
    struct worker *w = j->w;
    const struct runner_policy *pol = &w->r->pol;
    int64_t now = mono_ms();
    int64_t need = pol->timeout_ms + pol->connect_timeout_ms + RUNNER_LEASE_MARGIN_MS;
    if (!prove && j->lease_until - now >= need)
        return true;
    char err[APBOT_ERR_LEN];
    int rc = store_renew(w->st, j->item.id, w->owner, NULL, pol->lease_ms, err, sizeof(err));
    if (rc == APBOT_OK) {
        j->lease_until = now + pol->lease_ms;
        return true;
    }
    j->lost = true;
    bool unavailable = worker_queue_lost(w, rc, err);
    runlog_msg(w->r, rc == APBOT_E_STATE || unavailable ? "warn" : "error", "lease not renewed",
               err);
    if (rc != APBOT_E_STATE && !unavailable)
        runner_fail(w->r, err);
    return false;
}

/*
 * Applies one event to the item in hand through the one state setter. Returns true when the
 * worker continues with the item (j->item refreshed, j->kept). may_claim_next: when the item
 * leaves the worker with this change, the next one may be claimed with it (w->next; only
 * where the job ends with the change, never from a hook in the middle of a post).
 */
static bool job_apply(struct job *j, enum machine_event ev, bool may_claim_next)
{
    struct worker *w = j->w;
    struct runner *r = w->r;
    char err[APBOT_ERR_LEN];

    j->kept = false;
    if (j->lost || w->queue_lost)
        return false;
    /* ERP messages may echo the user id: nothing secret reaches the row, event or log. */
    mask_in_place(r, j->reason, sizeof(j->reason));
    mask_in_place(r, j->detail, sizeof(j->detail));
    /* A stop arriving after a clean "not found" must not start a post: no intent is
     * committed for a form that will not be sent; the item goes back untouched. */
    bool stop_now = stopping(r); /* read once: the post starts under the lease or not at all */
    if (ev == MACHINE_EV_NOT_FOUND && stop_now &&
        (j->item.state == MACHINE_CHECKING || j->item.state == MACHINE_RECONCILING))
        ev = MACHINE_EV_RELEASED;
    /* When this change lets go of the item, the next one is claimed in its transaction (one
     * commit instead of two, and the pages both write shared), if the worker would claim one
     * now: not stopping, the ERP not under suspicion, the session logged in and the worker's
     * place within the limiter's limit. */
    bool claim_next = may_claim_next && !w->have_next && !stop_now && !breaker_suspect(r) &&
                      erp_logged_in(w->erp) && limiter_may_keep(r->limiter) &&
                      !runner_retry_due(r); /* that one first (worker_turn) */
    struct transition_env env = worker_env(w);
    /* An ERP whose lookup shows no booking time is looked at once before the settle delay
     * ends, to measure its late commits (settle.c); a miss there is no absence (the machine
     * waits out the rest of the delay). */
    if (ev == MACHINE_EV_UNKNOWN && j->item.state == MACHINE_POSTING)
        env.settle_ms = settle_first_look_ms(r, env.settle_ms);
    struct transition_in in = {
        .event = ev,
        .looked_mono = j->looked_at,
        .doc = j->doc[0] ? j->doc : NULL,
        .reason = j->reason[0] ? j->reason : NULL,
        .detail = j->detail[0] ? j->detail : NULL,
        .keep_lease = !stop_now,
        /* the exchanges that led here, in the change's transaction */
        .evidence = w->pending,
        .n_evidence = w->item_id == j->item.id ? w->n_pending : 0,
        .claim_next_lease_ms = claim_next ? r->pol.lease_ms : 0,
        .claim_into = claim_next ? &w->next : NULL,
    };
    struct transition_out out;
    w->retry_after_ms = j->retry_after_ms;
    w->backoff_ms = 0;
    int rc = transition_apply(&env, &j->item, &in, &out, err, sizeof(err));
    if (rc == APBOT_OK && out.claimed)
        w->have_next = true;
    /* Handed back to new for a moment: claimed again once due, before the backlog. */
    if (rc == APBOT_OK && out.step.next == MACHINE_NEW && out.step.delay == MACHINE_DELAY_BACKOFF &&
        w->backoff_ms <= RUNNER_RETRY_SOON_MS)
        runner_retry_later(r, j->item.id, mono_ms() + w->backoff_ms);
    if (rc == APBOT_OK)
        evidence_drop(w); /* stored with the change */
    else
        evidence_flush(w); /* the change was refused: the exchanges on their own */
    w->retry_after_ms = 0;
    j->doc[0] = j->reason[0] = j->detail[0] = '\0';
    j->retry_after_ms = 0;
    j->looked_at = 0;
    if (rc == APBOT_E_INVAL) {
        runlog_msg(r, "error", "bug", err);
        j->lost = true;
        return false;
    }
    if (rc != APBOT_OK) {
        j->lost = true;
        if (rc == APBOT_E_STATE) {
            runlog_msg(r, "warn", "item taken over; result dropped", err);
        } else if (worker_queue_lost(w, rc, err)) {
            char what[APBOT_ERR_LEN + 64];
            snprintf(what, sizeof(what), "item %" PRId64 " (%s, %s): %s", j->item.id,
                     machine_event_name(ev), machine_state_name(j->item.state), err);
            runlog_msg(r, "warn",
                       "a change the queue may not have taken; the item stays as the queue "
                       "recorded it, settled after its lease",
                       what);
        } else {
            runlog_msg(r, "error", "store", err);
            runner_fail(r, err);
        }
        return false;
    }
    if (out.conflict_with)
        runlog_msg(r, "warn", "one document claimed by two items: both sent to review",
                   j->item.reason);
    j->kept = out.kept;
    if (out.kept)
        j->lease_until = j->item.lease_mono;
    return out.kept;
}

/* ---- the lookup (checking, reconciling, finishing) ------------------------------------- */

/* True when the flow's lookup reads an amount (a column of its table or its detail page). */
static bool lookup_reads_amount(const struct flow *f)
{
    const struct flow_table *t[2] = {&f->lookup.table, &f->lookup.detail.table};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < t[k]->n_cols; i++)
            if (t[k]->cols[i].name && strcmp(t[k]->cols[i].name, "amount") == 0)
                return true;
    return false;
}

/*
 * What the lookup's hit means for the item in hand: found (or found-unfinished, the document
 * in j->doc, a late commit learnt from it when reconciling) when it books this invoice;
 * found-conflict for two documents with the key or one that books something else;
 * lookup-failed for a hit without a document number.
 */
static enum machine_event lookup_hit(struct job *j, const struct erp_lookup_result *res)
{
    struct worker *w = j->w;
    const struct erp_row *row = &res->hits.rows[0];
    /* The one rule for "this record books this invoice" (docmatch.h); a flow that reads no
     * amount from the ERP at all chose to trust its key alone. */
    const struct store_item *it = &j->item;
    struct docmatch_invoice mine =
        docmatch_invoice_of(it->vendor_id, it->currency, it->exponent, it->total, it->doc_type);
    struct docmatch_record rec;
    docmatch_record_of_row(row, &rec);
    unsigned diff, ignore = lookup_reads_amount(w->r->flow) ? 0u : DOCMATCH_NO_AMOUNT;
    if (res->hits.n > 1) {
        snprintf(j->detail, sizeof(j->detail), "%zu ERP documents carry this key (%s, %s)",
                 res->hits.n, row->doc ? row->doc : "?",
                 res->hits.rows[1].doc ? res->hits.rows[1].doc : "?");
        return MACHINE_EV_FOUND_CONFLICT;
    }
    if (!row->doc) {
        snprintf(j->detail, sizeof(j->detail), "a hit without a document number");
        return MACHINE_EV_LOOKUP_FAILED;
    }
    if ((diff = docmatch_compare(&mine, &rec) & ~ignore) != DOCMATCH_SAME) {
        char what[300];
        docmatch_describe(diff, &mine, &rec, what, sizeof(what));
        snprintf(j->detail, sizeof(j->detail), "ERP document %s: %s", row->doc, what);
        return MACHINE_EV_FOUND_CONFLICT;
    }
    bool unfinished = res->answer == ERP_FOUND_UNFINISHED;
    snprintf(j->doc, sizeof(j->doc), "%s", row->doc);
    snprintf(j->detail, sizeof(j->detail), "found as %s%s", row->doc,
             unfinished ? " (saved, not finished)" : "");
    if (j->item.state == MACHINE_RECONCILING) {
        settle_observe(w, &j->item, row->booked, res);
        settle_bound(w, &j->item);
    }
    return unfinished ? MACHINE_EV_FOUND_UNFINISHED : MACHINE_EV_FOUND;
}

/*
 * Looks the key up and returns found, found-unfinished, found-conflict, not-found or
 * lookup-failed; `released` when the run is stopping or the breaker tripped meanwhile.
 */
static enum machine_event job_lookup(struct job *j)
{
    struct worker *w = j->w;
    struct erp_lookup_result res;
    char err[APBOT_ERR_LEN];

    if (stopping(w->r))
        return MACHINE_EV_RELEASED;
    if (!j->inv_ok) {
        snprintf(j->detail, sizeof(j->detail), "the queued payload cannot be read");
        return MACHINE_EV_LOOKUP_FAILED;
    }
    if (!job_lease(j, false))
        return MACHINE_EV_RELEASED;
    w->stats.lookups++;
    runmetrics_count(w->r->opt->metrics, RUNMETRICS_LOOKUPS);
    if (j->item.state == MACHINE_RECONCILING)
        runmetrics_count(w->r->opt->metrics, RUNMETRICS_RECONCILIATIONS);
    j->looked_at = mono_ms();
    int rc = erp_lookup(w->erp, j->item.key, &j->inv, j->inv.currency, &res, err, sizeof(err));
    if (rc == APBOT_E_SYSTEMIC) {
        char msg[700];
        snprintf(msg, sizeof(msg), "login refused: %s", err);
        breaker_trip(w->r, msg);
        return MACHINE_EV_RELEASED; /* nothing learnt: back untouched, no attempt spent */
    }
    if (rc != APBOT_OK) {
        snprintf(j->detail, sizeof(j->detail), "lookup: %.400s", err);
        return stopping(w->r) ? MACHINE_EV_RELEASED : MACHINE_EV_LOOKUP_FAILED;
    }
    enum machine_event ev = MACHINE_EV_LOOKUP_FAILED;
    switch (res.answer) {
    case ERP_FAILED:
        if (stopping(w->r)) {
            ev = MACHINE_EV_RELEASED;
            break;
        }
        snprintf(j->detail, sizeof(j->detail), "%s", res.detail);
        if (res.retry_after_s > 0)
            j->retry_after_ms = res.retry_after_s * 1000;
        ev = MACHINE_EV_LOOKUP_FAILED;
        break;
    case ERP_NOT_FOUND:
        snprintf(j->detail, sizeof(j->detail), "not in the ERP");
        if (j->item.state == MACHINE_RECONCILING)
            settle_note_miss(w, &j->item, j->looked_at);
        ev = MACHINE_EV_NOT_FOUND;
        break;
    case ERP_FOUND:
    case ERP_FOUND_UNFINISHED:
        ev = lookup_hit(j, &res);
        break;
    }
    erp_lookup_result_done(&res);
    return ev;
}

/* ---- the post (posting) and the follow-up steps (finishing) ----------------------------- */

static bool hook_before_commit(void *ctx)
{
    struct job *j = ctx;
    struct worker *w = j->w;
    const struct runner_policy *pol = &w->r->pol;
    if (stopping(w->r) || w->queue_lost)
        return false;
    /* What was exchanged so far is stored before anything that could book is sent (a kill
     * of this process keeps it), without a disk sync of its own: it is no state change, and
     * reaches the disk with the next one. Then every change before the request on disk (the
     * gate's sync then finds nothing left to do). */
    enum store_durability was = store_set_durability(w->st, STORE_LAZY);
    evidence_flush(w);
    (void)store_set_durability(w->st, was);
    if (w->queue_lost || !worker_durable(w, NULL, 0))
        return false;
    /* The lease last, right before the committing request: this step's page fetch and the
     * writes above may have outlasted it, and a recovered item must not be posted twice. Where
     * the queue's clock is a server's, whose restart ends every lease sooner than this host
     * counts it, the lease is renewed whatever is left of it: the queue's answer is the proof
     * (lazily: a lease lost with a crash of the server ends with its restart anyway). */
    was = store_set_durability(w->st, STORE_LAZY);
    bool held = job_lease(j, store_server_clock(w->st));
    (void)store_set_durability(w->st, was);
    if (!held)
        return false;
    /* Counted once more on this host's clock: a pause of the process since the renewal must
     * not leave the form to go out on a lease that is running out. What remains is the
     * stretch from here to the request's bytes (no I/O of apbot's; at most a new connection's
     * connect): docs/postgresql.md, "A host frozen past its lease". */
    int64_t left = j->lease_until - mono_ms();
    if (left < pol->connect_timeout_ms + RUNNER_LEASE_MARGIN_MS) {
        char why[160];
        snprintf(why, sizeof(why), "item %" PRId64 ": %" PRId64 " ms of its lease left", j->item.id,
                 left);
        runlog_msg(w->r, "warn", "lease too short for the committing request; not sent", why);
        return false;
    }
    j->commit_sent = true;
    return true;
}

/* The committing step saved the document: record it before any follow-up step runs. */
static bool hook_saved(void *ctx, const char *doc)
{
    struct job *j = ctx;
    snprintf(j->doc, sizeof(j->doc), "%s", doc);
    snprintf(j->detail, sizeof(j->detail), "saved as %.100s; the follow-up steps are due", doc);
    if (!job_apply(j, MACHINE_EV_SAVED, false)) /* the post goes on: no next item yet */
        return false;
    return j->item.state == MACHINE_FINISHING;
}

static bool hook_stopping(void *ctx)
{
    struct job *j = ctx;
    return stopping(j->w->r) || !job_lease(j, false);
}

/* A form that is not what the flow describes: one odd page gives the item back, the same in
 * a row RUNNER_FORM_CONFIRM times means the form is gone and stops the run. */
static enum machine_event form_changed(struct job *j, const char *msg)
{
    struct worker *w = j->w;
    if (++w->form_streak < RUNNER_FORM_CONFIRM) {
        runlog_msg(w->r, "warn", "the ERP's page lacks the flow's form; item given back", msg);
        worker_sleep(w, 200);
    } else {
        breaker_trip(w->r, msg);
    }
    return MACHINE_EV_RELEASED;
}

/* The event a post's result is for the item in its state now (posting, or finishing when
 * the saved hook moved it). */
static enum machine_event post_event(struct job *j, const struct erp_post_result *pr)
{
    struct worker *w = j->w;
    bool finishing = j->item.state == MACHINE_FINISHING;

    snprintf(j->detail, sizeof(j->detail), "%s", pr->detail);
    if (pr->retry_after_ms > 0)
        j->retry_after_ms = pr->retry_after_ms;
    if (pr->login_refused) {
        breaker_trip(w->r, "login refused during a post");
        if (finishing)
            return MACHINE_EV_RELEASED;
        return pr->commit_sent ? MACHINE_EV_UNKNOWN : MACHINE_EV_RELEASED;
    }
    if (pr->verdict != DECIDE_SYSTEMIC)
        w->form_streak = 0;
    if (finishing) {
        switch (pr->verdict) {
        case DECIDE_CONFIRMED:
            snprintf(j->doc, sizeof(j->doc), "%s",
                     pr->doc[0]        ? pr->doc
                     : j->item.erp_doc ? j->item.erp_doc
                                       : "");
            return MACHINE_EV_CONFIRMED;
        case DECIDE_REJECTED:
            snprintf(j->reason, sizeof(j->reason), "%s", pr->reason);
            return MACHINE_EV_REJECTED;
        case DECIDE_NEXT:
        case DECIDE_RESTART:
        case DECIDE_RESTART_FOLLOWUPS:
        case DECIDE_SYSTEMIC:
        case DECIDE_SAVED:
        case DECIDE_NOT_SENT:
        case DECIDE_UNKNOWN:
        case DECIDE_ALREADY_EXISTS:
        case DECIDE_FOLLOWUP_FAILED:
        case DECIDE_POST__COUNT:
            if (pr->released)
                return MACHINE_EV_RELEASED;
            return MACHINE_EV_FOLLOWUP_FAILED;
        }
        return MACHINE_EV_FOLLOWUP_FAILED;
    }
    if (pr->commit_sent) {
        w->stats.posts_sent++;
        runmetrics_count(w->r->opt->metrics, RUNMETRICS_POSTS);
    }
    switch (pr->verdict) {
    case DECIDE_CONFIRMED:
        snprintf(j->doc, sizeof(j->doc), "%s", pr->doc);
        return MACHINE_EV_CONFIRMED;
    case DECIDE_REJECTED:
        snprintf(j->reason, sizeof(j->reason), "%s", pr->reason);
        return MACHINE_EV_REJECTED;
    case DECIDE_NOT_SENT:
        if (pr->released)
            return pr->commit_sent ? MACHINE_EV_UNKNOWN : MACHINE_EV_RELEASED;
        return MACHINE_EV_NOT_SENT;
    case DECIDE_ALREADY_EXISTS:
        if (pr->doc[0])
            snprintf(j->doc, sizeof(j->doc), "%s", pr->doc);
        return MACHINE_EV_ALREADY_EXISTS;
    case DECIDE_SYSTEMIC:
        if (pr->commit_sent)
            return MACHINE_EV_UNKNOWN;
        return form_changed(j, pr->detail);
    case DECIDE_SAVED: /* the saved document could not be recorded: find it by lookup */
    case DECIDE_UNKNOWN:
    case DECIDE_FOLLOWUP_FAILED:
    case DECIDE_NEXT:
    case DECIDE_RESTART:
    case DECIDE_RESTART_FOLLOWUPS:
    case DECIDE_POST__COUNT:
        return pr->commit_sent ? MACHINE_EV_UNKNOWN : MACHINE_EV_NOT_SENT;
    }
    return MACHINE_EV_UNKNOWN;
}

/* Logs the session in when it is not; RELEASED (nothing learnt) when that fails. */
static bool job_session(struct job *j)
{
    struct worker *w = j->w;
    if (erp_logged_in(w->erp))
        return true;
    enum login_rc lr = worker_login(w);
    if (lr == LOGIN_OK)
        return true;
    snprintf(j->detail, sizeof(j->detail), "login before the post failed");
    return false;
}

/* posting: the whole post, from its first step; finishing: the follow-up steps on the doc. */
static enum machine_event job_post(struct job *j, enum erp_post_from from)
{
    struct worker *w = j->w;
    char err[APBOT_ERR_LEN];
    struct erp_post_result pr;

    j->commit_sent = false;
    if (!j->inv_ok) {
        snprintf(j->detail, sizeof(j->detail), "the queued payload cannot be read");
        return from == ERP_POST_FROM_START ? MACHINE_EV_NOT_SENT : MACHINE_EV_FOLLOWUP_FAILED;
    }
    if (stopping(w->r) || !job_session(j))
        return MACHINE_EV_RELEASED;
    struct erp_post_hooks hooks = {
        .ctx = j,
        .before_commit = hook_before_commit,
        .saved = hook_saved,
        .stopping = hook_stopping,
    };
    int rc = erp_post_run(w->erp, &j->inv, j->item.key, from,
                          from == ERP_POST_FROM_FOLLOWUPS ? j->item.erp_doc : NULL, &hooks, &pr,
                          err, sizeof(err));
    if (j->lost)
        return MACHINE_EV_RELEASED; /* taken over while in the hooks: drop it */
    if (rc != APBOT_OK) {
        snprintf(j->detail, sizeof(j->detail), "post: %.400s", err);
        return form_changed(j, j->detail);
    }
    return post_event(j, &pr);
}

/* ---- one claimed item ------------------------------------------------------------------- */

/* Drives one claimed item until it leaves the worker's hands. */
void job_run(struct worker *w, struct store_item *it)
{
    struct job j;
    char err[APBOT_ERR_LEN];
    memset(&j, 0, sizeof(j));
    j.w = w;
    j.item = *it;
    memset(it, 0, sizeof(*it)); /* the job owns the row now */
    j.lease_until = j.item.lease_mono;
    invoice_init(&j.inv);
    j.inv_ok = invoice_from_json(j.item.payload, &j.inv, err, sizeof(err)) == APBOT_OK;
    if (!j.inv_ok)
        runlog_msg(w->r, "error", "payload unreadable", err);
    w->item_id = j.item.id;
    w->stats.claims++;
    runmetrics_count(w->r->opt->metrics, RUNMETRICS_CLAIMS);

    /* A finishing item claimed anew is looked up first (its follow-up steps may have gone
     * through before a crash); one that became finishing in this claim runs them at once. */
    bool followups_now = false;
    for (int round = 0; round < RUNNER_JOB_ROUNDS && !j.lost; round++) {
        enum machine_state state = j.item.state;
        enum machine_event ev = MACHINE_EV_RELEASED;
        switch (state) {
        case MACHINE_CHECKING:
        case MACHINE_RECONCILING:
            w->reconciling = state == MACHINE_RECONCILING;
            ev = job_lookup(&j);
            break;
        case MACHINE_FINISHING:
            w->reconciling = !followups_now;
            ev = followups_now ? job_post(&j, ERP_POST_FROM_FOLLOWUPS) : job_lookup(&j);
            break;
        case MACHINE_POSTING:
            w->reconciling = false;
            ev = job_post(&j, ERP_POST_FROM_START);
            break;
        case MACHINE_NEW:
        case MACHINE_COMPLETED:
        case MACHINE_BUSINESS_EXCEPTION:
        case MACHINE_MANUAL_REVIEW:
        case MACHINE_STATE__COUNT:
        case MACHINE_STATE_INVALID:
            goto out;
        }
        if (ev == MACHINE_EV_RELEASED && j.item.state == MACHINE_POSTING && j.commit_sent)
            ev = MACHINE_EV_UNKNOWN; /* never hand back what may have been booked */
        enum machine_state before = j.item.state;
        if (!job_apply(&j, ev, true))
            break;
        /* Follow-up steps run at once after a save or an unfinished hit in this claim. */
        followups_now = j.item.state == MACHINE_FINISHING &&
                        (ev == MACHINE_EV_FOUND_UNFINISHED || before != MACHINE_FINISHING);
    }
out:
    evidence_flush(w);
    w->item_id = 0;
    w->reconciling = false;
    invoice_done(&j.inv);
    store_item_done(&j.item);
}
