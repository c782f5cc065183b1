/*
 * gen_invoices.c - deterministic generator of invoice CSVs (docs/input-formats.md layout).
 *
 * Same seed, same options -> byte-identical output, so the benchmark and the committed demo
 * files can be regenerated and diffed. Amounts are integers in minor units end to end (no
 * floating point; the bad-row fraction is parsed into parts per million).
 *
 *   gen-invoices [--seed N] [--count N] [--vendors FIRST-LAST] [--month YYYY-MM]
 *                [--bad FRACTION] [--head N] [--month-end] [--conflict] [--out FILE]
 *
 * --month-end  the demo set: 400 invoices for vendors 100001-100040 in 2026-11 with 5 refused
 *              invoices (bad amount, bad date, missing field, total mismatch, too many
 *              decimals) and 10 the ERP will reject (blocked vendor 100090, unknown vendor
 *              100099, G/L 1000, closed period 2026-09); EUR mostly, a few USD/JPY/KWD.
 * --head N     only the first N invoices (month-end-resubmit.csv is --month-end --head 30).
 * --conflict   only invoice #5 of the set, with a different amount (month-end-conflict.csv).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/money.h"

struct gen_opts {
    uint64_t seed;
    long count;
    long vfirst, vlast;
    int year, month;
    uint32_t bad_ppm;
    long head;
    bool month_end;
    bool conflict;
    const char *out;
};

static uint64_t gen_state;

/* splitmix64: small, fast, and the same everywhere. */
static uint64_t gen_next(void)
{
    uint64_t z = (gen_state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static long gen_range(long lo, long hi) /* inclusive */
{
    return lo + (long)(gen_next() % (uint64_t)(hi - lo + 1));
}

static int gen_days_in_month(int y, int m)
{
    static const int d[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
        return 29;
    return d[m - 1];
}

/* Adds n days to y-m-d. */
static void gen_add_days(int *y, int *m, int *d, int n)
{
    *d += n;
    while (*d > gen_days_in_month(*y, *m)) {
        *d -= gen_days_in_month(*y, *m);
        if (++*m > 12) {
            *m = 1;
            ++*y;
        }
    }
}

static bool gen_parse_long(const char *s, long *ret)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end)
        return false;
    *ret = v;
    return true;
}

/* "0.01" -> 10000 ppm, without floating point. */
static bool gen_parse_fraction(const char *s, uint32_t *ret)
{
    uint32_t whole = 0, frac = 0, scale = 1000000;
    const char *p = s;
    if (*p == '1' && (p[1] == '\0' || p[1] == '.')) {
        whole = 1;
        p++;
    } else if (*p == '0') {
        p++;
    } else if (*p != '.') {
        return false;
    }
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9') {
            if (scale > 1) {
                scale /= 10;
                frac += (uint32_t)(*p - '0') * scale;
            }
            p++;
        }
    }
    if (*p || (whole && frac))
        return false;
    *ret = whole ? 1000000 : frac;
    return true;
}

static int gen_fmt(FILE *f, int64_t minor, int exp)
{
    char buf[40];
    if (money_format_plain(minor, exp, buf, sizeof(buf)) != 0)
        return -1;
    return fputs(buf, f) < 0 ? -1 : 0;
}

enum gen_fault {
    GEN_OK,
    GEN_BAD_AMOUNT,
    GEN_BAD_DATE,
    GEN_MISSING_FIELD,
    GEN_TOTAL_MISMATCH,
    GEN_TOO_MANY_DECIMALS,
    GEN_BLOCKED_VENDOR,
    GEN_UNKNOWN_VENDOR,
    GEN_BAD_GL,
    GEN_CLOSED_PERIOD,
};

