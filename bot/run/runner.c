/*
 * runner.c - `apbot run`: the run's set-up, its pool of workers that drive queued items
 * through the state machine, the calling thread's watch over clock, signals, recovery and
 * progress, and the stop.
 *
 * One worker thread per ERP session (the flow's max-sessions, or --concurrency); a limiter
 * lets only as many work at once as the ERP can take (fixed, or adaptive with --concurrency
 * auto: limiter.h). Each worker owns a store connection and an ERP session, and is blocking:
 * one exchange at a time, interrupted by the shared abort flag its exchanges poll. A worker
 * logs its session in, claims an item and hands it to its job (job.c) until the item leaves
 * its hands; its writes are deferred and made durable by the session's gate before any
 * request that could book (worker_durable). While the ERP seems silent (breaker.c) it claims
 * nothing and probes instead. The calling thread recovers the leases of vanished runners,
 * draws the progress line (runlog.c) and stops the run when the queue is empty, the time is
 * up, the run is cancelled, the breaker tripped or the run failed.
 *
 * A queue that becomes unavailable (APBOT_E_UNAVAIL: a PostgreSQL server restarted or failed
 * over, a connection cut or ended) is ridden out, not a failure: the thread whose connection
 * was lost drops what it was doing - the item in hand stays exactly as the queue last
 * recorded it, a change the queue may not have taken is never assumed taken, and the lease
 * runs out for recovery to settle it as after a crash - sends nothing more, claims nothing,
 * and reconnects with capped full-jitter backoff (runner_outage_wait_ms). Only a connection
 * still lost after the bound (--queue-outage-max) stops the run, as RUNNER_STOP_QUEUE.
 */
#include "apbot/runner.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "apbot/erp.h"
#include "apbot/flow.h"
#include "apbot/mem.h"
#include "apbot/secret.h"
#include "apbot/store.h"
#include "base/unittest.h"
#include "erp/erp_resolve.h"
#include "queue/transition.h"
#include "run/limiter.h"
#include "run/runmetrics.h"
#include "run/runner-int.h"

#define RUNNER_PROBE_CAP_MS 1000  /* longest pause between probes of a silent ERP */
#define RUNNER_LOGIN_FAILS_MAX 30 /* transient login failures in a row before giving up */
#define RUNNER_RECOVER_EVERY_MS 1000
#define RUNNER_TICK_MS 100
#define RUNNER_PROGRESS_EVERY_MS 500

static const char *const stop_names[] = {
    [RUNNER_STOP_EMPTY] = "empty",   [RUNNER_STOP_TIME] = "time",
    [RUNNER_STOP_CANCEL] = "cancel", [RUNNER_STOP_SYSTEMIC] = "systemic",
    [RUNNER_STOP_ERROR] = "error",   [RUNNER_STOP_QUEUE] = "queue",
};
_Static_assert(sizeof(stop_names) / sizeof(stop_names[0]) == RUNNER_STOP__COUNT,
               "every runner_stop needs a name");

const char *runner_stop_name(enum runner_stop s)
{
    if ((int)s < 0 || s >= RUNNER_STOP__COUNT)
        return "invalid";
    return stop_names[s];
}

/* ---- small helpers ---------------------------------------------------------------------- */

static void sleep_ms(long ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* splitmix64: a small, well-mixed generator per worker (jitter only, not secrets). */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static uint64_t seed_random(void)
{
    uint64_t v = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, &v, sizeof(v)) != (ssize_t)sizeof(v))
            v = 0;
        close(fd);
    }
    if (!v)
        v = (uint64_t)mono_ms() ^ ((uint64_t)getpid() << 32);
    return v;
}

/* Full jitter on attempt n, Retry-After if larger (runner-int.h). */
UNITTEST int64_t runner_backoff_ms(long base_ms, long cap_ms, int n, int64_t retry_after_ms,
                                   uint64_t rnd)
{
    int64_t ceiling = base_ms > 0 ? base_ms : 0;
    int64_t cap = cap_ms > 0 ? cap_ms : 0;
    for (int i = 0; i < n && i < 62 && ceiling < cap; i++)
        ceiling *= 2;
    if (ceiling > cap)
        ceiling = cap;
    int64_t d = ceiling > 0 ? (int64_t)(rnd % (uint64_t)(ceiling + 1)) : 0;
    if (retry_after_ms > RUNNER_RETRY_AFTER_MAX_MS)
        retry_after_ms = RUNNER_RETRY_AFTER_MAX_MS;
    if (retry_after_ms > d)
        d = retry_after_ms;
    return d;
}

/* ---- early retries ------------------------------------------------------------------------ */

void runner_retries_put(struct runner_retries *q, int64_t id, int64_t due)
{
    int at = -1, last = -1;
    for (int i = 0; i < q->n; i++) {
        if (q->at[i].id == id)
            at = i;
        if (last < 0 || q->at[i].due > q->at[last].due)
            last = i;
    }
    if (at < 0 && q->n < RUNNER_RETRIES_MAX)
        at = q->n++;
    else if (at < 0 && due < q->at[last].due)
        at = last; /* full: this one is due sooner than the last */
    if (at < 0)
        return;
    q->at[at].id = id;
    q->at[at].due = due;
}

int64_t runner_retries_take(struct runner_retries *q, int64_t now)
{
    int first = -1;
    for (int i = 0; i < q->n; i++)
        if (first < 0 || q->at[i].due < q->at[first].due)
            first = i;
    if (first < 0 || q->at[first].due > now)
        return 0;
    int64_t id = q->at[first].id;
    q->at[first] = q->at[--q->n];
    return id;
}

