/*
 * test_flow.c - the flow loader and templates: flows/acme.xml loads into exactly the struct
 * the file describes and its outcome rules classify the simulator's pages as docs/erp-sim.md
 * says; every broken flow under tests/data/flows is refused with the right message and line;
 * the embedded schema is flows/flow.rng byte for byte; every variable and formatter expands as
 * documented (amounts for JPY, KWD and negatives, dates, maps, URL encoding, the key cut).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/flow.h"
#include "apbot/invoice.h"
#include "apbot/machine.h"
#include "apbot/match.h"

static char *src_path(const char *rel)
{
    const char *src = getenv("APBOT_SRC");
    size_t n;
    char *p;

    if (!src)
        src = ".";
    n = strlen(src) + strlen(rel) + 2;
    p = malloc(n);
    assert_non_null(p);
    snprintf(p, n, "%s/%s", src, rel);
    return p;
}

static struct flow *load_ok(const char *rel)
{
    char *path = src_path(rel);
    char err[4096] = "";
    struct flow *f = NULL;
    int rc = flow_load(path, &f, err, sizeof(err));

    if (rc != APBOT_OK)
        fail_msg("%s: %s", path, err);
    free(path);
    return f;
}

/* ------------------------------------------------------------------------------------- */

static void test_flow_acme_struct(void **state)
{
    (void)state;
    struct flow *f = load_ok("flows/acme.xml");

    assert_string_equal(f->name, "acme");
    assert_string_equal(f->base_url, "http://127.0.0.1:8080");
    assert_true(f->tls_verify);
    assert_null(f->ca_file);
    assert_false(f->basic_auth);
    assert_int_equal(f->n_session_expired, 1);
    assert_non_null(f->session_expired[0].body);
    assert_null(f->session_expired[0].status);
    assert_null(f->session_expired[0].redirect);

    /* login */
    assert_true(f->login.present);
    assert_string_equal(f->login.get, "/erp/login");
    assert_string_equal(f->login.form.xpath, "//form[@id='loginForm']");
    assert_string_equal(f->login.form.submit, "login");
    assert_int_equal(f->login.form.n_fields, 2);
    assert_string_equal(f->login.form.fields[0].name, "j_username");
    assert_string_equal(f->login.form.fields[0].value, "${secret.user}");
    assert_string_equal(f->login.form.fields[1].name, "j_password");
    assert_string_equal(f->login.form.fields[1].value, "${secret.password}");
    assert_non_null(f->login.success);
    assert_int_equal(f->login.n_rules, 3);
    assert_int_equal(f->login.rules[0].outcome, FLOW_OUT_REJECTED);
    assert_string_equal(f->login.rules[0].name, "bad-credentials");

    /* lookup */
    assert_string_equal(f->lookup.get, "/erp/ap/invoice/search?reference=${key|url}");
    assert_string_equal(f->lookup.key_column, "reference");
    assert_int_equal(f->lookup.n_expect, 0);
    assert_string_equal(f->lookup.table.empty, "//p[@id='noResults']");
    assert_null(f->lookup.table.next);
    assert_int_equal(f->lookup.table.n_cols, 8);
    assert_string_equal(f->lookup.table.cols[0].name, "doc");
    assert_string_equal(f->lookup.table.cols[0].xpath, "td[@class='docNo']");
    assert_int_equal(f->lookup.table.amount_decimal, ',');
    assert_int_equal(f->lookup.table.amount_group, '.');
    assert_string_equal(f->lookup.table.date_format, "%d.%m.%Y");

    /* post: two steps, only the second commits */
    assert_int_equal(f->n_steps, 2);
    assert_string_equal(f->steps[0].name, "check");
    assert_string_equal(f->steps[0].get, "/erp/ap/invoice/new");
    assert_false(f->steps[0].commits);
    assert_string_equal(f->steps[0].form.xpath, "//form[@id='apEntry']");
    assert_string_equal(f->steps[0].form.submit, "check");
    assert_int_equal(f->steps[0].form.n_fields, 10);
    assert_string_equal(f->steps[0].form.fields[8].name, "reference");
    assert_string_equal(f->steps[0].form.fields[8].value, "${key}");
    assert_int_equal(f->steps[0].n_rules, 4);
    assert_int_equal(f->steps[0].rules[0].outcome, FLOW_OUT_REJECTED);
    assert_int_equal(f->steps[0].rules[3].outcome, FLOW_OUT_SESSION_EXPIRED);
    assert_string_equal(f->steps[1].name, "post");
    assert_null(f->steps[1].get);
    assert_true(f->steps[1].commits);
    assert_string_equal(f->steps[1].form.xpath, "//form[@id='apConfirm']");
    assert_string_equal(f->steps[1].form.submit, "post");
    assert_int_equal(f->steps[1].form.n_fields, 0);
    assert_int_equal(f->steps[1].n_rules, 0);

    /* final outcomes, in file order; no catch-all */
    assert_int_equal(f->n_outcomes, 5);
    assert_int_equal(f->outcomes[0].outcome, FLOW_OUT_COMPLETED);
    assert_string_equal(f->outcomes[0].name, "posted-banner");
    assert_string_equal(f->outcomes[0].status, "200");
    assert_int_equal(f->outcomes[1].outcome, FLOW_OUT_ALREADY_EXISTS);
    assert_int_equal(f->outcomes[2].outcome, FLOW_OUT_REJECTED);
    assert_string_equal(f->outcomes[2].status, "200,500");
    assert_int_equal(f->outcomes[3].outcome, FLOW_OUT_NOT_SENT);
    assert_null(f->outcomes[3].body);
    assert_int_equal(f->outcomes[4].outcome, FLOW_OUT_SESSION_EXPIRED);
    for (size_t i = 0; i < f->n_outcomes; i++) {
        assert_true(f->outcomes[i].line > 0);
        assert_true(f->outcomes[i].body || f->outcomes[i].status);
    }

    /* list */
    assert_string_equal(f->list.get, "/erp/ap/journal?date=${date|date:%d.%m.%Y}&page=${page}");
    assert_string_equal(f->list.table.next, "//a[@id='nextPage']/@href");
    assert_int_equal(f->list.max_pages, 200);
    assert_int_equal(f->list.table.n_cols, 9);

    /* policy */
    assert_int_equal(f->policy.connect_timeout_ms, 2000);
    assert_int_equal(f->policy.timeout_ms, 4000);
    assert_int_equal(f->policy.settle_ms, 6000);
    assert_true(f->policy.settle_ms > f->policy.timeout_ms);
    assert_int_equal(f->policy.max_posts, 2);
    assert_int_equal(f->policy.max_cycles, 5);
    assert_int_equal(f->policy.max_attempts, 8);
    assert_int_equal(f->policy.max_sessions, 4);
    assert_int_equal(f->policy.key_length, 24);
    assert_int_equal(f->policy.backoff_base_ms, 250);
    assert_int_equal(f->policy.backoff_cap_ms, 5000);
    assert_int_equal(f->policy.lease_ms, 60000);
    assert_int_equal(f->policy.max_body, 2097152);
    assert_int_equal(f->policy.max_redirects, 5);
    flow_free(f);
}

