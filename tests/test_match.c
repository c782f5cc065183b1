/*
 * test_match.c - the PCRE2 matcher and status specs: named groups (set, unset, unknown), no
 * match, results outliving the subject, UTF-8 and invalid bytes in pages, compile errors with
 * PCRE2's message and offset, the per-page work budget (a runaway pattern on a 2 MB page
 * gives MATCH_ABORTED, the budget is shared by every rule on the page, a cancel flag raised
 * by another thread stops a match, ordinary rules on big pages still find their groups, a
 * repeated group beyond the JIT's stack still matches), and the status spec grammar ("200",
 * "5xx", "429,503", "4xx,500"), and the needle pre-check (what set each pattern gets, a fixed
 * seed of random patterns and pages on which match_run must agree with PCRE2 run alone, no
 * work on a page without a needle, a spent budget still ABORTED), and match_excludes (which
 * subjects rule a pattern out when bytes may be blanked). APBOT_MATCH_BENCH=1 prints
 * ns per match on a ~10 KB and a 2 MB page.
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

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "web/match.h"

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

    /* the issue's session marker: cubic in the line length at every start position */
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

/* ---- the needle pre-check ------------------------------------------------------------- */

struct needle_case {
    const char *pattern;
    size_t n;              /* 0: no set, the pattern always runs */
    const char *needle[3]; /* the first min(n, 3) needles */
};

