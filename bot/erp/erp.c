/*
 * erp.c - an ERP session driven by a flow: credentials, the login (by form, one request with
 * HTTP Basic riding on it, or a composed request such as a JSON call, then the calls that
 * follow it), what the session keeps from it (${session.*} captures, the headers made of them,
 * sent on every later request), fetching a screen or a JSON answer with bounded re-logins when
 * a session marker says the session is gone, and the reporting of every exchange to the
 * evidence and trace callbacks with the secrets masked (the password, the user, secret
 * captures and the headers). The result tables (lookup, listing) are read in erp_lookup.c, the
 * post in erp_post.c, reference data in erp_resolve.c; what a hit or an answer means for an
 * item is the caller's business. It never logs.
 */
#include "apbot/erp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "apbot/buf.h"
#include "apbot/flow.h"
#include "apbot/mem.h"
#include "apbot/secret.h"
#include "apbot/text.h"
#include "web/http.h"
#include "web/jdoc.h"
#include "web/match.h"
#include "web/page.h"
#include "erp-int.h"
#include "erp_resolve.h"

/* Attempts when the ERP answers a login with its login page again. */
#define ERP_LOGIN_ATTEMPTS 3
/* Controls and captures reported per exchange at most. */
#define ERP_XCH_LIST_MAX 4096

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

/* ---- session ----------------------------------------------------------------------------- */

int erp_open(const struct flow *f, const char *base_url, atomic_int *cancel,
             struct erp_session **ret, char *err, size_t errlen)
{
    struct erp_session *s;
    struct http_options opt;
    const char *base = (base_url && *base_url) ? base_url : (f ? f->base_url : NULL);
    int rc;

    if (!f || !ret)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "erp_open: no flow");
    if (!base || !*base)
        return apbot_fail(err, errlen, APBOT_E_INVAL,
                          "no ERP URL: give --erp URL, APBOT_ERP_URL or a base URL in the flow");
    char *user = secret_dup(SECRET_ERP_USER);
    char *password = secret_dup(SECRET_ERP_PASSWORD);
    if ((f->login.present || f->basic_auth) && (!user || !password)) {
        secret_free(user);
        secret_free(password);
        return apbot_fail(err, errlen, APBOT_E_SYSTEMIC,
                          "the flow logs in: give APBOT_ERP_USER and APBOT_ERP_PASSWORD (or "
                          "APBOT_ERP_PASSWORD_FILE, or systemd credentials erp-user and "
                          "erp-password)");
    }

    s = apbot_xcalloc(1, sizeof(*s));
    s->flow = f;
    s->base_url = apbot_xstrdup(base);
    s->user = user ? user : apbot_xstrdup("");
    s->password = password ? password : apbot_xstrdup("");
    s->cancel = cancel;

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

/* Forgets what the last login captured and the headers made of it. */
static void session_forget(struct erp_session *s)
{
    for (size_t i = 0; i < s->n_sess; i++) {
        free(s->sess_names[i]);
        wipe_free(s->sess_values[i]);
    }
    free(s->sess_names);
    free(s->sess_values);
    s->sess_names = s->sess_values = NULL;
    s->n_sess = 0;
    for (size_t i = 0; i < s->n_headers; i++) {
        free((char *)s->headers[i].name);
        wipe_free((char *)s->headers[i].value);
    }
    free(s->headers);
    s->headers = NULL;
    s->n_headers = 0;
    s->n_secrets = 0;
    for (size_t i = 0; i < s->n_cookie_tmp; i++)
        wipe_free(s->cookie_tmp[i]);
    s->n_cookie_tmp = 0;
}

void erp_close(struct erp_session *s)
{
    if (!s)
        return;
    session_forget(s);
    if (s->own_refs)
        erp_refs_free(s->refs);
    http_session_free(s->http);
    free(s->base_url);
    wipe_free(s->user);
    wipe_free(s->password);
    free(s);
}

void erp_set_refs(struct erp_session *s, struct erp_refs *refs)
{
    if (s->own_refs)
        erp_refs_free(s->refs);
    s->refs = refs;
    s->own_refs = false;
}

void erp_set_retries(struct erp_session *s, int retries)
{
    s->retries = retries > 0 ? retries : 0;
}

void erp_set_evidence(struct erp_session *s, erp_evidence_fn fn, void *ctx)
{
    s->evidence = fn;
    s->evidence_ctx = ctx;
}

void erp_set_trace(struct erp_session *s, erp_trace_fn fn, void *ctx)
{
    s->trace = fn;
    s->trace_ctx = ctx;
}

/* The http gate of a session with an erp gate: pages the flow only reads pass. */
static bool session_gate(void *ctx, const struct http_request *req, char *why, size_t whylen)
{
    const struct erp_session *s = ctx;
    return req->reads_only || s->gate(s->gate_ctx, why, whylen);
}

void erp_set_gate(struct erp_session *s, erp_gate_fn fn, void *ctx)
{
    s->gate = fn;
    s->gate_ctx = fn ? ctx : NULL;
    http_set_gate(s->http, fn ? session_gate : NULL, s);
}

const char *erp_base_url(const struct erp_session *s)
{
    return s->base_url;
}

bool erp_logged_in(const struct erp_session *s)
{
    return s->logged_in;
}

bool erp_login_refused(const struct erp_session *s)
{
    return s->refused;
}

