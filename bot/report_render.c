/*
 * report_render.c - writes a built reconciliation report as text (terminal), CSV (one row
 * per finding, for a spreadsheet; libcsv quoting, formula-looking text neutralised), JSON
 * (jansson) or one self-contained HTML page built with libxml2's tree API, so every value
 * from an invoice or the ERP is a text node or attribute escaped by the serialiser. It reads
 * the report only through report.h; what the findings mean is decided in report.c.
 */
#include "apbot/report.h"

#include <csv.h>
#include <jansson.h>
#include <libxml/HTMLtree.h>
#include <libxml/tree.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/money.h"

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

static void text_finding(FILE *out, const struct report_finding *x)
{
    char amount[48], erp_amount[48], age[32];

    amount[0] = erp_amount[0] = '\0';
    if (x->has_amount)
        money_text(x->amount, x->exponent, amount, sizeof(amount));
    if (x->has_erp_amount)
        money_text(x->erp_amount, x->exponent, erp_amount, sizeof(erp_amount));
    if (x->item_id)
        fprintf(out, "  #%lld %s", (long long)x->item_id, nz(x->key));
    else
        fprintf(out, "  %s", nz(x->key));
    if (x->vendor_id)
        fprintf(out, "  vendor %s", x->vendor_id);
    if (x->vendor_name)
        fprintf(out, " (%s)", x->vendor_name);
    if (x->invoice_number)
        fprintf(out, "  invoice %s", x->invoice_number);
    if (x->has_amount)
        fprintf(out, "  %s %s", amount, nz(x->currency));
    if (x->kind == REPORT_PENDING) {
        report_format_age(x->age_ms, age, sizeof(age));
        fprintf(out, "  age %s", age);
    }
    fprintf(out, "\n      %s\n", nz(x->detail));
    if (x->command)
        fprintf(out, "      run: %s\n", x->command);
}

