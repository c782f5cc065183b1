/*
 * logline.c - one log line for an operator, as key=value words or as one JSON object with the
 * same fields in the same order (--log-format json), for `apbot run` and `apbot serve` alike.
 *
 * Values are quoted and escaped only where they must be: most are one plain word, written
 * without copies (a line per state change is on the hot path of a run). In JSON a value is the
 * text the key=value line would show (controls and bytes that are not UTF-8 written as \xNN),
 * as a JSON string; a value cut by the line's bound is cut between characters.
 */
#include "base/logline.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apbot/clock.h"
#include "apbot/text.h"

/* Whether v is one word of printable ASCII that kv writes as it is (no blank, quote, '=' or
 * backslash: nothing to quote or escape), v[0..*ret_len) when it is. */
static bool kv_plain(const char *v, size_t *ret_len)
{
    size_t n = 0;
    for (; v[n]; n++)
        if (v[n] <= ' ' || v[n] > '~' || v[n] == '"' || v[n] == '=' || v[n] == '\\')
            return false;
    *ret_len = n;
    return n > 0;
}

/* Appends `,"name":"value"` to buf, the value escaped as kv would, then for JSON. */
static void kv_json(char *buf, size_t len, const char *name, const char *value)
{
    size_t o = strlen(buf), vl;
    char *v = kv_plain(value, &vl) ? NULL : text_escape(value, len, 0);
    const char *s = v ? v : value;
    int n = snprintf(buf + o, len - o, ",\"%s\":\"", name);
    if (n < 0 || (size_t)n + 2 >= len - o) {
        buf[o] = '\0'; /* no half member: the line stays JSON */
        free(v);
        return;
    }
    o += (size_t)n;
    /* text_escape leaves no control and no invalid UTF-8: only '"' and '\\' need a backslash.
     * A value cut by the line's bound is cut between characters, never inside one. */
    while (*s) {
        unsigned char c = (unsigned char)*s;
        size_t cl = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
        size_t need = (*s == '"' || *s == '\\') ? 2 : cl;
        if (o + need + 3 > len)
            break;
        if (*s == '"' || *s == '\\')
            buf[o++] = '\\';
        for (size_t k = 0; k < cl && *s; k++)
            buf[o++] = *s++;
    }
    buf[o++] = '"';
    buf[o] = '\0';
    free(v);
}

/* Appends ` name=value` to buf, quoting values with blanks or quotes, controls escaped; in a
 * JSON line (it starts with '{') a member instead. */
void logline_kv(char *buf, size_t len, const char *name, const char *value)
{
    size_t o = strlen(buf);
    if (!value || o + 4 >= len)
        return;
    if (buf[0] == '{') {
        kv_json(buf, len, name, value);
        return;
    }
    /* Most values (ids, keys, states, events, documents) are one plain word, written as the
     * general path below would write them, without its copies: a log line per state change
     * cost ~18,000 instructions. */
    size_t nl = strlen(name), vl;
    if (kv_plain(value, &vl) && o + 1 + nl + 1 + vl + 3 < len) {
        buf[o++] = ' ';
        memcpy(buf + o, name, nl);
        o += nl;
        buf[o++] = '=';
        memcpy(buf + o, value, vl + 1);
        return;
    }
    char *v = text_escape(value, len, 0);
    bool quote = !*v || strpbrk(v, " \t\"=") != NULL;
    int n = snprintf(buf + o, len - o, " %s=%s", name, quote ? "\"" : "");
    if (n < 0 || (size_t)n >= len - o) {
        free(v);
        return;
    }
    o += (size_t)n;
    for (const char *p = v; *p && o + 3 < len; p++) {
        if (*p == '"')
            buf[o++] = '\\';
        buf[o++] = *p;
    }
    if (quote && o + 1 < len)
        buf[o++] = '"';
    buf[o] = '\0';
    free(v);
}

/* Starts a log line with the UTC time and the level (a JSON object's first members with
 * json). Each thread keeps the text of the last second it formatted (lines come several a
 * second). */
void logline_start(char *buf, size_t len, const char *level, bool json)
{
    static _Thread_local time_t last_secs = -1;
    static _Thread_local char when[32];
    int64_t wall = apbot_clock_wall_ms();
    time_t secs = (time_t)(wall / 1000);
    if (secs != last_secs) {
        struct tm tm;
        gmtime_r(&secs, &tm);
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
        last_secs = secs;
    }
    if (json)
        snprintf(buf, len, "{\"time\":\"%s.%03dZ\",\"level\":\"%s\"", when, (int)(wall % 1000),
                 level);
    else
        snprintf(buf, len, "time=%s.%03dZ level=%s", when, (int)(wall % 1000), level);
}
