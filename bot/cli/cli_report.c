/*
 * cli_report.c - `apbot report --flow FILE [--erp URL] [--date YYYY-MM-DD]
 * [--format text|csv|html|json] [--out FILE] [--mail-to ADDR[,ADDR] --smtp URL ...]`: the daily
 * reconciliation of the queue against the ERP's listing of one booking day (report.c builds
 * it, report_render.c writes it, report_mail.c mails it).
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
#include "apbot/runner.h"
#include "apbot/secret.h"
#include "apbot/store.h"

#define CLI_REPORT_ERR_LEN (16 * 1024)

static void report_usage(FILE *out)
{
    fprintf(out,
            "usage: apbot report --flow FILE [--erp URL] [--date YYYY-MM-DD]\n"
            "                    [--format text|csv|html|json] [--out FILE] [--max-lookups N]\n"
            "                    [--mail-to ADDR[,ADDR...] --smtp "
            "smtps://HOST[:PORT]|smtp://HOST[:PORT]\n"
            "                     [--mail-from ADDR] [--smtp-ca FILE] [--review-url URL]\n"
            "                     [--mail-subject-prefix TEXT]]\n"
            "\n"
            "Reconciles the queue with the ERP's listing of one booking day (default: today,\n"
            "local time): balance, matched records, drift (duplicates, missing, orphans,\n"
            "amount and document-number mismatches) and hints for the morning review.\n"
            "\n"
            "With --mail-to the report is also mailed: a short text (status, balance, review\n"
            "depth, the oldest items in review, --review-url) and the HTML report attached,\n"
            "the status in the subject (after --mail-subject-prefix: the company, a failed\n"
            "unit; UTF-8),\n"
            "through the mail server at --smtp (TLS required: smtps://, or smtp:// with\n"
            "STARTTLS; the certificate verified, --smtp-ca for an in-house CA); credentials\n"
            "from APBOT_SMTP_USER and APBOT_SMTP_PASSWORD (or their _FILE forms). A report\n"
            "that cannot be made is mailed as NO REPORT.\n"
            "\n"
            "exit codes: 0 clean, 5 drift found, 6 does not balance, 1 queue or ERP could not\n"
            "be read or the mail not sent, 2 usage error\n");
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

/*
 * Checks the mail options and fills m: --mail-to and --smtp together, plain addresses, a
 * sender (--mail-from, else apbot@ this host's name when that makes a plain address), a
 * review URL of http(s) without blanks. Prints what is wrong; 0 when m is ready or no mail
 * was asked for.
 */
static int mail_setup(struct report_mail *m, const char *to, const char *from, const char **rcpt,
                      char *store, size_t store_len, char *from_buf, size_t from_len)
{
    char err[APBOT_ERR_LEN];
    size_t n = 0;

    if (!to && !m->smtp_url && !from && !m->ca_file && !m->review_url && !m->subject_prefix)
        return 0;
    if (!to || !m->smtp_url) {
        fprintf(stderr, "apbot report: mailing the report needs --mail-to and --smtp\n");
        return -1;
    }
    if (report_mail_addresses(to, store, store_len, rcpt, 32, &n, err, sizeof(err)) != APBOT_OK ||
        report_mail_url_ok(m->smtp_url, err, sizeof(err)) != APBOT_OK) {
        fprintf(stderr, "apbot report: %s\n", err);
        return -1;
    }
    if (!from) {
        char host[256] = "";
        if (gethostname(host, sizeof(host) - 1) != 0)
            host[0] = '\0';
        snprintf(from_buf, from_len, "apbot@%s", host);
        from = from_buf;
    }
    const char *one[1];
    size_t n_from = 0;
    char from_store[300];
    if (report_mail_addresses(from, from_store, sizeof(from_store), one, 1, &n_from, err,
                              sizeof(err)) != APBOT_OK) {
        fprintf(stderr, "apbot report: the sender %s: give --mail-from ADDR\n", err);
        return -1;
    }
    if (m->review_url && ((strncmp(m->review_url, "https://", 8) != 0 &&
                           strncmp(m->review_url, "http://", 7) != 0) ||
                          strpbrk(m->review_url, " \t\r\n\"<>") != NULL)) {
        fprintf(stderr, "apbot report: --review-url wants an http(s) URL without blanks\n");
        return -1;
    }
    if (m->ca_file && access(m->ca_file, R_OK) != 0) {
        fprintf(stderr, "apbot report: --smtp-ca %s cannot be read\n", m->ca_file);
        return -1;
    }
    m->from = from;
    m->to = rcpt;
    m->n_to = n;
    return 0;
}

