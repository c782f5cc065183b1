/*
 * review.h - what a person sees and decides on the queue, shared by `apbot review`,
 * `apbot resolve`, `apbot list --json` and the review page (serve.h).
 *
 * - The review queue: manual-review items (and business exceptions), oldest first, with the
 *   last ERP exchange of each, filtered by vendor and reason.
 * - One item: the queue row, its audit timeline and every ERP exchange kept as evidence.
 * - One JSON shape for an item (documented in docs/report.md, "The item JSON").
 * - The resolve policy: which decision is allowed from which state, who decides (an operator
 *   name, and a note where the caller requires one), what goes into the audit event, and the
 *   optimistic check: a decision taken on a view of the item that is no longer current is
 *   refused, never applied.
 * - The verification of "posted as DOC": the flow's lookup asks the ERP for the key and the one
 *   matching rule (docmatch.h) compares; its exchanges are kept as the item's evidence.
 *
 * An item's version is the id of its latest audit event: every change of state, document or
 * reason appends one, so a page that shows version V and a decision that names V agree on
 * what was seen. Modules return errors and never log; nothing here prints.
 */
#ifndef APBOT_REVIEW_H
#define APBOT_REVIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "apbot/error.h"
#include "apbot/machine.h"
#include "apbot/store.h"

struct flow;
struct json_t;
struct erp_lookup_result;

#define REVIEW_NAME_MAX 64          /* bytes of an operator name */
#define REVIEW_TEXT_MAX 500         /* bytes of a reason, a note or a forced reason */
#define REVIEW_DOC_MAX 64           /* bytes of a document number */
#define REVIEW_QUEUE_MAX 100000     /* items one queue listing holds at most */
#define REVIEW_ITEM_ROWS_MAX 100000 /* events, or exchanges, one item view holds at most */

/* One ERP exchange kept as evidence. Strings are heap-owned, any may be NULL. */
struct review_exchange {
    int64_t id, at;
    char *step, *method, *url, *transport, *rule, *outcome, *excerpt;
    int http_status;
    int64_t elapsed_ms;
};

/* One audit event. Strings are heap-owned; from may be NULL (enqueue). */
struct review_event {
    int64_t id, at;
    char *from, *to, *event, *detail, *actor;
};

/* ---- the queue -------------------------------------------------------------------------- */

struct review_filter {
    bool manual_review; /* list manual-review items */
    bool exceptions;    /* list business exceptions */
    const char *vendor; /* case-insensitive substring of vendor id or name; NULL or "" = any */
    const char *reason; /* case-insensitive substring of the reason; NULL or "" = any */
};

struct review_entry {
    struct store_item item;      /* the row (owned) */
    int64_t version;             /* its latest audit event's id */
    bool has_last;               /* last holds its latest ERP exchange */
    struct review_exchange last; /* (owned) */
};

struct review_queue {
    struct review_entry *v; /* oldest first: created_at, then id */
    size_t n;
    size_t cap; /* hands off */
};

/*
 * Loads the items the filter selects, oldest first (the order of `apbot review`), each with
 * its version and latest ERP exchange. Returns APBOT_OK and *ret (free with
 * review_queue_done), APBOT_E_LIMIT past REVIEW_QUEUE_MAX items, or the store's error.
 */
int review_queue_load(struct store *st, const struct review_filter *f, struct review_queue *ret,
                      char *err, size_t errlen) APBOT_MUST_USE;
/* NULL is fine; the queue is empty afterwards. */
void review_queue_done(struct review_queue *q);

/*
 * The reason in words: a manual-review reason without its technical tail ("; last outcome:
 * ..."), other reasons whole; "" for NULL. Into buf (cut to len); returns buf. Cannot fail.
 */
const char *review_reason_words(const char *reason, char *buf, size_t len);

/* ---- one item --------------------------------------------------------------------------- */

struct review_item {
    struct store_item item; /* (owned) */
    int64_t version;
    struct review_event *events; /* oldest first */
    size_t n_events;
    struct review_exchange *evidence; /* oldest first */
    size_t n_evidence;
    size_t cap_events, cap_evidence; /* hands off */
};

/* Loads item id with its timeline and evidence. APBOT_E_NOTFOUND for an unknown id. */
int review_item_load(struct store *st, int64_t id, struct review_item *ret, char *err,
                     size_t errlen) APBOT_MUST_USE;
