/*
 * report_render.c - writes a built reconciliation report as text (terminal), CSV (one row
 * per finding, for a spreadsheet; libcsv quoting, formula-looking text neutralised), JSON
 * (jansson) or one self-contained HTML page built with libxml2's tree API, so every value
 * from an invoice or the ERP is a text node or attribute escaped by the serialiser. It reads
 * the report only through report.h; what the findings mean is decided in report.c. The
 * review page embeds the HTML in pieces (report_html.h).
 */
#include "office/report_html.h"

#include <csv.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/mem.h"
#include "apbot/money.h"
#include "apbot/text.h"
#include "office/html.h"

/* Per kind: section title, HTML id suffix, "one-line" label for the summary table. */
static const struct {
    const char *title;
    const char *id;
    const char *label;
} kind_info[] = {
    [REPORT_DUPLICATE] = {"Duplicates", "duplicates", "duplicates (booked more than once)"},
    [REPORT_MISSING] = {"Missing in the ERP", "missing", "missing in the ERP"},
    [REPORT_ORPHAN] = {"Orphans (unknown apbot keys in the ERP)", "orphans", "orphans"},
    [REPORT_AMOUNT_MISMATCH] = {"Amount mismatches", "amount-mismatches", "amount mismatches"},
    [REPORT_DOC_MISMATCH] = {"Document-number mismatches", "doc-mismatches",
                             "document-number mismatches"},
    [REPORT_BOOKED_EXCEPTION] = {"Booked although rejected here", "booked-exceptions",
                                 "booked although rejected"},
    [REPORT_UNACCOUNTED] = {"Unaccounted items", "unaccounted", "unaccounted items"},
    [REPORT_REVIEW_HELD] = {"Manual review: the ERP holds them", "review-held",
                            "manual review, held by the ERP"},
    [REPORT_REVIEW_OPEN] = {"Manual review: still open", "review-open", "manual review, open"},
    [REPORT_EXCEPTION] = {"Business exceptions by reason", "exceptions", "business exceptions"},
    [REPORT_PENDING] = {"Pending", "pending", "pending"},
    [REPORT_OTHER_DAY] = {"Completed today, booked on another day", "other-day",
                          "booked on another day"},
};
_Static_assert(sizeof(kind_info) / sizeof(kind_info[0]) == REPORT_KIND__COUNT,
               "every report_kind needs a section");

static const char *status_name(enum report_status s)
{
    switch (s) {
    case REPORT_CLEAN:
        return "clean";
    case REPORT_DRIFT:
        return "drift";
    case REPORT_UNBALANCED:
        return "unbalanced";
    }
    return "unbalanced";
}

static const char *status_line(const struct report *r)
{
    switch (report_status(r)) {
    case REPORT_CLEAN:
        return "CLEAN: the queue and the ERP agree";
    case REPORT_DRIFT:
        return "DRIFT: the queue and the ERP disagree - see the findings below";
    case REPORT_UNBALANCED:
        return "DOES NOT BALANCE: items received are not all accounted for";
    }
    return "DOES NOT BALANCE";
}

static const char *nz(const char *s)
{
    return s ? s : "";
}

static void plain_amount(int64_t minor, int exponent, char *buf, size_t len)
{
    if (money_format_plain(minor, exponent, buf, len) != APBOT_OK)
        snprintf(buf, len, "?");
}

/* The balance rows shown by every format. */
static const struct {
    const char *label;
    const char *id;
    size_t offset;
} balance_rows[] = {
    {"received", "received", offsetof(struct report_balance, received)},
    {"completed", "completed", offsetof(struct report_balance, completed)},
    {"business exception", "business-exception", offsetof(struct report_balance, exceptions)},
    {"manual review", "manual-review", offsetof(struct report_balance, review)},
    {"pending", "pending", offsetof(struct report_balance, pending)},
    {"unaccounted", "unaccounted", offsetof(struct report_balance, unaccounted)},
};

static int64_t balance_get(const struct report_balance *b, size_t offset)
{
    return *(const int64_t *)(const void *)((const char *)b + offset);
}

/* ---- text ------------------------------------------------------------------------------ */

/* Text from an invoice or the ERP for a terminal or a mail: escaped (text.h). */
static const char *tx(char *buf, size_t len, const char *s)
{
    return text_escape_into(buf, len, s ? s : "", 0);
}

static void text_finding(FILE *out, const struct report_finding *x)
{
    char amount[48], erp_amount[48], age[32], b1[256], b2[1024];

    amount[0] = erp_amount[0] = '\0';
    if (x->has_amount)
        money_text(x->amount, x->exponent, amount, sizeof(amount));
    if (x->has_erp_amount)
        money_text(x->erp_amount, x->exponent, erp_amount, sizeof(erp_amount));
    if (x->item_id)
        fprintf(out, "  #%lld %s", (long long)x->item_id, tx(b1, sizeof(b1), x->key));
    else
        fprintf(out, "  %s", tx(b1, sizeof(b1), x->key));
    if (x->vendor_id)
        fprintf(out, "  vendor %s", tx(b1, sizeof(b1), x->vendor_id));
    if (x->vendor_name)
        fprintf(out, " (%s)", tx(b1, sizeof(b1), x->vendor_name));
    if (x->invoice_number)
        fprintf(out, "  invoice %s", tx(b1, sizeof(b1), x->invoice_number));
    if (x->has_amount)
        fprintf(out, "  %s %s", amount, tx(b1, sizeof(b1), x->currency));
    if (x->kind == REPORT_PENDING) {
        report_format_age(x->age_ms, age, sizeof(age));
        fprintf(out, "  age %s", age);
    }
    fprintf(out, "\n      %s\n", tx(b2, sizeof(b2), x->detail));
    if (x->command)
        fprintf(out, "      run: %s\n", tx(b2, sizeof(b2), x->command));
}

/* The buckets of report_amounts, in the order every format shows them. */
static const struct {
    const char *label;
    const char *id;
    size_t offset;
} money_rows[] = {
    {"received", "received", offsetof(struct report_amounts, received)},
    {"completed", "completed", offsetof(struct report_amounts, completed)},
    {"business exception", "business-exception", offsetof(struct report_amounts, exceptions)},
    {"manual review", "manual-review", offsetof(struct report_amounts, review)},
    {"pending", "pending", offsetof(struct report_amounts, pending)},
    {"unaccounted", "unaccounted", offsetof(struct report_amounts, unaccounted)},
};

static int64_t amounts_get(const struct report_amounts *a, size_t offset)
{
    return *(const int64_t *)(const void *)((const char *)a + offset);
}

/* "EUR", or "(none)" for the bucket of ERP rows that show no currency. */
static const char *cur_label(const char *c)
{
    return c && *c ? c : "(none)";
}

static bool amounts_zero(const struct report_amounts *a)
{
    return !a->received && !a->completed && !a->exceptions && !a->review && !a->pending &&
           !a->unaccounted;
}

/* True when a money table need not show m's row: the "(none)" bucket (ERP rows without a
 * currency; no item is ever in it) with nothing in that table. erp: the table of the ERP's
 * listing; else the balance of the day (day) or of the whole queue. */
static bool money_row_hidden(const struct report_money *m, bool erp, bool day)
{
    if (m->currency[0])
        return false;
    if (erp)
        return !m->erp_total && !m->erp_docs && !m->erp_unreadable && !m->expected &&
               !m->expected_items && !m->difference;
    return amounts_zero(day ? &m->day : &m->total);
}

/* What the ERP's listing covered, for a caption: "booking day 2026-11-30" or "invoice dates
 * 2026-11-01 to 2026-11-30". */
static const char *listing_label(const struct report_summary *s, char *buf, size_t len)
{
    if (!s->list_by_invoice)
        snprintf(buf, len, "booking day %s", s->date);
    else if (strcmp(s->list_from, s->list_to) == 0)
        snprintf(buf, len, "invoice date %s", s->list_from);
    else
        snprintf(buf, len, "invoice dates %s to %s", s->list_from, s->list_to);
    return buf;
}

/* Which days the report read and why, one paragraph for people: the date is the day the bot
 * worked, which a clerk on an ERP that lists by invoice date would read as an invoice date. */
static const char *days_text(const struct report_summary *s, char *buf, size_t len)
{
    char what[80];
    if (!s->erp_read)
        snprintf(buf, len,
                 "%s is the day the bot worked; the ERP was not read, so only the queue's "
                 "figures for it are here.",
                 s->date);
    else if (!s->list_by_invoice)
        snprintf(buf, len,
                 "%s is the day the bot worked and the booking day read: the ERP's bookings of "
                 "that day against the items the bot completed that day.",
                 s->date);
    else
        snprintf(buf, len,
                 "%s is the day the bot worked, not an invoice date: the items the bot completed "
                 "that day are compared with the ERP's records. This ERP lists by invoice date, "
                 "so the %s were read (the invoice dates of those items and the day itself), and "
                 "the records of items completed on other days left out.",
                 s->date, listing_label(s, what, sizeof(what)));
    return buf;
}

/* The orphans of the report in one currency: how many, their sum and how many could not be
 * read. */
struct orphan_sum {
    char currency[4];
    int exponent;
    int64_t n, unreadable, minor;
    bool overflow; /* the sum passed what apbot counts: shown as unknown */
};

