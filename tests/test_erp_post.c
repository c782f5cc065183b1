/*
 * test_erp_post.c - every path of a post (erp_post_run) against canned pages served by a small
 * server inside the test, no simulator: the button pressed by name and value, an ambiguous or
 * missing button refused, select options by label prefix, an option the form does not offer
 * and a map: without a mapping as data errors naming field and value, lines added, skipped
 * and refused, an update repeated until every line has its row (and bounded), saved then
 * approved with the saved hook before the follow-up, an approve that fails or is refused with
 * the document kept, a page that lacks the step's form or button explained by the step's rules
 * (a closed period, a vendor picker, a draft approved meanwhile) rather than "the form changed", a
 * session lost before the commit (restart), after it (follow-ups again), a 303 to the login after
 * the commit (unknown), success text forged in a comment, a script or an attribute (not success), a
 * pathological pattern (unknown within the budget), a form action off the origin (refused, nothing
 * sent), a committing GET dropped and sent once, the hooks that stop a post before anything is
 * sent, and traces with every control's source; the ERP's computed total compared with the
 * invoice's before the committing step (<compare-amount>): equal goes on, different is a business
 * exception naming both with nothing saved, unreadable is a screen other than the flow says; the
 * same on a JSON client's compute call.
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

#include "apbot/erp.h"
#include "apbot/flow.h"
#include "apbot/invoice.h"
#include "erp/erp_post.h"
#include "helpers/pagesrv.h"
#include "web/http.h"

#define USER "clerk"
#define PASSWORD "s3cret-pass"
#define KEY "AP1-CANNEDKEY00000000001"
#define DOC "AP-2026-000123"

/* ---- fixtures ---------------------------------------------------------------------------- */

/* Loads tests/data/pages/<name> with each pairs[2i] replaced by pairs[2i+1] (must occur). */
static struct flow *load_flow(const char *name, const char *const *pairs)
{
    const char *src = getenv("APBOT_SRC");
    char path[1024], tmp[] = "/tmp/apbot-test-post-XXXXXX";
    snprintf(path, sizeof(path), "%s/tests/data/pages/%s", src && *src ? src : ".", name);
    FILE *in = fopen(path, "rb");
    assert_non_null(in);
    static char text[65536];
    size_t len = fread(text, 1, sizeof(text) - 1, in);
    fclose(in);
    text[len] = '\0';
    for (size_t i = 0; pairs && pairs[i]; i += 2) {
        char *at = strstr(text, pairs[i]);
        if (!at)
            fail_msg("%s: '%s' not found", name, pairs[i]);
        size_t from = strlen(pairs[i]), to = strlen(pairs[i + 1]);
        assert_true(len - from + to < sizeof(text));
        memmove(at + to, at + from, len - (size_t)(at - text) - from + 1);
        memcpy(at, pairs[i + 1], to);
        len = len - from + to;
    }
    int fd = mkstemp(tmp);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
    struct flow *f = NULL;
    char err[APBOT_ERR_LEN] = "";
    int rc = flow_load(tmp, &f, err, sizeof(err));
    unlink(tmp);
    if (rc != APBOT_OK)
        fail_msg("flow %s: %s", name, err);
    return f;
}

struct fx {
    struct pagesrv *srv;
    struct flow *f;
    struct erp_session *s;
    struct invoice inv;
    struct erp_post_hooks hooks;
    /* what the hooks and callbacks saw */
    int saved_calls;
    char saved_doc[64];
    int approve_posts_at_saved; /* approve submits already made when hooks.saved ran */
    bool commit_allowed;
    bool stop;
    int n_traces;
    char traces[65536];
    bool secret_seen;
};

static void on_trace(void *ctx, const struct erp_trace *t)
{
    struct fx *x = ctx;
    size_t o = strlen(x->traces);
    x->n_traces++;
    o += (size_t)snprintf(x->traces + o, sizeof(x->traces) - o, "[%s %s %s rule=%s]", t->step,
                          t->method, t->outcome, t->rule ? t->rule : "-");
    for (size_t i = 0; i < t->n_controls && o < sizeof(x->traces); i++)
        o += (size_t)snprintf(x->traces + o, sizeof(x->traces) - o, "%s=%s(%s);",
                              t->controls[i].name, t->controls[i].value, t->controls[i].source);
    for (size_t i = 0; i < t->n_captured && o < sizeof(x->traces); i++)
        o += (size_t)snprintf(x->traces + o, sizeof(x->traces) - o, "captured %s=%s;",
                              t->captured_names[i], t->captured_values[i]);
    const char *texts[] = {t->url, t->why, t->excerpt, t->transport};
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
        if (texts[i] && strstr(texts[i], PASSWORD))
            x->secret_seen = true;
}

static void on_evidence(void *ctx, const struct erp_exchange *ev)
{
    struct fx *x = ctx;
    const char *texts[] = {ev->url, ev->excerpt, ev->transport};
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
        if (texts[i] && strstr(texts[i], PASSWORD))
            x->secret_seen = true;
}

static bool hook_before_commit(void *ctx)
{
    return ((struct fx *)ctx)->commit_allowed;
}

static bool hook_saved(void *ctx, const char *doc)
{
    struct fx *x = ctx;
    x->saved_calls++;
    snprintf(x->saved_doc, sizeof(x->saved_doc), "%s", doc);
    x->approve_posts_at_saved = 0;
    for (int i = 0; i < pagesrv_n_requests(x->srv); i++) {
        struct pagesrv_req rq;
        if (pagesrv_request(x->srv, i, &rq) && strstr(rq.body, "action=approve"))
            x->approve_posts_at_saved++;
    }
    return true;
}

static bool hook_stopping(void *ctx)
{
    return ((struct fx *)ctx)->stop;
}

/* An invoice of vendor 100001 in EUR with lines on the given accounts, 10.00 each. */
static void make_invoice(struct invoice *inv, const char *const *gl, size_t n)
{
    invoice_init(inv);
    invoice_set_str(&inv->vendor_id, "100001");
    invoice_set_str(&inv->invoice_number, "INV-1");
    inv->doc_type = INVOICE_DOC_INVOICE;
    snprintf(inv->issue_date, sizeof(inv->issue_date), "2026-11-03");
    snprintf(inv->currency, sizeof(inv->currency), "EUR");
    inv->exponent = 2;
    for (size_t i = 0; i < n; i++) {
        char text[32];
        snprintf(text, sizeof(text), "line %zu", i + 1);
        struct invoice_line l = {
            .description = text, .gl_account = (char *)gl[i], .net = 1000 * (int64_t)(i + 1)};
        invoice_add_line(inv, &l);
        inv->net_total += l.net;
    }
    inv->payable = inv->net_total;
}

static void fx_start(struct fx *x, const char *const *pairs, const char *const *gl, size_t n_lines)
{
    char err[APBOT_ERR_LEN] = "";
    memset(x, 0, sizeof(*x));
    x->srv = pagesrv_start();
    x->f = load_flow("flow-classic.xml", pairs);
    if (erp_open(x->f, pagesrv_base(x->srv), NULL, &x->s, err, sizeof(err)) != APBOT_OK)
        fail_msg("erp_open: %s", err);
    erp_set_evidence(x->s, on_evidence, x);
    make_invoice(&x->inv, gl, n_lines);
    x->commit_allowed = true;
    x->hooks.ctx = x;
    x->hooks.before_commit = hook_before_commit;
    x->hooks.saved = hook_saved;
    x->hooks.stopping = hook_stopping;
    x->hooks.trace = on_trace;
}

static void fx_stop(struct fx *x)
{
    assert_false(x->secret_seen);
    invoice_done(&x->inv);
    erp_close(x->s);
    flow_free(x->f);
    pagesrv_stop(x->srv);
}

#define R(...) ((const struct pagesrv_resp[]){__VA_ARGS__})
#define N(...) (sizeof(R(__VA_ARGS__)) / sizeof(struct pagesrv_resp))
#define ROUTE(x, m, p, ...) pagesrv_route((x)->srv, m, p, R(__VA_ARGS__), N(__VA_ARGS__))
#define ROUTE_BODY(x, m, p, b, ...)                                                                \
    pagesrv_route_body((x)->srv, m, p, b, R(__VA_ARGS__), N(__VA_ARGS__))

static void route_login(struct fx *x)
{
    ROUTE(x, "GET", "/login.pl?action=authenticate",
          {.body = "Success\n", .type = "text/plain; charset=utf-8"});
}

