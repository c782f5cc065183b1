/*
 * test_sim_faults.c - every named fault of the simulated ERP, forced with POST /_sim/fault so
 * each test hits exactly one: what the client saw (status, dropped connection, timeout, a
 * page no rule recognises) and what the ledger holds afterwards (booked or not, exactly once,
 * late). Also the down window, forced-fault counts, seeded probabilities, and that sim_stop
 * returns promptly while replies stall and requests wait for a slot.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "helpers/sim_client.h"
#include "sim.h"

static const char fast[] = "slots = 4\n"
                           "service_ms.login = 0\n"
                           "service_ms.form = 0\n"
                           "service_ms.check = 0..1\n"
                           "service_ms.post = 0..1\n"
                           "service_ms.search = 0\n"
                           "service_ms.journal = 0\n"
                           "index_lag_ms = 100\n"
                           "stall_ms = 600\n"
                           "late_commit_ms = 300\n";

struct fx {
    struct sim *sim;
    unsigned short port;
    struct simc_session *ss;
    char *hidden; /* the confirmation form, ready to submit */
};

static int start(struct fx *f, const char *scenario)
{
    struct sim_options opt = {.port = 0, .scenario_text = scenario, .seed = 11, .admin = true};
    char err[256];
    if (sim_start(&opt, &f->sim, err, sizeof err)) {
        fprintf(stderr, "sim_start: %s\n", err);
        return -1;
    }
    f->port = sim_port(f->sim);
    f->ss = simc_session_new(f->port, 5000);
    return 0;
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    if (!f || start(f, fast)) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    free(f->hidden);
    simc_session_free(f->ss);
    sim_stop(f->sim);
    free(f);
    return 0;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void assert_message(const char *html, const char *expected)
{
    char msg[512];
    assert_int_equal(simc_message(html, msg, sizeof msg), 0);
    assert_string_equal(msg, expected);
}

/* Logs in and runs step 1, keeping the confirmation form in f->hidden. */
static void prepare(struct fx *f, const char *reference)
{
    long status = 0;
    char fields[512];
    assert_int_equal(simc_login(f->ss, "clerk", "acme-demo"), 0);
    simc_fields(fields, sizeof fields, "INV-F", reference);
    assert_int_equal(simc_check(f->ss, fields, &status), 0);
    assert_non_null(strstr(simc_body(f->ss), "id=\"apConfirm\""));
    free(f->hidden);
    f->hidden = simc_hidden_form(simc_body(f->ss));
    assert_non_null(f->hidden);
}

static int post(struct fx *f, long *status)
{
    return simc_post(f->ss, "/erp/ap/invoice/post", f->hidden, status);
}

static bool posted(struct fx *f)
{
    return strstr(simc_body(f->ss), "<span id=\"docNo\">") != NULL;
}

static const char e109[] = "E109: This form was already submitted. Please reload the form.";

/* ---- overload ---------------------------------------------------------------------------- */

static void overload(struct fx *f, const char *name, long code)
{
    long status = 0;
    char *body = NULL, *headers = NULL;
    assert_int_equal(simc_fault(f->port, name, 1), 0);
    assert_int_equal(
        simc_request_headers(f->port, "GET", "/erp/login", NULL, 5000, &status, &body, &headers),
        0);
    assert_int_equal(status, code);
    assert_non_null(strstr(headers, "Retry-After: 1"));
    assert_null(strstr(body, "loginForm"));
    free(body);
    free(headers);
    /* only the next one */
    assert_int_equal(simc_request(f->port, "GET", "/erp/login", NULL, 5000, &status, NULL), 0);
    assert_int_equal(status, 200);
    /* on the post step: not processed, the same form can be sent again */
    prepare(f, "AP1-overload");
    assert_int_equal(simc_fault(f->port, name, 1), 0);
    assert_int_equal(post(f, &status), 0);
    assert_int_equal(status, code);
    assert_int_equal(simc_count_rows(f->port), 0);
    assert_int_equal(post(f, &status), 0);
    assert_true(posted(f));
    assert_int_equal(simc_count_reference(f->port, "AP1-overload"), 1);
    assert_int_equal(simc_stat(f->port, name), 2);
}

static void test_sim_fault_overload503(void **state)
{
    overload(*state, "overload503", 503);
}

static void test_sim_fault_overload429(void **state)
{
    overload(*state, "overload429", 429);
}

/* ---- drops ------------------------------------------------------------------------------- */

static void test_sim_fault_drop_before_commit(void **state)
{
    struct fx *f = *state;
    long status = 0;
    prepare(f, "AP1-dropb");
    assert_int_equal(simc_fault(f->port, "drop_before_commit", 1), 0);
    int rc = post(f, &status);
    assert_int_not_equal(rc, CURLE_OK);
    assert_int_not_equal(rc, CURLE_OPERATION_TIMEDOUT);
    assert_int_equal(status, 0);
    assert_int_equal(simc_count_rows(f->port), 0);
    /* nothing was processed: the token still works, and books once */
    assert_int_equal(post(f, &status), 0);
    assert_true(posted(f));
    assert_int_equal(simc_count_reference(f->port, "AP1-dropb"), 1);
}

static void test_sim_fault_drop_after_commit(void **state)
{
    struct fx *f = *state;
    long status = 0;
    prepare(f, "AP1-dropa");
    assert_int_equal(simc_fault(f->port, "drop_after_commit", 1), 0);
    int rc = post(f, &status);
    assert_int_not_equal(rc, CURLE_OK);
    assert_int_not_equal(rc, CURLE_OPERATION_TIMEDOUT);
    assert_int_equal(simc_count_reference(f->port, "AP1-dropa"), 1);
    /* a blind resubmit is refused, still exactly one booking */
    assert_int_equal(post(f, &status), 0);
    assert_message(simc_body(f->ss), e109);
    assert_int_equal(simc_count_reference(f->port, "AP1-dropa"), 1);
    assert_int_equal(simc_stat(f->port, "drop_after_commit"), 1);
}

/* ---- 500s -------------------------------------------------------------------------------- */

static void test_sim_fault_error500_before_commit(void **state)
{
    struct fx *f = *state;
    long status = 0;
    prepare(f, "AP1-500b");
    assert_int_equal(simc_fault(f->port, "error500_before_commit", 1), 0);
    assert_int_equal(post(f, &status), 0);
    assert_int_equal(status, 500);
    assert_non_null(strstr(simc_body(f->ss), "Internal Server Error"));
    assert_null(strstr(simc_body(f->ss), "msgArea"));
    assert_int_equal(simc_count_rows(f->port), 0);
    assert_int_equal(post(f, &status), 0);
    assert_int_equal(status, 200);
    assert_true(posted(f));
    assert_int_equal(simc_count_reference(f->port, "AP1-500b"), 1);
}

static void test_sim_fault_error500_after_commit(void **state)
{
    struct fx *f = *state;
    long status = 0;
    prepare(f, "AP1-500a");
    assert_int_equal(simc_fault(f->port, "error500_after_commit", 1), 0);
    assert_int_equal(post(f, &status), 0);
    assert_int_equal(status, 500);
    assert_false(posted(f));
    assert_null(strstr(simc_body(f->ss), "msgArea"));
    assert_int_equal(simc_count_reference(f->port, "AP1-500a"), 1);
    assert_int_equal(post(f, &status), 0);
    assert_message(simc_body(f->ss), e109);
    assert_int_equal(simc_count_reference(f->port, "AP1-500a"), 1);
}

/* ---- timeouts and late commits ---------------------------------------------------------- */

static void test_sim_fault_timeout_after_commit(void **state)
{
    struct fx *f = *state;
    long status = 0;
    /* an impatient client (300 ms) gives up while the reply stalls 600 ms */
    simc_session_free(f->ss);
    f->ss = simc_session_new(f->port, 300);
    prepare(f, "AP1-timeout");
    assert_int_equal(simc_fault(f->port, "timeout_after_commit", 1), 0);
    assert_int_equal(post(f, &status), CURLE_OPERATION_TIMEDOUT);
    assert_int_equal(simc_count_reference(f->port, "AP1-timeout"), 1);
    /* a patient client gets the success page, late */
    simc_session_free(f->ss);
    f->ss = simc_session_new(f->port, 5000);
    prepare(f, "AP1-patient");
    assert_int_equal(simc_fault(f->port, "timeout_after_commit", 1), 0);
    long long t0 = now_ms();
    assert_int_equal(post(f, &status), 0);
    assert_true(now_ms() - t0 >= 550);
    assert_int_equal(status, 200);
    assert_true(posted(f));
    assert_int_equal(simc_count_reference(f->port, "AP1-patient"), 1);
    assert_int_equal(simc_stat(f->port, "timeout_after_commit"), 2);
}

static void test_sim_fault_late_commit(void **state)
{
    struct fx *f = *state;
    long status = 0;
    prepare(f, "AP1-late");
    assert_int_equal(simc_fault(f->port, "late_commit", 1), 0);
    long long t0 = now_ms();
    int rc = post(f, &status);
    assert_int_not_equal(rc, CURLE_OK);
    /* the reply failed, and nothing is booked yet */
    assert_int_equal(simc_count_reference(f->port, "AP1-late"), 0);
    assert_int_equal(simc_stat(f->port, "late_commits_pending"), 1);
    int n = 0;
    for (int i = 0; i < 100 && n == 0; i++) {
        sleep_ms(20);
        n = simc_count_reference(f->port, "AP1-late");
    }
    assert_int_equal(n, 1);
    assert_true(now_ms() - t0 >= 250);
    sleep_ms(100);
    assert_int_equal(simc_count_reference(f->port, "AP1-late"), 1);
}

/* ---- session expiry and garbled pages ----------------------------------------------------- */

static void test_sim_fault_session_expiry(void **state)
{
    struct fx *f = *state;
    long status = 0;
    const char *i003 = "I003: Your session has expired. Please log in again.";
    assert_int_equal(simc_login(f->ss, "clerk", "acme-demo"), 0);
    assert_int_equal(simc_fault(f->port, "session_expiry", 1), 0);
    assert_int_equal(simc_get(f->ss, "/erp/ap/invoice/new", &status), 0);
    assert_int_equal(status, 200);
    assert_message(simc_body(f->ss), i003);
    assert_int_equal(simc_get(f->ss, "/erp/home", &status), 0); /* the session is gone */
    assert_message(simc_body(f->ss), i003);
    /* on the post step: the login page, not processed */
    prepare(f, "AP1-expiry");
    assert_int_equal(simc_fault(f->port, "session_expiry", 1), 0);
    assert_int_equal(post(f, &status), 0);
    assert_non_null(strstr(simc_body(f->ss), "id=\"loginForm\""));
    assert_message(simc_body(f->ss), i003);
    assert_int_equal(simc_count_rows(f->port), 0);
    assert_int_equal(simc_stat(f->port, "session_expiry"), 2);
}

static void test_sim_fault_garbled_after_commit(void **state)
{
    struct fx *f = *state;
    long status = 0;
    prepare(f, "AP1-garbled");
    assert_int_equal(simc_fault(f->port, "garbled_after_commit", 1), 0);
    assert_int_equal(post(f, &status), 0);
    assert_int_equal(status, 200);
    const char *html = simc_body(f->ss);
    assert_null(strstr(html, "<title>"));
    assert_null(strstr(html, "msgArea"));
    assert_null(strstr(html, "docNo"));
    assert_null(strstr(html, "AP-20"));
    assert_int_equal(simc_count_reference(f->port, "AP1-garbled"), 1);
}

/* ---- down window, counts, probabilities --------------------------------------------------- */

/* search_garbled: a search answers the no-results marker followed by noise (no title, no
 * search form, no end) although the document is booked; the next search is genuine. A
 * scenario without the fault draws nothing for it. */
static void test_sim_fault_search_garbled(void **state)
{
    struct fx *f = *state;
    long status = 0;
    prepare(f, "AP1-garbled-search");
    assert_int_equal(post(f, &status), 0);
    assert_true(posted(f));
    sleep_ms(200); /* index lag */
    assert_int_equal(simc_fault(f->port, "search_garbled", 1), 0);
    assert_int_equal(
        simc_get(f->ss, "/erp/ap/invoice/search?reference=AP1-garbled-search", &status), 0);
    assert_int_equal(status, 200);
    const char *html = simc_body(f->ss);
    assert_non_null(strstr(html, "<p id=\"noResults\">No documents found.</p>"));
    assert_null(strstr(html, "apSearch"));
    assert_null(strstr(html, "<title>"));
    assert_null(strstr(html, "</html>"));
    assert_int_equal(
        simc_get(f->ss, "/erp/ap/invoice/search?reference=AP1-garbled-search", &status), 0);
    assert_non_null(strstr(simc_body(f->ss), "<td class=\"reference\">AP1-garbled-search</td>"));
    assert_int_equal(simc_stat(f->port, "search_garbled"), 1);
    /* with a probability of 1 every search is garbled */
    assert_int_equal(simc_set(f->port, "fault.search_garbled", "1"), 0);
    assert_int_equal(simc_get(f->ss, "/erp/ap/invoice/search?reference=AP1", &status), 0);
    assert_non_null(strstr(simc_body(f->ss), "noResults"));
    assert_null(strstr(simc_body(f->ss), "apSearch"));
    assert_int_equal(simc_stat(f->port, "search_garbled"), 2);
}

static void test_sim_fault_down_window(void **state)
{
    struct fx *f = *state;
    long status = 0;
    assert_int_equal(simc_set(f->port, "down.length_ms", "400"), 0);
    assert_int_equal(simc_set(f->port, "down.start_ms", "now"), 0);
    int rc = simc_request(f->port, "GET", "/erp/login", NULL, 5000, &status, NULL);
    assert_int_not_equal(rc, CURLE_OK);
    /* the admin side stays up */
    assert_true(simc_stat(f->port, "down_dropped") >= 1);
    sleep_ms(500);
    assert_int_equal(simc_request(f->port, "GET", "/erp/login", NULL, 5000, &status, NULL), 0);
    assert_int_equal(status, 200);
    assert_int_equal(simc_set(f->port, "down.start_ms", "off"), 0);
}

static void test_sim_fault_forced_count(void **state)
{
    struct fx *f = *state;
    long status = 0;
    prepare(f, "AP1-count");
    assert_int_equal(simc_fault(f->port, "error500_before_commit", 2), 0);
    assert_int_equal(post(f, &status), 0);
    assert_int_equal(status, 500);
    assert_int_equal(post(f, &status), 0);
    assert_int_equal(status, 500);
    assert_int_equal(post(f, &status), 0);
    assert_true(posted(f));
    assert_int_equal(simc_stat(f->port, "error500_before_commit"), 2);
    /* count=0 clears; unknown names and bad counts are refused */
    assert_int_equal(simc_fault(f->port, "overload503", 3), 0);
    assert_int_equal(simc_fault(f->port, "overload503", 0), 0);
    assert_int_equal(simc_request(f->port, "GET", "/erp/login", NULL, 5000, &status, NULL), 0);
    assert_int_equal(status, 200);
    assert_int_equal(simc_fault(f->port, "no_such_fault", 1), -1);
    assert_int_equal(simc_fault(f->port, "overload503", -1), -1);
}

static void test_sim_fault_probability(void **state)
{
    struct fx *f = *state;
    long status = 0;
    assert_int_equal(simc_set(f->port, "fault.overload429", "1"), 0);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(simc_request(f->port, "GET", "/erp/login", NULL, 5000, &status, NULL), 0);
        assert_int_equal(status, 429);
    }
    assert_int_equal(simc_set(f->port, "fault.overload429", "0.5"), 0);
    int hits = 0;
    for (int i = 0; i < 40; i++) {
        assert_int_equal(simc_request(f->port, "GET", "/erp/login", NULL, 5000, &status, NULL), 0);
        hits += status == 429;
    }
    assert_true(hits > 5 && hits < 35);
    assert_int_equal(simc_set(f->port, "fault.overload429", "0"), 0);
    assert_int_equal(simc_set(f->port, "fault.overload429", "1.5"), -1);
    assert_int_equal(simc_set(f->port, "fault.nonsense", "0.1"), -1);
    assert_int_equal(simc_stat(f->port, "overload429"), 5 + hits);
}

