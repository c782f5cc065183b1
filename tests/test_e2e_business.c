/*
 * test_e2e_business.c - business outcomes end to end: validation rejections become
 * business exceptions with nothing booked; a booking already in the ERP is adopted without
 * posting; a booking under the same key with another amount goes to manual review; a post
 * budget spent on ambiguous outcomes ends in manual review with its evidence. Every test
 * checks the invariants on the simulator's ledger.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "apbot/machine.h"
#include "apbot/runner.h"
#include "apbot/store.h"
#include "helpers/e2e.h"
#include "helpers/invariants.h"
#include "helpers/sim_client.h"

#define SCENARIO "stall_ms = 3000\nlate_commit_ms = 1000\nindex_lag_ms = 200\n"

static void nap_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void run_ok(struct e2e *e)
{
    int rc = e2e_run(e);
    if (rc != APBOT_OK)
        fprintf(stderr, "run: %s\n", e->stats.message);
    assert_int_equal(rc, APBOT_OK);
    assert_int_equal(e->stats.stop, RUNNER_STOP_EMPTY);
}

static void rejections(const char *scenario_extra)
{
    struct e2e e;
    char scn[256];
    snprintf(scn, sizeof(scn), "%s%s", SCENARIO, scenario_extra);
    e2e_start(&e, "calm", scn, 3);
    static const struct {
        struct e2e_invoice inv;
        const char *code;
    } cases[] = {
        {{"100090", "BLK-1", "2026-11-03", "EUR", 12345, "6000", false, NULL}, "E103"},
        {{"100099", "UNK-1", "2026-11-03", "EUR", 12345, "6000", false, NULL}, "E102"},
        {{"100001", "CLOSED-1", "2026-09-15", "EUR", 12345, "6000", false, NULL}, "E104"},
        {{"100002", "GL-1", "2026-11-03", "EUR", 12345, "3000", false, NULL}, "E107"},
        {{"100003", "OK-1", "2026-11-03", "EUR", 12345, "6000", false, NULL}, NULL},
        {{"100004", "OK-2", "2026-11-04", "EUR", 999, "4000", true, NULL}, NULL},
    };
    char keys[6][32];
    for (size_t i = 0; i < 6; i++)
        e2e_add(&e, &cases[i].inv, keys[i]);
    run_ok(&e);
    e2e_assert_invariants(&e, false);
    assert_int_equal(e2e_count(&e, MACHINE_BUSINESS_EXCEPTION), 4);
    assert_int_equal(e2e_count(&e, MACHINE_COMPLETED), 2);
    assert_int_equal(simc_count_rows(e.port), 2);
    for (size_t i = 0; i < 6; i++) {
        struct store_item it;
        e2e_get_item(&e, keys[i], &it);
        if (cases[i].code) {
            assert_int_equal(it.state, MACHINE_BUSINESS_EXCEPTION);
            assert_non_null(it.reason);
            assert_non_null(strstr(it.reason, cases[i].code));
            assert_int_equal(simc_count_reference(e.port, keys[i]), 0);
        } else {
            assert_int_equal(it.state, MACHINE_COMPLETED);
        }
        store_item_done(&it);
    }
    e2e_stop(&e);
}

/* Blocked vendor, unknown vendor, closed period, G/L not allowed: rejected, nothing booked. */
static void test_e2e_validation_rejections(void **state)
{
    (void)state;
    rejections("");
}

/* The same messages delivered with HTTP 500 are still rejections, not ambiguity. */
static void test_e2e_validation_rejections_http500(void **state)
{
    (void)state;
    rejections("validation_status = 500\n");
}

/* Already in the ERP under our key with the same vendor and amount: adopt, never post. */
static void test_e2e_lookup_adopts_existing(void **state)
{
    (void)state;
    struct e2e e;
    char key[32], doc[64];
    e2e_start(&e, "calm", SCENARIO, 5);
    struct e2e_invoice inv = {"100005", "PRE-1", "2026-11-05", "EUR", 123456, "6000", false, NULL};
    e2e_add(&e, &inv, key);
    assert_int_equal(
        simc_book(e.port, "100005", "PRE-1", "2026-11-05", "EUR", "1234.56", key, doc, sizeof(doc)),
        0);
    nap_ms(400); /* past the search index lag (200 ms) */
    run_ok(&e);
    e2e_assert_invariants(&e, false);
    struct store_item it;
    e2e_get_item(&e, key, &it);
    assert_int_equal(it.state, MACHINE_COMPLETED);
    assert_string_equal(it.erp_doc, doc);
    assert_int_equal(it.counters.posts, 0);
    store_item_done(&it);
    assert_int_equal(simc_count_rows(e.port), 1);
    e2e_stop(&e);
}

/* Our key in the ERP with another amount: a human decides; nothing more is booked. */
static void test_e2e_lookup_conflict(void **state)
{
    (void)state;
    struct e2e e;
    char key[32], doc[64];
    e2e_start(&e, "calm", SCENARIO, 6);
    struct e2e_invoice inv = {"100006", "CONF-1", "2026-11-05", "EUR", 50000, "6000", false, NULL};
    e2e_add(&e, &inv, key);
    assert_int_equal(
        simc_book(e.port, "100006", "CONF-1", "2026-11-05", "EUR", "499.99", key, doc, sizeof(doc)),
        0);
    nap_ms(400);
    run_ok(&e);
    e2e_assert_invariants(&e, false);
    struct store_item it;
    e2e_get_item(&e, key, &it);
    assert_int_equal(it.state, MACHINE_MANUAL_REVIEW);
    assert_non_null(it.reason);
    assert_non_null(strstr(it.reason, doc));
    assert_int_equal(it.counters.posts, 0);
    store_item_done(&it);
    assert_int_equal(simc_count_rows(e.port), 1);
    e2e_stop(&e);
}