/* NULL is fine. */
void review_item_done(struct review_item *x);

/* The item's version (its latest audit event's id; 0 when it has none). */
int review_version(struct store *st, int64_t id, int64_t *ret_version, char *err,
                   size_t errlen) APBOT_MUST_USE;

/* ---- the item JSON ---------------------------------------------------------------------- */

/*
 * The one JSON object for an item, used by every command (new reference, caller decrefs):
 * id, key, state, vendor_id, vendor_name, invoice_number, doc_type, issue_date, currency,
 * total (exact decimal string), erp_doc, reason, source, posts, created_at, then total_minor,
 * exponent, cycles, attempts, updated_at, age_s (times as ISO 8601 UTC, absent texts null).
 * `version` is added by callers that know it (review), `last_exchange`, `events`, `evidence`
 * likewise. now (ms) gives age_s.
 */
struct json_t *review_item_json(const struct store_item *it, int64_t now);
/* One exchange: at, step, method, url, http_status, elapsed_ms, transport, rule, outcome,
 * excerpt (cut to excerpt_max bytes at a UTF-8 boundary, "..." appended; 0 = whole). */
struct json_t *review_exchange_json(const struct review_exchange *x, size_t excerpt_max);
/* One event: at, from, to, event, actor, detail. */
struct json_t *review_event_json(const struct review_event *e);

/* Unix ms as "2026-11-03T08:00:00Z" (UTC) into buf (>= 21 bytes); "" for 0. Returns buf. */
const char *review_iso_time(int64_t ms, char *buf, size_t len);

/* ---- decisions -------------------------------------------------------------------------- */

/* If you add an action: add its name, its event and its row in the policy table test. */
enum review_action {
    REVIEW_POSTED = 0, /* the ERP holds it as a document (verified) */
    REVIEW_REQUEUE,    /* back to new: looked up again before anything is posted */
    REVIEW_REJECT,     /* a business exception, with a reason */
    REVIEW_ACTION__COUNT
};
/* "posted", "requeue", "reject"; "invalid" for bad values. */
const char *review_action_name(enum review_action a);
/* Parses a name; REVIEW_ACTION__COUNT when unknown. */
enum review_action review_action_from_name(const char *name);

/*
 * The resolve policy, pure: may action be taken on an item in state? Only manual-review and
 * business-exception items are decided by people, and then only what the state machine allows
 * (a business exception cannot be rejected again). Returns APBOT_OK, or APBOT_E_STATE with a
 * sentence in why (erp_doc names a completed item's document; may be NULL).
 */
int review_allowed(enum machine_state state, enum review_action action, const char *erp_doc,
                   char *why, size_t len) APBOT_MUST_USE;

/* Operator names end up in the audit trail: 1..REVIEW_NAME_MAX of [A-Za-z0-9._@-]. */
bool review_name_ok(const char *name);
/* Reasons and notes: 1..REVIEW_TEXT_MAX bytes, valid UTF-8, no control characters, not blank. */
bool review_text_ok(const char *text);
/* Document numbers: 1..REVIEW_DOC_MAX bytes, printable ASCII without blanks. */
bool review_doc_ok(const char *doc);

/* What the ERP says about "this item is booked as DOC". */
enum review_verify {
    REVIEW_VERIFIED = 0, /* the key is held once, as DOC, with the invoice's money */
    REVIEW_ABSENT,       /* the ERP holds no document for the key: refused unless forced */
    REVIEW_CONFLICT,     /* held otherwise (other document, money, duplicate): always refused */
    REVIEW_UNREADABLE,   /* the ERP could not be asked: refused unless forced */
    REVIEW_UNCHECKED,    /* no flow was given, so nothing was asked (forced decisions only) */
};
/* "verified", "absent", "conflict", "unreadable", "unchecked". */
const char *review_verify_name(enum review_verify v);

/*
 * Pure: what a lookup answer says about item `it` being booked as doc. A sentence for the
 * operator and the audit trail goes into what.
 */
enum review_verify review_verify_classify(const struct store_item *it, const char *doc,
                                          const struct erp_lookup_result *res, char *what,
                                          size_t len);

struct review_verification {
    enum review_verify verdict;
    char what[768];                    /* one sentence */
    struct review_exchange *exchanges; /* the ERP exchanges of the check, secrets masked */
    size_t n_exchanges;
    size_t cap_exchanges; /* hands off */
};

