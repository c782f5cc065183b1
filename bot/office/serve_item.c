/*
 * serve_item.c - one item (GET /item/ID): the invoice, the decision forms, its timeline and
 * every ERP exchange as text; and deciding (POST /item/ID/decide), through the review module
 * exactly as `apbot resolve` does, the outcome shown above the item.
 */
#include "office/serve-int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/invoice.h"
#include "apbot/machine.h"
#include "apbot/mem.h"
#include "apbot/money.h"
#include "apbot/report.h"
#include "apbot/review.h"
#include "apbot/store.h"
#include "apbot/text.h"

/* ---- what the item page shows, from the queue ------------------------------------------- */

struct item_view {
    struct review_item r;
    struct invoice inv; /* the invoice in the item's payload, when have_inv */
    bool have_inv;
};

/* Loads item id from the open queue: APBOT_OK, APBOT_E_NOTFOUND, or the queue's failure (err).
 * A payload that is no invoice is no failure (have_inv false). */
static int item_load(struct store *st, int64_t id, struct item_view *iv, char *err, size_t errlen)
{
    char why[APBOT_ERR_LEN];
    int rc;

    memset(iv, 0, sizeof(*iv));
    rc = review_item_load(st, id, &iv->r, err, errlen);
    if (rc != APBOT_OK)
        return rc;
    iv->have_inv = invoice_from_json(iv->r.item.payload, &iv->inv, why, sizeof(why)) == APBOT_OK;
    return APBOT_OK;
}

static void item_view_done(struct item_view *iv)
{
    if (iv->have_inv)
        invoice_done(&iv->inv);
    review_item_done(&iv->r);
}

/* ---- the page --------------------------------------------------------------------------- */

/* The outcome of a decision, shown above the item. */
struct verdict_view {
    int64_t id; /* the item decided on */
    const struct review_result *res;
    /* what the reviewer typed, shown again when the decision is refused */
    const char *action, *doc, *reason, *note;
};

/* A term and its value ("-" for none). */
static void dl_row(xmlNodePtr dl, const char *term, const char *value)
{
    html_el_clean(dl, "dt", NULL, term);
    html_el_clean(dl, "dd", NULL, value && *value ? value : "-");
}

/* A term and its value as it is, the value's <dd> with class cls and an id for tools. */
static void dl_row_id(xmlNodePtr dl, const char *term, const char *cls, const char *id,
                      const char *value)
{
    html_el_clean(dl, "dt", NULL, term);
    html_id(html_el_clean(dl, "dd", cls, value), id);
}

/* The invoice's fields and the item's own. */
static void item_fields(struct serve_ctx *c, xmlNodePtr parent, const struct item_view *iv)
{
    const struct store_item *it = &iv->r.item;
    const struct invoice *inv = iv->have_inv ? &iv->inv : NULL;
    xmlNodePtr dl = html_el(parent, "dl", "fields");
    char buf[512], a1[48], when[32];

    dl_row(dl, "Vendor", it->vendor_id);
    dl_row_id(dl, "Vendor name", NULL, "vendor-name", it->vendor_name ? it->vendor_name : "-");
    dl_row(dl, "Invoice number", it->invoice_number);
    dl_row(dl, "Type", it->doc_type);
    dl_row(dl, "Issued", it->issue_date);
    dl_row(dl, "Due", inv ? inv->due_date : NULL);
    if (inv) {
        snprintf(buf, sizeof(buf), "%s %s",
                 money_text(inv->net_total, inv->exponent, a1, sizeof(a1)), inv->currency);
        dl_row(dl, "Net", buf);
        snprintf(buf, sizeof(buf), "%s %s",
                 money_text(inv->tax_total, inv->exponent, a1, sizeof(a1)), inv->currency);
        dl_row(dl, "Tax", buf);
    }
    snprintf(buf, sizeof(buf), "%s %s", money_text(it->total, it->exponent, a1, sizeof(a1)),
             it->currency);
    dl_row_id(dl, "Payable", "amount", "payable", buf);
    dl_row(dl, "Key", it->key);
    dl_row(dl, "ERP document", it->erp_doc);
    dl_row_id(dl, "Reason", NULL, "reason", it->reason ? it->reason : "-");
    dl_row(dl, "Source", it->source);
    snprintf(buf, sizeof(buf), "%s (waiting %s)",
             report_local_time(it->created_at, "-", when, sizeof(when)),
             report_format_age(c->now - it->created_at, a1, sizeof(a1)));
    dl_row(dl, "Received", buf);
    dl_row(dl, "Last change", report_local_time(it->updated_at, "-", when, sizeof(when)));
    snprintf(buf, sizeof(buf), "posts %d, lookup cycles %d, transient attempts %d",
             it->counters.posts, it->counters.cycles, it->counters.attempts);
    dl_row(dl, "Counters", buf);
    snprintf(buf, sizeof(buf), "%lld", (long long)iv->r.version);
    dl_row(dl, "Version", buf);
}

