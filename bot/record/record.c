/*
 * record.c - `apbot flow record` (record.h): reads the sample invoice and the HAR, runs the
 * recorder's parts in order (the exchanges, the reference the person typed, the session, the
 * booking, the lookup, the listing), writes the draft and tells what it decided and what it
 * left open.
 *
 * Before the draft is written it is held to two checks: every secret of the HAR (the password,
 * Basic credentials, cookie values, tokens the session captures) is absent from its bytes, or
 * nothing is written; and a draft without open decisions loads as `apbot run` would load it
 * (flow_load), or the problems are reported as what is left to do.
 */
#define _GNU_SOURCE /* memmem */
#include "record/record-int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "apbot/flow.h"
#include "apbot/invoice.h"
#include "apbot/mem.h"
#include "apbot/reader.h"
#include "apbot/text.h"
#include "apbot/vendors.h"
#include "web/jdoc.h"

#define REC_ERR_LEN 8192

/* ---- todos and notes ---------------------------------------------------------------------- */

static void rec_todo_id(struct rec *r, const char *id, char *buf, size_t len)
{
    snprintf(buf, len, "%s", id);
    for (size_t k = 2; k < 1000; k++) {
        bool used = false;
        for (size_t i = 0; i < r->n_todos && !used; i++)
            used = strcmp(r->todos[i].id, buf) == 0;
        for (size_t i = 0; i < r->n_pending && !used; i++)
            used = strcmp(r->pending[i].id, buf) == 0;
        if (!used)
            return;
        snprintf(buf, len, "%.40s-%zu", id, k);
    }
}

static struct rec_todo *rec_todo_new(struct rec *r, struct rec_todo **arr, size_t *n, size_t *cap,
                                     const char *id, size_t entry, const char *fmt, va_list ap)
{
    if (apbot_grow((void **)arr, cap, *n, sizeof(**arr), REC_TODOS_MAX) != APBOT_OK)
        return NULL;
    struct rec_todo *t = &(*arr)[*n];
    memset(t, 0, sizeof(*t));
    rec_todo_id(r, id, t->id, sizeof(t->id));
    t->entry = entry;
    char text[2048];
    vsnprintf(text, sizeof(text), fmt, ap);
    t->text = apbot_xstrdup(text);
    (*n)++;
    return t;
}

static void rec_todo_xml(struct rec *r, struct apbot_buf *b, const char *indent,
                         const struct rec_todo *t)
{
    rec_addf(r, b, "%s<todo id=\"", indent);
    rec_addx(r, b, t->id);
    rec_add(r, b, "\"");
    if (t->entry)
        rec_addf(r, b, " entry=\"%zu\"", t->entry);
    rec_add(r, b, ">");
    rec_addx(r, b, t->text);
    rec_add(r, b, "</todo>");
}

void rec_todo(struct rec *r, struct apbot_buf *b, const char *indent, const char *id, size_t entry,
              const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    struct rec_todo *t = rec_todo_new(r, &r->todos, &r->n_todos, &r->cap_todos, id, entry, fmt, ap);
    va_end(ap);
    if (!t)
        return;
    rec_todo_xml(r, b, indent, t);
    if (*indent)
        rec_add(r, b, "\n");
}

void rec_todo_later(struct rec *r, const char *id, size_t entry, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    (void)rec_todo_new(r, &r->pending, &r->n_pending, &r->cap_pending, id, entry, fmt, ap);
    va_end(ap);
}

void rec_todo_flush(struct rec *r, struct apbot_buf *b, const char *indent)
{
    for (size_t i = 0; i < r->n_pending; i++) {
        struct rec_todo *p = &r->pending[i];
        if (apbot_grow((void **)&r->todos, &r->cap_todos, r->n_todos, sizeof(*r->todos),
                       REC_TODOS_MAX) != APBOT_OK) {
            free(p->text);
            continue;
        }
        r->todos[r->n_todos++] = *p;
        rec_todo_xml(r, b, indent, p);
        rec_add(r, b, "\n");
    }
    r->n_pending = 0;
}

