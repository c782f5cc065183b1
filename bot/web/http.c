/*
 * http.c - one ERP web session over libcurl: an easy handle with its own cookie jar, driven
 * through a per-session multi handle in short poll slices so that a cancel flag interrupts
 * any wait, redirects followed here (libcurl's FOLLOWLOCATION is off) and only within the
 * ERP's origin, and a classifier that says what the ERP can have seen of each exchange.
 *
 * The classification is the part that matters (docs/design.md, "never re-post blind"):
 *   ANSWERED  curl finished the last hop (CURLE_OK): a complete final response, any status;
 *   NOT_SENT  not a single byte of any HTTP request left this process (counted through the
 *             debug callback and CURLINFO_REQUEST_SIZE), no response byte arrived and no
 *             redirect was followed - resolve and connect failures, TLS handshake failures,
 *             timeouts and cancels before the request went out;
 *   UNKNOWN   everything else, including a response cut at max_body (see http.h), a body
 *             shorter than its Content-Length (CURLE_PARTIAL_FILE) and too many redirects.
 * libcurl silently re-sends a request whose reused keep-alive connection died without an
 * answer, which for a request that the ERP already processed would be exactly the blind
 * retry we must never do. POSTs and fresh requests are therefore sent once per hop, whatever
 * the connection: libcurl asks the prerequest callback before it sends a request (on a new or
 * a reused connection), and a second ask within one transfer - libcurl about to re-send on its
 * own - is refused, which ends the transfer as UNKNOWN (some of the request had left) or
 * NOT_SENT (none had). They may ride a kept-alive connection idle for under 2 s
 * (HTTP_ONCE_IDLE_S; the form's GET just before, typically), so that a server's keep-alive
 * timeout seldom closes the connection under them; until 2026-12-03 they took a new
 * connection each, two TCP handshakes per invoice.
 *
 * The origin (scheme, host, port of the ERP's base URL) is checked before every hop: a
 * request for another origin is refused, a redirect leaving it is not followed (the 3xx is
 * the answer, flagged), and libcurl is only allowed the origin's scheme, so an https session
 * cannot send anything over http. Credentials (the form body, the Basic header) therefore go
 * to the origin only.
 *
 * The module never logs and never keeps request bodies (they carry passwords): the body is
 * built in a buffer that is wiped and freed as soon as the exchange ends. Transport detail
 * (curl's error text) goes to the response's detail buffer. What to do with an outcome is
 * the caller's business.
 */
#include "web/http.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "apbot/mem.h"
#include "base/unittest.h"

UNITTEST int64_t http_date_ms(const char *v, size_t len);

#ifndef APBOT_VERSION
#define APBOT_VERSION "0"
#endif

#define HTTP_POLL_SLICE_MS 100 /* longest wait before the cancel flag is looked at again */
/* A send-once hop reuses a connection idle at most this many whole seconds (libcurl
 * truncates: idle under 2 s); every other hop keeps libcurl's own limit. */
#define HTTP_ONCE_IDLE_S 1L
#define HTTP_IDLE_DEFAULT_S 118L
#define HTTP_RETRY_AFTER_MAX 86400 /* a Retry-After beyond a day is clamped to a day */
#define HTTP_LOCATION_MAX 8192     /* a longer Location is not followed */

/*
 * Fast paths for "plain" URLs. Callgrind put libcurl's URL parser (curl_url_set/get, which
 * allocate on every call) at ~2% of the bot's instructions per invoice: the origin check of
 * every request, http_same_origin, and http_resolve_url on every form action and link. These
 * are security decisions, so the fast path is exact by construction: it answers only for a
 * shape whose every byte libcurl 7.88's parser (lib/urlapi.c: parseurl, concat_url,
 * curl_url_get) provably keeps as written, and anything else goes to the libcurl code as
 * before. test_http_url_fast_paths_agree_with_curl checks both against libcurl itself.
 *
 * Plain: "http://" or "https://" in lowercase; a host of [a-z0-9.-] that starts with a letter
 * or is a canonical dotted quad (libcurl rewrites "127.1", "0x7f.1", "2130706433"); an
 * optional ":port" of 1..65535 without a leading zero; then nothing, or a path and query from
 * '/' or '?' of [A-Za-z0-9], "-._~/?=&:+,;!*'()@$" and "%XX" only, with no "/." anywhere (no
 * dot segment to remove) and not ending at its first '?' (libcurl drops an empty query).
 * libcurl writes such a URL back unchanged, except that an empty path becomes "/".
 */
#define HTTP_PLAIN_HOST_MAX 255  /* longer hosts, paths and queries go to libcurl: this keeps */
#define HTTP_PLAIN_REST_MAX 8192 /* any plain URL far below libcurl's own length limit */

struct http_plain {
    size_t host_end;  /* url[0, host_end) is "scheme://host" */
    size_t rest;      /* url + rest is "" or the path and query (url[0, rest): the authority) */
    const char *port; /* the port's digits: in url, or the scheme's default */
    size_t port_len;
};

static bool http_plain_quad(const char *h, size_t n)
{
    size_t i = 0;
    for (int part = 0; part < 4; part++) {
        size_t d = 0;
        unsigned v = 0;
        if (part > 0 && (i >= n || h[i++] != '.'))
            return false;
        for (; i < n && d < 4 && h[i] >= '0' && h[i] <= '9'; i++, d++)
            v = v * 10 + (unsigned)(h[i] - '0');
        if (d == 0 || d > 3 || v > 255 || (d > 1 && h[i - d] == '0'))
            return false;
    }
    return i == n;
}

/* The path and query rule above, for p = "" or p starting with '/' or '?'. */
static bool http_plain_rest(const char *p)
{
    static const char hex[] = "0123456789abcdefABCDEF", other[] = "-._~/?=&:+,;!*'()@$";
    bool query = false;
    for (size_t i = 0; p[i]; i++) {
        char c = p[i];
        if (i >= HTTP_PLAIN_REST_MAX)
            return false;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
            continue;
        if (c == '/') {
            if (p[i + 1] == '.')
                return false;
        } else if (c == '%') {
            if (!p[i + 1] || !strchr(hex, p[i + 1]) || !p[i + 2] || !strchr(hex, p[i + 2]))
                return false;
            i += 2;
        } else if (c == '?' && !query) {
            query = true;
            if (!p[i + 1])
                return false;
        } else if (!strchr(other, c)) {
            return false;
        }
    }
    return true;
}

