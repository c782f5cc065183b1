/*
 * metrics.c - the Prometheus exposition formats (OpenMetrics 1.0 and the text format 0.0.4)
 * written from integers, and a file written whole for the node exporter's textfile collector.
 * What the figures are is the caller's (metrics.h).
 */
#include "base/metrics.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apbot/mem.h"
#include "base/unittest.h"

/* ---- values and labels ------------------------------------------------------------------ */

UNITTEST void metrics_decimal(int64_t v, int scale, char *buf, size_t len)
{
    /* |INT64_MIN| does not fit an int64_t: work on the magnitude as unsigned */
    uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    char digits[32];
    int n;

    assert(scale >= 0 && scale <= 18 && len >= 32);
    (void)len;
    /* the digits, least significant first */
    n = 0;
    do {
        digits[n++] = (char)('0' + mag % 10);
        mag /= 10;
    } while (mag);
    while (n < scale + 1) /* an integer part */
        digits[n++] = '0';
    int frac_end = 0; /* trailing zeros of the fraction dropped, one digit kept */
    while (frac_end < scale - 1 && digits[frac_end] == '0')
        frac_end++;
    size_t o = 0;
    if (v < 0)
        buf[o++] = '-';
    for (int i = n - 1; i >= scale; i--)
        buf[o++] = digits[i];
    if (scale > 0) {
        buf[o++] = '.';
        for (int i = scale - 1; i >= frac_end; i--)
            buf[o++] = digits[i];
    }
    buf[o] = '\0';
}

/* Length of the valid UTF-8 sequence at s (1..4), 0 when none starts there. */
static size_t utf8_len(const unsigned char *s)
{
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xC2 && s[0] <= 0xDF)
        return (s[1] & 0xC0) == 0x80 ? 2 : 0;
    if (s[0] >= 0xE0 && s[0] <= 0xEF) {
        if ((s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80)
            return 0;
        if ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0))
            return 0; /* overlong, or a surrogate */
        return 3;
    }
    if (s[0] >= 0xF0 && s[0] <= 0xF4) {
        if ((s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
            return 0;
        if ((s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90))
            return 0;
        return 4;
    }
    return 0;
}

UNITTEST void metrics_label_value(const char *v, char *buf, size_t len)
{
    const unsigned char *s = (const unsigned char *)(v ? v : "");
    size_t in = 0, out = 0;

    assert(len >= 2 * METRICS_LABEL_MAX + 1);
    (void)len;
    while (s[in] && in < METRICS_LABEL_MAX) {
        size_t n = utf8_len(s + in);
        if (n == 0 || (n == 1 && (s[in] < 0x20 || s[in] == 0x7F))) {
            buf[out++] = s[in] == '\n' ? '\\' : '?';
            if (s[in] == '\n')
                buf[out++] = 'n';
            in++;
            continue;
        }
        if (in + n > METRICS_LABEL_MAX)
            break; /* cut before a character that does not fit whole */
        if (s[in] == '\\' || s[in] == '"')
            buf[out++] = '\\';
        memcpy(buf + out, s + in, n);
        out += n;
        in += n;
    }
    buf[out] = '\0';
}

/* ---- the writer ------------------------------------------------------------------------- */

#ifndef NDEBUG
/* [a-zA-Z_:][a-zA-Z0-9_:]* */
static bool name_ok(const char *s)
{
    if (!s || !*s || (*s >= '0' && *s <= '9'))
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == ':'))
            return false;
    return true;
}
#endif

static void put(struct metrics_writer *w, const char *s)
{
    if (w->rc == APBOT_OK)
        w->rc = apbot_buf_adds(w->out, s);
}

void metrics_init(struct metrics_writer *w, struct apbot_buf *out, enum metrics_format fmt)
{
    memset(w, 0, sizeof(*w));
    w->out = out;
    w->fmt = fmt;
}

void metrics_family(struct metrics_writer *w, const char *name, enum metrics_type type,
                    const char *unit, const char *help)
{
    const char *type_name = "gauge", *suffix = "";
    char line[512];

    assert(name_ok(name) && help && !strchr(help, '\n') && !strchr(help, '\\'));
    assert(!unit || (strlen(name) > strlen(unit) + 1 &&
                     strcmp(name + strlen(name) - strlen(unit), unit) == 0 &&
                     name[strlen(name) - strlen(unit) - 1] == '_'));
    w->family = name;
    w->type = type;
    switch (type) {
    case METRICS_COUNTER:
        type_name = "counter";
        /* 0.0.4 names the family by its sample, OpenMetrics without the suffix */
        suffix = w->fmt == METRICS_PROMETHEUS ? "_total" : "";
        break;
    case METRICS_GAUGE:
        break;
    case METRICS_HISTOGRAM:
        type_name = "histogram";
        break;
    case METRICS_INFO:
        type_name = w->fmt == METRICS_PROMETHEUS ? "gauge" : "info";
        suffix = w->fmt == METRICS_PROMETHEUS ? "_info" : "";
        break;
    }
    snprintf(line, sizeof(line), "# HELP %s%s %s\n# TYPE %s%s %s\n", name, suffix, help, name,
             suffix, type_name);
    put(w, line);
    if (unit && w->fmt == METRICS_OPENMETRICS) {
        snprintf(line, sizeof(line), "# UNIT %s %s\n", name, unit);
        put(w, line);
    }
}

