/*
 * test_sim_admin.c - the simulated ERP as a whole: the built-in master data equals
 * fixtures/erp-sim/master.ini, the shipped scenarios load, the admin endpoints (ledger CSV,
 * stats, drift book/delete, one document with every column, admin off, bad input), a file
 * ledger survives a restart, the
 * capacity model queues beyond its slots, the same seed and request sequence give the same
 * ledger and faults, a bounded fuzz run of random requests leaves the server answering, and
 * the erp-sim program prints its address and stops on SIGTERM.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sqlite3.h>

#include "helpers/sim_client.h"
#include "sim.h"

static const char fast[] = "slots = 4\n"
                           "service_ms.login = 0\n"
                           "service_ms.form = 0\n"
                           "service_ms.check = 0\n"
                           "service_ms.post = 0\n"
                           "service_ms.search = 0\n"
                           "service_ms.journal = 0\n"
                           "index_lag_ms = 0\n";

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static struct sim *start(const char *scenario, uint64_t seed, bool admin)
{
    struct sim_options opt = {.port = 0, .scenario_text = scenario, .seed = seed, .admin = admin};
    struct sim *s = NULL;
    char err[256];
    if (sim_start(&opt, &s, err, sizeof err))
        fail_msg("sim_start: %s", err);
    return s;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = calloc(1, 1 << 20);
    size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    fclose(f);
    if (buf)
        buf[n] = '\0';
    return buf;
}

static void fixture_path(char *dst, size_t len, const char *rel)
{
    const char *dir = getenv("APBOT_FIXTURES");
    snprintf(dst, len, "%s/%s", dir ? dir : "fixtures", rel);
}

/* ---- master data and scenarios ----------------------------------------------------------- */

static void test_sim_master_builtin_matches_file(void **state)
{
    (void)state;
    char path[1024];
    fixture_path(path, sizeof path, "erp-sim/master.ini");
    char *text = slurp(path);
    assert_non_null(text);
    assert_string_equal(sim_master_default_text(), text);
    free(text);
    struct sim_options opt = {.port = 0, .master_path = path};
    struct sim *s = NULL;
    char err[256];
    assert_int_equal(sim_start(&opt, &s, err, sizeof err), 0);
    sim_stop(s);
    opt.master_path = "/nonexistent/master.ini";
    assert_int_equal(sim_start(&opt, &s, err, sizeof err), -1);
}

static void test_sim_scenarios_load(void **state)
{
    (void)state;
    static const struct {
        const char *file;
        long long slots;
    } scn[] = {{"scenarios/calm.scn", 8},
               {"scenarios/month-end.scn", 4},
               {"scenarios/chaos.scn", 3},
               {"scenarios/varying.scn", 8}};
    for (size_t i = 0; i < sizeof scn / sizeof scn[0]; i++) {
        char path[1024];
        fixture_path(path, sizeof path, scn[i].file);
        struct sim_options opt = {.port = 0, .scenario_path = path, .admin = true};
        struct sim *s = NULL;
        char err[256];
        assert_int_equal(sim_start(&opt, &s, err, sizeof err), 0);
        assert_int_equal(simc_stat(sim_port(s), "capacity"), scn[i].slots);
        /* every scenario tests, demo and bench use runs without the ERP's reference guard */
        assert_int_equal(simc_stat(sim_port(s), "reference_guard"), 0);
        assert_int_equal(simc_stat(sim_port(s), "queue_wait_max_ms"), i == 3 ? 30000 : 120000);
        sim_stop(s);
    }
    /* a bad line names itself */
    struct sim_options opt = {.port = 0, .scenario_text = "slots = 2\nfault.bogus = 0.1\n"};
    struct sim *s = NULL;
    char err[256] = "";
    assert_int_equal(sim_start(&opt, &s, err, sizeof err), -1);
    assert_non_null(strstr(err, ":2:"));
    assert_non_null(strstr(err, "fault.bogus"));
    opt.scenario_text = "service_ms.post = 9..3\n";
    assert_int_equal(sim_start(&opt, &s, err, sizeof err), -1);
    opt.scenario_text = "slots\n";
    assert_int_equal(sim_start(&opt, &s, err, sizeof err), -1);
}

/* ---- admin ------------------------------------------------------------------------------- */

