/*
 * test_reviewers.c - the reviewers file (reviewers.h): the table of lines it reads and those it
 * refuses (naming the line), the hashes it accepts (slow, salted: yescrypt, scrypt, bcrypt of
 * cost 10 or more) and those it refuses (plain, MD5, SHA-512 crypt, fast bcrypt), a password
 * hashed and verified through libxcrypt (salted: two hashes of one password differ), the file
 * written and read back (0600, rewritten whole, its owner kept when root rewrites it), refused
 * when its group or others may read it, and the lock that serialises changes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apbot/reviewers.h"

/* "correct horse battery" under each algorithm (made with libxcrypt's crypt) */
#define H_YES "$y$j9T$F5Jx5fExrKuPp53xLKQ..1$YAXMK9Llbqk/FSGbrI16AP6p2zwE4UhuWrJZceAG.p2"
#define H_BCRYPT10 "$2b$10$abcdefghijklmnopqrstuuCj7fyLDJytXL.TfOiOeiv0fQvSOK1/2"
#define H_BCRYPT04 "$2b$04$abcdefghijklmnopqrstuuqREtd3VJD2QVZbuFskFSLk6eRIrQoOS"
#define H_SHA512                                                                                   \
    "$6$saltsalt$G9wFFnnUFCPffgjGaIp8t6onbqx3zGbMIn93ecLfBFGJpBV3/"                                \
    "0HPLZ17qYbjb.WJDtXbmuMlQ9NnvzVms5"                                                            \
    "ZXj."
#define H_MD5 "$1$saltsalt$UevX3RQ4rPNbqFqf8dVFn."
#define PW "correct horse battery"

struct parse_row {
    const char *text;
    int rc;
    size_t n;          /* people read */
    const char *login; /* of the last one */
    const char *display;
    enum reviewers_role role;
    const char *err; /* a part of the message */
};

/* clang-format off */
static const struct parse_row parse_table[] = {
    {"", APBOT_OK, 0, NULL, NULL, 0, NULL},
    {"# only a comment\n\n   \n", APBOT_OK, 0, NULL, NULL, 0, NULL},
    {"alice:reviewer:" H_YES ":Alice Example\n", APBOT_OK, 1, "alice", "Alice Example",
     REVIEWERS_REVIEWER, NULL},
    {"alice:reviewer:" H_YES ":Alice Example", APBOT_OK, 1, "alice", "Alice Example",
     REVIEWERS_REVIEWER, NULL}, /* no final line break */
    {"alice:reviewer:" H_YES ":Alice Example\r\n", APBOT_OK, 1, "alice", "Alice Example",
     REVIEWERS_REVIEWER, NULL},
    {"vera:viewer:" H_BCRYPT10 ":\n", APBOT_OK, 1, "vera", "", REVIEWERS_VIEWER, NULL},
    {"p.roxy@corp:reviewer:*:Only: by the proxy\n", APBOT_OK, 1, "p.roxy@corp",
     "Only: by the proxy", REVIEWERS_REVIEWER, NULL}, /* colons in the display name */
    {"a:viewer:*:A\n# c\nb:reviewer:*:Bé Ü\n", APBOT_OK, 2, "b", "Bé Ü", REVIEWERS_REVIEWER, NULL},
    /* refused, naming the line */
    {"alice:reviewer:" H_YES "\n", APBOT_E_INVAL, 0, NULL, NULL, 0, "t:1: want LOGIN:ROLE"},
    {"a:viewer:*:A\nbad name:viewer:*:X\n", APBOT_E_INVAL, 0, NULL, NULL, 0, "t:2: the login"},
    {":viewer:*:X\n", APBOT_E_INVAL, 0, NULL, NULL, 0, "t:1: the login"},
    {"a:admin:*:X\n", APBOT_E_INVAL, 0, NULL, NULL, 0, "t:1: the role"},
    {"a:Reviewer:*:X\n", APBOT_E_INVAL, 0, NULL, NULL, 0, "t:1: the role"},
    {"a:viewer::X\n", APBOT_E_INVAL, 0, NULL, NULL, 0, "t:1: no password hash"},
    {"a:viewer:secret123456:X\n", APBOT_E_INVAL, 0, NULL, NULL, 0, "not yescrypt"},
    {"a:viewer:" H_SHA512 ":X\n", APBOT_E_INVAL, 0, NULL, NULL, 0, "not yescrypt"},
    {"a:viewer:" H_MD5 ":X\n", APBOT_E_INVAL, 0, NULL, NULL, 0, "not yescrypt"},
    {"a:viewer:" H_BCRYPT04 ":X\n", APBOT_E_INVAL, 0, NULL, NULL, 0, "cost is below 10"},
    {"a:viewer:$2b$10$short:X\n", APBOT_E_INVAL, 0, NULL, NULL, 0, "malformed"},
    {"a:viewer:$y$j9T$a b:X\n", APBOT_E_INVAL, 0, NULL, NULL, 0, "not a crypt(3) hash"},
    {"a:viewer:*:tab\there\n", APBOT_E_INVAL, 0, NULL, NULL, 0, "display name"},
    {"a:viewer:*:\xff\xfe\n", APBOT_E_INVAL, 0, NULL, NULL, 0, "display name"},
    {"alice:viewer:*:A\nALICE:reviewer:*:B\n", APBOT_E_INVAL, 0, NULL, NULL, 0,
     "t:2: the login is on an earlier line too"},
};
/* clang-format on */

