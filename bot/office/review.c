/*
 * review.c - the review queue, one item's story, the item JSON shape and the resolve policy
 * (see review.h). The decisions are pure functions (review_allowed, review_verify_classify,
 * the input checks) with a thin driver, review_decide, that reads the item, asks the ERP
 * through the flow's lookup when a document is claimed, and applies the change in one write
 * transaction after checking that the item is still what the person saw. Printing and pages
 * are left to the command layer and serve.c.
 */
#include "apbot/review.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apbot/buf.h"
#include "apbot/erp.h"
#include "apbot/flow.h"
#include "apbot/invoice.h"
#include "apbot/mem.h"
#include "apbot/money.h"
#include "apbot/secret.h"
#include "apbot/text.h"
#include "erp/docmatch.h"
#include "queue/transition.h"

static const char *nz(const char *s)
{
    return s ? s : "";
}

/* ---- small copies ----------------------------------------------------------------------- */

/* A deep copy of a queue row (store_each hands rows valid only during its call). */
static void item_copy(struct store_item *dst, const struct store_item *src)
{
    *dst = *src;
    dst->lease_owner = apbot_xstrdup(src->lease_owner);
    dst->payload = apbot_xstrdup(src->payload);
    dst->source = apbot_xstrdup(src->source);
    dst->erp_doc = apbot_xstrdup(src->erp_doc);
    dst->reason = apbot_xstrdup(src->reason);
    dst->vendor_id = apbot_xstrdup(src->vendor_id);
    dst->vendor_name = apbot_xstrdup(src->vendor_name);
    dst->invoice_number = apbot_xstrdup(src->invoice_number);
}

static void exchange_copy(struct review_exchange *dst, int64_t id, int64_t at,
                          const struct store_evidence *ev)
{
    memset(dst, 0, sizeof(*dst));
    dst->id = id;
    dst->at = at;
    dst->step = apbot_xstrdup(ev->step);
    dst->method = apbot_xstrdup(ev->method);
    dst->url = apbot_xstrdup(ev->url);
    dst->transport = apbot_xstrdup(ev->transport);
    dst->rule = apbot_xstrdup(ev->rule);
    dst->outcome = apbot_xstrdup(ev->outcome);
    dst->excerpt = apbot_xstrdup(ev->excerpt);
    dst->http_status = ev->http_status;
    dst->elapsed_ms = ev->elapsed_ms;
}

static void exchange_done(struct review_exchange *x)
{
    free(x->step);
    free(x->method);
    free(x->url);
    free(x->transport);
    free(x->rule);
    free(x->outcome);
    free(x->excerpt);
    memset(x, 0, sizeof(*x));
}

static void event_done(struct review_event *e)
{
    free(e->from);
    free(e->to);
    free(e->event);
    free(e->detail);
    free(e->actor);
}

/* ---- versions ---------------------------------------------------------------------------- */

static int max_event_id(void *ctx, const struct store_event_row *row)
{
    int64_t *v = ctx;
    if (row->id > *v)
        *v = row->id;
    return 0;
}

int review_version(struct store *st, int64_t id, int64_t *ret_version, char *err, size_t errlen)
{
    int64_t v = 0;
    int rc = store_each_event(st, id, max_event_id, &v, err, errlen);
    if (rc != APBOT_OK)
        return rc;
    *ret_version = v;
    return APBOT_OK;
}

/* ---- the queue -------------------------------------------------------------------------- */

/* Case-insensitive (ASCII) substring test; an empty needle matches. */
static bool contains_ci(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    if (n == 0)
        return true;
    for (const char *p = hay; p && *p; p++) {
        size_t i = 0;
        while (i < n && p[i]) {
            unsigned char a = (unsigned char)p[i], b = (unsigned char)needle[i];
            if (a >= 'A' && a <= 'Z')
                a = (unsigned char)(a - 'A' + 'a');
            if (b >= 'A' && b <= 'Z')
                b = (unsigned char)(b - 'A' + 'a');
            if (a != b)
                break;
            i++;
        }
        if (i == n)
            return true;
    }
    return false;
}

struct queue_walk {
    struct review_queue *q;
    const struct review_filter *f;
    bool full;
};

static int queue_collect(void *ctx, const struct store_item *it)
{
    struct queue_walk *w = ctx;
    struct review_entry *e;

    if (w->f->vendor && *w->f->vendor && !contains_ci(it->vendor_id, w->f->vendor) &&
        !contains_ci(it->vendor_name, w->f->vendor))
        return 0;
    if (w->f->reason && *w->f->reason && !contains_ci(it->reason, w->f->reason))
        return 0;
    if (apbot_grow((void **)&w->q->v, &w->q->cap, w->q->n, sizeof(*w->q->v), REVIEW_QUEUE_MAX) !=
        APBOT_OK) {
        w->full = true;
        return 1;
    }
    e = &w->q->v[w->q->n++];
    memset(e, 0, sizeof(*e));
    item_copy(&e->item, it);
    return 0;
}

