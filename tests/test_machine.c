/*
 * test_machine.c - the state machine as a table: every (state, event) pair, plus the
 * budgets (posts, cycles, attempts) and the settle rule, plus an exhaustive walk that no
 * sequence of events can post past the budget or leave a terminal state without an operator.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "apbot/machine.h"

#define X (-2) /* refused */

#define N MACHINE_NEW
#define C MACHINE_CHECKING
#define P MACHINE_POSTING
#define R MACHINE_RECONCILING
#define D MACHINE_COMPLETED
#define B MACHINE_BUSINESS_EXCEPTION
#define M MACHINE_MANUAL_REVIEW

/* Expected next state for fresh counters (posts 0, cycles 0, attempts 0, settled). Columns
 * follow enum machine_event. */
/* clang-format off */
static const int table[MACHINE_STATE__COUNT][MACHINE_EVENT__COUNT] = {
    /*           clm fnd cfl nf  lf  cnf rej ns  unk ae  exp rel rp  rq  rr */
    [MACHINE_NEW] = {C, X, X, X, X, X, X, X, X, X, X, X, X, X, X},
    [MACHINE_CHECKING] = {X, D, M, P, N, X, X, X, X, X, N, N, X, X, X},
    [MACHINE_POSTING] = {X, X, X, X, X, D, B, N, R, R, R, N, X, X, X},
    [MACHINE_RECONCILING] = {X, D, M, P, R, X, X, X, X, X, R, R, X, X, X},
    [MACHINE_COMPLETED] = {X, X, X, X, X, X, X, X, X, X, X, X, X, X, X},
    [MACHINE_BUSINESS_EXCEPTION] = {X, X, X, X, X, X, X, X, X, X, X, X, D, N, X},
    [MACHINE_MANUAL_REVIEW] = {X, X, X, X, X, X, X, X, X, X, X, X, D, N, B},
};
/* clang-format on */

static void test_machine_table_every_pair(void **state)
{
    (void)state;
    struct machine_policy pol = machine_policy_default();
    struct machine_counters c = {.settled = true};
    for (int s = 0; s < MACHINE_STATE__COUNT; s++) {
        for (int e = 0; e < MACHINE_EVENT__COUNT; e++) {
            struct machine_step step = {.next = MACHINE_STATE_INVALID};
            int rc = machine_next((enum machine_state)s, (enum machine_event)e, &c, &pol, &step);
            if (table[s][e] == X) {
                if (rc != APBOT_E_STATE)
                    fail_msg("%s + %s should be refused", machine_state_name(s),
                             machine_event_name(e));
                assert_int_equal(step.next, MACHINE_STATE_INVALID); /* untouched */
            } else {
                if (rc != APBOT_OK || (int)step.next != table[s][e])
                    fail_msg("%s + %s: rc %d next %s, want %s", machine_state_name(s),
                             machine_event_name(e), rc, machine_state_name(step.next),
                             machine_state_name(table[s][e]));
                assert_non_null(step.why);
            }
        }
    }
}

static struct machine_step step_of(enum machine_state s, enum machine_event e,
                                   struct machine_counters c)
{
    struct machine_policy pol = {.max_posts = 2, .max_cycles = 3, .max_attempts = 4};
    struct machine_step step;
    assert_int_equal(machine_next(s, e, &c, &pol, &step), APBOT_OK);
    return step;
}

static void test_machine_post_counts_intent(void **state)
{
    (void)state;
    struct machine_step s = step_of(C, MACHINE_EV_NOT_FOUND, (struct machine_counters){0});
    assert_int_equal(s.next, P);
    assert_int_equal(s.counters.posts, 1);
    /* a provably unsent post gives the budget back and backs off to a fresh lookup */
    s = step_of(P, MACHINE_EV_NOT_SENT, s.counters);
    assert_int_equal(s.next, N);
    assert_int_equal(s.delay, MACHINE_DELAY_BACKOFF);
    assert_int_equal(s.counters.posts, 0);
    assert_int_equal(s.counters.attempts, 1);
}