#define ORPHAN_CURRENCIES_MAX 64 /* more are summed under the last one's "..." */
#define ORPHANS_SHOWN 5          /* orphans listed before "and N more" */

/* Sums the orphan findings per currency (in the order first seen); returns how many sums. */
static size_t orphan_sums(const struct report *r, struct orphan_sum *ret, size_t max)
{
    size_t n, k = 0;
    const struct report_finding *f = report_findings(r, &n);
    for (size_t i = 0; i < n; i++) {
        if (f[i].kind != REPORT_ORPHAN)
            continue;
        const char *cur = f[i].currency ? f[i].currency : "";
        size_t j;
        for (j = 0; j < k; j++)
            if (strcmp(ret[j].currency, cur) == 0)
                break;
        if (j == k) {
            if (k == max)
                j = max - 1; /* past the bound: counted with the last */
            else {
                memset(&ret[k], 0, sizeof(ret[k]));
                snprintf(ret[k].currency, sizeof(ret[k].currency), "%s", cur);
                ret[k].exponent = f[i].exponent;
                k++;
            }
        }
        ret[j].n++;
        if (!f[i].has_erp_amount || f[i].exponent != ret[j].exponent)
            ret[j].unreadable++;
        else if (money_add(&ret[j].minor, f[i].erp_amount) != APBOT_OK)
            ret[j].overflow = true;
    }
    return k;
}

/* "EUR 1,234.50 in 70 documents, USD 10.00 in 4 (1 unreadable)" */
static void orphan_sums_text(const struct orphan_sum *o, size_t n, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < len; i++) {
        char a[48];
        int w = snprintf(buf + used, len - used, "%s%s %s in %lld document(s)", i ? ", " : "",
                         cur_label(o[i].currency),
                         o[i].overflow ? "?" : money_text(o[i].minor, o[i].exponent, a, sizeof(a)),
                         (long long)o[i].n);
        if (w < 0)
            break;
        used += (size_t)w;
        if (o[i].unreadable && used < len) {
            w = snprintf(buf + used, len - used, " (%lld whose amount cannot be read)",
                         (long long)o[i].unreadable);
            if (w > 0)
                used += (size_t)w;
        }
    }
}

/* What a difference row means, for people. */
static const char *why_text(enum report_diff_why w)
{
    switch (w) {
    case REPORT_DIFF_AMOUNT:
        return "the ERP shows another amount";
    case REPORT_DIFF_UNREADABLE:
        return "the ERP's amount cannot be read";
    case REPORT_DIFF_DUPLICATE:
        return "booked a second time";
    case REPORT_DIFF_ORPHAN:
        return "an apbot key this queue does not know";
    case REPORT_DIFF_NOT_COMPLETED:
        return "booked, but not completed here";
    case REPORT_DIFF_COMPLETED_OTHER:
        return "booked on the day, completed here on another day";
    case REPORT_DIFF_OTHER_CURRENCY:
        return "booked in another currency";
    case REPORT_DIFF_BOOKED_OTHER_DAY:
        return "completed on the day, booked on another day";
    case REPORT_DIFF_MISSING:
        return "completed on the day, not in the day's listing";
    case REPORT_DIFF__COUNT:
        break;
    }
    return "?";
}

/* A signed amount for people ("-119.00"), "-" when there is none. */
static const char *amount_or_dash(bool has, int64_t minor, int exponent, char *buf, size_t len)
{
    if (!has)
        return "-";
    return money_text(minor, exponent, buf, len);
}

static void text_money(const struct report *r, FILE *out)
{
    const struct report_summary *s = report_summary(r);
    size_t nm, nd;
    const struct report_money *m = report_money(r, &nm);
    const struct report_money_diff *d = report_money_diffs(r, &nd);
    char a1[48], a2[48], a3[48];

    fprintf(out, "Money (exact, per currency)          day                 total\n");
    if (nm == 0)
        fprintf(out, "  (no items)\n");
    for (size_t i = 0; i < nm; i++) {
        if (money_row_hidden(&m[i], false, true) && money_row_hidden(&m[i], false, false))
            continue;
        for (size_t k = 0; k < sizeof(money_rows) / sizeof(money_rows[0]); k++)
            fprintf(out, "  %-4s %-22s %18s  %18s\n", k == 0 ? cur_label(m[i].currency) : "",
                    money_rows[k].label,
                    money_text(amounts_get(&m[i].day, money_rows[k].offset), m[i].exponent, a1,
                               sizeof(a1)),
                    money_text(amounts_get(&m[i].total, money_rows[k].offset), m[i].exponent, a2,
                               sizeof(a2)));
        fprintf(out, "       %-22s %18s  %18s\n", "balanced", m[i].balanced ? "yes" : "NO",
                m[i].balanced ? "yes" : "NO");
    }
    if (!s->erp_read)
        return;
    char label[80];
    fprintf(out, "\nERP listing (%s) against the queue, per currency\n",
            listing_label(s, label, sizeof(label)));
    for (size_t i = 0; i < nm; i++) {
        if (money_row_hidden(&m[i], true, false))
            continue;
        fprintf(out, "  %-4s ERP total of apbot's documents   %18s  (%lld document(s)",
                cur_label(m[i].currency), money_text(m[i].erp_total, m[i].exponent, a1, sizeof(a1)),
                (long long)m[i].erp_docs);
        if (m[i].erp_unreadable)
            fprintf(out, ", %lld unreadable, not added", (long long)m[i].erp_unreadable);
        fprintf(out, ")\n");
        fprintf(out, "       %-32s %18s  (%lld item(s))\n", "completed here on the day",
                money_text(m[i].expected, m[i].exponent, a1, sizeof(a1)),
                (long long)m[i].expected_items);
        fprintf(out, "       %-32s %18s\n", "difference",
                money_text(m[i].difference, m[i].exponent, a1, sizeof(a1)));
        for (size_t j = 0; j < nd; j++) {
            if (strcmp(d[j].currency, m[i].currency) != 0)
                continue;
            char db[128];
            fprintf(out, "         %s", tx(db, sizeof(db), d[j].doc));
            if (d[j].item_id)
                fprintf(out, " #%lld", (long long)d[j].item_id);
            fprintf(
                out, " %s: ERP %s, queue %s, share %s\n", why_text(d[j].why),
                amount_or_dash(d[j].has_erp_amount, d[j].erp_amount, d[j].exponent, a1, sizeof(a1)),
                amount_or_dash(d[j].has_queue_amount, d[j].queue_amount, d[j].exponent, a2,
                               sizeof(a2)),
                money_text(d[j].delta, d[j].exponent, a3, sizeof(a3)));
        }
    }
}

static void text_activity(const struct report *r, FILE *out)
{
    const struct report_summary *s = report_summary(r);
    const struct report_activity *a = report_activity(r);
    char t1[32], t2[32];

    fprintf(out, "\nThe bot's outcomes per hour on %s\n", s->date);
    if (a->max_hour == 0)
        fprintf(out, "  none recorded\n");
    for (int h = 0; h < 24; h++) {
        int64_t sum = 0;
        for (int o = 0; o < REPORT_OUT__COUNT; o++)
            sum += a->per_hour[h][o];
        if (sum == 0)
            continue;
        fprintf(out, "  %02d:00", h);
        for (int o = 0; o < REPORT_OUT__COUNT; o++)
            if (a->per_hour[h][o])
                fprintf(out, "  %s %lld", report_outcome_name((enum report_outcome)o),
                        (long long)a->per_hour[h][o]);
        fprintf(out, "\n");
    }
    if (a->last_run[0]) {
        report_local_time(a->last_run_first, "?", t1, sizeof(t1));
        report_local_time(a->last_run_last, "?", t2, sizeof(t2));
        fprintf(out, "  last run %s: %s .. %s, %lld item(s):", a->last_run, t1, t2,
                (long long)a->last_run_items);
        for (int o = 0; o < REPORT_OUT__COUNT; o++)
            fprintf(out, " %s %lld", report_outcome_name((enum report_outcome)o),
                    (long long)a->last_run_outcomes[o]);
        fprintf(out, "\n");
    }
}

/* The orphans grouped: how many, their money per currency, the first few by document number;
 * the rest are in the CSV, JSON and HTML formats. Another queue's bookings on the same days
 * can be dozens, which one line each would bury. */
static void text_orphans(const struct report *r, FILE *out)
{
    size_t n, shown = 0;
    const struct report_finding *f = report_findings(r, &n);
    struct orphan_sum sums[ORPHAN_CURRENCIES_MAX];
    size_t ns = orphan_sums(r, sums, ORPHAN_CURRENCIES_MAX);
    int64_t total = report_summary(r)->counts[REPORT_ORPHAN];
    char buf[2048];

    orphan_sums_text(sums, ns, buf, sizeof(buf));
    fprintf(out,
            "  %lld ERP document(s) carry an apbot key this queue does not know (booked by "
            "hand, or from another queue): %s\n",
            (long long)total, buf);
    for (size_t i = 0; i < n; i++)
        if (f[i].kind == REPORT_ORPHAN && shown++ < ORPHANS_SHOWN)
            text_finding(out, &f[i]);
    if (shown > ORPHANS_SHOWN)
        fprintf(out, "  ... and %zu more (every one in --format csv, json or html)\n",
                shown - ORPHANS_SHOWN);
}

