/*
 * pg_test.h - the PostgreSQL test server for the tests: the ctest fixture `pg` starts one
 * with tests/lib/pg.sh and names its env file in APBOT_TEST_PG_ENV. Each test gets a fresh,
 * empty schema of its own on that server (a queue), dropped afterwards.
 */
#ifndef APBOT_TEST_PG_TEST_H
#define APBOT_TEST_PG_TEST_H

#include <stdbool.h>
#include <stddef.h>

/* A value from the server's env file (APBOT_TEST_PG, APBOT_TEST_PG_DIR, ...), NULL when the
 * file or the key is missing. Static storage. */
const char *pgt_env(const char *key);

/* The superuser's connection string, or NULL with the reason printed once to stdout as a
 * SKIP line (no fixture, or no PostgreSQL binaries installed). */
const char *pgt_server(void);

/*
 * Creates a fresh empty schema and writes into conninfo a connection string that selects it
 * (search_path), and its name into schema. Returns false when there is no server (or the
 * schema cannot be made: then it prints why).
 */
bool pgt_new_queue(char *conninfo, size_t len, char *schema, size_t slen);

/* Drops a schema made by pgt_new_queue (with everything in it). */
void pgt_drop_queue(const char *schema);

/* Runs sql (several statements allowed) on conninfo; 0 when it succeeded. Prints the
 * server's message otherwise unless quiet. */
int pgt_exec(const char *conninfo, const char *sql, bool quiet);

/*
 * A PostgreSQL server of the test's own (tests/lib/pg.sh start in a directory of its own), for
 * a test that stops, crashes and restarts it: the fixture's server stays up for the tests
 * running beside it. Started with fsync off, as the fixture's.
 */
struct pgt_own {
    char state[300]; /* pg.sh's STATE_DIR (a temp directory) */
    char conn[400];  /* the superuser's connection string (database apbot) */
    char dir[300];   /* the server's directory: data, socket, server.log */
};
/* Starts one; false (a SKIP line printed once) when there are no server binaries. */
bool pgt_own_start(struct pgt_own *o);
/* pg.sh's down [fast|immediate], up or restart [SECONDS] on it (arg may be NULL); 0 when it
 * succeeded. */
int pgt_own_ctl(const struct pgt_own *o, const char *cmd, const char *arg);
/* Stops it and removes its directories. */
void pgt_own_stop(struct pgt_own *o);

#endif
