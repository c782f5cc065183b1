/*
 * page_path.c - the location paths flows write ("//form[@id='apEntry']", "td[@class='x']",
 * "//a[@id='next']/@href"), read and evaluated in one walk of the tree instead of by
 * libxml2's XPath, into the node set libxml2 would give; and that node set's own memory
 * (struct page_nodes, page-int.h). It answers only for the paths and trees it reads and says
 * NULL for anything else: compiling and evaluating every other expression, the XPath context,
 * the ids libxml2's id() reads, and what a query makes of the nodes (a string, rows, a form)
 * stay with the queries in page.c and page_form.c.
 */
#include "page-int.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/tree.h>
#include <libxml/xpath.h>
#include <libxml/xpathInternals.h>

#include "apbot/mem.h"
#include "base/unittest.h"

/*
 * Nearly every XPath a flow holds is a location path of element names with at most an
 * attribute test each, "//form[@id='apEntry']", "//table[@id='x']//tr[@class='row']",
 * "td[@class='amount']", "//a[@id='next']/@href": libxml2 compiles each anew and evaluates
 * "//form[...]" by gathering every node of the page and then the children of each (a
 * predicate keeps it from its "//name" shortcut), ~45,000 instructions a query, a seventh of
 * an invoice's page work. Such a path is read here and evaluated in one walk of the tree in
 * document order, into the node set libxml2 would give: the same nodes, in the same
 * (document) order, as libxml2 2.9's evaluation defines them (xpath.c: child and
 * descendant axes, a name test matching an element without a namespace, "@a='v'" true when
 * an attribute a (no prefix) has the string value v). Anything else - another axis, a
 * function, whitespace, a prefix, a second predicate, a name outside ASCII - is not read,
 * and libxml2 evaluates it as before; so is a tree holding a node the walk does not expect,
 * or deeper than PAGE_PATH_DEPTH. test_page holds page_path_eval to libxml2's evaluation,
 * node for node, on the canned and generated pages with the flows' paths and generated ones.
 */
#define PAGE_PATH_DEPTH 512     /* deeper trees go to libxml2 */
#define PAGE_NODES_MAX 10000000 /* libxml2's XPATH_MAX_NODESET_LENGTH: past it, out of memory */

/* Length of an XPath name at s (ASCII letters, digits, '_', '-', '.'; not a digit, '-' or '.'
 * first), 0 when there is none. */
