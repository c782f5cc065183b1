/*
 * fuzz_jdoc.c - libFuzzer target: a JSON answer from an ERP (web/jdoc.c). The input is parsed
 * under small bounds (what is refused says why, with APBOT_E_PARSE or APBOT_E_LIMIT only);
 * what parses is written, parsed again and written again to the same text (the writer's
 * output is a fixed point), every number keeps the text it had, and pointers drawn from the
 * input's first bytes either find a value whose text is bounded or find nothing.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/buf.h"
#include "web/jdoc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *write_or_die(const json_t *v)
{
    struct apbot_buf b;
    apbot_buf_init(&b, 1u << 24);
    if (jdoc_write(&b, v) != APBOT_OK)
        abort(); /* a parsed document always writes (no reals, far below the bound) */
    return apbot_buf_steal(&b, NULL);
}

/* Every number of v has a text that is one JSON number. */
static void check_numbers(const json_t *v)
{
    const char *k;
    json_t *m;
    size_t i;
    switch (jdoc_kind(v)) {
    case JDOC_NUMBER: {
        const char *t = jdoc_number_text(v);
        if (!t || !jdoc_is_number(t, strlen(t)))
            abort();
        break;
    }
    case JDOC_ARRAY:
        json_array_foreach((json_t *)v, i, m) check_numbers(m);
        break;
    case JDOC_OBJECT:
        json_object_foreach((json_t *)v, k, m) check_numbers(m);
        break;
    case JDOC_NULL:
    case JDOC_BOOL:
    case JDOC_STRING:
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const pointers[] = {"",           "/result", "/result/0", "/error/0",
                                           "/error/1/0", "/0",      "/a~1b",     "/result/0/id",
                                           "/-",         "/~0"};
    struct jdoc_limits lim = {.max_bytes = 1u << 16, .max_nodes = 4096, .max_depth = 24};
    struct jdoc *d = NULL, *again = NULL;
    char err[256] = "";

    int rc = jdoc_parse((const char *)data, size, &lim, &d, err, sizeof(err));
    if (rc != APBOT_OK) {
        if ((rc != APBOT_E_PARSE && rc != APBOT_E_LIMIT) || !err[0])
            abort();
        return 0;
    }
    check_numbers(jdoc_root(d));
    char *w = write_or_die(jdoc_root(d));
    struct jdoc_limits wide = {.max_bytes = 1u << 24, .max_nodes = 1u << 20, .max_depth = 64};
    if (jdoc_parse(w, strlen(w), &wide, &again, err, sizeof(err)) != APBOT_OK)
        abort(); /* what the writer writes reads back */
    char *w2 = write_or_die(jdoc_root(again));
    if (strcmp(w, w2) != 0)
        abort();
    for (size_t i = 0; i < sizeof(pointers) / sizeof(pointers[0]); i++) {
        const json_t *v = jdoc_at(jdoc_root(d), pointers[i]);
        char *t = jdoc_text(v, 4096);
        if (v && !t && jdoc_kind(v) != JDOC_OBJECT && jdoc_kind(v) != JDOC_ARRAY &&
            jdoc_kind(v) != JDOC_STRING)
            abort(); /* a scalar always has a text */
        free(t);
    }
    free(w);
    free(w2);
    jdoc_free(again);
    jdoc_free(d);
    return 0;
}
