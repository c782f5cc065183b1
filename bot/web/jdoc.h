/*
 * jdoc.h - a JSON answer read safely, and JSON written exactly: what the web layer knows of
 * JSON for the ERPs whose web client speaks it.
 *
 * An ERP's answer is untrusted. jdoc_parse() refuses, before jansson builds anything, a text
 * deeper, longer or with more values than its limits (so no answer can exhaust the bot), and
 * keeps every number as the text the ERP wrote: jansson would read "120.10" into a double, and
 * money is never floating point here. Numbers are held as jansson strings marked by a leading
 * NUL byte (JSON_ALLOW_NUL); an answer that itself carries "\u0000" in a string is refused, so
 * no string of the ERP can pass for a number. jdoc_write() writes numbers back from their text,
 * byte for byte.
 *
 * Values are read by JSON Pointer (RFC 6901). jdoc_text() gives the text a pattern or a column
 * sees: a string as it is, a number as written, true/false/null as those words, an object or
 * array as compact JSON. The json_t pointers handed out belong to the document (or to the tree
 * they were taken from): valid until it is freed, never to be freed by the caller.
 */
#ifndef APBOT_WEB_JDOC_H
#define APBOT_WEB_JDOC_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "apbot/error.h"

struct apbot_buf;

/* Bounds on one JSON text. */
struct jdoc_limits {
    size_t max_bytes; /* the text's length */
    size_t max_nodes; /* values (each scalar, array and object counts one) */
    int max_depth;    /* arrays and objects inside each other */
};
#define JDOC_MAX_NODES 200000 /* far beyond any screen's answer; a 4 MiB text may hold 2 M */
#define JDOC_MAX_DEPTH 64     /* ERP answers nest a handful deep */

/* The default limits for an answer of at most max_bytes. */
struct jdoc_limits jdoc_limits_for(size_t max_bytes);

/* A parsed JSON document. */
struct jdoc;

/*
 * Parses text (len bytes, UTF-8) under lim. Returns APBOT_OK and *ret (free with jdoc_free);
 * APBOT_E_LIMIT when a bound was passed, APBOT_E_PARSE for text that is not one JSON value
 * (cut, malformed, a duplicate key, "\u0000" in a string); err says where. Any value may be
 * the root.
 */
int jdoc_parse(const char *text, size_t len, const struct jdoc_limits *lim, struct jdoc **ret,
               char *err, size_t errlen) APBOT_MUST_USE;
void jdoc_free(struct jdoc *d); /* NULL is fine */
const json_t *jdoc_root(const struct jdoc *d);

/* The kinds of values, numbers apart from strings. */
enum jdoc_kind {
    JDOC_NULL = 0,
    JDOC_BOOL,
    JDOC_NUMBER,
    JDOC_STRING,
    JDOC_ARRAY,
    JDOC_OBJECT,
};
enum jdoc_kind jdoc_kind(const json_t *v);

/*
 * The value at pointer (RFC 6901: "" is v itself, "/a/0/b~1c" walks members and array
 * indexes) below v, or NULL when it is absent, the pointer is malformed or v is NULL. An index
 * is decimal without leading zeros; "-" (past the end) is never present.
 */
const json_t *jdoc_at(const json_t *v, const char *pointer);
/* True when pointer is well formed (empty, or each token after a '/' with "~" only as "~0" or
 * "~1"). */
bool jdoc_pointer_ok(const char *pointer);

/*
 * The text of v as patterns and columns see it (see above), heap; NULL for NULL. A text past
 * max bytes is APBOT_E_LIMIT-worthy: NULL then too (max 0 = no bound besides memory).
 */
char *jdoc_text(const json_t *v, size_t max);
/* A number's text (not a copy; valid while v lives), or NULL when v is no number. */
const char *jdoc_number_text(const json_t *v);

/* A new number value holding exactly text, which must be a JSON number; NULL otherwise. The
 * caller owns the reference (json_decref). */
json_t *jdoc_number(const char *text);
/* True when the n bytes at s are one JSON number (RFC 8259's grammar). */
bool jdoc_is_number(const char *s, size_t n);

/*
 * Appends v as compact JSON to b (numbers as their text, strings escaped, members in their
 * order). Returns APBOT_OK, or APBOT_E_LIMIT when b's maximum is reached (b then holds a cut
 * text: discard it).
 */
int jdoc_write(struct apbot_buf *b, const json_t *v) APBOT_MUST_USE;

#endif
