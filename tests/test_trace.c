/*
 * test_trace.c - `apbot flow trace`'s decisions as tables (what follows the lookup, how the
 * trace ends, how a hit compares with the invoice) and its printer: grouped by step with the
 * step's role, every control traced back to its flow field and line, the button, the rule, and
 * every text from the ERP escaped for the terminal. The end-to-end trace against the simulator
 * is tests/t_flow_trace.sh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/erp.h"
#include "apbot/flow.h"
#include "apbot/invoice.h"
#include "apbot/money.h"
#include "erp/erp_post.h"
#include "office/trace-int.h"

/* ---- what follows the lookup ----------------------------------------------------------- */

struct next_row {
    enum erp_answer answer;
    enum trace_hit hit;
    bool dry_run;
    enum trace_next want;
};

static void test_trace_after_lookup(void **state)
{
    (void)state;
    static const struct next_row rows[] = {
        /* only a proven absence posts, dry run or not (the dry run stops at the commit) */
        {ERP_NOT_FOUND, TRACE_HIT_NO_DOC, false, TRACE_NEXT_POST},
        {ERP_NOT_FOUND, TRACE_HIT_NO_DOC, true, TRACE_NEXT_POST},
        /* a failed lookup is never an absence */
        {ERP_FAILED, TRACE_HIT_NO_DOC, false, TRACE_NEXT_FAILED},
        {ERP_FAILED, TRACE_HIT_SAME, false, TRACE_NEXT_FAILED},
        {ERP_FAILED, TRACE_HIT_NO_DOC, true, TRACE_NEXT_FAILED},
        /* found and finished: adopt, never post */
        {ERP_FOUND, TRACE_HIT_SAME, false, TRACE_NEXT_DONE},
        {ERP_FOUND, TRACE_HIT_SAME, true, TRACE_NEXT_DONE},
        {ERP_FOUND, TRACE_HIT_CONFLICT, false, TRACE_NEXT_CONFLICT},
        {ERP_FOUND, TRACE_HIT_NO_DOC, false, TRACE_NEXT_FAILED},
        /* a saved draft: its follow-up steps, except under --dry-run (they change the ERP) */
        {ERP_FOUND_UNFINISHED, TRACE_HIT_SAME, false, TRACE_NEXT_FOLLOWUPS},
        {ERP_FOUND_UNFINISHED, TRACE_HIT_SAME, true, TRACE_NEXT_SKIP_FOLLOWUPS},
        {ERP_FOUND_UNFINISHED, TRACE_HIT_CONFLICT, false, TRACE_NEXT_CONFLICT},
        {ERP_FOUND_UNFINISHED, TRACE_HIT_CONFLICT, true, TRACE_NEXT_CONFLICT},
        {ERP_FOUND_UNFINISHED, TRACE_HIT_NO_DOC, false, TRACE_NEXT_FAILED},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        enum trace_next got = trace_after_lookup(rows[i].answer, rows[i].hit, rows[i].dry_run);
        if (got != rows[i].want)
            fail_msg("row %zu: got %d, want %d", i, (int)got, (int)rows[i].want);
    }
    /* Exhaustively: a post follows a proven absence and nothing else. */
    for (int a = ERP_FOUND; a <= ERP_FAILED; a++)
        for (int h = 0; h < TRACE_HIT__COUNT; h++)
            for (int d = 0; d < 2; d++) {
                enum trace_next n = trace_after_lookup((enum erp_answer)a, (enum trace_hit)h, d);
                assert_int_equal(n == TRACE_NEXT_POST, a == ERP_NOT_FOUND);
                if (d)
                    assert_int_not_equal(n, TRACE_NEXT_FOLLOWUPS);
            }
}

static void test_trace_end_of_lookup(void **state)
{
    (void)state;
    assert_int_equal(trace_end_of_lookup(TRACE_NEXT_DONE), TRACE_END_OK);
    assert_int_equal(trace_end_of_lookup(TRACE_NEXT_SKIP_FOLLOWUPS), TRACE_END_OK);
    assert_int_equal(trace_end_of_lookup(TRACE_NEXT_CONFLICT), TRACE_END_FAILED);
    assert_int_equal(trace_end_of_lookup(TRACE_NEXT_FAILED), TRACE_END_FAILED);
    /* a post that was due and did not run is not a success */
    assert_int_equal(trace_end_of_lookup(TRACE_NEXT_POST), TRACE_END_FAILED);
    assert_int_equal(trace_end_of_lookup(TRACE_NEXT_FOLLOWUPS), TRACE_END_FAILED);
}

