/*
 * bench_enqueue.c - `bench-enqueue`: how fast `apbot enqueue` queues a large month-end file,
 * in how much memory, and how fast `apbot status` answers on the result.
 *
 * Generates a CSV of N invoices (default 100,000; every third one has two lines) in a temp
 * directory, then runs the real apbot binary as a child for each step and measures its wall
 * time and peak RSS (getrusage of the child via wait4). Steps: a fresh enqueue, the same
 * file again (every invoice already queued), `status --json` (median of several runs) and
 * `list --state all --json` (streams every item). Prints a table; asserts nothing about
 * timing. Integer arithmetic only.
 *
 *     bench-enqueue [--count N] [--apbot PATH] [--keep]
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "apbot/error.h"
#include "apbot/money.h"

#define STATUS_RUNS 5

struct run_result {
    int64_t wall_ms;
    long maxrss_kib;
    int exit_code; /* -1 when killed */
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Writes n invoices as CSV; returns rows written or -1. */
static int64_t gen_csv(const char *path, int64_t n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int64_t rows = 0;
    fputs("vendor_id,invoice_number,invoice_date,currency,line_net,line_tax,vendor_name,"
          "line_description\n",
          f);
    for (int64_t i = 0; i < n; i++) {
        int lines = i % 3 == 0 ? 2 : 1;
        for (int l = 0; l < lines; l++) {
            int64_t net = 1000 + (i * 7919 + l * 104729) % 5000000; /* minor units */
            int64_t tax = net * 19 / 100;
            char snet[32], stax[32];
            if (money_format_plain(net, 2, snet, sizeof(snet)) != APBOT_OK ||
                money_format_plain(tax, 2, stax, sizeof(stax)) != APBOT_OK)
                goto fail;
            fprintf(f,
                    "V%04" PRId64 ",BENCH-%07" PRId64 ",2024-01-%02d,EUR,%s,%s,Vendor %04" PRId64
                    ",Line %d\n",
                    i % 500, i, (int)(i % 28) + 1, snet, stax, i % 500, l + 1);
            rows++;
        }
    }
    if (fclose(f) != 0)
        return -1;
    return rows;
fail:
    fclose(f);
    return -1;
}

/* Runs argv with stdout to out_path (or /dev/null) and stderr to err_path; measures it. */
static int run_child(char *const argv[], const char *out_path, const char *err_path,
                     struct run_result *ret)
{
    int64_t t0 = mono_ms();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int o = open(out_path ? out_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(err_path ? err_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof(ru));
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR)
            return -1;
    }
    ret->wall_ms = mono_ms() - t0;
    ret->maxrss_kib = ru.ru_maxrss;
    ret->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return 0;
}

static void print_row(const char *what, const struct run_result *r, int64_t items)
{
    char rate[32] = "-";
    if (items > 0)
        snprintf(rate, sizeof(rate), "%" PRId64, items * 1000 / (r->wall_ms > 0 ? r->wall_ms : 1));
    printf("%-34s %6" PRId64 ".%03" PRId64 " %12s %8ld.%01ld %5d\n", what, r->wall_ms / 1000,
           r->wall_ms % 1000, rate, r->maxrss_kib / 1024, r->maxrss_kib % 1024 * 10 / 1024,
           r->exit_code);
}

static int cmp_run(const void *a, const void *b)
{
    const struct run_result *x = a, *y = b;
    return (x->wall_ms > y->wall_ms) - (x->wall_ms < y->wall_ms);
}

static void usage(FILE *out)
{
    fprintf(out, "usage: bench-enqueue [--count N] [--apbot PATH] [--keep]\n");
}