/* True when url is plain; then fills *ret_p (else leaves it untouched). */
static bool http_plain(const char *url, struct http_plain *ret_p)
{
    struct http_plain p = {.port = "80", .port_len = 2};
    size_t i = 7;
    if (!url)
        return false;
    if (strncmp(url, "https://", 8) == 0) {
        p.port = "443";
        p.port_len = 3;
        i = 8;
    } else if (strncmp(url, "http://", 7) != 0) {
        return false;
    }
    size_t h = i;
    while (i - h <= HTTP_PLAIN_HOST_MAX &&
           ((url[i] >= 'a' && url[i] <= 'z') || (url[i] >= '0' && url[i] <= '9') || url[i] == '.' ||
            url[i] == '-'))
        i++;
    if (i - h > HTTP_PLAIN_HOST_MAX ||
        (!(url[h] >= 'a' && url[h] <= 'z') && !http_plain_quad(url + h, i - h)))
        return false;
    p.host_end = i;
    if (url[i] == ':') {
        size_t d = ++i;
        unsigned long v = 0;
        for (; i - d < 5 && url[i] >= '0' && url[i] <= '9'; i++)
            v = v * 10 + (unsigned long)(url[i] - '0');
        if (i == d || url[d] == '0' || v > 65535)
            return false;
        p.port = url + d;
        p.port_len = i - d;
    }
    if ((url[i] && url[i] != '/' && url[i] != '?') || !http_plain_rest(url + i))
        return false;
    p.rest = i;
    *ret_p = p;
    return true;
}

/* The origin rule of http_same_origin for two plain URLs: scheme, host and port (the default
 * made explicit) byte for byte, as plain means lowercase. */
static bool http_plain_same(const char *a, const struct http_plain *pa, const char *b,
                            const struct http_plain *pb)
{
    return pa->host_end == pb->host_end && memcmp(a, b, pa->host_end) == 0 &&
           pa->port_len == pb->port_len && memcmp(pa->port, pb->port, pa->port_len) == 0;
}

/* authority[0, n) followed by rest, with the "/" libcurl writes for an empty path. Heap. */
static char *http_plain_join(const char *authority, size_t n, const char *rest)
{
    size_t r = strlen(rest), slash = rest[0] != '/';
    char *out = apbot_xmalloc(n + slash + r + 1);
    memcpy(out, authority, n);
    if (slash)
        out[n] = '/';
    memcpy(out + n + slash, rest, r + 1);
    return out;
}

UNITTEST bool http_url_is_plain(const char *url)
{
    struct http_plain p;
    return http_plain(url, &p);
}

struct http_session {
    CURL *easy;
    CURLM *multi;
    char *origin;                                    /* the base URL the session was opened for */
    char *origin_scheme, *origin_host, *origin_port; /* its origin, parsed once */
    char *origin_norm;              /* "scheme://host:port", scheme and host in lowercase */
    struct http_plain origin_plain; /* origin_norm's parts, when origin_fast */
    bool origin_fast;               /* origin_norm is plain: plain URLs are checked on it */
    long connect_timeout_ms;
    long timeout_ms;
    long max_redirects;
    size_t max_body;
    char *ca_file;
    char *basic_user;
    char *basic_password;
    char *user_agent;
    atomic_int *cancel;
    struct curl_slist *post_headers; /* "Expect:" off for POST bodies */
    char errbuf[CURL_ERROR_SIZE];
    http_gate_fn gate; /* passed before every exchange (http_set_gate), or NULL */
    void *gate_ctx;

    /* per hop, reset by hop_begin() */
    char *body;
    size_t body_len;
    size_t body_cap;
    bool truncated;
    long retry_after_s;
    int64_t date_ms;     /* the Date header of the response under way, Unix ms; 0 if none */
    char *location;      /* the Location header of the response under way, raw */
    bool location_long;  /* ... longer than HTTP_LOCATION_MAX */
    bool send_once;      /* a POST or fresh hop: libcurl may not re-send it */
    int sends;           /* requests libcurl was about to send in this hop (prereq calls) */
    bool resend_refused; /* libcurl's own re-send was refused */
    /* per exchange (all hops), reset by exchange_begin() */
    curl_off_t bytes_out; /* HTTP request bytes handed to the connection */
    curl_off_t bytes_in;  /* HTTP response bytes (headers or body) received */
};

static pthread_mutex_t http_init_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned http_init_count;

static void http_wipe_free(char *s)
{
    if (!s)
        return;
    explicit_bzero(s, strlen(s));
    free(s);
}

static int64_t http_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *http_transport_name(enum http_transport t)
{
    switch (t) {
    case HTTP_ANSWERED:
        return "answered";
    case HTTP_NOT_SENT:
        return "not-sent";
    case HTTP_UNKNOWN:
        return "unknown";
    }
    return "unknown";
}