static int queue_last(void *ctx, const struct store_evidence_row *row)
{
    struct review_entry *e = ctx;
    if (e->has_last)
        exchange_done(&e->last);
    exchange_copy(&e->last, row->id, row->at, &row->ev);
    e->has_last = true;
    return 0;
}

static int entry_cmp(const void *a, const void *b)
{
    const struct review_entry *x = a, *y = b;
    if (x->item.created_at != y->item.created_at)
        return x->item.created_at < y->item.created_at ? -1 : 1;
    return x->item.id < y->item.id ? -1 : x->item.id > y->item.id;
}

int review_queue_load(struct store *st, const struct review_filter *f, struct review_queue *ret,
                      char *err, size_t errlen)
{
    struct review_queue q = {0};
    struct queue_walk w = {&q, f, false};
    int rc = APBOT_OK;

    if (f->manual_review)
        rc = store_each(st, MACHINE_MANUAL_REVIEW, queue_collect, &w, err, errlen);
    if (rc == APBOT_OK && f->exceptions)
        rc = store_each(st, MACHINE_BUSINESS_EXCEPTION, queue_collect, &w, err, errlen);
    if (w.full)
        rc = apbot_fail(err, errlen, APBOT_E_LIMIT, "more than %d items to review: filter them",
                        REVIEW_QUEUE_MAX);
    for (size_t i = 0; rc == APBOT_OK && i < q.n; i++) {
        rc = review_version(st, q.v[i].item.id, &q.v[i].version, err, errlen);
        if (rc == APBOT_OK)
            rc = store_each_evidence(st, q.v[i].item.id, queue_last, &q.v[i], err, errlen);
    }
    if (rc != APBOT_OK) {
        review_queue_done(&q);
        return rc;
    }
    if (q.n > 1)
        qsort(q.v, q.n, sizeof(*q.v), entry_cmp);
    *ret = q;
    return APBOT_OK;
}

void review_queue_done(struct review_queue *q)
{
    if (!q)
        return;
    for (size_t i = 0; i < q->n; i++) {
        store_item_done(&q->v[i].item);
        if (q->v[i].has_last)
            exchange_done(&q->v[i].last);
    }
    free(q->v);
    memset(q, 0, sizeof(*q));
}

const char *review_reason_words(const char *reason, char *buf, size_t len)
{
    const char *tail;
    size_t n;

    if (len == 0)
        return buf;
    reason = nz(reason);
    tail = strstr(reason, "; last outcome:");
    n = tail ? (size_t)(tail - reason) : strlen(reason);
    if (n >= len) {
        n = len - 1;
        while (n > 0 && ((unsigned char)reason[n] & 0xC0) == 0x80)
            n--;
    }
    memcpy(buf, reason, n);
    buf[n] = '\0';
    return buf;
}

/* ---- one item --------------------------------------------------------------------------- */

static int item_event(void *ctx, const struct store_event_row *row)
{
    struct review_item *x = ctx;
    struct review_event *e;

    if (apbot_grow((void **)&x->events, &x->cap_events, x->n_events, sizeof(*x->events),
                   REVIEW_ITEM_ROWS_MAX) != APBOT_OK)
        return APBOT_E_LIMIT;
    e = &x->events[x->n_events++];
    e->id = row->id;
    e->at = row->at;
    e->from = apbot_xstrdup(row->from);
    e->to = apbot_xstrdup(row->to);
    e->event = apbot_xstrdup(row->event);
    e->detail = apbot_xstrdup(row->detail);
    e->actor = apbot_xstrdup(row->actor);
    if (row->id > x->version)
        x->version = row->id;
    return 0;
}

static int item_evidence(void *ctx, const struct store_evidence_row *row)
{
    struct review_item *x = ctx;
    if (apbot_grow((void **)&x->evidence, &x->cap_evidence, x->n_evidence, sizeof(*x->evidence),
                   REVIEW_ITEM_ROWS_MAX) != APBOT_OK)
        return APBOT_E_LIMIT;
    exchange_copy(&x->evidence[x->n_evidence++], row->id, row->at, &row->ev);
    return 0;
}

int review_item_load(struct store *st, int64_t id, struct review_item *ret, char *err,
                     size_t errlen)
{
    struct review_item x;
    int rc;

    memset(&x, 0, sizeof(x));
    rc = store_get(st, id, &x.item, err, errlen);
    if (rc != APBOT_OK)
        return rc;
    rc = store_each_event(st, id, item_event, &x, err, errlen);
    if (rc == APBOT_OK)
        rc = store_each_evidence(st, id, item_evidence, &x, err, errlen);
    if (rc == APBOT_E_LIMIT)
        apbot_fail(err, errlen, rc, "item #%lld has more than %d events or exchanges",
                   (long long)id, REVIEW_ITEM_ROWS_MAX);
    if (rc != APBOT_OK) {
        review_item_done(&x);
        return rc;
    }
    *ret = x;
    return APBOT_OK;
}

