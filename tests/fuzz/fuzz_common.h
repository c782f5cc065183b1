/*
 * fuzz_common.h - what the reader fuzz targets share: a sink that pushes every accepted invoice
 * through the rest of the pipeline (validate, canonical JSON, key, fingerprint, JSON round trip,
 * terminal escaping) and aborts when the pipeline contradicts itself. What text_escape makes
 * of every refusal, location and invoice text must be safe for a terminal: no C0 control but
 * a kept tab, no DEL, no C1 control, well-formed UTF-8, within its bound.
 *
 * Build: `make fuzz-build` (tests/fuzz/CMakeLists.txt links each target with clang's
 * -fsanitize=fuzzer against the library built for tests, apbot_unit), then, with a scratch
 * corpus first so that libFuzzer writes there and not into the repository's:
 *   build-fuzz/fuzz/fuzz_ublin -max_total_time=120 /tmp/corpus-ublin tests/fuzz/corpus/ublin
 */
#ifndef APBOT_FUZZ_COMMON_H
#define APBOT_FUZZ_COMMON_H

#include <stdlib.h>
#include <string.h>

#include "apbot/invoice.h"
#include "apbot/reader.h"
#include "apbot/text.h"

/* text_escape(s) under its contract (text.h), for a few bounds and both tab modes. */
static void fuzz_escape_check(const char *s)
{
    static const size_t maxes[] = {8, 13, 64, 512};
    for (size_t m = 0; m < sizeof(maxes) / sizeof(maxes[0]); m++)
        for (int keep_tab = 0; keep_tab < 2; keep_tab++) {
            char *e = text_escape(s, maxes[m], keep_tab);
            const unsigned char *p = (const unsigned char *)e;
            if (strlen(e) > maxes[m] || !invoice_utf8_valid(e))
                abort();
            for (; *p; p++)
                if ((*p < 0x20 && !(keep_tab && *p == '\t')) || *p == 0x7F ||
                    (p[0] == 0xC2 && p[1] >= 0x80 && p[1] <= 0x9F))
                    abort(); /* a control reaches the terminal */
            free(e);
        }
}

static int fuzz_accept(void *ctx, const struct invoice *inv, const char *where)
{
    (void)ctx;
    fuzz_escape_check(where);
    fuzz_escape_check(inv->vendor_name);
    fuzz_escape_check(inv->invoice_number);
    for (size_t i = 0; i < inv->n_lines; i++)
        fuzz_escape_check(inv->lines[i].description);
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
    fuzz_escape_check(where);
    fuzz_escape_check(reason);
}

static const struct invoice_sink fuzz_sink = {fuzz_accept, fuzz_refuse, NULL};

#endif
