/*
 * test_serve.c - the review page's safety decisions as tables: where it may listen (loopback
 * always, anything else only where people must sign in), which Host headers it answers on
 * loopback (no DNS rebinding), which origins a POST may come from (http and https), who may
 * ask for what in each mode (serve_access_decide), when a session ends (idle, absolute), the
 * throttle on failed sign-ins, where a sign-in may send the browser back to (never another
 * site), which addresses are trusted proxies and which client such a proxy forwards for, and
 * which header names a proxy's header may have; the format GET /metrics answers in and what
 * it shows. The pages themselves are driven by tests/t_serve.sh, the metrics by
 * tests/t_metrics.sh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

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
    assert_int_equal(serve_exposure_ok(&lo, false, NULL, err, sizeof(err)), APBOT_OK);
    assert_int_equal(serve_exposure_ok(&lo, false, "", err, sizeof(err)), APBOT_OK);
    assert_int_equal(serve_exposure_ok(&any, false, NULL, err, sizeof(err)), APBOT_E_INVAL);
    assert_non_null(strstr(err, "APBOT_REVIEW_PASSWORD"));
    assert_non_null(strstr(err, "--reviewers"));
    assert_int_equal(serve_exposure_ok(&any, false, "", err, sizeof(err)), APBOT_E_INVAL);
    assert_int_equal(serve_exposure_ok(&any, false, "elevenchars", err, sizeof(err)),
                     APBOT_E_INVAL);
    assert_int_equal(serve_exposure_ok(&any, false, "twelve chars", err, sizeof(err)), APBOT_OK);
    /* a reviewers file: everyone signs in with their own password */
    assert_int_equal(serve_exposure_ok(&any, true, NULL, err, sizeof(err)), APBOT_OK);
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

struct origin_row {
    const char *origin, *referer, *scheme, *host;
    bool ok;
};

/* clang-format off */
static const struct origin_row origin_table[] = {
    {"http://127.0.0.1:8470", NULL, "http", "127.0.0.1:8470", true},
    {"http://127.0.0.1:8471", NULL, "http", "127.0.0.1:8470", false},
    {"null", NULL, "http", "127.0.0.1:8470", false},
    {"http://evil.example", "http://127.0.0.1:8470/item/1", "http", "127.0.0.1:8470", false},
    {NULL, "http://127.0.0.1:8470/item/1", "http", "127.0.0.1:8470", true},
    {NULL, "http://127.0.0.1:8470", "http", "127.0.0.1:8470", true},
    {NULL, "http://127.0.0.1:84701/item/1", "http", "127.0.0.1:8470", false},
    {NULL, "http://evil.example/?http://127.0.0.1:8470/", "http", "127.0.0.1:8470", false},
    {NULL, NULL, "http", "127.0.0.1:8470", true}, /* the CSRF token still guards it */
    {"http://127.0.0.1:8470", NULL, "http", NULL, false},
    /* over TLS the page's origin is https: plain http is another origin */
    {"https://review.example.com", NULL, "https", "review.example.com", true},
    {"http://review.example.com", NULL, "https", "review.example.com", false},
    {NULL, "https://review.example.com/item/3", "https", "review.example.com", true},
    {"https://127.0.0.1:8470", NULL, "http", "127.0.0.1:8470", false},
};
/* clang-format on */

