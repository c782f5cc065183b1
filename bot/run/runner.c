/*
 * runner.c - `apbot run`: the workers that drive queued items through the state machine,
 * the circuit breaker, the settle delay that learns from late commits, the limit on working
 * sessions, and the calling thread's watch over clock, signals, recovery and progress.
 *
 * One worker thread per ERP session (the flow's max-sessions, or --concurrency); a limiter
 * lets only as many work at once as the ERP can take (fixed, or adaptive with --concurrency
 * auto: limiter.h). Each worker owns a store connection and an ERP session, and is blocking:
 * one exchange at a time, interrupted by the shared abort flag its exchanges poll. Per item
 * the worker learns an event from the ERP - a lookup (checking, reconciling, and finishing
 * when claimed), the post through every step (erp_post_run), or the follow-up steps on a
 * saved document - and hands it to the one state setter (transition_apply), which asks the
 * machine and persists the change with its audit event. The intent to post is committed
 * before any step of the form is sent; a saved document is committed before its follow-up
 * steps run. What an answer means is decided by decide.c, not here.
 *
 * The settle delay of a reconciliation is measured on CLOCK_BOOTTIME from the moment the
 * ambiguity was recorded (the store keeps the stamp with its boot id): a step of the wall
 * clock cannot shorten it. When a reconciliation finds a document the ERP booked later than
 * the client gave up, the lateness is kept per flow in the queue; once the longest late
 * commit reaches half the settle delay, the delay in force becomes twice that for the rest of
 * the run (and for later runs of the flow), and the log says so.
 *
 * The circuit breaker stops the run (APBOT_E_SYSTEMIC) on a refused login (one refusal across
 * all sessions: until a login has succeeded, sessions log in one at a time), the entry form
 * or a field missing three times in a row, or an unreachable ERP: breaker_failures
 * consecutive unanswered exchanges across workers spanning at least breaker_window_ms. After
 * a few unanswered exchanges the workers stop claiming and probe instead, so a short outage
 * is ridden out without spending items' budgets. In-flight items are handed back with the
 * `released` event (or `unknown` once the committing request may have gone out).
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

#include "apbot/buf.h"
#include "apbot/clock.h"
#include "apbot/erp.h"
#include "apbot/flow.h"
#include "apbot/invoice.h"
#include "apbot/machine.h"
#include "apbot/mem.h"
#include "apbot/money.h"
#include "apbot/store.h"
#include "apbot/text.h"
#include "erp/docmatch.h"
#include "erp/erp_post.h"
#include "queue/transition.h"
#include "run/limiter.h"

#define RUNNER_EXCERPT_MAX 1024   /* bytes of page text kept per exchange */
#define RUNNER_SUSPECT_FAILURES 3 /* unanswered in a row: stop claiming, probe instead */
#define RUNNER_PROBE_CAP_MS 1000  /* longest pause between probes of a silent ERP */
#define RUNNER_LOGIN_FAILS_MAX 30 /* transient login failures in a row before giving up */
#define RUNNER_FORM_CONFIRM 3     /* pages without the flow's form in a row that trip */
#define RUNNER_JOB_ROUNDS 8       /* events one claim may apply (checking, posting, ...) */
#define RUNNER_RECOVER_EVERY_MS 1000
#define RUNNER_TICK_MS 100
#define RUNNER_PROGRESS_EVERY_MS 500
#define RUNNER_LEASE_MARGIN_MS 2000
#define RUNNER_PENDING_MAX 64 /* exchanges of one item kept before they are stored */

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
    struct limiter *limiter;

    atomic_int abort_io;       /* written by the calling thread only; workers' http polls it */
    atomic_bool stop;          /* workers: finish the current item and leave */
    atomic_int running;        /* workers still in their loop */
    _Atomic int64_t settle_ms; /* the settle delay in force (raised by late commits) */
    _Atomic int64_t max_late;  /* the longest late commit seen (ms) */
    atomic_bool login_ok_once; /* a login succeeded in this run */

    pthread_mutex_t login_mu; /* until a login succeeded: one login attempt at a time */
    pthread_cond_t login_cv;
    bool login_busy;

    pthread_mutex_t term_mu; /* the terminal: log lines scrolled above the progress line */
    char progress[400];

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
    char actor[200];
    struct store *st;
    struct erp_session *erp;
    int login_fails;
    int form_streak; /* post pages in a row without the flow's form or field */
    uint64_t rng;
    struct runner_stats stats;
    /* the item in hand, for evidence (0 when none) */
    int64_t item_id;
    bool reconciling;
    /* its exchanges not stored yet (evidence_put): stored with its next state change, or on
     * their own before the committing request and when the item leaves the worker */
    struct store_evidence *pending;
    size_t n_pending, cap_pending;
    int64_t retry_after_ms; /* of the event being applied, for the backoff */
    /* the item claimed with the last change (job_apply, store_apply_claim), next in hand:
     * its limiter place is the one the worker already holds */
    struct store_item next;
    bool have_next;
};

/* One item in hand: what the worker learnt about it during this claim. */
struct job {
    struct worker *w;
    struct store_item item; /* the row as last read (transition_apply refreshes it) */
    struct invoice inv;
    bool inv_ok;
    int64_t lease_until; /* mono ms */
    int64_t looked_at;   /* mono ms when the last lookup began (0: none) */
    bool lost;           /* lease lost: touch the item no more */
    bool commit_sent;    /* the committing request went on the wire (or may have) */
    bool kept;           /* the last transition kept the lease: work on */
    char doc[128];
    char reason[512];
    char detail[512];
    int64_t retry_after_ms;
};

/* ---- small helpers ---------------------------------------------------------------------- */

