/*
 * test_machine_exhaustive.c - the proof, routinely: every event sequence of the pure state
 * machine up to DEPTH events, from a new item, for several policies.
 *
 * Alphabet: every event, with not-found split into "settled" and "not settled" (the one
 * input the caller judges); for every other event the walk asserts that `settled` makes no
 * difference, so one symbol stands for both. Refused pairs end a sequence (the caller
 * persists nothing): only accepted sequences are counted. Counters are not symbols: they are
 * what the machine itself carries from step to step, starting at zero.
 *
 * Along every sequence, with ghost state the walk keeps beside the machine:
 *  1. no post without a confirmed absence: entering posting only on not-found with the
 *     settle delay passed, from checking or reconciling;
 *  2. every way out of posting on which the form may have reached the ERP restarts the
 *     settle delay (settle_mark), so an honest caller cannot call the next absence settled
 *     before the delay;
 *  3. posts <= max_posts between operator requeues (counted by the walk itself, and equal
 *     to the machine's counter), cycles <= max_cycles, attempts <= max_attempts;
 *  4. finishing never leads to posting, and once a document was saved nothing posts again
 *     until an operator requeues;
 *  5. terminal states absorb: only resolve-posted/-requeue (business-exception),
 *     resolve-posted/-requeue/-reject (manual-review) and doc-conflict (completed) leave
 *     them; everything else is refused and leaves the output untouched.
 * Over every node (state, counters) the walk reached:
 *  6. fed failures (the ERP never helps: claimed, lookup-failed, not-found settled, not-sent,
 *     unknown, followup-failed, and the definitive answers), every path reaches a terminal
 *     state within a bound computed from the budgets; lease-expired, released, unsettled
 *     not-found and found-unfinished are waiting, not failures, and are left out.
 *
 * Memoised on (state, counters, ghost, depth left): a subtree is checked once and its
 * sequences are counted, not re-walked. The count printed is the number of distinct accepted
 * sequences of exactly DEPTH events.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "apbot/machine.h"

#define DEPTH 16 /* events per sequence; at least 12 */

#define MAXP 3 /* bounds on the policies walked, for the memo's dimensions */
#define MAXC 5
#define MAXA 8

/* Symbols: events 0..MACHINE_EVENT__COUNT-1 (not-found meaning "settled"), plus this one. */
#define SYM_NOT_FOUND_UNSETTLED MACHINE_EVENT__COUNT
#define SYM__COUNT (MACHINE_EVENT__COUNT + 1)

struct ghost {
    bool doc_saved; /* a document was saved (finishing entered) since the last requeue */
    int posts;      /* entries into posting since the last requeue that may have been sent */
};

struct memo_entry {
    bool done;
    uint64_t paths;
};

struct walk {
    struct machine_policy pol;
    /* [state][posts][cycles][attempts][doc_saved][depth] */
    struct memo_entry memo[MACHINE_STATE__COUNT][MAXP + 1][MAXC + 1][MAXA + 1][2][DEPTH + 1];
    bool reached[MACHINE_STATE__COUNT][MAXP + 1][MAXC + 1][MAXA + 1];
    uint64_t calls;
};

static struct walk W;

static enum machine_event sym_event(int sym, bool *ret_settled)
{
    *ret_settled = sym != SYM_NOT_FOUND_UNSETTLED;
    return sym == SYM_NOT_FOUND_UNSETTLED ? MACHINE_EV_NOT_FOUND : (enum machine_event)sym;
}

static bool leaves_terminal(enum machine_state s, enum machine_event e)
{
    switch (s) {
    case MACHINE_COMPLETED:
        return e == MACHINE_EV_DOC_CONFLICT;
    case MACHINE_BUSINESS_EXCEPTION:
        return e == MACHINE_EV_RESOLVE_POSTED || e == MACHINE_EV_RESOLVE_REQUEUE;
    case MACHINE_MANUAL_REVIEW:
        return e == MACHINE_EV_RESOLVE_POSTED || e == MACHINE_EV_RESOLVE_REQUEUE ||
               e == MACHINE_EV_RESOLVE_REJECT;
    case MACHINE_NEW:
    case MACHINE_CHECKING:
    case MACHINE_POSTING:
    case MACHINE_RECONCILING:
    case MACHINE_FINISHING:
    case MACHINE_STATE__COUNT:
    case MACHINE_STATE_INVALID:
        break;
    }
    return false;
}

