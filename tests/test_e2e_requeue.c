/*
 * test_e2e_requeue.c - issue 9: `apbot resolve ID --requeue` respects the settle delay counted
 * from the item's last post.
 *
 * Run 1 posts one invoice; the connection drops and the ERP books it 9 s later (a late
 * commit). With a 2.5 s settle delay and a budget of one post, the reconciliation finds
 * nothing and the item goes to manual review. An operator requeues it at once (through the
 * CLI): it is due at once. Run 2 has the settle delay the ERP needs (12 s). Its first lookup
 * (at once) finds nothing yet, and must not post: the item waits for the settle delay counted
 * from the post of run 1 - the store's due time says so (next_mono = settle base + 12 s), not
 * a wall-clock sleep of this test. The late commit lands within that delay; the next lookup
 * finds it. Nothing is posted again: one booking, no re-post of a booked reference.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/clock.h"
#include "apbot/machine.h"
#include "apbot/runner.h"
#include "apbot/store.h"
#include "helpers/e2e.h"
#include "helpers/invariants.h"
#include "helpers/sim_client.h"

#define LATE_COMMIT_MS 9000
#define SETTLE_RUN2_MS 12000

static void read_item(struct e2e *e, const char *key, struct store_item *ret)
{
    struct store *st = NULL;
    char err[APBOT_ERR_LEN];
    assert_int_equal(store_open(e->db, &st, err, sizeof(err)), APBOT_OK);
    assert_int_equal(store_get_by_key(st, key, ret, err, sizeof(err)), APBOT_OK);
    store_close(st);
}

/* Polls until the item's audit trail has `n` events named `event`; false after timeout_ms. */
static bool wait_events(struct e2e *e, const char *event, int n, long timeout_ms)
{
    int64_t until = e2e_mono_ms() + timeout_ms;
    while (e2e_mono_ms() < until) {
        if (e2e_count_events(e, event) >= n)
            return true;
        e2e_nap_ms(20);
    }
    return false;
}

static void test_e2e_requeue_respects_settle(void **state)
{
    (void)state;
    struct e2e e;
    struct e2e_bg bg;
    struct store_item it;
    char key[32], id[24];

    e2e_start_ui(&e, SIM_UI_ACME, "calm", "late_commit_ms = 9000\nindex_lag_ms = 200\n", 81);
    struct e2e_invoice inv = {"100012", "RQ-1", "2026-11-05", "EUR", 8800, "6000", false, NULL};
    e2e_add(&e, &inv, key);

    /* Run 1: the post drops, its booking is 9 s late; 2.5 s later it is not found and the
     * budget of one post is spent: manual review. */
    e.opt.max_posts = 1;
    assert_int_equal(simc_fault(e.port, "late_commit", 1), 0);
    int rc = e2e_run(&e);
    assert_int_equal(rc, APBOT_OK);
    read_item(&e, key, &it);
    assert_int_equal(it.state, MACHINE_MANUAL_REVIEW);
    assert_int_equal(it.counters.posts, 1);
    assert_true(it.has_settle);
    int64_t settle_base = it.settle_mono;
    snprintf(id, sizeof(id), "%" PRId64, it.id);
    store_item_done(&it);
    assert_int_equal(simc_count_reference(e.port, key), 0); /* not booked yet */

    /* The operator requeues it: due at once. */
    const char *args[] = {"resolve", id, "--requeue", "--by", "tester", NULL};
    pid_t pid = e2e_spawn_apbot(&e, "resolve.log", args);
    int code = e2e_wait_exit(pid, 30000);
    if (code != 0) {
        char *log = e2e_read_file(&e, "resolve.log");
        fprintf(stderr, "%s\n", log);
        free(log);
    }
    assert_int_equal(code, 0);
    read_item(&e, key, &it);
    assert_int_equal(it.state, MACHINE_NEW);
    assert_int_equal(it.counters.posts, 0);
    assert_true(it.next_mono <= apbot_clock_mono_ms());
    assert_true(it.has_settle);
    assert_int_equal(it.settle_mono, settle_base); /* the last post still counts */
    store_item_done(&it);
    int64_t requeued = apbot_clock_mono_ms();
    fprintf(stderr, "requeued %" PRId64 " ms after the post's give-up\n", requeued - settle_base);
    assert_true(requeued - settle_base < LATE_COMMIT_MS - 2000); /* ahead of the late commit */

    /* Run 2, with the settle delay the ERP needs. */
    e.opt.max_posts = 0;
    e.opt.settle_ms = SETTLE_RUN2_MS;
    e.opt.until_empty = true;
    e.opt.max_seconds = 60;
    int not_found_before = e2e_count_events(&e, "not-found");
    e2e_run_bg(&e, &bg);
    bool looked = wait_events(&e, "not-found", not_found_before + 1, 20000);
    struct store_item mid;
    memset(&mid, 0, sizeof(mid));
    int64_t seen_at = apbot_clock_mono_ms();
    if (looked)
        read_item(&e, key, &mid);
    rc = e2e_run_join(&bg, false);

    /* The first lookup found nothing: back to new, due when the settle delay since the post
     * of run 1 has passed - not at once, not after a fresh delay from the requeue. */
    assert_true(looked);
    fprintf(stderr,
            "after the first lookup: %s, due %" PRId64 " ms after the settle base (now %" PRId64
            ")\n",
            machine_state_name(mid.state), mid.next_mono - settle_base, seen_at - settle_base);
    assert_int_equal(mid.state, MACHINE_NEW);
    assert_int_equal(mid.counters.posts, 0);
    assert_true(mid.next_mono >= settle_base + SETTLE_RUN2_MS);
    assert_true(mid.next_mono <= settle_base + SETTLE_RUN2_MS + 1000);
    store_item_done(&mid);

    /* The late commit landed within the delay and was found; nothing posted again. */
    if (rc != APBOT_OK)
        fprintf(stderr, "run: %s\n", e.stats.message);
    assert_int_equal(rc, APBOT_OK);
    struct inv_report r;
    int irc = invariants_check(e.db, e.port, 24, false, &r);
    invariants_print(&r);
    assert_int_equal(irc, 0);
    assert_int_equal(r.reposts_of_booked, 0);
    read_item(&e, key, &it);
    assert_int_equal(it.state, MACHINE_COMPLETED);
    assert_int_equal(it.counters.posts, 0);
    store_item_done(&it);
    assert_int_equal(simc_count_reference(e.port, key), 1);
    assert_int_equal(simc_stat(e.port, "post"), 1);
    assert_int_equal(e.stats.posts_sent, 0);
    e2e_stop(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_e2e_requeue_respects_settle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
