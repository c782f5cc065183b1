/*
 * http.c - one ERP web session over libcurl: an easy handle with its own cookie jar, driven
 * through a per-session multi handle in short poll slices so that a cancel flag interrupts
 * any wait, and a classifier that says what the ERP can have seen of each exchange.
 *
 * The classification is the part that matters (DESIGN.md, "never re-post blind"):
 *   ANSWERED  curl finished the transfer (CURLE_OK): a complete final response, any status;
 *   NOT_SENT  not a single byte of any HTTP request left this process (counted through the
 *             debug callback and CURLINFO_REQUEST_SIZE), no response byte arrived and no
 *             redirect was followed - resolve and connect failures, TLS handshake failures,
 *             timeouts and cancels before the request went out;
 *   UNKNOWN   everything else, including a response cut at max_body (see http.h).
 * POSTs always go out on a fresh connection that is closed afterwards: libcurl silently
 * re-sends a request whose reused keep-alive connection died without an answer, which for a
 * POST that the ERP already processed would be exactly the blind retry we must never do.
 *
 * The module never logs and never keeps request bodies (they carry passwords): the body is
 * built in a buffer that is wiped and freed as soon as the exchange ends. Transport detail
 * (curl's error text) goes to the response's detail buffer. What to do with an outcome is
 * the runner's business.
 */
#include "apbot/http.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "apbot/mem.h"

#ifndef APBOT_VERSION
#define APBOT_VERSION "0"
#endif

#define HTTP_POLL_SLICE_MS 100     /* longest wait before the cancel flag is looked at again */
#define HTTP_RETRY_AFTER_MAX 86400 /* a Retry-After beyond a day is clamped to a day */

struct http_session {
    CURL *easy;
    CURLM *multi;
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

    /* per exchange, reset by exchange_begin() */
    char *body;
    size_t body_len;
    size_t body_cap;
    bool truncated;
    long retry_after_s;
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
    if (s->body_len + n + 1 > s->body_cap) {
        size_t cap = s->body_cap ? s->body_cap : 16384;
        while (cap < s->body_len + n + 1)
            cap *= 2;
        if (cap > s->max_body + 1)
            cap = s->max_body + 1;
        s->body = apbot_xrealloc(s->body, cap);
        s->body_cap = cap;
    }
    memcpy(s->body + s->body_len, data, n);
    s->body_len += n;
    s->body[s->body_len] = '\0';
    return n;
}

/* Retry-After: delta-seconds or an HTTP-date; seconds from now, clamped to [0, a day]. */
static long http_parse_retry_after(const char *v, size_t len)
{
    char buf[128];
    while (len > 0 &&
           (v[len - 1] == '\r' || v[len - 1] == '\n' || v[len - 1] == ' ' || v[len - 1] == '\t'))
        len--;
    while (len > 0 && (*v == ' ' || *v == '\t')) {
        v++;
        len--;
    }
    if (len == 0 || len >= sizeof(buf))
        return -1;
    memcpy(buf, v, len);
    buf[len] = '\0';

    bool digits = true;
    for (size_t i = 0; i < len; i++)
        if (buf[i] < '0' || buf[i] > '9')
            digits = false;
    if (digits) {
        long secs = 0;
        for (size_t i = 0; i < len; i++) {
            secs = secs * 10 + (buf[i] - '0');
            if (secs > HTTP_RETRY_AFTER_MAX)
                return HTTP_RETRY_AFTER_MAX;
        }
        return secs;
    }
    time_t when = curl_getdate(buf, NULL);
    if (when == (time_t)-1)
        return -1;
    time_t now = time(NULL);
    if (when <= now)
        return 0;
    if (when - now > HTTP_RETRY_AFTER_MAX)
        return HTTP_RETRY_AFTER_MAX;
    return (long)(when - now);
}

