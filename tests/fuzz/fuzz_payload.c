/*
 * fuzz_payload.c - libFuzzer target: invoice_from_json's two readers on arbitrary text. The
 * fast reader (the canonical payload's subset, bot/invoice.c) and jansson must give the same
 * code, the same message and the same invoice for every input, the fast one taking the text or
 * not; and an accepted payload, written again by invoice_to_json, reads back through the fast
 * reader (unless jansson escaped a character in it) as the same invoice and the same text.
 *
 * An input whose first byte is 1 to 10 (a place) puts the rest in one place of a fixed canonical
 * payload (a string's content, a number, the lines, a line's members, before or after the members):
 * short inputs there reach what a mutation of a whole payload rarely does (a surrogate in a
 * name, a 19-digit amount). Any other input is the payload itself.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/invoice.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool same_str(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

static bool same_invoice(const struct invoice *a, const struct invoice *b)
{
    if (!same_str(a->vendor_id, b->vendor_id) || !same_str(a->vendor_name, b->vendor_name) ||
        !same_str(a->invoice_number, b->invoice_number) || a->doc_type != b->doc_type ||
        strcmp(a->issue_date, b->issue_date) != 0 || strcmp(a->due_date, b->due_date) != 0 ||
        strcmp(a->currency, b->currency) != 0 || a->exponent != b->exponent ||
        a->net_total != b->net_total || a->tax_total != b->tax_total || a->payable != b->payable ||
        a->n_lines != b->n_lines || (a->lines == NULL) != (b->lines == NULL))
        return false;
    for (size_t i = 0; i < a->n_lines; i++) {
        const struct invoice_line *x = &a->lines[i], *y = &b->lines[i];
        if (!same_str(x->description, y->description) || !same_str(x->gl_account, y->gl_account) ||
            !same_str(x->quantity, y->quantity) || !same_str(x->unit_price, y->unit_price) ||
            !same_str(x->tax_category, y->tax_category) || x->net != y->net || x->tax != y->tax)
            return false;
    }
    return true;
}

/* The fixed payload around the places (canonical, every value valid). */
#define P_HEAD                                                                                     \
    "\"currency\":\"EUR\",\"doc_type\":\"invoice\",\"due_date\":\"2026-12-03\",\"exponent\":2,"    \
    "\"invoice_number\":\"INV-1\",\"issue_date\":\"2026-11-03\",\"lines\":"
#define P_LINE                                                                                     \
    "\"description\":\"Paper\",\"gl_account\":\"6000\",\"net\":10000,\"quantity\":null,"           \
    "\"tax\":1900,\"tax_category\":\"S:19\",\"unit_price\":null"
#define P_TAIL                                                                                     \
    "\"net_total\":10000,\"payable\":11900,\"tax_total\":1900,\"v\":1,\"vendor_id\":\"100001\","   \
    "\"vendor_name\":"
#define P_FROM_ISSUE_DATE "\"issue_date\":\"2026-11-03\",\"lines\":[]," P_TAIL "null}"

/* Where a placed input goes: between before and after. */
static const struct {
    const char *before, *after;
} places[] = {
    [0] = {"", ""},                                          /* the input is the payload */
    [1] = {"{" P_HEAD "[{" P_LINE "}]," P_TAIL "\"", "\"}"}, /* the vendor's name */
    [2] = {"{" P_HEAD "[{\"description\":\"", "\",\"net\":1,\"tax\":0}]," P_TAIL "null}"},
    [3] = {"{" P_HEAD "[{" P_LINE "}],\"net_total\":",
           ",\"payable\":11900,\"tax_total\":1900,\"v\":1,\"vendor_id\":\"1\"}"}, /* an amount */
    [4] = {"{" P_HEAD, "," P_TAIL "null}"},                                       /* the lines */
    [5] = {"{" P_HEAD "[{", "}]," P_TAIL "null}"}, /* a line's members */
    [6] = {"{", P_HEAD "[]," P_TAIL "null}"},      /* before the members */
    [7] = {"{" P_HEAD "[]," P_TAIL "null", "}"},   /* after them */
    [8] = {"{\"currency\":\"", "\",\"doc_type\":\"invoice\",\"exponent\":2,\"invoice_number\":"
                               "\"1\"," P_FROM_ISSUE_DATE}, /* the currency */
    [9] = {"{\"currency\":\"EUR\",\"doc_type\":\"invoice\",\"exponent\":2,\"invoice_number\":"
           "\"1\",\"issue_date\":\"",
           "\",\"lines\":[]," P_TAIL "null}"}, /* the issue date */
    [10] = {"{\"currency\":\"EUR\",\"doc_type\":\"",
            "\",\"exponent\":2,\"invoice_number\":\"1\"," P_FROM_ISSUE_DATE}, /* the type */
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n_places = sizeof(places) / sizeof(places[0]);
    size_t place = size > 0 && data[0] >= 1 && data[0] < n_places ? data[0] : 0;
    if (place) {
        data++;
        size--;
    }
    size_t nb = strlen(places[place].before), na = strlen(places[place].after);
    char *json = malloc(nb + size + na + 1);
    CHECK(json);
    memcpy(json, places[place].before, nb);
    memcpy(json + nb, data, size);
    memcpy(json + nb + size, places[place].after, na + 1);
    /* a NUL in the input ends the text for both readers alike */

    struct invoice a, b;
    char ea[APBOT_ERR_LEN] = "untouched", eb[APBOT_ERR_LEN] = "untouched";
    bool fast = false, jansson_fast = true;
    int ra = invoice_from_json_as(json, INVOICE_JSON_AUTO, &a, &fast, ea, sizeof(ea));
    int rb = invoice_from_json_as(json, INVOICE_JSON_JANSSON, &b, &jansson_fast, eb, sizeof(eb));
    CHECK(!jansson_fast);
    CHECK(ra == rb && strcmp(ea, eb) == 0 && same_invoice(&a, &b));
    CHECK(ra == APBOT_OK || (!a.vendor_id && !a.invoice_number && !a.lines && !a.n_lines));

    if (ra == APBOT_OK) {
        char *again = invoice_to_json(&a);
        CHECK(again);
        struct invoice c;
        char ec[APBOT_ERR_LEN];
        bool fast_again = false;
        CHECK(invoice_from_json_as(again, INVOICE_JSON_AUTO, &c, &fast_again, ec, sizeof(ec)) ==
              APBOT_OK);
        CHECK(fast_again == (strchr(again, '\\') == NULL));
        CHECK(same_invoice(&a, &c));
        char *third = invoice_to_json(&c);
        CHECK(third && strcmp(again, third) == 0);
        free(third);
        invoice_done(&c);
        free(again);
    }
    invoice_done(&a);
    invoice_done(&b);
    free(json);
    return 0;
}