/* Mails r; the credentials read now, wiped after. 0 once the server took it. */
static int mail_report(struct report_mail *m, const struct report *r)
{
    char err[APBOT_ERR_LEN];
    char *user = secret_dup(SECRET_SMTP_USER), *password = secret_dup(SECRET_SMTP_PASSWORD);
    m->user = user;
    m->password = password;
    int rc = report_mail_send(r, m, err, sizeof(err));
    m->user = m->password = NULL;
    secret_free(user);
    secret_free(password);
    if (rc != APBOT_OK) {
        fprintf(stderr, "apbot report: the report was not mailed: %s\n", err);
        return -1;
    }
    fprintf(stderr, "apbot report: mailed to %zu recipient%s through %s\n", m->n_to,
            m->n_to == 1 ? "" : "s", m->smtp_url);
    return 0;
}

/* Mails that there is no report for date, and why. */
static void mail_failure(struct report_mail *m, const char *date, const char *flow_name,
                         const char *why)
{
    char err[APBOT_ERR_LEN];
    char *user = secret_dup(SECRET_SMTP_USER), *password = secret_dup(SECRET_SMTP_PASSWORD);
    m->user = user;
    m->password = password;
    int rc = report_mail_failure(date, flow_name, why, m, err, sizeof(err));
    m->user = m->password = NULL;
    secret_free(user);
    secret_free(password);
    if (rc != APBOT_OK)
        fprintf(stderr, "apbot report: the failure was not mailed either: %s\n", err);
    else
        fprintf(stderr, "apbot report: mailed NO REPORT to %zu recipient%s\n", m->n_to,
                m->n_to == 1 ? "" : "s");
}

int cli_report(const struct cli_ctx *ctx, int argc, char **argv)
{
    const char *flow_path = NULL, *erp_url = ctx->erp_url, *date = NULL, *out_path = NULL;
    const char *format = "text", *mail_to = NULL, *mail_from = NULL;
    struct report_mail mail;
    const char *rcpt[32];
    char rcpt_store[2048], from_buf[300];
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

    memset(&mail, 0, sizeof(mail));
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
        } else if (strcmp(a, "--mail-to") == 0 && has) {
            mail_to = argv[++i];
        } else if (strcmp(a, "--mail-from") == 0 && has) {
            mail_from = argv[++i];
        } else if (strcmp(a, "--smtp") == 0 && has) {
            mail.smtp_url = argv[++i];
        } else if (strcmp(a, "--smtp-ca") == 0 && has) {
            mail.ca_file = argv[++i];
        } else if (strcmp(a, "--review-url") == 0 && has) {
            mail.review_url = argv[++i];
        } else if (strcmp(a, "--mail-subject-prefix") == 0 && has) {
            mail.subject_prefix = argv[++i];
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
    if (mail_setup(&mail, mail_to, mail_from, rcpt, rcpt_store, sizeof(rcpt_store), from_buf,
                   sizeof(from_buf)) != 0)
        return CLI_EXIT_USAGE;
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
    /* 250 ms doubling: 7.75 s of waits in all, enough for an ERP that blinks for a few
     * seconds (a restart, a dropped connection pool) before the report gives up */
    erp_set_retries(erp, 5);
    memset(&opt, 0, sizeof(opt));
    opt.date = date;
    opt.now = store_now_ms();
    opt.max_lookups = max_lookups;
    opt.settle_ms = runner_settle_of(st, f, NULL, NULL);
    rc = report_build(st, erp, f, &opt, &r, err, CLI_REPORT_ERR_LEN);
    if (rc != APBOT_OK) {
        fprintf(stderr, "apbot report: the ERP could not be read completely, no report: %s\n", err);
        if (mail.n_to)
            mail_failure(&mail, date, f->name, err);
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
    if (mail.n_to && mail_report(&mail, r) != 0)
        status = CLI_EXIT_ERROR;
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
