/*
 * runner.c - `apbot run`: the workers that drive queued items through the state machine,
 * the circuit breaker, and the calling thread's watch over clock, signals and progress.
 *
 * One worker thread per ERP session; each owns a store connection, an erp session (login,
 * lookup) and, through it, an HTTP session for the post steps. A worker is blocking: one
 * exchange at a time, interrupted by the shared abort flag that http.c polls between short
 * slices of its per-session curl multi loop. Per item, the worker computes an event from
 * what the ERP showed (one function per state: lookup for checking/reconciling, the post
 * steps for posting), asks machine_next() for the step and persists it with store_apply(),
 * keeping the lease while it continues with the same item (checking -> posting). The intent
 * to post is committed before any step of the form is sent. What "not sent" means per step:
 * steps before the committing one can never book, so any failure there is NOT_SENT; from the
 * committing step on, only a transport that provably sent nothing or an answer the flow's
 * rules call not-sent/session-expired is NOT_SENT, everything else ambiguous is UNKNOWN.
 * The settle delay of a reconciliation counts from the moment the ambiguity was recorded
 * (the posting -> reconciling event), which is after the client's exchange ended or the
 * crashed runner's lease expired, so an ERP that commits late is never taken for absent.
 *
 * The circuit breaker stops the run (APBOT_E_SYSTEMIC) on login refused or a login without
 * its success marker, the entry form or one of the flow's fields missing, or an unreachable
 * ERP: breaker_failures consecutive unanswered exchanges across workers spanning at least
 * breaker_window_ms. After a few unanswered exchanges the workers stop claiming and probe
 * the login page instead, so a short outage is ridden out without spending items' attempt
 * budgets. In-flight items are handed back with the `released` event (or `unknown` once the
 * committing step may have gone out); untouched items stay queued.
 */
#include "apbot/runner.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "apbot/clock.h"
#include "apbot/erp.h"
#include "apbot/erp_post.h"
#include "apbot/flow.h"
#include "apbot/http.h"
#include "apbot/invoice.h"
#include "apbot/machine.h"
#include "apbot/match.h"
#include "apbot/page.h"
#include "apbot/store.h"

#define RUNNER_EXCERPT_MAX 1024   /* bytes of page text kept per exchange */
#define RUNNER_EXCERPT_READ 4096  /* read this much, mask secrets, then cut */
#define RUNNER_POST_RESTARTS 2    /* post restarts after a session expired before commit */
#define RUNNER_SUSPECT_FAILURES 3 /* unanswered in a row: stop claiming, probe instead */
#define RUNNER_PROBE_CAP_MS 1000  /* longest pause between probes of a silent ERP */
#define RUNNER_LOGIN_FAILS_MAX 30 /* transient login failures in a row before giving up */
#define RUNNER_LOGIN_CONFIRM 3    /* systemic-looking login failures in a row that trip */
#define RUNNER_FORM_CONFIRM 3     /* pages without the flow's form in a row that trip */
#define RUNNER_RECOVER_EVERY_MS 1000
#define RUNNER_TICK_MS 100
#define RUNNER_PROGRESS_EVERY_MS 500
#define RUNNER_LEASE_MARGIN_MS 2000

static const char *const stop_names[] = {
    [RUNNER_STOP_EMPTY] = "empty",   [RUNNER_STOP_TIME] = "time",
    [RUNNER_STOP_CANCEL] = "cancel", [RUNNER_STOP_SYSTEMIC] = "systemic",
    [RUNNER_STOP_ERROR] = "error",
};
_Static_assert(sizeof(stop_names) / sizeof(stop_names[0]) == RUNNER_STOP__COUNT,
               "every runner_stop needs a name");

const char *runner_stop_name(enum runner_stop s)
{
    if ((int)s < 0 || s >= RUNNER_STOP__COUNT)
        return "invalid";
    return stop_names[s];
}

/* The numbers a run uses: the flow's policy with the options' overrides applied. */
struct runner_policy {
    long settle_ms, lease_ms, timeout_ms, connect_timeout_ms;
    long backoff_base_ms, backoff_cap_ms, poll_ms;
    struct machine_policy machine;
    int breaker_failures;
    long breaker_window_ms;
};

/* What the workers share. Fields above `mu` are written before the threads start. */
struct runner {
    const struct runner_options *opt;
    struct flow *flow;           /* as loaded */
    struct flow run_flow;        /* shallow copy with the policy overrides, for erp_open */
    const char *base_url;        /* the effective ERP URL (flow's or the override) */
    const char *user, *password; /* for masking in evidence only (erp reads the env) */
    struct runner_policy pol;
    char owner[128];
    int64_t started_mono;

    atomic_int abort_io; /* written by the calling thread only; workers' http polls it */
    atomic_bool stop;    /* workers: finish the current item and leave */
    atomic_int running;  /* workers still in their loop */

    pthread_mutex_t mu; /* guards everything below */
    int unanswered;     /* consecutive unanswered exchanges across workers */
    int64_t first_unanswered_mono;
    char last_unanswered[256];
    bool tripped;
    char trip_msg[512];
    bool failed;
    char fail_msg[512];
    struct runner_stats totals; /* workers add theirs when they leave */
};

struct worker {
    struct runner *r;
    int index;
    pthread_t thread;
    bool started;
    char owner[160];
    struct store *st;
    struct erp_session *erp;
    bool logged_in;
    int login_fails;
    int systemic_streak; /* systemic-looking login failures in a row */
    int form_streak;     /* post pages in a row without the flow's form or field */
    uint64_t rng;
    struct runner_stats stats;
    /* the item in hand, for evidence (0 when none) */
    int64_t item_id;
    bool reconciling;
};

/* One item in hand: what the worker learnt about it during this claim. */
struct job {
    struct worker *w;
    struct store_item item;
    struct invoice inv;
    bool inv_ok;
    int64_t lease_until; /* lease expiry on the store's mono clock (apbot_clock_mono_ms) */
    int64_t looked_at;   /* mono ms when the last lookup started (0: none): an absence counts
                          * as confirmed only if the lookup began after the settle delay */
    bool lost;           /* lease lost: touch the item no more */
    bool systemic;       /* the breaker tripped while this item was in hand */
    bool commit_sent;    /* the committing step went on the wire (or may have) */
    bool relogin;        /* the ERP showed the login page: log in before the next exchange */
    char doc[128];
    char reason[512];
    char detail[512];
    int64_t retry_after_ms;
};

/* ---- small helpers ---------------------------------------------------------------------- */

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static bool stopping(const struct runner *r)
{
    return atomic_load(&r->stop);
}

/* Sleeps up to ms in short slices, returning early when the run stops. */
static void worker_sleep(struct worker *w, int64_t ms)
{
    int64_t until = mono_ms() + ms;
    for (int i = 0; i < 100000 && !stopping(w->r); i++) {
        int64_t left = until - mono_ms();
        if (left <= 0)
            break;
        sleep_ms(left < 50 ? (long)left : 50);
    }
}

