/*
 * test_flow.c - the flow loader and templates: flows/acme.xml loads into exactly the struct
 * the file describes and its outcome rules classify the simulator's pages as docs/erp-sim.md
 * says; every broken flow under tests/data/flows is refused with the right message and line;
 * the embedded schema is flows/flow.rng byte for byte; every variable and formatter expands as
 * documented (amounts for JPY, KWD and negatives, dates, maps, URL encoding, the key cut);
 * amount expressions (sums, differences, negation, a rate with its rounding) checked at load
 * with the problem named and expanded exactly, and a line's tax and gross as the lines state
 * them or as their share of the invoice's tax.
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
#include "apbot/linetax.h"
#include "apbot/machine.h"
#include "apbot/money.h"
#include "flow/flow-int.h"
#include "web/match.h"

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
    assert_string_equal(f->lookup.table.screen, "//form[@id='apSearch']");
    assert_int_equal(f->lookup.table.max_rows, 200);
    assert_int_equal(f->lookup.max_pages, 5);
    assert_false(f->lookup.detail.present);
    assert_false(f->lookup.has_finished);
    assert_int_equal(flow_commit_index(f), 1);
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
    assert_int_equal(f->steps[0].form.n_fields, 12); /* 10 + lineCount, taxAmount */
    assert_true(f->steps[0].form.lines.present);
    assert_int_equal(f->steps[0].form.lines.missing, FLOW_MISSING_ADD);
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
    char buf[8192], tmp[] = "/tmp/apbot-flow-XXXXXX.xml", err[4096] = "", *small;
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
    /* a small buffer keeps whole lines and says how many were left out: room for the first
     * line and the note, not for the second */
    size_t first = (size_t)(strchr(err, '\n') - err);
    small = calloc(1, first + 60);
    assert_int_equal(flow_load(tmp, &f, small, first + 60), APBOT_E_INVAL);
    assert_non_null(strstr(small, "more problems not shown"));
    assert_int_equal(strncmp(small, err, first + 1), 0);
    free(small);
    assert_null(f);
    remove(tmp);
    free(path);
}

static void test_flow_schema_is_flow_rng(void **state)
{
    (void)state;
    char *path = src_path("flows/flow.rng");
    FILE *in = fopen(path, "rb");
    char *file;
    const char *text = (const char *)flow_schema_rng;
    long n;

    assert_non_null(in);
    fseek(in, 0, SEEK_END);
    n = ftell(in);
    fseek(in, 0, SEEK_SET);
    file = malloc((size_t)n + 1);
    assert_int_equal(fread(file, 1, (size_t)n, in), (size_t)n);
    file[n] = '\0';
    fclose(in);
    if ((size_t)n != flow_schema_rng_len || strcmp(file, text) != 0)
        fail_msg(
            "the embedded schema differs from flows/flow.rng: the build did not regenerate it");
    free(file);
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

static void test_flow_outcome_names(void **state)
{
    (void)state;
    for (int o = 0; o < FLOW_OUT__COUNT; o++)
        assert_int_equal(flow_outcome_from_name(flow_outcome_name((enum flow_outcome)o)), o);
    assert_int_equal(flow_outcome_from_name("success"), FLOW_OUT__COUNT);
    assert_string_equal(flow_outcome_name(FLOW_OUT_ALREADY_EXISTS), "already-exists");
}

/* ------------------------------------------------------------------------------------- */
/* Round 2: every new element loads into the struct the file describes. */

/* Reads a whole file under APBOT_SRC into a heap string. */
static char *read_src(const char *rel)
{
    char *path = src_path(rel);
    FILE *in = fopen(path, "rb");
    char *text;
    long n;

    if (!in)
        fail_msg("cannot open %s", path);
    fseek(in, 0, SEEK_END);
    n = ftell(in);
    fseek(in, 0, SEEK_SET);
    text = malloc((size_t)n + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)n, in), (size_t)n);
    text[n] = '\0';
    fclose(in);
    free(path);
    return text;
}

static void test_flow_full_struct(void **state)
{
    (void)state;
    struct flow *f = load_ok("tests/data/flows/ok-full.xml");
    const struct flow_lookup *lk = &f->lookup;

    /* erp: three markers, each with its own conditions */
    assert_true(f->basic_auth);
    assert_int_equal(f->n_session_expired, 3);
    assert_string_equal(f->session_expired[0].status, "401");
    assert_null(f->session_expired[0].redirect);
    assert_null(f->session_expired[0].body);
    assert_string_equal(f->session_expired[1].status, "3xx");
    assert_non_null(f->session_expired[1].redirect);
    assert_true(match_exec(f->session_expired[1].redirect, "http://h/login.pl?x=1", 21, NULL));
    assert_null(f->session_expired[2].status);
    assert_non_null(f->session_expired[2].body);
    assert_true(f->session_expired[2].raw);
    assert_false(f->session_expired[1].raw);
    assert_true(f->session_expired[0].line < f->session_expired[2].line);

    /* a login without a form */
    assert_true(f->login.present);
    assert_false(f->login.has_form);
    assert_string_equal(f->login.method, "GET");
    assert_string_equal(f->login.success_status, "200");
    assert_non_null(f->login.success);
    assert_false(f->login.success_raw);

    /* lookup: bounds, screen, detail, finished */
    assert_int_equal(lk->max_pages, 3);
    assert_int_equal(lk->max_candidates, 4);
    assert_string_equal(lk->table.screen, "//form[@id='search']");
    assert_int_equal(lk->table.max_rows, 50);
    assert_string_equal(lk->table.next, "//a[@rel='next']/@href");
    assert_true(lk->detail.present);
    assert_string_equal(lk->detail.get, "/edit?id=${row.doc|url}");
    assert_null(lk->detail.table.rows);
    assert_int_equal(lk->detail.table.n_cols, 2);
    assert_string_equal(lk->detail.table.cols[0].name, "reference");
    assert_int_equal(lk->detail.table.amount_decimal, ',');
    assert_int_equal(lk->detail.table.amount_group, '.');
    assert_int_equal(lk->n_expect, 1);
    assert_true(lk->has_finished);
    assert_string_equal(lk->finished.name, "status");
    assert_string_equal(lk->finished.value, "posted");

    /* post: four steps, the second commits */
    assert_int_equal(f->n_steps, 4);
    assert_int_equal(flow_commit_index(f), 1);
    assert_true(f->steps[0].repeat_until_lines);
    assert_false(f->steps[1].repeat_until_lines);
    assert_string_equal(f->steps[0].form.submit, "action");
    assert_string_equal(f->steps[0].form.submit_value, "update");
    assert_int_equal(f->steps[0].form.n_fields, 5); /* 4 before <lines>, 1 after */
    assert_string_equal(f->steps[0].form.fields[4].name, "memo");
    assert_int_equal(f->steps[0].form.fields[0].option, FLOW_OPTION_DEFAULT);
    assert_int_equal(f->steps[0].form.fields[1].option, FLOW_OPTION_VALUE);
    assert_true(f->steps[0].form.lines.present);
    assert_int_equal(f->steps[0].form.lines.missing, FLOW_MISSING_SKIP);
    assert_int_equal(f->steps[0].form.lines.n_fields, 2);
    assert_string_equal(f->steps[0].form.lines.fields[0].name, "account_${line.n}");
    assert_int_equal(f->steps[0].form.lines.fields[0].option, FLOW_OPTION_LABEL_PREFIX);
    assert_int_equal(f->steps[1].form.lines.missing, FLOW_MISSING_ADD);
    assert_int_equal(f->steps[1].form.lines.fields[0].option, FLOW_OPTION_LABEL);
    assert_false(f->steps[2].form.lines.present);
    assert_int_equal(f->steps[0].n_captures, 1);
    assert_string_equal(f->steps[0].captures[0].name, "token");
    assert_false(f->steps[0].captures[0].raw);
    assert_true(f->steps[2].captures[0].raw);
    assert_int_equal(f->steps[1].rules[1].outcome, FLOW_OUT_SAVED);
    assert_false(f->steps[1].rules[1].raw);
    assert_true(f->steps[1].rules[0].raw);

    /* outcomes: one by URL alone */
    assert_int_equal(f->n_outcomes, 3);
    assert_null(f->outcomes[1].body);
    assert_null(f->outcomes[1].status);
    assert_non_null(f->outcomes[1].url);

    /* list: a range by invoice date */
    assert_int_equal(f->list.by, FLOW_LIST_BY_INVOICE);
    assert_int_equal(f->list.max_pages, 1);
    flow_free(f);

    /* the older flow gets the defaults of every new attribute */
    f = load_ok("tests/data/flows/ok-minimal.xml");
    assert_true(f->login.has_form);
    assert_null(f->login.method);
    assert_null(f->login.success_status);
    assert_int_equal(f->lookup.max_pages, 5);
    assert_int_equal(f->lookup.max_candidates, 10);
    assert_null(f->lookup.table.screen);
    assert_int_equal(f->lookup.table.max_rows, 0);
    assert_false(f->lookup.detail.present);
    assert_false(f->lookup.has_finished);
    assert_int_equal(f->list.by, FLOW_LIST_BY_BOOKED);
    assert_false(f->steps[0].form.lines.present);
    assert_null(f->steps[0].form.submit_value);
    assert_int_equal(f->steps[0].n_captures, 0);
    assert_int_equal(flow_commit_index(f), 0);
    flow_free(f);
}

/* Tries rules in order: status, final URL and body. Returns the index or -1. */
static int classify_url(const struct flow_rule *rules, size_t n, long status, const char *url,
                        const char *body, char **ret_doc)
{
    for (size_t i = 0; i < n; i++) {
        struct match_result *m = NULL;
        if (rules[i].status && !match_status(rules[i].status, status))
            continue;
        if (rules[i].url && !match_exec(rules[i].url, url, strlen(url), NULL))
            continue;
        if (rules[i].body && !match_exec(rules[i].body, body, strlen(body), &m))
            continue;
        if (ret_doc)
            *ret_doc = match_group(m, "doc");
        match_result_free(m);
        return (int)i;
    }
    return -1;
}

