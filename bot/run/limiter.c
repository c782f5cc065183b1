/*
 * limiter.c - the number of ERP sessions working at once: fixed, or adaptive as described in
 * limiter.h (Vegas on request latency, cut on overload). The core is pure; the wrapper adds a
 * mutex and a condition variable so workers wait for a free place.
 */
#include "run/limiter.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apbot/mem.h"
#include "base/unittest.h"

UNITTEST void limiter_core_init(struct limiter_core *c, int max, int initial)
{
    memset(c, 0, sizeof(*c));
    c->max = max < 1 ? 1 : max;
    c->limit = initial < 1 ? 1 : initial > c->max ? c->max : initial;
    c->last_q = 1.0;
    c->slow_start = true;
}

/* The kind of a request from its step name ("lookup", "post", ...). */
static unsigned limiter_kind(const char *step)
{
    unsigned h = 2166136261u; /* FNV-1a */
    for (const char *p = step ? step : ""; *p; p++) {
        h ^= (unsigned char)*p;
        h *= 16777619u;
    }
    return h;
}

UNITTEST bool limiter_overloaded(int refusals, int answers)
{
    return refusals >= LIMITER_REFUSALS_MIN &&
           (double)refusals >= LIMITER_REFUSAL_SHARE * (double)(answers > 0 ? answers : 1);
}

/* Ends a round: grows, holds or shrinks the limit from what the round showed. */
static void round_end(struct limiter_core *c, int64_t now_ms)
{
    int old = c->limit;
    int answers = c->samples + c->refusals;
    if (limiter_overloaded(c->refusals, answers)) {
        /* The ERP refused for load or did not answer in time: a quarter less, at least one. */
        int cut = c->limit * 3 / 4;
        c->limit = cut < c->limit - 1 ? cut : c->limit - 1;
        c->slow_start = false;
    } else if (c->samples > 0) {
        double q = c->ratio_sum / c->samples;
        if (q < 1.0)
            q = 1.0;
        double queued = c->limit * (1.0 - 1.0 / q);
        if (queued < LIMITER_GAMMA && c->slow_start && c->refusals == 0) {
            c->limit *= 2; /* clamped to max below */
        } else if (queued < LIMITER_ALPHA) {
            c->limit++;
            c->slow_start = false; /* after a refusal no more doubling */
        } else if (queued > LIMITER_BETA) {
            /* Where the queue would be ALPHA again at today's latency, in one step. */
            int target = (int)(c->limit / q + LIMITER_ALPHA + 0.5);
            c->limit = target < c->limit - 1 ? target : c->limit - 1;
        }
        if (queued >= LIMITER_GAMMA)
            c->slow_start = false;
        c->last_q = q;
    }
    if (c->limit < 1)
        c->limit = 1;
    if (c->limit > c->max)
        c->limit = c->max;
    if (c->limit != old)
        c->changes++;
    c->ratio_sum = 0;
    c->samples = 0;
    c->refusals = 0;
    c->round_start_ms = now_ms;
}

UNITTEST int limiter_core_sample(struct limiter_core *c, unsigned kind, int64_t latency_ms,
                                 enum limiter_signal sig, int64_t now_ms)
{
    unsigned k = kind % LIMITER_KINDS;
    double lat = latency_ms < 1 ? 1.0 : (double)latency_ms;
    if (c->round_start_ms == 0)
        c->round_start_ms = now_ms;
    if (sig != LIMITER_OK) {
        c->refusals++;
    } else {
        /* A kind first seen at a higher limit: its uncongested latency is estimated from
         * the queueing the other kinds showed in the last round. */
        if (c->base[k] <= 0)
            c->base[k] = lat / (c->limit <= LIMITER_LEARN_LIMIT ? 1.0 : c->last_q);
        /* The uncongested latency is learnt only while at most LIMITER_LEARN_LIMIT requests
         * are out: then apbot queues (almost) nothing at the ERP, so a queue it causes later
         * can never become the new normal. A slower ERP shows as queueing, the limit drops
         * to the learning level, and the baseline is learnt again there. */
        if (c->limit <= LIMITER_LEARN_LIMIT)
            c->base[k] += LIMITER_BASE_EWMA * (lat - c->base[k]);
        /* A few milliseconds over the baseline are not a queue worth backing off for: on a
         * fast ERP they are the client's own scheduling jitter (LIMITER_SLACK_MS). In slow
         * start a request sent before the round began was sent at the limit before the
         * doubling and cannot show the queue the doubling made: it does not count, or the
         * limit doubled again on old news (4 slots: 2, 4, 8, 16). */
        bool stale = c->slow_start && now_ms - latency_ms < c->round_start_ms;
        if (!stale) {
            c->ratio_sum += lat / (c->base[k] + LIMITER_SLACK_MS);
            c->samples++;
        }
    }
    /* A slow-start round past the learning level is one answer per session, however short
     * (TCP's one round trip): at 7 ms a request, 100 ms rounds made the ramp 0.3 s of a
     * partly idle ERP; the baseline's round at LIMITER_LEARN_LIMIT keeps its 100 ms. */
    int64_t round_ms = c->slow_start && c->limit > LIMITER_LEARN_LIMIT ? 0 : LIMITER_ROUND_MS;
    bool long_enough = now_ms - c->round_start_ms >= round_ms;
    bool overloaded = limiter_overloaded(c->refusals, c->samples + c->refusals);
    if (long_enough && (overloaded || c->samples + c->refusals >= c->limit))
        round_end(c, now_ms);
    return c->limit;
}