char *erp_url(const struct erp_session *s, const char *expanded)
{
    return http_resolve_url(s->base_url, expanded);
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

void erp_text_put(char *dst, size_t cap, size_t *at, const char *s, size_t max)
{
    size_t n = 0, room = cap - 1 - *at;
    while (n < max && n < room && s[n])
        n++;
    memcpy(dst + *at, s, n);
    *at += n;
    dst[*at] = '\0';
}

void erp_text_copy(char *dst, size_t cap, const char *s)
{
    size_t at = 0;
    erp_text_put(dst, cap, &at, s, SIZE_MAX);
}

/* ---- secrets ----------------------------------------------------------------------------- */

char *erp_mask(const struct erp_session *s, const char *text)
{
    char *m = text_mask(text, s ? s->password : NULL, s ? s->user : NULL);
    /* the session's own secrets (a token, the headers made of it), two at a time */
    for (size_t i = 0; m && s && i < s->n_secrets; i += 2) {
        char *n = text_mask(m, s->secrets[i], i + 1 < s->n_secrets ? s->secrets[i + 1] : NULL);
        free(m);
        m = n;
    }
    return m;
}

void erp_mask_into(const struct erp_session *s, char *buf, size_t len)
{
    text_mask_into(buf, len, s ? s->password : NULL, s ? s->user : NULL);
    for (size_t i = 0; s && i < s->n_secrets; i += 2)
        text_mask_into(buf, len, s->secrets[i], i + 1 < s->n_secrets ? s->secrets[i + 1] : NULL);
}

/* ---- reading one answer ------------------------------------------------------------------ */

void erp_view_init(struct erp_view *v, const struct erp_session *s, const struct http_response *r)
{
    memset(v, 0, sizeof(*v));
    v->r = r;
    match_budget_init(&v->budget, match_budget_for(r && r->body ? r->body_len : 0),
                      s ? s->cancel : NULL);
}

void erp_view_done(struct erp_view *v)
{
    free(v->blank);
    v->blank = NULL;
    jdoc_free(v->json);
    v->json = NULL;
}

/* erp_view_body without recording an abort: the caller names the pattern only then. */
static enum match_outcome view_body(struct erp_view *v, const struct match_re *re, bool raw,
                                    struct match_result **ret_m)
{
    const char *body = v->r && v->r->body ? v->r->body : "";
    size_t len = v->r && v->r->body ? v->r->body_len : 0;
    if (!raw && len > 0 && !v->blank && match_excludes(re, body, len, ' ')) {
        /* page_rule_text only turns bytes into spaces (page.h), so its text cannot hold a
         * needle of re either: match_run answers on it as on the empty text (MATCH_NONE, or
         * MATCH_ABORTED on a spent budget). A page that holds no pattern's needles is never
         * blanked. */
        body = "";
        len = 0;
    } else if (!raw && len > 0) {
        if (!v->blank)
            v->blank = page_rule_text(body, len);
        body = v->blank;
    }
    return match_run(re, body, len, &v->budget, ret_m);
}

/* Records the first pattern that stopped: "<what><name>" ("rule NAME"), or with name NULL
 * "<what><line>)" ("session marker (flow line N)"). The label is made here, not before each
 * pattern runs: most pages never need it. */
static void view_aborted(struct erp_view *v, const char *what, const char *name, int line)
{
    if (v->aborted)
        return;
    v->aborted = true;
    if (name)
        snprintf(v->aborted_what, sizeof(v->aborted_what), "%s%s", what, name);
    else
        snprintf(v->aborted_what, sizeof(v->aborted_what), "%s%d)", what, line);
}

enum match_outcome erp_view_body(struct erp_view *v, const struct match_re *re, bool raw,
                                 const char *what, struct match_result **ret_m)
{
    enum match_outcome o = view_body(v, re, raw, ret_m);
    if (o == MATCH_ABORTED)
        view_aborted(v, "", what ? what : "a pattern", 0);
    return o;
}

const struct json_t *erp_view_json(struct erp_view *v)
{
    if (!v->json_tried) {
        const struct http_response *r = v->r;
        v->json_tried = true;
        if (!r || !r->body) {
            snprintf(v->json_why, sizeof(v->json_why), "no answer");
        } else {
            struct jdoc_limits lim = jdoc_limits_for(r->body_len);
            if (jdoc_parse(r->body, r->body_len, &lim, &v->json, v->json_why,
                           sizeof(v->json_why)) != APBOT_OK)
                v->json = NULL;
        }
    }
    return v->json ? jdoc_root(v->json) : NULL;
}

/* The text the patterns of a JSON condition see: bounded like a page's rule text. */
#define ERP_JSON_TEXT_MAX (1024 * 1024)

/* One JSON condition on the answer: MATCH_FOUND (holds, groups in *ret_m when asked),
 * MATCH_NONE, or MATCH_ABORTED (its pattern ran out of budget). No JSON: MATCH_NONE. */
static enum match_outcome view_json_cond(struct erp_view *v, const struct flow_json_cond *j,
                                         struct match_result **ret_m)
{
    const json_t *root = erp_view_json(v);
    if (!root)
        return MATCH_NONE;
    const json_t *at = jdoc_at(root, j->pointer);
    if (j->absent)
        return at ? MATCH_NONE : MATCH_FOUND;
    if (!at)
        return MATCH_NONE;
    if (!j->re)
        return MATCH_FOUND;
    char *text = jdoc_text(at, ERP_JSON_TEXT_MAX);
    if (!text)
        return MATCH_NONE; /* larger than any value a rule looks at */
    enum match_outcome o = match_run(j->re, text, strlen(text), &v->budget, ret_m);
    free(text);
    return o;
}

char *erp_view_capture(struct erp_view *v, const struct flow_capture *c)
{
    struct match_result *m = NULL;
    char *value = NULL;

    if (c->pointer) {
        const json_t *root = erp_view_json(v);
        const json_t *at = root ? jdoc_at(root, c->pointer) : NULL;
        if (!at || jdoc_kind(at) == JDOC_NULL)
            return NULL;
        char *text = jdoc_text(at, ERP_JSON_TEXT_MAX);
        if (!text || !c->re)
            return text;
        enum match_outcome o = match_run(c->re, text, strlen(text), &v->budget, &m);
        free(text);
        if (o == MATCH_ABORTED)
            view_aborted(v, "capture ", c->name, 0);
    } else if (c->re) {
        char what[96];
        snprintf(what, sizeof(what), "capture %s", c->name ? c->name : "?");
        if (erp_view_body(v, c->re, c->raw, what, &m) != MATCH_FOUND) {
            match_result_free(m);
            return NULL;
        }
    }
    value = m ? match_group(m, c->name) : NULL;
    match_result_free(m);
    if (value && !*value) {
        free(value);
        value = NULL;
    }
    return value;
}

/* True when a rule of kind `when` is tried on a page that lacks `missing` (FLOW_WHEN_ALWAYS:
 * on an answer, where nothing is missing). */
static bool rule_applies(enum flow_when when, enum flow_when missing)
{
    if (when == FLOW_WHEN_ALWAYS)
        return true;
    return missing != FLOW_WHEN_ALWAYS && (when == FLOW_WHEN_MISSING_ANY || when == missing);
}

/* erp_view_rules over the rules that apply to a page lacking `missing` (see rule_applies). */
static const struct flow_rule *view_rules(struct erp_view *v, const struct flow_rule *rules,
                                          size_t n, enum flow_when missing,
                                          struct match_result **ret_m)
{
    const struct http_response *r = v->r;
    *ret_m = NULL;
    for (size_t i = 0; i < n && !v->aborted; i++) {
        const struct flow_rule *rule = &rules[i];
        const char *name = rule->name ? rule->name : "?";
        if (!rule_applies(rule->when, missing))
            continue;
        if (rule->status && !match_status(rule->status, r->status))
            continue;
        /* the URL's groups too: a document number the redirect's target names
         * (/invoices/(?<doc>\d+)$), the body's first where both set one */
        struct match_result *um = NULL;
        if (rule->url) {
            const char *u = r->effective_url ? r->effective_url : "";
            enum match_outcome o = match_run(rule->url, u, strlen(u), &v->budget, &um);
            if (o == MATCH_ABORTED) {
                match_result_free(um);
                view_aborted(v, "rule ", name, 0);
                return NULL;
            }
            if (o != MATCH_FOUND) {
                match_result_free(um);
                continue;
            }
        }
        struct match_result *m = NULL;
        if (rule->body) {
            enum match_outcome o = view_body(v, rule->body, rule->raw, &m);
            if (o == MATCH_ABORTED) {
                match_result_free(m);
                match_result_free(um);
                view_aborted(v, "rule ", name, 0);
                return NULL;
            }
            if (o != MATCH_FOUND) {
                match_result_free(m);
                match_result_free(um);
                continue;
            }
        }
        m = match_result_join(m, um);
        bool all = true;
        for (size_t k = 0; k < rule->n_json && all; k++) {
            struct match_result *jm = NULL;
            enum match_outcome o = view_json_cond(v, &rule->json[k], &jm);
            if (o == MATCH_ABORTED) {
                match_result_free(m);
                view_aborted(v, "rule ", name, 0);
                return NULL;
            }
            all = o == MATCH_FOUND;
            m = match_result_join(m, jm);
        }
        if (!all) {
            match_result_free(m);
            continue;
        }
        *ret_m = m;
        return rule;
    }
    return NULL;
}

const struct flow_rule *erp_view_rules(struct erp_view *v, const struct flow_rule *rules, size_t n,
                                       struct match_result **ret_m)
{
    return view_rules(v, rules, n, FLOW_WHEN_ALWAYS, ret_m);
}

const struct flow_rule *erp_view_rules_missing(struct erp_view *v, const struct flow_rule *rules,
                                               size_t n, enum flow_when missing,
                                               struct match_result **ret_m)
{
    return view_rules(v, rules, n, missing, ret_m);
}

bool erp_view_session_gone(struct erp_view *v, const struct flow *f)
{
    const struct http_response *r = v->r;
    for (size_t i = 0; i < f->n_session_expired && !v->aborted; i++) {
        const struct flow_marker *m = &f->session_expired[i];
        /* The status of the first hop (the 303 to the login) or of the final answer. */
        if (m->status && !match_status(m->status, r->status) &&
            !(r->first_status && match_status(m->status, r->first_status)))
            continue;
        if (m->redirect) {
            const char *loc = r->first_location;
            if (!loc)
                continue;
            enum match_outcome o = match_run(m->redirect, loc, strlen(loc), &v->budget, NULL);
            if (o == MATCH_ABORTED) {
                view_aborted(v, "session marker (flow line ", NULL, m->line);
                return false;
            }
            if (o != MATCH_FOUND)
                continue;
        }
        if (m->body) {
            enum match_outcome o = view_body(v, m->body, m->raw, NULL);
            if (o == MATCH_ABORTED)
                view_aborted(v, "session marker (flow line ", NULL, m->line);
            if (o != MATCH_FOUND)
                continue;
        }
        return true;
    }
    return false;
}

/* ---- reporting exchanges ----------------------------------------------------------------- */

/* Bytes of an answer no step parsed that are read for its excerpt: an error page's text lies
 * near its start, and a page is cheap to parse at this size. */
#define ERP_EXCERPT_PARSE_MAX (64 * 1024)

void erp_xch_begin(const struct erp_session *s, struct erp_xch *x, const char *step,
                   const char *method, const char *url, const struct http_response *r,
                   const struct page *p, const char *not_sent_detail)
{
    memset(x, 0, sizeof(*x));
    erp_text_copy(x->step, sizeof(x->step), step ? step : "?");
    x->method = method ? method : "GET";
    x->url = erp_mask(s, url);
    if (!r) {
        snprintf(x->transport, sizeof(x->transport), "not-sent: %s",
                 not_sent_detail ? not_sent_detail : "refused before sending");
        erp_mask_into(s, x->transport, sizeof(x->transport));
        return;
    }
    if (r->detail[0])
        snprintf(x->transport, sizeof(x->transport), "%s: %s", http_transport_name(r->transport),
                 r->detail);
    else if (r->truncated)
        snprintf(x->transport, sizeof(x->transport), "%s: the answer exceeded max-body-bytes",
                 http_transport_name(r->transport));
    else
        erp_text_copy(x->transport, sizeof(x->transport), http_transport_name(r->transport));
    erp_mask_into(s, x->transport, sizeof(x->transport));
    x->status = r->status;
    x->elapsed_ms = r->elapsed_ms;
    x->redirects = r->redirects;
    x->first_location = erp_mask(s, r->first_location);
    char *ex = NULL;
    if (p) {
        ex = page_excerpt(p, ERP_EXCERPT_MAX);
    } else if (r->body && r->body_len > 0) {
        /* An answer no step read as a page (an error status, a JSON call, a failed fetch): its
         * text all the same, as a page gives it (an error page's title and message, not its
         * tags), from the start of the body. The excerpt is text; each place that shows it
         * escapes it for its medium (a terminal, a page, JSON), once. */
        struct page *bp = NULL;
        size_t n = r->body_len < ERP_EXCERPT_PARSE_MAX ? r->body_len : ERP_EXCERPT_PARSE_MAX;
        if (page_parse(r->body, n, r->effective_url, &bp, NULL, 0) == APBOT_OK)
            ex = page_excerpt(bp, ERP_EXCERPT_MAX);
        page_free(bp);
        if (!ex) {
            char *raw = apbot_xstrndup(r->body, n < ERP_EXCERPT_MAX ? n : ERP_EXCERPT_MAX);
            ex = text_escape(raw, ERP_EXCERPT_MAX, 0);
            free(raw);
        }
    }
    if (ex) {
        x->excerpt = erp_mask(s, ex);
        text_cut_utf8(x->excerpt, ERP_EXCERPT_MAX);
        free(ex);
    }
}

void erp_xch_outcome(const struct erp_session *s, struct erp_xch *x, const char *outcome,
                     const char *rule, const char *why)
{
    erp_text_copy(x->outcome, sizeof(x->outcome), outcome ? outcome : "");
    free(x->rule);
    x->rule = rule ? apbot_xstrdup(rule) : NULL;
    free(x->why);
    x->why = erp_mask(s, why);
}

void erp_xch_control(const struct erp_session *s, struct erp_xch *x, const char *name,
                     const char *value, const char *source)
{
    if (apbot_grow((void **)&x->controls, &x->cap_controls, x->n_controls, sizeof(*x->controls),
                   ERP_XCH_LIST_MAX) != APBOT_OK)
        return; /* a trace of 4096 controls says enough */
    struct erp_xctl *c = &x->controls[x->n_controls++];
    c->name = erp_mask(s, name ? name : "");
    c->value = erp_mask(s, value ? value : "");
    c->source = apbot_xstrdup(source ? source : "");
}

void erp_xch_body(const struct erp_session *s, struct erp_xch *x, const char *body)
{
    if (!body || x->body)
        return;
    free(x->body);
    x->body = erp_mask(s, body);
}

void erp_xch_capture(const struct erp_session *s, struct erp_xch *x, const char *name,
                     const char *value)
{
    if (x->n_captured >= 64)
        return;
    x->cap_names = apbot_xrealloc(x->cap_names, (x->n_captured + 1) * sizeof(char *));
    x->cap_values = apbot_xrealloc(x->cap_values, (x->n_captured + 1) * sizeof(char *));
    x->cap_names[x->n_captured] = apbot_xstrdup(name ? name : "");
    x->cap_values[x->n_captured] = erp_mask(s, value ? value : "");
    x->n_captured++;
}

void erp_xch_report(const struct erp_session *s, const struct erp_xch *x, erp_trace_fn trace_fn,
                    void *trace_ctx)
{
    if (s->evidence && !x->trace_only) {
        const struct erp_exchange ev = {
            .step = x->step,
            .method = x->method,
            .url = x->url,
            .http_status = (int)x->status,
            .elapsed_ms = x->elapsed_ms,
            .transport = x->transport,
            .rule = x->rule,
            .outcome = x->outcome[0] ? x->outcome : "answered",
            .excerpt = x->excerpt,
        };
        s->evidence(s->evidence_ctx, &ev);
    }
    if (!trace_fn) {
        trace_fn = s->trace;
        trace_ctx = s->trace_ctx;
    }
    if (!trace_fn)
        return;
    struct erp_trace_control *ctl = apbot_xcalloc(x->n_controls ? x->n_controls : 1, sizeof(*ctl));
    for (size_t i = 0; i < x->n_controls; i++) {
        ctl[i].name = x->controls[i].name;
        ctl[i].value = x->controls[i].value;
        ctl[i].source = x->controls[i].source;
    }
    struct erp_trace t = {
        .step = x->step,
        .method = x->method,
        .url = x->url,
        .status = x->status,
        .transport = x->transport,
        .redirects = x->redirects,
        .first_location = x->first_location,
        .form = x->form,
        .body = x->body,
        .controls = ctl,
        .n_controls = x->n_controls,
        .rule = x->rule,
        .outcome = x->outcome[0] ? x->outcome : "answered",
        .why = x->why,
        .captured_names = (const char *const *)x->cap_names,
        .captured_values = (const char *const *)x->cap_values,
        .n_captured = x->n_captured,
        .excerpt = x->excerpt,
    };
    trace_fn(trace_ctx, &t);
    free(ctl);
}

void erp_xch_done(struct erp_xch *x)
{
    if (!x)
        return;
    free(x->url);
    free(x->first_location);
    free(x->excerpt);
    free(x->form);
    free(x->body);
    for (size_t i = 0; i < x->n_controls; i++) {
        free(x->controls[i].name);
        free(x->controls[i].value);
        free(x->controls[i].source);
    }
    free(x->controls);
    free(x->rule);
    free(x->why);
    for (size_t i = 0; i < x->n_captured; i++) {
        free(x->cap_names[i]);
        free(x->cap_values[i]);
    }
    free(x->cap_names);
    free(x->cap_values);
    memset(x, 0, sizeof(*x));
}

/* Reports an exchange with its outcome at once and frees it. */
static void report_now(const struct erp_session *s, struct erp_xch *x, const char *outcome,
                       const char *rule, const char *why)
{
    erp_xch_outcome(s, x, outcome, rule, why);
    erp_xch_report(s, x, NULL, NULL);
    erp_xch_done(x);
}

/* ---- composing requests ------------------------------------------------------------------ */

const char *erp_find_cookie(void *ctx, const char *var, size_t len, size_t line_n)
{
    struct erp_session *s = ctx;
    char name[256];
    (void)line_n;
    if (!s || len <= 7 || len - 7 >= sizeof(name) || memcmp(var, "cookie.", 7) != 0)
        return NULL;
    memcpy(name, var + 7, len - 7);
    name[len - 7] = '\0';
    char *v = http_session_cookie(s->http, name);
    if (!v)
        return NULL;
    if (s->n_cookie_tmp == sizeof(s->cookie_tmp) / sizeof(s->cookie_tmp[0])) {
        wipe_free(s->cookie_tmp[0]);
        memmove(s->cookie_tmp, s->cookie_tmp + 1, (s->n_cookie_tmp - 1) * sizeof(char *));
        s->n_cookie_tmp--;
    }
    s->cookie_tmp[s->n_cookie_tmp++] = v;
    return v;
}

void erp_vars_session(struct erp_session *s, struct flow_vars *v, bool with_secrets)
{
    v->session_names = (const char *const *)s->sess_names;
    v->session_values = (const char *const *)s->sess_values;
    v->n_session = s->n_sess;
    if (!v->find) {
        v->find = erp_find_cookie;
        v->find_ctx = s;
    }
    if (with_secrets) {
        v->user = s->user;
        v->password = s->password;
    }
}

void erp_send_done(struct erp_send *r)
{
    if (!r)
        return;
    free(r->url);
    if (r->body)
        explicit_bzero(r->body, r->body_len);
    free(r->body);
    for (size_t i = 0; i < r->n_fields; i++)
        wipe_free((char *)r->fields[i].value);
    free(r->fields);
    memset(r, 0, sizeof(*r));
}

int erp_send_prepare(struct erp_session *s, const struct flow_send *send,
                     const struct flow_vars *vars, bool reads_only, struct erp_send *ret, char *err,
                     size_t errlen)
{
    char *tmpl = NULL;
    int rc;

    memset(ret, 0, sizeof(*ret));
    rc = flow_expand(s->flow, send->url, vars, &tmpl, err, errlen);
    if (rc != APBOT_OK)
        return rc;
    ret->url = erp_url(s, tmpl);
    free(tmpl);
    if (!ret->url) {
        erp_send_done(ret);
        return apbot_fail(err, errlen, APBOT_E_INVAL, "the request's URL does not resolve");
    }
    if (send->json) {
        rc = flow_json_expand(s->flow, send->json, vars, &ret->body, &ret->body_len, err, errlen);
    } else if (send->n_fields) {
        ret->fields = apbot_xcalloc(send->n_fields, sizeof(*ret->fields));
        for (size_t i = 0; i < send->n_fields && rc == APBOT_OK; i++) {
            char *value = NULL;
            ret->fields[i].name = send->fields[i].name;
            rc = flow_expand(s->flow, send->fields[i].value, vars, &value, err, errlen);
            ret->fields[i].value = value;
            ret->n_fields = i + 1;
        }
    }
    if (rc != APBOT_OK) {
        erp_send_done(ret);
        return rc;
    }
    ret->req = (struct http_request){
        .method = send->post ? "POST" : "GET",
        .url = ret->url,
        .body = ret->body,
        .body_len = ret->body_len,
        .content_type = ret->body ? "application/json" : NULL,
        .fields = ret->fields,
        .n_fields = ret->n_fields,
        .reads_only = reads_only,
        .fresh = send->post,
    };
    return APBOT_OK;
}

int erp_request(struct erp_session *s, const struct http_request *req, struct http_response *ret)
{
    if (s->n_headers == 0 || req->n_headers > 0)
        return http_request(s->http, req, ret);
    struct http_request with = *req;
    with.headers = s->headers;
    with.n_headers = s->n_headers;
    return http_request(s->http, &with, ret);
}

/* The text of a JSON value as a table cell: null is no cell; a number as written; a string as
 * it is; a decimal or a date in the ERP's tagged encoding as its text ("120.50",
 * "2026-03-15"); anything else as compact JSON. Heap, NULL for none. */
char *erp_json_cell(const struct json_t *v)
{
    if (!v || jdoc_kind(v) == JDOC_NULL)
        return NULL;
    if (jdoc_kind(v) == JDOC_OBJECT) {
        const char *cls = json_string_value(json_object_get(v, "__class__"));
        if (cls && strcmp(cls, "Decimal") == 0) {
            const json_t *d = json_object_get(v, "decimal");
            if (json_is_string(d) && jdoc_kind(d) == JDOC_STRING)
                return apbot_xstrdup(json_string_value(d));
        }
        if (cls && strcmp(cls, "date") == 0) {
            const char *y = jdoc_number_text(json_object_get(v, "year"));
            const char *m = jdoc_number_text(json_object_get(v, "month"));
            const char *d = jdoc_number_text(json_object_get(v, "day"));
            if (y && m && d && strlen(y) == 4 && strlen(m) <= 2 && strlen(d) <= 2 &&
                !strchr(m, '.') && !strchr(d, '.') && m[0] != '-' && d[0] != '-') {
                char b[16];
                snprintf(b, sizeof(b), "%s-%s%s-%s%s", y, strlen(m) == 1 ? "0" : "", m,
                         strlen(d) == 1 ? "0" : "", d);
                return apbot_xstrdup(b);
            }
        }
    }
    return jdoc_text(v, ERP_JSON_TEXT_MAX);
}

/* ---- what the session keeps from its login ----------------------------------------------- */

/* Sets ${session.name} (a secret one is masked wherever the session reports). */
static void session_set(struct erp_session *s, const char *name, char *value, bool secret)
{
    size_t i = 0;
    while (i < s->n_sess && strcmp(s->sess_names[i], name) != 0)
        i++;
    if (i == s->n_sess) {
        s->sess_names = apbot_xrealloc(s->sess_names, (s->n_sess + 1) * sizeof(char *));
        s->sess_values = apbot_xrealloc(s->sess_values, (s->n_sess + 1) * sizeof(char *));
        s->sess_names[s->n_sess] = apbot_xstrdup(name);
        s->sess_values[s->n_sess] = NULL;
        s->n_sess++;
    } else {
        /* a secret it replaces may be in the mask list: the list is rebuilt below */
        for (size_t k = 0; k < s->n_secrets; k++)
            if (s->secrets[k] == s->sess_values[i])
                s->secrets[k] = "";
        wipe_free(s->sess_values[i]);
    }
    s->sess_values[i] = value;
    if (secret && *value && s->n_secrets < ERP_SECRETS_MAX)
        s->secrets[s->n_secrets++] = value;
}

/* The captures of an answer into the session. */
static void session_capture(struct erp_session *s, struct erp_view *v,
                            const struct flow_capture *cp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char *value = erp_view_capture(v, &cp[i]);
        if (value)
            session_set(s, cp[i].name, value, cp[i].secret);
    }
}

