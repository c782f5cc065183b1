/*
 * test_sim_prg.c - the simulated ERP's post/redirect/get mode (scenario key post_redirect): a
 * successful post books and answers 303 to GET /erp/ap/invoice/posted?doc=..., which renders
 * the same success page the direct answer is; every other outcome of the post stays a direct
 * answer; off (the default) nothing changes. The two faults of the result page
 * (result_login_page, result_overload503) spoil only that GET: the booking stands, once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/sim_client.h"
#include "sim.h"

static const char fast[] = "slots = 4\n"
                           "service_ms.login = 0\n"
                           "service_ms.form = 0\n"
                           "service_ms.check = 0..1\n"
                           "service_ms.post = 0..1\n"
                           "service_ms.search = 0\n"
                           "service_ms.journal = 0\n"
                           "index_lag_ms = 0\n";

static const char result_path[] = "/erp/ap/invoice/posted?doc=";

struct fx {
    struct sim *sim;
    unsigned short port;
    struct simc_session *ss;
};

static int start(void **state, bool prg)
{
    struct fx *f = calloc(1, sizeof *f);
    char scn[512];
    char err[256];
    if (!f)
        return -1;
    snprintf(scn, sizeof scn, "%spost_redirect = %s\n", fast, prg ? "on" : "off");
    struct sim_options opt = {.port = 0, .scenario_text = scn, .seed = 5, .admin = true};
    if (sim_start(&opt, &f->sim, err, sizeof err)) {
        fprintf(stderr, "sim_start: %s\n", err);
        free(f);
        return -1;
    }
    f->port = sim_port(f->sim);
    f->ss = simc_session_new(f->port, 5000);
    if (simc_login(f->ss, "clerk", "acme-demo")) {
        simc_session_free(f->ss);
        sim_stop(f->sim);
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int setup_on(void **state)
{
    return start(state, true);
}

static int setup_off(void **state)
{
    return start(state, false);
}

static int teardown(void **state)
{
    struct fx *f = *state;
    simc_session_free(f->ss);
    sim_stop(f->sim);
    free(f);
    return 0;
}

/* Step 1 with the standard fields; the confirmation form is in simc_body afterwards. */
static void check(struct fx *f, const char *inv_no, const char *reference)
{
    long status = 0;
    char fields[512];
    simc_fields(fields, sizeof fields, inv_no, reference);
    assert_int_equal(simc_check(f->ss, fields, &status), 0);
    assert_int_equal(status, 200);
    assert_non_null(strstr(simc_body(f->ss), "id=\"apConfirm\""));
}

/* The success page's message markup and document number for doc. */
static void assert_success_page(const char *html, const char *doc)
{
    char want[160], got[64];
    snprintf(want, sizeof want, "<span class=\"msgText\">I020: Document %s was posted.</span>",
             doc);
    assert_non_null(strstr(html, want));
    assert_int_equal(simc_by_id(html, "docNo", got, sizeof got), 0);
    assert_string_equal(got, doc);
}

/* A well-formed document number: AP-YYYY-NNNNNN. */
static bool doc_ok(const char *doc)
{
    if (strlen(doc) != 14 || strncmp(doc, "AP-", 3) != 0 || doc[7] != '-')
        return false;
    for (int i = 3; i < 14; i++) {
        if (i != 7 && (doc[i] < '0' || doc[i] > '9'))
            return false;
    }
    return true;
}

/* Step 2: expects 303 to the result page; writes the document number into doc (32 bytes) and
 * the Location into loc (256 bytes). */
static void post_redirected(struct fx *f, char *doc, char *loc)
{
    long status = 0;
    assert_int_equal(simc_confirm(f->ss, &status), 0);
    assert_int_equal(status, 303);
    assert_int_equal(simc_last_header(f->ss, "Location", loc, 256), 0);
    assert_true(strncmp(loc, result_path, strlen(result_path)) == 0);
    snprintf(doc, 32, "%s", loc + strlen(result_path));
    assert_true(doc_ok(doc));
    /* the 303 itself is no success page, and keeps the session (no new cookie) */
    assert_null(strstr(simc_body(f->ss), "I020:"));
    char cookie[256];
    assert_int_equal(simc_last_header(f->ss, "Set-Cookie", cookie, sizeof cookie), -1);
}

