/*
 * serve_auth.c - who is asking the review page (serve-int.h), and what they may do.
 *
 * Three ways to run it (enum serve_mode): without anyone to sign in (loopback only; everyone
 * may look and nobody may decide), with one shared password (a small shop: a name and that
 * password at sign-in; the audit says the name was typed), or with the reviewers file
 * (reviewers.h: each person's own password and role), where a company's login proxy may also
 * vouch for the person in a header - believed only from the addresses listed as trusted
 * proxies, and even then the role comes from the file.
 *
 * Sessions live here, on the server: the cookie holds a random id (its SHA-256 is what the
 * table keeps), made anew at every sign-in, dropped at sign-out, ended after an idle time and
 * an absolute time, and when the person is removed from the file or gets a new password (a
 * new role or display name holds from the next request). The table is bounded; so is the
 * throttle on failed sign-ins (per name and per address), and so is the number of password
 * hashes computed at once. Before sign-in a visitor has a signed cookie the server keeps
 * nothing for: its CSRF token guards the sign-in form. Every sign-in, failed or not, every
 * sign-out and every forged proxy header is logged, never a password.
 */
#include "office/serve-int.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "apbot/clock.h"
#include "apbot/mem.h"
#include "apbot/secret.h"
#include "apbot/text.h"
#include "base/logline.h"
#include "base/unittest.h"

#define SESSION_COOKIE "apbot_session" /* a signed-in session's id */
#define VISITOR_COOKIE "apbot_visit"   /* a visitor's signed random value */
#define SESSIONS_MAX 256               /* signed-in sessions the server holds at most */
#define SESSIONS_PER_LOGIN 8           /* of one person; a ninth sign-in ends their oldest */
#define THROTTLE_SLOTS 1024            /* names, and addresses, whose failures are counted */
#define THROTTLE_WINDOW_MS (15 * 60 * 1000)
#define THROTTLE_PER_NAME 5     /* failed sign-ins per name in the window */
#define THROTTLE_PER_ADDRESS 20 /* and per address */
#define HASHING_AT_ONCE 2       /* password hashes computed at the same time at most */
#define NEXT_MAX 512            /* bytes of the page to return to after sign-in */

struct auth_session {
    bool used;
    unsigned char id_sha[32]; /* SHA-256 of the cookie's value */
    struct serve_who who;
    unsigned char hash_tag[8];   /* of the person's password hash at sign-in */
    int64_t created_ms, seen_ms; /* CLOCK_BOOTTIME */
};

struct auth_throttle {
    bool used;
    char key[96]; /* a login (lower case) or an address */
    struct serve_throttle t;
};

struct serve_auth {
    pthread_mutex_t lock;
    sem_t hashing;
    struct auth_session sessions[SESSIONS_MAX];
    struct auth_throttle by_name[THROTTLE_SLOTS], by_addr[THROTTLE_SLOTS];
    struct reviewers rv; /* the reviewers file as last read (empty when unreadable) */
    struct stat rv_stat; /* what it was read from */
    bool rv_failed;      /* the last read failed: nobody signs in until it is fixed */
    char dummy_hash[REVIEWERS_HASH_MAX + 1]; /* checked for unknown names: same time spent */
};

/* ---- pure decisions --------------------------------------------------------------------- */

UNITTEST enum serve_session_state serve_session_check(int64_t now, int64_t created, int64_t seen,
                                                      int64_t idle_ms, int64_t max_ms)
{
    if (now - created >= max_ms || now < created)
        return SERVE_SESSION_EXPIRED;
    if (now - seen >= idle_ms)
        return SERVE_SESSION_IDLE;
    return SERVE_SESSION_LIVE;
}

UNITTEST int64_t serve_throttle_wait(const struct serve_throttle *t, int64_t now, unsigned max,
                                     int64_t window_ms)
{
    if (t->failures < max || now - t->since >= window_ms || now < t->since)
        return 0;
    return t->since + window_ms - now;
}

UNITTEST void serve_throttle_fail(struct serve_throttle *t, int64_t now, int64_t window_ms)
{
    if (t->failures == 0 || now - t->since >= window_ms || now < t->since) {
        t->since = now;
        t->failures = 0;
    }
    t->failures++;
}

enum serve_access serve_access_decide(enum serve_mode mode, bool known, enum reviewers_role role,
                                      enum serve_route route)
{
    switch (route) {
    case SERVE_ROUTE_ASSET:
    case SERVE_ROUTE_LOGIN:
    case SERVE_ROUTE_LOGOUT:
        return SERVE_ALLOW;
    case SERVE_ROUTE_VIEW:
        return mode == SERVE_MODE_OPEN || known ? SERVE_ALLOW : SERVE_SIGN_IN;
    case SERVE_ROUTE_DECIDE:
        return mode != SERVE_MODE_OPEN && known && role == REVIEWERS_REVIEWER ? SERVE_ALLOW
                                                                              : SERVE_FORBIDDEN;
    case SERVE_ROUTE_METRICS:
        return mode == SERVE_MODE_OPEN || known ? SERVE_ALLOW : SERVE_CREDENTIALS;
    }
    return SERVE_FORBIDDEN;
}

UNITTEST const char *serve_next_path(const char *next)
{
    size_t n = next ? strlen(next) : 0;
    if (n == 0 || n > NEXT_MAX || next[0] != '/' || next[1] == '/' || next[1] == '\\')
        return "/";
    for (const unsigned char *p = (const unsigned char *)next; *p; p++)
        if (*p <= 0x20 || *p >= 0x7F || *p == '\\')
            return "/";
    if (strncmp(next, "/login", 6) == 0 || strncmp(next, "/logout", 7) == 0)
        return "/";
    return next;
}

