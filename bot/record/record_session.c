/*
 * record_session.c - the login and the session, as the recording shows them.
 *
 * The password tells the login: the request that carries it (the value of APBOT_ERP_PASSWORD
 * when it is set, else a password control's value or a JSON member named for a password), or
 * HTTP Basic credentials in an Authorization header. Then: a login form becomes <login get>
 * with <form>, the user and password ${secret.*}; a JSON call becomes <login><send> with its
 * body templated; a request with Basic becomes <login get method> and <http-basic/>. What
 * keeps the session afterwards is read from the requests that follow: cookies the browser
 * sent (apbot's HTTP session keeps cookies itself: none is copied), a header whose value holds
 * a token the login answered (the header's template says how: the user, the token, base64),
 * a value an answer after the login gave that later calls echo (a context object: a <then>
 * call and ${session.NAME}). No recorded secret is ever written: only where it came from.
 */
#define _GNU_SOURCE /* strcasestr */
#include "record/record-int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "apbot/mem.h"
#include "web/jdoc.h"
#include "web/page.h"

/* Headers a browser sends by itself: never a session's. */
static bool rec_header_browser(const char *name)
{
    static const char *const std[] = {"accept",
                                      "accept-encoding",
                                      "accept-language",
                                      "cache-control",
                                      "connection",
                                      "content-length",
                                      "content-type",
                                      "cookie",
                                      "host",
                                      "origin",
                                      "pragma",
                                      "referer",
                                      "user-agent",
                                      "upgrade-insecure-requests",
                                      "dnt",
                                      "te",
                                      "priority",
                                      "if-none-match",
                                      "if-modified-since",
                                      "keep-alive",
                                      "authorization-basic"};
    if (strncasecmp(name, "sec-", 4) == 0 || strncasecmp(name, "if-", 3) == 0)
        return true;
    for (size_t i = 0; i < sizeof(std) / sizeof(*std); i++)
        if (strcasecmp(name, std[i]) == 0)
            return true;
    return false;
}

/* Decodes standard base64 text into buf (NUL-ended); false when it is not base64 of text. */
static bool rec_b64_text(const char *s, char *buf, size_t len)
{
    size_t n = 0;
    unsigned acc = 0;
    int bits = 0;
    for (const char *p = s; *p; p++) {
        int v;
        char c = *p;
        if (c == '=')
            break;
        if (c >= 'A' && c <= 'Z')
            v = c - 'A';
        else if (c >= 'a' && c <= 'z')
            v = c - 'a' + 26;
        else if (c >= '0' && c <= '9')
            v = c - '0' + 52;
        else if (c == '+' || c == '-')
            v = 62;
        else if (c == '/' || c == '_')
            v = 63;
        else
            return false;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            unsigned char o = (unsigned char)((acc >> bits) & 0xFF);
            if (n + 1 >= len || (o < 0x20 && o != '\t'))
                return false;
            buf[n++] = (char)o;
        }
    }
    buf[n] = '\0';
    return n > 0;
}

/* ---- session values ------------------------------------------------------------------------- */

const char *rec_session_value(struct rec *r, const json_t *v)
{
    static char tmpl[96]; /* the recorder is single-threaded: one value at a time */
    for (size_t i = 0; i < r->n_sess; i++) {
        const struct rec_sess *s = &r->sess[i];
        if (!s->in_body || !json_equal((json_t *)s->value, (json_t *)v))
            continue;
        bool raw = !json_is_string(s->value) || jdoc_number_text(s->value);
        snprintf(tmpl, sizeof(tmpl), "${session.%s%s}", s->name, raw ? "|json:raw" : "");
        return tmpl;
    }
    return NULL;
}

/* Registers a value the session keeps; returns it (an existing one for the same place). */
static struct rec_sess *rec_sess_add(struct rec *r, size_t ex, const char *pointer, const json_t *v,
                                     const char *name_hint)
{
    for (size_t i = 0; i < r->n_sess; i++)
        if (r->sess[i].ex == ex && strcmp(r->sess[i].pointer, pointer) == 0)
            return &r->sess[i];
    if (r->n_sess >= sizeof(r->sess) / sizeof(*r->sess))
        return NULL;
    struct rec_sess *s = &r->sess[r->n_sess++];
    memset(s, 0, sizeof(*s));
    s->ex = ex;
    snprintf(s->pointer, sizeof(s->pointer), "%s", pointer);
    s->value = v;
    s->text = jdoc_text(v, 0);
    char base[40];
    rec_word(name_hint, "value", base, sizeof(base));
    snprintf(s->name, sizeof(s->name), "%s", base);
    for (size_t i = 0, k = 2; i + 1 < r->n_sess; i++)
        if (strcmp(r->sess[i].name, s->name) == 0) {
            snprintf(s->name, sizeof(s->name), "%.30s_%zu", base, k++);
            i = (size_t)-1;
        }
    return s;
}

/* A token: long and made of token characters (a session id, not a word). */
static bool rec_tokenish(const char *s)
{
    size_t n = strlen(s);
    if (n < 12)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              strchr("-_.+/=~", c)))
            return false;
    }
    return true;
}

