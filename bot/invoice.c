/*
 * invoice.c - the invoice model, its canonical JSON payload, identity key and fingerprint.
 *
 * Readers fill a struct invoice; this module checks it, turns it into the canonical payload the
 * store keeps, and derives the two keys of DESIGN.md. It knows nothing about files or the ERP.
 *
 * Identity key, version 1 (never change the bytes below without bumping the version; the
 * golden tests in tests/test_invoice.c pin them):
 *
 *     "apbot-identity-v1\n" + N(vendor_id) + "\n" + N(invoice_number) + "\n" + doc type name
 *
 * where N() is invoice_normalise_id() (trim, collapse ASCII whitespace runs to one space, ASCII
 * upper-case; other bytes unchanged, so the result never holds a '\n' and the fields cannot run
 * into each other), the doc type name is "invoice" or "credit-note", and there is no trailing
 * newline. The key is "AP1-" followed by the first 20 characters of the RFC 4648 base32
 * encoding (alphabet A-Z2-7, no padding) of SHA-256 over those bytes: 100 bits.
 *
 * Canonical payload, version 1: a compact JSON object with sorted keys (jansson,
 * JSON_SORT_KEYS | JSON_COMPACT, UTF-8 as is):
 *
 *     {"currency":"EUR","doc_type":"invoice","due_date":null|"YYYY-MM-DD","exponent":2,
 *      "invoice_number":"...","issue_date":"YYYY-MM-DD","lines":[{"description":null|"...",
 *      "gl_account":null|"...","net":12345,"quantity":null|"...","tax":2345,
 *      "tax_category":"...","unit_price":null|"..."}],"net_total":..,"payable":..,
 *      "tax_total":..,"v":1,"vendor_id":"...","vendor_name":null|"..."}
 *
 * Every key is always present except a line's "tax_category", which is left out when the
 * source has none (CSV), so it was added without changing any earlier payload's bytes.
 *
 * Amounts are JSON integers in minor units. The fingerprint is the lower-case hex SHA-256 of
 * exactly that text, so it covers dates, currency, amounts, lines and names.
 */
#include "apbot/invoice.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "apbot/buf.h"
#include "apbot/mem.h"
#include "apbot/money.h"

#define INVOICE_IDENTITY_TAG "apbot-identity-v1"
#define INVOICE_PAYLOAD_VERSION 1
#define INVOICE_ID_MAX 200    /* bytes of a vendor id or invoice number */
#define INVOICE_TEXT_MAX 4096 /* bytes of a name, description, quantity, price */

static const char *const doc_type_names[] = {
    [INVOICE_DOC_INVOICE] = "invoice",
    [INVOICE_DOC_CREDIT_NOTE] = "credit-note",
};
_Static_assert(sizeof(doc_type_names) / sizeof(doc_type_names[0]) == INVOICE_DOC__COUNT,
               "every invoice_doc_type needs a name");

void invoice_init(struct invoice *inv)
{
    memset(inv, 0, sizeof(*inv));
    inv->doc_type = INVOICE_DOC_INVOICE;
}

static void invoice_line_free_fields(struct invoice_line *l)
{
    free(l->description);
    free(l->gl_account);
    free(l->quantity);
    free(l->unit_price);
    free(l->tax_category);
}

void invoice_done(struct invoice *inv)
{
    if (!inv)
        return;
    free(inv->vendor_id);
    free(inv->vendor_name);
    free(inv->invoice_number);
    for (size_t i = 0; i < inv->n_lines; i++)
        invoice_line_free_fields(&inv->lines[i]);
    free(inv->lines);
    invoice_init(inv);
}

void invoice_add_line(struct invoice *inv, const struct invoice_line *line)
{
    if (apbot_grow((void **)&inv->lines, &inv->cap_lines, inv->n_lines, sizeof(*inv->lines),
                   INVOICE_MAX_LINES) != APBOT_OK)
        abort(); /* every caller bounds its lines at INVOICE_MAX_LINES or below */
    struct invoice_line *l = &inv->lines[inv->n_lines++];
    l->description = apbot_xstrdup(line->description);
    l->gl_account = apbot_xstrdup(line->gl_account);
    l->quantity = apbot_xstrdup(line->quantity);
    l->unit_price = apbot_xstrdup(line->unit_price);
    l->tax_category = apbot_xstrdup(line->tax_category);
    l->net = line->net;
    l->tax = line->tax;
}

