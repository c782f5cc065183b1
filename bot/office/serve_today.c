/*
 * serve_today.c - Today (GET /): the queue now, the day's balance in items and money, the
 * day's chart and the last run. The ERP is read for the day's listing when it answers; without
 * it the page shows the queue's half of the report and says why.
 */
#include "office/serve-int.h"

#include <stdio.h>
#include <string.h>

#include "apbot/erp.h"
#include "apbot/flow.h"
#include "apbot/machine.h"
#include "apbot/report.h"
#include "apbot/store.h"
#include "office/report_html.h"

/* ---- what Today shows, from the queue and the ERP --------------------------------------- */

struct today {
    char date[11];               /* today, local */
    struct store_counts counts;  /* the queue now */
    struct report *r;            /* the day's figures; NULL when they could not be made */
    char erp_err[APBOT_ERR_LEN]; /* why the ERP was not read, or the figures not made */
};

/* Builds today's report: with the ERP when it answers, else the queue's half alone (why in
 * erp_err). */
static struct report *today_report(struct serve_ctx *c, struct store *st, const char *date,
                                   char *erp_err, size_t errlen)
{
    struct report_options opt;
    struct report *r = NULL;
    struct erp_session *erp = NULL;
    char err[APBOT_ERR_LEN];
    const struct flow *f = c->s->opt->flow;
    int rc;

    memset(&opt, 0, sizeof(opt));
    opt.date = date;
    opt.now = c->now;
    opt.max_lookups = -1; /* the hints are on the report page, not here */
    erp_err[0] = '\0';
    if (flow_has_list(f)) {
        rc = erp_open(f, c->s->opt->erp_url, NULL, &erp, err, sizeof(err));
        if (rc == APBOT_OK)
            rc = report_build(st, erp, f, &opt, &r, err, sizeof(err));
        erp_close(erp);
        if (rc == APBOT_OK)
            return r;
        snprintf(erp_err, errlen, "%s", err);
    } else {
        snprintf(erp_err, errlen, "the flow has no list operation");
    }
    if (report_build_queue(st, f, &opt, &r, err, sizeof(err)) != APBOT_OK) {
        snprintf(erp_err, errlen, "%s", err);
        return NULL;
    }
    return r;
}

/* Loads what Today shows from the open queue (and the ERP). A failing ERP is no failure (see
 * t->erp_err); a failing queue is, with why in err. */
static int today_load(struct serve_ctx *c, struct store *st, struct today *t, char *err,
                      size_t errlen)
{
    int rc;

    memset(t, 0, sizeof(*t));
    rc = store_counts(st, &t->counts, err, errlen);
    if (rc != APBOT_OK)
        return rc;
    report_local_date(c->now, t->date);
    t->r = today_report(c, st, t->date, t->erp_err, sizeof(t->erp_err));
    return APBOT_OK;
}

/* ---- the page --------------------------------------------------------------------------- */

/* The queue now: the count in each state, the oldest pending item, the review depth. */
static void today_queue(struct serve_ctx *c, xmlNodePtr cards, const struct store_counts *counts)
{
    xmlNodePtr sec, table, tr, para;
    char buf[64], age[32];

    sec = html_el(cards, "section", "card states");
    html_el_clean(sec, "h2", NULL, "The queue now");
    table = html_el(sec, "table", "states");
    html_id(table, "states");
    for (int s = 0; s < MACHINE_STATE__COUNT; s++) {
        char id[64], n[32];
        tr = html_el(table, "tr", NULL);
        html_el_clean(tr, "th", NULL, machine_state_name((enum machine_state)s));
        snprintf(id, sizeof(id), "state-%s", machine_state_name((enum machine_state)s));
        snprintf(n, sizeof(n), "%lld", (long long)counts->by_state[s]);
        html_id(html_el_clean(tr, "td", "count", n), id);
    }
    tr = html_el(table, "tr", "total");
    html_el_clean(tr, "th", NULL, "total");
    snprintf(buf, sizeof(buf), "%lld", (long long)counts->total);
    html_id(html_el_clean(tr, "td", "count", buf), "state-total");

    para = html_el(sec, "p", NULL);
    html_id(para, "oldest-pending");
    if (counts->oldest_pending_at > 0)
        html_textf_clean(para, "Oldest pending item: waiting %s. ",
                         report_format_age(c->now - counts->oldest_pending_at, age, sizeof(age)));
    else
        html_text_clean(para, "Nothing pending. ");
    para = html_el(sec, "p", NULL);
    html_id(para, "review-depth");
    html_textf_clean(para, "Review depth: %lld manual-review item(s), %lld business exception(s). ",
                     (long long)counts->by_state[MACHINE_MANUAL_REVIEW],
                     (long long)counts->by_state[MACHINE_BUSINESS_EXCEPTION]);
    serve_link(para, "/queue", NULL, "Open the review queue");
}

