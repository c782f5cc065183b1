/*
 * test_text.c - text_mask_into against its plain definition (text_mask of the buffer, cut to
 * its capacity, copied back), which it must equal byte for byte on generated texts where the
 * secrets overlap, occur or not, are empty or absent, in buffers just big enough and larger.
 * text_mask itself is held to the obvious scan in test_buf.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "apbot/text.h"

/* text_mask_into as text.c defined it before it looked for the secrets first. */
static void old_mask_into(char *buf, size_t len, const char *a, const char *b)
{
    if (!buf || !len || !buf[0])
        return;
    char *m = text_mask(buf, a, b);
    text_cut_utf8(m, len - 1);
    memcpy(buf, m, strlen(m) + 1);
    free(m);
}

static void test_text_mask_into_as_before(void **state)
{
    (void)state;
    static const char *const secrets[] = {"ab", "ba", "aab", "b", "abab", "\xc3\xa9", "", NULL};
    static const char *const units[] = {"a", "b", "c", "\xc3\xa9", "ab"};
    const size_t n_secrets = sizeof(secrets) / sizeof(secrets[0]);
    uint32_t x = 4242;
    size_t masked = 0, kept = 0;

    for (int round = 0; round < 20000; round++) {
        char text[96] = "";
        size_t n = 0;
        for (size_t k = (x = x * 1103515245u + 12345u) >> 27; k > 0; k--) {
            const char *u = units[((x = x * 1103515245u + 12345u) >> 16) % 5];
            memcpy(text + n, u, strlen(u));
            n += strlen(u);
        }
        text[n] = '\0';
        const char *a = secrets[round % n_secrets], *b = secrets[(round / n_secrets) % n_secrets];
        /* capacities from the text's own size up */
        for (size_t extra = 0; extra < 4; extra++) {
            char got[128], want[128];
            size_t cap = n + 1 + extra * 7;
            memset(got, 'Z', sizeof(got));
            memset(want, 'Z', sizeof(want));
            memcpy(got, text, n + 1);
            memcpy(want, text, n + 1);
            text_mask_into(got, cap, a, b);
            old_mask_into(want, cap, a, b);
            if (memcmp(got, want, sizeof(got)) != 0)
                fail_msg("\"%s\" (a %s, b %s, capacity %zu): \"%s\", want \"%s\"", text,
                         a ? a : "-", b ? b : "-", cap, got, want);
            if (strcmp(got, text) != 0)
                masked++;
            else
                kept++;
        }
    }
    /* both ways were taken often */
    if (masked < 10000 || kept < 10000)
        fail_msg("weak coverage: %zu masked, %zu kept", masked, kept);

    char empty[4] = "";
    text_mask_into(empty, sizeof(empty), "a", "b");
    assert_string_equal(empty, "");
    text_mask_into(NULL, 4, "a", "b");
    char one[2] = "a";
    text_mask_into(one, 0, "a", NULL); /* no capacity: untouched */
    assert_string_equal(one, "a");
}

/* RFC 4648, section 10, and a session header's text */
/* A form component as a browser encodes it: the table of text_form_decode and its digits. */
static void test_text_form_decode(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
    } rows[] = {
        {"", ""},
        {"a+b", "a b"},
        {"%41%62%2b", "Ab+"},
        {"%e2%82%AC", "\xe2\x82\xac"},
        {"100%", "100%"},     /* a '%' at the end stays */
        {"%4", "%4"},         /* one digit: stays */
        {"%zz%4g", "%zz%4g"}, /* no hex digits: stay */
        {"a%3Db%26c", "a=b&c"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char *got = text_form_decode(rows[i].in, strlen(rows[i].in));
        assert_string_equal(got, rows[i].out);
        free(got);
    }
    /* only the n bytes given are read */
    char *cut = text_form_decode("ab%41", 3);
    assert_string_equal(cut, "ab%");
    free(cut);
    assert_int_equal(text_hex_value('0'), 0);
    assert_int_equal(text_hex_value('f'), 15);
    assert_int_equal(text_hex_value('F'), 15);
    assert_int_equal(text_hex_value('g'), -1);
    assert_int_equal(text_hex_value(0xe2), -1);
}

static void test_text_base64(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"", ""},
        {"f", "Zg=="},
        {"fo", "Zm8="},
        {"foo", "Zm9v"},
        {"foob", "Zm9vYg=="},
        {"fooba", "Zm9vYmE="},
        {"foobar", "Zm9vYmFy"},
        {"clerk:1:s3cr3t", "Y2xlcms6MTpzM2NyM3Q="},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *b = text_base64(cases[i][0], strlen(cases[i][0]));
        assert_string_equal(b, cases[i][1]);
        free(b);
    }
    const unsigned char bin[] = {0xff, 0xfe, 0x00, 0x80};
    char *b = text_base64(bin, sizeof(bin));
    assert_string_equal(b, "//4AgA==");
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_base64),
        cmocka_unit_test(test_text_form_decode),
        cmocka_unit_test(test_text_mask_into_as_before),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
