/*
 * serve_metrics.c - GET /metrics: the queue's figures for Prometheus, in OpenMetrics 1.0 (or
 * the text format 0.0.4 when the scraper asks for text/plain only): items per state, the oldest
 * pending item's age, the review depth, what the local day settled (items and money per
 * currency reaching completed, business-exception, manual-review), the settle delay in force
 * and the longest late commit seen. It reads the queue alone (three statements, no ERP), so a
 * scrape keeps working while the ERP is down and costs the ERP nothing. The request passed the
 * page's guards (serve.c): the Host on loopback, and HTTP Basic whenever a password is set.
 */
#include "office/serve-int.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "apbot/buf.h"
#include "apbot/flow.h"
#include "apbot/machine.h"
#include "apbot/mem.h"
#include "apbot/runner.h"
#include "apbot/store.h"
#include "base/metrics.h"
#include "base/unittest.h"

#ifndef APBOT_VERSION
#define APBOT_VERSION "0"
#endif

#define SERVE_METRICS_MAX_BYTES (256 * 1024)

/* ---- pure: the format asked for, and the exposition ------------------------------------ */

/* Whether the media type `type` is among the Accept header's (case-insensitive). */
static bool accepts(const char *accept, const char *type)
{
    size_t n = strlen(type);
    for (const char *p = accept; *p; p++)
        if (strncasecmp(p, type, n) == 0)
            return true;
    return false;
}

UNITTEST enum metrics_format serve_metrics_format(const char *accept)
{
    /* Prometheus asks for both, OpenMetrics first; curl and a browser for anything */
    if (!accept || accepts(accept, "application/openmetrics-text"))
        return METRICS_OPENMETRICS;
    if (accepts(accept, "text/plain"))
        return METRICS_PROMETHEUS;
    return METRICS_OPENMETRICS;
}

static const char *const final_names[3] = {"completed", "business-exception", "manual-review"};

UNITTEST int serve_metrics_render(const struct serve_metrics_figs *f, enum metrics_format fmt,
                                  struct apbot_buf *out)
{
    struct metrics_writer w;
    const char *const version[] = {"version", APBOT_VERSION, NULL};
    static const enum machine_state finals[3] = {MACHINE_COMPLETED, MACHINE_BUSINESS_EXCEPTION,
                                                 MACHINE_MANUAL_REVIEW};

    metrics_init(&w, out, fmt);
    metrics_family(&w, "apbot_build", METRICS_INFO, NULL, "The apbot that serves these figures.");
    metrics_sample(&w, version, 1, 0);
    metrics_family(&w, "apbot_queue_items", METRICS_GAUGE, NULL, "Items in the queue per state.");
    for (int s = 0; s < MACHINE_STATE__COUNT; s++) {
        const char *const labels[] = {"state", machine_state_name((enum machine_state)s), NULL};
        metrics_sample(&w, labels, f->counts.by_state[s], 0);
    }
    metrics_family(&w, "apbot_queue_oldest_pending_age_seconds", METRICS_GAUGE, "seconds",
                   "How long the oldest pending item has waited since it was queued (0: none).");
    metrics_sample(&w, NULL,
                   f->counts.oldest_pending_at > 0 && f->now_ms > f->counts.oldest_pending_at
                       ? f->now_ms - f->counts.oldest_pending_at
                       : 0,
                   3);
    metrics_family(&w, "apbot_queue_review_depth", METRICS_GAUGE, NULL,
                   "Items waiting in manual review.");
    metrics_sample(&w, NULL, f->counts.by_state[MACHINE_MANUAL_REVIEW], 0);
    metrics_family(&w, "apbot_today_items", METRICS_GAUGE, NULL,
                   "Items whose last change today (local day) put them in this final state.");
    for (size_t i = 0; i < 3; i++) {
        int64_t n = 0;
        for (size_t k = 0; k < f->n_sums; k++)
            if (f->sums[k].state == finals[i])
                n += f->sums[k].items;
        const char *const labels[] = {"state", final_names[i], NULL};
        metrics_sample(&w, labels, n, 0);
    }
    metrics_family(&w, "apbot_today_amount", METRICS_GAUGE, NULL,
                   "The payable totals of today's items per final state and currency, in the "
                   "currency's major unit.");
    for (size_t k = 0; k < f->n_sums; k++) {
        const struct store_final_sum *s = &f->sums[k];
        const char *const labels[] = {"state", machine_state_name(s->state), "currency",
                                      s->currency, NULL};
        metrics_sample(&w, labels, s->amount,
                       s->exponent >= 0 && s->exponent <= 18 ? s->exponent : 0);
    }
    if (f->settle_known) {
        metrics_family(&w, "apbot_settle_delay_seconds", METRICS_GAUGE, "seconds",
                       "The settle delay in force before an ambiguous outcome is reconciled.");
        metrics_sample(&w, NULL, f->settle_ms, 3);
        metrics_family(&w, "apbot_late_commit_max_seconds", METRICS_GAUGE, "seconds",
                       "The longest the ERP was seen to commit after apbot gave up on a post.");
        metrics_sample(&w, NULL, f->max_late_ms, 3);
    }
    return metrics_end(&w);
}