bool runner_retries_due(const struct runner_retries *q, int64_t now)
{
    for (int i = 0; i < q->n; i++)
        if (q->at[i].due <= now)
            return true;
    return false;
}

void runner_retry_later(struct runner *r, int64_t id, int64_t due)
{
    pthread_mutex_lock(&r->mu);
    runner_retries_put(&r->retries, id, due);
    pthread_mutex_unlock(&r->mu);
}

bool runner_retry_due(struct runner *r)
{
    pthread_mutex_lock(&r->mu);
    bool due = runner_retries_due(&r->retries, mono_ms());
    pthread_mutex_unlock(&r->mu);
    return due;
}

/* Claims the item of the list due first, if one is due and still free; APBOT_E_NOTFOUND and
 * nothing claimed otherwise (none due, or the item moved on or another runner took it). */
static int worker_claim_retry(struct worker *w, struct store_item *it)
{
    struct runner *r = w->r;
    pthread_mutex_lock(&r->mu);
    int64_t id = runner_retries_take(&r->retries, mono_ms());
    pthread_mutex_unlock(&r->mu);
    if (!id)
        return APBOT_E_NOTFOUND;
    struct transition_env env = worker_env(w);
    char err[APBOT_ERR_LEN];
    return transition_claim_id(&env, NULL, id, r->pol.lease_ms, it, err, sizeof(err));
}

/* Reconnection n to a queue lost at lost_at (runner-int.h). */
UNITTEST int64_t runner_outage_wait_ms(int64_t lost_at, int64_t now, long max_ms, int n,
                                       uint64_t rnd)
{
    int64_t left = lost_at + (max_ms > 0 ? max_ms : 0) - now;
    if (left < 0)
        return -1;
    int64_t d = runner_backoff_ms(RUNNER_OUTAGE_BASE_MS, RUNNER_OUTAGE_CAP_MS, n, 0, rnd);
    return d < left ? d : left;
}

/* ---- the worker's writes made durable ---------------------------------------------------- */

/*
 * The worker's writes are deferred (STORE_DEFERRED: committed, visible, kept by a crash of
 * this process, on disk at the next sync): this makes them durable. It runs before every
 * request of the worker's session that may change the ERP (its gate, erp_set_gate: anything
 * but the GET of a page the flow only reads - a lookup, a listing, the page a step fills in)
 * and before the worker waits, so that nothing that could book reaches the ERP while a state
 * change before it is not on disk: the intent to post is on disk before the filled form is
 * sent. What a power loss could take (a claim, a lookup's "not found", a completion) changes
 * nothing in the ERP and is found again by the restart's lookup. Changes with no such request
 * in between (an item's completion, the next claim and its intent) share one disk sync, and
 * syncs of several workers are shared (store_sqlite.c, group commit): a sync puts every
 * commit before it on disk. A disk that refuses to sync stops the run: nothing is sent after.
 */
bool worker_durable(struct worker *w, char *why, size_t whylen)
{
    char err[APBOT_ERR_LEN];
    if (w->queue_lost) {
        if (why && whylen)
            snprintf(why, whylen, "held back: the queue is unavailable");
        return false;
    }
    if (!w->st)
        return true;
    int rc = store_sync(w->st, err, sizeof(err));
    if (rc == APBOT_OK)
        return true;
    if (why && whylen)
        snprintf(why, whylen, "held back: the queue's last change is not on disk (%s)", err);
    if (!worker_queue_lost(w, rc, err)) {
        runlog_msg(w->r, "error", "queue not synced to disk", err);
        runner_fail(w->r, err);
    }
    return false;
}

/* The session's gate (erp_set_gate): before every request that may change the ERP. A worker
 * whose queue is lost sends nothing that could change the ERP. */
static bool worker_gate(void *ctx, char *why, size_t whylen)
{
    return worker_durable(ctx, why, whylen);
}

bool worker_queue_lost(struct worker *w, int rc, const char *err)
{
    if (rc != APBOT_E_UNAVAIL)
        return false;
    if (!w->queue_lost) {
        w->queue_lost = true;
        w->queue_lost_at = mono_ms();
        snprintf(w->queue_err, sizeof(w->queue_err), "%s", err ? err : "");
        runner_queue_down(w->r, err);
    }
    return true;
}

/* Sleeps up to ms in short slices, returning early when the run stops. What the worker wrote
 * goes to disk first: a worker that waits sends nothing that would sync it. */
void worker_sleep(struct worker *w, int64_t ms)
{
    if (!w->queue_lost)
        (void)worker_durable(w, NULL, 0);
    int64_t until = mono_ms() + ms;
    for (int i = 0; i < 100000 && !stopping(w->r); i++) {
        int64_t left = until - mono_ms();
        if (left <= 0)
            break;
        sleep_ms(left < 50 ? (long)left : 50);
    }
}

/* ---- login ------------------------------------------------------------------------------ */

/* Until a login has succeeded in this run, one session at a time logs in: waits for the turn
 * (or a stop). True when this session took the turn: it gives it back with login_turn_end. */
static bool login_turn_take(struct runner *r)
{
    pthread_mutex_lock(&r->login_mu);
    while (!atomic_load(&r->login_ok_once) && r->login_busy && !stopping(r)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        (void)pthread_cond_timedwait(&r->login_cv, &r->login_mu, &ts);
    }
    bool gated = !atomic_load(&r->login_ok_once);
    if (gated)
        r->login_busy = true;
    pthread_mutex_unlock(&r->login_mu);
    return gated;
}

