/*
 * record_json.c - a recorded JSON body made a template (flows' <json>, flow_json.c's
 * language): every value the request sent becomes what it stands for.
 *
 * In order: the login's user and password (${secret.*}); a value the session keeps (a token, a
 * context object the client echoes: ${session.NAME|json:raw}); a typed value of the sample (a
 * tagged decimal or date, a decimal number: json:decimal, json:date); the array of the
 * invoice's lines ({"$each-line": ...}, each element checked against its own line); an id the
 * booking sends that an earlier search turned a code into (a <resolve>: ${ref.NAME.COLUMN});
 * the document number (${doc}); the reference the person typed (${key}); any other value of the
 * sample; and what matches nothing, kept as recorded. A value two variables match is an open
 * decision, written as a variable no flow knows (${todo.ID}), so the draft cannot run until a
 * person has chosen.
 */
#define _GNU_SOURCE /* strcasestr */
#include "record/record-int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "apbot/buf.h"
#include "apbot/invoice.h"
#include "apbot/mem.h"
#include "web/jdoc.h"

#define REC_JSON_DEPTH 32

/* A template string value. */
static json_t *rec_jstr(const char *s)
{
    json_t *v = json_string(s);
    if (!v)
        v = json_string("");
    if (!v)
        abort(); /* jansson fails only on out-of-memory */
    return v;
}

/* A word usable as a name in the flow ([a-z][a-z0-9_]*) from s, into buf; fallback when none. */
void rec_word(const char *s, const char *fallback, char *buf, size_t len)
{
    size_t n = 0;
    for (const char *p = s; p && *p && n + 1 < len; p++) {
        char c = *p;
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
            buf[n++] = c;
        else if (n > 0 && buf[n - 1] != '_')
            buf[n++] = '_';
    }
    while (n > 0 && buf[n - 1] == '_')
        n--;
    buf[n] = '\0';
    if (!n || buf[0] < 'a' || buf[0] > 'z')
        snprintf(buf, len, "%s", fallback);
}

/* ---- typed values ---------------------------------------------------------------------------- */

static const char *rec_jmember_str(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_string(v) && !jdoc_number_text(v) ? json_string_value(v) : NULL;
}

/* {"__class__": "Decimal", "decimal": "120.50"}: its text, or NULL. */
static const char *rec_tagged_decimal(const json_t *v)
{
    const char *c = rec_jmember_str(v, "__class__");
    if (!json_is_object(v) || json_object_size(v) != 2 || !c || strcasecmp(c, "Decimal") != 0)
        return NULL;
    return rec_jmember_str(v, "decimal");
}

/* {"__class__": "date", "year": 2026, "month": 3, "day": 15}: ISO text into buf, or false. */
static bool rec_tagged_date(const json_t *v, char *buf, size_t len)
{
    const char *c = rec_jmember_str(v, "__class__");
    if (!json_is_object(v) || !c || strcasecmp(c, "date") != 0)
        return false;
    const char *y = jdoc_number_text(json_object_get(v, "year"));
    const char *m = jdoc_number_text(json_object_get(v, "month"));
    const char *d = jdoc_number_text(json_object_get(v, "day"));
    if (!y || !m || !d)
        return false;
    long yy = strtol(y, NULL, 10), mm = strtol(m, NULL, 10), dd = strtol(d, NULL, 10);
    if (yy < 1900 || yy > 2999 || mm < 1 || mm > 12 || dd < 1 || dd > 31)
        return false;
    snprintf(buf, len, "%04ld-%02ld-%02ld", yy, mm, dd);
    return true;
}

bool rec_json_tagged_date(const json_t *v, char *buf, size_t len)
{
    return rec_tagged_date(v, buf, len);
}

/* ---- resolves: ids the booking sends ------------------------------------------------------- */

struct rec_idsrc {
    size_t ex;            /* the search */
    char arr[256];        /* the pointer of the records' array in its answer */
    char id_path[128];    /* where the id is within a record ("/id", "/addresses/0") */
    char code_member[64]; /* the record's member holding the code */
    const char *code;     /* the code (borrowed from the answer) */
    int score;
};