static const struct needle_case needle_cases[] = {
    {"<span class=\"msgText\">I020: Document (?<doc>AP-\\d{4}-\\d{6}) was posted\\.</span>",
     1,
     {"<span class=\"msgText\">I020: Document "}},
    {"<span class=\"msgText\">I003: |<form id=\"loginForm\"",
     2,
     {"<span class=\"msgText\">I003: ", "<form id=\"loginForm\""}},
    {"<span class=\"msgText\">(?<reason>E1(?:0[1-8]|1[02-4]): [^<]*)",
     1,
     {"<span class=\"msgText\">"}},
    /* a repeat that allows zero takes the last literal out; + does not */
    {"abc*", 1, {"ab"}},
    {"abc+", 1, {"abc"}},
    {"abc+?d", 1, {"abc"}},
    {"ab?c", 1, {"a"}},
    {"ab{2}", 1, {"a"}},
    {"ab{,2}", 1, {"a"}},
    {"a{2}b", 0, {NULL}},
    {"a?", 0, {NULL}},
    {"a*b", 0, {NULL}},
    {"a+", 1, {"a"}},
    /* escaped punctuation is a literal, any other escape ends the run */
    {"\\.x", 1, {".x"}},
    {"a\\.?", 1, {"a"}},
    {"\\/api\\/x\\(1\\)-\\<", 1, {"/api/x(1)-<"}},
    {"\\dabc", 0, {NULL}},
    {"ab\\d|c", 2, {"ab", "c"}},
    {"a\\x41b", 1, {"a"}},
    {"a\\x{7c}b|c", 2, {"a", "c"}},
    {"a\\p{L}|b", 2, {"a", "b"}},
    {"a\\N{2}|b", 2, {"a", "b"}},
    {"\\x{e9}", 0, {NULL}},
    /* \c takes the next character: \c| is '<', \c) is 'i', neither is structure */
    {"ab\\c|cd", 1, {"ab"}},
    {"x\\c)|y", 2, {"x", "y"}},
    {"x\\c(|y", 2, {"x", "y"}},
    {"a\\c(|b\\c)", 2, {"a", "b"}}, /* "ah" or "bi" */
    /* anchors and other metacharacters end the run */
    {"^Success", 0, {NULL}},
    {"Success$", 1, {"Success"}},
    {"a.b", 1, {"a"}},
    {"a\nb\t c#d", 1, {"a\nb\t c#d"}}, /* no x option: white space and # are literals */
    /* options, verbs, quoting and comments: no set */
    {"(?i)abc", 0, {NULL}},
    {"a(?i)b|c", 0, {NULL}},
    {"ab(?x) c", 0, {NULL}},
    {"ab(?s:.)", 0, {NULL}},
    {"ab(?-i)c", 0, {NULL}},
    {"ab(?^)c", 0, {NULL}},
    {"ab(?|(c)|(d))", 0, {NULL}},
    {"ab(?#x|y)c", 0, {NULL}},
    {"ab(?C1)c", 0, {NULL}},
    {"ab(?R)?", 0, {NULL}},
    {"\\Qa|b\\E", 0, {NULL}},
    {"ab\\Qc|d\\E", 0, {NULL}},
    {"(*UTF)abc", 0, {NULL}},
    {"(*CR)abc", 0, {NULL}},
    {"ab(*ACCEPT)c|d", 0, {NULL}},
    /* groups that are only groups */
    {"ab(?:c|d)|e(?<n>f)|g(?'m'h)", 3, {"ab", "e", "g"}},
    {"a(?=b)|c(?!d)|e(?<=e)f", 3, {"a", "c", "e"}},
    {"a(?<!x)b|c(?>d)|e(f)(?1)", 3, {"a", "c", "e"}},
    {"a(?P<n>b)|c(?P=n)|d(?P>n)|e(?&n)", 4, {"a", "c", "d"}},
    {"ab(?(1)c|d)(x)", 1, {"ab"}},
    {"(a|b)c", 0, {NULL}},
    {"(?:ab)", 0, {NULL}},
    {"(?<=ab)c", 0, {NULL}},
    /* classes: a | inside is no alternative, a ] first is a literal */
    {"x[|]y", 1, {"x"}},
    {"x\\|y", 1, {"x|y"}},
    {"[]|]x|yz", 0, {NULL}},
    {"x[]|]y|z", 2, {"x", "z"}},
    {"x[^]|(]y|z", 2, {"x", "z"}},
    {"x[[:alpha:]|]|y", 2, {"x", "y"}},
    {"x[[:^digit:]\\]|]|y", 2, {"x", "y"}},
    {"x[\\x{7c}|]|y", 2, {"x", "y"}},
    {"x[a[b]|y", 2, {"x", "y"}},
    /* where a class ends decides what is structure after it */
    {"x[](]|y[])]", 2, {"x", "y"}},
    {"x[\\](]|y[\\])]", 2, {"x", "y"}},
    {"x[[:alpha:](]|y[[:digit:])]", 2, {"x", "y"}},
    /* empty alternatives */
    {"", 0, {NULL}},
    {"ab|", 0, {NULL}},
    {"|ab", 0, {NULL}},
    {"a||b", 0, {NULL}},
    /* multibyte: a repeat takes the whole character */
    {"\xc3\xa9+x", 1, {"\xc3\xa9"}},
    {"a\xc3\xa9?", 1, {"a"}},
    {"a\xe2\x82\xac*b|c\xc3\xa9", 2, {"a", "c\xc3\xa9"}},
    {"\xc3\xa9{2}", 0, {NULL}},
    {"a\\\xc3\xa9", 1, {"a"}}, /* an escaped non-ASCII character ends the run too */
    /* at most 16 alternatives */
    {"a|b|c|d|e|f|g|h|i|j|k|l|m|n|o|p", 16, {"a", "b", "c"}},
    {"a|b|c|d|e|f|g|h|i|j|k|l|m|n|o|p|q", 0, {NULL}},
};
#define N_NEEDLE_CASES (sizeof(needle_cases) / sizeof(needle_cases[0]))

/* Patterns PCRE2 refuses: match_compile fails cleanly, whatever the scanner would make of them
 * (the set is derived only from a pattern PCRE2 accepted). */
static const char *const bad_patterns[] = {
    "ab[", "a)", "(ab", "[]", "a\\", "x[[:a|b:]]", "x[[.a.]]", "a\\x{7c", "a(?1)", "\xc3",
};

