/*
 * pg_test.c - see pg_test.h. Reads the env file tests/lib/pg.sh wrote (KEY='VALUE' lines),
 * and makes and drops schemas through libpq.
 */
#include "helpers/pg_test.h"

#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
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

/* ---- a server of the test's own ---------------------------------------------------------- */

/* Runs `bash tests/lib/pg.sh CMD STATE [ARG]`, its output to STATE.log; its exit status. */
static int own_pg_sh(const char *state, const char *cmd, const char *arg)
{
    const char *src = getenv("APBOT_SRC");
    char script[400], log[400];
    snprintf(script, sizeof(script), "%s/tests/lib/pg.sh", src && *src ? src : ".");
    snprintf(log, sizeof(log), "%s.log", state);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execlp("bash", "bash", script, cmd, state, arg, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The value of KEY='VALUE' in the env file at path into buf; false when absent. */
static bool env_file_value(const char *path, const char *key, char *buf, size_t len)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        return false;
    char line[512];
    bool found = false;
    size_t kl = strlen(key);
    while (!found && fgets(line, sizeof(line), fp)) {
        line[strcspn(line, "\n")] = '\0';
        size_t ll = strlen(line);
        if (strncmp(line, key, kl) == 0 && line[kl] == '=' && line[kl + 1] == '\'' &&
            ll >= kl + 3 && line[ll - 1] == '\'') {
            line[ll - 1] = '\0';
            snprintf(buf, len, "%s", line + kl + 2);
            found = true;
        }
    }
    fclose(fp);
    return found;
}

bool pgt_own_start(struct pgt_own *o)
{
    static bool told;
    memset(o, 0, sizeof(*o));
    const char *tmp = getenv("TMPDIR");
    snprintf(o->state, sizeof(o->state), "%s/apbot-pgown-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(o->state))
        return false;
    char env_path[340];
    snprintf(env_path, sizeof(env_path), "%s/env", o->state);
    if (own_pg_sh(o->state, "start", NULL) != 0 ||
        !env_file_value(env_path, "APBOT_TEST_PG", o->conn, sizeof(o->conn)) ||
        !env_file_value(env_path, "APBOT_TEST_PG_DIR", o->dir, sizeof(o->dir))) {
        if (!told) {
            told = true;
            printf("SKIP (PostgreSQL): no server of the test's own (tests/lib/pg.sh start: "
                   "see %s.log)\n",
                   o->state);
        }
        pgt_own_stop(o);
        return false;
    }
    return true;
}

int pgt_own_ctl(const struct pgt_own *o, const char *cmd, const char *arg)
{
    return own_pg_sh(o->state, cmd, arg);
}

void pgt_own_stop(struct pgt_own *o)
{
    if (!o->state[0])
        return;
    (void)own_pg_sh(o->state, "stop", NULL);
    char log[400];
    snprintf(log, sizeof(log), "%s.log", o->state);
    unlink(log);
    rmdir(o->state);
    o->state[0] = '\0';
}
