/*
 * test_page_fast.c - page_fast.c against libxml2 itself: wherever the fast path builds a
 * tree, it is libxml2's tree for the same bytes, node by node (types, names, text, attributes
 * and their ids, the DTD, the document's encoding), also when its ids are registered after
 * the parse (page_fast_ids); wherever it cannot promise that, it declines. Inputs: the canned pages
 * of tests/data/pages (the plain ones must take the fast path: otherwise the fast path is not doing
 * its job), pages generated from a grammar that mixes the subset with what lies outside it
 * (misnested and auto-closed tags, implied elements, bare '&' and '<', control bytes, odd charsets,
 * unterminated constructs; a third of the plain pages with CR LF line ends, as CGI-era ERPs write
 * them), and byte-level mutations of the canned pages. A mismatch prints the input and the first
 * difference.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/HTMLparser.h>
#include <libxml/hash.h>
#include <libxml/tree.h>
#include <libxml/valid.h>

#include "helpers/canned.h"
#include "helpers/tree_diff.h"
#include "helpers/xorshift.h"
#include "web/page-int.h"

/* ---- one input through both parsers ---- */

struct tally {
    unsigned fast, declined;
};

static void silent(void *ctx, const char *msg, ...)
{
    (void)ctx;
    (void)msg;
}

/* Whether any attribute of the document is typed as an id. */
static bool id_typed(htmlDocPtr doc)
{
    xmlNodePtr root = xmlDocGetRootElement(doc);
    for (xmlNodePtr n = root; n; n = page_walk_next(n, root, true))
        for (xmlAttrPtr a = n->type == XML_ELEMENT_NODE ? n->properties : NULL; a; a = a->next)
            if (a->atype == XML_ATTRIBUTE_ID)
                return true;
    return false;
}

/* Fails the test on a mismatch; returns whether the fast path took the page. */
static bool check_one(const char *body, size_t len, struct tally *t, const char *label)
{
    htmlDocPtr fast = page_fast_parse(body, len, "http://127.0.0.1:8080/erp/x");
    if (!fast) {
        t->declined++;
        return false;
    }
    t->fast++;
    htmlDocPtr ref =
        htmlReadMemory(body, (int)len, "http://127.0.0.1:8080/erp/x", NULL, PAGE_HTML_OPTIONS);
    assert_non_null(ref);
    char why[400];
    const char *d = tree_diff(fast, ref, why, sizeof(why));
    if (d) {
        fprintf(stderr, "---- %s (%zu bytes): %s\n%.*s\n----\n", label, len, d,
                (int)(len > 4000 ? 4000 : len), body);
        fail_msg("fast tree differs from libxml2's: %s", d);
    }
    /* The same document with its ids left for later: none until page_fast_ids, then the same
     * ones as when the parse registers them. */
    htmlDocPtr later = page_fast_parse_ids_later(body, len, "http://127.0.0.1:8080/erp/x");
    assert_non_null(later);
    assert_null(later->ids);
    assert_false(id_typed(later));
    page_fast_ids(later);
    assert_int_equal(id_typed(later), later->ids && xmlHashSize(later->ids) > 0);
    d = tree_diff(later, ref, why, sizeof(why));
    if (d) {
        fprintf(stderr, "---- %s (%zu bytes), ids registered later: %s\n%.*s\n----\n", label, len,
                d, (int)(len > 4000 ? 4000 : len), body);
        fail_msg("fast tree with ids registered later differs from libxml2's: %s", d);
    }
    xmlFreeDoc(later);
    xmlFreeDoc(fast);
    xmlFreeDoc(ref);
    return true;
}

/* ---- inputs ---- */

struct fixture {
    char name[128];
    char *body;
    size_t len;
};

struct fixtures {
    struct fixture *f;
    int n, max;
};

static void keep_fixture(const char *body, size_t len, const char *name, void *ctx)
{
    struct fixtures *fs = ctx;
    if (fs->n == fs->max)
        return;
    struct fixture *f = &fs->f[fs->n++];
    f->body = malloc(len + 1);
    assert_non_null(f->body);
    memcpy(f->body, body, len + 1);
    f->len = len;
    snprintf(f->name, sizeof(f->name), "%.100s", name);
}

static int load_fixtures(struct fixture *out, int max)
{
    struct fixtures fs = {out, 0, max};
    canned_pages_each(keep_fixture, &fs);
    return fs.n;
}

static void free_fixtures(struct fixture *f, int n)
{
    for (int i = 0; i < n; i++)
        free(f[i].body);
}