/* The invoice's lines. */
static void item_lines(xmlNodePtr parent, const struct invoice *inv)
{
    static const char *const cols[] = {"#",   "Description", "G/L account", "Quantity",
                                       "Net", "Tax",         "Tax category"};
    xmlNodePtr table, tr;
    char buf[32], a1[48];

    if (inv->n_lines == 0)
        return;
    table = html_el(parent, "table", "lines");
    html_id(table, "lines");
    tr = html_el(table, "tr", NULL);
    for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++)
        html_el_clean(tr, "th", NULL, cols[i]);
    for (size_t i = 0; i < inv->n_lines; i++) {
        const struct invoice_line *l = &inv->lines[i];
        tr = html_el(table, "tr", NULL);
        snprintf(buf, sizeof(buf), "%zu", i + 1);
        html_el_clean(tr, "td", NULL, buf);
        html_el_clean(tr, "td", NULL, l->description);
        html_el_clean(tr, "td", NULL, l->gl_account);
        html_el_clean(tr, "td", NULL, l->quantity);
        html_el_clean(tr, "td", "amount", money_text(l->net, inv->exponent, a1, sizeof(a1)));
        html_el_clean(tr, "td", "amount", money_text(l->tax, inv->exponent, a1, sizeof(a1)));
        html_el_clean(tr, "td", NULL, l->tax_category);
    }
}

/* One exchange with the ERP, secrets masked. */
static void exchange_view(struct serve_ctx *c, xmlNodePtr parent, const struct review_exchange *x)
{
    xmlNodePtr sec = html_el(parent, "section", "exchange"), head, pre;
    char when[32], *m;

    head = html_el(sec, "p", "exchange-head");
    html_textf_clean(head, "%s  %s %s ",
                     x->at ? report_local_time(x->at, "-", when, sizeof(when)) : "-",
                     x->step ? x->step : "?", x->method ? x->method : "");
    m = serve_mask(c->s, x->url ? x->url : "");
    html_el_clean(head, "code", "url", m);
    free(m);
    head = html_el(sec, "p", NULL);
    html_textf_clean(head, "HTTP %d in %lld ms, %s, outcome %s", x->http_status,
                     (long long)x->elapsed_ms, x->transport ? x->transport : "?",
                     x->outcome ? x->outcome : "?");
    if (x->rule) {
        html_text_clean(head, ", rule that matched: ");
        html_el_clean(head, "span", "rule", x->rule);
    } else {
        html_text_clean(head, ", no rule matched");
    }
    if (x->excerpt && *x->excerpt) {
        char *lines;
        m = serve_mask(c->s, x->excerpt);
        lines = html_clean_lines(m);
        pre = html_el(sec, "pre", "excerpt");
        html_text(pre, lines); /* cleaned line by line */
        free(lines);
        free(m);
    }
}