void rec_note(struct rec *r, const char *fmt, ...)
{
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (apbot_grow((void **)&r->notes, &r->cap_notes, r->n_notes, sizeof(*r->notes),
                   REC_NOTES_MAX) != APBOT_OK)
        return;
    r->notes[r->n_notes++] = apbot_xstrdup(text);
}

/* ---- the sample invoice ------------------------------------------------------------------- */

struct rec_pick {
    long want, seen, refused;
    char *json;
    char where[512];
    FILE *errout;
};

static int rec_accept(void *ctx, const struct invoice *inv, const char *where)
{
    struct rec_pick *pk = ctx;
    if (++pk->seen != pk->want)
        return 0;
    snprintf(pk->where, sizeof(pk->where), "%s", where ? where : "");
    pk->json = invoice_to_json(inv);
    return -1; /* found: stop reading */
}

static void rec_refuse(void *ctx, const char *where, const char *reason)
{
    struct rec_pick *pk = ctx;
    char w[512], rr[512];
    pk->refused++;
    fprintf(pk->errout, "refused: %s: %s\n", text_escape_into(w, sizeof(w), where, 0),
            text_escape_into(rr, sizeof(rr), reason, 0));
}

/* ---- the reference the person typed ------------------------------------------------------- */

/* A JSON body's strings into fn (depth-bounded). */
static void rec_json_strings(const json_t *v, const char *key, int depth,
                             void (*fn)(void *, const char *, const char *), void *ctx)
{
    const char *k;
    json_t *m;
    size_t i;
    if (depth > 16)
        return;
    if (json_is_string(v) && !jdoc_number_text(v))
        fn(ctx, key, json_string_value(v));
    else if (json_is_object(v))
        json_object_foreach((json_t *)v, k, m) rec_json_strings(m, k, depth + 1, fn, ctx);
    else if (json_is_array(v))
        json_array_foreach((json_t *)v, i, m) rec_json_strings(m, key, depth + 1, fn, ctx);
}

struct rec_keyscan {
    struct rec *r;
    size_t at;
    const char *field; /* --key-field */
    const char *found[16];
    size_t n;
};

/* True when a read request sends value as one of its values, alone or wrapped in a search
 * pattern's wildcards ("%REF%", "*REF*"). */
static bool rec_searched(const struct rec *r, const char *value)
{
    size_t vl = strlen(value);
    for (size_t j = 0; j < r->n_ex; j++) {
        const struct rec_ex *y = &r->ex[j];
        if (y->role == REC_ROLE_SKIPPED || !rec_ex_is_read(y))
            continue;
        const struct har_pair *p[2] = {y->query, y->form};
        size_t n[2] = {y->n_query, y->n_form};
        for (int k = 0; k < 2; k++)
            for (size_t i = 0; i < n[k]; i++)
                if (strcmp(p[k][i].value, value) == 0)
                    return true;
        if (!y->jreq || !y->e->req_body)
            continue;
        /* a JSON string of the body: the value, maybe inside wildcards */
        const char *body = y->e->req_body, *bend = body + y->e->req_len;
        for (const char *at = body;
             at < bend && (at = rec_find(at, (size_t)(bend - at), value, vl)) != NULL; at++) {
            const char *a = at, *z = at + vl;
            while (a > y->e->req_body && strchr("%*?_", a[-1]))
                a--;
            while (*z && strchr("%*?_", *z))
                z++;
            if (a > y->e->req_body && a[-1] == '"' && *z == '"')
                return true;
        }
    }
    return false;
}

/* True when an answer held value before any request sent it: the server gave it (a context,
 * a name it shows), nobody typed it. */
static bool rec_answered_before(const struct rec *r, size_t at, const char *value)
{
    size_t vl = strlen(value);
    for (size_t j = 0; j <= at && j < r->n_ex; j++) {
        const struct rec_ex *x = &r->ex[j];
        if (x->role == REC_ROLE_SKIPPED)
            continue;
        if (rec_find(x->e->url, strlen(x->e->url), value, vl) ||
            rec_find(x->e->req_body, x->e->req_len, value, vl))
            return false; /* sent first */
        if (j < at && rec_find(x->ans->body, x->ans->body_len, value, vl))
            return true;
    }
    return false;
}

