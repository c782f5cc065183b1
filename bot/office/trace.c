/*
 * trace.c - `apbot flow trace` output and decisions (see trace-int.h): every exchange the ERP
 * driver reports, printed for a flow author under the header of its step, each submitted control
 * with where its value came from (the flow field and its line, when the flow set it), the rule
 * that matched with what it asked for, the values captured, the lookup's hits and verdict. Every
 * text goes through text_escape(); the driver has already masked the secrets.
 */
#include "office/trace-int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/buf.h"
#include "apbot/flow.h"
#include "apbot/invoice.h"
#include "apbot/mem.h"
#include "apbot/money.h"
#include "apbot/text.h"
#include "erp/erp_post.h"

/* Display bounds: a trace is read by a person, a value past this is cut ("..."). */
#define TRACE_VALUE_MAX 96
#define TRACE_NAME_COL 24
#define TRACE_VALUE_COL 34
#define TRACE_EXCERPT_MAX 400
#define TRACE_TEXT_MAX 600
#define TRACE_BODY_MAX 8192 /* a composed request's body: the author checks every value */
/* Controls whose flow field is looked for: a form has far fewer. */
#define TRACE_NAMES_MAX 20000

/* One control name a step's flow fields produce, and the field that sets it. */
struct trace_name {
    char *name;
    const struct flow_field *fd;
    const char *where; /* "<field>", "<lines>" (static) */
};

struct trace_printer {
    FILE *out;
    const struct flow *f;
    const struct invoice *inv;
    const char *key;
    bool pages;     /* print every answer's page text, not only unclear ones */
    char group[96]; /* the group the last exchange was printed under */
    int n;          /* exchanges printed */
    int commits;    /* committing requests sent */
    int submits;    /* submissions in the current group */
    /* names the current group's flow fields produce (post steps and the login form) */
    struct trace_name *names;
    size_t n_names;
    const struct flow_form *form; /* the current group's form, or NULL */
};

/* ---- small helpers ----------------------------------------------------------------------- */

static const char *esc(char *dst, size_t len, const char *s)
{
    return text_escape_into(dst, len, s ? s : "", 0);
}

/* As esc, but a backslash stays one: for page excerpts, which the driver may have escaped
 * already (a raw body); control bytes are still written \xNN, so the text stays inert. */
static const char *esc_page(char *dst, size_t len, const char *s)
{
    text_escape_into(dst, len, s ? s : "", 0);
    char *w = dst;
    for (const char *r = dst; *r; r++) {
        if (r[0] == '\\' && r[1] == '\\')
            r++;
        *w++ = *r;
    }
    *w = '\0';
    return dst;
}

/* The post step named `name`, its index in *ret_i; NULL when none. */
static const struct flow_step *step_named(const struct flow *f, const char *name, size_t *ret_i)
{
    for (size_t i = 0; f && name && i < f->n_steps; i++)
        if (f->steps[i].name && strcmp(f->steps[i].name, name) == 0) {
            if (ret_i)
                *ret_i = i;
            return &f->steps[i];
        }
    return NULL;
}

static const struct flow_rule *rule_in(const struct flow_rule *rules, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (rules[i].name && strcmp(rules[i].name, name) == 0)
            return &rules[i];
    return NULL;
}

/* The flow rule named `name` (names are unique in a flow), or NULL. */
static const struct flow_rule *rule_named(const struct flow *f, const char *name)
{
    const struct flow_rule *r;
    if (!f || !name)
        return NULL;
    if ((r = rule_in(f->login.rules, f->login.n_rules, name)))
        return r;
    for (size_t i = 0; i < f->n_steps; i++)
        if ((r = rule_in(f->steps[i].rules, f->steps[i].n_rules, name)))
            return r;
    return rule_in(f->outcomes, f->n_outcomes, name);
}

/* The group an exchange's step belongs to: the lookup's detail pages are the lookup's. */
static const char *group_of(const char *step)
{
    if (!step)
        return "?";
    if (strcmp(step, "detail") == 0)
        return "lookup";
    return step;
}

