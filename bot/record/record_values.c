/*
 * record_values.c - the sample invoice's values in every form an ERP may write them, and which
 * of them a recorded text is.
 *
 * A person records one session in the browser, typing the values of a sample invoice in the
 * ERP's own formats: "16.11.2026" or "11/16/2026" for a date, "1.469,13" or "1,469.13" for an
 * amount. Every variable of the flow language (docs/writing-flows.md, Templates) is rendered
 * here for the sample with each formatter a flow could use, by the flow module's own expansion
 * (flow_expand), so the template chosen for a recorded text renders exactly that text. Which
 * forms a text matches is a pure function of the table (rec_values_find): the caller decides
 * what a match means (one variable: a template; two variables: an open decision).
 */
#include "record/record-int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/flow.h"
#include "apbot/invoice.h"
#include "apbot/mem.h"
#include "apbot/money.h"

/* How ERPs write amounts: decimal separator and grouping, the ungrouped forms first (an amount
 * under 1000 looks alike in both; the flow's style then decides, rec_values_style). */
static const char *const rec_amount_fmts[] = {
    "amount:.",  "amount:,",  "amount:.,", "amount:,.", "amount:. ",
    "amount:, ", "amount:.'", "amount:,'", "minor",
};
/* How ERPs write dates (the formatter has no unpadded day or month). */
static const char *const rec_date_fmts[] = {
    "date:%Y-%m-%d", "date:%d.%m.%Y", "date:%m/%d/%Y", "date:%d/%m/%Y",
    "date:%Y%m%d",   "date:%d-%m-%Y", "date:%m-%d-%Y", "date:%Y/%m/%d",
    "date:%d.%m.%y", "date:%m/%d/%y", "date:%d/%m/%y", "date:%Y.%m.%d",
};

/* The variables, by kind; line variables need a line. vendor.id and vendor.name stand for
 * their aliases invoice.vendor_id and invoice.vendor_name (one variable, one template). */
struct rec_var {
    const char *name;
    enum rec_kind kind;
    bool line;
};
static const struct rec_var rec_vars[] = {
    {"invoice.number", REC_KIND_TEXT, false},      {"vendor.id", REC_KIND_TEXT, false},
    {"vendor.name", REC_KIND_TEXT, false},         {"invoice.doc_type", REC_KIND_DOCTYPE, false},
    {"invoice.issue_date", REC_KIND_DATE, false},  {"invoice.due_date", REC_KIND_DATE, false},
    {"invoice.currency", REC_KIND_TEXT, false},    {"invoice.payable", REC_KIND_AMOUNT, false},
    {"invoice.net", REC_KIND_AMOUNT, false},       {"invoice.tax", REC_KIND_AMOUNT, false},
    {"invoice.gl_account", REC_KIND_TEXT, false},  {"invoice.description", REC_KIND_TEXT, false},
    {"invoice.line_count", REC_KIND_COUNT, false}, {"line.net", REC_KIND_AMOUNT, true},
    {"line.tax", REC_KIND_AMOUNT, true},           {"line.gl_account", REC_KIND_TEXT, true},
    {"line.description", REC_KIND_TEXT, true},     {"line.quantity", REC_KIND_COUNT, true},
};

/* The text tmpl renders for the sample (line n, 0: none), or NULL when it renders nothing. */
static char *rec_render(const struct flow *f, const struct invoice *inv, size_t n, const char *tmpl)
{
    struct flow_vars fv = {.inv = inv};
    char err[256], *out = NULL;

    if (n > 0 && n <= inv->n_lines) {
        fv.line = &inv->lines[n - 1];
        fv.line_n = n;
    }
    if (flow_expand(f, tmpl, &fv, &out, err, sizeof(err)) != APBOT_OK)
        return NULL;
    if (!out[0]) {
        free(out);
        return NULL;
    }
    return out;
}

static void rec_add_form(struct rec_values *v, const char *var, const char *fmt, char *text,
                         char *text_abs, size_t line, enum rec_kind kind, int rank)
{
    if (apbot_grow((void **)&v->forms, &v->cap, v->n, sizeof(*v->forms), REC_FORMS_MAX) !=
        APBOT_OK) {
        free(text);
        free(text_abs);
        return;
    }
    struct rec_form *fm = &v->forms[v->n++];
    memset(fm, 0, sizeof(*fm));
    fm->var = var;
    snprintf(fm->fmt, sizeof(fm->fmt), "%s", fmt ? fmt : "");
    fm->text = text;
    fm->text_abs = text_abs;
    fm->line = line;
    fm->kind = kind;
    fm->rank = rank;
}