/* The scalar leaves of an answer (depth-bounded), for the login's captures. */
struct rec_leaf {
    char pointer[256];
    const json_t *v;
    char text[256];
};
static void rec_leaves(const json_t *v, char *ptr, size_t plen, int depth, struct rec_leaf *out,
                       size_t *n, size_t max)
{
    const char *k;
    json_t *m;
    size_t i, at = strlen(ptr);

    if (depth > 6 || *n >= max)
        return;
    switch (jdoc_kind(v)) {
    case JDOC_STRING:
    case JDOC_NUMBER: {
        const char *t = jdoc_number_text(v);
        t = t ? t : json_string_value(v);
        if (!*t || strlen(t) >= sizeof(out->text))
            return;
        snprintf(out[*n].pointer, sizeof(out[*n].pointer), "%s", ptr);
        out[*n].v = v;
        snprintf(out[*n].text, sizeof(out[*n].text), "%s", t);
        (*n)++;
        return;
    }
    case JDOC_OBJECT:
        json_object_foreach((json_t *)v, k, m)
        {
            if (strchr(k, '/') || strchr(k, '~'))
                continue;
            snprintf(ptr + at, plen - at, "/%s", k);
            rec_leaves(m, ptr, plen, depth + 1, out, n, max);
            ptr[at] = '\0';
        }
        return;
    case JDOC_ARRAY:
        json_array_foreach((json_t *)v, i, m)
        {
            snprintf(ptr + at, plen - at, "/%zu", i);
            rec_leaves(m, ptr, plen, depth + 1, out, n, max);
            ptr[at] = '\0';
        }
        return;
    case JDOC_NULL:
    case JDOC_BOOL:
        return;
    }
}

/* A name for a captured leaf: its member name, or its array's name and place; a token is a
 * "token". */
static void rec_leaf_name(const struct rec_leaf *l, char *buf, size_t len)
{
    if (rec_tokenish(l->text) && !jdoc_number_text(l->v)) {
        snprintf(buf, len, "token");
        return;
    }
    const char *last = strrchr(l->pointer, '/');
    const char *k = last ? last + 1 : l->pointer;
    bool index = *k >= '0' && *k <= '9';
    if (!index) {
        rec_word(k, "value", buf, len);
        return;
    }
    /* "/result/0": "result_0" */
    char parent[64] = "";
    if (last && last > l->pointer) {
        const char *p = last - 1;
        while (p > l->pointer && *p != '/')
            p--;
        snprintf(parent, sizeof(parent), "%.*s", (int)(last - p - 1), p + 1);
    }
    char w[48];
    rec_word(parent, "value", w, sizeof(w));
    snprintf(buf, len, "%.24s_%.8s", w, k);
}

/* ---- the login ---------------------------------------------------------------------------- */

/* Is this JSON member name one of a password? */
static bool rec_key_password(const char *k)
{
    return k && (strcasestr(k, "pass") || strcasecmp(k, "pwd") == 0 || strcasestr(k, "secret"));
}
static bool rec_key_user(const char *k)
{
    return k && (strcasestr(k, "user") || strcasestr(k, "login") || strcasecmp(k, "name") == 0 ||
                 strcasestr(k, "email") || strcasestr(k, "account"));
}

/* Finds in a JSON body the password (and the user): their recorded values. Without
 * APBOT_ERP_USER and no member named for a user, the user is the string just before the
 * password (["clerk", {"password": ...}]), a JSON-RPC envelope's members aside. */
static bool rec_json_creds(struct rec *r, const json_t *v, const char *key, int depth,
                           const char **ret_pw, const char **ret_user, const char **ret_before)
{
    const char *k;
    json_t *m;
    size_t i;
    if (depth > 8 || *ret_pw)
        return *ret_pw != NULL;
    if (json_is_string(v) && !jdoc_number_text(v)) {
        const char *s = json_string_value(v);
        if ((r->password && strcmp(s, r->password) == 0) ||
            (!r->password && rec_key_password(key) && *s)) {
            *ret_pw = s;
            if (!*ret_user && !r->user)
                *ret_user = *ret_before;
        } else if (!*ret_user && ((r->user && strcmp(s, r->user) == 0) ||
                                  (!r->user && rec_key_user(key) && *s))) {
            *ret_user = s;
        } else if (*s && !(key && (strcmp(key, "method") == 0 || strcmp(key, "jsonrpc") == 0 ||
                                   strcmp(key, "id") == 0 || strcmp(key, "version") == 0))) {
            *ret_before = s;
        }
        return *ret_pw != NULL;
    }
    if (json_is_object(v))
        json_object_foreach((json_t *)v, k, m)
            rec_json_creds(r, m, k, depth + 1, ret_pw, ret_user, ret_before);
    else if (json_is_array(v))
        json_array_foreach((json_t *)v, i, m)
            rec_json_creds(r, m, key, depth + 1, ret_pw, ret_user, ret_before);
    return *ret_pw != NULL;
}

/* The pattern of an element by its id: what a page after the login shows and the login page
 * does not (a logout link first: it is there only for a live session). */
