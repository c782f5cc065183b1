/*
 * test_secret.c - where credentials come from (secret.h): NAME_FILE, systemd's
 * $CREDENTIALS_DIRECTORY and the environment, in that order; a file its group or others may
 * read, a directory, a FIFO, a file past the bound or with a NUL byte is refused naming the
 * file, never the secret; NAME and NAME_FILE both set is refused; one trailing line break is
 * dropped; secret_load_all takes the plain variables out of the environment (and their bytes
 * out of memory) and keeps the values; the PDF reader's child scrub leaves no variable.
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

#include "apbot/error.h"
#include "apbot/secret.h"

extern char **environ;

struct fx {
    char dir[64];
    char creds[96];
};

static void clear_vars(void)
{
    for (int i = 0; i < SECRET__COUNT; i++) {
        char file[64];
        snprintf(file, sizeof(file), "%s_FILE", secret_env_name((enum secret_id)i));
        unsetenv(secret_env_name((enum secret_id)i));
        unsetenv(file);
    }
    unsetenv("CREDENTIALS_DIRECTORY");
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/apbot-secret.XXXXXX");
    if (!f || !mkdtemp(f->dir))
        return -1;
    snprintf(f->creds, sizeof(f->creds), "%s/creds", f->dir);
    if (mkdir(f->creds, 0700) != 0)
        return -1;
    clear_vars();
    secret_forget_all();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    char cmd[128];
    clear_vars();
    secret_forget_all();
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    if (system(cmd) != 0)
        return -1;
    free(f);
    return 0;
}

/* Writes n bytes of s to dir/name with mode; returns the path (static). */
static const char *put(const char *dir, const char *name, const char *s, size_t n, mode_t mode)
{
    static char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, s, n), (ssize_t)n);
    close(fd);
    assert_int_equal(chmod(path, mode), 0);
    return path;
}

static void test_secret_from_env(void **state)
{
    (void)state;
    char *v = NULL, err[256];
    const char *from = NULL;
    assert_int_equal(secret_resolve(SECRET_ERP_PASSWORD, &v, &from, err, sizeof(err)), APBOT_OK);
    assert_null(v); /* none given */
    assert_null(from);
    setenv("APBOT_ERP_PASSWORD", "s3cret env", 1);
    assert_int_equal(secret_resolve(SECRET_ERP_PASSWORD, &v, &from, err, sizeof(err)), APBOT_OK);
    assert_string_equal(v, "s3cret env");
    assert_string_equal(from, "APBOT_ERP_PASSWORD");
    secret_free(v);
    setenv("APBOT_ERP_PASSWORD", "", 1); /* empty is none */
    assert_int_equal(secret_resolve(SECRET_ERP_PASSWORD, &v, &from, err, sizeof(err)), APBOT_OK);
    assert_null(v);
}

/* The file forms and their refusals, as a table. */
static void test_secret_file_table(void **state)
{
    struct fx *f = *state;
    static const struct {
        const char *content;
        size_t n;
        mode_t mode;
        int rc;            /* expected */
        const char *value; /* expected when APBOT_OK (NULL: none) */
        const char *why;   /* in the message when refused */
    } t[] = {
        {"pw\n", 3, 0600, APBOT_OK, "pw", NULL},
        {"pw\r\n", 4, 0400, APBOT_OK, "pw", NULL},
        {"pw\n\n", 4, 0600, APBOT_OK, "pw\n", NULL}, /* one line break only */
        {" pw with spaces ", 16, 0600, APBOT_OK, " pw with spaces ", NULL},
        {"\n", 1, 0600, APBOT_OK, NULL, NULL}, /* empty: none */
        {"", 0, 0600, APBOT_OK, NULL, NULL},
        {"pw", 2, 0640, APBOT_E_INVAL, NULL, "group or others may read it (mode 640)"},
        {"pw", 2, 0604, APBOT_E_INVAL, NULL, "mode 604"},
        {"pw", 2, 0660, APBOT_E_INVAL, NULL, "chmod 600"},
        {"p\0w", 3, 0600, APBOT_E_INVAL, NULL, "NUL byte"},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        const char *path = put(f->dir, "pw", t[i].content, t[i].n, t[i].mode);
        char *v = NULL, err[512] = "";
        const char *from = NULL;
        setenv("APBOT_ERP_PASSWORD_FILE", path, 1);
        int rc = secret_resolve(SECRET_ERP_PASSWORD, &v, &from, err, sizeof(err));
        if (rc != t[i].rc)
            fail_msg("row %zu: rc %d, want %d (%s)", i, rc, t[i].rc, err);
        if (rc == APBOT_OK) {
            if (t[i].value)
                assert_string_equal(v, t[i].value);
            else
                assert_null(v);
            assert_string_equal(from, "APBOT_ERP_PASSWORD_FILE");
        } else {
            assert_null(v);
            assert_non_null(strstr(err, "APBOT_ERP_PASSWORD_FILE"));
            assert_non_null(strstr(err, path));
            if (!strstr(err, t[i].why))
                fail_msg("row %zu: '%s' lacks '%s'", i, err, t[i].why);
            assert_null(strstr(err, "pw\n")); /* never the content */
        }
        secret_free(v);
    }
}

