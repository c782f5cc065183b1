/*
 * erp_resolve.h - reference data: a code the invoice carries (a vendor number, a G/L account, a
 * currency) turned into the ERP's ids by the flow's <resolve> search, once per run per code.
 *
 * The cache (struct erp_refs) is shared by every session of a run (the runner makes one and
 * hands it to each with erp_set_refs; a session without one keeps its own), bounded by each
 * resolve's max-entries, and holds only codes the ERP answered: a code it does not hold is asked
 * again the next time (the ERP may have been given it meanwhile), and each such answer is a
 * business exception naming the code. A resolve learnt from a post step (from-step) is filled
 * by that step's answers instead (erp_refs_learn) and read without a request (erp_refs_known).
 * Thread-safe.
 */
#ifndef APBOT_ERP_RESOLVE_H
#define APBOT_ERP_RESOLVE_H

#include <stddef.h>

#include "apbot/error.h"

struct erp_session;
struct erp_refs;

/* A new, empty cache. Never NULL (aborts on out-of-memory). */
struct erp_refs *erp_refs_new(void);
/* Frees the cache; NULL is fine. No session may use it any more. */
void erp_refs_free(struct erp_refs *r);
/* Shares the run's cache with session s (r must outlive it). */
void erp_set_refs(struct erp_session *s, struct erp_refs *r);

/* Codes held, over every resolve (for tests and the run's summary). */
size_t erp_refs_count(struct erp_refs *r);

/*
 * The row the ERP holds for `code` under the flow's resolve number `which`: the cached one, or
 * one found by its search now (logging in first if need be). *ret_values gets one heap string
 * (or NULL for an empty cell) per column of the resolve's table, in its order (free with
 * erp_ref_values_free, n = the table's n_cols). Returns APBOT_OK; APBOT_E_DATA when the ERP
 * answered that it holds no row whose match column equals the code exactly (a business
 * exception: err names the resolve and the code); APBOT_E_NET when the answer proved nothing
 * (not answered, cut, more rows than max-rows, several rows with the code, unreadable);
 * APBOT_E_SYSTEMIC when the login was refused; APBOT_E_INVAL for a code that is empty.
 */
int erp_resolve(struct erp_session *s, size_t which, const char *code, char ***ret_values,
                char *err, size_t errlen) APBOT_MUST_USE;
void erp_ref_values_free(char **values, size_t n);

/*
 * A resolve learnt from a post step (from-step): erp_refs_known hands out what the run's cache
 * holds for `code` (*ret_values as erp_resolve's, free with erp_ref_values_free) without asking
 * the ERP: APBOT_OK, or APBOT_E_NOTFOUND when nothing is kept (yet). erp_refs_learn keeps what
 * the step's answer showed for `code` (one value per column, none empty, none longer than 512
 * bytes): the first answer kept wins, within the resolve's max-entries.
 */
int erp_refs_known(struct erp_session *s, size_t which, const char *code,
                   char ***ret_values) APBOT_MUST_USE;
void erp_refs_learn(struct erp_session *s, size_t which, const char *code, char *const *values);

#endif
