/*
 * limiter.c - the number of ERP sessions working at once: fixed, or adaptive as described in
 * limiter.h (Vegas on request latency, cut on overload). The core is pure; the wrapper adds a
 * mutex and a condition variable so workers wait for a free place.
 */
#include "run/limiter.h"

#include <errno.h>
#include <math.h>
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
    c->hold_next = LIMITER_HOLD_ROUNDS;
}

/* The kind of a request from its step name ("lookup", "post", ...) and method: a step's page
 * (GET) and its submit (POST) are told apart. */
static unsigned limiter_kind(const char *step, const char *method)
{
    unsigned h = 2166136261u; /* FNV-1a */
    for (const char *p = step ? step : ""; *p; p++) {
        h ^= (unsigned char)*p;
        h *= 16777619u;
    }
    for (const char *p = method ? method : ""; *p; p++) {
        h ^= (unsigned char)*p;
        h *= 16777619u;
    }
    return h;
}

/* The refusals of this round that speak of load: every 503 and 429, and the timeouts unless
 * the round's answers show no queue (a stalled post among quick answers is the ERP's fault, not
 * its load: at a batch's end, where the few answers left are such stalls, every timeout cut
 * the limit by a quarter and left the last items waiting for a place). */
static int load_refusals(const struct limiter_core *c)
{
    double q = c->samples > 0 ? c->ratio_sum / c->samples : 0;
    bool no_queue = c->samples > 0 && q < LIMITER_TIMEOUT_QUEUE;
    return c->refusals - (no_queue ? c->timeouts : 0);
}

UNITTEST bool limiter_overloaded(int refusals, int answers)
{
    return refusals >= LIMITER_REFUSALS_MIN &&
           (double)refusals >= LIMITER_REFUSAL_SHARE * (double)(answers > 0 ? answers : 1);
}

UNITTEST enum limiter_verdict limiter_probe_verdict(const struct limiter_estimate *ref,
                                                    const struct limiter_estimate *now, int need)
{
    if (ref->capacity <= 0 || now->capacity <= 0)
        return LIMITER_NEUTRAL;                    /* nothing to compare with */
    double d = log(ref->capacity / now->capacity); /* > 0: capacity lost */
    double se = sqrt(ref->rse * ref->rse + now->rse * now->rse);
    bool clear = fabs(d) > LIMITER_Z * se;
    bool lost_much = now->capacity < ref->capacity * (1.0 - 2.0 * LIMITER_LOSS);
    if (now->samples < need && !(lost_much && clear && now->samples >= LIMITER_PROBE_EARLY))
        return LIMITER_WAIT;
    if (clear && now->capacity < ref->capacity * (1.0 - LIMITER_LOSS))
        return LIMITER_LOST;
    if (clear && now->capacity > ref->capacity * (1.0 + LIMITER_GAIN))
        return LIMITER_GAINED;
    return LIMITER_NEUTRAL;
}

/* The requests the ERP serves at once at this level, as its answers show: the sessions over
 * the latency ratio (Little's law with the uncongested latency as the work). The ratio is the
 * mean of the level's last LIMITER_LEVEL_SAMPLES answers without the eighth highest and lowest:
 * a few answers held up elsewhere (a stall, a login, the client's own scheduling on a busy
 * machine) must not pass for a level that lost capacity, and on an ERP whose every answer
 * slows down it is the mean. */
static struct limiter_estimate level_capacity(const struct limiter_core *c)
{
    struct limiter_estimate e = {.capacity = (double)c->limit, .rse = 1.0, .samples = 0};
    int n = c->level_samples < LIMITER_LEVEL_SAMPLES ? c->level_samples : LIMITER_LEVEL_SAMPLES;
    if (n == 0)
        return e;
    double v[LIMITER_LEVEL_SAMPLES];
    for (int i = 0; i < n; i++) { /* insertion sort: at most 64 */
        double x = c->level_ratio[i];
        int k = i;
        for (; k > 0 && v[k - 1] > x; k--)
            v[k] = v[k - 1];
        v[k] = x;
    }
    int cut = n / 8, m = n - 2 * cut;
    double sum = 0, sq = 0;
    for (int i = cut; i < n - cut; i++)
        sum += v[i];
    double q = sum / m;
    for (int i = cut; i < n - cut; i++)
        sq += (v[i] - q) * (v[i] - q);
    e.samples = c->level_samples;
    e.rse = m >= 2 ? sqrt(sq / (m - 1)) / q / sqrt((double)m) : 1.0;
    e.capacity = (double)c->limit / (q < 1.0 ? 1.0 : q);
    return e;
}