void review_item_done(struct review_item *x)
{
    if (!x)
        return;
    store_item_done(&x->item);
    for (size_t i = 0; i < x->n_events; i++)
        event_done(&x->events[i]);
    free(x->events);
    for (size_t i = 0; i < x->n_evidence; i++)
        exchange_done(&x->evidence[i]);
    free(x->evidence);
    memset(x, 0, sizeof(*x));
}

/* ---- JSON ------------------------------------------------------------------------------- */

const char *review_iso_time(int64_t ms, char *buf, size_t len)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;

    if (len == 0)
        return buf;
    buf[0] = '\0';
    if (ms <= 0 || !gmtime_r(&t, &tm) || strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        buf[0] = '\0';
    return buf;
}

/* A string or null; "" is null too (an absent value). */
static json_t *jstr(const char *s)
{
    return s && *s ? json_string(s) : json_null();
}

static json_t *jtime(int64_t ms)
{
    char buf[32];
    return jstr(review_iso_time(ms, buf, sizeof(buf)));
}

struct json_t *review_item_json(const struct store_item *it, int64_t now)
{
    json_t *o = json_object();
    char total[48];

    if (!o)
        abort(); /* jansson fails only on out-of-memory (mem.h's policy) */
    if (money_format_plain(it->total, it->exponent, total, sizeof(total)) != APBOT_OK)
        snprintf(total, sizeof(total), "?");
    /* The order is part of the contract (people grep it): see docs/report.md. */
    json_object_set_new(o, "id", json_integer((json_int_t)it->id));
    json_object_set_new(o, "key", json_string(it->key));
    json_object_set_new(o, "state", json_string(machine_state_name(it->state)));
    json_object_set_new(o, "vendor_id", jstr(it->vendor_id));
    json_object_set_new(o, "vendor_name", jstr(it->vendor_name));
    json_object_set_new(o, "invoice_number", jstr(it->invoice_number));
    json_object_set_new(o, "doc_type", jstr(it->doc_type));
    json_object_set_new(o, "issue_date", jstr(it->issue_date));
    json_object_set_new(o, "currency", jstr(it->currency));
    json_object_set_new(o, "total", json_string(total));
    json_object_set_new(o, "erp_doc", jstr(it->erp_doc));
    json_object_set_new(o, "reason", jstr(it->reason));
    json_object_set_new(o, "source", jstr(it->source));
    json_object_set_new(o, "posts", json_integer(it->counters.posts));
    json_object_set_new(o, "created_at", jtime(it->created_at));
    json_object_set_new(o, "total_minor", json_integer((json_int_t)it->total));
    json_object_set_new(o, "exponent", json_integer(it->exponent));
    json_object_set_new(o, "cycles", json_integer(it->counters.cycles));
    json_object_set_new(o, "attempts", json_integer(it->counters.attempts));
    json_object_set_new(o, "updated_at", jtime(it->updated_at));
    json_object_set_new(
        o, "age_s",
        json_integer((json_int_t)(now > it->created_at ? (now - it->created_at) / 1000 : 0)));
    return o;
}

/* Copies at most max bytes of s, cut at a UTF-8 boundary, "..." appended when cut. Heap. */
static char *shorten(const char *s, size_t max)
{
    size_t n = strlen(s);
    char *d;

    if (max == 0 || n <= max)
        return apbot_xstrdup(s);
    n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    d = apbot_xmalloc(n + 4);
    memcpy(d, s, n);
    memcpy(d + n, "...", 4);
    return d;
}

struct json_t *review_exchange_json(const struct review_exchange *x, size_t excerpt_max)
{
    json_t *o = json_object();
    if (!o)
        abort(); /* jansson fails only on out-of-memory (mem.h's policy) */
    json_object_set_new(o, "at", jtime(x->at));
    json_object_set_new(o, "step", jstr(x->step));
    json_object_set_new(o, "method", jstr(x->method));
    json_object_set_new(o, "url", jstr(x->url));
    json_object_set_new(o, "http_status", json_integer(x->http_status));
    json_object_set_new(o, "elapsed_ms", json_integer((json_int_t)x->elapsed_ms));
    json_object_set_new(o, "transport", jstr(x->transport));
    json_object_set_new(o, "rule", jstr(x->rule));
    json_object_set_new(o, "outcome", jstr(x->outcome));
    if (x->excerpt) {
        char *s = shorten(x->excerpt, excerpt_max);
        json_object_set_new(o, "excerpt", jstr(s));
        free(s);
    } else {
        json_object_set_new(o, "excerpt", json_null());
    }
    return o;
}

struct json_t *review_event_json(const struct review_event *e)
{
    json_t *o = json_object();
    if (!o)
        abort(); /* jansson fails only on out-of-memory (mem.h's policy) */
    json_object_set_new(o, "at", jtime(e->at));
    json_object_set_new(o, "from", jstr(e->from));
    json_object_set_new(o, "to", jstr(e->to));
    json_object_set_new(o, "event", jstr(e->event));
    json_object_set_new(o, "actor", jstr(e->actor));
    json_object_set_new(o, "detail", jstr(e->detail));
    return o;
}

