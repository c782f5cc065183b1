/*
 * serve_queue.c - the review queue (GET /queue): the items in manual review, or with
 * ?tab=exceptions the business exceptions, oldest first (the order of `apbot review`),
 * filtered by vendor and by reason.
 */
#include "office/serve-int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/buf.h"
#include "apbot/machine.h"
#include "apbot/money.h"
#include "apbot/report.h"
#include "apbot/review.h"
#include "apbot/store.h"

#define SERVE_QUEUE_ROWS 1000 /* items one queue page lists */

/* ---- the request ------------------------------------------------------------------------ */

struct queue_args {
    bool exceptions;    /* the business exceptions' tab, else manual review's */
    const char *vendor; /* the vendor filter (id or name), or NULL */
    const char *reason; /* the reason filter (reason words), or NULL */
};

/* ?tab=exceptions, ?vendor=, ?reason=; a vendor over 200 bytes or a reason over 500 is no
 * filter. */
static void queue_args(struct serve_ctx *c, struct queue_args *a)
{
    const char *tab = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "tab");

    a->exceptions = tab && strcmp(tab, "exceptions") == 0;
    a->vendor = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "vendor");
    a->reason = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "reason");
    if (a->vendor && strlen(a->vendor) > 200)
        a->vendor = NULL;
    if (a->reason && strlen(a->reason) > 500)
        a->reason = NULL;
}

static bool queue_filtered(const struct queue_args *a)
{
    return (a->vendor && *a->vendor) || (a->reason && *a->reason);
}

/* ---- what the page shows, from the queue ------------------------------------------------ */

struct queue_view {
    struct store_counts counts;
    struct review_queue q;   /* the tab's items that pass the filters */
    struct review_queue all; /* the tab's items, for the reasons the filter offers */
};

static int queue_load(struct store *st, const struct queue_args *a, struct queue_view *v, char *err,
                      size_t errlen)
{
    struct review_filter all = {.manual_review = !a->exceptions, .exceptions = a->exceptions};
    struct review_filter flt = all;
    int rc;

    memset(v, 0, sizeof(*v));
    flt.vendor = a->vendor;
    flt.reason = a->reason;
    rc = store_counts(st, &v->counts, err, errlen);
    if (rc == APBOT_OK)
        rc = review_queue_load(st, &flt, &v->q, err, errlen);
    if (rc != APBOT_OK)
        return rc;
    rc = review_queue_load(st, &all, &v->all, err, errlen);
    if (rc != APBOT_OK)
        review_queue_done(&v->q);
    return rc;
}

static void queue_view_done(struct queue_view *v)
{
    review_queue_done(&v->q);
    review_queue_done(&v->all);
}

/* One reason the tab's items give, and how many give it. */
struct reason_count {
    char words[256];
    int n;
};

/* The reasons of q's items (review_reason_words) in the order they first come, at most 500;
 * *ret heap. */
static size_t queue_reasons(const struct review_queue *q, struct reason_count **ret)
{
    struct reason_count *reasons = NULL;
    size_t n_reasons = 0, cap_reasons = 0;

    for (size_t i = 0; i < q->n; i++) {
        char words[256];
        size_t k;
        review_reason_words(q->v[i].item.reason, words, sizeof(words));
        for (k = 0; k < n_reasons; k++)
            if (strcmp(reasons[k].words, words) == 0)
                break;
        if (k == n_reasons) {
            if (apbot_grow((void **)&reasons, &cap_reasons, n_reasons, sizeof(*reasons), 500) !=
                APBOT_OK)
                continue;
            snprintf(reasons[n_reasons].words, sizeof(reasons[n_reasons].words), "%s", words);
            reasons[n_reasons++].n = 0;
        }
        reasons[k].n++;
    }
    *ret = reasons;
    return n_reasons;
}

/* ---- the page --------------------------------------------------------------------------- */

/* The two tabs, with their counts. */
static void queue_tabs(xmlNodePtr parent, const struct queue_args *a,
                       const struct store_counts *counts)
{
    xmlNodePtr tabs = html_el(parent, "p", "tabs no-print");
    char buf[64];

    snprintf(buf, sizeof(buf), "Manual review (%lld)",
             (long long)counts->by_state[MACHINE_MANUAL_REVIEW]);
    serve_link(tabs, "/queue", a->exceptions ? NULL : "active", buf);
    html_text_clean(tabs, " | ");
    snprintf(buf, sizeof(buf), "Business exceptions (%lld)",
             (long long)counts->by_state[MACHINE_BUSINESS_EXCEPTION]);
    serve_link(tabs, "/queue?tab=exceptions", a->exceptions ? "active" : NULL, buf);
}

