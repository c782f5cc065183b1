/*
 * runmetrics.h - what `apbot run` counts for operations (runner.h: struct runner_metrics), and
 * how the runner's parts feed it. Every function here takes a NULL metrics and does nothing:
 * a run without --metrics-file pays one pointer test per exchange.
 *
 * Labels stay bounded whatever the ERP or the queue hold: a step is one of the flow's step
 * names or "login", "lookup", "detail", "list", "resolve", "probe" (at most RUNMETRICS_STEPS
 * of them, the rest counted under "other"), an outcome one of a fixed list (anything else is
 * "other"), a state one of the three final ones. No key, vendor, document or URL is ever a
 * label.
 */
#ifndef APBOT_RUN_RUNMETRICS_H
#define APBOT_RUN_RUNMETRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "apbot/buf.h"
#include "apbot/machine.h"
#include "apbot/runner.h"
#include "base/metrics.h"
#include "run/limiter.h"

#define RUNMETRICS_STEPS 32 /* step labels told apart; more share "other" */
#define RUNMETRICS_STEP_LEN 48
#define RUNMETRICS_BUCKETS 14 /* latency buckets, without +Inf */
#define RUNMETRICS_OUTCOMES 20
#define RUNMETRICS_MAX_BYTES (1024 * 1024) /* the exposition at most */

/* Counters of the run. If you add one, add its family in runmetrics.c's counter table. */
enum runmetrics_counter {
    RUNMETRICS_LOGINS = 0,      /* successful logins */
    RUNMETRICS_CLAIMS,          /* items claimed */
    RUNMETRICS_LOOKUPS,         /* lookups made (checking, reconciling, finishing) */
    RUNMETRICS_RECONCILIATIONS, /* of those, reconciliations of an ambiguous outcome */
    RUNMETRICS_POSTS,           /* committing requests put on the wire */
    RUNMETRICS_OVERLOAD,        /* answers 429 or 503 */
    RUNMETRICS_TIMEOUTS,        /* exchanges that timed out */
    RUNMETRICS_BREAKER_PAUSES,  /* times the breaker paused claims (the ERP went silent) */
    RUNMETRICS_BREAKER_TRIPS,   /* times the breaker stopped the run */
    RUNMETRICS_QUEUE_OUTAGES,   /* times the queue became unavailable (all connections) */
    RUNMETRICS_QUEUE_LOST,      /* connections to the queue lost (one outage may lose several) */
    RUNMETRICS_COUNTER__COUNT
};

/* The circuit breaker as the metrics show it. */
enum runmetrics_breaker {
    RUNMETRICS_BREAKER_CLOSED = 0, /* claiming */
    RUNMETRICS_BREAKER_PROBING,    /* the ERP seems silent: no claims, probes */
    RUNMETRICS_BREAKER_TRIPPED,    /* the run stopped as systemic */
    RUNMETRICS_BREAKER__COUNT
};

/* One step label's figures. */
struct runmetrics_step {
    char name[RUNMETRICS_STEP_LEN];
    int64_t outcomes[RUNMETRICS_OUTCOMES]; /* requests per outcome (runmetrics_outcome_name) */
    int64_t buckets[RUNMETRICS_BUCKETS];   /* observations <= each bound (not cumulative) */
    int64_t count, sum_ms;                 /* every observation, and their total */
};

/* The figures at one moment: a plain copy, what the pure renderer reads. */
struct runmetrics_snap {
    int64_t start_ms; /* wall */
    int64_t end_ms;   /* wall, 0 while the run goes on */
    int exit_code;    /* the command's exit code, -1 while the run goes on */
    struct runmetrics_step steps[RUNMETRICS_STEPS + 1]; /* the last: "other" */
    size_t n_steps;                                     /* named steps in use */
    int64_t counters[RUNMETRICS_COUNTER__COUNT];
    int64_t finished[3]; /* items moved to completed, business-exception, manual-review */
    int sessions, limit; /* workers, and the sessions allowed to work now */
    enum runmetrics_breaker breaker;
    int64_t settle_ms, max_late_ms;
    int queue_down;          /* connections to the queue lost and not back now */
    int64_t queue_outage_ms; /* outages ridden out so far, their total length */
};

/* The latency buckets' upper bounds, ms. */
extern const int64_t runmetrics_bounds_ms[RUNMETRICS_BUCKETS];

/* One ERP exchange: step and outcome as the session reported them, its latency, and what it
 * said of the ERP's load. */
void runmetrics_exchange(struct runner_metrics *m, const char *step, const char *outcome,
                         int64_t elapsed_ms, enum limiter_signal sig);
/* One probe of a silent ERP, by its transport ("answered", "not-sent: ...", "unknown: ..."). */
void runmetrics_probe(struct runner_metrics *m, const char *transport);
/* One more of a counter. */
void runmetrics_count(struct runner_metrics *m, enum runmetrics_counter c);
/* An item this run moved to state `to` (counted when final). */
void runmetrics_finished(struct runner_metrics *m, enum machine_state to);
/* The run's gauges now. */
void runmetrics_live(struct runner_metrics *m, int sessions, int limit,
                     enum runmetrics_breaker breaker, int64_t settle_ms, int64_t max_late_ms);

/* The queue's state now: connections lost and not back, and the outages' total so far. */
void runmetrics_queue(struct runner_metrics *m, int down, int64_t outage_ms);

/* "answered", ..., "other" (index < RUNMETRICS_OUTCOMES). */
const char *runmetrics_outcome_name(size_t i);

#ifdef APBOT_UNITTEST /* static in the product (base/unittest.h) */
/* Writes the exposition of s in fmt into out. Pure. Returns the writer's result. */
int runmetrics_render(const struct runmetrics_snap *s, enum metrics_format fmt,
                      struct apbot_buf *out);
/* A copy of m's figures now. */
void runmetrics_snapshot(struct runner_metrics *m, struct runmetrics_snap *ret);
#endif

#endif
