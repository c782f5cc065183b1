/*
 * breaker.c - the two ways a run stops from inside: the circuit breaker, when the ERP as a
 * whole is unusable (APBOT_E_SYSTEMIC), and the run's failure (the queue, a worker's set-up).
 *
 * The circuit breaker trips on a refused login (one refusal across all sessions: until a
 * login has succeeded, sessions log in one at a time), the entry form or a field missing
 * three times in a row, or an unreachable ERP: breaker_failures consecutive unanswered
 * exchanges across workers spanning at least breaker_window_ms. After a few unanswered
 * exchanges the workers stop claiming and probe instead, so a short outage is ridden out
 * without spending items' budgets. In-flight items are handed back with the `released` event
 * (or `unknown` once the committing request may have gone out).
 *
 * The queue's outages are counted here too: a connection lost (a worker's or the calling
 * thread's) begins an outage if none was under way, the last one back ends it; a connection
 * that stays lost past the bound stops the run (RUNNER_STOP_QUEUE).
 */
#include "run/runner-int.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "run/runmetrics.h"

#define RUNNER_SUSPECT_FAILURES 3 /* unanswered in a row: stop claiming, probe instead */

void breaker_trip(struct runner *r, const char *msg)
{
    pthread_mutex_lock(&r->mu);
    bool first = !r->tripped;
    if (first) {
        r->tripped = true;
        snprintf(r->trip_msg, sizeof(r->trip_msg), "%.500s", msg);
    }
    pthread_mutex_unlock(&r->mu);
    if (first)
        runmetrics_count(r->opt->metrics, RUNMETRICS_BREAKER_TRIPS);
    atomic_store(&r->stop, true);
}

static void breaker_answered(struct runner *r)
{
    pthread_mutex_lock(&r->mu);
    r->unanswered = 0;
    pthread_mutex_unlock(&r->mu);
}

/* One more unanswered exchange; trips when the run of them is long in count and time. */
static void breaker_unanswered(struct runner *r, const char *what)
{
    char msg[512];
    bool trip = false, first_suspect = false;
    int64_t now = mono_ms();
    pthread_mutex_lock(&r->mu);
    if (r->unanswered++ == 0)
        r->first_unanswered_mono = now;
    first_suspect = r->unanswered == RUNNER_SUSPECT_FAILURES;
    snprintf(r->last_unanswered, sizeof(r->last_unanswered), "%s", what ? what : "");
    if (r->unanswered >= r->pol.breaker_failures &&
        now - r->first_unanswered_mono >= r->pol.breaker_window_ms) {
        trip = true;
        snprintf(msg, sizeof(msg),
                 "ERP unreachable: %d exchanges in a row unanswered over %" PRId64 " s (last: %s)",
                 r->unanswered, (now - r->first_unanswered_mono) / 1000, r->last_unanswered);
    }
    pthread_mutex_unlock(&r->mu);
    if (first_suspect) {
        runmetrics_count(r->opt->metrics, RUNMETRICS_BREAKER_PAUSES);
        runlog_msg(r, "warn", "the ERP does not answer; pausing claims and probing",
                   what ? what : "");
    }
    if (trip)
        breaker_trip(r, msg);
}

bool breaker_suspect(struct runner *r)
{
    pthread_mutex_lock(&r->mu);
    bool s = r->unanswered >= RUNNER_SUSPECT_FAILURES;
    pthread_mutex_unlock(&r->mu);
    return s;
}

/* Counts one exchange by its transport name ("answered", "not-sent: ...", "unknown: ..."). */
void breaker_count(struct runner *r, const char *transport)
{
    if (stopping(r))
        return; /* our own abort, not the ERP's silence */
    if (transport && strncmp(transport, "answered", 8) == 0) {
        pthread_mutex_lock(&r->mu);
        bool was = r->unanswered >= RUNNER_SUSPECT_FAILURES;
        pthread_mutex_unlock(&r->mu);
        breaker_answered(r);
        if (was)
            runlog_msg(r, "warn", "the ERP answers again; claiming resumes", NULL);
    } else {
        breaker_unanswered(r, transport);
    }
}

void runner_fail(struct runner *r, const char *msg)
{
    pthread_mutex_lock(&r->mu);
    if (!r->failed) {
        r->failed = true;
        snprintf(r->fail_msg, sizeof(r->fail_msg), "%s", msg);
    }
    pthread_mutex_unlock(&r->mu);
    atomic_store(&r->stop, true);
}

void runner_queue_down(struct runner *r, const char *err)
{
    char detail[700];
    pthread_mutex_lock(&r->mu);
    bool first = r->queue_down++ == 0;
    if (first) {
        r->outage_since = mono_ms();
        r->totals.queue_outages++;
    }
    r->totals.queue_lost++;
    int down = r->queue_down;
    int64_t outage_ms = r->totals.queue_outage_ms;
    pthread_mutex_unlock(&r->mu);
    if (first)
        runmetrics_count(r->opt->metrics, RUNMETRICS_QUEUE_OUTAGES);
    runmetrics_count(r->opt->metrics, RUNMETRICS_QUEUE_LOST);
    runmetrics_queue(r->opt->metrics, down, outage_ms);
    if (!first)
        return;
    snprintf(detail, sizeof(detail),
             "%.400s; no claims on a lost connection, every item stays as the queue recorded "
             "it; reconnecting for up to %ld s",
             err ? err : "", r->pol.outage_max_ms / 1000);
    runlog_msg(r, "warn", "queue unavailable", detail);
}

void runner_queue_up(struct runner *r)
{
    char detail[160];
    int64_t lasted = -1;
    pthread_mutex_lock(&r->mu);
    if (r->queue_down > 0 && --r->queue_down == 0) {
        lasted = mono_ms() - r->outage_since;
        r->totals.queue_outage_ms += lasted;
    }
    int64_t lost = r->totals.queue_lost;
    int down = r->queue_down;
    int64_t outage_ms = r->totals.queue_outage_ms;
    pthread_mutex_unlock(&r->mu);
    runmetrics_queue(r->opt->metrics, down, outage_ms);
    if (lasted < 0)
        return;
    snprintf(detail, sizeof(detail),
             "after %" PRId64 " ms; connections lost so far in this run: %" PRId64, lasted, lost);
    runlog_msg(r, "warn", "queue available again", detail);
}

void runner_queue_fail(struct runner *r, const char *err)
{
    pthread_mutex_lock(&r->mu);
    bool first = !r->queue_failed;
    if (first) {
        r->queue_failed = true;
        snprintf(r->queue_msg, sizeof(r->queue_msg),
                 "the queue was unavailable for longer than %ld s (last: %.400s)",
                 r->pol.outage_max_ms / 1000, err ? err : "");
    }
    pthread_mutex_unlock(&r->mu);
    atomic_store(&r->stop, true);
    if (first)
        runlog_msg(r, "error", "queue unavailable for too long; stopping", err);
}