/* ---- the policy (pure) ------------------------------------------------------------------ */

static const char *const action_names[] = {
    [REVIEW_POSTED] = "posted",
    [REVIEW_REQUEUE] = "requeue",
    [REVIEW_REJECT] = "reject",
};
_Static_assert(sizeof(action_names) / sizeof(action_names[0]) == REVIEW_ACTION__COUNT,
               "every review_action needs a name");

const char *review_action_name(enum review_action a)
{
    if ((int)a < 0 || a >= REVIEW_ACTION__COUNT)
        return "invalid";
    return action_names[a];
}

enum review_action review_action_from_name(const char *name)
{
    for (int a = 0; name && a < REVIEW_ACTION__COUNT; a++)
        if (strcmp(name, action_names[a]) == 0)
            return (enum review_action)a;
    return REVIEW_ACTION__COUNT;
}

static enum machine_event action_event(enum review_action a)
{
    switch (a) {
    case REVIEW_POSTED:
        return MACHINE_EV_RESOLVE_POSTED;
    case REVIEW_REQUEUE:
        return MACHINE_EV_RESOLVE_REQUEUE;
    case REVIEW_REJECT:
        return MACHINE_EV_RESOLVE_REJECT;
    case REVIEW_ACTION__COUNT:
        break;
    }
    return MACHINE_EVENT_INVALID;
}

static const char *action_verb(enum review_action a)
{
    switch (a) {
    case REVIEW_POSTED:
        return "mark as posted";
    case REVIEW_REQUEUE:
        return "requeue";
    case REVIEW_REJECT:
        return "reject";
    case REVIEW_ACTION__COUNT:
        break;
    }
    return "decide on";
}

int review_allowed(enum machine_state state, enum review_action action, const char *erp_doc,
                   char *why, size_t len)
{
    struct machine_policy pol = machine_policy_default();
    struct machine_counters c = {0};
    struct machine_step step;

    if ((int)action < 0 || action >= REVIEW_ACTION__COUNT)
        return apbot_fail(why, len, APBOT_E_STATE, "there is no such decision");
    switch (state) {
    case MACHINE_COMPLETED:
        return apbot_fail(why, len, APBOT_E_STATE,
                          "it is completed (document %s); there is nothing to resolve",
                          erp_doc ? erp_doc : "?");
    case MACHINE_NEW:
    case MACHINE_CHECKING:
    case MACHINE_POSTING:
    case MACHINE_RECONCILING:
    case MACHINE_FINISHING:
        return apbot_fail(why, len, APBOT_E_STATE,
                          "it is %s: the bot is still working on it; only manual-review and "
                          "business-exception items can be resolved",
                          machine_state_name(state));
    case MACHINE_BUSINESS_EXCEPTION:
    case MACHINE_MANUAL_REVIEW:
        break;
    case MACHINE_STATE__COUNT:
    case MACHINE_STATE_INVALID:
        return apbot_fail(why, len, APBOT_E_STATE, "it is in an unknown state");
    }
    /* the state machine has the last word: a business exception is not rejected again */
    if (machine_next(state, action_event(action), &c, &pol, &step) != APBOT_OK)
        return apbot_fail(why, len, APBOT_E_STATE, "cannot %s an item that is %s",
                          action_verb(action), machine_state_name(state));
    if (why && len)
        why[0] = '\0';
    return APBOT_OK;
}

bool review_name_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > REVIEW_NAME_MAX)
        return false;
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-' || c == '@'))
            return false;
    }
    return true;
}

bool review_text_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > REVIEW_TEXT_MAX)
        return false;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7F)
            return false;
    if (!invoice_utf8_valid(s))
        return false;
    return s[strspn(s, " ")] != '\0';
}

bool review_doc_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > REVIEW_DOC_MAX)
        return false;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p <= 0x20 || *p >= 0x7F)
            return false;
    return true;
}

/* ---- verification ----------------------------------------------------------------------- */

static const char *const verify_names[] = {"verified", "absent", "conflict", "unreadable",
                                           "unchecked"};

const char *review_verify_name(enum review_verify v)
{
    if ((int)v < 0 || (size_t)v >= sizeof(verify_names) / sizeof(verify_names[0]))
        return "invalid";
    return verify_names[v];
}

