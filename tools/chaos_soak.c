/*
 * chaos_soak.c - the randomized kill soak (`chaos-soak`, `make soak`): the proof, routinely,
 * that apbot never books an invoice twice and never loses one, whenever it is killed.
 *
 * Each round draws everything from one seed: the simulator's user interface (acme with
 * flows/acme.xml, or classic with flows/classic.xml), a fast chaos scenario with the ERP's
 * reference guard off (short service times, every fault with some probability, index lag, late
 * commits, a short slot wait, short sessions, sometimes a down window), short policy numbers
 * written into a copy of the flow, and a few dozen invoices (multi-line ones, credit notes,
 * some the ERP must refuse, some the ERP already holds). The real `apbot run` binary works the
 * queue as a child process, is killed with SIGKILL at random moments 1-5 times and restarted
 * each time, then runs to the end (--until-empty, bounded). The ground truth is then checked
 * (tests/helpers/invariants.c): no reference booked twice, no committing request for a
 * reference the ERP held (reposts_of_booked 0), every completed item booked once, approved,
 * with its lines, nothing booked for a business exception, every item terminal; and here also:
 * every enqueued invoice still in the queue, no valid invoice refused as a business exception,
 * every invoice the ERP already held completed under that document without a post.
 *
 * Rounds run in worker processes (--jobs), forked before any thread exists, each with its
 * simulator in-process; they take round numbers from a shared counter and report one fixed
 * record per round through a pipe. No round starts after --minutes (or --seconds); a round is
 * bounded too (at most 5 kills, at most 4 final runs of --max-seconds 120). A failing round keeps
 * its directory (queue database, apbot logs, ledger and lines CSV, stats, round.txt with the seed
 * and the whole plan) and the program prints how to replay it; exit status 1. Kill moments are
 * wall-clock moments, so a replay repeats the plan, not every interleaving.
 *
 * With --pg a round's queue is a schema on a PostgreSQL server of the worker process's own
 * (tests/lib/pg.sh start, fsync off; stopped when the worker ends), worked by two hosts (two
 * `apbot run` processes, each with its own application_name): each kill picks a host, and the
 * round may also restart the server (a fast shutdown, or a crash: an immediate one, which
 * loses the changes committed asynchronously and not yet written) for a moment, or end one
 * host's sessions (pg_terminate_backend). The hosts ride those out (exit 8, the queue
 * unavailable past its bound, is a finding). A failed round's queue is copied into its
 * directory as queue.db (store_copy).
 *
 *   chaos-soak [--rounds N] [--minutes M | --seconds T] [--seed S] [--jobs J] [--dir DIR] [--keep]
 *              [--apbot PATH] [--src DIR] [--min-rounds N] [--quiet] [--settle-ms N] [--pg]
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "apbot/apbot.h"
#include "apbot/buf.h"
#include "apbot/invoice.h"
#include "apbot/machine.h"
#include "apbot/money.h"
#include "apbot/store.h"
#include "helpers/invariants.h"
#include "helpers/pg_test.h"
#include "helpers/sim_client.h"
#include "sim.h"

#ifndef APBOT_SOURCE_DIR
#define APBOT_SOURCE_DIR "."
#endif

#define SOAK_MAX_JOBS 16
#define SOAK_EXIT_SKIP 77 /* --pg without PostgreSQL's server binaries (SKIP_RETURN_CODE) */
#define SOAK_MAX_KILLS 5
#define SOAK_MAX_INVOICES 40
#define SOAK_MIN_INVOICES 20
#define SOAK_FINAL_RUNS 4      /* final `apbot run`s (a breaker trip or --max-seconds) */
#define SOAK_FINAL_SECONDS 120 /* --max-seconds of a final run */
#define SOAK_KEY_LENGTH 24     /* what both bundled flows write (key-length) */
#define SOAK_FLOW_MAX (1u << 20)

/* ---- options and the state the workers share ---------------------------------------------- */

struct soak_opts {
    long rounds;
    long seconds;    /* no round starts after this */
    long min_rounds; /* fewer rounds done than this (time ran out) is a failure */
    long settle_ms;  /* > 0: forces every round's settle delay (to see the soak catch one
                      * that is too short for the ERP's late commits) */
    uint64_t seed;   /* round i runs seed + i */
    int jobs;
    bool keep;   /* keep passing rounds' directories too */
    bool quiet;  /* no per-round lines */
    int ui;      /* >= 0: every round on this simulator UI (--ui); -1: drawn per round */
    bool report; /* after each round, the day's report must be clean (--report) */
    int kills;   /* > 0: exactly this many kills a round (--kills); 0: drawn */
    bool pg;     /* two hosts on a PostgreSQL queue, server restarts and sessions ended */
    char dir[256];
    char apbot[512];
    char src[512];
};

/* In a MAP_SHARED page: the next round to start and the stop flag, for every process. */
struct soak_shared {
    atomic_long next_round;
    atomic_int stop;
};

static volatile sig_atomic_t soak_interrupted;

static void on_signal(int sig)
{
    (void)sig;
    soak_interrupted = 1;
}

/* ---- small helpers -------------------------------------------------------------------------- */

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !soak_interrupted)
        ;
}

/* splitmix64: every draw of a round comes from its seed. */
struct rng {
    uint64_t s;
};

static uint64_t rng_next(struct rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static long rng_range(struct rng *r, long lo, long hi)
{
    return lo + (long)(rng_next(r) % (uint64_t)(hi - lo + 1));
}

static bool rng_percent(struct rng *r, int percent)
{
    return (long)(rng_next(r) % 100) < percent;
}

static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    for (int i = 0; i < 10000 && (de = readdir(d)) != NULL; i++) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char p[600];
        snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
        if (unlink(p) != 0)
            rm_tree(p);
    }
    closedir(d);
    rmdir(dir);
}

/* Reads a whole file (at most max bytes) into a heap string; NULL on failure. */
static char *read_file(const char *path, size_t max)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    struct apbot_buf b;
    apbot_buf_init(&b, max);
    char chunk[8192];
    size_t n;
    bool ok = true;
    while (ok && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        ok = apbot_buf_add(&b, chunk, n) == APBOT_OK;
    ok = ok && !ferror(f);
    fclose(f);
    if (!ok) {
        apbot_buf_done(&b);
        return NULL;
    }
    return apbot_buf_steal(&b, NULL);
}

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    bool bad = fputs(text, f) < 0;
    if (fclose(f) != 0 || bad)
        return -1;
    return 0;
}

/*
 * Replaces the value of attribute `attr` of the flow's <policy> element in *flow (heap string,
 * replaced) by value. Returns 0, or -1 when the policy or the attribute is not there.
 */
static int policy_set(char **flow, const char *attr, long value)
{
    char *p = strstr(*flow, "<policy");
    if (!p)
        return -1;
    char *end = strstr(p, "/>");
    char pat[64];
    snprintf(pat, sizeof(pat), "%s=\"", attr);
    char *a = p;
    for (;;) {
        a = strstr(a + 1, pat);
        if (!a || (end && a > end))
            return -1;
        if (a[-1] == ' ' || a[-1] == '\n' || a[-1] == '\t')
            break;
    }
    char *v = a + strlen(pat);
    char *q = strchr(v, '"');
    if (!q)
        return -1;
    struct apbot_buf b;
    apbot_buf_init(&b, SOAK_FLOW_MAX);
    if (apbot_buf_add(&b, *flow, (size_t)(v - *flow)) != APBOT_OK ||
        apbot_buf_addf(&b, "%ld", value) != APBOT_OK || apbot_buf_adds(&b, q) != APBOT_OK) {
        apbot_buf_done(&b);
        return -1;
    }
    free(*flow);
    *flow = apbot_buf_steal(&b, NULL);
    return 0;
}

/* ---- one round's plan ---------------------------------------------------------------------- */

enum plan_kind {
    PLAN_VALID = 0,  /* the ERP takes it: ends completed (or manual review) */
    PLAN_REFUSED,    /* the ERP refuses it: ends business-exception (or manual review) */
    PLAN_HELD,       /* the ERP holds it already (posted): adopted, never posted */
    PLAN_HELD_DRAFT, /* classic: the ERP holds it as a draft: approved, never posted again */
};

static const char *const plan_kind_names[] = {"valid", "refused", "held", "held-draft"};

/* What happens to the PostgreSQL server in a --pg round. */
enum srv_kind {
    SRV_RESTART,   /* fast shutdown (sessions ended, the WAL flushed), down_ms, start */
    SRV_CRASH,     /* immediate shutdown (a crash: unwritten asynchronous commits lost) */
    SRV_TERMINATE, /* pg_terminate_backend of every session of one host */
};
static const char *const srv_kind_names[] = {"restart", "crash", "terminate"};