static int write_text(const struct report *r, FILE *out)
{
    const struct report_summary *s = report_summary(r);
    size_t n;
    const struct report_finding *f = report_findings(r, &n);
    char when[32], days[512], label[80];

    report_local_time(s->generated_at, "?", when, sizeof(when));
    fprintf(out, "apbot reconciliation report for %s (flow %s, generated %s)\n", s->date,
            nz(s->flow_name), when);
    fprintf(out, "%s\n", days_text(s, days, sizeof(days)));
    fprintf(out, "audit chain head at the end of the day: %lld:%s\n\n", (long long)s->audit_head_id,
            s->audit_head_hash);
    if (report_status(r) == REPORT_UNBALANCED)
        fprintf(out,
                "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n"
                "!!! %s\n"
                "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\n",
                status_line(r));
    else
        fprintf(out, "STATUS: %s\n\n", status_line(r));

    fprintf(out, "Balance                         day      total\n");
    for (size_t i = 0; i < sizeof(balance_rows) / sizeof(balance_rows[0]); i++)
        fprintf(out, "  %-24s %9lld  %9lld\n", balance_rows[i].label,
                (long long)balance_get(&s->day, balance_rows[i].offset),
                (long long)balance_get(&s->total, balance_rows[i].offset));
    fprintf(out, "  %-24s %9s  %9s\n\n", "balanced", s->balanced ? "yes" : "NO",
            s->balanced ? "yes" : "NO");

    text_money(r, out);
    fprintf(out, "\n");
    fprintf(out,
            "ERP listing (%s): %lld records on %d page(s), %lld with an apbot key; "
            "matched %lld.\n",
            listing_label(s, label, sizeof(label)), (long long)s->erp_rows, s->erp_pages,
            (long long)s->erp_apbot_rows, (long long)s->matched);
    text_activity(r, out);
    fprintf(out, "\n");

    fprintf(out, "Drift                                    %lld\n", (long long)s->drift);
    for (int k = 0; k < REPORT_KIND__COUNT; k++)
        if (report_kind_is_drift((enum report_kind)k))
            fprintf(out, "  %-36s %5lld\n", kind_info[k].label, (long long)s->counts[k]);
    fprintf(out, "\nHints\n");
    for (int k = 0; k < REPORT_KIND__COUNT; k++)
        if (!report_kind_is_drift((enum report_kind)k) && k != REPORT_UNACCOUNTED)
            fprintf(out, "  %-36s %5lld\n", kind_info[k].label, (long long)s->counts[k]);

    for (int k = 0; k < REPORT_KIND__COUNT; k++) {
        if (s->counts[k] == 0)
            continue;
        fprintf(out, "\n%s (%lld)\n", kind_info[k].title, (long long)s->counts[k]);
        if (k == REPORT_EXCEPTION) {
            /* grouped by reason: the findings are few reasons over many items */
            bool *done = apbot_xcalloc(n, sizeof(*done));
            for (size_t i = 0; i < n; i++) {
                size_t count = 0, shown = 0;
                if (f[i].kind != REPORT_EXCEPTION || done[i])
                    continue;
                for (size_t j = i; j < n; j++)
                    if (f[j].kind == REPORT_EXCEPTION &&
                        strcmp(nz(f[j].reason), nz(f[i].reason)) == 0)
                        count++;
                char rb[1024];
                fprintf(out, "  %s: %zu item(s):",
                        f[i].reason ? tx(rb, sizeof(rb), f[i].reason) : "(no reason)", count);
                for (size_t j = i; j < n; j++)
                    if (f[j].kind == REPORT_EXCEPTION && !done[j] &&
                        strcmp(nz(f[j].reason), nz(f[i].reason)) == 0) {
                        done[j] = true;
                        if (shown++ < 20)
                            fprintf(out, " #%lld", (long long)f[j].item_id);
                    }
                if (shown > 20)
                    fprintf(out, " and %zu more", shown - 20);
                fprintf(out, "\n");
            }
            free(done);
            continue;
        }
        if (k == REPORT_ORPHAN) {
            text_orphans(r, out);
            continue;
        }
        for (size_t i = 0; i < n; i++)
            if ((int)f[i].kind == k)
                text_finding(out, &f[i]);
    }
    return ferror(out) ? APBOT_E_IO : APBOT_OK;
}

/* ---- CSV ------------------------------------------------------------------------------- */

/* Writes one field; text that a spreadsheet would run as a formula gets a leading quote. */
static void csv_field(FILE *out, const char *s, bool text, bool last)
{
    char *tmp = NULL;
    const char *v = s ? s : "";

    if (text && (v[0] == '=' || v[0] == '+' || v[0] == '-' || v[0] == '@' || v[0] == '\t' ||
                 v[0] == '\r')) {
        size_t len = strlen(v);
        tmp = apbot_xmalloc(len + 2);
        tmp[0] = '\'';
        memcpy(tmp + 1, v, len + 1);
        v = tmp;
    }
    csv_fwrite(out, v, strlen(v));
    fputc(last ? '\n' : ',', out);
    free(tmp);
}

/* One money row: date, "money", kind, item_id, -, key, -, -, -, currency, amount, erp_amount,
 * doc, erp_docs, -, reason, detail, -. */
static void csv_money_row(FILE *out, const char *date, const char *kind, int64_t item_id,
                          const char *key, const char *currency, const char *amount,
                          const char *erp_amount, const char *doc, const char *reason,
                          const char *detail)
{
    char id[24] = "";
    if (item_id)
        snprintf(id, sizeof(id), "%lld", (long long)item_id);
    csv_field(out, date, false, false);
    csv_field(out, "money", false, false);
    csv_field(out, kind, false, false);
    csv_field(out, id, false, false);
    csv_field(out, "", false, false);
    csv_field(out, key, true, false);
    csv_field(out, "", false, false);
    csv_field(out, "", false, false);
    csv_field(out, "", false, false);
    csv_field(out, currency, true, false);
    csv_field(out, amount, false, false);
    csv_field(out, erp_amount, false, false);
    csv_field(out, "", false, false);
    csv_field(out, doc, true, false);
    csv_field(out, "", false, false);
    csv_field(out, reason, true, false);
    csv_field(out, detail, true, false);
    csv_field(out, "", false, true);
}

/* Rows of section "money": per currency the buckets (kind "<bucket>-day" / "<bucket>-total"),
 * the ERP total, the expected total and the difference, then one "difference-doc" row per
 * document that makes it up (reason: why; amount: the queue's; erp_amount: the ERP's). */
static void csv_money(const struct report *r, FILE *out)
{
    const struct report_summary *s = report_summary(r);
    size_t nm, nd;
    const struct report_money *m = report_money(r, &nm);
    const struct report_money_diff *d = report_money_diffs(r, &nd);
    char kind[64], a1[48], a2[48], detail[128];

    for (size_t i = 0; i < nm; i++) {
        bool no_balance =
            money_row_hidden(&m[i], false, true) && money_row_hidden(&m[i], false, false);
        for (size_t k = 0; k < sizeof(money_rows) / sizeof(money_rows[0]) && !no_balance; k++) {
            snprintf(kind, sizeof(kind), "%s-day", money_rows[k].id);
            plain_amount(amounts_get(&m[i].day, money_rows[k].offset), m[i].exponent, a1,
                         sizeof(a1));
            csv_money_row(out, s->date, kind, 0, NULL, m[i].currency, a1, "", NULL, NULL, NULL);
            snprintf(kind, sizeof(kind), "%s-total", money_rows[k].id);
            plain_amount(amounts_get(&m[i].total, money_rows[k].offset), m[i].exponent, a1,
                         sizeof(a1));
            csv_money_row(out, s->date, kind, 0, NULL, m[i].currency, a1, "", NULL, NULL, NULL);
        }
        if (!no_balance)
            csv_money_row(out, s->date, "balanced", 0, NULL, m[i].currency, "", "", NULL, NULL,
                          m[i].balanced ? "yes" : "no");
        if (!s->erp_read)
            continue;
        plain_amount(m[i].erp_total, m[i].exponent, a1, sizeof(a1));
        snprintf(detail, sizeof(detail), "%lld document(s), %lld unreadable",
                 (long long)m[i].erp_docs, (long long)m[i].erp_unreadable);
        csv_money_row(out, s->date, "erp-total", 0, NULL, m[i].currency, "", a1, NULL, NULL,
                      detail);
        plain_amount(m[i].expected, m[i].exponent, a1, sizeof(a1));
        snprintf(detail, sizeof(detail), "%lld item(s) completed on the day",
                 (long long)m[i].expected_items);
        csv_money_row(out, s->date, "expected", 0, NULL, m[i].currency, a1, "", NULL, NULL, detail);
        plain_amount(m[i].difference, m[i].exponent, a1, sizeof(a1));
        csv_money_row(out, s->date, "difference", 0, NULL, m[i].currency, a1, "", NULL, NULL,
                      "ERP total minus expected");
    }
    for (size_t j = 0; j < nd; j++) {
        a1[0] = a2[0] = '\0';
        if (d[j].has_queue_amount)
            plain_amount(d[j].queue_amount, d[j].exponent, a1, sizeof(a1));
        if (d[j].has_erp_amount)
            plain_amount(d[j].erp_amount, d[j].exponent, a2, sizeof(a2));
        plain_amount(d[j].delta, d[j].exponent, detail, sizeof(detail));
        {
            char share[192];
            snprintf(share, sizeof(share), "%s; share of the difference %s", why_text(d[j].why),
                     detail);
            csv_money_row(out, s->date, "difference-doc", d[j].item_id, d[j].key, d[j].currency, a1,
                          a2, d[j].doc, report_diff_why_name(d[j].why), share);
        }
    }
}