/* Reference-counted so a test and main may both call it; libcurl's own init is not. */
int http_global_init(void)
{
    int rc = APBOT_OK;
    pthread_mutex_lock(&http_init_lock);
    if (http_init_count == 0 && curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        rc = APBOT_E_BUG;
    else
        http_init_count++;
    pthread_mutex_unlock(&http_init_lock);
    return rc;
}

void http_global_cleanup(void)
{
    pthread_mutex_lock(&http_init_lock);
    if (http_init_count > 0 && --http_init_count == 0)
        curl_global_cleanup();
    pthread_mutex_unlock(&http_init_lock);
}

/* Body sink: keeps at most max_body bytes, then stops the transfer (see http.h: a cut
 * response is UNKNOWN, so there is no point in reading the rest). */
static size_t http_on_body(char *data, size_t size, size_t nmemb, void *userp)
{
    struct http_session *s = userp;
    size_t n = size * nmemb;

    s->bytes_in += (curl_off_t)n;
    if (n > s->max_body - s->body_len) {
        s->truncated = true;
        return 0; /* less than n: libcurl stops with CURLE_WRITE_ERROR */
    }
    /* the NUL, then zeros for pattern matching (mem.h) */
    size_t need = s->body_len + n + 1 + APBOT_TEXT_PAD;
    if (need > s->body_cap) {
        size_t cap = s->body_cap ? s->body_cap : 16384;
        while (cap < need)
            cap *= 2;
        if (cap > s->max_body + 1 + APBOT_TEXT_PAD)
            cap = s->max_body + 1 + APBOT_TEXT_PAD;
        s->body = apbot_xrealloc(s->body, cap);
        s->body_cap = cap;
    }
    memcpy(s->body + s->body_len, data, n);
    s->body_len += n;
    memset(s->body + s->body_len, 0, 1 + APBOT_TEXT_PAD);
    return n;
}

/* A header value without the white space around it (and the line end after it). */
static void http_trim(const char **v, size_t *len)
{
    const char *p = *v;
    size_t n = *len;
    while (n > 0 && (p[n - 1] == '\r' || p[n - 1] == '\n' || p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    while (n > 0 && (*p == ' ' || *p == '\t')) {
        p++;
        n--;
    }
    *v = p;
    *len = n;
}

/* Retry-After: delta-seconds or an HTTP-date; seconds from now, clamped to [0, a day]. */
static long http_parse_retry_after(const char *v, size_t len)
{
    http_trim(&v, &len);
    if (len == 0)
        return -1;

    bool digits = true;
    for (size_t i = 0; i < len; i++)
        if (v[i] < '0' || v[i] > '9')
            digits = false;
    if (digits) {
        long secs = 0;
        for (size_t i = 0; i < len; i++) {
            secs = secs * 10 + (v[i] - '0');
            if (secs > HTTP_RETRY_AFTER_MAX)
                return HTTP_RETRY_AFTER_MAX;
        }
        return secs;
    }
    /* an HTTP-date, read as the Date header is (unreadable, or not after 1970: none) */
    int64_t when_ms = http_date_ms(v, len);
    if (when_ms == 0)
        return -1;
    time_t when = (time_t)(when_ms / 1000), now = time(NULL);
    if (when <= now)
        return 0;
    if (when - now > HTTP_RETRY_AFTER_MAX)
        return HTTP_RETRY_AFTER_MAX;
    return (long)(when - now);
}

/* Copies a header value without surrounding white space. Heap. */
static char *http_header_value(const char *v, size_t len)
{
    http_trim(&v, &len);
    return apbot_xstrndup(v, len);
}

/* Two ASCII digits at s as a number, -1 when they are not digits. */
static int http_2digits(const char *s)
{
    if (s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9')
        return -1;
    return (s[0] - '0') * 10 + (s[1] - '0');
}

/*
 * An IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT" (29 bytes), as Unix seconds; -1 for any
 * other text, which then goes to curl_getdate. Only dates that exist, 1970 to 9999 and
 * seconds 0-59, are read here (curl_getdate also takes a 31 November, a leap second, other
 * years), and the weekday is checked for its spelling only, as curl_getdate does: so both
 * read every text this accepts alike. curl_getdate cost ~12,000 instructions (eight sscanf
 * calls) per response, and every response carries a Date.
 */
static int64_t http_fixdate(const char *s, size_t len)
{
    static const char days[] = "MonTueWedThuFriSatSun";
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    static const int cumulative[12] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};
    if (len != 29 || s[3] != ',' || s[4] != ' ' || s[7] != ' ' || s[11] != ' ' || s[16] != ' ' ||
        s[19] != ':' || s[22] != ':' || s[25] != ' ' || memcmp(s + 26, "GMT", 3) != 0)
        return -1;
    bool day_ok = false;
    for (int i = 0; i < 7 && !day_ok; i++)
        day_ok = memcmp(s, days + 3 * i, 3) == 0;
    int mon = -1;
    for (int i = 0; i < 12 && mon < 0; i++)
        if (memcmp(s + 8, months + 3 * i, 3) == 0)
            mon = i;
    int mday = http_2digits(s + 5), yhi = http_2digits(s + 12), ylo = http_2digits(s + 14);
    int hour = http_2digits(s + 17), min = http_2digits(s + 20), sec = http_2digits(s + 23);
    if (!day_ok || mon < 0 || mday < 1 || yhi < 0 || ylo < 0 || hour < 0 || hour > 23 || min < 0 ||
        min > 59 || sec < 0 || sec > 59)
        return -1;
    int year = yhi * 100 + ylo;
    bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    int mdays = mon == 1                                          ? (leap ? 29 : 28)
                : (mon == 3 || mon == 5 || mon == 8 || mon == 10) ? 30
                                                                  : 31;
    if (year < 1970 || mday > mdays)
        return -1;
    /* days since 1970-01-01: the years', their leap days before this year, this year's */
    int64_t y = year - 1;
    int64_t days_before = (int64_t)(year - 1970) * 365 + (y / 4 - y / 100 + y / 400) - 477 +
                          cumulative[mon] + (mon > 1 && leap ? 1 : 0) + mday - 1;
    return ((days_before * 24 + hour) * 60 + min) * 60 + sec;
}

UNITTEST int64_t http_date_ms(const char *v, size_t len)
{
    http_trim(&v, &len);
    len = strnlen(v, len); /* the text up to a NUL, as a C string */
    if (len >= 128)
        return 0;
    int64_t when = http_fixdate(v, len);
    if (when < 0) {
        char text[128];
        memcpy(text, v, len);
        text[len] = '\0';
        time_t t = curl_getdate(text, NULL);
        when = t == (time_t)-1 ? -1 : (int64_t)t;
    }
    return when <= 0 ? 0 : when * 1000;
}

/* Header sink: Retry-After, Date and Location of the response under way (a hop's last). */
static size_t http_on_header(char *data, size_t size, size_t nmemb, void *userp)
{
    struct http_session *s = userp;
    size_t n = size * nmemb;
    static const char retry[] = "retry-after:";
    static const char date[] = "date:";
    static const char location[] = "location:";

    s->bytes_in += (curl_off_t)n;
    if (n >= 5 && memcmp(data, "HTTP/", 5) == 0) { /* a new response starts */
        s->retry_after_s = -1;
        s->date_ms = 0;
        free(s->location);
        s->location = NULL;
        s->location_long = false;
    } else if (n > sizeof(retry) - 1 && strncasecmp(data, retry, sizeof(retry) - 1) == 0) {
        s->retry_after_s =
            http_parse_retry_after(data + sizeof(retry) - 1, n - (sizeof(retry) - 1));
    } else if (n > sizeof(date) - 1 && strncasecmp(data, date, sizeof(date) - 1) == 0) {
        s->date_ms = http_date_ms(data + sizeof(date) - 1, n - (sizeof(date) - 1));
    } else if (n >= sizeof(location) - 1 &&
               strncasecmp(data, location, sizeof(location) - 1) == 0) {
        free(s->location);
        s->location = NULL;
        if (n - (sizeof(location) - 1) > HTTP_LOCATION_MAX)
            s->location_long = true;
        else
            s->location =
                http_header_value(data + sizeof(location) - 1, n - (sizeof(location) - 1));
    }
    return n;
}

/* Counts what goes on the wire. Only sizes are looked at: request data holds passwords. */
static int http_on_debug(CURL *easy, curl_infotype type, char *data, size_t size, void *userp)
{
    struct http_session *s = userp;
    (void)easy;
    (void)data;
    if (type == CURLINFO_HEADER_OUT || type == CURLINFO_DATA_OUT)
        s->bytes_out += (curl_off_t)size;
    return 0;
}

/* libcurl's last word before it sends the hop's request on a connection (new or reused). A
 * second one in the same transfer is libcurl re-sending on its own after the connection
 * died: refused for a send-once hop (the top of this file). */
static int http_on_prereq(void *userp, char *primary_ip, char *local_ip, int primary_port,
                          int local_port)
{
    struct http_session *s = userp;
    (void)primary_ip;
    (void)local_ip;
    (void)primary_port;
    (void)local_port;
    if (s->sends++ > 0 && s->send_once) {
        s->resend_refused = true;
        return CURL_PREREQFUNC_ABORT;
    }
    return CURL_PREREQFUNC_OK;
}

static int http_setopt_failed(char *err, size_t errlen, const char *what)
{
    return apbot_fail(err, errlen, APBOT_E_BUG, "libcurl refused option %s", what);
}

#define HTTP_SETOPT(opt, val)                                                                      \
    do {                                                                                           \
        if (curl_easy_setopt(s->easy, opt, val) != CURLE_OK) {                                     \
            rc = http_setopt_failed(err, errlen, #opt);                                            \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

static bool http_origin_parts(const char *url, char **ret_scheme, char **ret_host, char **ret_port);

int http_session_new(const struct http_options *opt, struct http_session **ret, char *err,
                     size_t errlen)
{
    int rc = APBOT_OK;
    struct http_session *s = NULL;

    if (!opt || !ret)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "http: no options");
    char *sc = NULL, *ho = NULL, *po = NULL;
    if (!opt->origin || !http_origin_parts(opt->origin, &sc, &ho, &po))
        return apbot_fail(err, errlen, APBOT_E_INVAL,
                          "http: the origin must be an absolute http:// or https:// URL "
                          "without user:pass@");
    if (opt->connect_timeout_ms <= 0 || opt->timeout_ms <= 0)
        rc = apbot_fail(err, errlen, APBOT_E_INVAL, "http: timeouts must be positive");
    else if (opt->max_redirects < 0)
        rc = apbot_fail(err, errlen, APBOT_E_INVAL, "http: max_redirects must be >= 0");
    else if (opt->max_body == 0 || opt->max_body > (size_t)1 << 30)
        rc = apbot_fail(err, errlen, APBOT_E_INVAL, "http: max_body must be 1 B .. 1 GiB");
    else if (opt->basic_user && !opt->basic_password)
        rc = apbot_fail(err, errlen, APBOT_E_INVAL, "http: basic_user without password");
    /* A missing CA file would make every exchange fail as "not sent", forever. */
    else if (opt->ca_file && access(opt->ca_file, R_OK) != 0)
        rc = apbot_fail(err, errlen, APBOT_E_INVAL, "http: cannot read CA file %s", opt->ca_file);
    if (rc != APBOT_OK) {
        free(sc);
        free(ho);
        free(po);
        return rc;
    }

    s = apbot_xcalloc(1, sizeof(*s));
    s->origin_scheme = sc;
    s->origin_host = ho;
    s->origin_port = po;
    /* libcurl's parts, lowercased as http_request's strcasecmp compares them (C locale) */
    size_t nsc = strlen(sc), nho = strlen(ho), npo = strlen(po);
    s->origin_norm = apbot_xmalloc(nsc + 3 + nho + 1 + npo + 1);
    snprintf(s->origin_norm, nsc + 3 + nho + 1 + npo + 1, "%s://%s:%s", sc, ho, po);
    for (char *c = s->origin_norm; c < s->origin_norm + nsc + 3 + nho; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    s->origin_fast = http_plain(s->origin_norm, &s->origin_plain);
    s->connect_timeout_ms = opt->connect_timeout_ms;
    s->timeout_ms = opt->timeout_ms;
    s->max_redirects = opt->max_redirects;
    s->max_body = opt->max_body;
    s->cancel = opt->cancel;
    s->retry_after_s = -1;
    if (opt->ca_file)
        s->ca_file = apbot_xstrdup(opt->ca_file);
    if (opt->basic_user) {
        s->basic_user = apbot_xstrdup(opt->basic_user);
        s->basic_password = apbot_xstrdup(opt->basic_password);
    }
    s->user_agent = apbot_xstrdup(opt->user_agent ? opt->user_agent : "apbot/" APBOT_VERSION);
    s->origin = apbot_xstrdup(opt->origin);
    bool https = strncasecmp(s->origin, "https:", 6) == 0;

    s->easy = curl_easy_init();
    s->multi = curl_multi_init();
    if (!s->easy || !s->multi) {
        rc = apbot_fail(err, errlen, APBOT_E_BUG,
                        "http: libcurl init failed "
                        "(http_global_init not called?)");
        goto out;
    }
    s->post_headers = curl_slist_append(NULL, "Expect:");
    if (!s->post_headers)
        abort(); /* libcurl fails here only on out-of-memory (mem.h's policy) */

    HTTP_SETOPT(CURLOPT_NOSIGNAL, 1L);
    /* Only the origin's scheme: even a bug here cannot send an https session's bytes over
     * http. Redirects are followed by http_request, hop by hop, after the origin check. */
    HTTP_SETOPT(CURLOPT_PROTOCOLS_STR, https ? "https" : "http");
    HTTP_SETOPT(CURLOPT_REDIR_PROTOCOLS_STR, https ? "https" : "http");
    HTTP_SETOPT(CURLOPT_FOLLOWLOCATION, 0L);
    HTTP_SETOPT(CURLOPT_UNRESTRICTED_AUTH, 0L);
    HTTP_SETOPT(CURLOPT_COOKIEFILE, ""); /* cookie engine on, nothing loaded */
    HTTP_SETOPT(CURLOPT_CONNECTTIMEOUT_MS, s->connect_timeout_ms);
    HTTP_SETOPT(CURLOPT_TIMEOUT_MS, s->timeout_ms);
    HTTP_SETOPT(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    HTTP_SETOPT(CURLOPT_ACCEPT_ENCODING, ""); /* max_body bounds the decoded size */
    HTTP_SETOPT(CURLOPT_SSL_VERIFYPEER, opt->verify_tls ? 1L : 0L);
    HTTP_SETOPT(CURLOPT_SSL_VERIFYHOST, opt->verify_tls ? 2L : 0L);
    if (s->ca_file)
        HTTP_SETOPT(CURLOPT_CAINFO, s->ca_file);
    if (s->basic_user) {
        HTTP_SETOPT(CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        HTTP_SETOPT(CURLOPT_USERNAME, s->basic_user);
        HTTP_SETOPT(CURLOPT_PASSWORD, s->basic_password);
    }
    HTTP_SETOPT(CURLOPT_USERAGENT, s->user_agent);
    HTTP_SETOPT(CURLOPT_ERRORBUFFER, s->errbuf);
    HTTP_SETOPT(CURLOPT_WRITEFUNCTION, http_on_body);
    HTTP_SETOPT(CURLOPT_WRITEDATA, s);
    HTTP_SETOPT(CURLOPT_HEADERFUNCTION, http_on_header);
    HTTP_SETOPT(CURLOPT_HEADERDATA, s);
    /* The debug callback is how we learn whether any request byte went out; with it set,
     * verbose output goes nowhere but there. */
    HTTP_SETOPT(CURLOPT_DEBUGFUNCTION, http_on_debug);
    HTTP_SETOPT(CURLOPT_DEBUGDATA, s);
    HTTP_SETOPT(CURLOPT_VERBOSE, 1L);
    HTTP_SETOPT(CURLOPT_PREREQFUNCTION, http_on_prereq);
    HTTP_SETOPT(CURLOPT_PREREQDATA, s);

    *ret = s;
    s = NULL;
out:
    http_session_free(s);
    return rc;
}

void http_session_free(struct http_session *s)
{
    if (!s)
        return;
    if (s->easy)
        curl_easy_cleanup(s->easy);
    if (s->multi)
        curl_multi_cleanup(s->multi);
    curl_slist_free_all(s->post_headers);
    free(s->origin);
    free(s->origin_scheme);
    free(s->origin_host);
    free(s->origin_port);
    free(s->origin_norm);
    free(s->location);
    free(s->ca_file);
    http_wipe_free(s->basic_user);
    http_wipe_free(s->basic_password);
    free(s->user_agent);
    free(s->body);
    free(s);
}

void http_session_clear_cookies(struct http_session *s)
{
    if (s && s->easy)
        (void)curl_easy_setopt(s->easy, CURLOPT_COOKIELIST, "ALL");
}

static void exchange_begin(struct http_session *s)
{
    s->bytes_out = 0;
    s->bytes_in = 0;
}

static void hop_begin(struct http_session *s)
{
    free(s->body);
    s->body = NULL;
    s->body_len = 0;
    s->body_cap = 0;
    s->truncated = false;
    s->sends = 0;
    s->resend_refused = false;
    s->retry_after_s = -1;
    s->date_ms = 0;
    free(s->location);
    s->location = NULL;
    s->location_long = false;
    s->errbuf[0] = '\0';
}

/*
 * Runs the prepared transfer to its end, a cancel, or a multi-interface failure. Returns the
 * transfer's CURLcode, or CURLE_ABORTED_BY_CALLBACK with *cancelled set.
 */
static CURLcode exchange_run(struct http_session *s, int64_t deadline, bool *cancelled,
                             bool *started)
{
    CURLcode res = CURLE_FAILED_INIT;
    bool done = false;

    *cancelled = false;
    *started = false;
    if (curl_multi_add_handle(s->multi, s->easy) != CURLM_OK)
        return CURLE_FAILED_INIT;
    /* Our own guard over curl's timeouts, in case a callback-free path ever hangs. */
    int64_t hard_deadline = deadline + s->connect_timeout_ms + 2000;
    for (;;) {
        if (s->cancel && *s->cancel) {
            *cancelled = true;
            res = CURLE_ABORTED_BY_CALLBACK;
            break;
        }
        int running = 0;
        *started = true;
        if (curl_multi_perform(s->multi, &running) != CURLM_OK)
            break;
        int queued;
        CURLMsg *m;
        while ((m = curl_multi_info_read(s->multi, &queued)) != NULL) {
            if (m->msg == CURLMSG_DONE && m->easy_handle == s->easy) {
                res = m->data.result;
                done = true;
            }
        }
        if (done || running == 0)
            break;
        if (http_now_ms() > hard_deadline) {
            res = CURLE_OPERATION_TIMEDOUT;
            break;
        }
        if (curl_multi_poll(s->multi, NULL, 0, HTTP_POLL_SLICE_MS, NULL) != CURLM_OK)
            break;
    }
    (void)curl_multi_remove_handle(s->multi, s->easy);
    return res;
}

/* RFC 3986's unreserved characters, which http_escape keeps; every other byte is %XX. */
static bool http_unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

/* The length of s percent-encoded as http_escape encodes it. */
static size_t http_escaped_len(const char *s)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        n += http_unreserved(*p) ? 1 : 3;
    return n;
}

/* Appends s percent-encoded as http_escape encodes it at out; returns the end. */
static char *http_escape_to(char *out, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (http_unreserved(*p)) {
            *out++ = (char)*p;
        } else {
            *out++ = '%';
            *out++ = hex[*p >> 4];
            *out++ = hex[*p & 15];
        }
    }
    return out;
}

/* Builds "a=1&b=2" with every name and value percent-encoded, in one allocation (a copy of
 * each escaped name and value, joined after, was two allocations a field: 88 an invoice).
 * Heap, wipe after use. */
static char *http_form_encode(const struct http_field *fields, size_t n, size_t *ret_len)
{
    size_t cap = 1;
    for (size_t i = 0; i < n; i++)
        cap += http_escaped_len(fields[i].name) +
               http_escaped_len(fields[i].value ? fields[i].value : "") + 2;
    char *out = apbot_xmalloc(cap), *o = out;
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            *o++ = '&';
        o = http_escape_to(o, fields[i].name);
        *o++ = '=';
        o = http_escape_to(o, fields[i].value ? fields[i].value : "");
    }
    *o = '\0';
    *ret_len = (size_t)(o - out);
    return out;
}

/* The parts of an absolute http(s) URL that make its origin; false when it has none (not a
 * URL, another scheme, no host) or carries user:pass@. Heap parts, free() each. */
static bool http_origin_parts(const char *url, char **ret_scheme, char **ret_host, char **ret_port)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *port = NULL, *user = NULL, *password = NULL;
    bool ok = false;
    if (!u)
        abort(); /* curl_url() fails only on out-of-memory */
    if (!url || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK)
        goto out;
    if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        (strcasecmp(scheme, "http") != 0 && strcasecmp(scheme, "https") != 0))
        goto out;
    if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK ||
        curl_url_get(u, CURLUPART_PASSWORD, &password, 0) == CURLUE_OK)
        goto out; /* credentials in a URL never go anywhere */
    if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !host || !*host)
        goto out;
    if (curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK)
        goto out;
    *ret_scheme = apbot_xstrdup(scheme);
    *ret_host = apbot_xstrdup(host);
    *ret_port = apbot_xstrdup(port);
    ok = true;
out:
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_free(user);
    curl_free(password);
    curl_url_cleanup(u);
    return ok;
}

/* Plain URLs take the fast path (see struct http_plain), anything else libcurl's parser. */
bool http_same_origin(const char *a, const char *b)
{
    struct http_plain fa, fb;
    if (http_plain(a, &fa) && http_plain(b, &fb))
        return http_plain_same(a, &fa, b, &fb);
    char *sa = NULL, *ha = NULL, *pa = NULL, *sb = NULL, *hb = NULL, *pb = NULL;
    bool same = http_origin_parts(a, &sa, &ha, &pa) && http_origin_parts(b, &sb, &hb, &pb) &&
                strcasecmp(sa, sb) == 0 && strcasecmp(ha, hb) == 0 && strcmp(pa, pb) == 0;
    free(sa);
    free(ha);
    free(pa);
    free(sb);
    free(hb);
    free(pb);
    return same;
}

UNITTEST enum http_redirect http_redirect_decide(const char *origin, long status,
                                                 const char *location)
{
    bool to_get = status == 301 || status == 302 || status == 303;
    bool same = status == 307 || status == 308;
    if (!to_get && !same)
        return HTTP_REDIRECT_NONE; /* 300, 304, 305, 306 and every other status */
    if (!location || !http_same_origin(origin, location))
        return HTTP_REDIRECT_BLOCKED;
    return to_get ? HTTP_REDIRECT_GET : HTTP_REDIRECT_SAME;
}

/* Where one exchange stands between hops. */
struct http_hops {
    char *url;        /* the hop under way, heap */
    bool post;        /* this hop is a POST (the body is re-sent by 307/308) */
    const char *form; /* the encoded body while post */
    size_t form_len;
    struct curl_slist *post_headers; /* the headers of a POST hop (Expect: off, Content-Type,
                                      * the request's), or NULL: the session's */
    struct curl_slist *get_headers;  /* those of a GET hop (the request's), or NULL */
    bool fresh;
    long redirects;
    long first_status;
    char *first_location;
    bool blocked;
};

/* Frees a header list, zeroing its text first (it may carry a session token). */
static void slist_wipe_free(struct curl_slist *l)
{
    for (struct curl_slist *i = l; i; i = i->next)
        explicit_bzero(i->data, strlen(i->data));
    curl_slist_free_all(l);
}

static struct curl_slist *slist_add(struct curl_slist *l, const char *line)
{
    struct curl_slist *n = curl_slist_append(l, line);
    if (!n)
        abort(); /* libcurl fails here only on out-of-memory (mem.h's policy) */
    return n;
}

/* Appends "name: value" (wiping the line it built). */
static struct curl_slist *slist_header(struct curl_slist *l, const char *name, const char *value)
{
    size_t n = strlen(name) + strlen(value) + 3;
    char *line = apbot_xmalloc(n);
    snprintf(line, n, "%s: %s", name, value);
    l = slist_add(l, line);
    explicit_bzero(line, n);
    free(line);
    return l;
}

/* The header lists of an exchange with a body type or headers of its own. */
static void hops_headers(struct http_hops *h, const struct http_request *req)
{
    h->post_headers = slist_add(NULL, "Expect:");
    if (req->body && req->content_type)
        h->post_headers = slist_header(h->post_headers, "Content-Type", req->content_type);
    for (size_t i = 0; i < req->n_headers; i++) {
        h->post_headers =
            slist_header(h->post_headers, req->headers[i].name, req->headers[i].value);
        h->get_headers = slist_header(h->get_headers, req->headers[i].name, req->headers[i].value);
    }
}

char *http_session_cookie(struct http_session *s, const char *name)
{
    struct curl_slist *list = NULL;
    char *found = NULL;

    if (!s || !name || !*name || curl_easy_getinfo(s->easy, CURLINFO_COOKIELIST, &list) != CURLE_OK)
        return NULL;
    /* Netscape cookie lines: domain, tailmatch, path, secure, expires, name, value (tabs) */
    for (struct curl_slist *i = list; i && !found; i = i->next) {
        const char *f = i->data;
        for (int k = 0; k < 5 && f; k++) {
            f = strchr(f, '\t');
            if (f)
                f++;
        }
        const char *v = f ? strchr(f, '\t') : NULL;
        if (v && (size_t)(v - f) == strlen(name) && memcmp(f, name, (size_t)(v - f)) == 0)
            found = apbot_xstrdup(v + 1);
    }
    slist_wipe_free(list);
    return found;
}

bool http_header_ok(const char *name, const char *value)
{
    static const char *const reserved[] = {"host",       "content-length",    "content-type",
                                           "connection", "transfer-encoding", "expect",
                                           "cookie"};
    if (!name || !*name || !value)
        return false;
    for (const char *p = name; *p; p++) {
        unsigned char c = (unsigned char)*p;
        /* RFC 9110's token characters */
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              strchr("!#$%&'*+-.^_`|~", c)))
            return false;
    }
    for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
        if (strcasecmp(name, reserved[i]) == 0)
            return false;
    for (const char *p = value; *p; p++)
        if (*p == '\r' || *p == '\n')
            return false;
    return true;
}

