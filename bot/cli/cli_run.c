/*
 * cli_run.c - `apbot run --flow FILE [--erp URL] [--until-empty] [--max-seconds N]
 * [--concurrency N|auto] [--quiet] [--log-format text|json] [--metrics-file PATH
 * [--metrics-interval N]] [--queue-outage-max SECONDS]`: parses the options, turns
 * SIGINT/SIGTERM into the runner's cancel flag, picks the output (a progress line on a
 * terminal, key=value or JSON log lines otherwise), maps the runner's result to an exit code
 * and writes the run's last metrics with it. The work is runner.c's.
 */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apbot/runner.h"

static volatile sig_atomic_t run_cancel;

static void on_signal(int sig)
{
    (void)sig;
    run_cancel = 1;
}

static void run_usage(FILE *out)
{
    fprintf(out,
            "usage: apbot [--db PATH] [--erp URL] run --flow FILE [--erp URL] [--until-empty]\n"
            "             [--max-seconds N] [--concurrency N|auto] [--quiet]\n"
            "             [--log-format text|json] [--queue-outage-max SECONDS]\n"
            "             [--metrics-file PATH [--metrics-interval N]]\n"
            "\n"
            "Posts queued invoices into the ERP the flow describes: look up, post with the\n"
            "intent committed first, reconcile every ambiguous outcome.\n"
            "  --flow FILE        the ERP's flow (e.g. flows/acme.xml)\n"
            "  --erp URL          ERP base URL (default $APBOT_ERP_URL or the flow's)\n"
            "  --until-empty      stop once no item is pending\n"
            "  --max-seconds N    stop after N seconds (in-flight items are handed back)\n"
            "  --concurrency N    ERP sessions working at once (at most the flow's\n"
            "                     max-sessions); auto (the default) adapts to the ERP's\n"
            "                     capacity: more while answers stay fast, fewer when they slow\n"
            "                     down, time out or the ERP says it is overloaded\n"
            "  --metrics-file PATH  keep the run's figures in PATH for the node exporter's\n"
            "                     textfile collector (Prometheus text format), rewritten whole\n"
            "                     every N seconds (--metrics-interval, default 5) and at the end\n"
            "                     with the exit code\n"
            "  --quiet            no progress line and no log lines, only the summary\n"
            "  --log-format F     text (key=value, the default) or json: one JSON object per\n"
            "                     log line, the same fields (journald, log shippers)\n"
            "  --queue-outage-max SECONDS\n"
            "                     ride out a queue that cannot be reached (a PostgreSQL\n"
            "                     restart, a failover, a cut connection) this long: no claims,\n"
            "                     items stay as the queue recorded them, reconnect with\n"
            "                     backoff; default 300, 0: stop at the first failed reconnect\n"
            "On a terminal: a progress line, warnings and errors scrolled above it; otherwise\n"
            "one key=value log line per event on stderr.\n"
            "Credentials: APBOT_ERP_USER, APBOT_ERP_PASSWORD (or APBOT_ERP_PASSWORD_FILE, or\n"
            "systemd's credentials erp-user, erp-password: docs/operations.md).\n"
            "Exit: 0 stopped normally, 1 error, 2 usage, 4 circuit breaker (ERP unusable;\n"
            "untouched items stay queued), 8 the queue stayed unavailable past\n"
            "--queue-outage-max (every item as the queue last recorded it: run again).\n");
}

/* Parses a non-negative decimal; false when s is not one. */
static bool parse_count(const char *s, long max, long *ret)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || !end || end == s || *end || v < 0 || v > max)
        return false;
    *ret = v;
    return true;
}

