/*
 * cli_flow.c - `apbot flow check FILE...`, `apbot flow trace FLOW --invoice FILE[#N]` and
 * `apbot flow record HAR --invoice FILE[#N] --out FLOW`.
 *
 * check loads each flow exactly as `apbot run` would (schema, then the semantic checks) and
 * prints "FILE: ok" or every problem found, one per line as "FILE:LINE: message". Exit 0 when
 * every file is fine, CLI_EXIT_ERROR otherwise. Needs no database and no ERP.
 *
 * trace runs one invoice through a flow against an ERP - the login, the lookup, then the post
 * steps (or the follow-up steps on a saved draft the lookup found) - and prints every exchange
 * for the flow's author (trace_run, bot/office/trace_run.c); this file reads its options and
 * turns how it ended into the exit code.
 *
 * record writes a draft flow from a HAR file the browser's developer tools saved and the
 * sample invoice typed into that session (record_run, bot/record/record.c); this file reads
 * its options and the credentials from the environment.
 */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/flow.h"
#include "apbot/mem.h"
#include "apbot/record.h"
#include "apbot/secret.h"
#include "apbot/text.h"
#include "apbot/trace.h"

#define CLI_FLOW_ERR_LEN (32 * 1024)

static void cli_flow_usage(FILE *out)
{
    fprintf(out,
            "usage: apbot flow check FILE...\n"
            "       apbot flow trace FLOW --invoice FILE[#N] [--erp URL] [--dry-run]\n"
            "                        [--vendors MAP.csv] [--pages]\n"
            "       apbot flow record HAR --invoice FILE[#N] --out FLOW [--key-field NAME]\n"
            "                        [--vendors MAP.csv] [--name NAME] [--force]\n"
            "\n"
            "check: "
            "Validates flow files against the schema (flows/flow.rng) and checks their meaning:\n"
            "${...} variables and formatters, PCRE2 patterns, XPath, status specs, a completed\n"
            "rule with a (?<doc>...) group, exactly one step with commits=\"true\", policy\n"
            "numbers. Prints \"FILE: ok\" or every problem as \"FILE:LINE: message\".\n"
            "\n"
            "exit codes: 0 every file is valid, 1 some file has problems, 2 usage error\n"
            "\n"
            "trace: runs one invoice through the flow against the ERP and explains every\n"
            "exchange (see apbot flow trace --help). Start with --dry-run.\n"
            "\n"
            "record: writes a draft flow from a session recorded in the browser (a HAR file)\n"
            "and the sample invoice typed into it (see apbot flow record --help).\n");
}

static int cli_flow_check(int argc, char **argv)
{
    char *err = apbot_xmalloc(CLI_FLOW_ERR_LEN);
    int status = CLI_EXIT_OK, files = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            cli_flow_usage(stdout);
            free(err);
            return CLI_EXIT_OK;
        }
    }
    for (int i = 1; i < argc; i++) {
        struct flow *f = NULL;
        const char *path = argv[i];

        if (strcmp(path, "--") == 0)
            continue;
        if (path[0] == '-' && path[1] != '\0') {
            fprintf(stderr, "apbot flow check: unknown option %s\n", path);
            cli_flow_usage(stderr);
            free(err);
            return CLI_EXIT_USAGE;
        }
        files++;
        err[0] = '\0';
        if (flow_load(path, &f, err, CLI_FLOW_ERR_LEN) == APBOT_OK) {
            printf("%s: ok\n", path);
            flow_free(f);
        } else {
            printf("%s\n", err[0] ? err : "invalid flow");
            status = CLI_EXIT_ERROR;
        }
    }
    free(err);
    if (files == 0) {
        cli_flow_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    fflush(stdout);
    return status;
}

/* ---- flow trace -------------------------------------------------------------------------- */

static void cli_trace_usage(FILE *out)
{
    fprintf(out,
            "usage: apbot [--erp URL] flow trace FLOW --invoice FILE[#N] [--erp URL] [--dry-run]\n"
            "                                   [--vendors MAP.csv] [--pages]\n"
            "\n"
            "Runs one invoice through the flow against the ERP and explains every exchange,\n"
            "grouped by step: method, URL, status, the form found, every control submitted\n"
            "with where its value came from (page default, the flow's template, an option\n"
            "chosen by value or label, a control added), the button pressed, the rule that\n"
            "matched and why, the values captured, the lookup's hits and verdict.\n"
            "Order: log in, look the key up, then - only when the lookup proves the invoice\n"
            "absent - the post steps (or, for a saved draft it finds, the follow-up steps).\n"
            "  --invoice FILE[#N]  CSV, UBL, CII or Factur-X PDF, as enqueue reads them; #N\n"
            "                      picks the N-th invoice of the file (default the first)\n"
            "  --erp URL           ERP base URL (default $APBOT_ERP_URL or the flow's)\n"
            "  --dry-run           stop right before the committing step's request: nothing\n"
            "                      is booked (the steps before it run: they cannot book)\n"
            "  --vendors MAP.csv   map seller identifiers to ERP vendor ids, as enqueue does\n"
            "  --pages             print the page text of every answer (default: only of\n"
            "                      answers that went wrong)\n"
            "WITHOUT --dry-run THE INVOICE IS REALLY POSTED into the ERP (use a test system).\n"
            "Never opens the queue database. Credentials: APBOT_ERP_USER, APBOT_ERP_PASSWORD\n"
            "(never printed).\n"
            "Exit: 0 completed (booked and confirmed, already in the ERP, or a dry run that\n"
            "reached the committing step), 3 rejected (a business exception: the ERP refused\n"
            "the invoice, or a value it cannot take), 1 anything else (not sent, unknown,\n"
            "lookup failed, login refused, ...), 2 usage.\n");
}

