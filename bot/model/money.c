/*
 * money.c - exact amounts as integer minor units, parsed from and formatted to decimal text.
 *
 * The ISO 4217 exponent table lives here. Parsing walks the text once, accumulating digits
 * into an int64_t with an overflow check against MONEY_MAX_MINOR, validating the grouping
 * separators of the chosen style, and deciding what to do with fractional digits beyond the
 * currency's exponent: extra zeros are exact and accepted ("1.500" EUR is 150), anything else
 * is refused unless the caller named a rounding rule. No floating point anywhere. Which style
 * a given input uses is the caller's business (CSV and UBL are MONEY_PLAIN).
 *
 * Rates: an amount at a rate is worked out exactly as a whole part and a remainder (in
 * millionths of a minor unit: a rate has four decimals of a percent), with every product
 * checked for overflow, before any rounding; money_apportion_tax rounds a whole document's
 * lines so that they add up to its tax (largest remainder, see money.h).
 */
#include "apbot/money.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/mem.h"

struct money_ccy {
    char code[4];
    int exponent;
};

/* ISO 4217 minor units. Sorted only for the reader; lookup is linear (short table). */
static const struct money_ccy money_table[] = {
    {"AED", 2}, {"ARS", 2}, {"AUD", 2}, {"BGN", 2}, {"BHD", 3}, {"BRL", 2}, {"CAD", 2}, {"CHF", 2},
    {"CLP", 0}, {"CNY", 2}, {"COP", 2}, {"CZK", 2}, {"DKK", 2}, {"EGP", 2}, {"EUR", 2}, {"GBP", 2},
    {"HKD", 2}, {"HUF", 2}, {"IDR", 2}, {"ILS", 2}, {"INR", 2}, {"IQD", 3}, {"ISK", 0}, {"JOD", 3},
    {"JPY", 0}, {"KRW", 0}, {"KWD", 3}, {"LYD", 3}, {"MAD", 2}, {"MXN", 2}, {"MYR", 2}, {"NOK", 2},
    {"NZD", 2}, {"OMR", 3}, {"PHP", 2}, {"PLN", 2}, {"QAR", 2}, {"RON", 2}, {"RSD", 2}, {"SAR", 2},
    {"SEK", 2}, {"SGD", 2}, {"THB", 2}, {"TND", 3}, {"TRY", 2}, {"TWD", 2}, {"UAH", 2}, {"USD", 2},
    {"VND", 0}, {"XAF", 0}, {"XOF", 0}, {"ZAR", 2},
};

int money_exponent(const char *currency)
{
    if (!currency || strlen(currency) != 3)
        return -1;
    for (size_t i = 0; i < sizeof(money_table) / sizeof(money_table[0]); i++)
        if (memcmp(money_table[i].code, currency, 3) == 0)
            return money_table[i].exponent;
    return -1;
}

static bool money_is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool money_is_space(char c)
{
    return c == ' ' || c == '\t';
}

/* acc = acc * 10 + d, refusing past MONEY_MAX_MINOR. */
static bool money_push_digit(int64_t *acc, int d)
{
    if (*acc > (MONEY_MAX_MINOR - d) / 10)
        return false;
    *acc = *acc * 10 + d;
    return true;
}

