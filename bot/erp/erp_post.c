/*
 * erp_post.c - one post of one invoice through a flow's steps (see erp_post.h): resolve the
 * codes a step needs as ids (erp_resolve.h), fetch each step's page and fill its form (fields,
 * per-line fields, select options by value or label, the button by name and value) - or compose
 * the step's request as the flow writes it (<send>: a JSON call, or fields without a page) -
 * submit it (the committing request sent once, http.h's fresh), read the answer with the step's
 * rules (on the page or on the JSON), the outcomes, the captures and the session markers, and
 * hand the facts of every exchange to decide_post(), whose verdict alone says what happens
 * next. This file fetches, fills and reads; it never decides what an answer means.
 */
#include "erp/erp_post.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/buf.h"
#include "apbot/erp.h"
#include "apbot/flow.h"
#include "apbot/invoice.h"
#include "apbot/linetax.h"
#include "apbot/mem.h"
#include "apbot/money.h"
#include "base/unittest.h"
#include "web/http.h"
#include "web/match.h"
#include "web/page.h"
#include "erp-int.h"
#include "erp_resolve.h"

/* Values captured over one post (doc included); flow check caps captures far below this. */
#define POST_CAPTURES_MAX 64

/* Where a control's value came from, for the trace. */
struct src {
    char *name;
    char *source;
};

/* Everything one post works with. */
struct post_run {
    struct erp_session *s;
    const struct flow *f;
    const struct invoice *inv;
    const char *key;
    const struct erp_post_hooks *hooks;
    struct erp_post_result *ret;
    size_t ci; /* the committing step */
    const char *cap_names[POST_CAPTURES_MAX];
    char *cap_values[POST_CAPTURES_MAX];
    size_t n_caps;
    char doc[128];
    bool have_doc;
    struct page *cur;           /* the page the next step without `get` works on */
    struct http_response cur_r; /* the answer cur was read from: a step's rules are tried on
                                 * it when cur lacks the step's form, a control or its button */
    struct page_form carry;     /* a skipped step's filled form, which the next step submits */
    bool have_carry;
    struct src *carry_srcs; /* where the carried controls' values came from (a trace's) */
    size_t n_carry_srcs;
    struct post_ref *refs; /* per resolve of the flow: what it found for this invoice */
    struct linetax taxes;  /* the tax of each line (${line.tax}, ${line.gross}), once */
};

/* What one resolve found for this invoice: one row, or one per line (its code uses line.*). */
struct post_ref {
    bool have;
    char **values;  /* one per column of the resolve's table */
    char ***lines;  /* per line: one per column */
    size_t n_lines; /* lines resolved */
};

/* What filling a form found (a data error or a form that is not as the flow says). */
struct fill {
    const struct erp_session *s; /* its secrets are masked out of what */
    bool data_error;
    bool fill_error;
    enum flow_when missing; /* with fill_error: what the page lacks (FLOW_WHEN_MISSING_FORM,
                             * _CONTROL or _BUTTON), FLOW_WHEN_ALWAYS when the form is there
                             * but not as the flow says (two buttons, a control of another
                             * kind, an action off the origin) */
    char what[400];
    size_t skipped; /* lines left out (missing="skip") */
    bool sources;   /* record where each value came from (srcs): only a trace shows them */
    struct src *srcs;
    size_t n_srcs, cap_srcs;
};

static void fill_done(struct fill *fl)
{
    for (size_t i = 0; i < fl->n_srcs; i++) {
        free(fl->srcs[i].name);
        free(fl->srcs[i].source);
    }
    free(fl->srcs);
    memset(fl, 0, sizeof(*fl));
}

static void fill_source(struct fill *fl, const char *name, const char *source)
{
    if (!fl->sources)
        return;
    for (size_t i = 0; i < fl->n_srcs; i++)
        if (strcmp(fl->srcs[i].name, name) == 0) {
            free(fl->srcs[i].source);
            fl->srcs[i].source = apbot_xstrdup(source);
            return;
        }
    if (apbot_grow((void **)&fl->srcs, &fl->cap_srcs, fl->n_srcs, sizeof(*fl->srcs), 100000) !=
        APBOT_OK)
        return;
    fl->srcs[fl->n_srcs].name = apbot_xstrdup(name);
    fl->srcs[fl->n_srcs].source = apbot_xstrdup(source);
    fl->n_srcs++;
}

static const char *fill_source_of(const struct fill *fl, const char *name)
{
    for (size_t i = 0; i < fl->n_srcs; i++)
        if (strcmp(fl->srcs[i].name, name) == 0)
            return fl->srcs[i].source;
    return "page default";
}

static void fill_problem(struct fill *fl, bool data, const char *fmt, const char *a, const char *b)
{
    if (fl->data_error || fl->fill_error)
        return; /* the first problem is the one reported */
    if (data)
        fl->data_error = true;
    else
        fl->fill_error = true;
    /* masked before the cut: a secret cut at the end would no longer be found whole */
    char *ma = erp_mask(fl->s, a ? a : ""), *mb = erp_mask(fl->s, b ? b : "");
    snprintf(fl->what, sizeof(fl->what), fmt, ma, mb);
    free(ma);
    free(mb);
}

/* A fill problem that is a missing form, control or button (`kind`): the step's rules are
 * tried on the page before it counts as "the form changed". */
static void fill_missing(struct fill *fl, enum flow_when kind, const char *fmt, const char *a,
                         const char *b)
{
    if (fl->data_error || fl->fill_error)
        return;
    fill_problem(fl, false, fmt, a, b);
    fl->missing = kind;
}

/* ${ref.NAME.COLUMN} from what the step's resolves found (line_n for one per line), and
 * ${cookie.NAME} from the session. */
static const char *post_find(void *ctx, const char *var, size_t len, size_t line_n)
{
    const struct post_run *pr = ctx;
    if (len > 4 && memcmp(var, "ref.", 4) == 0) {
        const char *name = var + 4, *dot = memchr(name, '.', len - 4);
        if (!dot)
            return NULL;
        size_t nlen = (size_t)(dot - name), clen = (size_t)(var + len - dot - 1);
        for (size_t r = 0; r < pr->f->n_resolves; r++) {
            const struct flow_resolve *rs = &pr->f->resolves[r];
            if (strlen(rs->name) != nlen || memcmp(rs->name, name, nlen) != 0 || !pr->refs[r].have)
                continue;
            for (size_t k = 0; k < rs->table.n_cols; k++) {
                if (strlen(rs->table.cols[k].name) != clen ||
                    memcmp(rs->table.cols[k].name, dot + 1, clen) != 0)
                    continue;
                if (!rs->per_line)
                    return pr->refs[r].values[k];
                return line_n >= 1 && line_n <= pr->refs[r].n_lines
                           ? pr->refs[r].lines[line_n - 1][k]
                           : NULL;
            }
        }
        return NULL;
    }
    return erp_find_cookie(pr->s, var, len, line_n);
}

static void vars_of(const struct post_run *pr, struct flow_vars *v)
{
    memset(v, 0, sizeof(*v));
    v->inv = pr->inv;
    v->key = pr->key;
    v->doc = pr->have_doc ? pr->doc : NULL;
    v->capture_names = pr->cap_names;
    v->capture_values = (const char *const *)pr->cap_values;
    v->n_captures = pr->n_caps;
    v->find = post_find;
    v->find_ctx = (void *)pr;
    v->taxes = &pr->taxes;
    erp_vars_session(pr->s, v, false);
}

static void post_refs_free(struct post_run *pr)
{
    for (size_t r = 0; pr->refs && r < pr->f->n_resolves; r++) {
        size_t n = pr->f->resolves[r].table.n_cols;
        erp_ref_values_free(pr->refs[r].values, n);
        for (size_t l = 0; l < pr->refs[r].n_lines; l++)
            erp_ref_values_free(pr->refs[r].lines[l], n);
        free(pr->refs[r].lines);
    }
    free(pr->refs);
    pr->refs = NULL;
}

static void capture_set(struct post_run *pr, const char *name, const char *value)
{
    if (strcmp(name, "doc") == 0) {
        erp_text_copy(pr->doc, sizeof(pr->doc), value);
        pr->have_doc = true;
    }
    for (size_t i = 0; i < pr->n_caps; i++)
        if (strcmp(pr->cap_names[i], name) == 0) {
            free(pr->cap_values[i]);
            pr->cap_values[i] = apbot_xstrdup(value);
            return;
        }
    if (pr->n_caps >= POST_CAPTURES_MAX)
        return;
    pr->cap_names[pr->n_caps] = name; /* borrowed from the flow */
    pr->cap_values[pr->n_caps] = apbot_xstrdup(value);
    pr->n_caps++;
}