static int write_csv(const struct report *r, FILE *out)
{
    static const char *const head[] = {
        "date",      "section",     "kind",           "item_id",  "state",  "key",
        "vendor_id", "vendor_name", "invoice_number", "currency", "amount", "erp_amount",
        "doc",       "erp_docs",    "age_minutes",    "reason",   "detail", "command"};
    const size_t nh = sizeof(head) / sizeof(head[0]);
    const struct report_summary *s = report_summary(r);
    size_t n;
    const struct report_finding *f = report_findings(r, &n);

    for (size_t i = 0; i < nh; i++)
        csv_field(out, head[i], false, i + 1 == nh);
    for (size_t i = 0; i < n; i++) {
        const struct report_finding *x = &f[i];
        char id[24], amount[48], erp_amount[48], age[24];
        const char *section = report_kind_is_drift(x->kind)   ? "drift"
                              : x->kind == REPORT_UNACCOUNTED ? "balance"
                                                              : "hint";

        id[0] = amount[0] = erp_amount[0] = age[0] = '\0';
        if (x->item_id)
            snprintf(id, sizeof(id), "%lld", (long long)x->item_id);
        if (x->has_amount)
            plain_amount(x->amount, x->exponent, amount, sizeof(amount));
        if (x->has_erp_amount)
            plain_amount(x->erp_amount, x->exponent, erp_amount, sizeof(erp_amount));
        if (x->item_id)
            snprintf(age, sizeof(age), "%lld", (long long)(x->age_ms / 60000));
        csv_field(out, s->date, false, false);
        csv_field(out, section, false, false);
        csv_field(out, report_kind_name(x->kind), false, false);
        csv_field(out, id, false, false);
        csv_field(out, x->state, false, false);
        csv_field(out, x->key, true, false);
        csv_field(out, x->vendor_id, true, false);
        csv_field(out, x->vendor_name, true, false);
        csv_field(out, x->invoice_number, true, false);
        csv_field(out, x->currency, true, false);
        csv_field(out, amount, false, false);
        csv_field(out, erp_amount, false, false);
        csv_field(out, x->doc, true, false);
        csv_field(out, x->erp_docs, true, false);
        csv_field(out, age, false, false);
        csv_field(out, x->reason, true, false);
        csv_field(out, x->detail, true, false);
        csv_field(out, x->command, true, true);
    }
    csv_money(r, out);
    return ferror(out) ? APBOT_E_IO : APBOT_OK;
}

/* ---- JSON ------------------------------------------------------------------------------ */

static json_t *jstr(const char *s)
{
    return s ? json_string(s) : json_null();
}

static json_t *jbalance(const struct report_balance *b)
{
    json_t *o = json_object();
    for (size_t i = 0; i < sizeof(balance_rows) / sizeof(balance_rows[0]); i++)
        json_object_set_new(o, balance_rows[i].id,
                            json_integer((json_int_t)balance_get(b, balance_rows[i].offset)));
    return o;
}

/* {"amount": "12.50", "minor": 1250} */
static json_t *jmoney(int64_t minor, int exponent)
{
    char buf[48];
    json_t *o = json_object();
    plain_amount(minor, exponent, buf, sizeof(buf));
    json_object_set_new(o, "amount", json_string(buf));
    json_object_set_new(o, "minor", json_integer((json_int_t)minor));
    return o;
}

static json_t *jamounts(const struct report_amounts *a, int exponent)
{
    json_t *o = json_object();
    for (size_t k = 0; k < sizeof(money_rows) / sizeof(money_rows[0]); k++)
        json_object_set_new(o, money_rows[k].id,
                            jmoney(amounts_get(a, money_rows[k].offset), exponent));
    return o;
}

static json_t *json_money(const struct report *r)
{
    const struct report_summary *s = report_summary(r);
    size_t nm, nd;
    const struct report_money *m = report_money(r, &nm);
    const struct report_money_diff *d = report_money_diffs(r, &nd);
    json_t *arr = json_array();

    for (size_t i = 0; i < nm; i++) {
        json_t *o = json_object(), *diffs = json_array();
        json_object_set_new(o, "currency", json_string(m[i].currency));
        json_object_set_new(o, "exponent", json_integer(m[i].exponent));
        json_object_set_new(o, "day", jamounts(&m[i].day, m[i].exponent));
        json_object_set_new(o, "total", jamounts(&m[i].total, m[i].exponent));
        json_object_set_new(o, "balanced", json_boolean(m[i].balanced));
        if (s->erp_read) {
            json_t *e = jmoney(m[i].erp_total, m[i].exponent);
            json_object_set_new(e, "documents", json_integer((json_int_t)m[i].erp_docs));
            json_object_set_new(e, "unreadable", json_integer((json_int_t)m[i].erp_unreadable));
            json_object_set_new(o, "erp_total", e);
            e = jmoney(m[i].expected, m[i].exponent);
            json_object_set_new(e, "items", json_integer((json_int_t)m[i].expected_items));
            json_object_set_new(o, "expected", e);
            json_object_set_new(o, "difference", jmoney(m[i].difference, m[i].exponent));
            for (size_t j = 0; j < nd; j++) {
                json_t *x;
                if (strcmp(d[j].currency, m[i].currency) != 0)
                    continue;
                x = json_object();
                json_object_set_new(x, "doc", jstr(d[j].doc));
                json_object_set_new(x, "item_id",
                                    d[j].item_id ? json_integer((json_int_t)d[j].item_id)
                                                 : json_null());
                json_object_set_new(x, "key", jstr(d[j].key));
                json_object_set_new(x, "why", json_string(report_diff_why_name(d[j].why)));
                json_object_set_new(x, "erp_amount",
                                    d[j].has_erp_amount ? jmoney(d[j].erp_amount, d[j].exponent)
                                                        : json_null());
                json_object_set_new(x, "queue_amount",
                                    d[j].has_queue_amount ? jmoney(d[j].queue_amount, d[j].exponent)
                                                          : json_null());
                json_object_set_new(x, "delta", jmoney(d[j].delta, d[j].exponent));
                json_array_append_new(diffs, x);
            }
            json_object_set_new(o, "differences", diffs);
        } else {
            json_decref(diffs);
        }
        json_array_append_new(arr, o);
    }
    return arr;
}

static json_t *json_activity(const struct report *r)
{
    const struct report_activity *a = report_activity(r);
    json_t *o = json_object(), *hours = json_array();
    char t[32];

    for (int h = 0; h < 24; h++) {
        json_t *x = json_object();
        json_object_set_new(x, "hour", json_integer(h));
        for (int k = 0; k < REPORT_OUT__COUNT; k++)
            json_object_set_new(x, report_outcome_name((enum report_outcome)k),
                                json_integer((json_int_t)a->per_hour[h][k]));
        json_array_append_new(hours, x);
    }
    json_object_set_new(o, "hours", hours);
    if (a->last_run[0]) {
        json_t *run = json_object(), *outs = json_object();
        json_object_set_new(run, "owner", json_string(a->last_run));
        json_object_set_new(run, "first",
                            json_string(report_local_time(a->last_run_first, "", t, sizeof(t))));
        json_object_set_new(run, "last",
                            json_string(report_local_time(a->last_run_last, "", t, sizeof(t))));
        json_object_set_new(run, "items", json_integer((json_int_t)a->last_run_items));
        for (int k = 0; k < REPORT_OUT__COUNT; k++)
            json_object_set_new(outs, report_outcome_name((enum report_outcome)k),
                                json_integer((json_int_t)a->last_run_outcomes[k]));
        json_object_set_new(run, "outcomes", outs);
        json_object_set_new(o, "last_run", run);
    } else {
        json_object_set_new(o, "last_run", json_null());
    }
    return o;
}

/* {"count": n, "money": [{"currency", "documents", "amount", "minor", "unreadable"}]} */
static json_t *json_orphans(const struct report *r)
{
    struct orphan_sum sums[ORPHAN_CURRENCIES_MAX];
    size_t ns = orphan_sums(r, sums, ORPHAN_CURRENCIES_MAX);
    json_t *o = json_object(), *arr = json_array();
    json_object_set_new(o, "count",
                        json_integer((json_int_t)report_summary(r)->counts[REPORT_ORPHAN]));
    for (size_t i = 0; i < ns; i++) {
        json_t *x = sums[i].overflow ? json_object() : jmoney(sums[i].minor, sums[i].exponent);
        json_object_set_new(x, "currency", json_string(sums[i].currency));
        json_object_set_new(x, "documents", json_integer((json_int_t)sums[i].n));
        json_object_set_new(x, "unreadable", json_integer((json_int_t)sums[i].unreadable));
        json_array_append_new(arr, x);
    }
    json_object_set_new(o, "money", arr);
    return o;
}

