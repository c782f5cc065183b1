/*
 * bench_run.c - `bench-run`: how fast `apbot run` posts invoices into the simulated ERP.
 *
 * For each scenario it starts the simulator in-process (admin on, fixed seed), queues N
 * generated invoices straight through the store, runs the real `apbot run --until-empty` as
 * a child process and reads its CPU time and peak RSS from wait4(). The ERP's own counters
 * (/_sim/stats) give requests per invoice; its ledger gives bookings and keys booked more
 * than once. Prints one table row per scenario. Timings are for people, never asserted.
 *
 * usage: bench-run --apbot PATH --src DIR [--n 500] [--concurrency N] SCENARIO...
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "apbot/invoice.h"
#include "apbot/machine.h"
#include "apbot/money.h"
#include "apbot/store.h"
#include "sim.h"

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
static char *fetch(unsigned short port, const char *path)
{
    char url[256];
    struct body b = {0};
    snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", (unsigned)port, path);
    CURL *c = curl_easy_init();
    if (!c)
        return NULL;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 30000L);
    CURLcode rc = curl_easy_perform(c);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK) {
        free(b.data);
        return NULL;
    }
    return b.data;
}

/* The first "key":N in json, or -1. */
static long long json_number(const char *json, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    const char *p = json ? strstr(json, pat) : NULL;
    if (!p)
        return -1;
    return strtoll(p + strlen(pat), NULL, 10);
}

/* Keys booked more than once in the ledger CSV (reference: third-to-last column). */
static int ledger_duplicates(const char *csv, int *ret_rows)
{
    size_t cap = 1024, n = 0;
    char **refs = malloc(cap * sizeof(*refs));
    if (!refs)
        abort();
    const char *line = csv ? strchr(csv, '\n') : NULL;
    while (line && *++line) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *last = NULL, *prev = NULL, *next = NULL;
        for (size_t i = 0; i < len; i++)
            if (line[i] == ',') {
                prev = last;
                last = next;
                next = line + i;
            }
        if (prev && last) {
            if (n == cap) {
                cap *= 2;
                char **g = realloc(refs, cap * sizeof(*refs));
                if (!g)
                    abort();
                refs = g;
            }
            refs[n++] = strndup(prev + 1, (size_t)(last - prev - 1));
        }
        line = end;
    }
    int dups = 0;
    for (size_t i = 0; i < n; i++) {
        int count = 0;
        bool first = true;
        for (size_t k = 0; k < n; k++)
            if (strcmp(refs[i], refs[k]) == 0) {
                count++;
                if (k < i)
                    first = false;
            }
        if (first && count > 1)
            dups++;
    }
    for (size_t i = 0; i < n; i++)
        free(refs[i]);
    free(refs);
    *ret_rows = (int)n;
    return dups;
}

