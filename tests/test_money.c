/*
 * test_money.c - exact money: the exponent table, parsing (plain and grouped styles, signs,
 * trailing zeros, 0- and 3-decimal currencies, the largest values, every refusal and its
 * reason), the rounding rules, formatting and parse/format round trips, and money_add; rates
 * (parsing, an amount at a rate under each rounding rule) and the largest-remainder split of a
 * document's tax over its lines, as tables (real invoices' lines among them; their expected
 * taxes were worked out apart, with exact fractions).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "apbot/money.h"

/* Parses and expects success with `want` minor units. */
static void ok(const char *text, const char *ccy, enum money_style st, int64_t want)
{
    int64_t got = 77;
    char err[APBOT_ERR_LEN] = "";
    int rc = money_parse(text, ccy, st, MONEY_ROUND_REFUSE, &got, err, sizeof(err));
    if (rc != APBOT_OK)
        fail_msg("'%s' %s: rc %d (%s)", text, ccy, rc, err);
    if (got != want)
        fail_msg("'%s' %s: got %lld want %lld", text, ccy, (long long)got, (long long)want);
}

/* Parses and expects refusal with rc and a reason containing `why`; ret untouched. */
static void bad(const char *text, const char *ccy, enum money_style st, int want_rc,
                const char *why)
{
    int64_t got = 77;
    char err[APBOT_ERR_LEN] = "";
    int rc = money_parse(text, ccy, st, MONEY_ROUND_REFUSE, &got, err, sizeof(err));
    if (rc != want_rc)
        fail_msg("'%s' %s: rc %d want %d (%s)", text ? text : "(null)", ccy, rc, want_rc, err);
    assert_int_equal(got, 77);
    if (!strstr(err, why))
        fail_msg("'%s' %s: reason '%s' lacks '%s'", text ? text : "(null)", ccy, err, why);
}

static void test_money_exponents(void **state)
{
    (void)state;
    static const struct {
        const char *c;
        int e;
    } t[] = {{"EUR", 2}, {"USD", 2}, {"GBP", 2}, {"CHF", 2}, {"SEK", 2}, {"NOK", 2}, {"DKK", 2},
             {"PLN", 2}, {"CZK", 2}, {"HUF", 2}, {"JPY", 0}, {"KWD", 3}, {"BHD", 3}, {"CAD", 2},
             {"AUD", 2}, {"NZD", 2}, {"ISK", 0}, {"KRW", 0}, {"OMR", 3}, {"JOD", 3}};
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        assert_int_equal(money_exponent(t[i].c), t[i].e);
    assert_int_equal(money_exponent("XXX"), -1);
    assert_int_equal(money_exponent("eur"), -1); /* codes are upper case */
    assert_int_equal(money_exponent("EURO"), -1);
    assert_int_equal(money_exponent(""), -1);
    assert_int_equal(money_exponent(NULL), -1);
}

static void test_money_parse_plain(void **state)
{
    (void)state;
    ok("1234.50", "EUR", MONEY_PLAIN, 123450);
    ok("1234.5", "EUR", MONEY_PLAIN, 123450);
    ok("1234", "EUR", MONEY_PLAIN, 123400);
    ok("0", "EUR", MONEY_PLAIN, 0);
    ok("0.01", "EUR", MONEY_PLAIN, 1);
    ok("-0.01", "EUR", MONEY_PLAIN, -1);
    ok("+7.10", "EUR", MONEY_PLAIN, 710);
    ok("-1234.56", "EUR", MONEY_PLAIN, -123456);
    ok("  42.00\t", "USD", MONEY_PLAIN, 4200);
    ok("-0", "EUR", MONEY_PLAIN, 0);
    ok("000123.40", "EUR", MONEY_PLAIN, 12340);
}

static void test_money_parse_trailing_zeros(void **state)
{
    (void)state;
    /* extra zeros past the exponent are exact and accepted */
    ok("1.500", "EUR", MONEY_PLAIN, 150);
    ok("1.5000000", "EUR", MONEY_PLAIN, 150);
    ok("100.00", "JPY", MONEY_PLAIN, 100);
    ok("-3.0", "JPY", MONEY_PLAIN, -3);
    ok("1.2340", "KWD", MONEY_PLAIN, 1234);
    /* but a non-zero digit past the exponent is refused */
    bad("1.501", "EUR", MONEY_PLAIN, APBOT_E_RANGE, "more decimals than EUR allows (2)");
    bad("1.5000001", "EUR", MONEY_PLAIN, APBOT_E_RANGE, "more decimals");
    bad("100.5", "JPY", MONEY_PLAIN, APBOT_E_RANGE, "more decimals than JPY allows (0)");
    bad("1.2345", "KWD", MONEY_PLAIN, APBOT_E_RANGE, "more decimals than KWD allows (3)");
}