/* ---- off: unchanged ----------------------------------------------------------------------- */

static void test_sim_prg_off_answers_directly(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char doc[64], loc[256], path[128];
    check(f, "PRG-OFF", "AP1-PRG-OFF");
    assert_int_equal(simc_confirm(f->ss, &status), 0);
    assert_int_equal(status, 200);
    assert_int_equal(simc_last_header(f->ss, "Location", loc, sizeof loc), -1);
    assert_int_equal(simc_by_id(simc_body(f->ss), "docNo", doc, sizeof doc), 0);
    assert_success_page(simc_body(f->ss), doc);
    /* without post_redirect the result page is an unknown screen, counted as "other" */
    long long other = simc_stat(f->port, "other");
    snprintf(path, sizeof path, "%s%s", result_path, doc);
    assert_int_equal(simc_get(f->ss, path, &status), 0);
    assert_int_equal(status, 404);
    char msg[256];
    assert_int_equal(simc_message(simc_body(f->ss), msg, sizeof msg), 0);
    assert_string_equal(msg, "E404: The requested page does not exist.");
    assert_int_equal(simc_stat(f->port, "other"), other + 1);
    assert_int_equal(simc_stat(f->port, "posted"), 0);
    assert_int_equal(simc_count_reference(f->port, "AP1-PRG-OFF"), 1);
}

/* ---- on ----------------------------------------------------------------------------------- */

static void test_sim_prg_redirects_to_result_page(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char doc[32], loc[256];
    check(f, "PRG-1", "AP1-PRG-1");
    post_redirected(f, doc, loc);
    assert_int_equal(simc_count_reference(f->port, "AP1-PRG-1"), 1);
    assert_int_equal(simc_get(f->ss, loc, &status), 0);
    assert_int_equal(status, 200);
    assert_success_page(simc_body(f->ss), doc);
    /* the result page can be fetched again (a reload books nothing) */
    assert_int_equal(simc_get(f->ss, loc, &status), 0);
    assert_int_equal(status, 200);
    assert_success_page(simc_body(f->ss), doc);
    assert_int_equal(simc_count_reference(f->port, "AP1-PRG-1"), 1);
    assert_int_equal(simc_count_rows(f->port), 1);
    assert_int_equal(simc_stat(f->port, "posted"), 2);
}

/* The result page is byte for byte the page the direct answer is. */
static void test_sim_prg_result_page_equals_direct_answer(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char doc[64], path[128];
    assert_int_equal(simc_set(f->port, "post_redirect", "off"), 0);
    check(f, "PRG-EQ", "AP1-PRG-EQ");
    assert_int_equal(simc_confirm(f->ss, &status), 0);
    assert_int_equal(status, 200);
    assert_int_equal(simc_by_id(simc_body(f->ss), "docNo", doc, sizeof doc), 0);
    size_t n = strlen(simc_body(f->ss)) + 1;
    char *direct = malloc(n);
    assert_non_null(direct);
    memcpy(direct, simc_body(f->ss), n);
    assert_int_equal(simc_set(f->port, "post_redirect", "on"), 0);
    snprintf(path, sizeof path, "%s%s", result_path, doc);
    assert_int_equal(simc_get(f->ss, path, &status), 0);
    assert_int_equal(status, 200);
    assert_string_equal(simc_body(f->ss), direct);
    free(direct);
}

/* Validation errors at the post (E107, E109) and the E111 guard stay direct answers; the
 * result page of a document that does not exist is a 404. */
