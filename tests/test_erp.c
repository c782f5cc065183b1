/*
 * test_erp.c - the ERP session against canned pages (tests/data/pages, served per request by
 * a small server inside the test), no simulator: the login by form (hidden token kept, the
 * password masked in traces, an action off the origin or a GET form carrying the password
 * refused before anything is sent) and without a form (HTTP Basic; 401 refused after one
 * request; 503 transient; the login page again tried a bounded number of times); session
 * markers by status, by redirect and by body, each followed by one fresh login; lookups through
 * next pages, a results screen without its marker (garbled), a page at the row maximum (cut),
 * more pages than allowed, prefix-only rows, candidates opened on their detail pages, hits
 * saved but unfinished, a failed detail page, too many candidates, a pathological session
 * marker stopped by the match budget; listings over a range and day by day.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "apbot/erp.h"
#include "apbot/flow.h"
#include "apbot/invoice.h"
#include "erp/erp-int.h"
#include "helpers/pagesrv.h"
#include "web/http.h"

#define USER "clerk"
#define PASSWORD "s3cret-pass"
#define KEY "AP1-CANNEDKEY00000000001"

/* ---- fixtures ---------------------------------------------------------------------------- */

/* Loads tests/data/pages/<name> with each pairs[2i] replaced by pairs[2i+1] (every one must
 * occur). */
static struct flow *load_flow(const char *name, const char *const *pairs)
{
    const char *src = getenv("APBOT_SRC");
    char path[1024], tmp[] = "/tmp/apbot-test-erp-XXXXXX";
    snprintf(path, sizeof(path), "%s/tests/data/pages/%s", src && *src ? src : ".", name);
    FILE *in = fopen(path, "rb");
    assert_non_null(in);
    static char text[65536];
    size_t len = fread(text, 1, sizeof(text) - 1, in);
    fclose(in);
    text[len] = '\0';
    for (size_t i = 0; pairs && pairs[i]; i += 2) {
        char *at = strstr(text, pairs[i]);
        if (!at)
            fail_msg("%s: '%s' not found", name, pairs[i]);
        size_t from = strlen(pairs[i]), to = strlen(pairs[i + 1]);
        assert_true(len - from + to < sizeof(text));
        memmove(at + to, at + from, len - (size_t)(at - text) - from + 1);
        memcpy(at, pairs[i + 1], to);
        len = len - from + to;
    }
    int fd = mkstemp(tmp);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
    struct flow *f = NULL;
    char err[APBOT_ERR_LEN] = "";
    int rc = flow_load(tmp, &f, err, sizeof(err));
    unlink(tmp);
    if (rc != APBOT_OK)
        fail_msg("flow %s: %s", name, err);
    return f;
}

struct fx {
    struct pagesrv *srv;
    struct flow *f;
    struct erp_session *s;
    /* what the callbacks saw */
    int n_evidence;
    int n_traces;
    char last_outcome[64];
    char traces[16384]; /* "step outcome|" per exchange, controls as "name=value(source)" */
    bool secret_seen;
    char last_excerpt[ERP_EXCERPT_MAX + 1]; /* of the last exchange with evidence */
};

/* Evidence is secret-free too. */
static void on_evidence(void *ctx, const struct erp_exchange *ev)
{
    struct fx *x = ctx;
    x->n_evidence++;
    snprintf(x->last_excerpt, sizeof(x->last_excerpt), "%s", ev->excerpt ? ev->excerpt : "");
    const char *texts[] = {ev->url, ev->excerpt, ev->transport, ev->rule, ev->outcome};
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
        if (texts[i] && strstr(texts[i], PASSWORD))
            x->secret_seen = true;
}

static void on_trace(void *ctx, const struct erp_trace *t)
{
    struct fx *x = ctx;
    size_t o = strlen(x->traces);
    x->n_traces++;
    snprintf(x->last_outcome, sizeof(x->last_outcome), "%s", t->outcome ? t->outcome : "");
    o += (size_t)snprintf(x->traces + o, sizeof(x->traces) - o, "%s %s|", t->step, t->outcome);
    for (size_t i = 0; i < t->n_controls && o < sizeof(x->traces); i++)
        o += (size_t)snprintf(x->traces + o, sizeof(x->traces) - o, "%s=%s(%s)|",
                              t->controls[i].name, t->controls[i].value, t->controls[i].source);
    const char *texts[] = {t->url, t->why, t->excerpt, t->transport, t->first_location};
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
        if (texts[i] && strstr(texts[i], PASSWORD))
            x->secret_seen = true;
    for (size_t i = 0; i < t->n_controls; i++)
        if (strstr(t->controls[i].value, PASSWORD))
            x->secret_seen = true;
}