static int64_t mono_ms(void)
{
    return apbot_clock_mono_ms();
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

static bool worker_durable(struct worker *w, char *why, size_t whylen);

/* Sleeps up to ms in short slices, returning early when the run stops. What the worker wrote
 * goes to disk first: a worker that waits sends nothing that would sync it. */
static void worker_sleep(struct worker *w, int64_t ms)
{
    (void)worker_durable(w, NULL, 0);
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

/* Masks the ERP user and password inside buf (a NUL-terminated text of capacity len). */
static void mask_in_place(const struct runner *r, char *buf, size_t len)
{
    text_mask_into(buf, len, r->password, r->user);
}

/* ---- the terminal and the log ----------------------------------------------------------- */

/* Draws the progress line (under term_mu). */
static void progress_show(struct runner *r)
{
    if (r->progress[0]) {
        fprintf(stderr, "\r\033[K%s", r->progress);
        fflush(stderr);
    }
}

/* Prints a warning or an error above the progress line, as apt or cargo do. */
static void term_print(struct runner *r, const char *level, const char *what, const char *detail)
{
    if (!r->opt->progress)
        return;
    char *w = text_escape(what, 300, 0);
    char *d = text_escape(detail ? detail : "", 600, 0);
    pthread_mutex_lock(&r->term_mu);
    fprintf(stderr, "\r\033[K%s: %s%s%s\n", level, w, *d ? ": " : "", d);
    progress_show(r);
    pthread_mutex_unlock(&r->term_mu);
    free(w);
    free(d);
}

/* Whether v is one word of printable ASCII that kv writes as it is (no blank, quote, '=' or
 * backslash: nothing to quote or escape), v[0..*ret_len) when it is. */
static bool kv_plain(const char *v, size_t *ret_len)
{
    size_t n = 0;
    for (; v[n]; n++)
        if (v[n] <= ' ' || v[n] > '~' || v[n] == '"' || v[n] == '=' || v[n] == '\\')
            return false;
    *ret_len = n;
    return n > 0;
}

/* Appends ` name=value` to buf, quoting values with blanks or quotes, controls escaped. */
static void kv(char *buf, size_t len, const char *name, const char *value)
{
    size_t o = strlen(buf);
    if (!value || o + 4 >= len)
        return;
    /* Most values (ids, keys, states, events, documents) are one plain word, written as the
     * general path below would write them, without its copies: a log line per state change
     * cost ~18,000 instructions. */
    size_t nl = strlen(name), vl;
    if (kv_plain(value, &vl) && o + 1 + nl + 1 + vl + 3 < len) {
        buf[o++] = ' ';
        memcpy(buf + o, name, nl);
        o += nl;
        buf[o++] = '=';
        memcpy(buf + o, value, vl + 1);
        return;
    }
    char *v = text_escape(value, len, 0);
    bool quote = !*v || strpbrk(v, " \t\"=") != NULL;
    int n = snprintf(buf + o, len - o, " %s=%s", name, quote ? "\"" : "");
    if (n < 0 || (size_t)n >= len - o) {
        free(v);
        return;
    }
    o += (size_t)n;
    for (const char *p = v; *p && o + 3 < len; p++) {
        if (*p == '"')
            buf[o++] = '\\';
        buf[o++] = *p;
    }
    if (quote && o + 1 < len)
        buf[o++] = '"';
    buf[o] = '\0';
    free(v);
}

/* Starts a log line with the UTC time and the level. Each thread keeps the text of the last
 * second it formatted (lines come several a second). */
static void log_start(char *buf, size_t len, const char *level)
{
    static _Thread_local time_t last_secs = -1;
    static _Thread_local char when[32];
    int64_t wall = apbot_clock_wall_ms();
    time_t secs = (time_t)(wall / 1000);
    if (secs != last_secs) {
        struct tm tm;
        gmtime_r(&secs, &tm);
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
        last_secs = secs;
    }
    snprintf(buf, len, "time=%s.%03dZ level=%s", when, (int)(wall % 1000), level);
}

static void log_line(struct runner *r, const char *line)
{
    FILE *f = r->opt->log;
    if (!f)
        return;
    /* One write per line (stderr is unbuffered): a line never mixes with another's. */
    char buf[2048];
    int n = snprintf(buf, sizeof(buf), "%s\n", line);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof(buf)) { /* cut: the lines built here are shorter */
        n = (int)sizeof(buf) - 1;
        buf[n - 1] = '\n';
    }
    pthread_mutex_lock(&r->term_mu);
    fwrite(buf, 1, (size_t)n, f);
    fflush(f);
    pthread_mutex_unlock(&r->term_mu);
}

/* A run-level message (start, breaker, stop, warnings) as one key=value line; warnings and
 * errors also appear above the progress line on a terminal. */
static void log_msg(struct runner *r, const char *level, const char *what, const char *detail)
{
    char line[1024];
    log_start(line, sizeof(line), level);
    kv(line, sizeof(line), "msg", what);
    if (detail)
        kv(line, sizeof(line), "detail", detail);
    log_line(r, line);
    if (strcmp(level, "info") != 0)
        term_print(r, level, what, detail);
}

/* The one setter's log callback: one line per state change. */
static void on_transition(void *ctx, const struct transition_log *l)
{
    struct worker *w = ctx;
    char line[1536], id[24], worker[16];
    log_start(line, sizeof(line), "info");
    snprintf(id, sizeof(id), "%" PRId64, l->item->id);
    kv(line, sizeof(line), "item", id);
    kv(line, sizeof(line), "key", l->item->key);
    kv(line, sizeof(line), "from", machine_state_name(l->from));
    kv(line, sizeof(line), "to", machine_state_name(l->to));
    kv(line, sizeof(line), "event", machine_event_name(l->event));
    if (l->doc && *l->doc)
        kv(line, sizeof(line), "doc", l->doc);
    if (l->reason && *l->reason)
        kv(line, sizeof(line), "reason", l->reason);
    else if (l->detail && *l->detail)
        kv(line, sizeof(line), "detail", l->detail);
    if (w) {
        snprintf(worker, sizeof(worker), "%d", w->index);
        kv(line, sizeof(line), "worker", worker);
        w->stats.transitions++;
        switch (l->to) {
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
    } else {
        kv(line, sizeof(line), "actor", l->actor);
    }
    const struct runner *rr = w ? w->r : NULL;
    (void)rr;
    if (w)
        log_line(w->r, line);
}

/* The recovery's log callback (the calling thread). */
static void on_recovery(void *ctx, const struct transition_log *l)
{
    struct runner *r = ctx;
    char msg[256];
    snprintf(msg, sizeof(msg), "item %" PRId64 " %s -> %s (its runner vanished)", l->item->id,
             machine_state_name(l->from), machine_state_name(l->to));
    log_msg(r, "warn", "item taken over", msg);
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
    bool trip = false, first_suspect = false;
    int64_t now = mono_ms();
    pthread_mutex_lock(&r->mu);
    if (r->unanswered++ == 0)
        r->first_unanswered_mono = now;
    first_suspect = r->unanswered == RUNNER_SUSPECT_FAILURES;
    snprintf(r->last_unanswered, sizeof(r->last_unanswered), "%s", what ? what : "");
    if (r->unanswered >= r->pol.breaker_failures &&
        now - r->first_unanswered_mono >= r->pol.breaker_window_ms) {
        trip = true;
        snprintf(msg, sizeof(msg),
                 "ERP unreachable: %d exchanges in a row unanswered over %" PRId64 " s (last: %s)",
                 r->unanswered, (now - r->first_unanswered_mono) / 1000, r->last_unanswered);
    }
    pthread_mutex_unlock(&r->mu);
    if (first_suspect)
        log_msg(r, "warn", "the ERP does not answer; pausing claims and probing", what ? what : "");
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
    if (transport && strncmp(transport, "answered", 8) == 0) {
        pthread_mutex_lock(&r->mu);
        bool was = r->unanswered >= RUNNER_SUSPECT_FAILURES;
        pthread_mutex_unlock(&r->mu);
        breaker_answered(r);
        if (was)
            log_msg(r, "warn", "the ERP answers again; claiming resumes", NULL);
    } else {
        breaker_unanswered(r, transport);
    }
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

/*
 * The worker's writes are deferred (STORE_DEFERRED: committed, visible, kept by a crash of
 * this process, on disk at the next sync): this makes them durable. It runs before every
 * request of the worker's session that may change the ERP (its gate, erp_set_gate: anything
 * but the GET of a page the flow only reads - a lookup, a listing, the page a step fills in)
 * and before the worker waits, so that nothing that could book reaches the ERP while a state
 * change before it is not on disk: the intent to post is on disk before the filled form is
 * sent. What a power loss could take (a claim, a lookup's "not found", a completion) changes
 * nothing in the ERP and is found again by the restart's lookup. Changes with no such request
 * in between (an item's completion, the next claim and its intent) share one disk sync, and
 * syncs of several workers are shared (store_sqlite.c, group commit): a sync puts every
 * commit before it on disk. A disk that refuses to sync stops the run: nothing is sent after.
 */
static bool worker_durable(struct worker *w, char *why, size_t whylen)
{
    char err[APBOT_ERR_LEN];
    if (!w->st || store_sync(w->st, err, sizeof(err)) == APBOT_OK)
        return true;
    if (why && whylen)
        snprintf(why, whylen, "held back: the queue's last change is not on disk (%s)", err);
    log_msg(w->r, "error", "queue not synced to disk", err);
    run_fail(w->r, err);
    return false;
}

/* The session's gate (erp_set_gate): before every request that may change the ERP. */
static bool worker_gate(void *ctx, char *why, size_t whylen)
{
    return worker_durable(ctx, why, whylen);
}

/* ---- evidence --------------------------------------------------------------------------- */

/* What an exchange says about the ERP's load, for the limiter. */
static enum limiter_signal load_signal(const struct erp_exchange *ev)
{
    if (ev->http_status == 429 || ev->http_status == 503)
        return LIMITER_OVERLOAD;
    if (ev->transport && strncmp(ev->transport, "unknown", 7) == 0 &&
        strstr(ev->transport, "imed out"))
        return LIMITER_TIMEOUT;
    return LIMITER_OK;
}

static char *dup_or_null(const char *s)
{
    return s ? apbot_xstrdup(s) : NULL;
}

/* Frees the pending exchanges' strings and empties the list. */
static void evidence_drop(struct worker *w)
{
    for (size_t i = 0; i < w->n_pending; i++) {
        struct store_evidence *e = &w->pending[i];
        free((char *)e->step);
        free((char *)e->method);
        free((char *)e->url);
        free((char *)e->transport);
        free((char *)e->rule);
        free((char *)e->outcome);
        free((char *)e->excerpt);
    }
    w->n_pending = 0;
}

/* Stores the pending exchanges of the item in hand in one transaction of their own. */
static void evidence_flush(struct worker *w)
{
    if (!w->n_pending)
        return;
    char err[APBOT_ERR_LEN];
    if (store_add_evidence_n(w->st, w->item_id, w->pending, w->n_pending, NULL, err, sizeof(err)) !=
        APBOT_OK)
        log_msg(w->r, "warn", "evidence not stored", err);
    evidence_drop(w);
}

/*
 * Keeps one exchange of the item in hand (if any), secrets masked, excerpt <= 1 KiB. It is
 * stored with the item's next state change (job_apply), in the same transaction: a separate
 * synchronous write per exchange cost a disk sync each. Exchanges are never held across one
 * that could book: the pending ones are stored before the committing request is sent
 * (hook_before_commit), and whatever is left when the item leaves the worker (job_run).
 */
static void evidence_put(struct worker *w, const struct erp_exchange *ev)
{
    struct runner *r = w->r;
    w->stats.exchanges++;
    breaker_count(r, ev->transport);
    if (ev->http_status > 0 || load_signal(ev) == LIMITER_TIMEOUT)
        limiter_sample(r->limiter, ev->step, ev->elapsed_ms, load_signal(ev));
    if (!w->item_id)
        return;
    if (w->n_pending >= RUNNER_PENDING_MAX)
        evidence_flush(w);
    if (apbot_grow((void **)&w->pending, &w->cap_pending, w->n_pending, sizeof(*w->pending),
                   RUNNER_PENDING_MAX) != APBOT_OK) {
        evidence_flush(w);
        return;
    }
    struct store_evidence *e = &w->pending[w->n_pending++];
    e->http_status = ev->http_status;
    e->elapsed_ms = ev->elapsed_ms;
    char *excerpt = text_mask(ev->excerpt, r->password, r->user);
    if (excerpt)
        text_cut_utf8(excerpt, RUNNER_EXCERPT_MAX);
    e->step = apbot_xstrdup(w->reconciling && ev->step && strcmp(ev->step, "lookup") == 0
                                ? "reconcile"
                                : (ev->step ? ev->step : "?"));
    e->method = dup_or_null(ev->method);
    e->url = text_mask(ev->url, r->password, r->user);
    e->transport = dup_or_null(ev->transport);
    e->rule = dup_or_null(ev->rule);
    e->outcome = dup_or_null(ev->outcome);
    e->excerpt = excerpt;
}

static void on_erp_evidence(void *ctx, const struct erp_exchange *ev)
{
    evidence_put(ctx, ev);
}

/* ---- leases and the state setter ------------------------------------------------------ */

/*
 * Makes sure the lease outlasts one more exchange. Returns false (and marks the job lost)
 * when another runner took the item over.
 */
static bool job_lease(struct job *j)
{
    struct worker *w = j->w;
    const struct runner_policy *pol = &w->r->pol;
    int64_t now = mono_ms();
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

/* The backoff a step asks for: full jitter on the item's count, Retry-After if larger. */
static int64_t worker_backoff(void *ctx, const struct machine_step *step)
{
    struct worker *w = ctx;
    const struct runner_policy *pol = &w->r->pol;
    if (step->delay != MACHINE_DELAY_BACKOFF)
        return 0;
    int n = step->next == MACHINE_NEW ? step->counters.attempts : step->counters.cycles;
    return runner_backoff_ms(pol->backoff_base_ms, pol->backoff_cap_ms, n > 0 ? n - 1 : 0,
                             w->retry_after_ms, rng_next(&w->rng));
}

static struct transition_env worker_env(struct worker *w)
{
    struct transition_env env = {
        .st = w->st,
        .policy = &w->r->pol.machine,
        .settle_ms = atomic_load(&w->r->settle_ms),
        .owner = w->owner,
        .actor = w->actor,
        .backoff = worker_backoff,
        .log = on_transition,
        .ctx = w,
    };
    return env;
}

/*
 * Applies one event to the item in hand through the one state setter. Returns true when the
 * worker continues with the item (j->item refreshed, j->kept). may_claim_next: when the item
 * leaves the worker with this change, the next one may be claimed with it (w->next; only
 * where the job ends with the change, never from a hook in the middle of a post).
 */
static bool job_apply(struct job *j, enum machine_event ev, bool may_claim_next)
{
    struct worker *w = j->w;
    struct runner *r = w->r;
    char err[APBOT_ERR_LEN];

    j->kept = false;
    if (j->lost)
        return false;
    /* ERP messages may echo the user id: nothing secret reaches the row, event or log. */
    mask_in_place(r, j->reason, sizeof(j->reason));
    mask_in_place(r, j->detail, sizeof(j->detail));
    /* A stop arriving after a clean "not found" must not start a post: no intent is
     * committed for a form that will not be sent; the item goes back untouched. */
    bool stop_now = stopping(r); /* read once: the post starts under the lease or not at all */
    if (ev == MACHINE_EV_NOT_FOUND && stop_now &&
        (j->item.state == MACHINE_CHECKING || j->item.state == MACHINE_RECONCILING))
        ev = MACHINE_EV_RELEASED;
    /* When this change lets go of the item, the next one is claimed in its transaction (one
     * commit instead of two, and the pages both write shared), if the worker would claim one
     * now: not stopping, the ERP not under suspicion, the session logged in and the worker's
     * place within the limiter's limit. */
    bool claim_next = may_claim_next && !w->have_next && !stop_now && !breaker_suspect(r) &&
                      erp_logged_in(w->erp) && limiter_may_keep(r->limiter);
    struct transition_env env = worker_env(w);
    struct transition_in in = {
        .event = ev,
        .looked_mono = j->looked_at,
        .doc = j->doc[0] ? j->doc : NULL,
        .reason = j->reason[0] ? j->reason : NULL,
        .detail = j->detail[0] ? j->detail : NULL,
        .keep_lease = !stop_now,
        /* the exchanges that led here, in the change's transaction */
        .evidence = w->pending,
        .n_evidence = w->item_id == j->item.id ? w->n_pending : 0,
        .claim_next_lease_ms = claim_next ? r->pol.lease_ms : 0,
        .claim_into = claim_next ? &w->next : NULL,
    };
    struct transition_out out;
    w->retry_after_ms = j->retry_after_ms;
    int rc = transition_apply(&env, &j->item, &in, &out, err, sizeof(err));
    if (rc == APBOT_OK && out.claimed)
        w->have_next = true;
    if (rc == APBOT_OK)
        evidence_drop(w); /* stored with the change */
    else
        evidence_flush(w); /* the change was refused: the exchanges on their own */
    w->retry_after_ms = 0;
    j->doc[0] = j->reason[0] = j->detail[0] = '\0';
    j->retry_after_ms = 0;
    j->looked_at = 0;
    if (rc == APBOT_E_INVAL) {
        log_msg(r, "error", "bug", err);
        j->lost = true;
        return false;
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
    if (out.conflict_with)
        log_msg(r, "warn", "one document claimed by two items: both sent to review",
                j->item.reason);
    j->kept = out.kept;
    if (out.kept)
        j->lease_until = j->item.lease_mono;
    return out.kept;
}

/* ---- login ------------------------------------------------------------------------------ */

enum login_rc { LOGIN_OK, LOGIN_TRANSIENT, LOGIN_SYSTEMIC };

/*
 * Logs the worker's session in. Until a login has succeeded in this run, sessions log in one
 * at a time, so a wrong password is tried once, not once per session; a refused login trips
 * the breaker at once.
 */
static enum login_rc worker_login(struct worker *w)
{
    struct runner *r = w->r;
    char err[APBOT_ERR_LEN];

    pthread_mutex_lock(&r->login_mu);
    while (!atomic_load(&r->login_ok_once) && r->login_busy && !stopping(r)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        (void)pthread_cond_timedwait(&r->login_cv, &r->login_mu, &ts);
    }
    bool gated = !atomic_load(&r->login_ok_once);
    if (gated)
        r->login_busy = true;
    pthread_mutex_unlock(&r->login_mu);
    if (stopping(r)) {
        if (gated) {
            pthread_mutex_lock(&r->login_mu);
            r->login_busy = false;
            pthread_cond_broadcast(&r->login_cv);
            pthread_mutex_unlock(&r->login_mu);
        }
        return LOGIN_TRANSIENT;
    }

    int rc = erp_login(w->erp, err, sizeof(err));
    if (rc == APBOT_E_SYSTEMIC) {
        /* Tripped before the gate opens: a session waiting at the gate must wake to a stop,
         * not to its own try of the same refused password. */
        char msg[700];
        snprintf(msg, sizeof(msg), "login refused: %s", err);
        breaker_trip(r, msg);
    }
    if (gated) {
        pthread_mutex_lock(&r->login_mu);
        r->login_busy = false;
        if (rc == APBOT_OK)
            atomic_store(&r->login_ok_once, true);
        pthread_cond_broadcast(&r->login_cv);
        pthread_mutex_unlock(&r->login_mu);
    }
    if (rc == APBOT_OK) {
        w->login_fails = 0;
        w->stats.logins++;
        return LOGIN_OK;
    }
    if (rc == APBOT_E_SYSTEMIC)
        return LOGIN_SYSTEMIC;
    if (!stopping(r))
        log_msg(r, "warn", "login failed, will retry", err);
    if (++w->login_fails >= RUNNER_LOGIN_FAILS_MAX) {
        char msg[700];
        snprintf(msg, sizeof(msg), "login failed %d times in a row (last: %s)", w->login_fails,
                 err);
        breaker_trip(r, msg);
        return LOGIN_SYSTEMIC;
    }
    return LOGIN_TRANSIENT;
}

/* ---- late commits and the settle delay -------------------------------------------------- */

/* Reads "<date in the table's format>[ HH:MM[:SS]]" as local time; true only with a time of
 * day (a date alone cannot measure a late commit). */
static bool booked_wall_ms(const char *fmt, const char *text, int64_t *ret)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *p = text;
    if (!fmt || !text)
        return false;
    for (const char *f = fmt; *f; f++) {
        if (*f != '%') {
            if (*p++ != *f)
                return false;
            continue;
        }
        f++;
        int digits = *f == 'Y' ? 4 : 2, v = 0;
        for (int i = 0; i < digits; i++, p++) {
            if (*p < '0' || *p > '9')
                return false;
            v = v * 10 + (*p - '0');
        }
        switch (*f) {
        case 'd':
            tm.tm_mday = v;
            break;
        case 'm':
            tm.tm_mon = v - 1;
            break;
        case 'Y':
            tm.tm_year = v - 1900;
            break;
        case 'y':
            tm.tm_year = v + 100;
            break;
        default:
            return false;
        }
    }
    int hh, mm, ss = 0, n = 0;
    if (sscanf(p, " %2d:%2d%n", &hh, &mm, &n) != 2)
        return false;
    p += n;
    if (*p == ':' && sscanf(p, ":%2d", &ss) != 1)
        return false;
    tm.tm_hour = hh;
    tm.tm_min = mm;
    tm.tm_sec = ss;
    tm.tm_isdst = -1;
    time_t t = mktime(&tm);
    if (t == (time_t)-1)
        return false;
    *ret = (int64_t)t * 1000;
    return true;
}

int64_t runner_settle_in_force(int64_t policy_settle_ms, int64_t max_late_ms)
{
    if (max_late_ms <= 0 || max_late_ms * 2 < policy_settle_ms)
        return policy_settle_ms;
    return max_late_ms * 2;
}

/* Raises the settle delay in force to twice the longest late commit once that reaches half
 * of it. Returns the delay in force. */
static int64_t settle_adapt(struct runner *r, int64_t late_ms, const char *why)
{
    int64_t settle = atomic_load(&r->settle_ms);
    int64_t raised = runner_settle_in_force(settle, late_ms);
    if (raised <= settle)
        return settle;
    int64_t cur = settle;
    while (cur < raised && !atomic_compare_exchange_weak(&r->settle_ms, &cur, raised))
        ;
    if (cur < raised) {
        char msg[300];
        snprintf(msg, sizeof(msg),
                 "the ERP committed %" PRId64 " ms after apbot gave up (%s): settle delay raised "
                 "from %" PRId64 " to %" PRId64 " ms",
                 late_ms, why, cur, raised);
        log_msg(r, "warn", "settle delay raised", msg);
        return raised;
    }
    return cur;
}

/*
 * A reconciliation found doc booked at `booked` (the ERP's clock): how late was it after the
 * client gave up? The give-up moment is placed on the ERP's clock through the Date of the
 * lookup's answer and CLOCK_BOOTTIME (the ERP's time then, minus the mono time since the give
 * up), so neither a step of this host's wall clock nor a skew between the two hosts reads as a
 * late commit. Without a Date the wall stamp of the give-up is used, and a booking that lies
 * in this host's future says the clocks disagree: nothing is learnt from it.
 */
static void observe_late(struct job *j, const char *booked, const struct erp_lookup_result *res)
{
    struct worker *w = j->w;
    struct runner *r = w->r;
    int64_t booked_ms, gave_up;
    struct apbot_now now;
    if (!j->item.has_settle || !booked ||
        !booked_wall_ms(r->flow->lookup.table.date_format, booked, &booked_ms))
        return;
    apbot_clock_now(&now);
    bool same_boot = apbot_clock_same_boot(j->item.clock_boot, now.boot);
    if (res->erp_date_ms > 0 && same_boot) {
        /* Whole seconds on both sides: the ERP's own booking after its own clock is another
         * time zone or a broken column, not a late commit. */
        if (booked_ms > res->erp_date_ms + 1000)
            return;
        gave_up = res->erp_date_ms - (res->erp_date_mono - j->item.settle_mono);
    } else {
        if (booked_ms > now.wall_ms + 1000)
            return;
        gave_up = j->item.settle_at;
    }
    /* Whole seconds on the ERP's clock: a second of rounding is not a late commit. */
    int64_t late = booked_ms - gave_up;
    if (late <= 1000)
        return;
    int64_t prev = atomic_load(&r->max_late);
    while (late > prev && !atomic_compare_exchange_weak(&r->max_late, &prev, late))
        ;
    if (late <= prev)
        return;
    char err[APBOT_ERR_LEN];
    if (store_note_late_commit(w->st, r->flow->name, late, NULL, err, sizeof(err)) != APBOT_OK)
        log_msg(r, "warn", "late commit not recorded", err);
    char why[80];
    snprintf(why, sizeof(why), "item %" PRId64, j->item.id);
    settle_adapt(r, late, why);
}

/* ---- the lookup (checking, reconciling, finishing) ------------------------------------- */

/* True when the flow's lookup reads an amount (a column of its table or its detail page). */
static bool lookup_reads_amount(const struct flow *f)
{
    const struct flow_table *t[2] = {&f->lookup.table, &f->lookup.detail.table};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < t[k]->n_cols; i++)
            if (t[k]->cols[i].name && strcmp(t[k]->cols[i].name, "amount") == 0)
                return true;
    return false;
}

/*
 * Looks the key up and returns found, found-unfinished, found-conflict, not-found or
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
    j->looked_at = mono_ms();
    int rc = erp_lookup(w->erp, j->item.key, &j->inv, j->inv.currency, &res, err, sizeof(err));
    if (rc == APBOT_E_SYSTEMIC) {
        char msg[700];
        snprintf(msg, sizeof(msg), "login refused: %s", err);
        breaker_trip(w->r, msg);
        return MACHINE_EV_RELEASED; /* nothing learnt: back untouched, no attempt spent */
    }
    if (rc != APBOT_OK) {
        snprintf(j->detail, sizeof(j->detail), "lookup: %.400s", err);
        return stopping(w->r) ? MACHINE_EV_RELEASED : MACHINE_EV_LOOKUP_FAILED;
    }
    enum machine_event ev = MACHINE_EV_LOOKUP_FAILED;
    switch (res.answer) {
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
        snprintf(j->detail, sizeof(j->detail), "not in the ERP");
        ev = MACHINE_EV_NOT_FOUND;
        break;
    case ERP_FOUND:
    case ERP_FOUND_UNFINISHED: {
        const struct erp_row *row = &res.hits.rows[0];
        /* The one rule for "this record books this invoice" (docmatch.h); a flow that reads no
         * amount from the ERP at all chose to trust its key alone. */
        const struct store_item *it = &j->item;
        struct docmatch_invoice mine =
            docmatch_invoice_of(it->vendor_id, it->currency, it->exponent, it->total, it->doc_type);
        struct docmatch_record rec;
        docmatch_record_of_row(row, &rec);
        unsigned diff, ignore = lookup_reads_amount(w->r->flow) ? 0u : DOCMATCH_NO_AMOUNT;
        if (res.hits.n > 1) {
            snprintf(j->detail, sizeof(j->detail), "%zu ERP documents carry this key (%s, %s)",
                     res.hits.n, row->doc ? row->doc : "?",
                     res.hits.rows[1].doc ? res.hits.rows[1].doc : "?");
            ev = MACHINE_EV_FOUND_CONFLICT;
        } else if (!row->doc) {
            snprintf(j->detail, sizeof(j->detail), "a hit without a document number");
            ev = MACHINE_EV_LOOKUP_FAILED;
        } else if ((diff = docmatch_compare(&mine, &rec) & ~ignore) != DOCMATCH_SAME) {
            char what[300];
            docmatch_describe(diff, &mine, &rec, what, sizeof(what));
            snprintf(j->detail, sizeof(j->detail), "ERP document %s: %s", row->doc, what);
            ev = MACHINE_EV_FOUND_CONFLICT;
        } else {
            bool unfinished = res.answer == ERP_FOUND_UNFINISHED;
            snprintf(j->doc, sizeof(j->doc), "%s", row->doc);
            snprintf(j->detail, sizeof(j->detail), "found as %s%s", row->doc,
                     unfinished ? " (saved, not finished)" : "");
            ev = unfinished ? MACHINE_EV_FOUND_UNFINISHED : MACHINE_EV_FOUND;
            if (j->item.state == MACHINE_RECONCILING)
                observe_late(j, row->booked, &res);
        }
        break;
    }
    }
    erp_lookup_result_done(&res);
    return ev;
}

/* ---- the post (posting) and the follow-up steps (finishing) ----------------------------- */

static bool hook_before_commit(void *ctx)
{
    struct job *j = ctx;
    if (stopping(j->w->r))
        return false;
    /* The lease once more right before the committing request: this step's page fetch and
     * evidence writes may have outlasted it, and a recovered item must not be posted twice. */
    if (!job_lease(j))
        return false;
    /* What was exchanged so far is stored before anything that could book is sent (a kill
     * of this process keeps it), without a disk sync of its own: it is no state change, and
     * reaches the disk with the next one. */
    enum store_durability was = store_set_durability(j->w->st, STORE_LAZY);
    evidence_flush(j->w);
    (void)store_set_durability(j->w->st, was);
    j->commit_sent = true;
    return true;
}

/* The committing step saved the document: record it before any follow-up step runs. */
static bool hook_saved(void *ctx, const char *doc)
{
    struct job *j = ctx;
    snprintf(j->doc, sizeof(j->doc), "%s", doc);
    snprintf(j->detail, sizeof(j->detail), "saved as %.100s; the follow-up steps are due", doc);
    if (!job_apply(j, MACHINE_EV_SAVED, false)) /* the post goes on: no next item yet */
        return false;
    return j->item.state == MACHINE_FINISHING;
}

static bool hook_stopping(void *ctx)
{
    struct job *j = ctx;
    return stopping(j->w->r) || !job_lease(j);
}

/* A form that is not what the flow describes: one odd page gives the item back, the same in
 * a row RUNNER_FORM_CONFIRM times means the form is gone and stops the run. */
static enum machine_event form_changed(struct job *j, const char *msg)
{
    struct worker *w = j->w;
    if (++w->form_streak < RUNNER_FORM_CONFIRM) {
        log_msg(w->r, "warn", "the ERP's page lacks the flow's form; item given back", msg);
        worker_sleep(w, 200);
    } else {
        breaker_trip(w->r, msg);
    }
    return MACHINE_EV_RELEASED;
}

/* The event a post's result is for the item in its state now (posting, or finishing when
 * the saved hook moved it). */
static enum machine_event post_event(struct job *j, const struct erp_post_result *pr)
{
    struct worker *w = j->w;
    bool finishing = j->item.state == MACHINE_FINISHING;

    snprintf(j->detail, sizeof(j->detail), "%s", pr->detail);
    if (pr->retry_after_ms > 0)
        j->retry_after_ms = pr->retry_after_ms;
    if (pr->login_refused) {
        breaker_trip(w->r, "login refused during a post");
        if (finishing)
            return MACHINE_EV_RELEASED;
        return pr->commit_sent ? MACHINE_EV_UNKNOWN : MACHINE_EV_RELEASED;
    }
    if (pr->verdict != DECIDE_SYSTEMIC)
        w->form_streak = 0;
    if (finishing) {
        switch (pr->verdict) {
        case DECIDE_CONFIRMED:
            snprintf(j->doc, sizeof(j->doc), "%s", pr->doc[0] ? pr->doc : j->item.erp_doc);
            return MACHINE_EV_CONFIRMED;
        case DECIDE_REJECTED:
            snprintf(j->reason, sizeof(j->reason), "%s", pr->reason);
            return MACHINE_EV_REJECTED;
        case DECIDE_NEXT:
        case DECIDE_RESTART:
        case DECIDE_RESTART_FOLLOWUPS:
        case DECIDE_SYSTEMIC:
        case DECIDE_SAVED:
        case DECIDE_NOT_SENT:
        case DECIDE_UNKNOWN:
        case DECIDE_ALREADY_EXISTS:
        case DECIDE_FOLLOWUP_FAILED:
        case DECIDE_POST__COUNT:
            if (pr->released)
                return MACHINE_EV_RELEASED;
            return MACHINE_EV_FOLLOWUP_FAILED;
        }
        return MACHINE_EV_FOLLOWUP_FAILED;
    }
    if (pr->commit_sent)
        w->stats.posts_sent++;
    switch (pr->verdict) {
    case DECIDE_CONFIRMED:
        snprintf(j->doc, sizeof(j->doc), "%s", pr->doc);
        return MACHINE_EV_CONFIRMED;
    case DECIDE_REJECTED:
        snprintf(j->reason, sizeof(j->reason), "%s", pr->reason);
        return MACHINE_EV_REJECTED;
    case DECIDE_NOT_SENT:
        if (pr->released)
            return pr->commit_sent ? MACHINE_EV_UNKNOWN : MACHINE_EV_RELEASED;
        return MACHINE_EV_NOT_SENT;
    case DECIDE_ALREADY_EXISTS:
        if (pr->doc[0])
            snprintf(j->doc, sizeof(j->doc), "%s", pr->doc);
        return MACHINE_EV_ALREADY_EXISTS;
    case DECIDE_SYSTEMIC:
        if (pr->commit_sent)
            return MACHINE_EV_UNKNOWN;
        return form_changed(j, pr->detail);
    case DECIDE_SAVED: /* the saved document could not be recorded: find it by lookup */
    case DECIDE_UNKNOWN:
    case DECIDE_FOLLOWUP_FAILED:
    case DECIDE_NEXT:
    case DECIDE_RESTART:
    case DECIDE_RESTART_FOLLOWUPS:
    case DECIDE_POST__COUNT:
        return pr->commit_sent ? MACHINE_EV_UNKNOWN : MACHINE_EV_NOT_SENT;
    }
    return MACHINE_EV_UNKNOWN;
}

/* Logs the session in when it is not; RELEASED (nothing learnt) when that fails. */
static bool job_session(struct job *j)
{
    struct worker *w = j->w;
    if (erp_logged_in(w->erp))
        return true;
    enum login_rc lr = worker_login(w);
    if (lr == LOGIN_OK)
        return true;
    snprintf(j->detail, sizeof(j->detail), "login before the post failed");
    return false;
}

/* posting: the whole post, from its first step; finishing: the follow-up steps on the doc. */
static enum machine_event job_post(struct job *j, enum erp_post_from from)
{
    struct worker *w = j->w;
    char err[APBOT_ERR_LEN];
    struct erp_post_result pr;

    j->commit_sent = false;
    if (!j->inv_ok) {
        snprintf(j->detail, sizeof(j->detail), "the queued payload cannot be read");
        return from == ERP_POST_FROM_START ? MACHINE_EV_NOT_SENT : MACHINE_EV_FOLLOWUP_FAILED;
    }
    if (stopping(w->r) || !job_session(j))
        return MACHINE_EV_RELEASED;
    struct erp_post_hooks hooks = {
        .ctx = j,
        .before_commit = hook_before_commit,
        .saved = hook_saved,
        .stopping = hook_stopping,
    };
    int rc = erp_post_run(w->erp, &j->inv, j->item.key, from,
                          from == ERP_POST_FROM_FOLLOWUPS ? j->item.erp_doc : NULL, &hooks, &pr,
                          err, sizeof(err));
    if (j->lost)
        return MACHINE_EV_RELEASED; /* taken over while in the hooks: drop it */
    if (rc != APBOT_OK) {
        snprintf(j->detail, sizeof(j->detail), "post: %.400s", err);
        return form_changed(j, j->detail);
    }
    return post_event(j, &pr);
}

/* ---- one claimed item ------------------------------------------------------------------- */

/* Drives one claimed item until it leaves the worker's hands. */
static void job_run(struct worker *w, struct store_item *it)
{
    struct job j;
    char err[APBOT_ERR_LEN];
    memset(&j, 0, sizeof(j));
    j.w = w;
    j.item = *it;
    memset(it, 0, sizeof(*it)); /* the job owns the row now */
    j.lease_until = j.item.lease_mono;
    invoice_init(&j.inv);
    j.inv_ok = invoice_from_json(j.item.payload, &j.inv, err, sizeof(err)) == APBOT_OK;
    if (!j.inv_ok)
        log_msg(w->r, "error", "payload unreadable", err);
    w->item_id = j.item.id;
    w->stats.claims++;

    /* A finishing item claimed anew is looked up first (its follow-up steps may have gone
     * through before a crash); one that became finishing in this claim runs them at once. */
    bool followups_now = false;
    for (int round = 0; round < RUNNER_JOB_ROUNDS && !j.lost; round++) {
        enum machine_state state = j.item.state;
        enum machine_event ev = MACHINE_EV_RELEASED;
        switch (state) {
        case MACHINE_CHECKING:
        case MACHINE_RECONCILING:
            w->reconciling = state == MACHINE_RECONCILING;
            ev = job_lookup(&j);
            break;
        case MACHINE_FINISHING:
            w->reconciling = !followups_now;
            ev = followups_now ? job_post(&j, ERP_POST_FROM_FOLLOWUPS) : job_lookup(&j);
            break;
        case MACHINE_POSTING:
            w->reconciling = false;
            ev = job_post(&j, ERP_POST_FROM_START);
            break;
        case MACHINE_NEW:
        case MACHINE_COMPLETED:
        case MACHINE_BUSINESS_EXCEPTION:
        case MACHINE_MANUAL_REVIEW:
        case MACHINE_STATE__COUNT:
        case MACHINE_STATE_INVALID:
            goto out;
        }
        if (ev == MACHINE_EV_RELEASED && j.item.state == MACHINE_POSTING && j.commit_sent)
            ev = MACHINE_EV_UNKNOWN; /* never hand back what may have been booked */
        enum machine_state before = j.item.state;
        if (!job_apply(&j, ev, true))
            break;
        /* Follow-up steps run at once after a save or an unfinished hit in this claim. */
        followups_now = j.item.state == MACHINE_FINISHING &&
                        (ev == MACHINE_EV_FOUND_UNFINISHED || before != MACHINE_FINISHING);
    }
out:
    evidence_flush(w);
    w->item_id = 0;
    w->reconciling = false;
    invoice_done(&j.inv);
    store_item_done(&j.item);
}

/* ---- workers ---------------------------------------------------------------------------- */

/* Hands a claimed item back untouched (released: no attempt spent), and drops the row. */
static void worker_let_go(struct worker *w, struct store_item *it)
{
    char err[APBOT_ERR_LEN];
    struct transition_env env = worker_env(w);
    struct transition_in in = {.event = MACHINE_EV_RELEASED,
                               .detail = "handed back before its lookup: the ERP is under "
                                         "suspicion"};
    if (transition_apply(&env, it, &in, NULL, err, sizeof(err)) != APBOT_OK)
        log_msg(w->r, "warn", "a claimed item was not handed back (its lease runs out)", err);
    store_item_done(it);
}

/* While the ERP seems silent: no claims, just a probe of the login page now and then. */
static void worker_probe(struct worker *w, int *probes)
{
    char transport[320];
    if (erp_probe(w->erp, transport, sizeof(transport)) == APBOT_OK) {
        w->stats.exchanges++;
        breaker_count(w->r, transport);
    }
    int64_t pause = runner_backoff_ms(100, RUNNER_PROBE_CAP_MS, (*probes)++, 0, rng_next(&w->rng));
    worker_sleep(w, pause < 50 ? 50 : pause);
}

static void worker_idle(struct worker *w)
{
    struct runner *r = w->r;
    int64_t wait = -1;
    int64_t pause = r->pol.poll_ms;
    if (store_next_due(w->st, NULL, &wait, NULL, 0) == APBOT_OK && wait > 0 && wait < pause)
        pause = wait;
    worker_sleep(w, pause < 5 ? 5 : pause);
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
    (void)store_set_durability(w->st, STORE_DEFERRED); /* made durable by worker_durable */
    if (erp_open(&r->run_flow, r->base_url, &r->abort_io, &w->erp, err, sizeof(err)) != APBOT_OK) {
        run_fail(r, err);
        goto out;
    }
    erp_set_evidence(w->erp, on_erp_evidence, w);
    erp_set_gate(w->erp, worker_gate, w);

    while (!stopping(r) || w->have_next) {
        struct store_item it;
        if (w->have_next) {
            /* Claimed with the last change, in the place this worker holds. Run even when
             * the run stops (the job hands it back untouched), but not into an ERP under
             * suspicion: back to the queue untouched, no attempt spent. */
            it = w->next;
            memset(&w->next, 0, sizeof(w->next));
            w->have_next = false;
            if (breaker_suspect(r) && !stopping(r)) {
                worker_let_go(w, &it);
                limiter_release(r->limiter);
                continue;
            }
            job_run(w, &it);
            if (!w->have_next)
                limiter_release(r->limiter);
            continue;
        }
        if (breaker_suspect(r)) {
            worker_probe(w, &probes);
            continue;
        }
        probes = 0;
        /* Only as many sessions work as the limit allows (the ERP's capacity); logged-in
         * sessions first, so that a limit below the workers does not log every one in. */
        if (!limiter_acquire_as(r->limiter, &r->stop, erp_logged_in(w->erp)))
            break;
        if (!erp_logged_in(w->erp)) {
            enum login_rc lr = worker_login(w);
            if (lr != LOGIN_OK) {
                limiter_release(r->limiter);
                if (lr == LOGIN_SYSTEMIC)
                    break;
                worker_sleep(w, runner_backoff_ms(r->pol.backoff_base_ms, r->pol.backoff_cap_ms,
                                                  w->login_fails, 0, rng_next(&w->rng)));
                continue;
            }
        }
        struct transition_env env = worker_env(w);
        int rc = transition_claim(&env, NULL, r->pol.lease_ms, &it, err, sizeof(err));
        if (rc == APBOT_E_NOTFOUND || rc == APBOT_E_BUSY) {
            limiter_release(r->limiter);
            worker_idle(w);
            continue;
        }
        if (rc != APBOT_OK) {
            limiter_release(r->limiter);
            run_fail(r, err);
            break;
        }
        job_run(w, &it);
        if (!w->have_next)
            limiter_release(r->limiter);
    }
out:
    if (w->have_next) { /* not reached by the loop above; belt and braces */
        w->have_next = false;
        worker_let_go(w, &w->next);
        limiter_release(r->limiter);
    }
    erp_close(w->erp);
    w->erp = NULL;
    evidence_drop(w);
    free(w->pending);
    w->pending = NULL;
    (void)worker_durable(w, NULL, 0);
    w->stats.syncs = store_syncs(w->st);
    store_close(w->st);
    w->st = NULL;
    pthread_mutex_lock(&r->mu);
    struct runner_stats *t = &r->totals;
    t->claims += w->stats.claims;
    t->transitions += w->stats.transitions;
    t->lookups += w->stats.lookups;
    t->posts_sent += w->stats.posts_sent;
    t->exchanges += w->stats.exchanges;
    t->syncs += w->stats.syncs;
    t->logins += w->stats.logins;
    t->completed += w->stats.completed;
    t->business_exception += w->stats.business_exception;
    t->manual_review += w->stats.manual_review;
    pthread_mutex_unlock(&r->mu);
    atomic_fetch_sub(&r->running, 1);
    return NULL;
}

/* ---- the calling thread ----------------------------------------------------------------- */

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
    atomic_init(&r->settle_ms, p->settle_ms);
    atomic_init(&r->max_late, 0);
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

static int64_t pending_of(const struct store_counts *c)
{
    return c->by_state[MACHINE_NEW] + c->by_state[MACHINE_CHECKING] + c->by_state[MACHINE_POSTING] +
           c->by_state[MACHINE_RECONCILING] + c->by_state[MACHINE_FINISHING];
}

/* Redraws the progress line: what is settled, what is pending, the sessions at work. */
static void progress_draw(struct runner *r, const struct store_counts *c, int64_t elapsed_ms,
                          bool final)
{
    int64_t pending = pending_of(c);
    int64_t done = c->total - pending;
    int64_t secs = elapsed_ms / 1000;
    pthread_mutex_lock(&r->term_mu);
    snprintf(r->progress, sizeof(r->progress),
             "apbot run %" PRId64 "/%" PRId64 " settled | completed %" PRId64
             " | exception %" PRId64 " | review %" PRId64 " | pending %" PRId64
             " (reconciling %" PRId64 ") | sessions %d | %d:%02d",
             done, c->total, c->by_state[MACHINE_COMPLETED],
             c->by_state[MACHINE_BUSINESS_EXCEPTION], c->by_state[MACHINE_MANUAL_REVIEW], pending,
             c->by_state[MACHINE_RECONCILING], limiter_limit(r->limiter), (int)(secs / 60),
             (int)(secs % 60));
    progress_show(r);
    if (final) {
        fputc('\n', stderr);
        r->progress[0] = '\0';
    }
    fflush(stderr);
    pthread_mutex_unlock(&r->term_mu);
}

/* Reports a change of the adaptive limit (once per change). */
static void limit_report(struct runner *r)
{
    int old, now;
    double q;
    if (!limiter_changed(r->limiter, &old, &now, &q))
        return;
    char msg[160];
    snprintf(msg, sizeof(msg), "sessions at work %d -> %d (latency %.2fx the uncongested)", old,
             now, q);
    log_msg(r, "info", "concurrency limit", msg);
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
    r = apbot_xcalloc(1, sizeof(*r));
    r->opt = opt;
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->term_mu, NULL);
    pthread_mutex_init(&r->login_mu, NULL);
    pthread_cond_init(&r->login_cv, NULL);
    atomic_init(&r->stop, false);
    atomic_init(&r->running, 0);
    atomic_init(&r->abort_io, 0);
    atomic_init(&r->login_ok_once, false);
    r->started_mono = mono_ms();

    rc = flow_load(opt->flow_path, &r->flow, err, sizeof(err));
    if (rc != APBOT_OK) {
        snprintf(ret->message, sizeof(ret->message), "flow %.100s: %.400s", opt->flow_path, err);
        goto out;
    }
    r->base_url = opt->erp_url && *opt->erp_url ? opt->erp_url : r->flow->base_url;
    r->user = getenv("APBOT_ERP_USER");
    r->password = getenv("APBOT_ERP_PASSWORD");
    policy_setup(r);
    make_owner(r);

    int max_sessions = r->flow->policy.max_sessions > 0 ? r->flow->policy.max_sessions : 1;
    n = opt->concurrency > 0 ? opt->concurrency : max_sessions;
    if (n > max_sessions)
        n = max_sessions;
    rc = limiter_new(n, opt->concurrency == 0, &r->limiter);
    if (rc != APBOT_OK)
        goto out;

    rc = store_open(opt->db_path, &st, err, sizeof(err));
    if (rc != APBOT_OK) {
        snprintf(ret->message, sizeof(ret->message), "%s", err);
        goto out;
    }
    /* What earlier runs learnt about this ERP's late commits holds from the start. */
    struct store_late_commit late;
    if (store_late_commit(st, r->flow->name, &late, NULL, 0) == APBOT_OK && late.max_ms > 0) {
        atomic_store(&r->max_late, late.max_ms);
        settle_adapt(r, late.max_ms, "seen in an earlier run");
    }
    struct transition_env renv = {
        .st = st,
        .policy = &r->pol.machine,
        .settle_ms = atomic_load(&r->settle_ms),
        .actor = "recovery",
        .log = on_recovery,
        .ctx = r,
    };
    int recovered = 0;
    rc = transition_recover(&renv, NULL, &recovered, err, sizeof(err));
    if (rc != APBOT_OK) {
        snprintf(ret->message, sizeof(ret->message), "recovery: %.400s", err);
        goto out;
    }

    char line[512];
    snprintf(line, sizeof(line),
             "owner=%s sessions=%d%s erp=%s recovered=%d settle_ms=%" PRId64 " timeout_ms=%ld",
             r->owner, n, opt->concurrency == 0 ? " (adaptive)" : "",
             r->base_url ? r->base_url : "-", recovered, atomic_load(&r->settle_ms),
             r->pol.timeout_ms);
    log_msg(r, "info", "run started", line);

    workers = apbot_xcalloc((size_t)n, sizeof(*workers));
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
        snprintf(w->actor, sizeof(w->actor), "runner:%s", w->owner);
        atomic_fetch_add(&r->running, 1);
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            atomic_fetch_sub(&r->running, 1);
            run_fail(r, "cannot start a worker thread");
            break;
        }
        w->started = true;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);

    /* Watch: clock, cancel, breaker, queue, recovery, progress. */
    enum runner_stop why = RUNNER_STOP_CANCEL;
    int64_t last_recover = mono_ms(), last_progress = 0, last_count = 0;
    struct store_counts counts;
    memset(&counts, 0, sizeof(counts));
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
            renv.settle_ms = atomic_load(&r->settle_ms);
            if (transition_recover(&renv, NULL, &nrec, err, sizeof(err)) != APBOT_OK)
                log_msg(r, "warn", "recovery", err);
        }
        limit_report(r);
        /* A few index probes, not a count of the whole queue (100,000 rows at month-end). */
        if (opt->until_empty && now - last_count >= 250) {
            last_count = now;
            bool any = true;
            if (store_pending(st, &any, err, sizeof(err)) == APBOT_OK && !any) {
                why = RUNNER_STOP_EMPTY;
                break;
            }
        }
        if (opt->progress && now - last_progress >= RUNNER_PROGRESS_EVERY_MS) {
            last_progress = now;
            if (store_counts(st, &counts, err, sizeof(err)) == APBOT_OK)
                progress_draw(r, &counts, elapsed, false);
        }
        sleep_ms(RUNNER_TICK_MS);
    }

    /* Stop: in-flight exchanges are cut short, items handed back by their workers. */
    atomic_store(&r->stop, true);
    atomic_store(&r->abort_io, 1);
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
    ret->limit = limiter_limit(r->limiter);
    ret->settle_ms = atomic_load(&r->settle_ms);
    ret->max_late_commit_ms = atomic_load(&r->max_late);
    if (store_counts(st, &counts, err, sizeof(err)) == APBOT_OK) {
        ret->pending = pending_of(&counts);
        if (opt->progress)
            progress_draw(r, &counts, mono_ms() - r->started_mono, true);
    }
    ret->elapsed_ms = mono_ms() - r->started_mono;
    rc = why == RUNNER_STOP_SYSTEMIC ? APBOT_E_SYSTEMIC
         : why == RUNNER_STOP_ERROR  ? APBOT_E_DB
                                     : APBOT_OK;
    snprintf(line, sizeof(line),
             "stop=%s completed=%" PRId64 " business_exception=%" PRId64 " manual_review=%" PRId64
             " pending=%" PRId64 " elapsed_ms=%" PRId64 " settle_ms=%" PRId64
             " sessions=%d exchanges=%" PRId64 " syncs=%" PRId64,
             runner_stop_name(why), ret->completed, ret->business_exception, ret->manual_review,
             ret->pending, ret->elapsed_ms, ret->settle_ms, ret->limit, ret->exchanges, ret->syncs);
    log_msg(r, why == RUNNER_STOP_SYSTEMIC || why == RUNNER_STOP_ERROR ? "error" : "info",
            "run stopped", line);
    if (ret->message[0] && why != RUNNER_STOP_SYSTEMIC && why != RUNNER_STOP_ERROR)
        log_msg(r, "info", "reason", ret->message);
out:
    free(workers);
    store_close(st);
    if (r) {
        limiter_free(r->limiter);
        flow_free(r->flow);
        pthread_cond_destroy(&r->login_cv);
        pthread_mutex_destroy(&r->login_mu);
        pthread_mutex_destroy(&r->term_mu);
        pthread_mutex_destroy(&r->mu);
        free(r);
    }
    return rc;
}