/* Finds within record o (depth-bounded) a leaf equal to want (as text); its path into path. */
static bool rec_find_leaf(const json_t *o, const char *want, char *path, size_t len, int depth)
{
    const char *k;
    json_t *m;
    size_t i;
    size_t at = strlen(path);

    if (depth > 3)
        return false;
    switch (jdoc_kind(o)) {
    case JDOC_NUMBER:
    case JDOC_STRING: {
        const char *t = jdoc_number_text(o);
        return strcmp(t ? t : json_string_value(o), want) == 0;
    }
    case JDOC_OBJECT:
        json_object_foreach((json_t *)o, k, m)
        {
            if (strchr(k, '/') || strchr(k, '~'))
                continue;
            snprintf(path + at, len - at, "/%s", k);
            if (rec_find_leaf(m, want, path, len, depth + 1))
                return true;
        }
        break;
    case JDOC_ARRAY:
        json_array_foreach((json_t *)o, i, m)
        {
            snprintf(path + at, len - at, "/%zu", i);
            if (rec_find_leaf(m, want, path, len, depth + 1))
                return true;
        }
        break;
    case JDOC_NULL:
    case JDOC_BOOL:
        break;
    }
    path[at] = '\0';
    return false;
}

/* True when the request of x carries text as one of its values (a JSON string, a query or
 * form value), or as a string of a list it sends. */
static bool rec_sends_value(const struct rec_ex *x, const char *text)
{
    for (size_t i = 0; i < x->n_query; i++)
        if (strcmp(x->query[i].value, text) == 0)
            return true;
    for (size_t i = 0; i < x->n_form; i++)
        if (strcmp(x->form[i].value, text) == 0)
            return true;
    if (!x->jreq)
        return false;
    /* a JSON string anywhere in the body */
    json_t *s = json_string(text);
    bool found = false;
    if (s) {
        char *dump = json_dumps(s, JSON_ENCODE_ANY | JSON_COMPACT);
        if (dump && x->e->req_body)
            found = rec_find(x->e->req_body, x->e->req_len, dump, strlen(dump)) != NULL;
        free(dump);
        json_decref(s);
    }
    return found;
}

/* True when the request text (a path, an RPC method) names the member key, whole or without
 * an id's suffix ("vendorId", "vendor_id", "VENDOR-ID", "supplierNo": "vendor", "supplier"). */
static bool rec_key_names(const char *key, const char *rq_text)
{
    static const char *const suffix[] = {"_id", "-id", "id", "_no", "no", "_nr", "nr"};
    char stem[64];

    if (!key || !*key || !rq_text)
        return false;
    if (strcasestr(rq_text, key))
        return true;
    snprintf(stem, sizeof(stem), "%s", key);
    size_t n = strlen(stem);
    for (size_t i = 0; i < sizeof(suffix) / sizeof(*suffix); i++) {
        size_t sl = strlen(suffix[i]);
        if (n > sl + 2 && strcasecmp(stem + n - sl, suffix[i]) == 0) {
            stem[n - sl] = '\0';
            return strcasestr(rq_text, stem) != NULL;
        }
    }
    return false;
}

/* The records arrays of an answer: each array of objects (depth-bounded), with its pointer. */
static void rec_scan_records(const struct rec_ex *y, const json_t *v, char *ptr, size_t plen,
                             int depth, const char *want, const char *key, size_t yi,
                             struct rec_idsrc *best, const char *rq_text)
{
    const char *k;
    json_t *m;
    size_t i, at = strlen(ptr);