/* The form may have reached the ERP: every answer to a post but "provably not sent". */
static bool may_have_sent(enum machine_state s, enum machine_event e)
{
    return s == MACHINE_POSTING && e != MACHINE_EV_NOT_SENT && e != MACHINE_EV_RELEASED;
}

static void where(char *buf, size_t len, enum machine_state s, const struct machine_counters *c,
                  int sym)
{
    bool settled;
    enum machine_event e = sym_event(sym, &settled);
    snprintf(buf, len, "%s{posts %d cycles %d attempts %d} + %s%s", machine_state_name(s), c->posts,
             c->cycles, c->attempts, machine_event_name(e),
             e == MACHINE_EV_NOT_FOUND ? (settled ? " (settled)" : " (not settled)") : "");
}

/* One step with every per-step check; returns false when the machine refused the symbol. */
static bool step_checked(enum machine_state s, struct machine_counters c, struct ghost g, int sym,
                         struct machine_step *ret_step, struct ghost *ret_ghost)
{
    const struct machine_policy *pol = &W.pol;
    bool settled;
    enum machine_event e = sym_event(sym, &settled);
    char at[160];
    where(at, sizeof(at), s, &c, sym);

    struct machine_counters in = c;
    in.settled = settled;
    struct machine_step step, other;
    memset(&step, 0xA5, sizeof(step));
    struct machine_step sentinel = step;
    int rc = machine_next(s, e, &in, pol, &step);
    W.calls++;

    /* The other value of `settled` must not matter unless the event is not-found. */
    if (e != MACHINE_EV_NOT_FOUND) {
        struct machine_counters in2 = in;
        in2.settled = !settled;
        int rc2 = machine_next(s, e, &in2, pol, &other);
        W.calls++;
        if (rc2 != rc || (rc == APBOT_OK && (other.next != step.next || other.delay != step.delay ||
                                             other.settle_mark != step.settle_mark)))
            fail_msg("%s: `settled` changed the outcome", at);
    }

    if (rc != APBOT_OK) {
        if (rc != APBOT_E_STATE)
            fail_msg("%s: rc %d", at, rc);
        if (memcmp(&step, &sentinel, sizeof(step)) != 0)
            fail_msg("%s: refused but wrote the step", at);
        /* 5. terminal states absorb */
        if (machine_is_terminal(s) && leaves_terminal(s, e))
            fail_msg("%s: refused, but an operator (or doc-conflict) must be able to", at);
        return false;
    }
    if (machine_is_terminal(s) && !leaves_terminal(s, e))
        fail_msg("%s: left terminal state for %s", at, machine_state_name(step.next));
    if (!step.why || !*step.why)
        fail_msg("%s: no reason", at);

