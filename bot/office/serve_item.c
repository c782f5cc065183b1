/*
 * serve_item.c - one item (GET /item/ID): the invoice, the decision forms, its timeline and
 * every ERP exchange as text; and deciding (POST /item/ID/decide), through the review module
 * exactly as `apbot resolve` does, the outcome shown above the item.
 */
#include "office/serve-int.h"

#include <openssl/crypto.h>
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

#define SERVE_FIELDS_MAX 32 /* fields of one form */

static void dl_row(xmlNodePtr dl, const char *term, const char *value)
{
    html_el_clean(dl, "dt", NULL, term);
    html_el_clean(dl, "dd", NULL, value && *value ? value : "-");
}

/* ---- one item --------------------------------------------------------------------------- */

/* The outcome of a decision, shown above the item. */
struct verdict_view {
    bool present;
    int64_t id; /* the item decided on */
    const struct review_result *res;
    /* what the reviewer typed, shown again when the decision is refused */
    const char *action, *doc, *reason, *reviewer, *note;
};

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

static void decision_forms(struct serve_ctx *c, xmlNodePtr parent, const struct review_item *r,
                           const struct verdict_view *v)
{
    static const struct {
        enum review_action action;
        const char *title, *help, *button;
    } forms[] = {
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
    const struct store_item *it = &r->item;
    xmlNodePtr sec, box, form, n;
    char action[64], ver[32], why[256];
    const char *reviewer = v->reviewer && *v->reviewer ? v->reviewer : c->reviewer;

    sec = html_el(parent, "section", "decide no-print");
    html_id(sec, "decide");
    html_el_clean(sec, "h2", NULL, "Decide");
    box = html_el(sec, "div", "decisions");
    snprintf(action, sizeof(action), "/item/%lld/decide", (long long)it->id);
    snprintf(ver, sizeof(ver), "%lld", (long long)r->version);
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        const char *name = review_action_name(forms[i].action);
        bool again = v->present && v->action && strcmp(v->action, name) == 0;
        char id[64];
        if (review_allowed(it->state, forms[i].action, it->erp_doc, why, sizeof(why)) != APBOT_OK)
            continue;
        form = html_el(box, "form", "decision");
        snprintf(id, sizeof(id), "form-%s", name);
        html_id(form, id);
        html_attr(form, "method", "post");
        html_attr(form, "action", action);
        html_el_clean(form, "h3", NULL, forms[i].title);
        html_el_clean(form, "p", "help", forms[i].help);
        n = html_el(form, "input", NULL);
        html_attr(n, "type", "hidden");
        html_attr(n, "name", "csrf");
        html_attr(n, "value", c->csrf);
        n = html_el(form, "input", NULL);
        html_attr(n, "type", "hidden");
        html_attr(n, "name", "version");
        html_attr(n, "value", ver);
        n = html_el(form, "input", NULL);
        html_attr(n, "type", "hidden");
        html_attr(n, "name", "action");
        html_attr(n, "value", name);
        if (forms[i].action == REVIEW_POSTED || forms[i].action == REVIEW_REJECT) {
            const bool posted = forms[i].action == REVIEW_POSTED;
            snprintf(id, sizeof(id), "%s-%s", name, posted ? "doc" : "reason");
            html_attr(html_el_clean(form, "label", NULL, posted ? "Document number" : "Reason"),
                      "for", id);
            n = html_el(form, "input", NULL);
            html_attr(n, "type", "text");
            html_id(n, id);
            html_attr(n, "name", posted ? "doc" : "reason");
            html_attr(n, "required", "required");
            html_attr(n, "autocomplete", "off");
            if (again)
                html_attr_clean(n, "value", posted ? v->doc : v->reason);
        }
        snprintf(id, sizeof(id), "%s-reviewer", name);
        html_attr(html_el_clean(form, "label", NULL, "Your name"), "for", id);
        n = html_el(form, "input", NULL);
        html_attr(n, "type", "text");
        html_id(n, id);
        html_attr(n, "name", "reviewer");
        html_attr(n, "required", "required");
        html_attr(n, "pattern", "[A-Za-z0-9._@-]{1,64}");
        html_attr(n, "title", "letters, digits, . _ - @");
        if (reviewer && *reviewer)
            html_attr_clean(n, "value", reviewer);
        snprintf(id, sizeof(id), "%s-note", name);
        html_attr(html_el_clean(form, "label", NULL, "Note (why; goes into the audit trail)"),
                  "for", id);
        n = html_el(form, "textarea", NULL);
        html_id(n, id);
        html_attr(n, "name", "note");
        html_attr(n, "rows", "2");
        html_attr(n, "required", "required");
        if (again && v->note)
            html_text_clean(n, v->note);
        html_el_clean(form, "button", NULL, forms[i].button);
    }
}

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

