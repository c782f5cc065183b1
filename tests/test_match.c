/*
 * test_match.c - the PCRE2 matcher and status specs: named groups (set, unset, unknown), no
 * match, results outliving the subject, UTF-8 and invalid bytes in pages, compile errors with
 * PCRE2's message and offset, the per-page work budget (a runaway pattern on a 2 MB page
 * gives MATCH_ABORTED, the budget is shared by every rule on the page, a cancel flag raised
 * by another thread stops a match, ordinary rules on big pages still find their groups, a
 * repeated group beyond the JIT's stack still matches), and the status spec grammar ("200",
 * "5xx", "429,503", "4xx,500"). APBOT_MATCH_BENCH=1 prints ns per match on a ~10 KB and a
 * 2 MB page.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "apbot/match.h"

static struct match_re *compile_ok(const char *pattern)
{
    struct match_re *re = NULL;
    char err[APBOT_ERR_LEN] = "";

    if (match_compile(pattern, &re, err, sizeof(err)) != APBOT_OK)
        fail_msg("%s: %s", pattern, err);
    return re;
}

static void test_match_named_groups(void **state)
{
    (void)state;
    struct match_re *re =
        compile_ok("I020: Document (?<doc>AP-\\d{4}-\\d{6}) was posted|(?<reason>E\\d{3}: .*)");
    struct match_result *m = NULL;
    char subject[] = "<span>I020: Document AP-2026-000123 was posted.</span>";
    char *doc, *reason;

    assert_string_equal(match_pattern(re), "I020: Document (?<doc>AP-\\d{4}-\\d{6}) was "
                                           "posted|(?<reason>E\\d{3}: .*)");
    assert_true(match_has_group(re, "doc"));
    assert_true(match_has_group(re, "reason"));
    assert_false(match_has_group(re, "nope"));
    assert_true(match_exec(re, subject, strlen(subject), &m));
    memset(subject, 'x', sizeof(subject) - 1); /* the result owns its copies */
    doc = match_group(m, "doc");
    reason = match_group(m, "reason");
    assert_string_equal(doc, "AP-2026-000123");
    assert_null(reason); /* did not participate */
    assert_null(match_group(m, "unknown"));
    free(doc);
    match_result_free(m);

    m = NULL;
    assert_true(match_exec(re, "E105: Invalid amount '1,2,3'.", 29, &m));
    reason = match_group(m, "reason");
    assert_string_equal(reason, "E105: Invalid amount '1,2,3'.");
    free(reason);
    match_result_free(m);

    /* length bounds the subject: the banner lies past it */
    assert_false(match_exec(re, "....I020: Document AP-2026-000123 was posted", 10, NULL));
    match_free(re);
}

static void test_match_no_match_and_nulls(void **state)
{
    (void)state;
    struct match_re *re = compile_ok("Welcome");
    struct match_result *m = (struct match_result *)&re; /* untouched on no match */

    assert_false(match_exec(re, "Login", 5, &m));
    assert_ptr_equal(m, (struct match_result *)&re);
    assert_true(match_exec(re, "<h1>Welcome, clerk</h1>", 23, NULL));
    assert_false(match_exec(NULL, "x", 1, NULL));
    assert_false(match_exec(re, NULL, 0, NULL));
    match_free(re);
    match_free(NULL);
    match_result_free(NULL);
    assert_null(match_group(NULL, "doc"));

    /* a group-less pattern gives a result without groups */
    re = compile_ok("ok");
    m = NULL;
    assert_true(match_exec(re, "ok", 2, &m));
    assert_non_null(m);
    assert_null(match_group(m, "doc"));
    match_result_free(m);
    match_free(re);
}

static void test_match_utf8_and_invalid_bytes(void **state)
{
    (void)state;
    /* \w and \d are ASCII (a document number's \d never matches other scripts' digits);
     * \p{L} is the Unicode letter class */
    struct match_re *re = compile_ok("Lieferant (?<name>\\p{L}+)");
    struct match_result *m = NULL;
    const char page[] = "Lieferant M\xc3\xbcller \xff\xfe garbage";
    char *name;

    assert_true(match_exec(re, page, sizeof(page) - 1, &m));
    name = match_group(m, "name");
    assert_string_equal(name, "M\xc3\xbcller");
    free(name);
    match_result_free(m);
    match_free(re);
    re = compile_ok("Lieferant (?<name>\\w+)");
    m = NULL;
    assert_true(match_exec(re, page, sizeof(page) - 1, &m));
    name = match_group(m, "name");
    assert_string_equal(name, "M");
    free(name);
    match_result_free(m);
    /* invalid UTF-8 before the match must not stop it */
    assert_true(match_exec(re, "\xc3\x28 Lieferant X", 14, NULL));
    match_free(re);
}

