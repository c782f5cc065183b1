/*
 * sim_soak.c - the sim-soak developer tool: pushes a long run of requests (100,000 by default)
 * through the simulated ERP, in-process or an erp-sim started elsewhere with --admin, from a
 * few client threads walking login, entry, check, post, search and journal with a sprinkle of
 * faults; then checks the server still answers, the ledger matches the bookings it counted
 * and no reference was booked twice, and prints throughput and memory. Not a ctest test: it
 * takes minutes.
 *
 *   sim-soak [--requests N] [--threads N] [--seed N] [--port P]   (P: an external erp-sim)
 */
#include "sim.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SOAK_MAX_THREADS 32

static const char soak_scenario[] = "slots = 8\n"
                                    "service_ms.login = 0\n"
                                    "service_ms.form = 0\n"
                                    "service_ms.check = 0..1\n"
                                    "service_ms.post = 0..1\n"
                                    "service_ms.search = 0\n"
                                    "service_ms.journal = 0\n"
                                    "index_lag_ms = 0\n"
                                    "session_max_requests = 400\n"
                                    "stall_ms = 20\n"
                                    "late_commit_ms = 20\n"
                                    "fault.timeout_after_commit = 0.01\n"
                                    "fault.late_commit = 0.01\n"
                                    "fault.error500_before_commit = 0.01\n"
                                    "fault.error500_after_commit = 0.01\n"
                                    "fault.overload503 = 0.005\n"
                                    "fault.overload429 = 0.005\n"
                                    "fault.drop_before_commit = 0.002\n"
                                    "fault.drop_after_commit = 0.01\n"
                                    "fault.session_expiry = 0.002\n"
                                    "fault.garbled_after_commit = 0.01\n";

struct soak {
    unsigned short port;
    long target;
    atomic_long requests;
    atomic_long answered;
    atomic_long failed; /* no answer (drops, timeouts) */
    atomic_long posted; /* success pages seen */
};

struct body {
    char *data;
    size_t len;
};

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
    struct body *b = arg;
    size_t k = size * n;
    if (b->len + k > 8u * 1024 * 1024)
        return 0;
    char *q = realloc(b->data, b->len + k + 1);
    if (!q)
        return 0;
    b->data = q;
    memcpy(b->data + b->len, p, k);
    b->len += k;
    b->data[b->len] = '\0';
    return k;
}

/* One request; the body stays in *b. Returns the status, or 0 when no answer came. */
static long request(struct soak *sk, CURL *h, const char *path, const char *post, struct body *b)
{
    char url[1024];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", (unsigned)sk->port, path);
    free(b->data);
    b->data = NULL;
    b->len = 0;
    curl_easy_setopt(h, CURLOPT_URL, url);
    if (post) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, post);
    } else {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    }
    atomic_fetch_add(&sk->requests, 1);
    long status = 0;
    if (curl_easy_perform(h) == CURLE_OK) {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        atomic_fetch_add(&sk->answered, 1);
    } else {
        atomic_fetch_add(&sk->failed, 1);
    }
    return status;
}

/* Value of the input `name` (no entity decoding needed for tokens). */
static bool field(const struct body *b, const char *name, char *dst, size_t len)
{
    char pat[128];
    snprintf(pat, sizeof pat, "name=\"%s\" value=\"", name);
    const char *p = b->data ? strstr(b->data, pat) : NULL;
    if (!p)
        return false;
    p += strlen(pat);
    const char *e = strchr(p, '"');
    if (!e || (size_t)(e - p) >= len)
        return false;
    memcpy(dst, p, (size_t)(e - p));
    dst[e - p] = '\0';
    return true;
}

static bool login(struct soak *sk, CURL *h, struct body *b)
{
    char csrf[64], form[256];
    if (request(sk, h, "/erp/login", NULL, b) != 200 || !field(b, "_csrf", csrf, sizeof csrf))
        return false;
    snprintf(form, sizeof form, "j_username=clerk&j_password=acme-demo&_csrf=%s", csrf);
    return request(sk, h, "/erp/login", form, b) == 303;
}

static bool login_page(const struct body *b)
{
    return b->data && strstr(b->data, "id=\"loginForm\"");
}

struct worker {
    struct soak *sk;
    int id;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct soak *sk = w->sk;
    CURL *h = curl_easy_init();
    struct body b = {NULL, 0};
    if (!h)
        return NULL;
    curl_easy_setopt(h, CURLOPT_COOKIEFILE, "");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    bool in = false;
    for (long i = 0; atomic_load(&sk->requests) < sk->target; i++) {
        if (!in) {
            in = login(sk, h, &b);
            continue;
        }
        char token[64], fields[512], path[256];
        snprintf(fields, sizeof fields,
                 "docType=KR&vendorNo=1000%02ld&vendorInvNo=S%d-%ld&invDate=15.11.2026"
                 "&currency=EUR&amount=%ld,%02ld&glAccount=6000&reference=AP1-soak-%d-%ld",
                 1 + i % 40, w->id, i, 1 + i % 5000, i % 100, w->id, i);
        if (request(sk, h, "/erp/ap/invoice/new", NULL, &b) != 200 ||
            !field(&b, "formToken", token, sizeof token)) {
            in = !login_page(&b);
            continue;
        }
        char body[768];
        snprintf(body, sizeof body, "%s&formToken=%s", fields, token);
        if (request(sk, h, "/erp/ap/invoice/check", body, &b) != 200 ||
            !field(&b, "formToken", token, sizeof token)) {
            in = !login_page(&b);
            continue;
        }
        snprintf(body, sizeof body, "%s&vendorId=V-0000%02ld&formToken=%s", fields, 1 + i % 40,
                 token);
        request(sk, h, "/erp/ap/invoice/post", body, &b);
        if (b.data && strstr(b.data, "id=\"docNo\""))
            atomic_fetch_add(&sk->posted, 1);
        if (login_page(&b))
            in = false;
        if (i % 10 == 0) {
            snprintf(path, sizeof path, "/erp/ap/invoice/search?reference=AP1-soak-%d-%ld", w->id,
                     i);
            request(sk, h, path, NULL, &b);
        }
        if (i % 50 == 0)
            request(sk, h, "/erp/ap/journal?page=2", NULL, &b);
    }
    free(b.data);
    curl_easy_cleanup(h);
    return NULL;
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return rss * 4;
}

