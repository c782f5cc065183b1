/*
 * cli_resolve.c - `apbot resolve ID --posted DOC | --requeue | --reject REASON [--by NAME]
 * [--flow FILE] [--force REASON] [--note TEXT]`: an operator's decision on a manual-review or
 * business-exception item, as one audited state change.
 *
 * --posted first verifies in the ERP, through the flow's lookup, that the key is held as
 * DOC with the invoice's amount; it refuses when the ERP does not hold it (unless --force
 * with a reason, which is recorded) and always when the ERP holds the key under another
 * amount or another document. --requeue sends the item back to `new` (it is looked up again
 * before any post); --reject makes it a business exception. The change goes through
 * machine_next and store_apply (no lease, actor "operator:NAME"); the audit event carries
 * the operator, the reason and what the verification found. Nonsense (unknown id, completed
 * or still pending items, a different amount in the ERP) is refused with CLI_EXIT_REFUSED.
 */
#include "cli.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apbot/erp.h"
#include "apbot/error.h"
#include "apbot/flow.h"
#include "apbot/http.h"
#include "apbot/invoice.h"
#include "apbot/machine.h"
#include "apbot/money.h"
#include "apbot/store.h"

#define RESOLVE_TEXT_MAX 500 /* bytes of a reason or note */
#define RESOLVE_NAME_MAX 64  /* bytes of an operator name */

static void resolve_usage(FILE *out)
{
    fprintf(out, "usage: apbot resolve ID --posted DOC --flow FILE [--force REASON]\n"
                 "       apbot resolve ID --requeue\n"
                 "       apbot resolve ID --reject REASON\n"
                 "  options: --by NAME (default: the login name), --note TEXT\n"
                 "\n"
                 "--posted verifies in the ERP that the key is booked as DOC with the same amount\n"
                 "(--force REASON records it although the ERP does not show it); --requeue looks\n"
                 "the item up again from the start; --reject makes it a business exception.\n"
                 "exit codes: 0 done, 3 refused, 1 error (database, ERP unreadable), 2 usage\n");
}

/* Operator names end up in the audit trail: printable, no spaces, bounded. */
static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > RESOLVE_NAME_MAX)
        return false;
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-' || c == '@'))
            return false;
    }
    return true;
}

static const char *operator_name(const char *by)
{
    const char *n;
    if (by)
        return by;
    n = getlogin();
    if (n && *n)
        return n;
    n = getenv("USER");
    if (n && *n)
        return n;
    n = getenv("LOGNAME");
    if (n && *n)
        return n;
    return NULL;
}

static bool text_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > RESOLVE_TEXT_MAX)
        return false;
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20)
            return false;
    return s[strspn(s, " ")] != '\0';
}

/* Same money as the invoice: currency when shown, amount (a credit note may be shown
 * positive). */
static bool same_money(const struct store_item *it, const struct erp_row *h)
{
    if (!h->has_amount)
        return false;
    if (h->currency && strcmp(h->currency, it->currency) != 0)
        return false;
    if (h->amount == it->total)
        return true;
    return strcmp(it->doc_type, "credit-note") == 0 && h->amount == -it->total;
}

enum verify_result {
    VERIFY_OK = 0,     /* the ERP holds the key as DOC with the same amount, once */
    VERIFY_ABSENT,     /* the ERP does not hold DOC for this key: refuse unless forced */
    VERIFY_CONFLICT,   /* the ERP holds the key otherwise: always refuse */
    VERIFY_UNREADABLE, /* the ERP could not be asked: error unless forced */
};

/*
 * Looks the item's key up and compares. what gets a sentence for the operator and the
 * audit trail.
 */