static size_t page_path_name(const char *s)
{
    if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_'))
        return 0;
    size_t n = 1;
    while ((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z') ||
           (s[n] >= '0' && s[n] <= '9') || s[n] == '_' || s[n] == '-' || s[n] == '.')
        n++;
    return n;
}

/* Reads xpath into *pp: true when it is a path of the form above. */
bool page_path_read(const char *xpath, struct page_path *pp)
{
    const char *s = xpath;
    bool desc = false;
    pp->absolute = s[0] == '/';
    pp->n = 0;
    pp->attr = NULL;
    if (s[0] == '/') {
        desc = s[1] == '/';
        s += desc ? 2 : 1;
    }
    for (;;) {
        if (pp->n == PAGE_PATH_STEPS)
            return false;
        struct page_step *st = &pp->step[pp->n++];
        st->desc = desc;
        st->name = s;
        st->name_len = page_path_name(s);
        st->attr = NULL;
        if (st->name_len == 0)
            return false;
        s += st->name_len;
        if (s[0] == '[') {
            if (s[1] != '@')
                return false;
            st->attr = s + 2;
            st->attr_len = page_path_name(st->attr);
            s = st->attr + st->attr_len;
            if (st->attr_len == 0 || s[0] != '=' || (s[1] != '\'' && s[1] != '"'))
                return false;
            char quote = s[1];
            st->value = s + 2;
            for (s = st->value; *s && *s != quote; s++)
                if ((unsigned char)*s < 0x20 && *s != '\t' && *s != '\n' && *s != '\r')
                    return false; /* not an XML character: libxml2 says why */
            if (s[0] != quote || s[1] != ']')
                return false;
            st->value_len = (size_t)(s - st->value);
            s += 2;
        }
        if (s[0] == '\0')
            return true;
        if (s[0] == '/' && s[1] == '@') {
            pp->attr = s + 2;
            pp->attr_len = page_path_name(pp->attr);
            return pp->attr_len > 0 && pp->attr[pp->attr_len] == '\0';
        }
        if (s[0] != '/')
            return false;
        desc = s[1] == '/';
        s += desc ? 2 : 1;
    }
}

/* Whether the NUL-terminated name is the n bytes at want. */
static bool page_name_is(const xmlChar *name, const char *want, size_t n)
{
    return name && name[0] == (xmlChar)want[0] && strncmp((const char *)name, want, n) == 0 &&
           name[n] == '\0';
}

/* Whether a's string value (its text children, one after the other) is the n bytes at v: 1
 * yes, 0 no, -1 when a has a child that is not text (libxml2 then evaluates). */
static int page_attr_value_is(xmlAttrPtr a, const char *v, size_t n)
{
    size_t at = 0;
    for (xmlNodePtr c = a->children; c; c = c->next) {
        if (c->type != XML_TEXT_NODE)
            return -1;
        size_t cl = c->content ? strlen((const char *)c->content) : 0;
        if (cl > n - at || (cl > 0 && memcmp(c->content, v + at, cl) != 0)) {
            for (c = c->next; c; c = c->next) /* the answer is no, if the rest is text */
                if (c->type != XML_TEXT_NODE)
                    return -1;
            return 0;
        }
        at += cl;
    }
    return at == n;
}

/* Whether element el passes step st: 1, 0, or -1 as above. */
static int page_step_test(xmlNodePtr el, const struct page_step *st)
{
    if (el->ns || !page_name_is(el->name, st->name, st->name_len))
        return 0;
    if (!st->attr)
        return 1;
    int any = 0;
    for (xmlAttrPtr a = el->properties; a; a = a->next) {
        if (!page_name_is(a->name, st->attr, st->attr_len) || (a->ns && a->ns->prefix))
            continue;
        int is = page_attr_value_is(a, st->value, st->value_len);
        if (is < 0)
            return -1;
        any |= is;
    }
    return any;
}

static xmlXPathObjectPtr page_nodes_init(struct page_nodes *ns)
{
    memset(&ns->obj, 0, sizeof(ns->obj));
    ns->obj.type = XPATH_NODESET;
    ns->obj.nodesetval = &ns->set;
    ns->set.nodeNr = 0;
    ns->set.nodeMax = PAGE_NODES_ROOM;
    ns->set.nodeTab = ns->room;
    return &ns->obj;
}

/* Appends n, as xmlXPathNodeSetAddUnique does with an element or an attribute. */
static void page_nodes_add(struct page_nodes *ns, xmlNodePtr n)
{
    xmlNodeSetPtr set = &ns->set;
    if (set->nodeNr == set->nodeMax) {
        if (set->nodeMax >= PAGE_NODES_MAX)
            abort(); /* libxml2 fails there as out of memory (mem.h's policy) */
        size_t max = (size_t)set->nodeMax * 2;
        if (max > PAGE_NODES_MAX)
            max = PAGE_NODES_MAX;
        xmlNodePtr *tab = apbot_xmalloc(max * sizeof(*tab));
        memcpy(tab, set->nodeTab, (size_t)set->nodeNr * sizeof(*tab));
        if (set->nodeTab != ns->room)
            free(set->nodeTab);
        set->nodeTab = tab;
        set->nodeMax = (int)max;
    }
    set->nodeTab[set->nodeNr++] = n;
}

/* Frees what ns holds (not ns). */
static void page_nodes_done(struct page_nodes *ns)
{
    if (ns->set.nodeTab != ns->room)
        free(ns->set.nodeTab);
    ns->set.nodeTab = ns->room;
}

/* Frees obj: page_eval's or page_path_run's result, ns the node set it was given. */
void page_obj_free(xmlXPathObjectPtr obj, struct page_nodes *ns)
{
    if (obj == &ns->obj)
        page_nodes_done(ns);
    else if (obj)
        xmlXPathFreeObject(obj);
}

/*
 * The node set pp selects from ctx (an element, or the document), in document order: into
 * set (empty, made by the caller); false when the walk meets a tree it does not read.
 * One walk of ctx's subtree: along the way, at[d] holds a bit k for each step k (0: ctx
 * itself) the node at depth d is selected by, up[d] the bits of it and its ancestors. A node
 * passes step k when it passes its test and its parent (child step) or some ancestor
 * (descendant step) holds bit k - 1. Subtrees where no step can match are not entered.
 */
static bool page_path_walk(const struct page_path *pp, xmlNodePtr ctx, struct page_nodes *ns)
{
    unsigned at[PAGE_PATH_DEPTH], up[PAGE_PATH_DEPTH];
    unsigned desc = 0, last = 1u << pp->n;
    for (size_t k = 0; k < pp->n; k++)
        desc |= pp->step[k].desc ? 1u << k : 0; /* bit k - 1 of a descendant step k */
    at[0] = up[0] = 1;
    int d = 0;
    xmlNodePtr n = ctx;
    for (;;) {
        /* into n's children when a step may match there, else on to its next sibling */
        xmlNodePtr next = NULL;
        if (((at[d] & ~desc) | (up[d] & desc)) & (last - 1)) {
            next = n->children;
            if (next) {
                if (d + 1 == PAGE_PATH_DEPTH)
                    return false;
                d++;
            }
        }
        while (!next && d > 0) {
            next = n->next;
            if (!next) {
                n = n->parent;
                d--;
            }
        }
        if (!next)
            return true;
        n = next;
        at[d] = 0;
        switch (n->type) {
        case XML_ELEMENT_NODE:
            for (size_t k = 1; k <= pp->n; k++) {
                unsigned from = pp->step[k - 1].desc ? up[d - 1] : at[d - 1];
                if (!(from & (1u << (k - 1))))
                    continue;
                int pass = page_step_test(n, &pp->step[k - 1]);
                if (pass < 0)
                    return false;
                at[d] |= pass ? 1u << k : 0;
            }
            break;
        case XML_TEXT_NODE:
        case XML_CDATA_SECTION_NODE:
        case XML_COMMENT_NODE:
        case XML_PI_NODE:
        case XML_DTD_NODE:
            break; /* no element, and nothing below that is one */
        default:
            return false;
        }
        up[d] = up[d - 1] | at[d];
        if (n->type != XML_ELEMENT_NODE)
            up[d] = at[d] = 0; /* nothing below it */
        if (at[d] & last) {
            if (!pp->attr)
                page_nodes_add(ns, n);
            for (xmlAttrPtr a = pp->attr ? n->properties : NULL; a; a = a->next)
                if (page_name_is(a->name, pp->attr, pp->attr_len) && (!a->ns || !a->ns->prefix))
                    page_nodes_add(ns, (xmlNodePtr)a);
        }
    }
}

/* pp evaluated with node as context (NULL: the document), as page_path_eval, into ns: its
 * object (free with page_obj_free), or NULL (ns holds nothing then). */
xmlXPathObjectPtr page_path_run(const struct page_path *pp, xmlDocPtr doc, xmlNodePtr node,
                                struct page_nodes *ns)
{
    xmlNodePtr ctx = pp->absolute || !node ? (xmlNodePtr)doc : node;
    if (ctx->type != XML_ELEMENT_NODE && ctx->type != XML_DOCUMENT_NODE &&
        ctx->type != XML_HTML_DOCUMENT_NODE)
        return NULL;
    xmlXPathObjectPtr obj = page_nodes_init(ns);
    if (!page_path_walk(pp, ctx, ns)) {
        page_nodes_done(ns);
        return NULL;
    }
    return obj;
}

UNITTEST xmlXPathObjectPtr page_path_eval(xmlDocPtr doc, xmlNodePtr node, const char *xpath)
{
    struct page_path pp;
    struct page_nodes ns;
    if (!doc || !xpath || !page_path_read(xpath, &pp) || !page_path_run(&pp, doc, node, &ns))
        return NULL;
    /* libxml2's own object, as its evaluation makes it (for test_page and the fuzz target) */
    xmlNodeSetPtr set = xmlXPathNodeSetCreate(NULL);
    if (!set)
        abort(); /* out of memory (mem.h's policy) */
    for (int i = 0; i < ns.set.nodeNr; i++)
        if (xmlXPathNodeSetAddUnique(set, ns.set.nodeTab[i]) < 0)
            abort(); /* as above */
    page_nodes_done(&ns);
    xmlXPathObjectPtr obj = xmlXPathWrapNodeSet(set);
    if (!obj)
        abort(); /* as above */
    return obj;
}