static void fx_start(struct fx *x, const char *flow, const char *const *pairs)
{
    char err[APBOT_ERR_LEN] = "";
    memset(x, 0, sizeof(*x));
    x->srv = pagesrv_start();
    x->f = load_flow(flow, pairs);
    if (erp_open(x->f, pagesrv_base(x->srv), NULL, &x->s, err, sizeof(err)) != APBOT_OK)
        fail_msg("erp_open: %s", err);
    erp_set_trace(x->s, on_trace, x);
    erp_set_evidence(x->s, on_evidence, x);
}

static void fx_stop(struct fx *x)
{
    assert_false(x->secret_seen);
    assert_int_equal(x->n_evidence, x->n_traces); /* one record per exchange in both */
    erp_close(x->s);
    flow_free(x->f);
    pagesrv_stop(x->srv);
}

#define R(...) ((const struct pagesrv_resp[]){__VA_ARGS__})
#define ROUTE(x, m, p, ...)                                                                        \
    pagesrv_route((x)->srv, m, p, R(__VA_ARGS__),                                                  \
                  sizeof(R(__VA_ARGS__)) / sizeof(struct pagesrv_resp))

/* The classic-style login: one GET answering "Success". */
static void route_basic_login(struct fx *x)
{
    ROUTE(x, "GET", "/login.pl?action=authenticate",
          {.body = "Success\n", .type = "text/plain; charset=utf-8"});
}

/* The acme-style login: the form, a 303 to home, home. */
static void route_form_login(struct fx *x)
{
    ROUTE(x, "GET", "/erp/login", {.file = "login-form.html"});
    ROUTE(x, "POST", "/erp/login", {.status = 303, .headers = "Location: /erp/home\r\n"});
    ROUTE(x, "GET", "/erp/home", {.file = "home.html"});
}

static enum erp_answer lookup(struct fx *x, struct erp_lookup_result *res)
{
    char err[APBOT_ERR_LEN] = "";
    int rc = erp_lookup(x->s, KEY, NULL, "EUR", res, err, sizeof(err));
    if (rc != APBOT_OK)
        fail_msg("erp_lookup: %s", err);
    return res->answer;
}

/* ---- login ------------------------------------------------------------------------------- */

static void test_erp_login_formless_basic(void **state)
{
    (void)state;
    struct fx x;
    char err[APBOT_ERR_LEN] = "";
    fx_start(&x, "flow-classic.xml", NULL);
    route_basic_login(&x);
    assert_int_equal(erp_login(x.s, err, sizeof(err)), APBOT_OK);
    assert_true(erp_logged_in(x.s));
    struct pagesrv_req rq;
    assert_true(pagesrv_last(x.srv, "GET", "/login.pl", &rq));
    assert_true(rq.basic);
    assert_int_equal(pagesrv_n_requests(x.srv), 1);
    assert_string_equal(x.last_outcome, "logged-in");
    fx_stop(&x);
}

static void test_erp_login_formless_refused_once(void **state)
{
    (void)state;
    struct fx x;
    char err[APBOT_ERR_LEN] = "";
    fx_start(&x, "flow-classic.xml", NULL);
    ROUTE(&x, "GET", "/login.pl?action=authenticate",
          {.status = 401, .body = "Access denied.\n", .type = "text/plain"});
    assert_int_equal(erp_login(x.s, err, sizeof(err)), APBOT_E_SYSTEMIC);
    assert_non_null(strstr(err, "refused"));
    assert_int_equal(pagesrv_count(x.srv, "*", "/login.pl"), 1); /* one request, never more */
    assert_false(erp_logged_in(x.s));
    assert_true(erp_login_refused(x.s));
    fx_stop(&x);
}

