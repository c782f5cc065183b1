/*
 * docmatch.c - the one rule for "does this ERP record match this invoice" (see docmatch.h):
 * vendor and currency when the ERP shows them, the amount exactly in minor units, a sign flip
 * only for credit notes. Pure; the callers fetch the records.
 */
#include "erp/docmatch.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "apbot/erp.h"
#include "apbot/error.h"
#include "apbot/money.h"

unsigned docmatch_compare(const struct docmatch_invoice *inv, const struct docmatch_record *rec)
{
    unsigned diff = DOCMATCH_SAME;

    if (rec->vendor && (!inv->vendor_id || strcmp(rec->vendor, inv->vendor_id) != 0))
        diff |= DOCMATCH_VENDOR;
    if (rec->currency && (!inv->currency || strcmp(rec->currency, inv->currency) != 0))
        diff |= DOCMATCH_CURRENCY;
    if (!rec->has_amount) {
        diff |=
            rec->amount_text && *rec->amount_text ? DOCMATCH_AMOUNT_UNREADABLE : DOCMATCH_NO_AMOUNT;
    } else if (rec->exponent != inv->exponent) {
        /* read in another currency's minor units: not comparable, hence not the same */
        diff |= DOCMATCH_AMOUNT;
    } else if (rec->amount != inv->total && !(inv->credit_note && rec->amount == -inv->total)) {
        diff |= DOCMATCH_AMOUNT;
    }
    return diff;
}

struct docmatch_invoice docmatch_invoice_of(const char *vendor_id, const char *currency,
                                            int exponent, int64_t total, const char *doc_type)
{
    return (struct docmatch_invoice){
        .vendor_id = vendor_id,
        .currency = currency,
        .exponent = exponent,
        .total = total,
        .credit_note = doc_type && strcmp(doc_type, "credit-note") == 0,
    };
}

void docmatch_record_of_row(const struct erp_row *row, struct docmatch_record *ret)
{
    memset(ret, 0, sizeof(*ret));
    ret->doc = row->doc;
    ret->vendor = row->vendor;
    ret->currency = row->currency;
    ret->amount_text = row->amount_text;
    ret->has_amount = row->has_amount;
    ret->amount = row->amount;
    ret->exponent = row->exponent;
}

int64_t docmatch_as_queued(const struct docmatch_invoice *inv, int64_t erp_amount)
{
    if (inv->credit_note && erp_amount != 0 && inv->total != 0 &&
        (erp_amount < 0) != (inv->total < 0))
        return -erp_amount;
    return erp_amount;
}

/* Appends one clause to buf, "; " between clauses; cut at len. */
static void clause(char *buf, size_t len, const char *fmt, ...) APBOT_PRINTF(3, 4);
static void clause(char *buf, size_t len, const char *fmt, ...)
{
    size_t used = strlen(buf);
    va_list ap;

    if (used > 0 && used + 2 < len) {
        memcpy(buf + used, "; ", 3);
        used += 2;
    }
    if (used + 1 >= len)
        return;
    va_start(ap, fmt);
    vsnprintf(buf + used, len - used, fmt, ap);
    va_end(ap);
}

const char *docmatch_describe(unsigned diff, const struct docmatch_invoice *inv,
                              const struct docmatch_record *rec, char *buf, size_t len)
{
    char mine[48], theirs[48];
    const char *cur = inv->currency ? inv->currency : "";

    if (len == 0)
        return buf;
    buf[0] = '\0';
    money_text(inv->total, inv->exponent, mine, sizeof(mine));
    if (diff & DOCMATCH_VENDOR)
        clause(buf, len, "vendor %s, but the invoice's vendor is %s", rec->vendor,
               inv->vendor_id ? inv->vendor_id : "(none)");
    if (diff & DOCMATCH_CURRENCY)
        clause(buf, len, "currency %s, but the invoice is in %s", rec->currency, cur);
    if (diff & DOCMATCH_AMOUNT)
        clause(buf, len, "%s %s, but the invoice is %s %s",
               money_text(rec->amount, rec->exponent, theirs, sizeof(theirs)),
               rec->currency ? rec->currency : cur, mine, cur);
    if (diff & DOCMATCH_AMOUNT_UNREADABLE)
        clause(buf, len, "an amount that cannot be read ('%s'), and the invoice is %s %s",
               rec->amount_text ? rec->amount_text : "", mine, cur);
    if (diff & DOCMATCH_NO_AMOUNT)
        clause(buf, len, "no amount, so the invoice's %s %s cannot be confirmed", mine, cur);
    return buf;
}
