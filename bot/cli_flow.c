/*
 * cli_flow.c - `apbot flow`. Placeholder until its module lands; the owner replaces this file.
 */
#include "apbot/cli.h"

#include <stdio.h>

int cli_flow(const struct cli_ctx *ctx, int argc, char **argv)
{
    (void)ctx;
    (void)argc;
    (void)argv;
    fprintf(stderr, "apbot flow: not yet implemented\n");
    return CLI_EXIT_ERROR;
}
