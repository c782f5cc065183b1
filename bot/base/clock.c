/*
 * clock.c - wall clock, CLOCK_BOOTTIME and the boot id, plus the wall-clock test offset.
 *
 * The boot id is read once (pthread_once) from /proc/sys/kernel/random/boot_id; the test
 * offset is one atomic. Nothing here decides what a delay means: callers compare mono stamps
 * of one boot and treat a stamp of another boot as they must.
 */
#include "apbot/clock.h"

#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define BOOT_ID_PATH "/proc/sys/kernel/random/boot_id"
#define BOOT_ID_UNKNOWN "unknown-boot"

static _Atomic int_least64_t wall_offset_ms;
static pthread_once_t boot_once = PTHREAD_ONCE_INIT;
static char boot_id[APBOT_BOOT_ID_LEN];

static int64_t read_ms(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0)
        return 0; /* cannot happen for the clocks used here */
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void boot_load(void)
{
    char buf[64] = "";
    FILE *fp = fopen(BOOT_ID_PATH, "r");
    if (fp) {
        if (!fgets(buf, sizeof(buf), fp))
            buf[0] = '\0';
        fclose(fp);
    }
    /* Keep the id's own characters (hex digits and dashes), nothing else. */
    size_t n = 0;
    for (size_t i = 0; buf[i] && n + 1 < sizeof(boot_id); i++) {
        unsigned char ch = (unsigned char)buf[i];
        if (isxdigit(ch) || ch == '-')
            boot_id[n++] = (char)ch;
        else
            break;
    }
    boot_id[n] = '\0';
    if (n < 8)
        snprintf(boot_id, sizeof(boot_id), "%s", BOOT_ID_UNKNOWN);
}

const char *apbot_clock_boot_id(void)
{
    pthread_once(&boot_once, boot_load);
    return boot_id;
}

int64_t apbot_clock_wall_ms(void)
{
    return read_ms(CLOCK_REALTIME) + (int64_t)atomic_load(&wall_offset_ms);
}

int64_t apbot_clock_mono_ms(void)
{
    return read_ms(CLOCK_BOOTTIME);
}

void apbot_clock_now(struct apbot_now *ret)
{
    if (!ret)
        return;
    /* mono first: a reader comparing two readings never sees the later one's mono earlier */
    ret->mono_ms = apbot_clock_mono_ms();
    ret->wall_ms = apbot_clock_wall_ms();
    snprintf(ret->boot, sizeof(ret->boot), "%s", apbot_clock_boot_id());
}

bool apbot_clock_same_boot(const char *boot_a, const char *boot_b)
{
    /* An empty or missing id belongs to no boot: it never compares. */
    return boot_a && boot_b && *boot_a && strcmp(boot_a, boot_b) == 0;
}

void apbot_clock_test_step_wall(int64_t delta_ms)
{
    atomic_fetch_add(&wall_offset_ms, (int_least64_t)delta_ms);
}
