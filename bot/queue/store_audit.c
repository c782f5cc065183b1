/*
 * store_audit.c - the audit chain (store.h, "The audit chain"): an event's hash, the pure
 * decision store_audit_verify makes for each event, and the two calls over the backends
 * (store_audit_verify, store_audit_head).
 *
 * The hash is SHA-256 (OpenSSL EVP, as the invoice keys) over the previous event's hash and
 * the event's canonical serialisation, version 1: a tag, the three numbers big-endian and the
 * five texts length-prefixed (NULL apart from ""), so no two events serialise alike. The
 * SQLite backend computes it here when it appends; the PostgreSQL backend in SQL
 * (apbot_event_hash, store_pg.c), on the same bytes. Verification recomputes every hash here,
 * whichever backend wrote it.
 *
 * store_audit_verify reads the events in id order and decides each one with a look at its
 * neighbours (store_audit_check): it keeps copies of the event before and the event under
 * decision, so memory stays flat on any number of events.
 */
#include "apbot/store.h"

#include <inttypes.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/mem.h"
#include "apbot/text.h"
#include "base/unittest.h"
#include "store-int.h"
#include "store-test.h"

/* The serialisation's version tag, hashed first. A new serialisation gets a new tag. */
#define AUDIT_TAG "APBOT-AUDIT-1"
#define AUDIT_TAG_LEN (sizeof(AUDIT_TAG) - 1)

const unsigned char store_audit_genesis[STORE_HASH_LEN] = {0};

/* SHA-256 fetched once: an implicit fetch per digest (EVP_sha256()) costs OpenSSL 3 a
 * provider lookup every time. */
static pthread_once_t sha_once = PTHREAD_ONCE_INIT;
static EVP_MD *sha_md;

static void sha_fetch(void)
{
    sha_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

static const EVP_MD *sha256(void)
{
    pthread_once(&sha_once, sha_fetch);
    return sha_md ? sha_md : EVP_sha256();
}

static size_t put_be(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--) {
        p[i] = (unsigned char)(v & 0xff);
        v >>= 8;
    }
    return (size_t)bytes;
}

static size_t field_len(const char *s)
{
    return 4 + (s ? strlen(s) : 0);
}

static size_t put_field(unsigned char *p, const char *s)
{
    if (!s)
        return put_be(p, 0xFFFFFFFFu, 4);
    size_t n = strlen(s);
    put_be(p, n, 4);
    memcpy(p + 4, s, n);
    return 4 + n;
}

void store_event_hash(const unsigned char *prev, const struct store_event_row *row,
                      unsigned char out[STORE_HASH_LEN])
{
    const char *texts[] = {row->from, row->to, row->event, row->detail, row->actor};
    size_t len = AUDIT_TAG_LEN + STORE_HASH_LEN + 3 * 8;
    for (size_t i = 0; i < 5; i++)
        len += field_len(texts[i]);
    unsigned char stack[4096];
    unsigned char *buf = len <= sizeof(stack) ? stack : apbot_xmalloc(len);
    size_t o = 0;
    memcpy(buf, AUDIT_TAG, AUDIT_TAG_LEN);
    o += AUDIT_TAG_LEN;
    memcpy(buf + o, prev ? prev : store_audit_genesis, STORE_HASH_LEN);
    o += STORE_HASH_LEN;
    o += put_be(buf + o, (uint64_t)row->id, 8);
    o += put_be(buf + o, (uint64_t)row->item_id, 8);
    o += put_be(buf + o, (uint64_t)row->at, 8);
    for (size_t i = 0; i < 5; i++)
        o += put_field(buf + o, texts[i]);
    unsigned int mdlen = 0;
    if (!EVP_Digest(buf, o, out, &mdlen, sha256(), NULL) || mdlen != STORE_HASH_LEN)
        abort(); /* SHA-256 cannot fail short of a broken libcrypto */
    if (buf != stack)
        free(buf);
}

