/*
 * test_buf.c - bounded buffers and arrays (buf.h) and terminal escaping (text.h): growth,
 * the maximum that refuses instead of growing, formatted appends past the small stack
 * buffer, stealing, array growth under a count bound; control characters, C1 controls,
 * invalid UTF-8 and cutting at a character boundary; masking the ERP's secrets (a table, and
 * a comparison with the obvious position-by-position scan on generated texts).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "apbot/buf.h"
#include "apbot/text.h"

static void test_buf_grows_and_refuses_past_max(void **state)
{
    (void)state;
    struct apbot_buf b;
    apbot_buf_init(&b, 10);
    assert_string_equal(apbot_buf_str(&b), "");
    assert_int_equal(apbot_buf_adds(&b, "hello"), APBOT_OK);
    assert_int_equal(apbot_buf_adds(&b, "world"), APBOT_OK);
    assert_int_equal(b.len, 10);
    assert_int_equal(apbot_buf_adds(&b, "!"), APBOT_E_LIMIT);
    assert_string_equal(apbot_buf_str(&b), "helloworld");
    apbot_buf_reset(&b);
    assert_string_equal(apbot_buf_str(&b), "");
    assert_int_equal(apbot_buf_add(&b, "abc", 3), APBOT_OK);
    assert_string_equal(apbot_buf_str(&b), "abc");
    apbot_buf_done(&b);
    assert_null(b.data);
    apbot_buf_done(NULL);
}

static void test_buf_addf_long_and_limit(void **state)
{
    (void)state;
    struct apbot_buf b;
    apbot_buf_init(&b, 4096);
    char big[1000];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(apbot_buf_addf(&b, "%s-%d", big, 42), APBOT_OK);
    assert_int_equal(b.len, 999 + 3);
    assert_string_equal(apbot_buf_str(&b) + 999, "-42");
    for (int i = 0; i < 3; i++)
        assert_int_equal(apbot_buf_addf(&b, "%s", big), APBOT_OK);
    size_t before = b.len;
    assert_int_equal(apbot_buf_addf(&b, "%s", big), APBOT_E_LIMIT);
    assert_int_equal(b.len, before);
    size_t n = 0;
    char *s = apbot_buf_steal(&b, &n);
    assert_int_equal(n, before);
    assert_int_equal(strlen(s), before);
    free(s);
    assert_int_equal(b.len, 0);
    s = apbot_buf_steal(&b, NULL);
    assert_string_equal(s, "");
    free(s);
}

static void test_buf_grow_array_bound(void **state)
{
    (void)state;
    int *arr = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < 100; i++) {
        assert_int_equal(apbot_grow((void **)&arr, &cap, i, sizeof(*arr), 100), APBOT_OK);
        assert_true(cap > i && cap <= 100);
        arr[i] = (int)i;
    }
    assert_int_equal(apbot_grow((void **)&arr, &cap, 100, sizeof(*arr), 100), APBOT_E_LIMIT);
    for (size_t i = 0; i < 100; i++)
        assert_int_equal(arr[i], (int)i);
    free(arr);
}

static void test_text_escapes_controls(void **state)
{
    (void)state;
    char *s = text_escape("ok \x1b]0;pwned\x07 line\nnext\\", 200, 0);
    assert_string_equal(s, "ok \\x1B]0;pwned\\x07 line\\x0Anext\\\\");
    free(s);
    /* C1 CSI (U+009B) and an invalid byte; UTF-8 letters stay */
    s = text_escape("M\xc3\xbcller \xc2\x9b"
                    "31m \xff",
                    200, 0);
    assert_string_equal(s, "M\xc3\xbcller \\xC2\\x9B31m \\xFF");
    free(s);
    s = text_escape("a\tb", 200, 1);
    assert_string_equal(s, "a\tb");
    free(s);
    s = text_escape(NULL, 200, 0);
    assert_string_equal(s, "");
    free(s);
}

static void test_text_cuts_at_boundary(void **state)
{
    (void)state;
    char buf[12];
    text_escape_into(buf, sizeof(buf), "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 0);
    assert_true(strlen(buf) < sizeof(buf));
    assert_non_null(strstr(buf, "..."));
    /* never a half character before the dots */
    size_t n = strlen(buf) - 3;
    assert_int_equal(n % 2, 0);
}

/* The obvious definition: at each position the password, then the user, else the byte. */
static char *mask_naive(const char *s, const char *a, const char *b)
{
    size_t la = a ? strlen(a) : 0, lb = b ? strlen(b) : 0, o = 0;
    char *out = malloc(strlen(s) * 3 + 1);
    assert_non_null(out);
    for (size_t i = 0; s[i];) {
        if (la && strncmp(s + i, a, la) == 0) {
            memcpy(out + o, "***", 3), o += 3, i += la;
        } else if (lb && strncmp(s + i, b, lb) == 0) {
            memcpy(out + o, "***", 3), o += 3, i += lb;
        } else {
            out[o++] = s[i++];
        }
    }
    out[o] = '\0';
    return out;
}

static void test_text_mask(void **state)
{
    (void)state;
    static const struct {
        const char *s, *pw, *user, *want;
    } rows[] = {
        {"user=clerk&password=acme-demo", "acme-demo", "clerk", "user=***&password=***"},
        {"clerkclerk", "acme", "clerk", "******"},
        {"no secret here", "acme", "clerk", "no secret here"},
        {"", "acme", "clerk", ""},
        {"acme-demo", "acme-demo", "acme", "***"}, /* both start here: the password wins */
        {"xacmeacme-demo", "acme-demo", "acme", "x******"},
        {"aaaa", "aa", NULL, "******"},
        {"abcab", "b", "ab", "***c***"}, /* the user at 0 comes before the password at 1 */
        {"secret", NULL, "", "secret"},
        {"l\xc3\xa9 clerk", "", "clerk", "l\xc3\xa9 ***"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char *got = text_mask(rows[i].s, rows[i].pw, rows[i].user);
        if (strcmp(got, rows[i].want) != 0)
            fail_msg("row %zu: \"%s\" -> \"%s\", want \"%s\"", i, rows[i].s, got, rows[i].want);
        free(got);
    }
    assert_null(text_mask(NULL, "a", "b"));

    /* generated texts over a small alphabet, where secrets overlap often */
    uint32_t x = 12345;
    static const char *const secrets[] = {"ab", "ba", "aab", "b", "abab", NULL};
    for (int round = 0; round < 2000; round++) {
        char s[64];
        size_t n = (x = x * 1103515245u + 12345u) >> 27;
        for (size_t k = 0; k < n; k++)
            s[k] = "abc"[(x = x * 1103515245u + 12345u) >> 30 == 3 ? 2 : (x >> 30)];
        s[n] = '\0';
        const char *a = secrets[round % 6], *b = secrets[(round / 6) % 6];
        char *got = text_mask(s, a, b), *want = mask_naive(s, a, b);
        if (strcmp(got, want) != 0)
            fail_msg("\"%s\" (a %s, b %s): \"%s\", want \"%s\"", s, a ? a : "-", b ? b : "-", got,
                     want);
        free(got);
        free(want);
    }

    char buf[8] = "clerk12";
    text_mask_into(buf, sizeof(buf), NULL, "clerk");
    assert_string_equal(buf, "***12");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buf_grows_and_refuses_past_max),
        cmocka_unit_test(test_buf_addf_long_and_limit),
        cmocka_unit_test(test_buf_grow_array_bound),
        cmocka_unit_test(test_text_escapes_controls),
        cmocka_unit_test(test_text_cuts_at_boundary),
        cmocka_unit_test(test_text_mask),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