static enum MHD_Result item_page(struct serve_ctx *c, int64_t id, const struct verdict_view *v,
                                 int status)
{
    struct review_item r;
    struct store *st;
    struct invoice inv;
    struct serve_page p;
    char err[APBOT_ERR_LEN], buf[512], a1[48], when[32], title[64];
    xmlNodePtr sec, dl, table, tr, h;
    bool have_inv;
    int rc;

    st = serve_store_open(c, err, sizeof(err));
    if (!st)
        return serve_store_failed(c, err);
    rc = review_item_load(st, id, &r, err, sizeof(err));
    store_close(st);
    if (rc == APBOT_E_NOTFOUND) {
        snprintf(buf, sizeof(buf), "There is no item #%lld in the queue.", (long long)id);
        return serve_simple_page(c, MHD_HTTP_NOT_FOUND, "No such item", buf);
    }
    if (rc != APBOT_OK)
        return serve_store_failed(c, err);
    have_inv = invoice_from_json(r.item.payload, &inv, err, sizeof(err)) == APBOT_OK;

    snprintf(title, sizeof(title), "Item #%lld", (long long)id);
    serve_page_start(&p, c, title, NULL);
    p.status = status;
    h = html_el(p.main, "h1", NULL);
    html_textf_clean(h, "Item #%lld: ", (long long)id);
    html_id(html_el_clean(h, "span", "state", machine_state_name(r.item.state)), "item-state");
    if (v && v->present)
        verdict_banner(c, p.main, v);

    /* the invoice */
    sec = html_el(p.main, "section", "invoice");
    html_id(sec, "invoice");
    html_el_clean(sec, "h2", NULL, "Invoice");
    dl = html_el(sec, "dl", "fields");
    dl_row(dl, "Vendor", r.item.vendor_id);
    {
        xmlNodePtr dd;
        html_el_clean(dl, "dt", NULL, "Vendor name");
        dd = html_el_clean(dl, "dd", NULL, r.item.vendor_name ? r.item.vendor_name : "-");
        html_id(dd, "vendor-name");
    }
    dl_row(dl, "Invoice number", r.item.invoice_number);
    dl_row(dl, "Type", r.item.doc_type);
    dl_row(dl, "Issued", r.item.issue_date);
    dl_row(dl, "Due", have_inv ? inv.due_date : NULL);
    if (have_inv) {
        snprintf(buf, sizeof(buf), "%s %s", money_text(inv.net_total, inv.exponent, a1, sizeof(a1)),
                 inv.currency);
        dl_row(dl, "Net", buf);
        snprintf(buf, sizeof(buf), "%s %s", money_text(inv.tax_total, inv.exponent, a1, sizeof(a1)),
                 inv.currency);
        dl_row(dl, "Tax", buf);
    }
    snprintf(buf, sizeof(buf), "%s %s", money_text(r.item.total, r.item.exponent, a1, sizeof(a1)),
             r.item.currency);
    {
        xmlNodePtr dd;
        html_el_clean(dl, "dt", NULL, "Payable");
        dd = html_el_clean(dl, "dd", "amount", buf);
        html_id(dd, "payable");
    }
    dl_row(dl, "Key", r.item.key);
    dl_row(dl, "ERP document", r.item.erp_doc);
    {
        xmlNodePtr dd;
        html_el_clean(dl, "dt", NULL, "Reason");
        dd = html_el_clean(dl, "dd", NULL, r.item.reason ? r.item.reason : "-");
        html_id(dd, "reason");
    }
    dl_row(dl, "Source", r.item.source);
    snprintf(buf, sizeof(buf), "%s (waiting %s)",
             report_local_time(r.item.created_at, "-", when, sizeof(when)),
             report_format_age(c->now - r.item.created_at, a1, sizeof(a1)));
    dl_row(dl, "Received", buf);
    dl_row(dl, "Last change", report_local_time(r.item.updated_at, "-", when, sizeof(when)));
    snprintf(buf, sizeof(buf), "posts %d, lookup cycles %d, transient attempts %d",
             r.item.counters.posts, r.item.counters.cycles, r.item.counters.attempts);
    dl_row(dl, "Counters", buf);
    snprintf(buf, sizeof(buf), "%lld", (long long)r.version);
    dl_row(dl, "Version", buf);

    if (have_inv && inv.n_lines > 0) {
        table = html_el(sec, "table", "lines");
        html_id(table, "lines");
        tr = html_el(table, "tr", NULL);
        {
            static const char *const cols[] = {"#",   "Description", "G/L account", "Quantity",
                                               "Net", "Tax",         "Tax category"};
            for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++)
                html_el_clean(tr, "th", NULL, cols[i]);
        }
        for (size_t i = 0; i < inv.n_lines; i++) {
            const struct invoice_line *l = &inv.lines[i];
            tr = html_el(table, "tr", NULL);
            snprintf(buf, sizeof(buf), "%zu", i + 1);
            html_el_clean(tr, "td", NULL, buf);
            html_el_clean(tr, "td", NULL, l->description);
            html_el_clean(tr, "td", NULL, l->gl_account);
            html_el_clean(tr, "td", NULL, l->quantity);
            html_el_clean(tr, "td", "amount", money_text(l->net, inv.exponent, a1, sizeof(a1)));
            html_el_clean(tr, "td", "amount", money_text(l->tax, inv.exponent, a1, sizeof(a1)));
            html_el_clean(tr, "td", NULL, l->tax_category);
        }
    }
    if (have_inv)
        invoice_done(&inv);

    if (r.item.state == MACHINE_MANUAL_REVIEW || r.item.state == MACHINE_BUSINESS_EXCEPTION) {
        struct verdict_view none = {0};
        decision_forms(c, p.main, &r, v ? v : &none);
    }

    /* the timeline */
    sec = html_el(p.main, "section", "timeline");
    html_id(sec, "timeline");
    html_el_clean(sec, "h2", NULL, "Timeline");
    table = html_el(sec, "table", "events");
    tr = html_el(table, "tr", NULL);
    html_el_clean(tr, "th", NULL, "When");
    html_el_clean(tr, "th", NULL, "From");
    html_el_clean(tr, "th", NULL, "To");
    html_el_clean(tr, "th", NULL, "Event");
    html_el_clean(tr, "th", NULL, "By");
    html_el_clean(tr, "th", NULL, "Detail");
    for (size_t i = 0; i < r.n_events; i++) {
        const struct review_event *e = &r.events[i];
        tr = html_el(table, "tr", "event");
        html_el_clean(tr, "td", NULL, report_local_time(e->at, "-", when, sizeof(when)));
        html_el_clean(tr, "td", NULL, e->from ? e->from : "-");
        html_el_clean(tr, "td", NULL, e->to);
        html_el_clean(tr, "td", NULL, e->event);
        html_el_clean(tr, "td", "actor", e->actor);
        html_el_clean(tr, "td", "detail", e->detail);
    }

    /* every ERP exchange */
    sec = html_el(p.main, "section", "evidence");
    html_id(sec, "evidence");
    snprintf(buf, sizeof(buf), "ERP exchanges (%zu)", r.n_evidence);
    html_el_clean(sec, "h2", NULL, buf);
    if (r.n_evidence == 0)
        html_el_clean(sec, "p", NULL, "None recorded.");
    for (size_t i = 0; i < r.n_evidence; i++)
        exchange_view(c, sec, &r.evidence[i]);
    review_item_done(&r);
    return serve_page_send(c, &p);
}

