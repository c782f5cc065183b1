/*
 * store-test.h - the queue's test hooks: functions only the tests call, static to their file in
 * the product (UNITTEST, base/unittest.h) and declared here for apbot_unit only. The command
 * layer and the tools never see them: what they use is include/apbot/store.h.
 */
#ifndef APBOT_STORE_TEST_H
#define APBOT_STORE_TEST_H

#include <stdbool.h>
#include <stdint.h>

#include "apbot/clock.h"
#include "apbot/machine.h"
#include "apbot/store.h"
#include "store-int.h"

#ifdef APBOT_UNITTEST /* static in the product (base/unittest.h) */

/* store_enqueue without the invoice model (a precomputed row, store-int.h): same results, same
 * event, same batching. */
int store_enqueue_raw(struct store *st, const struct store_new_item *item,
                      const struct apbot_now *now, enum store_enqueue_result *ret_result,
                      int64_t *ret_id, char *err, size_t errlen) APBOT_MUST_USE;

/*
 * Crash recovery in one call: store_each_expired, then for each item machine_next(lease-expired)
 * and store_apply with take_over (actor "recovery"; a settle delay of settle_ms; store_recover
 * uses 0: due at once, which is safe because only a not-found with counters.settled confirms an
 * absence). An item whose state has no lease-expired row (a leased `new`, a terminal state) is
 * left as it is. *ret_count (may be NULL) gets the number of items moved. (The runner recovers
 * through transition.c over store_each_expired.)
 */
int store_recover(struct store *st, const struct apbot_now *now,
                  const struct machine_policy *policy, int *ret_count, char *err,
                  size_t errlen) APBOT_MUST_USE;
int store_recover_settle(struct store *st, const struct apbot_now *now, int64_t settle_ms,
                         const struct machine_policy *policy, int *ret_count, char *err,
                         size_t errlen) APBOT_MUST_USE;

/* The database's schema version (after store_open, the newest this apbot knows). */
int store_schema_version(struct store *st, int *ret_version, char *err,
                         size_t errlen) APBOT_MUST_USE;

/* How long one attempt waits for another process's write lock (default STORE_BUSY_TIMEOUT_MS),
 * and how many times a busy write transaction is retried after that (default
 * STORE_BUSY_RETRIES, with a jittered pause of up to STORE_BUSY_PAUSE_CAP_MS). Cannot fail. */
void store_set_busy_timeout(struct store *st, int ms);
void store_set_busy_retries(struct store *st, int retries);
/* Busy write transactions this handle retried so far. */
int64_t store_busy_retried(const struct store *st);

/* True when path names a PostgreSQL queue (store.h, "Backends"). Pure. */
bool store_path_is_pg(const char *path);

/*
 * A backend with a clock of its own (PostgreSQL) takes the `now` its callers pass for every
 * stamp and comparison instead, and hands items out untranslated, so one test timeline runs on
 * every backend. Process-wide, read when a store is opened.
 */
void store_test_trust_caller_clock(bool on);

/* What is left of the settle delay (store_settled's measure): 0 when settled, settle_ms when
 * foreign, else settle_mono + settle_ms - now->mono_ms. Pure. */
int64_t store_settle_wait_ms(const struct store_item *it, const struct apbot_now *now,
                             int64_t settle_ms);
/* Due: next_mono reached, or foreign (due now). Pure; the backends decide it in SQL. */
bool store_due(const struct store_item *it, const struct apbot_now *now);

/*
 * store_audit_verify's decision for one event, pure: cur, given the event before it in id
 * order (prev: NULL for the first; it verified) and the one after it (next: NULL for the last).
 * In this order: cur carries no hashes: UNCHAINED; its content does not hash to its hash:
 * ORDER when it does under next's or prev's id (two events swapped ids), else CHANGED; its
 * prev_hash is not prev's hash (the genesis for the first): MISSING when ids lie between the
 * two (or the first is not #1), else ORDER; else INTACT. detail (len bytes) gets one sentence
 * naming the event, its item and what differs.
 */
enum store_audit_kind store_audit_check(const struct store_event_row *prev,
                                        const struct store_event_row *cur,
                                        const struct store_event_row *next, char *detail,
                                        size_t len);

/* store_pg.c: what a failed PostgreSQL statement means (store-int.h). Pure. */
enum store_pg_fault store_pg_fault(const char *sqlstate, bool connection_bad);
/* A connection that could not be made, given PQpingParams' answer (a PGPing): APBOT_E_IO when
 * the server answers (it refused us: credentials, database, role) or nothing was tried (a bad
 * string), APBOT_E_UNAVAIL when it does not answer or does not take connections now. Pure. */
int store_pg_connect_fault(int ping);
/* The bound on one round trip of st (PG_ROUNDTRIP_MS by default); APBOT_E_INVAL for SQLite. */
int store_pg_set_roundtrip_ms(struct store *st, int ms);
/* The value libpq uses for connection option key on st's connection, into buf (len bytes);
 * APBOT_E_NOTFOUND when it has none. */
int store_pg_option(struct store *st, const char *key, char *buf, size_t len);

/* store_walvfs.c: the WAL writes passed on and, among them, the joined frames. */
void store_walvfs_counts(uint64_t *ret_writes, uint64_t *ret_joined);

#endif /* APBOT_UNITTEST */

#endif