/* Forgets the captures (a restart), keeping the document number when keep_doc. */
static void captures_clear(struct post_run *pr, bool keep_doc)
{
    for (size_t i = 0; i < pr->n_caps; i++)
        free(pr->cap_values[i]);
    pr->n_caps = 0;
    if (keep_doc && pr->have_doc) {
        char doc[sizeof(pr->doc)];
        memcpy(doc, pr->doc, sizeof(doc));
        capture_set(pr, "doc", doc);
    } else {
        pr->have_doc = false;
    }
}

/* Makes *p, read from the answer *r, the page the next step works on; takes both. */
static void cur_take(struct post_run *pr, struct page **p, struct http_response *r)
{
    page_free(pr->cur);
    http_response_done(&pr->cur_r);
    pr->cur = *p;
    *p = NULL;
    pr->cur_r = *r;
    memset(r, 0, sizeof(*r));
}

static void carry_drop(struct post_run *pr)
{
    page_form_done(&pr->carry);
    pr->have_carry = false;
    for (size_t i = 0; i < pr->n_carry_srcs; i++) {
        free(pr->carry_srcs[i].name);
        free(pr->carry_srcs[i].source);
    }
    free(pr->carry_srcs);
    pr->carry_srcs = NULL;
    pr->n_carry_srcs = 0;
}

static void cur_drop(struct post_run *pr)
{
    page_free(pr->cur);
    pr->cur = NULL;
    http_response_done(&pr->cur_r);
    memset(&pr->cur_r, 0, sizeof(pr->cur_r));
    carry_drop(pr);
}

static enum page_option_mode option_mode(enum flow_option o)
{
    switch (o) {
    case FLOW_OPTION_LABEL:
        return PAGE_OPTION_LABEL;
    case FLOW_OPTION_LABEL_PREFIX:
        return PAGE_OPTION_LABEL_PREFIX;
    case FLOW_OPTION_DEFAULT:
    case FLOW_OPTION_VALUE:
    case FLOW_OPTION__COUNT:
        break;
    }
    return PAGE_OPTION_VALUE;
}

static const char *option_words(enum flow_option o)
{
    switch (o) {
    case FLOW_OPTION_LABEL:
        return "whose label is";
    case FLOW_OPTION_LABEL_PREFIX:
        return "whose label starts with";
    case FLOW_OPTION_DEFAULT:
    case FLOW_OPTION_VALUE:
    case FLOW_OPTION__COUNT:
        break;
    }
    return "of value";
}

/*
 * What a field's value stands for, in a clerk's words: the first invoice variable of its
 * template (${line.gl_account}-- is "the G/L account"), its name into ret_var (a template of
 * its own: "${line.gl_account}"). NULL when the template uses no variable a clerk knows by
 * name. Pure.
 */
UNITTEST const char *erp_field_subject(const char *tmpl, char *ret_var, size_t var_len)
{
    static const struct {
        const char *var, *words;
    } known[] = {
        {"line.gl_account", "the G/L account"},     {"invoice.gl_account", "the G/L account"},
        {"invoice.currency", "the currency"},       {"vendor.id", "the vendor"},
        {"invoice.vendor_id", "the vendor"},        {"vendor.name", "the vendor"},
        {"invoice.vendor_name", "the vendor"},      {"invoice.doc_type", "the document type"},
        {"line.quantity", "the quantity"},          {"invoice.number", "the invoice number"},
        {"invoice.issue_date", "the invoice date"}, {"invoice.due_date", "the due date"},
    };
    const char *p = tmpl ? strstr(tmpl, "${") : NULL;
    if (!p)
        return NULL;
    p += 2;
    size_t n = strcspn(p, "|}");
    if (!p[n])
        return NULL; /* not a variable (the loaded flow's templates are all closed) */
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (strlen(known[i].var) == n && memcmp(p, known[i].var, n) == 0) {
            snprintf(ret_var, var_len, "${%s}", known[i].var);
            return known[i].words;
        }
    return NULL;
}

/*
 * The reason a clerk reads when a field's value is not one the ERP offers (a select without
 * such an option, or with several): "the G/L account 1060 is not one this ERP accepts (field
 * account_1)", from what the field's template carries; the field's own words when it carries
 * nothing a clerk knows. Into buf.
 */
static void option_problem(struct post_run *pr, const struct flow_field *fd,
                           const struct flow_vars *vars, const char *name, const char *value,
                           bool several, char *buf, size_t len)
{
    char var[64], *own = NULL;
    const char *subject = erp_field_subject(fd->value, var, sizeof(var));
    if (subject && flow_expand(pr->f, var, vars, &own, NULL, 0) == APBOT_OK && own && *own) {
        char *mv = erp_mask(pr->s, own);
        snprintf(buf, len, "%s %.200s %s (field %s)", subject, mv,
                 several ? "matches several of this ERP's choices, not one"
                         : "is not one this ERP accepts",
                 name);
        free(mv);
    } else {
        char *mv = erp_mask(pr->s, value);
        snprintf(buf, len, "field %s %s %s '%.200s'", name,
                 several ? "has several options, not one" : "has no option",
                 option_words(fd->option), mv);
        free(mv);
    }
    free(own);
}

/* Expands tmpl into *ret (borrowed: tmpl itself when it is literal, else *ret_heap, which the
 * caller frees). As flow_expand. */
static int expand(const struct post_run *pr, const char *tmpl, const struct flow_vars *vars,
                  const char **ret, char **ret_heap, char *err, size_t errlen)
{
    const char *lit = flow_literal(tmpl);
    if (lit) {
        *ret = lit;
        return APBOT_OK;
    }
    int rc = flow_expand(pr->f, tmpl, vars, ret_heap, err, errlen);
    if (rc == APBOT_OK)
        *ret = *ret_heap;
    return rc;
}

/*
 * Sets one field. in_lines: a <lines> field, where `missing` says what a control the page
 * lacks means. Returns false when the field could not be set (the problem is in fl).
 */
static bool fill_field(struct post_run *pr, struct page_form *form, const struct flow_field *fd,
                       const struct flow_vars *vars, bool in_lines, enum flow_missing missing,
                       struct fill *fl)
{
    char err[APBOT_ERR_LEN] = "";
    const char *name = NULL, *value = NULL;
    char *name_heap = NULL, *value_heap = NULL;
    const struct page_option *chosen = NULL;
    char what[300];
    bool ok = false;
    int rc;

    rc = expand(pr, fd->name, vars, &name, &name_heap, err, sizeof(err));
    if (rc == APBOT_OK)
        rc = expand(pr, fd->value, vars, &value, &value_heap, err, sizeof(err));
    if (rc != APBOT_OK) {
        fill_problem(fl, rc == APBOT_E_DATA, "field %s: %s", name ? name : fd->name, err);
        goto out;
    }
    /* One look for the control: both answer APBOT_E_NOTFOUND, the form untouched, when it
     * has no control of that name (page.h). */
    if (fd->option != FLOW_OPTION_DEFAULT)
        rc = page_form_select(form, name, value, option_mode(fd->option), &chosen);
    else
        rc = page_form_set(form, name, value);
    if (rc == APBOT_E_NOTFOUND) {
        if (in_lines && missing == FLOW_MISSING_ADD && fd->option != FLOW_OPTION_DEFAULT) {
            /* An added control has no options to choose from: the value would be a guess. */
            fill_problem(fl, false,
                         "field %s: option= on a control the page lacks: no option to "
                         "choose%s",
                         name, NULL);
            goto out;
        }
        if (in_lines && missing == FLOW_MISSING_ADD) {
            if (page_form_add(form, name, value) != APBOT_OK) {
                fill_problem(fl, false, "field %s cannot be added%s", name, NULL);
                goto out;
            }
            fill_source(fl, name, "added (not on the page)");
            ok = true;
            goto out;
        }
        fill_missing(fl, FLOW_WHEN_MISSING_CONTROL,
                     "the form has no control '%s'%s (the form "
                     "changed)",
                     name, NULL);
        goto out;
    }
    if (fd->option != FLOW_OPTION_DEFAULT) {
        switch (rc) {
        case APBOT_OK:
            if (fl->sources) {
                snprintf(what, sizeof(what), "option chosen by %s '%.200s'",
                         fd->option == FLOW_OPTION_VALUE ? "value" : "label", chosen->label);
                fill_source(fl, name, what);
            }
            ok = true;
            goto out;
        case APBOT_E_DATA:
        case APBOT_E_CONFLICT:
            option_problem(pr, fd, vars, name, value, rc == APBOT_E_CONFLICT, what, sizeof(what));
            fill_problem(fl, true, "%s%s", what, NULL);
            goto out;
        default:
            fill_problem(fl, false, "field %s is not a select (the form changed)%s", name, NULL);
            goto out;
        }
    }
    if (rc == APBOT_E_DATA) {
        char var[64], *own = NULL;
        const char *subject = erp_field_subject(fd->value, var, sizeof(var));
        if (subject && flow_expand(pr->f, var, vars, &own, NULL, 0) == APBOT_OK && own && *own) {
            char *mv = erp_mask(pr->s, own); /* before the cut (fill_problem) */
            snprintf(what, sizeof(what), "%s %.200s is not one this ERP accepts (field %s)",
                     subject, mv, name);
            free(mv);
        } else {
            char *mv = erp_mask(pr->s, value);
            snprintf(what, sizeof(what), "field %s: '%.200s' is not one of its options", name, mv);
            free(mv);
        }
        free(own);
        fill_problem(fl, true, "%s%s", what, NULL);
        goto out;
    }
    if (rc != APBOT_OK) {
        fill_problem(fl, false, "field %s cannot be set%s", name, NULL);
        goto out;
    }
    fill_source(fl, name, "template");
    ok = true;
out:
    free(name_heap);
    free(value_heap);
    return ok;
}

