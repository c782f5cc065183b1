/*
 * test_sim_screens.c - the simulated ERP's screens over real HTTP on loopback: login (ok, bad
 * password, bad CSRF), session expiry (idle, request count, no cookie, a form submit without a
 * session is not processed), the two-step entry booking exactly once, every validation
 * message, one-time tokens (E109), the AP1- reference guard (E111), search by reference prefix
 * with index lag and by natural key, and the paginated journal. Each test starts its own
 * in-process sim on an ephemeral port with near-zero service times.
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
#include <unistd.h>

#include "helpers/sim_client.h"
#include "sim.h"

static const char fast[] = "slots = 4\n"
                           "service_ms.login = 0\n"
                           "service_ms.form = 0\n"
                           "service_ms.check = 0..1\n"
                           "service_ms.post = 0..1\n"
                           "service_ms.search = 0\n"
                           "service_ms.journal = 0\n"
                           "index_lag_ms = 300\n"
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
    struct sim_options opt = {.port = 0, .scenario_text = fast, .seed = 7, .admin = true};
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

static void assert_message(const char *html, const char *expected)
{
    char msg[512];
    assert_int_equal(simc_message(html, msg, sizeof msg), 0);
    assert_string_equal(msg, expected);
}

static void login(struct fx *f)
{
    assert_int_equal(simc_login(f->ss, "clerk", "acme-demo"), 0);
}

/* ---- login ------------------------------------------------------------------------------- */

static void test_sim_login_ok(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char *body = NULL, *headers = NULL, csrf[64], form[256];
    assert_int_equal(simc_request(f->port, "GET", "/erp/login", NULL, 5000, &status, &body), 0);
    assert_int_equal(status, 200);
    assert_non_null(strstr(body, "<title>ACME Financials - Login</title>"));
    assert_non_null(strstr(body, "<form id=\"loginForm\" name=\"loginForm\" method=\"post\" "
                                 "action=\"/erp/login\">"));
    assert_int_equal(simc_field(body, "_csrf", csrf, sizeof csrf), 0);
    assert_true(strlen(csrf) >= 16);
    free(body);
    snprintf(form, sizeof form, "j_username=clerk&j_password=acme-demo&_csrf=%s&login=Log+in",
             csrf);
    assert_int_equal(
        simc_request_headers(f->port, "POST", "/erp/login", form, 5000, &status, &body, &headers),
        0);
    assert_int_equal(status, 303);
    assert_non_null(strstr(headers, "Location: /erp/home"));
    assert_non_null(strstr(headers, "Set-Cookie: JSESSIONID="));
    assert_non_null(strstr(headers, "; Path=/erp; HttpOnly"));
    free(body);
    free(headers);

    login(f);
    assert_non_null(strstr(simc_body(f->ss), "<h1>Welcome, clerk</h1>"));
    assert_non_null(strstr(simc_body(f->ss), "<a id=\"logout\" href=\"/erp/logout\">"));
    /* logging out ends the session */
    assert_int_equal(simc_get(f->ss, "/erp/logout", &status), 0);
    assert_int_equal(simc_get(f->ss, "/erp/home", &status), 0);
    assert_message(simc_body(f->ss), "I003: Your session has expired. Please log in again.");
}

static void test_sim_login_bad_password(void **state)
{
    struct fx *f = *state;
    long status = 0;
    assert_int_not_equal(simc_login(f->ss, "clerk", "wrong"), 0);
    assert_int_equal(simc_login(f->ss, "nobody", "acme-demo") == 0, 0);
    /* the failed POST answers the login page (200) with E001 */
    char csrf[64], form[256];
    assert_int_equal(simc_get(f->ss, "/erp/login", &status), 0);
    assert_int_equal(simc_field(simc_body(f->ss), "_csrf", csrf, sizeof csrf), 0);
    snprintf(form, sizeof form, "j_username=clerk&j_password=nope&_csrf=%s", csrf);
    assert_int_equal(simc_post(f->ss, "/erp/login", form, &status), 0);
    assert_int_equal(status, 200);
    assert_non_null(strstr(simc_body(f->ss), "id=\"loginForm\""));
    assert_non_null(strstr(simc_body(f->ss), "class=\"msg msg-error\""));
    assert_message(simc_body(f->ss), "E001: Invalid user name or password.");
    assert_int_equal(simc_get(f->ss, "/erp/home", &status), 0);
    assert_null(strstr(simc_body(f->ss), "Welcome"));
}