/* The decisions an item in manual review or a business exception offers. */
static const struct decision_spec {
    enum review_action action;
    const char *title, *help, *button;
} decision_specs[] = {
    {REVIEW_POSTED, "Posted in the ERP as document",
     "apbot looks the invoice's key up in the ERP and records it only when the ERP holds it "
     "as this document with the invoice's amount. This needs the ERP.",
     "Check in the ERP and record"},
    {REVIEW_REQUEUE, "Requeue",
     "Back to the bot: it looks the key up in the ERP again before it would post anything.",
     "Requeue"},
    {REVIEW_REJECT, "Reject",
     "A business exception: the invoice will not be booked. Give the reason.", "Reject"},
};

/* One decision's form, posted to /item/ID/decide for the item's version. again: what the
 * reviewer typed into this form before it was refused, or NULL. The decision is signed by the
 * session: the form has no name to type. */
static void decision_form(struct serve_ctx *c, xmlNodePtr box, const struct review_item *r,
                          const struct decision_spec *spec, const struct verdict_view *again)
{
    const char *name = review_action_name(spec->action);
    xmlNodePtr form, n;
    char action[64], ver[32], id[64];

    snprintf(action, sizeof(action), "/item/%lld/decide", (long long)r->item.id);
    snprintf(ver, sizeof(ver), "%lld", (long long)r->version);
    form = html_el(box, "form", "decision");
    snprintf(id, sizeof(id), "form-%s", name);
    html_id(form, id);
    html_attr(form, "method", "post");
    html_attr(form, "action", action);
    html_el_clean(form, "h3", NULL, spec->title);
    html_el_clean(form, "p", "help", spec->help);
    serve_hidden(form, "csrf", c->csrf);
    serve_hidden(form, "version", ver);
    serve_hidden(form, "action", name);
    if (spec->action == REVIEW_POSTED || spec->action == REVIEW_REJECT) {
        const bool posted = spec->action == REVIEW_POSTED;
        snprintf(id, sizeof(id), "%s-%s", name, posted ? "doc" : "reason");
        html_attr(html_el_clean(form, "label", NULL, posted ? "Document number" : "Reason"), "for",
                  id);
        n = html_el(form, "input", NULL);
        html_attr(n, "type", "text");
        html_id(n, id);
        html_attr(n, "name", posted ? "doc" : "reason");
        html_attr(n, "required", "required");
        html_attr(n, "autocomplete", "off");
        if (again)
            html_attr_clean(n, "value", posted ? again->doc : again->reason);
    }
    snprintf(id, sizeof(id), "%s-note", name);
    html_attr(html_el_clean(form, "label", NULL, "Note (why; goes into the audit trail)"), "for",
              id);
    n = html_el(form, "textarea", NULL);
    html_id(n, id);
    html_attr(n, "name", "note");
    html_attr(n, "rows", "2");
    html_attr(n, "required", "required");
    if (again && again->note)
        html_text_clean(n, again->note);
    n = html_el(form, "p", "help signer");
    html_textf_clean(n, "Recorded as %s (%s).", c->who.display, c->who.login);
    html_el_clean(form, "button", NULL, spec->button);
}

/* Says why this person sees no decision forms. */
static void no_decisions(struct serve_ctx *c, xmlNodePtr parent)
{
    xmlNodePtr p = html_el(parent, "p", "readonly no-print");
    html_id(p, "readonly");
    if (c->s->mode == SERVE_MODE_OPEN)
        html_text_clean(p, "Read-only: nobody decides on this page, which runs without "
                           "reviewers. Decide with apbot resolve, or start apbot serve with a "
                           "reviewers file.");
    else
        html_textf_clean(p, "You may look, not decide: %s is a viewer.", c->who.login);
}

/* The forms of the decisions the item's state allows, for someone who may decide; v: the
 * decision just taken, if any. */
