/*
 * test_e2e_safety.c - issue 9's holes 3 and 4 and two of its "Also" items, end to end through
 * the runner, each asserted on ground truth:
 *
 *  - a cut result list (acme, a lookup by natural key: vendor and vendor invoice number with
 *    <expect>, no key column) on a vendor with more earlier invoices than the search shows:
 *    never an absence, never a second booking - after an ambiguous post of apbot's own, and
 *    for an invoice a clerk booked before apbot looked;
 *  - a garbled "no results" page (fault search_garbled) on both UIs: never an absence;
 *  - a committing GET the server drops after reading it: it reaches the ERP exactly once (a
 *    small hostile server in this test counts the requests), and the item reconciles;
 *  - one document, one item: a flow whose completed rule captures the same document number
 *    for every invoice sends every item claiming it to manual review, none completed;
 *  - the intent to post on disk before the form is sent: with one session (nothing to share
 *    a disk sync with) every post costs a sync of its own, and the changes between two posts
 *    (a completion, the next claim, its intent) share it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/machine.h"
#include "apbot/runner.h"
#include "apbot/store.h"
#include "helpers/e2e.h"
#include "helpers/invariants.h"
#include "helpers/pagesrv.h"
#include "helpers/sim_client.h"

static void run_ok(struct e2e *e)
{
    int rc = e2e_run(e);
    if (rc != APBOT_OK)
        fprintf(stderr, "run: %s\n", e->stats.message);
    assert_int_equal(rc, APBOT_OK);
    assert_int_equal(e->stats.stop, RUNNER_STOP_EMPTY);
}

/* ---- a cut result list, a lookup by natural key (acme) ----------------------------------- */

#define NK_VENDOR "100003"
#define NK_ROWS                                                                                    \
    5 /* the search shows at most this many rows (search_max_rows), and the flow                   \
       * says so (max-rows) */

/* acme.xml looking invoices up by vendor and vendor invoice number (prefix search), compared
 * exactly with <expect>, the screen's maximum NK_ROWS. */
static void natural_key_flow(struct e2e *e)
{
    e2e_flow_copy(e,
                  "<lookup get=\"/erp/ap/invoice/search?reference=${key|url}\" "
                  "key-column=\"reference\">",
                  "<lookup get=\"/erp/ap/invoice/search?vendorNo=${vendor.id|url}&amp;"
                  "vendorInvNo=${invoice.number|url}\">");
    e2e_flow_copy(e, "    </table>\n  </lookup>",
                  "    </table>\n"
                  "    <expect column=\"vendor\">${vendor.id}</expect>\n"
                  "    <expect column=\"invoice_number\">${invoice.number}</expect>\n"
                  "  </lookup>");
    e2e_flow_copy(e, "max-rows=\"200\"", "max-rows=\"5\"");
}

/* NK_ROWS earlier invoices of the vendor whose numbers start with `number` (NK-10, NK-11...):
 * the ERP's prefix search lists them first (lower document numbers). */
static void book_earlier(struct e2e *e, const char *number)
{
    for (int i = 0; i < NK_ROWS; i++) {
        char inv[32], doc[64];
        snprintf(inv, sizeof(inv), "%s%d", number, i);
        assert_int_equal(
            simc_book(e->port, NK_VENDOR, inv, "2026-10-20", "EUR", "99.00", "", doc, sizeof(doc)),
            0);
    }
}

/*
 * apbot's own post times out (booked); before the reconciliation the vendor's earlier invoices
 * show up in the lagging search: the screen holds its maximum of rows, all earlier documents,
 * and hides the booking. A lookup that took that for an absence would post again.
 */