/* flows/classic.xml: the shape the spec gives, and its rules read the classic pages. */
static void test_flow_classic(void **state)
{
    (void)state;
    struct flow *f = load_ok("flows/classic.xml");
    size_t ci = flow_commit_index(f);
    char *doc = NULL;
    int i;

    assert_string_equal(f->name, "classic");
    assert_true(f->basic_auth);
    assert_true(f->n_session_expired >= 2);
    assert_false(f->login.has_form);
    assert_string_equal(f->login.method, "GET");
    assert_string_equal(f->lookup.key_column, "reference");
    assert_true(f->lookup.detail.present);
    assert_true(f->lookup.has_finished);
    assert_int_equal(f->lookup.table.max_rows, 100);
    assert_int_equal(f->list.by, FLOW_LIST_BY_INVOICE);
    assert_string_equal(f->list.currency, "EUR"); /* for a listing without the column */
    assert_null(f->lookup.currency);
    /* enter (repeated until every line has its row), save (commits), approve by ${doc} */
    assert_int_equal(f->n_steps, 3);
    assert_int_equal(ci, 1);
    assert_true(f->steps[0].repeat_until_lines);
    assert_true(f->steps[0].form.lines.present);
    assert_string_equal(f->steps[1].form.submit_value, "save");
    /* the approve is sent as it is, by the document's id: no edit page fetched first */
    assert_true(f->steps[2].send.present);
    assert_null(f->steps[2].get);
    assert_true(f->steps[2].send.post);
    assert_int_equal(f->steps[2].send.n_fields, 2);
    assert_string_equal(f->steps[2].send.fields[0].name, "action");
    assert_string_equal(f->steps[2].send.fields[0].value, "approve");
    assert_string_equal(f->steps[2].send.fields[1].name, "id");
    assert_non_null(strstr(f->steps[2].send.fields[1].value, "${doc"));
    /* a closed period (no Save button) and an ambiguous vendor are business exceptions */
    bool period = false, vendor = false;
    for (size_t k = 0; k < f->steps[1].n_rules; k++)
        period = period ||
                 (f->steps[1].rules[k].when == FLOW_WHEN_MISSING_BUTTON &&
                  f->steps[1].rules[k].outcome == FLOW_OUT_REJECTED && f->steps[1].rules[k].reason);
    for (size_t k = 0; k < f->steps[0].n_rules; k++)
        vendor = vendor || (f->steps[0].rules[k].name &&
                            strcmp(f->steps[0].rules[k].name, "vendor-ambiguous") == 0);
    assert_true(period);
    assert_true(vendor);
    /* the update is skipped once the vendor's internal key is known: learnt from its answer */
    assert_true(f->steps[0].skip_known);
    assert_int_equal(f->n_resolves, 1);
    assert_string_equal(f->resolves[0].from_step, "enter");
    assert_int_equal(f->resolves[0].from, 0);
    assert_int_equal(f->resolves[0].table.n_cols, 1);
    assert_string_equal(f->resolves[0].table.cols[0].name, "vendor_id");
    assert_int_equal(f->steps[0].n_resolves, 0); /* its values are not for templates */

    /* the save answer names the draft; a validation page is a rejection */
    i = classify_url(f->steps[ci].rules, f->steps[ci].n_rules, 200, "http://h/ap.pl",
                     "<p class=\"info\">Invoice AP-2026-000042 saved as draft</p>", &doc);
    assert_true(i >= 0);
    assert_int_equal(f->steps[ci].rules[i].outcome, FLOW_OUT_SAVED);
    assert_string_equal(doc, "AP-2026-000042");
    free(doc);
    i = classify_url(f->steps[ci].rules, f->steps[ci].n_rules, 500, "http://h/ap.pl",
                     "<h2 class=\"error\">Account 9999 does not exist</h2>", NULL);
    assert_int_equal(f->steps[ci].rules[i].outcome, FLOW_OUT_REJECTED);
    /* the approve answer names no document: completed by text or by the redirect target */
    i = classify_url(f->outcomes, f->n_outcomes, 200, "http://h/ap.pl",
                     "<p class=\"info\">Draft Posted</p>", NULL);
    assert_int_equal(f->outcomes[i].outcome, FLOW_OUT_COMPLETED);
    i = classify_url(f->outcomes, f->n_outcomes, 200, "http://h/ap.pl?action=add", "<html>", NULL);
    assert_int_equal(f->outcomes[i].outcome, FLOW_OUT_COMPLETED);
    assert_int_equal(
        classify_url(f->outcomes, f->n_outcomes, 200, "http://h/ap.pl?action=edit", "<html>", NULL),
        -1);
    /* a session marker by status, another by the redirect to the login */
    bool by_status = false, by_redirect = false;
    for (size_t k = 0; k < f->n_session_expired; k++) {
        const struct flow_marker *m = &f->session_expired[k];
        by_status = by_status || (m->status && match_status(m->status, 401) && !m->redirect);
        by_redirect =
            by_redirect ||
            (m->redirect && match_exec(m->redirect, "http://h/login.pl?action=x", 26, NULL));
    }
    assert_true(by_status);
    assert_true(by_redirect);
    flow_free(f);
}

/* ------------------------------------------------------------------------------------- */
/* Every new check, as a table of edits to a good flow: the edit, and what flow check says. */

struct mutation {
    const char *base;   /* flow under tests/data/flows */
    const char *find;   /* text replaced (its first occurrence) */
    const char *repl;   /* replacement (XML) */
    int rc;             /* APBOT_OK: still a good flow */
    const char *anchor; /* the message's line is this text's line after the edit (NULL: repl's) */
    const char *text;   /* expected in the message */
};

#define FULL "ok-full.xml"
#define MINI "ok-minimal.xml"
#define INV APBOT_E_INVAL
#define SAVED_RULE "(?&lt;doc&gt;AP-\\d+) saved</rule>"
#define LF "lines field 'amount_${line.n}': " /* where ok-full's line amount sits */
#define TOKEN_CAPTURE                                                                              \
    "<capture name=\"token\">name=\"form_id\" value=\"(?&lt;token&gt;[0-9a-f]+)\"</capture>"
#define TOTAL_CAPTURE "<capture name=\"total\">Total (?&lt;total&gt;[0-9.,]+)</capture>"
#define MEMO "field 'memo': "