static void decision_forms(struct serve_ctx *c, xmlNodePtr parent, const struct review_item *r,
                           const struct verdict_view *v)
{
    const struct store_item *it = &r->item;
    xmlNodePtr sec, box;
    char why[256];

    if (!serve_may_decide(c)) {
        no_decisions(c, parent);
        return;
    }
    sec = html_el(parent, "section", "decide no-print");
    html_id(sec, "decide");
    html_el_clean(sec, "h2", NULL, "Decide");
    box = html_el(sec, "div", "decisions");
    for (size_t i = 0; i < sizeof(decision_specs) / sizeof(decision_specs[0]); i++) {
        const struct decision_spec *spec = &decision_specs[i];
        const char *name = review_action_name(spec->action);
        bool again = v && v->action && strcmp(v->action, name) == 0;
        if (review_allowed(it->state, spec->action, it->erp_doc, why, sizeof(why)) != APBOT_OK)
            continue;
        decision_form(c, box, r, spec, again ? v : NULL);
    }
}

/* What became of a decision, and what the ERP answered when it was asked. */
static void verdict_banner(struct serve_ctx *c, xmlNodePtr parent, const struct verdict_view *v)
{
    const struct review_result *res = v->res;
    xmlNodePtr b;

    switch (res->verdict) {
    case REVIEW_DONE:
        serve_banner(parent, "ok", "verdict", res->message);
        break;
    case REVIEW_INVALID:
        b = serve_banner(parent, "refused", "verdict", "Not recorded: ");
        html_text_clean(b, res->message);
        break;
    case REVIEW_REFUSED:
        b = serve_banner(parent, "refused", "verdict", "Refused, nothing was recorded: ");
        html_text_clean(b, res->message);
        if (res->stale)
            html_text_clean(b, ". The page below shows the item as it is now.");
        if (res->verify.verdict == REVIEW_ABSENT)
            html_textf_clean(
                b,
                ". If it is booked in a way the ERP cannot show (on paper, say), record it "
                "from the command line with a reason: apbot resolve %lld --posted DOC --flow "
                "FILE --force REASON",
                (long long)v->id);
        break;
    case REVIEW_UNVERIFIABLE:
        b = serve_banner(parent, "warn", "verdict",
                         "The ERP did not answer, nothing was recorded: ");
        html_text_clean(b, res->message);
        break;
    case REVIEW_FAILED:
        b = serve_banner(parent, "refused", "verdict", "The queue could not record it: ");
        html_text_clean(b, res->message);
        break;
    }
    if (res->verify.n_exchanges > 0) {
        xmlNodePtr sec = html_el(parent, "section", "verification");
        html_id(sec, "verification");
        html_el_clean(sec, "h2", NULL, "What the ERP answered");
        html_el_clean(sec, "p", "what", res->verify.what);
        for (size_t i = 0; i < res->verify.n_exchanges; i++)
            exchange_view(c, sec, &res->verify.exchanges[i]);
    }
}

/* The item's events, oldest first. */
static void item_timeline(xmlNodePtr parent, const struct review_item *r)
{
    static const char *const cols[] = {"When", "From", "To", "Event", "By", "Detail"};
    xmlNodePtr sec, table, tr;
    char when[32];

    sec = html_el(parent, "section", "timeline");
    html_id(sec, "timeline");
    html_el_clean(sec, "h2", NULL, "Timeline");
    table = html_el(sec, "table", "events");
    tr = html_el(table, "tr", NULL);
    for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++)
        html_el_clean(tr, "th", NULL, cols[i]);
    for (size_t i = 0; i < r->n_events; i++) {
        const struct review_event *e = &r->events[i];
        tr = html_el(table, "tr", "event");
        html_el_clean(tr, "td", NULL, report_local_time(e->at, "-", when, sizeof(when)));
        html_el_clean(tr, "td", NULL, e->from ? e->from : "-");
        html_el_clean(tr, "td", NULL, e->to);
        html_el_clean(tr, "td", NULL, e->event);
        html_el_clean(tr, "td", "actor", e->actor);
        html_el_clean(tr, "td", "detail", e->detail);
    }
}

