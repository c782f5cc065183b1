/*
 * erp.c - an ERP session driven by a flow: the login form (hidden fields kept, secrets from
 * the environment), the check-before-post lookup and the paginated day listing, with bounded
 * re-login on the flow's session-expired marker. It reads pages and reports what they show;
 * what a hit means for an item is the caller's business (runner, report, resolve). It never
 * logs; every exchange can be handed to an evidence callback with a bounded excerpt.
 */
#include "apbot/erp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apbot/flow.h"
#include "apbot/http.h"
#include "apbot/match.h"
#include "apbot/mem.h"
#include "apbot/money.h"
#include "apbot/page.h"
#include "apbot/store.h"

struct erp_session {
    const struct flow *flow;
    struct http_session *http;
    char *base_url;
    char *user;     /* secret: wiped on close, never copied into any output */
    char *password; /* secret */
    bool logged_in;
    int retries; /* extra tries of a transiently failed GET */
    erp_evidence_fn evidence;
    void *evidence_ctx;
};

/* Column indexes of a table, by the names erp_row knows; -1 when the flow has none. */
enum erp_col {
    ERP_COL_DOC = 0,
    ERP_COL_REFERENCE,
    ERP_COL_VENDOR,
    ERP_COL_INVOICE_NUMBER,
    ERP_COL_CURRENCY,
    ERP_COL_DATE,
    ERP_COL_DOC_TYPE,
    ERP_COL_BOOKED,
    ERP_COL_AMOUNT,
    ERP_COL__COUNT
};
static const char *const erp_col_names[] = {
    [ERP_COL_DOC] = "doc",           [ERP_COL_REFERENCE] = "reference",
    [ERP_COL_VENDOR] = "vendor",     [ERP_COL_INVOICE_NUMBER] = "invoice_number",
    [ERP_COL_CURRENCY] = "currency", [ERP_COL_DATE] = "date",
    [ERP_COL_DOC_TYPE] = "doc_type", [ERP_COL_BOOKED] = "booked",
    [ERP_COL_AMOUNT] = "amount",
};
_Static_assert(sizeof(erp_col_names) / sizeof(erp_col_names[0]) == ERP_COL__COUNT,
               "every erp_col needs a name");

static void wipe_free(char *s)
{
    if (!s)
        return;
    explicit_bzero(s, strlen(s));
    free(s);
}

static bool status_ok(long status)
{
    return status >= 200 && status < 300;
}

/* ---- session ------------------------------------------------------------------------- */

int erp_open(const struct flow *f, const char *base_url, atomic_int *cancel,
             struct erp_session **ret, char *err, size_t errlen)
{
    struct erp_session *s;
    struct http_options opt;
    const char *user = getenv("APBOT_ERP_USER");
    const char *password = getenv("APBOT_ERP_PASSWORD");
    const char *base = (base_url && *base_url) ? base_url : (f ? f->base_url : NULL);
    int rc;

    if (!f || !ret)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "erp_open: no flow");
    if (!base || !*base)
        return apbot_fail(err, errlen, APBOT_E_INVAL,
                          "no ERP URL: give --erp URL, APBOT_ERP_URL or a base URL in the flow");
    if ((f->login.present || f->basic_auth) && (!user || !*user || !password || !*password))
        return apbot_fail(err, errlen, APBOT_E_SYSTEMIC,
                          "the flow logs in: set APBOT_ERP_USER and APBOT_ERP_PASSWORD");

    s = calloc(1, sizeof(*s));
    if (!s)
        abort();
    s->flow = f;
    s->base_url = apbot_xstrdup(base);
    s->user = apbot_xstrdup(user);
    s->password = apbot_xstrdup(password);

    memset(&opt, 0, sizeof(opt));
    opt.origin = s->base_url;
    struct flow_policy def = flow_policy_default();
    opt.connect_timeout_ms =
        f->policy.connect_timeout_ms > 0 ? f->policy.connect_timeout_ms : def.connect_timeout_ms;
    opt.timeout_ms = f->policy.timeout_ms > 0 ? f->policy.timeout_ms : def.timeout_ms;
    opt.max_redirects = f->policy.max_redirects >= 0 ? f->policy.max_redirects : def.max_redirects;
    opt.max_body = f->policy.max_body > 0 ? f->policy.max_body : def.max_body;
    opt.verify_tls = f->tls_verify;
    opt.ca_file = f->ca_file;
    if (f->basic_auth) {
        opt.basic_user = s->user;
        opt.basic_password = s->password;
    }
    opt.cancel = cancel;
    rc = http_session_new(&opt, &s->http, err, errlen);
    if (rc != APBOT_OK) {
        erp_close(s);
        return rc;
    }
    *ret = s;
    return APBOT_OK;
}