static void rec_key_candidate(void *ctx, const char *name, const char *value)
{
    struct rec_keyscan *ks = ctx;
    struct rec *r = ks->r;
    struct rec_match m[REC_MATCH_MAX];
    if (ks->field) {
        if (name && strcmp(name, ks->field) == 0 && *value && ks->n == 0)
            ks->found[ks->n++] = value;
        return;
    }
    if (strlen(value) < 4 || strlen(value) > 200 ||
        rec_values_find(&r->vals, value, 0, true, m, 1) ||
        rec_values_find_prefix(&r->vals, value, 0, m, 1) ||
        (r->password && strcmp(value, r->password) == 0) ||
        (r->user && strcmp(value, r->user) == 0) || rec_answered_before(r, ks->at, value) ||
        !rec_searched(r, value))
        return;
    for (size_t i = 0; i < ks->n; i++)
        if (strcmp(ks->found[i], value) == 0)
            return;
    if (ks->n < 16)
        ks->found[ks->n++] = value;
}

/* The reference: a value the person typed into the invoice (a form field they changed, a JSON
 * value nobody answered them) of a request that writes, and searched for by a read (or the
 * value of --key-field). */
static void rec_find_key(struct rec *r)
{
    struct rec_keyscan ks = {.r = r, .field = r->rq->key_field};
    for (size_t i = 0; i < r->n_ex; i++) {
        struct rec_ex *x = &r->ex[i];
        if (x->role == REC_ROLE_SKIPPED || x->values < 2 || (!ks.field && rec_ex_is_read(x)))
            continue;
        ks.at = i;
        if (x->jreq) {
            rec_json_strings(jdoc_root(x->jreq), NULL, 0, rec_key_candidate, &ks);
        } else {
            struct rec_formref fr;
            bool form = rec_form_find(r, i, &fr);
            const struct har_pair *p = x->n_form ? x->form : x->query;
            size_t n = x->n_form ? x->n_form : x->n_query;
            for (size_t k = 0; k < n; k++) {
                const char *def = form ? rec_form_default(&fr, p[k].name) : NULL;
                if (!ks.field && def && strcmp(def, p[k].value) == 0)
                    continue; /* the page's, not typed */
                rec_key_candidate(&ks, p[k].name, p[k].value);
            }
            if (form)
                rec_formref_done(&fr);
        }
        if (ks.field && ks.n)
            break;
    }
    if (ks.n == 1) {
        r->key_ref = apbot_xstrdup(ks.found[0]);
        rec_note(r,
                 "key: the reference typed into the invoice ('%s'%s%s) is where apbot writes "
                 "its key, ${key}",
                 ks.found[0], ks.field ? ", field " : ", searched for later",
                 ks.field ? ks.field : "");
    } else if (ks.n > 1) {
        char list[1024] = "";
        size_t w = 0;
        for (size_t i = 0; i < ks.n && w < sizeof(list); i++)
            w += (size_t)snprintf(list + w, sizeof(list) - w, "%s'%s'", i ? ", " : "", ks.found[i]);
        rec_note(r, "key: several typed values were searched for (%s): give --key-field NAME",
                 list);
    } else if (ks.field) {
        rec_note(r, "key: no request with the sample's values has a field '%s'", ks.field);
    }
}

/* ---- secrets -------------------------------------------------------------------------------- */

struct rec_secrets {
    char *s[256];
    size_t n;
};

static void rec_secret_add(struct rec_secrets *sc, const char *v, size_t len)
{
    if (len < 6 || sc->n >= sizeof(sc->s) / sizeof(*sc->s))
        return;
    for (size_t i = 0; i < sc->n; i++)
        if (strlen(sc->s[i]) == len && memcmp(sc->s[i], v, len) == 0)
            return;
    sc->s[sc->n++] = apbot_xstrndup(v, len);
}

/* What the HAR holds that must never reach the draft: the password, Basic credentials, cookie
 * values, Authorization values, tokens the session captures. */
