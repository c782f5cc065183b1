/*
 * test_limiter.c - the adaptive concurrency limit against a simulated ERP with a fixed number
 * of processing slots (a queue in front of them, random service times, the client's own time
 * between requests), simulated millisecond by millisecond in a deterministic loop: the limit
 * settles just above the slots (idle slots would waste the ERP, a long queue would only slow
 * its answers), follows a capacity that drops and comes back, cuts at once on overload, and
 * never leaves 1..max. Also the fixed limiter and the waiting of workers for a place.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "helpers/xorshift.h"
#include "run/limiter.h"

#define SIM_WORKERS 32

struct erp_sim {
    int slots;                  /* processing slots now */
    int cores;                  /* > 0: no queue; the requests in service share the cores */
    double contention;          /* with cores: extra work per request in service beyond them */
    int service_lo, service_hi; /* ms */
    int think_ms;               /* the client's time between two requests of a worker */
    uint32_t refuse_ppm;        /* answers refused (503) at random, parts per million */
    uint64_t rng;
    /* per worker */
    int state[SIM_WORKERS]; /* 0 thinking, 1 queued, 2 in service */
    int64_t until[SIM_WORKERS];
    int64_t sent[SIM_WORKERS];
    int queue[SIM_WORKERS * 2];
    int qhead, qlen, busy;
    double work_left[SIM_WORKERS]; /* with cores: CPU work a request still needs, ms */
    unsigned step[SIM_WORKERS];    /* with cores: the worker's requests so far (its kind: a
                                    * session logs in, then goes through lookup, form, check,
                                    * post) */
    /* what happened */
    int64_t done, busy_ms, queued_ms;
};

/* A request's speed with n in service on a processor-sharing ERP (as fixtures/erp-sim's
 * sim_cpu.c: a share of the cores, divided by the contention beyond them). */
static double ps_speed(const struct erp_sim *e, int n)
{
    if (n <= e->cores)
        return 1.0;
    return (double)e->cores / n / (1.0 + e->contention * (n - e->cores));
}

/* One millisecond of a processor-sharing ERP: every request in service progresses; those done
 * are answered. busy_ms counts core-ms spent (the ERP's work, contention included). */
static void ps_tick(struct erp_sim *e, struct limiter_core *c, int64_t t)
{
    int n = 0;
    for (int i = 0; i < SIM_WORKERS; i++)
        n += e->state[i] == 2;
    double speed = ps_speed(e, n);
    for (int i = 0; i < SIM_WORKERS; i++)
        if (e->state[i] == 2 && (e->work_left[i] -= speed) <= 0) {
            e->state[i] = 0;
            e->done++;
            e->until[i] = t + e->think_ms;
            /* a session's first request is its login, then lookup, form, check, post */
            unsigned kind = e->step[i] == 0 ? 4 : (e->step[i] - 1) % 4;
            e->step[i]++;
            limiter_core_sample(c, kind, t - e->sent[i], LIMITER_OK, t);
        }
    e->busy_ms += n < e->cores ? n : e->cores;
    for (int i = 0; i < SIM_WORKERS; i++)
        if (e->state[i] == 0 && e->until[i] <= t && i < c->limit) {
            e->state[i] = 2;
            e->sent[i] = t;
            int span = e->service_hi - e->service_lo + 1;
            e->work_left[i] = e->service_lo + (double)(xorshift64(&e->rng) % (uint64_t)span);
        }
}

/* Runs the ERP and the client for ms milliseconds from t0; the limiter decides how many
 * workers send. Returns the limit at the end; *ret_max_limit the largest seen. */
