/*
 * test_machine.c - the state machine as tables: every (state, event) pair with fresh counters
 * (the matrix below), then the rows of the design table with their conditions (budgets,
 * settled or not), counters and delays, and which steps restart the settle delay. The walk
 * over every event sequence lives in test_machine_exhaustive.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <string.h>

#include "apbot/machine.h"

#define X (-2) /* refused: APBOT_E_STATE */

#define N MACHINE_NEW
#define C MACHINE_CHECKING
#define P MACHINE_POSTING
#define R MACHINE_RECONCILING
#define F MACHINE_FINISHING
#define D MACHINE_COMPLETED
#define B MACHINE_BUSINESS_EXCEPTION
#define M MACHINE_MANUAL_REVIEW

/*
 * Next state for every pair, from fresh counters (posts 0, cycles 0, attempts 0) with the
 * settle delay passed. Columns follow enum machine_event:
 *   clm claimed, fnd found, cfl found-conflict, unf found-unfinished, nf not-found,
 *   lf lookup-failed, cnf confirmed, sav saved, rej rejected, ns not-sent, unk unknown,
 *   ae already-exists, fuf followup-failed, dcf doc-conflict, exp lease-expired,
 *   rel released, rp resolve-posted, rq resolve-requeue, rr resolve-reject.
 */
/* clang-format off */
static const int matrix[MACHINE_STATE__COUNT][MACHINE_EVENT__COUNT] = {
    /*                    clm fnd cfl unf nf  lf  cnf sav rej ns  unk ae  fuf dcf exp rel rp  rq  rr */
    [MACHINE_NEW] =         {C,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  M,  X,  X,  X,  X,  X},
    [MACHINE_CHECKING] =    {X,  D,  M,  F,  P,  N,  X,  X,  X,  X,  X,  X,  X,  M,  N,  N,  X,  X,  X},
    [MACHINE_POSTING] =     {X,  X,  X,  X,  X,  X,  D,  F,  B,  N,  R,  R,  X,  M,  R,  N,  X,  X,  X},
    [MACHINE_RECONCILING] = {X,  D,  M,  F,  P,  R,  X,  X,  X,  X,  X,  X,  X,  M,  R,  R,  X,  X,  X},
    [MACHINE_FINISHING] =   {X,  D,  M,  F,  M,  F,  D,  X,  M,  X,  X,  X,  F,  M,  F,  F,  X,  X,  X},
    [MACHINE_COMPLETED] =   {X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  M,  X,  X,  X,  X,  X},
    [MACHINE_BUSINESS_EXCEPTION] =
                            {X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  D,  N,  X},
    [MACHINE_MANUAL_REVIEW] =
                            {X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  D,  N,  B},
};
/* clang-format on */

static void test_machine_matrix_every_pair(void **state)
{
    (void)state;
    struct machine_policy pol = machine_policy_default();
    struct machine_counters c = {.settled = true};
    for (int s = 0; s < MACHINE_STATE__COUNT; s++) {
        for (int e = 0; e < MACHINE_EVENT__COUNT; e++) {
            struct machine_step step = {.next = MACHINE_STATE_INVALID};
            int rc = machine_next((enum machine_state)s, (enum machine_event)e, &c, &pol, &step);
            if (matrix[s][e] == X) {
                if (rc != APBOT_E_STATE)
                    fail_msg("%s + %s should be refused", machine_state_name(s),
                             machine_event_name(e));
                assert_int_equal(step.next, MACHINE_STATE_INVALID); /* untouched */
            } else {
                if (rc != APBOT_OK || (int)step.next != matrix[s][e])
                    fail_msg("%s + %s: rc %d next %s, want %s", machine_state_name(s),
                             machine_event_name(e), rc, machine_state_name(step.next),
                             machine_state_name(matrix[s][e]));
                assert_non_null(step.why);
            }
        }
    }
}

/* ---- the design table, row by row ---- */

#define NONE MACHINE_DELAY_NONE
#define BACK MACHINE_DELAY_BACKOFF
#define SETL MACHINE_DELAY_SETTLE

struct row {
    enum machine_state from;
    enum machine_event ev;
    int posts, cycles, attempts; /* counters in */
    bool settled;                /* input */
    enum machine_state next;
    enum machine_delay delay;
    int out_posts, out_cycles, out_attempts;
    bool mark; /* the settle delay starts again */
    const char *note;
};