/* ---- how the trace ends ----------------------------------------------------------------- */

struct end_row {
    enum decide_post_verdict verdict;
    bool released, commit_sent, data_error, dry_run;
    enum trace_end want;
};

static void test_trace_end_of_post(void **state)
{
    (void)state;
    static const struct end_row rows[] = {
        {DECIDE_CONFIRMED, false, true, false, false, TRACE_END_OK},
        /* the dry run's goal: stopped right before the committing request */
        {DECIDE_NOT_SENT, true, false, false, true, TRACE_END_OK},
        /* released without --dry-run, or not released: a failure */
        {DECIDE_NOT_SENT, true, false, false, false, TRACE_END_FAILED},
        {DECIDE_NOT_SENT, false, false, false, true, TRACE_END_FAILED},
        {DECIDE_NOT_SENT, false, false, false, false, TRACE_END_FAILED},
        /* the committing request went out: never the dry run's success */
        {DECIDE_NOT_SENT, true, true, false, true, TRACE_END_FAILED},
        {DECIDE_REJECTED, false, false, true, true, TRACE_END_REJECTED},
        {DECIDE_REJECTED, false, true, false, false, TRACE_END_REJECTED},
        {DECIDE_UNKNOWN, false, true, false, false, TRACE_END_FAILED},
        {DECIDE_SYSTEMIC, false, false, false, true, TRACE_END_FAILED},
        {DECIDE_SAVED, false, true, false, false, TRACE_END_FAILED},
        {DECIDE_ALREADY_EXISTS, false, true, false, false, TRACE_END_FAILED},
        {DECIDE_FOLLOWUP_FAILED, false, true, false, false, TRACE_END_FAILED},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct erp_post_result r;
        memset(&r, 0, sizeof(r));
        r.verdict = rows[i].verdict;
        r.released = rows[i].released;
        r.commit_sent = rows[i].commit_sent;
        r.data_error = rows[i].data_error;
        enum trace_end got = trace_end_of_post(&r, rows[i].dry_run);
        if (got != rows[i].want)
            fail_msg("row %zu: got %d, want %d", i, (int)got, (int)rows[i].want);
        assert_non_null(trace_run_meaning(&r, rows[i].dry_run));
    }
    assert_int_equal(trace_end_of_post(NULL, true), TRACE_END_FAILED);
}

/* ---- a hit against the invoice --------------------------------------------------------- */

static void invoice_fill(struct invoice *inv)
{
    struct invoice_line l;
    invoice_init(inv);
    invoice_set_str(&inv->vendor_id, "100001");
    invoice_set_str(&inv->invoice_number, "INV-1");
    snprintf(inv->issue_date, sizeof(inv->issue_date), "2026-11-03");
    snprintf(inv->currency, sizeof(inv->currency), "EUR");
    inv->exponent = 2;
    memset(&l, 0, sizeof(l));
    l.gl_account = "6000";
    l.description = "Paper";
    l.net = 10000;
    l.tax = 1900;
    invoice_add_line(inv, &l);
    l.gl_account = "6010";
    l.description = "Toner";
    l.net = 3000;
    l.tax = 570;
    invoice_add_line(inv, &l);
    inv->net_total = 13000;
    inv->tax_total = 2470;
    inv->payable = 15470;
}

struct hit_row {
    const char *doc, *vendor, *currency, *amount_text;
    int64_t amount;
    int exponent;
    bool has_amount;
    size_t n; /* rows in the hits (copies of the first) */
    enum trace_hit want;
    const char *why; /* a part of the reason */
};

