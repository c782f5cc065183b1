/*
 * invariants.h - the promises to finance, checked against the simulator's ground truth
 * (/_sim/ledger.csv, /_sim/lines.csv, /_sim/stats) and the queue: no reference booked twice; no
 * committing request that carried a reference the ERP already held (reposts_of_booked 0); every
 * `completed` item booked exactly once with its amount and document number, approved (status
 * posted) and with all its lines (accounts and amounts as in the invoice: net, or gross for a
 * flow that books lines gross); nothing booked for a
 * business exception; every item terminal unless the test stopped the run on purpose.
 */
#ifndef APBOT_TESTS_INVARIANTS_H
#define APBOT_TESTS_INVARIANTS_H

#include <stdbool.h>

struct inv_report {
    int items, completed, business_exception, manual_review, pending;
    int bookings;                 /* ledger rows */
    int duplicated_refs;          /* references booked more than once */
    long long reposts_of_booked;  /* the ERP's count of posts of a reference it held */
    int completed_unbooked;       /* completed items with no booking */
    int completed_mismatch;       /* booked under another doc number or amount */
    int completed_unposted;       /* booked, but a draft (not approved) */
    int completed_lines_mismatch; /* booked with other lines than the invoice's */
    int exception_booked;         /* business exceptions with a booking */
    int pending_bad;              /* pending items where none may be */
    char first_problem[512];
};

/*
 * Checks every invariant for the queue at db_path against the simulator on port. The key as
 * written into the reference field is the first key_length characters of the item's key.
 * Returns 0 when all hold, -1 otherwise (ret->first_problem says which); ret may be NULL.
 */
int invariants_check(const char *db_path, unsigned short port, int key_length, bool allow_pending,
                     struct inv_report *ret);

/* What a booked line's amount must be (sign aside). */
enum inv_lines {
    INV_LINES_NET = 0, /* the invoice line's net (what the bundled flows book) */
    INV_LINES_GROSS,   /* its net + tax, the tax as a flow books it (model/linetax.h) */
};
/* invariants_check, with the booked lines held to `lines`. */
int invariants_check_lines(const char *db_path, unsigned short port, int key_length,
                           bool allow_pending, enum inv_lines lines, struct inv_report *ret);

/* Prints a one-paragraph summary of r to stderr (for failing tests). */
void invariants_print(const struct inv_report *r);

#endif
