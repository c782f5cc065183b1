/*
 * report.h - the daily reconciliation: what the queue believes against what the ERP holds.
 *
 * report_build reads one booking day's listing from the ERP (every page, through the flow)
 * and joins it with the queue on the key (the ERP's reference column against the key cut to
 * the flow's key_length). It yields the balance (items received = completed + business
 * exception + manual review + pending, for the day and in total), the matched count, drift
 * findings (duplicates, missing, orphans, amount and document-number mismatches, bookings of
 * items the queue calls business exceptions) and hints (manual-review items the ERP holds,
 * with the resolve command; business exceptions; pending items with their age).
 * It speaks money too: per currency, the amounts received, completed, business exception,
 * manual review and pending (the balance holds exactly in minor units, as in counts), the ERP
 * listing's total for apbot's documents of the day against what the queue completed that day,
 * and every document that makes up the difference. And it shows the day: the bot's outcomes
 * per hour (from the audit trail) and the day's last run.
 * report_build_queue makes the queue's half alone (no ERP), for a page that must keep working
 * while the ERP is down.
 * report_write renders it as text, CSV, JSON or a self-contained HTML page (libxml2 tree,
 * every value escaped by construction; the day's chart an inline SVG). Join rules are
 * described in docs/report.md.
 */
#ifndef APBOT_REPORT_H
#define APBOT_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "apbot/error.h"

struct store;
struct flow;
struct erp_session;
struct report;
struct apbot_buf;

/* If you add a kind: add its name, its drift flag and its section in report.c/report_render.c. */
enum report_kind {
    /* drift: the queue and the ERP disagree */
    REPORT_DUPLICATE = 0,    /* one key booked more than once in the ERP */
    REPORT_MISSING,          /* completed here on the day, the ERP holds no record of it */
    REPORT_ORPHAN,           /* an ERP record carrying an apbot key the queue does not know */
    REPORT_AMOUNT_MISMATCH,  /* completed here, the ERP's record has another amount/currency */
    REPORT_DOC_MISMATCH,     /* completed here, the ERP's record has another document number */
    REPORT_BOOKED_EXCEPTION, /* the ERP holds an item the queue calls a business exception */
    /* balance: an item in no bucket */
    REPORT_UNACCOUNTED, /* invalid state, or completed without a document number */
    /* hints: what a human should look at; not drift */
    REPORT_REVIEW_HELD, /* manual review, and the ERP holds it with the same amount */
    REPORT_REVIEW_OPEN, /* manual review, the ERP does not hold it (or differently) */
    REPORT_EXCEPTION,   /* business exception (rendered grouped by reason) */
    REPORT_PENDING,     /* not yet terminal, with its age */
    REPORT_OTHER_DAY,   /* completed on the day, booked in the ERP on another day */
    REPORT_KIND__COUNT
};

/* "duplicate", "missing", "orphan", "amount-mismatch", "doc-mismatch", "booked-exception",
 * "unaccounted", "review-held", "review-open", "exception", "pending", "other-day". */
const char *report_kind_name(enum report_kind k);
/* True for the drift kinds. */
bool report_kind_is_drift(enum report_kind k);

/* One finding. Strings are owned by the report; any may be NULL. */
struct report_finding {
    enum report_kind kind;
    int64_t item_id;   /* 0 when the queue has no item (orphans) */
    const char *key;   /* the item's key, or the ERP's reference */
    const char *state; /* the item's state name, NULL for orphans */
    const char *vendor_id, *vendor_name, *invoice_number;
    const char *currency; /* the item's (or the ERP row's) currency */
    int exponent;
    int64_t amount; /* the item's amount, minor units (valid when has_amount) */
    bool has_amount;
    int64_t erp_amount; /* the ERP's amount, minor units (valid when has_erp_amount) */
    bool has_erp_amount;
    const char *doc;      /* the queue's document number */
    const char *erp_docs; /* the ERP's document number(s), comma-separated */
    int64_t created_at;   /* item's, ms; 0 for orphans */
    int64_t age_ms;       /* now - created_at */
    const char *reason;   /* the item's reason (exceptions, review) */
    const char *detail;   /* one sentence for a finance user */
    const char *command;  /* the command that resolves it, or NULL */
};