/* Policy of these rows: max_posts 2, max_cycles 3, max_attempts 4. */
/* clang-format off */
static const struct row rows[] = {
    /* from  event                          p  c  a  settled  next delay   p  c  a  mark */
    {N, MACHINE_EV_CLAIMED,                 0, 0, 0, true,   C, NONE,   0, 0, 0, false, "look the key up first"},
    {N, MACHINE_EV_CLAIMED,                 1, 2, 3, false,  C, NONE,   1, 2, 3, false, "claim keeps counters"},
    {C, MACHINE_EV_FOUND,                   0, 0, 0, true,   D, NONE,   0, 0, 0, false, "adopt its document"},
    {C, MACHINE_EV_FOUND_CONFLICT,          0, 0, 0, true,   M, NONE,   0, 0, 0, false, "conflicting record"},
    {C, MACHINE_EV_FOUND_UNFINISHED,        1, 2, 0, true,   F, NONE,   1, 0, 0, false, "a draft carrying our key: finish it"},
    {C, MACHINE_EV_NOT_FOUND,               0, 0, 0, true,   P, NONE,   1, 0, 0, false, "intent committed before the form"},
    {C, MACHINE_EV_NOT_FOUND,               0, 0, 0, false,  N, SETL,   0, 0, 0, false, "not settled since the last post"},
    {C, MACHINE_EV_NOT_FOUND,               2, 0, 0, true,   M, NONE,   2, 0, 0, false, "post budget spent"},
    {C, MACHINE_EV_LOOKUP_FAILED,           0, 0, 0, true,   N, BACK,   0, 0, 1, false, "nothing was sent"},
    {C, MACHINE_EV_LOOKUP_FAILED,           0, 0, 3, true,   M, NONE,   0, 0, 4, false, "attempt budget spent"},
    {C, MACHINE_EV_LEASE_EXPIRED,           0, 0, 0, true,   N, NONE,   0, 0, 0, false, "crash while checking"},
    {C, MACHINE_EV_RELEASED,                0, 0, 0, true,   N, NONE,   0, 0, 0, false, "given back untouched"},
    {C, MACHINE_EV_DOC_CONFLICT,            0, 0, 0, true,   M, NONE,   0, 0, 0, false, "one document, one item"},
    {P, MACHINE_EV_CONFIRMED,               1, 0, 0, true,   D, NONE,   1, 0, 0, true,  "success banner"},
    {P, MACHINE_EV_SAVED,                   1, 2, 0, true,   F, NONE,   1, 0, 0, true,  "the document exists; never post again"},
    {P, MACHINE_EV_REJECTED,                1, 0, 0, true,   B, NONE,   1, 0, 0, true,  "validation message: no retry"},
    {P, MACHINE_EV_NOT_SENT,                1, 0, 0, true,   N, BACK,   0, 0, 1, false, "provably never processed"},
    {P, MACHINE_EV_NOT_SENT,                1, 0, 3, true,   M, NONE,   0, 0, 4, false, "attempt budget spent"},
    {P, MACHINE_EV_UNKNOWN,                 1, 0, 0, false,  R, SETL,   1, 0, 0, true,  "never re-post blind"},
    {P, MACHINE_EV_ALREADY_EXISTS,          1, 0, 0, true,   R, NONE,   1, 0, 0, true,  "adopt the existing document"},
    {P, MACHINE_EV_LEASE_EXPIRED,           1, 0, 0, true,   R, SETL,   1, 0, 0, true,  "the form may have reached the ERP"},
    {P, MACHINE_EV_RELEASED,                1, 0, 0, true,   N, NONE,   0, 0, 0, false, "committing step never sent"},
    {P, MACHINE_EV_DOC_CONFLICT,            1, 0, 0, true,   M, NONE,   1, 0, 0, true,  "one document, one item"},
    {R, MACHINE_EV_FOUND,                   1, 1, 0, true,   D, NONE,   1, 1, 0, false, "reconciled"},
    {R, MACHINE_EV_FOUND_CONFLICT,          1, 0, 0, true,   M, NONE,   1, 0, 0, false, "conflicting record"},
    {R, MACHINE_EV_FOUND_UNFINISHED,        1, 2, 0, true,   F, NONE,   1, 0, 0, false, "saved but not finished"},
    {R, MACHINE_EV_NOT_FOUND,               1, 1, 0, true,   P, NONE,   2, 0, 0, false, "confirmed absence, posts < max"},
    {R, MACHINE_EV_NOT_FOUND,               1, 1, 0, false,  R, SETL,   1, 1, 0, false, "not settled: no absence yet"},
    {R, MACHINE_EV_NOT_FOUND,               2, 0, 0, true,   M, NONE,   2, 0, 0, false, "posts = max"},
    {R, MACHINE_EV_LOOKUP_FAILED,           1, 0, 0, true,   R, BACK,   1, 1, 0, false, "cycles < max"},
    {R, MACHINE_EV_LOOKUP_FAILED,           1, 2, 0, true,   M, NONE,   1, 3, 0, false, "cycles = max"},
    {R, MACHINE_EV_LEASE_EXPIRED,           1, 0, 0, true,   R, SETL,   1, 0, 0, false, "crash while reconciling"},
    {R, MACHINE_EV_RELEASED,                1, 0, 0, true,   R, NONE,   1, 0, 0, false, "given back untouched"},
    {R, MACHINE_EV_DOC_CONFLICT,            1, 0, 0, true,   M, NONE,   1, 0, 0, false, "one document, one item"},
    {F, MACHINE_EV_CONFIRMED,               1, 1, 0, true,   D, NONE,   1, 1, 0, false, "every step done"},
    {F, MACHINE_EV_FOUND,                   1, 1, 0, true,   D, NONE,   1, 1, 0, false, "a lookup shows it finished"},
    {F, MACHINE_EV_FOUND_UNFINISHED,        1, 1, 0, true,   F, NONE,   1, 1, 0, false, "run the follow-up steps on DOC"},
    {F, MACHINE_EV_FOLLOWUP_FAILED,         1, 0, 0, true,   F, BACK,   1, 1, 0, false, "retried on DOC, never re-posted"},
    {F, MACHINE_EV_FOLLOWUP_FAILED,         1, 2, 0, true,   M, NONE,   1, 3, 0, false, "saved as DOC but not finished"},
    {F, MACHINE_EV_LOOKUP_FAILED,           1, 0, 0, true,   F, BACK,   1, 1, 0, false, "cycles < max"},
    {F, MACHINE_EV_LOOKUP_FAILED,           1, 2, 0, true,   M, NONE,   1, 3, 0, false, "cycles = max"},
    {F, MACHINE_EV_NOT_FOUND,               1, 0, 0, true,   M, NONE,   1, 0, 0, false, "the saved document vanished"},
    {F, MACHINE_EV_NOT_FOUND,               1, 0, 0, false,  F, SETL,   1, 0, 0, false, "not found yet: the search lags the save"},
    {F, MACHINE_EV_NOT_FOUND,               0, 0, 0, true,   M, NONE,   0, 0, 0, false, "never re-post, even with budget"},
    {F, MACHINE_EV_REJECTED,                1, 0, 0, true,   M, NONE,   1, 0, 0, false, "the ERP refused the follow-up"},
    {F, MACHINE_EV_FOUND_CONFLICT,          1, 0, 0, true,   M, NONE,   1, 0, 0, false, "(beyond the spec) conflicting record"},
    {F, MACHINE_EV_LEASE_EXPIRED,           1, 1, 0, true,   F, NONE,   1, 1, 0, false, "re-entered with a lookup first"},
    {F, MACHINE_EV_RELEASED,                1, 1, 0, true,   F, NONE,   1, 1, 0, false, "re-entered with a lookup first"},
    {F, MACHINE_EV_DOC_CONFLICT,            1, 0, 0, true,   M, NONE,   1, 0, 0, false, "one document, one item"},
    {D, MACHINE_EV_DOC_CONFLICT,            1, 0, 0, true,   M, NONE,   1, 0, 0, false, "the one way out of completed"},
    {N, MACHINE_EV_DOC_CONFLICT,            0, 0, 0, true,   M, NONE,   0, 0, 0, false, "one document, one item"},
    {B, MACHINE_EV_RESOLVE_POSTED,          1, 0, 0, true,   D, NONE,   1, 0, 0, false, "operator verified the document"},
    {B, MACHINE_EV_RESOLVE_REQUEUE,         1, 2, 3, true,   N, NONE,   0, 0, 0, false, "fresh budget, lookup first"},
    {M, MACHINE_EV_RESOLVE_POSTED,          2, 3, 0, true,   D, NONE,   2, 3, 0, false, "operator verified the document"},
    {M, MACHINE_EV_RESOLVE_REQUEUE,         2, 3, 4, true,   N, NONE,   0, 0, 0, false, "fresh budget, lookup first"},
    {M, MACHINE_EV_RESOLVE_REJECT,          2, 0, 0, true,   B, NONE,   2, 0, 0, false, "operator: business exception"},
};
/* clang-format on */

