/*
 * test_sim_cpu.c - the simulated ERP's processor sharing (fixtures/erp-sim/sim_cpu.c, scenario
 * keys `cores` and `contention`): a request's speed with n in service, the integration of the
 * work done and the cores kept busy, the wait a request still needs (pure, to the table); the
 * keys as a scenario file takes them; and over real HTTP, requests that share 2 cores: alone a
 * request costs its work, four at once cost the ERP twice the work they asked for, counted in
 * /_sim/stats. The clock is the machine's, so latencies are only compared with each other.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "helpers/sim_client.h"
#include "sim.h"
#include "sim_int.h"

static void test_sim_cpu_speed_table(void **state)
{
    (void)state;
    static const struct {
        int n, cores;
        double contention, speed;
    } rows[] = {
        {1, 0, 0.0, 1.0},
        {8, 0, 0.5, 1.0}, /* no cores: the slot model */
        {1, 2, 0.5, 1.0},
        {2, 2, 0.5, 1.0}, /* up to the cores: full speed */
        {3, 2, 0.0, 2.0 / 3},
        {4, 2, 0.0, 0.5},           /* beyond: a share of the cores */
        {3, 2, 0.5, 2.0 / 3 / 1.5}, /* ... and the contention */
        {4, 2, 0.5, 0.5 / 2.0},
        {4, 2, 0.47, 0.5 / 1.94},
        {16, 2, 0.47, 2.0 / 16 / (1 + 0.47 * 14)},
        {0, 2, 0.5, 1.0},
        {5, 8, 3.0, 1.0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        double v = sim_cpu_speed(rows[i].n, rows[i].cores, rows[i].contention);
        if (fabs(v - rows[i].speed) > 1e-12)
            print_message("row %zu: %.6f, expected %.6f\n", i, v, rows[i].speed);
        assert_true(fabs(v - rows[i].speed) <= 1e-12);
    }
}

/* The integration: progress per request and busy cores, step by step. */
static void test_sim_cpu_advance_and_wait(void **state)
{
    (void)state;
    struct sim_cpu c;
    memset(&c, 0, sizeof c);
    c.at_us = 1000;
    sim_cpu_advance(&c, 2, 0.5, 2000); /* nothing in service: nothing done */
    assert_true(c.progress_us == 0 && c.busy_us == 0 && c.at_us == 2000);
    c.in_service = 1;
    sim_cpu_advance(&c, 2, 0.5, 3000);
    assert_true(fabs(c.progress_us - 1000) < 1e-9 && fabs(c.busy_us - 1000) < 1e-9);
    c.in_service = 4; /* 2 cores busy, each request at 0.25 */
    sim_cpu_advance(&c, 2, 0.5, 5000);
    assert_true(fabs(c.progress_us - 1500) < 1e-9 && fabs(c.busy_us - 5000) < 1e-9);
    sim_cpu_advance(&c, 2, 0.5, 4000); /* the clock never runs back */
    assert_true(fabs(c.progress_us - 1500) < 1e-9 && c.at_us == 5000);
    /* 100 us of work left at 0.25: 400 us; at full speed: 100; none left: 0 */
    assert_int_equal(sim_cpu_wait_us(&c, 2, 0.5, 100.0), 400);
    c.in_service = 1;
    assert_int_equal(sim_cpu_wait_us(&c, 2, 0.5, 100.0), 100);
    assert_int_equal(sim_cpu_wait_us(&c, 2, 0.5, 0.0), 0);
    assert_int_equal(sim_cpu_wait_us(&c, 2, 0.5, 0.2), 1);
    /* leaving: a request done at progress 1400 seen at 1500 (4 in service, speed 0.25): it
     * overran by 400 us holding half a core: 200 core-us given back */
    c.in_service = 4;
    sim_cpu_leave(&c, 2, 0.5, 1400.0);
    assert_int_equal(c.in_service, 3);
    assert_true(fabs(c.busy_us - 4800) < 1e-9);
    sim_cpu_leave(&c, 2, 0.5, 1600.0); /* not overrun: nothing given back */
    assert_int_equal(c.in_service, 2);
    assert_true(fabs(c.busy_us - 4800) < 1e-9);
    /* the slot model: one busy "core" per request in service */
    memset(&c, 0, sizeof c);
    c.in_service = 3;
    sim_cpu_advance(&c, 0, 0.0, 1000);
    assert_true(fabs(c.progress_us - 1000) < 1e-9 && fabs(c.busy_us - 3000) < 1e-9);
}