/* Tries rules in order like the runner: status AND body. Returns the index or -1. */
static int classify(const struct flow_rule *rules, size_t n, long status, const char *body,
                    char **ret_doc, char **ret_reason)
{
    for (size_t i = 0; i < n; i++) {
        struct match_result *m = NULL;
        if (rules[i].status && !match_status(rules[i].status, status))
            continue;
        if (rules[i].body && !match_exec(rules[i].body, body, strlen(body), &m))
            continue;
        if (ret_doc)
            *ret_doc = match_group(m, "doc");
        if (ret_reason)
            *ret_reason = match_group(m, "reason");
        match_result_free(m);
        return (int)i;
    }
    return -1;
}

#define MSG(cls, text)                                                                             \
    "<html><head><title>ACME Financials - AP</title></head><body><div id=\"msgArea\" "             \
    "class=\"msg " cls "\"><span class=\"msgText\">" text "</span></div></body></html>"

static const char login_page[] =
    "<html><title>ACME Financials - Login</title><div id=\"msgArea\" class=\"msg msg-info\">"
    "<span class=\"msgText\">I003: Your session has expired. Please log in again.</span></div>"
    "<form id=\"loginForm\" name=\"loginForm\" method=\"post\" action=\"/erp/login\">"
    "<input type=\"hidden\" name=\"_csrf\" value=\"x\"></form></html>";