static void test_match_bad_pattern_offset(void **state)
{
    (void)state;
    struct match_re *re = (struct match_re *)&state; /* untouched on failure */
    char err[APBOT_ERR_LEN] = "";

    assert_int_equal(match_compile("Document (?<doc>AP-\\d+", &re, err, sizeof(err)),
                     APBOT_E_PARSE);
    assert_ptr_equal(re, (struct match_re *)&state);
    assert_non_null(strstr(err, "missing closing parenthesis"));
    assert_non_null(strstr(err, "at offset 22"));
    assert_int_equal(match_compile("a{2,1}", &re, err, sizeof(err)), APBOT_E_PARSE);
    assert_non_null(strstr(err, "at offset 5"));
    assert_int_equal(match_compile("(?<doc>x)(?<doc>y)", &re, err, sizeof(err)), APBOT_E_PARSE);
    assert_non_null(strstr(err, "offset"));
    assert_int_equal(match_compile(NULL, &re, err, sizeof(err)), APBOT_E_INVAL);
}

static void test_match_backtracking_bounded(void **state)
{
    (void)state;
    struct match_re *re = compile_ok("^(a+)+$");
    char subject[64];
    struct timespec t0, t1;
    double secs;

    memset(subject, 'a', 40);
    subject[40] = '!';
    subject[41] = '\0';
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* without a limit this needs ~2^40 steps; with it, the match gives up: no match */
    assert_false(match_exec(re, subject, 41, NULL));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    assert_true(secs < 5.0);
    /* the pattern still works on a sane subject */
    assert_true(match_exec(re, "aaaa", 4, NULL));
    match_free(re);
}

/* ---- the per-page work budget -------------------------------------------------------- */

/* An acme-like page of at least `size` bytes: journal rows, the posted banner at the very end
 * (the worst place for an unanchored rule). Heap. */
static char *acme_page(size_t size, size_t *ret_len)
{
    static const char head[] =
        "<!DOCTYPE HTML>\n<html><head><title>ACME Financials - AP journal</title></head>"
        "<body>\n<table id=\"journalTable\" class=\"grid\">\n";
    static const char row[] =
        "<tr class=\"row\"><td class=\"docNo\">AP-2026-000051</td><td class=\"docType\">KR"
        "</td><td class=\"vendorNo\">100001</td><td class=\"vendorInvNo\">A-51</td><td "
        "class=\"invDate\">01.11.2026</td><td class=\"amount\">10,00</td><td "
        "class=\"currency\">EUR</td><td class=\"reference\">AP1-AAAAAAAAAAAAAAAAAAA1</td>"
        "<td class=\"bookedOn\">30.11.2026</td></tr>\n";
    static const char tail[] =
        "</table>\n<div id=\"msgArea\" class=\"msg msg-success\"><span class=\"msgText\">"
        "I020: Document AP-2026-000123 was posted.</span></div>\n</body></html>\n";
    char *p = malloc(size + sizeof(head) + sizeof(row) + sizeof(tail));
    size_t n = 0;
    assert_non_null(p);
    memcpy(p, head, sizeof(head) - 1);
    n += sizeof(head) - 1;
    while (n + sizeof(tail) - 1 < size) {
        memcpy(p + n, row, sizeof(row) - 1);
        n += sizeof(row) - 1;
    }
    memcpy(p + n, tail, sizeof(tail));
    n += sizeof(tail) - 1;
    *ret_len = n;
    return p;
}

/* 2 MB of 99-byte lines: the page that held a worker 105 s with the old per-position limit. */
static char *line_page(size_t size, size_t line)
{
    char *p = malloc(size);
    assert_non_null(p);
    for (size_t i = 0; i < size; i++)
        p[i] = (i % line == line - 1) ? '\n' : 'b';
    return p;
}

static const char *const acme_rules[] = {
    "<span class=\"msgText\">I020: Document (?<doc>AP-\\d{4}-\\d{6}) was posted\\.</span>",
    ("<span class=\"msgText\">E111: A document with reference \\S+ already exists "
     "\\(document (?<doc>AP-\\d{4}-\\d{6})\\)"),
    "<span class=\"msgText\">(?<reason>E1(?:0[1-8]|10): [^<]*)",
    "<span class=\"msgText\">I003: |<form id=\"loginForm\"",
    "<form id=\"loginForm\"",
    "^Success",
    "<h2 class=\"error\">(?<reason>[^<]+)",
    "<p class=\"info\">Invoice (?<doc>AP-\\d{4}-\\d{6}) saved as draft",
};
#define N_ACME_RULES (sizeof(acme_rules) / sizeof(acme_rules[0]))

