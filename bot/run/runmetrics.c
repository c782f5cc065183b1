/*
 * runmetrics.c - the figures `apbot run --metrics-file` keeps for operations: ERP requests by
 * step and outcome, their latency as a histogram, overload and time-out answers, the
 * concurrency limit, the circuit breaker, posts, reconciliations, logins, the run's start, end
 * and exit code. The runner's parts count into it (runmetrics.h) under one mutex (an exchange
 * with the ERP takes milliseconds; a counter a few nanoseconds); the calling thread writes the
 * node exporter's textfile every few seconds, and the command once more at the end with its
 * exit code. The exposition is a pure function of a snapshot (base/metrics.c writes it).
 */
#include "run/runmetrics.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/mem.h"
#include "apbot/store.h"
#include "base/unittest.h"

#ifndef APBOT_VERSION
#define APBOT_VERSION "0"
#endif

struct runner_metrics {
    pthread_mutex_t mu;
    struct runmetrics_snap s;
};

/* Typical ERP answers take 50 ms to a few seconds; month-end's slow posts up to a minute. */
const int64_t runmetrics_bounds_ms[RUNMETRICS_BUCKETS] = {
    5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000,
};

/* What an exchange can mean (erp.h's outcomes and decide_post's verdicts); "other" last. */
static const char *const outcome_names[] = {
    "answered",  "logged-in",      "refused",           "session-expired",
    "failed",    "found",          "found-unfinished",  "not-found",
    "next",      "restart",        "restart-followups", "systemic",
    "confirmed", "saved",          "rejected",          "not-sent",
    "unknown",   "already-exists", "followup-failed",   "other",
};
_Static_assert(sizeof(outcome_names) / sizeof(outcome_names[0]) == RUNMETRICS_OUTCOMES,
               "RUNMETRICS_OUTCOMES counts the outcome names");

const char *runmetrics_outcome_name(size_t i)
{
    return i < RUNMETRICS_OUTCOMES ? outcome_names[i] : "other";
}

static size_t outcome_index(const char *outcome)
{
    for (size_t i = 0; outcome && i + 1 < RUNMETRICS_OUTCOMES; i++)
        if (strcmp(outcome, outcome_names[i]) == 0)
            return i;
    return RUNMETRICS_OUTCOMES - 1;
}

/* ---- counting ----------------------------------------------------------------------------- */

struct runner_metrics *runner_metrics_new(void)
{
    struct runner_metrics *m = apbot_xcalloc(1, sizeof(*m));
    pthread_mutex_init(&m->mu, NULL);
    m->s.start_ms = store_now_ms();
    m->s.exit_code = -1;
    snprintf(m->s.steps[RUNMETRICS_STEPS].name, RUNMETRICS_STEP_LEN, "other");
    return m;
}

void runner_metrics_free(struct runner_metrics *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

/* The step's slot (under m->mu): its own while fewer than RUNMETRICS_STEPS are named, else
 * "other". */
static struct runmetrics_step *step_of(struct runner_metrics *m, const char *step)
{
    struct runmetrics_snap *s = &m->s;
    if (!step || !*step)
        step = "?";
    for (size_t i = 0; i < s->n_steps; i++)
        if (strncmp(s->steps[i].name, step, RUNMETRICS_STEP_LEN - 1) == 0 &&
            strlen(step) < RUNMETRICS_STEP_LEN)
            return &s->steps[i];
    if (s->n_steps == RUNMETRICS_STEPS || strlen(step) >= RUNMETRICS_STEP_LEN)
        return &s->steps[RUNMETRICS_STEPS];
    struct runmetrics_step *st = &s->steps[s->n_steps++];
    snprintf(st->name, sizeof(st->name), "%s", step);
    return st;
}

static void observe(struct runmetrics_step *st, size_t outcome, int64_t elapsed_ms)
{
    if (elapsed_ms < 0)
        elapsed_ms = 0;
    st->outcomes[outcome]++;
    st->count++;
    st->sum_ms += elapsed_ms;
    for (size_t b = 0; b < RUNMETRICS_BUCKETS; b++)
        if (elapsed_ms <= runmetrics_bounds_ms[b]) {
            st->buckets[b]++;
            break;
        }
}

void runmetrics_exchange(struct runner_metrics *m, const char *step, const char *outcome,
                         int64_t elapsed_ms, enum limiter_signal sig)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    observe(step_of(m, step), outcome_index(outcome), elapsed_ms);
    if (sig == LIMITER_OVERLOAD)
        m->s.counters[RUNMETRICS_OVERLOAD]++;
    else if (sig == LIMITER_TIMEOUT)
        m->s.counters[RUNMETRICS_TIMEOUTS]++;
    pthread_mutex_unlock(&m->mu);
}

