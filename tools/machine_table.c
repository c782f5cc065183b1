/*
 * machine_table.c - prints the per-item state table as machine_next() implements it, as the
 * Markdown table docs/design.md shows between its machine-table markers. The document is not
 * written by hand: tests/t_design.sh fails when the two differ, and `make design-table`
 * writes this output into the document.
 *
 * Every (state, event) pair is asked under the default policy with one base set of counters
 * (the settle delay passed, one post made, no failed round, no transient failure) and with
 * each counter moved to the edge where machine.c decides differently: a row per distinct
 * answer, the condition that leads to it in the "when" column, in the order a reader checks
 * them ("otherwise" last). Pairs the machine refuses are left out (the exhaustive tests hold
 * every refusal); the event vocabulary follows the table.
 *
 * usage: machine-table   (prints to standard output; exit 0, or 1 if the machine misbehaves)
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "apbot/machine.h"

/* One way of holding the counters, and how the table says it. */
struct variant {
    const char *when;
    struct machine_counters c;
};

static const char *delay_words(const struct machine_step *s)
{
    switch (s->delay) {
    case MACHINE_DELAY_NONE:
        return s->settle_mark ? "at once; the settle delay restarts" : "at once";
    case MACHINE_DELAY_BACKOFF:
        return s->settle_mark ? "after backoff; the settle delay restarts" : "after backoff";
    case MACHINE_DELAY_SETTLE:
        return s->settle_mark ? "after the settle delay, which restarts now"
                              : "after the settle delay";
    }
    return "?";
}

static bool same_step(const struct machine_step *a, const struct machine_step *b)
{
    return a->next == b->next && a->delay == b->delay && a->settle_mark == b->settle_mark &&
           strcmp(a->why, b->why) == 0;
}

static void row(enum machine_state st, enum machine_event ev, const char *when,
                const struct machine_step *s)
{
    bool terminal = machine_is_terminal(s->next);
    printf("| %s | %s | %s | %s%s%s | %s | %s |\n", machine_state_name(st), machine_event_name(ev),
           when, terminal ? "**" : "", machine_state_name(s->next), terminal ? "**" : "",
           delay_words(s), s->why);
}

int main(void)
{
    const struct machine_policy p = machine_policy_default();
    const struct machine_counters base = {.posts = 1, .cycles = 0, .attempts = 0, .settled = true};
    struct variant edges[4];
    size_t n_edges = 0;

    edges[n_edges++] = (struct variant){"the settle delay has not passed",
                                        {.posts = 1, .cycles = 0, .attempts = 0, .settled = false}};
    edges[n_edges++] =
        (struct variant){"posts = max-posts", {.posts = p.max_posts, .settled = true}};
    edges[n_edges++] = (struct variant){"failed rounds reach max-cycles",
                                        {.posts = 1, .cycles = p.max_cycles - 1, .settled = true}};
    edges[n_edges++] =
        (struct variant){"transient failures reach max-attempts",
                         {.posts = 1, .attempts = p.max_attempts - 1, .settled = true}};

    printf("| state | event | when | next | due | why (the audit event's text) |\n");
    printf("|---|---|---|---|---|---|\n");
    for (int st = 0; st < MACHINE_STATE__COUNT; st++) {
        for (int ev = 0; ev < MACHINE_EVENT__COUNT; ev++) {
            struct machine_step b, shown[4];
            size_t n_shown = 0;
            int rc = machine_next((enum machine_state)st, (enum machine_event)ev, &base, &p, &b);
            if (rc == APBOT_E_STATE)
                continue;
            if (rc != APBOT_OK) {
                fprintf(stderr, "machine-table: machine_next(%s, %s) failed: %d\n",
                        machine_state_name((enum machine_state)st),
                        machine_event_name((enum machine_event)ev), rc);
                return 1;
            }
            for (size_t i = 0; i < n_edges; i++) {
                struct machine_step s;
                if (machine_next((enum machine_state)st, (enum machine_event)ev, &edges[i].c, &p,
                                 &s) != APBOT_OK) {
                    fprintf(stderr, "machine-table: (%s, %s) refused at an edge only\n",
                            machine_state_name((enum machine_state)st),
                            machine_event_name((enum machine_event)ev));
                    return 1;
                }
                bool seen = same_step(&s, &b);
                for (size_t k = 0; k < n_shown && !seen; k++)
                    seen = same_step(&s, &shown[k]);
                if (seen)
                    continue;
                shown[n_shown++] = s;
                row((enum machine_state)st, (enum machine_event)ev, edges[i].when, &s);
            }
            row((enum machine_state)st, (enum machine_event)ev, n_shown ? "otherwise" : "", &b);
        }
    }
    return 0;
}
