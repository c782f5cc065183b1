/*
 * test_mail.c - the morning mail's composition (base/mail.c) as tables: which addresses pass
 * (plain addr-specs only: nothing that could carry a header or a second recipient), address
 * lists, the subject (ASCII as it is, anything else RFC 2047 encoded words cut between
 * characters, line breaks as spaces, folded), quoted-printable (soft breaks at 76, '=' and
 * bytes above 126 encoded, a blank before a line end encoded), a whole message byte for byte,
 * and what may not go into a header refused. The mail as a server receives it: t_mail.sh.
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
#include "base/mail.h"

static void test_mail_address_ok(void **state)
{
    (void)state;
    static const struct {
        const char *a;
        bool ok;
    } rows[] = {
        {"finance@example.org", true},
        {"first.last+ap@sub.example.co.uk", true},
        {"o'brien@example.org", true},
        {"a@b.c", true},
        {"apbot@localhost", false}, /* one label: no domain a relay routes */
        {"finance", false},
        {"@example.org", false},
        {"finance@", false},
        {".a@example.org", false},
        {"a.@example.org", false},
        {"a..b@example.org", false},
        {"a@-example.org", false},
        {"a@example-.org", false},
        {"a@example..org", false},
        {"a@[127.0.0.1]", false},
        {"Finance <finance@example.org>", false},
        {"\"a b\"@example.org", false},
        {"a b@example.org", false},
        {"finance@example.org\r\nBcc: spy@example.net", false},
        {"finance@example.org\n", false},
        {"finance@example.org,spy@example.net", false},
        {"finance@example.org;spy@example.net", false},
        {"fin\xc3\xa4nce@example.org", false},
        {"a@b@example.org", false},
        {"", false},
        {NULL, false},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        if (mail_address_ok(rows[i].a) != rows[i].ok)
            fail_msg("%s: want %s", rows[i].a ? rows[i].a : "(null)",
                     rows[i].ok ? "ok" : "refused");
    char longer[300];
    memset(longer, 'a', sizeof(longer));
    memcpy(longer + 250, "@example.org", 13);
    assert_false(mail_address_ok(longer));
}

static void test_mail_split_list(void **state)
{
    (void)state;
    char store[512], err[APBOT_ERR_LEN];
    const char *got[4] = {NULL};
    size_t n = 0;

    assert_int_equal(mail_split_list(" a@x.org ,b@y.org,\tc@z.org", store, sizeof(store), got, 4,
                                     &n, err, sizeof(err)),
                     APBOT_OK);
    assert_int_equal(n, 3);
    assert_string_equal(got[0], "a@x.org");
    assert_string_equal(got[1], "b@y.org");
    assert_string_equal(got[2], "c@z.org");
    n = 9;
    assert_int_equal(
        mail_split_list("a@x.org,,b@y.org", store, sizeof(store), got, 4, &n, err, sizeof(err)),
        APBOT_E_INVAL);
    assert_int_equal(n, 9);
    assert_int_equal(mail_split_list("a@x.org,Bob <b@y.org>", store, sizeof(store), got, 4, &n, err,
                                     sizeof(err)),
                     APBOT_E_INVAL);
    assert_non_null(strstr(err, "'Bob <b@y.org>' is not a plain address"));
    assert_int_equal(
        mail_split_list("a@x.org,b@x.org,c@x.org", store, sizeof(store), got, 2, &n, err, 64),
        APBOT_E_INVAL);
    assert_int_equal(mail_split_list("", store, sizeof(store), got, 4, &n, err, sizeof(err)),
                     APBOT_E_INVAL);
}

static char *subject_of(const char *s)
{
    struct apbot_buf b;
    apbot_buf_init(&b, 4096);
    assert_int_equal(mail_subject(s, &b), APBOT_OK);
    return apbot_buf_steal(&b, NULL);
}

