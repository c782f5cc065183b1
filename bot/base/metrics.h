/*
 * metrics.h - figures written in the Prometheus exposition formats, and the textfile
 * collector's file written whole.
 *
 * A writer appends metric families to a bounded buffer in one of two text formats: OpenMetrics
 * 1.0 (`application/openmetrics-text; version=1.0.0`: counters named without `_total` in their
 * TYPE line, a UNIT line, `# EOF` at the end) or the Prometheus text format 0.0.4 (`text/plain;
 * version=0.0.4`, which the node exporter's textfile collector reads). Values are integers or
 * exact decimals written from integers (milliseconds as seconds, minor units as the currency's
 * major unit): no floating point. Label values are cut, escaped and stripped of control
 * characters here, so a value can never break a line; names are the caller's constants and
 * checked with assert(). The writer knows nothing of what it writes (run/runmetrics.c and
 * office/serve_metrics.c do). The first error sticks (metrics_end returns it): the caller
 * writes a whole exposition and checks once.
 */
#ifndef APBOT_BASE_METRICS_H
#define APBOT_BASE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "apbot/buf.h"
#include "apbot/error.h"

#define METRICS_LABEL_MAX 96 /* bytes of a label value at most (cut at a character) */
#define METRICS_OPENMETRICS_TYPE "application/openmetrics-text; version=1.0.0; charset=utf-8"
#define METRICS_PROMETHEUS_TYPE "text/plain; version=0.0.4; charset=utf-8"

enum metrics_format {
    METRICS_OPENMETRICS = 0, /* OpenMetrics 1.0 text */
    METRICS_PROMETHEUS,      /* Prometheus text format 0.0.4 */
};

enum metrics_type {
    METRICS_COUNTER = 0, /* family "x", samples "x_total" */
    METRICS_GAUGE,
    METRICS_HISTOGRAM, /* samples "x_bucket", "x_count", "x_sum" */
    METRICS_INFO,      /* family "x", one sample "x_info" of value 1 (a gauge in 0.0.4) */
};

/* A writer on the stack: fields hands-off. */
struct metrics_writer {
    struct apbot_buf *out;
    enum metrics_format fmt;
    int rc;             /* the first error */
    const char *family; /* the family being written */
    enum metrics_type type;
};

/* Starts writing into out (appended to) in fmt. Cannot fail. */
void metrics_init(struct metrics_writer *w, struct apbot_buf *out, enum metrics_format fmt);

/*
 * Starts a family: its name (without `_total` or `_info`), type, unit (NULL for none; the name
 * must then end in "_" unit, as OpenMetrics requires) and one line of help (plain ASCII).
 */
void metrics_family(struct metrics_writer *w, const char *name, enum metrics_type type,
                    const char *unit, const char *help);

/*
 * One sample of the current family (a counter's or an info's suffix is added). labels: name,
 * value pairs ending with a NULL name (NULL for none). The value is v / 10^scale written
 * exactly ("12"; 12 ms, scale 3: "0.012"; 150 cents, scale 2: "1.5"); scale 0..18.
 */
void metrics_sample(struct metrics_writer *w, const char *const *labels, int64_t v, int scale);

/*
 * One histogram of the current family: n upper bounds bounds[0..n-1] (ascending, in units of
 * 10^-scale, e.g. milliseconds with scale 3), cumulative[i] the observations <= bounds[i],
 * count all of them (the +Inf bucket) and sum their total in the same units.
 */
void metrics_histogram(struct metrics_writer *w, const char *const *labels, const int64_t *bounds,
                       const int64_t *cumulative, size_t n, int64_t count, int64_t sum, int scale);

/* Ends the exposition (OpenMetrics: "# EOF"). Returns the first error of the writer:
 * APBOT_E_LIMIT when the buffer's maximum was reached. */
int metrics_end(struct metrics_writer *w) APBOT_MUST_USE;

/*
 * Writes len bytes of data to path as a whole: into a new file beside it (PATH.tmp.PID,
 * O_EXCL|O_NOFOLLOW, mode 0644: the node exporter reads it as another user, and it holds no
 * secret), synced, then renamed over path and the directory synced. A reader sees the old file
 * or the new one, never half of one, and a temporary name never ends in ".prom", so the
 * textfile collector never reads one. APBOT_E_IO with the file and why in err.
 */
int metrics_write_file(const char *path, const char *data, size_t len, char *err,
                       size_t errlen) APBOT_MUST_USE;

#ifdef APBOT_UNITTEST /* static in the product (base/unittest.h) */
/* Writes v / 10^scale exactly into buf (len >= 32): "-1.5" for (-15, 1), "0.005" for (5, 3);
 * trailing zeros of the fraction dropped, one kept ("1.0" for (1000, 3), as Prometheus's
 * clients write seconds); scale 0 an integer. */
void metrics_decimal(int64_t v, int scale, char *buf, size_t len);
/* A label value as written between the quotes: cut to METRICS_LABEL_MAX bytes at a
 * character, control characters and invalid UTF-8 as '?', backslash, quote and line break
 * escaped. buf of len >= 2 * METRICS_LABEL_MAX + 1. */
void metrics_label_value(const char *v, char *buf, size_t len);
#endif

#endif
