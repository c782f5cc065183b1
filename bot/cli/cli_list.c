/*
 * cli_list.c - `apbot list --state STATE [--json] [--limit N]`: the items in one state (or
 * `all`), oldest first.
 *
 * JSON is an array of the one item object every command writes (review_item_json; documented
 * in docs/report.md), written one element at a time so memory stays bounded however long the
 * list. The human form is a fixed-width table; texts from invoices are escaped (text.h).
 */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "apbot/error.h"
#include "apbot/machine.h"
#include "apbot/money.h"
#include "apbot/review.h"
#include "apbot/store.h"
#include "apbot/text.h"

#define LIST_STOP 1000 /* callback code: stdout failed */

struct list_ctx {
    bool json;
    int64_t n;
    int64_t now; /* for age_s */
};

static void list_usage(FILE *out)
{
    fprintf(out, "usage: apbot list --state STATE [--json] [--limit N]\n  STATE is one of:");
    for (int s = 0; s < MACHINE_STATE__COUNT; s++)
        fprintf(out, " %s", machine_state_name((enum machine_state)s));
    fprintf(out, " all\n");
}

static int list_json_item(struct list_ctx *lc, const struct store_item *it)
{
    json_t *o = review_item_json(it, lc->now);
    if (!o)
        return LIST_STOP;
    fputs(lc->n ? ",\n  " : "[\n  ", stdout);
    int rc = json_dumpf(o, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return rc ? LIST_STOP : 0;
}

/* Escapes untrusted text (control characters, escape sequences) and cuts it to width bytes
 * for the table ("..." when cut). */
static void cell(char *buf, size_t len, const char *s, size_t width)
{
    text_escape_into(buf, len < width + 1 ? len : width + 1, s ? s : "", 0);
}

static int list_item(void *ctx, const struct store_item *it)
{
    struct list_ctx *lc = ctx;
    char total[48];
    if (money_format_plain(it->total, it->exponent, total, sizeof(total)) != APBOT_OK)
        snprintf(total, sizeof(total), "?");
    int rc = 0;
    if (lc->json) {
        rc = list_json_item(lc, it);
    } else {
        char vendor[17], number[21], note[41];
        cell(vendor, sizeof(vendor), it->vendor_id, 16);
        cell(number, sizeof(number), it->invoice_number, 20);
        cell(note, sizeof(note), it->erp_doc ? it->erp_doc : it->reason, 40);
        if (lc->n == 0)
            printf("%-7s %-18s %-16s %-20s %-11s %-10s %-3s %15s  %s\n", "ID", "STATE", "VENDOR",
                   "INVOICE", "TYPE", "DATE", "CUR", "TOTAL", "ERP DOC / REASON");
        printf("%-7" PRId64 " %-18s %-16s %-20s %-11s %-10s %-3s %15s  %s\n", it->id,
               machine_state_name(it->state), vendor, number, it->doc_type, it->issue_date,
               it->currency, total, note);
    }
    if (ferror(stdout))
        rc = LIST_STOP;
    lc->n++;
    return rc;
}

int cli_list(const struct cli_ctx *ctx, int argc, char **argv)
{
    struct list_ctx lc = {.now = store_now_ms()};
    const char *state_name = NULL;
    int64_t limit = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--json") == 0) {
            lc.json = true;
        } else if (strcmp(a, "--state") == 0 && i + 1 < argc) {
            state_name = argv[++i];
        } else if (strncmp(a, "--state=", 8) == 0) {
            state_name = a + 8;
        } else if ((strcmp(a, "--limit") == 0 && i + 1 < argc) || strncmp(a, "--limit=", 8) == 0) {
            const char *v = a[7] == '=' ? a + 8 : argv[++i];
            char *end = NULL;
            errno = 0;
            long long n = strtoll(v, &end, 10);
            if (errno || end == v || *end || n < 0) {
                fprintf(stderr, "apbot list: --limit wants a count, not '%s'\n", v);
                return CLI_EXIT_USAGE;
            }
            limit = n;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            list_usage(stdout);
            return CLI_EXIT_OK;
        } else {
            fprintf(stderr, "apbot list: unexpected argument %s\n", a);
            list_usage(stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (!state_name) {
        fprintf(stderr, "apbot list: --state is required\n");
        list_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    enum machine_state state = MACHINE_STATE_INVALID; /* = all */
    if (strcmp(state_name, "all") != 0) {
        state = machine_state_from_name(state_name);
        if (state == MACHINE_STATE_INVALID) {
            fprintf(stderr, "apbot list: unknown state '%s'\n", state_name);
            list_usage(stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (store_path_is_file(ctx->db_path) && access(ctx->db_path, F_OK) != 0) {
        fprintf(stderr, "apbot list: no queue database at %s\n", ctx->db_path);
        return CLI_EXIT_ERROR;
    }

    struct store *st = NULL;
    char err[APBOT_ERR_LEN];
    int ret = CLI_EXIT_ERROR;
    if (store_open(ctx->db_path, &st, err, sizeof(err)) != APBOT_OK) {
        fprintf(stderr, "apbot list: %s\n", err);
        goto out;
    }
    int rc = store_each_limit(st, state, limit, list_item, &lc, err, sizeof(err));
    if (rc == LIST_STOP) {
        fprintf(stderr, "apbot list: cannot write the list\n");
        goto out;
    }
    if (rc) {
        fprintf(stderr, "apbot list: %s\n", err);
        goto out;
    }
    if (lc.json)
        fputs(lc.n ? "\n]\n" : "[]\n", stdout);
    else if (lc.n == 0)
        printf("no items in state %s\n", state_name);
    ret = fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_ERROR;
out:
    store_close(st);
    return ret;
}