static void test_sim_admin_endpoints(void **state)
{
    (void)state;
    struct sim *s = start(fast, 1, true);
    unsigned short port = sim_port(s);
    char doc[64], doc2[64];
    long status = 0;
    assert_int_equal(simc_count_rows(port), 0);
    assert_int_equal(simc_book(port, "100005", "A-1", "2026-11-02", "EUR", "99.5",
                               "AP1-has,comma \"q\"", doc, sizeof doc),
                     0);
    assert_true(strncmp(doc, "AP-", 3) == 0);
    assert_int_equal(
        simc_book(port, "V-000006", "A-2", "03.11.2026", "KWD", "-1.250", "x", doc2, sizeof doc2),
        0);
    assert_int_equal(simc_count_reference(port, "AP1-has,comma \"q\""), 1);
    char *csv = NULL;
    assert_int_equal(simc_ledger(port, &csv), 0);
    assert_non_null(strstr(csv, ",100005,A-1,2026-11-02,EUR,99.50,\"AP1-has,comma \"\"q\"\"\","));
    assert_non_null(strstr(csv, ",100006,A-2,2026-11-03,KWD,-1.250,x,"));
    free(csv);
    /* bad input */
    assert_int_equal(simc_book(port, "999999", "A-3", "2026-11-02", "EUR", "1.00", "", NULL, 0),
                     -1);
    assert_int_equal(simc_book(port, "100005", "A-3", "2026-11-02", "EUR", "1,00", "", NULL, 0),
                     -1);
    assert_int_equal(simc_book(port, "100005", "A-3", "2026-11-31", "EUR", "1.00", "", NULL, 0),
                     -1);
    assert_int_equal(simc_book(port, "100005", "A-3", "2026-11-02", "EUR", "1.001", "", NULL, 0),
                     -1);
    assert_int_equal(simc_set(port, "no_such_key", "1"), -1);
    assert_int_equal(simc_set(port, "slots", "0"), -1);
    /* delete */
    assert_int_equal(simc_delete(port, doc), 0);
    assert_int_equal(simc_delete(port, doc), -1);
    assert_int_equal(simc_count_rows(port), 1);
    /* stats */
    char *json = NULL;
    assert_int_equal(simc_stats(port, &json), 0);
    static const char *const keys[] = {"\"uptime_s\":",          "\"capacity\":4",
                                       "\"busy_slot_seconds\":", "\"requests\":{",
                                       "\"faults\":{",           "\"timeout_after_commit\":0",
                                       "\"bookings\":2",         "\"ledger_rows\":1"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        assert_non_null(strstr(json, keys[i]));
    free(json);
    assert_int_equal(simc_request(port, "GET", "/_sim/nothing", NULL, 5000, &status, NULL), 0);
    assert_int_equal(status, 404);
    sim_stop(s);

    /* without admin the endpoints do not exist */
    s = start(fast, 1, false);
    port = sim_port(s);
    assert_int_equal(simc_request(port, "GET", "/_sim/ledger.csv", NULL, 5000, &status, NULL), 0);
    assert_int_equal(status, 404);
    assert_int_equal(simc_fault(port, "overload503", 1), -1);
    sim_stop(s);
}

/* GET /_sim/document?doc=DOC (doc=AP-... or its number) into a parsed object, or NULL with
 * *ret_status. */
static json_t *sim_document(unsigned short port, const char *doc, long *ret_status)
{
    char path[256], *body = NULL;
    char *q = simc_escape(doc);
    snprintf(path, sizeof path, "/_sim/document?doc=%s", q);
    free(q);
    assert_int_equal(simc_request(port, "GET", path, NULL, 5000, ret_status, &body), 0);
    json_t *d = *ret_status == 200 ? json_loads(body, 0, NULL) : NULL;
    free(body);
    return d;
}

/* One booking with every column the ledger keeps, memo included, and its lines: an acme post
 * with a memo, a classic draft booked by hand; by number; 404 and 400. */
static void test_sim_admin_document(void **state)
{
    (void)state;
    struct sim *s = start(fast, 1, true);
    unsigned short port = sim_port(s);
    long status = 0;
    struct simc_session *ss = simc_session_new(port, 5000);
    assert_int_equal(simc_login(ss, "clerk", "acme-demo"), 0);
    char fields[2048], doc[64];
    simc_fields(fields, sizeof fields, "DOC-1", "AP1-document");
    const char *memo = "Memo \"quoted\" \\ back\nnext line: Grüße";
    char *m = simc_escape(memo);
    char *cut = strstr(fields, "&memo=test"); /* simc_fields' memo, replaced */
    assert_non_null(cut);
    snprintf(cut, sizeof fields - (size_t)(cut - fields), "&memo=%s&taxAmount=234%%2C56", m);
    free(m);
    assert_int_equal(simc_post_invoice(ss, fields, doc, sizeof doc), 0);
    simc_session_free(ss);
    json_t *d = sim_document(port, doc, &status);
    assert_int_equal(status, 200);
    assert_non_null(d);
    static const char *const texts[][2] = {
        {"doc_type", "KR"},          {"vendor_no", "100001"},        {"vendor_id", "V-000001"},
        {"invoice_number", "DOC-1"}, {"invoice_date", "2026-11-03"}, {"due_date", "2026-12-03"},
        {"currency", "EUR"},         {"gl_account", "6000"},         {"reference", "AP1-document"},
        {"status", "posted"}};
    assert_string_equal(json_string_value(json_object_get(d, "doc")), doc);
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        const char *v = json_string_value(json_object_get(d, texts[i][0]));
        if (!v || strcmp(v, texts[i][1]) != 0)
            fail_msg("%s: %s, want %s", texts[i][0], v ? v : "(none)", texts[i][1]);
    }
    assert_string_equal(json_string_value(json_object_get(d, "memo")), memo);
    assert_int_equal(json_integer_value(json_object_get(d, "amount")), 123456);
    assert_int_equal(json_integer_value(json_object_get(d, "tax")), 23456);
    assert_int_equal(json_integer_value(json_object_get(d, "exp")), 2);
    const char *at = json_string_value(json_object_get(d, "booked_at"));
    assert_non_null(at);
    assert_int_equal(strlen(at), strlen("2026-11-30T14:03:07"));
    assert_true(strncmp(json_string_value(json_object_get(d, "booked_date")), at, 10) == 0);
    assert_true(json_integer_value(json_object_get(d, "booked_ms")) > 0);
    json_t *lines = json_object_get(d, "lines");
    assert_int_equal(json_array_size(lines), 1);
    json_t *ln = json_array_get(lines, 0);
    assert_int_equal(json_integer_value(json_object_get(ln, "line")), 1);
    assert_string_equal(json_string_value(json_object_get(ln, "gl_account")), "6000");
    assert_int_equal(json_integer_value(json_object_get(ln, "amount")), 100000);
    /* the acme single line's text is the memo, cut to 60 characters */
    assert_string_equal(json_string_value(json_object_get(ln, "description")), memo);
    /* by its number (the spa UI's id), the same */
    json_t *by_number = sim_document(port, strrchr(doc, '-') + 1, &status);
    assert_int_equal(status, 200);
    assert_true(json_equal(d, by_number));
    json_decref(by_number);
    json_decref(d);
    /* none: 404; no doc: 400 */
    assert_null(sim_document(port, "AP-2026-999999", &status));
    assert_int_equal(status, 404);
    assert_null(sim_document(port, "999999", &status));
    assert_int_equal(status, 404);
    assert_int_equal(simc_request(port, "GET", "/_sim/document", NULL, 5000, &status, NULL), 0);
    assert_int_equal(status, 400);
    sim_stop(s);

    /* the classic UI: a draft booked by hand */
    struct sim_options opt = {
        .port = 0, .scenario_text = fast, .admin = true, .ui = SIM_UI_CLASSIC};
    char err[256];
    assert_int_equal(sim_start(&opt, &s, err, sizeof err), 0);
    port = sim_port(s);
    char *body = NULL;
    assert_int_equal(simc_request(port, "POST", "/_sim/book",
                                  "vendor_id=100021&invoice_number=C-1&invoice_date=2026-11-05"
                                  "&currency=USD&amount=10.00&reference=R&status=draft",
                                  5000, &status, &body),
                     0);
    assert_int_equal(status, 200);
    d = sim_document(port, body, &status);
    free(body);
    assert_int_equal(status, 200);
    assert_string_equal(json_string_value(json_object_get(d, "status")), "draft");
    assert_string_equal(json_string_value(json_object_get(d, "memo")), "");
    assert_int_equal(json_array_size(json_object_get(d, "lines")), 1);
    json_decref(d);
    sim_stop(s);
}