static void test_money_parse_zero_and_three_decimals(void **state)
{
    (void)state;
    ok("1500", "JPY", MONEY_PLAIN, 1500);
    ok("-1500", "JPY", MONEY_PLAIN, -1500);
    ok("12.345", "KWD", MONEY_PLAIN, 12345);
    ok("12.3", "BHD", MONEY_PLAIN, 12300);
    ok("0.001", "KWD", MONEY_PLAIN, 1);
    ok("1,234,567", "JPY", MONEY_GROUPED_DOT, 1234567);
    ok("1.234,567", "KWD", MONEY_GROUPED_COMMA, 1234567);
}

static void test_money_parse_largest(void **state)
{
    (void)state;
    ok("9999999999999999.99", "EUR", MONEY_PLAIN, MONEY_MAX_MINOR);
    ok("-9999999999999999.99", "EUR", MONEY_PLAIN, -MONEY_MAX_MINOR);
    ok("999999999999999999", "JPY", MONEY_PLAIN, MONEY_MAX_MINOR);
    ok("999999999999999.999", "KWD", MONEY_PLAIN, MONEY_MAX_MINOR);
    bad("10000000000000000.00", "EUR", MONEY_PLAIN, APBOT_E_RANGE, "too large");
    bad("10000000000000000", "EUR", MONEY_PLAIN, APBOT_E_RANGE, "too large");
    bad("1000000000000000000", "JPY", MONEY_PLAIN, APBOT_E_RANGE, "too large");
    bad("99999999999999999999999999999", "EUR", MONEY_PLAIN, APBOT_E_RANGE, "too large");
    bad("-1000000000000000000", "JPY", MONEY_PLAIN, APBOT_E_RANGE, "too large");
    /* leading zeros do not count against the bound */
    ok("0000000000000000000000000001.00", "EUR", MONEY_PLAIN, 100);
}

static void test_money_parse_refusals(void **state)
{
    (void)state;
    bad("", "EUR", MONEY_PLAIN, APBOT_E_INVAL, "empty amount");
    bad("   ", "EUR", MONEY_PLAIN, APBOT_E_INVAL, "empty amount");
    bad(NULL, "EUR", MONEY_PLAIN, APBOT_E_INVAL, "empty amount");
    bad("abc", "EUR", MONEY_PLAIN, APBOT_E_INVAL, "must start with a digit");
    bad("12a.00", "EUR", MONEY_PLAIN, APBOT_E_INVAL, "not a number (unexpected 'a')");
    bad("12.0x", "EUR", MONEY_PLAIN, APBOT_E_INVAL, "not a number");
    bad("1e3", "EUR", MONEY_PLAIN, APBOT_E_INVAL, "not a number");
    bad("-", "EUR", MONEY_PLAIN, APBOT_E_INVAL, "must start with a digit");
    bad("--1", "EUR", MONEY_PLAIN, APBOT_E_INVAL, "must start with a digit");
    bad(".50", "EUR", MONEY_PLAIN, APBOT_E_INVAL, "must start with a digit");
    bad("5.", "EUR", MONEY_PLAIN, APBOT_E_INVAL, "no digits after the decimal separator");
    bad("1.2.3", "EUR", MONEY_PLAIN, APBOT_E_INVAL, "misplaced separator");
    bad("1 234.00", "EUR", MONEY_PLAIN, APBOT_E_INVAL, "not a number");
    bad("1,234.50", "EUR", MONEY_PLAIN, APBOT_E_INVAL, "unexpected ','");
    bad("12.50", "XYZ", MONEY_PLAIN, APBOT_E_INVAL, "unknown currency 'XYZ'");
    bad("12.50", NULL, MONEY_PLAIN, APBOT_E_INVAL, "unknown currency");
    bad("NaN", "EUR", MONEY_PLAIN, APBOT_E_INVAL, "must start with a digit");
    /* err may be NULL */
    int64_t v = 5;
    assert_int_equal(money_parse("x", "EUR", MONEY_PLAIN, MONEY_ROUND_REFUSE, &v, NULL, 0),
                     APBOT_E_INVAL);
    assert_int_equal(v, 5);
}

