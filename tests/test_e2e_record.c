/*
 * test_e2e_record.c - `apbot flow record` judged by what its drafts do: for each simulator UI
 * (acme, classic, spa), the draft written from the HAR a person's browser session recorded
 * (tests/data/har/, made by tests/record_har.sh; APBOT_RECORD_HAR_DIR points at freshly recorded
 * ones) holds no secret of the HAR, refuses to load while it has open decisions, names exactly
 * the open decisions expected (for acme: only the error rules), and - once they are answered
 * as a person would answer them (the error messages of docs/erp-sim.md; for spa the listing its
 * client has no screen for) - loads and posts the chaos scenario's invoices, lines, credit
 * notes and all, with every key booked at most once and every item terminal, checked on the
 * simulator's ground truth.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "apbot/flow.h"
#include "apbot/record.h"
#include "apbot/store.h"
#include "helpers/e2e.h"
#include "helpers/invariants.h"
#include "helpers/sim_client.h"
#include "record/har.h"

/* An open decision's answer: what a person puts in place of <todo id="id">. */
struct answer {
    const char *id;
    const char *xml;
};

static const struct answer acme_answers[] = {
    {"login-refused", "<rule name=\"bad-credentials\" outcome=\"rejected\">&lt;span "
                      "class=\"msgText\"&gt;(?&lt;reason&gt;E001: [^&lt;]*)</rule>"},
    {"errors-check",
     "<rule name=\"check-validation\" outcome=\"rejected\" status=\"200,500\">&lt;span "
     "class=\"msgText\"&gt;(?&lt;reason&gt;E1(?:0[1-8]|1[02-4]): [^&lt;]*)</rule>\n"
     "      <rule name=\"check-form-reused\" outcome=\"not-sent\">&lt;span "
     "class=\"msgText\"&gt;E109: </rule>"},
    {"errors-outcomes",
     "<rule name=\"validation\" outcome=\"rejected\" status=\"200,500\">&lt;span "
     "class=\"msgText\"&gt;(?&lt;reason&gt;E1(?:0[1-8]|1[02-4]): [^&lt;]*)</rule>"},
    {NULL, NULL},
};

static const struct answer classic_answers[] = {
    {"errors-update",
     "<rule name=\"enter-form-expired\" outcome=\"not-sent\" status=\"500\">&lt;h2 "
     "class=\"error\"&gt;This form has expired</rule>\n"
     "      <rule name=\"enter-validation\" outcome=\"rejected\" status=\"500\">&lt;h2 "
     "class=\"error\"&gt;(?&lt;reason&gt;[^&lt;]+)</rule>"},
    {"errors-save",
     "<rule name=\"save-form-expired\" outcome=\"unknown\" status=\"500\">&lt;h2 "
     "class=\"error\"&gt;This form has expired</rule>\n"
     "      <rule name=\"save-validation\" outcome=\"rejected\" status=\"500\">&lt;h2 "
     "class=\"error\"&gt;(?&lt;reason&gt;[^&lt;]+)</rule>"},
    {"errors-outcomes",
     "<rule name=\"already-approved\" outcome=\"completed\" status=\"500\">&lt;h2 "
     "class=\"error\"&gt;Transaction AP-\\d{4}-\\d{6} is already approved\\.</rule>\n"
     "      <rule name=\"approve-form-expired\" outcome=\"unknown\" status=\"500\">&lt;h2 "
     "class=\"error\"&gt;This form has expired</rule>\n"
     "      <rule name=\"approve-refused\" outcome=\"rejected\" status=\"500\">&lt;h2 "
     "class=\"error\"&gt;(?&lt;reason&gt;[^&lt;]+)</rule>"},
    {NULL, NULL},
};

/* The spa client has no listing screen: the person writes <list> from the ERP's documented
 * search (docs/erp-sim.md), with the context the draft captured. */
