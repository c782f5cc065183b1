/*
 * test_match.c - the PCRE2 matcher and status specs: named groups (set, unset, unknown), no
 * match, results outliving the subject, UTF-8 and invalid bytes in pages, compile errors with
 * PCRE2's message and offset, a catastrophic-backtracking pattern bounded by the match limit,
 * and the status spec grammar ("200", "5xx", "429,503", "4xx,500").
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apbot/match.h"

static struct match_re *compile_ok(const char *pattern)
{
    struct match_re *re = NULL;
    char err[APBOT_ERR_LEN] = "";

    if (match_compile(pattern, &re, err, sizeof(err)) != APBOT_OK)
        fail_msg("%s: %s", pattern, err);
    return re;
}

static void test_match_named_groups(void **state)
{
    (void)state;
    struct match_re *re =
        compile_ok("I020: Document (?<doc>AP-\\d{4}-\\d{6}) was posted|(?<reason>E\\d{3}: .*)");
    struct match_result *m = NULL;
    char subject[] = "<span>I020: Document AP-2026-000123 was posted.</span>";
    char *doc, *reason;

    assert_string_equal(match_pattern(re), "I020: Document (?<doc>AP-\\d{4}-\\d{6}) was "
                                           "posted|(?<reason>E\\d{3}: .*)");
    assert_true(match_has_group(re, "doc"));
    assert_true(match_has_group(re, "reason"));
    assert_false(match_has_group(re, "nope"));
    assert_true(match_exec(re, subject, strlen(subject), &m));
    memset(subject, 'x', sizeof(subject) - 1); /* the result owns its copies */
    doc = match_group(m, "doc");
    reason = match_group(m, "reason");
    assert_string_equal(doc, "AP-2026-000123");
    assert_null(reason); /* did not participate */
    assert_null(match_group(m, "unknown"));
    free(doc);
    match_result_free(m);

    m = NULL;
    assert_true(match_exec(re, "E105: Invalid amount '1,2,3'.", 29, &m));
    reason = match_group(m, "reason");
    assert_string_equal(reason, "E105: Invalid amount '1,2,3'.");
    free(reason);
    match_result_free(m);

    /* length bounds the subject: the banner lies past it */
    assert_false(match_exec(re, "....I020: Document AP-2026-000123 was posted", 10, NULL));
    match_free(re);
}

static void test_match_no_match_and_nulls(void **state)
{
    (void)state;
    struct match_re *re = compile_ok("Welcome");
    struct match_result *m = (struct match_result *)&re; /* untouched on no match */

    assert_false(match_exec(re, "Login", 5, &m));
    assert_ptr_equal(m, (struct match_result *)&re);
    assert_true(match_exec(re, "<h1>Welcome, clerk</h1>", 23, NULL));
    assert_false(match_exec(NULL, "x", 1, NULL));
    assert_false(match_exec(re, NULL, 0, NULL));
    match_free(re);
    match_free(NULL);
    match_result_free(NULL);
    assert_null(match_group(NULL, "doc"));

    /* a group-less pattern gives a result without groups */
    re = compile_ok("ok");
    m = NULL;
    assert_true(match_exec(re, "ok", 2, &m));
    assert_non_null(m);
    assert_null(match_group(m, "doc"));
    match_result_free(m);
    match_free(re);
}

static void test_match_utf8_and_invalid_bytes(void **state)
{
    (void)state;
    /* \w and \d are ASCII (a document number's \d never matches other scripts' digits);
     * \p{L} is the Unicode letter class */
    struct match_re *re = compile_ok("Lieferant (?<name>\\p{L}+)");
    struct match_result *m = NULL;
    const char page[] = "Lieferant M\xc3\xbcller \xff\xfe garbage";
    char *name;

    assert_true(match_exec(re, page, sizeof(page) - 1, &m));
    name = match_group(m, "name");
    assert_string_equal(name, "M\xc3\xbcller");
    free(name);
    match_result_free(m);
    match_free(re);
    re = compile_ok("Lieferant (?<name>\\w+)");
    m = NULL;
    assert_true(match_exec(re, page, sizeof(page) - 1, &m));
    name = match_group(m, "name");
    assert_string_equal(name, "M");
    free(name);
    match_result_free(m);
    /* invalid UTF-8 before the match must not stop it */
    assert_true(match_exec(re, "\xc3\x28 Lieferant X", 14, NULL));
    match_free(re);
}

