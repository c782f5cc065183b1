/*
 * test_page.c - page against canned ACME pages (tests/data/pages, written from the contract in
 * docs/erp-sim.md): the forms a browser would submit (hidden fields kept, select defaults,
 * set/press and the refusal of fields the form does not have), result rows and columns, the
 * journal's next link, garbled and broken pages, excerpt bounds and UTF-8 safety, XPath
 * validity, and several threads parsing at once. Then the classic ERP's traits as tables:
 * buttons pressed by name and value (none or several different = error), select options by
 * value, label or label prefix (no silent fallback), controls added, and what outcome rules
 * see (page_rule_text) on hostile markup up to 2 MB.
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
#include <strings.h>

#include <libxml/HTMLparser.h>
#include <libxml/HTMLtree.h>
#include <libxml/tree.h>
#include <libxml/xpath.h>

#include "apbot/error.h"
#include "apbot/mem.h"
#include "helpers/canned.h"
#include "helpers/xorshift.h"
#include "web/http.h"
#include "web/match.h"
#include "web/page-int.h"
#include "web/page.h"

#if defined(__SANITIZE_ADDRESS__)
#define PAGE_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PAGE_TEST_ASAN 1
#endif
#endif
#ifdef PAGE_TEST_ASAN
#include <sanitizer/asan_interface.h>
#endif

#define BASE "http://127.0.0.1:8080"

static struct page *load(const char *name, const char *url)
{
    size_t len;
    char *body = canned_page_read(name, &len);
    struct page *p = NULL;
    char err[APBOT_ERR_LEN] = "";
    assert_int_equal(page_parse(body, len, url, &p, err, sizeof(err)), APBOT_OK);
    assert_non_null(p);
    free(body);
    return p;
}

static struct page *parse_str(const char *html, const char *url)
{
    struct page *p = NULL;
    assert_int_equal(page_parse(html, strlen(html), url, &p, NULL, 0), APBOT_OK);
    return p;
}

/* Index of name in the form's submitted fields, -1 if absent; count gets the occurrences. */
static int field_at(const struct page_form *f, const char *name, int *count)
{
    int at = -1, c = 0;
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->names[i], name) == 0) {
            if (at < 0)
                at = (int)i;
            c++;
        }
    if (count)
        *count = c;
    return at;
}

static const char *field(const struct page_form *f, const char *name)
{
    int c;
    int i = field_at(f, name, &c);
    if (i < 0)
        return NULL;
    assert_int_equal(c, 1);
    return f->values[i];
}

/* Well-formed UTF-8 (RFC 3629): no overlong forms, surrogates or code points past U+10FFFF. */
static bool valid_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        size_t n;
        unsigned char lo = 0x80, hi = 0xBF;
        if (*p < 0x80)
            n = 1;
        else if (*p >= 0xC2 && *p <= 0xDF)
            n = 2;
        else if (*p >= 0xE0 && *p <= 0xEF)
            n = 3;
        else if (*p >= 0xF0 && *p <= 0xF4)
            n = 4;
        else
            return false;
        lo = *p == 0xE0 ? 0xA0 : *p == 0xF0 ? 0x90 : lo;
        hi = *p == 0xED ? 0x9F : *p == 0xF4 ? 0x8F : hi;
        if (n > 1 && (p[1] < lo || p[1] > hi))
            return false;
        for (size_t i = 2; i < n; i++)
            if ((p[i] & 0xC0) != 0x80)
                return false;
        p += n;
    }
    return true;
}

static void test_page_login_form(void **state)
{
    (void)state;
    struct page *p = load("login.html", BASE "/erp/ap/invoice/new");
    struct page_form f;
    char err[APBOT_ERR_LEN] = "";

    assert_true(page_has(p, "//div[@id='msgArea']/span[contains(., 'I003: ')]"));
    assert_int_equal(page_find_form(p, "//form[@id='loginForm']", &f, err, sizeof(err)), APBOT_OK);
    /* the action resolves against the page's own URL (here: where the redirect landed) */
    assert_string_equal(f.action, BASE "/erp/login");
    assert_string_equal(f.method, "POST");
    assert_int_equal(f.n, 3);
    assert_string_equal(f.names[0], "j_username");
    assert_string_equal(f.values[0], "");
    assert_false(f.hidden[0]);
    assert_string_equal(f.names[1], "j_password");
    assert_string_equal(f.names[2], "_csrf");
    assert_string_equal(f.values[2], "c5f0a1e2b3d4c5f6a7b8");
    assert_true(f.hidden[2]);
    assert_int_equal(f.n_buttons, 1);
    assert_string_equal(f.buttons[0], "login");
    assert_string_equal(f.button_values[0], "Log in");

    assert_int_equal(page_form_set(&f, "j_username", "clerk"), APBOT_OK);
    assert_int_equal(page_form_set(&f, "j_password", "acme-demo"), APBOT_OK);
    assert_string_equal(field(&f, "j_username"), "clerk");
    assert_string_equal(field(&f, "j_password"), "acme-demo");
    /* the CSRF token is untouched and the button is not submitted until pressed */
    assert_string_equal(field(&f, "_csrf"), "c5f0a1e2b3d4c5f6a7b8");
    assert_null(field(&f, "login"));
    assert_int_equal(f.n, 3);

    /* a changed form is systemic: no silent new field */
    assert_int_equal(page_form_set(&f, "j_otp", "123456"), APBOT_E_NOTFOUND);
    assert_int_equal(page_form_set(&f, "login", "x"), APBOT_E_NOTFOUND);
    assert_int_equal(f.n, 3);

    assert_int_equal(page_form_press(&f, "cancel", NULL), APBOT_E_NOTFOUND);
    assert_int_equal(f.n, 3);
    assert_int_equal(page_form_press(&f, "login", NULL), APBOT_OK);
    assert_int_equal(page_form_press(&f, "login", NULL), APBOT_OK); /* twice is still once */
    assert_int_equal(f.n, 4);
    assert_string_equal(field(&f, "login"), "Log in");

    page_form_done(&f);
    assert_null(f.names);
    assert_int_equal(f.n, 0);
    page_form_done(&f); /* idempotent */
    page_free(p);
}

static void test_page_entry_form_defaults(void **state)
{
    (void)state;
    struct page *p = load("entry.html", BASE "/erp/ap/invoice/new");
    struct page_form f;

    assert_int_equal(page_find_form(p, "//form[@id='apEntry']", &f, NULL, 0), APBOT_OK);
    assert_string_equal(f.action, BASE "/erp/ap/invoice/check");
    assert_string_equal(f.method, "POST");
    static const char *const order[] = {"docType",   "vendorNo", "vendorInvNo", "invDate",
                                        "dueDate",   "currency", "amount",      "glAccount",
                                        "reference", "memo",     "formToken"};
    assert_int_equal(f.n, sizeof(order) / sizeof(order[0]));
    for (size_t i = 0; i < f.n; i++)
        assert_string_equal(f.names[i], order[i]);
    assert_string_equal(field(&f, "docType"), "KR");   /* nothing selected: the first option */
    assert_string_equal(field(&f, "currency"), "EUR"); /* the selected option */
    assert_string_equal(field(&f, "memo"), "");
    assert_string_equal(field(&f, "formToken"), "tok-7f3a9c01");
    assert_true(f.hidden[field_at(&f, "formToken", NULL)]);
    assert_false(f.hidden[field_at(&f, "amount", NULL)]);
    assert_int_equal(f.n_buttons, 1);
    assert_string_equal(f.buttons[0], "check");

    assert_int_equal(page_form_set(&f, "docType", "KG"), APBOT_OK);
    assert_int_equal(page_form_set(&f, "amount", "1.234,56"), APBOT_OK);
    assert_int_equal(page_form_set(&f, "memo", "Q4 chairs"), APBOT_OK);
    assert_string_equal(field(&f, "docType"), "KG");
    assert_string_equal(field(&f, "amount"), "1.234,56");
    assert_string_equal(field(&f, "memo"), "Q4 chairs");
    /* vendorId exists only on the confirmation form */
    assert_int_equal(page_form_set(&f, "vendorId", "V-000017"), APBOT_E_NOTFOUND);
    assert_int_equal(f.n, sizeof(order) / sizeof(order[0]));
    assert_int_equal(page_form_press(&f, "check", NULL), APBOT_OK);
    assert_string_equal(f.names[f.n - 1], "check");
    assert_string_equal(f.values[f.n - 1], "Check");
    page_form_done(&f);

    /* a form that is not there, an XPath that is no form, a broken XPath: ret untouched */
    struct page_form g;
    memset(&g, 0x5a, sizeof(g));
    char err[APBOT_ERR_LEN] = "";
    assert_int_equal(page_find_form(p, "//form[@id='apConfirm']", &g, err, sizeof(err)),
                     APBOT_E_NOTFOUND);
    assert_true(strlen(err) > 0);
    assert_int_equal(page_find_form(p, "//input[@name='amount']", &g, NULL, 0), APBOT_E_NOTFOUND);
    err[0] = '\0';
    assert_int_equal(page_find_form(p, "//form[@id=", &g, err, sizeof(err)), APBOT_E_INVAL);
    assert_true(strlen(err) > 0);
    assert_int_equal(g.n, (size_t)0x5a5a5a5a5a5a5a5aULL);
    page_free(p);
}

static void test_page_validation_page(void **state)
{
    (void)state;
    struct page *p = load("validation.html", BASE "/erp/ap/invoice/check");
    struct page_form f;

    char *msg = page_string(p, "//div[@id='msgArea']/span[@class='msgText']");
    assert_non_null(msg);
    assert_string_equal(msg, "E102: Vendor 100099 does not exist.");
    free(msg);
    assert_true(page_has(p, "//div[@id='msgArea' and contains(@class, 'msg-error')]"));
    assert_false(page_has(p, "//span[@id='docNo']"));

    assert_int_equal(page_find_form(p, "//form[@id='apEntry']", &f, NULL, 0), APBOT_OK);
    assert_string_equal(field(&f, "docType"), "KG");
    assert_string_equal(field(&f, "currency"), "USD");
    assert_string_equal(field(&f, "vendorInvNo"), "INV & 7"); /* entities decoded */
    /* the newline right after <textarea> is markup, the rest is the value */
    assert_string_equal(field(&f, "memo"), "Office chairs <Q4>");
    assert_string_equal(field(&f, "formToken"), "tok-22b8e410");
    page_form_done(&f);
    page_free(p);
}

static void test_page_confirm_form_hidden_fields(void **state)
{
    (void)state;
    struct page *p = load("confirm.html", BASE "/erp/ap/invoice/check");
    struct page_form f;

    char *name = page_string(p, "//td[@id='vendorName']");
    assert_string_equal(name, "Müller & Söhne GmbH");
    free(name);
    char *due = page_string(p, "//td[@id='dueDateResolved']");
    assert_string_equal(due, "03.12.2026");
    free(due);

    assert_int_equal(page_find_form(p, "//form[@id='apConfirm']", &f, NULL, 0), APBOT_OK);
    assert_string_equal(f.action, BASE "/erp/ap/invoice/post");
    assert_int_equal(f.n, 12);
    for (size_t i = 0; i < f.n; i++)
        assert_true(f.hidden[i]);
    assert_string_equal(field(&f, "vendorId"), "V-000017");
    assert_string_equal(field(&f, "dueDate"), "03.12.2026");
    assert_string_equal(field(&f, "amount"), "1.234,56");
    assert_string_equal(field(&f, "formToken"), "tok-fresh-91d2");
    assert_int_equal(page_form_press(&f, "post", NULL), APBOT_OK);
    assert_int_equal(f.n, 13);
    assert_string_equal(field(&f, "post"), "Post");
    assert_int_equal(page_form_set(&f, "check", "Check"), APBOT_E_NOTFOUND);
    page_form_done(&f);
    page_free(p);
}

static void test_page_posted_banner(void **state)
{
    (void)state;
    struct page *p = load("posted.html", BASE "/erp/ap/invoice/post");
    char *doc = page_string(p, "//span[@id='docNo']");
    assert_string_equal(doc, "AP-2026-000123");
    free(doc);
    assert_true(page_has(p, "//div[@id='msgArea' and contains(@class,'msg-success')]"));
    assert_true(page_has(p, "boolean(//span[@class='msgText'][starts-with(., 'I020: ')])"));
    assert_false(page_has(p, "//form[@id='loginForm']"));
    assert_null(page_string(p, "//span[@id='nothing']"));
    assert_null(page_string(p, "//td[@id='vendorName']"));
    char *title = page_string(p, "//title");
    assert_string_equal(title, "ACME Financials - Document posted");
    free(title);
    page_free(p);
}

struct rows_seen {
    char cells[8][8][64];
    bool null_cell[8][8];
    size_t n;
    int stop_at; /* 1-based row at which to return 42, 0 = never */
};

static int collect_row(void *ctx, const char *const *cells, size_t n_cells)
{
    struct rows_seen *s = ctx;
    assert_true(s->n < 8);
    for (size_t c = 0; c < n_cells && c < 8; c++) {
        s->null_cell[s->n][c] = cells[c] == NULL;
        snprintf(s->cells[s->n][c], sizeof(s->cells[0][0]), "%s", cells[c] ? cells[c] : "");
    }
    s->n++;
    if (s->stop_at > 0 && (int)s->n == s->stop_at)
        return 42;
    return 0;
}

/* collect_row for any number of columns: the cells of column c must be those of column c % 8
 * of search_cols shifted by 3 (the wide call in test_page_search_rows). */
static int collect_wide(void *ctx, const char *const *cells, size_t n_cells)
{
    struct rows_seen *s = ctx;
    assert_true(s->n < 8);
    for (size_t c = 0; c < n_cells; c++) {
        size_t k = (c + 3) % 8;
        if (c < 8) {
            s->null_cell[s->n][k] = cells[c] == NULL;
            snprintf(s->cells[s->n][k], sizeof(s->cells[0][0]), "%s", cells[c] ? cells[c] : "");
        } else if (s->null_cell[s->n][k]) {
            assert_null(cells[c]);
        } else {
            assert_string_equal(cells[c], s->cells[s->n][k]);
        }
    }
    s->n++;
    return 0;
}

static const char *const search_cols[] = {"td[@class='docNo']",       "td[@class='vendorNo']",
                                          "td[@class='vendorInvNo']", "td[@class='invDate']",
                                          "td[@class='amount']",      "td[@class='currency']",
                                          "td[@class='reference']",   "td[@class='bookedOn']"};
#define ROWS "//table[@id='resultTable']//tr[@class='row']"

static void test_page_search_rows(void **state)
{
    (void)state;
    struct page *p = load("search-rows.html", BASE "/erp/ap/invoice/search?reference=AP1-X");
    struct rows_seen s;
    size_t n_rows = 99;
    char err[APBOT_ERR_LEN] = "";

    memset(&s, 0, sizeof(s));
    assert_int_equal(page_rows(p, ROWS, search_cols, 8, collect_row, &s, &n_rows, err, sizeof(err)),
                     APBOT_OK);
    assert_int_equal(n_rows, 3);
    assert_int_equal(s.n, 3);
    assert_string_equal(s.cells[0][0], "AP-2026-000123");
    assert_string_equal(s.cells[0][4], "1.234,56");
    assert_string_equal(s.cells[0][6], "AP1-ABCDEFGHIJKLMNOPQRST");
    assert_string_equal(s.cells[1][2], "INV-1b"); /* trimmed */
    assert_true(s.null_cell[2][2]);               /* empty cell: NULL */
    assert_string_equal(s.cells[2][5], "JPY");
    assert_false(page_has(p, "//p[@id='noResults']"));

    /* a callback's non-zero return stops the walk and comes back */
    memset(&s, 0, sizeof(s));
    s.stop_at = 2;
    n_rows = 99;
    assert_int_equal(page_rows(p, ROWS, search_cols, 8, collect_row, &s, &n_rows, NULL, 0), 42);
    assert_int_equal(s.n, 2);
    assert_int_equal(n_rows, 99);

    /* no callback: just count */
    assert_int_equal(page_rows(p, ROWS, search_cols, 8, NULL, NULL, &n_rows, NULL, 0), APBOT_OK);
    assert_int_equal(n_rows, 3);

    /* bad XPaths are refused with libxml2's reason */
    const char *bad_cols[] = {"td[@class='docNo'", "td"};
    err[0] = '\0';
    assert_int_equal(page_rows(p, ROWS, bad_cols, 2, collect_row, &s, &n_rows, err, sizeof(err)),
                     APBOT_E_INVAL);
    assert_non_null(strstr(err, "column"));
    err[0] = '\0';
    assert_int_equal(page_rows(p, "//tr[", search_cols, 8, NULL, NULL, &n_rows, err, sizeof(err)),
                     APBOT_E_INVAL);
    assert_true(strlen(err) > 0);
    assert_int_equal(page_rows(p, "count(//tr)", search_cols, 8, NULL, NULL, &n_rows, NULL, 0),
                     APBOT_E_INVAL);

    /* more columns than page_rows keeps on its stack (12), a bad one last; the same cells */
    const char *many[40];
    for (size_t k = 0; k < 40; k++)
        many[k] = search_cols[(k + 3) % 8];
    for (size_t n_cols = 11; n_cols <= 40; n_cols++) {
        memset(&s, 0, sizeof(s));
        assert_int_equal(page_rows(p, ROWS, many, n_cols, collect_wide, &s, &n_rows, NULL, 0),
                         APBOT_OK);
        assert_int_equal(s.n, 3);
        many[n_cols - 1] = "td[";
        assert_int_equal(page_rows(p, ROWS, many, n_cols, collect_wide, &s, &n_rows, NULL, 0),
                         APBOT_E_INVAL);
        many[n_cols - 1] = search_cols[(n_cols - 1 + 3) % 8];
    }
    page_free(p);
}