void erp_close(struct erp_session *s)
{
    if (!s)
        return;
    http_session_free(s->http);
    free(s->base_url);
    wipe_free(s->user);
    wipe_free(s->password);
    free(s);
}

void erp_set_retries(struct erp_session *s, int retries)
{
    s->retries = retries > 0 ? retries : 0;
}

/* Waits before retry n (0-based): Retry-After if given, else 250 ms doubling; <= 5 s. */
static void retry_wait(int n, long retry_after_s)
{
    long ms = retry_after_s > 0 ? retry_after_s * 1000 : 250L << (n < 5 ? n : 5);
    struct timespec ts;

    if (ms > 5000)
        ms = 5000;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0)
        ;
}

void erp_set_evidence(struct erp_session *s, erp_evidence_fn fn, void *ctx)
{
    s->evidence = fn;
    s->evidence_ctx = ctx;
}

struct http_session *erp_http(struct erp_session *s)
{
    return s->http;
}

const char *erp_base_url(const struct erp_session *s)
{
    return s->base_url;
}

char *erp_url(const struct erp_session *s, const char *expanded)
{
    return http_resolve_url(s->base_url, expanded);
}

bool erp_is_session_expired(const struct erp_session *s, const char *body, size_t len)
{
    /* Only markers whose one condition is the body pattern can be judged from a body alone;
     * markers by status or redirect need the whole response. */
    for (size_t i = 0; body && i < s->flow->n_session_expired; i++) {
        const struct flow_marker *m = &s->flow->session_expired[i];
        if (m->body && !m->status && !m->redirect && match_exec(m->body, body, len, NULL))
            return true;
    }
    return false;
}

/* Hands one exchange to the evidence callback, with a bounded excerpt of the page. */
static void emit(struct erp_session *s, const char *step, const char *method, const char *url,
                 const struct http_response *r, const struct page *p, const char *outcome)
{
    struct store_evidence ev;
    char transport[320];
    char *excerpt = NULL;

    if (!s->evidence)
        return;
    if (r->detail[0])
        snprintf(transport, sizeof(transport), "%s: %s", http_transport_name(r->transport),
                 r->detail);
    else
        snprintf(transport, sizeof(transport), "%s", http_transport_name(r->transport));
    if (p)
        excerpt = page_excerpt(p, ERP_EXCERPT_MAX);
    memset(&ev, 0, sizeof(ev));
    ev.step = step;
    ev.method = method;
    ev.url = url;
    ev.http_status = (int)r->status;
    ev.elapsed_ms = r->elapsed_ms;
    ev.transport = transport;
    ev.rule = NULL;
    ev.outcome = outcome;
    ev.excerpt = excerpt;
    s->evidence(s->evidence_ctx, &ev);
    free(excerpt);
}

/* ---- login --------------------------------------------------------------------------- */

/* The first login rule matching (status and body), or NULL. */
static const struct flow_rule *login_rule(const struct flow_login *l, const struct http_response *r)
{
    for (size_t i = 0; i < l->n_rules; i++) {
        const struct flow_rule *rule = &l->rules[i];
        if (rule->status && !match_status(rule->status, r->status))
            continue;
        if (rule->url && !(r->effective_url &&
                           match_exec(rule->url, r->effective_url, strlen(r->effective_url), NULL)))
            continue;
        if (rule->body && !match_exec(rule->body, r->body ? r->body : "", r->body_len, NULL))
            continue;
        return rule;
    }
    return NULL;
}

/*
 * One login attempt. Returns APBOT_E_BUSY (detail in err) when the answer to the submitted
 * login form is the flow's session-expired page: either the ERP ended the fresh session at
 * once (a transient fault) or it silently refused the credentials; erp_login tells the two
 * apart by trying once more.
 */
