/*
 * e2e.c - the end-to-end test harness: temp dir, queue, in-process simulator, runner options
 * with test-sized numbers, and small queries over the queue for assertions. No main here:
 * every helper source is linked into every test executable.
 */
#include "e2e.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "apbot/invoice.h"
#include "apbot/machine.h"
#include "apbot/money.h"
#include "apbot/reader.h"
#include "apbot/store.h"
#include "web/http.h"
#include "invariants.h"
#include "sim.h"
#include "sim_client.h"

static void e2e_die(const char *what, const char *detail)
{
    fprintf(stderr, "e2e harness: %s: %s\n", what, detail ? detail : "");
    abort();
}

void e2e_src_path(char *buf, size_t len, const char *rel)
{
    const char *src = getenv("APBOT_SRC");
    snprintf(buf, len, "%s/%s", src && *src ? src : ".", rel);
}

enum sim_ui e2e_test_ui(void)
{
    enum sim_ui ui = SIM_UI_ACME;
    const char *name = getenv("APBOT_TEST_UI");
    if (name && *name && sim_ui_from_name(name, &ui) != 0)
        e2e_die("APBOT_TEST_UI names no simulator UI", name);
    return ui;
}

void e2e_start(struct e2e *e, const char *scenario, const char *scenario_text, uint64_t seed)
{
    e2e_start_ui(e, e2e_test_ui(), scenario, scenario_text, seed);
}

void e2e_start_ui(struct e2e *e, enum sim_ui ui, const char *scenario, const char *scenario_text,
                  uint64_t seed)
{
    char err[APBOT_ERR_LEN];
    char scn[320];
    memset(e, 0, sizeof(*e));
    e->ui = ui;
    const char *tmp = getenv("TMPDIR");
    snprintf(e->dir, sizeof(e->dir), "%s/apbot-e2e-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(e->dir))
        e2e_die("mkdtemp", e->dir);
    snprintf(e->db, sizeof(e->db), "%s/queue.db", e->dir);
    e2e_src_path(e->flow, sizeof(e->flow),
                 ui == SIM_UI_CLASSIC ? "flows/classic.xml"
                 : ui == SIM_UI_SPA   ? "flows/spa.xml"
                                      : "flows/acme.xml");

    struct store *st = NULL;
    if (store_open(e->db, &st, err, sizeof(err)) != APBOT_OK)
        e2e_die("store_open", err);
    store_close(st);

    if (http_global_init() != APBOT_OK)
        e2e_die("http_global_init", NULL);

    struct sim_options so;
    memset(&so, 0, sizeof(so));
    if (scenario) {
        char rel[128];
        snprintf(rel, sizeof(rel), "fixtures/scenarios/%s.scn", scenario);
        e2e_src_path(scn, sizeof(scn), rel);
        so.scenario_path = scn;
    }
    so.scenario_text = scenario_text;
    so.seed = seed;
    so.admin = true;
    so.ui = ui;
    if (sim_start(&so, &e->sim, err, sizeof(err)) != 0)
        e2e_die("sim_start", err);
    e->port = sim_port(e->sim);
    snprintf(e->url, sizeof(e->url), "http://127.0.0.1:%u", (unsigned)e->port);

    setenv("APBOT_ERP_USER", "clerk", 1);
    setenv("APBOT_ERP_PASSWORD", "acme-demo", 1);

    struct runner_options *o = &e->opt;
    o->flow_path = e->flow;
    o->erp_url = e->url;
    o->db_path = e->db;
    o->concurrency = 2;
    o->until_empty = true;
    o->max_seconds = 90;
    o->owner = NULL;
    o->log = getenv("E2E_LOG") ? stderr : NULL;
    o->progress = false;
    o->settle_ms = 2500;
    o->timeout_ms = 1500;
    o->connect_timeout_ms = 1000;
    o->backoff_base_ms = 50;
    o->backoff_cap_ms = 400;
    o->poll_ms = 50;
    o->seed = seed ? seed : 1;
}

void e2e_start_tls(struct e2e *e, const char *scenario, const char *scenario_text, uint64_t seed,
                   const char *cert_pem, const char *key_pem, char *ret_cert_file, size_t len)
{
    char err[APBOT_ERR_LEN];
    char scn[320];
    char path[400];
    /* Everything as e2e_start sets it up, then the plain simulator is swapped for one with
     * the same options over HTTPS. */
    e2e_start(e, scenario, scenario_text, seed);
    sim_stop(e->sim);
    e->sim = NULL;

    struct sim_options so;
    memset(&so, 0, sizeof(so));
    if (scenario) {
        char rel[128];
        snprintf(rel, sizeof(rel), "fixtures/scenarios/%s.scn", scenario);
        e2e_src_path(scn, sizeof(scn), rel);
        so.scenario_path = scn;
    }
    so.scenario_text = scenario_text;
    so.seed = seed;
    so.admin = true;
    so.tls_cert_pem = cert_pem;
    so.tls_key_pem = key_pem;
    if (sim_start(&so, &e->sim, err, sizeof(err)) != 0)
        e2e_die("sim_start (https)", err);
    e->port = sim_port(e->sim);
    snprintf(e->url, sizeof(e->url), "https://127.0.0.1:%u", (unsigned)e->port);
    e->opt.erp_url = e->url;

    snprintf(path, sizeof(path), "%s/erp-cert.pem", e->dir);
    FILE *f = fopen(path, "wb");
    if (!f)
        e2e_die("create", path);
    bool bad = fputs(cert_pem, f) < 0;
    if (fclose(f) != 0 || bad)
        e2e_die("write", path);
    if (ret_cert_file && len)
        snprintf(ret_cert_file, len, "%s", path);
}

static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    for (int i = 0; i < 10000 && (de = readdir(d)) != NULL; i++) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char p[600];
        snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
        if (unlink(p) != 0)
            rm_tree(p);
    }
    closedir(d);
    rmdir(dir);
}

