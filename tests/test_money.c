/*
 * test_money.c - exact money: the exponent table, parsing (plain and grouped styles, signs,
 * trailing zeros, 0- and 3-decimal currencies, the largest values, every refusal and its
 * reason), the rounding rules, formatting and parse/format round trips, and money_add.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
