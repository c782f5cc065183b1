/*
 * cli_enqueue.c - `apbot enqueue [--vendors MAP.csv] FILE...`: reads CSV, UBL, CII and
 * Factur-X/ZUGFeRD PDF files through the streaming readers and queues every good invoice.
 *
 * Invoices are committed in batches (one transaction per CLI_ENQ_BATCH invoices and at the
 * end of each file), never one per row, so 100,000 invoices take seconds and memory stays
 * bounded by one invoice plus SQLite's cache. Each refusal and each conflict is printed on
 * stderr with the file and line (or element path) it came from, through text_escape(): file
 * names and reasons carry text from the input, which must not drive the terminal. The summary
 * goes to stdout. The queue database is opened when the first invoice is accepted, so a run
 * that queues nothing (a missing file, only refusals) never creates an empty one.
 * Exit: 0 all queued (or already queued), 3 something refused or conflicting, 1 a file could
 * not be read (after the other files were processed) or the database failed, 2 usage.
 */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/error.h"
#include "apbot/invoice.h"
#include "apbot/reader.h"
#include "apbot/store.h"
#include "apbot/text.h"
#include "apbot/vendors.h"

#define CLI_ENQ_BATCH 500        /* invoices per transaction */
#define CLI_ENQ_BATCH_MAX 100000 /* --batch upper bound */
#define CLI_ENQ_TEXT 2048        /* bytes of an escaped place or reason */

struct enq {
    const char *db_path;
    struct store *st; /* opened on the first accepted invoice */
    long batch_max;   /* invoices per transaction */
    long in_batch;    /* invoices in the open transaction */
    bool open;        /* a transaction is open */
    int64_t queued, already, conflicting, refused;
    int db_rc; /* first database failure: stops everything */
    char err[APBOT_ERR_LEN];
};

static void enq_usage(FILE *out)
{
    fprintf(out, "usage: apbot enqueue [--vendors MAP.csv] [--batch N] FILE...\n"
                 "  queues invoices and credit notes from CSV, UBL 2.1 / Peppol BIS 3,\n"
                 "  CII D16B and Factur-X/ZUGFeRD PDF files (the format is read from the content)\n"
                 "  --vendors MAP.csv  map seller identifiers to ERP vendor ids\n"
                 "  --batch N          invoices per transaction (default 500)\n"
                 "exit: 0 ok, 1 file or database error, 2 usage, 3 refused or conflicting\n");
}

static int enq_commit(struct enq *q)
{
    if (!q->open)
        return APBOT_OK;
    int rc = store_commit(q->st, q->err, sizeof(q->err));
    if (rc) {
        store_rollback(q->st);
        q->open = false;
        return rc;
    }
    q->open = false;
    q->in_batch = 0;
    return APBOT_OK;
}

/* Prints "what: place: reason" on stderr with both parts escaped for the terminal. */
static void enq_report(const char *what, const char *where, const char *reason)
{
    char w[CLI_ENQ_TEXT], r[CLI_ENQ_TEXT];
    fprintf(stderr, "%s: %s: %s\n", what, text_escape_into(w, sizeof(w), where, 0),
            text_escape_into(r, sizeof(r), reason, 0));
}

/* Prints "apbot enqueue: msg" with msg escaped (it quotes file names and parser messages). */
static void enq_error(const char *msg)
{
    char m[CLI_ENQ_TEXT];
    fprintf(stderr, "apbot enqueue: %s\n", text_escape_into(m, sizeof(m), msg, 0));
}

static int enq_accept(void *ctx, const struct invoice *inv, const char *where)
{
    struct enq *q = ctx;
    int rc;
    if (!q->st) {
        rc = store_open(q->db_path, &q->st, q->err, sizeof(q->err));
        if (rc)
            goto fail;
    }
    if (!q->open) {
        rc = store_begin(q->st, q->err, sizeof(q->err));
        if (rc)
            goto fail;
        q->open = true;
    }
    enum store_enqueue_result res = STORE_ENQ_QUEUED;
    int64_t id = 0;
    char err[APBOT_ERR_LEN] = "";
    rc = store_enqueue(q->st, inv, where, NULL, &res, &id, err, sizeof(err));
    if (rc == APBOT_E_DB || rc == APBOT_E_BUSY || rc == APBOT_E_IO || rc == APBOT_E_UNAVAIL) {
        snprintf(q->err, sizeof(q->err), "%s", err);
        goto fail;
    }
    if (rc) {
        /* The invoice itself could not be keyed: a refusal, not a database failure. */
        enq_report("refused", where, err);
        q->refused++;
        return 0;
    }
    switch (res) {
    case STORE_ENQ_QUEUED:
        q->queued++;
        break;
    case STORE_ENQ_ALREADY:
        q->already++;
        break;
    case STORE_ENQ_CONFLICT:
        enq_report("conflict", where, err);
        q->conflicting++;
        break;
    }
    if (++q->in_batch >= q->batch_max) {
        rc = enq_commit(q);
        if (rc)
            goto fail;
    }
    return 0;
fail:
    q->db_rc = rc;
    return rc;
}

