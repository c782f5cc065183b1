/*
 * test_sim_spa.c - the simulator's single-page UI (--ui spa, "ACME Cloud 7") over real HTTP on
 * loopback: the client's page and script, the JSON-RPC envelope (HTTP 200 for success and
 * failure), common.db.login (ok, refused, slowed and then throttled to 429), the session header
 * (401 without it, forged, for another user, after logout, after write_idle_s for a write while
 * a read still works, session_max_requests, the session_expiry fault), the context that create
 * and post require, search_read on the five models (the ids derived from the master data,
 * domains with every operator, ilike wildcards, fields, order, offset/limit and their caps, the
 * index lag and the search_garbled cut), create (a draft with its lines, every UserError in
 * order, wrong JSON types as server exceptions with nothing booked, strings stored byte for
 * byte, no duplicate protection), post (number, idempotent), every commit fault on create and
 * post, the HTML pages beside JSON (400, 401, 403, 404, 405, 413, 415, 429, 500, 503),
 * overload and down, reposts_of_booked and the statistics' routes, and a bounded fuzz run of
 * mutated calls. Each test runs its own in-process simulator.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "helpers/sim_client.h"
#include "helpers/xorshift.h"
#include "sim.h"

static const char fast[] = "slots = 4\n"
                           "service_ms.login = 0\n"
                           "service_ms.form = 0\n"
                           "service_ms.check = 0\n"
                           "service_ms.post = 0..1\n"
                           "service_ms.search = 0\n"
                           "service_ms.journal = 0\n"
                           "index_lag_ms = 0\n"
                           "stall_ms = 300\n"
                           "late_commit_ms = 200\n";

/* Party, address and account ids of the built-in master data (docs/erp-sim.md). */
#define PARTY_100001 1
#define ADDRESS_100001 1001
#define ACCOUNT_5700 1701
#define ACCOUNT_6000 2001
#define JOURNAL_EXP 2
#define CURRENCY_EUR 1
#define CURRENCY_JPY 10
#define CURRENCY_KWD 11

struct fx {
    struct sim *sim;
    unsigned short port;
    char auth[512];  /* "Authorization: Session ..." once logged in */
    json_t *context; /* get_preferences' answer */
    long long next_id;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    struct sim_options opt = {
        .port = 0, .scenario_text = fast, .seed = 17, .admin = true, .ui = SIM_UI_SPA};
    char err[256] = "";
    if (!f || sim_start(&opt, &f->sim, err, sizeof err)) {
        fprintf(stderr, "sim_start: %s\n", err);
        free(f);
        return -1;
    }
    f->port = sim_port(f->sim);
    f->next_id = 1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    sim_stop(f->sim);
    json_decref(f->context);
    free(f);
    return 0;
}

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

static void b64(const char *in, char *out, size_t len)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = (const unsigned char *)in;
    size_t n = strlen(in), o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        assert_true(o + 5 < len);
        out[o++] = tab[(v >> 18) & 63];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? tab[v & 63] : '=';
    }
    out[o] = '\0';
}

/* "Authorization: Session base64(user:uid:token)". */
static void session_header(char *dst, size_t len, const char *user, long long uid, const char *tok)
{
    char plain[256], enc[400];
    snprintf(plain, sizeof plain, "%s:%lld:%s", user, uid, tok);
    b64(plain, enc, sizeof enc);
    snprintf(dst, len, "Authorization: Session %s", enc);
}

/* The value of response header `name` in a header block, "" when none. */
static void header_value(const char *headers, const char *name, char *dst, size_t len)
{
    dst[0] = '\0';
    for (const char *p = headers; p && *p;) {
        const char *eol = strchr(p, '\n');
        size_t n = eol ? (size_t)(eol - p) : strlen(p);
        if (n > strlen(name) && strncasecmp(p, name, strlen(name)) == 0 && p[strlen(name)] == ':') {
            const char *v = p + strlen(name) + 1;
            while (*v == ' ')
                v++;
            size_t k = (size_t)(p + n - v);
            while (k > 0 && (v[k - 1] == '\r' || v[k - 1] == ' '))
                k--;
            snprintf(dst, len, "%.*s", (int)k, v);
            return;
        }
        p = eol ? eol + 1 : p + n;
    }
}

/* A raw POST to the endpoint (or another method and path). Returns the HTTP status (0 when the
 * connection closed without an answer); body and headers handed over when asked for. */
static long raw(struct fx *f, const char *method, const char *path, const char *const *hdrs,
                const char *body, char **ret_body, char **ret_headers)
{
    long status = 0;
    char *b = NULL, *h = NULL;
    int rc = simc_request_extra(f->port, method, path, hdrs, body, 10000, &status, &b, &h);
    if (rc != 0)
        status = 0;
    if (ret_body)
        *ret_body = b;
    else
        free(b);
    if (ret_headers)
        *ret_headers = h;
    else
        free(h);
    return status;
}

/* One JSON-RPC call with the session header `auth` (NULL: none). params is stolen. Returns the
 * HTTP status; *ret the answer when it parsed as JSON (else NULL), *ret_raw the body. */
static long call_as(struct fx *f, const char *auth, const char *method, json_t *params,
                    json_t **ret, char **ret_raw, char **ret_headers)
{
    json_t *req = json_pack("{s:I,s:s,s:o}", "id", (json_int_t)f->next_id++, "method", method,
                            "params", params);
    assert_non_null(req);
    char *text = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    const char *hdrs[] = {"Content-Type: application/json", auth, NULL};
    char *body = NULL;
    long status = raw(f, "POST", "/acme/", hdrs, text, &body, ret_headers);
    free(text);
    if (ret)
        *ret = body && status == 200 ? json_loads(body, 0, NULL) : NULL;
    if (ret_raw)
        *ret_raw = body;
    else
        free(body);
    return status;
}

/* A call with the fixture's session that must answer 200 with JSON; the answer (caller frees). */
static json_t *call(struct fx *f, const char *method, json_t *params)
{
    json_t *ans = NULL;
    char *body = NULL;
    long status = call_as(f, f->auth[0] ? f->auth : NULL, method, params, &ans, &body, NULL);
    if (status != 200 || !ans)
        fail_msg("%s: HTTP %ld: %.300s", method, status, body ? body : "(no answer)");
    free(body);
    assert_int_equal(json_integer_value(json_object_get(ans, "id")), f->next_id - 1);
    return ans;
}

/* The result of a call that must succeed (caller frees). */
static json_t *result(struct fx *f, const char *method, json_t *params)
{
    json_t *ans = call(f, method, params);
    json_t *err = json_object_get(ans, "error");
    if (err) {
        char *t = json_dumps(err, 0);
        fail_msg("%s: error %s", method, t);
    }
    json_t *res = json_incref(json_object_get(ans, "result"));
    assert_non_null(res);
    json_decref(ans);
    return res;
}

/* The error's NAME of an answer ("" when it has none). */
static const char *error_name(const json_t *ans)
{
    const char *n = json_string_value(json_array_get(json_object_get(ans, "error"), 0));
    return n ? n : "";
}

static void assert_user_error(json_t *ans, const char *msg)
{
    json_t *err = json_object_get(ans, "error");
    if (strcmp(error_name(ans), "UserError") != 0) {
        char *t = json_dumps(ans, 0);
        fail_msg("expected UserError '%s', got %s", msg, t);
    }
    assert_string_equal(json_string_value(json_array_get(json_array_get(err, 1), 0)), msg);
    assert_null(json_object_get(ans, "result"));
    json_decref(ans);
}

/* A server exception whose message starts with `prefix`. */
static void assert_server_error(json_t *ans, const char *prefix)
{
    const char *name = error_name(ans);
    if (strncmp(name, prefix, strlen(prefix)) != 0) {
        char *t = json_dumps(ans, 0);
        fail_msg("expected a server exception '%s...', got %s", prefix, t);
    }
    assert_true(json_is_array(json_array_get(json_object_get(ans, "error"), 1)));
    json_decref(ans);
}

static void login(struct fx *f)
{
    json_t *res = result(f, "common.db.login",
                         json_pack("[s,{s:s},s]", "clerk", "password", "acme-demo", "en"));
    assert_int_equal(json_array_size(res), 2);
    assert_int_equal(json_integer_value(json_array_get(res, 0)), 1);
    const char *tok = json_string_value(json_array_get(res, 1));
    assert_non_null(tok);
    session_header(f->auth, sizeof f->auth, "clerk", 1, tok);
    json_decref(res);
    json_decref(f->context);
    f->context = result(f, "model.res.user.get_preferences", json_pack("[b,{}]", 1));
}

static json_t *dec(const char *text)
{
    return json_pack("{s:s,s:s}", "__class__", "Decimal", "decimal", text);
}

static json_t *date(int y, int m, int d)
{
    return json_pack("{s:s,s:i,s:i,s:i}", "__class__", "date", "year", y, "month", m, "day", d);
}

/* A standard invoice: vendor 100001, EUR, 03.11.2026, lines 1,000.00 on 5700 and 34.56 on
 * 6000, tax 200.00: 1,234.56 in all. */
static json_t *invoice(const char *reference, const char *inv_no)
{
    json_t *v = json_pack(
        "{s:s,s:s,s:i,s:i,s:i,s:i,s:s,s:s,s:o,s:o,s:s,s:[[s,[{s:i,s:s,s:i,s:o},{s:i,s:s,s:i,s:o}]]]"
        "}",
        "type", "in", "document_type", "invoice", "party", PARTY_100001, "invoice_address",
        ADDRESS_100001, "journal", JOURNAL_EXP, "currency", CURRENCY_EUR, "reference", reference,
        "supplier_invoice", inv_no, "invoice_date", date(2026, 11, 3), "tax_amount", dec("200.00"),
        "comment", "spa test", "lines", "create", "account", ACCOUNT_5700, "description", "Paper",
        "quantity", 1, "unit_price", dec("1000.00"), "account", ACCOUNT_6000, "description",
        "Toner", "quantity", 1, "unit_price", dec("34.56"));
    assert_non_null(v);
    return v;
}

/* The create call of values (stolen) with the fixture's context: its answer. */
static json_t *create(struct fx *f, json_t *values)
{
    return call(f, "model.account.invoice.create", json_pack("[[o],O]", values, f->context));
}

/* A create that must succeed: the new id. */
static long long create_ok(struct fx *f, json_t *values)
{
    json_t *res =
        result(f, "model.account.invoice.create", json_pack("[[o],O]", values, f->context));
    assert_int_equal(json_array_size(res), 1);
    long long id = json_integer_value(json_array_get(res, 0));
    assert_true(id > 0);
    json_decref(res);
    return id;
}