/* Answers a step up is judged on: a round's worth, and at least LIMITER_PROBE_MIN. */
static int probe_need(const struct limiter_core *c)
{
    return c->limit > LIMITER_PROBE_MIN ? c->limit : LIMITER_PROBE_MIN;
}

/*
 * The knee: what becomes of the limit Vegas proposes. A step up is judged against the
 * reference level once enough answers sent after it came back; a step that lost capacity is
 * taken back, and no step above the reference follows for a hold of rounds (doubling with
 * each lost step: a probe costs the ERP, and the knee of a shared machine moves seldom). A
 * cut ends a judgement and, below the reference, the reference itself (the ERP changed:
 * measure again). Returns the new limit.
 */
static int knee(struct limiter_core *c, int proposal)
{
    int limit = c->limit;
    if (c->ref_limit == limit && c->level_samples >= probe_need(c))
        c->ref = level_capacity(c); /* the reference as it is now */
    if (proposal < limit) {
        c->probe_from = 0;
        if (proposal < c->ref_limit)
            c->ref_limit = 0;
        return proposal;
    }
    if (c->probe_from) {
        struct limiter_estimate cap = level_capacity(c);
        switch (limiter_probe_verdict(&c->ref, &cap, probe_need(c))) {
        case LIMITER_WAIT:
            return limit; /* no further step while this one is judged */
        case LIMITER_LOST:
            c->why = "the step up served less: back to the reference";
            c->steps_lost++;
            c->probe_from = 0;
            c->slow_start = false;
            c->ceiling = c->ref_limit;
            c->hold_rounds = c->hold_next;
            c->hold_next =
                c->hold_next * 2 < LIMITER_HOLD_MAX ? c->hold_next * 2 : LIMITER_HOLD_MAX;
            return c->ref_limit;
        case LIMITER_GAINED:
            c->ref_limit = limit;
            c->ref = cap;
            c->hold_next = LIMITER_HOLD_ROUNDS;
            break;
        case LIMITER_NEUTRAL:
            break;
        }
        c->probe_from = 0;
    }
    if (proposal > limit && c->hold_rounds > 0 && proposal > c->ceiling)
        proposal = c->ceiling > limit ? c->ceiling : limit;
    if (proposal > limit) {
        if (!c->ref_limit) {
            if (c->level_samples == 0)
                return limit; /* nothing known of this level yet: a round more */
            c->ref_limit = limit;
            c->ref = level_capacity(c);
        }
        c->probe_from = limit;
    }
    return proposal;
}