static int login_once(struct erp_session *s, char *err, size_t errlen)
{
    const struct flow *f = s->flow;
    const struct flow_login *l = &f->login;
    struct flow_vars vars;
    struct http_response r1, r2;
    struct page *p = NULL;
    struct page_form form;
    struct http_field *fields = NULL;
    char *tmpl_url = NULL, *url = NULL;
    const struct flow_rule *rule;
    int rc;

    memset(&r1, 0, sizeof(r1));
    memset(&r2, 0, sizeof(r2));
    memset(&form, 0, sizeof(form));
    s->logged_in = false;
    if (!l->present) {
        s->logged_in = true;
        return APBOT_OK;
    }
    if (!l->has_form)
        return apbot_fail(err, errlen, APBOT_E_SYSTEMIC,
                          "this apbot cannot yet log in without a login <form>");
    http_session_clear_cookies(s->http);
    memset(&vars, 0, sizeof(vars));
    vars.user = s->user;
    vars.password = s->password;

    rc = flow_expand(f, l->get, &vars, &tmpl_url, err, errlen);
    if (rc != APBOT_OK)
        goto out;
    url = erp_url(s, tmpl_url);
    if (!url) {
        rc = apbot_fail(err, errlen, APBOT_E_INVAL, "login URL does not resolve");
        goto out;
    }
    rc = http_get(s->http, url, &r1);
    if (rc != APBOT_OK) {
        rc = apbot_fail(err, errlen, rc, "login page: %s", apbot_strerror(rc));
        goto out;
    }
    if (r1.transport != HTTP_ANSWERED) {
        emit(s, "login", "GET", url, &r1, NULL, "failed");
        rc = apbot_fail(err, errlen, APBOT_E_NET, "login page: %s (%s)",
                        http_transport_name(r1.transport), r1.detail);
        goto out;
    }
    if (!status_ok(r1.status)) {
        emit(s, "login", "GET", url, &r1, NULL, "failed");
        rc = apbot_fail(err, errlen, APBOT_E_NET, "login page answered HTTP %ld", r1.status);
        goto out;
    }
    rc = page_parse(r1.body, r1.body_len, r1.effective_url ? r1.effective_url : url, &p, err,
                    errlen);
    if (rc != APBOT_OK)
        goto out;
    emit(s, "login", "GET", url, &r1, p, "answered");
    if (page_find_form(p, l->form.xpath, &form, NULL, 0) != APBOT_OK) {
        rc = apbot_fail(err, errlen, APBOT_E_SYSTEMIC, "login form not found (%s)", l->form.xpath);
        goto out;
    }
    for (size_t i = 0; i < l->form.n_fields; i++) {
        char *value = NULL;
        rc = flow_expand(f, l->form.fields[i].value, &vars, &value, err, errlen);
        if (rc != APBOT_OK)
            goto out;
        rc = page_form_set(&form, l->form.fields[i].name, value);
        wipe_free(value);
        if (rc != APBOT_OK) {
            rc = apbot_fail(err, errlen, APBOT_E_SYSTEMIC, "login form has no field '%s'",
                            l->form.fields[i].name);
            goto out;
        }
    }
    if (l->form.submit && page_form_press(&form, l->form.submit, NULL) != APBOT_OK) {
        rc = apbot_fail(err, errlen, APBOT_E_SYSTEMIC, "login form has no button '%s'",
                        l->form.submit);
        goto out;
    }
    fields = calloc(form.n ? form.n : 1, sizeof(*fields));
    if (!fields)
        abort();
    for (size_t i = 0; i < form.n; i++) {
        fields[i].name = form.names[i];
        fields[i].value = form.values[i];
    }
    rc = http_post_form(s->http, form.action, fields, form.n, &r2);
    if (rc != APBOT_OK) {
        rc = apbot_fail(err, errlen, rc, "login: %s", apbot_strerror(rc));
        goto out;
    }
    page_free(p);
    p = NULL;
    if (r2.transport == HTTP_ANSWERED && r2.body &&
        page_parse(r2.body, r2.body_len, form.action, &p, NULL, 0) != APBOT_OK)
        p = NULL; /* evidence without an excerpt */
    if (r2.transport != HTTP_ANSWERED) {
        emit(s, "login", "POST", form.action, &r2, NULL, "failed");
        rc = apbot_fail(err, errlen, APBOT_E_NET, "login: %s (%s)",
                        http_transport_name(r2.transport), r2.detail);
        goto out;
    }
    rule = login_rule(l, &r2);
    if (rule) {
        switch (rule->outcome) {
        case FLOW_OUT_COMPLETED:
            break;
        case FLOW_OUT_REJECTED:
            emit(s, "login", "POST", form.action, &r2, p, "refused");
            rc = apbot_fail(err, errlen, APBOT_E_SYSTEMIC, "login refused (rule %s)",
                            rule->name ? rule->name : "?");
            goto out;
        case FLOW_OUT_ALREADY_EXISTS:
        case FLOW_OUT_NOT_SENT:
        case FLOW_OUT_SESSION_EXPIRED:
        case FLOW_OUT_UNKNOWN:
        case FLOW_OUT_SAVED:
        case FLOW_OUT__COUNT:
            emit(s, "login", "POST", form.action, &r2, p, "failed");
            rc = apbot_fail(err, errlen, APBOT_E_NET, "login not completed (rule %s)",
                            rule->name ? rule->name : "?");
            goto out;
        }
    }
    if (!rule &&
        !((l->success || l->success_status) &&
          (!l->success_status || match_status(l->success_status, r2.status)) &&
          (!l->success || (r2.body && match_exec(l->success, r2.body, r2.body_len, NULL))))) {
        emit(s, "login", "POST", form.action, &r2, p, "failed");
        if (r2.body && erp_is_session_expired(s, r2.body, r2.body_len))
            rc = apbot_fail(err, errlen, APBOT_E_BUSY,
                            "the ERP answered the login with its login page (HTTP %ld)", r2.status);
        else if (r2.status == 429 || r2.status >= 500)
            rc = apbot_fail(err, errlen, APBOT_E_NET, "login answered HTTP %ld", r2.status);
        else
            rc = apbot_fail(err, errlen, APBOT_E_SYSTEMIC,
                            "login failed: the page after login lacks the success marker "
                            "(HTTP %ld)",
                            r2.status);
        goto out;
    }
    emit(s, "login", "POST", form.action, &r2, p, "logged-in");
    s->logged_in = true;
    rc = APBOT_OK;
out:
    free(fields);
    page_form_done(&form);
    page_free(p);
    http_response_done(&r1);
    http_response_done(&r2);
    free(tmpl_url);
    free(url);
    return rc;
}