/* 401 is a refusal even without a rule saying so. */
static void test_erp_login_formless_401_without_rule(void **state)
{
    (void)state;
    struct fx x;
    char err[APBOT_ERR_LEN] = "";
    const char *pairs[] = {
        "<rule name=\"bad-credentials\" outcome=\"rejected\" status=\"401,403\"/>", "", NULL};
    fx_start(&x, "flow-classic.xml", pairs);
    ROUTE(&x, "GET", "/login.pl?action=authenticate", {.status = 403, .body = "no"});
    assert_int_equal(erp_login(x.s, err, sizeof(err)), APBOT_E_SYSTEMIC);
    assert_non_null(strstr(err, "refused: HTTP 403"));
    assert_int_equal(pagesrv_count(x.srv, "*", "/login.pl"), 1);
    fx_stop(&x);

    /* A form login answered 401 with the login page: a refusal at once, not the ambiguous
     * "login page again" tried three times. */
    fx_start(&x, "flow-form.xml", NULL);
    ROUTE(&x, "GET", "/erp/login", {.file = "login-form.html"});
    ROUTE(&x, "POST", "/erp/login", {.status = 401, .file = "login-expired.html"});
    assert_int_equal(erp_login(x.s, err, sizeof(err)), APBOT_E_SYSTEMIC);
    assert_int_equal(pagesrv_count(x.srv, "POST", "/erp/login"), 1);
    fx_stop(&x);
}

static void test_erp_login_formless_transient(void **state)
{
    (void)state;
    struct fx x;
    char err[APBOT_ERR_LEN] = "";
    fx_start(&x, "flow-classic.xml", NULL);
    ROUTE(&x, "GET", "/login.pl?action=authenticate", {.status = 503, .body = "busy"},
          {.drop = true}, {.status = 500, .body = "oops"});
    assert_int_equal(erp_login(x.s, err, sizeof(err)), APBOT_E_NET); /* rule: not-sent */
    assert_int_equal(erp_login(x.s, err, sizeof(err)), APBOT_E_NET); /* no answer */
    assert_int_equal(erp_login(x.s, err, sizeof(err)), APBOT_E_NET); /* 5xx */
    assert_false(erp_login_refused(x.s));
    /* A 200 without the success pattern is no login. */
    pagesrv_reset(x.srv);
    ROUTE(&x, "GET", "/login.pl?action=authenticate", {.body = "Welcome\n"});
    assert_int_equal(erp_login(x.s, err, sizeof(err)), APBOT_E_SYSTEMIC);
    fx_stop(&x);
}

static void test_erp_login_form_keeps_token_masks_password(void **state)
{
    (void)state;
    struct fx x;
    char err[APBOT_ERR_LEN] = "";
    fx_start(&x, "flow-form.xml", NULL);
    route_form_login(&x);
    assert_int_equal(erp_login(x.s, err, sizeof(err)), APBOT_OK);
    struct pagesrv_req rq;
    assert_true(pagesrv_last(x.srv, "POST", "/erp/login", &rq));
    assert_non_null(strstr(rq.body, "_csrf=tok123"));
    assert_non_null(strstr(rq.body, "j_username=" USER));
    assert_non_null(strstr(rq.body, "j_password=" PASSWORD));
    assert_non_null(strstr(rq.body, "login=Log"));
    assert_int_equal(pagesrv_count(x.srv, "POST", "/erp/login"), 1);
    /* The trace names every control and its source; the password never shows. */
    assert_non_null(strstr(x.traces, "login logged-in"));
    assert_non_null(strstr(x.traces, "j_password=***(template)"));
    assert_non_null(strstr(x.traces, "j_username=***(template)"));
    assert_non_null(strstr(x.traces, "_csrf=tok123(page default)"));
    assert_non_null(strstr(x.traces, "login=Log in(button pressed)"));
    assert_false(x.secret_seen);
    fx_stop(&x);
}

static void test_erp_login_form_refused_by_rule(void **state)
{
    (void)state;
    struct fx x;
    char err[APBOT_ERR_LEN] = "";
    fx_start(&x, "flow-form.xml", NULL);
    ROUTE(&x, "GET", "/erp/login", {.file = "login-form.html"});
    ROUTE(&x, "POST", "/erp/login", {.file = "login-refused.html"});
    assert_int_equal(erp_login(x.s, err, sizeof(err)), APBOT_E_SYSTEMIC);
    assert_non_null(strstr(err, "bad-credentials"));
    assert_true(erp_login_refused(x.s));
    assert_int_equal(pagesrv_count(x.srv, "POST", "/erp/login"), 1);
    fx_stop(&x);
}

