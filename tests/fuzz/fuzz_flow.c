/*
 * fuzz_flow.c - libFuzzer target: the flow loader on arbitrary bytes (XML parse without DTDs,
 * the embedded RelaxNG schema, building the flow, the semantic checks: variables in their
 * places, PCRE2 patterns, XPath limits, the safety rules of the post). A flow that loads must
 * keep flow.h's promises (fuzz_flow.h: one committing step, rules with a condition, no
 * credentials in the base URL) and every template in it must expand under the properties of
 * fuzz_flow.h with the sample values. A refused flow must say why. Seeds: flows/ and
 * tests/data/flows/; tests/fuzz/flow.dict holds the language's names.
 */
#include <stddef.h>
#include <stdint.h>

#include <libxml/parser.h>

#include "fuzz_flow.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    xmlInitParser();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct flow *f = NULL;
    char err[4096] = "";
    int rc = fuzz_flow_load(data, size, &f, err, sizeof(err));
    if (rc != APBOT_OK) {
        FUZZ_CHECK(f == NULL && err[0]);
        return 0;
    }
    FUZZ_CHECK(f);
    fuzz_flow_invariants(f);
    /* Well-formed values: the templates are what is fuzzed here. */
    struct fuzz_in in = {fuzz_good_values, sizeof(fuzz_good_values) - 1};
    struct fuzz_vars fv;
    fuzz_vars_read(&fv, &in);
    fuzz_expand_all(f, &fv.v, true);
    fuzz_vars_done(&fv);
    flow_free(f);
    return 0;
}