int money_parse(const char *text, const char *currency, enum money_style style,
                enum money_rounding rounding, int64_t *ret_minor, char *err, size_t errlen)
{
    int exponent = money_exponent(currency);
    if (exponent < 0)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "unknown currency '%s'",
                          currency ? currency : "");
    if (!text)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "empty amount");

    char dec, grp;
    switch (style) {
    case MONEY_PLAIN:
        dec = '.';
        grp = '\0';
        break;
    case MONEY_GROUPED_DOT:
        dec = '.';
        grp = ',';
        break;
    case MONEY_GROUPED_COMMA:
        dec = ',';
        grp = '.';
        break;
    default:
        return apbot_fail(err, errlen, APBOT_E_INVAL, "bad money style %d", (int)style);
    }

    const char *p = text;
    const char *end = text + strlen(text);
    while (p < end && money_is_space(*p))
        p++;
    while (end > p && money_is_space(end[-1]))
        end--;
    if (p == end)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "empty amount");

    bool negative = false;
    if (*p == '-' || *p == '+') {
        negative = *p == '-';
        p++;
    }
    if (p == end || !(money_is_digit(*p)))
        return apbot_fail(err, errlen, APBOT_E_INVAL,
                          "amount '%.40s' must start with a digit after the sign", text);

    /* Integer part: digits, optionally with grouping separators between groups of three. */
    int64_t acc = 0;
    int group_digits = 0; /* digits since the last grouping separator (or the start) */
    bool grouped = false;
    for (; p < end && *p != dec; p++) {
        if (money_is_digit(*p)) {
            if (!money_push_digit(&acc, *p - '0'))
                goto overflow;
            group_digits++;
        } else if (grp && *p == grp) {
            if (group_digits == 0 || (grouped ? group_digits != 3 : group_digits > 3))
                return apbot_fail(err, errlen, APBOT_E_INVAL,
                                  "misplaced grouping separator '%c' in amount '%.40s'", grp, text);
            grouped = true;
            group_digits = 0;
        } else {
            return apbot_fail(err, errlen, APBOT_E_INVAL,
                              "amount '%.40s' is not a number (unexpected '%c')", text, *p);
        }
    }
    if (grouped && group_digits != 3)
        return apbot_fail(err, errlen, APBOT_E_INVAL,
                          "misplaced grouping separator '%c' in amount '%.40s'", grp, text);

    /* Fraction: the first `exponent` digits are kept, the rest decide rounding. */
    int kept = 0;
    int first_dropped = -1;    /* first digit past the exponent, -1 if none */
    bool rest_nonzero = false; /* any non-zero digit after first_dropped */
    if (p < end) {
        p++; /* the decimal separator */
        if (p == end)
            return apbot_fail(err, errlen, APBOT_E_INVAL,
                              "amount '%.40s' has no digits after the decimal separator", text);
        for (; p < end; p++) {
            if (!money_is_digit(*p)) {
                if (*p == dec || (grp && *p == grp))
                    return apbot_fail(err, errlen, APBOT_E_INVAL,
                                      "misplaced separator '%c' in amount '%.40s'", *p, text);
                return apbot_fail(err, errlen, APBOT_E_INVAL,
                                  "amount '%.40s' is not a number (unexpected '%c')", text, *p);
            }
            if (kept < exponent) {
                if (!money_push_digit(&acc, *p - '0'))
                    goto overflow;
                kept++;
            } else if (first_dropped < 0) {
                first_dropped = *p - '0';
            } else if (*p != '0') {
                rest_nonzero = true;
            }
        }
    }
    for (; kept < exponent; kept++)
        if (!money_push_digit(&acc, 0))
            goto overflow;

    if (first_dropped > 0 || rest_nonzero) {
        bool up = false;
        switch (rounding) {
        case MONEY_ROUND_REFUSE:
            return apbot_fail(err, errlen, APBOT_E_RANGE,
                              "amount '%.40s' has more decimals than %s allows (%d)", text,
                              currency, exponent);
        case MONEY_ROUND_HALF_UP:
            up = first_dropped >= 5;
            break;
        case MONEY_ROUND_HALF_EVEN:
            up = first_dropped > 5 || (first_dropped == 5 && (rest_nonzero || (acc & 1)));
            break;
        case MONEY_ROUND_UP:
            up = true; /* something non-zero was dropped */
            break;
        case MONEY_ROUND_DOWN:
            break;
        default:
            return apbot_fail(err, errlen, APBOT_E_INVAL, "bad rounding rule %d", (int)rounding);
        }
        if (up) {
            if (acc >= MONEY_MAX_MINOR)
                goto overflow;
            acc++;
        }
    }
    *ret_minor = negative ? -acc : acc;
    return APBOT_OK;

overflow:
    return apbot_fail(err, errlen, APBOT_E_RANGE,
                      "amount '%.40s' is too large (at most %lld minor units)", text,
                      (long long)MONEY_MAX_MINOR);
}

int money_format(int64_t minor, int exponent, char dec, char group, char *buf, size_t len)
{
    if (!buf || len == 0)
        return APBOT_E_LIMIT;
    buf[0] = '\0';
    if (exponent < 0 || exponent > 18)
        return APBOT_E_INVAL;

    /* Build the text backwards into a scratch buffer large enough for any int64_t. */
    char tmp[64];
    size_t n = 0;
    uint64_t mag = minor < 0 ? (uint64_t)0 - (uint64_t)minor : (uint64_t)minor;
    for (int i = 0; i < exponent; i++) {
        tmp[n++] = (char)('0' + mag % 10);
        mag /= 10;
    }
    if (exponent > 0)
        tmp[n++] = dec;
    int in_group = 0;
    do {
        if (group && in_group == 3) {
            tmp[n++] = group;
            in_group = 0;
        }
        tmp[n++] = (char)('0' + mag % 10);
        mag /= 10;
        in_group++;
    } while (mag);
    if (minor < 0)
        tmp[n++] = '-';

    if (n + 1 > len)
        return APBOT_E_LIMIT;
    for (size_t i = 0; i < n; i++)
        buf[i] = tmp[n - 1 - i];
    buf[n] = '\0';
    return APBOT_OK;
}

