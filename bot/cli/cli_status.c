/*
 * cli_status.c - `apbot status [--json]`: how many items are in each state, how old the
 * oldest pending one is and how deep the manual-review queue is.
 *
 * The figures come from store_counts(): one indexed aggregate, so the command stays fast on
 * a queue of 100,000 items. JSON (for scripts and monitoring) is one object keyed by state
 * name plus `total`, `oldest_pending_age_s` (null when nothing is pending) and
 * `review_depth`, and with --flow the settle delay in force, the longest late commit and the
 * method that measures it (`settle_ms`, `max_late_commit_ms`, `settle_method`); the human
 * form is a small table.
 */
#include "cli.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "apbot/error.h"
#include "apbot/flow.h"
#include "apbot/machine.h"
#include "apbot/runner.h"
#include "apbot/store.h"

static void status_usage(FILE *out)
{
    fprintf(out, "usage: apbot status [--json] [--flow FILE]\n"
                 "  counts per state, the oldest pending item's age, the manual-review depth;\n"
                 "  with --flow also the settle delay in force for that ERP, the longest late\n"
                 "  commit it was seen to make and how late commits are measured for it\n"
                 "  (JSON: settle_ms, max_late_commit_ms, settle_method: booking-time when\n"
                 "  its lookup shows a booking time, else lookup-bound)\n");
}

/* "3d 4h", "2h 5m", "7m 3s", "12s". */
static void format_age(int64_t s, char *buf, size_t len)
{
    if (s >= 86400)
        snprintf(buf, len, "%" PRId64 "d %" PRId64 "h", s / 86400, s % 86400 / 3600);
    else if (s >= 3600)
        snprintf(buf, len, "%" PRId64 "h %" PRId64 "m", s / 3600, s % 3600 / 60);
    else if (s >= 60)
        snprintf(buf, len, "%" PRId64 "m %" PRId64 "s", s / 60, s % 60);
    else
        snprintf(buf, len, "%" PRId64 "s", s);
}

/* The flow's settle delay as runs apply it: the policy, raised by observed late commits. */
struct settle_view {
    bool known;
    int64_t settle_ms, max_late_ms, policy_ms;
    enum runner_settle_method method;
};

static int print_json(const struct store_counts *c, int64_t age_s, const struct settle_view *sv)
{
    json_t *o = json_object();
    if (!o)
        return -1;
    int bad = 0;
    for (int s = 0; s < MACHINE_STATE__COUNT; s++)
        bad |= json_object_set_new(o, machine_state_name((enum machine_state)s),
                                   json_integer(c->by_state[s]));
    bad |= json_object_set_new(o, "total", json_integer(c->total));
    bad |= json_object_set_new(o, "oldest_pending_age_s",
                               age_s >= 0 ? json_integer(age_s) : json_null());
    bad |= json_object_set_new(o, "review_depth", json_integer(c->by_state[MACHINE_MANUAL_REVIEW]));
    bad |=
        json_object_set_new(o, "settle_ms", sv->known ? json_integer(sv->settle_ms) : json_null());
    bad |= json_object_set_new(o, "max_late_commit_ms",
                               sv->known ? json_integer(sv->max_late_ms) : json_null());
    bad |= json_object_set_new(o, "settle_method",
                               sv->known ? json_string(runner_settle_method_name(sv->method))
                                         : json_null());
    if (!bad)
        bad = json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!bad)
        putchar('\n');
    json_decref(o);
    return bad ? -1 : 0;
}

static void print_table(const struct store_counts *c, int64_t age_s, const struct settle_view *sv)
{
    printf("%-20s %10s\n", "state", "items");
    for (int s = 0; s < MACHINE_STATE__COUNT; s++)
        printf("%-20s %10" PRId64 "\n", machine_state_name((enum machine_state)s), c->by_state[s]);
    printf("%-20s %10" PRId64 "\n", "total", c->total);
    if (age_s >= 0) {
        char age[32];
        format_age(age_s, age, sizeof(age));
        printf("oldest pending: %s\n", age);
    } else {
        printf("oldest pending: none\n");
    }
    printf("manual-review depth: %" PRId64 "\n", c->by_state[MACHINE_MANUAL_REVIEW]);
    if (sv->known) {
        printf("settle delay in force: %" PRId64 " ms", sv->settle_ms);
        if (sv->max_late_ms > 0)
            printf(" (the flow says %" PRId64 " ms; the ERP committed up to %" PRId64
                   " ms after apbot gave up)",
                   sv->policy_ms, sv->max_late_ms);
        printf("\nlate commits measured by: %s\n",
               sv->method == RUNNER_SETTLE_BOOKING_TIME
                   ? "booking-time (the booking time the lookup shows)"
                   : "lookup-bound (no booking time: a lookup that missed the document, then "
                     "one that found it)");
    }
}

int cli_status(const struct cli_ctx *ctx, int argc, char **argv)
{
    bool json = false;
    const char *flow_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "--flow") == 0 && i + 1 < argc) {
            flow_path = argv[++i];
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            status_usage(stdout);
            return CLI_EXIT_OK;
        } else {
            fprintf(stderr, "apbot status: unexpected argument %s\n", argv[i]);
            status_usage(stderr);
            return CLI_EXIT_USAGE;
        }
    }
    /* Looking must not create: a mistyped --db is an error, not an empty queue. */
    if (store_path_is_file(ctx->db_path) && access(ctx->db_path, F_OK) != 0) {
        fprintf(stderr, "apbot status: no queue database at %s\n", ctx->db_path);
        return CLI_EXIT_ERROR;
    }
    struct store *st = NULL;
    struct store_counts c;
    char err[APBOT_ERR_LEN];
    int ret = CLI_EXIT_ERROR;
    if (store_open(ctx->db_path, &st, err, sizeof(err)) != APBOT_OK ||
        store_counts(st, &c, err, sizeof(err)) != APBOT_OK) {
        fprintf(stderr, "apbot status: %s\n", err);
        goto out;
    }
    struct settle_view sv = {0};
    if (flow_path) {
        struct flow *f = NULL;
        if (flow_load(flow_path, &f, err, sizeof(err)) != APBOT_OK) {
            fprintf(stderr, "apbot status: flow %s: %s\n", flow_path, err);
            goto out;
        }
        sv.settle_ms = runner_settle_of(st, f, &sv.policy_ms, &sv.max_late_ms);
        enum runner_settle_method method = runner_settle_method(f);
        flow_free(f);
        sv.known = true;
        sv.method = method;
    }
    int64_t age_s = -1;
    if (c.oldest_pending_at > 0) {
        age_s = (store_now_ms() - c.oldest_pending_at) / 1000;
        if (age_s < 0)
            age_s = 0;
    }
    if (json) {
        if (print_json(&c, age_s, &sv) != 0) {
            fprintf(stderr, "apbot status: cannot write JSON\n");
            goto out;
        }
    } else {
        print_table(&c, age_s, &sv);
    }
    ret = fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_ERROR;
out:
    store_close(st);
    return ret;
}