static void post_ok(struct fx *f, long long id)
{
    json_t *res =
        result(f, "model.account.invoice.post", json_pack("[[I],O]", (json_int_t)id, f->context));
    assert_true(json_is_null(res));
    json_decref(res);
}

/* GET /_sim/document?doc=doc: the document (caller frees), or NULL on 404. */
static json_t *document(struct fx *f, const char *doc)
{
    char path[256], *body = NULL;
    long status = 0;
    snprintf(path, sizeof path, "/_sim/document?doc=%s", doc);
    assert_int_equal(simc_request(f->port, "GET", path, NULL, 5000, &status, &body), 0);
    json_t *d = status == 200 ? json_loads(body, 0, NULL) : NULL;
    if (status != 200)
        assert_int_equal(status, 404);
    else
        assert_non_null(d);
    free(body);
    return d;
}

static json_t *document_id(struct fx *f, long long id)
{
    char doc[32];
    snprintf(doc, sizeof doc, "%lld", id);
    return document(f, doc);
}

/* Text of a document's column. */
static const char *col(const json_t *d, const char *name)
{
    const char *t = json_string_value(json_object_get(d, name));
    if (!t)
        fail_msg("no text column %s", name);
    return t;
}

/* A search_read of model (params: domain, fields; stolen) with the context: its records. */
static json_t *search_read(struct fx *f, const char *model, json_t *domain, json_t *fields)
{
    char method[128];
    snprintf(method, sizeof method, "model.%s.search_read", model);
    return result(f, method,
                  json_pack("[o,i,n,n,o,O]", domain, 0, fields ? fields : json_null(), f->context));
}

static void assert_html(long status, long want, const char *body, const char *headers)
{
    char title[128], ct[128];
    assert_int_equal(status, want);
    header_value(headers, "Content-Type", ct, sizeof ct);
    assert_true(strncmp(ct, "text/html", 9) == 0);
    static const struct {
        long status;
        const char *reason;
    } reasons[] = {{400, "Bad Request"},
                   {401, "Unauthorized"},
                   {403, "Forbidden"},
                   {404, "Not Found"},
                   {405, "Method Not Allowed"},
                   {413, "Payload Too Large"},
                   {415, "Unsupported Media Type"},
                   {429, "Too Many Requests"},
                   {500, "Internal Server Error"},
                   {503, "Service Unavailable"}};
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++) {
        if (reasons[i].status == want) {
            snprintf(title, sizeof title, "<title>%ld %s</title>", want, reasons[i].reason);
            if (!body || !strstr(body, title))
                fail_msg("expected %s in %.300s", title, body ? body : "(none)");
            return;
        }
    }
    fail_msg("no reason for %ld", want);
}

/* A request that must answer the HTML page of status `want`. */
static void expect_page(struct fx *f, const char *method, const char *path, const char *const *hdrs,
                        const char *body_text, long want)
{
    char *body = NULL, *headers = NULL;
    long st = raw(f, method, path, hdrs, body_text, &body, &headers);
    assert_html(st, want, body, headers);
    free(body);
    free(headers);
}

/* ---- the client ------------------------------------------------------------------------ */

static void test_spa_client_page_and_script(void **state)
{
    struct fx *f = *state;
    char *body = NULL, *headers = NULL, ct[128];
    assert_int_equal(raw(f, "GET", "/", NULL, NULL, &body, &headers), 200);
    header_value(headers, "Content-Type", ct, sizeof ct);
    assert_string_equal(ct, "text/html; charset=utf-8");
    assert_non_null(strstr(body, "<title>ACME Cloud 7</title>"));
    assert_non_null(strstr(body, "<script src=\"/app.js\"></script>"));
    assert_null(strstr(body, "http://"));
    assert_null(strstr(body, "https://"));
    free(body);
    free(headers);
    assert_int_equal(raw(f, "GET", "/app.js", NULL, NULL, &body, &headers), 200);
    header_value(headers, "Content-Type", ct, sizeof ct);
    assert_string_equal(ct, "application/javascript; charset=utf-8");
    /* the calls of the contract, with the session header and the context */
    static const char *const needles[] = {"'/acme/'",
                                          "common.db.login",
                                          "model.res.user.get_preferences",
                                          "'Session '",
                                          "search_read",
                                          "model.account.invoice.create",
                                          "model.account.invoice.post",
                                          "'account.journal'",
                                          "'EXP'",
                                          "__class__"};
    for (size_t i = 0; i < sizeof needles / sizeof needles[0]; i++) {
        if (!strstr(body, needles[i]))
            fail_msg("app.js lacks %s", needles[i]);
    }
    assert_null(strstr(body, "http://"));
    free(body);
    free(headers);
    /* both are the files under fixtures/erp-sim/spa/, byte for byte */
    static const char *const files[][2] = {{"/", "index.html"}, {"/app.js", "app.js"}};
    for (int i = 0; i < 2; i++) {
        char path[1024];
        const char *dir = getenv("APBOT_FIXTURES");
        snprintf(path, sizeof path, "%s/erp-sim/spa/%s", dir ? dir : "fixtures", files[i][1]);
        FILE *fp = fopen(path, "rb");
        if (!fp)
            skip();
        char *want = calloc(1, 1 << 20);
        assert_non_null(want);
        size_t n = fread(want, 1, (1 << 20) - 1, fp);
        fclose(fp);
        assert_int_equal(raw(f, "GET", files[i][0], NULL, NULL, &body, NULL), 200);
        assert_int_equal(strlen(body), n);
        assert_memory_equal(body, want, n);
        free(want);
        free(body);
    }
}

/* ---- envelope and HTTP pages --------------------------------------------------------------- */

static void test_spa_http_pages(void **state)
{
    struct fx *f = *state;
    char *body = NULL, *headers = NULL;
    const char *json[] = {"Content-Type: application/json", NULL};
    /* 404: any other path, the other UIs' too */
    static const char *const paths[] = {"/erp/login", "/login.pl", "/acme", "/app.js/x", "/x"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        long st = raw(f, "GET", paths[i], NULL, NULL, &body, &headers);
        assert_html(st, 404, body, headers);
        free(body);
        free(headers);
    }
    /* 405: the endpoint by GET, the page by POST, another method anywhere */
    expect_page(f, "GET", "/acme/", NULL, NULL, 405);
    expect_page(f, "POST", "/", json, "{}", 405);
    expect_page(f, "PUT", "/acme/", json, NULL, 405);
    /* 415: another content type, or none */
    const char *form[] = {"Content-Type: application/x-www-form-urlencoded", NULL};
    const char *none[] = {"Content-Type:", NULL};
    const char *env = "{\"id\":1,\"method\":\"common.db.login\",\"params\":[]}";
    expect_page(f, "POST", "/acme/", form, env, 415);
    expect_page(f, "POST", "/acme/", none, env, 415);
    /* 400: not a JSON object with id, method and params (an array) */
    static const char *const bad[] = {"not json",
                                      "[1,2]",
                                      "{\"id\":1,\"method\":\"common.db.login\"}",
                                      "{\"method\":\"common.db.login\",\"params\":[]}",
                                      "{\"id\":1,\"method\":\"common.db.login\",\"params\":{}}",
                                      "{\"id\":1,\"method\":7,\"params\":[]}",
                                      "{\"id\":1,\"method\":\"a\\u0000b\",\"params\":[]}",
                                      ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        long st = raw(f, "POST", "/acme/", json, bad[i], &body, &headers);
        assert_html(st, 400, body, headers);
        free(body);
        free(headers);
    }
    /* 413: over 64 KiB */
    size_t big = 70 * 1024;
    char *huge = malloc(big + 1);
    assert_non_null(huge);
    memset(huge, ' ', big);
    huge[big] = '\0';
    memcpy(huge, "{\"id\":1", 7);
    expect_page(f, "POST", "/acme/", json, huge, 413);
    free(huge);
    /* the id is echoed whatever its type */
    json_t *ans = NULL;
    const char *with_id = "{\"id\":\"abc\",\"method\":\"common.db.login\",\"params\":[\"x\","
                          "{\"password\":\"y\"},\"en\"]}";
    assert_int_equal(raw(f, "POST", "/acme/", json, with_id, &body, NULL), 200);
    ans = json_loads(body, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(ans, "id")), "abc");
    json_decref(ans);
    free(body);
}

/* ---- login and the session ----------------------------------------------------------------- */

static void test_spa_login_ok(void **state)
{
    struct fx *f = *state;
    login(f);
    /* the context, exactly */
    json_t *want =
        json_pack("{s:i,s:s,s:i,s:s,s:s,s:[i,i]}", "company", 1, "language", "en", "currency", 1,
                  "company.rec_name", "ACME Ltd", "timezone", "Europe/Berlin", "groups", 1, 3);
    assert_true(json_equal(f->context, want));
    json_decref(want);
    /* the context is not required for reads */
    json_t *res = result(f, "model.account.journal.search_read", json_pack("[[]]"));
    assert_int_equal(json_array_size(res), 2);
    json_decref(res);
    /* logout ends the session */
    res = result(f, "common.db.logout", json_pack("[]"));
    assert_true(json_is_null(res));
    json_decref(res);
    char *body = NULL, *headers = NULL;
    long st = call_as(f, f->auth, "model.res.user.get_preferences", json_pack("[b,{}]", 1), NULL,
                      &body, &headers);
    assert_html(st, 401, body, headers);
    free(body);
    free(headers);
    assert_int_equal(simc_stat(f->port, "login"), 1);
    assert_int_equal(simc_stat(f->port, "logout"), 1);
}

static void test_spa_login_refused(void **state)
{
    struct fx *f = *state;
    json_t *refused =
        json_pack("[s,[s,s,{s:s}]]", "LoginException", "password", "Password", "type", "password");
    static const char *const creds[][2] = {{"clerk", "wrong"}, {"nobody", "acme-demo"}};
    for (int i = 0; i < 2; i++) {
        json_t *ans = call(f, "common.db.login",
                           json_pack("[s,{s:s},s]", creds[i][0], "password", creds[i][1], "en"));
        assert_true(json_equal(json_object_get(ans, "error"), refused));
        assert_null(json_object_get(ans, "result"));
        json_decref(ans);
    }
    /* no password at all: asked for it */
    json_t *ans = call(f, "common.db.login", json_pack("[s,{},s]", "clerk", "en"));
    assert_true(json_equal(json_object_get(ans, "error"), refused));
    json_decref(ans);
    json_decref(refused);
    /* a user name that is not a text: a server exception */
    assert_server_error(call(f, "common.db.login", json_pack("[i,{s:s}]", 7, "password", "x")),
                        "TypeError");
    assert_int_equal(simc_stat(f->port, "sessions"), 0);
}

