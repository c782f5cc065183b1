/*
 * cli_resolve.c - `apbot resolve ID --posted DOC | --requeue | --reject REASON [--by NAME]
 * [--flow FILE] [--force REASON] [--note TEXT] [--expect-version V]`: an operator's decision
 * on a manual-review or business-exception item, as one audited state change.
 *
 * The decision itself (the policy, the verification of a posted document in the ERP through
 * the flow's lookup, the optimistic check and the audit event) lives in the review module,
 * which the review page uses too; this file parses the command line and prints the verdict.
 * The audit event records --by NAME and, beside it, the OS user who ran the command.
 * Exit codes: 0 recorded, 3 refused, 1 error (database; ERP unreadable while verifying
 * without --force), 2 usage.
 */
#include "cli.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <pwd.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "apbot/error.h"
#include "apbot/flow.h"
#include "apbot/mem.h"
#include "apbot/review.h"
#include "apbot/store.h"
#include "apbot/text.h"

static void resolve_usage(FILE *out)
{
    fprintf(out, "usage: apbot resolve ID --posted DOC --flow FILE [--force REASON]\n"
                 "       apbot resolve ID --requeue\n"
                 "       apbot resolve ID --reject REASON\n"
                 "  options: --by NAME (default: the login name; the OS user is recorded\n"
                 "           beside it), --note TEXT,\n"
                 "           --expect-version V (refuse if the item changed since version V,\n"
                 "           as shown by apbot review ID --json)\n"
                 "\n"
                 "--posted verifies in the ERP that the key is booked as DOC with the same amount\n"
                 "(--force REASON records it although the ERP does not show it); --requeue looks\n"
                 "the item up again from the start; --reject makes it a business exception.\n"
                 "exit codes: 0 done, 3 refused, 1 error (database, ERP unreadable), 2 usage\n");
}

static const char *operator_name(const char *by)
{
    const char *n;
    if (by)
        return by;
    n = getlogin();
    if (n && *n)
        return n;
    n = getenv("USER");
    if (n && *n)
        return n;
    n = getenv("LOGNAME");
    if (n && *n)
        return n;
    return NULL;
}

/* The OS user running the command, "root (uid 0)", into buf: recorded beside --by, which is
 * only what the operator typed. */
static const char *os_user(char *buf, size_t len)
{
    struct passwd pw, *found = NULL;
    char pwbuf[4096];
    uid_t uid = geteuid();

    if (getpwuid_r(uid, &pw, pwbuf, sizeof(pwbuf), &found) == 0 && found && found->pw_name &&
        *found->pw_name)
        snprintf(buf, len, "%s (uid %u)", found->pw_name, (unsigned)uid);
    else
        snprintf(buf, len, "uid %u", (unsigned)uid);
    return buf;
}

/* The ERP exchanges a refused verification saw, for the operator (escaped: ERP text). */
static void print_exchanges(const struct review_verification *v)
{
    for (size_t i = 0; i < v->n_exchanges; i++) {
        const struct review_exchange *x = &v->exchanges[i];
        char url[512], excerpt[240], rule[128];
        fprintf(stderr, "  ERP %s %s %s -> HTTP %d, %s%s%s\n", x->step ? x->step : "?",
                x->method ? x->method : "", text_escape_into(url, sizeof(url), x->url, 0),
                x->http_status, x->outcome ? x->outcome : "?", x->rule ? ", rule " : "",
                x->rule ? text_escape_into(rule, sizeof(rule), x->rule, 0) : "");
        if (x->excerpt && *x->excerpt)
            fprintf(stderr, "      page: %s\n",
                    text_escape_into(excerpt, sizeof(excerpt), x->excerpt, 0));
    }
}

