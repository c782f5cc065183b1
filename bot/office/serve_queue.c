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
#include "apbot/mem.h"
#include "apbot/money.h"
#include "apbot/report.h"
#include "apbot/review.h"
#include "apbot/store.h"

#define SERVE_QUEUE_ROWS 1000 /* items one queue page lists */

struct reason_count {
    char words[256];
    int n;
};

enum MHD_Result serve_queue(struct serve_ctx *c)
{
    const char *tab = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "tab");
    const char *vendor = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "vendor");
    const char *reason = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "reason");
    bool exceptions = tab && strcmp(tab, "exceptions") == 0;
    struct review_filter all = {.manual_review = !exceptions, .exceptions = exceptions};
    struct review_filter flt = all;
    struct review_queue q, qall;
    struct store *st;
    struct store_counts counts;
    struct reason_count *reasons = NULL;
    size_t n_reasons = 0, cap_reasons = 0;
    struct serve_page p;
    char err[APBOT_ERR_LEN], buf[512];
    xmlNodePtr tabs, form, n, table, tr, td, sel;

    if (vendor && strlen(vendor) > 200)
        vendor = NULL;
    if (reason && strlen(reason) > 500)
        reason = NULL;
    flt.vendor = vendor;
    flt.reason = reason;
    st = serve_store_open(c, err, sizeof(err));
    if (!st)
        return serve_store_failed(c, err);
    if (store_counts(st, &counts, err, sizeof(err)) != APBOT_OK ||
        review_queue_load(st, &flt, &q, err, sizeof(err)) != APBOT_OK) {
        store_close(st);
        return serve_store_failed(c, err);
    }
    /* the reasons of the whole tab, for the filter */
    if (review_queue_load(st, &all, &qall, err, sizeof(err)) != APBOT_OK) {
        review_queue_done(&q);
        store_close(st);
        return serve_store_failed(c, err);
    }
    store_close(st);
    for (size_t i = 0; i < qall.n; i++) {
        char words[256];
        size_t k;
        review_reason_words(qall.v[i].item.reason, words, sizeof(words));
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
    review_queue_done(&qall);

    serve_page_start(&p, c, exceptions ? "Business exceptions" : "Review queue",
                     exceptions ? "exceptions" : "queue");
    html_el_clean(p.main, "h1", NULL, exceptions ? "Business exceptions" : "Review queue");
    tabs = html_el(p.main, "p", "tabs no-print");
    snprintf(buf, sizeof(buf), "Manual review (%lld)",
             (long long)counts.by_state[MACHINE_MANUAL_REVIEW]);
    serve_link(tabs, "/queue", exceptions ? NULL : "active", buf);
    html_text_clean(tabs, " | ");
    snprintf(buf, sizeof(buf), "Business exceptions (%lld)",
             (long long)counts.by_state[MACHINE_BUSINESS_EXCEPTION]);
    serve_link(tabs, "/queue?tab=exceptions", exceptions ? "active" : NULL, buf);

    form = html_el(p.main, "form", "filters");
    html_attr(form, "method", "get");
    html_attr(form, "action", "/queue");
    if (exceptions) {
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
    html_attr_clean(n, "value", vendor ? vendor : "");
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
        if (reason && strcmp(reason, reasons[i].words) == 0)
            html_attr(n, "selected", "selected");
    }
    free(reasons);
    html_el_clean(form, "button", NULL, "Filter");
    if ((vendor && *vendor) || (reason && *reason))
        serve_link(form, exceptions ? "/queue?tab=exceptions" : "/queue", NULL, "clear");

    if (q.n == 0) {
        html_el_clean(p.main, "p", "empty",
                      (vendor && *vendor) || (reason && *reason) ? "No item matches the filters."
                                                                 : "Nothing to review.");
    } else {
        snprintf(buf, sizeof(buf), "%zu item(s), oldest first%s", q.n,
                 q.n > SERVE_QUEUE_ROWS ? " (the first 1000 shown: filter for the rest)" : "");
        html_el_clean(p.main, "p", NULL, buf);
        table = html_el(p.main, "table", "queue");
        html_id(table, "queue");
        tr = html_el(table, "tr", NULL);
        {
            static const char *const cols[] = {"Item",  "Vendor", "Invoice", "Date",
                                               "Total", "Reason", "Waiting", "Last ERP exchange"};
            for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++)
                html_el_clean(tr, "th", NULL, cols[i]);
        }
        for (size_t i = 0; i < q.n && i < SERVE_QUEUE_ROWS; i++) {
            const struct review_entry *e = &q.v[i];
            const struct store_item *it = &e->item;
            char href[64], amount[48], words[512], age[32], idtxt[32];
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
            snprintf(buf, sizeof(buf), "%s %s",
                     money_text(it->total, it->exponent, amount, sizeof(amount)), it->currency);
            html_el_clean(tr, "td", "amount", buf);
            html_el_clean(tr, "td", "reason",
                          review_reason_words(it->reason, words, sizeof(words)));
            html_el_clean(tr, "td", "age",
                          report_format_age(c->now - it->updated_at, age, sizeof(age)));
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
    }
    review_queue_done(&q);
    return serve_page_send(c, &p);
}
