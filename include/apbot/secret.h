/*
 * secret.h - the credentials apbot is given, the ways services receive them.
 *
 * Each secret has an environment name (APBOT_ERP_PASSWORD) and a credential name
 * (erp-password). Where it comes from, the first that is given wins:
 *   1. NAME_FILE: the path of a file holding it (APBOT_ERP_PASSWORD_FILE);
 *   2. $CREDENTIALS_DIRECTORY/CREDENTIAL: what systemd's LoadCredential= hands the service;
 *   3. NAME itself in the environment.
 * NAME and NAME_FILE both set is an error (which one was meant?). A file must be a regular
 * file that neither its group nor others may read (0600 or 0400), at most SECRET_FILE_MAX
 * bytes, no NUL byte; one trailing line break is dropped; an empty secret is no secret.
 *
 * secret_load_all() resolves every secret once, at the start of a command, keeps them in
 * memory and removes NAME from the environment, so that no child process inherits it and it
 * is no longer in getenv's view. secret_dup() answers from what was loaded; before a load (the
 * tests) it resolves on each call.
 */
#ifndef APBOT_SECRET_H
#define APBOT_SECRET_H

#include <stdbool.h>
#include <stddef.h>

#define SECRET_FILE_MAX 4096

enum secret_id {
    SECRET_ERP_USER = 0,
    SECRET_ERP_PASSWORD,
    SECRET_REVIEW_PASSWORD,
    SECRET_SMTP_USER,
    SECRET_SMTP_PASSWORD,
    SECRET__COUNT
};

/* The environment name (APBOT_ERP_PASSWORD) and the credential name (erp-password) of id. */
const char *secret_env_name(enum secret_id id);
const char *secret_cred_name(enum secret_id id);

/*
 * Resolves one secret now (see above). *ret: a heap copy (wipe and free it with
 * secret_free), or NULL when none is given; *ret_from (may be NULL): where it came from, a
 * static text ("APBOT_ERP_PASSWORD_FILE", "$CREDENTIALS_DIRECTORY/erp-password",
 * "APBOT_ERP_PASSWORD") or NULL. APBOT_OK, or an error naming the variable or the file and
 * why (unreadable, readable by others, too long, both forms set) - never the secret.
 */
int secret_resolve(enum secret_id id, char **ret, const char **ret_from, char *err, size_t errlen);

/* Resolves every secret, keeps them and removes their plain variables from the environment.
 * Call once, before threads start. APBOT_OK or the first error. */
int secret_load_all(char *err, size_t errlen);

/* A heap copy of the secret (free it with secret_free), NULL when none: of what
 * secret_load_all kept, or, before it (the tests), resolved now (an error counts as none).
 * Safe from any thread once secret_load_all has returned. */
char *secret_dup(enum secret_id id);

/* Wipes and forgets what secret_load_all kept (at exit). */
void secret_forget_all(void);

/*
 * Opens path for reading under the rule every secret file follows (and the reviewers file,
 * reviewers.h): a regular file (a FIFO is refused without waiting) whose mode gives its group
 * and others nothing. nofollow: a final symbolic link is refused. what names the file in
 * messages. On success *ret_fd is an open descriptor (O_CLOEXEC) the caller closes; otherwise
 * APBOT_E_IO (cannot open) or APBOT_E_INVAL (not a regular file, readable by others) with what,
 * the path and why in err, and *ret_fd untouched.
 */
int secret_open_private(const char *path, bool nofollow, const char *what, int *ret_fd, char *err,
                        size_t errlen);

/* Wipes s (NUL-terminated) and frees it. NULL is fine. */
void secret_free(char *s);

/*
 * For a child process that must hold no secret (the PDF reader): wipes the bytes of every
 * variable of the environment and empties it, and wipes what secret_load_all kept. Call in
 * the child only, right after fork.
 */
void secret_scrub_child(void);

#endif