/* splitmix64: a small, well-mixed generator per worker (jitter only, not secrets). */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static uint64_t seed_random(void)
{
    uint64_t v = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, &v, sizeof(v)) != (ssize_t)sizeof(v))
            v = 0;
        close(fd);
    }
    if (!v)
        v = (uint64_t)mono_ms() ^ ((uint64_t)getpid() << 32);
    return v;
}

int64_t runner_backoff_ms(long base_ms, long cap_ms, int n, int64_t retry_after_ms, uint64_t rnd)
{
    int64_t ceiling = base_ms > 0 ? base_ms : 0;
    int64_t cap = cap_ms > 0 ? cap_ms : 0;
    for (int i = 0; i < n && i < 62 && ceiling < cap; i++)
        ceiling *= 2;
    if (ceiling > cap)
        ceiling = cap;
    int64_t d = ceiling > 0 ? (int64_t)(rnd % (uint64_t)(ceiling + 1)) : 0;
    if (retry_after_ms > RUNNER_RETRY_AFTER_MAX_MS)
        retry_after_ms = RUNNER_RETRY_AFTER_MAX_MS;
    if (retry_after_ms > d)
        d = retry_after_ms;
    return d;
}

/* Copies s with every occurrence of the secrets replaced by "***". Heap; NULL for NULL. */
static char *mask_secrets(const char *s, const char *user, const char *password)
{
    if (!s)
        return NULL;
    size_t len = strlen(s);
    char *out = malloc(len * 3 + 1); /* "***" is at most 3x a one-byte secret */
    if (!out)
        abort();
    size_t o = 0;
    size_t ulen = user ? strlen(user) : 0, plen = password ? strlen(password) : 0;
    for (size_t i = 0; i < len;) {
        if (plen && strncmp(s + i, password, plen) == 0) {
            memcpy(out + o, "***", 3);
            o += 3;
            i += plen;
        } else if (ulen && strncmp(s + i, user, ulen) == 0) {
            memcpy(out + o, "***", 3);
            o += 3;
            i += ulen;
        } else {
            out[o++] = s[i++];
        }
    }
    out[o] = '\0';
    return out;
}

/* Cuts s in place to at most max bytes, never inside a UTF-8 sequence. */
static void cut_utf8(char *s, size_t max)
{
    size_t len = strlen(s);
    if (len <= max)
        return;
    size_t n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    s[n] = '\0';
}

/* Masks the ERP user and password inside buf (a NUL-terminated text of capacity len). */
static void mask_in_place(const struct runner *r, char *buf, size_t len)
{
    if (!buf[0])
        return;
    char *m = mask_secrets(buf, r->user, r->password);
    cut_utf8(m, len - 1);
    memcpy(buf, m, strlen(m) + 1);
    free(m);
}

/* ---- logging ---------------------------------------------------------------------------- */

/* Appends ` name=value` to buf, quoting values with blanks or quotes. */
static void kv(char *buf, size_t len, const char *name, const char *value)
{
    size_t o = strlen(buf);
    if (!value || o + 4 >= len)
        return;
    bool quote = !*value || strpbrk(value, " \t\"=") != NULL;
    int n = snprintf(buf + o, len - o, " %s=%s", name, quote ? "\"" : "");
    if (n < 0 || (size_t)n >= len - o)
        return;
    o += (size_t)n;
    for (const char *p = value; *p && o + 3 < len; p++) {
        if (*p == '"' || *p == '\\')
            buf[o++] = '\\';
        buf[o++] = (*p == '\n' || *p == '\r') ? ' ' : *p;
    }
    if (quote && o + 1 < len)
        buf[o++] = '"';
    buf[o] = '\0';
}

/* Starts a log line with the UTC time and the level. */
static void log_start(char *buf, size_t len, const char *level)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    char when[32];
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "time=%s.%03ldZ level=%s", when, ts.tv_nsec / 1000000L, level);
}

static void log_line(struct runner *r, const char *line)
{
    FILE *f = r->opt->log;
    if (!f)
        return;
    pthread_mutex_lock(&r->mu);
    fputs(line, f);
    fputc('\n', f);
    fflush(f);
    pthread_mutex_unlock(&r->mu);
}

/* A run-level message (start, breaker, stop) as one key=value line. */
static void log_msg(struct runner *r, const char *level, const char *what, const char *detail)
{
    char line[1024];
    log_start(line, sizeof(line), level);
    kv(line, sizeof(line), "msg", what);
    if (detail)
        kv(line, sizeof(line), "detail", detail);
    log_line(r, line);
}

static void log_transition(struct worker *w, const struct store_item *it, enum machine_state from,
                           enum machine_state to, enum machine_event ev, const char *doc,
                           const char *reason, const char *detail)
{
    char line[1536], id[24];
    log_start(line, sizeof(line), "info");
    snprintf(id, sizeof(id), "%" PRId64, it->id);
    kv(line, sizeof(line), "item", id);
    kv(line, sizeof(line), "key", it->key);
    kv(line, sizeof(line), "from", machine_state_name(from));
    kv(line, sizeof(line), "to", machine_state_name(to));
    kv(line, sizeof(line), "event", machine_event_name(ev));
    if (doc && *doc)
        kv(line, sizeof(line), "doc", doc);
    if (reason && *reason)
        kv(line, sizeof(line), "reason", reason);
    else if (detail && *detail)
        kv(line, sizeof(line), "detail", detail);
    char worker[16];
    snprintf(worker, sizeof(worker), "%d", w->index);
    kv(line, sizeof(line), "worker", worker);
    log_line(w->r, line);
}

/* ---- circuit breaker -------------------------------------------------------------------- */

static void breaker_trip(struct runner *r, const char *msg)
{
    pthread_mutex_lock(&r->mu);
    if (!r->tripped) {
        r->tripped = true;
        snprintf(r->trip_msg, sizeof(r->trip_msg), "%.500s", msg);
    }
    pthread_mutex_unlock(&r->mu);
    atomic_store(&r->stop, true);
}

static void breaker_answered(struct runner *r)
{
    pthread_mutex_lock(&r->mu);
    r->unanswered = 0;
    pthread_mutex_unlock(&r->mu);
}

/* One more unanswered exchange; trips when the run of them is long in count and time. */
static void breaker_unanswered(struct runner *r, const char *what)
{
    char msg[512];
    bool trip = false;
    int64_t now = mono_ms();
    pthread_mutex_lock(&r->mu);
    if (r->unanswered++ == 0)
        r->first_unanswered_mono = now;
    snprintf(r->last_unanswered, sizeof(r->last_unanswered), "%s", what ? what : "");
    if (r->unanswered >= r->pol.breaker_failures &&
        now - r->first_unanswered_mono >= r->pol.breaker_window_ms) {
        trip = true;
        snprintf(msg, sizeof(msg),
                 "ERP unreachable: %d exchanges in a row unanswered over %" PRId64 " s (last: %s)",
                 r->unanswered, (now - r->first_unanswered_mono) / 1000, r->last_unanswered);
    }
    pthread_mutex_unlock(&r->mu);
    if (trip)
        breaker_trip(r, msg);
}