static enum verify_result verify_posted(const struct flow *f, const char *erp_url,
                                        const struct store_item *it, const char *doc, char *what,
                                        size_t len)
{
    struct erp_session *erp = NULL;
    struct erp_lookup_result res;
    char err[APBOT_ERR_LEN] = "";
    char a1[48], a2[48];
    enum verify_result v = VERIFY_UNREADABLE;
    int rc;

    memset(&res, 0, sizeof(res));
    if (money_format(it->total, it->exponent, '.', ',', a2, sizeof(a2)) != APBOT_OK)
        snprintf(a2, sizeof(a2), "?");
    if (http_global_init() != APBOT_OK) {
        snprintf(what, len, "cannot initialise libcurl");
        return VERIFY_UNREADABLE;
    }
    /* The payload gives the invoice fields a lookup by natural key compares. */
    struct invoice inv;
    bool have_inv = invoice_from_json(it->payload, &inv, err, sizeof(err)) == APBOT_OK;
    rc = erp_open(f, erp_url, NULL, &erp, err, sizeof(err));
    if (rc == APBOT_OK) {
        erp_set_retries(erp, 3);
        rc = erp_lookup(erp, it->key, have_inv ? &inv : NULL, it->currency, &res, err, sizeof(err));
    }
    if (have_inv)
        invoice_done(&inv);
    if (rc != APBOT_OK) {
        snprintf(what, len, "the ERP could not be asked: %s", err);
        goto out;
    }
    switch (res.answer) {
    case ERP_FOUND_UNFINISHED: /* not produced until the ERP driver reads <finished> */
    case ERP_FAILED:
        snprintf(what, len, "the ERP lookup failed: %s", res.detail);
        v = VERIFY_UNREADABLE;
        break;
    case ERP_NOT_FOUND:
        snprintf(what, len, "the ERP holds no document for key %s", it->key);
        v = VERIFY_ABSENT;
        break;
    case ERP_FOUND: {
        const struct erp_row *mine = NULL;
        for (size_t i = 0; i < res.hits.n; i++) {
            const struct erp_row *h = &res.hits.rows[i];
            if (!same_money(it, h)) {
                if (!h->has_amount ||
                    money_format(h->amount, h->exponent, '.', ',', a1, sizeof(a1)) != APBOT_OK)
                    snprintf(a1, sizeof(a1), "%s", h->amount_text ? h->amount_text : "?");
                snprintf(what, len,
                         "the ERP holds key %s as document %s with %s %s, but the invoice is "
                         "%s %s",
                         it->key, h->doc ? h->doc : "?", a1,
                         h->currency ? h->currency : it->currency, a2, it->currency);
                v = VERIFY_CONFLICT;
                goto out;
            }
            if (h->doc && strcmp(h->doc, doc) == 0)
                mine = h;
        }
        if (res.hits.n > 1) {
            snprintf(what, len,
                     "the ERP holds key %s %zu times (a duplicate): settle the duplicate "
                     "first",
                     it->key, res.hits.n);
            v = VERIFY_CONFLICT;
        } else if (!mine) {
            snprintf(what, len, "the ERP holds key %s as document %s, not %s", it->key,
                     res.hits.rows[0].doc ? res.hits.rows[0].doc : "?", doc);
            v = VERIFY_CONFLICT;
        } else {
            snprintf(what, len, "verified in the ERP: key %s is document %s with %s %s", it->key,
                     doc, a2, it->currency);
            v = VERIFY_OK;
        }
        break;
    }
    }
out:
    erp_lookup_result_done(&res);
    erp_close(erp);
    http_global_cleanup();
    return v;
}

