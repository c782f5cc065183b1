/*
 * erp_resolve.c - reference data (erp_resolve.h): a code turned into the ERP's ids by the flow's
 * <resolve> search, kept per run.
 *
 * The search is a read like a lookup (erp_fetch_req: a GET or a composed call, HTML or JSON),
 * its rows read by the resolve's table. A row counts only when its match column equals the code
 * exactly (a search may match by prefix, ignore case or filters): one such row is the answer,
 * none a business exception naming the code, several, a cut page or an unreadable answer prove
 * nothing. The cache is a bounded table behind one mutex: the sessions of a run ask it before
 * they search, and an answer found once serves every later invoice.
 */
#include "erp/erp_resolve.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/buf.h"
#include "apbot/flow.h"
#include "apbot/mem.h"
#include "erp-int.h"

/* One cached code. */
struct ref_entry {
    size_t which;  /* the resolve's index */
    char *code;    /* the code as expanded */
    char **values; /* one per column of the resolve's table */
    size_t n;
};

struct erp_refs {
    pthread_mutex_t mu;
    struct ref_entry *e;
    size_t n, cap;
    size_t *per; /* entries per resolve (grows with the highest index seen) */
    size_t n_per;
};

struct erp_refs *erp_refs_new(void)
{
    struct erp_refs *r = apbot_xcalloc(1, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
    return r;
}

void erp_ref_values_free(char **values, size_t n)
{
    for (size_t i = 0; values && i < n; i++)
        free(values[i]);
    free(values);
}

void erp_refs_free(struct erp_refs *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++) {
        free(r->e[i].code);
        erp_ref_values_free(r->e[i].values, r->e[i].n);
    }
    free(r->e);
    free(r->per);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

size_t erp_refs_count(struct erp_refs *r)
{
    pthread_mutex_lock(&r->mu);
    size_t n = r->n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static char **values_dup(char *const *v, size_t n)
{
    char **out = apbot_xcalloc(n ? n : 1, sizeof(*out));
    for (size_t i = 0; i < n; i++)
        out[i] = v[i] ? apbot_xstrdup(v[i]) : NULL;
    return out;
}

/* A copy of the cached values of (which, code), or NULL. */
static char **refs_get(struct erp_refs *r, size_t which, const char *code, size_t n)
{
    char **out = NULL;
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->n && !out; i++)
        if (r->e[i].which == which && r->e[i].n == n && strcmp(r->e[i].code, code) == 0)
            out = values_dup(r->e[i].values, n);
    pthread_mutex_unlock(&r->mu);
    return out;
}

/* The longest code or value kept: an ERP's key is short; a longer one (a page the ERP got
 * wrong, or one made to fill the bot's memory) is used for the invoice at hand, never kept. */
#define ERP_REF_VALUE_MAX 512

/* Keeps (which, code) -> values unless the resolve's bound is reached, another session kept
 * it first, or a code or value is longer than ERP_REF_VALUE_MAX. */
static void refs_put(struct erp_refs *r, size_t which, long max, const char *code,
                     char *const *values, size_t n)
{
    if (strlen(code) > ERP_REF_VALUE_MAX)
        return;
    for (size_t i = 0; i < n; i++)
        if (values[i] && strlen(values[i]) > ERP_REF_VALUE_MAX)
            return;
    pthread_mutex_lock(&r->mu);
    if (which >= r->n_per) {
        r->per = apbot_xrealloc(r->per, (which + 1) * sizeof(*r->per));
        memset(r->per + r->n_per, 0, (which + 1 - r->n_per) * sizeof(*r->per));
        r->n_per = which + 1;
    }
    bool have = false;
    for (size_t i = 0; i < r->n && !have; i++)
        have = r->e[i].which == which && strcmp(r->e[i].code, code) == 0;
    if (!have && (long)r->per[which] < max &&
        apbot_grow((void **)&r->e, &r->cap, r->n, sizeof(*r->e), (size_t)max * r->n_per + 1) ==
            APBOT_OK) {
        r->e[r->n++] = (struct ref_entry){
            .which = which, .code = apbot_xstrdup(code), .values = values_dup(values, n), .n = n};
        r->per[which]++;
    }
    pthread_mutex_unlock(&r->mu);
}

/* The session's cache: the run's, or one of its own. */
static struct erp_refs *refs_of(struct erp_session *s)
{
    if (!s->refs) {
        s->refs = erp_refs_new();
        s->own_refs = true;
    }
    return s->refs;
}

int erp_refs_known(struct erp_session *s, size_t which, const char *code, char ***ret_values)
{
    *ret_values = NULL;
    if (which >= s->flow->n_resolves || !code || !*code)
        return APBOT_E_NOTFOUND;
    *ret_values = refs_get(refs_of(s), which, code, s->flow->resolves[which].table.n_cols);
    return *ret_values ? APBOT_OK : APBOT_E_NOTFOUND;
}

void erp_refs_learn(struct erp_session *s, size_t which, const char *code, char *const *values)
{
    if (which >= s->flow->n_resolves || !code || !*code)
        return;
    const struct flow_resolve *r = &s->flow->resolves[which];
    for (size_t i = 0; i < r->table.n_cols; i++)
        if (!values[i] || !*values[i])
            return; /* the answer did not tell it all: nothing is kept */
    refs_put(refs_of(s), which, r->max_entries, code, values, r->table.n_cols);
}

/* The rows of one search, as the table shows them. */
struct ref_rows {
    size_t n_cols;
    int match; /* the match column's index */
    const char *code;
    char **hit; /* the one row matching the code, heap cells */
    size_t matches;
    size_t rows;
};

static int ref_row(void *ctx, const char *const *cells, size_t n)
{
    struct ref_rows *rr = ctx;
    rr->rows++;
    if (rr->match < 0 || (size_t)rr->match >= n || !cells[rr->match] ||
        strcmp(cells[rr->match], rr->code) != 0)
        return 0;
    if (rr->matches++ == 0)
        rr->hit = values_dup((char *const *)cells, rr->n_cols);
    return 0;
}

int erp_resolve(struct erp_session *s, size_t which, const char *code, char ***ret_values,
                char *err, size_t errlen)
{
    const struct flow *f = s->flow;
    const struct flow_resolve *r;
    struct ref_rows rr;
    struct erp_read a;
    struct erp_xch x;
    struct erp_fetch_info info;
    struct flow_vars vars;
    char step[96], ferr[APBOT_ERR_LEN] = "", note[400];
    char *url = NULL;
    int rc;

    if (which >= f->n_resolves)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "no resolve %zu", which);
    r = &f->resolves[which];
    if (!code || !*code)
        return apbot_fail(err, errlen, APBOT_E_DATA, "resolve '%s': the invoice gives no code",
                          r->name);
    if (r->from_step) /* learnt from a step's answers, never asked for (flow check) */
        return apbot_fail(err, errlen, APBOT_E_INVAL, "resolve '%s' is learnt from step '%s'",
                          r->name, r->from_step);
    *ret_values = refs_get(refs_of(s), which, code, r->table.n_cols);
    if (*ret_values)
        return APBOT_OK;