static void test_mail_subject(void **state)
{
    (void)state;
    static const struct {
        const char *in, *want;
    } rows[] = {
        {"apbot report 2026-12-04 (acme): DRIFT (2 findings)",
         "apbot report 2026-12-04 (acme): DRIFT (2 findings)"},
        {"line\r\nBcc: spy@example.net", "line  Bcc: spy@example.net"},
        {"tab\tand\x01", "tab and "},
        /* "=?" would read as an encoded word: encoded then */
        {"a =?x?= b", "=?UTF-8?B?YSA9P3g/PSBi?="},
        {"Gr\xc3\xb6\xc3\x9f"
         "e",
         "=?UTF-8?B?R3LDtsOfZQ==?="},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char *got = subject_of(rows[i].in);
        if (strcmp(got, rows[i].want) != 0)
            fail_msg("\"%s\": \"%s\", want \"%s\"", rows[i].in, got, rows[i].want);
        free(got);
    }
    /* long and not ASCII: words of at most 75 characters, whole characters each, folded */
    char in[400] = "";
    for (int i = 0; i < 40; i++)
        strcat(in, "\xc3\xa4\xe2\x82\xac"); /* a-umlaut, euro sign */
    char *got = subject_of(in);
    int words = 0;
    for (const char *w = got, *end;; w = end + 3) {
        end = strstr(w, "\r\n ");
        size_t len = end ? (size_t)(end - w) : strlen(w);
        assert_true(len <= 75);
        assert_int_equal(strncmp(w, "=?UTF-8?B?", 10), 0);
        words++;
        if (!end)
            break;
    }
    assert_true(words >= 5);
    free(got);
    /* a long ASCII subject folds too (as encoded words), never a line past 78 */
    memset(in, 'x', 120);
    in[120] = '\0';
    got = subject_of(in);
    assert_non_null(strstr(got, "\r\n =?UTF-8?B?"));
    free(got);
}