enum MHD_Result serve_item(struct serve_ctx *c, int64_t id)
{
    return item_page(c, id, NULL, MHD_HTTP_OK);
}

/* ---- deciding --------------------------------------------------------------------------- */

struct form {
    char *names[SERVE_FIELDS_MAX], *values[SERVE_FIELDS_MAX];
    size_t n;
};

static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Decodes one x-www-form-urlencoded token. Heap. */
static char *form_decode(const char *s, size_t n)
{
    char *out = apbot_xmalloc(n + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '+') {
            out[o++] = ' ';
        } else if (s[i] == '%' && i + 2 < n && hexval((unsigned char)s[i + 1]) >= 0 &&
                   hexval((unsigned char)s[i + 2]) >= 0) {
            out[o++] =
                (char)(hexval((unsigned char)s[i + 1]) * 16 + hexval((unsigned char)s[i + 2]));
            i += 2;
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = '\0';
    return out;
}

static void form_parse(struct form *f, const char *body)
{
    const char *p = body ? body : "";
    memset(f, 0, sizeof(*f));
    while (*p && f->n < SERVE_FIELDS_MAX) {
        size_t len = strcspn(p, "&");
        const char *eq = memchr(p, '=', len);
        if (eq) {
            f->names[f->n] = form_decode(p, (size_t)(eq - p));
            f->values[f->n] = form_decode(eq + 1, len - (size_t)(eq - p) - 1);
            f->n++;
        }
        p += len + (p[len] == '&');
    }
}

static const char *form_get(const struct form *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->names[i], name) == 0)
            return f->values[i];
    return NULL;
}

