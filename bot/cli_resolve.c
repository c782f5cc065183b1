/*
 * cli_resolve.c - `apbot resolve`. Placeholder until its module lands; the owner replaces this file.
 */
#include "apbot/cli.h"

#include <stdio.h>

int cli_resolve(const struct cli_ctx *ctx, int argc, char **argv)
{
    (void)ctx;
    (void)argc;
    (void)argv;
    fprintf(stderr, "apbot resolve: not yet implemented\n");
    return CLI_EXIT_ERROR;
}