    snprintf(step, sizeof(step), "resolve %s", r->name);
    memset(&vars, 0, sizeof(vars));
    vars.code = code;
    if (r->get) {
        char *tmpl = NULL;
        erp_vars_session(s, &vars, false);
        rc = flow_expand(f, r->get, &vars, &tmpl, ferr, sizeof(ferr));
        if (rc == APBOT_OK && !(url = erp_url(s, tmpl)))
            rc = apbot_fail(ferr, sizeof(ferr), APBOT_E_INVAL, "the URL does not resolve");
        free(tmpl);
        if (rc != APBOT_OK)
            return apbot_fail(err, errlen, APBOT_E_NET, "%s: %s", step, ferr);
    }
    memset(&x, 0, sizeof(x));
    rc = erp_fetch_req(s, step, url, r->send.present ? &r->send : NULL, &vars, r->table.json, &a,
                       &x, &info, ferr, sizeof(ferr));
    free(url);
    free(info.final_url);
    if (rc != APBOT_OK)
        return apbot_fail(err, errlen, rc == APBOT_E_SYSTEMIC ? rc : APBOT_E_NET, "%s", ferr);

    memset(&rr, 0, sizeof(rr));
    rr.n_cols = r->table.n_cols;
    rr.code = code;
    rr.match = -1;
    for (size_t i = 0; i < r->table.n_cols; i++)
        if (r->table.cols[i].name && strcmp(r->table.cols[i].name, r->match_column) == 0)
            rr.match = (int)i;
    size_t n_rows = 0;
    rc = erp_read_rows(&a, &r->table, ref_row, &rr, &n_rows, ferr, sizeof(ferr));
    if (rc != APBOT_OK) {
        snprintf(note, sizeof(note), "%s: no result rows could be read (%.120s)", step, ferr);
        rc = APBOT_E_NET;
    } else if (r->table.max_rows > 0 && (long)rr.rows >= r->table.max_rows && rr.matches != 1) {
        snprintf(note, sizeof(note), "%s: the answer holds its row maximum (%ld): it may be cut",
                 step, r->table.max_rows);
        rc = APBOT_E_NET;
    } else if (rr.matches > 1) {
        snprintf(note, sizeof(note), "%s: %zu rows carry the code '%.60s': which one is meant?",
                 step, rr.matches, code);
        rc = APBOT_E_NET;
    } else if (rr.matches == 0) {
        snprintf(note, sizeof(note), "the ERP holds no %s with the code '%.80s'", r->name, code);
        rc = APBOT_E_DATA;
    } else {
        snprintf(note, sizeof(note), "%s: '%.80s' found", step, code);
        rc = APBOT_OK;
    }
    erp_xch_outcome(s, &x,
                    rc == APBOT_OK       ? "found"
                    : rc == APBOT_E_DATA ? "not-found"
                                         : "failed",
                    NULL, note);
    erp_xch_report(s, &x, NULL, NULL);
    erp_xch_done(&x);
    erp_read_done(&a);
    if (rc != APBOT_OK) {
        erp_ref_values_free(rr.hit, rr.n_cols);
        return apbot_fail(err, errlen, rc, "%s", note);
    }
    refs_put(s->refs, which, r->max_entries, code, rr.hit, rr.n_cols);
    *ret_values = rr.hit;
    return APBOT_OK;
}