static uint64_t rng_state;

static uint32_t rnd(uint32_t n)
{
    return xorshift_below(&rng_state, n);
}

static const char *pick(const char *const *list, size_t n)
{
    return list[rnd((uint32_t)n)];
}
#define PICK(list) pick(list, sizeof(list) / sizeof(list[0]))

struct gen {
    char *buf;
    size_t len, cap;
};

static void put(struct gen *g, const char *s)
{
    size_t n = strlen(s);
    if (g->len + n + 1 > g->cap) {
        g->cap = (g->len + n + 1) * 2;
        g->buf = realloc(g->buf, g->cap);
        assert_non_null(g->buf);
    }
    memcpy(g->buf + g->len, s, n + 1);
    g->len += n;
}

static const char *const text_bits[] = {
    "Invoice",
    " ",
    "\n",
    "  ",
    "AP-2026-000001",
    "3.912,36",
    "&amp;",
    "&lt;b&gt;",
    "&middot;",
    "&nbsp;",
    "&#65;",
    "&#x4A;",
    "&#X20AC;",
    "&#128512;",
    "&foo;",
    "&copy2026",
    "& ",
    "&",
    "a&b",
    "caf\xc3\xa9",
    "\xe2\x82\xac 12",
    "\xf0\x9f\x98\x80",
    "\t",
    "x < y",
    "&#0;",
    "&#xD800;",
    "&#65",
    "&amp",
    "&Amp;",
    "&#99999999;",
    "\r\n",
    "]]>",
    "--",
    "\xc3\xa9t\xc3\xa9",
    "&eacute;",
    "&quot;",
    "&apos;",
    "\xc2\x85",
    "&;",
    "&#;",
    "&#x;",
};
static const char *const tags[] = {
    "div",      "span",     "p",        "table",   "tr",   "td",      "th",        "form",
    "select",   "option",   "textarea", "label",   "a",    "b",       "i",         "ul",
    "li",       "h1",       "small",    "strong",  "em",   "button",  "fieldset",  "legend",
    "pre",      "tbody",    "thead",    "caption", "dl",   "dt",      "dd",        "font",
    "center",   "noscript", "address",  "tt",      "u",    "ol",      "code",      "blockquote",
    "optgroup", "title",    "DIV",      "Td",      "SPAN", "section", "custom-el", "my_tag",
    "o:p",      "nav",
};
static const char *const voids[] = {"br", "hr",  "input", "img",   "meta", "link",
                                    "BR", "col", "area",  "param", "base", "wbr"};
static const char *const attr_names[] = {
    "id",      "class",    "name",  "value",     "type",     "href",   "selected",
    "checked", "disabled", "ID",    "Class",     "data-x",   "data_y", "x.y",
    "onclick", "style",    "title", "for",       "action",   "method", "readonly",
    "nowrap",  "xml:lang", "size",  "maxlength", "multiple", "a-b-c",
};
static const char *const attr_values[] = {
    "\"x\"",
    "'y'",
    "\"\"",
    "''",
    "plain",
    "\"a b\"",
    "\"a&amp;b\"",
    "\"/erp/x?a=1&b=2\"",
    "\"&middot;\"",
    "\"&#65;\"",
    "\"&zz;\"",
    "\"a>b\"",
    "x/",
    "\"caf\xc3\xa9\"",
    "'\"'",
    "\"&\"",
    "\"&#0;\"",
    "\"\n\"",
    "\"tab\there\"",
    "=",
    "\"&lt\"",
    "'&nbsp;x'",
    "\"&#x110000;\"",
};

static void gen_attrs(struct gen *g)
{
    int n = (int)rnd(4);
    for (int i = 0; i < n; i++) {
        put(g, PICK(((const char *const[]){" ", " ", "\n", "  ", "\t"})));
        put(g, PICK(attr_names));
        switch (rnd(6)) {
        case 0:
            break; /* no value */
        case 1:
            put(g, " = ");
            put(g, PICK(attr_values));
            break;
        default:
            put(g, "=");
            put(g, PICK(attr_values));
        }
    }
    if (rnd(8) == 0)
        put(g, " ");
}

