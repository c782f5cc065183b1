/*
 * runner-int.h - what the parts of `apbot run` share, and nothing else includes.
 *
 * runner.c holds the run: its set-up, the worker pool (one thread per ERP session, with its
 * store connection, its login, its claims, its probes of a silent ERP and the gate that makes
 * its writes durable), the calling thread's watch and the stop; job.c one claimed item's job
 * (the lookup, the post, the follow-up steps, the evidence of their exchanges, every change
 * through the one state setter); runlog.c the terminal's progress line and the key=value log;
 * breaker.c the circuit breaker and the run's failure; settle.c the settle delay learnt from
 * late commits.
 */
#ifndef APBOT_RUNNER_INT_H
#define APBOT_RUNNER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "apbot/clock.h"
#include "apbot/flow.h"
#include "apbot/machine.h"
#include "apbot/runner.h"
#include "apbot/store.h"
#include "queue/transition.h"

struct erp_exchange;
struct erp_lookup_result;
struct erp_session;
struct limiter;
struct erp_refs;

#define RUNNER_LEASE_MARGIN_MS 2000 /* a lease outlasts one exchange by this much */
/* Reconciliation lookups that missed a document remembered at once: more items than settle
 * within one settle delay on any ERP apbot drives; an older one forgotten measures nothing. */
#define RUNNER_MISSES_MAX 1024
/* A lost queue: reconnection n waits a full-jitter draw in [0, min(cap, base * 2^n)] ms. */
#define RUNNER_OUTAGE_BASE_MS 100
#define RUNNER_OUTAGE_CAP_MS 5000
#define RUNNER_OUTAGE_MAX_MS (5 * 60 * 1000) /* the default bound of an outage ridden out */
/* The longest Retry-After honoured: an ERP asking for a day must not park an item that long. */
#define RUNNER_RETRY_AFTER_MAX_MS (15 * 60 * 1000)

#define RUNNER_RETRIES_MAX 256     /* items remembered for an early retry */
#define RUNNER_RETRY_SOON_MS 60000 /* ... when due again within this */

/*
 * The items this run handed back to `new` with a short backoff (a lookup that failed, a post
 * not sent): each is claimed by id once due (store_claim_id), before the older backlog. In due
 * order they came last, behind every untouched item, so a month-end batch ended with them and
 * with their own failures (600 invoices: 40 of them took 10 s after the rest). Bounded: a full
 * list drops the entry due last (its item waits its turn in the queue as before).
 */
struct runner_retries {
    int n;
    struct {
        int64_t id;
        int64_t due; /* mono ms (apbot_clock_mono_ms) */
    } at[RUNNER_RETRIES_MAX];
};
/* Remembers item id, due at `due`; an item already there gets the new time. Cannot fail. */
void runner_retries_put(struct runner_retries *q, int64_t id, int64_t due);
/* Takes the entry due first, if it is due at now: its id, else 0. */
int64_t runner_retries_take(struct runner_retries *q, int64_t now);
/* Whether an entry is due at now. */
bool runner_retries_due(const struct runner_retries *q, int64_t now);

/* The numbers a run uses: the flow's policy with the options' overrides applied. */
struct runner_policy {
    long settle_ms, lease_ms, timeout_ms, connect_timeout_ms;
    long backoff_base_ms, backoff_cap_ms, poll_ms;
    struct machine_policy machine;
    int breaker_failures;
    long breaker_window_ms;
    long outage_max_ms; /* a connection to the queue lost this long stops the run */
};

struct worker;

/* What the workers share. Fields above `abort_io` are written before the threads start (st and
 * recovery are the calling thread's alone). */