    if (depth > 4)
        return;
    if (json_is_array(v)) {
        json_array_foreach((json_t *)v, i, m)
        {
            if (!json_is_object(m))
                continue;
            char idp[128] = "";
            if (!rec_find_leaf(m, want, idp, sizeof(idp), 0))
                continue;
            /* the code: a string member of the record the search asked for */
            const char *ck;
            json_t *cv;
            json_object_foreach(m, ck, cv)
            {
                const char *code = rec_jmember_str(m, ck);
                if (!code || !*code || strncmp(idp + 1, ck, strlen(ck)) == 0 || strchr(ck, '/') ||
                    strchr(ck, '~') || !rec_sends_value(y, code))
                    continue;
                int score = 1;
                /* the id's member name in the searched model or URL: "party" in
                 * model.party.party.search_read, "currency" in /api/currencies, "vendorId"
                 * (its "Id" dropped) in /api/vendors */
                if (rec_key_names(key, rq_text))
                    score += 10;
                if (!best->code || score > best->score || (score == best->score && yi > best->ex)) {
                    best->ex = yi;
                    snprintf(best->arr, sizeof(best->arr), "%s", ptr);
                    snprintf(best->id_path, sizeof(best->id_path), "%s", idp);
                    snprintf(best->code_member, sizeof(best->code_member), "%s", ck);
                    best->code = code;
                    best->score = score;
                } else if (score == best->score && yi == best->ex && strcmp(best->arr, ptr) != 0) {
                    best->score = score; /* the same search: keep the first */
                }
                break;
            }
        }
        return;
    }
    if (json_is_object(v)) {
        json_object_foreach((json_t *)v, k, m)
        {
            if (strchr(k, '/') || strchr(k, '~'))
                continue;
            snprintf(ptr + at, plen - at, "/%s", k);
            rec_scan_records(y, m, ptr, plen, depth + 1, want, key, yi, best, rq_text);
            ptr[at] = '\0';
        }
    }
}

/* The resolve an id (text) sent at member `key` of exchange `at` came from: registered in r,
 * its template into tmpl. False when no earlier search answered it. */
static bool rec_resolve_id(struct rec *r, size_t at, const char *text, const char *key, size_t line,
                           bool number, char *tmpl, size_t tlen)
{
    struct rec_idsrc best = {0};

    for (size_t y = 0; y < at; y++) {
        const struct rec_ex *ey = &r->ex[y];
        if (ey->role == REC_ROLE_SKIPPED || ey->role == REC_ROLE_LOGIN || !ey->jans)
            continue;
        char rq[1024], ptr[256] = "";
        const char *m = rec_ex_rpc_method(ey);
        snprintf(rq, sizeof(rq), "%s %s", ey->path, m ? m : "");
        rec_scan_records(ey, jdoc_root(ey->jans), ptr, sizeof(ptr), 0, text, key, y, &best, rq);
    }
    /* a short id (1, 2) is everywhere: believed only where the request names what it sends
     * ("party" in model.party.party.search_read) */
    if (!best.code || (strlen(text) < 3 && best.score < 10))
        return false;

    /* the code is a value of the sample (of this line), or a constant the flow keeps */
    struct rec_tpl ct;
    rec_tpl_value(r, best.code, line, false, NULL, &ct);
    if (ct.how == REC_TPL_AMBIGUOUS || ct.how == REC_TPL_DOC)
        return false;
    char col[48], code_col[48];
    rec_word(best.id_path, "id", col, sizeof(col));
    rec_word(best.code_member, "code", code_col, sizeof(code_col));
    if (strcmp(col, code_col) == 0)
        return false;

    /* one resolve per search and code: more columns of it as more ids come from it */
    struct rec_resolve *rs = NULL;
    for (size_t i = 0; i < r->n_resolves && !rs; i++)
        if (r->resolves[i].ex == best.ex && strcmp(r->resolves[i].code_tmpl, ct.tmpl) == 0)
            rs = &r->resolves[i];
    if (!rs) {
        if (r->n_resolves >= sizeof(r->resolves) / sizeof(*r->resolves))
            return false;
        rs = &r->resolves[r->n_resolves++];
        memset(rs, 0, sizeof(*rs));
        rs->ex = best.ex;
        rec_word(key, "ref", rs->name, sizeof(rs->name));
        for (size_t i = 0; i + 1 < r->n_resolves; i++)
            if (strcmp(r->resolves[i].name, rs->name) == 0) {
                char base[40];
                snprintf(base, sizeof(base), "%s", rs->name);
                snprintf(rs->name, sizeof(rs->name), "%.24s_%zu", base, r->n_resolves % 1000);
            }
        snprintf(rs->code_tmpl, sizeof(rs->code_tmpl), "%.159s", ct.tmpl);
        snprintf(rs->code_value, sizeof(rs->code_value), "%.127s", best.code);
        snprintf(rs->pointer, sizeof(rs->pointer), "%.255s", best.arr);
        snprintf(rs->cols[0].name, sizeof(rs->cols[0].name), "%.47s", code_col);
        snprintf(rs->cols[0].pointer, sizeof(rs->cols[0].pointer), "/%.63s", best.code_member);
        rs->n_cols = 1;
        rs->per_line = line > 0;
        rec_note(r,
                 "resolve '%s': entry %zu searched the code %s (%s) and answered the id the "
                 "booking sends as '%s'",
                 rs->name, r->ex[best.ex].e->index, best.code, ct.tmpl, key ? key : "");
    }
    size_t c = 0;
    while (c < rs->n_cols && strcmp(rs->cols[c].name, col) != 0)
        c++;
    if (c == rs->n_cols && c < sizeof(rs->cols) / sizeof(*rs->cols)) {
        snprintf(rs->cols[c].name, sizeof(rs->cols[c].name), "%s", col);
        snprintf(rs->cols[c].pointer, sizeof(rs->cols[c].pointer), "%s", best.id_path);
        rs->n_cols++;
    }
    snprintf(tmpl, tlen, "${ref.%s.%s%s}", rs->name, col, number ? "|json:int" : "");
    r->ex[best.ex].role = REC_ROLE_RESOLVE;
    return true;
}