static void test_match_bad_pattern_offset(void **state)
{
    (void)state;
    struct match_re *re = (struct match_re *)&state; /* untouched on failure */
    char err[APBOT_ERR_LEN] = "";

    assert_int_equal(match_compile("Document (?<doc>AP-\\d+", &re, err, sizeof(err)),
                     APBOT_E_PARSE);
    assert_ptr_equal(re, (struct match_re *)&state);
    assert_non_null(strstr(err, "missing closing parenthesis"));
    assert_non_null(strstr(err, "at offset 22"));
    assert_int_equal(match_compile("a{2,1}", &re, err, sizeof(err)), APBOT_E_PARSE);
    assert_non_null(strstr(err, "at offset 5"));
    assert_int_equal(match_compile("(?<doc>x)(?<doc>y)", &re, err, sizeof(err)), APBOT_E_PARSE);
    assert_non_null(strstr(err, "offset"));
    assert_int_equal(match_compile(NULL, &re, err, sizeof(err)), APBOT_E_INVAL);
}

static void test_match_backtracking_bounded(void **state)
{
    (void)state;
    struct match_re *re = compile_ok("^(a+)+$");
    char subject[64];
    struct timespec t0, t1;
    double secs;

    memset(subject, 'a', 40);
    subject[40] = '!';
    subject[41] = '\0';
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* without a limit this needs ~2^40 steps; with it, the match gives up: no match */
    assert_false(match_exec(re, subject, 41, NULL));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    assert_true(secs < 5.0);
    /* the pattern still works on a sane subject */
    assert_true(match_exec(re, "aaaa", 4, NULL));
    match_free(re);
}

static void test_match_status_specs(void **state)
{
    (void)state;
    assert_true(match_status("200", 200));
    assert_false(match_status("200", 201));
    assert_true(match_status("5xx", 500));
    assert_true(match_status("5xx", 503));
    assert_true(match_status("5xx", 599));
    assert_false(match_status("5xx", 404));
    assert_true(match_status("50x", 503));
    assert_false(match_status("50x", 510));
    assert_true(match_status("429,503", 429));
    assert_true(match_status("429,503", 503));
    assert_false(match_status("429,503", 500));
    assert_true(match_status("4xx,500", 404));
    assert_true(match_status("4xx,500", 500));
    assert_false(match_status("4xx,500", 502));
    assert_true(match_status("200, 500", 500));
    assert_false(match_status("200", 0)); /* no status: nothing answered */
    assert_false(match_status("5xx", -1));
    assert_false(match_status(NULL, 200));

    assert_true(match_status_valid("200"));
    assert_true(match_status_valid("5xx"));
    assert_true(match_status_valid("4XX"));
    assert_true(match_status_valid("429,503"));
    assert_true(match_status_valid("4xx,500"));
    assert_true(match_status_valid(" 200 , 302 "));
    assert_false(match_status_valid(""));
    assert_false(match_status_valid(NULL));
    assert_false(match_status_valid("20"));
    assert_false(match_status_valid("2000"));
    assert_false(match_status_valid("600"));
    assert_false(match_status_valid("099"));
    assert_false(match_status_valid("5xy"));
    assert_false(match_status_valid("x00"));
    assert_false(match_status_valid("5x3"));
    assert_false(match_status_valid("200,"));
    assert_false(match_status_valid(",200"));
    assert_false(match_status_valid("200;500"));
    assert_false(match_status_valid("200 500"));
    assert_false(match_status_valid("500-599"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match_named_groups),
        cmocka_unit_test(test_match_no_match_and_nulls),
        cmocka_unit_test(test_match_utf8_and_invalid_bytes),
        cmocka_unit_test(test_match_bad_pattern_offset),
        cmocka_unit_test(test_match_backtracking_bounded),
        cmocka_unit_test(test_match_status_specs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