struct runner {
    const struct runner_options *opt;
    struct flow *flow;     /* as loaded */
    struct flow run_flow;  /* shallow copy with the policy overrides, for erp_open */
    const char *base_url;  /* the effective ERP URL (flow's or the override) */
    char *user, *password; /* for masking in evidence only (each session has its own copy) */
    struct runner_policy pol;
    char owner[128];
    int64_t started_mono;
    struct limiter *limiter;
    struct erp_refs *refs; /* the run's reference data (<resolve>), shared by the sessions */
    struct worker *workers;
    int n_workers;
    struct store *st;               /* the calling thread's (recovery, counts); NULL while lost */
    struct transition_env recovery; /* the calling thread's recovery of expired leases */
    int64_t st_lost_at;             /* mono ms the calling thread's connection was lost (0: not) */
    int64_t st_retry_at;            /* mono ms of its next reconnection */
    int st_tries;                   /* its reconnections so far in this outage */

    atomic_int abort_io;       /* written by the calling thread only; workers' exchanges poll it */
    atomic_bool stop;          /* workers: finish the current item and leave */
    atomic_int running;        /* workers still in their loop */
    _Atomic int64_t settle_ms; /* the settle delay in force (raised by late commits) */
    _Atomic int64_t max_late;  /* the longest late commit seen (ms) */
    enum runner_settle_method settle_method; /* how late commits are measured */
    atomic_bool login_ok_once;               /* a login succeeded in this run */
    bool metrics_failed; /* the calling thread's: the last metrics file was not written */

    pthread_mutex_t login_mu; /* until a login succeeded: one login attempt at a time */
    pthread_cond_t login_cv;
    bool login_busy;

    pthread_mutex_t term_mu; /* the terminal: log lines scrolled above the progress line */
    char progress[400];

    pthread_mutex_t mu; /* guards everything below */
    int unanswered;     /* consecutive unanswered exchanges across workers */
    int64_t first_unanswered_mono;
    char last_unanswered[256];
    bool tripped;
    char trip_msg[512];
    bool failed;
    char fail_msg[512];
    int queue_down;       /* connections to the queue lost and not back yet */
    int64_t outage_since; /* mono ms the current outage began (queue_down > 0) */
    bool queue_failed;    /* a connection stayed lost past the bound: the run stops */
    char queue_msg[512];
    struct runner_stats totals; /* workers add theirs when they leave */
    /* lookup-bound late commits (settle.c): reconciliation lookups that missed a document,
     * a ring of the latest RUNNER_MISSES_MAX */
    struct settle_miss {
        int64_t item; /* the item's id (0: an empty place) */
        int64_t base; /* its settle base (settle_mono) when the lookup missed */
        int64_t at;   /* when that lookup began, mono ms */
    } misses[RUNNER_MISSES_MAX];
    size_t next_miss;
    struct runner_retries retries;
};

struct worker {
    struct runner *r;
    int index;
    pthread_t thread;
    bool started;
    char owner[160];
    char actor[200];
    struct store *st;
    struct erp_session *erp;
    int login_fails;
    int form_streak; /* post pages in a row without the flow's form or field */
    uint64_t rng;
    struct runner_stats stats;
    /* the item in hand, for evidence (0 when none) */
    int64_t item_id;
    bool reconciling;
    /* its exchanges not stored yet (evidence_put): stored with its next state change, or on
     * their own before the committing request and when the item leaves the worker */
    struct store_evidence *pending;
    size_t n_pending, cap_pending;
    int64_t retry_after_ms; /* of the event being applied, for the backoff */
    int64_t backoff_ms;     /* the backoff drawn for the last change */
    /* the item claimed with the last change (job_apply, store_apply_claim), next in hand:
     * its limiter place is the one the worker already holds */
    struct store_item next;
    bool have_next;
    /* the worker's connection to the queue was lost (worker_queue_lost): it touches no item
     * and claims nothing until worker_reconnect has a new one */
    bool queue_lost;
    int64_t queue_lost_at; /* mono ms */
    char queue_err[APBOT_ERR_LEN];
    int64_t kept_item; /* the item of the exchanges kept in `pending` across the outage */
};