static void test_trace_check_hits(void **state)
{
    (void)state;
    static const struct hit_row rows[] = {
        {"AP-1", "100001", "EUR", "154.70", 15470, 2, true, 1, TRACE_HIT_SAME, "matches"},
        /* cells the ERP does not show are not compared */
        {"AP-1", NULL, NULL, NULL, 0, 0, false, 1, TRACE_HIT_SAME, "matches"},
        /* a credit note's amount may be shown positive */
        {"AP-1", "100001", "EUR", "-154.70", -15470, 2, true, 1, TRACE_HIT_SAME, "matches"},
        {"AP-1", "100002", "EUR", "154.70", 15470, 2, true, 1, TRACE_HIT_CONFLICT, "vendor 100002"},
        {"AP-1", "100001", "USD", "154.70", 15470, 2, true, 1, TRACE_HIT_CONFLICT, "USD"},
        {"AP-1", "100001", "EUR", "154.71", 15471, 2, true, 1, TRACE_HIT_CONFLICT, "154.71"},
        {"AP-1", "100001", "EUR", "1x", 0, 0, false, 1, TRACE_HIT_CONFLICT, "amount 1x"},
        {"AP-1", "100001", "EUR", "154.70", 15470, 2, true, 2, TRACE_HIT_CONFLICT,
         "2 ERP documents"},
        {NULL, "100001", "EUR", "154.70", 15470, 2, true, 1, TRACE_HIT_NO_DOC, "without"},
        {"", "100001", "EUR", "154.70", 15470, 2, true, 1, TRACE_HIT_NO_DOC, "without"},
        {"AP-1", "100001", "EUR", "154.70", 15470, 2, true, 0, TRACE_HIT_NO_DOC, "no hit"},
    };
    struct invoice inv;
    invoice_fill(&inv);
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct erp_row r[2];
        struct erp_hits h = {.rows = r, .n = rows[i].n};
        char why[256];
        memset(r, 0, sizeof(r));
        for (size_t k = 0; k < 2; k++) {
            r[k].doc = (char *)rows[i].doc;
            r[k].vendor = (char *)rows[i].vendor;
            r[k].currency = (char *)rows[i].currency;
            r[k].amount_text = (char *)rows[i].amount_text;
            r[k].amount = rows[i].amount;
            r[k].exponent = rows[i].exponent;
            r[k].has_amount = rows[i].has_amount;
        }
        enum trace_hit got = trace_check_hits(&h, &inv, why, sizeof(why));
        if (got != rows[i].want || !strstr(why, rows[i].why))
            fail_msg("row %zu: got %d (%s), want %d (%s)", i, (int)got, why, (int)rows[i].want,
                     rows[i].why);
    }
    assert_int_equal(trace_check_hits(NULL, &inv, NULL, 0), TRACE_HIT_NO_DOC);
    invoice_done(&inv);
}

/* ---- the printer ------------------------------------------------------------------------ */

static struct flow *classic_flow(void)
{
    const char *src = getenv("APBOT_SRC");
    char path[1024], err[4096] = "";
    struct flow *f = NULL;
    snprintf(path, sizeof(path), "%s/flows/classic.xml", src ? src : "..");
    if (flow_load(path, &f, err, sizeof(err)) != APBOT_OK)
        fail_msg("flows/classic.xml: %s", err);
    return f;
}

/* Runs fn on a printer writing to memory; returns the text (free it). */
static char *printed(const struct flow *f, const struct invoice *inv,
                     void (*fn)(struct trace_printer *p))
{
    /* static: the stream writes through these after this frame's locals would be gone */
    static char *buf;
    static size_t len;
    buf = NULL;
    len = 0;
    FILE *out = open_memstream(&buf, &len);
    assert_non_null(out);
    struct trace_printer *p = trace_printer_new(out, f, inv, "AP1-ABCDEFGHIJKLMNOPQRST");
    fn(p);
    trace_printer_free(p);
    fclose(out);
    char *ret = buf;
    buf = NULL;
    return ret;
}

static void print_enter_and_save(struct trace_printer *p)
{
    const struct erp_trace_control enter[] = {
        {"form_id", "f1", "page default"},
        {"vendor", "100001", "template"},
        {"account_2", "6010--Printing and Toner",
         "option chosen by label '6010--Printing and Toner'"},
        {"amount_2", "30.00", "template"},
        {"action", "update", "button pressed"},
    };
    const struct erp_trace_control save[] = {
        {"form_id", "f2", "page default"},
        {"action", "save", "button pressed"},
    };
    const char *cn[] = {"doc"};
    const char *cv[] = {"AP-2026-000123"};
    struct erp_trace t;

    memset(&t, 0, sizeof(t));
    t.step = "lookup";
    t.method = "GET";
    t.url = "http://127.0.0.1:1/app/ap/search?reference=AP1-X";
    t.status = 200;
    t.transport = "answered";
    t.outcome = "answered";
    t.why = "page 1: 1 row(s)";
    trace_print(p, &t);
    t.step = "detail";
    t.url = "http://127.0.0.1:1/ap.pl?action=edit&id=AP-1";
    t.outcome = "not-found";
    t.why = "a complete results screen without the key";
    trace_print(p, &t);

    memset(&t, 0, sizeof(t));
    t.step = "enter";
    t.method = "POST";
    t.url = "http://127.0.0.1:1/ap.pl";
    t.status = 200;
    t.transport = "answered";
    t.form = "//form[@name='invoice']";
    t.controls = enter;
    t.n_controls = sizeof(enter) / sizeof(enter[0]);
    t.outcome = "next";
    t.why = "the step was answered as expected";
    trace_print(p, &t);

    t.step = "save";
    t.controls = save;
    t.n_controls = 2;
    t.rule = "saved";
    t.outcome = "saved";
    t.why = "saved: the follow-up steps are due";
    t.captured_names = cn;
    t.captured_values = cv;
    t.n_captured = 1;
    trace_print(p, &t);
}

