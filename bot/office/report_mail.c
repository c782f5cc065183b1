/*
 * report_mail.c - the morning mail: the daily report's status, balance and review queue in a
 * few lines of text, the HTML report attached, sent through the mail server (web/smtp.c) as
 * one MIME message (base/mail.c). What the mail says is a pure function of the report
 * (report_mail_subject, report_mail_text); composing and sending stay thin around it.
 * Finance reads mail before anything else: a report that could not be made is a mail too
 * (report_mail_failure), so a missing mail never means "all is well".
 */
#include "apbot/report.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apbot/buf.h"
#include "apbot/mem.h"
#include "apbot/money.h"
#include "apbot/text.h"
#include "base/mail.h"
#include "base/unittest.h"
#include "web/smtp.h"

#define MAIL_MAX_BYTES (32 * 1024 * 1024) /* the whole message at most */
#define MAIL_TEXT_MAX (64 * 1024)         /* its text part */
#define MAIL_OLDEST 3                     /* items in review named in the text */

static const char *status_word(enum report_status s)
{
    switch (s) {
    case REPORT_CLEAN:
        return "clean";
    case REPORT_DRIFT:
        return "DRIFT";
    case REPORT_UNBALANCED:
        return "DOES NOT BALANCE";
    }
    return "?";
}

/* ---- what the mail says (pure) ---------------------------------------------------------- */

UNITTEST void report_mail_subject(const struct report *r, const char *prefix, char *buf, size_t len)
{
    const struct report_summary *s = report_summary(r);
    enum report_status st = report_status(r);
    char drift[48] = "";

    if (st == REPORT_DRIFT)
        snprintf(drift, sizeof(drift), " (%" PRId64 " finding%s)", s->drift,
                 s->drift == 1 ? "" : "s");
    snprintf(buf, len, "%.100s%sapbot report %s%s%.80s%s: %s%s", prefix ? prefix : "",
             prefix ? " " : "", s->date, s->flow_name ? " (" : "", s->flow_name ? s->flow_name : "",
             s->flow_name ? ")" : "", status_word(st), drift);
}

/* A text from the queue or the ERP, one line, control characters escaped, cut. */
static int line_text(struct apbot_buf *out, const char *s, size_t max)
{
    char *e = text_escape(s ? s : "", max, TEXT_KEEP_BACKSLASH);
    int rc = apbot_buf_adds(out, e);
    free(e);
    return rc;
}

static int cmp_oldest(const void *a, const void *b)
{
    const struct report_finding *x = *(const struct report_finding *const *)a;
    const struct report_finding *y = *(const struct report_finding *const *)b;
    if (x->created_at != y->created_at)
        return x->created_at < y->created_at ? -1 : 1;
    return x->item_id < y->item_id ? -1 : x->item_id > y->item_id;
}

/* The items in manual review, oldest first: the first MAIL_OLDEST of them. */
static int oldest_in_review(const struct report *r, struct apbot_buf *out)
{
    size_t n = 0, k = 0;
    const struct report_finding *f = report_findings(r, &n);
    const struct report_finding **rev = apbot_xcalloc(n ? n : 1, sizeof(*rev));
    char money[48], age[32];
    int bad = 0;

    for (size_t i = 0; i < n; i++)
        if (f[i].kind == REPORT_REVIEW_HELD || f[i].kind == REPORT_REVIEW_OPEN)
            rev[k++] = &f[i];
    qsort(rev, k, sizeof(*rev), cmp_oldest);
    if (k)
        bad |= apbot_buf_adds(out, "Oldest in review:\n");
    for (size_t i = 0; i < k && i < MAIL_OLDEST; i++) {
        const struct report_finding *x = rev[i];
        bad |= apbot_buf_addf(out, "  #%" PRId64 " ", x->item_id);
        bad |= line_text(out, x->vendor_name ? x->vendor_name : x->vendor_id, 60);
        bad |= apbot_buf_adds(out, ", ");
        bad |= line_text(out, x->invoice_number, 40);
        if (x->has_amount)
            bad |= apbot_buf_addf(out, ", %s %s", x->currency ? x->currency : "",
                                  money_text(x->amount, x->exponent, money, sizeof(money)));
        bad |=
            apbot_buf_addf(out, ", waiting %s: ", report_format_age(x->age_ms, age, sizeof(age)));
        bad |= line_text(out, x->reason ? x->reason : x->detail, 160);
        bad |= apbot_buf_adds(out, "\n");
    }
    free(rev);
    return bad;
}