static bool breaker_suspect(struct runner *r)
{
    pthread_mutex_lock(&r->mu);
    bool s = r->unanswered >= RUNNER_SUSPECT_FAILURES;
    pthread_mutex_unlock(&r->mu);
    return s;
}

/* Counts one exchange by its transport name ("answered", "not-sent: ...", "unknown: ..."). */
static void breaker_count(struct runner *r, const char *transport)
{
    if (stopping(r))
        return; /* our own abort, not the ERP's silence */
    if (transport && strncmp(transport, "answered", 8) == 0)
        breaker_answered(r);
    else
        breaker_unanswered(r, transport);
}

static void run_fail(struct runner *r, const char *msg)
{
    pthread_mutex_lock(&r->mu);
    if (!r->failed) {
        r->failed = true;
        snprintf(r->fail_msg, sizeof(r->fail_msg), "%s", msg);
    }
    pthread_mutex_unlock(&r->mu);
    atomic_store(&r->stop, true);
}

/* ---- evidence --------------------------------------------------------------------------- */

/* Stores one exchange of the item in hand (if any), secrets masked, excerpt <= 1 KiB. */
static void evidence_put(struct worker *w, const struct store_evidence *ev)
{
    struct runner *r = w->r;
    w->stats.exchanges++;
    breaker_count(r, ev->transport);
    if (!w->item_id)
        return;
    struct store_evidence e = *ev;
    char *url = mask_secrets(ev->url, r->user, r->password);
    char *excerpt = mask_secrets(ev->excerpt, r->user, r->password);
    if (excerpt)
        cut_utf8(excerpt, RUNNER_EXCERPT_MAX);
    e.url = url;
    e.excerpt = excerpt;
    if (w->reconciling && e.step && strcmp(e.step, "lookup") == 0)
        e.step = "reconcile";
    char err[APBOT_ERR_LEN];
    if (store_add_evidence(w->st, w->item_id, &e, NULL, err, sizeof(err)) != APBOT_OK)
        log_msg(r, "warn", "evidence not stored", err);
    free(url);
    free(excerpt);
}

static void on_erp_evidence(void *ctx, const struct store_evidence *ev)
{
    evidence_put(ctx, ev);
}

/* ---- leases ----------------------------------------------------------------------------- */

/*
 * Makes sure the lease outlasts one more exchange. Returns false (and marks the job lost)
 * when another runner took the item over.
 */
static bool job_lease(struct job *j)
{
    struct worker *w = j->w;
    const struct runner_policy *pol = &w->r->pol;
    int64_t now = apbot_clock_mono_ms();
    int64_t need = pol->timeout_ms + pol->connect_timeout_ms + RUNNER_LEASE_MARGIN_MS;
    if (j->lease_until - now >= need)
        return true;
    char err[APBOT_ERR_LEN];
    int rc = store_renew(w->st, j->item.id, w->owner, NULL, pol->lease_ms, err, sizeof(err));
    if (rc == APBOT_OK) {
        j->lease_until = now + pol->lease_ms;
        return true;
    }
    j->lost = true;
    log_msg(w->r, rc == APBOT_E_STATE ? "warn" : "error", "lease not renewed", err);
    if (rc != APBOT_E_STATE)
        run_fail(w->r, err);
    return false;
}

/* ---- login ------------------------------------------------------------------------------ */

enum login_rc { LOGIN_OK, LOGIN_TRANSIENT, LOGIN_SYSTEMIC };

/*
 * A login that looked systemic (refused, no success marker, no form). It trips the breaker
 * only when it repeats RUNNER_LOGIN_CONFIRM times in a row: one odd page (a session killed
 * right after the login redirect shows the login page instead of the home page) must not
 * stop the run. Returns true when the breaker tripped.
 */
static bool login_systemic(struct worker *w, const char *err)
{
    if (++w->systemic_streak >= RUNNER_LOGIN_CONFIRM) {
        breaker_trip(w->r, err);
        return true;
    }
    log_msg(w->r, "warn", "login looked refused; trying once more before stopping", err);
    worker_sleep(w, 200);
    return false;
}

static enum login_rc worker_login(struct worker *w)
{
    char err[APBOT_ERR_LEN];
    int rc = erp_login(w->erp, err, sizeof(err));
    if (rc == APBOT_OK) {
        w->logged_in = true;
        w->login_fails = 0;
        w->systemic_streak = 0;
        w->stats.logins++;
        return LOGIN_OK;
    }
    w->logged_in = false;
    if (rc == APBOT_E_SYSTEMIC && login_systemic(w, err))
        return LOGIN_SYSTEMIC;
    if (!stopping(w->r))
        log_msg(w->r, "warn", "login failed, will retry", err);
    if (++w->login_fails >= RUNNER_LOGIN_FAILS_MAX) {
        char msg[700];
        snprintf(msg, sizeof(msg), "login failed %d times in a row (last: %s)", w->login_fails,
                 err);
        breaker_trip(w->r, msg);
        return LOGIN_SYSTEMIC;
    }
    return LOGIN_TRANSIENT;
}

/* ---- the lookup (checking, reconciling) ------------------------------------------------- */

static int64_t abs64(int64_t v)
{
    return v < 0 ? -v : v;
}

/*
 * checking / reconciling: looks the key up and returns found, found-conflict, not-found or
 * lookup-failed; `released` when the run is stopping or the breaker tripped meanwhile.
 */
static enum machine_event job_lookup(struct job *j)
{
    struct worker *w = j->w;
    struct erp_lookup_result res;
    char err[APBOT_ERR_LEN];

