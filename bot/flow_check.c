/*
 * flow_check.c - the semantic checks of a built flow (what `apbot flow check` adds to the
 * schema): every template uses variables allowed in its place, XPath compiles, status specs
 * parse, the post's safety rules hold (exactly one committing step, `completed` rules that
 * yield a document number and never match an empty page, at least one of them), tables name
 * known columns, the lookup compares what the post writes, and the policy numbers agree with
 * each other. Each problem is recorded with its line; nothing here stops at the first one.
 * Building the struct and compiling patterns is flow_load.c's; the template grammar is
 * flow_template.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/xmlerror.h>
#include <libxml/xpath.h>

#include "apbot/match.h"
#include "flow-int.h"

#define FLOW_RULES_ALL ((1u << FLOW_OUT__COUNT) - 1)
#define FLOW_RULES_LOGIN                                                                           \
    ((1u << FLOW_OUT_REJECTED) | (1u << FLOW_OUT_NOT_SENT) | (1u << FLOW_OUT_UNKNOWN))
#define FLOW_RULES_STEP (FLOW_RULES_ALL & ~(1u << FLOW_OUT_COMPLETED))

/* ---- XPath -------------------------------------------------------------------------------- */

#if LIBXML_VERSION >= 21200
#define FLOW_XMLERR const xmlError
#else
#define FLOW_XMLERR xmlError
#endif

struct flow_xpath_err {
    char msg[256];
};

static void flow_xpath_error(void *ctx, FLOW_XMLERR *e)
{
    struct flow_xpath_err *x = ctx;
    size_t n;

    if (!e || x->msg[0])
        return;
    snprintf(x->msg, sizeof(x->msg), "%s", e->message ? e->message : "invalid expression");
    n = strlen(x->msg);
    while (n && (x->msg[n - 1] == '\n' || x->msg[n - 1] == ' '))
        x->msg[--n] = '\0';
}

/* True when xpath compiles as XPath 1.0; why gets libxml2's reason otherwise. */
static bool flow_xpath_ok(const char *xpath, char *why, size_t whylen)
{
    struct flow_xpath_err x = {{0}};
    xmlStructuredErrorFunc old = xmlStructuredError;
    void *old_ctx = xmlStructuredErrorContext;
    xmlXPathCompExprPtr comp;

    xmlSetStructuredErrorFunc(&x, flow_xpath_error);
    comp = xmlXPathCompile((const xmlChar *)xpath);
    xmlSetStructuredErrorFunc(old_ctx, old);
    if (comp) {
        xmlXPathFreeCompExpr(comp);
        return true;
    }
    snprintf(why, whylen, "%s", x.msg[0] ? x.msg : "invalid expression");
    return false;
}

static void flow_check_xpath(struct flow_ctx *c, const char *xpath, long line, const char *what)
{
    char why[256];

    if (xpath && !flow_xpath_ok(xpath, why, sizeof(why)))
        flow_problem(c, line, "%s: XPath '%s' does not compile: %s", what, xpath, why);
}

/* ---- parts --------------------------------------------------------------------------------- */

static void flow_check_fields(struct flow_ctx *c, const struct flow_field *fd, size_t n,
                              unsigned place, const char *what)
{
    char msg[160];

    for (size_t i = 0; i < n; i++) {
        snprintf(msg, sizeof(msg), "%s '%s'", what, fd[i].name ? fd[i].name : "");
        flow_tpl_check(c, fd[i].value, place, fd[i].line, msg);
    }
}

static void flow_check_form(struct flow_ctx *c, const struct flow_form *fm, unsigned place,
                            const char *what)
{
    char msg[160];

    snprintf(msg, sizeof(msg), "%s form", what);
    flow_check_xpath(c, fm->xpath, fm->line, msg);
    flow_check_fields(c, fm->fields, fm->n_fields, place, "field");
    for (size_t i = 0; i < fm->n_fields; i++)
        for (size_t j = 0; j < i; j++)
            if (fm->fields[i].name && fm->fields[j].name &&
                strcmp(fm->fields[i].name, fm->fields[j].name) == 0) {
                flow_problem(c, fm->fields[i].line, "field '%s' is set twice in this form",
                             fm->fields[i].name);
                break;
            }
}