static void test_page_search_none(void **state)
{
    (void)state;
    struct page *p = load("search-none.html", BASE "/erp/ap/invoice/search?reference=AP1-X");
    size_t n_rows = 99;
    struct rows_seen s;
    memset(&s, 0, sizeof(s));
    assert_int_equal(page_rows(p, ROWS, search_cols, 8, collect_row, &s, &n_rows, NULL, 0),
                     APBOT_OK);
    assert_int_equal(n_rows, 0);
    assert_int_equal(s.n, 0);
    assert_true(page_has(p, "//p[@id='noResults']"));
    char *t = page_string(p, "//p[@id='noResults']");
    assert_string_equal(t, "No documents found.");
    free(t);
    page_free(p);
}

static void test_page_journal_next(void **state)
{
    (void)state;
    const char *url = BASE "/erp/ap/journal?date=30.11.2026&page=2";
    struct page *p = load("journal.html", url);
    const char *cols[] = {"td[@class='docNo']", "td[@class='docType']", "td[@class='amount']"};
    struct rows_seen s;
    size_t n_rows = 0;

    memset(&s, 0, sizeof(s));
    assert_int_equal(page_rows(p, "//table[@id='journalTable']//tr[@class='row']", cols, 3,
                               collect_row, &s, &n_rows, NULL, 0),
                     APBOT_OK);
    assert_int_equal(n_rows, 2);
    assert_string_equal(s.cells[1][0], "AP-2026-000052");
    assert_string_equal(s.cells[1][1], "KG");
    assert_string_equal(s.cells[1][2], "5,50");

    char *href = page_string(p, "//a[@id='nextPage']/@href");
    assert_string_equal(href, "/erp/ap/journal?date=30.11.2026&page=3"); /* &amp; decoded */
    char *next = http_resolve_url(url, href);
    assert_string_equal(next, BASE "/erp/ap/journal?date=30.11.2026&page=3");
    free(next);
    free(href);
    char *info = page_string(p, "//span[@id='pageInfo']");
    assert_string_equal(info, "Page 2 of 3");
    free(info);
    page_free(p);
}

static void test_page_garbled(void **state)
{
    (void)state;
    struct page *p = load("garbled.html", BASE "/erp/ap/invoice/post");
    struct page_form f;
    assert_false(page_has(p, "//span[@id='docNo']"));
    assert_false(page_has(p, "//div[@id='msgArea']"));
    assert_false(page_has(p, "//title"));
    assert_int_equal(page_find_form(p, "//form", &f, NULL, 0), APBOT_E_NOTFOUND);
    /* no visible text: the excerpt shows the raw reply, cleaned, so evidence says what came */
    char *e = page_excerpt(p, 1000);
    assert_non_null(e);
    assert_true(valid_utf8(e));
    assert_true(strlen(e) <= 1000);
    assert_non_null(strstr(e, "stream error 0x2f at offset 4096"));
    assert_non_null(strstr(e, "\xEF\xBF\xBD")); /* bytes that are not UTF-8 */
    free(e);
    e = page_excerpt(p, 20);
    assert_true(strlen(e) <= 20);
    assert_true(valid_utf8(e));
    free(e);
    page_free(p);

    /* an empty body and binary noise with NUL bytes are pages too, on which nothing matches */
    static const char noise[] = "\0\x01\x02\xff\xfe<\0>\x80";
    assert_int_equal(page_parse(noise, sizeof(noise) - 1, NULL, &p, NULL, 0), APBOT_OK);
    assert_false(page_has(p, "//form"));
    e = page_excerpt(p, 100);
    assert_true(valid_utf8(e));
    free(e);
    page_free(p);

    /* found by tests/fuzz (fuzz_page, corpus/page/regress-excerpt-overlong.html): a textless
     * page's raw bytes with an overlong form, a surrogate, an overlong 4-byte form and a code
     * point past U+10FFFF, each of which looks like a lead byte and continuation bytes; the
     * cleaned excerpt kept them as characters (invalid UTF-8 in evidence) */
    static const char bad[] = "<html><head><meta \xE0\x97\x8B \xED\xA0\x80 \xF0\x8F\xBF\xBF "
                              "\xF4\x90\x80\x80 \xC3\xA9></head></html>";
    assert_int_equal(page_parse(bad, sizeof(bad) - 1, NULL, &p, NULL, 0), APBOT_OK);
    e = page_excerpt(p, 200);
    assert_true(valid_utf8(e));
    assert_null(strstr(e, "\xE0\x97\x8B"));
    assert_null(strstr(e, "\xED\xA0\x80"));
    assert_null(strstr(e, "\xF0\x8F"));
    assert_null(strstr(e, "\xF4\x90"));
    assert_non_null(strstr(e, "\xC3\xA9")); /* a real character stays */
    free(e);
    page_free(p);

    assert_int_equal(page_parse("", 0, BASE "/", &p, NULL, 0), APBOT_OK);
    assert_false(page_has(p, "//body//*"));
    assert_null(page_string(p, "//title"));
    e = page_excerpt(p, 100);
    assert_string_equal(e, "");
    free(e);
    page_free(p);
    page_free(NULL);
}

static void test_page_broken_markup(void **state)
{
    (void)state;
    struct page *p = load("broken.html", BASE "/erp/ap/invoice/post");
    struct page_form f;

    char *doc = page_string(p, "//span[@id='docNo']");
    assert_string_equal(doc, "AP-2026-000777");
    free(doc);
    char *msg = page_string(p, "//div[@id='msgArea']//span[@class='msgText']");
    assert_string_equal(msg, "I020: Document AP-2026-000777 was posted.");
    free(msg);

    assert_int_equal(page_find_form(p, "//form[@id='again']", &f, NULL, 0), APBOT_OK);
    assert_string_equal(f.method, "POST");
    assert_string_equal(f.action, BASE "/erp/ap/invoice/new?from=posted");
    assert_string_equal(field(&f, "vendorNo"), "100001");
    assert_string_equal(field(&f, "formToken"), "tok-broken");
    assert_null(field(&f, "approve")); /* unchecked: not submitted ... */
    assert_int_equal(page_form_set(&f, "approve", "yes"), APBOT_OK); /* ... but the form has it */
    assert_string_equal(field(&f, "approve"), "yes");
    assert_int_equal(page_form_press(&f, "again", NULL), APBOT_OK);
    page_form_done(&f);

    char *e = page_excerpt(p, 4096);
    assert_non_null(strstr(e, "I020: Document AP-2026-000777 was posted."));
    assert_non_null(strstr(e, "Ende & aus Schluss")); /* &nbsp; runs collapse */
    assert_null(strstr(e, "document.write"));         /* script is not visible text */
    assert_null(strstr(e, "color"));                  /* nor is style */
    assert_null(strstr(e, "  "));
    free(e);
    page_free(p);
}

static void test_page_form_controls(void **state)
{
    (void)state;
    struct page *p = parse_str(
        "<html><body>"
        "<form id='f' method='get' action=''>"
        "<input name='t1' value='a b'><input name='nameless_is_skipped' disabled value='x'>"
        "<input value='no name'><input type='checkbox' name='cb' checked>"
        "<input type='radio' name='r' value='1'><input type='radio' name='r' value='2' checked>"
        "<select name='m' multiple><option selected>One</option><option>Two</option>"
        "<option selected value='3'>Three</option></select>"
        "<select name='s1'><option disabled>X</option><option>  Plain\n text </option></select>"
        "<select name='s2'><option value='a' selected>A</option><option value='b' selected>B"
        "</option></select>"
        "<select name='empty'></select>"
        "<input type='reset' name='rs'><input type='file' name='up'><input type='button' "
        "name='bt' value='x'>"
        "<button name='go' value='1'>Go</button><button type='button' name='js'>JS</button>"
        "<input type='submit' name='save' value='Save'>"
        "<input type='email' name='mail' value='a@b.c'>"
        "</form>"
        "<form id='g' action='https://other.example/x'><input name='gx'></form>"
        "<input name='outside' value='o' form='f'><input name='stray' value='s'>"
        "</body></html>",
        BASE "/erp/x?y=1");
    struct page_form f;

    assert_int_equal(page_find_form(p, "//form[@id='f']", &f, NULL, 0), APBOT_OK);
    assert_string_equal(f.method, "GET");
    assert_string_equal(f.action, BASE "/erp/x?y=1"); /* empty action: the page itself */
    assert_string_equal(field(&f, "t1"), "a b");
    assert_null(field(&f, "nameless_is_skipped")); /* disabled */
    assert_string_equal(field(&f, "cb"), "on");
    assert_string_equal(field(&f, "r"), "2");
    int c = 0;
    int at = field_at(&f, "m", &c);
    assert_int_equal(c, 2);
    assert_string_equal(f.values[at], "One");
    assert_string_equal(f.values[at + 1], "3");
    assert_string_equal(field(&f, "s1"), "Plain text"); /* first enabled option, text collapsed */
    assert_string_equal(field(&f, "s2"), "b");          /* the last selected wins */
    assert_null(field(&f, "empty"));
    assert_null(field(&f, "rs"));
    assert_null(field(&f, "up"));
    assert_null(field(&f, "bt"));
    assert_string_equal(field(&f, "mail"), "a@b.c");
    assert_string_equal(field(&f, "outside"), "o"); /* form attribute */
    assert_null(field(&f, "stray"));
    assert_null(field(&f, "gx"));
    assert_int_equal(f.n_buttons, 2);
    assert_string_equal(f.buttons[0], "go");
    assert_string_equal(f.button_values[0], "1");
    assert_string_equal(f.buttons[1], "save");

    /* set on a multi-value name leaves exactly one value, and only one the select offers;
     * an empty select takes nothing (a browser could not send it) */
    assert_int_equal(page_form_set(&f, "m", "2"), APBOT_E_DATA);
    at = field_at(&f, "m", &c);
    assert_int_equal(c, 2); /* untouched */
    assert_int_equal(page_form_set(&f, "m", "Two"), APBOT_OK);
    at = field_at(&f, "m", &c);
    assert_int_equal(c, 1);
    assert_string_equal(f.values[at], "Two");
    assert_int_equal(page_form_set(&f, "empty", "e"), APBOT_E_DATA);
    assert_null(field(&f, "empty"));
    assert_int_equal(page_form_set(&f, "s1", "X"), APBOT_E_DATA); /* disabled option */
    assert_string_equal(field(&f, "s1"), "Plain text");
    assert_int_equal(page_form_set(&f, "stray", "s"), APBOT_E_NOTFOUND);
    assert_int_equal(page_form_set(&f, "gx", "s"), APBOT_E_NOTFOUND);

    /* pressing another button replaces the first press */
    assert_int_equal(page_form_press(&f, "go", NULL), APBOT_OK);
    assert_int_equal(page_form_press(&f, "save", NULL), APBOT_OK);
    assert_null(field(&f, "go"));
    assert_string_equal(field(&f, "save"), "Save");
    page_form_done(&f);

    assert_int_equal(page_find_form(p, "//form[@id='g']", &f, NULL, 0), APBOT_OK);
    assert_string_equal(f.action, "https://other.example/x");
    assert_string_equal(f.method, "GET");
    assert_int_equal(f.n, 1);
    page_form_done(&f);

    /* the first form of a multi-node result */
    assert_int_equal(page_find_form(p, "//form", &f, NULL, 0), APBOT_OK);
    assert_string_equal(f.names[0], "t1");
    page_form_done(&f);
    page_free(p);

    /* a relative action on a page parsed without a URL cannot be resolved */
    p = parse_str("<form action='rel'><input name='a'></form>", NULL);
    assert_int_equal(page_find_form(p, "//form", &f, NULL, 0), APBOT_E_PARSE);
    page_free(p);
}

static void test_page_excerpt_bounds_utf8(void **state)
{
    (void)state;
    struct page *p = load("confirm.html", BASE "/erp/ap/invoice/check");
    char *full = page_excerpt(p, 1 << 16);
    size_t full_len = strlen(full);

    assert_true(valid_utf8(full));
    assert_true(strncmp(full, "ACME Financials - Check vendor invoice", 38) == 0);
    assert_non_null(strstr(full, "I010: Please check the document and press Post."));
    assert_non_null(strstr(full, "Müller & Söhne GmbH"));
    assert_non_null(strstr(full, "Vendor name Müller")); /* cells are separated */
    assert_null(strstr(full, "tok-fresh-91d2"));         /* attribute values are not text */
    assert_null(strchr(full, '\n'));
    assert_true(full[0] != ' ' && full[full_len - 1] != ' ');

    /* every bound gives a UTF-8-valid prefix of the full text, never longer than the bound */
    for (size_t max = 0; max <= full_len + 2; max++) {
        char *e = page_excerpt(p, max);
        size_t n = strlen(e);
        assert_true(n <= max);
        assert_true(valid_utf8(e));
        assert_memory_equal(e, full, n);
        if (max >= full_len)
            assert_int_equal(n, full_len);
        else
            assert_true(n + 5 > max); /* at most a space and a partial character are dropped */
        free(e);
    }
    free(full);

    char *e = page_excerpt(NULL, 10);
    assert_string_equal(e, "");
    free(e);
    page_free(p);
}

static void *parse_worker(void *arg)
{
    const char *body = arg;
    for (int i = 0; i < 50; i++) {
        struct page *p = NULL;
        struct page_form f;
        if (page_parse(body, strlen(body), BASE "/erp/ap/invoice/check", &p, NULL, 0))
            return (void *)1;
        if (page_find_form(p, "//form[@id='apConfirm']", &f, NULL, 0) || f.n != 12)
            return (void *)2;
        page_form_done(&f);
        char *s = page_string(p, "//td[@id='vendorName']");
        bool ok = s && strcmp(s, "Müller & Söhne GmbH") == 0;
        free(s);
        if (!ok || page_has(p, "//x["))
            return (void *)3;
        char *e = page_excerpt(p, 200);
        free(e);
        page_free(p);
    }
    return NULL;
}

static void test_page_threads(void **state)
{
    (void)state;
    size_t len;
    char *body = canned_page_read("confirm.html", &len);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, parse_worker, body), 0);
    for (int i = 0; i < 4; i++) {
        void *r = (void *)9;
        assert_int_equal(pthread_join(t[i], &r), 0);
        assert_null(r);
    }
    free(body);
}

/* ---- buttons by name and value ---- */

static const char classic_form[] =
    "<html><body><form name='invoice' method='post' action='/ap.pl'>"
    "<input type='hidden' name='form_id' value='f1'>"
    "<button name='action' value='save'>Save</button>" /* top of the form ... */
    "<input name='vendor' value=''>"
    "<textarea name='memo'>m</textarea>"
    "<select name='currency'><option value='EUR' selected>Euro</option>"
    "<option value='USD'>US dollar</option><option label='Swiss franc' value='CHF'>CHF</option>"
    "</select>"
    "<select name='account_1'><option value=''>-- choose --</option>"
    "<option>5700--Office Supplies</option><option>5710--Office Equipment</option>"
    "<option>5800--Travel</option><option disabled>6000--Rent</option>"
    "<optgroup label='old' disabled><option>6100--Old</option></optgroup>"
    "<option value='5900--Misc'>5900--Misc</option><option>5900--Misc</option>"
    "<option value='A'>Dup label</option><option value='B'>Dup  label</option>"
    "</select>"
    "<input name='amount_1' value=''>"
    "<button name='action' value='update'>Update</button>"
    "<button name='action' value='save' type='submit'>Save</button>" /* ... and bottom */
    "<button name='action' value='approve' type='bogus'>Approve</button>"
    "<button name='action' value='js' type='button'>JS</button>"
    "<button name='action' value='clear' type='reset'>Clear</button>"
    "<button name='action' value='off' disabled>Off</button>"
    "<button name='nav'>Next</button>"
    "<input type='image' name='go' value='g' src='go.png'>"
    "<input type='submit' name='other' value='Other'>"
    "</form></body></html>";

