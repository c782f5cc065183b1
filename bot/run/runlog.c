/*
 * runlog.c - what `apbot run` tells its operator: one key=value line per state change and per
 * run event (start, breaker, warnings, stop) on the log stream, and on a terminal a progress
 * line redrawn in place, with warnings and errors scrolled above it as apt or cargo do.
 *
 * Every line is written with one write under the terminal's mutex, so lines of several
 * workers never mix, and values are quoted and escaped only where they must be (most are one
 * plain word: kv writes those without copies, as a line per state change is on the hot path).
 * The one setter's log callback also keeps the worker's counts of its changes.
 *
 * With --log-format json (runner_options.log_json) each line is one JSON object with the same
 * fields, in the same order ({"time":...,"level":...,"item":...}), for journald and log
 * shippers: a value is the text the key=value line would show (controls and bytes that are
 * not UTF-8 written as \xNN), as a JSON string.
 */
#include "run/runner-int.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apbot/clock.h"
#include "apbot/machine.h"
#include "apbot/text.h"
#include "base/logline.h"
#include "base/unittest.h"
#include "queue/transition.h"
#include "run/limiter.h"
#include "run/runmetrics.h"

/* Draws the progress line (under term_mu). */
static void progress_show(struct runner *r)
{
    if (r->progress[0]) {
        fprintf(stderr, "\r\033[K%s", r->progress);
        fflush(stderr);
    }
}

/* Prints a warning or an error above the progress line, as apt or cargo do. */
static void term_print(struct runner *r, const char *level, const char *what, const char *detail)
{
    if (!r->opt->progress)
        return;
    char *w = text_escape(what, 300, 0);
    char *d = text_escape(detail ? detail : "", 600, 0);
    pthread_mutex_lock(&r->term_mu);
    fprintf(stderr, "\r\033[K%s: %s%s%s\n", level, w, *d ? ": " : "", d);
    progress_show(r);
    pthread_mutex_unlock(&r->term_mu);
    free(w);
    free(d);
}

static void log_line(struct runner *r, const char *line)
{
    FILE *f = r->opt->log;
    if (!f)
        return;
    /* One write per line (stderr is unbuffered): a line never mixes with another's. */
    char buf[2048];
    int n = snprintf(buf, sizeof(buf), line[0] == '{' ? "%s}\n" : "%s\n", line);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof(buf)) { /* cut: the lines built here are shorter */
        n = (int)sizeof(buf) - 1;
        buf[n - 1] = '\n';
    }
    pthread_mutex_lock(&r->term_mu);
    fwrite(buf, 1, (size_t)n, f);
    fflush(f);
    pthread_mutex_unlock(&r->term_mu);
}

/* A run-level message (start, breaker, stop, warnings) as one key=value line; warnings and
 * errors also appear above the progress line on a terminal. */
void runlog_msg(struct runner *r, const char *level, const char *what, const char *detail)
{
    char line[1024];
    logline_start(line, sizeof(line), level, r->opt->log_json);
    logline_kv(line, sizeof(line), "msg", what);
    if (detail)
        logline_kv(line, sizeof(line), "detail", detail);
    log_line(r, line);
    if (strcmp(level, "info") != 0)
        term_print(r, level, what, detail);
}

/* The one setter's log callback: one line per state change. */
void runlog_transition(void *ctx, const struct transition_log *l)
{
    struct worker *w = ctx;
    char line[1536], id[24], worker[16];
    logline_start(line, sizeof(line), "info", w && w->r->opt->log_json);
    snprintf(id, sizeof(id), "%" PRId64, l->item->id);
    logline_kv(line, sizeof(line), "item", id);
    logline_kv(line, sizeof(line), "key", l->item->key);
    logline_kv(line, sizeof(line), "from", machine_state_name(l->from));
    logline_kv(line, sizeof(line), "to", machine_state_name(l->to));
    logline_kv(line, sizeof(line), "event", machine_event_name(l->event));
    if (l->doc && *l->doc)
        logline_kv(line, sizeof(line), "doc", l->doc);
    if (l->reason && *l->reason)
        logline_kv(line, sizeof(line), "reason", l->reason);
    else if (l->detail && *l->detail)
        logline_kv(line, sizeof(line), "detail", l->detail);
    if (w) {
        snprintf(worker, sizeof(worker), "%d", w->index);
        logline_kv(line, sizeof(line), "worker", worker);
        w->stats.transitions++;
        runmetrics_finished(w->r->opt->metrics, l->to);
        switch (l->to) {
        case MACHINE_COMPLETED:
            w->stats.completed++;
            break;
        case MACHINE_BUSINESS_EXCEPTION:
            w->stats.business_exception++;
            break;
        case MACHINE_MANUAL_REVIEW:
            w->stats.manual_review++;
            break;
        case MACHINE_NEW:
        case MACHINE_CHECKING:
        case MACHINE_POSTING:
        case MACHINE_RECONCILING:
        case MACHINE_FINISHING:
        case MACHINE_STATE__COUNT:
        case MACHINE_STATE_INVALID:
            break;
        }
    } else {
        logline_kv(line, sizeof(line), "actor", l->actor);
    }
    if (w)
        log_line(w->r, line);
}

/* The recovery's log callback (the calling thread). */
void runlog_recovery(void *ctx, const struct transition_log *l)
{
    struct runner *r = ctx;
    char msg[256];
    snprintf(msg, sizeof(msg), "item %" PRId64 " %s -> %s (its runner vanished)", l->item->id,
             machine_state_name(l->from), machine_state_name(l->to));
    runlog_msg(r, "warn", "item taken over", msg);
}

/* Redraws the progress line: what is settled, what is pending, the sessions at work. */
void runlog_progress(struct runner *r, const struct store_counts *c, int64_t elapsed_ms, bool final)
{
    int64_t pending = pending_of(c);
    int64_t done = c->total - pending;
    int64_t secs = elapsed_ms / 1000;
    pthread_mutex_lock(&r->term_mu);
    snprintf(r->progress, sizeof(r->progress),
             "apbot run %" PRId64 "/%" PRId64 " settled | completed %" PRId64
             " | exception %" PRId64 " | review %" PRId64 " | pending %" PRId64
             " (reconciling %" PRId64 ") | sessions %d | %d:%02d",
             done, c->total, c->by_state[MACHINE_COMPLETED],
             c->by_state[MACHINE_BUSINESS_EXCEPTION], c->by_state[MACHINE_MANUAL_REVIEW], pending,
             c->by_state[MACHINE_RECONCILING], limiter_limit(r->limiter), (int)(secs / 60),
             (int)(secs % 60));
    progress_show(r);
    if (final) {
        fputc('\n', stderr);
        r->progress[0] = '\0';
    }
    fflush(stderr);
    pthread_mutex_unlock(&r->term_mu);
}

/* Reports a change of the adaptive limit (once per change). */
void runlog_limit(struct runner *r)
{
    int old, now;
    double q;
    const char *why = "";
    if (!limiter_changed(r->limiter, &old, &now, &q, &why))
        return;
    char msg[200];
    snprintf(msg, sizeof(msg), "sessions at work %d -> %d (latency %.2fx the uncongested: %s)", old,
             now, q, why);
    runlog_msg(r, "info", "concurrency limit", msg);
}