void invoice_set_str(char **field, const char *value)
{
    free(*field);
    *field = apbot_xstrdup(value);
}

const char *invoice_doc_type_name(enum invoice_doc_type t)
{
    if ((int)t < 0 || t >= INVOICE_DOC__COUNT)
        return "invalid";
    return doc_type_names[t];
}

enum invoice_doc_type invoice_doc_type_from_name(const char *name)
{
    if (!name)
        return INVOICE_DOC_INVALID;
    for (int t = 0; t < INVOICE_DOC__COUNT; t++)
        if (strcasecmp(name, doc_type_names[t]) == 0)
            return (enum invoice_doc_type)t;
    return INVOICE_DOC_INVALID;
}

static bool invoice_is_ascii_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

char *invoice_normalise_id(const char *s)
{
    if (!s)
        s = "";
    char *out = apbot_xmalloc(strlen(s) + 1);
    size_t n = 0;
    bool pending_space = false;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (invoice_is_ascii_space(*p)) {
            pending_space = n > 0;
            continue;
        }
        if (pending_space)
            out[n++] = ' ';
        pending_space = false;
        out[n++] = (*p >= 'a' && *p <= 'z') ? (char)(*p - 'a' + 'A') : (char)*p;
    }
    out[n] = '\0';
    return out;
}

bool invoice_date_valid(const char *s)
{
    if (!s || strlen(s) != 10 || s[4] != '-' || s[7] != '-')
        return false;
    for (int i = 0; i < 10; i++)
        if (i != 4 && i != 7 && !isdigit((unsigned char)s[i]))
            return false;
    int y = (s[0] - '0') * 1000 + (s[1] - '0') * 100 + (s[2] - '0') * 10 + (s[3] - '0');
    int m = (s[5] - '0') * 10 + (s[6] - '0');
    int d = (s[8] - '0') * 10 + (s[9] - '0');
    static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (y < 1900 || m < 1 || m > 12 || d < 1)
        return false;
    int max = mdays[m - 1];
    if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
        max = 29;
    return d <= max;
}

bool invoice_utf8_valid(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p;
        int extra;
        unsigned min;
        if (c < 0x80) {
            p++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            extra = 1;
            min = 0x80;
            c &= 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            extra = 2;
            min = 0x800;
            c &= 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            extra = 3;
            min = 0x10000;
            c &= 0x07;
        } else {
            return false;
        }
        p++;
        for (int i = 0; i < extra; i++, p++) {
            if ((*p & 0xC0) != 0x80)
                return false;
            c = (c << 6) | (*p & 0x3F);
        }
        if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
            return false;
    }
    return true;
}

/* A text field: NULL allowed unless required; valid UTF-8; no control characters other than
 * tab and newline (descriptions may be multi-line); bounded. */
static int invoice_check_text(const char *what, const char *s, bool required, size_t max,
                              bool allow_newline, char *err, size_t errlen)
{
    if (!s) {
        if (required)
            return apbot_fail(err, errlen, APBOT_E_INVAL, "%s is missing", what);
        return APBOT_OK;
    }
    size_t n = strlen(s);
    if (n > max)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "%s is too long (%zu bytes, at most %zu)",
                          what, n, max);
    if (!invoice_utf8_valid(s))
        return apbot_fail(err, errlen, APBOT_E_INVAL, "%s is not valid UTF-8", what);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == 0x7f ||
            (*p < 0x20 && *p != '\t' && !(allow_newline && (*p == '\n' || *p == '\r'))))
            return apbot_fail(err, errlen, APBOT_E_INVAL, "%s contains control character 0x%02x",
                              what, *p);
    }
    if (required) {
        char *norm = invoice_normalise_id(s);
        bool empty = norm[0] == '\0';
        free(norm);
        if (empty)
            return apbot_fail(err, errlen, APBOT_E_INVAL, "%s is empty", what);
    }
    return APBOT_OK;
}

