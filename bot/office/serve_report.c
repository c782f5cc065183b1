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
#include "apbot/store.h"
#include "office/report_html.h"

/* URL-encodes s into buf (cut at len). */
static const char *url_encode(const char *s, char *buf, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p && o + 4 < len; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '_' || *p == '.' || *p == '~') {
            buf[o++] = (char)*p;
        } else {
            buf[o++] = '%';
            buf[o++] = hex[*p >> 4];
            buf[o++] = hex[*p & 15];
        }
    }
    buf[o] = '\0';
    return buf;
}

enum MHD_Result serve_report(struct serve_ctx *c)
{
    const char *date = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "date");
    const char *format = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "format");
    const struct flow *f = c->s->opt->flow;
    struct report_options opt;
    struct report *r = NULL;
    struct erp_session *erp = NULL;
    struct store *st;
    struct serve_page p;
    char today[11], err[APBOT_ERR_LEN], buf[APBOT_ERR_LEN + 128];
    enum report_format fmt = REPORT_FMT_HTML;
    xmlNodePtr form, n;
    int rc;

    report_local_date(c->now, today);
    if (!date || !*date)
        date = today;
    if (!invoice_date_valid(date)) {
        snprintf(buf, sizeof(buf), "'%.40s' is not a date (YYYY-MM-DD).", date);
        return serve_simple_page(c, MHD_HTTP_BAD_REQUEST, "Report", buf);
    }
    if (format && *format && report_format_from_name(format, &fmt) != APBOT_OK)
        return serve_simple_page(c, MHD_HTTP_BAD_REQUEST, "Report",
                                 "Formats: html, text, csv, json.");
    st = serve_store_open(c, err, sizeof(err));
    if (!st)
        return serve_store_failed(c, err);
    memset(&opt, 0, sizeof(opt));
    opt.date = date;
    opt.now = c->now;
    rc = f && f->list.get ? erp_open(f, c->s->opt->erp_url, NULL, &erp, err, sizeof(err))
                          : apbot_fail(err, sizeof(err), APBOT_E_INVAL,
                                       "the flow has no list operation to read the day's records");
    if (rc == APBOT_OK) {
        erp_set_retries(erp, 1);
        rc = report_build(st, erp, f, &opt, &r, err, sizeof(err));
    }
    erp_close(erp);
    store_close(st);

    if (rc == APBOT_OK && fmt != REPORT_FMT_HTML) {
        char *mem = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&mem, &len);
        enum MHD_Result res;
        static const char *const types[] = {[REPORT_FMT_TEXT] = "text/plain; charset=utf-8",
                                            [REPORT_FMT_CSV] = "text/csv; charset=utf-8",
                                            [REPORT_FMT_JSON] = "application/json",
                                            [REPORT_FMT_HTML] = "text/html; charset=utf-8"};
        if (!out)
            abort(); /* open_memstream fails only on out-of-memory */
        rc = report_write(r, fmt, out, err, sizeof(err));
        fclose(out);
        report_free(r);
        if (rc != APBOT_OK) {
            free(mem);
            return serve_simple_page(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "Report", err);
        }
        res = serve_send(c, MHD_HTTP_OK, types[fmt], mem, len, false);
        free(mem);
        return res;
    }

    serve_page_start(&p, c, "Report", "report");
    form = html_el(p.main, "form", "filters");
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
    if (rc != APBOT_OK) {
        p.status = MHD_HTTP_SERVICE_UNAVAILABLE;
        snprintf(buf, sizeof(buf),
                 "The ERP could not be read completely, so there is no report (a partial "
                 "listing never passes for a reconciliation): %s",
                 err);
        html_el_clean(p.main, "h1", NULL, "Reconciliation report");
        serve_banner(p.main, "refused", "erp-status", buf);
        return serve_page_send(c, &p);
    }
    {
        xmlNodePtr links = html_el(p.main, "p", "no-print");
        char href[64], enc[32];
        html_text_clean(links, "Download: ");
        static const char *const fmts[] = {"text", "csv", "json"};
        for (size_t i = 0; i < 3; i++) {
            snprintf(href, sizeof(href), "/report?date=%s&format=%s",
                     url_encode(date, enc, sizeof(enc)), fmts[i]);
            serve_link(links, href, NULL, fmts[i]);
            html_text_clean(links, " ");
        }
    }
    report_html_body(r, p.main);
    report_free(r);
    return serve_page_send(c, &p);
}