static void test_machine_design_rows(void **state)
{
    (void)state;
    struct machine_policy pol = {.max_posts = 2, .max_cycles = 3, .max_attempts = 4};
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const struct row *r = &rows[i];
        struct machine_counters c = {
            .posts = r->posts, .cycles = r->cycles, .attempts = r->attempts, .settled = r->settled};
        struct machine_step s;
        int rc = machine_next(r->from, r->ev, &c, &pol, &s);
        if (rc != APBOT_OK)
            fail_msg("row %zu (%s + %s: %s): rc %d", i, machine_state_name(r->from),
                     machine_event_name(r->ev), r->note, rc);
        if (s.next != r->next || s.delay != r->delay || s.counters.posts != r->out_posts ||
            s.counters.cycles != r->out_cycles || s.counters.attempts != r->out_attempts ||
            s.settle_mark != r->mark)
            fail_msg("row %zu (%s + %s: %s): got %s delay %d posts %d cycles %d attempts %d "
                     "mark %d",
                     i, machine_state_name(r->from), machine_event_name(r->ev), r->note,
                     machine_state_name(s.next), (int)s.delay, s.counters.posts, s.counters.cycles,
                     s.counters.attempts, (int)s.settle_mark);
        assert_non_null(s.why);
        assert_true(strlen(s.why) > 0);
        assert_int_equal(s.counters.settled, r->settled); /* copied through */
    }
}