/* The ambiguous case: the login answered by the login page again is tried at most 3 times. */
static void test_erp_login_form_answered_by_login_page(void **state)
{
    (void)state;
    struct fx x;
    char err[APBOT_ERR_LEN] = "";
    fx_start(&x, "flow-form.xml", NULL);
    ROUTE(&x, "GET", "/erp/login", {.file = "login-form.html"});
    ROUTE(&x, "POST", "/erp/login", {.file = "login-expired.html"});
    assert_int_equal(erp_login(x.s, err, sizeof(err)), APBOT_E_SYSTEMIC);
    assert_int_equal(pagesrv_count(x.srv, "POST", "/erp/login"), 3);
    assert_true(erp_login_refused(x.s));
    /* ... and once it goes through, the session is logged in. */
    pagesrv_reset(x.srv);
    ROUTE(&x, "GET", "/erp/login", {.file = "login-form.html"});
    ROUTE(&x, "POST", "/erp/login", {.file = "login-expired.html"}, {.file = "home.html"});
    assert_int_equal(erp_login(x.s, err, sizeof(err)), APBOT_OK);
    assert_int_equal(pagesrv_count(x.srv, "POST", "/erp/login"), 2);
    fx_stop(&x);
}

static void test_erp_login_form_off_origin_refused(void **state)
{
    (void)state;
    struct fx x;
    char err[APBOT_ERR_LEN] = "";
    fx_start(&x, "flow-form.xml", NULL);
    ROUTE(&x, "GET", "/erp/login", {.file = "login-form-offorigin.html"});
    assert_int_equal(erp_login(x.s, err, sizeof(err)), APBOT_E_SYSTEMIC);
    assert_non_null(strstr(err, "origin"));
    assert_int_equal(pagesrv_n_requests(x.srv), 1); /* the page only */
    assert_false(erp_login_refused(x.s));           /* refused by apbot, not by the ERP */
    fx_stop(&x);
}

static void test_erp_login_get_form_with_secret_refused(void **state)
{
    (void)state;
    struct fx x;
    char err[APBOT_ERR_LEN] = "";
    fx_start(&x, "flow-form.xml", NULL);
    ROUTE(&x, "GET", "/erp/login", {.file = "login-form-get.html"});
    ROUTE(&x, "GET", "/erp/login?*", {.file = "home.html"});
    assert_int_equal(erp_login(x.s, err, sizeof(err)), APBOT_E_SYSTEMIC);
    assert_non_null(strstr(err, "GET"));
    assert_int_equal(pagesrv_n_requests(x.srv), 1);
    for (int i = 0; i < pagesrv_n_requests(x.srv); i++) {
        struct pagesrv_req rq;
        assert_true(pagesrv_request(x.srv, i, &rq));
        assert_null(strstr(rq.path, PASSWORD));
    }
    fx_stop(&x);
}

/* ---- session markers --------------------------------------------------------------------- */

static void test_erp_session_marker_status(void **state)
{
    (void)state;
    struct fx x;
    struct erp_lookup_result res;
    fx_start(&x, "flow-classic.xml", NULL);
    route_basic_login(&x);
    ROUTE(&x, "GET", "/app/search?*", {.status = 401, .body = "Session expired.\n"},
          {.file = "noref-2.html"});
    ROUTE(&x, "GET", "/ap.pl?action=edit&id=AP-2026-000010", {.file = "detail-other.html"});
    ROUTE(&x, "GET", "/ap.pl?action=edit&id=AP-2026-000011", {.file = "detail-hit-posted.html"});
    assert_int_equal(lookup(&x, &res), ERP_FOUND);
    erp_lookup_result_done(&res);
    assert_int_equal(pagesrv_count(x.srv, "GET", "/login.pl"), 2); /* first, then after 401 */
    assert_int_equal(pagesrv_count(x.srv, "GET", "/app/search"), 2);
    fx_stop(&x);
}

static void test_erp_session_marker_redirect(void **state)
{
    (void)state;
    struct fx x;
    struct erp_lookup_result res;
    fx_start(&x, "flow-classic.xml", NULL);
    route_basic_login(&x);
    ROUTE(&x, "GET", "/app/search?*",
          {.status = 303, .headers = "Location: /login.pl\r\n", .body = "See Other"},
          {.file = "noref-2.html"});
    ROUTE(&x, "GET", "/login.pl", {.body = "<p>Please log in</p>"});
    ROUTE(&x, "GET", "/ap.pl?action=edit&id=AP-2026-000010", {.file = "detail-other.html"});
    ROUTE(&x, "GET", "/ap.pl?action=edit&id=AP-2026-000011", {.file = "detail-hit-draft.html"});
    assert_int_equal(lookup(&x, &res), ERP_FOUND_UNFINISHED);
    erp_lookup_result_done(&res);
    assert_int_equal(pagesrv_count(x.srv, "GET", "/login.pl?action=authenticate"), 2);
    assert_int_equal(pagesrv_count(x.srv, "GET", "/app/search"), 2);
    fx_stop(&x);
}

