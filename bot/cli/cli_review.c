/*
 * cli_review.c - `apbot review [ID] [--all] [--json]`: the morning manual-review queue.
 *
 * Without an ID: every manual-review item (with --all also business exceptions), oldest
 * first, with its age, key, vendor, invoice number, amount, reason and what the last ERP
 * exchange showed (step, status, outcome and the start of the page excerpt). With an ID:
 * the item, its full audit timeline and every piece of ERP evidence kept for it, and the
 * resolve commands that apply. Read-only: decisions go through `apbot resolve`.
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
#include "apbot/mem.h"
#include "apbot/money.h"
#include "apbot/report.h"
#include "apbot/store.h"

#define REVIEW_EXCERPT_SHORT 160 /* bytes of the last excerpt shown in the list */

static void review_usage(FILE *out)
{
    fprintf(out, "usage: apbot review [ID] [--all] [--json]\n"
                 "  the manual-review queue, oldest first (--all: also business exceptions);\n"
                 "  with ID: the item's full event timeline and ERP evidence\n");
}

static const char *nz(const char *s)
{
    return s ? s : "";
}

/* A local time for the listing, "-" when there is none (0) or it cannot be shown. */
static void fmt_time(int64_t ms, char *buf, size_t len)
{
    if (ms <= 0)
        snprintf(buf, len, "-");
    else
        report_local_time(ms, "-", buf, len);
}

/* Copies at most max bytes of s, cut at a UTF-8 boundary, "..." appended when cut. Heap. */
static char *shorten(const char *s, size_t max)
{
    size_t n;
    char *d;

    if (!s)
        return NULL;
    n = strlen(s);
    if (n <= max)
        return apbot_xstrdup(s);
    n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    d = malloc(n + 4);
    if (!d)
        abort();
    memcpy(d, s, n);
    memcpy(d + n, "...", 4);
    return d;
}

/* ---- the list -------------------------------------------------------------------------- */

struct rv_item {
    int64_t id;
    char key[32];
    enum machine_state state;
    int64_t created_at, updated_at;
    char *vendor_id, *vendor_name, *invoice_number, *reason, *erp_doc;
    char currency[4];
    int exponent;
    int64_t total;
    /* the last ERP exchange */
    bool has_ev;
    int64_t ev_at;
    char *ev_step, *ev_outcome, *ev_rule, *ev_transport, *ev_excerpt;
    int ev_status;
};

struct rv_list {
    struct rv_item *v;
    size_t n, cap;
};

static int rv_collect(void *ctx, const struct store_item *it)
{
    struct rv_list *l = ctx;
    struct rv_item *x;

    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        struct rv_item *v = realloc(l->v, cap * sizeof(*v));
        if (!v)
            abort();
        l->v = v;
        l->cap = cap;
    }
    x = &l->v[l->n++];
    memset(x, 0, sizeof(*x));
    x->id = it->id;
    snprintf(x->key, sizeof(x->key), "%s", it->key);
    x->state = it->state;
    x->created_at = it->created_at;
    x->updated_at = it->updated_at;
    x->vendor_id = apbot_xstrdup(it->vendor_id);
    x->vendor_name = apbot_xstrdup(it->vendor_name);
    x->invoice_number = apbot_xstrdup(it->invoice_number);
    x->reason = apbot_xstrdup(it->reason);
    x->erp_doc = apbot_xstrdup(it->erp_doc);
    snprintf(x->currency, sizeof(x->currency), "%s", it->currency);
    x->exponent = it->exponent;
    x->total = it->total;
    return 0;
}

static int rv_last_evidence(void *ctx, const struct store_evidence_row *row)
{
    struct rv_item *x = ctx;
    free(x->ev_step);
    free(x->ev_outcome);
    free(x->ev_rule);
    free(x->ev_transport);
    free(x->ev_excerpt);
    x->has_ev = true;
    x->ev_at = row->at;
    x->ev_step = apbot_xstrdup(row->ev.step);
    x->ev_outcome = apbot_xstrdup(row->ev.outcome);
    x->ev_rule = apbot_xstrdup(row->ev.rule);
    x->ev_transport = apbot_xstrdup(row->ev.transport);
    x->ev_excerpt = shorten(row->ev.excerpt, REVIEW_EXCERPT_SHORT);
    x->ev_status = row->ev.http_status;
    return 0;
}

static void rv_list_done(struct rv_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        struct rv_item *x = &l->v[i];
        free(x->vendor_id);
        free(x->vendor_name);
        free(x->invoice_number);
        free(x->reason);
        free(x->erp_doc);
        free(x->ev_step);
        free(x->ev_outcome);
        free(x->ev_rule);
        free(x->ev_transport);
        free(x->ev_excerpt);
    }
    free(l->v);
}