/* Items received and where they are. balanced: received == sum of the four buckets. */
struct report_balance {
    int64_t received;
    int64_t completed, exceptions, review, pending;
    int64_t unaccounted; /* in no bucket (invalid state, completed without document) */
};

struct report_summary {
    char date[11];        /* the booking day, YYYY-MM-DD */
    bool erp_read;        /* false for report_build_queue: no ERP figures, no drift */
    int64_t generated_at; /* ms */
    const char *flow_name;
    struct report_balance day;       /* items created on the day */
    struct report_balance total;     /* every item in the queue */
    bool balanced;                   /* in counts and, per currency, in money */
    int64_t erp_rows;                /* rows in the day's listing */
    bool list_by_invoice;            /* the ERP lists by invoice date: the window below was read and
                                      * only rows of the day's items (and orphans) kept */
    char list_from[11], list_to[11]; /* the dates read (YYYY-MM-DD) */
    int64_t erp_apbot_rows;          /* of which carry an apbot key (known or not) */
    int erp_pages;
    int64_t matched; /* completed items with exactly one ERP record, same doc+amount */
    int64_t lookups; /* per-key ERP lookups made (missing checks, review hints) */
    int64_t counts[REPORT_KIND__COUNT];
    int64_t drift; /* sum of the drift counts */
    /* the audit chain's head at the end of the day (store_audit_head): what an auditor keeps
     * to check later with `apbot audit verify --head ID:SHA256`; id 0 when no event yet */
    int64_t audit_head_id;
    char audit_head_hash[65];
};

/* The buckets of report_balance in money: sums of the items' payable totals, minor units. */
struct report_amounts {
    int64_t received;
    int64_t completed, exceptions, review, pending;
    int64_t unaccounted;
};

/* One currency's money. */
struct report_money {
    char currency[4];
    int exponent;
    struct report_amounts day;   /* items created on the day */
    struct report_amounts total; /* every item in the queue */
    bool balanced;               /* received == the four buckets, day and total, nothing else */
    /* the ERP's listing of the day against the queue (zero when the ERP was not read) */
    int64_t erp_total;      /* apbot documents of the listing in this currency (a credit note
                             * counted with its invoice's sign) */
    int64_t erp_docs;       /* how many documents erp_total adds up */
    int64_t erp_unreadable; /* apbot documents whose amount could not be read (not in erp_total) */
    int64_t expected;       /* items the queue completed on the day: what the listing should hold */
    int64_t expected_items;
    int64_t difference; /* erp_total - expected, made up exactly by this currency's
                         * report_money_diff rows */
};

/* Why a document is part of a difference between the listing's total and the queue's. */
enum report_diff_why {
    REPORT_DIFF_AMOUNT = 0,       /* in both, with another amount */
    REPORT_DIFF_UNREADABLE,       /* in both, the ERP's amount cannot be read */
    REPORT_DIFF_DUPLICATE,        /* a second booking of one key */
    REPORT_DIFF_ORPHAN,           /* an apbot key this queue does not know */
    REPORT_DIFF_NOT_COMPLETED,    /* booked, but the item is not completed here */
    REPORT_DIFF_COMPLETED_OTHER,  /* booked on the day, completed here on another day */
    REPORT_DIFF_OTHER_CURRENCY,   /* booked in another currency than the invoice's */
    REPORT_DIFF_BOOKED_OTHER_DAY, /* completed on the day, booked on another day */
    REPORT_DIFF_MISSING,          /* completed on the day, the listing lacks it */
    REPORT_DIFF__COUNT
};
/* "amount", "unreadable", "duplicate", "orphan", "not-completed", "completed-other-day",
 * "other-currency", "booked-other-day", "missing". */
const char *report_diff_why_name(enum report_diff_why w);

/* One document that makes up a difference. Strings are owned by the report. */
struct report_money_diff {
    const char *currency; /* the currency bucket it counts in */
    int exponent;
    enum report_diff_why why;
    const char *doc; /* the ERP's document, or the queue's when the listing lacks it */
    int64_t item_id; /* 0 for an orphan */
    const char *key; /* the item's key or the ERP's reference */
    bool has_erp_amount;
    int64_t erp_amount; /* as counted in erp_total */
    bool has_queue_amount;
    int64_t queue_amount; /* as counted in expected */
    int64_t delta;        /* its share of the difference: erp - queue */
};

