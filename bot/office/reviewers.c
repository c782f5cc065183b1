/*
 * reviewers.c - the reviewers file (reviewers.h): parsing and writing it, the lock that
 * serialises its changes, and the passwords' hashes through libxcrypt.
 *
 * The parser is pure and strict: a line it cannot read stops the whole file with its number,
 * since a half-read list of who may decide is worse than none. Writing is whole-file (a
 * temporary file renamed into place), so a reader never sees half of it; the review page
 * reads it again when it changes (serve_auth.c).
 */
#include "apbot/reviewers.h"

#include <crypt.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "apbot/buf.h"
#include "apbot/invoice.h"
#include "apbot/mem.h"
#include "apbot/secret.h"

#define REVIEWERS_BCRYPT_COST_MIN 10 /* 2^10 rounds; fewer make guessing cheap */

static const char *const role_names[REVIEWERS_ROLE__COUNT] = {
    [REVIEWERS_VIEWER] = "viewer",
    [REVIEWERS_REVIEWER] = "reviewer",
};

const char *reviewers_role_name(enum reviewers_role role)
{
    return (unsigned)role < REVIEWERS_ROLE__COUNT ? role_names[role] : "invalid";
}

enum reviewers_role reviewers_role_from_name(const char *name)
{
    for (int i = 0; name && i < REVIEWERS_ROLE__COUNT; i++)
        if (strcmp(name, role_names[i]) == 0)
            return (enum reviewers_role)i;
    return REVIEWERS_ROLE__COUNT;
}

const char *reviewer_display(const struct reviewer *r)
{
    return r->display[0] ? r->display : r->login;
}

/* ---- pure checks ------------------------------------------------------------------------ */

bool reviewers_display_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (!s || n > REVIEWERS_DISPLAY_MAX)
        return false;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7F)
            return false;
    return invoice_utf8_valid(s);
}

bool reviewers_password_ok(const char *pw, char *why, size_t len)
{
    size_t n = pw ? strlen(pw) : 0;
    if (n < REVIEWERS_PASSWORD_MIN) {
        snprintf(why, len, "a password needs %d characters at least", REVIEWERS_PASSWORD_MIN);
        return false;
    }
    if (n > REVIEWERS_PASSWORD_MAX) {
        snprintf(why, len, "a password has %d bytes at most", REVIEWERS_PASSWORD_MAX);
        return false;
    }
    for (const unsigned char *p = (const unsigned char *)pw; *p; p++) {
        if (*p < 0x20 || *p == 0x7F) {
            snprintf(why, len, "a password holds no control characters");
            return false;
        }
    }
    return true;
}

/* The characters of crypt(3)'s base64 and of its parameter fields. */
static bool hash_chars_ok(const char *s)
{
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '/' || c == '$' || c == '='))
            return false;
    }
    return true;
}

bool reviewers_hash_ok(const char *hash, char *why, size_t len)
{
    static const char *const prefixes[] = {"$y$", "$gy$", "$7$", "$2b$", "$2y$"};
    bool known = false;

    if (!hash || !*hash) {
        snprintf(why, len, "no password hash");
        return false;
    }
    if (strcmp(hash, REVIEWERS_NO_PASSWORD) == 0)
        return true;
    if (strlen(hash) > REVIEWERS_HASH_MAX || !hash_chars_ok(hash)) {
        snprintf(why, len, "the password hash is not a crypt(3) hash");
        return false;
    }
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
        if (strncmp(hash, prefixes[i], strlen(prefixes[i])) == 0)
            known = true;
    if (!known) {
        snprintf(why, len,
                 "the password hash is not yescrypt ($y$), scrypt ($7$) or bcrypt ($2b$): a "
                 "plain or fast hash is refused (apbot reviewer passwd sets a new one)");
        return false;
    }
    if (strncmp(hash, "$2", 2) == 0) {
        /* $2b$NN$: the cost, two digits */
        const char *c = hash + 4;
        if (c[0] < '0' || c[0] > '9' || c[1] < '0' || c[1] > '9' || c[2] != '$' ||
            strlen(c + 3) != 53) {
            snprintf(why, len, "the bcrypt hash is malformed");
            return false;
        }
        if ((c[0] - '0') * 10 + (c[1] - '0') < REVIEWERS_BCRYPT_COST_MIN) {
            snprintf(why, len, "the bcrypt hash's cost is below %d: too fast to be safe",
                     REVIEWERS_BCRYPT_COST_MIN);
            return false;
        }
    }
    if (crypt_checksalt(hash) != CRYPT_SALT_OK) {
        snprintf(why, len, "libxcrypt does not accept this password hash");
        return false;
    }
    return true;
}