void runmetrics_probe(struct runner_metrics *m, const char *transport)
{
    if (!m)
        return;
    const char *outcome = "other";
    if (transport && strncmp(transport, "answered", 8) == 0)
        outcome = "answered";
    else if (transport && strncmp(transport, "not-sent", 8) == 0)
        outcome = "not-sent";
    else if (transport && strncmp(transport, "unknown", 7) == 0)
        outcome = "unknown";
    pthread_mutex_lock(&m->mu);
    struct runmetrics_step *st = step_of(m, "probe");
    st->outcomes[outcome_index(outcome)]++; /* no latency: a probe is no ERP work */
    pthread_mutex_unlock(&m->mu);
}

void runmetrics_count(struct runner_metrics *m, enum runmetrics_counter c)
{
    if (!m || (int)c < 0 || c >= RUNMETRICS_COUNTER__COUNT)
        return;
    pthread_mutex_lock(&m->mu);
    m->s.counters[c]++;
    pthread_mutex_unlock(&m->mu);
}

void runmetrics_finished(struct runner_metrics *m, enum machine_state to)
{
    int i = to == MACHINE_COMPLETED            ? 0
            : to == MACHINE_BUSINESS_EXCEPTION ? 1
            : to == MACHINE_MANUAL_REVIEW      ? 2
                                               : -1;
    if (!m || i < 0)
        return;
    pthread_mutex_lock(&m->mu);
    m->s.finished[i]++;
    pthread_mutex_unlock(&m->mu);
}

void runmetrics_live(struct runner_metrics *m, int sessions, int limit,
                     enum runmetrics_breaker breaker, int64_t settle_ms, int64_t max_late_ms)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->s.sessions = sessions;
    m->s.limit = limit;
    m->s.breaker = breaker;
    m->s.settle_ms = settle_ms;
    m->s.max_late_ms = max_late_ms;
    pthread_mutex_unlock(&m->mu);
}

void runmetrics_queue(struct runner_metrics *m, int down, int64_t outage_ms)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->s.queue_down = down;
    m->s.queue_outage_ms = outage_ms;
    pthread_mutex_unlock(&m->mu);
}

UNITTEST void runmetrics_snapshot(struct runner_metrics *m, struct runmetrics_snap *ret)
{
    pthread_mutex_lock(&m->mu);
    *ret = m->s;
    pthread_mutex_unlock(&m->mu);
}

/* ---- the exposition ----------------------------------------------------------------------- */

static const struct {
    enum runmetrics_counter c;
    const char *name, *help;
} counter_families[] = {
    {RUNMETRICS_OVERLOAD, "apbot_erp_overload_answers",
     "ERP answers that refused for load (HTTP 429 or 503)."},
    {RUNMETRICS_TIMEOUTS, "apbot_erp_timeouts", "ERP requests that timed out without an answer."},
    {RUNMETRICS_LOGINS, "apbot_run_logins", "Successful logins to the ERP."},
    {RUNMETRICS_CLAIMS, "apbot_run_claims", "Items claimed from the queue."},
    {RUNMETRICS_LOOKUPS, "apbot_run_lookups", "Lookups of an item's key in the ERP."},
    {RUNMETRICS_RECONCILIATIONS, "apbot_run_reconciliations",
     "Lookups that reconciled an ambiguous outcome."},
    {RUNMETRICS_POSTS, "apbot_run_posts", "Committing requests sent to the ERP."},
    {RUNMETRICS_BREAKER_PAUSES, "apbot_run_breaker_pauses",
     "Times the circuit breaker paused claims because the ERP did not answer."},
    {RUNMETRICS_BREAKER_TRIPS, "apbot_run_breaker_trips",
     "Times the circuit breaker stopped the run."},
    {RUNMETRICS_QUEUE_OUTAGES, "apbot_run_queue_outages",
     "Times the queue's database became unavailable (a restart, failover, cut connection)."},
    {RUNMETRICS_QUEUE_LOST, "apbot_run_queue_connections_lost",
     "Connections to the queue's database lost (an outage may lose several)."},
};
_Static_assert(sizeof(counter_families) / sizeof(counter_families[0]) == RUNMETRICS_COUNTER__COUNT,
               "every counter needs a family");