static void test_trace_print_groups(void **state)
{
    (void)state;
    struct flow *f = classic_flow();
    struct invoice inv;
    invoice_fill(&inv);
    char *out = printed(f, &inv, print_enter_and_save);

    /* one header per step, with its role; the lookup's detail page under the lookup */
    const char *lk = strstr(out, "== lookup (line ");
    assert_non_null(lk);
    assert_null(strstr(lk + 1, "== lookup"));
    assert_non_null(strstr(out, "(a candidate's detail page)"));
    assert_non_null(strstr(out, "== step 'enter' (1 of 3, line "));
    assert_non_null(strstr(out, "before the committing step: it cannot book"));
    assert_non_null(strstr(out, "== step 'save' (2 of 3, line "));
    assert_non_null(strstr(out, "THE COMMITTING STEP"));
    assert_true(strstr(out, "== step 'enter'") < strstr(out, "== step 'save'"));
    /* every control with its source, traced back to the flow's field and line */
    int line_acc = 0, line_vendor = 0, line_form = 0;
    for (size_t i = 0; i < f->n_steps; i++)
        if (strcmp(f->steps[i].name, "enter") == 0) {
            line_acc = f->steps[i].form.lines.fields[0].line;
            line_vendor = f->steps[i].form.fields[0].line;
            line_form = f->steps[i].form.line;
        }
    char want[256];
    snprintf(want, sizeof(want),
             "option chosen by label '6010--Printing and Toner'; <lines> option=\"label-prefix\" "
             "${line.gl_account}-- (line %d)",
             line_acc);
    assert_non_null(strstr(out, want));
    snprintf(want, sizeof(want), "<- template ${vendor.id} (line %d)", line_vendor);
    assert_non_null(strstr(out, want));
    assert_non_null(strstr(out, "\"f1\""));
    assert_non_null(strstr(out, "<- page default"));
    snprintf(want, sizeof(want),
             "<- button pressed: <form submit=\"action\" submit-value=\"update\"> (line %d)",
             line_form);
    assert_non_null(strstr(out, want));
    assert_non_null(strstr(out, "submit-value=\"save\">"));
    /* the rule with what it asked for, the capture, the committing request counted */
    assert_non_null(strstr(out, "rule      'saved' (line "));
    assert_non_null(strstr(out, "outcome saved, matched on status 200 + pattern on the page"));
    assert_non_null(strstr(out, "captured  doc = \"AP-2026-000123\""));
    assert_non_null(strstr(out, "COMMITTING REQUEST"));
    free(out);

    /* counters */
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    struct trace_printer *p = trace_printer_new(mem, f, &inv, "AP1-ABCDEFGHIJKLMNOPQRST");
    print_enter_and_save(p);
    assert_int_equal(trace_printer_exchanges(p), 4);
    assert_int_equal(trace_printer_commits(p), 1);
    trace_printer_free(p);
    fclose(mem);
    free(buf);
    invoice_done(&inv);
    flow_free(f);
}

/* An ERP's text (and the flow's) carrying escape sequences and line breaks. */
static void print_hostile(struct trace_printer *p)
{
    const struct erp_trace_control c[] = {
        {"notes\x1b]0;pwned\x07", "a\x1b[31mred\r\nfake line", "template"},
    };
    const char *cn[] = {"doc\x1b[2J"};
    const char *cv[] = {"AP-1\x9b"};
    struct erp_trace t;
    memset(&t, 0, sizeof(t));
    t.step = "enter";
    t.method = "POST";
    t.url = "http://127.0.0.1:1/ap.pl?x=\x1b[1m";
    t.status = 500;
    t.transport = "answered";
    t.first_location = "/login\x1b[0m";
    t.redirects = 1;
    t.form = "//form[@name='invoice']";
    t.controls = c;
    t.n_controls = 1;
    t.rule = "rule \x1b[5m";
    t.outcome = "unknown";
    t.why = "HTTP 500\nforged: completed";
    t.captured_names = cn;
    t.captured_values = cv;
    t.n_captured = 1;
    t.excerpt = "Error \x1b[31m\\x0A page";
    trace_print(p, &t);
    struct erp_row r;
    memset(&r, 0, sizeof(r));
    r.doc = "AP-\x1b[1m";
    r.status = "draft\n";
    struct erp_hits h = {.rows = &r, .n = 1};
    trace_print_hits(p, &h);
    trace_printer_section(p, "result\x1b[0m");
}

