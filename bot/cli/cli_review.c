/*
 * cli_review.c - `apbot review [ID] [--all] [--json] [--vendor TEXT] [--reason TEXT]`: the
 * morning manual-review queue.
 *
 * Without an ID: every manual-review item (with --all also business exceptions), oldest
 * first, with its age, key, vendor, invoice number, amount, reason and what the last ERP
 * exchange showed (step, status, outcome and the start of the page excerpt). With an ID:
 * the item, its full audit timeline and every piece of ERP evidence kept for it, and the
 * resolve commands that apply. Read-only: decisions go through `apbot resolve`. The queue,
 * the item and the JSON shape come from the review module (the review page shows the same);
 * every text from an invoice or the ERP is printed through text_escape().
 */
#include "cli.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apbot/error.h"
#include "apbot/machine.h"
#include "apbot/money.h"
#include "apbot/report.h"
#include "apbot/review.h"
#include "apbot/store.h"
#include "apbot/text.h"

#define REVIEW_EXCERPT_SHORT 160 /* bytes of the last excerpt shown in the list */

static void review_usage(FILE *out)
{
    fprintf(out, "usage: apbot review [ID] [--all] [--json] [--vendor TEXT] [--reason TEXT]\n"
                 "  the manual-review queue, oldest first (--all: also business exceptions;\n"
                 "  --vendor/--reason: only items whose vendor or reason contains TEXT);\n"
                 "  with ID: the item's full event timeline and ERP evidence\n"
                 "exit codes: 0 shown, 3 no such item, 1 error, 2 usage\n");
}

/* Untrusted text (invoice, ERP) for the terminal: escaped into buf, "" for NULL. */
static const char *tx(char *buf, size_t len, const char *s)
{
    return text_escape_into(buf, len, s ? s : "", 0);
}

/* A local time for the listing, "-" when there is none (0) or it cannot be shown. */
static void fmt_time(int64_t ms, char *buf, size_t len)
{
    if (ms <= 0)
        snprintf(buf, len, "-");
    else
        report_local_time(ms, "-", buf, len);
}