/* Composes the flow's headers from what the session knows; a header using a ${session.*} not
 * captured yet waits for it. The composed values are secrets (a session token). */
static void session_headers(struct erp_session *s)
{
    const struct flow *f = s->flow;
    struct flow_vars vars;

    for (size_t i = 0; i < s->n_headers; i++) {
        for (size_t k = 0; k < s->n_secrets; k++)
            if (s->secrets[k] == s->headers[i].value)
                s->secrets[k] = "";
        free((char *)s->headers[i].name);
        wipe_free((char *)s->headers[i].value);
    }
    s->n_headers = 0;
    memset(&vars, 0, sizeof(vars));
    erp_vars_session(s, &vars, true);
    for (size_t i = 0; i < f->n_headers; i++) {
        const struct flow_header *h = &f->headers[i];
        bool ready = true;
        for (const char *p = strstr(h->value, "${session."); p && ready;
             p = strstr(p + 1, "${session.")) {
            const char *name = p + 10;
            size_t len = strcspn(name, "|}");
            bool have = false;
            for (size_t k = 0; k < s->n_sess && !have; k++)
                have = strlen(s->sess_names[k]) == len && memcmp(s->sess_names[k], name, len) == 0;
            ready = have;
        }
        char *value = NULL;
        if (!ready || flow_expand(f, h->value, &vars, &value, NULL, 0) != APBOT_OK)
            continue;
        char *enc = h->base64 ? text_base64(value, strlen(value)) : NULL;
        size_t n = (h->prefix ? strlen(h->prefix) : 0) + strlen(enc ? enc : value) + 1;
        char *line = apbot_xmalloc(n);
        snprintf(line, n, "%s%s", h->prefix ? h->prefix : "", enc ? enc : value);
        wipe_free(value);
        wipe_free(enc);
        s->headers = apbot_xrealloc(s->headers, (s->n_headers + 1) * sizeof(*s->headers));
        s->headers[s->n_headers].name = apbot_xstrdup(h->name);
        s->headers[s->n_headers].value = line;
        s->n_headers++;
        if (s->n_secrets < ERP_SECRETS_MAX)
            s->secrets[s->n_secrets++] = line;
    }
}