static void test_flow_acme_outcomes(void **state)
{
    (void)state;
    struct flow *f = load_ok("flows/acme.xml");
    char *doc = NULL, *reason = NULL;
    int i;

    i = classify(
        f->outcomes, f->n_outcomes, 200,
        MSG("msg-success",
            "I020: Document AP-2026-000123 was posted.") "<span id=\"docNo\">AP-2026-000123</span>",
        &doc, &reason);
    assert_int_equal(f->outcomes[i].outcome, FLOW_OUT_COMPLETED);
    assert_string_equal(doc, "AP-2026-000123");
    free(doc);
    free(reason);

    doc = reason = NULL;
    i = classify(f->outcomes, f->n_outcomes, 200,
                 MSG("msg-error", "E111: A document with reference AP1-ABCDEFGHIJKLMNOPQRST "
                                  "already exists (document AP-2026-000007)."),
                 &doc, &reason);
    assert_int_equal(f->outcomes[i].outcome, FLOW_OUT_ALREADY_EXISTS);
    assert_string_equal(doc, "AP-2026-000007");
    free(doc);
    free(reason);

    /* validation with status 500 is a rejection all the same */
    doc = reason = NULL;
    i = classify(f->outcomes, f->n_outcomes, 500,
                 MSG("msg-error", "E104: Posting period 09/2026 is closed."), &doc, &reason);
    assert_int_equal(f->outcomes[i].outcome, FLOW_OUT_REJECTED);
    assert_string_equal(reason, "E104: Posting period 09/2026 is closed.");
    assert_null(doc);
    free(reason);

    i = classify(f->outcomes, f->n_outcomes, 503, "Service Unavailable", NULL, NULL);
    assert_int_equal(f->outcomes[i].outcome, FLOW_OUT_NOT_SENT);
    i = classify(f->outcomes, f->n_outcomes, 429, "", NULL, NULL);
    assert_int_equal(f->outcomes[i].outcome, FLOW_OUT_NOT_SENT);
    i = classify(f->outcomes, f->n_outcomes, 200, login_page, NULL, NULL);
    assert_int_equal(f->outcomes[i].outcome, FLOW_OUT_SESSION_EXPIRED);
    assert_true(match_exec(f->session_expired[0].body, login_page, strlen(login_page), NULL));

    /* ambiguous answers match no rule: the runner calls them unknown */
    assert_int_equal(
        classify(f->outcomes, f->n_outcomes, 500, "<html>Internal Server Error</html>", NULL, NULL),
        -1);
    assert_int_equal(classify(f->outcomes, f->n_outcomes, 200, "<html>#@!garbled", NULL, NULL), -1);
    assert_int_equal(classify(f->outcomes, f->n_outcomes, 200, "", NULL, NULL), -1);
    /* the banner with a 500 is not success either */
    assert_int_equal(classify(f->outcomes, f->n_outcomes, 500,
                              MSG("msg-success", "I020: Document AP-2026-000123 was posted."), NULL,
                              NULL),
                     -1);
    /* E109 at the committing step may mean the token was already used: unknown, reconcile */
    assert_int_equal(
        classify(f->outcomes, f->n_outcomes, 200,
                 MSG("msg-error", "E109: This form was already submitted. Please reload the form."),
                 NULL, NULL),
        -1);

    /* at the check step E109 is provably not sent; a validation message is a rejection */
    i = classify(f->steps[0].rules, f->steps[0].n_rules, 200,
                 MSG("msg-error", "E109: This form was already submitted. Please reload the form."),
                 NULL, NULL);
    assert_int_equal(f->steps[0].rules[i].outcome, FLOW_OUT_NOT_SENT);
    reason = NULL;
    i = classify(f->steps[0].rules, f->steps[0].n_rules, 200,
                 MSG("msg-error", "E102: Vendor 100099 does not exist."), NULL, &reason);
    assert_int_equal(f->steps[0].rules[i].outcome, FLOW_OUT_REJECTED);
    assert_string_equal(reason, "E102: Vendor 100099 does not exist.");
    free(reason);

    /* login */
    i = classify(f->login.rules, f->login.n_rules, 200,
                 MSG("msg-error", "E001: Invalid user name or password."), NULL, NULL);
    assert_int_equal(f->login.rules[i].outcome, FLOW_OUT_REJECTED);
    assert_true(match_exec(f->login.success, "<h1>Welcome, clerk</h1>", 23, NULL));
    flow_free(f);
}