    if (stopping(w->r))
        return MACHINE_EV_RELEASED;
    if (!j->inv_ok) {
        snprintf(j->detail, sizeof(j->detail), "the queued payload cannot be read");
        return MACHINE_EV_LOOKUP_FAILED;
    }
    if (!job_lease(j))
        return MACHINE_EV_RELEASED;
    w->stats.lookups++;
    j->looked_at = apbot_clock_mono_ms();
    int rc = erp_lookup(w->erp, j->item.key, &j->inv, j->inv.currency, &res, err, sizeof(err));
    if (rc == APBOT_E_SYSTEMIC) {
        w->logged_in = false;
        j->systemic = login_systemic(w, err);
        return MACHINE_EV_RELEASED; /* nothing learnt: back untouched, no attempt spent */
    }
    if (rc != APBOT_OK) {
        snprintf(j->detail, sizeof(j->detail), "lookup: %.400s", err);
        return stopping(w->r) ? MACHINE_EV_RELEASED : MACHINE_EV_LOOKUP_FAILED;
    }
    enum machine_event ev = MACHINE_EV_LOOKUP_FAILED;
    switch (res.answer) {
    case ERP_FOUND_UNFINISHED: /* not produced until the ERP driver reads <finished> */
    case ERP_FAILED:
        if (stopping(w->r)) {
            ev = MACHINE_EV_RELEASED;
            break;
        }
        snprintf(j->detail, sizeof(j->detail), "%s", res.detail);
        if (res.retry_after_s > 0)
            j->retry_after_ms = res.retry_after_s * 1000;
        ev = MACHINE_EV_LOOKUP_FAILED;
        break;
    case ERP_NOT_FOUND:
        w->logged_in = true; /* answered: erp_lookup logged in again if it had to */
        snprintf(j->detail, sizeof(j->detail), "not in the ERP");
        ev = MACHINE_EV_NOT_FOUND;
        break;
    case ERP_FOUND: {
        const struct erp_row *row = &res.hits.rows[0];
        w->logged_in = true;
        if (res.hits.n > 1) {
            snprintf(j->detail, sizeof(j->detail), "%zu ERP documents carry this key (%s, %s)",
                     res.hits.n, row->doc ? row->doc : "?",
                     res.hits.rows[1].doc ? res.hits.rows[1].doc : "?");
            ev = MACHINE_EV_FOUND_CONFLICT;
        } else if (!row->doc) {
            snprintf(j->detail, sizeof(j->detail), "a hit without a document number");
            ev = MACHINE_EV_LOOKUP_FAILED;
        } else if (row->vendor && strcmp(row->vendor, j->inv.vendor_id) != 0) {
            snprintf(j->detail, sizeof(j->detail), "ERP document %s has vendor %s, not %s",
                     row->doc, row->vendor, j->inv.vendor_id);
            ev = MACHINE_EV_FOUND_CONFLICT;
        } else if (row->currency && strcmp(row->currency, j->inv.currency) != 0) {
            snprintf(j->detail, sizeof(j->detail), "ERP document %s is in %s, not %s", row->doc,
                     row->currency, j->inv.currency);
            ev = MACHINE_EV_FOUND_CONFLICT;
        } else if (row->amount_text && (!row->has_amount || row->exponent != j->inv.exponent ||
                                        abs64(row->amount) != abs64(j->inv.payable))) {
            snprintf(j->detail, sizeof(j->detail),
                     "ERP document %s has amount %s, the invoice %" PRId64 " minor units", row->doc,
                     row->amount_text, j->inv.payable);
            ev = MACHINE_EV_FOUND_CONFLICT;
        } else {
            snprintf(j->doc, sizeof(j->doc), "%s", row->doc);
            snprintf(j->detail, sizeof(j->detail), "found as %s", row->doc);
            ev = MACHINE_EV_FOUND;
        }
        break;
    }
    }
    erp_lookup_result_done(&res);
    return ev;
}

/* ---- the post (posting) ----------------------------------------------------------------- */

/* Trips the breaker for a changed screen and hands the item back untouched. */
static enum machine_event step_systemic(struct job *j, const char *msg)
{
    struct worker *w = j->w;
    snprintf(j->detail, sizeof(j->detail), "%.480s", msg);
    if (j->commit_sent)
        return MACHINE_EV_UNKNOWN; /* a screen after the commit: reconcile, no breaker */
    /* One odd page (a maintenance notice served with 200) gives the item back untouched;
     * the same in a row RUNNER_FORM_CONFIRM times means the form is gone: stop the run. */
    if (++w->form_streak < RUNNER_FORM_CONFIRM) {
        log_msg(w->r, "warn", "the ERP's page lacks the flow's form; item given back", msg);
        worker_sleep(w, 200);
        return MACHINE_EV_RELEASED;
    }
    breaker_trip(w->r, msg);
    j->systemic = true;
    return MACHINE_EV_RELEASED;
}

/* The post's hooks: the run still going and the lease held, before each step that precedes the
 * commit and right before the committing request (a recovered item must not be posted twice). */
static bool post_stopping(void *ctx)
{
    struct job *j = ctx;
    return stopping(j->w->r) || !job_lease(j);
}

static bool post_before_commit(void *ctx)
{
    struct job *j = ctx;
    if (stopping(j->w->r) || !job_lease(j))
        return false;
    j->w->stats.posts_sent++;
    j->commit_sent = true;
    return true;
}

/* posting: runs the post through erp_post_run (erp_post.h) and turns its verdict into the
 * machine's event. Flows with steps after the committing one are refused at start
 * (flow_unsupported) until this runner drives the finishing state. */
static enum machine_event job_post(struct job *j)
{
    struct worker *w = j->w;
    struct erp_post_hooks hooks = {
        .ctx = j, .before_commit = post_before_commit, .stopping = post_stopping};
    struct erp_post_result res;
    char err[APBOT_ERR_LEN];

    j->commit_sent = false;
    if (!j->inv_ok) {
        snprintf(j->detail, sizeof(j->detail), "the queued payload cannot be read");
        return MACHINE_EV_NOT_SENT;
    }
    if (stopping(w->r))
        return MACHINE_EV_RELEASED;
    if (!w->logged_in || j->relogin) {
        j->relogin = false;
        enum login_rc lr = worker_login(w);
        if (lr == LOGIN_SYSTEMIC) {
            j->systemic = true;
            return MACHINE_EV_RELEASED;
        }
        if (lr == LOGIN_TRANSIENT) {
            snprintf(j->detail, sizeof(j->detail), "login before the post failed");
            return stopping(w->r) ? MACHINE_EV_RELEASED : MACHINE_EV_NOT_SENT;
        }
    }
    if (erp_post_run(w->erp, &j->inv, j->item.key, ERP_POST_FROM_START, NULL, &hooks, &res, err,
                     sizeof(err)) != APBOT_OK) {
        snprintf(j->detail, sizeof(j->detail), "%.480s", err);
        return MACHINE_EV_NOT_SENT;
    }
    if (j->commit_sent && !res.commit_sent)
        w->stats.posts_sent--; /* provably never left: not a post */
    j->commit_sent = res.commit_sent;
    w->logged_in = erp_logged_in(w->erp);
    if (res.retry_after_ms > 0)
        j->retry_after_ms = res.retry_after_ms;
    snprintf(j->detail, sizeof(j->detail), "%s", res.detail);
    if (res.doc[0])
        snprintf(j->doc, sizeof(j->doc), "%s", res.doc);
    if (res.reason[0])
        snprintf(j->reason, sizeof(j->reason), "%s", res.reason);
    if (res.login_refused) {
        j->systemic = login_systemic(w, res.detail);
        return j->commit_sent ? MACHINE_EV_UNKNOWN : MACHINE_EV_RELEASED;
    }
    if (res.released)
        return MACHINE_EV_RELEASED;
    if (res.verdict != DECIDE_SYSTEMIC)
        w->form_streak = 0;
    switch (res.verdict) {
    case DECIDE_CONFIRMED:
        return MACHINE_EV_CONFIRMED;
    case DECIDE_REJECTED:
        return MACHINE_EV_REJECTED;
    case DECIDE_ALREADY_EXISTS:
        return MACHINE_EV_ALREADY_EXISTS;
    case DECIDE_UNKNOWN:
        return MACHINE_EV_UNKNOWN;
    case DECIDE_NOT_SENT:
        return stopping(w->r) && !j->commit_sent ? MACHINE_EV_RELEASED : MACHINE_EV_NOT_SENT;
    case DECIDE_SYSTEMIC:
        return step_systemic(j, res.detail);
    case DECIDE_SAVED: /* no follow-up steps in a flow this runner accepts */
    case DECIDE_FOLLOWUP_FAILED:
    case DECIDE_NEXT:
    case DECIDE_RESTART:
    case DECIDE_RESTART_FOLLOWUPS:
    case DECIDE_POST__COUNT:
        break;
    }
    return j->commit_sent ? MACHINE_EV_UNKNOWN : MACHINE_EV_NOT_SENT;
}