static void test_sim_prg_other_outcomes_direct(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char doc[32], loc[256], msg[256];
    assert_int_equal(simc_set(f->port, "reference_guard", "on"), 0);
    check(f, "PRG-DUP", "AP1-PRG-DUP");
    post_redirected(f, doc, loc);
    /* the same reference again: E111 as a direct 200 */
    check(f, "PRG-DUP2", "AP1-PRG-DUP");
    assert_int_equal(simc_confirm(f->ss, &status), 0);
    assert_int_equal(status, 200);
    assert_int_equal(simc_last_header(f->ss, "Location", loc, sizeof loc), -1);
    assert_int_equal(simc_message(simc_body(f->ss), msg, sizeof msg), 0);
    assert_true(strncmp(msg, "E111: ", 6) == 0);
    /* a reused step-2 token: E109, direct */
    check(f, "PRG-TOK", "AP1-PRG-TOK");
    char *hidden = simc_hidden_form(simc_body(f->ss));
    assert_non_null(hidden);
    assert_int_equal(simc_post(f->ss, "/erp/ap/invoice/post", hidden, &status), 0);
    assert_int_equal(status, 303);
    assert_int_equal(simc_post(f->ss, "/erp/ap/invoice/post", hidden, &status), 0);
    free(hidden);
    assert_int_equal(status, 200);
    assert_int_equal(simc_last_header(f->ss, "Location", loc, sizeof loc), -1);
    assert_int_equal(simc_message(simc_body(f->ss), msg, sizeof msg), 0);
    assert_string_equal(msg, "E109: This form was already submitted. Please reload the form.");
    /* a validation error at the post (the first value of a field counts): E107, direct */
    check(f, "PRG-BAD", "AP1-PRG-BAD");
    hidden = simc_hidden_form(simc_body(f->ss));
    assert_non_null(hidden);
    size_t n = strlen(hidden) + 32;
    char *bad = malloc(n);
    assert_non_null(bad);
    snprintf(bad, n, "glAccount=1000&%s", hidden);
    free(hidden);
    assert_int_equal(simc_post(f->ss, "/erp/ap/invoice/post", bad, &status), 0);
    free(bad);
    assert_int_equal(status, 200);
    assert_int_equal(simc_last_header(f->ss, "Location", loc, sizeof loc), -1);
    assert_int_equal(simc_message(simc_body(f->ss), msg, sizeof msg), 0);
    assert_string_equal(msg, "E107: G/L account 1000 is not allowed for vendor invoices.");
    /* unknown document */
    assert_int_equal(simc_get(f->ss, "/erp/ap/invoice/posted?doc=AP-1999-000001", &status), 0);
    assert_int_equal(status, 404);
    assert_int_equal(simc_get(f->ss, "/erp/ap/invoice/posted", &status), 0);
    assert_int_equal(status, 404);
    assert_int_equal(simc_count_reference(f->port, "AP1-PRG-DUP"), 1);
    assert_int_equal(simc_count_reference(f->port, "AP1-PRG-TOK"), 1);
    assert_int_equal(simc_count_rows(f->port), 2);
}

/* result_login_page: the result GET answers the login page with I003 and the session is gone;
 * the booking stands, exactly once; only the next eligible request gets the fault. */
static void test_sim_prg_result_login_page(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char doc[32], loc[256], msg[256];
    assert_int_equal(simc_fault(f->port, "result_login_page", 1), 0);
    check(f, "PRG-LOGIN", "AP1-PRG-LOGIN"); /* the fault spares the other screens */
    post_redirected(f, doc, loc);
    assert_int_equal(simc_get(f->ss, loc, &status), 0);
    assert_int_equal(status, 200);
    assert_non_null(strstr(simc_body(f->ss), "<form id=\"loginForm\""));
    assert_int_equal(simc_message(simc_body(f->ss), msg, sizeof msg), 0);
    assert_string_equal(msg, "I003: Your session has expired. Please log in again.");
    assert_null(strstr(simc_body(f->ss), "I020:"));
    assert_int_equal(simc_stat(f->port, "result_login_page"), 1);
    assert_int_equal(simc_count_reference(f->port, "AP1-PRG-LOGIN"), 1);
    assert_int_equal(simc_count_rows(f->port), 1);
    /* the session really ended */
    assert_int_equal(simc_get(f->ss, "/erp/home", &status), 0);
    assert_non_null(strstr(simc_body(f->ss), "<form id=\"loginForm\""));
    /* after a new login the result page shows the booking; the fault was used up */
    assert_int_equal(simc_login(f->ss, "clerk", "acme-demo"), 0);
    assert_int_equal(simc_get(f->ss, loc, &status), 0);
    assert_int_equal(status, 200);
    assert_success_page(simc_body(f->ss), doc);
    assert_int_equal(simc_stat(f->port, "result_login_page"), 1);
    assert_int_equal(simc_count_reference(f->port, "AP1-PRG-LOGIN"), 1);
}