static void names_clear(struct trace_printer *p)
{
    for (size_t i = 0; i < p->n_names; i++)
        free(p->names[i].name);
    free(p->names);
    p->names = NULL;
    p->n_names = 0;
    p->form = NULL;
}

static void names_add(struct trace_printer *p, size_t *cap, char *name, const struct flow_field *fd,
                      const char *where)
{
    if (apbot_grow((void **)&p->names, cap, p->n_names, sizeof(*p->names), TRACE_NAMES_MAX) !=
        APBOT_OK) {
        free(name); /* past the bound: that control is simply not traced back */
        return;
    }
    p->names[p->n_names].name = name;
    p->names[p->n_names].fd = fd;
    p->names[p->n_names].where = where;
    p->n_names++;
}

/* Expands the control names the form's fields produce (per invoice line for <lines>), so each
 * submitted control can be traced back to its field. Names that need ${doc} or captures do not
 * expand here and are simply not traced back. */
static void names_build(struct trace_printer *p, const struct flow_form *form)
{
    struct flow_vars vars;
    size_t cap = 0;
    names_clear(p);
    p->form = form;
    if (!form || !p->f)
        return;
    memset(&vars, 0, sizeof(vars));
    vars.inv = p->inv;
    vars.key = p->key;
    for (size_t k = 0; k < form->n_fields; k++) {
        char *name = NULL;
        if (flow_expand(p->f, form->fields[k].name, &vars, &name, NULL, 0) == APBOT_OK)
            names_add(p, &cap, name, &form->fields[k], "<field>");
        else
            free(name);
    }
    if (!form->lines.present || !p->inv)
        return;
    for (size_t n = 1; n <= p->inv->n_lines; n++) {
        vars.line = &p->inv->lines[n - 1];
        vars.line_n = n;
        for (size_t k = 0; k < form->lines.n_fields; k++) {
            char *name = NULL;
            if (flow_expand(p->f, form->lines.fields[k].name, &vars, &name, NULL, 0) == APBOT_OK)
                names_add(p, &cap, name, &form->lines.fields[k], "<lines>");
            else
                free(name);
        }
    }
}

static const struct trace_name *name_find(const struct trace_printer *p, const char *name)
{
    for (size_t i = 0; name && i < p->n_names; i++)
        if (strcmp(p->names[i].name, name) == 0)
            return &p->names[i];
    return NULL;
}

/* ---- the printer ------------------------------------------------------------------------- */

struct trace_printer *trace_printer_new(FILE *out, const struct flow *f, const struct invoice *inv,
                                        const char *key)
{
    struct trace_printer *p = apbot_xcalloc(1, sizeof(*p));
    p->out = out;
    p->f = f;
    p->inv = inv;
    p->key = key;
    return p;
}

void trace_printer_free(struct trace_printer *p)
{
    if (!p)
        return;
    names_clear(p);
    free(p);
}

void trace_printer_show_pages(struct trace_printer *p, bool on)
{
    p->pages = on;
}

int trace_printer_exchanges(const struct trace_printer *p)
{
    return p ? p->n : 0;
}

int trace_printer_commits(const struct trace_printer *p)
{
    return p ? p->commits : 0;
}

void trace_printer_section(struct trace_printer *p, const char *title)
{
    char t[TRACE_TEXT_MAX];
    fprintf(p->out, "\n== %s ==\n", esc(t, sizeof(t), title));
    snprintf(p->group, sizeof(p->group), "%s", "");
    p->submits = 0;
    names_clear(p);
}