static char *rec_success_pattern(struct rec *r, struct rec_ex *landing, struct rec_ex *before)
{
    static const char *const prefer[] = {"logout", "logoff",  "signout", "sign-out", "abmelden",
                                         "user",   "account", "welcome", "menu",     "home"};
    char best[256] = "", tag[32] = "";
    int best_rank = 1000;
    const char *t = landing->rule;

    (void)r;
    for (const char *p = t; p && (p = strstr(p, " id=\"")) != NULL; p++) {
        const char *v = p + 5, *e = strchr(v, '"');
        if (!e || e - v == 0 || e - v > 60)
            continue;
        char id[64];
        snprintf(id, sizeof(id), "%.*s", (int)(e - v), v);
        char needle[80];
        snprintf(needle, sizeof(needle), " id=\"%s\"", id);
        if (before && before->rule && strstr(before->rule, needle))
            continue;
        /* the element's name: back to its '<' */
        const char *lt = p;
        while (lt > t && *lt != '<')
            lt--;
        if (*lt != '<')
            continue;
        size_t tl = 0;
        while (tl + 1 < sizeof(tag) && lt[1 + tl] &&
               ((lt[1 + tl] >= 'a' && lt[1 + tl] <= 'z') ||
                (lt[1 + tl] >= 'A' && lt[1 + tl] <= 'Z') ||
                (lt[1 + tl] >= '0' && lt[1 + tl] <= '9')))
            tl++;
        if (!tl || memchr(lt, '>', (size_t)(p - lt)))
            continue;
        int rank = 100;
        for (size_t i = 0; i < sizeof(prefer) / sizeof(*prefer); i++)
            if (strcasestr(id, prefer[i]) && (int)i < rank)
                rank = (int)i;
        if (rank < best_rank) {
            char *lit = rec_re_literal(id, strlen(id));
            snprintf(best, sizeof(best), "<%.*s\\b[^>]*\\bid=\"%s\"", (int)tl, lt + 1, lit);
            free(lit);
            best_rank = rank;
        }
    }
    return best[0] ? apbot_xstrdup(best) : NULL;
}

/* The answer's first line, for a short plain-text answer ("Success"). */
static char *rec_first_line(const struct rec_ex *x)
{
    size_t len = 0;
    const char *b = rec_ex_body(x, &len);
    if (len == 0 || len > 512)
        return NULL;
    size_t n = strcspn(b, "\r\n");
    while (n > 0 && b[n - 1] == ' ')
        n--;
    if (n == 0)
        return NULL;
    char *lit = rec_re_literal(b, n);
    char *out = apbot_xmalloc(strlen(lit) + 2);
    snprintf(out, strlen(lit) + 2, "^%s", lit);
    free(lit);
    return out;
}

/* Does a later request send a cookie this answer set? Then it is what keeps the session. */
static bool rec_sets_session_cookie(struct rec *r, size_t at)
{
    const struct har_entry *a = r->ex[at].ans;
    for (size_t h = 0; h < a->n_resp_headers; h++) {
        if (strcasecmp(a->resp_headers[h].name, "set-cookie") != 0)
            continue;
        char name[128];
        size_t n = strcspn(a->resp_headers[h].value, "=;");
        snprintf(name, sizeof(name), "%.*s=", (int)n, a->resp_headers[h].value);
        for (size_t j = at + 1; j < r->n_ex; j++) {
            const char *c =
                har_header(r->ex[j].e->req_headers, r->ex[j].e->n_req_headers, "cookie");
            if (c && strstr(c, name))
                return true;
        }
    }
    return false;
}

static void rec_login_rules(struct rec *r, struct apbot_buf *b, size_t entry, bool basic)
{
    if (basic) {
        /* HTTP Basic: a refused password is 401 (RFC 9110, 15.5.2) */
        rec_add(r, b,
                "    <rule name=\"login-refused\" outcome=\"rejected\" "
                "status=\"401,403\"/>\n");
    } else {
        rec_todo(r, b, "    ", "login-refused", entry,
                 "The recording shows a login that worked. What does the ERP answer to a wrong "
                 "password? Add <rule name=\"login-refused\" outcome=\"rejected\">PATTERN</rule> "
                 "(its message; (?<reason>...) names it), so that apbot run stops at once instead "
                 "of trying again with a refused password.");
    }
    rec_add(r, b,
            "    <rule name=\"login-overload\" outcome=\"not-sent\" "
            "status=\"429,503\"/>\n");
}