/* Attempts when the ERP answers a submitted login with its login page again. */
#define ERP_LOGIN_ATTEMPTS 3

/*
 * Logs in through the flow's login form. A login answered by the login page is tried again,
 * up to ERP_LOGIN_ATTEMPTS times: a session the ERP ended at once is transient, the same
 * answer every time is a refusal the flow has no rule for (APBOT_E_SYSTEMIC).
 */
int erp_login(struct erp_session *s, char *err, size_t errlen)
{
    int rc = APBOT_E_BUSY;
    for (int i = 0; i < ERP_LOGIN_ATTEMPTS && rc == APBOT_E_BUSY; i++)
        rc = login_once(s, err, errlen);
    if (rc == APBOT_E_BUSY)
        rc = apbot_fail(err, errlen, APBOT_E_SYSTEMIC,
                        "login refused: the ERP answered the login form with its login page "
                        "%d times",
                        ERP_LOGIN_ATTEMPTS);
    return rc;
}

/* ---- rows ---------------------------------------------------------------------------- */

static void row_free(struct erp_row *r)
{
    free(r->doc);
    free(r->reference);
    free(r->vendor);
    free(r->invoice_number);
    free(r->currency);
    free(r->date);
    free(r->doc_type);
    free(r->booked);
    free(r->amount_text);
    memset(r, 0, sizeof(*r));
}

void erp_hits_done(struct erp_hits *h)
{
    if (!h)
        return;
    for (size_t i = 0; i < h->n; i++)
        row_free(&h->rows[i]);
    free(h->rows);
    memset(h, 0, sizeof(*h));
}

void erp_lookup_result_done(struct erp_lookup_result *r)
{
    if (!r)
        return;
    erp_hits_done(&r->hits);
}

int erp_parse_amount(const struct flow_table *t, const char *text, const char *currency,
                     int64_t *ret_minor, char *err, size_t errlen)
{
    char buf[64];
    size_t n = 0;
    const char *p = text;
    char dec = t->amount_decimal ? t->amount_decimal : '.';
    char group = t->amount_group;
    bool seen_dec = false;

    if (!text || !currency)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "no amount or currency");
    while (*p == ' ')
        p++;
    if (*p == '-' || *p == '+')
        buf[n++] = *p++;
    for (; *p; p++) {
        if (n + 2 >= sizeof(buf))
            return apbot_fail(err, errlen, APBOT_E_RANGE, "amount too long");
        if (*p >= '0' && *p <= '9') {
            buf[n++] = *p;
        } else if (*p == dec && !seen_dec) {
            seen_dec = true;
            buf[n++] = '.';
        } else if (group && *p == group && !seen_dec && n > 0 && buf[n - 1] >= '0' &&
                   buf[n - 1] <= '9' && p[1] >= '0' && p[1] <= '9') {
            continue; /* a grouping separator between digits of the integer part */
        } else if (*p == ' ' && p[strspn(p, " ")] == '\0') {
            break; /* trailing blanks */
        } else {
            return apbot_fail(err, errlen, APBOT_E_INVAL, "not an amount: '%.40s'", text);
        }
    }
    buf[n] = '\0';
    return money_parse(buf, currency, MONEY_PLAIN, MONEY_ROUND_REFUSE, ret_minor, err, errlen);
}