int main(int argc, char **argv)
{
    int64_t count = 100000;
    char apbot[PATH_MAX + 16] = "";
    bool keep = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--count") == 0 && i + 1 < argc) {
            char *end = NULL;
            errno = 0;
            long long n = strtoll(argv[++i], &end, 10);
            if (errno || *end || n < 1 || n > 100000000) {
                usage(stderr);
                return 2;
            }
            count = n;
        } else if (strcmp(argv[i], "--apbot") == 0 && i + 1 < argc) {
            snprintf(apbot, sizeof(apbot), "%s", argv[++i]);
        } else if (strcmp(argv[i], "--keep") == 0) {
            keep = true;
        } else {
            usage(strcmp(argv[i], "--help") == 0 ? stdout : stderr);
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    if (!*apbot) {
        /* The apbot binary sits next to this one in the build directory. */
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n <= 0) {
            fprintf(stderr, "bench-enqueue: cannot find apbot; pass --apbot PATH\n");
            return 1;
        }
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = '\0';
        snprintf(apbot, sizeof(apbot), "%s/apbot", self);
    }
    if (access(apbot, X_OK) != 0) {
        fprintf(stderr, "bench-enqueue: %s is not executable; build it or pass --apbot\n", apbot);
        return 1;
    }

    const char *tmp = getenv("TMPDIR");
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/apbot-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("bench-enqueue: mkdtemp");
        return 1;
    }
    char csv[PATH_MAX + 32], db[PATH_MAX + 32], out[PATH_MAX + 32], err[PATH_MAX + 32];
    snprintf(csv, sizeof(csv), "%s/invoices.csv", dir);
    snprintf(db, sizeof(db), "%s/q.db", dir);
    snprintf(out, sizeof(out), "%s/out.txt", dir);
    snprintf(err, sizeof(err), "%s/err.txt", dir);

    int rc = 1;
    int64_t t0 = mono_ms();
    int64_t rows = gen_csv(csv, count);
    if (rows < 0) {
        fprintf(stderr, "bench-enqueue: cannot write %s\n", csv);
        goto out;
    }
    int64_t gen_ms = mono_ms() - t0;
    struct stat sb;
    int64_t csv_bytes = stat(csv, &sb) == 0 ? (int64_t)sb.st_size : 0;
    printf("bench-enqueue: %" PRId64 " invoices, %" PRId64 " CSV rows, %" PRId64
           " KiB (generated in %" PRId64 " ms)\n",
           count, rows, csv_bytes / 1024, gen_ms);
    printf("%-34s %10s %12s %10s %5s\n", "step", "wall s", "invoices/s", "RSS MiB", "exit");

    char *enq[] = {apbot, "--db", db, "enqueue", csv, NULL};
    struct run_result r;
    if (run_child(enq, out, err, &r) != 0)
        goto out;
    print_row("enqueue (fresh)", &r, count);
    char summary[256] = "";
    FILE *f = fopen(out, "r");
    if (f) {
        if (!fgets(summary, sizeof(summary), f))
            summary[0] = '\0';
        fclose(f);
    }
    if (r.exit_code != 0) {
        fprintf(stderr, "bench-enqueue: enqueue exited %d (%s); see %s\n", r.exit_code, summary,
                err);
        keep = true;
        goto out;
    }

    if (run_child(enq, NULL, NULL, &r) != 0)
        goto out;
    print_row("enqueue again (all already queued)", &r, count);

    char *status[] = {apbot, "--db", db, "status", "--json", NULL};
    struct run_result st[STATUS_RUNS];
    for (int i = 0; i < STATUS_RUNS; i++)
        if (run_child(status, NULL, NULL, &st[i]) != 0)
            goto out;
    qsort(st, STATUS_RUNS, sizeof(st[0]), cmp_run);
    print_row("status --json (median of 5)", &st[STATUS_RUNS / 2], 0);
    print_row("status --json (slowest of 5)", &st[STATUS_RUNS - 1], 0);

    char *list[] = {apbot, "--db", db, "list", "--state", "all", "--json", NULL};
    if (run_child(list, NULL, NULL, &r) != 0)
        goto out;
    print_row("list --state all --json", &r, count);

    int64_t db_bytes = stat(db, &sb) == 0 ? (int64_t)sb.st_size : 0;
    printf("enqueue said: %s", summary);
    printf("database: %" PRId64 " KiB\n", db_bytes / 1024);
    rc = 0;
out:
    if (keep) {
        printf("kept %s\n", dir);
    } else {
        const char *files[] = {"invoices.csv", "q.db",    "q.db-wal",
                               "q.db-shm",     "out.txt", "err.txt"};
        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
            char p[PATH_MAX + 32];
            snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
            unlink(p);
        }
        rmdir(dir);
    }
    return rc;
}