static const struct mutation mutations[] = {
    /* good variants */
    {FULL, "<erp", "<erp", APBOT_OK, NULL, NULL},
    {FULL, "<field name=\"form_id\">${capture.token}</field>", "", APBOT_OK, NULL, NULL},
    /* doc from a <capture name="doc"> on the committing step instead of the saved rule's group */
    {FULL, SAVED_RULE,
     "AP-\\d+ saved</rule><capture name=\"doc\">Invoice (?&lt;doc&gt;AP-\\d+)</capture>", APBOT_OK,
     NULL, NULL},
    /* a one-day list */
    {FULL, "from=${from|date:%m/%d/%Y}&amp;to=${to|date:%m/%d/%Y}", "d=${date}", APBOT_OK, NULL,
     NULL},
    /* amounts a flow computes */
    {FULL, "${line.net|amount:.}", "${line.gross|abs|amount:.}", APBOT_OK, NULL, NULL},
    {FULL, "${line.net|amount:.}", "${line.net + line.tax|amount:.}", APBOT_OK, NULL, NULL},
    {FULL, "${line.net|amount:.}", "${ (line.net+line.tax) * 7.5% half-even - -line.tax }",
     APBOT_OK, NULL, NULL},
    {FULL, "${invoice.description|trunc:60}", "${invoice.payable - invoice.tax * 19% down|abs}",
     APBOT_OK, NULL, NULL},
    {FULL, "${line.net|amount:.}", "${line.net + line.taxes|amount:.}", INV, NULL,
     LF "${line.net + line.taxes}: unknown variable 'line.taxes' "
        "(amounts here: invoice.payable, invoice.net, invoice.tax, line.net, line.tax, "
        "line.gross)"},
    {FULL, "${line.net|amount:.}", "${line.net + line.description}", INV, NULL,
     LF "${line.net + line.description}: 'line.description' is text, not an amount: an expression "
        "takes the invoice's amounts only, all in its currency"},
    {FULL, "${line.net|amount:.}", "${invoice.issue_date + line.net}", INV, NULL,
     LF "${invoice.issue_date + line.net}: 'invoice.issue_date' is a date, not an amount"},
    {FULL, "${invoice.description|trunc:60}", "${invoice.net + capture.token}", INV, NULL,
     MEMO "${invoice.net + capture.token}: 'capture.token' is text, not an amount"},
    {FULL, "${invoice.description|trunc:60}", "${invoice.net + line.net}", INV, NULL,
     MEMO "${line.net} is not available here (only inside <lines>)"},
    {FULL, "${line.net|amount:.}", "${line.net * 19%|amount:.}", INV, NULL,
     LF
     "${line.net * 19%}: a rate needs its rounding after the '%': half-up, half-even, up or down"},
    {FULL, "${line.net|amount:.}", "${line.net * 19% nearest}", INV, NULL,
     LF "${line.net * 19% nearest}: a rate needs its rounding after the '%'"},
    {FULL, "${line.net|amount:.}", "${line.net * 19 half-up}", INV, NULL,
     LF "${line.net * 19 half-up}: '*' takes a rate in percent (AMOUNT * 19% half-up)"},
    {FULL, "${line.net|amount:.}", "${line.net * 1000.5% up}", INV, NULL,
     LF "${line.net * 1000.5% up}: a rate is 0 to 1000 percent with at most 4 decimals"},
    {FULL, "${line.net|amount:.}", "${line.net * 19.00001% up}", INV, NULL,
     LF "${line.net * 19.00001% up}: a rate is 0 to 1000 percent with at most 4 decimals"},
    {FULL, "${line.net|amount:.}", "${line.net-line.tax}", INV, NULL,
     LF "unknown variable ${line.net-line.tax} (here: "},
    {FULL, "${line.net|amount:.}", "${line.net -line.tax + line.gross-x}", INV, NULL,
     LF "${line.net -line.tax + line.gross-x}: unknown variable 'line.gross-x' (amounts here: "
        "invoice.payable, invoice.net, invoice.tax, "
        "line.net, line.tax, line.gross); a '-' between two amounts needs blanks around it"},
    {FULL, "${line.net|amount:.}", "${(line.net + line.tax}", INV, NULL,
     LF "${(line.net + line.tax}: a '(' is not closed"},
    {FULL, "${line.net|amount:.}", "${line.net + line.tax)}", INV, NULL,
     LF "${line.net + line.tax)}: a ')' has no '('"},
    {FULL, "${line.net|amount:.}", "${line.net +}", INV, NULL,
     LF "${line.net +}: an amount is missing at the end"},
    {FULL, "${line.net|amount:.}", "${line.net line.tax}", INV, NULL,
     LF "${line.net line.tax}: an operator (+, -, *) is expected here"},
    {FULL, "${line.net|amount:.}", "${5 + line.net}", INV, NULL,
     LF "${5 + line.net}: a number alone is no amount (write AMOUNT * RATE% ROUNDING)"},
    {FULL, "${line.net|amount:.}", "${line.net + line.tax|date:%d}", INV, NULL,
     LF "'date' formats a date, not ${line.net + line.tax}"},
    {FULL, "${line.net|amount:.}",
     "${-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-line.net)))))))))))))))))}", INV, NULL,
     LF "${-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-line.net)))))))))))))))))}: nested too deep"},
    {FULL, "${line.net|amount:.}",
     "${line.net + line.net + line.net + line.net + line.net + line.net + line.net + line.net + "
     "line.net + line.net + line.net + line.net + line.net + line.net + line.net + line.net + "
     "line.net}",
     INV, NULL,
     LF "${line.net + line.net + line.net + line.net + line.net + line.net + line.net + "
        "line.net + line.net + line.net + line.net + line.net + line.net + line.net + line.net + "
        "line.net + line.net}: too long (at most 32 operands and operators)"},

    /* the ERP's own total against the invoice's */
    {FULL, TOKEN_CAPTURE,
     TOKEN_CAPTURE TOTAL_CAPTURE
     "<compare-amount capture=\"total\" equals=\"${invoice.payable|abs}\" "
     "amount-decimal=\",\" amount-group=\".\"/>",
     APBOT_OK, NULL, NULL},
    {FULL, TOKEN_CAPTURE,
     TOKEN_CAPTURE TOTAL_CAPTURE
     "<compare-amount capture=\"token\" equals=\"${invoice.net + invoice.tax}\"/>"
     "<compare-amount capture=\"total\" equals=\"${-invoice.payable|abs|abs}\"/>",
     APBOT_OK, NULL, NULL},
    {FULL, TOKEN_CAPTURE,
     TOKEN_CAPTURE "<compare-amount capture=\"nope\" equals=\"${invoice.payable}\"/>", INV, NULL,
     "compare-amount 'nope': no <capture name=\"nope\"> on this step or an earlier one"},
    {FULL, TOKEN_CAPTURE,
     TOKEN_CAPTURE TOTAL_CAPTURE "<compare-amount capture=\"total\" equals=\"${invoice.number}\"/>",
     INV, "<compare-amount",
     "compare-amount 'total': \"${invoice.number}\" is not one amount of the invoice: write one "
     "placeholder of an amount or an amount expression"},
    {FULL, TOKEN_CAPTURE,
     TOKEN_CAPTURE TOTAL_CAPTURE
     "<compare-amount capture=\"total\" equals=\"${invoice.payable|amount:.}\"/>",
     INV, "<compare-amount", "compare-amount 'total': \"${invoice.payable|amount:.}\" is not one"},
    {FULL, TOKEN_CAPTURE,
     TOKEN_CAPTURE TOTAL_CAPTURE
     "<compare-amount capture=\"total\" equals=\"EUR ${invoice.payable}\"/>",
     INV, "<compare-amount", "compare-amount 'total': \"EUR ${invoice.payable}\" is not one"},
    {FULL, TOKEN_CAPTURE,
     TOKEN_CAPTURE TOTAL_CAPTURE "<compare-amount capture=\"total\" equals=\"${line.net}\"/>", INV,
     "<compare-amount",
     "compare-amount 'total': ${line.net} is not available here (only inside <lines>)"},
    {FULL, TOKEN_CAPTURE,
     TOKEN_CAPTURE TOTAL_CAPTURE
     "<compare-amount capture=\"total\" equals=\"${invoice.payable}\" amount-decimal=\".\" "
     "amount-group=\".\"/>",
     INV, "<compare-amount",
     "compare-amount 'total': amount-decimal and amount-group are both '.'"},
    {FULL, "<capture name=\"receipt\"",
     TOTAL_CAPTURE
     "<compare-amount capture=\"total\" equals=\"${invoice.payable}\"/><capture name=\"receipt\"",
     APBOT_E_PARSE, NULL, NULL}, /* the schema: compare-amount after the captures */
    {FULL, "</rule>\n    </step>\n    <step name=\"approve\"",
     "</rule>" TOTAL_CAPTURE
     "<compare-amount capture=\"total\" equals=\"${invoice.payable}\"/>\n    </step>\n"
     "    <step name=\"approve\"",
     INV, "<compare-amount",
     "compare-amount 'total': only on a step before the committing one (the ERP's amount is "
     "compared before anything can be booked)"},
    {FULL, TOKEN_CAPTURE, TOKEN_CAPTURE "<compare-amount capture=\"total\"/>", APBOT_E_PARSE, NULL,
     NULL},

    /* erp */
    {FULL, "<session-expired status=\"401\"/>", "<session-expired/>", INV, NULL,
     "session-expired: give a status, a redirect or a pattern"},
    {FULL, "<session-expired status=\"401\"/>", "<session-expired status=\"4x1\"/>", INV, NULL,
     "session-expired: bad status spec '4x1'"},
    {FULL, "redirect=\"/login\\.pl\"", "redirect=\"(login\"", INV, NULL,
     "session-expired redirect: bad pattern"},
    {FULL, "base-url=\"http://127.0.0.1:8080/erp\"", "base-url=\"http://u:p@127.0.0.1:8080/erp\"",
     INV, NULL, "erp: base-url must not carry user:password@"},
    {FULL, "<session-expired status=\"401\"/>", "", APBOT_OK, NULL, NULL}, /* two are left */
    {MINI, "<session-expired>id=\"loginForm\"</session-expired>", "", INV, "<flow xmlns",
     "erp: a flow with <login> needs <session-expired>"},

    /* login */
    {FULL, "<http-basic/>", "", INV, "<login get",
     "login: a login without <form> sends no credentials"},
    {FULL, "<success status=\"200\">^Success</success>", "<success/>", INV, NULL,
     "login success: give a status, a pattern, a json pointer or more"},
    {FULL, "<success status=\"200\">",
     "<form xpath=\"//form\"><field name=\"u\">${secret.user}</field></form><success "
     "status=\"200\">",
     INV, "<login get", "login: method=\"GET\" is for a login without <form>"},
    {FULL, "<success status=\"200\">", "<success status=\"20\">", INV, "<login get",
     "login success: bad status spec '20'"},
    {MINI, "<field name=\"user\">${secret.user}</field>",
     "<field name=\"u_${secret.user}\">x</field>", INV, NULL,
     "field 'u_${secret.user}': ${secret.user} in a field name: secrets only go into login "
     "form field values"},

    /* where variables may be used */
    {FULL, "<field name=\"ref\">${key}</field>", "<field name=\"ref\">${secret.password}</field>",
     INV, NULL,
     "field 'ref': ${secret.password} is not available here (secrets only go into the login's "
     "field values"},
    {FULL, "<field name=\"memo\">${invoice.description|trunc:60}</field>",
     "<field name=\"memo\">${line.description}</field>", INV, NULL,
     "field 'memo': ${line.description} is not available here (only inside <lines>)"},
    {FULL, "<field name=\"vendor\">${vendor.id}</field>", "<field name=\"vendor\">${doc}</field>",
     INV, NULL, "field 'vendor': ${doc} is not captured before this step"},
    {FULL, "get=\"/search?ref=${key|url}\"", "get=\"/search?ref=${doc}\"", INV, NULL,
     "lookup get: ${doc} is not available here (only in post steps after"},
    {FULL, "<field name=\"vendor\">${vendor.id}</field>",
     "<field name=\"vendor\">${capture.token}</field>", INV, NULL,
     "field 'vendor': ${capture.token}: no earlier step captures 'token'"},
    {FULL, "get=\"/receipt?r=${capture.receipt|url}", "get=\"/receipt?r=${capture.token|url}", INV,
     NULL,
     "step 'confirm': ${capture.token}: no earlier step captures 'token' (a follow-up step is "
     "re-run on DOC"},
    {FULL, "<field name=\"form_id\">${capture.token}</field>",
     "<field name=\"form_id\">${capture.receipt}</field>", INV, NULL,
     "field 'form_id': ${capture.receipt}: no earlier step captures 'receipt'"},
    {FULL, "get=\"/edit?id=${row.doc|url}\"", "get=\"/edit?id=${row.nope|url}\"", INV, NULL,
     "detail get: ${row.nope}: 'nope' is not a column of the lookup table"},
    {FULL, "get=\"/search?ref=${key|url}\"", "get=\"/search?ref=${row.doc}\"", INV, NULL,
     "lookup get: ${row.doc} is not available here (only in <detail get>)"},
    {FULL, "get=\"/add\"", "get=\"/add?d=${from}\"", INV, NULL,
     "step 'enter': ${from} is not available here (only in <list>)"},
    {FULL, "<expect column=\"amount\">${invoice.payable|amount:,.}</expect>",
     "<expect column=\"amount\">${line.net}</expect>", INV, NULL,
     "expect 'amount': ${line.net} is not available here (only inside <lines>)"},
    {FULL, "by=\"invoice\"", "by=\"posted\"", APBOT_E_PARSE, NULL, "schema: "},

    /* rules */
    {FULL, "url=\"/add$\"", "url=\"(add\"", INV, NULL, "rule 'posted-redirect' url: bad pattern"},
    {FULL, "url=\"/add$\"", "url=\".*\"", INV, NULL,
     "rule 'posted-redirect': a completed rule's url pattern must not match an empty URL"},
    {FULL, "outcome=\"completed\" url=\"/add$\"", "outcome=\"completed\" status=\"303\"", INV, NULL,
     "rule 'posted-redirect': a completed rule needs a pattern, a url or a JSON value it "
     "matches"},
    {FULL, "<rule name=\"enter-invalid\" outcome=\"rejected\"",
     "<rule name=\"enter-invalid\" outcome=\"saved\"", INV, NULL,
     "rule 'enter-invalid': outcome 'saved' only on the committing step"},
    {FULL, "<rule name=\"refused\" outcome=\"rejected\"",
     "<rule name=\"refused\" outcome=\"saved\"", INV, NULL,
     "rule 'refused': outcome 'saved' only on the committing step"},
    {FULL, SAVED_RULE, "AP-\\d+ saved</rule>", INV, "<rule name=\"saved\"",
     "rule 'saved': a saved rule must yield the document number, but it has no (?<doc>...) group"},
    {FULL, SAVED_RULE, "(?&lt;doc&gt;\\d*) saved</rule>", INV, "<rule name=\"saved\"",
     "rule 'saved': a saved rule must yield the document number, but its (?<doc>...) group "
     "can match the empty string"},
    /* the completed rules of ok-full rely on the saved doc: without it they must yield it */
    {FULL, "<rule name=\"saved\" outcome=\"saved\"", "<rule name=\"saved\" outcome=\"unknown\"",
     INV, "<rule name=\"posted\"",
     "rule 'posted': a completed rule must yield the document number"},
    /* the final URL after a redirect may yield it (POST /invoices -> /invoices/4711) */
    {MINI, "status=\"200\">Saved as (?&lt;doc&gt;D-\\d+)</rule>",
     "status=\"200\" url=\"/invoices/(?&lt;doc&gt;\\d+)$\"/>", APBOT_OK, NULL, NULL},
    {MINI, "status=\"200\">Saved as (?&lt;doc&gt;D-\\d+)</rule>",
     "status=\"200\" url=\"/invoices/(?&lt;doc&gt;\\d*)$\"/>", INV, "<rule name=\"booked\"",
     "rule 'booked': a completed rule must yield the document number, but its (?<doc>...) group "
     "can match the empty string"},
    {MINI, "(?&lt;doc&gt;D-\\d+)", "D-\\d+", INV, "<rule name=\"booked\"",
     "rule 'booked': a completed rule must yield the document number, but it has no (?<doc>...) "
     "group"},

    /* captures */
    {FULL, "value=\"(?&lt;token&gt;[0-9a-f]+)\"", "value=\"([0-9a-f]+)\"", INV,
     "<capture name=\"token\"", "capture 'token': the pattern needs a (?<token>...) group"},
    {FULL, "<capture name=\"receipt\" raw=\"true\">Receipt (?&lt;receipt&gt;R\\d+)",
     "<capture name=\"token\">Receipt (?&lt;token&gt;R\\d+)", INV, NULL,
     "capture 'token': step 'enter' already captures it"},
    {FULL, "<capture name=\"receipt\" raw=\"true\">Receipt (?&lt;receipt&gt;R\\d+)",
     "<capture name=\"doc\">Receipt (?&lt;doc&gt;\\d*)", INV, NULL,
     "capture 'doc': its (?<doc>...) group can match the empty string"},
    {FULL, "<capture name=\"token\">", "<capture name=\"to-ken\">", APBOT_E_PARSE, NULL,
     "schema: "},

    /* forms and lines */
    {FULL, "submit=\"ok\"", "submit-value=\"ok\"", INV, NULL,
     "step 'confirm' form: submit-value=\"ok\" without submit=\"NAME\""},
    {FULL, "<field name=\"amount_${line.n}\">", "<field name=\"amount\">", INV, NULL,
     "lines field 'amount': its name must use ${line.n}"},
    {FULL, "<field name=\"memo\">", "<field name=\"vendor\">", INV,
     "<field name=\"vendor\">${invoice.description", "field 'vendor' is set twice in this form"},
    {FULL, "<field name=\"tax_${line.n}\"", "<field name=\"account_${line.n}\"", APBOT_OK, NULL,
     NULL}, /* another form: no clash */
    {FULL, "<lines missing=\"add\">", "<lines missing=\"skip\">", INV,
     "<lines missing=\"skip\">\n          <field name=\"tax_",
     "step 'save': missing=\"skip\" only before the committing step"},
    {FULL, "<field name=\"currency\" option=\"value\">", "<field name=\"currency\" option=\"v\">",
     APBOT_E_PARSE, NULL, "schema: "},

    /* steps */
    {FULL, "<step name=\"approve\" get=\"/edit?id=${doc|url}\">",
     "<step name=\"approve\" get=\"/edit?id=${doc|url}\" repeat=\"until-lines\">", INV, NULL,
     "step 'approve': repeat=\"until-lines\" needs a <lines> in its form"},
    {FULL, "<step name=\"approve\" get=\"/edit?id=${doc|url}\">",
     "<step name=\"approve\" get=\"/edit?id=${doc|url}\" repeat=\"until-lines\">", INV, NULL,
     "step 'approve': repeat=\"until-lines\" only before the committing step"},
    {FULL, "<step name=\"approve\" get=\"/edit?id=${doc|url}\">",
     "<step name=\"approve\" get=\"/edit?id=1\">", INV, NULL,
     "step 'approve': the first step after the committing one must name the document"},
    {FULL, "<step name=\"approve\" get=\"/edit?id=${doc|url}\">", "<step name=\"approve\">", INV,
     NULL, "step 'approve': the first step after the committing one must name the document"},

    /* lookup */
    {FULL, "<finished column=\"status\">posted</finished>", "", INV, "<lookup get",
     "lookup: steps follow the committing step 'save', so the lookup needs <finished"},
    {FULL, "<finished column=\"status\">", "<finished column=\"booked\">", INV, NULL,
     "finished: 'booked' is not a column of the table or the detail"},
    {FULL, "<finished column=\"status\">posted", "<finished column=\"status\">${key}", APBOT_OK,
     NULL, NULL},
    {FULL, "key-column=\"reference\"", "key-column=\"vendor\"", INV, NULL,
     "lookup: key-column 'vendor' is not a column of its table or its detail"},
    {FULL, "get=\"/edit?id=${row.doc|url}\"", "get=\"/edit?id=1\"", INV, NULL,
     "detail get: use ${row.COLUMN}"},
    {FULL, "max-candidates=\"4\"", "max-candidates=\"500\"", INV, NULL,
     "lookup: max-candidates '500' out of range 1..100"},
    {FULL, "max-pages=\"3\"", "max-pages=\"101\"", INV, NULL,
     "lookup: max-pages '101' out of range 1..100"},
    {FULL, "max-rows=\"50\"", "max-rows=\"0\"", APBOT_E_PARSE, NULL, "schema: "},
    {FULL, "screen=\"//form[@id='search']\"", "screen=\"//form[\"", INV,
     "<table rows=\"//table[@id='results']",
     "lookup table screen: XPath '//form[' does not compile"},
    {FULL, "<column name=\"reference\" xpath=\"//input[@name='ref']/@value\"/>",
     "<column name=\"reference\" xpath=\"//input[\"/>", INV, NULL, "column 'reference': XPath"},
    {FULL, "<column name=\"status\" xpath=\"td[2]\"/>", "<column name=\"state\" xpath=\"td[2]\"/>",
     INV, NULL, "column 'state': unknown name"},

    /* rules before "the form changed": when-missing on a step that fills a form */
    {FULL, "<rule name=\"enter-invalid\" outcome=\"rejected\" status=\"500\"",
     "<rule name=\"closed\" outcome=\"rejected\" when-missing=\"button\" reason=\"Period "
     "closed\">closedto</rule><rule name=\"enter-invalid\" outcome=\"rejected\" status=\"500\"",
     APBOT_OK, NULL, NULL},
    {FULL, "<rule name=\"enter-invalid\" outcome=\"rejected\" status=\"500\"",
     "<rule name=\"enter-invalid\" outcome=\"rejected\" status=\"500\" when-missing=\"label\"",
     APBOT_E_PARSE, NULL, "schema: "},
    {FULL, "<rule name=\"posted-redirect\" outcome=\"completed\" url=\"/add$\"/>",
     "<rule name=\"posted-redirect\" outcome=\"completed\" url=\"/add$\" when-missing=\"any\"/>",
     INV, NULL,
     "rule 'posted-redirect': when-missing=\"any\" is not for <outcomes> (they are tried on the "
     "last step's answer; put the rule on the step)"},
    {FULL, "<rule name=\"bad-credentials\" outcome=\"rejected\" status=\"401,403\"/>",
     "<rule name=\"bad-credentials\" outcome=\"rejected\" status=\"401,403\" "
     "when-missing=\"form\"/>",
     INV, NULL, "rule 'bad-credentials': when-missing=\"form\" is not for <login>"},
    /* a follow-up step's rule may say completed (a draft approved meanwhile), with the document
     * the commit captured; a step before the commit may not */
    {FULL, "<capture name=\"receipt\"",
     "<rule name=\"approved-meanwhile\" outcome=\"completed\" when-missing=\"button\""
     ">&lt;span id=\"status\"&gt;posted</rule><capture name=\"receipt\"",
     APBOT_OK, NULL, NULL},
    {FULL, "<rule name=\"enter-invalid\" outcome=\"rejected\" status=\"500\"",
     "<rule name=\"enter-done\" outcome=\"completed\">Posted</rule>"
     "<rule name=\"enter-invalid\" outcome=\"rejected\" status=\"500\"",
     INV, "<rule name=\"enter-done\"",
     "rule 'enter-done': outcome 'completed' is not allowed in step rules before the committing "
     "one (completed only on follow-up steps and in <outcomes>)"},
    {FULL, "<capture name=\"receipt\"",
     "<rule name=\"approved-any\" outcome=\"completed\" status=\"200\"/><capture "
     "name=\"receipt\"",
     INV, "<rule name=\"approved-any\"", "rule 'approved-any': a completed rule needs a pattern"},

    /* skip="when-known" and <resolve from-step> */
    {FULL, "<step name=\"enter\" get=\"/add\" repeat=\"until-lines\">",
     "<step name=\"enter\" get=\"/add\" repeat=\"until-lines\" skip=\"when-known\">", INV, NULL,
     "step 'enter': skip=\"when-known\" needs a <resolve from-step=\"enter\"> that says what its "
     "answer tells"},
    {FULL, "<step name=\"enter\" get=\"/add\" repeat=\"until-lines\">",
     "<step name=\"enter\" get=\"/add\" repeat=\"until-lines\" skip=\"when-known\">", INV, NULL,
     "step 'enter': skip=\"when-known\" with a <capture>: a skipped step captures nothing"},
    {FULL, "<step name=\"enter\" get=\"/add\" repeat=\"until-lines\">",
     "<step name=\"enter\" get=\"/add\" repeat=\"until-lines\" skip=\"sometimes\">", APBOT_E_PARSE,
     NULL, "schema: "},
    {FULL, "<post>",
     "<resolve name=\"v\" code=\"${vendor.id}\" from-step=\"nope\"><control "
     "name=\"vendor_id\"/></resolve><post>",
     INV, NULL, "resolve 'v': from-step 'nope' is not a step of the post"},
    {FULL, "<post>",
     "<resolve name=\"v\" code=\"${vendor.id}\" from-step=\"save\"><control "
     "name=\"vendor_id\"/></resolve><post>",
     INV, NULL,
     "resolve 'v': from-step 'save' must come before the committing step (only such a step can "
     "be skipped)"},
    {FULL, "<post>",
     "<resolve name=\"v\" code=\"${line.gl_account}\" from-step=\"enter\"><control "
     "name=\"vendor_id\"/></resolve><post>",
     INV, NULL, "resolve 'v': a resolve learnt from a step has one code per invoice (no line.*)"},
    {FULL, "<post>",
     "<resolve name=\"v\" code=\"${vendor.id}\" from-step=\"enter\"><control "
     "name=\"vendor_id\"/><control name=\"vendor_id\"/></resolve><post>",
     INV, NULL, "resolve 'v': control 'vendor_id' is named twice"},
    {FULL, "<post>",
     "<resolve name=\"v\" code=\"${vendor.id}\" from-step=\"enter\" get=\"/x?c=${code}\">"
     "<control name=\"vendor_id\"/></resolve><post>",
     APBOT_E_PARSE, NULL, "schema: "},

    /* list */
    {FULL, "&amp;to=${to|date:%m/%d/%Y}", "", INV, "<list get",
     "list: its request must use ${date} (one day) or both ${from} and ${to}"},
    {FULL, "&amp;to=${to|date:%m/%d/%Y}", "&amp;to=${date}", INV, "<list get",
     "list: get uses ${date} and a range"},
    {FULL, "to=${to|date:%m/%d/%Y}", "to=${to|amount:.}", INV, "<list get",
     "list get: 'amount' formats an amount, not ${to}"},
    {FULL, "<list get=\"/list?from", "<list get=\"/list?n=${invoice.line_count}&amp;from", INV,
     NULL, "list get: ${invoice.line_count} is not available here"},
    /* the ERP's default currency: a code whose amounts apbot can read, on a list or a lookup */
    {FULL, "by=\"invoice\"", "by=\"invoice\" currency=\"EUR\"", APBOT_OK, NULL, NULL},
    {FULL, "by=\"invoice\"", "by=\"invoice\" currency=\"XYZ\"", INV, "<list get",
     "list: currency 'XYZ' is not an ISO 4217 code apbot knows"},
    {FULL, "by=\"invoice\"", "by=\"invoice\" currency=\"eur\"", APBOT_E_PARSE, NULL, "schema: "},
    {FULL, "max-candidates=\"4\"", "max-candidates=\"4\" currency=\"JPY\"", APBOT_OK, NULL, NULL},
    {FULL, "max-candidates=\"4\"", "max-candidates=\"4\" currency=\"ABC\"", INV, "<lookup get",
     "lookup: currency 'ABC' is not an ISO 4217 code apbot knows"},
};