static void test_erp_session_marker_body(void **state)
{
    (void)state;
    struct fx x;
    struct erp_lookup_result res;
    fx_start(&x, "flow-form.xml", NULL);
    route_form_login(&x);
    ROUTE(&x, "GET", "/search?*", {.file = "login-expired.html"}, {.file = "login-expired.html"},
          {.file = "login-expired.html"}, {.file = "search-hit.html"});
    /* Gone three times in a row: 1 + ERP_RELOGIN_MAX fresh logins, then failed. */
    assert_int_equal(lookup(&x, &res), ERP_FAILED);
    erp_lookup_result_done(&res);
    assert_int_equal(pagesrv_count(x.srv, "POST", "/erp/login"), 1 + ERP_RELOGIN_MAX);
    /* The fourth answer is the page: found, after one more login. */
    assert_int_equal(lookup(&x, &res), ERP_FOUND);
    assert_string_equal(res.hits.rows[0].doc, "AP-2026-000003");
    erp_lookup_result_done(&res);
    fx_stop(&x);
}

/* A pathological marker pattern on a big page is stopped by the page's match budget. */
static void test_erp_session_marker_budget(void **state)
{
    (void)state;
    struct fx x;
    struct erp_lookup_result res;
    const char *pairs[] = {
        "<session-expired>&lt;span class=\"msgText\"&gt;I003: </session-expired>",
        "<session-expired>.*.*.*[XY]</session-expired>", NULL};
    fx_start(&x, "flow-form.xml", pairs);
    route_form_login(&x);
    size_t n = 300000;
    char *big = malloc(n + 64);
    assert_non_null(big);
    memcpy(big, "<html><body><p>", 15);
    memset(big + 15, 'a', n);
    snprintf(big + 15 + n, 40, "</p></body></html>");
    ROUTE(&x, "GET", "/search?*", {.body = big});
    free(big);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(lookup(&x, &res), ERP_FAILED);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!strstr(res.detail, "budget"))
        fail_msg("detail: %s", res.detail);
    erp_lookup_result_done(&res);
    /* bounded by the budget, not by the pattern (which would run for hours) */
    assert_true(t1.tv_sec - t0.tv_sec < 60);
    fx_stop(&x);
}

/* ---- lookups ----------------------------------------------------------------------------- */

static void test_erp_lookup_pages_through_next(void **state)
{
    (void)state;
    struct fx x;
    struct erp_lookup_result res;
    fx_start(&x, "flow-form.xml", NULL);
    route_form_login(&x);
    ROUTE(&x, "GET", "/search?reference=" KEY "&page=2", {.file = "search-p2.html"});
    ROUTE(&x, "GET", "/search?reference=" KEY, {.file = "search-p1.html"});
    assert_int_equal(lookup(&x, &res), ERP_FOUND);
    assert_int_equal(res.hits.n, 1);
    assert_string_equal(res.hits.rows[0].doc, "AP-2026-000003");
    assert_string_equal(res.hits.rows[0].reference, KEY);
    assert_true(res.hits.rows[0].has_amount);
    assert_int_equal(res.hits.rows[0].amount, 123456);
    assert_string_equal(res.hits.rows[0].status, "posted");
    assert_false(res.hits.rows[0].unfinished);
    erp_lookup_result_done(&res);
    assert_int_equal(pagesrv_count(x.srv, "GET", "/search"), 2);
    /* the last exchange carries the verdict */
    assert_string_equal(x.last_outcome, "found");
    fx_stop(&x);
}

static void test_erp_lookup_more_pages_than_allowed(void **state)
{
    (void)state;
    struct fx x;
    struct erp_lookup_result res;
    fx_start(&x, "flow-form.xml", NULL);
    route_form_login(&x);
    ROUTE(&x, "GET", "/search?reference=" KEY "&page=2", {.file = "search-p2-more.html"});
    ROUTE(&x, "GET", "/search?reference=" KEY, {.file = "search-p1.html"});
    assert_int_equal(lookup(&x, &res), ERP_FAILED);
    assert_non_null(strstr(res.detail, "max-pages"));
    erp_lookup_result_done(&res);
    assert_int_equal(pagesrv_count(x.srv, "GET", "/search"), 2); /* max-pages="2" */
    assert_string_equal(x.last_outcome, "failed");
    fx_stop(&x);
}

