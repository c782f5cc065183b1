/*
 * cli_audit.c - `apbot audit verify [--json] [--head ID:SHA256]` and `apbot audit head
 * [--date YYYY-MM-DD] [--json]`: the audit chain of the queue's events (store.h, "The audit
 * chain"; docs/operations.md).
 *
 * verify recomputes the whole chain and names the first event that does not match (its id,
 * its item, and what differs: changed, missing, order, unchained), or the kept head the chain
 * no longer holds. head prints the chain's head as of the end of a day (local time), the line
 * an auditor keeps: `apbot audit verify --head` with it later proves that nothing up to that
 * event was changed since. Exit 0 intact, CLI_EXIT_TAMPERED when the chain is broken, 1 the
 * queue could not be read, 2 usage.
 */
#include "cli.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "apbot/error.h"
#include "apbot/invoice.h"
#include "apbot/store.h"

static void audit_usage(FILE *out)
{
    fprintf(out,
            "usage: apbot audit verify [--json] [--head ID:SHA256]\n"
            "       apbot audit head [--date YYYY-MM-DD] [--json]\n"
            "\n"
            "Every audit event is chained to the one before it (SHA-256). verify recomputes the\n"
            "chain and names the first event that does not match: changed, missing (deleted),\n"
            "order (moved or swapped) or unchained; with --head (a line `audit head` printed\n"
            "earlier, kept elsewhere) the chain must still hold that event with that hash.\n"
            "head prints the chain's head as of the end of a day (local time; default: now).\n"
            "\n"
            "exit codes: 0 intact, 7 the chain is broken, 1 the queue could not be read,\n"
            "2 usage error\n");
}

/* Local midnight after date (YYYY-MM-DD), wall ms; -1 when there is no such day. */
static int64_t day_end_ms(const char *date)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    if (sscanf(date, "%4d-%2d-%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday) != 3)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    tm.tm_mday += 1;
    tm.tm_isdst = -1;
    time_t t = mktime(&tm);
    return t == (time_t)-1 ? -1 : (int64_t)t * 1000;
}

/* "2026-12-04 17:00:01" in local time, or "-" for 0. */
static const char *local_time(int64_t ms, char *buf, size_t len)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (ms <= 0 || !localtime_r(&t, &tm) || strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm) == 0)
        snprintf(buf, len, "-");
    return buf;
}

/* The kept form of a head: "ID:SHA256". */
static void head_token(const struct store_audit_head *h, char *buf, size_t len)
{
    char hex[2 * STORE_HASH_LEN + 1];
    store_audit_hex(h->hash, hex);
    snprintf(buf, len, "%" PRId64 ":%s", h->event_id, hex);
}

static json_t *head_json(const struct store_audit_head *h)
{
    char hex[2 * STORE_HASH_LEN + 1], token[96];
    store_audit_hex(h->hash, hex);
    head_token(h, token, sizeof(token));
    json_t *o = json_object();
    json_object_set_new(o, "event_id", json_integer(h->event_id));
    json_object_set_new(o, "item_id", h->event_id ? json_integer(h->item_id) : json_null());
    json_object_set_new(o, "at_ms", h->event_id ? json_integer(h->at) : json_null());
    json_object_set_new(o, "sha256", json_string(hex));
    json_object_set_new(o, "head", json_string(token));
    return o;
}

static int print_json(json_t *o)
{
    int bad = !o || json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!bad)
        putchar('\n');
    json_decref(o);
    return bad ? -1 : 0;
}