static int simulate(struct erp_sim *e, struct limiter_core *c, int64_t t0, int64_t ms,
                    int (*slots_at)(int64_t t), int *ret_max_limit, int *ret_min_limit)
{
    for (int64_t t = t0; t < t0 + ms; t++) {
        if (e->cores > 0) {
            ps_tick(e, c, t);
            if (ret_max_limit && c->limit > *ret_max_limit)
                *ret_max_limit = c->limit;
            if (ret_min_limit && c->limit < *ret_min_limit)
                *ret_min_limit = c->limit;
            continue;
        }
        if (slots_at)
            e->slots = slots_at(t);
        /* answers */
        for (int i = 0; i < SIM_WORKERS; i++)
            if (e->state[i] == 2 && e->until[i] <= t) {
                e->state[i] = 0;
                e->busy--;
                e->done++;
                e->until[i] = t + e->think_ms;
                bool refused = e->refuse_ppm && xorshift64(&e->rng) % 1000000u < e->refuse_ppm;
                limiter_core_sample(c, (unsigned)(i % 3), t - e->sent[i],
                                    refused ? LIMITER_OVERLOAD : LIMITER_OK, t);
            }
        /* workers within the limit send when their own time is over */
        for (int i = 0; i < SIM_WORKERS; i++)
            if (e->state[i] == 0 && e->until[i] <= t && i < c->limit) {
                e->state[i] = 1;
                e->sent[i] = t;
                e->queue[(e->qhead + e->qlen++) % (SIM_WORKERS * 2)] = i;
            }
        /* the ERP takes queued requests into free slots */
        while (e->qlen > 0 && e->busy < e->slots) {
            int i = e->queue[e->qhead];
            e->qhead = (e->qhead + 1) % (SIM_WORKERS * 2);
            e->qlen--;
            e->busy++;
            e->state[i] = 2;
            int span = e->service_hi - e->service_lo + 1;
            e->until[i] = t + e->service_lo + (int64_t)(xorshift64(&e->rng) % (uint64_t)span);
        }
        e->busy_ms += e->busy < e->slots ? e->busy : e->slots;
        e->queued_ms += e->qlen;
        if (ret_max_limit && c->limit > *ret_max_limit)
            *ret_max_limit = c->limit;
        if (ret_min_limit && c->limit < *ret_min_limit)
            *ret_min_limit = c->limit;
    }
    return c->limit;
}

static void erp_init(struct erp_sim *e, int slots, int lo, int hi, int think)
{
    memset(e, 0, sizeof(*e));
    e->slots = slots;
    e->service_lo = lo;
    e->service_hi = hi;
    e->think_ms = think;
    e->rng = 0x9E3779B97F4A7C15ull;
}

/* A calm ERP: 8 slots, 2..8 ms per request, 1 ms of client time: the limit settles a little
 * above 8 and keeps the slots busy. */
static void test_limiter_finds_the_slots(void **state)
{
    (void)state;
    struct erp_sim e;
    struct limiter_core c;
    erp_init(&e, 8, 2, 8, 1);
    limiter_core_init(&c, 16, 2);
    int hi = 0, lo = 100;
    simulate(&e, &c, 1, 20000, NULL, NULL, NULL);
    int64_t busy0 = e.busy_ms;
    simulate(&e, &c, 20001, 20000, NULL, &hi, &lo);
    double eff = (double)(e.busy_ms - busy0) / (8.0 * 20000);
    print_message("calm: limit %d (%d..%d over the second half), slot use %.2f\n", c.limit, lo, hi,
                  eff);
    assert_true(lo >= 8 && hi <= 16);
    assert_true(eff >= 0.90);
}

/* The start of a run: doubling until a round shows a queue reaches the ceiling of 16 on a calm
 * ERP within 200 ms (one session more a round took 1.4 s); on a slow ERP with 4 slots the
 * first queue ends it at no more than twice the slots. */
