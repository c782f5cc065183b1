/*
 * money.h - exact amounts: an integer count of minor units and an ISO 4217 currency.
 *
 * No floating point anywhere. Parsing refuses more fractional digits than the currency has
 * (unless the caller asks for a named rounding), overflow, empty and non-numeric text, and
 * says why. Formatting writes the decimal forms ERPs and reports need.
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

#endif