static int rv_cmp(const void *a, const void *b)
{
    const struct rv_item *x = a, *y = b;
    if (x->created_at != y->created_at)
        return x->created_at < y->created_at ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static json_t *jstr(const char *s)
{
    return s ? json_string(s) : json_null();
}

static int review_list(struct store *st, bool all, bool as_json)
{
    struct rv_list l;
    char err[APBOT_ERR_LEN];
    int64_t now = store_now_ms();
    int rc;

    memset(&l, 0, sizeof(l));
    rc = store_each(st, MACHINE_MANUAL_REVIEW, rv_collect, &l, err, sizeof(err));
    if (rc == APBOT_OK && all)
        rc = store_each(st, MACHINE_BUSINESS_EXCEPTION, rv_collect, &l, err, sizeof(err));
    for (size_t i = 0; rc == APBOT_OK && i < l.n; i++)
        rc = store_each_evidence(st, l.v[i].id, rv_last_evidence, &l.v[i], err, sizeof(err));
    if (rc != APBOT_OK) {
        fprintf(stderr, "apbot review: %s\n", err);
        rv_list_done(&l);
        return CLI_EXIT_ERROR;
    }
    if (l.n > 1)
        qsort(l.v, l.n, sizeof(*l.v), rv_cmp);

    if (as_json) {
        json_t *arr = json_array();
        char amount[48];
        for (size_t i = 0; i < l.n; i++) {
            struct rv_item *x = &l.v[i];
            json_t *o = json_object();
            json_object_set_new(o, "id", json_integer((json_int_t)x->id));
            json_object_set_new(o, "state", json_string(machine_state_name(x->state)));
            json_object_set_new(o, "key", json_string(x->key));
            json_object_set_new(o, "created_at_ms", json_integer((json_int_t)x->created_at));
            json_object_set_new(o, "age_s",
                                json_integer((json_int_t)((now - x->created_at) / 1000)));
            json_object_set_new(o, "vendor_id", jstr(x->vendor_id));
            json_object_set_new(o, "vendor_name", jstr(x->vendor_name));
            json_object_set_new(o, "invoice_number", jstr(x->invoice_number));
            if (money_format_plain(x->total, x->exponent, amount, sizeof(amount)) == APBOT_OK)
                json_object_set_new(o, "amount", json_string(amount));
            json_object_set_new(o, "amount_minor", json_integer((json_int_t)x->total));
            json_object_set_new(o, "currency", json_string(x->currency));
            json_object_set_new(o, "reason", jstr(x->reason));
            if (x->has_ev) {
                json_t *e = json_object();
                json_object_set_new(e, "at_ms", json_integer((json_int_t)x->ev_at));
                json_object_set_new(e, "step", jstr(x->ev_step));
                json_object_set_new(e, "http_status", json_integer(x->ev_status));
                json_object_set_new(e, "transport", jstr(x->ev_transport));
                json_object_set_new(e, "rule", jstr(x->ev_rule));
                json_object_set_new(e, "outcome", jstr(x->ev_outcome));
                json_object_set_new(e, "excerpt", jstr(x->ev_excerpt));
                json_object_set_new(o, "last_exchange", e);
            } else {
                json_object_set_new(o, "last_exchange", json_null());
            }
            json_array_append_new(arr, o);
        }
        rc = json_dumpf(arr, stdout, JSON_INDENT(2));
        json_decref(arr);
        putchar('\n');
    } else if (l.n == 0) {
        printf("nothing to review%s\n", all ? " (no manual-review items, no business exceptions)"
                                            : " (no manual-review items)");
    } else {
        printf("%zu item(s) to review, oldest first\n", l.n);
        for (size_t i = 0; i < l.n; i++) {
            struct rv_item *x = &l.v[i];
            char age[32], amount[48], when[32];
            report_format_age(now - x->created_at, age, sizeof(age));
            money_text(x->total, x->exponent, amount, sizeof(amount));
            printf("\n#%lld  %s  age %s  %s\n", (long long)x->id, machine_state_name(x->state), age,
                   x->key);
            printf("    vendor %s%s%s%s  invoice %s  %s %s\n", nz(x->vendor_id),
                   x->vendor_name ? " (" : "", nz(x->vendor_name), x->vendor_name ? ")" : "",
                   nz(x->invoice_number), amount, x->currency);
            printf("    reason: %s\n", x->reason ? x->reason : "(none recorded)");
            if (x->has_ev) {
                fmt_time(x->ev_at, when, sizeof(when));
                printf("    last ERP exchange %s: %s, HTTP %d, %s%s%s -> %s\n", when,
                       nz(x->ev_step), x->ev_status, nz(x->ev_transport),
                       x->ev_rule ? ", rule " : "", nz(x->ev_rule), nz(x->ev_outcome));
                if (x->ev_excerpt)
                    printf("      \"%s\"\n", x->ev_excerpt);
            } else {
                printf("    last ERP exchange: none recorded\n");
            }
        }
        printf("\ndetails: apbot review ID; decide: apbot resolve ID --posted DOC --flow FILE | "
               "--requeue | --reject REASON\n");
    }
    rv_list_done(&l);
    return rc == 0 ? CLI_EXIT_OK : CLI_EXIT_ERROR;
}

/* ---- one item -------------------------------------------------------------------------- */

struct rv_detail {
    bool as_json;
    json_t *arr;
};

static int print_event(void *ctx, const struct store_event_row *e)
{
    struct rv_detail *d = ctx;
    char when[32];

    if (d->as_json) {
        json_t *o = json_object();
        json_object_set_new(o, "at_ms", json_integer((json_int_t)e->at));
        json_object_set_new(o, "from", jstr(e->from));
        json_object_set_new(o, "to", jstr(e->to));
        json_object_set_new(o, "event", jstr(e->event));
        json_object_set_new(o, "actor", jstr(e->actor));
        json_object_set_new(o, "detail", jstr(e->detail));
        json_array_append_new(d->arr, o);
        return 0;
    }
    fmt_time(e->at, when, sizeof(when));
    printf("  %s  %-12s -> %-18s %-16s by %s\n", when, e->from ? e->from : "(none)", nz(e->to),
           nz(e->event), nz(e->actor));
    if (e->detail && *e->detail)
        printf("      %s\n", e->detail);
    return 0;
}

static int print_evidence(void *ctx, const struct store_evidence_row *row)
{
    struct rv_detail *d = ctx;
    const struct store_evidence *ev = &row->ev;
    char when[32];

    if (d->as_json) {
        json_t *o = json_object();
        json_object_set_new(o, "at_ms", json_integer((json_int_t)row->at));
        json_object_set_new(o, "step", jstr(ev->step));
        json_object_set_new(o, "method", jstr(ev->method));
        json_object_set_new(o, "url", jstr(ev->url));
        json_object_set_new(o, "http_status", json_integer(ev->http_status));
        json_object_set_new(o, "elapsed_ms", json_integer((json_int_t)ev->elapsed_ms));
        json_object_set_new(o, "transport", jstr(ev->transport));
        json_object_set_new(o, "rule", jstr(ev->rule));
        json_object_set_new(o, "outcome", jstr(ev->outcome));
        json_object_set_new(o, "excerpt", jstr(ev->excerpt));
        json_array_append_new(d->arr, o);
        return 0;
    }
    fmt_time(row->at, when, sizeof(when));
    printf("  %s  %-10s %s %s\n", when, nz(ev->step), nz(ev->method), nz(ev->url));
    printf("      HTTP %d in %lld ms, %s%s%s -> %s\n", ev->http_status, (long long)ev->elapsed_ms,
           nz(ev->transport), ev->rule ? ", rule " : "", nz(ev->rule), nz(ev->outcome));
    if (ev->excerpt && *ev->excerpt)
        printf("      page: %s\n", ev->excerpt);
    return 0;
}

static int review_one(struct store *st, int64_t id, bool as_json)
{
    struct store_item it;
    struct rv_detail d = {as_json, NULL};
    char err[APBOT_ERR_LEN], amount[48], created[32], updated[32];
    int64_t now = store_now_ms();
    int rc;

    rc = store_get(st, id, &it, err, sizeof(err));
    if (rc == APBOT_E_NOTFOUND) {
        fprintf(stderr, "apbot review: no item #%lld\n", (long long)id);
        return CLI_EXIT_ERROR;
    }
    if (rc != APBOT_OK) {
        fprintf(stderr, "apbot review: %s\n", err);
        return CLI_EXIT_ERROR;
    }
    money_text(it.total, it.exponent, amount, sizeof(amount));
    if (as_json) {
        json_t *o = json_object();
        char plain[48];
        json_object_set_new(o, "id", json_integer((json_int_t)it.id));
        json_object_set_new(o, "key", json_string(it.key));
        json_object_set_new(o, "state", json_string(machine_state_name(it.state)));
        json_object_set_new(o, "created_at_ms", json_integer((json_int_t)it.created_at));
        json_object_set_new(o, "updated_at_ms", json_integer((json_int_t)it.updated_at));
        json_object_set_new(o, "vendor_id", jstr(it.vendor_id));
        json_object_set_new(o, "vendor_name", jstr(it.vendor_name));
        json_object_set_new(o, "invoice_number", jstr(it.invoice_number));
        json_object_set_new(o, "doc_type", json_string(it.doc_type));
        json_object_set_new(o, "issue_date", json_string(it.issue_date));
        if (money_format_plain(it.total, it.exponent, plain, sizeof(plain)) == APBOT_OK)
            json_object_set_new(o, "amount", json_string(plain));
        json_object_set_new(o, "amount_minor", json_integer((json_int_t)it.total));
        json_object_set_new(o, "currency", json_string(it.currency));
        json_object_set_new(o, "erp_doc", jstr(it.erp_doc));
        json_object_set_new(o, "reason", jstr(it.reason));
        json_object_set_new(o, "source", jstr(it.source));
        json_object_set_new(o, "posts", json_integer(it.counters.posts));
        json_object_set_new(o, "cycles", json_integer(it.counters.cycles));
        json_object_set_new(o, "attempts", json_integer(it.counters.attempts));
        d.arr = json_array();
        rc = store_each_event(st, id, print_event, &d, err, sizeof(err));
        json_object_set_new(o, "events", d.arr);
        d.arr = json_array();
        if (rc == APBOT_OK)
            rc = store_each_evidence(st, id, print_evidence, &d, err, sizeof(err));
        json_object_set_new(o, "evidence", d.arr);
        if (rc == APBOT_OK && json_dumpf(o, stdout, JSON_INDENT(2)) != 0)
            rc = APBOT_E_IO;
        putchar('\n');
        json_decref(o);
    } else {
        char age[32];
        fmt_time(it.created_at, created, sizeof(created));
        fmt_time(it.updated_at, updated, sizeof(updated));
        report_format_age(now - it.created_at, age, sizeof(age));
        printf("item #%lld  %s\n", (long long)it.id, machine_state_name(it.state));
        printf("  key        %s\n", it.key);
        printf("  vendor     %s%s%s%s\n", nz(it.vendor_id), it.vendor_name ? " (" : "",
               nz(it.vendor_name), it.vendor_name ? ")" : "");
        printf("  invoice    %s (%s, issued %s)\n", nz(it.invoice_number), it.doc_type,
               it.issue_date);
        printf("  amount     %s %s\n", amount, it.currency);
        printf("  document   %s\n", it.erp_doc ? it.erp_doc : "(none)");
        printf("  reason     %s\n", it.reason ? it.reason : "(none)");
        printf("  source     %s\n", nz(it.source));
        printf("  created    %s (age %s), last change %s\n", created, age, updated);
        printf("  counters   posts %d, lookup cycles %d, transient attempts %d\n",
               it.counters.posts, it.counters.cycles, it.counters.attempts);
        printf("\nevents\n");
        rc = store_each_event(st, id, print_event, &d, err, sizeof(err));
        if (rc == APBOT_OK) {
            printf("\nERP evidence\n");
            rc = store_each_evidence(st, id, print_evidence, &d, err, sizeof(err));
        }
        if (rc == APBOT_OK &&
            (it.state == MACHINE_MANUAL_REVIEW || it.state == MACHINE_BUSINESS_EXCEPTION)) {
            printf("\ndecide:\n");
            printf("  apbot resolve %lld --posted DOC --flow FILE   the ERP holds it as DOC "
                   "(verified)\n",
                   (long long)it.id);
            printf("  apbot resolve %lld --requeue                  look it up and try again\n",
                   (long long)it.id);
            if (it.state == MACHINE_MANUAL_REVIEW)
                printf("  apbot resolve %lld --reject REASON            make it a business "
                       "exception\n",
                       (long long)it.id);
        }
    }
    store_item_done(&it);
    if (rc != APBOT_OK) {
        fprintf(stderr, "apbot review: %s\n", err);
        return CLI_EXIT_ERROR;
    }
    return CLI_EXIT_OK;
}

int cli_review(const struct cli_ctx *ctx, int argc, char **argv)
{
    bool all = false, as_json = false;
    int64_t id = 0;
    struct store *st = NULL;
    char err[APBOT_ERR_LEN];
    int status;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            review_usage(stdout);
            return CLI_EXIT_OK;
        } else if (strcmp(argv[i], "--all") == 0) {
            all = true;
        } else if (strcmp(argv[i], "--json") == 0) {
            as_json = true;
        } else if (argv[i][0] != '-' && id == 0) {
            char *end = NULL;
            long long v = strtoll(argv[i], &end, 10);
            if (!end || *end || v <= 0) {
                fprintf(stderr, "apbot review: '%s' is not an item id\n", argv[i]);
                return CLI_EXIT_USAGE;
            }
            id = v;
        } else {
            fprintf(stderr, "apbot review: unknown option '%s'\n", argv[i]);
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
    status = id ? review_one(st, id, as_json) : review_list(st, all, as_json);
    store_close(st);
    return status;
}