static void test_match_budget_basics(void **state)
{
    (void)state;
    struct match_budget b;
    struct match_re *re = compile_ok("Welcome");
    struct match_result *m = (struct match_result *)&b;

    assert_string_equal(match_outcome_name(MATCH_NONE), "none");
    assert_string_equal(match_outcome_name(MATCH_FOUND), "found");
    assert_string_equal(match_outcome_name(MATCH_ABORTED), "aborted");
    assert_string_equal(match_outcome_name((enum match_outcome)42), "aborted");

    /* the budget grows with the page and has a ceiling */
    assert_int_equal(match_budget_for(0), MATCH_BUDGET_BASE);
    assert_int_equal(match_budget_for(1000), MATCH_BUDGET_BASE + 1000 * MATCH_BUDGET_PER_BYTE);
    assert_int_equal(match_budget_for((size_t)1 << 40), MATCH_BUDGET_MAX);
    assert_true(match_budget_for((size_t)2 << 20) < MATCH_BUDGET_MAX);

    match_budget_init(&b, 1000, NULL);
    assert_null(match_budget_reason(&b));
    assert_int_equal(match_run(re, "<h1>Welcome</h1>", 16, &b, NULL), MATCH_FOUND);
    assert_true(b.used > 0 && b.used < 1000);
    assert_int_equal(b.used + b.left, 1000);
    assert_int_equal(match_run(re, "Login", 5, &b, &m), MATCH_NONE);
    assert_ptr_equal(m, (struct match_result *)&b); /* untouched unless found */
    assert_null(match_budget_reason(&b));

    /* a budget of nothing decides nothing */
    match_budget_init(&b, 0, NULL);
    assert_int_equal(match_run(re, "Welcome", 7, &b, NULL), MATCH_ABORTED);
    assert_true(b.exhausted);
    assert_string_equal(match_budget_reason(&b), "work budget exhausted");

    /* bad arguments never read as a decided "no match" */
    match_budget_init(&b, 1000, NULL);
    assert_int_equal(match_run(NULL, "x", 1, &b, NULL), MATCH_ABORTED);
    assert_int_equal(match_run(re, NULL, 3, &b, NULL), MATCH_ABORTED);
    assert_int_equal(match_run(re, "Welcome", 7, NULL, NULL), MATCH_ABORTED);
    assert_int_equal(match_run(re, NULL, 0, &b, NULL), MATCH_NONE); /* the empty page */
    assert_null(match_budget_reason(NULL));
    match_free(re);
}

static void test_match_runaway_pattern_aborted_on_2mb_page(void **state)
{
    (void)state;
    const size_t n = (size_t)2 << 20;
    char *page = line_page(n, 100);
    struct match_re *runaway = compile_ok("(?:a|.*.*.*[XY])");
    struct match_re *plain = compile_ok("b\\n");
    struct match_budget b;

    /* the session marker: cubic in the line length at every start position */
    match_budget_init(&b, match_budget_for(n), NULL);
    assert_int_equal(match_run(runaway, page, n, &b, NULL), MATCH_ABORTED);
    assert_true(b.exhausted);
    assert_false(b.cancelled);
    assert_int_equal(b.left, 0);
    assert_int_equal(b.used, match_budget_for(n));
    assert_string_equal(match_budget_reason(&b), "work budget exhausted");
    /* the budget is the page's: a later rule on it decides nothing, even an easy one */
    assert_int_equal(match_run(plain, page, n, &b, NULL), MATCH_ABORTED);
    /* ... and on a fresh budget the easy one is easy */
    match_budget_init(&b, match_budget_for(n), NULL);
    assert_int_equal(match_run(plain, page, n, &b, NULL), MATCH_FOUND);
    assert_true(b.used < 1000); /* ~2 steps at each of the 99 positions before the match */

    /* deterministic: the same page and pattern stop at the same step */
    struct match_budget b1, b2;
    match_budget_init(&b1, 3000000, NULL);
    match_budget_init(&b2, 3000000, NULL);
    struct match_re *half = compile_ok("(?:.*.*[XY])|(?<tail>bbbbZ)");
    assert_int_equal(match_run(half, page, n, &b1, NULL), MATCH_ABORTED);
    assert_int_equal(match_run(half, page, n, &b2, NULL), MATCH_ABORTED);
    assert_int_equal(b1.used, b2.used);
    match_free(half);

    /* A counted repeat that scans far and fails before its next step is charged its minimum:
     * a '<' every 65,000 bytes makes `[^<]{65535}` fail at every start position (~56 s of
     * scanning on this page if only steps and moves were counted). */
    for (size_t i = 0; i < n; i++)
        page[i] = (i % 65000 == 64999) ? '<' : 'b';
    struct match_re *scan = compile_ok("(?:[^<]{65535})?X");
    match_budget_init(&b, match_budget_for(n), NULL);
    assert_int_equal(match_run(scan, page, n, &b, NULL), MATCH_ABORTED);
    assert_true(b.exhausted);
    match_free(scan);

    match_free(runaway);
    match_free(plain);
    free(page);
}

