/*
 * bench_run.c - `bench-run`: how close `apbot run` gets to the simulated ERP's capacity.
 *
 * For each scenario it prints one table, one row per concurrency setting (fixed 1, 2, 4, 8,
 * 16 and `auto` by default). Each row is a fresh run: the simulator starts in-process (admin
 * on, seed 7) on the scenario, a fresh queue gets more invoices than the row can post (by
 * that apbot's own `enqueue`, so that an older binary finds a queue of its own schema), and
 * the real `apbot run --concurrency C --max-seconds T` works on it through a copy of
 * flows/acme.xml (--ui classic: flows/classic.xml) whose policy allows 16 sessions. The queue never
 * runs dry, so every row measures the steady state of T seconds, not a tail of reconciliations; the
 * stop hands in-flight items back, as a stop does.
 *
 * While apbot runs, bench-run reads the simulator's /_sim/stats every 250 ms. The window of
 * a row runs from the first sample that saw a booking (a slow ERP takes a while over its first
 * invoices) to the last sample before the stop; over it:
 *   inv/s   bookings the ERP made per second;
 *   bound   the ERP's capacity bound: its mean slots (or its cores, for a scenario whose
 *           requests share cores) divided by the slot time (core time) one invoice costs,
 *           measured in the row at concurrency 1 (or this row's own when there is none): what
 *           the ERP allows when it never idles;
 *   eff     the simulator's busy slot-time / the slot-time it offered (slots x wall), or its
 *           busy core-time / its cores' time;
 *   ach/bd  inv/s / bound;
 *   work_s  the ERP's work per invoice (its own count, /_sim/stats work_ms: core-seconds with
 *           contention, else seconds in service) and workx that against concurrency 1's;
 * Over the whole run: ERP requests per completed invoice (the exchanges the queue's evidence
 * keeps for the completed items: lookups, form pages, submits, retries and reconciliation
 * lookups; a session's login is not an invoice's) against the flow's floor (its lookup, each
 * step's page and submit), overload answers
 * (429/503) and client time-outs (from the queue's evidence) as a share of requests, the
 * ERP's p50/p99 request latency (arrival to answer), apbot's CPU (user+sys, from wait4) per
 * completed invoice and its peak RSS. `dup` and `lost` come from the ground truth
 * (/_sim/ledger.csv against the queue): dup = references booked more than once; lost = a
 * completed item whose document the ledger does not hold under its key, or a booking the
 * queue does not account for (no item, or an item that believes it never posted). Items
 * still in posting/reconciling/finishing at the stop are open, not lost. `load` is the
 * machine's 1-minute load average when the row started (the machine may be shared).
 * For `auto` a line gives the limit at each second, from the run's "concurrency limit" log.
 * With phases (a capacity schedule), inv/s per phase is printed too.
 *
 * With --batch N, after the rows: one run per --batch-rows setting of N invoices until the
 * queue is empty (a month-end batch, its tail included): its span (the queue's first change to
 * the last item settled) against the ideal N / bound (phase by phase under a capacity
 * schedule: the time the ERP's slots need for N invoices from the batch's start) + the settle
 * delay when an outcome was ambiguous (then the last one is unavoidable), requests and work per
 * invoice, the ambiguous outcomes, when the last came and what the batch took beyond its
 * settle delay (the target: one lookup).
 *
 * Timings are for people, never asserted; the exit status is non-zero only when a row has
 * duplicates or lost invoices or apbot failed.
 *
 * usage: bench-run --apbot PATH [--src DIR] [--rows 1,2,4,8,16,auto] [--seconds T]
 *                  [--capacity SCHEDULE] [--timeout-ms MS] [--batch N [--batch-rows L]]
 *                  [--big N] [--ui acme|classic] SCENARIO...
 *   --ui U          the simulator's user interface and its flow, flows/U.xml (default acme):
 *                   classic shows what a CGI-era ERP costs in requests per invoice
 *   --seconds T     seconds per row (default per scenario: calm 6, month-end 20, one whose
 *                   requests share cores 120, else 36)
 *   --capacity S    a capacity schedule applied over the scenario's (e.g. "0:8, 12000:2,
 *                   26000:8"), shown in the title; phases are its steps
 *   --timeout-ms MS the flow copy gives up on an answer after MS (and settles as long): for a
 *                   slow ERP whose answers take longer than acme.xml's 4 s
 *   --batch N       batch runs of N invoices after the rows, one per setting of --batch-rows
 *                   (default auto)
 *   --big N         one more run (calm, auto, 5 s) on a queue of N invoices: apbot's peak RSS
 *                   with that many queued
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "apbot/flow.h"
#include "apbot/invoice.h"
#include "apbot/machine.h"
#include "apbot/money.h"
#include "sim.h"

#define MAX_ROWS 8
#define MAX_PHASES 8
#define MAX_SAMPLES 4000
#define POLL_MS 250
#define FLOW_SESSIONS 16

static const char *g_ui = "acme"; /* --ui: the simulator's user interface, flows/<ui>.xml */

/* ---- small helpers ----------------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double load1(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

static char *slurp(const char *path, size_t *ret_len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 65536, len = 0;
    char *b = malloc(cap);
    for (;;) {
        if (!b) {
            fclose(f);
            return NULL;
        }
        size_t n = fread(b + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0)
            break;
        if (cap - len < 4096) {
            cap *= 2;
            char *g = realloc(b, cap);
            if (!g)
                free(b);
            b = g;
        }
    }
    fclose(f);
    b[len] = '\0';
    if (ret_len)
        *ret_len = len;
    return b;
}

struct body {
    char *data;
    size_t len;
};

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
    struct body *b = arg;
    size_t k = size * n;
    char *g = realloc(b->data, b->len + k + 1);
    if (!g)
        return 0;
    b->data = g;
    memcpy(b->data + b->len, p, k);
    b->len += k;
    b->data[b->len] = '\0';
    return k;
}

/* GET http://127.0.0.1:port/path into a heap string (NULL on failure). */
static char *fetch(CURL *c, unsigned short port, const char *path)
{
    char url[256];
    struct body b = {0};
    snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", (unsigned)port, path);
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 30000L);
    if (curl_easy_perform(c) != CURLE_OK) {
        free(b.data);
        return NULL;
    }
    return b.data;
}