static void gen_content(struct gen *g, int depth)
{
    int n = (int)rnd(5);
    for (int i = 0; i < n; i++) {
        uint32_t r = rnd(20);
        if (r < 7 || depth > 6) {
            put(g, PICK(text_bits));
        } else if (r < 13) {
            const char *t = PICK(tags);
            put(g, "<");
            put(g, t);
            gen_attrs(g);
            if (rnd(20) == 0) {
                put(g, "/>");
                continue;
            }
            put(g, ">");
            gen_content(g, depth + 1);
            if (rnd(15) != 0) {
                put(g, "</");
                put(g, rnd(10) == 0 ? PICK(tags) : t);
                put(g, rnd(20) == 0 ? " >" : ">");
            }
        } else if (r < 15) {
            put(g, "<");
            put(g, PICK(voids));
            gen_attrs(g);
            put(g, PICK(((const char *const[]){">", ">", "/>", " />"})));
            if (rnd(10) == 0)
                put(g, "</br>");
        } else if (r < 16) {
            put(g, PICK(((const char *const[]){"<!-- c -->", "<!---->", "<!--a--b-->",
                                               "<!-- x --!>", "<!-->", "<!--->", "<!-- <b> -->",
                                               "<!--unterminated"})));
        } else if (r < 17) {
            put(g, PICK(((const char *const[]){"<script>", "<SCRIPT type=\"text/javascript\">",
                                               "<style>"})));
            put(g, PICK(((const char *const[]){"var a = 1 < 2 && b;", "", "</div>",
                                               "if (x) { y('</scr' + 'ipt>'); }", "<b>",
                                               "a</scriptx>b", "p { color: red }"})));
            put(g,
                PICK(((const char *const[]){"</script>", "</SCRIPT>", "</style>", "</script >"})));
        } else if (r < 18) {
            put(g, PICK(((const char *const[]){"<", "</", "<!x>", "<?php ?>", "< b>", "<1>", "</>",
                                               "<!DOCTYPE html>", "<html>", "<body>", "<head>",
                                               "</body>", "</html>"})));
        } else {
            put(g, PICK(((const char *const[]){
                       "<table><tr><td>1</td><td>2</td></tr></table>", "<ul><li>a<li>b</ul>",
                       "<p>a<p>b", "<select><option>a<option>b</select>", "<p><div>x</div></p>",
                       "<a href=x><a>y</a></a>", "<div><div>z</div></div>", "<table><table>",
                       "<b><i>x</b></i>", "<td>q</td>", "<tr>"})));
        }
    }
}

/* Content inside the subset (as far as a random nesting allows): what real pages hold. */
static const char *const clean_text[] = {
    "Invoice",
    " ",
    "\n",
    "AP-2026-000001",
    "3.912,36",
    "&amp;",
    "&middot;",
    "&nbsp;",
    "&#65;",
    "&#x20AC;",
    "&foo;",
    "&copy2026",
    "a & b",
    "caf\xc3\xa9",
    "\xe2\x82\xac 12",
    "\xf0\x9f\x98\x80",
    "\t",
    "&quot;x&quot;",
    "  \n  ",
    "Total:",
    "&lt;none&gt;",
};
static const char *const clean_tags[] = {"span",   "b",    "i",    "em",  "strong", "small",
                                         "label",  "font", "code", "tt",  "u",      "SPAN",
                                         "Strong", "abbr", "cite", "sub", "sup",    "big"};
static const char *const clean_blocks[] = {"div", "h1", "h2", "DIV", "center", "blockquote"};
static const char *const clean_attrs[] = {
    " id=\"a1\"",
    " class=\"amount\"",
    " class=row",
    " name='n'",
    " title=\"x &amp; y\"",
    " data-id=\"7\"",
    " ID=\"B2\"",
    " style=\"color: red\"",
    " href=\"/erp/x?a=1&b=2\"",
    " selected",
    " nowrap",
    " onclick=\"f('x')\"",
    " value=\"\"",
    " align=right",
    " class=\"a\" class=\"b\"",
    "\n  lang=\"de\"",
    " dir=ltr ",
};

/* A sloppy page leaves end tags out and writes stray ones, as HTML 4 pages do. */
static bool sloppy;

static void end_tag(struct gen *g, const char *name)
{
    static const char *const strays[] = {"p",    "td", "tr",     "li",     "div",  "table", "form",
                                         "span", "b",  "option", "select", "body", "html"};
    if (sloppy && rnd(4) == 0)
        return;
    put(g, "</");
    put(g, sloppy && rnd(10) == 0 ? PICK(strays) : name);
    put(g, ">");
}