static void test_sim_login_bad_csrf(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char csrf[64], form[256];
    const char *e002 = "E002: Your login form has expired. Please try again.";
    assert_int_equal(
        simc_post(f->ss, "/erp/login", "j_username=clerk&j_password=acme-demo", &status), 0);
    assert_int_equal(status, 200);
    assert_message(simc_body(f->ss), e002);
    assert_int_equal(
        simc_post(f->ss, "/erp/login",
                  "j_username=clerk&j_password=acme-demo&_csrf=000000000000000000000000", &status),
        0);
    assert_message(simc_body(f->ss), e002);
    /* a CSRF token is good for one login only */
    assert_int_equal(simc_get(f->ss, "/erp/login", &status), 0);
    assert_int_equal(simc_field(simc_body(f->ss), "_csrf", csrf, sizeof csrf), 0);
    snprintf(form, sizeof form, "j_username=clerk&j_password=acme-demo&_csrf=%s", csrf);
    assert_int_equal(simc_post(f->ss, "/erp/login", form, &status), 0);
    assert_int_equal(status, 303);
    assert_int_equal(simc_post(f->ss, "/erp/login", form, &status), 0);
    assert_int_equal(status, 200);
    assert_message(simc_body(f->ss), e002);
}

/* ---- sessions ---------------------------------------------------------------------------- */

static void test_sim_session_expiry(void **state)
{
    struct fx *f = *state;
    long status = 0;
    const char *i003 = "I003: Your session has expired. Please log in again.";
    /* no cookie at all: every screen but the login answers the login page */
    assert_int_equal(simc_get(f->ss, "/erp/ap/invoice/new", &status), 0);
    assert_int_equal(status, 200);
    assert_non_null(strstr(simc_body(f->ss), "id=\"loginForm\""));
    assert_message(simc_body(f->ss), i003);

    /* idle expiry */
    assert_int_equal(simc_set(f->port, "session_idle_s", "1"), 0);
    login(f);
    sleep_ms(1200);
    assert_int_equal(simc_get(f->ss, "/erp/ap/invoice/search?reference=x", &status), 0);
    assert_int_equal(status, 200);
    assert_message(simc_body(f->ss), i003);
    assert_null(strstr(simc_body(f->ss), "id=\"apSearch\""));

    /* request-count expiry: login's own /erp/home is request 1 */
    assert_int_equal(simc_set(f->port, "session_idle_s", "900"), 0);
    assert_int_equal(simc_set(f->port, "session_max_requests", "3"), 0);
    login(f);
    assert_int_equal(simc_get(f->ss, "/erp/ap/invoice/new", &status), 0);
    assert_non_null(strstr(simc_body(f->ss), "id=\"apEntry\""));
    char fields[512];
    simc_fields(fields, sizeof fields, "INV-EXP", "AP1-expiry");
    /* /erp/home was request 1, the GET above 2, simc_check's GET 3: its POST is one too many */
    assert_int_equal(simc_check(f->ss, fields, &status), 0);
    assert_non_null(strstr(simc_body(f->ss), "id=\"loginForm\""));
    assert_message(simc_body(f->ss), i003);
    assert_int_equal(simc_count_rows(f->port), 0);
}

static void test_sim_post_without_session_not_processed(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char fields[512];
    login(f);
    simc_fields(fields, sizeof fields, "INV-NS", "AP1-nosession");
    assert_int_equal(simc_check(f->ss, fields, &status), 0);
    char *hidden = simc_hidden_form(simc_body(f->ss));
    assert_non_null(hidden);
    /* the same submit from a client without the cookie */
    char *body = NULL;
    assert_int_equal(
        simc_request(f->port, "POST", "/erp/ap/invoice/post", hidden, 5000, &status, &body), 0);
    assert_int_equal(status, 200);
    assert_non_null(strstr(body, "id=\"loginForm\""));
    assert_message(body, "I003: Your session has expired. Please log in again.");
    free(body);
    free(hidden);
    assert_int_equal(simc_count_rows(f->port), 0);
}

/* ---- entry, check, post ------------------------------------------------------------------ */