/* The first "key":N in json (after `after` when given), or -1. */
static double json_num(const char *json, const char *after, const char *key)
{
    char pat[64];
    const char *p = json;
    if (p && after)
        p = strstr(p, after);
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    p = p ? strstr(p, pat) : NULL;
    if (!p)
        return -1;
    return strtod(p + strlen(pat), NULL);
}

/* ---- the scenario ------------------------------------------------------------------------ */

struct scenario {
    const char *name;
    char path[512];
    int slots;
    int cores;                   /* with cores: the requests in service share them (sim_cpu.c) */
    double slot_ms_per_inv;      /* mean service time of search + form + check + post */
    int n_phases;                /* capacity schedule steps (0: none) */
    double phase_at[MAX_PHASES]; /* s from the simulator's start */
    int phase_slots[MAX_PHASES]; /* slots from then on */
    char capacity_text[160];     /* the schedule given with --capacity, or "" */
    double seconds;              /* per row */
};

static void parse_capacity(struct scenario *sc, const char *v)
{
    sc->n_phases = 0;
    while (v && *v && sc->n_phases < MAX_PHASES) {
        char *end;
        long at = strtol(v, &end, 10);
        if (end == v || *end != ':')
            break;
        long s = strtol(end + 1, &end, 10);
        sc->phase_at[sc->n_phases] = (double)at / 1000.0;
        sc->phase_slots[sc->n_phases++] = (int)s;
        v = strchr(end, ',');
        if (v)
            v++;
    }
}

/* Reads what the bench needs from a scenario file: slots, service times, the schedule. */
static int load_scenario(const char *src, const char *name, const char *capacity,
                         struct scenario *sc)
{
    memset(sc, 0, sizeof(*sc));
    sc->name = name;
    sc->slots = 4;
    snprintf(sc->path, sizeof(sc->path), "%s/fixtures/scenarios/%s.scn", src, name);
    char *text = slurp(sc->path, NULL);
    if (!text) {
        fprintf(stderr, "bench-run: cannot read %s\n", sc->path);
        return -1;
    }
    static const char *const screens[] = {"search", "form", "check", "post"};
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char key[64], val[200];
        if (sscanf(line, " %63[^= ] = %199[^#\n]", key, val) != 2)
            continue;
        if (strcmp(key, "slots") == 0)
            sc->slots = (int)strtol(val, NULL, 10);
        else if (strcmp(key, "cores") == 0)
            sc->cores = (int)strtol(val, NULL, 10);
        else if (strcmp(key, "capacity") == 0)
            parse_capacity(sc, val);
        for (size_t i = 0; i < 4; i++) {
            char k[40];
            snprintf(k, sizeof(k), "service_ms.%s", screens[i]);
            long lo, hi; /* "2..6": %lf would read "2." and stop */
            if (strcmp(key, k) == 0 && sscanf(val, "%ld..%ld", &lo, &hi) == 2)
                sc->slot_ms_per_inv += (double)(lo + hi) / 2;
        }
    }
    free(text);
    if (capacity && *capacity) {
        parse_capacity(sc, capacity);
        snprintf(sc->capacity_text, sizeof(sc->capacity_text), "%s", capacity);
    }
    if (sc->slot_ms_per_inv <= 0)
        sc->slot_ms_per_inv = 20;
    sc->seconds = strcmp(name, "calm") == 0        ? 6
                  : strcmp(name, "month-end") == 0 ? 20
                  : sc->cores > 0                  ? 120
                                                   : 36;
    return 0;
}

/* The most requests the scenario ever serves at full speed (slots, or cores): for sizing
 * queues. */
static int max_slots(const struct scenario *sc)
{
    int m = sc->cores > 0 ? sc->cores : sc->slots;
    if (sc->cores > 0)
        return m;
    for (int i = 0; i < sc->n_phases; i++)
        if (sc->phase_slots[i] > m)
            m = sc->phase_slots[i];
    return m;
}

/* ---- the queue --------------------------------------------------------------------------- */

/* The source tree (--src): the vendor map `apbot enqueue` reads. */
static const char *g_src = ".";

/*
 * Fills a fresh queue with n invoices through `apbot enqueue` of the binary under test (a
 * CSV of the invoices, vendor map from fixtures/): the queue then has that binary's own
 * schema, so an older apbot (BENCH_BEFORE) runs on a queue it can open. 12 currencies of
 * three exponents, one line each.
 */
static int enqueue(const char *apbot, const char *dir, const char *db, int n, const char *prefix)
{
    static const char *const currencies[] = {"EUR", "EUR", "EUR", "USD", "EUR", "GBP",
                                             "EUR", "JPY", "EUR", "KWD", "EUR", "CHF"};
    char csv[300], vendors[600];
    snprintf(csv, sizeof(csv), "%s/invoices.csv", dir);
    snprintf(vendors, sizeof(vendors), "%s/fixtures/invoices/vendors.csv", g_src);
    FILE *f = fopen(csv, "w");
    if (!f) {
        fprintf(stderr, "bench-run: %s: %s\n", csv, strerror(errno));
        return -1;
    }
    fprintf(f, "vendor_id,invoice_number,invoice_date,currency,line_description,"
               "line_gl_account,line_net,line_tax\n");
    for (int i = 0; i < n; i++) {
        const char *ccy = currencies[i % 12];
        int exp = money_exponent(ccy);
        int64_t net = 1000 + (int64_t)i * 137, scale = 1;
        for (int e = 0; e < exp; e++)
            scale *= 10;
        fprintf(f, "%d,%s-%06d,2026-11-%02d,%s,bench,6000,", 100001 + i % 40, prefix, i + 1,
                1 + i % 28, ccy);
        if (exp > 0)
            fprintf(f, "%" PRId64 ".%0*" PRId64 ",0\n", net / scale, exp, net % scale);
        else
            fprintf(f, "%" PRId64 ",0\n", net);
    }
    if (fclose(f) != 0) {
        fprintf(stderr, "bench-run: %s: write error\n", csv);
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull < 0 || dup2(devnull, 1) < 0)
            _exit(127);
        execl(apbot, apbot, "--db", db, "enqueue", "--vendors", vendors, csv, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench-run: %s enqueue failed\n", apbot);
        return -1;
    }
    return 0;
}