/* inline: only text and inline elements (a block in <p> or <span> may close it). */
static void gen_clean(struct gen *g, int depth, bool inline_only)
{
    int n = 1 + (int)rnd(4);
    for (int i = 0; i < n; i++) {
        uint32_t r = rnd(16);
        if (inline_only && r >= 12 && r != 14)
            r = rnd(12);
        if (r < 6 || depth > 8) {
            put(g, PICK(clean_text));
        } else if (r < 10) {
            const char *t = r < 8 || inline_only ? PICK(clean_tags) : PICK(clean_blocks);
            bool in = inline_only || r < 8;
            put(g, "<");
            put(g, t);
            for (int a = (int)rnd(3); a > 0; a--)
                put(g, PICK(clean_attrs));
            put(g, ">");
            gen_clean(g, depth + 1, in);
            end_tag(g, t);
        } else if (r < 11) {
            put(g, PICK(((const char *const[]){"<br>", "<hr>", "<br/>", "<img src=x.png alt=\"\">",
                                               "<input type=\"hidden\" name=\"t\" value=\"1\">",
                                               "<input type=checkbox checked>"})));
        } else if (r < 12) {
            put(g, PICK(((const char *const[]){"<!-- c -->", "<!---->", "<!--a--b-->",
                                               "<!-- <b> & -->", "<!--->-->"})));
        } else if (r < 13) {
            put(g, "<table class=\"grid\">");
            for (int row = (int)rnd(3); row >= 0; row--) {
                put(g, "<tr>");
                for (int c = (int)rnd(3); c >= 0; c--) {
                    bool th = rnd(4) == 0;
                    put(g, th ? "<th align=left>" : "<td>");
                    gen_clean(g, depth + 2, false);
                    end_tag(g, th ? "th" : "td");
                }
                end_tag(g, "tr");
                put(g, "\n");
            }
            end_tag(g, "table");
        } else if (r < 14) {
            put(g, "<form method=post action=\"/erp/post\"><select name=s>");
            for (int o = (int)rnd(4); o >= 0; o--) {
                put(g, rnd(3) ? "<option value=\"1\">One" : "<option selected>T");
                end_tag(g, "option");
            }
            end_tag(g, "select");
            put(g, "<textarea name=m>a &amp; b</textarea><input type=submit name=action "
                   "value=Post>");
            end_tag(g, "form");
        } else if (r < 15) {
            put(g, PICK(((const char *const[]){
                       "<script>var a = 1 < 2 && b;</script>",
                       "<script type=\"text/javascript\"></script>", "<style>td { x: 1 }</style>",
                       "<script>document.write('<b>x</' + 'b>');</script>"})));
        } else {
            put(g, "<p>");
            gen_clean(g, depth + 1, true);
            end_tag(g, "p");
        }
    }
}

static const char *const prologs[] = {
    "",
    "<!DOCTYPE html>\n",
    "<!DOCTYPE HTML PUBLIC \"-//W3C//DTD HTML 4.01 Transitional//EN\">\n",
    "<!doctype html public \"-//W3C//DTD HTML 4.01//EN\" "
    "\"http://www.w3.org/TR/html4/strict.dtd\">",
    "<!DOCTYPE html SYSTEM \"about:legacy-compat\">",
    "<!-- generated -->\n<!DOCTYPE html>\n<!-- after -->\n",
    "\n\n  <!DOCTYPE html>",
    "<?xml version=\"1.0\"?>\n",
    "\xef\xbb\xbf<!DOCTYPE html>",
    "<!DOCTYPE>",
    "<!DOCTYPE html PUBLIC '-//W3C//DTD XHTML 1.0 Strict//EN' 'x'>",
};
static const char *const clean_heads[] = {
    "",
    "<head><title>ACME</title></head>\n",
    "<head>\n<meta http-equiv=\"Content-Type\" content=\"text/html; charset=utf-8\">\n"
    "<title>ACME Financials</title>\n</head>\n",
    "<head><meta charset=\"UTF-8\"><title>x &amp; y</title></head>",
    "<head><style>td { x: 1 }</style><script>var a='<b>';</script></head>",
    "<head><link rel=stylesheet href=/x.css><base href=\"/\"></head>",
};
static const char *const heads[] = {
    "",
    "<head><title>ACME</title></head>",
    "<head>\n<meta http-equiv=\"Content-Type\" content=\"text/html; charset=utf-8\">\n"
    "<title>ACME Financials</title>\n</head>\n",
    "<head><meta charset=\"UTF-8\"><title>x &amp; y</title></head>",
    "<head><meta charset=\"iso-8859-1\"></head>",
    "<head><meta http-equiv=\"content-type\" content=\"text/html; charset = utf-8\"></head>",
    "<head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=windows-1252\"></head>",
    "<head><style>td { x: 1 }</style><script>var a='<b>';</script></head>",
    "<head><link rel=stylesheet href=/x.css><base href=\"/\"></head>",
    "<title>no head</title>",
    "<head>text in head</head>",
    "<head><div>x</div></head>",
};

