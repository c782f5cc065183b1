/*
 * tree_diff.c - see tree_diff.h.
 */
#include "tree_diff.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <libxml/hash.h>
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

/* The first difference between the two nodes themselves (not their children), or NULL. */
static const char *node_diff(xmlNodePtr a, xmlNodePtr b, char *why, size_t n)
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
    if (a->type == XML_TEXT_NODE || a->type == XML_COMMENT_NODE ||
        a->type == XML_CDATA_SECTION_NODE) {
        if (!str_eq(a->content, b->content)) {
            snprintf(why, n, "content '%.60s' vs '%.60s'", show(a->content), show(b->content));
            return why;
        }
    }
    if (a->type == XML_DTD_NODE) {
        xmlDtdPtr da = (xmlDtdPtr)a, db = (xmlDtdPtr)b;
        if (!str_eq(da->ExternalID, db->ExternalID) || !str_eq(da->SystemID, db->SystemID)) {
            snprintf(why, n, "DTD '%s' '%s' vs '%s' '%s'", show(da->ExternalID), show(da->SystemID),
                     show(db->ExternalID), show(db->SystemID));
            return why;
        }
    }
    if (a->type == XML_ELEMENT_NODE) {
        xmlAttrPtr pa = a->properties, pb = b->properties;
        for (; pa && pb; pa = pa->next, pb = pb->next) {
            if (!str_eq(pa->name, pb->name) || pa->atype != pb->atype || pa->ns || pb->ns) {
                snprintf(why, n, "<%s> attribute '%s' (%d) vs '%s' (%d)", show(a->name),
                         show(pa->name), (int)pa->atype, show(pb->name), (int)pb->atype);
                return why;
            }
            xmlNodePtr va = pa->children, vb = pb->children;
            for (; va && vb; va = va->next, vb = vb->next)
                if (va->type != vb->type || !str_eq(va->content, vb->content))
                    break;
            if (va || vb) {
                snprintf(why, n, "<%s %s> value '%.60s' vs '%.60s'", show(a->name), show(pa->name),
                         va ? show(va->content) : "(none)", vb ? show(vb->content) : "(none)");
                return why;
            }
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
        a->parseFlags != b->parseFlags || !str_eq(a->URL, b->URL)) {
        snprintf(why, n,
                 "document fields differ (type %d/%d, charset %d/%d, properties %d/%d, "
                 "parse flags %d/%d, URL %s / %s)",
                 (int)a->type, (int)b->type, a->charset, b->charset, a->properties, b->properties,
                 a->parseFlags, b->parseFlags, show(a->URL), show(b->URL));
        return why;
    }
    int ia = a->ids ? xmlHashSize(a->ids) : 0, ib = b->ids ? xmlHashSize(b->ids) : 0;
    if (ia != ib) {
        snprintf(why, n, "%d ids vs %d", ia, ib);
        return why;
    }
    xmlNodePtr x = a->children, y = b->children;
    while (x || y) {
        if (!x || !y) {
            snprintf(why, n, "a %s node only on one side", show(x ? x->name : y->name));
            return why;
        }
        if (node_diff(x, y, why, n))
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
    return NULL;
}