/* Replaces the first `find` in text with `repl`. Heap. */
static char *replace_once(const char *text, const char *find, const char *repl)
{
    const char *at = strstr(text, find);
    size_t n;
    char *out;

    if (!at)
        fail_msg("'%s' not in the base flow", find);
    n = strlen(text) - strlen(find) + strlen(repl);
    out = malloc(n + 1);
    assert_non_null(out);
    memcpy(out, text, (size_t)(at - text));
    memcpy(out + (at - text), repl, strlen(repl));
    memcpy(out + (at - text) + strlen(repl), at + strlen(find), strlen(at + strlen(find)) + 1);
    return out;
}

/* The 1-based line of the first `what` in text, 0 when absent. */
static int line_of(const char *text, const char *what)
{
    const char *at = strstr(text, what);
    int line = 1;

    if (!at)
        return 0;
    for (const char *p = text; p < at; p++)
        line += *p == '\n';
    return line;
}

/* Writes text to a fresh temporary .xml file; its path into tmp (a "/tmp/...XXXXXX.xml"). */
static void write_temp(char *tmp, const char *text)
{
    int fd = mkstemps(tmp, 4);
    FILE *out;

    assert_true(fd >= 0);
    out = fdopen(fd, "wb");
    assert_non_null(out);
    fputs(text, out);
    fclose(out);
}