/* Every exchange with the ERP recorded for the item. */
static void item_evidence(struct serve_ctx *c, xmlNodePtr parent, const struct review_item *r)
{
    xmlNodePtr sec = html_el(parent, "section", "evidence");
    char buf[64];

    html_id(sec, "evidence");
    snprintf(buf, sizeof(buf), "ERP exchanges (%zu)", r->n_evidence);
    html_el_clean(sec, "h2", NULL, buf);
    if (r->n_evidence == 0)
        html_el_clean(sec, "p", NULL, "None recorded.");
    for (size_t i = 0; i < r->n_evidence; i++)
        exchange_view(c, sec, &r->evidence[i]);
}

static enum MHD_Result item_render(struct serve_ctx *c, const struct item_view *iv,
                                   const struct verdict_view *v, int status)
{
    const struct review_item *r = &iv->r;
    struct serve_page p;
    xmlNodePtr sec, h;
    char title[64];

    snprintf(title, sizeof(title), "Item #%lld", (long long)r->item.id);
    serve_page_start(&p, c, title, NULL);
    p.status = status;
    h = html_el(p.main, "h1", NULL);
    html_textf_clean(h, "Item #%lld: ", (long long)r->item.id);
    html_id(html_el_clean(h, "span", "state", machine_state_name(r->item.state)), "item-state");
    if (v)
        verdict_banner(c, p.main, v);

    sec = html_el(p.main, "section", "invoice");
    html_id(sec, "invoice");
    html_el_clean(sec, "h2", NULL, "Invoice");
    item_fields(c, sec, iv);
    if (iv->have_inv)
        item_lines(sec, &iv->inv);
    if (r->item.state == MACHINE_MANUAL_REVIEW || r->item.state == MACHINE_BUSINESS_EXCEPTION)
        decision_forms(c, p.main, r, v);
    item_timeline(p.main, r);
    item_evidence(c, p.main, r);
    return serve_page_send(c, &p);
}

/* The item page, after a decision when v is not NULL (sent with status). */
static enum MHD_Result item_page(struct serve_ctx *c, int64_t id, const struct verdict_view *v,
                                 int status)
{
    struct item_view iv;
    struct store *st;
    char err[APBOT_ERR_LEN], buf[96];
    enum MHD_Result res;
    int rc;

    st = serve_store_open(c, err, sizeof(err));
    if (!st)
        return serve_store_failed(c, err);
    rc = item_load(st, id, &iv, err, sizeof(err));
    store_close(st);
    if (rc == APBOT_E_NOTFOUND) {
        snprintf(buf, sizeof(buf), "There is no item #%lld in the queue.", (long long)id);
        return serve_simple_page(c, MHD_HTTP_NOT_FOUND, "No such item", buf);
    }
    if (rc != APBOT_OK)
        return serve_store_failed(c, err);
    res = item_render(c, &iv, v, status);
    item_view_done(&iv);
    return res;
}

enum MHD_Result serve_item(struct serve_ctx *c, int64_t id)
{
    return item_page(c, id, NULL, MHD_HTTP_OK);
}

/* ---- deciding --------------------------------------------------------------------------- */

/* What a posted form asks for: the decision, and what the reviewer typed. */
struct decide_args {
    struct serve_form f; /* owns every string below */
    struct review_decision d;
    const char *action; /* the action as posted */
};

/* Reads a posted decision on item id (a->f is then to be freed with serve_form_done, whatever the
 * return). Returns 0, or the status of a refusal with its text in *why: a CSRF token that is
 * not the session's, a version that is not a positive number. */
