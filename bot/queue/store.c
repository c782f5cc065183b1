/*
 * store.c - the queue's one interface: picks the backend by the path's form, checks every
 * call's arguments and hands it to the backend's operation (store-int.h), and holds what
 * every backend shares: the pure stamp decisions, the busy-retry loop, crash recovery over
 * store_each_expired + store_apply, the invoice-to-row step of enqueue, and store_copy.
 *
 * Backends: store_sqlite.c (a file, the embedded default) and store_pg.c (PostgreSQL through
 * libpq, for several hosts on one queue). A path is PostgreSQL when it is a postgresql:// or
 * postgres:// URI or a libpq key=value connection string (e.g. "service=apbot"); anything
 * else is a SQLite file (or ":memory:"). Nothing here prints a path as given: messages use
 * store_path_display, which never shows a password.
 */
#include "apbot/store.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "apbot/invoice.h"
#include "apbot/mem.h"
#include "base/unittest.h"
#include "store-int.h"
#include "store-test.h"

/* ---- choosing a backend ------------------------------------------------------------------ */

/* Implemented in store_pg.c (libpq parses the connection string). */
bool store_pg_is_conninfo(const char *path);
bool store_pg_has_password(const char *path);

static bool starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

UNITTEST bool store_path_is_pg(const char *path)
{
    if (!path || !*path)
        return false;
    if (starts_with(path, "postgresql://") || starts_with(path, "postgres://"))
        return true;
    return strchr(path, '=') && !strstr(path, "://") && store_pg_is_conninfo(path);
}

bool store_path_is_file(const char *path)
{
    return path && *path && !store_path_is_pg(path) && strcmp(path, ":memory:") != 0 &&
           !starts_with(path, "file:") && !strstr(path, "://");
}

bool store_path_has_password(const char *path)
{
    if (!path)
        return false;
    if (store_path_is_pg(path))
        return store_pg_has_password(path);
    /* Not a queue we can open, but a password in it must still be kept out of sight. */
    char shown[512];
    store_path_display(path, shown, sizeof(shown));
    return strcmp(shown, path) != 0;
}

/* Appends at most n bytes of s to buf (length len, used *pos), NUL-terminated. */
static void put(char *buf, size_t len, size_t *pos, const char *s, size_t n)
{
    while (n-- > 0 && *s && *pos + 1 < len)
        buf[(*pos)++] = *s++;
    buf[*pos] = '\0';
}

void store_path_display(const char *path, char *buf, size_t len)
{
    if (!buf || len == 0)
        return;
    buf[0] = '\0';
    if (!path)
        return;
    size_t pos = 0;
    const char *p = path;
    /* scheme://user:password@host...: the password becomes *** */
    const char *scheme = strstr(p, "://");
    if (scheme) {
        const char *auth = scheme + 3;
        size_t alen = strcspn(auth, "/?#");
        const char *at = NULL;
        for (size_t i = 0; i < alen; i++)
            if (auth[i] == '@')
                at = auth + i;
        const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
        if (colon) {
            put(buf, len, &pos, p, (size_t)(colon + 1 - p));
            put(buf, len, &pos, "***", 3);
            p = at;
        }
    }
    /* password=VALUE (a URI parameter or a key=value pair, quoted or not) */
    while (*p) {
        const char *hit = strstr(p, "password");
        if (!hit) {
            put(buf, len, &pos, p, strlen(p));
            break;
        }
        const char *q = hit + 8;
        while (*q == ' ' || *q == '\t')
            q++;
        bool word =
            hit == path || hit[-1] == ' ' || hit[-1] == '?' || hit[-1] == '&' || hit[-1] == '\t';
        if (*q != '=' || !word) {
            put(buf, len, &pos, p, (size_t)(hit + 8 - p));
            p = hit + 8;
            continue;
        }
        q++;
        put(buf, len, &pos, p, (size_t)(q - p));
        put(buf, len, &pos, "***", 3);
        while (*q == ' ' || *q == '\t')
            q++;
        if (*q == '\'') {
            for (q++; *q && *q != '\''; q++)
                if (*q == '\\' && q[1])
                    q++;
            if (*q)
                q++;
        } else {
            while (*q && *q != ' ' && *q != '\t' && *q != '&' && *q != '#')
                q++;
        }
        p = q;
    }
}

int store_open(const char *path, struct store **ret, char *err, size_t errlen)
{
    if (!path || !*path || !ret)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: no database path");
    *ret = NULL;
    if (store_path_is_pg(path))
        return store_pg_open(path, ret, err, errlen);
    if (strstr(path, "://") && !starts_with(path, "file:")) {
        char shown[512];
        store_path_display(path, shown, sizeof(shown));
        return apbot_fail(err, errlen, APBOT_E_INVAL,
                          "store: %s: not a database this apbot knows (a SQLite file, or a "
                          "postgresql:// URI)",
                          shown);
    }
    return store_sqlite_open(path, ret, err, errlen);
}

void store_close(struct store *st)
{
    if (st)
        st->ops->close(st);
}

const char *store_backend(const struct store *st)
{
    return st ? st->ops->name : "none";
}

bool store_server_clock(const struct store *st)
{
    return st && st->server_clock;
}