/* Loads text as a flow; rc, with every problem in err. */
static int load_text(const char *text, char *tmp, char *err, size_t errlen)
{
    struct flow *f = NULL;
    int rc;

    write_temp(tmp, text);
    rc = flow_load(tmp, &f, err, errlen);
    flow_free(f);
    remove(tmp);
    return rc;
}

static void test_flow_mutations(void **state)
{
    (void)state;
    int failures = 0;

    for (size_t i = 0; i < sizeof(mutations) / sizeof(mutations[0]); i++) {
        const struct mutation *m = &mutations[i];
        char rel[128], tmp[] = "/tmp/apbot-flow-XXXXXX.xml", err[8192] = "", want[1200];
        char *base, *text;
        int rc;

        snprintf(rel, sizeof(rel), "tests/data/flows/%s", m->base);
        base = read_src(rel);
        text = replace_once(base, m->find, m->repl);
        rc = load_text(text, tmp, err, sizeof(err));
        /* the message starts with the text, on the line of the edit (or of the anchor);
         * schema messages carry libxml2's own line */
        if (m->text && m->rc == APBOT_E_PARSE)
            snprintf(want, sizeof(want), "%s", m->text);
        else if (m->text)
            snprintf(want, sizeof(want), "%s:%d: %s", tmp,
                     line_of(text, m->anchor ? m->anchor : m->repl), m->text);
        if (rc != m->rc || (m->text && !strstr(err, want))) {
            print_error("mutation %zu (%s -> %s): rc %d (want %d), want '%s' in:\n%s\n", i, m->find,
                        m->repl, rc, m->rc, m->text ? want : "", err);
            failures++;
        }
        free(text);
        free(base);
    }
    assert_int_equal(failures, 0);
}

/* A name with a '-' where an expression was meant: the problem says how to write it. */
static void test_flow_expr_hints(void **state)
{
    (void)state;
    char tmp[] = "/tmp/apbot-flow-XXXXXX.xml", err[8192] = "";
    char *base = read_src("tests/data/flows/ok-full.xml");
    char *text = replace_once(base, "${line.net|amount:.}", "${line.net-line.tax}");

    assert_int_equal(load_text(text, tmp, err, sizeof(err)), APBOT_E_INVAL);
    assert_non_null(strstr(err, "line.gross, line.gl_account, line.description, line.quantity"));
    assert_non_null(strstr(err, "; to subtract, write blanks around the '-' (${invoice.payable - "
                                "invoice.tax})"));
    free(text);
    free(base);
}

/* ------------------------------------------------------------------------------------- */
/* Does a completed rule's (?<doc>...) group yield a document number? Patterns are plain
 * PCRE2 here and XML-escaped into ok-minimal's completed rule. */

struct doc_case {
    const char *pattern;
    bool ok; /* the group can never capture "" */
};