/* The whole happy path of a one-line invoice: add, update, save, edit, approve. */
static void route_happy(struct fx *x)
{
    route_login(x);
    ROUTE(x, "GET", "/ap.pl?action=add", {.file = "add-1.html"});
    ROUTE_BODY(x, "POST", "/ap.pl", "action=update", {.file = "add-2.html"});
    ROUTE_BODY(x, "POST", "/ap.pl", "action=save", {.file = "saved.html"});
    ROUTE(x, "GET", "/ap.pl?action=edit&id=" DOC, {.file = "edit-draft.html"});
    ROUTE_BODY(x, "POST", "/ap.pl", "action=approve", {.file = "approved.html"});
}

static struct erp_post_result run(struct fx *x, enum erp_post_from from, const char *doc)
{
    struct erp_post_result res;
    char err[APBOT_ERR_LEN] = "";
    if (erp_post_run(x->s, &x->inv, KEY, from, doc, &x->hooks, &res, err, sizeof(err)) != APBOT_OK)
        fail_msg("erp_post_run: %s", err);
    return res;
}

/* Number of POSTs whose body contains needle. */
static int posts_with(struct fx *x, const char *needle)
{
    int n = 0;
    for (int i = 0; i < pagesrv_n_requests(x->srv); i++) {
        struct pagesrv_req rq;
        if (pagesrv_request(x->srv, i, &rq) && strcmp(rq.method, "POST") == 0 &&
            strstr(rq.body, needle))
            n++;
    }
    return n;
}

static bool last_with(struct fx *x, const char *needle, struct pagesrv_req *ret)
{
    bool found = false;
    for (int i = 0; i < pagesrv_n_requests(x->srv); i++) {
        struct pagesrv_req rq;
        if (pagesrv_request(x->srv, i, &rq) &&
            (strstr(rq.body, needle) || strstr(rq.path, needle))) {
            *ret = rq;
            found = true;
        }
    }
    return found;
}

#define V(r, want)                                                                                 \
    do {                                                                                           \
        if ((r).verdict != (want))                                                                 \
            fail_msg("verdict %s, want %s: %s", decide_post_verdict_name((r).verdict),             \
                     decide_post_verdict_name(want), (r).detail);                                  \
    } while (0)

static const char *const GL_5700[] = {"5700"};
static const char *const GL_3[] = {"5700", "4400", "6010"};

/* ---- the happy path ---------------------------------------------------------------------- */

static void test_erp_post_saved_then_approved(void **state)
{
    (void)state;
    struct fx x;
    fx_start(&x, NULL, GL_5700, 1);
    route_happy(&x);
    struct erp_post_result r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_CONFIRMED);
    assert_string_equal(r.doc, DOC);
    assert_true(r.commit_sent);
    assert_false(r.released);
    assert_string_equal(r.rule, "approved");
    /* The saved document went to the hook before any approve was submitted. */
    assert_int_equal(x.saved_calls, 1);
    assert_string_equal(x.saved_doc, DOC);
    assert_int_equal(x.approve_posts_at_saved, 0);
    assert_int_equal(posts_with(&x, "action=approve"), 1);
    assert_int_equal(posts_with(&x, "action=save"), 1);
    /* The button by name and value; the option by its label's prefix. */
    struct pagesrv_req rq;
    assert_true(last_with(&x, "action=update", &rq));
    assert_null(strstr(rq.body, "action=save"));
    assert_non_null(strstr(rq.body, "account_1=5700--Office%20Supplies"));
    assert_non_null(strstr(rq.body, "amount_1=10.00"));
    assert_non_null(strstr(rq.body, "ponumber=" KEY));
    assert_non_null(strstr(rq.body, "form_id=f1")); /* hidden, kept */
    assert_true(last_with(&x, "action=save", &rq));
    assert_null(strstr(rq.body, "action=update"));
    /* The trace says where every value came from. */
    assert_non_null(strstr(x.traces,
                           "account_1=5700--Office Supplies(option chosen by label '5700--Office "
                           "Supplies')"));
    assert_non_null(strstr(x.traces, "form_id=f1(page default)"));
    assert_non_null(strstr(x.traces, "vendor=100001(template)"));
    assert_non_null(strstr(x.traces, "action=save(button pressed)"));
    assert_non_null(strstr(x.traces, "[save POST saved rule=saved]"));
    assert_non_null(strstr(x.traces, "captured doc=" DOC));
    assert_non_null(strstr(x.traces, "[approve POST confirmed rule=approved]"));
    fx_stop(&x);
}

/* ---- buttons ----------------------------------------------------------------------------- */

static void test_erp_post_ambiguous_button_refused(void **state)
{
    (void)state;
    struct fx x;
    /* The save step presses "action" by name alone: update and save both match. */
    const char *pairs[] = {"submit=\"action\" submit-value=\"save\"", "submit=\"action\"", NULL};
    fx_start(&x, pairs, GL_5700, 1);
    route_happy(&x);
    struct erp_post_result r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_SYSTEMIC);
    assert_false(r.commit_sent);
    assert_non_null(strstr(r.detail, "several buttons"));
    assert_int_equal(posts_with(&x, "action=save"), 0);
    assert_int_equal(posts_with(&x, "action=update"), 1);
    fx_stop(&x);

    /* A form without the save button: the form changed, nothing committed. */
    fx_start(&x, NULL, GL_5700, 1);
    route_login(&x);
    ROUTE(&x, "GET", "/ap.pl?action=add", {.file = "add-1.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=update", {.file = "add-no-save.html"});
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_SYSTEMIC);
    assert_false(r.commit_sent);
    assert_non_null(strstr(r.detail, "no button"));
    fx_stop(&x);
}

/* ---- selects and data errors ------------------------------------------------------------- */

static void test_erp_post_unknown_option_is_data_error(void **state)
{
    (void)state;
    struct fx x;
    static const char *const gl[] = {"9999"};
    fx_start(&x, NULL, gl, 1);
    route_happy(&x);
    struct erp_post_result r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_REJECTED);
    assert_true(r.data_error);
    assert_false(r.commit_sent);
    assert_non_null(strstr(r.reason, "account_1"));
    assert_non_null(strstr(r.reason, "the G/L account 9999 "));
    assert_int_equal(posts_with(&x, "action="), 0); /* nothing submitted at all */
    fx_stop(&x);

    /* A prefix that designates two options: never a guess. */
    const char *pairs[] = {"option=\"label-prefix\">${line.gl_account}--<",
                           "option=\"label-prefix\">${line.gl_account}<", NULL};
    static const char *const gl57[] = {"57"};
    fx_start(&x, pairs, gl57, 1);
    route_happy(&x);
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_REJECTED);
    assert_true(r.data_error);
    assert_non_null(strstr(r.reason, "the G/L account 57 matches several"));
    fx_stop(&x);

    /* A value written into a select without option= must be one of its values. */
    const char *pairs2[] = {"<field name=\"currency\" option=\"value\">",
                            "<field name=\"currency\">", NULL};
    fx_start(&x, pairs2, GL_5700, 1);
    snprintf(x.inv.currency, sizeof(x.inv.currency), "GBP");
    route_happy(&x);
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_REJECTED);
    assert_true(r.data_error);
    assert_non_null(strstr(r.reason, "currency"));
    assert_non_null(strstr(r.reason, "GBP"));
    fx_stop(&x);
}

static void test_erp_post_map_miss_is_data_error(void **state)
{
    (void)state;
    struct fx x;
    const char *pairs[] = {"${invoice.currency}</field>", "${invoice.currency|map:EUR=EUR}</field>",
                           NULL};
    fx_start(&x, pairs, GL_5700, 1);
    snprintf(x.inv.currency, sizeof(x.inv.currency), "USD");
    route_happy(&x);
    struct erp_post_result r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_REJECTED);
    assert_true(r.data_error);
    assert_non_null(strstr(r.reason, "currency"));
    assert_non_null(strstr(r.reason, "USD"));
    assert_int_equal(posts_with(&x, "action="), 0);
    fx_stop(&x);
}

/* ---- lines ------------------------------------------------------------------------------- */