/*
 * The settle mark: every way out of posting on which the form may have reached the ERP
 * starts the settle delay again; not-sent and released (provably never sent) do not, and
 * no other state ever marks (nothing else sends a form).
 */
static void test_machine_settle_mark_only_after_a_possible_send(void **state)
{
    (void)state;
    struct machine_policy pol = machine_policy_default();
    for (int settled = 0; settled < 2; settled++) {
        struct machine_counters c = {.posts = 1, .settled = settled};
        for (int s = 0; s < MACHINE_STATE__COUNT; s++) {
            for (int e = 0; e < MACHINE_EVENT__COUNT; e++) {
                struct machine_step step;
                if (machine_next(s, e, &c, &pol, &step) != APBOT_OK)
                    continue;
                bool want =
                    s == MACHINE_POSTING && e != MACHINE_EV_NOT_SENT && e != MACHINE_EV_RELEASED;
                if (step.settle_mark != want)
                    fail_msg("%s + %s: settle_mark %d, want %d", machine_state_name(s),
                             machine_event_name(e), (int)step.settle_mark, (int)want);
            }
        }
    }
}

/* `settled` only matters to not-found in checking, reconciling and finishing. */
static void test_machine_settled_matters_only_for_absence(void **state)
{
    (void)state;
    struct machine_policy pol = machine_policy_default();
    for (int s = 0; s < MACHINE_STATE__COUNT; s++) {
        for (int e = 0; e < MACHINE_EVENT__COUNT; e++) {
            struct machine_counters c0 = {.posts = 1, .settled = false};
            struct machine_counters c1 = {.posts = 1, .settled = true};
            struct machine_step s0, s1;
            memset(&s0, 0, sizeof(s0));
            memset(&s1, 0, sizeof(s1));
            int r0 = machine_next(s, e, &c0, &pol, &s0);
            int r1 = machine_next(s, e, &c1, &pol, &s1);
            bool matters =
                e == MACHINE_EV_NOT_FOUND &&
                (s == MACHINE_CHECKING || s == MACHINE_RECONCILING || s == MACHINE_FINISHING);
            bool same = r0 == r1 && s0.next == s1.next && s0.delay == s1.delay &&
                        s0.counters.posts == s1.counters.posts &&
                        s0.counters.cycles == s1.counters.cycles &&
                        s0.counters.attempts == s1.counters.attempts &&
                        s0.settle_mark == s1.settle_mark;
            if (same == matters)
                fail_msg("%s + %s: settled %s", machine_state_name(s), machine_event_name(e),
                         matters ? "should decide" : "should not matter");
        }
    }
}