static void test_money_parse_grouped(void **state)
{
    (void)state;
    ok("1,234.50", "EUR", MONEY_GROUPED_DOT, 123450);
    ok("1234.50", "EUR", MONEY_GROUPED_DOT, 123450); /* grouping optional */
    ok("12,345,678.90", "USD", MONEY_GROUPED_DOT, 1234567890);
    ok("-1,000", "USD", MONEY_GROUPED_DOT, -100000);
    ok("1.234,50", "EUR", MONEY_GROUPED_COMMA, 123450);
    ok("1234,5", "EUR", MONEY_GROUPED_COMMA, 123450);
    ok("-12.345.678,90", "EUR", MONEY_GROUPED_COMMA, -1234567890);
    ok("0,99", "EUR", MONEY_GROUPED_COMMA, 99);
    bad("1,23.00", "EUR", MONEY_GROUPED_DOT, APBOT_E_INVAL, "misplaced grouping separator ','");
    bad("1,2345.00", "EUR", MONEY_GROUPED_DOT, APBOT_E_INVAL, "misplaced grouping");
    bad("1234,567.00", "EUR", MONEY_GROUPED_DOT, APBOT_E_INVAL, "misplaced grouping");
    bad(",123.00", "EUR", MONEY_GROUPED_DOT, APBOT_E_INVAL, "must start with a digit");
    bad("1,,234.00", "EUR", MONEY_GROUPED_DOT, APBOT_E_INVAL, "misplaced grouping");
    bad("1,234,", "EUR", MONEY_GROUPED_DOT, APBOT_E_INVAL, "misplaced grouping");
    bad("1.234.50", "EUR", MONEY_GROUPED_DOT, APBOT_E_INVAL, "misplaced separator");
    bad("1.23,00", "EUR", MONEY_GROUPED_COMMA, APBOT_E_INVAL, "misplaced grouping separator '.'");
    bad("1,234.50", "EUR", MONEY_GROUPED_COMMA, APBOT_E_INVAL, "misplaced separator '.'");
    bad("1,234,50", "EUR", MONEY_GROUPED_COMMA, APBOT_E_INVAL, "misplaced separator ','");
    bad("1,505", "EUR", MONEY_GROUPED_COMMA, APBOT_E_RANGE, "more decimals");
}

static int64_t rounded(const char *text, const char *ccy, enum money_rounding r)
{
    int64_t v = 0;
    char err[APBOT_ERR_LEN] = "";
    int rc = money_parse(text, ccy, MONEY_PLAIN, r, &v, err, sizeof(err));
    if (rc != APBOT_OK)
        fail_msg("'%s': %s", text, err);
    return v;
}

static void test_money_rounding(void **state)
{
    (void)state;
    assert_int_equal(rounded("1.005", "EUR", MONEY_ROUND_HALF_UP), 101);
    assert_int_equal(rounded("1.004", "EUR", MONEY_ROUND_HALF_UP), 100);
    assert_int_equal(rounded("1.0049999", "EUR", MONEY_ROUND_HALF_UP), 100);
    assert_int_equal(rounded("-1.005", "EUR", MONEY_ROUND_HALF_UP), -101); /* away from zero */
    assert_int_equal(rounded("2.5", "JPY", MONEY_ROUND_HALF_UP), 3);
    assert_int_equal(rounded("2.5", "JPY", MONEY_ROUND_HALF_EVEN), 2);
    assert_int_equal(rounded("3.5", "JPY", MONEY_ROUND_HALF_EVEN), 4);
    assert_int_equal(rounded("-2.5", "JPY", MONEY_ROUND_HALF_EVEN), -2);
    assert_int_equal(rounded("2.51", "JPY", MONEY_ROUND_HALF_EVEN), 3);
    assert_int_equal(rounded("2.500000001", "JPY", MONEY_ROUND_HALF_EVEN), 3);
    assert_int_equal(rounded("1.0250", "EUR", MONEY_ROUND_HALF_EVEN), 102);
    assert_int_equal(rounded("1.0350", "EUR", MONEY_ROUND_HALF_EVEN), 104);
    assert_int_equal(rounded("0.061232374", "EUR", MONEY_ROUND_HALF_UP), 6);
    assert_int_equal(rounded("1.2345", "KWD", MONEY_ROUND_HALF_UP), 1235);
    /* rounding up may not cross the bound */
    int64_t v = 9;
    assert_int_equal(
        money_parse("9999999999999999.995", "EUR", MONEY_PLAIN, MONEY_ROUND_HALF_UP, &v, NULL, 0),
        APBOT_E_RANGE);
    assert_int_equal(v, 9);
    assert_int_equal(rounded("9999999999999999.985", "EUR", MONEY_ROUND_HALF_UP), MONEY_MAX_MINOR);
}

