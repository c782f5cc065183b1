/*
 * test_jdoc.c - JSON answers read under bounds with exact numbers (web/jdoc.c): numbers kept as
 * written and written back byte for byte, no ERP string can pass for a number, every bound
 * refuses before jansson builds anything, JSON Pointer as RFC 6901 says (its own examples), the
 * writer's escapes, and a round trip of parse and write on generated documents.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "apbot/buf.h"
#include "helpers/xorshift.h"
#include "web/jdoc.h"

static struct jdoc *parse_ok(const char *text)
{
    struct jdoc_limits lim = jdoc_limits_for(1 << 20);
    struct jdoc *d = NULL;
    char err[256] = "";
    int rc = jdoc_parse(text, strlen(text), &lim, &d, err, sizeof(err));
    if (rc != APBOT_OK)
        fail_msg("jdoc_parse(%s): %d %s", text, rc, err);
    return d;
}

static int parse_rc(const char *text, const struct jdoc_limits *lim)
{
    struct jdoc_limits def = jdoc_limits_for(1 << 20);
    struct jdoc *d = NULL;
    char err[256] = "";
    int rc = jdoc_parse(text, strlen(text), lim ? lim : &def, &d, err, sizeof(err));
    if (rc == APBOT_OK)
        jdoc_free(d);
    else
        assert_true(err[0] != '\0'); /* every refusal says why */
    return rc;
}

static char *write_text(const json_t *v)
{
    struct apbot_buf b;
    apbot_buf_init(&b, 1 << 20);
    assert_int_equal(jdoc_write(&b, v), APBOT_OK);
    return apbot_buf_steal(&b, NULL);
}

static void test_jdoc_numbers_exact(void **state)
{
    (void)state;
    static const char *const nums[] = {"0",       "-0",    "120.50", "120.10",
                                       "1e400",   "-1E-7", "0.1",    "12345678901234567890123",
                                       "99.9900", "5e+3"};
    for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
        char text[128];
        snprintf(text, sizeof(text), "{\"total\":%s,\"list\":[%s]}", nums[i], nums[i]);
        struct jdoc *d = parse_ok(text);
        const json_t *t = jdoc_at(jdoc_root(d), "/total");
        assert_int_equal(jdoc_kind(t), JDOC_NUMBER);
        assert_string_equal(jdoc_number_text(t), nums[i]);
        char *s = jdoc_text(jdoc_at(jdoc_root(d), "/list/0"), 0);
        assert_string_equal(s, nums[i]);
        free(s);
        char *w = write_text(jdoc_root(d));
        assert_string_equal(w, text); /* written back byte for byte */
        free(w);
        jdoc_free(d);
    }
    /* built by code: the same */
    json_t *n = jdoc_number("120.50");
    assert_non_null(n);
    assert_int_equal(jdoc_kind(n), JDOC_NUMBER);
    char *w = write_text(n);
    assert_string_equal(w, "120.50");
    free(w);
    json_decref(n);
    assert_null(jdoc_number("120,50"));
    assert_null(jdoc_number("01"));
    assert_null(jdoc_number("1."));
    assert_null(jdoc_number(""));
    assert_null(jdoc_number(NULL));
    assert_true(jdoc_is_number("-0.5e3", 6));
    assert_false(jdoc_is_number("+1", 2));
    assert_false(jdoc_is_number("1 ", 2));
}

static void test_jdoc_strings_never_numbers(void **state)
{
    (void)state;
    /* a string that looks like a marked number, or carries NUL, is refused or stays a string */
    assert_int_equal(parse_rc("\"\\u0000120.50\"", NULL), APBOT_E_PARSE);
    assert_int_equal(parse_rc("{\"a\":\"x\\u0000y\"}", NULL), APBOT_E_PARSE);
    assert_int_equal(parse_rc("[\"a\tb\"]", NULL), APBOT_E_PARSE); /* raw control byte */
    struct jdoc *d = parse_ok("{\"a\":\"120.50\",\"b\":\"\\u00e9\\\"\\\\\\n\"}");
    assert_int_equal(jdoc_kind(jdoc_at(jdoc_root(d), "/a")), JDOC_STRING);
    assert_null(jdoc_number_text(jdoc_at(jdoc_root(d), "/a")));
    char *b = jdoc_text(jdoc_at(jdoc_root(d), "/b"), 0);
    assert_string_equal(b, "\xc3\xa9\"\\\n");
    free(b);
    char *w = write_text(jdoc_root(d));
    assert_string_equal(w, "{\"a\":\"120.50\",\"b\":\"\xc3\xa9\\\"\\\\\\n\"}");
    free(w);
    jdoc_free(d);
}

