/*
 * test_erp_view.c - how the ERP driver reads one answer (erp-int.h's struct erp_view) against
 * its plain definition: every pattern that is not raw runs on page_rule_text of the body,
 * every raw one on the body, all of them in turn on one budget. erp_view_body leaves the
 * blanking out when match_excludes says the blanked text cannot hold a needle; the outcomes,
 * the groups, the budget (left, used, how it stopped) and the abort must be the same either
 * way, on the canned pages, mutations of them, generated pages full of near misses (messages
 * in comments, attributes and scripts; needles whose spaces only blanking makes), and budgets
 * from nothing to plenty. Then what a stopped pattern is called in the evidence, and the
 * text helpers that write an exchange's detail as snprintf would.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/error.h"
#include "apbot/flow.h"
#include "erp/erp-int.h"
#include "helpers/canned.h"
#include "helpers/xorshift.h"
#include "web/http.h"
#include "web/match.h"
#include "web/page.h"

/* The acme and classic flows' outcome rules and markers, and patterns made to meet blanking:
 * needles with spaces that blanking may make, text that only attributes or comments hold. */
static const char *const patterns[] = {
    "<span class=\"msgText\">I003: |<form id=\"loginForm\"",
    "<span class=\"msgText\">(?<reason>E1(?:0[1-8]|1[02-4]): [^<]*)",
    "<span class=\"msgText\">E109: ",
    "<form id=\"loginForm\"",
    "<span class=\"msgText\">I020: Document (?<doc>AP-\\d{4}-\\d{6}) was posted\\.</span>",
    "<span class=\"msgText\">E111: A document with reference \\S+ already exists \\(document "
    "(?<doc>AP-\\d{4}-\\d{6})\\)",
    "<span class=\"msgText\">(?<reason>E001: [^<]*)",
    "<h1>Welcome,",
    "<h2 class=\"error\">(?<reason>[^<]+)",
    "<p class=\"info\">Invoice (?<doc>AP-\\d{4}-\\d{6}) saved as draft",
    "<p class=\"info\">Draft Posted",
    "E002: ",
    "E002:  +x",
    "Posted  now",
    "a b c",
    "  ",
    " ",
    "value=\"(?<x>[^\"]*)\"",
    "I020: (?<doc>\\S+)|E111: ",
    "msg  Text",
    "Welcome",
    "(?<x>AP-\\d+)",
    "--> ",
    "<input type=\"hidden\" name=\"_csrf\"",
};
#define N_PATTERNS (sizeof(patterns) / sizeof(patterns[0]))

static struct match_re *compiled[N_PATTERNS];

static int setup(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_PATTERNS; i++) {
        char err[APBOT_ERR_LEN] = "";
        if (match_compile(patterns[i], &compiled[i], err, sizeof(err)) != APBOT_OK)
            fail_msg("%s: %s", patterns[i], err);
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_PATTERNS; i++)
        match_free(compiled[i]);
    return 0;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint32_t rnd(uint32_t n)
{
    return xorshift_below(&rng, n);
}

struct counts {
    size_t runs, found, aborted, blank_skipped;
};

static void same_groups(const struct match_result *a, const struct match_result *b,
                        const char *label, size_t k)
{
    static const char *const names[] = {"doc", "reason", "x"};
    for (size_t i = 0; i < 3; i++) {
        char *ga = match_group(a, names[i]), *gb = match_group(b, names[i]);
        if ((ga == NULL) != (gb == NULL) || (ga && strcmp(ga, gb) != 0))
            fail_msg("%s: pattern %zu: group %s differs", label, k, names[i]);
        free(ga);
        free(gb);
    }
}

static void same_budget(const struct match_budget *a, const struct match_budget *b,
                        const char *label, size_t k)
{
    if (a->left != b->left || a->used != b->used || a->exhausted != b->exhausted ||
        a->cancelled != b->cancelled || a->limited != b->limited)
        fail_msg("%s: after pattern %zu the budget differs (used %llu against %llu)", label, k,
                 (unsigned long long)a->used, (unsigned long long)b->used);
}

/*
 * The patterns order[0..n) with the raw flags raw[0..n) on body, through one view and by the
 * plain definition, with a budget of `steps`: the same at every pattern.
 */