struct srv_event {
    enum srv_kind kind;
    long at_ms;   /* after the hosts started */
    long down_ms; /* restart, crash: without a server this long */
    int host;     /* terminate: whose sessions (0: A, 1: B) */
};

struct plan_item {
    char key[INVOICE_KEY_LEN + 1];
    enum plan_kind kind;
    char what[160]; /* vendor, number, lines, why refused */
};

struct round_plan {
    uint64_t seed;
    enum sim_ui ui;
    struct apbot_buf scenario;
    long timeout_ms, connect_ms, settle_ms, lease_ms, backoff_base_ms, backoff_cap_ms;
    long index_lag_ms; /* the simulator's search index lag */
    char concurrency[8];
    int kills;
    long kill_after_ms[SOAK_MAX_KILLS];
    int kill_host[SOAK_MAX_KILLS]; /* --pg: which host each kill stops (0: A, 1: B) */
    bool pg;
    int n_srv;
    struct srv_event srv[2];
    int n_items;
    struct plan_item items[SOAK_MAX_INVOICES];
};

static void scn_add(struct round_plan *p, const char *fmt, ...) APBOT_PRINTF(2, 3);

static void scn_add(struct round_plan *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (apbot_buf_vaddf(&p->scenario, fmt, ap) != APBOT_OK)
        abort(); /* a fixed handful of lines: cannot pass the maximum */
    va_end(ap);
}

static const char *const fault_names[] = {
    "timeout_after_commit",  "late_commit",       "error500_before_commit",
    "error500_after_commit", "overload503",       "overload429",
    "drop_before_commit",    "drop_after_commit", "session_expiry",
    "garbled_after_commit",  "result_login_page", "result_overload503",
    "search_garbled",
};

/* Draws the scenario and the policy numbers of a round. */
static void plan_erp(struct round_plan *p, struct rng *r)
{
    static const enum sim_ui uis[] = {SIM_UI_ACME, SIM_UI_CLASSIC, SIM_UI_SPA};
    p->ui = uis[rng_range(r, 0, 2)];
    apbot_buf_init(&p->scenario, 16384);

    long post_max = rng_range(r, 10, 80);
    long wait_max = rng_range(r, 100, 800); /* a queued request is served (and booked) late */
    long late = rng_range(r, 100, 800);
    long lag = rng_range(r, 20, 400);
    p->index_lag_ms = lag;
    p->timeout_ms = rng_range(r, 600, 1200);
    p->connect_ms = rng_range(r, 300, 600);
    scn_add(p, "slots = %ld\n", rng_range(r, 2, 4));
    scn_add(p, "service_ms.login = 1..%ld\n", rng_range(r, 2, 30));
    scn_add(p, "service_ms.form = 1..%ld\n", rng_range(r, 2, 15));
    scn_add(p, "service_ms.check = 1..%ld\n", rng_range(r, 2, 30));
    scn_add(p, "service_ms.post = 2..%ld\n", post_max);
    scn_add(p, "service_ms.search = 1..%ld\n", rng_range(r, 2, 30));
    scn_add(p, "service_ms.journal = 1..10\n");
    scn_add(p, "index_lag_ms = %ld\n", lag);
    scn_add(p, "session_idle_s = %ld\n", rng_range(r, 2, 20));
    scn_add(p, "session_max_requests = %ld\n", rng_percent(r, 20) ? 0 : rng_range(r, 8, 60));
    scn_add(p, "validation_status = %d\n", rng_percent(r, 50) ? 500 : 200);
    scn_add(p, "reference_guard = off\nduplicate_check = off\n");
    scn_add(p, "queue_wait_max_ms = %ld\n", wait_max);
    scn_add(p, "stall_ms = %ld\n", p->timeout_ms + rng_range(r, 300, 1500));
    scn_add(p, "late_commit_ms = %ld\n", late);
    if (p->ui == SIM_UI_ACME) {
        scn_add(p, "post_redirect = %s\n", rng_percent(r, 40) ? "on" : "off");
    } else if (p->ui == SIM_UI_SPA) {
        /* writes refused after an idle pause while reads still work */
        scn_add(p, "write_idle_s = %ld\n", rng_range(r, 1, 10));
    } else {
        static const char *const answers[] = {"message", "redirect", "mixed"};
        scn_add(p, "approve_answer = %s\n", answers[rng_range(r, 0, 2)]);
    }
    long pmax = rng_range(r, 20, 80); /* per mille: the round's worst fault */
    for (size_t i = 0; i < sizeof(fault_names) / sizeof(fault_names[0]); i++) {
        long pm = rng_percent(r, 80) ? rng_range(r, 0, pmax) : 0;
        scn_add(p, "fault.%s = 0.%03ld\n", fault_names[i], pm);
    }
    if (rng_percent(r, 25)) {
        scn_add(p, "down.start_ms = %ld\n", rng_range(r, 500, 4000));
        scn_add(p, "down.length_ms = %ld\n", rng_range(r, 300, 2000));
    }

    /* The settle delay must outlast the latest a post can land after apbot gave up - a late
     * commit after the drop, or a post that queued past the timeout and then committed late -
     * plus the search index lag; twice that, as an operator sizing it would, plus a margin for
     * a busy machine. */
    long after = late;
    if (wait_max + post_max + late - p->timeout_ms > after)
        after = wait_max + post_max + late - p->timeout_ms;
    p->settle_ms = 2 * (after + lag) + 500;
    if (p->settle_ms < p->timeout_ms + 500) /* flow check: never shorter than the timeout */
        p->settle_ms = p->timeout_ms + 500;
    /* The runner's floor (timeout + connect + 2 x 2000 ms): a kill costs this much wait. */
    p->lease_ms = p->timeout_ms + p->connect_ms + 4000;
    p->backoff_base_ms = rng_range(r, 20, 100);
    p->backoff_cap_ms = rng_range(r, 200, 1000);
    static const char *const conc[] = {"1", "2", "3", "4", "auto", "auto"};
    snprintf(p->concurrency, sizeof(p->concurrency), "%s", conc[rng_range(r, 0, 5)]);

    p->kills = (int)rng_range(r, 1, SOAK_MAX_KILLS);
    for (int k = 0; k < p->kills; k++)
        /* A fast acme run may be done in 2 s: the first kill comes within 1 s. */
        p->kill_after_ms[k] = rng_range(r, 50, k == 0 ? 1000 : 2000);
}

/* Draws a --pg round's hosts and server events (after plan_erp: a SQLite round's plan is
 * the same with or without this). */
static void plan_pg(struct round_plan *p, struct rng *r)
{
    p->pg = true;
    for (int k = 0; k < p->kills; k++)
        p->kill_host[k] = (int)rng_range(r, 0, 1);
    int roll = (int)rng_range(r, 0, 99);
    bool restart = roll < 45, crash = roll >= 45 && roll < 60;
    bool terminate = (roll >= 30 && roll < 45) || (roll >= 60 && roll < 90);
    if (restart || crash)
        p->srv[p->n_srv++] = (struct srv_event){.kind = crash ? SRV_CRASH : SRV_RESTART,
                                                .at_ms = rng_range(r, 300, 4000),
                                                .down_ms = rng_range(r, 100, 2500)};
    if (terminate)
        p->srv[p->n_srv++] = (struct srv_event){.kind = SRV_TERMINATE,
                                                .at_ms = rng_range(r, 300, 4000),
                                                .host = (int)rng_range(r, 0, 1)};
}

static const char *const currencies[] = {"EUR", "EUR", "EUR", "EUR", "EUR", "EUR", "USD",
                                         "GBP", "CHF", "JPY", "KWD", "SEK", "PLN"};
static const char *const texts[] = {
    "Office supplies",
    "Toner & paper <A4>",
    "Consulting \"Q4\" hours",
    "Frais de port \xe2\x80\x93 caf\xc3\xa9",
    "Wartung K\xc3\xbchlanlage",
    "Miete Dezember",
    "Line with 'quotes' and a % sign",
    "A long description that goes on and on, well past the sixty characters a line may hold",
};

/* Draws invoice i into inv (invoice_init'ed by the caller) and its plan entry. */
static void plan_invoice(struct round_plan *p, struct rng *r, int i, struct invoice *inv,
                         struct plan_item *pi)
{
    char vendor[24], number[40], date[24], gl[24];
    pi->kind = PLAN_VALID;
    int roll = (int)rng_range(r, 0, 99);
    if (roll < 10)
        pi->kind = PLAN_REFUSED;
    else if (roll < 15)
        pi->kind = PLAN_HELD;
    else if (roll < 18 && p->ui != SIM_UI_ACME)
        pi->kind = PLAN_HELD_DRAFT;