/* ---- one claimed item ------------------------------------------------------------------- */

/* The backoff the machine's delay asks for (the store turns delays into due times). */
static int64_t backoff_of(struct job *j, const struct machine_step *step)
{
    struct worker *w = j->w;
    const struct runner_policy *pol = &w->r->pol;
    if (step->delay != MACHINE_DELAY_BACKOFF)
        return 0;
    int n = step->next == MACHINE_RECONCILING ? step->counters.cycles : step->counters.attempts;
    return runner_backoff_ms(pol->backoff_base_ms, pol->backoff_cap_ms, n > 0 ? n - 1 : 0,
                             j->retry_after_ms, rng_next(&w->rng));
}

/*
 * Applies one event to the item: machine_next, then store_apply in one transaction.
 * Returns true when the worker continues with the item (*state updated).
 */
static bool job_apply(struct job *j, enum machine_state *state, enum machine_event ev)
{
    struct worker *w = j->w;
    struct runner *r = w->r;
    struct machine_counters c = j->item.counters;
    struct apbot_now now;
    apbot_clock_now(&now);
    /* Judged when the lookup began: a search that started before the deadline and ended
     * after it may have missed a late commit. */
    struct apbot_now looked = now;
    if (j->looked_at)
        looked.mono_ms = j->looked_at;
    c.settled = store_settled(&j->item, &looked, r->pol.settle_ms);
    struct machine_step step;
    char err[APBOT_ERR_LEN];

    if (j->lost)
        return false;
    /* ERP messages may echo the user id: nothing secret reaches the row, event or log. */
    mask_in_place(r, j->reason, sizeof(j->reason));
    mask_in_place(r, j->detail, sizeof(j->detail));
    int rc = machine_next(*state, ev, &c, &r->pol.machine, &step);
    if (rc != APBOT_OK) {
        char msg[APBOT_ERR_LEN];
        snprintf(msg, sizeof(msg), "item %" PRId64 ": no transition for %s in %s (%s)", j->item.id,
                 machine_event_name(ev), machine_state_name(*state), apbot_strerror(rc));
        log_msg(r, "error", "bug", msg);
        return false;
    }
    /* A stop arriving after a clean "not found" must not start a post. */
    bool keep = step.next == MACHINE_POSTING && !stopping(r);
    char reason[700];
    const char *reason_p = NULL;
    const char *doc = NULL;
    switch (step.next) {
    case MACHINE_COMPLETED:
        doc = j->doc[0] ? j->doc : NULL;
        reason_p = "";
        break;
    case MACHINE_BUSINESS_EXCEPTION:
        reason_p = j->reason[0] ? j->reason : j->detail;
        break;
    case MACHINE_MANUAL_REVIEW:
        snprintf(reason, sizeof(reason), "%s; last outcome: %s: %s", step.why,
                 machine_event_name(ev), j->detail[0] ? j->detail : "-");
        reason_p = reason;
        break;
    case MACHINE_NEW:
    case MACHINE_CHECKING:
    case MACHINE_POSTING:
    case MACHINE_RECONCILING:
    case MACHINE_FINISHING:
    case MACHINE_STATE__COUNT:
    case MACHINE_STATE_INVALID:
        break;
    }
    if (step.next == MACHINE_POSTING && !keep) {
        /* Stopping: give the item back instead of committing an intent we will not use. */
        ev = MACHINE_EV_RELEASED;
        rc = machine_next(*state, ev, &c, &r->pol.machine, &step);
        if (rc != APBOT_OK)
            return false;
    }
    char actor[200];
    snprintf(actor, sizeof(actor), "runner:%s", w->owner);
    struct store_change ch = {
        .from = *state,
        .event = ev,
        .step = &step,
        .backoff_ms = backoff_of(j, &step),
        .settle_ms = r->pol.settle_ms,
        .erp_doc = doc,
        .reason = reason_p,
        .detail = j->detail[0] ? j->detail : NULL,
        .actor = actor,
        .keep_lease = keep,
    };
    int64_t holder = 0;
    rc = store_apply(w->st, j->item.id, w->owner, &ch, &now, &holder, err, sizeof(err));
    if (rc == APBOT_E_CONFLICT) {
        /* One document, one item: both go to a human. */
        log_msg(r, "warn", "document held by another item", err);
        snprintf(j->detail, sizeof(j->detail), "document %.100s is held by item #%" PRId64,
                 doc ? doc : "?", holder);
        char hdetail[200];
        snprintf(hdetail, sizeof(hdetail), "document %.100s is claimed by item #%" PRId64 " too",
                 doc ? doc : "?", j->item.id);
        struct machine_step dc;
        struct machine_counters hc = {0};
        struct store_change hch = {.event = MACHINE_EV_DOC_CONFLICT,
                                   .step = &dc,
                                   .detail = hdetail,
                                   .reason = hdetail,
                                   .actor = actor,
                                   .take_over = true};
        struct store_item h;
        if (store_get(w->st, holder, &h, NULL, 0) == APBOT_OK) {
            hc = h.counters;
            hch.from = h.state;
            char herr[APBOT_ERR_LEN];
            if (machine_next(h.state, MACHINE_EV_DOC_CONFLICT, &hc, &r->pol.machine, &dc) ==
                    APBOT_OK &&
                store_apply(w->st, holder, NULL, &hch, &now, NULL, herr, sizeof(herr)) != APBOT_OK)
                log_msg(r, "warn", "document holder not sent to review", herr);
            store_item_done(&h);
        }
        ev = MACHINE_EV_DOC_CONFLICT;
        rc = machine_next(*state, ev, &c, &r->pol.machine, &step);
        if (rc != APBOT_OK)
            return false;
        snprintf(reason, sizeof(reason), "%s; %s", step.why, j->detail);
        ch.event = ev;
        ch.erp_doc = NULL;
        ch.reason = reason;
        ch.keep_lease = keep = false;
        doc = NULL;
        reason_p = reason;
        rc = store_apply(w->st, j->item.id, w->owner, &ch, &now, NULL, err, sizeof(err));
    }
    if (rc != APBOT_OK) {
        j->lost = true;
        if (rc == APBOT_E_STATE) {
            log_msg(r, "warn", "item taken over; result dropped", err);
        } else {
            log_msg(r, "error", "store", err);
            run_fail(r, err);
        }
        return false;
    }
    w->stats.transitions++;
    switch (step.next) {
    case MACHINE_COMPLETED:
        w->stats.completed++;
        break;
    case MACHINE_BUSINESS_EXCEPTION:
        w->stats.business_exception++;
        break;
    case MACHINE_MANUAL_REVIEW:
        w->stats.manual_review++;
        break;
    case MACHINE_NEW:
    case MACHINE_CHECKING:
    case MACHINE_POSTING:
    case MACHINE_RECONCILING:
    case MACHINE_FINISHING:
    case MACHINE_STATE__COUNT:
    case MACHINE_STATE_INVALID:
        break;
    }
    log_transition(w, &j->item, *state, step.next, ev, doc, reason_p, j->detail);
    j->item.counters = step.counters;
    *state = step.next;
    j->doc[0] = j->reason[0] = j->detail[0] = '\0';
    j->retry_after_ms = 0;
    j->looked_at = 0;
    return keep;
}