static void form_done(struct form *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->names[i]);
        free(f->values[i]);
    }
}

enum MHD_Result serve_decide(struct serve_ctx *c, int64_t id, const char *body)
{
    struct form f;
    struct review_decision d;
    struct review_result res;
    struct verdict_view v;
    struct store *st;
    const char *csrf, *version, *action_s, *note;
    char err[APBOT_ERR_LEN], *endp = NULL;
    long long ver;
    int status;
    enum MHD_Result rc;

    form_parse(&f, body);
    csrf = form_get(&f, "csrf");
    if (!csrf || strlen(csrf) != 64 || CRYPTO_memcmp(csrf, c->csrf, 64) != 0) {
        form_done(&f);
        return serve_simple_page(
            c, MHD_HTTP_FORBIDDEN, "Refused",
            "This form is not from this page's session (its CSRF token is missing "
            "or wrong). Open the item again and decide there.");
    }
    version = form_get(&f, "version");
    action_s = form_get(&f, "action");
    ver = version ? strtoll(version, &endp, 10) : 0;
    if (!version || !endp || *endp || ver <= 0) {
        form_done(&f);
        return serve_simple_page(
            c, MHD_HTTP_BAD_REQUEST, "Refused",
            "The form does not say which version of the item it was made for.");
    }
    note = form_get(&f, "note");
    memset(&d, 0, sizeof(d));
    d.id = id;
    d.action = review_action_from_name(action_s);
    d.doc = form_get(&f, "doc");
    d.reason = form_get(&f, "reason");
    d.operator_name = form_get(&f, "reviewer");
    d.note = note;
    d.require_note = true;
    d.expect_version = ver;
    if (d.action != REVIEW_POSTED)
        d.doc = NULL;
    if (d.action != REVIEW_REJECT)
        d.reason = NULL;

    st = serve_store_open(c, err, sizeof(err));
    if (!st) {
        form_done(&f);
        return serve_store_failed(c, err);
    }
    if (review_decide(st, c->s->opt->flow, c->s->opt->erp_url, &d, &res) != APBOT_OK) {
        store_close(st);
        form_done(&f);
        return serve_simple_page(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "Error", "internal error");
    }
    store_close(st);
    switch (res.verdict) {
    case REVIEW_DONE:
        status = MHD_HTTP_OK;
        snprintf(c->reviewer, sizeof(c->reviewer), "%s", d.operator_name);
        c->set_reviewer = true;
        break;
    case REVIEW_INVALID:
        status = MHD_HTTP_BAD_REQUEST;
        break;
    case REVIEW_REFUSED:
        status = res.not_found ? MHD_HTTP_NOT_FOUND : MHD_HTTP_CONFLICT;
        break;
    case REVIEW_UNVERIFIABLE:
        status = MHD_HTTP_SERVICE_UNAVAILABLE;
        break;
    case REVIEW_FAILED:
    default:
        status = MHD_HTTP_INTERNAL_SERVER_ERROR;
        break;
    }
    if (c->s->opt->log) {
        char *m = text_escape(res.message, 2048, 0);
        char *who = text_escape(d.operator_name, 128, 0);
        static const char *const verdicts[] = {"done", "invalid", "refused", "unverifiable",
                                               "failed"};
        fprintf(c->s->opt->log, "apbot serve: item=%lld decision=%s by=%s verdict=%s: %s\n",
                (long long)id, review_action_name(d.action), who,
                (size_t)res.verdict < sizeof(verdicts) / sizeof(verdicts[0]) ? verdicts[res.verdict]
                                                                             : "?",
                m);
        fflush(c->s->opt->log);
        free(m);
        free(who);
    }
    memset(&v, 0, sizeof(v));
    v.present = true;
    v.id = id;
    v.res = &res;
    v.action = action_s;
    v.doc = d.doc;
    v.reason = d.reason;
    v.reviewer = d.operator_name;
    v.note = note;
    rc = item_page(c, id, &v, status);
    review_result_done(&res);
    form_done(&f);
    return rc;
}