/* The submitted fields as "n=v&n=v" (a small buffer is enough for these forms). */
static void fields_str(const struct page_form *f, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < f->n; i++)
        n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "%s%s=%s", i ? "&" : "", f->names[i],
                              f->values[i]);
    assert_true(n < cap);
}

static void test_page_press_by_name_and_value(void **state)
{
    (void)state;
    static const struct {
        const char *name, *value;
        int rc;
        const char *fields; /* after the press (a failed press changes nothing) */
    } cases[] = {
        {"action", "save", APBOT_OK, "P&action=save"}, /* top and bottom: one button */
        {"action", "update", APBOT_OK, "P&action=update"},
        {"action", "approve", APBOT_OK, "P&action=approve"},    /* an unknown type submits */
        {"action", NULL, APBOT_E_CONFLICT, "P&action=approve"}, /* never "the first one" */
        {"action", "delete", APBOT_E_NOTFOUND, "P&action=approve"},
        {"action", "js", APBOT_E_NOTFOUND, "P&action=approve"},    /* type=button */
        {"action", "clear", APBOT_E_NOTFOUND, "P&action=approve"}, /* type=reset */
        {"action", "off", APBOT_E_NOTFOUND, "P&action=approve"},   /* disabled */
        {"action", "Save", APBOT_E_NOTFOUND, "P&action=approve"},  /* values are exact */
        {"nav", NULL, APBOT_OK, "P&nav="},                         /* by name only */
        {"go", NULL, APBOT_OK, "P&go.x=0&go.y=0"},                 /* image: a click */
        {"go", "g", APBOT_OK, "P&go.x=0&go.y=0"},
        {"other", "Other", APBOT_OK, "P&other=Other"},
        {"vendor", NULL, APBOT_E_NOTFOUND, "P&other=Other"}, /* a field is no button */
        {"nothing", NULL, APBOT_E_NOTFOUND, "P&other=Other"},
    };
    static const char prefix[] = "form_id=f1&vendor=&memo=m&currency=EUR&account_1=&amount_1=";
    struct page *p = parse_str(classic_form, BASE "/ap.pl?action=add");
    struct page_form f;
    char got[1024], want[1024];

    assert_int_equal(page_find_form(p, "//form[@name='invoice']", &f, NULL, 0), APBOT_OK);
    assert_int_equal(f.n_buttons, 7); /* save twice, update, approve, nav, go, other */
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = page_form_press(&f, cases[i].name, cases[i].value);
        if (rc != cases[i].rc)
            fail_msg("case %zu (%s=%s): rc %d, want %d", i, cases[i].name,
                     cases[i].value ? cases[i].value : "(any)", rc, cases[i].rc);
        fields_str(&f, got, sizeof(got));
        snprintf(want, sizeof(want), "%s%s", prefix, cases[i].fields + 1);
        if (strcmp(got, want) != 0)
            fail_msg("case %zu: fields %s, want %s", i, got, want);
    }
    assert_int_equal(page_form_press(&f, NULL, "save"), APBOT_E_INVAL);
    page_form_done(&f);
    page_free(p);
}

/* ---- select options ---- */

/* Found while writing tests/fuzz/fuzz_page's select property (corpus/page/
 * regress-optgroup-disabled.html): a selected option inside a disabled optgroup was submitted
 * by default, though a browser submits nothing for it and page_form_set refuses its value. */
static void test_page_select_disabled_group_not_submitted(void **state)
{
    (void)state;
    static const char html[] =
        "<form name=f method=post action=/x>"
        "<select name=a><optgroup disabled><option selected>old</option></optgroup>"
        "<option>new</option></select>"
        "<select name=b><option disabled selected>gone</option><option>kept</option></select>"
        "<select name=c><optgroup label=g><option selected>ok</option></optgroup></select>"
        "</form>";
    struct page *p = parse_str(html, BASE "/");
    struct page_form f;
    assert_int_equal(page_find_form(p, "//form", &f, NULL, 0), APBOT_OK);
    assert_null(field(&f, "a")); /* nothing, as a browser: never the disabled choice */
    assert_null(field(&f, "b"));
    assert_string_equal(field(&f, "c"), "ok");
    assert_true(page_form_has(&f, "a"));
    assert_int_equal(page_form_set(&f, "a", "old"), APBOT_E_DATA);
    assert_int_equal(page_form_set(&f, "a", "new"), APBOT_OK);
    assert_string_equal(field(&f, "a"), "new");
    page_form_done(&f);
    page_free(p);
}

/* Found while writing tests/fuzz/fuzz_page's radio property (corpus/page/
 * regress-radio-group.html): two checked radios of one group were both submitted; a browser
 * submits the last checked one only (checking a radio unchecks the rest of its group). */
static void test_page_radio_group_one_value(void **state)
{
    (void)state;
    static const char html[] = "<form method=post action=/x>"
                               "<input type=radio name=r value=a checked>"
                               "<input type=radio name=r value=b checked>"
                               "<input type=RADIO name=r value=c>"
                               "<input type=radio name=s value=1 checked>"
                               "<input type=checkbox name=c value=1 checked>"
                               "<input type=checkbox name=c value=2 checked>"
                               "</form>";
    struct page *p = parse_str(html, BASE "/");
    struct page_form f;
    size_t r = 0, c = 0;
    assert_int_equal(page_find_form(p, "//form", &f, NULL, 0), APBOT_OK);
    for (size_t i = 0; i < f.n; i++) {
        r += strcmp(f.names[i], "r") == 0;
        c += strcmp(f.names[i], "c") == 0;
    }
    assert_int_equal(r, 1);
    assert_string_equal(field(&f, "r"), "b");
    assert_string_equal(field(&f, "s"), "1");
    assert_int_equal(c, 2); /* checkboxes of one name all go */
    page_form_done(&f);
    page_free(p);
}

/* Found while writing tests/fuzz/fuzz_page's fieldset property (corpus/page/
 * regress-fieldset-disabled.html): controls in a <fieldset disabled> were submitted and could
 * be set, pressed or chosen, though a browser treats them as disabled (all but those in the
 * fieldset's first legend): the bot sent fields a person's browser never sends. */
static void test_page_disabled_fieldset(void **state)
{
    (void)state;
    static const char html[] = "<form method=post action=/x>"
                               "<fieldset disabled><input name=a value=1>"
                               "<select name=s><option>x</option></select>"
                               "<legend><input name=l value=2></legend>"
                               "<legend><input name=l2 value=3></legend>"
                               "<button name=go value=1>Go</button>"
                               "<fieldset><input name=inner value=4></fieldset></fieldset>"
                               "<fieldset><input name=b value=5></fieldset>"
                               "<button name=go value=2>Go</button>"
                               "</form>";
    struct page *p = parse_str(html, BASE "/");
    struct page_form f;
    assert_int_equal(page_find_form(p, "//form", &f, NULL, 0), APBOT_OK);
    assert_null(field(&f, "a"));
    assert_null(field(&f, "s"));
    assert_null(field(&f, "l2"));    /* only the first legend is outside the disabling */
    assert_null(field(&f, "inner")); /* a nested fieldset inherits it */
    assert_string_equal(field(&f, "l"), "2");
    assert_string_equal(field(&f, "b"), "5");
    assert_false(page_form_has(&f, "a"));
    assert_int_equal(page_form_set(&f, "a", "9"), APBOT_E_NOTFOUND);
    assert_int_equal(f.n_buttons, 1); /* the disabled one cannot be pressed */
    assert_int_equal(page_form_press(&f, "go", NULL), APBOT_OK);
    assert_string_equal(field(&f, "go"), "2");
    page_form_done(&f);
    page_free(p);
}

static void test_page_select_options(void **state)
{
    (void)state;
    static const struct {
        const char *name, *text;
        enum page_option_mode mode;
        int rc;
        const char *value, *label; /* the chosen option */
    } cases[] = {
        {"account_1", "5700--", PAGE_OPTION_LABEL_PREFIX, APBOT_OK, "5700--Office Supplies",
         "5700--Office Supplies"},
        {"account_1", "57", PAGE_OPTION_LABEL_PREFIX, APBOT_E_CONFLICT, NULL, NULL},
        {"account_1", "5700--Office Supplies", PAGE_OPTION_VALUE, APBOT_OK, "5700--Office Supplies",
         "5700--Office Supplies"},
        {"account_1", "5700", PAGE_OPTION_VALUE, APBOT_E_DATA, NULL, NULL},
        {"account_1", " 5710--Office \t Equipment ", PAGE_OPTION_LABEL, APBOT_OK,
         "5710--Office Equipment", "5710--Office Equipment"},
        {"account_1", "5710--Office", PAGE_OPTION_LABEL, APBOT_E_DATA, NULL, NULL},
        {"account_1", "6000--", PAGE_OPTION_LABEL_PREFIX, APBOT_E_DATA, NULL, NULL}, /* disabled */
        {"account_1", "6100--Old", PAGE_OPTION_LABEL, APBOT_E_DATA, NULL, NULL},     /* optgroup */
        {"account_1", "5900--", PAGE_OPTION_LABEL_PREFIX, APBOT_OK, "5900--Misc", "5900--Misc"},
        {"account_1", "Dup label", PAGE_OPTION_LABEL, APBOT_E_CONFLICT, NULL, NULL},
        {"account_1", "", PAGE_OPTION_LABEL_PREFIX, APBOT_E_DATA, NULL, NULL},
        {"account_1", "", PAGE_OPTION_VALUE, APBOT_OK, "", "-- choose --"},
        {"account_1", "9999--", PAGE_OPTION_LABEL_PREFIX, APBOT_E_DATA, NULL, NULL},
        {"currency", "Euro", PAGE_OPTION_LABEL, APBOT_OK, "EUR", "Euro"},
        {"currency", "EUR", PAGE_OPTION_LABEL, APBOT_E_DATA, NULL, NULL},
        {"currency", "USD", PAGE_OPTION_VALUE, APBOT_OK, "USD", "US dollar"},
        {"currency", "Swiss franc", PAGE_OPTION_LABEL, APBOT_OK, "CHF", "Swiss franc"},
        {"currency", "CHF", PAGE_OPTION_LABEL, APBOT_E_DATA, NULL, NULL}, /* label attribute */
        {"currency", "usd", PAGE_OPTION_VALUE, APBOT_E_DATA, NULL, NULL},
        {"memo", "m", PAGE_OPTION_VALUE, APBOT_E_INVAL, NULL, NULL}, /* not a select */
        {"vendor", "x", PAGE_OPTION_LABEL, APBOT_E_INVAL, NULL, NULL},
        {"account_2", "5700--", PAGE_OPTION_LABEL_PREFIX, APBOT_E_NOTFOUND, NULL, NULL},
        {"currency", "EUR", (enum page_option_mode)9, APBOT_E_INVAL, NULL, NULL},
    };
    struct page *p = parse_str(classic_form, BASE "/ap.pl?action=add");
    struct page_form f;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(page_find_form(p, "//form[@name='invoice']", &f, NULL, 0), APBOT_OK);
        const char *before = field(&f, cases[i].name);
        char *was = before ? strdup(before) : NULL;
        const struct page_option *chosen = (const struct page_option *)&f;
        int rc = page_form_select(&f, cases[i].name, cases[i].text, cases[i].mode, &chosen);
        if (rc != cases[i].rc)
            fail_msg("case %zu (%s <- '%s'): rc %d, want %d", i, cases[i].name, cases[i].text, rc,
                     cases[i].rc);
        if (rc == APBOT_OK) {
            assert_string_equal(chosen->value, cases[i].value);
            assert_string_equal(chosen->label, cases[i].label);
            assert_string_equal(field(&f, cases[i].name), cases[i].value);
        } else {
            assert_ptr_equal(chosen, (const struct page_option *)&f); /* untouched */
            if (was)
                assert_string_equal(field(&f, cases[i].name), was); /* no fallback */
        }
        free(was);
        page_form_done(&f);
    }

    /* a plain set must name an offered value too: never another option */
    assert_int_equal(page_find_form(p, "//form[@name='invoice']", &f, NULL, 0), APBOT_OK);
    assert_int_equal(page_form_set(&f, "currency", "Euro"), APBOT_E_DATA);
    assert_string_equal(field(&f, "currency"), "EUR");
    assert_int_equal(page_form_set(&f, "currency", "GBP"), APBOT_E_DATA);
    assert_int_equal(page_form_set(&f, "account_1", "6000--Rent"), APBOT_E_DATA); /* disabled */
    assert_int_equal(page_form_set(&f, "account_1", "5800--Travel"), APBOT_OK);
    assert_string_equal(field(&f, "account_1"), "5800--Travel");
    assert_int_equal(page_form_set(&f, "currency", "USD"), APBOT_OK);
    assert_string_equal(field(&f, "currency"), "USD");
    assert_int_equal(page_form_set(&f, "vendor", "anything"), APBOT_OK); /* not a select */
    /* what the form offers is there for traces */
    assert_int_equal(f.n_selects, 2);
    assert_string_equal(f.selects[0].name, "currency");
    assert_int_equal(f.selects[0].n_options, 3);
    assert_string_equal(f.selects[0].options[2].label, "Swiss franc");
    assert_int_equal(f.selects[1].n_options, 10);
    assert_true(f.selects[1].options[4].disabled);
    assert_true(f.selects[1].options[5].disabled);
    assert_int_equal(page_form_select(NULL, "a", "b", PAGE_OPTION_VALUE, NULL), APBOT_E_INVAL);
    assert_int_equal(page_form_select(&f, "currency", NULL, PAGE_OPTION_VALUE, NULL),
                     APBOT_E_INVAL);
    assert_int_equal(page_form_select(&f, "currency", "EUR", PAGE_OPTION_VALUE, NULL), APBOT_OK);
    page_form_done(&f);
    page_free(p);
}

static void test_page_form_has_and_add(void **state)
{
    (void)state;
    struct page *p = parse_str(classic_form, BASE "/ap.pl?action=add");
    struct page_form f;
    char got[1024];

    assert_int_equal(page_find_form(p, "//form[@name='invoice']", &f, NULL, 0), APBOT_OK);
    assert_true(page_form_has(&f, "amount_1"));
    assert_true(page_form_has(&f, "account_1"));
    assert_true(page_form_has(&f, "form_id"));
    assert_false(page_form_has(&f, "action")); /* a button is not a control to fill */
    assert_false(page_form_has(&f, "amount_2"));
    assert_int_equal(page_form_set(&f, "amount_2", "1.00"), APBOT_E_NOTFOUND);

    /* the line the ERP's JavaScript would add */
    assert_int_equal(page_form_add(&f, "amount_2", "12.50"), APBOT_OK);
    assert_true(page_form_has(&f, "amount_2"));
    assert_int_equal(page_form_add(&f, "amount_2", "1"), APBOT_E_CONFLICT);
    assert_int_equal(page_form_add(&f, "amount_1", "1"), APBOT_E_CONFLICT);
    assert_int_equal(page_form_set(&f, "amount_2", "13.00"), APBOT_OK);
    assert_int_equal(page_form_add(&f, "", "1"), APBOT_E_INVAL);
    assert_int_equal(page_form_add(&f, "x", NULL), APBOT_E_INVAL);
    assert_int_equal(page_form_add(NULL, "x", "1"), APBOT_E_INVAL);
    assert_false(page_form_has(NULL, "x"));
    assert_int_equal(page_form_press(&f, "action", "save"), APBOT_OK);
    fields_str(&f, got, sizeof(got));
    assert_string_equal(got, "form_id=f1&vendor=&memo=m&currency=EUR&account_1=&amount_1="
                             "&amount_2=13.00&action=save");
    page_form_done(&f);
    page_free(p);
}

/* ---- what rules see ---- */

/* page_rule_text on `in` must give `want`, where '~' in want stands for a blanked byte. */
static void check_rule_text(size_t i, const char *in, const char *want)
{
    size_t n = strlen(in);
    if (strlen(want) != n)
        fail_msg("case %zu: the table's want has %zu bytes, in %zu", i, strlen(want), n);
    char *got = page_rule_text(in, n);
    assert_non_null(got);
    char *exp = strdup(want);
    for (char *c = exp; *c; c++)
        if (*c == '~')
            *c = ' ';
    if (memcmp(got, exp, n + 1) != 0)
        fail_msg("case %zu:\n  in:   [%s]\n  got:  [%s]\n  want: [%s]", i, in, got, exp);
    free(exp);
    free(got);
}