/* ---- parsing and writing ---------------------------------------------------------------- */

void reviewers_done(struct reviewers *r)
{
    if (!r)
        return;
    if (r->v)
        explicit_bzero(r->v, r->cap * sizeof(*r->v));
    free(r->v);
    memset(r, 0, sizeof(*r));
}

static bool same_login(const char *a, const char *b)
{
    return strcasecmp(a, b) == 0;
}

struct reviewer *reviewers_find_mut(struct reviewers *r, const char *login)
{
    for (size_t i = 0; login && i < r->n; i++)
        if (same_login(r->v[i].login, login))
            return &r->v[i];
    return NULL;
}

const struct reviewer *reviewers_find(const struct reviewers *r, const char *login)
{
    return reviewers_find_mut((struct reviewers *)r, login);
}

/* Is p a line the file can hold? why says why not. */
static bool reviewer_ok(const struct reviewer *p, char *why, size_t len)
{
    if (!review_name_ok(p->login)) {
        snprintf(why, len, "the login is not a name (1..%d of letters, digits, . _ - @)",
                 REVIEW_NAME_MAX);
        return false;
    }
    if ((unsigned)p->role >= REVIEWERS_ROLE__COUNT) {
        snprintf(why, len, "the role is neither viewer nor reviewer");
        return false;
    }
    if (!reviewers_display_ok(p->display)) {
        snprintf(why, len, "the display name is longer than %d bytes or not printable UTF-8",
                 REVIEWERS_DISPLAY_MAX);
        return false;
    }
    return reviewers_hash_ok(p->hash, why, len);
}

int reviewers_add(struct reviewers *r, const struct reviewer *p, char *err, size_t errlen)
{
    char why[256];

    if (!reviewer_ok(p, why, sizeof(why)))
        return apbot_fail(err, errlen, APBOT_E_INVAL, "%s", why);
    if (reviewers_find(r, p->login))
        return apbot_fail(err, errlen, APBOT_E_CONFLICT, "%s is already in the file", p->login);
    if (apbot_grow((void **)&r->v, &r->cap, r->n + 1, sizeof(*r->v), REVIEWERS_MAX) != APBOT_OK)
        return apbot_fail(err, errlen, APBOT_E_LIMIT, "more than %d reviewers", REVIEWERS_MAX);
    r->v[r->n++] = *p;
    return APBOT_OK;
}

int reviewers_remove(struct reviewers *r, const char *login)
{
    struct reviewer *p = reviewers_find_mut(r, login);
    size_t i;

    if (!p)
        return APBOT_E_NOTFOUND;
    i = (size_t)(p - r->v);
    memmove(&r->v[i], &r->v[i + 1], (r->n - i - 1) * sizeof(*r->v));
    r->n--;
    explicit_bzero(&r->v[r->n], sizeof(r->v[r->n]));
    return APBOT_OK;
}

/* Copies the field [s, s+n) into dst (cap bytes with the NUL); false when it does not fit. */
static bool field_copy(char *dst, size_t cap, const char *s, size_t n)
{
    if (n >= cap)
        return false;
    memcpy(dst, s, n);
    dst[n] = '\0';
    return true;
}

/* Parses one line (n bytes, no line break) into p. False with why. */
static bool parse_line(const char *line, size_t n, struct reviewer *p, char *why, size_t len)
{
    const char *f[3];
    const char *end = line + n, *s = line;
    char role[16];

    memset(p, 0, sizeof(*p));
    for (int i = 0; i < 3; i++) {
        const char *colon = memchr(s, ':', (size_t)(end - s));
        if (!colon) {
            snprintf(why, len, "want LOGIN:ROLE:HASH:DISPLAY NAME");
            return false;
        }
        f[i] = s;
        s = colon + 1;
    }
    if (memchr(line, '\0', n)) {
        snprintf(why, len, "a NUL byte");
        return false;
    }
    if (!field_copy(p->login, sizeof(p->login), f[0], (size_t)(f[1] - f[0] - 1)) ||
        !field_copy(role, sizeof(role), f[1], (size_t)(f[2] - f[1] - 1)) ||
        !field_copy(p->hash, sizeof(p->hash), f[2], (size_t)(s - f[2] - 1)) ||
        !field_copy(p->display, sizeof(p->display), s, (size_t)(end - s))) {
        snprintf(why, len, "a field is too long");
        return false;
    }
    p->role = reviewers_role_from_name(role);
    return reviewer_ok(p, why, len);
}

/* Is the line [s, s+n) blank or a comment? */
static bool line_skipped(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    return i == n || s[i] == '#';
}