/* ---- the figures from the queue --------------------------------------------------------- */

/* The local day around now: [midnight, next midnight) in wall ms. */
static void today_bounds(int64_t now_ms, int64_t *ret_start, int64_t *ret_end)
{
    time_t t = (time_t)(now_ms / 1000);
    struct tm tm;
    if (!localtime_r(&t, &tm)) {
        *ret_start = now_ms - now_ms % 86400000;
        *ret_end = *ret_start + 86400000;
        return;
    }
    tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
    tm.tm_isdst = -1;
    *ret_start = (int64_t)mktime(&tm) * 1000;
    tm.tm_mday += 1;
    tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
    tm.tm_isdst = -1;
    *ret_end = (int64_t)mktime(&tm) * 1000;
}

static int metrics_load(struct serve_ctx *c, struct store *st, struct serve_metrics_figs *f,
                        char *err, size_t errlen)
{
    const struct flow *flow = c->s->opt->flow;
    int64_t from, to;
    int rc;

    memset(f, 0, sizeof(*f));
    f->now_ms = c->now;
    rc = store_counts(st, &f->counts, err, errlen);
    if (rc != APBOT_OK)
        return rc;
    today_bounds(c->now, &from, &to);
    rc = store_final_sums(st, from, to, f->sums, SERVE_METRICS_SUMS, &f->n_sums, err, errlen);
    if (rc != APBOT_OK)
        return rc;
    if (flow) {
        struct store_late_commit late = {0};
        int64_t policy =
            flow->policy.settle_ms > 0 ? flow->policy.settle_ms : flow_policy_default().settle_ms;
        rc = store_late_commit(st, flow->name ? flow->name : "", &late, err, errlen);
        if (rc != APBOT_OK)
            return rc;
        f->settle_known = true;
        f->max_late_ms = late.max_ms;
        f->settle_ms = runner_settle_in_force(policy, late.max_ms);
    }
    return APBOT_OK;
}

enum MHD_Result serve_metrics(struct serve_ctx *c)
{
    const char *accept = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Accept");
    enum metrics_format fmt = serve_metrics_format(accept);
    struct serve_metrics_figs *f = apbot_xcalloc(1, sizeof(*f));
    char err[APBOT_ERR_LEN];
    struct apbot_buf b;
    enum MHD_Result ret;
    struct store *st;
    int rc = APBOT_E_DB;

    /* a scraper keeps no cookie: none is set, an ended session's is not cleared */
    c->new_visitor = false;
    c->session_cookie = SERVE_SESSION_COOKIE_KEEP;
    apbot_buf_init(&b, SERVE_METRICS_MAX_BYTES);
    st = serve_store_open(c, err, sizeof(err));
    if (st)
        rc = metrics_load(c, st, f, err, sizeof(err));
    store_close(st);
    if (rc == APBOT_OK && (rc = serve_metrics_render(f, fmt, &b)) != APBOT_OK)
        snprintf(err, sizeof(err), "more than %d bytes of figures", SERVE_METRICS_MAX_BYTES);
    if (rc == APBOT_OK) {
        ret = serve_send(c, MHD_HTTP_OK,
                         fmt == METRICS_OPENMETRICS ? METRICS_OPENMETRICS_TYPE
                                                    : METRICS_PROMETHEUS_TYPE,
                         apbot_buf_str(&b), b.len, false);
    } else {
        /* a failed scrape is one Prometheus sees (up 0), with why for whoever looks */
        char text[APBOT_ERR_LEN + 64];
        int n = snprintf(text, sizeof(text), "the queue could not be read: %s\n", err);
        ret = serve_send(c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain; charset=utf-8", text,
                         n > 0 && (size_t)n < sizeof(text) ? (size_t)n : strlen(text), false);
    }
    apbot_buf_done(&b);
    free(f);
    return ret;
}