/* Every LF of the page as CR LF. */
static void crlf(struct gen *g)
{
    size_t lfs = 0;
    for (size_t i = 0; i < g->len; i++)
        lfs += g->buf[i] == '\n';
    char *out = malloc(g->len + lfs + 1);
    assert_non_null(out);
    size_t j = 0;
    for (size_t i = 0; i < g->len; i++) {
        if (g->buf[i] == '\n')
            out[j++] = '\r';
        out[j++] = g->buf[i];
    }
    out[j] = '\0';
    free(g->buf);
    g->buf = out;
    g->len = j;
    g->cap = j + 1;
}

static void gen_page(struct gen *g)
{
    g->len = 0;
    put(g, PICK(prologs));
    sloppy = false;
    if (rnd(2) == 0) { /* a plain page, half of them sloppy */
        sloppy = rnd(2) == 0;
        put(g, "<html>\n");
        put(g, PICK(clean_heads));
        put(g, "<body>\n");
        gen_clean(g, 2, false);
        put(g, "\n</body>\n</html>\n");
        if (rnd(3) == 0)
            crlf(g);
        return;
    }
    if (rnd(12) == 0) {
        gen_content(g, 0); /* no <html> at all */
        return;
    }
    put(g, PICK(((const char *const[]){"<html>", "<HTML lang=\"en\">", "<html>\n",
                                       "<html xmlns=\"http://www.w3.org/1999/xhtml\">"})));
    put(g, PICK(heads));
    if (rnd(15) != 0) {
        put(g, PICK(((const char *const[]){"<body>", "<body bgcolor=\"#ffffff\">\n", "<BODY>",
                                           "\n<body onload=x()>"})));
        gen_content(g, 1);
        if (rnd(10) != 0)
            put(g, PICK(((const char *const[]){"</body>", "</body>\n", "</BODY>"})));
    } else {
        gen_content(g, 1);
    }
    if (rnd(10) == 0)
        put(g, PICK(((const char *const[]){"<div>after body</div>", "text after", "<!-- c -->",
                                           "  \n"})));
    if (rnd(10) != 0)
        put(g, PICK(((const char *const[]){"</html>", "</html>\n", "</html>\n<!-- end -->\n",
                                           "</html>junk", "</html><p>"})));
}

/* ---- tests ---- */

/* A page that asks about many pairs of names costs a bounded number of probe parses (64),
 * then goes to libxml2; what was learnt stays learnt, so the same page, read again, asks only
 * what it has not asked yet, and in the end is taken. */
static void test_probes_are_bounded_per_page(void **state)
{
    (void)state;
    /* inline elements: </a> closes an open <b> above it (equal end priorities), so every
     * pair is a question with an answer, and none closes the page's structure */
    static const char *const names[] = {"span", "b",     "i",    "em",  "strong", "font",
                                        "code", "small", "abbr", "sub", "sup",    "u",
                                        "tt",   "big",   "cite", "kbd", "var",    "samp"};
    const size_t n = sizeof(names) / sizeof(names[0]);
    struct gen g = {NULL, 0, 0};
    put(&g, "<html><body>");
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < n; j++) {
            if (i == j)
                continue;
            put(&g, "<");
            put(&g, names[i]);
            put(&g, "><");
            put(&g, names[j]);
            put(&g, ">x</");
            put(&g, names[i]);
            put(&g, ">");
        }
    }
    put(&g, "</body></html>");
    bool taken = false;
    unsigned long total = 0;
    for (int round = 0; round < 8 && !taken; round++) {
        struct tally t = {0, 0};
        unsigned long before = page_fast_probe_parses();
        taken = check_one(g.buf, g.len, &t, "many pairs");
        unsigned long parses = page_fast_probe_parses() - before;
        assert_true(parses <= 64);
        total += parses;
    }
    assert_true(taken);      /* once every pair is known */
    assert_true(total > 64); /* the page asked more than one page may */
    free(g.buf);
}