    snprintf(vendor, sizeof(vendor), "%ld", 100001 + rng_range(r, 0, 39));
    snprintf(number, sizeof(number), "CS%06" PRIX64 "-%02d", p->seed & 0xffffff, i + 1);
    static const char *const months[] = {"2026-10", "2026-11", "2026-12", "2027-01"};
    snprintf(date, sizeof(date), "%s-%02ld", months[rng_range(r, 0, 3)], rng_range(r, 1, 28));
    const char *currency = currencies[rng_range(r, 0, 12)];
    bool held = pi->kind == PLAN_HELD || pi->kind == PLAN_HELD_DRAFT;
    bool credit = !held && rng_percent(r, 8);
    int n_lines = held || rng_percent(r, 45) ? 1 : (int)rng_range(r, 2, 5);
    const char *why = "";
    int refuse = pi->kind == PLAN_REFUSED ? (int)rng_range(r, 0, 3) : -1;
    switch (refuse) {
    case 0:
        snprintf(vendor, sizeof(vendor), "100090");
        why = " refused: blocked vendor";
        break;
    case 1:
        snprintf(vendor, sizeof(vendor), "100099");
        why = " refused: unknown vendor";
        break;
    case 2:
        snprintf(date, sizeof(date), "2026-06-%02ld", rng_range(r, 1, 28));
        why = " refused: closed period";
        break;
    default:
        why = refuse == 3 ? " refused: G/L account 7100" : "";
        break;
    }

    invoice_set_str(&inv->vendor_id, vendor);
    invoice_set_str(&inv->vendor_name, "Soak Vendor");
    invoice_set_str(&inv->invoice_number, number);
    inv->doc_type = credit ? INVOICE_DOC_CREDIT_NOTE : INVOICE_DOC_INVOICE;
    snprintf(inv->issue_date, sizeof(inv->issue_date), "%.10s", date);
    snprintf(inv->currency, sizeof(inv->currency), "%s", currency);
    inv->exponent = money_exponent(currency);
    int64_t unit = inv->exponent == 3 ? 10 : 1; /* KWD: whole fils would be tiny */
    static const int rates[] = {0, 7, 19};
    int rate = held ? 0 : rates[rng_range(r, 0, 2)];
    inv->net_total = inv->tax_total = 0;
    for (int k = 0; k < n_lines; k++) {
        struct invoice_line line;
        memset(&line, 0, sizeof(line));
        snprintf(gl, sizeof(gl), "%ld", held ? 6000 : rng_range(r, 4000, 6999));
        if (refuse == 3 && k == 0)
            snprintf(gl, sizeof(gl), "7100");
        line.gl_account = gl;
        line.description = (char *)texts[rng_range(r, 0, 7)];
        line.net = rng_range(r, 100, 500000) * unit;
        line.tax = line.net * rate / 100;
        invoice_add_line(inv, &line);
        inv->net_total += line.net;
        inv->tax_total += line.tax;
    }
    inv->payable = inv->net_total + inv->tax_total;
    snprintf(pi->what, sizeof(pi->what), "%.23s %.39s %.23s %.3s %d line(s)%s%s", vendor, number,
             date, currency, n_lines, credit ? " credit-note" : "", why);
}

/* ---- one round ----------------------------------------------------------------------------- */

/* What a round reports to the parent: one fixed record through the pipe (< PIPE_BUF). */
struct round_result {
    long index;
    uint64_t seed;
    int ui;
    int ok;         /* 1 passed, 0 failed, -1 interrupted (not counted) */
    int kills;      /* SIGKILLs delivered */
    int kills_post; /* kills that left an item in posting (the form possibly sent) */
    int runs;       /* `apbot run` processes started */
    int invoices;   /* enqueued */
    int bookings;   /* ledger rows at the end */
    int completed, business_exception, manual_review;
    int duplicates; /* references booked more than once */
    long long reposts;
    int lost;      /* not in the queue, not terminal, or completed without a booking */
    int misjudged; /* valid invoices refused, held ones posted or not adopted */
    int ambiguous; /* `unknown` outcomes of a post: reconciled, never re-posted blind */
    int recovered; /* leases of a killed run taken over (`lease-expired`) */
    int reposted;  /* items posted a second time after a confirmed absence */
    int restarts;  /* --pg: server restarts and crashes */
    int ended;     /* --pg: a host's sessions ended (pg_terminate_backend) */
    int64_t ms;
    char problem[600];
    char dir[300];
};

_Static_assert(sizeof(struct round_result) < 4096, "one atomic pipe write per round");

struct round {
    const struct soak_opts *o;
    struct round_plan plan;
    char dir[300], db[440], flow[340], url[64];
    char host_db[2][480]; /* --pg: the queue as each host connects to it */
    char schema[40];      /* --pg: the round's schema */
    struct sim *sim;
    unsigned short port;
    struct round_result *res;
};

static void fail(struct round *rd, const char *fmt, ...) APBOT_PRINTF(2, 3);

static void fail(struct round *rd, const char *fmt, ...)
{
    if (rd->res->ok == 0 && rd->res->problem[0])
        return; /* the first problem names the round */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rd->res->problem, sizeof(rd->res->problem), fmt, ap);
    va_end(ap);
    rd->res->ok = 0;
}

/* Writes the flow copy with the round's policy numbers. */
static int round_flow(struct round *rd)
{
    char src[700];
    snprintf(src, sizeof(src), "%s/flows/%s.xml", rd->o->src, sim_ui_name(rd->plan.ui));
    char *flow = read_file(src, SOAK_FLOW_MAX);
    if (!flow) {
        fail(rd, "cannot read %s", src);
        return -1;
    }
    const struct round_plan *p = &rd->plan;
    int rc = policy_set(&flow, "connect-timeout-ms", p->connect_ms) |
             policy_set(&flow, "timeout-ms", p->timeout_ms) |
             policy_set(&flow, "settle-ms", p->settle_ms) |
             policy_set(&flow, "lease-ms", p->lease_ms) |
             policy_set(&flow, "backoff-base-ms", p->backoff_base_ms) |
             policy_set(&flow, "backoff-cap-ms", p->backoff_cap_ms);
    if (rc != 0 || write_file(rd->flow, flow) != 0) {
        fail(rd, "cannot write the flow copy %s", rd->flow);
        rc = -1;
    }
    free(flow);
    return rc;
}

/* Books an invoice the ERP is to hold already (drift from a human, or an earlier run). */
static int round_prebook(struct round *rd, const struct invoice *inv, const char *key, bool draft)
{
    char amount[48];
    if (money_format_plain(inv->payable, inv->exponent, amount, sizeof(amount)) != APBOT_OK)
        return -1;
    char *vendor = simc_escape(inv->vendor_id);
    char *number = simc_escape(inv->invoice_number);
    char body[512];
    snprintf(body, sizeof(body),
             "vendor_id=%s&invoice_number=%s&invoice_date=%s&currency=%s&amount=%s&reference=%s"
             "&gl_account=6000&status=%s",
             vendor, number, inv->issue_date, inv->currency, amount, key,
             draft ? "draft" : "posted");
    free(vendor);
    free(number);
    long status = 0;
    char *out = NULL;
    int rc = simc_request(rd->port, "POST", "/_sim/book", body, 10000, &status, &out);
    free(out);
    return rc == 0 && status == 200 ? 0 : -1;
}

/* Draws and enqueues the round's invoices through the store; books the held ones. */
static int round_invoices(struct round *rd, struct rng *r)
{
    char err[APBOT_ERR_LEN];
    struct store *st = NULL;
    if (store_open(rd->db, &st, err, sizeof(err)) != APBOT_OK) {
        fail(rd, "store_open: %s", err);
        return -1;
    }
    int rc = 0;
    int n = (int)rng_range(r, SOAK_MIN_INVOICES, SOAK_MAX_INVOICES);
    for (int i = 0; i < n && rc == 0; i++) {
        struct invoice inv;
        invoice_init(&inv);
        struct plan_item *pi = &rd->plan.items[i];
        plan_invoice(&rd->plan, r, i, &inv, pi);
        enum store_enqueue_result res;
        int64_t id = 0;
        if (invoice_identity_key(&inv, pi->key) != APBOT_OK) {
            fail(rd, "invoice %d: no key", i + 1);
            rc = -1;
        } else if (store_enqueue(st, &inv, "chaos-soak", NULL, &res, &id, err, sizeof(err)) !=
                       APBOT_OK ||
                   res != STORE_ENQ_QUEUED) {
            fail(rd, "enqueue %s: %s", pi->what, err);
            rc = -1;
        } else if ((pi->kind == PLAN_HELD || pi->kind == PLAN_HELD_DRAFT) &&
                   round_prebook(rd, &inv, pi->key, pi->kind == PLAN_HELD_DRAFT) != 0) {
            fail(rd, "cannot book %s in the simulator", pi->what);
            rc = -1;
        }
        invoice_done(&inv);
        rd->plan.n_items = i + 1;
    }
    store_close(st);
    rd->res->invoices = rd->plan.n_items;
    /* What the ERP held before apbot started must be searchable by then: a booking made
     * within the index lag of the first lookup is invisible to any check-before-post. */
    nap_ms(rd->plan.index_lag_ms + 300);
    return rc;
}