static void test_erp_post_lines_added(void **state)
{
    (void)state;
    struct fx x;
    const char *pairs[] = {
        " repeat=\"until-lines\"",
        "",
        "<lines missing=\"skip\">",
        "<lines missing=\"add\">",
        "<field name=\"account_${line.n}\" option=\"label-prefix\">${line.gl_account}--</field>",
        "<field name=\"text_${line.n}\">${line.description}</field>",
        NULL};
    fx_start(&x, pairs, GL_3, 3);
    route_happy(&x);
    struct erp_post_result r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_CONFIRMED);
    struct pagesrv_req rq;
    assert_true(last_with(&x, "action=update", &rq));
    assert_non_null(strstr(rq.body, "amount_1=10.00"));
    assert_non_null(strstr(rq.body, "amount_2=20.00"));
    assert_non_null(strstr(rq.body, "amount_3=30.00"));
    assert_non_null(strstr(rq.body, "text_3=line%203"));
    assert_non_null(strstr(rq.body, "rowcount=3"));
    assert_int_equal(posts_with(&x, "action=update"), 1);
    assert_non_null(strstr(x.traces, "amount_2=20.00(added (not on the page))"));
    assert_non_null(strstr(x.traces, "amount_1=10.00(template)"));
    fx_stop(&x);

    /* An option on a control the page lacks cannot be chosen: refused, nothing sent. */
    const char *pairs2[] = {" repeat=\"until-lines\"", "", "<lines missing=\"skip\">",
                            "<lines missing=\"add\">", NULL};
    fx_start(&x, pairs2, GL_3, 3);
    route_happy(&x);
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_SYSTEMIC);
    assert_int_equal(posts_with(&x, "action="), 0);
    fx_stop(&x);
}

static void test_erp_post_lines_missing_is_error(void **state)
{
    (void)state;
    struct fx x;
    const char *pairs[] = {" repeat=\"until-lines\"", "", "<lines missing=\"skip\">",
                           "<lines missing=\"error\">", NULL};
    fx_start(&x, pairs, GL_3, 3);
    route_happy(&x);
    struct erp_post_result r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_SYSTEMIC);
    assert_non_null(strstr(r.detail, "account_2"));
    assert_int_equal(posts_with(&x, "action="), 0);
    fx_stop(&x);
}

/* What a form that cannot be filled as the flow says is reported as, word for word: the
 * result's detail and reason, nothing submitted. */
static void test_erp_post_fill_problems_word_for_word(void **state)
{
    (void)state;
    const struct {
        const char *pairs[7];
        const char *const *gl;
        const char *currency;
        enum decide_post_verdict verdict;
        const char *detail, *reason;
    } cases[] = {
        {{NULL},
         (const char *const[]){"9999"},
         "EUR",
         DECIDE_REJECTED,
         "enter: the invoice carries a value the ERP's form does not offer (the G/L account 9999 "
         "is not one this ERP accepts (field account_1))",
         "the G/L account 9999 is not one this ERP accepts (field account_1)"},
        {{"option=\"label-prefix\">${line.gl_account}--<",
          "option=\"label-prefix\">${line.gl_account}<", NULL},
         (const char *const[]){"57"},
         "EUR",
         DECIDE_REJECTED,
         "enter: the invoice carries a value the ERP's form does not offer (the G/L account 57 "
         "matches several of this ERP's choices, not one (field account_1))",
         "the G/L account 57 matches several of this ERP's choices, not one (field account_1)"},
        {{"<field name=\"currency\" option=\"value\">", "<field name=\"currency\">", NULL},
         GL_5700,
         "GBP",
         DECIDE_REJECTED,
         "enter: the invoice carries a value the ERP's form does not offer (the currency GBP is "
         "not one this ERP accepts (field currency))",
         "the currency GBP is not one this ERP accepts (field currency)"},
        {{"<field name=\"currency\" option=\"value\">",
          "<field name=\"currency\" option=\"label\">", NULL},
         GL_5700,
         "GBP",
         DECIDE_REJECTED,
         "enter: the invoice carries a value the ERP's form does not offer (the currency GBP is "
         "not one this ERP accepts (field currency))",
         "the currency GBP is not one this ERP accepts (field currency)"},
        {{"<field name=\"ponumber\">", "<field name=\"ponumber\" option=\"value\">", NULL},
         GL_5700,
         "EUR",
         DECIDE_SYSTEMIC,
         "enter: the ERP's form is not as the flow describes (field ponumber is not a select (the "
         "form changed))",
         ""},
        {{" repeat=\"until-lines\"", "", "<lines missing=\"skip\">", "<lines missing=\"add\">",
          NULL},
         GL_3,
         "EUR",
         DECIDE_SYSTEMIC,
         "enter: the ERP's form is not as the flow describes (field account_2: option= on a "
         "control the page lacks: no option to choose)",
         ""},
        {{" repeat=\"until-lines\"", "", "<lines missing=\"skip\">", "<lines missing=\"error\">",
          NULL},
         GL_3,
         "EUR",
         DECIDE_SYSTEMIC,
         "enter: the ERP's form is not as the flow describes (the form has no control 'account_2' "
         "(the form changed))",
         ""},
        {{"<field name=\"vendor\">", "<field name=\"vendor_x\">", NULL},
         GL_5700,
         "EUR",
         DECIDE_SYSTEMIC,
         "enter: the ERP's form is not as the flow describes (the form has no control 'vendor_x' "
         "(the form changed))",
         ""},
        {{"<field name=\"vendor\">${vendor.id}",
          "<field name=\"vendor\">${invoice.currency|map:EUR=1}", NULL},
         GL_5700,
         "USD",
         DECIDE_REJECTED,
         "enter: the invoice carries a value the ERP's form does not offer (field vendor: no "
         "mapping for 'USD' in map:EUR=1)",
         "field vendor: no mapping for 'USD' in map:EUR=1"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct fx x;
        size_t n_lines = cases[i].gl == GL_3 ? 3 : 1;
        fx_start(&x, cases[i].pairs[0] ? cases[i].pairs : NULL, cases[i].gl, n_lines);
        snprintf(x.inv.currency, sizeof(x.inv.currency), "%s", cases[i].currency);
        route_happy(&x);
        struct erp_post_result r = run(&x, ERP_POST_FROM_START, NULL);
        V(r, cases[i].verdict);
        if (strcmp(r.detail, cases[i].detail) != 0 || strcmp(r.reason, cases[i].reason) != 0)
            fail_msg("case %zu: detail '%s', reason '%s'", i, r.detail, r.reason);
        assert_int_equal(posts_with(&x, "action="), 0);
        fx_stop(&x);
    }
}

/* A secret in a value a fill problem quotes is masked before the quote is cut: a value of
 * 195 bytes and the password, cut at 200 bytes, leaves no start of the password behind (a
 * mask after the cut no longer finds it whole). */
static void test_erp_post_fill_problem_masks_before_cut(void **state)
{
    (void)state;
    char literal[256];
    memset(literal, 'x', 195);
    snprintf(literal + 195, sizeof(literal) - 195, "%s", PASSWORD);
    char to[512];
    snprintf(to, sizeof(to), "<field name=\"currency\" option=\"value\">%s<", literal);
    const char *pairs[] = {"<field name=\"currency\" option=\"value\">${invoice.currency}<", to,
                           NULL};
    struct fx x;
    fx_start(&x, pairs, GL_5700, 1);
    route_happy(&x);
    struct erp_post_result r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_REJECTED);
    const char start[] = {PASSWORD[0], PASSWORD[1], PASSWORD[2], PASSWORD[3], PASSWORD[4], 0};
    if (!strstr(r.reason, "has no option of value") || !strstr(r.reason, "xxx***'"))
        fail_msg("reason: %s", r.reason);
    assert_null(strstr(r.reason, start));
    assert_null(strstr(r.detail, start));
    assert_int_equal(posts_with(&x, "action="), 0);
    fx_stop(&x);
}