static void test_match_needle_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_NEEDLE_CASES; i++) {
        const struct needle_case *c = &needle_cases[i];
        struct match_re *re = NULL;
        char err[APBOT_ERR_LEN] = "";
        const char *const *got = (const char *const *)&re;

        if (match_compile(c->pattern, &re, err, sizeof(err)) != APBOT_OK)
            fail_msg("%s: %s", c->pattern, err);
        size_t n = match_needles(re, &got);
        if (n != c->n)
            fail_msg("%s: %zu needles, want %zu", c->pattern, n, c->n);
        if (n == 0)
            assert_null(got);
        for (size_t k = 0; k < n && k < 3; k++)
            if (strcmp(got[k], c->needle[k]) != 0)
                fail_msg("%s: needle %zu is \"%s\", want \"%s\"", c->pattern, k, got[k],
                         c->needle[k]);
        assert_int_equal(match_needles(re, NULL), n);
        match_free(re);
    }
    for (size_t i = 0; i < sizeof(bad_patterns) / sizeof(bad_patterns[0]); i++) {
        struct match_re *re = (struct match_re *)&state;
        char err[APBOT_ERR_LEN] = "";
        assert_int_equal(match_compile(bad_patterns[i], &re, err, sizeof(err)), APBOT_E_PARSE);
        assert_ptr_equal(re, (struct match_re *)&state);
    }
    const char *const *got = (const char *const *)&state;
    assert_int_equal(match_needles(NULL, &got), 0);
    assert_null(got);
}