/* Column indexes of table t by name. */
static void table_columns(const struct flow_table *t, int idx[ERP_COL__COUNT])
{
    for (int c = 0; c < ERP_COL__COUNT; c++) {
        idx[c] = -1;
        for (size_t i = 0; i < t->n_cols; i++)
            if (t->cols[i].name && strcmp(t->cols[i].name, erp_col_names[c]) == 0) {
                idx[c] = (int)i;
                break;
            }
    }
}

static char *cell(const char *const *cells, size_t n, int idx)
{
    if (idx < 0 || (size_t)idx >= n || !cells[idx] || !*cells[idx])
        return NULL;
    return apbot_xstrdup(cells[idx]);
}

/* Fills *row from one table row (strings heap-owned by row). */
static void row_fill(const struct flow_table *t, const int idx[ERP_COL__COUNT],
                     const char *const *cells, size_t n, const char *currency_hint,
                     struct erp_row *row)
{
    const char *cur;
    int64_t minor;

    memset(row, 0, sizeof(*row));
    row->doc = cell(cells, n, idx[ERP_COL_DOC]);
    row->reference = cell(cells, n, idx[ERP_COL_REFERENCE]);
    row->vendor = cell(cells, n, idx[ERP_COL_VENDOR]);
    row->invoice_number = cell(cells, n, idx[ERP_COL_INVOICE_NUMBER]);
    row->currency = cell(cells, n, idx[ERP_COL_CURRENCY]);
    row->date = cell(cells, n, idx[ERP_COL_DATE]);
    row->doc_type = cell(cells, n, idx[ERP_COL_DOC_TYPE]);
    row->booked = cell(cells, n, idx[ERP_COL_BOOKED]);
    row->amount_text = cell(cells, n, idx[ERP_COL_AMOUNT]);
    cur = row->currency ? row->currency : currency_hint;
    if (row->amount_text && cur && money_exponent(cur) >= 0 &&
        erp_parse_amount(t, row->amount_text, cur, &minor, NULL, 0) == APBOT_OK) {
        row->amount = minor;
        row->exponent = money_exponent(cur);
        row->has_amount = true;
    }
}

static void hits_push(struct erp_hits *h, struct erp_row *row)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 4;
        struct erp_row *rows = realloc(h->rows, cap * sizeof(*rows));
        if (!rows)
            abort();
        h->rows = rows;
        h->cap = cap;
    }
    h->rows[h->n++] = *row;
    memset(row, 0, sizeof(*row));
}

/* ---- fetching a screen, logging in again when the ERP shows the login page ------------- */

/*
 * GETs url; on the session-expired page logs in again (at most ERP_RELOGIN_MAX times) and
 * repeats. On APBOT_OK *ret is an answered 2xx response and *ret_page its parsed page.
 * APBOT_E_NET: no usable answer (detail in err, *ret still holds the last response);
 * APBOT_E_SYSTEMIC: the login was refused.
 */
static int fetch(struct erp_session *s, const char *step, const char *url,
                 struct http_response *ret, struct page **ret_page, char *err, size_t errlen)
{
    int relogins = 0, retries = 0;
    int rc;

