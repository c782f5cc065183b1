/*
 * fuzz_money.c - libFuzzer target: money_parse on arbitrary text in every currency exponent,
 * style and rounding the first bytes pick, and the properties that must hold: whatever parses
 * formats and parses back to the same minor units (plain and grouped, dot and comma), and a
 * refused text leaves the result untouched. The same text also goes through erp_parse_amount
 * (an ERP result cell, with the table's separators the selector picks): what it accepts must
 * format with those separators and read back the same; a refusal is APBOT_E_INVAL or
 * APBOT_E_RANGE and leaves the result untouched (erp.h).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/erp.h"
#include "apbot/flow.h"
#include "apbot/money.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An ERP table cell in one of the separator pairs flows use. */
static void erp_cell(const char *text, const char *ccy, unsigned sel)
{
    static const char seps[][2] = {{',', '.'}, {'.', ','}, {'.', '\0'}, {',', ' '}, {'.', '\''}};
    const char *sep = seps[sel % (sizeof(seps) / sizeof(seps[0]))];
    struct flow_table t = {.amount_decimal = sep[0], .amount_group = sep[1]};
    char err[APBOT_ERR_LEN];
    int64_t v = INT64_C(0x5a5a5a5a), back = 0;
    int rc = erp_parse_amount(&t, text, ccy, &v, err, sizeof(err));
    if (rc != APBOT_OK) {
        if (v != INT64_C(0x5a5a5a5a) || (rc != APBOT_E_INVAL && rc != APBOT_E_RANGE))
            abort(); /* erp.h: INVAL or RANGE, the result untouched */
        return;
    }
    char buf[64];
    if (money_format(v, money_exponent(ccy), sep[0], sep[1], buf, sizeof(buf)) != APBOT_OK ||
        erp_parse_amount(&t, buf, ccy, &back, err, sizeof(err)) != APBOT_OK || back != v)
        abort(); /* the cell as the ERP would print the value reads back the same */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const ccys[] = {"EUR", "JPY", "KWD", "USD", "HUF", "CLF", "XXX", "eur"};
    if (size < 2)
        return 0;
    const char *ccy = ccys[data[0] % (sizeof(ccys) / sizeof(ccys[0]))];
    enum money_style style = (enum money_style)(data[1] % 3);
    enum money_rounding round = (enum money_rounding)((data[1] / 3) % 3);
    char *text = malloc(size - 1);
    if (!text)
        abort();
    memcpy(text, data + 2, size - 2);
    text[size - 2] = '\0';

    char err[APBOT_ERR_LEN];
    erp_cell(text, ccy, data[1] / 9);

    int64_t v = INT64_C(0x5a5a5a5a);
    int rc = money_parse(text, ccy, style, round, &v, err, sizeof(err));
    if (rc != APBOT_OK) {
        if (v != INT64_C(0x5a5a5a5a))
            abort(); /* a refusal wrote the result */
        free(text);
        return 0;
    }
    int e = money_exponent(ccy);
    if (e < 0 || v > MONEY_MAX_MINOR || v < -MONEY_MAX_MINOR)
        abort();
    char buf[64];
    int64_t back = 0;
    if (money_format_plain(v, e, buf, sizeof(buf)) != APBOT_OK ||
        money_parse(buf, ccy, MONEY_PLAIN, MONEY_ROUND_REFUSE, &back, err, sizeof(err)) !=
            APBOT_OK ||
        back != v)
        abort(); /* plain round trip */
    if (money_format(v, e, ',', '.', buf, sizeof(buf)) != APBOT_OK ||
        money_parse(buf, ccy, MONEY_GROUPED_COMMA, MONEY_ROUND_REFUSE, &back, err, sizeof(err)) !=
            APBOT_OK ||
        back != v)
        abort(); /* German round trip */
    if (money_format(v, e, '.', ',', buf, sizeof(buf)) != APBOT_OK ||
        money_parse(buf, ccy, MONEY_GROUPED_DOT, MONEY_ROUND_REFUSE, &back, err, sizeof(err)) !=
            APBOT_OK ||
        back != v)
        abort(); /* English round trip */
    free(text);
    return 0;
}