static int write_json(const struct report *r, FILE *out)
{
    const struct report_summary *s = report_summary(r);
    size_t n;
    const struct report_finding *f = report_findings(r, &n);
    json_t *root = json_object(), *bal = json_object(), *erp = json_object();
    json_t *counts = json_object(), *list = json_array();
    char amount[48], head[96];
    int rc;

    json_object_set_new(root, "date", json_string(s->date));
    json_object_set_new(root, "generated_at_ms", json_integer((json_int_t)s->generated_at));
    json_object_set_new(root, "flow", jstr(s->flow_name));
    snprintf(head, sizeof(head), "%lld:%s", (long long)s->audit_head_id, s->audit_head_hash);
    json_object_set_new(root, "audit_chain_head",
                        json_pack("{s:I,s:s,s:s}", "event_id", (json_int_t)s->audit_head_id,
                                  "sha256", s->audit_head_hash, "head", head));
    json_object_set_new(root, "status", json_string(status_name(report_status(r))));
    json_object_set_new(bal, "day", jbalance(&s->day));
    json_object_set_new(bal, "total", jbalance(&s->total));
    json_object_set_new(bal, "balanced", json_boolean(s->balanced));
    json_object_set_new(root, "balance", bal);
    json_object_set_new(erp, "rows", json_integer((json_int_t)s->erp_rows));
    json_object_set_new(erp, "apbot_rows", json_integer((json_int_t)s->erp_apbot_rows));
    json_object_set_new(erp, "pages", json_integer(s->erp_pages));
    json_object_set_new(erp, "listed_by", json_string(s->list_by_invoice ? "invoice" : "booked"));
    json_object_set_new(erp, "listed_from", json_string(s->list_from));
    json_object_set_new(erp, "listed_to", json_string(s->list_to));
    json_object_set_new(erp, "lookups", json_integer((json_int_t)s->lookups));
    {
        char days[512];
        json_object_set_new(erp, "days", json_string(days_text(s, days, sizeof(days))));
    }
    json_object_set_new(root, "erp", erp);
    json_object_set_new(root, "matched", json_integer((json_int_t)s->matched));
    json_object_set_new(root, "drift", json_integer((json_int_t)s->drift));
    for (int k = 0; k < REPORT_KIND__COUNT; k++)
        json_object_set_new(counts, report_kind_name((enum report_kind)k),
                            json_integer((json_int_t)s->counts[k]));
    json_object_set_new(root, "counts", counts);
    json_object_set_new(root, "money", json_money(r));
    json_object_set_new(root, "orphans", json_orphans(r));
    json_object_set_new(root, "activity", json_activity(r));
    for (size_t i = 0; i < n; i++) {
        const struct report_finding *x = &f[i];
        json_t *o = json_object();
        json_object_set_new(o, "kind", json_string(report_kind_name(x->kind)));
        json_object_set_new(o, "drift", json_boolean(report_kind_is_drift(x->kind)));
        json_object_set_new(o, "item_id",
                            x->item_id ? json_integer((json_int_t)x->item_id) : json_null());
        json_object_set_new(o, "state", jstr(x->state));
        json_object_set_new(o, "key", jstr(x->key));
        json_object_set_new(o, "vendor_id", jstr(x->vendor_id));
        json_object_set_new(o, "vendor_name", jstr(x->vendor_name));
        json_object_set_new(o, "invoice_number", jstr(x->invoice_number));
        json_object_set_new(o, "currency", jstr(x->currency));
        if (x->has_amount) {
            plain_amount(x->amount, x->exponent, amount, sizeof(amount));
            json_object_set_new(o, "amount", json_string(amount));
            json_object_set_new(o, "amount_minor", json_integer((json_int_t)x->amount));
        }
        if (x->has_erp_amount) {
            plain_amount(x->erp_amount, x->exponent, amount, sizeof(amount));
            json_object_set_new(o, "erp_amount", json_string(amount));
            json_object_set_new(o, "erp_amount_minor", json_integer((json_int_t)x->erp_amount));
        }
        json_object_set_new(o, "doc", jstr(x->doc));
        json_object_set_new(o, "erp_docs", jstr(x->erp_docs));
        if (x->item_id) {
            json_object_set_new(o, "created_at_ms", json_integer((json_int_t)x->created_at));
            json_object_set_new(o, "age_ms", json_integer((json_int_t)x->age_ms));
        }
        json_object_set_new(o, "reason", jstr(x->reason));
        json_object_set_new(o, "detail", jstr(x->detail));
        json_object_set_new(o, "command", jstr(x->command));
        json_array_append_new(list, o);
    }
    json_object_set_new(root, "findings", list);
    rc = json_dumpf(root, out, JSON_INDENT(2)) == 0 ? APBOT_OK : APBOT_E_IO;
    json_decref(root);
    if (rc == APBOT_OK)
        fputc('\n', out);
    return rc == APBOT_OK && !ferror(out) ? APBOT_OK : APBOT_E_IO;
}

/* ---- HTML ------------------------------------------------------------------------------ */

static const char html_css[] =
    "body{font:14px/1.4 -apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:1.5em;"
    "color:#222;max-width:80em}"
    "h1{font-size:1.4em;margin:0 0 .3em}h2{font-size:1.1em;margin:1.4em 0 .4em}"
    ".meta{color:#666;margin-bottom:.4em}p.days{color:#444;max-width:60em;margin:.2em 0 1em}"
    ".status{padding:.8em 1em;font-weight:bold;font-size:1.2em;border-radius:4px}"
    ".status.clean{background:#e3f4e1;color:#1d5c17;border:1px solid #9ccf95}"
    ".status.drift{background:#fff1d6;color:#7a4b00;border:1px solid #e3b75f}"
    ".status.unbalanced{background:#fbe0e0;color:#8b0000;border:3px solid #c00}"
    ".cards{display:flex;flex-wrap:wrap;gap:1em;margin:1em 0}"
    ".card{border:1px solid #ccc;border-radius:4px;padding:.6em 1em;min-width:16em}"
    "table{border-collapse:collapse;margin:.3em 0}"
    "th,td{border:1px solid #ddd;padding:.25em .6em;text-align:left;vertical-align:top}"
    "th{background:#f4f4f4}td.count{text-align:right;font-variant-numeric:tabular-nums}"
    "td.amount{text-align:right;white-space:nowrap}"
    "tr.nonzero td.count{font-weight:bold;color:#b00}"
    "code{background:#f4f4f4;padding:0 .3em;user-select:all}"
    "table caption{text-align:left;font-weight:bold;padding:.3em 0}"
    "section.money table{margin-bottom:1em}"
    "tr.unbalanced th,tr.nonzero td.amount{color:#b00;font-weight:bold}"
    "figure.chart{margin:1em 0}figure.chart figcaption{font-weight:bold;margin-bottom:.3em}"
    "figure.chart svg{max-width:100%;height:auto;border:1px solid #ddd;background:#fff}"
    "p.last-run{color:#444}p.group-summary{margin:.2em 0}p.more{margin:.3em 0}"
    "td.key,td.doc,td.erp-docs{overflow-wrap:anywhere}"
    "@media print{body{margin:0;max-width:none;font-size:11px}"
    ".status{border-width:1px}a{color:inherit;text-decoration:none}}";

/* A count cell, with an id for tools unless id is NULL. */
static xmlNodePtr count_cell(xmlNodePtr tr, const char *id, int64_t v)
{
    char buf[32];
    xmlNodePtr td;
    snprintf(buf, sizeof(buf), "%lld", (long long)v);
    td = html_el_text(tr, "td", "count", buf);
    if (id)
        html_id(td, id);
    return td;
}

static xmlNodePtr money_cell(xmlNodePtr tr, const char *id, int64_t minor, int exponent);

