/*
 * settle.c - the settle delay, and how it learns from late commits.
 *
 * After an ambiguous outcome (a post whose answer never came) an item waits the settle delay
 * before a reconciliation may take a "not found" for an absence. The delay is measured on
 * CLOCK_BOOTTIME from the moment the ambiguity was recorded (the store keeps the stamp with
 * its boot id): a step of the wall clock cannot shorten it. When a reconciliation finds a
 * document the ERP booked later than the client gave up, the lateness is kept per flow in the
 * queue; once the longest late commit reaches half the settle delay, the delay in force
 * becomes twice that for the rest of the run (and for later runs of the flow), and the log
 * says so.
 *
 * How late a commit was is read one of two ways (runner_settle_method). With a booking time
 * in the lookup, the time it shows minus the moment apbot gave up. Without one (a CGI-era
 * search shows a date at most), from the lookups themselves: an `unknown` outcome is looked
 * up first after half the settle delay; when that look misses the document and a later
 * lookup finds it, the document became visible between the two, so the finding lookup's end
 * minus the give-up bounds the late commit from above. A document found at the first look
 * proves nothing either way and is not counted: the first look lies at least half the delay
 * after the give-up, and counting that as lateness would double the delay on every unknown
 * outcome. The bound overstates by up to the gap between the looks, which errs on the safe
 * side (a longer wait, never a shorter one), and it stops growing once the first look, at
 * half the raised delay, finds what this ERP commits late.
 */
#include "run/runner-int.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "apbot/clock.h"
#include "base/unittest.h"
#include "apbot/erp.h"
#include "apbot/flow.h"
#include "apbot/store.h"

/* Reads "<date in the table's format>[ HH:MM[:SS]]" as local time; true only with a time of
 * day (a date alone cannot measure a late commit). */
static bool booked_wall_ms(const char *fmt, const char *text, int64_t *ret)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *p = text;
    if (!fmt || !text)
        return false;
    for (const char *f = fmt; *f; f++) {
        if (*f != '%') {
            if (*p++ != *f)
                return false;
            continue;
        }
        f++;
        int digits = *f == 'Y' ? 4 : 2, v = 0;
        for (int i = 0; i < digits; i++, p++) {
            if (*p < '0' || *p > '9')
                return false;
            v = v * 10 + (*p - '0');
        }
        switch (*f) {
        case 'd':
            tm.tm_mday = v;
            break;
        case 'm':
            tm.tm_mon = v - 1;
            break;
        case 'Y':
            tm.tm_year = v - 1900;
            break;
        case 'y':
            tm.tm_year = v + 100;
            break;
        default:
            return false;
        }
    }
    int hh, mm, ss = 0, n = 0;
    if (sscanf(p, " %2d:%2d%n", &hh, &mm, &n) != 2)
        return false;
    p += n;
    if (*p == ':' && sscanf(p, ":%2d", &ss) != 1)
        return false;
    tm.tm_hour = hh;
    tm.tm_min = mm;
    tm.tm_sec = ss;
    tm.tm_isdst = -1;
    time_t t = mktime(&tm);
    if (t == (time_t)-1)
        return false;
    *ret = (int64_t)t * 1000;
    return true;
}

int64_t runner_settle_in_force(int64_t policy_settle_ms, int64_t max_late_ms)
{
    if (max_late_ms <= 0 || max_late_ms * 2 < policy_settle_ms)
        return policy_settle_ms;
    return max_late_ms * 2;
}

int64_t runner_settle_of(struct store *st, const struct flow *f, int64_t *ret_policy_ms,
                         int64_t *ret_max_late_ms)
{
    struct store_late_commit late = {0};
    int64_t policy =
        f->policy.settle_ms > 0 ? f->policy.settle_ms : flow_policy_default().settle_ms;
    if (store_late_commit(st, f->name, &late, NULL, 0) != APBOT_OK)
        late.max_ms = 0;
    if (ret_policy_ms)
        *ret_policy_ms = policy;
    if (ret_max_late_ms)
        *ret_max_late_ms = late.max_ms;
    return runner_settle_in_force(policy, late.max_ms);
}

enum runner_settle_method runner_settle_method(const struct flow *f)
{
    const struct flow_table *t[2] = {&f->lookup.table, &f->lookup.detail.table};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < t[k]->n_cols; i++)
            if (t[k]->cols[i].name && strcmp(t[k]->cols[i].name, "booked") == 0)
                return RUNNER_SETTLE_BOOKING_TIME;
    return RUNNER_SETTLE_LOOKUP_BOUND;
}

const char *runner_settle_method_name(enum runner_settle_method m)
{
    return m == RUNNER_SETTLE_BOOKING_TIME ? "booking-time" : "lookup-bound";
}

UNITTEST int64_t settle_late_bound(int64_t gave_up, int64_t absent_at, int64_t found_at)
{
    if (absent_at <= gave_up || found_at <= absent_at)
        return 0;
    return found_at - gave_up;
}

/* Raises the settle delay in force to twice the longest late commit once that reaches half
 * of it. Returns the delay in force. */