/* Header sink: only Retry-After is kept, and only that of the last response of a chain. */
static size_t http_on_header(char *data, size_t size, size_t nmemb, void *userp)
{
    struct http_session *s = userp;
    size_t n = size * nmemb;
    static const char name[] = "retry-after:";

    s->bytes_in += (curl_off_t)n;
    if (n >= 5 && memcmp(data, "HTTP/", 5) == 0)
        s->retry_after_s = -1; /* a new response starts */
    else if (n > sizeof(name) - 1 && strncasecmp(data, name, sizeof(name) - 1) == 0)
        s->retry_after_s = http_parse_retry_after(data + sizeof(name) - 1, n - (sizeof(name) - 1));
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

int http_session_new(const struct http_options *opt, struct http_session **ret, char *err,
                     size_t errlen)
{
    int rc = APBOT_OK;
    struct http_session *s = NULL;

    if (!opt || !ret)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "http: no options");
    if (opt->connect_timeout_ms <= 0 || opt->timeout_ms <= 0)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "http: timeouts must be positive");
    if (opt->max_redirects < 0)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "http: max_redirects must be >= 0");
    if (opt->max_body == 0 || opt->max_body > (size_t)1 << 30)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "http: max_body must be 1 B .. 1 GiB");
    if (opt->basic_user && !opt->basic_password)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "http: basic_user without password");
    /* A missing CA file would make every exchange fail as "not sent", forever. */
    if (opt->ca_file && access(opt->ca_file, R_OK) != 0)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "http: cannot read CA file %s", opt->ca_file);

    s = calloc(1, sizeof(*s));
    if (!s)
        abort();
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
        abort();

    HTTP_SETOPT(CURLOPT_NOSIGNAL, 1L);
    HTTP_SETOPT(CURLOPT_PROTOCOLS_STR, "http,https");
    HTTP_SETOPT(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    HTTP_SETOPT(CURLOPT_COOKIEFILE, ""); /* cookie engine on, nothing loaded */
    HTTP_SETOPT(CURLOPT_FOLLOWLOCATION, 1L);
    HTTP_SETOPT(CURLOPT_MAXREDIRS, s->max_redirects);
    /* CURLOPT_POSTREDIR stays 0: a POST answered 301/302/303 is followed by a GET, as in a
     * browser. 307/308 re-send the body to the target, as the server asked (never a retry of
     * an ambiguous answer). The answer then describes the last hop: r->redirects tells the
     * caller that a submitted form was redirected, so a login page or an overload reply
     * seen there does not prove the form was never processed. */
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
    s->body = NULL;
    s->body_len = 0;
    s->body_cap = 0;
    s->truncated = false;
    s->retry_after_s = -1;
    s->bytes_out = 0;
    s->bytes_in = 0;
    s->errbuf[0] = '\0';
}

/*
 * Runs the prepared transfer to its end, a cancel, or a multi-interface failure. Returns the
 * transfer's CURLcode, or CURLE_ABORTED_BY_CALLBACK with *cancelled set.
 */
