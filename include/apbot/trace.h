/*
 * trace.h - `apbot flow trace`: one invoice's login, lookup and post explained for a flow
 * author, exchange by exchange and grouped by step.
 *
 * trace_run() loads the flow, reads the invoice as enqueue does and hands it on as the queue
 * would give it back (its canonical JSON), logs in, looks the key up and - only when the lookup
 * proves the invoice absent - runs the post steps (or the follow-up steps on a saved draft it
 * finds), printing every exchange: already secret-masked by the ERP driver, every text escaped
 * for the terminal. It never touches the queue. Without dry_run the invoice is really posted.
 */
#ifndef APBOT_TRACE_H
#define APBOT_TRACE_H

#include <stdbool.h>
#include <stdio.h>

/* How a trace ended; the command maps it to its exit code (0, 3, 1). */
enum trace_end {
    TRACE_END_OK = 0,   /* completed: posted and confirmed, already in the ERP, or a dry run
                         * that reached its committing step */
    TRACE_END_REJECTED, /* the ERP or the form refused the invoice: a business exception */
    TRACE_END_FAILED,   /* anything else (not sent, unknown, lookup failed, conflict, a flow or
                         * an invoice that cannot be read, ...) */
    TRACE_END__COUNT
};

/* What to trace. Strings are borrowed for the call. */
struct trace_request {
    const char *flow_path;     /* the flow file */
    const char *invoice_path;  /* the invoice file (any format enqueue reads) */
    long invoice_n;            /* its N-th readable invoice, from 1 */
    const char *invoice_label; /* how the user named it ("a.csv#2"), for the header */
    const char *vendors_path;  /* the vendor map, or NULL */
    const char *erp_url;       /* overrides the flow's base URL when non-NULL and non-empty */
    bool dry_run;              /* stop right before the committing request */
    bool pages;                /* print the page text of every answer, not only unclear ones */
};

/*
 * Runs the trace: the exchanges and the result to out, the reasons it could not start (a flow
 * that does not load, an invoice that cannot be read or keyed, refused rows of the invoice file)
 * to errout. Needs apbot_global_init(). Returns how it ended.
 */
enum trace_end trace_run(const struct trace_request *rq, FILE *out, FILE *errout);

#endif