struct raiser {
    atomic_int *flag;
    int after_ms;
};

static void *raise_later(void *arg)
{
    struct raiser *r = arg;
    usleep((useconds_t)r->after_ms * 1000);
    atomic_store(r->flag, 1);
    return NULL;
}

static void test_match_cancel_from_another_thread(void **state)
{
    (void)state;
    const size_t n = (size_t)2 << 20;
    char *page = line_page(n, 100);
    struct match_re *runaway = compile_ok("(?:a|.*.*.*[XY])");
    struct match_budget b;
    atomic_int stop = 0;

    /* a budget no page gets: only the flag can end this match (else: minutes) */
    match_budget_init(&b, UINT64_MAX, &stop);
    pthread_t t;
    struct raiser r = {&stop, 100};
    assert_int_equal(pthread_create(&t, NULL, raise_later, &r), 0);
    assert_int_equal(match_run(runaway, page, n, &b, NULL), MATCH_ABORTED);
    pthread_join(t, NULL);
    assert_true(b.cancelled);
    assert_false(b.exhausted);
    assert_string_equal(match_budget_reason(&b), "cancelled");
    assert_true(b.used > 0);

    /* raised before the match: no work at all */
    match_budget_init(&b, UINT64_MAX, &stop);
    assert_int_equal(match_run(runaway, "a", 1, &b, NULL), MATCH_ABORTED);
    assert_true(b.cancelled);
    assert_int_equal(b.used, 0);

    match_free(runaway);
    free(page);
}

static void test_match_ordinary_rules_on_big_pages(void **state)
{
    (void)state;
    struct match_re *re[N_ACME_RULES];
    for (size_t i = 0; i < N_ACME_RULES; i++)
        re[i] = compile_ok(acme_rules[i]);

    static const size_t sizes[] = {10 * 1024, (size_t)2 << 20, (size_t)4 << 20};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t n;
        char *page = acme_page(sizes[k], &n);
        struct match_budget b;
        match_budget_init(&b, match_budget_for(n), NULL);
        /* every rule on one budget, the way a page's rules run */
        for (size_t i = 0; i < N_ACME_RULES; i++) {
            struct match_result *m = NULL;
            enum match_outcome o = match_run(re[i], page, n, &b, &m);
            assert_int_equal(o, i == 0 ? MATCH_FOUND : MATCH_NONE);
            if (i == 0) {
                char *doc = match_group(m, "doc");
                assert_string_equal(doc, "AP-2026-000123");
                free(doc);
                match_result_free(m);
            }
        }
        /* all eight used a small share of the page's budget (about 0.3 steps per byte each) */
        assert_true(b.used < match_budget_for(n) / 10);
        free(page);
    }
    for (size_t i = 0; i < N_ACME_RULES; i++)
        match_free(re[i]);
}