static void test_sim_entry_books_once(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char fields[512], v[256];
    login(f);
    assert_int_equal(simc_get(f->ss, "/erp/ap/invoice/new", &status), 0);
    const char *html = simc_body(f->ss);
    assert_non_null(strstr(html, "<form id=\"apEntry\" name=\"apEntry\" method=\"post\" "
                                 "action=\"/erp/ap/invoice/check\">"));
    static const char *const names[] = {"docType",   "vendorNo", "vendorInvNo", "invDate",
                                        "dueDate",   "currency", "amount",      "glAccount",
                                        "reference", "memo",     "formToken",   "check"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char pat[64];
        snprintf(pat, sizeof pat, "name=\"%s\"", names[i]);
        assert_non_null(strstr(html, pat));
    }
    assert_non_null(strstr(html, "name=\"reference\" size=\"40\" maxlength=\"40\""));

    simc_fields(fields, sizeof fields, "INV-1", "AP1-once");
    assert_int_equal(simc_check(f->ss, fields, &status), 0);
    assert_int_equal(status, 200);
    html = simc_body(f->ss);
    assert_non_null(strstr(html, "<form id=\"apConfirm\" name=\"apConfirm\" method=\"post\" "
                                 "action=\"/erp/ap/invoice/post\">"));
    assert_message(html, "I010: Please check the document and press Post.");
    assert_int_equal(simc_by_id(html, "vendorName", v, sizeof v), 0);
    assert_string_equal(v, "Nordwind Bürobedarf GmbH");
    assert_int_equal(simc_by_id(html, "dueDateResolved", v, sizeof v), 0);
    assert_string_equal(v, "03.12.2026");
    assert_int_equal(simc_field(html, "vendorId", v, sizeof v), 0);
    assert_string_equal(v, "V-000001");
    assert_int_equal(simc_field(html, "dueDate", v, sizeof v), 0);
    assert_string_equal(v, "03.12.2026");
    assert_int_equal(simc_count_rows(f->port), 0); /* check books nothing */

    assert_int_equal(simc_confirm(f->ss, &status), 0);
    assert_int_equal(status, 200);
    html = simc_body(f->ss);
    char doc[64], msg[256];
    assert_int_equal(simc_by_id(html, "docNo", doc, sizeof doc), 0);
    assert_int_equal(strlen(doc), strlen("AP-2026-000001"));
    assert_true(strncmp(doc, "AP-", 3) == 0);
    snprintf(msg, sizeof msg, "I020: Document %s was posted.", doc);
    assert_message(html, msg);
    assert_non_null(strstr(html, "class=\"msg msg-success\""));

    assert_int_equal(simc_count_reference(f->port, "AP1-once"), 1);
    assert_int_equal(simc_count_rows(f->port), 1);
    char *csv = NULL;
    assert_int_equal(simc_ledger(f->port, &csv), 0);
    assert_true(strncmp(csv,
                        "doc,vendor_id,invoice_number,invoice_date,currency,amount,reference,"
                        "booked_at,status\n",
                        85) == 0);
    char row[256];
    snprintf(row, sizeof row, "\n%s,100001,INV-1,2026-11-03,EUR,1234.56,AP1-once,", doc);
    assert_non_null(strstr(csv, row));
    assert_non_null(strstr(strstr(csv, row), ",posted\n")); /* acme books posted */
    free(csv);
    /* the single-line form books one line: the whole amount on the G/L account, the memo */
    assert_int_equal(simc_lines(f->port, &csv), 0);
    snprintf(row, sizeof row, "doc,line,gl_account,amount,description\n%s,1,6000,1234.56,test\n",
             doc);
    assert_string_equal(csv, row);
    free(csv);

    /* a second invoice gets the next number */
    char doc2[64];
    simc_fields(fields, sizeof fields, "INV-2", "AP1-twice");
    assert_int_equal(simc_post_invoice(f->ss, fields, doc2, sizeof doc2), 0);
    assert_true(strcmp(doc2, doc) > 0);
    assert_int_equal(simc_count_rows(f->port), 2);
}

static void test_sim_entry_formats(void **state)
{
    struct fx *f = *state;
    char doc[64];
    login(f);
    /* JPY without decimals, KWD with three, a credit note, thousands dots optional,
     * a due date given, reference cut to 40 characters */
    assert_int_equal(simc_post_invoice(f->ss,
                                       "docType=KR&vendorNo=100029&vendorInvNo=J-1&invDate="
                                       "1.11.2026&currency=JPY&amount=123.456&glAccount=4000"
                                       "&reference=AP1-jpy",
                                       doc, sizeof doc),
                     0);
    assert_int_equal(simc_post_invoice(f->ss,
                                       "docType=KG&vendorNo=100030&vendorInvNo=K-1&invDate="
                                       "01.12.2026&dueDate=15.01.2027&currency=KWD&amount="
                                       "1234,567&glAccount=6999&reference=AP1-kwd",
                                       doc, sizeof doc),
                     0);
    assert_int_equal(
        simc_post_invoice(f->ss,
                          "docType=KR&vendorNo=100002&vendorInvNo=L-1&invDate=31.01.2027"
                          "&currency=EUR&amount=-5,00&glAccount=5000&reference="
                          "AP1-0123456789012345678901234567890123456789XYZ",
                          doc, sizeof doc),
        0);
    char *csv = NULL;
    assert_int_equal(simc_ledger(f->port, &csv), 0);
    assert_non_null(strstr(csv, ",100029,J-1,2026-11-01,JPY,123456,AP1-jpy,"));
    assert_non_null(strstr(csv, ",100030,K-1,2026-12-01,KWD,1234.567,AP1-kwd,"));
    assert_non_null(
        strstr(csv, ",100002,L-1,2027-01-31,EUR,-5.00,AP1-012345678901234567890123456789012345,"));
    free(csv);
}

/* The entry form has one line row (lineGl_1, lineAmount_1, lineText_1, lineCount) and an "Add
 * line" script; rows beyond the first, as that script makes them, are accepted when submitted;
 * the confirmation carries them; the booking keeps them (lines.csv) with lines + tax = amount. */
