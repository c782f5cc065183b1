/*
 * clock.h - the two clocks apbot reads: the wall clock for people, CLOCK_BOOTTIME for every
 * safety delay.
 *
 * The wall clock jumps (NTP corrections, a resumed VM, an operator): a settle delay, a lease
 * or a backoff measured on it is shortened by a step forward and stretched by a step back.
 * CLOCK_BOOTTIME never jumps and keeps counting through a suspend, but it restarts at every
 * boot, so a stored mono stamp means something only together with the boot id it was taken
 * under (struct apbot_now carries both). What to do with a stamp from another boot is the
 * caller's decision (the store treats it as "expired, due now, settle delay counted again").
 *
 * Tests shift the wall clock with a process-wide offset (apbot_clock_test_step_wall); nothing
 * here ever sets the machine's clock. The boot id is read once per process.
 */
#ifndef APBOT_CLOCK_H
#define APBOT_CLOCK_H

#include <stdbool.h>
#include <stdint.h>

#define APBOT_BOOT_ID_LEN 40 /* a boot id ("8c6f...-...", 36 characters) plus its NUL */

/* One reading of both clocks. A plain value: copy it, compare it, store it. */
struct apbot_now {
    int64_t wall_ms;              /* Unix ms, CLOCK_REALTIME + test offset: for people only */
    int64_t mono_ms;              /* CLOCK_BOOTTIME in ms: every safety delay is measured here */
    char boot[APBOT_BOOT_ID_LEN]; /* the boot mono_ms belongs to; "" never comes back */
};

/* Reads both clocks and the boot id into *ret. Cannot fail. Thread-safe. */
void apbot_clock_now(struct apbot_now *ret);

/* The wall clock alone (Unix ms, with the test offset). Cannot fail. For display only. */
int64_t apbot_clock_wall_ms(void);

/* CLOCK_BOOTTIME alone, in ms. Cannot fail. */
int64_t apbot_clock_mono_ms(void);

/*
 * The boot id of this process's boot: /proc/sys/kernel/random/boot_id, or "unknown-boot" where
 * the kernel offers none (then mono stamps from an earlier boot look valid and delays measured
 * across a reboot may stall, never shorten: a restarted CLOCK_BOOTTIME is smaller). Static
 * storage, never NULL.
 */
const char *apbot_clock_boot_id(void);

/* True when both readings were taken under the same boot (their mono_ms compare). Pure. */
bool apbot_clock_same_boot(const char *boot_a, const char *boot_b);

/*
 * Test hook: shifts this process's wall clock by delta_ms (added to every later reading, in
 * every thread; atomic, cumulative). The mono clock is never shifted. Never used outside
 * tests; the machine's clock is never changed.
 */
void apbot_clock_test_step_wall(int64_t delta_ms);

#endif