static bool invoice_amount_ok(int64_t v)
{
    return v <= MONEY_MAX_MINOR && v >= -MONEY_MAX_MINOR;
}

int invoice_validate(const struct invoice *inv, char *err, size_t errlen)
{
    int rc;
    if (!inv)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "no invoice");
    if ((rc = invoice_check_text("vendor id", inv->vendor_id, true, INVOICE_ID_MAX, false, err,
                                 errlen)))
        return rc;
    if ((rc = invoice_check_text("invoice number", inv->invoice_number, true, INVOICE_ID_MAX, false,
                                 err, errlen)))
        return rc;
    if ((rc = invoice_check_text("vendor name", inv->vendor_name, false, INVOICE_TEXT_MAX, false,
                                 err, errlen)))
        return rc;
    if ((int)inv->doc_type < 0 || inv->doc_type >= INVOICE_DOC__COUNT)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "invalid document type %d",
                          (int)inv->doc_type);
    if (!invoice_date_valid(inv->issue_date))
        return apbot_fail(err, errlen, APBOT_E_INVAL,
                          "issue date '%.10s' is not a valid YYYY-MM-DD date", inv->issue_date);
    if (inv->due_date[0] && !invoice_date_valid(inv->due_date))
        return apbot_fail(err, errlen, APBOT_E_INVAL,
                          "due date '%.10s' is not a valid YYYY-MM-DD date", inv->due_date);
    int exp = money_exponent(inv->currency);
    if (exp < 0)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "unknown currency '%.3s'", inv->currency);
    if (exp != inv->exponent)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "exponent %d does not match %s (%d)",
                          inv->exponent, inv->currency, exp);
    if (!invoice_amount_ok(inv->net_total) || !invoice_amount_ok(inv->tax_total) ||
        !invoice_amount_ok(inv->payable))
        return apbot_fail(err, errlen, APBOT_E_RANGE, "a total is out of range");
    if (inv->n_lines && !inv->lines)
        return apbot_fail(err, errlen, APBOT_E_BUG, "lines missing");
    for (size_t i = 0; i < inv->n_lines; i++) {
        const struct invoice_line *l = &inv->lines[i];
        char what[64];
        snprintf(what, sizeof(what), "line %zu description", i + 1);
        if ((rc = invoice_check_text(what, l->description, false, INVOICE_TEXT_MAX, true, err,
                                     errlen)))
            return rc;
        snprintf(what, sizeof(what), "line %zu G/L account", i + 1);
        if ((rc = invoice_check_text(what, l->gl_account, false, INVOICE_ID_MAX, false, err,
                                     errlen)))
            return rc;
        snprintf(what, sizeof(what), "line %zu quantity", i + 1);
        if ((rc = invoice_check_text(what, l->quantity, false, 64, false, err, errlen)))
            return rc;
        snprintf(what, sizeof(what), "line %zu unit price", i + 1);
        if ((rc = invoice_check_text(what, l->unit_price, false, 64, false, err, errlen)))
            return rc;
        snprintf(what, sizeof(what), "line %zu tax category", i + 1);
        if ((rc = invoice_check_text(what, l->tax_category, false, 64, false, err, errlen)))
            return rc;
        if (!invoice_amount_ok(l->net) || !invoice_amount_ok(l->tax))
            return apbot_fail(err, errlen, APBOT_E_RANGE, "line %zu amount out of range", i + 1);
    }
    return APBOT_OK;
}

static void invoice_sha256(const void *data, size_t len, unsigned char md[32])
{
    unsigned int mdlen = 0;
    if (!EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) || mdlen != 32)
        abort(); /* SHA-256 cannot fail short of a broken libcrypto */
}