/* Prepares the easy handle for the next hop. */
static void hop_setup(struct http_session *s, const struct http_hops *h, int64_t deadline)
{
    int64_t left = deadline - http_now_ms();
    (void)curl_easy_setopt(s->easy, CURLOPT_URL, h->url);
    (void)curl_easy_setopt(s->easy, CURLOPT_TIMEOUT_MS, (long)(left > 1 ? left : 1));
    if (h->post) {
        (void)curl_easy_setopt(s->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)h->form_len);
        (void)curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, h->form);
        (void)curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER,
                               h->post_headers ? h->post_headers : s->post_headers);
    } else {
        (void)curl_easy_setopt(s->easy, CURLOPT_HTTPGET, 1L);
        (void)curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, h->get_headers);
    }
    /* Sent once: libcurl never re-sends this request on its own after a dead keep-alive
     * connection (http_on_prereq, the top of this file). */
    s->send_once = h->fresh || h->post;
    (void)curl_easy_setopt(s->easy, CURLOPT_MAXAGE_CONN,
                           s->send_once ? HTTP_ONCE_IDLE_S : HTTP_IDLE_DEFAULT_S);
}

/* Fills r as a failure: NOT_SENT when no byte of any hop left or arrived, else UNKNOWN. */
static void exchange_fail(struct http_session *s, const struct http_hops *h, CURLcode res,
                          bool cancelled, long request_size, long status, struct http_response *r)
{
    bool sent = s->bytes_out > 0 || request_size > 0 || h->redirects > 0 || s->bytes_in > 0;

    r->transport = sent ? HTTP_UNKNOWN : HTTP_NOT_SENT;
    r->truncated = s->truncated;
    if (s->truncated)
        snprintf(r->detail, sizeof(r->detail),
                 "response body exceeds %zu bytes (HTTP %ld): cut, outcome unknown", s->max_body,
                 status);
    else if (cancelled)
        snprintf(r->detail, sizeof(r->detail), "cancelled %s",
                 sent ? "after sending" : "before sending");
    else if (s->resend_refused)
        snprintf(r->detail, sizeof(r->detail),
                 "the connection closed %s without an answer; not re-sent",
                 sent ? "after the request went out" : "before the request went out");
    else if (res == CURLE_OK)
        snprintf(r->detail, sizeof(r->detail), "no HTTP status received");
    else
        snprintf(r->detail, sizeof(r->detail), "%s",
                 s->errbuf[0] ? s->errbuf : curl_easy_strerror(res));
}