/* ---- login ------------------------------------------------------------------------------- */

/* True when a login field's template or value carries a secret. */
static bool carries_secret(const struct erp_session *s, const char *tmpl, const char *value)
{
    if (tmpl && strstr(tmpl, "secret."))
        return true;
    if (value && s->password && *s->password && strstr(value, s->password))
        return true;
    return false;
}

/*
 * What the answer to the login request means. Returns APBOT_OK (logged in), APBOT_E_SYSTEMIC
 * (refused: a `rejected` rule, 401/403, or an answer without the success marker),
 * APBOT_E_NET (transient: no answer, 429/5xx, a not-sent rule, a pattern over its budget) or
 * APBOT_E_BUSY (the ERP answered with its login page again: ambiguous, tried again a bounded
 * number of times). Reports the exchange x.
 */
/* What the session keeps of a good login answer (a token, a CSRF value) and the headers made
 * of it, shown in the exchange (secrets masked); a capture that finds nothing leaves its header
 * unsent, which the ERP answers. */
static void login_keep(struct erp_session *s, struct erp_view *v, struct erp_xch *x,
                       const struct flow_capture *cp, size_t n)
{
    session_capture(s, v, cp, n);
    session_headers(s);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < s->n_sess; k++)
            if (strcmp(s->sess_names[k], cp[i].name) == 0)
                erp_xch_capture(s, x, cp[i].name, s->sess_values[k]);
}