static void test_sim_entry_lines(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char v[128], doc[64], row[512];
    login(f);
    assert_int_equal(simc_get(f->ss, "/erp/ap/invoice/new", &status), 0);
    const char *html = simc_body(f->ss);
    static const char *const names[] = {"taxAmount", "lineGl_1", "lineAmount_1", "lineText_1",
                                        "lineCount"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        assert_int_equal(simc_field(html, names[i], v, sizeof v), 0);
    assert_int_equal(simc_field(html, "lineCount", v, sizeof v), 0);
    assert_string_equal(v, "1");
    assert_int_equal(simc_field(html, "lineGl_2", v, sizeof v), -1);
    assert_non_null(strstr(html, "<table id=\"lineTable\""));
    /* window.: inside an inline handler the form's own control "addLine" (the button)
     * would shadow the function, and the button would do nothing in a browser */
    assert_non_null(strstr(html, "onclick=\"window.addLine()\""));
    assert_non_null(strstr(html, "'<input type=\"text\" name=\"lineGl_' + n + "));

    /* three lines (the second on the header's G/L account), tax 200,00: 1.234,56 in all */
    static const char lines[] = "docType=KR&vendorNo=100001&vendorInvNo=ML-1&invDate=03.11.2026"
                                "&currency=EUR&amount=1.234%2C56&glAccount=6000"
                                "&reference=AP1-lines&memo=multi&taxAmount=200%2C00&lineCount=3"
                                "&lineGl_1=5700&lineAmount_1=1.000%2C00&lineText_1=Paper"
                                "&lineGl_2=&lineAmount_2=30%2C00&lineText_2=Toner"
                                "&lineGl_3=4400&lineAmount_3=4%2C56&lineText_3=";
    assert_int_equal(simc_check(f->ss, lines, &status), 0);
    html = simc_body(f->ss);
    assert_non_null(strstr(html, "id=\"apConfirm\""));
    assert_int_equal(simc_field(html, "lineCount", v, sizeof v), 0);
    assert_string_equal(v, "3");
    assert_int_equal(simc_field(html, "lineGl_2", v, sizeof v), 0);
    assert_string_equal(v, "6000");
    assert_int_equal(simc_field(html, "lineAmount_3", v, sizeof v), 0);
    assert_string_equal(v, "4,56");
    assert_int_equal(simc_field(html, "taxAmount", v, sizeof v), 0);
    assert_string_equal(v, "200,00");
    assert_int_equal(simc_confirm(f->ss, &status), 0);
    assert_int_equal(simc_by_id(simc_body(f->ss), "docNo", doc, sizeof doc), 0);
    char *csv = NULL;
    assert_int_equal(simc_lines(f->port, &csv), 0);
    snprintf(row, sizeof row,
             "doc,line,gl_account,amount,description\n%s,1,5700,1000.00,Paper\n"
             "%s,2,6000,30.00,Toner\n%s,3,4400,4.56,\n",
             doc, doc, doc);
    assert_string_equal(csv, row);
    free(csv);

    /* the single-line form with a tax amount: one line of amount - tax */
    assert_int_equal(simc_post_invoice(f->ss,
                                       "docType=KR&vendorNo=100001&vendorInvNo=ML-2&invDate="
                                       "03.11.2026&currency=EUR&amount=119%2C00&glAccount=6010"
                                       "&reference=AP1-tax&memo=one+line&taxAmount=19%2C00",
                                       doc, sizeof doc),
                     0);
    assert_int_equal(simc_lines(f->port, &csv), 0);
    snprintf(row, sizeof row, "\n%s,1,6010,100.00,one line\n", doc);
    assert_non_null(strstr(csv, row));
    free(csv);
    /* rows left empty are skipped; a row past lineCount is not read */
    assert_int_equal(simc_post_invoice(f->ss,
                                       "docType=KR&vendorNo=100001&vendorInvNo=ML-3&invDate="
                                       "03.11.2026&currency=EUR&amount=10%2C00&glAccount=6000"
                                       "&reference=AP1-skip&lineCount=2&lineGl_1=&lineAmount_1="
                                       "&lineText_1=&lineGl_2=5400&lineAmount_2=10%2C00",
                                       doc, sizeof doc),
                     0);
    assert_int_equal(simc_lines(f->port, &csv), 0);
    snprintf(row, sizeof row, "\n%s,1,5400,10.00,\n", doc);
    assert_non_null(strstr(csv, row));
    free(csv);

    /* the line checks, at step 1 */
    static const struct {
        const char *rows, *message;
    } bad[] = {
        {"lineCount=2&lineAmount_1=1.000%2C00&lineAmount_2=30%2C00",
         "E113: Lines and tax (1.030,00) do not add up to the amount 1.234,56."},
        {"lineCount=1&lineAmount_1=1.034%2C56&lineAmount_2=200%2C00",
         "E113: Lines and tax (1.034,56) do not add up to the amount 1.234,56."},
        {"lineCount=0", "E114: Invalid number of lines '0'."},
        {"lineCount=51", "E114: Invalid number of lines '51'."},
        {"lineCount=x", "E114: Invalid number of lines 'x'."},
        {"lineCount=1&lineText_1=no+amount", "E101: Mandatory field Line amount 1 is empty."},
        {"lineCount=1&lineGl_1=1000&lineAmount_1=1.234%2C56",
         "E107: G/L account 1000 is not allowed for vendor invoices."},
        {"lineCount=1&lineAmount_1=1234.56", "E105: Invalid amount '1234.56'."},
        {"taxAmount=abc", "E105: Invalid amount 'abc'."},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char fields[1024];
        snprintf(fields, sizeof fields,
                 "%s&docType=KR&vendorNo=100001&vendorInvNo=BAD&invDate=03.11.2026&currency=EUR"
                 "&amount=1.234%%2C56&glAccount=6000&reference=AP1-bad",
                 bad[i].rows);
        assert_int_equal(simc_check(f->ss, fields, &status), 0);
        assert_message(simc_body(f->ss), bad[i].message);
        /* the typed rows are shown again */
        assert_non_null(strstr(simc_body(f->ss), "id=\"lineTable\""));
    }
    assert_int_equal(simc_count_rows(f->port), 3);
}

struct vcase {
    const char *fields;
    const char *message;
};

static void test_sim_validation_messages(void **state)
{
    struct fx *f = *state;
    static const struct vcase cases[] = {
        {"docType=KR&vendorNo=100001&vendorInvNo=&invDate=03.11.2026&currency=EUR&amount=1,00"
         "&glAccount=6000",
         "E101: Mandatory field Vendor invoice no. is empty."},
        {"docType=KR&vendorNo=&vendorInvNo=X&invDate=03.11.2026&currency=EUR&amount=1,00"
         "&glAccount=6000",
         "E101: Mandatory field Vendor is empty."},
        {"docType=KR&vendorNo=100001&vendorInvNo=X&invDate=03.11.2026&currency=EUR&amount=1,00",
         "E101: Mandatory field G/L account is empty."},
        {"docType=KR&vendorNo=999999&vendorInvNo=X&invDate=03.11.2026&currency=EUR&amount=1,00"
         "&glAccount=6000",
         "E102: Vendor 999999 does not exist."},
        {"docType=KR&vendorNo=100090&vendorInvNo=X&invDate=03.11.2026&currency=EUR&amount=1,00"
         "&glAccount=6000",
         "E103: Vendor 100090 is blocked for posting."},
        {"docType=KR&vendorNo=100001&vendorInvNo=X&invDate=31.02.2026&currency=EUR&amount=1,00"
         "&glAccount=6000",
         "E106: Invalid date '31.02.2026'."},
        {"docType=KR&vendorNo=100001&vendorInvNo=X&invDate=2026-11-03&currency=EUR&amount=1,00"
         "&glAccount=6000",
         "E106: Invalid date '2026-11-03'."},
        {"docType=KR&vendorNo=100001&vendorInvNo=X&invDate=03.11.2026&dueDate=1.13.2026"
         "&currency=EUR&amount=1,00&glAccount=6000",
         "E106: Invalid date '1.13.2026'."},
        {"docType=KR&vendorNo=100001&vendorInvNo=X&invDate=03.11.2026&currency=EUR&amount=1.234,5"
         "&glAccount=6000",
         "E105: Invalid amount '1.234,5'."},
        {"docType=KR&vendorNo=100001&vendorInvNo=X&invDate=03.11.2026&currency=EUR"
         "&amount=1%2C234.50&glAccount=6000",
         "E105: Invalid amount '1,234.50'."},
        {"docType=KR&vendorNo=100001&vendorInvNo=X&invDate=03.11.2026&currency=EUR&amount=0,00"
         "&glAccount=6000",
         "E105: Invalid amount '0,00'."},
        {"docType=KR&vendorNo=100001&vendorInvNo=X&invDate=03.11.2026&currency=JPY&amount=5,00"
         "&glAccount=6000",
         "E105: Invalid amount '5,00'."},
        {"docType=KR&vendorNo=100001&vendorInvNo=X&invDate=03.11.2026&currency=XXX&amount=1,00"
         "&glAccount=6000",
         "E110: Currency XXX is not allowed."},
        {"docType=KR&vendorNo=100001&vendorInvNo=X&invDate=03.11.2026&currency=EUR&amount=1,00"
         "&glAccount=1000",
         "E107: G/L account 1000 is not allowed for vendor invoices."},
        {"docType=KR&vendorNo=100001&vendorInvNo=X&invDate=03.05.2026&currency=EUR&amount=1,00"
         "&glAccount=6000",
         "E104: Posting period 05/2026 is closed."},
        {"docType=XX&vendorNo=100001&vendorInvNo=X&invDate=03.11.2026&currency=EUR&amount=1,00"
         "&glAccount=6000",
         "E112: Document type XX is not allowed."},
    };
    long status = 0;
    login(f);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(simc_check(f->ss, cases[i].fields, &status), 0);
        assert_int_equal(status, 200);
        const char *html = simc_body(f->ss);
        assert_non_null(strstr(html, "id=\"apEntry\""));          /* the entry form again, */
        assert_non_null(strstr(html, "class=\"msg msg-error\"")); /* with the message */
        assert_message(html, cases[i].message);
    }
    /* the typed values come back in the re-rendered form */
    char v[64];
    assert_int_equal(simc_field(simc_body(f->ss), "invDate", v, sizeof v), 0);
    assert_string_equal(v, "03.11.2026");

    /* validation_status = 500 delivers the same page with HTTP 500 */
    assert_int_equal(simc_set(f->port, "validation_status", "500"), 0);
    assert_int_equal(simc_check(f->ss, cases[3].fields, &status), 0);
    assert_int_equal(status, 500);
    assert_message(simc_body(f->ss), cases[3].message);
    assert_int_equal(simc_set(f->port, "validation_status", "200"), 0);

    /* E108 only when duplicate_check is on */
    char fields[512], doc[64], doc2[64], msg[256];
    simc_fields(fields, sizeof fields, "DUP-1", "AP1-dup-a");
    assert_int_equal(simc_post_invoice(f->ss, fields, doc, sizeof doc), 0);
    simc_fields(fields, sizeof fields, "DUP-1", "AP1-dup-b");
    assert_int_equal(simc_post_invoice(f->ss, fields, doc2, sizeof doc2), 0);
    assert_int_equal(simc_set(f->port, "duplicate_check", "on"), 0);
    simc_fields(fields, sizeof fields, "DUP-1", "AP1-dup-c");
    assert_int_equal(simc_post_invoice(f->ss, fields, NULL, 0), 1);
    snprintf(msg, sizeof msg, "E108: Vendor 100001 already has an invoice DUP-1 (document %s).",
             doc);
    assert_message(simc_body(f->ss), msg);
    assert_int_equal(simc_count_rows(f->port), 2);
    assert_int_equal(simc_count_reference(f->port, "AP1-dup-c"), 0);
}