static void test_e2e_cut_list_after_ambiguous_post(void **state)
{
    (void)state;
    struct e2e e;
    char key[32];
    char scn[160];
    /* The search shows a booking 3 s late: the earlier invoices, booked just before the run,
     * are not yet listed when apbot checks (at once), but are when it reconciles (after the
     * 1.5 s timeout and the 2.5 s settle delay). */
    snprintf(scn, sizeof(scn), "stall_ms = 3000\nindex_lag_ms = 3000\nsearch_max_rows = %d\n",
             NK_ROWS);
    e2e_start_ui(&e, SIM_UI_ACME, "calm", scn, 51);
    natural_key_flow(&e);
    struct e2e_invoice inv = {NK_VENDOR, "NK-1", "2026-11-05", "EUR", 12345, "6000", false, NULL};
    e2e_add(&e, &inv, key);
    book_earlier(&e, "NK-1");
    assert_int_equal(simc_fault(e.port, "timeout_after_commit", 1), 0);
    run_ok(&e);

    e2e_assert_invariants(&e, false);
    assert_int_equal(simc_count_natural(e.port, NK_VENDOR, "NK-1"), 1);
    assert_int_equal(simc_count_reference(e.port, key), 1);
    struct store_item it;
    e2e_get_item(&e, key, &it);
    fprintf(stderr, "cut list: %s, posts %d: %s\n", machine_state_name(it.state), it.counters.posts,
            it.reason ? it.reason : "-");
    /* The booking could not be confirmed (the list is cut): a human decides; never re-posted. */
    assert_int_equal(it.state, MACHINE_MANUAL_REVIEW);
    assert_int_equal(it.counters.posts, 1);
    assert_non_null(it.reason);
    assert_non_null(strstr(it.reason, "cut"));
    store_item_done(&it);
    assert_int_equal(simc_stat(e.port, "timeout_after_commit"), 1);
    assert_int_equal(e2e_count_events(&e, "unknown"), 1);
    e2e_stop(&e);
}

/* A clerk booked the invoice (without apbot's key) after the vendor's earlier ones: the search
 * shows only the earlier ones. apbot must not post it a second time. */
static void test_e2e_cut_list_hides_a_booking(void **state)
{
    (void)state;
    struct e2e e;
    char key[32], doc[64], scn[96];
    snprintf(scn, sizeof(scn), "index_lag_ms = 0\nsearch_max_rows = %d\n", NK_ROWS);
    e2e_start_ui(&e, SIM_UI_ACME, "calm", scn, 52);
    natural_key_flow(&e);
    struct e2e_invoice inv = {NK_VENDOR, "NK-2", "2026-11-05", "EUR", 12345, "6000", false, NULL};
    e2e_add(&e, &inv, key);
    book_earlier(&e, "NK-2");
    assert_int_equal(
        simc_book(e.port, NK_VENDOR, "NK-2", "2026-11-05", "EUR", "123.45", "", doc, sizeof(doc)),
        0);
    run_ok(&e);

    e2e_assert_invariants(&e, false);
    assert_int_equal(simc_count_natural(e.port, NK_VENDOR, "NK-2"), 1); /* the clerk's alone */
    struct store_item it;
    e2e_get_item(&e, key, &it);
    fprintf(stderr, "cut list: %s, posts %d: %s\n", machine_state_name(it.state), it.counters.posts,
            it.reason ? it.reason : "-");
    assert_int_equal(it.state, MACHINE_MANUAL_REVIEW);
    assert_int_equal(it.counters.posts, 0);
    assert_non_null(it.reason);
    assert_non_null(strstr(it.reason, "cut"));
    store_item_done(&it);
    assert_int_equal(simc_stat(e.port, "post"), 0); /* nothing was ever submitted */
    e2e_stop(&e);
}

/* ---- a garbled "no results" page --------------------------------------------------------- */

/*
 * A clerk booked the invoice under apbot's key; the first searches answer the no-results
 * paragraph followed by noise. Taken for an absence, apbot would post it again; it must
 * retry the lookup and adopt the booking.
 */
static void garbled_no_results(enum sim_ui ui)
{
    struct e2e e;
    char key[32], doc[64];
    e2e_start_ui(&e, ui, "calm", "index_lag_ms = 0\n", 53);
    struct e2e_invoice inv = {"100004", "GARB-1", "2026-11-05", "EUR", 4321, "6000", false, NULL};
    e2e_add(&e, &inv, key);
    assert_int_equal(
        simc_book(e.port, "100004", "GARB-1", "2026-11-05", "EUR", "43.21", key, doc, sizeof(doc)),
        0);
    assert_int_equal(simc_fault(e.port, "search_garbled", 2), 0);
    run_ok(&e);

    e2e_assert_invariants(&e, false);
    assert_int_equal(simc_stat(e.port, "search_garbled"), 2);
    assert_int_equal(simc_count_reference(e.port, key), 1);
    struct store_item it;
    e2e_get_item(&e, key, &it);
    assert_int_equal(it.state, MACHINE_COMPLETED);
    assert_string_equal(it.erp_doc, doc);
    assert_int_equal(it.counters.posts, 0);
    store_item_done(&it);
    assert_int_equal(e2e_count_events(&e, "lookup-failed"), 2);
    e2e_stop(&e);
}