/* Nothing leaves finishing for posting, whatever the counters say. */
static void test_machine_finishing_never_posts(void **state)
{
    (void)state;
    struct machine_policy pol = machine_policy_default();
    for (int posts = 0; posts <= pol.max_posts; posts++)
        for (int cycles = 0; cycles < pol.max_cycles; cycles++)
            for (int settled = 0; settled < 2; settled++)
                for (int e = 0; e < MACHINE_EVENT__COUNT; e++) {
                    struct machine_counters c = {
                        .posts = posts, .cycles = cycles, .settled = settled};
                    struct machine_step s;
                    if (machine_next(MACHINE_FINISHING, e, &c, &pol, &s) == APBOT_OK)
                        assert_int_not_equal(s.next, MACHINE_POSTING);
                }
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
    assert_int_equal(machine_next(MACHINE_NEW, MACHINE_EVENT_INVALID, &c, &pol, &s), APBOT_E_INVAL);
    assert_int_equal(machine_next(MACHINE_NEW, MACHINE_EV_CLAIMED, NULL, &pol, &s), APBOT_E_INVAL);
    assert_int_equal(machine_next(MACHINE_NEW, MACHINE_EV_CLAIMED, &c, NULL, &s), APBOT_E_INVAL);
    assert_int_equal(machine_next(MACHINE_NEW, MACHINE_EV_CLAIMED, &c, &pol, NULL), APBOT_E_INVAL);
    pol.max_posts = 0;
    assert_int_equal(machine_next(N, MACHINE_EV_CLAIMED, &c, &pol, &s), APBOT_E_INVAL);
    pol = machine_policy_default();
    pol.max_cycles = 0;
    assert_int_equal(machine_next(N, MACHINE_EV_CLAIMED, &c, &pol, &s), APBOT_E_INVAL);
    pol = machine_policy_default();
    pol.max_attempts = 0;
    assert_int_equal(machine_next(N, MACHINE_EV_CLAIMED, &c, &pol, &s), APBOT_E_INVAL);
}

static void test_machine_terminal_states(void **state)
{
    (void)state;
    for (int s = 0; s < MACHINE_STATE__COUNT; s++)
        assert_int_equal(machine_is_terminal(s), s == D || s == B || s == M);
    assert_false(machine_is_terminal(MACHINE_STATE_INVALID));
}

static void test_machine_names_round_trip(void **state)
{
    (void)state;
    for (int s = 0; s < MACHINE_STATE__COUNT; s++) {
        assert_non_null(machine_state_name(s));
        assert_int_equal(machine_state_from_name(machine_state_name(s)), s);
    }
    for (int e = 0; e < MACHINE_EVENT__COUNT; e++) {
        assert_non_null(machine_event_name(e));
        assert_int_equal(machine_event_from_name(machine_event_name(e)), e);
    }
    assert_int_equal(machine_state_from_name("bogus"), MACHINE_STATE_INVALID);
    assert_int_equal(machine_state_from_name(NULL), MACHINE_STATE_INVALID);
    assert_int_equal(machine_event_from_name("bogus"), MACHINE_EVENT_INVALID);
    assert_string_equal(machine_state_name(MACHINE_FINISHING), "finishing");
    assert_string_equal(machine_state_name(MACHINE_BUSINESS_EXCEPTION), "business-exception");
    assert_string_equal(machine_state_name(MACHINE_MANUAL_REVIEW), "manual-review");
    assert_string_equal(machine_state_name(MACHINE_STATE__COUNT), "invalid");
    assert_string_equal(machine_event_name(MACHINE_EV_SAVED), "saved");
    assert_string_equal(machine_event_name(MACHINE_EV_FOUND_UNFINISHED), "found-unfinished");
    assert_string_equal(machine_event_name(MACHINE_EV_FOLLOWUP_FAILED), "followup-failed");
    assert_string_equal(machine_event_name(MACHINE_EV_DOC_CONFLICT), "doc-conflict");
    assert_string_equal(machine_event_name(MACHINE_EVENT__COUNT), "invalid");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_machine_matrix_every_pair),
        cmocka_unit_test(test_machine_design_rows),
        cmocka_unit_test(test_machine_settle_mark_only_after_a_possible_send),
        cmocka_unit_test(test_machine_settled_matters_only_for_absence),
        cmocka_unit_test(test_machine_finishing_never_posts),
        cmocka_unit_test(test_machine_bad_input),
        cmocka_unit_test(test_machine_terminal_states),
        cmocka_unit_test(test_machine_names_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