/* The header of a group: what the step is for and what it may do to the ERP. */
static void group_header(struct trace_printer *p, const char *group)
{
    const struct flow *f = p->f;
    char g[128], line[TRACE_TEXT_MAX];
    size_t i = 0;
    const struct flow_step *st = step_named(f, group, &i);

    esc(g, sizeof(g), group);
    names_clear(p);
    p->submits = 0;
    if (strcmp(group, "login") == 0 && f && f->login.present) {
        if (f->login.has_form)
            snprintf(line, sizeof(line),
                     "login (line %d): fetch the login page, fill its form, submit", f->login.line);
        else if (f->login.send.present)
            snprintf(line, sizeof(line),
                     "login (line %d): one composed %s request%s; what it captures (%zu value%s) "
                     "and the %zu header%s made of it ride on every later request",
                     f->login.line, f->login.send.json ? "JSON" : "form",
                     f->basic_auth ? ", HTTP Basic on it" : "", f->login.n_captures,
                     f->login.n_captures == 1 ? "" : "s", f->n_headers,
                     f->n_headers == 1 ? "" : "s");
        else
            snprintf(line, sizeof(line),
                     "login (line %d): one %s request, no form%s; the session cookie it answers "
                     "rides on every later request",
                     f->login.line, f->login.method ? f->login.method : "GET",
                     f->basic_auth ? ", HTTP Basic on it" : "");
        if (f->login.has_form)
            names_build(p, &f->login.form);
    } else if (strncmp(group, "login ", 6) == 0 && f) {
        snprintf(line, sizeof(line), "login, then '%s': a call the session keeps values of", g + 6);
    } else if (strncmp(group, "resolve ", 8) == 0 && f) {
        snprintf(line, sizeof(line),
                 "%s: the ERP's id for a code of the invoice, asked once per run and code", g);
    } else if (strcmp(group, "lookup") == 0 && f) {
        snprintf(line, sizeof(line),
                 "lookup (line %d): search for the key, compare the %s column exactly%s",
                 f->lookup.line, f->lookup.key_column ? f->lookup.key_column : "<expect>",
                 f->lookup.detail.present ? "; each candidate's detail page is opened" : "");
    } else if (st) {
        size_t ci = flow_commit_index(f);
        const char *role = i < ci    ? "before the committing step: it cannot book"
                           : i == ci ? "THE COMMITTING STEP: its submit may book the document"
                                     : "a follow-up step on the saved document (never a new post)";
        snprintf(line, sizeof(line), "step '%s' (%zu of %zu, line %d): %s%s", g, i + 1, f->n_steps,
                 st->line, role,
                 st->repeat_until_lines ? "; submitted again until every line has its row" : "");
        names_build(p, &st->form);
    } else {
        snprintf(line, sizeof(line), "%s", g);
    }
    fprintf(p->out, "\n== %s ==\n", line);
}

/* Where a control's value came from: the driver's word, and the flow field behind it. */
static void control_source(const struct trace_printer *p, const struct erp_trace_control *c,
                           char *dst, size_t len)
{
    char src[256], tmpl[160];
    const struct trace_name *tn = NULL;
    esc(src, sizeof(src), c->source);
    if (c->source && (strncmp(c->source, "template", 8) == 0 ||
                      strncmp(c->source, "option", 6) == 0 || strncmp(c->source, "added", 5) == 0))
        tn = name_find(p, c->name);
    if (!tn) {
        if (c->source && strcmp(c->source, "button pressed") == 0 && p->form && p->form->submit) {
            char b[96], v[96];
            esc(b, sizeof(b), p->form->submit);
            esc(v, sizeof(v), p->form->submit_value ? p->form->submit_value : "");
            snprintf(dst, len, "%s: <form submit=\"%s\"%s%s%s> (line %d)", src, b,
                     p->form->submit_value ? " submit-value=\"" : "", v,
                     p->form->submit_value ? "\"" : "", p->form->line);
            return;
        }
        snprintf(dst, len, "%s", src);
        return;
    }
    esc(tmpl, sizeof(tmpl), tn->fd->value);
    if (tn->fd->option != FLOW_OPTION_DEFAULT)
        snprintf(dst, len, "%s; %s option=\"%s\" %s (line %d)", src, tn->where,
                 flow_option_name(tn->fd->option), tmpl, tn->fd->line);
    else if (strncmp(c->source, "template", 8) == 0)
        snprintf(dst, len, "%s %s (line %d)", src, tmpl, tn->fd->line);
    else
        snprintf(dst, len, "%s; %s %s (line %d)", src, tn->where, tmpl, tn->fd->line);
}

