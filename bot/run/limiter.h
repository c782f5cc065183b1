/*
 * limiter.h - how many ERP sessions may work at once: a fixed number, or an adaptive limit
 * that finds the ERP's capacity and stays just above it (`apbot run --concurrency auto`).
 *
 * At month-end the ERP is the bottleneck. Every worker holds at most one request at the ERP,
 * so the number of working sessions is the number of requests apbot keeps in the ERP's
 * queue. Too few leave the ERP's processing slots idle; too many only lengthen its queue,
 * which makes answers slow, times requests out, and makes the ERP commit long after a client
 * gave up (the late commits a settle delay must outlast). The adaptive limit is TCP Vegas
 * applied to request latency:
 *
 *   - every answer's latency is compared with the uncongested latency of its kind of request
 *     (a search, a form, a post: per step name), an average learnt while at most
 *     LIMITER_LEARN_LIMIT requests were out (not a minimum: ERP service times vary a lot, and
 *     a queue apbot causes must never become the baseline);
 *   - once per round (as many answers as the limit, and at least LIMITER_ROUND_MS), the
 *     average ratio q = latency / (uncongested latency + LIMITER_SLACK_MS) gives the requests
 *     queued at the ERP because of apbot: queue = limit * (1 - 1/q) (q below 1 counts as 1).
 *     The slack: on an ERP that answers in 2-8 ms (calm), the client's own scheduling delays
 *     on a busy machine are as large as the service time, and without it auto shrank to 6-12
 *     sessions where 16 posted a third more (bench, load 8); a queue adding less than 5 ms a
 *     request costs the ERP nothing worth backing off for, and on slower ERPs (50 ms and
 *     more) the slack changes q by a few percent;
 *   - fewer than LIMITER_ALPHA queued: one more session (the ERP has idle slots); more than
 *     LIMITER_BETA: down to limit/q + ALPHA at once (the ERP lost capacity); in between: stay;
 *   - slow start: until the first round that shows LIMITER_GAMMA (one) request queued or
 *     any refusal, the limit doubles instead of growing by one, as TCP Vegas's slow start
 *     does, but its first step from the learning level is one session (2, 3, 6, 12, 16): on
 *     an ERP whose requests share 2 cores, 2 -> 4 burnt 1.9x the work for the seconds the
 *     knee took to judge it, 2 -> 3 1.45x. One more session a round took 1.4 s to reach 16
 *     on calm, a sixth of a 6-second bench row at a fraction of the rate. Doubling
 *     overshoots the ERP's slots by at most the limit it doubled from; the first round that
 *     sees a queue ends the doubling for the rest of the run (BETA and the cut then apply as
 *     ever). A request sent before the round began does not count in it (it cannot show what
 *     the doubling did), and past the learning level a slow-start round is one answer per
 *     session, without the 100 ms;
 *   - refusals (a timeout, a 503 or a 429) cut the limit by a quarter (at least one) when a
 *     round has at least LIMITER_REFUSALS_MIN of them and they are at least
 *     LIMITER_REFUSAL_SHARE of its answers; the round then ends at once. A lone refusal among
 *     many answers is not the bot's load: an ERP refuses a few percent of requests at random
 *     at month-end (the month-end scenario: 3% 503/429, 3% of posts stalled past the
 *     time-out), and cutting on each one kept the limit at 1-3 where 4 slots wanted 6-8
 *     sessions (measured: 3.6 invoices/s against 7.4 at a fixed 8). Retry-After is honoured
 *     by the item's backoff whatever the limit does. A timeout counts only when the round's
 *     answers show a queue (latency ratio LIMITER_TIMEOUT_QUEUE or more) or there are no
 *     others: a stalled post among quick answers is a fault of the ERP, not its load, and at
 *     a batch's end, where the few answers left are such stalls, each one cut the limit by a
 *     quarter while the last items waited for a place;
 *   - never above the flow's max-sessions (a licence or policy ceiling), never below 1.
 *
 * Where the ERP stops gaining (the knee). Vegas reads latency only, and keeps ALPHA..BETA
 * requests queued at the ERP. That is free on an ERP with a queue of slots in front (a request
 * waiting for a slot costs nothing but its wait) and ruinous on one whose requests share a few
 * cores (a CGI-era ERP forking an interpreter per request, an application server's threads):
 * there every request in service slows down at once, throughput stays or falls, and each one
 * beyond the cores costs the ERP more work (time slicing, caches, a collector). Measured on
 * such an ERP (2 cores): 4 sessions made every answer ~4 s instead of 1.1 s, posted 5% more
 * and burnt 1.9x the CPU per invoice; Vegas saw "3 queued" and stayed there. So every step up
 * (slow start's doubling too) is judged by what it served: a level's capacity is its limit
 * over its latency ratio (Little's law with the uncongested latency as the work: the requests
 * the ERP serves at once), read from the answers to requests sent at that level (the mean
 * without the eighth highest and lowest, and its standard error). Against the reference
 * level (the one the climb started from, or the last step that clearly gained):
 *   - LIMITER_LOSS (20%) less, and LIMITER_Z (3) standard errors clear of both levels' noise:
 *     the step is taken back to the reference at once, and no step above it follows for a
 *     hold of LIMITER_HOLD_ROUNDS rounds, doubling with every step that loses again (up to
 *     LIMITER_HOLD_MAX): a probe costs the ERP work, and the knee of a machine moves seldom;
 *   - LIMITER_GAIN (10%) more, as clearly: the new level becomes the reference;
 *   - anything else (the flat throughput of slots past the knee, or answers too noisy to
 *     tell): the step stays, and Vegas goes on as above.
 *   A step is judged on LIMITER_PROBE_MIN answers (at least a round's), or LIMITER_PROBE_EARLY
 *   when it lost twice LIMITER_LOSS; no further step is taken meanwhile. The noise test is what
 *   keeps a month-end ERP's slots (stalls, logins, faults, a busy client: answers whose ratio
 *   varies by 2x and more) from being read as a knee: unweighed, 12 of 38 steps up "lost" in
 *   a 600-invoice batch and the limit sat at 2-7, 95 s instead of 86 (load 4-5). A cut
 *   (Vegas's long queue, refusals) ends a judgement, and below the reference drops it: the
 *   ERP changed, measure again. In the simulation of test_limiter.c (2 cores, 1.1 s a
 *   request, 47% more work per request beyond the cores) auto posts 0.96-0.98 of the best
 *   fixed setting (2) at 1.02-1.04x one session's work per request, where Vegas alone kept
 *   5-6 sessions, posting 0.36 of it at 2.85x the work.
 *
 * Parameters: ALPHA 3 / BETA 6 queued requests. The estimate counts every session as having
 * a request out, but a session spends part of its time on its own side (page parsing, the
 * synced state writes), so the real queue is smaller than the estimate; with 2 / 4 auto
 * stayed at 4-6 sessions on month-end's 4 slots and a fixed 8 posted 5% more (bench, load
 * 9). A standing queue of 3-6 keeps the slots fed and still bounds the ERP's queue;
 * rounds of at least LIMITER_ROUND_MS and as many answers as the limit (one
 * round is about one request per session, so a round's average sees every session); the
 * baseline learnt by an EWMA of weight LIMITER_BASE_EWMA only at a limit of
 * LIMITER_LEARN_LIMIT or below; refusals as above.
 *
 * Why it is safe: it never goes above what a fixed setting of max-sessions would impose;
 * the knee only ever takes a step back or holds the limit where it is;
 * queueing it causes is measured against a baseline it cannot raise itself (learnt only with
 * at most LIMITER_LEARN_LIMIT requests out), so growth stops at ALPHA..BETA requests queued
 * and a drop of capacity shrinks it within a round or two, in one step to where the queue is
 * ALPHA again; when the ERP refuses a real share of requests (10% or more in a round, at least
 * two) it backs off multiplicatively, round after round, down to 1. Random refusals below that
 * share leave the limit to the latency signal, which still sees any queue they hide.
 * The core (limiter_core_*) is pure and deterministic for tests; limiter_* wraps it with a
 * mutex and a condition variable for the workers.
 */
