/*
 * e2e.h - the harness of the end-to-end tests: a temp directory with a fresh queue database,
 * the simulated ERP started in-process on an ephemeral loopback port with either user
 * interface (acme with flows/acme.xml, classic with flows/classic.xml), invoices of one or
 * several lines enqueued straight through the store, and runner options with short policy
 * numbers so that a test runs in seconds. Setup failures abort with a message (they are not
 * what a test checks).
 */
#ifndef APBOT_TESTS_E2E_H
#define APBOT_TESTS_E2E_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <signal.h>
#include <sys/types.h>

#include "apbot/runner.h"
#include "sim.h"

struct e2e {
    char dir[256];  /* mktemp -d */
    char db[320];   /* dir/queue.db */
    char flow[320]; /* flows/<ui>.xml, or a copy written by e2e_flow_copy */
    char url[64];   /* http://127.0.0.1:PORT */
    struct sim *sim;
    unsigned short port;
    enum sim_ui ui; /* the simulator's user interface (e2e_test_ui() unless e2e_start_ui) */
    struct runner_options opt; /* short numbers; tests may change any field */
    struct runner_stats stats; /* of the last e2e_run */
    int n_items;               /* enqueued by e2e_add / e2e_add_many */
    const char *vendor_name;   /* of the invoices enqueued from now on (NULL: "E2E Vendor") */
    bool lines_gross; /* the flow books lines gross: e2e_assert_invariants holds each booked
                       * line to net + tax (tests/helpers/invariants.h), not to its net */
};

/*
 * The user interface the end-to-end tests run against: APBOT_TEST_UI ("acme", the default, or
 * "classic"); ctest runs the UI-neutral tests once per UI.
 */
enum sim_ui e2e_test_ui(void);

/*
 * Starts a test on e2e_test_ui(): temp dir, empty queue, simulator with
 * fixtures/scenarios/<scenario>.scn (NULL: built-in defaults) plus scenario_text (may be NULL),
 * admin on, the given seed.
 * Sets APBOT_ERP_USER/APBOT_ERP_PASSWORD to the simulator's clerk. Test timings: settle
 * 2500 ms, timeout 1500 ms, backoff 50..400 ms, poll 50 ms, 2 sessions, max 90 s.
 */
void e2e_start(struct e2e *e, const char *scenario, const char *scenario_text, uint64_t seed);
/*
 * e2e_start with the given user interface: SIM_UI_ACME is e2e_start; SIM_UI_CLASSIC starts the
 * classic UI and points e->flow (and e->opt.flow_path) at flows/classic.xml.
 */
void e2e_start_ui(struct e2e *e, enum sim_ui ui, const char *scenario, const char *scenario_text,
                  uint64_t seed);
/*
 * e2e_start with the simulator speaking HTTPS only (cert_pem/key_pem as in sim_options, e.g.
 * from sim_tls_selfsigned): e->url is https://127.0.0.1:PORT. The certificate is also written
 * to <dir>/erp-cert.pem, whose path goes into ret_cert_file (may be NULL), for a flow's
 * <tls ca-file>. Admin calls then need the simc_*_tls helpers.
 */
void e2e_start_tls(struct e2e *e, const char *scenario, const char *scenario_text, uint64_t seed,
                   const char *cert_pem, const char *key_pem, char *ret_cert_file, size_t len);
/* Stops the simulator, removes the temp dir. */
void e2e_stop(struct e2e *e);

/* One line of a multi-line invoice (e2e_add_lines); amounts in minor units. */
struct e2e_line {
    const char *gl;          /* G/L account, e.g. "5700" (NULL = "6000") */
    int64_t net;             /* line net */
    int64_t tax;             /* line tax (0 = none) */
    const char *description; /* NULL = "line N" */
};

/* An invoice to enqueue: one line of `amount` (minor units of currency) on `gl`, no tax. */
struct e2e_invoice {
    const char *vendor;   /* "100001" */
    const char *number;   /* vendor invoice number */
    const char *date;     /* "2026-11-03" */
    const char *currency; /* "EUR" */
    int64_t amount;       /* payable = net, no tax */
    const char *gl;       /* "6000" */
    bool credit_note;
    const char *description; /* first line's text (the ERP's memo); NULL = a fixed text */
};
/* Enqueues one invoice; writes its key into ret_key (25 bytes, may be NULL). */
void e2e_add(struct e2e *e, const struct e2e_invoice *inv, char *ret_key);
/* Enqueues a multi-line invoice: the head's vendor, number, date, currency and credit_note with
 * `lines` (n_lines >= 1) instead of its amount, gl and description; the payable is the sum of
 * the lines' net and tax. Writes its key into ret_key (may be NULL). */
void e2e_add_lines(struct e2e *e, const struct e2e_invoice *head, const struct e2e_line *lines,
                   size_t n_lines, char *ret_key);
