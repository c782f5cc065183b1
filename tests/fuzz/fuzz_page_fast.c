/*
 * fuzz_page_fast.c - libFuzzer target: page_fast.c against libxml2. The input is a page (and
 * a seed page mutated by libFuzzer is the useful case: most random bytes leave the subset at
 * once). Property: whenever page_fast_parse builds a document, libxml2's htmlReadMemory with
 * page.c's options builds the same one for the same bytes, node by node (tree_diff); a
 * difference aborts with the first one. Memory safety of both under ASan+UBSan besides.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <libxml/parser.h>
#include <libxml/xmlerror.h>

#include "../../bot/page-int.h"
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 20))
        return 0;
    const char *body = (const char *)data;
    htmlDocPtr fast = page_fast_parse(body, size, "http://127.0.0.1:8080/erp/x");
    if (!fast)
        return 0;
    htmlDocPtr ref =
        htmlReadMemory(body, (int)size, "http://127.0.0.1:8080/erp/x", NULL, PAGE_HTML_OPTIONS);
    char why[400];
    const char *d = ref ? tree_diff(fast, ref, why, sizeof(why)) : "libxml2 built no document";
    if (d) {
        fprintf(stderr, "fuzz_page_fast: the fast tree differs from libxml2's: %s\n", d);
        abort();
    }
    xmlFreeDoc(fast);
    xmlFreeDoc(ref);
    return 0;
}
