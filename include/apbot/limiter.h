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
 *     average ratio q = latency / uncongested latency gives the requests queued at the ERP
 *     because of apbot: queue = limit * (1 - 1/q);
 *   - fewer than LIMITER_ALPHA queued: one more session (the ERP has idle slots); more than
 *     LIMITER_BETA: down to limit/q + ALPHA at once (the ERP lost capacity); in between: stay;
 *   - a timeout, a 503 or a 429 cuts the limit by a quarter at once (at most once a round),
 *     and Retry-After is honoured by the item's backoff;
 *   - never above the flow's max-sessions (a licence or policy ceiling), never below 1.
 *
 * Why it is safe: it only ever lowers the load below what a fixed setting would impose,
 * reacts to overload within one round, and keeps a small standing queue (ALPHA..BETA
 * requests) so that the ERP's slots never wait for apbot's own processing between requests.
 * The core (limiter_core_*) is pure and deterministic for tests; limiter_* wraps it with a
 * mutex and a condition variable for the workers.
 */
#ifndef APBOT_LIMITER_H
#define APBOT_LIMITER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "apbot/error.h"

#define LIMITER_KINDS 16      /* request kinds told apart (step names hashed) */
#define LIMITER_ALPHA 2.0     /* queued requests below which the limit grows */
#define LIMITER_BETA 4.0      /* queued requests above which the limit shrinks */
#define LIMITER_ROUND_MS 100  /* shortest round */
#define LIMITER_BASE_EWMA 0.2 /* weight of one sample in the uncongested latency */
#define LIMITER_LEARN_LIMIT 2 /* the uncongested latency is learnt at this limit or below */

/* What an answer said about the ERP's load. */
enum limiter_signal {
    LIMITER_OK = 0,   /* answered (any status but overload) */
    LIMITER_OVERLOAD, /* 503 or 429: the ERP refused for load */
    LIMITER_TIMEOUT,  /* no answer in time */
};

/* The pure core: state of the adaptive limit. Zero-initialise through limiter_core_init. */
struct limiter_core {
    int max, limit;
    double base[LIMITER_KINDS]; /* uncongested latency per kind, ms (0 = not learnt yet) */
    double ratio_sum;           /* this round's sum of latency / baseline */
    int samples;                /* answers this round */
    bool overload;              /* an overload signal this round */
    int64_t round_start_ms;
    int64_t changes; /* times the limit changed */
    double last_q;   /* the last round's latency ratio (for the log) */
};

/* Starts at `initial` (clamped to 1..max). Cannot fail. */
void limiter_core_init(struct limiter_core *c, int max, int initial);
/* One answer of kind (any int, hashed) with its latency at time now_ms (any monotonic ms).
 * Returns the limit after it. Pure. */
int limiter_core_sample(struct limiter_core *c, unsigned kind, int64_t latency_ms,
                        enum limiter_signal sig, int64_t now_ms);

/* The kind of a request from its step name ("lookup", "post", ...). Pure. */
unsigned limiter_kind(const char *step);

struct limiter;

/* A limiter for `max` sessions: adaptive (starting at min(max, 2)) or fixed at max. */
int limiter_new(int max, bool adaptive, struct limiter **ret) APBOT_MUST_USE;
void limiter_free(struct limiter *l); /* NULL is fine */
/* Waits until fewer than `limit` sessions work (true), or stop is raised (false). */
bool limiter_acquire(struct limiter *l, const atomic_bool *stop);
void limiter_release(struct limiter *l);
/* Feeds one answer (no-op for a fixed limiter). */
void limiter_sample(struct limiter *l, const char *step, int64_t latency_ms,
                    enum limiter_signal sig);
/* The current limit. */
int limiter_limit(struct limiter *l);
/* The limit's history for the log: true (and old/new) once per change since the last call. */
bool limiter_changed(struct limiter *l, int *ret_old, int *ret_new, double *ret_q);

#endif
