/*
 * test_serve.c - the review page's safety decisions as tables: where it may listen (loopback
 * always, anything else only with a long enough password), which Host headers it answers on
 * loopback (no DNS rebinding), HTTP Basic (any user, the password compared exactly), and which
 * origins a POST may come from; the format GET /metrics answers in and what it shows. The pages
 * themselves are driven by tests/t_serve.sh, the metrics by tests/t_metrics.sh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/buf.h"
#include "apbot/machine.h"
#include "apbot/serve.h"
#include "apbot/store.h"
#include "office/serve-int.h"

struct listen_row {
    const char *listen;
    int rc;
    const char *host;
    unsigned short port;
    bool ipv6, loopback;
};

/* clang-format off */
static const struct listen_row listen_table[] = {
    {"127.0.0.1:8470", APBOT_OK, "127.0.0.1", 8470, false, true},
    {"127.1.2.3:0", APBOT_OK, "127.1.2.3", 0, false, true},
    {"localhost:9000", APBOT_OK, "127.0.0.1", 9000, false, true},
    {":8470", APBOT_OK, "127.0.0.1", 8470, false, true},
    {"[::1]:8470", APBOT_OK, "::1", 8470, true, true},
    {"0.0.0.0:8470", APBOT_OK, "0.0.0.0", 8470, false, false},
    {"192.168.1.5:80", APBOT_OK, "192.168.1.5", 80, false, false},
    {"[::]:8470", APBOT_OK, "::", 8470, true, false},
    {"128.0.0.1:1", APBOT_OK, "128.0.0.1", 1, false, false},
    {"example.com:8470", APBOT_E_INVAL, NULL, 0, false, false},
    {"127.0.0.1", APBOT_E_INVAL, NULL, 0, false, false},
    {"127.0.0.1:", APBOT_E_INVAL, NULL, 0, false, false},
    {"127.0.0.1:65536", APBOT_E_INVAL, NULL, 0, false, false},
    {"127.0.0.1:-1", APBOT_E_INVAL, NULL, 0, false, false},
    {"127.0.0.1:80x", APBOT_E_INVAL, NULL, 0, false, false},
    {"::1:8470", APBOT_E_INVAL, NULL, 0, false, false},
    {"[::1]8470", APBOT_E_INVAL, NULL, 0, false, false},
    {"", APBOT_E_INVAL, NULL, 0, false, false},
};
/* clang-format on */

static void test_serve_parse_listen(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(listen_table) / sizeof(listen_table[0]); i++) {
        const struct listen_row *r = &listen_table[i];
        struct serve_addr a = {.port = 4242};
        char err[256] = "";
        int rc = serve_parse_listen(r->listen, &a, err, sizeof(err));
        if (rc != r->rc)
            fail_msg("'%s': rc %d, want %d (%s)", r->listen, rc, r->rc, err);
        if (rc != APBOT_OK) {
            assert_int_equal(a.port, 4242); /* untouched */
            assert_true(err[0] != '\0');
            continue;
        }
        if (strcmp(a.host, r->host) != 0 || a.port != r->port || a.ipv6 != r->ipv6 ||
            a.loopback != r->loopback)
            fail_msg("'%s': host %s port %u ipv6 %d loopback %d", r->listen, a.host, a.port, a.ipv6,
                     a.loopback);
    }
}

static void test_serve_exposure(void **state)
{
    struct serve_addr lo, any;
    char err[256];
    (void)state;

    assert_int_equal(serve_parse_listen("127.0.0.1:0", &lo, err, sizeof(err)), APBOT_OK);
    assert_int_equal(serve_parse_listen("0.0.0.0:0", &any, err, sizeof(err)), APBOT_OK);
    assert_int_equal(serve_exposure_ok(&lo, NULL, err, sizeof(err)), APBOT_OK);
    assert_int_equal(serve_exposure_ok(&lo, "", err, sizeof(err)), APBOT_OK);
    assert_int_equal(serve_exposure_ok(&any, NULL, err, sizeof(err)), APBOT_E_INVAL);
    assert_non_null(strstr(err, "APBOT_REVIEW_PASSWORD"));
    assert_int_equal(serve_exposure_ok(&any, "", err, sizeof(err)), APBOT_E_INVAL);
    assert_int_equal(serve_exposure_ok(&any, "elevenchars", err, sizeof(err)), APBOT_E_INVAL);
    assert_int_equal(serve_exposure_ok(&any, "twelve chars", err, sizeof(err)), APBOT_OK);
}

struct host_row {
    const char *listen;
    unsigned short port; /* bound */
    const char *host;
    bool ok;
};