/* Drives one claimed item until it leaves the worker's hands. */
static void job_run(struct worker *w, struct store_item *it)
{
    struct job j;
    char err[APBOT_ERR_LEN];
    memset(&j, 0, sizeof(j));
    j.w = w;
    j.item = *it;
    j.lease_until = it->lease_mono;
    invoice_init(&j.inv);
    j.inv_ok = invoice_from_json(it->payload, &j.inv, err, sizeof(err)) == APBOT_OK;
    if (!j.inv_ok)
        log_msg(w->r, "error", "payload unreadable", err);
    enum machine_state state = it->state;
    w->item_id = it->id;
    w->stats.claims++;
    if (state == MACHINE_CHECKING) {
        w->stats.transitions++; /* store_claim moved it from new */
        log_transition(w, it, MACHINE_NEW, MACHINE_CHECKING, MACHINE_EV_CLAIMED, NULL, NULL, NULL);
    }

    /* checking/reconciling -> (posting ->) out of our hands: at most two events. */
    for (int round = 0; round < 3 && !j.lost; round++) {
        enum machine_event ev = MACHINE_EV_RELEASED;
        switch (state) {
        case MACHINE_CHECKING:
        case MACHINE_RECONCILING:
            w->reconciling = state == MACHINE_RECONCILING;
            ev = job_lookup(&j);
            break;
        case MACHINE_POSTING:
            w->reconciling = false;
            ev = job_post(&j);
            break;
        case MACHINE_NEW:
        case MACHINE_FINISHING: /* follow-up steps: not driven by this runner yet */
        case MACHINE_COMPLETED:
        case MACHINE_BUSINESS_EXCEPTION:
        case MACHINE_MANUAL_REVIEW:
        case MACHINE_STATE__COUNT:
        case MACHINE_STATE_INVALID:
            goto out;
        }
        if (ev == MACHINE_EV_RELEASED && state == MACHINE_POSTING && j.commit_sent)
            ev = MACHINE_EV_UNKNOWN; /* never hand back what may have been booked */
        if (!job_apply(&j, &state, ev))
            break;
    }
out:
    w->item_id = 0;
    w->reconciling = false;
    invoice_done(&j.inv);
}

/* ---- workers ---------------------------------------------------------------------------- */

/* While the ERP seems silent: no claims, just a probe of the login page now and then. */
static void worker_probe(struct worker *w, int *probes)
{
    const struct flow *f = w->r->flow;
    char *url = erp_url(w->erp, f->login.present && f->login.get ? f->login.get : "/");
    struct http_response resp;
    memset(&resp, 0, sizeof(resp));
    if (url && http_get(erp_http(w->erp), url, &resp) == APBOT_OK) {
        w->stats.exchanges++;
        char t[320];
        snprintf(t, sizeof(t), "%s: %s", http_transport_name(resp.transport), resp.detail);
        breaker_count(w->r, t);
        if (resp.transport == HTTP_ANSWERED)
            w->logged_in = false; /* a long silence may have ended our session */
    }
    http_response_done(&resp);
    free(url);
    int64_t pause = runner_backoff_ms(100, RUNNER_PROBE_CAP_MS, (*probes)++, 0, rng_next(&w->rng));
    worker_sleep(w, pause < 50 ? 50 : pause);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct runner *r = w->r;
    char err[APBOT_ERR_LEN];
    int probes = 0;

    if (store_open(r->opt->db_path, &w->st, err, sizeof(err)) != APBOT_OK) {
        run_fail(r, err);
        goto out;
    }
    if (erp_open(&r->run_flow, r->base_url, &r->abort_io, &w->erp, err, sizeof(err)) != APBOT_OK) {
        run_fail(r, err);
        goto out;
    }
    erp_set_evidence(w->erp, on_erp_evidence, w);

    for (long iter = 0; !stopping(r); iter++) {
        if (breaker_suspect(r)) {
            worker_probe(w, &probes);
            continue;
        }
        probes = 0;
        if (!w->logged_in) {
            enum login_rc lr = worker_login(w);
            if (lr == LOGIN_SYSTEMIC)
                break;
            if (lr == LOGIN_TRANSIENT) {
                worker_sleep(w, runner_backoff_ms(r->pol.backoff_base_ms, r->pol.backoff_cap_ms,
                                                  w->login_fails, 0, rng_next(&w->rng)));
                continue;
            }
        }
        struct store_item it;
        struct machine_step claimed;
        struct machine_counters fresh = {0};
        int rc = machine_next(MACHINE_NEW, MACHINE_EV_CLAIMED, &fresh, &r->pol.machine, &claimed);
        if (rc == APBOT_OK)
            rc = store_claim(w->st, w->owner, NULL, r->pol.lease_ms, &claimed, &it, err,
                             sizeof(err));
        if (rc == APBOT_E_NOTFOUND || rc == APBOT_E_BUSY) {
            int64_t wait = -1;
            int64_t pause = r->pol.poll_ms;
            if (store_next_due(w->st, NULL, &wait, NULL, 0) == APBOT_OK && wait > 0 && wait < pause)
                pause = wait;
            worker_sleep(w, pause < 5 ? 5 : pause);
            continue;
        }
        if (rc != APBOT_OK) {
            run_fail(r, err);
            break;
        }
        job_run(w, &it);
        store_item_done(&it);
    }
out:
    erp_close(w->erp);
    w->erp = NULL;
    store_close(w->st);
    w->st = NULL;
    pthread_mutex_lock(&r->mu);
    struct runner_stats *t = &r->totals;
    t->claims += w->stats.claims;
    t->transitions += w->stats.transitions;
    t->lookups += w->stats.lookups;
    t->posts_sent += w->stats.posts_sent;
    t->exchanges += w->stats.exchanges;
    t->logins += w->stats.logins;
    t->completed += w->stats.completed;
    t->business_exception += w->stats.business_exception;
    t->manual_review += w->stats.manual_review;
    pthread_mutex_unlock(&r->mu);
    atomic_fetch_sub(&r->running, 1);
    return NULL;
}

