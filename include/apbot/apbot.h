/*
 * apbot.h - the library as a whole: its one global set-up, and its version.
 *
 * A program that uses the library (the apbot command, the tools) calls apbot_global_init() once,
 * before any other thread starts, and apbot_global_cleanup() once at the end, as with
 * curl_global_init(): it sets up the libraries beneath (libcurl's TLS and name resolution) that
 * are not safe to set up from several threads at once. Every other
 * face of the library is in the header named after it (store.h, flow.h, erp.h, runner.h, ...).
 */
#ifndef APBOT_APBOT_H
#define APBOT_APBOT_H

#include "apbot/error.h"

/*
 * Sets up the libraries apbot stands on. Counted: each successful call wants one
 * apbot_global_cleanup(). Returns APBOT_OK, or APBOT_E_BUG when libcurl cannot start (it then
 * failed to allocate or to load its TLS backend; nothing is set up).
 */
int apbot_global_init(void) APBOT_MUST_USE;
/* Undoes one apbot_global_init(); the last one releases what the libraries hold. */
void apbot_global_cleanup(void);

/* The library's version, "MAJOR.MINOR.PATCH" (static). */
const char *apbot_version(void);

#endif