static void rec_secrets_of(const struct rec *r, struct rec_secrets *sc)
{
    if (r->password)
        rec_secret_add(sc, r->password, strlen(r->password));
    for (size_t i = 0; i < r->har->n; i++) {
        const struct har_entry *e = &r->har->entries[i];
        for (size_t h = 0; h < e->n_req_headers; h++) {
            const char *n = e->req_headers[h].name, *v = e->req_headers[h].value;
            if (strcasecmp(n, "authorization") == 0 || strcasecmp(n, "proxy-authorization") == 0) {
                const char *sp = strrchr(v, ' ');
                rec_secret_add(sc, sp ? sp + 1 : v, strlen(sp ? sp + 1 : v));
            } else if (strcasecmp(n, "cookie") == 0) {
                for (const char *p = v; *p;) {
                    const char *eq = strchr(p, '='), *end = strchr(p, ';');
                    if (!eq || (end && eq > end))
                        break;
                    size_t l = end ? (size_t)(end - eq - 1) : strlen(eq + 1);
                    rec_secret_add(sc, eq + 1, l);
                    p = end ? end + 1 : eq + 1 + l;
                    while (*p == ' ')
                        p++;
                }
            }
        }
        for (size_t h = 0; h < e->n_resp_headers; h++) {
            if (strcasecmp(e->resp_headers[h].name, "set-cookie") != 0)
                continue;
            const char *v = e->resp_headers[h].value, *eq = strchr(v, '=');
            if (eq)
                rec_secret_add(sc, eq + 1, strcspn(eq + 1, ";"));
        }
    }
    for (size_t i = 0; i < r->n_sess; i++)
        if (r->sess[i].secret && r->sess[i].text)
            rec_secret_add(sc, r->sess[i].text, strlen(r->sess[i].text));
}

static void rec_secrets_free(struct rec_secrets *sc)
{
    for (size_t i = 0; i < sc->n; i++) {
        explicit_bzero(sc->s[i], strlen(sc->s[i]));
        free(sc->s[i]);
    }
    sc->n = 0;
}

size_t rec_secret_in(const struct rec *r, const char *text, size_t len)
{
    struct rec_secrets sc = {0};
    size_t found = 0;
    rec_secrets_of(r, &sc);
    for (size_t i = 0; i < sc.n && !found; i++)
        if (memmem(text, len, sc.s[i], strlen(sc.s[i])))
            found = strlen(sc.s[i]);
    rec_secrets_free(&sc);
    return found;
}

/* ---- writing -----------------------------------------------------------------------------------
 */

static int rec_write_file(const char *path, const char *text, size_t len, bool force, char *err,
                          size_t errlen)
{
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp%ld", path, (long)getpid()) >= sizeof(tmp))
        return apbot_fail(err, errlen, APBOT_E_INVAL, "%s: path too long", path);
    if (!force && access(path, F_OK) == 0)
        return apbot_fail(err, errlen, APBOT_E_CONFLICT,
                          "%s exists: not overwritten (give --force to replace it)", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return apbot_fail(err, errlen, APBOT_E_IO, "%s: %s", tmp, strerror(errno));
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(fd, text + off, len - off);
        if (n <= 0) {
            close(fd);
            unlink(tmp);
            return apbot_fail(err, errlen, APBOT_E_IO, "%s: cannot write", tmp);
        }
        off += (size_t)n;
    }
    if (fsync(fd) != 0 || close(fd) != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return apbot_fail(err, errlen, APBOT_E_IO, "%s: %s", path, strerror(errno));
    }
    return APBOT_OK;
}

/* The flow's name: rq->name, else the output file's name without .xml. */
static void rec_name(const struct record_request *rq, char *buf, size_t len)
{
    const char *base = rq->name;
    char tmp[256];
    if (!base) {
        const char *slash = strrchr(rq->out_path, '/');
        snprintf(tmp, sizeof(tmp), "%s", slash ? slash + 1 : rq->out_path);
        char *dot = strrchr(tmp, '.');
        if (dot && strcasecmp(dot, ".xml") == 0)
            *dot = '\0';
        base = tmp;
    }
    size_t n = 0;
    for (const char *p = base; *p && n + 1 < len; p++) {
        char c = *p;
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || ((c == '-' || c == '_') && n))
            buf[n++] = c;
        else if (n && buf[n - 1] != '-')
            buf[n++] = '-';
    }
    while (n && (buf[n - 1] == '-' || buf[n - 1] == '_'))
        n--;
    buf[n] = '\0';
    if (!n || buf[0] < 'a' || buf[0] > 'z')
        snprintf(buf, len, "recorded");
}

