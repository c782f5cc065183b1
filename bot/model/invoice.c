/*
 * invoice.c - the invoice model, its canonical JSON payload, identity key and fingerprint.
 *
 * Readers fill a struct invoice; this module checks it, turns it into the canonical payload the
 * store keeps, and derives the two keys of docs/design.md. It knows nothing about files or the ERP.
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
 *
 * Reading a payload back (invoice_from_json, once for every item a worker claims) has a fast
 * path: jansson's json_loads cost ~111,000 instructions for a 300-byte payload, 3% of all the
 * bot does per invoice. The fast reader takes only the subset of JSON invoice_to_json writes:
 * no whitespace; the payload's keys and a line's in the order above, each at most once, none
 * unknown (any may be left out: the checks then say what is missing, as for jansson); strings
 * without escapes or control characters, in well-formed UTF-8; integers of at most 18 digits
 * with no '+', leading zero or "-0"; null; "lines" an array of objects; nothing after the
 * closing brace. Anything else is declined and read by jansson as before: a payload's column
 * can be edited, so the fast reader answers only where it is certain to read what jansson
 * reads. Both readers fill the same view of the values (struct payload_view), and one function,
 * invoice_from_view, turns that into the invoice with the checks, order and messages of the
 * original reader, so the result is the same whichever took the text. test_invoice compares
 * the two on realistic payloads and on mutants of some, fuzz_payload on any text.
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

/* A new last line, uninitialised. */
static struct invoice_line *invoice_new_line(struct invoice *inv)
{
    if (apbot_grow((void **)&inv->lines, &inv->cap_lines, inv->n_lines, sizeof(*inv->lines),
                   INVOICE_MAX_LINES) != APBOT_OK)
        abort(); /* every caller bounds its lines at INVOICE_MAX_LINES or below */
    return &inv->lines[inv->n_lines++];
}

void invoice_add_line(struct invoice *inv, const struct invoice_line *line)
{
    struct invoice_line *l = invoice_new_line(inv);
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

/* The length of the well-formed UTF-8 sequence at p, whose first byte is 0x80 or more, or 0.
 * Well-formed is RFC 3629's table, which jansson's decoder enforces too: no overlong form, no
 * surrogate, nothing past U+10FFFF. Reads no byte after the first one that is wrong. */
static size_t utf8_seq_len(const unsigned char *p)
{
    unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range */
    size_t n;
    if (p[0] >= 0xC2 && p[0] <= 0xDF) {
        n = 2;
    } else if (p[0] >= 0xE0 && p[0] <= 0xEF) {
        n = 3;
        if (p[0] == 0xE0)
            lo = 0xA0; /* overlong below */
        else if (p[0] == 0xED)
            hi = 0x9F; /* surrogates above */
    } else if (p[0] >= 0xF0 && p[0] <= 0xF4) {
        n = 4;
        if (p[0] == 0xF0)
            lo = 0x90; /* overlong below */
        else if (p[0] == 0xF4)
            hi = 0x8F; /* past U+10FFFF above */
    } else {
        return 0;
    }
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    return n;
}

bool invoice_utf8_valid(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        if (*p < 0x80) {
            p++;
            continue;
        }
        size_t n = utf8_seq_len(p);
        if (!n)
            return false;
        p += n;
    }
    return true;
}

/* A field's name in messages: what, or for a line's field (line > 0) "line 3 unit price" in
 * buf. Written only for a message: naming each line's five fields up front (snprintf) was
 * most of invoice_validate's cost. */
static const char *invoice_field_name(const char *what, size_t line, char buf[64])
{
    if (!line)
        return what;
    snprintf(buf, 64, "line %zu %s", line, what);
    return buf;
}

/* A text field: NULL allowed unless required; valid UTF-8; no control characters other than
 * tab and newline (descriptions and names may be multi-line); bounded. line: the line's number for
 * a line's field, 0 for the invoice's own. */
