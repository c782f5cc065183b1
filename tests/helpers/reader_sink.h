/*
 * reader_sink.h - what the reader tests (test_csvin, test_ublin, test_ciiin, test_pdfin, ...)
 * share: a sink that keeps copies of the invoices a reader accepts and the refusals it reports,
 * so a test can assert on them after the read, small assertions on those copies, and the
 * opening of a file for a reader's entry on an open file or on memory (the library's own path
 * entry is reader_read_file, the dispatcher). Uses cmocka: a full sink or a failed check fails
 * the running test.
 */
#ifndef APBOT_TESTS_READER_SINK_H
#define APBOT_TESTS_READER_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "apbot/error.h"
#include "apbot/invoice.h"

#define MAX_GOT 64 /* invoices, and refusals, one sink keeps at the most */

#define GOT_LINE_TAXES 24 /* line taxes kept of one invoice (model/linetax.h) */

struct got_inv {
    char vendor[64], number[128], doc[16], issue[11], due[11], ccy[4], where[512];
    char key[INVOICE_KEY_LEN + 1], fp[INVOICE_FP_LEN + 1];
    int64_t payable, net, tax;
    size_t lines;
    /* the tax of each line as a flow books it (linetax_init): known, worked out from the
     * rates, the first GOT_LINE_TAXES of them, or why not */
    bool tax_ok, tax_derived;
    int64_t line_tax[GOT_LINE_TAXES];
    char tax_why[APBOT_ERR_LEN];
};

struct got_ref {
    char where[512], reason[APBOT_ERR_LEN];
};

/* Zero it before use; it owns no heap memory. */
struct got {
    struct got_inv inv[MAX_GOT];
    size_t n_inv;
    struct got_ref ref[MAX_GOT];
    size_t n_ref;
};

/* Reader accept callback (ctx is a struct got): copies inv and computes its key, fingerprint
 * and line taxes. Returns 0; fails the test when the sink is full. */
int got_accept(void *ctx, const struct invoice *inv, const char *where);

/* Reader refuse callback (ctx is a struct got): copies where and reason. */
void got_refuse(void *ctx, const char *where, const char *reason);

/* Path of a file under $env/sub into buf; fails the test when the variable is unset. */
void env_path(char *buf, size_t len, const char *env, const char *sub);

/* Fails the test unless where ends with suffix. */
void assert_where(const char *where, const char *suffix);

/* Fails the test unless text contains needle. */
void assert_has(const char *text, const char *needle);

struct vendor_map;

/* A reader's entry on an open regular file (csvin_read_fd, pdfin_read_fd). */
typedef int (*read_fd_fn)(int fd, const char *name, const struct vendor_map *vendors,
                          const struct invoice_sink *sink, char *err, size_t errlen);
/* A reader's entry on bytes in memory (ciiin_read_mem). */
typedef int (*read_mem_fn)(const char *name, const void *data, size_t len,
                           const struct vendor_map *vendors, const struct invoice_sink *sink,
                           char *err, size_t errlen);

/* Opens path (failing the test when it cannot), reads it with fn (path names it in places)
 * and closes it; returns fn's code. */
int read_path_fd(read_fd_fn fn, const char *path, const struct vendor_map *vendors,
                 const struct invoice_sink *sink, char *err, size_t errlen);
/* Reads the whole file at path into memory (failing the test when it cannot) and hands it to
 * fn as one document named path; returns fn's code. */
int read_path_mem(read_mem_fn fn, const char *path, const struct vendor_map *vendors,
                  const struct invoice_sink *sink, char *err, size_t errlen);

#endif
