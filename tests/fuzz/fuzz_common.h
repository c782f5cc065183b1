/*
 * fuzz_common.h - what the reader fuzz targets share: a sink that pushes every accepted invoice
 * through the rest of the pipeline (validate, canonical JSON, key, fingerprint, JSON round trip,
 * terminal escaping) and aborts when the pipeline contradicts itself.
 *
 * Build one target (the fuzz build in CMake is another helper's; this is the manual line):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Ibot \
 *     tests/fuzz/fuzz_ublin.c bot/{xmlin,ublin,ciiin,csvin,reader,pdfin,invoice,money,vendors,\
 *     buf,mem,error,text}.c $(pkg-config --cflags --libs libxml-2.0 jansson libqpdf) \
 *     -lcsv -lcrypto -lz -o fuzz_ublin
 *   ./fuzz_ublin -max_total_time=120 tests/fuzz/corpus/ublin
 */
#ifndef APBOT_FUZZ_COMMON_H
#define APBOT_FUZZ_COMMON_H

#include <stdlib.h>
#include <string.h>

#include "apbot/invoice.h"
#include "apbot/reader.h"
#include "apbot/text.h"

static int fuzz_accept(void *ctx, const struct invoice *inv, const char *where)
{
    (void)ctx;
    free(text_escape(where, 512, 0));
    char err[APBOT_ERR_LEN];
    if (invoice_validate(inv, err, sizeof(err)) != APBOT_OK)
        abort(); /* a reader handed over an invoice that is not valid */
    char key[INVOICE_KEY_LEN + 1], fp[INVOICE_FP_LEN + 1];
    if (invoice_identity_key(inv, key) || invoice_fingerprint(inv, fp))
        abort();
    char *json = invoice_to_json(inv);
    if (!json)
        abort();
    struct invoice back;
    if (invoice_from_json(json, &back, err, sizeof(err)) != APBOT_OK)
        abort(); /* the canonical payload does not read back */
    char key2[INVOICE_KEY_LEN + 1], fp2[INVOICE_FP_LEN + 1];
    if (invoice_identity_key(&back, key2) || invoice_fingerprint(&back, fp2) ||
        strcmp(key, key2) != 0 || strcmp(fp, fp2) != 0)
        abort(); /* the round trip changed the invoice */
    invoice_done(&back);
    free(json);
    return 0;
}

static void fuzz_refuse(void *ctx, const char *where, const char *reason)
{
    (void)ctx;
    free(text_escape(where, 512, 0));
    free(text_escape(reason, 512, 0));
}

static const struct invoice_sink fuzz_sink = {fuzz_accept, fuzz_refuse, NULL};

#endif
