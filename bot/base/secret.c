/*
 * secret.c - the credentials apbot is given (secret.h): a file named by NAME_FILE, systemd's
 * $CREDENTIALS_DIRECTORY, or the environment, read once and kept out of children.
 *
 * A secret file is opened without following a final symbolic link only where we chose the
 * name ourselves (the credentials directory holds plain files); a NAME_FILE may be a link the
 * operator made, and what counts is the file it reaches: a regular file whose mode gives its
 * group and others nothing (as ssh and libpq's passfile demand). The check is on the open
 * descriptor (fstat), so what is checked is what is read.
 */
#include "apbot/secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apbot/error.h"
#include "apbot/mem.h"

extern char **environ;

static const struct {
    const char *env;       /* APBOT_ERP_PASSWORD */
    const char *file;      /* APBOT_ERP_PASSWORD_FILE */
    const char *cred;      /* erp-password */
    const char *from_cred; /* where it came from, for messages */
} secret_names[SECRET__COUNT] = {
    [SECRET_ERP_USER] = {"APBOT_ERP_USER", "APBOT_ERP_USER_FILE", "erp-user",
                         "$CREDENTIALS_DIRECTORY/erp-user"},
    [SECRET_ERP_PASSWORD] = {"APBOT_ERP_PASSWORD", "APBOT_ERP_PASSWORD_FILE", "erp-password",
                             "$CREDENTIALS_DIRECTORY/erp-password"},
    [SECRET_REVIEW_PASSWORD] = {"APBOT_REVIEW_PASSWORD", "APBOT_REVIEW_PASSWORD_FILE",
                                "review-password", "$CREDENTIALS_DIRECTORY/review-password"},
    [SECRET_SMTP_USER] = {"APBOT_SMTP_USER", "APBOT_SMTP_USER_FILE", "smtp-user",
                          "$CREDENTIALS_DIRECTORY/smtp-user"},
    [SECRET_SMTP_PASSWORD] = {"APBOT_SMTP_PASSWORD", "APBOT_SMTP_PASSWORD_FILE", "smtp-password",
                              "$CREDENTIALS_DIRECTORY/smtp-password"},
};

/* What secret_load_all kept. */
static struct {
    bool loaded;
    char *value[SECRET__COUNT];
} secret_kept;

const char *secret_env_name(enum secret_id id)
{
    return (unsigned)id < SECRET__COUNT ? secret_names[id].env : "";
}

const char *secret_cred_name(enum secret_id id)
{
    return (unsigned)id < SECRET__COUNT ? secret_names[id].cred : "";
}

void secret_free(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        free(s);
    }
}

