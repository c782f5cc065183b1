/*
 * cli_enqueue.c - `apbot enqueue [--vendors MAP.csv] FILE...`: reads CSV, UBL, CII and
 * Factur-X/ZUGFeRD PDF files through the streaming readers and queues every good invoice.
 *
 * Invoices are committed in batches (one transaction per CLI_ENQ_BATCH invoices and at the
 * end of each file), never one per row, so 100,000 invoices take seconds: each invoice is
 * turned into its queue row as it is read (store_enqueue_prepare), and a batch goes to the
 * store at once (store_enqueue_many: on PostgreSQL a few multi-row statements instead of a
 * round trip per invoice); memory stays bounded by one batch of rows. Each refusal and each
 * conflict is printed on stderr, in the order of the input, with the file and line (or element
 * path) it came from, through text_escape(): file names and reasons carry text from the input,
 * which must not drive the terminal. The summary goes to stdout. The queue database is opened
 * when the first batch is stored, so a run that queues nothing (a missing file, only
 * refusals) never creates an empty one.
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

#include "apbot/buf.h"
#include "apbot/error.h"
#include "apbot/invoice.h"
#include "apbot/mem.h"
#include "apbot/reader.h"
#include "apbot/store.h"
#include "apbot/text.h"
#include "apbot/vendors.h"

#define CLI_ENQ_BATCH 500        /* invoices per transaction */
#define CLI_ENQ_BATCH_MAX 100000 /* --batch upper bound */
#define CLI_ENQ_TEXT 2048        /* bytes of an escaped place or reason */

static void enq_refuse(void *ctx, const char *where, const char *reason);

/* A refusal read while a batch is pending: printed after the invoices read before it. */
struct enq_refusal {
    size_t before; /* how many of the batch's invoices came before it */
    char *where, *reason;
};

struct enq {
    const char *db_path;
    struct store *st;               /* opened with the first batch */
    long batch_max;                 /* invoices per transaction */
    struct store_enqueue_req *reqs; /* the batch being read */
    size_t n_reqs, cap_reqs;
    struct enq_refusal *refusals; /* read during the batch, in order */
    size_t n_refusals, cap_refusals;
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

/* Prints the batch's refusals that came before invoice k (all of them: SIZE_MAX), in order. */
static void enq_print_refusals(struct enq *q, size_t k, size_t *next)
{
    for (; *next < q->n_refusals && q->refusals[*next].before <= k; (*next)++)
        enq_report("refused", q->refusals[*next].where, q->refusals[*next].reason);
}

/* Empties the batch (its rows and refusals). */
static void enq_drop(struct enq *q)
{
    for (size_t i = 0; i < q->n_reqs; i++)
        store_enqueue_req_done(&q->reqs[i]);
    for (size_t i = 0; i < q->n_refusals; i++) {
        free(q->refusals[i].where);
        free(q->refusals[i].reason);
    }
    q->n_reqs = q->n_refusals = 0;
}

/* Stores the batch in one transaction and reports it in the input's order. */
static int enq_flush(struct enq *q)
{
    int rc = APBOT_OK;
    size_t next = 0;
    if (q->n_reqs && !q->st)
        rc = store_open(q->db_path, &q->st, q->err, sizeof(q->err));
    if (rc == APBOT_OK && q->n_reqs)
        rc = store_enqueue_many(q->st, q->reqs, q->n_reqs, NULL, q->err, sizeof(q->err));
    for (size_t i = 0; rc == APBOT_OK && i < q->n_reqs; i++) {
        enq_print_refusals(q, i, &next);
        switch (q->reqs[i].result) {
        case STORE_ENQ_QUEUED:
            q->queued++;
            break;
        case STORE_ENQ_ALREADY:
            q->already++;
            break;
        case STORE_ENQ_CONFLICT:
            enq_report("conflict", q->reqs[i].source,
                       q->reqs[i].detail ? q->reqs[i].detail : "conflicting");
            q->conflicting++;
            break;
        }
    }
    enq_print_refusals(q, SIZE_MAX, &next); /* after the invoices, or all of them on failure */
    enq_drop(q);
    if (rc)
        q->db_rc = rc;
    return rc;
}

static int enq_accept(void *ctx, const struct invoice *inv, const char *where)
{
    struct enq *q = ctx;
    struct store_enqueue_req req;
    char err[APBOT_ERR_LEN] = "";
    if (store_enqueue_prepare(inv, where, &req, err, sizeof(err)) != APBOT_OK) {
        /* The invoice itself could not be keyed: a refusal, not a database failure. */
        enq_refuse(q, where, err);
        return 0;
    }
    if (apbot_grow((void **)&q->reqs, &q->cap_reqs, q->n_reqs, sizeof(*q->reqs),
                   CLI_ENQ_BATCH_MAX) != APBOT_OK) {
        store_enqueue_req_done(&req);
        q->db_rc = APBOT_E_LIMIT;
        snprintf(q->err, sizeof(q->err), "a batch larger than %d invoices", CLI_ENQ_BATCH_MAX);
        return q->db_rc;
    }
    q->reqs[q->n_reqs++] = req;
    if ((long)q->n_reqs >= q->batch_max && enq_flush(q) != APBOT_OK)
        return q->db_rc;
    return 0;
}

static void enq_refuse(void *ctx, const char *where, const char *reason)
{
    struct enq *q = ctx;
    q->refused++;
    /* In the input's order: after the pending invoices read before it. */
    if (q->n_reqs == 0 || apbot_grow((void **)&q->refusals, &q->cap_refusals, q->n_refusals,
                                     sizeof(*q->refusals), CLI_ENQ_BATCH_MAX) != APBOT_OK) {
        enq_report("refused", where, reason);
        return;
    }
    q->refusals[q->n_refusals++] = (struct enq_refusal){
        .before = q->n_reqs,
        .where = apbot_xstrdup(where ? where : ""),
        .reason = apbot_xstrdup(reason ? reason : ""),
    };
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
        /* What the file yielded before any failure is good: keep it. */
        if (q.db_rc || enq_flush(&q) != APBOT_OK) {
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
    enq_drop(&q);
    free(q.reqs);
    free(q.refusals);
    store_close(q.st);
    vendor_map_free(vm);
    return ret;
}