/* ------------------------------------------------------------------------------------- */

struct broken {
    const char *file;
    int rc;
    const char *line; /* ":N: " expected in the message, or NULL for a file-level problem */
    const char *text; /* expected substring */
};

static const struct broken broken_flows[] = {
    {"schema-unknown-element.xml", APBOT_E_PARSE, ":14: ", "schema: Did not expect element lokup"},
    {"not-xml.xml", APBOT_E_PARSE, ":4: ", "Opening and ending tag mismatch"},
    {"doctype.xml", APBOT_E_PARSE, NULL, "must not have a DOCTYPE"},
    {"unknown-variable.xml", APBOT_E_INVAL, ":24: ", "unknown variable ${invoice.amount}"},
    {"unknown-formatter.xml", APBOT_E_INVAL, ":24: ", "unknown formatter 'money'"},
    {"bad-regex.xml", APBOT_E_INVAL,
     ":28: ", "rule 'booked': bad pattern: missing closing parenthesis at offset 21"},
    {"bad-xpath.xml", APBOT_E_INVAL, ":22: ", "XPath '//form[@id='entry'' does not compile"},
    {"no-completed.xml", APBOT_E_INVAL, ":27: ", "no rule with outcome=\"completed\""},
    {"no-commit.xml", APBOT_E_INVAL, ":20: ", "no step has commits=\"true\""},
    {"key-too-short.xml", APBOT_E_INVAL, ":38: ", "key-length=\"12\": out of range 16..24"},
    {"bad-status.xml", APBOT_E_INVAL, ":30: ", "bad status spec '5xy'"},
    {"catch-all-completed.xml", APBOT_E_INVAL, ":28: ", "must not match an empty page"},
    {"settle-short.xml", APBOT_E_INVAL, ":38: ", "settle-ms (500) is shorter than timeout-ms"},
    {"secret-in-url.xml", APBOT_E_INVAL, ":14: ", "${secret.user} is not available here"},
};

static void test_flow_broken_refused(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(broken_flows) / sizeof(broken_flows[0]); i++) {
        const struct broken *b = &broken_flows[i];
        char rel[256], err[4096] = "", want[300];
        char *path;
        struct flow *f = (struct flow *)&err; /* sentinel: must stay untouched */
        int rc;

        snprintf(rel, sizeof(rel), "tests/data/flows/%s", b->file);
        path = src_path(rel);
        rc = flow_load(path, &f, err, sizeof(err));
        if (rc != b->rc || !strstr(err, b->text))
            fail_msg("%s: rc %d (want %d), err: %s", b->file, rc, b->rc, err);
        assert_ptr_equal(f, (struct flow *)&err);
        /* the message names the file and the line */
        snprintf(want, sizeof(want), "%s%s", path, b->line ? b->line : ": ");
        if (!strstr(err, want))
            fail_msg("%s: want '%s' in: %s", b->file, want, err);
        free(path);
    }
}

static void test_flow_minimal_ok_and_defaults(void **state)
{
    (void)state;
    struct flow *f = load_ok("tests/data/flows/ok-minimal.xml");
    struct flow_policy d = flow_policy_default();

    assert_int_equal(f->n_steps, 1);
    assert_true(f->steps[0].commits);
    assert_int_equal(f->policy.timeout_ms, 1000);
    assert_int_equal(f->policy.settle_ms, 2000);
    assert_int_equal(f->policy.max_posts, d.max_posts);
    assert_int_equal(f->policy.key_length, INVOICE_KEY_LEN);
    assert_int_equal(f->policy.max_body, d.max_body);
    assert_int_equal(f->list.max_pages, 100);
    assert_int_equal(f->lookup.table.amount_decimal, '.');
    assert_int_equal(f->lookup.table.amount_group, '\0');
    assert_string_equal(f->lookup.table.date_format, "%Y-%m-%d");
    flow_free(f);
}