/* A form login: the page with the form, then its submission. */
static void rec_login_form(struct rec *r, size_t at)
{
    struct rec_ex *x = &r->ex[at];
    struct rec_formref fr;
    struct apbot_buf *b = &r->login_x;

    if (!rec_form_find(r, at, &fr)) {
        rec_todo(r, b, "  ", "login", x->e->index,
                 "Entry %zu sent the password, but not from a form of a recorded page. Write the "
                 "login by hand (docs/writing-flows.md, <login>).",
                 x->e->index);
        return;
    }
    struct rec_ex *pg = &r->ex[fr.page_ex];
    pg->role = REC_ROLE_LOGIN_PAGE;
    x->role = REC_ROLE_LOGIN;
    r->login = at;
    char *path = apbot_xstrdup(pg->ans->url + strlen(r->origin));
    if (!path[0]) {
        free(path);
        path = apbot_xstrdup("/");
    }
    rec_add(r, b, "  <login get=\"");
    rec_addx(r, b, path);
    rec_add(r, b, "\">\n    <form xpath=\"");
    rec_addx(r, b, fr.xpath);
    rec_add(r, b, "\"");
    const struct har_pair *p = x->n_form ? x->form : x->query;
    size_t n = x->n_form ? x->n_form : x->n_query;
    for (size_t i = 0; i < n; i++)
        if (rec_form_is_button(&fr, p[i].name, p[i].value)) {
            rec_add(r, b, " submit=\"");
            rec_addx(r, b, p[i].name);
            if (rec_form_buttons_named(&fr, p[i].name) > 1) {
                rec_add(r, b, "\" submit-value=\"");
                rec_addx(r, b, p[i].value);
            }
            rec_add(r, b, "\"");
            break;
        }
    rec_add(r, b, ">\n");
    const char *user_field = NULL;
    for (size_t i = 0; i < n; i++) {
        struct rec_control c;
        if (rec_form_is_button(&fr, p[i].name, p[i].value))
            continue;
        rec_form_control(r, &fr, p[i].name, p[i].value, &c);
        const char *tmpl = NULL;
        if ((r->password && strcmp(p[i].value, r->password) == 0) || (!r->password && c.password))
            tmpl = "${secret.password}";
        else if ((r->user && strcmp(p[i].value, r->user) == 0) ||
                 (!r->user && !user_field && !c.hidden && !c.password && !c.select &&
                  (!c.page_value || strcmp(c.page_value, p[i].value) != 0)))
            tmpl = "${secret.user}";
        if (tmpl && strcmp(tmpl, "${secret.user}") == 0) {
            user_field = p[i].name;
            r->login_user = p[i].value;
        }
        if (!tmpl && c.page_value && strcmp(c.page_value, p[i].value) == 0)
            continue; /* kept as the page has it: a hidden token */
        rec_add(r, b, "      <field name=\"");
        rec_addx(r, b, p[i].name);
        rec_add(r, b, "\">");
        if (tmpl) {
            rec_add(r, b, tmpl);
        } else if (!rec_utf8_ok(p[i].value, strlen(p[i].value))) {
            rec_todo(r, b, "", "login-value", x->e->index,
                     "the login's field %s was sent as bytes that are no UTF-8 text: write "
                     "its value here",
                     p[i].name);
        } else {
            rec_addx(r, b, p[i].value);
            rec_note(r, "login: field '%s' kept as recorded ('%s')", p[i].name, p[i].value);
        }
        rec_add(r, b, "</field>\n");
    }
    rec_add(r, b, "    </form>\n");
    /* success: what the page after the login shows and the login page does not */
    char *pat = x->html ? rec_success_pattern(r, x, pg) : NULL;
    if (pat) {
        rec_add(r, b, "    <success>");
        rec_addx(r, b, pat);
        rec_add(r, b, "</success>\n");
        rec_note(r, "login: entry %zu (the form of entry %zu), success: %s", x->e->index,
                 pg->e->index, pat);
        free(pat);
    } else {
        rec_add(r, b, "    <success>");
        rec_todo(r, b, "", "login-success", x->e->index,
                 "What does the page after a good login show that the login page does not? "
                 "Write its pattern here.");
        rec_add(r, b, "</success>\n");
    }
    rec_login_rules(r, b, x->e->index, false);

    /* the session is gone when the login page comes back, or the ERP redirects to it */
    char *tag = NULL;
    char q[64];
    snprintf(q, sizeof(q), "(//form)[%d]/@id", fr.index);
    char *id = page_string(rec_ex_page(pg), q);
    const char *attr = "id";
    if (!id) {
        snprintf(q, sizeof(q), "(//form)[%d]/@name", fr.index);
        id = page_string(rec_ex_page(pg), q);
        attr = "name";
    }
    if (id) {
        char *lit = rec_re_literal(id, strlen(id));
        size_t len = strlen(lit) + 64;
        tag = apbot_xmalloc(len);
        snprintf(tag, len, "<form\\b[^>]*\\b%s=\"%s\"", attr, lit);
        free(lit);
        free(id);
        rec_add(r, &r->markers, "    <session-expired>");
        rec_addx(r, &r->markers, tag);
        rec_add(r, &r->markers, "</session-expired>\n");
        free(tag);
    }
    char pathonly[1024];
    snprintf(pathonly, sizeof(pathonly), "%s", path);
    pathonly[strcspn(pathonly, "?#")] = '\0';
    char *lit = rec_re_literal(pathonly, strlen(pathonly));
    rec_add(r, &r->markers, "    <session-expired status=\"3xx\" redirect=\"");
    rec_addx(r, &r->markers, lit);
    rec_add(r, &r->markers, "\"/>\n");
    free(lit);
    free(path);
    rec_formref_done(&fr);
}

/* Captures of the login's (or a call's) answer that later requests use: in headers (found by
 * rec_headers) or, for a token, in bodies. */
static void rec_answer_captures(struct rec *r, size_t at, struct apbot_buf *b, const char *indent)
{
    for (size_t i = 0; i < r->n_sess; i++) {
        const struct rec_sess *s = &r->sess[i];
        if (s->ex != at)
            continue;
        rec_addf(r, b, "%s<capture name=\"%s\" json=\"", indent, s->name);
        rec_addx(r, b, s->pointer);
        rec_addf(r, b, "\"%s/>\n", s->secret ? " secret=\"true\"" : "");
    }
}

/* A token a header sends that a page answered before (a CSRF token in a meta tag): a <then>
 * call after the login fetches that page again and captures it by the text before it;
 * ${session.NAME} into subbuf. */