/* Every form of variable var (of line n, or 0) for the sample. */
static void rec_forms_of(struct rec_values *v, const struct flow *f, const struct rec_var *rv,
                         size_t n)
{
    char tmpl[96];

    switch (rv->kind) {
    case REC_KIND_AMOUNT:
        for (size_t i = 0; i < sizeof(rec_amount_fmts) / sizeof(*rec_amount_fmts); i++) {
            snprintf(tmpl, sizeof(tmpl), "${%s|%s}", rv->name, rec_amount_fmts[i]);
            char *t = rec_render(f, v->inv, n, tmpl);
            snprintf(tmpl, sizeof(tmpl), "${%s|abs|%s}", rv->name, rec_amount_fmts[i]);
            char *ta = rec_render(f, v->inv, n, tmpl);
            if (t)
                rec_add_form(v, rv->name, rec_amount_fmts[i], t, ta, n, rv->kind, (int)i);
            else
                free(ta);
        }
        return;
    case REC_KIND_DATE:
        for (size_t i = 0; i < sizeof(rec_date_fmts) / sizeof(*rec_date_fmts); i++) {
            snprintf(tmpl, sizeof(tmpl), "${%s|%s}", rv->name, rec_date_fmts[i]);
            char *t = rec_render(f, v->inv, n, tmpl);
            if (t)
                rec_add_form(v, rv->name, rec_date_fmts[i], t, NULL, n, rv->kind, (int)i);
        }
        return;
    case REC_KIND_TEXT:
    case REC_KIND_COUNT:
    case REC_KIND_DOCTYPE:
        snprintf(tmpl, sizeof(tmpl), "${%s}", rv->name);
        char *t = rec_render(f, v->inv, n, tmpl);
        if (t) {
            /* a short text (a quantity "1", a line count "2") is weak: it is a value only
             * where the caller says such a value may stand */
            enum rec_kind k = rv->kind;
            if (k == REC_KIND_TEXT && strlen(t) < 3)
                k = REC_KIND_COUNT;
            rec_add_form(v, rv->name, "", t, NULL, n, k, 0);
        }
        return;
    }
}

void rec_values_init(struct rec_values *v, const struct invoice *inv)
{
    struct flow f;

    memset(v, 0, sizeof(*v));
    v->inv = inv;
    memset(&f, 0, sizeof(f));
    f.policy = flow_policy_default();
    for (size_t i = 0; i < sizeof(rec_vars) / sizeof(*rec_vars); i++) {
        if (!rec_vars[i].line) {
            rec_forms_of(v, &f, &rec_vars[i], 0);
            continue;
        }
        for (size_t n = 1; n <= inv->n_lines && n <= REC_LINES_MAX; n++)
            rec_forms_of(v, &f, &rec_vars[i], n);
    }
}

void rec_values_done(struct rec_values *v)
{
    for (size_t i = 0; i < v->n; i++) {
        free(v->forms[i].text);
        free(v->forms[i].text_abs);
    }
    free(v->forms);
    memset(v, 0, sizeof(*v));
}

/* Does the form belong to the scope: line 0 is the invoice's values, line n line n's. */
static bool rec_in_scope(const struct rec_form *fm, size_t line)
{
    return fm->line == line;
}

size_t rec_values_find(const struct rec_values *v, const char *text, size_t line, bool weak,
                       struct rec_match *ret, size_t max)
{
    size_t n = 0;

    if (!text || !*text)
        return 0;
    for (size_t i = 0; i < v->n && n < max; i++) {
        const struct rec_form *fm = &v->forms[i];
        if (!rec_in_scope(fm, line) || (fm->kind == REC_KIND_COUNT && !weak) ||
            fm->kind == REC_KIND_DOCTYPE)
            continue;
        bool plain = strcmp(fm->text, text) == 0;
        bool abs = fm->text_abs && strcmp(fm->text_abs, text) == 0;
        if (!plain && !abs)
            continue;
        ret[n++] = (struct rec_match){.form = fm, .plain = plain, .abs = abs};
    }
    return n;
}

size_t rec_values_find_prefix(const struct rec_values *v, const char *text, size_t line,
                              struct rec_match *ret, size_t max)
{
    size_t n = 0;

    if (!text || !*text)
        return 0;
    for (size_t i = 0; i < v->n && n < max; i++) {
        const struct rec_form *fm = &v->forms[i];
        size_t len = strlen(fm->text);
        if (!rec_in_scope(fm, line) || fm->kind != REC_KIND_TEXT || len < 2 ||
            strncmp(text, fm->text, len) != 0)
            continue;
        /* the value, then a separator ("5700--Office Supplies", "5700 Office"): a label that
         * starts with the code and goes on with something else */
        unsigned char c = (unsigned char)text[len];
        if (c == '\0' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
            continue;
        struct rec_match m = {.form = fm, .plain = true, .prefix = true};
        size_t s = 0;
        while (s < sizeof(m.sep) - 1 && text[len + s] && text[len + s] != ' ' &&
               strchr("-:/|._#=>", text[len + s]))
            s++;
        memcpy(m.sep, text + len, s);
        m.sep[s] = '\0';
        ret[n++] = m;
    }
    return n;
}

/* The amount a decimal text ("1469.13", "-5", "1000.0") is, in the sample's currency: true and
 * *ret when it reads exactly. */
static bool rec_decimal(const struct rec_values *v, const char *text, int64_t *ret)
{
    char buf[64];
    size_t n = strlen(text);
    /* trailing zero decimals past the currency's are exact ("1000.000" for EUR) */
    if (n >= sizeof(buf))
        return false;
    memcpy(buf, text, n + 1);
    return money_parse(buf, v->inv->currency, MONEY_PLAIN, MONEY_ROUND_REFUSE, ret, NULL, 0) ==
           APBOT_OK;
}

size_t rec_values_find_amount(const struct rec_values *v, const char *decimal, size_t line,
                              struct rec_match *ret, size_t max)
{
    int64_t want = 0;
    size_t n = 0;