/* round.txt: everything needed to understand (and replay) the round. */
static void round_describe(struct round *rd)
{
    const struct round_plan *p = &rd->plan;
    struct apbot_buf b;
    apbot_buf_init(&b, 1u << 20);
    int rc = apbot_buf_addf(&b,
                            "seed %" PRIu64 "\nreplay: chaos-soak%s --seed %" PRIu64
                            " --rounds 1\nui %s\nflow %s\n"
                            "policy: timeout-ms %ld connect-timeout-ms %ld settle-ms %ld "
                            "lease-ms %ld backoff %ld..%ld ms; --concurrency %s\n"
                            "kills planned %d at",
                            p->seed, p->pg ? " --pg" : "", p->seed, sim_ui_name(p->ui), rd->flow,
                            p->timeout_ms, p->connect_ms, p->settle_ms, p->lease_ms,
                            p->backoff_base_ms, p->backoff_cap_ms, p->concurrency, p->kills);
    for (int k = 0; k < p->kills; k++)
        rc |= p->pg
                  ? apbot_buf_addf(&b, " %ld (host %c)", p->kill_after_ms[k], 'A' + p->kill_host[k])
                  : apbot_buf_addf(&b, " %ld", p->kill_after_ms[k]);
    rc |= apbot_buf_addf(&b, p->pg ? " ms after the one before\n" : " ms after each start\n");
    if (p->pg) {
        rc |= apbot_buf_addf(&b, "postgresql: schema %s, two hosts; server events:", rd->schema);
        for (int i = 0; i < p->n_srv; i++)
            rc |= apbot_buf_addf(&b, " %s at %ld ms (down %ld ms, host %c)",
                                 srv_kind_names[p->srv[i].kind], p->srv[i].at_ms, p->srv[i].down_ms,
                                 'A' + p->srv[i].host);
        rc |= apbot_buf_addf(&b, "%s\n", p->n_srv ? "" : " none");
    }
    rc |= apbot_buf_addf(&b, "\nscenario:\n%s\ninvoices:\n", apbot_buf_str(&p->scenario));
    for (int i = 0; i < p->n_items; i++)
        rc |= apbot_buf_addf(&b, "%s %-10s %s\n", p->items[i].key,
                             plan_kind_names[p->items[i].kind], p->items[i].what);
    char path[400];
    snprintf(path, sizeof(path), "%s/round.txt", rd->dir);
    if (rc != APBOT_OK || write_file(path, apbot_buf_str(&b)) != 0)
        fprintf(stderr, "chaos-soak: cannot write %s\n", path);
    apbot_buf_done(&b);
}

/* Forks `apbot run` on db; its output goes to dir/run-N.log. */
static pid_t spawn_run_db(struct round *rd, const char *db, int n, long max_seconds)
{
    char log[400], secs[16];
    snprintf(log, sizeof(log), "%s/run-%d.log", rd->dir, n);
    snprintf(secs, sizeof(secs), "%ld", max_seconds);
    const char *bin = rd->o->apbot;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        /* Only async-signal-safe calls between fork and exec (the simulator has threads). */
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execl(bin, bin, "--db", db, "run", "--flow", rd->flow, "--erp", rd->url, "--until-empty",
              "--max-seconds", secs, "--concurrency", rd->plan.concurrency, (char *)NULL);
        _exit(127);
    }
    if (pid > 0)
        rd->res->runs++;
    return pid;
}

/* Forks `apbot run` on the round's queue; its output goes to dir/run-N.log. */
static pid_t spawn_run(struct round *rd, int n, long max_seconds)
{
    return spawn_run_db(rd, rd->db, n, max_seconds);
}

/* Waits up to ms for the child to end by itself: 1 and its exit code (128 + signal) in
 * *ret_code when it did, 0 when it still runs. */
static int wait_child(pid_t pid, long ms, int *ret_code)
{
    int64_t until = mono_ms() + ms;
    for (;;) {
        int status = 0;
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) {
            *ret_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            return 1;
        }
        if (mono_ms() >= until || soak_interrupted)
            return 0;
        nap_ms(20);
    }
}

static void kill_child(pid_t pid)
{
    int status;
    (void)kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
}

/* Items per state, or -1 when the queue cannot be read. */
static int queue_counts(struct round *rd, struct store_counts *c)
{
    struct store *st = NULL;
    char err[APBOT_ERR_LEN];
    if (store_open(rd->db, &st, err, sizeof(err)) != APBOT_OK)
        return -1;
    int rc = store_counts(st, c, err, sizeof(err));
    store_close(st);
    return rc == APBOT_OK ? 0 : -1;
}

static int64_t pending_of(const struct store_counts *c)
{
    return c->by_state[MACHINE_NEW] + c->by_state[MACHINE_CHECKING] + c->by_state[MACHINE_POSTING] +
           c->by_state[MACHINE_RECONCILING] + c->by_state[MACHINE_FINISHING];
}

/* The exit codes of `apbot run` a soak accepts: 0, and 4 (circuit breaker: ERP unusable for a
 * while, e.g. the down window). Anything else is a finding. */
static bool run_exit_ok(int code)
{
    return code == 0 || code == 4;
}

/* Counts a kill just made (one with a post in flight apart) and checks, mid-round, that
 * nothing is booked twice and nothing booked was posted again, whatever is still pending.
 * host names the killed host in the failure (" (host A)"), or "". */
static int after_kill(struct round *rd, const char *host)
{
    rd->res->kills++;
    struct store_counts c;
    if (queue_counts(rd, &c) == 0 && c.by_state[MACHINE_POSTING] > 0)
        rd->res->kills_post++;
    struct inv_report r;
    if (invariants_check(rd->db, rd->port, SOAK_KEY_LENGTH, true, &r) == 0)
        return 0;
    rd->res->duplicates = r.duplicated_refs;
    rd->res->reposts = r.reposts_of_booked;
    rd->res->bookings = r.bookings;
    fail(rd, "after kill %d%s: %s", rd->res->kills, host, r.first_problem);
    return -1;
}

/* Kills `apbot run` at the plan's moments, restarting it each time. Returns -1 on a finding. */
static int round_kills(struct round *rd)
{
    const struct round_plan *p = &rd->plan;
    for (int k = 0; k < p->kills && !soak_interrupted; k++) {
        pid_t pid = spawn_run(rd, rd->res->runs + 1, SOAK_FINAL_SECONDS);
        if (pid < 0) {
            fail(rd, "fork: %s", strerror(errno));
            return -1;
        }
        int code = 0;
        if (wait_child(pid, p->kill_after_ms[k], &code)) {
            if (!run_exit_ok(code)) {
                fail(rd, "apbot run (run-%d.log) exited %d", rd->res->runs, code);
                return -1;
            }
            struct store_counts c;
            if (code == 0 && queue_counts(rd, &c) == 0 && pending_of(&c) == 0)
                return 0; /* done before the kill: nothing left to kill */
            continue;
        }
        kill_child(pid);
        if (soak_interrupted)
            return 0;
        if (after_kill(rd, "") != 0)
            return -1;
    }
    return 0;
}

/* ---- --pg: two hosts, a server that blinks ------------------------------------------------ */

/* The worker process's PostgreSQL server (started with its first --pg round). */
static struct pgt_own soak_pg;
static bool soak_pg_up;

