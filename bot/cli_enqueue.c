/*
 * cli_enqueue.c - `apbot enqueue`. Placeholder until its module lands; the owner replaces this file.
 */
#include "apbot/cli.h"

#include <stdio.h>

int cli_enqueue(const struct cli_ctx *ctx, int argc, char **argv)
{
    (void)ctx;
    (void)argc;
    (void)argv;
    fprintf(stderr, "apbot enqueue: not yet implemented\n");
    return CLI_EXIT_ERROR;
}