int cli_resolve(const struct cli_ctx *ctx, int argc, char **argv)
{
    const char *posted = NULL, *reject = NULL, *by = NULL, *flow_path = NULL, *force = NULL;
    const char *note = NULL, *erp_url = ctx->erp_url;
    bool requeue = false;
    int64_t id = 0, expect_version = 0;
    int n_actions;
    struct store *st = NULL;
    struct flow *f = NULL;
    struct review_decision d;
    struct review_result res;
    char err[APBOT_ERR_LEN], msg[1200], user[320];
    char *flow_err = NULL;
    int status = CLI_EXIT_ERROR;

    memset(&res, 0, sizeof(res));
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const bool has = i + 1 < argc;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            resolve_usage(stdout);
            return CLI_EXIT_OK;
        } else if (strcmp(a, "--posted") == 0 && has) {
            posted = argv[++i];
        } else if (strcmp(a, "--requeue") == 0) {
            requeue = true;
        } else if (strcmp(a, "--reject") == 0 && has) {
            reject = argv[++i];
        } else if (strcmp(a, "--by") == 0 && has) {
            by = argv[++i];
        } else if (strcmp(a, "--flow") == 0 && has) {
            flow_path = argv[++i];
        } else if (strcmp(a, "--erp") == 0 && has) {
            erp_url = argv[++i];
        } else if (strcmp(a, "--force") == 0 && has) {
            force = argv[++i];
        } else if (strcmp(a, "--note") == 0 && has) {
            note = argv[++i];
        } else if (strcmp(a, "--expect-version") == 0 && has) {
            char *end = NULL;
            long long v = strtoll(argv[++i], &end, 10);
            if (!end || *end || v <= 0) {
                fprintf(stderr, "apbot resolve: --expect-version wants a version number\n");
                return CLI_EXIT_USAGE;
            }
            expect_version = v;
        } else if (a[0] != '-' && id == 0) {
            char *end = NULL;
            long long v = strtoll(a, &end, 10);
            if (!end || *end || v <= 0) {
                fprintf(stderr, "apbot resolve: '%s' is not an item id\n",
                        text_escape_into(msg, sizeof(msg), a, 0));
                return CLI_EXIT_USAGE;
            }
            id = v;
        } else {
            fprintf(stderr, "apbot resolve: unknown or incomplete option '%s'\n",
                    text_escape_into(msg, sizeof(msg), a, 0));
            resolve_usage(stderr);
            return CLI_EXIT_USAGE;
        }
    }
    n_actions = (posted != NULL) + (requeue ? 1 : 0) + (reject != NULL);
    if (id == 0 || n_actions != 1) {
        fprintf(stderr, "apbot resolve: give an item ID and exactly one of --posted DOC, "
                        "--requeue, --reject REASON\n");
        resolve_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (force && !posted) {
        fprintf(stderr, "apbot resolve: --force only applies to --posted\n");
        return CLI_EXIT_USAGE;
    }
    if (posted && !flow_path && !force) {
        fprintf(stderr, "apbot resolve: --posted needs --flow FILE to verify the document in the "
                        "ERP (or --force REASON to record it unverified)\n");
        return CLI_EXIT_USAGE;
    }
    memset(&d, 0, sizeof(d));
    d.id = id;
    d.action = posted ? REVIEW_POSTED : requeue ? REVIEW_REQUEUE : REVIEW_REJECT;
    d.doc = posted;
    d.reason = reject;
    d.force = force;
    d.operator_name = operator_name(by);
    d.auth = REVIEW_AUTH_CLI;
    d.os_user = os_user(user, sizeof(user));
    d.note = note;
    d.expect_version = expect_version;

    if (store_path_is_file(ctx->db_path) && access(ctx->db_path, F_OK) != 0) {
        fprintf(stderr, "apbot resolve: no queue database at %s\n", ctx->db_path);
        return CLI_EXIT_ERROR;
    }
    if (flow_path) {
        flow_err = apbot_xcalloc(1, 16 * 1024);
        if (flow_load(flow_path, &f, flow_err, 16 * 1024) != APBOT_OK) {
            fprintf(stderr, "apbot resolve: %s\n", flow_err);
            goto out;
        }
    }
    if (store_open(ctx->db_path, &st, err, sizeof(err)) != APBOT_OK) {
        fprintf(stderr, "apbot resolve: %s\n", err);
        goto out;
    }
    if (review_decide(st, f, erp_url, &d, &res) != APBOT_OK) {
        fprintf(stderr, "apbot resolve: internal error\n");
        goto out;
    }
    text_escape_into(msg, sizeof(msg), res.message, 0);
    switch (res.verdict) {
    case REVIEW_DONE:
        printf("%s\n", msg);
        status = CLI_EXIT_OK;
        break;
    case REVIEW_INVALID:
        fprintf(stderr, "apbot resolve: %s\n", msg);
        status = CLI_EXIT_USAGE;
        break;
    case REVIEW_REFUSED:
        if (res.verify.verdict == REVIEW_ABSENT && !force)
            fprintf(stderr,
                    "apbot resolve: refused: %s; if you are sure, repeat with --force "
                    "REASON\n",
                    msg);
        else
            fprintf(stderr, "apbot resolve: refused: %s\n", msg);
        print_exchanges(&res.verify);
        status = CLI_EXIT_REFUSED;
        break;
    case REVIEW_UNVERIFIABLE:
        fprintf(stderr, "apbot resolve: %s\n", msg);
        print_exchanges(&res.verify);
        status = CLI_EXIT_ERROR;
        break;
    case REVIEW_FAILED:
        fprintf(stderr, "apbot resolve: %s\n", msg);
        status = CLI_EXIT_ERROR;
        break;
    }
out:
    review_result_done(&res);
    store_close(st);
    flow_free(f);
    free(flow_err);
    return status;
}