static void test_page_rule_text_table(void **state)
{
    (void)state;
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"<p class=\"info\">ok</p>", "<p class=\"info\">ok</p>"},
        {"", ""},
        {"plain text, no markup", "plain text, no markup"},
        /* comments, whole */
        {"a<!-- I020 -->b", "a~~~~~~~~~~~~~b"},
        {"a<!-- x -- y --!>b", "a~~~~~~~~~~~~~~~~b"},
        {"a<!---->b<!-->c<!--->d", "a~~~~~~~b~~~~~c~~~~~~d"},
        {"a<!-- never closed <p>I020</p>", "a~~~~~~~~~~~~~~~~~~~~~~~~~~~~~"},
        {"a<!-x->b", "a~~~~~~b"}, /* <!...>: a bogus comment */
        {"<?xml version=\"1\"?>x", "~~~~~~~~~~~~~~~~~~~x"},
        {"<![CDATA[y]]>z", "~~~~~~~~~~~~~z"},
        {"<!DOCTYPE html>x", "<!DOCTYPE html>x"},
        {"a</ 3>b</>c", "a~~~~~b</>c"},
        /* attribute values: blanked unless id, class, name, type, role */
        {"<input value=\"I020 done\" name=\"n\">", "<input value=\"~~~~~~~~~\" name=\"n\">"},
        {"<div id=\"x\" CLASS='y' data-x=\"z\" role=r title=t>",
         "<div id=\"x\" CLASS='y' data-x=\"~\" role=r title=~>"},
        {"<img alt=\"a > b\" src=x.png>text", "<img alt=\"~~~~~\" src=~~~~~>text"},
        {"<a href='/x?a=\"1\"'>l</a>", "<a href='~~~~~~~~'>l</a>"},
        {"<a title = \"t\" x=>y", "<a title = \"~\" x=>y"},
        {"<input value=abc def>", "<input value=~~~ def>"},
        {"<input disabled value=\"v\"/>", "<input disabled value=\"~\"/>"},
        {"<input value=\"v\"name=\"n\">", "<input value=\"~\"name=\"n\">"},
        {"<p =\"x\">", "<p =\"x\">"}, /* "=" is an attribute name here, not a value */
        {"<input value=\"never closed <p>I020", "<input value=\"~~~~~~~~~~~~~~~~~~~~"},
        {"<input value=\"\xc3\xbc\xe2\x82\xac\">", "<input value=\"~~~~~\">"},
        {"</p title=\"x\">", "</p title=\"~\">"},
        {"<p title=\"a\" id=\"b\"", "<p title=\"~\" id=\"b\""},
        {"a < b <3 <", "a < b <3 <"},
        /* script, style and the other hidden raw texts: contents */
        {"<script>var s='<span>I020</span>';</script>ok",
         "<script>~~~~~~~~~~~~~~~~~~~~~~~~~~</script>ok"},
        {"<SCRIPT type=\"text/javascript\">x</ScRiPt >ok",
         "<SCRIPT type=\"text/javascript\">~</ScRiPt >ok"},
        {"<script>a</scriptx>b</script>c", "<script>~~~~~~~~~~~~</script>c"},
        {"<script>never closed", "<script>~~~~~~~~~~~~"},
        {"<script src=\"/a.js\"></script>x", "<script src=\"~~~~~\"></script>x"},
        /* a browser keeps "<!--<script></script>..." inside the script: so do rules */
        {"<script>s='<!--<script></script><b>I020</b>';</script><p>ok</p>",
         "<script>~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~</script><p>ok</p>"},
        {"<script><!-- x --></script>y", "<script>~~~~~~~~~~</script>y"},
        {"<script><!-- x </script>y", "<script>~~~~~~~</script>y"},
        {"<style>p{color:red}</style>x", "<style>~~~~~~~~~~~~</style>x"},
        {"<textarea name=memo>I020: Document AP-1</textarea>x",
         "<textarea name=memo>~~~~~~~~~~~~~~~~~~~</textarea>x"},
        {"<noscript>n</noscript><iframe>i</iframe>", "<noscript>~</noscript><iframe>~</iframe>"},
        /* shown raw text: kept, and no markup inside it */
        {"<title>A <!-- b</title><p>c</p>", "<title>A <!-- b</title><p>c</p>"},
        {"<xmp><b title=x></xmp>", "<xmp><b title=x></xmp>"},
        {"<plaintext><!-- a", "<plaintext><!-- a"},
        /* every HTML white space ends a name; a name longer than any listed is none of them */
        {"<input\fvalue=\"v\"\tname=n\rtype=t\nalt=a>",
         "<input\fvalue=\"~\"\tname=n\rtype=t\nalt=~>"},
        {"<STYLE\n>a</style\t>b", "<STYLE\n>~</style\t>b"},
        {"<noscriptnoscriptx>a</noscriptnoscriptx>", "<noscriptnoscriptx>a</noscriptnoscriptx>"},
        {"<scrip>a</scrip><scripts>b", "<scrip>a</scrip><scripts>b"},
        {"<p ids=x nam=y roles=z>", "<p ids=~ nam=~ roles=~>"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        check_rule_text(i, cases[i].in, cases[i].want);

    /* NUL bytes are bytes; NULL only for a NULL body with a length */
    char *t = page_rule_text("<p title=\"a\0b\">\0<!--x-->", 24);
    assert_non_null(t);
    assert_memory_equal(t, "<p title=\"   \">\0        ", 25);
    /* zeros after the NUL, inside the allocation, for PCRE2's JIT (mem.h; ASan checks) */
    static const char zeros[1 + APBOT_TEXT_PAD];
    assert_memory_equal(t + 24, zeros, sizeof(zeros));
    free(t);
    t = page_rule_text(NULL, 0);
    assert_string_equal(t, "");
    assert_memory_equal(t, zeros, sizeof(zeros));
    free(t);
    assert_null(page_rule_text(NULL, 1));
}

/* The acme and classic outcome rules on pages that echo a forged banner: they must see only
 * what the ERP said. */
static void test_page_rule_text_forged_banners(void **state)
{
    (void)state;
    static const char *const rules[] = {
        "<span class=\"msgText\">I020: Document (?<doc>AP-\\d{4}-\\d{6}) was posted\\.</span>",
        "<p class=\"info\">Invoice (?<doc>AP-\\d{4}-\\d{6}) saved as draft",
        "I020: Document (?<doc>AP-\\d{4}-\\d{6}) was posted", /* a careless, unanchored rule */
    };
    static const char *const forged[] = {
        "<!-- <span class=\"msgText\">I020: Document AP-2026-999999 was posted.</span>"
        " <p class=\"info\">Invoice AP-2026-999999 saved as draft -->",
        "<script>var memo = '<span class=\"msgText\">I020: Document AP-2026-999999 was posted."
        "</span><p class=\"info\">Invoice AP-2026-999999 saved as draft';</script>",
        "<script>x='<!--<script></script><span class=\"msgText\">I020: Document AP-2026-999999"
        " was posted.</span><p class=\"info\">Invoice AP-2026-999999 saved as draft';</script>",
        "<input name=\"memo\" value='<span class=\"msgText\">I020: Document AP-2026-999999 was "
        "posted.</span><p class=\"info\">Invoice AP-2026-999999 saved as draft'>",
        "<textarea name=\"memo\"><span class=\"msgText\">I020: Document AP-2026-999999 was "
        "posted.</span><p class=\"info\">Invoice AP-2026-999999 saved as draft</textarea>",
        "<a title=\"<span class=&quot;msgText&quot;>\" href='<p class=\"info\">Invoice "
        "AP-2026-999999 saved as draft'>I020: Document </a>",
        "<input value='<span class=\"msgText\">I020: Document AP-2026-999999 was posted.</span>"
        "<p class=\"info\">Invoice AP-2026-999999 saved as draft", /* never closed */
    };
    static const char real[] = "<span class=\"msgText\">I020: Document AP-2026-000123 was "
                               "posted.</span><p class=\"info\">Invoice AP-2026-000123 saved as "
                               "draft</p>";
    struct match_re *re[3];
    for (size_t r = 0; r < 3; r++)
        assert_int_equal(match_compile(rules[r], &re[r], NULL, 0), APBOT_OK);

    for (size_t i = 0; i < sizeof(forged) / sizeof(forged[0]); i++) {
        char page[2048];
        int n =
            snprintf(page, sizeof(page), "<html><body><h1>Entry</h1>%s</body></html>", forged[i]);
        char *seen = page_rule_text(page, (size_t)n);
        size_t raw_hits = 0;
        for (size_t r = 0; r < 3; r++) {
            struct match_budget b;
            match_budget_init(&b, match_budget_for((size_t)n), NULL);
            raw_hits += match_run(re[r], page, (size_t)n, &b, NULL) == MATCH_FOUND;
            match_budget_init(&b, match_budget_for((size_t)n), NULL);
            if (match_run(re[r], seen, (size_t)n, &b, NULL) != MATCH_NONE)
                fail_msg("forgery %zu passes rule %zu: [%s]", i, r, seen);
        }
        if (raw_hits == 0) /* the forgery must work on the raw page, else it proves nothing */
            fail_msg("forgery %zu fools no rule even raw", i);
        free(seen);
    }
    /* the ERP's own banner still counts, with its document number */
    char *seen = page_rule_text(real, sizeof(real) - 1);
    for (size_t r = 0; r < 3; r++) {
        struct match_budget b;
        struct match_result *m = NULL;
        match_budget_init(&b, match_budget_for(sizeof(real)), NULL);
        assert_int_equal(match_run(re[r], seen, sizeof(real) - 1, &b, &m), MATCH_FOUND);
        char *doc = match_group(m, "doc");
        assert_string_equal(doc, "AP-2026-000123");
        free(doc);
        match_result_free(m);
        match_free(re[r]);
    }
    free(seen);
}

/* 2 MB of each hostile construct: one pass each, the right bytes blanked. A tokenizer that
 * rescans would take minutes here (the test has no clock: ctest's timeout is the guard). */
static void test_page_rule_text_2mb(void **state)
{
    (void)state;
    static const struct {
        const char *head, *unit, *tail;
        bool blanked; /* the repeated part must come out blanked (else unchanged) */
    } cases[] = {
        {"<!--", "I020 x ", "", true},                   /* an unterminated comment */
        {"<input value=\"", "I020 > ", "", true},        /* an unterminated value */
        {"<script>", "</scrip <!-- ", "", true},         /* script that never ends */
        {"<script><!--", "<script></script>", "", true}, /* double-escaped, never ends */
        {"<style>", "</styl ", "</style>", true},        /* near-miss end tags */
        {"<p>", "<<<<<<<<", "</p>", false},              /* lone '<' are text */
        {"<p>", "a <b =c d e f g> ", "</p>", false},     /* many attributes without values */
        {"<p>", "<!--x-->", "", true},                   /* many tiny comments */
        {"<p>", "<!-->", "", true},
        {"<p>", "</ ", "", false},       /* "</ " to a '>' that never comes */
        {"<title>", "<!-- ", "", false}, /* raw title: no comment inside */
    };
    const size_t size = (size_t)2 << 20;
    char *page = malloc(size + 64);
    assert_non_null(page);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t hl = strlen(cases[i].head), ul = strlen(cases[i].unit), tl = strlen(cases[i].tail);
        size_t n = 0;
        memcpy(page, cases[i].head, hl);
        n = hl;
        while (n + ul + tl <= size) {
            memcpy(page + n, cases[i].unit, ul);
            n += ul;
        }
        size_t body_end = n;
        memcpy(page + n, cases[i].tail, tl);
        n += tl;
        char *seen = page_rule_text(page, n);
        assert_non_null(seen);
        assert_int_equal(seen[n], '\0');
        if (cases[i].blanked) {
            for (size_t k = hl + ul; k < body_end; k += 4099)
                if (seen[k] != ' ')
                    fail_msg("case %zu: byte %zu not blanked", i, k);
        } else if (i != 9) {
            assert_memory_equal(seen + hl, page + hl, body_end - hl);
        }
        free(seen);
    }
    free(page);
}

/* ---- the slow definitions the fast code of page.c must equal, byte for byte ---- */

/* Pages for the comparisons: every element name page.c classifies (and near misses, and upper
 * case), every kind of white space, no-break spaces raw and as references, characters of two
 * to four bytes, control bytes, bytes that are not UTF-8, comments, scripts, attributes
 * (quoted, unquoted, none, with '>' inside), forms with every kind of control; plain pages
 * (the fast path's), sloppy ones (libxml2's), textless ones and some binary. */
static uint64_t gen_rng = 0x2545F4914F6CDD1Dull;

static uint32_t gen_rnd(uint32_t n)
{
    return xorshift_below(&gen_rng, n);
}

#define GEN_PICK(list) list[gen_rnd(sizeof(list) / sizeof(list[0]))]

struct gen_page {
    char buf[16384];
    size_t len;
};

static void gen_put(struct gen_page *g, const char *s)
{
    size_t n = strlen(s);
    if (g->len + n < sizeof(g->buf)) {
        memcpy(g->buf + g->len, s, n);
        g->len += n;
    }
    g->buf[g->len] = '\0';
}

static const char *const gen_names[] = {
    "a",        "abbr",   "b",        "bdi",      "bdo",      "cite",    "code",      "em",
    "font",     "i",      "kbd",      "label",    "mark",     "q",       "s",         "samp",
    "small",    "span",   "strong",   "sub",      "sup",      "tt",      "u",         "var",
    "nobr",     "script", "style",    "template", "select",   "head",    "title",     "div",
    "p",        "td",     "tr",       "table",    "h1",       "li",      "ul",        "form",
    "option",   "input",  "br",       "SPAN",     "Strong",   "TITLE",   "sCrIpT",    "Select",
    "A",        "EM",     "NoBr",     "bd",       "spa",      "strongx", "templates", "script1",
    "fieldset", "legend", "textarea", "button",   "optgroup", "center",  "x-widget",  "o:p",
};
static const char *const gen_texts[] = {
    "Invoice",
    " ",
    "  ",
    "\n",
    "\t",
    "\r\n",
    "\v",
    "\f",
    "word",
    "AP-2026-000123",
    "3.912,36",
    "&nbsp;",
    "&#160;",
    "\xc2\xa0",
    "a\xc2\xa0"
    "b",
    "caf\xc3\xa9",
    "\xe2\x82\xac",
    "\xf0\x9f\x98\x80",
    "\x01",
    "\x7f",
    "\x1f",
    "\xc2",
    "\xff",
    "\x80",
    "\xed\xa0\x80",
    "&amp;",
    "&lt;b&gt;",
    "&#xD800;",
    "&#128512;",
    "x\xe2\x80\x83"
    "y",
    "M\xc3\xbc"
    "ller & S\xc3\xb6"
    "hne",
    "",
};
static const char *const gen_attrs[] = {
    " id=\"x\"",        " class=row",   " name=\"n\"",
    " value=\"v 1\"",   " type=hidden", " type=checkbox",
    " type=radio",      " type=submit", " type=image",
    " type=reset",      " type=button", " type=file",
    " type=TEXT",       " checked",     " selected",
    " disabled",        " multiple",    " label=\"L\"",
    " title=\"a > b\"", " value=''",    " name=''",
    " form=f1",         " form=f2",     " value=\"x\"",
    " name=\"a\"",      " name=\"b\"",  " action=\"/erp/post\"",
    " method=post",     " id=f1",
};

static void gen_content(struct gen_page *g, int depth)
{
    int n = 1 + (int)gen_rnd(5);
    for (int i = 0; i < n; i++) {
        uint32_t r = gen_rnd(12);
        if (r < 5 || depth > 6) {
            gen_put(g, GEN_PICK(gen_texts));
        } else if (r < 10) {
            const char *name = GEN_PICK(gen_names);
            gen_put(g, "<");
            gen_put(g, name);
            for (int a = (int)gen_rnd(4); a > 0; a--)
                gen_put(g, GEN_PICK(gen_attrs));
            gen_put(g, ">");
            gen_content(g, depth + 1);
            if (gen_rnd(6)) {
                gen_put(g, "</");
                gen_put(g, name);
                gen_put(g, ">");
            }
        } else if (r < 11) {
            gen_put(g, GEN_PICK(((const char *const[]){"<!-- c -->", "<br>", "<hr/>",
                                                       "<script>x<y</script>", "<style>p{}</style>",
                                                       "<img alt=x>", "<!--x"})));
        } else {
            gen_put(g, GEN_PICK(((const char *const[]){
                           "<select name=s><option>a<option selected>b</select>",
                           "<select name=m multiple><optgroup disabled><option selected>c"
                           "</optgroup><option value=d selected>D</select>",
                           "<fieldset disabled><legend><input name=l></legend><input name=f>"
                           "</fieldset>",
                           "<textarea name=t>\nx</textarea>", "<button name=go>Go</button>",
                           "<input type=radio name=r value=1 checked><input type=radio name=r "
                           "value=2 checked>"})));
        }
    }
}