static void test_machine_unknown_waits_for_settle(void **state)
{
    (void)state;
    struct machine_step s = step_of(P, MACHINE_EV_UNKNOWN, (struct machine_counters){.posts = 1});
    assert_int_equal(s.next, R);
    assert_int_equal(s.delay, MACHINE_DELAY_SETTLE);
    /* not found before the settle delay passed is no confirmed absence: no post */
    s = step_of(R, MACHINE_EV_NOT_FOUND, (struct machine_counters){.posts = 1, .settled = false});
    assert_int_equal(s.next, R);
    assert_int_equal(s.delay, MACHINE_DELAY_SETTLE);
    assert_int_equal(s.counters.posts, 1);
    /* after the settle delay it is, within the budget */
    s = step_of(R, MACHINE_EV_NOT_FOUND, (struct machine_counters){.posts = 1, .settled = true});
    assert_int_equal(s.next, P);
    assert_int_equal(s.counters.posts, 2);
    /* and at the budget it goes to a human */
    s = step_of(R, MACHINE_EV_NOT_FOUND, (struct machine_counters){.posts = 2, .settled = true});
    assert_int_equal(s.next, M);
    assert_int_equal(s.counters.posts, 2);
}

static void test_machine_already_exists_reconciles_now(void **state)
{
    (void)state;
    struct machine_step s =
        step_of(P, MACHINE_EV_ALREADY_EXISTS, (struct machine_counters){.posts = 1});
    assert_int_equal(s.next, R);
    assert_int_equal(s.delay, MACHINE_DELAY_NONE);
}

static void test_machine_lookup_cycles_bounded(void **state)
{
    (void)state;
    struct machine_counters c = {.posts = 1};
    struct machine_step s = step_of(R, MACHINE_EV_LOOKUP_FAILED, c);
    assert_int_equal(s.next, R);
    assert_int_equal(s.delay, MACHINE_DELAY_BACKOFF);
    s = step_of(R, MACHINE_EV_LOOKUP_FAILED, s.counters);
    assert_int_equal(s.next, R);
    s = step_of(R, MACHINE_EV_LOOKUP_FAILED, s.counters);
    assert_int_equal(s.next, M); /* max_cycles = 3 */
    assert_int_equal(s.counters.cycles, 3);
}

static void test_machine_attempts_bounded(void **state)
{
    (void)state;
    struct machine_counters c = {0};
    struct machine_step s;
    for (int i = 1; i < 4; i++) {
        s = step_of(C, MACHINE_EV_LOOKUP_FAILED, c);
        assert_int_equal(s.next, N);
        assert_int_equal(s.counters.attempts, i);
        c = s.counters;
    }
    s = step_of(C, MACHINE_EV_LOOKUP_FAILED, c);
    assert_int_equal(s.next, M);
}

static void test_machine_crash_recovery(void **state)
{
    (void)state;
    assert_int_equal(step_of(C, MACHINE_EV_LEASE_EXPIRED, (struct machine_counters){0}).next, N);
    struct machine_step s =
        step_of(P, MACHINE_EV_LEASE_EXPIRED, (struct machine_counters){.posts = 1});
    assert_int_equal(s.next, R);
    assert_int_equal(s.delay, MACHINE_DELAY_SETTLE);
    assert_int_equal(s.counters.posts, 1); /* the form may have been sent: it counts */
    assert_int_equal(step_of(R, MACHINE_EV_LEASE_EXPIRED, s.counters).next, R);
}

static void test_machine_requeue_resets_budget(void **state)
{
    (void)state;
    struct machine_step s =
        step_of(M, MACHINE_EV_RESOLVE_REQUEUE, (struct machine_counters){.posts = 2, .cycles = 3});
    assert_int_equal(s.next, N);
    assert_int_equal(s.counters.posts, 0);
    assert_int_equal(s.counters.cycles, 0);
}