    for (;;) {
        struct page *p = NULL;
        http_response_done(ret);
        memset(ret, 0, sizeof(*ret));
        if (!s->logged_in) {
            rc = erp_login(s, err, errlen);
            if (rc == APBOT_E_NET && retries < s->retries) {
                retry_wait(retries++, -1);
                continue;
            }
            if (rc != APBOT_OK)
                return rc;
        }
        rc = http_get(s->http, url, ret);
        if (rc != APBOT_OK)
            return apbot_fail(err, errlen, rc, "%s: %s", step, apbot_strerror(rc));
        if (ret->transport != HTTP_ANSWERED) {
            emit(s, step, "GET", url, ret, NULL, "failed");
            if (retries < s->retries) {
                retry_wait(retries++, -1);
                continue;
            }
            return apbot_fail(err, errlen, APBOT_E_NET, "%s: %s (%s)", step,
                              http_transport_name(ret->transport), ret->detail);
        }
        if (erp_is_session_expired(s, ret->body, ret->body_len)) {
            emit(s, step, "GET", url, ret, NULL, "session-expired");
            s->logged_in = false;
            if (relogins++ < ERP_RELOGIN_MAX)
                continue;
            return apbot_fail(err, errlen, APBOT_E_NET,
                              "%s: session expired again after %d fresh logins", step,
                              ERP_RELOGIN_MAX);
        }
        if (!status_ok(ret->status)) {
            emit(s, step, "GET", url, ret, NULL, "failed");
            if ((ret->status == 429 || ret->status >= 500) && retries < s->retries) {
                retry_wait(retries++, ret->retry_after_s);
                continue;
            }
            return apbot_fail(err, errlen, APBOT_E_NET, "%s: HTTP %ld", step, ret->status);
        }
        if (ret->truncated) {
            emit(s, step, "GET", url, ret, NULL, "failed");
            return apbot_fail(err, errlen, APBOT_E_NET, "%s: page larger than max_body", step);
        }
        rc = page_parse(ret->body, ret->body_len, ret->effective_url ? ret->effective_url : url, &p,
                        err, errlen);
        if (rc != APBOT_OK) {
            emit(s, step, "GET", url, ret, NULL, "failed");
            return apbot_fail(err, errlen, APBOT_E_NET, "%s: unreadable page", step);
        }
        *ret_page = p;
        return APBOT_OK;
    }
}

/* Column XPaths of a table, for page_rows. Heap array of borrowed strings. */
static const char **table_xpaths(const struct flow_table *t)
{
    const char **x = calloc(t->n_cols ? t->n_cols : 1, sizeof(*x));
    if (!x)
        abort();
    for (size_t i = 0; i < t->n_cols; i++)
        x[i] = t->cols[i].xpath;
    return x;
}

/* ---- lookup -------------------------------------------------------------------------- */

struct lookup_walk {
    const struct flow_table *t;
    int idx[ERP_COL__COUNT];
    int key_idx; /* column compared with the cut key, -1 for a natural-key lookup */
    const char *cut;
    const char *currency;
    int *expect_idx;   /* per <expect>: its column */
    char **expect_val; /* per <expect>: the expanded value the cell must equal */
    size_t n_expect;
    struct erp_hits *hits;
};

/* True when cell i of the row exists and equals want exactly. */
static bool cell_is(const char *const *cells, size_t n, int i, const char *want)
{
    return i >= 0 && (size_t)i < n && cells[i] && strcmp(cells[i], want) == 0;
}

static int lookup_row(void *ctx, const char *const *cells, size_t n)
{
    struct lookup_walk *w = ctx;
    struct erp_row row;

    /* The ERP's search may match by prefix or ignore filters: only exact rows count. */
    if (w->key_idx >= 0 && !cell_is(cells, n, w->key_idx, w->cut))
        return 0;
    for (size_t i = 0; i < w->n_expect; i++)
        if (!cell_is(cells, n, w->expect_idx[i], w->expect_val[i]))
            return 0;
    row_fill(w->t, w->idx, cells, n, w->currency, &row);
    hits_push(w->hits, &row);
    return 0;
}

/* Index of the table column called name, or -1. */
static int column_index(const struct flow_table *t, const char *name)
{
    for (size_t i = 0; name && i < t->n_cols; i++)
        if (t->cols[i].name && strcmp(t->cols[i].name, name) == 0)
            return (int)i;
    return -1;
}

