/*
 * error.h - the one result code every apbot module returns.
 *
 * 0 is success. The codes are grouped by what the driver does next: retry later (network,
 * ERP overload, a busy database), permanent (the input or the ERP refused), or a bug. Modules
 * return a code and write detail into a caller-supplied buffer; they never log.
 */
#ifndef APBOT_ERROR_H
#define APBOT_ERROR_H

#include <stddef.h>

#define APBOT_ERR_LEN 512 /* size of the detail buffers passed as `char *err` */

#if defined(__GNUC__)
#define APBOT_MUST_USE __attribute__((warn_unused_result))
#define APBOT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define APBOT_MUST_USE
#define APBOT_PRINTF(a, b)
#endif

enum apbot_rc {
    APBOT_OK = 0,
    /* permanent: the input or the caller is wrong */
    APBOT_E_INVAL,    /* invalid argument or input value */
    APBOT_E_PARSE,    /* malformed file or document */
    APBOT_E_RANGE,    /* number out of range, too many digits */
    APBOT_E_CONFLICT, /* same identity, different content */
    APBOT_E_NOTFOUND, /* no such item / nothing to do */
    APBOT_E_STATE,    /* transition not allowed from the current state, or lease lost */
    APBOT_E_DATA,     /* the invoice carries a value this ERP or flow cannot take (no such
                       * select option, no mapping): a business exception, never a retry */
    APBOT_E_ORIGIN,   /* a request would leave the ERP's origin (scheme, host, port) */
    /* retry later */
    APBOT_E_BUSY,    /* database locked, lease held by another process */
    APBOT_E_NET,     /* network trouble */
    APBOT_E_IO,      /* file system error */
    APBOT_E_DB,      /* database error other than busy (SQLite, a failed statement) */
    APBOT_E_UNAVAIL, /* the queue's database cannot be reached, or the connection to it was
                      * lost (PostgreSQL): open it again, later; never a refusal */
    /* stop the run */
    APBOT_E_SYSTEMIC, /* ERP unusable: login refused, form missing, unreachable */
    APBOT_E_LIMIT,    /* a size or count bound was hit */
    APBOT_E_BUG,      /* internal invariant broken */
    APBOT_E__COUNT
};

/* Static English text for a result code; never NULL, "unknown error" for bad values. */
const char *apbot_strerror(int rc);

/* snprintf into err (which may be NULL) and return rc: `return apbot_fail(err, len, rc, ...)`. */
int apbot_fail(char *err, size_t errlen, int rc, const char *fmt, ...) APBOT_PRINTF(4, 5);

#endif
