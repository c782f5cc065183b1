/*
 * cli_report.c - `apbot report --flow FILE [--erp URL] [--date YYYY-MM-DD]
 * [--format text|csv|html|json] [--out FILE]`: the daily reconciliation of the queue against
 * the ERP's listing of one booking day (report.c builds it, report_render.c writes it).
 *
 * Exit codes are for a scheduler: 0 clean, CLI_EXIT_DRIFT when any drift was found,
 * CLI_EXIT_UNBALANCED when the items do not balance (both still write the report),
 * CLI_EXIT_ERROR when the queue or the ERP could not be read completely (no report: a
 * partial listing must never pass for a reconciliation). With --out the file is written
 * to a new temporary file beside it (O_EXCL|O_NOFOLLOW) and renamed, so a mailer never picks
 * up half a report and a planted symlink is never followed.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apbot/erp.h"
#include "apbot/flow.h"
#include "apbot/invoice.h"
#include "apbot/mem.h"
#include "apbot/report.h"
#include "apbot/store.h"

#define CLI_REPORT_ERR_LEN (16 * 1024)

static void report_usage(FILE *out)
{
    fprintf(out,
            "usage: apbot report --flow FILE [--erp URL] [--date YYYY-MM-DD]\n"
            "                    [--format text|csv|html|json] [--out FILE] [--max-lookups N]\n"
            "\n"
            "Reconciles the queue with the ERP's listing of one booking day (default: today,\n"
            "local time): balance, matched records, drift (duplicates, missing, orphans,\n"
            "amount and document-number mismatches) and hints for the morning review.\n"
            "\n"
            "exit codes: 0 clean, 5 drift found, 6 does not balance, 1 queue or ERP could not\n"
            "be read, 2 usage error\n");
}

/*
 * Opens the output: stdout, or a new temporary file beside FILE to be renamed by finish_out.
 * The temporary file is created with O_EXCL|O_NOFOLLOW: whatever sits at its name (a symlink
 * planted by another user of the directory, a stale file) is never followed nor truncated;
 * the name FILE.tmp.PID is tried first, then FILE.tmp.PID.RANDOM. NULL when none could be made.
 */
static FILE *open_out(const char *path, char *tmp, size_t tmplen)
{
    FILE *f;
    int fd = -1;
    if (!path || strcmp(path, "-") == 0)
        return stdout;
    for (int attempt = 0; attempt < 8 && fd < 0; attempt++) {
        unsigned int r = 0;
        int n;
        if (attempt == 0) {
            n = snprintf(tmp, tmplen, "%s.tmp.%ld", path, (long)getpid());
        } else {
            if (getentropy(&r, sizeof(r)) != 0)
                return NULL;
            n = snprintf(tmp, tmplen, "%s.tmp.%ld.%08x", path, (long)getpid(), r);
        }
        if (n < 0 || (size_t)n >= tmplen)
            return NULL;
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            return NULL;
    }
    if (fd < 0)
        return NULL;
    f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        unlink(tmp);
    }
    return f;
}

