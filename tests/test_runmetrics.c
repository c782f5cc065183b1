/*
 * test_runmetrics.c - what `apbot run --metrics-file` counts (run/runmetrics.c): exchanges by
 * step and outcome with their latency in the right buckets, overload and time-outs, outcomes
 * outside the list and steps past RUNMETRICS_STEPS under "other" (labels stay bounded), the
 * final states, the gauges, the queue's outages, and the exposition of a snapshot line by
 * line; the end (exit code, end time) written once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apbot/buf.h"
#include "apbot/runner.h"
#include "run/runmetrics.h"

static char *render(struct runner_metrics *m, enum metrics_format fmt)
{
    struct runmetrics_snap *s = malloc(sizeof(*s));
    struct apbot_buf b;
    assert_non_null(s);
    runmetrics_snapshot(m, s);
    apbot_buf_init(&b, RUNMETRICS_MAX_BYTES);
    assert_int_equal(runmetrics_render(s, fmt, &b), APBOT_OK);
    free(s);
    return apbot_buf_steal(&b, NULL);
}

static void has(const char *text, const char *line)
{
    if (!strstr(text, line))
        fail_msg("no \"%s\" in:\n%s", line, text);
}

static void test_runmetrics_counts(void **state)
{
    (void)state;
    struct runner_metrics *m = runner_metrics_new();

    runmetrics_exchange(m, "login", "logged-in", 3, LIMITER_OK);
    runmetrics_exchange(m, "post", "confirmed", 120, LIMITER_OK);
    runmetrics_exchange(m, "post", "confirmed", 250, LIMITER_OK);
    runmetrics_exchange(m, "post", "not-sent", 9, LIMITER_OVERLOAD);
    runmetrics_exchange(m, "post", "unknown", 30001, LIMITER_TIMEOUT);
    runmetrics_exchange(m, "lookup", "something new", 7, LIMITER_OK);
    runmetrics_exchange(m, "lookup", NULL, -5, LIMITER_OK);
    runmetrics_probe(m, "not-sent: connection refused");
    runmetrics_probe(m, "answered: 200");
    runmetrics_count(m, RUNMETRICS_POSTS);
    runmetrics_count(m, RUNMETRICS_LOGINS);
    runmetrics_count(m, RUNMETRICS_BREAKER_PAUSES);
    runmetrics_finished(m, MACHINE_COMPLETED);
    runmetrics_finished(m, MACHINE_COMPLETED);
    runmetrics_finished(m, MACHINE_MANUAL_REVIEW);
    runmetrics_finished(m, MACHINE_RECONCILING); /* not final: not counted */
    runmetrics_live(m, 8, 5, RUNMETRICS_BREAKER_PROBING, 12500, 3000);
    runmetrics_count(m, RUNMETRICS_QUEUE_OUTAGES);
    runmetrics_count(m, RUNMETRICS_QUEUE_LOST);
    runmetrics_count(m, RUNMETRICS_QUEUE_LOST);
    runmetrics_queue(m, 2, 7250); /* an outage under way, one before it lasted 7.25 s */

    char *t = render(m, METRICS_OPENMETRICS);
    has(t, "apbot_erp_requests_total{step=\"post\",outcome=\"confirmed\"} 2\n");
    has(t, "apbot_erp_requests_total{step=\"post\",outcome=\"not-sent\"} 1\n");
    has(t, "apbot_erp_requests_total{step=\"post\",outcome=\"unknown\"} 1\n");
    has(t, "apbot_erp_requests_total{step=\"lookup\",outcome=\"other\"} 2\n");
    has(t, "apbot_erp_requests_total{step=\"probe\",outcome=\"not-sent\"} 1\n");
    has(t, "apbot_erp_requests_total{step=\"probe\",outcome=\"answered\"} 1\n");
    /* 9, 120, 250, 30001 ms: cumulative per bound */
    has(t, "apbot_erp_request_duration_seconds_bucket{step=\"post\",le=\"0.005\"} 0\n");
    has(t, "apbot_erp_request_duration_seconds_bucket{step=\"post\",le=\"0.01\"} 1\n");
    has(t, "apbot_erp_request_duration_seconds_bucket{step=\"post\",le=\"0.1\"} 1\n");
    has(t, "apbot_erp_request_duration_seconds_bucket{step=\"post\",le=\"0.25\"} 3\n");
    has(t, "apbot_erp_request_duration_seconds_bucket{step=\"post\",le=\"30.0\"} 3\n");
    has(t, "apbot_erp_request_duration_seconds_bucket{step=\"post\",le=\"60.0\"} 4\n");
    has(t, "apbot_erp_request_duration_seconds_bucket{step=\"post\",le=\"+Inf\"} 4\n");
    has(t, "apbot_erp_request_duration_seconds_count{step=\"post\"} 4\n");
    has(t, "apbot_erp_request_duration_seconds_sum{step=\"post\"} 30.38\n");
    /* a negative latency counts as 0; probes are not timed */
    has(t, "apbot_erp_request_duration_seconds_sum{step=\"lookup\"} 0.007\n");
    assert_null(strstr(t, "apbot_erp_request_duration_seconds_count{step=\"probe\"}"));
    has(t, "apbot_erp_overload_answers_total 1\n");
    has(t, "apbot_erp_timeouts_total 1\n");
    has(t, "apbot_run_posts_total 1\n");
    has(t, "apbot_run_logins_total 1\n");
    has(t, "apbot_run_breaker_pauses_total 1\n");
    has(t, "apbot_run_breaker_trips_total 0\n");
    has(t, "apbot_run_items_total{state=\"completed\"} 2\n");
    has(t, "apbot_run_items_total{state=\"business-exception\"} 0\n");
    has(t, "apbot_run_items_total{state=\"manual-review\"} 1\n");
    has(t, "apbot_run_sessions 8\n");
    has(t, "apbot_run_sessions_limit 5\n");
    has(t, "apbot_run_breaker_state{state=\"closed\"} 0\n");
    has(t, "apbot_run_breaker_state{state=\"probing\"} 1\n");
    has(t, "apbot_settle_delay_seconds 12.5\n");
    has(t, "apbot_late_commit_max_seconds 3.0\n");
    has(t, "apbot_run_running 1\n");
    has(t, "apbot_run_queue_outages_total 1\n");
    has(t, "apbot_run_queue_connections_lost_total 2\n");
    has(t, "apbot_run_queue_available 0\n");
    has(t, "# UNIT apbot_run_queue_outage_seconds seconds\n");
    has(t, "apbot_run_queue_outage_seconds_total 7.25\n");
    assert_null(strstr(t, "apbot_run_exit_code"));
    has(t, "# EOF\n");
    free(t);
    /* back: available again */
    runmetrics_queue(m, 0, 9000);
    t = render(m, METRICS_PROMETHEUS);
    has(t, "apbot_run_queue_available 1\n");
    has(t, "apbot_run_queue_outage_seconds_total 9.0\n");
    free(t);
    runner_metrics_free(m);
}