    struct ghost ng = g;
    if (e == MACHINE_EV_RESOLVE_REQUEUE) {
        ng.posts = 0;
        ng.doc_saved = false;
    }
    /* 1. no post without a confirmed absence */
    if (step.next == MACHINE_POSTING && s != MACHINE_POSTING) {
        if (!(e == MACHINE_EV_NOT_FOUND && settled &&
              (s == MACHINE_CHECKING || s == MACHINE_RECONCILING)))
            fail_msg("%s: entered posting without a confirmed absence", at);
        /* 4. nothing posts once a document was saved */
        if (g.doc_saved)
            fail_msg("%s: posting again after a document was saved", at);
        ng.posts++;
    }
    if (s == MACHINE_FINISHING && step.next == MACHINE_POSTING)
        fail_msg("%s: finishing led to posting", at);
    /* a post provably never sent gives its budget back */
    if (s == MACHINE_POSTING && !may_have_sent(s, e))
        ng.posts--;
    /* 2. a possible send restarts the settle delay */
    if (may_have_sent(s, e) && !step.settle_mark)
        fail_msg("%s: the form may have reached the ERP but the settle delay does not restart", at);
    if (step.next == MACHINE_FINISHING && s != MACHINE_FINISHING) {
        ng.doc_saved = true;
        if (step.counters.cycles != 0)
            fail_msg("%s: finishing entered without a fresh cycle budget", at);
    }
    /* 3. budgets */
    const struct machine_counters *o = &step.counters;
    if (ng.posts > pol->max_posts || o->posts > pol->max_posts)
        fail_msg("%s: %d posts, budget %d", at, ng.posts, pol->max_posts);
    if (o->posts != ng.posts)
        fail_msg("%s: machine counts %d posts, the walk %d", at, o->posts, ng.posts);
    if (o->posts < 0 || o->cycles < 0 || o->attempts < 0 || o->cycles > pol->max_cycles ||
        o->attempts > pol->max_attempts)
        fail_msg("%s: counters out of bounds (cycles %d attempts %d)", at, o->cycles, o->attempts);
    *ret_step = step;
    *ret_ghost = ng;
    return true;
}

/* Accepted sequences of exactly `depth` more events from here. */
static uint64_t walk(enum machine_state s, struct machine_counters c, struct ghost g, int depth)
{
    W.reached[s][c.posts][c.cycles][c.attempts] = true;
    if (depth == 0)
        return 1;
    struct memo_entry *m = &W.memo[s][c.posts][c.cycles][c.attempts][g.doc_saved][depth];
    if (m->done)
        return m->paths;
    uint64_t paths = 0;
    bool any = false;
    for (int sym = 0; sym < SYM__COUNT; sym++) {
        struct machine_step step;
        struct ghost ng;
        if (!step_checked(s, c, g, sym, &step, &ng))
            continue;
        any = true;
        uint64_t sub = walk(step.next, step.counters, ng, depth - 1);
        if (paths > UINT64_MAX - sub)
            fail_msg("path count overflows; lower DEPTH");
        paths += sub;
    }
    if (!any)
        fail_msg("%s accepts no event at all", machine_state_name(s));
    m->done = true;
    m->paths = paths;
    return paths;
}

/* ---- 6. fed failures, every path ends in a terminal state within the budgets ---- */

static bool is_failure(int sym)
{
    switch (sym) {
    case MACHINE_EV_LEASE_EXPIRED:    /* a crash: not the ERP failing */
    case MACHINE_EV_RELEASED:         /* handing back: not an answer */
    case MACHINE_EV_FOUND_UNFINISHED: /* progress waiting for the follow-up */
    case SYM_NOT_FOUND_UNSETTLED:     /* waiting for the settle delay */
    case MACHINE_EV_RESOLVE_POSTED:   /* operators */
    case MACHINE_EV_RESOLVE_REQUEUE:
    case MACHINE_EV_RESOLVE_REJECT:
        return false;
    default:
        return true;
    }
}

/* Longest failure path from a node; -1 marks "on the stack" (a cycle). */
static int longest[MACHINE_STATE__COUNT][MAXP + 1][MAXC + 1][MAXA + 1];

static int fail_depth(enum machine_state s, struct machine_counters c)
{
    int *l = &longest[s][c.posts][c.cycles][c.attempts];
    if (*l == -1)
        fail_msg("%s{posts %d cycles %d attempts %d}: a cycle of failures never ends",
                 machine_state_name(s), c.posts, c.cycles, c.attempts);
    if (*l >= 0)
        return *l;
    if (machine_is_terminal(s)) {
        *l = 0;
        return 0;
    }
    *l = -1;
    int best = -1;
    for (int sym = 0; sym < SYM__COUNT; sym++) {
        if (!is_failure(sym))
            continue;
        bool settled;
        enum machine_event e = sym_event(sym, &settled);
        struct machine_counters in = c;
        in.settled = settled;
        struct machine_step step;
        if (machine_next(s, e, &in, &W.pol, &step) != APBOT_OK)
            continue;
        int d = 1 + fail_depth(step.next, step.counters);
        if (d > best)
            best = d;
    }
    if (best < 0)
        fail_msg("%s: no failure moves it on: it would wait forever", machine_state_name(s));
    *l = best;
    return best;
}