UNITTEST int report_mail_text(const struct report *r, const char *review_url,
                              const char *attachment, struct apbot_buf *out)
{
    const struct report_summary *s = report_summary(r);
    const struct report_balance *d = &s->day;
    enum report_status st = report_status(r);
    size_t n_money = 0;
    const struct report_money *m = report_money(r, &n_money);
    char a[48], b[48], c[48];
    int bad = 0;

    bad |= apbot_buf_addf(out, "apbot daily report for %s", s->date);
    if (s->flow_name) {
        bad |= apbot_buf_adds(out, " (");
        bad |= line_text(out, s->flow_name, 80);
        bad |= apbot_buf_adds(out, ")");
    }
    bad |= apbot_buf_addf(out, "\n\nStatus: %s", status_word(st));
    if (st == REPORT_DRIFT)
        bad |= apbot_buf_addf(out,
                              " - %" PRId64 " finding%s where the queue and the ERP disagree: "
                              "see the attached report before the day is closed.",
                              s->drift, s->drift == 1 ? "" : "s");
    else if (st == REPORT_UNBALANCED)
        bad |= apbot_buf_adds(out, " - items or money are unaccounted for: see the attached "
                                   "report before the day is closed.");
    else
        bad |= apbot_buf_adds(out, " - the queue and the ERP agree.");
    bad |= apbot_buf_addf(
        out,
        "\n\nBalance of the day: %" PRId64 " received = %" PRId64 " completed + %" PRId64
        " business exceptions + %" PRId64 " in manual review + %" PRId64 " pending%s (%s).\n",
        d->received, d->completed, d->exceptions, d->review, d->pending,
        d->unaccounted ? " + unaccounted" : "", s->balanced ? "balanced" : "DOES NOT BALANCE");
    for (size_t i = 0; i < n_money; i++) {
        const struct report_money *x = &m[i];
        bad |= apbot_buf_addf(out, "  %s completed %s", x->currency,
                              money_text(x->expected, x->exponent, a, sizeof(a)));
        if (s->erp_read)
            bad |= apbot_buf_addf(out, ", in the ERP's listing %s, difference %s",
                                  money_text(x->erp_total, x->exponent, b, sizeof(b)),
                                  money_text(x->difference, x->exponent, c, sizeof(c)));
        bad |= apbot_buf_adds(out, "\n");
    }
    bad |= apbot_buf_addf(
        out, "\nReview depth: %" PRId64 " in manual review, %" PRId64 " business exceptions.\n",
        s->total.review, s->total.exceptions);
    bad |= oldest_in_review(r, out);
    if (review_url) {
        bad |= apbot_buf_adds(out, "\nReview page: ");
        bad |= line_text(out, review_url, 300);
        bad |= apbot_buf_adds(out, "\n");
    }
    if (s->audit_head_id > 0)
        bad |= apbot_buf_addf(out, "\nAudit chain head at the end of the day: %" PRId64 ":%s\n",
                              s->audit_head_id, s->audit_head_hash);
    if (attachment)
        bad |= apbot_buf_addf(out, "\nThe full report is attached: %s\n", attachment);
    return bad ? APBOT_E_LIMIT : APBOT_OK;
}

/* ---- composing and sending -------------------------------------------------------------- */