/* Ground truth of lines and approval, drafts booked by hand, and amendments. */
static void test_sim_admin_lines_status_amend(void **state)
{
    (void)state;
    struct sim *s = start(fast, 1, true);
    unsigned short port = sim_port(s);
    char doc[64], doc2[64], row[256], st[16];
    long status = 0;
    char *body = NULL;
    assert_int_equal(
        simc_book(port, "100005", "L-1", "2026-11-02", "EUR", "99.5", "AP1-L1", doc, sizeof doc),
        0);
    /* a hand-booked document has one line: its amount on its G/L account (default 6000) */
    char *csv = NULL;
    assert_int_equal(simc_lines(port, &csv), 0);
    snprintf(row, sizeof row, "doc,line,gl_account,amount,description\n%s,1,6000,99.50,\n", doc);
    assert_string_equal(csv, row);
    free(csv);
    assert_int_equal(simc_doc_status(port, doc, st, sizeof st), 0);
    assert_string_equal(st, "posted");
    /* status=draft books a draft */
    assert_int_equal(simc_request(port, "POST", "/_sim/book",
                                  "vendor_id=100006&invoice_number=L-2&invoice_date=2026-11-03"
                                  "&currency=EUR&amount=5.00&reference=AP1-L2&status=draft"
                                  "&gl_account=4711",
                                  5000, &status, &body),
                     0);
    assert_int_equal(status, 200);
    snprintf(doc2, sizeof doc2, "%s", body);
    free(body);
    assert_int_equal(simc_doc_status(port, doc2, st, sizeof st), 0);
    assert_string_equal(st, "draft");
    assert_int_equal(simc_stat(port, "drafts"), 1);
    assert_int_equal(simc_lines(port, &csv), 0);
    snprintf(row, sizeof row, "\n%s,1,4711,5.00,\n", doc2);
    assert_non_null(strstr(csv, row));
    free(csv);
    assert_int_equal(simc_request(port, "POST", "/_sim/book",
                                  "vendor_id=100006&invoice_number=L-3&invoice_date=2026-11-03"
                                  "&currency=EUR&amount=5.00&status=maybe",
                                  5000, &status, NULL),
                     0);
    assert_int_equal(status, 400);

    /* amend changes the booked amount, nothing else */
    assert_int_equal(simc_amend(port, doc, "1234.5"), 0);
    assert_int_equal(simc_ledger(port, &csv), 0);
    snprintf(row, sizeof row, "\n%s,100005,L-1,2026-11-02,EUR,1234.50,AP1-L1,", doc);
    assert_non_null(strstr(csv, row));
    free(csv);
    assert_int_equal(simc_lines(port, &csv), 0);
    snprintf(row, sizeof row, "\n%s,1,6000,99.50,\n", doc);
    assert_non_null(strstr(csv, row));
    free(csv);
    assert_int_equal(simc_request(port, "POST", "/_sim/amend", "doc=AP-1999-000001&amount=1.00",
                                  5000, &status, NULL),
                     0);
    assert_int_equal(status, 404);
    char bad[96];
    snprintf(bad, sizeof bad, "doc=%s&amount=1.001", doc);
    assert_int_equal(simc_request(port, "POST", "/_sim/amend", bad, 5000, &status, NULL), 0);
    assert_int_equal(status, 400);
    snprintf(bad, sizeof bad, "doc=%s&amount=1%%2C00", doc);
    assert_int_equal(simc_request(port, "POST", "/_sim/amend", bad, 5000, &status, NULL), 0);
    assert_int_equal(status, 400);
    assert_int_equal(simc_request(port, "POST", "/_sim/amend", "amount=1.00", 5000, &status, NULL),
                     0);
    assert_int_equal(status, 400);
    /* a deleted document takes its lines along */
    assert_int_equal(simc_delete(port, doc), 0);
    assert_int_equal(simc_lines(port, &csv), 0);
    assert_null(strstr(csv, doc));
    free(csv);
    sim_stop(s);
}

