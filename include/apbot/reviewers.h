/*
 * reviewers.h - the people who may sign in to the review page (serve.h), and what each may do.
 *
 * The reviewers file holds one line per person:
 *
 *     LOGIN:ROLE:HASH:DISPLAY NAME
 *
 * LOGIN is an operator name (review_name_ok: letters, digits, . _ - @), unique without regard
 * to ASCII case (a company's login proxy may send "Alice" for "alice"); ROLE is `viewer` (sees
 * everything, decides nothing) or `reviewer` (decides); HASH is the password in a slow, salted
 * crypt(3) format libxcrypt verifies - yescrypt (`$y$`, what apbot writes), gost-yescrypt
 * (`$gy$`), scrypt (`$7$`) or bcrypt (`$2b$`/`$2y$`, cost 10 or more) - or `*` for a person who
 * signs in only through the login proxy; DISPLAY NAME is the rest of the line (it may hold
 * colons; empty: the login). Blank lines and lines starting with `#` are comments. The file
 * follows the rule of secret files (secret.h): a regular file neither group nor others may
 * read, or it is refused; `apbot reviewer` rewrites it whole (a temporary file renamed into
 * place, mode 0600), under a lock on its directory, and does not keep comments.
 *
 * Passwords never appear in the file, in messages or in logs: only their hashes, computed and
 * checked by libxcrypt's crypt_r, compared in constant time.
 */
#ifndef APBOT_REVIEWERS_H
#define APBOT_REVIEWERS_H

#include <stdbool.h>
#include <stddef.h>

#include "apbot/error.h"
#include "apbot/review.h"

#define REVIEWERS_FILE_MAX (1024 * 1024) /* bytes of a reviewers file at most */
#define REVIEWERS_MAX 10000              /* people in one file at most */
#define REVIEWERS_DISPLAY_MAX 100        /* bytes of a display name */
#define REVIEWERS_HASH_MAX 256           /* bytes of a password hash */
#define REVIEWERS_PASSWORD_MIN 12        /* bytes of a password at least */
#define REVIEWERS_PASSWORD_MAX 256       /* and at most */
#define REVIEWERS_NO_PASSWORD "*"        /* the hash of a person who signs in by proxy only */

/* If you add a role: its name in reviewers.c and its row in test_reviewers. */
enum reviewers_role {
    REVIEWERS_VIEWER = 0, /* sees every page, decides nothing */
    REVIEWERS_REVIEWER,   /* decides: posted, requeue, reject */
    REVIEWERS_ROLE__COUNT
};
/* "viewer", "reviewer"; "invalid" for bad values. */
const char *reviewers_role_name(enum reviewers_role role);
/* Parses a role's name; REVIEWERS_ROLE__COUNT when unknown. */
enum reviewers_role reviewers_role_from_name(const char *name);

struct reviewer {
    char login[REVIEW_NAME_MAX + 1];
    char display[REVIEWERS_DISPLAY_MAX + 1]; /* "" means: the login */
    enum reviewers_role role;
    char hash[REVIEWERS_HASH_MAX + 1]; /* crypt(3) hash, or REVIEWERS_NO_PASSWORD */
};

/* A reviewers file in memory, in the file's order. Hands off the fields but v and n. */
struct reviewers {
    struct reviewer *v;
    size_t n, cap;
};

/* The display name a person is shown and audited with: the display name, or the login. */
const char *reviewer_display(const struct reviewer *r);

/*
 * Pure: parses the text of a reviewers file (len bytes; path names it in messages). Returns
 * APBOT_OK with *ret filled (free with reviewers_done), or APBOT_E_INVAL naming the line and
 * why ("FILE:LINE: ..."), APBOT_E_LIMIT past REVIEWERS_MAX people; *ret is then empty.
 */
int reviewers_parse(const char *text, size_t len, const char *path, struct reviewers *ret,
                    char *err, size_t errlen) APBOT_MUST_USE;

/* The file's text for r: a header comment, then one line per person (heap; cannot fail). */
char *reviewers_format(const struct reviewers *r);

/*
 * Reads and parses the reviewers file at path: a regular file that group and others cannot
 * read (secret_open_private), at most REVIEWERS_FILE_MAX bytes. A file that does not exist is
 * an empty list when missing_ok, APBOT_E_NOTFOUND otherwise. Errors name the file.
 */
int reviewers_load(const char *path, bool missing_ok, struct reviewers *ret, char *err,
                   size_t errlen) APBOT_MUST_USE;

/*
 * Writes r to path whole: a new temporary file beside it (O_EXCL, mode 0600, the old file's
 * owner and group, written and synced), renamed over path, the directory synced. APBOT_E_IO
 * when the owner cannot be kept (another user's file, changed by someone but root). Take
 * reviewers_lock first.
 */
int reviewers_save(const char *path, const struct reviewers *r, char *err,
                   size_t errlen) APBOT_MUST_USE;

/*
 * Serialises the changes to the file at path: an exclusive lock on its directory, waited for
 * wait_ms at most (APBOT_E_BUSY then). *ret_fd: release it with reviewers_unlock.
 */
int reviewers_lock(const char *path, int wait_ms, int *ret_fd, char *err,
                   size_t errlen) APBOT_MUST_USE;
void reviewers_unlock(int fd);

/* NULL is fine; r is empty afterwards. */
void reviewers_done(struct reviewers *r);

/* The person whose login is login (ASCII case ignored), or NULL. */
const struct reviewer *reviewers_find(const struct reviewers *r, const char *login);
struct reviewer *reviewers_find_mut(struct reviewers *r, const char *login);

/* Adds a person (a copy of p). APBOT_E_CONFLICT when the login is taken (case ignored),
 * APBOT_E_LIMIT past REVIEWERS_MAX, APBOT_E_INVAL when p is not a valid line. */
int reviewers_add(struct reviewers *r, const struct reviewer *p, char *err,
                  size_t errlen) APBOT_MUST_USE;
/* Removes the person with this login; APBOT_E_NOTFOUND when there is none. */
int reviewers_remove(struct reviewers *r, const char *login) APBOT_MUST_USE;

/* Pure: is hash one apbot accepts (see above; REVIEWERS_NO_PASSWORD too)? why says why not. */
bool reviewers_hash_ok(const char *hash, char *why, size_t len);
/* Pure: display names: 0..REVIEWERS_DISPLAY_MAX bytes, valid UTF-8, no control characters. */
bool reviewers_display_ok(const char *display);
/* Pure: may this be a password (REVIEWERS_PASSWORD_MIN..MAX bytes, no control characters)? */
bool reviewers_password_ok(const char *password, char *why, size_t len);

/*
 * A new yescrypt hash of password with a fresh random salt (libxcrypt's default cost), into
 * ret (REVIEWERS_HASH_MAX + 1 bytes). APBOT_E_IO when libxcrypt cannot make one.
 */
int reviewers_hash_password(const char *password, char *ret, size_t retlen, char *err,
                            size_t errlen) APBOT_MUST_USE;

/*
 * Does password match hash? crypt_r under the hash's own setting, the result compared in
 * constant time. False for REVIEWERS_NO_PASSWORD, a hash apbot does not accept, or NULL.
 */
bool reviewers_verify(const char *hash, const char *password);

#endif