static int decide_args(struct serve_ctx *c, int64_t id, const char *body, struct decide_args *a,
                       const char **why)
{
    struct review_decision *d = &a->d;
    const char *csrf, *version;
    char *endp = NULL;
    long long ver;

    serve_form_parse(&a->f, body);
    csrf = serve_form_get(&a->f, "csrf");
    if (!serve_csrf_ok(c, csrf)) {
        *why = "This form is not from this page's session (its CSRF token is missing or wrong). "
               "Open the item again and decide there.";
        return MHD_HTTP_FORBIDDEN;
    }
    version = serve_form_get(&a->f, "version");
    a->action = serve_form_get(&a->f, "action");
    ver = version ? strtoll(version, &endp, 10) : 0;
    if (!version || !endp || *endp || ver <= 0) {
        *why = "The form does not say which version of the item it was made for.";
        return MHD_HTTP_BAD_REQUEST;
    }
    memset(d, 0, sizeof(*d));
    d->id = id;
    d->action = review_action_from_name(a->action);
    d->doc = d->action == REVIEW_POSTED ? serve_form_get(&a->f, "doc") : NULL;
    d->reason = d->action == REVIEW_REJECT ? serve_form_get(&a->f, "reason") : NULL;
    /* signed by the session, never by the form */
    d->operator_name = c->who.login;
    d->display_name = c->who.display;
    d->auth = c->who.how;
    d->note = serve_form_get(&a->f, "note");
    d->require_note = true;
    d->expect_version = ver;
    return 0;
}

/* The answer's status for a decision's verdict. */
static int decide_status(const struct review_result *res)
{
    switch (res->verdict) {
    case REVIEW_DONE:
        return MHD_HTTP_OK;
    case REVIEW_INVALID:
        return MHD_HTTP_BAD_REQUEST;
    case REVIEW_REFUSED:
        return res->not_found ? MHD_HTTP_NOT_FOUND : MHD_HTTP_CONFLICT;
    case REVIEW_UNVERIFIABLE:
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    case REVIEW_FAILED:
        break;
    }
    return MHD_HTTP_INTERNAL_SERVER_ERROR;
}

/* One line per decision in the log (every text escaped). */
static void decide_log(struct serve_ctx *c, const struct review_decision *d,
                       const struct review_result *res)
{
    static const char *const verdicts[] = {"done", "invalid", "refused", "unverifiable", "failed"};

    serve_log(c, "info", "item=%lld decision=%s by=%s auth=%s from=%s verdict=%s: %.700s",
              (long long)d->id, review_action_name(d->action), d->operator_name,
              review_auth_name(d->auth), c->client,
              (size_t)res->verdict < sizeof(verdicts) / sizeof(verdicts[0]) ? verdicts[res->verdict]
                                                                            : "?",
              res->message);
}

enum MHD_Result serve_decide(struct serve_ctx *c, int64_t id, const char *body)
{
    struct decide_args a;
    struct review_result res;
    struct verdict_view v;
    struct store *st;
    const char *why = NULL;
    char err[APBOT_ERR_LEN];
    enum MHD_Result out;
    int status, rc;

    if (!serve_may_decide(c)) /* serve.c refused it already: never signed by nobody */
        return serve_simple_page(c, MHD_HTTP_FORBIDDEN, "Refused", "Only a reviewer decides.");
    status = decide_args(c, id, body, &a, &why);
    if (status != 0) {
        serve_form_done(&a.f);
        return serve_simple_page(c, status, "Refused", why);
    }
    st = serve_store_open(c, err, sizeof(err));
    if (!st) {
        serve_form_done(&a.f);
        return serve_store_failed(c, err);
    }
    rc = review_decide(st, c->s->opt->flow, c->s->opt->erp_url, &a.d, &res);
    store_close(st);
    if (rc != APBOT_OK) {
        serve_form_done(&a.f);
        return serve_simple_page(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "Error", "internal error");
    }
    decide_log(c, &a.d, &res);
    memset(&v, 0, sizeof(v));
    v.id = id;
    v.res = &res;
    v.action = a.action;
    v.doc = a.d.doc;
    v.reason = a.d.reason;
    v.note = a.d.note;
    out = item_page(c, id, &v, decide_status(&res));
    review_result_done(&res);
    serve_form_done(&a.f);
    return out;
}