static bool rec_page_token(struct rec *r, size_t before, const char *header, const char *tok,
                           char *subbuf, size_t len)
{
    if (!rec_tokenish(tok))
        return false;
    for (size_t y = before; y-- > 0;) {
        const struct rec_ex *x = &r->ex[y];
        /* the page it is on, fetched again by its final URL (a login's redirect to a home
         * page holding it is such a page) */
        if ((x->role == REC_ROLE_SKIPPED && x->ans == x->e) || x->json ||
            (strcmp(x->ans->method, "GET") != 0 && x->ans == x->e))
            continue;
        const char *b = x->ans->body;
        const char *at = rec_find(b, x->ans->body_len, tok, strlen(tok));
        if (!at)
            continue;
        /* the text before it, back to the line's start, at most 40 bytes, UTF-8 text only
         * (a pattern of the draft is UTF-8) */
        size_t ctx = 0;
        while (ctx < 40 && at - ctx > b && at[-(long)ctx - 1] != '\n')
            ctx++;
        while (ctx > 0 && !rec_utf8_ok(at - ctx, ctx))
            ctx--;
        if (ctx < 6 || r->n_pagecap >= sizeof(r->pagecap) / sizeof(*r->pagecap))
            return false;
        char *lit = rec_re_literal(at - ctx, ctx);
        char name[40];
        rec_word(header, "token", name, sizeof(name));
        for (size_t i = 0; i < r->n_sess; i++)
            if (strcmp(r->sess[i].name, name) == 0)
                snprintf(name, sizeof(name), "page_token");
        size_t n = strlen(lit) + strlen(name) + 32;
        char *re = apbot_xmalloc(n);
        snprintf(re, n, "%s(?<%s>[^\"'<>\\s]+)", lit, name);
        free(lit);
        struct rec_pagecap *pc = &r->pagecap[r->n_pagecap++];
        snprintf(pc->name, sizeof(pc->name), "%s", name);
        pc->ex = y;
        pc->re = re;
        snprintf(subbuf, len, "${session.%s}", name);
        rec_note(r,
                 "session: the header %s sends a token the page of entry %zu holds: a <then> "
                 "call after the login fetches that page and captures it, ${session.%s}",
                 header, x->e->index, name);
        return true;
    }
    return false;
}

/* The end of the login: the pages fetched after it for a token, then </login>. */
static void rec_login_close(struct rec *r)
{
    struct apbot_buf *b = &r->login_x;
    for (size_t i = 0; i < r->n_pagecap; i++) {
        const struct rec_pagecap *pc = &r->pagecap[i];
        rec_addf(r, b, "    <then name=\"%s\">\n      <send url=\"", pc->name);
        const char *url = r->ex[pc->ex].ans->url;
        size_t ol = strlen(r->origin);
        rec_addx(r, b, strncmp(url, r->origin, ol) == 0 && url[ol] ? url + ol : "/");
        rec_addf(r, b,
                 "\" method=\"GET\"/>\n      <capture name=\"%s\" raw=\"true\" "
                 "secret=\"true\">",
                 pc->name);
        rec_addx(r, b, pc->re);
        rec_add(r, b, "</capture>\n    </then>\n");
    }
    rec_add(r, b, "  </login>\n");
}