void e2e_stop(struct e2e *e)
{
    sim_stop(e->sim);
    e->sim = NULL;
    http_global_cleanup();
    if (e->dir[0] && !getenv("E2E_KEEP"))
        rm_tree(e->dir);
}

static void fill_invoice(struct invoice *inv, const struct e2e_invoice *in,
                         const struct e2e_line *lines, size_t n_lines, const char *vendor_name)
{
    invoice_init(inv);
    invoice_set_str(&inv->vendor_id, in->vendor);
    invoice_set_str(&inv->vendor_name, vendor_name ? vendor_name : "E2E Vendor");
    invoice_set_str(&inv->invoice_number, in->number);
    inv->doc_type = in->credit_note ? INVOICE_DOC_CREDIT_NOTE : INVOICE_DOC_INVOICE;
    snprintf(inv->issue_date, sizeof(inv->issue_date), "%s", in->date ? in->date : "2026-11-03");
    snprintf(inv->currency, sizeof(inv->currency), "%s", in->currency ? in->currency : "EUR");
    inv->exponent = money_exponent(inv->currency);
    if (lines && n_lines) {
        inv->net_total = inv->tax_total = 0;
        for (size_t i = 0; i < n_lines; i++) {
            const struct e2e_line *l = &lines[i];
            char text[32];
            snprintf(text, sizeof(text), "line %zu", i + 1);
            struct invoice_line line;
            memset(&line, 0, sizeof(line));
            line.description = (char *)(l->description ? l->description : text);
            line.gl_account = (char *)(l->gl ? l->gl : "6000");
            line.net = l->net;
            line.tax = l->tax;
            invoice_add_line(inv, &line);
            inv->net_total += l->net;
            inv->tax_total += l->tax;
        }
        inv->payable = inv->net_total + inv->tax_total;
        return;
    }
    inv->net_total = in->amount;
    inv->tax_total = 0;
    inv->payable = in->amount;
    struct invoice_line line;
    memset(&line, 0, sizeof(line));
    line.description = (char *)(in->description ? in->description : "end-to-end test");
    line.gl_account = (char *)(in->gl ? in->gl : "6000");
    line.net = in->amount;
    invoice_add_line(inv, &line);
}