static const char *const breaker_names[] = {
    [RUNMETRICS_BREAKER_CLOSED] = "closed",
    [RUNMETRICS_BREAKER_PROBING] = "probing",
    [RUNMETRICS_BREAKER_TRIPPED] = "tripped",
};
_Static_assert(sizeof(breaker_names) / sizeof(breaker_names[0]) == RUNMETRICS_BREAKER__COUNT,
               "every breaker state needs a name");

static const char *const finished_names[3] = {"completed", "business-exception", "manual-review"};

/* The steps in use, "other" last when it counted anything. */
static void render_requests(struct metrics_writer *w, const struct runmetrics_snap *s)
{
    metrics_family(w, "apbot_erp_requests", METRICS_COUNTER, NULL,
                   "ERP requests by step and by what the answer meant.");
    for (size_t i = 0; i <= RUNMETRICS_STEPS; i++) {
        if (i >= s->n_steps && i < RUNMETRICS_STEPS)
            continue;
        const struct runmetrics_step *st = &s->steps[i];
        for (size_t o = 0; o < RUNMETRICS_OUTCOMES; o++) {
            if (!st->outcomes[o])
                continue;
            const char *const labels[] = {"step", st->name, "outcome", outcome_names[o], NULL};
            metrics_sample(w, labels, st->outcomes[o], 0);
        }
    }
    metrics_family(w, "apbot_erp_request_duration_seconds", METRICS_HISTOGRAM, "seconds",
                   "ERP request latency, from the request to the end of the answer, by step.");
    for (size_t i = 0; i <= RUNMETRICS_STEPS; i++) {
        if (i >= s->n_steps && i < RUNMETRICS_STEPS)
            continue;
        const struct runmetrics_step *st = &s->steps[i];
        if (!st->count)
            continue; /* probes: counted, not timed */
        int64_t cum[RUNMETRICS_BUCKETS], acc = 0;
        for (size_t b = 0; b < RUNMETRICS_BUCKETS; b++)
            cum[b] = acc += st->buckets[b];
        const char *const labels[] = {"step", st->name, NULL};
        metrics_histogram(w, labels, runmetrics_bounds_ms, cum, RUNMETRICS_BUCKETS, st->count,
                          st->sum_ms, 3);
    }
}

UNITTEST int runmetrics_render(const struct runmetrics_snap *s, enum metrics_format fmt,
                               struct apbot_buf *out)
{
    struct metrics_writer w;
    const char *const version[] = {"version", APBOT_VERSION, NULL};