static void test_limiter_starts_fast_without_flooding(void **state)
{
    (void)state;
    struct erp_sim e;
    struct limiter_core c;
    erp_init(&e, 8, 2, 8, 1);
    limiter_core_init(&c, 16, 2);
    simulate(&e, &c, 1, 200, NULL, NULL, NULL);
    print_message("calm after 200 ms: limit %d\n", c.limit);
    assert_true(c.limit >= 16);

    erp_init(&e, 4, 40, 300, 2);
    limiter_core_init(&c, 16, 2);
    int64_t t = 1;
    int ended_at = 0;
    for (; t < 10000 && c.slow_start; t += 10)
        ended_at = simulate(&e, &c, t, 10, NULL, NULL, NULL);
    int hi = 0, lo = 100;
    simulate(&e, &c, t, 10000, NULL, &hi, &lo);
    print_message("month-end: slow start ended at %d after %lld ms, then %d..%d\n", ended_at,
                  (long long)t, lo, hi);
    assert_false(c.slow_start);
    assert_true(ended_at <= 2 * 4 + 1); /* the round that ends it may still add its one */
    assert_true(lo >= 4 && hi <= 4 + (int)LIMITER_BETA + 1);
}

/* A congested month-end ERP: 4 slots, slow requests: the limit stays a few above 4, not at
 * the ceiling of 16 (which would only queue). */
static void test_limiter_does_not_flood_a_slow_erp(void **state)
{
    (void)state;
    struct erp_sim e;
    struct limiter_core c;
    erp_init(&e, 4, 40, 300, 2);
    limiter_core_init(&c, 16, 2);
    int hi = 0, lo = 100;
    simulate(&e, &c, 1, 60000, NULL, NULL, NULL);
    int64_t busy0 = e.busy_ms, q0 = e.queued_ms;
    simulate(&e, &c, 60001, 60000, NULL, &hi, &lo);
    double eff = (double)(e.busy_ms - busy0) / (4.0 * 60000);
    double queue = (double)(e.queued_ms - q0) / 60000;
    print_message("month-end: limit %d..%d, slot use %.2f, queue %.1f requests\n", lo, hi, eff,
                  queue);
    assert_true(lo >= 4 && hi <= 4 + (int)LIMITER_BETA + 1);
    assert_true(eff >= 0.90);
    assert_true(queue <= LIMITER_BETA + 1);
}

static int varying_slots(int64_t t)
{
    return t < 20000 ? 8 : t < 40000 ? 2 : 8;
}

/* Capacity 8, then 2 for a while, then 8 again: the limit follows within a few seconds. */
static void test_limiter_follows_capacity(void **state)
{
    (void)state;
    struct erp_sim e;
    struct limiter_core c;
    erp_init(&e, 8, 5, 15, 1);
    limiter_core_init(&c, 16, 2);
    simulate(&e, &c, 1, 20000, varying_slots, NULL, NULL);
    int before = c.limit;
    int hi = 0, lo = 100;
    simulate(&e, &c, 20001, 5000, varying_slots, NULL, NULL);
    simulate(&e, &c, 25001, 15000, varying_slots, &hi, &lo);
    int during = c.limit;
    simulate(&e, &c, 40001, 10000, varying_slots, NULL, NULL);
    int after = c.limit;
    print_message("varying: %d with 8 slots, %d..%d with 2, %d with 8 again\n", before, lo, hi,
                  after);
    assert_true(before >= 8);
    assert_true(hi <= 2 + (int)LIMITER_BETA + 1 && during >= 2);
    assert_true(after >= 8);
}

/* A month-end ERP refuses a few percent of requests at random (503/429, posts stalled past
 * the time-out): that is not the bot's load, and the limit must not collapse to 1-2 on it.
 * 4 slots, 3% of answers refused: the limit stays at the slots or above and they stay busy. */
static void test_limiter_rides_out_random_refusals(void **state)
{
    (void)state;
    struct erp_sim e;
    struct limiter_core c;
    erp_init(&e, 4, 40, 300, 2);
    e.refuse_ppm = 30000;
    limiter_core_init(&c, 16, 2);
    int hi = 0, lo = 100;
    simulate(&e, &c, 1, 60000, NULL, NULL, NULL);
    int64_t busy0 = e.busy_ms;
    simulate(&e, &c, 60001, 60000, NULL, &hi, &lo);
    double eff = (double)(e.busy_ms - busy0) / (4.0 * 60000);
    print_message("month-end with 3%% refused: limit %d..%d, slot use %.2f\n", lo, hi, eff);
    assert_true(lo >= 3 && hi <= 4 + (int)LIMITER_BETA + 1);
    assert_true(eff >= 0.90);
}