static void test_serve_origin(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(origin_table) / sizeof(origin_table[0]); i++) {
        const struct origin_row *r = &origin_table[i];
        if (serve_origin_ok(r->origin, r->referer, r->scheme, r->host) != r->ok)
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

struct access_row {
    enum serve_mode mode;
    bool known;
    enum reviewers_role role;
    enum serve_route route;
    enum serve_access want;
};

#define OPEN SERVE_MODE_OPEN
#define SHARED SERVE_MODE_SHARED
#define FILE_ SERVE_MODE_REVIEWERS
#define VIEWER REVIEWERS_VIEWER
#define REVIEWER REVIEWERS_REVIEWER

/* clang-format off */
static const struct access_row access_table[] = {
    /* without anyone to sign in: everyone looks, nobody decides */
    {OPEN,   false, VIEWER,   SERVE_ROUTE_VIEW,   SERVE_ALLOW},
    {OPEN,   false, VIEWER,   SERVE_ROUTE_DECIDE, SERVE_FORBIDDEN},
    {OPEN,   false, REVIEWER, SERVE_ROUTE_DECIDE, SERVE_FORBIDDEN},
    {OPEN,   false, VIEWER,   SERVE_ROUTE_ASSET,  SERVE_ALLOW},
    {OPEN,   false, VIEWER,   SERVE_ROUTE_LOGIN,  SERVE_ALLOW}, /* it says nobody signs in */
    /* one shared password */
    {SHARED, false, VIEWER,   SERVE_ROUTE_VIEW,   SERVE_SIGN_IN},
    {SHARED, false, REVIEWER, SERVE_ROUTE_DECIDE, SERVE_FORBIDDEN},
    {SHARED, true,  REVIEWER, SERVE_ROUTE_VIEW,   SERVE_ALLOW},
    {SHARED, true,  REVIEWER, SERVE_ROUTE_DECIDE, SERVE_ALLOW},
    {SHARED, false, VIEWER,   SERVE_ROUTE_ASSET,  SERVE_ALLOW}, /* the sign-in page's style */
    {SHARED, false, VIEWER,   SERVE_ROUTE_LOGIN,  SERVE_ALLOW},
    {SHARED, false, VIEWER,   SERVE_ROUTE_LOGOUT, SERVE_ALLOW},
    /* the reviewers file */
    {FILE_,  false, REVIEWER, SERVE_ROUTE_VIEW,   SERVE_SIGN_IN},
    {FILE_,  false, REVIEWER, SERVE_ROUTE_DECIDE, SERVE_FORBIDDEN},
    {FILE_,  true,  VIEWER,   SERVE_ROUTE_VIEW,   SERVE_ALLOW},
    {FILE_,  true,  VIEWER,   SERVE_ROUTE_DECIDE, SERVE_FORBIDDEN},
    {FILE_,  true,  REVIEWER, SERVE_ROUTE_VIEW,   SERVE_ALLOW},
    {FILE_,  true,  REVIEWER, SERVE_ROUTE_DECIDE, SERVE_ALLOW},
    {FILE_,  true,  REVIEWERS_ROLE__COUNT, SERVE_ROUTE_DECIDE, SERVE_FORBIDDEN},
    {FILE_,  true,  VIEWER,   SERVE_ROUTE_LOGOUT, SERVE_ALLOW},
    /* a scraper: nothing asked on the open page, a login's credentials elsewhere (a viewer's
     * do: the figures are what every page shows) */
    {OPEN,   false, VIEWER,   SERVE_ROUTE_METRICS, SERVE_ALLOW},
    {SHARED, false, VIEWER,   SERVE_ROUTE_METRICS, SERVE_CREDENTIALS},
    {SHARED, true,  REVIEWER, SERVE_ROUTE_METRICS, SERVE_ALLOW},
    {FILE_,  false, VIEWER,   SERVE_ROUTE_METRICS, SERVE_CREDENTIALS},
    {FILE_,  true,  VIEWER,   SERVE_ROUTE_METRICS, SERVE_ALLOW},
};
/* clang-format on */

static void test_serve_access(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(access_table) / sizeof(access_table[0]); i++) {
        const struct access_row *r = &access_table[i];
        enum serve_access got = serve_access_decide(r->mode, r->known, r->role, r->route);
        if (got != r->want)
            fail_msg("row %zu: mode %d known %d role %d route %d: %d, want %d", i, r->mode,
                     r->known, r->role, r->route, got, r->want);
    }
}

struct session_row {
    int64_t now, created, seen;
    enum serve_session_state want;
};

#define IDLE (30 * 60 * 1000)
#define MAX (10 * 3600 * 1000)

