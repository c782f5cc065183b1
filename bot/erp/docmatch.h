/*
 * docmatch.h - the one rule for "does this ERP record match this invoice".
 *
 * The key says which invoice an ERP record belongs to; this rule says whether the record books
 * the same money for the same vendor. It compares what the ERP shows with what the queue holds:
 * the vendor (when the ERP shows one), the currency (when the ERP shows one) and the amount,
 * exactly in minor units. A sign flip is the same amount only for a credit note (an ERP may
 * show a credit note positive while the document carries it negative, or the other way round);
 * for an invoice it is another amount. A record whose amount is missing or unreadable cannot
 * prove the money and does not match. The result names every difference, so the caller can say
 * what differs. Pure: no I/O. The report, `apbot resolve` and the review page use it.
 */
#ifndef APBOT_DOCMATCH_H
#define APBOT_DOCMATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct erp_row;

/* What the queue holds of the invoice. Strings are borrowed. */
struct docmatch_invoice {
    const char *vendor_id; /* the ERP vendor id it is booked under (after the vendor map) */
    const char *currency;  /* ISO 4217 */
    int exponent;          /* of currency */
    int64_t total;         /* payable, minor units, as queued */
    bool credit_note;
};

/* What one ERP record shows; NULL / false where the ERP shows nothing. Strings are borrowed. */
struct docmatch_record {
    const char *doc;         /* the document number, for messages */
    const char *vendor;      /* vendor column */
    const char *currency;    /* currency column */
    const char *amount_text; /* the amount as shown, for messages */
    bool has_amount;         /* amount/exponent valid: the shown amount was read exactly */
    int64_t amount;
    int exponent;
};

/* What differs: a bit set, DOCMATCH_SAME (0) when the record matches. */
enum docmatch_diff {
    DOCMATCH_SAME = 0,
    DOCMATCH_VENDOR = 1u << 0,            /* the ERP shows another vendor */
    DOCMATCH_CURRENCY = 1u << 1,          /* the ERP shows another currency */
    DOCMATCH_AMOUNT = 1u << 2,            /* another amount (a sign flip is one, but for a
                                           * credit note) */
    DOCMATCH_AMOUNT_UNREADABLE = 1u << 3, /* an amount apbot cannot read */
    DOCMATCH_NO_AMOUNT = 1u << 4,         /* no amount at all: the money cannot be proven */
};

/* Compares; returns the difference bits (DOCMATCH_SAME: a match). Cannot fail. */
unsigned docmatch_compare(const struct docmatch_invoice *inv, const struct docmatch_record *rec);

/* The invoice side from what the queue holds of it (a store_item's vendor_id, currency,
 * exponent, total and doc_type: "invoice" or "credit-note"); borrows the strings. Cannot fail. */
struct docmatch_invoice docmatch_invoice_of(const char *vendor_id, const char *currency,
                                            int exponent, int64_t total, const char *doc_type);
/* The record side from a lookup or listing row (borrows its strings). Cannot fail. */
void docmatch_record_of_row(const struct erp_row *row, struct docmatch_record *ret);

/*
 * The ERP's amount (in the invoice's currency) as the queue writes it: for a credit note
 * shown with the other sign, negated; otherwise unchanged. Used to add ERP amounts up beside
 * the queue's. Cannot fail.
 */
int64_t docmatch_as_queued(const struct docmatch_invoice *inv, int64_t erp_amount);

/*
 * One clause per difference, joined with "; ", into buf: e.g. "999.00 EUR, but the invoice is
 * 119.00 EUR" or "vendor 100002, but the invoice's vendor is 100001". "" for DOCMATCH_SAME.
 * Cannot fail (cut to len); returns buf. Texts from the ERP are copied as they are: escape
 * them for the medium they go to.
 */
const char *docmatch_describe(unsigned diff, const struct docmatch_invoice *inv,
                              const struct docmatch_record *rec, char *buf, size_t len);

#endif