/* A fixed limit for the comparison runs: a core that never changes its limit. */
static void fixed_core(struct limiter_core *c, int limit)
{
    limiter_core_init(c, limit, limit);
    c->max = limit;
    c->hold_rounds = 1 << 30; /* never a step above */
    c->ceiling = limit;
}

/* Requests answered per second and core-ms per request on a processor-sharing ERP (2 cores,
 * ~1.1 s of CPU per request, `contention` more work per request in service beyond the cores,
 * 25 ms of the client's own time) in `ms` after a first `warm` ms, at a fixed limit (fixed > 0)
 * or auto. */
static void ps_run(double contention, int fixed, int64_t warm, int64_t ms, double *ret_rate,
                   double *ret_work, int *ret_lo, int *ret_hi, int64_t *ret_lost)
{
    struct erp_sim e;
    struct limiter_core c;
    erp_init(&e, 32, 900, 1300, 25);
    e.cores = 2;
    e.contention = contention;
    if (fixed > 0)
        fixed_core(&c, fixed);
    else
        limiter_core_init(&c, 16, 2);
    simulate(&e, &c, 1, warm, NULL, NULL, NULL);
    int64_t done0 = e.done, busy0 = e.busy_ms;
    int hi = 0, lo = 100;
    simulate(&e, &c, warm + 1, ms, NULL, &hi, &lo);
    *ret_rate = (double)(e.done - done0) * 1000.0 / (double)ms;
    *ret_work = e.done > done0 ? (double)(e.busy_ms - busy0) / (double)(e.done - done0) : 0;
    if (ret_lo)
        *ret_lo = lo;
    if (ret_hi)
        *ret_hi = hi;
    if (ret_lost)
        *ret_lost = c.steps_lost;
}

/* An ERP whose requests share 2 cores (the CGI-era ERP): every latency grows as soon as
 * a third request is in service, and throughput falls. A latency-only limit (Vegas) kept 5
 * sessions there, each request costing the ERP 2.9x its work for a quarter of the throughput.
 * The knee: the first step past the cores shows the capacity lost and is taken back; auto
 * posts at least 95% of the best fixed setting with at most 1.1x one session's work per
 * request, over the first ten minutes (slow start and probes included) and after them. */
static void test_limiter_finds_the_knee_of_shared_cores(void **state)
{
    (void)state;
    double best = 0, work1 = 0;
    int best_at = 0;
    for (int n = 1; n <= 4; n++) {
        double rate, work;
        ps_run(0.47, n, 20000, 300000, &rate, &work, NULL, NULL, NULL);
        print_message("shared cores, fixed %d: %.3f requests/s, %.0f core-ms a request\n", n, rate,
                      work);
        if (n == 1)
            work1 = work;
        if (rate > best) {
            best = rate;
            best_at = n;
        }
    }
    double rate, work;
    int lo, hi;
    int64_t lost;
    ps_run(0.47, 0, 1, 600000, &rate, &work, &lo, &hi, &lost);
    print_message("shared cores, auto over 10 min: %.3f requests/s (%.2f of fixed %d), %.2fx the "
                  "work, limit %d..%d, %lld steps taken back\n",
                  rate, rate / best, best_at, work / work1, lo, hi, (long long)lost);
    assert_true(rate >= 0.95 * best);
    assert_true(work <= 1.1 * work1);
    assert_true(lost >= 1);
    ps_run(0.47, 0, 120000, 600000, &rate, &work, &lo, &hi, &lost);
    print_message("shared cores, auto after 2 min: %.3f requests/s, %.2fx the work, limit %d..%d\n",
                  rate, work / work1, lo, hi);
    assert_true(rate >= 0.95 * best);
    assert_true(work <= 1.1 * work1);
    assert_true(lo >= 2 && hi <= 3);
}