/* clang-format off */
static const struct session_row session_table[] = {
    {1000, 1000, 1000, SERVE_SESSION_LIVE},
    {1000 + IDLE - 1, 1000, 1000, SERVE_SESSION_LIVE},
    {1000 + IDLE, 1000, 1000, SERVE_SESSION_IDLE},
    {1000 + IDLE + 5, 1000, 6, SERVE_SESSION_IDLE},
    /* used every few minutes: alive until the absolute limit, however busy */
    {1000 + MAX - 1, 1000, 1000 + MAX - 60000, SERVE_SESSION_LIVE},
    {1000 + MAX, 1000, 1000 + MAX - 1, SERVE_SESSION_EXPIRED},
    {1000 + MAX + IDLE, 1000, 1000, SERVE_SESSION_EXPIRED}, /* both: expired wins */
    /* a clock that went back (another boot's stamps): ended, never extended */
    {500, 1000, 1000, SERVE_SESSION_EXPIRED},
};
/* clang-format on */

static void test_serve_session(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(session_table) / sizeof(session_table[0]); i++) {
        const struct session_row *r = &session_table[i];
        enum serve_session_state got = serve_session_check(r->now, r->created, r->seen, IDLE, MAX);
        if (got != r->want)
            fail_msg("row %zu: %d, want %d", i, got, r->want);
    }
}

static void test_serve_throttle(void **state)
{
    struct serve_throttle t = {0, 0};
    const int64_t w = 15 * 60 * 1000;
    (void)state;

    /* five failures in the window are allowed to happen; the sixth attempt waits */
    for (int i = 0; i < 5; i++) {
        assert_int_equal(serve_throttle_wait(&t, 1000 + i * 1000, 5, w), 0);
        serve_throttle_fail(&t, 1000 + i * 1000, w);
    }
    assert_int_equal(t.failures, 5);
    assert_int_equal(serve_throttle_wait(&t, 6000, 5, w), w - 5000);
    assert_int_equal(serve_throttle_wait(&t, 1000 + w - 1, 5, w), 1);
    /* the window passed: allowed again, and the next failure starts a new window */
    assert_int_equal(serve_throttle_wait(&t, 1000 + w, 5, w), 0);
    serve_throttle_fail(&t, 1000 + w, w);
    assert_int_equal(t.failures, 1);
    assert_int_equal(t.since, 1000 + w);
    /* a clock that went back: not a reason to wait forever */
    t.failures = 9;
    assert_int_equal(serve_throttle_wait(&t, 10, 5, w), 0);
}

struct next_row {
    const char *next, *want;
};

/* clang-format off */
static const struct next_row next_table[] = {
    {"/queue", "/queue"},
    {"/queue?tab=exceptions", "/queue?tab=exceptions"},
    {"/item/42", "/item/42"},
    {NULL, "/"},
    {"", "/"},
    {"queue", "/"},
    {"//evil.example/", "/"},
    {"/\\evil.example/", "/"},
    {"/a\\b", "/"},
    {"https://evil.example/", "/"},
    {"/item/1 x", "/"},
    {"/item/1\r\nSet-Cookie: x=y", "/"},
    {"/login", "/"},
    {"/logout", "/"},
    {"/report?date=2026-11-03", "/report?date=2026-11-03"},
};
/* clang-format on */

static void test_serve_next(void **state)
{
    char longpath[700];
    (void)state;
    for (size_t i = 0; i < sizeof(next_table) / sizeof(next_table[0]); i++)
        if (strcmp(serve_next_path(next_table[i].next), next_table[i].want) != 0)
            fail_msg("row %zu: '%s', want '%s'", i, serve_next_path(next_table[i].next),
                     next_table[i].want);
    longpath[0] = '/';
    memset(longpath + 1, 'a', sizeof(longpath) - 2);
    longpath[sizeof(longpath) - 1] = '\0';
    assert_string_equal(serve_next_path(longpath), "/");
}

struct basic_row {
    const char *header;
    bool ok;
    const char *user, *pw;
};