static void test_erp_lookup_cut_page_is_no_absence(void **state)
{
    (void)state;
    struct fx x;
    struct erp_lookup_result res;
    fx_start(&x, "flow-form.xml", NULL);
    route_form_login(&x);
    ROUTE(&x, "GET", "/search?*", {.file = "search-full.html"});
    assert_int_equal(lookup(&x, &res), ERP_FAILED);
    assert_non_null(strstr(res.detail, "cut"));
    erp_lookup_result_done(&res);
    fx_stop(&x);
}

static void test_erp_lookup_garbled_no_results_is_no_absence(void **state)
{
    (void)state;
    struct fx x;
    struct erp_lookup_result res;
    fx_start(&x, "flow-form.xml", NULL);
    route_form_login(&x);
    ROUTE(&x, "GET", "/search?*", {.file = "search-garbled.html"}, {.file = "search-empty.html"});
    assert_int_equal(lookup(&x, &res), ERP_FAILED);
    assert_non_null(strstr(res.detail, "results-screen"));
    erp_lookup_result_done(&res);
    /* the genuine empty screen is an absence */
    assert_int_equal(lookup(&x, &res), ERP_NOT_FOUND);
    erp_lookup_result_done(&res);
    fx_stop(&x);
}

static void test_erp_lookup_prefix_rows_are_no_hit(void **state)
{
    (void)state;
    struct fx x;
    struct erp_lookup_result res;
    fx_start(&x, "flow-form.xml", NULL);
    route_form_login(&x);
    ROUTE(&x, "GET", "/search?*", {.file = "search-prefix.html"});
    assert_int_equal(lookup(&x, &res), ERP_NOT_FOUND);
    assert_int_equal(res.hits.n, 0);
    erp_lookup_result_done(&res);
    fx_stop(&x);
}

static void test_erp_lookup_unanswered_is_failed(void **state)
{
    (void)state;
    struct fx x;
    struct erp_lookup_result res;
    fx_start(&x, "flow-form.xml", NULL);
    route_form_login(&x);
    ROUTE(&x, "GET", "/search?*", {.status = 500, .file = "search-empty.html"}, {.drop = true},
          {.status = 503, .headers = "Retry-After: 7\r\n"});
    assert_int_equal(lookup(&x, &res), ERP_FAILED);
    assert_int_equal(res.http_status, 500);
    erp_lookup_result_done(&res);
    assert_int_equal(lookup(&x, &res), ERP_FAILED);
    erp_lookup_result_done(&res);
    assert_int_equal(lookup(&x, &res), ERP_FAILED);
    assert_int_equal(res.retry_after_s, 7);
    erp_lookup_result_done(&res);
    fx_stop(&x);
}

/*
 * An answer no step reads as a page (a CGI-era ERP's error page, answered 500) still leaves its
 * text as evidence: the title and the message, not its tags, and its line breaks as the page
 * shows them (white space), never written as \x0A - the review page and `apbot review` escape
 * an excerpt where they show it, so an escaped one came out escaped twice. A JSON answer keeps
 * its quotes and backslashes as they are.
 */
static void test_erp_error_page_excerpt_is_text(void **state)
{
    (void)state;
    struct fx x;
    struct erp_lookup_result res;
    fx_start(&x, "flow-form.xml", NULL);
    route_form_login(&x);
    ROUTE(&x, "GET", "/search?*",
          {.status = 500,
           .body = "<html><head><title>ACME Ledger - Error</title>\n<style>h2{color:red}</style>"
                   "</head>\n<body>\n<h2 class=\"error\">Vendor 100090 is blocked.</h2>\n"
                   "<p>Back</p></body></html>\n"},
          {.status = 500,
           .type = "application/json",
           .body = "{\"error\": [\"UserError\", [\"Period \\\"11/2026\\\" is closed\"]]}\n"});
    assert_int_equal(lookup(&x, &res), ERP_FAILED);
    erp_lookup_result_done(&res);
    assert_string_equal(x.last_excerpt, "ACME Ledger - Error Vendor 100090 is blocked. Back");
    assert_int_equal(lookup(&x, &res), ERP_FAILED);
    erp_lookup_result_done(&res);
    assert_string_equal(x.last_excerpt,
                        "{\"error\": [\"UserError\", [\"Period \\\"11/2026\\\" is closed\"]]}");
    fx_stop(&x);
}