/* A ledger file written before drafts and lines existed is migrated: its bookings are posted
 * and new bookings get lines. */
static void test_sim_db_migrates_old_ledger(void **state)
{
    (void)state;
    char dir[] = "/tmp/apbot-simdb-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], side[300];
    snprintf(path, sizeof path, "%s/ledger.db", dir);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(
        sqlite3_exec(
            db,
            "CREATE TABLE ledger(doc TEXT PRIMARY KEY, doc_type TEXT NOT NULL,"
            " vendor_no TEXT NOT NULL, vendor_id TEXT NOT NULL,"
            " invoice_number TEXT NOT NULL, invoice_date TEXT NOT NULL,"
            " due_date TEXT NOT NULL, currency TEXT NOT NULL, exp INTEGER NOT NULL,"
            " amount INTEGER NOT NULL, gl_account TEXT NOT NULL,"
            " reference TEXT NOT NULL, memo TEXT NOT NULL, booked_at TEXT NOT NULL,"
            " booked_date TEXT NOT NULL, booked_ms INTEGER NOT NULL);"
            "CREATE TABLE doc_seq(year INTEGER PRIMARY KEY, last INTEGER NOT NULL);"
            "INSERT INTO ledger VALUES('AP-2026-000001','KR','100001','V-000001','OLD-1',"
            " '2026-11-02','2026-12-02','EUR',2,100,'6000','AP1-old','','2026-11-30T10:00:00',"
            " '2026-11-30',0);"
            "INSERT INTO doc_seq VALUES(2026, 1);",
            NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(db);
    struct sim_options opt = {.port = 0, .scenario_text = fast, .db_path = path, .admin = true};
    struct sim *s = NULL;
    char err[256], st[16], doc[64];
    assert_int_equal(sim_start(&opt, &s, err, sizeof err), 0);
    assert_int_equal(simc_doc_status(sim_port(s), "AP-2026-000001", st, sizeof st), 0);
    assert_string_equal(st, "posted");
    assert_int_equal(simc_book(sim_port(s), "100001", "NEW-1", "2026-11-02", "EUR", "2.00", "n1",
                               doc, sizeof doc),
                     0);
    char *csv = NULL;
    assert_int_equal(simc_lines(sim_port(s), &csv), 0);
    assert_non_null(strstr(csv, ",1,6000,2.00,"));
    free(csv);
    sim_stop(s);
    unlink(path);
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    rmdir(dir);
}

static void test_sim_db_file_survives_restart(void **state)
{
    (void)state;
    char dir[] = "/tmp/apbot-simdb-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], doc[64], doc2[64];
    snprintf(path, sizeof path, "%s/ledger.db", dir);
    struct sim_options opt = {.port = 0, .scenario_text = fast, .db_path = path, .admin = true};
    struct sim *s = NULL;
    char err[256];
    assert_int_equal(sim_start(&opt, &s, err, sizeof err), 0);
    assert_int_equal(
        simc_book(sim_port(s), "100001", "P-1", "2026-11-02", "EUR", "1.00", "p1", doc, sizeof doc),
        0);
    sim_stop(s);
    assert_int_equal(sim_start(&opt, &s, err, sizeof err), 0);
    assert_int_equal(simc_count_reference(sim_port(s), "p1"), 1);
    assert_int_equal(simc_book(sim_port(s), "100001", "P-2", "2026-11-02", "EUR", "1.00", "p2",
                               doc2, sizeof doc2),
                     0);
    assert_true(strcmp(doc2, doc) > 0);
    sim_stop(s);
    char side[300];
    unlink(path);
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    rmdir(dir);
}

/* ---- capacity ---------------------------------------------------------------------------- */

struct bg {
    unsigned short port;
    int rc;
};

static void *bg_search(void *arg)
{
    struct bg *b = arg;
    long status = 0;
    b->rc = simc_request(b->port, "GET", "/erp/ap/invoice/search?reference=x", NULL, 10000, &status,
                         NULL);
    return NULL;
}

static long long parallel_searches(unsigned short port, int n)
{
    pthread_t t[8];
    struct bg b[8];
    long long t0 = now_ms();
    for (int i = 0; i < n; i++) {
        b[i].port = port;
        b[i].rc = -1;
        assert_int_equal(pthread_create(&t[i], NULL, bg_search, &b[i]), 0);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(b[i].rc, 0);
    }
    return now_ms() - t0;
}

static void test_sim_capacity_queues(void **state)
{
    (void)state;
    struct sim *s = start("slots = 1\nservice_ms.search = 150\n", 1, true);
    unsigned short port = sim_port(s);
    long long took = parallel_searches(port, 4);
    assert_true(took >= 590);
    char *json = NULL;
    assert_int_equal(simc_stats(port, &json), 0);
    const char *p = strstr(json, "\"busy_slot_seconds\":");
    assert_non_null(p);
    assert_true(strtod(p + strlen("\"busy_slot_seconds\":"), NULL) >= 0.59);
    free(json);
    assert_int_equal(simc_set(port, "slots", "4"), 0);
    took = parallel_searches(port, 4);
    assert_true(took < 550);
    assert_int_equal(simc_stat(port, "search"), 8);
    sim_stop(s);
}

/* queue_wait_max_ms: a request that cannot get a slot within the bound is answered 503 (not
 * processed) and counted. One slot is held by a search that takes 700 ms; the bound is 100 ms. */
static void test_sim_queue_wait_bound(void **state)
{
    (void)state;
    struct sim *s = start("slots = 1\nservice_ms.search = 700\nqueue_wait_max_ms = 100\n", 1, true);
    unsigned short port = sim_port(s);
    assert_int_equal(simc_stat(port, "queue_wait_max_ms"), 100);
    pthread_t t;
    struct bg b = {port, -1};
    assert_int_equal(pthread_create(&t, NULL, bg_search, &b), 0);
    for (int i = 0; i < 200 && simc_stat(port, "busy") != 1; i++)
        sleep_ms(5);
    assert_int_equal(simc_stat(port, "busy"), 1);
    long status = 0;
    char *body = NULL;
    assert_int_equal(simc_request(port, "GET", "/erp/login", NULL, 5000, &status, &body), 0);
    assert_int_equal(status, 503);
    assert_non_null(strstr(body, "Request queue timeout."));
    free(body);
    pthread_join(t, NULL);
    assert_int_equal(b.rc, 0);
    assert_int_equal(simc_stat(port, "queue_timeouts"), 1);
    assert_int_equal(simc_stat(port, "answers_503"), 1);
    assert_int_equal(simc_stat(port, "overload_answers"), 1);
    assert_int_equal(simc_set(port, "queue_wait_max_ms", "-1"), -1);
    sim_stop(s);
}

static void *bg_slow_search(void *arg)
{
    struct bg *b = arg;
    long status = 0;
    b->rc = simc_request(b->port, "GET", "/erp/ap/invoice/search?reference=x", NULL, 20000, &status,
                         NULL);
    if (b->rc == 0 && status != 200)
        b->rc = -1;
    return NULL;
}

/* The capacity schedule: slots change at the steps (counted from when it was set), a request
 * waiting for a slot gets one at the step that adds it, and the slot-milliseconds available
 * integrate the schedule. */
static void test_sim_capacity_schedule(void **state)
{
    (void)state;
    struct sim *s =
        start("slots = 4\ncapacity = 0:1, 600000:3\nservice_ms.search = 1000\n", 1, true);
    unsigned short port = sim_port(s);
    assert_int_equal(simc_stat(port, "capacity"), 1);
    /* two searches of 1 s with one slot: the second waits; the step at +500 ms gives it one
     * while the first still runs */
    long long a0 = simc_stat(port, "slot_ms_available");
    assert_int_equal(simc_set(port, "capacity", "0:1, 500:2"), 0);
    pthread_t t[2];
    struct bg b[2] = {{port, -1}, {port, -1}};
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, bg_slow_search, &b[i]), 0);
    int saw_waiting = 0, saw_two = 0;
    for (int i = 0; i < 400 && !saw_two; i++) {
        if (simc_stat(port, "waiting") == 1 && simc_stat(port, "capacity") == 1)
            saw_waiting = 1;
        if (simc_stat(port, "busy") == 2)
            saw_two = 1;
        sleep_ms(5);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(b[i].rc, 0);
    }
    assert_true(saw_waiting);
    assert_true(saw_two);
    assert_int_equal(simc_stat(port, "capacity"), 2);
    /* the second search started at the step (+500 ms) and took 1 s: since the schedule was set
     * 500 ms of 1 slot and at least 1 s of 2 slots passed, and 2 s of slot time were busy */
    long long a1 = simc_stat(port, "slot_ms_available");
    assert_true(a1 - a0 >= 500 * 1 + 1000 * 2);
    assert_true(simc_stat(port, "slot_ms_busy") >= 2000);
    /* bad schedules */
    assert_int_equal(simc_set(port, "capacity", "0:2, 0:3"), -1);
    assert_int_equal(simc_set(port, "capacity", "0:0"), -1);
    assert_int_equal(simc_set(port, "capacity", "500"), -1);
    assert_int_equal(simc_set(port, "capacity", "off"), 0);
    assert_int_equal(simc_stat(port, "capacity"), 4);
    sim_stop(s);
}