int invoice_identity_key_for(const char *vendor_id, const char *invoice_number,
                             enum invoice_doc_type doc_type, char ret_key[INVOICE_KEY_LEN + 1])
{
    if (!vendor_id || !invoice_number || (int)doc_type < 0 || doc_type >= INVOICE_DOC__COUNT)
        return APBOT_E_INVAL;
    char *v = invoice_normalise_id(vendor_id);
    char *n = invoice_normalise_id(invoice_number);
    int rc = APBOT_E_INVAL;
    if (!v[0] || !n[0])
        goto out;

    const char *dt = doc_type_names[doc_type];
    size_t len = strlen(INVOICE_IDENTITY_TAG) + 1 + strlen(v) + 1 + strlen(n) + 1 + strlen(dt);
    char *buf = apbot_xmalloc(len + 1);
    int w = snprintf(buf, len + 1, "%s\n%s\n%s\n%s", INVOICE_IDENTITY_TAG, v, n, dt);
    if (w < 0 || (size_t)w != len) {
        free(buf);
        rc = APBOT_E_BUG;
        goto out;
    }
    unsigned char md[32];
    invoice_sha256(buf, len, md);
    free(buf);

    static const char b32[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    char key[INVOICE_KEY_LEN + 1];
    memcpy(key, INVOICE_KEY_PREFIX, 4);
    /* 20 characters x 5 bits = 100 bits, big-endian from the first byte of the digest. */
    for (int i = 0; i < INVOICE_KEY_DIGITS; i++) {
        int bit = i * 5;
        unsigned v16 = ((unsigned)md[bit / 8] << 8) | md[bit / 8 + 1];
        key[4 + i] = b32[(v16 >> (11 - bit % 8)) & 0x1F];
    }
    key[INVOICE_KEY_LEN] = '\0';
    memcpy(ret_key, key, sizeof(key));
    rc = APBOT_OK;
out:
    free(v);
    free(n);
    return rc;
}

int invoice_identity_key(const struct invoice *inv, char ret_key[INVOICE_KEY_LEN + 1])
{
    if (!inv)
        return APBOT_E_INVAL;
    return invoice_identity_key_for(inv->vendor_id, inv->invoice_number, inv->doc_type, ret_key);
}

static json_t *invoice_json_str(const char *s)
{
    return s ? json_string(s) : json_null();
}

static void invoice_json_set(json_t *obj, const char *key, json_t *val)
{
    if (!val || json_object_set_new(obj, key, val) != 0)
        abort(); /* only on out-of-memory: the strings were validated as UTF-8 */
}

char *invoice_to_json(const struct invoice *inv)
{
    if (invoice_validate(inv, NULL, 0) != APBOT_OK)
        return NULL;
    json_t *root = json_object();
    json_t *lines = json_array();
    if (!root || !lines)
        abort(); /* jansson fails only on out-of-memory (mem.h's policy) */
    invoice_json_set(root, "v", json_integer(INVOICE_PAYLOAD_VERSION));
    invoice_json_set(root, "vendor_id", json_string(inv->vendor_id));
    invoice_json_set(root, "vendor_name", invoice_json_str(inv->vendor_name));
    invoice_json_set(root, "invoice_number", json_string(inv->invoice_number));
    invoice_json_set(root, "doc_type", json_string(doc_type_names[inv->doc_type]));
    invoice_json_set(root, "issue_date", json_string(inv->issue_date));
    invoice_json_set(root, "due_date", inv->due_date[0] ? json_string(inv->due_date) : json_null());
    invoice_json_set(root, "currency", json_string(inv->currency));
    invoice_json_set(root, "exponent", json_integer(inv->exponent));
    invoice_json_set(root, "net_total", json_integer(inv->net_total));
    invoice_json_set(root, "tax_total", json_integer(inv->tax_total));
    invoice_json_set(root, "payable", json_integer(inv->payable));
    for (size_t i = 0; i < inv->n_lines; i++) {
        const struct invoice_line *l = &inv->lines[i];
        json_t *jl = json_object();
        if (!jl)
            abort(); /* out-of-memory in jansson */
        invoice_json_set(jl, "description", invoice_json_str(l->description));
        invoice_json_set(jl, "gl_account", invoice_json_str(l->gl_account));
        invoice_json_set(jl, "quantity", invoice_json_str(l->quantity));
        invoice_json_set(jl, "unit_price", invoice_json_str(l->unit_price));
        invoice_json_set(jl, "net", json_integer(l->net));
        invoice_json_set(jl, "tax", json_integer(l->tax));
        if (l->tax_category) /* absent rather than null: payloads without it stay v1 bytes */
            invoice_json_set(jl, "tax_category", json_string(l->tax_category));
        if (json_array_append_new(lines, jl) != 0)
            abort(); /* out-of-memory in jansson: lines is an array, jl an object */
    }
    invoice_json_set(root, "lines", lines);
    char *text = json_dumps(root, JSON_SORT_KEYS | JSON_COMPACT);
    json_decref(root);
    if (!text)
        abort(); /* out-of-memory in jansson: the values were validated */
    return text;
}

int invoice_fingerprint(const struct invoice *inv, char ret_fp[INVOICE_FP_LEN + 1])
{
    char *json = invoice_to_json(inv);
    if (!json)
        return APBOT_E_INVAL;
    unsigned char md[32];
    invoice_sha256(json, strlen(json), md);
    free(json);
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        ret_fp[2 * i] = hex[md[i] >> 4];
        ret_fp[2 * i + 1] = hex[md[i] & 0x0F];
    }
    ret_fp[INVOICE_FP_LEN] = '\0';
    return APBOT_OK;
}

