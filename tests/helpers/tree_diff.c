/*
 * tree_diff.c - see tree_diff.h.
 */
#include "tree_diff.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <libxml/hash.h>
#include <libxml/parserInternals.h>
#include <libxml/tree.h>

static bool str_eq(const xmlChar *a, const xmlChar *b)
{
    if (!a || !b)
        return a == b;
    return strcmp((const char *)a, (const char *)b) == 0;
}

static const char *show(const xmlChar *s)
{
    return s ? (const char *)s : "(null)";
}

/* A node's own links, on one side: its document, its place among its siblings (prev and the
 * parent's last), fields libxml2's parser leaves empty. NULL when they hold, else what not. */
static const char *links_bad(xmlNodePtr x, xmlDocPtr doc)
{
    /* the fields every node struct begins with (xmlNode, xmlDtd, xmlAttr) */
    if (x->doc != doc)
        return "doc pointer";
    if (x->_private)
        return "_private set";
    if (x->next && (x->next->prev != x || x->next->parent != x->parent))
        return "next->prev or next->parent";
    if (!x->next && x->parent && x->parent->last != x)
        return "parent->last";
    if (!x->prev && x->parent && x->parent->children != x)
        return "parent->children";
    if (x->children && x->children->parent != x)
        return "children->parent";
    if (x->type == XML_DTD_NODE || x->type == XML_ATTRIBUTE_NODE)
        return NULL;
    /* an xmlNode's own fields */
    if (x->psvi || x->nsDef)
        return "psvi or namespace definitions set";
    if (x->type == XML_ELEMENT_NODE && x->content)
        return "element with content";
    if ((x->type == XML_TEXT_NODE && x->name != xmlStringText) ||
        (x->type == XML_COMMENT_NODE && x->name != xmlStringComment))
        return "text or comment name not libxml2's constant";
    if ((x->type == XML_TEXT_NODE || x->type == XML_COMMENT_NODE ||
         x->type == XML_CDATA_SECTION_NODE) &&
        (x->children || x->properties))
        return "character data with children or properties";
    return NULL;
}

/* The value an attribute was registered under (its one text child), or NULL. */
static const xmlChar *attr_value(xmlAttrPtr a)
{
    xmlNodePtr c = a->children;
    return c && !c->next && c->type == XML_TEXT_NODE ? c->content : NULL;
}

/* Whether the document's ID table maps a's value to a (xmlAddID's entry: the value copied, no
 * name, the document's own). */
static bool registered(xmlDocPtr doc, xmlAttrPtr a)
{
    const xmlChar *v = attr_value(a);
    xmlIDPtr id = v && doc->ids ? xmlHashLookup(doc->ids, v) : NULL;
    return id && id->attr == a && id->doc == doc && !id->name && str_eq(id->value, v);
}

/* The first difference between the two nodes themselves (not their children), or NULL;
 * ret_ids counts the attributes of a registered as ids. */
static const char *node_diff(xmlNodePtr a, xmlNodePtr b, xmlDocPtr da, xmlDocPtr db, int *ret_ids,
                             char *why, size_t n)
{
    if (a->type != b->type) {
        snprintf(why, n, "type %d vs %d (%s / %s)", (int)a->type, (int)b->type, show(a->name),
                 show(b->name));
        return why;
    }
    if (!str_eq(a->name, b->name)) {
        snprintf(why, n, "name '%s' vs '%s'", show(a->name), show(b->name));
        return why;
    }
    if (a->ns || b->ns) {
        snprintf(why, n, "namespace on <%s>", show(a->name));
        return why;
    }
    const char *bad = links_bad(a, da);
    if (bad || (bad = links_bad(b, db))) {
        snprintf(why, n, "<%s> (type %d): %s on the %s side", show(a->name), (int)a->type, bad,
                 links_bad(a, da) ? "first" : "second");
        return why;
    }
    if (a->type == XML_TEXT_NODE || a->type == XML_COMMENT_NODE ||
        a->type == XML_CDATA_SECTION_NODE) {
        if (!str_eq(a->content, b->content)) {
            snprintf(why, n, "content '%.60s' vs '%.60s'", show(a->content), show(b->content));
            return why;
        }
    }
    if (a->type == XML_DTD_NODE) {
        xmlDtdPtr dta = (xmlDtdPtr)a, dtb = (xmlDtdPtr)b;
        if (!str_eq(dta->ExternalID, dtb->ExternalID) || !str_eq(dta->SystemID, dtb->SystemID)) {
            snprintf(why, n, "DTD '%s' '%s' vs '%s' '%s'", show(dta->ExternalID),
                     show(dta->SystemID), show(dtb->ExternalID), show(dtb->SystemID));
            return why;
        }
    }
    if (a->type == XML_ELEMENT_NODE) {
        xmlAttrPtr pa = a->properties, pb = b->properties, prev_a = NULL, prev_b = NULL;
        for (; pa && pb; prev_a = pa, prev_b = pb, pa = pa->next, pb = pb->next) {
            if (!str_eq(pa->name, pb->name) || pa->atype != pb->atype || pa->ns || pb->ns) {
                snprintf(why, n, "<%s> attribute '%s' (%d) vs '%s' (%d)", show(a->name),
                         show(pa->name), (int)pa->atype, show(pb->name), (int)pb->atype);
                return why;
            }
            if (pa->type != XML_ATTRIBUTE_NODE || pb->type != XML_ATTRIBUTE_NODE ||
                pa->parent != a || pb->parent != b || pa->doc != da || pb->doc != db ||
                pa->prev != prev_a || pb->prev != prev_b || pa->_private || pb->_private ||
                pa->psvi || pb->psvi) {
                snprintf(why, n, "<%s %s>: the attribute's own fields or links differ",
                         show(a->name), show(pa->name));
                return why;
            }
            xmlNodePtr va = pa->children, vb = pb->children;
            for (; va && vb; va = va->next, vb = vb->next) {
                if (va->type != vb->type || !str_eq(va->content, vb->content) ||
                    !str_eq(va->name, vb->name))
                    break;
                if (va->parent != (xmlNodePtr)pa || vb->parent != (xmlNodePtr)pb ||
                    links_bad(va, da) || links_bad(vb, db)) {
                    snprintf(why, n, "<%s %s>: the value's links differ", show(a->name),
                             show(pa->name));
                    return why;
                }
            }
            if (va || vb) {
                snprintf(why, n, "<%s %s> value '%.60s' vs '%.60s'", show(a->name), show(pa->name),
                         va ? show(va->content) : "(none)", vb ? show(vb->content) : "(none)");
                return why;
            }
            bool ida = registered(da, pa), idb = registered(db, pb);
            if (ida != idb || ida != (pa->atype == XML_ATTRIBUTE_ID)) {
                snprintf(why, n, "<%s %s='%.60s'>: registered as an id %s", show(a->name),
                         show(pa->name), show(attr_value(pa)),
                         ida ? "on the first side only" : "on the second side only");
                return why;
            }
            *ret_ids += ida;
        }
        if (pa || pb) {
            snprintf(why, n, "<%s> attribute count differs at '%s'", show(a->name),
                     show(pa ? pa->name : pb->name));
            return why;
        }
    }
    return NULL;
}