static void test_secret_file_bounds_and_kinds(void **state)
{
    struct fx *f = *state;
    char *v = NULL, err[512];
    static char big[SECRET_FILE_MAX + 1];
    memset(big, 'x', sizeof(big));
    /* at the bound: fine; one byte more: refused */
    setenv("APBOT_ERP_PASSWORD_FILE", put(f->dir, "big", big, SECRET_FILE_MAX, 0600), 1);
    assert_int_equal(secret_resolve(SECRET_ERP_PASSWORD, &v, NULL, err, sizeof(err)), APBOT_OK);
    assert_int_equal(strlen(v), SECRET_FILE_MAX);
    secret_free(v);
    setenv("APBOT_ERP_PASSWORD_FILE", put(f->dir, "big", big, sizeof(big), 0600), 1);
    assert_int_equal(secret_resolve(SECRET_ERP_PASSWORD, &v, NULL, err, sizeof(err)),
                     APBOT_E_LIMIT);
    assert_null(v);
    /* a directory, a FIFO (never waited on: refused before reading), a missing file */
    setenv("APBOT_ERP_PASSWORD_FILE", f->creds, 1);
    assert_int_not_equal(secret_resolve(SECRET_ERP_PASSWORD, &v, NULL, err, sizeof(err)), APBOT_OK);
    char fifo[128];
    snprintf(fifo, sizeof(fifo), "%s/fifo", f->dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    setenv("APBOT_ERP_PASSWORD_FILE", fifo, 1);
    alarm(5); /* a hang would be the bug */
    assert_int_equal(secret_resolve(SECRET_ERP_PASSWORD, &v, NULL, err, sizeof(err)),
                     APBOT_E_INVAL);
    alarm(0);
    assert_non_null(strstr(err, "not a regular file"));
    setenv("APBOT_ERP_PASSWORD_FILE", "/nonexistent/apbot/pw", 1);
    assert_int_equal(secret_resolve(SECRET_ERP_PASSWORD, &v, NULL, err, sizeof(err)), APBOT_E_IO);
    assert_non_null(strstr(err, "/nonexistent/apbot/pw"));
}

static void test_secret_precedence(void **state)
{
    struct fx *f = *state;
    char *v = NULL, err[512];
    const char *from = NULL;
    put(f->creds, "erp-password", "from-creds\n", 11, 0400);
    setenv("CREDENTIALS_DIRECTORY", f->creds, 1);
    /* the credential before the environment */
    setenv("APBOT_ERP_PASSWORD", "from-env", 1);
    assert_int_equal(secret_resolve(SECRET_ERP_PASSWORD, &v, &from, err, sizeof(err)), APBOT_OK);
    assert_string_equal(v, "from-creds");
    assert_string_equal(from, "$CREDENTIALS_DIRECTORY/erp-password");
    secret_free(v);
    /* a secret the directory lacks comes from the environment */
    setenv("APBOT_ERP_USER", "clerk", 1);
    assert_int_equal(secret_resolve(SECRET_ERP_USER, &v, &from, err, sizeof(err)), APBOT_OK);
    assert_string_equal(v, "clerk");
    assert_string_equal(from, "APBOT_ERP_USER");
    secret_free(v);
    /* the _FILE form before both; both plain and _FILE set is refused */
    unsetenv("APBOT_ERP_PASSWORD");
    setenv("APBOT_ERP_PASSWORD_FILE", put(f->dir, "pw", "from-file", 9, 0600), 1);
    assert_int_equal(secret_resolve(SECRET_ERP_PASSWORD, &v, &from, err, sizeof(err)), APBOT_OK);
    assert_string_equal(v, "from-file");
    secret_free(v);
    setenv("APBOT_ERP_PASSWORD", "from-env", 1);
    assert_int_equal(secret_resolve(SECRET_ERP_PASSWORD, &v, &from, err, sizeof(err)),
                     APBOT_E_INVAL);
    assert_non_null(strstr(err, "both APBOT_ERP_PASSWORD and APBOT_ERP_PASSWORD_FILE"));
    assert_null(strstr(err, "from-env"));
    /* a credential readable by others is refused too */
    unsetenv("APBOT_ERP_PASSWORD_FILE");
    put(f->creds, "erp-password", "x", 1, 0644);
    assert_int_equal(secret_resolve(SECRET_ERP_PASSWORD, &v, &from, err, sizeof(err)),
                     APBOT_E_INVAL);
    assert_non_null(strstr(err, "$CREDENTIALS_DIRECTORY/erp-password"));
}

static void test_secret_load_all_takes_them_out_of_the_environment(void **state)
{
    struct fx *f = *state;
    char err[512];
    setenv("APBOT_ERP_USER", "clerk", 1);
    setenv("APBOT_ERP_PASSWORD", "env-password", 1);
    char *p = getenv("APBOT_ERP_PASSWORD");
    setenv("APBOT_REVIEW_PASSWORD_FILE", put(f->dir, "rv", "review-pw\n", 10, 0600), 1);
    assert_int_equal(secret_load_all(err, sizeof(err)), APBOT_OK);
    assert_null(getenv("APBOT_ERP_USER"));
    assert_null(getenv("APBOT_ERP_PASSWORD"));
    assert_int_equal(p[0], '\0'); /* the bytes wiped where they were */
    char *v = secret_dup(SECRET_ERP_PASSWORD);
    assert_string_equal(v, "env-password");
    secret_free(v);
    v = secret_dup(SECRET_REVIEW_PASSWORD);
    assert_string_equal(v, "review-pw");
    secret_free(v);
    assert_null(secret_dup(SECRET_SMTP_PASSWORD));
    /* a child after the scrub: an empty environment, the kept values wiped */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        secret_scrub_child();
        char *in_child = secret_dup(SECRET_ERP_PASSWORD);
        int bad = (environ && environ[0]) || (in_child && *in_child);
        _exit(bad);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    /* the parent keeps its own */
    v = secret_dup(SECRET_ERP_USER);
    assert_string_equal(v, "clerk");
    secret_free(v);
    /* a bad file stops the load with nothing kept changed */
    setenv("APBOT_SMTP_PASSWORD_FILE", put(f->dir, "smtp", "x", 1, 0644), 1);
    assert_int_not_equal(secret_load_all(err, sizeof(err)), APBOT_OK);
    assert_non_null(strstr(err, "APBOT_SMTP_PASSWORD_FILE"));
    v = secret_dup(SECRET_ERP_USER);
    assert_string_equal(v, "clerk");
    secret_free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_secret_from_env, setup, teardown),
        cmocka_unit_test_setup_teardown(test_secret_file_table, setup, teardown),
        cmocka_unit_test_setup_teardown(test_secret_file_bounds_and_kinds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_secret_precedence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_secret_load_all_takes_them_out_of_the_environment,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