/* An address as the table compares it: IPv4 as itself, IPv4-mapped IPv6 as IPv4. */
static void addr_norm(int family, const unsigned char *a, struct serve_ip *ret)
{
    memset(ret, 0, sizeof(*ret));
    if (family == AF_INET6) {
        static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (memcmp(a, mapped, 12) == 0) {
            ret->family = AF_INET;
            memcpy(ret->a, a + 12, 4);
        } else {
            ret->family = AF_INET6;
            memcpy(ret->a, a, 16);
        }
    } else {
        ret->family = AF_INET;
        memcpy(ret->a, a, 4);
    }
}

/* Parses one address (IPv4, or IPv6 with or without brackets). */
static bool ip_parse(const char *s, size_t n, struct serve_ip *ret)
{
    char buf[64];
    unsigned char a[16];

    if (n >= 2 && s[0] == '[' && s[n - 1] == ']') {
        s++;
        n -= 2;
    }
    if (n == 0 || n >= sizeof(buf))
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (inet_pton(AF_INET, buf, a) == 1) {
        addr_norm(AF_INET, a, ret);
        return true;
    }
    if (inet_pton(AF_INET6, buf, a) == 1) {
        addr_norm(AF_INET6, a, ret);
        return true;
    }
    return false;
}

int serve_parse_proxies(const char *list, struct serve_proxies *ret, char *err, size_t errlen)
{
    struct serve_proxies p;
    const char *s = list;

    memset(&p, 0, sizeof(p));
    while (s && *s) {
        /* every element, the one after a trailing comma too */
        size_t n = strcspn(s, ",");
        size_t b = 0;
        while (b < n && s[b] == ' ')
            b++;
        while (n > b && s[n - 1] == ' ')
            n--;
        if (p.n == SERVE_PROXIES_MAX)
            return apbot_fail(err, errlen, APBOT_E_LIMIT, "--trusted-proxy: more than %d addresses",
                              SERVE_PROXIES_MAX);
        if (!ip_parse(s + b, n - b, &p.v[p.n]))
            return apbot_fail(err, errlen, APBOT_E_INVAL,
                              "--trusted-proxy: '%.*s' is not an IP address (names are not "
                              "trusted: DNS can say anything)",
                              (int)(n - b > 64 ? 64 : n - b), s + b);
        p.n++;
        s += strcspn(s, ",");
        if (*s != ',')
            break;
        s++;
        if (!*s)
            return apbot_fail(err, errlen, APBOT_E_INVAL, "--trusted-proxy: an empty address");
    }
    *ret = p;
    return APBOT_OK;
}

UNITTEST bool serve_ip_listed(const struct serve_proxies *list, const struct serve_ip *ip)
{
    for (size_t i = 0; i < list->n; i++)
        if (list->v[i].family == ip->family &&
            memcmp(list->v[i].a, ip->a, ip->family == AF_INET ? 4 : 16) == 0)
            return true;
    return false;
}

UNITTEST bool serve_forwarded_client(const char *xff, const struct serve_proxies *trusted,
                                     char *ret, size_t len)
{
    struct serve_ip ip;
    size_t end;
    int hops = 0;

    if (!xff || !*xff)
        return false;
    end = strlen(xff);
    /* From the right: each trusted proxy appended the address it was called from. The first
     * address that is not one of ours is the client; one that does not parse ends the walk
     * (the chain is not ours to read past it). */
    for (;;) {
        size_t start = end;
        while (start > 0 && xff[start - 1] != ',')
            start--;
        const char *a = xff + start;
        size_t n = end - start;
        while (n > 0 && *a == ' ')
            a++, n--;
        while (n > 0 && a[n - 1] == ' ')
            n--;
        if (!ip_parse(a, n, &ip))
            return false;
        if (start == 0 || ++hops >= SERVE_PROXIES_MAX || !trusted || !serve_ip_listed(trusted, &ip))
            break;
        end = start - 1; /* a trusted proxy in front of ours: read the address before it */
    }
    return inet_ntop(ip.family, ip.a, ret, (socklen_t)len) != NULL;
}

UNITTEST bool serve_header_name_ok(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > 64)
        return false;
    for (const char *p = name; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_'))
            return false;
    }
    return true;
}

UNITTEST bool serve_basic_parse(const char *authorization, char *user, size_t ulen, char *pw,
                                size_t pwlen)
{
    unsigned char decoded[1024];
    const char *p;
    char *colon;
    size_t len, ul;
    int n;
    bool ok = false;

    if (!authorization || strncasecmp(authorization, "Basic ", 6) != 0)
        return false;
    p = authorization + 6;
    while (*p == ' ')
        p++;
    len = strlen(p);
    if (len == 0 || len % 4 != 0 || len / 4 * 3 >= sizeof(decoded))
        return false;
    n = EVP_DecodeBlock(decoded, (const unsigned char *)p, (int)len);
    if (n < 0)
        return false;
    /* EVP_DecodeBlock counts the padding as zero bytes */
    if (p[len - 1] == '=')
        n--;
    if (len >= 2 && p[len - 2] == '=')
        n--;
    decoded[n] = '\0';
    colon = strchr((char *)decoded, ':');
    if (strlen((char *)decoded) == (size_t)n && colon) {
        ul = (size_t)(colon - (char *)decoded);
        if (ul < ulen && strlen(colon + 1) < pwlen) {
            memcpy(user, decoded, ul);
            user[ul] = '\0';
            snprintf(pw, pwlen, "%s", colon + 1);
            ok = true;
        }
    }
    OPENSSL_cleanse(decoded, sizeof(decoded));
    return ok;
}