/* Gives the turn back; ok: the login succeeded, and sessions no longer take turns. */
static void login_turn_end(struct runner *r, bool ok)
{
    pthread_mutex_lock(&r->login_mu);
    r->login_busy = false;
    if (ok)
        atomic_store(&r->login_ok_once, true);
    pthread_cond_broadcast(&r->login_cv);
    pthread_mutex_unlock(&r->login_mu);
}

/*
 * Logs the worker's session in. Until a login has succeeded in this run, sessions log in one
 * at a time, so a wrong password is tried once, not once per session; a refused login trips
 * the breaker at once.
 */
enum login_rc worker_login(struct worker *w)
{
    struct runner *r = w->r;
    char err[APBOT_ERR_LEN];

    bool gated = login_turn_take(r);
    if (stopping(r)) {
        if (gated)
            login_turn_end(r, false);
        return LOGIN_TRANSIENT;
    }

    int rc = erp_login(w->erp, err, sizeof(err));
    if (rc == APBOT_E_SYSTEMIC) {
        /* Tripped before the gate opens: a session waiting at the gate must wake to a stop,
         * not to its own try of the same refused password. */
        char msg[700];
        snprintf(msg, sizeof(msg), "login refused: %s", err);
        breaker_trip(r, msg);
    }
    if (gated)
        login_turn_end(r, rc == APBOT_OK);
    if (rc == APBOT_OK) {
        w->login_fails = 0;
        w->stats.logins++;
        runmetrics_count(r->opt->metrics, RUNMETRICS_LOGINS);
        return LOGIN_OK;
    }
    if (rc == APBOT_E_SYSTEMIC)
        return LOGIN_SYSTEMIC;
    if (!stopping(r))
        runlog_msg(r, "warn", "login failed, will retry", err);
    if (++w->login_fails >= RUNNER_LOGIN_FAILS_MAX) {
        char msg[700];
        snprintf(msg, sizeof(msg), "login failed %d times in a row (last: %s)", w->login_fails,
                 err);
        breaker_trip(r, msg);
        return LOGIN_SYSTEMIC;
    }
    return LOGIN_TRANSIENT;
}

/* ---- workers ---------------------------------------------------------------------------- */

/* The backoff a step asks for: full jitter on the item's count, Retry-After if larger. */
static int64_t worker_backoff(void *ctx, const struct machine_step *step)
{
    struct worker *w = ctx;
    const struct runner_policy *pol = &w->r->pol;
    if (step->delay != MACHINE_DELAY_BACKOFF)
        return 0;
    int n = step->next == MACHINE_NEW ? step->counters.attempts : step->counters.cycles;
    w->backoff_ms = runner_backoff_ms(pol->backoff_base_ms, pol->backoff_cap_ms, n > 0 ? n - 1 : 0,
                                      w->retry_after_ms, rng_next(&w->rng));
    return w->backoff_ms;
}

struct transition_env worker_env(struct worker *w)
{
    struct transition_env env = {
        .st = w->st,
        .policy = &w->r->pol.machine,
        .settle_ms = atomic_load(&w->r->settle_ms),
        .owner = w->owner,
        .actor = w->actor,
        .backoff = worker_backoff,
        .log = runlog_transition,
        .ctx = w,
    };
    return env;
}

/* Hands a claimed item back untouched (released: no attempt spent), and drops the row. */
static void worker_let_go(struct worker *w, struct store_item *it)
{
    char err[APBOT_ERR_LEN];
    struct transition_env env = worker_env(w);
    struct transition_in in = {.event = MACHINE_EV_RELEASED,
                               .detail = "handed back before its lookup: the ERP is under "
                                         "suspicion"};
    int rc = APBOT_E_UNAVAIL;
    snprintf(err, sizeof(err), "the queue is unavailable");
    if (!w->queue_lost)
        rc = transition_apply(&env, it, &in, NULL, err, sizeof(err));
    if (rc != APBOT_OK) {
        (void)worker_queue_lost(w, rc, err);
        runlog_msg(w->r, "warn", "a claimed item was not handed back (its lease runs out)", err);
    }
    store_item_done(it);
}

/* While the ERP seems silent: no claims, just a probe of the login page now and then. */
static void worker_probe(struct worker *w, int *probes)
{
    char transport[320];
    if (erp_probe(w->erp, transport, sizeof(transport)) == APBOT_OK) {
        w->stats.exchanges++;
        breaker_count(w->r, transport);
        runmetrics_probe(w->r->opt->metrics, transport);
    }
    int64_t pause = runner_backoff_ms(100, RUNNER_PROBE_CAP_MS, (*probes)++, 0, rng_next(&w->rng));
    worker_sleep(w, pause < 50 ? 50 : pause);
}

/* Nothing to claim: waits for the next item due, at most the poll interval. */
static void worker_idle(struct worker *w)
{
    struct runner *r = w->r;
    int64_t wait = -1;
    int64_t pause = r->pol.poll_ms;
    char err[APBOT_ERR_LEN];
    int rc = store_next_due(w->st, NULL, &wait, err, sizeof(err));
    if (worker_queue_lost(w, rc, err))
        return;
    if (rc == APBOT_OK && wait > 0 && wait < pause)
        pause = wait;
    worker_sleep(w, pause < 5 ? 5 : pause);
}

/* The worker's queue is lost: closes the dead connection and opens another, waiting between
 * attempts (runner_outage_wait_ms) up to the outage's bound. Then what the worker kept is
 * settled: the exchanges of its last item are stored, the item claimed with its last change
 * is handed back. Returns false when the run stops or the bound ran out (the run then stops
 * as RUNNER_STOP_QUEUE). */