static void test_flow_every_problem_reported(void **state)
{
    (void)state;
    /* bad-regex + bad-xpath + ... in one file: write a temporary flow with several faults */
    char *path = src_path("tests/data/flows/ok-minimal.xml");
    FILE *in = fopen(path, "rb");
    char buf[8192], tmp[] = "/tmp/apbot-flow-XXXXXX.xml", err[4096] = "", small[120] = "";
    size_t n;
    char *s;
    int fd;
    FILE *out;
    struct flow *f = NULL;

    assert_non_null(in);
    n = fread(buf, 1, sizeof(buf) - 1, in);
    fclose(in);
    buf[n] = '\0';
    /* three faults on three lines */
    s = strstr(buf, "status=\"503\"");
    assert_non_null(s);
    memcpy(s, "status=\"6xx\"", 12);
    s = strstr(buf, "${key|url}");
    assert_non_null(s);
    memcpy(s, "${kez|url}", 10);
    s = strstr(buf, "td[2]");
    assert_non_null(s);
    memcpy(s, "td[[2", 5);
    fd = mkstemps(tmp, 4);
    assert_true(fd >= 0);
    out = fdopen(fd, "wb");
    fwrite(buf, 1, n, out);
    fclose(out);
    assert_int_equal(flow_load(tmp, &f, err, sizeof(err)), APBOT_E_INVAL);
    assert_non_null(strstr(err, ":14: lookup get: unknown variable ${kez}"));
    assert_non_null(strstr(err, ":17: column 'reference': XPath"));
    assert_non_null(strstr(err, ":30: rule 'busy': bad status spec '6xx'"));
    /* sorted by line */
    assert_true(strstr(err, ":14:") < strstr(err, ":17:"));
    assert_true(strstr(err, ":17:") < strstr(err, ":30:"));
    /* a small buffer keeps whole lines and says how many were left out */
    assert_int_equal(flow_load(tmp, &f, small, sizeof(small)), APBOT_E_INVAL);
    assert_non_null(strstr(small, "more problems not shown"));
    assert_null(f);
    remove(tmp);
    free(path);
}

static void test_flow_schema_is_flow_rng(void **state)
{
    (void)state;
    char *path = src_path("flows/flow.rng");
    FILE *in = fopen(path, "rb");
    char *file, *text = flow_schema_text();
    long n;

    assert_non_null(in);
    fseek(in, 0, SEEK_END);
    n = ftell(in);
    fseek(in, 0, SEEK_SET);
    file = malloc((size_t)n + 1);
    assert_int_equal(fread(file, 1, (size_t)n, in), (size_t)n);
    file[n] = '\0';
    fclose(in);
    if (strcmp(file, text) != 0)
        fail_msg(
            "the embedded schema differs from flows/flow.rng: the build did not regenerate it");
    free(file);
    free(text);
    free(path);
}

/* The default of a policy attribute as docs/writing-flows.md's table gives it, or -1. */
static long doc_default(const char *doc, const char *attr)
{
    char want[80];
    const char *p;

    snprintf(want, sizeof(want), "\n| `%s` | ", attr);
    p = strstr(doc, want);
    if (!p)
        return -1;
    return strtol(p + strlen(want), NULL, 10);
}

/* flow_policy_default() is the one place of the defaults: the guide's table and the state
 * machine's own budget defaults must say the same. */