/* Two posts, each answered 500 and confirmed absent: the budget is spent, manual review. */
static void test_e2e_post_budget_exhausted(void **state)
{
    (void)state;
    struct e2e e;
    char key[32];
    e2e_start(&e, "calm", SCENARIO, 7);
    struct e2e_invoice inv = {"100007", "BUDGET-1", "2026-11-05", "EUR", 7777, "6000", false, NULL};
    e2e_add(&e, &inv, key);
    assert_int_equal(simc_fault(e.port, "error500_before_commit", 2), 0);
    run_ok(&e);
    e2e_assert_invariants(&e, false);
    struct store_item it;
    e2e_get_item(&e, key, &it);
    assert_int_equal(it.state, MACHINE_MANUAL_REVIEW);
    assert_int_equal(it.counters.posts, 2);
    assert_non_null(it.reason);
    assert_non_null(strstr(it.reason, "budget"));
    assert_non_null(it.payload);
    store_item_done(&it);
    assert_int_equal(simc_count_rows(e.port), 0);
    assert_int_equal(e2e_count_events(&e, "unknown"), 2);
    /* login, lookups, entry form, check and post of both rounds, reconciliations */
    assert_true(e2e_count_evidence(&e) >= 9);
    assert_false(e2e_evidence_contains(&e, "acme-demo"));
    e2e_stop(&e);
}

/*
 * Invoice text cannot forge the ERP's answer. The ERP re-displays the memo (the invoice's
 * description) on the confirmation form and on every re-shown entry form, so an outcome rule
 * that matched anywhere in the page could be steered by a vendor's text: a rejection text on
 * the confirmation page, or a success banner on the "already exists" page of an invoice the
 * ERP holds but its lagging search does not show yet.
 */
static void test_e2e_invoice_text_cannot_forge_outcome(void **state)
{
    (void)state;
    struct e2e e;
    char key_a[32], key_b[32], key_c[32], doc_b[64];
    e2e_start(&e, "calm",
              "stall_ms = 3000\nlate_commit_ms = 1000\nindex_lag_ms = 1500\n"
              "reference_guard = on\n",
              8);
    struct e2e_invoice a = {"100008", "MEMO-1", "2026-11-05", "EUR",
                            4200,     "6000",   false,        "E101: see attached delivery note"};
    struct e2e_invoice b = {
        "100009", "MEMO-2", "2026-11-05", "EUR",
        4300,     "6000",   false,        "I020: Document AP-2026-999999 was posted."};
    struct e2e_invoice c = {"100010", "MEMO-3", "2026-11-05", "EUR",
                            4400,     "6000",   false,        "E109: per contract"};
    e2e_add(&e, &a, key_a);
    e2e_add(&e, &b, key_b);
    e2e_add(&e, &c, key_c);
    /* A clerk booked b a moment ago: the search does not show it for 1.5 s. */
    assert_int_equal(simc_book(e.port, "100009", "MEMO-2", "2026-11-05", "EUR", "43.00", key_b,
                               doc_b, sizeof(doc_b)),
                     0);
    run_ok(&e);
    struct inv_report rep;
    (void)invariants_check(e.db, e.port, 24, false, &rep);
    invariants_print(&rep);
    assert_int_equal(rep.duplicated_refs, 0);
    assert_int_equal(rep.completed_unbooked + rep.completed_mismatch + rep.completed_unposted +
                         rep.completed_lines_mismatch + rep.exception_booked + rep.pending_bad,
                     0);
    assert_int_equal(rep.reposts_of_booked, 1); /* b, refused by the guard */

    struct store_item it;
    e2e_get_item(&e, key_a, &it);
    assert_int_equal(it.state, MACHINE_COMPLETED);
    store_item_done(&it);
    e2e_get_item(&e, key_b, &it);
    assert_int_equal(it.state, MACHINE_COMPLETED);
    assert_string_equal(it.erp_doc, doc_b); /* the real document, not the forged one */
    store_item_done(&it);
    e2e_get_item(&e, key_c, &it);
    assert_int_equal(it.state, MACHINE_COMPLETED);
    assert_int_equal(it.counters.attempts, 0);
    store_item_done(&it);
    assert_int_equal(simc_count_reference(e.port, key_a), 1);
    assert_int_equal(simc_count_reference(e.port, key_b), 1);
    assert_int_equal(simc_count_reference(e.port, key_c), 1);
    e2e_stop(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_e2e_validation_rejections),
        cmocka_unit_test(test_e2e_validation_rejections_http500),
        cmocka_unit_test(test_e2e_lookup_adopts_existing),
        cmocka_unit_test(test_e2e_lookup_conflict),
        cmocka_unit_test(test_e2e_post_budget_exhausted),
        cmocka_unit_test(test_e2e_invoice_text_cannot_forge_outcome),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