static void fmt(int64_t minor, int exp, char dec, char grp, const char *want)
{
    char buf[64];
    assert_int_equal(money_format(minor, exp, dec, grp, buf, sizeof(buf)), APBOT_OK);
    assert_string_equal(buf, want);
}

static void test_money_format(void **state)
{
    (void)state;
    fmt(123450, 2, '.', '\0', "1234.50");
    fmt(-1, 2, '.', '\0', "-0.01");
    fmt(0, 2, '.', '\0', "0.00");
    fmt(5, 3, '.', '\0', "0.005");
    fmt(1500, 0, '.', '\0', "1500");
    fmt(-1500, 0, ',', '.', "-1.500");
    fmt(123456789, 2, ',', '.', "1.234.567,89");
    fmt(123456789, 2, '.', ',', "1,234,567.89");
    fmt(100000, 2, ',', '.', "1.000,00");
    fmt(99999, 2, ',', '.', "999,99");
    fmt(MONEY_MAX_MINOR, 2, '.', '\0', "9999999999999999.99");
    fmt(-MONEY_MAX_MINOR, 3, ',', '.', "-999.999.999.999.999,999");
    fmt(INT64_MIN, 0, '.', '\0', "-9223372036854775808");

    char buf[8] = "junk";
    assert_int_equal(money_format_plain(123450, 2, buf, sizeof(buf)), APBOT_OK);
    assert_string_equal(buf, "1234.50");
    assert_int_equal(money_format_plain(1234500, 2, buf, sizeof(buf)), APBOT_E_LIMIT);
    assert_string_equal(buf, "");
    char one[1];
    assert_int_equal(money_format_plain(0, 0, one, 0), APBOT_E_LIMIT);
}

static void test_money_round_trip(void **state)
{
    (void)state;
    static const char *const ccys[] = {"EUR", "JPY", "KWD"};
    static const int64_t vals[] = {0,
                                   1,
                                   -1,
                                   9,
                                   10,
                                   99,
                                   100,
                                   101,
                                   999,
                                   1000,
                                   123456,
                                   -987654321,
                                   MONEY_MAX_MINOR,
                                   -MONEY_MAX_MINOR,
                                   100000000000000000};
    static const enum money_style styles[] = {MONEY_PLAIN, MONEY_GROUPED_DOT, MONEY_GROUPED_COMMA};
    static const char decs[] = {'.', '.', ','};
    static const char grps[] = {'\0', ',', '.'};
    for (size_t c = 0; c < 3; c++) {
        int e = money_exponent(ccys[c]);
        for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
            for (size_t s = 0; s < 3; s++) {
                char buf[64];
                assert_int_equal(money_format(vals[i], e, decs[s], grps[s], buf, sizeof(buf)),
                                 APBOT_OK);
                ok(buf, ccys[c], styles[s], vals[i]);
            }
        }
    }
}

static void test_money_add(void **state)
{
    (void)state;
    int64_t acc = 100;
    assert_int_equal(money_add(&acc, -250), APBOT_OK);
    assert_int_equal(acc, -150);
    acc = MONEY_MAX_MINOR - 1;
    assert_int_equal(money_add(&acc, 1), APBOT_OK);
    assert_int_equal(acc, MONEY_MAX_MINOR);
    assert_int_equal(money_add(&acc, 1), APBOT_E_RANGE);
    assert_int_equal(acc, MONEY_MAX_MINOR);
    acc = -MONEY_MAX_MINOR;
    assert_int_equal(money_add(&acc, -1), APBOT_E_RANGE);
    assert_int_equal(acc, -MONEY_MAX_MINOR);
    acc = INT64_MAX;
    assert_int_equal(money_add(&acc, INT64_MAX), APBOT_E_RANGE);
    acc = INT64_MIN;
    assert_int_equal(money_add(&acc, INT64_MIN), APBOT_E_RANGE);
}

