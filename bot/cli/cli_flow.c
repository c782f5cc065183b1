/*
 * cli_flow.c - `apbot flow check FILE...`: loads each flow exactly as `apbot run` would
 * (schema, then the semantic checks) and prints "FILE: ok" or every problem found, one per
 * line as "FILE:LINE: message". Exit 0 when every file is fine, CLI_EXIT_ERROR otherwise.
 * Needs no database and no ERP.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/flow.h"

#define CLI_FLOW_ERR_LEN (32 * 1024)

static void cli_flow_usage(FILE *out)
{
    fprintf(out,
            "usage: apbot flow check FILE...\n"
            "\n"
            "Validates flow files against the schema (flows/flow.rng) and checks their meaning:\n"
            "${...} variables and formatters, PCRE2 patterns, XPath, status specs, a completed\n"
            "rule with a (?<doc>...) group, exactly one step with commits=\"true\", policy\n"
            "numbers. Prints \"FILE: ok\" or every problem as \"FILE:LINE: message\".\n"
            "\n"
            "exit codes: 0 every file is valid, 1 some file has problems, 2 usage error\n");
}

static int cli_flow_check(int argc, char **argv)
{
    char *err = malloc(CLI_FLOW_ERR_LEN);
    int status = CLI_EXIT_OK, files = 0;

    if (!err)
        abort();
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

int cli_flow(const struct cli_ctx *ctx, int argc, char **argv)
{
    (void)ctx;
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
    fprintf(stderr, "apbot flow: unknown subcommand %s\n", argv[1]);
    cli_flow_usage(stderr);
    return CLI_EXIT_USAGE;
}