/* Fills a step's fields and lines into form. */
static void fill_form(struct post_run *pr, const struct flow_step *st, struct page_form *form,
                      struct fill *fl)
{
    struct flow_vars vars;
    vars_of(pr, &vars);
    for (size_t k = 0; k < st->form.n_fields && !fl->data_error && !fl->fill_error; k++)
        (void)fill_field(pr, form, &st->form.fields[k], &vars, false, FLOW_MISSING_ERROR, fl);
    const struct flow_lines *ln = &st->form.lines;
    if (!ln->present || ln->n_fields == 0)
        return;
    for (size_t n = 1; n <= pr->inv->n_lines && !fl->data_error && !fl->fill_error; n++) {
        vars.line = &pr->inv->lines[n - 1];
        vars.line_n = n;
        if (ln->missing == FLOW_MISSING_SKIP) {
            char *first = NULL;
            if (flow_expand(pr->f, ln->fields[0].name, &vars, &first, NULL, 0) == APBOT_OK &&
                !page_form_has(form, first)) {
                free(first);
                fl->skipped++;
                continue; /* the next round trip brings its row */
            }
            free(first);
        }
        for (size_t k = 0; k < ln->n_fields && !fl->data_error && !fl->fill_error; k++)
            (void)fill_field(pr, form, &ln->fields[k], &vars, true, ln->missing, fl);
    }
}

/* True when the form found by the step's XPath on p lacks the controls of some line. */
static bool lacks_lines(const struct post_run *pr, const struct flow_step *st, const struct page *p)
{
    struct page_form form;
    struct flow_vars vars;
    bool lacks = false;
    memset(&form, 0, sizeof(form));
    if (!p || page_find_form(p, st->form.xpath, &form, NULL, 0) != APBOT_OK)
        return false; /* no form: the next step says what that means */
    vars_of(pr, &vars);
    for (size_t n = 1; n <= pr->inv->n_lines && !lacks; n++) {
        char *first = NULL;
        vars.line = &pr->inv->lines[n - 1];
        vars.line_n = n;
        if (flow_expand(pr->f, st->form.lines.fields[0].name, &vars, &first, NULL, 0) == APBOT_OK)
            lacks = !page_form_has(&form, first);
        free(first);
    }
    page_form_done(&form);
    return lacks;
}

static enum decide_rule rule_kind(enum flow_outcome o)
{
    switch (o) {
    case FLOW_OUT_COMPLETED:
        return DECIDE_RULE_COMPLETED;
    case FLOW_OUT_SAVED:
        return DECIDE_RULE_SAVED;
    case FLOW_OUT_REJECTED:
        return DECIDE_RULE_REJECTED;
    case FLOW_OUT_ALREADY_EXISTS:
        return DECIDE_RULE_ALREADY_EXISTS;
    case FLOW_OUT_NOT_SENT:
        return DECIDE_RULE_NOT_SENT;
    case FLOW_OUT_SESSION_EXPIRED:
        return DECIDE_RULE_SESSION_EXPIRED;
    case FLOW_OUT_UNKNOWN:
    case FLOW_OUT__COUNT:
        break;
    }
    return DECIDE_RULE_UNKNOWN;
}

static enum decide_transport transport_of(const struct http_response *r)
{
    switch (r->transport) {
    case HTTP_ANSWERED:
        return DECIDE_TR_ANSWERED;
    case HTTP_NOT_SENT:
        return DECIDE_TR_NOT_SENT;
    case HTTP_UNKNOWN:
        break;
    }
    return DECIDE_TR_UNKNOWN;
}

static enum decide_phase phase_of(const struct post_run *pr, size_t i)
{
    return i < pr->ci ? DECIDE_BEFORE_COMMIT : i == pr->ci ? DECIDE_COMMIT : DECIDE_FOLLOWUP;
}

static void trace_hooks(const struct post_run *pr, erp_trace_fn *ret_fn, void **ret_ctx)
{
    *ret_fn = pr->hooks ? pr->hooks->trace : NULL;
    *ret_ctx = pr->hooks ? pr->hooks->ctx : NULL;
}

/* Writes the exchange's detail into the result: "step: why (what)". */
static void set_detail(struct post_run *pr, const char *step, const char *why, const char *what)
{
    struct erp_post_result *ret = pr->ret;
    size_t at = 0;
    /* snprintf's "%s: %s (%.300s)", piece by piece */
    erp_text_put(ret->detail, sizeof(ret->detail), &at, step, SIZE_MAX);
    erp_text_put(ret->detail, sizeof(ret->detail), &at, ": ", SIZE_MAX);
    erp_text_put(ret->detail, sizeof(ret->detail), &at, why, SIZE_MAX);
    if (what && *what) {
        erp_text_put(ret->detail, sizeof(ret->detail), &at, " (", SIZE_MAX);
        erp_text_put(ret->detail, sizeof(ret->detail), &at, what, 300);
        erp_text_put(ret->detail, sizeof(ret->detail), &at, ")", SIZE_MAX);
    }
    erp_mask_into(pr->s, ret->detail, sizeof(ret->detail));
}

/* Reports one exchange of a post (evidence, trace) and frees it. */
static void report(struct post_run *pr, struct erp_xch *x, struct decide_post d, const char *rule,
                   const char *what)
{
    erp_trace_fn fn;
    void *ctx;
    char why[600];
    size_t at = 0;
    /* snprintf's "%s (%.400s)", piece by piece */
    erp_text_put(why, sizeof(why), &at, d.why, SIZE_MAX);
    if (what && *what) {
        erp_text_put(why, sizeof(why), &at, " (", SIZE_MAX);
        erp_text_put(why, sizeof(why), &at, what, 400);
        erp_text_put(why, sizeof(why), &at, ")", SIZE_MAX);
    }
    erp_xch_outcome(pr->s, x, decide_post_verdict_name(d.verdict), rule, why);
    trace_hooks(pr, &fn, &ctx);
    erp_xch_report(pr->s, x, fn, ctx);
    erp_xch_done(x);
}

/* Fetches the step's page (GET, same origin, never fresh: it changes nothing). */
static struct decide_post step_fetch(struct post_run *pr, size_t i)
{
    const struct flow_step *st = &pr->f->steps[i];
    struct decide_post_facts facts;
    struct decide_post d;
    struct flow_vars vars;
    struct http_response r;
    struct erp_view v;
    struct erp_xch x;
    struct page *p = NULL;
    char err[APBOT_ERR_LEN] = "", what[400] = "";
    char *tmpl = NULL, *url = NULL;