static void test_money_rate_parse(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int rc;
        int64_t want;
    } t[] = {
        {"19", APBOT_OK, 190000},
        {"7.5", APBOT_OK, 75000},
        {"19.00", APBOT_OK, 190000},
        {"19.000000", APBOT_OK, 190000}, /* zeros past the fourth decimal are exact */
        {"0", APBOT_OK, 0},
        {"0.0", APBOT_OK, 0},
        {"0.25", APBOT_OK, 2500},
        {"0.0001", APBOT_OK, 1},
        {"1000", APBOT_OK, MONEY_RATE_MAX},
        {"1000.0000", APBOT_OK, MONEY_RATE_MAX},
        {"0.00001", APBOT_E_RANGE, 0}, /* finer than a rate is kept */
        {"19.50001", APBOT_E_RANGE, 0},
        {"1000.0001", APBOT_E_RANGE, 0},
        {"1001", APBOT_E_RANGE, 0},
        {"99999999999999999999999", APBOT_E_RANGE, 0},
        {"", APBOT_E_INVAL, 0},
        {"-1", APBOT_E_INVAL, 0},
        {"+1", APBOT_E_INVAL, 0},
        {"1.", APBOT_E_INVAL, 0},
        {".5", APBOT_E_INVAL, 0},
        {"1,5", APBOT_E_INVAL, 0},
        {"19%", APBOT_E_INVAL, 0},
        {"1 9", APBOT_E_INVAL, 0},
        {"1.2.3", APBOT_E_INVAL, 0},
        {"abc", APBOT_E_INVAL, 0},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        int64_t got = -7;
        int rc = money_rate_parse(t[i].text, strlen(t[i].text), &got);
        if (rc != t[i].rc || (rc == APBOT_OK && got != t[i].want) || (rc != APBOT_OK && got != -7))
            fail_msg("'%s': rc %d got %lld, want rc %d %lld", t[i].text, rc, (long long)got,
                     t[i].rc, (long long)t[i].want);
    }
    int64_t got = 0;
    assert_int_equal(money_rate_parse("19%", 2, &got), APBOT_OK); /* len bounds the text */
    assert_int_equal(got, 190000);
    assert_int_equal(money_rate_parse(NULL, 0, &got), APBOT_E_INVAL);

    char buf[32];
    assert_string_equal(money_rate_text(190000, buf, sizeof(buf)), "19");
    assert_string_equal(money_rate_text(75000, buf, sizeof(buf)), "7.5");
    assert_string_equal(money_rate_text(2500, buf, sizeof(buf)), "0.25");
    assert_string_equal(money_rate_text(1, buf, sizeof(buf)), "0.0001");
    assert_string_equal(money_rate_text(0, buf, sizeof(buf)), "0");
    assert_string_equal(money_rate_text(MONEY_RATE_MAX, buf, sizeof(buf)), "1000");
}

/* An amount at a rate, every rounding rule; the rate as a flow writes it. */
static void test_money_at_rate(void **state)
{
    (void)state;
    enum { REF = MONEY_ROUND_REFUSE, HU = MONEY_ROUND_HALF_UP, HE = MONEY_ROUND_HALF_EVEN };
    enum { UP = MONEY_ROUND_UP, DN = MONEY_ROUND_DOWN };
    static const struct {
        int64_t minor;
        const char *rate;
        int rounding;
        int rc;
        int64_t want;
    } t[] = {
        {10000, "19", HU, APBOT_OK, 1900},   /* 100.00 at 19 % */
        {10000, "19", REF, APBOT_OK, 1900},  /* exact: even REFUSE takes it */
        {1001, "19", HU, APBOT_OK, 190},     /* 190.19 hundredths */
        {1001, "19", HE, APBOT_OK, 190},     /* */
        {1001, "19", UP, APBOT_OK, 191},     /* */
        {1001, "19", DN, APBOT_OK, 190},     /* */
        {1001, "19", REF, APBOT_E_RANGE, 0}, /* not whole */
        {250, "1", HU, APBOT_OK, 3},         /* 2.5: half up */
        {250, "1", HE, APBOT_OK, 2},         /* 2.5: to even */
        {350, "1", HE, APBOT_OK, 4},         /* 3.5: to even */
        {250, "1", UP, APBOT_OK, 3},         /* */
        {250, "1", DN, APBOT_OK, 2},         /* */
        {-250, "1", HU, APBOT_OK, -3},       /* the mirror of 2.5 */
        {-250, "1", HE, APBOT_OK, -2},       /* */
        {-250, "1", UP, APBOT_OK, -3},       /* away from zero */
        {-250, "1", DN, APBOT_OK, -2},       /* toward zero */
        {-1001, "19", UP, APBOT_OK, -191},   /* */
        {12345, "7.5", HU, APBOT_OK, 926},   /* 925.875 */
        {12345, "7.5", DN, APBOT_OK, 925},   /* */
        {100, "0.0001", UP, APBOT_OK, 1},    /* 0.0001 of a minor unit */
        {100, "0.0001", HU, APBOT_OK, 0},    /* */
        {999, "50", HU, APBOT_OK, 500},      /* 499.5 */
        {999, "50", HE, APBOT_OK, 500},      /* 499.5: 500 is even */
        {997, "50", HE, APBOT_OK, 498},      /* 498.5: 498 is even */
        {0, "19", REF, APBOT_OK, 0},         /* */
        {123, "0", REF, APBOT_OK, 0},        /* */
        {MONEY_MAX_MINOR, "100", REF, APBOT_OK, MONEY_MAX_MINOR},
        {-MONEY_MAX_MINOR, "100", REF, APBOT_OK, -MONEY_MAX_MINOR},
        {MONEY_MAX_MINOR, "50", HU, APBOT_OK, 500000000000000000},
        {MONEY_MAX_MINOR, "100.0001", HU, APBOT_E_RANGE, 0}, /* past the bound */
        {MONEY_MAX_MINOR, "1000", HU, APBOT_E_RANGE, 0},     /* */
        {MONEY_MAX_MINOR + 1, "1", HU, APBOT_E_RANGE, 0},    /* an amount past it */
        {INT64_MIN, "1", HU, APBOT_E_RANGE, 0},              /* */
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        int64_t rate = 0, got = -7;
        assert_int_equal(money_rate_parse(t[i].rate, strlen(t[i].rate), &rate), APBOT_OK);
        int rc = money_at_rate(t[i].minor, rate, (enum money_rounding)t[i].rounding, &got);
        if (rc != t[i].rc || (rc == APBOT_OK && got != t[i].want) || (rc != APBOT_OK && got != -7))
            fail_msg("row %zu: %lld at %s%%: rc %d got %lld, want rc %d %lld", i,
                     (long long)t[i].minor, t[i].rate, rc, (long long)got, t[i].rc,
                     (long long)t[i].want);
    }
    int64_t got = 5;
    assert_int_equal(money_at_rate(100, -1, MONEY_ROUND_HALF_UP, &got), APBOT_E_RANGE);
    assert_int_equal(money_at_rate(100, MONEY_RATE_MAX + 1, MONEY_ROUND_HALF_UP, &got),
                     APBOT_E_RANGE);
    assert_int_equal(money_at_rate(100, 10000, (enum money_rounding)99, &got), APBOT_E_INVAL);
    assert_int_equal(got, 5);
}