/* ---- ground truth ------------------------------------------------------------------------ */

struct booking {
    char ref[48];
    char doc[32];
};

struct qitem {
    char key[48];
    char state[16];
    char doc[32];
};

static int cmp_booking(const void *a, const void *b)
{
    const struct booking *x = a, *y = b;
    int c = strcmp(x->ref, y->ref);
    return c ? c : strcmp(x->doc, y->doc);
}

static int cmp_qitem(const void *a, const void *b)
{
    return strcmp(((const struct qitem *)a)->key, ((const struct qitem *)b)->key);
}

/* Splits one CSV line (RFC 4180 quoting) into at most max fields, in place. */
static int csv_split(char *line, char **f, int max)
{
    int n = 0;
    char *p = line;
    while (n < max) {
        char *out = p, *start = p;
        if (*p == '"') {
            p++;
            for (;;) {
                if (*p == '"' && p[1] == '"') {
                    *out++ = '"';
                    p += 2;
                } else if (*p == '"') {
                    p++;
                    break;
                } else if (!*p) {
                    break;
                } else {
                    *out++ = *p++;
                }
            }
            while (*p && *p != ',')
                p++;
        } else {
            while (*p && *p != ',')
                out = ++p;
        }
        char *next = *p == ',' ? p + 1 : NULL;
        *out = '\0';
        f[n++] = start;
        if (!next)
            break;
        p = next;
    }
    return n;
}

/* The ledger's bookings (reference, doc), sorted. */
static struct booking *ledger_read(char *csv, size_t *ret_n)
{
    size_t cap = 1024, n = 0;
    struct booking *b = malloc(cap * sizeof(*b));
    char *save = NULL;
    bool header = true;
    for (char *line = csv ? strtok_r(csv, "\n", &save) : NULL; line && b;
         line = strtok_r(NULL, "\n", &save)) {
        if (header) {
            header = false;
            continue;
        }
        char *f[12];
        int k = csv_split(line, f, 12);
        if (k < 9)
            continue;
        if (n == cap) {
            cap *= 2;
            struct booking *g = realloc(b, cap * sizeof(*b));
            if (!g)
                abort();
            b = g;
        }
        snprintf(b[n].ref, sizeof(b[n].ref), "%s", f[6]);
        snprintf(b[n].doc, sizeof(b[n].doc), "%s", f[0]);
        n++;
    }
    if (!b)
        abort();
    qsort(b, n, sizeof(*b), cmp_booking);
    *ret_n = n;
    return b;
}

struct truth {
    int64_t completed, open, other, dups, lost, timeouts, evidence, completed_exchanges;
    /* the run's course from the queue's events (wall ms): its first change, the last change
     * into a final state, the last ambiguous outcome (a post that may have booked: unknown, or
     * a lease that ran out in posting) and how many there were */
    int64_t first_ms, end_ms, last_ambiguous_ms, ambiguous;
};