/* The demo set's special invoices, by 1-based index. */
static enum gen_fault gen_demo_fault(long i)
{
    switch (i) {
    case 37:
        return GEN_BAD_AMOUNT;
    case 91:
        return GEN_BAD_DATE;
    case 150:
        return GEN_MISSING_FIELD;
    case 222:
        return GEN_TOTAL_MISMATCH;
    case 301:
        return GEN_TOO_MANY_DECIMALS;
    case 44:
    case 260:
        return GEN_BLOCKED_VENDOR;
    case 58:
    case 333:
        return GEN_UNKNOWN_VENDOR;
    case 71:
    case 189:
    case 377:
        return GEN_BAD_GL;
    case 120:
    case 245:
    case 390:
        return GEN_CLOSED_PERIOD;
    default:
        return GEN_OK;
    }
}

static int gen_one(FILE *f, const struct gen_opts *o, long i, bool emit, bool conflict)
{
    /* Draw everything first so --head and --conflict see the same invoice #i. */
    enum gen_fault fault = GEN_OK;
    if (o->month_end) {
        fault = gen_demo_fault(i);
    } else if (o->bad_ppm && gen_next() % 1000000 < o->bad_ppm) {
        fault = (enum gen_fault)gen_range(GEN_BAD_AMOUNT, GEN_TOTAL_MISMATCH);
    }
    long vendor = gen_range(o->vfirst, o->vlast);
    if (fault == GEN_BLOCKED_VENDOR)
        vendor = 100090;
    else if (fault == GEN_UNKNOWN_VENDOR)
        vendor = 100099;
    long pick = gen_range(0, 99);
    const char *ccy = pick < 90 ? "EUR" : pick < 94 ? "USD" : pick < 97 ? "JPY" : "KWD";
    int exp = money_exponent(ccy);
    int y = o->year, m = o->month;
    int d = (int)gen_range(1, gen_days_in_month(y, m));
    if (fault == GEN_CLOSED_PERIOD) {
        y = 2026;
        m = 9;
        d = (int)gen_range(1, 30);
    }
    int dy = y, dm = m, dd = d;
    bool with_due = gen_range(0, 3) != 0;
    gen_add_days(&dy, &dm, &dd, 30);
    bool with_total = gen_range(0, 1) != 0 || fault == GEN_TOTAL_MISMATCH;
    bool credit = gen_range(0, 49) == 0;
    long n_lines = gen_range(1, 4);

    int64_t scale = exp == 0 ? 1 : exp == 3 ? 1000 : 100;
    int64_t nets[4], taxes[4];
    long gls[4];
    int64_t total = 0;
    for (long l = 0; l < n_lines; l++) {
        int64_t units = gen_range(5, 5000); /* 5 .. 5000 major units */
        int64_t frac = exp ? gen_range(0, (long)scale - 1) : 0;
        nets[l] = units * scale + frac;
        taxes[l] = (nets[l] * 19 + 50) / 100; /* 19 %, rounded half up on positive values */
        gls[l] = gen_range(4000, 6999);
        total += nets[l] + taxes[l];
    }
    if (fault == GEN_BAD_GL)
        gls[0] = 1000;
    if (conflict)
        nets[0] += 100, total += 100;
    if (!emit)
        return 0;

    char number[48];
    snprintf(number, sizeof(number), "%c%04d%02d-%06ld", credit ? 'C' : 'R', o->year, o->month, i);
    for (long l = 0; l < n_lines; l++) {
        fprintf(f, "%ld,Vendor %ld GmbH,%s,%s,", vendor, vendor, number,
                credit ? "credit-note" : "invoice");
        if (fault == GEN_BAD_DATE)
            fprintf(f, "%04d-02-30,", y); /* no such day */
        else
            fprintf(f, "%04d-%02d-%02d,", y, m, d);
        if (with_due)
            fprintf(f, "%04d-%02d-%02d", dy, dm, dd);
        fprintf(f, ",%s,", fault == GEN_MISSING_FIELD && l == 0 ? "" : ccy);
        fprintf(f, "\"Item %ld, line %ld\",%ld,", i, l + 1, gls[l]);
        if (fault == GEN_BAD_AMOUNT && l == 0)
            fputs("\"1.234,56\"", f); /* German style where plain is required */
        else if (fault == GEN_TOO_MANY_DECIMALS && l == 0)
            fprintf(f, "%" PRId64 ".%s5", nets[l] / scale, exp ? "0000" : "");
        else if (gen_fmt(f, nets[l], exp))
            return -1;
        fputc(',', f);
        if (gen_fmt(f, taxes[l], exp))
            return -1;
        fputc(',', f);
        if (with_total && l == 0 && gen_fmt(f, total + (fault == GEN_TOTAL_MISMATCH), exp))
            return -1;
        fputc('\n', f);
    }
    return ferror(f) ? -1 : 0;
}