enum review_verify review_verify_classify(const struct store_item *it, const char *doc,
                                          const struct erp_lookup_result *res, char *what,
                                          size_t len)
{
    struct docmatch_invoice inv;
    char mine[48], why[512];
    const struct erp_row *held = NULL;

    inv = docmatch_invoice_of(it->vendor_id, it->currency, it->exponent, it->total, it->doc_type);
    money_text(it->total, it->exponent, mine, sizeof(mine));
    switch (res->answer) {
    case ERP_FAILED:
        snprintf(what, len, "the ERP lookup failed: %s", res->detail);
        return REVIEW_UNREADABLE;
    case ERP_FOUND_UNFINISHED:
        /* a draft carrying the key is not a posting: the bot finishes it (never forced) */
        snprintf(what, len,
                 "the ERP holds key %s as document %s saved but not finished (a draft): it "
                 "is not posted; requeue it and the bot finishes it",
                 it->key, res->hits.n > 0 && res->hits.rows[0].doc ? res->hits.rows[0].doc : "?");
        return REVIEW_CONFLICT;
    case ERP_NOT_FOUND:
        snprintf(what, len, "the ERP holds no document for key %s", it->key);
        return REVIEW_ABSENT;
    case ERP_FOUND:
        break;
    }
    if (res->hits.n == 0) {
        snprintf(what, len, "the ERP holds no document for key %s", it->key);
        return REVIEW_ABSENT;
    }
    for (size_t i = 0; i < res->hits.n; i++) {
        const struct erp_row *h = &res->hits.rows[i];
        struct docmatch_record rec;
        unsigned diff;

        docmatch_record_of_row(h, &rec);
        diff = docmatch_compare(&inv, &rec);
        if (diff != DOCMATCH_SAME) {
            snprintf(what, len, "the ERP holds key %s as document %s with %s", it->key,
                     h->doc ? h->doc : "?", docmatch_describe(diff, &inv, &rec, why, sizeof(why)));
            return REVIEW_CONFLICT;
        }
        if (h->doc && doc && strcmp(h->doc, doc) == 0)
            held = h;
    }
    if (res->hits.n > 1) {
        snprintf(what, len,
                 "the ERP holds key %s %zu times (a duplicate): settle the duplicate first",
                 it->key, res->hits.n);
        return REVIEW_CONFLICT;
    }
    if (!held) {
        snprintf(what, len, "the ERP holds key %s as document %s, not %s", it->key,
                 res->hits.rows[0].doc ? res->hits.rows[0].doc : "?", nz(doc));
        return REVIEW_CONFLICT;
    }
    snprintf(what, len, "verified in the ERP: key %s is document %s with %s %s", it->key, nz(doc),
             mine, it->currency);
    return REVIEW_VERIFIED;
}

struct verify_ctx {
    struct review_verification *v;
    const char *user, *password;
};

/* The evidence callback of the verification's ERP session: a masked copy of each exchange. */
static void verify_evidence(void *ctx, const struct erp_exchange *xc)
{
    const struct store_evidence ev = {
        .step = xc->step,
        .method = xc->method,
        .url = xc->url,
        .http_status = xc->http_status,
        .elapsed_ms = xc->elapsed_ms,
        .transport = xc->transport,
        .rule = xc->rule,
        .outcome = xc->outcome,
        .excerpt = xc->excerpt,
    };
    struct verify_ctx *c = ctx;
    struct review_verification *v = c->v;
    struct review_exchange *x;
    char *url, *excerpt;

    /* a lookup is a handful of exchanges; past 32 it is a loop not worth keeping */
    if (apbot_grow((void **)&v->exchanges, &v->cap_exchanges, v->n_exchanges, sizeof(*v->exchanges),
                   32) != APBOT_OK)
        return;
    x = &v->exchanges[v->n_exchanges++];
    exchange_copy(x, 0, store_now_ms(), &ev);
    url = text_mask(x->url, c->password, c->user);
    excerpt = text_mask(x->excerpt, c->password, c->user);
    free(x->url);
    free(x->excerpt);
    x->url = url;
    x->excerpt = excerpt;
}

void review_verify_posted(const struct flow *f, const char *erp_url, const struct store_item *it,
                          const char *doc, struct review_verification *ret)
{
    struct erp_session *erp = NULL;
    struct erp_lookup_result res;
    struct invoice inv;
    struct verify_ctx vc;
    char err[APBOT_ERR_LEN] = "";
    bool have_inv;
    int rc;

    memset(ret, 0, sizeof(*ret));
    memset(&res, 0, sizeof(res));
    ret->verdict = REVIEW_UNREADABLE;
    vc.v = ret;
    char *user = secret_dup(SECRET_ERP_USER), *password = secret_dup(SECRET_ERP_PASSWORD);
    vc.user = user;
    vc.password = password;
    /* The payload gives the invoice fields a lookup by natural key compares. */
    have_inv = invoice_from_json(it->payload, &inv, err, sizeof(err)) == APBOT_OK;
    rc = erp_open(f, erp_url, NULL, &erp, err, sizeof(err));
    if (rc == APBOT_OK) {
        erp_set_retries(erp, 3);
        erp_set_evidence(erp, verify_evidence, &vc);
        rc = erp_lookup(erp, it->key, have_inv ? &inv : NULL, it->currency, &res, err, sizeof(err));
    }
    invoice_done(&inv);
    if (rc != APBOT_OK) {
        char *masked = text_mask(err, vc.password, vc.user);
        snprintf(ret->what, sizeof(ret->what), "the ERP could not be asked: %s", masked);
        free(masked);
    } else {
        ret->verdict = review_verify_classify(it, doc, &res, ret->what, sizeof(ret->what));
    }
    erp_lookup_result_done(&res);
    erp_close(erp);
    secret_free(user);
    secret_free(password);
}