int cli_run(const struct cli_ctx *ctx, int argc, char **argv)
{
    struct runner_options opt;
    struct runner_stats stats;
    bool quiet = false, json = false;
    const char *erp = ctx->erp_url, *metrics_path = NULL;
    char err[APBOT_ERR_LEN];

    memset(&opt, 0, sizeof(opt));
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            run_usage(stdout);
            return CLI_EXIT_OK;
        } else if (strcmp(a, "--flow") == 0 && v) {
            opt.flow_path = v;
            i++;
        } else if (strcmp(a, "--erp") == 0 && v) {
            erp = v;
            i++;
        } else if (strcmp(a, "--until-empty") == 0) {
            opt.until_empty = true;
        } else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
            quiet = true;
        } else if (strcmp(a, "--log-format") == 0 && v) {
            if (strcmp(v, "json") != 0 && strcmp(v, "text") != 0) {
                fprintf(stderr, "apbot run: --log-format wants text or json\n");
                return CLI_EXIT_USAGE;
            }
            json = strcmp(v, "json") == 0;
            i++;
        } else if (strcmp(a, "--max-seconds") == 0 && v) {
            if (!parse_count(v, 366L * 24 * 3600, &n)) {
                fprintf(stderr, "apbot run: --max-seconds wants a number of seconds\n");
                return CLI_EXIT_USAGE;
            }
            opt.max_seconds = n;
            i++;
        } else if (strcmp(a, "--metrics-file") == 0 && v) {
            metrics_path = v;
            i++;
        } else if (strcmp(a, "--metrics-interval") == 0 && v) {
            if (!parse_count(v, 3600, &n) || n < 1) {
                fprintf(stderr, "apbot run: --metrics-interval wants 1..3600 seconds\n");
                return CLI_EXIT_USAGE;
            }
            opt.metrics_every_ms = n * 1000;
            i++;
        } else if (strcmp(a, "--queue-outage-max") == 0 && v) {
            if (!parse_count(v, 7L * 24 * 3600, &n)) {
                fprintf(stderr, "apbot run: --queue-outage-max wants a number of seconds\n");
                return CLI_EXIT_USAGE;
            }
            opt.queue_outage_max_ms = n > 0 ? n * 1000 : 1; /* 0: one attempt, at once */
            i++;
        } else if (strcmp(a, "--concurrency") == 0 && v) {
            if (strcmp(v, "auto") == 0) {
                opt.concurrency = 0;
            } else if (!parse_count(v, 256, &n) || n < 1) {
                fprintf(stderr, "apbot run: --concurrency wants 1..256 or auto\n");
                return CLI_EXIT_USAGE;
            } else {
                opt.concurrency = (int)n;
            }
            i++;
        } else {
            fprintf(stderr, "apbot run: unknown or incomplete option '%s'\n", a);
            run_usage(stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (!opt.flow_path) {
        fprintf(stderr, "apbot run: --flow FILE is required\n");
        run_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (metrics_path) {
        /* a path that cannot be written is found before anything is sent */
        opt.metrics = runner_metrics_new();
        opt.metrics_path = metrics_path;
        if (runner_metrics_write(opt.metrics, metrics_path, -1, err, sizeof(err)) != APBOT_OK) {
            fprintf(stderr, "apbot run: --metrics-file: %s\n", err);
            runner_metrics_free(opt.metrics);
            return CLI_EXIT_ERROR;
        }
    }
    opt.erp_url = erp;
    opt.db_path = ctx->db_path;
    opt.cancel = &run_cancel;
    bool tty = isatty(STDERR_FILENO) == 1;
    /* JSON lines are for machines: they go out even on a terminal, without the progress line */
    opt.progress = !quiet && tty && !json;
    opt.log = !quiet && (!tty || json) ? stderr : NULL;
    opt.log_json = json;

    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    int rc = runner_run(&opt, &stats);

    char pending[32] = "unknown";
    if (stats.pending >= 0)
        snprintf(pending, sizeof(pending), "%" PRId64, stats.pending);
    printf("run: stopped (%s) after %" PRId64 " s: completed %" PRId64
           ", business-exception %" PRId64 ", manual-review %" PRId64 ", still pending %s\n",
           runner_stop_name(stats.stop), stats.elapsed_ms / 1000, stats.completed,
           stats.business_exception, stats.manual_review, pending);
    if (stats.queue_outages > 0)
        printf("run: the queue was unavailable %" PRId64 " time(s), %" PRId64
               " ms in all; connections lost %" PRId64 "\n",
               stats.queue_outages, stats.queue_outage_ms, stats.queue_lost);
    if (stats.max_late_commit_ms > 0)
        printf("run: the ERP committed up to %" PRId64 " ms after apbot gave up; settle delay in "
               "force %" PRId64 " ms\n",
               stats.max_late_commit_ms, stats.settle_ms);
    fflush(stdout);
    int status = CLI_EXIT_ERROR;
    switch (rc) {
    case APBOT_OK:
        status = CLI_EXIT_OK;
        break;
    case APBOT_E_SYSTEMIC:
        fprintf(stderr,
                "apbot run: circuit breaker: %s\n"
                "apbot run: stopped; in-flight items were handed back, untouched items stay "
                "queued. Fix the ERP side and run again.\n",
                stats.message);
        status = CLI_EXIT_SYSTEMIC;
        break;
    case APBOT_E_UNAVAIL:
        fprintf(stderr,
                "apbot run: %s\n"
                "apbot run: stopped; every item is where the queue last recorded it. Run again "
                "once the database is back.\n",
                stats.message);
        status = CLI_EXIT_QUEUE;
        break;
    default:
        fprintf(stderr, "apbot run: %s\n", stats.message[0] ? stats.message : apbot_strerror(rc));
        break;
    }
    if (opt.metrics) {
        if (runner_metrics_write(opt.metrics, metrics_path, status, err, sizeof(err)) != APBOT_OK)
            fprintf(stderr, "apbot run: the last metrics were not written: %s\n", err);
        runner_metrics_free(opt.metrics);
    }
    return status;
}
