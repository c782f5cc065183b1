/*
 * test_flow_json.c - flows for ERPs whose web client speaks JSON (flow_json.c and the JSON parts
 * of the loader and the checks): flows/spa.xml loads into the struct it describes; a JSON body
 * expands into JSON whose every value is the one intended - a vendor name with a quote, a
 * backslash, a line break and a non-ASCII letter stays one string, byte for byte; typed values
 * (ids, tagged decimals and dates, a captured context inserted as JSON, an empty date as null),
 * one element per invoice line with each line's resolved id; each encoding <json-values>
 * offers; values of the wrong type refused; and every JSON-specific mistake a flow author can
 * make refused at load with its line and a reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apbot/flow.h"
#include "apbot/invoice.h"
#include "web/jdoc.h"

static char *src_path(const char *rel)
{
    const char *src = getenv("APBOT_SRC");
    size_t n = strlen(src ? src : ".") + strlen(rel) + 2;
    char *p = malloc(n);
    assert_non_null(p);
    snprintf(p, n, "%s/%s", src ? src : ".", rel);
    return p;
}

static char *slurp(const char *path)
{
    FILE *in = fopen(path, "rb");
    assert_non_null(in);
    char *buf = calloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, in);
    fclose(in);
    buf[n] = '\0';
    return buf;
}

/* flows/spa.xml with `from` replaced by `to` (once; `from` must occur), loaded: the return code
 * and the problems in err. */
static int load_mutated(const char *from, const char *to, struct flow **ret, char *err,
                        size_t errlen)
{
    char *path = src_path("flows/spa.xml");
    char *text = slurp(path);
    char tmp[] = "/tmp/apbot-spa-XXXXXX.xml";
    char *hit = strstr(text, from);
    if (!hit)
        fail_msg("'%s' is not in flows/spa.xml", from);
    int fd = mkstemps(tmp, 4);
    assert_true(fd >= 0);
    FILE *out = fdopen(fd, "wb");
    fwrite(text, 1, (size_t)(hit - text), out);
    fputs(to, out);
    fputs(hit + strlen(from), out);
    fclose(out);
    int rc = flow_load(tmp, ret, err, errlen);
    remove(tmp);
    free(text);
    free(path);
    return rc;
}

static struct flow *load_spa(void)
{
    struct flow *f = NULL;
    char err[8192] = "";
    if (load_mutated("<flow ", "<flow ", &f, err, sizeof(err)) != APBOT_OK)
        fail_msg("flows/spa.xml: %s", err);
    return f;
}

static void test_flow_json_spa_struct(void **state)
{
    (void)state;
    struct flow *f = load_spa();

    assert_int_equal(f->json_decimal, FLOW_JSON_DECIMAL_TAGGED);
    assert_int_equal(f->json_date, FLOW_JSON_DATE_TAGGED);
    assert_int_equal(f->n_headers, 1);
    assert_string_equal(f->headers[0].name, "Authorization");
    assert_string_equal(f->headers[0].prefix, "Session ");
    assert_true(f->headers[0].base64);
    /* the login is a JSON call; its captures and the call after it */
    assert_true(f->login.present);
    assert_true(f->login.send.present);
    assert_true(f->login.send.post);
    assert_non_null(f->login.send.json);
    assert_null(f->login.get);
    assert_string_equal(f->login.success_json.pointer, "/result/1");
    assert_int_equal(f->login.n_captures, 2);
    assert_true(f->login.captures[1].secret);
    assert_false(f->login.captures[0].secret);
    assert_int_equal(f->login.n_then, 1);
    assert_string_equal(f->login.then[0].captures[0].pointer, "/result");
    /* a JSON lookup table */
    assert_true(f->lookup.send.present);
    assert_true(f->lookup.table.json);
    assert_string_equal(f->lookup.table.pointer, "/result");
    assert_string_equal(f->lookup.table.cols[0].pointer, "/id");
    assert_null(f->lookup.table.cols[0].xpath);
    /* resolves: the account one per line */
    assert_int_equal(f->n_resolves, 4);
    assert_string_equal(f->resolves[1].name, "account");
    assert_true(f->resolves[1].per_line);
    assert_false(f->resolves[0].per_line);
    assert_string_equal(f->resolves[0].match_column, "code");
    /* the create step uses all four; the post step none */
    assert_true(f->steps[0].send.present);
    assert_true(f->steps[0].commits);
    assert_int_equal(f->steps[0].n_resolves, 4);
    assert_int_equal(f->steps[1].n_resolves, 0);
    /* rules over JSON */
    assert_int_equal(f->steps[0].n_rules, 3);
    assert_int_equal(f->steps[0].rules[1].n_json, 2);
    assert_int_equal(f->outcomes[0].n_json, 2);
    assert_true(f->outcomes[0].json[1].absent);
    assert_int_equal(f->list.page_size, 100);
    flow_free(f);
}