static void test_erp_post_repeat_until_lines(void **state)
{
    (void)state;
    struct fx x;
    fx_start(&x, NULL, GL_3, 3);
    route_login(&x);
    ROUTE(&x, "GET", "/ap.pl?action=add", {.file = "add-1.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=update", {.file = "add-2.html"},
               {.file = "add-3.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=save", {.file = "saved.html"});
    ROUTE(&x, "GET", "/ap.pl?action=edit&id=" DOC, {.file = "edit-draft.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=approve", {.file = "approved.html"});
    struct erp_post_result r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_CONFIRMED);
    /* Round 1 fills line 1 (the page has one row), round 2 lines 1-2, round 3 all three. */
    assert_int_equal(posts_with(&x, "action=update"), 3);
    struct pagesrv_req rq;
    assert_true(pagesrv_request(x.srv, 2, &rq)); /* login, add page, update 1 */
    assert_non_null(strstr(rq.body, "action=update"));
    assert_non_null(strstr(rq.body, "account_1=5700"));
    assert_null(strstr(rq.body, "amount_2="));
    assert_true(last_with(&x, "action=update", &rq));
    assert_non_null(strstr(rq.body, "account_3=6010--Printing%20and%20Toner"));
    assert_non_null(strstr(rq.body, "account_2=4400--Tools%20and%20Equipment"));
    assert_non_null(strstr(rq.body, "form_id=f3")); /* the fresh token of the last page */
    assert_int_equal(posts_with(&x, "action=save"), 1);
    fx_stop(&x);

    /* An ERP that never adds the rows: at most line_count + 1 rounds, then no save. */
    fx_start(&x, NULL, GL_3, 3);
    route_login(&x);
    ROUTE(&x, "GET", "/ap.pl?action=add", {.file = "add-1.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=update", {.file = "add-1.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=save", {.file = "saved.html"});
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_SYSTEMIC);
    assert_false(r.commit_sent);
    assert_int_equal(posts_with(&x, "action=update"), 4);
    assert_int_equal(posts_with(&x, "action=save"), 0);
    fx_stop(&x);
}

/* ---- the ERP's own total ----------------------------------------------------------------- */

/* The entry step captures the total the ERP computed after the update and compares it with
 * `equals`, read with the given decimal separator. */
#define COMPARE_AFTER "</rule>\n    </step>\n    <step name=\"save\""
static void compare_flow(const char *equals, const char *decimal, char *buf, size_t len)
{
    snprintf(buf, len,
             "</rule>\n"
             "      <capture name=\"erp_total\">id=\"computedTotal\"[^&gt;]*&gt;"
             "(?&lt;erp_total&gt;[^&lt;]+)&lt;</capture>\n"
             "      <compare-amount capture=\"erp_total\" equals=\"%s\" amount-decimal=\"%s\"/>\n"
             "    </step>\n    <step name=\"save\"",
             equals, decimal);
}

/* The add page after an update, with 2 or 3 line rows and the total the ERP computed. */
#define ADD_ROW(n)                                                                                 \
    "<tr><td><select name=\"account_" #n "\"><option value=\"\" selected></option>"                \
    "<option value=\"4400--Tools and Equipment\">4400--Tools and Equipment</option>"               \
    "<option value=\"5700--Office Supplies\">5700--Office Supplies</option>"                       \
    "<option value=\"6010--Printing and Toner\">6010--Printing and Toner</option></select></td>"   \
    "<td><input type=\"text\" name=\"amount_" #n "\" value=\"\"></td></tr>\n"
#define ADD_PAGE(rows, total)                                                                      \
    "<html><body><form method=\"post\" name=\"invoice\" action=\"/ap.pl\">\n"                      \
    "<input type=\"hidden\" name=\"form_id\" value=\"f9\">\n"                                      \
    "<input type=\"text\" name=\"vendor\" value=\"\">\n"                                           \
    "<select name=\"currency\"><option value=\"EUR\" selected>EUR</option></select>\n"             \
    "<input type=\"text\" name=\"ponumber\" value=\"\">\n"                                         \
    "<input type=\"hidden\" name=\"rowcount\" value=\"1\">\n"                                      \
    "<table id=\"lines\">\n" rows "</table>\n"                                                     \
    "<table><tr><th>Total</th><td id=\"computedTotal\">" total "</td></tr></table>\n"              \
    "<button type=\"submit\" name=\"action\" value=\"update\">Update</button>\n"                   \
    "<button type=\"submit\" name=\"action\" "                                                     \
    "value=\"save\">Save</button>\n</form></body></html>\n"
#define ADD_TOTAL(n, total)                                                                        \
    ((n) == 2 ? ADD_PAGE(ADD_ROW(1) ADD_ROW(2), total)                                             \
              : ADD_PAGE(ADD_ROW(1) ADD_ROW(2) ADD_ROW(3), total))

static void route_total(struct fx *x, const char *update_page)
{
    route_login(x);
    ROUTE(x, "GET", "/ap.pl?action=add", {.file = "add-1.html"});
    ROUTE_BODY(x, "POST", "/ap.pl", "action=update", {.file = update_page});
    ROUTE_BODY(x, "POST", "/ap.pl", "action=save", {.file = "saved.html"});
    ROUTE(x, "GET", "/ap.pl?action=edit&id=" DOC, {.file = "edit-draft.html"});
    ROUTE_BODY(x, "POST", "/ap.pl", "action=approve", {.file = "approved.html"});
}

static void test_erp_post_compare_amount(void **state)
{
    (void)state;
    struct fx x;
    char repl[1024];

    /* The ERP's total (10.00) is the invoice's payable: the post goes on. */
    compare_flow("${invoice.payable}", ".", repl, sizeof(repl));
    const char *equal[] = {COMPARE_AFTER, repl, NULL};
    fx_start(&x, equal, GL_5700, 1);
    route_total(&x, "add-2-total.html");
    struct erp_post_result r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_CONFIRMED);
    assert_false(r.amount_differs);
    assert_int_equal(posts_with(&x, "action=save"), 1);
    assert_non_null(strstr(x.traces, "captured erp_total=10.00"));
    fx_stop(&x);

    /* It differs: a business exception naming both amounts, before anything is saved. */
    compare_flow("${invoice.payable + invoice.payable}", ".", repl, sizeof(repl));
    const char *differs[] = {COMPARE_AFTER, repl, NULL};
    fx_start(&x, differs, GL_5700, 1);
    route_total(&x, "add-2-total.html");
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_REJECTED);
    assert_true(r.amount_differs);
    assert_false(r.data_error);
    assert_false(r.commit_sent);
    assert_string_equal(r.reason,
                        "the ERP computes 10.00 EUR (erp_total on step 'enter'), but the "
                        "invoice's ${invoice.payable + invoice.payable} is 20.00 EUR: nothing was "
                        "booked");
    assert_int_equal(posts_with(&x, "action=update"), 1);
    assert_int_equal(posts_with(&x, "action=save"), 0);
    assert_non_null(strstr(x.traces, "[enter POST rejected rule=-]"));
    fx_stop(&x);

    /* The total does not read with the flow's separators: the screen is not what the flow
     * says (systemic), nothing saved. */
    compare_flow("${invoice.payable}", ",", repl, sizeof(repl));
    const char *unreadable[] = {COMPARE_AFTER, repl, NULL};
    fx_start(&x, unreadable, GL_5700, 1);
    route_total(&x, "add-2-total.html");
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_SYSTEMIC);
    assert_false(r.amount_differs);
    assert_non_null(strstr(r.detail, "compare-amount 'erp_total': the ERP's amount '10.00' does "
                                     "not read as an amount (decimal ',', grouping ' ')"));
    assert_int_equal(posts_with(&x, "action=save"), 0);
    fx_stop(&x);

    /* No total on the answer: the capture finds nothing, not the expected page (not sent). */
    compare_flow("${invoice.payable}", ".", repl, sizeof(repl));
    fx_start(&x, equal, GL_5700, 1);
    route_total(&x, "add-2.html");
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_NOT_SENT);
    assert_int_equal(posts_with(&x, "action=save"), 0);
    fx_stop(&x);

    /* repeat="until-lines": only the last round's total counts (the earlier rounds show the
     * lines entered so far). Three lines of 10, 20, 30: the rounds show 10.00, 30.00, 60.00. */
    compare_flow("${invoice.payable}", ".", repl, sizeof(repl));
    fx_start(&x, equal, GL_3, 3);
    route_login(&x);
    ROUTE(&x, "GET", "/ap.pl?action=add", {.file = "add-1.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=update", {.body = ADD_TOTAL(2, "10.00")},
               {.body = ADD_TOTAL(3, "30.00")}, {.body = ADD_TOTAL(3, "60.00")});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=save", {.file = "saved.html"});
    ROUTE(&x, "GET", "/ap.pl?action=edit&id=" DOC, {.file = "edit-draft.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=approve", {.file = "approved.html"});
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_CONFIRMED);
    assert_int_equal(posts_with(&x, "action=update"), 3);
    fx_stop(&x);
}

/* A JSON client's compute call before the entry: the total in its answer (a tagged decimal,
 * as Tryton writes them) compared the same way. */