static void test_trace_print_escapes(void **state)
{
    (void)state;
    struct flow *f = classic_flow();
    char *out = printed(f, NULL, print_hostile);
    /* no control byte but the printer's own line ends reaches the terminal */
    for (const unsigned char *c = (const unsigned char *)out; *c; c++) {
        if (*c == '\n')
            continue;
        if (*c < 0x20 || *c == 0x7f)
            fail_msg("raw control byte 0x%02x in: %s", *c, out);
        if (c[0] == 0xc2 && c[1] >= 0x80 && c[1] <= 0x9f)
            fail_msg("raw C1 control in: %s", out);
    }
    assert_non_null(strstr(out, "a\\x1B[31mred\\x0D\\x0Afake line"));
    assert_non_null(strstr(out, "HTTP 500\\x0Aforged: completed"));
    assert_non_null(strstr(out, "/login\\x1B[0m"));
    assert_non_null(strstr(out, "AP-\\x1B[1m"));
    assert_non_null(strstr(out, "draft\\x0A"));
    /* the answer went wrong (unknown): its page text is shown; the driver's own escapes
     * (a raw body) are not doubled */
    assert_non_null(strstr(out, "page      Error \\x1B[31m\\x0A page"));
    assert_null(strstr(out, "\\\\x0A"));
    free(out);
    flow_free(f);
}

static void print_pages(struct trace_printer *p)
{
    struct erp_trace t;
    memset(&t, 0, sizeof(t));
    t.step = "lookup";
    t.method = "GET";
    t.url = "http://127.0.0.1:1/s";
    t.status = 200;
    t.transport = "answered";
    t.outcome = "not-found";
    t.excerpt = "ACME Ledger - Search No transactions found.";
    trace_print(p, &t);
}

static void print_pages_on(struct trace_printer *p)
{
    trace_printer_show_pages(p, true);
    print_pages(p);
}

static void test_trace_print_pages(void **state)
{
    (void)state;
    /* a clean answer's page text only on request */
    char *out = printed(NULL, NULL, print_pages);
    assert_null(strstr(out, "No transactions found"));
    assert_non_null(strstr(out, "result    not-found"));
    free(out);
    out = printed(NULL, NULL, print_pages_on);
    assert_non_null(strstr(out, "page      ACME Ledger - Search No transactions found."));
    free(out);
}

/* A step whose form is not on the page: nothing was filled, nothing had an address. */
static void print_no_form(struct trace_printer *p)
{
    struct erp_trace t;
    memset(&t, 0, sizeof(t));
    t.step = "save";
    t.method = "POST";
    t.url = "";
    t.transport = "not-sent: not submitted";
    t.form = "//form[@name='invoice']";
    t.outcome = "systemic";
    t.why = "the ERP's form is not as the flow describes";
    trace_print(p, &t);
}

static void test_trace_print_no_form(void **state)
{
    (void)state;
    struct flow *f = classic_flow();
    char *out = printed(f, NULL, print_no_form);
    assert_non_null(strstr(out, "[1] POST (no form, so no address)   NOT SENT\n"));
    assert_non_null(strstr(out, "form      //form[@name='invoice']: nothing filled\n"));
    assert_non_null(strstr(out, "answer    none: not-sent: not submitted\n"));
    assert_non_null(strstr(out, "result    systemic: the ERP's form is not as the flow describes"));
    /* nothing was answered: no rule line, and no committing request counted */
    assert_null(strstr(out, "rule "));
    free(out);
    flow_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_after_lookup), cmocka_unit_test(test_trace_end_of_lookup),
        cmocka_unit_test(test_trace_end_of_post),  cmocka_unit_test(test_trace_check_hits),
        cmocka_unit_test(test_trace_print_groups), cmocka_unit_test(test_trace_print_escapes),
        cmocka_unit_test(test_trace_print_pages),  cmocka_unit_test(test_trace_print_no_form),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