/* ---- the log ---------------------------------------------------------------------------- */

void serve_log(struct serve_ctx *c, const char *level, const char *fmt, ...)
{
    FILE *log = c->s->opt->log;
    char line[1024], *esc;
    va_list ap;

    if (!log)
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (c->s->opt->log_json) {
        char out[1400];
        logline_start(out, sizeof(out), level, true);
        logline_kv(out, sizeof(out), "msg", line);
        fprintf(log, "%s}\n", out); /* one fprintf: a line never mixes with another's */
        fflush(log);
        return;
    }
    esc = text_escape(line, sizeof(line), TEXT_KEEP_BACKSLASH);
    fprintf(log, "apbot serve: %s\n", esc);
    fflush(log);
    free(esc);
}

/* ---- signed values: the visitor's cookie and the CSRF tokens ----------------------------- */

static const char hexdig[] = "0123456789abcdef";

static void hex(const unsigned char *b, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hexdig[b[i] >> 4];
        out[2 * i + 1] = hexdig[b[i] & 15];
    }
    out[2 * n] = '\0';
}

/* Hex HMAC-SHA256 of what under the server's key. */
static void sign(const struct serve_server *s, const char *what, char out[65])
{
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int len = 0;

    if (!HMAC(EVP_sha256(), s->key, (int)sizeof(s->key), (const unsigned char *)what, strlen(what),
              mac, &len) ||
        len < 32)
        abort(); /* OpenSSL cannot compute SHA-256: nothing is safe to serve */
    hex(mac, 32, out);
}

static void random_hex(size_t bytes, char *out)
{
    unsigned char rnd[32];
    if (bytes > sizeof(rnd) || RAND_bytes(rnd, (int)bytes) != 1)
        abort(); /* no randomness: sessions could be guessed */
    hex(rnd, bytes, out);
}

/* A visitor's cookie is RANDOM.MAC: made here, so one the server did not make is refused. */
static bool visitor_valid(const struct serve_server *s, const char *v)
{
    char mac[65], what[64];

    if (!v || strlen(v) != 32 + 1 + 32 || v[32] != '.')
        return false;
    snprintf(what, sizeof(what), "sid:%.32s", v);
    sign(s, what, mac);
    return CRYPTO_memcmp(mac, v + 33, 32) == 0;
}

static void visitor_new(const struct serve_server *s, char out[SERVE_SID_LEN + 1])
{
    char r[33], mac[65], what[40];

    random_hex(16, r);
    snprintf(what, sizeof(what), "sid:%.32s", r);
    sign(s, what, mac);
    snprintf(out, SERVE_SID_LEN + 1, "%.32s.%.32s", r, mac);
}

/* The CSRF token of a cookie value, bound to who is signed in. */
static void csrf_of(const struct serve_server *s, const char *sid, const char *login, char out[65])
{
    char what[160];
    snprintf(what, sizeof(what), "csrf:%s:%s", sid, login);
    sign(s, what, out);
}

bool serve_csrf_ok(const struct serve_ctx *c, const char *token)
{
    return token && strlen(token) == 64 && CRYPTO_memcmp(token, c->csrf, 64) == 0;
}

int serve_cookies(const struct serve_ctx *c, char out[2][256])
{
    const char *secure = c->secure ? "; Secure" : "";
    int n = 0;

    if (c->new_visitor)
        snprintf(out[n++], 256, "%s=%s; Path=/; HttpOnly; SameSite=Strict%s", VISITOR_COOKIE,
                 c->visitor, secure);
    if (c->session_cookie == SERVE_SESSION_COOKIE_SET)
        snprintf(out[n++], 256, "%s=%s; Path=/; HttpOnly; SameSite=Strict%s", SESSION_COOKIE,
                 c->sid, secure);
    else if (c->session_cookie == SERVE_SESSION_COOKIE_CLEAR)
        snprintf(out[n++], 256, "%s=; Path=/; HttpOnly; SameSite=Strict%s; Max-Age=0",
                 SESSION_COOKIE, secure);
    return n;
}

/* ---- the reviewers file, read again when it changes ------------------------------------- */

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_mode == b->st_mode;
}

/* Under the lock: the reviewers file as it is now. A file that cannot be read leaves nobody
 * to sign in (logged once per change), never the list as it was. */
static void reviewers_refresh(struct serve_ctx *c)
{
    struct serve_auth *a = c->s->auth;
    const char *path = c->s->opt->reviewers_path;
    struct reviewers fresh;
    struct stat st;
    char err[APBOT_ERR_LEN];

    if (c->s->mode != SERVE_MODE_REVIEWERS)
        return;
    if (stat(path, &st) != 0)
        memset(&st, 0, sizeof(st));
    if (same_file(&st, &a->rv_stat) && (st.st_ino != 0 || a->rv_failed))
        return;
    a->rv_stat = st;
    if (reviewers_load(path, false, &fresh, err, sizeof(err)) != APBOT_OK) {
        reviewers_done(&a->rv);
        a->rv_failed = true;
        serve_log(c, "error", "the reviewers file cannot be read, nobody can sign in: %s", err);
        return;
    }
    reviewers_done(&a->rv);
    a->rv = fresh;
    if (a->rv_failed)
        serve_log(c, "info", "the reviewers file is readable again: %zu people", fresh.n);
    a->rv_failed = false;
}