int secret_open_private(const char *path, bool nofollow, const char *what, int *ret_fd, char *err,
                        size_t errlen)
{
    struct stat st;
    /* O_NONBLOCK: a FIFO is refused, not waited on (a regular file reads as without it) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (nofollow ? O_NOFOLLOW : 0));

    if (fd < 0)
        return apbot_fail(err, errlen, APBOT_E_IO, "%s: %.200s: %s", what, path, strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return apbot_fail(err, errlen, APBOT_E_INVAL, "%s: %.200s: not a regular file", what, path);
    }
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        close(fd);
        return apbot_fail(err, errlen, APBOT_E_INVAL,
                          "%s: %.200s: its group or others may read it (mode %03o); a secret "
                          "file must be 0600 or 0400 (chmod 600 %.200s)",
                          what, path, (unsigned)(st.st_mode & 0777), path);
    }
    *ret_fd = fd;
    return APBOT_OK;
}

/* Reads the secret file at path (shown as `what` in messages). *ret: heap, NULL when empty. */
static int secret_read_file(const char *path, bool nofollow, const char *what, char **ret,
                            char *err, size_t errlen)
{
    char buf[SECRET_FILE_MAX + 2];
    size_t n = 0;
    int fd = -1;
    int rc = secret_open_private(path, nofollow, what, &fd, err, errlen);

    *ret = NULL;
    if (rc != APBOT_OK)
        return rc;
    for (;;) {
        ssize_t r = read(fd, buf + n, sizeof(buf) - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            explicit_bzero(buf, sizeof(buf));
            return apbot_fail(err, errlen, APBOT_E_IO, "%s: %.200s: %s", what, path, strerror(e));
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > SECRET_FILE_MAX) {
            close(fd);
            explicit_bzero(buf, sizeof(buf));
            return apbot_fail(err, errlen, APBOT_E_LIMIT, "%s: %.200s: longer than %d bytes", what,
                              path, SECRET_FILE_MAX);
        }
    }
    close(fd);
    buf[n] = '\0';
    if (memchr(buf, '\0', n)) {
        explicit_bzero(buf, sizeof(buf));
        return apbot_fail(err, errlen, APBOT_E_INVAL, "%s: %.200s: holds a NUL byte", what, path);
    }
    /* one trailing line break, as `echo` or an editor leaves it */
    if (n > 0 && buf[n - 1] == '\n')
        buf[--n] = '\0';
    if (n > 0 && buf[n - 1] == '\r')
        buf[--n] = '\0';
    if (n > 0)
        *ret = apbot_xstrdup(buf);
    explicit_bzero(buf, sizeof(buf));
    return APBOT_OK;
}

int secret_resolve(enum secret_id id, char **ret, const char **ret_from, char *err, size_t errlen)
{
    *ret = NULL;
    if (ret_from)
        *ret_from = NULL;
    if ((unsigned)id >= SECRET__COUNT)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "no such secret");
    const char *plain = getenv(secret_names[id].env);
    const char *file = getenv(secret_names[id].file);
    int rc;

    if (file && *file) {
        if (plain && *plain)
            return apbot_fail(err, errlen, APBOT_E_INVAL,
                              "both %s and %s are set: give the secret one way",
                              secret_names[id].env, secret_names[id].file);
        rc = secret_read_file(file, false, secret_names[id].file, ret, err, errlen);
        if (rc == APBOT_OK && ret_from)
            *ret_from = secret_names[id].file;
        return rc;
    }
    const char *dir = getenv("CREDENTIALS_DIRECTORY");
    if (dir && *dir) {
        char path[4096];
        int w = snprintf(path, sizeof(path), "%s/%s", dir, secret_names[id].cred);
        if (w > 0 && (size_t)w < sizeof(path) && access(path, F_OK) == 0) {
            rc = secret_read_file(path, true, secret_names[id].from_cred, ret, err, errlen);
            if (rc == APBOT_OK && ret_from)
                *ret_from = secret_names[id].from_cred;
            return rc;
        }
    }
    if (plain && *plain) {
        *ret = apbot_xstrdup(plain);
        if (ret_from)
            *ret_from = secret_names[id].env;
    }
    return APBOT_OK;
}

int secret_load_all(char *err, size_t errlen)
{
    char *v[SECRET__COUNT] = {0};

    for (int i = 0; i < SECRET__COUNT; i++) {
        int rc = secret_resolve((enum secret_id)i, &v[i], NULL, err, errlen);
        if (rc != APBOT_OK) {
            for (int k = 0; k < i; k++)
                secret_free(v[k]);
            return rc;
        }
    }
    secret_forget_all();
    for (int i = 0; i < SECRET__COUNT; i++) {
        secret_kept.value[i] = v[i];
        /* out of the environment: children inherit nothing, getenv no longer sees it */
        char *e = getenv(secret_names[i].env);
        if (e)
            explicit_bzero(e, strlen(e));
        unsetenv(secret_names[i].env);
    }
    secret_kept.loaded = true;
    return APBOT_OK;
}

char *secret_dup(enum secret_id id)
{
    if ((unsigned)id >= SECRET__COUNT)
        return NULL;
    if (secret_kept.loaded)
        return secret_kept.value[id] ? apbot_xstrdup(secret_kept.value[id]) : NULL;
    char *v = NULL;
    char err[256];
    if (secret_resolve(id, &v, NULL, err, sizeof(err)) != APBOT_OK)
        return NULL;
    return v;
}

void secret_forget_all(void)
{
    for (int i = 0; i < SECRET__COUNT; i++) {
        secret_free(secret_kept.value[i]);
        secret_kept.value[i] = NULL;
    }
    secret_kept.loaded = false;
}

void secret_scrub_child(void)
{
    for (char **e = environ; e && *e; e++)
        explicit_bzero(*e, strlen(*e));
    (void)clearenv();
    for (int i = 0; i < SECRET__COUNT; i++)
        if (secret_kept.value[i])
            explicit_bzero(secret_kept.value[i], strlen(secret_kept.value[i]));
}