static void print_controls(struct trace_printer *p, const struct erp_trace *t)
{
    size_t wn = 4, wv = 2;
    char form[256];
    for (size_t i = 0; i < t->n_controls; i++) {
        size_t a = strlen(t->controls[i].name ? t->controls[i].name : "");
        size_t b = strlen(t->controls[i].value ? t->controls[i].value : "") + 2;
        wn = a > wn ? a : wn;
        wv = b > wv ? b : wv;
    }
    wn = wn > TRACE_NAME_COL ? TRACE_NAME_COL : wn;
    wv = wv > TRACE_VALUE_COL ? TRACE_VALUE_COL : wv;
    if (!t->form) /* a <send> step's fields: composed, no page fetched */
        fprintf(p->out, "    fields    %zu sent as the step's <send> writes them (no page):\n",
                t->n_controls);
    else if (t->n_controls == 0) {
        fprintf(p->out, "    form      %s: nothing filled\n", esc(form, sizeof(form), t->form));
        return;
    } else
        fprintf(p->out, "    form      %s, %zu control%s submitted:\n",
                esc(form, sizeof(form), t->form), t->n_controls, t->n_controls == 1 ? "" : "s");
    for (size_t i = 0; i < t->n_controls; i++) {
        const struct erp_trace_control *c = &t->controls[i];
        char name[128], value[TRACE_VALUE_MAX + 8], quoted[TRACE_VALUE_MAX + 16], src[700];
        esc(name, sizeof(name), c->name);
        text_escape_into(value, sizeof(value), c->value ? c->value : "", 0);
        snprintf(quoted, sizeof(quoted), "\"%s\"", value);
        control_source(p, c, src, sizeof(src));
        fprintf(p->out, "      %-*s = %-*s  <- %s\n", (int)wn, name, (int)wv, quoted, src);
    }
}

/* "status 200 + url + pattern + JSON /result/0": the conditions a rule gives (all of them
 * matched). */
static void rule_conditions(const struct flow_rule *r, char *dst, size_t len)
{
    char st[64] = "";
    size_t at;
    if (r->status)
        esc(st, sizeof(st), r->status);
    snprintf(dst, len, "%s%s%s%s%s%s", r->status ? "status " : "", st,
             r->status && (r->url || r->body) ? " + " : "", r->url ? "final URL" : "",
             r->url && r->body ? " + " : "",
             r->body ? (r->raw ? "pattern on the raw page" : "pattern on the page") : "");
    at = strlen(dst);
    for (size_t k = 0; k < r->n_json && at + 1 < len; k++) {
        char ptr[96];
        esc(ptr, sizeof(ptr), r->json[k].pointer);
        int w = snprintf(dst + at, len - at, "%sJSON %s%s", at ? " + " : "", ptr,
                         r->json[k].absent ? " absent"
                         : r->json[k].re   ? " matching"
                                           : " present");
        if (w < 0 || (size_t)w >= len - at)
            break;
        at += (size_t)w;
    }
}

/* Outcomes after which the answer's text helps the author most. */
static bool unclear(const struct erp_trace *t)
{
    static const char *const bad[] = {"failed",         "refused",          "unknown",
                                      "not-sent",       "rejected",         "systemic",
                                      "restart",        "followup-failed",  "session-expired",
                                      "already-exists", "restart-followups"};
    if (t->transport && strncmp(t->transport, "answered", 8) != 0)
        return false; /* nothing (complete) was answered: no page to show */
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (t->outcome && strcmp(t->outcome, bad[i]) == 0)
            return true;
    return false;
}