/* Reads an optional string member: NULL/absent → *ret NULL. */
static int invoice_json_get_str(json_t *obj, const char *key, bool required, char **ret, char *err,
                                size_t errlen)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        if (required)
            return apbot_fail(err, errlen, APBOT_E_PARSE, "payload: '%s' is missing", key);
        *ret = NULL;
        return APBOT_OK;
    }
    if (!json_is_string(v))
        return apbot_fail(err, errlen, APBOT_E_PARSE, "payload: '%s' is not a string", key);
    *ret = apbot_xstrdup(json_string_value(v));
    return APBOT_OK;
}

static int invoice_json_get_int(json_t *obj, const char *key, int64_t *ret, char *err,
                                size_t errlen)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v))
        return apbot_fail(err, errlen, APBOT_E_PARSE, "payload: '%s' is not an integer", key);
    json_int_t i = json_integer_value(v);
    if (i > MONEY_MAX_MINOR || i < -MONEY_MAX_MINOR)
        return apbot_fail(err, errlen, APBOT_E_RANGE, "payload: '%s' is out of range", key);
    *ret = (int64_t)i;
    return APBOT_OK;
}

static int invoice_json_get_date(json_t *obj, const char *key, bool required, char ret[11],
                                 char *err, size_t errlen)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        if (required)
            return apbot_fail(err, errlen, APBOT_E_PARSE, "payload: '%s' is missing", key);
        ret[0] = '\0';
        return APBOT_OK;
    }
    const char *s = json_string_value(v);
    if (!s || !invoice_date_valid(s))
        return apbot_fail(err, errlen, APBOT_E_PARSE, "payload: '%s' is not a date", key);
    memcpy(ret, s, 11);
    return APBOT_OK;
}