void review_verification_done(struct review_verification *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->n_exchanges; i++)
        exchange_done(&v->exchanges[i]);
    free(v->exchanges);
    v->exchanges = NULL;
    v->n_exchanges = v->cap_exchanges = 0;
}

/* ---- deciding --------------------------------------------------------------------------- */

static int result_set(struct review_result *r, enum review_verdict v, const char *fmt, ...)
    APBOT_PRINTF(3, 4);
static int result_set(struct review_result *r, enum review_verdict v, const char *fmt, ...)
{
    va_list ap;
    r->verdict = v;
    va_start(ap, fmt);
    vsnprintf(r->message, sizeof(r->message), fmt, ap);
    va_end(ap);
    return APBOT_OK;
}

/* Appends s to the detail (cut to its size). */
static void detail_add(struct review_result *r, const char *s)
{
    size_t used = strlen(r->detail);
    if (used + 1 < sizeof(r->detail))
        snprintf(r->detail + used, sizeof(r->detail) - used, "%s", s);
}

/* The state machine's budgets from the flow (the default without one). */
static struct machine_policy policy_of(const struct flow *f)
{
    struct machine_policy p = machine_policy_default();
    if (f) {
        if (f->policy.max_posts > 0)
            p.max_posts = f->policy.max_posts;
        if (f->policy.max_cycles > 0)
            p.max_cycles = f->policy.max_cycles;
        if (f->policy.max_attempts > 0)
            p.max_attempts = f->policy.max_attempts;
    }
    return p;
}

/* Keeps the verification's exchanges as the item's evidence (best effort: the decision and
 * its audit event do not depend on it). */
static void keep_evidence(struct store *st, int64_t id, const struct review_verification *v)
{
    for (size_t i = 0; i < v->n_exchanges; i++) {
        const struct review_exchange *x = &v->exchanges[i];
        char step[64], err[APBOT_ERR_LEN];
        struct store_evidence ev = {
            .step = step,
            .method = x->method,
            .url = x->url,
            .http_status = x->http_status,
            .elapsed_ms = x->elapsed_ms,
            .transport = x->transport,
            .rule = x->rule,
            .outcome = x->outcome,
            .excerpt = x->excerpt,
        };
        snprintf(step, sizeof(step), "verify:%s", x->step ? x->step : "lookup");
        if (store_add_evidence(st, id, &ev, NULL, err, sizeof(err)) != APBOT_OK)
            break;
    }
}

static const char *const auth_names[REVIEW_AUTH__COUNT] = {
    [REVIEW_AUTH_CLI] = "command-line",
    [REVIEW_AUTH_PASSWORD] = "password",
    [REVIEW_AUTH_PROXY] = "proxy",
    [REVIEW_AUTH_SHARED] = "shared-password",
};

const char *review_auth_name(enum review_auth a)
{
    return (unsigned)a < REVIEW_AUTH__COUNT ? auth_names[a] : "invalid";
}

const char *review_who(const struct review_decision *d, char *buf, size_t len)
{
    const char *name = nz(d->operator_name);
    const bool display = d->display_name && *d->display_name;

    switch (d->auth) {
    case REVIEW_AUTH_CLI:
        snprintf(buf, len, "by %s on the command line, OS user %s", name,
                 d->os_user && *d->os_user ? d->os_user : "unknown");
        return buf;
    case REVIEW_AUTH_PASSWORD:
    case REVIEW_AUTH_PROXY:
        snprintf(buf, len, "by %s%s%s%s, %s", name, display ? " (" : "",
                 display ? d->display_name : "", display ? ")" : "",
                 d->auth == REVIEW_AUTH_PASSWORD ? "signed in with their own password"
                                                 : "identified by the company's login proxy");
        return buf;
    case REVIEW_AUTH_SHARED:
        snprintf(buf, len,
                 "by %s, signed in with the shared review password (the name is as typed at "
                 "sign-in)",
                 name);
        return buf;
    case REVIEW_AUTH__COUNT:
        break;
    }
    snprintf(buf, len, "by %s, authenticated in no known way", name);
    return buf;
}