/* What the post's resolves found, for the find callback: party 17/1017, journal 2, currency 1,
 * and per line the account of that line. */
static const char *find(void *ctx, const char *var, size_t len, size_t line_n)
{
    static const char *const accounts[] = {"", "6000", "4400"};
    (void)ctx;
    struct {
        const char *var, *value;
    } const known[] = {{"ref.party.id", "17"},
                       {"ref.party.address", "1017"},
                       {"ref.journal.id", "2"},
                       {"ref.currency.id", "1"},
                       {"cookie.csrftoken", "c5rf"}};
    if (len == 14 && memcmp(var, "ref.account.id", 14) == 0)
        return line_n < 3 ? accounts[line_n] : NULL;
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (strlen(known[i].var) == len && memcmp(known[i].var, var, len) == 0)
            return known[i].value;
    return NULL;
}

static struct jdoc *parse(const char *text, size_t len)
{
    struct jdoc_limits lim = jdoc_limits_for(1 << 20);
    struct jdoc *d = NULL;
    char err[256];
    if (jdoc_parse(text, len, &lim, &d, err, sizeof(err)) != APBOT_OK)
        fail_msg("not JSON (%s): %s", err, text);
    return d;
}

static char *at(const struct jdoc *d, const char *ptr)
{
    char *t = jdoc_text(jdoc_at(jdoc_root(d), ptr), 0);
    if (!t)
        fail_msg("%s: absent", ptr);
    return t;
}

static void expect_at(const struct jdoc *d, const char *ptr, const char *want)
{
    char *t = at(d, ptr);
    if (strcmp(t, want) != 0)
        fail_msg("%s: '%s', want '%s'", ptr, t, want);
    free(t);
}

