/*
 * bench_store.c - `bench-store`: the queue's figures per backend, one table row each:
 *  - `apbot enqueue` of N generated invoices (default 100,000) into an empty queue: wall
 *    time, invoices/s and the peak RSS of the apbot process;
 *  - `apbot status --json` on that queue: median latency of five runs;
 *  - `apbot audit verify` on that queue (its N events, one `enqueued` per invoice: the whole
 *    audit chain recomputed): median wall time of three runs, and events/s;
 *  - claims/s: 8 workers in 2 processes (4 threads each, a store handle each) claim items
 *    and apply `found` (completed, one document per item) directly through the store, no
 *    ERP: the queue's own ceiling for a runner. --claims items in all (default 20,000).
 * SQLite always (a file in a temp directory); PostgreSQL when --pg CONNINFO names a server
 * (a fresh schema bench_<pid> is made there and dropped after). Runs the real apbot binary
 * for enqueue and status. Prints the table; asserts nothing about timing.
 *
 *     bench-store [--count N] [--claims N] [--apbot PATH] [--pg CONNINFO]
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "apbot/error.h"
#include "apbot/machine.h"
#include "apbot/money.h"
#include "apbot/store.h"

#define PROCS 2
#define THREADS 4
#define STATUS_RUNS 5
#define VERIFY_RUNS 3

struct run_result {
    int64_t wall_ms;
    long maxrss_kib;
    int exit_code;
};

struct row {
    const char *backend;
    int64_t enq_ms, enq_per_s;
    long enq_rss_kib;
    int64_t status_ms;
    int64_t verify_ms, verify_per_s;
    int64_t claims, claim_ms, claims_per_s;
    bool ok;
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Writes n invoices as CSV (every third with two lines); 0 or -1. */
static int gen_csv(const char *path, int64_t n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fputs("vendor_id,invoice_number,invoice_date,currency,line_net,line_tax,vendor_name,"
          "line_description\n",
          f);
    for (int64_t i = 0; i < n; i++) {
        int lines = i % 3 == 0 ? 2 : 1;
        for (int l = 0; l < lines; l++) {
            int64_t net = 1000 + (i * 7919 + l * 104729) % 5000000;
            char snet[32], stax[32];
            if (money_format_plain(net, 2, snet, sizeof(snet)) != APBOT_OK ||
                money_format_plain(net * 19 / 100, 2, stax, sizeof(stax)) != APBOT_OK) {
                fclose(f);
                return -1;
            }
            fprintf(f,
                    "V%04" PRId64 ",BENCH-%07" PRId64 ",2024-01-%02d,EUR,%s,%s,Vendor %04" PRId64
                    ",Line %d\n",
                    i % 500, i, (int)(i % 28) + 1, snet, stax, i % 500, l + 1);
        }
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* Runs argv with its output thrown away (stderr to err_path); measures it. */
static int run_child(char *const argv[], const char *err_path, struct run_result *ret)
{
    int64_t t0 = mono_ms();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int o = open("/dev/null", O_WRONLY);
        int e = open(err_path ? err_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof(ru));
    while (wait4(pid, &status, 0, &ru) < 0)
        if (errno != EINTR)
            return -1;
    ret->wall_ms = mono_ms() - t0;
    ret->maxrss_kib = ru.ru_maxrss;
    ret->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return 0;
}

static int cmp_run(const void *a, const void *b)
{
    const struct run_result *x = a, *y = b;
    return (x->wall_ms > y->wall_ms) - (x->wall_ms < y->wall_ms);
}

/* ---- claims: 2 processes x 4 threads --------------------------------------------------- */

struct worker {
    const char *db;
    char owner[48];
    int64_t quota, done;
    int rc;
    int go_fd; /* the process's "go" pipe, read by thread 0 */
    pthread_barrier_t *ready;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    struct store *st = NULL;
    char err[APBOT_ERR_LEN];
    w->rc = 1;
    int orc = store_open(w->db, &st, err, sizeof(err));
    pthread_barrier_wait(w->ready); /* every handle open before the clock starts */
    pthread_barrier_wait(w->ready); /* the parent said go */
    if (orc != APBOT_OK) {
        fprintf(stderr, "bench-store: %s\n", err);
        return NULL;
    }
    struct machine_policy pol = machine_policy_default();
    struct machine_counters fresh = {0};
    struct machine_step claimed;
    if (machine_next(MACHINE_NEW, MACHINE_EV_CLAIMED, &fresh, &pol, &claimed) != APBOT_OK)
        goto out;
    while (w->done < w->quota) {
        struct store_item it;
        int rc = store_claim(st, w->owner, NULL, 60000, &claimed, &it, err, sizeof(err));
        if (rc == APBOT_E_NOTFOUND)
            break;
        if (rc != APBOT_OK) {
            fprintf(stderr, "bench-store: claim: %s\n", err);
            goto out;
        }
        struct machine_step step;
        struct machine_counters c = it.counters;
        char doc[48];
        snprintf(doc, sizeof(doc), "BENCH-%" PRId64, it.id);
        rc = machine_next(it.state, MACHINE_EV_FOUND, &c, &pol, &step);
        struct store_change ch = {.from = it.state,
                                  .event = MACHINE_EV_FOUND,
                                  .step = &step,
                                  .erp_doc = doc,
                                  .reason = "",
                                  .actor = w->owner};
        if (rc == APBOT_OK)
            rc = store_apply(st, it.id, w->owner, &ch, NULL, NULL, err, sizeof(err));
        store_item_done(&it);
        if (rc != APBOT_OK) {
            fprintf(stderr, "bench-store: apply: %s\n", err);
            goto out;
        }
        w->done++;
    }
    w->rc = 0;
out:
    store_close(st);
    return NULL;
}

/* One process: THREADS workers; tells the parent "ready", waits for "go", reports claims. */
static int claim_process(const char *db, int k, int64_t quota, int ready_fd, int go_fd, int done_fd)
{
    struct worker w[THREADS];
    pthread_t t[THREADS];
    pthread_barrier_t ready;
    pthread_barrier_init(&ready, NULL, THREADS + 1);
    for (int i = 0; i < THREADS; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].db = db;
        w[i].quota = quota;
        w[i].ready = &ready;
        snprintf(w[i].owner, sizeof(w[i].owner), "bench-%d-%d", k, i);
        if (pthread_create(&t[i], NULL, work, &w[i]) != 0)
            return 20;
    }
    pthread_barrier_wait(&ready);
    char c = 'r';
    if (write(ready_fd, &c, 1) != 1 || read(go_fd, &c, 1) != 1)
        return 21;
    pthread_barrier_wait(&ready);
    int64_t done = 0;
    int rc = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        done += w[i].done;
        rc |= w[i].rc;
    }
    if (write(done_fd, &done, sizeof(done)) != (ssize_t)sizeof(done))
        return 22;
    return rc;
}