/* One page into g: plain (html, head, body), sloppy, textless or binary. */
static void gen_page(struct gen_page *g)
{
    g->len = 0;
    g->buf[0] = '\0';
    switch (gen_rnd(10)) {
    case 0: /* bytes, some of them NUL */
        for (int i = (int)gen_rnd(300); i > 0; i--) {
            char c[2] = {(char)gen_rnd(256), '\0'};
            if (c[0])
                gen_put(g, c);
            else if (g->len + 1 < sizeof(g->buf))
                g->buf[g->len++] = '\0';
        }
        return;
    case 1: /* tags only */
        gen_put(g, "<html><body><div><br><p></p><img alt=x></div><!-- c --></body></html>");
        return;
    case 2:
    case 3:
    case 4:
        gen_content(g, 0);
        return;
    default:
        gen_put(g, "<html><head>");
        if (gen_rnd(2))
            gen_put(g, GEN_PICK(((const char *const[]){
                           "<title>ACME &amp; Co \xe2\x80\x93 Entry</title>", "<title></title>",
                           "<title> \xc2\xa0 T\xc3\xadtulo\n</title>", "<TITLE>x</TITLE>"})));
        gen_put(g, "</head><body>");
        gen_content(g, 1);
        gen_put(g, "</body></html>");
    }
}

/* page_excerpt as it was written first (one byte and one list entry at a time), on libxml2's
 * own tree of the body. */
static bool old_is_space(const char *s, size_t *ret_len)
{
    unsigned char c = (unsigned char)s[0];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
        *ret_len = 1;
        return true;
    }
    if (c == 0xC2 && (unsigned char)s[1] == 0xA0) {
        *ret_len = 2;
        return true;
    }
    return false;
}

static bool old_elem_in(xmlNodePtr n, const char *const *list, size_t count)
{
    if (!n || n->type != XML_ELEMENT_NODE || !n->name)
        return false;
    for (size_t i = 0; i < count; i++)
        if (strcasecmp((const char *)n->name, list[i]) == 0)
            return true;
    return false;
}

static bool old_skip_text_of(xmlNodePtr n)
{
    static const char *const skip[] = {"script", "style", "template", "select", "head", "title"};
    return old_elem_in(n, skip, sizeof(skip) / sizeof(skip[0]));
}

static bool old_is_inline(xmlNodePtr n)
{
    static const char *const inl[] = {"a",  "abbr", "b",     "bdi",  "bdo",    "cite", "code",
                                      "em", "font", "i",     "kbd",  "label",  "mark", "q",
                                      "s",  "samp", "small", "span", "strong", "sub",  "sup",
                                      "tt", "u",    "var",   "nobr"};
    return old_elem_in(n, inl, sizeof(inl) / sizeof(inl[0]));
}

struct old_text {
    char *buf;
    size_t len, max;
    bool pending_space, full;
};

static size_t old_utf8_len(const unsigned char *s)
{
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;
    if (s[0] < 0x80)
        return 1;
    else if (s[0] >= 0xC2 && s[0] <= 0xDF)
        need = 2;
    else if (s[0] >= 0xE0 && s[0] <= 0xEF)
        need = 3;
    else if (s[0] >= 0xF0 && s[0] <= 0xF4)
        need = 4;
    else
        return 0;
    if (s[0] == 0xE0)
        lo = 0xA0;
    else if (s[0] == 0xED)
        hi = 0x9F;
    else if (s[0] == 0xF0)
        lo = 0x90;
    else if (s[0] == 0xF4)
        hi = 0x8F;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < need; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return need;
}

static void old_text_add(struct old_text *t, const char *s)
{
    size_t sl;
    while (*s && !t->full) {
        if (old_is_space(s, &sl)) {
            if (t->len > 0)
                t->pending_space = true;
            s += sl;
            continue;
        }
        size_t cl = old_utf8_len((const unsigned char *)s);
        if (cl == 0) {
            s++;
            continue;
        }
        size_t need = cl + (t->pending_space ? 1 : 0);
        if (t->len + need > t->max) {
            t->full = true;
            break;
        }
        if (t->pending_space)
            t->buf[t->len++] = ' ';
        t->pending_space = false;
        memcpy(t->buf + t->len, s, cl);
        t->len += cl;
        s += cl;
    }
}

static char *old_excerpt(xmlDocPtr doc, const char *raw, size_t raw_len, size_t max)
{
    struct old_text t = {malloc(max + 1), 0, max, false, false};
    assert_non_null(t.buf);
    xmlNodePtr root = doc ? xmlDocGetRootElement(doc) : NULL;
    for (xmlNodePtr n = root; n && !t.full; n = page_walk_next(n, root, true)) {
        if (n->type == XML_ELEMENT_NODE && strcasecmp((const char *)n->name, "title") == 0) {
            xmlChar *c = xmlNodeGetContent(n);
            old_text_add(&t, c ? (const char *)c : "");
            xmlFree(c);
            t.pending_space = t.len > 0;
            break;
        }
    }
    xmlNodePtr n = root;
    while (n && !t.full) {
        bool descend = false;
        if (n->type == XML_ELEMENT_NODE) {
            if (!old_skip_text_of(n)) {
                descend = true;
                if (!old_is_inline(n) && t.len > 0)
                    t.pending_space = true;
            }
        } else if ((n->type == XML_TEXT_NODE || n->type == XML_CDATA_SECTION_NODE) && n->content) {
            old_text_add(&t, (const char *)n->content);
        }
        if (!descend || !n->children) {
            xmlNodePtr m = n;
            while (m && m != root && !m->next) {
                m = m->parent;
                if (m && !old_is_inline(m) && t.len > 0)
                    t.pending_space = true;
            }
        }
        n = page_walk_next(n, root, descend);
    }
    if (t.len == 0 && raw_len > 0) {
        char *clean = malloc(raw_len * 3 + 1);
        assert_non_null(clean);
        size_t j = 0;
        for (size_t i = 0; i < raw_len;) {
            unsigned char c = (unsigned char)raw[i];
            size_t cl = old_utf8_len((const unsigned char *)raw + i);
            if (cl == 1 && (c < 0x20 || c == 0x7F)) {
                clean[j++] = ' ';
            } else if (cl == 0 || i + cl > raw_len) {
                memcpy(clean + j, "\xEF\xBF\xBD", 3);
                j += 3;
                cl = 1;
            } else {
                memcpy(clean + j, raw + i, cl);
                j += cl;
            }
            i += cl ? cl : 1;
        }
        clean[j] = '\0';
        old_text_add(&t, clean);
        free(clean);
    }
    t.buf[t.len] = '\0';
    return t.buf;
}

/* The body's excerpt both ways, at several bounds: the same bytes. */
static void check_excerpt(const char *body, size_t len, const char *label)
{
    static const size_t maxes[] = {0, 1, 2, 3, 4, 5, 7, 13, 40, 100, 1024, 1 << 16};
    struct page *p = NULL;
    assert_int_equal(page_parse(body, len, BASE "/x", &p, NULL, 0), APBOT_OK);
    htmlDocPtr doc = len ? htmlReadMemory(body, (int)len, BASE "/x", NULL,
                                          HTML_PARSE_RECOVER | HTML_PARSE_NOERROR |
                                              HTML_PARSE_NOWARNING | HTML_PARSE_NONET)
                         : NULL;
    char raw[1025]; /* page.c keeps the first KiB of the body for a textless page */
    size_t raw_len = len < 1024 ? len : 1024;
    memcpy(raw, body, raw_len);
    raw[raw_len] = '\0';
    for (size_t m = 0; m < sizeof(maxes) / sizeof(maxes[0]); m++) {
        char *want = old_excerpt(doc, raw, raw_len, maxes[m]);
        char *got = page_excerpt(p, maxes[m]);
        if (strcmp(want, got) != 0)
            fail_msg("%s, max %zu: excerpt [%s], the old definition's [%s]", label, maxes[m], got,
                     want);
        free(want);
        free(got);
    }
    xmlFreeDoc(doc);
    page_free(p);
}

/* Calls fn on every canned page of tests/data/pages. */
struct each_fixture {
    void (*fn)(const char *body, size_t len, const char *label);
};

static void each_fixture_one(const char *body, size_t len, const char *name, void *ctx)
{
    ((struct each_fixture *)ctx)->fn(body, len, name);
}

static void each_fixture(void (*fn)(const char *body, size_t len, const char *label))
{
    struct each_fixture e = {fn};
    canned_pages_each(each_fixture_one, &e);
}

/* page_excerpt against its old definition: the canned pages and 3,000 generated ones. */
static void test_page_excerpt_as_before(void **state)
{
    (void)state;
    each_fixture(check_excerpt);
    static struct gen_page g;
    for (int i = 0; i < 3000; i++) {
        gen_page(&g);
        char label[32];
        snprintf(label, sizeof(label), "generated page %d", i);
        check_excerpt(g.buf, g.len, label);
    }
}

/* ---- page.c's own XPath paths against libxml2's evaluation ---- */

static void silent_xml(void *ctx, const char *msg, ...)
{
    (void)ctx;
    (void)msg;
}

/* The paths of the bundled flows, and paths as flows write them, with the corners of what
 * page_path_eval reads: both axes, relative and absolute, a last attribute step, both quote
 * marks, empty and odd values, names with digits, '-', '.', '_', upper case. */
static const char *const path_fixed[] = {
    "//form[@id='loginForm']",
    "//form[@id='apEntry']",
    "//form[@id='apConfirm']",
    "//form[@id='apSearch']",
    "//form[@name='invoice']",
    "//table[@id='resultTable']//tr[@class='row']",
    "//table[@id='journalTable']//tr[@class='row']",
    "//table[@id='results']/tbody/tr",
    "//table[@id='listing']/tbody/tr",
    "//p[@id='noResults']",
    "//a[@id='nextPage']/@href",
    "//input[@name='vendor']/@value",
    "//span[@id='total']",
    "td[@class='docNo']",
    "td[@class='amount']",
    "td",
    "/html/body",
    "/html/body//form",
    "/html",
    "html",
    "//html",
    "//td",
    "//tr/td",
    "//tr//td",
    "//table//table",
    "//div//div",
    "//div/div",
    "//span/@id",
    "//input/@name",
    "//input[@type='hidden']/@value",
    "//input[@type=\"hidden\"]",
    "//option[@selected='selected']",
    "//a[@href='/erp/x?a=1&b=2']",
    "//p[@title='a > b']",
    "//p[@id='']",
    "//TD",
    "//Form",
    "//data-x",
    "//a.b",
    "//_u",
    "//h1",
    "//x1y",
    "//td[@class='row']/@class",
    "//select[@name='s']/option",
    "//fieldset//input[@name='f']",
    "/html/head/title",
    "//title",
    "//form//input[@type='submit']/@value",
    "//tr[@class='row']/td[@class='amount']",
    "td[@class='amount']/@class",
    "//a[@name='n']",
    "//a[@id='m']",
    "//div[@class='a b']",
    "//div[@class='a&amp;b']",
    "//input[@value='caf\xc3\xa9']",
    "//input[@value='v 1']",
    "//b[@id='a']//i",
    "//x-widget",
    "//body//x-widget[@id='x']",
    "//text",
    "//node",
    "//comment",
    "//and",
    "//div/or",
    "//div//mod",
};

/* Not read by page_path_eval (other syntax): libxml2 evaluates them. */
static const char *const path_not[] = {
    "//form[ @id='x']",
    "//form [@id='x']",
    "// form",
    "//a[1]",
    "//a[@b]",
    "//a[@b='c'][@d='e']",
    "//x/text()",
    "id('x')",
    "//a:b",
    "count(//a)",
    "//a | //b",
    "//a[@b=\"c']",
    "//a[@b='c",
    "//a/",
    "///a",
    "//a/..",
    "./a",
    ".//a",
    "//a[@b='\x01']",
    "//a/@*",
    "//@id",
    "",
    "//1a",
    "//-a",
    "//a[@b=c]",
    "//a[@b='c']x",
    "//\xc3\xa9",
    "//a//@b",
    "/",
    "//a[@b= 'c']",
    "//a[@1='c']",
    "//body/*",
    "//*[@id='x']",
};

static const char *const path_names[] = {
    "td", "tr",     "table",    "tbody",  "form", "input", "a",     "div", "span",
    "p",  "option", "select",   "html",   "body", "head",  "title", "b",   "i",
    "li", "ul",     "textarea", "button", "TD",   "Span",  "label", "em"};
static const char *const path_attrs[] = {"id",    "class", "name",     "type", "value", "href",
                                         "title", "ID",    "selected", "form", "label"};
static const char *const path_values[] = {"x", "row", "n",        "v 1",   "",       "hidden",
                                          "a", "b",   "checkbox", "radio", "f1",     "/erp/post",
                                          "m", "go",  "L",        "a > b", "submit", "selected"};

/* A random path of the form page_path_eval reads, into buf. */
static void gen_path(char *buf, size_t cap, bool relative)
{
    size_t n = 0;
    buf[0] = '\0';
#define PATH_PUT(s) (n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "%s", (s)))
    if (!relative)
        PATH_PUT(gen_rnd(4) ? "//" : "/");
    int steps = 1 + (int)gen_rnd(3);
    for (int k = 0; k < steps; k++) {
        if (k > 0)
            PATH_PUT(gen_rnd(2) ? "//" : "/");
        PATH_PUT(GEN_PICK(path_names));
        if (gen_rnd(2)) {
            bool dq = gen_rnd(4) == 0;
            PATH_PUT("[@");
            PATH_PUT(GEN_PICK(path_attrs));
            PATH_PUT(dq ? "=\"" : "='");
            PATH_PUT(GEN_PICK(path_values));
            PATH_PUT(dq ? "\"]" : "']");
        }
    }
    if (gen_rnd(6) == 0) {
        PATH_PUT("/@");
        PATH_PUT(GEN_PICK(path_attrs));
    }
#undef PATH_PUT
}

/* A path into buf that selects node among others: from the document or from ctx (an
 * ancestor of node, or NULL), through some of node's ancestors, each reached by '/' from its
 * parent or by '//' from a higher one, with some of their own attributes as tests. */
static bool gen_path_to(char *buf, size_t cap, xmlNodePtr ctx, xmlNodePtr node)
{
    xmlNodePtr chain[8]; /* page_path_eval reads 8 steps */
    bool desc[8];
    int n = 0;
    for (xmlNodePtr a = node; a && a != ctx && a->type == XML_ELEMENT_NODE;) {
        if (n == 8 || strspn((const char *)a->name, "abcdefghijklmnopqrstuvwxyz0123456789") !=
                          strlen((const char *)a->name))
            return false; /* a path page_path_eval does not read */
        chain[n] = a;
        xmlNodePtr up = a->parent;
        int skip = (int)gen_rnd(3); /* ancestors left out: this step is '//' then */
        for (int i = 0; i < skip && up && up != ctx && up->type == XML_ELEMENT_NODE; i++)
            up = up->parent;
        desc[n] = up != a->parent;
        n++;
        if (!up || up == ctx || up->type != XML_ELEMENT_NODE) {
            /* the rest of the way to the context or to the document in one '//' (or '/'
             * when the parent is it) */
            desc[n - 1] = desc[n - 1] || up != a->parent || (ctx && a->parent != ctx) ||
                          (!ctx && a->parent && a->parent->type == XML_ELEMENT_NODE);
            break;
        }
        a = up;
    }
    size_t len = 0;
    buf[0] = '\0';
    for (int k = n - 1; k >= 0; k--) {
        const char *sep = desc[k] ? "//" : "/";
        if (k == n - 1 && ctx)
            sep = desc[k] ? ".//" : ""; /* relative: "x" or (not read here) ".//x" */
        len += (size_t)snprintf(buf + len, len < cap ? cap - len : 0, "%s%s", sep,
                                (const char *)chain[k]->name);
        xmlAttrPtr at = chain[k]->properties;
        for (int i = (int)gen_rnd(4); i > 0 && at; i--)
            at = at->next;
        if (at && gen_rnd(2) && at->children && at->children->content &&
            !strchr((const char *)at->children->content, '\''))
            len += (size_t)snprintf(buf + len, len < cap ? cap - len : 0, "[@%s='%s']",
                                    (const char *)at->name, (const char *)at->children->content);
    }
    return n > 0;
}

struct path_tally {
    unsigned answered, declined, nonempty;
};

/* page_path_eval and libxml2 on one path and context: the same nodes in the same order, or
 * page_path_eval declines. */
