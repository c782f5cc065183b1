/*
 * runner.h - `apbot run`: drives queued items through the state machine against one ERP.
 *
 * The runner owns the side effects machine_next() leaves out: the check-before-post lookup,
 * the multi-step web form, the durable intent before the form is sent, reconciliation after
 * every ambiguous outcome, backoff with full jitter, crash recovery of expired leases and a
 * circuit breaker that stops the run when the ERP as a whole is unusable. It runs one worker
 * thread per ERP session, each with its own store connection and ERP session; the calling
 * thread watches the clock, the cancel flag, the breaker and the progress line. Every state
 * change goes through the one state setter (transition_apply: machine_next() and the store);
 * every ERP exchange of an item leaves evidence. The ERP credentials come from APBOT_ERP_USER
 * and APBOT_ERP_PASSWORD only, never from options or files, and are masked in evidence
 * excerpts and logs.
 */
#ifndef APBOT_RUNNER_H
#define APBOT_RUNNER_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "apbot/error.h"

struct flow;
struct store;

/* Why a run stopped. If you add one, add its name in runner.c. */
enum runner_stop {
    RUNNER_STOP_EMPTY = 0, /* --until-empty: nothing pending any more */
    RUNNER_STOP_TIME,      /* --max-seconds reached */
    RUNNER_STOP_CANCEL,    /* the cancel flag was raised (SIGINT/SIGTERM) */
    RUNNER_STOP_SYSTEMIC,  /* circuit breaker: login refused, form missing, ERP unreachable */
    RUNNER_STOP_ERROR,     /* the run itself failed (flow, database, setup) */
    RUNNER_STOP_QUEUE,     /* the queue stayed unavailable longer than queue_outage_max_ms */
    RUNNER_STOP__COUNT
};
const char *runner_stop_name(enum runner_stop s); /* "empty", "time", ... */

/* What a run counts for operations (runmetrics.c): made by the caller, fed by the run, written
 * as the node exporter's textfile (runner_metrics_write). */
struct runner_metrics;

/*
 * What to run. Zero means "the flow's value" for every number below (a zeroed struct plus
 * flow_path and db_path is a valid run); negative numbers are refused.
 */
struct runner_options {
    const char *flow_path;         /* flow XML, required */
    const char *erp_url;           /* overrides the flow's base URL, or NULL */
    const char *db_path;           /* queue database, required */
    int concurrency;               /* ERP sessions working at once; 0 = auto: an adaptive limit
                                    * (limiter.h) up to the flow's max_sessions. Never more
                                    * than the flow's max_sessions. */
    bool until_empty;              /* stop once no item is new/checking/posting/reconciling */
    long max_seconds;              /* stop after this long (0 = no limit) */
    const char *owner;             /* lease owner id; NULL = "host:pid:random" */
    volatile sig_atomic_t *cancel; /* non-NULL: a non-zero value stops the run */
    FILE *log;                     /* one key=value line per transition and run event, or NULL */
    bool log_json;                 /* those lines as JSON objects with the same fields */
    bool progress;                 /* redraw a progress line on stderr, with warnings and
                                    * errors scrolled above it (a terminal) */

    /* What the run counts for operations, when metrics is non-NULL (it outlives the run); with
     * metrics_path, the textfile the run rewrites every metrics_every_ms (0 = 5000). */
    struct runner_metrics *metrics;
    const char *metrics_path;
    long metrics_every_ms;

    /* Policy overrides, mostly for tests (0 = the flow's value). */
    long settle_ms, lease_ms, timeout_ms, connect_timeout_ms;
    long backoff_base_ms, backoff_cap_ms;
    int max_posts, max_cycles, max_attempts;
    uint64_t seed; /* jitter PRNG seed (0 = /dev/urandom) */
    long poll_ms;  /* idle poll of the queue (0 = 200 ms) */
    /* Circuit breaker on an unreachable ERP: trips after breaker_failures consecutive
     * unanswered exchanges (across workers) spanning at least breaker_window_ms
     * (0 = 10 and 30000). */
    int breaker_failures;
    long breaker_window_ms;
    /* A queue that cannot be reached, or a connection to it that was lost (APBOT_E_UNAVAIL,
     * PostgreSQL), is ridden out: the connection's worker claims nothing, leaves its items as
     * the queue last recorded them and reconnects with capped, jittered backoff; the run stops
     * (RUNNER_STOP_QUEUE) only when a connection stays lost this long (0 = 5 minutes). */
    long queue_outage_max_ms;
};