static inline int64_t mono_ms(void)
{
    return apbot_clock_mono_ms();
}

static inline bool stopping(const struct runner *r)
{
    return atomic_load(&r->stop);
}

/* Items new, checking, posting, reconciling or finishing. */
static inline int64_t pending_of(const struct store_counts *c)
{
    return c->by_state[MACHINE_NEW] + c->by_state[MACHINE_CHECKING] + c->by_state[MACHINE_POSTING] +
           c->by_state[MACHINE_RECONCILING] + c->by_state[MACHINE_FINISHING];
}

/* ---- the worker (runner.c) --------------------------------------------------------------- */

enum login_rc { LOGIN_OK, LOGIN_TRANSIENT, LOGIN_SYSTEMIC };

/* Logs the worker's session in, one session at a time until a login succeeded in the run; a
 * refused login trips the breaker. */
enum login_rc worker_login(struct worker *w);
/* runner_retries_put / runner_retries_due on the run's list (under r->mu). */
void runner_retry_later(struct runner *r, int64_t id, int64_t due);
bool runner_retry_due(struct runner *r);
/* Sleeps up to ms, returning early when the run stops; what the worker wrote goes to disk
 * first. */
void worker_sleep(struct worker *w, int64_t ms);
/* Makes the worker's writes durable (store_sync); false when they are not (the run failed, or
 * the queue was lost: nothing that depends on them may follow), why says so. */
bool worker_durable(struct worker *w, char *why, size_t whylen);
/* A store call of the worker answered APBOT_E_UNAVAIL (err): its connection to the queue is
 * lost. The worker drops what it was doing, leaving every item as the queue recorded it, and
 * reconnects before it claims again; what else it was told fails the run. Returns true when
 * rc was that (the caller then stops touching the item), false for any other rc. */
bool worker_queue_lost(struct worker *w, int rc, const char *err);
/* The one state setter's environment for the worker (its store, owner, backoff and log). */
struct transition_env worker_env(struct worker *w);

#ifdef APBOT_UNITTEST /* static in the product (base/unittest.h) */
/*
 * Full-jitter backoff: a uniform draw in [0, min(cap, base * 2^n)] milliseconds, raised to
 * retry_after_ms (at most RUNNER_RETRY_AFTER_MAX_MS) when that is larger. rnd is a uniform
 * 64-bit random value. Pure.
 */
int64_t runner_backoff_ms(long base_ms, long cap_ms, int n, int64_t retry_after_ms, uint64_t rnd);
/*
 * The wait before reconnection n (0: the first) to a queue lost at lost_at (mono ms), at now:
 * a full-jitter draw in [0, min(RUNNER_OUTAGE_CAP_MS, RUNNER_OUTAGE_BASE_MS * 2^n)], cut to end
 * at lost_at + max_ms at the latest; -1 once that moment has passed (give up: the queue is
 * unavailable). rnd is a uniform 64-bit random value. Pure.
 */
int64_t runner_outage_wait_ms(int64_t lost_at, int64_t now, long max_ms, int n, uint64_t rnd);
#endif

/* ---- one claimed item (job.c) ------------------------------------------------------------ */

/* Drives one claimed item (*it, which the job owns now) until it leaves the worker's hands. */
void job_run(struct worker *w, struct store_item *it);
/* The ERP session's evidence callback (ctx: the worker): counts the exchange for the breaker
 * and the limiter, and keeps it for the item in hand. */
void job_evidence(void *ctx, const struct erp_exchange *ev);
/* Drops the exchanges not stored yet and frees their list. */
void job_evidence_free(struct worker *w);
/* After a reconnection: stores the exchanges kept because the queue was lost when they were
 * to be stored (their item is w->kept_item); drops them when that fails too. */
void job_evidence_restore(struct worker *w);

/* ---- the terminal and the log (runlog.c) ------------------------------------------------- */