static int enqueue(const char *db, int n, const char *prefix)
{
    static const char *const currencies[] = {"EUR", "EUR", "EUR", "USD", "EUR", "GBP",
                                             "EUR", "JPY", "EUR", "KWD", "EUR", "CHF"};
    char err[APBOT_ERR_LEN];
    struct store *st = NULL;
    if (store_open(db, &st, err, sizeof(err)) != APBOT_OK ||
        store_begin(st, err, sizeof(err)) != APBOT_OK) {
        fprintf(stderr, "bench-run: %s\n", err);
        store_close(st);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        struct invoice inv;
        struct invoice_line line;
        char vendor[16], number[64];
        invoice_init(&inv);
        snprintf(vendor, sizeof(vendor), "%d", 100001 + i % 40);
        snprintf(number, sizeof(number), "%s-%06d", prefix, i + 1);
        invoice_set_str(&inv.vendor_id, vendor);
        invoice_set_str(&inv.invoice_number, number);
        inv.doc_type = INVOICE_DOC_INVOICE;
        snprintf(inv.issue_date, sizeof(inv.issue_date), "2026-11-%02d", 1 + i % 28);
        snprintf(inv.currency, sizeof(inv.currency), "%s", currencies[i % 12]);
        inv.exponent = money_exponent(inv.currency);
        inv.payable = inv.net_total = 1000 + (int64_t)i * 137;
        memset(&line, 0, sizeof(line));
        line.description = (char *)"bench";
        line.gl_account = (char *)"6000";
        line.net = inv.payable;
        invoice_add_line(&inv, &line);
        enum store_enqueue_result res;
        int64_t id;
        int rc = store_enqueue(st, &inv, "bench", NULL, &res, &id, err, sizeof(err));
        invoice_done(&inv);
        if (rc != APBOT_OK) {
            fprintf(stderr, "bench-run: %s\n", err);
            store_rollback(st);
            store_close(st);
            return -1;
        }
    }
    int rc = store_commit(st, err, sizeof(err));
    store_close(st);
    return rc == APBOT_OK ? 0 : -1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int bench_one(const char *apbot, const char *src, const char *scenario, int n,
                     const char *concurrency)
{
    char dir[] = "/tmp/apbot-bench-XXXXXX";
    char db[128], scn[512], flow[512], url[64], err[256] = "";
    if (!mkdtemp(dir))
        return -1;
    snprintf(db, sizeof(db), "%s/queue.db", dir);
    snprintf(scn, sizeof(scn), "%s/fixtures/scenarios/%s.scn", src, scenario);
    snprintf(flow, sizeof(flow), "%s/flows/acme.xml", src);
    if (enqueue(db, n, scenario) != 0)
        return -1;

    struct sim *sim = NULL;
    struct sim_options so = {.scenario_path = scn, .seed = 7, .admin = true};
    if (sim_start(&so, &sim, err, sizeof(err)) != 0) {
        fprintf(stderr, "bench-run: simulator: %s\n", err);
        return -1;
    }
    unsigned short port = sim_port(sim);
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", (unsigned)port);

    double t0 = now_s();
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, 1); /* the table is ours; apbot's summary line goes away */
        execl(apbot, apbot, "--db", db, "run", "--flow", flow, "--erp", url, "--until-empty",
              "--max-seconds", "900", "--quiet", "--concurrency", concurrency, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof(ru));
    if (pid < 0 || wait4(pid, &status, 0, &ru) != pid) {
        sim_stop(sim);
        return -1;
    }
    double wall = now_s() - t0;
    char *stats = fetch(port, "/_sim/stats");
    char *ledger = fetch(port, "/_sim/ledger.csv");
    sim_stop(sim);

    int rows = 0;
    int dups = ledger_duplicates(ledger, &rows);
    struct store_counts counts;
    struct store *st = NULL;
    memset(&counts, 0, sizeof(counts));
    if (store_open(db, &st, err, sizeof(err)) != APBOT_OK ||
        store_counts(st, &counts, err, sizeof(err)) != APBOT_OK)
        fprintf(stderr, "bench-run: queue: %s\n", err);
    store_close(st);
    long long requests = json_number(stats, "total");
    double cpu_ms = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000.0 +
                    (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000.0;
    printf("%-10s %6d %8.1f %9.2f %10.1f %8.2f %9ld %6" PRId64 " %6" PRId64 " %6" PRId64
           " %9d %6d %5d\n",
           scenario, n, wall, (double)n / wall, (double)requests / n, cpu_ms / n,
           ru.ru_maxrss / 1024, counts.by_state[MACHINE_COMPLETED],
           counts.by_state[MACHINE_BUSINESS_EXCEPTION], counts.by_state[MACHINE_MANUAL_REVIEW],
           rows, dups, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    fflush(stdout);
    free(stats);
    free(ledger);
    if (getenv("BENCH_KEEP")) {
        fprintf(stderr, "bench-run: kept %s/queue.db\n", dir);
        return dups == 0 ? 0 : 1;
    }
    char f[160];
    snprintf(f, sizeof(f), "%s/queue.db", dir);
    unlink(f);
    snprintf(f, sizeof(f), "%s/queue.db-wal", dir);
    unlink(f);
    snprintf(f, sizeof(f), "%s/queue.db-shm", dir);
    unlink(f);
    rmdir(dir);
    return dups == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *apbot = NULL, *src = ".", *concurrency = "auto";
    int n = 500, first = argc;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--apbot") == 0 && i + 1 < argc) {
            apbot = argv[++i];
        } else if (strcmp(argv[i], "--src") == 0 && i + 1 < argc) {
            src = argv[++i];
        } else if (strcmp(argv[i], "--n") == 0 && i + 1 < argc) {
            n = (int)strtol(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--concurrency") == 0 && i + 1 < argc) {
            concurrency = argv[++i];
        } else {
            first = i;
            break;
        }
    }
    if (!apbot || n < 1 || first >= argc) {
        fprintf(stderr, "usage: bench-run --apbot PATH [--src DIR] [--n 500] [--concurrency N] "
                        "SCENARIO...\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    printf("%-10s %6s %8s %9s %10s %8s %9s %6s %6s %6s %9s %6s %5s\n", "scenario", "inv", "wall_s",
           "inv/s", "req/inv", "cpu_ms", "rss_MiB", "done", "bizex", "review", "bookings", "dups",
           "exit");
    int fail = 0;
    for (int i = first; i < argc; i++)
        if (bench_one(apbot, src, argv[i], n, concurrency) != 0)
            fail = 1;
    curl_global_cleanup();
    return fail;
}