static void test_spa_login_throttled(void **state)
{
    struct fx *f = *state;
    /* five failures in a row: each answer waits 200 ms more than the one before */
    long long took[5];
    for (int i = 0; i < 5; i++) {
        long long t0 = now_ms();
        json_t *ans = call(f, "common.db.login",
                           json_pack("[s,{s:s},s]", "clerk", "password", "guess", "en"));
        took[i] = now_ms() - t0;
        assert_string_equal(error_name(ans), "LoginException");
        json_decref(ans);
    }
    assert_true(took[1] >= 190);
    assert_true(took[4] >= 790);
    /* the sixth within a minute is 429 (HTML, Retry-After: 5), even with the right password */
    char *body = NULL, *headers = NULL, ra[32];
    long st = call_as(f, NULL, "common.db.login",
                      json_pack("[s,{s:s},s]", "clerk", "password", "acme-demo", "en"), NULL, &body,
                      &headers);
    assert_html(st, 429, body, headers);
    header_value(headers, "Retry-After", ra, sizeof ra);
    assert_string_equal(ra, "5");
    free(body);
    free(headers);
    /* another name is not throttled */
    json_t *ans =
        call(f, "common.db.login", json_pack("[s,{s:s},s]", "auditor", "password", "x", "en"));
    assert_string_equal(error_name(ans), "LoginException");
    json_decref(ans);
    assert_int_equal(simc_stat(f->port, "answers_429"), 1);
}

static void test_spa_login_delay_resets(void **state)
{
    struct fx *f = *state;
    json_t *ans =
        call(f, "common.db.login", json_pack("[s,{s:s},s]", "clerk", "password", "guess", "en"));
    json_decref(ans);
    /* the waits as the simulator held them back (stalled_ms), not as a busy machine's clock
     * stretches them */
    long long stalled = simc_stat(f->port, "stalled_ms");
    long long t0 = now_ms();
    login(f); /* waits 200 ms, then a success resets the run */
    assert_true(now_ms() - t0 >= 190);
    assert_int_equal(simc_stat(f->port, "stalled_ms") - stalled, 200);
    login(f);
    assert_int_equal(simc_stat(f->port, "stalled_ms") - stalled, 200); /* no wait */
}

static void test_spa_unauthorized(void **state)
{
    struct fx *f = *state;
    char *body = NULL, *headers = NULL, hdr[512];
    login(f);
    json_t *res = result(f, "model.res.user.get_preferences", json_pack("[b,{}]", 1));
    json_decref(res);
    struct {
        const char *what;
        char header[512];
    } cases[4];
    int n = 0;
    snprintf(cases[n].header, sizeof cases[n].header, "X-Nothing: 1");
    cases[n++].what = "no header";
    session_header(cases[n].header, sizeof cases[n].header, "clerk", 1,
                   "0123456789abcdef0123456789abcdef");
    cases[n++].what = "a forged token";
    snprintf(cases[n].header, sizeof cases[n].header, "Authorization: Basic Y2xlcms6YWNtZS1kZW1v");
    cases[n++].what = "HTTP Basic";
    snprintf(cases[n].header, sizeof cases[n].header, "Authorization: Session !!!");
    cases[n++].what = "not base64";
    for (int i = 0; i < n; i++) {
        long st = call_as(f, cases[i].header, "model.res.user.get_preferences",
                          json_pack("[b,{}]", 1), NULL, &body, &headers);
        if (st != 401)
            fail_msg("%s: HTTP %ld", cases[i].what, st);
        assert_html(st, 401, body, headers);
        free(body);
        free(headers);
    }
    /* a real token, but for another user or uid */
    char plain[400] = "";
    json_t *r = result(f, "common.db.login",
                       json_pack("[s,{s:s},s]", "clerk", "password", "acme-demo", "en"));
    snprintf(plain, sizeof plain, "%s", json_string_value(json_array_get(r, 1)));
    json_decref(r);
    session_header(hdr, sizeof hdr, "auditor", 1, plain);
    assert_int_equal(
        call_as(f, hdr, "model.res.user.get_preferences", json_pack("[b,{}]", 1), NULL, NULL, NULL),
        401);
    session_header(hdr, sizeof hdr, "clerk", 2, plain);
    assert_int_equal(
        call_as(f, hdr, "model.res.user.get_preferences", json_pack("[b,{}]", 1), NULL, NULL, NULL),
        401);
    session_header(hdr, sizeof hdr, "clerk", 1, plain);
    json_t *ans = NULL;
    assert_int_equal(
        call_as(f, hdr, "model.res.user.get_preferences", json_pack("[b,{}]", 1), &ans, NULL, NULL),
        200);
    json_decref(ans);
    /* nothing was processed without a session: no draft */
    assert_int_equal(call_as(f, NULL, "model.account.invoice.create",
                             json_pack("[[o],O]", invoice("AP1-unauth", "INV-U"), f->context), NULL,
                             NULL, NULL),
                     401);
    assert_int_equal(simc_count_rows(f->port), 0);
    /* a method that does not exist or may not be called: 403 with a session, 401 without */
    long st = call_as(f, f->auth, "model.account.invoice.delete",
                      json_pack("[[i],O]", 1, f->context), NULL, &body, &headers);
    assert_html(st, 403, body, headers);
    free(body);
    free(headers);
    assert_int_equal(
        call_as(f, f->auth, "model.res.user.set_preferences", json_pack("[{}]"), NULL, NULL, NULL),
        403);
    assert_int_equal(
        call_as(f, NULL, "model.account.invoice.delete", json_pack("[[i]]", 1), NULL, NULL, NULL),
        401);
}

static void test_spa_write_idle(void **state)
{
    struct fx *f = *state;
    assert_int_equal(simc_set(f->port, "write_idle_s", "1"), 0);
    login(f);
    sleep_ms(1300);
    /* a read after the idle time still works */
    json_t *ans = NULL;
    assert_int_equal(call_as(f, f->auth, "model.party.party.search_read",
                             json_pack("[[[s,s,s]]]", "code", "=", "100001"), &ans, NULL, NULL),
                     200);
    assert_int_equal(json_array_size(json_object_get(ans, "result")), 1);
    json_decref(ans);
    /* but the read does not make it fit to write: refused with 401, the session ends, nothing
     * stored */
    char *body = NULL, *headers = NULL;
    long st = call_as(f, f->auth, "model.account.invoice.create",
                      json_pack("[[o],O]", invoice("AP1-idle", "INV-I"), f->context), NULL, &body,
                      &headers);
    assert_html(st, 401, body, headers);
    free(body);
    free(headers);
    assert_int_equal(simc_count_rows(f->port), 0);
    assert_int_equal(
        call_as(f, f->auth, "model.party.party.search_read", json_pack("[[]]"), NULL, NULL, NULL),
        401);
    /* a fresh login may write; a write keeps it fit to write, reads do not */
    login(f);
    long long id = create_ok(f, invoice("AP1-idle", "INV-I"));
    sleep_ms(650);
    assert_int_equal(
        call_as(f, f->auth, "model.party.party.search_read", json_pack("[[]]"), NULL, NULL, NULL),
        200);
    sleep_ms(650);
    assert_int_equal(call_as(f, f->auth, "model.account.invoice.post",
                             json_pack("[[I],O]", (json_int_t)id, f->context), NULL, NULL, NULL),
                     401);
    json_t *d = document_id(f, id);
    assert_string_equal(col(d, "status"), "draft");
    json_decref(d);
}

static void test_spa_session_max_requests(void **state)
{
    struct fx *f = *state;
    assert_int_equal(simc_set(f->port, "session_max_requests", "3"), 0);
    login(f); /* get_preferences is the first call */
    json_decref(result(f, "model.account.journal.search_read", json_pack("[[]]")));
    json_decref(result(f, "model.account.journal.search_read", json_pack("[[]]")));
    assert_int_equal(call_as(f, f->auth, "model.account.journal.search_read", json_pack("[[]]"),
                             NULL, NULL, NULL),
                     401);
}

static void test_spa_session_expiry_fault(void **state)
{
    struct fx *f = *state;
    json_t *res = result(f, "common.db.login",
                         json_pack("[s,{s:s},s]", "clerk", "password", "acme-demo", "en"));
    session_header(f->auth, sizeof f->auth, "clerk", 1, json_string_value(json_array_get(res, 1)));
    json_decref(res);
    /* on the session's first call the fault is deferred to the next */
    assert_int_equal(simc_fault(f->port, "session_expiry", 1), 0);
    json_decref(result(f, "model.res.user.get_preferences", json_pack("[b,{}]", 1)));
    assert_int_equal(call_as(f, f->auth, "model.account.journal.search_read", json_pack("[[]]"),
                             NULL, NULL, NULL),
                     401);
    /* later on it ends the session at once */
    login(f);
    assert_int_equal(simc_fault(f->port, "session_expiry", 1), 0);
    char *body = NULL, *headers = NULL;
    long st = call_as(f, f->auth, "model.account.journal.search_read", json_pack("[[]]"), NULL,
                      &body, &headers);
    assert_html(st, 401, body, headers);
    free(body);
    free(headers);
    assert_int_equal(simc_stat(f->port, "session_expiry"), 2);
}

/* ---- the context ------------------------------------------------------------------------------
 */

static void test_spa_context_required(void **state)
{
    struct fx *f = *state;
    login(f);
    const char *msg = "The company is missing from the context.";
    /* no context, another company, a company that is not the integer 1 */
    assert_user_error(
        call(f, "model.account.invoice.create", json_pack("[[o]]", invoice("AP1-ctx", "INV-C"))),
        msg);
    assert_user_error(call(f, "model.account.invoice.create",
                           json_pack("[[o],{s:i}]", invoice("AP1-ctx", "INV-C"), "company", 2)),
                      msg);
    assert_user_error(call(f, "model.account.invoice.create",
                           json_pack("[[o],{s:s}]", invoice("AP1-ctx", "INV-C"), "company", "1")),
                      msg);
    assert_int_equal(simc_count_rows(f->port), 0);
    long long id = create_ok(f, invoice("AP1-ctx", "INV-C"));
    assert_user_error(call(f, "model.account.invoice.post", json_pack("[[I],{}]", (json_int_t)id)),
                      msg);
    assert_user_error(call(f, "model.account.invoice.post", json_pack("[[I]]", (json_int_t)id)),
                      msg);
    json_t *d = document_id(f, id);
    assert_string_equal(col(d, "status"), "draft");
    json_decref(d);
}