static void check_path(xmlDocPtr doc, xmlXPathContextPtr x, xmlNodePtr node, const char *xpath,
                       const char *label, struct path_tally *t)
{
    xmlXPathObjectPtr mine = page_path_eval(doc, node, xpath);
    if (!mine) {
        t->declined++;
        return;
    }
    x->node = node ? node : (xmlNodePtr)doc;
    xmlXPathObjectPtr ref = xmlXPathEvalExpression(BAD_CAST xpath, x);
    if (!ref || ref->type != XPATH_NODESET)
        fail_msg("%s: libxml2 gives no node set for %s", label, xpath);
    int nm = mine->nodesetval ? mine->nodesetval->nodeNr : 0;
    int nr = ref->nodesetval ? ref->nodesetval->nodeNr : 0;
    if (nm != nr)
        fail_msg("%s: %s selects %d nodes, libxml2 %d", label, xpath, nm, nr);
    for (int i = 0; i < nm; i++)
        if (mine->nodesetval->nodeTab[i] != ref->nodesetval->nodeTab[i])
            fail_msg("%s: %s: node %d differs from libxml2's", label, xpath, i);
    t->answered++;
    t->nonempty += nm > 0;
    xmlXPathFreeObject(mine);
    xmlXPathFreeObject(ref);
}

static void check_paths_on(xmlDocPtr doc, const char *label, struct path_tally *t)
{
    xmlXPathContextPtr x = xmlXPathNewContext(doc);
    assert_non_null(x);
    for (size_t i = 0; i < sizeof(path_fixed) / sizeof(path_fixed[0]); i++)
        check_path(doc, x, NULL, path_fixed[i], label, t);
    for (size_t i = 0; i < sizeof(path_not) / sizeof(path_not[0]); i++) {
        xmlXPathObjectPtr o = page_path_eval(doc, NULL, path_not[i]);
        if (o)
            fail_msg("page_path_eval reads %s", path_not[i]);
    }
    char xp[256];
    for (int i = 0; i < 40; i++) {
        gen_path(xp, sizeof(xp), false);
        check_path(doc, x, NULL, xp, label, t);
    }
    /* relative paths from every third element (rows are elements deep in the tree) */
    xmlNodePtr root = xmlDocGetRootElement(doc);
    int seen = 0;
    for (xmlNodePtr n = root; n && seen < 600; n = page_walk_next(n, root, true)) {
        if (n->type == XML_ELEMENT_NODE && seen++ % 3 == 0) {
            for (int i = 0; i < 4; i++) {
                gen_path(xp, sizeof(xp), gen_rnd(5) != 0);
                check_path(doc, x, n, xp, label, t);
            }
            check_path(doc, x, n, "td[@class='amount']", label, t);
            check_path(doc, x, n, "td", label, t);
            /* paths to elements below n, from n and from the document */
            for (xmlNodePtr c = n->children; c; c = c->next) {
                if (c->type != XML_ELEMENT_NODE)
                    continue;
                xmlNodePtr deep = c;
                while (deep->children && gen_rnd(2))
                    deep = deep->children;
                if (deep->type != XML_ELEMENT_NODE)
                    deep = c;
                if (gen_path_to(xp, sizeof(xp), n, deep) && strncmp(xp, ".//", 3) != 0)
                    check_path(doc, x, n, xp, label, t);
                if (gen_path_to(xp, sizeof(xp), NULL, deep))
                    check_path(doc, x, NULL, xp, label, t);
            }
        }
    }
    xmlXPathFreeContext(x);
}

static void check_paths_page(const char *body, size_t len, const char *label, struct path_tally *t)
{
    if (len == 0)
        return;
    htmlDocPtr doc = htmlReadMemory(body, (int)len, BASE "/x", NULL,
                                    HTML_PARSE_RECOVER | HTML_PARSE_NOERROR | HTML_PARSE_NOWARNING |
                                        HTML_PARSE_NONET);
    if (doc) {
        check_paths_on(doc, label, t);
        xmlFreeDoc(doc);
    }
    htmlDocPtr fast = page_fast_parse(body, len, BASE "/x");
    if (fast) {
        check_paths_on(fast, label, t);
        xmlFreeDoc(fast);
    }
}

static struct path_tally path_fixture_tally;

static void check_paths_fixture(const char *body, size_t len, const char *label)
{
    check_paths_page(body, len, label, &path_fixture_tally);
}

/* page_path_eval against libxml2: on the canned pages and 600 generated ones, the flows'
 * paths, generated ones (from the document and from elements), and what it must not read. */
static void test_page_paths_as_libxml2(void **state)
{
    (void)state;
    xmlSetGenericErrorFunc(NULL, silent_xml);
    each_fixture(check_paths_fixture);
    struct path_tally t = path_fixture_tally;
    static struct gen_page g;
    for (int i = 0; i < 600; i++) {
        gen_page(&g);
        char label[32];
        snprintf(label, sizeof(label), "generated page %d", i);
        check_paths_page(g.buf, g.len, label, &t);
    }
    /* paths that select something, and hardly any tree declined */
    fprintf(stderr, "paths: %u answered (%u selecting nodes), %u declined\n", t.answered,
            t.nonempty, t.declined);
    assert_true(t.answered > 100000);
    assert_true(t.nonempty > 10000);
    assert_int_equal(t.declined, 0);
    xmlSetGenericErrorFunc(NULL, NULL);
}

/* page_rule_text as page.c had it before its tokenizer was made faster, for
 * test_page_rule_text_as_before: the same code, renamed, with malloc for apbot_xmalloc. */

/* Elements whose content is not markup (HTML's raw text and escapable raw text elements) and
 * whether rules see it. Script has its own comment-escape states (old_rt_script). */
enum old_rt_content {
    OLD_RT_MARKUP = 0, /* an ordinary element */
    OLD_RT_SCRIPT,     /* script data: blanked */
    OLD_RT_HIDDEN,     /* raw text nobody sees or the ERP echoes: blanked */
    OLD_RT_SHOWN,      /* raw text a browser shows (title, xmp): kept */
    OLD_RT_PLAINTEXT,  /* everything after it is text: kept */
};

/* Both lists are read for every tag of every page (~3,000 tags per invoice): the lengths
 * keep the comparisons to the names that can match. */
#define OLD_RT_NAME(s) s, sizeof(s) - 1

static const struct {
    const char *name;
    size_t len;
    enum old_rt_content content;
} old_rt_elements[] = {
    {OLD_RT_NAME("script"), OLD_RT_SCRIPT},   {OLD_RT_NAME("style"), OLD_RT_HIDDEN},
    {OLD_RT_NAME("textarea"), OLD_RT_HIDDEN}, {OLD_RT_NAME("noscript"), OLD_RT_HIDDEN},
    {OLD_RT_NAME("iframe"), OLD_RT_HIDDEN},   {OLD_RT_NAME("noembed"), OLD_RT_HIDDEN},
    {OLD_RT_NAME("noframes"), OLD_RT_HIDDEN}, {OLD_RT_NAME("title"), OLD_RT_SHOWN},
    {OLD_RT_NAME("xmp"), OLD_RT_SHOWN},       {OLD_RT_NAME("plaintext"), OLD_RT_PLAINTEXT},
};

/* Attributes whose values rules may anchor on: markup the ERP writes, not data it echoes. */
static const struct {
    const char *name;
    size_t len;
} old_rt_kept_attrs[] = {{OLD_RT_NAME("id")},
                         {OLD_RT_NAME("class")},
                         {OLD_RT_NAME("name")},
                         {OLD_RT_NAME("type")},
                         {OLD_RT_NAME("role")}};

static bool old_rt_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

/* What ends a tag name, an attribute name or an unquoted value, as one table lookup. */
enum { OLD_RT_SP = 1, OLD_RT_SLASH = 2, OLD_RT_GT = 4, OLD_RT_EQ = 8 };
static const unsigned char old_rt_class[256] = {
    [' '] = OLD_RT_SP,  ['\t'] = OLD_RT_SP,   ['\n'] = OLD_RT_SP, ['\r'] = OLD_RT_SP,
    ['\f'] = OLD_RT_SP, ['/'] = OLD_RT_SLASH, ['>'] = OLD_RT_GT,  ['='] = OLD_RT_EQ,
};

static bool old_rt_is(char c, unsigned mask)
{
    return (old_rt_class[(unsigned char)c] & mask) != 0;
}