/* Makes the round's schema and connection strings; -1 when there is no server. */
static int round_pg_queue(struct round *rd)
{
    if (!soak_pg_up) {
        if (!pgt_own_start(&soak_pg)) {
            fail(rd, "no PostgreSQL server of the soak's own (tests/lib/pg.sh start)");
            return -1;
        }
        soak_pg_up = true;
    }
    snprintf(rd->schema, sizeof(rd->schema), "soak_%" PRIu64, rd->plan.seed);
    char sql[160];
    snprintf(sql, sizeof(sql), "DROP SCHEMA IF EXISTS %s CASCADE; CREATE SCHEMA %s", rd->schema,
             rd->schema);
    if (pgt_exec(soak_pg.conn, sql, false) != 0) {
        fail(rd, "cannot make schema %s", rd->schema);
        return -1;
    }
    snprintf(rd->db, sizeof(rd->db), "%.300s options='-c search_path=%s'", soak_pg.conn,
             rd->schema);
    for (int h = 0; h < 2; h++)
        snprintf(rd->host_db[h], sizeof(rd->host_db[h]), "%s application_name=soak_%c", rd->db,
                 'a' + h);
    return 0;
}

/* The round's schema goes (a passing round), or is copied into dir/queue.db (a failed one). */
static void round_pg_done(struct round *rd)
{
    if (!rd->schema[0] || !soak_pg_up)
        return;
    if (rd->res->ok == 0) {
        char err[APBOT_ERR_LEN], path[400];
        struct store *from = NULL, *to = NULL;
        snprintf(path, sizeof(path), "%s/queue.db", rd->dir);
        if (store_open(rd->db, &from, err, sizeof(err)) != APBOT_OK ||
            store_open(path, &to, err, sizeof(err)) != APBOT_OK ||
            store_copy(from, to, NULL, err, sizeof(err)) != APBOT_OK)
            fprintf(stderr, "chaos-soak: cannot copy the queue of %s: %s\n", rd->dir, err);
        store_close(from);
        store_close(to);
        return;
    }
    char sql[120];
    snprintf(sql, sizeof(sql), "DROP SCHEMA IF EXISTS %s CASCADE", rd->schema);
    (void)pgt_exec(soak_pg.conn, sql, true);
}

/* One server event of the plan. */
static int round_srv(struct round *rd, const struct srv_event *ev)
{
    char arg[24];
    int rc = 0;
    switch (ev->kind) {
    case SRV_RESTART:
    case SRV_CRASH:
        rc = pgt_own_ctl(&soak_pg, "down", ev->kind == SRV_CRASH ? "immediate" : "fast");
        nap_ms(ev->down_ms);
        rc |= pgt_own_ctl(&soak_pg, "up", NULL);
        rd->res->restarts++;
        break;
    case SRV_TERMINATE:
        snprintf(arg, sizeof(arg), "soak_%c", 'a' + ev->host);
        {
            char sql[200];
            snprintf(sql, sizeof(sql),
                     "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                     " WHERE application_name = '%s'",
                     arg);
            rc = pgt_exec(soak_pg.conn, sql, false);
        }
        rd->res->ended++;
        break;
    }
    if (rc != 0)
        fail(rd, "the server's %s failed (pg.sh: see %s.log)", srv_kind_names[ev->kind],
             soak_pg.state);
    return rc ? -1 : 0;
}

/* A host's run ended by itself with code: a finding unless 0 or 4 (8: the queue's outage
 * outlasted its bound, which a moment's restart must never do). */
static int host_ended(struct round *rd, int host, int code)
{
    if (run_exit_ok(code))
        return 0;
    fail(rd, "host %c: apbot run (run-%d.log or before) exited %d", 'A' + host, rd->res->runs,
         code);
    return -1;
}

/*
 * Two hosts work the queue; the plan's kills (each a host, at moments after the one before)
 * and server events (at moments after the start) happen in time order, a killed host restarted
 * at once. Then both run to the end by themselves. Returns -1 on a finding.
 */
static int round_hosts_pg(struct round *rd)
{
    const struct round_plan *p = &rd->plan;
    pid_t pid[2];
    for (int h = 0; h < 2; h++)
        if ((pid[h] = spawn_run_db(rd, rd->host_db[h], rd->res->runs + 1, SOAK_FINAL_SECONDS)) <
            0) {
            fail(rd, "fork: %s", strerror(errno));
            return -1;
        }
    int64_t t0 = mono_ms(), kill_at = t0;
    int k = 0, e = 0;
    bool srv_done[2] = {false, false};
    while ((k < p->kills || e < p->n_srv) && !soak_interrupted) {
        /* the next thing due: a kill, or a server event */
        int64_t next_kill = k < p->kills ? kill_at + p->kill_after_ms[k] : INT64_MAX;
        int next_e = -1;
        for (int i = 0; i < p->n_srv; i++)
            if (!srv_done[i] && (next_e < 0 || p->srv[i].at_ms < p->srv[next_e].at_ms))
                next_e = i;
        int64_t next_srv = next_e >= 0 ? t0 + p->srv[next_e].at_ms : INT64_MAX;
        int64_t due = next_kill < next_srv ? next_kill : next_srv;
        for (int h = 0; h < 2; h++) {
            int code = 0;
            if (pid[h] > 0 && wait_child(pid[h], 0, &code)) {
                pid[h] = -1;
                if (host_ended(rd, h, code) != 0)
                    goto stop;
            }
        }
        if (pid[0] < 0 && pid[1] < 0) {
            struct store_counts c;
            if (queue_counts(rd, &c) == 0 && pending_of(&c) == 0)
                break; /* both done before the plan was: nothing left to disturb */
        }
        int64_t wait = due - mono_ms();
        if (wait > 0) {
            nap_ms(wait > 20 ? 20 : (long)wait);
            continue;
        }
        if (next_kill <= next_srv) {
            int h = p->kill_host[k++];
            kill_at = mono_ms();
            if (pid[h] > 0) {
                kill_child(pid[h]);
                if (after_kill(rd, h == 0 ? " (host A)" : " (host B)") != 0)
                    goto stop;
            }
            if ((pid[h] = spawn_run_db(rd, rd->host_db[h], rd->res->runs + 1, SOAK_FINAL_SECONDS)) <
                0) {
                fail(rd, "fork: %s", strerror(errno));
                goto stop;
            }
        } else {
            srv_done[next_e] = true;
            e++;
            if (round_srv(rd, &p->srv[next_e]) != 0)
                goto stop;
        }
    }
    /* Both to the end by themselves (round_finish then runs whatever is left). */
    for (int h = 0; h < 2; h++) {
        int code = 0;
        if (pid[h] <= 0)
            continue;
        if (!wait_child(pid[h], (SOAK_FINAL_SECONDS + 30) * 1000L, &code)) {
            fail(rd, "host %c did not stop within --max-seconds", 'A' + h);
            goto stop;
        }
        pid[h] = -1;
        if (host_ended(rd, h, code) != 0)
            goto stop;
    }
    return 0;
stop:
    for (int h = 0; h < 2; h++)
        if (pid[h] > 0)
            kill_child(pid[h]);
    return -1;
}

/* Runs apbot to the end: restarted after a breaker trip or a run that ran out of time. */
static int round_finish(struct round *rd)
{
    for (int n = 0; n < SOAK_FINAL_RUNS && !soak_interrupted; n++) {
        pid_t pid = spawn_run(rd, rd->res->runs + 1, SOAK_FINAL_SECONDS);
        if (pid < 0) {
            fail(rd, "fork: %s", strerror(errno));
            return -1;
        }
        int code = 0;
        if (!wait_child(pid, (SOAK_FINAL_SECONDS + 30) * 1000L, &code)) {
            kill_child(pid);
            if (soak_interrupted)
                return 0;
            fail(rd, "apbot run (run-%d.log) did not stop within --max-seconds", rd->res->runs);
            return -1;
        }
        if (!run_exit_ok(code)) {
            fail(rd, "apbot run (run-%d.log) exited %d", rd->res->runs, code);
            return -1;
        }
        struct store_counts c;
        if (queue_counts(rd, &c) != 0) {
            fail(rd, "cannot read the queue");
            return -1;
        }
        if (pending_of(&c) == 0)
            return 0;
        nap_ms(500);
    }
    return 0; /* what is still pending is counted lost by the check */
}

struct item_walk {
    struct round *rd;
    struct store *st;
};

static int count_event(void *ctx, const struct store_event_row *row)
{
    struct round_result *res = ctx;
    if (row->event && strcmp(row->event, "unknown") == 0)
        res->ambiguous++;
    else if (row->event && strcmp(row->event, "lease-expired") == 0)
        res->recovered++;
    return 0;
}