static void test_erp_lookup_detail_pages(void **state)
{
    (void)state;
    struct fx x;
    struct erp_lookup_result res;
    fx_start(&x, "flow-classic.xml", NULL);
    route_basic_login(&x);
    ROUTE(&x, "GET", "/app/search?*", {.file = "noref-2.html"});
    ROUTE(&x, "GET", "/ap.pl?action=edit&id=AP-2026-000010", {.file = "detail-other.html"});
    ROUTE(&x, "GET", "/ap.pl?action=edit&id=AP-2026-000011", {.file = "detail-hit-posted.html"},
          {.file = "detail-hit-draft.html"});
    assert_int_equal(lookup(&x, &res), ERP_FOUND);
    assert_int_equal(res.hits.n, 1);
    assert_string_equal(res.hits.rows[0].doc, "AP-2026-000011");
    assert_string_equal(res.hits.rows[0].reference, KEY); /* read on the detail page */
    assert_int_equal(res.hits.rows[0].amount, 123456);
    assert_false(res.hits.rows[0].unfinished);
    erp_lookup_result_done(&res);
    assert_int_equal(pagesrv_count(x.srv, "GET", "/ap.pl?action=edit"), 2);
    /* The same document in draft: saved, not finished (the detail's status overrides the
     * row's). */
    assert_int_equal(lookup(&x, &res), ERP_FOUND_UNFINISHED);
    assert_int_equal(res.hits.n, 1);
    assert_true(res.hits.rows[0].unfinished);
    assert_string_equal(res.hits.rows[0].status, "draft");
    erp_lookup_result_done(&res);
    assert_string_equal(x.last_outcome, "found-unfinished");
    fx_stop(&x);
}

static void test_erp_lookup_detail_failure_is_no_absence(void **state)
{
    (void)state;
    struct fx x;
    struct erp_lookup_result res;
    fx_start(&x, "flow-classic.xml", NULL);
    route_basic_login(&x);
    ROUTE(&x, "GET", "/app/search?*", {.file = "noref-2.html"});
    ROUTE(&x, "GET", "/ap.pl?action=edit&id=AP-2026-000010", {.file = "detail-other.html"});
    ROUTE(&x, "GET", "/ap.pl?action=edit&id=AP-2026-000011", {.status = 500, .body = "x"});
    assert_int_equal(lookup(&x, &res), ERP_FAILED);
    erp_lookup_result_done(&res);
    fx_stop(&x);
}

static void test_erp_lookup_too_many_candidates(void **state)
{
    (void)state;
    struct fx x;
    struct erp_lookup_result res;
    fx_start(&x, "flow-classic.xml", NULL);
    route_basic_login(&x);
    ROUTE(&x, "GET", "/app/search?*", {.file = "noref-12.html"});
    ROUTE(&x, "GET", "/ap.pl?action=edit*", {.file = "detail-other.html"});
    assert_int_equal(lookup(&x, &res), ERP_FAILED);
    assert_non_null(strstr(res.detail, "candidates"));
    erp_lookup_result_done(&res);
    assert_int_equal(pagesrv_count(x.srv, "GET", "/ap.pl?action=edit"), 10); /* bounded */
    fx_stop(&x);
}

static void test_erp_lookup_empty_classic(void **state)
{
    (void)state;
    struct fx x;
    struct erp_lookup_result res;
    fx_start(&x, "flow-classic.xml", NULL);
    route_basic_login(&x);
    ROUTE(&x, "GET", "/app/search?*",
          {.body = "<html><body><form id=\"searchForm\"></form>"
                   "<p id=\"noResults\">No transactions found.</p></body></html>"},
          {.body = "<html><body><p id=\"noResults\">No transactions found.</p>\x01\x02"});
    assert_int_equal(lookup(&x, &res), ERP_NOT_FOUND);
    erp_lookup_result_done(&res);
    assert_int_equal(lookup(&x, &res), ERP_FAILED); /* garbled: no search form */
    erp_lookup_result_done(&res);
    fx_stop(&x);
}

/* ---- listings ---------------------------------------------------------------------------- */

struct rows_seen {
    int n;
    char docs[8][32];
};

static int count_row(void *ctx, const struct erp_row *row)
{
    struct rows_seen *r = ctx;
    if (r->n < 8)
        snprintf(r->docs[r->n], sizeof(r->docs[0]), "%s", row->doc ? row->doc : "");
    r->n++;
    return 0;
}