/*
 * The budget bound, from the counters alone: every attempt but the last costs at most
 * claimed + not-found + not-sent (3 events); claimed + not-found then start the first post;
 * each post costs at most unknown + (max_cycles - 1) failed lookups + the event that starts
 * the next post or ends in review. The walk finds this bound tight for every policy below.
 */
static int failure_bound(const struct machine_policy *p)
{
    return 3 * (p->max_attempts - 1) + 2 + p->max_posts * (p->max_cycles + 1);
}

static void run_policy(struct machine_policy pol, const char *name)
{
    memset(&W, 0, sizeof(W));
    W.pol = pol;
    assert_true(pol.max_posts <= MAXP && pol.max_cycles <= MAXC && pol.max_attempts <= MAXA);
    uint64_t paths = walk(MACHINE_NEW, (struct machine_counters){0}, (struct ghost){0}, DEPTH);

    int nodes = 0, worst = 0;
    memset(longest, 0xff, sizeof(longest)); /* -1 everywhere ... */
    for (int s = 0; s < MACHINE_STATE__COUNT; s++)
        for (int p = 0; p <= MAXP; p++)
            for (int c = 0; c <= MAXC; c++)
                for (int a = 0; a <= MAXA; a++)
                    longest[s][p][c][a] = -2; /* ... then "not computed" */
    for (int s = 0; s < MACHINE_STATE__COUNT; s++)
        for (int p = 0; p <= MAXP; p++)
            for (int c = 0; c <= MAXC; c++)
                for (int a = 0; a <= MAXA; a++) {
                    if (!W.reached[s][p][c][a])
                        continue;
                    nodes++;
                    int d = fail_depth(
                        s, (struct machine_counters){.posts = p, .cycles = c, .attempts = a});
                    if (d > worst)
                        worst = d;
                }
    int bound = failure_bound(&pol);
    printf("machine walk [%s: max_posts %d, max_cycles %d, max_attempts %d]: %" PRIu64
           " event sequences of %d events (%d symbols), %d nodes, %" PRIu64
           " machine calls; longest run of failures to a terminal state %d (bound %d)\n",
           name, pol.max_posts, pol.max_cycles, pol.max_attempts, paths, DEPTH, SYM__COUNT, nodes,
           W.calls, worst, bound);
    assert_true(paths > 1000000);
    if (worst > bound)
        fail_msg("a run of failures takes %d events, more than the budget bound %d", worst, bound);
    /* every state was reached, so every row was exercised */
    for (int s = 0; s < MACHINE_STATE__COUNT; s++) {
        bool any = false;
        for (int p = 0; p <= MAXP; p++)
            for (int c = 0; c <= MAXC; c++)
                for (int a = 0; a <= MAXA; a++)
                    any = any || W.reached[s][p][c][a];
        if (!any)
            fail_msg("state %s never reached", machine_state_name(s));
    }
}

static void test_machine_exhaustive_small_budgets(void **state)
{
    (void)state;
    run_policy((struct machine_policy){.max_posts = 1, .max_cycles = 1, .max_attempts = 1},
               "tightest");
}

static void test_machine_exhaustive_mixed_budgets(void **state)
{
    (void)state;
    run_policy((struct machine_policy){.max_posts = 2, .max_cycles = 3, .max_attempts = 3},
               "mixed");
}

static void test_machine_exhaustive_default_policy(void **state)
{
    (void)state;
    run_policy(machine_policy_default(), "default");
}

static void test_machine_exhaustive_three_posts(void **state)
{
    (void)state;
    run_policy((struct machine_policy){.max_posts = 3, .max_cycles = 2, .max_attempts = 2},
               "three posts");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_machine_exhaustive_small_budgets),
        cmocka_unit_test(test_machine_exhaustive_mixed_budgets),
        cmocka_unit_test(test_machine_exhaustive_default_policy),
        cmocka_unit_test(test_machine_exhaustive_three_posts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