int reviewers_parse(const char *text, size_t len, const char *path, struct reviewers *ret,
                    char *err, size_t errlen)
{
    struct reviewers r = {0};
    const char *p = text, *end = text + len;
    size_t lineno = 0;
    char why[256];

    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *next = nl ? nl + 1 : end;
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        struct reviewer one;
        int rc;

        lineno++;
        if (n > 0 && p[n - 1] == '\r')
            n--;
        if (line_skipped(p, n)) {
            p = next;
            continue;
        }
        if (!parse_line(p, n, &one, why, sizeof(why))) {
            reviewers_done(&r);
            explicit_bzero(&one, sizeof(one));
            return apbot_fail(err, errlen, APBOT_E_INVAL, "%s:%zu: %s", path, lineno, why);
        }
        rc = reviewers_add(&r, &one, why, sizeof(why));
        explicit_bzero(&one, sizeof(one));
        if (rc != APBOT_OK) {
            reviewers_done(&r);
            return apbot_fail(err, errlen, rc == APBOT_E_LIMIT ? APBOT_E_LIMIT : APBOT_E_INVAL,
                              "%s:%zu: %s", path, lineno,
                              rc == APBOT_E_CONFLICT ? "the login is on an earlier line too" : why);
        }
        p = next;
    }
    *ret = r;
    return APBOT_OK;
}

char *reviewers_format(const struct reviewers *r)
{
    struct apbot_buf b;

    apbot_buf_init(&b, REVIEWERS_FILE_MAX * 2);
    if (apbot_buf_adds(&b, "# apbot reviewers: LOGIN:ROLE:HASH:DISPLAY NAME, one person a line.\n"
                           "# Change it with apbot reviewer add|passwd|set|remove; comments are "
                           "not kept.\n") != APBOT_OK)
        abort(); /* constant text far below the bound */
    for (size_t i = 0; i < r->n; i++) {
        const struct reviewer *p = &r->v[i];
        if (apbot_buf_addf(&b, "%s:%s:%s:%s\n", p->login, reviewers_role_name(p->role), p->hash,
                           p->display) != APBOT_OK)
            abort(); /* REVIEWERS_MAX lines of bounded fields fit */
    }
    return apbot_buf_steal(&b, NULL);
}

int reviewers_load(const char *path, bool missing_ok, struct reviewers *ret, char *err,
                   size_t errlen)
{
    struct apbot_buf b;
    char chunk[8192];
    int fd = -1, rc;

    memset(ret, 0, sizeof(*ret));
    if (missing_ok && access(path, F_OK) != 0 && errno == ENOENT)
        return APBOT_OK;
    rc = secret_open_private(path, false, "the reviewers file", &fd, err, errlen);
    if (rc != APBOT_OK)
        return access(path, F_OK) != 0 && errno == ENOENT ? APBOT_E_NOTFOUND : rc;
    apbot_buf_init(&b, REVIEWERS_FILE_MAX);
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = apbot_fail(err, errlen, APBOT_E_IO, "the reviewers file: %.200s: %s", path,
                            strerror(errno));
            break;
        }
        if (n == 0)
            break;
        if (apbot_buf_add(&b, chunk, (size_t)n) != APBOT_OK) {
            rc = apbot_fail(err, errlen, APBOT_E_LIMIT,
                            "the reviewers file: %.200s: longer than %d bytes", path,
                            REVIEWERS_FILE_MAX);
            break;
        }
    }
    close(fd);
    explicit_bzero(chunk, sizeof(chunk));
    if (rc == APBOT_OK)
        rc = reviewers_parse(apbot_buf_str(&b), b.len, path, ret, err, errlen);
    apbot_buf_wipe_done(&b);
    return rc;
}

/* The directory of path (heap). */
static char *dir_of(const char *path)
{
    char *copy = apbot_xstrdup(path);
    char *d = apbot_xstrdup(dirname(copy));
    free(copy);
    return d;
}

/* Writes all of data to fd. */
static int write_all(int fd, const char *data, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, data, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        data += w;
        n -= (size_t)w;
    }
    return 0;
}