static void test_e2e_garbled_no_results_acme(void **state)
{
    (void)state;
    garbled_no_results(SIM_UI_ACME);
}

static void test_e2e_garbled_no_results_classic(void **state)
{
    (void)state;
    garbled_no_results(SIM_UI_CLASSIC);
}

/* ---- a committing GET, dropped after it was read ----------------------------------------- */

#define GET_DOC "AP-2026-000777"

/*
 * A small classic-style ERP (tests/data/pages/flow-classic.xml and its pages) whose entry form
 * is submitted with method GET: its save is a GET. The server reads that GET and closes the
 * connection without answering. A GET on a reused connection that dies like this is silently
 * sent again by libcurl - a second booking. The committing GET is sent once (bot/http.c
 * refuses libcurl's own re-send), so the ERP sees it once; the post is unknown and the
 * reconciliation finds the booking.
 */
static void test_e2e_committing_get_dropped(void **state)
{
    (void)state;
    struct e2e e;
    char key[32], path[160];
    static char search_hit[1024], detail[1024];

    e2e_start_ui(&e, SIM_UI_CLASSIC, NULL, NULL, 54); /* the simulator is not used */
    e2e_src_path(e.flow, sizeof(e.flow), "tests/data/pages/flow-classic.xml");
    struct pagesrv *srv = pagesrv_start();
    e2e_flow_copy(&e, "<policy connect-timeout-ms=\"1000\" timeout-ms=\"3000\" settle-ms=\"3000\"",
                  "<policy connect-timeout-ms=\"1000\" timeout-ms=\"1000\" settle-ms=\"1000\"");
    e.opt.erp_url = pagesrv_base(srv);
    e.opt.settle_ms = 1000;
    e.opt.timeout_ms = 1000;
    e.opt.concurrency = 1;
    struct e2e_invoice inv = {"100001", "GET-1", "2026-11-03", "EUR", 1000, "6000", false, NULL};
    e2e_add(&e, &inv, key);

    snprintf(search_hit, sizeof(search_hit),
             "<html><body><form id=\"searchForm\"></form><table id=\"results\"><tbody>"
             "<tr><td class=\"id\">%s</td><td class=\"status\">posted</td></tr>"
             "</tbody></table></body></html>",
             GET_DOC);
    snprintf(detail, sizeof(detail),
             "<html><body><form name=\"invoice\"><input name=\"ponumber\" value=\"%s\"></form>"
             "<span id=\"total\">10.00</span><span id=\"status\">posted</span></body></html>",
             key);
    const struct pagesrv_resp login[] = {{.body = "Success\n", .type = "text/plain"}};
    const struct pagesrv_resp search[] = {
        {.body = "<html><body><form id=\"searchForm\"></form>"
                 "<p id=\"noResults\">No transactions found.</p></body></html>"},
        {.body = search_hit}};
    const struct pagesrv_resp add[] = {{.file = "add-1.html"}};
    const struct pagesrv_resp update[] = {{.file = "add-get.html"}};
    const struct pagesrv_resp save[] = {{.drop = true}};
    const struct pagesrv_resp edit[] = {{.body = detail}};
    pagesrv_route(srv, "GET", "/login.pl?action=authenticate", login, 1);
    snprintf(path, sizeof(path), "/app/search?reference=%s", key);
    pagesrv_route(srv, "GET", path, search, 2);
    pagesrv_route(srv, "GET", "/ap.pl?action=add", add, 1);
    pagesrv_route_body(srv, "POST", "/ap.pl", "action=update", update, 1);
    pagesrv_route(srv, "GET", "/ap.pl?form_id=*", save, 1);
    pagesrv_route(srv, "GET", "/ap.pl?action=edit&id=" GET_DOC, edit, 1);

    int rc = e2e_run(&e);
    int saves = pagesrv_count(srv, "GET", "/ap.pl?form_id=");
    struct pagesrv_req rq;
    bool have_save = pagesrv_last(srv, "GET", "/ap.pl?form_id=", &rq);
    pagesrv_stop(srv);
    if (rc != APBOT_OK)
        fprintf(stderr, "run: %s\n", e.stats.message);
    assert_int_equal(rc, APBOT_OK);

    fprintf(stderr, "committing GET: %d request(s) at the ERP\n", saves);
    assert_int_equal(saves, 1);
    assert_true(have_save);
    assert_non_null(strstr(rq.path, "action=save"));
    assert_false(rq.fresh); /* on a kept-alive connection: where libcurl would re-send */
    struct store_item it;
    e2e_get_item(&e, key, &it);
    assert_int_equal(it.state, MACHINE_COMPLETED);
    assert_string_equal(it.erp_doc, GET_DOC);
    assert_int_equal(it.counters.posts, 1);
    store_item_done(&it);
    assert_int_equal(e2e_count_events(&e, "unknown"), 1);
    e2e_stop(&e);
}