static int dump_json(json_t *v)
{
    int rc = v ? json_dumpf(v, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : -1;
    json_decref(v);
    putchar('\n');
    return rc == 0 && !ferror(stdout) ? 0 : -1;
}

/* ---- the list -------------------------------------------------------------------------- */

static int review_list(struct store *st, const struct review_filter *flt, bool as_json)
{
    struct review_queue q;
    char err[APBOT_ERR_LEN];
    int64_t now = store_now_ms();
    int rc;

    rc = review_queue_load(st, flt, &q, err, sizeof(err));
    if (rc != APBOT_OK) {
        fprintf(stderr, "apbot review: %s\n", err);
        return CLI_EXIT_ERROR;
    }
    if (as_json) {
        json_t *arr = json_array();
        for (size_t i = 0; i < q.n; i++) {
            json_t *o = review_item_json(&q.v[i].item, now);
            json_object_set_new(o, "version", json_integer((json_int_t)q.v[i].version));
            json_object_set_new(o, "last_exchange",
                                q.v[i].has_last
                                    ? review_exchange_json(&q.v[i].last, REVIEW_EXCERPT_SHORT)
                                    : json_null());
            json_array_append_new(arr, o);
        }
        rc = dump_json(arr);
    } else if (q.n == 0) {
        printf("nothing to review%s\n", flt->exceptions
                                            ? " (no manual-review items, no business exceptions)"
                                            : " (no manual-review items)");
    } else {
        printf("%zu item(s) to review, oldest first\n", q.n);
        for (size_t i = 0; i < q.n; i++) {
            const struct review_entry *e = &q.v[i];
            const struct store_item *x = &e->item;
            char age[32], amount[48], when[32];
            char b1[256], b2[256], b3[256], b4[1024], b5[256], b6[REVIEW_EXCERPT_SHORT + 8];
            report_format_age(now - x->created_at, age, sizeof(age));
            money_text(x->total, x->exponent, amount, sizeof(amount));
            printf("\n#%lld  %s  age %s  %s\n", (long long)x->id, machine_state_name(x->state), age,
                   x->key);
            printf("    vendor %s%s%s%s  invoice %s  %s %s\n", tx(b1, sizeof(b1), x->vendor_id),
                   x->vendor_name ? " (" : "", tx(b2, sizeof(b2), x->vendor_name),
                   x->vendor_name ? ")" : "", tx(b3, sizeof(b3), x->invoice_number), amount,
                   x->currency);
            printf("    reason: %s\n",
                   x->reason ? tx(b4, sizeof(b4), x->reason) : "(none recorded)");
            if (e->has_last) {
                const struct review_exchange *l = &e->last;
                fmt_time(l->at, when, sizeof(when));
                printf("    last ERP exchange %s: %s, HTTP %d, %s%s%s -> %s\n", when,
                       tx(b1, sizeof(b1), l->step), l->http_status,
                       tx(b2, sizeof(b2), l->transport), l->rule ? ", rule " : "",
                       tx(b3, sizeof(b3), l->rule), tx(b5, sizeof(b5), l->outcome));
                if (l->excerpt)
                    printf("      \"%s\"\n", tx(b6, sizeof(b6), l->excerpt));
            } else {
                printf("    last ERP exchange: none recorded\n");
            }
        }
        printf("\ndetails: apbot review ID; decide: apbot resolve ID --posted DOC --flow FILE | "
               "--requeue | --reject REASON\n");
    }
    review_queue_done(&q);
    return rc == 0 ? CLI_EXIT_OK : CLI_EXIT_ERROR;
}

/* ---- one item -------------------------------------------------------------------------- */

static void print_item_text(const struct review_item *r, int64_t now)
{
    const struct store_item *it = &r->item;
    char amount[48], created[32], updated[32], age[32], when[32];
    char b1[256], b2[256], b3[256], b4[1024], b5[1024];

    money_text(it->total, it->exponent, amount, sizeof(amount));
    fmt_time(it->created_at, created, sizeof(created));
    fmt_time(it->updated_at, updated, sizeof(updated));
    report_format_age(now - it->created_at, age, sizeof(age));
    printf("item #%lld  %s  (version %lld)\n", (long long)it->id, machine_state_name(it->state),
           (long long)r->version);
    printf("  key        %s\n", it->key);
    printf("  vendor     %s%s%s%s\n", tx(b1, sizeof(b1), it->vendor_id),
           it->vendor_name ? " (" : "", tx(b2, sizeof(b2), it->vendor_name),
           it->vendor_name ? ")" : "");
    printf("  invoice    %s (%s, issued %s)\n", tx(b3, sizeof(b3), it->invoice_number),
           it->doc_type, it->issue_date);
    printf("  amount     %s %s\n", amount, it->currency);
    printf("  document   %s\n", it->erp_doc ? tx(b1, sizeof(b1), it->erp_doc) : "(none)");
    printf("  reason     %s\n", it->reason ? tx(b4, sizeof(b4), it->reason) : "(none)");
    printf("  source     %s\n", tx(b5, sizeof(b5), it->source));
    printf("  created    %s (age %s), last change %s\n", created, age, updated);
    printf("  counters   posts %d, lookup cycles %d, transient attempts %d\n", it->counters.posts,
           it->counters.cycles, it->counters.attempts);
    printf("\nevents\n");
    for (size_t i = 0; i < r->n_events; i++) {
        const struct review_event *e = &r->events[i];
        fmt_time(e->at, when, sizeof(when));
        printf("  %s  %-12s -> %-18s %-16s by %s\n", when, e->from ? e->from : "(none)",
               tx(b1, sizeof(b1), e->to), tx(b2, sizeof(b2), e->event),
               tx(b3, sizeof(b3), e->actor));
        if (e->detail && *e->detail)
            printf("      %s\n", tx(b4, sizeof(b4), e->detail));
    }
    printf("\nERP evidence\n");
    for (size_t i = 0; i < r->n_evidence; i++) {
        const struct review_exchange *x = &r->evidence[i];
        char *excerpt = NULL;
        fmt_time(x->at, when, sizeof(when));
        printf("  %s  %-10s %s %s\n", when, tx(b1, sizeof(b1), x->step),
               tx(b2, sizeof(b2), x->method), tx(b4, sizeof(b4), x->url));
        printf("      HTTP %d in %lld ms, %s%s%s -> %s\n", x->http_status, (long long)x->elapsed_ms,
               tx(b1, sizeof(b1), x->transport), x->rule ? ", rule " : "",
               tx(b2, sizeof(b2), x->rule), tx(b3, sizeof(b3), x->outcome));
        if (x->excerpt && *x->excerpt) {
            excerpt = text_escape(x->excerpt, STORE_EXCERPT_MAX * 4, 0);
            printf("      page: %s\n", excerpt);
            free(excerpt);
        }
    }
    if (it->state == MACHINE_MANUAL_REVIEW || it->state == MACHINE_BUSINESS_EXCEPTION) {
        printf("\ndecide:\n");
        printf("  apbot resolve %lld --posted DOC --flow FILE   the ERP holds it as DOC "
               "(verified)\n",
               (long long)it->id);
        printf("  apbot resolve %lld --requeue                  look it up and try again\n",
               (long long)it->id);
        if (it->state == MACHINE_MANUAL_REVIEW)
            printf("  apbot resolve %lld --reject REASON            make it a business "
                   "exception\n",
                   (long long)it->id);
    }
}

static int review_one(struct store *st, int64_t id, bool as_json)
{
    struct review_item r;
    char err[APBOT_ERR_LEN];
    int64_t now = store_now_ms();
    int rc;

    rc = review_item_load(st, id, &r, err, sizeof(err));
    if (rc == APBOT_E_NOTFOUND) {
        fprintf(stderr, "apbot review: refused: no item #%lld in the queue\n", (long long)id);
        return CLI_EXIT_REFUSED;
    }
    if (rc != APBOT_OK) {
        fprintf(stderr, "apbot review: %s\n", err);
        return CLI_EXIT_ERROR;
    }
    if (as_json) {
        json_t *o = review_item_json(&r.item, now), *ev = json_array(), *ex = json_array();
        json_object_set_new(o, "version", json_integer((json_int_t)r.version));
        for (size_t i = 0; i < r.n_events; i++)
            json_array_append_new(ev, review_event_json(&r.events[i]));
        for (size_t i = 0; i < r.n_evidence; i++)
            json_array_append_new(ex, review_exchange_json(&r.evidence[i], 0));
        json_object_set_new(o, "events", ev);
        json_object_set_new(o, "evidence", ex);
        rc = dump_json(o);
    } else {
        print_item_text(&r, now);
        rc = ferror(stdout) ? -1 : 0;
    }
    review_item_done(&r);
    if (rc != 0) {
        fprintf(stderr, "apbot review: cannot write the output\n");
        return CLI_EXIT_ERROR;
    }
    return CLI_EXIT_OK;
}

int cli_review(const struct cli_ctx *ctx, int argc, char **argv)
{
    struct review_filter flt = {.manual_review = true};
    bool as_json = false;
    int64_t id = 0;
    struct store *st = NULL;
    char err[APBOT_ERR_LEN];
    int status;

    for (int i = 1; i < argc; i++) {
        const bool has = i + 1 < argc;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            review_usage(stdout);
            return CLI_EXIT_OK;
        } else if (strcmp(argv[i], "--all") == 0) {
            flt.exceptions = true;
        } else if (strcmp(argv[i], "--json") == 0) {
            as_json = true;
        } else if (strcmp(argv[i], "--vendor") == 0 && has) {
            flt.vendor = argv[++i];
        } else if (strcmp(argv[i], "--reason") == 0 && has) {
            flt.reason = argv[++i];
        } else if (argv[i][0] != '-' && id == 0) {
            char *end = NULL;
            long long v = strtoll(argv[i], &end, 10);
            if (!end || *end || v <= 0) {
                fprintf(stderr, "apbot review: '%s' is not an item id\n",
                        tx(err, sizeof(err), argv[i]));
                return CLI_EXIT_USAGE;
            }
            id = v;
        } else {
            fprintf(stderr, "apbot review: unknown option '%s'\n", tx(err, sizeof(err), argv[i]));
            review_usage(stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (store_path_is_file(ctx->db_path) && access(ctx->db_path, F_OK) != 0) {
        fprintf(stderr, "apbot review: no queue database at %s\n", ctx->db_path);
        return CLI_EXIT_ERROR;
    }
    if (store_open(ctx->db_path, &st, err, sizeof(err)) != APBOT_OK) {
        fprintf(stderr, "apbot review: %s\n", err);
        return CLI_EXIT_ERROR;
    }
    status = id ? review_one(st, id, as_json) : review_list(st, &flt, as_json);
    store_close(st);
    return status;
}