int cli_resolve(const struct cli_ctx *ctx, int argc, char **argv)
{
    const char *posted = NULL, *reject = NULL, *by = NULL, *flow_path = NULL, *force = NULL;
    const char *note = NULL, *erp_url = ctx->erp_url, *who;
    bool requeue = false;
    int64_t id = 0;
    int n_actions;
    struct store *st = NULL;
    struct flow *f = NULL;
    struct store_item it;
    bool have_item = false;
    struct machine_policy policy = machine_policy_default();
    struct machine_step step;
    struct store_change ch;
    enum machine_event event;
    char err[APBOT_ERR_LEN], actor[RESOLVE_NAME_MAX + 16], what[768], detail[2048];
    char *flow_err = NULL;
    int status = CLI_EXIT_ERROR;
    int rc;

    memset(&it, 0, sizeof(it));
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const bool has = i + 1 < argc;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            resolve_usage(stdout);
            return CLI_EXIT_OK;
        } else if (strcmp(a, "--posted") == 0 && has) {
            posted = argv[++i];
        } else if (strcmp(a, "--requeue") == 0) {
            requeue = true;
        } else if (strcmp(a, "--reject") == 0 && has) {
            reject = argv[++i];
        } else if (strcmp(a, "--by") == 0 && has) {
            by = argv[++i];
        } else if (strcmp(a, "--flow") == 0 && has) {
            flow_path = argv[++i];
        } else if (strcmp(a, "--erp") == 0 && has) {
            erp_url = argv[++i];
        } else if (strcmp(a, "--force") == 0 && has) {
            force = argv[++i];
        } else if (strcmp(a, "--note") == 0 && has) {
            note = argv[++i];
        } else if (a[0] != '-' && id == 0) {
            char *end = NULL;
            long long v = strtoll(a, &end, 10);
            if (!end || *end || v <= 0) {
                fprintf(stderr, "apbot resolve: '%s' is not an item id\n", a);
                return CLI_EXIT_USAGE;
            }
            id = v;
        } else {
            fprintf(stderr, "apbot resolve: unknown or incomplete option '%s'\n", a);
            resolve_usage(stderr);
            return CLI_EXIT_USAGE;
        }
    }
    n_actions = (posted != NULL) + (requeue ? 1 : 0) + (reject != NULL);
    if (id == 0 || n_actions != 1) {
        fprintf(stderr, "apbot resolve: give an item ID and exactly one of --posted DOC, "
                        "--requeue, --reject REASON\n");
        resolve_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (posted && (!*posted || strlen(posted) > 64 || !text_ok(posted))) {
        fprintf(stderr, "apbot resolve: '%s' is not a document number\n", posted);
        return CLI_EXIT_USAGE;
    }
    if ((reject && !text_ok(reject)) || (force && !text_ok(force)) || (note && !text_ok(note))) {
        fprintf(stderr, "apbot resolve: reasons and notes must be 1..%d printable bytes\n",
                RESOLVE_TEXT_MAX);
        return CLI_EXIT_USAGE;
    }
    if (force && !posted) {
        fprintf(stderr, "apbot resolve: --force only applies to --posted\n");
        return CLI_EXIT_USAGE;
    }
    if (posted && !flow_path && !force) {
        fprintf(stderr, "apbot resolve: --posted needs --flow FILE to verify the document in the "
                        "ERP (or --force REASON to record it unverified)\n");
        return CLI_EXIT_USAGE;
    }
    who = operator_name(by);
    if (!who || !name_ok(who)) {
        fprintf(stderr, "apbot resolve: %s; give --by NAME (letters, digits, . _ - @)\n",
                who ? "the operator name is not usable" : "no operator name known");
        return CLI_EXIT_USAGE;
    }
    snprintf(actor, sizeof(actor), "operator:%s", who);

    if (store_path_is_file(ctx->db_path) && access(ctx->db_path, F_OK) != 0) {
        fprintf(stderr, "apbot resolve: no queue database at %s\n", ctx->db_path);
        return CLI_EXIT_ERROR;
    }
    if (flow_path) {
        flow_err = calloc(1, 16 * 1024);
        if (!flow_err)
            abort();
        if (flow_load(flow_path, &f, flow_err, 16 * 1024) != APBOT_OK) {
            fprintf(stderr, "apbot resolve: %s\n", flow_err);
            goto out;
        }
        policy.max_posts = f->policy.max_posts > 0 ? f->policy.max_posts : policy.max_posts;
        policy.max_cycles = f->policy.max_cycles > 0 ? f->policy.max_cycles : policy.max_cycles;
        policy.max_attempts =
            f->policy.max_attempts > 0 ? f->policy.max_attempts : policy.max_attempts;
    }
    if (store_open(ctx->db_path, &st, err, sizeof(err)) != APBOT_OK) {
        fprintf(stderr, "apbot resolve: %s\n", err);
        goto out;
    }
    rc = store_get(st, id, &it, err, sizeof(err));
    if (rc == APBOT_E_NOTFOUND) {
        fprintf(stderr, "apbot resolve: refused: no item #%lld in the queue\n", (long long)id);
        status = CLI_EXIT_REFUSED;
        goto out;
    }
    if (rc != APBOT_OK) {
        fprintf(stderr, "apbot resolve: %s\n", err);
        goto out;
    }
    have_item = true;

    switch (it.state) {
    case MACHINE_COMPLETED:
        fprintf(stderr,
                "apbot resolve: refused: item #%lld is completed (document %s); there is "
                "nothing to resolve\n",
                (long long)id, it.erp_doc ? it.erp_doc : "?");
        status = CLI_EXIT_REFUSED;
        goto out;
    case MACHINE_NEW:
    case MACHINE_CHECKING:
    case MACHINE_POSTING:
    case MACHINE_RECONCILING:
    case MACHINE_FINISHING:
        fprintf(stderr,
                "apbot resolve: refused: item #%lld is %s: the bot is still working on it; "
                "only manual-review and business-exception items can be resolved\n",
                (long long)id, machine_state_name(it.state));
        status = CLI_EXIT_REFUSED;
        goto out;
    case MACHINE_BUSINESS_EXCEPTION:
    case MACHINE_MANUAL_REVIEW:
        break;
    case MACHINE_STATE__COUNT:
    case MACHINE_STATE_INVALID:
        fprintf(stderr, "apbot resolve: refused: item #%lld has an unknown state\n", (long long)id);
        status = CLI_EXIT_REFUSED;
        goto out;
    }

    event = posted    ? MACHINE_EV_RESOLVE_POSTED
            : requeue ? MACHINE_EV_RESOLVE_REQUEUE
                      : MACHINE_EV_RESOLVE_REJECT;
    rc = machine_next(it.state, event, &it.counters, &policy, &step);
    if (rc != APBOT_OK) {
        fprintf(stderr, "apbot resolve: refused: cannot %s an item that is %s\n",
                posted    ? "mark as posted"
                : requeue ? "requeue"
                          : "reject",
                machine_state_name(it.state));
        status = CLI_EXIT_REFUSED;
        goto out;
    }

    what[0] = '\0';
    if (posted) {
        enum verify_result v = VERIFY_UNREADABLE;
        if (f)
            v = verify_posted(f, erp_url, &it, posted, what, sizeof(what));
        else
            snprintf(what, sizeof(what), "not verified: no flow given");
        switch (v) {
        case VERIFY_OK:
            break;
        case VERIFY_CONFLICT:
            fprintf(stderr, "apbot resolve: refused: %s\n", what);
            status = CLI_EXIT_REFUSED;
            goto out;
        case VERIFY_ABSENT:
            if (!force) {
                fprintf(stderr,
                        "apbot resolve: refused: %s; if you are sure, repeat with --force "
                        "REASON\n",
                        what);
                status = CLI_EXIT_REFUSED;
                goto out;
            }
            break;
        case VERIFY_UNREADABLE:
            if (!force) {
                fprintf(stderr, "apbot resolve: cannot verify document %s: %s\n", posted, what);
                status = CLI_EXIT_ERROR;
                goto out;
            }
            break;
        }
        if (v != VERIFY_OK)
            snprintf(detail, sizeof(detail), "posted as %s, FORCED without verification (%s): %s",
                     posted, what, force);
        else
            snprintf(detail, sizeof(detail), "posted as %s, %s", posted, what);
    } else if (requeue) {
        snprintf(detail, sizeof(detail), "requeued: looked up again before any post%s%s",
                 it.reason ? " (was: " : "", it.reason ? it.reason : "");
        if (it.reason)
            strncat(detail, ")", sizeof(detail) - strlen(detail) - 1);
    } else {
        snprintf(detail, sizeof(detail), "rejected: %s", reject);
    }
    if (note) {
        strncat(detail, "; note: ", sizeof(detail) - strlen(detail) - 1);
        strncat(detail, note, sizeof(detail) - strlen(detail) - 1);
    }

    memset(&ch, 0, sizeof(ch));
    ch.from = it.state;
    ch.event = event;
    ch.step = &step;
    ch.erp_doc = posted;
    ch.reason = reject ? reject : "";
    ch.detail = detail;
    ch.actor = actor;
    ch.keep_lease = false;
    rc = store_apply(st, id, NULL, &ch, NULL, NULL, err, sizeof(err));
    if (rc == APBOT_E_CONFLICT) {
        fprintf(stderr, "apbot resolve: refused: %s\n", err);
        status = CLI_EXIT_REFUSED;
        goto out;
    }
    if (rc == APBOT_E_STATE) {
        fprintf(stderr,
                "apbot resolve: refused: item #%lld changed meanwhile or is held by a "
                "runner: %s\n",
                (long long)id, err);
        status = CLI_EXIT_REFUSED;
        goto out;
    }
    if (rc != APBOT_OK) {
        fprintf(stderr, "apbot resolve: %s\n", err);
        goto out;
    }
    printf("item #%lld: %s -> %s by %s: %s\n", (long long)id, machine_state_name(it.state),
           machine_state_name(step.next), actor, detail);
    status = CLI_EXIT_OK;
out:
    if (have_item)
        store_item_done(&it);
    store_close(st);
    flow_free(f);
    free(flow_err);
    return status;
}
