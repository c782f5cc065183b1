/*
 * main.c - the apbot command line: global options, dispatch, exit code. Each command lives in
 * bot/cli/cli_<name>.c over the library (apbot_core) it calls.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/apbot.h"
#include "apbot/error.h"
#include "apbot/secret.h"
#include "apbot/store.h"
#include "cli.h"

static const struct {
    const char *name;
    int (*fn)(const struct cli_ctx *, int, char **);
    const char *summary;
} commands[] = {
    {"enqueue", cli_enqueue,
     "enqueue [--vendors MAP.csv] [--batch N] FILE...   queue CSV / UBL invoices"},
    {"run", cli_run,
     "run --flow FILE [--erp URL] [--until-empty] [--max-seconds N] [--concurrency N|auto]\n"
     "              [--quiet] [--log-format text|json] [--queue-outage-max SECONDS]"},
    {"status", cli_status, "status [--json]                      counts per state"},
    {"list", cli_list, "list --state STATE|all [--json] [--limit N]   items in one state"},
    {"review", cli_review,
     "review [ID] [--all] [--json] [--vendor TEXT] [--reason TEXT]   the manual-review queue"},
    {"resolve", cli_resolve,
     "resolve ID --posted DOC --flow FILE [--force REASON] | --requeue | --reject REASON\n"
     "              [--by NAME] [--note TEXT] [--expect-version V]"},
    {"reviewer", cli_reviewer,
     "reviewer add|passwd|set|remove|list [LOGIN] [--role viewer|reviewer] [--name TEXT]\n"
     "              [--file FILE]   who may sign in to the review page"},
    {"report", cli_report,
     "report --flow FILE [--erp URL] [--date YYYY-MM-DD] [--format text|csv|html|json] "
     "[--out FILE]"},
    {"serve", cli_serve,
     "serve --flow FILE [--listen 127.0.0.1:8470] [--erp URL] [--reviewers FILE]\n"
     "              [--trusted-proxy ADDR[,ADDR]] [--tls-cert FILE --tls-key FILE]   the review "
     "page"},
    {"flow", cli_flow,
     "flow check FILE...                   validate flows\n"
     "  apbot flow trace FLOW --invoice FILE[#N] [--erp URL] [--dry-run]   explain one post\n"
     "  apbot flow record HAR --invoice FILE[#N] --out FLOW [--key-field NAME]   a draft flow "
     "from a browser recording"},
    {"migrate", cli_migrate, "migrate --from FILE.db --to postgresql://...   move a queue"},
    {"audit", cli_audit,
     "audit verify [--json] [--head ID:SHA256]   check the audit trail's hash chain\n"
     "  apbot audit head [--date YYYY-MM-DD] [--json]   the chain's head at a day's end"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: apbot [--db PATH] [--erp URL] COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(out, "  apbot %s\n", commands[i].summary);
    fprintf(out,
            "\nglobal options:\n"
            "  --db PATH     queue: a SQLite file or a postgresql:// URI (default $APBOT_DB\n"
            "                or ./apbot.db); PostgreSQL passwords via PGPASSWORD or ~/.pgpass\n"
            "  --erp URL     ERP base URL (default $APBOT_ERP_URL or the flow's)\n"
            "  --help, --version\n"
            "\nenvironment: APBOT_ERP_USER, APBOT_ERP_PASSWORD (ERP credentials; never logged),\n"
            "  APBOT_REVIEWERS (serve, reviewer: the reviewers file), APBOT_REVIEW_PASSWORD\n"
            "  (serve without a reviewers file: one shared password)\n"
            "\nexit codes:\n"
            "  0  ok\n"
            "  1  error (database, file, ERP unusable for this command)\n"
            "  2  usage error\n"
            "  3  enqueue refused or found conflicting input; resolve refused; review or\n"
            "     resolve of an unknown item; flow trace: the invoice was rejected;\n"
            "     reviewer: the login is taken or unknown\n"
            "  4  run stopped by the circuit breaker (ERP unreachable, login refused,\n"
            "     entry form missing or changed); untouched items stay queued\n"
            "  5  report found drift (duplicates, missing, orphans, mismatches)\n"
            "  6  report does not balance\n"
            "  7  audit verify: the audit chain is broken (an event changed, deleted or\n"
            "     reordered, or the kept head is not in it)\n"
            "  8  run stopped because the queue stayed unavailable longer than\n"
            "     --queue-outage-max (a PostgreSQL server down, unreachable); every item is\n"
            "     where the queue last recorded it\n");
}

bool cli_option(int argc, char **argv, int *i, const char *name, const char **ret)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0)
        return false;
    if (a[n] == '=') {
        *ret = a + n + 1;
        return true;
    }
    if (a[n] != '\0' || *i + 1 >= argc)
        return false;
    *ret = argv[++*i];
    return true;
}

int main(int argc, char **argv)
{
    struct cli_ctx ctx = {.db_path = getenv("APBOT_DB"), .erp_url = getenv("APBOT_ERP_URL")};
    int i = 1;

    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return CLI_EXIT_OK;
        } else if (strcmp(argv[i], "--version") == 0) {
            printf("apbot %s\n", apbot_version());
            return CLI_EXIT_OK;
        } else if (strcmp(argv[i], "--db") == 0 && i + 1 < argc) {
            ctx.db_path = argv[++i];
        } else if (strncmp(argv[i], "--db=", 5) == 0) {
            ctx.db_path = argv[i] + 5;
        } else if (strcmp(argv[i], "--erp") == 0 && i + 1 < argc) {
            ctx.erp_url = argv[++i];
        } else if (strncmp(argv[i], "--erp=", 6) == 0) {
            ctx.erp_url = argv[i] + 6;
        } else {
            fprintf(stderr, "apbot: unknown option %s\n", argv[i]);
            usage(stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (!ctx.db_path || !*ctx.db_path)
        ctx.db_path = "apbot.db";
    /* A password given with --db would show in `ps` (APBOT_DB is the environment). */
    if (ctx.db_path != getenv("APBOT_DB") && store_path_has_password(ctx.db_path)) {
        fprintf(stderr, "apbot: --db must not carry a password (it shows in ps): use "
                        "PGPASSWORD, ~/.pgpass or a service file\n");
        return CLI_EXIT_USAGE;
    }
    if (i >= argc) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    for (size_t c = 0; c < sizeof(commands) / sizeof(commands[0]); c++) {
        if (strcmp(argv[i], commands[c].name) != 0)
            continue;
        /* Once, before any command starts a thread (apbot.h). */
        if (apbot_global_init() != APBOT_OK) {
            fprintf(stderr, "apbot: cannot initialise libcurl\n");
            return CLI_EXIT_ERROR;
        }
        /* The credentials, from files, systemd's credentials or the environment, read once
         * and taken out of the environment before anything can start a child (secret.h). */
        char err[APBOT_ERR_LEN];
        if (secret_load_all(err, sizeof(err)) != APBOT_OK) {
            fprintf(stderr, "apbot: %s\n", err);
            apbot_global_cleanup();
            return CLI_EXIT_ERROR;
        }
        int rc = commands[c].fn(&ctx, argc - i, argv + i);
        secret_forget_all();
        apbot_global_cleanup();
        return rc;
    }
    fprintf(stderr, "apbot: unknown command '%s'\n", argv[i]);
    usage(stderr);
    return CLI_EXIT_USAGE;
}