/* Shared cores without contention lose nothing to more sessions: latency grows, throughput
 * stays, the work per request too, like slots with a queue in front. Steps up past the cores
 * are neutral, not taken back, and auto keeps the cores busy. */
static void test_limiter_shared_cores_without_contention(void **state)
{
    (void)state;
    double rate2, work2, rate, work;
    int lo, hi;
    int64_t lost;
    ps_run(0.0, 2, 20000, 300000, &rate2, &work2, NULL, NULL, NULL);
    ps_run(0.0, 0, 1, 300000, &rate, &work, &lo, &hi, &lost);
    print_message(
        "shared cores, no contention: fixed 2 %.3f requests/s; auto %.3f, %.2fx the work, "
        "limit %d..%d, %lld steps taken back\n",
        rate2, rate, work / work2, lo, hi, (long long)lost);
    assert_true(rate >= 0.95 * rate2);
    assert_true(work <= 1.02 * work2);
    assert_int_equal(lost, 0);
    assert_true(hi > 2);
}

/* A step up is judged on its answers against the reference level: a loss of LIMITER_LOSS takes
 * it back, a gain of LIMITER_GAIN makes it the reference, anything between leaves it - but only
 * when the difference stands out LIMITER_Z standard errors from the noise of both; too few
 * answers wait, except for a clear loss of twice LIMITER_LOSS, which LIMITER_PROBE_EARLY
 * answers show. Without a reference there is nothing to lose. */
static void test_limiter_probe_verdict_table(void **state)
{
    (void)state;
    static const struct {
        double ref, ref_rse, cap, rse;
        int samples, need;
        enum limiter_verdict v;
    } rows[] = {
        /* tight answers (shared cores: every request slows alike) */
        {2.0, 0.03, 2.0, 0.03, 8, 8, LIMITER_NEUTRAL},
        {2.0, 0.03, 1.61, 0.03, 8, 8, LIMITER_NEUTRAL},
        {2.0, 0.03, 1.59, 0.03, 8, 8, LIMITER_LOST},
        {2.0, 0.03, 1.36, 0.04, 8, 8, LIMITER_LOST},
        {2.0, 0.03, 2.19, 0.03, 8, 8, LIMITER_NEUTRAL},
        {2.0, 0.02, 2.21, 0.02, 8, 8, LIMITER_GAINED},
        {2.0, 0.03, 4.0, 0.05, 16, 16, LIMITER_GAINED},
        {2.0, 0.03, 1.0, 0.05, 7, 8, LIMITER_LOST},
        {2.0, 0.03, 1.0, 0.08, 3, 8, LIMITER_LOST},
        {2.0, 0.03, 1.0, 0.08, 2, 8, LIMITER_WAIT},
        {2.0, 0.03, 1.21, 0.05, 3, 8, LIMITER_WAIT},
        {2.0, 0.03, 1.19, 0.05, 3, 8, LIMITER_LOST},
        {2.0, 0.03, 1.5, 0.03, 7, 8, LIMITER_WAIT},
        {2.0, 0.03, 3.0, 0.03, 7, 8, LIMITER_WAIT},
        {2.0, 0.03, 2.0, 1.0, 0, 8, LIMITER_WAIT},
        /* noisy answers (month-end: stalls, logins, a busy client): no knee in them */
        {4.0, 0.15, 2.5, 0.2, 8, 8, LIMITER_NEUTRAL},
        {4.0, 0.15, 1.5, 0.2, 8, 8, LIMITER_LOST},
        {4.0, 0.15, 6.0, 0.2, 8, 8, LIMITER_NEUTRAL},
        {4.0, 0.15, 1.5, 0.3, 3, 8, LIMITER_WAIT},
        {4.0, 0.05, 0.5, 0.3, 3, 8, LIMITER_LOST},
        /* one-answer estimates never decide */
        {2.0, 1.0, 1.0, 0.05, 8, 8, LIMITER_NEUTRAL},
        /* no reference */
        {0.0, 1.0, 1.0, 0.05, 8, 8, LIMITER_NEUTRAL},
        {0.0, 1.0, 0.1, 1.0, 0, 8, LIMITER_NEUTRAL},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct limiter_estimate ref = {rows[i].ref, rows[i].ref_rse, 8};
        struct limiter_estimate now = {rows[i].cap, rows[i].rse, rows[i].samples};
        enum limiter_verdict v = limiter_probe_verdict(&ref, &now, rows[i].need);
        if (v != rows[i].v)
            print_message("row %zu: %.2f against %.2f on %d of %d: %d\n", i, rows[i].cap,
                          rows[i].ref, rows[i].samples, rows[i].need, (int)v);
        assert_int_equal(v, rows[i].v);
    }
}