static uint64_t rng_next(uint64_t *s)
{
    /* xorshift64*: fixed seed, the same cases on every run */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

/* Pattern and subject pieces: literals, structure, classes, escapes, repeats; and in subjects
 * the same letters, bytes PCRE2 treats specially (NUL, invalid UTF-8) and pieces of the rule
 * literals above. */
static const char *const pattern_frags[] = {
    "a",   "b",   "ab",    "ba",    "x",      "\xc3\xa9", "<",     "1",    "|",    "|",   "(",
    ")",   "(?:", "(?<g>", "(?=a)", "(?<=b)", "(?!b)",    "[ab]",  "[^a]", "[]|]", "[|]", "\\d",
    "\\w", "\\b", "?",     "*",     "+",      "{2}",      "{0,1}", "{",    "}",    ".",   "\\.",
    "\\|", "\\(", "\\c|",  "\\c(",  "\\c)",   "^",        "$",     "]",
};
static const char *const subject_frags[] = {
    "a",
    "b",
    "ab",
    "ba",
    "x",
    "y",
    "\xc3\xa9",
    "<",
    "1",
    "|",
    ".",
    "(",
    ")",
    "]",
    "\n",
    "\xff",
    "h",
    "i",
    "",
    "aa",
    "bb",
    "xab",
    "<span class=\"msgText\">",
    "I003: ",
    "<form id=\"loginForm\"",
    "E101: no",
    "E113: yes",
    "I020: Document AP-2026-000123 was posted.</span>",
};
#define N_PATTERN_FRAGS (sizeof(pattern_frags) / sizeof(pattern_frags[0]))
#define N_SUBJECT_FRAGS (sizeof(subject_frags) / sizeof(subject_frags[0]))

/* A random subject of up to ~10 pieces, NUL bytes included (len is authoritative). */
static size_t random_subject(uint64_t *seed, char *buf, size_t cap)
{
    size_t len = 0, pieces = rng_next(seed) % 11;
    for (size_t k = 0; k < pieces; k++) {
        const char *f = subject_frags[rng_next(seed) % N_SUBJECT_FRAGS];
        size_t n = *f ? strlen(f) : 1; /* "" stands for one NUL byte */
        if (len + n > cap)
            break;
        memcpy(buf + len, f, n);
        len += n;
    }
    return len;
}

static bool bytes_at(const char *s, size_t len, size_t at, const char *needle)
{
    size_t n = strlen(needle);
    return at <= len && len - at >= n && memcmp(s + at, needle, n) == 0;
}

struct sound_counts {
    size_t patterns, with_set, runs, found, skipped; /* skipped: no needle on the page */
};

/* One pattern on `subjects` random pages: match_run against PCRE2 itself, compiled the way
 * match.c compiles (no callout function: the callouts do nothing) and without the pre-check.
 * A match must also start with one of the needles. The pages lie in zeroed memory: PCRE2
 * 10.42's JIT reads the byte after a page that ends in invalid UTF-8 for \b at its end
 * ("xa\xff" then "a" matches `\b$`), and what it finds there must be the same both times. */
static void check_sound(const char *pattern, uint64_t *seed, int subjects, struct sound_counts *c)
{
    struct match_re *re = NULL;
    char err[APBOT_ERR_LEN];
    int errcode;
    PCRE2_SIZE erroff;
    pcre2_code *plain = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                                      PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | PCRE2_AUTO_CALLOUT,
                                      &errcode, &erroff, NULL);
    int ours = match_compile(pattern, &re, err, sizeof(err));

    if (!plain || ours != APBOT_OK) {
        if (!plain != (ours != APBOT_OK))
            fail_msg("%s: compiles with one option set only", pattern);
        pcre2_code_free(plain);
        return;
    }
    (void)pcre2_jit_compile(plain, PCRE2_JIT_COMPLETE); /* as match.c: JIT when it can */
    const char *const *needles = NULL;
    size_t n = match_needles(re, &needles);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(plain, NULL);
    assert_non_null(md);
    c->patterns++;
    c->with_set += n > 0;
    for (int k = 0; k < subjects; k++) {
        char s[256] = {0};
        size_t len = random_subject(seed, s, sizeof(s) - 1);
        struct match_budget b;
        bool present = false;

        for (size_t i = 0; i < n; i++)
            for (size_t at = 0; at < len && !present; at++)
                present = bytes_at(s, len, at, needles[i]);
        match_budget_init(&b, match_budget_for(len), NULL);
        enum match_outcome got = match_run(re, s, len, &b, NULL);
        int rc = pcre2_match(plain, (PCRE2_SPTR)s, len, 0, 0, md, NULL);
        if (rc < 0 && rc != PCRE2_ERROR_NOMATCH)
            fail_msg("%s: PCRE2 says %d", pattern, rc);
        enum match_outcome want = rc >= 0 ? MATCH_FOUND : MATCH_NONE;
        if (got != want)
            fail_msg("%s on \"%.*s\" (%zu bytes): %s, PCRE2 alone: %s", pattern, (int)len, s, len,
                     match_outcome_name(got), match_outcome_name(want));
        if (rc >= 0 && n > 0) {
            size_t start = pcre2_get_ovector_pointer(md)[0];
            bool starts = false;
            for (size_t i = 0; i < n; i++)
                starts = starts || bytes_at(s, len, start, needles[i]);
            if (!starts)
                fail_msg("%s on \"%.*s\": the match at %zu starts with no needle", pattern,
                         (int)len, s, start);
        }
        c->runs++;
        c->found += got == MATCH_FOUND;
        if (n > 0 && !present) {
            c->skipped++;
            assert_int_equal(b.used, 0);
        }
    }
    pcre2_match_data_free(md);
    pcre2_code_free(plain);
    match_free(re);
}