/* ---- sim_stop while replies stall and requests queue -------------------------------------- */

struct bg {
    unsigned short port;
    struct simc_session *ss; /* NULL = a request outside any session */
    const char *path;
    const char *body;
    int rc;
};

static void *bg_request(void *arg)
{
    struct bg *b = arg;
    long status = 0;
    if (b->ss)
        b->rc = simc_post(b->ss, b->path, b->body, &status);
    else
        b->rc = simc_request(b->port, "GET", b->path, NULL, 60000, &status, NULL);
    return NULL;
}

static void test_sim_stop_is_prompt(void **state)
{
    struct fx *f = *state;
    /* a fresh sim whose stalls and service times would take far longer than the test */
    free(f->hidden);
    f->hidden = NULL;
    simc_session_free(f->ss);
    sim_stop(f->sim);
    assert_int_equal(start(f, "slots = 1\n"
                              "service_ms.login = 0\n"
                              "service_ms.form = 0\n"
                              "service_ms.check = 0\n"
                              "service_ms.post = 0\n"
                              "service_ms.journal = 30000\n"
                              "stall_ms = 30000\n"),
                     0);
    simc_session_free(f->ss);
    f->ss = simc_session_new(f->port, 60000);
    prepare(f, "AP1-stop");
    assert_int_equal(simc_fault(f->port, "timeout_after_commit", 1), 0);
    struct bg stalled = {f->port, f->ss, "/erp/ap/invoice/post", f->hidden, -1};
    struct bg busy = {f->port, NULL, "/erp/ap/journal", NULL, -1};
    struct bg queued = {f->port, NULL, "/erp/ap/journal", NULL, -1};
    pthread_t t1, t2, t3;
    assert_int_equal(pthread_create(&t1, NULL, bg_request, &stalled), 0);
    int n = 0;
    for (int i = 0; i < 200 && n == 0; i++) {
        sleep_ms(10);
        n = simc_count_reference(f->port, "AP1-stop");
    }
    assert_int_equal(n, 1); /* booked; the reply now stalls */
    assert_int_equal(pthread_create(&t2, NULL, bg_request, &busy), 0);
    sleep_ms(100);
    assert_int_equal(pthread_create(&t3, NULL, bg_request, &queued), 0);
    long long waiting = 0;
    for (int i = 0; i < 200 && waiting < 1; i++) {
        sleep_ms(10);
        waiting = simc_stat(f->port, "waiting");
    }
    assert_int_equal(waiting, 1);
    assert_int_equal(simc_stat(f->port, "busy"), 1);
    long long t0 = now_ms();
    sim_stop(f->sim);
    long long took = now_ms() - t0;
    f->sim = NULL;
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    pthread_join(t3, NULL);
    assert_true(took < 3000);
    assert_int_not_equal(stalled.rc, CURLE_OK);
    assert_int_not_equal(busy.rc, CURLE_OK);
    assert_int_not_equal(queued.rc, CURLE_OK);
    /* a new sim for teardown */
    simc_session_free(f->ss);
    assert_int_equal(start(f, fast), 0);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sim_fault_overload503, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_fault_overload429, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_fault_drop_before_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_fault_drop_after_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_fault_error500_before_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_fault_error500_after_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_fault_timeout_after_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_fault_late_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_fault_session_expiry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_fault_garbled_after_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_fault_search_garbled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_fault_down_window, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_fault_forced_count, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_fault_probability, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_stop_is_prompt, setup, teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