void trace_print(void *printer, const struct erp_trace *t)
{
    struct trace_printer *p = printer;
    char url[1024], tr[400], text[TRACE_TEXT_MAX], rule[128];
    const char *group = group_of(t->step);
    size_t si0 = 0;
    const bool submit =
        t->form != NULL || ((t->body || t->n_controls) && step_named(p->f, t->step, &si0));
    size_t si = 0;
    const struct flow_step *st = step_named(p->f, t->step, &si);
    const bool commit_step = st && p->f && si == flow_commit_index(p->f);
    const bool not_sent = t->transport && strncmp(t->transport, "not-sent", 8) == 0;

    if (strcmp(p->group, group) != 0) {
        snprintf(p->group, sizeof(p->group), "%s", group);
        group_header(p, group);
    }
    p->n++;
    if (submit)
        p->submits++;
    if (submit && commit_step && !not_sent)
        p->commits++;

    /* the request */
    fprintf(p->out, "[%d] %s %s", p->n, t->method ? t->method : "GET",
            t->url && *t->url ? esc(url, sizeof(url), t->url) : "(no form, so no address)");
    if (strcmp(t->step ? t->step : "", "detail") == 0)
        fprintf(p->out, "   (a candidate's detail page)");
    else if (submit && st && st->repeat_until_lines)
        fprintf(p->out, "   (submission %d)", p->submits);
    if (not_sent)
        fprintf(p->out, "   NOT SENT");
    else if (submit && commit_step)
        fprintf(p->out, "   COMMITTING REQUEST (sent once)");
    fputc('\n', p->out);
    if (submit && (t->form || t->n_controls))
        print_controls(p, t);
    if (t->body) {
        char body[TRACE_BODY_MAX];
        fprintf(p->out, "    body      %s\n", esc(body, sizeof(body), t->body));
    }

    /* the answer */
    esc(tr, sizeof(tr), t->transport);
    if (not_sent)
        fprintf(p->out, "    answer    none: %s\n", tr);
    else if (t->status > 0)
        fprintf(p->out, "    answer    HTTP %ld, %s\n", t->status, tr);
    else
        fprintf(p->out, "    answer    none: %s\n", tr);
    if (t->redirects > 0 || t->first_location) {
        char loc[512];
        fprintf(p->out, "    redirect  %ld followed%s%s\n", t->redirects,
                t->first_location ? ", the first to " : "",
                t->first_location ? esc(loc, sizeof(loc), t->first_location) : "");
    }

    /* what it meant */
    if (t->rule) {
        const struct flow_rule *r = rule_named(p->f, t->rule);
        esc(rule, sizeof(rule), t->rule);
        if (r) {
            char cond[160];
            rule_conditions(r, cond, sizeof(cond));
            fprintf(p->out, "    rule      '%s' (line %d): outcome %s, matched on %s\n", rule,
                    r->line, flow_outcome_name(r->outcome), cond);
        } else {
            fprintf(p->out, "    rule      %s\n", rule);
        }
    } else if (p->f && t->outcome && strcmp(t->outcome, "logged-in") == 0) {
        const struct flow_login *l = &p->f->login;
        char stt[64] = "";
        if (l->success_status)
            esc(stt, sizeof(stt), l->success_status);
        char ptr[96] = "";
        if (l->success_json.pointer)
            esc(ptr, sizeof(ptr), l->success_json.pointer);
        fprintf(p->out, "    success   <success> (login at line %d) matched on %s%s%s%s%s%s%s\n",
                l->line, l->success_status ? "status " : "", stt,
                l->success_status && (l->success || l->success_json.pointer) ? " + " : "",
                l->success ? (l->success_raw ? "pattern on the raw page" : "pattern on the page")
                           : "",
                l->success_json.pointer ? "JSON " : "", ptr,
                l->success_json.pointer && l->success_json.re ? " matching" : "");
    } else if (t->status > 0 && !not_sent && st && t->outcome && strcmp(t->outcome, "next") != 0) {
        fprintf(p->out, "    rule      none matched\n");
    }
    fprintf(p->out, "    result    %s", esc(text, sizeof(text), t->outcome ? t->outcome : "?"));
    if (t->why && *t->why)
        fprintf(p->out, ": %s", esc(text, sizeof(text), t->why));
    fputc('\n', p->out);
    for (size_t i = 0; i < t->n_captured; i++) {
        char n[96], v[TRACE_VALUE_MAX + 8];
        fprintf(p->out, "    captured  %s = \"%s\"\n", esc(n, sizeof(n), t->captured_names[i]),
                esc(v, sizeof(v), t->captured_values[i]));
    }
    if (t->excerpt && *t->excerpt && (p->pages || unclear(t))) {
        char ex[TRACE_EXCERPT_MAX + 8];
        fprintf(p->out, "    page      %s\n", esc_page(ex, sizeof(ex), t->excerpt));
    }
    fflush(p->out);
}