static void test_runmetrics_steps_bounded(void **state)
{
    (void)state;
    struct runner_metrics *m = runner_metrics_new();
    char step[64];

    for (int i = 0; i < RUNMETRICS_STEPS + 10; i++) {
        snprintf(step, sizeof(step), "step%d", i);
        runmetrics_exchange(m, step, "answered", 1, LIMITER_OK);
    }
    /* a name too long for its slot is "other" too, never cut into a new label */
    memset(step, 'x', sizeof(step) - 1);
    step[sizeof(step) - 1] = '\0';
    runmetrics_exchange(m, step, "answered", 1, LIMITER_OK);
    char *t = render(m, METRICS_PROMETHEUS);
    has(t, "apbot_erp_requests_total{step=\"step31\",outcome=\"answered\"} 1\n");
    assert_null(strstr(t, "step=\"step32\""));
    has(t, "apbot_erp_requests_total{step=\"other\",outcome=\"answered\"} 11\n");
    has(t, "apbot_erp_request_duration_seconds_count{step=\"other\"} 11\n");
    assert_null(strstr(t, "xxxx"));
    free(t);
    runner_metrics_free(m);

    /* the first RUNMETRICS_STEPS names are labels, one too long always "other" */
    m = runner_metrics_new();
    runmetrics_exchange(m, step, "answered", 1, LIMITER_OK);
    runmetrics_exchange(m, "post", "answered", 1, LIMITER_OK);
    t = render(m, METRICS_PROMETHEUS);
    has(t, "apbot_erp_requests_total{step=\"post\",outcome=\"answered\"} 1\n");
    has(t, "apbot_erp_requests_total{step=\"other\",outcome=\"answered\"} 1\n");
    free(t);
    runner_metrics_free(m);
}

static void test_runmetrics_end(void **state)
{
    (void)state;
    struct runner_metrics *m = runner_metrics_new();
    char dir[] = "/tmp/apbot-test-runmetrics.XXXXXX", path[128], err[APBOT_ERR_LEN];

    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/apbot.prom", dir);
    runmetrics_live(m, 4, 4, RUNMETRICS_BREAKER_TRIPPED, 1000, 0);
    assert_int_equal(runner_metrics_write(m, path, -1, err, sizeof(err)), APBOT_OK);
    assert_int_equal(runner_metrics_write(m, path, 4, err, sizeof(err)), APBOT_OK);
    /* the first end stays */
    assert_int_equal(runner_metrics_write(m, path, 0, err, sizeof(err)), APBOT_OK);
    char *t = render(m, METRICS_PROMETHEUS);
    has(t, "# TYPE apbot_run_exit_code gauge\napbot_run_exit_code 4\n");
    has(t, "apbot_run_running 0\n");
    has(t, "apbot_run_breaker_state{state=\"tripped\"} 1\n");
    has(t, "apbot_run_end_time_seconds ");
    has(t, "# TYPE apbot_erp_requests_total counter\n");
    assert_null(strstr(t, "# EOF"));
    free(t);
    FILE *f = fopen(path, "r");
    char line[256];
    int found = 0;
    assert_non_null(f);
    while (fgets(line, sizeof(line), f))
        found += strcmp(line, "apbot_run_exit_code 4\n") == 0;
    fclose(f);
    assert_int_equal(found, 1);
    unlink(path);
    rmdir(dir);
    runner_metrics_free(m);
    runner_metrics_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runmetrics_counts),
        cmocka_unit_test(test_runmetrics_steps_bounded),
        cmocka_unit_test(test_runmetrics_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