static int audit_verify(struct store *st, bool json, const struct store_audit_head *expect)
{
    struct store_audit_result res;
    char err[APBOT_ERR_LEN];
    if (store_audit_verify(st, expect, &res, err, sizeof(err)) != APBOT_OK) {
        fprintf(stderr, "apbot audit verify: %s\n", err);
        return CLI_EXIT_ERROR;
    }
    bool intact = res.kind == STORE_AUDIT_INTACT;
    if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "intact", json_boolean(intact));
        json_object_set_new(o, "events", json_integer(res.events));
        json_object_set_new(o, intact ? "head" : "last_intact", head_json(&res.last_good));
        if (intact) {
            json_object_set_new(o, "break", json_null());
        } else {
            json_t *b = json_object();
            json_object_set_new(b, "kind", json_string(store_audit_kind_name(res.kind)));
            json_object_set_new(b, "event_id", json_integer(res.event_id));
            json_object_set_new(b, "item_id",
                                res.item_id ? json_integer(res.item_id) : json_null());
            if (res.missing_to >= res.missing_from && res.missing_from > 0) {
                json_object_set_new(b, "missing_from", json_integer(res.missing_from));
                json_object_set_new(b, "missing_to", json_integer(res.missing_to));
            }
            json_object_set_new(b, "detail", json_string(res.detail));
            json_object_set_new(o, "break", b);
        }
        if (print_json(o) != 0) {
            fprintf(stderr, "apbot audit verify: cannot write JSON\n");
            return CLI_EXIT_ERROR;
        }
    } else {
        char token[96], when[32];
        head_token(&res.last_good, token, sizeof(token));
        if (intact) {
            printf("audit chain intact: %" PRId64 " events verified\n", res.events);
            if (res.last_good.event_id)
                printf("head: %s (item #%" PRId64 ", %s)\n", token, res.last_good.item_id,
                       local_time(res.last_good.at, when, sizeof(when)));
            else
                printf("head: %s (no event yet)\n", token);
        } else {
            printf("audit chain BROKEN (%s): %s\n", store_audit_kind_name(res.kind), res.detail);
            printf("last intact event: %s\n", token);
        }
    }
    if (fflush(stdout) != 0)
        return CLI_EXIT_ERROR;
    return intact ? CLI_EXIT_OK : CLI_EXIT_TAMPERED;
}

static int audit_head(struct store *st, bool json, const char *date)
{
    int64_t before = 0;
    if (date) {
        before = day_end_ms(date);
        if (before < 0) {
            fprintf(stderr, "apbot audit head: no such local day '%s'\n", date);
            return CLI_EXIT_USAGE;
        }
    }
    struct store_audit_head h;
    char err[APBOT_ERR_LEN];
    if (store_audit_head(st, before, &h, err, sizeof(err)) != APBOT_OK) {
        fprintf(stderr, "apbot audit head: %s\n", err);
        return CLI_EXIT_ERROR;
    }
    if (json) {
        json_t *o = head_json(&h);
        json_object_set_new(o, "date", date ? json_string(date) : json_null());
        if (print_json(o) != 0) {
            fprintf(stderr, "apbot audit head: cannot write JSON\n");
            return CLI_EXIT_ERROR;
        }
    } else {
        char token[96];
        head_token(&h, token, sizeof(token));
        if (date)
            printf("audit chain head at the end of %s: %s\n", date, token);
        else
            printf("audit chain head: %s\n", token);
    }
    return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_ERROR;
}

int cli_audit(const struct cli_ctx *ctx, int argc, char **argv)
{
    const char *sub = argc > 1 ? argv[1] : NULL;
    if (sub && (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0)) {
        audit_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (!sub || (strcmp(sub, "verify") != 0 && strcmp(sub, "head") != 0)) {
        audit_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    bool verify = strcmp(sub, "verify") == 0, json = false, has_head = false;
    const char *date = NULL;
    struct store_audit_head expect;
    memset(&expect, 0, sizeof(expect));
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (verify && strcmp(argv[i], "--head") == 0 && i + 1 < argc) {
            if (store_audit_parse_head(argv[++i], &expect) != APBOT_OK) {
                fprintf(stderr,
                        "apbot audit verify: bad --head '%s' (want ID:SHA256, as "
                        "`apbot audit head` prints it)\n",
                        argv[i]);
                return CLI_EXIT_USAGE;
            }
            has_head = true;
        } else if (!verify && strcmp(argv[i], "--date") == 0 && i + 1 < argc) {
            date = argv[++i];
            if (!invoice_date_valid(date)) {
                fprintf(stderr, "apbot audit head: bad date '%s' (want YYYY-MM-DD)\n", date);
                return CLI_EXIT_USAGE;
            }
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            audit_usage(stdout);
            return CLI_EXIT_OK;
        } else {
            fprintf(stderr, "apbot audit %s: unexpected argument %s\n", sub, argv[i]);
            audit_usage(stderr);
            return CLI_EXIT_USAGE;
        }
    }
    /* Looking must not create: a mistyped --db is an error, not an empty (intact) queue. */
    if (store_path_is_file(ctx->db_path) && access(ctx->db_path, F_OK) != 0) {
        fprintf(stderr, "apbot audit %s: no queue database at %s\n", sub, ctx->db_path);
        return CLI_EXIT_ERROR;
    }
    struct store *st = NULL;
    char err[APBOT_ERR_LEN];
    if (store_open(ctx->db_path, &st, err, sizeof(err)) != APBOT_OK) {
        fprintf(stderr, "apbot audit %s: %s\n", sub, err);
        return CLI_EXIT_ERROR;
    }
    int ret =
        verify ? audit_verify(st, json, has_head ? &expect : NULL) : audit_head(st, json, date);
    store_close(st);
    return ret;
}