/* The decision itself: at least LIMITER_REFUSALS_MIN refusals, and at least
 * LIMITER_REFUSAL_SHARE of the round's answers. */
static void test_limiter_overloaded_table(void **state)
{
    (void)state;
    static const struct {
        int refusals, answers;
        bool overloaded;
    } rows[] = {
        {0, 0, false},   {0, 10, false},  {1, 1, false}, {1, 2, false},   {2, 2, true},
        {2, 20, true},   {2, 21, false},  {3, 30, true}, {3, 31, false},  {10, 10, true},
        {5, 100, false}, {10, 100, true}, {2, 0, true},  {1, 100, false},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        if (limiter_overloaded(rows[i].refusals, rows[i].answers) != rows[i].overloaded)
            print_message("row %zu: %d of %d\n", i, rows[i].refusals, rows[i].answers);
        assert_int_equal(limiter_overloaded(rows[i].refusals, rows[i].answers), rows[i].overloaded);
    }
}

static void test_limiter_cuts_on_overload_and_stays_in_bounds(void **state)
{
    (void)state;
    struct limiter_core c;
    limiter_core_init(&c, 12, 12);
    int64_t t = 1000;
    limiter_core_sample(&c, 1, 10, LIMITER_OK, t);
    limiter_core_sample(&c, 1, 10, LIMITER_OVERLOAD, t + 200);
    assert_int_equal(c.limit, 12); /* one refusal is not overload */
    limiter_core_sample(&c, 1, 10, LIMITER_OVERLOAD, t + 210);
    assert_int_equal(c.limit, 9); /* two of three answers: a quarter less, at once */
    limiter_core_sample(&c, 1, 10, LIMITER_TIMEOUT, t + 400);
    limiter_core_sample(&c, 1, 10, LIMITER_TIMEOUT, t + 410);
    assert_int_equal(c.limit, 6);
    /* a lone refusal among a round's worth of answers changes nothing */
    struct limiter_core d;
    limiter_core_init(&d, 12, 12);
    for (int i = 0; i < 11; i++)
        limiter_core_sample(&d, 1, 10, LIMITER_OK, t + i);
    limiter_core_sample(&d, 1, 10, LIMITER_OVERLOAD, t + 300);
    assert_true(d.limit >= 12);
    for (int i = 0; i < 100; i++)
        limiter_core_sample(&c, 1, 10, LIMITER_OVERLOAD, t + 600 + i * 200);
    assert_int_equal(c.limit, 1); /* never below 1 */
    for (int i = 0; i < 2000; i++)
        limiter_core_sample(&c, 1, 10, LIMITER_OK, t + 20000 + i * 100);
    assert_int_equal(c.limit, 12); /* never above max */
    limiter_core_init(&d, 4, 99);
    assert_int_equal(d.limit, 4);
    limiter_core_init(&d, 0, 0);
    assert_int_equal(d.limit, 1);
}

/* Timeouts among quick answers are stalls, not load: no cut; among slow answers, or alone,
 * they are refusals as ever. */