/* result_overload503: the result GET answers 503 with Retry-After: 1; the booking stands,
 * exactly once; the session lives on. */
static void test_sim_prg_result_overload503(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char doc[32], loc[256], retry[32];
    assert_int_equal(simc_fault(f->port, "result_overload503", 1), 0);
    check(f, "PRG-503", "AP1-PRG-503");
    post_redirected(f, doc, loc);
    assert_int_equal(simc_get(f->ss, loc, &status), 0);
    assert_int_equal(status, 503);
    assert_int_equal(simc_last_header(f->ss, "Retry-After", retry, sizeof retry), 0);
    assert_string_equal(retry, "1");
    assert_null(strstr(simc_body(f->ss), "msgArea"));
    assert_int_equal(simc_stat(f->port, "result_overload503"), 1);
    assert_int_equal(simc_stat(f->port, "overload503"), 0);
    assert_int_equal(simc_count_reference(f->port, "AP1-PRG-503"), 1);
    assert_int_equal(simc_count_rows(f->port), 1);
    assert_int_equal(simc_get(f->ss, loc, &status), 0);
    assert_int_equal(status, 200);
    assert_success_page(simc_body(f->ss), doc);
    assert_int_equal(simc_count_reference(f->port, "AP1-PRG-503"), 1);
}

/* The scenario key and the faults' probabilities, set at run time: fault.result_overload503
 * = 1 hits every result page and nothing else. */
static void test_sim_prg_scenario_keys(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char doc[32], loc[256];
    assert_int_equal(simc_set(f->port, "post_redirect", "maybe"), -1);
    assert_int_equal(simc_set(f->port, "fault.result_login_page", "2"), -1);
    assert_int_equal(simc_fault(f->port, "result_nothing", 1), -1);
    assert_int_equal(simc_set(f->port, "fault.result_overload503", "1"), 0);
    check(f, "PRG-P", "AP1-PRG-P");
    post_redirected(f, doc, loc);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(simc_get(f->ss, loc, &status), 0);
        assert_int_equal(status, 503);
    }
    assert_int_equal(simc_stat(f->port, "result_overload503"), 3);
    assert_int_equal(simc_set(f->port, "fault.result_overload503", "0"), 0);
    assert_int_equal(simc_get(f->ss, loc, &status), 0);
    assert_int_equal(status, 200);
    assert_success_page(simc_body(f->ss), doc);
    assert_int_equal(simc_count_rows(f->port), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sim_prg_off_answers_directly, setup_off, teardown),
        cmocka_unit_test_setup_teardown(test_sim_prg_redirects_to_result_page, setup_on, teardown),
        cmocka_unit_test_setup_teardown(test_sim_prg_result_page_equals_direct_answer, setup_on,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sim_prg_other_outcomes_direct, setup_on, teardown),
        cmocka_unit_test_setup_teardown(test_sim_prg_result_login_page, setup_on, teardown),
        cmocka_unit_test_setup_teardown(test_sim_prg_result_overload503, setup_on, teardown),
        cmocka_unit_test_setup_teardown(test_sim_prg_scenario_keys, setup_on, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