int64_t settle_adapt(struct runner *r, int64_t late_ms, const char *why)
{
    int64_t settle = atomic_load(&r->settle_ms);
    int64_t raised = runner_settle_in_force(settle, late_ms);
    if (raised <= settle)
        return settle;
    int64_t cur = settle;
    while (cur < raised && !atomic_compare_exchange_weak(&r->settle_ms, &cur, raised))
        ;
    if (cur < raised) {
        char msg[300];
        snprintf(msg, sizeof(msg),
                 "the ERP committed %" PRId64 " ms after apbot gave up (%s): settle delay raised "
                 "from %" PRId64 " to %" PRId64 " ms",
                 late_ms, why, cur, raised);
        runlog_msg(r, "warn", "settle delay raised", msg);
        return raised;
    }
    return cur;
}

/* Keeps a late commit of `late` ms learnt from item it: the run's longest, the queue's record
 * for the flow, and the settle delay raised when it asks for that. */
static void settle_learn(struct worker *w, const struct store_item *it, int64_t late,
                         const char *how)
{
    struct runner *r = w->r;
    int64_t prev = atomic_load(&r->max_late);
    while (late > prev && !atomic_compare_exchange_weak(&r->max_late, &prev, late))
        ;
    if (late <= prev)
        return;
    char err[APBOT_ERR_LEN];
    if (store_note_late_commit(w->st, r->flow->name, late, NULL, err, sizeof(err)) != APBOT_OK)
        runlog_msg(r, "warn", "late commit not recorded", err);
    char why[120];
    snprintf(why, sizeof(why), "item %" PRId64 ", %s", it->id, how);
    settle_adapt(r, late, why);
}

/*
 * A reconciliation found doc booked at `booked` (the ERP's clock): how late was it after the
 * client gave up? The give-up moment is placed on the ERP's clock through the Date of the
 * lookup's answer and CLOCK_BOOTTIME (the ERP's time then, minus the mono time since the give
 * up), so neither a step of this host's wall clock nor a skew between the two hosts reads as a
 * late commit. Without a Date the wall stamp of the give-up is used, and a booking that lies
 * in this host's future says the clocks disagree: nothing is learnt from it.
 */
void settle_observe(struct worker *w, const struct store_item *it, const char *booked,
                    const struct erp_lookup_result *res)
{
    struct runner *r = w->r;
    int64_t booked_ms, gave_up;
    struct apbot_now now;
    if (!it->has_settle || !booked ||
        !booked_wall_ms(r->flow->lookup.table.date_format, booked, &booked_ms))
        return;
    apbot_clock_now(&now);
    bool same_boot = apbot_clock_same_boot(it->clock_boot, now.boot);
    if (res->erp_date_ms > 0 && same_boot) {
        /* Whole seconds on both sides: the ERP's own booking after its own clock is another
         * time zone or a broken column, not a late commit. */
        if (booked_ms > res->erp_date_ms + 1000)
            return;
        gave_up = res->erp_date_ms - (res->erp_date_mono - it->settle_mono);
    } else {
        if (booked_ms > now.wall_ms + 1000)
            return;
        gave_up = it->settle_at;
    }
    /* Whole seconds on the ERP's clock: a second of rounding is not a late commit. */
    int64_t late = booked_ms - gave_up;
    if (late <= 1000)
        return;
    settle_learn(w, it, late, "by its booking time");
}

/* ---- the lookup-bound method ------------------------------------------------------------ */

int64_t settle_first_look_ms(const struct runner *r, int64_t settle_ms)
{
    return r->settle_method == RUNNER_SETTLE_LOOKUP_BOUND ? settle_ms / 2 : settle_ms;
}

/* The ring's place of item id, or NULL (under r->mu). */
static struct settle_miss *miss_of(struct runner *r, int64_t id)
{
    for (size_t i = 0; i < RUNNER_MISSES_MAX; i++)
        if (r->misses[i].item == id)
            return &r->misses[i];
    return NULL;
}

void settle_note_miss(struct worker *w, const struct store_item *it, int64_t looked_mono)
{
    struct runner *r = w->r;
    struct apbot_now now;
    if (r->settle_method != RUNNER_SETTLE_LOOKUP_BOUND || !it->has_settle || looked_mono <= 0)
        return;
    apbot_clock_now(&now);
    if (!apbot_clock_same_boot(it->clock_boot, now.boot))
        return; /* the settle base is counted again from now: nothing to compare */
    pthread_mutex_lock(&r->mu);
    struct settle_miss *m = miss_of(r, it->id);
    if (!m) {
        m = &r->misses[r->next_miss];
        r->next_miss = (r->next_miss + 1) % RUNNER_MISSES_MAX;
    }
    *m = (struct settle_miss){.item = it->id, .base = it->settle_mono, .at = looked_mono};
    pthread_mutex_unlock(&r->mu);
}

void settle_bound(struct worker *w, const struct store_item *it)
{
    struct runner *r = w->r;
    struct apbot_now now;
    int64_t absent_at = 0;
    if (r->settle_method != RUNNER_SETTLE_LOOKUP_BOUND || !it->has_settle)
        return;
    apbot_clock_now(&now);
    pthread_mutex_lock(&r->mu);
    struct settle_miss *m = miss_of(r, it->id);
    if (m) {
        /* a miss of an earlier give-up (the item posted again since) proves nothing now */
        if (m->base == it->settle_mono)
            absent_at = m->at;
        *m = (struct settle_miss){0};
    }
    pthread_mutex_unlock(&r->mu);
    if (!absent_at || !apbot_clock_same_boot(it->clock_boot, now.boot))
        return;
    int64_t late = settle_late_bound(it->settle_mono, absent_at, now.mono_ms);
    if (late > 0)
        settle_learn(w, it, late, "at most that: a lookup missed it, a later one found it");
}