static bool old_rt_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static char old_rt_lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* True when body[at..) starts with the lower-case word w, any case (NULs are bytes too). */
static bool old_rt_word_at(const char *body, size_t len, size_t at, const char *w)
{
    size_t n = strlen(w);
    if (at > len || len - at < n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (old_rt_lower(body[at + i]) != w[i])
            return false;
    return true;
}

/* True when body[at..) is the tag name w followed by white space, '/' or '>' (HTML's
 * "appropriate end tag"; at the end of the body it is not one). */
static bool old_rt_name_at(const char *body, size_t len, size_t at, const char *w)
{
    size_t n = strlen(w);
    if (!old_rt_word_at(body, len, at, w) || at + n >= len)
        return false;
    char c = body[at + n];
    return old_rt_space(c) || c == '/' || c == '>';
}

static void old_rt_blank(char *out, size_t from, size_t to)
{
    if (to > from)
        memset(out + from, ' ', to - from);
}

/* Position after the first '>' at or after i, or len. */
static size_t old_rt_past_gt(const char *body, size_t len, size_t i)
{
    const char *gt = memchr(body + i, '>', len - i);
    return gt ? (size_t)(gt - body) + 1 : len;
}

/* A comment starting at i ("<!--"): its end (after "-->", "--!>", or the abrupt "<!-->" and
 * "<!--->"), or len when it never ends. */
static size_t old_rt_comment_end(const char *body, size_t len, size_t i)
{
    size_t k = i + 4;
    if (k < len && body[k] == '>')
        return k + 1;
    if (k + 1 < len && body[k] == '-' && body[k + 1] == '>')
        return k + 2;
    while (k < len) {
        const char *dash = memchr(body + k, '-', len - k);
        if (!dash)
            return len;
        k = (size_t)(dash - body);
        if (k + 2 < len && body[k + 1] == '-' && body[k + 2] == '>')
            return k + 3;
        if (k + 3 < len && body[k + 1] == '-' && body[k + 2] == '!' && body[k + 3] == '>')
            return k + 4;
        k++;
    }
    return len;
}

/*
 * Script data from k: the position of the '<' of its end tag, or len. Follows HTML's script
 * states: inside "<!--" a "<script>" opens a double-escaped part in which "</script>" does
 * not end the element - text a browser keeps inside the script, so it stays blanked here.
 */
static size_t old_rt_script_end(const char *body, size_t len, size_t k)
{
    enum { DATA, ESC, ESC_DASH, ESC_DASH_DASH, DESC, DESC_DASH, DESC_DASH_DASH } st = DATA;
    while (k < len) {
        char c = body[k];
        switch (st) {
        case DATA:
            if (c == '<') {
                if (k + 1 < len && body[k + 1] == '/' && old_rt_name_at(body, len, k + 2, "script"))
                    return k;
                if (k + 3 < len && body[k + 1] == '!' && body[k + 2] == '-' && body[k + 3] == '-') {
                    st = ESC_DASH_DASH;
                    k += 4;
                    continue;
                }
            }
            k++;
            continue;
        case ESC:
        case ESC_DASH:
        case ESC_DASH_DASH:
            if (c == '<') {
                if (k + 1 < len && body[k + 1] == '/' && old_rt_name_at(body, len, k + 2, "script"))
                    return k;
                if (old_rt_name_at(body, len, k + 1, "script")) {
                    st = DESC;
                    k += 7;
                    continue;
                }
                st = ESC;
            } else if (c == '-') {
                st = st == ESC ? ESC_DASH : ESC_DASH_DASH;
            } else if (c == '>' && st == ESC_DASH_DASH) {
                st = DATA;
            } else {
                st = ESC;
            }
            k++;
            continue;
        case DESC:
        case DESC_DASH:
        case DESC_DASH_DASH:
            if (c == '<') {
                if (k + 1 < len && body[k + 1] == '/' &&
                    old_rt_name_at(body, len, k + 2, "script")) {
                    st = ESC;
                    k += 8;
                    continue;
                }
                st = DESC;
            } else if (c == '-') {
                st = st == DESC ? DESC_DASH : DESC_DASH_DASH;
            } else if (c == '>' && st == DESC_DASH_DASH) {
                st = DATA;
            } else {
                st = DESC;
            }
            k++;
            continue;
        }
    }
    return len;
}

/* Raw text of element `name` from k: the position of the '<' of its end tag, or len. */
static size_t old_rt_raw_end(const char *body, size_t len, size_t k, const char *name)
{
    while (k < len) {
        const char *lt = memchr(body + k, '<', len - k);
        if (!lt)
            return len;
        k = (size_t)(lt - body);
        if (k + 1 < len && body[k + 1] == '/' && old_rt_name_at(body, len, k + 2, name))
            return k;
        k++;
    }
    return len;
}

/*
 * A start or end tag whose name begins at p (after "<" or "</"): blanks the values of the
 * attributes rules must not see and returns the position after the tag's '>' (len when the
 * tag never closes). *ret_elem gets the index in old_rt_elements of a start tag whose content is
 * not markup, else SIZE_MAX.
 */
static size_t old_rt_tag(const char *body, size_t len, size_t p, char *out, bool end_tag,
                         size_t *ret_elem)
{
    char name[16];
    size_t nl = 0;
    *ret_elem = SIZE_MAX;
    while (p < len && !old_rt_is(body[p], OLD_RT_SP | OLD_RT_SLASH | OLD_RT_GT)) {
        if (nl < sizeof(name) - 1)
            name[nl] = old_rt_lower(body[p]);
        nl++;
        p++;
    }
    if (!end_tag && nl < sizeof(name)) {
        for (size_t e = 0; e < sizeof(old_rt_elements) / sizeof(old_rt_elements[0]); e++)
            if (nl == old_rt_elements[e].len && memcmp(name, old_rt_elements[e].name, nl) == 0)
                *ret_elem = e;
    }
    for (;;) {
        while (p < len && old_rt_is(body[p], OLD_RT_SP | OLD_RT_SLASH))
            p++;
        if (p >= len)
            return len;
        if (body[p] == '>')
            return p + 1;
        /* an attribute name: up to white space, '/', '>' or '=' (a leading '=' belongs to it) */
        size_t a = p++;
        while (p < len && !old_rt_is(body[p], OLD_RT_SP | OLD_RT_SLASH | OLD_RT_GT | OLD_RT_EQ))
            p++;
        bool kept = false;
        for (size_t k = 0; k < sizeof(old_rt_kept_attrs) / sizeof(old_rt_kept_attrs[0]); k++)
            if (p - a == old_rt_kept_attrs[k].len &&
                old_rt_word_at(body, len, a, old_rt_kept_attrs[k].name))
                kept = true;
        size_t q = p;
        while (q < len && old_rt_space(body[q]))
            q++;
        if (q >= len || body[q] != '=') {
            p = q; /* no value */
            continue;
        }
        q++;
        while (q < len && old_rt_space(body[q]))
            q++;
        if (q >= len)
            return len;
        if (body[q] == '"' || body[q] == '\'') {
            const char *close = memchr(body + q + 1, body[q], len - q - 1);
            size_t e = close ? (size_t)(close - body) : len;
            if (!kept)
                old_rt_blank(out, q + 1, e);
            if (!close)
                return len;
            p = e + 1;
        } else if (body[q] == '>') {
            return q + 1; /* "a=>": no value */
        } else {
            size_t e = q;
            while (e < len && !old_rt_is(body[e], OLD_RT_SP | OLD_RT_GT))
                e++;
            if (!kept)
                old_rt_blank(out, q, e);
            p = e;
        }
    }
}

static char *old_rule_text(const char *body, size_t len)
{
    if (!body && len > 0)
        return NULL;
    char *out = malloc(len + 1);
    assert_non_null(out);
    if (len > 0)
        memcpy(out, body, len);
    out[len] = '\0';

    size_t i = 0;
    while (i < len) {
        const char *lt = memchr(body + i, '<', len - i);
        if (!lt)
            break;
        i = (size_t)(lt - body);
        if (i + 1 >= len)
            break; /* a lone '<' at the end is text */
        char c = body[i + 1];
        if (c == '!') {
            size_t e;
            if (i + 3 < len && body[i + 2] == '-' && body[i + 3] == '-') {
                e = old_rt_comment_end(body, len, i);
            } else if (old_rt_word_at(body, len, i + 2, "doctype")) {
                i = old_rt_past_gt(body, len, i); /* markup, not echo: kept */
                continue;
            } else {
                e = old_rt_past_gt(body, len, i); /* <!...>, <![CDATA[...>: a bogus comment */
            }
            old_rt_blank(out, i, e);
            i = e;
        } else if (c == '?') {
            size_t e = old_rt_past_gt(body, len, i);
            old_rt_blank(out, i, e);
            i = e;
        } else if (c == '/') {
            if (i + 2 < len && old_rt_alpha(body[i + 2])) {
                size_t elem;
                i = old_rt_tag(body, len, i + 2, out, true, &elem);
            } else if (i + 2 < len && body[i + 2] == '>') {
                i += 3; /* "</>" is nothing */
            } else if (i + 2 >= len) {
                break; /* "</" at the end is text */
            } else {
                size_t e = old_rt_past_gt(body, len, i);
                old_rt_blank(out, i, e);
                i = e;
            }
        } else if (old_rt_alpha(c)) {
            size_t elem;
            i = old_rt_tag(body, len, i + 1, out, false, &elem);
            if (elem == SIZE_MAX || i >= len)
                continue;
            size_t e;
            switch (old_rt_elements[elem].content) {
            case OLD_RT_MARKUP:
                break;
            case OLD_RT_SCRIPT:
                e = old_rt_script_end(body, len, i);
                old_rt_blank(out, i, e);
                i = e;
                break;
            case OLD_RT_HIDDEN:
                e = old_rt_raw_end(body, len, i, old_rt_elements[elem].name);
                old_rt_blank(out, i, e);
                i = e;
                break;
            case OLD_RT_SHOWN:
                i = old_rt_raw_end(body, len, i, old_rt_elements[elem].name);
                break;
            case OLD_RT_PLAINTEXT:
                i = len;
                break;
            }
        } else {
            i++; /* '<' as text */
        }
    }
    return out;
}

/* Both ways on one body: the same bytes. */
static void check_rule_text_as_before(const char *body, size_t len, const char *label)
{
    char *want = old_rule_text(body, len);
    char *got = page_rule_text(body, len);
    assert_non_null(got);
    if (memcmp(want, got, len + 1) != 0) {
        size_t at = 0;
        while (want[at] == got[at])
            at++;
        fail_msg("%s: rule text differs from the old definition's at byte %zu of %zu", label, at,
                 len);
    }
    free(want);
    free(got);
}

static void check_rule_text_fixture(const char *body, size_t len, const char *label)
{
    check_rule_text_as_before(body, len, label);
    /* and mutated: a byte dropped or replaced by markup, the rest cut */
    static const char special[] = "<>&/=\"' \t\n\f\r-!?;x";
    char *buf = malloc(len + 1);
    assert_non_null(buf);
    for (int round = 0; round < 30; round++) {
        size_t n = len;
        memcpy(buf, body, len);
        for (int e = 0; e < 3 && n > 2; e++) {
            size_t at = gen_rnd((uint32_t)n);
            switch (gen_rnd(3)) {
            case 0:
                memmove(buf + at, buf + at + 1, n - at - 1);
                n--;
                break;
            case 1:
                buf[at] = special[gen_rnd(sizeof(special) - 1)];
                break;
            default:
                n = at + 1;
            }
        }
        check_rule_text_as_before(buf, n, label);
    }
    free(buf);
}

/* page_rule_text against its old definition: the canned pages (and mutations of them), 3,000
 * generated pages and 20,000 strings of tokenizer corners (names that end in every way,
 * quotes, comments, script escapes, raw text end tags, NUL bytes). */
static void test_page_rule_text_as_before(void **state)
{
    (void)state;
    each_fixture(check_rule_text_fixture);
    static struct gen_page g;
    for (int i = 0; i < 3000; i++) {
        gen_page(&g);
        check_rule_text_as_before(g.buf, g.len, "generated page");
    }
    static const char *const bits[] = {
        "<",
        "</",
        "<!--",
        "-->",
        "--!>",
        "<!",
        "<?",
        ">",
        "/>",
        "'",
        "\"",
        "=",
        " ",
        "\t",
        "\f",
        "\n",
        "\r",
        "/",
        "-",
        "!",
        "x",
        "a",
        "p",
        "b1",
        "script",
        "SCRIPT",
        "style",
        "textarea",
        "title",
        "xmp",
        "plaintext",
        "noscript",
        "iframe",
        "noembed",
        "noframes",
        "scrip",
        "scripts",
        "id",
        "ID",
        "class",
        "name",
        "Type",
        "role",
        "value",
        "ids",
        "<script>",
        "</script>",
        "<!--<script>",
        "doctype",
        "DOCTYPE",
        "<!DOCTYPE",
        "<p ",
        "<input value=",
        "<a href='",
        "</p>",
        "<style>",
        "</style",
        "<title>",
        "</title>",
        "x=",
        " = ",
        "<textarea>",
        "</textarea>",
        "\xc3\xa9",
        "<<",
        "&lt;",
    };
    char buf[2048];
    for (int i = 0; i < 20000; i++) {
        size_t n = 0;
        for (int k = (int)gen_rnd(60); k >= 0; k--) {
            if (gen_rnd(40) == 0) {
                buf[n++] = '\0'; /* bodies may hold NULs */
                continue;
            }
            const char *b = GEN_PICK(bits);
            size_t bl = strlen(b);
            memcpy(buf + n, b, bl);
            n += bl;
        }
        check_rule_text_as_before(buf, n, "tokenizer corners");
    }
}

/* XPath's id() on pages the fast path builds, whose ids are registered only when libxml2's
 * XPath first evaluates there: the ids libxml2's own parse registers (id, and name on <a>). */
static void test_page_xpath_id(void **state)
{
    (void)state;
    struct page *p = parse_str("<html><body><p id=a>one</p><a name=n>two</a><b id=m name=z>three"
                               "</b><a id=n2 name=q>four</a><i id=a>dup</i></body></html>",
                               BASE "/x");
    assert_true(page_has(p, "//p[@id='a']")); /* a path page.c reads: no ids needed */
    assert_true(page_has(p, "id('a')"));
    assert_false(page_has(p, "id('nope')"));
    char *s = page_string(p, "id('a')");
    assert_string_equal(s, "one"); /* the first of a repeated id */
    free(s);
    s = page_string(p, "id('n')");
    assert_string_equal(s, "two");
    free(s);
    assert_null(page_string(p, "id('z')")); /* name is an id on <a> only */
    s = page_string(p, "id('q')");
    assert_string_equal(s, "four");
    free(s);
    page_free(p);

    /* the first libxml2 evaluation on a page may be a column of page_rows */
    p = parse_str("<html><body><table><tr><td>1</td></tr></table><p id=m>three</p></body></html>",
                  BASE "/x");
    const char *cols[] = {"td", "string(id('m'))"};
    struct rows_seen seen;
    memset(&seen, 0, sizeof(seen));
    size_t n = 0;
    assert_int_equal(page_rows(p, "//tr", cols, 2, collect_row, &seen, &n, NULL, 0), APBOT_OK);
    assert_int_equal(n, 1);
    assert_string_equal(seen.cells[0][0], "1");
    assert_string_equal(seen.cells[0][1], "three");
    page_free(p);
}

/* count(id(...)) for the ids the generated pages hold, and string(id(...)): page.c's answer
 * (ids registered late on the fast path's pages) and libxml2's own on its own tree. */
static void check_ids_page(const char *body, size_t len, const char *label)
{
    static const char *const xps[] = {"count(id('x'))",  "count(id('n'))",     "count(id('a'))",
                                      "count(id('f1'))", "count(id('b'))",     "string(id('x'))",
                                      "string(id('a'))", "count(id('x a n'))", "id('f1')"};
    struct page *p = NULL;
    assert_int_equal(page_parse(body, len, BASE "/x", &p, NULL, 0), APBOT_OK);
    htmlDocPtr doc = len ? htmlReadMemory(body, (int)len, BASE "/x", NULL,
                                          HTML_PARSE_RECOVER | HTML_PARSE_NOERROR |
                                              HTML_PARSE_NOWARNING | HTML_PARSE_NONET)
                         : NULL;
    if (!doc || !xmlDocGetRootElement(doc)) { /* page_parse's empty page */
        xmlFreeDoc(doc);
        doc = htmlNewDocNoDtD(NULL, NULL);
        xmlDocSetRootElement(doc, xmlNewDocNode(doc, NULL, BAD_CAST "html", NULL));
    }
    xmlXPathContextPtr x = xmlXPathNewContext(doc);
    for (size_t i = 0; i < sizeof(xps) / sizeof(xps[0]); i++) {
        char *got = page_string(p, xps[i]);
        char *want = NULL;
        {
            xmlXPathObjectPtr o = xmlXPathEvalExpression(BAD_CAST xps[i], x);
            bool empty =
                !o || (o->type == XPATH_NODESET && (!o->nodesetval || o->nodesetval->nodeNr == 0));
            xmlChar *v = empty ? NULL : xmlXPathCastToString(o);
            /* page_string trims white space (no-break spaces too), NULL for nothing */
            const char *t = v ? (const char *)v : "";
            size_t tl = strlen(t);
            for (;;) {
                if (tl && strchr(" \t\n\r\f\v", *t)) {
                    t++;
                    tl--;
                } else if (tl >= 2 && memcmp(t, "\xc2\xa0", 2) == 0) {
                    t += 2;
                    tl -= 2;
                } else if (tl && strchr(" \t\n\r\f\v", t[tl - 1])) {
                    tl--;
                } else if (tl >= 2 && memcmp(t + tl - 2, "\xc2\xa0", 2) == 0) {
                    tl -= 2;
                } else {
                    break;
                }
            }
            if (tl)
                want = strndup(t, tl);
            xmlFree(v);
            xmlXPathFreeObject(o);
        }
        if ((got == NULL) != (want == NULL) || (got && strcmp(got, want) != 0))
            fail_msg("%s: %s gives [%s], libxml2 [%s]", label, xps[i], got ? got : "(null)",
                     want ? want : "(null)");
        free(got);
        free(want);
    }
    xmlXPathFreeContext(x);
    xmlFreeDoc(doc);
    page_free(p);
}

/* The ids of the canned and 1,000 generated pages, as libxml2 registers them. */
static void test_page_xpath_id_as_libxml2(void **state)
{
    (void)state;
    xmlSetGenericErrorFunc(NULL, silent_xml);
    each_fixture(check_ids_page);
    static struct gen_page g;
    for (int i = 0; i < 1000; i++) {
        gen_page(&g);
        check_ids_page(g.buf, g.len, "generated page");
    }
    xmlSetGenericErrorFunc(NULL, NULL);
}

/* ---- a form's memory (page.c: chunks of its own, values wiped) ---- */

/* What page_test_wiped reported: every stretch, and how many of them held a non-zero byte. */
static struct {
    size_t calls, bytes, dirty;
    size_t last_n; /* the last stretch's length */
} wiped;

static void on_wiped(const void *p, size_t n)
{
    const unsigned char *b = p;
    wiped.calls++;
    wiped.bytes += n;
    wiped.last_n = n;
    for (size_t i = 0; i < n; i++)
        if (b[i]) {
            wiped.dirty++;
            break;
        }
}

/* Every value a set replaces is wiped when it is replaced (a set value may be the password),
 * the values moved by a compaction go with their chunks wiped, and page_form_done wipes every
 * chunk before it goes back to the heap. */
static void test_page_form_wipes_values(void **state)
{
    (void)state;
    struct page *p = load("login.html", BASE "/erp/login");
    struct page_form f;
    char v[3000];

    memset(&wiped, 0, sizeof(wiped));
    page_test_wiped = on_wiped;
    assert_int_equal(page_find_form(p, "//form[@id='loginForm']", &f, NULL, 0), APBOT_OK);
    assert_int_equal(wiped.calls, 0);
    /* each replaced value is reported once, at its length, zeroed */
    size_t old_len = strlen(field(&f, "j_password"));
    for (int i = 0; i < 2000; i++) {
        size_t n = (size_t)(i * 37) % sizeof(v);
        memset(v, 'a' + i % 26, n);
        v[n] = '\0';
        memcpy(v, "S3cret", n < 6 ? n : 6);
        size_t calls = wiped.calls;
        assert_int_equal(page_form_set(&f, "j_password", v), APBOT_OK);
        assert_true(wiped.calls > calls);
        if (wiped.calls == calls + 1) /* no compaction: the old value alone */
            assert_int_equal(wiped.last_n, old_len);
        assert_string_equal(field(&f, "j_password"), v);
        old_len = n;
    }
    assert_int_equal(page_form_press(&f, "login", NULL), APBOT_OK);
    assert_string_equal(field(&f, "_csrf"), "c5f0a1e2b3d4c5f6a7b8"); /* moved, not changed */
    size_t before_done = wiped.calls;
    page_form_done(&f);
    assert_true(wiped.calls >= before_done + 2); /* the chunks of both blocks */
    assert_int_equal(wiped.dirty, 0);
    page_test_wiped = NULL;
    page_free(p);
}

/* Sets, selects and presses without end: the form's memory stays bounded (the values it
 * replaces do not pile up) and holds the right values all along. */
static void test_page_form_many_changes_bounded(void **state)
{
    (void)state;
    struct page *p = parse_str(classic_form, BASE "/ap.pl?action=add");
    struct page_form f;
    static const char *const names[] = {"vendor", "memo", "amount_1", "form_id"};
    char want[4][2100], v[2100];
    static const char *const presses[][2] = {
        {"action", "save"}, {"go", NULL}, {"nav", NULL}, {"other", "Other"}, {"action", "update"}};
    size_t peak = 0;

    assert_int_equal(page_find_form(p, "//form[@name='invoice']", &f, NULL, 0), APBOT_OK);
    for (size_t k = 0; k < 4; k++)
        snprintf(want[k], sizeof(want[k]), "%s", field(&f, names[k]));
    for (int i = 0; i < 60000; i++) {
        size_t k = (size_t)i % 4, n = (size_t)(i * 131) % 2000;
        for (size_t j = 0; j < n; j++)
            v[j] = (char)('a' + (i + (int)j) % 26);
        v[n] = '\0';
        assert_int_equal(page_form_set(&f, names[k], v), APBOT_OK);
        memcpy(want[k], v, n + 1);
        if (i % 3 == 0)
            assert_int_equal(page_form_press(&f, presses[i % 5][0], presses[i % 5][1]), APBOT_OK);
        if (i % 7 == 0)
            assert_int_equal(page_form_select(&f, "account_1", i % 2 ? "5800--Travel" : "Dup label",
                                              PAGE_OPTION_LABEL, NULL),
                             i % 2 ? APBOT_OK : APBOT_E_CONFLICT);
        size_t bytes = page_form_bytes(&f);
        if (bytes > peak)
            peak = bytes;
        /* live values are at most 4 x 2 KB: far below what 60,000 sets would pile up */
        if (bytes > 128 * 1024)
            fail_msg("set %d: the form holds %zu bytes", i, bytes);
        if (i % 997 == 0)
            for (size_t j = 0; j < 4; j++)
                assert_string_equal(field(&f, names[j]), want[j]);
    }
    for (size_t j = 0; j < 4; j++)
        assert_string_equal(field(&f, names[j]), want[j]);
    assert_string_equal(field(&f, "currency"), "EUR");
    assert_true(peak > 8 * 1024); /* it did hold dead values for a while */
    page_form_done(&f);
    assert_int_equal(page_form_bytes(&f), 0);
    page_free(p);
}

/* A form far larger than a chunk (thousands of fields, options, image buttons, values over
 * the largest chunk): everything read as on a small form, in memory of the page's order. */
static void test_page_form_large(void **state)
{
    (void)state;
    enum { FIELDS = 6000, OPTIONS = 30000, IMAGES = 300, BIG = 600 * 1024 };
    size_t cap = 8 * 1024 * 1024, len = 0;
    char *html = malloc(cap);
    assert_non_null(html);
#define ADD(...) (len += (size_t)snprintf(html + len, cap - len, __VA_ARGS__))
    ADD("<html><body><form id=big method=post action=/big>");
    for (int i = 0; i < FIELDS; i++)
        ADD("<input name=f%d value=v%d%s>", i, i, i % 3 ? "" : " type=hidden");
    ADD("<select name=s>");
    for (int i = 0; i < OPTIONS; i++)
        ADD("<option%s>  label  %d </option>", i == OPTIONS - 1 ? " selected" : "", i);
    ADD("</select><textarea name=t>");
    for (int i = 0; i < BIG / 8; i++)
        ADD("tttttttt");
    ADD("</textarea>");
    for (int i = 0; i < IMAGES; i++)
        ADD("<input type=image name=img%d src=x>", i);
    ADD("</form></body></html>");
#undef ADD
    assert_true(len < cap - 1);
    struct page *p = NULL;
    assert_int_equal(page_parse(html, len, BASE "/", &p, NULL, 0), APBOT_OK);
    struct page_form f;
    assert_int_equal(page_find_form(p, "//form", &f, NULL, 0), APBOT_OK);
    assert_int_equal(f.n, FIELDS + 2);
    assert_int_equal(f.n_controls, FIELDS + 2);
    char want[64];
    for (size_t i = 0; i < FIELDS; i++) {
        snprintf(want, sizeof(want), "f%zu", i);
        assert_string_equal(f.names[i], want);
        assert_ptr_equal(f.names[i], f.controls[i]); /* one string */
        snprintf(want, sizeof(want), "v%zu", i);
        assert_string_equal(f.values[i], want);
        assert_int_equal(f.hidden[i], i % 3 == 0);
    }
    assert_int_equal(f.n_selects, 1);
    assert_int_equal(f.selects[0].n_options, OPTIONS);
    for (size_t i = 0; i < OPTIONS; i++) {
        snprintf(want, sizeof(want), "label %zu", i);
        assert_string_equal(f.selects[0].options[i].value, want);
        assert_string_equal(f.selects[0].options[i].label, want);
    }
    snprintf(want, sizeof(want), "label %d", OPTIONS - 1);
    assert_string_equal(field(&f, "s"), want);
    assert_int_equal(strlen(field(&f, "t")), BIG);
    assert_int_equal(f.n_buttons, IMAGES);
    /* the memory follows the page (the bound a hostile page meets), not a multiple of it */
    size_t bytes = page_form_bytes(&f);
    if (bytes > 3 * len)
        fail_msg("a %zu-byte page's form holds %zu bytes", len, bytes);
    for (int round = 0; round < 3; round++)
        for (size_t b = 0; b < IMAGES; b += 7) {
            snprintf(want, sizeof(want), "img%zu", b);
            assert_int_equal(page_form_press(&f, want, NULL), APBOT_OK);
        }
    assert_string_equal(f.names[f.n - 2], "img294.x");
    assert_string_equal(f.names[f.n - 1], "img294.y");
    assert_string_equal(f.values[f.n - 1], "0");
    assert_int_equal(f.n, FIELDS + 4);
    /* a value larger than the largest chunk, replaced and set again */
    char *huge = malloc(BIG + 1);
    memset(huge, 'h', BIG);
    huge[BIG] = '\0';
    assert_int_equal(page_form_set(&f, "t", huge), APBOT_OK);
    assert_int_equal(page_form_set(&f, "f1", huge), APBOT_OK);
    assert_int_equal(page_form_set(&f, "t", "short"), APBOT_OK);
    assert_int_equal(page_form_set(&f, "f1", huge + 1), APBOT_OK);
    assert_string_equal(field(&f, "f1"), huge + 1);
    assert_string_equal(field(&f, "t"), "short");
    assert_string_equal(field(&f, "f5999"), "v5999");
    free(huge);
    page_form_done(&f);
    page_free(p);
    free(html);
}

/* A page of n copies of unit (a format taking the copy's number) inside a form. */
static struct page *parse_repeated(const char *head, const char *unit, int n, const char *tail,
                                   size_t *ret_len)
{
    size_t one = (size_t)snprintf(NULL, 0, unit, n); /* the longest copy */
    size_t cap = strlen(head) + strlen(tail) + (size_t)n * one + 1, len = 0;
    char *html = malloc(cap);
    assert_non_null(html);
    len += (size_t)snprintf(html, cap, "%s", head);
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(html + len, cap - len, unit, i);
    len += (size_t)snprintf(html + len, cap - len, "%s", tail);
    assert_true(len < cap);
    struct page *p = NULL;
    assert_int_equal(page_parse(html, len, BASE "/", &p, NULL, 0), APBOT_OK);
    free(html);
    if (ret_len)
        *ret_len = len;
    return p;
}

/* The bounds a hostile page meets are today's: 10,000 control elements and selects a form,
 * 200,000 options a select; what checked radios uncheck while a form is built does not stay in
 * its memory, and each radio group keeps its last checked. */
static void test_page_form_limits(void **state)
{
    (void)state;
    struct page_form f;
    char err[APBOT_ERR_LEN];
    struct page *p =
        parse_repeated("<form action=/x>", "<select name=s%d></select>", 10000, "</form>", NULL);
    assert_int_equal(page_find_form(p, "//form", &f, NULL, 0), APBOT_OK);
    assert_int_equal(f.n_selects, 10000);
    assert_int_equal(f.n_controls, 10000);
    page_form_done(&f);
    page_free(p);
    p = parse_repeated("<form action=/x>", "<select name=s%d></select>", 10001, "</form>", NULL);
    memset(&f, 0x5a, sizeof(f));
    err[0] = '\0';
    assert_int_equal(page_find_form(p, "//form", &f, err, sizeof(err)), APBOT_E_LIMIT);
    assert_non_null(strstr(err, "has more controls, selects or options than apbot reads"));
    assert_int_equal(f.n, (size_t)0x5a5a5a5a5a5a5a5aULL);
    page_free(p);

    p = parse_repeated("<form action=/x><select name=s>", "<option>%d", 200000, "</select></form>",
                       NULL);
    assert_int_equal(page_find_form(p, "//form", &f, NULL, 0), APBOT_OK);
    assert_int_equal(f.selects[0].n_options, 200000);
    assert_string_equal(f.selects[0].options[199999].label, "199999");
    assert_string_equal(field(&f, "s"), "0");
    page_form_done(&f);
    page_free(p);
    p = parse_repeated("<form action=/x><select name=s>", "<option>%d", 200001, "</select></form>",
                       NULL);
    assert_int_equal(page_find_form(p, "//form", &f, NULL, 0), APBOT_E_LIMIT);
    page_free(p);

    /* control elements: 10,000 (of one name), not one more */
    size_t len;
    p = parse_repeated("<form action=/x>", "<input type=radio name=r checked value=%0200d>", 10000,
                       "</form>", &len);
    assert_int_equal(page_find_form(p, "//form", &f, NULL, 0), APBOT_OK);
    assert_int_equal(f.n, 1);
    assert_int_equal(strlen(field(&f, "r")), 200);
    assert_true(strncmp(field(&f, "r") + 195, "09999", 5) == 0);
    if (page_form_bytes(&f) > 64 * 1024) /* 2 MB of values were unchecked on the way */
        fail_msg("a form of one radio holds %zu bytes", page_form_bytes(&f));
    page_form_done(&f);
    page_free(p);
    p = parse_repeated("<form action=/x>", "<input name=t%d>", 10001, "</form>", NULL);
    err[0] = '\0';
    assert_int_equal(page_find_form(p, "//form", &f, err, sizeof(err)), APBOT_E_LIMIT);
    assert_non_null(strstr(err, "has more controls, selects or options than apbot reads"));
    page_free(p);

    /* 5,000 groups of two checked radios each: each group submits its last (a browser's
     * answer), found by its control string among the groups */
    p = parse_repeated("<form action=/x>",
                       "<input type=radio name=g%1$d checked value=a%1$d>"
                       "<input type=radio name=g%1$d checked value=b%1$d>",
                       5000, "</form>", NULL);
    assert_int_equal(page_find_form(p, "//form", &f, NULL, 0), APBOT_OK);
    assert_int_equal(f.n, 5000);
    assert_string_equal(field(&f, "g0"), "b0");
    assert_string_equal(field(&f, "g4999"), "b4999");
    for (size_t i = 0; i < f.n; i++)
        if (f.values[i][0] != 'b' || strcmp(f.names[i] + 1, f.values[i] + 1) != 0)
            fail_msg("field %zu: %s=%s", i, f.names[i], f.values[i]);
    page_form_done(&f);
    page_free(p);
}

/* A value set from the form's own strings (its current value, another field's value, an
 * option's) is copied before the old one goes; a zeroed form takes a control. */
static void test_page_form_set_from_itself(void **state)
{
    (void)state;
    struct page *p = parse_str(classic_form, BASE "/ap.pl?action=add");
    struct page_form f;
    char got[1024];

    assert_int_equal(page_find_form(p, "//form[@name='invoice']", &f, NULL, 0), APBOT_OK);
    assert_int_equal(page_form_set(&f, "memo", field(&f, "memo")), APBOT_OK);
    assert_int_equal(page_form_set(&f, "vendor", field(&f, "form_id")), APBOT_OK);
    assert_int_equal(page_form_set(&f, "amount_1", f.selects[0].options[2].label), APBOT_OK);
    fields_str(&f, got, sizeof(got));
    assert_string_equal(got, "form_id=f1&vendor=f1&memo=m&currency=EUR&account_1=&amount_1="
                             "Swiss franc");
    page_form_done(&f);

    struct page_form z;
    memset(&z, 0, sizeof(z));
    assert_int_equal(page_form_set(&z, "a", "1"), APBOT_E_NOTFOUND);
    assert_int_equal(page_form_add(&z, "a", "1"), APBOT_OK);
    assert_int_equal(page_form_set(&z, "a", "2"), APBOT_OK);
    fields_str(&z, got, sizeof(got));
    assert_string_equal(got, "a=2");
    page_form_done(&z);
    page_free(p);
}

/* A control's attributes are told apart by their whole names, in any order, however many share
 * a first letter with the ones a form reads (checked, disabled, selected, multiple, value, type,
 * name, form, label); an empty or valueless one counts as there. */
static void test_page_form_attribute_names(void **state)
{
    (void)state;
    static const char html[] =
        "<form id=f action=/x><fieldset data-disabled=1 dir=ltr>"
        "<input class=c name=c1 type=checkbox value=1 checksum=2>"
        "<input name=c2 type=checkbox checked=''>"
        "<input data-x=1 name=d1 dir=rtl value=v1 valign=top>"
        "<input name=d2 disabled=''><input nam=n1 name=n2 value=v2 valu=x typ=hidden>"
        "<input name=d3 disabledx value=v3 formaction=/y form-x=1>"
        "<select name=s1 size=3 style=x><option style=y value=a>A"
        "<option value=b selected=selected>B</select>"
        "<select name=s2 multiple maxlength=3><option selected value=m1>M1"
        "<option sel value=m2>M2<option selected value=m3 label=L3 lang=en>M3</select>"
        "<select name=s3 max=1><option value=t1 selected><option selected value=t2 lab=z>T</select>"
        "<input name=h type=hidden types=text value=hv>"
        "</fieldset></form>";
    struct page *p = parse_str(html, BASE "/");
    struct page_form f;
    char got[1024];

    assert_int_equal(page_find_form(p, "//form", &f, NULL, 0), APBOT_OK);
    fields_str(&f, got, sizeof(got));
    assert_string_equal(got, "c2=on&d1=v1&n2=v2&d3=v3&s1=b&s2=m1&s2=m3&s3=t2&h=hv");
    assert_true(f.hidden[f.n - 1]);
    assert_false(f.hidden[2]);
    assert_false(f.selects[0].multiple);
    assert_true(f.selects[1].multiple);
    assert_false(f.selects[2].multiple);
    assert_string_equal(f.selects[1].options[2].label, "L3");
    assert_string_equal(f.selects[2].options[1].label, "T");
    assert_true(page_form_has(&f, "c1"));
    assert_false(page_form_has(&f, "d2"));
    page_form_done(&f);
    page_free(p);
}

/* An option's or a textarea's text is its content whatever the markup inside (several text
 * nodes, elements, comments, entities), as libxml2's xmlNodeGetContent gives it. */
static void test_page_form_text_content(void **state)
{
    (void)state;
    static const char html[] =
        "<form action=/x><select name=s><option>a<b>b</b>c</option>"
        "<option> x &amp; <i> y </i><!-- no -->z </option><option></option>"
        "<option label=''>l<b></b></option><option>&nbsp;one&nbsp;</option></select>"
        "<textarea name=t>\n<b>bold</b> &lt;tag&gt;</textarea><textarea name=u></textarea>"
        "<textarea name=v>\r\nplain</textarea></form>";
    struct page *p = parse_str(html, BASE "/");
    struct page_form f;

    assert_int_equal(page_find_form(p, "//form", &f, NULL, 0), APBOT_OK);
    assert_int_equal(f.selects[0].n_options, 5);
    static const char *const want[] = {"abc", "x & y z", "", "l", "one"};
    for (size_t k = 0; k < 5; k++) {
        assert_string_equal(f.selects[0].options[k].value, want[k]);
        assert_string_equal(f.selects[0].options[k].label, want[k]);
    }
    assert_string_equal(field(&f, "s"), "abc");
    assert_string_equal(field(&f, "t"), "bold <tag>");
    assert_string_equal(field(&f, "u"), "");
    assert_string_equal(field(&f, "v"), "plain");
    page_form_done(&f);
    page_free(p);
}

#ifdef PAGE_TEST_ASAN
/* Under AddressSanitizer the form's memory is poisoned where a stale pointer would read: a
 * replaced value, the byte after a value, and everything after page_form_done. */
static void test_page_form_poisoned(void **state)
{
    (void)state;
    struct page *p = parse_str(classic_form, BASE "/ap.pl?action=add");
    struct page_form f;

    assert_int_equal(page_find_form(p, "//form[@name='invoice']", &f, NULL, 0), APBOT_OK);
    const char *memo = field(&f, "memo");
    assert_false(__asan_address_is_poisoned(memo));
    assert_true(__asan_address_is_poisoned(memo + strlen(memo) + 1));
    assert_true(__asan_address_is_poisoned(f.names[0] + strlen(f.names[0]) + 1));
    assert_int_equal(page_form_set(&f, "memo", "new"), APBOT_OK);
    assert_true(__asan_address_is_poisoned(memo));
    /* a value of 8 bytes, NUL included, and the value set after it: a gap between them */
    assert_int_equal(page_form_set(&f, "vendor", "1234567"), APBOT_OK);
    assert_int_equal(page_form_set(&f, "amount_1", "1"), APBOT_OK);
    assert_true(__asan_address_is_poisoned(field(&f, "vendor") + 8));
    const char *name = f.names[0], *value = f.values[0], *option = f.selects[0].options[0].label;
    page_form_done(&f);
    assert_true(__asan_address_is_poisoned(name));
    assert_true(__asan_address_is_poisoned(value));
    assert_true(__asan_address_is_poisoned(option));
    page_free(p);
}
#endif

static void test_page_bad_arguments(void **state)
{
    (void)state;
    struct page *p = (struct page *)0x1;
    char err[APBOT_ERR_LEN] = "";
    assert_int_equal(page_parse(NULL, 5, NULL, &p, err, sizeof(err)), APBOT_E_INVAL);
    assert_ptr_equal(p, (struct page *)0x1);
    assert_false(page_has(NULL, "//x"));
    assert_null(page_string(NULL, "//x"));
    assert_int_equal(page_form_set(NULL, "a", "b"), APBOT_E_INVAL);
    assert_int_equal(page_form_press(NULL, "a", NULL), APBOT_E_INVAL);
    page_form_done(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_page_press_by_name_and_value),
        cmocka_unit_test(test_page_select_options),
        cmocka_unit_test(test_page_select_disabled_group_not_submitted),
        cmocka_unit_test(test_page_radio_group_one_value),
        cmocka_unit_test(test_page_disabled_fieldset),
        cmocka_unit_test(test_page_form_has_and_add),
        cmocka_unit_test(test_page_form_wipes_values),
        cmocka_unit_test(test_page_form_many_changes_bounded),
        cmocka_unit_test(test_page_form_large),
        cmocka_unit_test(test_page_form_limits),
        cmocka_unit_test(test_page_form_set_from_itself),
        cmocka_unit_test(test_page_form_text_content),
        cmocka_unit_test(test_page_form_attribute_names),
#ifdef PAGE_TEST_ASAN
        cmocka_unit_test(test_page_form_poisoned),
#endif
        cmocka_unit_test(test_page_rule_text_table),
        cmocka_unit_test(test_page_rule_text_forged_banners),
        cmocka_unit_test(test_page_rule_text_2mb),
        cmocka_unit_test(test_page_rule_text_as_before),
        cmocka_unit_test(test_page_login_form),
        cmocka_unit_test(test_page_entry_form_defaults),
        cmocka_unit_test(test_page_validation_page),
        cmocka_unit_test(test_page_confirm_form_hidden_fields),
        cmocka_unit_test(test_page_posted_banner),
        cmocka_unit_test(test_page_search_rows),
        cmocka_unit_test(test_page_search_none),
        cmocka_unit_test(test_page_journal_next),
        cmocka_unit_test(test_page_garbled),
        cmocka_unit_test(test_page_broken_markup),
        cmocka_unit_test(test_page_form_controls),
        cmocka_unit_test(test_page_excerpt_bounds_utf8),
        cmocka_unit_test(test_page_excerpt_as_before),
        cmocka_unit_test(test_page_paths_as_libxml2),
        cmocka_unit_test(test_page_xpath_id),
        cmocka_unit_test(test_page_xpath_id_as_libxml2),
        cmocka_unit_test(test_page_threads),
        cmocka_unit_test(test_page_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