static bool worker_reconnect(struct worker *w)
{
    struct runner *r = w->r;
    char err[APBOT_ERR_LEN];

    store_close(w->st);
    w->st = NULL;
    for (int n = 0;; n++) {
        int64_t wait = runner_outage_wait_ms(w->queue_lost_at, mono_ms(), r->pol.outage_max_ms, n,
                                             rng_next(&w->rng));
        if (wait < 0 || n > 100000) {
            runner_queue_fail(r, w->queue_err);
            return false;
        }
        worker_sleep(w, wait);
        if (stopping(r))
            return false;
        /* Any failure counts as the outage going on: this string connected before. */
        if (store_open(r->opt->db_path, &w->st, err, sizeof(err)) == APBOT_OK)
            break;
        snprintf(w->queue_err, sizeof(w->queue_err), "%s", err);
    }
    (void)store_set_durability(w->st, STORE_DEFERRED); /* made durable by worker_durable */
    w->queue_lost = false;
    runner_queue_up(r);
    job_evidence_restore(w);
    if (w->have_next) {
        w->have_next = false;
        worker_let_go(w, &w->next);
        limiter_release(r->limiter);
    }
    return true;
}

/* Opens the worker's store connection and ERP session; false (the run failed) when either
 * cannot be had. */
static bool worker_open(struct worker *w)
{
    struct runner *r = w->r;
    char err[APBOT_ERR_LEN];

    int rc = store_open(r->opt->db_path, &w->st, err, sizeof(err));
    if (rc == APBOT_OK) {
        (void)store_set_durability(w->st, STORE_DEFERRED); /* made durable by worker_durable */
    } else if (!worker_queue_lost(w, rc, err)) {
        runner_fail(r, err);
        return false;
    }
    if (erp_open(&r->run_flow, r->base_url, &r->abort_io, &w->erp, err, sizeof(err)) != APBOT_OK) {
        runner_fail(r, err);
        return false;
    }
    erp_set_evidence(w->erp, job_evidence, w);
    erp_set_gate(w->erp, worker_gate, w);
    erp_set_refs(w->erp, w->r->refs);
    return true;
}

/* Runs the item claimed with the last change, in the place this worker holds. Run even when
 * the run stops (the job hands it back untouched), but not into an ERP under suspicion: back
 * to the queue untouched, no attempt spent. */
static void worker_run_next(struct worker *w)
{
    struct runner *r = w->r;
    struct store_item it = w->next;

    memset(&w->next, 0, sizeof(w->next));
    w->have_next = false;
    if (breaker_suspect(r) && !stopping(r)) {
        worker_let_go(w, &it);
        limiter_release(r->limiter);
        return;
    }
    job_run(w, &it);
    if (!w->have_next)
        limiter_release(r->limiter);
}

/*
 * One turn of a worker with no item in hand: a probe while the ERP seems silent; else a place
 * in the limit, a login if the session needs one, a claim and its job. Returns false when the
 * worker leaves (the run stops, a login was refused, the queue failed).
 */
static bool worker_turn(struct worker *w, int *probes)
{
    struct runner *r = w->r;
    char err[APBOT_ERR_LEN];
    struct store_item it;

    if (breaker_suspect(r)) {
        worker_probe(w, probes);
        return true;
    }
    *probes = 0;
    /* Only as many sessions work as the limit allows (the ERP's capacity); logged-in
     * sessions first, so that a limit below the workers does not log every one in. */
    if (!limiter_acquire_as(r->limiter, &r->stop, erp_logged_in(w->erp)))
        return false;
    if (!erp_logged_in(w->erp)) {
        enum login_rc lr = worker_login(w);
        if (lr != LOGIN_OK) {
            limiter_release(r->limiter);
            if (lr == LOGIN_SYSTEMIC)
                return false;
            worker_sleep(w, runner_backoff_ms(r->pol.backoff_base_ms, r->pol.backoff_cap_ms,
                                              w->login_fails, 0, rng_next(&w->rng)));
            return true;
        }
    }
    struct transition_env env = worker_env(w);
    int rc = worker_claim_retry(w, &it);
    if (rc != APBOT_OK)
        rc = transition_claim(&env, NULL, r->pol.lease_ms, &it, err, sizeof(err));
    if (rc == APBOT_E_NOTFOUND || rc == APBOT_E_BUSY) {
        limiter_release(r->limiter);
        worker_idle(w);
        return true;
    }
    if (rc != APBOT_OK) {
        limiter_release(r->limiter);
        if (worker_queue_lost(w, rc, err))
            return true; /* nothing in hand: reconnect, then claim again */
        runner_fail(r, err);
        return false;
    }
    job_run(w, &it);
    if (!w->have_next)
        limiter_release(r->limiter);
    return true;
}

/* Adds a worker's counts to the run's (under r->mu). */
static void stats_add(struct runner_stats *t, const struct runner_stats *s)
{
    t->claims += s->claims;
    t->transitions += s->transitions;
    t->lookups += s->lookups;
    t->posts_sent += s->posts_sent;
    t->exchanges += s->exchanges;
    t->syncs += s->syncs;
    t->logins += s->logins;
    t->completed += s->completed;
    t->business_exception += s->business_exception;
    t->manual_review += s->manual_review;
}