static const struct doc_case doc_cases[] = {
    {"Saved as (?<doc>D-\\d+)", true},
    {"Saved as (?'doc'D-\\d+)", true},
    {"Saved as (?P<doc>\\d+)", true},
    {"Saved as (?<doc>[A-Z]{2}-\\d{4})", true},
    {"Saved as (?<doc>\\d+|[A-Z]+)", true},
    {"Saved as (?<doc>(?:D|E)-(\\d+))", true},
    {"Saved as (?<doc>[)(]\\d)", true},              /* parentheses in a class */
    {"Saved as (?<doc>\\Q)(\\E\\d)", true},          /* and quoted */
    {"Saved as (?<doc>(?#(not a group)\\d+)", true}, /* and in a comment */
    {"(?x) Saved \\s as \\s (?<doc> D - \\d+ )", true},
    {"Saved as (?<doc>\\d*)", false},
    {"Saved as (?<doc>)", false},
    {"Saved as (?<doc>\\d+|)", false},
    {"Saved as (?<doc>(?:\\d+)?)", false},
    {"Saved as (?<doc>\\b)", false},          /* "" fails alone, but the group is empty */
    {"Saved as (?<doc>(?=\\d))\\d+", false},  /* a lookahead captures nothing */
    {"Saved as (?<doc>(?<=as ))\\d+", false}, /* a lookbehind neither */
    {"Saved as (?<doc>\\d{0,3})", false},
    {"(?x) Saved as (?<doc> \\d* )", false}, /* " \\d* " is 2 long without x, 0 with it */
    {"(?J)Saved as (?<doc>\\d+)|Stored (?<doc>\\d*)", false}, /* every occurrence counts */
    {"Saved as (?<n>\\d)(?<doc>\\k<n>)", false},              /* cannot be checked alone: refused */
    {"Saved as (?<doc>(?=\\d{3})\\d)", true}, /* a lookahead before what it consumes */
    {"Saved as (?<doc>\\d(?!x))", true},
    {"Saved as (?<doc>(?<=as )\\d+)", true},
    {"(x?)Saved as (?<doc>(y)?\\1)", false},  /* \1 would be another group alone */
    {"(a?)Saved as (?<doc>(?1)(b)?)", false}, /* alone, (?1) would call (b) */
    {"Saved as (?<doc>(?(?=a)ab|))", false},  /* a condition: unchecked */
    {"Saved as (?<doc>(*ACCEPT)\\d)", false}, /* accepts before the digit */
    {"Saved as D-\\d+", false},               /* no group at all */
};

/* XML-escapes s (<, >, &). Heap. */
static char *xml_escape(const char *s)
{
    size_t n = strlen(s) * 5 + 1;
    char *out = malloc(n), *o = out;

    assert_non_null(out);
    for (; *s; s++) {
        const char *e = *s == '<' ? "&lt;" : *s == '>' ? "&gt;" : *s == '&' ? "&amp;" : NULL;
        if (e) {
            memcpy(o, e, strlen(e));
            o += strlen(e);
        } else {
            *o++ = *s;
        }
    }
    *o = '\0';
    return out;
}

static void test_flow_doc_group(void **state)
{
    (void)state;
    char *base = read_src("tests/data/flows/ok-minimal.xml");

    for (size_t i = 0; i < sizeof(doc_cases) / sizeof(doc_cases[0]); i++) {
        char tmp[] = "/tmp/apbot-flow-XXXXXX.xml", err[4096] = "", want[300];
        char *pat = xml_escape(doc_cases[i].pattern);
        char *text = replace_once(base, "Saved as (?&lt;doc&gt;D-\\d+)", pat);
        int rc = load_text(text, tmp, err, sizeof(err));

        if (doc_cases[i].ok && rc != APBOT_OK)
            fail_msg("'%s' refused: %s", doc_cases[i].pattern, err);
        if (!doc_cases[i].ok) {
            snprintf(want, sizeof(want),
                     "%s:%d: rule 'booked': a completed rule must yield the "
                     "document number",
                     tmp, line_of(text, "<rule name=\"booked\""));
            if (rc != APBOT_E_INVAL || !strstr(err, want))
                fail_msg("'%s' accepted or wrong message (rc %d): %s", doc_cases[i].pattern, rc,
                         err);
        }
        free(text);
        free(pat);
    }
    free(base);
}

/* ------------------------------------------------------------------------------------- */
/* XPath limits: refused before libxml2 (whose compiler recurses per level) sees them. */

/* "//a[((...1...))]": nested `depth` deep (the predicate's bracket counts). Heap. */
static char *nested_xpath(size_t depth)
{
    char *x = malloc(depth * 2 + 16);
    size_t n = 0;

    assert_non_null(x);
    memcpy(x, "//a[", 4);
    n += 4;
    for (size_t i = 1; i < depth; i++)
        x[n++] = '(';
    x[n++] = '1';
    for (size_t i = 1; i < depth; i++)
        x[n++] = ')';
    x[n++] = ']';
    x[n] = '\0';
    return x;
}

/* Found by tests/fuzz (fuzz_flow, fuzz_template): `apbot flow check` prints flow_load's
 * problems as they are, one per line, but a message could span lines (libxml2's "Input is
 * not proper UTF-8, indicate encoding !\nBytes: ...") or quote the file's own line breaks
 * (&#10; in an attribute) and C1 controls (U+009B is a CSI): a flow file could forge a line of
 * the report or drive the terminal. Every line must start with the file, without controls. */
static void check_problem_lines(const char *tmp, const char *err)
{
    size_t tl = strlen(tmp);
    const char *line = err;
    assert_true(err[0] != '\0');
    for (;;) {
        const char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        if (strncmp(line, tmp, tl) != 0 || line[tl] != ':')
            fail_msg("a problem line without its file: '%.*s'", (int)n, line);
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)line[i];
            unsigned char d = i + 1 < n ? (unsigned char)line[i + 1] : 0;
            if (c < 0x20 || c == 0x7F || (c == 0xC2 && d >= 0x80 && d <= 0x9F))
                fail_msg("a control character at %zu in '%.*s'", i, (int)n, line);
        }
        if (!nl)
            break;
        line = nl + 1;
    }
}