static void test_erp_list_range_and_days(void **state)
{
    (void)state;
    struct fx x;
    char err[APBOT_ERR_LEN] = "";
    struct rows_seen seen = {0};
    int pages = 0;

    /* ${from}/${to}: one walk over the range */
    fx_start(&x, "flow-classic.xml", NULL);
    route_basic_login(&x);
    ROUTE(&x, "GET", "/app/list?*", {.file = "list-2.html"});
    assert_int_equal(
        erp_list_range(x.s, "2026-11-01", "2026-11-03", count_row, &seen, &pages, err, sizeof(err)),
        APBOT_OK);
    assert_int_equal(pages, 1);
    assert_int_equal(seen.n, 2);
    assert_string_equal(seen.docs[1], "AP-2026-000002");
    struct pagesrv_req rq;
    assert_true(pagesrv_last(x.srv, "GET", "/app/list", &rq));
    assert_string_equal(rq.path, "/app/list?from=2026-11-01&to=2026-11-03");
    assert_int_equal(
        erp_list_range(x.s, "2026-11-03", "2026-11-01", count_row, &seen, &pages, err, sizeof(err)),
        APBOT_E_INVAL);
    fx_stop(&x);

    /* ${date}: day by day, across a month end */
    memset(&seen, 0, sizeof(seen));
    fx_start(&x, "flow-form.xml", NULL);
    route_form_login(&x);
    ROUTE(&x, "GET", "/list?*", {.file = "list-2.html"});
    assert_int_equal(
        erp_list_range(x.s, "2026-11-29", "2026-12-01", count_row, &seen, &pages, err, sizeof(err)),
        APBOT_OK);
    assert_int_equal(pages, 3);
    assert_int_equal(seen.n, 6);
    assert_int_equal(pagesrv_count(x.srv, "GET", "/list?date=2026-11-30"), 1);
    assert_int_equal(pagesrv_count(x.srv, "GET", "/list?date=2026-12-01"), 1);
    assert_int_equal(erp_list_day(x.s, "2026-11-29", count_row, &seen, &pages, err, sizeof(err)),
                     APBOT_OK);
    assert_int_equal(pages, 1);
    assert_int_equal(
        erp_list_range(x.s, "2026-01-01", "2026-12-31", count_row, &seen, &pages, err, sizeof(err)),
        APBOT_E_LIMIT);
    fx_stop(&x);
}

static int group_setup(void **state)
{
    (void)state;
    setenv("APBOT_ERP_USER", USER, 1);
    setenv("APBOT_ERP_PASSWORD", PASSWORD, 1);
    return http_global_init() == APBOT_OK ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    http_global_cleanup();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_erp_login_formless_basic),
        cmocka_unit_test(test_erp_login_formless_refused_once),
        cmocka_unit_test(test_erp_login_formless_401_without_rule),
        cmocka_unit_test(test_erp_login_formless_transient),
        cmocka_unit_test(test_erp_login_form_keeps_token_masks_password),
        cmocka_unit_test(test_erp_login_form_refused_by_rule),
        cmocka_unit_test(test_erp_login_form_answered_by_login_page),
        cmocka_unit_test(test_erp_login_form_off_origin_refused),
        cmocka_unit_test(test_erp_login_get_form_with_secret_refused),
        cmocka_unit_test(test_erp_session_marker_status),
        cmocka_unit_test(test_erp_session_marker_redirect),
        cmocka_unit_test(test_erp_session_marker_body),
        cmocka_unit_test(test_erp_session_marker_budget),
        cmocka_unit_test(test_erp_lookup_pages_through_next),
        cmocka_unit_test(test_erp_lookup_more_pages_than_allowed),
        cmocka_unit_test(test_erp_lookup_cut_page_is_no_absence),
        cmocka_unit_test(test_erp_lookup_garbled_no_results_is_no_absence),
        cmocka_unit_test(test_erp_lookup_prefix_rows_are_no_hit),
        cmocka_unit_test(test_erp_lookup_unanswered_is_failed),
        cmocka_unit_test(test_erp_error_page_excerpt_is_text),
        cmocka_unit_test(test_erp_lookup_detail_pages),
        cmocka_unit_test(test_erp_lookup_detail_failure_is_no_absence),
        cmocka_unit_test(test_erp_lookup_too_many_candidates),
        cmocka_unit_test(test_erp_lookup_empty_classic),
        cmocka_unit_test(test_erp_list_range_and_days),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