/* ---- search_read ------------------------------------------------------------------------------
 */

static void test_spa_reference_models(void **state)
{
    struct fx *f = *state;
    login(f);
    /* parties: vendor 1000NN is party NN with address 1000 + NN; fields null = all */
    json_t *r = search_read(f, "party.party",
                            json_pack("[[s,s,[s,s]]]", "code", "in", "100001", "100090"), NULL);
    json_t *want = json_pack("[{s:i,s:s,s:s,s:[i],s:b},{s:i,s:s,s:s,s:[i],s:b}]", "id", 1, "code",
                             "100001", "name", "Nordwind Bürobedarf GmbH", "addresses", 1001,
                             "blocked", 0, "id", 90, "code", "100090", "name",
                             "Insolvent Handels GmbH", "addresses", 1090, "blocked", 1);
    assert_true(json_equal(r, want));
    json_decref(r);
    json_decref(want);
    /* an address finds its party */
    r = search_read(f, "party.party", json_pack("[[s,s,i]]", "addresses", "=", 1040),
                    json_pack("[s]", "code"));
    want = json_pack("[{s:i,s:s}]", "id", 40, "code", "100040");
    assert_true(json_equal(r, want));
    json_decref(r);
    json_decref(want);
    /* accounts: 4000..6999 numbered from 1 in code order; the chart's names */
    r = search_read(f, "account.account",
                    json_pack("[[s,s,[s,s,s]]]", "code", "in", "6000", "5700", "4000"), NULL);
    want = json_pack("[{s:i,s:s,s:s,s:s},{s:i,s:s,s:s,s:s},{s:i,s:s,s:s,s:s}]", "id", 1, "code",
                     "4000", "name", "Cost of Goods Sold", "type", "expense", "id", 1701, "code",
                     "5700", "name", "Office Supplies", "type", "expense", "id", 2001, "code",
                     "6000", "name", "General Expenses", "type", "expense");
    assert_true(json_equal(r, want));
    json_decref(r);
    json_decref(want);
    /* journals REV 1, EXP 2 */
    r = search_read(f, "account.journal", json_pack("[]"), NULL);
    want = json_pack("[{s:i,s:s},{s:i,s:s}]", "id", 1, "code", "REV", "id", 2, "code", "EXP");
    assert_true(json_equal(r, want));
    json_decref(r);
    json_decref(want);
    /* currencies in master order, digits the exponent */
    r = search_read(f, "currency.currency",
                    json_pack("[[s,s,[s,s,s]]]", "code", "in", "EUR", "JPY", "KWD"),
                    json_pack("[s,s]", "digits", "code"));
    want = json_pack("[{s:i,s:i,s:s},{s:i,s:i,s:s},{s:i,s:i,s:s}]", "id", 1, "digits", 2, "code",
                     "EUR", "id", 10, "digits", 0, "code", "JPY", "id", 11, "digits", 3, "code",
                     "KWD");
    assert_true(json_equal(r, want));
    json_decref(r);
    json_decref(want);
    assert_int_equal(simc_stat(f->port, "read"), 5);
}

static size_t count_of(struct fx *f, const char *model, json_t *domain)
{
    json_t *r = search_read(f, model, domain, json_pack("[]"));
    size_t n = json_array_size(r);
    json_decref(r);
    return n;
}

static void test_spa_domains(void **state)
{
    struct fx *f = *state;
    login(f);
    /* = != >= <= in, and every condition must hold */
    assert_int_equal(count_of(f, "party.party", json_pack("[[s,s,s]]", "code", "=", "100005")), 1);
    assert_int_equal(count_of(f, "party.party", json_pack("[[s,s,s]]", "code", "!=", "100005")),
                     40);
    assert_int_equal(count_of(f, "account.account", json_pack("[[s,s,s]]", "code", ">=", "6990")),
                     10);
    assert_int_equal(
        count_of(f, "account.account",
                 json_pack("[[s,s,s],[s,s,s]]", "code", ">=", "5000", "code", "<=", "5009")),
        10);
    assert_int_equal(count_of(f, "party.party", json_pack("[[s,s,b]]", "blocked", "=", 1)), 1);
    assert_int_equal(count_of(f, "currency.currency", json_pack("[[s,s,i]]", "digits", ">=", 3)),
                     2);
    assert_int_equal(count_of(f, "party.party", json_pack("[[s,s,[i,i,i]]]", "id", "in", 1, 2, 77)),
                     2);
    /* ilike: % any run, _ one character, case-insensitive (Latin letters too), \ literal */
    assert_int_equal(count_of(f, "party.party", json_pack("[[s,s,s]]", "name", "ilike", "%BÜRO%")),
                     2); /* Bürobedarf, Büromöbel */
    assert_int_equal(
        count_of(f, "party.party", json_pack("[[s,s,s]]", "name", "ilike", "%müller%")), 1);
    assert_int_equal(count_of(f, "party.party", json_pack("[[s,s,s]]", "code", "ilike", "10000_")),
                     9);
    assert_int_equal(count_of(f, "party.party", json_pack("[[s,s,s]]", "code", "ilike", "1000%0")),
                     5); /* 100010 100020 100030 100040 100090 */
    assert_int_equal(count_of(f, "party.party", json_pack("[[s,s,s]]", "name", "ilike", "gmbh")),
                     0);
    assert_int_equal(count_of(f, "party.party", json_pack("[[s,s,s]]", "name", "ilike", "%&%")),
                     2); /* Alpen Druck & Medien, Fischer & Söhne */
    /* invoices: references with wildcard characters in them */
    long long a = create_ok(f, invoice("AP1-aaa_1", "INV-A"));
    long long b = create_ok(f, invoice("AP1-aab%2", "INV-B"));
    long long c = create_ok(f, invoice("ZZ-3", "INV-C"));
    post_ok(f, c);
    assert_int_equal(
        count_of(f, "account.invoice", json_pack("[[s,s,s]]", "reference", "ilike", "ap1-aa%")), 2);
    assert_int_equal(
        count_of(f, "account.invoice", json_pack("[[s,s,s]]", "reference", "ilike", "AP1-aa\\_1")),
        0);
    assert_int_equal(
        count_of(f, "account.invoice", json_pack("[[s,s,s]]", "reference", "ilike", "AP1-aaa\\_1")),
        1);
    assert_int_equal(
        count_of(f, "account.invoice", json_pack("[[s,s,s]]", "reference", "ilike", "%\\%%")), 1);
    assert_int_equal(count_of(f, "account.invoice", json_pack("[[s,s,n]]", "number", "=")),
                     2); /* drafts */
    assert_int_equal(count_of(f, "account.invoice", json_pack("[[s,s,s]]", "state", "=", "posted")),
                     1);
    assert_int_equal(count_of(f, "account.invoice",
                              json_pack("[[s,s,o]]", "total_amount", ">=", dec("1234.56"))),
                     3);
    assert_int_equal(count_of(f, "account.invoice",
                              json_pack("[[s,s,o]]", "total_amount", ">=", dec("1234.561"))),
                     0);
    assert_int_equal(count_of(f, "account.invoice",
                              json_pack("[[s,s,o]]", "invoice_date", "<=", date(2026, 11, 2))),
                     0);
    assert_int_equal(count_of(f, "account.invoice",
                              json_pack("[[s,s,[I,I]]]", "id", "in", (json_int_t)a, (json_int_t)b)),
                     2);
    /* an unknown field or operator, a value of the wrong type: server exceptions */
    assert_server_error(
        call(f, "model.party.party.search_read", json_pack("[[[s,s,s]]]", "vat", "=", "x")),
        "KeyError: 'vat'");
    assert_server_error(
        call(f, "model.party.party.search_read", json_pack("[[[s,s,s]]]", "code", "like", "x")),
        "KeyError: 'like'");
    assert_server_error(call(f, "model.account.invoice.search_read",
                             json_pack("[[[s,s,s]]]", "total_amount", ">=", "1.00")),
                        "TypeError");
    assert_server_error(
        call(f, "model.party.party.search_read", json_pack("[[[s,s,i]]]", "code", "=", 100001)),
        "TypeError");
    assert_server_error(
        call(f, "model.party.party.search_read", json_pack("[[[s,s]]]", "code", "=")),
        "ValueError");
    assert_server_error(
        call(f, "model.party.party.search_read", json_pack("[[],i,n,n,[s]]", 0, "vat")),
        "KeyError: 'vat'");
}

static void test_spa_limits_and_order(void **state)
{
    struct fx *f = *state;
    login(f);
    /* 3000 accounts: 100 at most, LIMIT null or above 100 alike, cut silently */
    json_t *r = search_read(f, "account.account", json_pack("[]"), json_pack("[s]", "code"));
    assert_int_equal(json_array_size(r), 100);
    assert_string_equal(json_string_value(json_object_get(json_array_get(r, 0), "code")), "4000");
    json_decref(r);
    r = result(f, "model.account.account.search_read",
               json_pack("[[],i,i,n,[s],O]", 0, 500, "code", f->context));
    assert_int_equal(json_array_size(r), 100);
    json_decref(r);
    r = result(f, "model.account.account.search_read",
               json_pack("[[],i,i,n,[s],O]", 2995, 50, "code", f->context));
    assert_int_equal(json_array_size(r), 5);
    assert_string_equal(json_string_value(json_object_get(json_array_get(r, 4), "code")), "6999");
    json_decref(r);
    r = result(f, "model.account.account.search_read",
               json_pack("[[],i,i,[[s,s]],[s],O]", 10, 3, "code", "DESC", "code", f->context));
    assert_int_equal(json_array_size(r), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(r, 0), "code")), "6989");
    json_decref(r);
    /* fewer params: the context alone after the domain */
    r = result(f, "model.currency.currency.search_read", json_pack("[[],O]", f->context));
    assert_int_equal(json_array_size(r), 12);
    json_decref(r);
    /* the scenario's search_max_rows */
    assert_int_equal(simc_set(f->port, "search_max_rows", "7"), 0);
    r = search_read(f, "account.account", json_pack("[]"), NULL);
    assert_int_equal(json_array_size(r), 7);
    json_decref(r);
    r = result(f, "model.account.account.search_read",
               json_pack("[[],i,i,n,n,O]", 0, 3, f->context));
    assert_int_equal(json_array_size(r), 3);
    json_decref(r);
    assert_server_error(call(f, "model.account.account.search_read",
                             json_pack("[[],i,i,n,n,O]", -1, 3, f->context)),
                        "TypeError");
    assert_server_error(call(f, "model.account.account.search_read",
                             json_pack("[[],i,i,[[s,s]],n,O]", 0, 3, "code", "UP", f->context)),
                        "ValueError");
}