static void test_flow_policy_defaults_one_place(void **state)
{
    (void)state;
    struct flow_policy d = flow_policy_default();
    struct machine_policy m = machine_policy_default();
    char *path = src_path("docs/writing-flows.md");
    FILE *in = fopen(path, "rb");
    static char doc[256 * 1024];
    size_t n;

    assert_non_null(in);
    n = fread(doc, 1, sizeof(doc) - 1, in);
    fclose(in);
    doc[n] = '\0';
    assert_int_equal(doc_default(doc, "connect-timeout-ms"), d.connect_timeout_ms);
    assert_int_equal(doc_default(doc, "timeout-ms"), d.timeout_ms);
    assert_int_equal(doc_default(doc, "settle-ms"), d.settle_ms);
    assert_int_equal(doc_default(doc, "max-posts"), d.max_posts);
    assert_int_equal(doc_default(doc, "max-cycles"), d.max_cycles);
    assert_int_equal(doc_default(doc, "max-attempts"), d.max_attempts);
    assert_int_equal(doc_default(doc, "max-sessions"), d.max_sessions);
    assert_int_equal(doc_default(doc, "key-length"), d.key_length);
    assert_int_equal(doc_default(doc, "backoff-base-ms"), d.backoff_base_ms);
    assert_int_equal(doc_default(doc, "backoff-cap-ms"), d.backoff_cap_ms);
    assert_int_equal(doc_default(doc, "lease-ms"), d.lease_ms);
    assert_int_equal(doc_default(doc, "max-body-bytes"), (long)d.max_body);
    assert_int_equal(doc_default(doc, "max-redirects"), d.max_redirects);
    assert_int_equal(m.max_posts, d.max_posts);
    assert_int_equal(m.max_cycles, d.max_cycles);
    assert_int_equal(m.max_attempts, d.max_attempts);
    /* the defaults pass their own relation checks */
    assert_true(d.settle_ms >= d.timeout_ms);
    assert_true(d.lease_ms > d.timeout_ms);
    assert_true(d.connect_timeout_ms <= d.timeout_ms);
    assert_true(d.backoff_cap_ms >= d.backoff_base_ms);
    free(path);
}

/* ------------------------------------------------------------------------------------- */

static struct invoice_line test_line = {
    .description = "Office chairs, 4 x \"Ergo\"",
    .gl_account = "6000",
};

static void make_invoice(struct invoice *inv, const char *currency, int exponent, int64_t payable)
{
    memset(inv, 0, sizeof(*inv));
    inv->vendor_id = "100001";
    inv->vendor_name = "Müller & Söhne GmbH";
    inv->invoice_number = "INV 2026/0042";
    inv->doc_type = INVOICE_DOC_INVOICE;
    memcpy(inv->issue_date, "2026-11-03", 11);
    memcpy(inv->due_date, "2026-12-03", 11);
    memcpy(inv->currency, currency, strlen(currency) + 1);
    inv->exponent = exponent;
    inv->payable = payable;
    inv->net_total = payable;
    inv->tax_total = 0;
    inv->lines = &test_line;
    inv->n_lines = 1;
}

static void expect(const struct flow *f, const char *tmpl, const struct flow_vars *v,
                   const char *want)
{
    char err[APBOT_ERR_LEN] = "";
    char *got = NULL;
    int rc = flow_expand(f, tmpl, v, &got, err, sizeof(err));

    if (rc != APBOT_OK)
        fail_msg("%s: rc %d: %s", tmpl, rc, err);
    if (strcmp(got, want) != 0)
        fail_msg("%s: got '%s', want '%s'", tmpl, got, want);
    free(got);
}

static void expect_fail(const struct flow *f, const char *tmpl, const struct flow_vars *v,
                        const char *why)
{
    char err[APBOT_ERR_LEN] = "";
    char *got = (char *)"untouched";

    assert_int_not_equal(flow_expand(f, tmpl, v, &got, err, sizeof(err)), APBOT_OK);
    assert_string_equal(got, "untouched");
    if (!strstr(err, why))
        fail_msg("%s: want '%s' in '%s'", tmpl, why, err);
}