/* The balance in items, beside the queue. */
static void today_balance(xmlNodePtr cards, const struct report *r)
{
    xmlNodePtr sec = html_el(cards, "section", "card balance");

    html_id(sec, "balance");
    html_el_clean(sec, "h2", NULL,
                  report_summary(r)->balanced ? "Balance: balanced"
                                              : "Balance: DOES NOT BALANCE (see the report)");
    report_html_balance(r, sec, "received today", "whole queue");
}

/* The day's last run, one line. */
static void last_run(xmlNodePtr parent, const struct report *r)
{
    const struct report_activity *a = report_activity(r);
    char t1[32], t2[32];
    xmlNodePtr p = html_el(parent, "p", "last-run");
    html_id(p, "last-run");
    if (!a->last_run[0]) {
        html_text_clean(p, "No run of the bot today.");
        return;
    }
    html_textf_clean(
        p,
        "Last run today: %s, from %s to %s, %lld item(s): completed %lld, business exception "
        "%lld, manual review %lld, outcome unknown %lld.",
        a->last_run, report_local_time(a->last_run_first, "?", t1, sizeof(t1)),
        report_local_time(a->last_run_last, "?", t2, sizeof(t2)), (long long)a->last_run_items,
        (long long)a->last_run_outcomes[REPORT_OUT_COMPLETED],
        (long long)a->last_run_outcomes[REPORT_OUT_EXCEPTION],
        (long long)a->last_run_outcomes[REPORT_OUT_REVIEW],
        (long long)a->last_run_outcomes[REPORT_OUT_UNKNOWN]);
}

static enum MHD_Result today_page(struct serve_ctx *c, const struct today *t)
{
    struct serve_page p;
    xmlNodePtr cards, para;
    char buf[64];

    serve_page_start(&p, c, "Today", "today");
    snprintf(buf, sizeof(buf), "Today, %s", t->date);
    html_el_clean(p.main, "h1", NULL, buf);
    if (t->r && !report_summary(t->r)->erp_read) {
        char msg[APBOT_ERR_LEN + 256];
        snprintf(msg, sizeof(msg),
                 "The ERP could not be read (%s): the queue's figures below are complete; the "
                 "ERP's total and the difference are missing until it answers.",
                 t->erp_err);
        serve_banner(p.main, "warn", "erp-status", msg);
    }
    /* the queue now, and the balance in items, side by side */
    cards = html_el(p.main, "div", "cards");
    today_queue(c, cards, &t->counts);
    if (!t->r) {
        xmlNodePtr b =
            serve_banner(p.main, "refused", "erp-status", "The day's figures could not be made: ");
        html_text_clean(b, t->erp_err);
        return serve_page_send(c, &p);
    }
    today_balance(cards, t->r);
    report_html_money(t->r, p.main);
    report_html_chart(t->r, p.main);
    last_run(p.main, t->r);
    para = html_el(p.main, "p", "no-print");
    serve_link(para, "/report", NULL, "The full reconciliation report for today");
    return serve_page_send(c, &p);
}

enum MHD_Result serve_today(struct serve_ctx *c)
{
    struct today t;
    struct store *st;
    char err[APBOT_ERR_LEN];
    enum MHD_Result res;
    int rc;

    st = serve_store_open(c, err, sizeof(err));
    if (!st)
        return serve_store_failed(c, err);
    rc = today_load(c, st, &t, err, sizeof(err));
    store_close(st);
    if (rc != APBOT_OK)
        return serve_store_failed(c, err);
    res = today_page(c, &t);
    report_free(t.r);
    return res;
}