static void test_flow_json_create_body(void **state)
{
    (void)state;
    struct flow *f = load_spa();
    static const char hostile[] = "Quote \" Back\\slash\nNewline \xc3\xa9t\xc3\xa9 </json> ${key}";
    struct invoice_line lines[2] = {
        {.description = "Toner \"black\"", .gl_account = "6000", .net = 12050},
        {.description = "Drill\tbits", .gl_account = "4400", .net = 1000},
    };
    struct invoice inv = {.vendor_id = "100001",
                          .vendor_name = (char *)hostile,
                          .invoice_number = "INV-7",
                          .doc_type = INVOICE_DOC_CREDIT_NOTE,
                          .issue_date = "2026-03-05",
                          .due_date = "",
                          .currency = "EUR",
                          .exponent = 2,
                          .payable = -15960,
                          .net_total = -13050,
                          .tax_total = -2910,
                          .lines = lines,
                          .n_lines = 2};
    const char *snames[] = {"uid", "token", "context"};
    const char *svalues[] = {"1", "s3cr3t-token", "{\"company\":1,\"language\":\"en\"}"};
    struct flow_vars v = {.inv = &inv,
                          .key = "AP1-ABCDEFGHIJKLMNOPQRST",
                          .session_names = snames,
                          .session_values = svalues,
                          .n_session = 3,
                          .find = find};
    char *body = NULL, err[512] = "";
    size_t len = 0;

    assert_int_equal(flow_json_expand(f, f->steps[0].send.json, &v, &body, &len, err, sizeof(err)),
                     APBOT_OK);
    assert_int_equal(strlen(body), len);
    struct jdoc *d = parse(body, len);
    expect_at(d, "/method", "model.account.invoice.create");
    /* the hostile name is one string, byte for byte; its ${key} is text, not a placeholder */
    char *comment = at(d, "/params/0/0/comment");
    assert_string_equal(comment, hostile);
    free(comment);
    /* typed values */
    assert_int_equal(jdoc_kind(jdoc_at(jdoc_root(d), "/params/0/0/party")), JDOC_NUMBER);
    expect_at(d, "/params/0/0/party", "17");
    expect_at(d, "/params/0/0/invoice_address", "1017");
    expect_at(d, "/params/0/0/document_type", "credit_note");
    expect_at(d, "/params/0/0/reference", "AP1-ABCDEFGHIJKLMNOPQRST");
    expect_at(d, "/params/0/0/invoice_date",
              "{\"__class__\":\"date\",\"year\":2026,\"month\":3,"
              "\"day\":5}");
    assert_int_equal(jdoc_kind(jdoc_at(jdoc_root(d), "/params/0/0/due_date")), JDOC_NULL);
    expect_at(d, "/params/0/0/tax_amount", "{\"__class__\":\"Decimal\",\"decimal\":\"29.10\"}");
    /* one element per line, each with its own account */
    expect_at(d, "/params/0/0/lines/0/0", "create");
    const json_t *ls = jdoc_at(jdoc_root(d), "/params/0/0/lines/0/1");
    assert_int_equal(json_array_size(ls), 2);
    expect_at(d, "/params/0/0/lines/0/1/0/account", "6000");
    expect_at(d, "/params/0/0/lines/0/1/1/account", "4400");
    expect_at(d, "/params/0/0/lines/0/1/0/description", "Toner \"black\"");
    expect_at(d, "/params/0/0/lines/0/1/1/description", "Drill\tbits");
    expect_at(d, "/params/0/0/lines/0/1/0/quantity", "1");
    expect_at(d, "/params/0/0/lines/0/1/1/unit_price",
              "{\"__class__\":\"Decimal\",\"decimal\":\"10.00\"}");
    /* the context inserted as JSON, not as a string */
    assert_int_equal(jdoc_kind(jdoc_at(jdoc_root(d), "/params/1")), JDOC_OBJECT);
    expect_at(d, "/params/1/company", "1");
    jdoc_free(d);
    free(body);

    /* the login's body carries the secrets as strings, and nothing else of them */
    v.user = "clerk";
    v.password = "p\"w\\d";
    assert_int_equal(flow_json_expand(f, f->login.send.json, &v, &body, &len, err, sizeof(err)),
                     APBOT_OK);
    d = parse(body, len);
    expect_at(d, "/params/0", "clerk");
    expect_at(d, "/params/1/password", "p\"w\\d");
    jdoc_free(d);
    free(body);
    flow_free(f);
}

/* Amounts a flow computes go into a JSON body as decimals too: each line gross (its share of
 * a UBL invoice's tax), the tax an expression leaves, mistakes named at load. */