/* Closes what the worker opened, its last writes on disk, and adds its counts to the run's. */
static void worker_leave(struct worker *w)
{
    struct runner *r = w->r;

    if (w->have_next) { /* not reached by the worker's loop; belt and braces */
        w->have_next = false;
        worker_let_go(w, &w->next); /* with the queue lost: its lease runs out */
        limiter_release(r->limiter);
    }
    erp_close(w->erp);
    w->erp = NULL;
    job_evidence_free(w);
    (void)worker_durable(w, NULL, 0);
    w->stats.syncs = store_syncs(w->st);
    store_close(w->st);
    w->st = NULL;
    pthread_mutex_lock(&r->mu);
    stats_add(&r->totals, &w->stats);
    pthread_mutex_unlock(&r->mu);
    atomic_fetch_sub(&r->running, 1);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    int probes = 0;

    if (worker_open(w))
        while (!stopping(w->r) || w->have_next) {
            if (w->queue_lost) {
                if (!worker_reconnect(w))
                    break;
            } else if (w->have_next) {
                worker_run_next(w);
            } else if (!worker_turn(w, &probes)) {
                break;
            }
        }
    worker_leave(w);
    return NULL;
}
/* ---- the calling thread ----------------------------------------------------------------- */

static long pick(long override, long flow_value, long fallback)
{
    if (override > 0)
        return override;
    return flow_value > 0 ? flow_value : fallback;
}

static void policy_setup(struct runner *r)
{
    const struct runner_options *o = r->opt;
    const struct flow_policy *fp = &r->flow->policy;
    struct runner_policy *p = &r->pol;
    struct flow_policy def = flow_policy_default(); /* the one place of the defaults */

    p->timeout_ms = pick(o->timeout_ms, fp->timeout_ms, def.timeout_ms);
    p->connect_timeout_ms =
        pick(o->connect_timeout_ms, fp->connect_timeout_ms, def.connect_timeout_ms);
    p->settle_ms = pick(o->settle_ms, fp->settle_ms, def.settle_ms);
    p->backoff_base_ms = pick(o->backoff_base_ms, fp->backoff_base_ms, def.backoff_base_ms);
    p->backoff_cap_ms = pick(o->backoff_cap_ms, fp->backoff_cap_ms, def.backoff_cap_ms);
    if (p->backoff_cap_ms < p->backoff_base_ms)
        p->backoff_cap_ms = p->backoff_base_ms;
    p->lease_ms = pick(o->lease_ms, fp->lease_ms, def.lease_ms);
    /* A lease must outlast one exchange plus the renewal before it. */
    long min_lease = p->timeout_ms + p->connect_timeout_ms + 2 * RUNNER_LEASE_MARGIN_MS;
    if (p->lease_ms < min_lease)
        p->lease_ms = min_lease;
    p->poll_ms = pick(o->poll_ms, 0, 200);
    p->machine.max_posts = (int)pick(o->max_posts, fp->max_posts, def.max_posts);
    p->machine.max_cycles = (int)pick(o->max_cycles, fp->max_cycles, def.max_cycles);
    p->machine.max_attempts = (int)pick(o->max_attempts, fp->max_attempts, def.max_attempts);
    p->breaker_failures = (int)pick(o->breaker_failures, 0, 10);
    p->breaker_window_ms = pick(o->breaker_window_ms, 0, 30000);
    p->outage_max_ms = pick(o->queue_outage_max_ms, 0, RUNNER_OUTAGE_MAX_MS);

    r->run_flow = *r->flow; /* shallow: shares every pointer, never freed itself */
    r->run_flow.policy.timeout_ms = p->timeout_ms;
    r->run_flow.policy.connect_timeout_ms = p->connect_timeout_ms;
    r->run_flow.policy.settle_ms = p->settle_ms;
    atomic_init(&r->settle_ms, p->settle_ms);
    atomic_init(&r->max_late, 0);
    r->settle_method = runner_settle_method(r->flow);
}

static void make_owner(struct runner *r)
{
    if (r->opt->owner && *r->opt->owner) {
        snprintf(r->owner, sizeof(r->owner), "%s", r->opt->owner);
        return;
    }
    char host[64] = "localhost";
    if (gethostname(host, sizeof(host)) != 0)
        snprintf(host, sizeof(host), "localhost");
    host[sizeof(host) - 1] = '\0';
    snprintf(r->owner, sizeof(r->owner), "%s:%ld:%08" PRIx32, host, (long)getpid(),
             (uint32_t)seed_random());
}

/* A runner for opt, nothing loaded yet. */
static struct runner *run_new(const struct runner_options *opt)
{
    struct runner *r = apbot_xcalloc(1, sizeof(*r));
    r->opt = opt;
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->term_mu, NULL);
    pthread_mutex_init(&r->login_mu, NULL);
    pthread_cond_init(&r->login_cv, NULL);
    atomic_init(&r->stop, false);
    atomic_init(&r->running, 0);
    atomic_init(&r->abort_io, 0);
    atomic_init(&r->login_ok_once, false);
    r->started_mono = mono_ms();
    return r;
}

/* Loads the flow and sets the run's policy, owner and sessions (the limiter). */
static int run_setup(struct runner *r, struct runner_stats *ret)
{
    const struct runner_options *opt = r->opt;
    char err[APBOT_ERR_LEN] = "";

    int rc = flow_load(opt->flow_path, &r->flow, err, sizeof(err));
    if (rc != APBOT_OK) {
        snprintf(ret->message, sizeof(ret->message), "flow %.100s: %.400s", opt->flow_path, err);
        return rc;
    }
    r->base_url = opt->erp_url && *opt->erp_url ? opt->erp_url : r->flow->base_url;
    r->user = secret_dup(SECRET_ERP_USER);
    r->password = secret_dup(SECRET_ERP_PASSWORD);
    policy_setup(r);
    make_owner(r);

    int max_sessions = r->flow->policy.max_sessions > 0 ? r->flow->policy.max_sessions : 1;
    int n = opt->concurrency > 0 ? opt->concurrency : max_sessions;
    r->n_workers = n > max_sessions ? max_sessions : n;
    r->refs = erp_refs_new();
    return limiter_new(r->n_workers, opt->concurrency == 0, &r->limiter);
}