static CURLcode exchange_run(struct http_session *s, bool *cancelled, bool *started)
{
    CURLcode res = CURLE_FAILED_INIT;
    bool done = false;

    *cancelled = false;
    *started = false;
    if (curl_multi_add_handle(s->multi, s->easy) != CURLM_OK)
        return CURLE_FAILED_INIT;
    /* Our own guard over curl's timeouts, in case a callback-free path ever hangs. */
    int64_t hard_deadline = http_now_ms() + s->timeout_ms + s->connect_timeout_ms + 2000;
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

/* Fills r from the finished exchange: the classification described at the top. */
static void exchange_classify(struct http_session *s, const char *url, CURLcode res, bool cancelled,
                              bool started, int64_t t0, struct http_response *r)
{
    long request_size = 0, redirects = 0, status = 0;
    char *eff = NULL;

    /* Before the first perform libcurl has not reset its info: it still describes the
     * previous exchange, so it is only read once this transfer has started. */
    if (started) {
        (void)curl_easy_getinfo(s->easy, CURLINFO_REQUEST_SIZE, &request_size);
        (void)curl_easy_getinfo(s->easy, CURLINFO_REDIRECT_COUNT, &redirects);
        (void)curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
        (void)curl_easy_getinfo(s->easy, CURLINFO_EFFECTIVE_URL, &eff);
    }
    if (!eff)
        eff = (char *)url;

    memset(r, 0, sizeof(*r));
    r->retry_after_s = -1;
    r->effective_url = eff ? apbot_xstrdup(eff) : NULL;
    r->redirects = redirects;
    r->elapsed_ms = http_now_ms() - t0;

    bool sent = s->bytes_out > 0 || request_size > 0 || redirects > 0 || s->bytes_in > 0;

    if (res == CURLE_OK && !cancelled && status > 0) {
        r->transport = HTTP_ANSWERED;
        r->status = status;
        r->retry_after_s = s->retry_after_s;
        if (!s->body) {
            s->body = apbot_xmalloc(1);
            s->body[0] = '\0';
        }
        r->body = s->body;
        r->body_len = s->body_len;
        s->body = NULL;
        return;
    }

    r->transport = sent ? HTTP_UNKNOWN : HTTP_NOT_SENT;
    r->truncated = s->truncated;
    if (s->truncated)
        snprintf(r->detail, sizeof(r->detail),
                 "response body exceeds %zu bytes (HTTP %ld): cut, outcome unknown", s->max_body,
                 status);
    else if (cancelled)
        snprintf(r->detail, sizeof(r->detail), "cancelled %s",
                 sent ? "after sending" : "before sending");
    else if (res == CURLE_OK)
        snprintf(r->detail, sizeof(r->detail), "no HTTP status received");
    else
        snprintf(r->detail, sizeof(r->detail), "%s",
                 s->errbuf[0] ? s->errbuf : curl_easy_strerror(res));
    free(s->body);
    s->body = NULL;
}

/* Builds "a=1&b=2" with every name and value percent-encoded. Heap, wipe after use. */
static char *http_form_encode(const struct http_field *fields, size_t n, size_t *ret_len)
{
    size_t cap = 1, len = 0;
    char **enc = apbot_xmalloc((n ? n : 1) * 2 * sizeof(*enc));
    for (size_t i = 0; i < n; i++) {
        enc[2 * i] = http_escape(fields[i].name);
        enc[2 * i + 1] = http_escape(fields[i].value ? fields[i].value : "");
        cap += strlen(enc[2 * i]) + strlen(enc[2 * i + 1]) + 2;
    }
    char *out = apbot_xmalloc(cap);
    for (size_t i = 0; i < n; i++) {
        size_t a = strlen(enc[2 * i]), b = strlen(enc[2 * i + 1]);
        if (i > 0)
            out[len++] = '&';
        memcpy(out + len, enc[2 * i], a);
        len += a;
        out[len++] = '=';
        memcpy(out + len, enc[2 * i + 1], b);
        len += b;
        http_wipe_free(enc[2 * i]);
        http_wipe_free(enc[2 * i + 1]);
    }
    out[len] = '\0';
    free(enc);
    *ret_len = len;
    return out;
}

/* True for an absolute http or https URL that libcurl can parse. */
static bool http_url_ok(const char *url)
{
    CURLU *u = curl_url();
    char *scheme = NULL;
    if (!u)
        abort();
    bool ok = curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
              curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
              (strcasecmp(scheme, "http") == 0 || strcasecmp(scheme, "https") == 0);
    curl_free(scheme);
    curl_url_cleanup(u);
    return ok;
}

static int http_exchange(struct http_session *s, const char *url, const struct http_field *fields,
                         size_t n_fields, bool post, struct http_response *ret)
{
    char *form = NULL;
    size_t form_len = 0;
    bool cancelled = false, started = false;
    CURLcode res;
    int64_t t0 = http_now_ms();

    exchange_begin(s);
    if (curl_easy_setopt(s->easy, CURLOPT_URL, url) != CURLE_OK)
        return APBOT_E_INVAL;
    if (post) {
        form = http_form_encode(fields, n_fields, &form_len);
        (void)curl_easy_setopt(s->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)form_len);
        (void)curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, form);
        (void)curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, s->post_headers);
        /* A fresh connection, closed afterwards: libcurl never re-sends this POST on its
         * own after a dead keep-alive connection (see the top of this file). */
        (void)curl_easy_setopt(s->easy, CURLOPT_FRESH_CONNECT, 1L);
        (void)curl_easy_setopt(s->easy, CURLOPT_FORBID_REUSE, 1L);
    } else {
        (void)curl_easy_setopt(s->easy, CURLOPT_HTTPGET, 1L);
        (void)curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, (struct curl_slist *)NULL);
        (void)curl_easy_setopt(s->easy, CURLOPT_FRESH_CONNECT, 0L);
        (void)curl_easy_setopt(s->easy, CURLOPT_FORBID_REUSE, 0L);
    }

    res = exchange_run(s, &cancelled, &started);

    if (form) {
        explicit_bzero(form, form_len);
        free(form);
        (void)curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, (char *)NULL);
        (void)curl_easy_setopt(s->easy, CURLOPT_HTTPGET, 1L);
    }
    exchange_classify(s, url, res, cancelled, started, t0, ret);
    return APBOT_OK;
}

int http_get(struct http_session *s, const char *url, struct http_response *ret)
{
    if (!s || !url || !ret || !http_url_ok(url))
        return APBOT_E_INVAL;
    return http_exchange(s, url, NULL, 0, false, ret);
}

int http_post_form(struct http_session *s, const char *url, const struct http_field *fields,
                   size_t n_fields, struct http_response *ret)
{
    if (!s || !url || !ret || (n_fields > 0 && !fields) || !http_url_ok(url))
        return APBOT_E_INVAL;
    for (size_t i = 0; i < n_fields; i++)
        if (!fields[i].name)
            return APBOT_E_INVAL;
    return http_exchange(s, url, fields, n_fields, true, ret);
}

void http_response_done(struct http_response *r)
{
    if (!r)
        return;
    free(r->body);
    free(r->effective_url);
    r->body = NULL;
    r->effective_url = NULL;
    r->body_len = 0;
}

char *http_resolve_url(const char *base, const char *ref)
{
    CURLU *u;
    char *got = NULL, *out = NULL;

    if (!ref)
        return NULL;
    u = curl_url();
    if (!u)
        abort();
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

/* RFC 3986 unreserved characters stay, every other byte becomes %XX. */
char *http_escape(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    if (!s)
        return NULL;
    size_t n = strlen(s);
    char *out = apbot_xmalloc(n * 3 + 1);
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.' || c == '_' || c == '~';
        if (keep) {
            out[j++] = (char)c;
        } else {
            out[j++] = '%';
            out[j++] = hex[c >> 4];
            out[j++] = hex[c & 15];
        }
    }
    out[j] = '\0';
    return out;
}