/* ---- the calling thread ----------------------------------------------------------------- */

/* A flow element this runner does not drive yet, or NULL: refusing the flow is safer than
 * driving half of it (the post's own elements are erp_post_run's). */
static const char *flow_unsupported(const struct flow *f)
{
    for (size_t i = 0; i < f->n_session_expired; i++)
        if (f->session_expired[i].status || f->session_expired[i].redirect)
            return "<session-expired status= or redirect=>";
    if (f->login.present && !f->login.has_form)
        return "a login without <form>";
    if (f->lookup.detail.present || f->lookup.has_finished)
        return "<detail> or <finished> in the lookup";
    if (flow_commit_index(f) + 1 < f->n_steps)
        return "steps after the committing step";
    return NULL;
}

static long pick(long override, long flow_value, long fallback)
{
    if (override > 0)
        return override;
    return flow_value > 0 ? flow_value : fallback;
}

static void policy_setup(struct runner *r)
{
    const struct runner_options *o = r->opt;
    const struct flow_policy *fp = &r->flow->policy;
    struct runner_policy *p = &r->pol;
    struct flow_policy def = flow_policy_default(); /* the one place of the defaults */

    p->timeout_ms = pick(o->timeout_ms, fp->timeout_ms, def.timeout_ms);
    p->connect_timeout_ms =
        pick(o->connect_timeout_ms, fp->connect_timeout_ms, def.connect_timeout_ms);
    p->settle_ms = pick(o->settle_ms, fp->settle_ms, def.settle_ms);
    p->backoff_base_ms = pick(o->backoff_base_ms, fp->backoff_base_ms, def.backoff_base_ms);
    p->backoff_cap_ms = pick(o->backoff_cap_ms, fp->backoff_cap_ms, def.backoff_cap_ms);
    if (p->backoff_cap_ms < p->backoff_base_ms)
        p->backoff_cap_ms = p->backoff_base_ms;
    p->lease_ms = pick(o->lease_ms, fp->lease_ms, def.lease_ms);
    /* A lease must outlast one exchange plus the renewal before it. */
    long min_lease = p->timeout_ms + p->connect_timeout_ms + 2 * RUNNER_LEASE_MARGIN_MS;
    if (p->lease_ms < min_lease)
        p->lease_ms = min_lease;
    p->poll_ms = pick(o->poll_ms, 0, 200);
    p->machine.max_posts = (int)pick(o->max_posts, fp->max_posts, def.max_posts);
    p->machine.max_cycles = (int)pick(o->max_cycles, fp->max_cycles, def.max_cycles);
    p->machine.max_attempts = (int)pick(o->max_attempts, fp->max_attempts, def.max_attempts);
    p->breaker_failures = (int)pick(o->breaker_failures, 0, 10);
    p->breaker_window_ms = pick(o->breaker_window_ms, 0, 30000);

    r->run_flow = *r->flow; /* shallow: shares every pointer, never freed itself */
    r->run_flow.policy.timeout_ms = p->timeout_ms;
    r->run_flow.policy.connect_timeout_ms = p->connect_timeout_ms;
    r->run_flow.policy.settle_ms = p->settle_ms;
}

static void make_owner(struct runner *r)
{
    if (r->opt->owner && *r->opt->owner) {
        snprintf(r->owner, sizeof(r->owner), "%s", r->opt->owner);
        return;
    }
    char host[64] = "localhost";
    if (gethostname(host, sizeof(host)) != 0)
        snprintf(host, sizeof(host), "localhost");
    host[sizeof(host) - 1] = '\0';
    snprintf(r->owner, sizeof(r->owner), "%s:%ld:%08" PRIx32, host, (long)getpid(),
             (uint32_t)seed_random());
}

static void progress_draw(const struct store_counts *c, int64_t elapsed_ms, bool final)
{
    int64_t done = c->by_state[MACHINE_COMPLETED] + c->by_state[MACHINE_BUSINESS_EXCEPTION] +
                   c->by_state[MACHINE_MANUAL_REVIEW];
    int64_t pending = c->total - done;
    int64_t secs = elapsed_ms / 1000;
    fprintf(stderr,
            "\r\033[Kapbot run %" PRId64 "/%" PRId64 " settled | completed %" PRId64
            " | exception %" PRId64 " | review %" PRId64 " | pending %" PRId64
            " (reconciling %" PRId64 ") | %d:%02d%s",
            done, c->total, c->by_state[MACHINE_COMPLETED], c->by_state[MACHINE_BUSINESS_EXCEPTION],
            c->by_state[MACHINE_MANUAL_REVIEW], pending, c->by_state[MACHINE_RECONCILING],
            (int)(secs / 60), (int)(secs % 60), final ? "\n" : "");
    fflush(stderr);
}

static int64_t pending_of(const struct store_counts *c)
{
    return c->by_state[MACHINE_NEW] + c->by_state[MACHINE_CHECKING] + c->by_state[MACHINE_POSTING] +
           c->by_state[MACHINE_RECONCILING] + c->by_state[MACHINE_FINISHING];
}