/* The table of the findings of kind k, the first `max` of them (SIZE_MAX: all). */
static void html_findings_table(xmlNodePtr sec, const struct report *r, int k, size_t max)
{
    size_t n, shown = 0;
    const struct report_finding *f = report_findings(r, &n);
    xmlNodePtr table, tr;
    char buf[64];

    table = html_el(sec, "table", "findings");
    tr = html_el(table, "tr", NULL);
    {
        static const char *const cols[] = {"Item",   "Key",          "Vendor",      "Invoice",
                                           "Amount", "ERP amount",   "Doc (queue)", "Doc (ERP)",
                                           "Age",    "What it means"};
        for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++)
            html_el_text(tr, "th", NULL, cols[i]);
    }
    for (size_t i = 0; i < n; i++) {
        const struct report_finding *x = &f[i];
        xmlNodePtr td;
        char amount[96];

        if ((int)x->kind != k || shown++ >= max)
            continue;
        tr = html_el(table, "tr", "finding");
        html_attr(tr, "data-kind", report_kind_name(x->kind));
        if (x->item_id) {
            snprintf(buf, sizeof(buf), "#%lld", (long long)x->item_id);
            html_el_text(tr, "td", "item", buf);
        } else {
            html_el_text(tr, "td", "item", "");
        }
        html_el_text(tr, "td", "key", x->key);
        td = html_el_text(tr, "td", "vendor", x->vendor_id);
        if (x->vendor_name) {
            html_text(td, " ");
            html_el_text(td, "span", "vendor-name", x->vendor_name);
        }
        html_el_text(tr, "td", "invoice", x->invoice_number);
        amount[0] = '\0';
        if (x->has_amount) {
            money_text(x->amount, x->exponent, buf, sizeof(buf));
            snprintf(amount, sizeof(amount), "%s %s", buf, nz(x->currency));
        }
        html_el_text(tr, "td", "amount", amount);
        amount[0] = '\0';
        if (x->has_erp_amount) {
            money_text(x->erp_amount, x->exponent, buf, sizeof(buf));
            snprintf(amount, sizeof(amount), "%s %s", buf, nz(x->currency));
        }
        html_el_text(tr, "td", "amount erp-amount", amount);
        html_el_text(tr, "td", "doc", x->doc);
        html_el_text(tr, "td", "erp-docs", x->erp_docs);
        buf[0] = '\0';
        if (x->item_id)
            report_format_age(x->age_ms, buf, sizeof(buf));
        html_el_text(tr, "td", "age", buf);
        td = html_el(tr, "td", "detail");
        if (x->kind == REPORT_EXCEPTION && x->reason)
            html_text(td, x->reason);
        else
            html_text(td, x->detail);
        if (x->command) {
            html_text(td, " Run: ");
            html_el_text(td, "code", "command", x->command);
        }
    }
}

/* The section of kind k: its heading and, unless grouped (the caller adds what it shows), its
 * findings. Returns the section, NULL when there are none. */
static xmlNodePtr html_section(xmlNodePtr body, const struct report *r, int k)
{
    const struct report_summary *s = report_summary(r);
    xmlNodePtr sec;
    char id[64], buf[96];

    if (s->counts[k] == 0)
        return NULL;
    sec = html_el(body, "section", report_kind_is_drift((enum report_kind)k) ? "drift" : "hint");
    snprintf(id, sizeof(id), "section-%s", kind_info[k].id);
    html_id(sec, id);
    snprintf(buf, sizeof(buf), "%s (%lld)", kind_info[k].title, (long long)s->counts[k]);
    html_el_text(sec, "h2", NULL, buf);
    return sec;
}

static void html_findings(xmlNodePtr body, const struct report *r, int k)
{
    xmlNodePtr sec = html_section(body, r, k);
    if (sec)
        html_findings_table(sec, r, k, SIZE_MAX);
}

/*
 * The orphans grouped: how many, their money per currency (cells orphans-CUR-amount with
 * data-minor, orphans-CUR-count), the first ORPHANS_SHOWN by document number and, when there
 * are more, a link to the whole list at the end of the page (#orphans-all, html_orphans_all).
 */
static void html_orphans(xmlNodePtr body, const struct report *r)
{
    const struct report_summary *s = report_summary(r);
    struct orphan_sum sums[ORPHAN_CURRENCIES_MAX];
    size_t ns = orphan_sums(r, sums, ORPHAN_CURRENCIES_MAX);
    xmlNodePtr sec = html_section(body, r, REPORT_ORPHAN), table, tr, p;
    char buf[256], id[64];

    if (!sec)
        return;
    p = html_el(sec, "p", "group-summary");
    html_id(p, "orphans-summary");
    snprintf(buf, sizeof(buf),
             "%lld ERP document(s) carry an apbot key this queue does not know: booked by hand, "
             "or from another queue working on the same ERP.",
             (long long)s->counts[REPORT_ORPHAN]);
    html_text(p, buf);
    table = html_el(sec, "table", "orphan-money");
    html_id(table, "orphans-money");
    tr = html_el(table, "tr", NULL);
    html_el_text(tr, "th", NULL, "Currency");
    html_el_text(tr, "th", NULL, "documents");
    html_el_text(tr, "th", NULL, "amount");
    html_el_text(tr, "th", NULL, "amount cannot be read");
    for (size_t i = 0; i < ns; i++) {
        tr = html_el(table, "tr", NULL);
        html_el_text(tr, "th", NULL, cur_label(sums[i].currency));
        snprintf(id, sizeof(id), "orphans-%.8s-count", cur_label(sums[i].currency));
        count_cell(tr, id, sums[i].n);
        snprintf(id, sizeof(id), "orphans-%.8s-amount", cur_label(sums[i].currency));
        if (sums[i].overflow)
            html_id(html_el_text(tr, "td", "amount", "?"), id);
        else
            money_cell(tr, id, sums[i].minor, sums[i].exponent);
        count_cell(tr, NULL, sums[i].unreadable);
    }
    html_findings_table(sec, r, REPORT_ORPHAN, ORPHANS_SHOWN);
    if (s->counts[REPORT_ORPHAN] > ORPHANS_SHOWN) {
        xmlNodePtr a;
        p = html_el(sec, "p", "more");
        snprintf(buf, sizeof(buf), "%lld more, by document number: ",
                 (long long)(s->counts[REPORT_ORPHAN] - ORPHANS_SHOWN));
        html_text(p, buf);
        a = html_el(p, "a", NULL);
        html_attr(a, "href", "#orphans-all");
        snprintf(buf, sizeof(buf), "all %lld orphans", (long long)s->counts[REPORT_ORPHAN]);
        html_text(a, buf);
    }
}

/* The whole list of orphans at the end of the page, when html_orphans showed only the first. */
static void html_orphans_all(xmlNodePtr body, const struct report *r)
{
    const struct report_summary *s = report_summary(r);
    xmlNodePtr sec;
    char buf[96];

    if (s->counts[REPORT_ORPHAN] <= ORPHANS_SHOWN)
        return;
    sec = html_el(body, "section", "drift appendix");
    html_id(sec, "orphans-all");
    snprintf(buf, sizeof(buf), "All orphans, by document number (%lld)",
             (long long)s->counts[REPORT_ORPHAN]);
    html_el_text(sec, "h2", NULL, buf);
    html_findings_table(sec, r, REPORT_ORPHAN, SIZE_MAX);
}

static void html_exceptions(xmlNodePtr body, const struct report *r)
{
    size_t n;
    const struct report_finding *f = report_findings(r, &n);
    const struct report_summary *s = report_summary(r);
    xmlNodePtr sec, table, tr;
    bool *done;
    char buf[64];

    if (s->counts[REPORT_EXCEPTION] == 0)
        return;
    sec = html_el(body, "section", "hint");
    html_id(sec, "section-exceptions");
    snprintf(buf, sizeof(buf), "%s (%lld)", kind_info[REPORT_EXCEPTION].title,
             (long long)s->counts[REPORT_EXCEPTION]);
    html_el_text(sec, "h2", NULL, buf);
    table = html_el(sec, "table", "exceptions");
    tr = html_el(table, "tr", NULL);
    html_el_text(tr, "th", NULL, "Reason");
    html_el_text(tr, "th", NULL, "Items");
    html_el_text(tr, "th", NULL, "Item ids");
    done = apbot_xcalloc(n, sizeof(*done));
    for (size_t i = 0; i < n; i++) {
        size_t count = 0;
        xmlNodePtr ids;
        if (f[i].kind != REPORT_EXCEPTION || done[i])
            continue;
        tr = html_el(table, "tr", "exception-group");
        html_el_text(tr, "td", "reason", f[i].reason ? f[i].reason : "(no reason)");
        for (size_t j = i; j < n; j++)
            if (f[j].kind == REPORT_EXCEPTION && strcmp(nz(f[j].reason), nz(f[i].reason)) == 0)
                count++;
        count_cell(tr, NULL, (int64_t)count);
        ids = html_el(tr, "td", "ids");
        for (size_t j = i; j < n; j++)
            if (f[j].kind == REPORT_EXCEPTION && !done[j] &&
                strcmp(nz(f[j].reason), nz(f[i].reason)) == 0) {
                done[j] = true;
                snprintf(buf, sizeof(buf), "#%lld ", (long long)f[j].item_id);
                html_text(ids, buf);
            }
    }
    free(done);
}

/* A money cell: the amount for people, the minor units in data-minor, an id for tools. */
static xmlNodePtr money_cell(xmlNodePtr tr, const char *id, int64_t minor, int exponent)
{
    char buf[48], minor_s[32];
    xmlNodePtr td = html_el_text(tr, "td", "amount", money_text(minor, exponent, buf, sizeof(buf)));
    snprintf(minor_s, sizeof(minor_s), "%lld", (long long)minor);
    if (id)
        html_id(td, id);
    html_attr(td, "data-minor", minor_s);
    return td;
}

void report_html_balance(const struct report *r, xmlNodePtr parent, const char *day_head,
                         const char *total_head)
{
    const struct report_summary *s = report_summary(r);
    xmlNodePtr table = html_el(parent, "table", "balance"), tr;
    char id[64];

    tr = html_el(table, "tr", NULL);
    html_el_text(tr, "th", NULL, "Items");
    html_el_text(tr, "th", NULL, day_head);
    html_el_text(tr, "th", NULL, total_head);
    for (size_t i = 0; i < sizeof(balance_rows) / sizeof(balance_rows[0]); i++) {
        tr = html_el(table, "tr", NULL);
        html_el_text(tr, "th", NULL, balance_rows[i].label);
        snprintf(id, sizeof(id), "count-%s-day", balance_rows[i].id);
        count_cell(tr, id, balance_get(&s->day, balance_rows[i].offset));
        snprintf(id, sizeof(id), "count-%s-total", balance_rows[i].id);
        count_cell(tr, id, balance_get(&s->total, balance_rows[i].offset));
    }
}