static void enqueue_one(struct e2e *e, struct store *st, const struct e2e_invoice *in,
                        const struct e2e_line *lines, size_t n_lines, char *ret_key)
{
    char err[APBOT_ERR_LEN];
    struct invoice inv;
    fill_invoice(&inv, in, lines, n_lines, e->vendor_name);
    enum store_enqueue_result res;
    int64_t id = 0;
    if (store_enqueue(st, &inv, "e2e", NULL, &res, &id, err, sizeof(err)) != APBOT_OK)
        e2e_die("store_enqueue", err);
    if (res != STORE_ENQ_QUEUED)
        e2e_die("store_enqueue", "not queued (duplicate test invoice?)");
    if (ret_key) {
        char key[INVOICE_KEY_LEN + 1];
        if (invoice_identity_key(&inv, key) != APBOT_OK)
            e2e_die("invoice_identity_key", NULL);
        memcpy(ret_key, key, sizeof(key));
    }
    invoice_done(&inv);
    e->n_items++;
}

void e2e_add(struct e2e *e, const struct e2e_invoice *in, char *ret_key)
{
    char err[APBOT_ERR_LEN];
    struct store *st = NULL;
    if (store_open(e->db, &st, err, sizeof(err)) != APBOT_OK)
        e2e_die("store_open", err);
    enqueue_one(e, st, in, NULL, 0, ret_key);
    store_close(st);
}

void e2e_add_lines(struct e2e *e, const struct e2e_invoice *head, const struct e2e_line *lines,
                   size_t n_lines, char *ret_key)
{
    char err[APBOT_ERR_LEN];
    struct store *st = NULL;
    if (!lines || n_lines == 0)
        e2e_die("e2e_add_lines", "no lines");
    if (store_open(e->db, &st, err, sizeof(err)) != APBOT_OK)
        e2e_die("store_open", err);
    enqueue_one(e, st, head, lines, n_lines, ret_key);
    store_close(st);
}

struct file_sink {
    struct e2e *e;
    struct store *st;
    char (*keys)[25];
    int max, n;
};

static int file_accept(void *ctx, const struct invoice *inv, const char *where)
{
    struct file_sink *fs = ctx;
    char err[APBOT_ERR_LEN];
    enum store_enqueue_result res;
    int64_t id = 0;
    if (store_enqueue(fs->st, inv, "e2e", NULL, &res, &id, err, sizeof(err)) != APBOT_OK)
        e2e_die("store_enqueue", err);
    if (res != STORE_ENQ_QUEUED)
        e2e_die(where, "not queued (duplicate test invoice?)");
    if (fs->keys && fs->n < fs->max && invoice_identity_key(inv, fs->keys[fs->n]) != APBOT_OK)
        e2e_die("invoice_identity_key", where);
    fs->n++;
    fs->e->n_items++;
    return 0;
}

static void file_refuse(void *ctx, const char *where, const char *reason)
{
    (void)ctx;
    fprintf(stderr, "%s: %s\n", where, reason);
    e2e_die("e2e_add_file", "an invoice was refused");
}

int e2e_add_file(struct e2e *e, const char *path, char (*ret_keys)[25], int max)
{
    char err[APBOT_ERR_LEN];
    struct file_sink fs = {.e = e, .keys = ret_keys, .max = max};
    if (store_open(e->db, &fs.st, err, sizeof(err)) != APBOT_OK)
        e2e_die("store_open", err);
    struct invoice_sink sink = {file_accept, file_refuse, &fs};
    if (reader_read_file(path, NULL, &sink, err, sizeof(err)) != APBOT_OK)
        e2e_die(path, err);
    store_close(fs.st);
    return fs.n;
}

