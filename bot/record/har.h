/*
 * har.h - a HAR 1.2 file (the browser developer tools' "Save all as HAR") read into plain
 * entries: every request with its headers and body, every answer with its status, headers and
 * body, in the order the requests were sent.
 *
 * A HAR is untrusted input, and a secret: it holds the password, the cookies and every token of
 * the session it recorded. The reader bounds everything (HAR_* below, docs/recording.md) and
 * keeps what the recorder needs as it was sent: postData's text (or, without one, its params
 * form-encoded again), a base64 body decoded, a redirect hop as the entry it is. What Chromium
 * and Firefox write differently is read alike: postData with params or text, base64 bodies,
 * redirects as entries of their own, entries answered from the browser's cache (marked, never
 * an exchange with the ERP). The reader judges nothing; the recorder does.
 */
#ifndef APBOT_RECORD_HAR_H
#define APBOT_RECORD_HAR_H

#include <stdbool.h>
#include <stddef.h>

#include "apbot/error.h"

#define HAR_FILE_MAX (64u * 1024 * 1024) /* bytes of a HAR file */
#define HAR_NODES_MAX 2000000            /* JSON values in it */
#define HAR_DEPTH_MAX 32                 /* nesting (a HAR nests about eight deep) */
#define HAR_ENTRIES_MAX 20000            /* entries kept; the rest are counted */
#define HAR_HEADERS_MAX 256              /* headers (or form parameters) of one message */
#define HAR_TEXT_MAX (64 * 1024)         /* bytes of a URL, a header name or value */
#define HAR_BODY_MAX (16u * 1024 * 1024) /* bytes of one body, decoded; a longer one is dropped */

struct har_pair {
    char *name;
    char *value;
};

struct har_entry {
    size_t index;  /* its place among the HAR's entries, from 1 (what messages name) */
    char *started; /* startedDateTime as written ("2026-12-05T02:50:15.123Z"), or "" */
    char *method;  /* upper case */
    char *url;
    struct har_pair *req_headers;
    size_t n_req_headers;
    bool has_body;  /* the request carried postData */
    char *req_mime; /* postData's mimeType, or "" */
    char *req_body; /* postData's text (params form-encoded when there is no text), NUL-ended */
    size_t req_len;
    int status; /* 0: no answer (blocked, failed, aborted) */
    struct har_pair *resp_headers;
    size_t n_resp_headers;
    char *resp_mime;     /* content.mimeType, or "" */
    char *body;          /* the answer's body, decoded, NUL-ended ("" when none) */
    size_t body_len;     /* bytes of body (it may hold NULs) */
    bool body_dropped;   /* the body was longer than HAR_BODY_MAX or did not decode */
    char *redirect;      /* redirectURL, or "" */
    bool from_cache;     /* answered from the browser's cache: the ERP saw nothing */
    char *resource_type; /* Chromium's _resourceType ("document", "xhr", "fetch", "script",
                          * ...), or "" (Firefox writes none) */
};

struct har {
    struct har_entry *entries;
    size_t n;
    size_t dropped; /* entries past HAR_ENTRIES_MAX, not kept */
    char *creator;  /* log.creator.name, or "" */
    char *browser;  /* log.browser.name, or "" */
};

/*
 * Reads the HAR at path (a regular file of at most HAR_FILE_MAX bytes). On success *ret is the
 * caller's (har_free). APBOT_E_IO (cannot read), APBOT_E_LIMIT (a bound passed) or APBOT_E_PARSE
 * (not JSON, not a HAR: no log.entries array, an entry without a request), with err; *ret is
 * untouched then.
 */
int har_read(const char *path, struct har **ret, char *err, size_t errlen) APBOT_MUST_USE;
/* The same from text (len bytes): what har_read does after reading the file (the fuzz target). */
int har_parse(const char *text, size_t len, struct har **ret, char *err,
              size_t errlen) APBOT_MUST_USE;
/* Frees the HAR, wiping its bodies and headers first (they hold secrets). NULL is fine. */
void har_free(struct har *h);

/* Drops the session id a Java servlet container writes into URLs (";jsessionid=VALUE", any
 * case) from url, in place: it is the session cookie's value, a secret, and apbot keeps the
 * session by the cookie. Entries' URLs are read so; the recorder drops it from the pages' links
 * and form actions it compares with them. */
void har_url_drop_session(char *url);

/* The value of the first header `name` (any case) of the pairs, or NULL. */
const char *har_header(const struct har_pair *h, size_t n, const char *name);

#endif