/* The gate turned the request back: nothing was sent. */
static int http_gate_refused(const struct http_request *req, const char *why,
                             struct http_response *r)
{
    memset(r, 0, sizeof(*r));
    r->transport = HTTP_NOT_SENT;
    r->retry_after_s = -1;
    snprintf(r->detail, sizeof(r->detail), "%s", why[0] ? why : "held back before sending");
    r->effective_url = apbot_xstrdup(req->url);
    return APBOT_OK;
}

static int http_exchange(struct http_session *s, const struct http_request *req,
                         struct http_response *r)
{
    if (s->gate) {
        char why[200] = "";
        if (!s->gate(s->gate_ctx, req, why, sizeof(why)))
            return http_gate_refused(req, why, r);
    }
    struct http_hops h = {.url = apbot_xstrdup(req->url), .fresh = req->fresh};
    char *form = NULL;
    int64_t t0 = http_now_ms(), deadline = t0 + s->timeout_ms;

    h.post = req->method && strcmp(req->method, "POST") == 0;
    if (h.post && req->body) {
        h.form = req->body;
        h.form_len = req->body_len;
    } else if (h.post) {
        form = http_form_encode(req->fields, req->n_fields, &h.form_len);
        h.form = form;
    }
    if (req->n_headers || (h.post && req->content_type))
        hops_headers(&h, req);
    exchange_begin(s);
    memset(r, 0, sizeof(*r));
    r->retry_after_s = -1;