static void test_spa_invoice_fields(void **state)
{
    struct fx *f = *state;
    login(f);
    long long id = create_ok(f, invoice("AP1-fields", "INV-F"));
    json_t *r =
        search_read(f, "account.invoice", json_pack("[[s,s,I]]", "id", "=", (json_int_t)id), NULL);
    assert_int_equal(json_array_size(r), 1);
    json_t *inv = json_array_get(r, 0);
    assert_int_equal(json_integer_value(json_object_get(inv, "id")), id);
    assert_true(json_is_null(json_object_get(inv, "number")));
    assert_string_equal(json_string_value(json_object_get(inv, "state")), "draft");
    json_decref(r);
    post_ok(f, id);
    r = search_read(f, "account.invoice", json_pack("[[s,s,s]]", "reference", "=", "AP1-fields"),
                    NULL);
    assert_int_equal(json_array_size(r), 1);
    inv = json_array_get(r, 0);
    char number[32];
    snprintf(number, sizeof number, "%06lld", id);
    const char *num = json_string_value(json_object_get(inv, "number"));
    assert_non_null(num);
    assert_int_equal(strlen(num), strlen("AP-2026-000001"));
    assert_true(strncmp(num, "AP-", 3) == 0);
    assert_string_equal(num + 8, number);
    json_t *want = json_pack("{s:s,s:s,s:s,s:s,s:o,s:s,s:o,s:o,s:s,s:s}", "reference", "AP1-fields",
                             "supplier_invoice", "INV-F", "party.code", "100001", "party.name",
                             "Nordwind Bürobedarf GmbH", "invoice_date", date(2026, 11, 3),
                             "currency.code", "EUR", "total_amount", dec("1234.56"), "tax_amount",
                             dec("200.00"), "document_type", "invoice", "state", "posted");
    const char *key;
    json_t *v;
    json_object_foreach(want, key, v)
    {
        if (!json_equal(json_object_get(inv, key), v))
            fail_msg("field %s differs", key);
    }
    json_decref(want);
    /* the post date is the booking date (local), tagged */
    json_t *pd = json_object_get(inv, "post_date");
    assert_string_equal(json_string_value(json_object_get(pd, "__class__")), "date");
    json_t *d = document_id(f, id);
    char iso[16];
    snprintf(iso, sizeof iso, "%04d-%02d-%02d",
             (int)json_integer_value(json_object_get(pd, "year")),
             (int)json_integer_value(json_object_get(pd, "month")),
             (int)json_integer_value(json_object_get(pd, "day")));
    assert_string_equal(col(d, "booked_date"), iso);
    assert_string_equal(col(d, "doc"), num);
    json_decref(d);
    assert_int_equal(json_object_size(inv), 13); /* id and the 12 fields */
    json_decref(r);
}

static void test_spa_index_lag(void **state)
{
    struct fx *f = *state;
    assert_int_equal(simc_set(f->port, "index_lag_ms", "1500"), 0);
    login(f);
    long long id = create_ok(f, invoice("AP1-lag", "INV-L"));
    /* not yet by reference; at once by id */
    assert_int_equal(
        count_of(f, "account.invoice", json_pack("[[s,s,s]]", "reference", "=", "AP1-lag")), 0);
    assert_int_equal(
        count_of(f, "account.invoice", json_pack("[[s,s,I]]", "id", "=", (json_int_t)id)), 1);
    sleep_ms(1600);
    assert_int_equal(
        count_of(f, "account.invoice", json_pack("[[s,s,s]]", "reference", "=", "AP1-lag")), 1);
    assert_int_equal(simc_stat(f->port, "search"), 3);
}

static void test_spa_search_garbled(void **state)
{
    struct fx *f = *state;
    login(f);
    create_ok(f, invoice("AP1-garbled", "INV-G"));
    assert_int_equal(simc_fault(f->port, "search_garbled", 1), 0);
    /* a search without criteria, or of another model, is not eligible */
    json_decref(search_read(f, "account.invoice", json_pack("[]"), NULL));
    json_decref(search_read(f, "party.party", json_pack("[[s,s,s]]", "code", "=", "100001"), NULL));
    char *body = NULL, *full = NULL;
    json_t *ans = NULL;
    json_t *domain = json_pack("[[s,s,s]]", "reference", "=", "AP1-garbled");
    long st = call_as(f, f->auth, "model.account.invoice.search_read",
                      json_pack("[O,i,n,n,n,O]", domain, 0, f->context), &ans, &body, NULL);
    assert_int_equal(st, 200);
    assert_null(ans); /* cut in the middle: not JSON */
    assert_true(strncmp(body, "{\"id\":", 6) == 0);
    f->next_id--; /* the same id again: the whole answer */
    st = call_as(f, f->auth, "model.account.invoice.search_read",
                 json_pack("[O,i,n,n,n,O]", domain, 0, f->context), &ans, &full, NULL);
    assert_int_equal(st, 200);
    assert_non_null(ans);
    assert_int_equal(strlen(body), strlen(full) / 2);
    assert_true(strncmp(body, full, strlen(body)) == 0);
    json_decref(ans);
    json_decref(domain);
    free(body);
    free(full);
    assert_int_equal(simc_stat(f->port, "search_garbled"), 1);
}

/* ---- create and post ---------------------------------------------------------------------------
 */

/* The ledger.csv row of document doc (its fields after doc), or fails. */
static void ledger_row(struct fx *f, const char *doc, char *dst, size_t len)
{
    char *csv = NULL;
    assert_int_equal(simc_ledger(f->port, &csv), 0);
    char needle[64];
    snprintf(needle, sizeof needle, "\n%s,", doc);
    const char *p = strstr(csv, needle);
    if (!p)
        fail_msg("%s not in the ledger:\n%s", doc, csv);
    p += strlen(needle);
    const char *eol = strchr(p, '\n');
    snprintf(dst, len, "%.*s", (int)(eol ? eol - p : (long)strlen(p)), p);
    free(csv);
}

static void test_spa_create_and_post(void **state)
{
    struct fx *f = *state;
    login(f);
    long long id = create_ok(f, invoice("AP1-create", "INV-1"));
    json_t *d = document_id(f, id);
    assert_non_null(d);
    char doc[32], row[512];
    snprintf(doc, sizeof doc, "%s", col(d, "doc"));
    ledger_row(f, doc, row, sizeof row);
    static const char head[] = "100001,INV-1,2026-11-03,EUR,1234.56,AP1-create,";
    assert_true(strncmp(row, head, strlen(head)) == 0); /* then the booking time */
    assert_true(strlen(row) > 10 && strcmp(row + strlen(row) - 6, ",draft") == 0);
    /* the draft's columns and lines */
    assert_string_equal(col(d, "doc_type"), "KR");
    assert_string_equal(col(d, "vendor_id"), "V-000001");
    assert_string_equal(col(d, "due_date"), "2026-12-03");
    assert_string_equal(col(d, "gl_account"), "5700");
    assert_string_equal(col(d, "memo"), "spa test");
    assert_int_equal(json_integer_value(json_object_get(d, "amount")), 123456);
    assert_int_equal(json_integer_value(json_object_get(d, "tax")), 20000);
    assert_int_equal(json_integer_value(json_object_get(d, "exp")), 2);
    json_t *lines = json_object_get(d, "lines");
    assert_int_equal(json_array_size(lines), 2);
    assert_string_equal(col(json_array_get(lines, 1), "gl_account"), "6000");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(lines, 1), "amount")), 3456);
    assert_string_equal(col(json_array_get(lines, 1), "description"), "Toner");
    json_decref(d);
    char *csv = NULL;
    assert_int_equal(simc_lines(f->port, &csv), 0);
    char want[256];
    snprintf(want, sizeof want, "%s,1,5700,1000.00,Paper\n%s,2,6000,34.56,Toner\n", doc, doc);
    assert_non_null(strstr(csv, want));
    free(csv);
    /* post: the number; posting again is no error */
    post_ok(f, id);
    char status[16];
    assert_int_equal(simc_doc_status(f->port, doc, status, sizeof status), 0);
    assert_string_equal(status, "posted");
    post_ok(f, id);
    /* an unknown id: UserError, and nothing of the call posted */
    long long other = create_ok(f, invoice("AP1-create-2", "INV-2"));
    assert_user_error(
        call(f, "model.account.invoice.post",
             json_pack("[[I,I],O]", (json_int_t)other, (json_int_t)999999, f->context)),
        "Invoice 999999 does not exist.");
    d = document_id(f, other);
    assert_string_equal(col(d, "status"), "draft");
    json_decref(d);
    assert_server_error(
        call(f, "model.account.invoice.post", json_pack("[[s],O]", "1", f->context)), "TypeError");
    assert_int_equal(simc_stat(f->port, "create"), 2);
    assert_int_equal(simc_stat(f->port, "approve"), 4);
    assert_int_equal(simc_stat(f->port, "approvals"), 1);
    assert_int_equal(simc_stat(f->port, "drafts"), 1);
}

static void test_spa_create_twice(void **state)
{
    struct fx *f = *state;
    login(f);
    long long a = create_ok(f, invoice("AP1-twice", "INV-T"));
    long long b = create_ok(f, invoice("AP1-twice", "INV-T"));
    assert_int_not_equal(a, b);
    assert_int_equal(simc_count_reference(f->port, "AP1-twice"), 2);
    json_t *res = result(f, "model.account.invoice.post",
                         json_pack("[[I,I],O]", (json_int_t)a, (json_int_t)b, f->context));
    json_decref(res);
    assert_int_equal(simc_stat(f->port, "approvals"), 2);
    assert_int_equal(simc_stat(f->port, "reposts_of_booked"), 1);
}

/* A copy of the standard invoice with key set to value (stolen). */
static json_t *with(json_t *values, const char *key, json_t *value)
{
    json_object_set_new(values, key, value);
    return values;
}

static json_t *lines_of(int n, int account, const char *amount)
{
    json_t *list = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(list, json_pack("{s:i,s:s,s:o}", "account", account, "description",
                                              "x", "unit_price", dec(amount)));
    return json_pack("[[s,o]]", "create", list);
}

