/*
 * fuzz_ublin.c - libFuzzer target: the UBL reader on arbitrary bytes in memory (the bounded
 * libxml2 parse, the XPath extraction, the refusal paths), every accepted invoice checked by
 * fuzz_common.h's sink: the bytes go through xmlin_read to ublin_doc, as reader.c hands a
 * parsed UBL document over. Build line in fuzz_common.h.
 */
#include <stddef.h>
#include <stdint.h>

#include <libxml/parser.h>

#include "input/ublin.h"
#include "input/xmlin-int.h"
#include "fuzz_common.h"

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
    char err[APBOT_ERR_LEN];
    struct xmlin_src src = {.fd = -1, .data = data, .len = size};
    (void)xmlin_read("fuzz.xml", &src, ublin_doc, NULL, &fuzz_sink, err, sizeof(err));
    return 0;
}