static void test_flow_json_amounts(void **state)
{
    (void)state;
    struct flow *f = NULL;
    char err[8192] = "";
    if (load_mutated("\"unit_price\": \"${line.net|abs|json:decimal}\"",
                     "\"unit_price\": \"${line.gross|abs|json:decimal}\", "
                     "\"note\": \"${line.net + line.tax|amount:,.}\"",
                     &f, err, sizeof(err)) != APBOT_OK)
        fail_msg("gross: %s", err);
    /* XRechnung 01.01a's lines as a UBL invoice keeps them: no line tax, a rate each */
    struct invoice_line lines[2] = {
        {.description = "a", .gl_account = "6000", .net = 28879, .tax_category = "S:7"},
        {.description = "b", .gl_account = "4400", .net = 2607, .tax_category = "S:7"},
    };
    struct invoice inv = {.vendor_id = "100001",
                          .invoice_number = "INV-8",
                          .doc_type = INVOICE_DOC_INVOICE,
                          .issue_date = "2026-03-05",
                          .currency = "EUR",
                          .exponent = 2,
                          .payable = 33690,
                          .net_total = 31486,
                          .tax_total = 2204,
                          .lines = lines,
                          .n_lines = 2};
    const char *snames[] = {"uid", "token", "context"};
    const char *svalues[] = {"1", "t", "{}"};
    struct flow_vars v = {.inv = &inv,
                          .key = "AP1-ABCDEFGHIJKLMNOPQRST",
                          .session_names = snames,
                          .session_values = svalues,
                          .n_session = 3,
                          .find = find};
    char *body = NULL;
    size_t len = 0;
    assert_int_equal(flow_json_expand(f, f->steps[0].send.json, &v, &body, &len, err, sizeof(err)),
                     APBOT_OK);
    struct jdoc *d = parse(body, len);
    expect_at(d, "/params/0/0/lines/0/1/0/unit_price",
              "{\"__class__\":\"Decimal\",\"decimal\":\"309.01\"}");
    expect_at(d, "/params/0/0/lines/0/1/1/unit_price",
              "{\"__class__\":\"Decimal\",\"decimal\":\"27.89\"}");
    expect_at(d, "/params/0/0/lines/0/1/0/note", "309,01");
    jdoc_free(d);
    free(body);
    /* a tax the rates cannot reach: a business exception, nothing composed */
    inv.tax_total = 2300;
    body = NULL;
    assert_int_equal(flow_json_expand(f, f->steps[0].send.json, &v, &body, &len, err, sizeof(err)),
                     APBOT_E_DATA);
    assert_null(body);
    assert_non_null(strstr(err, "${line.gross}: the invoice's lines state no tax"));
    flow_free(f);

    /* outside the lines: an expression of the invoice's amounts, typed */
    if (load_mutated("\"tax_amount\": \"${invoice.tax|abs|json:decimal}\"",
                     "\"tax_amount\": \"${invoice.payable - invoice.net|abs|json:decimal}\"", &f,
                     err, sizeof(err)) != APBOT_OK)
        fail_msg("expression: %s", err);
    inv.tax_total = 2204;
    assert_int_equal(flow_json_expand(f, f->steps[0].send.json, &v, &body, &len, err, sizeof(err)),
                     APBOT_OK);
    d = parse(body, len);
    expect_at(d, "/params/0/0/tax_amount", "{\"__class__\":\"Decimal\",\"decimal\":\"22.04\"}");
    jdoc_free(d);
    free(body);
    flow_free(f);

    /* at load: a line's amount outside $each-line, text in an expression, a date as decimal */
    static const struct {
        const char *from, *to, *want;
    } bad[] = {
        {"\"${invoice.tax|abs|json:decimal}\"", "\"${invoice.tax + line.gross|json:decimal}\"",
         "${line.gross} is not available here (only inside <lines>)"},
        {"\"${line.net|abs|json:decimal}\"", "\"${line.net + line.description|json:decimal}\"",
         "'line.description' is text, not an amount"},
        {"\"${line.net|abs|json:decimal}\"", "\"${line.net * 19%|json:decimal}\"",
         "a rate needs its rounding"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        f = NULL;
        assert_int_equal(load_mutated(bad[i].from, bad[i].to, &f, err, sizeof(err)), APBOT_E_INVAL);
        if (!strstr(err, bad[i].want))
            fail_msg("%s: want '%s' in: %s", bad[i].to, bad[i].want, err);
    }
}

static void test_flow_json_encodings(void **state)
{
    (void)state;
    static const struct {
        const char *values;
        const char *decimal, *date;
    } cases[] = {
        {"<json-values decimal=\"string\" date=\"iso\"/>", "\"-29.10\"", "\"2026-03-05\""},
        {"<json-values decimal=\"number\"/>", "-29.10", "\"2026-03-05\""},
        {"", "\"-29.10\"", "\"2026-03-05\""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct flow *f = NULL;
        char err[4096] = "";
        if (load_mutated("<json-values decimal=\"tagged\" date=\"tagged\"/>", cases[i].values, &f,
                         err, sizeof(err)) != APBOT_OK)
            fail_msg("%s", err);
        struct invoice inv = {.issue_date = "2026-03-05",
                              .currency = "EUR",
                              .exponent = 2,
                              .tax_total = -2910,
                              .doc_type = INVOICE_DOC_INVOICE};
        struct flow_vars v = {.inv = &inv, .find = find};
        char *body = NULL;
        size_t len;
        assert_int_equal(
            flow_json_expand(f, f->steps[0].send.json, &v, &body, &len, err, sizeof(err)),
            APBOT_OK);
        struct jdoc *d = parse(body, len);
        char *dec = jdoc_text(jdoc_at(jdoc_root(d), "/params/0/0/tax_amount"), 0);
        char *date = jdoc_text(jdoc_at(jdoc_root(d), "/params/0/0/invoice_date"), 0);
        /* the template takes the tax with abs; compare the sign-free part and the quoting */
        char want_dec[32];
        snprintf(want_dec, sizeof(want_dec), "%s", cases[i].decimal);
        char *minus = strchr(want_dec, '-');
        if (minus)
            memmove(minus, minus + 1, strlen(minus));
        char *raw = strstr(body, "\"tax_amount\":");
        assert_non_null(raw);
        assert_int_equal(strncmp(raw + 13, want_dec, strlen(want_dec)), 0);
        assert_non_null(strstr(body, cases[i].date));
        free(dec);
        free(date);
        jdoc_free(d);
        free(body);
        flow_free(f);
    }
}

static void test_flow_json_values_refused(void **state)
{
    (void)state;
    struct flow *f = load_spa();
    struct invoice inv = {.issue_date = "2026-03-05", .currency = "EUR", .exponent = 2};
    const char *snames[] = {"context"};
    const char *bad_ctx[] = {"{\"company\":"};
    struct flow_vars v = {.inv = &inv, .find = find};
    char *body = NULL, err[512] = "";
    size_t len;

    /* a document id that is no integer: an ERP's answer never becomes JSON syntax */
    v.doc = "12, \"x\": 1";
    assert_int_equal(flow_json_expand(f, f->steps[1].send.json, &v, &body, &len, err, sizeof(err)),
                     APBOT_E_INVAL);
    assert_null(body);
    assert_non_null(strstr(err, "no integer"));
    v.doc = "0042";
    assert_int_equal(flow_json_expand(f, f->steps[1].send.json, &v, &body, &len, err, sizeof(err)),
                     APBOT_E_INVAL);
    /* a captured context that is not JSON */
    v.doc = "42";
    v.session_names = snames;
    v.session_values = bad_ctx;
    v.n_session = 1;
    assert_int_equal(flow_json_expand(f, f->steps[1].send.json, &v, &body, &len, err, sizeof(err)),
                     APBOT_E_INVAL);
    assert_non_null(strstr(err, "not JSON"));
    /* a value that is not UTF-8 never goes into JSON (found by fuzz_jtemplate:
     * corpus/jtemplate/regress-not-utf8) */
    v.key = "AP1-\xdf\x22-not-utf8";
    v.session_values = NULL;
    v.n_session = 0;
    assert_int_equal(flow_json_expand(f, f->steps[0].send.json, &v, &body, &len, err, sizeof(err)),
                     APBOT_E_INVAL);
    assert_non_null(strstr(err, "not UTF-8"));
    v.key = NULL;
    /* a document type the map has no entry for: the invoice's, a business exception */
    inv.doc_type = (enum invoice_doc_type)7;
    v.session_values = NULL;
    v.n_session = 0;
    assert_int_equal(flow_json_expand(f, f->steps[0].send.json, &v, &body, &len, err, sizeof(err)),
                     APBOT_E_DATA);
    flow_free(f);
}

/* Every JSON-specific mistake refused at load, with its line and words. */
static void test_flow_json_mistakes(void **state)
{
    (void)state;
    static const struct {
        const char *from, *to, *want;
    } cases[] = {
        {"\"${ref.party.id|json:int}\"", "\"id ${ref.party.id|json:int}\"",
         "json:int only in a JSON body, last in a placeholder that is the whole string"},
        {"\"${ref.party.id|json:int}\"", "\"${ref.party.id|json:integer}\"",
         "json:integer: unknown type"},
        {"\"${ref.party.id|json:int}\"", "\"${ref.party.idx|json:int}\"",
         "resolve 'party' has no column 'idx'"},
        {"\"${ref.party.id|json:int}\"", "\"${ref.vendor.id|json:int}\"",
         "no <resolve name=\"vendor\">"},
        {"\"journal\": \"${ref.journal.id|json:int}\"",
         "\"journal\": \"${ref.account.id|json:int}\"",
         "resolve 'account' looks up one code per invoice line"},
        {"\"${session.context|json:raw}\"]}</json>\n    </send>\n    <table pointer=\"/result\" "
         "max-rows=\"100\">",
         "\"${session.ctx|json:raw}\"]}</json>\n    </send>\n    <table pointer=\"/result\" "
         "max-rows=\"100\">",
         "${session.ctx}: no <capture name=\"ctx\">"},
        {"[[[\"reference\", \"=\", \"${key}\"]]",
         "[[[\"reference\", \"=\", \"${key}\"]], "
         "{\"$each-line\": 1}",
         "{\"$each-line\": ...} only in a post step's body"},
        {"<column name=\"doc\" pointer=\"/id\"/>\n      <column name=\"reference\"",
         "<column name=\"doc\" xpath=\"td[1]\"/>\n      <column name=\"reference\"",
         "column 'doc': give pointer=\"/...\", not xpath"},
        {"<column name=\"doc\" pointer=\"/id\"/>\n      <column name=\"reference\"",
         "<column name=\"doc\" pointer=\"id\"/>\n      <column name=\"reference\"",
         "pointer \"id\" is not a JSON pointer"},
        {"<json pointer=\"/result/0\">^(?&lt;doc&gt;[1-9][0-9]*)$</json>",
         "<json pointer=\"/result/0\"/>",
         "a saved rule needs a pattern, a url or a JSON value it matches"},
        {"{\"id\": 8, \"method\"", "{\"id\": 8 \"method\"", "the JSON body is not JSON"},
        {"\"${offset|json:int}\"", "\"${offset|json:int}\"", NULL},
        {"<list page-size=\"100\"", "<list", "${offset} and ${limit} need page-size"},
        {"<header name=\"Authorization\"", "<header name=\"Content-Type\"",
         "not a header apbot may set"},
        {"<capture name=\"token\" json=\"/result/1\" secret=\"true\"/>", "",
         "${session.token}: no <capture name=\"token\">"},
        {"\"${secret.password}\"}", "\"${key}\"}",
         "its <send> carries no ${secret.password} and the flow has no <http-basic/>"},
        {"<send url=\"/acme/\">\n      <json>{\"id\": 0,",
         "<send url=\"/acme/\" method=\"GET\">\n"
         "      <json>{\"id\": 0,",
         "method=\"GET\" with a body"},
        {"\"params\": [[\"${doc|json:int}\"]", "\"params\": [[\"${invoice.number|json:int}\"]",
         "must name the document"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct flow *f = NULL;
        char err[8192] = "";
        int rc = load_mutated(cases[i].from, cases[i].to, &f, err, sizeof(err));
        if (!cases[i].want) {
            if (rc != APBOT_OK)
                fail_msg("case %zu refused: %s", i, err);
            flow_free(f);
            continue;
        }
        if (rc == APBOT_OK)
            fail_msg("case %zu (%s) was accepted", i, cases[i].to);
        if (!strstr(err, cases[i].want))
            fail_msg("case %zu: want '%s' in:\n%s", i, cases[i].want, err);
        assert_null(f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flow_json_spa_struct),
        cmocka_unit_test(test_flow_json_create_body),
        cmocka_unit_test(test_flow_json_amounts),
        cmocka_unit_test(test_flow_json_encodings),
        cmocka_unit_test(test_flow_json_values_refused),
        cmocka_unit_test(test_flow_json_mistakes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
