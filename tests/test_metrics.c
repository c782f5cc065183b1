/*
 * test_metrics.c - the exposition writer (base/metrics.c): exact decimals from integers, label
 * values that cannot break a line, one family of each type in both formats byte for byte, a
 * full buffer reported once, and the textfile written whole (replaced, never a temporary left,
 * readable by the collector whatever the umask, a planted symlink never followed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apbot/buf.h"
#include "base/metrics.h"

static void test_metrics_decimal(void **state)
{
    (void)state;
    static const struct {
        int64_t v;
        int scale;
        const char *want;
    } cases[] = {
        {0, 0, "0"},
        {12, 0, "12"},
        {-12, 0, "-12"},
        {5, 3, "0.005"},
        {1000, 3, "1.0"},
        {2500, 3, "2.5"},
        {120000, 3, "120.0"},
        {0, 3, "0.0"},
        {-15, 1, "-1.5"},
        {123456, 2, "1234.56"},
        {123400, 2, "1234.0"},
        {7, 2, "0.07"},
        {-7, 2, "-0.07"},
        {1234, 0, "1234"},
        {1235, 3, "1.235"},
        {INT64_MAX, 0, "9223372036854775807"},
        {INT64_MIN, 0, "-9223372036854775808"},
        {INT64_MIN, 18, "-9.223372036854775808"},
        {1, 18, "0.000000000000000001"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[32];
        metrics_decimal(cases[i].v, cases[i].scale, buf, sizeof(buf));
        if (strcmp(buf, cases[i].want) != 0)
            fail_msg("(%lld, %d): \"%s\", want \"%s\"", (long long)cases[i].v, cases[i].scale, buf,
                     cases[i].want);
    }
}

static void test_metrics_label_value(void **state)
{
    (void)state;
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"post", "post"},
        {"", ""},
        {NULL, ""},
        {"a\"b", "a\\\"b"},
        {"a\\b", "a\\\\b"},
        {"two\nlines", "two\\nlines"},
        {"cr\rlf", "cr?lf"},
        {"esc\x1b[31m", "esc?[31m"},
        {"del\x7f", "del?"},
        {"caf\xc3\xa9", "caf\xc3\xa9"},
        {"bad\xc3", "bad?"},
        {"bad\xff\xfe", "bad??"},
        {"over\xc0\xaf", "over??"},
        {"sur\xed\xa0\x80", "sur???"},
        {"} x 1\n# EOF", "} x 1\\n# EOF"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[2 * METRICS_LABEL_MAX + 1];
        metrics_label_value(cases[i].in, buf, sizeof(buf));
        if (strcmp(buf, cases[i].want) != 0)
            fail_msg("\"%s\": \"%s\", want \"%s\"", cases[i].in ? cases[i].in : "(null)", buf,
                     cases[i].want);
    }
    /* cut at METRICS_LABEL_MAX bytes, never inside a character; quotes double at most */
    char in[300], buf[2 * METRICS_LABEL_MAX + 1];
    memset(in, 'a', sizeof(in));
    in[sizeof(in) - 1] = '\0';
    in[METRICS_LABEL_MAX - 1] = '\xc3';
    in[METRICS_LABEL_MAX] = '\xa9';
    metrics_label_value(in, buf, sizeof(buf));
    assert_int_equal(strlen(buf), METRICS_LABEL_MAX - 1);
    memset(in, '"', sizeof(in) - 1);
    metrics_label_value(in, buf, sizeof(buf));
    assert_int_equal(strlen(buf), 2 * METRICS_LABEL_MAX);
}

/* One family of each type, written in fmt. */
static char *exposition(enum metrics_format fmt)
{
    struct apbot_buf b;
    struct metrics_writer w;
    static const int64_t bounds[] = {5, 100, 1000};
    static const int64_t cum[] = {1, 3, 3};
    const char *const step[] = {"step", "post \"x\"", "outcome", "confirmed", NULL};
    const char *const ver[] = {"version", "1.2", NULL};

    apbot_buf_init(&b, 1 << 16);
    metrics_init(&w, &b, fmt);
    metrics_family(&w, "apbot_erp_requests", METRICS_COUNTER, NULL, "ERP requests.");
    metrics_sample(&w, step, 7, 0);
    metrics_family(&w, "apbot_settle_delay_seconds", METRICS_GAUGE, "seconds", "Settle delay.");
    metrics_sample(&w, NULL, 12500, 3);
    metrics_family(&w, "apbot_erp_request_duration_seconds", METRICS_HISTOGRAM, "seconds",
                   "Latency.");
    metrics_histogram(&w, step + 0, bounds, cum, 3, 4, 2345, 3);
    metrics_family(&w, "apbot_build", METRICS_INFO, NULL, "Version.");
    metrics_sample(&w, ver, 1, 0);
    assert_int_equal(metrics_end(&w), APBOT_OK);
    return apbot_buf_steal(&b, NULL);
}