static void enq_refuse(void *ctx, const char *where, const char *reason)
{
    struct enq *q = ctx;
    enq_report("refused", where, reason);
    q->refused++;
}

int cli_enqueue(const struct cli_ctx *ctx, int argc, char **argv)
{
    const char *vendors_path = NULL;
    long batch = CLI_ENQ_BATCH;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            enq_usage(stdout);
            return CLI_EXIT_OK;
        } else if (strcmp(a, "--vendors") == 0 && i + 1 < argc) {
            vendors_path = argv[++i];
        } else if (strncmp(a, "--vendors=", 10) == 0) {
            vendors_path = a + 10;
        } else if ((strcmp(a, "--batch") == 0 && i + 1 < argc) || strncmp(a, "--batch=", 8) == 0) {
            const char *v = a[7] == '=' ? a + 8 : argv[++i];
            char *end = NULL;
            errno = 0;
            batch = strtol(v, &end, 10);
            if (errno || end == v || *end || batch < 1 || batch > CLI_ENQ_BATCH_MAX) {
                fprintf(stderr, "apbot enqueue: --batch wants 1..%d, not '%s'\n", CLI_ENQ_BATCH_MAX,
                        v);
                return CLI_EXIT_USAGE;
            }
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "apbot enqueue: unknown option %s\n", a);
            enq_usage(stderr);
            return CLI_EXIT_USAGE;
        } else {
            break;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "apbot enqueue: no input files\n");
        enq_usage(stderr);
        return CLI_EXIT_USAGE;
    }

    int ret = CLI_EXIT_ERROR;
    struct vendor_map *vm = NULL;
    struct enq q = {.batch_max = batch, .db_path = ctx->db_path};
    char err[APBOT_ERR_LEN];
    if (vendors_path && vendor_map_load(vendors_path, &vm, err, sizeof(err)) != APBOT_OK) {
        enq_error(err);
        goto out;
    }

    struct invoice_sink sink = {.accept = enq_accept, .refuse = enq_refuse, .ctx = &q};
    int file_errors = 0;
    for (; i < argc; i++) {
        int rc = reader_read_file(argv[i], vm, &sink, err, sizeof(err));
        if (q.db_rc) {
            char m[CLI_ENQ_TEXT];
            snprintf(m, sizeof(m), "%s: %s", argv[i], q.err);
            enq_error(m);
            if (q.st)
                store_rollback(q.st);
            q.open = false;
            goto out;
        }
        /* What the file yielded before any failure is good: keep it. */
        if (enq_commit(&q) != APBOT_OK) {
            char m[CLI_ENQ_TEXT];
            snprintf(m, sizeof(m), "%s: %s", argv[i], q.err);
            enq_error(m);
            goto out;
        }
        if (rc) {
            enq_error(err);
            file_errors++;
        }
    }
    printf("queued %" PRId64 ", already queued %" PRId64 ", conflicting %" PRId64
           ", refused %" PRId64 "\n",
           q.queued, q.already, q.conflicting, q.refused);
    if (file_errors)
        ret = CLI_EXIT_ERROR;
    else if (q.refused || q.conflicting)
        ret = CLI_EXIT_REFUSED;
    else
        ret = CLI_EXIT_OK;
out:
    if (ret == CLI_EXIT_ERROR && q.st && q.db_rc)
        fprintf(stderr, "apbot enqueue: earlier batches stay queued; running the same "
                        "command again is safe (they count as already queued)\n");
    store_close(q.st);
    vendor_map_free(vm);
    return ret;
}