/* Both documents, walked in step (iteratively: deep pages stay off the stack). */
const char *tree_diff(htmlDocPtr a, htmlDocPtr b, char *why, size_t n)
{
    if (!str_eq(a->encoding, b->encoding)) {
        snprintf(why, n, "encoding '%s' vs '%s'", show(a->encoding), show(b->encoding));
        return why;
    }
    if (a->type != b->type || a->charset != b->charset || a->properties != b->properties ||
        a->parseFlags != b->parseFlags || !str_eq(a->URL, b->URL) ||
        !str_eq(a->version, b->version) || a->standalone != b->standalone || !a->dict != !b->dict ||
        a->extSubset || b->extSubset || a->_private || b->_private) {
        snprintf(why, n,
                 "document fields differ (type %d/%d, charset %d/%d, properties %d/%d, "
                 "parse flags %d/%d, URL %s / %s)",
                 (int)a->type, (int)b->type, a->charset, b->charset, a->properties, b->properties,
                 a->parseFlags, b->parseFlags, show(a->URL), show(b->URL));
        return why;
    }
    int ia = a->ids ? xmlHashSize(a->ids) : 0, ib = b->ids ? xmlHashSize(b->ids) : 0;
    if (ia != ib || !a->ids != !b->ids) {
        snprintf(why, n, "%d ids (%s) vs %d (%s)", ia, a->ids ? "a table" : "no table", ib,
                 b->ids ? "a table" : "no table");
        return why;
    }
    int ids = 0;
    xmlNodePtr x = a->children, y = b->children;
    if ((x && x->parent != (xmlNodePtr)a) || (y && y->parent != (xmlNodePtr)b)) {
        snprintf(why, n, "a top-level node's parent is not its document");
        return why;
    }
    while (x || y) {
        if (!x || !y) {
            snprintf(why, n, "a %s node only on one side", show(x ? x->name : y->name));
            return why;
        }
        if (node_diff(x, y, a, b, &ids, why, n))
            return why;
        if (x->parent != NULL && y->parent != NULL && x->parent->type != y->parent->type) {
            snprintf(why, n, "parent types differ at <%s>", show(x->name));
            return why;
        }
        bool down = x->type == XML_ELEMENT_NODE;
        if (down && (x->children || y->children)) {
            if (!x->children || !y->children) {
                snprintf(why, n, "<%s> has children on one side only", show(x->name));
                return why;
            }
            x = x->children;
            y = y->children;
            continue;
        }
        while (x && y && !x->next && !y->next) {
            x = x->parent;
            y = y->parent;
            if ((xmlNodePtr)x == (xmlNodePtr)a) {
                x = y = NULL;
                break;
            }
        }
        if (!x && !y)
            break;
        if (!x || !y || !x->next || !y->next) {
            snprintf(why, n, "sibling lists differ after <%s>", show(x ? x->name : y->name));
            return why;
        }
        x = x->next;
        y = y->next;
    }
    /* Every entry of the tables is an attribute of the tree that maps to it (the tables hold
     * nothing else). */
    if (ids != ia) {
        snprintf(why, n, "%d ids in the table, %d attributes registered", ia, ids);
        return why;
    }
    return NULL;
}
