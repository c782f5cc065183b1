/*
 * sim_client.h - small libcurl helpers for tests that run against the simulated ERP
 * (fixtures/erp-sim, started in-process with sim_start or as the erp-sim program): the admin
 * ground truth (/_sim/ledger.csv, /_sim/lines.csv, /_sim/stats), forcing faults and changing
 * scenario keys, drift bookings and amendments, and a cookie-keeping clerk session that can
 * fill in the acme UI's two-step AP entry or log in to the classic UI (HTTP Basic), and plain
 * requests with headers of one's own (the spa UI's JSON-RPC). Only talks to 127.0.0.1. Admin
 * helpers need the sim started with admin enabled.
 */
#ifndef APBOT_TESTS_SIM_CLIENT_H
#define APBOT_TESTS_SIM_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

/* ---- admin (ground truth and fault control) -------------------------------------------- */

/* GET /_sim/ledger.csv into *ret_csv (malloc'd, caller frees). Returns 0 or -1. */
int simc_ledger(unsigned short port, char **ret_csv);
/* Number of bookings whose reference equals `reference` exactly, or -1. */
int simc_count_reference(unsigned short port, const char *reference);
/* Number of bookings of vendor_id's invoice invoice_number (both exact), whatever their
 * reference, or -1: the natural key's count. */
int simc_count_natural(unsigned short port, const char *vendor_id, const char *invoice_number);
/* Number of bookings (ledger rows without the header), or -1. */
int simc_count_rows(unsigned short port);
/* GET /_sim/lines.csv (doc,line,gl_account,amount,description) into *ret_csv (malloc'd).
 * Returns 0 or -1. */
int simc_lines(unsigned short port, char **ret_csv);
/* The status (draft/posted) of document doc in the ledger into dst: 0, or -1 (no such doc). */
int simc_doc_status(unsigned short port, const char *doc, char *dst, size_t len);
/* POST /_sim/amend: the booked amount of doc becomes `amount` (plain, "1234.56"). 0 or -1. */
int simc_amend(unsigned short port, const char *doc, const char *amount);
/* GET /_sim/stats (JSON) into *ret_json (malloc'd). Returns 0 or -1. */
int simc_stats(unsigned short port, char **ret_json);
/* A number from the stats JSON by key ("bookings", "overload503", ...: the first occurrence of
 * "key":N), or -1. */
long long simc_stat(unsigned short port, const char *key);
/* The next `count` eligible requests get fault `name` (0 clears). Returns 0 or -1. */
int simc_fault(unsigned short port, const char *name, int count);
/* Sets one scenario key at run time. Returns 0 or -1. */
int simc_set(unsigned short port, const char *key, const char *value);
/* Books a document by hand (drift): amount plain with a dot ("1234.56"), invoice_date ISO.
 * Writes the new document number into ret_doc (may be NULL). Returns 0 or -1. */
int simc_book(unsigned short port, const char *vendor_id, const char *invoice_number,
              const char *invoice_date, const char *currency, const char *amount,
              const char *reference, char *ret_doc, size_t doclen);
/* Deletes a document by hand. Returns 0, or -1 (also when there is no such document). */
int simc_delete(unsigned short port, const char *doc);

/* ---- plain requests --------------------------------------------------------------------- */
/* Every request uses a fresh connection (see sim_client.c: libcurl's silent re-send). */

/* One request outside any session. method "GET" or "POST" (body form-urlencoded, may be NULL).
 * Returns the libcurl code (0 = got an answer) with status and body (malloc'd, may be NULL). */
int simc_request(unsigned short port, const char *method, const char *path, const char *body,
                 long timeout_ms, long *ret_status, char **ret_body);
/* The same, also handing over the response headers (malloc'd, may be NULL). */
int simc_request_headers(unsigned short port, const char *method, const char *path,
                         const char *body, long timeout_ms, long *ret_status, char **ret_body,
                         char **ret_headers);

/* The same with extra request headers: `req_headers` a NULL-terminated list of "Name: value"
 * lines (may be NULL; "Name:" removes a header libcurl would send). method may also be another
 * than GET and POST (sent without a body). For the spa UI's JSON-RPC endpoint, which wants
 * Content-Type: application/json and an Authorization header. */
int simc_request_extra(unsigned short port, const char *method, const char *path,
                       const char *const *req_headers, const char *body, long timeout_ms,
                       long *ret_status, char **ret_body, char **ret_headers);

