/*
 * error.c - names for apbot's result codes and the helper that fills an error buffer.
 */
#include "apbot/error.h"

#include <stdarg.h>
#include <stdio.h>

static const char *const error_names[] = {
    [APBOT_OK] = "ok",
    [APBOT_E_INVAL] = "invalid input",
    [APBOT_E_PARSE] = "parse error",
    [APBOT_E_RANGE] = "value out of range",
    [APBOT_E_CONFLICT] = "conflict",
    [APBOT_E_NOTFOUND] = "not found",
    [APBOT_E_STATE] = "not allowed in the current state",
    [APBOT_E_DATA] = "value not accepted by the ERP's form",
    [APBOT_E_ORIGIN] = "request outside the ERP's origin",
    [APBOT_E_BUSY] = "busy",
    [APBOT_E_NET] = "network error",
    [APBOT_E_IO] = "i/o error",
    [APBOT_E_DB] = "database error",
    [APBOT_E_UNAVAIL] = "queue unavailable",
    [APBOT_E_SYSTEMIC] = "systemic ERP failure",
    [APBOT_E_LIMIT] = "limit exceeded",
    [APBOT_E_BUG] = "internal error",
};
_Static_assert(sizeof(error_names) / sizeof(error_names[0]) == APBOT_E__COUNT,
               "every apbot_rc needs a name");

const char *apbot_strerror(int rc)
{
    if (rc < 0 || rc >= APBOT_E__COUNT)
        return "unknown error";
    return error_names[rc];
}

int apbot_fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}