void report_html_money(const struct report *r, xmlNodePtr parent)
{
    const struct report_summary *s = report_summary(r);
    size_t nm, nd;
    const struct report_money *m = report_money(r, &nm);
    const struct report_money_diff *d = report_money_diffs(r, &nd);
    xmlNodePtr sec = html_el(parent, "section", "money"), table, tr;
    char id[96], buf[192];

    html_id(sec, "money");
    html_el_text(sec, "h2", NULL, "Money, per currency (exact)");
    if (nm == 0) {
        html_el_text(sec, "p", "empty", "No items in the queue.");
        return;
    }
    for (int pass = 0; pass < 2; pass++) {
        const char *which = pass == 0 ? "day" : "total";
        table = html_el(sec, "table", "money-balance");
        html_id(table, pass == 0 ? "money-day" : "money-total");
        html_el_text(table, "caption", NULL,
                     pass == 0 ? "Received on the day and where it is now" : "The whole queue");
        tr = html_el(table, "tr", NULL);
        html_el_text(tr, "th", NULL, "Currency");
        for (size_t k = 0; k < sizeof(money_rows) / sizeof(money_rows[0]); k++)
            html_el_text(tr, "th", NULL, money_rows[k].label);
        html_el_text(tr, "th", NULL, "balanced");
        for (size_t i = 0; i < nm; i++) {
            const struct report_amounts *am = pass == 0 ? &m[i].day : &m[i].total;
            if (money_row_hidden(&m[i], false, pass == 0))
                continue;
            tr = html_el(table, "tr", m[i].balanced ? "balanced" : "unbalanced");
            html_el_text(tr, "th", NULL, cur_label(m[i].currency));
            for (size_t k = 0; k < sizeof(money_rows) / sizeof(money_rows[0]); k++) {
                snprintf(id, sizeof(id), "money-%s-%s-%s", cur_label(m[i].currency),
                         money_rows[k].id, which);
                money_cell(tr, id, amounts_get(am, money_rows[k].offset), m[i].exponent);
            }
            snprintf(id, sizeof(id), "money-%s-balanced-%s", cur_label(m[i].currency), which);
            html_id(html_el_text(tr, "td", "flag", m[i].balanced ? "yes" : "NO"), id);
        }
    }
    if (!s->erp_read)
        return;
    table = html_el(sec, "table", "money-erp");
    html_id(table, "money-erp");
    {
        char label[80];
        snprintf(buf, sizeof(buf), "The ERP's listing (%s) against what the queue completed on %s",
                 listing_label(s, label, sizeof(label)), s->date);
    }
    html_el_text(table, "caption", NULL, buf);
    tr = html_el(table, "tr", NULL);
    html_el_text(tr, "th", NULL, "Currency");
    html_el_text(tr, "th", NULL, "ERP total, apbot's documents");
    html_el_text(tr, "th", NULL, "documents");
    html_el_text(tr, "th", NULL, "completed here on the day");
    html_el_text(tr, "th", NULL, "items");
    html_el_text(tr, "th", NULL, "difference");
    for (size_t i = 0; i < nm; i++) {
        if (money_row_hidden(&m[i], true, false))
            continue;
        tr = html_el(table, "tr", m[i].difference ? "nonzero" : "zero");
        html_el_text(tr, "th", NULL, cur_label(m[i].currency));
        snprintf(id, sizeof(id), "money-%s-erp-total", cur_label(m[i].currency));
        money_cell(tr, id, m[i].erp_total, m[i].exponent);
        snprintf(buf, sizeof(buf), "%lld", (long long)m[i].erp_docs);
        if (m[i].erp_unreadable)
            snprintf(buf, sizeof(buf), "%lld (+%lld unreadable, not added)",
                     (long long)m[i].erp_docs, (long long)m[i].erp_unreadable);
        html_el_text(tr, "td", "count", buf);
        snprintf(id, sizeof(id), "money-%s-expected", cur_label(m[i].currency));
        money_cell(tr, id, m[i].expected, m[i].exponent);
        snprintf(buf, sizeof(buf), "%lld", (long long)m[i].expected_items);
        html_el_text(tr, "td", "count", buf);
        snprintf(id, sizeof(id), "money-%s-difference", cur_label(m[i].currency));
        money_cell(tr, id, m[i].difference, m[i].exponent);
    }
    if (nd == 0) {
        html_el_text(sec, "p", "money-no-diff",
                     "No difference: the listing's apbot documents add up to what the queue "
                     "completed on the day.");
        return;
    }
    table = html_el(sec, "table", "money-diffs");
    html_id(table, "money-diffs");
    html_el_text(table, "caption", NULL, "The documents that make up the difference");
    tr = html_el(table, "tr", NULL);
    {
        static const char *const cols[] = {"Currency", "Document", "Item",  "Key",
                                           "Why",      "ERP",      "Queue", "Share"};
        for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++)
            html_el_text(tr, "th", NULL, cols[i]);
    }
    for (size_t j = 0; j < nd; j++) {
        tr = html_el(table, "tr", "money-diff");
        html_attr(tr, "data-doc", nz(d[j].doc));
        html_attr(tr, "data-why", report_diff_why_name(d[j].why));
        html_el_text(tr, "td", NULL, cur_label(d[j].currency));
        html_el_text(tr, "td", "doc", d[j].doc);
        buf[0] = '\0';
        if (d[j].item_id)
            snprintf(buf, sizeof(buf), "#%lld", (long long)d[j].item_id);
        html_el_text(tr, "td", "item", buf);
        html_el_text(tr, "td", "key", d[j].key);
        html_el_text(tr, "td", "why", why_text(d[j].why));
        if (d[j].has_erp_amount)
            money_cell(tr, NULL, d[j].erp_amount, d[j].exponent);
        else
            html_el_text(tr, "td", "amount", "-");
        if (d[j].has_queue_amount)
            money_cell(tr, NULL, d[j].queue_amount, d[j].exponent);
        else
            html_el_text(tr, "td", "amount", "-");
        money_cell(tr, NULL, d[j].delta, d[j].exponent);
    }
}

/* The chart's colours, one per outcome; presentation attributes, so no style is needed. */
static const char *const chart_fill[REPORT_OUT__COUNT] = {
    [REPORT_OUT_COMPLETED] = "#3d8b37",
    [REPORT_OUT_EXCEPTION] = "#d99a00",
    [REPORT_OUT_REVIEW] = "#c0392b",
    [REPORT_OUT_UNKNOWN] = "#7f8c8d",
};

static void svg_attr_i(xmlNodePtr n, const char *name, long v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%ld", v);
    html_attr(n, name, buf);
}

static xmlNodePtr svg_rect(xmlNodePtr parent, long x, long y, long w, long h, const char *fill)
{
    xmlNodePtr n = html_el(parent, "rect", NULL);
    svg_attr_i(n, "x", x);
    svg_attr_i(n, "y", y);
    svg_attr_i(n, "width", w);
    svg_attr_i(n, "height", h);
    html_attr(n, "fill", fill);
    return n;
}

static xmlNodePtr svg_text(xmlNodePtr parent, long x, long y, const char *anchor, const char *t)
{
    xmlNodePtr n = html_el_text(parent, "text", NULL, t);
    svg_attr_i(n, "x", x);
    svg_attr_i(n, "y", y);
    html_attr(n, "font-size", "11");
    html_attr(n, "fill", "#444");
    if (anchor)
        html_attr(n, "text-anchor", anchor);
    return n;
}