/* ---- shared machinery -------------------------------------------------------------------- */

static atomic_bool trust_caller_clock;

UNITTEST void store_test_trust_caller_clock(bool on)
{
    atomic_store(&trust_caller_clock, on);
}

bool store_caller_clock_trusted(void)
{
    return atomic_load(&trust_caller_clock);
}

/* Every required operation is in STORE_REQUIRED_OPS: the table has its name, those,
 * apply_claim and enqueue_many, all pointers (of one size on every platform apbot builds on). */
#define STORE_OP_ONE(op) +1
_Static_assert(sizeof(struct store_ops) ==
                   sizeof(const char *) +
                       (0 STORE_REQUIRED_OPS(STORE_OP_ONE) + 2) * sizeof(void (*)(void)),
               "an operation of struct store_ops is missing from STORE_REQUIRED_OPS");
#undef STORE_OP_ONE

int store_base_init(struct store *st, const struct store_ops *ops, char *err, size_t errlen)
{
    if (!ops || !ops->name)
        return apbot_fail(err, errlen, APBOT_E_BUG, "store: a backend without a name");
#define STORE_OP_CHECK(op)                                                                         \
    if (!ops->op)                                                                                  \
        return apbot_fail(err, errlen, APBOT_E_BUG,                                                \
                          "store: the %s backend has no " #op " operation", ops->name);
    STORE_REQUIRED_OPS(STORE_OP_CHECK)
#undef STORE_OP_CHECK
    st->ops = ops;
    st->busy_retries = STORE_BUSY_RETRIES;
    st->rng =
        (uint64_t)apbot_clock_mono_ms() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)st;
    if (!st->rng)
        st->rng = 1;
    return APBOT_OK;
}

/* xorshift64*: jitter only, never a secret. */
static uint64_t rng_next(struct store *st)
{
    uint64_t x = st->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    st->rng = x;
    return x * UINT64_C(2685821657736338717);
}

