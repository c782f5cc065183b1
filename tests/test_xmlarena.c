/*
 * test_xmlarena.c - libxml2's allocator with page arenas: installed before main; blocks
 * 16-byte aligned in and out of an arena; an arena block freed after its arena ended is left
 * alone, a heap block grown inside an arena stays on the heap (it outlives the arena); the
 * last block shrinks and grows in place; another thread allocates on the heap while this one
 * has an arena; a parse in an arena leaves no per-thread error behind; a 3 MB page grows the
 * arena past its first chunks and goes back in one step; page_parse and its queries on many
 * pages in a row; blocks carved from an arena that is not active (xmlarena_alloc), and an
 * arena that holds nothing but itself. Under AddressSanitizer (make test's second pass) a use of
 * released arena memory would stop the test.
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

#include <libxml/HTMLparser.h>
#include <libxml/xmlerror.h>
#include <libxml/xmlmemory.h>

#include "apbot/error.h"
#include "web/page.h"
#include "web/xmlarena.h"

static void test_installed(void **state)
{
    (void)state;
    assert_true(xmlarena_installed());
    /* libxml2 allocates through it outside any arena too: a heap block, freed as one */
    char *p = xmlMalloc(10);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 16, 0);
    memcpy(p, "123456789", 10);
    xmlFree(p);
}

static void test_blocks_and_frees(void **state)
{
    (void)state;
    char *heap = xmlMalloc(100); /* before the arena: a heap block */
    struct xmlarena *a = xmlarena_begin();
    assert_non_null(a);
    assert_null(xmlarena_begin()); /* not nested */
    char *kept[64];
    for (int i = 0; i < 64; i++) {
        kept[i] = xmlMalloc((size_t)(i * 37 + 1));
        assert_non_null(kept[i]);
        assert_int_equal((uintptr_t)kept[i] % 16, 0);
        memset(kept[i], 'a' + i % 26, (size_t)(i * 37 + 1));
    }
    /* the heap block grows on the heap, not in the arena */
    heap = xmlRealloc(heap, 5000);
    assert_non_null(heap);
    memset(heap, 'h', 5000);
    /* the last block grows and shrinks where it is */
    char *last = xmlMalloc(32);
    char *grown = xmlRealloc(last, 2000);
    assert_ptr_equal(grown, last);
    memset(grown, 'g', 2000);
    char *shrunk = xmlRealloc(grown, 16);
    assert_ptr_equal(shrunk, last);
    char *copy = (char *)xmlStrdup(BAD_CAST "copied");
    assert_string_equal(copy, "copied");
    size_t bytes = xmlarena_bytes(a);
    assert_true(bytes >= 64 * 1024);
    xmlarena_end(a);
    /* after the end: the thread is back on the heap; arena blocks are left to the arena */
    char *after = xmlMalloc(8);
    xmlFree(kept[3]);
    xmlFree(copy);
    for (int i = 0; i < 64; i++)
        assert_int_equal((unsigned char)kept[i][0], 'a' + i % 26);
    xmlarena_free(a);
    xmlFree(after);
    assert_int_equal(heap[4999], 'h');
    xmlFree(heap);
}

static void test_alloc_outside_the_arena(void **state)
{
    (void)state;
    struct xmlarena *a = xmlarena_begin();
    assert_non_null(a);
    char *tree = xmlMalloc(100); /* what the parse made */
    memset(tree, 't', 100);
    xmlarena_end(a);
    size_t bytes = xmlarena_bytes(a);
    char *small = xmlarena_alloc(a, 100), *big = xmlarena_alloc(a, 300 * 1024);
    assert_int_equal((uintptr_t)small % 16, 0);
    assert_int_equal((uintptr_t)big % 16, 0);
    memset(small, 's', 100);
    memset(big, 'b', 300 * 1024);
    assert_true(xmlarena_bytes(a) >= bytes + 300 * 1024); /* a chunk of its own */
    struct xmlarena *next = xmlarena_begin(); /* the thread is off any arena: a next page */
    assert_non_null(next);
    xmlarena_free(next);
    assert_int_equal(small[99], 's');
    assert_int_equal(big[300 * 1024 - 1], 'b');
    assert_int_equal(tree[0], 't');
    xmlarena_free(a);
    /* an arena that holds nothing but itself goes back as well */
    for (int i = 0; i < 100; i++)
        xmlarena_free(xmlarena_begin());
}