/* The canned pages: every one matches libxml2 where taken; the plain ones are taken. */
static void test_fixtures_match_and_plain_ones_are_fast(void **state)
{
    (void)state;
    static struct fixture f[128];
    int n = load_fixtures(f, 128);
    assert_true(n >= 20);
    struct tally t = {0, 0};
    for (int i = 0; i < n; i++)
        check_one(f[i].body, f[i].len, &t, f[i].name);
    /* Pages as the simulator writes them: the fast path must take them. */
    const char *plain[] = {"search-none.html", "search-hit.html", "entry.html",
                           "confirm.html",     "posted.html",     "login-form.html"};
    for (size_t k = 0; k < sizeof(plain) / sizeof(plain[0]); k++) {
        bool found = false;
        for (int i = 0; i < n; i++) {
            if (strcmp(f[i].name, plain[k]) != 0)
                continue;
            found = true;
            struct tally one = {0, 0};
            if (!check_one(f[i].body, f[i].len, &one, f[i].name))
                fail_msg("%s: declined by the fast path", plain[k]);
        }
        if (!found)
            fail_msg("fixture %s is missing", plain[k]);
    }
    fprintf(stderr, "fixtures: %u fast, %u declined\n", t.fast, t.declined);
    free_fixtures(f, n);
}

/* Generated pages: both parsers agree wherever the fast path answers, and it answers often
 * enough to be tested (and declines the rest). */
static void test_generated_pages_match_libxml2(void **state)
{
    (void)state;
    struct gen g = {NULL, 0, 0};
    struct tally t = {0, 0}, loose = {0, 0};
    rng_state = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 30000; i++) {
        gen_page(&g);
        char label[64];
        snprintf(label, sizeof(label), "generated page %d", i);
        check_one(g.buf, g.len, sloppy ? &loose : &t, label);
    }
    fprintf(stderr, "generated: %u fast, %u declined; sloppy ones: %u fast, %u declined\n", t.fast,
            t.declined, loose.fast, loose.declined);
    assert_true(t.fast > 5000);
    assert_true(t.declined > 5000);
    assert_true(loose.fast > 1000); /* left-open and stray end tags are taken too */
    free(g.buf);
}

/* Byte-level mutations of the canned pages (a byte dropped, doubled or replaced by one of
 * HTML's special characters, a span cut or repeated). */
static void test_mutated_pages_match_libxml2(void **state)
{
    (void)state;
    static struct fixture f[128];
    int n = load_fixtures(f, 128);
    struct tally t = {0, 0};
    static const char special[] = "<>&/=\"' \n\r-!;#x";
    char *buf = malloc(1 << 21);
    assert_non_null(buf);
    rng_state = 0xD1B54A32D192ED03ull;
    for (int round = 0; round < 40; round++) {
        for (int i = 0; i < n; i++) {
            size_t len = f[i].len;
            if (len == 0 || len > (1 << 20) - 1)
                continue;
            memcpy(buf, f[i].body, len);
            int edits = 1 + (int)rnd(3);
            for (int e = 0; e < edits && len > 2; e++) {
                size_t at = rnd((uint32_t)len);
                switch (rnd(4)) {
                case 0: /* drop a byte */
                    memmove(buf + at, buf + at + 1, len - at - 1);
                    len--;
                    break;
                case 1: /* replace by a special character */
                    buf[at] = special[rnd(sizeof(special) - 1)];
                    break;
                case 2: { /* repeat a span */
                    size_t span = 1 + rnd(40);
                    if (at + span > len)
                        span = len - at;
                    memmove(buf + at + span, buf + at, len - at);
                    len += span;
                    break;
                }
                default: /* cut the rest */
                    len = at + 1;
                }
            }
            char label[200];
            snprintf(label, sizeof(label), "%.120s mutated (round %d)", f[i].name, round);
            check_one(buf, len, &t, label);
        }
    }
    fprintf(stderr, "mutated: %u fast, %u declined\n", t.fast, t.declined);
    assert_true(t.fast > 100);
    free(buf);
    free_fixtures(f, n);
}