/* The recording's day: the first entry's start, in UTC and local time. */
static void rec_today(struct rec *r)
{
    for (size_t i = 0; i < r->har->n; i++) {
        const char *s = r->har->entries[i].started;
        struct tm tm;
        memset(&tm, 0, sizeof(tm));
        if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                   &tm.tm_min, &tm.tm_sec) != 6)
            continue;
        snprintf(r->today[0], sizeof(r->today[0]), "%04d-%02d-%02d", tm.tm_year, tm.tm_mon,
                 tm.tm_mday);
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        time_t t = timegm(&tm);
        struct tm lt;
        if (localtime_r(&t, &lt))
            strftime(r->today[1], sizeof(r->today[1]), "%Y-%m-%d", &lt);
        return;
    }
    time_t now = time(NULL);
    struct tm lt;
    if (localtime_r(&now, &lt)) {
        strftime(r->today[0], sizeof(r->today[0]), "%Y-%m-%d", &lt);
        strftime(r->today[1], sizeof(r->today[1]), "%Y-%m-%d", &lt);
    }
}

void rec_begin(struct rec *r, const struct record_request *rq, const struct har *har,
               const struct invoice *inv)
{
    memset(r, 0, sizeof(*r));
    r->rq = rq;
    r->har = har;
    r->inv = inv;
    r->commit = r->login = SIZE_MAX;
    rec_values_init(&r->vals, inv);
    r->user = rq->user && *rq->user ? rq->user : NULL;
    r->password = rq->password && *rq->password ? rq->password : NULL;
    rec_today(r);
    struct apbot_buf *bufs[] = {&r->erp,        &r->markers, &r->login_x, &r->lookup,
                                &r->resolves_x, &r->post,    &r->list};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(*bufs); i++)
        apbot_buf_init(bufs[i], REC_DRAFT_MAX);
}

void rec_analyse(struct rec *r)
{
    rec_find_key(r);
    rec_session(r);
    rec_post(r);
    rec_lookup(r);
    rec_list(r);
    if (r->n_pending) {
        /* open decisions with no element of their own left to sit beside: at the end */
        struct apbot_buf tail;
        apbot_buf_init(&tail, REC_DRAFT_MAX);
        rec_todo_flush(r, &tail, "  ");
        rec_add(r, &r->list, apbot_buf_str(&tail));
        apbot_buf_done(&tail);
    }
}

void rec_end(struct rec *r)
{
    rec_ex_free(r);
    rec_values_done(&r->vals);
    free(r->key_ref);
    free(r->doc);
    free(r->doctype_map);
    free(r->owned_user);
    struct apbot_buf *bufs[] = {&r->erp,        &r->markers, &r->login_x, &r->lookup,
                                &r->resolves_x, &r->post,    &r->list};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(*bufs); i++)
        apbot_buf_done(bufs[i]);
    for (size_t i = 0; i < r->n_todos; i++)
        free(r->todos[i].text);
    free(r->todos);
    for (size_t i = 0; i < r->n_pending; i++)
        free(r->pending[i].text);
    free(r->pending);
    for (size_t i = 0; i < r->n_notes; i++)
        free(r->notes[i]);
    free(r->notes);
    for (size_t i = 0; i < r->n_sess; i++)
        free(r->sess[i].text);
    for (size_t i = 0; i < r->n_pagecap; i++)
        free(r->pagecap[i].re);
}