static void hash_tag(const char *hash, unsigned char out[8])
{
    unsigned char d[32];
    SHA256((const unsigned char *)hash, strlen(hash), d);
    memcpy(out, d, 8);
}

/* Under the lock: who r is, as a session or a request knows them. */
static void who_of(const struct reviewer *r, enum review_auth how, struct serve_who *ret)
{
    memset(ret, 0, sizeof(*ret));
    ret->known = true;
    snprintf(ret->login, sizeof(ret->login), "%s", r->login);
    snprintf(ret->display, sizeof(ret->display), "%s", reviewer_display(r));
    ret->role = r->role;
    ret->how = how;
}

/* ---- sessions --------------------------------------------------------------------------- */

static void sha(const char *s, unsigned char out[32])
{
    SHA256((const unsigned char *)s, strlen(s), out);
}

/* Under the lock: the session of cookie value v, or NULL. */
static struct auth_session *session_find(struct serve_auth *a, const char *v)
{
    unsigned char d[32];
    sha(v, d);
    for (size_t i = 0; i < SESSIONS_MAX; i++)
        if (a->sessions[i].used && CRYPTO_memcmp(a->sessions[i].id_sha, d, 32) == 0)
            return &a->sessions[i];
    return NULL;
}

/* Under the lock: is session x still valid now (expiry; in the reviewers mode the person still
 * in the file, with the same password)? Its who follows the file's role and display name. */
static bool session_alive(struct serve_ctx *c, struct auth_session *x, int64_t now,
                          const char **why)
{
    const struct serve_options *o = c->s->opt;
    const struct reviewer *r;
    unsigned char tag[8];
    enum serve_session_state st =
        serve_session_check(now, x->created_ms, x->seen_ms, (int64_t)o->session_idle_s * 1000,
                            (int64_t)o->session_max_s * 1000);

    if (st != SERVE_SESSION_LIVE) {
        *why = st == SERVE_SESSION_IDLE ? "idle too long" : "past its time limit";
        return false;
    }
    if (c->s->mode != SERVE_MODE_REVIEWERS)
        return true;
    r = reviewers_find(&c->s->auth->rv, x->who.login);
    if (!r) {
        *why = "no longer in the reviewers file";
        return false;
    }
    hash_tag(r->hash, tag);
    if (CRYPTO_memcmp(tag, x->hash_tag, sizeof(tag)) != 0) {
        *why = "the password was changed";
        return false;
    }
    who_of(r, x->who.how, &x->who);
    return true;
}

/* Under the lock: a slot for a new session of login (its oldest beyond SESSIONS_PER_LOGIN, an
 * unused one, an expired one, or the one seen longest ago). */
static struct auth_session *session_slot(struct serve_ctx *c, const char *login, int64_t now)
{
    struct serve_auth *a = c->s->auth;
    struct auth_session *free_slot = NULL, *lru = NULL, *oldest_mine = NULL;
    size_t mine = 0;

    for (size_t i = 0; i < SESSIONS_MAX; i++) {
        struct auth_session *x = &a->sessions[i];
        if (!x->used) {
            free_slot = free_slot ? free_slot : x;
            continue;
        }
        if (serve_session_check(now, x->created_ms, x->seen_ms,
                                (int64_t)c->s->opt->session_idle_s * 1000,
                                (int64_t)c->s->opt->session_max_s * 1000) != SERVE_SESSION_LIVE) {
            memset(x, 0, sizeof(*x));
            free_slot = free_slot ? free_slot : x;
            continue;
        }
        if (strcasecmp(x->who.login, login) == 0) {
            mine++;
            if (!oldest_mine || x->created_ms < oldest_mine->created_ms)
                oldest_mine = x;
        }
        if (!lru || x->seen_ms < lru->seen_ms)
            lru = x;
    }
    if (mine >= SESSIONS_PER_LOGIN)
        return oldest_mine;
    return free_slot ? free_slot : lru;
}

/* A new session for who: a fresh cookie value (the one the visitor had is never reused), the
 * session in the table, the request's context switched to it. */
static void session_start(struct serve_ctx *c, const struct serve_who *who, const char *hash)
{
    struct serve_auth *a = c->s->auth;
    struct auth_session *x;
    int64_t now = apbot_clock_mono_ms();
    char v[SERVE_SID_LEN + 1];

    random_hex(32, v);
    pthread_mutex_lock(&a->lock);
    x = session_slot(c, who->login, now);
    memset(x, 0, sizeof(*x));
    x->used = true;
    sha(v, x->id_sha);
    x->who = *who;
    hash_tag(hash ? hash : "", x->hash_tag);
    x->created_ms = x->seen_ms = now;
    pthread_mutex_unlock(&a->lock);
    snprintf(c->sid, sizeof(c->sid), "%s", v);
    c->session_cookie = SERVE_SESSION_COOKIE_SET;
    c->who = *who;
    csrf_of(c->s, c->sid, c->who.login, c->csrf);
    explicit_bzero(v, sizeof(v));
}

/* Ends the request's session (if it has one): gone from the table, the cookie dropped, the
 * visitor's cookie the anchor again. */
static void session_end(struct serve_ctx *c)
{
    struct serve_auth *a = c->s->auth;
    struct auth_session *x;

    pthread_mutex_lock(&a->lock);
    x = session_find(a, c->sid);
    if (x)
        memset(x, 0, sizeof(*x));
    pthread_mutex_unlock(&a->lock);
    c->session_cookie = SERVE_SESSION_COOKIE_CLEAR;
    snprintf(c->sid, sizeof(c->sid), "%s", c->visitor);
    memset(&c->who, 0, sizeof(c->who));
    csrf_of(c->s, c->sid, "", c->csrf);
}

