/*
 * smtp.h - one message handed to a mail server over libcurl's SMTP, encrypted or not at all.
 *
 * smtps://host[:465] speaks TLS from the first byte; smtp://host[:587] must upgrade with
 * STARTTLS before anything else (CURLUSESSL_ALL: a server that does not offer it gets no
 * password and no message). The server's certificate is verified against the system's CAs or
 * a CA file (an in-house CA); there is no switch to turn verification off. Authentication
 * (the server's choice of PLAIN, LOGIN, ...) when a user is given. Connect and whole-exchange
 * time-outs bound it; no redirect, no other protocol. Errors name the server and what failed,
 * never the password.
 */
#ifndef APBOT_WEB_SMTP_H
#define APBOT_WEB_SMTP_H

#include <stddef.h>

#include "apbot/error.h"

struct smtp_options {
    const char *url;       /* smtps://host[:port] or smtp://host[:port], nothing after */
    const char *ca_file;   /* NULL: the system's CAs */
    const char *user;      /* NULL: no authentication */
    const char *password;  /* with user */
    const char *from;      /* the envelope sender, a plain address */
    const char *const *to; /* n_to envelope recipients */
    size_t n_to;
    long connect_timeout_ms; /* 0 = 10 s */
    long timeout_ms;         /* the whole exchange, 0 = 60 s */
};

/*
 * Pure: is url a mail server URL apbot sends to: scheme smtps or smtp, a host, an optional
 * port, nothing else (no user, path, query)? APBOT_E_INVAL with why.
 */
int smtp_url_ok(const char *url, char *err, size_t errlen) APBOT_MUST_USE;

/* Sends the len bytes of msg (CRLF line ends) to o->to. Returns APBOT_OK once the server
 * accepted the message; APBOT_E_INVAL for bad options, APBOT_E_NET otherwise (detail in err). */
int smtp_send(const struct smtp_options *o, const char *msg, size_t len, char *err,
              size_t errlen) APBOT_MUST_USE;

#endif