/* Sleeps up to ms in short slices, returning early when the run is cancelled. */
static void run_nap(struct runner *r, int64_t ms)
{
    int64_t until = mono_ms() + ms;
    for (int i = 0; i < 100000 && !(r->opt->cancel && *r->opt->cancel); i++) {
        int64_t left = until - mono_ms();
        if (left <= 0)
            break;
        sleep_ms(left < 50 ? (long)left : 50);
    }
}

/* Opens the queue for the calling thread at the start. A queue that is unavailable (the
 * server down, failing over) is waited for, as an outage, up to the bound; a cancel stops
 * the wait. */
static int run_open_store(struct runner *r, char *err, size_t errlen)
{
    int64_t since = mono_ms();
    bool down = false;
    int rc = APBOT_OK;
    for (int n = 0;; n++) {
        rc = store_open(r->opt->db_path, &r->st, err, errlen);
        if (rc != APBOT_E_UNAVAIL)
            break;
        if (!down) {
            down = true;
            runner_queue_down(r, err);
        }
        int64_t wait =
            runner_outage_wait_ms(since, mono_ms(), r->pol.outage_max_ms, n, seed_random());
        if (wait < 0 || n > 100000 || (r->opt->cancel && *r->opt->cancel)) {
            char last[APBOT_ERR_LEN];
            snprintf(last, sizeof(last), "%s", err);
            snprintf(err, errlen, "the queue was unavailable for longer than %ld s (last: %.400s)",
                     r->pol.outage_max_ms / 1000, last);
            break;
        }
        run_nap(r, wait);
    }
    if (down && rc == APBOT_OK)
        runner_queue_up(r);
    return rc;
}

/* The calling thread's connection to the queue answered APBOT_E_UNAVAIL: closed, to be
 * opened again by the watch (run_store_retry). */
static void run_store_lost(struct runner *r, const char *err)
{
    store_close(r->st);
    r->st = NULL;
    r->recovery.st = NULL;
    r->st_lost_at = mono_ms();
    r->st_retry_at = r->st_lost_at;
    r->st_tries = 0;
    runner_queue_down(r, err);
}

/* Tries to open the calling thread's connection again when its next attempt is due; the run
 * stops (RUNNER_STOP_QUEUE) once the outage's bound ran out. */
static void run_store_retry(struct runner *r, int64_t now)
{
    char err[APBOT_ERR_LEN];
    if (r->st || now < r->st_retry_at)
        return;
    if (store_open(r->opt->db_path, &r->st, err, sizeof(err)) == APBOT_OK) {
        r->recovery.st = r->st;
        r->st_lost_at = 0;
        runner_queue_up(r);
        return;
    }
    int64_t wait = runner_outage_wait_ms(r->st_lost_at, now, r->pol.outage_max_ms, r->st_tries++,
                                         seed_random());
    if (wait < 0)
        runner_queue_fail(r, err);
    else
        r->st_retry_at = now + wait;
}

/* Opens the queue for the calling thread, takes up what earlier runs learnt of late commits,
 * recovers the items of vanished runners and logs the start. */
static int run_open_queue(struct runner *r, struct runner_stats *ret)
{
    const struct runner_options *opt = r->opt;
    char err[APBOT_ERR_LEN] = "";

    int rc = run_open_store(r, err, sizeof(err));
    if (rc != APBOT_OK) {
        snprintf(ret->message, sizeof(ret->message), "%s", err);
        return rc;
    }
    /* What earlier runs learnt about this ERP's late commits holds from the start. */
    struct store_late_commit late;
    if (store_late_commit(r->st, r->flow->name, &late, NULL, 0) == APBOT_OK && late.max_ms > 0) {
        atomic_store(&r->max_late, late.max_ms);
        settle_adapt(r, late.max_ms, "seen in an earlier run");
    }
    r->recovery = (struct transition_env){
        .st = r->st,
        .policy = &r->pol.machine,
        .settle_ms = atomic_load(&r->settle_ms),
        .actor = "recovery",
        .log = runlog_recovery,
        .ctx = r,
    };
    int recovered = 0;
    rc = transition_recover(&r->recovery, NULL, &recovered, err, sizeof(err));
    if (rc == APBOT_E_UNAVAIL) {
        run_store_lost(r, err); /* lost again at once: the watch reconnects, workers too */
    } else if (rc != APBOT_OK) {
        snprintf(ret->message, sizeof(ret->message), "recovery: %.400s", err);
        return rc;
    }

    char line[512];
    snprintf(line, sizeof(line),
             "owner=%s sessions=%d%s erp=%s recovered=%d settle_ms=%" PRId64
             " settle_method=%s timeout_ms=%ld",
             r->owner, r->n_workers, opt->concurrency == 0 ? " (adaptive)" : "",
             r->base_url ? r->base_url : "-", recovered, atomic_load(&r->settle_ms),
             runner_settle_method_name(r->settle_method), r->pol.timeout_ms);
    runlog_msg(r, "info", "run started", line);
    return APBOT_OK;
}