/* ---- who is asking ---------------------------------------------------------------------- */

/* The peer's address, and whether it is a trusted proxy. */
static void peer_of(struct serve_ctx *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    struct serve_ip ip;

    snprintf(c->client, sizeof(c->client), "?");
    if (!sa)
        return;
    if (sa->sa_family == AF_INET)
        addr_norm(AF_INET, (const unsigned char *)&((const struct sockaddr_in *)sa)->sin_addr, &ip);
    else if (sa->sa_family == AF_INET6)
        addr_norm(AF_INET6, (const unsigned char *)&((const struct sockaddr_in6 *)sa)->sin6_addr,
                  &ip);
    else
        return;
    inet_ntop(ip.family, ip.a, c->client, sizeof(c->client));
    c->from_proxy = serve_ip_listed(&c->s->proxies, &ip);
}

/* The proxy's header, believed from a trusted proxy only. True when it settled who asks. */
static bool proxy_identity(struct serve_ctx *c)
{
    const char *hname = c->s->opt->proxy_header ? c->s->opt->proxy_header : SERVE_PROXY_HEADER;
    const char *user = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, hname);
    const struct reviewer *r;

    if (!user || c->s->proxies.n == 0)
        return false;
    if (!c->from_proxy) {
        serve_log(c, "warn", "ignored %s: %.64s from %s, which is not a trusted proxy", hname, user,
                  c->client);
        return false;
    }
    pthread_mutex_lock(&c->s->auth->lock);
    reviewers_refresh(c);
    r = review_name_ok(user) ? reviewers_find(&c->s->auth->rv, user) : NULL;
    if (r)
        who_of(r, REVIEW_AUTH_PROXY, &c->who);
    pthread_mutex_unlock(&c->s->auth->lock);
    if (!r) {
        c->proxy_unknown = true;
        snprintf(c->proxy_user, sizeof(c->proxy_user), "%.64s", user);
        serve_log(c, "warn",
                  "refused: the login proxy names %.64s, who is not in the reviewers file", user);
    }
    return true;
}

/* A signed-in session behind the cookie, if it is one and alive. */
static bool session_identity(struct serve_ctx *c, const char *cookie)
{
    struct serve_auth *a = c->s->auth;
    struct auth_session *x;
    const char *why = NULL;
    bool alive = false;
    int64_t now = apbot_clock_mono_ms();
    char login[REVIEW_NAME_MAX + 1] = "";

    if (!cookie || strlen(cookie) != 64 || strchr(cookie, '.'))
        return false;
    pthread_mutex_lock(&a->lock);
    reviewers_refresh(c);
    x = session_find(a, cookie);
    if (x) {
        alive = session_alive(c, x, now, &why);
        if (alive) {
            x->seen_ms = now;
            c->who = x->who;
        } else {
            snprintf(login, sizeof(login), "%s", x->who.login);
            memset(x, 0, sizeof(*x));
        }
    }
    pthread_mutex_unlock(&a->lock);
    if (why)
        serve_log(c, "info", "session of %s ended: %s", login, why);
    if (!alive)
        return false;
    snprintf(c->sid, sizeof(c->sid), "%s", cookie);
    return true;
}

void serve_auth_identify(struct serve_ctx *c)
{
    const char *session = MHD_lookup_connection_value(c->conn, MHD_COOKIE_KIND, SESSION_COOKIE);
    const char *visitor = MHD_lookup_connection_value(c->conn, MHD_COOKIE_KIND, VISITOR_COOKIE);
    const char *proto = NULL;

    peer_of(c);
    if (c->from_proxy) {
        char fwd[64];
        proto = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "X-Forwarded-Proto");
        if (serve_forwarded_client(
                MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "X-Forwarded-For"),
                &c->s->proxies, fwd, sizeof(fwd)))
            snprintf(c->client, sizeof(c->client), "%s", fwd);
    }
    c->secure = c->s->tls || (proto && strcasecmp(proto, "https") == 0);
    if (visitor_valid(c->s, visitor)) {
        snprintf(c->visitor, sizeof(c->visitor), "%s", visitor);
    } else {
        visitor_new(c->s, c->visitor);
        c->new_visitor = true;
    }
    if (c->s->mode == SERVE_MODE_REVIEWERS && proxy_identity(c)) {
        /* the proxy says who: the visitor's cookie anchors the token */
    } else if (c->s->mode != SERVE_MODE_OPEN && session) {
        if (session_identity(c, session)) {
            csrf_of(c->s, c->sid, c->who.login, c->csrf);
            return;
        }
        c->session_cookie = SERVE_SESSION_COOKIE_CLEAR; /* ended, or never ours */
    }
    snprintf(c->sid, sizeof(c->sid), "%s", c->visitor);
    c->new_anchor = c->new_visitor;
    csrf_of(c->s, c->sid, c->who.known ? c->who.login : "", c->csrf);
}

bool serve_may_decide(const struct serve_ctx *c)
{
    return serve_access_decide(c->s->mode, c->who.known, c->who.role, SERVE_ROUTE_DECIDE) ==
           SERVE_ALLOW;
}

/* ---- the throttle ----------------------------------------------------------------------- */

/* Under the lock: the entry for key in tab (the oldest replaced when none is free). */
static struct serve_throttle *throttle_of(struct auth_throttle *tab, const char *key, int64_t now)
{
    struct auth_throttle *victim = NULL;