int invoice_from_json(const char *json, struct invoice *ret, char *err, size_t errlen)
{
    struct invoice inv;
    invoice_init(&inv);
    invoice_init(ret);
    int rc = APBOT_E_PARSE;
    json_error_t jerr;
    json_t *root = json ? json_loads(json, JSON_REJECT_DUPLICATES, &jerr) : NULL;
    if (!root) {
        rc = apbot_fail(err, errlen, APBOT_E_PARSE, "payload is not JSON: %s",
                        json ? jerr.text : "(null)");
        goto out;
    }
    if (!json_is_object(root)) {
        rc = apbot_fail(err, errlen, APBOT_E_PARSE, "payload is not a JSON object");
        goto out;
    }
    json_t *ver = json_object_get(root, "v");
    if (!json_is_integer(ver) || json_integer_value(ver) != INVOICE_PAYLOAD_VERSION) {
        rc = apbot_fail(err, errlen, APBOT_E_PARSE, "payload version is not %d",
                        INVOICE_PAYLOAD_VERSION);
        goto out;
    }
    if ((rc = invoice_json_get_str(root, "vendor_id", true, &inv.vendor_id, err, errlen)) ||
        (rc = invoice_json_get_str(root, "vendor_name", false, &inv.vendor_name, err, errlen)) ||
        (rc = invoice_json_get_str(root, "invoice_number", true, &inv.invoice_number, err,
                                   errlen)) ||
        (rc = invoice_json_get_date(root, "issue_date", true, inv.issue_date, err, errlen)) ||
        (rc = invoice_json_get_date(root, "due_date", false, inv.due_date, err, errlen)) ||
        (rc = invoice_json_get_int(root, "net_total", &inv.net_total, err, errlen)) ||
        (rc = invoice_json_get_int(root, "tax_total", &inv.tax_total, err, errlen)) ||
        (rc = invoice_json_get_int(root, "payable", &inv.payable, err, errlen)))
        goto out;

    const char *dt = json_string_value(json_object_get(root, "doc_type"));
    inv.doc_type = invoice_doc_type_from_name(dt);
    if (inv.doc_type == INVOICE_DOC_INVALID || strcmp(dt, doc_type_names[inv.doc_type]) != 0) {
        rc = apbot_fail(err, errlen, APBOT_E_PARSE, "payload: bad doc_type");
        goto out;
    }
    const char *ccy = json_string_value(json_object_get(root, "currency"));
    if (!ccy || strlen(ccy) != 3) {
        rc = apbot_fail(err, errlen, APBOT_E_PARSE, "payload: bad currency");
        goto out;
    }
    memcpy(inv.currency, ccy, 4);
    json_t *je = json_object_get(root, "exponent");
    if (!json_is_integer(je) || json_integer_value(je) < 0 || json_integer_value(je) > 18) {
        rc = apbot_fail(err, errlen, APBOT_E_PARSE, "payload: bad exponent");
        goto out;
    }
    inv.exponent = (int)json_integer_value(je);

    json_t *lines = json_object_get(root, "lines");
    if (!json_is_array(lines)) {
        rc = apbot_fail(err, errlen, APBOT_E_PARSE, "payload: 'lines' is not an array");
        goto out;
    }
    if (json_array_size(lines) > INVOICE_MAX_LINES) {
        rc = apbot_fail(err, errlen, APBOT_E_LIMIT, "payload: more than %d lines",
                        INVOICE_MAX_LINES);
        goto out;
    }
    size_t i;
    json_t *jl;
    json_array_foreach(lines, i, jl)
    {
        struct invoice_line l = {0};
        if (!json_is_object(jl)) {
            rc =
                apbot_fail(err, errlen, APBOT_E_PARSE, "payload: line %zu is not an object", i + 1);
            goto out;
        }
        if (!(rc = invoice_json_get_str(jl, "description", false, &l.description, err, errlen)) &&
            !(rc = invoice_json_get_str(jl, "gl_account", false, &l.gl_account, err, errlen)) &&
            !(rc = invoice_json_get_str(jl, "quantity", false, &l.quantity, err, errlen)) &&
            !(rc = invoice_json_get_str(jl, "unit_price", false, &l.unit_price, err, errlen)) &&
            !(rc = invoice_json_get_str(jl, "tax_category", false, &l.tax_category, err, errlen)) &&
            !(rc = invoice_json_get_int(jl, "net", &l.net, err, errlen)) &&
            !(rc = invoice_json_get_int(jl, "tax", &l.tax, err, errlen)))
            invoice_add_line(&inv, &l);
        invoice_line_free_fields(&l);
        if (rc)
            goto out;
    }
    if ((rc = invoice_validate(&inv, err, errlen)))
        goto out;
    *ret = inv;
    invoice_init(&inv);
    rc = APBOT_OK;
out:
    json_decref(root);
    invoice_done(&inv);
    return rc;
}