/* `allowed` is a bit set of outcomes allowed in this rule list. */
static void flow_check_rules(struct flow_ctx *c, const struct flow_rule *rules, size_t n,
                             unsigned allowed, const char *where_name)
{
    for (size_t i = 0; i < n; i++) {
        const struct flow_rule *r = &rules[i];
        char what[160];

        snprintf(what, sizeof(what), "rule '%s'", r->name ? r->name : "");
        if (!(allowed & (1u << r->outcome)))
            flow_problem(c, r->line, "%s: outcome '%s' is not allowed in %s", what,
                         flow_outcome_name(r->outcome), where_name);
        if (r->status && !match_status_valid(r->status))
            flow_problem(c, r->line, "%s: bad status spec '%s' (expected e.g. 200, 5xx, 429,503)",
                         what, r->status);
        if (r->outcome != FLOW_OUT_COMPLETED || !r->body)
            continue;
        if (!match_has_group(r->body, "doc"))
            flow_problem(c, r->line,
                         "%s: a completed rule needs a (?<doc>...) group for the document "
                         "number",
                         what);
        else if (match_exec(r->body, "", 0, NULL))
            flow_problem(c, r->line,
                         "%s: a completed rule must not match an empty page (no catch-all "
                         "success)",
                         what);
    }
}

static const char *const flow_column_names[] = {
    "doc",      "reference", "vendor",   "vendor_name", "invoice_number", "date",
    "due_date", "amount",    "currency", "doc_type",    "booked",
};

static bool flow_table_has(const struct flow_table *t, const char *name)
{
    for (size_t i = 0; name && i < t->n_cols; i++)
        if (t->cols[i].name && strcmp(t->cols[i].name, name) == 0)
            return true;
    return false;
}

static void flow_check_table(struct flow_ctx *c, const struct flow_table *t, const char *what)
{
    char msg[128];

    if (t->amount_decimal == t->amount_group)
        flow_problem(c, t->line, "%s table: amount-decimal and amount-group are both '%c'", what,
                     t->amount_decimal);
    if (!flow_date_pattern_ok(t->date_format, strlen(t->date_format)) ||
        !strstr(t->date_format, "%d") || !strstr(t->date_format, "%m") ||
        (!strstr(t->date_format, "%Y") && !strstr(t->date_format, "%y")))
        flow_problem(c, t->line, "%s table: bad date-format '%s' (needs %%d, %%m and %%Y or %%y)",
                     what, t->date_format);
    snprintf(msg, sizeof(msg), "%s table rows", what);
    flow_check_xpath(c, t->rows, t->line, msg);
    snprintf(msg, sizeof(msg), "%s table empty", what);
    flow_check_xpath(c, t->empty, t->line, msg);
    snprintf(msg, sizeof(msg), "%s table next", what);
    flow_check_xpath(c, t->next, t->line, msg);
    for (size_t i = 0; i < t->n_cols; i++) {
        const struct flow_column *col = &t->cols[i];
        bool known = false, twice = false;

        for (size_t k = 0; col->name && k < sizeof(flow_column_names) / sizeof(*flow_column_names);
             k++)
            known = known || strcmp(flow_column_names[k], col->name) == 0;
        for (size_t j = 0; j < i; j++)
            twice =
                twice || (col->name && t->cols[j].name && strcmp(col->name, t->cols[j].name) == 0);
        if (!known)
            flow_problem(c, col->line,
                         "column '%s': unknown name (use doc, reference, vendor, vendor_name, "
                         "invoice_number, date, due_date, amount, currency, doc_type, booked)",
                         col->name ? col->name : "");
        else if (twice)
            flow_problem(c, col->line, "column '%s' is listed twice", col->name);
        snprintf(msg, sizeof(msg), "column '%s'", col->name ? col->name : "");
        flow_check_xpath(c, col->xpath, col->line, msg);
    }
    if (!flow_table_has(t, "doc"))
        flow_problem(c, t->line, "%s table: needs a 'doc' column (the document number)", what);
}