/* Splits "FILE#N": a trailing "#digits" picks the N-th invoice. Returns false for a bad N. */
static bool trace_split_invoice(const char *arg, char **ret_path, long *ret_n)
{
    const char *hash = strrchr(arg, '#');
    *ret_n = 1;
    if (hash && hash[1]) {
        char *end = NULL;
        errno = 0;
        long n = strtol(hash + 1, &end, 10);
        if (errno || !end || *end || hash[1] < '0' || hash[1] > '9')
            goto plain;
        if (n < 1 || n > 1000000)
            return false;
        *ret_n = n;
        *ret_path = apbot_xstrndup(arg, (size_t)(hash - arg));
        return **ret_path != '\0';
    }
plain:
    *ret_path = apbot_xstrdup(arg);
    return **ret_path != '\0';
}

static int trace_exit(enum trace_end e)
{
    switch (e) {
    case TRACE_END_OK:
        return CLI_EXIT_OK;
    case TRACE_END_REJECTED:
        return CLI_EXIT_REFUSED;
    case TRACE_END_FAILED:
    case TRACE_END__COUNT:
        break;
    }
    return CLI_EXIT_ERROR;
}

static int cli_flow_trace(const struct cli_ctx *ctx, int argc, char **argv)
{
    const char *flow_path = NULL, *invoice_arg = NULL, *vendors_path = NULL;
    const char *erp_url = ctx->erp_url;
    bool dry_run = false, pages = false;
    char *inv_path = NULL;
    long inv_n = 1;
    char t1[1024];

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            cli_trace_usage(stdout);
            return CLI_EXIT_OK;
        } else if (cli_option(argc, argv, &i, "--invoice", &invoice_arg)) {
        } else if (cli_option(argc, argv, &i, "--erp", &erp_url)) {
        } else if (cli_option(argc, argv, &i, "--vendors", &vendors_path)) {
        } else if (strcmp(a, "--dry-run") == 0) {
            dry_run = true;
        } else if (strcmp(a, "--pages") == 0) {
            pages = true;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "apbot flow trace: unknown or incomplete option '%s'\n",
                    text_escape_into(t1, sizeof(t1), a, 0));
            cli_trace_usage(stderr);
            return CLI_EXIT_USAGE;
        } else if (!flow_path) {
            flow_path = a;
        } else {
            fprintf(stderr, "apbot flow trace: one flow at a time ('%s' is extra)\n",
                    text_escape_into(t1, sizeof(t1), a, 0));
            return CLI_EXIT_USAGE;
        }
    }
    if (!flow_path || !invoice_arg) {
        fprintf(stderr, "apbot flow trace: %s\n",
                !flow_path ? "FLOW is required" : "--invoice FILE[#N] is required");
        cli_trace_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!trace_split_invoice(invoice_arg, &inv_path, &inv_n)) {
        fprintf(stderr, "apbot flow trace: --invoice wants FILE or FILE#N with N from 1\n");
        free(inv_path);
        return CLI_EXIT_USAGE;
    }

    struct trace_request rq = {
        .flow_path = flow_path,
        .invoice_path = inv_path,
        .invoice_n = inv_n,
        .invoice_label = invoice_arg,
        .vendors_path = vendors_path,
        .erp_url = erp_url,
        .dry_run = dry_run,
        .pages = pages,
    };
    int status = trace_exit(trace_run(&rq, stdout, stderr));
    free(inv_path);
    return status;
}

/* ---- flow record ------------------------------------------------------------------------- */

