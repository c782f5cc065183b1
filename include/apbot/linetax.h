/*
 * linetax.h - the tax of each line of an invoice, as a flow books it (${line.tax},
 * ${line.gross}).
 *
 * A CSV line states its tax; a UBL or CII line usually states only its tax category and rate
 * ("S:19"), the document its tax total (per VAT breakdown). The queued invoice keeps what the
 * vendor wrote (a UBL line's tax stays 0 in the payload, the tax total is the vendor's); this
 * module works out, from the invoice as it is queued, what each line's tax is:
 *
 *   - the lines' taxes add up to the invoice's tax total: they are the lines' taxes, as stated
 *     (every CSV invoice; a CII invoice whose lines give their tax; any invoice without tax);
 *   - every line states 0 and the invoice has tax: each line's tax is its net at its
 *     category's rate, rounded by the largest-remainder method so that the lines add up to the
 *     tax total to the minor unit (money_apportion_tax). A category without a rate is 0 % for
 *     the zero-rated and exempt ones (E, Z, AE, K, G, O of UNCL 5305), and a line of net 0
 *     needs no category;
 *   - anything else (some lines state a tax, or the rates cannot reach the tax total: a charge
 *     or allowance on the whole document, a tax rounded to whole units) cannot be told, and
 *     `why` says so: a flow that books line taxes then raises a business exception with it.
 *
 * Pure: no I/O. Worked out once per post (erp_post.c, the trace), not once per placeholder. A
 * public face of the model because the tools check bookings with it too (chaos-soak's
 * invariants hold lines booked gross to it).
 */
#ifndef APBOT_LINETAX_H
#define APBOT_LINETAX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "apbot/error.h"

struct invoice;

struct linetax {
    bool ok;      /* the lines' taxes are known (tax, derived) */
    bool derived; /* worked out from the lines' rates (the lines state none) */
    int64_t *tax; /* when ok: one per line of the invoice (NULL for an invoice without lines) */
    size_t n;     /* lines */
    char why[APBOT_ERR_LEN]; /* when !ok: why the lines' taxes cannot be told, a sentence for a
                                clerk */
};

/* Works out inv's line taxes into *t (see above). Cannot fail: t->ok says whether they are
 * known, t->why why not. inv is not kept. linetax_done frees t. */
void linetax_init(struct linetax *t, const struct invoice *inv);
/* Frees what t holds; t may then be initialised again. NULL and a zeroed t are fine. */
void linetax_done(struct linetax *t);

/*
 * The rate of a line's tax category as the readers keep it ("S:19", "AE:0", "O", "S:7.5"):
 * the part after ':' as a percentage, or 0 % for a category without a rate that is zero-rated
 * or exempt (E, Z, AE, K, G, O). APBOT_E_DATA otherwise, with a reason naming the category
 * worded to follow "line 2 " ("has the tax category 'S' without a rate"); *ret_rate is then
 * untouched.
 */
int linetax_rate_of(const char *category, int64_t *ret_rate, char *err,
                    size_t errlen) APBOT_MUST_USE;

#endif