    memset(&facts, 0, sizeof(facts));
    memset(&r, 0, sizeof(r));
    facts.phase = phase_of(pr, i);
    facts.fetch = true;
    facts.last = i + 1 == pr->f->n_steps;
    facts.doc = pr->have_doc;
    facts.captures_ok = true;
    vars_of(pr, &vars);
    int rc = flow_expand(pr->f, st->get, &vars, &tmpl, err, sizeof(err));
    if (rc == APBOT_OK && !(url = erp_url(pr->s, tmpl))) {
        rc = APBOT_E_INVAL;
        snprintf(err, sizeof(err), "the step's URL does not resolve");
    }
    if (rc != APBOT_OK) {
        facts.data_error = rc == APBOT_E_DATA;
        facts.fill_error = !facts.data_error;
        erp_mask_into(pr->s, err, sizeof(err)); /* before the cut, as in fill_problem */
        snprintf(what, sizeof(what), "%s page: %.300s", st->name, err);
        erp_mask_into(pr->s, what, sizeof(what));
        d = decide_post(&facts);
        erp_xch_begin(pr->s, &x, st->name, "GET", tmpl ? tmpl : st->get, NULL, NULL, what);
        report(pr, &x, d, NULL, what);
        if (facts.data_error)
            snprintf(pr->ret->reason, sizeof(pr->ret->reason), "%s", what);
        pr->ret->data_error = facts.data_error;
        set_detail(pr, st->name, d.why, what);
        free(tmpl);
        return d;
    }
    struct http_request req = {.method = "GET", .url = url, .reads_only = true};
    pr->ret->exchanges++;
    rc = erp_request(pr->s, &req, &r);
    if (rc != APBOT_OK) {
        facts.transport = DECIDE_TR_NOT_SENT;
        snprintf(what, sizeof(what), "refused before sending: %s", apbot_strerror(rc));
        d = decide_post(&facts);
        erp_xch_begin(pr->s, &x, st->name, "GET", url, NULL, NULL, what);
        report(pr, &x, d, NULL, what);
        set_detail(pr, st->name, d.why, what);
        free(tmpl);
        free(url);
        return d;
    }
    erp_view_init(&v, pr->s, &r);
    facts.transport = transport_of(&r);
    facts.status = r.status;
    facts.via_redirect = r.redirects > 0 || r.redirect_blocked;
    if (r.transport == HTTP_ANSWERED) {
        facts.session_gone = erp_view_session_gone(&v, pr->f);
        facts.match_aborted = v.aborted;
        if (r.status >= 200 && r.status < 300 && r.body &&
            page_parse(r.body, r.body_len, r.effective_url ? r.effective_url : url, &p, NULL, 0) ==
                APBOT_OK)
            facts.page_ok = true;
        if (v.aborted)
            snprintf(what, sizeof(what), "%s stopped: %s", v.aborted_what,
                     match_budget_reason(&v.budget) ? match_budget_reason(&v.budget) : "aborted");
        else if (!facts.page_ok)
            snprintf(what, sizeof(what), "HTTP %ld", r.status);
    } else {
        snprintf(what, sizeof(what), "%s", r.truncated ? "answer too large" : r.detail);
    }
    d = decide_post(&facts);
    erp_xch_begin(pr->s, &x, st->name, "GET", url, &r, p, NULL);
    report(pr, &x, d, v.aborted ? v.aborted_what : NULL, what);
    if (d.verdict != DECIDE_NEXT) {
        if (r.retry_after_s > 0)
            pr->ret->retry_after_ms = r.retry_after_s * 1000;
        set_detail(pr, st->name, d.why, what);
    }
    if (d.relogin)
        pr->ret->relogin = true;
    erp_view_done(&v);
    if (d.verdict == DECIDE_NEXT)
        cur_take(pr, &p, &r);
    page_free(p);
    http_response_done(&r);
    free(tmpl);
    free(url);
    return d;
}

/* True when the post's exchanges go to a trace, the only reader of the submitted controls and
 * their sources (evidence keeps none). */
static bool tracing(const struct post_run *pr)
{
    return (pr->hooks && pr->hooks->trace) || pr->s->trace;
}

/* Lists every submitted control of form in the exchange, with its source. */
static void trace_controls(struct post_run *pr, struct erp_xch *x, const struct page_form *form,
                           const struct fill *fl)
{
    /* Without a trace, copying and masking every name and value was ~60,000 instructions per
     * form for nothing (and recording the sources while filling ~17,000). */
    if (!tracing(pr))
        return;
    for (size_t k = 0; k < form->n; k++) {
        const char *src = fill_source_of(fl, form->names[k]);
        if (form->pressed > 0 && strcmp(form->names[k], form->buttons[form->pressed - 1]) == 0)
            src = "button pressed";
        erp_xch_control(pr->s, x, form->names[k], form->values[k], src);
    }
}

/* ---- skip="when-known": a round trip whose answer is already known ----------------------- */

/* The code of resolve r for this invoice (heap), or NULL. */
static char *learnt_code(const struct post_run *pr, size_t r)
{
    struct flow_vars vars;
    char *code = NULL;
    vars_of(pr, &vars);
    if (flow_expand(pr->f, pr->f->resolves[r].code, &vars, &code, NULL, 0) != APBOT_OK)
        return NULL;
    return code;
}

/* The answer p of step i went on (NEXT): what the resolves learnt from step i read on its form
 * (the values of their controls) is kept in the run's cache under the invoice's code. */
static void step_learn(struct post_run *pr, size_t i, const struct page *p)
{
    const struct flow *f = pr->f;
    struct page_form form;
    bool have_form = false;

    memset(&form, 0, sizeof(form));
    for (size_t r = 0; r < f->n_resolves; r++) {
        const struct flow_resolve *rs = &f->resolves[r];
        if (!rs->from_step || rs->from != i)
            continue;
        if (!have_form && page_find_form(p, f->steps[i].form.xpath, &form, NULL, 0) != APBOT_OK)
            break; /* no form on the answer: nothing to learn */
        have_form = true;
        char *code = learnt_code(pr, r);
        char **values = apbot_xcalloc(rs->table.n_cols ? rs->table.n_cols : 1, sizeof(*values));
        for (size_t k = 0; k < rs->table.n_cols; k++)
            for (size_t c = 0; c < form.n && !values[k]; c++)
                if (strcmp(form.names[c], rs->table.cols[k].name) == 0)
                    values[k] = form.values[c];
        if (code)
            erp_refs_learn(pr->s, r, code, values);
        free(values); /* its strings are the form's */
        free(code);
    }
    page_form_done(&form);
}

/* Reports a skipped step to the trace only: nothing was exchanged, so there is no evidence. */
static void skip_report(struct post_run *pr, size_t i, const struct page_form *form,
                        const struct fill *fl, const char *why)
{
    const struct flow_step *st = &pr->f->steps[i];
    struct erp_xch x;
    erp_trace_fn fn;
    void *ctx;

    if (!tracing(pr))
        return;
    trace_hooks(pr, &fn, &ctx);
    erp_xch_begin(pr->s, &x, st->name, "POST", form->action ? form->action : "", NULL, NULL,
                  "skipped: what its answer would tell is known");
    x.trace_only = true;
    x.form = apbot_xstrdup(st->form.xpath);
    trace_controls(pr, &x, form, fl);
    erp_xch_outcome(pr->s, &x, "skipped", NULL, why);
    erp_xch_report(pr->s, &x, fn, ctx);
    erp_xch_done(&x);
}

/*
 * Step i (skip="when-known") on the page just fetched: when decide_skip allows it, the step is
 * filled as usual, the controls its answer would set (learnt from an earlier invoice's answer)
 * are set, and the filled form is carried to the next step instead of being submitted: true.
 * false: the step is submitted as usual (its problems, if any, are met there).
 */
static bool step_skip(struct post_run *pr, size_t i)
{
    const struct flow *f = pr->f;
    const struct flow_step *st = &f->steps[i];
    struct decide_skip_facts facts = {.phase = phase_of(pr, i), .known = true};
    struct page_form form;
    struct fill fl;
    char ***known = apbot_xcalloc(f->n_resolves ? f->n_resolves : 1, sizeof(*known));
    bool skipped = false;

    memset(&form, 0, sizeof(form));
    memset(&fl, 0, sizeof(fl));
    fl.s = pr->s;
    fl.sources = tracing(pr);
    for (size_t r = 0; r < f->n_resolves && facts.known; r++) {
        if (!f->resolves[r].from_step || f->resolves[r].from != i)
            continue;
        char *code = learnt_code(pr, r);
        facts.known = code && erp_refs_known(pr->s, r, code, &known[r]) == APBOT_OK;
        free(code);
    }
    if (facts.known && pr->cur &&
        page_find_form(pr->cur, st->form.xpath, &form, NULL, 0) == APBOT_OK) {
        facts.lines_present = !st->form.lines.present || !lacks_lines(pr, st, pr->cur);
        fill_form(pr, st, &form, &fl);
        facts.filled = !fl.data_error && !fl.fill_error && fl.skipped == 0;
        facts.controls_set = true;
        for (size_t r = 0; r < f->n_resolves && facts.controls_set; r++) {
            const struct flow_resolve *rs = &f->resolves[r];
            if (!known[r])
                continue;
            for (size_t k = 0; k < rs->table.n_cols && facts.controls_set; k++) {
                facts.controls_set =
                    page_form_set(&form, rs->table.cols[k].name, known[r][k]) == APBOT_OK;
                if (facts.controls_set && fl.sources) {
                    char src[200];
                    snprintf(src, sizeof(src), "resolve '%s': learnt this run from step '%s'",
                             rs->name, rs->from_step);
                    fill_source(&fl, rs->table.cols[k].name, src);
                }
            }
        }
    }
    struct decide_skip d = decide_skip(&facts);
    if (d.skip) {
        skip_report(pr, i, &form, &fl, d.why);
        carry_drop(pr);
        pr->carry = form;
        pr->have_carry = true;
        memset(&form, 0, sizeof(form));
        pr->carry_srcs = fl.srcs;
        pr->n_carry_srcs = fl.n_srcs;
        fl.srcs = NULL;
        fl.n_srcs = 0;
        skipped = true;
    }
    for (size_t r = 0; r < f->n_resolves; r++)
        if (known[r])
            erp_ref_values_free(known[r], f->resolves[r].table.n_cols);
    free(known);
    fill_done(&fl);
    page_form_done(&form);
    return skipped;
}