/* /_sim/stats: requests by screen, latency percentiles, overload answers. */
static void test_sim_stats_figures(void **state)
{
    (void)state;
    struct sim *s = start(fast, 1, true);
    unsigned short port = sim_port(s);
    long status = 0;
    for (int i = 0; i < 5; i++)
        assert_int_equal(simc_request(port, "GET", "/erp/login", NULL, 5000, &status, NULL), 0);
    assert_int_equal(simc_fault(port, "overload429", 1), 0);
    assert_int_equal(simc_request(port, "GET", "/erp/login", NULL, 5000, &status, NULL), 0);
    assert_int_equal(status, 429);
    assert_int_equal(simc_stat(port, "login"), 6);
    assert_int_equal(simc_stat(port, "count"), 6); /* answered, admin calls aside */
    assert_int_equal(simc_stat(port, "answers_429"), 1);
    assert_int_equal(simc_stat(port, "overload_answers"), 1);
    long long p50 = simc_stat(port, "p50"), p99 = simc_stat(port, "p99");
    long long mx = simc_stat(port, "max");
    assert_true(p50 >= 0 && p50 <= p99 && p99 <= mx);
    assert_int_equal(simc_stat(port, "reposts_of_booked"), 0);
    char *json = NULL;
    assert_int_equal(simc_stats(port, &json), 0);
    assert_non_null(strstr(json, "\"ui\":\"acme\""));
    assert_non_null(strstr(json, "\"search_garbled\":0"));
    free(json);
    sim_stop(s);
}