static void flow_check_erp(struct flow_ctx *c)
{
    const struct flow *f = c->f;

    if (f->base_url && strncmp(f->base_url, "http://", 7) != 0 &&
        strncmp(f->base_url, "https://", 8) != 0)
        flow_problem(c, f->erp_line, "erp: base-url '%s' must start with http:// or https://",
                     f->base_url);
    if (f->base_url && strstr(f->base_url, "${"))
        flow_problem(c, f->erp_line, "erp: base-url takes no ${...} variables");
    if (f->login.present && !f->session_expired)
        flow_problem(c, f->line,
                     "erp: a flow with <login> needs <session-expired>, or a login page shown "
                     "instead of an answer cannot be told from an unknown answer");
    if (!f->login.present && !f->basic_auth)
        flow_problem(c, f->line,
                     "flow: no <login> and no <http-basic/>: how does apbot authenticate?");
}

static void flow_check_login(struct flow_ctx *c)
{
    const struct flow_login *l = &c->f->login;

    if (!l->present)
        return;
    flow_tpl_check(c, l->get, FLOW_P_LOGIN_URL, l->line, "login get");
    flow_check_form(c, &l->form, FLOW_P_LOGIN_FIELD, "login");
    flow_check_rules(c, l->rules, l->n_rules, FLOW_RULES_LOGIN, "<login>");
}

static void flow_check_lookup(struct flow_ctx *c)
{
    const struct flow_lookup *lk = &c->f->lookup;

    flow_tpl_check(c, lk->get, FLOW_P_LOOKUP, lk->line, "lookup get");
    flow_check_table(c, &lk->table, "lookup");
    flow_check_fields(c, lk->expect, lk->n_expect, FLOW_P_LOOKUP, "expect");
    if (lk->key_column && !flow_table_has(&lk->table, lk->key_column))
        flow_problem(c, lk->line, "lookup: key-column '%s' is not a column of its table",
                     lk->key_column);
    for (size_t i = 0; i < lk->n_expect; i++)
        if (!flow_table_has(&lk->table, lk->expect[i].name))
            flow_problem(c, lk->expect[i].line, "expect: '%s' is not a column of the table",
                         lk->expect[i].name ? lk->expect[i].name : "");
    if (!lk->key_column && lk->n_expect == 0)
        flow_problem(c, lk->line,
                     "lookup: give key-column or <expect> elements: a hit must be compared "
                     "exactly before it is believed");
}

static void flow_check_post(struct flow_ctx *c)
{
    const struct flow *f = c->f;
    size_t commits = 0;
    bool have_completed = false, key_written = false;

    for (size_t i = 0; i < f->n_steps; i++) {
        const struct flow_step *s = &f->steps[i];
        char msg[160];

        commits += s->commits;
        snprintf(msg, sizeof(msg), "step '%s'", s->name ? s->name : "");
        flow_tpl_check(c, s->get, FLOW_P_STEP_URL, s->line, msg);
        if (i == 0 && !s->get)
            flow_problem(c, s->line, "%s: the first step needs get=\"URL\" to fetch the form", msg);
        for (size_t j = 0; j < i; j++)
            if (s->name && f->steps[j].name && strcmp(s->name, f->steps[j].name) == 0) {
                flow_problem(c, s->line, "step name '%s' is used twice", s->name);
                break;
            }
        flow_check_form(c, &s->form, FLOW_P_STEP_FIELD, msg);
        for (size_t k = 0; k < s->form.n_fields; k++)
            key_written = key_written || flow_tpl_uses(s->form.fields[k].value, "key");
        flow_check_rules(c, s->rules, s->n_rules, FLOW_RULES_STEP,
                         "step rules (completed only in <outcomes>)");
    }
    flow_check_rules(c, f->outcomes, f->n_outcomes, FLOW_RULES_ALL, "<outcomes>");
    for (size_t i = 0; i < f->n_outcomes; i++)
        have_completed = have_completed || f->outcomes[i].outcome == FLOW_OUT_COMPLETED;
    if (!have_completed)
        flow_problem(c, f->outcomes_line,
                     "post: no rule with outcome=\"completed\" in <outcomes>: nothing could ever "
                     "be confirmed as booked");
    if (commits == 0)
        flow_problem(c, f->post_line,
                     "post: no step has commits=\"true\" (mark the step whose submit may book "
                     "the document)");
    else if (commits > 1)
        flow_problem(c, f->post_line,
                     "post: %zu steps have commits=\"true\"; exactly one step may book", commits);
    if (f->lookup.key_column && !key_written)
        flow_problem(c, f->line,
                     "lookup compares key-column '%s' but no post field writes ${key}: the "
                     "lookup could never find what apbot posted",
                     f->lookup.key_column);
}