static int login_answer(struct erp_session *s, const struct http_response *r, const char *method,
                        const char *url, const struct page_form *form, const char *body, char *err,
                        size_t errlen)
{
    const bool by_form = form != NULL;
    const struct flow_login *l = &s->flow->login;
    struct erp_view v;
    struct erp_xch x;
    struct match_result *m = NULL;
    const struct flow_rule *rule;
    char why[400];
    int rc;

    erp_xch_begin(s, &x, "login", method, url, r, NULL, NULL);
    if (s->trace)
        erp_xch_body(s, &x, body);
    if (form) {
        /* every control submitted, secrets masked by erp_xch_control */
        x.form = apbot_xstrdup(l->form.xpath);
        for (size_t k = 0; k < form->n; k++) {
            const char *src = "page default";
            for (size_t i = 0; i < l->form.n_fields; i++)
                if (strcmp(l->form.fields[i].name, form->names[k]) == 0)
                    src = "template";
            if (form->pressed > 0 && strcmp(form->names[k], form->buttons[form->pressed - 1]) == 0)
                src = "button pressed";
            erp_xch_control(s, &x, form->names[k], form->values[k], src);
        }
    }
    erp_view_init(&v, s, r);
    if (r->transport != HTTP_ANSWERED) {
        snprintf(why, sizeof(why), "login: %s (%s)", http_transport_name(r->transport),
                 r->truncated ? "answer too large" : r->detail);
        rc = APBOT_E_NET;
        report_now(s, &x, "failed", NULL, why);
        goto out;
    }
    rule = erp_view_rules(&v, l->rules, l->n_rules, &m);
    match_result_free(m);
    if (v.aborted) {
        snprintf(why, sizeof(why), "login: %s stopped: %s", v.aborted_what,
                 match_budget_reason(&v.budget) ? match_budget_reason(&v.budget) : "aborted");
        rc = APBOT_E_NET;
        report_now(s, &x, "failed", v.aborted_what, why);
        goto out;
    }
    if (rule) {
        const char *name = rule->name ? rule->name : "?";
        switch (rule->outcome) {
        case FLOW_OUT_COMPLETED:
            snprintf(why, sizeof(why), "logged in (rule %s)", name);
            rc = APBOT_OK;
            login_keep(s, &v, &x, l->captures, l->n_captures);
            report_now(s, &x, "logged-in", name, why);
            goto out;
        case FLOW_OUT_REJECTED:
            snprintf(why, sizeof(why), "login refused (rule %s, HTTP %ld)", name, r->status);
            rc = APBOT_E_SYSTEMIC;
            s->refused = true;
            report_now(s, &x, "refused", name, why);
            goto out;
        case FLOW_OUT_ALREADY_EXISTS:
        case FLOW_OUT_NOT_SENT:
        case FLOW_OUT_SESSION_EXPIRED:
        case FLOW_OUT_UNKNOWN:
        case FLOW_OUT_SAVED:
        case FLOW_OUT__COUNT:
            snprintf(why, sizeof(why), "login not completed (rule %s, HTTP %ld)", name, r->status);
            rc = APBOT_E_NET;
            report_now(s, &x, "failed", name, why);
            goto out;
        }
    }
    if (r->status == 401 || r->status == 403) {
        snprintf(why, sizeof(why), "login refused: HTTP %ld", r->status);
        rc = APBOT_E_SYSTEMIC;
        s->refused = true;
        report_now(s, &x, "refused", NULL, why);
        goto out;
    }
    bool ok = (l->success || l->success_status || l->success_json.pointer) &&
              (!l->success_status || match_status(l->success_status, r->status));
    if (ok && l->success_json.pointer) {
        enum match_outcome o = view_json_cond(&v, &l->success_json, NULL);
        if (o == MATCH_ABORTED) {
            snprintf(why, sizeof(why), "login: the success condition stopped: %s",
                     match_budget_reason(&v.budget) ? match_budget_reason(&v.budget) : "aborted");
            rc = APBOT_E_NET;
            report_now(s, &x, "failed", "success", why);
            goto out;
        }
        ok = o == MATCH_FOUND;
    }
    if (ok && l->success) {
        enum match_outcome o = erp_view_body(&v, l->success, l->success_raw, "login success", NULL);
        if (o == MATCH_ABORTED) {
            snprintf(why, sizeof(why), "login: the success pattern stopped: %s",
                     match_budget_reason(&v.budget) ? match_budget_reason(&v.budget) : "aborted");
            rc = APBOT_E_NET;
            report_now(s, &x, "failed", "success", why);
            goto out;
        }
        ok = o == MATCH_FOUND;
    }
    if (ok) {
        snprintf(why, sizeof(why), "logged in (HTTP %ld)", r->status);
        rc = APBOT_OK;
        login_keep(s, &v, &x, l->captures, l->n_captures);
        report_now(s, &x, "logged-in", NULL, why);
        goto out;
    }
    if (r->status == 429 || r->status >= 500) {
        snprintf(why, sizeof(why), "login answered HTTP %ld", r->status);
        rc = APBOT_E_NET;
        report_now(s, &x, "failed", NULL, why);
        goto out;
    }
    if (by_form && erp_view_session_gone(&v, s->flow)) {
        snprintf(why, sizeof(why), "the ERP answered the login with its login page (HTTP %ld)",
                 r->status);
        rc = APBOT_E_BUSY;
        report_now(s, &x, "session-expired", NULL, why);
        goto out;
    }
    snprintf(why, sizeof(why), "login failed: the answer lacks the success marker (HTTP %ld%s)",
             r->status,
             r->redirect_blocked ? ", a redirect off the ERP's origin was not followed" : "");
    rc = APBOT_E_SYSTEMIC;
    report_now(s, &x, "failed", NULL, why);
out:
    erp_view_done(&v);
    if (rc != APBOT_OK)
        apbot_fail(err, errlen, rc, "%s", why);
    return rc;
}