/* Headers of the requests after the login that carry what the session keeps. */
static void rec_headers(struct rec *r, size_t login)
{
    struct rec_leaf leaves[64];
    size_t nl = 0;
    char ptr[256] = "";
    const struct rec_ex *lx = &r->ex[login];
    if (lx->jans)
        rec_leaves(jdoc_root(lx->jans), ptr, sizeof(ptr), 0, leaves, &nl, 64);
    /* an echo of the request (a JSON-RPC id) is no value of the session */
    for (size_t l = 0; lx->jreq && l < nl;) {
        const json_t *rv = jdoc_at(jdoc_root(lx->jreq), leaves[l].pointer);
        if (rv && json_equal((json_t *)rv, (json_t *)leaves[l].v))
            leaves[l] = leaves[--nl];
        else
            l++;
    }

    const char *done[16];
    size_t n_done = 0;
    for (size_t j = login + 1; j < r->n_ex; j++) {
        const struct rec_ex *x = &r->ex[j];
        if (x->role == REC_ROLE_SKIPPED)
            continue;
        for (size_t h = 0; h < x->e->n_req_headers; h++) {
            const char *name = x->e->req_headers[h].name, *val = x->e->req_headers[h].value;
            bool seen = false;
            for (size_t d = 0; d < n_done && !seen; d++)
                seen = strcasecmp(done[d], name) == 0;
            if (seen || rec_header_browser(name) || n_done >= 16)
                continue;
            if (strcasecmp(name, "authorization") == 0 && strncasecmp(val, "basic ", 6) == 0)
                continue; /* <http-basic/> */
            /* "PREFIX base64(text)" or the text itself */
            char prefix[64] = "", decoded[1024];
            const char *text = val;
            bool b64 = false;
            const char *sp = strrchr(val, ' ');
            if (sp && (size_t)(sp - val) + 1 < sizeof(prefix) &&
                rec_b64_text(sp + 1, decoded, sizeof(decoded))) {
                snprintf(prefix, sizeof(prefix), "%.*s", (int)(sp - val) + 1, val);
                text = decoded;
                b64 = true;
            } else if (!sp && rec_b64_text(val, decoded, sizeof(decoded)) && strchr(decoded, ':')) {
                text = decoded;
                b64 = true;
            } else if (sp && (size_t)(sp - val) + 1 < sizeof(prefix)) {
                snprintf(prefix, sizeof(prefix), "%.*s", (int)(sp - val) + 1, val);
                text = sp + 1;
            }
            /* the text's parts: the user, the password, what the login answered */
            struct apbot_buf t;
            apbot_buf_init(&t, 4096);
            bool any = false;
            for (const char *p = text; *p;) {
                size_t k = strcspn(p, ":;,|/@ ");
                char part[512];
                snprintf(part, sizeof(part), "%.*s", (int)k, p);
                const char *sub = NULL;
                char subbuf[96];
                if (k && r->login_user && strcmp(part, r->login_user) == 0)
                    sub = "${secret.user}";
                else if (k && r->password && strcmp(part, r->password) == 0)
                    sub = "${secret.password}";
                for (size_t l = 0; !sub && k && l < nl; l++) {
                    if (strcmp(leaves[l].text, part) != 0)
                        continue;
                    char nm[40];
                    rec_leaf_name(&leaves[l], nm, sizeof(nm));
                    struct rec_sess *s = rec_sess_add(r, login, leaves[l].pointer, leaves[l].v, nm);
                    if (!s)
                        break;
                    s->secret = s->secret || rec_tokenish(leaves[l].text);
                    snprintf(subbuf, sizeof(subbuf), "${session.%s}", s->name);
                    sub = subbuf;
                }
                if (!sub && k >= 16 && rec_page_token(r, j, name, part, subbuf, sizeof(subbuf)))
                    sub = subbuf;
                for (size_t c = 0; !sub && k >= 8 && c < j; c++) {
                    /* a cookie's value echoed in a header (double-submit CSRF) */
                    const struct har_entry *a = r->ex[c].ans;
                    for (size_t hh = 0; hh < a->n_resp_headers && !sub; hh++) {
                        const char *sc = a->resp_headers[hh].value;
                        size_t nn = strcspn(sc, "=;");
                        if (strcasecmp(a->resp_headers[hh].name, "set-cookie") != 0 ||
                            sc[nn] != '=')
                            continue;
                        size_t vl = strcspn(sc + nn + 1, ";");
                        if (vl == k && strncmp(sc + nn + 1, part, k) == 0) {
                            char cn[64];
                            snprintf(cn, sizeof(cn), "%.*s", (int)(nn < 60 ? nn : 60), sc);
                            snprintf(subbuf, sizeof(subbuf), "${cookie.%s}", cn);
                            sub = subbuf;
                        }
                    }
                }
                any = any || sub;
                if (sub)
                    rec_add(r, &t, sub);
                else
                    rec_addn(r, &t, p, k);
                p += k;
                if (*p) {
                    rec_addn(r, &t, p, 1);
                    p++;
                }
            }
            done[n_done++] = name;
            if (any && !strstr(apbot_buf_str(&t), "${cookie.") && b64 == false &&
                strchr(apbot_buf_str(&t), '$') == NULL)
                any = false;
            if (any) {
                rec_add(r, &r->erp, "    <header name=\"");
                rec_addx(r, &r->erp, name);
                rec_add(r, &r->erp, "\"");
                if (prefix[0]) {
                    rec_add(r, &r->erp, " prefix=\"");
                    rec_addx(r, &r->erp, prefix);
                    rec_add(r, &r->erp, "\"");
                }
                if (b64)
                    rec_add(r, &r->erp, " encode=\"base64\"");
                rec_add(r, &r->erp, ">");
                rec_addx(r, &r->erp, apbot_buf_str(&t));
                rec_add(r, &r->erp, "</header>\n");
                rec_note(r, "session: every request after the login sends header %s: %s%s%s", name,
                         prefix, apbot_buf_str(&t), b64 ? " (base64)" : "");
            }
            explicit_bzero(decoded, sizeof(decoded));
            apbot_buf_wipe_done(&t);
        }
    }
    /* tokens of the login's answer that later bodies send */
    for (size_t l = 0; l < nl; l++) {
        if (!rec_tokenish(leaves[l].text))
            continue;
        for (size_t j = login + 1; j < r->n_ex; j++) {
            if (r->ex[j].role == REC_ROLE_SKIPPED || !rec_ex_carries(&r->ex[j], leaves[l].text))
                continue;
            char nm[40];
            rec_leaf_name(&leaves[l], nm, sizeof(nm));
            struct rec_sess *s = rec_sess_add(r, login, leaves[l].pointer, leaves[l].v, nm);
            if (s) {
                s->secret = true;
                s->in_body = true;
            }
            break;
        }
    }
}

/* True when some request after `after` sends a subtree equal to v in its JSON body. */
static bool rec_sent_later(struct rec *r, size_t after, const json_t *v)
{
    for (size_t j = after + 1; j < r->n_ex; j++) {
        const struct rec_ex *x = &r->ex[j];
        if (x->role == REC_ROLE_SKIPPED || !x->jreq)
            continue;
        /* a walk of its body */
        const json_t *stack[64];
        size_t sp = 0;
        stack[sp++] = jdoc_root(x->jreq);
        while (sp > 0) {
            const json_t *n = stack[--sp];
            if (json_equal((json_t *)n, (json_t *)v))
                return true;
            const char *k;
            json_t *m;
            size_t i;
            if (json_is_object(n))
                json_object_foreach((json_t *)n, k, m) if (sp < 64) stack[sp++] = m;
            if (json_is_array(n))
                json_array_foreach((json_t *)n, i, m) if (sp < 64) stack[sp++] = m;
        }
    }
    return false;
}