/* ---- the walk ------------------------------------------------------------------------------- */

struct rec_jw {
    struct rec *r;
    const struct rec_jctx *jc;
    size_t line; /* inside $each-line: the line */
    bool fail;
    size_t ldate_seen; /* a listing's dates met so far (the same day twice: from, then to) */
    long page_size;    /* a listing's: its recorded limit, once its paging was found */
    long named_limit;  /* a listing's limit sent by name ({"limit": 100}) */
};

/* A listing's date (text as sent, or a tagged date's ISO text): its template, or NULL. */
static const char *rec_jldate(struct rec_jw *w, const char *text, bool tagged, char *buf,
                              size_t len)
{
    const struct rec_jctx *jc = w->jc;
    for (size_t k = 0; k < jc->n_ldates; k++) {
        const struct rec_ldate *d = &jc->ldates[k];
        if (d->tagged != tagged || strcmp(d->text, text) != 0)
            continue;
        const char *var = "date";
        if (jc->n_ldates == 2) {
            bool same = strcmp(jc->ldates[0].text, jc->ldates[1].text) == 0;
            var = (same ? w->ldate_seen : k) == 0 ? "from" : "to";
        }
        w->ldate_seen++;
        if (tagged)
            snprintf(buf, len, "${%s|json:date}", var);
        else
            snprintf(buf, len, "${%s|date:%s}", var, d->fmt);
        return buf;
    }
    return NULL;
}

static json_t *rec_jwalk(struct rec_jw *w, const json_t *v, const char *key, int depth);

/* A value two variables match: a variable no flow knows, and the <todo> that says why. */
static json_t *rec_jtodo(struct rec_jw *w, const char *why, const char *key)
{
    char id[48], t[32];
    rec_word(key, "value", t, sizeof(t));
    snprintf(id, sizeof(id), "value-%.30s", t);
    rec_todo_later(w->r, id, w->r->ex[w->jc->at].e->index,
                   "the JSON value at \"%s\": %s: which one is it? Replace ${todo.%s} in the "
                   "<json> with it (add |json:TYPE when it is not a string)",
                   key ? key : "", why, t);
    snprintf(id, sizeof(id), "${todo.%s}", t);
    return rec_jstr(id);
}

/* Does member key name what differs from invoice to invoice, by an id of the ERP's (the
 * vendor's, an account's, a currency's)? A constant there would book every invoice to the
 * recorded one. */
bool rec_key_is_entity(const char *key)
{
    static const char *const entity[] = {"vendor",  "supplier", "creditor", "party",
                                         "partner", "account",  "currency"};
    if (!key)
        return false;
    for (size_t i = 0; i < sizeof(entity) / sizeof(*entity); i++)
        if (strcasestr(key, entity[i]))
            return true;
    return false;
}

/* An id no value of the sample and no recorded search explains, sent where the member names a
 * vendor, an account or a currency: an open decision, never a constant kept silently. */