/* One submission of a step's form, through its phases: fill, send, read the answer, conclude.
 * step_submit owns it and frees what it holds. */
struct submit {
    const struct flow_step *st;
    struct decide_post_facts facts;
    struct page_form form;
    struct fill fl;
    struct http_request req;
    struct http_response r;
    struct erp_view v;
    bool have_view; /* v was initialised (an answer is being read) */
    struct erp_xch x;
    struct http_field *fields; /* the form's fields as the request sends them */
    struct match_result *m;    /* the matched rule's groups */
    struct page *p;            /* the answer, parsed when it is a 2xx page */
    const struct flow_rule *rule;
    char *get_url; /* a GET form's URL with its fields */
    char what[512];
    const char *method;
    bool doc_by_rule;    /* the rule's (?<doc>) gave the document number */
    bool keep;           /* the answer becomes the page the next step works on */
    struct erp_send snd; /* a <send> step's request, composed */
};

/* Where the exchange went, for the record: the composed URL, the GET form's or the action. */
static const char *submit_url(const struct submit *sb)
{
    if (sb->st->send.present)
        return sb->snd.url ? sb->snd.url : sb->st->send.url;
    return sb->get_url ? sb->get_url : (sb->form.action ? sb->form.action : "");
}

/* What was (or would have been) submitted, for a trace: the form's controls, or a composed
 * request's body or fields (masked by the exchange). */
static void submit_trace(struct post_run *pr, struct submit *sb)
{
    sb->x.form = apbot_xstrdup(sb->st->form.xpath);
    if (!tracing(pr))
        return;
    if (!sb->st->send.present) {
        if (sb->form.n)
            trace_controls(pr, &sb->x, &sb->form, &sb->fl);
        return;
    }
    if (sb->snd.body)
        erp_xch_body(pr->s, &sb->x, sb->snd.body);
    for (size_t k = 0; k < sb->snd.n_fields; k++)
        erp_xch_control(pr->s, &sb->x, sb->snd.fields[k].name, sb->snd.fields[k].value,
                        "the step's <send>");
}

/* A <send> step's request composed from the invoice, the captures, the session and the
 * resolved ids; problems land in sb->fl as a fill's do. */
static void submit_compose(struct post_run *pr, struct submit *sb)
{
    struct flow_vars vars;
    char why[400];

    vars_of(pr, &vars);
    sb->method = sb->st->send.post ? "POST" : "GET";
    int rc = erp_send_prepare(pr->s, &sb->st->send, &vars, false, &sb->snd, why, sizeof(why));
    if (rc != APBOT_OK)
        fill_problem(&sb->fl, rc == APBOT_E_DATA, "%s%s", why, NULL);
}

/* Finds the step's form on the current page and fills it as the flow says, presses its button
 * and, for a GET form, builds its URL. Problems land in sb->fl (data_error: the invoice's
 * values; fill_error: the form is not as the flow describes it). */
static void submit_fill(struct post_run *pr, struct submit *sb)
{
    const struct flow_step *st = sb->st;
    struct page_form *form = &sb->form;
    struct fill *fl = &sb->fl;

    if (pr->have_carry) {
        /* the step before was skipped: its filled form is this step's (flow check: the same
         * form, no page fetched in between) */
        *form = pr->carry;
        memset(&pr->carry, 0, sizeof(pr->carry));
        pr->have_carry = false;
        fl->srcs = pr->carry_srcs;
        fl->n_srcs = fl->cap_srcs = pr->n_carry_srcs;
        pr->carry_srcs = NULL;
        pr->n_carry_srcs = 0;
    } else if (!pr->cur || page_find_form(pr->cur, st->form.xpath, form, NULL, 0) != APBOT_OK) {
        fill_missing(fl, FLOW_WHEN_MISSING_FORM, "form %s not found on the ERP's page%s",
                     st->form.xpath, NULL);
        return;
    }
    if (!form->action || !http_same_origin(erp_base_url(pr->s), form->action)) {
        fill_problem(fl, false, "refused: the form's action leaves the ERP's origin (%.200s)%s",
                     form->action ? form->action : "none", NULL);
        return;
    }
    fill_form(pr, st, form, fl);
    if (!fl->data_error && !fl->fill_error && st->form.submit) {
        int rc = page_form_press(form, st->form.submit, st->form.submit_value);
        if (rc != APBOT_OK) {
            char b[300];
            snprintf(b, sizeof(b), "%s%s%s%s", st->form.submit,
                     st->form.submit_value ? "' of value '" : "",
                     st->form.submit_value ? st->form.submit_value : "", "'");
            if (rc == APBOT_E_CONFLICT)
                fill_problem(fl, false, "several buttons '%s match: the form changed%s", b, NULL);
            else
                fill_missing(fl, FLOW_WHEN_MISSING_BUTTON, "no button '%s: the form changed%s", b,
                             NULL);
        }
    }
    if (!fl->data_error && !fl->fill_error && form->method && strcmp(form->method, "GET") == 0) {
        sb->method = "GET";
        for (size_t k = 0; k < form->n; k++)
            if (pr->s->password && *pr->s->password && form->values[k] &&
                strstr(form->values[k], pr->s->password))
                fill_problem(fl, false, "refused: a GET form would carry a secret in its URL%s%s",
                             NULL, NULL);
        if (!fl->fill_error && !(sb->get_url = erp_form_get_url(form)))
            fill_problem(fl, false, "a GET form too large to submit%s%s", NULL, NULL);
    }
}

/* The business exception's reason a rule gives: its (?<reason>) group, else its reason=,
 * else its name. */
static void rule_reason(struct post_run *pr, const struct flow_rule *rule,
                        const struct match_result *m)
{
    char *g = m ? match_group(m, "reason") : NULL;
    snprintf(pr->ret->reason, sizeof(pr->ret->reason), "%s",
             g && *g        ? g
             : rule->reason ? rule->reason
                            : (rule->name ? rule->name : "rejected"));
    erp_mask_into(pr->s, pr->ret->reason, sizeof(pr->ret->reason));
    free(g);
}

/* The page the step works on lacks its form, a control or its button (sb->fl.missing): the
 * step's rules are tried on that page before it counts as "the form changed" (decide.h). Fills
 * the facts; returns the rule that matched (its groups in sb->m), or NULL. */
static const struct flow_rule *missing_rules(struct post_run *pr, struct submit *sb)
{
    struct erp_view v;

    if (sb->fl.missing == FLOW_WHEN_ALWAYS || !pr->cur || !pr->cur_r.body)
        return NULL;
    erp_view_init(&v, pr->s, &pr->cur_r);
    const struct flow_rule *rule =
        erp_view_rules_missing(&v, sb->st->rules, sb->st->n_rules, sb->fl.missing, &sb->m);
    sb->facts.missing = true;
    sb->facts.transport = DECIDE_TR_ANSWERED;
    sb->facts.status = pr->cur_r.status;
    sb->facts.rule = rule ? rule_kind(rule->outcome) : DECIDE_RULE_NONE;
    sb->facts.match_aborted = v.aborted;
    if (v.aborted)
        snprintf(sb->what, sizeof(sb->what), "%s stopped on the page that lacks it: %s",
                 v.aborted_what,
                 match_budget_reason(&v.budget) ? match_budget_reason(&v.budget) : "aborted");
    erp_view_done(&v);
    return rule;
}