/* Claims `claims` items with PROCS x THREADS workers; fills the row's claim figures. */
static int bench_claims(const char *db, int64_t claims, struct row *row)
{
    int ready[2], go[2], done[2];
    if (pipe(ready) || pipe(go) || pipe(done))
        return -1;
    int64_t quota = (claims + PROCS * THREADS - 1) / (PROCS * THREADS);
    pid_t pid[PROCS];
    for (int k = 0; k < PROCS; k++) {
        pid[k] = fork();
        if (pid[k] < 0)
            return -1;
        if (pid[k] == 0)
            _exit(claim_process(db, k, quota, ready[1], go[0], done[1]));
    }
    char c;
    for (int k = 0; k < PROCS; k++)
        if (read(ready[0], &c, 1) != 1)
            return -1;
    int64_t t0 = mono_ms();
    for (int k = 0; k < PROCS; k++)
        if (write(go[1], "g", 1) != 1)
            return -1;
    int rc = 0;
    int64_t total = 0;
    for (int k = 0; k < PROCS; k++) {
        int status = 0;
        waitpid(pid[k], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            rc = -1;
    }
    row->claim_ms = mono_ms() - t0;
    for (int k = 0; k < PROCS; k++) {
        int64_t n = 0;
        if (read(done[0], &n, sizeof(n)) == (ssize_t)sizeof(n))
            total += n;
    }
    close(ready[0]);
    close(ready[1]);
    close(go[0]);
    close(go[1]);
    close(done[0]);
    close(done[1]);
    row->claims = total;
    row->claims_per_s = total * 1000 / (row->claim_ms > 0 ? row->claim_ms : 1);
    return rc;
}

/* ---- one backend ------------------------------------------------------------------------ */

static int bench_backend(const char *apbot, const char *db, const char *csv, const char *errf,
                         int64_t count, int64_t claims, struct row *row)
{
    char *enq[] = {(char *)apbot, "--db", (char *)db, "enqueue", (char *)csv, NULL};
    struct run_result r;
    if (run_child(enq, errf, &r) != 0 || r.exit_code != 0) {
        fprintf(stderr, "bench-store: %s enqueue failed (exit %d); see %s\n", row->backend,
                r.exit_code, errf);
        return -1;
    }
    row->enq_ms = r.wall_ms;
    row->enq_per_s = count * 1000 / (r.wall_ms > 0 ? r.wall_ms : 1);
    row->enq_rss_kib = r.maxrss_kib;
    char *status[] = {(char *)apbot, "--db", (char *)db, "status", "--json", NULL};
    struct run_result st[STATUS_RUNS];
    for (int i = 0; i < STATUS_RUNS; i++)
        if (run_child(status, errf, &st[i]) != 0 || st[i].exit_code != 0)
            return -1;
    qsort(st, STATUS_RUNS, sizeof(st[0]), cmp_run);
    row->status_ms = st[STATUS_RUNS / 2].wall_ms;
    /* Before the claims: the chain holds exactly the `count` enqueued events. */
    char *verify[] = {(char *)apbot, "--db", (char *)db, "audit", "verify", NULL};
    struct run_result v[VERIFY_RUNS];
    for (int i = 0; i < VERIFY_RUNS; i++)
        if (run_child(verify, errf, &v[i]) != 0 || v[i].exit_code != 0) {
            fprintf(stderr, "bench-store: %s audit verify failed (exit %d); see %s\n", row->backend,
                    v[i].exit_code, errf);
            return -1;
        }
    qsort(v, VERIFY_RUNS, sizeof(v[0]), cmp_run);
    row->verify_ms = v[VERIFY_RUNS / 2].wall_ms;
    row->verify_per_s = count * 1000 / (row->verify_ms > 0 ? row->verify_ms : 1);
    if (bench_claims(db, claims, row) != 0) {
        fprintf(stderr, "bench-store: %s claims failed\n", row->backend);
        return -1;
    }
    row->ok = true;
    return 0;
}

static int pg_exec(const char *conninfo, const char *sql)
{
    PGconn *c = PQconnectdb(conninfo);
    int rc = -1;
    if (PQstatus(c) == CONNECTION_OK) {
        PQclear(PQexec(c, "SET client_min_messages = warning"));
        PGresult *r = PQexec(c, sql);
        rc = PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : -1;
        if (rc)
            fprintf(stderr, "bench-store: %s", PQresultErrorMessage(r));
        PQclear(r);
    } else {
        fprintf(stderr, "bench-store: %s", PQerrorMessage(c));
    }
    PQfinish(c);
    return rc;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: bench-store [--count N] [--claims N] [--apbot PATH] [--pg CONNINFO]\n");
}

static int64_t arg_count(const char *s)
{
    char *end = NULL;
    errno = 0;
    long long n = strtoll(s, &end, 10);
    return errno || *end || n < 1 || n > 100000000 ? -1 : n;
}

int main(int argc, char **argv)
{
    int64_t count = 100000, claims = 20000;
    char apbot[PATH_MAX + 16] = "";
    const char *pg = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--count") == 0 && i + 1 < argc) {
            if ((count = arg_count(argv[++i])) < 0) {
                usage(stderr);
                return 2;
            }
        } else if (strcmp(argv[i], "--claims") == 0 && i + 1 < argc) {
            if ((claims = arg_count(argv[++i])) < 0) {
                usage(stderr);
                return 2;
            }
        } else if (strcmp(argv[i], "--apbot") == 0 && i + 1 < argc) {
            snprintf(apbot, sizeof(apbot), "%s", argv[++i]);
        } else if (strcmp(argv[i], "--pg") == 0 && i + 1 < argc) {
            pg = argv[++i];
        } else {
            usage(strcmp(argv[i], "--help") == 0 ? stdout : stderr);
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    if (claims > count)
        claims = count;
    if (!*apbot) {
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n <= 0)
            return 1;
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = '\0';
        snprintf(apbot, sizeof(apbot), "%s/apbot", self);
    }
    if (access(apbot, X_OK) != 0) {
        fprintf(stderr, "bench-store: %s is not executable; pass --apbot\n", apbot);
        return 1;
    }
    const char *tmp = getenv("TMPDIR");
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/apbot-bench-store-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("bench-store: mkdtemp");
        return 1;
    }
    char csv[PATH_MAX + 32], db[PATH_MAX + 32], errf[PATH_MAX + 32];
    snprintf(csv, sizeof(csv), "%s/invoices.csv", dir);
    snprintf(db, sizeof(db), "%s/q.db", dir);
    snprintf(errf, sizeof(errf), "%s/err.txt", dir);
    if (gen_csv(csv, count) != 0) {
        fprintf(stderr, "bench-store: cannot write %s\n", csv);
        return 1;
    }
    struct row rows[2] = {{.backend = "sqlite"}, {.backend = "postgresql"}};
    int nrows = 1;
    int rc = bench_backend(apbot, db, csv, errf, count, claims, &rows[0]) ? 1 : 0;
    char schema[64] = "", pgdb[1024] = "";
    if (pg) {
        nrows = 2;
        snprintf(schema, sizeof(schema), "bench_%ld", (long)getpid());
        char sql[128];
        snprintf(sql, sizeof(sql), "CREATE SCHEMA %s", schema);
        snprintf(pgdb, sizeof(pgdb), "%s options='-c search_path=%s'", pg, schema);
        if (pg_exec(pg, sql) != 0 ||
            bench_backend(apbot, pgdb, csv, errf, count, claims, &rows[1]) != 0)
            rc = 1;
        snprintf(sql, sizeof(sql), "DROP SCHEMA IF EXISTS %s CASCADE", schema);
        (void)pg_exec(pg, sql);
    }
    printf("bench-store: %" PRId64 " invoices enqueued; audit verify of their %" PRId64
           " events; claims by %d workers in %d processes (claim + apply found, no ERP)\n",
           count, count, PROCS * THREADS, PROCS);
    printf("%-11s %12s %14s %12s %10s %10s %12s %10s %12s\n", "backend", "enqueue s",
           "enqueue inv/s", "enq RSS MiB", "status ms", "verify ms", "verify ev/s", "claims",
           "claims/s");
    for (int i = 0; i < nrows; i++) {
        const struct row *r = &rows[i];
        if (!r->ok) {
            printf("%-11s %12s\n", r->backend, "failed");
            continue;
        }
        printf("%-11s %8" PRId64 ".%03" PRId64 " %14" PRId64 " %8ld.%01ld %10" PRId64 " %10" PRId64
               " %12" PRId64 " %10" PRId64 " %12" PRId64 "\n",
               r->backend, r->enq_ms / 1000, r->enq_ms % 1000, r->enq_per_s, r->enq_rss_kib / 1024,
               r->enq_rss_kib % 1024 * 10 / 1024, r->status_ms, r->verify_ms, r->verify_per_s,
               r->claims, r->claims_per_s);
    }
    const char *files[] = {"invoices.csv", "q.db", "q.db-wal", "q.db-shm", "err.txt"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char p[PATH_MAX + 32];
        snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
    return rc;
}