/* What a run did. Filled even when runner_run fails (as far as it got). */
struct runner_stats {
    enum runner_stop stop;
    int workers;         /* ERP sessions used */
    int64_t claims;      /* items claimed */
    int64_t transitions; /* state changes applied by this run (claims included) */
    int64_t lookups;     /* lookups answered or failed */
    int64_t posts_sent;  /* committing steps put on the wire */
    int64_t exchanges;   /* HTTP exchanges with the ERP */
    int64_t logins;      /* successful logins */
    int64_t syncs;       /* disk syncs the workers ran to make their changes durable */
    int64_t completed, business_exception, manual_review; /* entered by this run */
    int64_t pending; /* new/checking/posting/reconciling/finishing at the end */
    int64_t elapsed_ms;
    int limit;                  /* sessions allowed to work at the end (the adaptive limit) */
    int64_t limit_changes;      /* times the adaptive limit changed */
    int64_t settle_ms;          /* the settle delay in force at the end (raised by late commits) */
    int64_t max_late_commit_ms; /* the longest late commit the ERP was seen to make (0: none) */
    int64_t queue_outages;      /* times the queue became unavailable (the first connection of
                                 * the run lost, or none to be had at the start) */
    int64_t queue_lost;         /* connections to the queue lost (each reconnected, or not) */
    int64_t queue_outage_ms;    /* time with at least one connection to the queue lost */
    char message[512];          /* why it stopped, for the operator (breaker reason, error) */
};

/*
 * Runs until the queue is empty (until_empty), max_seconds pass, *cancel is raised or the
 * circuit breaker trips. Returns APBOT_OK for the first three (ret->stop says which),
 * APBOT_E_SYSTEMIC when the breaker tripped (in-flight items given back: see docs/design.md),
 * APBOT_E_UNAVAIL when the queue stayed unavailable past queue_outage_max_ms (every item as
 * the queue last recorded it), or another error for a failed setup or database (ret->message
 * says why). The caller must have called apbot_global_init(). ret may be NULL.
 */
int runner_run(const struct runner_options *opt, struct runner_stats *ret) APBOT_MUST_USE;

/*
 * The run's figures for operations. runner_metrics_new starts the clock of the run (its start
 * time); NULL is fine for free. runner_metrics_write writes them to path in the Prometheus text
 * format, as the node exporter's textfile collector reads it, whole (a new file renamed over
 * the old one); exit_code >= 0 ends the run's figures (end time, exit code; once). Returns
 * APBOT_OK or APBOT_E_IO with the file and why in err. Safe while a run counts into m.
 */
struct runner_metrics *runner_metrics_new(void);
void runner_metrics_free(struct runner_metrics *m);
int runner_metrics_write(struct runner_metrics *m, const char *path, int exit_code, char *err,
                         size_t errlen) APBOT_MUST_USE;

/*
 * The settle delay in force for a flow whose policy says policy_settle_ms when the ERP was
 * seen committing up to max_late_ms after apbot gave up: once that reaches half the delay,
 * twice the late commit (never less than the policy). Pure; the runner and `apbot status`
 * share it.
 */
int64_t runner_settle_in_force(int64_t policy_settle_ms, int64_t max_late_ms);
/*
 * The settle delay in force for flow f on queue st, as its next run would start with: the
 * flow's policy (or the default) raised by the late commits the queue keeps for it (none when
 * they cannot be read). *ret_policy_ms and *ret_max_late_ms, when not NULL, get the two parts.
 */
int64_t runner_settle_of(struct store *st, const struct flow *f, int64_t *ret_policy_ms,
                         int64_t *ret_max_late_ms);

/* How a run measures the ERP's late commits for a flow (docs/operations.md, "Late commits"). */
enum runner_settle_method {
    RUNNER_SETTLE_BOOKING_TIME = 0, /* the lookup reads a booking time ("booked"): the time
                                     * it shows minus the moment apbot gave up */
    RUNNER_SETTLE_LOOKUP_BOUND,     /* it reads none: after an unknown outcome a first look at
                                     * half the settle delay; when it misses the document and a
                                     * later lookup finds it, that lookup's end minus the give-up
                                     * bounds the late commit from above */
};
/* The method in force for flow f: booking-time when its lookup (table or detail page) reads a
 * column named "booked", else lookup-bound. Pure. */
enum runner_settle_method runner_settle_method(const struct flow *f);
/* "booking-time", "lookup-bound". Static storage. */
const char *runner_settle_method_name(enum runner_settle_method m);

#endif