/* Compares the queue with the ledger (see the file's comment). */
static int ground_truth(const char *db, char *ledger_csv, struct truth *t)
{
    memset(t, 0, sizeof(*t));
    size_t nb = 0;
    struct booking *b = ledger_read(ledger_csv, &nb);
    sqlite3 *q = NULL;
    if (sqlite3_open_v2(db, &q, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        free(b);
        sqlite3_close(q);
        return -1;
    }
    sqlite3_stmt *s = NULL;
    size_t cap = 1024, ni = 0;
    struct qitem *it = malloc(cap * sizeof(*it));
    if (!it)
        abort();
    if (sqlite3_prepare_v2(q, "SELECT key, state, COALESCE(erp_doc, '') FROM items", -1, &s,
                           NULL) == SQLITE_OK) {
        while (sqlite3_step(s) == SQLITE_ROW) {
            if (ni == cap) {
                cap *= 2;
                struct qitem *g = realloc(it, cap * sizeof(*it));
                if (!g)
                    abort();
                it = g;
            }
            snprintf(it[ni].key, sizeof(it[ni].key), "%s", (const char *)sqlite3_column_text(s, 0));
            snprintf(it[ni].state, sizeof(it[ni].state), "%s",
                     (const char *)sqlite3_column_text(s, 1));
            snprintf(it[ni].doc, sizeof(it[ni].doc), "%s", (const char *)sqlite3_column_text(s, 2));
            ni++;
        }
    }
    sqlite3_finalize(s);
    s = NULL;
    if (sqlite3_prepare_v2(q,
                           "SELECT COUNT(*), COALESCE(SUM(transport LIKE 'unknown%imed out%'), 0),"
                           " COALESCE(SUM(item_id IN (SELECT id FROM items"
                           " WHERE state = 'completed')), 0) FROM evidence",
                           -1, &s, NULL) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW) {
        t->evidence = sqlite3_column_int64(s, 0);
        t->timeouts = sqlite3_column_int64(s, 1);
        t->completed_exchanges = sqlite3_column_int64(s, 2);
    }
    sqlite3_finalize(s);
    s = NULL;
    if (sqlite3_prepare_v2(q,
                           "SELECT COALESCE(MIN(CASE WHEN actor LIKE 'runner:%' THEN at END), 0),"
                           " COALESCE(MAX(CASE WHEN to_state IN ('completed', 'business-exception',"
                           " 'manual-review') THEN at END), 0),"
                           " COALESCE(MAX(CASE WHEN from_state = 'posting' AND event IN"
                           " ('unknown', 'lease-expired') THEN at END), 0),"
                           " COALESCE(SUM(from_state = 'posting' AND event IN"
                           " ('unknown', 'lease-expired')), 0)"
                           " FROM events",
                           -1, &s, NULL) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW) {
        t->first_ms = sqlite3_column_int64(s, 0);
        t->end_ms = sqlite3_column_int64(s, 1);
        t->last_ambiguous_ms = sqlite3_column_int64(s, 2);
        t->ambiguous = sqlite3_column_int64(s, 3);
    }
    sqlite3_finalize(s);
    sqlite3_close(q);
    qsort(it, ni, sizeof(*it), cmp_qitem);

    /* references booked more than once */
    for (size_t i = 0; i < nb;) {
        size_t k = i;
        while (k < nb && strcmp(b[k].ref, b[i].ref) == 0)
            k++;
        if (k - i > 1)
            t->dups++;
        i = k;
    }
    /* every item: completed ones must be in the ledger with their document */
    for (size_t i = 0; i < ni; i++) {
        bool completed = strcmp(it[i].state, "completed") == 0;
        bool open = strcmp(it[i].state, "posting") == 0 ||
                    strcmp(it[i].state, "reconciling") == 0 ||
                    strcmp(it[i].state, "finishing") == 0;
        if (completed)
            t->completed++;
        else if (open)
            t->open++;
        else if (strcmp(it[i].state, "new") != 0 && strcmp(it[i].state, "checking") != 0)
            t->other++;
        if (!completed)
            continue;
        struct booking key;
        memset(&key, 0, sizeof(key));
        snprintf(key.ref, sizeof(key.ref), "%s", it[i].key);
        snprintf(key.doc, sizeof(key.doc), "%s", it[i].doc);
        if (!bsearch(&key, b, nb, sizeof(*b), cmp_booking))
            t->lost++;
    }
    /* every booking: an item that knows it may have posted */
    for (size_t i = 0; i < nb; i++) {
        struct qitem key;
        memset(&key, 0, sizeof(key));
        snprintf(key.key, sizeof(key.key), "%s", b[i].ref);
        struct qitem *m = bsearch(&key, it, ni, sizeof(*it), cmp_qitem);
        if (!m || strcmp(m->state, "new") == 0 || strcmp(m->state, "checking") == 0 ||
            strcmp(m->state, "business-exception") == 0)
            t->lost++;
    }
    free(it);
    free(b);
    return 0;
}

/* ---- one row ----------------------------------------------------------------------------- */

struct sample {
    double t; /* s since the simulator started */
    double busy, avail, bookings, requests, work;
};

struct row {
    char conc[8];
    int n;
    double load;
    double rate, eff, slots_avg, slot_s_per_inv; /* over the window */
    double cap_avg;      /* what serves at full speed: mean slots, or the cores */
    double cost;         /* capacity-seconds one invoice took: slot-s, or core-s with cores */
    double work_per_inv; /* the ERP's work per invoice, s (slot-s in service, or core-s) */
    double phase_rate[MAX_PHASES];
    double req_per_inv, overload_pct, timeout_pct, p50, p99;
    double cpu_ms, sys_ms, cpu_total_ms;
    long rss_mib;
    struct truth truth;
    int exit_code;
    long settle_ms;    /* the settle delay in force at the end (the run's log) */
    double sim_wall0;  /* when the simulator started, wall s (its capacity schedule's 0) */
    char limits[1024]; /* auto: the limit at each second */
    bool ok;
};

/* The limit at each second from the "concurrency limit" lines of the run's log. */
static void limit_line(const char *log_path, double t0_wall, double seconds, char *out, size_t len)
{
    char *log = slurp(log_path, NULL);
    int at[4096], to[4096], n = 0, initial = -1;
    double when[4096];
    out[0] = '\0';
    if (!log)
        return;
    char *save = NULL;
    for (char *line = strtok_r(log, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        const char *s = strstr(line, "sessions at work ");
        int from, next;
        struct tm tm;
        int ms = 0;
        memset(&tm, 0, sizeof(tm));
        if (!s || n >= 4096 || sscanf(s, "sessions at work %d -> %d", &from, &next) != 2)
            continue;
        const char *tp = strstr(line, "time=");
        if (!tp || sscanf(tp + 5, "%d-%d-%dT%d:%d:%d.%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                          &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) != 7)
            continue;
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        when[n] = (double)timegm(&tm) + ms / 1000.0 - t0_wall;
        if (initial < 0)
            initial = from;
        at[n] = from;
        to[n++] = next;
    }
    free(log);
    (void)at;
    if (initial < 0) {
        snprintf(out, len, "(no change logged)");
        return;
    }
    size_t o = 0;
    int k = 0, cur = initial;
    for (int sec = 0; sec < (int)(seconds + 0.5) && o + 8 < len; sec++) {
        while (k < n && when[k] <= sec + 1)
            cur = to[k++];
        o += (size_t)snprintf(out + o, len - o, "%s%d", sec ? " " : "", cur);
    }
}

/* The settle delay in force when the run stopped (its "run stopped" line), or 0. */
static long log_settle_ms(const char *log_path)
{
    char *log = slurp(log_path, NULL);
    long v = 0;
    const char *p = log ? strstr(log, "msg=\"run stopped\"") : NULL;
    p = p ? strstr(p, "settle_ms=") : NULL;
    if (p)
        v = strtol(p + strlen("settle_ms="), NULL, 10);
    free(log);
    return v;
}

static void sample_take(CURL *c, unsigned short port, double t, struct sample *s)
{
    char *j = fetch(c, port, "/_sim/stats");
    s->t = t;
    s->busy = json_num(j, NULL, "slot_ms_busy");
    s->avail = json_num(j, NULL, "slot_ms_available");
    s->bookings = json_num(j, NULL, "bookings");
    s->requests = json_num(j, "\"requests\"", "total");
    s->work = json_num(j, NULL, "work_ms");
    free(j);
}

/* The sample at or before time t (the first one if none). */
static const struct sample *sample_at(const struct sample *s, int n, double t)
{
    const struct sample *best = &s[0];
    for (int i = 0; i < n; i++)
        if (s[i].t <= t)
            best = &s[i];
    return best;
}

static void rm_dir(const char *dir)
{
    static const char *const files[] = {"queue.db", "queue.db-wal", "queue.db-shm", "run.log"};
    char f[600];
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(f, sizeof(f), "%s/%s", dir, files[i]);
        unlink(f);
    }
    rmdir(dir);
}

/* How many invoices a row gets: more than it can post in its seconds. */
static int row_size(const struct scenario *sc, const char *conc, double seconds)
{
    double bound = max_slots(sc) * 1000.0 / sc->slot_ms_per_inv;
    /* one session: search + form + check + post one after the other, plus the client's time */
    double per_session = 1000.0 / (sc->slot_ms_per_inv + 6.0);
    int c = strcmp(conc, "auto") == 0 ? FLOW_SESSIONS : (int)strtol(conc, NULL, 10);
    double rate = c * per_session < bound ? c * per_session : bound;
    int n = (int)(rate * seconds * 1.6) + 50;
    return n > 200000 ? 200000 : n;
}

static int run_row(const char *apbot, const char *flow, const struct scenario *sc, const char *conc,
                   double seconds, int n_override, struct row *r)
{
    char dir[] = "/tmp/apbot-bench-XXXXXX";
    char db[128], logp[128], url[64], err[256] = "", secs[16];
    memset(r, 0, sizeof(*r));
    snprintf(r->conc, sizeof(r->conc), "%s", conc);
    r->n = n_override > 0 ? n_override : seconds <= 0 ? 0 : row_size(sc, conc, seconds);
    if (!mkdtemp(dir))
        return -1;
    snprintf(db, sizeof(db), "%s/queue.db", dir);
    snprintf(logp, sizeof(logp), "%s/run.log", dir);
    if (enqueue(apbot, dir, db, r->n, sc->name) != 0) {
        rm_dir(dir);
        return -1;
    }
    char scen_text[256] = "";
    if (sc->capacity_text[0])
        snprintf(scen_text, sizeof(scen_text), "capacity = %s\n", sc->capacity_text);
    struct sim *sim = NULL;
    struct sim_options so = {.scenario_path = sc->path,
                             .scenario_text = scen_text[0] ? scen_text : NULL,
                             .seed = 7,
                             .admin = true,
                             .ui = strcmp(g_ui, "classic") == 0 ? SIM_UI_CLASSIC : SIM_UI_ACME};
    double sim_t0 = now_s();
    r->sim_wall0 = wall_s();
    if (sim_start(&so, &sim, err, sizeof(err)) != 0) {
        fprintf(stderr, "bench-run: simulator: %s\n", err);
        rm_dir(dir);
        return -1;
    }
    unsigned short port = sim_port(sim);
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", (unsigned)port);
    snprintf(secs, sizeof(secs), "%d", (int)(seconds + 0.5));
    CURL *c = curl_easy_init();
    r->load = load1();

    static struct sample smp[MAX_SAMPLES];
    int ns = 0;
    double t0_wall = wall_s();
    double t0 = now_s();
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        int logfd = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (devnull < 0 || logfd < 0 || dup2(devnull, 0) < 0 || dup2(devnull, 1) < 0 ||
            dup2(logfd, 2) < 0)
            _exit(127);
        /* stderr is a file: one key=value log line per event, as an unattended run writes */
        if (seconds <= 0) /* the start-up figure: an empty queue, until it is empty */
            execl(apbot, apbot, "--db", db, "run", "--flow", flow, "--erp", url, "--until-empty",
                  "--concurrency", conc, (char *)NULL);
        else
            execl(apbot, apbot, "--db", db, "run", "--flow", flow, "--erp", url, "--max-seconds",
                  secs, "--concurrency", conc, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof(ru));
    bool done = false;
    double stop_at = seconds > 0 ? t0 + seconds : 1e300; /* apbot begins its stop here */
    while (!done && pid > 0) {
        pid_t w = wait4(pid, &status, WNOHANG, &ru);
        if (w == pid) {
            done = true;
            break;
        }
        if (w < 0 && errno != EINTR)
            break;
        double t = now_s();
        if (t < stop_at - 0.05 && ns < MAX_SAMPLES)
            sample_take(c, port, t - sim_t0, &smp[ns++]);
        struct timespec ts = {.tv_sec = 0, .tv_nsec = POLL_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    (void)t0;
    char *stats = fetch(c, port, "/_sim/stats");
    char *ledger = fetch(c, port, "/_sim/ledger.csv");
    curl_easy_cleanup(c);
    sim_stop(sim);
    r->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;

    /* the window: from the first sample that saw a booking (a slow ERP takes a while over its
     * first invoices: a window from the first request counted the pipeline's filling as lost
     * throughput) to the last one */
    int first = 0;
    while (first < ns && smp[first].bookings <= 0)
        first++;
    if (ns - first >= 2) {
        const struct sample *a = &smp[first], *b = &smp[ns - 1];
        double dt = b->t - a->t;
        double booked = b->bookings - a->bookings;
        r->rate = booked / dt;
        r->eff = b->avail > a->avail ? (b->busy - a->busy) / (b->avail - a->avail) : 0;
        r->slots_avg = (b->avail - a->avail) / 1000.0 / dt;
        r->slot_s_per_inv = booked > 0 ? (b->busy - a->busy) / 1000.0 / booked : 0;
        r->work_per_inv = booked > 0 ? (b->work - a->work) / 1000.0 / booked : 0;
        /* With cores the ERP's capacity is its cores' time and an invoice costs its CPU work
         * (contention included); else its slots' time and the slot time in service. */
        r->cap_avg = sc->cores > 0 ? sc->cores : r->slots_avg;
        r->cost = sc->cores > 0 ? r->work_per_inv : r->slot_s_per_inv;
        if (sc->cores > 0)
            r->eff = (b->work - a->work) / 1000.0 / (sc->cores * dt);
        for (int p = 0; p < sc->n_phases; p++) {
            double from = sc->phase_at[p];
            double to = p + 1 < sc->n_phases ? sc->phase_at[p + 1] : b->t;
            if (from < a->t)
                from = a->t;
            if (to > b->t)
                to = b->t;
            const struct sample *x = sample_at(smp, ns, from), *y = sample_at(smp, ns, to);
            r->phase_rate[p] = y->t > x->t ? (y->bookings - x->bookings) / (y->t - x->t) : 0;
        }
    }
    double requests = json_num(stats, "\"requests\"", "total");
    double overload = json_num(stats, NULL, "overload_answers");
    r->p50 = json_num(stats, "\"latency_ms\"", "p50");
    r->p99 = json_num(stats, "\"latency_ms\"", "p99");
    if (ground_truth(db, ledger, &r->truth) != 0)
        fprintf(stderr, "bench-run: cannot read the queue %s\n", db);
    int64_t completed = r->truth.completed;
    r->req_per_inv = completed > 0 ? (double)r->truth.completed_exchanges / (double)completed : 0;
    r->overload_pct = requests > 0 ? 100.0 * overload / requests : 0;
    r->timeout_pct = requests > 0 ? 100.0 * (double)r->truth.timeouts / requests : 0;
    double user_ms = (double)ru.ru_utime.tv_sec * 1000.0 + (double)ru.ru_utime.tv_usec / 1000.0;
    double sys_ms = (double)ru.ru_stime.tv_sec * 1000.0 + (double)ru.ru_stime.tv_usec / 1000.0;
    r->cpu_total_ms = user_ms + sys_ms;
    r->cpu_ms = completed > 0 ? (user_ms + sys_ms) / (double)completed : 0;
    r->sys_ms = completed > 0 ? sys_ms / (double)completed : 0;
    r->rss_mib = ru.ru_maxrss / 1024;
    r->settle_ms = log_settle_ms(logp);
    if (strcmp(conc, "auto") == 0)
        limit_line(logp, t0_wall, seconds > 0 ? seconds : now_s() - t0, r->limits,
                   sizeof(r->limits));
    free(stats);
    free(ledger);
    r->ok = r->exit_code == 0 && r->truth.dups == 0 && r->truth.lost == 0;
    if (getenv("BENCH_KEEP"))
        fprintf(stderr, "bench-run: kept %s\n", dir);
    else
        rm_dir(dir);
    return 0;
}

/* ---- the table --------------------------------------------------------------------------- */

static void print_header(const struct scenario *sc)
{
    printf("%-5s %6s %7s %7s %5s %6s %7s %7s %5s %5s %5s %6s %6s %6s %5s %4s %5s %4s %4s", "conc",
           "inv", "inv/s", "bound", "eff", "ach/bd", "req/inv", "work_s", "workx", "ovl%", "tmo%",
           "p50ms", "p99ms", "cpu_ms", "sysms", "rss", "done", "dup", "lost");
    for (int p = 0; p < sc->n_phases; p++)
        printf(" %5s%d", "ph", p + 1);
    printf(" %5s\n", "load");
}

/* ref_cost: capacity-seconds per invoice at concurrency 1; ref_work: the ERP's work per invoice
 * there (0: not measured, this row's own). */
static void print_row(const struct scenario *sc, const struct row *r, double ref_cost,
                      double ref_work)
{
    double cost = ref_cost > 0 ? ref_cost : r->cost;
    double bound = cost > 0 ? r->cap_avg / cost : 0;
    double workx = ref_work > 0 ? r->work_per_inv / ref_work : 1.0;
    printf("%-5s %6d %7.2f %7.2f %5.2f %6.2f %7.2f %7.3f %5.2f %5.2f %5.2f %6.0f %6.0f %6.2f %5.2f "
           "%4ld %5" PRId64 " %4" PRId64 " %4" PRId64,
           r->conc, r->n, r->rate, bound, r->eff, bound > 0 ? r->rate / bound : 0, r->req_per_inv,
           r->work_per_inv, workx, r->overload_pct, r->timeout_pct, r->p50, r->p99, r->cpu_ms,
           r->sys_ms, r->rss_mib, r->truth.completed, r->truth.dups, r->truth.lost);
    for (int p = 0; p < sc->n_phases; p++)
        printf(" %6.1f", r->phase_rate[p]);
    printf(" %5.2f%s\n", r->load,
           r->exit_code != 0 ? "  (apbot exit status not 0)"
           : r->truth.other  ? "  (some items in exception/review)"
                             : "");
    fflush(stdout);
}

/* Writes text with the value of attribute `name` (first occurrence) replaced by value. */
static void put_attr(FILE *f, const char *text, const char *name, const char *value,
                     const char **ret_rest)
{
    char pat[64];
    snprintf(pat, sizeof(pat), " %s=\"", name);
    const char *p = strstr(text, pat);
    const char *q = p ? strchr(p + strlen(pat), '"') : NULL;
    if (!p || !q) {
        *ret_rest = text;
        return;
    }
    fwrite(text, 1, (size_t)(p - text), f);
    fprintf(f, "%s%s", pat, value);
    *ret_rest = q;
}

/* Writes a copy of flows/<ui>.xml whose policy allows FLOW_SESSIONS sessions and, with
 * timeout_ms > 0, gives up on an answer after that long (the settle delay at least as long,
 * as the flow check wants). The policy's attributes are written in the flow's order. */
static int make_flow(const char *src, const char *path, long timeout_ms)
{
    char in[512];
    snprintf(in, sizeof(in), "%s/flows/%s.xml", src, g_ui);
    char *text = slurp(in, NULL);
    if (!text)
        return -1;
    FILE *f = fopen(path, "w");
    if (!strstr(text, "max-sessions=\"") || !f) {
        free(text);
        if (f)
            fclose(f);
        return -1;
    }
    const char *rest = text;
    char v[32];
    if (timeout_ms > 0) {
        snprintf(v, sizeof(v), "%ld", timeout_ms);
        put_attr(f, rest, "timeout-ms", v, &rest);
        put_attr(f, rest, "settle-ms", v, &rest);
    }
    snprintf(v, sizeof(v), "%d", FLOW_SESSIONS);
    put_attr(f, rest, "max-sessions", v, &rest);
    fputs(rest, f);
    free(text);
    return fclose(f) == 0 ? 0 : -1;
}

/* The fewest ERP requests one invoice of one line can take through the flow: its lookup, then
 * each post step's page (when it fetches one) and its submit (or its <send>), once the run's
 * references are known (a skip="when-known" step's submit left out). -1 when the flow cannot be
 * read. */
static int flow_floor(const char *path)
{
    struct flow *fl = NULL;
    char err[512];
    if (flow_load(path, &fl, err, sizeof(err)) != APBOT_OK)
        return -1;
    int n = flow_has_lookup(fl) ? 1 : 0;
    for (size_t i = 0; i < fl->n_steps; i++)
        n += (fl->steps[i].get ? 1 : 0) + (fl->steps[i].skip_known ? 0 : 1);
    flow_free(fl);
    return n;
}

/* The seconds the ERP needs for n invoices of `cost` capacity-seconds each when it never
 * idles, beginning `from` s after the simulator's start: its cores, or its slots phase by phase
 * of its capacity schedule (the varying ERP serves fewer while it has fewer). 0 when unknown. */
static double ideal_span(const struct scenario *sc, int n, double cost, double from)
{
    double left = n * cost; /* capacity-seconds still to serve */
    if (cost <= 0)
        return 0;
    if (sc->cores > 0 || sc->n_phases == 0) {
        int cap = sc->cores > 0 ? sc->cores : sc->slots;
        return cap > 0 ? left / cap : 0;
    }
    double t = from;
    for (int p = 0; p <= sc->n_phases; p++) {
        /* [phase p-1's start, phase p's start): before the first phase the scenario's slots */
        double begin = p > 0 ? sc->phase_at[p - 1] : 0;
        double end = p < sc->n_phases ? sc->phase_at[p] : 1e300;
        int slots = p > 0 ? sc->phase_slots[p - 1] : sc->slots;
        if (t >= end)
            continue;
        if (t < begin)
            t = begin;
        if (slots > 0 && left <= slots * (end - t))
            return t + left / slots - from;
        if (slots > 0)
            left -= slots * (end - t);
        t = end;
    }
    return 0; /* the last phase has no slots */
}

/* One batch run: n invoices, `conc` sessions, until the queue is empty; its makespan against
 * the ideal (ideal_span, at the cost one invoice took at concurrency 1) + the settle delay. */
static int run_batch(const char *apbot, const char *flow, const struct scenario *sc,
                     const char *conc, int n, double cost, double ref_work)
{
    struct row r;
    if (run_row(apbot, flow, sc, conc, 0, n, &r) != 0)
        return -1;
    double span = r.truth.end_ms > r.truth.first_ms
                      ? (double)(r.truth.end_ms - r.truth.first_ms) / 1000.0
                      : 0;
    /* the last settle delay is unavoidable when an outcome was ambiguous (at month-end one
     * post in eleven is), and there is none without */
    double settle = (double)r.settle_ms / 1000.0;
    double span_ideal = ideal_span(sc, n, cost, (double)r.truth.first_ms / 1000.0 - r.sim_wall0);
    double ideal = span_ideal > 0 ? span_ideal + (r.truth.ambiguous > 0 ? settle : 0) : 0;
    double last = r.truth.last_ambiguous_ms > 0
                      ? (double)(r.truth.last_ambiguous_ms - r.truth.first_ms) / 1000.0
                      : 0;
    /* after the last ambiguous outcome the batch must wait its settle delay and look it up:
     * what it took beyond that delay */
    double tail = r.truth.last_ambiguous_ms > 0 ? span - last - settle : 0;
    printf("batch %-5s %5d %8.1f %8.1f %6.2f %7.2f %7.3f %5.2f %6" PRId64 " %8.1f %8.1f %6.1f "
           "%5" PRId64 " %4" PRId64 " %4" PRId64 " %5.2f%s\n",
           conc, n, span, ideal, span > 0 ? ideal / span : 0, r.req_per_inv, r.work_per_inv,
           ref_work > 0 ? r.work_per_inv / ref_work : 1.0, r.truth.ambiguous, last, tail, settle,
           r.truth.completed, r.truth.dups, r.truth.lost, r.load,
           r.exit_code != 0 ? "  (apbot exit status not 0)"
           : r.truth.other  ? "  (some items in exception/review)"
                            : "");
    if (r.limits[0])
        printf("limit each second (batch %s): %s\n", conc, r.limits);
    fflush(stdout);
    return r.ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *apbot = NULL, *src = ".", *rows_arg = "1,2,4,8,16,auto", *capacity = NULL;
    const char *batch_rows = "auto";
    double seconds = 0;
    long timeout_ms = 0;
    int big = 0, batch = 0, first = argc;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--apbot") == 0 && i + 1 < argc) {
            apbot = argv[++i];
        } else if (strcmp(argv[i], "--src") == 0 && i + 1 < argc) {
            src = argv[++i];
            g_src = src;
        } else if (strcmp(argv[i], "--rows") == 0 && i + 1 < argc) {
            rows_arg = argv[++i];
        } else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            seconds = strtod(argv[++i], NULL);
        } else if (strcmp(argv[i], "--capacity") == 0 && i + 1 < argc) {
            capacity = argv[++i];
        } else if (strcmp(argv[i], "--ui") == 0 && i + 1 < argc &&
                   (strcmp(argv[i + 1], "acme") == 0 || strcmp(argv[i + 1], "classic") == 0)) {
            g_ui = argv[++i];
        } else if (strcmp(argv[i], "--timeout-ms") == 0 && i + 1 < argc) {
            timeout_ms = strtol(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) {
            batch = (int)strtol(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--batch-rows") == 0 && i + 1 < argc) {
            batch_rows = argv[++i];
        } else if (strcmp(argv[i], "--big") == 0 && i + 1 < argc) {
            big = (int)strtol(argv[++i], NULL, 10);
        } else {
            first = i;
            break;
        }
    }
    if (!apbot || (first >= argc && big <= 0)) {
        fprintf(stderr, "usage: bench-run --apbot PATH [--src DIR] [--rows 1,2,4,8,16,auto] "
                        "[--seconds T] [--capacity SCHEDULE] [--timeout-ms MS] [--batch N "
                        "[--batch-rows auto,...]] [--big N] [--ui acme|classic] SCENARIO...\n");
        return 2;
    }
    char rows_buf[128];
    const char *rows[MAX_ROWS];
    int nrows = 0;
    snprintf(rows_buf, sizeof(rows_buf), "%s", rows_arg);
    char *rsave = NULL;
    for (char *t = strtok_r(rows_buf, ",", &rsave); t && nrows < MAX_ROWS;
         t = strtok_r(NULL, ",", &rsave))
        rows[nrows++] = t;

    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char flowdir[] = "/tmp/apbot-bench-flow-XXXXXX", flow[128];
    if (!mkdtemp(flowdir))
        return 1;
    snprintf(flow, sizeof(flow), "%s/%s-16.xml", flowdir, g_ui);
    if (make_flow(src, flow, timeout_ms) != 0) {
        fprintf(stderr, "bench-run: cannot write the flow copy\n");
        return 1;
    }
    int floor = flow_floor(flow);
    int fail = 0;
    for (int i = first; i < argc; i++) {
        struct scenario sc;
        if (load_scenario(src, argv[i], capacity, &sc) != 0) {
            fail = 1;
            continue;
        }
        double secs = seconds > 0 ? seconds : sc.seconds;
        if (sc.cores > 0)
            printf("\n-- %s: %d cores shared by the requests in service", sc.name, sc.cores);
        else
            printf("\n-- %s: %d slots", sc.name, sc.slots);
        if (sc.n_phases) {
            printf(", phases");
            for (int p = 0; p < sc.n_phases; p++)
                printf(" %s%.0fs:%d", p ? "" : "", sc.phase_at[p], sc.phase_slots[p]);
            printf("%s", sc.capacity_text[0] ? " (bench schedule)" : "");
        }
        printf("; %.0f s per row, the queue never empties; flow %s.xml, max-sessions=%d", secs,
               g_ui, FLOW_SESSIONS);
        if (timeout_ms > 0)
            printf(", timeout-ms=settle-ms=%ld", timeout_ms);
        printf("; floor %d requests per invoice\n", floor);
        print_header(&sc);
        double ref_cost = 0, ref_work = 0;
        static struct row r[MAX_ROWS];
        for (int k = 0; k < nrows; k++) {
            if (run_row(apbot, flow, &sc, rows[k], secs, 0, &r[k]) != 0) {
                fail = 1;
                continue;
            }
            if (strcmp(rows[k], "1") == 0 && r[k].cost > 0) {
                ref_cost = r[k].cost;
                ref_work = r[k].work_per_inv;
            }
            print_row(&sc, &r[k], ref_cost, ref_work);
            if (!r[k].ok)
                fail = 1;
        }
        for (int k = 0; k < nrows; k++)
            if (r[k].limits[0])
                printf("limit each second (%s): %s\n", r[k].conc, r[k].limits);
        if (ref_cost > 0)
            printf("bound = %s / %.4f %s per invoice (measured at concurrency 1); work_s = the "
                   "ERP's work per invoice (%s), workx = against concurrency 1's\n",
                   sc.cores > 0 ? "cores" : "mean slots", ref_cost,
                   sc.cores > 0 ? "core-s" : "slot-s",
                   sc.cores > 0 ? "core-s, contention included" : "slot-s in service");
        if (batch > 0) {
            printf("%-11s %5s %8s %8s %6s %7s %7s %5s %6s %8s %8s %6s %5s %4s %4s %5s\n", "batch",
                   "inv", "span_s", "ideal_s", "id/sp", "req/inv", "work_s", "workx", "ambig",
                   "last_s", "tail_s", "settle", "done", "dup", "lost", "load");
            char brow_buf[128];
            snprintf(brow_buf, sizeof(brow_buf), "%s", batch_rows);
            char *bsave = NULL;
            for (char *t = strtok_r(brow_buf, ",", &bsave); t; t = strtok_r(NULL, ",", &bsave))
                if (run_batch(apbot, flow, &sc, t, batch, ref_cost, ref_work) != 0)
                    fail = 1;
            printf("span = first change to the last item settled; ideal = invoices / bound, "
                   "phase by phase of a capacity schedule (+ the settle delay when an outcome was "
                   "ambiguous); last = the last ambiguous "
                   "outcome; tail = span - last - settle (what the batch took beyond the last "
                   "settle delay)\n");
        }
        if (strcmp(sc.name, "calm") == 0) {
            /* cpu_ms includes apbot's start-up (the flow's schema validation above all) and
             * stop: what they cost on their own, on an empty queue */
            struct row e;
            if (run_row(apbot, flow, &sc, "1", 0, 0, &e) == 0)
                printf("cpu_ms includes start-up and stop: %.0f ms of CPU on an empty queue "
                       "(one session logs in), peak RSS %ld MiB\n",
                       e.cpu_total_ms, e.rss_mib);
        }
    }
    if (big > 0) {
        /* with the flow as shipped (acme.xml: 4 sessions) and with the bench's 16 */
        char shipped[512];
        snprintf(shipped, sizeof(shipped), "%s/flows/acme.xml", src);
        const char *flows[] = {shipped, flow};
        const char *names[] = {"acme.xml, max-sessions 4", "max-sessions 16"};
        printf("\n-- %d queued: apbot run (calm, auto, 5 s)\n", big);
        for (int k = 0; k < 2; k++) {
            struct scenario sc;
            struct row r;
            if (load_scenario(src, "calm", NULL, &sc) == 0 &&
                run_row(apbot, flows[k], &sc, "auto", 5, big, &r) == 0) {
                printf("%-26s peak RSS %ld MiB, %" PRId64 " completed, dup %" PRId64
                       ", lost %" PRId64 ", load %.2f\n",
                       names[k], r.rss_mib, r.truth.completed, r.truth.dups, r.truth.lost, r.load);
                if (!r.ok)
                    fail = 1;
            } else {
                fail = 1;
            }
        }
    }
    unlink(flow);
    rmdir(flowdir);
    curl_global_cleanup();
    return fail;
}