/* clang-format off */
static const struct host_row host_table[] = {
    {"127.0.0.1:0", 8470, "127.0.0.1:8470", true},
    {"127.0.0.1:0", 8470, "localhost:8470", true},
    {"127.0.0.1:0", 8470, "LOCALHOST:8470", true},
    {"127.0.0.1:0", 8470, "127.0.0.1:8471", false},
    {"127.0.0.1:0", 8470, "127.0.0.1", false},
    {"127.0.0.1:0", 8470, "evil.example:8470", false},
    {"127.0.0.1:0", 8470, "127.0.0.1:8470.evil.example", false},
    {"127.0.0.1:0", 8470, NULL, false},
    {"127.0.0.1:80", 80, "127.0.0.1", true},
    {"[::1]:0", 8470, "[::1]:8470", true},
    {"[::1]:0", 8470, "localhost:8470", false},
    {"0.0.0.0:0", 8470, "review.example.com", true}, /* not loopback: the password guards */
};
/* clang-format on */

static void test_serve_host(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(host_table) / sizeof(host_table[0]); i++) {
        const struct host_row *r = &host_table[i];
        struct serve_addr a;
        char err[256];
        assert_int_equal(serve_parse_listen(r->listen, &a, err, sizeof(err)), APBOT_OK);
        if (serve_host_ok(r->host, &a, r->port) != r->ok)
            fail_msg("listen %s port %u, Host '%s': want %s", r->listen, r->port,
                     r->host ? r->host : "(none)", r->ok ? "ok" : "refused");
    }
}

struct basic_row {
    const char *header;
    const char *password;
    bool ok;
};

/* clang-format off */
static const struct basic_row basic_table[] = {
    /* "lead:correct horse battery staple" */
    {"Basic bGVhZDpjb3JyZWN0IGhvcnNlIGJhdHRlcnkgc3RhcGxl", "correct horse battery staple", true},
    {"basic bGVhZDpjb3JyZWN0IGhvcnNlIGJhdHRlcnkgc3RhcGxl", "correct horse battery staple", true},
    /* any user: ":correct horse battery staple" */
    {"Basic OmNvcnJlY3QgaG9yc2UgYmF0dGVyeSBzdGFwbGU=", "correct horse battery staple", true},
    /* "lead:correct horse battery stapl" (one short) */
    {"Basic bGVhZDpjb3JyZWN0IGhvcnNlIGJhdHRlcnkgc3RhcGw=", "correct horse battery staple", false},
    /* "lead:correct horse battery staplee" */
    {"Basic bGVhZDpjb3JyZWN0IGhvcnNlIGJhdHRlcnkgc3RhcGxlZQ==", "correct horse battery staple", false},
    /* no colon: "leadcorrect" */
    {"Basic bGVhZGNvcnJlY3Q=", "correct", false},
    {"Bearer bGVhZDpjb3JyZWN0", "correct", false},
    {"Basic !!!!", "correct", false},
    {"Basic ", "correct", false},
    {NULL, "correct", false},
    {"Basic bGVhZDo=", "", false}, /* no password set: nothing passes */
};
/* clang-format on */

static void test_serve_basic(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(basic_table) / sizeof(basic_table[0]); i++) {
        const struct basic_row *r = &basic_table[i];
        if (serve_basic_ok(r->header, r->password) != r->ok)
            fail_msg("'%s': want %s", r->header ? r->header : "(none)", r->ok ? "ok" : "refused");
    }
}

struct origin_row {
    const char *origin, *referer, *host;
    bool ok;
};

/* clang-format off */
static const struct origin_row origin_table[] = {
    {"http://127.0.0.1:8470", NULL, "127.0.0.1:8470", true},
    {"http://127.0.0.1:8471", NULL, "127.0.0.1:8470", false},
    {"null", NULL, "127.0.0.1:8470", false},
    {"http://evil.example", "http://127.0.0.1:8470/item/1", "127.0.0.1:8470", false},
    {NULL, "http://127.0.0.1:8470/item/1", "127.0.0.1:8470", true},
    {NULL, "http://127.0.0.1:8470", "127.0.0.1:8470", true},
    {NULL, "http://127.0.0.1:84701/item/1", "127.0.0.1:8470", false},
    {NULL, "http://evil.example/?http://127.0.0.1:8470/", "127.0.0.1:8470", false},
    {NULL, NULL, "127.0.0.1:8470", true}, /* the CSRF token still guards it */
    {"http://127.0.0.1:8470", NULL, NULL, false},
};
/* clang-format on */

static void test_serve_origin(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(origin_table) / sizeof(origin_table[0]); i++) {
        const struct origin_row *r = &origin_table[i];
        if (serve_origin_ok(r->origin, r->referer, r->host) != r->ok)
            fail_msg("origin %s referer %s host %s: want %s", r->origin ? r->origin : "-",
                     r->referer ? r->referer : "-", r->host ? r->host : "-",
                     r->ok ? "ok" : "refused");
    }
}