static void cli_record_usage(FILE *out)
{
    fprintf(out,
            "usage: apbot flow record HAR --invoice FILE[#N] --out FLOW [--key-field NAME]\n"
            "                         [--vendors MAP.csv] [--name NAME] [--force]\n"
            "\n"
            "Writes a draft flow from one session recorded in the browser's developer tools\n"
            "(Network tab, \"Preserve log\" on, \"Save all as HAR\"): log in, search for a\n"
            "reference, enter the sample invoice with its values in the ERP's own formats and\n"
            "that reference, save it (and approve it), search for it again, open the day's\n"
            "list. Prints what it decided and every open decision with the HAR entry it came\n"
            "from; each open decision is a <todo> in the draft, which apbot flow check, trace\n"
            "and run refuse until a person has answered it. docs/recording.md is the guide.\n"
            "  --invoice FILE[#N]  the sample invoice typed into the session (any format\n"
            "                      enqueue reads; #N picks the N-th, default the first)\n"
            "  --out FLOW          the draft to write (never over an existing file without\n"
            "                      --force)\n"
            "  --key-field NAME    the field (form control or JSON member) the reference was\n"
            "                      typed into: apbot writes its key there (default: the value\n"
            "                      typed into the invoice and searched for later)\n"
            "  --vendors MAP.csv   map seller identifiers to ERP vendor ids, as enqueue does\n"
            "  --name NAME         the flow's name (default: FLOW's file name)\n"
            "THE HAR HOLDS THE PASSWORD, COOKIES AND TOKENS: keep it as safe as the password.\n"
            "None of them is copied into the draft. APBOT_ERP_USER and APBOT_ERP_PASSWORD (or\n"
            "their _FILE forms, or systemd credentials), when set to the login you recorded\n"
            "with, tell the login apart for sure.\n"
            "Exit: 0 the draft was written and checks, 3 it was written with open decisions,\n"
            "1 nothing written (a HAR or an invoice that cannot be read, an existing FLOW),\n"
            "2 usage.\n");
}

static int cli_flow_record(int argc, char **argv)
{
    const char *har = NULL, *invoice_arg = NULL, *out_path = NULL, *key_field = NULL;
    const char *vendors_path = NULL, *name = NULL;
    bool force = false;
    char *inv_path = NULL;
    long inv_n = 1;
    char t1[1024];

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            cli_record_usage(stdout);
            return CLI_EXIT_OK;
        } else if (cli_option(argc, argv, &i, "--invoice", &invoice_arg)) {
        } else if (cli_option(argc, argv, &i, "--out", &out_path)) {
        } else if (cli_option(argc, argv, &i, "--key-field", &key_field)) {
        } else if (cli_option(argc, argv, &i, "--vendors", &vendors_path)) {
        } else if (cli_option(argc, argv, &i, "--name", &name)) {
        } else if (strcmp(a, "--force") == 0) {
            force = true;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "apbot flow record: unknown or incomplete option '%s'\n",
                    text_escape_into(t1, sizeof(t1), a, 0));
            cli_record_usage(stderr);
            return CLI_EXIT_USAGE;
        } else if (!har) {
            har = a;
        } else {
            fprintf(stderr, "apbot flow record: one HAR at a time ('%s' is extra)\n",
                    text_escape_into(t1, sizeof(t1), a, 0));
            return CLI_EXIT_USAGE;
        }
    }
    if (!har || !invoice_arg || !out_path) {
        fprintf(stderr, "apbot flow record: %s\n",
                !har           ? "HAR is required"
                : !invoice_arg ? "--invoice FILE[#N] is required"
                               : "--out FLOW is required");
        cli_record_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!trace_split_invoice(invoice_arg, &inv_path, &inv_n)) {
        fprintf(stderr, "apbot flow record: --invoice wants FILE or FILE#N with N from 1\n");
        free(inv_path);
        return CLI_EXIT_USAGE;
    }
    /* the credentials as every command gets them (a file, systemd's, the environment) */
    char *user = secret_dup(SECRET_ERP_USER), *password = secret_dup(SECRET_ERP_PASSWORD);
    struct record_request rq = {
        .har_path = har,
        .invoice_path = inv_path,
        .invoice_n = inv_n,
        .invoice_label = invoice_arg,
        .vendors_path = vendors_path,
        .key_field = key_field,
        .out_path = out_path,
        .name = name,
        .user = user,
        .password = password,
        .force = force,
    };
    struct record_result res;
    int rc = record_run(&rq, &res, stdout, stderr);
    secret_free(user);
    secret_free(password);
    free(inv_path);
    fflush(stdout);
    if (rc != APBOT_OK || !res.written)
        return CLI_EXIT_ERROR;
    return res.open ? CLI_EXIT_REFUSED : CLI_EXIT_OK;
}

int cli_flow(const struct cli_ctx *ctx, int argc, char **argv)
{
    if (argc < 2) {
        cli_flow_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        cli_flow_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(argv[1], "check") == 0)
        return cli_flow_check(argc - 1, argv + 1);
    if (strcmp(argv[1], "trace") == 0)
        return cli_flow_trace(ctx, argc - 1, argv + 1);
    if (strcmp(argv[1], "record") == 0)
        return cli_flow_record(argc - 1, argv + 1);
    fprintf(stderr, "apbot flow: unknown subcommand %s\n", argv[1]);
    cli_flow_usage(stderr);
    return CLI_EXIT_USAGE;
}
