/*
 * fuzz_page_fast.c - libFuzzer target: page_fast.c against libxml2. The input is a page (and
 * a seed page mutated by libFuzzer is the useful case: most random bytes leave the subset at
 * once). Properties: whenever page_fast_parse builds a document, libxml2's htmlReadMemory with
 * page.c's options builds the same one for the same bytes, node by node (tree_diff); and on
 * libxml2's document (and the fast one), page.c's own evaluation of the flows' location
 * paths (page_path_eval) selects what libxml2's XPath selects, node for node, from the
 * document and from its first elements. A difference aborts with the first one. Memory
 * safety of both under ASan+UBSan besides.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <libxml/parser.h>
#include <libxml/xmlerror.h>
#include <libxml/xpath.h>

#include "web/page-int.h"
#include "../helpers/tree_diff.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void silent(void *ctx, const char *msg, ...)
{
    (void)ctx;
    (void)msg;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    xmlInitParser();
    xmlSetGenericErrorFunc(NULL, silent);
    return 0;
}

/* Paths as the bundled flows write them (and a few more of the form page_path_eval reads). */
static const char *const paths[] = {
    "//form[@id='apEntry']",
    "//table[@id='resultTable']//tr[@class='row']",
    "//table[@id='results']/tbody/tr",
    "//a[@id='nextPage']/@href",
    "//input[@name='vendor']/@value",
    "td[@class='amount']",
    "td",
    "/html/body",
    "//td",
    "//tr/td",
    "//div//div",
    "//span/@id",
    "//form//input[@type='hidden']/@value",
    "//p[@id='']",
    "//option[@selected=\"selected\"]",
    "html",
};

/* page_path_eval against libxml2's XPath on doc, the absolute paths from the document, the
 * relative ones from it and from its first 8 elements (libxml2's XPath is slow enough for
 * these to be most of a run): aborts on a difference. */
static void check_paths(xmlDocPtr doc)
{
    xmlXPathContextPtr x = xmlXPathNewContext(doc);
    if (!x)
        abort();
    xmlNodePtr from[9] = {NULL};
    int n_from = 1;
    xmlNodePtr root = xmlDocGetRootElement(doc);
    for (xmlNodePtr n = root; n && n_from < 9; n = page_walk_next(n, root, true))
        if (n->type == XML_ELEMENT_NODE)
            from[n_from++] = n;
    for (int f = 0; f < n_from; f++) {
        for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
            if (f > 0 && paths[i][0] == '/')
                continue; /* the same from every node */
            xmlXPathObjectPtr mine = page_path_eval(doc, from[f], paths[i]);
            if (!mine)
                continue; /* declined: libxml2 evaluates it */
            x->node = from[f] ? from[f] : (xmlNodePtr)doc;
            xmlXPathObjectPtr ref = xmlXPathEvalExpression(BAD_CAST paths[i], x);
            int nm = mine->nodesetval ? mine->nodesetval->nodeNr : 0;
            int nr = !ref || ref->type != XPATH_NODESET ? -1
                     : ref->nodesetval                  ? ref->nodesetval->nodeNr
                                                        : 0; /* no set: an empty one */
            bool same = nm == nr;
            for (int k = 0; same && k < nm; k++)
                same = mine->nodesetval->nodeTab[k] == ref->nodesetval->nodeTab[k];
            if (!same) {
                fprintf(stderr, "fuzz_page_fast: %s from element %d: %d nodes, libxml2's %d\n",
                        paths[i], f, nm, nr);
                abort();
            }
            xmlXPathFreeObject(mine);
            xmlXPathFreeObject(ref);
        }
    }
    xmlXPathFreeContext(x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 20))
        return 0;
    const char *body = (const char *)data;
    htmlDocPtr fast = page_fast_parse(body, size, "http://127.0.0.1:8080/erp/x");
    htmlDocPtr ref = size ? htmlReadMemory(body, (int)size, "http://127.0.0.1:8080/erp/x", NULL,
                                           PAGE_HTML_OPTIONS)
                          : NULL;
    if (ref)
        check_paths(ref);
    if (!fast) {
        xmlFreeDoc(ref);
        return 0;
    }
    char why[400];
    const char *d = ref ? tree_diff(fast, ref, why, sizeof(why)) : "libxml2 built no document";
    if (d) {
        fprintf(stderr, "fuzz_page_fast: the fast tree differs from libxml2's: %s\n", d);
        abort();
    }
    check_paths(fast);
    xmlFreeDoc(fast);
    xmlFreeDoc(ref);
    return 0;
}