static void test_mail_qp(void **state)
{
    (void)state;
    static const struct {
        const char *in, *want;
    } rows[] = {
        {"plain text\n", "plain text\r\n"},
        {"a=b\n", "a=3Db\r\n"},
        {"caf\xc3\xa9\n", "caf=C3=A9\r\n"},
        {"trailing \nnext", "trailing=20\r\nnext\r\n"},
        {"end\t", "end=09\r\n"},
        {"cr\rx", "cr=0Dx\r\n"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct apbot_buf b;
        apbot_buf_init(&b, 4096);
        assert_int_equal(mail_qp(rows[i].in, &b), APBOT_OK);
        if (strcmp(apbot_buf_str(&b), rows[i].want) != 0)
            fail_msg("\"%s\": \"%s\", want \"%s\"", rows[i].in, apbot_buf_str(&b), rows[i].want);
        apbot_buf_done(&b);
    }
    /* 200 characters: soft breaks keep every line within 76 ('=' included), none in "=C3" */
    char in[400] = "";
    for (int i = 0; i < 100; i++)
        strcat(in, i % 3 ? "ab" : "\xc3\xa9");
    struct apbot_buf b;
    apbot_buf_init(&b, 4096);
    assert_int_equal(mail_qp(in, &b), APBOT_OK);
    const char *p = apbot_buf_str(&b);
    int lines = 0;
    for (const char *e; (e = strstr(p, "\r\n")); p = e + 2, lines++) {
        assert_true(e - p <= 76);
        assert_true(e - p < 2 || e[-2] != '='); /* never cut inside "=XX" */
    }
    assert_true(lines >= 3);
    apbot_buf_done(&b);
}

static void test_mail_compose(void **state)
{
    (void)state;
    const char *to[] = {"finance@example.org", "controller@example.org"};
    struct mail_part att = {.type = "text/html; charset=utf-8",
                            .filename = "apbot-report-2026-12-04.html",
                            .data = "<p>hi</p>",
                            .len = 9};
    struct mail_msg m = {
        .from = "apbot@example.org",
        .to = to,
        .n_to = 2,
        .subject = "apbot report 2026-12-04 (acme): clean",
        .text = "Status: clean\nsee =the attachment\n",
        .att = &att,
        .n_att = 1,
        .date = 1796364000, /* 2026-12-04 06:00:00 UTC */
        .utc_offset_min = 60,
        .id = "0123abcd",
        .boundary = "=_apbot_b",
    };
    static const char want[] =
        "Date: Fri, 04 Dec 2026 07:00:00 +0100\r\n"
        "From: apbot@example.org\r\n"
        "To: finance@example.org,\r\n controller@example.org\r\n"
        "Subject: apbot report 2026-12-04 (acme): clean\r\n"
        "Message-ID: <0123abcd@example.org>\r\n"
        "MIME-Version: 1.0\r\n"
        "Auto-Submitted: auto-generated\r\n"
        "Content-Type: multipart/mixed;\r\n boundary=\"=_apbot_b\"\r\n"
        "\r\n"
        "This is a message in MIME format.\r\n"
        "--=_apbot_b\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        "Content-Transfer-Encoding: quoted-printable\r\n"
        "\r\n"
        "Status: clean\r\n"
        "see =3Dthe attachment\r\n"
        "--=_apbot_b\r\n"
        "Content-Type: text/html; charset=utf-8;\r\n name=\"apbot-report-2026-12-04.html\"\r\n"
        "Content-Transfer-Encoding: base64\r\n"
        "Content-Disposition: attachment;\r\n filename=\"apbot-report-2026-12-04.html\"\r\n"
        "\r\n"
        "PHA+aGk8L3A+\r\n"
        "--=_apbot_b--\r\n";
    struct apbot_buf b;
    char err[APBOT_ERR_LEN];
    apbot_buf_init(&b, 1 << 16);
    assert_int_equal(mail_compose(&m, &b, err, sizeof(err)), APBOT_OK);
    assert_string_equal(apbot_buf_str(&b), want);
    apbot_buf_done(&b);

    /* refused before anything is written to a header */
    struct {
        struct mail_msg m;
        const char *why;
    } bad[] = {
        {m, "the sender"},      {m, "recipient"},  {m, "Message-ID"}, {m, "boundary"},
        {m, "boundary occurs"}, {m, "attachment"}, {m, "recipients"},
    };
    const char *evil_to[] = {"finance@example.org\r\nBcc: spy@example.net"};
    struct mail_part evil_att = att;
    evil_att.filename = "x\"; y=\"z.html";
    bad[0].m.from = "apbot@example.org\r\nX: 1";
    bad[1].m.to = evil_to;
    bad[1].m.n_to = 1;
    bad[2].m.id = "a>b";
    bad[3].m.boundary = "b\"\r\nX: 1";
    bad[4].m.text = "--=_apbot_b";
    bad[5].m.att = &evil_att;
    bad[6].m.n_to = 0;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        apbot_buf_init(&b, 1 << 16);
        assert_int_equal(mail_compose(&bad[i].m, &b, err, sizeof(err)), APBOT_E_INVAL);
        if (!strstr(err, bad[i].why))
            fail_msg("case %zu: \"%s\" does not name %s", i, err, bad[i].why);
        assert_int_equal(b.len, 0);
        apbot_buf_done(&b);
    }
    /* a message past the buffer's maximum */
    apbot_buf_init(&b, 100);
    assert_int_equal(mail_compose(&m, &b, err, sizeof(err)), APBOT_E_LIMIT);
    apbot_buf_done(&b);
}

static void test_mail_token(void **state)
{
    (void)state;
    char a[MAIL_TOKEN_LEN], b[MAIL_TOKEN_LEN];
    assert_int_equal(mail_token(a), APBOT_OK);
    assert_int_equal(mail_token(b), APBOT_OK);
    assert_int_equal(strlen(a), 32);
    assert_int_equal(strspn(a, "0123456789abcdef"), 32);
    assert_string_not_equal(a, b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mail_address_ok), cmocka_unit_test(test_mail_split_list),
        cmocka_unit_test(test_mail_subject),    cmocka_unit_test(test_mail_qp),
        cmocka_unit_test(test_mail_compose),    cmocka_unit_test(test_mail_token),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