/*
 * Asks the ERP through flow f (erp_url overrides its base URL when non-NULL) whether it holds
 * its key as doc, and classifies the answer. Needs http_global_init(). Never fails: an ERP
 * that cannot be asked is REVIEW_UNREADABLE. Free with review_verification_done.
 */
void review_verify_posted(const struct flow *f, const char *erp_url, const struct store_item *it,
                          const char *doc, struct review_verification *ret);
/* NULL is fine. */
void review_verification_done(struct review_verification *v);

/* How the person deciding was authenticated: the audit event records it beside the name. If
 * you add one: its words in review_who and its row in test_review's table. */
enum review_auth {
    REVIEW_AUTH_CLI = 0,  /* apbot resolve: --by NAME as typed; the OS user is recorded */
    REVIEW_AUTH_PASSWORD, /* the review page: their own password (the reviewers file) */
    REVIEW_AUTH_PROXY,    /* the review page: the identity the company's login proxy vouches for */
    REVIEW_AUTH_SHARED,   /* the review page: the one shared password; the name is as typed */
    REVIEW_AUTH__COUNT
};
/* "command-line", "password", "proxy", "shared-password"; "invalid" for bad values. */
const char *review_auth_name(enum review_auth a);

/* A decision as a person gives it. Strings are borrowed. */
struct review_decision {
    int64_t id;
    enum review_action action;
    const char *doc;           /* REVIEW_POSTED: the document number */
    const char *reason;        /* REVIEW_REJECT: why it is a business exception */
    const char *force;         /* REVIEW_POSTED: record although the ERP does not show the
                                * document or cannot be asked (never when it conflicts): the
                                * reason, recorded; NULL = verify or refuse */
    const char *operator_name; /* required (review_name_ok): the login on the page */
    const char *display_name;  /* the page: the person's display name; may be NULL */
    enum review_auth auth;     /* how operator_name was authenticated */
    const char *os_user;       /* REVIEW_AUTH_CLI: the OS user running the command ("root
                                * (uid 0)"); may be NULL (unknown) */
    const char *note;          /* may be NULL unless require_note */
    bool require_note;         /* the review page requires a note */
    int64_t expect_version;    /* > 0: refused unless the item's version is this */
};

enum review_verdict {
    REVIEW_DONE = 0,     /* recorded: one audit event */
    REVIEW_INVALID,      /* the decision is malformed (name, text, document, missing field) */
    REVIEW_REFUSED,      /* not allowed: unknown item, state, ERP verification, changed since */
    REVIEW_UNVERIFIABLE, /* posted: the ERP could not be asked (and nothing was forced) */
    REVIEW_FAILED,       /* the queue could not be read or written */
};

struct review_result {
    enum review_verdict verdict;
    bool not_found; /* REFUSED: no such item */
    bool stale;     /* REFUSED: the item changed since the version the caller saw */
    enum machine_state from, to;
    int64_t version;    /* the item's version after the change (DONE), else as found */
    char message[1024]; /* one sentence for the operator (why refused, what was recorded) */
    char detail[2048];  /* DONE: the audit event's detail, ending in review_who's words */
    char actor[REVIEW_NAME_MAX + 16];  /* "operator:NAME" */
    struct review_verification verify; /* POSTED: what the ERP said, its exchanges */
};

/*
 * Pure: who decided and how they were authenticated, as the audit event's detail ends, e.g.
 * "by alice (Alice Example), signed in with their own password" or "by alice on the command
 * line, OS user root (uid 0)". Into buf (cut to len); returns buf.
 */
const char *review_who(const struct review_decision *d, char *buf, size_t len);

/*
 * Takes a decision: checks it, the policy and the optimistic version, verifies a posted
 * document in the ERP through f (f may be NULL only with force), keeps the verification's
 * exchanges as the item's evidence, then re-checks the item and applies the change in one
 * write transaction (machine_next + store_apply, no lease, actor "operator:NAME", the detail
 * ending in who decided and how they were authenticated: review_who), so a change
 * made meanwhile (by a runner or another reviewer) refuses the decision. Returns APBOT_OK with
 * the verdict in *ret (free with review_result_done), whatever the verdict.
 */
int review_decide(struct store *st, const struct flow *f, const char *erp_url,
                  const struct review_decision *d, struct review_result *ret) APBOT_MUST_USE;
/* NULL is fine. */
void review_result_done(struct review_result *r);

#endif