static void test_reviewers_parse(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(parse_table) / sizeof(parse_table[0]); i++) {
        const struct parse_row *r = &parse_table[i];
        struct reviewers rv;
        char err[512] = "";
        int rc = reviewers_parse(r->text, strlen(r->text), "t", &rv, err, sizeof(err));
        if (rc != r->rc)
            fail_msg("row %zu: rc %d, want %d (%s)", i, rc, r->rc, err);
        if (rc != APBOT_OK) {
            if (!strstr(err, r->err))
                fail_msg("row %zu: '%s' does not say '%s'", i, err, r->err);
            assert_int_equal(rv.n, 0);
            continue;
        }
        if (rv.n != r->n)
            fail_msg("row %zu: %zu people, want %zu", i, rv.n, r->n);
        if (r->n > 0) {
            const struct reviewer *p = &rv.v[rv.n - 1];
            assert_string_equal(p->login, r->login);
            assert_string_equal(p->display, r->display);
            assert_int_equal(p->role, r->role);
        }
        reviewers_done(&rv);
    }
}

static void test_reviewers_lookup(void **state)
{
    const char *text = "alice:reviewer:" H_YES ":Alice Example\nvera:viewer:*:\n";
    struct reviewers rv;
    struct reviewer p;
    char err[256];
    (void)state;

    assert_int_equal(reviewers_parse(text, strlen(text), "t", &rv, err, sizeof(err)), APBOT_OK);
    assert_non_null(reviewers_find(&rv, "alice"));
    assert_non_null(reviewers_find(&rv, "ALICE")); /* a proxy may send another case */
    assert_null(reviewers_find(&rv, "alic"));
    assert_null(reviewers_find(&rv, NULL));
    assert_string_equal(reviewer_display(reviewers_find(&rv, "alice")), "Alice Example");
    assert_string_equal(reviewer_display(reviewers_find(&rv, "vera")), "vera");

    memset(&p, 0, sizeof(p));
    snprintf(p.login, sizeof(p.login), "Vera");
    snprintf(p.hash, sizeof(p.hash), "*");
    assert_int_equal(reviewers_add(&rv, &p, err, sizeof(err)), APBOT_E_CONFLICT);
    snprintf(p.login, sizeof(p.login), "bob");
    p.role = REVIEWERS_ROLE__COUNT;
    assert_int_equal(reviewers_add(&rv, &p, err, sizeof(err)), APBOT_E_INVAL);
    p.role = REVIEWERS_REVIEWER;
    assert_int_equal(reviewers_add(&rv, &p, err, sizeof(err)), APBOT_OK);
    assert_int_equal(rv.n, 3);
    assert_int_equal(reviewers_remove(&rv, "ALICE"), APBOT_OK);
    assert_int_equal(reviewers_remove(&rv, "alice"), APBOT_E_NOTFOUND);
    assert_int_equal(rv.n, 2);
    assert_string_equal(rv.v[0].login, "vera");
    assert_string_equal(rv.v[1].login, "bob");
    reviewers_done(&rv);

    assert_int_equal(reviewers_role_from_name("viewer"), REVIEWERS_VIEWER);
    assert_int_equal(reviewers_role_from_name("reviewer"), REVIEWERS_REVIEWER);
    assert_int_equal(reviewers_role_from_name("root"), REVIEWERS_ROLE__COUNT);
    assert_int_equal(reviewers_role_from_name(NULL), REVIEWERS_ROLE__COUNT);
    assert_string_equal(reviewers_role_name(REVIEWERS_ROLE__COUNT), "invalid");
}