/* ---- clerk session ---------------------------------------------------------------------- */

struct simc_session;

/* A session with its own cookie jar; timeout_ms per request (0 = 10 s). Never NULL. */
struct simc_session *simc_session_new(unsigned short port, long timeout_ms);
void simc_session_free(struct simc_session *s);
/* GET/POST a path; returns the libcurl code (0 = an answer arrived) and sets *ret_status
 * (0 when no answer). The body stays readable through simc_body until the next request. */
int simc_get(struct simc_session *s, const char *path, long *ret_status);
int simc_post(struct simc_session *s, const char *path, const char *body, long *ret_status);
/* The last answer's body ("" when none). */
const char *simc_body(const struct simc_session *s);
/* Value of the last answer's response header `name` (case-insensitive; the first one, e.g.
 * "Location" of a 303), 0 or -1 when it had none. */
int simc_last_header(const struct simc_session *s, const char *name, char *dst, size_t len);
/* Logs in (fetches the CSRF token first). Returns 0 when /erp/home greets the user. */
int simc_login(struct simc_session *s, const char *user, const char *password);
/* HTTP Basic credentials sent with every later request of the session (NULL user: none). */
void simc_session_basic(struct simc_session *s, const char *user, const char *password);
/* The classic UI's login: sets Basic credentials and GETs
 * /login.pl?action=authenticate&company=ACME. Returns 0 when it answered 200 "Success". */
int simc_classic_login(struct simc_session *s, const char *user, const char *password);

/* Value of the input named `name` in html (first match, entities decoded), 0 or -1. */
int simc_field(const char *html, const char *name, char *dst, size_t len);
/* Text of the message area (<span class="msgText">), 0 or -1. */
int simc_message(const char *html, char *dst, size_t len);
/* Contents of the element with id="id" (<td id=..> or <span id=..>), entities decoded. */
int simc_by_id(const char *html, const char *id, char *dst, size_t len);
/* Form body of every hidden input in html, URL-encoded (malloc'd). */
char *simc_hidden_form(const char *html);
/* URL-encodes s (malloc'd). */
char *simc_escape(const char *s);

/* Step 1: GET the entry form and submit `fields` (URL-encoded, without formToken) to check.
 * Returns the libcurl code; the confirmation page (or the message page) is in simc_body. */
int simc_check(struct simc_session *s, const char *fields, long *ret_status);
/* Step 2: submit the hidden fields of the confirmation page in simc_body to post. */
int simc_confirm(struct simc_session *s, long *ret_status);
/* Both steps. Returns 0 and the document number when the success page came back, 1 when the
 * ERP answered with a message (readable with simc_message(simc_body(s), ...)), -1 when no
 * (usable) answer arrived. */
int simc_post_invoice(struct simc_session *s, const char *fields, char *ret_doc, size_t doclen);

/* Standard valid entry fields, for tests to tweak: vendor 100001, 03.11.2026, EUR 1.234,56,
 * G/L 6000 and the given vendor invoice number and reference. Writes into dst. */
void simc_fields(char *dst, size_t len, const char *vendor_inv_no, const char *reference);

/* ---- admin over HTTPS ------------------------------------------------------------------- */
/* For a simulator started with tls_cert_pem: the same calls over https://127.0.0.1:PORT, the
 * server verified (peer and host) against ca_pem, PEM text such as its self-signed certificate. */

/* simc_request over HTTPS. Returns the libcurl code (0 = got an answer). */
int simc_request_tls(unsigned short port, const char *ca_pem, const char *method, const char *path,
                     const char *body, long timeout_ms, long *ret_status, char **ret_body);
/* simc_ledger, simc_count_rows, simc_count_reference and simc_stat over HTTPS. */
int simc_ledger_tls(unsigned short port, const char *ca_pem, char **ret_csv);
int simc_count_rows_tls(unsigned short port, const char *ca_pem);
int simc_count_reference_tls(unsigned short port, const char *ca_pem, const char *reference);
long long simc_stat_tls(unsigned short port, const char *ca_pem, const char *key);

/* True when the bot's document erp_doc names the ledger's document ledger_doc: the same text,
 * or (the single-page UI shows its documents by id) the ledger's sequence number as an integer
 * ("123" for AP-2026-000123). */
bool simc_doc_same(const char *ledger_doc, const char *erp_doc);

#endif