static int write_text(const struct report *r, FILE *out)
{
    const struct report_summary *s = report_summary(r);
    size_t n;
    const struct report_finding *f = report_findings(r, &n);
    char when[32];

    report_local_time(s->generated_at, "?", when, sizeof(when));
    fprintf(out, "apbot reconciliation report for %s (flow %s, generated %s)\n\n", s->date,
            nz(s->flow_name), when);
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

    fprintf(out,
            "ERP listing for %s: %lld records on %d page(s), %lld with an apbot key; "
            "matched %lld.\n\n",
            s->date, (long long)s->erp_rows, s->erp_pages, (long long)s->erp_apbot_rows,
            (long long)s->matched);

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
            bool *done = calloc(n ? n : 1, sizeof(*done));
            if (!done)
                abort();
            for (size_t i = 0; i < n; i++) {
                size_t count = 0, shown = 0;
                if (f[i].kind != REPORT_EXCEPTION || done[i])
                    continue;
                for (size_t j = i; j < n; j++)
                    if (f[j].kind == REPORT_EXCEPTION &&
                        strcmp(nz(f[j].reason), nz(f[i].reason)) == 0)
                        count++;
                fprintf(out, "  %s: %zu item(s):", f[i].reason ? f[i].reason : "(no reason)",
                        count);
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
        tmp = malloc(len + 2);
        if (!tmp)
            abort();
        tmp[0] = '\'';
        memcpy(tmp + 1, v, len + 1);
        v = tmp;
    }
    csv_fwrite(out, v, strlen(v));
    fputc(last ? '\n' : ',', out);
    free(tmp);
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

static int write_json(const struct report *r, FILE *out)
{
    const struct report_summary *s = report_summary(r);
    size_t n;
    const struct report_finding *f = report_findings(r, &n);
    json_t *root = json_object(), *bal = json_object(), *erp = json_object();
    json_t *counts = json_object(), *list = json_array();
    char amount[48];
    int rc;

    json_object_set_new(root, "date", json_string(s->date));
    json_object_set_new(root, "generated_at_ms", json_integer((json_int_t)s->generated_at));
    json_object_set_new(root, "flow", jstr(s->flow_name));
    json_object_set_new(root, "status", json_string(status_name(report_status(r))));
    json_object_set_new(bal, "day", jbalance(&s->day));
    json_object_set_new(bal, "total", jbalance(&s->total));
    json_object_set_new(bal, "balanced", json_boolean(s->balanced));
    json_object_set_new(root, "balance", bal);
    json_object_set_new(erp, "rows", json_integer((json_int_t)s->erp_rows));
    json_object_set_new(erp, "apbot_rows", json_integer((json_int_t)s->erp_apbot_rows));
    json_object_set_new(erp, "pages", json_integer(s->erp_pages));
    json_object_set_new(erp, "lookups", json_integer((json_int_t)s->lookups));
    json_object_set_new(root, "erp", erp);
    json_object_set_new(root, "matched", json_integer((json_int_t)s->matched));
    json_object_set_new(root, "drift", json_integer((json_int_t)s->drift));
    for (int k = 0; k < REPORT_KIND__COUNT; k++)
        json_object_set_new(counts, report_kind_name((enum report_kind)k),
                            json_integer((json_int_t)s->counts[k]));
    json_object_set_new(root, "counts", counts);
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
    ".meta{color:#666;margin-bottom:1em}"
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
    "code{background:#f4f4f4;padding:0 .3em;user-select:all}";

static xmlNodePtr el(xmlNodePtr parent, const char *name, const char *cls)
{
    xmlNodePtr n = xmlNewChild(parent, NULL, BAD_CAST name, NULL);
    if (!n)
        abort();
    if (cls)
        xmlNewProp(n, BAD_CAST "class", BAD_CAST cls);
    return n;
}

/* An element with escaped text content. */
static xmlNodePtr el_text(xmlNodePtr parent, const char *name, const char *cls, const char *text)
{
    xmlNodePtr n = el(parent, name, cls);
    if (text && *text)
        xmlAddChild(n, xmlNewText(BAD_CAST text));
    return n;
}

static void add_text(xmlNodePtr parent, const char *text)
{
    if (text && *text)
        xmlAddChild(parent, xmlNewText(BAD_CAST text));
}

static xmlNodePtr count_cell(xmlNodePtr tr, const char *id, int64_t v)
{
    char buf[32];
    xmlNodePtr td;
    snprintf(buf, sizeof(buf), "%lld", (long long)v);
    td = el_text(tr, "td", "count", buf);
    xmlNewProp(td, BAD_CAST "id", BAD_CAST id);
    return td;
}

static void html_findings(xmlNodePtr body, const struct report *r, int k)
{
    size_t n;
    const struct report_finding *f = report_findings(r, &n);
    const struct report_summary *s = report_summary(r);
    xmlNodePtr sec, table, tr;
    char id[64], buf[64];

    if (s->counts[k] == 0)
        return;
    sec = el(body, "section", report_kind_is_drift((enum report_kind)k) ? "drift" : "hint");
    snprintf(id, sizeof(id), "section-%s", kind_info[k].id);
    xmlNewProp(sec, BAD_CAST "id", BAD_CAST id);
    snprintf(buf, sizeof(buf), "%s (%lld)", kind_info[k].title, (long long)s->counts[k]);
    el_text(sec, "h2", NULL, buf);
    table = el(sec, "table", "findings");
    tr = el(table, "tr", NULL);
    {
        static const char *const cols[] = {"Item",   "Key",          "Vendor",      "Invoice",
                                           "Amount", "ERP amount",   "Doc (queue)", "Doc (ERP)",
                                           "Age",    "What it means"};
        for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++)
            el_text(tr, "th", NULL, cols[i]);
    }
    for (size_t i = 0; i < n; i++) {
        const struct report_finding *x = &f[i];
        xmlNodePtr td;
        char amount[96];

        if ((int)x->kind != k)
            continue;
        tr = el(table, "tr", "finding");
        xmlNewProp(tr, BAD_CAST "data-kind", BAD_CAST report_kind_name(x->kind));
        if (x->item_id) {
            snprintf(buf, sizeof(buf), "#%lld", (long long)x->item_id);
            el_text(tr, "td", "item", buf);
        } else {
            el_text(tr, "td", "item", "");
        }
        el_text(tr, "td", "key", x->key);
        td = el_text(tr, "td", "vendor", x->vendor_id);
        if (x->vendor_name) {
            xmlAddChild(td, xmlNewText(BAD_CAST " "));
            el_text(td, "span", "vendor-name", x->vendor_name);
        }
        el_text(tr, "td", "invoice", x->invoice_number);
        amount[0] = '\0';
        if (x->has_amount) {
            money_text(x->amount, x->exponent, buf, sizeof(buf));
            snprintf(amount, sizeof(amount), "%s %s", buf, nz(x->currency));
        }
        el_text(tr, "td", "amount", amount);
        amount[0] = '\0';
        if (x->has_erp_amount) {
            money_text(x->erp_amount, x->exponent, buf, sizeof(buf));
            snprintf(amount, sizeof(amount), "%s %s", buf, nz(x->currency));
        }
        el_text(tr, "td", "amount erp-amount", amount);
        el_text(tr, "td", "doc", x->doc);
        el_text(tr, "td", "erp-docs", x->erp_docs);
        buf[0] = '\0';
        if (x->item_id)
            report_format_age(x->age_ms, buf, sizeof(buf));
        el_text(tr, "td", "age", buf);
        td = el(tr, "td", "detail");
        if (x->kind == REPORT_EXCEPTION && x->reason)
            add_text(td, x->reason);
        else
            add_text(td, x->detail);
        if (x->command) {
            xmlAddChild(td, xmlNewText(BAD_CAST " Run: "));
            el_text(td, "code", "command", x->command);
        }
    }
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
    sec = el(body, "section", "hint");
    xmlNewProp(sec, BAD_CAST "id", BAD_CAST "section-exceptions");
    snprintf(buf, sizeof(buf), "%s (%lld)", kind_info[REPORT_EXCEPTION].title,
             (long long)s->counts[REPORT_EXCEPTION]);
    el_text(sec, "h2", NULL, buf);
    table = el(sec, "table", "exceptions");
    tr = el(table, "tr", NULL);
    el_text(tr, "th", NULL, "Reason");
    el_text(tr, "th", NULL, "Items");
    el_text(tr, "th", NULL, "Item ids");
    done = calloc(n ? n : 1, sizeof(*done));
    if (!done)
        abort();
    for (size_t i = 0; i < n; i++) {
        size_t count = 0;
        xmlNodePtr ids;
        if (f[i].kind != REPORT_EXCEPTION || done[i])
            continue;
        tr = el(table, "tr", "exception-group");
        el_text(tr, "td", "reason", f[i].reason ? f[i].reason : "(no reason)");
        for (size_t j = i; j < n; j++)
            if (f[j].kind == REPORT_EXCEPTION && strcmp(nz(f[j].reason), nz(f[i].reason)) == 0)
                count++;
        count_cell(tr, "", (int64_t)count);
        xmlUnsetProp(tr->last, BAD_CAST "id");
        ids = el(tr, "td", "ids");
        for (size_t j = i; j < n; j++)
            if (f[j].kind == REPORT_EXCEPTION && !done[j] &&
                strcmp(nz(f[j].reason), nz(f[i].reason)) == 0) {
                done[j] = true;
                snprintf(buf, sizeof(buf), "#%lld ", (long long)f[j].item_id);
                add_text(ids, buf);
            }
    }
    free(done);
}

static int write_html(const struct report *r, FILE *out)
{
    const struct report_summary *s = report_summary(r);
    enum report_status st = report_status(r);
    htmlDocPtr doc = htmlNewDocNoDtD(NULL, NULL);
    xmlNodePtr html, head, body, meta, table, tr, cards, card;
    xmlChar *mem = NULL;
    int size = 0;
    char buf[256], when[32], id[64];
    int rc = APBOT_OK;

    if (!doc)
        abort();
    xmlCreateIntSubset(doc, BAD_CAST "html", NULL, NULL);
    html = xmlNewNode(NULL, BAD_CAST "html");
    xmlDocSetRootElement(doc, html);
    xmlNewProp(html, BAD_CAST "lang", BAD_CAST "en");
    head = el(html, "head", NULL);
    meta = el(head, "meta", NULL);
    xmlNewProp(meta, BAD_CAST "http-equiv", BAD_CAST "Content-Type");
    xmlNewProp(meta, BAD_CAST "content", BAD_CAST "text/html; charset=UTF-8");
    snprintf(buf, sizeof(buf), "apbot reconciliation %s: %s", s->date, status_name(st));
    el_text(head, "title", NULL, buf);
    el_text(head, "style", NULL, html_css);

    body = el(html, "body", NULL);
    snprintf(buf, sizeof(buf), "Reconciliation report for %s", s->date);
    el_text(body, "h1", NULL, buf);
    report_local_time(s->generated_at, "?", when, sizeof(when));
    snprintf(buf, sizeof(buf), "Flow %s, generated %s", nz(s->flow_name), when);
    el_text(body, "div", "meta", buf);
    {
        char cls[32];
        xmlNodePtr banner;
        snprintf(cls, sizeof(cls), "status %s", status_name(st));
        banner = el_text(body, "div", cls, status_line(r));
        xmlNewProp(banner, BAD_CAST "id", BAD_CAST "status");
        xmlNewProp(banner, BAD_CAST "data-status", BAD_CAST status_name(st));
    }

    cards = el(body, "div", "cards");
    /* balance */
    card = el(cards, "div", "card");
    xmlNewProp(card, BAD_CAST "id", BAD_CAST "balance");
    el_text(card, "h2", NULL, s->balanced ? "Balance: balanced" : "Balance: DOES NOT BALANCE");
    table = el(card, "table", "balance");
    tr = el(table, "tr", NULL);
    el_text(tr, "th", NULL, "Items");
    el_text(tr, "th", NULL, "Day");
    el_text(tr, "th", NULL, "Total");
    for (size_t i = 0; i < sizeof(balance_rows) / sizeof(balance_rows[0]); i++) {
        tr = el(table, "tr", NULL);
        el_text(tr, "th", NULL, balance_rows[i].label);
        snprintf(id, sizeof(id), "count-%s-day", balance_rows[i].id);
        count_cell(tr, id, balance_get(&s->day, balance_rows[i].offset));
        snprintf(id, sizeof(id), "count-%s-total", balance_rows[i].id);
        count_cell(tr, id, balance_get(&s->total, balance_rows[i].offset));
    }
    /* drift */
    card = el(cards, "div", "card");
    xmlNewProp(card, BAD_CAST "id", BAD_CAST "drift");
    snprintf(buf, sizeof(buf), "Drift: %lld", (long long)s->drift);
    el_text(card, "h2", NULL, buf);
    table = el(card, "table", "drift");
    for (int k = 0; k < REPORT_KIND__COUNT; k++) {
        if (!report_kind_is_drift((enum report_kind)k))
            continue;
        tr = el(table, "tr", s->counts[k] ? "nonzero" : "zero");
        el_text(tr, "th", NULL, kind_info[k].label);
        snprintf(id, sizeof(id), "count-%s", kind_info[k].id);
        count_cell(tr, id, s->counts[k]);
    }
    tr = el(table, "tr", "total");
    el_text(tr, "th", NULL, "total drift");
    count_cell(tr, "count-drift", s->drift);
    /* ERP side and hints */
    card = el(cards, "div", "card");
    xmlNewProp(card, BAD_CAST "id", BAD_CAST "erp");
    el_text(card, "h2", NULL, "ERP and hints");
    table = el(card, "table", "erp");
    tr = el(table, "tr", NULL);
    el_text(tr, "th", NULL, "ERP records on the day");
    count_cell(tr, "count-erp-rows", s->erp_rows);
    tr = el(table, "tr", NULL);
    el_text(tr, "th", NULL, "with an apbot key");
    count_cell(tr, "count-erp-apbot-rows", s->erp_apbot_rows);
    tr = el(table, "tr", NULL);
    el_text(tr, "th", NULL, "matched");
    count_cell(tr, "count-matched", s->matched);
    for (int k = 0; k < REPORT_KIND__COUNT; k++) {
        if (report_kind_is_drift((enum report_kind)k))
            continue;
        tr = el(table, "tr", NULL);
        el_text(tr, "th", NULL, kind_info[k].label);
        snprintf(id, sizeof(id), "count-%s", kind_info[k].id);
        count_cell(tr, id, s->counts[k]);
    }

    for (int k = 0; k < REPORT_KIND__COUNT; k++) {
        if (k == REPORT_EXCEPTION)
            html_exceptions(body, r);
        else
            html_findings(body, r, k);
    }

    htmlDocDumpMemoryFormat(doc, &mem, &size, 1);
    if (!mem || size <= 0 || fwrite(mem, 1, (size_t)size, out) != (size_t)size || ferror(out))
        rc = APBOT_E_IO;
    xmlFree(mem);
    xmlFreeDoc(doc);
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