int record_run(const struct record_request *rq, struct record_result *ret, FILE *out, FILE *errout)
{
    struct record_result res = {0};
    struct rec r;
    struct har *har = NULL;
    struct vendor_map *vm = NULL;
    struct invoice inv;
    struct rec_pick pk = {0};
    char *err = apbot_xcalloc(1, REC_ERR_LEN), *draft = NULL;
    char t1[1024], t2[1024];
    size_t draft_len = 0;
    int rc;

    memset(&r, 0, sizeof(r));
    invoice_init(&inv);
    r.rq = rq;
    r.commit = r.login = SIZE_MAX;
    fprintf(errout,
            "apbot flow record: %s holds the password, the session cookies and every token of "
            "the recorded session: keep it as safe as the password, and delete it once the flow "
            "works. None of them is copied into the draft.\n",
            text_escape_into(t1, sizeof(t1), rq->har_path, 0));

    /* the sample invoice, as the queue would hold it */
    if (rq->vendors_path &&
        (rc = vendor_map_load(rq->vendors_path, &vm, err, REC_ERR_LEN)) != APBOT_OK) {
        fprintf(errout, "apbot flow record: %s\n", text_escape_into(t1, sizeof(t1), err, 0));
        goto out;
    }
    pk.want = rq->invoice_n > 0 ? rq->invoice_n : 1;
    pk.errout = errout;
    struct invoice_sink sink = {.accept = rec_accept, .refuse = rec_refuse, .ctx = &pk};
    rc = reader_read_file(rq->invoice_path, vm, &sink, err, REC_ERR_LEN);
    if (pk.seen < pk.want || !pk.json ||
        invoice_from_json(pk.json, &inv, err, REC_ERR_LEN) != APBOT_OK) {
        if (pk.seen < pk.want && rc == APBOT_OK)
            fprintf(errout, "apbot flow record: %s holds %ld readable invoice%s, not #%ld\n",
                    text_escape_into(t1, sizeof(t1), rq->invoice_path, 0), pk.seen,
                    pk.seen == 1 ? "" : "s", pk.want);
        else
            fprintf(errout, "apbot flow record: %s\n", text_escape_into(t1, sizeof(t1), err, 0));
        rc = APBOT_E_INVAL;
        goto out;
    }
    rc = har_read(rq->har_path, &har, err, REC_ERR_LEN);
    if (rc != APBOT_OK) {
        fprintf(errout, "apbot flow record: %s\n", text_escape_into(t1, sizeof(t1), err, 0));
        goto out;
    }
    rec_begin(&r, rq, har, &inv);
    rec_budget_reset(REC_BUDGET_BYTES);
    rec_ex_build(&r);
    for (size_t i = 0; i < r.n_ex; i++)
        res.exchanges += r.ex[i].role != REC_ROLE_SKIPPED;
    if (res.exchanges == 0 || !r.origin[0]) {
        fprintf(errout, "apbot flow record: %s holds no exchange with an ERP (%zu entries%s)\n",
                text_escape_into(t1, sizeof(t1), rq->har_path, 0), har->n,
                har->dropped ? ", more not read" : "");
        rc = APBOT_E_INVAL;
        goto out;
    }
    rec_analyse(&r);
    if (rec_budget_spent()) {
        fprintf(errout,
                "apbot flow record: %s is too large to analyse within the recorder's bounds "
                "(%zu entries): record a shorter session, only the steps of docs/recording.md\n",
                text_escape_into(t1, sizeof(t1), rq->har_path, 0), har->n);
        rc = APBOT_E_LIMIT;
        goto out;
    }

    char name[64];
    rec_name(rq, name, sizeof(name));
    draft = rec_draft(&r, name, res.exchanges, &draft_len);
    if (r.full) {
        fprintf(errout,
                "apbot flow record: the draft would pass %d KiB (the recording holds "
                "values too long for a flow): nothing written\n",
                REC_DRAFT_MAX / 1024);
        rc = APBOT_E_LIMIT;
        goto out;
    }

    /* no secret of the HAR in the draft, ever */
    size_t leak = rec_secret_in(&r, draft, draft_len);
    if (leak) {
        fprintf(errout,
                "apbot flow record: internal error: the draft would hold a secret of the HAR (a "
                "password, cookie or token, %zu characters): nothing written\n",
                leak);
        rc = APBOT_E_BUG;
        goto out;
    }

    rc = rec_write_file(rq->out_path, draft, draft_len, rq->force, err, REC_ERR_LEN);
    if (rc != APBOT_OK) {
        fprintf(errout, "apbot flow record: %s\n", text_escape_into(t1, sizeof(t1), err, 0));
        goto out;
    }
    res.written = true;
    res.open = r.n_todos;
    for (size_t i = 0; i < r.n_ex; i++)
        res.used += r.ex[i].role != REC_ROLE_SKIPPED && r.ex[i].role != REC_ROLE_NONE;

    /* the report */
    char t3[1024], t4[1024];
    fprintf(out, "apbot flow record: %s from %s and %s (%s)\n",
            text_escape_into(t1, sizeof(t1), rq->out_path, 0),
            text_escape_into(t2, sizeof(t2), rq->har_path, 0),
            text_escape_into(t3, sizeof(t3),
                             rq->invoice_label ? rq->invoice_label : rq->invoice_path, 0),
            text_escape_into(t4, sizeof(t4), pk.where, 0));
    fprintf(out, "  ERP       %s: %zu of %zu entries are exchanges with it, %zu used\n",
            text_escape_into(t1, sizeof(t1), r.origin, 0), res.exchanges, har->n, res.used);
    fprintf(out, "\ndecided:\n");
    for (size_t i = 0; i < r.n_notes; i++)
        fprintf(out, "  - %s\n", text_escape_into(t1, sizeof(t1), r.notes[i], TEXT_KEEP_BACKSLASH));
    fprintf(out, "\nexchanges:\n");
    for (size_t i = 0; i < r.n_ex; i++) {
        const struct rec_ex *x = &r.ex[i];
        if (x->role == REC_ROLE_SKIPPED)
            continue;
        fprintf(out, "  [%zu] %-5s %-52s %d  %s\n", x->e->index, x->e->method,
                text_escape_into(t1, 53, x->path, 0), x->ans->status,
                x->role == REC_ROLE_NONE ? "-" : rec_role_name(x->role));
    }
    if (r.n_todos) {
        fprintf(out, "\nopen decisions (%zu): answer each <todo> in %s\n", r.n_todos,
                text_escape_into(t1, sizeof(t1), rq->out_path, 0));
        for (size_t i = 0; i < r.n_todos; i++) {
            char e[32] = "";
            if (r.todos[i].entry)
                snprintf(e, sizeof(e), " (entry %zu)", r.todos[i].entry);
            fprintf(out, "  %s%s: %s\n", r.todos[i].id, e,
                    text_escape_into(t1, sizeof(t1), r.todos[i].text, TEXT_KEEP_BACKSLASH));
        }
        fprintf(out, "\nthen: apbot flow check %s\n",
                text_escape_into(t1, sizeof(t1), rq->out_path, 0));
    } else {
        /* held to the loader apbot run uses */
        struct flow *f = NULL;
        char *ferr = apbot_xcalloc(1, 32 * 1024);
        if (flow_load(rq->out_path, &f, ferr, 32 * 1024) == APBOT_OK) {
            fprintf(out,
                    "\nno open decision: the draft checks (apbot flow check). Next:\n"
                    "  apbot flow trace %s --invoice %s --erp URL --dry-run\n",
                    text_escape_into(t1, sizeof(t1), rq->out_path, 0),
                    text_escape_into(t2, sizeof(t2),
                                     rq->invoice_label ? rq->invoice_label : rq->invoice_path, 0));
        } else {
            fprintf(out, "\nthe draft does not check yet (apbot flow check):\n%s\n", ferr);
            res.open = 1;
        }
        flow_free(f);
        free(ferr);
    }
    rc = APBOT_OK;
out:
    rec_budget_reset(0);
    if (ret)
        *ret = res;
    if (draft)
        explicit_bzero(draft, draft_len);
    free(draft);
    rec_end(&r);
    har_free(har);
    invoice_done(&inv);
    vendor_map_free(vm);
    free(pk.json);
    free(err);
    return rc;
}