static const struct answer spa_answers[] = {
    {"login-refused", "<rule name=\"login-refused\" outcome=\"rejected\"><json "
                      "pointer=\"/error/0\">^LoginException$</json></rule>"},
    {"errors-create", "<rule name=\"create-refused\" outcome=\"rejected\" status=\"200\"><json "
                      "pointer=\"/error/0\">^UserError$</json><json "
                      "pointer=\"/error/1/0\">(?&lt;reason&gt;.+)</json></rule>"},
    {"errors-outcomes", "<rule name=\"post-refused\" outcome=\"rejected\" status=\"200\"><json "
                        "pointer=\"/error/0\">^UserError$</json><json "
                        "pointer=\"/error/1/0\">(?&lt;reason&gt;.+)</json></rule>"},
    {"list", "<list page-size=\"100\" max-pages=\"200\">\n"
             "    <send url=\"/acme/\">\n"
             "      <json>{\"id\": 9, \"method\": \"model.account.invoice.search_read\",\n"
             "             \"params\": [[[\"post_date\", \"&gt;=\", \"${from|json:date}\"],\n"
             "                         [\"post_date\", \"&lt;=\", \"${to|json:date}\"]],\n"
             "                        \"${offset|json:int}\", \"${limit|json:int}\", [[\"id\", "
             "\"ASC\"]],\n"
             "                        [\"id\", \"state\", \"party.code\", \"supplier_invoice\",\n"
             "                         \"invoice_date\", \"total_amount\", \"currency.code\", "
             "\"reference\",\n"
             "                         \"post_date\"],\n"
             "                        \"${session.preferences|json:raw}\"]}</json>\n"
             "    </send>\n"
             "    <table pointer=\"/result\">\n"
             "      <column name=\"doc\" pointer=\"/id\"/>\n"
             "      <column name=\"status\" pointer=\"/state\"/>\n"
             "      <column name=\"vendor\" pointer=\"/party.code\"/>\n"
             "      <column name=\"invoice_number\" pointer=\"/supplier_invoice\"/>\n"
             "      <column name=\"date\" pointer=\"/invoice_date\"/>\n"
             "      <column name=\"amount\" pointer=\"/total_amount\"/>\n"
             "      <column name=\"currency\" pointer=\"/currency.code\"/>\n"
             "      <column name=\"reference\" pointer=\"/reference\"/>\n"
             "      <column name=\"booked\" pointer=\"/post_date\"/>\n"
             "    </table>\n"
             "  </list>"},
    {NULL, NULL},
};

static const char *ui_name(enum sim_ui ui)
{
    return ui == SIM_UI_CLASSIC ? "classic" : ui == SIM_UI_SPA ? "spa" : "acme";
}

static char *read_all(const char *path)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    char *buf = NULL;
    size_t len = 0, cap = 0;
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), fp)) > 0) {
        if (len + n + 1 > cap) {
            cap = (len + n + 1) * 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        memcpy(buf + len, chunk, n);
        len += n;
    }
    fclose(fp);
    if (!buf)
        buf = calloc(1, 1);
    buf[len] = '\0';
    return buf;
}

static void write_all(const char *path, const char *text)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(text, 1, strlen(text), fp), strlen(text));
    assert_int_equal(fclose(fp), 0);
}

static void har_path(char *buf, size_t len, enum sim_ui ui)
{
    const char *dir = getenv("APBOT_RECORD_HAR_DIR");
    char rel[64];
    if (dir && *dir) {
        snprintf(buf, len, "%s/%s.har", dir, ui_name(ui));
        return;
    }
    snprintf(rel, sizeof(rel), "tests/data/har/%s.har", ui_name(ui));
    e2e_src_path(buf, len, rel);
}

/*
 * The secrets of the HAR, each absent from the draft's bytes: the password, every Authorization
 * value and what it decodes to past the user, every cookie sent or set, the tokens of a JSON
 * login's answer.
 */
static void assert_no_secret(const char *draft, const struct har *h)
{
    assert_null(strstr(draft, "acme-demo"));
    assert_null(strstr(draft, "Y2xlcms6YWNtZS1kZW1v")); /* base64 clerk:acme-demo */
    size_t checked = 0;
    for (size_t i = 0; i < h->n; i++) {
        const struct har_entry *e = &h->entries[i];
        for (size_t k = 0; k < e->n_req_headers; k++) {
            const char *n = e->req_headers[k].name, *v = e->req_headers[k].value;
            if (strcasecmp(n, "authorization") == 0) {
                const char *sp = strchr(v, ' ');
                assert_null(strstr(draft, sp ? sp + 1 : v));
                checked++;
            }
            if (strcasecmp(n, "cookie") == 0) {
                const char *eq = strchr(v, '=');
                char val[256];
                snprintf(val, sizeof(val), "%s", eq ? eq + 1 : v);
                val[strcspn(val, ";")] = '\0';
                assert_null(strstr(draft, val));
                checked++;
            }
        }
        for (size_t k = 0; k < e->n_resp_headers; k++)
            if (strcasecmp(e->resp_headers[k].name, "set-cookie") == 0) {
                const char *eq = strchr(e->resp_headers[k].value, '=');
                char val[256];
                snprintf(val, sizeof(val), "%s", eq ? eq + 1 : "");
                val[strcspn(val, ";")] = '\0';
                if (strlen(val) >= 8)
                    assert_null(strstr(draft, val));
                checked++;
            }
        /* a JSON login's answer: {"result": [UID, "TOKEN"]} */
        const char *tok = strstr(e->body, "\"result\":[");
        if (strstr(e->req_body, "common.db.login") && tok) {
            const char *q = strchr(tok + 10, '"');
            char val[256];
            snprintf(val, sizeof(val), "%s", q ? q + 1 : "");
            val[strcspn(val, "\"")] = '\0';
            assert_true(strlen(val) >= 16);
            assert_null(strstr(draft, val));
            checked++;
        }
    }
    assert_true(checked > 0); /* there was something to keep out */
}