int erp_lookup(struct erp_session *s, const char *key, const struct invoice *inv,
               const char *currency, struct erp_lookup_result *ret, char *err, size_t errlen)
{
    const struct flow *f = s->flow;
    const struct flow_lookup *lk = &f->lookup;
    struct flow_vars vars;
    struct http_response resp;
    struct page *p = NULL;
    struct lookup_walk w;
    const char **xp = NULL;
    char *tmpl_url = NULL, *url = NULL, *cut = NULL;
    char ferr[256] = "";
    size_t n_rows = 0;
    int rc;

    memset(ret, 0, sizeof(*ret));
    ret->retry_after_s = -1;
    memset(&resp, 0, sizeof(resp));
    if (!lk->get || !lk->table.rows)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "the flow has no lookup");
    if (!key || !*key)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "lookup without a key");
    if (lk->n_expect > 0 && !inv)
        return apbot_fail(err, errlen, APBOT_E_INVAL,
                          "the flow's lookup compares invoice fields: an invoice is needed");

    memset(&w, 0, sizeof(w));
    memset(&vars, 0, sizeof(vars));
    vars.key = key;
    vars.inv = inv;
    if (lk->n_expect > 0) {
        w.expect_idx = calloc(lk->n_expect, sizeof(*w.expect_idx));
        w.expect_val = calloc(lk->n_expect, sizeof(*w.expect_val));
        if (!w.expect_idx || !w.expect_val)
            abort();
        w.n_expect = lk->n_expect;
        for (size_t i = 0; i < lk->n_expect; i++) {
            w.expect_idx[i] = column_index(&lk->table, lk->expect[i].name);
            rc = flow_expand(f, lk->expect[i].value, &vars, &w.expect_val[i], err, errlen);
            if (rc != APBOT_OK)
                goto out;
        }
    }
    rc = flow_expand(f, lk->get, &vars, &tmpl_url, err, errlen);
    if (rc != APBOT_OK)
        goto out;
    url = erp_url(s, tmpl_url);
    cut = flow_key_cut(f, key);
    if (!url || !cut) {
        rc = apbot_fail(err, errlen, APBOT_E_INVAL, "lookup URL does not resolve");
        goto out;
    }

    rc = fetch(s, "lookup", url, &resp, &p, ferr, sizeof(ferr));
    ret->http_status = resp.status;
    ret->retry_after_s = resp.retry_after_s;
    if (rc == APBOT_E_NET) {
        ret->answer = ERP_FAILED;
        snprintf(ret->detail, sizeof(ret->detail), "%s", ferr);
        rc = APBOT_OK;
        goto out;
    }
    if (rc != APBOT_OK) {
        rc = apbot_fail(err, errlen, rc, "%s", ferr);
        goto out;
    }

    w.t = &lk->table;
    table_columns(w.t, w.idx);
    /* By key: the key column (checked to exist at load). By natural key: the expects only. */
    w.key_idx = lk->key_column ? column_index(w.t, lk->key_column) : -1;
    if (lk->key_column && w.key_idx < 0)
        w.key_idx = w.idx[ERP_COL_REFERENCE];
    if (w.key_idx < 0 && w.n_expect == 0) {
        rc = apbot_fail(err, errlen, APBOT_E_INVAL, "the flow's lookup compares no column");
        goto out;
    }
    w.cut = cut;
    w.currency = currency;
    w.hits = &ret->hits;
    xp = table_xpaths(w.t);
    rc = page_rows(p, w.t->rows, xp, w.t->n_cols, lookup_row, &w, &n_rows, err, errlen);
    if (rc != APBOT_OK) {
        erp_hits_done(&ret->hits);
        ret->answer = ERP_FAILED;
        snprintf(ret->detail, sizeof(ret->detail), "lookup: result table unreadable");
        emit(s, "lookup", "GET", url, &resp, p, "failed");
        rc = APBOT_OK;
        goto out;
    }
    if (ret->hits.n > 0) {
        ret->answer = ERP_FOUND;
        emit(s, "lookup", "GET", url, &resp, p, "found");
    } else if (n_rows > 0 || (w.t->empty && page_has(p, w.t->empty))) {
        ret->answer = ERP_NOT_FOUND;
        emit(s, "lookup", "GET", url, &resp, p, "not-found");
    } else {
        ret->answer = ERP_FAILED;
        snprintf(ret->detail, sizeof(ret->detail),
                 "lookup: unrecognised page (neither result rows nor the no-results marker)");
        emit(s, "lookup", "GET", url, &resp, p, "failed");
    }
    rc = APBOT_OK;
out:
    if (rc != APBOT_OK)
        erp_lookup_result_done(ret);
    for (size_t i = 0; i < w.n_expect; i++)
        free(w.expect_val[i]);
    free(w.expect_val);
    free(w.expect_idx);
    free(xp);
    page_free(p);
    http_response_done(&resp);
    free(tmpl_url);
    free(url);
    free(cut);
    return rc;
}

/* ---- day listing --------------------------------------------------------------------- */

struct list_walk {
    const struct flow_table *t;
    int idx[ERP_COL__COUNT];
    erp_row_fn fn;
    void *ctx;
    int stop; /* the callback's non-zero return */
};

