/*
 * pg_test.c - see pg_test.h. Reads the env file tests/lib/pg.sh wrote (KEY='VALUE' lines),
 * and makes and drops schemas through libpq.
 */
#include "helpers/pg_test.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PGT_KEYS 8

static struct {
    bool loaded;
    int n;
    char key[PGT_KEYS][40];
    char val[PGT_KEYS][400];
} env;

static void load_env(void)
{
    if (env.loaded)
        return;
    env.loaded = true;
    const char *path = getenv("APBOT_TEST_PG_ENV");
    FILE *fp = path && *path ? fopen(path, "r") : NULL;
    if (!fp)
        return;
    char line[512];
    while (env.n < PGT_KEYS && fgets(line, sizeof(line), fp)) {
        line[strcspn(line, "\n")] = '\0';
        char *eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq = '\0';
        char *v = eq + 1;
        size_t vl = strlen(v);
        if (vl >= 2 && v[0] == '\'' && v[vl - 1] == '\'') {
            v[vl - 1] = '\0';
            v++;
        }
        if (strlen(line) >= sizeof(env.key[0]))
            continue;
        memcpy(env.key[env.n], line, strlen(line) + 1);
        snprintf(env.val[env.n], sizeof(env.val[0]), "%s", v);
        env.n++;
    }
    fclose(fp);
}

const char *pgt_env(const char *key)
{
    load_env();
    for (int i = 0; i < env.n; i++)
        if (strcmp(env.key[i], key) == 0)
            return env.val[i];
    return NULL;
}

const char *pgt_server(void)
{
    static bool told;
    const char *c = pgt_env("APBOT_TEST_PG");
    if (!c && !told) {
        told = true;
        printf("SKIP (PostgreSQL): %s\n",
               getenv("APBOT_TEST_PG_ENV")
                   ? "no test server: tests/lib/pg.sh found no PostgreSQL server binaries "
                     "('scripts/deps.sh --test' installs them)"
                   : "no test server: run through ctest (the fixture pg starts one)");
    }
    return c;
}

int pgt_exec(const char *conninfo, const char *sql, bool quiet)
{
    PGconn *c = PQconnectdb(conninfo);
    int rc = -1;
    if (PQstatus(c) == CONNECTION_OK) {
        PQclear(PQexec(c, "SET client_min_messages = warning"));
        PGresult *r = PQexec(c, sql);
        ExecStatusType s = PQresultStatus(r);
        rc = s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK ? 0 : -1;
        if (rc && !quiet)
            fprintf(stderr, "pgt_exec: %s", PQresultErrorMessage(r));
        PQclear(r);
    } else if (!quiet) {
        fprintf(stderr, "pgt_exec: %s", PQerrorMessage(c));
    }
    PQfinish(c);
    return rc;
}

bool pgt_new_queue(char *conninfo, size_t len, char *schema, size_t slen)
{
    static unsigned counter;
    const char *server = pgt_server();
    if (!server)
        return false;
    snprintf(schema, slen, "t_%ld_%u_%04x", (long)getpid(), counter++, (unsigned)(rand() & 0xffff));
    char sql[256];
    snprintf(sql, sizeof(sql), "CREATE SCHEMA %s", schema);
    if (pgt_exec(server, sql, false) != 0)
        return false;
    snprintf(conninfo, len, "%s options='-c search_path=%s'", server, schema);
    return true;
}

void pgt_drop_queue(const char *schema)
{
    const char *server = pgt_env("APBOT_TEST_PG");
    if (!server || !schema || !*schema)
        return;
    char sql[256];
    snprintf(sql, sizeof(sql), "DROP SCHEMA IF EXISTS %s CASCADE", schema);
    (void)pgt_exec(server, sql, false);
}
