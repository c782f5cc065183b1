/*
 * test_sim_invariants.c - the end-to-end invariants (tests/helpers/invariants.c) fail when
 * they should: apbot runs a few invoices through flows/acme.xml on a calm simulator, then the
 * ground truth is bent one way at a time and the report must name each breach - a multi-line
 * invoice booked as one line, an amount changed in the ERP, a completed item whose booking is
 * only a draft, a second post of a booked reference (reposts_of_booked) with the reference
 * booked twice. Also the e2e harness itself: multi-line invoices and the classic UI start.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/machine.h"
#include "apbot/runner.h"
#include "helpers/e2e.h"
#include "helpers/invariants.h"
#include "helpers/sim_client.h"

static const char quiet[] = "index_lag_ms = 0\n";

static void run(struct e2e *e)
{
    int rc = e2e_run(e);
    if (rc != APBOT_OK)
        fprintf(stderr, "run: %s\n", e->stats.message);
    assert_int_equal(rc, APBOT_OK);
    assert_int_equal(e->stats.stop, RUNNER_STOP_EMPTY);
}

static void test_sim_invariants_catch_breaches(void **state)
{
    (void)state;
    struct e2e e;
    struct inv_report r;
    char key_a[32], key_b[32], ref[32];
    e2e_start(&e, "calm", quiet, 17);
    assert_int_equal(e.ui, SIM_UI_ACME);

    /* one single-line invoice without tax: everything holds */
    struct e2e_invoice a = {"100001", "INVAR-A", "2026-11-03", "EUR", 12345, "5700", false, NULL};
    e2e_add(&e, &a, key_a);
    run(&e);
    assert_int_equal(invariants_check(e.db, e.port, 24, false, &r), 0);
    assert_int_equal(r.completed, 1);
    assert_int_equal(r.reposts_of_booked, 0);
    assert_int_equal(r.completed_lines_mismatch, 0);
    assert_int_equal(r.completed_unposted, 0);
    char *csv = NULL;
    assert_int_equal(simc_lines(e.port, &csv), 0);
    assert_non_null(strstr(csv, ",1,5700,123.45,"));
    free(csv);

    /* a multi-line invoice with tax through a flow whose line fields the ERP ignores (names
     * it does not read): booked as one line of the whole amount, not the invoice's lines */
    e2e_flow_copy(&e, "name=\"lineGl_${line.n}\"", "name=\"xGl_${line.n}\"");
    e2e_flow_copy(&e, "name=\"lineAmount_${line.n}\"", "name=\"xAmount_${line.n}\"");
    e2e_flow_copy(&e, "name=\"lineText_${line.n}\"", "name=\"xText_${line.n}\"");
    struct e2e_invoice head = {"100002", "INVAR-B", "2026-11-04", "EUR", 0, NULL, false, NULL};
    struct e2e_line lines[] = {{"5700", 10000, 1900, "Paper"}, {"6010", 2000, 380, "Toner"}};
    e2e_add_lines(&e, &head, lines, 2, key_b);
    run(&e);
    assert_int_equal(invariants_check(e.db, e.port, 24, false, &r), -1);
    invariants_print(&r);
    assert_int_equal(r.completed, 2);
    assert_int_equal(r.completed_lines_mismatch, 1);
    assert_int_equal(r.completed_mismatch, 0); /* the total (142.80) is right */
    assert_non_null(strstr(r.first_problem, key_b));
    assert_int_equal(simc_count_rows(e.port), 2);

    /* the ERP's amount of A changed afterwards */
    char doc_a[32];
    assert_int_equal(simc_ledger(e.port, &csv), 0);
    snprintf(ref, sizeof(ref), "%.24s", key_a);
    const char *row = strstr(csv, ref);
    assert_non_null(row);
    while (row > csv && row[-1] != '\n')
        row--;
    snprintf(doc_a, sizeof(doc_a), "%.14s", row);
    free(csv);
    assert_int_equal(simc_amend(e.port, doc_a, "999.99"), 0);
    assert_int_equal(invariants_check(e.db, e.port, 24, false, &r), -1);
    assert_int_equal(r.completed_mismatch, 1);
    assert_int_equal(r.completed_lines_mismatch, 1);

    /* A's booking replaced by a draft carrying its reference: completed but not approved */
    assert_int_equal(simc_delete(e.port, doc_a), 0);
    char body[512];
    long status = 0;
    snprintf(body, sizeof(body),
             "vendor_id=100001&invoice_number=INVAR-A&invoice_date=2026-11-03&currency=EUR"
             "&amount=123.45&gl_account=5700&status=draft&reference=%s",
             ref);
    assert_int_equal(simc_request(e.port, "POST", "/_sim/book", body, 5000, &status, NULL), 0);
    assert_int_equal(status, 200);
    assert_int_equal(invariants_check(e.db, e.port, 24, false, &r), -1);
    assert_int_equal(r.completed_unposted, 1);
    assert_int_equal(r.duplicated_refs, 0);

    /* someone posts A's reference again through the screens: a re-post of something booked,
     * and the reference booked twice (the guard is off) */
    struct simc_session *ss = simc_session_new(e.port, 5000);
    char fields[512], doc[64];
    assert_int_equal(simc_login(ss, "clerk", "acme-demo"), 0);
    simc_fields(fields, sizeof(fields), "INVAR-A2", ref);
    assert_int_equal(simc_post_invoice(ss, fields, doc, sizeof(doc)), 0);
    simc_session_free(ss);
    assert_int_equal(invariants_check(e.db, e.port, 24, false, &r), -1);
    assert_int_equal(r.reposts_of_booked, 1);
    assert_int_equal(r.duplicated_refs, 1);
    e2e_stop(&e);
}

/* The harness: e2e_add_many_lines makes invoices of 1..max_lines lines whose lines, tax and
 * total are consistent; e2e_start_ui starts the classic UI and names flows/classic.xml. */
static void test_sim_invariants_harness(void **state)
{
    (void)state;
    struct e2e e;
    e2e_start_ui(&e, SIM_UI_CLASSIC, "calm", quiet, 3);
    assert_int_equal(e.ui, SIM_UI_CLASSIC);
    assert_non_null(strstr(e.flow, "flows/classic.xml"));
    assert_string_equal(e.opt.flow_path, e.flow);
    char *json = NULL;
    assert_int_equal(simc_stats(e.port, &json), 0);
    assert_non_null(strstr(json, "\"ui\":\"classic\""));
    free(json);
    e2e_add_many_lines(&e, "HARN", 6, 3);
    assert_int_equal(e.n_items, 6);
    assert_int_equal(e2e_count(&e, MACHINE_NEW), 6);
    /* nothing ran: the invariants hold with pending items allowed, not without */
    struct inv_report r;
    assert_int_equal(invariants_check(e.db, e.port, 24, true, &r), 0);
    assert_int_equal(r.pending, 6);
    assert_int_equal(invariants_check(e.db, e.port, 24, false, &r), -1);
    assert_int_equal(r.pending_bad, 6);
    e2e_stop(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sim_invariants_catch_breaches),
        cmocka_unit_test(test_sim_invariants_harness),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