static void test_jdoc_refuses(void **state)
{
    (void)state;
    /* cut, malformed, duplicate keys: never a value */
    static const char *const bad[] = {"{\"id\":1,\"result\":[{\"id\":12,\"number\":",
                                      "{\"a\":1,}",
                                      "[1,2",
                                      "{\"a\":1,\"a\":2}",
                                      "",
                                      "   ",
                                      "{\"a\":01}",
                                      "{\"a\":-}",
                                      "{\"a\":1.}",
                                      "{\"a\":.5}",
                                      "[1] [2]",
                                      "<html><body>500</body></html>",
                                      "\"unterminated",
                                      "{\"a\":\"\\u12\"}",
                                      "[tru]"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (parse_rc(bad[i], NULL) != APBOT_E_PARSE)
            fail_msg("accepted: %s", bad[i]);

    /* the bounds */
    struct jdoc_limits lim = {.max_bytes = 64, .max_nodes = 5, .max_depth = 3};
    assert_int_equal(parse_rc("[[[1]]]", &lim), APBOT_OK);
    assert_int_equal(parse_rc("[[[[1]]]]", &lim), APBOT_E_LIMIT);
    assert_int_equal(parse_rc("[1,2,3,4]", &lim), APBOT_OK);
    assert_int_equal(parse_rc("[1,2,3,4,5]", &lim), APBOT_E_LIMIT);
    assert_int_equal(
        parse_rc("\"0123456789012345678901234567890123456789012345678901234567890123\"", &lim),
        APBOT_E_LIMIT);
    /* a deep document far past the bound is refused without recursion trouble */
    size_t n = 200000;
    char *deep = malloc(2 * n + 1);
    memset(deep, '[', n);
    memset(deep + n, ']', n);
    deep[2 * n] = '\0';
    struct jdoc_limits big = jdoc_limits_for(1 << 20);
    struct jdoc *d = NULL;
    char err[200];
    assert_int_equal(jdoc_parse(deep, 2 * n, &big, &d, err, sizeof(err)), APBOT_E_LIMIT);
    free(deep);
}

static void test_jdoc_pointer_rfc6901(void **state)
{
    (void)state;
    /* RFC 6901, section 5 */
    struct jdoc *d = parse_ok("{\"foo\":[\"bar\",\"baz\"],\"\":0,\"a/b\":1,\"c%d\":2,\"e^f\":3,"
                              "\"g|h\":4,\"i\\\\j\":5,\"k\\\"l\":6,\" \":7,\"m~n\":8}");
    const json_t *r = jdoc_root(d);
    assert_ptr_equal(jdoc_at(r, ""), r);
    char *t = jdoc_text(jdoc_at(r, "/foo"), 0);
    assert_string_equal(t, "[\"bar\",\"baz\"]");
    free(t);
    static const struct {
        const char *ptr, *want;
    } cases[] = {{"/foo/0", "bar"}, {"/", "0"},     {"/a~1b", "1"}, {"/c%d", "2"}, {"/e^f", "3"},
                 {"/g|h", "4"},     {"/i\\j", "5"}, {"/k\"l", "6"}, {"/ ", "7"},   {"/m~0n", "8"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *v = jdoc_text(jdoc_at(r, cases[i].ptr), 0);
        if (!v || strcmp(v, cases[i].want) != 0)
            fail_msg("%s: %s, want %s", cases[i].ptr, v ? v : "(absent)", cases[i].want);
        free(v);
    }
    /* absent, malformed, past the end */
    static const char *const absent[] = {"/foo/2", "/foo/-", "/foo/01",  "/foo/x",  "/nope",
                                         "foo",    "/m~2n",  "/foo/0/x", "/a~1b/c", "/foo/"};
    for (size_t i = 0; i < sizeof(absent) / sizeof(absent[0]); i++)
        if (jdoc_at(r, absent[i]))
            fail_msg("%s is present", absent[i]);
    assert_false(jdoc_pointer_ok("x"));
    assert_false(jdoc_pointer_ok("/~"));
    assert_true(jdoc_pointer_ok("/~0/~1"));
    assert_null(jdoc_at(NULL, ""));
    jdoc_free(d);

    /* null is present; its text is "null" */
    d = parse_ok("{\"result\":null,\"ok\":true}");
    assert_non_null(jdoc_at(jdoc_root(d), "/result"));
    assert_int_equal(jdoc_kind(jdoc_at(jdoc_root(d), "/result")), JDOC_NULL);
    t = jdoc_text(jdoc_at(jdoc_root(d), "/ok"), 0);
    assert_string_equal(t, "true");
    free(t);
    jdoc_free(d);
}

/* A random JSON text of numbers, strings, literals, arrays and objects (unique keys). */
static void gen(struct apbot_buf *b, uint64_t *x, int depth)
{
    static const char *const nums[] = {"0", "-1", "3.25", "1e5", "120.50", "-0.0"};
    static const char *const strs[] = {"\"a\"", "\"\\u00e9\"", "\"\\\"q\\\"\"", "\"x\\ny\"",
                                       "\"\""};
    static const char *const lits[] = {"true", "false", "null"};
    unsigned pick = (unsigned)(xorshift64(x) % (depth > 4 ? 3 : 5));
    int rc = APBOT_OK;
    if (pick == 0) {
        rc = apbot_buf_adds(b, nums[xorshift64(x) % 6]);
    } else if (pick == 1) {
        rc = apbot_buf_adds(b, strs[xorshift64(x) % 5]);
    } else if (pick == 2) {
        rc = apbot_buf_adds(b, lits[xorshift64(x) % 3]);
    } else {
        bool obj = pick == 4;
        unsigned n = (unsigned)(xorshift64(x) % 4);
        rc = apbot_buf_adds(b, obj ? "{" : "[");
        for (unsigned i = 0; i < n && rc == APBOT_OK; i++) {
            if (i)
                rc = apbot_buf_adds(b, ",");
            if (obj && rc == APBOT_OK)
                rc = apbot_buf_addf(b, "\"k%u\":", i);
            gen(b, x, depth + 1);
        }
        if (rc == APBOT_OK)
            rc = apbot_buf_adds(b, obj ? "}" : "]");
    }
    assert_int_equal(rc, APBOT_OK);
}

static void test_jdoc_round_trip(void **state)
{
    (void)state;
    uint64_t x = 20261205;
    for (int round = 0; round < 3000; round++) {
        struct apbot_buf b;
        apbot_buf_init(&b, 1 << 20);
        gen(&b, &x, 0);
        struct jdoc *d = parse_ok(apbot_buf_str(&b));
        char *w = write_text(jdoc_root(d));
        /* the writer's escapes are the generator's, but for \u00e9, written as UTF-8 */
        struct jdoc *again = parse_ok(w);
        char *w2 = write_text(jdoc_root(again));
        assert_string_equal(w, w2);
        if (!strstr(apbot_buf_str(&b), "\\u00e9"))
            assert_string_equal(w, apbot_buf_str(&b));
        free(w);
        free(w2);
        jdoc_free(d);
        jdoc_free(again);
        apbot_buf_done(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jdoc_numbers_exact),
        cmocka_unit_test(test_jdoc_strings_never_numbers),
        cmocka_unit_test(test_jdoc_refuses),
        cmocka_unit_test(test_jdoc_pointer_rfc6901),
        cmocka_unit_test(test_jdoc_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