static void test_erp_post_compare_amount_json(void **state)
{
    (void)state;
    struct fx x;
    const char *pairs[] = {
        "<step name=\"enter\" get=\"/ap.pl?action=add\" repeat=\"until-lines\">",
        "<step name=\"compute\">\n"
        "      <send url=\"/app/compute\"><json>{\"method\": \"compute\", \"lines\": "
        "[{\"$each-line\": {\"amount\": \"${line.net|json:decimal}\"}}]}</json></send>\n"
        "      <capture name=\"erp_total\" json=\"/result/amount_total/decimal\"/>\n"
        "      <compare-amount capture=\"erp_total\" equals=\"${invoice.payable}\"/>\n"
        "    </step>\n"
        "    <step name=\"enter\" get=\"/ap.pl?action=add\" repeat=\"until-lines\">",
        NULL};
    static const char *const answers[] = {"10.00", "12.00"};
    for (size_t i = 0; i < 2; i++) {
        char body[256];
        snprintf(body, sizeof(body),
                 "{\"id\": 1, \"result\": {\"amount_total\": {\"__class__\": \"Decimal\", "
                 "\"decimal\": \"%s\"}}}",
                 answers[i]);
        fx_start(&x, pairs, GL_5700, 1);
        route_happy(&x);
        ROUTE(&x, "POST", "/app/compute", {.body = body, .type = "application/json"});
        struct erp_post_result r = run(&x, ERP_POST_FROM_START, NULL);
        struct pagesrv_req rq;
        assert_true(last_with(&x, "/app/compute", &rq));
        assert_non_null(strstr(rq.body, "\"amount\":\"10.00\""));
        if (i == 0) {
            V(r, DECIDE_CONFIRMED);
            assert_int_equal(posts_with(&x, "action=save"), 1);
        } else {
            V(r, DECIDE_REJECTED);
            assert_true(r.amount_differs);
            assert_string_equal(r.reason, "the ERP computes 12.00 EUR (erp_total on step "
                                          "'compute'), but the invoice's amount payable is "
                                          "10.00 EUR: nothing was booked");
            assert_int_equal(posts_with(&x, "action=update"), 0);
            assert_int_equal(posts_with(&x, "action=save"), 0);
        }
        fx_stop(&x);
    }
}

/* ---- follow-up steps --------------------------------------------------------------------- */

static void test_erp_post_approve_failure_keeps_doc(void **state)
{
    (void)state;
    struct fx x;
    /* 503 on approve, an unrecognised answer, a refusal */
    const struct pagesrv_resp answers[] = {
        {.status = 503, .body = "busy", .headers = "Retry-After: 3\r\n"},
        {.body = "<html><body><p>Something else</p></body></html>"},
        {.status = 500, .body = "<h2 class=\"error\">Period closed</h2>"},
    };
    const enum decide_post_verdict want[] = {DECIDE_FOLLOWUP_FAILED, DECIDE_FOLLOWUP_FAILED,
                                             DECIDE_REJECTED};
    for (size_t i = 0; i < 3; i++) {
        fx_start(&x, NULL, GL_5700, 1);
        route_login(&x);
        ROUTE(&x, "GET", "/ap.pl?action=add", {.file = "add-1.html"});
        ROUTE_BODY(&x, "POST", "/ap.pl", "action=update", {.file = "add-2.html"});
        ROUTE_BODY(&x, "POST", "/ap.pl", "action=save", {.file = "saved.html"});
        ROUTE(&x, "GET", "/ap.pl?action=edit&id=" DOC, {.file = "edit-draft.html"});
        pagesrv_route_body(x.srv, "POST", "/ap.pl", "action=approve", &answers[i], 1);
        struct erp_post_result r = run(&x, ERP_POST_FROM_START, NULL);
        V(r, want[i]);
        assert_string_equal(r.doc, DOC); /* the document stands */
        assert_true(r.commit_sent);
        assert_int_equal(x.saved_calls, 1);
        assert_int_equal(posts_with(&x, "action=save"), 1);
        if (i == 2)
            assert_string_equal(r.reason, "Period closed");
        fx_stop(&x);
    }
}

static void test_erp_post_from_followups(void **state)
{
    (void)state;
    struct fx x;
    fx_start(&x, NULL, GL_5700, 1);
    route_happy(&x);
    struct erp_post_result r = run(&x, ERP_POST_FROM_FOLLOWUPS, DOC);
    V(r, DECIDE_CONFIRMED);
    assert_string_equal(r.doc, DOC);
    assert_false(r.commit_sent);
    assert_int_equal(x.saved_calls, 0);
    assert_int_equal(posts_with(&x, "action=update"), 0);
    assert_int_equal(posts_with(&x, "action=save"), 0);
    assert_int_equal(posts_with(&x, "action=approve"), 1);
    fx_stop(&x);

    /* A posted document has no approve button: the follow-up failed, nothing else sent. */
    fx_start(&x, NULL, GL_5700, 1);
    route_login(&x);
    ROUTE(&x, "GET", "/ap.pl?action=edit&id=" DOC, {.file = "edit-posted.html"});
    r = run(&x, ERP_POST_FROM_FOLLOWUPS, DOC);
    V(r, DECIDE_FOLLOWUP_FAILED);
    assert_int_equal(posts_with(&x, "action="), 0);
    fx_stop(&x);

    /* FROM_FOLLOWUPS needs the document. */
    fx_start(&x, NULL, GL_5700, 1);
    struct erp_post_result res;
    char err[APBOT_ERR_LEN];
    assert_int_equal(erp_post_run(x.s, &x.inv, KEY, ERP_POST_FROM_FOLLOWUPS, NULL, &x.hooks, &res,
                                  err, sizeof(err)),
                     APBOT_E_INVAL);
    fx_stop(&x);
}

/* ---- rules before "the form changed" ----------------------------------------------------- */

/* The save step's rule that says what a missing Save button means on this ERP (a closed
 * period: the page carries the closing date and leaves Save out). */
#define SAVE_RULES "<rule name=\"save-validation\" outcome=\"rejected\" status=\"500\""
#define PERIOD_RULE(when)                                                                          \
    "<rule name=\"period-closed\" outcome=\"rejected\" " when " raw=\"true\" "                     \
    "reason=\"The invoice date is in a closed period\">name=\"closedto\" "                         \
    "value=\"\\d</rule>" SAVE_RULES

/* Routes an update answered by `update_page` (no save button on it). */
static void route_update_to(struct fx *x, const char *update_page)
{
    route_login(x);
    ROUTE(x, "GET", "/ap.pl?action=add", {.file = "add-1.html"});
    pagesrv_route_body(x->srv, "POST", "/ap.pl", "action=update",
                       &(struct pagesrv_resp){.file = update_page}, 1);
    ROUTE_BODY(x, "POST", "/ap.pl", "action=save", {.file = "saved.html"});
}

static void test_erp_post_rules_explain_missing(void **state)
{
    (void)state;
    struct fx x;
    struct erp_post_result r;

    /* The Save button is left out and the page carries a closing date: the step's
     * when-missing rule says why, a business exception with its reason; nothing saved. */
    const char *button[] = {SAVE_RULES, PERIOD_RULE("when-missing=\"button\""), NULL};
    fx_start(&x, button, GL_5700, 1);
    route_update_to(&x, "add-closed.html");
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_REJECTED);
    assert_false(r.commit_sent);
    assert_false(r.data_error);
    assert_string_equal(r.reason, "The invoice date is in a closed period");
    assert_string_equal(r.rule, "period-closed");
    assert_non_null(strstr(r.detail, "rule 'period-closed' says why"));
    assert_null(strstr(r.detail, "the form changed"));
    assert_int_equal(posts_with(&x, "action=save"), 0);
    assert_non_null(strstr(x.traces, "[save POST rejected rule=period-closed]"));
    fx_stop(&x);

    /* The same rule, a page without the closing date: no rule explains it, the form changed. */
    fx_start(&x, button, GL_5700, 1);
    route_update_to(&x, "add-no-save.html");
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_SYSTEMIC);
    assert_non_null(strstr(r.detail, "the form changed"));
    assert_int_equal(posts_with(&x, "action=save"), 0);
    fx_stop(&x);

    /* A rule for a missing form does not explain a missing button. */
    const char *form[] = {SAVE_RULES, PERIOD_RULE("when-missing=\"form\""), NULL};
    fx_start(&x, form, GL_5700, 1);
    route_update_to(&x, "add-closed.html");
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_SYSTEMIC);
    fx_stop(&x);

    /* A plain step rule is tried on the page that lacks the button too ... */
    const char *plain[] = {SAVE_RULES, PERIOD_RULE(""), NULL};
    fx_start(&x, plain, GL_5700, 1);
    route_update_to(&x, "add-closed.html");
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_REJECTED);
    assert_string_equal(r.reason, "The invoice date is in a closed period");
    fx_stop(&x);

    /* ... but a when-missing rule never on an answer: the save's own answer still decides. */
    const char *never[] = {
        SAVE_RULES,
        "<rule name=\"not-on-answers\" outcome=\"rejected\" when-missing=\"any\">saved as "
        "draft</rule>" SAVE_RULES,
        NULL};
    fx_start(&x, never, GL_5700, 1);
    route_happy(&x);
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_CONFIRMED);
    fx_stop(&x);

    /* A "select one of these vendors" page instead of the entry form: a rule for the missing
     * form names the business condition. */
    const char *picker[] = {
        SAVE_RULES,
        "<rule name=\"vendor-ambiguous\" outcome=\"rejected\" when-missing=\"form\" "
        "reason=\"The vendor number matches several vendors\">&lt;th "
        "class=\"listtop\"&gt;Select Vendor&lt;/th&gt;</rule>" SAVE_RULES,
        NULL};
    fx_start(&x, picker, GL_5700, 1);
    route_update_to(&x, "vendor-picker.html");
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_REJECTED);
    assert_string_equal(r.reason, "The vendor number matches several vendors");
    assert_false(r.commit_sent);
    assert_int_equal(posts_with(&x, "action=save"), 0);
    fx_stop(&x);
}