static void test_sim_token_reuse(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char fields[512], token[64], body[1024];
    const char *e109 = "E109: This form was already submitted. Please reload the form.";
    login(f);
    /* step 1 token used twice */
    assert_int_equal(simc_get(f->ss, "/erp/ap/invoice/new", &status), 0);
    assert_int_equal(simc_field(simc_body(f->ss), "formToken", token, sizeof token), 0);
    simc_fields(fields, sizeof fields, "TOK-1", "AP1-token");
    snprintf(body, sizeof body, "%s&formToken=%s", fields, token);
    assert_int_equal(simc_post(f->ss, "/erp/ap/invoice/check", body, &status), 0);
    assert_non_null(strstr(simc_body(f->ss), "id=\"apConfirm\""));
    char *confirm = simc_hidden_form(simc_body(f->ss));
    assert_int_equal(simc_post(f->ss, "/erp/ap/invoice/check", body, &status), 0);
    assert_message(simc_body(f->ss), e109);
    /* missing or made-up token */
    assert_int_equal(simc_post(f->ss, "/erp/ap/invoice/check", fields, &status), 0);
    assert_message(simc_body(f->ss), e109);
    /* step 2: the double submit books once */
    assert_int_equal(simc_post(f->ss, "/erp/ap/invoice/post", confirm, &status), 0);
    assert_non_null(strstr(simc_body(f->ss), "id=\"docNo\""));
    assert_int_equal(simc_post(f->ss, "/erp/ap/invoice/post", confirm, &status), 0);
    assert_int_equal(status, 200);
    assert_message(simc_body(f->ss), e109);
    assert_null(strstr(simc_body(f->ss), "id=\"docNo\""));
    free(confirm);
    assert_int_equal(simc_count_reference(f->port, "AP1-token"), 1);
    /* a step-1 token is no good for step 2 */
    assert_int_equal(simc_get(f->ss, "/erp/ap/invoice/new", &status), 0);
    assert_int_equal(simc_field(simc_body(f->ss), "formToken", token, sizeof token), 0);
    snprintf(body, sizeof body, "%s&vendorId=V-000001&formToken=%s", fields, token);
    assert_int_equal(simc_post(f->ss, "/erp/ap/invoice/post", body, &status), 0);
    assert_message(simc_body(f->ss), e109);
    assert_int_equal(simc_count_reference(f->port, "AP1-token"), 1);
}