/* Checks the decision's own fields. Returns false with the message set. */
static bool decision_ok(const struct review_decision *d, struct review_result *r)
{
    if ((int)d->action < 0 || d->action >= REVIEW_ACTION__COUNT) {
        result_set(r, REVIEW_INVALID, "choose a decision: posted, requeue or reject");
        return false;
    }
    if (!review_name_ok(d->operator_name)) {
        result_set(r, REVIEW_INVALID,
                   "%s; give the reviewer's name (letters, digits, . _ - @, at most %d)",
                   d->operator_name && *d->operator_name ? "the reviewer's name is not usable"
                                                         : "no reviewer's name",
                   REVIEW_NAME_MAX);
        return false;
    }
    if ((unsigned)d->auth >= REVIEW_AUTH__COUNT ||
        (d->display_name && *d->display_name && !review_text_ok(d->display_name)) ||
        (d->os_user && *d->os_user && !review_text_ok(d->os_user))) {
        result_set(r, REVIEW_INVALID, "who decides is not known well enough to record it");
        return false;
    }
    if (d->action == REVIEW_POSTED && !review_doc_ok(d->doc)) {
        result_set(r, REVIEW_INVALID, "'%s' is not a document number", nz(d->doc));
        return false;
    }
    if (d->action == REVIEW_REJECT && !review_text_ok(d->reason)) {
        result_set(r, REVIEW_INVALID, "a rejection needs a reason (1..%d printable bytes)",
                   REVIEW_TEXT_MAX);
        return false;
    }
    if (d->action != REVIEW_POSTED && d->force) {
        result_set(r, REVIEW_INVALID, "forcing only applies to a posted document");
        return false;
    }
    if ((d->force && !review_text_ok(d->force)) ||
        (d->note && *d->note && !review_text_ok(d->note))) {
        result_set(r, REVIEW_INVALID, "reasons and notes must be 1..%d printable bytes",
                   REVIEW_TEXT_MAX);
        return false;
    }
    if (d->require_note && !(d->note && review_text_ok(d->note))) {
        result_set(r, REVIEW_INVALID, "a note is required: say why (1..%d printable bytes)",
                   REVIEW_TEXT_MAX);
        return false;
    }
    return true;
}

/* Writes the audit detail of a decision that passed every check. */
static void decision_detail(const struct review_decision *d, const struct store_item *it,
                            struct review_result *r)
{
    char buf[1536], who[512];

    r->detail[0] = '\0';
    switch (d->action) {
    case REVIEW_POSTED:
        if (r->verify.verdict != REVIEW_VERIFIED)
            snprintf(buf, sizeof(buf), "posted as %s, FORCED without verification (%s): %s", d->doc,
                     r->verify.what, d->force);
        else
            snprintf(buf, sizeof(buf), "posted as %s, %s", d->doc, r->verify.what);
        break;
    case REVIEW_REQUEUE:
        snprintf(buf, sizeof(buf), "requeued: looked up again before any post%s%s%s",
                 it->reason ? " (was: " : "", nz(it->reason), it->reason ? ")" : "");
        break;
    case REVIEW_REJECT:
        snprintf(buf, sizeof(buf), "rejected: %s", d->reason);
        break;
    case REVIEW_ACTION__COUNT:
        buf[0] = '\0';
        break;
    }
    detail_add(r, buf);
    if (d->note && *d->note) {
        detail_add(r, "; note: ");
        detail_add(r, d->note);
    }
    /* who decided is never cut: what comes before it makes room */
    review_who(d, who, sizeof(who));
    if (strlen(r->detail) + 2 + strlen(who) >= sizeof(r->detail)) {
        text_cut_utf8(r->detail, sizeof(r->detail) - 6 - strlen(who));
        detail_add(r, "...");
    }
    detail_add(r, "; ");
    detail_add(r, who);
}