/* The login as one request (no form): GET or body-less POST, HTTP Basic riding on it. */
static int login_request(struct erp_session *s, const char *url, char *err, size_t errlen)
{
    const struct flow_login *l = &s->flow->login;
    const char *method = l->method && strcmp(l->method, "POST") == 0 ? "POST" : "GET";
    struct http_request req = {.method = method, .url = url};
    struct http_response r;
    memset(&r, 0, sizeof(r));
    int rc = http_request(s->http, &req, &r);
    if (rc != APBOT_OK) {
        struct erp_xch x;
        erp_xch_begin(s, &x, "login", method, url, NULL, NULL, apbot_strerror(rc));
        report_now(s, &x, "failed", NULL, "the login request was refused before sending");
        return apbot_fail(err, errlen, rc == APBOT_E_ORIGIN ? APBOT_E_SYSTEMIC : rc, "login: %s",
                          apbot_strerror(rc));
    }
    rc = login_answer(s, &r, method, url, NULL, NULL, err, errlen);
    http_response_done(&r);
    return rc;
}

/* Builds "action?name=value&..." for a GET form (a browser replaces the action's query). */
static char *form_get_url(const struct page_form *form)
{
    struct apbot_buf b;
    const char *q = strchr(form->action, '?');
    const char *hash = strchr(form->action, '#');
    size_t base = q ? (size_t)(q - form->action)
                    : (hash ? (size_t)(hash - form->action) : strlen(form->action));
    apbot_buf_init(&b, 65536);
    if (apbot_buf_add(&b, form->action, base) != APBOT_OK || apbot_buf_adds(&b, "?") != APBOT_OK)
        goto fail;
    for (size_t i = 0; i < form->n; i++) {
        char *k = http_escape(form->names[i]);
        char *v = http_escape(form->values[i] ? form->values[i] : "");
        int rc = (k && v) ? apbot_buf_addf(&b, "%s%s=%s", i ? "&" : "", k, v) : APBOT_E_INVAL;
        free(k);
        free(v);
        if (rc != APBOT_OK)
            goto fail;
    }
    return apbot_buf_steal(&b, NULL);
fail:
    apbot_buf_done(&b);
    return NULL;
}

char *erp_form_get_url(const struct page_form *form)
{
    return form_get_url(form);
}

/* The login by form: fetch the page, fill the form (hidden fields kept), submit it. */
static int login_form(struct erp_session *s, const char *url, char *err, size_t errlen)
{
    const struct flow *f = s->flow;
    const struct flow_login *l = &f->login;
    struct flow_vars vars;
    struct http_response r1, r2;
    struct page *p = NULL;
    struct page_form form;
    struct http_field *fields = NULL;
    struct erp_xch x;
    char *get_url = NULL;
    char why[400];
    bool secret = false;
    int rc;

    memset(&r1, 0, sizeof(r1));
    memset(&r2, 0, sizeof(r2));
    memset(&form, 0, sizeof(form));
    memset(&vars, 0, sizeof(vars));
    vars.user = s->user;
    vars.password = s->password;

    rc = http_get(s->http, url, &r1);
    if (rc != APBOT_OK) {
        erp_xch_begin(s, &x, "login", "GET", url, NULL, NULL, apbot_strerror(rc));
        report_now(s, &x, "failed", NULL, "the login page request was refused before sending");
        rc = apbot_fail(err, errlen, rc == APBOT_E_ORIGIN ? APBOT_E_SYSTEMIC : rc, "login page: %s",
                        apbot_strerror(rc));
        goto out;
    }
    if (r1.transport != HTTP_ANSWERED || !status_ok(r1.status)) {
        erp_xch_begin(s, &x, "login", "GET", url, &r1, NULL, NULL);
        if (r1.transport != HTTP_ANSWERED)
            snprintf(why, sizeof(why), "login page: %s (%s)", http_transport_name(r1.transport),
                     r1.truncated ? "answer too large" : r1.detail);
        else
            snprintf(why, sizeof(why), "login page answered HTTP %ld", r1.status);
        report_now(s, &x, "failed", NULL, why);
        /* A login page refused outright (401/403) is a refusal; anything else transient. */
        rc = apbot_fail(err, errlen,
                        r1.transport == HTTP_ANSWERED && (r1.status == 401 || r1.status == 403)
                            ? APBOT_E_SYSTEMIC
                            : APBOT_E_NET,
                        "%s", why);
        goto out;
    }
    rc = page_parse(r1.body, r1.body_len, r1.effective_url ? r1.effective_url : url, &p, err,
                    errlen);
    erp_xch_begin(s, &x, "login", "GET", url, &r1, rc == APBOT_OK ? p : NULL, NULL);
    if (rc != APBOT_OK) {
        report_now(s, &x, "failed", NULL, "the login page cannot be read");
        rc = apbot_fail(err, errlen, APBOT_E_NET, "login page cannot be read");
        goto out;
    }
    if (page_find_form(p, l->form.xpath, &form, NULL, 0) != APBOT_OK) {
        snprintf(why, sizeof(why), "login form not found (%s)", l->form.xpath);
        report_now(s, &x, "failed", NULL, why);
        rc = apbot_fail(err, errlen, APBOT_E_SYSTEMIC, "%s", why);
        goto out;
    }
    report_now(s, &x, "answered", NULL, "the login page with its form");
    /* Credentials go to the ERP's origin only, and never into a URL. */
    if (!form.action || !http_same_origin(s->base_url, form.action)) {
        rc = apbot_fail(err, errlen, APBOT_E_SYSTEMIC,
                        "login refused before sending: the login form's action leaves the "
                        "ERP's origin");
        erp_xch_begin(s, &x, "login", form.method, form.action, NULL, NULL,
                      "the form's action leaves the ERP's origin");
        report_now(s, &x, "refused", NULL, err);
        goto out;
    }
    for (size_t i = 0; i < l->form.n_fields; i++) {
        const struct flow_field *fd = &l->form.fields[i];
        char *value = NULL;
        rc = flow_expand(f, fd->value, &vars, &value, err, errlen);
        if (rc != APBOT_OK) {
            rc = apbot_fail(err, errlen, APBOT_E_SYSTEMIC, "login field '%s' cannot be filled",
                            fd->name);
            goto out;
        }
        secret = secret || carries_secret(s, fd->value, value);
        if (fd->option != FLOW_OPTION_DEFAULT)
            rc =
                page_form_select(&form, fd->name, value,
                                 fd->option == FLOW_OPTION_LABEL          ? PAGE_OPTION_LABEL
                                 : fd->option == FLOW_OPTION_LABEL_PREFIX ? PAGE_OPTION_LABEL_PREFIX
                                                                          : PAGE_OPTION_VALUE,
                                 NULL);
        else
            rc = page_form_set(&form, fd->name, value);
        wipe_free(value);
        if (rc != APBOT_OK) {
            rc = apbot_fail(err, errlen, APBOT_E_SYSTEMIC, "login form: field '%s' cannot be set",
                            fd->name);
            goto out;
        }
    }
    if (l->form.submit &&
        page_form_press(&form, l->form.submit, l->form.submit_value) != APBOT_OK) {
        rc = apbot_fail(err, errlen, APBOT_E_SYSTEMIC,
                        "login form: no single button '%s'%s%s%s (the form changed)",
                        l->form.submit, l->form.submit_value ? " of value '" : "",
                        l->form.submit_value ? l->form.submit_value : "",
                        l->form.submit_value ? "'" : "");
        goto out;
    }
    bool is_get = form.method && strcmp(form.method, "GET") == 0;
    if (is_get && secret) {
        rc = apbot_fail(err, errlen, APBOT_E_SYSTEMIC,
                        "login refused before sending: the login form's method is GET and a "
                        "field carries a secret (it would go into a URL)");
        erp_xch_begin(s, &x, "login", "GET", form.action, NULL, NULL,
                      "a secret would go into a URL");
        report_now(s, &x, "refused", NULL, err);
        goto out;
    }
    if (is_get) {
        get_url = form_get_url(&form);
        if (!get_url) {
            rc = apbot_fail(err, errlen, APBOT_E_SYSTEMIC, "login form too large");
            goto out;
        }
        struct http_request req = {.method = "GET", .url = get_url, .fresh = true};
        rc = http_request(s->http, &req, &r2);
    } else {
        fields = apbot_xcalloc(form.n ? form.n : 1, sizeof(*fields));
        for (size_t i = 0; i < form.n; i++) {
            fields[i].name = form.names[i];
            fields[i].value = form.values[i];
        }
        rc = http_post_form(s->http, form.action, fields, form.n, &r2);
    }
    if (rc != APBOT_OK) {
        erp_xch_begin(s, &x, "login", is_get ? "GET" : "POST", form.action, NULL, NULL,
                      apbot_strerror(rc));
        report_now(s, &x, "failed", NULL, "the login submit was refused before sending");
        rc = apbot_fail(err, errlen, rc == APBOT_E_ORIGIN ? APBOT_E_SYSTEMIC : rc, "login: %s",
                        apbot_strerror(rc));
        goto out;
    }
    rc = login_answer(s, &r2, is_get ? "GET" : "POST", form.action, &form, NULL, err, errlen);
out:
    free(fields);
    if (get_url)
        wipe_free(get_url);
    page_form_done(&form);
    page_free(p);
    http_response_done(&r1);
    http_response_done(&r2);
    return rc;
}