/* Starts the workers; one that cannot start fails the run (the watch sees it). */
static void run_start(struct runner *r)
{
    r->workers = apbot_xcalloc((size_t)r->n_workers, sizeof(*r->workers));
    uint64_t seed = r->opt->seed ? r->opt->seed : seed_random();
    /* Workers must not take SIGINT/SIGTERM: the calling thread turns them into a stop. */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    for (int i = 0; i < r->n_workers; i++) {
        struct worker *w = &r->workers[i];
        w->r = r;
        w->index = i;
        w->rng = seed + (uint64_t)i * UINT64_C(0x9E3779B97F4A7C15);
        snprintf(w->owner, sizeof(w->owner), "%s/w%d", r->owner, i);
        snprintf(w->actor, sizeof(w->actor), "runner:%s", w->owner);
        atomic_fetch_add(&r->running, 1);
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            atomic_fetch_sub(&r->running, 1);
            runner_fail(r, "cannot start a worker thread");
            break;
        }
        w->started = true;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Whether the run must stop now, and why: a failure, the breaker, the cancel flag, the clock,
 * or no worker left. */
static bool run_must_stop(struct runner *r, int64_t now, enum runner_stop *why)
{
    const struct runner_options *opt = r->opt;

    pthread_mutex_lock(&r->mu);
    bool tripped = r->tripped, failed = r->failed, queue_failed = r->queue_failed;
    pthread_mutex_unlock(&r->mu);
    if (failed)
        *why = RUNNER_STOP_ERROR;
    else if (queue_failed)
        *why = RUNNER_STOP_QUEUE;
    else if (tripped)
        *why = RUNNER_STOP_SYSTEMIC;
    else if (opt->cancel && *opt->cancel)
        *why = RUNNER_STOP_CANCEL;
    else if (opt->max_seconds > 0 && now - r->started_mono >= opt->max_seconds * 1000)
        *why = RUNNER_STOP_TIME;
    else if (atomic_load(&r->running) == 0) {
        *why = RUNNER_STOP_ERROR;
        runner_fail(r, "every worker stopped");
    } else
        return false;
    return true;
}

/* Hands the items whose runner vanished (their lease ran out) back to the queue. */
static void run_recover(struct runner *r)
{
    char err[APBOT_ERR_LEN];
    int nrec = 0;
    r->recovery.settle_ms = atomic_load(&r->settle_ms);
    int rc = transition_recover(&r->recovery, NULL, &nrec, err, sizeof(err));
    if (rc == APBOT_E_UNAVAIL)
        run_store_lost(r, err);
    else if (rc != APBOT_OK)
        runlog_msg(r, "warn", "recovery", err);
}

/* The run's gauges into its metrics, and (write) its textfile rewritten; a file that cannot
 * be written is said once, and the run goes on. */
static void run_metrics(struct runner *r, bool write)
{
    const struct runner_options *opt = r->opt;
    char err[APBOT_ERR_LEN];

    if (!opt->metrics)
        return;
    pthread_mutex_lock(&r->mu);
    bool tripped = r->tripped;
    pthread_mutex_unlock(&r->mu);
    enum runmetrics_breaker b = tripped              ? RUNMETRICS_BREAKER_TRIPPED
                                : breaker_suspect(r) ? RUNMETRICS_BREAKER_PROBING
                                                     : RUNMETRICS_BREAKER_CLOSED;
    runmetrics_live(opt->metrics, r->n_workers, limiter_limit(r->limiter), b,
                    atomic_load(&r->settle_ms), atomic_load(&r->max_late));
    if (!write || !opt->metrics_path)
        return;
    if (runner_metrics_write(opt->metrics, opt->metrics_path, -1, err, sizeof(err)) == APBOT_OK)
        r->metrics_failed = false;
    else if (!r->metrics_failed) {
        r->metrics_failed = true;
        runlog_msg(r, "warn", "metrics file not written", err);
    }
}

/* The calling thread's watch, until the run must stop (returned: why): clock, cancel,
 * breaker, queue, recovery, progress, metrics. */
static enum runner_stop run_watch(struct runner *r)
{
    const struct runner_options *opt = r->opt;
    char err[APBOT_ERR_LEN];
    enum runner_stop why;
    int64_t last_recover = mono_ms(), last_progress = 0, last_count = 0, last_metrics = 0;
    long metrics_every = opt->metrics_every_ms > 0 ? opt->metrics_every_ms : 5000;
    struct store_counts counts;

    memset(&counts, 0, sizeof(counts));
    for (;;) {
        int64_t now = mono_ms();
        if (run_must_stop(r, now, &why))
            return why;
        runlog_limit(r);
        if (!r->st) { /* lost: nothing to recover, count or watch until it is back */
            run_store_retry(r, now);
            sleep_ms(RUNNER_TICK_MS);
            continue;
        }
        if (now - last_recover >= RUNNER_RECOVER_EVERY_MS) {
            last_recover = now;
            run_recover(r);
        }
        /* A few index probes, not a count of the whole queue (100,000 rows at month-end). */
        if (r->st && opt->until_empty && now - last_count >= 250) {
            last_count = now;
            bool any = true;
            int rc = store_pending(r->st, &any, err, sizeof(err));
            if (rc == APBOT_OK && !any)
                return RUNNER_STOP_EMPTY;
            if (rc == APBOT_E_UNAVAIL)
                run_store_lost(r, err);
        }
        if (opt->metrics && now - last_metrics >= metrics_every) {
            last_metrics = now;
            run_metrics(r, true);
        }
        if (r->st && opt->progress && now - last_progress >= RUNNER_PROGRESS_EVERY_MS) {
            last_progress = now;
            int rc = store_counts(r->st, &counts, err, sizeof(err));
            if (rc == APBOT_OK)
                runlog_progress(r, &counts, now - r->started_mono, false);
            else if (rc == APBOT_E_UNAVAIL)
                run_store_lost(r, err);
        }
        sleep_ms(RUNNER_TICK_MS);
    }
}

/* What the run did, into ret: the workers' counts, why it stopped (a tripped breaker counts
 * as systemic unless the run failed) and the queue at the end. Returns why. */
static enum runner_stop run_result(struct runner *r, enum runner_stop why, struct runner_stats *ret)
{
    char err[APBOT_ERR_LEN];
    struct store_counts counts;

    pthread_mutex_lock(&r->mu);
    *ret = r->totals;
    if (r->tripped && why != RUNNER_STOP_ERROR && why != RUNNER_STOP_QUEUE)
        why = RUNNER_STOP_SYSTEMIC;
    ret->stop = why;
    if (why == RUNNER_STOP_SYSTEMIC)
        snprintf(ret->message, sizeof(ret->message), "%s", r->trip_msg);
    else if (why == RUNNER_STOP_ERROR)
        snprintf(ret->message, sizeof(ret->message), "%s", r->fail_msg);
    else if (why == RUNNER_STOP_QUEUE)
        snprintf(ret->message, sizeof(ret->message), "%s", r->queue_msg);
    if (r->queue_down > 0) /* stopped in an outage: its time so far */
        ret->queue_outage_ms += mono_ms() - r->outage_since;
    pthread_mutex_unlock(&r->mu);
    ret->workers = r->n_workers;
    ret->limit = limiter_limit(r->limiter);
    ret->limit_changes = limiter_changes(r->limiter);
    ret->settle_ms = atomic_load(&r->settle_ms);
    ret->max_late_commit_ms = atomic_load(&r->max_late);
    run_metrics(r, false); /* the command writes the last file, with its exit code */
    ret->pending = -1;     /* not known while the queue is unavailable */
    if (!r->st && store_open(r->opt->db_path, &r->st, err, sizeof(err)) != APBOT_OK)
        r->st = NULL;
    if (r->st && store_counts(r->st, &counts, err, sizeof(err)) == APBOT_OK) {
        ret->pending = pending_of(&counts);
        if (r->opt->progress)
            runlog_progress(r, &counts, mono_ms() - r->started_mono, true);
    }
    ret->elapsed_ms = mono_ms() - r->started_mono;
    return why;
}

/* Stops the run: in-flight exchanges are cut short, items handed back by their workers; then
 * what it did goes to ret and the log. */
static int run_stop(struct runner *r, enum runner_stop why, struct runner_stats *ret)
{
    atomic_store(&r->stop, true);
    atomic_store(&r->abort_io, 1);
    for (int i = 0; i < r->n_workers; i++)
        if (r->workers[i].started)
            pthread_join(r->workers[i].thread, NULL);

    why = run_result(r, why, ret);
    bool bad = why == RUNNER_STOP_SYSTEMIC || why == RUNNER_STOP_ERROR || why == RUNNER_STOP_QUEUE;
    char line[640];
    snprintf(line, sizeof(line),
             "stop=%s completed=%" PRId64 " business_exception=%" PRId64 " manual_review=%" PRId64
             " pending=%" PRId64 " elapsed_ms=%" PRId64 " settle_ms=%" PRId64
             " sessions=%d limit_changes=%" PRId64 " exchanges=%" PRId64 " syncs=%" PRId64
             " queue_outages=%" PRId64 " queue_lost=%" PRId64 " queue_outage_ms=%" PRId64,
             runner_stop_name(why), ret->completed, ret->business_exception, ret->manual_review,
             ret->pending, ret->elapsed_ms, ret->settle_ms, ret->limit, ret->limit_changes,
             ret->exchanges, ret->syncs, ret->queue_outages, ret->queue_lost, ret->queue_outage_ms);
    runlog_msg(r, bad ? "error" : "info", "run stopped", line);
    if (ret->message[0] && !bad)
        runlog_msg(r, "info", "reason", ret->message);
    return why == RUNNER_STOP_SYSTEMIC ? APBOT_E_SYSTEMIC
           : why == RUNNER_STOP_ERROR  ? APBOT_E_DB
           : why == RUNNER_STOP_QUEUE  ? APBOT_E_UNAVAIL
                                       : APBOT_OK;
}

static void run_free(struct runner *r)
{
    free(r->workers);
    store_close(r->st);
    limiter_free(r->limiter);
    erp_refs_free(r->refs);
    secret_free(r->user);
    secret_free(r->password);
    flow_free(r->flow);
    pthread_cond_destroy(&r->login_cv);
    pthread_mutex_destroy(&r->login_mu);
    pthread_mutex_destroy(&r->term_mu);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

int runner_run(const struct runner_options *opt, struct runner_stats *ret)
{
    struct runner_stats dummy;

    if (!ret)
        ret = &dummy;
    memset(ret, 0, sizeof(*ret));
    ret->stop = RUNNER_STOP_ERROR;
    if (!opt || !opt->flow_path || !opt->db_path || opt->concurrency < 0 || opt->max_seconds < 0) {
        snprintf(ret->message, sizeof(ret->message), "run: flow and database are required");
        return APBOT_E_INVAL;
    }
    struct runner *r = run_new(opt);
    int rc = run_setup(r, ret);
    if (rc == APBOT_OK)
        rc = run_open_queue(r, ret);
    if (rc == APBOT_E_UNAVAIL) { /* unavailable from the start, past the bound */
        ret->stop = RUNNER_STOP_QUEUE;
        ret->queue_outages = r->totals.queue_outages;
        ret->queue_lost = r->totals.queue_lost;
        ret->queue_outage_ms = mono_ms() - r->outage_since;
        ret->pending = -1;
        ret->elapsed_ms = mono_ms() - r->started_mono;
        runlog_msg(r, "error", "run stopped", ret->message);
    }
    if (rc == APBOT_OK) {
        run_start(r);
        rc = run_stop(r, run_watch(r), ret);
    }
    run_free(r);
    return rc;
}