/* A run-level message (start, breaker, stop, warnings) as one key=value line; warnings and
 * errors also appear above the progress line on a terminal. */
void runlog_msg(struct runner *r, const char *level, const char *what, const char *detail);
/* The one setter's log callback (ctx: the worker): one line per state change, and the
 * worker's counts. */
void runlog_transition(void *ctx, const struct transition_log *l);
/* The recovery's log callback (ctx: the runner; the calling thread). */
void runlog_recovery(void *ctx, const struct transition_log *l);
/* Redraws the progress line: what is settled, what is pending, the sessions at work; final
 * ends it. */
void runlog_progress(struct runner *r, const struct store_counts *c, int64_t elapsed_ms,
                     bool final);
/* Logs a change of the adaptive limit (once per change). */
void runlog_limit(struct runner *r);

/* ---- the circuit breaker and the run's failure (breaker.c) ------------------------------- */

/* Stops the run as systemic (the first message is kept). */
void breaker_trip(struct runner *r, const char *msg);
/* Counts one exchange by its transport ("answered", "not-sent: ...", "unknown: ..."). */
void breaker_count(struct runner *r, const char *transport);
/* True while the ERP seems silent: no claims, probes instead. */
bool breaker_suspect(struct runner *r);
/* Stops the run as failed (the queue, a worker's set-up; the first message is kept). */
void runner_fail(struct runner *r, const char *msg);
/* One more connection to the queue lost (err: why): the first of an outage logs it and starts
 * its clock. */
void runner_queue_down(struct runner *r, const char *err);
/* A lost connection is back: the last one back ends the outage (logged, its time counted). */
void runner_queue_up(struct runner *r);
/* A connection stayed lost past the bound (err: the last failure): the run stops as
 * RUNNER_STOP_QUEUE. */
void runner_queue_fail(struct runner *r, const char *err);

/* ---- the settle delay (settle.c) --------------------------------------------------------- */

/* Raises the settle delay in force as late_ms demands (runner_settle_in_force), logging why.
 * Returns the delay in force. */
int64_t settle_adapt(struct runner *r, int64_t late_ms, const char *why);
/* A reconciliation of item it found its document booked at `booked` (the ERP's clock, as
 * the lookup res showed it): learns how late the ERP committed it. */
void settle_observe(struct worker *w, const struct store_item *it, const char *booked,
                    const struct erp_lookup_result *res);
/* The settle delay an `unknown` outcome waits before its first reconciliation lookup: half
 * the delay in force for the lookup-bound method (a first look that can miss a late commit),
 * the whole delay otherwise. */
int64_t settle_first_look_ms(const struct runner *r, int64_t settle_ms);
/* A reconciliation lookup of item it that began at looked_mono did not find its document:
 * kept for settle_bound (lookup-bound method only; anything else is ignored). */
void settle_note_miss(struct worker *w, const struct store_item *it, int64_t looked_mono);
/* A reconciliation lookup of item it found its document and ended now: when an earlier lookup
 * since the give-up missed it, learns the late commit's upper bound (lookup-bound method). */
void settle_bound(struct worker *w, const struct store_item *it);

#ifdef APBOT_UNITTEST /* static in the product (base/unittest.h) */
/*
 * The late commit a reconciliation proves without a booking time, every stamp on one clock
 * (ms): apbot gave up on the committing request at gave_up, a lookup that began at absent_at
 * did not find the document, one that ended at found_at found it. The document became
 * visible after absent_at (less the search's lag) and no later than found_at, so the ERP made
 * it visible at most found_at - gave_up after the give-up: that bound is returned. 0 when the
 * lookups prove no late commit: no lookup missed it after the give-up (absent_at <= gave_up,
 * the document may have been there at the first look), or the stamps are out of order. Pure.
 */
int64_t settle_late_bound(int64_t gave_up, int64_t absent_at, int64_t found_at);
#endif

#endif