static json_t *rec_jid_todo(struct rec_jw *w, const char *value, const char *key)
{
    char id[48], t[32];
    rec_word(key, "value", t, sizeof(t));
    snprintf(id, sizeof(id), "id-%.30s", t);
    rec_todo_later(w->r, id, w->r->ex[w->jc->at].e->index,
                   "the JSON value at \"%s\" is '%s', no value of the sample, and no search of "
                   "the recording answered it: an id of the ERP's? Kept as recorded it would "
                   "book every invoice to it. Add a <resolve> (the ERP's search of it by the "
                   "sample's code; docs/writing-flows.md) and write ${ref.NAME.COLUMN} in place of "
                   "${todo.%s} in the <json>, or the constant where it is one",
                   key, value, t);
    snprintf(id, sizeof(id), "${todo.%s}", t);
    return rec_jstr(id);
}

/* Does member key name a value of the invoice (a date, an amount, the invoice's number or
 * text)? Such a value matching nothing is the sample's written in a way the recorder does not
 * know ("16 Nov 2026"), never a constant. */
static bool rec_key_is_invoice_value(const char *key)
{
    static const char *const words[] = {"date",       "amount",        "total",         "net",
                                        "gross",      "tax",           "vat",           "price",
                                        "due",        "payable",       "sum",           "invoiceno",
                                        "invoice_no", "invoicenumber", "invoice_number"};
    if (!key)
        return false;
    for (size_t i = 0; i < sizeof(words) / sizeof(*words); i++)
        if (strcasestr(key, words[i]))
            return true;
    return false;
}

/* A value sent where the member names a value of the invoice, that matches none of the sample:
 * an open decision (typed-KEY), never kept as recorded for every invoice. */
static json_t *rec_jtyped_todo(struct rec_jw *w, const char *value, const char *key)
{
    char id[48], t[32];
    rec_word(key, "value", t, sizeof(t));
    snprintf(id, sizeof(id), "typed-%.30s", t);
    rec_todo_later(w->r, id, w->r->ex[w->jc->at].e->index,
                   "the JSON value at \"%s\" is '%s', which is no value of the sample in any form "
                   "the recorder knows, though its name says it is one of the invoice's. Write its "
                   "template (${invoice...} with the formatter that writes it so, |json:TYPE "
                   "when it is no string) where ${todo.%s} stands, or the constant where it is one",
                   key, value, t);
    snprintf(id, sizeof(id), "${todo.%s}", t);
    return rec_jstr(id);
}

static json_t *rec_jstring(struct rec_jw *w, const char *s, const char *key)
{
    struct rec *r = w->r;
    const struct rec_jctx *jc = w->jc;

    char ld[96];
    if (jc->n_ldates && rec_jldate(w, s, false, ld, sizeof(ld)))
        return rec_jstr(ld);
    if (jc->login && r->password && strcmp(s, r->password) == 0)
        return rec_jstr("${secret.password}");
    if (jc->login && r->login_user && strcmp(s, r->login_user) == 0)
        return rec_jstr("${secret.user}");
    if (jc->code && jc->code_value && strcmp(s, jc->code_value) == 0)
        return rec_jstr("${code}");
    if (!r->doctype_map_done && r->doctype_value && strcmp(s, r->doctype_value) == 0 &&
        r->doctype_map) {
        char t[256];
        snprintf(t, sizeof(t), "${invoice.doc_type%s}", r->doctype_map);
        return rec_jstr(t);
    }
    if (!r->doctype_map && !jc->login && strcmp(s, invoice_doc_type_name(r->inv->doc_type)) == 0) {
        /* the sample's type as the flow names it, and no map: a credit note would go in as
         * an invoice (the open decision "doctype" says so) */
        return rec_jstr("${todo.doctype}");
    }
    struct rec_tpl t;
    rec_tpl_value(r, s, w->line, false, NULL, &t);
    switch (t.how) {
    case REC_TPL_LITERAL:
        if (strstr(s, "${"))
            return rec_jtodo(w, "a recorded text holding \"${\" (a template would read it)", key);
        if (jc->resolves && !jc->login && *s && strspn(s, "0123456789") == strlen(s) &&
            rec_key_is_entity(key))
            return rec_jid_todo(w, s, key);
        if (jc->lines && !jc->login && *s && strpbrk(s, "0123456789") &&
            rec_key_is_invoice_value(key))
            return rec_jtyped_todo(w, s, key);
        return rec_jstr(s);
    case REC_TPL_DOC:
        if (!jc->doc)
            return rec_jstr(s);
        return rec_jstr("${doc}");
    case REC_TPL_KEY:
    case REC_TPL_VALUE:
        return rec_jstr(t.tmpl);
    case REC_TPL_AMBIGUOUS:
        return rec_jtodo(w, t.why, key);
    }
    return rec_jstr(s);
}