static int check_item(void *ctx, const struct store_item *it)
{
    struct item_walk *w = ctx;
    struct round *rd = w->rd;
    const struct plan_item *pi = NULL;
    for (int i = 0; i < rd->plan.n_items; i++)
        if (strcmp(rd->plan.items[i].key, it->key) == 0)
            pi = &rd->plan.items[i];
    char err[APBOT_ERR_LEN];
    if (store_each_event(w->st, it->id, count_event, rd->res, err, sizeof(err)) != APBOT_OK)
        fail(rd, "cannot read the events of item %" PRId64 ": %s", it->id, err);
    if (it->counters.posts > 1)
        rd->res->reposted++;
    if (!pi) {
        fail(rd, "item %" PRId64 " (%s) is not one the soak enqueued", it->id, it->key);
        return 0;
    }
    switch (pi->kind) {
    case PLAN_VALID:
        if (it->state == MACHINE_BUSINESS_EXCEPTION) {
            rd->res->misjudged++;
            fail(rd, "valid invoice %s (%s) refused: %s", it->key, pi->what,
                 it->reason ? it->reason : "");
        }
        break;
    case PLAN_REFUSED:
        break;
    case PLAN_HELD:
    case PLAN_HELD_DRAFT:
        if (it->counters.posts != 0) {
            rd->res->misjudged++;
            fail(rd, "invoice %s (%s) the ERP held was posted again (%d posts)", it->key, pi->what,
                 it->counters.posts);
        } else if (it->state == MACHINE_BUSINESS_EXCEPTION) {
            rd->res->misjudged++;
            fail(rd, "invoice %s (%s) the ERP held ended business-exception", it->key, pi->what);
        }
        break;
    }
    return 0;
}

/* The ground truth, once nothing is in flight any more. */
static void round_check(struct round *rd)
{
    /* A late commit still on its way could be a second booking: let it land first. */
    for (int i = 0; i < 100 && simc_stat(rd->port, "late_commits_pending") > 0; i++)
        nap_ms(100);
    struct inv_report r;
    int rc = invariants_check(rd->db, rd->port, SOAK_KEY_LENGTH, false, &r);
    struct round_result *res = rd->res;
    res->bookings = r.bookings;
    res->completed = r.completed;
    res->business_exception = r.business_exception;
    res->manual_review = r.manual_review;
    res->duplicates = r.duplicated_refs;
    res->reposts = r.reposts_of_booked;
    res->lost = r.pending + r.completed_unbooked + (res->invoices - r.items);
    if (rc != 0)
        fail(rd, "%s", r.first_problem);
    if (r.items != res->invoices)
        fail(rd, "%d invoices enqueued, %d in the queue", res->invoices, r.items);

    struct store *st = NULL;
    char err[APBOT_ERR_LEN];
    struct item_walk w = {.rd = rd};
    if (store_open(rd->db, &st, err, sizeof(err)) != APBOT_OK) {
        fail(rd, "cannot open the queue: %s", err);
        return;
    }
    w.st = st;
    if (store_each(st, MACHINE_STATE_INVALID, check_item, &w, err, sizeof(err)) != APBOT_OK)
        fail(rd, "cannot walk the queue: %s", err);
    store_close(st);
}

/*
 * The day's reconciliation report of the round, which must be clean (exit 0): every booking of
 * the day an item's, each once, with its amount. Only for an ERP that lists by booking day
 * (acme, spa): classic lists by invoice date, which the round draws over four months. The
 * scenario's faults and its outage stay on, so a listing can fail past the flow's retries: that
 * is exit 1 (no report, never a partial one) and not drift, and the report is asked again, up to
 * SOAK_REPORT_TRIES times, each attempt's output kept (report.txt, report-2.txt, ...).
 */
#define SOAK_REPORT_TRIES 4
#define SOAK_REPORT_PAUSE_MS 3500 /* longer than the scenario's outage */

static int report_once(struct round *rd, int attempt, char *log, size_t loglen)
{
    if (attempt == 1)
        snprintf(log, loglen, "%s/report.txt", rd->dir);
    else
        snprintf(log, loglen, "%s/report-%d.txt", rd->dir, attempt);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execl(rd->o->apbot, rd->o->apbot, "--db", rd->db, "report", "--flow", rd->flow, "--erp",
              rd->url, (char *)NULL);
        _exit(127);
    }
    int code = 0;
    if (pid < 0) {
        fail(rd, "fork: %s", strerror(errno));
        return -1;
    }
    if (!wait_child(pid, 120000, &code)) {
        kill_child(pid);
        fail(rd, "apbot report did not finish");
        return -1;
    }
    return code;
}

static void round_report(struct round *rd)
{
    char log[400] = "report.txt";
    int code = 0;
    for (int attempt = 1; attempt <= SOAK_REPORT_TRIES && !soak_interrupted; attempt++) {
        if (attempt > 1)
            nap_ms(SOAK_REPORT_PAUSE_MS);
        code = report_once(rd, attempt, log, sizeof(log));
        if (code != 1) /* 1: the ERP could not be read completely, ask again */
            break;
    }
    const char *name = strrchr(log, '/');
    if (code > 0)
        fail(rd, "the day's report is not clean (exit %d, %s)", code, name ? name + 1 : log);
}

/* Keeps the simulator's side of a failed round next to the queue and the logs. */
static void round_dump(struct round *rd)
{
    static const struct {
        const char *file, *path;
    } dumps[] = {{"ledger.csv", "/_sim/ledger.csv"},
                 {"lines.csv", "/_sim/lines.csv"},
                 {"stats.json", "/_sim/stats"}};
    for (size_t i = 0; i < sizeof(dumps) / sizeof(dumps[0]); i++) {
        long status = 0;
        char *body = NULL;
        char path[400];
        snprintf(path, sizeof(path), "%s/%s", rd->dir, dumps[i].file);
        if (simc_request(rd->port, "GET", dumps[i].path, NULL, 10000, &status, &body) != 0 ||
            status != 200 || !body || write_file(path, body) != 0)
            fprintf(stderr, "chaos-soak: cannot keep %s\n", path);
        free(body);
    }
    char path[400];
    snprintf(path, sizeof(path), "%s/problem.txt", rd->dir);
    char text[800];
    snprintf(text, sizeof(text), "%s\n", rd->res->problem);
    (void)write_file(path, text);
}

static void round_run(const struct soak_opts *o, long index, uint64_t seed,
                      struct round_result *res)
{
    struct round rd;
    memset(&rd, 0, sizeof(rd));
    memset(res, 0, sizeof(*res));
    int64_t t0 = mono_ms();
    rd.o = o;
    rd.res = res;
    res->index = index;
    res->seed = seed;
    res->ok = 1;
    rd.plan.seed = seed;
    struct rng r = {.s = seed};
    plan_erp(&rd.plan, &r);
    if (o->ui >= 0)
        rd.plan.ui = (enum sim_ui)o->ui;
    if (o->kills > 0)
        rd.plan.kills = o->kills;
    if (o->pg)
        plan_pg(&rd.plan, &r);
    if (o->settle_ms > 0) {
        struct round_plan *p = &rd.plan;
        p->settle_ms = o->settle_ms;
        if (p->timeout_ms > p->settle_ms) /* flow check: a settle delay outlasts the timeout */
            p->timeout_ms = p->settle_ms;
        if (p->connect_ms > p->timeout_ms)
            p->connect_ms = p->timeout_ms;
        p->lease_ms = p->timeout_ms + p->connect_ms + 4000;
    }
    res->ui = (int)rd.plan.ui;

    snprintf(rd.dir, sizeof(rd.dir), "%s/round-%" PRIu64, o->dir, seed);
    snprintf(res->dir, sizeof(res->dir), "%s", rd.dir);
    rm_tree(rd.dir);
    if (mkdir(rd.dir, 0700) != 0) {
        fail(&rd, "mkdir %s: %s", rd.dir, strerror(errno));
        goto out;
    }
    snprintf(rd.db, sizeof(rd.db), "%s/queue.db", rd.dir);
    snprintf(rd.flow, sizeof(rd.flow), "%s/flow.xml", rd.dir);
    if (round_flow(&rd) != 0 || (o->pg && round_pg_queue(&rd) != 0))
        goto out;

    struct sim_options so;
    memset(&so, 0, sizeof(so));
    char err[APBOT_ERR_LEN];
    so.scenario_text = apbot_buf_str(&rd.plan.scenario);
    so.seed = seed;
    so.admin = true;
    so.ui = rd.plan.ui;
    if (sim_start(&so, &rd.sim, err, sizeof(err)) != 0) {
        fail(&rd, "sim_start: %s", err);
        goto out;
    }
    rd.port = sim_port(rd.sim);
    snprintf(rd.url, sizeof(rd.url), "http://127.0.0.1:%u", (unsigned)rd.port);

