/*
 * serve-int.h - the inside of the review page (serve.h), shared by its files:
 *   serve.c         the server: libmicrohttpd, the guards (Host, Basic, method, size, origin,
 *                   session, CSRF), the answer's headers, dispatch;
 *   serve_page.c    the frame every page is built in, banners, short pages, the style sheet;
 *   serve_today.c   Today (GET /);
 *   serve_queue.c   the review queue (GET /queue);
 *   serve_item.c    one item (GET /item/ID) and deciding (POST /item/ID/decide);
 *   serve_report.c  the daily report (GET /report);
 *   serve_metrics.c the queue's figures for Prometheus (GET /metrics).
 * A page reads its request's arguments, loads what it shows from the queue (and the ERP),
 * then builds the HTML; each in functions of their own. Every text on a page goes through
 * html.h's cleaned variants.
 */
#ifndef APBOT_OFFICE_SERVE_INT_H
#define APBOT_OFFICE_SERVE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

#include "apbot/review.h"
#include "apbot/serve.h"
#include "apbot/store.h"
#include "base/metrics.h"
#include "office/html.h"

struct store;

/* The server: made by serve_run, read by every request. */
struct serve_server {
    const struct serve_options *opt;
    struct serve_addr addr;
    unsigned short port;   /* the bound port */
    unsigned char key[32]; /* signs session cookies and CSRF tokens; made at start */
    char *erp_user, *erp_password;
};

/* What a page needs to know of its request. */
struct serve_ctx {
    struct serve_server *s;
    struct MHD_Connection *conn;
    char sid[80];                       /* the session cookie's value */
    bool new_sid;                       /* the answer sets it */
    char csrf[65];                      /* the session's token for forms */
    char reviewer[REVIEW_NAME_MAX + 1]; /* the reviewer cookie, when valid */
    bool set_reviewer;                  /* the answer sets the reviewer cookie */
    int64_t now;
};

/* ---- the answer (serve.c) --------------------------------------------------------------- */

/* Answers with len bytes of data of this Content-Type, under the safe headers (CSP, no
 * framing, no sniffing; no caching unless cacheable) and the cookies the request set. */
enum MHD_Result serve_send(struct serve_ctx *c, int status, const char *type, const void *data,
                           size_t len, bool cacheable);

/* ---- the frame (serve_page.c) ----------------------------------------------------------- */

/* A page being built: its document, <body> and <main>, and the status it is sent with. */
struct serve_page {
    struct html_doc doc;
    xmlNodePtr body, main;
    int status;
};

/* Starts a page: head, header and navigation (active: the id of the tab to mark, or NULL). */
void serve_page_start(struct serve_page *p, struct serve_ctx *c, const char *title,
                      const char *active);
/* Adds the footer, sends the page and frees it. */
enum MHD_Result serve_page_send(struct serve_ctx *c, struct serve_page *p);
/* A banner: cls "ok", "refused" or "warn"; id may be NULL. */
xmlNodePtr serve_banner(xmlNodePtr parent, const char *cls, const char *id, const char *t);
/* A short page that says one thing (errors, refusals). */
enum MHD_Result serve_simple_page(struct serve_ctx *c, int status, const char *title,
                                  const char *what);
/* A link. */
xmlNodePtr serve_link(xmlNodePtr parent, const char *href, const char *cls, const char *t);
/* Every occurrence of the ERP user or password replaced by "***" (heap). */
char *serve_mask(const struct serve_server *s, const char *text);
/* The queue, opened for this request (close with store_close); NULL with why in err. */
struct store *serve_store_open(struct serve_ctx *c, char *err, size_t errlen);
/* The page for a queue that could not be read. */
enum MHD_Result serve_store_failed(struct serve_ctx *c, const char *err);
/* GET /app.css: the report's style sheet and the review page's. */
enum MHD_Result serve_send_css(struct serve_ctx *c);

/* ---- the pages -------------------------------------------------------------------------- */

enum MHD_Result serve_today(struct serve_ctx *c);            /* GET / (serve_today.c) */
enum MHD_Result serve_queue(struct serve_ctx *c);            /* GET /queue (serve_queue.c) */
enum MHD_Result serve_item(struct serve_ctx *c, int64_t id); /* GET /item/ID (serve_item.c) */
/* POST /item/ID/decide with its x-www-form-urlencoded body (serve_item.c) */
enum MHD_Result serve_decide(struct serve_ctx *c, int64_t id, const char *body);
enum MHD_Result serve_report(struct serve_ctx *c);  /* GET /report (serve_report.c) */
enum MHD_Result serve_metrics(struct serve_ctx *c); /* GET /metrics (serve_metrics.c) */

#define SERVE_METRICS_SUMS 192 /* final states x currencies a day may show */

/* What GET /metrics shows, read from the queue. */
struct serve_metrics_figs {
    int64_t now_ms;
    struct store_counts counts;
    struct store_final_sum sums[SERVE_METRICS_SUMS]; /* today's, store_final_sums */
    size_t n_sums;
    bool settle_known; /* with a flow: the two below */
    int64_t settle_ms, max_late_ms;
};

#ifdef APBOT_UNITTEST /* static in the product (base/unittest.h) */
/* Pure: does a request's Host header name the address a listens on (port = the bound port)?
 * Only checked on loopback, where it is what keeps a rebinding DNS name out. */
bool serve_host_ok(const char *host_header, const struct serve_addr *a, unsigned short port);

/* Pure: does an Authorization header carry HTTP Basic with this password (any user name)?
 * Compared in constant time. */
bool serve_basic_ok(const char *authorization, const char *password);

/* Pure: is a POST's Origin (or, without one, its Referer) the page's own origin
 * "http://HOST"? A request without either is accepted (the CSRF token still guards it). */
bool serve_origin_ok(const char *origin, const char *referer, const char *host_header);

/* Pure: the exposition format an Accept header asks for: OpenMetrics unless it names
 * text/plain and not application/openmetrics-text. */
enum metrics_format serve_metrics_format(const char *accept);
/* Pure: the exposition of f in fmt, appended to out; the writer's result. */
int serve_metrics_render(const struct serve_metrics_figs *f, enum metrics_format fmt,
                         struct apbot_buf *out);
#endif

#endif