static void test_limiter_timeouts_without_a_queue_are_not_load(void **state)
{
    (void)state;
    struct limiter_core c;
    int64_t t = 1000;
    limiter_core_init(&c, 16, 2);
    for (int i = 0; i < 40; i++) /* learn the baseline: 100 ms */
        limiter_core_sample(&c, 1, 100, LIMITER_OK, t += 60);
    limiter_core_init(&c, 16, 8);
    c.base[1] = 100;
    c.learnt[1] = 40;
    c.learnt_total = 40;
    c.slow_start = false;
    for (int i = 0; i < 6; i++)
        limiter_core_sample(&c, 1, 110, LIMITER_OK, t += 20);
    limiter_core_sample(&c, 1, 4000, LIMITER_TIMEOUT, t += 20);
    limiter_core_sample(&c, 1, 4000, LIMITER_TIMEOUT, t += 200);
    assert_true(c.limit >= 8); /* two stalled posts of eight answers, no queue: no cut */
    /* the same two among slow answers: the ERP is loaded */
    struct limiter_core d = c;
    d.limit = 8;
    for (int i = 0; i < 6; i++)
        limiter_core_sample(&d, 1, 300, LIMITER_OK, t += 20);
    limiter_core_sample(&d, 1, 4000, LIMITER_TIMEOUT, t += 20);
    limiter_core_sample(&d, 1, 4000, LIMITER_TIMEOUT, t += 200);
    assert_int_equal(d.limit, 6);
    /* timeouts alone: a cut */
    struct limiter_core e = c;
    e.limit = 8;
    limiter_core_sample(&e, 1, 4000, LIMITER_TIMEOUT, t += 300);
    limiter_core_sample(&e, 1, 4000, LIMITER_TIMEOUT, t += 300);
    assert_int_equal(e.limit, 6);
    /* 503s among quick answers: refusals as ever */
    struct limiter_core g = c;
    g.limit = 8;
    for (int i = 0; i < 6; i++)
        limiter_core_sample(&g, 1, 110, LIMITER_OK, t += 20);
    limiter_core_sample(&g, 1, 5, LIMITER_OVERLOAD, t += 20);
    limiter_core_sample(&g, 1, 5, LIMITER_OVERLOAD, t += 200);
    assert_int_equal(g.limit, 6);
}

struct waiter {
    struct limiter *l;
    atomic_bool *stop;
    atomic_int *inside, *most;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    for (int i = 0; i < 50; i++) {
        if (!limiter_acquire(w->l, w->stop))
            break;
        int n = atomic_fetch_add(w->inside, 1) + 1;
        int m = atomic_load(w->most);
        while (n > m && !atomic_compare_exchange_weak(w->most, &m, n))
            ;
        usleep(200);
        atomic_fetch_sub(w->inside, 1);
        limiter_release(w->l);
    }
    return NULL;
}

/* Eight threads, a fixed limit of three: never more than three inside; a stop frees waiters. */
static void test_limiter_fixed_gate(void **state)
{
    (void)state;
    struct limiter *l = NULL;
    assert_int_equal(limiter_new(3, false, &l), APBOT_OK);
    atomic_bool stop = false;
    atomic_int inside = 0, most = 0;
    pthread_t t[8];
    struct waiter w = {.l = l, .stop = &stop, .inside = &inside, .most = &most};
    for (int i = 0; i < 8; i++)
        assert_int_equal(pthread_create(&t[i], NULL, waiter_main, &w), 0);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&most), 3);
    assert_int_equal(limiter_limit(l), 3);
    /* with every place taken, a raised stop makes acquire give up */
    for (int i = 0; i < 3; i++)
        assert_true(limiter_acquire(l, &stop));
    atomic_store(&stop, true);
    assert_false(limiter_acquire(l, &stop));
    limiter_free(l);
}

/* A worker may keep its place for another item while the places taken are within the limit;
 * once the limit drops below them it may not, until enough places are given back. */