void e2e_add_many(struct e2e *e, const char *prefix, int n)
{
    e2e_add_many_lines(e, prefix, n, 0);
}

void e2e_add_many_lines(struct e2e *e, const char *prefix, int n, int max_lines)
{
    static const char *const accounts[] = {"5700", "6000", "4400", "6010", "5400", "4000"};
    static const char *const currencies[] = {"EUR", "EUR", "EUR", "USD", "EUR", "GBP",
                                             "EUR", "JPY", "EUR", "KWD", "EUR", "CHF"};
    char err[APBOT_ERR_LEN];
    struct store *st = NULL;
    if (store_open(e->db, &st, err, sizeof(err)) != APBOT_OK)
        e2e_die("store_open", err);
    if (store_begin(st, err, sizeof(err)) != APBOT_OK)
        e2e_die("store_begin", err);
    for (int i = 0; i < n; i++) {
        char vendor[16], number[64], date[16];
        snprintf(vendor, sizeof(vendor), "%d", 100001 + i % 40);
        snprintf(number, sizeof(number), "%s-%d", prefix, i + 1);
        snprintf(date, sizeof(date), "2026-11-%02d", 1 + i % 28);
        struct e2e_invoice in = {
            .vendor = vendor,
            .number = number,
            .date = date,
            .currency = currencies[i % 12],
            .amount = 1000 + (int64_t)i * 137,
            .gl = "6000",
            .credit_note = i % 17 == 16,
        };
        struct e2e_line lines[8];
        size_t k = 0;
        if (max_lines > 0) {
            k = 1 + (size_t)i % (size_t)(max_lines < 8 ? max_lines : 8);
            for (size_t j = 0; j < k; j++) {
                lines[j].gl = accounts[((size_t)i + j) % 6];
                lines[j].net = 500 + (int64_t)i * 37 + (int64_t)j * 211;
                lines[j].tax = lines[j].net * 19 / 100;
                lines[j].description = NULL;
            }
        }
        enqueue_one(e, st, &in, k ? lines : NULL, k, NULL);
    }
    if (store_commit(st, err, sizeof(err)) != APBOT_OK)
        e2e_die("store_commit", err);
    store_close(st);
}

int e2e_run(struct e2e *e)
{
    return runner_run(&e->opt, &e->stats);
}

void e2e_run_with_fault(struct e2e *e, const char *scenario_text, const char *prefix, int n,
                        const char *fault, int count)
{
    e2e_start(e, "calm", scenario_text, 11);
    /* A fault drawn at random on every request (15-20%) fails an attempt of ~5 requests about
     * half the time, and the flow's budget of 8 attempts in a row then runs out for one item
     * in a few runs of a hundred (seen: the item ends in manual review, rightly). What these
     * runs test is what the faults do to bookings, not that budget: 40 makes it negligible. */
    e->opt.max_attempts = 40;
    e2e_add_many(e, prefix, n);
    if (fault && count > 0 && simc_fault(e->port, fault, count) != 0)
        e2e_die("simc_fault", fault);
    if (e2e_run(e) != APBOT_OK)
        e2e_die("runner_run", e->stats.message);
    if (e->stats.stop != RUNNER_STOP_EMPTY)
        e2e_die("runner_run", "stopped before the queue was empty");
}

/* ---- queries ---------------------------------------------------------------------------- */

struct walk {
    struct store *st;
    int state;
    const char *needle;
    int count;
    bool found;
};

static int count_item(void *ctx, const struct store_item *it)
{
    struct walk *w = ctx;
    if (w->state < 0 || (int)it->state == w->state)
        w->count++;
    return 0;
}

