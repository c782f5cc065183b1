/*
 * test_e2e_spa.c - apbot against the single-page ERP (erp-sim --ui spa, flows/spa.xml) on what
 * only a JSON web client does, each checked on the simulator's ground truth:
 *   - a vendor name with a quote, a backslash, a line break and non-ASCII letters reaches the
 *     ERP's record byte for byte (it travels inside the create call's JSON);
 *   - an ERP that answers every create with HTTP 200 and an error that is not a business rule
 *     (a server exception: here a decimal sent as a plain string) books nothing and nothing
 *     ends completed: each is reconciled and, after the post budget, set aside for review;
 *   - a business rule's refusal (a closed period) is a business exception with the ERP's own
 *     message as its reason, and nothing is booked;
 *   - a vendor or an account the ERP does not hold is a business exception naming the code;
 *   - writes refused on a session that has only read for a while (401 for a write while reads
 *     work): a fresh login, then the post goes on, each invoice booked once;
 *   - a refused login stops the run (the circuit breaker) with nothing sent;
 *   - the ids the invoices need are asked once per run and code, not once per invoice.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "apbot/machine.h"
#include "apbot/store.h"
#include "helpers/e2e.h"
#include "helpers/invariants.h"
#include "helpers/sim_client.h"

#define FAST                                                                                       \
    "service_ms.login = 0..1\nservice_ms.form = 0..1\nservice_ms.search = 0..1\n"                  \
    "service_ms.post = 0..2\nindex_lag_ms = 0\n"

static void spa_start(struct e2e *e, const char *scenario_text, uint64_t seed)
{
    e2e_start_ui(e, SIM_UI_SPA, "calm", scenario_text, seed);
    e->opt.settle_ms = 400;
}

/* Every invariant of the ground truth. */
static void check_invariants(struct e2e *e)
{
    struct inv_report r;
    int rc = invariants_check(e->db, e->port, 24, false, &r);
    if (rc != 0)
        invariants_print(&r);
    assert_int_equal(rc, 0);
    assert_int_equal(r.duplicated_refs, 0);
    assert_int_equal(simc_stat(e->port, "reposts_of_booked"), 0);
}

/* The stored item of key. */
static void item_of(struct e2e *e, const char *key, struct store_item *ret)
{
    struct store *st = NULL;
    char err[APBOT_ERR_LEN];
    assert_int_equal(store_open(e->db, &st, err, sizeof(err)), APBOT_OK);
    if (store_get_by_key(st, key, ret, err, sizeof(err)) != APBOT_OK)
        fail_msg("%s: %s", key, err);
    store_close(st);
}

static void test_spa_vendor_name_byte_for_byte(void **state)
{
    (void)state;
    static const char name[] = "Caf\xc3\xa9 \"Zur Post\" \\ M\xc3\xbcller\nGmbH & Co. \xe2\x82\xac";
    struct e2e e;
    char key[32];
    spa_start(&e, FAST, 41);
    struct e2e_invoice in = {.vendor = "100002",
                             .number = "SPA-NAME-1",
                             .date = "2026-11-03",
                             .currency = "EUR",
                             .amount = 12345,
                             .gl = "6000"};
    e.vendor_name = name;
    e2e_add(&e, &in, key);
    assert_int_equal(e2e_run(&e), APBOT_OK);
    assert_int_equal(e2e_count(&e, MACHINE_COMPLETED), 1);

    struct store_item it;
    item_of(&e, key, &it);
    char path[96];
    snprintf(path, sizeof(path), "/_sim/document?doc=%s", it.erp_doc);
    long status = 0;
    char *body = NULL;
    assert_int_equal(simc_request(e.port, "GET", path, NULL, 10000, &status, &body), 0);
    assert_int_equal(status, 200);
    json_error_t je;
    json_t *doc = json_loads(body, 0, &je);
    assert_non_null(doc);
    const char *memo = json_string_value(json_object_get(doc, "memo"));
    assert_non_null(memo);
    assert_string_equal(memo, name); /* byte for byte */
    assert_string_equal(json_string_value(json_object_get(doc, "reference")), key);
    json_decref(doc);
    free(body);
    store_item_done(&it);
    check_invariants(&e);
    e2e_stop(&e);
}