void store_audit_hex(const unsigned char hash[STORE_HASH_LEN], char out[2 * STORE_HASH_LEN + 1])
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < STORE_HASH_LEN; i++) {
        out[2 * i] = digits[hash[i] >> 4];
        out[2 * i + 1] = digits[hash[i] & 15];
    }
    out[2 * STORE_HASH_LEN] = '\0';
}

int store_audit_parse_head(const char *text, struct store_audit_head *ret)
{
    if (!text || !ret)
        return APBOT_E_INVAL;
    const char *p = text;
    if (*p == '#')
        p++;
    int64_t id = 0;
    if (*p < '0' || *p > '9')
        return APBOT_E_INVAL;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (id > (INT64_MAX - 9) / 10)
            return APBOT_E_INVAL;
        id = id * 10 + (*p - '0');
    }
    if (*p++ != ':' || strlen(p) != 2 * STORE_HASH_LEN)
        return APBOT_E_INVAL;
    struct store_audit_head h = {.event_id = id};
    for (size_t i = 0; i < STORE_HASH_LEN; i++) {
        int hi = text_hex_value((unsigned char)p[2 * i]),
            lo = text_hex_value((unsigned char)p[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return APBOT_E_INVAL;
        h.hash[i] = (unsigned char)(hi << 4 | lo);
    }
    *ret = h;
    return APBOT_OK;
}

const char *store_audit_kind_name(enum store_audit_kind k)
{
    switch (k) {
    case STORE_AUDIT_INTACT:
        return "intact";
    case STORE_AUDIT_CHANGED:
        return "changed";
    case STORE_AUDIT_MISSING:
        return "missing";
    case STORE_AUDIT_ORDER:
        return "order";
    case STORE_AUDIT_UNCHAINED:
        return "unchained";
    case STORE_AUDIT_HEAD:
        return "head";
    }
    return "?";
}

/* ---- the decision ------------------------------------------------------------------------ */

/* Whether row's content hashes to its hash when it carries the id `id`. */
static bool hashes_as(const struct store_event_row *row, int64_t id)
{
    struct store_event_row r = *row;
    unsigned char h[STORE_HASH_LEN];
    r.id = id;
    store_event_hash(row->prev_hash, &r, h);
    return memcmp(h, row->hash, STORE_HASH_LEN) == 0;
}

UNITTEST enum store_audit_kind store_audit_check(const struct store_event_row *prev,
                                                 const struct store_event_row *cur,
                                                 const struct store_event_row *next, char *detail,
                                                 size_t len)
{
    if (!cur->prev_hash || !cur->hash) {
        snprintf(detail, len,
                 "event #%" PRId64 " (item #%" PRId64 ") carries no hash: it was not appended "
                 "by apbot",
                 cur->id, cur->item_id);
        return STORE_AUDIT_UNCHAINED;
    }
    if (!hashes_as(cur, cur->id)) {
        const struct store_event_row *other = NULL;
        if (next && next->id != cur->id && hashes_as(cur, next->id))
            other = next;
        else if (prev && prev->id != cur->id && hashes_as(cur, prev->id))
            other = prev;
        if (other) {
            snprintf(detail, len,
                     "event #%" PRId64 " (item #%" PRId64 ") holds the event appended as #%" PRId64
                     ": events were reordered (their ids swapped)",
                     cur->id, cur->item_id, other->id);
            return STORE_AUDIT_ORDER;
        }
        snprintf(detail, len,
                 "event #%" PRId64 " (item #%" PRId64 ") no longer matches its hash: its content "
                 "(time, states, event, detail or actor) or its hash was changed after it was "
                 "appended",
                 cur->id, cur->item_id);
        return STORE_AUDIT_CHANGED;
    }
    const unsigned char *want = prev ? prev->hash : store_audit_genesis;
    if (memcmp(cur->prev_hash, want, STORE_HASH_LEN) == 0)
        return STORE_AUDIT_INTACT;
    int64_t gap_from = prev ? prev->id + 1 : 1;
    if (cur->id > gap_from) {
        if (cur->id - 1 == gap_from)
            snprintf(detail, len,
                     "event #%" PRId64 " is missing before event #%" PRId64 " (item #%" PRId64
                     "): it was deleted",
                     gap_from, cur->id, cur->item_id);
        else
            snprintf(detail, len,
                     "events #%" PRId64 " to #%" PRId64 " are missing before event #%" PRId64
                     " (item #%" PRId64 "): they were deleted",
                     gap_from, cur->id - 1, cur->id, cur->item_id);
        return STORE_AUDIT_MISSING;
    }
    if (prev)
        snprintf(detail, len,
                 "event #%" PRId64 " (item #%" PRId64 ") was not appended after event #%" PRId64
                 ": events were moved, replaced or inserted",
                 cur->id, cur->item_id, prev->id);
    else
        snprintf(detail, len,
                 "event #%" PRId64 " (item #%" PRId64 ") is the first event but was appended "
                 "after another: events were moved, replaced or inserted",
                 cur->id, cur->item_id);
    return STORE_AUDIT_ORDER;
}

/* ---- verifying a queue ---------------------------------------------------------------------- */

/* A copy of an event row that outlives the reader's callback. */
struct row_copy {
    struct store_event_row row;
    unsigned char prev_hash[STORE_HASH_LEN], hash[STORE_HASH_LEN];
    char *text; /* the five texts, NUL-separated */
    size_t cap;
};

static void row_copy_set(struct row_copy *c, const struct store_event_row *r)
{
    const char *texts[] = {r->from, r->to, r->event, r->detail, r->actor};
    size_t need = 0;
    for (size_t i = 0; i < 5; i++)
        need += texts[i] ? strlen(texts[i]) + 1 : 0;
    if (need > c->cap) {
        free(c->text);
        c->cap = need < 512 ? 512 : need;
        c->text = apbot_xmalloc(c->cap);
    }
    const char *out[5];
    size_t o = 0;
    for (size_t i = 0; i < 5; i++) {
        if (!texts[i]) {
            out[i] = NULL;
            continue;
        }
        size_t n = strlen(texts[i]) + 1;
        memcpy(c->text + o, texts[i], n);
        out[i] = c->text + o;
        o += n;
    }
    c->row = (struct store_event_row){.id = r->id,
                                      .item_id = r->item_id,
                                      .at = r->at,
                                      .from = out[0],
                                      .to = out[1],
                                      .event = out[2],
                                      .detail = out[3],
                                      .actor = out[4]};
    if (r->prev_hash) {
        memcpy(c->prev_hash, r->prev_hash, STORE_HASH_LEN);
        c->row.prev_hash = c->prev_hash;
    }
    if (r->hash) {
        memcpy(c->hash, r->hash, STORE_HASH_LEN);
        c->row.hash = c->hash;
    }
}

struct verify {
    struct row_copy slot[2]; /* the event before (verified) and the event under decision */
    struct row_copy *prev, *cur;
    const struct store_audit_head *expect;
    bool expect_seen;
    struct store_audit_result *res;
};

#define VERIFY_STOP (-1) /* fn's "stop": a break was found (not an error; no APBOT_E_*) */

static void set_good(struct store_audit_result *res, const struct store_event_row *r)
{
    res->last_good.event_id = r->id;
    res->last_good.item_id = r->item_id;
    res->last_good.at = r->at;
    memcpy(res->last_good.hash, r->hash, STORE_HASH_LEN);
}

/* Decides v->cur with next (NULL at the end); VERIFY_STOP when it broke. */
static int decide(struct verify *v, const struct store_event_row *next)
{
    struct store_audit_result *res = v->res;
    const struct store_event_row *prev = v->prev ? &v->prev->row : NULL;
    const struct store_event_row *cur = &v->cur->row;
    enum store_audit_kind k = store_audit_check(prev, cur, next, res->detail, sizeof(res->detail));
    if (k != STORE_AUDIT_INTACT) {
        res->kind = k;
        res->event_id = cur->id;
        res->item_id = cur->item_id;
        if (k == STORE_AUDIT_MISSING) {
            res->missing_from = prev ? prev->id + 1 : 1;
            res->missing_to = cur->id - 1;
        }
        return VERIFY_STOP;
    }
    set_good(res, cur);
    if (v->expect && !v->expect_seen && cur->id >= v->expect->event_id) {
        v->expect_seen = true;
        if (cur->id != v->expect->event_id ||
            memcmp(cur->hash, v->expect->hash, STORE_HASH_LEN) != 0) {
            char want[2 * STORE_HASH_LEN + 1], got[2 * STORE_HASH_LEN + 1];
            store_audit_hex(v->expect->hash, want);
            store_audit_hex(cur->hash, got);
            res->kind = STORE_AUDIT_HEAD;
            res->event_id = v->expect->event_id;
            if (cur->id != v->expect->event_id)
                snprintf(res->detail, sizeof(res->detail),
                         "the kept head names event #%" PRId64 " (sha256 %.16s...), which the "
                         "queue no longer holds: the chain was rewritten from there",
                         v->expect->event_id, want);
            else
                snprintf(res->detail, sizeof(res->detail),
                         "the kept head names event #%" PRId64 " with sha256 %.16s..., the "
                         "queue's has %.16s...: the chain was rewritten up to there",
                         v->expect->event_id, want, got);
            return VERIFY_STOP;
        }
    }
    return APBOT_OK;
}

static int verify_row(void *ctx, const struct store_event_row *row)
{
    struct verify *v = ctx;
    v->res->events++;
    if (v->cur) {
        int r = decide(v, row);
        if (r)
            return r;
        /* cur verified: it becomes prev, and the other slot takes the new row */
        v->prev = v->cur;
        v->cur = v->cur == &v->slot[0] ? &v->slot[1] : &v->slot[0];
    } else {
        v->cur = &v->slot[0];
    }
    row_copy_set(v->cur, row);
    return APBOT_OK;
}

int store_audit_verify(struct store *st, const struct store_audit_head *expect,
                       struct store_audit_result *ret, char *err, size_t errlen)
{
    if (!st || !ret)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: bad arguments");
    struct store_audit_result res;
    memset(&res, 0, sizeof(res));
    memcpy(res.last_good.hash, store_audit_genesis, STORE_HASH_LEN);
    struct verify v = {.expect = expect && expect->event_id > 0 ? expect : NULL, .res = &res};
    int r = st->ops->each_chained(st, verify_row, &v, err, errlen);
    if (r == APBOT_OK && v.cur)
        r = decide(&v, NULL);
    for (int i = 0; i < 2; i++)
        free(v.slot[i].text);
    if (r != APBOT_OK && r != VERIFY_STOP)
        return r;
    if (r == APBOT_OK && v.expect && !v.expect_seen) {
        res.kind = STORE_AUDIT_HEAD;
        res.event_id = v.expect->event_id;
        snprintf(res.detail, sizeof(res.detail),
                 "the kept head names event #%" PRId64 ", but the chain ends at event #%" PRId64
                 ": the events after #%" PRId64 " were deleted",
                 v.expect->event_id, res.last_good.event_id, res.last_good.event_id);
        res.missing_from = res.last_good.event_id + 1;
        res.missing_to = v.expect->event_id;
    }
    *ret = res;
    return APBOT_OK;
}

int store_audit_head(struct store *st, int64_t before_ms, struct store_audit_head *ret, char *err,
                     size_t errlen)
{
    if (!st || !ret || before_ms < 0)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "store: bad arguments");
    struct store_audit_head h;
    memset(&h, 0, sizeof(h));
    int r = st->ops->audit_head(st, before_ms ? before_ms : INT64_MAX, &h, err, errlen);
    if (r)
        return r;
    if (h.event_id == 0)
        memcpy(h.hash, store_audit_genesis, STORE_HASH_LEN);
    *ret = h;
    return APBOT_OK;
}