int e2e_count(struct e2e *e, int state)
{
    char err[APBOT_ERR_LEN];
    struct store *st = NULL;
    if (store_open(e->db, &st, err, sizeof(err)) != APBOT_OK)
        e2e_die("store_open", err);
    struct walk w = {.state = state < 0 ? -1 : state};
    if (store_each(st, MACHINE_STATE_INVALID, count_item, &w, err, sizeof(err)) != APBOT_OK)
        e2e_die("store_each", err);
    store_close(st);
    return w.count;
}

static int count_event(void *ctx, const struct store_event_row *row)
{
    struct walk *w = ctx;
    if (row->event && strcmp(row->event, w->needle) == 0)
        w->count++;
    return 0;
}

static int count_evidence(void *ctx, const struct store_evidence_row *row)
{
    struct walk *w = ctx;
    w->count++;
    if (w->needle && ((row->ev.excerpt && strstr(row->ev.excerpt, w->needle)) ||
                      (row->ev.url && strstr(row->ev.url, w->needle))))
        w->found = true;
    return 0;
}

struct per_item {
    struct walk *w;
    int mode; /* 0 events, 1 evidence, 2 max posts */
};

static int each_item(void *ctx, const struct store_item *it)
{
    struct per_item *p = ctx;
    char err[APBOT_ERR_LEN];
    switch (p->mode) {
    case 0:
        if (store_each_event(p->w->st, it->id, count_event, p->w, err, sizeof(err)) != APBOT_OK)
            e2e_die("store_each_event", err);
        break;
    case 1:
        if (store_each_evidence(p->w->st, it->id, count_evidence, p->w, err, sizeof(err)) !=
            APBOT_OK)
            e2e_die("store_each_evidence", err);
        break;
    default:
        if (it->counters.posts > p->w->count)
            p->w->count = it->counters.posts;
        break;
    }
    return 0;
}

static struct walk walk_items(struct e2e *e, int mode, const char *needle)
{
    char err[APBOT_ERR_LEN];
    struct walk w = {.needle = needle};
    if (store_open(e->db, &w.st, err, sizeof(err)) != APBOT_OK)
        e2e_die("store_open", err);
    struct per_item p = {.w = &w, .mode = mode};
    if (store_each(w.st, MACHINE_STATE_INVALID, each_item, &p, err, sizeof(err)) != APBOT_OK)
        e2e_die("store_each", err);
    store_close(w.st);
    w.st = NULL;
    return w;
}

int e2e_count_events(struct e2e *e, const char *event)
{
    return walk_items(e, 0, event).count;
}

int e2e_count_evidence(struct e2e *e)
{
    return walk_items(e, 1, NULL).count;
}

bool e2e_evidence_contains(struct e2e *e, const char *needle)
{
    return walk_items(e, 1, needle).found;
}

int e2e_max_posts(struct e2e *e)
{
    return walk_items(e, 2, NULL).count;
}

void e2e_flow_copy(struct e2e *e, const char *from, const char *to)
{
    char src[320];
    snprintf(src, sizeof(src), "%s", e->flow); /* acme.xml, or the copy made before */
    FILE *in = fopen(src, "rb");
    if (!in)
        e2e_die("open", src);
    char *buf = malloc(1 << 20);
    if (!buf)
        abort();
    size_t n = fread(buf, 1, (1 << 20) - 1, in);
    fclose(in);
    buf[n] = '\0';
    snprintf(e->flow, sizeof(e->flow), "%s/flow.xml", e->dir);
    FILE *out = fopen(e->flow, "wb");
    if (!out)
        e2e_die("create", e->flow);
    size_t flen = strlen(from);
    const char *p = buf;
    for (const char *hit; flen && (hit = strstr(p, from)) != NULL; p = hit + flen) {
        fwrite(p, 1, (size_t)(hit - p), out);
        fputs(to, out);
    }
    fputs(p, out);
    fclose(out);
    free(buf);
    e->opt.flow_path = e->flow;
}

