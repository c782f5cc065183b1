/*
 * serve_report.c - the daily report (GET /report?date=YYYY-MM-DD): the page report_write
 * writes, inside the review page's frame, or with &format=text|csv|json the report in that
 * format. It needs the ERP: without a complete listing there is no report.
 */
#include "office/serve-int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/erp.h"
#include "apbot/flow.h"
#include "apbot/invoice.h"
#include "apbot/report.h"
#include "apbot/runner.h"
#include "apbot/store.h"
#include "office/report_html.h"

/* ---- the request ------------------------------------------------------------------------ */

struct day_args {
    char date[11];          /* the booking day: ?date=, today without one */
    enum report_format fmt; /* ?format=, html without one */
};

/* Reads ?date and ?format. Returns 0, or the status of a refusal with its text in why. */
static int day_args(struct serve_ctx *c, struct day_args *a, char *why, size_t whylen)
{
    const char *date = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "date");
    const char *format = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "format");

    report_local_date(c->now, a->date);
    a->fmt = REPORT_FMT_HTML;
    if (date && *date) {
        if (!invoice_date_valid(date)) {
            snprintf(why, whylen, "'%.40s' is not a date (YYYY-MM-DD).", date);
            return MHD_HTTP_BAD_REQUEST;
        }
        snprintf(a->date, sizeof(a->date), "%s", date);
    }
    if (format && *format && report_format_from_name(format, &a->fmt) != APBOT_OK) {
        snprintf(why, whylen, "Formats: html, text, csv, json.");
        return MHD_HTTP_BAD_REQUEST;
    }
    return 0;
}

/* ---- the report, from the queue and the ERP --------------------------------------------- */

/* A page waits at most this long for the settle delay (a raised delay may be minutes). */
#define SERVE_REPORT_SETTLE_MAX_MS 15000

/* Builds the report of date from the open queue and the ERP (one attempt per exchange: a page
 * waits for no retries). Without the ERP's complete listing there is no report. Opened while a
 * run books, it waits, as `apbot report` does, until the day's last completion is as old as
 * the settle delay (at most SERVE_REPORT_SETTLE_MAX_MS): read sooner, an ERP whose search
 * index lags shows a document booked a moment ago as missing. */
static int day_load(struct serve_ctx *c, struct store *st, const char *date, struct report **ret,
                    char *err, size_t errlen)
{
    const struct flow *f = c->s->opt->flow;
    struct report_options opt;
    struct erp_session *erp = NULL;
    int rc;

    memset(&opt, 0, sizeof(opt));
    opt.date = date;
    opt.now = c->now;
    opt.settle_ms = runner_settle_of(st, f, NULL, NULL);
    if (opt.settle_ms > SERVE_REPORT_SETTLE_MAX_MS)
        opt.settle_ms = SERVE_REPORT_SETTLE_MAX_MS;
    rc = flow_has_list(f) ? erp_open(f, c->s->opt->erp_url, NULL, &erp, err, errlen)
                          : apbot_fail(err, errlen, APBOT_E_INVAL,
                                       "the flow has no list operation to read the day's records");
    if (rc == APBOT_OK) {
        erp_set_retries(erp, 1);
        rc = report_build(st, erp, f, &opt, ret, err, errlen);
    }
    erp_close(erp);
    return rc;
}

/* ---- the answer ------------------------------------------------------------------------- */

/* The report as text, CSV or JSON. */
static enum MHD_Result day_download(struct serve_ctx *c, const struct report *r,
                                    enum report_format fmt)
{
    static const char *const types[] = {[REPORT_FMT_TEXT] = "text/plain; charset=utf-8",
                                        [REPORT_FMT_CSV] = "text/csv; charset=utf-8",
                                        [REPORT_FMT_JSON] = "application/json",
                                        [REPORT_FMT_HTML] = "text/html; charset=utf-8"};
    char *mem = NULL, err[APBOT_ERR_LEN];
    size_t len = 0;
    FILE *out = open_memstream(&mem, &len);
    enum MHD_Result res;
    int rc;

    if (!out)
        abort(); /* open_memstream fails only on out-of-memory */
    rc = report_write(r, fmt, out, err, sizeof(err));
    fclose(out);
    if (rc != APBOT_OK) {
        free(mem);
        return serve_simple_page(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "Report", err);
    }
    res = serve_send(c, MHD_HTTP_OK, types[fmt], mem, len, false);
    free(mem);
    return res;
}

/* The form that picks the day. */
static void day_form(xmlNodePtr parent, const char *date)
{
    xmlNodePtr form = html_el(parent, "form", "filters"), n;

    html_attr(form, "method", "get");
    html_attr(form, "action", "/report");
    n = html_el(form, "div", NULL);
    html_attr(html_el_clean(n, "label", NULL, "Booking day"), "for", "f-date");
    n = html_el(n, "input", NULL);
    html_attr(n, "type", "date");
    html_id(n, "f-date");
    html_attr(n, "name", "date");
    html_attr_clean(n, "value", date);
    html_el_clean(form, "button", NULL, "Show");
}

/* Links to the day's report in the other formats (a valid date needs no URL encoding). */
static void day_downloads(xmlNodePtr parent, const char *date)
{
    static const char *const fmts[] = {"text", "csv", "json"};
    xmlNodePtr links = html_el(parent, "p", "no-print");
    char href[64];

    html_text_clean(links, "Download: ");
    for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
        snprintf(href, sizeof(href), "/report?date=%s&format=%s", date, fmts[i]);
        serve_link(links, href, NULL, fmts[i]);
        html_text_clean(links, " ");
    }
}

/* The report's page; r NULL: the ERP could not be read (why in erp_err), a 503. */
static enum MHD_Result day_page(struct serve_ctx *c, const char *date, const struct report *r,
                                const char *erp_err)
{
    struct serve_page p;
    char buf[APBOT_ERR_LEN + 128];

    serve_page_start(&p, c, "Report", "report");
    day_form(p.main, date);
    if (!r) {
        p.status = MHD_HTTP_SERVICE_UNAVAILABLE;
        snprintf(buf, sizeof(buf),
                 "The ERP could not be read completely, so there is no report (a partial "
                 "listing never passes for a reconciliation): %s",
                 erp_err);
        html_el_clean(p.main, "h1", NULL, "Reconciliation report");
        serve_banner(p.main, "refused", "erp-status", buf);
        return serve_page_send(c, &p);
    }
    day_downloads(p.main, date);
    report_html_body(r, p.main);
    return serve_page_send(c, &p);
}

enum MHD_Result serve_report(struct serve_ctx *c)
{
    struct day_args a;
    struct report *r = NULL;
    struct store *st;
    char err[APBOT_ERR_LEN], why[128];
    enum MHD_Result res;
    int status, rc;

    status = day_args(c, &a, why, sizeof(why));
    if (status != 0)
        return serve_simple_page(c, status, "Report", why);
    st = serve_store_open(c, err, sizeof(err));
    if (!st)
        return serve_store_failed(c, err);
    rc = day_load(c, st, a.date, &r, err, sizeof(err));
    store_close(st);
    if (rc == APBOT_OK && a.fmt != REPORT_FMT_HTML)
        res = day_download(c, r, a.fmt);
    else
        res = day_page(c, a.date, rc == APBOT_OK ? r : NULL, err);
    report_free(r);
    return res;
}
