/*
 * page-int.h - what the page files share (page.c, page_path.c, page_form.c, page_text.c,
 * page_fast.c) and their tests reach, and nothing else includes.
 *
 * page.c makes the page (struct page below) and answers XPath queries on it, through
 * page_path.c for the flows' location paths; page_form.c reads its forms, page_text.c its
 * text. What more than one of them uses is here: the page; the tree helpers the form's walk
 * and the excerpt ask of every node, inline, as they were while the page was one file; the
 * path and the node set page.c's queries hold; the XPath plumbing page.c shares with forms.
 *
 * page_fast.c builds, for the plain HTML most ERP pages are, the very tree libxml2's HTML
 * parser (2.9, with page.c's options) builds for them, in about a third of its instructions:
 * a strict subset of HTML, and NULL for anything outside it (and for every page when the
 * running libxml2 is not 2.9), which page.c then gives to libxml2 as before. Both trees are
 * made of libxml2's own nodes, so every query, form and excerpt reads them the same way.
 * test_page_fast compares the two trees node by node on the canned pages, generated pages and
 * mutations of the canned ones.
 */
#ifndef APBOT_PAGE_INT_H
#define APBOT_PAGE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

#include <libxml/HTMLparser.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>
#include <libxml/xpath.h>

struct page_form;
struct xmlarena;

/* A page and its url and raw bytes are one block, carved from the page's arena (dropped with
 * it) or, without one, from the heap (page.c, page_parse). */
struct page {
    htmlDocPtr doc;
    struct xmlarena *arena; /* holds doc and the page (dropped with them), or NULL: doc is
                             * freed on its own */
    char *url;              /* NULL when parsed without one */
    char *raw;              /* the first bytes of the body, as received (page.c's
                             * PAGE_RAW_KEEP), for the excerpt of a textless page */
    size_t raw_len;
    /* The one part of a page made when first needed (page_ids): the fast path leaves the
     * document's ids for later, and they are registered, outside the arena, before libxml2's
     * XPath first evaluates on the page. */
    bool ids_later; /* not registered yet */
    bool ids_heap;  /* registered on the heap beside an arena: page_free frees them first */
};

/* Whether s starts with white space (ASCII, or U+00A0 in UTF-8, &nbsp;); its length in
 * *ret_len when it does. */
static inline bool page_is_space(const char *s, size_t *ret_len)
{
    unsigned char c = (unsigned char)s[0];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
        *ret_len = 1;
        return true;
    }
    if (c == 0xC2 && (unsigned char)s[1] == 0xA0) { /* U+00A0, &nbsp; */
        *ret_len = 2;
        return true;
    }
    return false;
}

/* Whether n is an element of that name, in any case (name in lower case). The first byte
 * decides for most nodes: a form's walk asks four names of every element of the page. */
static inline bool page_is_elem(xmlNodePtr n, const char *name)
{
    if (!n || n->type != XML_ELEMENT_NODE || !n->name)
        return false;
    const char *s = (const char *)n->name;
    if (name[0] >= 'a' && name[0] <= 'z' && (s[0] | 0x20) != name[0])
        return false; /* for a letter, | 0x20 folds exactly its upper case onto it */
    return strcasecmp(s, name) == 0;
}

/*
 * An element's text content as xmlNodeGetContent gives it ("" for none), never NULL: in
 * place where the element has one text node or no child at all (valid while the page is),
 * else libxml2's copy, left in *ret_own for the caller to xmlFree. Options, a textarea and
 * the title are nearly always one text node; libxml2's copy was three heap blocks.
 */
static inline const char *page_content_ref(xmlNodePtr n, xmlChar **ret_own)
{
    xmlNodePtr c = n->children;
    *ret_own = NULL;
    if (!c)
        return "";
    if (!c->next && !c->children && (c->type == XML_TEXT_NODE || c->type == XML_CDATA_SECTION_NODE))
        return c->content ? (const char *)c->content : "";
    *ret_own = xmlNodeGetContent(n);
    return *ret_own ? (const char *)*ret_own : "";
}

/* Next node of a pre-order walk of root's subtree; descend = go into n's children when n is
 * an element. */
static inline xmlNodePtr page_walk_next(xmlNodePtr n, xmlNodePtr root, bool descend)
{
    if (descend && n->type == XML_ELEMENT_NODE && n->children)
        return n->children;
    while (n && n != root) {
        if (n->next)
            return n->next;
        n = n->parent;
    }
    return NULL;
}

/* ---- the flows' location paths, evaluated without libxml2 (page_path.c) ---- */

#define PAGE_PATH_STEPS 8 /* element steps of a path read there (a mask bit each) */

struct page_step {
    bool desc;        /* after "//" (descendant), else "/" or the start (child) */
    const char *name; /* in the expression, name_len bytes */
    size_t name_len;
    const char *attr; /* [@attr='value']: attr_len and value_len bytes; NULL: no test */
    size_t attr_len;
    const char *value;
    size_t value_len;
};

/* A path page_path_read has read: page.c's queries keep one per expression, on the stack. */
struct page_path {
    bool absolute; /* from the document ("/" or "//" first), else from the context node */
    size_t n;
    struct page_step step[PAGE_PATH_STEPS];
    const char *attr; /* a last step "/@attr" (attr_len bytes), or NULL */
    size_t attr_len;
};

/*
 * The node set of a path page_path.c evaluates: an XPath object for libxml2's readers
 * (xmlXPathCastToString sorts nodeTab in place, _ToBoolean reads nodeNr), held by the caller,
 * with room for PAGE_NODES_ROOM nodes in place and a heap array past them. Its nodes were
 * three heap blocks from libxml2 (xmlXPathNodeSetCreate, _WrapNodeSet, the first
 * _AddUnique) made and freed for every query after the parse, outside any arena. Never given
 * to xmlXPathFreeObject: page_obj_free.
 */
