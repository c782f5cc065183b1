/*
 * mail.h - an Internet message (RFC 5322 with MIME, RFC 2045-2047) composed from its parts:
 * the headers a mail system expects (Date, From, To, Subject, Message-ID, MIME-Version,
 * Auto-Submitted), a text/plain UTF-8 body in quoted-printable and attachments in base64,
 * as multipart/mixed, every line ending in CRLF and at most 76 characters of encoded text.
 *
 * Nothing from the data reaches a header as it is: addresses must pass mail_address_ok (a
 * plain addr-spec: no name, no comment, no quotes, no CR or LF), the subject is written as
 * RFC 2047 encoded words whenever it holds anything but printable ASCII (a line break in it
 * becomes a space first), a file name must be printable ASCII without quotes. Composition is a
 * pure function of its inputs (the date, the Message-ID and the boundary are given), so a
 * table test holds it byte for byte; web/smtp.c sends what it makes.
 */
#ifndef APBOT_BASE_MAIL_H
#define APBOT_BASE_MAIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "apbot/buf.h"
#include "apbot/error.h"

#define MAIL_ADDRESS_MAX 254 /* RFC 5321's path limit, less the brackets */
#define MAIL_RCPT_MAX 32     /* recipients of one message at most */
#define MAIL_TOKEN_LEN 33    /* a random token: 32 hex digits and the NUL */

/* One attachment. */
struct mail_part {
    const char *type;     /* "text/html; charset=utf-8" (printable ASCII) */
    const char *filename; /* printable ASCII, no quote or backslash */
    const char *data;
    size_t len;
};

struct mail_msg {
    const char *from;      /* an addr-spec (mail_address_ok) */
    const char *const *to; /* n_to addr-specs, 1..MAIL_RCPT_MAX */
    size_t n_to;
    const char *subject;         /* UTF-8 */
    const char *text;            /* the body, UTF-8, "\n" line ends */
    const struct mail_part *att; /* n_att attachments */
    size_t n_att;
    int64_t date;         /* Unix seconds of the Date header */
    int utc_offset_min;   /* the Date header's zone, minutes east of UTC */
    const char *id;       /* the Message-ID's local part (printable ASCII, no <>@) */
    const char *boundary; /* the MIME boundary: [0-9A-Za-z'()+_,-./:=?]{1,60}, in no part */
};

/*
 * True when s is a plain address "local@domain": local part of letters, digits and
 * !#$%&'*+-/=?^_`{|}~ in dot-separated atoms, domain of letters, digits and hyphens in
 * dot-separated labels (at least two); at most MAIL_ADDRESS_MAX bytes. Nothing else (no
 * display name, quotes, comments, IP literals, spaces or control characters). Pure.
 */
bool mail_address_ok(const char *s);

/*
 * Splits a comma-separated list of addresses ("a@x.org,b@y.org", blanks around commas
 * allowed) into ret (each a copy in `store`, store_len bytes), at most max; every one must pass
 * mail_address_ok. APBOT_E_INVAL naming the first bad one (or "too many"), with ret untouched.
 */
int mail_split_list(const char *list, char *store, size_t store_len, const char **ret, size_t max,
                    size_t *ret_n, char *err, size_t errlen) APBOT_MUST_USE;

/*
 * Composes the message m into out (appended). APBOT_E_INVAL with why in err for an address,
 * file name, id or boundary that may not go into a header, or a boundary found in a part;
 * APBOT_E_LIMIT when out's maximum is reached.
 */
int mail_compose(const struct mail_msg *m, struct apbot_buf *out, char *err,
                 size_t errlen) APBOT_MUST_USE;

/* 32 random hex digits (a Message-ID or a boundary). APBOT_E_IO when the system has no
 * randomness to give. */
int mail_token(char out[MAIL_TOKEN_LEN]) APBOT_MUST_USE;

#ifdef APBOT_UNITTEST /* static in the product (base/unittest.h) */
/* The subject as a header value: as it is when printable ASCII, else RFC 2047 "B" encoded
 * words of at most 75 characters, cut between characters, folded with CRLF SP. Line breaks
 * and other control characters become spaces. Appends to out. */
int mail_subject(const char *subject, struct apbot_buf *out) APBOT_MUST_USE;
/* Text in quoted-printable (RFC 2045 6.7), "\n" written as CRLF, lines of at most 76. */
int mail_qp(const char *text, struct apbot_buf *out) APBOT_MUST_USE;
#endif

#endif