    if (round_invoices(&rd, &r) != 0)
        goto out;
    round_describe(&rd);
    if ((o->pg ? round_hosts_pg(&rd) : round_kills(&rd)) != 0 || soak_interrupted)
        goto out;
    if (round_finish(&rd) != 0 || soak_interrupted)
        goto out;
    round_check(&rd);
    if (o->report && res->ok == 1 && rd.plan.ui != SIM_UI_CLASSIC)
        round_report(&rd);

out:
    if (soak_interrupted && res->ok == 1)
        res->ok = -1;
    if (res->ok == 0 && rd.sim)
        round_dump(&rd);
    round_pg_done(&rd);
    sim_stop(rd.sim);
    if (res->ok == 1 && !o->keep)
        rm_tree(rd.dir);
    apbot_buf_done(&rd.plan.scenario);
    res->ms = mono_ms() - t0;
}

/* ---- workers and the parent ---------------------------------------------------------------- */

static void worker(const struct soak_opts *o, struct soak_shared *sh, int fd, int64_t deadline)
{
    if (apbot_global_init() != APBOT_OK)
        _exit(2);
    int code = 0;
    while (!atomic_load(&sh->stop) && !soak_interrupted && mono_ms() < deadline) {
        long i = atomic_fetch_add(&sh->next_round, 1);
        if (i >= o->rounds)
            break;
        struct round_result res;
        round_run(o, i, o->seed + (uint64_t)i, &res);
        if (res.ok == 0)
            atomic_store(&sh->stop, 1);
        if (write(fd, &res, sizeof(res)) != (ssize_t)sizeof(res)) {
            code = 2;
            break;
        }
    }
    if (soak_pg_up)
        pgt_own_stop(&soak_pg);
    apbot_global_cleanup();
    _exit(code);
}

struct totals {
    long rounds, acme, classic, spa, failed, interrupted, restarts, ended;
    long kills, kills_post, runs, invoices, bookings, completed, be, mr, duplicates, lost,
        misjudged, ambiguous, recovered, reposted;
    long long reposts;
    int64_t ms_sum, ms_max;
};

static void print_round(const struct round_result *res)
{
    const char *verdict = res->ok == 1 ? "ok" : res->ok == 0 ? "FAIL" : "interrupted";
    if (res->restarts || res->ended)
        printf("round %4ld seed %" PRIu64 " postgresql: server restarts %d, sessions ended %d\n",
               res->index + 1, res->seed, res->restarts, res->ended);
    printf("round %4ld seed %" PRIu64 " %-7s kills %d (%d mid-post) runs %d | invoices %d "
           "bookings %d: completed %d, business-exception %d, manual-review %d | ambiguous %d "
           "recovered %d | duplicates %d re-posts %lld lost %d | %.1f s %s\n",
           res->index + 1, res->seed, sim_ui_name((enum sim_ui)res->ui), res->kills,
           res->kills_post, res->runs, res->invoices, res->bookings, res->completed,
           res->business_exception, res->manual_review, res->ambiguous, res->recovered,
           res->duplicates, res->reposts, res->lost, (double)res->ms / 1000.0, verdict);
    fflush(stdout);
}

static void add_round(struct totals *t, const struct round_result *res)
{
    if (res->ok < 0) {
        t->interrupted++;
        return;
    }
    t->rounds++;
    if (res->ui == SIM_UI_CLASSIC)
        t->classic++;
    else if (res->ui == SIM_UI_SPA)
        t->spa++;
    else
        t->acme++;
    t->failed += res->ok == 0;
    t->kills += res->kills;
    t->kills_post += res->kills_post;
    t->runs += res->runs;
    t->invoices += res->invoices;
    t->bookings += res->bookings;
    t->completed += res->completed;
    t->be += res->business_exception;
    t->mr += res->manual_review;
    t->duplicates += res->duplicates;
    t->reposts += res->reposts;
    t->lost += res->lost;
    t->misjudged += res->misjudged;
    t->ambiguous += res->ambiguous;
    t->recovered += res->recovered;
    t->reposted += res->reposted;
    t->restarts += res->restarts;
    t->ended += res->ended;
    t->ms_sum += res->ms;
    if (res->ms > t->ms_max)
        t->ms_max = res->ms;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: chaos-soak [--rounds N] [--minutes M | --seconds T] [--seed S] [--jobs J]\n"
            "                  [--dir DIR]"
            " [--keep] [--apbot PATH] [--src DIR] [--min-rounds N] [--quiet]\n"
            "                  [--settle-ms N] [--ui acme|classic|spa] [--kills N] [--report]\n"
            "\n"
            "The randomized kill soak: per round a seed, a fast chaos scenario (reference guard\n"
            "off), a few dozen invoices, `apbot run` killed with SIGKILL 1-5 times at random\n"
            "moments and restarted, run to the end, then the invariants on the ERP's ground\n"
            "truth. Round i uses seed S+i; replay one with --seed S+i --rounds 1.\n"
            "  --rounds N      at most N rounds (default 20)\n"
            "  --minutes M     start no round after M minutes (default 10)\n"
            "  --seconds T     the same in seconds\n"
            "  --seed S        first round's seed (default: from the clock, printed)\n"
            "  --jobs J        rounds at once, each in its own process (default 1, at most %d)\n"
            "  --dir DIR       where round directories go (default: a new temp dir); a failed\n"
            "                  round's directory is always kept\n"
            "  --keep          keep every round's directory\n"
            "  --apbot PATH    the apbot binary (default $APBOT_BIN, else next to chaos-soak)\n"
            "  --src DIR       the source tree, for flows/ (default $APBOT_SRC, else the build's)\n"
            "  --min-rounds N  fail when time ran out before N rounds were done (default 1)\n"
            "  --quiet         no per-round lines, only failures and the summary\n"
            "  --settle-ms N   force every round's settle delay (and the timeout at most\n"
            "                  that): too short for the late commits, the soak must fail\n"
            "  --ui NAME       every round on this simulator UI (default: drawn per round)\n"
            "  --kills N       exactly N kills a round, 1-%d (default: drawn)\n"
            "  --report        after each round the day's report must be clean (acme and spa,\n"
            "                  which list by booking day)\n"
            "  --pg            the queue in PostgreSQL (a server of each job's own): two hosts,\n"
            "                  kills of either, server restarts and crashes, a host's sessions\n"
            "                  ended\n"
            "Exit: 0 every invariant held, 1 a round failed (or too few rounds), 2 usage/setup,\n"
            "77 --pg without PostgreSQL's server binaries.\n",
            SOAK_MAX_KILLS, SOAK_MAX_JOBS);
}

static bool parse_long(const char *s, long lo, long hi, long *ret)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || !end || end == s || *end || v < lo || v > hi)
        return false;
    *ret = v;
    return true;
}

static int parse_args(int argc, char **argv, struct soak_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->rounds = 20;
    o->seconds = 600;
    o->min_rounds = 1;
    o->jobs = 1;
    o->ui = -1;
    bool seeded = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n = 0;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(a, "--keep") == 0) {
            o->keep = true;
        } else if (strcmp(a, "--quiet") == 0) {
            o->quiet = true;
        } else if (strcmp(a, "--pg") == 0) {
            o->pg = true;
        } else if (!v) {
            fprintf(stderr, "chaos-soak: unknown or incomplete option '%s'\n", a);
            return -1;
        } else if (strcmp(a, "--rounds") == 0 && parse_long(v, 1, 10000000, &n)) {
            o->rounds = n;
            i++;
        } else if (strcmp(a, "--minutes") == 0 && parse_long(v, 1, 100000, &n)) {
            o->seconds = n * 60;
            i++;
        } else if (strcmp(a, "--seconds") == 0 && parse_long(v, 1, 6000000, &n)) {
            o->seconds = n;
            i++;
        } else if (strcmp(a, "--ui") == 0 && v) {
            enum sim_ui u;
            if (sim_ui_from_name(v, &u) != 0) {
                fprintf(stderr, "chaos-soak: --ui wants acme, classic or spa\n");
                return -1;
            }
            o->ui = (int)u;
            i++;
        } else if (strcmp(a, "--report") == 0) {
            o->report = true;
        } else if (strcmp(a, "--kills") == 0 && parse_long(v, 1, SOAK_MAX_KILLS, &n)) {
            o->kills = (int)n;
            i++;
        } else if (strcmp(a, "--min-rounds") == 0 && parse_long(v, 0, 10000000, &n)) {
            o->min_rounds = n;
            i++;
        } else if (strcmp(a, "--settle-ms") == 0 && parse_long(v, 300, 600000, &n)) {
            o->settle_ms = n;
            i++;
        } else if (strcmp(a, "--jobs") == 0 && parse_long(v, 1, SOAK_MAX_JOBS, &n)) {
            o->jobs = (int)n;
            i++;
        } else if (strcmp(a, "--seed") == 0) {
            char *end = NULL;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (errno || !end || end == v || *end || *v == '-') {
                fprintf(stderr, "chaos-soak: --seed wants a number\n");
                return -1;
            }
            o->seed = (uint64_t)s;
            seeded = true;
            i++;
        } else if (strcmp(a, "--dir") == 0 && strlen(v) < sizeof(o->dir)) {
            snprintf(o->dir, sizeof(o->dir), "%s", v);
            i++;
        } else if (strcmp(a, "--apbot") == 0 && strlen(v) < sizeof(o->apbot)) {
            snprintf(o->apbot, sizeof(o->apbot), "%s", v);
            i++;
        } else if (strcmp(a, "--src") == 0 && strlen(v) < sizeof(o->src)) {
            snprintf(o->src, sizeof(o->src), "%s", v);
            i++;
        } else {
            fprintf(stderr, "chaos-soak: bad option or value: %s %s\n", a, v);
            return -1;
        }
    }
    if (!seeded) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        /* Small enough to type back; distinct per start. */
        o->seed = ((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000) % 1000000000ULL;
    }
    return 0;
}