/* Replaces every <todo id="ID" ...>...</todo> by its answer; fails on an unexpected one and
 * when an expected one is missing. Heap. */
static char *answer_todos(const char *draft, const struct answer *answers)
{
    size_t cap = strlen(draft) + 64 * 1024, len = 0;
    char *out = malloc(cap);
    bool used[16] = {false};
    const char *p = draft;
    assert_non_null(out);
    for (;;) {
        const char *t = strstr(p, "<todo id=\"");
        size_t head = t ? (size_t)(t - p) : strlen(p);
        assert_true(len + head + 1 < cap);
        memcpy(out + len, p, head);
        len += head;
        if (!t)
            break;
        const char *idb = t + 10, *ide = strchr(idb, '"'), *end = strstr(t, "</todo>");
        assert_non_null(ide);
        assert_non_null(end);
        size_t k = 0;
        while (answers[k].id && (strlen(answers[k].id) != (size_t)(ide - idb) ||
                                 strncmp(answers[k].id, idb, (size_t)(ide - idb)) != 0))
            k++;
        if (!answers[k].id)
            fail_msg("an open decision no person was expected to answer: %.*s", (int)(ide - idb),
                     idb);
        used[k] = true;
        size_t al = strlen(answers[k].xml);
        assert_true(len + al + 1 < cap);
        memcpy(out + len, answers[k].xml, al);
        len += al;
        p = end + 7;
    }
    out[len] = '\0';
    for (size_t k = 0; answers[k].id; k++)
        if (!used[k])
            fail_msg("the open decision '%s' is not in the draft", answers[k].id);
    return out;
}

/* Completed items by type: every credit note booked with one document type, every invoice with
 * another (the draft's map of the type reached the ERP). */
struct doc_types {
    struct e2e *e;
    char invoice[32], credit[32];
    int credits;
};

static int check_type(void *ctx, const struct store_item *it)
{
    struct doc_types *dt = ctx;
    if (!it->erp_doc)
        return 0;
    char path[160];
    long status = 0;
    char *body = NULL;
    snprintf(path, sizeof(path), "/_sim/document?doc=%s", it->erp_doc);
    assert_int_equal(simc_request(dt->e->port, "GET", path, NULL, 10000, &status, &body), 0);
    assert_int_equal(status, 200);
    const char *t = strstr(body, "\"doc_type\":\"");
    assert_non_null(t);
    char type[32];
    snprintf(type, sizeof(type), "%s", t + 12);
    type[strcspn(type, "\"")] = '\0';
    bool credit = strcmp(it->doc_type, "credit-note") == 0;
    char *want = credit ? dt->credit : dt->invoice;
    if (!want[0])
        snprintf(want, 32, "%s", type);
    assert_string_equal(type, want);
    dt->credits += credit;
    free(body);
    return 0;
}