static void gen_usage(FILE *f)
{
    fputs("usage: gen-invoices [--seed N] [--count N] [--vendors FIRST-LAST] [--month YYYY-MM]\n"
          "                    [--bad FRACTION] [--head N] [--month-end] [--conflict]"
          " [--out FILE]\n",
          f);
}

int main(int argc, char **argv)
{
    struct gen_opts o = {.seed = 42,
                         .count = 1000,
                         .vfirst = 100001,
                         .vlast = 100040,
                         .year = 2026,
                         .month = 11,
                         .head = -1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        if (strcmp(a, "--month-end") == 0) {
            o.month_end = true;
            o.count = 400;
            o.vfirst = 100001;
            o.vlast = 100040;
            o.year = 2026;
            o.month = 11;
            o.seed = 202611;
            continue;
        }
        if (strcmp(a, "--conflict") == 0) {
            o.conflict = true;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            gen_usage(stdout);
            return 0;
        }
        if (!v) {
            gen_usage(stderr);
            return 2;
        }
        i++;
        if (strcmp(a, "--seed") == 0 && gen_parse_long(v, &n) && n >= 0) {
            o.seed = (uint64_t)n;
        } else if (strcmp(a, "--count") == 0 && gen_parse_long(v, &n) && n >= 0) {
            o.count = n;
        } else if (strcmp(a, "--head") == 0 && gen_parse_long(v, &n) && n >= 0) {
            o.head = n;
        } else if (strcmp(a, "--vendors") == 0 && sscanf(v, "%ld-%ld", &o.vfirst, &o.vlast) == 2 &&
                   o.vfirst <= o.vlast) {
        } else if (strcmp(a, "--month") == 0 && sscanf(v, "%d-%d", &o.year, &o.month) == 2 &&
                   o.month >= 1 && o.month <= 12 && o.year >= 1900) {
        } else if (strcmp(a, "--bad") == 0 && gen_parse_fraction(v, &o.bad_ppm)) {
        } else if (strcmp(a, "--out") == 0) {
            o.out = v;
        } else {
            fprintf(stderr, "gen-invoices: bad option %s %s\n", a, v);
            gen_usage(stderr);
            return 2;
        }
    }
    FILE *f = o.out ? fopen(o.out, "w") : stdout;
    if (!f) {
        fprintf(stderr, "gen-invoices: %s: %s\n", o.out, strerror(errno));
        return 1;
    }
    gen_state = o.seed;
    fputs("vendor_id,vendor_name,invoice_number,doc_type,invoice_date,due_date,currency,"
          "line_description,line_gl_account,line_net,line_tax,total\n",
          f);
    int rc = 0;
    for (long i = 1; i <= o.count && rc == 0; i++) {
        bool emit = o.conflict ? i == 5 : (o.head < 0 || i <= o.head);
        rc = gen_one(f, &o, i, emit, o.conflict);
    }
    if (o.out && fclose(f) != 0)
        rc = -1;
    else if (!o.out && fflush(f) != 0)
        rc = -1;
    if (rc) {
        fprintf(stderr, "gen-invoices: write error\n");
        return 1;
    }
    return 0;
}