/* The reference guard is a scenario switch, off by default (real ERPs have none): a post with a
 * booked reference books again, and counts as a re-post of something booked either way. */
static void test_sim_reference_guard(void **state)
{
    struct fx *f = *state;
    char fields[512], doc[64], msg[256];
    login(f);
    simc_fields(fields, sizeof fields, "G-0", "AP1-unguarded");
    assert_int_equal(simc_post_invoice(f->ss, fields, NULL, 0), 0);
    assert_int_equal(simc_stat(f->port, "reposts_of_booked"), 0);
    simc_fields(fields, sizeof fields, "G-00", "AP1-unguarded");
    assert_int_equal(simc_post_invoice(f->ss, fields, NULL, 0), 0);
    assert_int_equal(simc_count_reference(f->port, "AP1-unguarded"), 2);
    assert_int_equal(simc_stat(f->port, "reposts_of_booked"), 1);

    assert_int_equal(simc_set(f->port, "reference_guard", "on"), 0);
    simc_fields(fields, sizeof fields, "G-1", "AP1-guard");
    assert_int_equal(simc_post_invoice(f->ss, fields, doc, sizeof doc), 0);
    assert_int_equal(simc_stat(f->port, "reposts_of_booked"), 1);
    /* a different invoice with the same AP1- reference: refused at the post step */
    simc_fields(fields, sizeof fields, "G-2", "AP1-guard");
    assert_int_equal(simc_post_invoice(f->ss, fields, NULL, 0), 1);
    assert_int_equal(simc_stat(f->port, "reposts_of_booked"), 2);
    snprintf(msg, sizeof msg,
             "E111: A document with reference AP1-guard already exists "
             "(document %s).",
             doc);
    assert_message(simc_body(f->ss), msg);
    assert_int_equal(simc_count_reference(f->port, "AP1-guard"), 1);
    /* other references are not guarded: the ERP books the same one twice */
    simc_fields(fields, sizeof fields, "G-3", "free text");
    assert_int_equal(simc_post_invoice(f->ss, fields, NULL, 0), 0);
    simc_fields(fields, sizeof fields, "G-4", "free text");
    assert_int_equal(simc_post_invoice(f->ss, fields, NULL, 0), 0);
    assert_int_equal(simc_count_reference(f->port, "free text"), 2);
    /* the guard compares exactly */
    simc_fields(fields, sizeof fields, "G-5", "AP1-guard2");
    assert_int_equal(simc_post_invoice(f->ss, fields, NULL, 0), 0);
}