static json_t *rec_jnumber(struct rec_jw *w, const json_t *v, const char *key)
{
    struct rec *r = w->r;
    const struct rec_jctx *jc = w->jc;
    const char *t = jdoc_number_text(v);
    char tmpl[256];

    if (!t)
        return json_deep_copy(v);
    if (jc->n_ldates && key && !w->page_size) {
        /* a listing's paging by name: {"offset": 0, "limit": 100} */
        static const char *const off[] = {"offset", "start", "skip", "first", "from"};
        static const char *const lim[] = {"limit", "size", "pagesize", "page_size", "rows",
                                          "count", "max",  "top",      "per_page"};
        long n = strtol(t, NULL, 10);
        for (size_t i = 0; i < sizeof(off) / sizeof(*off); i++)
            if (strcasecmp(key, off[i]) == 0 && strcmp(t, "0") == 0)
                return rec_jstr("${offset|json:int}");
        for (size_t i = 0; i < sizeof(lim) / sizeof(*lim); i++)
            if (strcasecmp(key, lim[i]) == 0 && strspn(t, "0123456789") == strlen(t) && n > 0 &&
                n <= 100000) {
                w->named_limit = n;
                return rec_jstr("${limit|json:int}");
            }
    }
    if (jc->doc && r->doc && strcmp(t, r->doc) == 0)
        return rec_jstr("${doc|json:int}");
    if (jc->resolves && rec_resolve_id(r, jc->at, t, key, w->line, true, tmpl, sizeof(tmpl)))
        return rec_jstr(tmpl);
    if (strchr(t, '.') || strlen(t) >= 3) {
        struct rec_match m[REC_MATCH_MAX];
        size_t n = rec_values_find_amount(&r->vals, t, w->line, m, REC_MATCH_MAX);
        if (n && rec_match_vars(m, n) == 1) {
            r->json_number_decimal = true;
            rec_match_template(&m[0], r->use_abs, "|json:decimal", tmpl, sizeof(tmpl));
            /* the plain form's template, with its amount:. dropped: json:decimal writes it */
            char *fmt = strstr(tmpl, "|amount:.");
            if (fmt)
                memmove(fmt, fmt + 9, strlen(fmt + 9) + 1);
            return rec_jstr(tmpl);
        }
        if (n)
            return rec_jtodo(w, "an amount two variables have", key);
    }
    /* a count: a line's quantity, the number of lines, only where the member says so */
    if (key && (strcasestr(key, "quant") || strcasestr(key, "qty") || strcasestr(key, "count") ||
                strcasestr(key, "lines"))) {
        struct rec_match m[REC_MATCH_MAX];
        size_t n = rec_values_find(&r->vals, t, w->line, true, m, REC_MATCH_MAX);
        if (n == 1 && m[0].form->kind == REC_KIND_COUNT) {
            snprintf(tmpl, sizeof(tmpl), "${%s|json:number}", m[0].form->var);
            return rec_jstr(tmpl);
        }
    }
    if (!strchr(t, '.') && strlen(t) >= 3) {
        /* an amount in minor units (146913 for 1469.13 EUR): |minor */
        struct rec_match m[REC_MATCH_MAX];
        size_t n = rec_values_find(&r->vals, t, w->line, false, m, REC_MATCH_MAX), hit = 0,
               hits = 0;
        for (size_t k = 0; k < n; k++)
            if (m[k].form->kind == REC_KIND_AMOUNT && strcmp(m[k].form->fmt, "minor") == 0) {
                hit = k;
                hits++;
            }
        if (hits == 1) {
            rec_match_template(&m[hit], r->use_abs, "|json:int", tmpl, sizeof(tmpl));
            return rec_jstr(tmpl);
        }
        if (hits > 1)
            return rec_jtodo(w, "an amount in minor units two variables have", key);
    }
    if (jc->resolves && !jc->login && !strchr(t, '.') && rec_key_is_entity(key))
        return rec_jid_todo(w, t, key);
    if (jc->lines && !jc->login && strchr(t, '.') && rec_key_is_invoice_value(key))
        return rec_jtyped_todo(w, t, key);
    return json_deep_copy(v);
}