static void test_spa_user_errors(void **state)
{
    struct fx *f = *state;
    login(f);
    assert_user_error(create(f, with(invoice("R", "I"), "party", json_integer(4242))),
                      "Party 4242 does not exist.");
    assert_user_error(create(f, with(with(invoice("R", "I"), "party", json_integer(90)),
                                     "invoice_address", json_integer(1090))),
                      "Party \"Insolvent Handels GmbH\" is blocked.");
    assert_user_error(create(f, with(invoice("R", "I"), "invoice_address", json_integer(1002))),
                      "Address 1002 does not belong to party \"Nordwind Bürobedarf GmbH\".");
    assert_user_error(create(f, with(invoice("R", "I"), "journal", json_integer(3))),
                      "Journal 3 does not exist.");
    assert_user_error(create(f, with(invoice("R", "I"), "currency", json_integer(13))),
                      "Currency 13 does not exist.");
    assert_user_error(create(f, with(invoice("R", "I"), "lines", lines_of(1, 3001, "1.00"))),
                      "Account 3001 does not exist.");
    assert_user_error(create(f, with(invoice("R", "I"), "lines", json_pack("[[s,[]]]", "create"))),
                      "An invoice needs at least one line.");
    assert_user_error(create(f, with(invoice("R", "I"), "lines", json_pack("[]"))),
                      "An invoice needs at least one line.");
    assert_user_error(create(f, with(invoice("R", "I"), "lines", lines_of(51, ACCOUNT_6000, "1"))),
                      "An invoice has at most 50 lines.");
    assert_user_error(
        create(f, with(invoice("R", "I"), "lines", lines_of(1, ACCOUNT_6000, "10.505"))),
        "The amount 10.505 has more decimals than EUR allows.");
    assert_user_error(create(f, with(invoice("R", "I"), "tax_amount", dec("1.000"))),
                      "The amount 1.000 has more decimals than EUR allows.");
    assert_user_error(
        create(f, with(with(invoice("R", "I"), "currency", json_integer(CURRENCY_JPY)),
                       "tax_amount", dec("0"))),
        "The amount 1000.00 has more decimals than JPY allows.");
    assert_user_error(create(f, with(invoice("R", "I"), "invoice_date", date(2026, 3, 15))),
                      "The invoice date 15.03.2026 is in a closed period.");
    /* the order: the first failing check speaks */
    assert_user_error(create(f, with(with(invoice("R", "I"), "party", json_integer(4242)),
                                     "journal", json_integer(3))),
                      "Party 4242 does not exist.");
    assert_user_error(create(f, with(with(invoice("R", "I"), "journal", json_integer(9)), "lines",
                                     lines_of(60, 99999, "1"))),
                      "Journal 9 does not exist.");
    assert_user_error(create(f, with(invoice("R", "I"), "lines", lines_of(60, 99999, "1"))),
                      "Account 99999 does not exist.");
    assert_int_equal(simc_count_rows(f->port), 0);

    /* duplicate_check: the supplier invoice of the party */
    long long first = create_ok(f, invoice("AP1-dup-1", "INV-DUP"));
    assert_int_equal(simc_set(f->port, "duplicate_check", "on"), 0);
    assert_user_error(create(f, invoice("AP1-dup-2", "INV-DUP")),
                      "Supplier invoice INV-DUP already exists for party \"Nordwind Bürobedarf "
                      "GmbH\".");
    assert_int_equal(simc_set(f->port, "duplicate_check", "off"), 0);
    /* reference_guard: the draft by id, a posted invoice by number (AP1- references only) */
    assert_int_equal(simc_set(f->port, "reference_guard", "on"), 0);
    char msg[128];
    snprintf(msg, sizeof msg, "Reference AP1-dup-1 is already used by %lld.", first);
    assert_user_error(create(f, invoice("AP1-dup-1", "INV-OTHER")), msg);
    post_ok(f, first);
    json_t *d = document_id(f, first);
    snprintf(msg, sizeof msg, "Reference AP1-dup-1 is already used by %s.", col(d, "doc"));
    json_decref(d);
    assert_user_error(create(f, invoice("AP1-dup-1", "INV-OTHER")), msg);
    create_ok(f, invoice("XX-not-guarded", "INV-X1"));
    create_ok(f, invoice("XX-not-guarded", "INV-X2"));
    assert_int_equal(simc_count_rows(f->port), 3);
}

static void test_spa_wrong_types(void **state)
{
    struct fx *f = *state;
    login(f);
    json_t *line_str =
        json_pack("[[s,[{s:i,s:s}]]]", "create", "account", ACCOUNT_6000, "unit_price", "100.00");
    json_t *line_num =
        json_pack("[[s,[{s:i,s:f}]]]", "create", "account", ACCOUNT_6000, "unit_price", 100.5);
    json_t *line_acc =
        json_pack("[[s,[{s:o,s:o}]]]", "create", "account", dec("2001"), "unit_price", dec("1.00"));
    struct {
        json_t *values;
        const char *prefix;
    } cases[] = {
        {with(invoice("R", "I"), "lines", line_str), "TypeError"},
        {with(invoice("R", "I"), "lines", line_num), "TypeError"},
        {with(invoice("R", "I"), "lines", line_acc), "TypeError"},
        {with(invoice("R", "I"), "tax_amount", json_string("2.00")), "TypeError"},
        {with(invoice("R", "I"), "tax_amount", json_integer(2)), "TypeError"},
        {with(invoice("R", "I"), "invoice_date", json_string("2026-11-03")), "TypeError"},
        {with(invoice("R", "I"), "party", dec("1")), "TypeError"},
        {with(invoice("R", "I"), "party", json_string("1")), "TypeError"},
        {with(invoice("R", "I"), "reference", json_integer(5)), "TypeError"},
        {with(invoice("R", "I"), "invoice_date", date(2026, 2, 30)), "ValueError"},
        {with(invoice("R", "I"), "tax_amount", dec("1,5")), "decimal.InvalidOperation"},
        {with(invoice("R", "I"), "tax_amount", dec("1e3")), "decimal.InvalidOperation"},
        {with(invoice("R", "I"), "tax_amount", dec("1234567890123456")), "ValueError"},
        {with(invoice("R", "I"), "comment", json_stringn("a\0b", 3)), "ValueError"},
        {with(invoice("R", "I"), "document_type", json_string("receipt")), "ValueError"},
        {with(invoice("R", "I"), "type", json_string("out")), "ValueError"},
        {with(invoice("R", "I"), "vat_code", json_string("x")), "KeyError: 'vat_code'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *ans = create(f, cases[i].values);
        if (strcmp(error_name(ans), "UserError") == 0 || !json_object_get(ans, "error"))
            fail_msg("case %zu: not a server exception", i);
        assert_server_error(ans, cases[i].prefix);
    }
    json_t *missing = invoice("R", "I");
    json_object_del(missing, "party");
    assert_server_error(create(f, missing), "KeyError: 'party'");
    /* more than one invoice per call, or none */
    assert_server_error(
        call(f, "model.account.invoice.create",
             json_pack("[[o,o],O]", invoice("R", "I"), invoice("R", "J"), f->context)),
        "ValueError");
    assert_server_error(call(f, "model.account.invoice.create", json_pack("[{},O]", f->context)),
                        "TypeError");
    assert_int_equal(simc_count_rows(f->port), 0);
    /* the decimal text is exact: 0.1 + 0.2 is 0.3, never a double */
    json_t *v = with(invoice("AP1-exact", "INV-E"), "lines",
                     json_pack("[[s,[{s:i,s:o},{s:i,s:o}]]]", "create", "account", ACCOUNT_6000,
                               "unit_price", dec("0.1"), "account", ACCOUNT_6000, "unit_price",
                               dec("0.2")));
    json_object_del(v, "tax_amount");
    long long id = create_ok(f, v);
    json_t *d = document_id(f, id);
    assert_int_equal(json_integer_value(json_object_get(d, "amount")), 30);
    json_decref(d);
}

static void test_spa_strings_stored(void **state)
{
    struct fx *f = *state;
    login(f);
    const char *comment = "He said \"hi\" \\ and left\nline two: Grüße, Ærø, ✓";
    const char *ref = "AP1-\"q\\\nü";
    const char *inv = "INV/\"ü\\";
    json_t *v = invoice(ref, inv);
    json_object_set_new(v, "comment", json_string(comment));
    json_object_set_new(v, "lines",
                        json_pack("[[s,[{s:i,s:s,s:i,s:o}]]]", "create", "account", ACCOUNT_6000,
                                  "description", comment, "quantity", 1, "unit_price",
                                  dec("1034.56")));
    long long id = create_ok(f, v);
    json_t *d = document_id(f, id);
    assert_string_equal(col(d, "memo"), comment);
    assert_string_equal(col(d, "reference"), ref);
    assert_string_equal(col(d, "invoice_number"), inv);
    assert_string_equal(col(json_array_get(json_object_get(d, "lines"), 0), "description"),
                        comment);
    json_decref(d);
    /* read back through search_read too */
    json_t *r = search_read(f, "account.invoice", json_pack("[[s,s,s]]", "reference", "=", ref),
                            json_pack("[s]", "supplier_invoice"));
    assert_int_equal(json_array_size(r), 1);
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(r, 0), "supplier_invoice")), inv);
    json_decref(r);
    /* cut to the field's length in characters, not bytes; never trimmed */
    char long_comment[1024] = "", long_ref[256] = "  ", want_memo[1024] = "", want_ref[256] = "  ";
    for (int i = 0; i < 250; i++)
        strcat(long_comment, "é");
    for (int i = 0; i < 200; i++)
        strcat(want_memo, "é");
    for (int i = 0; i < 50; i++)
        strcat(long_ref, "ß");
    for (int i = 0; i < 38; i++)
        strcat(want_ref, "ß");
    v = invoice(long_ref, "INV-LONG");
    json_object_set_new(v, "comment", json_string(long_comment));
    id = create_ok(f, v);
    d = document_id(f, id);
    assert_string_equal(col(d, "memo"), want_memo);
    assert_string_equal(col(d, "reference"), want_ref);
    json_decref(d);
}