/* ---- determinism ------------------------------------------------------------------------- */

static const char noisy[] = "slots = 2\n"
                            "service_ms.login = 0\n"
                            "service_ms.form = 0\n"
                            "service_ms.check = 0..2\n"
                            "service_ms.post = 0..2\n"
                            "service_ms.search = 0\n"
                            "index_lag_ms = 0\n"
                            "stall_ms = 50\n"
                            "late_commit_ms = 20\n"
                            "fault.timeout_after_commit = 0.08\n"
                            "fault.late_commit = 0.08\n"
                            "fault.error500_before_commit = 0.05\n"
                            "fault.error500_after_commit = 0.05\n"
                            "fault.overload503 = 0.04\n"
                            "fault.overload429 = 0.04\n"
                            "fault.drop_before_commit = 0.03\n"
                            "fault.drop_after_commit = 0.05\n"
                            "fault.session_expiry = 0.03\n"
                            "fault.garbled_after_commit = 0.05\n";

struct run {
    char outcomes[8192];
    char *ledger; /* without booked_at */
    char faults[1024];
};

static void append(char *dst, size_t len, const char *s)
{
    size_t n = strlen(dst);
    snprintf(dst + n, len - n, "%s", s);
}

static void run_sequence(uint64_t seed, struct run *r)
{
    struct sim *s = start(noisy, seed, true);
    unsigned short port = sim_port(s);
    struct simc_session *ss = simc_session_new(port, 5000);
    bool logged_in = false;
    r->outcomes[0] = '\0';
    for (int i = 0; i < 30; i++) {
        char fields[512], ref[32], inv[32], doc[64], msg[256], step[128];
        snprintf(ref, sizeof ref, "AP1-det-%02d", i);
        snprintf(inv, sizeof inv, "D-%02d", i);
        simc_fields(fields, sizeof fields, inv, ref);
        for (int attempt = 0; attempt < 4; attempt++) {
            for (int k = 0; k < 5 && !logged_in; k++)
                logged_in = simc_login(ss, "clerk", "acme-demo") == 0;
            int rc = simc_post_invoice(ss, fields, doc, sizeof doc);
            msg[0] = '\0';
            if (rc == 1)
                (void)simc_message(simc_body(ss), msg, sizeof msg);
            snprintf(step, sizeof step, "%d:%d:%.4s:%s ", i, rc, msg, rc == 0 ? doc : "");
            append(r->outcomes, sizeof r->outcomes, step);
            if (rc == -1)
                sleep_ms(60); /* let a late commit land before the next booking */
            if (rc == 1 && strncmp(msg, "I003", 4) == 0) {
                logged_in = false;
                continue;
            }
            if (rc != -1)
                break;
        }
    }
    sleep_ms(100);
    char *csv = NULL;
    assert_int_equal(simc_ledger(port, &csv), 0);
    /* drop the booked_at column (the last one) of every line */
    r->ledger = calloc(1, strlen(csv) + 1);
    assert_non_null(r->ledger);
    for (char *line = csv, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        char *comma = strrchr(line, ',');
        if (comma)
            *comma = '\0';
        append(r->ledger, strlen(csv) + 1, line);
        append(r->ledger, strlen(csv) + 1, "\n");
    }
    free(csv);
    char *json = NULL;
    assert_int_equal(simc_stats(port, &json), 0);
    const char *a = strstr(json, "\"faults\":{");
    const char *b = a ? strchr(a, '}') : NULL;
    assert_non_null(b);
    snprintf(r->faults, sizeof r->faults, "%.*s", (int)(b - a + 1), a);
    free(json);
    simc_session_free(ss);
    sim_stop(s);
}

static void test_sim_determinism(void **state)
{
    (void)state;
    struct run a, b, c;
    run_sequence(42, &a);
    run_sequence(42, &b);
    run_sequence(43, &c);
    if (getenv("SIM_DEBUG"))
        fprintf(stderr, "%s\n%s\n", a.outcomes, a.faults);
    assert_string_equal(a.outcomes, b.outcomes);
    assert_string_equal(a.ledger, b.ledger);
    assert_string_equal(a.faults, b.faults);
    /* the faults actually happened, and another seed gives another run */
    assert_string_not_equal(a.faults, "\"faults\":{\"timeout_after_commit\":0,\"late_commit\":0,"
                                      "\"error500_before_commit\":0,\"error500_after_commit\":0,"
                                      "\"overload503\":0,\"overload429\":0,"
                                      "\"drop_before_commit\":0,\"drop_after_commit\":0,"
                                      "\"session_expiry\":0,\"garbled_after_commit\":0,"
                                      "\"result_login_page\":0,\"result_overload503\":0}");
    assert_string_not_equal(a.outcomes, c.outcomes);
    free(a.ledger);
    free(b.ledger);
    free(c.ledger);
}