/* ---- runs in the background, child processes, waiting ------------------------------------ */

int64_t e2e_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void e2e_nap_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void *bg_main(void *arg)
{
    struct e2e_bg *bg = arg;
    bg->rc = runner_run(&bg->e->opt, &bg->e->stats);
    return NULL;
}

void e2e_run_bg(struct e2e *e, struct e2e_bg *bg)
{
    memset(bg, 0, sizeof(*bg));
    bg->e = e;
    bg->cancel = 0;
    e->opt.cancel = &bg->cancel;
    if (pthread_create(&bg->thread, NULL, bg_main, bg) != 0)
        e2e_die("pthread_create", "runner thread");
    bg->started = true;
}

int e2e_run_join(struct e2e_bg *bg, bool cancel)
{
    if (!bg->started)
        return APBOT_E_INVAL;
    if (cancel)
        bg->cancel = 1;
    pthread_join(bg->thread, NULL);
    bg->started = false;
    bg->e->opt.cancel = NULL;
    return bg->rc;
}

int e2e_count_terminal(struct e2e *e)
{
    return e2e_count(e, MACHINE_COMPLETED) + e2e_count(e, MACHINE_BUSINESS_EXCEPTION) +
           e2e_count(e, MACHINE_MANUAL_REVIEW);
}

bool e2e_wait_count(struct e2e *e, int state, int n, long timeout_ms)
{
    int64_t until = e2e_mono_ms() + timeout_ms;
    for (;;) {
        int have = state < 0 ? e2e_count_terminal(e) : e2e_count(e, state);
        if (have >= n)
            return true;
        if (e2e_mono_ms() >= until)
            return false;
        e2e_nap_ms(20);
    }
}

pid_t e2e_spawn_apbot(struct e2e *e, const char *log_name, const char *const *args)
{
    const char *bin = getenv("APBOT_BIN");
    if (!bin || !*bin)
        e2e_die("APBOT_BIN", "not set");
    const char *argv[36];
    size_t n = 0;
    argv[n++] = bin;
    argv[n++] = "--db";
    argv[n++] = e->db;
    for (size_t i = 0; args && args[i] && n < 34; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    char log[400];
    snprintf(log, sizeof(log), "%s/%s", e->dir, log_name);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        e2e_die("fork", NULL);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

int e2e_wait_exit(pid_t pid, long timeout_ms)
{
    int64_t until = e2e_mono_ms() + timeout_ms;
    int status = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (r < 0 || e2e_mono_ms() >= until)
            break;
        e2e_nap_ms(20);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

char *e2e_read_file(struct e2e *e, const char *log_name)
{
    char path[400];
    snprintf(path, sizeof(path), "%s/%s", e->dir, log_name);
    FILE *f = fopen(path, "rb");
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf)
        abort();
    if (f) {
        n = fread(buf, 1, cap, f);
        fclose(f);
    }
    buf[n] = '\0';
    return buf;
}

void e2e_assert_invariants(struct e2e *e, bool allow_pending)
{
    struct inv_report r;
    int rc = invariants_check_lines(e->db, e->port, 24, allow_pending,
                                    e->lines_gross ? INV_LINES_GROSS : INV_LINES_NET, &r);
    if (rc != 0 || r.duplicated_refs != 0 || r.reposts_of_booked != 0) {
        invariants_print(&r);
        e2e_die("invariants", "violated (the report above)");
    }
}

void e2e_get_item(struct e2e *e, const char *key, struct store_item *ret)
{
    struct store *st = NULL;
    char err[APBOT_ERR_LEN];
    if (store_open(e->db, &st, err, sizeof(err)) != APBOT_OK)
        e2e_die("store_open", err);
    int rc = store_get_by_key(st, key, ret, err, sizeof(err));
    store_close(st);
    if (rc != APBOT_OK)
        e2e_die("store_get_by_key", err);
}