/* Declined: each of these is outside the subset, for the reason given. */
static void test_declines_what_it_cannot_promise(void **state)
{
    (void)state;
    static const char *const pages[] = {
        "<html><body>\xff</body></html>",                  /* not UTF-8 */
        "<html><body>\x01</body></html>",                  /* a control byte */
        "\xef\xbb\xbf<html><body></body></html>",          /* byte order mark */
        "<body>x</body>",                                  /* <html> implied */
        "<html><div>x</div></html>",                       /* <body> implied */
        "<html><head>t</head><body></body></html>",        /* <p> implied in <head> */
        "<html><body><x-widget></x-widget></body></html>", /* not an HTML 4 element */
        "<html><body>&#0;</body></html>",                  /* a NUL reference */
        "<html><body><!-- a --!></body></html>",           /* comment closed by --!> */
        "<html><body><?php x ?></body></html>",            /* processing instruction */
        "<html><head><meta charset=\"iso-8859-1\"></head><body></body></html>",
        "<html><body></body><p>late</p></html>",  /* element after </body> */
        "<html><head><div>x</div></head></html>", /* <div> closes <head>: implied <body> */
        "<html><body></body></html><p>",          /* element after </html> */
        "<html><body><script>x",                  /* script never ended */
        /* fuzz_page_fast's first finding: "</1html>" is no end tag to libxml2 but text */
        "<!DOCTYPE HT>\n<html><head></head><body>k</body></1html>\n",
        "<html><body><script>a</script ></body></html>", /* blank in the end tag */
    };
    for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
        htmlDocPtr d = page_fast_parse(pages[i], strlen(pages[i]), NULL);
        if (d)
            fail_msg("taken by the fast path: %s", pages[i]);
    }
}

/* The comparison itself sees a difference in each thing it compares. */
static void test_comparison_can_fail(void **state)
{
    (void)state;
    static const char page[] = "<!DOCTYPE html><html><head><title>t</title></head><body>"
                               "<p id=\"x\" class=\"a\">one<b>two</b><!--c--></p></body></html>";
    char why[400];
    static xmlChar text_name[] = "text"; /* "text", but not libxml2's xmlStringText */
    for (int edit = 0; edit < 10; edit++) {
        htmlDocPtr a = htmlReadMemory(page, (int)strlen(page), NULL, NULL, PAGE_HTML_OPTIONS);
        htmlDocPtr b = htmlReadMemory(page, (int)strlen(page), NULL, NULL, PAGE_HTML_OPTIONS);
        assert_null(tree_diff(a, b, why, sizeof(why)));
        xmlNodePtr body = xmlDocGetRootElement(b)->last, p = body->children;
        switch (edit) {
        case 0:
            xmlNodeSetContent(p->children, BAD_CAST "One");
            break;
        case 1:
            xmlSetProp(p, BAD_CAST "class", BAD_CAST "b");
            break;
        case 2:
            xmlUnsetProp(p, BAD_CAST "class");
            break;
        case 3:
            xmlAddChild(p->children->next, xmlNewDocText(b, BAD_CAST "!"));
            break;
        case 4:
            xmlNodeSetName(p->children->next, BAD_CAST "i");
            break;
        case 5:
            xmlNodeSetContent(p->last, BAD_CAST "d");
            break;
        case 6:
            xmlAddChild(body, xmlNewDocNode(b, NULL, BAD_CAST "br", NULL));
            break;
        case 7: { /* the id "x" points at the class attribute instead (same table size) */
            xmlAttrPtr id = xmlHasProp(p, BAD_CAST "id"), cls = xmlHasProp(p, BAD_CAST "class");
            assert_int_equal(xmlRemoveID(b, id), 0);
            assert_non_null(xmlAddID(NULL, b, BAD_CAST "x", cls));
            id->atype = XML_ATTRIBUTE_ID; /* both as before: only the table differs */
            cls->atype = 0;
            break;
        }
        case 8:
            p->children->name = text_name;
            break;
        default:
            p->children->next->_private = p;
        }
        assert_non_null(tree_diff(a, b, why, sizeof(why)));
        xmlFreeDoc(a);
        xmlFreeDoc(b);
    }
}

/* A page of thousands of ids (some repeated, some on <a name>): the fast path's smaller ID
 * table grows as libxml2's does, and holds what libxml2's holds. */
static void test_many_ids_match_libxml2(void **state)
{
    (void)state;
    struct gen g = {NULL, 0, 0};
    put(&g, "<html><body>");
    for (int i = 0; i < 5000; i++) {
        char el[80];
        snprintf(el, sizeof(el), i % 3 ? "<span id=\"i%d\">x</span>" : "<a name=n%d>y</a>",
                 i % 4000);
        put(&g, el);
    }
    put(&g, "</body></html>");
    struct tally t = {0, 0};
    if (!check_one(g.buf, g.len, &t, "many ids"))
        fail_msg("declined by the fast path");
    free(g.buf);
}