void trace_print_hits(struct trace_printer *p, const struct erp_hits *h)
{
    for (size_t i = 0; h && i < h->n; i++) {
        const struct erp_row *r = &h->rows[i];
        const char *names[] = {"reference", "status", "vendor",  "invoice",
                               "date",      "amount", "currency"};
        const char *vals[] = {r->reference, r->status,      r->vendor,  r->invoice_number,
                              r->date,      r->amount_text, r->currency};
        char doc[128], v[TRACE_VALUE_MAX + 8];
        fprintf(p->out, "    hit       %s",
                esc(doc, sizeof(doc), r->doc ? r->doc : "(no document)"));
        for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
            if (vals[k])
                fprintf(p->out, ", %s %s", names[k], esc(v, sizeof(v), vals[k]));
        if (r->unfinished)
            fprintf(p->out, "  (saved, not finished)");
        fputc('\n', p->out);
    }
}

/* ---- decisions --------------------------------------------------------------------------- */

static int64_t abs64(int64_t v)
{
    return v < 0 ? -v : v;
}

enum trace_hit trace_check_hits(const struct erp_hits *h, const struct invoice *inv, char *why,
                                size_t whylen)
{
    char w[4][128];
    if (why && whylen)
        why[0] = '\0';
    if (!h || h->n == 0) {
        if (why)
            snprintf(why, whylen, "no hit");
        return TRACE_HIT_NO_DOC;
    }
    const struct erp_row *row = &h->rows[0];
    if (h->n > 1) {
        if (why)
            snprintf(why, whylen, "%zu ERP documents carry this key (%s, %s)", h->n,
                     esc(w[0], sizeof(w[0]), row->doc ? row->doc : "?"),
                     esc(w[1], sizeof(w[1]), h->rows[1].doc ? h->rows[1].doc : "?"));
        return TRACE_HIT_CONFLICT;
    }
    if (!row->doc || !*row->doc) {
        if (why)
            snprintf(why, whylen, "a hit without a document number");
        return TRACE_HIT_NO_DOC;
    }
    esc(w[0], sizeof(w[0]), row->doc);
    if (inv && row->vendor && inv->vendor_id && strcmp(row->vendor, inv->vendor_id) != 0) {
        if (why)
            snprintf(why, whylen, "ERP document %s has vendor %s, the invoice %s", w[0],
                     esc(w[1], sizeof(w[1]), row->vendor), esc(w[2], sizeof(w[2]), inv->vendor_id));
        return TRACE_HIT_CONFLICT;
    }
    if (inv && row->currency && strcmp(row->currency, inv->currency) != 0) {
        if (why)
            snprintf(why, whylen, "ERP document %s is in %s, the invoice in %s", w[0],
                     esc(w[1], sizeof(w[1]), row->currency),
                     esc(w[2], sizeof(w[2]), inv->currency));
        return TRACE_HIT_CONFLICT;
    }
    if (inv && row->amount_text &&
        (!row->has_amount || row->exponent != inv->exponent ||
         abs64(row->amount) != abs64(inv->payable))) {
        char a[64];
        if (why)
            snprintf(why, whylen, "ERP document %s has amount %s, the invoice %s", w[0],
                     esc(w[1], sizeof(w[1]), row->amount_text),
                     money_text(inv->payable, inv->exponent, a, sizeof(a)));
        return TRACE_HIT_CONFLICT;
    }
    if (why)
        snprintf(why, whylen,
                 "ERP document %s matches the invoice (vendor, currency and amount "
                 "where the ERP shows them)",
                 w[0]);
    return TRACE_HIT_SAME;
}