static void test_flow_problems_one_line_each(void **state)
{
    (void)state;
    char *base = read_src("tests/data/flows/ok-minimal.xml");
    static const char *const cases[][3] = {
        /* what, replaced, by */
        {"bytes that are not UTF-8", "name=\"mini\"", "name=\"mi\xFF\xFE\""},
        {"a line break and a CSI in a template", "${key|url}",
         "${ke&#10;y\xC2\x9B"
         "31m|url}"},
        {"an escape in a pattern", "Welcome", "Wel(come&#27;]0;title&#7;"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char tmp[] = "/tmp/apbot-flow-XXXXXX.xml", err[4096] = "";
        char *text = replace_once(base, cases[i][1], cases[i][2]);
        int rc = load_text(text, tmp, err, sizeof(err));
        if (rc == APBOT_OK)
            fail_msg("%s: loaded", cases[i][0]);
        check_problem_lines(tmp, err);
        free(text);
    }
    /* backslashes in quoted patterns are not doubled */
    {
        char tmp[] = "/tmp/apbot-flow-XXXXXX.xml", err[4096] = "";
        char *text = replace_once(base, "Welcome", "Wel\\d(");
        assert_int_not_equal(load_text(text, tmp, err, sizeof(err)), APBOT_OK);
        assert_null(strstr(err, "\\\\d"));
        free(text);
    }
    free(base);
}

static void test_flow_xpath_limits(void **state)
{
    (void)state;
    char *base = read_src("tests/data/flows/ok-minimal.xml");
    struct {
        size_t depth;
        const char *want; /* NULL: accepted */
    } cases[] = {
        {32, NULL},
        {33, "XPath nested deeper than 32 levels: refused"},
        {50000, "XPath longer than 1024 bytes"}, /* crashed libxml2's compiler before */
        {0, NULL},                               /* brackets inside a string literal do not nest */
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char tmp[] = "/tmp/apbot-flow-XXXXXX.xml", err[4096] = "", want[300];
        char *x = cases[i].depth ? nested_xpath(cases[i].depth)
                                 : strdup("//a[@x='((((((((((((((((((((((((((((((((((((((((']");
        char *attr = malloc(strlen(x) + 16), *text;
        int rc;

        assert_non_null(attr);
        snprintf(attr, strlen(x) + 16, "rows=\"%s\" empty", x);
        text = replace_once(base, "rows=\"//tr[@class='row']\" empty", attr);
        rc = load_text(text, tmp, err, sizeof(err));
        if (!cases[i].want) {
            if (rc != APBOT_OK)
                fail_msg("depth %zu refused: %s", cases[i].depth, err);
        } else {
            snprintf(want, sizeof(want), "%s:%d: lookup table rows: %s", tmp,
                     line_of(text, "<table rows=\"//a"), cases[i].want);
            if (rc != APBOT_E_INVAL || !strstr(err, want))
                fail_msg("depth %zu: want '%s' in: %s", cases[i].depth, want, err);
        }
        free(text);
        free(attr);
        free(x);
    }
    free(base);
}

/* ------------------------------------------------------------------------------------- */
/* Expansion of the round-2 variables. */

static void test_flow_expand_round2(void **state)
{
    (void)state;
    struct flow *f = load_ok("tests/data/flows/ok-full.xml");
    struct invoice inv;
    struct invoice_line lines[2] = {
        {.description = "Paper, A4",
         .gl_account = "5700",
         .quantity = "10",
         .net = 12345,
         .tax = 2346},
        {.description = NULL, .gl_account = "6000", .quantity = NULL, .net = -500, .tax = 0},
    };
    const char *cap_names[] = {"token", "receipt"}, *cap_values[] = {"ab12", "R7"};
    const char *row_names[] = {"doc", "status"}, *row_values[] = {"AP-2026-000042", "draft"};
    struct flow_vars v = {.inv = &inv,
                          .key = "AP1-ABCDEFGHIJKLMNOPQRST",
                          .from = "2026-11-01",
                          .to = "2026-11-30",
                          .doc = "AP-2026-000042",
                          .capture_names = cap_names,
                          .capture_values = cap_values,
                          .n_captures = 2,
                          .row_names = row_names,
                          .row_values = row_values,
                          .n_row = 2};

    make_invoice(&inv, "EUR", 2, 14191);
    inv.tax_total = 2346; /* the lines' tax */
    inv.lines = lines;
    inv.n_lines = 2;
    expect(f, "${invoice.line_count}", &v, "2");
    expect(f, "${invoice.payable|minor}", &v, "14191"); /* 141.91 EUR in cents */

    /* line.* follow the line being filled; names are templates too */
    v.line = &lines[0];
    v.line_n = 1;
    expect(f, "amount_${line.n}", &v, "amount_1");
    expect(f, "lines[${line.i}].amount", &v, "lines[0].amount"); /* rows counted from 0 */
    expect(f, "${line.net} ${line.tax}", &v, "123.45 23.46");
    expect(f, "${line.net|amount:,.}", &v, "123,45");
    expect(f, "${line.gl_account}--", &v, "5700--");
    expect(f, "${line.description|upper}", &v, "PAPER, A4");
    expect(f, "${line.quantity}", &v, "10");
    v.line = &lines[1];
    v.line_n = 2;
    expect(f, "account_${line.n}=${line.gl_account}", &v, "account_2=6000");
    expect(f, "inv:lines:${line.i}:account", &v, "inv:lines:1:account");
    expect(f, "${line.net|amount:.}|${line.net|abs|amount:.}", &v, "-5.00|5.00");
    expect(f, "[${line.description}][${line.quantity}]", &v, "[][]"); /* unknown: empty */
    make_invoice(&inv, "JPY", 0, 1500);
    inv.lines = lines;
    inv.n_lines = 2;
    expect(f, "${line.net}", &v, "-500"); /* the invoice's currency decides the decimals */
    expect(f, "${line.net|minor} ${line.net|abs|minor}", &v, "-500 500"); /* no decimals */

    /* doc, captures, a lookup row's cells */
    expect(f, "/edit?id=${doc|url}", &v, "/edit?id=AP-2026-000042");
    expect(f, "${capture.token}/${capture.receipt}", &v, "ab12/R7");
    expect(f, "[${capture.nope}]", &v, "[]");
    expect(f, "/edit?id=${row.doc|url}&s=${row.status|upper}", &v,
           "/edit?id=AP-2026-000042&s=DRAFT");

    /* the list's range */
    expect(f, "from=${from|date:%m/%d/%Y}&to=${to|date:%m/%d/%Y}", &v,
           "from=11/01/2026&to=11/30/2026");

    /* nothing given: every new variable is empty */
    struct flow_vars none = {0};
    expect(f,
           "[${line.n}][${line.net}][${line.gl_account}][${doc}][${capture.token}][${row.doc}]"
           "[${from}][${to|date:%d.%m.%Y}][${invoice.line_count}]",
           &none, "[][][][][][][][][]");
    /* a line without an invoice has no currency: its amounts are empty */
    struct flow_vars only_line = {.line = &lines[0], .line_n = 1};
    expect(f, "[${line.n}][${line.net}]", &only_line, "[1][]");
    flow_free(f);
}

/* Amounts a flow computes: expressions exact in minor units, line.tax and line.gross as the lines
 * state them (a CSV invoice) or as their share of the invoice's tax (a UBL invoice). */
static void test_flow_expand_amounts(void **state)
{
    (void)state;
    struct flow *f = load_ok("tests/data/flows/ok-full.xml");
    struct invoice inv;
    struct invoice_line lines[3] = {
        {.gl_account = "5700", .net = 12345, .tax = 2346},
        {.gl_account = "6000", .net = -500, .tax = -95},
        {.gl_account = "6010", .net = 999, .tax = 0},
    };
    struct flow_vars v = {.inv = &inv};

    make_invoice(&inv, "EUR", 2, 15095);
    inv.net_total = 12844;
    inv.tax_total = 2251;
    inv.lines = lines;
    inv.n_lines = 3;
    /* the invoice's amounts */
    expect(f, "${invoice.net + invoice.tax}", &v, "150.95");
    expect(f, "${invoice.payable - invoice.tax - invoice.net}", &v, "0.00");
    expect(f, "${-invoice.payable}|${- invoice.payable|abs}|${--invoice.tax}", &v,
           "-150.95|150.95|22.51");
    expect(f, "${invoice.net + invoice.tax|amount:,.}", &v, "150,95");
    expect(f, "${ ( invoice.net - invoice.tax ) * 50% half-up }", &v, "52.97"); /* 52.965 */
    expect(f, "${(invoice.net - invoice.tax) * 50% half-even}", &v, "52.96");
    expect(f, "${(invoice.net - invoice.tax) * 50% up}", &v, "52.97");
    expect(f, "${(invoice.net - invoice.tax) * 50% down}", &v, "52.96");
    expect(f, "${invoice.net * 19% half-up}", &v, "24.40"); /* 24.4036 */
    expect(f, "${invoice.net * 7.5% half-up * 200% down}", &v, "19.26");
    expect(f, "${invoice.net * 0% down}", &v, "0.00");
    /* operators bind as in arithmetic: * before + and -, left to right */
    expect(f, "${invoice.tax - invoice.tax * 100% down + invoice.tax}", &v, "22.51");
    expect(f, "${-invoice.tax * 10% half-up}", &v, "-2.25"); /* the mirror of 2.251 */

    /* line.gross is net + tax, of the line being filled */
    v.line = &lines[0];
    v.line_n = 1;
    expect(f, "${line.gross}|${line.net + line.tax}|${line.gross - line.tax}", &v,
           "146.91|146.91|123.45");
    v.line = &lines[1];
    v.line_n = 2;
    expect(f, "${line.gross}|${line.gross|abs|amount:,}", &v, "-5.95|5,95");
    make_invoice(&inv, "JPY", 0, 15095);
    inv.tax_total = 2251;
    inv.lines = lines;
    inv.n_lines = 3;
    expect(f, "${line.gross}|${invoice.net * 10% half-up}", &v, "-595|1510");
    make_invoice(&inv, "KWD", 3, 15095);
    inv.tax_total = 2251;
    inv.lines = lines;
    inv.n_lines = 3;
    expect(f, "${line.gross}", &v, "-0.595");

    /* no invoice: no amount, so empty, as a variable */
    struct flow_vars none = {0};
    expect(f, "[${invoice.net + invoice.tax}][${-invoice.payable * 10% up}]", &none, "[][]");

    /* out of range: a business exception naming the expression, never a wrapped number */
    make_invoice(&inv, "EUR", 2, MONEY_MAX_MINOR);
    inv.tax_total = MONEY_MAX_MINOR;
    char err[APBOT_ERR_LEN] = "";
    char *got = NULL;
    assert_int_equal(flow_expand(f, "${invoice.payable + invoice.tax}", &v, &got, err, sizeof(err)),
                     APBOT_E_DATA);
    assert_null(got);
    assert_non_null(strstr(err, "${invoice.payable + invoice.tax}: a sum is out of range"));
    assert_int_equal(
        flow_expand(f, "${invoice.payable * 100.0001% up}", &v, &got, err, sizeof(err)),
        APBOT_E_DATA);
    assert_non_null(strstr(err, "an amount at a rate is out of range"));
    expect(f, "${invoice.payable - invoice.tax}", &v, "0.00");
    flow_free(f);
}

/* A UBL invoice's lines state no tax: line.tax is each line's share of the invoice's tax at its
 * rate, the rounding remainder to the largest remainder, the lines adding up to the tax. */
static void test_flow_expand_line_tax_share(void **state)
{
    (void)state;
    struct flow *f = load_ok("tests/data/flows/ok-full.xml");
    struct invoice inv;
    /* XRechnung 01.01a: 288.79 and 26.07 at 7 %, tax 22.04 */
    struct invoice_line lines[3] = {
        {.gl_account = "5700", .net = 28879, .tax_category = "S:7"},
        {.gl_account = "6000", .net = 2607, .tax_category = "S:7"},
        {.gl_account = "6010", .net = 5000, .tax_category = "E"},
    };
    struct flow_vars v = {.inv = &inv};
    struct linetax t;
    char err[APBOT_ERR_LEN] = "";
    char *got = NULL;

    make_invoice(&inv, "EUR", 2, 38690);
    inv.net_total = 36486;
    inv.tax_total = 2204;
    inv.lines = lines;
    inv.n_lines = 3;
    linetax_init(&t, &inv);
    assert_true(t.ok && t.derived);
    for (int with = 0; with < 2; with++) {
        v.taxes = with ? &t : NULL; /* worked out once, or for each placeholder: the same */
        v.line = &lines[0];
        v.line_n = 1;
        expect(f, "${line.tax}|${line.gross}", &v, "20.22|309.01");
        v.line = &lines[1];
        v.line_n = 2;
        expect(f, "${line.tax}|${line.gross}", &v, "1.82|27.89");
        v.line = &lines[2];
        v.line_n = 3;
        expect(f, "${line.tax}|${line.gross}|${line.net}", &v, "0.00|50.00|50.00");
    }
    linetax_done(&t);

    /* a charge on the whole document: the rates do not reach the tax, a business exception */
    inv.tax_total = 2300;
    v.taxes = NULL;
    v.line = &lines[0];
    v.line_n = 1;
    assert_int_equal(flow_expand(f, "${line.gross|amount:.}", &v, &got, err, sizeof(err)),
                     APBOT_E_DATA);
    assert_null(got);
    assert_non_null(strstr(err, "${line.gross}: the invoice's lines state no tax, and the lines' "
                                "tax at their rates is 22.03 to 22.05 (each line rounded either "
                                "way), the document's tax 23.00"));
    expect(f, "${line.net}", &v, "288.79"); /* what does not need the tax still expands */
    /* a category without a rate */
    inv.tax_total = 2204;
    lines[1].tax_category = "S";
    assert_int_equal(flow_expand(f, "${line.tax}", &v, &got, err, sizeof(err)), APBOT_E_DATA);
    assert_non_null(strstr(err, "line 2 has the tax category 'S' without a rate"));
    /* a line handed on its own (not one of the invoice's) is what it states */
    struct invoice_line alone = {.net = 100, .tax = 19};
    v.line = &alone;
    expect(f, "${line.tax}|${line.gross}", &v, "0.19|1.19");
    flow_free(f);
}

/* Numbers as "%zu" prints them, literal templates given back as they are (up to the 64 KiB an
 * expansion may have), names that are almost variables, and a placeholder's formatters never
 * taking the arguments of the one before. */
static void test_flow_expand_numbers_literals_names(void **state)
{
    (void)state;
    struct flow *f = load_ok("tests/data/flows/ok-full.xml");
    struct invoice inv;
    struct invoice_line line = {.gl_account = "5700"};
    struct flow_vars v = {.inv = &inv, .line = &line};
    static const size_t numbers[] = {1, 9, 10, 11, 99, 100, 12345, 4294967296u, SIZE_MAX};

    make_invoice(&inv, "EUR", 2, 14191);
    for (size_t i = 0; i < sizeof(numbers) / sizeof(numbers[0]); i++) {
        char want[64];
        snprintf(want, sizeof(want), "a%zu|%zu", numbers[i], numbers[i]);
        v.line_n = numbers[i];
        inv.n_lines = numbers[i];
        expect(f, "a${line.n}|${invoice.line_count}", &v, want);
    }
    inv.n_lines = 0;
    expect(f, "${invoice.line_count}", &v, "0");

    static const char *const literals[] = {"", "docType", "a$b{c}", "$", "{", "}${"};
    for (size_t i = 0; i < sizeof(literals) / sizeof(literals[0]); i++) {
        const char *lit = flow_literal(literals[i]);
        if (strstr(literals[i], "${")) {
            assert_null(lit);
            continue;
        }
        assert_ptr_equal(lit, literals[i]);
        expect(f, literals[i], &v, literals[i]);
    }
    assert_null(flow_literal(NULL));
    assert_null(flow_literal("x${key}"));
    char *big = malloc(64 * 1024 + 2);
    assert_non_null(big);
    memset(big, 'x', 64 * 1024 + 1);
    big[64 * 1024] = '\0'; /* as long as an expansion may be */
    assert_ptr_equal(flow_literal(big), big);
    expect(f, big, &v, big);
    big[64 * 1024] = 'x';
    big[64 * 1024 + 1] = '\0'; /* one byte more: not literal, and no expansion either */
    assert_null(flow_literal(big));
    expect_fail(f, big, &v, "longer than");
    free(big);

    static const char *const not_vars[] = {
        "${}",         "${i}",    "${invoice}",       "${invoice.}",
        "${capture.}", "${row.}", "${invoice.numbe}", "${invoice.numberx}",
        "${keys}",     "${Key}",  "${|upper}"};
    for (size_t i = 0; i < sizeof(not_vars) / sizeof(not_vars[0]); i++)
        expect_fail(f, not_vars[i], &v, "unknown variable");
    expect(f, "${invoice.number|trunc:3}${invoice.number|upper}|${invoice.number}", &v,
           "INVINV 2026/0042|INV 2026/0042");
    expect_fail(f, "${invoice.number|trunc:3}${invoice.number|trunc}", &v, "unknown formatter");
    flow_free(f);
}

/* map: without a mapping for the invoice's value is a business exception naming the value. */
static void test_flow_map_miss_is_data(void **state)
{
    (void)state;
    struct flow *f = load_ok("flows/acme.xml");
    struct invoice inv;
    struct flow_vars v = {.inv = &inv};
    char err[APBOT_ERR_LEN] = "";
    char *got = NULL;

    make_invoice(&inv, "EUR", 2, 100);
    assert_int_equal(
        flow_expand(f, "${invoice.currency|map:USD=1,GBP=2}", &v, &got, err, sizeof(err)),
        APBOT_E_DATA);
    assert_null(got);
    assert_non_null(strstr(err, "'EUR'"));
    assert_int_equal(
        flow_expand(f, "${invoice.currency|map:USD=1,EUR=2}", &v, &got, err, sizeof(err)),
        APBOT_OK);
    assert_string_equal(got, "2");
    free(got);
    /* a value of the wrong shape is not a business exception */
    memcpy(inv.issue_date, "3.11.2026", 10);
    assert_int_equal(flow_expand(f, "${invoice.issue_date|date:%d}", &v, &got, err, sizeof(err)),
                     APBOT_E_INVAL);
    flow_free(f);
}

static void test_flow_names(void **state)
{
    (void)state;
    assert_string_equal(flow_outcome_name(FLOW_OUT_SAVED), "saved");
    assert_int_equal(flow_outcome_from_name("saved"), FLOW_OUT_SAVED);
    for (int o = 0; o < FLOW_OPTION__COUNT; o++)
        assert_string_not_equal(flow_option_name((enum flow_option)o), "invalid");
    assert_string_equal(flow_option_name(FLOW_OPTION_LABEL_PREFIX), "label-prefix");
    assert_string_equal(flow_missing_name(FLOW_MISSING_SKIP), "skip");
    assert_string_equal(flow_list_by_name(FLOW_LIST_BY_INVOICE), "invoice");
    assert_string_equal(flow_when_name(FLOW_WHEN_MISSING_BUTTON), "button");
    assert_string_equal(flow_when_name(FLOW_WHEN__COUNT), "invalid");
    for (int w = FLOW_WHEN_MISSING_ANY; w < FLOW_WHEN__COUNT; w++)
        assert_int_equal(flow_when_from_name(flow_when_name((enum flow_when)w)), w);
    assert_int_equal(flow_when_from_name("always"), FLOW_WHEN__COUNT); /* no attribute value */
    assert_string_equal(flow_option_name(FLOW_OPTION__COUNT), "invalid");
    assert_string_equal(flow_missing_name(FLOW_MISSING__COUNT), "invalid");
    assert_string_equal(flow_list_by_name(FLOW_LIST_BY__COUNT), "invalid");
    /* the loader reads attributes back through the same tables */
    for (int o = 0; o < FLOW_OPTION__COUNT; o++)
        assert_int_equal(flow_option_from_name(flow_option_name((enum flow_option)o)), o);
    for (int m = 0; m < FLOW_MISSING__COUNT; m++)
        assert_int_equal(flow_missing_from_name(flow_missing_name((enum flow_missing)m)), m);
    for (int b = 0; b < FLOW_LIST_BY__COUNT; b++)
        assert_int_equal(flow_list_by_from_name(flow_list_by_name((enum flow_list_by)b)), b);
    assert_int_equal(flow_option_from_name("invalid"), FLOW_OPTION__COUNT);
    assert_int_equal(flow_missing_from_name(NULL), FLOW_MISSING__COUNT);
    assert_int_equal(flow_list_by_from_name("Booked"), FLOW_LIST_BY__COUNT);
    assert_int_equal(flow_commit_index(NULL), 0);
}

/* An open decision (<todo>, as apbot flow record writes them) keeps a flow from loading, each
 * one named with its line, its id and what to decide, wherever it stands; the schema waits. */
static void test_flow_todo_refused(void **state)
{
    (void)state;
    char tmp[] = "/tmp/apbot-flow-XXXXXX.xml", err[8192] = "";
    char *base = read_src("flows/acme.xml");

    /* one in a step, one where an element belongs, one inside a form */
    char *a = replace_once(base, "    <step name=\"post\" commits=\"true\">",
                           "    <todo id=\"errors-check\" entry=\"9\">What does the ERP\n"
                           "      answer when it refuses?</todo>\n"
                           "    <step name=\"post\" commits=\"true\">");
    char *b = replace_once(a, "  <list ", "  <todo id=\"list\">Write the list.</todo>\n  <list ");
    char *c = replace_once(b, "<field name=\"vendorNo\">${vendor.id}</field>",
                           "<todo id=\"value-amount\"/>");
    assert_int_equal(load_text(c, tmp, err, sizeof(err)), APBOT_E_INVAL);
    assert_non_null(strstr(err, "open decision 'errors-check': What does the ERP answer when it "
                                "refuses? (decide, put what you decided in place of this <todo>, "
                                "check again)"));
    assert_non_null(strstr(err, "open decision 'list': Write the list."));
    assert_non_null(strstr(err, "open decision 'value-amount': a <todo> without text"));
    assert_null(strstr(err, "schema"));
    /* one line each, in line order */
    size_t lines = 0;
    for (const char *p = err; *p; p++)
        lines += *p == '\n';
    assert_true(lines >= 2 && lines <= 3);
    assert_true(strstr(err, "'value-amount'") < strstr(err, "'errors-check'"));
    assert_true(strstr(err, "'errors-check'") < strstr(err, "'list'"));
    free(a);
    free(b);
    free(c);

    /* answered: the same flow loads */
    char tmp2[] = "/tmp/apbot-flow-XXXXXX.xml";
    assert_int_equal(load_text(base, tmp2, err, sizeof(err)), APBOT_OK);
    free(base);
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
        cmocka_unit_test(test_flow_outcome_names),
        cmocka_unit_test(test_flow_full_struct),
        cmocka_unit_test(test_flow_classic),
        cmocka_unit_test(test_flow_mutations),
        cmocka_unit_test(test_flow_doc_group),
        cmocka_unit_test(test_flow_xpath_limits),
        cmocka_unit_test(test_flow_problems_one_line_each),
        cmocka_unit_test(test_flow_expand_round2),
        cmocka_unit_test(test_flow_expand_amounts),
        cmocka_unit_test(test_flow_expr_hints),
        cmocka_unit_test(test_flow_expand_line_tax_share),
        cmocka_unit_test(test_flow_expand_numbers_literals_names),
        cmocka_unit_test(test_flow_map_miss_is_data),
        cmocka_unit_test(test_flow_names),
        cmocka_unit_test(test_flow_todo_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