    for (size_t i = 0; i < THROTTLE_SLOTS; i++) {
        struct auth_throttle *e = &tab[i];
        if (e->used && strcasecmp(e->key, key) == 0)
            return &e->t;
        if (!e->used || now - e->t.since >= THROTTLE_WINDOW_MS) {
            if (!victim || victim->used)
                victim = e;
        } else if (!victim || (victim->used && e->t.since < victim->t.since)) {
            victim = e;
        }
    }
    memset(victim, 0, sizeof(*victim));
    victim->used = true;
    snprintf(victim->key, sizeof(victim->key), "%s", key);
    return &victim->t;
}

/* Counts a sign-in attempt for name and address before the password is checked, so that
 * attempts in parallel are bounded too. Returns 0, or the ms to wait when either is over its
 * limit (nothing counted then). */
static int64_t throttle_attempt(struct serve_ctx *c, const char *name, int64_t now)
{
    struct serve_auth *a = c->s->auth;
    struct serve_throttle *tn, *ta;
    int64_t wn, wa;

    pthread_mutex_lock(&a->lock);
    tn = throttle_of(a->by_name, name, now);
    ta = throttle_of(a->by_addr, c->client, now);
    wn = serve_throttle_wait(tn, now, THROTTLE_PER_NAME, THROTTLE_WINDOW_MS);
    wa = serve_throttle_wait(ta, now, THROTTLE_PER_ADDRESS, THROTTLE_WINDOW_MS);
    if (wn == 0 && wa == 0) {
        serve_throttle_fail(tn, now, THROTTLE_WINDOW_MS);
        serve_throttle_fail(ta, now, THROTTLE_WINDOW_MS);
    }
    pthread_mutex_unlock(&a->lock);
    return wn > wa ? wn : wa;
}

/* A sign-in that succeeded: its name starts afresh, and its address gets the attempt back. */
static void throttle_success(struct serve_ctx *c, const char *name, int64_t now)
{
    struct serve_auth *a = c->s->auth;
    struct serve_throttle *ta;

    pthread_mutex_lock(&a->lock);
    memset(throttle_of(a->by_name, name, now), 0, sizeof(struct serve_throttle));
    ta = throttle_of(a->by_addr, c->client, now);
    if (ta->failures > 0)
        ta->failures--;
    pthread_mutex_unlock(&a->lock);
}

/* ---- signing in and out ----------------------------------------------------------------- */

/*
 * The hash an unknown name is checked against, so that it costs what a known name does: the
 * first reviewer's with a password (a file of imported bcrypt-12 hashes would otherwise answer
 * an unknown name in the time of our own yescrypt decoy, and tell which names exist), or the
 * decoy when nobody has one. Its password is somebody's, but a match for an unknown name is
 * refused all the same. Under the caller's lock.
 */
UNITTEST const char *serve_decoy_hash(const struct reviewers *rv, const char *dummy)
{
    for (size_t i = 0; i < rv->n; i++)
        if (strcmp(rv->v[i].hash, REVIEWERS_NO_PASSWORD) != 0)
            return rv->v[i].hash;
    return dummy;
}

/* Does password sign name in? On success *ret is who they are and *ret_hash (heap) the
 * password hash the session keeps a tag of. Spends the same time on an unknown name. */
static bool check_password(struct serve_ctx *c, const char *name, const char *password,
                           struct serve_who *ret, char **ret_hash)
{
    struct serve_auth *a = c->s->auth;
    struct reviewer r;
    bool found = false, ok;

    *ret_hash = NULL;
    if (c->s->mode == SERVE_MODE_SHARED) {
        const char *shared = c->s->opt->password;
        size_t n = strlen(password);
        ok = review_name_ok(name) && n == strlen(shared) && CRYPTO_memcmp(password, shared, n) == 0;
        if (ok) {
            memset(ret, 0, sizeof(*ret));
            ret->known = true;
            snprintf(ret->login, sizeof(ret->login), "%s", name);
            snprintf(ret->display, sizeof(ret->display), "%s", name);
            ret->role = REVIEWERS_REVIEWER;
            ret->how = REVIEW_AUTH_SHARED;
        }
        return ok;
    }
    memset(&r, 0, sizeof(r));
    pthread_mutex_lock(&a->lock);
    reviewers_refresh(c);
    if (review_name_ok(name)) {
        const struct reviewer *p = reviewers_find(&a->rv, name);
        if (p && strcmp(p->hash, REVIEWERS_NO_PASSWORD) != 0) {
            r = *p;
            found = true;
        }
    }
    if (!found) /* an unknown name costs what a known one does (serve_decoy_hash) */
        snprintf(r.hash, sizeof(r.hash), "%s", serve_decoy_hash(&a->rv, a->dummy_hash));
    pthread_mutex_unlock(&a->lock);
    /* at most HASHING_AT_ONCE hashes at a time: sign-ins cannot take every core */
    while (sem_wait(&a->hashing) != 0)
        ;
    ok = reviewers_verify(r.hash, password) && found;
    sem_post(&a->hashing);
    if (ok) {
        who_of(&r, REVIEW_AUTH_PASSWORD, ret);
        *ret_hash = apbot_xstrdup(r.hash);
    }
    explicit_bzero(&r, sizeof(r));
    return ok;
}