/* ---- fuzz -------------------------------------------------------------------------------- */

static uint64_t rnd_state = 0x9e3779b97f4a7c15ULL;

static uint32_t rnd(void)
{
    rnd_state = rnd_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rnd_state >> 33);
}

static size_t curl_sink(char *p, size_t size, size_t n, void *arg)
{
    (void)p;
    (void)arg;
    return size * n;
}

/* One raw request with a binary body; returns the status, or -curl code. */
static long raw_request(unsigned short port, const char *method, const char *path, const char *body,
                        size_t len, const char *content_type, const char *cookie)
{
    CURL *h = curl_easy_init();
    assert_non_null(h);
    char url[4096];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", (unsigned)port, path);
    struct curl_slist *hdr = NULL;
    if (content_type) {
        char line[256];
        snprintf(line, sizeof line, "Content-Type: %s", content_type);
        hdr = curl_slist_append(hdr, line);
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, curl_sink);
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
    if (hdr)
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    if (cookie)
        curl_easy_setopt(h, CURLOPT_COOKIE, cookie);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    else if (strcmp(method, "GET") != 0)
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)len);
    }
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    if (rc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    return rc == CURLE_OK ? status : -(long)rc;
}

static void random_text(char *dst, size_t len, bool binary)
{
    static const char special[] = "%&=+;,.-_*?[]<>\"'\\/ 0123456789AP1-KRGEUR";
    for (size_t i = 0; i + 1 < len; i++) {
        uint32_t r = rnd();
        if (binary)
            dst[i] = (char)(r & 0xff);
        else if (r % 4 == 0)
            dst[i] = special[(r >> 8) % (sizeof special - 1)];
        else
            dst[i] = (char)(0x20 + (r >> 8) % 0x5f);
    }
    dst[len ? len - 1 : 0] = '\0';
}

static void test_sim_fuzz(void **state)
{
    (void)state;
    static const char *const paths[] = {
        "/erp/login",
        "/erp/home",
        "/erp/logout",
        "/erp/ap/invoice/new",
        "/erp/ap/invoice/check",
        "/erp/ap/invoice/post",
        "/erp/ap/invoice/search",
        "/erp/ap/journal",
        "/",
        "/erp/../etc/passwd",
        "/_sim/book",
        "/_sim/set",
        "/_sim/fault",
        "/_sim/delete",
        "/erp/ap/invoice/search?reference=%ff%00",
    };
    static const char *const fields[] = {
        "docType",   "vendorNo",  "vendorInvNo", "invDate",   "dueDate",  "currency",   "amount",
        "glAccount", "reference", "memo",        "formToken", "vendorId", "j_username", "_csrf",
        "name",      "count",     "slots",       "vendor_id", "amount",   "doc"};
    static const char *const methods[] = {"GET", "POST", "POST", "PUT", "DELETE", "HEAD"};
    static const char *const types[] = {NULL, "application/x-www-form-urlencoded",
                                        "multipart/form-data; boundary=x", "text/plain"};
    struct sim *s = start(fast, 5, true);
    unsigned short port = sim_port(s);
    struct simc_session *ss = simc_session_new(port, 10000);
    assert_int_equal(simc_login(ss, "clerk", "acme-demo"), 0);
    char token[64] = "";
    for (int i = 0; i < 400; i++) {
        const char *path = paths[rnd() % (sizeof paths / sizeof paths[0])];
        const char *method = methods[rnd() % (sizeof methods / sizeof methods[0])];
        char body[2048] = "";
        size_t len = 0;
        if (i % 4 == 0) {
            /* a form of known fields with hostile values, inside the live session */
            long status = 0;
            if (i % 8 == 0 && simc_get(ss, "/erp/ap/invoice/new", &status) == 0)
                (void)simc_field(simc_body(ss), "formToken", token, sizeof token);
            int n = (int)(rnd() % 12);
            for (int k = 0; k < n; k++) {
                char value[64], *esc;
                random_text(value, 1 + rnd() % sizeof value, false);
                esc = rnd() % 3 ? simc_escape(value) : strdup(value);
                size_t used = strlen(body);
                snprintf(body + used, sizeof body - used, "%s%s=%s", used ? "&" : "",
                         fields[rnd() % (sizeof fields / sizeof fields[0])], esc ? esc : "");
                free(esc);
            }
            size_t used = strlen(body);
            if (token[0] && rnd() % 2)
                snprintf(body + used, sizeof body - used, "&formToken=%s", token);
            const char *target = rnd() % 2 ? "/erp/ap/invoice/check" : "/erp/ap/invoice/post";
            assert_int_equal(simc_post(ss, target, body, &status), 0);
            assert_true(status >= 200 && status < 600);
            continue;
        }
        if (strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0) {
            len = rnd() % sizeof body;
            random_text(body, len + 1, rnd() % 2);
        }
        char cookie[128];
        snprintf(cookie, sizeof cookie, "JSESSIONID=%08x%08x", rnd(), rnd());
        long status =
            raw_request(port, method, path, len ? body : NULL, len,
                        types[rnd() % (sizeof types / sizeof types[0])], rnd() % 2 ? cookie : NULL);
        if (status < 200 || status >= 600)
            fail_msg("request %d %s %s answered %ld", i, method, path, status);
    }
    simc_session_free(ss);

    /* too big a body: 413 */
    size_t big = 100 * 1024;
    char *huge = malloc(big);
    assert_non_null(huge);
    memset(huge, 'a', big);
    assert_int_equal(raw_request(port, "POST", "/erp/login", huge, big, NULL, NULL), 413);
    free(huge);

    /* not HTTP at all */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&addr, sizeof addr), 0);
    static const char junk[] = "\x16\x03\x01 GARBAGE / HTTP/1.1\r\nHost\r\n\r\n";
    assert_true(write(fd, junk, sizeof junk - 1) > 0);
    char reply[256];
    ssize_t got = read(fd, reply, sizeof reply - 1);
    close(fd);
    if (got > 0) {
        reply[got] = '\0';
        if (strncmp(reply, "HTTP/1.", 7) != 0 || reply[9] != '4')
            fail_msg("junk answered: %.40s", reply);
    }

    /* still serving, ledger consistent */
    ss = simc_session_new(port, 10000);
    assert_int_equal(simc_login(ss, "clerk", "acme-demo"), 0);
    char fieldsv[512], doc[64];
    simc_fields(fieldsv, sizeof fieldsv, "AFTER-FUZZ", "AP1-after-fuzz");
    assert_int_equal(simc_post_invoice(ss, fieldsv, doc, sizeof doc), 0);
    assert_int_equal(simc_count_reference(port, "AP1-after-fuzz"), 1);
    simc_session_free(ss);
    sim_stop(s);
}

