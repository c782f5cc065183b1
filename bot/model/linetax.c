/*
 * linetax.c - the tax of each line of an invoice (see linetax.h): as the lines state it when
 * they add up to the invoice's tax, else the lines' nets at their categories' rates split to
 * the minor unit by money_apportion_tax. Pure; the I/O that needs it (a post, a trace) works
 * it out once per invoice.
 */
#include "apbot/linetax.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/invoice.h"
#include "apbot/mem.h"
#include "apbot/money.h"

int linetax_rate_of(const char *category, int64_t *ret_rate, char *err, size_t errlen)
{
    /* UNCL 5305 categories that carry no tax when no rate is given */
    static const char *const zero[] = {"E", "Z", "AE", "K", "G", "O"};
    const char *colon;
    int64_t rate = 0;

    if (!category || !*category)
        return apbot_fail(err, errlen, APBOT_E_DATA, "has no tax category");
    colon = strchr(category, ':');
    if (colon) {
        int rc = money_rate_parse(colon + 1, strlen(colon + 1), &rate);
        if (rc != APBOT_OK)
            return apbot_fail(err, errlen, APBOT_E_DATA,
                              "has the tax category '%.40s', whose rate is no percentage",
                              category);
        *ret_rate = rate;
        return APBOT_OK;
    }
    for (size_t i = 0; i < sizeof(zero) / sizeof(zero[0]); i++)
        if (strcmp(category, zero[i]) == 0) {
            *ret_rate = 0;
            return APBOT_OK;
        }
    return apbot_fail(err, errlen, APBOT_E_DATA, "has the tax category '%.40s' without a rate",
                      category);
}

/* The lines state no tax and the invoice has some: each line's net at its rate, split. */
static void linetax_derive(struct linetax *t, const struct invoice *inv)
{
    int64_t *net = apbot_xcalloc(t->n, sizeof(*net));
    int64_t *rate = apbot_xcalloc(t->n, sizeof(*rate));
    char why[200];

    for (size_t i = 0; i < t->n; i++) {
        const struct invoice_line *l = &inv->lines[i];
        net[i] = l->net;
        if (l->net == 0 && !l->tax_category)
            continue; /* nothing to tax: any rate gives 0 */
        if (linetax_rate_of(l->tax_category, &rate[i], why, sizeof(why)) != APBOT_OK) {
            snprintf(t->why, sizeof(t->why),
                     "the invoice's lines state no tax, and line %zu %s: the tax of each line "
                     "cannot be told",
                     i + 1, why);
            goto out;
        }
    }
    if (money_apportion_tax(net, rate, t->n, inv->tax_total, inv->exponent, t->tax, why,
                            sizeof(why)) != APBOT_OK) {
        snprintf(t->why, sizeof(t->why),
                 "the invoice's lines state no tax, and %s (a charge or an allowance on the "
                 "whole document, a tax rounded otherwise, or a wrong rate): the tax of each "
                 "line cannot be told",
                 why);
        goto out;
    }
    t->ok = true;
    t->derived = true;
out:
    free(net);
    free(rate);
}

void linetax_init(struct linetax *t, const struct invoice *inv)
{
    int64_t stated = 0;
    bool any = false, range = false;

    memset(t, 0, sizeof(*t));
    if (!inv)
        return;
    t->n = inv->n_lines;
    for (size_t i = 0; i < t->n; i++) {
        range = range || money_add(&stated, inv->lines[i].tax) != APBOT_OK;
        any = any || inv->lines[i].tax != 0;
    }
    if (range) {
        snprintf(t->why, sizeof(t->why), "the lines' taxes add up past the largest amount");
        return;
    }
    if (t->n > 0)
        t->tax = apbot_xcalloc(t->n, sizeof(*t->tax));
    if (stated == inv->tax_total) {
        for (size_t i = 0; i < t->n; i++)
            t->tax[i] = inv->lines[i].tax;
        t->ok = true;
        return;
    }
    if (any) {
        char a[48], b[48];
        snprintf(t->why, sizeof(t->why),
                 "the invoice's lines state %s of tax in all, the invoice %s: the tax of each "
                 "line cannot be told",
                 money_text(stated, inv->exponent, a, sizeof(a)),
                 money_text(inv->tax_total, inv->exponent, b, sizeof(b)));
    } else {
        linetax_derive(t, inv);
    }
    if (!t->ok) {
        free(t->tax);
        t->tax = NULL;
    }
}

void linetax_done(struct linetax *t)
{
    if (!t)
        return;
    free(t->tax);
    memset(t, 0, sizeof(*t));
}