void report_html_chart(const struct report *r, xmlNodePtr parent)
{
    enum { W = 760, H = 210, LEFT = 40, RIGHT = 8, TOP = 30, BOTTOM = 24 };
    const struct report_summary *s = report_summary(r);
    const struct report_activity *a = report_activity(r);
    const long plot_h = H - TOP - BOTTOM, slot = (W - LEFT - RIGHT) / 24, bar = slot - 6;
    xmlNodePtr fig = html_el(parent, "figure", "chart"), svg, n;
    char buf[160];

    html_id(fig, "chart");
    snprintf(buf, sizeof(buf), "The bot's outcomes per hour on %s", s->date);
    html_el_text(fig, "figcaption", NULL, buf);
    svg = html_el(fig, "svg", NULL);
    html_id(svg, "chart-day");
    svg_attr_i(svg, "width", W);
    svg_attr_i(svg, "height", H);
    snprintf(buf, sizeof(buf), "0 0 %d %d", W, H);
    html_attr(svg, "viewBox", buf);
    html_attr(svg, "role", "img");
    snprintf(buf, sizeof(buf),
             "Outcomes per hour on %s, stacked: completed, business exception, "
             "manual review, unknown",
             s->date);
    html_attr(svg, "aria-label", buf);

    /* legend */
    for (int o = 0; o < REPORT_OUT__COUNT; o++) {
        svg_rect(svg, LEFT + o * 170L, 8, 12, 12, chart_fill[o]);
        svg_text(svg, LEFT + o * 170L + 16, 18, NULL, report_outcome_name((enum report_outcome)o));
    }
    /* axes */
    n = html_el(svg, "line", "axis");
    svg_attr_i(n, "x1", LEFT);
    svg_attr_i(n, "y1", TOP + plot_h);
    svg_attr_i(n, "x2", W - RIGHT);
    svg_attr_i(n, "y2", TOP + plot_h);
    html_attr(n, "stroke", "#999");
    snprintf(buf, sizeof(buf), "%lld", (long long)a->max_hour);
    svg_text(svg, LEFT - 6, TOP + 10, "end", buf);
    svg_text(svg, LEFT - 6, TOP + plot_h, "end", "0");
    for (int h = 0; h < 24; h += 3) {
        snprintf(buf, sizeof(buf), "%02d", h);
        svg_text(svg, LEFT + h * slot + slot / 2, H - 8, "middle", buf);
    }
    if (a->max_hour == 0) {
        svg_text(svg, W / 2, TOP + plot_h / 2, "middle", "no outcomes recorded on this day");
        return;
    }
    /* the bars: each hour's outcomes stacked from the axis up */
    for (int h = 0; h < 24; h++) {
        long y = TOP + plot_h;
        for (int o = 0; o < REPORT_OUT__COUNT; o++) {
            int64_t v = a->per_hour[h][o];
            long hgt;
            xmlNodePtr rect;
            if (v == 0)
                continue;
            hgt = (long)(v * plot_h / a->max_hour);
            if (hgt < 1)
                hgt = 1;
            y -= hgt;
            rect = svg_rect(svg, LEFT + h * slot + 3, y, bar, hgt, chart_fill[o]);
            html_attr(rect, "class", "bar");
            snprintf(buf, sizeof(buf), "%02d", h);
            html_attr(rect, "data-hour", buf);
            html_attr(rect, "data-outcome", report_outcome_name((enum report_outcome)o));
            snprintf(buf, sizeof(buf), "%lld", (long long)v);
            html_attr(rect, "data-count", buf);
            snprintf(buf, sizeof(buf), "%02d:00-%02d:59 %s: %lld", h, h,
                     report_outcome_name((enum report_outcome)o), (long long)v);
            html_el_text(rect, "title", NULL, buf);
        }
    }
}

/* The last run of the day, one line. */
static void html_last_run(xmlNodePtr parent, const struct report *r)
{
    const struct report_activity *a = report_activity(r);
    char t1[32], t2[32], buf[512];
    xmlNodePtr p = html_el(parent, "p", "last-run");

    html_id(p, "last-run");
    if (!a->last_run[0]) {
        html_text(p, "No run of the bot on this day.");
        return;
    }
    report_local_time(a->last_run_first, "?", t1, sizeof(t1));
    report_local_time(a->last_run_last, "?", t2, sizeof(t2));
    snprintf(buf, sizeof(buf),
             "Last run on this day: %s, from %s to %s, %lld item(s): completed %lld, business "
             "exception %lld, manual review %lld, outcome unknown %lld.",
             a->last_run, t1, t2, (long long)a->last_run_items,
             (long long)a->last_run_outcomes[REPORT_OUT_COMPLETED],
             (long long)a->last_run_outcomes[REPORT_OUT_EXCEPTION],
             (long long)a->last_run_outcomes[REPORT_OUT_REVIEW],
             (long long)a->last_run_outcomes[REPORT_OUT_UNKNOWN]);
    html_text(p, buf);
}

void report_html_body(const struct report *r, xmlNodePtr body)
{
    const struct report_summary *s = report_summary(r);
    enum report_status st = report_status(r);
    xmlNodePtr table, tr, cards, card;
    char buf[256], when[32], id[64];

    snprintf(buf, sizeof(buf), "Reconciliation report for %s", s->date);
    html_el_text(body, "h1", NULL, buf);
    report_local_time(s->generated_at, "?", when, sizeof(when));
    snprintf(buf, sizeof(buf), "Flow %s, generated %s", nz(s->flow_name), when);
    html_el_text(body, "div", "meta", buf);
    snprintf(buf, sizeof(buf), "Audit chain head at the end of the day: %lld:%s",
             (long long)s->audit_head_id, s->audit_head_hash);
    xmlNewProp(html_el_text(body, "div", "meta", buf), BAD_CAST "id", BAD_CAST "audit-head");
    {
        char days[512];
        xmlNodePtr p = html_el_text(body, "p", "days", days_text(s, days, sizeof(days)));
        html_id(p, "days");
        html_attr(p, "data-listed-by",
                  !s->erp_read         ? "none"
                  : s->list_by_invoice ? "invoice"
                                       : "booked");
    }
    {
        char cls[32];
        xmlNodePtr banner;
        snprintf(cls, sizeof(cls), "status %s", status_name(st));
        banner = html_el_text(body, "div", cls, status_line(r));
        html_id(banner, "status");
        html_attr(banner, "data-status", status_name(st));
    }

    cards = html_el(body, "div", "cards");
    /* balance */
    card = html_el(cards, "div", "card");
    html_id(card, "balance");
    html_el_text(card, "h2", NULL, s->balanced ? "Balance: balanced" : "Balance: DOES NOT BALANCE");
    report_html_balance(r, card, "Day", "Total");
    /* drift */
    card = html_el(cards, "div", "card");
    html_id(card, "drift");
    snprintf(buf, sizeof(buf), "Drift: %lld", (long long)s->drift);
    html_el_text(card, "h2", NULL, buf);
    table = html_el(card, "table", "drift");
    for (int k = 0; k < REPORT_KIND__COUNT; k++) {
        if (!report_kind_is_drift((enum report_kind)k))
            continue;
        tr = html_el(table, "tr", s->counts[k] ? "nonzero" : "zero");
        html_el_text(tr, "th", NULL, kind_info[k].label);
        snprintf(id, sizeof(id), "count-%s", kind_info[k].id);
        count_cell(tr, id, s->counts[k]);
    }
    tr = html_el(table, "tr", "total");
    html_el_text(tr, "th", NULL, "total drift");
    count_cell(tr, "count-drift", s->drift);
    /* ERP side and hints */
    card = html_el(cards, "div", "card");
    html_id(card, "erp");
    html_el_text(card, "h2", NULL, "ERP and hints");
    table = html_el(card, "table", "erp");
    tr = html_el(table, "tr", NULL);
    html_el_text(tr, "th", NULL, "ERP records on the day");
    count_cell(tr, "count-erp-rows", s->erp_rows);
    tr = html_el(table, "tr", NULL);
    html_el_text(tr, "th", NULL, "with an apbot key");
    count_cell(tr, "count-erp-apbot-rows", s->erp_apbot_rows);
    tr = html_el(table, "tr", NULL);
    html_el_text(tr, "th", NULL, "matched");
    count_cell(tr, "count-matched", s->matched);
    for (int k = 0; k < REPORT_KIND__COUNT; k++) {
        if (report_kind_is_drift((enum report_kind)k))
            continue;
        tr = html_el(table, "tr", NULL);
        html_el_text(tr, "th", NULL, kind_info[k].label);
        snprintf(id, sizeof(id), "count-%s", kind_info[k].id);
        count_cell(tr, id, s->counts[k]);
    }

    report_html_money(r, body);
    report_html_chart(r, body);
    html_last_run(body, r);

    for (int k = 0; k < REPORT_KIND__COUNT; k++) {
        if (k == REPORT_EXCEPTION)
            html_exceptions(body, r);
        else if (k == REPORT_ORPHAN)
            html_orphans(body, r);
        else
            html_findings(body, r, k);
    }
    html_orphans_all(body, r);
}

const char *report_html_css(void)
{
    return html_css;
}

static int write_html(const struct report *r, FILE *out)
{
    const struct report_summary *s = report_summary(r);
    enum report_status st = report_status(r);
    struct html_doc d;
    xmlChar *mem;
    size_t size;
    char buf[256];
    int rc = APBOT_OK;

    html_doc_new(&d);
    snprintf(buf, sizeof(buf), "apbot reconciliation %s: %s", s->date, status_name(st));
    html_el_text(d.head, "title", NULL, buf);
    html_el_text(d.head, "style", NULL, html_css);
    report_html_body(r, html_el(d.html, "body", NULL));

    mem = html_doc_dump(&d, &size);
    if (!mem || fwrite(mem, 1, size, out) != size || ferror(out))
        rc = APBOT_E_IO;
    xmlFree(mem);
    return rc;
}

int report_write(const struct report *r, enum report_format fmt, FILE *out, char *err,
                 size_t errlen)
{
    int rc = APBOT_E_INVAL;

    switch (fmt) {
    case REPORT_FMT_TEXT:
        rc = write_text(r, out);
        break;
    case REPORT_FMT_CSV:
        rc = write_csv(r, out);
        break;
    case REPORT_FMT_JSON:
        rc = write_json(r, out);
        break;
    case REPORT_FMT_HTML:
        rc = write_html(r, out);
        break;
    }
    if (rc != APBOT_OK)
        return apbot_fail(err, errlen, rc, "writing the report: %s", apbot_strerror(rc));
    return APBOT_OK;
}