struct password_row {
    const char *password;
    bool ok;
};

/* clang-format off */
static const struct password_row password_table[] = {
    {"correct horse", true},
    {"twelve chars", true},
    {"eleven char", false},
    {"", false},
    {NULL, false},
    {"line\nbreak in it", false},
    {"tab\tin the password", false},
};
/* clang-format on */

static void test_reviewers_password_rules(void **state)
{
    char why[128], longpw[REVIEWERS_PASSWORD_MAX + 2];
    (void)state;
    for (size_t i = 0; i < sizeof(password_table) / sizeof(password_table[0]); i++)
        if (reviewers_password_ok(password_table[i].password, why, sizeof(why)) !=
            password_table[i].ok)
            fail_msg("row %zu: want %s", i, password_table[i].ok ? "ok" : "refused");
    memset(longpw, 'x', sizeof(longpw) - 1);
    longpw[sizeof(longpw) - 1] = '\0';
    assert_false(reviewers_password_ok(longpw, why, sizeof(why)));
    longpw[REVIEWERS_PASSWORD_MAX] = '\0';
    assert_true(reviewers_password_ok(longpw, why, sizeof(why)));
}

static void test_reviewers_hash_verify(void **state)
{
    char h1[REVIEWERS_HASH_MAX + 1], h2[REVIEWERS_HASH_MAX + 1], err[256], why[256];
    (void)state;

    /* the known hashes */
    assert_true(reviewers_verify(H_YES, PW));
    assert_false(reviewers_verify(H_YES, "correct horse batterY"));
    assert_false(reviewers_verify(H_YES, ""));
    assert_true(reviewers_verify(H_BCRYPT10, PW));
    assert_false(reviewers_verify(H_BCRYPT10, "correct horse batter"));
    /* refused formats never verify, even with the right password */
    assert_false(reviewers_verify(H_SHA512, PW));
    assert_false(reviewers_verify(H_MD5, PW));
    assert_false(reviewers_verify(H_BCRYPT04, PW));
    assert_false(reviewers_verify(REVIEWERS_NO_PASSWORD, ""));
    assert_false(reviewers_verify(REVIEWERS_NO_PASSWORD, "*"));
    assert_false(reviewers_verify(NULL, PW));
    assert_false(reviewers_verify(H_YES, NULL));

    /* a new hash: yescrypt, salted, verifies */
    assert_int_equal(reviewers_hash_password(PW, h1, sizeof(h1), err, sizeof(err)), APBOT_OK);
    assert_int_equal(reviewers_hash_password(PW, h2, sizeof(h2), err, sizeof(err)), APBOT_OK);
    assert_memory_equal(h1, "$y$", 3);
    assert_string_not_equal(h1, h2);
    assert_null(strstr(h1, PW));
    assert_true(reviewers_hash_ok(h1, why, sizeof(why)));
    assert_true(reviewers_verify(h1, PW));
    assert_true(reviewers_verify(h2, PW));
    assert_false(reviewers_verify(h1, "correct horse batter"));
}

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/apbot-test-reviewers.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[128];
    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_reviewers_file(void **state)
{
    char path[128], err[512], *text;
    struct reviewers rv, back;
    struct reviewer p;
    struct stat st;
    int fd;
    (void)state;

    snprintf(path, sizeof(path), "%s/reviewers", dir);
    /* missing: an empty list when allowed, not found otherwise */
    assert_int_equal(reviewers_load(path, true, &rv, err, sizeof(err)), APBOT_OK);
    assert_int_equal(rv.n, 0);
    assert_int_equal(reviewers_load(path, false, &rv, err, sizeof(err)), APBOT_E_NOTFOUND);

    memset(&p, 0, sizeof(p));
    snprintf(p.login, sizeof(p.login), "alice");
    snprintf(p.display, sizeof(p.display), "Alice: Accounts Payable");
    snprintf(p.hash, sizeof(p.hash), "%s", H_YES);
    p.role = REVIEWERS_REVIEWER;
    assert_int_equal(reviewers_add(&rv, &p, err, sizeof(err)), APBOT_OK);
    snprintf(p.login, sizeof(p.login), "vera");
    p.display[0] = '\0';
    snprintf(p.hash, sizeof(p.hash), "*");
    p.role = REVIEWERS_VIEWER;
    assert_int_equal(reviewers_add(&rv, &p, err, sizeof(err)), APBOT_OK);

    assert_int_equal(reviewers_lock(path, 0, &fd, err, sizeof(err)), APBOT_OK);
    assert_int_equal(reviewers_save(path, &rv, err, sizeof(err)), APBOT_OK);
    /* a second writer waits for the lock and gives up: in a child, for 200 ms */
    {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            int fd2;
            _exit(reviewers_lock(path, 200, &fd2, err, sizeof(err)) == APBOT_E_BUSY ? 0 : 1);
        }
        int ws = 0;
        assert_int_equal(waitpid(pid, &ws, 0), pid);
        assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    }
    reviewers_unlock(fd);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(reviewers_load(path, false, &back, err, sizeof(err)), APBOT_OK);
    assert_int_equal(back.n, 2);
    assert_string_equal(back.v[0].display, "Alice: Accounts Payable");
    assert_string_equal(back.v[0].hash, H_YES);
    assert_string_equal(back.v[1].login, "vera");
    assert_int_equal(back.v[1].role, REVIEWERS_VIEWER);
    text = reviewers_format(&back);
    assert_non_null(strstr(text, "\nalice:reviewer:" H_YES ":Alice: Accounts Payable\n"));
    assert_non_null(strstr(text, "\nvera:viewer:*:\n"));
    free(text);
    reviewers_done(&back);
    reviewers_done(&rv);

    /* a rewrite keeps the file's owner and group: root changing the service user's file (only
     * root can give a file away, so only then) */
    if (geteuid() == 0) {
        assert_int_equal(chown(path, 65534, 65534), 0);
        assert_int_equal(reviewers_load(path, false, &back, err, sizeof(err)), APBOT_OK);
        assert_int_equal(reviewers_save(path, &back, err, sizeof(err)), APBOT_OK);
        reviewers_done(&back);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_uid, 65534);
        assert_int_equal(st.st_gid, 65534);
        assert_int_equal(st.st_mode & 0777, 0600);
        assert_int_equal(chown(path, 0, 0), 0);
    }

    /* readable by the group: refused, naming the file and the mode, whatever it holds */
    assert_int_equal(chmod(path, 0640), 0);
    assert_int_equal(reviewers_load(path, false, &back, err, sizeof(err)), APBOT_E_INVAL);
    assert_non_null(strstr(err, "reviewers file"));
    assert_non_null(strstr(err, "mode 640"));
    assert_int_equal(chmod(path, 0600), 0);

    /* a bad line refuses the whole file, naming the line */
    fd = open(path, O_WRONLY | O_APPEND);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "mallory:root:*:M\n", 17), 17);
    close(fd);
    assert_int_equal(reviewers_load(path, false, &back, err, sizeof(err)), APBOT_E_INVAL);
    assert_non_null(strstr(err, "reviewers:5: the role"));
    /* no temporary file is left beside it */
    {
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "test $(ls -A '%s' | wc -l) -eq 1", dir);
        assert_int_equal(system(cmd), 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reviewers_parse),
        cmocka_unit_test(test_reviewers_lookup),
        cmocka_unit_test(test_reviewers_password_rules),
        cmocka_unit_test(test_reviewers_hash_verify),
        cmocka_unit_test_setup_teardown(test_reviewers_file, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