bool serve_auth_basic(struct serve_ctx *c)
{
    const char *h = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Authorization");
    char user[REVIEW_NAME_MAX + 2], pw[REVIEWERS_PASSWORD_MAX + 2], *hash = NULL;
    struct serve_who who;
    int64_t now = apbot_clock_mono_ms(), wait;
    bool ok = false;

    c->basic_challenge = true;
    if (!serve_basic_parse(h, user, sizeof(user), pw, sizeof(pw)))
        goto out;
    wait = throttle_attempt(c, user, now);
    if (wait > 0) {
        serve_log(c, "warn", "metrics: refused, too many failed attempts for name=%s or from=%s",
                  user, c->client);
        goto out;
    }
    ok = check_password(c, user, pw, &who, &hash);
    if (!ok) {
        serve_log(c, "warn", "metrics: sign-in failed: name=%s from=%s: wrong name or password",
                  user, c->client);
        goto out;
    }
    throttle_success(c, user, now);
    c->who = who;
    c->basic_challenge = false;
out:
    secret_free(hash);
    explicit_bzero(pw, sizeof(pw));
    return ok;
}

/* The sign-in page; status, and a message (NULL for none). */
static enum MHD_Result login_page(struct serve_ctx *c, int status, const char *message,
                                  const char *name, const char *next)
{
    struct serve_page p;
    xmlNodePtr form, n;

    serve_page_start(&p, c, "Sign in", NULL);
    p.status = status;
    html_el_clean(p.main, "h1", NULL, "Sign in");
    if (message)
        serve_banner(p.main, status < 400 ? "ok" : "refused", "message", message);
    if (c->s->mode == SERVE_MODE_OPEN) {
        html_el_clean(p.main, "p", NULL,
                      "Nobody signs in here: this page runs without reviewers, so everyone on "
                      "this computer may look and nobody may decide. To decide on the page, "
                      "start apbot serve with a reviewers file (apbot reviewer add).");
        return serve_page_send(c, &p);
    }
    form = html_el(p.main, "form", "login");
    html_id(form, "login");
    html_attr(form, "method", "post");
    html_attr(form, "action", "/login");
    serve_hidden(form, "csrf", c->csrf);
    serve_hidden(form, "next", serve_next_path(next));
    html_attr(html_el_clean(form, "label", NULL,
                            c->s->mode == SERVE_MODE_SHARED
                                ? "Your name (it goes into the audit trail as you type it)"
                                : "Login name"),
              "for", "login-name");
    n = html_el(form, "input", NULL);
    html_attr(n, "type", "text");
    html_id(n, "login-name");
    html_attr(n, "name", "name");
    html_attr(n, "required", "required");
    html_attr(n, "autocomplete", "username");
    html_attr(n, "pattern", "[A-Za-z0-9._@-]{1,64}");
    if (name && review_name_ok(name))
        html_attr(n, "value", name);
    html_attr(html_el_clean(form, "label", NULL,
                            c->s->mode == SERVE_MODE_SHARED ? "The review password" : "Password"),
              "for", "login-password");
    n = html_el(form, "input", NULL);
    html_attr(n, "type", "password");
    html_id(n, "login-password");
    html_attr(n, "name", "password");
    html_attr(n, "required", "required");
    html_attr(n, "autocomplete", "current-password");
    html_el_clean(form, "button", NULL, "Sign in");
    if (next) {
        /* from a link on another site the browser sends no cookie (SameSite=Strict): who is
         * signed in already goes on from here, a link of this site */
        xmlNodePtr q = html_el_clean(p.main, "p", "help", "Signed in already? ");
        html_id(serve_link(q, serve_next_path(next), NULL, "Go on to the page"), "go-on");
    }
    return serve_page_send(c, &p);
}

enum MHD_Result serve_login_get(struct serve_ctx *c)
{
    const char *next = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "next");
    const char *out = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "out");

    if (c->who.known && c->s->mode != SERVE_MODE_OPEN)
        return serve_redirect(c, serve_next_path(next));
    return login_page(c, MHD_HTTP_OK, out ? "You are signed out." : NULL, NULL, next);
}

enum MHD_Result serve_login_post(struct serve_ctx *c, const char *body)
{
    struct serve_form f;
    struct serve_who who;
    const char *name, *password, *next;
    char *hash = NULL, retry[32], key[65];
    int64_t now = apbot_clock_mono_ms(), wait;
    enum MHD_Result res;

    if (c->s->mode == SERVE_MODE_OPEN)
        return login_page(c, MHD_HTTP_NOT_FOUND, NULL, NULL, NULL);
    serve_form_parse(&f, body);
    name = serve_form_get(&f, "name");
    password = serve_form_get(&f, "password");
    next = serve_form_get(&f, "next");
    if (!serve_csrf_ok(c, serve_form_get(&f, "csrf"))) {
        res = login_page(c, MHD_HTTP_FORBIDDEN,
                         "This form is not from this page's session. Sign in again.", NULL, next);
        goto out;
    }
    if (!name || !*name || !password || !*password) {
        res = login_page(c, MHD_HTTP_BAD_REQUEST, "Give your name and your password.", name, next);
        goto out;
    }
    /* the throttle counts a name by its first 64 bytes: longer ones are no names anyway */
    snprintf(key, sizeof(key), "%.64s", name);
    wait = throttle_attempt(c, key, now);
    if (wait > 0) {
        serve_log(c, "warn",
                  "sign-in refused: too many failed attempts for name=%.64s or from=%s, "
                  "next allowed in %lld s",
                  name, c->client, (long long)((wait + 999) / 1000));
        snprintf(retry, sizeof(retry), "%lld", (long long)((wait + 999) / 1000));
        c->retry_after = retry;
        res = login_page(c, MHD_HTTP_TOO_MANY_REQUESTS,
                         "Too many failed sign-ins for this name or from this computer: wait a "
                         "while, then try again.",
                         name, next);
        goto out;
    }
    if (!check_password(c, name, password, &who, &hash)) {
        serve_log(c, "warn", "sign-in failed: name=%.64s from=%s: wrong name or password", name,
                  c->client);
        res = login_page(c, MHD_HTTP_UNAUTHORIZED, "Wrong name or password.", name, next);
        goto out;
    }
    throttle_success(c, key, now);
    if (c->who.known && c->who.how != REVIEW_AUTH_PROXY)
        session_end(c); /* signing in again: the session before is over */
    session_start(c, &who, hash);
    serve_log(c, "info", "signed in: %s (%s) from=%s by %s", who.login,
              reviewers_role_name(who.role), c->client, review_auth_name(who.how));
    res = serve_redirect(c, serve_next_path(next));
out:
    secret_free(hash);
    serve_form_done(&f);
    return res;
}