/* clang-format off */
static const struct basic_row basic_table[] = {
    /* "lead:correct horse battery staple" */
    {"Basic bGVhZDpjb3JyZWN0IGhvcnNlIGJhdHRlcnkgc3RhcGxl", true, "lead",
     "correct horse battery staple"},
    {"basic bGVhZDpjb3JyZWN0IGhvcnNlIGJhdHRlcnkgc3RhcGxl", true, "lead",
     "correct horse battery staple"},
    /* ":correct horse battery staple": no user */
    {"Basic OmNvcnJlY3QgaG9yc2UgYmF0dGVyeSBzdGFwbGU=", true, "", "correct horse battery staple"},
    /* "lead:pass:word": the password may hold a colon */
    {"Basic bGVhZDpwYXNzOndvcmQ=", true, "lead", "pass:word"},
    /* no colon: "leadcorrect" */
    {"Basic bGVhZGNvcnJlY3Q=", false, NULL, NULL},
    {"Bearer bGVhZDpjb3JyZWN0", false, NULL, NULL},
    {"Basic !!!!", false, NULL, NULL},
    {"Basic ", false, NULL, NULL},
    {"Basic YWJj", false, NULL, NULL}, /* "abc" */
    /* "a\0b:c": a NUL inside */
    {"Basic YQBiOmM=", false, NULL, NULL},
    {NULL, false, NULL, NULL},
};
/* clang-format on */

static void test_serve_basic(void **state)
{
    char user[65], pw[258], small[4];
    (void)state;
    for (size_t i = 0; i < sizeof(basic_table) / sizeof(basic_table[0]); i++) {
        const struct basic_row *r = &basic_table[i];
        bool ok = serve_basic_parse(r->header, user, sizeof(user), pw, sizeof(pw));
        if (ok != r->ok)
            fail_msg("row %zu '%s': want %s", i, r->header ? r->header : "(none)",
                     r->ok ? "ok" : "refused");
        if (ok && (strcmp(user, r->user) != 0 || strcmp(pw, r->pw) != 0))
            fail_msg("row %zu: user '%s' password '%s'", i, user, pw);
    }
    /* what does not fit is refused, never cut */
    assert_false(serve_basic_parse(basic_table[0].header, small, sizeof(small), pw, sizeof(pw)));
    assert_false(
        serve_basic_parse(basic_table[0].header, user, sizeof(user), small, sizeof(small)));
}

