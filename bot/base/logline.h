/*
 * logline.h - one log line for an operator: key=value words or one JSON object (logline.c).
 */
#ifndef APBOT_BASE_LOGLINE_H
#define APBOT_BASE_LOGLINE_H

#include <stdbool.h>
#include <stddef.h>

/* A log line's start (time in UTC to the millisecond, level) in buf, as key=value or as a JSON
 * object's first members; then logline_kv appends one field. The writer ends a JSON line (it
 * starts with '{') with '}'. */
void logline_start(char *buf, size_t len, const char *level, bool json);
/* Appends ` name=value` (quoted and escaped where it must be), or in a JSON line the member
 * `,"name":"value"`; a field that does not fit whole is left out of a JSON line. */
void logline_kv(char *buf, size_t len, const char *name, const char *value);

#endif