/* The login as a composed request (a JSON call): credentials in its body, only to the origin. */
static int login_send(struct erp_session *s, char *err, size_t errlen)
{
    const struct flow_login *l = &s->flow->login;
    struct flow_vars vars;
    struct erp_send sr;
    struct http_response r;
    char why[300];
    int rc;

    memset(&vars, 0, sizeof(vars));
    erp_vars_session(s, &vars, true);
    rc = erp_send_prepare(s, &l->send, &vars, false, &sr, why, sizeof(why));
    if (rc != APBOT_OK) {
        struct erp_xch x;
        erp_xch_begin(s, &x, "login", l->send.post ? "POST" : "GET", l->send.url, NULL, NULL, why);
        report_now(s, &x, "failed", NULL, "the login request cannot be composed");
        return apbot_fail(err, errlen, APBOT_E_SYSTEMIC, "login: %s", why);
    }
    memset(&r, 0, sizeof(r));
    rc = http_request(s->http, &sr.req, &r);
    if (rc != APBOT_OK) {
        struct erp_xch x;
        erp_xch_begin(s, &x, "login", sr.req.method, sr.url, NULL, NULL, apbot_strerror(rc));
        report_now(s, &x, "failed", NULL, "the login request was refused before sending");
        erp_send_done(&sr);
        return apbot_fail(err, errlen, rc == APBOT_E_ORIGIN ? APBOT_E_SYSTEMIC : rc, "login: %s",
                          apbot_strerror(rc));
    }
    rc = login_answer(s, &r, sr.req.method, sr.url, NULL, sr.body, err, errlen);
    http_response_done(&r);
    erp_send_done(&sr);
    return rc;
}

/*
 * One call after the login (<then>): it must answer with its success marker; its captures
 * join the session's. APBOT_OK; APBOT_E_NET (not answered, 429/5xx, the session gone, a pattern
 * over its budget); APBOT_E_SYSTEMIC (an answer without the success marker: the ERP is not what
 * the flow describes).
 */
static int login_then(struct erp_session *s, const struct flow_call *t, char *err, size_t errlen)
{
    struct flow_vars vars;
    struct erp_send sr;
    struct http_response r;
    struct erp_view v;
    struct erp_xch x;
    char step[80], why[400];
    int rc;

    snprintf(step, sizeof(step), "login %s", t->name ? t->name : "call");
    memset(&vars, 0, sizeof(vars));
    erp_vars_session(s, &vars, false);
    rc = erp_send_prepare(s, &t->send, &vars, true, &sr, why, sizeof(why));
    if (rc != APBOT_OK) {
        erp_xch_begin(s, &x, step, t->send.post ? "POST" : "GET", t->send.url, NULL, NULL, why);
        report_now(s, &x, "failed", NULL, "the request cannot be composed");
        return apbot_fail(err, errlen, APBOT_E_SYSTEMIC, "%s: %s", step, why);
    }
    memset(&r, 0, sizeof(r));
    rc = erp_request(s, &sr.req, &r);
    if (rc != APBOT_OK) {
        erp_xch_begin(s, &x, step, sr.req.method, sr.url, NULL, NULL, apbot_strerror(rc));
        report_now(s, &x, "failed", NULL, "refused before sending");
        erp_send_done(&sr);
        return apbot_fail(err, errlen, APBOT_E_NET, "%s: %s", step, apbot_strerror(rc));
    }
    erp_xch_begin(s, &x, step, sr.req.method, sr.url, &r, NULL, NULL);
    if (s->trace)
        erp_xch_body(s, &x, sr.body);
    erp_view_init(&v, s, &r);
    if (r.transport != HTTP_ANSWERED || r.status == 429 || r.status >= 500 ||
        erp_view_session_gone(&v, s->flow)) {
        snprintf(why, sizeof(why), "%s: %s", step,
                 r.transport != HTTP_ANSWERED ? http_transport_name(r.transport)
                                              : "answered without its result");
        rc = APBOT_E_NET;
    } else {
        bool ok = !t->success_status || match_status(t->success_status, r.status);
        enum match_outcome o = MATCH_FOUND;
        if (ok && t->success_json.pointer)
            o = view_json_cond(&v, &t->success_json, NULL);
        if (ok && o == MATCH_FOUND && t->success)
            o = erp_view_body(&v, t->success, t->success_raw, "then success", NULL);
        if (o == MATCH_ABORTED) {
            snprintf(why, sizeof(why), "%s: its success condition stopped", step);
            rc = APBOT_E_NET;
        } else if (!ok || o != MATCH_FOUND) {
            snprintf(why, sizeof(why), "%s: the answer (HTTP %ld) lacks its success marker", step,
                     r.status);
            rc = APBOT_E_SYSTEMIC;
        } else {
            login_keep(s, &v, &x, t->captures, t->n_captures);
            snprintf(why, sizeof(why), "%s: done", step);
            rc = APBOT_OK;
        }
    }
    report_now(s, &x, rc == APBOT_OK ? "answered" : "failed", NULL, why);
    erp_view_done(&v);
    http_response_done(&r);
    erp_send_done(&sr);
    if (rc != APBOT_OK)
        apbot_fail(err, errlen, rc, "%s", why);
    return rc;
}

/* One login attempt (see login_answer for the codes). */
static int login_once(struct erp_session *s, char *err, size_t errlen)
{
    const struct flow *f = s->flow;
    const struct flow_login *l = &f->login;
    struct flow_vars vars;
    char *tmpl_url = NULL, *url = NULL;
    int rc;

    s->logged_in = false;
    session_forget(s);
    if (!l->present) {
        s->logged_in = true;
        return APBOT_OK;
    }
    http_session_clear_cookies(s->http);
    if (l->send.present) {
        rc = login_send(s, err, errlen);
        for (size_t i = 0; rc == APBOT_OK && i < l->n_then; i++)
            rc = login_then(s, &l->then[i], err, errlen);
        if (rc == APBOT_OK)
            s->logged_in = true;
        return rc;
    }
    memset(&vars, 0, sizeof(vars));
    rc = flow_expand(f, l->get, &vars, &tmpl_url, err, errlen);
    if (rc != APBOT_OK)
        return apbot_fail(err, errlen, APBOT_E_SYSTEMIC, "the login URL cannot be expanded");
    url = erp_url(s, tmpl_url);
    free(tmpl_url);
    if (!url)
        return apbot_fail(err, errlen, APBOT_E_SYSTEMIC, "the login URL does not resolve");
    rc = l->has_form ? login_form(s, url, err, errlen) : login_request(s, url, err, errlen);
    free(url);
    for (size_t i = 0; rc == APBOT_OK && i < l->n_then; i++)
        rc = login_then(s, &l->then[i], err, errlen);
    if (rc == APBOT_OK)
        s->logged_in = true;
    return rc;
}

/*
 * Logs in. A login answered by the login page is tried again, up to ERP_LOGIN_ATTEMPTS times:
 * a session the ERP ended at once is transient, the same answer every time a refusal the flow
 * has no rule for (APBOT_E_SYSTEMIC). Every other refusal counts at once.
 */
