/*
 * test_runlog.c - the run's log lines in both formats: a key=value line quotes what needs it;
 * a JSON line (--log-format json) is one object, parsed here by jansson, whose members are
 * time, level and the fields in order, each value the text the key=value line shows (controls
 * and bytes that are not UTF-8 as \xNN, a quote and a backslash as themselves), and stays a
 * valid object whatever the buffer's size cuts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "apbot/text.h"
#include "base/logline.h"
#include "run/runner-int.h"

/* A JSON line as log_line writes it: buf with its closing brace. */
static json_t *parse_line(const char *buf)
{
    size_t n = strlen(buf);
    char *s = malloc(n + 2);
    assert_non_null(s);
    memcpy(s, buf, n);
    s[n] = '}';
    s[n + 1] = '\0';
    json_error_t e;
    json_t *o = json_loads(s, JSON_REJECT_DUPLICATES, &e);
    if (!o)
        fail_msg("not JSON (%s): %s", e.text, s);
    free(s);
    return o;
}

static void test_runlog_text_line(void **state)
{
    (void)state;
    char b[512];
    logline_start(b, sizeof(b), "info", false);
    logline_kv(b, sizeof(b), "item", "12");
    logline_kv(b, sizeof(b), "msg", "run stopped");
    logline_kv(b, sizeof(b), "reason", "E107: \"1000\" a\\b\nc");
    assert_non_null(strstr(b, " level=info item=12 msg=\"run stopped\" reason="));
    assert_non_null(strstr(b, "reason=\"E107: \\\"1000\\\" a\\\\b\\x0Ac\""));
    assert_null(strchr(b, '\n'));
}

static void test_runlog_json_line_table(void **state)
{
    (void)state;
    static const char *const values[] = {
        "12",
        "run stopped",
        "E107: \"1000\" is not allowed",
        "a\\b",
        "line\nbreak\r\tand tab",
        "Caf\xc3\xa9 \xe2\x82\xac",
        "bad \xff\xfe utf-8",
        "\x1b[31mred\x1b[0m",
        "",
        "=",
    };
    char b[2048];
    logline_start(b, sizeof(b), "warn", true);
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        char name[16];
        snprintf(name, sizeof(name), "f%zu", i);
        logline_kv(b, sizeof(b), name, values[i]);
    }
    json_t *o = parse_line(b);
    const char *key;
    json_t *v;
    size_t at = 0;
    json_object_foreach(o, key, v)
    {
        /* jansson keeps the order of the text */
        if (at == 0)
            assert_string_equal(key, "time");
        else if (at == 1)
            assert_string_equal(key, "level");
        at++;
    }
    assert_int_equal(json_object_size(o), 2 + sizeof(values) / sizeof(values[0]));
    assert_string_equal(json_string_value(json_object_get(o, "level")), "warn");
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        char name[16];
        snprintf(name, sizeof(name), "f%zu", i);
        char *want = text_escape(values[i], sizeof(b), 0);
        const char *got = json_string_value(json_object_get(o, name));
        assert_non_null(got);
        /* the key=value line's text: what text_escape makes of it */
        assert_string_equal(got, want);
        free(want);
    }
    /* a quote and a backslash in the value read back as themselves */
    assert_string_equal(json_string_value(json_object_get(o, "f2")),
                        "E107: \"1000\" is not allowed");
    json_decref(o);
}

static void test_runlog_json_line_cut_stays_json(void **state)
{
    (void)state;
    for (size_t len = 64; len < 400; len += 3) { /* the start alone takes 53 */
        char *b = malloc(len);
        assert_non_null(b);
        logline_start(b, len, "info", true);
        logline_kv(b, len, "item", "4711");
        logline_kv(b, len, "reason",
                   "a \"quoted\" reason \\ with\na line break, long enough to cut");
        logline_kv(b, len, "vendor",
                   "M\xc3\xbcller \xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xf0\x9f\x92\xb6 GmbH");
        logline_kv(b, len, "worker", "3");
        assert_true(strlen(b) < len);
        json_decref(parse_line(b));
        free(b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runlog_text_line),
        cmocka_unit_test(test_runlog_json_line_table),
        cmocka_unit_test(test_runlog_json_line_cut_stays_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