static void test_flow_expand_variables(void **state)
{
    (void)state;
    struct flow *f = load_ok("flows/acme.xml");
    struct invoice inv;
    struct flow_vars v = {.inv = &inv,
                          .key = "AP1-ABCDEFGHIJKLMNOPQRST",
                          .date = "2026-11-30",
                          .page = 3,
                          .user = "clerk",
                          .password = "p&ss w0rd"};

    make_invoice(&inv, "EUR", 2, 123456);
    expect(f, "${key}", &v, "AP1-ABCDEFGHIJKLMNOPQRST");
    expect(f, "${invoice.number}", &v, "INV 2026/0042");
    expect(f, "${invoice.vendor_id}/${vendor.id}", &v, "100001/100001");
    expect(f, "${invoice.vendor_name}|${vendor.name}", &v,
           "Müller & Söhne GmbH|Müller & Söhne GmbH");
    expect(f, "${invoice.doc_type}", &v, "invoice");
    expect(f, "${invoice.issue_date} ${invoice.due_date}", &v, "2026-11-03 2026-12-03");
    expect(f, "${invoice.currency}", &v, "EUR");
    expect(f, "${invoice.payable} ${invoice.net} ${invoice.tax}", &v, "1234.56 1234.56 0.00");
    expect(f, "${invoice.gl_account}", &v, "6000");
    expect(f, "${invoice.description}", &v, "Office chairs, 4 x \"Ergo\"");
    expect(f, "${secret.user}:${secret.password}", &v, "clerk:p&ss w0rd");
    expect(f, "${date} p${page}", &v, "2026-11-30 p3");
    expect(f, "no placeholders, $ and { alone", &v, "no placeholders, $ and { alone");
    expect(f, "", &v, "");

    /* missing values expand to "" */
    struct flow_vars none = {0};
    expect(f, "[${key}][${invoice.number}][${secret.user}][${date|date:%d.%m.%Y}]", &none,
           "[][][][]");
    inv.due_date[0] = '\0';
    inv.n_lines = 0;
    expect(f, "[${invoice.due_date|date:%d.%m.%Y}][${invoice.gl_account}]", &v, "[][]");

    /* unknown variables never reach expansion from a loaded flow, but are refused anyway */
    expect_fail(f, "${nope}", &v, "unknown variable");
    expect_fail(f, "${key", &v, "unterminated");
    flow_free(f);
}

static void test_flow_expand_formatters(void **state)
{
    (void)state;
    struct flow *f = load_ok("flows/acme.xml");
    struct invoice inv;
    struct flow_vars v = {.inv = &inv, .key = "AP1-ABCDEFGHIJKLMNOPQRST", .date = "2027-01-05"};

    make_invoice(&inv, "EUR", 2, 123456789);
    /* amounts */
    expect(f, "${invoice.payable|amount:,.}", &v, "1.234.567,89");
    expect(f, "${invoice.payable|amount:,}", &v, "1234567,89");
    expect(f, "${invoice.payable|amount:.,}", &v, "1,234,567.89");
    expect(f, "${invoice.payable|amount:. }", &v, "1 234 567.89");
    expect(f, "${invoice.payable|amount:.'}", &v, "1'234'567.89");
    make_invoice(&inv, "JPY", 0, 1500000);
    expect(f, "${invoice.payable|amount:,.}", &v, "1.500.000");
    expect(f, "${invoice.payable}", &v, "1500000");
    make_invoice(&inv, "KWD", 3, 1234500);
    expect(f, "${invoice.payable|amount:,.}", &v, "1.234,500");
    expect(f, "${invoice.payable}", &v, "1234.500");
    make_invoice(&inv, "EUR", 2, -5);
    expect(f, "${invoice.payable|amount:,.}", &v, "-0,05");
    expect(f, "${invoice.payable|abs|amount:,.}", &v, "0,05");
    make_invoice(&inv, "EUR", 2, -123456);
    expect(f, "${invoice.payable|amount:,.}", &v, "-1.234,56");
    expect(f, "${invoice.payable|abs}", &v, "1234.56");
    expect(f, "${invoice.payable|url}", &v, "-1234.56");

    /* dates */
    expect(f, "${invoice.issue_date|date:%d.%m.%Y}", &v, "03.11.2026");
    expect(f, "${invoice.issue_date|date:%m/%d/%y}", &v, "11/03/26");
    expect(f, "${invoice.issue_date|date:%Y%m%d}", &v, "20261103");
    expect(f, "${invoice.issue_date|date:100%%}", &v, "100%");
    expect(f, "${date|date:%d.%m.%Y}", &v, "05.01.2027");
    memcpy(inv.issue_date, "3.11.2026", 10);
    expect_fail(f, "${invoice.issue_date|date:%d.%m.%Y}", &v, "not YYYY-MM-DD");

    /* map, upper, lower, trunc, url */
    expect(f, "${invoice.doc_type|map:invoice=KR,credit-note=KG}", &v, "KR");
    inv.doc_type = INVOICE_DOC_CREDIT_NOTE;
    expect(f, "${invoice.doc_type|map:invoice=KR,credit-note=KG}", &v, "KG");
    expect(f, "${invoice.doc_type|upper}", &v, "CREDIT-NOTE");
    expect_fail(f, "${invoice.doc_type|map:invoice=KR}", &v, "no mapping for 'credit-note'");
    expect(f, "${invoice.currency|lower}", &v, "eur");
    expect(f, "${invoice.vendor_name|upper}", &v, "MüLLER & SöHNE GMBH");
    expect(f, "${invoice.vendor_name|trunc:3}", &v, "Mül");
    expect(f, "${invoice.vendor_name|trunc:2}", &v, "Mü");
    expect(f, "${invoice.number|trunc:100}", &v, "INV 2026/0042");
    expect(f, "${invoice.number|url}", &v, "INV%202026%2F0042");
    expect(f, "${invoice.vendor_name|url}", &v, "M%C3%BCller%20%26%20S%C3%B6hne%20GmbH");
    expect(f, "a=${key|url}&b=${invoice.number|trunc:3|lower|url}", &v,
           "a=AP1-ABCDEFGHIJKLMNOPQRST&b=inv");
    flow_free(f);
}