static int list_row(void *ctx, const char *const *cells, size_t n)
{
    struct list_walk *w = ctx;
    struct erp_row row;
    int rc;

    row_fill(w->t, w->idx, cells, n, NULL, &row);
    rc = w->fn(w->ctx, &row);
    row_free(&row);
    if (rc != 0)
        w->stop = rc;
    return rc;
}

/* The next-page href on p, or NULL. The flow's XPath may name the link or its @href. */
static char *next_href(const struct page *p, const char *xpath)
{
    char expr[1024];
    char *href;

    if (strstr(xpath, "@href"))
        return page_string(p, xpath);
    if ((size_t)snprintf(expr, sizeof(expr), "(%s)[1]/@href", xpath) >= sizeof(expr))
        return NULL;
    href = page_string(p, expr);
    return href;
}

int erp_list_day(struct erp_session *s, const char *date, erp_row_fn fn, void *ctx, int *ret_pages,
                 char *err, size_t errlen)
{
    const struct flow *f = s->flow;
    const struct flow_list *ls = &f->list;
    const bool by_template = ls->get && strstr(ls->get, "${page") != NULL;
    const int max_pages = ls->max_pages > 0 ? ls->max_pages : 100;
    struct list_walk w;
    const char **xp = NULL;
    char *url = NULL;
    int pages = 0;
    int rc = APBOT_OK;

    if (!ls->get || !ls->table.rows)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "the flow has no list operation");
    if (!date || strlen(date) != 10)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "list: bad date");

    memset(&w, 0, sizeof(w));
    w.t = &ls->table;
    w.fn = fn;
    w.ctx = ctx;
    table_columns(w.t, w.idx);
    xp = table_xpaths(w.t);

    for (int page_no = 1;; page_no++) {
        struct flow_vars vars;
        struct http_response resp;
        struct page *p = NULL;
        char *next = NULL;
        size_t n_rows = 0;
        bool more;

        if (!url) {
            char *tmpl_url = NULL;
            memset(&vars, 0, sizeof(vars));
            vars.date = date;
            vars.from = vars.to = date; /* a range listing, one day of it */
            vars.page = page_no;
            rc = flow_expand(f, ls->get, &vars, &tmpl_url, err, errlen);
            if (rc != APBOT_OK)
                break;
            url = erp_url(s, tmpl_url);
            free(tmpl_url);
            if (!url) {
                rc = apbot_fail(err, errlen, APBOT_E_INVAL, "list URL does not resolve");
                break;
            }
        }
        memset(&resp, 0, sizeof(resp));
        rc = fetch(s, "list", url, &resp, &p, err, errlen);
        if (rc != APBOT_OK) {
            http_response_done(&resp);
            break;
        }
        pages++;
        rc = page_rows(p, w.t->rows, xp, w.t->n_cols, list_row, &w, &n_rows, err, errlen);
        if (rc != APBOT_OK || w.stop) {
            emit(s, "list", "GET", url, &resp, p, w.stop ? "answered" : "failed");
            page_free(p);
            http_response_done(&resp);
            if (w.stop)
                rc = w.stop;
            break;
        }
        if (n_rows == 0 && w.t->empty && !page_has(p, w.t->empty)) {
            emit(s, "list", "GET", url, &resp, p, "failed");
            page_free(p);
            http_response_done(&resp);
            rc = apbot_fail(err, errlen, APBOT_E_NET,
                            "list page %d: unrecognised page (neither rows nor the "
                            "no-results marker)",
                            page_no);
            break;
        }
        emit(s, "list", "GET", url, &resp, p, "answered");
        if (w.t->next) {
            next = next_href(p, w.t->next);
            more = next != NULL && *next;
        } else {
            more = by_template && n_rows > 0;
        }
        free(url);
        url = NULL;
        if (more && !by_template) {
            url = http_resolve_url(resp.effective_url ? resp.effective_url : erp_base_url(s), next);
            if (!url) {
                free(next);
                page_free(p);
                http_response_done(&resp);
                rc = apbot_fail(err, errlen, APBOT_E_NET, "list: next-page link unusable");
                break;
            }
        }
        free(next);
        page_free(p);
        http_response_done(&resp);
        if (!more) {
            rc = APBOT_OK;
            break;
        }
        if (pages >= max_pages) {
            rc = apbot_fail(err, errlen, APBOT_E_LIMIT,
                            "list: the ERP shows more than %d pages for %s; the listing would "
                            "be incomplete (raise max-pages in the flow)",
                            max_pages, date);
            break;
        }
    }
    free(url);
    free(xp);
    if (ret_pages)
        *ret_pages = pages;
    return rc;
}