int erp_login(struct erp_session *s, char *err, size_t errlen)
{
    int rc = APBOT_E_BUSY;
    s->refused = false;
    for (int i = 0; i < ERP_LOGIN_ATTEMPTS && rc == APBOT_E_BUSY; i++)
        rc = login_once(s, err, errlen);
    if (rc == APBOT_E_BUSY) {
        s->refused = true; /* the same answer every time: the credentials, most likely */
        rc = apbot_fail(err, errlen, APBOT_E_SYSTEMIC,
                        "login refused: the ERP answered the login with its login page %d times",
                        ERP_LOGIN_ATTEMPTS);
    }
    return rc;
}

/* ---- asking whether the ERP answers ------------------------------------------------------ */

int erp_probe(struct erp_session *s, char *transport, size_t len)
{
    const struct flow_login *l = &s->flow->login;
    char *url = erp_url(s, l->present && l->get ? l->get : "/");
    struct http_response r;
    int rc = APBOT_E_INVAL;

    transport[0] = '\0';
    memset(&r, 0, sizeof(r));
    if (url)
        rc = http_get(s->http, url, &r);
    if (rc == APBOT_OK) {
        snprintf(transport, len, "%s: %s", http_transport_name(r.transport), r.detail);
        erp_mask_into(s, transport, len);
    }
    http_response_done(&r);
    free(url);
    return rc;
}

/* ---- fetching a screen ------------------------------------------------------------------- */

void erp_read_done(struct erp_read *a)
{
    if (!a)
        return;
    page_free(a->page);
    jdoc_free(a->json);
    memset(a, 0, sizeof(*a));
}

int erp_fetch_req(struct erp_session *s, const char *step, const char *url,
                  const struct flow_send *send, const struct flow_vars *vars, bool json,
                  struct erp_read *ret, struct erp_xch *ret_x, struct erp_fetch_info *ret_info,
                  char *err, size_t errlen)
{
    int relogins = 0, retries = 0;
    int rc;

    memset(ret, 0, sizeof(*ret));
    memset(ret_info, 0, sizeof(*ret_info));
    ret_info->retry_after_s = -1;
    for (;;) {
        struct http_response r;
        struct erp_view v;
        struct erp_xch x;
        struct erp_send sr;
        struct page *p = NULL;
        struct jdoc *doc = NULL;
        char why[400];

        memset(&sr, 0, sizeof(sr));
        if (!s->logged_in) {
            rc = erp_login(s, err, errlen);
            if (rc == APBOT_E_NET && retries < s->retries) {
                retry_wait(retries++, -1);
                continue;
            }
            if (rc != APBOT_OK)
                return rc == APBOT_E_SYSTEMIC ? rc : APBOT_E_NET;
        }
        memset(&r, 0, sizeof(r));
        struct http_request req = {.method = "GET", .url = url, .reads_only = true};
        if (send) {
            /* expanded after the login: the session's captures are in it */
            struct flow_vars sv = vars ? *vars : (struct flow_vars){0};
            erp_vars_session(s, &sv, false);
            rc = erp_send_prepare(s, send, &sv, true, &sr, why, sizeof(why));
            if (rc != APBOT_OK) {
                erp_xch_begin(s, &x, step, send->post ? "POST" : "GET", send->url, NULL, NULL, why);
                report_now(s, &x, "failed", NULL, "the request cannot be composed");
                return apbot_fail(err, errlen, rc == APBOT_E_DATA ? rc : APBOT_E_NET, "%s: %s",
                                  step, why);
            }
            req = sr.req;
        }
        rc = erp_request(s, &req, &r);
        if (rc != APBOT_OK) {
            erp_xch_begin(s, &x, step, req.method, req.url, NULL, NULL, apbot_strerror(rc));
            if (s->trace)
                erp_xch_body(s, &x, sr.body);
            report_now(s, &x, "failed", NULL, "refused before sending");
            erp_send_done(&sr);
            return apbot_fail(err, errlen, APBOT_E_NET, "%s: %s", step, apbot_strerror(rc));
        }
        ret_info->status = r.status;
        ret_info->retry_after_s = r.retry_after_s;
        erp_view_init(&v, s, &r);
        if (r.transport != HTTP_ANSWERED) {
            snprintf(why, sizeof(why), "%s: %s (%s)", step, http_transport_name(r.transport),
                     r.truncated ? "answer larger than max-body-bytes" : r.detail);
            goto failed;
        }
        bool gone = erp_view_session_gone(&v, s->flow);
        if (v.aborted) {
            ret_info->match_aborted = true;
            snprintf(why, sizeof(why), "%s: %s stopped (%s): the answer is unknown", step,
                     v.aborted_what,
                     match_budget_reason(&v.budget) ? match_budget_reason(&v.budget) : "aborted");
            erp_xch_begin(s, &x, step, req.method, req.url, &r, NULL, NULL);
            report_now(s, &x, "failed", v.aborted_what, why);
            erp_view_done(&v);
            http_response_done(&r);
            erp_send_done(&sr);
            return apbot_fail(err, errlen, APBOT_E_NET, "%s", why);
        }
        if (gone) {
            erp_xch_begin(s, &x, step, req.method, req.url, &r, NULL, NULL);
            if (s->trace)
                erp_xch_body(s, &x, sr.body);
            report_now(s, &x, "session-expired", NULL, "a session marker matched");
            erp_view_done(&v);
            http_response_done(&r);
            erp_send_done(&sr);
            s->logged_in = false;
            if (relogins++ < ERP_RELOGIN_MAX)
                continue;
            return apbot_fail(err, errlen, APBOT_E_NET,
                              "%s: session expired again after %d fresh logins", step,
                              ERP_RELOGIN_MAX);
        }
        if (!status_ok(r.status)) {
            snprintf(why, sizeof(why), "%s: HTTP %ld", step, r.status);
            goto failed;
        }
        if (json) {
            struct jdoc_limits lim = jdoc_limits_for(r.body_len);
            char jwhy[200];
            if (jdoc_parse(r.body, r.body_len, &lim, &doc, jwhy, sizeof(jwhy)) != APBOT_OK) {
                snprintf(why, sizeof(why), "%s: the answer is not JSON (%s)", step, jwhy);
                goto failed;
            }
        } else if (page_parse(r.body, r.body_len, r.effective_url ? r.effective_url : req.url, &p,
                              NULL, 0) != APBOT_OK) {
            snprintf(why, sizeof(why), "%s: the page cannot be read", step);
            goto failed;
        }
        erp_xch_begin(s, ret_x, step, req.method, req.url, &r, p, NULL);
        if (s->trace)
            erp_xch_body(s, ret_x, sr.body);
        ret_info->answered = true;
        ret_info->date_ms = r.date_ms;
        ret_info->final_url = apbot_xstrdup(r.effective_url ? r.effective_url : req.url);
        erp_view_done(&v);
        http_response_done(&r);
        erp_send_done(&sr);
        ret->page = p;
        ret->json = doc;
        return APBOT_OK;
    failed:
        erp_xch_begin(s, &x, step, req.method, req.url, &r, NULL, NULL);
        if (s->trace)
            erp_xch_body(s, &x, sr.body);
        report_now(s, &x, "failed", NULL, why);
        erp_view_done(&v);
        erp_send_done(&sr);
        bool transient = r.transport != HTTP_ANSWERED || r.status == 429 || r.status >= 500;
        long ra = r.retry_after_s;
        http_response_done(&r);
        if (transient && retries < s->retries) {
            retry_wait(retries++, ra);
            continue;
        }
        return apbot_fail(err, errlen, APBOT_E_NET, "%s", why);
    }
}

int erp_fetch(struct erp_session *s, const char *step, const char *url, struct page **ret_page,
              struct erp_xch *ret_x, struct erp_fetch_info *ret_info, char *err, size_t errlen)
{
    struct erp_read a;
    int rc = erp_fetch_req(s, step, url, NULL, NULL, false, &a, ret_x, ret_info, err, errlen);
    if (rc == APBOT_OK)
        *ret_page = a.page;
    return rc;
}