/* name{labels[,extra="value"]} value\n */
static void sample_line(struct metrics_writer *w, const char *suffix, const char *const *labels,
                        const char *extra_name, const char *extra_value, const char *value)
{
    char lv[2 * METRICS_LABEL_MAX + 1];
    bool any = false;

    put(w, w->family);
    put(w, suffix);
    for (size_t i = 0; labels && labels[i]; i += 2) {
        assert(name_ok(labels[i]));
        put(w, any ? "," : "{");
        put(w, labels[i]);
        put(w, "=\"");
        metrics_label_value(labels[i + 1], lv, sizeof(lv));
        put(w, lv);
        put(w, "\"");
        any = true;
    }
    if (extra_name) {
        put(w, any ? "," : "{");
        put(w, extra_name);
        put(w, "=\"");
        put(w, extra_value);
        put(w, "\"");
        any = true;
    }
    if (any)
        put(w, "}");
    put(w, " ");
    put(w, value);
    put(w, "\n");
}

void metrics_sample(struct metrics_writer *w, const char *const *labels, int64_t v, int scale)
{
    char value[32];
    const char *suffix = "";

    assert(w->family && w->type != METRICS_HISTOGRAM);
    if (w->type == METRICS_COUNTER)
        suffix = "_total";
    else if (w->type == METRICS_INFO)
        suffix = "_info";
    metrics_decimal(v, scale, value, sizeof(value));
    sample_line(w, suffix, labels, NULL, NULL, value);
}

void metrics_histogram(struct metrics_writer *w, const char *const *labels, const int64_t *bounds,
                       const int64_t *cumulative, size_t n, int64_t count, int64_t sum, int scale)
{
    char value[32], le[32];

    assert(w->family && w->type == METRICS_HISTOGRAM);
    for (size_t i = 0; i < n; i++) {
        metrics_decimal(bounds[i], scale, le, sizeof(le));
        metrics_decimal(cumulative[i], 0, value, sizeof(value));
        sample_line(w, "_bucket", labels, "le", le, value);
    }
    metrics_decimal(count, 0, value, sizeof(value));
    sample_line(w, "_bucket", labels, "le", "+Inf", value);
    sample_line(w, "_count", labels, NULL, NULL, value);
    metrics_decimal(sum, scale, value, sizeof(value));
    sample_line(w, "_sum", labels, NULL, NULL, value);
}

int metrics_end(struct metrics_writer *w)
{
    if (w->fmt == METRICS_OPENMETRICS)
        put(w, "# EOF\n");
    return w->rc;
}

/* ---- the file --------------------------------------------------------------------------- */

int metrics_write_file(const char *path, const char *data, size_t len, char *err, size_t errlen)
{
    char tmp[4096];
    int fd = -1, rc = APBOT_E_IO;
    size_t done = 0;
    int n = snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());

    if (n < 0 || (size_t)n >= sizeof(tmp))
        return apbot_fail(err, errlen, APBOT_E_IO, "%s: the path is too long", path);
    /* a leftover of this pid (a crash between open and rename) is ours to replace */
    (void)unlink(tmp);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return apbot_fail(err, errlen, APBOT_E_IO, "%s: %s", tmp, strerror(errno));
    if (fchmod(fd, 0644) != 0) { /* whatever the umask: the collector reads it */
        apbot_fail(err, errlen, APBOT_E_IO, "%s: %s", tmp, strerror(errno));
        goto out;
    }
    while (done < len) {
        ssize_t w = write(fd, data + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            apbot_fail(err, errlen, APBOT_E_IO, "%s: %s", tmp, strerror(w < 0 ? errno : EIO));
            goto out;
        }
        done += (size_t)w;
    }
    if (fsync(fd) != 0) {
        apbot_fail(err, errlen, APBOT_E_IO, "%s: %s", tmp, strerror(errno));
        goto out;
    }
    if (close(fd) != 0) {
        fd = -1;
        apbot_fail(err, errlen, APBOT_E_IO, "%s: %s", tmp, strerror(errno));
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        apbot_fail(err, errlen, APBOT_E_IO, "%s: %s", path, strerror(errno));
        goto out;
    }
    /* the rename itself on disk: sync the directory */
    char *copy = apbot_xstrdup(path);
    int dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(copy);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    return APBOT_OK;
out:
    if (fd >= 0)
        close(fd);
    (void)unlink(tmp);
    return rc;
}