/* The follow-up step's page: a draft approved by someone meanwhile shows no Approve button;
 * the approve step's rule over that page says it is finished - not a failed follow-up. */
static void test_erp_post_followup_page_rules(void **state)
{
    (void)state;
    struct fx x;
    const char *pairs[] = {
        "<form xpath=\"//form[@name='invoice']\" submit=\"action\" submit-value=\"approve\"/>",
        "<form xpath=\"//form[@name='invoice']\" submit=\"action\" submit-value=\"approve\"/>"
        "<rule name=\"approved-meanwhile\" outcome=\"completed\" when-missing=\"button\""
        ">&lt;span id=\"status\"&gt;posted&lt;/span&gt;</rule>",
        NULL};
    fx_start(&x, pairs, GL_5700, 1);
    route_login(&x);
    ROUTE(&x, "GET", "/ap.pl?action=edit&id=" DOC, {.file = "edit-posted.html"});
    struct erp_post_result r = run(&x, ERP_POST_FROM_FOLLOWUPS, DOC);
    V(r, DECIDE_CONFIRMED);
    assert_string_equal(r.doc, DOC);
    assert_string_equal(r.rule, "approved-meanwhile");
    assert_int_equal(posts_with(&x, "action="), 0);
    fx_stop(&x);

    /* A draft still shows its Approve button: the rule is not asked, the approve is sent. */
    fx_start(&x, pairs, GL_5700, 1);
    route_happy(&x);
    r = run(&x, ERP_POST_FROM_FOLLOWUPS, DOC);
    V(r, DECIDE_CONFIRMED);
    assert_string_equal(r.rule, "approved");
    assert_int_equal(posts_with(&x, "action=approve"), 1);
    fx_stop(&x);
}

/* ---- skip="when-known": the update round trip, once the vendor is known ------------------- */

/* The vendor_id the update answers, learnt per vendor number, and the enter step skipped when
 * it is known. */
static const char *const SKIP_PAIRS[] = {
    "  <post>",
    "  <resolve name=\"vendor\" code=\"${vendor.id}\" from-step=\"enter\">"
    "<control name=\"vendor_id\"/></resolve>\n  <post>",
    "<step name=\"enter\" get=\"/ap.pl?action=add\" repeat=\"until-lines\">",
    "<step name=\"enter\" get=\"/ap.pl?action=add\" repeat=\"until-lines\" "
    "skip=\"when-known\">",
    NULL};

static void test_erp_post_skip_when_known(void **state)
{
    (void)state;
    struct fx x;
    struct pagesrv_req rq;
    fx_start(&x, SKIP_PAIRS, GL_5700, 1);
    route_happy(&x);
    /* the first invoice of the vendor: the update is sent, its vendor_id learnt */
    struct erp_post_result r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_CONFIRMED);
    assert_int_equal(posts_with(&x, "action=update"), 1);
    assert_true(last_with(&x, "action=save", &rq));
    assert_non_null(strstr(rq.body, "vendor_id=V-000001"));
    assert_null(strstr(x.traces, "skipped"));

    /* the next one on the same session: the add form, then save at once with every field of
     * the enter step and the learnt vendor_id; no update */
    int saves = posts_with(&x, "action=save");
    x.traces[0] = '\0';
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_CONFIRMED);
    assert_int_equal(r.exchanges, 4); /* add form, save, edit page, approve */
    assert_int_equal(posts_with(&x, "action=update"), 1);
    assert_int_equal(posts_with(&x, "action=save"), saves + 1);
    assert_true(last_with(&x, "action=save", &rq));
    assert_non_null(strstr(rq.body, "vendor_id=V-000001"));
    assert_non_null(strstr(rq.body, "form_id=f1")); /* the add form's own token */
    assert_non_null(strstr(rq.body, "vendor=100001"));
    assert_non_null(strstr(rq.body, "ponumber=" KEY));
    assert_non_null(strstr(rq.body, "account_1=5700--Office%20Supplies"));
    assert_non_null(strstr(rq.body, "amount_1=10.00"));
    assert_null(strstr(rq.body, "action=update"));
    /* the trace shows the step skipped, where vendor_id came from, and the save's controls
     * with the enter step's sources */
    assert_non_null(strstr(x.traces, "[enter POST skipped rule=-]"));
    assert_non_null(strstr(
        x.traces, "vendor_id=V-000001(resolve 'vendor': learnt this run from step 'enter')"));
    assert_non_null(strstr(x.traces, "[save POST saved rule=saved]"));
    assert_non_null(strstr(x.traces, "vendor=100001(template)"));

    fx_stop(&x);

    /* three lines: the add form has one row, so the update is needed for the rows */
    fx_start(&x, SKIP_PAIRS, GL_5700, 1);
    route_login(&x);
    ROUTE(&x, "GET", "/ap.pl?action=add", {.file = "add-1.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=update", {.file = "add-2.html"},
               {.file = "add-3.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=save", {.file = "saved.html"});
    ROUTE(&x, "GET", "/ap.pl?action=edit&id=" DOC, {.file = "edit-draft.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=approve", {.file = "approved.html"});
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_CONFIRMED);
    invoice_done(&x.inv);
    make_invoice(&x.inv, GL_3, 3);
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_CONFIRMED);
    assert_true(posts_with(&x, "action=update") >= 2);
    fx_stop(&x);

    /* another vendor: not known, the update is sent */
    fx_start(&x, SKIP_PAIRS, GL_5700, 1);
    route_happy(&x);
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_CONFIRMED);
    invoice_set_str(&x.inv.vendor_id, "100002");
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_CONFIRMED);
    assert_int_equal(posts_with(&x, "action=update"), 2);
    fx_stop(&x);

    /* an update whose vendor_id is longer than any ERP key (600 bytes): used for its own
     * invoice, never kept, so the vendor's next invoice pays its update again */
    fx_start(&x, SKIP_PAIRS, GL_5700, 1);
    route_login(&x);
    ROUTE(&x, "GET", "/ap.pl?action=add", {.file = "add-1.html"});
    char long_id[601], long_page[2048];
    memset(long_id, 'K', sizeof(long_id) - 1);
    long_id[sizeof(long_id) - 1] = '\0';
    snprintf(long_page, sizeof(long_page),
             "<html><body><form method=\"post\" name=\"invoice\" action=\"/ap.pl\">"
             "<input type=\"hidden\" name=\"form_id\" value=\"f2\">"
             "<input type=\"hidden\" name=\"vendor_id\" value=\"%s\">"
             "<input type=\"text\" name=\"vendor\" value=\"\">"
             "<select name=\"currency\"><option value=\"EUR\" selected>EUR</option></select>"
             "<input type=\"text\" name=\"ponumber\" value=\"\">"
             "<select name=\"account_1\"><option value=\"\"></option>"
             "<option value=\"5700--Office Supplies\">5700--Office Supplies</option></select>"
             "<input type=\"text\" name=\"amount_1\" value=\"\">"
             "<button type=\"submit\" name=\"action\" value=\"update\">Update</button>"
             "<button type=\"submit\" name=\"action\" value=\"save\">Save</button>"
             "</form></body></html>",
             long_id);
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=update", {.body = long_page});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=save", {.file = "saved.html"});
    ROUTE(&x, "GET", "/ap.pl?action=edit&id=" DOC, {.file = "edit-draft.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=approve", {.file = "approved.html"});
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_CONFIRMED);
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_CONFIRMED);
    assert_int_equal(posts_with(&x, "action=update"), 2);
    assert_true(last_with(&x, "action=save", &rq));
    assert_non_null(strstr(rq.body, long_id)); /* the invoice at hand still used it */
    fx_stop(&x);

    /* a known vendor, but an account the form does not offer: not skipped, the step meets
     * the problem as it would have (a business exception, nothing sent) */
    fx_start(&x, SKIP_PAIRS, GL_5700, 1);
    route_happy(&x);
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_CONFIRMED);
    invoice_done(&x.inv);
    static const char *const gl_bad[] = {"9999"};
    make_invoice(&x.inv, gl_bad, 1);
    saves = posts_with(&x, "action=save");
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_REJECTED);
    assert_true(r.data_error);
    assert_int_equal(posts_with(&x, "action=save"), saves);
    assert_int_equal(posts_with(&x, "action=update"), 1);
    fx_stop(&x);
}

