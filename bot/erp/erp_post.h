/*
 * erp_post.h - one post of one invoice through a flow's steps: fetch each step's page, fill
 * its form (fields, per-line fields, select options, the button pressed), submit, read the
 * answer with the step's rules and captures, and decide what it means with decide_post().
 *
 * The post knows the ERP and the flow, never the queue: the caller (runner, flow trace) has
 * committed the intent to post before calling, persists what the hooks report (the saved
 * document, before the follow-up steps run) and turns the result into a machine event.
 * Every exchange is handed to the session's evidence callback (erp_set_evidence) and to the
 * hooks' trace callback (or, when it is NULL, the session's, erp_set_trace), with every
 * control submitted and where its value came from; secrets never appear in either.
 *
 * Filling a form: fields and <lines> fields are expanded with the invoice, the key, ${doc} and
 * the captures (never the secrets); option= goes through page_form_select, a plain value
 * through page_form_set. A select given a value it does not offer (or several options), and a
 * map: without a mapping, are data errors (verdict REJECTED, data_error, reason naming field
 * and value), found before the step is sent. A missing control or button, several buttons
 * matching, a form action off the ERP's origin, or a GET form carrying a secret mean the form
 * is not what the flow says: nothing of the step is sent (SYSTEMIC before the commit,
 * FOLLOWUP_FAILED after it). repeat="until-lines" submits the step again on its answer while
 * a line could not be filled (its row was not on the page), at most line_count + 1 times;
 * a line still not entered then is refused the same way (never booked short of a line).
 * Once a step before the committing one is done, its <compare-amount>s read the ERP's own
 * amount (a capture) and compare it with the invoice's: a difference is REJECTED
 * (amount_differs, reason naming both), an amount that does not read means the screen is not
 * what the flow says (SYSTEMIC).
 *
 * Safety, in the order of the steps (see decide.h): before the committing step nothing can
 * book, so a lost session restarts the post (at most ERP_POST_RESTARTS times, logging in
 * again) and anything unclear is "not sent"; the committing request is sent once (never
 * again by libcurl on its own, http.h's `fresh`) and only the ERP's own direct answer proves it was
 * not processed; after it the document exists and the follow-up steps (approve, release) are run on
 * ${doc}, again from their start after a provably unprocessed lost session, never by posting again.
 */
#ifndef APBOT_ERP_POST_H
#define APBOT_ERP_POST_H

#include <stdbool.h>
#include <stddef.h>

#include "apbot/error.h"
#include "erp/decide.h"

struct erp_session;
struct erp_trace;
struct invoice;

/* Restarts of a post (or of its follow-up steps) after the session was lost. */
#define ERP_POST_RESTARTS 2

/* Where a post begins. */
enum erp_post_from {
    ERP_POST_FROM_START = 0, /* the first step: a new post (the intent is committed) */
    ERP_POST_FROM_FOLLOWUPS, /* the first step after the committing one, on a saved document */
};

/* What the caller does around the steps. Any function may be NULL (then: true / nothing). */
struct erp_post_hooks {
    void *ctx;
    /* Right before the committing request goes out (the lease checked, the run still going).
     * false: nothing is sent, the post ends `released`. Also how `flow trace --dry-run`
     * stops. */
    bool (*before_commit)(void *ctx);
    /* The committing step's answer names the saved document: persist it (posting ->
     * finishing) before any follow-up step runs. false: the follow-up steps are not run and
     * the post ends with verdict DECIDE_SAVED (the caller could not record it; the item will
     * be reconciled). */
    bool (*saved)(void *ctx, const char *doc);
    /* Checked before each step that precedes the commit: true ends the post `released`. */
    bool (*stopping)(void *ctx);
    /* Every exchange explained, for `apbot flow trace` (NULL: the session's trace callback,
     * if any). A post stopped by before_commit is traced too, with the controls the
     * committing request would have carried (transport "not-sent: ..."). */
    void (*trace)(void *ctx, const struct erp_trace *t);
};

/* How a post ended. */
struct erp_post_result {
    enum decide_post_verdict verdict; /* CONFIRMED, SAVED (see hooks.saved), REJECTED,
                                       * NOT_SENT, UNKNOWN, ALREADY_EXISTS, FOLLOWUP_FAILED or
                                       * SYSTEMIC; never NEXT or a RESTART (handled inside) */
    bool released;       /* stopped before the committing request was sent: nothing booked;
                          * verdict is NOT_SENT then */
    bool commit_sent;    /* the committing request went out (or may have) */
    bool relogin;        /* the session is gone: the session was marked logged out, and the
                          * next erp_* call logs in first */
    bool login_refused;  /* a login the post needed was refused (erp_login_refused): stop
                          * the run; verdict SYSTEMIC before the commit, FOLLOWUP_FAILED after */
    bool data_error;     /* REJECTED because the invoice carries a value the form cannot take
                          * (no such option, no mapping); reason names the field and value */
    bool amount_differs; /* REJECTED because the ERP's own amount differs from the invoice's
                          * (<compare-amount>); reason names both */
    char doc[128];       /* the document number, when known (CONFIRMED, SAVED, FOLLOWUP_FAILED,
                          * ALREADY_EXISTS when the rule names it) */
    char reason[512];    /* REJECTED: the ERP's words ((?<reason>) group) or the data error */
    char detail[512];    /* what happened, for the audit trail (secret-free) */
    char rule[64];       /* the rule that decided, "" if none */
    long retry_after_ms; /* Retry-After of a not-processed answer, 0 if none */
    int exchanges;       /* HTTP exchanges made */
};

/*
 * Runs the post of inv (identity key `key`) from `from` on session s (logged in by the
 * caller, or logged in here first when erp_logged_in is false; logs in again itself for a
 * restart). doc is required with ERP_POST_FROM_FOLLOWUPS and ignored otherwise. Returns
 * APBOT_OK whenever the post was driven to a result (read ret->verdict, even for failures of
 * the ERP), or APBOT_E_INVAL for bad arguments, a flow without post steps, or FROM_FOLLOWUPS
 * without a document or without follow-up steps (ret zeroed).
 */
int erp_post_run(struct erp_session *s, const struct invoice *inv, const char *key,
                 enum erp_post_from from, const char *doc, const struct erp_post_hooks *hooks,
                 struct erp_post_result *ret, char *err, size_t errlen) APBOT_MUST_USE;

#ifdef APBOT_UNITTEST /* static in the product (base/unittest.h) */
/* What a field's value stands for in a clerk's words ("the G/L account" for a template whose
 * first variable is ${line.gl_account}), that variable as a template of its own into ret_var;
 * NULL when it has none a clerk knows by name. Pure. */
const char *erp_field_subject(const char *tmpl, char *ret_var, size_t var_len);
#endif

#endif