static void test_machine_bad_input(void **state)
{
    (void)state;
    struct machine_policy pol = machine_policy_default();
    struct machine_counters c = {0};
    struct machine_step s;
    assert_int_equal(machine_next(MACHINE_STATE__COUNT, 0, &c, &pol, &s), APBOT_E_INVAL);
    assert_int_equal(machine_next(MACHINE_STATE_INVALID, 0, &c, &pol, &s), APBOT_E_INVAL);
    assert_int_equal(machine_next(MACHINE_NEW, MACHINE_EVENT__COUNT, &c, &pol, &s), APBOT_E_INVAL);
    pol.max_posts = 0;
    assert_int_equal(machine_next(N, MACHINE_EV_CLAIMED, &c, &pol, &s), APBOT_E_INVAL);
}

static void test_machine_names_round_trip(void **state)
{
    (void)state;
    for (int s = 0; s < MACHINE_STATE__COUNT; s++)
        assert_int_equal(machine_state_from_name(machine_state_name(s)), s);
    for (int e = 0; e < MACHINE_EVENT__COUNT; e++)
        assert_int_equal(machine_event_from_name(machine_event_name(e)), e);
    assert_int_equal(machine_state_from_name("bogus"), MACHINE_STATE_INVALID);
    assert_string_equal(machine_state_name(MACHINE_BUSINESS_EXCEPTION), "business-exception");
    assert_string_equal(machine_state_name(MACHINE_MANUAL_REVIEW), "manual-review");
    assert_string_equal(machine_state_name(MACHINE_STATE__COUNT), "invalid");
}

/*
 * Exhaustive walk: from `new` with fresh counters, every sequence of bot events (no operator
 * events) up to depth 12 with settled true or false. Invariants: posts never exceed the
 * budget; a terminal state is never left; posting is only entered from checking or a
 * settled reconciling not-found.
 */
static int walks;
static void walk(enum machine_state s, struct machine_counters c, const struct machine_policy *pol,
                 int depth)
{
    walks++;
    assert_true(c.posts <= pol->max_posts);
    if (depth == 0)
        return;
    for (int e = 0; e < MACHINE_EV_RESOLVE_POSTED; e++) {
        for (int settled = 0; settled < 2; settled++) {
            struct machine_counters in = c;
            in.settled = settled;
            struct machine_step step;
            int rc = machine_next(s, (enum machine_event)e, &in, pol, &step);
            if (machine_is_terminal(s)) {
                assert_int_equal(rc, APBOT_E_STATE);
                continue;
            }
            if (rc != APBOT_OK)
                continue;
            if (step.next == P && s != P) {
                assert_true(s == C || (s == R && e == MACHINE_EV_NOT_FOUND && settled));
                assert_int_equal(step.counters.posts, c.posts + 1);
            }
            walk(step.next, step.counters, pol, depth - 1);
        }
    }
}

static void test_machine_exhaustive_walk(void **state)
{
    (void)state;
    struct machine_policy pol = {.max_posts = 2, .max_cycles = 2, .max_attempts = 2};
    walks = 0;
    walk(N, (struct machine_counters){0}, &pol, 7);
    assert_true(walks > 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_machine_table_every_pair),
        cmocka_unit_test(test_machine_post_counts_intent),
        cmocka_unit_test(test_machine_unknown_waits_for_settle),
        cmocka_unit_test(test_machine_already_exists_reconciles_now),
        cmocka_unit_test(test_machine_lookup_cycles_bounded),
        cmocka_unit_test(test_machine_attempts_bounded),
        cmocka_unit_test(test_machine_crash_recovery),
        cmocka_unit_test(test_machine_requeue_resets_budget),
        cmocka_unit_test(test_machine_bad_input),
        cmocka_unit_test(test_machine_names_round_trip),
        cmocka_unit_test(test_machine_exhaustive_walk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