/* The text of a missing control without the conclusion a rule just overturned. */
static void strip_changed(char *what)
{
    static const char *const tails[] = {" (the form changed)", ": the form changed"};
    for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
        char *at = strstr(what, tails[i]);
        if (at)
            memmove(at, at + strlen(tails[i]), strlen(at + strlen(tails[i])) + 1);
    }
}

/* The form could not be filled: nothing is sent; decides and reports what was found. */
static struct decide_post submit_unfilled(struct post_run *pr, struct submit *sb)
{
    const struct flow_step *st = sb->st;
    sb->facts.data_error = sb->fl.data_error;
    sb->facts.fill_error = sb->fl.fill_error;
    char *m_what = erp_mask(pr->s, sb->fl.what);
    snprintf(sb->what, sizeof(sb->what), "%s", m_what);
    free(m_what);
    const struct flow_rule *rule = sb->fl.data_error ? NULL : missing_rules(pr, sb);
    if (rule) {
        strip_changed(sb->what);
        size_t at = strlen(sb->what);
        snprintf(sb->what + at, sizeof(sb->what) - at, "; rule '%s' says why",
                 rule->name ? rule->name : "?");
    }
    struct decide_post d = decide_post(&sb->facts);
    erp_xch_begin(pr->s, &sb->x, st->name, sb->method, submit_url(sb), NULL, NULL, "not submitted");
    submit_trace(pr, sb);
    report(pr, &sb->x, d, rule ? rule->name : NULL, sb->what);
    if (sb->fl.data_error) {
        snprintf(pr->ret->reason, sizeof(pr->ret->reason), "%s", sb->what);
        pr->ret->data_error = true;
    }
    if (rule) {
        erp_text_copy(pr->ret->rule, sizeof(pr->ret->rule), rule->name ? rule->name : "");
        if (d.verdict == DECIDE_REJECTED)
            rule_reason(pr, rule, sb->m);
    }
    if (d.relogin)
        pr->ret->relogin = true;
    set_detail(pr, st->name, d.why, sb->what);
    return d;
}

/* Sends the filled form, unless the hooks stop the post before its committing request.
 * Returns true when an exchange took place (read its answer with submit_read); false with
 * *ret_d decided and reported when nothing was sent. */
static bool submit_send(struct post_run *pr, struct submit *sb, struct decide_post *ret_d)
{
    const struct flow_step *st = sb->st;
    const bool commit = sb->facts.phase == DECIDE_COMMIT;

    if (commit && pr->hooks && pr->hooks->before_commit &&
        !pr->hooks->before_commit(pr->hooks->ctx)) {
        pr->ret->released = true;
        ret_d->verdict = DECIDE_NOT_SENT;
        ret_d->relogin = false;
        ret_d->why = "stopped before the committing request: nothing was sent";
        /* What would have been sent, for `flow trace --dry-run`. */
        erp_xch_begin(pr->s, &sb->x, st->name, sb->method, submit_url(sb), NULL, NULL,
                      "stopped before the committing request");
        submit_trace(pr, sb);
        report(pr, &sb->x, *ret_d, NULL, NULL);
        set_detail(pr, st->name, ret_d->why, NULL);
        return false;
    }
    sb->req = (struct http_request){
        .method = sb->method, .url = sb->get_url ? sb->get_url : sb->form.action, .fresh = commit};
    if (st->send.present) {
        sb->req = sb->snd.req;
        sb->req.fresh = sb->req.fresh || commit;
    } else if (!sb->get_url) {
        sb->fields = apbot_xcalloc(sb->form.n ? sb->form.n : 1, sizeof(*sb->fields));
        for (size_t k = 0; k < sb->form.n; k++) {
            sb->fields[k].name = sb->form.names[k];
            sb->fields[k].value = sb->form.values[k];
        }
        sb->req.fields = sb->fields;
        sb->req.n_fields = sb->form.n;
    }
    if (commit)
        pr->ret->commit_sent = true;
    pr->ret->exchanges++;
    int hrc = erp_request(pr->s, &sb->req, &sb->r);
    if (commit && (hrc != APBOT_OK || sb->r.transport == HTTP_NOT_SENT))
        pr->ret->commit_sent = false;
    if (hrc == APBOT_OK)
        return true;
    sb->facts.transport = DECIDE_TR_NOT_SENT;
    snprintf(sb->what, sizeof(sb->what), "refused before sending: %s", apbot_strerror(hrc));
    *ret_d = decide_post(&sb->facts);
    erp_xch_begin(pr->s, &sb->x, st->name, sb->method, sb->req.url, NULL, NULL, sb->what);
    submit_trace(pr, sb);
    report(pr, &sb->x, *ret_d, NULL, sb->what);
    set_detail(pr, st->name, ret_d->why, sb->what);
    return false;
}

/* The step's captures, read from an answer the step goes on from (or whose rule leaves the
 * document number to them); a capture that does not match clears facts.captures_ok. */
static void submit_captures(struct post_run *pr, struct submit *sb)
{
    const struct flow_step *st = sb->st;
    for (size_t k = 0; k < st->n_captures; k++) {
        const struct flow_capture *c = &st->captures[k];
        char *g = erp_view_capture(&sb->v, c);
        if (!g) {
            sb->facts.captures_ok = false;
            continue;
        }
        capture_set(pr, c->name, g);
        free(g);
    }
}

/* Reads the answer into the facts: the step's rules (then the flow's outcomes on the last
 * step), the document number, the captures, the session markers, whether the page parses. */
static void submit_read(struct post_run *pr, struct submit *sb)
{
    const struct flow *f = pr->f;
    const struct flow_step *st = sb->st;
    const bool last = sb->facts.last;
    struct decide_post_facts *facts = &sb->facts;
    struct erp_view *v = &sb->v;

    erp_view_init(v, pr->s, &sb->r);
    sb->have_view = true;
    facts->transport = transport_of(&sb->r);
    facts->status = sb->r.status;
    facts->via_redirect = sb->r.redirects > 0 || sb->r.redirect_blocked;
    if (sb->r.transport != HTTP_ANSWERED) {
        snprintf(sb->what, sizeof(sb->what), "%s: %s", http_transport_name(sb->r.transport),
                 sb->r.truncated ? "answer too large" : sb->r.detail);
        return;
    }
    sb->rule = erp_view_rules(v, st->rules, st->n_rules, &sb->m);
    if (!sb->rule && !v->aborted && last)
        sb->rule = erp_view_rules(v, f->outcomes, f->n_outcomes, &sb->m);
    const struct flow_rule *rule = sb->rule;
    facts->rule = rule ? rule_kind(rule->outcome) : DECIDE_RULE_NONE;
    if (!rule && !v->aborted)
        facts->session_gone = erp_view_session_gone(v, f);
    if (rule && (rule->outcome == FLOW_OUT_COMPLETED || rule->outcome == FLOW_OUT_SAVED ||
                 rule->outcome == FLOW_OUT_ALREADY_EXISTS)) {
        char *g = sb->m ? match_group(sb->m, "doc") : NULL;
        if (g && *g) {
            erp_text_copy(pr->doc, sizeof(pr->doc), g);
            pr->have_doc = true;
            sb->doc_by_rule = true;
        }
        free(g);
    }
    if (!v->aborted &&
        (!rule || rule->outcome == FLOW_OUT_SAVED || rule->outcome == FLOW_OUT_COMPLETED))
        submit_captures(pr, sb);
    facts->doc = pr->have_doc;
    facts->match_aborted = v->aborted;
    const struct http_response *r = &sb->r;
    if (r->status >= 200 && r->status < 300 && r->body) {
        if (st->send.present && st->send.json)
            facts->page_ok = erp_view_json(v) != NULL; /* a JSON call: its answer is JSON */
        else if (page_parse(r->body, r->body_len, r->effective_url ? r->effective_url : sb->req.url,
                            &sb->p, NULL, 0) == APBOT_OK)
            facts->page_ok = true;
    }
    if (v->aborted)
        snprintf(sb->what, sizeof(sb->what), "%s stopped: %s", v->aborted_what,
                 match_budget_reason(&v->budget) ? match_budget_reason(&v->budget) : "aborted");
    else if (!rule && !facts->session_gone)
        snprintf(sb->what, sizeof(sb->what), "HTTP %ld, no rule matched", r->status);
    else
        snprintf(sb->what, sizeof(sb->what), "HTTP %ld", r->status);
}

/* repeat="until-lines": whether the step goes again (a line could not be filled because its
 * row did not exist on the page; the answer, which an update round trip gave one more row, is
 * filled next), or has run out of rounds (then *d becomes a fill error). */
