/*
 * test_sim_classic.c - the simulator's classic UI (--ui classic) over real HTTP on loopback:
 * the login by GET + HTTP Basic (ok, bad credentials, unknown company), Basic + cookie on every
 * request (401 on old screens, 303 to /login.pl on new ones without a live session), the add
 * form (buttons named action, value=label selects), update (resolves the vendor, due date,
 * one more line row, a fresh one-time form_id), save (a draft with its lines, the document
 * number in the answer), the edit page (reference, total, status, approve only for drafts),
 * approve (posted; the answer names no document, as a message or a redirect; by the id alone,
 * without the edit page), a closed period (closed_to: the Save button left out after update),
 * the vendor picker (a number that begins several vendors' numbers), the validation
 * errors (HTTP 500 <h2 class="error">), the prefix search that cannot show the reference and
 * stops at 100 rows, the listing by invoice date over a range, commit faults on save and
 * approve, and reposts of booked references. Each test runs its own in-process simulator.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "helpers/sim_client.h"
#include "sim.h"

static const char fast[] = "slots = 4\n"
                           "service_ms.login = 0\n"
                           "service_ms.form = 0\n"
                           "service_ms.check = 0..1\n"
                           "service_ms.post = 0..1\n"
                           "service_ms.search = 0\n"
                           "service_ms.journal = 0\n"
                           "index_lag_ms = 0\n"
                           "stall_ms = 300\n"
                           "late_commit_ms = 200\n";

struct fx {
    struct sim *sim;
    unsigned short port;
    struct simc_session *ss;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    struct sim_options opt = {
        .port = 0, .scenario_text = fast, .seed = 13, .admin = true, .ui = SIM_UI_CLASSIC};
    char err[256];
    if (!f || sim_start(&opt, &f->sim, err, sizeof err)) {
        fprintf(stderr, "sim_start: %s\n", err);
        free(f);
        return -1;
    }
    f->port = sim_port(f->sim);
    f->ss = simc_session_new(f->port, 5000);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    simc_session_free(f->ss);
    sim_stop(f->sim);
    free(f);
    return 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void login(struct fx *f)
{
    assert_int_equal(simc_classic_login(f->ss, "clerk", "acme-demo"), 0);
}

/* The text of <h2 class="error"> of the last answer, which must be an HTTP 500. */
static void assert_error(struct fx *f, long status, const char *expected)
{
    char want[512];
    assert_int_equal(status, 500);
    snprintf(want, sizeof want, "<h2 class=\"error\">%s</h2>", expected);
    if (!strstr(simc_body(f->ss), want))
        fail_msg("expected %s in:\n%.600s", want, simc_body(f->ss));
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* Appends "&" and fmt to a malloc'd form body. */
static char *cat(char *body, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *cat(char *body, const char *fmt, ...)
{
    char more[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(more, sizeof more, fmt, ap);
    va_end(ap);
    size_t old = body ? strlen(body) : 0, n = old + strlen(more) + 2;
    char *out = realloc(body, n);
    assert_non_null(out);
    snprintf(out + old, n - old, "%s%s", old ? "&" : "", more);
    return out;
}

/* Submits the form of the last page (its hidden fields) plus `fields`, pressing `action`. */
static long submit(struct fx *f, const char *fields, const char *action)
{
    long status = 0;
    char *body = simc_hidden_form(simc_body(f->ss));
    assert_non_null(body);
    if (fields && *fields)
        body = cat(body, "%s", fields);
    body = cat(body, "action=%s", action);
    assert_int_equal(simc_post(f->ss, "/ap.pl", body, &status), 0);
    free(body);
    return status;
}

/* The header fields of a standard invoice (vendor 100001, EUR, 11/03/2026). */
static void header(char *dst, size_t len, const char *invnumber, const char *ponumber)
{
    char *inv = simc_escape(invnumber), *po = simc_escape(ponumber);
    snprintf(dst, len,
             "vendor=100001&currency=EUR&doctype=Invoice&invnumber=%s&ponumber=%s"
             "&transdate=11%%2F03%%2F2026&duedate=&notes=classic+test",
             inv, po);
    free(inv);
    free(po);
}

static const char line1[] = "account_1=5700--Office+Supplies&amount_1=1%2C000.00"
                            "&description_1=Paper";
static const char line2[] = "account_2=6000--General+Expenses&amount_2=34.56&description_2=Toner";

/* Add form -> update -> (update with line 2) -> save: returns the save's status; the answer is
 * in the session. Two lines and tax 200.00: 1,234.56 in all. */
static long enter_and_save(struct fx *f, const char *invnumber, const char *ponumber)
{
    long status = 0;
    char head[512], fields[2048];
    header(head, sizeof head, invnumber, ponumber);
    assert_int_equal(simc_get(f->ss, "/ap.pl?action=add", &status), 0);
    assert_int_equal(status, 200);
    snprintf(fields, sizeof fields, "%s&%s", head, line1);
    assert_int_equal(submit(f, fields, "update"), 200);
    snprintf(fields, sizeof fields, "%s&%s&%s&tax=200.00&invtotal=1%%2C234.56", head, line1, line2);
    assert_int_equal(submit(f, fields, "update"), 200);
    return submit(f, fields, "save");
}

/* The document number of a save's answer. */
static void saved_doc(struct fx *f, char *doc, size_t len)
{
    const char *p = strstr(simc_body(f->ss), "<p class=\"info\">Invoice ");
    assert_non_null(p);
    p += strlen("<p class=\"info\">Invoice ");
    const char *e = strstr(p, " saved as draft</p>");
    assert_non_null(e);
    assert_true((size_t)(e - p) < len);
    snprintf(doc, len, "%.*s", (int)(e - p), p);
    assert_int_equal(strlen(doc), strlen("AP-2026-000001"));
}

/* ---- login and sessions ------------------------------------------------------------------ */

static void test_sim_classic_login(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char *body = NULL, *headers = NULL;
    /* a good login: text/plain "Success" and a session cookie */
    struct simc_session *ss = f->ss;
    simc_session_basic(ss, "clerk", "acme-demo");
    assert_int_equal(simc_get(ss, "/login.pl?action=authenticate&company=ACME", &status), 0);
    assert_int_equal(status, 200);
    assert_string_equal(simc_body(ss), "Success\n");
    char v[256];
    assert_int_equal(simc_last_header(ss, "Content-Type", v, sizeof v), 0);
    assert_string_equal(v, "text/plain; charset=utf-8");
    assert_int_equal(simc_last_header(ss, "Set-Cookie", v, sizeof v), 0);
    assert_true(strncmp(v, "LEDGER_SESSION=", 15) == 0);
    assert_non_null(strstr(v, "; Path=/; HttpOnly"));
    assert_int_equal(simc_get(ss, "/ap.pl?action=add", &status), 0);
    assert_int_equal(status, 200);

    /* bad Basic: 401 text/plain with a challenge, no cookie */
    simc_session_basic(ss, "clerk", "wrong");
    assert_int_equal(simc_get(ss, "/login.pl?action=authenticate&company=ACME", &status), 0);
    assert_int_equal(status, 401);
    assert_int_equal(simc_last_header(ss, "WWW-Authenticate", v, sizeof v), 0);
    assert_non_null(strstr(v, "Basic"));
    assert_int_equal(simc_last_header(ss, "Set-Cookie", v, sizeof v), -1);
    assert_int_not_equal(simc_classic_login(ss, "nobody", "acme-demo"), 0);
    /* no Basic at all, or an unknown company */
    assert_int_equal(simc_request(f->port, "GET", "/login.pl?action=authenticate&company=ACME",
                                  NULL, 5000, &status, &body),
                     0);
    assert_int_equal(status, 401);
    free(body);
    simc_session_basic(ss, "clerk", "acme-demo");
    assert_int_equal(simc_get(ss, "/login.pl?action=authenticate&company=OTHER", &status), 0);
    assert_int_equal(status, 401);
    /* the login page itself needs nothing */
    assert_int_equal(
        simc_request_headers(f->port, "GET", "/login.pl", NULL, 5000, &status, &body, &headers), 0);
    assert_int_equal(status, 200);
    assert_non_null(strstr(body, "action=authenticate&amp;company=ACME"));
    free(body);
    free(headers);
    /* the session of the good login still works; logout ends it */
    assert_int_equal(simc_get(ss, "/ap.pl?action=add", &status), 0);
    assert_int_equal(status, 200);
    assert_int_equal(simc_get(ss, "/login.pl?action=logout", &status), 0);
    assert_int_equal(status, 200);
    assert_int_equal(simc_get(ss, "/ap.pl?action=add", &status), 0);
    assert_int_equal(status, 401);
    assert_int_equal(simc_stat(f->port, "login"), 6);
}

/* Without a live session the old screens answer 401, the new ones 303 to /login.pl; without
 * Basic every screen answers 401, even with a live cookie. */
static void test_sim_classic_no_session(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char loc[256];
    simc_session_basic(f->ss, "clerk", "acme-demo"); /* Basic but no cookie */
    assert_int_equal(simc_get(f->ss, "/ap.pl?action=add", &status), 0);
    assert_int_equal(status, 401);
    assert_null(strstr(simc_body(f->ss), "name=\"invoice\""));
    assert_int_equal(simc_post(f->ss, "/ap.pl", "action=save&ponumber=AP1-NS", &status), 0);
    assert_int_equal(status, 401);
    assert_int_equal(simc_get(f->ss, "/app/ap/search?reference=AP1", &status), 0);
    assert_int_equal(status, 303);
    assert_int_equal(simc_last_header(f->ss, "Location", loc, sizeof loc), 0);
    assert_string_equal(loc, "/login.pl");
    assert_int_equal(simc_get(f->ss, "/app/ap/list", &status), 0);
    assert_int_equal(status, 303);

    login(f);
    assert_int_equal(simc_get(f->ss, "/app/ap/search?reference=AP1", &status), 0);
    assert_int_equal(status, 200);
    simc_session_basic(f->ss, NULL, NULL); /* the cookie without Basic */
    assert_int_equal(simc_get(f->ss, "/app/ap/search?reference=AP1", &status), 0);
    assert_int_equal(status, 401);
    assert_int_equal(simc_get(f->ss, "/ap.pl?action=add", &status), 0);
    assert_int_equal(status, 401);

    /* a session ends after session_max_requests requests */
    assert_int_equal(simc_set(f->port, "session_max_requests", "2"), 0);
    login(f);
    assert_int_equal(simc_get(f->ss, "/ap.pl?action=add", &status), 0);
    assert_int_equal(status, 200);
    assert_int_equal(simc_get(f->ss, "/app/ap/list", &status), 0);
    assert_int_equal(status, 200);
    assert_int_equal(simc_get(f->ss, "/app/ap/list", &status), 0);
    assert_int_equal(status, 303);
    assert_int_equal(simc_get(f->ss, "/ap.pl?action=add", &status), 0);
    assert_int_equal(status, 401);
    assert_int_equal(simc_count_rows(f->port), 0);
}

/* ---- entry -------------------------------------------------------------------------------- */

static void test_sim_classic_add_form(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char v[128];
    login(f);
    assert_int_equal(simc_get(f->ss, "/ap.pl?action=add", &status), 0);
    const char *html = simc_body(f->ss);
    assert_non_null(strstr(html, "<form method=\"post\" name=\"invoice\" action=\"/ap.pl\">"));
    assert_int_equal(simc_field(html, "form_id", v, sizeof v), 0);
    assert_int_equal(strlen(v), 24);
    assert_int_equal(simc_field(html, "rowcount", v, sizeof v), 0);
    assert_string_equal(v, "1");
    static const char *const names[] = {"vendor",    "vendor_id",    "invnumber", "ponumber",
                                        "transdate", "duedate",      "tax",       "invtotal",
                                        "amount_1",  "description_1"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        assert_int_equal(simc_field(html, names[i], v, sizeof v), 0);
    assert_int_equal(simc_field(html, "amount_2", v, sizeof v), -1);
    /* selects: value = label */
    assert_non_null(strstr(html, "<select name=\"account_1\">"));
    assert_non_null(
        strstr(html, "<option value=\"5700--Office Supplies\">5700--Office Supplies</option>"));
    assert_non_null(strstr(html, "<option value=\"4001--Materials\">4001--Materials</option>"));
    assert_null(strstr(html, "<option value=\"7000--"));
    assert_non_null(strstr(html, "<option value=\"EUR\" selected>EUR</option>"));
    assert_non_null(strstr(html, "<option value=\"Credit Note\">Credit Note</option>"));
    /* every button is named action */
    assert_int_equal(count(html, "<button "), 2);
    assert_int_equal(count(html, "name=\"action\" value=\"update\""), 1);
    assert_int_equal(count(html, "name=\"action\" value=\"save\""), 1);
    assert_int_equal(count(html, "<input type=\"submit\""), 0);
}

/* update resolves the vendor (name shown, internal id hidden, due date computed), keeps what was
 * typed, adds one empty row after the last filled one and hands out a fresh form_id; the old
 * form_id is used up. */
static void test_sim_classic_update(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char head[512], fields[2048], old_id[64], v[256];
    login(f);
    header(head, sizeof head, "INV-U", "AP1-UPDATE");
    assert_int_equal(simc_get(f->ss, "/ap.pl?action=add", &status), 0);
    assert_int_equal(simc_field(simc_body(f->ss), "form_id", old_id, sizeof old_id), 0);
    snprintf(fields, sizeof fields, "%s&%s", head, line1);
    char *first = simc_hidden_form(simc_body(f->ss));
    assert_int_equal(submit(f, fields, "update"), 200);
    const char *html = simc_body(f->ss);
    assert_int_equal(simc_by_id(html, "vendorName", v, sizeof v), 0);
    assert_string_equal(v, "Nordwind Bürobedarf GmbH");
    assert_int_equal(simc_field(html, "vendor_id", v, sizeof v), 0);
    assert_string_equal(v, "V-000001");
    assert_int_equal(simc_field(html, "vendor", v, sizeof v), 0);
    assert_string_equal(v, "100001");
    assert_int_equal(simc_field(html, "duedate", v, sizeof v), 0);
    assert_string_equal(v, "12/03/2026"); /* 30 days of payment terms */
    assert_int_equal(simc_field(html, "ponumber", v, sizeof v), 0);
    assert_string_equal(v, "AP1-UPDATE");
    assert_int_equal(simc_field(html, "rowcount", v, sizeof v), 0);
    assert_string_equal(v, "2");
    assert_non_null(strstr(html, "<option value=\"5700--Office Supplies\" selected>"));
    assert_int_equal(simc_field(html, "amount_1", v, sizeof v), 0);
    assert_string_equal(v, "1,000.00");
    assert_int_equal(simc_field(html, "amount_2", v, sizeof v), 0);
    assert_string_equal(v, "");
    assert_non_null(strstr(html, "<select name=\"account_2\">\n<option value=\"\" selected>"));
    assert_int_equal(simc_field(html, "form_id", v, sizeof v), 0);
    assert_string_not_equal(v, old_id);
    /* the total it computed: the rows as entered, no tax yet */
    assert_int_equal(simc_by_id(html, "computedTotal", v, sizeof v), 0);
    assert_string_equal(v, "1,000.00");
    /* the second row filled: a third appears; the total adds the row and the tax */
    snprintf(fields, sizeof fields, "%s&%s&%s&tax=200.00", head, line1, line2);
    assert_int_equal(submit(f, fields, "update"), 200);
    assert_int_equal(simc_field(simc_body(f->ss), "rowcount", v, sizeof v), 0);
    assert_string_equal(v, "3");
    assert_int_equal(simc_field(simc_body(f->ss), "amount_3", v, sizeof v), 0);
    assert_int_equal(simc_by_id(simc_body(f->ss), "computedTotal", v, sizeof v), 0);
    assert_string_equal(v, "1,234.56");
    /* a tax that does not read: no total shown */
    snprintf(fields, sizeof fields, "%s&%s&tax=12%%2C3", head, line1);
    assert_int_equal(submit(f, fields, "update"), 200);
    assert_int_equal(simc_by_id(simc_body(f->ss), "computedTotal", v, sizeof v), -1);
    /* the first page's form_id again: refused, nothing booked */
    char *reuse = cat(first, "%s&action=save", fields);
    assert_int_equal(simc_post(f->ss, "/ap.pl", reuse, &status), 0);
    free(reuse);
    assert_error(f, status, "This form has expired or was already submitted.");
    assert_int_equal(simc_count_rows(f->port), 0);
    assert_int_equal(simc_stat(f->port, "update"), 3);
}

/* save books a draft with its lines; the answer names the document; the form_id of the saved
 * form cannot save again. */
static void test_sim_classic_save_draft(void **state)
{
    struct fx *f = *state;
    char doc[32], status_text[16], row[256];
    login(f);
    assert_int_equal(enter_and_save(f, "INV-S", "AP1-SAVE"), 200);
    saved_doc(f, doc, sizeof doc);
    assert_int_equal(simc_doc_status(f->port, doc, status_text, sizeof status_text), 0);
    assert_string_equal(status_text, "draft");
    char *csv = NULL;
    assert_int_equal(simc_ledger(f->port, &csv), 0);
    snprintf(row, sizeof row, "\n%s,100001,INV-S,2026-11-03,EUR,1234.56,AP1-SAVE,", doc);
    assert_non_null(strstr(csv, row));
    free(csv);
    assert_int_equal(simc_lines(f->port, &csv), 0);
    snprintf(row, sizeof row,
             "doc,line,gl_account,amount,description\n%s,1,5700,1000.00,Paper\n"
             "%s,2,6000,34.56,Toner\n",
             doc, doc);
    assert_string_equal(csv, row);
    free(csv);
    assert_int_equal(simc_stat(f->port, "drafts"), 1);
    assert_int_equal(simc_stat(f->port, "bookings"), 1);
}

/* The edit page shows the reference, vendor, total and status; a draft has an approve button,
 * approve posts it and answers without the document number; the posted document has none. */
static void test_sim_classic_edit_and_approve(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char doc[32], path[96], v[128], st[16];
    login(f);
    assert_int_equal(enter_and_save(f, "INV-A", "AP1-APPROVE"), 200);
    saved_doc(f, doc, sizeof doc);
    snprintf(path, sizeof path, "/ap.pl?action=edit&id=%s", doc);
    assert_int_equal(simc_get(f->ss, path, &status), 0);
    assert_int_equal(status, 200);
    const char *html = simc_body(f->ss);
    assert_non_null(strstr(html, "name=\"invoice\""));
    assert_int_equal(simc_field(html, "ponumber", v, sizeof v), 0);
    assert_string_equal(v, "AP1-APPROVE");
    assert_int_equal(simc_field(html, "vendor", v, sizeof v), 0);
    assert_string_equal(v, "100001");
    assert_int_equal(simc_by_id(html, "total", v, sizeof v), 0);
    assert_string_equal(v, "1,234.56");
    assert_int_equal(simc_by_id(html, "status", v, sizeof v), 0);
    assert_string_equal(v, "draft");
    assert_int_equal(count(html, "name=\"action\" value=\"approve\""), 1);
    assert_non_null(strstr(html, "<td class=\"account\">6000--General Expenses</td>"));

    assert_int_equal(submit(f, NULL, "approve"), 200);
    html = simc_body(f->ss);
    assert_non_null(strstr(html, "<p class=\"info\">Draft Posted</p>"));
    assert_null(strstr(html, doc));
    assert_null(strstr(html, "AP-2026-"));
    assert_int_equal(simc_doc_status(f->port, doc, st, sizeof st), 0);
    assert_string_equal(st, "posted");
    assert_int_equal(simc_stat(f->port, "approvals"), 1);

    assert_int_equal(simc_get(f->ss, path, &status), 0);
    html = simc_body(f->ss);
    assert_int_equal(simc_by_id(html, "status", v, sizeof v), 0);
    assert_string_equal(v, "posted");
    assert_null(strstr(html, "value=\"approve\""));
    assert_int_equal(simc_field(html, "form_id", v, sizeof v), -1);
    /* approving it again (by its id alone): refused, it is posted */
    snprintf(path, sizeof path, "id=%s&action=approve", doc);
    assert_int_equal(simc_post(f->ss, "/ap.pl", path, &status), 0);
    snprintf(v, sizeof v, "Transaction %s is already approved.", doc);
    assert_error(f, status, v);
    /* an unknown document */
    assert_int_equal(simc_get(f->ss, "/ap.pl?action=edit&id=AP-1999-000001", &status), 0);
    assert_error(f, status, "Transaction not found: AP-1999-000001");
    assert_int_equal(simc_count_rows(f->port), 1);
}

/* approve_answer = redirect: 303 to an empty add form; mixed: either, never a document. */
static void test_sim_classic_approve_redirect(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char doc[32], path[96], loc[256];
    login(f);
    assert_int_equal(simc_set(f->port, "approve_answer", "redirect"), 0);
    assert_int_equal(enter_and_save(f, "INV-R", "AP1-REDIRECT"), 200);
    saved_doc(f, doc, sizeof doc);
    snprintf(path, sizeof path, "/ap.pl?action=edit&id=%s", doc);
    assert_int_equal(simc_get(f->ss, path, &status), 0);
    assert_int_equal(submit(f, NULL, "approve"), 303);
    assert_int_equal(simc_last_header(f->ss, "Location", loc, sizeof loc), 0);
    assert_string_equal(loc, "/ap.pl?action=add");
    assert_null(strstr(simc_body(f->ss), doc));
    assert_int_equal(simc_doc_status(f->port, doc, loc, sizeof loc), 0);
    assert_string_equal(loc, "posted");
    /* the redirect's target is an empty add form */
    assert_int_equal(simc_get(f->ss, "/ap.pl?action=add", &status), 0);
    assert_int_equal(simc_field(simc_body(f->ss), "ponumber", loc, sizeof loc), 0);
    assert_string_equal(loc, "");

    assert_int_equal(simc_set(f->port, "approve_answer", "mixed"), 0);
    int redirects = 0, messages = 0;
    for (int i = 0; i < 8; i++) {
        char inv[32], ref[32];
        snprintf(inv, sizeof inv, "INV-M%d", i);
        snprintf(ref, sizeof ref, "AP1-MIXED-%d", i);
        assert_int_equal(enter_and_save(f, inv, ref), 200);
        saved_doc(f, doc, sizeof doc);
        snprintf(path, sizeof path, "/ap.pl?action=edit&id=%s", doc);
        assert_int_equal(simc_get(f->ss, path, &status), 0);
        status = submit(f, NULL, "approve");
        assert_null(strstr(simc_body(f->ss), doc));
        if (status == 303)
            redirects++;
        else if (status == 200 && strstr(simc_body(f->ss), "Draft Posted"))
            messages++;
    }
    assert_int_equal(redirects + messages, 8);
    assert_int_equal(simc_stat(f->port, "approvals"), 9);
    assert_int_equal(simc_stat(f->port, "drafts"), 0);
    assert_int_equal(simc_set(f->port, "approve_answer", "sometimes"), -1);
}

/* The approve needs the document's id alone (no edit page first): a draft approved by
 * `id=DOC&action=approve`; a form_id it carries must be live; a second approve is refused. */
static void test_sim_classic_approve_by_id(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char doc[32], body[160], st[16], msg[96];
    login(f);
    assert_int_equal(enter_and_save(f, "INV-ID", "AP1-BYID"), 200);
    saved_doc(f, doc, sizeof doc);
    /* a form_id that is not live: refused, still a draft */
    snprintf(body, sizeof body, "id=%s&form_id=000000000000000000000000&action=approve", doc);
    assert_int_equal(simc_post(f->ss, "/ap.pl", body, &status), 0);
    assert_error(f, status, "This form has expired or was already submitted.");
    assert_int_equal(simc_doc_status(f->port, doc, st, sizeof st), 0);
    assert_string_equal(st, "draft");
    /* the id alone */
    snprintf(body, sizeof body, "action=approve&id=%s", doc);
    assert_int_equal(simc_post(f->ss, "/ap.pl", body, &status), 0);
    assert_int_equal(status, 200);
    assert_non_null(strstr(simc_body(f->ss), "<p class=\"info\">Draft Posted</p>"));
    assert_int_equal(simc_doc_status(f->port, doc, st, sizeof st), 0);
    assert_string_equal(st, "posted");
    assert_int_equal(simc_post(f->ss, "/ap.pl", body, &status), 0);
    snprintf(msg, sizeof msg, "Transaction %s is already approved.", doc);
    assert_error(f, status, msg);
    assert_int_equal(simc_stat(f->port, "approvals"), 1);
    assert_int_equal(simc_stat(f->port, "edit"), 0); /* no page was fetched for it */
}

/* closed_to closes the books through a date: every entry form carries it hidden (closedto);
 * update of an invoice dated on or before it answers the form without its Save button and no
 * word why; a save of it is refused; a later date keeps Save. */
static void test_sim_classic_closed_period(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char fields[2048], v[64];
    login(f);
    assert_int_equal(simc_get(f->ss, "/ap.pl?action=add", &status), 0);
    assert_int_equal(simc_field(simc_body(f->ss), "closedto", v, sizeof v), 0);
    assert_string_equal(v, ""); /* no period closed */
    assert_int_equal(simc_set(f->port, "closed_to", "2026-10-31"), 0);
    assert_int_equal(simc_set(f->port, "closed_to", "10/31/2026"), -1);
    assert_int_equal(simc_get(f->ss, "/ap.pl?action=add", &status), 0);
    const char *html = simc_body(f->ss);
    assert_int_equal(simc_field(html, "closedto", v, sizeof v), 0);
    assert_string_equal(v, "10/31/2026");
    assert_int_equal(count(html, "name=\"action\" value=\"save\""), 1); /* no date yet */
    /* dated 10/31/2026, the closing day itself: no Save button, no message */
    snprintf(fields, sizeof fields,
             "vendor=100001&currency=EUR&doctype=Invoice&invnumber=INV-C&ponumber=AP1-CLOSED"
             "&transdate=10%%2F31%%2F2026&%s",
             line1);
    assert_int_equal(submit(f, fields, "update"), 200);
    html = simc_body(f->ss);
    assert_non_null(strstr(html, "name=\"invoice\""));
    assert_int_equal(count(html, "name=\"action\" value=\"save\""), 0);
    assert_int_equal(count(html, "name=\"action\" value=\"update\""), 1);
    assert_null(strstr(html, "class=\"error\""));
    assert_null(strstr(html, "period"));
    assert_int_equal(simc_field(html, "closedto", v, sizeof v), 0);
    assert_string_equal(v, "10/31/2026");
    assert_int_equal(simc_field(html, "vendor_id", v, sizeof v), 0);
    assert_string_equal(v, "V-000001"); /* resolved all the same */
    /* pressing Save anyway (the button is not there, the request is): refused */
    assert_int_equal(submit(f, fields, "save"), 500);
    assert_error(f, 500, "Cannot save a transaction for a closed period (10/2026).");
    assert_int_equal(simc_count_rows(f->port), 0);
    /* dated 11/01/2026: Save is back */
    assert_int_equal(simc_get(f->ss, "/ap.pl?action=add", &status), 0);
    snprintf(fields, sizeof fields,
             "vendor=100001&currency=EUR&doctype=Invoice&invnumber=INV-O&ponumber=AP1-OPEN"
             "&transdate=11%%2F01%%2F2026&%s",
             line1);
    assert_int_equal(submit(f, fields, "update"), 200);
    assert_int_equal(count(simc_body(f->ss), "name=\"action\" value=\"save\""), 1);
    assert_int_equal(submit(f, fields, "save"), 200);
    assert_int_equal(simc_count_rows(f->port), 1);
    /* off: nothing closed beyond the master data's periods */
    assert_int_equal(simc_set(f->port, "closed_to", "off"), 0);
    assert_int_equal(simc_get(f->ss, "/ap.pl?action=add", &status), 0);
    assert_int_equal(simc_field(simc_body(f->ss), "closedto", v, sizeof v), 0);
    assert_string_equal(v, "");
}

/* A vendor typed that begins several vendors' numbers and is none of them: update answers a
 * "select one of these" page (no invoice form) carrying what was typed; Continue with a pick
 * resolves that vendor. An exact number, and a prefix of one vendor only, are as before. */
static void test_sim_classic_vendor_picker(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char fields[2048], v[128];
    login(f);
    assert_int_equal(simc_get(f->ss, "/ap.pl?action=add", &status), 0);
    snprintf(fields, sizeof fields,
             "vendor=10002&currency=EUR&doctype=Invoice&invnumber=INV-P&ponumber=AP1-PICK"
             "&transdate=11%%2F03%%2F2026&%s",
             line1);
    assert_int_equal(submit(f, fields, "update"), 200);
    const char *html = simc_body(f->ss);
    assert_non_null(strstr(html, "<th class=\"listtop\">Select Vendor</th>"));
    assert_null(strstr(html, "name=\"invoice\""));
    assert_int_equal(count(html, "name=\"vendor_pick\""), 10); /* 100020 .. 100029 */
    assert_non_null(strstr(html, "<td class=\"number\">100021</td>"));
    assert_int_equal(count(html, "name=\"action\" value=\"continue\""), 1);
    assert_int_equal(simc_field(html, "ponumber", v, sizeof v), 0);
    assert_string_equal(v, "AP1-PICK");
    assert_int_equal(simc_field(html, "account_1", v, sizeof v), 0);
    assert_string_equal(v, "5700--Office Supplies");
    /* Continue with 100021: the entry form, that vendor resolved, what was typed kept */
    assert_int_equal(submit(f, "vendor_pick=100021", "continue"), 200);
    html = simc_body(f->ss);
    assert_non_null(strstr(html, "name=\"invoice\""));
    assert_int_equal(simc_field(html, "vendor_id", v, sizeof v), 0);
    assert_string_equal(v, "V-000021");
    assert_int_equal(simc_field(html, "vendor", v, sizeof v), 0);
    assert_string_equal(v, "100021");
    assert_int_equal(simc_field(html, "ponumber", v, sizeof v), 0);
    assert_string_equal(v, "AP1-PICK");
    assert_int_equal(count(html, "name=\"action\" value=\"save\""), 1);
    /* a prefix of one vendor's number only, and a number no vendor begins: not on file */
    assert_int_equal(simc_get(f->ss, "/ap.pl?action=add", &status), 0);
    assert_int_equal(submit(f, "vendor=10009", "update"), 500);
    assert_error(f, 500, "Vendor not on file: 10009");
    assert_int_equal(simc_get(f->ss, "/ap.pl?action=add", &status), 0);
    assert_int_equal(submit(f, "vendor=1000999", "update"), 500);
    assert_error(f, 500, "Vendor not on file: 1000999");
    assert_int_equal(simc_count_rows(f->port), 0);
}

/* ---- validation --------------------------------------------------------------------------- */

/* Every save check: HTTP 500 with its <h2 class="error">, nothing booked. */
static void test_sim_classic_validation(void **state)
{
    struct fx *f = *state;
    long status = 0;
    static const struct {
        const char *fields; /* replaces the standard ones where given */
        const char *error;
    } cases[] = {
        {"vendor=&vendor_id=V-000001", "Vendor missing!"},
        {"vendor=100099&vendor_id=V-000099", "Vendor not on file: 100099"},
        {"vendor=100090&vendor_id=V-000090", "Vendor 100090 is on hold."},
        {"vendor=100002&vendor_id=V-000001", "Vendor not resolved: press Update first."},
        {"invnumber=", "Invoice Number missing!"},
        {"transdate=", "Invoice Date missing!"},
        {"transdate=13%2F01%2F2026", "Invalid date: 13/01/2026"},
        {"transdate=2026-11-03", "Invalid date: 2026-11-03"},
        {"duedate=12%2F32%2F2026", "Invalid date: 12/32/2026"},
        {"doctype=Bill", "Invalid document type: Bill"},
        {"currency=", "Currency missing!"},
        {"currency=XXX", "Currency XXX not available."},
        {"account_1=", "Account missing in line 1!"},
        {"account_1=5700", "Account not on file: 5700"},
        {"account_1=5700--Office", "Account not on file: 5700--Office"},
        {"account_1=1000--Account", "Account not on file: 1000--Account"},
        {"amount_1=", "Amount missing in line 1!"},
        {"amount_1=1.000%2C00", "Invalid amount 1.000,00 in line 1."},
        {"amount_1=1000.001", "Invalid amount 1000.001 in line 1."},
        {"account_1=&amount_1=&description_1=&account_2=&amount_2=&description_2=",
         "No lines to post!"},
        {"tax=abc", "Invalid tax amount: abc"},
        {"invtotal=1%2C234.00", "Out of balance: lines and tax 1,234.56, invoice total 1,234.00."},
        {"invtotal=x", "Invalid invoice total: x"},
        {"amount_1=-1000.00&amount_2=800.00&tax=200.00&invtotal=",
         "Cannot save a transaction with a zero total."},
        {"transdate=03%2F01%2F2026", "Cannot save a transaction for a closed period (03/2026)."},
        {"rowcount=51", "Too many lines: at most 50."},
    };
    login(f);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[4096], form_id[64];
        assert_int_equal(simc_get(f->ss, "/ap.pl?action=add", &status), 0);
        assert_int_equal(simc_field(simc_body(f->ss), "form_id", form_id, sizeof form_id), 0);
        /* the case's fields come first: the first value of a field counts */
        snprintf(body, sizeof body,
                 "%s&form_id=%s&vendor=100001&vendor_id=V-000001&currency=EUR&doctype=Invoice"
                 "&invnumber=INV-V&ponumber=AP1-VALID&transdate=11%%2F03%%2F2026&rowcount=2"
                 "&%s&%s&tax=200.00&invtotal=1%%2C234.56&action=save",
                 cases[i].fields, form_id, line1, line2);
        assert_int_equal(simc_post(f->ss, "/ap.pl", body, &status), 0);
        assert_error(f, status, cases[i].error);
    }
    assert_int_equal(simc_count_rows(f->port), 0);
    /* the standard fields themselves save */
    assert_int_equal(enter_and_save(f, "INV-V", "AP1-VALID"), 200);
    assert_int_equal(simc_count_rows(f->port), 1);
    /* update checks the vendor too */
    assert_int_equal(simc_get(f->ss, "/ap.pl?action=add", &status), 0);
    assert_int_equal(submit(f, "vendor=999", "update"), 500);
    assert_error(f, 500, "Vendor not on file: 999");
    /* an unknown action */
    assert_int_equal(simc_get(f->ss, "/ap.pl?action=add", &status), 0);
    assert_int_equal(submit(f, NULL, "post"), 500);
    assert_error(f, 500, "Unknown action: post");
}

/* Amounts and dates are US-formatted: groups of three with commas, a decimal point, at most
 * the currency's decimals; a credit note keeps its sign as entered. */
static void test_sim_classic_formats(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char head[512], fields[2048];
    login(f);
    snprintf(head, sizeof head,
             "vendor=100029&currency=JPY&doctype=Credit+Note&invnumber=CN-1&ponumber=AP1-JPY"
             "&transdate=1%%2F5%%2F2027");
    assert_int_equal(simc_get(f->ss, "/ap.pl?action=add", &status), 0);
    snprintf(fields, sizeof fields,
             "%s&account_1=4000--Cost+of+Goods+Sold&amount_1=12%%2C345&description_1=Parts"
             "&tax=1%%2C000",
             head);
    assert_int_equal(submit(f, fields, "update"), 200);
    char v[64];
    assert_int_equal(simc_field(simc_body(f->ss), "duedate", v, sizeof v), 0);
    assert_string_equal(v, "02/04/2027");
    assert_int_equal(submit(f, fields, "save"), 200);
    char doc[32];
    saved_doc(f, doc, sizeof doc);
    char *csv = NULL, row[256];
    assert_int_equal(simc_ledger(f->port, &csv), 0);
    snprintf(row, sizeof row, "\n%s,100029,CN-1,2027-01-05,JPY,13345,AP1-JPY,", doc);
    assert_non_null(strstr(csv, row));
    free(csv);
    assert_int_equal(simc_lines(f->port, &csv), 0);
    snprintf(row, sizeof row, "\n%s,1,4000,12345,Parts\n", doc);
    assert_non_null(strstr(csv, row));
    free(csv);
    char path[96];
    snprintf(path, sizeof path, "/ap.pl?action=edit&id=%s", doc);
    assert_int_equal(simc_get(f->ss, path, &status), 0);
    assert_int_equal(simc_by_id(simc_body(f->ss), "total", v, sizeof v), 0);
    assert_string_equal(v, "13,345");
    assert_int_equal(simc_field(simc_body(f->ss), "doctype", v, sizeof v), 0);
    assert_string_equal(v, "Credit Note");
}

/* ---- search and listing ------------------------------------------------------------------ */

/* The search matches the reference by prefix but shows no reference column: the edit page of a
 * hit shows it. It shows drafts and posted documents with their status, at most 100 rows, and
 * only documents the (lagging) index holds. */
static void test_sim_classic_search(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char doc[32], v[64];
    login(f);
    assert_int_equal(enter_and_save(f, "INV-S1", "AP1-SRCH-1"), 200);
    saved_doc(f, doc, sizeof doc);
    assert_int_equal(
        simc_book(f->port, "100002", "INV-S2", "2026-11-04", "EUR", "10.00", "AP1-SRCH-2", NULL, 0),
        0);
    assert_int_equal(simc_get(f->ss, "/app/ap/search?reference=AP1-SRCH", &status), 0);
    assert_int_equal(status, 200);
    const char *html = simc_body(f->ss);
    assert_non_null(strstr(html, "<form id=\"searchForm\""));
    assert_non_null(strstr(html, "<table id=\"results\""));
    assert_int_equal(count(html, "<td class=\"id\">"), 2);
    assert_null(strstr(html, "AP1-SRCH-1"));
    assert_null(strstr(html, "AP1-SRCH-2"));
    assert_null(strstr(html, "class=\"reference\""));
    assert_non_null(strstr(html, "<td class=\"status\">draft</td>"));
    assert_non_null(strstr(html, "<td class=\"status\">posted</td>"));
    assert_non_null(strstr(html, "<td class=\"amount\" align=right>1,234.56</td>"));
    assert_non_null(strstr(html, "<td class=\"transdate\">11/03/2026</td>"));
    char cell[160];
    snprintf(cell, sizeof cell, "<td class=\"id\"><a href=\"/ap.pl?action=edit&amp;id=%s\">%s</a>",
             doc, doc);
    assert_non_null(strstr(html, cell));
    /* exact references find one, others none */
    assert_int_equal(simc_get(f->ss, "/app/ap/search?reference=AP1-SRCH-2", &status), 0);
    assert_int_equal(count(simc_body(f->ss), "<td class=\"id\">"), 1);
    assert_int_equal(simc_get(f->ss, "/app/ap/search?reference=AP1-SRCH-3", &status), 0);
    html = simc_body(f->ss);
    assert_non_null(strstr(html, "<p id=\"noResults\">No transactions found.</p>"));
    assert_non_null(strstr(html, "<form id=\"searchForm\""));
    assert_non_null(strstr(html, "</html>"));
    /* the edit page of the hit shows its reference */
    char path[96];
    snprintf(path, sizeof path, "/ap.pl?action=edit&id=%s", doc);
    assert_int_equal(simc_get(f->ss, path, &status), 0);
    assert_int_equal(simc_field(simc_body(f->ss), "ponumber", v, sizeof v), 0);
    assert_string_equal(v, "AP1-SRCH-1");
    /* by vendor and invoice number prefix */
    assert_int_equal(simc_get(f->ss, "/app/ap/search?vendor=100002&invnumber=INV-S", &status), 0);
    assert_int_equal(count(simc_body(f->ss), "<td class=\"id\">"), 1);

    /* at most 100 rows, silently */
    for (int i = 0; i < 105; i++) {
        char ref[32];
        snprintf(ref, sizeof ref, "AP1-MANY-%03d", i);
        assert_int_equal(
            simc_book(f->port, "100003", ref, "2026-11-05", "EUR", "1.00", ref, NULL, 0), 0);
    }
    assert_int_equal(simc_get(f->ss, "/app/ap/search?reference=AP1-MANY", &status), 0);
    assert_int_equal(count(simc_body(f->ss), "<td class=\"id\">"), 100);
    /* search_max_rows lowers it */
    assert_int_equal(simc_set(f->port, "search_max_rows", "7"), 0);
    assert_int_equal(simc_get(f->ss, "/app/ap/search?reference=AP1-MANY", &status), 0);
    assert_int_equal(count(simc_body(f->ss), "<td class=\"id\">"), 7);
    assert_int_equal(simc_set(f->port, "search_max_rows", "0"), 0);

    /* the index lags */
    assert_int_equal(simc_set(f->port, "index_lag_ms", "60000"), 0);
    assert_int_equal(
        simc_book(f->port, "100002", "INV-S9", "2026-11-04", "EUR", "10.00", "AP1-SRCH-9", NULL, 0),
        0);
    assert_int_equal(simc_get(f->ss, "/app/ap/search?reference=AP1-SRCH-9", &status), 0);
    assert_non_null(strstr(simc_body(f->ss), "id=\"noResults\""));
    /* without criteria: the form and a hint */
    assert_int_equal(simc_get(f->ss, "/app/ap/search", &status), 0);
    assert_non_null(strstr(simc_body(f->ss), "<p class=\"info\">Enter a reference or a vendor."));
}

/* search_garbled: the no-results marker, then noise; the results screen (its form, its end) is
 * missing. Only the forced count is hit. */
static void test_sim_classic_search_garbled(void **state)
{
    struct fx *f = *state;
    long status = 0;
    login(f);
    assert_int_equal(
        simc_book(f->port, "100002", "INV-G", "2026-11-04", "EUR", "10.00", "AP1-GARBLED", NULL, 0),
        0);
    assert_int_equal(simc_fault(f->port, "search_garbled", 1), 0);
    assert_int_equal(simc_get(f->ss, "/app/ap/search?reference=AP1-GARBLED", &status), 0);
    assert_int_equal(status, 200);
    const char *html = simc_body(f->ss);
    assert_non_null(strstr(html, "<p id=\"noResults\">No transactions found.</p>"));
    assert_null(strstr(html, "searchForm"));
    assert_null(strstr(html, "<title>"));
    assert_null(strstr(html, "</html>"));
    assert_int_equal(simc_get(f->ss, "/app/ap/search?reference=AP1-GARBLED", &status), 0);
    assert_int_equal(count(simc_body(f->ss), "<td class=\"id\">"), 1);
    assert_int_equal(simc_stat(f->port, "search_garbled"), 1);
}

/* The listing selects by invoice date over a range, in one page, with the reference column. */
static void test_sim_classic_listing(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char d1[32], d2[32];
    login(f);
    /* booked in the other order than their invoice dates */
    assert_int_equal(simc_book(f->port, "100002", "L-2", "2026-11-30", "EUR", "2.00", "AP1-LIST-2",
                               d2, sizeof d2),
                     0);
    assert_int_equal(simc_book(f->port, "100001", "L-1", "2026-11-01", "EUR", "1234.56",
                               "AP1-LIST-1", d1, sizeof d1),
                     0);
    assert_true(strcmp(d2, d1) < 0);
    assert_int_equal(
        simc_book(f->port, "100003", "L-3", "2026-12-01", "EUR", "3.00", "AP1-LIST-3", NULL, 0), 0);
    assert_int_equal(
        simc_book(f->port, "100004", "L-4", "2026-10-31", "EUR", "4.00", "AP1-LIST-4", NULL, 0), 0);
    assert_int_equal(simc_get(f->ss, "/app/ap/list?from=11/01/2026&to=11/30/2026", &status), 0);
    assert_int_equal(status, 200);
    const char *html = simc_body(f->ss);
    assert_non_null(strstr(html, "<table id=\"listing\""));
    assert_int_equal(count(html, "<td class=\"id\">"), 2);
    assert_non_null(strstr(html, "<td class=\"reference\">AP1-LIST-1</td>"));
    assert_non_null(strstr(html, "<td class=\"reference\">AP1-LIST-2</td>"));
    assert_null(strstr(html, "AP1-LIST-3"));
    assert_null(strstr(html, "AP1-LIST-4"));
    assert_non_null(strstr(html, "<td class=\"amount\" align=right>1,234.56</td>"));
    assert_true(strstr(html, d1) < strstr(html, d2)); /* by invoice date */
    /* one day */
    assert_int_equal(simc_get(f->ss, "/app/ap/list?from=12/1/2026&to=12/01/2026", &status), 0);
    assert_int_equal(count(simc_body(f->ss), "<td class=\"id\">"), 1);
    /* nothing */
    assert_int_equal(simc_get(f->ss, "/app/ap/list?from=01/01/2027&to=01/31/2027", &status), 0);
    assert_non_null(strstr(simc_body(f->ss), "id=\"noResults\""));
    /* bad ranges */
    assert_int_equal(simc_get(f->ss, "/app/ap/list?from=11/31/2026&to=12/01/2026", &status), 0);
    assert_error(f, status, "Invalid date: 11/31/2026");
    assert_int_equal(simc_get(f->ss, "/app/ap/list?from=12/01/2026&to=11/01/2026", &status), 0);
    assert_error(f, status, "Invalid date range: the start is after the end.");
    assert_int_equal(simc_get(f->ss, "/app/ap/list?from=01/01/2026&to=01/31/2027", &status), 0);
    assert_error(f, status, "Date range too long: at most 366 days.");
}

/* ---- faults and re-posts ------------------------------------------------------------------ */

/* Commit faults hit save (the draft is booked) and approve (the status changes). */
static void test_sim_classic_commit_faults(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char doc[32], path[96], st[16];
    login(f);
    /* error500 after commit on save: the draft is there */
    assert_int_equal(simc_fault(f->port, "error500_after_commit", 1), 0);
    assert_int_equal(enter_and_save(f, "INV-F1", "AP1-FAULT-1"), 500);
    assert_null(strstr(simc_body(f->ss), "class=\"error\""));
    assert_int_equal(simc_count_reference(f->port, "AP1-FAULT-1"), 1);
    /* error500 before commit on save: nothing, the same form saves again */
    assert_int_equal(simc_fault(f->port, "error500_before_commit", 1), 0);
    assert_int_equal(enter_and_save(f, "INV-F2", "AP1-FAULT-2"), 500);
    assert_int_equal(simc_count_reference(f->port, "AP1-FAULT-2"), 0);
    /* a drop after commit on approve: posted all the same */
    assert_int_equal(enter_and_save(f, "INV-F3", "AP1-FAULT-3"), 200);
    saved_doc(f, doc, sizeof doc);
    snprintf(path, sizeof path, "/ap.pl?action=edit&id=%s", doc);
    assert_int_equal(simc_get(f->ss, path, &status), 0);
    char *approve = simc_hidden_form(simc_body(f->ss));
    assert_non_null(approve);
    approve = cat(approve, "action=approve");
    assert_int_equal(simc_fault(f->port, "drop_after_commit", 1), 0);
    assert_int_not_equal(simc_post(f->ss, "/ap.pl", approve, &status), 0);
    free(approve);
    assert_int_equal(simc_doc_status(f->port, doc, st, sizeof st), 0);
    assert_string_equal(st, "posted");
    /* a late commit of an approve: still a draft right after, posted later */
    assert_int_equal(enter_and_save(f, "INV-F4", "AP1-FAULT-4"), 200);
    saved_doc(f, doc, sizeof doc);
    snprintf(path, sizeof path, "/ap.pl?action=edit&id=%s", doc);
    assert_int_equal(simc_get(f->ss, path, &status), 0);
    assert_int_equal(simc_fault(f->port, "late_commit", 1), 0);
    approve = cat(simc_hidden_form(simc_body(f->ss)), "action=approve");
    assert_int_not_equal(simc_post(f->ss, "/ap.pl", approve, &status), 0);
    free(approve);
    assert_int_equal(simc_doc_status(f->port, doc, st, sizeof st), 0);
    assert_string_equal(st, "draft");
    for (int i = 0; i < 50 && strcmp(st, "draft") == 0; i++) {
        sleep_ms(50);
        assert_int_equal(simc_doc_status(f->port, doc, st, sizeof st), 0);
    }
    assert_string_equal(st, "posted");
    /* a late commit of a save: the draft appears later */
    assert_int_equal(simc_fault(f->port, "late_commit", 1), 0);
    char head[512], fields[2048];
    header(head, sizeof head, "INV-F5", "AP1-FAULT-5");
    assert_int_equal(simc_get(f->ss, "/ap.pl?action=add", &status), 0);
    snprintf(fields, sizeof fields, "%s&%s", head, line1);
    assert_int_equal(submit(f, fields, "update"), 200);
    char *save = cat(simc_hidden_form(simc_body(f->ss)), "%s&action=save", fields);
    assert_int_not_equal(simc_post(f->ss, "/ap.pl", save, &status), 0);
    free(save);
    assert_int_equal(simc_count_reference(f->port, "AP1-FAULT-5"), 0);
    int n = 0;
    for (int i = 0; i < 50 && n == 0; i++) {
        sleep_ms(50);
        n = simc_count_reference(f->port, "AP1-FAULT-5");
    }
    assert_int_equal(n, 1);
    assert_int_equal(simc_doc_status(f->port, "AP-2026-000999", st, sizeof st), -1);
}

/* A save carrying a reference the ledger holds is counted as a re-post of something booked,
 * with the guard off (it books again) and on (refused). */
static void test_sim_classic_reposts(void **state)
{
    struct fx *f = *state;
    login(f);
    assert_int_equal(enter_and_save(f, "INV-P1", "AP1-REPOST"), 200);
    assert_int_equal(simc_stat(f->port, "reposts_of_booked"), 0);
    assert_int_equal(enter_and_save(f, "INV-P2", "AP1-REPOST"), 200);
    assert_int_equal(simc_count_reference(f->port, "AP1-REPOST"), 2);
    assert_int_equal(simc_stat(f->port, "reposts_of_booked"), 1);
    assert_int_equal(simc_set(f->port, "reference_guard", "on"), 0);
    long status = enter_and_save(f, "INV-P3", "AP1-REPOST");
    assert_int_equal(status, 500);
    assert_non_null(strstr(simc_body(f->ss), "<h2 class=\"error\">Reference AP1-REPOST already "
                                             "used by AP-2026-"));
    assert_int_equal(simc_count_reference(f->port, "AP1-REPOST"), 2);
    assert_int_equal(simc_stat(f->port, "reposts_of_booked"), 2);
    /* the guard only looks at apbot's keys */
    assert_int_equal(enter_and_save(f, "INV-P4", "PO 4711"), 200);
    assert_int_equal(enter_and_save(f, "INV-P5", "PO 4711"), 200);
    assert_int_equal(simc_count_reference(f->port, "PO 4711"), 2);
    assert_int_equal(simc_stat(f->port, "reposts_of_booked"), 3);
    /* duplicate_check on: the same vendor invoice number is refused */
    assert_int_equal(simc_set(f->port, "duplicate_check", "on"), 0);
    status = enter_and_save(f, "INV-P1", "AP1-OTHER");
    assert_int_equal(status, 500);
    assert_non_null(strstr(simc_body(f->ss), "<h2 class=\"error\">Invoice number INV-P1 already "
                                             "exists for vendor 100001 (AP-2026-"));
}

/* The acme screens do not exist on the classic UI, nor the classic ones on acme. */
static void test_sim_classic_other_ui(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char *body = NULL;
    login(f);
    assert_int_equal(simc_get(f->ss, "/erp/login", &status), 0);
    assert_int_equal(status, 404);
    assert_int_equal(simc_get(f->ss, "/", &status), 0);
    assert_int_equal(status, 303);
    assert_int_equal(simc_get(f->ss, "/app/ap/nothing", &status), 0);
    assert_int_equal(status, 404);
    assert_int_equal(simc_stat(f->port, "other"), 3);
    char *json = NULL;
    assert_int_equal(simc_stats(f->port, &json), 0);
    assert_non_null(strstr(json, "\"ui\":\"classic\""));
    free(json);

    struct sim *acme = NULL;
    struct sim_options opt = {.port = 0, .scenario_text = fast, .admin = true};
    char err[256];
    assert_int_equal(sim_start(&opt, &acme, err, sizeof err), 0);
    assert_int_equal(simc_request(sim_port(acme), "GET",
                                  "/login.pl?action=authenticate&company=ACME", NULL, 5000, &status,
                                  &body),
                     0);
    assert_int_equal(status, 404);
    free(body);
    sim_stop(acme);
    enum sim_ui ui;
    assert_int_equal(sim_ui_from_name("classic", &ui), 0);
    assert_int_equal(ui, SIM_UI_CLASSIC);
    assert_int_equal(sim_ui_from_name("acme", &ui), 0);
    assert_int_equal(ui, SIM_UI_ACME);
    assert_int_equal(sim_ui_from_name("sap", &ui), -1);
    assert_string_equal(sim_ui_name(SIM_UI_CLASSIC), "classic");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sim_classic_login, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_classic_no_session, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_classic_add_form, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_classic_update, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_classic_save_draft, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_classic_edit_and_approve, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_classic_approve_redirect, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_classic_approve_by_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_classic_closed_period, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_classic_vendor_picker, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_classic_validation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_classic_formats, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_classic_search, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_classic_search_garbled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_classic_listing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_classic_commit_faults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_classic_reposts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_classic_other_ui, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