    if (!decimal || !rec_decimal(v, decimal, &want))
        return 0;
    for (size_t i = 0; i < v->n && n < max; i++) {
        const struct rec_form *fm = &v->forms[i];
        int64_t have = 0, have_abs = 0;
        /* the plain ungrouped form of each amount variable stands for the variable */
        if (!rec_in_scope(fm, line) || fm->kind != REC_KIND_AMOUNT ||
            strcmp(fm->fmt, "amount:.") != 0 || !rec_decimal(v, fm->text, &have))
            continue;
        have_abs = have < 0 ? -have : have;
        if (have != want && have_abs != want)
            continue;
        ret[n++] = (struct rec_match){.form = fm, .plain = have == want, .abs = have_abs == want};
    }
    return n;
}

size_t rec_values_find_date(const struct rec_values *v, const char *iso, size_t line,
                            struct rec_match *ret, size_t max)
{
    size_t n = 0;

    if (!iso || !*iso)
        return 0;
    for (size_t i = 0; i < v->n && n < max; i++) {
        const struct rec_form *fm = &v->forms[i];
        if (!rec_in_scope(fm, line) || fm->kind != REC_KIND_DATE ||
            strcmp(fm->fmt, "date:%Y-%m-%d") != 0 || strcmp(fm->text, iso) != 0)
            continue;
        ret[n++] = (struct rec_match){.form = fm, .plain = true};
    }
    return n;
}

bool rec_values_is_sample(const struct rec_values *v, const char *text)
{
    for (size_t i = 0; text && *text && i < v->n; i++)
        if (v->forms[i].kind != REC_KIND_COUNT &&
            (strcmp(v->forms[i].text, text) == 0 ||
             (v->forms[i].text_abs && strcmp(v->forms[i].text_abs, text) == 0)))
            return true;
    return false;
}

size_t rec_match_vars(const struct rec_match *m, size_t n)
{
    size_t vars = 0;
    for (size_t i = 0; i < n; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen =
                strcmp(m[j].form->var, m[i].form->var) == 0 && m[j].form->line == m[i].form->line;
        vars += !seen;
    }
    return vars;
}

const struct rec_match *rec_match_best(const struct rec_match *m, size_t n, char dec, char group)
{
    const struct rec_match *best = NULL;

    for (size_t i = 0; i < n; i++) {
        const struct rec_form *fm = m[i].form;
        if (fm->kind == REC_KIND_AMOUNT && dec) {
            /* the ERP's style, once known, decides between forms that look alike */
            char want[16];
            snprintf(want, sizeof(want), "amount:%c%s", dec, group ? (char[]){group, 0} : "");
            if (strcmp(fm->fmt, want) == 0)
                return &m[i];
        }
        if (!best || fm->rank < best->form->rank)
            best = &m[i];
    }
    return best;
}

void rec_values_style(const struct rec_match *m, size_t n, char *dec, char *group)
{
    /* A grouped form that matched means the ERP groups: only an amount of 1000 or more shows
     * it, and then only one form matches. */
    for (size_t i = 0; i < n; i++) {
        const char *f = m[i].form->fmt;
        if (m[i].form->kind != REC_KIND_AMOUNT || strncmp(f, "amount:", 7) != 0)
            continue;
        bool unique = true;
        for (size_t j = 0; j < n; j++)
            unique = unique && (j == i || m[j].form->kind != REC_KIND_AMOUNT ||
                                strcmp(m[j].form->var, m[i].form->var) != 0);
        if (!unique)
            continue;
        *dec = f[7];
        *group = f[8];
    }
}

void rec_match_template(const struct rec_match *m, bool use_abs, const char *extra, char *buf,
                        size_t len)
{
    const struct rec_form *fm = m->form;
    bool abs = fm->kind == REC_KIND_AMOUNT && (use_abs || (m->abs && !m->plain));
    snprintf(buf, len, "${%s%s%s%s%s}%s", fm->var, abs ? "|abs" : "", fm->fmt[0] ? "|" : "",
             fm->fmt, extra ? extra : "", m->prefix ? m->sep : "");
}