static void test_match_deep_group_beyond_jit_stack(void **state)
{
    (void)state;
    /* ~2,000 iterations of a repeated group fill the JIT's 32 KiB stack; the interpreter
     * takes over on the same budget */
    const size_t n = 20000;
    char *s = malloc(n + 2);
    assert_non_null(s);
    memset(s, 'a', n);
    s[n] = 'c';
    s[n + 1] = '\0';
    struct match_re *re = compile_ok("(?<g>(?:a|b)*)c");
    struct match_budget b;
    struct match_result *m = NULL;
    match_budget_init(&b, match_budget_for(n + 1), NULL);
    assert_int_equal(match_run(re, s, n + 1, &b, &m), MATCH_FOUND);
    char *g = match_group(m, "g");
    assert_int_equal(strlen(g), n);
    free(g);
    match_result_free(m);
    match_free(re);
    free(s);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Not a test: APBOT_MATCH_BENCH=1 prints the figures match.c quotes. */
static void test_match_bench(void **state)
{
    (void)state;
    const char *on = getenv("APBOT_MATCH_BENCH");
    if (!on || strcmp(on, "1") != 0)
        skip();
    struct match_re *re[N_ACME_RULES];
    for (size_t i = 0; i < N_ACME_RULES; i++)
        re[i] = compile_ok(acme_rules[i]);
    static const size_t sizes[] = {10 * 1024, (size_t)2 << 20};
    for (size_t k = 0; k < 2; k++) {
        size_t n;
        char *page = acme_page(sizes[k], &n);
        int iters = k == 0 ? 5000 : 10, hits = 0;
        uint64_t steps = 0;
        double t0 = now_s();
        for (int it = 0; it < iters; it++) {
            struct match_budget b;
            match_budget_init(&b, match_budget_for(n), NULL);
            for (size_t i = 0; i < N_ACME_RULES; i++)
                hits += match_run(re[i], page, n, &b, NULL) == MATCH_FOUND;
            steps = b.used;
        }
        double t = now_s() - t0;
        printf("bench: %zu-byte page: %.0f ns per match, %.0f ns for %zu rules, %llu steps of "
               "%llu, %d hit(s)\n",
               n, t / iters / N_ACME_RULES * 1e9, t / iters * 1e9, N_ACME_RULES,
               (unsigned long long)steps, (unsigned long long)match_budget_for(n), hits / iters);
        free(page);
    }
    for (size_t i = 0; i < N_ACME_RULES; i++)
        match_free(re[i]);
    size_t n = (size_t)2 << 20;
    char *page = line_page(n, 100);
    struct match_re *runaway = compile_ok("(?:a|.*.*.*[XY])");
    struct match_budget b;
    match_budget_init(&b, match_budget_for(n), NULL);
    double t0 = now_s();
    enum match_outcome o = match_run(runaway, page, n, &b, NULL);
    printf("bench: runaway pattern on a 2 MB page: %s after %llu steps in %.3f s\n",
           match_outcome_name(o), (unsigned long long)b.used, now_s() - t0);
    match_free(runaway);
    free(page);
}

static void test_match_status_specs(void **state)
{
    (void)state;
    assert_true(match_status("200", 200));
    assert_false(match_status("200", 201));
    assert_true(match_status("5xx", 500));
    assert_true(match_status("5xx", 503));
    assert_true(match_status("5xx", 599));
    assert_false(match_status("5xx", 404));
    assert_true(match_status("50x", 503));
    assert_false(match_status("50x", 510));
    assert_true(match_status("429,503", 429));
    assert_true(match_status("429,503", 503));
    assert_false(match_status("429,503", 500));
    assert_true(match_status("4xx,500", 404));
    assert_true(match_status("4xx,500", 500));
    assert_false(match_status("4xx,500", 502));
    assert_true(match_status("200, 500", 500));
    assert_false(match_status("200", 0)); /* no status: nothing answered */
    assert_false(match_status("5xx", -1));
    assert_false(match_status(NULL, 200));

    assert_true(match_status_valid("200"));
    assert_true(match_status_valid("5xx"));
    assert_true(match_status_valid("4XX"));
    assert_true(match_status_valid("429,503"));
    assert_true(match_status_valid("4xx,500"));
    assert_true(match_status_valid(" 200 , 302 "));
    assert_false(match_status_valid(""));
    assert_false(match_status_valid(NULL));
    assert_false(match_status_valid("20"));
    assert_false(match_status_valid("2000"));
    assert_false(match_status_valid("600"));
    assert_false(match_status_valid("099"));
    assert_false(match_status_valid("5xy"));
    assert_false(match_status_valid("x00"));
    assert_false(match_status_valid("5x3"));
    assert_false(match_status_valid("200,"));
    assert_false(match_status_valid(",200"));
    assert_false(match_status_valid("200;500"));
    assert_false(match_status_valid("200 500"));
    assert_false(match_status_valid("500-599"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match_named_groups),
        cmocka_unit_test(test_match_no_match_and_nulls),
        cmocka_unit_test(test_match_utf8_and_invalid_bytes),
        cmocka_unit_test(test_match_bad_pattern_offset),
        cmocka_unit_test(test_match_backtracking_bounded),
        cmocka_unit_test(test_match_budget_basics),
        cmocka_unit_test(test_match_runaway_pattern_aborted_on_2mb_page),
        cmocka_unit_test(test_match_cancel_from_another_thread),
        cmocka_unit_test(test_match_ordinary_rules_on_big_pages),
        cmocka_unit_test(test_match_deep_group_beyond_jit_stack),
        cmocka_unit_test(test_match_status_specs),
        cmocka_unit_test(test_match_bench),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