static bool submit_again(struct post_run *pr, struct submit *sb, int round, struct decide_post *d)
{
    const struct flow_step *st = sb->st;
    if (!(d->verdict == DECIDE_NEXT && st->repeat_until_lines && st->form.lines.present &&
          st->form.lines.n_fields > 0 && pr->inv->n_lines > 0 &&
          (sb->fl.skipped > 0 || lacks_lines(pr, st, sb->p))))
        return false;
    if ((size_t)round + 1 < pr->inv->n_lines + 1)
        return true;
    struct decide_post_facts ff = sb->facts;
    ff.fill_error = true;
    snprintf(sb->what, sizeof(sb->what),
             "the form still lacks line rows after %d submissions of the step", round + 1);
    *d = decide_post(&ff);
    return false;
}

/* What a <compare-amount>'s equals names, in a clerk's words where it is one of the invoice's
 * totals ("amount payable"), else the template itself. */
static const char *compare_words(const char *equals)
{
    static const struct {
        const char *var, *words;
    } w[] = {{"invoice.payable", "amount payable"},
             {"invoice.net", "net amount"},
             {"invoice.tax", "tax amount"}};
    for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
        size_t n = strlen(w[i].var);
        if (strncmp(equals, "${", 2) == 0 && strncmp(equals + 2, w[i].var, n) == 0 &&
            (strcmp(equals + 2 + n, "}") == 0 || strcmp(equals + 2 + n, "|abs}") == 0))
            return w[i].words;
    }
    return equals;
}

/* The step is done (its last round answered as expected): its <compare-amount>s, each the
 * ERP's own amount a capture read against the invoice's amount. A difference sets
 * facts.amount_differs and the reason naming both; an amount that does not read is a screen
 * other than the flow says (fill_error); then decides again. */
static struct decide_post submit_compare(struct post_run *pr, struct submit *sb)
{
    const struct flow_step *st = sb->st;
    struct flow_vars vars;
    char err[APBOT_ERR_LEN], a[48], b[48];

    vars_of(pr, &vars);
    for (size_t k = 0; k < st->n_compares; k++) {
        const struct flow_compare *cm = &st->compares[k];
        const struct flow_table fmt = {.amount_decimal = cm->amount_decimal,
                                       .amount_group = cm->amount_group};
        const char *text = NULL;
        int64_t want = 0, got = 0;
        int exp = 0;

        for (size_t c = 0; c < pr->n_caps && !text; c++)
            if (strcmp(pr->cap_names[c], cm->capture) == 0)
                text = pr->cap_values[c];
        int rc = flow_expand_amount(pr->f, cm->equals, &vars, &want, &exp, err, sizeof(err));
        if (rc != APBOT_OK) {
            sb->facts.data_error = rc == APBOT_E_DATA;
            sb->facts.fill_error = !sb->facts.data_error;
            snprintf(sb->what, sizeof(sb->what), "compare-amount '%.40s': %.300s", cm->capture,
                     err);
            if (sb->facts.data_error) {
                snprintf(pr->ret->reason, sizeof(pr->ret->reason), "%s", sb->what);
                pr->ret->data_error = true;
            }
            break;
        }
        if (!text || erp_parse_amount(&fmt, text, pr->inv->currency, &got, NULL, 0) != APBOT_OK) {
            sb->facts.fill_error = true;
            snprintf(sb->what, sizeof(sb->what),
                     "compare-amount '%s': the ERP's amount '%.60s' does not read as an amount "
                     "(decimal '%c', grouping '%c')",
                     cm->capture, text ? text : "", cm->amount_decimal,
                     cm->amount_group ? cm->amount_group : ' ');
            break;
        }
        if (got != want) {
            sb->facts.amount_differs = true;
            snprintf(sb->what, sizeof(sb->what),
                     "the ERP computes %s %s (%s on step '%s'), but the invoice's %s is %s %s: "
                     "nothing was booked",
                     money_text(got, exp, a, sizeof(a)), pr->inv->currency, cm->capture, st->name,
                     compare_words(cm->equals), money_text(want, exp, b, sizeof(b)),
                     pr->inv->currency);
            snprintf(pr->ret->reason, sizeof(pr->ret->reason), "%s", sb->what);
            pr->ret->amount_differs = true;
            break;
        }
    }
    return decide_post(&sb->facts);
}

/* Reports the exchange with what it captured and hands its result on: the rule, the business
 * exception's reason, Retry-After, and the answer as the page the next step works on. */
static void submit_conclude(struct post_run *pr, struct submit *sb, struct decide_post d,
                            bool again)
{
    const struct flow_step *st = sb->st;
    const struct flow_rule *rule = sb->rule;
    struct erp_xch *x = &sb->x;

    erp_xch_begin(pr->s, x, st->name, sb->method, sb->req.url, &sb->r, sb->p, NULL);
    /* erp_xch_begin zeroed the captures recorded while reading: record them again */
    if (sb->doc_by_rule)
        erp_xch_capture(pr->s, x, "doc", pr->doc);
    for (size_t k = 0; k < st->n_captures; k++)
        for (size_t c = 0; c < pr->n_caps; c++)
            if (strcmp(pr->cap_names[c], st->captures[k].name) == 0)
                erp_xch_capture(pr->s, x, pr->cap_names[c], pr->cap_values[c]);
    submit_trace(pr, sb);
    report(pr, x, d, rule ? rule->name : (sb->v.aborted ? sb->v.aborted_what : NULL),
           again ? "a line row is still missing: the step is submitted again" : sb->what);
    if (rule)
        erp_text_copy(pr->ret->rule, sizeof(pr->ret->rule), rule->name ? rule->name : "");
    if (d.relogin)
        pr->ret->relogin = true;
    if (d.verdict == DECIDE_REJECTED && rule)
        rule_reason(pr, rule, sb->m);
    if (d.verdict == DECIDE_NOT_SENT && sb->r.retry_after_s > 0)
        pr->ret->retry_after_ms = sb->r.retry_after_s * 1000;
    sb->keep = d.verdict == DECIDE_NEXT || d.verdict == DECIDE_SAVED;
    set_detail(pr, st->name, d.why, sb->what);
}

/*
 * Fills and submits step i's form on the current page, reads the answer and decides. *ret_again
 * is set when the step must be submitted once more on its answer (repeat="until-lines").
 */
static struct decide_post step_submit(struct post_run *pr, size_t i, int round, bool *ret_again)
{
    struct submit sb;
    struct decide_post d;

    *ret_again = false;
    memset(&sb, 0, sizeof(sb));
    sb.st = &pr->f->steps[i];
    sb.method = "POST";
    sb.fl.s = pr->s;
    sb.fl.sources = tracing(pr);
    sb.facts.phase = phase_of(pr, i);
    sb.facts.last = i + 1 == pr->f->n_steps;
    sb.facts.doc = pr->have_doc;
    sb.facts.captures_ok = true;

    if (sb.st->send.present)
        submit_compose(pr, &sb);
    else
        submit_fill(pr, &sb);
    if (sb.fl.data_error || sb.fl.fill_error) {
        d = submit_unfilled(pr, &sb);
    } else if (submit_send(pr, &sb, &d)) {
        /* Sent: nothing reads the page the form came from any more (its answer becomes the
         * current page, or the run starts over), so its tree goes before the answer's is
         * built. On a CGI-era ERP whose line selects offer the whole chart of accounts both
         * trees are megabytes, and with 16 sessions the peak held 32 of them. */
        page_free(pr->cur);
        pr->cur = NULL;
        submit_read(pr, &sb);
        d = decide_post(&sb.facts);
        bool again = submit_again(pr, &sb, round, &d);
        if (!again && d.verdict == DECIDE_NEXT && sb.st->n_compares)
            d = submit_compare(pr, &sb);
        submit_conclude(pr, &sb, d, again);
        *ret_again = again && (d.verdict == DECIDE_NEXT || d.verdict == DECIDE_SAVED);
    }
    if (sb.have_view)
        erp_view_done(&sb.v);
    if (d.verdict == DECIDE_NEXT && sb.p)
        step_learn(pr, i, sb.p);
    if (sb.keep)
        cur_take(pr, &sb.p, &sb.r);
    match_result_free(sb.m);
    page_free(sb.p);
    http_response_done(&sb.r);
    free(sb.fields);
    free(sb.get_url);
    erp_send_done(&sb.snd);
    fill_done(&sb.fl);
    page_form_done(&sb.form);
    return d;
}

