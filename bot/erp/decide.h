/*
 * decide.h - the safety decisions beside the state machine, as pure functions.
 *
 * Two questions decide whether an invoice can be booked twice: "what does this answer of the
 * ERP mean for the item" and "does this lookup prove that the ERP does not hold the key".
 * Both are answered here from plain facts the drivers gathered (erp_post.c for a post step,
 * erp.c for a lookup); no I/O, no clock, no flow or page access, so every row of both
 * decisions is a table test (tests/test_decide.c) that reads like the design.
 *
 * The post: a flow's steps are split by the committing step (the one whose submit may book
 * the document). Before it nothing can book, so anything unclear there is "not sent". At it,
 * only an answer that proves nothing was processed is "not sent"; everything ambiguous is
 * "unknown" and is reconciled by lookup, never re-posted blind. After it (approve/release
 * steps) the document exists: a failure there is retried on that document, never by posting.
 * A page that lacks the step's form, a control or its button is "the form changed" (systemic:
 * it counts toward the circuit breaker) unless one of the step's rules explains that page: a
 * closed period that leaves the Save button out is the ERP refusing the invoice, a draft that
 * someone approved meanwhile has no Approve button and is finished. Nothing of the step was
 * sent then, so the rule's word is read as for a page fetched before the step's submit.
 *
 * The lookup: an absence is confirmed only by a complete, genuine results screen: every page
 * answered and read, the flow's results-screen marker present, no page that may have been cut
 * at the screen's row maximum, no next page left unread, every candidate's detail page read.
 */
#ifndef APBOT_DECIDE_H
#define APBOT_DECIDE_H

#include <stdbool.h>
#include <stddef.h>

/* Where a step stands relative to the committing step. */
enum decide_phase {
    DECIDE_BEFORE_COMMIT = 0, /* a step before the committing one: it can never book */
    DECIDE_COMMIT,            /* the committing step: its submit may book the document */
    DECIDE_FOLLOWUP,          /* a step after it (approve, release): the document exists */
};

/* What the exchange came to, before any rule looked at the page. */
enum decide_transport {
    DECIDE_TR_ANSWERED = 0, /* a complete HTTP answer arrived (any status) */
    DECIDE_TR_NOT_SENT,     /* provably nothing reached the ERP (refused connect, origin) */
    DECIDE_TR_UNKNOWN,      /* maybe processed: timeout after sending, reset, cut body */
};

/* The outcome of the flow rule that matched the answer (its name in the flow). */
enum decide_rule {
    DECIDE_RULE_NONE = 0, /* no rule matched */
    DECIDE_RULE_COMPLETED,
    DECIDE_RULE_SAVED,
    DECIDE_RULE_REJECTED,
    DECIDE_RULE_ALREADY_EXISTS,
    DECIDE_RULE_NOT_SENT,
    DECIDE_RULE_SESSION_EXPIRED,
    DECIDE_RULE_UNKNOWN,
};

/* The facts of one exchange of a post step. Zero-initialise, then fill what is known. */
struct decide_post_facts {
    enum decide_phase phase;
    bool fetch;      /* the exchange fetched the step's page: the step itself was not yet
                      * submitted (so at the committing step nothing of it went out) */
    bool last;       /* the flow's last step */
    bool data_error; /* the invoice carries a value the form cannot take (no such option, no
                      * mapping): found while filling, before the step was submitted */
    bool fill_error; /* the form, a control or the button is missing or ambiguous: found
                      * while filling, before the step was submitted */
    bool missing;    /* with fill_error: the form, a control or the button is missing from
                      * the page the step works on (not merely different), and the step's
                      * rules were tried on that page: rule and match_aborted say what they
                      * made of it (transport ANSWERED, status that page's) */
    enum decide_transport transport;
    long status;           /* HTTP status of the answer (of the last hop) */
    bool via_redirect;     /* the answer came through a redirect, or is a 3xx not followed */
    bool match_aborted;    /* a pattern exhausted the page's match budget */
    enum decide_rule rule; /* the matched rule's outcome */
    bool doc;              /* a document number is known: the rule's (?<doc>) group, or a
                            * capture at or before this step */
    bool session_gone;     /* a session-expired marker matched (no rule decided) */
    bool captures_ok;      /* every <capture> of the step matched (true when it has none) */
    bool page_ok;          /* answered 2xx and the page parsed */
    bool amount_differs;   /* a <compare-amount> of the step: the ERP's own amount (a total it
                            * computed) differs from the invoice's. Weighed only before the
                            * committing step, where nothing can have booked */
};