static void check_sequence(const char *body, size_t len, const size_t *order, const bool *raw,
                           size_t n, uint64_t steps, const char *label, struct counts *c)
{
    struct http_response r;
    struct erp_view v;
    struct match_budget want;
    char *blank = page_rule_text(body, len);
    bool aborted = false;

    memset(&r, 0, sizeof(r));
    r.body = (char *)(uintptr_t)body;
    r.body_len = len;
    erp_view_init(&v, NULL, &r);
    match_budget_init(&v.budget, steps, NULL);
    match_budget_init(&want, steps, NULL);
    for (size_t i = 0; i < n; i++) {
        const struct match_re *re = compiled[order[i]];
        struct match_result *got_m = NULL, *want_m = NULL;
        bool had_blank = v.blank != NULL;
        enum match_outcome got = erp_view_body(&v, re, raw[i], "x", &got_m);
        enum match_outcome exp = match_run(re, raw[i] ? body : blank, len, &want, &want_m);
        aborted = aborted || exp == MATCH_ABORTED;
        if (got != exp)
            fail_msg("%s: pattern %zu (%s%s): %s, the plain definition %s", label, order[i],
                     patterns[order[i]], raw[i] ? ", raw" : "", match_outcome_name(got),
                     match_outcome_name(exp));
        same_groups(got_m, want_m, label, order[i]);
        same_budget(&v.budget, &want, label, order[i]);
        assert_int_equal(v.aborted, aborted);
        c->runs++;
        c->found += got == MATCH_FOUND;
        c->aborted += got == MATCH_ABORTED;
        c->blank_skipped += !raw[i] && len > 0 && !had_blank && !v.blank;
        match_result_free(got_m);
        match_result_free(want_m);
    }
    erp_view_done(&v);
    free(blank);
}

/* Every pattern alone and all of them in a random order, at several budgets. */
static void check_page(const char *body, size_t len, const char *label, struct counts *c)
{
    static const uint64_t budgets[] = {0, 1, 40, 400, 4000, 1000000};
    size_t order[N_PATTERNS];
    bool raw[N_PATTERNS];

    for (size_t k = 0; k < N_PATTERNS; k++) {
        for (int as_raw = 0; as_raw < 2; as_raw++) {
            bool r = as_raw != 0;
            check_sequence(body, len, &k, &r, 1, match_budget_for(len), label, c);
        }
    }
    for (size_t b = 0; b < sizeof(budgets) / sizeof(budgets[0]); b++) {
        for (size_t k = 0; k < N_PATTERNS; k++) {
            order[k] = k;
            raw[k] = rnd(5) == 0;
        }
        for (size_t k = N_PATTERNS - 1; k > 0; k--) {
            size_t j = rnd((uint32_t)k + 1), t = order[k];
            order[k] = order[j];
            order[j] = t;
        }
        check_sequence(body, len, order, raw, N_PATTERNS, budgets[b], label, c);
    }
}

/* The page as it is, and mutated: markup put in or a byte taken out, here and there. */
static void check_page_mutated(const char *body, size_t len, const char *label, struct counts *c)
{
    static const char *const bits[] = {
        "<!--",
        "-->",
        "<!-- x -->",
        "\"",
        "'",
        " title=\"",
        "<script>",
        "</script>",
        "<",
        ">",
        "E002:",
        " ",
        "<span class=\"msgText\">",
        "<b>",
        "=",
        "<!---->",
        "\n",
    };
    char *buf = calloc(1, len + 200); /* zeroed: see read_page */
    assert_non_null(buf);
    check_page(body, len, label, c);
    for (int round = 0; round < 20; round++) {
        size_t n = len;
        memcpy(buf, body, len);
        for (int e = 0; e < 3 && n > 2; e++) {
            size_t at = rnd((uint32_t)n);
            if (rnd(3) == 0) {
                memmove(buf + at, buf + at + 1, n - at - 1);
                n--;
            } else {
                const char *s = bits[rnd(sizeof(bits) / sizeof(bits[0]))];
                size_t sl = strlen(s);
                memmove(buf + at + sl, buf + at, n - at);
                memcpy(buf + at, s, sl);
                n += sl;
            }
        }
        buf[n] = '\0';
        check_page(buf, n, label, c);
    }
    free(buf);
}

/* A page of near misses: messages as they are, in comments, in attribute values, in scripts
 * and textareas, split by markup that blanking turns into spaces. */