/* Enqueues every invoice the file holds (CSV, UBL, CII, as `apbot enqueue` reads them, without
 * a vendor map); a refused one or a file error aborts the test. Writes the keys in file order
 * into ret_keys (max of them, 25 bytes each; may be NULL). Returns how many were enqueued. */
int e2e_add_file(struct e2e *e, const char *path, char (*ret_keys)[25], int max);
/* Enqueues n valid invoices "<prefix>-<i>" over vendors 100001..100040, EUR and a few other
 * currencies, dates in November 2026. */
void e2e_add_many(struct e2e *e, const char *prefix, int n);
/* As e2e_add_many, but invoice i has 1 + i % max_lines lines on different G/L accounts, each
 * with tax (19% rounded down), so that lines, tax and total must all reach the ERP. */
void e2e_add_many_lines(struct e2e *e, const char *prefix, int n, int max_lines);

/* Runs the runner once with e->opt (until empty unless the test changed it). Returns its
 * result; e->stats holds the stats. */
int e2e_run(struct e2e *e);

/*
 * The common shape of a fault test: starts on the calm scenario plus scenario_text (seed 11),
 * queues n invoices "<prefix>-<i>", forces `count` of `fault` (NULL: none) and runs until
 * the queue is empty. A run that fails or stops early aborts the test with its message.
 */
void e2e_run_with_fault(struct e2e *e, const char *scenario_text, const char *prefix, int n,
                        const char *fault, int count);

/* Number of items in state (MACHINE_STATE_INVALID = all). */
int e2e_count(struct e2e *e, int state);
/* Number of audit events named `event` (e.g. "unknown") over all items. */
int e2e_count_events(struct e2e *e, const char *event);
/* Largest `posts` counter over all items. */
int e2e_max_posts(struct e2e *e);
/* Number of evidence rows over all items. */
int e2e_count_evidence(struct e2e *e);
/* True when some evidence excerpt or URL contains needle. */
bool e2e_evidence_contains(struct e2e *e, const char *needle);

/*
 * Writes a copy of the current flow (flows/acme.xml at first) into the temp dir with every
 * occurrence of `from` replaced by `to`, and points e->flow at it. Calls chain.
 */
void e2e_flow_copy(struct e2e *e, const char *from, const char *to);

/* Absolute path of a source file (APBOT_SRC/rel) into buf. */
void e2e_src_path(char *buf, size_t len, const char *rel);

/* ---- runs in the background, child processes, waiting ------------------------------------ */

/* CLOCK_MONOTONIC in ms (test timing only; never the wall clock). */
int64_t e2e_mono_ms(void);
/* Sleeps ms milliseconds. */
void e2e_nap_ms(long ms);

/* A runner_run in a thread of its own, so the test can act while it runs. */
struct e2e_bg {
    struct e2e *e;
    pthread_t thread;
    volatile sig_atomic_t cancel; /* the run's cancel flag (e->opt.cancel points here) */
    int rc;                       /* runner_run's result, after e2e_run_join */
    bool started;
};
/* Starts runner_run(&e->opt, &e->stats) in a thread, with e->opt.cancel = &bg->cancel. The
 * test must not change e->opt or read e->stats until e2e_run_join. */
void e2e_run_bg(struct e2e *e, struct e2e_bg *bg);
/* Raises the cancel flag when `cancel`, joins the thread and returns runner_run's result;
 * e->stats then holds the run's stats and e->opt.cancel is NULL again. */
int e2e_run_join(struct e2e_bg *bg, bool cancel);

/* Number of items in a terminal state (completed, business exception, manual review). */
int e2e_count_terminal(struct e2e *e);
/* Polls (every 20 ms) until at least `n` items are in `state` (MACHINE_STATE_INVALID: in a
 * terminal state). Returns true when they are, false after timeout_ms. */
bool e2e_wait_count(struct e2e *e, int state, int n, long timeout_ms);

/*
 * Runs the apbot executable (APBOT_BIN) with `--db <queue> <args...>` (args NULL-terminated,
 * at most 30) in a child process, stdout and stderr to <dir>/<log_name>. Returns its pid.
 */
pid_t e2e_spawn_apbot(struct e2e *e, const char *log_name, const char *const *args);
/* Waits for a child to exit by itself (at most timeout_ms, then SIGKILL and -1). Returns its
 * exit code, or 128 + the signal that ended it. */
int e2e_wait_exit(pid_t pid, long timeout_ms);

struct store_item;
/* Checks the invariants on the simulator's ground truth (tests/helpers/invariants.h; no
 * pending item unless allow_pending) and aborts the test, after printing the report, when
 * one fails. */
void e2e_assert_invariants(struct e2e *e, bool allow_pending);
/* The queue's item for key (the caller frees it with store_item_done); aborts when absent. */
void e2e_get_item(struct e2e *e, const char *key, struct store_item *ret);
/* Reads <dir>/<log_name> into a malloc'd string ("" when missing; caller frees). */
char *e2e_read_file(struct e2e *e, const char *log_name);

#endif