struct limiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool adaptive;
    struct limiter_core core;
    int in_flight;
    int waiting_warm, waiting_cold; /* in limiter_acquire_as */
    int reported;                   /* the limit last reported by limiter_changed */
    double reported_q;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int limiter_new(int max, bool adaptive, struct limiter **ret)
{
    struct limiter *l = apbot_xcalloc(1, sizeof(*l));
    pthread_mutex_init(&l->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cv, &ca);
    pthread_condattr_destroy(&ca);
    l->adaptive = adaptive;
    limiter_core_init(&l->core, max, adaptive ? (max < 2 ? max : 2) : max);
    l->reported = l->core.limit;
    *ret = l;
    return APBOT_OK;
}

void limiter_free(struct limiter *l)
{
    if (!l)
        return;
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

UNITTEST bool limiter_acquire(struct limiter *l, const atomic_bool *stop)
{
    return limiter_acquire_as(l, stop, true);
}

bool limiter_acquire_as(struct limiter *l, const atomic_bool *stop, bool warm)
{
    pthread_mutex_lock(&l->mu);
    int *waiting = warm ? &l->waiting_warm : &l->waiting_cold;
    (*waiting)++;
    /* A place goes to a warm session first: a cold one waits while any warm one does. */
    while ((l->in_flight >= l->core.limit || (!warm && l->waiting_warm > 0)) &&
           !atomic_load(stop)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 100 * 1000000L; /* look at the stop flag ten times a second */
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        int rc = pthread_cond_timedwait(&l->cv, &l->mu, &ts);
        if (rc != 0 && rc != ETIMEDOUT)
            break;
    }
    (*waiting)--;
    bool ok = !atomic_load(stop) && l->in_flight < l->core.limit;
    if (ok)
        l->in_flight++;
    if (warm && l->waiting_cold > 0)
        pthread_cond_broadcast(&l->cv); /* cold waiters may have waited for this one */
    pthread_mutex_unlock(&l->mu);
    return ok;
}

UNITTEST int limiter_waiting(struct limiter *l, bool warm)
{
    pthread_mutex_lock(&l->mu);
    int n = warm ? l->waiting_warm : l->waiting_cold;
    pthread_mutex_unlock(&l->mu);
    return n;
}

void limiter_release(struct limiter *l)
{
    pthread_mutex_lock(&l->mu);
    if (l->in_flight > 0)
        l->in_flight--;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

bool limiter_may_keep(struct limiter *l)
{
    pthread_mutex_lock(&l->mu);
    bool ok = l->in_flight <= l->core.limit;
    pthread_mutex_unlock(&l->mu);
    return ok;
}

void limiter_sample(struct limiter *l, const char *step, int64_t latency_ms,
                    enum limiter_signal sig)
{
    if (!l->adaptive)
        return;
    pthread_mutex_lock(&l->mu);
    int old = l->core.limit;
    limiter_core_sample(&l->core, limiter_kind(step), latency_ms, sig, now_ms());
    if (l->core.limit > old)
        pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

int limiter_limit(struct limiter *l)
{
    pthread_mutex_lock(&l->mu);
    int n = l->core.limit;
    pthread_mutex_unlock(&l->mu);
    return n;
}

bool limiter_changed(struct limiter *l, int *ret_old, int *ret_new, double *ret_q)
{
    pthread_mutex_lock(&l->mu);
    bool changed = l->core.limit != l->reported;
    if (changed) {
        *ret_old = l->reported;
        *ret_new = l->core.limit;
        *ret_q = l->core.last_q;
        l->reported = l->core.limit;
    }
    pthread_mutex_unlock(&l->mu);
    return changed;
}