/* ---- search and journal ------------------------------------------------------------------ */

static int count_rows_html(const char *html)
{
    int n = 0;
    for (const char *p = html; (p = strstr(p, "<tr class=\"row\">")) != NULL; p++)
        n++;
    return n;
}

static void test_sim_search_reference_lag(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char fields[512], doc[64], v[128];
    login(f);
    simc_fields(fields, sizeof fields, "S-1", "AP1-lag-0001");
    assert_int_equal(simc_post_invoice(f->ss, fields, doc, sizeof doc), 0);
    simc_fields(fields, sizeof fields, "S-2", "AP1-lag-0002");
    assert_int_equal(simc_post_invoice(f->ss, fields, NULL, 0), 0);
    simc_fields(fields, sizeof fields, "S-3", "AP1-other");
    assert_int_equal(simc_post_invoice(f->ss, fields, NULL, 0), 0);
    /* index lag: not found right after booking (the journal already shows it) */
    assert_int_equal(simc_get(f->ss, "/erp/ap/invoice/search?reference=AP1-lag-0001", &status), 0);
    assert_int_equal(status, 200);
    assert_non_null(strstr(simc_body(f->ss), "<p id=\"noResults\">No documents found.</p>"));
    assert_null(strstr(simc_body(f->ss), "resultTable"));
    sleep_ms(400);
    assert_int_equal(simc_get(f->ss, "/erp/ap/invoice/search?reference=AP1-lag-0001", &status), 0);
    const char *html = simc_body(f->ss);
    assert_non_null(strstr(html, "<table id=\"resultTable\" class=\"grid\""));
    assert_int_equal(count_rows_html(html), 1);
    assert_int_equal(simc_by_id(html, "resultTable", v, sizeof v), 0);
    char cell[256];
    snprintf(cell, sizeof cell, "<td class=\"docNo\">%s</td>", doc);
    assert_non_null(strstr(html, cell));
    assert_non_null(strstr(html, "<td class=\"amount\">1.234,56</td>"));
    assert_non_null(strstr(html, "<td class=\"invDate\">03.11.2026</td>"));
    assert_non_null(strstr(html, "<td class=\"reference\">AP1-lag-0001</td>"));
    /* prefix match */
    assert_int_equal(simc_get(f->ss, "/erp/ap/invoice/search?reference=AP1-lag", &status), 0);
    assert_int_equal(count_rows_html(simc_body(f->ss)), 2);
    assert_int_equal(simc_get(f->ss, "/erp/ap/invoice/search?reference=AP1-", &status), 0);
    assert_int_equal(count_rows_html(simc_body(f->ss)), 3);
    /* wildcard characters are literal */
    assert_int_equal(simc_get(f->ss, "/erp/ap/invoice/search?reference=AP1-%2A", &status), 0);
    assert_int_equal(count_rows_html(simc_body(f->ss)), 0);
    assert_int_equal(simc_get(f->ss, "/erp/ap/invoice/search?reference=AP1_%25", &status), 0);
    assert_int_equal(count_rows_html(simc_body(f->ss)), 0);
    /* no criteria: the form with a hint, no table */
    assert_int_equal(simc_get(f->ss, "/erp/ap/invoice/search", &status), 0);
    assert_non_null(strstr(simc_body(f->ss), "id=\"apSearch\""));
    assert_null(strstr(simc_body(f->ss), "resultTable"));
}