static void test_spa_currencies_and_dates(void **state)
{
    struct fx *f = *state;
    login(f);
    /* a credit note: amounts positive, document type KG */
    json_t *v = with(invoice("AP1-credit", "CN-1"), "document_type", json_string("credit_note"));
    long long id = create_ok(f, v);
    json_t *d = document_id(f, id);
    assert_string_equal(col(d, "doc_type"), "KG");
    assert_int_equal(json_integer_value(json_object_get(d, "amount")), 123456);
    json_decref(d);
    json_t *r = search_read(f, "account.invoice", json_pack("[[s,s,I]]", "id", "=", (json_int_t)id),
                            json_pack("[s]", "document_type"));
    assert_string_equal(json_string_value(json_object_get(json_array_get(r, 0), "document_type")),
                        "credit_note");
    json_decref(r);
    /* a due date given is kept */
    v = with(invoice("AP1-due", "DUE-1"), "due_date", date(2027, 1, 31));
    id = create_ok(f, v);
    d = document_id(f, id);
    assert_string_equal(col(d, "due_date"), "2027-01-31");
    json_decref(d);
    /* JPY without decimals, KWD with three; no tax */
    v = with(with(invoice("AP1-jpy", "JPY-1"), "currency", json_integer(CURRENCY_JPY)), "lines",
             lines_of(2, ACCOUNT_6000, "1200"));
    json_object_del(v, "tax_amount");
    id = create_ok(f, v);
    d = document_id(f, id);
    assert_string_equal(col(d, "currency"), "JPY");
    assert_int_equal(json_integer_value(json_object_get(d, "amount")), 2400);
    assert_int_equal(json_integer_value(json_object_get(d, "tax")), 0);
    json_decref(d);
    v = with(with(invoice("AP1-kwd", "KWD-1"), "currency", json_integer(CURRENCY_KWD)), "lines",
             lines_of(1, ACCOUNT_6000, "1.25"));
    json_object_set_new(v, "tax_amount", dec("0.125"));
    id = create_ok(f, v);
    char row[512], doc[32];
    d = document_id(f, id);
    snprintf(doc, sizeof doc, "%s", col(d, "doc"));
    json_decref(d);
    ledger_row(f, doc, row, sizeof row);
    static const char head[] = "100001,KWD-1,2026-11-03,KWD,1.375,AP1-kwd,";
    assert_true(strncmp(row, head, strlen(head)) == 0);
}

/* ---- commit faults -----------------------------------------------------------------------------
 */

static void test_spa_create_faults(void **state)
{
    struct fx *f = *state;
    login(f);
    char *body = NULL, *headers = NULL;
    json_t *ans = NULL;
    /* error500_before_commit: the 500 page, nothing booked */
    assert_int_equal(simc_fault(f->port, "error500_before_commit", 1), 0);
    long st =
        call_as(f, f->auth, "model.account.invoice.create",
                json_pack("[[o],O]", invoice("AP1-f1", "F1"), f->context), NULL, &body, &headers);
    assert_html(st, 500, body, headers);
    free(body);
    free(headers);
    assert_int_equal(simc_count_reference(f->port, "AP1-f1"), 0);
    /* error500_after_commit: the 500 page, booked */
    assert_int_equal(simc_fault(f->port, "error500_after_commit", 1), 0);
    st = call_as(f, f->auth, "model.account.invoice.create",
                 json_pack("[[o],O]", invoice("AP1-f2", "F2"), f->context), NULL, &body, &headers);
    assert_html(st, 500, body, headers);
    free(body);
    free(headers);
    assert_int_equal(simc_count_reference(f->port, "AP1-f2"), 1);
    /* drop_after_commit: no answer, booked */
    assert_int_equal(simc_fault(f->port, "drop_after_commit", 1), 0);
    st = call_as(f, f->auth, "model.account.invoice.create",
                 json_pack("[[o],O]", invoice("AP1-f3", "F3"), f->context), NULL, NULL, NULL);
    assert_int_equal(st, 0);
    assert_int_equal(simc_count_reference(f->port, "AP1-f3"), 1);
    /* garbled_after_commit: 200, the JSON cut in the middle, booked */
    assert_int_equal(simc_fault(f->port, "garbled_after_commit", 1), 0);
    st = call_as(f, f->auth, "model.account.invoice.create",
                 json_pack("[[o],O]", invoice("AP1-f4", "F4"), f->context), &ans, &body, NULL);
    assert_int_equal(st, 200);
    assert_null(ans);
    assert_true(strncmp(body, "{\"id\":", 6) == 0);
    assert_null(strstr(body, "result\":["));
    free(body);
    assert_int_equal(simc_count_reference(f->port, "AP1-f4"), 1);
    /* timeout_after_commit: the answer, after stall_ms (300), booked */
    assert_int_equal(simc_fault(f->port, "timeout_after_commit", 1), 0);
    long long t0 = now_ms();
    st = call_as(f, f->auth, "model.account.invoice.create",
                 json_pack("[[o],O]", invoice("AP1-f5", "F5"), f->context), &ans, NULL, NULL);
    assert_true(now_ms() - t0 >= 290);
    assert_int_equal(st, 200);
    assert_int_equal(json_array_size(json_object_get(ans, "result")), 1);
    json_decref(ans);
    assert_int_equal(simc_count_reference(f->port, "AP1-f5"), 1);
    /* late_commit: no answer, the draft stored late_commit_ms (200) later */
    assert_int_equal(simc_fault(f->port, "late_commit", 1), 0);
    st = call_as(f, f->auth, "model.account.invoice.create",
                 json_pack("[[o],O]", invoice("AP1-f6", "F6"), f->context), NULL, NULL, NULL);
    assert_int_equal(st, 0);
    assert_int_equal(simc_count_reference(f->port, "AP1-f6"), 0);
    assert_int_equal(simc_stat(f->port, "late_commits_pending"), 1);
    for (int i = 0; i < 100 && simc_count_reference(f->port, "AP1-f6") == 0; i++)
        sleep_ms(20);
    assert_int_equal(simc_count_reference(f->port, "AP1-f6"), 1);
    assert_int_equal(simc_stat(f->port, "drafts"), 5);
    assert_int_equal(simc_stat(f->port, "bookings"), 5);
}

static void test_spa_post_faults(void **state)
{
    struct fx *f = *state;
    login(f);
    static const char *const faults[] = {"error500_before_commit", "error500_after_commit",
                                         "drop_after_commit",      "garbled_after_commit",
                                         "timeout_after_commit",   "late_commit"};
    static const long want_status[] = {500, 500, 0, 200, 200, 0};
    static const bool posted_at_once[] = {false, true, true, true, true, false};
    for (int i = 0; i < 6; i++) {
        char ref[32];
        snprintf(ref, sizeof ref, "AP1-p%d", i);
        long long id = create_ok(f, invoice(ref, ref));
        assert_int_equal(simc_fault(f->port, faults[i], 1), 0);
        json_t *ans = NULL;
        char *body = NULL;
        long st = call_as(f, f->auth, "model.account.invoice.post",
                          json_pack("[[I],O]", (json_int_t)id, f->context), &ans, &body, NULL);
        if (st != want_status[i])
            fail_msg("%s: HTTP %ld", faults[i], st);
        if (i == 3)
            assert_null(ans); /* garbled: cut */
        if (i == 4)
            assert_true(json_is_null(json_object_get(ans, "result")));
        json_decref(ans);
        free(body);
        json_t *d = document_id(f, id);
        if (strcmp(col(d, "status"), posted_at_once[i] ? "posted" : "draft") != 0)
            fail_msg("%s: status %s", faults[i], col(d, "status"));
        json_decref(d);
    }
    /* the late approval lands */
    for (int i = 0; i < 100 && simc_stat(f->port, "drafts") > 1; i++)
        sleep_ms(20);
    assert_int_equal(simc_stat(f->port, "drafts"), 1); /* error500_before_commit's */
    assert_int_equal(simc_stat(f->port, "approvals"), 5);
}

static void test_spa_overload_and_down(void **state)
{
    struct fx *f = *state;
    char *body = NULL, *headers = NULL, ra[32];
    login(f);
    static const char *const names[] = {"overload503", "overload429"};
    static const long codes[] = {503, 429};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(simc_fault(f->port, names[i], 1), 0);
        long st = call_as(f, f->auth, "model.account.journal.search_read", json_pack("[[]]"), NULL,
                          &body, &headers);
        assert_html(st, codes[i], body, headers);
        header_value(headers, "Retry-After", ra, sizeof ra);
        assert_string_equal(ra, "1");
        free(body);
        free(headers);
    }
    /* the page too is a request like any */
    assert_int_equal(simc_fault(f->port, "overload503", 1), 0);
    assert_int_equal(raw(f, "GET", "/", NULL, NULL, NULL, NULL), 503);
    assert_int_equal(simc_fault(f->port, "drop_before_commit", 1), 0);
    assert_int_equal(call_as(f, f->auth, "model.account.invoice.create",
                             json_pack("[[o],O]", invoice("AP1-drop", "D"), f->context), NULL, NULL,
                             NULL),
                     0);
    assert_int_equal(simc_count_rows(f->port), 0);
    /* the down window drops every call; /_sim stays up */
    assert_int_equal(simc_set(f->port, "down.start_ms", "now"), 0);
    assert_int_equal(simc_set(f->port, "down.length_ms", "400"), 0);
    assert_int_equal(call_as(f, NULL, "common.db.login",
                             json_pack("[s,{s:s},s]", "clerk", "password", "acme-demo", "en"), NULL,
                             NULL, NULL),
                     0);
    assert_true(simc_stat(f->port, "down_dropped") >= 1);
    sleep_ms(450);
    json_decref(result(f, "model.account.journal.search_read", json_pack("[[]]")));
    assert_int_equal(simc_stat(f->port, "answers_503"), 2);
    assert_int_equal(simc_stat(f->port, "answers_429"), 1);
}

static void test_spa_reposts_of_booked(void **state)
{
    struct fx *f = *state;
    login(f);
    create_ok(f, invoice("AP1-repost", "RP-1"));
    assert_int_equal(simc_stat(f->port, "reposts_of_booked"), 0);
    /* the same reference again: counted on arrival, whatever happens next */
    create_ok(f, invoice("AP1-repost", "RP-1"));
    assert_int_equal(simc_stat(f->port, "reposts_of_booked"), 1);
    assert_user_error(create(f, with(invoice("AP1-repost", "RP-1"), "journal", json_integer(7))),
                      "Journal 7 does not exist.");
    assert_int_equal(simc_stat(f->port, "reposts_of_booked"), 2);
    /* a late commit in flight is not held yet */
    assert_int_equal(simc_fault(f->port, "late_commit", 1), 0);
    assert_int_equal(call_as(f, f->auth, "model.account.invoice.create",
                             json_pack("[[o],O]", invoice("AP1-late", "RP-2"), f->context), NULL,
                             NULL, NULL),
                     0);
    create_ok(f, invoice("AP1-late", "RP-2"));
    assert_int_equal(simc_stat(f->port, "reposts_of_booked"), 2);
    /* reads and posts are not committing creates */
    json_decref(search_read(f, "account.invoice",
                            json_pack("[[s,s,s]]", "reference", "=", "AP1-repost"), NULL));
    assert_int_equal(simc_stat(f->port, "reposts_of_booked"), 2);
}