static void test_serve_proxies(void **state)
{
    struct serve_proxies p;
    struct serve_ip ip;
    char err[256], client[64];
    (void)state;

    assert_int_equal(serve_parse_proxies(NULL, &p, err, sizeof(err)), APBOT_OK);
    assert_int_equal(p.n, 0);
    assert_int_equal(serve_parse_proxies("10.0.0.5, ::1,[fd00::7]", &p, err, sizeof(err)),
                     APBOT_OK);
    assert_int_equal(p.n, 3);
    assert_int_equal(serve_parse_proxies("10.0.0.5,proxy.example", &p, err, sizeof(err)),
                     APBOT_E_INVAL);
    assert_non_null(strstr(err, "proxy.example"));
    assert_int_equal(serve_parse_proxies("10.0.0.0/8", &p, err, sizeof(err)), APBOT_E_INVAL);
    assert_int_equal(serve_parse_proxies("10.0.0.5,", &p, err, sizeof(err)), APBOT_E_INVAL);

    assert_int_equal(serve_parse_proxies("10.0.0.5,::1", &p, err, sizeof(err)), APBOT_OK);
    ip.family = AF_INET;
    memcpy(ip.a, (unsigned char[]){10, 0, 0, 5}, 4);
    assert_true(serve_ip_listed(&p, &ip));
    memcpy(ip.a, (unsigned char[]){10, 0, 0, 6}, 4);
    assert_false(serve_ip_listed(&p, &ip));
    memset(&ip, 0, sizeof(ip));
    ip.family = AF_INET6;
    ip.a[15] = 1;
    assert_true(serve_ip_listed(&p, &ip));
    /* an IPv4-mapped IPv6 peer is compared as the IPv4 address it is */
    assert_int_equal(serve_parse_proxies("::ffff:10.0.0.5", &p, err, sizeof(err)), APBOT_OK);
    ip.family = AF_INET;
    memcpy(ip.a, (unsigned char[]){10, 0, 0, 5}, 4);
    assert_true(serve_ip_listed(&p, &ip));

    /* the client a proxy forwards for: the last entry (the one our proxy added), or, while
     * that is one of our proxies too (a load balancer before the login proxy), the one
     * before it */
    struct serve_proxies none = {0}, chain;
    assert_int_equal(serve_parse_proxies("10.0.0.5,10.0.0.6", &chain, err, sizeof(err)), APBOT_OK);
    static const struct {
        const char *xff;
        bool chained;     /* with the trusted list 10.0.0.5, 10.0.0.6 */
        const char *want; /* NULL: false */
    } rows[] = {
        {"203.0.113.9", false, "203.0.113.9"},
        {"1.2.3.4, 203.0.113.9", false, "203.0.113.9"},
        {"1.2.3.4,2001:db8::1 ", false, "2001:db8::1"},
        {"203.0.113.9, evil", false, NULL},
        {"", false, NULL},
        {NULL, false, NULL},
        {"1.2.3.4, 203.0.113.9, 10.0.0.5", false, "10.0.0.5"}, /* not trusted: taken as is */
        {"1.2.3.4, 203.0.113.9, 10.0.0.5", true, "203.0.113.9"},
        {"1.2.3.4, 203.0.113.9, 10.0.0.6, 10.0.0.5", true, "203.0.113.9"},
        {"10.0.0.6, 10.0.0.5", true, "10.0.0.6"}, /* only proxies: the first of them */
        {"1.2.3.4, 10.0.0.5", true, "1.2.3.4"},
        {"evil, 10.0.0.5", true, NULL}, /* past our proxy, an address must parse */
        {"evil, 203.0.113.9, 10.0.0.5", true, "203.0.113.9"}, /* never read past the client */
        {",10.0.0.5", true, NULL},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        bool got = serve_forwarded_client(rows[i].xff, rows[i].chained ? &chain : &none, client,
                                          sizeof(client));
        if (got != (rows[i].want != NULL) || (got && strcmp(client, rows[i].want) != 0))
            print_error("row %zu: %s -> %s\n", i, rows[i].xff ? rows[i].xff : "NULL",
                        got ? client : "false");
        assert_int_equal(got, rows[i].want != NULL);
        if (got)
            assert_string_equal(client, rows[i].want);
    }

    assert_true(serve_header_name_ok("X-Remote-User"));
    assert_true(serve_header_name_ok("X_Auth_Request_User"));
    assert_false(serve_header_name_ok("X-Remote-User:"));
    assert_false(serve_header_name_ok("X Remote"));
    assert_false(serve_header_name_ok(""));
    assert_false(serve_header_name_ok(NULL));
}

/* An unknown name is checked against a reviewer's own kind of hash, so that it takes as long. */
static void test_serve_decoy_hash(void **state)
{
    (void)state;
    static const char dummy[] = "$y$j9T$decoy$decoy";
    struct reviewer v[3];
    struct reviewers rv = {.v = v, .n = 0, .cap = 3};
    memset(v, 0, sizeof(v));
    snprintf(v[0].hash, sizeof(v[0].hash), "%s", REVIEWERS_NO_PASSWORD);
    snprintf(v[1].hash, sizeof(v[1].hash),
             "$2b$12$abcdefghijklmnopqrstuv0123456789012345678901234567");
    snprintf(v[2].hash, sizeof(v[2].hash), "$y$j9T$other$other");
    assert_ptr_equal(serve_decoy_hash(&rv, dummy), dummy); /* nobody in the file */
    rv.n = 1;
    assert_ptr_equal(serve_decoy_hash(&rv, dummy), dummy); /* nobody with a password */
    rv.n = 3;
    assert_ptr_equal(serve_decoy_hash(&rv, dummy), v[1].hash); /* the first with one */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_serve_parse_listen),   cmocka_unit_test(test_serve_decoy_hash),
        cmocka_unit_test(test_serve_exposure),       cmocka_unit_test(test_serve_host),
        cmocka_unit_test(test_serve_origin),         cmocka_unit_test(test_serve_metrics_format),
        cmocka_unit_test(test_serve_metrics_render), cmocka_unit_test(test_serve_access),
        cmocka_unit_test(test_serve_session),        cmocka_unit_test(test_serve_throttle),
        cmocka_unit_test(test_serve_next),           cmocka_unit_test(test_serve_proxies),
        cmocka_unit_test(test_serve_basic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