static size_t gen_page(char *buf, size_t cap)
{
    static const char *const frags[] = {
        "<span class=\"msgText\">I020: Document AP-2026-000123 was posted.</span>",
        "<span class=\"msgText\">E104: Vendor unknown</span>",
        "<span class=\"msgText\">E109: form used twice</span>",
        "<span class=\"msgText\">E002: <!-- -->x</span>",
        "<span class=\"msgText\">E002:<!---->  x</span>",
        "E002:<b title=\"t\">x",
        "<!-- <span class=\"msgText\">I020: Document AP-2026-000124 was posted.</span> -->",
        "<input type=\"hidden\" name=\"_csrf\" value=\"E002: \">",
        "<p title=\"<form id=&quot;loginForm&quot;\">",
        "<div title='<span class=\"msgText\">I003: '>x</div>",
        "<form id=\"loginForm\" method=\"post\">",
        "<form id=\"apEntry\">",
        "<script>var m = '<span class=\"msgText\">E111: x';</script>",
        "<textarea name=t>E002: </textarea>",
        "<h1>Welcome, clerk</h1>",
        "<h2 class=\"error\">E7 bad</h2>",
        "<p class=\"info\">Draft Posted</p>",
        "<p class=\"info\">Invoice AP-2026-000125 saved as draft</p>",
        "Posted<!--x-->now",
        "Posted<i a=b>now",
        "a<!---->b<?x?>c",
        "a b c",
        "msg<!-- -->Text",
        "msg<br class=\"x\">Text",
        "-->",
        " ",
        "\n",
        "AP-12",
        "value=\"v\"",
        "<span class=\"msgText\">E111: A document with reference K1 already exists (document "
        "AP-2026-000126)</span>",
        "\xff\xfe",
    };
    size_t len = 0;
    for (int n = 1 + (int)rnd(14); n > 0; n--) {
        const char *s = frags[rnd(sizeof(frags) / sizeof(frags[0]))];
        size_t sl = strlen(s);
        if (len + sl + 1 >= cap)
            break;
        memcpy(buf + len, s, sl);
        len += sl;
    }
    buf[len] = '\0';
    return len;
}

static void check_canned(const char *body, size_t len, const char *name, void *ctx)
{
    check_page_mutated(body, len, name, ctx);
}

/* erp_view_body against the plain definition on the canned pages (and mutations of them) and
 * 2,000 generated pages; the shortcut must have been taken often, and matches and aborts must
 * have been among the runs. */
static void test_erp_view_body_as_plain(void **state)
{
    (void)state;
    struct counts c = {0, 0, 0, 0};
    canned_pages_each(check_canned, &c);
    static char buf[8192];
    for (int i = 0; i < 2000; i++) {
        size_t len = gen_page(buf, sizeof(buf));
        check_page(buf, len, "generated page", &c);
    }
    check_page("", 0, "the empty page", &c);
    if (c.blank_skipped < c.runs / 20 || c.found < c.runs / 50 || c.aborted < c.runs / 50)
        fail_msg("weak coverage: %zu runs, %zu found, %zu aborted, %zu without blanking", c.runs,
                 c.found, c.aborted, c.blank_skipped);
}

/* One view of body with a budget of `steps`. */
static void view_of(struct erp_view *v, struct http_response *r, const char *body, uint64_t steps)
{
    memset(r, 0, sizeof(*r));
    r->body = (char *)(uintptr_t)body;
    r->body_len = strlen(body);
    r->status = 200;
    r->effective_url = "http://erp.example/x";
    r->first_location = "http://erp.example/login";
    r->first_status = 303;
    erp_view_init(v, NULL, r);
    match_budget_init(&v->budget, steps, NULL);
}

/* What a stopped pattern is called: "rule NAME" (by its url or its body, cut to the field),
 * "session marker (flow line N)" (by its redirect or its body), erp_view_body's own label or
 * "a pattern"; the first one to stop is the one named, and nothing is named when nothing
 * stopped. */