/* Ends a round: grows, holds or shrinks the limit from what the round showed. */
static void round_end(struct limiter_core *c, int64_t now_ms)
{
    int next = c->limit;
    int answers = c->samples + c->refusals;
    const char *why = c->why;
    if (limiter_overloaded(load_refusals(c), answers)) {
        why = "refusals";
        /* The ERP refused for load or did not answer in time: a quarter less, at least one. */
        int cut = c->limit * 3 / 4;
        next = cut < c->limit - 1 ? cut : c->limit - 1;
        c->slow_start = false;
    } else if (c->samples > 0) {
        double q = c->ratio_sum / c->samples;
        if (q < 1.0)
            q = 1.0;
        double queued = c->limit * (1.0 - 1.0 / q);
        if (queued < LIMITER_GAMMA && c->slow_start && c->refusals == 0) {
            /* The first step from the learning level is one session, so that on a machine
             * whose cores it overloads it costs little (2 -> 4 on 2 shared cores made the ERP
             * burn 1.9x the work for the seconds the step took to judge, 2 -> 3 1.45x); then
             * doubling, each step judged by the knee. */
            next = c->limit <= LIMITER_LEARN_LIMIT ? c->limit + 1 : c->limit * 2;
            why = "no queue yet (slow start)";
        } else if (queued < LIMITER_ALPHA) {
            next = c->limit + 1;
            c->slow_start = false; /* after a refusal no more doubling */
            why = "a short queue";
        } else if (queued > LIMITER_BETA) {
            /* Where the queue would be ALPHA again at today's latency, in one step. */
            int target = (int)(c->limit / q + LIMITER_ALPHA + 0.5);
            next = target < c->limit - 1 ? target : c->limit - 1;
            why = "a long queue";
        }
        if (queued >= LIMITER_GAMMA)
            c->slow_start = false;
        c->last_q = q;
    }
    if (next < 1)
        next = 1;
    if (next > c->max)
        next = c->max;
    /* The uncongested latencies first: a kind first seen above the learning level gets an
     * estimate, and the knee cannot use it (on a slow ERP the first round's two answers were
     * logins and lookups, the form and the post were first seen at 4). */
    if (c->limit <= LIMITER_LEARN_LIMIT && next > c->limit &&
        c->learnt_total < LIMITER_LEARN_ANSWERS)
        next = c->limit;
    if (c->hold_rounds > 0)
        c->hold_rounds--;
    c->why = why;
    next = knee(c, next);
    if (next != c->limit) {
        c->limit = next;
        c->changes++;
        c->changed_ms = now_ms;
        c->level_samples = 0;
    }
    c->ratio_sum = 0;
    c->samples = 0;
    c->refusals = 0;
    c->timeouts = 0;
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
        if (sig == LIMITER_TIMEOUT)
            c->timeouts++;
    } else {
        /* A kind first seen at a higher limit: its uncongested latency is estimated from
         * the queueing the other kinds showed in the last round. */
        if (c->base[k] <= 0)
            c->base[k] = lat / (c->limit <= LIMITER_LEARN_LIMIT ? 1.0 : c->last_q);
        /* The uncongested latency is learnt only while at most LIMITER_LEARN_LIMIT requests
         * are out: then apbot queues (almost) nothing at the ERP, so a queue it causes later
         * can never become the new normal. A slower ERP shows as queueing, the limit drops
         * to the learning level, and the baseline is learnt again there. */
        bool fresh = now_ms - latency_ms >= c->changed_ms; /* sent at this limit */
        if (c->limit <= LIMITER_LEARN_LIMIT && fresh) {
            c->base[k] += LIMITER_BASE_EWMA * (lat - c->base[k]);
            c->learnt[k]++;
            c->learnt_total++;
        }
        /* A few milliseconds over the baseline are not a queue worth backing off for: on a
         * fast ERP they are the client's own scheduling jitter (LIMITER_SLACK_MS). In slow
         * start a request sent before the round began was sent at the limit before the
         * doubling and cannot show the queue the doubling made: it does not count, or the
         * limit doubled again on old news (4 slots: 2, 4, 8, 16). */
        double ratio = lat / (c->base[k] + LIMITER_SLACK_MS);
        bool stale = c->slow_start && now_ms - latency_ms < c->round_start_ms;
        if (!stale) {
            c->ratio_sum += ratio;
            c->samples++;
        }
        /* What the level the limit is at shows: only requests sent at it, of kinds whose
         * uncongested latency was learnt (an estimated one says nothing of a knee). */
        if (fresh && c->learnt[k] > 0) {
            c->level_ratio[c->level_samples++ % LIMITER_LEVEL_SAMPLES] = ratio;
        }
    }
    /* A slow-start round past the learning level is one answer per session, however short
     * (TCP's one round trip): at 7 ms a request, 100 ms rounds made the ramp 0.3 s of a
     * partly idle ERP; the baseline's round at LIMITER_LEARN_LIMIT keeps its 100 ms. */
    int64_t round_ms = c->slow_start && c->limit > LIMITER_LEARN_LIMIT ? 0 : LIMITER_ROUND_MS;
    bool long_enough = now_ms - c->round_start_ms >= round_ms;
    bool overloaded = limiter_overloaded(load_refusals(c), c->samples + c->refusals);
    /* A step up judged (a clear loss needs few answers) ends the round at once. */
    bool judged = false;
    if (c->probe_from) {
        struct limiter_estimate cap = level_capacity(c);
        judged = limiter_probe_verdict(&c->ref, &cap, probe_need(c)) != LIMITER_WAIT;
    }
    if (judged || (long_enough && (overloaded || c->samples + c->refusals >= c->limit)))
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
    int64_t changes;                /* times a sample moved the limit */
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

void limiter_sample(struct limiter *l, const char *step, const char *method, int64_t latency_ms,
                    enum limiter_signal sig)
{
    if (!l->adaptive)
        return;
    pthread_mutex_lock(&l->mu);
    int old = l->core.limit;
    limiter_core_sample(&l->core, limiter_kind(step, method), latency_ms, sig, now_ms());
    if (l->core.limit != old)
        l->changes++;
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

int64_t limiter_changes(struct limiter *l)
{
    pthread_mutex_lock(&l->mu);
    int64_t n = l->changes;
    pthread_mutex_unlock(&l->mu);
    return n;
}

bool limiter_changed(struct limiter *l, int *ret_old, int *ret_new, double *ret_q,
                     const char **ret_why)
{
    pthread_mutex_lock(&l->mu);
    bool changed = l->core.limit != l->reported;
    if (changed) {
        *ret_old = l->reported;
        *ret_new = l->core.limit;
        *ret_q = l->core.last_q;
        *ret_why = l->core.why ? l->core.why : "";
        l->reported = l->core.limit;
    }
    pthread_mutex_unlock(&l->mu);
    return changed;
}