#define SPLIT_MAX 20

/* One row of the split's table: lines as net (minor units) at a rate, the document's tax, and
 * the taxes wanted, or the refusal (rc and a part of its reason). */
struct split_row {
    const char *what;
    int exponent;
    size_t n;
    int64_t net[SPLIT_MAX];
    const char *rate[SPLIT_MAX];
    int64_t total;
    int rc;
    int64_t want[SPLIT_MAX];
    const char *why;
};

static void split_check(const struct split_row *r)
{
    int64_t rate[SPLIT_MAX], got[SPLIT_MAX];
    char err[APBOT_ERR_LEN] = "";
    for (size_t i = 0; i < r->n; i++) {
        assert_int_equal(money_rate_parse(r->rate[i], strlen(r->rate[i]), &rate[i]), APBOT_OK);
        got[i] = -7;
    }
    int rc = money_apportion_tax(r->net, rate, r->n, r->total, r->exponent, got, err, sizeof(err));
    if (rc != r->rc)
        fail_msg("%s: rc %d want %d (%s)", r->what, rc, r->rc, err);
    int64_t sum = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (rc != APBOT_OK) {
            if (got[i] != -7)
                fail_msg("%s: line %zu written on failure", r->what, i + 1);
            continue;
        }
        if (got[i] != r->want[i])
            fail_msg("%s: line %zu: got %lld want %lld", r->what, i + 1, (long long)got[i],
                     (long long)r->want[i]);
        sum += got[i];
    }
    if (rc == APBOT_OK && sum != r->total)
        fail_msg("%s: the lines add up to %lld, not %lld", r->what, (long long)sum,
                 (long long)r->total);
    if (rc != APBOT_OK && r->why && !strstr(err, r->why))
        fail_msg("%s: reason '%s' lacks '%s'", r->what, err, r->why);
}