static void test_erp_view_names_what_stopped(void **state)
{
    (void)state;
    static const char page[] = "<span class=\"msgText\">E104: no</span><p>x</p>";
    struct http_response r;
    struct erp_view v;
    struct match_result *m = NULL;
    struct match_re *any = compiled[N_PATTERNS - 1];
    char longname[200];
    memset(longname, 'n', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    struct match_re *body_re = compiled[1]; /* the validation rule: its needle is on the page */
    struct match_re *url_re = NULL;
    char err[APBOT_ERR_LEN] = "";
    assert_int_equal(match_compile("x$", &url_re, err, sizeof(err)), APBOT_OK);

    struct flow_rule rules[2];
    memset(rules, 0, sizeof(rules));
    rules[0].name = "no-such";
    rules[0].status = "500";
    rules[0].body = any;
    rules[1].name = "validation";
    rules[1].body = body_re;

    /* plenty: the rule matches, nothing stopped */
    view_of(&v, &r, page, 1000000);
    assert_ptr_equal(erp_view_rules(&v, rules, 2, &m), &rules[1]);
    assert_false(v.aborted);
    assert_string_equal(v.aborted_what, "");
    match_result_free(m);
    erp_view_done(&v);

    /* by the body */
    view_of(&v, &r, page, 2);
    assert_null(erp_view_rules(&v, rules, 2, &m));
    assert_null(m);
    assert_true(v.aborted);
    assert_string_equal(v.aborted_what, "rule validation");
    erp_view_done(&v);

    /* by the url, a long name cut to the field, a rule without a name */
    rules[1].url = url_re;
    rules[1].name = longname;
    view_of(&v, &r, page, 0);
    assert_null(erp_view_rules(&v, rules, 2, &m));
    assert_true(v.aborted);
    assert_int_equal(strlen(v.aborted_what), sizeof(v.aborted_what) - 1);
    assert_memory_equal(v.aborted_what, "rule nnnn", 9);
    erp_view_done(&v);
    rules[1].name = NULL;
    view_of(&v, &r, page, 0);
    assert_null(erp_view_rules(&v, rules, 2, &m));
    assert_string_equal(v.aborted_what, "rule ?");
    /* the first stop is the one named */
    assert_int_equal(erp_view_body(&v, any, false, "later", NULL), MATCH_ABORTED);
    assert_string_equal(v.aborted_what, "rule ?");
    erp_view_done(&v);

    /* session markers by redirect and by body */
    struct flow f;
    struct flow_marker markers[2];
    memset(&f, 0, sizeof(f));
    memset(markers, 0, sizeof(markers));
    markers[0].status = "404";
    markers[0].body = any;
    markers[0].line = 7;
    markers[1].redirect = url_re;
    markers[1].line = 12;
    f.session_expired = markers;
    f.n_session_expired = 2;
    view_of(&v, &r, page, 0);
    assert_false(erp_view_session_gone(&v, &f));
    assert_string_equal(v.aborted_what, "session marker (flow line 12)");
    erp_view_done(&v);
    markers[1].redirect = NULL;
    markers[1].body = body_re;
    markers[1].line = 123456;
    view_of(&v, &r, page, 3);
    assert_false(erp_view_session_gone(&v, &f));
    assert_string_equal(v.aborted_what, "session marker (flow line 123456)");
    erp_view_done(&v);
    view_of(&v, &r, page, 1000000);
    assert_true(erp_view_session_gone(&v, &f));
    assert_false(v.aborted);
    erp_view_done(&v);

    /* erp_view_body's label */
    view_of(&v, &r, page, 0);
    assert_int_equal(erp_view_body(&v, body_re, false, NULL, NULL), MATCH_ABORTED);
    assert_string_equal(v.aborted_what, "a pattern");
    erp_view_done(&v);
    view_of(&v, &r, page, 0);
    assert_int_equal(erp_view_body(&v, body_re, true, "capture doc", NULL), MATCH_ABORTED);
    assert_string_equal(v.aborted_what, "capture doc");
    erp_view_done(&v);
    match_free(url_re);
}

/* A rule's url pattern yields its groups as its body does: the document number a redirect's
 * target names (POST /invoices -> 303 -> /invoices/4711); the body's group first where both set
 * one; a url that does not match is no match, whatever the body. */
static void test_erp_view_rule_url_groups(void **state)
{
    (void)state;
    struct http_response r;
    struct erp_view v;
    struct match_result *m = NULL;
    struct match_re *url_re = NULL, *body_re = NULL, *body_doc = NULL;
    char err[APBOT_ERR_LEN] = "";
    assert_int_equal(match_compile("/invoices/(?<doc>[1-9][0-9]*)$", &url_re, err, sizeof(err)),
                     APBOT_OK);
    assert_int_equal(match_compile("Invoice was created", &body_re, err, sizeof(err)), APBOT_OK);
    assert_int_equal(match_compile("No\\. (?<doc>INV-\\d+)", &body_doc, err, sizeof(err)),
                     APBOT_OK);
    struct flow_rule rule;
    memset(&rule, 0, sizeof(rule));
    rule.name = "posted";
    rule.url = url_re;
    rule.body = body_re;

    view_of(&v, &r, "<p>Invoice was created. No. INV-77</p>", 1000000);
    r.effective_url = "http://erp.example/invoices/4711";
    assert_ptr_equal(erp_view_rules(&v, &rule, 1, &m), &rule);
    char *doc = match_group(m, "doc");
    assert_string_equal(doc, "4711");
    free(doc);
    match_result_free(m);
    erp_view_done(&v);

    rule.body = body_doc; /* both name one: the body's */
    view_of(&v, &r, "<p>Invoice was created. No. INV-77</p>", 1000000);
    r.effective_url = "http://erp.example/invoices/4711";
    assert_ptr_equal(erp_view_rules(&v, &rule, 1, &m), &rule);
    doc = match_group(m, "doc");
    assert_string_equal(doc, "INV-77");
    free(doc);
    match_result_free(m);
    erp_view_done(&v);

    view_of(&v, &r, "<p>Invoice was created. No. INV-77</p>", 1000000);
    r.effective_url = "http://erp.example/invoices"; /* the form again: no match */
    m = NULL;
    assert_null(erp_view_rules(&v, &rule, 1, &m));
    assert_null(m);
    erp_view_done(&v);
    match_free(url_re);
    match_free(body_re);
    match_free(body_doc);
}

/* erp_text_put and erp_text_copy write what snprintf writes for "%s: %s (%.300s)" and "%s",
 * in buffers from one byte up, with pieces longer and shorter than the bound and the room. */
static void test_erp_text_put_as_snprintf(void **state)
{
    (void)state;
    static char pieces[3][700];
    for (int round = 0; round < 20000; round++) {
        for (int k = 0; k < 3; k++) {
            size_t n = rnd(4) == 0 ? rnd(700) : rnd(40);
            for (size_t i = 0; i < n; i++)
                pieces[k][i] = (char)(' ' + rnd(95));
            if (n > 1 && rnd(3) == 0)
                memcpy(pieces[k] + rnd((uint32_t)n - 1), "\xc3\xa9", 2); /* bytes, not chars */
            pieces[k][n] = '\0';
        }
        size_t cap = 1 + rnd(rnd(2) ? 40 : 700);
        char want[800], got[800];
        memset(want, 'Z', sizeof(want));
        memset(got, 'Z', sizeof(got));
        if (snprintf(want, cap, "%s: %s (%.300s)", pieces[0], pieces[1], pieces[2]) < 0)
            fail();
        size_t at = 0;
        erp_text_put(got, cap, &at, pieces[0], SIZE_MAX);
        erp_text_put(got, cap, &at, ": ", SIZE_MAX);
        erp_text_put(got, cap, &at, pieces[1], SIZE_MAX);
        erp_text_put(got, cap, &at, " (", SIZE_MAX);
        erp_text_put(got, cap, &at, pieces[2], 300);
        erp_text_put(got, cap, &at, ")", SIZE_MAX);
        if (memcmp(want, got, sizeof(want)) != 0 || at != strlen(got))
            fail_msg("round %d, capacity %zu: '%s', snprintf '%s'", round, cap, got, want);
        if (snprintf(want, cap, "%s", pieces[1]) < 0)
            fail();
        erp_text_copy(got, cap, pieces[1]);
        if (memcmp(want, got, sizeof(want)) != 0)
            fail_msg("round %d, capacity %zu: copied '%s', snprintf '%s'", round, cap, got, want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_erp_view_body_as_plain),
        cmocka_unit_test(test_erp_view_names_what_stopped),
        cmocka_unit_test(test_erp_view_rule_url_groups),
        cmocka_unit_test(test_erp_text_put_as_snprintf),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