/* Calls after the login whose answer later calls echo (a context object): <then>. */
static void rec_then_calls(struct rec *r, size_t login)
{
    for (size_t y = login + 1; y < r->n_ex; y++) {
        struct rec_ex *x = &r->ex[y];
        if (x->role != REC_ROLE_NONE || !x->jans || x->values > 0)
            continue;
        /* the answer's objects of two members or more, a few levels down */
        const json_t *root = jdoc_root(x->jans);
        const char *k;
        json_t *m;
        const char *found_key = NULL;
        const json_t *found = NULL;
        if (json_is_object(root)) {
            json_object_foreach((json_t *)root, k, m)
            {
                if (json_is_object(m) && json_object_size(m) >= 2 && rec_sent_later(r, y, m)) {
                    found_key = k;
                    found = m;
                    break;
                }
            }
        }
        if (!found)
            continue;
        /* named for what the call asks ("get_preferences": preferences) */
        const char *meth = rec_ex_rpc_method(x);
        const char *last = meth ? strrchr(meth, '.') : strrchr(x->path, '/');
        last = last ? last + 1 : (meth ? meth : x->path);
        if (strncasecmp(last, "get_", 4) == 0 || strncasecmp(last, "get", 3) == 0)
            last += (last[3] == '_' ? 4 : 3);
        char name[40], ptr[128];
        rec_word(last, "context", name, sizeof(name));
        snprintf(ptr, sizeof(ptr), "/%s", found_key);
        struct rec_sess *s = rec_sess_add(r, y, ptr, found, name);
        if (!s)
            break;
        s->in_body = true;
        x->role = REC_ROLE_THEN;
        rec_note(r,
                 "session: entry %zu answered what later calls send back (%s): a <then> call "
                 "after the login, ${session.%s}",
                 x->e->index, ptr, s->name);
    }
}

/* The <then> calls and the login's captures, appended to the login being written. */
static void rec_write_then(struct rec *r, struct apbot_buf *b)
{
    for (size_t y = 0; y < r->n_ex; y++) {
        struct rec_ex *x = &r->ex[y];
        if (x->role != REC_ROLE_THEN)
            continue;
        char name[40];
        const struct rec_sess *s = NULL;
        for (size_t i = 0; i < r->n_sess && !s; i++)
            if (r->sess[i].ex == y)
                s = &r->sess[i];
        snprintf(name, sizeof(name), "%s", s ? s->name : "call");
        struct rec_jctx jc = {.at = y};
        /* its own answer is not sent back to itself: the body as recorded, session values of
         * the login's answer templated */
        char *body = rec_json_body(r, x, &jc);
        rec_addf(r, b, "    <then name=\"%s\">\n      <send url=\"", name);
        rec_addx(r, b, x->path);
        rec_addf(r, b, "\">\n        <json>");
        rec_addx(r, b, body ? body : "{}");
        rec_addf(r, b, "</json>\n      </send>\n");
        if (s) {
            rec_addf(r, b, "      <success status=\"%d\" json=\"", x->ans->status);
            rec_addx(r, b, s->pointer);
            rec_add(r, b, "\">^.+$</success>\n");
        }
        rec_answer_captures(r, y, b, "      ");
        rec_add(r, b, "    </then>\n");
        free(body);
    }
}

/* A JSON login: the call that sent the password. */
static void rec_login_json(struct rec *r, size_t at, const char *user)
{
    struct rec_ex *x = &r->ex[at];
    struct apbot_buf *b = &r->login_x;

    x->role = REC_ROLE_LOGIN;
    r->login = at;
    r->login_user = user;
    if (!user)
        rec_note(r,
                 "login: no user name recognised in entry %zu (set APBOT_ERP_USER to the one "
                 "you logged in with and record again, or write ${secret.user} into the body)",
                 x->e->index);
    rec_headers(r, at);
    rec_then_calls(r, at);

    struct rec_jctx jc = {.at = at, .login = true};
    char *body = rec_json_body(r, x, &jc);
    rec_add(r, b, "  <login>\n    <send url=\"");
    rec_addx(r, b, x->path);
    rec_add(r, b, "\">\n      <json>");
    rec_addx(r, b, body ? body : "{}");
    rec_add(r, b, "</json>\n    </send>\n");
    free(body);
    /* success: the token the session goes on with is there */
    const struct rec_sess *tok = NULL;
    for (size_t i = 0; i < r->n_sess; i++)
        if (r->sess[i].ex == at && (!tok || r->sess[i].secret))
            tok = &r->sess[i];
    if (tok) {
        rec_addf(r, b, "    <success status=\"%d\" json=\"", x->ans->status);
        rec_addx(r, b, tok->pointer);
        rec_add(r, b, "\">^.+$</success>\n");
    } else {
        rec_add(r, b, "    <success>");
        rec_todo(r, b, "", "login-success", x->e->index,
                 "Nothing of the login's answer is sent back later: what in it says the login "
                 "worked? Write <success json=\"POINTER\">PATTERN</success>.");
        rec_add(r, b, "</success>\n");
    }
    rec_answer_captures(r, at, b, "    ");
    rec_login_rules(r, b, x->e->index, false);
    rec_write_then(r, b);
    rec_add(r, &r->markers, "    <session-expired status=\"401\"/>\n");
    rec_note(r, "login: entry %zu, a JSON call (%s %s)", x->e->index, x->e->method, x->path);
}