int runner_run(const struct runner_options *opt, struct runner_stats *ret)
{
    struct runner_stats dummy;
    struct runner *r = NULL;
    struct worker *workers = NULL;
    struct store *st = NULL;
    char err[APBOT_ERR_LEN] = "";
    int rc = APBOT_OK;
    int n = 0;

    if (!ret)
        ret = &dummy;
    memset(ret, 0, sizeof(*ret));
    ret->stop = RUNNER_STOP_ERROR;
    if (!opt || !opt->flow_path || !opt->db_path || opt->concurrency < 0 || opt->max_seconds < 0) {
        snprintf(ret->message, sizeof(ret->message), "run: flow and database are required");
        return APBOT_E_INVAL;
    }
    r = calloc(1, sizeof(*r));
    if (!r)
        abort();
    r->opt = opt;
    pthread_mutex_init(&r->mu, NULL);
    atomic_init(&r->stop, false);
    atomic_init(&r->running, 0);
    r->started_mono = mono_ms();

    rc = flow_load(opt->flow_path, &r->flow, err, sizeof(err));
    if (rc != APBOT_OK) {
        snprintf(ret->message, sizeof(ret->message), "flow %.100s: %.400s", opt->flow_path, err);
        goto out;
    }
    const char *unsupported = flow_unsupported(r->flow);
    if (unsupported) {
        rc = APBOT_E_INVAL;
        snprintf(ret->message, sizeof(ret->message), "flow %.100s: this runner cannot drive %s yet",
                 opt->flow_path, unsupported);
        goto out;
    }
    r->base_url = opt->erp_url && *opt->erp_url ? opt->erp_url : r->flow->base_url;
    r->user = getenv("APBOT_ERP_USER");
    r->password = getenv("APBOT_ERP_PASSWORD");
    policy_setup(r);
    make_owner(r);

    rc = store_open(opt->db_path, &st, err, sizeof(err));
    if (rc != APBOT_OK) {
        snprintf(ret->message, sizeof(ret->message), "%s", err);
        goto out;
    }
    int recovered = 0;
    rc = store_recover_settle(st, NULL, r->pol.settle_ms, &r->pol.machine, &recovered, err,
                              sizeof(err));
    if (rc != APBOT_OK) {
        snprintf(ret->message, sizeof(ret->message), "recovery: %.400s", err);
        goto out;
    }

    int max_sessions = r->flow->policy.max_sessions > 0 ? r->flow->policy.max_sessions : 1;
    n = opt->concurrency > 0 ? opt->concurrency : max_sessions;
    if (n > max_sessions)
        n = max_sessions;
    char line[512];
    snprintf(line, sizeof(line),
             "owner=%s sessions=%d erp=%s recovered=%d settle_ms=%ld timeout_ms=%ld", r->owner, n,
             r->base_url ? r->base_url : "-", recovered, r->pol.settle_ms, r->pol.timeout_ms);
    log_msg(r, "info", "run started", line);

    workers = calloc((size_t)n, sizeof(*workers));
    if (!workers)
        abort();
    uint64_t seed = opt->seed ? opt->seed : seed_random();
    /* Workers must not take SIGINT/SIGTERM: the calling thread turns them into a stop. */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    for (int i = 0; i < n; i++) {
        struct worker *w = &workers[i];
        w->r = r;
        w->index = i;
        w->rng = seed + (uint64_t)i * UINT64_C(0x9E3779B97F4A7C15);
        snprintf(w->owner, sizeof(w->owner), "%s/w%d", r->owner, i);
        atomic_fetch_add(&r->running, 1);
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            atomic_fetch_sub(&r->running, 1);
            run_fail(r, "cannot start a worker thread");
            break;
        }
        w->started = true;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);

    /* Watch: clock, cancel, breaker, queue, progress. */
    enum runner_stop why = RUNNER_STOP_CANCEL;
    int64_t last_recover = mono_ms(), last_progress = 0, last_count = 0;
    struct store_counts counts;
    memset(&counts, 0, sizeof(counts));
    bool have_counts = false;
    for (;;) {
        int64_t now = mono_ms();
        int64_t elapsed = now - r->started_mono;
        pthread_mutex_lock(&r->mu);
        bool tripped = r->tripped, failed = r->failed;
        pthread_mutex_unlock(&r->mu);
        if (failed) {
            why = RUNNER_STOP_ERROR;
            break;
        }
        if (tripped) {
            why = RUNNER_STOP_SYSTEMIC;
            break;
        }
        if (opt->cancel && *opt->cancel) {
            why = RUNNER_STOP_CANCEL;
            break;
        }
        if (opt->max_seconds > 0 && elapsed >= opt->max_seconds * 1000) {
            why = RUNNER_STOP_TIME;
            break;
        }
        if (atomic_load(&r->running) == 0) {
            why = RUNNER_STOP_ERROR;
            run_fail(r, "every worker stopped");
            break;
        }
        if (now - last_recover >= RUNNER_RECOVER_EVERY_MS) {
            last_recover = now;
            int nrec = 0;
            if (store_recover_settle(st, NULL, r->pol.settle_ms, &r->pol.machine, &nrec, err,
                                     sizeof(err)) != APBOT_OK)
                log_msg(r, "warn", "recovery", err);
            else if (nrec > 0)
                log_msg(r, "info", "recovered expired leases", NULL);
        }
        if (now - last_count >= 250) {
            last_count = now;
            if (store_counts(st, &counts, err, sizeof(err)) == APBOT_OK) {
                have_counts = true;
                if (opt->until_empty && pending_of(&counts) == 0) {
                    why = RUNNER_STOP_EMPTY;
                    break;
                }
            }
        }
        if (opt->progress && have_counts && now - last_progress >= RUNNER_PROGRESS_EVERY_MS) {
            last_progress = now;
            progress_draw(&counts, elapsed, false);
        }
        sleep_ms(RUNNER_TICK_MS);
    }

    /* Stop: in-flight exchanges are cut short, items handed back by their workers. */
    atomic_store(&r->stop, true);
    r->abort_io = 1;
    for (int i = 0; i < n; i++)
        if (workers[i].started)
            pthread_join(workers[i].thread, NULL);

    pthread_mutex_lock(&r->mu);
    *ret = r->totals;
    if (r->tripped && why != RUNNER_STOP_ERROR)
        why = RUNNER_STOP_SYSTEMIC;
    ret->stop = why;
    if (why == RUNNER_STOP_SYSTEMIC)
        snprintf(ret->message, sizeof(ret->message), "%s", r->trip_msg);
    else if (why == RUNNER_STOP_ERROR)
        snprintf(ret->message, sizeof(ret->message), "%s", r->fail_msg);
    pthread_mutex_unlock(&r->mu);
    ret->workers = n;
    if (store_counts(st, &counts, err, sizeof(err)) == APBOT_OK) {
        ret->pending = pending_of(&counts);
        if (opt->progress)
            progress_draw(&counts, mono_ms() - r->started_mono, true);
    }
    ret->elapsed_ms = mono_ms() - r->started_mono;
    rc = why == RUNNER_STOP_SYSTEMIC ? APBOT_E_SYSTEMIC
         : why == RUNNER_STOP_ERROR  ? APBOT_E_DB
                                     : APBOT_OK;
    snprintf(line, sizeof(line),
             "stop=%s completed=%" PRId64 " business_exception=%" PRId64 " manual_review=%" PRId64
             " pending=%" PRId64 " elapsed_ms=%" PRId64,
             runner_stop_name(why), ret->completed, ret->business_exception, ret->manual_review,
             ret->pending, ret->elapsed_ms);
    log_msg(r, why == RUNNER_STOP_SYSTEMIC || why == RUNNER_STOP_ERROR ? "error" : "info",
            "run stopped", line);
    if (ret->message[0])
        log_msg(r, why == RUNNER_STOP_SYSTEMIC || why == RUNNER_STOP_ERROR ? "error" : "info",
                "reason", ret->message);
out:
    free(workers);
    store_close(st);
    if (r) {
        flow_free(r->flow);
        pthread_mutex_destroy(&r->mu);
        free(r);
    }
    return rc;
}