/* Composes text (and the attachment, when data is non-NULL) and sends it. */
static int mail_send(const struct report_mail *m, const char *subject, const char *text,
                     const char *filename, const char *data, size_t len, char *err, size_t errlen)
{
    char id[MAIL_TOKEN_LEN], boundary[MAIL_TOKEN_LEN + 8];
    struct mail_part part = {
        .type = "text/html; charset=utf-8", .filename = filename, .data = data, .len = len};
    time_t now = time(NULL);
    struct tm tm;
    struct apbot_buf msg;
    int rc;

    if (mail_token(id) != APBOT_OK || mail_token(boundary + 8) != APBOT_OK)
        return apbot_fail(err, errlen, APBOT_E_IO, "mail: no randomness for the Message-ID");
    memcpy(boundary, "=_apbot_", 8);
    struct mail_msg msgdef = {
        .from = m->from,
        .to = m->to,
        .n_to = m->n_to,
        .subject = subject,
        .text = text,
        .att = data ? &part : NULL,
        .n_att = data ? 1 : 0,
        .date = (int64_t)now,
        .utc_offset_min = localtime_r(&now, &tm) ? (int)(tm.tm_gmtoff / 60) : 0,
        .id = id,
        .boundary = boundary,
    };
    apbot_buf_init(&msg, MAIL_MAX_BYTES);
    rc = mail_compose(&msgdef, &msg, err, errlen);
    if (rc == APBOT_OK) {
        struct smtp_options so = {
            .url = m->smtp_url,
            .ca_file = m->ca_file,
            .user = m->user,
            .password = m->password,
            .from = m->from,
            .to = m->to,
            .n_to = m->n_to,
        };
        rc = smtp_send(&so, apbot_buf_str(&msg), msg.len, err, errlen);
    }
    apbot_buf_done(&msg);
    return rc;
}

int report_mail_send(const struct report *r, const struct report_mail *m, char *err, size_t errlen)
{
    const struct report_summary *s = report_summary(r);
    char subject[256], filename[64];
    struct apbot_buf text;
    char *html = NULL;
    size_t html_len = 0;
    FILE *f;
    int rc;

    snprintf(filename, sizeof(filename), "apbot-report-%s.html", s->date);
    /* the attachment is what `apbot report --format html` writes */
    f = open_memstream(&html, &html_len);
    if (!f)
        return apbot_fail(err, errlen, APBOT_E_IO, "mail: cannot render the report");
    rc = report_write(r, REPORT_FMT_HTML, f, err, errlen);
    if (fclose(f) != 0 && rc == APBOT_OK)
        rc = apbot_fail(err, errlen, APBOT_E_IO, "mail: cannot render the report");
    apbot_buf_init(&text, MAIL_TEXT_MAX);
    if (rc == APBOT_OK) {
        report_mail_subject(r, m->subject_prefix, subject, sizeof(subject));
        rc = report_mail_text(r, m->review_url, filename, &text);
        if (rc != APBOT_OK)
            apbot_fail(err, errlen, rc, "mail: the text is longer than %d bytes", MAIL_TEXT_MAX);
    }
    if (rc == APBOT_OK)
        rc = mail_send(m, subject, apbot_buf_str(&text), filename, html, html_len, err, errlen);
    apbot_buf_done(&text);
    free(html);
    return rc;
}

int report_mail_failure(const char *date, const char *flow_name, const char *why,
                        const struct report_mail *m, char *err, size_t errlen)
{
    char subject[256];
    struct apbot_buf text;
    int rc, bad = 0;

    snprintf(subject, sizeof(subject), "%.100s%sapbot report %s%s%.80s%s: NO REPORT",
             m->subject_prefix ? m->subject_prefix : "", m->subject_prefix ? " " : "", date,
             flow_name ? " (" : "", flow_name ? flow_name : "", flow_name ? ")" : "");
    apbot_buf_init(&text, MAIL_TEXT_MAX);
    bad |= apbot_buf_addf(&text, "apbot could not make the daily report for %s.\n\nWhy: ", date);
    bad |= line_text(&text, why, 2000);
    bad |= apbot_buf_adds(&text, "\n\nNothing was reconciled: run apbot report again once the "
                                 "cause is fixed.\n");
    if (m->review_url) {
        bad |= apbot_buf_adds(&text, "Review page: ");
        bad |= line_text(&text, m->review_url, 300);
        bad |= apbot_buf_adds(&text, "\n");
    }
    /* a cut text still says there is no report */
    (void)bad;
    rc = mail_send(m, subject, apbot_buf_str(&text), NULL, NULL, 0, err, errlen);
    apbot_buf_done(&text);
    return rc;
}

int report_mail_addresses(const char *list, char *store, size_t store_len, const char **ret,
                          size_t max, size_t *ret_n, char *err, size_t errlen)
{
    return mail_split_list(list, store, store_len, ret, max, ret_n, err, errlen);
}

int report_mail_url_ok(const char *url, char *err, size_t errlen)
{
    return smtp_url_ok(url, err, errlen);
}