static void test_metrics_formats(void **state)
{
    (void)state;
    static const char want_om[] =
        "# HELP apbot_erp_requests ERP requests.\n"
        "# TYPE apbot_erp_requests counter\n"
        "apbot_erp_requests_total{step=\"post \\\"x\\\"\",outcome=\"confirmed\"} 7\n"
        "# HELP apbot_settle_delay_seconds Settle delay.\n"
        "# TYPE apbot_settle_delay_seconds gauge\n"
        "# UNIT apbot_settle_delay_seconds seconds\n"
        "apbot_settle_delay_seconds 12.5\n"
        "# HELP apbot_erp_request_duration_seconds Latency.\n"
        "# TYPE apbot_erp_request_duration_seconds histogram\n"
        "# UNIT apbot_erp_request_duration_seconds seconds\n"
        "apbot_erp_request_duration_seconds_bucket{step=\"post \\\"x\\\"\",outcome=\"confirmed\","
        "le=\"0.005\"} 1\n"
        "apbot_erp_request_duration_seconds_bucket{step=\"post \\\"x\\\"\",outcome=\"confirmed\","
        "le=\"0.1\"} 3\n"
        "apbot_erp_request_duration_seconds_bucket{step=\"post \\\"x\\\"\",outcome=\"confirmed\","
        "le=\"1.0\"} 3\n"
        "apbot_erp_request_duration_seconds_bucket{step=\"post \\\"x\\\"\",outcome=\"confirmed\","
        "le=\"+Inf\"} 4\n"
        "apbot_erp_request_duration_seconds_count{step=\"post \\\"x\\\"\",outcome=\"confirmed\"} "
        "4\n"
        "apbot_erp_request_duration_seconds_sum{step=\"post \\\"x\\\"\",outcome=\"confirmed\"} "
        "2.345\n"
        "# HELP apbot_build Version.\n"
        "# TYPE apbot_build info\n"
        "apbot_build_info{version=\"1.2\"} 1\n"
        "# EOF\n";
    char *om = exposition(METRICS_OPENMETRICS);
    assert_string_equal(om, want_om);
    free(om);

    char *prom = exposition(METRICS_PROMETHEUS);
    /* 0.0.4: the counter's family named by its sample, no UNIT lines, info as a gauge, no EOF */
    assert_non_null(strstr(prom, "# HELP apbot_erp_requests_total ERP requests.\n"
                                 "# TYPE apbot_erp_requests_total counter\n"
                                 "apbot_erp_requests_total{"));
    assert_non_null(strstr(prom, "# TYPE apbot_build_info gauge\napbot_build_info{version=\"1.2\"} "
                                 "1\n"));
    assert_null(strstr(prom, "# UNIT"));
    assert_null(strstr(prom, "# EOF"));
    assert_non_null(strstr(prom, "apbot_settle_delay_seconds 12.5\n"));
    free(prom);
}

static void test_metrics_full_buffer(void **state)
{
    (void)state;
    struct apbot_buf b;
    struct metrics_writer w;

    apbot_buf_init(&b, 100);
    metrics_init(&w, &b, METRICS_OPENMETRICS);
    for (int i = 0; i < 10; i++) {
        metrics_family(&w, "apbot_x", METRICS_GAUGE, NULL, "Something rather long to say.");
        metrics_sample(&w, NULL, i, 0);
    }
    assert_int_equal(metrics_end(&w), APBOT_E_LIMIT);
    assert_true(b.len <= 100);
    apbot_buf_done(&b);
}

static void test_metrics_write_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/apbot-test-metrics.XXXXXX";
    char path[256], tmp[300], err[APBOT_ERR_LEN], got[64];
    struct stat sb;
    FILE *f;

    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/apbot.prom", dir);
    mode_t old = umask(077);
    assert_int_equal(metrics_write_file(path, "a 1\n", 4, err, sizeof(err)), APBOT_OK);
    assert_int_equal(metrics_write_file(path, "a 2\n", 4, err, sizeof(err)), APBOT_OK);
    umask(old);
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0644);
    f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(got, sizeof(got), f));
    fclose(f);
    assert_string_equal(got, "a 2\n");
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    assert_int_not_equal(access(tmp, F_OK), 0);

    /* a symlink planted at the temporary name is removed, never followed */
    char target[300];
    snprintf(target, sizeof(target), "%s/target", dir);
    f = fopen(target, "w");
    assert_non_null(f);
    fputs("keep\n", f);
    fclose(f);
    assert_int_equal(symlink(target, tmp), 0);
    assert_int_equal(metrics_write_file(path, "a 3\n", 4, err, sizeof(err)), APBOT_OK);
    f = fopen(target, "r");
    assert_non_null(fgets(got, sizeof(got), f));
    fclose(f);
    assert_string_equal(got, "keep\n");

    /* a directory that is not there: an error naming the file */
    char bad[300];
    snprintf(bad, sizeof(bad), "%s/no/such/apbot.prom", dir);
    assert_int_equal(metrics_write_file(bad, "a 1\n", 4, err, sizeof(err)), APBOT_E_IO);
    assert_non_null(strstr(err, "no/such/apbot.prom.tmp."));

    unlink(target);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_decimal),    cmocka_unit_test(test_metrics_label_value),
        cmocka_unit_test(test_metrics_formats),    cmocka_unit_test(test_metrics_full_buffer),
        cmocka_unit_test(test_metrics_write_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