/* What the bot did during the day, from the audit trail: outcomes of runner events per local
 * hour, and the day's last run (the runner owner whose latest event is the latest). */
enum report_outcome {
    REPORT_OUT_COMPLETED = 0, /* to completed */
    REPORT_OUT_EXCEPTION,     /* to business-exception */
    REPORT_OUT_REVIEW,        /* to manual-review */
    REPORT_OUT_UNKNOWN,       /* to reconciling: an outcome the ERP left ambiguous */
    REPORT_OUT__COUNT
};
/* "completed", "business-exception", "manual-review", "unknown". */
const char *report_outcome_name(enum report_outcome o);

struct report_activity {
    int64_t per_hour[24][REPORT_OUT__COUNT];
    int64_t max_hour;   /* the largest stacked hour, for scaling */
    char last_run[160]; /* the run's owner ("host:pid:tag"), "" when no run today */
    int64_t last_run_first, last_run_last; /* its first and latest event on the day, ms */
    int64_t last_run_items;                /* items it moved */
    int64_t last_run_outcomes[REPORT_OUT__COUNT];
};

enum report_status {
    REPORT_CLEAN = 0,  /* balanced, no drift */
    REPORT_DRIFT,      /* balanced, drift found */
    REPORT_UNBALANCED, /* does not balance (whatever the drift) */
};

struct report_options {
    const char *date;  /* booking day YYYY-MM-DD (required) */
    int64_t now;       /* ms, for ages; 0 = store_now_ms() */
    int max_lookups;   /* bound on per-key lookups for review hints; 0 = 200, -1 = none */
    int64_t settle_ms; /* the settle delay in force: the ERP is read only once the day's last
                        * completion is this old (report_settle_wait_ms); 0 = no wait */
};

/*
 * How long to wait before reading the ERP, at now, for a day whose last completion was at
 * last_done (ms): an ERP's search and listing may not yet show what it booked a moment ago
 * (its index lags), and an absence counts only once the settle delay has passed, as in a
 * run. 0 when nothing is that recent or settle_ms <= 0; never more than settle_ms (a
 * completion stamped in the future, after a clock step, waits one delay at most).
 */
int64_t report_settle_wait_ms(int64_t now, int64_t last_done, int64_t settle_ms);

/*
 * Builds the report for opt->date. erp must be a session for flow f (with a list operation;
 * its lookup is used to check completed items absent from the listing and manual-review
 * items). Returns APBOT_OK and *ret (free with report_free); APBOT_E_NET / APBOT_E_LIMIT /
 * APBOT_E_SYSTEMIC when the ERP could not be read completely (no report then: a partial
 * listing must never pass for a reconciliation), APBOT_E_DB for the queue, APBOT_E_INVAL for
 * a bad date. Detail in err.
 */
int report_build(struct store *st, struct erp_session *erp, const struct flow *f,
                 const struct report_options *opt, struct report **ret, char *err,
                 size_t errlen) APBOT_MUST_USE;
/*
 * The queue's half of the report alone, without the ERP: balance, money per currency (no ERP
 * total, no difference), the day's activity, business exceptions, pending and manual-review
 * items (not checked in the ERP). f may be NULL (flow name and resolve commands unknown).
 * summary->erp_read is false. Same returns as report_build, without the ERP ones.
 */
int report_build_queue(struct store *st, const struct flow *f, const struct report_options *opt,
                       struct report **ret, char *err, size_t errlen) APBOT_MUST_USE;
/* NULL is fine. */
void report_free(struct report *r);

/* Valid while r lives. */
const struct report_summary *report_summary(const struct report *r);
/* Findings in section order (drift first, then balance, then hints), *ret_n their number. */
const struct report_finding *report_findings(const struct report *r, size_t *ret_n);
enum report_status report_status(const struct report *r);
/* Money per currency, sorted by currency code; *ret_n their number. */
const struct report_money *report_money(const struct report *r, size_t *ret_n);
/* The documents that make up the differences, by currency then document. */
const struct report_money_diff *report_money_diffs(const struct report *r, size_t *ret_n);
/* The day's activity. */
const struct report_activity *report_activity(const struct report *r);