/* The filter form: the vendor as typed, the reason among those of the tab's items. */
static void queue_filters(xmlNodePtr parent, const struct queue_args *a,
                          const struct review_queue *all)
{
    struct reason_count *reasons;
    size_t n_reasons = queue_reasons(all, &reasons);
    xmlNodePtr form, n, sel;
    char buf[512];

    form = html_el(parent, "form", "filters");
    html_attr(form, "method", "get");
    html_attr(form, "action", "/queue");
    if (a->exceptions) {
        n = html_el(form, "input", NULL);
        html_attr(n, "type", "hidden");
        html_attr(n, "name", "tab");
        html_attr(n, "value", "exceptions");
    }
    n = html_el(form, "div", NULL);
    html_attr(html_el_clean(n, "label", NULL, "Vendor (id or name)"), "for", "f-vendor");
    n = html_el(n, "input", NULL);
    html_attr(n, "type", "text");
    html_id(n, "f-vendor");
    html_attr(n, "name", "vendor");
    html_attr_clean(n, "value", a->vendor ? a->vendor : "");
    n = html_el(form, "div", NULL);
    html_attr(html_el_clean(n, "label", NULL, "Reason"), "for", "f-reason");
    sel = html_el(n, "select", NULL);
    html_id(sel, "f-reason");
    html_attr(sel, "name", "reason");
    n = html_el_clean(sel, "option", NULL, "any reason");
    html_attr(n, "value", "");
    for (size_t i = 0; i < n_reasons; i++) {
        snprintf(buf, sizeof(buf), "%s (%d)", reasons[i].words, reasons[i].n);
        n = html_el_clean(sel, "option", NULL, buf);
        html_attr_clean(n, "value", reasons[i].words);
        if (a->reason && strcmp(a->reason, reasons[i].words) == 0)
            html_attr(n, "selected", "selected");
    }
    free(reasons);
    html_el_clean(form, "button", NULL, "Filter");
    if (queue_filtered(a))
        serve_link(form, a->exceptions ? "/queue?tab=exceptions" : "/queue", NULL, "clear");
}

/* One item's row. */
static void queue_row(struct serve_ctx *c, xmlNodePtr table, const struct review_entry *e)
{
    const struct store_item *it = &e->item;
    xmlNodePtr tr, td;
    char href[64], amount[48], words[512], age[32], idtxt[32], buf[512];

    tr = html_el(table, "tr", "item");
    snprintf(idtxt, sizeof(idtxt), "%lld", (long long)it->id);
    html_attr(tr, "data-id", idtxt);
    td = html_el(tr, "td", "id");
    snprintf(href, sizeof(href), "/item/%lld", (long long)it->id);
    snprintf(idtxt, sizeof(idtxt), "#%lld", (long long)it->id);
    serve_link(td, href, "open", idtxt);
    td = html_el_clean(tr, "td", "vendor", it->vendor_id);
    if (it->vendor_name) {
        html_el(td, "br", NULL);
        html_el_clean(td, "span", "vendor-name", it->vendor_name);
    }
    html_el_clean(tr, "td", "invoice", it->invoice_number);
    html_el_clean(tr, "td", "date", it->issue_date);
    snprintf(buf, sizeof(buf), "%s %s", money_text(it->total, it->exponent, amount, sizeof(amount)),
             it->currency);
    html_el_clean(tr, "td", "amount", buf);
    html_el_clean(tr, "td", "reason", review_reason_words(it->reason, words, sizeof(words)));
    html_el_clean(tr, "td", "age", report_format_age(c->now - it->updated_at, age, sizeof(age)));
    td = html_el(tr, "td", "last");
    if (e->has_last) {
        html_textf_clean(td, "%s, HTTP %d, %s", e->last.step ? e->last.step : "?",
                         e->last.http_status, e->last.outcome ? e->last.outcome : "?");
        if (e->last.rule)
            html_textf_clean(td, ", rule %s", e->last.rule);
    } else {
        html_text_clean(td, "none recorded");
    }
}

/* The items, oldest first, at most SERVE_QUEUE_ROWS of them. */
static void queue_table(struct serve_ctx *c, xmlNodePtr parent, const struct queue_args *a,
                        const struct review_queue *q)
{
    static const char *const cols[] = {"Item",  "Vendor", "Invoice", "Date",
                                       "Total", "Reason", "Waiting", "Last ERP exchange"};
    xmlNodePtr table, tr;
    char buf[128];

    if (q->n == 0) {
        html_el_clean(parent, "p", "empty",
                      queue_filtered(a) ? "No item matches the filters." : "Nothing to review.");
        return;
    }
    snprintf(buf, sizeof(buf), "%zu item(s), oldest first%s", q->n,
             q->n > SERVE_QUEUE_ROWS ? " (the first 1000 shown: filter for the rest)" : "");
    html_el_clean(parent, "p", NULL, buf);
    table = html_el(parent, "table", "queue");
    html_id(table, "queue");
    tr = html_el(table, "tr", NULL);
    for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++)
        html_el_clean(tr, "th", NULL, cols[i]);
    for (size_t i = 0; i < q->n && i < SERVE_QUEUE_ROWS; i++)
        queue_row(c, table, &q->v[i]);
}

static enum MHD_Result queue_page(struct serve_ctx *c, const struct queue_args *a,
                                  const struct queue_view *v)
{
    const char *title = a->exceptions ? "Business exceptions" : "Review queue";
    struct serve_page p;

    serve_page_start(&p, c, title, a->exceptions ? "exceptions" : "queue");
    html_el_clean(p.main, "h1", NULL, title);
    queue_tabs(p.main, a, &v->counts);
    queue_filters(p.main, a, &v->all);
    queue_table(c, p.main, a, &v->q);
    return serve_page_send(c, &p);
}

enum MHD_Result serve_queue(struct serve_ctx *c)
{
    struct queue_args a;
    struct queue_view v;
    struct store *st;
    char err[APBOT_ERR_LEN];
    enum MHD_Result res;
    int rc;

    queue_args(c, &a);
    st = serve_store_open(c, err, sizeof(err));
    if (!st)
        return serve_store_failed(c, err);
    rc = queue_load(st, &a, &v, err, sizeof(err));
    store_close(st);
    if (rc != APBOT_OK)
        return serve_store_failed(c, err);
    res = queue_page(c, &a, &v);
    queue_view_done(&v);
    return res;
}