enum MHD_Result serve_logout(struct serve_ctx *c, const char *body)
{
    struct serve_form f;
    char login[REVIEW_NAME_MAX + 1];
    bool ok;

    serve_form_parse(&f, body);
    ok = serve_csrf_ok(c, serve_form_get(&f, "csrf"));
    serve_form_done(&f);
    if (!ok)
        return serve_simple_page(c, MHD_HTTP_FORBIDDEN, "Refused",
                                 "This form is not from this page's session.");
    if (c->who.known && c->who.how == REVIEW_AUTH_PROXY)
        return serve_simple_page(c, MHD_HTTP_OK, "Signed in by your company",
                                 "You are signed in through your company's login: sign out "
                                 "there.");
    snprintf(login, sizeof(login), "%s", c->who.known ? c->who.login : "");
    session_end(c);
    if (*login)
        serve_log(c, "info", "signed out: %s from=%s", login, c->client);
    return serve_redirect(c, "/login?out=1");
}

/* ---- on every page ---------------------------------------------------------------------- */

void serve_auth_header(struct serve_ctx *c, xmlNodePtr header)
{
    xmlNodePtr span = html_el(header, "span", "who");
    html_id(span, "who");
    if (c->s->mode == SERVE_MODE_OPEN) {
        html_text_clean(span, "read-only: nobody signs in here");
        return;
    }
    if (!c->who.known) {
        serve_link(span, "/login", NULL, "Sign in");
        return;
    }
    html_text_clean(span, "signed in as ");
    html_id(html_el_clean(span, "span", "name", c->who.display), "who-name");
    html_textf_clean(span, " (%s, %s)", c->who.login, reviewers_role_name(c->who.role));
    if (c->who.how != REVIEW_AUTH_PROXY) {
        xmlNodePtr form = html_el(span, "form", "logout");
        html_id(form, "logout");
        html_attr(form, "method", "post");
        html_attr(form, "action", "/logout");
        serve_hidden(form, "csrf", c->csrf);
        html_el_clean(form, "button", NULL, "Sign out");
    }
}

/* ---- start and stop --------------------------------------------------------------------- */

int serve_auth_start(struct serve_server *s, char *err, size_t errlen)
{
    const struct serve_options *o = s->opt;
    struct serve_auth *a;
    char rnd[65];
    int rc;

    s->mode = o->reviewers_path             ? SERVE_MODE_REVIEWERS
              : o->password && *o->password ? SERVE_MODE_SHARED
                                            : SERVE_MODE_OPEN;
    rc = serve_parse_proxies(o->trusted_proxies, &s->proxies, err, errlen);
    if (rc != APBOT_OK)
        return rc;
    if (s->proxies.n > 0 && s->mode != SERVE_MODE_REVIEWERS)
        return apbot_fail(err, errlen, APBOT_E_INVAL,
                          "--trusted-proxy needs --reviewers FILE: the proxy says who someone "
                          "is, the reviewers file what they may do");
    if (o->proxy_header && !serve_header_name_ok(o->proxy_header))
        return apbot_fail(err, errlen, APBOT_E_INVAL, "--proxy-header: not a header name");
    if (o->session_idle_s <= 0 || o->session_max_s <= 0)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "session limits must be positive");
    a = apbot_xcalloc(1, sizeof(*a));
    if (pthread_mutex_init(&a->lock, NULL) != 0 || sem_init(&a->hashing, 0, HASHING_AT_ONCE) != 0)
        abort(); /* only without memory */
    if (s->mode == SERVE_MODE_REVIEWERS) {
        /* a file that cannot be read is an error of the file, not of the command line */
        rc = reviewers_load(o->reviewers_path, false, &a->rv, err, errlen) == APBOT_OK ? APBOT_OK
                                                                                       : APBOT_E_IO;
        if (rc == APBOT_OK && stat(o->reviewers_path, &a->rv_stat) != 0)
            memset(&a->rv_stat, 0, sizeof(a->rv_stat));
        /* a hash of nothing anyone knows, checked for unknown names */
        random_hex(32, rnd);
        if (rc == APBOT_OK)
            rc = reviewers_hash_password(rnd, a->dummy_hash, sizeof(a->dummy_hash), err, errlen);
        explicit_bzero(rnd, sizeof(rnd));
        if (rc != APBOT_OK) {
            s->auth = a;
            serve_auth_stop(s);
            return rc;
        }
    }
    s->auth = a;
    return APBOT_OK;
}

void serve_auth_stop(struct serve_server *s)
{
    struct serve_auth *a = s->auth;
    if (!a)
        return;
    reviewers_done(&a->rv);
    pthread_mutex_destroy(&a->lock);
    sem_destroy(&a->hashing);
    explicit_bzero(a, sizeof(*a));
    free(a);
    s->auth = NULL;
}