/* Text joined across ignored end tags copies all the text so far at each join: a page of
 * text and stray end tags would make that quadratic (a 4 MB page took gigabytes of arena
 * before), so the joins of one page may copy PF_JOIN_BUDGET bytes, then it goes to libxml2.
 * Taken with a few joins (the same tree as libxml2's), declined with thousands. */
static void test_text_joins_are_bounded(void **state)
{
    (void)state;
    char x[101];
    memset(x, 'x', 100);
    x[100] = '\0';
    static const int joins[] = {10, 2000};
    for (size_t k = 0; k < 2; k++) {
        struct gen g = {NULL, 0, 0};
        put(&g, "<html><body><p>");
        for (int i = 0; i < joins[k]; i++) {
            put(&g, x);
            put(&g, "</q>");
        }
        put(&g, "</p></body></html>");
        struct tally t = {0, 0};
        bool taken = check_one(g.buf, g.len, &t, "joins");
        if (taken != (k == 0))
            fail_msg("%d joins: %s", joins[k], taken ? "taken" : "declined");
        free(g.buf);
    }
}

/* Taken: plain pages with each construct of the subset, and libxml2's tree for them. */
static void test_takes_the_subset(void **state)
{
    (void)state;
    static const char *const pages[] = {
        "<html><body></body></html>",
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<title>T &amp; C</title>\n</head>\n"
        "<body>\n<p id=\"a\">x &middot; y &#65;&#x42;</p>\n</body>\n</html>\n",
        "<HTML><BODY><TABLE><TR><TD CLASS=Amount>1</TD></TR></TABLE></BODY></HTML>",
        "<html><body><form><select name=s><option value=1 selected>a</option></select>"
        "<input type=checkbox checked disabled><input value='x' value='y'></form></body></html>",
        "<html><body><a href=\"/erp/x?a=1&b=2&amp;c=3\">link</a></body></html>",
        "<html><head><script>if (a < b && c) { d('</b>'); }</script><style></style></head>"
        "<body><!-- note --><br/><div/></body></html><!-- end -->",
        "<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=utf-8\">"
        "</head><body>caf\xc3\xa9 \xe2\x82\xac &euro; &copy2026 & a&b</body></html>",
        "<html><body><div><div><span><span>nested</span></span></div></div></body></html>",
        /* what HTML 4 lets a page leave open, and misnesting libxml2 repairs by its tables */
        "<html><body><p>a<div>b</div></p></body></html>",
        "<html><body><ul><li>a<li>b</ul><p>one<p>two</body></html>",
        "<html><body><table><tr><td>1<td>2<tr><td>3</table></body></html>",
        "<html><body><select><option>a<option selected>b</select></body></html>",
        "<html><body><b><i>x</b></i><div><span>y</div></span></body></html>",
        "<html><head><title>t</title><body>no head end</body></html>",
        "<html><body>a &zz b",                   /* the end closes what is open */
        "<html><body><a href=\"x\" href=\"y\">", /* the second href dropped */
        /* text joined across an ignored end tag; ids: an <a>'s name, a repeated, an empty one */
        "<html><body><p id=a>x</i>y &amp; z</p><a name=n id=m>z</a><b id=a name=c></b>"
        "<i id=\"\"></i><a name=\"\" id=m></a></body></html>",
        "<!DOCTYPE html>\r\n<html>\r\n<head>\r\n<title>CR LF</title>\r\n</head>\r\n<body>\r"
        "\n<p title=\"a\r\nb\"\rid=x>a\r\nb\rc</p><!-- c\r\n --><script>x\r\n</script>\r\n"
        "</body>\r\n</html>\r\n",
    };
    for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
        struct tally t = {0, 0};
        if (!check_one(pages[i], strlen(pages[i]), &t, pages[i]))
            fail_msg("declined by the fast path: %s", pages[i]);
    }
}

int main(void)
{
    xmlInitParser();
    xmlSetGenericErrorFunc(NULL, silent);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_comparison_can_fail),
        cmocka_unit_test(test_takes_the_subset),
        cmocka_unit_test(test_many_ids_match_libxml2),
        cmocka_unit_test(test_text_joins_are_bounded),
        cmocka_unit_test(test_declines_what_it_cannot_promise),
        cmocka_unit_test(test_probes_are_bounded_per_page),
        cmocka_unit_test(test_fixtures_match_and_plain_ones_are_fast),
        cmocka_unit_test(test_generated_pages_match_libxml2),
        cmocka_unit_test(test_mutated_pages_match_libxml2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