int money_format_plain(int64_t minor, int exponent, char *buf, size_t len)
{
    return money_format(minor, exponent, '.', '\0', buf, len);
}

const char *money_text(int64_t minor, int exponent, char *buf, size_t len)
{
    if (money_format(minor, exponent, '.', ',', buf, len) != APBOT_OK)
        snprintf(buf, len, "?");
    return buf;
}

int money_add(int64_t *acc, int64_t b)
{
    int64_t a = *acc;
    /* Callers may pass anything: check the int64_t range first, then the money bound. */
    if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b))
        return APBOT_E_RANGE;
    int64_t s = a + b;
    if (s > MONEY_MAX_MINOR || s < -MONEY_MAX_MINOR)
        return APBOT_E_RANGE;
    *acc = s;
    return APBOT_OK;
}

/* ---- rates ------------------------------------------------------------------------------ */

/* minor * rate / MONEY_RATE_DEN is the amount at the rate (rate in MONEY_RATE_SCALE units of a
 * percent, a percent being 1/100). */
#define MONEY_RATE_DEN (100 * (int64_t)MONEY_RATE_SCALE)

int money_rate_parse(const char *text, size_t len, int64_t *ret_rate)
{
    int64_t v = 0;
    size_t i = 0;
    int decimals = 0;

    if (!text || len == 0 || text[0] < '0' || text[0] > '9')
        return APBOT_E_INVAL;
    for (; i < len && text[i] >= '0' && text[i] <= '9'; i++) {
        if (v > MONEY_RATE_MAX / MONEY_RATE_SCALE)
            return APBOT_E_RANGE;
        v = v * 10 + (text[i] - '0');
    }
    v *= MONEY_RATE_SCALE;
    if (i < len) {
        if (text[i] != '.' || i + 1 == len)
            return APBOT_E_INVAL;
        int64_t unit = MONEY_RATE_SCALE;
        for (i++; i < len; i++) {
            if (text[i] < '0' || text[i] > '9')
                return APBOT_E_INVAL;
            if (++decimals > 4) {
                if (text[i] != '0')
                    return APBOT_E_RANGE; /* finer than a rate is kept */
                continue;
            }
            unit /= 10;
            v += (text[i] - '0') * unit;
        }
    }
    if (v > MONEY_RATE_MAX)
        return APBOT_E_RANGE;
    *ret_rate = v;
    return APBOT_OK;
}

const char *money_rate_text(int64_t rate, char *buf, size_t len)
{
    char frac[8];
    int64_t whole = rate / MONEY_RATE_SCALE, part = rate % MONEY_RATE_SCALE;

    if (!buf || len == 0)
        return buf;
    if (rate < 0) {
        snprintf(buf, len, "?");
        return buf;
    }
    snprintf(frac, sizeof(frac), "%04lld", (long long)part);
    for (int k = 3; k >= 0 && frac[k] == '0'; k--)
        frac[k] = '\0';
    snprintf(buf, len, "%lld%s%s", (long long)whole, frac[0] ? "." : "", frac);
    return buf;
}

/*
 * The exact value of m at rate as floor(m * rate / DEN) in *ret_floor and the remainder
 * (0 <= *ret_rem < DEN, in 1/DEN of a minor unit) in *ret_rem, for any sign of m. False when a
 * product leaves int64_t (the caller refuses).
 */
static bool money_rate_exact(int64_t m, int64_t rate, int64_t *ret_floor, int64_t *ret_rem)
{
    /* m = q * DEN + r with 0 <= r < DEN, so m * rate / DEN = q * rate + r * rate / DEN, and
     * r * rate stays below DEN * MONEY_RATE_MAX (10^13). */
    int64_t q = m / MONEY_RATE_DEN, r = m % MONEY_RATE_DEN, qr;
    if (r < 0) {
        r += MONEY_RATE_DEN;
        q--;
    }
    if (__builtin_mul_overflow(q, rate, &qr) ||
        __builtin_add_overflow(qr, (r * rate) / MONEY_RATE_DEN, ret_floor))
        return false;
    *ret_rem = (r * rate) % MONEY_RATE_DEN;
    return true;
}

