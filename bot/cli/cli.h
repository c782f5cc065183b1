/*
 * cli.h - the apbot subcommands. main.c parses the global options and dispatches; each
 * command lives in bot/cli/cli_<name>.c, parses its own options from argv (argv[0] is the
 * command name) and returns one of the exit codes below.
 */
#ifndef APBOT_CLI_H
#define APBOT_CLI_H

#include <stdbool.h>

/* Exit codes, documented in `apbot --help` and the README. Keep the two in step. */
enum cli_exit {
    CLI_EXIT_OK = 0,         /* done, nothing to report */
    CLI_EXIT_ERROR = 1,      /* generic failure (database, file, ERP unusable for a command) */
    CLI_EXIT_USAGE = 2,      /* bad command line */
    CLI_EXIT_REFUSED = 3,    /* enqueue: some input refused or conflicting; resolve: refused;
                              * reviewer: the login is taken or unknown */
    CLI_EXIT_SYSTEMIC = 4,   /* run: stopped by the circuit breaker (ERP unusable) */
    CLI_EXIT_DRIFT = 5,      /* report: drift found between the queue and the ERP */
    CLI_EXIT_UNBALANCED = 6, /* report: items do not balance */
    CLI_EXIT_TAMPERED = 7,   /* audit verify: the audit chain is broken (events changed,
                              * deleted or reordered, or the kept head is not in it) */
    CLI_EXIT_QUEUE = 8       /* run: the queue stayed unavailable past --queue-outage-max */
};

struct cli_ctx {
    const char *db_path; /* --db, APBOT_DB or ./apbot.db */
    const char *erp_url; /* --erp or APBOT_ERP_URL; NULL means the flow's default */
};

int cli_enqueue(const struct cli_ctx *ctx, int argc, char **argv);
int cli_status(const struct cli_ctx *ctx, int argc, char **argv);
int cli_list(const struct cli_ctx *ctx, int argc, char **argv);
int cli_run(const struct cli_ctx *ctx, int argc, char **argv);
int cli_flow(const struct cli_ctx *ctx, int argc, char **argv);
int cli_report(const struct cli_ctx *ctx, int argc, char **argv);
int cli_review(const struct cli_ctx *ctx, int argc, char **argv);
int cli_resolve(const struct cli_ctx *ctx, int argc, char **argv);
int cli_reviewer(const struct cli_ctx *ctx, int argc, char **argv);
int cli_serve(const struct cli_ctx *ctx, int argc, char **argv);
int cli_migrate(const struct cli_ctx *ctx, int argc, char **argv);
int cli_audit(const struct cli_ctx *ctx, int argc, char **argv);

/*
 * Whether argv[*i] is option name with a value, as "--name VALUE" (*i then moves onto the
 * value) or "--name=VALUE"; *ret is the value. False for another option, or for "--name" as
 * the last word (incomplete).
 */
bool cli_option(int argc, char **argv, int *i, const char *name, const char **ret);

#endif