    for (;;) {
        bool cancelled = false, started = false;
        long request_size = 0, status = 0;

        hop_begin(s);
        hop_setup(s, &h, deadline);
        CURLcode res = exchange_run(s, deadline, &cancelled, &started);
        /* Before the first perform libcurl has not reset its info: it still describes the
         * previous exchange, so it is only read once this transfer has started. */
        if (started) {
            (void)curl_easy_getinfo(s->easy, CURLINFO_REQUEST_SIZE, &request_size);
            (void)curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
        }
        if (res != CURLE_OK || cancelled || status <= 0) {
            /* A transfer error, a cut or short body, a timeout, a cancel: whatever this hop's
             * status line said, the exchange is not answered. */
            exchange_fail(s, &h, res, cancelled, request_size, status, r);
            break;
        }
        char *location = NULL;
        if (s->location && !s->location_long)
            location = http_resolve_url(h.url, s->location);
        bool has_location = s->location || s->location_long;
        enum http_redirect d = http_redirect_decide(s->origin, status, location);
        if (d != HTTP_REDIRECT_NONE && !has_location)
            d = HTTP_REDIRECT_NONE; /* a 3xx without a Location goes nowhere: an answer */
        if (h.redirects == 0) {
            h.first_status = status;
            if (d != HTTP_REDIRECT_NONE && location)
                h.first_location = apbot_xstrdup(location);
        }
        if (d == HTTP_REDIRECT_GET || d == HTTP_REDIRECT_SAME) {
            if (h.redirects >= s->max_redirects) {
                free(location);
                exchange_fail(s, &h, CURLE_TOO_MANY_REDIRECTS, false, request_size, status, r);
                snprintf(r->detail, sizeof(r->detail), "more than %ld redirects: outcome unknown",
                         s->max_redirects);
                break;
            }
            if (s->cancel && *s->cancel) {
                free(location);
                exchange_fail(s, &h, CURLE_ABORTED_BY_CALLBACK, true, request_size, status, r);
                break;
            }
            free(h.url);
            h.url = location;
            h.redirects++;
            if (d == HTTP_REDIRECT_GET)
                h.post = false; /* 301/302/303: a GET without the body, as a browser does */
            continue;
        }
        free(location);
        h.blocked = d == HTTP_REDIRECT_BLOCKED;
        r->transport = HTTP_ANSWERED;
        r->status = status;
        r->retry_after_s = s->retry_after_s;
        r->date_ms = s->date_ms;
        if (!s->body)
            s->body = apbot_xcalloc(1, 1 + APBOT_TEXT_PAD);
        r->body = s->body;
        r->body_len = s->body_len;
        s->body = NULL;
        break;
    }