static void test_sim_cpu_scenario_keys(void **state)
{
    (void)state;
    struct sim_scenario sc;
    char err[200];
    sim_scenario_defaults(&sc);
    assert_int_equal(sc.cores, 0);
    assert_true(sc.contention == 0);
    assert_int_equal(
        sim_scenario_apply_text(&sc, "cores = 2\ncontention = 0.47\n", "t", 0, err, sizeof err), 0);
    assert_int_equal(sc.cores, 2);
    assert_true(fabs(sc.contention - 0.47) < 1e-12);
    static const char *const bad[] = {
        "cores = -1\n",      "cores = 2000\n",     "cores = x\n",    "contention = -0.1\n",
        "contention = 11\n", "contention = nan\n", "contention = \n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct sim_scenario t = sc;
        assert_int_equal(sim_scenario_apply_text(&t, bad[i], "t", 0, err, sizeof err), -1);
    }
    /* the shipped scenario parses and says what its comment says */
    char path[512];
    const char *fx = getenv("APBOT_FIXTURES");
    snprintf(path, sizeof path, "%s/scenarios/shared-cpu.scn", fx ? fx : "fixtures");
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    sim_scenario_defaults(&sc);
    assert_int_equal(sim_scenario_apply_text(&sc, text, path, 0, err, sizeof err), 0);
    assert_int_equal(sc.cores, 2);
    assert_true(sc.contention > 0.4 && sc.contention < 0.5);
    assert_false(sc.reference_guard);
}

struct getter {
    unsigned short port;
    long status;
};

static void *get_login(void *arg)
{
    struct getter *g = arg;
    char *body = NULL;
    if (simc_request(g->port, "GET", "/erp/login", NULL, 20000, &g->status, &body) != 0)
        g->status = -1;
    free(body);
    return NULL;
}

/* n GETs of the login page at once; returns when all are answered. */
static void get_n(unsigned short port, int n)
{
    pthread_t t[8];
    struct getter g[8];
    for (int i = 0; i < n; i++) {
        g[i] = (struct getter){.port = port};
        assert_int_equal(pthread_create(&t[i], NULL, get_login, &g[i]), 0);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(g[i].status, 200);
    }
}

/* Over HTTP: a request alone costs the ERP its work; four at once on 2 cores with contention
 * 0.5 each run at a quarter speed, and the cores burn twice the work they asked for. */
static void test_sim_cpu_shared_cores_over_http(void **state)
{
    (void)state;
    struct sim *sim = NULL;
    char err[256];
    struct sim_options opt = {.scenario_text = "cores = 2\ncontention = 0.5\nslots = 32\n"
                                               "service_ms.login = 300\n",
                              .seed = 5,
                              .admin = true};
    assert_int_equal(sim_start(&opt, &sim, err, sizeof err), 0);
    unsigned short port = sim_port(sim);
    assert_int_equal(simc_stat(port, "cores"), 2);

    long long w0 = simc_stat(port, "work_ms"), d0 = simc_stat(port, "work_ms_demand");
    get_n(port, 1);
    long long w1 = simc_stat(port, "work_ms"), d1 = simc_stat(port, "work_ms_demand");
    print_message("one request: %lld ms of work for %lld asked\n", w1 - w0, d1 - d0);
    assert_int_equal(d1 - d0, 300);
    assert_true(w1 - w0 >= 295 && w1 - w0 <= 310);

    get_n(port, 4);
    long long w2 = simc_stat(port, "work_ms"), d2 = simc_stat(port, "work_ms_demand");
    double ratio = (double)(w2 - w1) / (double)(d2 - d1);
    print_message("four at once: %lld ms of work for %lld asked (%.2fx)\n", w2 - w1, d2 - d1,
                  ratio);
    assert_int_equal(d2 - d1, 1200);
    /* 2.0 when all four arrive together; a late arrival runs alone a little at first */
    assert_true(ratio >= 1.6 && ratio <= 2.05);
    assert_int_equal(simc_stat(port, "in_service"), 0);

    /* without cores the same requests cost their service time each */
    assert_int_equal(simc_set(port, "cores", "0"), 0);
    get_n(port, 4);
    long long w3 = simc_stat(port, "work_ms"), d3 = simc_stat(port, "work_ms_demand");
    print_message("slots: %lld ms in service for %lld asked\n", w3 - w2, d3 - d2);
    assert_true(w3 - w2 >= 1190 && w3 - w2 <= 1260);
    sim_stop(sim);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sim_cpu_speed_table),
        cmocka_unit_test(test_sim_cpu_advance_and_wait),
        cmocka_unit_test(test_sim_cpu_scenario_keys),
        cmocka_unit_test(test_sim_cpu_shared_cores_over_http),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