enum trace_next trace_after_lookup(enum erp_answer answer, enum trace_hit hit, bool dry_run)
{
    switch (answer) {
    case ERP_NOT_FOUND:
        return TRACE_NEXT_POST;
    case ERP_FOUND:
    case ERP_FOUND_UNFINISHED:
        switch (hit) {
        case TRACE_HIT_SAME:
            if (answer == ERP_FOUND)
                return TRACE_NEXT_DONE;
            return dry_run ? TRACE_NEXT_SKIP_FOLLOWUPS : TRACE_NEXT_FOLLOWUPS;
        case TRACE_HIT_CONFLICT:
            return TRACE_NEXT_CONFLICT;
        case TRACE_HIT_NO_DOC:
        case TRACE_HIT__COUNT:
            break;
        }
        return TRACE_NEXT_FAILED;
    case ERP_FAILED:
        break;
    }
    return TRACE_NEXT_FAILED;
}

enum trace_end trace_end_of_lookup(enum trace_next next)
{
    switch (next) {
    case TRACE_NEXT_DONE:
    case TRACE_NEXT_SKIP_FOLLOWUPS:
        return TRACE_END_OK;
    case TRACE_NEXT_POST:
    case TRACE_NEXT_FOLLOWUPS:
    case TRACE_NEXT_CONFLICT:
    case TRACE_NEXT_FAILED:
    case TRACE_NEXT__COUNT:
        break;
    }
    return TRACE_END_FAILED; /* a post that should have followed did not: not a success */
}

enum trace_end trace_end_of_post(const struct erp_post_result *r, bool dry_run)
{
    if (!r)
        return TRACE_END_FAILED;
    switch (r->verdict) {
    case DECIDE_CONFIRMED:
        return TRACE_END_OK;
    case DECIDE_REJECTED:
        return TRACE_END_REJECTED;
    case DECIDE_NOT_SENT:
        /* A dry run stops right before the committing request: that is its success. */
        return dry_run && r->released && !r->commit_sent ? TRACE_END_OK : TRACE_END_FAILED;
    case DECIDE_NEXT:
    case DECIDE_RESTART:
    case DECIDE_RESTART_FOLLOWUPS:
    case DECIDE_SYSTEMIC:
    case DECIDE_SAVED:
    case DECIDE_UNKNOWN:
    case DECIDE_ALREADY_EXISTS:
    case DECIDE_FOLLOWUP_FAILED:
    case DECIDE_POST__COUNT:
        break;
    }
    return TRACE_END_FAILED;
}

const char *trace_run_meaning(const struct erp_post_result *r, bool dry_run)
{
    if (!r)
        return "nothing ran";
    switch (r->verdict) {
    case DECIDE_CONFIRMED:
        return "completed: booked and every step done";
    case DECIDE_REJECTED:
        if (r->amount_differs)
            return "business-exception: the ERP computes another amount than the invoice's "
                   "(compare-amount); nothing was booked";
        return r->data_error ? "business-exception: the invoice carries a value this ERP's form "
                               "cannot take; nothing was sent for the step that refused it"
                             : "business-exception: the ERP refused the invoice; no retry";
    case DECIDE_NOT_SENT:
        if (dry_run && r->released && !r->commit_sent)
            return "dry run: stopped before the committing request; nothing was booked";
        return "not sent: provably not processed; apbot run would try again after a backoff";
    case DECIDE_SYSTEMIC:
        return "systemic: the ERP's form or login is not what the flow says; apbot run would "
               "hand the item back and count toward the circuit breaker";
    case DECIDE_SAVED:
        return "saved, but the document could not be recorded: apbot run would reconcile";
    case DECIDE_UNKNOWN:
        return "unknown: maybe booked; apbot run would look the key up after the settle delay, "
               "never post again blind";
    case DECIDE_ALREADY_EXISTS:
        return "already-exists: apbot run would reconcile at once and adopt the document";
    case DECIDE_FOLLOWUP_FAILED:
        return "saved but not finished: apbot run would retry the follow-up steps on the "
               "document, never post again";
    case DECIDE_NEXT:
    case DECIDE_RESTART:
    case DECIDE_RESTART_FOLLOWUPS:
    case DECIDE_POST__COUNT:
        break;
    }
    return "no decision";
}