    metrics_init(&w, out, fmt);
    metrics_family(&w, "apbot_build", METRICS_INFO, NULL, "The apbot that wrote these figures.");
    metrics_sample(&w, version, 1, 0);
    metrics_family(&w, "apbot_run_start_time_seconds", METRICS_GAUGE, "seconds",
                   "When the run started, Unix time.");
    metrics_sample(&w, NULL, s->start_ms, 3);
    metrics_family(&w, "apbot_run_running", METRICS_GAUGE, NULL,
                   "1 while the run goes on, 0 once it ended.");
    metrics_sample(&w, NULL, s->exit_code < 0 ? 1 : 0, 0);
    if (s->exit_code >= 0) {
        metrics_family(&w, "apbot_run_end_time_seconds", METRICS_GAUGE, "seconds",
                       "When the run ended, Unix time.");
        metrics_sample(&w, NULL, s->end_ms, 3);
        metrics_family(
            &w, "apbot_run_exit_code", METRICS_GAUGE, NULL,
            "The exit code of apbot run (0 ok, 1 error, 4 circuit breaker, 8 queue unavailable).");
        metrics_sample(&w, NULL, s->exit_code, 0);
    }
    render_requests(&w, s);
    for (size_t i = 0; i < RUNMETRICS_COUNTER__COUNT; i++) {
        metrics_family(&w, counter_families[i].name, METRICS_COUNTER, NULL,
                       counter_families[i].help);
        metrics_sample(&w, NULL, s->counters[counter_families[i].c], 0);
    }
    metrics_family(&w, "apbot_run_items", METRICS_COUNTER, NULL,
                   "Items this run moved into a final state.");
    for (size_t i = 0; i < 3; i++) {
        const char *const labels[] = {"state", finished_names[i], NULL};
        metrics_sample(&w, labels, s->finished[i], 0);
    }
    metrics_family(&w, "apbot_run_sessions", METRICS_GAUGE, NULL,
                   "ERP sessions (workers) of the run.");
    metrics_sample(&w, NULL, s->sessions, 0);
    metrics_family(&w, "apbot_run_sessions_limit", METRICS_GAUGE, NULL,
                   "ERP sessions allowed to work at once now (the concurrency limit).");
    metrics_sample(&w, NULL, s->limit, 0);
    metrics_family(&w, "apbot_run_breaker_state", METRICS_GAUGE, NULL,
                   "The circuit breaker: 1 for the state it is in.");
    for (size_t i = 0; i < RUNMETRICS_BREAKER__COUNT; i++) {
        const char *const labels[] = {"state", breaker_names[i], NULL};
        metrics_sample(&w, labels, s->breaker == (enum runmetrics_breaker)i ? 1 : 0, 0);
    }
    metrics_family(&w, "apbot_run_queue_available", METRICS_GAUGE, NULL,
                   "1 while every connection to the queue works, 0 during an outage.");
    metrics_sample(&w, NULL, s->queue_down > 0 ? 0 : 1, 0);
    metrics_family(&w, "apbot_run_queue_outage_seconds", METRICS_COUNTER, "seconds",
                   "Outages of the queue ridden out in this run, their total length.");
    metrics_sample(&w, NULL, s->queue_outage_ms, 3);
    metrics_family(&w, "apbot_settle_delay_seconds", METRICS_GAUGE, "seconds",
                   "The settle delay in force before an ambiguous outcome is reconciled.");
    metrics_sample(&w, NULL, s->settle_ms, 3);
    metrics_family(&w, "apbot_late_commit_max_seconds", METRICS_GAUGE, "seconds",
                   "The longest the ERP was seen to commit after apbot gave up on a post.");
    metrics_sample(&w, NULL, s->max_late_ms, 3);
    return metrics_end(&w);
}

int runner_metrics_write(struct runner_metrics *m, const char *path, int exit_code, char *err,
                         size_t errlen)
{
    struct runmetrics_snap *s;
    struct apbot_buf b;
    int rc;

    if (!m || !path)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "metrics: nothing to write");
    s = apbot_xmalloc(sizeof(*s));
    pthread_mutex_lock(&m->mu);
    if (exit_code >= 0 && m->s.exit_code < 0) {
        m->s.exit_code = exit_code;
        m->s.end_ms = store_now_ms();
        if (m->s.breaker == RUNMETRICS_BREAKER_PROBING)
            m->s.breaker = RUNMETRICS_BREAKER_CLOSED; /* nothing probes any more */
    }
    *s = m->s;
    pthread_mutex_unlock(&m->mu);
    apbot_buf_init(&b, RUNMETRICS_MAX_BYTES);
    rc = runmetrics_render(s, METRICS_PROMETHEUS, &b);
    if (rc != APBOT_OK)
        rc = apbot_fail(err, errlen, rc, "metrics: more than %d bytes", RUNMETRICS_MAX_BYTES);
    else
        rc = metrics_write_file(path, apbot_buf_str(&b), b.len, err, errlen);
    apbot_buf_done(&b);
    free(s);
    return rc;
}