int money_at_rate(int64_t minor, int64_t rate, enum money_rounding rounding, int64_t *ret_minor)
{
    int64_t whole, rem;
    bool up = false;

    if (rate < 0 || rate > MONEY_RATE_MAX || minor > MONEY_MAX_MINOR || minor < -MONEY_MAX_MINOR)
        return APBOT_E_RANGE;
    if (!money_rate_exact(minor < 0 ? -minor : minor, rate, &whole, &rem))
        return APBOT_E_RANGE;
    switch (rounding) {
    case MONEY_ROUND_REFUSE:
        if (rem != 0)
            return APBOT_E_RANGE;
        break;
    case MONEY_ROUND_HALF_UP:
        up = rem * 2 >= MONEY_RATE_DEN;
        break;
    case MONEY_ROUND_HALF_EVEN:
        up = rem * 2 > MONEY_RATE_DEN || (rem * 2 == MONEY_RATE_DEN && (whole & 1));
        break;
    case MONEY_ROUND_UP:
        up = rem != 0;
        break;
    case MONEY_ROUND_DOWN:
        break;
    default:
        return APBOT_E_INVAL;
    }
    if (up)
        whole++;
    if (whole > MONEY_MAX_MINOR)
        return APBOT_E_RANGE;
    *ret_minor = minor < 0 ? -whole : whole;
    return APBOT_OK;
}

/* One line's exact tax, for the largest-remainder ranking. */
struct money_share {
    int64_t floor; /* its exact tax rounded down */
    int64_t rem;   /* the rest, in 1/MONEY_RATE_DEN of a minor unit */
    size_t line;   /* its index */
};

/* Largest remainder first; on equal remainders the earlier line first (a total order, so the
 * split is the same whatever qsort does with equal keys). */
static int money_share_cmp(const void *a, const void *b)
{
    const struct money_share *x = a, *y = b;
    if (x->rem != y->rem)
        return x->rem > y->rem ? -1 : 1;
    return x->line < y->line ? -1 : x->line > y->line;
}

int money_apportion_tax(const int64_t *net, const int64_t *rate, size_t n, int64_t total,
                        int exponent, int64_t *ret_tax, char *err, size_t errlen)
{
    /* a negative document is split as its positive mirror, then mirrored back */
    const int64_t sign = total < 0 ? -1 : 1;
    struct money_share *sh = NULL;
    int64_t lo = 0, hi = 0, t = total * sign;
    size_t with_rem = 0;
    int rc = APBOT_OK;

    if (total > MONEY_MAX_MINOR || total < -MONEY_MAX_MINOR)
        return apbot_fail(err, errlen, APBOT_E_RANGE, "the tax total is out of range");
    if (n > 0)
        sh = apbot_xcalloc(n, sizeof(*sh));
    for (size_t i = 0; i < n; i++) {
        if (rate[i] < 0 || rate[i] > MONEY_RATE_MAX) {
            rc = apbot_fail(err, errlen, APBOT_E_RANGE, "line %zu: rate out of range", i + 1);
            goto out;
        }
        if (net[i] > MONEY_MAX_MINOR || net[i] < -MONEY_MAX_MINOR ||
            !money_rate_exact(net[i] * sign, rate[i], &sh[i].floor, &sh[i].rem) ||
            money_add(&lo, sh[i].floor) != APBOT_OK) {
            rc = apbot_fail(err, errlen, APBOT_E_RANGE, "line %zu: tax out of range", i + 1);
            goto out;
        }
        sh[i].line = i;
        with_rem += sh[i].rem != 0;
    }
    hi = lo;
    if (money_add(&hi, (int64_t)with_rem) != APBOT_OK) {
        rc = apbot_fail(err, errlen, APBOT_E_RANGE, "the lines' tax is out of range");
        goto out;
    }
    if (t < lo || t > hi) {
        char a[48], b[48], c[48];
        money_text(lo * sign, exponent, a, sizeof(a));
        money_text(hi * sign, exponent, b, sizeof(b));
        money_text(total, exponent, c, sizeof(c));
        if (lo == hi)
            rc = apbot_fail(err, errlen, APBOT_E_DATA,
                            "the lines' tax at their rates is %s, the document's tax %s", a, c);
        else
            rc = apbot_fail(err, errlen, APBOT_E_DATA,
                            "the lines' tax at their rates is %s to %s (each line rounded either "
                            "way), the document's tax %s",
                            sign > 0 ? a : b, sign > 0 ? b : a, c);
        goto out;
    }
    if (n > 0)
        qsort(sh, n, sizeof(*sh), money_share_cmp);
    /* the first t - lo shares (all with a remainder: t <= hi) get one minor unit more */
    for (size_t k = 0; k < n; k++)
        ret_tax[sh[k].line] = (sh[k].floor + ((int64_t)k < t - lo ? 1 : 0)) * sign;
out:
    free(sh);
    return rc;
}