static int finish_out(FILE *f, const char *path, const char *tmp, bool ok)
{
    if (f == stdout)
        return fflush(stdout) == 0 ? 0 : -1;
    if (fclose(f) != 0)
        ok = false;
    if (!ok) {
        unlink(tmp);
        return -1;
    }
    if (rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

int cli_report(const struct cli_ctx *ctx, int argc, char **argv)
{
    const char *flow_path = NULL, *erp_url = ctx->erp_url, *date = NULL, *out_path = NULL;
    const char *format = "text";
    enum report_format fmt = REPORT_FMT_TEXT;
    int max_lookups = 0;
    struct flow *f = NULL;
    struct store *st = NULL;
    struct erp_session *erp = NULL;
    struct report *r = NULL;
    struct report_options opt;
    char today[11], tmp[4096];
    char *err = NULL;
    FILE *out = NULL;
    int status = CLI_EXIT_ERROR;
    int rc;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const bool has = i + 1 < argc;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            report_usage(stdout);
            return CLI_EXIT_OK;
        } else if (strcmp(a, "--flow") == 0 && has) {
            flow_path = argv[++i];
        } else if (strcmp(a, "--erp") == 0 && has) {
            erp_url = argv[++i];
        } else if (strcmp(a, "--date") == 0 && has) {
            date = argv[++i];
        } else if (strcmp(a, "--format") == 0 && has) {
            format = argv[++i];
        } else if (strcmp(a, "--out") == 0 && has) {
            out_path = argv[++i];
        } else if (strcmp(a, "--max-lookups") == 0 && has) {
            char *end = NULL;
            long v = strtol(argv[++i], &end, 10);
            if (!end || *end || v < 1 || v > 100000) {
                fprintf(stderr, "apbot report: --max-lookups wants 1..100000\n");
                return CLI_EXIT_USAGE;
            }
            max_lookups = (int)v;
        } else {
            fprintf(stderr, "apbot report: unknown or incomplete option '%s'\n", a);
            report_usage(stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (!flow_path) {
        fprintf(stderr, "apbot report: --flow FILE is required\n");
        report_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (report_format_from_name(format, &fmt) != APBOT_OK) {
        fprintf(stderr, "apbot report: unknown format '%s' (text, csv, html, json)\n", format);
        return CLI_EXIT_USAGE;
    }
    if (date && !invoice_date_valid(date)) {
        fprintf(stderr, "apbot report: bad date '%s' (want YYYY-MM-DD)\n", date);
        return CLI_EXIT_USAGE;
    }
    if (!date) {
        report_local_date(store_now_ms(), today);
        date = today;
    }
    if (store_path_is_file(ctx->db_path) && access(ctx->db_path, F_OK) != 0) {
        fprintf(stderr, "apbot report: no queue database at %s\n", ctx->db_path);
        return CLI_EXIT_ERROR;
    }

    err = apbot_xcalloc(1, CLI_REPORT_ERR_LEN);
    rc = flow_load(flow_path, &f, err, CLI_REPORT_ERR_LEN);
    if (rc != APBOT_OK) {
        fprintf(stderr, "apbot report: %s\n", err);
        goto out;
    }
    rc = store_open(ctx->db_path, &st, err, CLI_REPORT_ERR_LEN);
    if (rc != APBOT_OK) {
        fprintf(stderr, "apbot report: %s\n", err);
        goto out;
    }
    rc = erp_open(f, erp_url, NULL, &erp, err, CLI_REPORT_ERR_LEN);
    if (rc != APBOT_OK) {
        fprintf(stderr, "apbot report: %s\n", err);
        goto out;
    }
    erp_set_retries(erp, 3);
    memset(&opt, 0, sizeof(opt));
    opt.date = date;
    opt.now = store_now_ms();
    opt.max_lookups = max_lookups;
    rc = report_build(st, erp, f, &opt, &r, err, CLI_REPORT_ERR_LEN);
    if (rc != APBOT_OK) {
        fprintf(stderr, "apbot report: the ERP could not be read completely, no report: %s\n", err);
        goto out;
    }
    out = open_out(out_path, tmp, sizeof(tmp));
    if (!out) {
        fprintf(stderr, "apbot report: cannot write %s\n", out_path);
        goto out;
    }
    rc = report_write(r, fmt, out, err, CLI_REPORT_ERR_LEN);
    if (finish_out(out, out_path, tmp, rc == APBOT_OK) != 0 || rc != APBOT_OK) {
        fprintf(stderr, "apbot report: cannot write %s\n", out_path ? out_path : "stdout");
        goto out;
    }
    switch (report_status(r)) {
    case REPORT_CLEAN:
        status = CLI_EXIT_OK;
        break;
    case REPORT_DRIFT:
        status = CLI_EXIT_DRIFT;
        break;
    case REPORT_UNBALANCED:
        status = CLI_EXIT_UNBALANCED;
        break;
    }
    if (out_path || fmt != REPORT_FMT_TEXT) {
        const struct report_summary *s = report_summary(r);
        fprintf(stderr, "apbot report %s: %s (drift %lld, %s)%s%s\n", s->date,
                status == CLI_EXIT_OK      ? "clean"
                : status == CLI_EXIT_DRIFT ? "DRIFT"
                                           : "DOES NOT BALANCE",
                (long long)s->drift, s->balanced ? "balanced" : "not balanced",
                out_path ? " -> " : "", out_path ? out_path : "");
    }
out:
    report_free(r);
    erp_close(erp);
    store_close(st);
    flow_free(f);
    free(err);
    return status;
}
