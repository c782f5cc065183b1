/*
 * smtp.c - one message to a mail server through libcurl's SMTP, TLS required (smtp.h). The
 * message is composed elsewhere (base/mail.c); this file only hands it over.
 */
#include "web/smtp.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "apbot/mem.h"

int smtp_url_ok(const char *url, char *err, size_t errlen)
{
    const char *host;

    if (!url)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "no mail server URL");
    if (strncasecmp(url, "smtps://", 8) == 0)
        host = url + 8;
    else if (strncasecmp(url, "smtp://", 7) == 0)
        host = url + 7;
    else
        return apbot_fail(err, errlen, APBOT_E_INVAL,
                          "'%.100s': want smtps://HOST[:PORT] or smtp://HOST[:PORT] (STARTTLS)",
                          url);
    if (!*host || *host == ':' || *host == '/')
        return apbot_fail(err, errlen, APBOT_E_INVAL, "'%.100s': no host", url);
    for (const char *p = host; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '-' || *p == ':' || *p == '[' || *p == ']'))
            return apbot_fail(err, errlen, APBOT_E_INVAL,
                              "'%.100s': a host and a port only (no user, path or query; "
                              "credentials come from APBOT_SMTP_USER and APBOT_SMTP_PASSWORD)",
                              url);
    return APBOT_OK;
}

struct upload {
    const char *data;
    size_t len, done;
};

static size_t read_cb(char *buf, size_t size, size_t nitems, void *ctx)
{
    struct upload *u = ctx;
    size_t room = size * nitems, n = u->len - u->done;
    if (n > room)
        n = room;
    memcpy(buf, u->data + u->done, n);
    u->done += n;
    return n;
}

#define SMTP_SETOPT(opt, val)                                                                      \
    do {                                                                                           \
        if (rc == CURLE_OK)                                                                        \
            rc = curl_easy_setopt(c, opt, val);                                                    \
    } while (0)

int smtp_send(const struct smtp_options *o, const char *msg, size_t len, char *err, size_t errlen)
{
    char errbuf[CURL_ERROR_SIZE] = "", addr[300];
    struct curl_slist *rcpt = NULL;
    struct upload up = {.data = msg, .len = len};
    CURL *c;
    CURLcode rc = CURLE_OK;
    int r;

    if (!o || !msg || !o->from || !o->to || !o->n_to)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "smtp: bad arguments");
    r = smtp_url_ok(o->url, err, errlen);
    if (r != APBOT_OK)
        return r;
    c = curl_easy_init();
    if (!c)
        return apbot_fail(err, errlen, APBOT_E_NET, "smtp: cannot start libcurl");
    for (size_t i = 0; i < o->n_to; i++) {
        snprintf(addr, sizeof(addr), "<%s>", o->to[i]);
        struct curl_slist *next = curl_slist_append(rcpt, addr);
        if (!next)
            abort(); /* out of memory: mem.h's policy */
        rcpt = next;
    }
    snprintf(addr, sizeof(addr), "<%s>", o->from);
    SMTP_SETOPT(CURLOPT_ERRORBUFFER, errbuf);
    SMTP_SETOPT(CURLOPT_URL, o->url);
    SMTP_SETOPT(CURLOPT_PROTOCOLS_STR, "smtp,smtps");
    SMTP_SETOPT(CURLOPT_USE_SSL, (long)CURLUSESSL_ALL);
    SMTP_SETOPT(CURLOPT_SSL_VERIFYPEER, 1L);
    SMTP_SETOPT(CURLOPT_SSL_VERIFYHOST, 2L);
    if (o->ca_file)
        SMTP_SETOPT(CURLOPT_CAINFO, o->ca_file);
    if (o->user && *o->user) {
        SMTP_SETOPT(CURLOPT_USERNAME, o->user);
        SMTP_SETOPT(CURLOPT_PASSWORD, o->password ? o->password : "");
    }
    SMTP_SETOPT(CURLOPT_MAIL_FROM, addr);
    SMTP_SETOPT(CURLOPT_MAIL_RCPT, rcpt);
    SMTP_SETOPT(CURLOPT_UPLOAD, 1L);
    SMTP_SETOPT(CURLOPT_READFUNCTION, read_cb);
    SMTP_SETOPT(CURLOPT_READDATA, &up);
    SMTP_SETOPT(CURLOPT_INFILESIZE_LARGE, (curl_off_t)len);
    SMTP_SETOPT(CURLOPT_CONNECTTIMEOUT_MS,
                o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 10000L);
    SMTP_SETOPT(CURLOPT_TIMEOUT_MS, o->timeout_ms > 0 ? o->timeout_ms : 60000L);
    SMTP_SETOPT(CURLOPT_NOSIGNAL, 1L);
    if (rc != CURLE_OK) {
        r = apbot_fail(err, errlen, APBOT_E_INVAL, "smtp: libcurl refused an option: %s",
                       curl_easy_strerror(rc));
    } else if ((rc = curl_easy_perform(c)) != CURLE_OK) {
        r = apbot_fail(err, errlen, APBOT_E_NET, "smtp: %.100s: %s%s%.200s", o->url,
                       curl_easy_strerror(rc), errbuf[0] ? ": " : "", errbuf);
    } else {
        r = APBOT_OK;
    }
    curl_slist_free_all(rcpt);
    curl_easy_cleanup(c);
    return r;
}