static void flow_check_list(struct flow_ctx *c)
{
    const struct flow_list *ls = &c->f->list;

    flow_tpl_check(c, ls->get, FLOW_P_LIST_URL, ls->line, "list get");
    if (ls->get && !flow_tpl_uses(ls->get, "date"))
        flow_problem(c, ls->line, "list: get must use ${date} (the day listed)");
    flow_check_table(c, &ls->table, "list");
    if (ls->table.next == NULL && ls->get && !flow_tpl_uses(ls->get, "page") && ls->max_pages > 1)
        flow_problem(c, ls->line,
                     "list: max-pages > 1 needs ${page} in get or a next link in the table");
}

/* Relations between policy numbers, checked on the final numbers (defaults included). */
static void flow_check_policy(struct flow_ctx *c)
{
    const struct flow_policy *p = &c->f->policy;
    long line = c->f->policy_line;

    if (p->settle_ms < p->timeout_ms)
        flow_problem(c, line,
                     "policy: settle-ms (%ld) is shorter than timeout-ms (%ld): a reconciliation "
                     "lookup could miss a record the ERP is still committing",
                     p->settle_ms, p->timeout_ms);
    if (p->connect_timeout_ms > p->timeout_ms)
        flow_problem(c, line, "policy: connect-timeout-ms (%ld) is longer than timeout-ms (%ld)",
                     p->connect_timeout_ms, p->timeout_ms);
    if (p->backoff_cap_ms < p->backoff_base_ms)
        flow_problem(c, line, "policy: backoff-cap-ms (%ld) is below backoff-base-ms (%ld)",
                     p->backoff_cap_ms, p->backoff_base_ms);
    if (p->lease_ms <= p->timeout_ms)
        flow_problem(c, line,
                     "policy: lease-ms (%ld) must be longer than timeout-ms (%ld), or another "
                     "process could take an item in the middle of its post",
                     p->lease_ms, p->timeout_ms);
}

/* Rule list k of the flow in file order: 0 login, 1..n_steps the steps, n_steps + 1 the
 * outcomes. */
static const struct flow_rule *flow_rule_list(const struct flow *f, size_t k, size_t *ret_n)
{
    if (k == 0) {
        *ret_n = f->login.n_rules;
        return f->login.rules;
    }
    if (k <= f->n_steps) {
        *ret_n = f->steps[k - 1].n_rules;
        return f->steps[k - 1].rules;
    }
    *ret_n = f->n_outcomes;
    return f->outcomes;
}

/* Every rule name names one rule in evidence: each is compared with every rule before it. */
static void flow_check_rule_names(struct flow_ctx *c)
{
    const struct flow *f = c->f;

    for (size_t a = 0; a <= f->n_steps + 1; a++) {
        size_t na, nb;
        const struct flow_rule *ra = flow_rule_list(f, a, &na);
        for (size_t i = 0; i < na; i++) {
            bool dup = false;
            for (size_t b = 0; b <= a && !dup; b++) {
                const struct flow_rule *rb = flow_rule_list(f, b, &nb);
                if (b == a)
                    nb = i;
                for (size_t j = 0; j < nb && !dup; j++)
                    if (ra[i].name && rb[j].name && strcmp(ra[i].name, rb[j].name) == 0) {
                        flow_problem(c, ra[i].line, "rule name '%s' is already used at line %d",
                                     ra[i].name, rb[j].line);
                        dup = true;
                    }
            }
        }
    }
}

void flow_check(struct flow_ctx *c)
{
    flow_check_erp(c);
    flow_check_login(c);
    flow_check_lookup(c);
    flow_check_post(c);
    flow_check_list(c);
    flow_check_policy(c);
    flow_check_rule_names(c);
}