static void test_spa_stats_routes(void **state)
{
    struct fx *f = *state;
    char *json = NULL;
    login(f); /* login, prefs */
    json_decref(search_read(f, "party.party", json_pack("[]"), NULL));
    json_decref(search_read(f, "account.invoice", json_pack("[]"), NULL));
    long long id = create_ok(f, invoice("AP1-stats", "ST-1"));
    post_ok(f, id);
    assert_int_equal(
        call_as(f, f->auth, "model.account.invoice.write", json_pack("[[]]"), NULL, NULL, NULL),
        403);
    assert_int_equal(raw(f, "GET", "/", NULL, NULL, NULL, NULL), 200);
    json_decref(result(f, "common.db.logout", json_pack("[]")));
    assert_int_equal(simc_stats(f->port, &json), 0);
    json_t *st = json_loads(json, 0, NULL);
    assert_non_null(st);
    assert_string_equal(json_string_value(json_object_get(st, "ui")), "spa");
    json_t *rq = json_object_get(st, "requests");
    static const struct {
        const char *route;
        long long n;
    } want[] = {{"login", 1},   {"prefs", 1},  {"read", 1},  {"search", 1}, {"create", 1},
                {"approve", 1}, {"logout", 1}, {"other", 2}, {"form", 0},   {"post", 0}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        if (json_integer_value(json_object_get(rq, want[i].route)) != want[i].n)
            fail_msg("requests.%s = %lld, want %lld", want[i].route,
                     (long long)json_integer_value(json_object_get(rq, want[i].route)), want[i].n);
    }
    json_decref(st);
    free(json);
}

/* ---- fuzz ------------------------------------------------------------------------------------ */

/* A random JSON value, at most depth levels deep: every type, tagged values with junk in them,
 * texts with quotes, backslashes, control characters and non-ASCII letters. */
static json_t *random_value(uint64_t *rng, int depth)
{
    static const char *const texts[] = {
        "",      "x", "100001", "6000", "EUR", "%",    "_",      "\\",   "\"", "ü",   "\n",
        "AP1-k", "=", "ilike",  "in",   "id",  "code", "create", "12.5", "-0", "1e3", "2026-11-03"};
    switch (xorshift_below(rng, depth > 0 ? 12 : 8)) {
    case 0:
        return json_null();
    case 1:
        return json_boolean(xorshift_below(rng, 2));
    case 2:
        return json_integer((json_int_t)xorshift64(rng) % 5000 - 100);
    case 3:
        return json_real((double)xorshift_below(rng, 1000) / 7.0);
    case 4:
        return json_string(texts[xorshift_below(rng, sizeof texts / sizeof texts[0])]);
    case 5:
        return dec(texts[xorshift_below(rng, sizeof texts / sizeof texts[0])]);
    case 6:
        return json_pack("{s:s,s:I,s:I,s:I}", "__class__", "date", "year",
                         (json_int_t)xorshift_below(rng, 3100), "month",
                         (json_int_t)xorshift_below(rng, 14), "day",
                         (json_int_t)xorshift_below(rng, 33));
    case 7:
        return json_integer(xorshift_below(rng, 2) ? ACCOUNT_6000 : PARTY_100001);
    case 8:
    case 9: {
        json_t *a = json_array();
        for (uint32_t i = xorshift_below(rng, 4); i > 0; i--)
            json_array_append_new(a, random_value(rng, depth - 1));
        return a;
    }
    default: {
        json_t *o = json_object();
        for (uint32_t i = xorshift_below(rng, 4); i > 0; i--)
            json_object_set_new(o, texts[xorshift_below(rng, sizeof texts / sizeof texts[0])],
                                random_value(rng, depth - 1));
        return o;
    }
    }
}

/* Replaces one random node of v (an array element or an object member, at any depth) by a random
 * value, or deletes it. */
static void mutate(json_t *v, uint64_t *rng)
{
    for (int depth = 0; depth < 8; depth++) {
        size_t n = json_is_array(v)    ? json_array_size(v)
                   : json_is_object(v) ? json_object_size(v)
                                       : 0;
        if (n == 0)
            return;
        size_t i = xorshift_below(rng, (uint32_t)n);
        json_t *child;
        const char *key = NULL;
        if (json_is_array(v)) {
            child = json_array_get(v, i);
        } else {
            void *it = json_object_iter(v);
            while (i-- > 0)
                it = json_object_iter_next(v, it);
            key = json_object_iter_key(it);
            child = json_object_iter_value(it);
        }
        bool descend = (json_is_array(child) || json_is_object(child)) && xorshift_below(rng, 3);
        if (descend) {
            v = child;
            continue;
        }
        if (xorshift_below(rng, 5) == 0) {
            if (key)
                json_object_del(v, key);
            else
                json_array_remove(v, i);
        } else if (key) {
            json_object_set_new(v, key, random_value(rng, 2));
        } else {
            json_array_set_new(v, i, random_value(rng, 2));
        }
        return;
    }
}

static void test_spa_fuzz(void **state)
{
    struct fx *f = *state;
    uint64_t rng = 0x5eed5a11ULL;
    login(f);
    static const char *const methods[] = {
        "model.party.party.search_read",       "model.account.account.search_read",
        "model.currency.currency.search_read", "model.account.invoice.search_read",
        "model.account.invoice.create",        "model.account.invoice.post",
        "model.account.invoice.create",        "common.db.login",
        "model.res.user.get_preferences",      "model.account.journal.search_read"};
    int results = 0, user_errors = 0, exceptions = 0, pages = 0;
    for (int i = 0; i < 300; i++) {
        const char *method = methods[xorshift_below(&rng, sizeof methods / sizeof methods[0])];
        json_t *params;
        if (strstr(method, ".create"))
            params = json_pack("[[o],O]", invoice("AP1-fuzz", "FZ"), f->context);
        else if (strstr(method, ".post"))
            params = json_pack("[[i,i],O]", 1, 2, f->context);
        else if (strstr(method, "login"))
            params = json_pack("[s,{s:s},s]", "clerk", "password", "acme-demo", "en");
        else if (strstr(method, "preferences"))
            params = json_pack("[b,{}]", 1);
        else
            params =
                json_pack("[[[s,s,s],[s,s,o]],i,i,[[s,s]],[s,s],O]", "code", "ilike", "%1%", "id",
                          ">=", json_integer(1), 0, 50, "id", "DESC", "code", "id", f->context);
        for (uint32_t m = 1 + xorshift_below(&rng, 3); m > 0; m--)
            mutate(params, &rng);
        json_t *req =
            json_pack("{s:I,s:s,s:o}", "id", (json_int_t)i, "method", method, "params", params);
        char *text = json_dumps(req, JSON_COMPACT);
        json_decref(req);
        assert_non_null(text);
        if (xorshift_below(&rng, 10) == 0) /* a cut or a damaged body (or method) now and then */
            text[xorshift_below(&rng, (uint32_t)strlen(text))] =
                xorshift_below(&rng, 2) ? '\0' : '}';
        const char *hdrs[] = {"Content-Type: application/json",
                              xorshift_below(&rng, 8) ? f->auth : "X-None: 1", NULL};
        char *body = NULL;
        long st = raw(f, "POST", "/acme/", hdrs, text, &body, NULL);
        free(text);
        if (!(st == 200 || st == 400 || st == 401 || st == 403 || st == 429))
            fail_msg("call %d (%s) answered %ld: %.200s", i, method, st, body ? body : "");
        if (st == 200) {
            json_t *ans = json_loads(body, 0, NULL);
            if (!ans || json_integer_value(json_object_get(ans, "id")) != i ||
                (!json_object_get(ans, "result") && !json_is_array(json_object_get(ans, "error"))))
                fail_msg("call %d (%s): not an answer: %.200s", i, method, body);
            const char *name = error_name(ans);
            results += !*name;
            user_errors += strcmp(name, "UserError") == 0;
            exceptions += *name && strcmp(name, "UserError") != 0;
            json_decref(ans);
        } else {
            pages++;
        }
        free(body);
        if (st == 401 && xorshift_below(&rng, 2))
            login(f); /* a mutated login may have logged a session out */
    }
    print_message("fuzz: %d results, %d user errors, %d server exceptions, %d pages; %d drafts\n",
                  results, user_errors, exceptions, pages, simc_count_rows(f->port));
    /* the server still works */
    login(f);
    json_decref(result(f, "model.account.journal.search_read", json_pack("[[]]")));
    char *csv = NULL;
    assert_int_equal(simc_lines(f->port, &csv), 0);
    free(csv);
}

static void test_spa_scenario_key(void **state)
{
    (void)state;
    struct sim_options opt = {.port = 0, .scenario_text = "write_idle_s = 0\n", .ui = SIM_UI_SPA};
    struct sim *s = NULL;
    char err[256] = "";
    assert_int_equal(sim_start(&opt, &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "write_idle_s"));
    opt.scenario_text = "write_idle_s = 30\nsession_idle_s = 60\n";
    assert_int_equal(sim_start(&opt, &s, err, sizeof err), 0);
    sim_stop(s);
    enum sim_ui ui = SIM_UI_ACME;
    assert_int_equal(sim_ui_from_name("spa", &ui), 0);
    assert_int_equal(ui, SIM_UI_SPA);
    assert_string_equal(sim_ui_name(SIM_UI_SPA), "spa");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_spa_client_page_and_script, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_http_pages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_login_ok, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_login_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_login_throttled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_login_delay_resets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_unauthorized, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_write_idle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_session_max_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_session_expiry_fault, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_context_required, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_reference_models, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_domains, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_limits_and_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_invoice_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_index_lag, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_search_garbled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_create_and_post, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_create_twice, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_user_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_wrong_types, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_strings_stored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_currencies_and_dates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_create_faults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_post_faults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_overload_and_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_reposts_of_booked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_stats_routes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spa_fuzz, setup, teardown),
        cmocka_unit_test(test_spa_scenario_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