/* What the driver does next. */
enum decide_post_verdict {
    DECIDE_NEXT = 0,          /* go on with the next step (or, after SAVED, the follow-ups) */
    DECIDE_RESTART,           /* log in again and run the post from its first step: nothing of
                               * this post can have booked */
    DECIDE_RESTART_FOLLOWUPS, /* log in again and run the follow-up steps again on the
                               * document: the last one provably was not processed */
    DECIDE_SYSTEMIC,          /* the ERP's form is not what the flow describes, before anything
                               * could book: give the item back, count toward the breaker */
    DECIDE_CONFIRMED,         /* booked and every step done: completed */
    DECIDE_SAVED,             /* the document exists: persist it, then run the follow-ups */
    DECIDE_REJECTED,          /* the ERP (or the form) refused the invoice */
    DECIDE_NOT_SENT,          /* provably not processed: back off and start over */
    DECIDE_UNKNOWN,           /* maybe booked: reconcile after the settle delay */
    DECIDE_ALREADY_EXISTS,    /* the ERP says it holds this invoice: reconcile now */
    DECIDE_FOLLOWUP_FAILED,   /* a follow-up step failed: retry it on the document later */
    DECIDE_POST__COUNT
};

struct decide_post {
    enum decide_post_verdict verdict;
    bool relogin;    /* the session is gone: log in before the next exchange */
    const char *why; /* static text for the audit trail, never NULL */
};

/* Decides what one exchange of a post step means. Pure; cannot fail. */
struct decide_post decide_post(const struct decide_post_facts *f);

/* "next", "restart", ..., "followup-failed"; "invalid" for bad values. */
const char *decide_post_verdict_name(enum decide_post_verdict v);

/*
 * A step that may be skipped (skip="when-known"): a round trip whose only use is what the ERP
 * resolves on it (the vendor's internal id an "update" puts into the form). It is left
 * unsubmitted, its form filled and carried to the next step, only before the committing step
 * (nothing it would send can book, and nothing of it is sent), when the run has learnt every
 * value its answer would tell, the page already has every line's controls (no row to wait
 * for), its fields filled without a problem (a problem is met by submitting it as usual) and
 * every learnt control is on the form.
 */
struct decide_skip_facts {
    enum decide_phase phase;
    bool known;         /* every value its answer would tell is in the run's cache */
    bool lines_present; /* the page has every invoice line's controls */
    bool filled;        /* its fields filled without a data error or a missing control */
    bool controls_set;  /* every learnt control is on the form and was set */
};

struct decide_skip {
    bool skip;
    const char *why; /* static text, never NULL */
};

/* Decides whether a step is skipped. Pure; cannot fail. */
struct decide_skip decide_skip(const struct decide_skip_facts *f);

/* The facts of a lookup, gathered over every page and detail page it read. */
struct decide_lookup_facts {
    bool answered;         /* every page needed was answered 2xx and parsed */
    bool screen_ok;        /* every page carried the results-screen marker (true when the
                            * flow names none) */
    bool match_aborted;    /* a pattern exhausted a page's match budget */
    size_t rows;           /* result rows seen over the pages read */
    bool empty_marker;     /* the no-results marker was present */
    bool more;             /* a next page was left unread (the page bound was reached) */
    bool cut;              /* a page held the screen's row maximum without a next page */
    size_t candidates;     /* rows that needed their detail page opened */
    size_t max_candidates; /* 0 = the flow opens no detail pages */
    bool details_ok;       /* every candidate's detail page was answered and read */
    size_t hits;           /* rows whose key (and <expect> columns) equal the invoice's */
    size_t unfinished;     /* hits whose <finished> column differs */
};

enum decide_lookup_verdict {
    DECIDE_FOUND = 0,        /* the ERP holds the key (finished) */
    DECIDE_FOUND_UNFINISHED, /* the ERP holds the key, saved but not finished */
    DECIDE_NOT_FOUND,        /* a complete, genuine results screen without the key */
    DECIDE_LOOKUP_FAILED,    /* no proof either way: never an absence */
    DECIDE_LOOKUP__COUNT
};

struct decide_lookup {
    enum decide_lookup_verdict verdict;
    const char *why; /* static text, never NULL */
};

/* Decides what a lookup showed. Pure; cannot fail. */
struct decide_lookup decide_lookup(const struct decide_lookup_facts *f);

/* "found", "found-unfinished", "not-found", "failed"; "invalid" for bad values. */
const char *decide_lookup_verdict_name(enum decide_lookup_verdict v);

#endif