static bool refuse_saved(void *ctx, const char *doc)
{
    (void)ctx;
    (void)doc;
    return false;
}

static void test_erp_post_saved_not_recorded_stops(void **state)
{
    (void)state;
    struct fx x;
    fx_start(&x, NULL, GL_5700, 1);
    route_happy(&x);
    x.hooks.saved = refuse_saved;
    struct erp_post_result r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_SAVED);
    assert_string_equal(r.doc, DOC);
    assert_int_equal(posts_with(&x, "action=approve"), 0);
    fx_stop(&x);
}

/* ---- sessions ---------------------------------------------------------------------------- */

static void test_erp_post_session_lost_before_commit_restarts(void **state)
{
    (void)state;
    struct fx x;
    fx_start(&x, NULL, GL_5700, 1);
    route_login(&x);
    ROUTE(&x, "GET", "/ap.pl?action=add", {.status = 401, .body = "Session expired.\n"},
          {.file = "add-1.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=update", {.status = 401, .body = "Session expired."},
               {.file = "add-2.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=save", {.file = "saved.html"});
    ROUTE(&x, "GET", "/ap.pl?action=edit&id=" DOC, {.file = "edit-draft.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=approve", {.file = "approved.html"});
    struct erp_post_result r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_CONFIRMED);
    /* logged in at the start, then once per lost session */
    assert_int_equal(pagesrv_count(x.srv, "GET", "/login.pl"), 3);
    assert_int_equal(posts_with(&x, "action=save"), 1);
    fx_stop(&x);

    /* Lost every time: bounded restarts, then not sent. */
    fx_start(&x, NULL, GL_5700, 1);
    route_login(&x);
    ROUTE(&x, "GET", "/ap.pl?action=add", {.status = 401, .body = "Session expired.\n"});
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_NOT_SENT);
    assert_true(r.relogin);
    assert_false(r.commit_sent);
    assert_int_equal(pagesrv_count(x.srv, "GET", "/ap.pl?action=add"), 1 + ERP_POST_RESTARTS);
    assert_false(erp_logged_in(x.s));
    fx_stop(&x);

    /* A restart whose login is refused: stop the run. */
    fx_start(&x, NULL, GL_5700, 1);
    ROUTE(&x, "GET", "/login.pl?action=authenticate", {.body = "Success\n", .type = "text/plain"},
          {.status = 401, .body = "denied"});
    ROUTE(&x, "GET", "/ap.pl?action=add", {.status = 401, .body = "Session expired.\n"});
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_SYSTEMIC);
    assert_true(r.login_refused);
    assert_int_equal(pagesrv_count(x.srv, "GET", "/login.pl"), 2);
    fx_stop(&x);
}

