/*
 * trace-int.h - the inside of `apbot flow trace` (trace.h): the printer that explains each
 * exchange for a flow author, grouped by step, and the pure decisions the trace makes around
 * them (what to do after the lookup, what the trace's end means). trace_run.c drives them; the
 * tests hold them to their tables.
 *
 * The printer is an erp_trace_fn (erp.h): the command hands it to erp_set_trace and to the
 * post's hooks.trace. It prints what the ERP driver reports - already secret-masked by the
 * driver - and escapes every text for the terminal (text.h): URLs, control values, reasons,
 * page excerpts, even names read from the flow. Because it knows the flow and the invoice it
 * can say which flow element (and line) a submitted value came from and what the matched rule
 * asked for. It never touches the queue; the command layer owns the ERP session.
 */
#ifndef APBOT_OFFICE_TRACE_INT_H
#define APBOT_OFFICE_TRACE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "apbot/erp.h"
#include "apbot/trace.h"

struct erp_post_result;
struct flow;
struct invoice;

struct trace_printer;

/*
 * A printer writing to out for flow f (inv and key: the invoice traced and its full identity
 * key, used to tell which flow field a control came from; both may be NULL). f, inv, key and
 * out must outlive the printer. Never NULL (aborts on out-of-memory).
 */
struct trace_printer *trace_printer_new(FILE *out, const struct flow *f, const struct invoice *inv,
                                        const char *key);
/* Frees the printer; NULL is fine. */
void trace_printer_free(struct trace_printer *p);

/* Prints one exchange (an erp_trace_fn: printer is the struct trace_printer). A new group
 * header is printed whenever the exchange belongs to another step than the last one. */
void trace_print(void *printer, const struct erp_trace *t);

/* Also print the page text of every answer (default: only of answers that went wrong, where it
 * helps most to write a rule). */
void trace_printer_show_pages(struct trace_printer *p, bool on);

/* Prints the lookup's hits (document, status and the cells the ERP showed), escaped. */
void trace_print_hits(struct trace_printer *p, const struct erp_hits *h);

/* Prints a section header of the printer's style now ("result", ...); the next exchange starts
 * a new group. title is escaped. */
void trace_printer_section(struct trace_printer *p, const char *title);

/* Exchanges printed so far. */
int trace_printer_exchanges(const struct trace_printer *p);
/* Exchanges printed that were sent as a committing request (the committing step's submit with
 * a transport other than "not-sent"). */
int trace_printer_commits(const struct trace_printer *p);

/* ---- decisions (pure) ------------------------------------------------------------------- */

/* How the lookup's hits compare with the invoice, as `apbot run` compares them before it
 * adopts a hit. */
enum trace_hit {
    TRACE_HIT_SAME = 0, /* one hit, with a document number, vendor/currency/amount as the
                         * invoice's (where the ERP shows them) */
    TRACE_HIT_CONFLICT, /* several hits, or one whose vendor, currency or amount differs */
    TRACE_HIT_NO_DOC,   /* a hit without a document number: the lookup proves nothing */
    TRACE_HIT__COUNT
};

/* Compares the hits of an ERP_FOUND / ERP_FOUND_UNFINISHED lookup with the invoice; why gets the
 * reason in words (secret-free: cells the ERP showed). TRACE_HIT_NO_DOC for no hits at all. */
enum trace_hit trace_check_hits(const struct erp_hits *h, const struct invoice *inv, char *why,
                                size_t whylen);

/* What the trace does after the lookup. */
enum trace_next {
    TRACE_NEXT_POST = 0,       /* not in the ERP: run the post from its first step */
    TRACE_NEXT_FOLLOWUPS,      /* saved but unfinished: run the follow-up steps on the doc */
    TRACE_NEXT_SKIP_FOLLOWUPS, /* the same under --dry-run: they would change the ERP: not run */
    TRACE_NEXT_DONE,           /* in the ERP, finished, as the invoice: nothing to post */
    TRACE_NEXT_CONFLICT,       /* in the ERP with other content or several times: a human
                                * decides (apbot run: manual review); never post */
    TRACE_NEXT_FAILED,         /* the lookup proved nothing: never post on it */
    TRACE_NEXT__COUNT
};

/* Decides what follows the lookup. Only a proven absence posts. Pure; cannot fail. */
enum trace_next trace_after_lookup(enum erp_answer answer, enum trace_hit hit, bool dry_run);

/* The end after a lookup that did not lead to a post. Pure. */
enum trace_end trace_end_of_lookup(enum trace_next next);
/* The end after erp_post_run. dry_run: a post released before its committing request is the
 * dry run's goal. Pure. */
enum trace_end trace_end_of_post(const struct erp_post_result *r, bool dry_run);
/* What `apbot run` would make of this post result, in words (static text). Pure. */
const char *trace_run_meaning(const struct erp_post_result *r, bool dry_run);

#endif