#ifndef APBOT_LIMITER_H
#define APBOT_LIMITER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "apbot/error.h"

#define LIMITER_KINDS 16           /* request kinds told apart (step names hashed) */
#define LIMITER_ALPHA 3.0          /* queued requests below which the limit grows */
#define LIMITER_BETA 6.0           /* queued requests above which the limit shrinks */
#define LIMITER_GAMMA 1.0          /* queued requests that end the slow start */
#define LIMITER_ROUND_MS 100       /* shortest round */
#define LIMITER_BASE_EWMA 0.2      /* weight of one sample in the uncongested latency */
#define LIMITER_LEARN_LIMIT 2      /* the uncongested latency is learnt at this limit or below */
#define LIMITER_LEARN_ANSWERS 12   /* ... from this many answers before the limit first grows */
#define LIMITER_SLACK_MS 5.0       /* latency over the baseline ignored, ms */
#define LIMITER_REFUSALS_MIN 2     /* refusals in a round before the limit is cut */
#define LIMITER_REFUSAL_SHARE 0.10 /* ... and their share of the round's answers */
#define LIMITER_TIMEOUT_QUEUE 1.5  /* latency ratio below which timeouts are no refusals */
#define LIMITER_PROBE_MIN 8        /* answers a step up is judged on (at least the limit) */
#define LIMITER_PROBE_EARLY 3      /* ... or this many when the loss is twice LIMITER_LOSS */
#define LIMITER_LOSS 0.20          /* capacity lost by a step up that takes it back */
#define LIMITER_GAIN 0.10          /* capacity won by a step up that makes it the reference */
#define LIMITER_HOLD_ROUNDS 32     /* rounds without a step up after one that lost capacity */
#define LIMITER_HOLD_MAX 512       /* ... doubling with each such step, up to this */
#define LIMITER_LEVEL_SAMPLES 64   /* answers a level's capacity is read from, at most */
#define LIMITER_Z 3.0              /* standard errors a loss or a gain must stand out by */