static void test_match_needles_sound(void **state)
{
    (void)state;
    uint64_t seed = 20261201;
    struct sound_counts c = {0};

    for (size_t i = 0; i < N_NEEDLE_CASES; i++)
        check_sound(needle_cases[i].pattern, &seed, 120, &c);
    for (int i = 0; i < 3000; i++) {
        char p[128];
        size_t len = 0, pieces = 1 + rng_next(&seed) % 8;
        for (size_t k = 0; k < pieces; k++) {
            const char *f = pattern_frags[rng_next(&seed) % N_PATTERN_FRAGS];
            size_t n = strlen(f);
            if (len + n >= sizeof(p))
                break;
            memcpy(p + len, f, n);
            len += n;
        }
        p[len] = '\0';
        check_sound(p, &seed, 12, &c);
    }
    /* the property was put to the test: many patterns had a set, many pages were decided by
     * it, many were matches */
    if (c.with_set < c.patterns / 5 || c.skipped < c.runs / 10 || c.found < c.runs / 10)
        fail_msg("weak coverage: %zu patterns, %zu with a set, %zu runs, %zu found, %zu "
                 "skipped",
                 c.patterns, c.with_set, c.runs, c.found, c.skipped);
}

static void test_match_needle_absent_spends_nothing(void **state)
{
    (void)state;
    struct match_re *re = compile_ok(acme_rules[0]);
    struct match_budget b;
    struct match_result *m = (struct match_result *)&b;
    const size_t n = (size_t)2 << 20;
    char *page = line_page(n, 100);

    /* no needle on the page: no match, no work */
    match_budget_init(&b, match_budget_for(n), NULL);
    assert_int_equal(match_run(re, page, n, &b, &m), MATCH_NONE);
    assert_int_equal(b.used, 0);
    assert_ptr_equal(m, (struct match_result *)&b);
    assert_null(match_budget_reason(&b));
    assert_false(match_exec(re, page, n, NULL));

    /* the needle on the page, the rest not: PCRE2 runs, pays, and finds nothing */
    static const char near[] =
        "<span class=\"msgText\">I020: Document AP-2026-000123 was not posted.</span>";
    match_budget_init(&b, match_budget_for(sizeof(near) - 1), NULL);
    assert_int_equal(match_run(re, near, sizeof(near) - 1, &b, NULL), MATCH_NONE);
    assert_true(b.used > 0);

    /* the needle past len is not on the page; NUL bytes before it are page bytes */
    static const char posted[] =
        "\0\0<span class=\"msgText\">I020: Document AP-2026-000123 was posted.</span>";
    match_budget_init(&b, match_budget_for(sizeof(posted) - 1), NULL);
    assert_int_equal(match_run(re, posted, 30, &b, NULL), MATCH_NONE);
    assert_int_equal(b.used, 0);
    m = NULL;
    assert_int_equal(match_run(re, posted, sizeof(posted) - 1, &b, &m), MATCH_FOUND);
    char *doc = match_group(m, "doc");
    assert_string_equal(doc, "AP-2026-000123");
    free(doc);
    match_result_free(m);

    /* a spent or cancelled budget still decides nothing, needle or not */
    match_budget_init(&b, 0, NULL);
    assert_int_equal(match_run(re, page, n, &b, NULL), MATCH_ABORTED);
    assert_true(b.exhausted);
    struct match_re *runaway = compile_ok("(?:a|.*.*.*[XY])");
    match_budget_init(&b, 1000, NULL);
    assert_int_equal(match_run(runaway, page, n, &b, NULL), MATCH_ABORTED);
    assert_true(b.exhausted);
    assert_int_equal(match_run(re, page, n, &b, NULL), MATCH_ABORTED); /* a later rule */
    match_free(runaway);
    atomic_int stop = 1;
    match_budget_init(&b, match_budget_for(n), &stop);
    assert_int_equal(match_run(re, page, n, &b, NULL), MATCH_ABORTED);
    assert_true(b.cancelled);
    assert_int_equal(b.used, 0);
    /* bad arguments first, too */
    match_budget_init(&b, 1000, NULL);
    assert_int_equal(match_run(re, NULL, 3, &b, NULL), MATCH_ABORTED);
    assert_int_equal(match_run(re, NULL, 0, &b, NULL), MATCH_NONE); /* the empty page */
    assert_int_equal(b.used, 0);

    match_free(re);
    free(page);
}