static int cmp_ptr_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Checks the ledger: rows counted, no reference twice. Returns rows or -1. */
static long check_ledger(struct soak *sk, long *ret_dups)
{
    CURL *h = curl_easy_init();
    struct body b = {NULL, 0};
    if (!h)
        return -1;
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 60000L);
    long status = request(sk, h, "/_sim/ledger.csv", NULL, &b);
    curl_easy_cleanup(h);
    if (status != 200 || !b.data) {
        free(b.data);
        return -1;
    }
    /* collect the reference column (7th); soak references never hold commas or quotes */
    size_t cap = 1024, n = 0;
    char **refs = malloc(cap * sizeof *refs);
    long rows = 0;
    for (char *line = b.data, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (rows++ == 0)
            continue; /* header */
        char *p = line;
        for (int c = 0; c < 6 && p; c++) {
            p = strchr(p, ',');
            if (p)
                p++;
        }
        char *e = p ? strchr(p, ',') : NULL;
        if (!e)
            continue;
        *e = '\0';
        if (n == cap) {
            cap *= 2;
            char **q = realloc(refs, cap * sizeof *refs);
            if (!q)
                break;
            refs = q;
        }
        refs[n++] = p;
    }
    qsort(refs, n, sizeof *refs, cmp_ptr_str);
    long dups = 0;
    for (size_t i = 1; i < n; i++)
        dups += strcmp(refs[i - 1], refs[i]) == 0;
    free(refs);
    free(b.data);
    *ret_dups = dups;
    return rows - 1;
}

int main(int argc, char **argv)
{
    long target = 100000, threads = 4;
    unsigned long long seed = 1;
    long port = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        char *end = NULL;
        long long v = strtoll(argv[i + 1], &end, 10);
        if (*end != '\0' || v < 0) {
            fprintf(stderr, "sim-soak: bad value for %s\n", argv[i]);
            return 2;
        }
        if (strcmp(argv[i], "--requests") == 0)
            target = (long)v;
        else if (strcmp(argv[i], "--threads") == 0)
            threads = v < 1 ? 1 : v > SOAK_MAX_THREADS ? SOAK_MAX_THREADS : (long)v;
        else if (strcmp(argv[i], "--seed") == 0)
            seed = (unsigned long long)v;
        else if (strcmp(argv[i], "--port") == 0 && v < 65536)
            port = (long)v;
        else {
            fprintf(stderr, "usage: sim-soak [--requests N] [--threads N] [--seed N] [--port P]\n");
            return 2;
        }
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct sim *s = NULL;
    struct soak sk = {.target = target};
    if (port == 0) {
        struct sim_options opt = {
            .port = 0, .scenario_text = soak_scenario, .seed = seed, .admin = true};
        char err[256];
        if (sim_start(&opt, &s, err, sizeof err)) {
            fprintf(stderr, "sim-soak: %s\n", err);
            return 1;
        }
        sk.port = sim_port(s);
    } else {
        sk.port = (unsigned short)port;
    }
    long rss0 = rss_kib();
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_t tid[SOAK_MAX_THREADS];
    struct worker w[SOAK_MAX_THREADS];
    for (long i = 0; i < threads; i++) {
        w[i].sk = &sk;
        w[i].id = (int)i;
        if (pthread_create(&tid[i], NULL, worker_main, &w[i])) {
            threads = i;
            break;
        }
    }
    for (long i = 0; i < threads; i++)
        pthread_join(tid[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    struct timespec settle = {0, 200 * 1000000L}; /* late commits land */
    nanosleep(&settle, NULL);
    long dups = 0;
    long rows = check_ledger(&sk, &dups);
    printf("requests %ld answered %ld unanswered %ld posted %ld in %.1f s (%.0f req/s)\n",
           atomic_load(&sk.requests), atomic_load(&sk.answered), atomic_load(&sk.failed),
           atomic_load(&sk.posted), secs, secs > 0 ? (double)atomic_load(&sk.requests) / secs : 0);
    printf("ledger rows %ld, duplicate references %ld, rss %ld KiB -> %ld KiB\n", rows, dups, rss0,
           rss_kib());
    bool ok = rows >= atomic_load(&sk.posted) && dups == 0;
    sim_stop(s);
    curl_global_cleanup();
    printf("%s\n", ok ? "soak ok" : "soak FAILED");
    return ok ? 0 : 1;
}