/* The facts of a step that could not start because a code it needs was not resolved. */
static struct decide_post resolve_failed(struct post_run *pr, size_t i, int rc, const char *why)
{
    struct decide_post_facts facts;
    memset(&facts, 0, sizeof(facts));
    facts.phase = phase_of(pr, i);
    facts.last = i + 1 == pr->f->n_steps;
    facts.doc = pr->have_doc;
    facts.captures_ok = true;
    if (rc == APBOT_E_DATA)
        facts.data_error = true; /* the invoice's code: a business exception naming it */
    else
        facts.transport = DECIDE_TR_NOT_SENT; /* nothing of the step went out */
    struct decide_post d = decide_post(&facts);
    if (rc == APBOT_E_DATA) {
        erp_text_copy(pr->ret->reason, sizeof(pr->ret->reason), why);
        erp_mask_into(pr->s, pr->ret->reason, sizeof(pr->ret->reason));
        pr->ret->data_error = true;
    }
    if (rc == APBOT_E_SYSTEMIC)
        d.relogin = true;
    set_detail(pr, pr->f->steps[i].name, d.why, why);
    return d;
}

/* One resolve for this invoice: its code (for each line when it is one per line) turned into
 * the ERP's row. */
static int resolve_one(struct post_run *pr, size_t r, char *err, size_t errlen)
{
    const struct flow_resolve *rs = &pr->f->resolves[r];
    struct post_ref *ref = &pr->refs[r];
    struct flow_vars vars;
    size_t n = rs->per_line ? pr->inv->n_lines : 1;
    int rc = APBOT_OK;

    vars_of(pr, &vars);
    if (rs->per_line)
        ref->lines = apbot_xcalloc(n ? n : 1, sizeof(*ref->lines));
    for (size_t l = 0; l < n && rc == APBOT_OK; l++) {
        char *code = NULL, **values = NULL;
        if (rs->per_line) {
            vars.line = &pr->inv->lines[l];
            vars.line_n = l + 1;
        }
        rc = flow_expand(pr->f, rs->code, &vars, &code, err, errlen);
        if (rc == APBOT_OK)
            rc = erp_resolve(pr->s, r, code, &values, err, errlen);
        free(code);
        if (rc != APBOT_OK)
            break;
        if (rs->per_line)
            ref->lines[ref->n_lines++] = values;
        else
            ref->values = values;
    }
    ref->have = rc == APBOT_OK;
    return rc;
}

/* Resolves what step i uses that this post has not resolved yet. DECIDE_NEXT when all is known. */
static struct decide_post step_resolve(struct post_run *pr, size_t i)
{
    const struct flow_step *st = &pr->f->steps[i];
    struct decide_post d = {.verdict = DECIDE_NEXT, .why = "resolved"};
    char err[APBOT_ERR_LEN] = "";

    for (size_t k = 0; k < st->n_resolves; k++) {
        size_t r = st->resolves[k];
        if (pr->refs[r].have)
            continue;
        int rc = resolve_one(pr, r, err, sizeof(err));
        if (rc != APBOT_OK)
            return resolve_failed(pr, i, rc, err);
    }
    return d;
}

/* Runs the steps from `start`; a SAVED answer hands the document to hooks.saved and goes on
 * with the follow-up steps. Returns the final decision (never NEXT). */
static struct decide_post run_steps(struct post_run *pr, size_t start)
{
    const struct flow *f = pr->f;
    struct decide_post d = {.verdict = DECIDE_NOT_SENT, .why = "no step ran"};

    for (size_t i = start; i < f->n_steps; i++) {
        const struct flow_step *st = &f->steps[i];
        if (i <= pr->ci && pr->hooks && pr->hooks->stopping &&
            pr->hooks->stopping(pr->hooks->ctx)) {
            pr->ret->released = true;
            d.verdict = DECIDE_NOT_SENT;
            d.relogin = false;
            d.why = "stopped before the committing request: nothing was sent";
            set_detail(pr, st->name, d.why, NULL);
            return d;
        }
        if (st->n_resolves) {
            d = step_resolve(pr, i);
            if (d.verdict != DECIDE_NEXT)
                return d;
        }
        if (st->get) {
            d = step_fetch(pr, i);
            if (d.verdict != DECIDE_NEXT)
                return d;
        }
        if (st->skip_known && step_skip(pr, i))
            continue; /* the next step submits its filled form */
        bool again = false;
        int round = 0;
        do {
            d = step_submit(pr, i, round++, &again);
        } while (d.verdict == DECIDE_NEXT && again);
        if (d.verdict == DECIDE_SAVED) {
            if (pr->hooks && pr->hooks->saved && !pr->hooks->saved(pr->hooks->ctx, pr->doc))
                return d; /* the caller could not record it: no follow-up without it */
            continue;
        }
        if (d.verdict != DECIDE_NEXT)
            return d;
    }
    /* The last step always decides; a flow whose last step went on is misread: the
     * committing request may have gone out. */
    d.verdict = pr->ret->commit_sent ? DECIDE_UNKNOWN : DECIDE_NOT_SENT;
    d.why = "the last step's answer decided nothing";
    return d;
}

int erp_post_run(struct erp_session *s, const struct invoice *inv, const char *key,
                 enum erp_post_from from, const char *doc, const struct erp_post_hooks *hooks,
                 struct erp_post_result *ret, char *err, size_t errlen)
{
    struct post_run pr;
    struct decide_post d;
    int restarts = 0;

    if (ret)
        memset(ret, 0, sizeof(*ret));
    if (!s || !inv || !key || !*key || !ret)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "erp_post_run: bad arguments");
    const struct flow *f = s->flow;
    if (!f->n_steps)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "the flow has no post steps");
    size_t ci = flow_commit_index(f);
    if (from == ERP_POST_FROM_FOLLOWUPS && (!doc || !*doc || ci + 1 >= f->n_steps))
        return apbot_fail(err, errlen, APBOT_E_INVAL,
                          "follow-up steps need a document and a flow that has them");

    memset(&pr, 0, sizeof(pr));
    pr.s = s;
    pr.f = f;
    pr.inv = inv;
    pr.key = key;
    pr.hooks = hooks;
    pr.ret = ret;
    pr.ci = ci;
    pr.refs = apbot_xcalloc(f->n_resolves ? f->n_resolves : 1, sizeof(*pr.refs));
    linetax_init(&pr.taxes, inv);
    size_t start = 0;
    if (from == ERP_POST_FROM_FOLLOWUPS) {
        capture_set(&pr, "doc", doc);
        start = ci + 1;
    }
    for (;;) {
        if (!erp_logged_in(s)) {
            char lerr[APBOT_ERR_LEN] = "";
            int lrc = erp_login(s, lerr, sizeof(lerr));
            if (lrc != APBOT_OK) {
                ret->relogin = true;
                ret->login_refused = erp_login_refused(s);
                d.relogin = true;
                if (start > ci)
                    d.verdict = DECIDE_FOLLOWUP_FAILED;
                else
                    d.verdict = lrc == APBOT_E_SYSTEMIC ? DECIDE_SYSTEMIC : DECIDE_NOT_SENT;
                d.why =
                    lrc == APBOT_E_SYSTEMIC ? "the login was refused" : "the login failed for now";
                set_detail(&pr, "login", d.why, lerr);
                break;
            }
        }
        d = run_steps(&pr, start);
        if (d.verdict == DECIDE_RESTART || d.verdict == DECIDE_RESTART_FOLLOWUPS) {
            bool followups = d.verdict == DECIDE_RESTART_FOLLOWUPS;
            s->logged_in = false;
            if (restarts < ERP_POST_RESTARTS) {
                restarts++;
                captures_clear(&pr, followups);
                cur_drop(&pr);
                start = followups ? ci + 1 : 0;
                continue;
            }
            d.verdict = followups ? DECIDE_FOLLOWUP_FAILED : DECIDE_NOT_SENT;
            d.why = followups ? "the session was lost again on the follow-up steps"
                              : "the session was lost again before the committing step";
            ret->relogin = true;
            char note[64];
            snprintf(note, sizeof(note), "after %d fresh logins", restarts);
            set_detail(&pr, "post", d.why, note);
        }
        break;
    }
    ret->verdict = d.verdict;
    if (pr.have_doc)
        erp_text_copy(ret->doc, sizeof(ret->doc), pr.doc);
    erp_mask_into(s, ret->doc, sizeof(ret->doc));
    erp_mask_into(s, ret->reason, sizeof(ret->reason));
    if (ret->relogin)
        s->logged_in = false;
    captures_clear(&pr, false);
    cur_drop(&pr);
    post_refs_free(&pr);
    linetax_done(&pr.taxes);
    return APBOT_OK;
}