/* ---- the program ------------------------------------------------------------------------- */

static void test_sim_program(void **state)
{
    (void)state;
    const char *bin = getenv("ERPSIM_BIN");
    if (!bin || access(bin, X_OK) != 0)
        skip();
    /* each user interface: its own login screen (the spa's client page) answers, another's does
     * not exist */
    static const char *const uis[] = {"acme", "classic", "spa"};
    static const char *const logins[] = {"/erp/login", "/login.pl", "/"};
    static const char *const others[] = {"/login.pl", "/erp/login", "/login.pl"};
    pid_t pid;
    int wstatus = 0;
    for (int u = 0; u < 3; u++) {
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            dup2(fds[1], 1);
            close(fds[0]);
            close(fds[1]);
            execl(bin, bin, "--port", "0", "--admin", "--seed", "3", "--ui", uis[u], (char *)NULL);
            _exit(127);
        }
        close(fds[1]);
        FILE *out = fdopen(fds[0], "r");
        assert_non_null(out);
        char line[256] = "";
        assert_non_null(fgets(line, sizeof line, out));
        unsigned port = 0;
        assert_int_equal(sscanf(line, "listening on http://127.0.0.1:%u", &port), 1);
        assert_true(port > 0 && port < 65536);
        long status = 0;
        assert_int_equal(
            simc_request((unsigned short)port, "GET", logins[u], NULL, 5000, &status, NULL), 0);
        assert_int_equal(status, 200);
        assert_int_equal(
            simc_request((unsigned short)port, "GET", others[u], NULL, 5000, &status, NULL), 0);
        assert_int_equal(status, 404);
        assert_int_equal(simc_count_rows((unsigned short)port), 0);
        assert_int_equal(kill(pid, SIGTERM), 0);
        pid_t done = 0;
        for (int i = 0; i < 500 && done == 0; i++) {
            done = waitpid(pid, &wstatus, WNOHANG);
            if (done == 0)
                sleep_ms(10);
        }
        if (done == 0) {
            kill(pid, SIGKILL);
            waitpid(pid, &wstatus, 0);
            fail_msg("erp-sim did not stop on SIGTERM");
        }
        fclose(out);
        assert_true(WIFEXITED(wstatus));
        assert_int_equal(WEXITSTATUS(wstatus), 0);
    }

    /* usage errors exit 2 */
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, 2);
        execl(bin, bin, "--scenario", (char *)NULL);
        _exit(127);
    }
    assert_int_equal(waitpid(pid, &wstatus, 0), pid);
    assert_true(WIFEXITED(wstatus));
    assert_int_equal(WEXITSTATUS(wstatus), 2);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, 2);
        execl(bin, bin, "--port", "0", "--ui", "sap", (char *)NULL);
        _exit(127);
    }
    assert_int_equal(waitpid(pid, &wstatus, 0), pid);
    assert_true(WIFEXITED(wstatus));
    assert_int_equal(WEXITSTATUS(wstatus), 2);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sim_master_builtin_matches_file),
        cmocka_unit_test(test_sim_scenarios_load),
        cmocka_unit_test(test_sim_admin_endpoints),
        cmocka_unit_test(test_sim_admin_document),
        cmocka_unit_test(test_sim_admin_lines_status_amend),
        cmocka_unit_test(test_sim_db_migrates_old_ledger),
        cmocka_unit_test(test_sim_db_file_survives_restart),
        cmocka_unit_test(test_sim_capacity_queues),
        cmocka_unit_test(test_sim_queue_wait_bound),
        cmocka_unit_test(test_sim_capacity_schedule),
        cmocka_unit_test(test_sim_stats_figures),
        cmocka_unit_test(test_sim_determinism),
        cmocka_unit_test(test_sim_fuzz),
        cmocka_unit_test(test_sim_program),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