static void test_spa_error_200_never_completed(void **state)
{
    (void)state;
    struct e2e e;
    spa_start(&e, FAST, 42);
    /* the tax as a plain string where the ERP wants a Decimal: every create answers HTTP 200
     * with {"error": ["TypeError: ...", ...]}, which no rule of the flow names */
    e2e_flow_copy(&e, "\"${invoice.tax|abs|json:decimal}\"", "\"${invoice.tax|abs}\"");
    e2e_add_many(&e, "SPA-ERR", 4);
    assert_int_equal(e2e_run(&e), APBOT_OK);
    assert_int_equal(e2e_count(&e, MACHINE_COMPLETED), 0);
    assert_int_equal(
        e2e_count(&e, MACHINE_MANUAL_REVIEW) + e2e_count(&e, MACHINE_BUSINESS_EXCEPTION), 4);
    assert_int_equal(simc_count_rows(e.port), 0); /* nothing booked */
    assert_true(simc_stat(e.port, "create") >= 4);
    assert_true(e2e_count_events(&e, "unknown") >= 4); /* each answer reconciled, never believed */
    check_invariants(&e);
    e2e_stop(&e);
}

static void test_spa_user_error_is_business_exception(void **state)
{
    (void)state;
    struct e2e e;
    char key[32];
    spa_start(&e, FAST, 43);
    struct e2e_invoice in = {.vendor = "100003",
                             .number = "SPA-CLOSED",
                             .date = "2026-06-15", /* a closed period */
                             .currency = "EUR",
                             .amount = 5000,
                             .gl = "6000"};
    e2e_add(&e, &in, key);
    assert_int_equal(e2e_run(&e), APBOT_OK);
    assert_int_equal(e2e_count(&e, MACHINE_BUSINESS_EXCEPTION), 1);
    struct store_item it;
    item_of(&e, key, &it);
    assert_non_null(it.reason);
    assert_non_null(strstr(it.reason, "closed period")); /* the ERP's own words */
    assert_int_equal(it.counters.posts, 1);
    store_item_done(&it);
    assert_int_equal(simc_count_rows(e.port), 0);
    check_invariants(&e);
    e2e_stop(&e);
}

static void test_spa_unknown_codes_name_the_code(void **state)
{
    (void)state;
    struct e2e e;
    char k1[32], k2[32];
    spa_start(&e, FAST, 44);
    struct e2e_invoice vendor = {.vendor = "100099",
                                 .number = "SPA-NOVENDOR",
                                 .date = "2026-11-03",
                                 .currency = "EUR",
                                 .amount = 5000,
                                 .gl = "6000"};
    struct e2e_invoice account = {.vendor = "100004",
                                  .number = "SPA-NOACCOUNT",
                                  .date = "2026-11-03",
                                  .currency = "EUR",
                                  .amount = 5000,
                                  .gl = "7100"};
    e2e_add(&e, &vendor, k1);
    e2e_add(&e, &account, k2);
    assert_int_equal(e2e_run(&e), APBOT_OK);
    assert_int_equal(e2e_count(&e, MACHINE_BUSINESS_EXCEPTION), 2);
    struct store_item it;
    item_of(&e, k1, &it);
    assert_non_null(strstr(it.reason, "party"));
    assert_non_null(strstr(it.reason, "100099"));
    assert_int_equal(it.counters.posts, 1); /* the intent was there, nothing was sent */
    store_item_done(&it);
    item_of(&e, k2, &it);
    assert_non_null(strstr(it.reason, "account"));
    assert_non_null(strstr(it.reason, "7100"));
    store_item_done(&it);
    assert_int_equal(simc_stat(e.port, "create"), 0);
    assert_int_equal(simc_count_rows(e.port), 0);
    check_invariants(&e);
    e2e_stop(&e);
}