enum report_format {
    REPORT_FMT_TEXT = 0,
    REPORT_FMT_CSV,
    REPORT_FMT_JSON,
    REPORT_FMT_HTML,
};
/* "text", "csv", "json", "html"; APBOT_E_INVAL for anything else (ret untouched). */
int report_format_from_name(const char *name, enum report_format *ret) APBOT_MUST_USE;

/* Writes the report to out in fmt. Returns APBOT_OK or APBOT_E_IO (detail in err). */
int report_write(const struct report *r, enum report_format fmt, FILE *out, char *err,
                 size_t errlen) APBOT_MUST_USE;

/*
 * The morning mail (report_mail.c): through a mail server that speaks TLS (smtps://, or
 * smtp:// with STARTTLS required; the certificate verified), a MIME message from `from` to
 * every address of `to`: a short text (status, the day's balance, money per currency, the
 * review depth, the oldest items in review, the review page's address, the audit chain's head)
 * and the HTML report attached; the subject names the status (DRIFT, DOES NOT BALANCE).
 * Addresses must be plain (mail_address_ok); nothing from the report reaches a header but the
 * date, the flow's name and the status, encoded (RFC 2047) where not ASCII.
 */
struct report_mail {
    const char *smtp_url; /* smtps://HOST[:PORT] or smtp://HOST[:PORT] */
    const char *ca_file;  /* NULL: the system's CAs */
    const char *user;     /* SMTP credentials (secret.h), NULL: none */
    const char *password;
    const char *from; /* plain addresses */
    const char *const *to;
    size_t n_to;
    const char *review_url;     /* linked in the text, or NULL */
    const char *subject_prefix; /* put before the subject (UTF-8: a company, a failed unit),
                                 * or NULL */
};
/* Sends r. APBOT_OK once the server accepted it; APBOT_E_INVAL (addresses, URL), APBOT_E_NET
 * (the server, TLS, authentication), APBOT_E_IO; detail in err, never the password. */
int report_mail_send(const struct report *r, const struct report_mail *m, char *err,
                     size_t errlen) APBOT_MUST_USE;
/* Sends the mail that says the report for date could not be made, and why (subject
 * "... NO REPORT"). flow_name may be NULL. Same returns. */
int report_mail_failure(const char *date, const char *flow_name, const char *why,
                        const struct report_mail *m, char *err, size_t errlen) APBOT_MUST_USE;
/* Whether list is a comma-separated list of 1..32 plain addresses (for a command's usage
 * check); APBOT_E_INVAL naming the first that is not. */
int report_mail_addresses(const char *list, char *store, size_t store_len, const char **ret,
                          size_t max, size_t *ret_n, char *err, size_t errlen) APBOT_MUST_USE;
/* Whether url is a mail server URL apbot sends to (smtps:// or smtp://, a host and a port). */
int report_mail_url_ok(const char *url, char *err, size_t errlen) APBOT_MUST_USE;

#ifdef APBOT_UNITTEST /* static in the product (base/unittest.h) */
/* The subject: "[PREFIX ]apbot report DATE (FLOW): STATUS[ (N findings)]". */
void report_mail_subject(const struct report *r, const char *prefix, char *buf, size_t len);
/* The text, appended to out; attachment (may be NULL) is named at its end. */
int report_mail_text(const struct report *r, const char *review_url, const char *attachment,
                     struct apbot_buf *out);
#endif

/* Local calendar date of a Unix-ms time, "YYYY-MM-DD" into buf (>= 11 bytes). */
void report_local_date(int64_t ms, char buf[11]);

/* Local date and time of a Unix-ms time, "YYYY-MM-DD HH:MM:SS", into buf; `fallback` instead
 * when the time cannot be converted or does not fit. Cannot fail; returns buf. */
const char *report_local_time(int64_t ms, const char *fallback, char *buf, size_t len);

/*
 * Orders two document numbers for people: runs of digits compare as numbers ("3" < "10" <
 * "100", "AP-2026-000010" < "AP-2026-000100"), other characters byte by byte; equal numbers
 * with more leading zeros sort first, so the order is total. NULL sorts before any text. Pure.
 */
int report_doc_cmp(const char *a, const char *b);

/* How long ms milliseconds is, to the minute, for people: "2d 3h", "4h 05m", "12m" (negative
 * counts as 0). Cannot fail; returns buf. */
const char *report_format_age(int64_t ms, char *buf, size_t len);

#endif
