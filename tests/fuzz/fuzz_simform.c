/*
 * fuzz_simform.c - libFuzzer target: the simulator's request-body decoder (sim_form_parse,
 * application/x-www-form-urlencoded) and the parsers it hands form values to: amounts in the
 * German, US and plain styles and dates in the German, ISO and US forms. Properties: a decoded
 * form encodes and decodes back to the same fields; whatever amount or date parses formats
 * and parses back to the same value. The simulator is a test fixture, but every test of the
 * bot's safety stands on it reading what the bot sent exactly.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"

#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Percent-encodes every byte but unreserved ones (space as '+'). */
static void encode(struct sim_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '.' || *p == '_' || *p == '~') {
            sim_buf_add(b, (const char *)p, 1);
        } else if (*p == ' ') {
            sim_buf_add(b, "+", 1);
        } else {
            char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
            sim_buf_add(b, e, 3);
        }
    }
}

static void amount_round_trip(const char *s)
{
    static const int exps[] = {0, 2, 3};
    for (size_t i = 0; i < 3; i++) {
        int e = exps[i];
        for (int flags = 0; flags < 8; flags++) {
            int64_t v = 0, back = 0;
            if (sim_amount_parse(s, e, flags, &v) != 0)
                continue;
            char out[64];
            if (flags & SIM_AMOUNT_US)
                sim_amount_format_us(out, sizeof out, v, e);
            else
                sim_amount_format_de(out, sizeof out, v, e);
            CHECK(sim_amount_parse(out, e, (flags & SIM_AMOUNT_US) | SIM_AMOUNT_ZERO_OK, &back) ==
                  0);
            CHECK(back == v);
        }
        int64_t v = 0, back = 0;
        if (sim_amount_parse_plain(s, e, &v) == 0) {
            char out[64];
            sim_amount_format_plain(out, sizeof out, v, e);
            CHECK(sim_amount_parse_plain(out, e, &back) == 0 && back == v);
        }
    }
}

static void date_round_trip(const char *s)
{
    struct sim_date d, back;
    char out[32];
    if (sim_date_parse_de(s, &d) == 0) {
        sim_date_format_de(out, sizeof out, d);
        CHECK(sim_date_parse_de(out, &back) == 0 && back.y == d.y && back.m == d.m &&
              back.d == d.d);
        struct sim_date again = sim_date_from_days(sim_date_to_days(d));
        CHECK(again.y == d.y && again.m == d.m && again.d == d.d);
    }
    if (sim_date_parse_iso(s, &d) == 0) {
        sim_date_format_iso(out, sizeof out, d);
        CHECK(sim_date_parse_iso(out, &back) == 0 && back.y == d.y && back.m == d.m &&
              back.d == d.d);
    }
    if (sim_date_parse_us(s, &d) == 0) {
        sim_date_format_us(out, sizeof out, d);
        CHECK(sim_date_parse_us(out, &back) == 0 && back.y == d.y && back.m == d.m &&
              back.d == d.d);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > SIM_MAX_BODY)
        return 0; /* the server refuses larger bodies before parsing */
    struct sim_form f;
    int rc = sim_form_parse(&f, (const char *)data, size);
    CHECK(rc == 0 || rc == -1);
    CHECK(f.n <= SIM_FORM_MAX_FIELDS);
    if (rc == 0) {
        struct sim_buf b;
        sim_buf_init(&b, 8 * SIM_MAX_BODY);
        for (size_t i = 0; i < f.n; i++) {
            CHECK(f.key[i] && f.value[i]);
            if (i)
                sim_buf_add(&b, "&", 1);
            encode(&b, f.key[i]);
            sim_buf_add(&b, "=", 1);
            encode(&b, f.value[i]);
            amount_round_trip(f.value[i]);
            date_round_trip(f.value[i]);
        }
        CHECK(!b.overflow);
        struct sim_form g;
        CHECK(sim_form_parse(&g, b.data ? b.data : "", b.len) == 0);
        CHECK(g.n == f.n); /* every field re-encodes as "k=v", never as an empty segment */
        for (size_t i = 0; i < g.n; i++)
            CHECK(strcmp(g.key[i], f.key[i]) == 0 && strcmp(g.value[i], f.value[i]) == 0);
        if (f.n)
            CHECK(sim_form_get(&f, f.key[0]) == f.value[0]);
        sim_form_done(&g);
        sim_buf_done(&b);
    }
    sim_form_done(&f);
    return 0;
}