static int invoice_check_text(const char *what, size_t line, const char *s, bool required,
                              size_t max, bool allow_newline, char *err, size_t errlen)
{
    char name[64];
    if (!s) {
        if (required)
            return apbot_fail(err, errlen, APBOT_E_INVAL, "%s is missing",
                              invoice_field_name(what, line, name));
        return APBOT_OK;
    }
    size_t n = strlen(s);
    if (n > max)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "%s is too long (%zu bytes, at most %zu)",
                          invoice_field_name(what, line, name), n, max);
    if (!invoice_utf8_valid(s))
        return apbot_fail(err, errlen, APBOT_E_INVAL, "%s is not valid UTF-8",
                          invoice_field_name(what, line, name));
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == 0x7f ||
            (*p < 0x20 && *p != '\t' && !(allow_newline && (*p == '\n' || *p == '\r'))))
            return apbot_fail(err, errlen, APBOT_E_INVAL, "%s contains control character 0x%02x",
                              invoice_field_name(what, line, name), *p);
    }
    if (required) {
        /* empty once normalised (invoice_normalise_id): ASCII whitespace only */
        const unsigned char *p = (const unsigned char *)s;
        while (invoice_is_ascii_space(*p))
            p++;
        if (*p == '\0')
            return apbot_fail(err, errlen, APBOT_E_INVAL, "%s is empty",
                              invoice_field_name(what, line, name));
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
    if ((rc = invoice_check_text("vendor id", 0, inv->vendor_id, true, INVOICE_ID_MAX, false, err,
                                 errlen)))
        return rc;
    if ((rc = invoice_check_text("invoice number", 0, inv->invoice_number, true, INVOICE_ID_MAX,
                                 false, err, errlen)))
        return rc;
    /* a party's name may run over lines (a department under the company) */
    if ((rc = invoice_check_text("vendor name", 0, inv->vendor_name, false, INVOICE_TEXT_MAX, true,
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
        size_t no = i + 1;
        if ((rc = invoice_check_text("description", no, l->description, false, INVOICE_TEXT_MAX,
                                     true, err, errlen)) ||
            (rc = invoice_check_text("G/L account", no, l->gl_account, false, INVOICE_ID_MAX, false,
                                     err, errlen)) ||
            (rc = invoice_check_text("quantity", no, l->quantity, false, 64, false, err, errlen)) ||
            (rc = invoice_check_text("unit price", no, l->unit_price, false, 64, false, err,
                                     errlen)) ||
            (rc = invoice_check_text("tax category", no, l->tax_category, false, 64, false, err,
                                     errlen)))
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

/*
 * What a payload holds, as both readers see it. The fast reader (payload_fast_read) and
 * jansson (invoice_from_json_jansson) each fill a payload_view, and invoice_from_view alone
 * turns one into an invoice: what a value means, which check comes first and what an error
 * says cannot differ between the readers.
 */
enum pv_kind {
    PV_ABSENT = 0, /* the key is not in the object */
    PV_NULL,
    PV_STRING,  /* s, len: never holds a NUL (jansson refuses \u0000 without JSON_ALLOW_NUL,
                   the fast reader takes no escapes and stops at the text's end) */
    PV_INTEGER, /* i: a JSON integer in int64_t (jansson refuses larger ones) */
    PV_ARRAY,   /* for "lines", the view's n_lines elements */
    PV_OTHER,   /* true, false, a real, an object (only jansson's view holds these) */
};

struct pv {
    enum pv_kind kind;
    const char *s; /* PV_STRING: not NUL-terminated (the fast reader points into the text) */
    size_t len;
    int64_t i; /* PV_INTEGER */
};

/* The payload's keys and a line's, each in the order JSON_SORT_KEYS writes them (byte order):
 * the fast reader takes them in this order only. If you add a key, add it in its place in
 * both the enum and the table, read it in invoice_from_view, and write it in invoice_to_json. */
enum pv_root_key {
    PR_CURRENCY,
    PR_DOC_TYPE,
    PR_DUE_DATE,
    PR_EXPONENT,
    PR_INVOICE_NUMBER,
    PR_ISSUE_DATE,
    PR_LINES,
    PR_NET_TOTAL,
    PR_PAYABLE,
    PR_TAX_TOTAL,
    PR_V,
    PR_VENDOR_ID,
    PR_VENDOR_NAME,
    PR__COUNT
};
static const char *const pv_root_keys[] = {
    [PR_CURRENCY] = "currency",
    [PR_DOC_TYPE] = "doc_type",
    [PR_DUE_DATE] = "due_date",
    [PR_EXPONENT] = "exponent",
    [PR_INVOICE_NUMBER] = "invoice_number",
    [PR_ISSUE_DATE] = "issue_date",
    [PR_LINES] = "lines",
    [PR_NET_TOTAL] = "net_total",
    [PR_PAYABLE] = "payable",
    [PR_TAX_TOTAL] = "tax_total",
    [PR_V] = "v",
    [PR_VENDOR_ID] = "vendor_id",
    [PR_VENDOR_NAME] = "vendor_name",
};
_Static_assert(sizeof(pv_root_keys) / sizeof(pv_root_keys[0]) == PR__COUNT,
               "every payload key needs its name");

enum pv_line_key {
    PL_DESCRIPTION,
    PL_GL_ACCOUNT,
    PL_NET,
    PL_QUANTITY,
    PL_TAX,
    PL_TAX_CATEGORY,
    PL_UNIT_PRICE,
    PL__COUNT
};
static const char *const pv_line_keys[] = {
    [PL_DESCRIPTION] = "description",
    [PL_GL_ACCOUNT] = "gl_account",
    [PL_NET] = "net",
    [PL_QUANTITY] = "quantity",
    [PL_TAX] = "tax",
    [PL_TAX_CATEGORY] = "tax_category",
    [PL_UNIT_PRICE] = "unit_price",
};
_Static_assert(sizeof(pv_line_keys) / sizeof(pv_line_keys[0]) == PL__COUNT,
               "every line key needs its name");

struct pv_line {
    bool object; /* false: the element is not an object (jansson's view only) */
    struct pv v[PL__COUNT];
};

struct payload_view {
    struct pv root[PR__COUNT];
    size_t n_lines;              /* root[PR_LINES] is PV_ARRAY: its length */
    const struct pv_line *lines; /* the fast reader's lines, all n_lines of them; or NULL, */
    json_t *jlines;              /* and jansson's array is viewed one element at a time */
};

/* A string member: NULL when absent or null. */
static int pv_get_str(const struct pv *v, const char *key, bool required, char **ret, char *err,
                      size_t errlen)
{
    if (v->kind == PV_ABSENT || v->kind == PV_NULL) {
        if (required)
            return apbot_fail(err, errlen, APBOT_E_PARSE, "payload: '%s' is missing", key);
        *ret = NULL;
        return APBOT_OK;
    }
    if (v->kind != PV_STRING)
        return apbot_fail(err, errlen, APBOT_E_PARSE, "payload: '%s' is not a string", key);
    *ret = apbot_xstrndup(v->s, v->len);
    return APBOT_OK;
}

static int pv_get_int(const struct pv *v, const char *key, int64_t *ret, char *err, size_t errlen)
{
    if (v->kind != PV_INTEGER)
        return apbot_fail(err, errlen, APBOT_E_PARSE, "payload: '%s' is not an integer", key);
    if (v->i > MONEY_MAX_MINOR || v->i < -MONEY_MAX_MINOR)
        return apbot_fail(err, errlen, APBOT_E_RANGE, "payload: '%s' is out of range", key);
    *ret = v->i;
    return APBOT_OK;
}

static int pv_get_date(const struct pv *v, const char *key, bool required, char ret[11], char *err,
                       size_t errlen)
{
    if (v->kind == PV_ABSENT || v->kind == PV_NULL) {
        if (required)
            return apbot_fail(err, errlen, APBOT_E_PARSE, "payload: '%s' is missing", key);
        ret[0] = '\0';
        return APBOT_OK;
    }
    char s[11];
    if (v->kind != PV_STRING || v->len != 10) /* invoice_date_valid takes 10 bytes only */
        return apbot_fail(err, errlen, APBOT_E_PARSE, "payload: '%s' is not a date", key);
    memcpy(s, v->s, 10);
    s[10] = '\0';
    if (!invoice_date_valid(s))
        return apbot_fail(err, errlen, APBOT_E_PARSE, "payload: '%s' is not a date", key);
    memcpy(ret, s, 11);
    return APBOT_OK;
}

/* The document type whose name the member is exactly, or INVOICE_DOC_INVALID. (The payload's
 * first reader matched with strcasecmp and then required the exact name; no two names differ
 * in case only, so that was exact equality.) */
static enum invoice_doc_type pv_doc_type(const struct pv *v)
{
    if (v->kind != PV_STRING)
        return INVOICE_DOC_INVALID;
    for (int t = 0; t < INVOICE_DOC__COUNT; t++)
        if (v->len == strlen(doc_type_names[t]) && memcmp(v->s, doc_type_names[t], v->len) == 0)
            return (enum invoice_doc_type)t;
    return INVOICE_DOC_INVALID;
}

static void pv_from_json(json_t *j, struct pv *ret)
{
    *ret = (struct pv){.kind = PV_ABSENT};
    if (!j)
        return;
    switch (json_typeof(j)) {
    case JSON_NULL:
        ret->kind = PV_NULL;
        break;
    case JSON_STRING:
        ret->kind = PV_STRING;
        ret->s = json_string_value(j);
        ret->len = json_string_length(j);
        break;
    case JSON_INTEGER:
        ret->kind = PV_INTEGER;
        ret->i = json_integer_value(j);
        break;
    case JSON_ARRAY:
        ret->kind = PV_ARRAY;
        break;
    case JSON_OBJECT:
    case JSON_REAL:
    case JSON_TRUE:
    case JSON_FALSE:
        ret->kind = PV_OTHER;
        break;
    }
}
_Static_assert(sizeof(json_int_t) == sizeof(int64_t), "jansson's integers are 64 bits");

/* Line i of the view: the fast reader's, or jansson's element filled into *scratch. */
static const struct pv_line *pv_view_line(const struct payload_view *v, size_t i,
                                          struct pv_line *scratch)
{
    if (v->lines)
        return &v->lines[i];
    json_t *jl = json_array_get(v->jlines, i);
    scratch->object = json_is_object(jl);
    for (int k = 0; k < PL__COUNT; k++)
        pv_from_json(scratch->object ? json_object_get(jl, pv_line_keys[k]) : NULL, &scratch->v[k]);
    return scratch;
}

/* Appends *l to the invoice's lines, taking its strings (l is left empty). */
static void invoice_take_line(struct invoice *inv, struct invoice_line *l)
{
    *invoice_new_line(inv) = *l; /* invoice_from_view checked the count */
    memset(l, 0, sizeof(*l));
}

/*
 * The invoice a payload's view holds, with every check of the payload's reader in its order
 * and with its messages; then invoice_validate. On success *ret takes the invoice; on failure
 * it is left as it was (invoice_init'ed by the caller).
 */
static int invoice_from_view(const struct payload_view *v, struct invoice *ret, char *err,
                             size_t errlen)
{
    struct invoice inv;
    invoice_init(&inv);
    int rc;
    const struct pv *ver = &v->root[PR_V];
    if (ver->kind != PV_INTEGER || ver->i != INVOICE_PAYLOAD_VERSION) {
        rc = apbot_fail(err, errlen, APBOT_E_PARSE, "payload version is not %d",
                        INVOICE_PAYLOAD_VERSION);
        goto out;
    }
    const struct pv *r = v->root;
    if ((rc = pv_get_str(&r[PR_VENDOR_ID], "vendor_id", true, &inv.vendor_id, err, errlen)) ||
        (rc =
             pv_get_str(&r[PR_VENDOR_NAME], "vendor_name", false, &inv.vendor_name, err, errlen)) ||
        (rc = pv_get_str(&r[PR_INVOICE_NUMBER], "invoice_number", true, &inv.invoice_number, err,
                         errlen)) ||
        (rc = pv_get_date(&r[PR_ISSUE_DATE], "issue_date", true, inv.issue_date, err, errlen)) ||
        (rc = pv_get_date(&r[PR_DUE_DATE], "due_date", false, inv.due_date, err, errlen)) ||
        (rc = pv_get_int(&r[PR_NET_TOTAL], "net_total", &inv.net_total, err, errlen)) ||
        (rc = pv_get_int(&r[PR_TAX_TOTAL], "tax_total", &inv.tax_total, err, errlen)) ||
        (rc = pv_get_int(&r[PR_PAYABLE], "payable", &inv.payable, err, errlen)))
        goto out;

    inv.doc_type = pv_doc_type(&r[PR_DOC_TYPE]);
    if (inv.doc_type == INVOICE_DOC_INVALID) {
        rc = apbot_fail(err, errlen, APBOT_E_PARSE, "payload: bad doc_type");
        goto out;
    }
    const struct pv *ccy = &r[PR_CURRENCY];
    if (ccy->kind != PV_STRING || ccy->len != 3) {
        rc = apbot_fail(err, errlen, APBOT_E_PARSE, "payload: bad currency");
        goto out;
    }
    memcpy(inv.currency, ccy->s, 3);
    inv.currency[3] = '\0';
    const struct pv *je = &r[PR_EXPONENT];
    if (je->kind != PV_INTEGER || je->i < 0 || je->i > 18) {
        rc = apbot_fail(err, errlen, APBOT_E_PARSE, "payload: bad exponent");
        goto out;
    }
    inv.exponent = (int)je->i;

    if (r[PR_LINES].kind != PV_ARRAY) {
        rc = apbot_fail(err, errlen, APBOT_E_PARSE, "payload: 'lines' is not an array");
        goto out;
    }
    if (v->n_lines > INVOICE_MAX_LINES) {
        rc = apbot_fail(err, errlen, APBOT_E_LIMIT, "payload: more than %d lines",
                        INVOICE_MAX_LINES);
        goto out;
    }
    for (size_t i = 0; i < v->n_lines; i++) {
        struct pv_line scratch;
        const struct pv_line *jl = pv_view_line(v, i, &scratch);
        const struct pv *f = jl->v;
        struct invoice_line l = {0};
        if (!jl->object) {
            rc =
                apbot_fail(err, errlen, APBOT_E_PARSE, "payload: line %zu is not an object", i + 1);
            goto out;
        }
        if (!(rc = pv_get_str(&f[PL_DESCRIPTION], "description", false, &l.description, err,
                              errlen)) &&
            !(rc =
                  pv_get_str(&f[PL_GL_ACCOUNT], "gl_account", false, &l.gl_account, err, errlen)) &&
            !(rc = pv_get_str(&f[PL_QUANTITY], "quantity", false, &l.quantity, err, errlen)) &&
            !(rc =
                  pv_get_str(&f[PL_UNIT_PRICE], "unit_price", false, &l.unit_price, err, errlen)) &&
            !(rc = pv_get_str(&f[PL_TAX_CATEGORY], "tax_category", false, &l.tax_category, err,
                              errlen)) &&
            !(rc = pv_get_int(&f[PL_NET], "net", &l.net, err, errlen)) &&
            !(rc = pv_get_int(&f[PL_TAX], "tax", &l.tax, err, errlen)))
            invoice_take_line(&inv, &l);
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
    invoice_done(&inv);
    return rc;
}

/* The payload read by jansson: any JSON text, its error messages for malformed ones. */
static int invoice_from_json_jansson(const char *json, struct invoice *ret, char *err,
                                     size_t errlen)
{
    json_error_t jerr;
    json_t *root = json ? json_loads(json, JSON_REJECT_DUPLICATES, &jerr) : NULL;
    if (!root)
        return apbot_fail(err, errlen, APBOT_E_PARSE, "payload is not JSON: %s",
                          json ? jerr.text : "(null)");
    int rc;
    if (!json_is_object(root)) {
        rc = apbot_fail(err, errlen, APBOT_E_PARSE, "payload is not a JSON object");
        goto out;
    }
    struct payload_view v = {0};
    for (int k = 0; k < PR__COUNT; k++)
        pv_from_json(json_object_get(root, pv_root_keys[k]), &v.root[k]);
    if (v.root[PR_LINES].kind == PV_ARRAY) {
        v.jlines = json_object_get(root, "lines");
        v.n_lines = json_array_size(v.jlines);
    }
    rc = invoice_from_view(&v, ret, err, errlen);
out:
    json_decref(root);
    return rc;
}

/*
 * The fast reader. Each function takes the text at *pp, where a C string's byte is always
 * readable up to its NUL and no function looks past a byte that ends what it reads (the NUL
 * among them), moves *pp past what it took and answers true; false declines the payload.
 */
#define FJ_DIGITS_MAX 18 /* 999,999,999,999,999,999 (MONEY_MAX_MINOR) fits in int64_t */
#define FJ_LOCAL_LINES 8 /* lines kept on the stack: most invoices need no heap for their view */

/* The lines the fast reader has seen: in local, or on the heap (v != local) past
 * FJ_LOCAL_LINES; at most INVOICE_MAX_LINES. fj_lines_done frees them. */
struct fj_lines {
    struct pv_line *v;
    size_t n, cap;
    struct pv_line local[FJ_LOCAL_LINES];
};

static void fj_lines_init(struct fj_lines *l)
{
    l->v = l->local;
    l->n = 0;
    l->cap = FJ_LOCAL_LINES;
}

static void fj_lines_done(struct fj_lines *l)
{
    if (l->v != l->local)
        free(l->v);
}

/* Room for one more line, or NULL past INVOICE_MAX_LINES. */
static struct pv_line *fj_lines_add(struct fj_lines *l)
{
    if (l->n == l->cap) {
        if (l->cap == INVOICE_MAX_LINES)
            return NULL;
        size_t cap = l->cap * 2 < INVOICE_MAX_LINES ? l->cap * 2 : INVOICE_MAX_LINES;
        struct pv_line *v = apbot_xmalloc(cap * sizeof(*v));
        memcpy(v, l->v, l->n * sizeof(*v));
        fj_lines_done(l);
        l->v = v;
        l->cap = cap;
    }
    return &l->v[l->n++];
}

/* The key at *pp (its opening quote) and the ':' after it, compared in place: its index among
 * keys[from..n-1]. -1 for any other key: unknown, out of order or repeated (the caller's from
 * is past the last key it took), or written with an escape (no name holds a backslash). */
static int fj_key(const unsigned char **pp, const char *const *keys, int from, int n)
{
    if (**pp != '"')
        return -1;
    const unsigned char *p = *pp + 1;
    for (int k = from; k < n; k++) {
        const char *name = keys[k];
        size_t i = 0;
        while (name[i] != '\0' && p[i] == (unsigned char)name[i]) /* so p[i] is no NUL */
            i++;
        if (name[i] == '\0' && p[i] == '"' && p[i + 1] == ':') {
            *pp = p + i + 2;
            return k;
        }
    }
    return -1;
}

/* A string without escapes or control characters, in well-formed UTF-8 (what jansson writes
 * for such a value, and reads back as the same bytes). Declines a backslash (jansson's escapes
 * are for it to decode) and any byte below 0x20, the text's NUL among them. */
static bool fj_string(const unsigned char **pp, struct pv *ret)
{
    const unsigned char *s = *pp + 1, *p = s;
    while (*p != '"') { /* each round moves on, and the NUL ends it */
        if (*p == '\\' || *p < 0x20)
            return false;
        if (*p < 0x80) {
            p++;
            continue;
        }
        size_t n = utf8_seq_len(p);
        if (!n)
            return false;
        p += n;
    }
    *ret = (struct pv){.kind = PV_STRING, .s = (const char *)s, .len = (size_t)(p - s)};
    *pp = p + 1;
    return true;
}

/* An integer as jansson writes one: an optional '-', no leading zero, no "-0", at most
 * FJ_DIGITS_MAX digits, so it cannot overflow (a longer one may be out of int64_t's range:
 * jansson says so). A fraction or an exponent is the caller's to decline: it expects ',', '}'
 * or ']' next. */
static bool fj_integer(const unsigned char **pp, struct pv *ret)
{
    const unsigned char *p = *pp;
    bool neg = *p == '-';
    if (neg)
        p++;
    if (*p < '0' || *p > '9' || (*p == '0' && (neg || (p[1] >= '0' && p[1] <= '9'))))
        return false;
    int64_t v = 0;
    for (int n = 0; *p >= '0' && *p <= '9'; n++, p++) {
        if (n == FJ_DIGITS_MAX)
            return false;
        v = v * 10 + (*p - '0');
    }
    *ret = (struct pv){.kind = PV_INTEGER, .i = neg ? -v : v};
    *pp = p;
    return true;
}

/* A string, an integer or null; anything else (true, false, a real, an object, an array) is
 * declined. */
static bool fj_value(const unsigned char **pp, struct pv *ret)
{
    const unsigned char *p = *pp;
    if (*p == '"')
        return fj_string(pp, ret);
    if (*p == '-' || (*p >= '0' && *p <= '9'))
        return fj_integer(pp, ret);
    if (strncmp((const char *)p, "null", 4) == 0) { /* strncmp: stops at the NUL */
        *ret = (struct pv){.kind = PV_NULL};
        *pp = p + 4;
        return true;
    }
    return false;
}

static bool fj_lines(const unsigned char **pp, struct fj_lines *lines);

/* An object whose keys are among keys[0..n-1], in that order, each at most once: each value
 * into vals[k], the keys left out PV_ABSENT. Key array_key (-1: none) may hold the array of
 * lines, which goes to fj_lines. */
static bool fj_object(const unsigned char **pp, const char *const *keys, int n, struct pv *vals,
                      int array_key, struct fj_lines *lines)
{
    const unsigned char *p = *pp;
    for (int k = 0; k < n; k++)
        vals[k] = (struct pv){.kind = PV_ABSENT};
    if (*p++ != '{')
        return false;
    if (*p == '}') {
        *pp = p + 1;
        return true;
    }
    int next = 0;
    for (;;) { /* at most n rounds: each takes a key after the last one */
        int k = fj_key(&p, keys, next, n);
        if (k < 0)
            return false;
        if (k == array_key && *p == '[') {
            if (!fj_lines(&p, lines))
                return false;
            vals[k] = (struct pv){.kind = PV_ARRAY};
        } else if (!fj_value(&p, &vals[k])) {
            return false;
        }
        next = k + 1;
        if (*p == '}')
            break;
        if (*p++ != ',')
            return false;
    }
    *pp = p + 1;
    return true;
}

/* The array of lines: objects of a line's keys (none nested further), at most
 * INVOICE_MAX_LINES of them (jansson's path says what is wrong with more). */
static bool fj_lines(const unsigned char **pp, struct fj_lines *lines)
{
    const unsigned char *p = *pp + 1;
    if (*p == ']') {
        *pp = p + 1;
        return true;
    }
    for (;;) { /* each round takes an object (two bytes at least) or ends */
        struct pv_line *l = fj_lines_add(lines);
        if (!l)
            return false;
        l->object = true;
        if (!fj_object(&p, pv_line_keys, PL__COUNT, l->v, -1, NULL))
            return false;
        if (*p == ']')
            break;
        if (*p++ != ',')
            return false;
    }
    *pp = p + 1;
    return true;
}

/* Fills *v from json when it is in the canonical form's subset (the top of the file) and says
 * so; false declines it (*v then means nothing). *lines (fj_lines_init'ed) holds the lines *v
 * points to; the caller fj_lines_done's it either way. */
static bool payload_fast_read(const char *json, struct payload_view *v, struct fj_lines *lines)
{
    const unsigned char *p = (const unsigned char *)json;
    if (!fj_object(&p, pv_root_keys, PR__COUNT, v->root, PR_LINES, lines) || *p != '\0')
        return false;
    v->n_lines = lines->n;
    v->lines = lines->v;
    v->jlines = NULL;
    return true;
}

int invoice_from_json_as(const char *json, enum invoice_json_reader reader, struct invoice *ret,
                         bool *ret_fast, char *err, size_t errlen)
{
    invoice_init(ret);
    if (ret_fast)
        *ret_fast = false;
    if (json && reader == INVOICE_JSON_AUTO) {
        struct payload_view v;
        struct fj_lines lines;
        fj_lines_init(&lines);
        bool taken = payload_fast_read(json, &v, &lines);
        int rc = taken ? invoice_from_view(&v, ret, err, errlen) : APBOT_OK;
        fj_lines_done(&lines);
        if (taken) {
            if (ret_fast)
                *ret_fast = true;
            return rc;
        }
    }
    return invoice_from_json_jansson(json, ret, err, errlen);
}

int invoice_from_json(const char *json, struct invoice *ret, char *err, size_t errlen)
{
    return invoice_from_json_as(json, INVOICE_JSON_AUTO, ret, NULL, err, errlen);
}