#define PAGE_NODES_ROOM 16

struct page_nodes {
    xmlXPathObject obj;
    xmlNodeSet set;
    xmlNodePtr room[PAGE_NODES_ROOM];
};

/* Reads xpath into *pp: true when it is one of the location paths page_path.c evaluates
 * (its opening says which); false for anything else, which libxml2 evaluates. */
bool page_path_read(const char *xpath, struct page_path *pp);

/* pp evaluated with node as context (NULL: the document) into ns, as libxml2 would: ns's
 * object (free with page_obj_free), or NULL when the tree holds what the walk does not read
 * (ns holds nothing then; libxml2 evaluates). */
xmlXPathObjectPtr page_path_run(const struct page_path *pp, xmlDocPtr doc, xmlNodePtr node,
                                struct page_nodes *ns);

/* Frees obj, an XPath result: ns's object (page_path_run's) or libxml2's. NULL is fine. */
void page_obj_free(xmlXPathObjectPtr obj, struct page_nodes *ns);

/* ---- what page.c shares with the forms (page_form.c) ---- */

/* libxml2's per-thread error handlers, silenced between page_quiet_begin and _end (which
 * also run xmlInitParser once): around every parse and query. */
struct page_quiet {
    xmlGenericErrorFunc generic;
    void *generic_ctx;
    xmlStructuredErrorFunc structured;
    void *structured_ctx;
};
void page_quiet_begin(struct page_quiet *q);
void page_quiet_end(const struct page_quiet *q);

/* "what: msg" into err (may be NULL), msg's line breaks as spaces. */
void page_set_err(char *err, size_t errlen, const char *what, const char *msg);

/* The first error of an XPath evaluation, as its context's handler captured it. */
struct page_xerr {
    char msg[200];
    bool set;
};

/* The calling thread's XPath context, pointed at p's document, its errors going to e. */
xmlXPathContextPtr page_xctx_of(const struct page *p, struct page_xerr *e);

/* Evaluates xpath with node as context (NULL = the document): ns's object (page_path.c) or
 * libxml2's (free either with page_obj_free). NULL on error, e filled. */
xmlXPathObjectPtr page_eval(const struct page *p, xmlXPathContextPtr x, xmlNodePtr node,
                            const char *xpath, struct page_xerr *e, struct page_nodes *ns);

/* The options page.c parses with, on either path. */
#define PAGE_HTML_OPTIONS                                                                          \
    (HTML_PARSE_RECOVER | HTML_PARSE_NOERROR | HTML_PARSE_NOWARNING | HTML_PARSE_NONET)

/*
 * The document libxml2's htmlReadMemory(body, len, url, NULL, PAGE_HTML_OPTIONS) would
 * build, when body is inside the subset page_fast.c handles, but without its ids: doc->ids
 * stays NULL and no attribute is typed XML_ATTRIBUTE_ID until page_fast_ids(doc) registers
 * them, as the parse would have. NULL when body is outside the subset (nothing is left
 * allocated). Allocates through libxml2's allocator (an active arena, see xmlarena.h) and
 * may have libxml2 parse a few tiny probe documents the first time the process meets a pair
 * of element names (at most 64 per page); the caller silences libxml2's error handlers
 * around it, as around htmlReadMemory. Thread-safe. Only libxml2's XPath (its id()
 * function) and the ID types read the ids in page.c's use; page.c registers them before
 * libxml2 evaluates an expression on the page. A page's ids cost the fast path some 7% of
 * its instructions, for a function flows hardly call.
 */
htmlDocPtr page_fast_parse_ids_later(const char *body, size_t len, const char *url);
void page_fast_ids(htmlDocPtr doc);

#ifdef APBOT_UNITTEST /* static in the product (base/unittest.h) */
/* page_fast_parse_ids_later's document with its ids registered during the parse, as
 * htmlReadMemory registers them: what test_page_fast and fuzz_page_fast compare with
 * libxml2's tree, node by node. */
htmlDocPtr page_fast_parse(const char *body, size_t len, const char *url);

/* How many probe documents page_fast.c has had libxml2 parse in this process (each pair of
 * element names is asked once; one page may cause at most 64, then it goes to libxml2). */
unsigned long page_fast_probe_parses(void);

/*
 * The node set libxml2's XPath evaluation of xpath gives with node as context (NULL: the
 * document), when xpath is one of the location paths page_path.c evaluates and the tree one
 * it walks; NULL for anything else, which libxml2 then evaluates. Free with
 * xmlXPathFreeObject. page.c's queries run the same walk into a node set of their own (on the
 * stack while small); this copy of it into libxml2's object is for test_page and
 * fuzz_page_fast, which hold it to libxml2's own evaluation.
 */
xmlXPathObjectPtr page_path_eval(xmlDocPtr doc, xmlNodePtr node, const char *xpath);

/* Bytes a form holds in its chunks (page_form.c, "a form's memory"), for test_page and
 * bounds; 0 for a zeroed form. */
size_t page_form_bytes(const struct page_form *f);

/*
 * For test_page: when set, page_form.c calls it with the bytes of form memory it has just
 * wiped - a value that died (replaced by a set or removed with its field; the NUL not
 * counted), and every chunk of a form, whole, before it goes back to the heap (page_form_done,
 * and when the values move). Set only while no other thread uses forms; in the product it is
 * static and never set.
 */
extern void (*page_test_wiped)(const void *p, size_t n);
#endif

#endif