struct other {
    char *block;
};

static void *other_thread(void *arg)
{
    struct other *o = arg;
    o->block = xmlMalloc(64); /* this thread has no arena: heap */
    if (o->block)
        memset(o->block, 'o', 64);
    return NULL;
}

static void test_other_thread_on_heap(void **state)
{
    (void)state;
    struct xmlarena *a = xmlarena_begin();
    assert_non_null(a);
    struct other o = {0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, other_thread, &o), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    xmlarena_free(a);
    /* the other thread's block outlives this arena */
    assert_non_null(o.block);
    assert_int_equal(o.block[63], 'o');
    xmlFree(o.block);
}

static void test_parse_in_arena_leaves_no_error(void **state)
{
    (void)state;
    static const char bad[] = "<html><body><p>unclosed <b>bold <table><tr><td>x</body>&bogus;";
    struct page *p = NULL;
    char err[APBOT_ERR_LEN];
    xmlResetLastError();
    assert_int_equal(page_parse(bad, sizeof(bad) - 1, "http://127.0.0.1/", &p, err, sizeof(err)),
                     APBOT_OK);
    /* the parser's per-thread error copy would point into the arena */
    assert_null(xmlGetLastError());
    char *text = page_string(p, "//td");
    assert_non_null(text);
    assert_string_equal(text, "x");
    free(text);
    page_free(p);
}

static void test_big_page(void **state)
{
    (void)state;
    size_t n = 3 * 1024 * 1024;
    char *body = malloc(n + 64);
    assert_non_null(body);
    size_t o = (size_t)snprintf(body, 64, "<html><body><table>");
    while (o + 40 < n)
        o += (size_t)snprintf(body + o, n - o, "<tr><td class=\"c\">row %zu</td></tr>\n", o);
    o += (size_t)snprintf(body + o, n + 64 - o, "</table></body></html>");
    struct page *p = NULL;
    char err[APBOT_ERR_LEN];
    assert_int_equal(page_parse(body, o, "http://127.0.0.1/", &p, err, sizeof(err)), APBOT_OK);
    free(body);
    char *first = page_string(p, "(//td)[1]");
    assert_non_null(first);
    assert_string_equal(first, "row 19");
    free(first);
    page_free(p);
}

static void test_many_pages(void **state)
{
    (void)state;
    static const char form[] =
        "<html><body><form id=\"f\" action=\"/x\" method=\"post\">"
        "<input type=\"hidden\" name=\"_csrf\" value=\"tok\">"
        "<input name=\"amount\" value=\"1,00\"><select name=\"gl\"><option value=\"6000\" "
        "selected>6000 Goods</option></select><input type=\"submit\" name=\"go\" value=\"Go\">"
        "</form><span class=\"msgText\">I001: booked as 4711</span></body></html>";
    for (int i = 0; i < 500; i++) {
        struct page *p = NULL;
        char err[APBOT_ERR_LEN];
        assert_int_equal(
            page_parse(form, sizeof(form) - 1, "http://127.0.0.1/", &p, err, sizeof(err)),
            APBOT_OK);
        char *t = page_string(p, "//span[@class='msgText']");
        assert_non_null(t);
        assert_string_equal(t, "I001: booked as 4711");
        free(t);
        page_free(p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_installed),
        cmocka_unit_test(test_blocks_and_frees),
        cmocka_unit_test(test_other_thread_on_heap),
        cmocka_unit_test(test_alloc_outside_the_arena),
        cmocka_unit_test(test_parse_in_arena_leaves_no_error),
        cmocka_unit_test(test_big_page),
        cmocka_unit_test(test_many_pages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