/* What an answer said about the ERP's load. */
enum limiter_signal {
    LIMITER_OK = 0,   /* answered (any status but overload) */
    LIMITER_OVERLOAD, /* 503 or 429: the ERP refused for load */
    LIMITER_TIMEOUT,  /* no answer in time */
};

/* A level's capacity as its answers show it: the requests the ERP serves at once there. */
struct limiter_estimate {
    double capacity; /* the limit over the mean latency ratio */
    double rse;      /* the relative standard error of that mean (1 with fewer than 2) */
    int samples;     /* answers it is read from */
};

/* What a step up did to the ERP's capacity (limiter_probe_verdict). */
enum limiter_verdict {
    LIMITER_WAIT = 0, /* too few answers yet */
    LIMITER_NEUTRAL,  /* about the same: the step may stay, the reference stays */
    LIMITER_GAINED,   /* more: the new level becomes the reference */
    LIMITER_LOST,     /* less: back to the reference, and hold */
};

/* The pure core: state of the adaptive limit. Zero-initialise through limiter_core_init. */
struct limiter_core {
    int max, limit;
    double base[LIMITER_KINDS]; /* uncongested latency per kind, ms (0 = not learnt yet) */
    int learnt[LIMITER_KINDS];  /* answers it was learnt from (0: estimated, or none) */
    int learnt_total;           /* answers learnt from, all kinds */
    double ratio_sum;           /* this round's sum of latency / baseline */
    int samples;                /* answers this round (LIMITER_OK) */
    int refusals;               /* timeouts, 503 and 429 this round */
    int timeouts;               /* ... of which timeouts */
    int64_t round_start_ms;
    int64_t changes; /* times the limit changed */
    double last_q;   /* the last round's latency ratio (for the log) */
    bool slow_start; /* doubling until the first round that shows a queue or a refusal */
    /* The knee (see "Where the ERP stops gaining" above). */
    int64_t changed_ms;          /* when the limit last changed: answers to requests sent before
                                  * it say nothing about the new limit */
    int ref_limit;               /* the level steps up are compared with (0: none yet) */
    struct limiter_estimate ref; /* its capacity */
    double level_ratio[LIMITER_LEVEL_SAMPLES]; /* the latency ratios of this level's last
                                                * answers sent after changed_ms (a ring) */
    int level_samples;                         /* ... how many came back */
    int probe_from;     /* a step up being judged: the limit before it (0: none) */
    int ceiling;        /* no step above it while hold_rounds > 0 */
    int hold_rounds;    /* rounds left without a step above the ceiling */
    int hold_next;      /* the next hold's rounds (doubles after each lost step) */
    int64_t steps_lost; /* steps up taken back (for tests and the log) */
    const char *why;    /* why the limit last changed (a static text, for the log) */
};
struct limiter;