/* Is array a the invoice's lines: one object per line, in order, each carrying a value of its
 * own line? */
static bool rec_jlines(struct rec_jw *w, const json_t *a)
{
    size_t n = w->r->inv->n_lines;
    if (!w->jc->lines || w->line || !json_is_array(a) || json_array_size(a) != n || n == 0 ||
        n > REC_LINES_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        const json_t *o = json_array_get(a, i);
        if (!json_is_object(o))
            return false;
        char *dump = json_dumps(o, JSON_COMPACT);
        bool carries = false;
        for (size_t f = 0; dump && f < w->r->vals.n && !carries; f++) {
            const struct rec_form *fm = &w->r->vals.forms[f];
            if (fm->line == i + 1 && fm->kind != REC_KIND_COUNT && strlen(fm->text) >= 3)
                carries = strstr(dump, fm->text) != NULL;
        }
        free(dump);
        if (!carries)
            return false;
    }
    return true;
}

static json_t *rec_jwalk(struct rec_jw *w, const json_t *v, const char *key, int depth)
{
    const char *k;
    json_t *m;
    size_t i;
    char tmpl[256], iso[16];

    if (depth > REC_JSON_DEPTH) {
        w->fail = true;
        return json_null();
    }
    const char *sv = rec_session_value(w->r, v);
    if (sv && !w->jc->login)
        return rec_jstr(sv);

    /* typed values of the sample */
    const char *dec = rec_tagged_decimal(v);
    if (dec) {
        struct rec_match mm[REC_MATCH_MAX];
        size_t n = rec_values_find_amount(&w->r->vals, dec, w->line, mm, REC_MATCH_MAX);
        if (n && rec_match_vars(mm, n) == 1) {
            w->r->json_tagged_decimal = true;
            rec_match_template(&mm[0], w->r->use_abs, "|json:decimal", tmpl, sizeof(tmpl));
            char *fmt = strstr(tmpl, "|amount:.");
            if (fmt)
                memmove(fmt, fmt + 9, strlen(fmt + 9) + 1);
            return rec_jstr(tmpl);
        }
        if (n)
            return rec_jtodo(w, "a decimal two variables have", key);
        w->r->json_tagged_decimal = true;
    }
    if (rec_tagged_date(v, iso, sizeof(iso))) {
        if (rec_jldate(w, iso, true, tmpl, sizeof(tmpl))) {
            w->r->json_tagged_date = true;
            return rec_jstr(tmpl);
        }
        struct rec_match mm[REC_MATCH_MAX];
        size_t n = rec_values_find_date(&w->r->vals, iso, w->line, mm, REC_MATCH_MAX);
        w->r->json_tagged_date = true;
        if (n == 1) {
            snprintf(tmpl, sizeof(tmpl), "${%s|json:date}", mm[0].form->var);
            return rec_jstr(tmpl);
        }
        if (n > 1)
            return rec_jtodo(w, "a date two variables have", key);
    }

    switch (jdoc_kind(v)) {
    case JDOC_STRING:
        return rec_jstring(w, json_string_value(v), key);
    case JDOC_NUMBER:
        return rec_jnumber(w, v, key);
    case JDOC_ARRAY: {
        if (rec_jlines(w, v)) {
            /* {"$each-line": T}: T from line 1's element, which every other line's must give */
            json_t *t0 = NULL;
            size_t n = json_array_size(v);
            bool same = true;
            for (size_t li = 0; li < n; li++) {
                w->line = li + 1;
                json_t *t = rec_jwalk(w, json_array_get(v, li), key, depth + 1);
                if (li == 0)
                    t0 = t;
                else {
                    same = same && json_equal(t0, t);
                    json_decref(t);
                }
            }
            w->line = 0;
            if (!same)
                rec_todo_later(w->r, "lines", w->r->ex[w->jc->at].e->index,
                               "the invoice's lines at \"%s\": the elements of the recorded array "
                               "do not give one template (a value of one line matched another "
                               "variable than its neighbour's): check the $each-line template",
                               key ? key : "");
            json_t *o = json_object();
            if (!o || json_object_set_new(o, "$each-line", t0) != 0)
                abort(); /* out of memory */
            return o;
        }
        /* a resolve's list of codes (all the lines' accounts in one search): one code; a list
         * is one when it holds the code and every other element is the code of another line */
        if (w->jc->code && w->jc->code_value && w->jc->code_var && json_array_size(v) >= 1) {
            bool has = false, all = true;
            json_array_foreach((json_t *)v, i, m)
            {
                const char *e =
                    json_is_string(m) && !jdoc_number_text(m) ? json_string_value(m) : NULL;
                if (!e) {
                    all = false;
                    break;
                }
                bool code = strcmp(e, w->jc->code_value) == 0;
                has = has || code;
                bool line = false;
                for (size_t f = 0; !code && !line && f < w->r->vals.n; f++)
                    line = w->r->vals.forms[f].line > 0 &&
                           strcmp(w->r->vals.forms[f].var, w->jc->code_var) == 0 &&
                           strcmp(w->r->vals.forms[f].text, e) == 0;
                all = all && (code || line);
            }
            if (has && all) {
                json_t *one = json_array();
                if (!one || json_array_append_new(one, rec_jstr("${code}")) != 0)
                    abort();
                return one;
            }
        }
        json_t *out = json_array();
        if (!out)
            abort();
        /* a listing's paging by position (search_read(domain, offset, limit, ...)): the first
         * 0 followed by a count is the offset and the page's size */
        size_t off_at = SIZE_MAX;
        if (w->jc->n_ldates && !w->page_size) {
            for (i = 0; i + 1 < json_array_size(v) && off_at == SIZE_MAX; i++) {
                const char *a = jdoc_number_text(json_array_get(v, i));
                const char *b = jdoc_number_text(json_array_get(v, i + 1));
                long n = b ? strtol(b, NULL, 10) : 0;
                if (a && b && strcmp(a, "0") == 0 && strspn(b, "0123456789") == strlen(b) &&
                    n > 0 && n <= 100000) {
                    off_at = i;
                    w->page_size = n;
                }
            }
        }
        json_array_foreach((json_t *)v, i, m)
        {
            json_t *e = off_at != SIZE_MAX && i == off_at       ? rec_jstr("${offset|json:int}")
                        : off_at != SIZE_MAX && i == off_at + 1 ? rec_jstr("${limit|json:int}")
                                                                : rec_jwalk(w, m, key, depth + 1);
            if (json_array_append_new(out, e) != 0)
                abort();
        }
        return out;
    }
    case JDOC_OBJECT: {
        json_t *out = json_object();
        if (!out)
            abort();
        json_object_foreach((json_t *)v, k, m)
        {
            if (json_object_set_new(out, k, rec_jwalk(w, m, k, depth + 1)) != 0)
                abort();
        }
        return out;
    }
    case JDOC_NULL:
    case JDOC_BOOL:
        break;
    }
    return json_deep_copy(v);
}

char *rec_json_body(struct rec *r, struct rec_ex *x, const struct rec_jctx *jc)
{
    struct rec_jw w = {.r = r, .jc = jc};
    struct apbot_buf b;

    if (!x->jreq)
        return NULL;
    json_t *t = rec_jwalk(&w, jdoc_root(x->jreq), NULL, 0);
    apbot_buf_init(&b, REC_DRAFT_MAX);
    if (jdoc_write(&b, t) != APBOT_OK || w.fail) {
        json_decref(t);
        apbot_buf_done(&b);
        return NULL;
    }
    json_decref(t);
    if (jc->page_size)
        *jc->page_size = w.page_size ? w.page_size : w.named_limit;
    return apbot_buf_steal(&b, NULL);
}