static void test_sim_search_natural_key(void **state)
{
    struct fx *f = *state;
    long status = 0;
    login(f);
    assert_int_equal(
        simc_book(f->port, "100001", "NK-100", "2026-11-03", "EUR", "10.00", "r1", NULL, 0), 0);
    assert_int_equal(
        simc_book(f->port, "100001", "NK-1000", "2026-11-03", "EUR", "20.00", "r2", NULL, 0), 0);
    assert_int_equal(
        simc_book(f->port, "100002", "NK-100", "2026-11-03", "EUR", "30.00", "r3", NULL, 0), 0);
    sleep_ms(400);
    assert_int_equal(
        simc_get(f->ss, "/erp/ap/invoice/search?vendorNo=100001&vendorInvNo=NK-100", &status), 0);
    const char *html = simc_body(f->ss);
    assert_int_equal(count_rows_html(html), 2); /* prefix on the invoice number */
    assert_null(strstr(html, "<td class=\"vendorNo\">100002</td>"));
    assert_int_equal(
        simc_get(f->ss, "/erp/ap/invoice/search?vendorNo=100002&vendorInvNo=NK-100", &status), 0);
    assert_int_equal(count_rows_html(simc_body(f->ss)), 1);
    assert_non_null(strstr(simc_body(f->ss), "<td class=\"amount\">30,00</td>"));
    assert_int_equal(
        simc_get(f->ss, "/erp/ap/invoice/search?vendorNo=100003&vendorInvNo=NK", &status), 0);
    assert_non_null(strstr(simc_body(f->ss), "id=\"noResults\""));
}

static void test_sim_journal_pagination(void **state)
{
    struct fx *f = *state;
    long status = 0;
    char inv[32], path[128], today[32], v[64];
    for (int i = 0; i < 120; i++) {
        snprintf(inv, sizeof inv, "J-%03d", i);
        assert_int_equal(
            simc_book(f->port, "100003", inv, "2026-11-03", "EUR", "1.00", inv, NULL, 0), 0);
    }
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    snprintf(today, sizeof today, "%02d.%02d.%04d", tm.tm_mday, tm.tm_mon + 1, tm.tm_year + 1900);
    login(f);
    snprintf(path, sizeof path, "/erp/ap/journal?date=%s&page=1", today);
    assert_int_equal(simc_get(f->ss, path, &status), 0);
    const char *html = simc_body(f->ss);
    assert_non_null(strstr(html, "<table id=\"journalTable\""));
    assert_int_equal(count_rows_html(html), 50);
    assert_non_null(strstr(html, "<td class=\"docType\">KR</td>"));
    assert_int_equal(simc_by_id(html, "pageInfo", v, sizeof v), 0);
    assert_string_equal(v, "Page 1 of 3");
    char next[160];
    snprintf(next, sizeof next,
             "<a id=\"nextPage\" href=\"/erp/ap/journal?date=%s&amp;page=2\">Next &gt;</a>", today);
    assert_non_null(strstr(html, next));
    /* ordered by document number: first page starts with the first booking */
    assert_non_null(strstr(html, "<td class=\"vendorInvNo\">J-000</td>"));
    snprintf(path, sizeof path, "/erp/ap/journal?date=%s&page=3", today);
    assert_int_equal(simc_get(f->ss, path, &status), 0);
    html = simc_body(f->ss);
    assert_int_equal(count_rows_html(html), 20);
    assert_null(strstr(html, "id=\"nextPage\""));
    assert_non_null(strstr(html, "<td class=\"vendorInvNo\">J-119</td>"));
    assert_int_equal(simc_by_id(html, "pageInfo", v, sizeof v), 0);
    assert_string_equal(v, "Page 3 of 3");
    /* another day: nothing */
    assert_int_equal(simc_get(f->ss, "/erp/ap/journal?date=01.01.2001", &status), 0);
    assert_non_null(strstr(simc_body(f->ss), "id=\"noResults\""));
    /* a bad date: E106 */
    assert_int_equal(simc_get(f->ss, "/erp/ap/journal?date=32.01.2026", &status), 0);
    assert_message(simc_body(f->ss), "E106: Invalid date '32.01.2026'.");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sim_login_ok, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_login_bad_password, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_login_bad_csrf, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_session_expiry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_post_without_session_not_processed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sim_entry_books_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_entry_formats, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_validation_messages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_token_reuse, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_reference_guard, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_entry_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_search_reference_lag, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_search_natural_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_journal_pagination, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