static void run_ui(enum sim_ui ui, int n, uint64_t seed)
{
    struct e2e e;
    char har[512], sample[512], draft_path[300], answered[300], err[16384];
    struct record_result res;

    e2e_start_ui(&e, ui, "chaos", NULL, seed);
    har_path(har, sizeof(har), ui);
    e2e_src_path(sample, sizeof(sample), "tests/data/har/sample.csv");
    snprintf(draft_path, sizeof(draft_path), "%s/draft.xml", e.dir);
    snprintf(answered, sizeof(answered), "%s/answered.xml", e.dir);

    /* the draft, as `apbot flow record` writes it */
    struct record_request rq = {
        .har_path = har,
        .invoice_path = sample,
        .invoice_n = 1,
        .invoice_label = "sample.csv#1",
        .out_path = draft_path,
        .user = "clerk",
        .password = "acme-demo",
    };
    FILE *devnull = fopen("/dev/null", "w");
    assert_non_null(devnull);
    assert_int_equal(record_run(&rq, &res, getenv("E2E_LOG") ? stderr : devnull, devnull),
                     APBOT_OK);
    fclose(devnull);
    assert_true(res.written);
    assert_true(res.open > 0);

    char *draft = read_all(draft_path);
    struct har *h = NULL;
    assert_int_equal(har_read(har, &h, err, sizeof(err)), APBOT_OK);
    assert_no_secret(draft, h);
    har_free(h);

    /* open decisions refuse the draft, each named */
    struct flow *f = NULL;
    assert_int_not_equal(flow_load(draft_path, &f, err, sizeof(err)), APBOT_OK);
    assert_non_null(strstr(err, "open decision"));

    /* answered as a person would: then it loads */
    const struct answer *ans = ui == SIM_UI_CLASSIC ? classic_answers
                               : ui == SIM_UI_SPA   ? spa_answers
                                                    : acme_answers;
    char *done = answer_todos(draft, ans);
    write_all(answered, done);
    if (flow_load(answered, &f, err, sizeof(err)) != APBOT_OK)
        fail_msg("%s: the answered draft does not load:\n%s", ui_name(ui), err);
    flow_free(f);
    free(draft);
    free(done);

    /* the chaos scenario's invoices, lines and credit notes among them (three more credit
     * notes of two lines: chaos may send one to manual review, not all) */
    snprintf(e.flow, sizeof(e.flow), "%s", answered);
    e.opt.flow_path = e.flow;
    e2e_add_many_lines(&e, "RC", n, 3);
    for (int i = 0; i < 3; i++) {
        char num[32];
        snprintf(num, sizeof(num), "RC-CN-%d", i + 1);
        struct e2e_invoice cn = {.vendor = "100005",
                                 .number = num,
                                 .date = "2026-11-20",
                                 .currency = "EUR",
                                 .credit_note = true};
        struct e2e_line cl[2] = {{.gl = "5700", .net = 12000 + i, .tax = 2280},
                                 {.gl = "6000", .net = 3000, .tax = 570}};
        e2e_add_lines(&e, &cn, cl, 2, NULL);
    }
    n += 3;
    e.opt.concurrency = 4;
    e.opt.settle_ms = 6000; /* chaos: late commits 3 s + index lag 2 s */
    e.opt.max_seconds = 240;
    int rc = e2e_run(&e);
    if (rc != APBOT_OK)
        fprintf(stderr, "%s run: %s\n", ui_name(ui), e.stats.message);
    assert_int_equal(rc, APBOT_OK);
    assert_int_equal(e.stats.stop, RUNNER_STOP_EMPTY);
    struct inv_report r;
    int irc = invariants_check(e.db, e.port, 24, false, &r);
    invariants_print(&r);
    assert_int_equal(irc, 0);
    assert_int_equal(r.items, n);
    assert_int_equal(r.duplicated_refs, 0);
    assert_int_equal(r.reposts_of_booked, 0);
    assert_int_equal(r.business_exception, 0);
    /* chaos sends some to manual review (as with the bundled flows): what matters above is that
     * none is booked twice and none is lost; most complete */
    assert_true(r.completed >= n * 3 / 4);

    /* credit notes went in as credit notes: every booked document of the queue's items */
    struct doc_types dt = {.e = &e};
    struct store *st = NULL;
    assert_int_equal(store_open(e.db, &st, err, sizeof(err)), APBOT_OK);
    assert_int_equal(store_each(st, MACHINE_STATE_INVALID, check_type, &dt, err, sizeof(err)),
                     APBOT_OK);
    store_close(st);
    assert_true(dt.credits > 0);
    assert_string_not_equal(dt.invoice, dt.credit);
    fprintf(stderr,
            "%s: %d invoices through the recorded draft, %d completed (%d credit notes), "
            "%lld ERP requests, %lld s\n",
            ui_name(ui), n, r.completed, dt.credits, simc_stat(e.port, "total"),
            (long long)(e.stats.elapsed_ms / 1000));
    e2e_stop(&e);
}

static void test_e2e_record_acme(void **state)
{
    (void)state;
    run_ui(SIM_UI_ACME, 40, 2901);
}

static void test_e2e_record_classic(void **state)
{
    (void)state;
    run_ui(SIM_UI_CLASSIC, 20, 2902);
}

static void test_e2e_record_spa(void **state)
{
    (void)state;
    run_ui(SIM_UI_SPA, 40, 2903);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_e2e_record_acme),
        cmocka_unit_test(test_e2e_record_classic),
        cmocka_unit_test(test_e2e_record_spa),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