int reviewers_save(const char *path, const struct reviewers *r, char *err, size_t errlen)
{
    char tmp[4200];
    char *text = reviewers_format(r), *dir;
    struct stat old;
    unsigned char rnd[6];
    int fd, dfd, rc = APBOT_OK;

    if (getentropy(rnd, sizeof(rnd)) != 0)
        memset(rnd, 0, sizeof(rnd));
    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.%02x%02x%02x%02x%02x%02x.tmp", path, rnd[0], rnd[1],
                         rnd[2], rnd[3], rnd[4], rnd[5]) >= sizeof(tmp)) {
        secret_free(text);
        return apbot_fail(err, errlen, APBOT_E_INVAL, "the reviewers file's path is too long");
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = apbot_fail(err, errlen, APBOT_E_IO, "%.200s: %s", tmp, strerror(errno));
        secret_free(text);
        return rc;
    }
    /* the new file keeps the old one's owner and group: root changing the file of the user
     * apbot serve runs as must not take it away from that user */
    if (stat(path, &old) == 0 && fchown(fd, old.st_uid, old.st_gid) != 0)
        rc = apbot_fail(err, errlen, APBOT_E_IO,
                        "%.200s: cannot keep its owner (uid %u): change it as its owner or as "
                        "root",
                        path, (unsigned)old.st_uid);
    else if (fchmod(fd, 0600) != 0 || write_all(fd, text, strlen(text)) != 0 || fsync(fd) != 0)
        rc = apbot_fail(err, errlen, APBOT_E_IO, "%.200s: %s", tmp, strerror(errno));
    if (close(fd) != 0 && rc == APBOT_OK)
        rc = apbot_fail(err, errlen, APBOT_E_IO, "%.200s: %s", tmp, strerror(errno));
    secret_free(text);
    if (rc == APBOT_OK && rename(tmp, path) != 0)
        rc = apbot_fail(err, errlen, APBOT_E_IO, "%.200s: %s", path, strerror(errno));
    if (rc != APBOT_OK) {
        unlink(tmp);
        return rc;
    }
    /* the rename itself durable */
    dir = dir_of(path);
    dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    free(dir);
    return APBOT_OK;
}

int reviewers_lock(const char *path, int wait_ms, int *ret_fd, char *err, size_t errlen)
{
    char *dir = dir_of(path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (fd < 0) {
        int rc = apbot_fail(err, errlen, APBOT_E_IO, "%.200s: %s", dir, strerror(errno));
        free(dir);
        return rc;
    }
    for (int waited = 0; flock(fd, LOCK_EX | LOCK_NB) != 0; waited += 50) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        if ((errno != EWOULDBLOCK && errno != EINTR) || waited >= wait_ms) {
            int rc = apbot_fail(err, errlen, APBOT_E_BUSY,
                                "%.200s: another apbot reviewer is changing the file", dir);
            close(fd);
            free(dir);
            return rc;
        }
        nanosleep(&ts, NULL);
    }
    free(dir);
    *ret_fd = fd;
    return APBOT_OK;
}

void reviewers_unlock(int fd)
{
    if (fd >= 0)
        close(fd); /* releases the lock */
}

/* ---- passwords -------------------------------------------------------------------------- */

int reviewers_hash_password(const char *password, char *ret, size_t retlen, char *err,
                            size_t errlen)
{
    char setting[CRYPT_GENSALT_OUTPUT_SIZE];
    struct crypt_data *cd;
    const char *h;
    int rc = APBOT_OK;

    /* NULL random bytes: libxcrypt takes them from the kernel */
    if (!crypt_gensalt_rn("$y$", 0, NULL, 0, setting, (int)sizeof(setting)) || setting[0] != '$')
        return apbot_fail(err, errlen, APBOT_E_IO, "libxcrypt cannot make a yescrypt salt");
    cd = apbot_xcalloc(1, sizeof(*cd));
    h = crypt_r(password, setting, cd);
    if (!h || h[0] != '$' || strlen(h) >= retlen || strlen(h) > REVIEWERS_HASH_MAX)
        rc = apbot_fail(err, errlen, APBOT_E_IO, "libxcrypt cannot hash the password");
    else
        snprintf(ret, retlen, "%s", h);
    explicit_bzero(cd, sizeof(*cd));
    free(cd);
    return rc;
}

bool reviewers_verify(const char *hash, const char *password)
{
    struct crypt_data *cd;
    const char *h;
    char why[256];
    bool ok = false;

    if (!hash || !password || strcmp(hash, REVIEWERS_NO_PASSWORD) == 0 ||
        !reviewers_hash_ok(hash, why, sizeof(why)))
        return false;
    cd = apbot_xcalloc(1, sizeof(*cd));
    h = crypt_r(password, hash, cd);
    /* a failure is "*0" or "*1": never equal to a hash that passed reviewers_hash_ok */
    if (h && strlen(h) == strlen(hash))
        ok = CRYPTO_memcmp(h, hash, strlen(hash)) == 0;
    explicit_bzero(cd, sizeof(*cd));
    free(cd);
    return ok;
}