    if (form)
        explicit_bzero(form, h.form_len);
    free(form);
    if (h.post_headers || h.get_headers || req->body) {
        /* the request's headers may carry a session token: wiped like a form body */
        (void)curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, (char *)NULL);
        (void)curl_easy_setopt(s->easy, CURLOPT_HTTPGET, 1L);
        (void)curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, (struct curl_slist *)NULL);
        slist_wipe_free(h.post_headers);
        slist_wipe_free(h.get_headers);
    } else if (h.form) {
        (void)curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, (char *)NULL);
        (void)curl_easy_setopt(s->easy, CURLOPT_HTTPGET, 1L);
    }
    hop_begin(s); /* drops a failed hop's partial body */
    r->effective_url = h.url;
    r->redirects = h.redirects;
    r->first_status = h.first_status;
    r->first_location = h.first_location;
    r->redirect_blocked = h.blocked;
    r->elapsed_ms = http_now_ms() - t0;
    return APBOT_OK;
}

int http_request(struct http_session *s, const struct http_request *req, struct http_response *ret)
{
    if (!s || !req || !req->url || !ret || (req->n_fields > 0 && !req->fields))
        return APBOT_E_INVAL;
    bool post = req->method && strcmp(req->method, "POST") == 0;
    if (req->method && !post && strcmp(req->method, "GET") != 0)
        return APBOT_E_INVAL;
    if (!post && (req->n_fields > 0 || req->body))
        return APBOT_E_INVAL; /* a GET carries its query in the URL */
    if ((req->body && req->n_fields > 0) || (req->body && !req->content_type) ||
        (req->n_headers > 0 && !req->headers))
        return APBOT_E_INVAL;
    if (req->content_type && !http_header_ok("X", req->content_type))
        return APBOT_E_INVAL;
    for (size_t i = 0; i < req->n_fields; i++)
        if (!req->fields[i].name)
            return APBOT_E_INVAL;
    for (size_t i = 0; i < req->n_headers; i++)
        if (!http_header_ok(req->headers[i].name, req->headers[i].value))
            return APBOT_E_INVAL;
    /* One parse: an absolute http(s) URL with a host and no user:pass@, on the origin. A
     * plain URL is one (see struct http_plain); its origin is compared without libcurl. */
    struct http_plain p;
    bool same;
    if (s->origin_fast && http_plain(req->url, &p)) {
        same = http_plain_same(req->url, &p, s->origin_norm, &s->origin_plain);
    } else {
        char *sc = NULL, *ho = NULL, *po = NULL;
        if (!http_origin_parts(req->url, &sc, &ho, &po))
            return APBOT_E_INVAL;
        same = strcasecmp(sc, s->origin_scheme) == 0 && strcasecmp(ho, s->origin_host) == 0 &&
               strcmp(po, s->origin_port) == 0;
        free(sc);
        free(ho);
        free(po);
    }
    if (!same)
        return APBOT_E_ORIGIN; /* nothing is sent */
    return http_exchange(s, req, ret);
}