/* A login that is one request with HTTP Basic: the one whose answer set the session cookie. */
static void rec_login_basic(struct rec *r)
{
    struct apbot_buf *b = &r->login_x;
    for (size_t i = 0; i < r->n_ex; i++) {
        struct rec_ex *x = &r->ex[i];
        if (x->role != REC_ROLE_NONE || x->values > 0)
            continue;
        if (!rec_sets_session_cookie(r, i))
            continue;
        x->role = REC_ROLE_LOGIN;
        r->login = i;
        rec_add(r, b, "  <login get=\"");
        rec_addx(r, b, x->path);
        rec_addf(r, b, "\" method=\"%s\">\n", strcmp(x->e->method, "POST") == 0 ? "POST" : "GET");
        char *pat = x->plain ? rec_first_line(x) : NULL;
        rec_addf(r, b, "    <success status=\"%d\">", x->ans->status);
        if (pat)
            rec_addx(r, b, pat);
        rec_add(r, b, "</success>\n");
        rec_login_rules(r, b, x->e->index, true);
        rec_note(r,
                 "login: entry %zu, one %s with HTTP Basic; the session cookie it set rides on "
                 "every later request (success: status %d%s%s)",
                 x->e->index, x->e->method, x->ans->status, pat ? " and " : "", pat ? pat : "");
        free(pat);
        char pathonly[1024];
        snprintf(pathonly, sizeof(pathonly), "%s", x->path);
        pathonly[strcspn(pathonly, "?#")] = '\0';
        char *lit = rec_re_literal(pathonly, strlen(pathonly));
        rec_add(r, &r->markers,
                "    <session-expired status=\"401\"/>\n"
                "    <session-expired status=\"3xx\" redirect=\"");
        rec_addx(r, &r->markers, lit);
        rec_add(r, &r->markers, "\"/>\n");
        free(lit);
        return;
    }
    rec_note(r, "login: none: HTTP Basic on every request is the session");
}

static bool rec_find_login(struct rec *r);

void rec_session(struct rec *r)
{
    r->login = SIZE_MAX;
    if (rec_find_login(r))
        return;
    if (r->password && !r->basic) {
        /* APBOT_ERP_PASSWORD is not the one recorded (changed since?): told by the field */
        rec_note(r, "login: APBOT_ERP_PASSWORD is in no request of the recording: the password "
                    "is the password field's value instead");
        r->password = NULL;
        if (rec_find_login(r))
            return;
    }
    rec_todo(r, &r->login_x, "  ", "login", 0,
             "No request of the recording carries the password (set APBOT_ERP_PASSWORD to the "
             "one you logged in with, or record the login too). Write <login> by hand, or leave "
             "this out if the ERP needs none.");
}

/* The login: true when found (and written). */
static bool rec_find_login(struct rec *r)
{
    /* HTTP Basic on the requests */
    for (size_t i = 0; i < r->n_ex && !r->basic; i++) {
        const struct rec_ex *x = &r->ex[i];
        if (x->role == REC_ROLE_SKIPPED)
            continue;
        const char *a = har_header(x->e->req_headers, x->e->n_req_headers, "authorization");
        char dec[512];
        if (!a || strncasecmp(a, "basic ", 6) != 0 || !rec_b64_text(a + 6, dec, sizeof(dec)))
            continue;
        char *colon = strchr(dec, ':');
        if (!colon || (r->password && strcmp(colon + 1, r->password) != 0)) {
            explicit_bzero(dec, sizeof(dec));
            continue;
        }
        r->basic = true;
        *colon = '\0';
        free(r->owned_user);
        r->owned_user = apbot_xstrdup(dec);
        r->login_user = r->owned_user;
        explicit_bzero(dec, sizeof(dec));
        rec_note(r, "session: HTTP Basic on every request (<http-basic/>)");
    }

    /* the request that carries the password */
    for (size_t i = 0; i < r->n_ex; i++) {
        struct rec_ex *x = &r->ex[i];
        if (x->role != REC_ROLE_NONE)
            continue;
        if (x->jreq) {
            const char *pw = NULL, *user = NULL, *before = NULL;
            if (rec_json_creds(r, jdoc_root(x->jreq), NULL, 0, &pw, &user, &before)) {
                if (!r->password)
                    r->password = pw;
                rec_login_json(r, i, user);
                rec_login_close(r);
                return true;
            }
            continue;
        }
        const struct har_pair *p = x->n_form ? x->form : x->query;
        size_t n = x->n_form ? x->n_form : x->n_query;
        bool pw = false;
        for (size_t k = 0; k < n && !pw; k++)
            pw = r->password && strcmp(p[k].value, r->password) == 0 && p[k].value[0];
        if (!pw && !r->password && n) {
            /* without APBOT_ERP_PASSWORD: a password control's value */
            struct rec_formref fr;
            if (rec_form_find(r, i, &fr)) {
                for (size_t k = 0; k < n && !pw; k++) {
                    struct rec_control c;
                    rec_form_control(r, &fr, p[k].name, p[k].value, &c);
                    if (c.password && p[k].value[0]) {
                        pw = true;
                        r->password = p[k].value;
                    }
                }
                rec_formref_done(&fr);
            }
        }
        if (pw) {
            rec_login_form(r, i);
            if (r->login != SIZE_MAX) {
                rec_headers(r, r->login);
                rec_login_close(r);
            }
            return true;
        }
    }
    if (r->basic) {
        rec_login_basic(r);
        if (r->login != SIZE_MAX) {
            rec_headers(r, r->login);
            rec_login_close(r);
        }
        return true;
    }
    return false;
}