/* Fills in the defaults that need the environment: apbot binary, source tree, directory. */
static int resolve_paths(struct soak_opts *o)
{
    const char *env = getenv("APBOT_BIN");
    if (!o->apbot[0] && env && *env && strlen(env) < sizeof(o->apbot))
        snprintf(o->apbot, sizeof(o->apbot), "%s", env);
    if (!o->apbot[0]) {
        char self[400];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n <= 0)
            return -1;
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (!slash)
            return -1;
        *slash = '\0';
        snprintf(o->apbot, sizeof(o->apbot), "%s/apbot", self);
    }
    if (access(o->apbot, X_OK) != 0) {
        fprintf(stderr, "chaos-soak: no apbot binary at %s (--apbot)\n", o->apbot);
        return -1;
    }
    env = getenv("APBOT_SRC");
    if (!o->src[0])
        snprintf(o->src, sizeof(o->src), "%s", env && *env ? env : APBOT_SOURCE_DIR);
    char probe[600];
    snprintf(probe, sizeof(probe), "%s/flows/acme.xml", o->src);
    if (access(probe, R_OK) != 0) {
        fprintf(stderr, "chaos-soak: no flows under %s (--src)\n", o->src);
        return -1;
    }
    if (!o->dir[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(o->dir, sizeof(o->dir), "%s/chaos-soak-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(o->dir)) {
            fprintf(stderr, "chaos-soak: mkdtemp %s: %s\n", o->dir, strerror(errno));
            return -1;
        }
    } else if (mkdir(o->dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "chaos-soak: mkdir %s: %s\n", o->dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* 0 when PostgreSQL's server binaries are installed (tests/lib/pg.sh have, which says why
 * not). */
static int soak_pg_have(const struct soak_opts *o)
{
    char sh[600];
    snprintf(sh, sizeof(sh), "%s/tests/lib/pg.sh", o->src);
    pid_t pid = fork();
    if (pid == 0) {
        execlp("bash", "bash", sh, "have", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    struct soak_opts o;
    if (parse_args(argc, argv, &o) != 0) {
        usage(stderr);
        return 2;
    }
    if (resolve_paths(&o) != 0)
        return 2;
    setenv("APBOT_SRC", o.src, 1); /* tests/lib/pg.sh for --pg */
    if (o.pg && soak_pg_have(&o) != 0) {
        printf("chaos-soak: SKIP (PostgreSQL): --pg wants server binaries\n");
        return SOAK_EXIT_SKIP;
    }
    setenv("APBOT_ERP_USER", "clerk", 1);
    setenv("APBOT_ERP_PASSWORD", "acme-demo", 1);
    setvbuf(stdout, NULL, _IOLBF, 0);

    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct soak_shared *sh =
        mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("chaos-soak: mmap");
        return 2;
    }
    atomic_init(&sh->next_round, 0);
    atomic_init(&sh->stop, 0);
    int fds[2];
    if (pipe(fds) != 0) {
        perror("chaos-soak: pipe");
        return 2;
    }
    printf("chaos-soak: up to %ld rounds in %.1f min, seeds %" PRIu64 "..%" PRIu64
           ", %d job(s), apbot %s, rounds under %s%s\n",
           o.rounds, (double)o.seconds / 60.0, o.seed, o.seed + (uint64_t)o.rounds - 1, o.jobs,
           o.apbot, o.dir, o.pg ? ", queue in PostgreSQL (two hosts)" : "");

    int64_t t0 = mono_ms();
    int64_t deadline = t0 + o.seconds * 1000L;
    pid_t workers[SOAK_MAX_JOBS];
    int n_workers = 0;
    for (int j = 0; j < o.jobs; j++) {
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            worker(&o, sh, fds[1], deadline);
        }
        if (pid < 0) {
            perror("chaos-soak: fork");
            atomic_store(&sh->stop, 1);
            break;
        }
        workers[n_workers++] = pid;
    }
    close(fds[1]);

    struct totals t;
    memset(&t, 0, sizeof(t));
    struct round_result res;
    struct apbot_buf failures;
    apbot_buf_init(&failures, 1u << 20);
    for (;;) {
        size_t got = 0;
        while (got < sizeof(res)) {
            ssize_t n = read(fds[0], (char *)&res + got, sizeof(res) - got);
            if (n < 0 && errno == EINTR) {
                atomic_store(&sh->stop, 1);
                continue;
            }
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        if (got != sizeof(res))
            break; /* every worker has gone */
        if (!o.quiet || res.ok == 0)
            print_round(&res);
        add_round(&t, &res);
        if (res.ok == 0) {
            printf("  FAILED: %s\n  evidence kept in %s (round.txt, queue.db, run-*.log, "
                   "ledger.csv, lines.csv, stats.json)\n  replay: chaos-soak%s --seed %" PRIu64
                   " --rounds 1\n",
                   res.problem, res.dir, o.pg ? " --pg" : "", res.seed);
            if (apbot_buf_addf(&failures, "  seed %" PRIu64 ": %s (%s)\n", res.seed, res.problem,
                               res.dir) != APBOT_OK)
                fprintf(stderr, "chaos-soak: too many failures to list\n");
        }
    }
    close(fds[0]);
    bool worker_failed = false;
    for (int j = 0; j < n_workers; j++) {
        int status = 0;
        while (waitpid(workers[j], &status, 0) < 0 && errno == EINTR)
            ;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            worker_failed = true;
    }
    int64_t elapsed = mono_ms() - t0;

    printf("chaos-soak: %ld rounds (acme %ld, classic %ld, spa %ld) in %.1f min with %d job(s); a "
           "round %.1f s mean, %.1f s max\n",
           t.rounds, t.acme, t.classic, t.spa, (double)elapsed / 60000.0, o.jobs,
           t.rounds ? (double)t.ms_sum / 1000.0 / (double)t.rounds : 0.0,
           (double)t.ms_max / 1000.0);
    printf("  kills %ld (%ld with a post in flight), apbot runs %ld, leases recovered %ld\n",
           t.kills, t.kills_post, t.runs, t.recovered);
    if (o.pg)
        printf("  postgresql: two hosts a round, server restarts and crashes %ld, a host's "
               "sessions ended %ld\n",
               t.restarts, t.ended);
    printf("  invoices %ld, bookings %ld: completed %ld, business-exception %ld, manual-review "
           "%ld\n",
           t.invoices, t.bookings, t.completed, t.be, t.mr);
    printf("  ambiguous outcomes reconciled %ld, invoices posted again after a confirmed absence "
           "%ld\n",
           t.ambiguous, t.reposted);
    printf(
        "  duplicates %ld, re-posts of booked %lld, lost %ld, misjudged %ld, failed rounds %ld\n",
        t.duplicates, t.reposts, t.lost, t.misjudged, t.failed);
    if (failures.len)
        printf("chaos-soak: failed rounds:\n%s", apbot_buf_str(&failures));
    apbot_buf_done(&failures);
    int rc = 0;
    if (t.failed) {
        rc = 1;
    } else if (soak_interrupted) {
        printf("chaos-soak: interrupted\n");
        rc = 1;
    } else if (worker_failed) {
        printf("chaos-soak: a worker process failed\n");
        rc = 1;
    } else if (t.rounds < o.min_rounds) {
        printf("chaos-soak: only %ld rounds in %.1f min, %ld wanted\n", t.rounds,
               (double)o.seconds / 60.0, o.min_rounds);
        rc = 1;
    }
    if (rc == 0 && !o.keep)
        rmdir(o.dir); /* empty unless a round kept its directory */
    return rc;
}