static void test_money_apportion_tax(void **state)
{
    (void)state;
    static const struct split_row t[] = {
        {"one line", 2, 1, {10000}, {"19"}, 1900, APBOT_OK, {1900}, NULL},
        /* XRechnung 01.01a: 20.2153 + 1.8249 = 22.04; the larger remainder takes the cent */
        {"01.01a", 2, 2, {28879, 2607}, {"7", "7"}, 2204, APBOT_OK, {2022, 182}, NULL},
        /* equal remainders: the earlier line first */
        {"tie", 2, 2, {5, 5}, {"10", "10"}, 1, APBOT_OK, {1, 0}, NULL},
        {"tie, both", 2, 2, {5, 5}, {"10", "10"}, 2, APBOT_OK, {1, 1}, NULL},
        {"tie, none", 2, 2, {5, 5}, {"10", "10"}, 0, APBOT_OK, {0, 0}, NULL},
        {"three ties", 2, 3, {5, 5, 5}, {"10", "10", "10"}, 2, APBOT_OK, {1, 1, 0}, NULL},
        /* the larger remainder wins over the earlier line */
        {"remainder first", 2, 2, {1, 9}, {"10", "10"}, 1, APBOT_OK, {0, 1}, NULL},
        /* a credit note written negative gets its mirror's taxes */
        {"mirror tie", 2, 2, {-5, -5}, {"10", "10"}, -1, APBOT_OK, {-1, 0}, NULL},
        {"mirror 01.01a", 2, 2, {-28879, -2607}, {"7", "7"}, -2204, APBOT_OK, {-2022, -182}, NULL},
        /* Peppol BIS negative invoice: -156,435.885 */
        {"negative DKK", 2, 1, {-62574354}, {"25"}, -15643589, APBOT_OK, {-15643589}, NULL},
        /* XRechnung 01.20a: a negative line in a positive invoice */
        {"01.20a", 2, 2, {-10000, 40000}, {"19", "19"}, 5700, APBOT_OK, {-1900, 7600}, NULL},
        /* a small discount line: -0.0095 rounds to -0.01 */
        {"discount", 2, 2, {1001, -5}, {"19", "19"}, 189, APBOT_OK, {190, -1}, NULL},
        /* zero-rated and exempt lines keep no tax (XRechnung 03.06a) */
        {"03.06a",
         2,
         4,
         {100000, 10000, -10000, 50000},
         {"19", "19", "0", "19"},
         30400,
         APBOT_OK,
         {19000, 1900, 0, 9500},
         NULL},
        /* several rates (OpenPeppol issue 116) */
        {"issue116",
         2,
         4,
         {10000, 5000, 15000, 40000},
         {"6", "12", "12", "25"},
         13000,
         APBOT_OK,
         {600, 600, 1800, 10000},
         NULL},
        /* the UBL 2.1 example credit note's lines, an exempt one among them */
        {"UBL credit note",
         2,
         5,
         {127300, -396, 496, -2500, 18750},
         {"20", "10", "10", "0", "20"},
         29220,
         APBOT_OK,
         {25460, -40, 50, 0, 3750},
         NULL},
        /* CEN TC434 example 10: twenty lines at 6 and 21 %, one negative */
        {"tc434-10",
         2,
         20,
         {1990, 985, 829, 1446, 3500, 3500, 1065, 155,  1437,  829,
          1658, 995, 330, 1080, 390,  760,  934,  1863, 10212, -10998},
         {"6", "6", "6", "6",  "6", "6",  "6",  "6",  "6", "6",
          "6", "6", "6", "21", "6", "21", "21", "21", "6", "6"},
         2073,
         APBOT_OK,
         {119, 59, 50, 87, 210, 210, 64, 9, 86, 50, 99, 60, 20, 227, 23, 160, 196, 391, 613, -660},
         NULL},
        /* CEN TC434 example 8: ten lines at 21 % */
        {"tc434-8",
         2,
         10,
         {14080, 1616, 16764, 8874, 3675, 5650, 8334, 19031, 6421, 6446},
         {"21", "21", "21", "21", "21", "21", "21", "21", "21", "21"},
         19087,
         APBOT_OK,
         {2957, 339, 3520, 1864, 772, 1186, 1750, 3997, 1348, 1354},
         NULL},
        /* XRechnung 03.01a: fourteen lines at 19 and 7 % */
        {"03.01a",
         2,
         14,
         {20430, 2600, 2505, 317, 1328, 15694, 7071, 1842, 5209, 893, 4650, 744, 4833, 612},
         {"19", "19", "19", "19", "19", "19", "19", "19", "19", "19", "7", "7", "7", "7"},
         11758,
         APBOT_OK,
         {3882, 494, 476, 60, 252, 2982, 1343, 350, 990, 170, 326, 52, 338, 43},
         NULL},
        /* a currency without decimals */
        {"JPY", 0, 3, {333, 333, 333}, {"10", "10", "10"}, 100, APBOT_OK, {34, 33, 33}, NULL},
        /* a rate with decimals */
        {"7.7 %", 2, 2, {12345, 6789}, {"7.7", "2.5"}, 1120, APBOT_OK, {950, 170}, NULL},
        /* refused: the tax is not the lines' (a charge on the document; Peppol base-example) */
        {"document charge",
         2,
         2,
         {280000, -150000},
         {"25", "25"},
         33125,
         APBOT_E_DATA,
         {0},
         "the lines' tax at their rates is 325.00, the document's tax 331.25"},
        {"one cent too many",
         2,
         2,
         {5, 5},
         {"10", "10"},
         3,
         APBOT_E_DATA,
         {0},
         "is 0.00 to 0.02 (each line rounded either way), the document's tax 0.03"},
        {"mirror too many",
         2,
         2,
         {-5, -5},
         {"10", "10"},
         -3,
         APBOT_E_DATA,
         {0},
         "is -0.02 to 0.00 (each line rounded either way), the document's tax -0.03"},
        /* refused: tax rounded to whole forint (the HUF sample): 18,678.60 at 27 % */
        {"HUF whole",
         2,
         3,
         {2344000, 2138900, 2435100},
         {"27", "27", "27"},
         1867900,
         APBOT_E_DATA,
         {0},
         "is 18,678.60, the document's tax 18,679.00"},
        {"no lines", 2, 0, {0}, {NULL}, 0, APBOT_OK, {0}, NULL},
        {"no lines, a tax", 2, 0, {0}, {NULL}, 5, APBOT_E_DATA, {0}, "is 0.00"},
        {"overflow",
         2,
         2,
         {MONEY_MAX_MINOR, MONEY_MAX_MINOR},
         {"100", "100"},
         0,
         APBOT_E_RANGE,
         {0},
         "out of range"},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        split_check(&t[i]);

    int64_t net[1] = {100}, rate[1] = {MONEY_RATE_MAX + 1}, got[1] = {-7};
    assert_int_equal(money_apportion_tax(net, rate, 1, 0, 2, got, NULL, 0), APBOT_E_RANGE);
    assert_int_equal(got[0], -7);
}

/* The split over many lines: every line within one minor unit of its exact tax, the total
 * reached, and the same split for the mirror with the other sign. */
static void test_money_apportion_tax_many(void **state)
{
    (void)state;
    enum { N = 5000 };
    static int64_t net[N], rate[N], tax[N], mirror_net[N], mirror[N];
    uint64_t x = 88172645463325252u;
    int64_t lo = 0;
    for (size_t i = 0; i < N; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        net[i] = (int64_t)(x % 2000000) - 200000;   /* some lines negative */
        rate[i] = (int64_t)((x >> 24) % 4) * 65000; /* 0, 6.5, 13, 19.5 % */
        mirror_net[i] = -net[i];
        lo += net[i] * rate[i] / 1000000 - (net[i] * rate[i] % 1000000 < 0 ? 1 : 0);
    }
    int64_t total = lo + 7; /* seven of the lines with a remainder round up */
    char err[APBOT_ERR_LEN];
    assert_int_equal(money_apportion_tax(net, rate, N, total, 2, tax, err, sizeof(err)), APBOT_OK);
    assert_int_equal(money_apportion_tax(mirror_net, rate, N, -total, 2, mirror, err, sizeof(err)),
                     APBOT_OK);
    int64_t sum = 0, ups = 0;
    for (size_t i = 0; i < N; i++) {
        int64_t fl = net[i] * rate[i] / 1000000 - (net[i] * rate[i] % 1000000 < 0 ? 1 : 0);
        assert_true(tax[i] == fl || tax[i] == fl + 1);
        ups += tax[i] - fl;
        sum += tax[i];
        assert_int_equal(mirror[i], -tax[i]);
    }
    assert_int_equal(sum, total);
    assert_int_equal(ups, 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_money_exponents),
        cmocka_unit_test(test_money_parse_plain),
        cmocka_unit_test(test_money_parse_trailing_zeros),
        cmocka_unit_test(test_money_parse_zero_and_three_decimals),
        cmocka_unit_test(test_money_parse_largest),
        cmocka_unit_test(test_money_parse_refusals),
        cmocka_unit_test(test_money_parse_grouped),
        cmocka_unit_test(test_money_rounding),
        cmocka_unit_test(test_money_format),
        cmocka_unit_test(test_money_round_trip),
        cmocka_unit_test(test_money_add),
        cmocka_unit_test(test_money_rate_parse),
        cmocka_unit_test(test_money_at_rate),
        cmocka_unit_test(test_money_apportion_tax),
        cmocka_unit_test(test_money_apportion_tax_many),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