/* The format a scraper gets: Prometheus's own Accept (OpenMetrics first), a text/plain only
 * scraper, curl's and a browser's. */
static void test_serve_metrics_format(void **state)
{
    (void)state;
    static const struct {
        const char *accept;
        enum metrics_format want;
    } rows[] = {
        {NULL, METRICS_OPENMETRICS},
        {"*/*", METRICS_OPENMETRICS},
        {"application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
         "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
         METRICS_OPENMETRICS},
        {"text/plain;version=0.0.4;q=1,*/*;q=0.1", METRICS_PROMETHEUS},
        {"Text/Plain", METRICS_PROMETHEUS},
        {"text/html,application/xhtml+xml", METRICS_OPENMETRICS},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        if (serve_metrics_format(rows[i].accept) != rows[i].want)
            fail_msg("Accept %s: want %s", rows[i].accept ? rows[i].accept : "(none)",
                     rows[i].want == METRICS_OPENMETRICS ? "OpenMetrics" : "0.0.4");
}

/* The queue's figures as the exposition shows them: per state, the oldest age, the review
 * depth, the day per final state in items and per currency in exact money, the settle delay. */
static void test_serve_metrics_render(void **state)
{
    (void)state;
    struct serve_metrics_figs *f = calloc(1, sizeof(*f));
    struct apbot_buf b;
    assert_non_null(f);
    f->now_ms = 1000000;
    f->counts.by_state[MACHINE_NEW] = 3;
    f->counts.by_state[MACHINE_COMPLETED] = 40;
    f->counts.by_state[MACHINE_MANUAL_REVIEW] = 2;
    f->counts.total = 45;
    f->counts.oldest_pending_at = 1000000 - 90500;
    f->sums[0] = (struct store_final_sum){MACHINE_COMPLETED, "EUR", 2, 30, 1234567};
    f->sums[1] = (struct store_final_sum){MACHINE_COMPLETED, "JPY", 0, 5, 90000};
    f->sums[2] = (struct store_final_sum){MACHINE_COMPLETED, "KWD", 3, 1, 1500};
    f->sums[3] = (struct store_final_sum){MACHINE_BUSINESS_EXCEPTION, "EUR", 2, 2, -500};
    f->n_sums = 4;
    f->settle_known = true;
    f->settle_ms = 4000;
    f->max_late_ms = 2000;

    apbot_buf_init(&b, 1 << 16);
    assert_int_equal(serve_metrics_render(f, METRICS_OPENMETRICS, &b), APBOT_OK);
    const char *t = apbot_buf_str(&b);
    static const char *const want[] = {
        "apbot_queue_items{state=\"new\"} 3\n",
        "apbot_queue_items{state=\"completed\"} 40\n",
        "apbot_queue_items{state=\"posting\"} 0\n",
        "# UNIT apbot_queue_oldest_pending_age_seconds seconds\n"
        "apbot_queue_oldest_pending_age_seconds 90.5\n",
        "apbot_queue_review_depth 2\n",
        "apbot_today_items{state=\"completed\"} 36\n",
        "apbot_today_items{state=\"business-exception\"} 2\n",
        "apbot_today_items{state=\"manual-review\"} 0\n",
        "apbot_today_amount{state=\"completed\",currency=\"EUR\"} 12345.67\n",
        "apbot_today_amount{state=\"completed\",currency=\"JPY\"} 90000\n",
        "apbot_today_amount{state=\"completed\",currency=\"KWD\"} 1.5\n",
        "apbot_today_amount{state=\"business-exception\",currency=\"EUR\"} -5.0\n",
        "apbot_settle_delay_seconds 4.0\n",
        "apbot_late_commit_max_seconds 2.0\n",
        "# EOF\n",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        if (!strstr(t, want[i]))
            fail_msg("no \"%s\" in:\n%s", want[i], t);
    apbot_buf_done(&b);

    /* nothing pending, no flow: age 0, no settle delay */
    f->counts.oldest_pending_at = 0;
    f->settle_known = false;
    apbot_buf_init(&b, 1 << 16);
    assert_int_equal(serve_metrics_render(f, METRICS_PROMETHEUS, &b), APBOT_OK);
    t = apbot_buf_str(&b);
    assert_non_null(strstr(t, "apbot_queue_oldest_pending_age_seconds 0.0\n"));
    assert_null(strstr(t, "apbot_settle_delay_seconds"));
    assert_null(strstr(t, "# EOF"));
    apbot_buf_done(&b);
    free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_serve_parse_listen),   cmocka_unit_test(test_serve_exposure),
        cmocka_unit_test(test_serve_host),           cmocka_unit_test(test_serve_basic),
        cmocka_unit_test(test_serve_origin),         cmocka_unit_test(test_serve_metrics_format),
        cmocka_unit_test(test_serve_metrics_render),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
