/*
 * cli_migrate.c - `apbot migrate --from SRC --to DST`: moves a whole queue (items, every
 * audit event and piece of evidence, the late-commit observations) from one store to
 * another, typically from the embedded SQLite file to a shared PostgreSQL queue.
 *
 * The copy is store_copy(): one transaction on the target, which must be empty; the rows per
 * table, the items per state and the audit chain's head (the chain is carried, hashes and
 * all: `apbot audit verify` on the target checks the same chain) are compared before the
 * target commits and again after.
 * Refused while a runner holds a live lease on the source (stop every runner first), and
 * for a --from/--to carrying a password (it would show in `ps`; use PGPASSWORD, ~/.pgpass or
 * a service file). Prints both tallies side by side. Exit 0 copied and verified, 1 error,
 * 2 usage, 3 refused (target not empty, live leases, unknown states).
 */
#include "cli.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "apbot/clock.h"
#include "apbot/error.h"
#include "apbot/machine.h"
#include "apbot/store.h"

static void migrate_usage(FILE *out)
{
    fprintf(out,
            "usage: apbot migrate --from SRC --to DST\n"
            "  copies a whole queue (items, events, evidence) into an empty one and verifies\n"
            "  the counts per table and per state; e.g. --from apbot.db --to\n"
            "  postgresql://apbot@db1/ap (credentials from PGPASSWORD, ~/.pgpass or a service\n"
            "  file, never in the URI). Stop every runner first.\n");
}

struct lease_scan {
    struct apbot_now now;
    int64_t live;
    int64_t first_id;
    char owner[128];
};

static int scan_lease(void *ctx, const struct store_item *it)
{
    struct lease_scan *s = ctx;
    if (store_lease_live(it, &s->now)) {
        if (!s->live++) {
            s->first_id = it->id;
            snprintf(s->owner, sizeof(s->owner), "%s", it->lease_owner);
        }
    }
    return 0;
}

static void print_tally(const struct store_tally *a, const struct store_tally *b)
{
    printf("%-20s %12s %12s\n", "", "source", "target");
    printf("%-20s %12" PRId64 " %12" PRId64 "\n", "items", a->items, b->items);
    for (int s = 0; s < MACHINE_STATE__COUNT; s++)
        printf("  %-18s %12" PRId64 " %12" PRId64 "\n", machine_state_name((enum machine_state)s),
               a->by_state[s], b->by_state[s]);
    printf("%-20s %12" PRId64 " %12" PRId64 "\n", "events", a->events, b->events);
    printf("%-20s %12" PRId64 " %12" PRId64 "\n", "evidence", a->evidence, b->evidence);
    printf("%-20s %12" PRId64 " %12" PRId64 "\n", "late commits", a->late_commits, b->late_commits);
    printf("%-20s %12" PRId64 " %12" PRId64 "\n", "audit chain head", a->head_event_id,
           b->head_event_id);
}

int cli_migrate(const struct cli_ctx *ctx, int argc, char **argv)
{
    (void)ctx; /* --db is not used: both ends are named */
    const char *from = NULL, *to = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--from") == 0 && i + 1 < argc) {
            from = argv[++i];
        } else if (strcmp(argv[i], "--to") == 0 && i + 1 < argc) {
            to = argv[++i];
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            migrate_usage(stdout);
            return CLI_EXIT_OK;
        } else {
            fprintf(stderr, "apbot migrate: unexpected argument\n");
            migrate_usage(stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (!from || !*from || !to || !*to) {
        migrate_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    char from_shown[512], to_shown[512];
    store_path_display(from, from_shown, sizeof(from_shown));
    store_path_display(to, to_shown, sizeof(to_shown));
    if (store_path_has_password(from) || store_path_has_password(to)) {
        fprintf(stderr, "apbot migrate: a password on the command line shows in `ps`: give it "
                        "through PGPASSWORD, ~/.pgpass or a service file\n");
        return CLI_EXIT_USAGE;
    }
    if (store_path_is_file(from) && access(from, F_OK) != 0) {
        fprintf(stderr, "apbot migrate: no queue database at %s\n", from_shown);
        return CLI_EXIT_ERROR;
    }
    struct store *src = NULL, *dst = NULL;
    char err[APBOT_ERR_LEN];
    int ret = CLI_EXIT_ERROR;
    if (store_open(from, &src, err, sizeof(err)) != APBOT_OK) {
        fprintf(stderr, "apbot migrate: %s\n", err);
        goto out;
    }
    /* A runner still working on the source would keep changing what is being copied. */
    struct lease_scan scan = {.live = 0};
    apbot_clock_now(&scan.now);
    if (store_each(src, MACHINE_STATE_INVALID, scan_lease, &scan, err, sizeof(err)) != APBOT_OK) {
        fprintf(stderr, "apbot migrate: %s\n", err);
        goto out;
    }
    if (scan.live) {
        fprintf(stderr,
                "apbot migrate: %" PRId64 " item(s) leased by a runner (first #%" PRId64
                " by %s): stop every runner on %s first\n",
                scan.live, scan.first_id, scan.owner, from_shown);
        ret = CLI_EXIT_REFUSED;
        goto out;
    }
    if (store_open(to, &dst, err, sizeof(err)) != APBOT_OK) {
        fprintf(stderr, "apbot migrate: %s\n", err);
        goto out;
    }
    struct store_tally copied;
    int rc = store_copy(src, dst, &copied, err, sizeof(err));
    if (rc != APBOT_OK) {
        fprintf(stderr, "apbot migrate: %s\n", err);
        ret = rc == APBOT_E_STATE ? CLI_EXIT_REFUSED : CLI_EXIT_ERROR;
        goto out;
    }
    struct store_tally source;
    if (store_tally(src, &source, err, sizeof(err)) != APBOT_OK) {
        fprintf(stderr, "apbot migrate: %s\n", err);
        goto out;
    }
    printf("migrated %s (%s) to %s (%s)\n", from_shown, store_backend(src), to_shown,
           store_backend(dst));
    print_tally(&source, &copied);
    char head[2 * STORE_HASH_LEN + 1];
    store_audit_hex(copied.head_hash, head);
    printf("verified: every table and every state has the same count on both sides, and the\n"
           "audit chain the same head (carried as it is): %" PRId64 ":%s\n",
           copied.head_event_id, head);
    ret = fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_ERROR;
out:
    store_close(dst);
    store_close(src);
    return ret;
}
