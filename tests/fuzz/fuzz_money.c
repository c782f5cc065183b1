/*
 * fuzz_money.c - libFuzzer target: money_parse on arbitrary text in every currency exponent,
 * style and rounding the first bytes pick, and the properties that must hold: whatever parses
 * formats and parses back to the same minor units (plain and grouped, dot and comma), and a
 * refused text leaves the result untouched.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/money.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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

    int64_t v = INT64_C(0x5a5a5a5a);
    char err[APBOT_ERR_LEN];
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
