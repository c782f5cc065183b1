/*
 * invoice.h - the invoice model, its canonical serialisation, identity key and fingerprint.
 *
 * Readers (csvin, ublin) fill a struct invoice; the store keeps its canonical JSON payload;
 * the runner reads the payload back to fill the ERP's form. The identity key is what makes
 * an invoice the same invoice (vendor, normalised number, document type); the fingerprint
 * covers the whole canonical payload. Both are versioned so they never drift silently. A
 * reader hands each invoice it reads, or its refusal, to a struct invoice_sink.
 */
#ifndef APBOT_INVOICE_H
#define APBOT_INVOICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "apbot/error.h"

#define INVOICE_KEY_PREFIX "AP1-"
#define INVOICE_KEY_DIGITS 20     /* base32 characters of the digest in a full key */
#define INVOICE_KEY_LEN 24        /* strlen("AP1-") + 20 */
#define INVOICE_KEY_MIN_DIGITS 12 /* shortest prefix a flow may write */
#define INVOICE_FP_LEN 64         /* hex SHA-256 */

enum invoice_doc_type {
    INVOICE_DOC_INVOICE = 0,
    INVOICE_DOC_CREDIT_NOTE,
    INVOICE_DOC__COUNT,
    INVOICE_DOC_INVALID = -1
};

struct invoice_line {
    char *description;  /* may be NULL */
    char *gl_account;   /* may be NULL */
    char *quantity;     /* decimal text as given, may be NULL (not money) */
    char *unit_price;   /* decimal text as given, may carry more decimals than the currency */
    int64_t net;        /* line net amount, minor units */
    int64_t tax;        /* line tax amount, minor units (0 when the source has none) */
    char *tax_category; /* "ID" or "ID:percent" (UBL ClassifiedTaxCategory: "S:19", "E:0"),
                           may be NULL; part of the fingerprint only when set */
};

/* Field strings are heap-owned by the invoice and freed by invoice_done(). */
struct invoice {
    char *vendor_id;      /* ERP vendor id after --vendors mapping; never empty */
    char *vendor_name;    /* may be NULL */
    char *invoice_number; /* as printed on the document (normalised only for the key) */
    enum invoice_doc_type doc_type;
    char issue_date[11]; /* YYYY-MM-DD */
    char due_date[11];   /* YYYY-MM-DD or "" */
    char currency[4];    /* ISO 4217 */
    int exponent;        /* money_exponent(currency) */
    int64_t net_total;   /* tax-exclusive total, minor units */
    int64_t tax_total;   /* tax total, minor units */
    int64_t payable;     /* amount payable = what is booked, minor units */
    struct invoice_line *lines;
    size_t n_lines;
    size_t cap_lines; /* hands off */
};

void invoice_init(struct invoice *inv);
/* Frees every field; the struct may then be reused after invoice_init(). NULL is fine. */
void invoice_done(struct invoice *inv);
/* The most lines an invoice may have: every reader bounds its lines at or below this (CSV
 * 10,000, UBL and CII 100,000), and invoice_from_json refuses a payload with more. */
#define INVOICE_MAX_LINES 100000

/* Appends a copy of *line (strings duplicated). Aborts on out-of-memory, and past
 * INVOICE_MAX_LINES lines (a caller's bug: callers bound their lines first). */
void invoice_add_line(struct invoice *inv, const struct invoice_line *line);

const char *invoice_doc_type_name(enum invoice_doc_type t); /* "invoice", "credit-note" */
enum invoice_doc_type invoice_doc_type_from_name(const char *name);

/*
 * Normalises an identifier for the key: trims, collapses inner whitespace runs to one
 * space, upper-cases ASCII. Returns a malloc'd string the caller frees.
 */
char *invoice_normalise_id(const char *s);

/* Checks the invoice is complete and consistent; writes the reason into err. */
int invoice_validate(const struct invoice *inv, char *err, size_t errlen) APBOT_MUST_USE;

/* Identity key "AP1-" + 20 base32 chars of SHA-256 over the canonical identity. */
int invoice_identity_key(const struct invoice *inv,
                         char ret_key[INVOICE_KEY_LEN + 1]) APBOT_MUST_USE;

/* Lower-case hex SHA-256 of the canonical payload (invoice_to_json). */
int invoice_fingerprint(const struct invoice *inv, char ret_fp[INVOICE_FP_LEN + 1]) APBOT_MUST_USE;

/*
 * Canonical JSON payload (stable key order, amounts as integers in minor units plus the
 * exponent). Returns a malloc'd string the caller frees, or NULL if the invoice is invalid.
 */
char *invoice_to_json(const struct invoice *inv);

/* Parses a payload written by invoice_to_json into *ret (invoice_init'ed by the call; on
 * failure *ret is left empty, so invoice_done(ret) is always safe). Payloads in the canonical
 * subset of what invoice_to_json writes (no escapes, keys in its order: bot/invoice.c) are
 * read by a fast reader, anything else by jansson, with the same result. */
int invoice_from_json(const char *json, struct invoice *ret, char *err,
                      size_t errlen) APBOT_MUST_USE;

/* For tests (test_invoice, fuzz_payload): which reader invoice_from_json_as uses. */
enum invoice_json_reader {
    INVOICE_JSON_AUTO = 0, /* invoice_from_json's: the fast reader, jansson when it declines */
    INVOICE_JSON_JANSSON,  /* jansson alone, the reference the fast reader must agree with */
};
/* For tests: invoice_from_json through `reader`, with its results and ownership; *ret_fast
 * (NULL allowed) tells whether the fast reader took the payload. */
int invoice_from_json_as(const char *json, enum invoice_json_reader reader, struct invoice *ret,
                         bool *ret_fast, char *err, size_t errlen) APBOT_MUST_USE;

/* Identity key from its parts (what invoice_identity_key uses). APBOT_E_INVAL when vendor or
 * number normalise to "" or the type is invalid; ret_key untouched then. */
int invoice_identity_key_for(const char *vendor_id, const char *invoice_number,
                             enum invoice_doc_type doc_type,
                             char ret_key[INVOICE_KEY_LEN + 1]) APBOT_MUST_USE;

/* Replaces a heap string field (*field freed, value duplicated; NULL clears). Aborts on OOM. */
void invoice_set_str(char **field, const char *value);

/* True for a real calendar date written YYYY-MM-DD (year 1900 or later). */
bool invoice_date_valid(const char *s);

/* True when s is well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF). */
bool invoice_utf8_valid(const char *s);

/*
 * Where a reader (csvin, ublin, ciiin, pdfin, through reader_read_file) hands what it reads:
 * accept once per good invoice, refuse once per bad one (with file, line or element path, and
 * reason), and the reader carries on with the rest of the file. Its return code reports only
 * file-level failure.
 */
struct invoice_sink {
    /* A good invoice; inv and where ("file:12" or "file#/Invoice") are valid only during
     * the call. A non-zero return aborts the read and is returned by the reader. */
    int (*accept)(void *ctx, const struct invoice *inv, const char *where);
    /* A refused invoice or row: where is "file:12" (CSV line) or "file#/Invoice/cbc:ID". */
    void (*refuse)(void *ctx, const char *where, const char *reason);
    void *ctx;
};

#endif
