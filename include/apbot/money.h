/*
 * money.h - exact amounts: an integer count of minor units and an ISO 4217 currency.
 *
 * No floating point anywhere. Parsing refuses more fractional digits than the currency has
 * (unless the caller asks for a named rounding), overflow, empty and non-numeric text, and
 * says why. Formatting writes the decimal forms ERPs and reports need. A rate (a percentage)
 * is an exact integer too, and an amount at a rate is rounded by a rule the caller names;
 * money_apportion_tax splits a document's tax over its lines to the minor unit.
 */
#ifndef APBOT_MONEY_H
#define APBOT_MONEY_H

#include <stddef.h>
#include <stdint.h>

#include "apbot/error.h"

/* How the text writes its decimal and grouping separators. */
enum money_style {
    MONEY_PLAIN = 0,     /* "-1234.50": dot decimal, no grouping (CSV, UBL, ledger) */
    MONEY_GROUPED_DOT,   /* "1,234.50": comma grouping allowed, dot decimal */
    MONEY_GROUPED_COMMA, /* "1.234,50": dot grouping allowed, comma decimal (German) */
};

/* What to do with more fractional digits than the currency has. */
enum money_rounding {
    MONEY_ROUND_REFUSE = 0, /* refuse with APBOT_E_RANGE (the default everywhere) */
    MONEY_ROUND_HALF_UP,    /* commercial rounding, away from zero at .5 */
    MONEY_ROUND_HALF_EVEN,  /* banker's rounding */
    MONEY_ROUND_UP,         /* away from zero: any remainder makes one minor unit more */
    MONEY_ROUND_DOWN,       /* toward zero: the remainder is dropped */
};

/* Largest absolute amount in minor units apbot accepts (well inside int64_t). */
#define MONEY_MAX_MINOR INT64_C(999999999999999999)

/* Minor-unit exponent of an ISO 4217 code (EUR 2, JPY 0, KWD 3), or -1 if unknown. */
int money_exponent(const char *currency);

/*
 * Parses `text` as an amount in `currency`. Leading/trailing ASCII spaces are ignored; a
 * leading '-' or '+' is allowed. Fractional digits past the exponent that are all zero are
 * exact and accepted ("1.500" EUR is 150); "1.505" EUR is refused unless a rounding is named.
 * Grouping separators (grouped styles only) must sit between groups of three digits. On success
 * stores the minor units in *ret_minor; on failure leaves it untouched and writes a reason into err
 * (NULL allowed). Returns APBOT_E_INVAL (empty, non-numeric, unknown currency), APBOT_E_RANGE (too
 * many decimals, overflow).
 */
int money_parse(const char *text, const char *currency, enum money_style style,
                enum money_rounding rounding, int64_t *ret_minor, char *err,
                size_t errlen) APBOT_MUST_USE;

/*
 * Writes `minor` with `exponent` decimals into buf: decimal separator `dec` ('.' or ','),
 * grouping separator `group` every three digits ('\0' for none). Returns APBOT_OK or
 * APBOT_E_LIMIT when buf is too small (buf then holds "").
 */
int money_format(int64_t minor, int exponent, char dec, char group, char *buf,
                 size_t len) APBOT_MUST_USE;

/* money_format with '.' and no grouping: "1234.50". Same returns. */
int money_format_plain(int64_t minor, int exponent, char *buf, size_t len) APBOT_MUST_USE;

/*
 * money_format with '.' and ',' grouping, for people to read: "1,234.50". Writes "?" when buf
 * is too small (or the amount cannot be written). Cannot fail; returns buf.
 */
const char *money_text(int64_t minor, int exponent, char *buf, size_t len);

/* Adds b to *acc; APBOT_E_RANGE (acc untouched) past MONEY_MAX_MINOR. */
int money_add(int64_t *acc, int64_t b) APBOT_MUST_USE;

/* A rate is a percentage as an integer count of 1/10,000 of a percent: 19 % is 190000, 7.5 %
 * is 75000, 0.25 % is 2500. Four decimals of a percent are exact; no rate is a float. */
#define MONEY_RATE_SCALE 10000                   /* units per percent */
#define MONEY_RATE_MAX (1000 * MONEY_RATE_SCALE) /* 1000 % */

/*
 * Parses the first len bytes of text as a percentage ("19", "7.5", "19.00", "0"), without a
 * sign or a '%': digits, optionally '.' and decimals; decimals past the fourth must be zeros.
 * On success *ret_rate is the rate (MONEY_RATE_SCALE units); APBOT_E_INVAL for anything else,
 * APBOT_E_RANGE past MONEY_RATE_MAX or for a fifth non-zero decimal (*ret_rate untouched).
 */
int money_rate_parse(const char *text, size_t len, int64_t *ret_rate) APBOT_MUST_USE;

/* Writes a rate as a percentage without trailing zeros ("19", "7.5", "0.25") into buf.
 * Cannot fail (cut to len); returns buf. */
const char *money_rate_text(int64_t rate, char *buf, size_t len);

/*
 * minor at rate (minor * rate / 100 %), rounded to the minor unit by `rounding`, which works on
 * the magnitude (a negative amount rounds as its positive mirror). MONEY_ROUND_REFUSE refuses a
 * result that is not whole (APBOT_E_RANGE). APBOT_E_RANGE also for a rate outside
 * 0..MONEY_RATE_MAX, an amount past MONEY_MAX_MINOR or a result past it; APBOT_E_INVAL for an
 * unknown rule. *ret_minor is untouched on failure.
 */
int money_at_rate(int64_t minor, int64_t rate, enum money_rounding rounding,
                  int64_t *ret_minor) APBOT_MUST_USE;

/*
 * Splits a document's tax `total` over n lines (net[i] minor units at rate[i]), so that the
 * lines add up to the total to the minor unit: each line's exact tax (net * rate) is rounded
 * down, and the minor units the total has beyond those floors go one each to the lines with
 * the largest remainders (the largest-remainder method); equal remainders go to the earlier
 * line. A document whose total is negative (a credit note written with negative amounts) is
 * split as its positive mirror, so that it gets exactly the mirror's taxes with the other
 * sign. Every line thus gets its exact tax rounded down or up, never further away: when the
 * total cannot be reached that way (it is outside the sum of the floors .. the sum of the
 * ceilings: a tax on something that is no line, a wrong rate), the split is refused with
 * APBOT_E_DATA and both sums and the total in err (written with `exponent` decimals).
 * APBOT_E_RANGE for a rate outside 0..MONEY_RATE_MAX or a sum past MONEY_MAX_MINOR. Pure; on
 * failure ret_tax is untouched. n == 0 needs a total of 0.
 */
int money_apportion_tax(const int64_t *net, const int64_t *rate, size_t n, int64_t total,
                        int exponent, int64_t *ret_tax, char *err, size_t errlen) APBOT_MUST_USE;

#endif