static void test_spa_write_session_dies_first(void **state)
{
    (void)state;
    struct e2e e;
    char keys[4][32], doc[64];
    /* a session that has not written for a second may read but not write */
    spa_start(&e, FAST "write_idle_s = 1\n", 45);
    /* four invoices the ERP already holds: four lookups and no write, 0.4 s each */
    for (int i = 0; i < 4; i++) {
        char number[32];
        snprintf(number, sizeof number, "SPA-IDLE-PRE-%d", i);
        struct e2e_invoice pre = {.vendor = "100003",
                                  .number = number,
                                  .date = "2026-11-03",
                                  .currency = "EUR",
                                  .amount = 1000 + i,
                                  .gl = "6000"};
        e2e_add(&e, &pre, keys[i]);
        char amount[16];
        snprintf(amount, sizeof amount, "10.%02d", i);
        assert_int_equal(simc_book(e.port, "100003", number, "2026-11-03", "EUR", amount, keys[i],
                                   doc, sizeof(doc)),
                         0);
    }
    /* then a new one, on the same session: its create is refused, a fresh login, and it goes on */
    e2e_add_many(&e, "SPA-IDLE", 1);
    e.opt.concurrency = 1;
    assert_int_equal(simc_set(e.port, "service_ms.search", "400..400"), 0);
    assert_int_equal(e2e_run(&e), APBOT_OK);
    assert_int_equal(e2e_count(&e, MACHINE_COMPLETED), 5);
    assert_int_equal(simc_stat(e.port, "login"), 2);
    assert_int_equal(simc_count_rows(e.port), 5);
    for (int i = 0; i < 4; i++) {
        struct store_item it;
        item_of(&e, keys[i], &it);
        assert_int_equal(it.counters.posts, 0);
        store_item_done(&it);
    }
    check_invariants(&e);
    e2e_stop(&e);
}

static void test_spa_refused_login_stops(void **state)
{
    (void)state;
    struct e2e e;
    spa_start(&e, FAST, 46);
    e2e_add_many(&e, "SPA-LOGIN", 3);
    setenv("APBOT_ERP_PASSWORD", "wrong-password", 1);
    int rc = e2e_run(&e);
    setenv("APBOT_ERP_PASSWORD", "acme-demo", 1);
    assert_int_equal(rc, APBOT_E_SYSTEMIC);
    assert_int_equal(e2e_count(&e, MACHINE_NEW), 3); /* untouched, still queued */
    assert_int_equal(simc_stat(e.port, "create"), 0);
    assert_true(simc_stat(e.port, "login") <= 4); /* one refusal stops every session */
    e2e_stop(&e);
}

static void test_spa_ids_resolved_once_per_run(void **state)
{
    (void)state;
    struct e2e e;
    spa_start(&e, FAST, 47);
    /* twelve invoices of one vendor, one account, one currency */
    for (int i = 0; i < 12; i++) {
        char number[32];
        snprintf(number, sizeof(number), "SPA-ONCE-%d", i);
        struct e2e_invoice in = {.vendor = "100005",
                                 .number = number,
                                 .date = "2026-11-03",
                                 .currency = "EUR",
                                 .amount = 1000 + i,
                                 .gl = "6000"};
        e2e_add(&e, &in, NULL);
    }
    e.opt.concurrency = 1;
    assert_int_equal(e2e_run(&e), APBOT_OK);
    assert_int_equal(e2e_count(&e, MACHINE_COMPLETED), 12);
    /* party, account, currency and journal: four reads, once each */
    assert_int_equal(simc_stat(e.port, "read"), 4);
    check_invariants(&e);
    e2e_stop(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spa_vendor_name_byte_for_byte),
        cmocka_unit_test(test_spa_error_200_never_completed),
        cmocka_unit_test(test_spa_user_error_is_business_exception),
        cmocka_unit_test(test_spa_unknown_codes_name_the_code),
        cmocka_unit_test(test_spa_write_session_dies_first),
        cmocka_unit_test(test_spa_refused_login_stops),
        cmocka_unit_test(test_spa_ids_resolved_once_per_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