static void test_limiter_may_keep(void **state)
{
    (void)state;
    struct limiter *l = NULL;
    assert_int_equal(limiter_new(8, true, &l), APBOT_OK);
    atomic_bool stop = false;
    int limit = limiter_limit(l);
    assert_true(limit >= 2);
    assert_int_equal(limiter_changes(l), 0);
    for (int i = 0; i < limit; i++)
        assert_true(limiter_acquire(l, &stop));
    assert_true(limiter_may_keep(l));
    /* refusals until a round ends and cuts the limit (rounds last ~100 ms; 5 s at most) */
    for (int i = 0; i < 500 && limiter_limit(l) >= limit; i++) {
        limiter_sample(l, "post", "POST", 100, LIMITER_OVERLOAD);
        usleep(10000);
    }
    int lower = limiter_limit(l);
    assert_true(lower < limit);
    assert_true(limiter_changes(l) >= 1); /* the run's limit_changes */
    assert_false(limiter_may_keep(l));
    for (int taken = limit; taken > lower; taken--)
        limiter_release(l);
    assert_true(limiter_may_keep(l));
    limiter_free(l);
}

struct taker {
    struct limiter *l;
    atomic_bool *stop;
    bool warm;
    atomic_int *order; /* 1 + how many took a place before this one */
    atomic_int *taken;
};

static void *taker_main(void *arg)
{
    struct taker *t = arg;
    if (limiter_acquire_as(t->l, t->stop, t->warm)) {
        atomic_store(t->order, atomic_fetch_add(t->taken, 1) + 1);
        limiter_release(t->l);
    }
    return NULL;
}

static void wait_for(struct limiter *l, bool warm, int n)
{
    while (limiter_waiting(l, warm) != n)
        usleep(1000);
}

/* One place, held; a cold session and then a warm one wait for it: the warm one gets it
 * first although it came last, then the cold one. */
static void test_limiter_warm_sessions_first(void **state)
{
    (void)state;
    struct limiter *l = NULL;
    assert_int_equal(limiter_new(1, false, &l), APBOT_OK);
    atomic_bool stop = false;
    atomic_int taken = 0, warm_order = 0, cold_order = 0;
    assert_true(limiter_acquire(l, &stop));
    struct taker cold = {
        .l = l, .stop = &stop, .warm = false, .order = &cold_order, .taken = &taken};
    struct taker warm = {
        .l = l, .stop = &stop, .warm = true, .order = &warm_order, .taken = &taken};
    pthread_t tc, tw;
    assert_int_equal(pthread_create(&tc, NULL, taker_main, &cold), 0);
    wait_for(l, false, 1);
    assert_int_equal(pthread_create(&tw, NULL, taker_main, &warm), 0);
    wait_for(l, true, 1);
    limiter_release(l);
    pthread_join(tw, NULL);
    pthread_join(tc, NULL);
    assert_int_equal(atomic_load(&warm_order), 1);
    assert_int_equal(atomic_load(&cold_order), 2);
    /* a cold session alone is not held back */
    atomic_store(&taken, 0);
    assert_true(limiter_acquire_as(l, &stop, false));
    limiter_release(l);
    limiter_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_limiter_finds_the_slots),
        cmocka_unit_test(test_limiter_starts_fast_without_flooding),
        cmocka_unit_test(test_limiter_does_not_flood_a_slow_erp),
        cmocka_unit_test(test_limiter_follows_capacity),
        cmocka_unit_test(test_limiter_rides_out_random_refusals),
        cmocka_unit_test(test_limiter_finds_the_knee_of_shared_cores),
        cmocka_unit_test(test_limiter_shared_cores_without_contention),
        cmocka_unit_test(test_limiter_probe_verdict_table),
        cmocka_unit_test(test_limiter_overloaded_table),
        cmocka_unit_test(test_limiter_cuts_on_overload_and_stays_in_bounds),
        cmocka_unit_test(test_limiter_timeouts_without_a_queue_are_not_load),
        cmocka_unit_test(test_limiter_fixed_gate),
        cmocka_unit_test(test_limiter_may_keep),
        cmocka_unit_test(test_limiter_warm_sessions_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