/* A limiter for `max` sessions: adaptive (starting at min(max, 2)) or fixed at max. */
int limiter_new(int max, bool adaptive, struct limiter **ret) APBOT_MUST_USE;
void limiter_free(struct limiter *l); /* NULL is fine */
/*
 * Waits until fewer than `limit` sessions work (true), or stop is raised (false), for a session
 * that is warm (logged in) or cold (must log in first): a cold one gets a place only while no
 * warm one waits for it. With an adaptive limit below the number of workers, places went to
 * whichever worker woke first, so every worker logged in once in turn: month-end, auto at 7 of
 * 16 workers, 20 logins where a fixed 8 made 13 - a login costs the ERP as much slot time as an
 * invoice's search and form (4% of a run).
 */
bool limiter_acquire_as(struct limiter *l, const atomic_bool *stop, bool warm);
void limiter_release(struct limiter *l);
/* Whether a worker holding a place may keep it for another item: the places taken are within
 * the current limit (a lowered limit takes the place back at the worker's next release). */
bool limiter_may_keep(struct limiter *l);
/* Feeds one answer of step `step` sent with `method` (no-op for a fixed limiter). */
void limiter_sample(struct limiter *l, const char *step, const char *method, int64_t latency_ms,
                    enum limiter_signal sig);
/* The current limit. */
int limiter_limit(struct limiter *l);
/* How many times the limit changed (up or down) since limiter_new. */
int64_t limiter_changes(struct limiter *l);
/* The limit's history for the log: true (and old/new, the latency ratio and why, a static
 * text) once per change since the last call. */
bool limiter_changed(struct limiter *l, int *ret_old, int *ret_new, double *ret_q,
                     const char **ret_why);

#ifdef APBOT_UNITTEST /* static in the product (base/unittest.h) */
/* Starts at `initial` (clamped to 1..max). Cannot fail. */
void limiter_core_init(struct limiter_core *c, int max, int initial);
/* One answer of kind (any int, hashed) with its latency at time now_ms (any monotonic ms).
 * Returns the limit after it. Pure. */
int limiter_core_sample(struct limiter_core *c, unsigned kind, int64_t latency_ms,
                        enum limiter_signal sig, int64_t now_ms);
/* Whether a round with `refusals` of `answers` (refusals included) means overload. Pure. */
bool limiter_overloaded(int refusals, int answers);
/* What a step up did: the capacity it shows (`now`, from answers sent after it) against the
 * reference level's, judged once now->samples reaches `need` (or LIMITER_PROBE_EARLY for a
 * loss of twice LIMITER_LOSS). A loss or a gain counts only when it is LIMITER_Z standard
 * errors wide: an ERP whose answers vary a lot (faults, stalls, a busy client) shows no knee.
 * Pure. */
enum limiter_verdict limiter_probe_verdict(const struct limiter_estimate *ref,
                                           const struct limiter_estimate *now, int need);
/* limiter_acquire_as for a warm session. */
bool limiter_acquire(struct limiter *l, const atomic_bool *stop);
/* How many warm or cold sessions wait in limiter_acquire_as. */
int limiter_waiting(struct limiter *l, bool warm);
#endif

#endif