static void test_flow_key_cut(void **state)
{
    (void)state;
    struct flow *f = load_ok("flows/acme.xml");
    struct flow_vars v = {.key = "AP1-ABCDEFGHIJKLMNOPQRST"};
    char *cut;

    cut = flow_key_cut(f, "AP1-ABCDEFGHIJKLMNOPQRST");
    assert_string_equal(cut, "AP1-ABCDEFGHIJKLMNOPQRST");
    free(cut);
    f->policy.key_length = 16;
    cut = flow_key_cut(f, "AP1-ABCDEFGHIJKLMNOPQRST");
    assert_string_equal(cut, "AP1-ABCDEFGHIJKL");
    free(cut);
    expect(f, "ref=${key}", &v, "ref=AP1-ABCDEFGHIJKL");
    cut = flow_key_cut(f, "AP1-SHORT");
    assert_string_equal(cut, "AP1-SHORT");
    free(cut);
    assert_null(flow_key_cut(f, NULL));
    flow_free(f);
}

static void test_flow_url_and_names(void **state)
{
    (void)state;
    char *u;

    u = flow_url("http://127.0.0.1:8080", "/erp/login");
    assert_string_equal(u, "http://127.0.0.1:8080/erp/login");
    free(u);
    u = flow_url("https://erp.example.com/base/", "/erp/login");
    assert_string_equal(u, "https://erp.example.com/erp/login");
    free(u);
    u = flow_url("https://erp.example.com/base/", "x?y=1");
    assert_string_equal(u, "https://erp.example.com/base/x?y=1");
    free(u);
    u = flow_url("http://a", "https://b/c");
    assert_string_equal(u, "https://b/c");
    free(u);
    for (int o = 0; o < FLOW_OUT__COUNT; o++)
        assert_int_equal(flow_outcome_from_name(flow_outcome_name((enum flow_outcome)o)), o);
    assert_int_equal(flow_outcome_from_name("success"), FLOW_OUT__COUNT);
    assert_string_equal(flow_outcome_name(FLOW_OUT_ALREADY_EXISTS), "already-exists");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flow_acme_struct),
        cmocka_unit_test(test_flow_acme_outcomes),
        cmocka_unit_test(test_flow_broken_refused),
        cmocka_unit_test(test_flow_minimal_ok_and_defaults),
        cmocka_unit_test(test_flow_every_problem_reported),
        cmocka_unit_test(test_flow_schema_is_flow_rng),
        cmocka_unit_test(test_flow_policy_defaults_one_place),
        cmocka_unit_test(test_flow_expand_variables),
        cmocka_unit_test(test_flow_expand_formatters),
        cmocka_unit_test(test_flow_key_cut),
        cmocka_unit_test(test_flow_url_and_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