/* The pause before retry n: uniform in [d/2, d], d = min(cap, base * 2^n). */
static void busy_pause(struct store *st, int n)
{
    int64_t d = STORE_BUSY_PAUSE_BASE_MS;
    for (int i = 0; i < n && d < STORE_BUSY_PAUSE_CAP_MS; i++)
        d *= 2;
    if (d > STORE_BUSY_PAUSE_CAP_MS)
        d = STORE_BUSY_PAUSE_CAP_MS;
    int64_t ms = d / 2 + (int64_t)(rng_next(st) % (uint64_t)(d / 2 + 1));
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int store_run_write(struct store *st, store_tx_begin_fn begin, store_tx_end_fn end,
                    store_tx_body body, void *ctx, char *err, size_t errlen)
{
    for (int attempt = 0;; attempt++) {
        int r = begin(st, err, errlen);
        if (r == APBOT_OK) {
            r = body(st, ctx, err, errlen);
            r = end(st, r, err, errlen);
        }
        if (r != APBOT_E_BUSY || st->in_batch || attempt >= st->busy_retries)
            return r;
        st->busy_retried++;
        busy_pause(st, attempt);
    }
}

size_t store_text_cut(const char *v, size_t max)
{
    size_t n = strnlen(v, max + 1);
    if (n > max) {
        n = max;
        while (n > 0 && ((unsigned char)v[n] & 0xC0) == 0x80)
            n--;
    }
    return n;
}

void store_event_detail(const struct machine_step *step, const char *detail, char *buf, size_t len)
{
    if (detail && *detail)
        snprintf(buf, len, "%s: %s", step->why ? step->why : "", detail);
    else
        snprintf(buf, len, "%s", step->why ? step->why : "");
}

int64_t store_now_ms(void)
{
    return apbot_clock_wall_ms();
}

/* The caller's clock reading, or a fresh one in *buf. */
static const struct apbot_now *now_or_read(const struct apbot_now *now, struct apbot_now *buf)
{
    if (now)
        return now;
    apbot_clock_now(buf);
    return buf;
}

void store_item_done(struct store_item *item)
{
    if (!item)
        return;
    free(item->lease_owner);
    free(item->payload);
    free(item->source);
    free(item->erp_doc);
    free(item->reason);
    free(item->vendor_id);
    free(item->vendor_name);
    free(item->invoice_number);
    item->lease_owner = item->payload = item->source = item->erp_doc = item->reason = NULL;
    item->vendor_id = item->vendor_name = item->invoice_number = NULL;
}

/* ---- the operations ------------------------------------------------------------------------ */

int store_begin(struct store *st, char *err, size_t errlen)
{
    if (!st)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: no store");
    if (st->in_batch)
        return apbot_fail(err, errlen, APBOT_E_STATE, "store: a batch is already open");
    int rc = st->ops->begin(st, err, errlen);
    if (rc == APBOT_OK)
        st->in_batch = true;
    return rc;
}

int store_commit(struct store *st, char *err, size_t errlen)
{
    if (!st || !st->in_batch)
        return apbot_fail(err, errlen, APBOT_E_STATE, "store: no batch is open");
    int rc = st->ops->commit(st, err, errlen);
    /* A failed COMMIT (busy) leaves the transaction open: the caller retries or rolls back. */
    if (rc == APBOT_OK)
        st->in_batch = false;
    return rc;
}

void store_rollback(struct store *st)
{
    if (!st)
        return;
    st->ops->rollback(st);
    st->in_batch = false;
}

UNITTEST int store_enqueue_raw(struct store *st, const struct store_new_item *ni,
                               const struct apbot_now *now, enum store_enqueue_result *ret_result,
                               int64_t *ret_id, char *err, size_t errlen)
{
    if (!st || !ni || !ni->key || !ni->fingerprint || !ni->payload || !ni->vendor_id ||
        !ni->invoice_number || !ni->doc_type || !ni->issue_date || !ni->currency || !ret_result ||
        !ret_id)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: incomplete item");
    struct apbot_now buf;
    enum store_enqueue_result res = STORE_ENQ_QUEUED;
    int64_t id = 0;
    int r = st->ops->enqueue(st, ni, now_or_read(now, &buf), &res, &id, err, errlen);
    if (r)
        return r;
    *ret_result = res;
    *ret_id = id;
    return APBOT_OK;
}

int store_enqueue(struct store *st, const struct invoice *inv, const char *source,
                  const struct apbot_now *now, enum store_enqueue_result *ret_result,
                  int64_t *ret_id, char *err, size_t errlen)
{
    if (!st || !inv)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: no invoice");
    char key[INVOICE_KEY_LEN + 1];
    char fp[INVOICE_FP_LEN + 1];
    int r = invoice_identity_key(inv, key);
    if (r)
        return apbot_fail(err, errlen, r, "store: cannot compute the identity key");
    r = invoice_fingerprint(inv, fp);
    if (r)
        return apbot_fail(err, errlen, r, "store: cannot compute the fingerprint");
    char *payload = invoice_to_json(inv);
    if (!payload)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: invoice has no canonical form");
    struct store_new_item ni = {
        .key = key,
        .fingerprint = fp,
        .payload = payload,
        .source = source,
        .vendor_id = inv->vendor_id,
        .vendor_name = inv->vendor_name,
        .invoice_number = inv->invoice_number,
        .doc_type = invoice_doc_type_name(inv->doc_type),
        .issue_date = inv->issue_date,
        .currency = inv->currency,
        .exponent = inv->exponent,
        .total = inv->payable,
    };
    r = store_enqueue_raw(st, &ni, now, ret_result, ret_id, err, errlen);
    free(payload);
    return r;
}

void store_conflict_detail(char *buf, size_t len, int64_t id, const char *key, const char *source,
                           const char *state)
{
    snprintf(buf, len,
             "same identity as queued item #%" PRId64 " (%s, from %s, state %s) but different "
             "content; not queued",
             id, key, source ? source : "?", state ? state : "?");
}

int store_enqueue_prepare(const struct invoice *inv, const char *source,
                          struct store_enqueue_req *ret, char *err, size_t errlen)
{
    if (!inv || !ret)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: no invoice");
    struct store_enqueue_req r;
    memset(&r, 0, sizeof(r));
    int rc = invoice_identity_key(inv, r.key);
    if (rc)
        return apbot_fail(err, errlen, rc, "store: cannot compute the identity key");
    rc = invoice_fingerprint(inv, r.fingerprint);
    if (rc)
        return apbot_fail(err, errlen, rc, "store: cannot compute the fingerprint");
    if (!inv->vendor_id || !inv->invoice_number)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: incomplete item");
    r.payload = invoice_to_json(inv);
    if (!r.payload)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: invoice has no canonical form");
    r.source = source ? apbot_xstrdup(source) : NULL;
    r.vendor_id = apbot_xstrdup(inv->vendor_id);
    r.vendor_name = inv->vendor_name ? apbot_xstrdup(inv->vendor_name) : NULL;
    r.invoice_number = apbot_xstrdup(inv->invoice_number);
    snprintf(r.doc_type, sizeof(r.doc_type), "%s", invoice_doc_type_name(inv->doc_type));
    snprintf(r.issue_date, sizeof(r.issue_date), "%s", inv->issue_date);
    snprintf(r.currency, sizeof(r.currency), "%s", inv->currency);
    r.exponent = inv->exponent;
    r.total = inv->payable;
    *ret = r;
    return APBOT_OK;
}

void store_enqueue_req_done(struct store_enqueue_req *req)
{
    if (!req)
        return;
    free(req->payload);
    free(req->source);
    free(req->vendor_id);
    free(req->vendor_name);
    free(req->invoice_number);
    free(req->detail);
    req->payload = req->source = req->vendor_id = req->vendor_name = req->invoice_number = NULL;
    req->detail = NULL;
}

/* A req as the backends' precomputed row. */
static struct store_new_item req_item(const struct store_enqueue_req *r)
{
    return (struct store_new_item){.key = r->key,
                                   .fingerprint = r->fingerprint,
                                   .payload = r->payload,
                                   .source = r->source,
                                   .vendor_id = r->vendor_id,
                                   .vendor_name = r->vendor_name,
                                   .invoice_number = r->invoice_number,
                                   .doc_type = r->doc_type,
                                   .issue_date = r->issue_date,
                                   .currency = r->currency,
                                   .exponent = r->exponent,
                                   .total = r->total};
}

/* store_enqueue_many for a backend without its own: one enqueue after the other, in the open
 * batch or in a batch of its own. */
static int enqueue_each(struct store *st, struct store_enqueue_req *reqs, size_t n,
                        const struct apbot_now *now, char *err, size_t errlen)
{
    bool own = !st->in_batch;
    int rc = own ? store_begin(st, err, errlen) : APBOT_OK;
    for (size_t i = 0; i < n && rc == APBOT_OK; i++) {
        struct store_new_item ni = req_item(&reqs[i]);
        char detail[APBOT_ERR_LEN] = "";
        enum store_enqueue_result res = STORE_ENQ_QUEUED;
        int64_t id = 0;
        rc = st->ops->enqueue(st, &ni, now, &res, &id, detail, sizeof(detail));
        if (rc) {
            (void)apbot_fail(err, errlen, rc, "%s", detail);
            break;
        }
        reqs[i].result = res;
        reqs[i].id = id;
        reqs[i].detail = res == STORE_ENQ_CONFLICT ? apbot_xstrdup(detail) : NULL;
    }
    if (own && rc == APBOT_OK)
        rc = store_commit(st, err, errlen);
    if (own && rc != APBOT_OK)
        store_rollback(st);
    return rc;
}

int store_enqueue_many(struct store *st, struct store_enqueue_req *reqs, size_t n,
                       const struct apbot_now *now, char *err, size_t errlen)
{
    if (!st || (n && !reqs))
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: bad arguments to enqueue_many");
    for (size_t i = 0; i < n; i++) {
        if (!reqs[i].payload || !reqs[i].vendor_id || !reqs[i].invoice_number || !reqs[i].key[0] ||
            !reqs[i].fingerprint[0])
            return apbot_fail(err, errlen, APBOT_E_INVAL, "store: incomplete item");
        free(reqs[i].detail);
        reqs[i].detail = NULL;
    }
    if (n == 0)
        return APBOT_OK;
    struct apbot_now buf;
    now = now_or_read(now, &buf);
    int rc = st->ops->enqueue_many ? st->ops->enqueue_many(st, reqs, n, now, err, errlen)
                                   : enqueue_each(st, reqs, n, now, err, errlen);
    if (rc != APBOT_OK)
        for (size_t i = 0; i < n; i++) {
            free(reqs[i].detail);
            reqs[i].detail = NULL;
        }
    return rc;
}

int store_get(struct store *st, int64_t id, struct store_item *ret, char *err, size_t errlen)
{
    if (!st || !ret)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: bad arguments");
    return st->ops->get(st, id, NULL, ret, err, errlen);
}

int store_get_by_key(struct store *st, const char *key, struct store_item *ret, char *err,
                     size_t errlen)
{
    if (!st || !key || !ret)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: no key");
    return st->ops->get(st, 0, key, ret, err, errlen);
}

int store_claim(struct store *st, const char *owner, const struct apbot_now *now, int64_t lease_ms,
                const struct machine_step *claimed, struct store_item *ret, char *err,
                size_t errlen)
{
    if (!st || !owner || !*owner || !claimed || !ret || lease_ms <= 0 || (int)claimed->next < 0 ||
        claimed->next >= MACHINE_STATE__COUNT)
        return apbot_fail(err, errlen, APBOT_E_INVAL,
                          "store: claim needs an owner, a lease and the claimed step");
    struct apbot_now buf;
    return st->ops->claim(st, owner, now_or_read(now, &buf), lease_ms, claimed, ret, err, errlen);
}

int store_claim_id(struct store *st, int64_t id, const char *owner, const struct apbot_now *now,
                   int64_t lease_ms, const struct machine_step *claimed, struct store_item *ret,
                   char *err, size_t errlen)
{
    if (!st || id <= 0 || !owner || !*owner || !claimed || !ret || lease_ms <= 0 ||
        (int)claimed->next < 0 || claimed->next >= MACHINE_STATE__COUNT)
        return apbot_fail(err, errlen, APBOT_E_INVAL,
                          "store: claim needs an item, an owner, a lease and the claimed step");
    struct apbot_now buf;
    return st->ops->claim_id(st, id, owner, now_or_read(now, &buf), lease_ms, claimed, ret, err,
                             errlen);
}

int store_renew(struct store *st, int64_t id, const char *owner, const struct apbot_now *now,
                int64_t lease_ms, char *err, size_t errlen)
{
    if (!st || !owner || lease_ms <= 0)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: renew needs owner and lease");
    struct apbot_now buf;
    return st->ops->renew(st, id, owner, now_or_read(now, &buf), lease_ms, err, errlen);
}

int store_apply(struct store *st, int64_t id, const char *owner, const struct store_change *ch,
                const struct apbot_now *now, int64_t *ret_holder, char *err, size_t errlen)
{
    return store_apply_get(st, id, owner, ch, now, ret_holder, NULL, err, errlen);
}

/* Whether a change is one store_apply may make (APBOT_E_INVAL in err when not). */
static int change_check(const char *owner, const struct store_change *ch, char *err, size_t errlen)
{
    if (!ch || !ch->step || (int)ch->from < 0 || ch->from >= MACHINE_STATE__COUNT ||
        (int)ch->step->next < 0 || ch->step->next >= MACHINE_STATE__COUNT || (int)ch->event < 0 ||
        ch->event >= MACHINE_EVENT__COUNT || (ch->erp_doc && !*ch->erp_doc) ||
        (owner && ch->take_over) || (ch->n_evidence && !ch->evidence))
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: invalid change");
    for (size_t i = 0; i < ch->n_evidence; i++)
        if (!ch->evidence[i].step)
            return apbot_fail(err, errlen, APBOT_E_INVAL, "store: evidence needs a step");
    return APBOT_OK;
}

int store_apply_claim(struct store *st, int64_t id, const char *owner,
                      const struct store_change *ch, const struct apbot_now *now,
                      int64_t *ret_holder, struct store_item *ret_item, int64_t lease_ms,
                      const struct machine_step *claimed, struct store_item *ret_next,
                      bool *ret_claimed, char *err, size_t errlen)
{
    if (ret_claimed)
        *ret_claimed = false;
    if (!st || !owner || !*owner || !ret_next || !ret_claimed || lease_ms <= 0 || !claimed ||
        (int)claimed->next < 0 || claimed->next >= MACHINE_STATE__COUNT)
        return apbot_fail(err, errlen, APBOT_E_INVAL,
                          "store: apply and claim need an owner, a lease and the claimed step");
    int r = change_check(owner, ch, err, errlen);
    if (r)
        return r;
    struct apbot_now buf;
    now = now_or_read(now, &buf);
    if (st->ops->apply_claim) {
        int64_t holder = 0;
        r = st->ops->apply_claim(st, id, owner, ch, now, &holder, ret_item, lease_ms, claimed,
                                 ret_next, ret_claimed, err, errlen);
        if (r == APBOT_E_CONFLICT && ret_holder)
            *ret_holder = holder;
        return r;
    }
    r = store_apply_get(st, id, owner, ch, now, ret_holder, ret_item, err, errlen);
    if (r == APBOT_OK)
        *ret_claimed =
            store_claim(st, owner, now, lease_ms, claimed, ret_next, NULL, 0) == APBOT_OK;
    return r;
}

int store_apply_get(struct store *st, int64_t id, const char *owner, const struct store_change *ch,
                    const struct apbot_now *now, int64_t *ret_holder, struct store_item *ret_item,
                    char *err, size_t errlen)
{
    if (!st)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: invalid change");
    int rc = change_check(owner, ch, err, errlen);
    if (rc)
        return rc;
    struct apbot_now buf;
    int64_t holder = 0;
    int r =
        st->ops->apply(st, id, owner, ch, now_or_read(now, &buf), &holder, ret_item, err, errlen);
    if (r == APBOT_E_CONFLICT && ret_holder)
        *ret_holder = holder;
    return r;
}

int store_add_evidence(struct store *st, int64_t item_id, const struct store_evidence *ev,
                       const struct apbot_now *now, char *err, size_t errlen)
{
    return store_add_evidence_n(st, item_id, ev, 1, now, err, errlen);
}

int store_add_evidence_n(struct store *st, int64_t item_id, const struct store_evidence *ev,
                         size_t n, const struct apbot_now *now, char *err, size_t errlen)
{
    if (!st || (n && !ev))
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: evidence needs a step");
    for (size_t i = 0; i < n; i++)
        if (!ev[i].step)
            return apbot_fail(err, errlen, APBOT_E_INVAL, "store: evidence needs a step");
    if (n == 0)
        return APBOT_OK;
    struct apbot_now buf;
    return st->ops->add_evidence(st, item_id, ev, n, now_or_read(now, &buf), err, errlen);
}

int store_each_expired(struct store *st, const struct apbot_now *now, int64_t limit,
                       store_item_fn fn, void *ctx, char *err, size_t errlen)
{
    if (!st || !fn || limit < 0)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: bad arguments to each_expired");
    struct apbot_now buf;
    return st->ops->each_expired(st, now_or_read(now, &buf), limit, fn, ctx, err, errlen);
}

struct recover_ctx {
    struct store *st;
    const struct apbot_now *now;
    int64_t settle_ms;
    const struct machine_policy *policy;
    int count;
    char *err;
    size_t errlen;
};

static int recover_item(void *arg, const struct store_item *it)
{
    struct recover_ctx *rc = arg;
    if (it->state == MACHINE_STATE_INVALID)
        return APBOT_OK; /* unknown state text: never act on it */
    struct machine_step step;
    int mr = machine_next(it->state, MACHINE_EV_LEASE_EXPIRED, &it->counters, rc->policy, &step);
    if (mr == APBOT_E_STATE)
        return APBOT_OK; /* no lease-expired row: leave it */
    if (mr)
        return apbot_fail(rc->err, rc->errlen, mr, "store: cannot recover item #%" PRId64, it->id);
    char detail[256];
    snprintf(detail, sizeof(detail), "lease of %s expired",
             it->lease_owner ? it->lease_owner : "?");
    struct store_change ch = {
        .from = it->state,
        .event = MACHINE_EV_LEASE_EXPIRED,
        .step = &step,
        .settle_ms = rc->settle_ms,
        .detail = detail,
        .actor = "recovery",
        .take_over = true,
    };
    int r = store_apply(rc->st, it->id, NULL, &ch, rc->now, NULL, rc->err, rc->errlen);
    if (r == APBOT_E_STATE)
        return APBOT_OK; /* renewed, finished or recovered by someone else meanwhile */
    if (r == APBOT_OK)
        rc->count++;
    return r;
}

UNITTEST int store_recover_settle(struct store *st, const struct apbot_now *now, int64_t settle_ms,
                                  const struct machine_policy *policy, int *ret_count, char *err,
                                  size_t errlen)
{
    if (!st || !policy || settle_ms < 0)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: recover needs a policy");
    struct apbot_now buf;
    struct recover_ctx rc = {.st = st,
                             .now = now_or_read(now, &buf),
                             .settle_ms = settle_ms,
                             .policy = policy,
                             .err = err,
                             .errlen = errlen};
    int r = store_each_expired(st, rc.now, 0, recover_item, &rc, err, errlen);
    if (r)
        return r;
    if (ret_count)
        *ret_count = rc.count;
    return APBOT_OK;
}

UNITTEST int store_recover(struct store *st, const struct apbot_now *now,
                           const struct machine_policy *policy, int *ret_count, char *err,
                           size_t errlen)
{
    return store_recover_settle(st, now, 0, policy, ret_count, err, errlen);
}

int store_each(struct store *st, enum machine_state state, store_item_fn fn, void *ctx, char *err,
               size_t errlen)
{
    return store_each_limit(st, state, 0, fn, ctx, err, errlen);
}

int store_each_limit(struct store *st, enum machine_state state, int64_t limit, store_item_fn fn,
                     void *ctx, char *err, size_t errlen)
{
    if (!st || !fn || (int)state < MACHINE_STATE_INVALID || state >= MACHINE_STATE__COUNT)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: bad arguments to store_each");
    return st->ops->each_limit(st, state, limit, fn, ctx, err, errlen);
}

int store_each_event(struct store *st, int64_t item_id, store_event_fn fn, void *ctx, char *err,
                     size_t errlen)
{
    if (!st || !fn)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: bad arguments");
    return st->ops->each_event(st, item_id, fn, ctx, err, errlen);
}

int store_each_evidence(struct store *st, int64_t item_id, store_evidence_fn fn, void *ctx,
                        char *err, size_t errlen)
{
    if (!st || !fn)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: bad arguments");
    return st->ops->each_evidence(st, item_id, fn, ctx, err, errlen);
}

int store_counts(struct store *st, struct store_counts *ret, char *err, size_t errlen)
{
    if (!st || !ret)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: bad arguments");
    return st->ops->counts(st, ret, err, errlen);
}

int store_pending(struct store *st, bool *ret_any, char *err, size_t errlen)
{
    if (!st || !ret_any)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: bad arguments");
    return st->ops->pending(st, ret_any, err, errlen);
}

int store_next_due(struct store *st, const struct apbot_now *now, int64_t *ret_wait_ms, char *err,
                   size_t errlen)
{
    if (!st || !ret_wait_ms)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: bad arguments");
    struct apbot_now buf;
    return st->ops->next_due(st, now_or_read(now, &buf), ret_wait_ms, err, errlen);
}

UNITTEST int store_schema_version(struct store *st, int *ret_version, char *err, size_t errlen)
{
    if (!st || !ret_version)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: bad arguments");
    return st->ops->schema_version(st, ret_version, err, errlen);
}

UNITTEST void store_set_busy_timeout(struct store *st, int ms)
{
    if (st)
        st->ops->set_busy_timeout(st, ms < 0 ? 0 : ms);
}

UNITTEST void store_set_busy_retries(struct store *st, int retries)
{
    if (st)
        st->busy_retries = retries < 0 ? 0 : retries > 100 ? 100 : retries;
}

UNITTEST int64_t store_busy_retried(const struct store *st)
{
    return st ? st->busy_retried : 0;
}

enum store_durability store_set_durability(struct store *st, enum store_durability d)
{
    if (!st)
        return STORE_SYNC;
    enum store_durability old = st->durability;
    if (d == STORE_SYNC || d == STORE_DEFERRED || d == STORE_LAZY)
        st->durability = d;
    return old;
}

int store_sync(struct store *st, char *err, size_t errlen)
{
    if (!st)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store_sync: no store");
    return st->ops->sync(st, err, errlen);
}

int64_t store_syncs(const struct store *st)
{
    return st ? st->syncs : 0;
}

int store_note_late_commit(struct store *st, const char *flow_name, int64_t ms,
                           const struct apbot_now *now, char *err, size_t errlen)
{
    if (!st || !flow_name || !*flow_name || ms < 0)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: a late commit needs a flow and ms");
    struct apbot_now buf;
    return st->ops->note_late_commit(st, flow_name, ms, now_or_read(now, &buf), err, errlen);
}

int store_final_sum_row(struct store_final_sum *row, const char *state, const char *currency,
                        int exponent, int64_t items, int64_t amount)
{
    memset(row, 0, sizeof(*row));
    row->state = machine_state_from_name(state ? state : "");
    snprintf(row->currency, sizeof(row->currency), "%s", currency ? currency : "");
    row->exponent = exponent;
    row->items = items;
    row->amount = amount;
    return row->state == MACHINE_STATE_INVALID ? APBOT_E_BUG : APBOT_OK;
}

int store_final_sums(struct store *st, int64_t from_ms, int64_t to_ms, struct store_final_sum *ret,
                     size_t max, size_t *ret_n, char *err, size_t errlen)
{
    if (!st || !ret || !max || !ret_n || from_ms > to_ms)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: bad arguments");
    return st->ops->final_sums(st, from_ms, to_ms, ret, max, ret_n, err, errlen);
}

int store_late_commit(struct store *st, const char *flow_name, struct store_late_commit *ret,
                      char *err, size_t errlen)
{
    if (!st || !flow_name || !ret)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: bad arguments");
    return st->ops->late_commit(st, flow_name, ret, err, errlen);
}

/* ---- copying a queue ------------------------------------------------------------------------ */

int store_tally(struct store *st, struct store_tally *ret, char *err, size_t errlen)
{
    if (!st || !ret)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: bad arguments");
    return st->ops->tally(st, ret, err, errlen);
}

struct copy_ctx {
    struct store *to;
    char *err;
    size_t errlen;
};

static int copy_item(void *arg, const struct store_item *it)
{
    struct copy_ctx *c = arg;
    return c->to->ops->load_item(c->to, it, c->err, c->errlen);
}

static int copy_event(void *arg, const struct store_event_row *row)
{
    struct copy_ctx *c = arg;
    return c->to->ops->load_event(c->to, row, c->err, c->errlen);
}

static int copy_evidence(void *arg, const struct store_evidence_row *row)
{
    struct copy_ctx *c = arg;
    return c->to->ops->load_evidence(c->to, row, c->err, c->errlen);
}

static int copy_late(void *arg, const char *flow, const struct store_late_commit *lc)
{
    struct copy_ctx *c = arg;
    return c->to->ops->load_late(c->to, flow, lc, c->err, c->errlen);
}

/* Names the first difference between two tallies in err; APBOT_OK when they are equal. */
static int tally_compare(const struct store_tally *a, const struct store_tally *b, char *err,
                         size_t errlen)
{
    static const char *const table[] = {"items", "events", "evidence", "late_commits"};
    const int64_t av[] = {a->items, a->events, a->evidence, a->late_commits};
    const int64_t bv[] = {b->items, b->events, b->evidence, b->late_commits};
    for (size_t i = 0; i < sizeof(av) / sizeof(av[0]); i++)
        if (av[i] != bv[i])
            return apbot_fail(err, errlen, APBOT_E_BUG,
                              "store: copy verification: %s: %" PRId64 " in the source, %" PRId64
                              " in the target",
                              table[i], av[i], bv[i]);
    for (int s = 0; s < MACHINE_STATE__COUNT; s++)
        if (a->by_state[s] != b->by_state[s])
            return apbot_fail(err, errlen, APBOT_E_BUG,
                              "store: copy verification: state %s: %" PRId64
                              " in the source, %" PRId64 " in the target",
                              machine_state_name((enum machine_state)s), a->by_state[s],
                              b->by_state[s]);
    if (a->unknown_state != b->unknown_state)
        return apbot_fail(err, errlen, APBOT_E_BUG,
                          "store: copy verification: unknown states: %" PRId64
                          " in the source, %" PRId64 " in the target",
                          a->unknown_state, b->unknown_state);
    if (a->head_event_id != b->head_event_id ||
        memcmp(a->head_hash, b->head_hash, STORE_HASH_LEN) != 0) {
        char ah[2 * STORE_HASH_LEN + 1], bh[2 * STORE_HASH_LEN + 1];
        store_audit_hex(a->head_hash, ah);
        store_audit_hex(b->head_hash, bh);
        return apbot_fail(err, errlen, APBOT_E_BUG,
                          "store: copy verification: the audit chain's head: event #%" PRId64
                          " %.16s... in the source, #%" PRId64 " %.16s... in the target",
                          a->head_event_id, ah, b->head_event_id, bh);
    }
    return APBOT_OK;
}

int store_copy(struct store *from, struct store *to, struct store_tally *ret_copied, char *err,
               size_t errlen)
{
    if (!from || !to || from == to || from->in_batch || to->in_batch)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: copy needs two stores, no batch");
    int r = to->ops->load_begin(to, err, errlen);
    if (r)
        return r;
    struct copy_ctx c = {.to = to, .err = err, .errlen = errlen};
    struct store_dump d = {.item = copy_item,
                           .event = copy_event,
                           .evidence = copy_evidence,
                           .late = copy_late,
                           .ctx = &c};
    struct store_tally src, dst;
    memset(&src, 0, sizeof(src));
    memset(&dst, 0, sizeof(dst));
    r = from->ops->dump(from, &d, &src, err, errlen);
    if (r == APBOT_OK)
        r = to->ops->tally(to, &dst, err, errlen); /* inside the load: what it will commit */
    if (r == APBOT_OK)
        r = tally_compare(&src, &dst, err, errlen);
    int e = to->ops->load_end(to, r == APBOT_OK, r ? NULL : err, r ? 0 : errlen);
    if (r == APBOT_OK)
        r = e;
    if (r)
        return r;
    /* Once more from the committed target, through a fresh read. */
    r = to->ops->tally(to, &dst, err, errlen);
    if (r == APBOT_OK)
        r = tally_compare(&src, &dst, err, errlen);
    if (r == APBOT_OK && ret_copied)
        *ret_copied = dst;
    return r;
}

/* ---- pure decisions --------------------------------------------------------------------- */

static bool foreign(const struct store_item *it, const struct apbot_now *now)
{
    return !apbot_clock_same_boot(it->clock_boot, now->boot);
}

UNITTEST int64_t store_settle_wait_ms(const struct store_item *it, const struct apbot_now *now,
                                      int64_t settle_ms)
{
    if (settle_ms <= 0 || !it->has_settle)
        return 0;
    if (foreign(it, now))
        return settle_ms; /* counted again from now: never shortened */
    int64_t left = it->settle_mono + settle_ms - now->mono_ms;
    return left > 0 ? left : 0;
}

bool store_settled(const struct store_item *it, const struct apbot_now *now, int64_t settle_ms)
{
    return store_settle_wait_ms(it, now, settle_ms) == 0;
}

int64_t store_step_delay_ms(const struct store_item *it, const struct machine_step *step,
                            const struct apbot_now *now, int64_t backoff_ms, int64_t settle_ms)
{
    switch (step->delay) {
    case MACHINE_DELAY_NONE:
        return 0;
    case MACHINE_DELAY_BACKOFF:
        return backoff_ms > 0 ? backoff_ms : 0;
    case MACHINE_DELAY_SETTLE:
        if (settle_ms <= 0)
            return 0;
        return step->settle_mark ? settle_ms : store_settle_wait_ms(it, now, settle_ms);
    }
    return 0;
}

UNITTEST bool store_due(const struct store_item *it, const struct apbot_now *now)
{
    return foreign(it, now) || it->next_mono <= now->mono_ms;
}

bool store_lease_live(const struct store_item *it, const struct apbot_now *now)
{
    return it->lease_owner && !foreign(it, now) && it->lease_mono > now->mono_ms;
}

int store_lease_allows(const struct store_item *it, const struct apbot_now *now, const char *owner,
                       bool take_over, enum machine_event event)
{
    if (owner) {
        if (take_over)
            return APBOT_E_INVAL;
        return it->lease_owner && strcmp(it->lease_owner, owner) == 0 ? APBOT_OK : APBOT_E_STATE;
    }
    if (!take_over)
        return store_lease_live(it, now) ? APBOT_E_STATE : APBOT_OK;
    if (event == MACHINE_EV_DOC_CONFLICT)
        return APBOT_OK;
    return it->lease_owner && !store_lease_live(it, now) ? APBOT_OK : APBOT_E_STATE;
}

int store_apply_guard(const struct store_item *it, const char *state_text, int64_t holder,
                      const char *owner, const struct store_change *ch, const struct apbot_now *now,
                      char *err, size_t errlen)
{
    if (it->state == MACHINE_STATE_INVALID)
        return apbot_fail(err, errlen, APBOT_E_STATE,
                          "item #%" PRId64 " is in unknown state '%s'; not touched", it->id,
                          state_text ? state_text : "");
    if (it->state != ch->from)
        return apbot_fail(err, errlen, APBOT_E_STATE, "item #%" PRId64 " is %s, not %s", it->id,
                          machine_state_name(it->state), machine_state_name(ch->from));
    int r = store_lease_allows(it, now, owner, ch->take_over, ch->event);
    if (r) {
        if (owner)
            return apbot_fail(err, errlen, r, "item #%" PRId64 ": lease lost (held by %s)", it->id,
                              it->lease_owner ? it->lease_owner : "nobody");
        if (ch->take_over && !it->lease_owner)
            return apbot_fail(err, errlen, r,
                              "item #%" PRId64 " is not leased: nothing to take over", it->id);
        return apbot_fail(err, errlen, r,
                          "item #%" PRId64 " is leased by %s; try again when it is released",
                          it->id, it->lease_owner ? it->lease_owner : "?");
    }
    /* One document, one item. */
    if (ch->erp_doc && holder)
        return apbot_fail(err, errlen, APBOT_E_CONFLICT,
                          "document %s is already held by item #%" PRId64 "; item #%" PRId64
                          " not changed",
                          ch->erp_doc, holder, it->id);
    return APBOT_OK;
}

bool store_restamp(struct store_item *it, const struct apbot_now *now)
{
    if (!foreign(it, now))
        return false;
    snprintf(it->clock_boot, sizeof(it->clock_boot), "%s", now->boot);
    it->next_mono = now->mono_ms;
    it->next_at = now->wall_ms;
    it->lease_mono = it->lease_owner ? now->mono_ms : 0;
    if (it->has_settle)
        it->settle_mono = now->mono_ms;
    return true;
}