/* ---- one document, one item -------------------------------------------------------------- */

/*
 * A flow whose success rule captures only "AP-2026" (a forged or sloppy pattern): every post
 * is answered with the same document number. The first item to claim it holds it until the
 * second claims it too; then both go to manual review, and so does every later claimant.
 */
static void test_e2e_one_document_one_item(void **state)
{
    (void)state;
    struct e2e e;
    e2e_start_ui(&e, SIM_UI_ACME, "calm", "index_lag_ms = 0\n", 55);
    e2e_flow_copy(&e, "I020: Document (?&lt;doc&gt;AP-\\d{4}-\\d{6}) was posted",
                  "I020: Document (?&lt;doc&gt;AP-2026)-\\d{6} was posted");
    e.opt.concurrency = 1;
    e2e_add_many(&e, "DOC1", 4);
    run_ok(&e);

    /* Each invoice reached the ERP once (the ERP numbered them apart) ... */
    e2e_assert_invariants(&e, false);
    assert_int_equal(simc_count_rows(e.port), 4);
    /* ... but none is completed under the one number every answer named. */
    assert_int_equal(e2e_count(&e, MACHINE_COMPLETED), 0);
    assert_int_equal(e2e_count(&e, MACHINE_MANUAL_REVIEW), 4);
    assert_int_equal(e2e_count_events(&e, "doc-conflict"), 4);
    assert_int_equal(e2e_max_posts(&e), 1);
    e2e_stop(&e);
}

/*
 * The worker's writes are deferred and synced before every request that may change the ERP
 * (runner.c, worker_durable). One session, calm ERP: at least one sync per invoice - its
 * intent, synced before the filled form is sent (a gate that synced nothing would show ~0
 * here) - and hardly more: the claim, the intent and the last item's completion, with only
 * pages read in between, share it (writes synced one by one would show three per invoice).
 */
static void test_e2e_intent_synced_before_the_form(void **state)
{
    (void)state;
    struct e2e e;
    e2e_start(&e, "calm", NULL, 3);
    e2e_add_many(&e, "SYNC", 10);
    e.opt.concurrency = 1;
    run_ok(&e);
    e2e_assert_invariants(&e, false);
    assert_int_equal(e2e_count(&e, MACHINE_COMPLETED), 10);
    fprintf(stderr, "%lld state changes, %lld disk syncs for 10 invoices\n",
            (long long)e.stats.transitions, (long long)e.stats.syncs);
    assert_true(e.stats.syncs >= 10);
    assert_true(e.stats.syncs <= 10 + 2);
    e2e_stop(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_e2e_cut_list_after_ambiguous_post),
        cmocka_unit_test(test_e2e_cut_list_hides_a_booking),
        cmocka_unit_test(test_e2e_garbled_no_results_acme),
        cmocka_unit_test(test_e2e_garbled_no_results_classic),
        cmocka_unit_test(test_e2e_committing_get_dropped),
        cmocka_unit_test(test_e2e_one_document_one_item),
        cmocka_unit_test(test_e2e_intent_synced_before_the_form),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