int review_decide(struct store *st, const struct flow *f, const char *erp_url,
                  const struct review_decision *d, struct review_result *ret)
{
    struct machine_policy pol = policy_of(f);
    struct store_item it;
    struct machine_step step;
    char err[APBOT_ERR_LEN], why[512];
    int64_t seen = 0, holder = 0;
    bool have_item = false;
    int rc;

    memset(ret, 0, sizeof(*ret));
    memset(&it, 0, sizeof(it));
    ret->from = ret->to = MACHINE_STATE_INVALID;
    ret->verify.verdict = REVIEW_UNCHECKED;
    if (!decision_ok(d, ret))
        return APBOT_OK;
    snprintf(ret->actor, sizeof(ret->actor), "operator:%s", d->operator_name);
    if (d->action == REVIEW_POSTED && !f && !d->force) {
        result_set(ret, REVIEW_INVALID,
                   "a posted document is verified in the ERP: give the flow (or force it with "
                   "a reason)");
        return APBOT_OK;
    }

    /* what the person decided on */
    rc = store_get(st, d->id, &it, err, sizeof(err));
    if (rc == APBOT_E_NOTFOUND) {
        ret->not_found = true;
        return result_set(ret, REVIEW_REFUSED, "no item #%lld in the queue", (long long)d->id);
    }
    if (rc != APBOT_OK)
        return result_set(ret, REVIEW_FAILED, "%s", err);
    have_item = true;
    ret->from = it.state;
    rc = review_version(st, d->id, &seen, err, sizeof(err));
    if (rc != APBOT_OK) {
        result_set(ret, REVIEW_FAILED, "%s", err);
        goto out;
    }
    ret->version = seen;
    if (d->expect_version > 0 && seen != d->expect_version) {
        ret->stale = true;
        result_set(ret, REVIEW_REFUSED,
                   "item #%lld changed since you saw it (it is now %s): look at it again "
                   "before you decide",
                   (long long)d->id, machine_state_name(it.state));
        goto out;
    }
    if (review_allowed(it.state, d->action, it.erp_doc, why, sizeof(why)) != APBOT_OK) {
        result_set(ret, REVIEW_REFUSED, "item #%lld: %s", (long long)d->id, why);
        goto out;
    }
    if (machine_next(it.state, action_event(d->action), &it.counters, &pol, &step) != APBOT_OK) {
        result_set(ret, REVIEW_REFUSED, "item #%lld: cannot %s an item that is %s",
                   (long long)d->id, action_verb(d->action), machine_state_name(it.state));
        goto out;
    }

    /* a claimed document is asked for in the ERP before anything is recorded */
    if (d->action == REVIEW_POSTED) {
        if (f) {
            review_verify_posted(f, erp_url, &it, d->doc, &ret->verify);
            keep_evidence(st, it.id, &ret->verify);
        } else {
            ret->verify.verdict = REVIEW_UNCHECKED;
            snprintf(ret->verify.what, sizeof(ret->verify.what), "not verified: no flow given");
        }
        switch (ret->verify.verdict) {
        case REVIEW_VERIFIED:
            break;
        case REVIEW_CONFLICT:
            result_set(ret, REVIEW_REFUSED, "%s", ret->verify.what);
            goto out;
        case REVIEW_ABSENT:
            if (!d->force) {
                result_set(ret, REVIEW_REFUSED, "%s", ret->verify.what);
                goto out;
            }
            break;
        case REVIEW_UNREADABLE:
            if (!d->force) {
                result_set(ret, REVIEW_UNVERIFIABLE,
                           "cannot verify document %s: %s (checking a posted document needs the "
                           "ERP; requeue and reject do not)",
                           d->doc, ret->verify.what);
                goto out;
            }
            break;
        case REVIEW_UNCHECKED:
            break;
        }
    }
    decision_detail(d, &it, ret);

    /* One write transaction: the item must still be what was checked above. */
    rc = store_begin(st, err, sizeof(err));
    if (rc != APBOT_OK) {
        result_set(ret, REVIEW_FAILED, "%s", err);
        goto out;
    }
    {
        struct store_item now_it;
        int64_t v = 0;
        memset(&now_it, 0, sizeof(now_it));
        rc = store_get(st, d->id, &now_it, err, sizeof(err));
        if (rc == APBOT_OK)
            rc = review_version(st, d->id, &v, err, sizeof(err));
        if (rc == APBOT_OK && (v != seen || now_it.state != it.state)) {
            ret->stale = true;
            ret->version = v;
            store_rollback(st);
            result_set(ret, REVIEW_REFUSED,
                       "item #%lld changed while the decision was checked (it is now %s): "
                       "nothing was recorded",
                       (long long)d->id, machine_state_name(now_it.state));
            store_item_done(&now_it);
            goto out;
        }
        store_item_done(&now_it);
        if (rc != APBOT_OK) {
            store_rollback(st);
            result_set(ret, REVIEW_FAILED, "%s", err);
            goto out;
        }
    }
    {
        /* The one state setter: the machine decides, the store persists, one audit event. */
        struct transition_env env = {
            .st = st,
            .policy = &pol,
            .actor = ret->actor,
        };
        struct transition_in in = {
            .event = action_event(d->action),
            .doc = d->action == REVIEW_POSTED ? d->doc : NULL,
            .reason = d->action == REVIEW_REJECT ? d->reason : "",
            .detail = ret->detail,
            .refuse_conflict = true,
        };
        struct transition_out out;
        rc = transition_apply(&env, &it, &in, &out, err, sizeof(err));
        holder = out.conflict_with;
    }
    if (rc == APBOT_OK)
        rc = store_commit(st, err, sizeof(err));
    if (rc != APBOT_OK) {
        store_rollback(st);
        if (rc == APBOT_E_CONFLICT) {
            /* one document, one item: another item already holds it */
            result_set(ret, REVIEW_REFUSED,
                       "document %s is already held by item #%lld: one document, one item",
                       d->doc ? d->doc : "?", (long long)holder);
        } else if (rc == APBOT_E_STATE) {
            ret->stale = true;
            result_set(ret, REVIEW_REFUSED,
                       "item #%lld changed meanwhile or is held by a runner: %s", (long long)d->id,
                       err);
        } else {
            result_set(ret, REVIEW_FAILED, "%s", err);
        }
        goto out;
    }
    ret->to = step.next;
    if (review_version(st, d->id, &ret->version, err, sizeof(err)) != APBOT_OK)
        ret->version = 0;
    result_set(ret, REVIEW_DONE, "item #%lld: %s -> %s by %s: %s", (long long)d->id,
               machine_state_name(ret->from), machine_state_name(step.next), ret->actor,
               ret->detail);
out:
    if (have_item)
        store_item_done(&it);
    return APBOT_OK;
}

void review_result_done(struct review_result *r)
{
    if (!r)
        return;
    review_verification_done(&r->verify);
}