/* match_excludes: a needle's longest run between fill bytes must be missing from the subject
 * for every needle; a pattern without a set is never excluded. */
static void test_match_excludes_table(void **state)
{
    (void)state;
    static const struct {
        const char *pattern, *subject;
        char fill;
        bool excluded;
    } cases[] = {
        {"I020: Doc", "nothing here", ' ', true},
        {"I020: Doc", "I020:<!---->Doc", ' ', false}, /* blanking may make "I020: Doc" */
        {"I020: Doc", "Doc", ' ', true},              /* its longest run, "I020:", is not there */
        {"I020: Doc", "I020:", ' ', false},           /* it is: unsure, though "Doc" is not */
        {"I020: Document", "I020:", ' ', true},
        {"I020: Document", "Document", ' ', false},
        {"a|b", "xa", ' ', false},
        {"a|b", "xyz", ' ', true},
        {"ab|c d", "ab", ' ', false},
        {"ab|c d", "d", ' ', true}, /* "c d": runs "c" and "d" of one byte: the first */
        {"ab|c d", "xc", ' ', false},
        {"  ", "anything", ' ', false}, /* a needle of fill alone: no run to look for */
        {"x  ", "y", ' ', true},
        {"x  ", "x", ' ', false},
        {"a.c", "nothing", ' ', true},      /* needle "a" */
        {".*a", "nothing", ' ', false},     /* no set */
        {"(?i)abc", "nothing", ' ', false}, /* no set */
        {"abc", "", ' ', true},
        {"abc", "ab\0c", '\0', true},
        {"a-b", "a", '-', false},
        {"a-bc", "a", '-', true},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct match_re *re = compile_ok(cases[i].pattern);
        bool got = match_excludes(re, cases[i].subject, strlen(cases[i].subject), cases[i].fill);
        if (got != cases[i].excluded)
            fail_msg("case %zu: /%s/ on '%s': %d", i, cases[i].pattern, cases[i].subject, got);
        match_free(re);
    }
    assert_false(match_excludes(NULL, "x", 1, ' '));
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

/* Whether one valid item ("503", "5x3" aside: "50x", "5XX") matches status, as match.c read
 * it before: the status printed with %03ld and compared digit by digit. */
static bool old_status_item_hit(const char *item, long status)
{
    char digits[4];
    if (status < 100 || status > 599)
        return false;
    snprintf(digits, sizeof(digits), "%03ld", status);
    for (size_t i = 0; i < 3; i++)
        if (item[i] != 'x' && item[i] != 'X' && item[i] != digits[i])
            return false;
    return true;
}

static void test_match_status_specs(void **state)
{
    (void)state;
    /* every item against every status around the valid ones, alone and second in a list */
    static const char chars[] = "0123456789xX";
    for (char a = '1'; a <= '5'; a++) {
        for (size_t b = 0; b < sizeof(chars) - 1; b++) {
            for (size_t c = 0; c < sizeof(chars) - 1; c++) {
                char item[4] = {a, chars[b], chars[c], '\0'}, list[12];
                bool wild = chars[b] == 'x' || chars[b] == 'X';
                if (wild && chars[c] != 'x' && chars[c] != 'X')
                    continue; /* "5x3": invalid */
                snprintf(list, sizeof(list), "100,%s", item);
                for (long st = -2; st <= 1002; st++) {
                    bool want = old_status_item_hit(item, st);
                    if (match_status(item, st) != want ||
                        match_status(list, st) != (want || st == 100))
                        fail_msg("status %ld against '%s': %d", st, item, !want);
                }
            }
        }
    }
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
        cmocka_unit_test(test_match_needle_table),
        cmocka_unit_test(test_match_needles_sound),
        cmocka_unit_test(test_match_needle_absent_spends_nothing),
        cmocka_unit_test(test_match_excludes_table),
        cmocka_unit_test(test_match_status_specs),
        cmocka_unit_test(test_match_bench),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