static void test_erp_post_session_lost_at_commit(void **state)
{
    (void)state;
    struct fx x;
    /* 303 to the login page after the save: it may have booked. */
    fx_start(&x, NULL, GL_5700, 1);
    route_login(&x);
    ROUTE(&x, "GET", "/ap.pl?action=add", {.file = "add-1.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=update", {.file = "add-2.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=save",
               {.status = 303, .headers = "Location: /login.pl\r\n", .body = "See Other"});
    ROUTE(&x, "GET", "/login.pl", {.body = "<html><body>Please log in</body></html>"});
    struct erp_post_result r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_UNKNOWN);
    assert_true(r.relogin);
    assert_true(r.commit_sent);
    assert_int_equal(posts_with(&x, "action=save"), 1); /* never sent again */
    assert_int_equal(x.saved_calls, 0);
    fx_stop(&x);

    /* The ERP's own 401 to the save: not processed, log in again. */
    fx_start(&x, NULL, GL_5700, 1);
    route_login(&x);
    ROUTE(&x, "GET", "/ap.pl?action=add", {.file = "add-1.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=update", {.file = "add-2.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=save", {.status = 401, .body = "Session expired."});
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_NOT_SENT);
    assert_true(r.relogin);
    assert_int_equal(posts_with(&x, "action=save"), 1);
    fx_stop(&x);

    /* No answer to the save: unknown. */
    fx_start(&x, NULL, GL_5700, 1);
    route_login(&x);
    ROUTE(&x, "GET", "/ap.pl?action=add", {.file = "add-1.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=update", {.file = "add-2.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=save", {.drop = true});
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_UNKNOWN);
    assert_true(r.commit_sent);
    assert_int_equal(posts_with(&x, "action=save"), 1);
    fx_stop(&x);
}

static void test_erp_post_session_lost_on_followup(void **state)
{
    (void)state;
    struct fx x;
    fx_start(&x, NULL, GL_5700, 1);
    route_login(&x);
    ROUTE(&x, "GET", "/ap.pl?action=add", {.file = "add-1.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=update", {.file = "add-2.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=save", {.file = "saved.html"});
    ROUTE(&x, "GET", "/ap.pl?action=edit&id=" DOC, {.file = "edit-draft.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=approve", {.status = 401, .body = "Session expired."},
               {.file = "approved.html"});
    struct erp_post_result r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_CONFIRMED);
    assert_int_equal(posts_with(&x, "action=save"), 1); /* the follow-ups again, never the save */
    assert_int_equal(posts_with(&x, "action=approve"), 2);
    assert_int_equal(x.saved_calls, 1);
    fx_stop(&x);
}

/* ---- what the rules see ------------------------------------------------------------------ */

static void test_erp_post_forged_success_is_not_success(void **state)
{
    (void)state;
    static const char *const pages[] = {"forged-comment.html", "forged-script.html",
                                        "forged-attribute.html"};
    for (size_t i = 0; i < 3; i++) {
        struct fx x;
        fx_start(&x, NULL, GL_5700, 1);
        route_login(&x);
        ROUTE(&x, "GET", "/ap.pl?action=add", {.file = "add-1.html"});
        ROUTE_BODY(&x, "POST", "/ap.pl", "action=update", {.file = "add-2.html"});
        ROUTE_BODY(&x, "POST", "/ap.pl", "action=save", {.file = pages[i]});
        struct erp_post_result r = run(&x, ERP_POST_FROM_START, NULL);
        V(r, DECIDE_UNKNOWN);
        assert_string_equal(r.doc, "");
        assert_int_equal(x.saved_calls, 0);
        fx_stop(&x);
    }
    /* The same page read raw (raw="true") would pass: the blanking is what protects. */
    struct fx x;
    const char *pairs[] = {"<rule name=\"saved\" outcome=\"saved\" status=\"200\"",
                           "<rule name=\"saved\" outcome=\"saved\" status=\"200\" raw=\"true\"",
                           NULL};
    fx_start(&x, pairs, GL_5700, 1);
    route_login(&x);
    ROUTE(&x, "GET", "/ap.pl?action=add", {.file = "add-1.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=update", {.file = "add-2.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=save", {.file = "forged-comment.html"});
    ROUTE(&x, "GET", "/ap.pl?action=edit*", {.status = 404, .body = "no"});
    struct erp_post_result r = run(&x, ERP_POST_FROM_START, NULL);
    assert_int_equal(x.saved_calls, 1);
    assert_string_equal(x.saved_doc, "AP-2026-999999");
    V(r, DECIDE_FOLLOWUP_FAILED);
    fx_stop(&x);
}

static void test_erp_post_pathological_pattern_is_unknown(void **state)
{
    (void)state;
    struct fx x;
    const char *pairs[] = {"<rule name=\"saved\" outcome=\"saved\"",
                           "<rule name=\"runaway\" outcome=\"rejected\" status=\"200\""
                           ">.*.*.*[XY]</rule>\n      <rule name=\"saved\" outcome=\"saved\"",
                           NULL};
    fx_start(&x, pairs, GL_5700, 1);
    route_login(&x);
    ROUTE(&x, "GET", "/ap.pl?action=add", {.file = "add-1.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=update", {.file = "add-2.html"});
    size_t n = 300000;
    char *big = malloc(n + 200);
    assert_non_null(big);
    int o =
        snprintf(big, 200, "<html><body><p class=\"info\">Invoice " DOC " saved as draft</p><p>");
    memset(big + o, 'a', n);
    snprintf(big + o + n, 40, "</p></body></html>");
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=save", {.body = big});
    free(big);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct erp_post_result r = run(&x, ERP_POST_FROM_START, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    V(r, DECIDE_UNKNOWN); /* not rejected, not saved: the earlier rule could not be decided */
    assert_non_null(strstr(r.detail, "runaway"));
    assert_non_null(strstr(r.detail, "budget"));
    assert_int_equal(x.saved_calls, 0);
    assert_true(t1.tv_sec - t0.tv_sec < 60);
    fx_stop(&x);
}

/* ---- origin and connections -------------------------------------------------------------- */

static void test_erp_post_off_origin_action_refused(void **state)
{
    (void)state;
    struct fx x;
    fx_start(&x, NULL, GL_5700, 1);
    route_login(&x);
    ROUTE(&x, "GET", "/ap.pl?action=add", {.file = "add-offorigin.html"});
    struct erp_post_result r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_SYSTEMIC);
    assert_non_null(strstr(r.detail, "origin"));
    assert_int_equal(pagesrv_n_requests(x.srv), 2); /* login, the page: nothing submitted */
    fx_stop(&x);

    /* At the committing step: refused, nothing committed. */
    fx_start(&x, NULL, GL_5700, 1);
    route_login(&x);
    ROUTE(&x, "GET", "/ap.pl?action=add", {.file = "add-1.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=update", {.file = "add-offorigin.html"});
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_SYSTEMIC);
    assert_false(r.commit_sent);
    assert_int_equal(posts_with(&x, "action=save"), 0);
    fx_stop(&x);
}

/* The committing GET rides the kept-alive connection of the pages before it; the ERP reads
 * it and hangs up. libcurl would send it again by itself on a new connection: refused, the
 * outcome is unknown and the ERP saw the GET once (then the flow's follow-ups never run). */
static void test_erp_post_committing_get_sent_once(void **state)
{
    (void)state;
    struct fx x;
    fx_start(&x, NULL, GL_5700, 1);
    route_login(&x);
    ROUTE(&x, "GET", "/ap.pl?action=add", {.file = "add-1.html"});
    ROUTE_BODY(&x, "POST", "/ap.pl", "action=update", {.file = "add-get.html"});
    ROUTE(&x, "GET", "/ap.pl?form_id=*", {.drop = true});
    struct erp_post_result r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_UNKNOWN);
    assert_true(r.commit_sent);
    struct pagesrv_req add, save;
    assert_true(pagesrv_last(x.srv, "GET", "/ap.pl?action=add", &add));
    assert_true(pagesrv_last(x.srv, "GET", "/ap.pl?form_id=", &save));
    assert_non_null(strstr(save.path, "action=save"));
    assert_non_null(strstr(save.path, "form_id=f1"));
    assert_false(save.fresh); /* on a kept-alive connection: where libcurl would re-send */
    assert_int_equal(pagesrv_count(x.srv, "GET", "/ap.pl?form_id="), 1);
    assert_int_equal(pagesrv_count(x.srv, "GET", "/ap.pl?action=edit"), 0);
    fx_stop(&x);
}

/* ---- hooks ------------------------------------------------------------------------------- */

static void test_erp_post_hooks_stop_before_sending(void **state)
{
    (void)state;
    struct fx x;
    fx_start(&x, NULL, GL_5700, 1);
    route_happy(&x);
    x.commit_allowed = false; /* the lease is gone, or flow trace --dry-run */
    struct erp_post_result r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_NOT_SENT);
    assert_true(r.released);
    assert_false(r.commit_sent);
    assert_int_equal(posts_with(&x, "action=save"), 0);
    assert_int_equal(posts_with(&x, "action=update"), 1);
    /* the trace still shows what the committing request would have carried */
    assert_non_null(strstr(x.traces, "[save POST not-sent"));
    assert_non_null(strstr(x.traces, "action=save(button pressed)"));
    fx_stop(&x);

    fx_start(&x, NULL, GL_5700, 1);
    route_happy(&x);
    x.stop = true;
    r = run(&x, ERP_POST_FROM_START, NULL);
    V(r, DECIDE_NOT_SENT);
    assert_true(r.released);
    assert_int_equal(pagesrv_count(x.srv, "*", "/ap.pl"), 0);
    fx_stop(&x);
}

static int group_setup(void **state)
{
    (void)state;
    setenv("APBOT_ERP_USER", USER, 1);
    setenv("APBOT_ERP_PASSWORD", PASSWORD, 1);
    return http_global_init() == APBOT_OK ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    http_global_cleanup();
    return 0;
}

/* What a field's value stands for, in a clerk's words, from its template's first variable. */
static void test_erp_post_field_subject(void **state)
{
    (void)state;
    static const struct {
        const char *tmpl, *words, *var;
    } t[] = {
        {"${line.gl_account}--", "the G/L account", "${line.gl_account}"},
        {"${line.gl_account}", "the G/L account", "${line.gl_account}"},
        {"${invoice.currency}", "the currency", "${invoice.currency}"},
        {"${invoice.doc_type|map:invoice=Invoice,credit-note=Credit Note}", "the document type",
         "${invoice.doc_type}"},
        {"${vendor.id|trunc:10}", "the vendor", "${vendor.id}"},
        {"V-${invoice.vendor_id}", "the vendor", "${invoice.vendor_id}"},
        {"${line.n}:${line.gl_account}", NULL, NULL}, /* the first variable is no clerk's */
        {"${ref.account.id}", NULL, NULL},
        {"EUR", NULL, NULL},
        {"${line.gl_account", NULL, NULL}, /* not closed: no variable */
        {"", NULL, NULL},
        {NULL, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        char var[64] = "";
        const char *got = erp_field_subject(t[i].tmpl, var, sizeof(var));
        if ((got == NULL) != (t[i].words == NULL) || (got && strcmp(got, t[i].words) != 0) ||
            (got && strcmp(var, t[i].var) != 0))
            fail_msg("row %zu (%s): got %s / %s", i, t[i].tmpl ? t[i].tmpl : "NULL",
                     got ? got : "NULL", var);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_erp_post_saved_then_approved),
        cmocka_unit_test(test_erp_post_ambiguous_button_refused),
        cmocka_unit_test(test_erp_post_unknown_option_is_data_error),
        cmocka_unit_test(test_erp_post_map_miss_is_data_error),
        cmocka_unit_test(test_erp_post_lines_added),
        cmocka_unit_test(test_erp_post_lines_missing_is_error),
        cmocka_unit_test(test_erp_post_fill_problems_word_for_word),
        cmocka_unit_test(test_erp_post_fill_problem_masks_before_cut),
        cmocka_unit_test(test_erp_post_repeat_until_lines),
        cmocka_unit_test(test_erp_post_compare_amount),
        cmocka_unit_test(test_erp_post_compare_amount_json),
        cmocka_unit_test(test_erp_post_approve_failure_keeps_doc),
        cmocka_unit_test(test_erp_post_from_followups),
        cmocka_unit_test(test_erp_post_rules_explain_missing),
        cmocka_unit_test(test_erp_post_followup_page_rules),
        cmocka_unit_test(test_erp_post_skip_when_known),
        cmocka_unit_test(test_erp_post_saved_not_recorded_stops),
        cmocka_unit_test(test_erp_post_session_lost_before_commit_restarts),
        cmocka_unit_test(test_erp_post_session_lost_at_commit),
        cmocka_unit_test(test_erp_post_session_lost_on_followup),
        cmocka_unit_test(test_erp_post_forged_success_is_not_success),
        cmocka_unit_test(test_erp_post_pathological_pattern_is_unknown),
        cmocka_unit_test(test_erp_post_off_origin_action_refused),
        cmocka_unit_test(test_erp_post_committing_get_sent_once),
        cmocka_unit_test(test_erp_post_hooks_stop_before_sending),
        cmocka_unit_test(test_erp_post_field_subject),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