void http_set_gate(struct http_session *s, http_gate_fn fn, void *ctx)
{
    if (!s)
        return;
    s->gate = fn;
    s->gate_ctx = fn ? ctx : NULL;
}

int http_get(struct http_session *s, const char *url, struct http_response *ret)
{
    const struct http_request req = {.method = "GET", .url = url};
    return http_request(s, &req, ret);
}

int http_post_form(struct http_session *s, const char *url, const struct http_field *fields,
                   size_t n_fields, struct http_response *ret)
{
    const struct http_request req = {
        .method = "POST", .url = url, .fields = fields, .n_fields = n_fields, .fresh = true};
    return http_request(s, &req, ret);
}

void http_response_done(struct http_response *r)
{
    if (!r)
        return;
    free(r->body);
    free(r->effective_url);
    free(r->first_location);
    r->body = NULL;
    r->effective_url = NULL;
    r->first_location = NULL;
    r->body_len = 0;
}

static char *http_resolve_curl(const char *base, const char *ref)
{
    CURLU *u;
    char *got = NULL, *out = NULL;

    if (!ref)
        return NULL;
    u = curl_url();
    if (!u)
        abort(); /* curl_url() fails only on out-of-memory */
    if (base && curl_url_set(u, CURLUPART_URL, base, 0) != CURLUE_OK)
        goto out;
    if (base && !*ref) {
        /* RFC 3986: an empty reference is the base itself, without its fragment */
        if (curl_url_set(u, CURLUPART_FRAGMENT, NULL, 0) != CURLUE_OK)
            goto out;
    } else if (curl_url_set(u, CURLUPART_URL, ref, 0) != CURLUE_OK) {
        /* with a URL already set, a relative ref is resolved against it (RFC 3986) */
        goto out;
    }
    if (curl_url_get(u, CURLUPART_URL, &got, 0) != CURLUE_OK)
        goto out;
    out = apbot_xstrdup(got);
out:
    curl_free(got);
    curl_url_cleanup(u);
    return out;
}

/* Against a plain base, a plain absolute ref is itself (libcurl parses it alone), and a
 * plain path "/p" (not "//") is the base's scheme://host[:port] as written followed by it
 * (libcurl's concat_url); every other pair goes to libcurl (see struct http_plain). */
char *http_resolve_url(const char *base, const char *ref)
{
    struct http_plain pb, pr;
    if (ref && http_plain(base, &pb)) {
        if (http_plain(ref, &pr))
            return http_plain_join(ref, pr.rest, ref + pr.rest);
        if (ref[0] == '/' && ref[1] != '/' && http_plain_rest(ref))
            return http_plain_join(base, pb.rest, ref);
    }
    return http_resolve_curl(base, ref);
}

/* RFC 3986 unreserved characters stay, every other byte becomes %XX. */
char *http_escape(const char *s)
{
    if (!s)
        return NULL;
    char *out = apbot_xmalloc(strlen(s) * 3 + 1);
    *http_escape_to(out, s) = '\0';
    return out;
}
