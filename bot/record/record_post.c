/*
 * record_post.c - the booking as the recording shows it: the committing request, its document
 * number, the steps before it and the follow-up steps after it.
 *
 * The committing request is the request that carries the invoice's values and whose answer
 * first shows a new document number: a value no earlier exchange held (not a value of the
 * sample, not a date) that later exchanges come back to (an approve naming it, the search and
 * the listing showing it). Its place in the answer becomes the success rule with (?<doc>...)
 * (the text around it on a page, the pointer in JSON). The steps before it are the forms that
 * led there (each submitted from the previous one's answer, the first from a page fetched by
 * GET); later requests that send the number and change something (approve, post, confirm) are
 * follow-up steps on ${doc}. What the person typed becomes fields: a value of the sample its
 * template, the reference the key, a choice among a credit note's options the document type; a
 * value the page already held stays the page's (hidden tokens, echoed values), and the lines
 * become <lines> or {"$each-line": ...}. Error rules the recording cannot show are open
 * decisions.
 */
#define _GNU_SOURCE /* strcasestr */
#include "record/record-int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "apbot/invoice.h"
#include "apbot/mem.h"
#include "web/jdoc.h"
#include "web/page.h"

/* ---- the ERP's writing of amounts, the document type ---------------------------------------- */

static void rec_learn_style(struct rec *r)
{
    size_t lines = r->inv->n_lines < REC_LINES_MAX ? r->inv->n_lines : REC_LINES_MAX;
    for (size_t i = 0; i < r->n_ex && !r->dec; i++) {
        const struct rec_ex *x = &r->ex[i];
        if (x->role == REC_ROLE_SKIPPED || x->values == 0)
            continue;
        const struct har_pair *p[2] = {x->query, x->form};
        size_t n[2] = {x->n_query, x->n_form};
        for (int s = 0; s < 2; s++)
            for (size_t k = 0; k < n[s]; k++)
                for (size_t line = 0; line <= lines; line++) {
                    struct rec_match m[REC_MATCH_MAX];
                    size_t c =
                        rec_values_find(&r->vals, p[s][k].value, line, false, m, REC_MATCH_MAX);
                    rec_values_style(m, c, &r->dec, &r->group);
                }
    }
}

static bool rec_is_credit(const char *s)
{
    static const char *const words[] = {"credit", "gutschrift", "avoir",      "abono",
                                        "storno", "nota de cr", "creditnota", "hyvitys"};
    for (size_t i = 0; s && i < sizeof(words) / sizeof(*words); i++)
        if (strcasestr(s, words[i]))
            return true;
    return false;
}

/*
 * The document type: a select of a recorded page that offers a credit note and of whose
 * options the recording sent one (the sample's type). Sets r->doctype_map and the value sent.
 */
bool rec_doctype_from(struct rec *r, const struct page_select *s, const char *sent)
{
    const struct page_option *credit = NULL, *other = NULL;
    size_t others = 0;
    bool sent_known = false;
    for (size_t i = 0; i < s->n_options; i++) {
        const struct page_option *o = &s->options[i];
        if (o->disabled || !o->value[0])
            continue;
        sent_known = sent_known || strcmp(o->value, sent) == 0;
        if (!credit && (rec_is_credit(o->label) || rec_is_credit(o->value)))
            credit = o;
        else {
            other = strcmp(o->value, sent) == 0 ? o : other;
            others++;
        }
    }
    if (!credit || !sent_known)
        return false;
    bool sample_credit = r->inv->doc_type == INVOICE_DOC_CREDIT_NOTE;
    const char *inv_v = NULL, *cn_v = NULL;
    if (!sample_credit && strcmp(credit->value, sent) != 0 && other) {
        inv_v = other->value;
        cn_v = credit->value;
    } else if (sample_credit && strcmp(credit->value, sent) == 0 && others == 1) {
        for (size_t i = 0; i < s->n_options; i++)
            if (!s->options[i].disabled && s->options[i].value[0] && &s->options[i] != credit)
                inv_v = s->options[i].value;
        cn_v = credit->value;
    }
    if (!inv_v || !cn_v || strpbrk(inv_v, ",=|}") || strpbrk(cn_v, ",=|}"))
        return false;
    char map[256];
    snprintf(map, sizeof(map), "|map:invoice=%s,credit-note=%s", inv_v, cn_v);
    free(r->doctype_map);
    r->doctype_map = apbot_xstrdup(map);
    r->doctype_value = sent;
    r->use_abs = true;
    rec_note(r,
             "document type: '%s' for an invoice, '%s' (\"%s\") for a credit note, as the "
             "select '%s' offers them; amounts are written positive",
             inv_v, cn_v, credit->label, s->name);
    return true;
}

/* A JSON string the booking sent that a recorded page's select offers beside a credit note
 * (the page a single-page client loaded holds its selects, named or not). */
static void rec_doctype_json(struct rec *r, const json_t *v, int depth)
{
    const char *k;
    json_t *m;
    size_t i;
    if (r->doctype_map || depth > 16)
        return;
    if (json_is_string(v) && !jdoc_number_text(v)) {
        const char *sent = json_string_value(v);
        if (*sent && strlen(sent) < 64 && !strchr(sent, ' '))
            rec_page_selects(r, rec_doctype_from, sent);
        return;
    }
    if (json_is_object(v))
        json_object_foreach((json_t *)v, k, m) rec_doctype_json(r, m, depth + 1);
    if (json_is_array(v))
        json_array_foreach((json_t *)v, i, m) rec_doctype_json(r, m, depth + 1);
}

/* ---- the document number ----------------------------------------------------------------------
 */

/* True when no exchange before `at` (of any kind, skipped too) holds the text as a token. */
static bool rec_unseen_before(const struct rec *r, size_t at, const char *tok)
{
    for (size_t i = 0; i < at; i++) {
        const struct har_entry *e = r->ex[i].e;
        if (rec_has_token(e->url, strlen(e->url), tok) ||
            rec_has_token(e->req_body, e->req_len, tok) || rec_has_token(e->body, e->body_len, tok))
            return false;
    }
    /* nor the request that got this answer */
    const struct har_entry *e = r->ex[at].e;
    return !rec_has_token(e->url, strlen(e->url), tok) &&
           !rec_has_token(e->req_body, e->req_len, tok);
}

/* How later exchanges come back to tok: 2 a request sends it, 1 an answer shows it, 0 none. */
static int rec_used_after(const struct rec *r, size_t at, const char *tok)
{
    int best = 0;
    for (size_t i = at + 1; i < r->n_ex && best < 2; i++) {
        const struct rec_ex *x = &r->ex[i];
        if (x->role == REC_ROLE_SKIPPED && x->e == x->ans)
            continue;
        if (rec_ex_carries(x, tok))
            best = 2;
        else if (rec_ex_shows(x, tok))
            best = best < 1 ? 1 : best;
    }
    return best;
}

static bool rec_datelike(const char *t)
{
    int d = 0, sep = 0;
    for (const char *p = t; *p; p++) {
        if (*p >= '0' && *p <= '9')
            d++;
        else if (*p == '.' || *p == '/' || *p == '-')
            sep++;
        else
            return false;
    }
    return sep == 2 && d >= 4 && d <= 8;
}

/* Could tok be a document number: a digit, no space, not a date, not a value of the sample. */
static bool rec_doc_candidate(const struct rec *r, const char *tok)
{
    size_t n = strlen(tok);
    if (n == 0 || n > 64 || !strpbrk(tok, "0123456789") || rec_datelike(tok) ||
        rec_values_is_sample(&r->vals, tok) || (r->key_ref && strstr(tok, r->key_ref)))
        return false;
    return true;
}

struct rec_doc {
    char text[72];
    char pointer[256]; /* JSON: where */
    size_t at;         /* offset in the page's text (HTML, plain) */
    int used;
    bool in_url; /* named only by the final URL after a redirect (/invoices/4711) */
};

/* The document number in the final URL of a redirected answer, where its page shows none
 * (POST /invoices -> 303 -> /invoices/4711 "Invoice was created."): a path segment or a query
 * value that is new here and that later exchanges come back to. */
static void rec_doc_url(const struct rec *r, size_t at, const char *url, struct rec_doc *best)
{
    const char *p = strstr(url, "://");
    p = p ? strchr(p + 3, '/') : url;
    while (p && *p && *p != '#') {
        size_t n = strcspn(p, "/?&=#;");
        if (n > 0 && n < sizeof(best->text)) {
            char tok[72];
            snprintf(tok, sizeof(tok), "%.*s", (int)n, p);
            if (rec_doc_candidate(r, tok) && rec_unseen_before(r, at, tok)) {
                int used = rec_used_after(r, at, tok);
                if (used > best->used) {
                    snprintf(best->text, sizeof(best->text), "%s", tok);
                    best->used = used;
                    best->in_url = true;
                }
            }
        }
        p += n;
        if (*p && *p != '#')
            p++;
    }
}

/* Tokens of a page's visible text (the rule text, outside tags) that are new here. */
#define REC_DOC_TOKENS 4096 /* distinct tokens of one answer weighed as a document number */

static void rec_doc_html(const struct rec *r, size_t at, const char *t, size_t len,
                         struct rec_doc *best)
{
    char **seen = apbot_xcalloc(REC_DOC_TOKENS, sizeof(*seen));
    size_t n_seen = 0;
    bool in_select = false;
    for (size_t i = 0; i < len;) {
        if (t[i] == '<') {
            const char *gt = memchr(t + i, '>', len - i);
            /* a select's options are the ERP's lists (accounts, currencies), never the news */
            if (len - i > 7 && strncasecmp(t + i, "<select", 7) == 0)
                in_select = true;
            else if (len - i > 8 && strncasecmp(t + i, "</select", 8) == 0)
                in_select = false;
            i = gt ? (size_t)(gt - t) + 1 : len;
            continue;
        }
        if (in_select) {
            i++;
            continue;
        }
        unsigned char c = (unsigned char)t[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < len &&
               ((t[j] >= '0' && t[j] <= '9') || (t[j] >= 'a' && t[j] <= 'z') ||
                (t[j] >= 'A' && t[j] <= 'Z') ||
                (strchr("-_/.,", t[j]) && j + 1 < len &&
                 ((t[j + 1] >= '0' && t[j + 1] <= '9') || (t[j + 1] >= 'a' && t[j + 1] <= 'z') ||
                  (t[j + 1] >= 'A' && t[j + 1] <= 'Z')))))
            j++;
        char tok[72];
        if (j - i < sizeof(tok) && n_seen < REC_DOC_TOKENS) {
            snprintf(tok, sizeof(tok), "%.*s", (int)(j - i), t + i);
            bool dup = false;
            for (size_t k = 0; k < n_seen && !dup; k++)
                dup = strcmp(seen[k], tok) == 0;
            if (!dup)
                seen[n_seen++] = apbot_xstrdup(tok);
            if (!dup && rec_doc_candidate(r, tok) && rec_unseen_before(r, at, tok)) {
                int used = rec_used_after(r, at, tok);
                if (used > best->used) {
                    snprintf(best->text, sizeof(best->text), "%s", tok);
                    best->at = i;
                    best->used = used;
                }
            }
        }
        i = j;
    }
    for (size_t k = 0; k < n_seen; k++)
        free(seen[k]);
    free(seen);
}

static void rec_doc_json(const struct rec *r, size_t at, const json_t *v, const json_t *req,
                         char *ptr, size_t plen, int depth, struct rec_doc *best)
{
    const char *k;
    json_t *m;
    size_t i, cur = strlen(ptr);
    if (depth > 8)
        return;
    switch (jdoc_kind(v)) {
    case JDOC_NUMBER:
    case JDOC_STRING: {
        const char *t = jdoc_number_text(v);
        t = t ? t : json_string_value(v);
        /* an echo of the request (a JSON-RPC id) names nothing new */
        const json_t *rv = req ? jdoc_at(req, ptr) : NULL;
        if (rv && json_equal((json_t *)rv, (json_t *)v))
            return;
        if (strchr(t, ' ') || !rec_doc_candidate(r, t) || !rec_unseen_before(r, at, t))
            return;
        int used = rec_used_after(r, at, t);
        if (used > best->used) {
            snprintf(best->text, sizeof(best->text), "%s", t);
            snprintf(best->pointer, sizeof(best->pointer), "%s", ptr);
            best->used = used;
        }
        return;
    }
    case JDOC_OBJECT:
        json_object_foreach((json_t *)v, k, m)
        {
            if (strchr(k, '/') || strchr(k, '~'))
                continue;
            snprintf(ptr + cur, plen - cur, "/%s", k);
            rec_doc_json(r, at, m, req, ptr, plen, depth + 1, best);
            ptr[cur] = '\0';
        }
        return;
    case JDOC_ARRAY:
        json_array_foreach((json_t *)v, i, m)
        {
            snprintf(ptr + cur, plen - cur, "/%zu", i);
            rec_doc_json(r, at, m, req, ptr, plen, depth + 1, best);
            ptr[cur] = '\0';
        }
        return;
    case JDOC_NULL:
    case JDOC_BOOL:
        return;
    }
}

/* The pattern that finds the document number where the answer shows it: the element around it
 * (by its id or class), the text before and after it, (?<doc>...). Heap. */
static char *rec_doc_pattern(const char *t, size_t len, size_t at, const char *doc)
{
    size_t dl = strlen(doc);
    /* the text before, back to the last tag */
    size_t s = at;
    while (s > 0 && t[s - 1] != '>')
        s--;
    size_t pre_from = s;
    if (at - pre_from > 60) {
        pre_from = at - 40;
        while (pre_from < at && t[pre_from] != ' ')
            pre_from++;
    }
    char tagpat[256] = "";
    if (s > 0 && pre_from == s) {
        /* the tag just before: "<span class="msgText">" */
        size_t lt = s - 1;
        while (lt > 0 && t[lt] != '<')
            lt--;
        char tag[512];
        snprintf(tag, sizeof(tag), "%.*s", (int)(s - lt), t + lt);
        char name[32] = "";
        size_t n = 0;
        const char *p = tag + 1;
        bool closing = *p == '/';
        if (closing)
            p++;
        while (n + 1 < sizeof(name) &&
               ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
            name[n++] = *p++;
        name[n] = '\0';
        if (n && closing) {
            snprintf(tagpat, sizeof(tagpat), "</%s>", name);
        } else if (n) {
            const char *attrs[] = {" id=\"", " class=\""};
            for (int a = 0; a < 2 && !tagpat[0]; a++) {
                const char *v = strstr(tag, attrs[a]);
                if (!v)
                    continue;
                v += strlen(attrs[a]);
                const char *e = strchr(v, '"');
                if (!e || e == v || e - v > 80)
                    continue;
                char *lit = rec_re_literal(v, (size_t)(e - v));
                snprintf(tagpat, sizeof(tagpat), "<%s\\b[^>]*\\b%.*s=\"%s\"[^>]*>", name,
                         (int)strlen(attrs[a]) - 3, attrs[a] + 1, lit);
                free(lit);
            }
            if (!tagpat[0])
                snprintf(tagpat, sizeof(tagpat), "<%s\\b[^>]*>", name);
        }
    }
    /* the text after, to the next tag */
    size_t e = at + dl;
    while (e < len && t[e] != '<' && e - (at + dl) < 60)
        e++;
    char *pre = rec_re_literal(t + pre_from, at - pre_from);
    char *val = rec_re_value(doc);
    char *post = rec_re_literal(t + at + dl, e - (at + dl));
    size_t n = strlen(tagpat) + strlen(pre) + strlen(val) + strlen(post) + 32;
    char *out = apbot_xmalloc(n);
    snprintf(out, n, "%s%s(?<doc>%s)%s%s", tagpat, pre, val, post,
             e < len && t[e] == '<' ? "<" : "");
    free(pre);
    free(val);
    free(post);
    return out;
}

/* ---- steps -------------------------------------------------------------------------------------
 */

struct rec_step {
    size_t ex[24]; /* its submissions (a repeated step: several), in order */
    size_t n_ex;
    struct rec_formref fr; /* the form of the first submission */
    size_t get_ex;         /* the exchange whose URL the step fetches first, or SIZE_MAX */
    bool json;             /* a composed request (<send>), no form */
    bool commits, followup, repeat;
    bool lines_from_zero; /* its line rows are numbered from 0: ${line.i} */
    char name[40];
    char button[128], button_value[256];
    bool button_value_needed;
};

static void rec_step_name(struct rec_step *s, const char *hint)
{
    rec_word(hint, "step", s->name, sizeof(s->name));
}

/* The pressed button of submission x on its form. */
static void rec_step_button(struct rec_step *s, const struct rec_ex *x)
{
    const struct har_pair *p = x->n_form ? x->form : x->query;
    size_t n = x->n_form ? x->n_form : x->n_query;
    for (size_t i = 0; i < n; i++)
        if (rec_form_is_button(&s->fr, p[i].name, p[i].value)) {
            snprintf(s->button, sizeof(s->button), "%s", p[i].name);
            snprintf(s->button_value, sizeof(s->button_value), "%s", p[i].value);
            s->button_value_needed = rec_form_buttons_named(&s->fr, p[i].name) > 1;
            return;
        }
}

/* What the step's button says: its value when that is a word ("Check", "approve"), else its
 * name. */
static const char *rec_button_word(const struct rec_step *s)
{
    const char *v = s->button_value;
    size_t n = strlen(v);
    bool word = n > 0 && n <= 24;
    for (size_t i = 0; i < n && word; i++)
        word = (v[i] >= 'a' && v[i] <= 'z') || (v[i] >= 'A' && v[i] <= 'Z') || v[i] == ' ' ||
               v[i] == '_' || v[i] == '-';
    return word ? v : s->button;
}

/* A field name with a line's number in it ("lineGl_2", "line[2].amount"): the template with
 * var (${line.n}, or ${line.i} where the rows count from 0) for the number that is k, or
 * false. */
static bool rec_line_name(const char *name, size_t k, const char *var, char *buf, size_t len)
{
    char num[24];
    snprintf(num, sizeof(num), "%zu", k);
    size_t nl = strlen(num);
    /* the last run of digits that is k */
    const char *hit = NULL;
    for (const char *p = name; *p; p++) {
        if (*p < '0' || *p > '9')
            continue;
        const char *q = p;
        while (*q >= '0' && *q <= '9')
            q++;
        if ((size_t)(q - p) == nl && strncmp(p, num, nl) == 0)
            hit = p;
        p = q - 1;
    }
    if (!hit)
        return false;
    snprintf(buf, len, "%.*s%s%s", (int)(hit - name), name, var, hit + nl);
    return true;
}

/* Does submission x number its line rows from 0 ("lines[0].amount", "inv:lines:0:account": JSF,
 * Spring, Rails, ASP.NET)? True when a field with 0 where a line's number stands carries a value
 * of the first line. Decided once per step, so that no field is read one way and its twin the
 * other. */
static bool rec_lines_from_zero(struct rec *r, const struct har_pair *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char lname[256];
        if (!rec_line_name(p[i].name, 0, "${line.i}", lname, sizeof(lname)))
            continue;
        struct rec_tpl t;
        rec_tpl_value(r, p[i].value, 1, false, NULL, &t);
        if (t.how == REC_TPL_VALUE && strstr(t.tmpl, "${line."))
            return true;
    }
    return false;
}

/* One field of a step: a name (a template) and its value's template. */
struct rec_field {
    char name[256];
    char tmpl[256];
    char option[16];
    bool line;         /* inside <lines> */
    bool todo;         /* an open decision: tmpl is ${todo.ID} */
    size_t lines_seen; /* line fields: the lines it was seen for */
    bool missing;      /* line fields: some line's control was not on the page */
};

struct rec_fields {
    struct rec_field f[96];
    size_t n;
    bool lines_missing, lines_repeat;
};

static struct rec_field *rec_field_get(struct rec_fields *fs, const char *name)
{
    for (size_t i = 0; i < fs->n; i++)
        if (strcmp(fs->f[i].name, name) == 0)
            return &fs->f[i];
    if (fs->n >= sizeof(fs->f) / sizeof(*fs->f))
        return NULL;
    struct rec_field *f = &fs->f[fs->n++];
    memset(f, 0, sizeof(*f));
    snprintf(f->name, sizeof(f->name), "%s", name);
    return f;
}

/* A value that looks like a token (long, letters and digits) and that the form's page holds
 * (in a script, a meta tag, another attribute): not typed by the person. */
static bool rec_one_time(struct rec *r, const struct rec_formref *fr, const char *value)
{
    size_t n = strlen(value);
    bool digit = false, alpha = false;
    if (n < 8 || n > 512)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = value[i];
        digit = digit || (c >= '0' && c <= '9');
        alpha = alpha || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              strchr("-_+/=.:", c)))
            return false;
    }
    const struct har_entry *page = r->ex[fr->page_ex].ans;
    return digit && alpha && rec_has_token(page->body, page->body_len, value);
}

/* What the phases of rec_step_fields share: submission x of step s, its form, the fields. */
struct rec_fctx {
    struct rec *r;
    struct rec_step *s;
    const struct rec_ex *x;
    struct rec_formref fr;
    struct rec_fields *fs;
    bool zero;            /* its line rows are numbered from 0 */
    const char *line_var; /* "${line.i}" or "${line.n}" */
    size_t nlines;        /* the sample's lines, at most REC_LINES_MAX */
};

/* A line's field: true when name holds a line's number and value is a value of that line (the
 * field then written as the template of every line), false when it is no line's. */
static bool rec_field_line(struct rec_fctx *fc, const char *name, const char *value,
                           const struct rec_control *c)
{
    struct rec *r = fc->r;
    for (size_t k = 1; k <= fc->nlines; k++) {
        char lname[256];
        const size_t num = fc->zero ? k - 1 : k, first_num = fc->zero ? 0 : 1;
        if (!rec_line_name(name, num, fc->line_var, lname, sizeof(lname)))
            continue;
        struct rec_tpl t;
        /* a line's control the page lacks (a script added it) has no attributes to read:
         * take the first line's (its twin) */
        struct rec_control c1 = *c;
        if (!c->in_page) {
            char first_name[256];
            snprintf(first_name, sizeof(first_name), "%s", name);
            char nums[24];
            snprintf(nums, sizeof(nums), "%zu", num);
            char *at = strstr(first_name, nums);
            if (at && num != first_num) {
                char alt[256];
                snprintf(alt, sizeof(alt), "%.*s%zu%s", (int)(at - first_name), first_name,
                         first_num, at + strlen(nums));
                rec_form_control(r, &fc->fr, alt, value, &c1);
                c1.in_page = false;
                c1.page_value = NULL;
            }
        }
        rec_tpl_value(r, value, k, false, &c1.sel, &t);
        if (t.how != REC_TPL_VALUE)
            continue;
        struct rec_field *f = rec_field_get(fc->fs, lname);
        if (!f)
            return true;
        f->line = true;
        f->missing = f->missing || !c->in_page;
        fc->fs->lines_missing = fc->fs->lines_missing || !c->in_page;
        if (f->tmpl[0] && (strcmp(f->tmpl, t.tmpl) != 0 || strcmp(f->option, t.option) != 0)) {
            char id[48], w[40];
            rec_word(lname, "line", w, sizeof(w));
            snprintf(id, sizeof(id), "line-%.30s", w);
            rec_todo_later(r, id, fc->x->e->index,
                           "field %s: line %zu's value is %s, another line's %s: which "
                           "template writes every line?",
                           lname, k, t.tmpl, f->tmpl);
            f->todo = true;
        } else {
            snprintf(f->tmpl, sizeof(f->tmpl), "%s", t.tmpl);
            snprintf(f->option, sizeof(f->option), "%s", t.option);
        }
        f->lines_seen++;
        return true;
    }
    return false;
}

/* A changed field whose value is no value of the sample: kept as typed in t, or an open
 * decision (${todo.*} in t) when it is no text, a one-time value, an id of the ERP's or typed. */
static void rec_field_literal(struct rec_fctx *fc, const char *name, const char *value,
                              const struct rec_control *c, struct rec_tpl *t)
{
    struct rec *r = fc->r;
    const struct rec_ex *x = fc->x;
    if (!rec_utf8_ok(value, strlen(value))) {
        char id[48], w[40];
        rec_word(name, "value", w, sizeof(w));
        snprintf(id, sizeof(id), "value-%.30s", w);
        rec_todo_later(r, id, x->e->index,
                       "field %s was sent as bytes that are no UTF-8 text (another "
                       "character set?): a flow holds UTF-8. Write what it must be "
                       "where ${todo.%s} stands.",
                       name, w);
        snprintf(t->tmpl, sizeof(t->tmpl), "${todo.%s}", w);
        return;
    }
    if (rec_one_time(r, &fc->fr, value)) {
        /* a token the page holds but not as this field's value (a script put it in):
         * taken from the page, never from the draft */
        char id[48], w[40];
        rec_word(name, "value", w, sizeof(w));
        snprintf(id, sizeof(id), "one-time-%.28s", w);
        rec_todo_later(r, id, x->e->index,
                       "field %s was sent as a value the page of entry %zu holds "
                       "elsewhere than in the field (a script put it there?): a "
                       "one-time value, which must come from the page and never from "
                       "the draft. Capture it from the answer of the step before "
                       "(<capture name=\"%s\" raw=\"true\">...(?<%s>...)...</capture>) "
                       "and write ${capture.%s} here, or leave the field to the page.",
                       name, r->ex[fc->fr.page_ex].e->index, w, w, w);
        snprintf(t->tmpl, sizeof(t->tmpl), "${todo.%s}", w);
    } else if (c->hidden &&
               (strspn(value, "0123456789") == strlen(value) || rec_key_is_entity(name))) {
        /* a script set it (an autocomplete's pick: supplier_id=77): an id of the
         * ERP's, which a constant would give every invoice */
        char id[48], w[40];
        rec_word(name, "value", w, sizeof(w));
        snprintf(id, sizeof(id), "id-%.30s", w);
        rec_todo_later(r, id, x->e->index,
                       "hidden field %s was set to '%s' by the page's script (a pick from "
                       "a list?), no value of the sample: an id of the ERP's? Kept as "
                       "recorded it would go with every invoice. Add a <resolve> (the "
                       "ERP's search of it by the sample's code; docs/writing-flows.md) "
                       "and write ${ref.NAME.COLUMN} where ${todo.%s} stands, or the "
                       "constant where it is one.",
                       name, value, w);
        snprintf(t->tmpl, sizeof(t->tmpl), "${todo.%s}", w);
    } else if (!c->select && !c->hidden && !c->password) {
        /* typed by the person, and no value of the sample in any form known: the
         * sample's value written another way (a date "16-Nov-2026", a vendor's
         * name cut short) would be booked as typed for every invoice */
        char id[48], w[40];
        rec_word(name, "value", w, sizeof(w));
        snprintf(id, sizeof(id), "typed-%.30s", w);
        rec_todo_later(r, id, x->e->index,
                       "field %s was typed as '%s', which is no value of the sample in "
                       "any form the recorder knows. The same for every invoice? Write "
                       "it where ${todo.%s} stands. A value of the invoice written "
                       "another way? Write its template (${invoice...} with the "
                       "formatter that writes it so).",
                       name, value, w);
        snprintf(t->tmpl, sizeof(t->tmpl), "${todo.%s}", w);
    }
}

/* The template of a field that is no line's, into t: false when the field is left out (the
 * page's own value, or an invoice value a follow-up step cannot know). */
static bool rec_field_tpl(struct rec_fctx *fc, const char *name, const char *value,
                          const struct rec_control *c, bool changed, struct rec_tpl *t)
{
    struct rec *r = fc->r;
    rec_tpl_value(r, value, 0, changed, &c->sel, t);
    switch (t->how) {
    case REC_TPL_LITERAL:
        if (!changed)
            return false;
        rec_field_literal(fc, name, value, c, t);
        break;
    case REC_TPL_DOC:
        if (!fc->s->followup) {
            snprintf(t->tmpl, sizeof(t->tmpl), "%s", value);
            break;
        }
        snprintf(t->tmpl, sizeof(t->tmpl), "${doc}");
        break;
    case REC_TPL_VALUE:
    case REC_TPL_KEY:
        if (fc->s->followup) {
            /* a follow-up step is re-run on DOC alone: only the page's values */
            if (!changed)
                return false;
            char id[48], w[40];
            rec_word(name, "field", w, sizeof(w));
            snprintf(id, sizeof(id), "followup-%.28s", w);
            rec_todo_later(r, id, fc->x->e->index,
                           "the follow-up step sets field %s to %s: a follow-up step is "
                           "re-run on the saved document alone (by ${doc}) and knows no "
                           "invoice value. Drop the field, or move it before the "
                           "committing step.",
                           name, t->tmpl);
            return false;
        }
        break;
    case REC_TPL_AMBIGUOUS: {
        char id[48], w[40];
        rec_word(name, "value", w, sizeof(w));
        snprintf(id, sizeof(id), "value-%.30s", w);
        rec_todo_later(r, id, fc->x->e->index,
                       "field %s: %s: which one is it? Replace "
                       "${todo.%s} with it",
                       name, t->why, w);
        snprintf(t->tmpl, sizeof(t->tmpl), "${todo.%s}", w);
        break;
    }
    }
    return true;
}

/* The fields the person set in submission x of step s (first: the step fetches its page, so
 * what the page held by default and matches a value is written too). */
static void rec_step_fields(struct rec *r, struct rec_step *s, size_t xi, bool first,
                            struct rec_fields *fs)
{
    struct rec_fctx fc = {.r = r, .s = s, .x = &r->ex[xi], .fs = fs};
    const struct rec_ex *x = fc.x;
    const struct har_pair *p = x->n_form ? x->form : x->query;
    size_t n = x->n_form ? x->n_form : x->n_query;
    fc.nlines = r->inv->n_lines < REC_LINES_MAX ? r->inv->n_lines : REC_LINES_MAX;

    if (!rec_form_find(r, xi, &fc.fr))
        return;
    fc.zero = rec_lines_from_zero(r, p, n);
    fc.line_var = fc.zero ? "${line.i}" : "${line.n}";
    if (fc.zero && !s->lines_from_zero) {
        s->lines_from_zero = true;
        rec_note(r, "step '%s': its line rows are numbered from 0 (${line.i} in their names)",
                 s->name[0] ? s->name : "?");
    }
    for (size_t i = 0; i < n; i++) {
        const char *name = p[i].name, *value = p[i].value;
        struct rec_control c;
        if (rec_form_is_button(&fc.fr, name, value) && strcmp(name, s->button) == 0)
            continue;
        rec_form_control(r, &fc.fr, name, value, &c);
        bool changed = !c.page_value || strcmp(c.page_value, value) != 0;

        if (c.hidden && !changed)
            continue; /* the page's own: a token, an echoed value */
        if (!first && !changed)
            continue; /* the page echoes what an earlier step wrote */
        /* the document type's select */
        if (c.select && r->doctype_map && r->doctype_value && !r->doctype_map_done &&
            strcmp(value, r->doctype_value) == 0) {
            struct rec_field *f = rec_field_get(fs, name);
            if (f) {
                snprintf(f->tmpl, sizeof(f->tmpl), "${invoice.doc_type%s}", r->doctype_map);
                f->option[0] = '\0';
            }
            continue;
        }
        /* a line's field: its number in the name, a value of that line */
        if (rec_field_line(&fc, name, value, &c))
            continue;

        struct rec_tpl t;
        if (!rec_field_tpl(&fc, name, value, &c, changed, &t))
            continue;
        struct rec_field *f = rec_field_get(fs, name);
        if (!f)
            continue;
        snprintf(f->tmpl, sizeof(f->tmpl), "%s", t.tmpl);
        snprintf(f->option, sizeof(f->option), "%s", t.option);
        if (t.how == REC_TPL_LITERAL)
            rec_note(r, "step '%s': field %s kept as typed: '%s' (no value of the sample)", s->name,
                     name, value);
    }
    rec_formref_done(&fc.fr);
}

static void rec_write_field(struct rec *r, struct apbot_buf *b, const struct rec_field *f,
                            const char *indent)
{
    rec_addf(r, b, "%s<field name=\"", indent);
    rec_addx(r, b, f->name);
    rec_add(r, b, "\"");
    if (f->option[0])
        rec_addf(r, b, " option=\"%s\"", f->option);
    rec_add(r, b, ">");
    rec_addx(r, b, f->tmpl);
    rec_add(r, b, "</field>\n");
}

/* The URL a step fetches its page from, templated (the document as ${doc|url}). Heap. */
static char *rec_step_get(struct rec *r, size_t gx)
{
    struct rec_url_subst sub[2];
    size_t n = 0;
    if (r->doc)
        sub[n++] = (struct rec_url_subst){r->doc, "${doc|url}"};
    if (r->key_ref)
        sub[n++] = (struct rec_url_subst){r->key_ref, "${key|url}"};
    return rec_url_template(r->ex[gx].path, sub, n);
}

/* Text of the answer only it shows (no other recorded answer has it): the success of a step
 * whose answer names no document. A pattern, heap, or NULL. */
static char *rec_unique_text(struct rec *r, size_t at)
{
    static const char *const msg[] = {"success", "info",   "message", "msg",     "notice",
                                      "alert",   "status", "ok",      "confirm", "result"};
    const struct rec_ex *x = &r->ex[at];
    const char *t = x->rule;
    size_t len = t ? strlen(t) : 0;
    char *best = NULL;
    int best_rank = 1000;

    for (size_t i = 0; i < len;) {
        if (t[i] != '>') {
            i++;
            continue;
        }
        size_t s = i + 1, e = s;
        while (e < len && t[e] != '<')
            e++;
        i = e;
        /* trim */
        size_t a = s, z = e;
        while (a < z && (t[a] == ' ' || t[a] == '\n' || t[a] == '\r' || t[a] == '\t'))
            a++;
        while (z > a &&
               (t[z - 1] == ' ' || t[z - 1] == '\n' || t[z - 1] == '\r' || t[z - 1] == '\t'))
            z--;
        if (z - a < 3 || z - a > 120)
            continue;
        char seg[128];
        snprintf(seg, sizeof(seg), "%.*s", (int)(z - a), t + a);
        bool letters = false;
        for (const char *p = seg; *p && !letters; p++)
            letters = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z');
        if (!letters || strchr(seg, '&') || rec_values_is_sample(&r->vals, seg) ||
            (r->doc && strstr(seg, r->doc)) || (r->key_ref && strstr(seg, r->key_ref)))
            continue;
        bool elsewhere = false;
        for (size_t k = 0; k < r->n_ex && !elsewhere; k++)
            if (k != at && r->ex[k].ans != x->ans)
                elsewhere =
                    memmem(r->ex[k].ans->body, r->ex[k].ans->body_len, seg, strlen(seg)) != NULL;
        if (elsewhere)
            continue;
        /* the element it is in */
        size_t lt = s - 1;
        while (lt > 0 && t[lt] != '<')
            lt--;
        char tag[256];
        snprintf(tag, sizeof(tag), "%.*s", (int)(s - lt < 255 ? s - lt : 255), t + lt);
        char name[24] = "";
        size_t n = 0;
        for (const char *p = tag + 1;
             n + 1 < sizeof(name) &&
             ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9'));
             p++)
            name[n++] = *p;
        name[n] = '\0';
        if (!n || tag[1] == '/' || strcasecmp(name, "title") == 0 ||
            strcasecmp(name, "option") == 0 || strcasecmp(name, "a") == 0)
            continue;
        int rank = 50;
        char tagpat[200];
        snprintf(tagpat, sizeof(tagpat), "<%s\\b[^>]*>", name);
        const char *attrs[] = {" class=\"", " id=\""};
        for (int ai = 0; ai < 2; ai++) {
            const char *v = strstr(tag, attrs[ai]);
            if (!v)
                continue;
            v += strlen(attrs[ai]);
            const char *q = strchr(v, '"');
            if (!q || q == v || q - v > 60)
                continue;
            char av[64];
            snprintf(av, sizeof(av), "%.*s", (int)(q - v), v);
            rank = 20;
            for (size_t m = 0; m < sizeof(msg) / sizeof(*msg); m++)
                if (strcasestr(av, msg[m]))
                    rank = (int)m;
            char *lit = rec_re_literal(av, strlen(av));
            snprintf(tagpat, sizeof(tagpat), "<%s\\b[^>]*\\b%.*s=\"%s\"[^>]*>", name,
                     (int)strlen(attrs[ai]) - 3, attrs[ai] + 1, lit);
            free(lit);
            break;
        }
        if (rank >= best_rank)
            continue;
        char *lit = rec_re_literal(seg, strlen(seg));
        size_t bl = strlen(tagpat) + strlen(lit) + 16;
        free(best);
        best = apbot_xmalloc(bl);
        snprintf(best, bl, "%s\\s*%s\\s*<", tagpat, lit);
        free(lit);
        best_rank = rank;
    }
    return best;
}

/* The rule that a JSON answer is the success it was: its members as recorded (not an echo of
 * the request), an object or array by being there. A value is kept as it was only where it is
 * the same for every invoice (a status word): one of the sample's values (or its key) by being
 * there, one with digits (the document's id or number, a date) by its shape, digits as \d+ -
 * the recorded 9123 would match no other invoice's answer. */
static void rec_json_success(struct rec *r, struct apbot_buf *b, size_t at)
{
    const struct rec_ex *x = &r->ex[at];
    const json_t *root = jdoc_root(x->jans), *req = x->jreq ? jdoc_root(x->jreq) : NULL;
    const char *k;
    json_t *m;
    json_object_foreach((json_t *)root, k, m)
    {
        const json_t *rv = req ? json_object_get(req, k) : NULL;
        if (rv && json_equal((json_t *)rv, m))
            continue; /* the request's id, echoed */
        if (strchr(k, '/') || strchr(k, '~'))
            continue;
        rec_add(r, b, "        <json pointer=\"/");
        rec_addx(r, b, k);
        rec_add(r, b, "\">");
        if (json_is_null(m) || json_is_boolean(m) ||
            (json_is_string(m) && strlen(json_string_value(m)) < 200)) {
            char *t = jdoc_text(m, 200);
            struct rec_tpl tt;
            rec_tpl_value(r, t ? t : "", 0, false, NULL, &tt);
            char *lit = NULL;
            if (tt.how == REC_TPL_LITERAL || tt.how == REC_TPL_DOC)
                lit = t && strpbrk(t, "0123456789") ? rec_re_value(t)
                                                    : rec_re_literal(t ? t : "", t ? strlen(t) : 0);
            if (lit) {
                rec_add(r, b, "^");
                rec_addx(r, b, lit);
                rec_add(r, b, "$");
            }
            free(lit);
            free(t);
        }
        rec_add(r, b, "</json>\n");
    }
}

/* ---- the post ------------------------------------------------------------------------------- */

static void rec_errors_todo(struct rec *r, struct apbot_buf *b, const char *indent,
                            const char *where, size_t entry, bool committing)
{
    char id[48];
    snprintf(id, sizeof(id), "errors-%s", where);
    rec_todo(r, b, indent, id, entry,
             "The recording shows no refusal here. What does the ERP answer when it refuses the "
             "invoice (a validation message) or is overloaded? Add a rule for each: "
             "<rule name=\"...\" outcome=\"rejected\">MESSAGE PATTERN with "
             "(?<reason>...)</rule>%s. An answer no rule knows is %s.",
             committing ? ", and what tells that the form was already used (outcome unknown)" : "",
             committing ? "unknown: reconciled by a lookup, never success"
                        : "an error that stops the step");
}

static void rec_write_step(struct rec *r, struct rec_step *s, size_t si, size_t n_steps,
                           bool saved_rule, const char *doc_rule)
{
    struct apbot_buf *b = &r->post;
    const struct rec_ex *x0 = &r->ex[s->ex[0]];

    rec_addf(r, b, "    <step name=\"%s\"", s->name);
    if (s->get_ex != SIZE_MAX) {
        char *get = rec_step_get(r, s->get_ex);
        rec_add(r, b, " get=\"");
        rec_addx(r, b, get);
        rec_add(r, b, "\"");
        free(get);
    }
    if (s->commits)
        rec_add(r, b, " commits=\"true\"");
    if (s->repeat)
        rec_add(r, b, " repeat=\"until-lines\"");
    rec_add(r, b, ">\n");

    if (s->json) {
        struct rec_jctx jc = {
            .at = s->ex[0], .lines = !s->followup, .resolves = !s->followup, .doc = s->followup};
        char *body = rec_json_body(r, &r->ex[s->ex[0]], &jc);
        char *url = rec_step_get(r, s->ex[0]);
        rec_add(r, b, "      <send url=\"");
        rec_addx(r, b, url);
        rec_addf(r, b, "\"%s>\n", strcmp(x0->e->method, "POST") == 0 ? "" : " method=\"GET\"");
        if (body) {
            rec_add(r, b, "        <json>");
            rec_addx(r, b, body);
            rec_add(r, b, "</json>\n");
        }
        rec_add(r, b, "      </send>\n");
        free(body);
        free(url);
    } else {
        struct rec_fields fs;
        memset(&fs, 0, sizeof(fs));
        bool first = s->get_ex != SIZE_MAX;
        for (size_t k = 0; k < s->n_ex; k++)
            rec_step_fields(r, s, s->ex[k], first, &fs);
        rec_add(r, b, "      <form xpath=\"");
        rec_addx(r, b, s->fr.xpath);
        rec_add(r, b, "\"");
        if (s->button[0]) {
            rec_add(r, b, " submit=\"");
            rec_addx(r, b, s->button);
            rec_add(r, b, "\"");
            if (s->button_value_needed) {
                rec_add(r, b, " submit-value=\"");
                rec_addx(r, b, s->button_value);
                rec_add(r, b, "\"");
            }
        }
        size_t n_line = 0;
        char names[400] = "";
        for (size_t i = 0; i < fs.n; i++) {
            n_line += fs.f[i].line;
            size_t l = strlen(names);
            if (l + strlen(fs.f[i].name) + 3 < sizeof(names))
                snprintf(names + l, sizeof(names) - l, "%s%s", l ? ", " : "", fs.f[i].name);
        }
        rec_note(r,
                 "step '%s': the form %s of entry %zu%s%s%s%s; %zu field%s set (%s), the rest "
                 "left to the page",
                 s->name, s->fr.xpath, r->ex[s->fr.page_ex].e->index,
                 s->button[0] ? ", button " : "", s->button[0] ? s->button : "",
                 s->button[0] ? "=" : "", s->button[0] ? s->button_value : "", fs.n,
                 fs.n == 1 ? "" : "s", fs.n ? names : "none");
        if (fs.n == 0) {
            rec_add(r, b, "/>\n");
        } else {
            rec_add(r, b, ">\n");
            for (size_t i = 0; i < fs.n; i++)
                if (!fs.f[i].line)
                    rec_write_field(r, b, &fs.f[i], "        ");
            if (n_line) {
                const char *missing = s->repeat ? "skip" : fs.lines_missing ? "add" : NULL;
                rec_add(r, b, "        <lines");
                if (missing)
                    rec_addf(r, b, " missing=\"%s\"", missing);
                rec_add(r, b, ">\n");
                for (size_t i = 0; i < fs.n; i++)
                    if (fs.f[i].line)
                        rec_write_field(r, b, &fs.f[i], "          ");
                rec_add(r, b, "        </lines>\n");
            }
            rec_add(r, b, "      </form>\n");
        }
    }
    rec_todo_flush(r, b, "      ");
    if (saved_rule && doc_rule) {
        rec_add(r, b, doc_rule);
    }
    if (si + 1 < n_steps) {
        rec_errors_todo(r, b, "      ", s->name, x0->e->index, s->commits);
        rec_addf(r, b,
                 "      <rule name=\"%s-overload\" outcome=\"not-sent\" "
                 "status=\"429,503\"/>\n",
                 s->name);
    }
    rec_add(r, b, "    </step>\n");
}

/* A step name not used yet. */
static void rec_unique_name(struct rec_step *steps, size_t n, struct rec_step *s)
{
    char base[40];
    snprintf(base, sizeof(base), "%s", s->name);
    for (size_t k = 2;; k++) {
        bool used = false;
        for (size_t i = 0; i < n && !used; i++)
            used = &steps[i] != s && strcmp(steps[i].name, s->name) == 0;
        if (!used)
            return;
        snprintf(s->name, sizeof(s->name), "%.30s_%zu", base, k);
    }
}

/* Names step s (one of steps[0..n)) by its button's word, else by the RPC method or the last
 * segment of the path x sent, made unique. */
static void rec_step_named(struct rec_step *steps, size_t n, struct rec_step *s,
                           const struct rec_ex *x)
{
    const char *hint = s->button[0] ? rec_button_word(s) : NULL;
    if (!hint) {
        const char *m = rec_ex_rpc_method(x);
        hint = m ? (strrchr(m, '.') ? strrchr(m, '.') + 1 : m)
                 : (strrchr(x->path, '/') ? strrchr(x->path, '/') + 1 : x->path);
    }
    rec_step_name(s, hint);
    rec_unique_name(steps, n, s);
}

/* What the phases of rec_post share: the steps of <post> and how they were found. */
struct rec_postctx {
    struct rec_step steps[16]; /* the steps in order: up to the commit, then the follow-ups */
    size_t n_steps;
    size_t chain[16]; /* the requests up to the commit, from the commit backwards */
    size_t n_chain;
    size_t first_get; /* the page the first form was fetched from, or SIZE_MAX */
};

/* The committing request: values of the sample sent, a new document number answered; a
 * request that writes (a POST, a call that is no read) first, a GET only when none does. True
 * with r->commit, r->doc and ret_doc (where the answer holds the number) set. */
static bool rec_post_commit(struct rec *r, struct rec_doc *ret_doc)
{
    for (int pass = 0; pass < 2 && r->commit == SIZE_MAX; pass++)
        for (size_t i = 0; i < r->n_ex && r->commit == SIZE_MAX; i++) {
            struct rec_ex *x = &r->ex[i];
            if (x->role != REC_ROLE_NONE || x->values < 2 || rec_ex_is_read(x) != (pass == 1))
                continue;
            memset(ret_doc, 0, sizeof(*ret_doc));
            if (x->json) {
                char ptr[256] = "";
                rec_doc_json(r, i, jdoc_root(x->jans), x->jreq ? jdoc_root(x->jreq) : NULL, ptr,
                             sizeof(ptr), 0, ret_doc);
            } else if (x->html && x->rule) {
                rec_doc_html(r, i, x->rule, strlen(x->rule), ret_doc);
            } else {
                size_t len = 0;
                const char *bd = rec_ex_body(x, &len);
                rec_doc_html(r, i, bd, len, ret_doc);
            }
            if (ret_doc->used == 0 && x->hops > 0)
                rec_doc_url(r, i, x->ans->url, ret_doc);
            if (ret_doc->used > 0) {
                r->commit = i;
                r->doc = apbot_xstrdup(ret_doc->text);
            }
        }
    return r->commit != SIZE_MAX;
}

/* The requests up to the committing one into pc->chain (each form from the answer of the one
 * before) and the page the first was fetched from; the document type's select on the way. */
static void rec_post_chain(struct rec *r, struct rec_postctx *pc)
{
    const struct rec_ex *cx = &r->ex[r->commit];
    size_t cur = r->commit;
    for (;;) {
        struct rec_formref fr;
        if (pc->n_chain >= 16)
            break;
        pc->chain[pc->n_chain++] = cur;
        if (!rec_form_find(r, cur, &fr))
            break;
        size_t pg = fr.page_ex;
        /* the doc type select, from the first form that has it */
        for (size_t s = 0; s < fr.form.n_selects && !r->doctype_map; s++) {
            const char *sent = rec_ex_field(&r->ex[cur], fr.form.selects[s].name);
            if (sent)
                (void)rec_doctype_from(r, &fr.form.selects[s], sent);
        }
        rec_formref_done(&fr);
        const struct rec_ex *p = &r->ex[pg];
        if (p->role == REC_ROLE_NONE && p->values > 0 && (p->n_form || p->n_query) &&
            strcmp(p->e->method, "POST") == 0) {
            cur = pg;
            continue;
        }
        pc->first_get = pg;
        break;
    }
    if (!r->doctype_map) {
        rec_note(r, "document type: no select of the recording offers a credit note");
        rec_todo_later(r, "doctype", cx->e->index,
                       "The recording books one invoice, and nothing in it offers a credit note "
                       "(no select with a credit note option). How does this ERP take a credit "
                       "note: a type field (write it as ${invoice.doc_type|map:invoice=...,"
                       "credit-note=...}), or amounts with their sign (drop |abs from the "
                       "amounts)? Until that is decided a credit note would go in as an invoice.");
    }
}

/* The steps of the chain, in order: the same form and button again is one repeated step. */
static void rec_post_steps(struct rec *r, struct rec_postctx *pc)
{
    /* the chain is from the commit backwards: steps in order, repeats merged */
    for (size_t k = pc->n_chain; k-- > 0;) {
        size_t xi = pc->chain[k];
        struct rec_ex *x = &r->ex[xi];
        struct rec_step *s = pc->n_steps ? &pc->steps[pc->n_steps - 1] : NULL;
        struct rec_step probe;
        memset(&probe, 0, sizeof(probe));
        probe.get_ex = SIZE_MAX;
        bool form = rec_form_find(r, xi, &probe.fr);
        probe.json = !form;
        if (form)
            rec_step_button(&probe, x);
        if (s && form && !s->json && xi != r->commit && strcmp(s->fr.xpath, probe.fr.xpath) == 0 &&
            strcmp(s->button, probe.button) == 0 &&
            strcmp(s->button_value, probe.button_value) == 0 && s->n_ex < 24) {
            /* the same form and button again (an "update" per line): one step, repeated */
            s->ex[s->n_ex++] = xi;
            s->repeat = true;
            rec_formref_done(&probe.fr);
            x->role = REC_ROLE_STEP;
            continue;
        }
        if (pc->n_steps >= 15) {
            rec_formref_done(&probe.fr);
            break;
        }
        pc->steps[pc->n_steps] = probe;
        s = &pc->steps[pc->n_steps++];
        s->ex[s->n_ex++] = xi;
        s->commits = xi == r->commit;
        if (k == pc->n_chain - 1 && form && pc->first_get != SIZE_MAX) {
            s->get_ex = pc->first_get;
            r->ex[pc->first_get].role = REC_ROLE_PAGE;
        } else if (!form) {
            s->get_ex = SIZE_MAX;
        }
        rec_step_named(pc->steps, pc->n_steps, s, x);
        if (!s->commits)
            x->role = REC_ROLE_STEP;
    }
    /* a repeated step only while its form lacked a line's controls */
    for (size_t i = 0; i < pc->n_steps; i++)
        if (pc->steps[i].repeat)
            rec_note(r,
                     "step '%s': submitted %zu times, one line more each time: repeated "
                     "until every line has its row (repeat=\"until-lines\")",
                     pc->steps[i].name, pc->steps[i].n_ex);
}

/* The follow-up steps: later writes that send the document number (each fetched by the
 * document's URL when it was not submitted from the answer of the one before). */
static void rec_post_followups(struct rec *r, struct rec_postctx *pc)
{
    for (size_t i = r->commit + 1; i < r->n_ex; i++) {
        struct rec_ex *x = &r->ex[i];
        if (x->role != REC_ROLE_NONE || rec_ex_is_read(x) || !rec_ex_carries(x, r->doc) ||
            pc->n_steps >= 15)
            continue;
        struct rec_step *s = &pc->steps[pc->n_steps++];
        memset(s, 0, sizeof(*s));
        s->get_ex = SIZE_MAX;
        s->followup = true;
        s->ex[s->n_ex++] = i;
        x->role = REC_ROLE_FOLLOWUP;
        bool form = rec_form_find(r, i, &s->fr);
        s->json = !form;
        if (form) {
            rec_step_button(s, x);
            size_t pg = s->fr.page_ex;
            bool after_prev = pg == r->commit;
            for (size_t j = 0; j < r->n_followups; j++)
                after_prev = after_prev || pg == r->followups[j];
            if (!after_prev || r->n_followups == 0) {
                /* fetched by the document's URL; the first follow-up step must be */
                if (rec_ex_carries(&r->ex[pg], r->doc) && strcmp(r->ex[pg].e->method, "GET") == 0) {
                    s->get_ex = pg;
                    if (r->ex[pg].role == REC_ROLE_NONE)
                        r->ex[pg].role = REC_ROLE_PAGE;
                } else {
                    rec_todo_later(r, "followup-page", x->e->index,
                                   "The follow-up step of entry %zu was submitted from the answer "
                                   "of entry %zu, which no URL with the document number fetches: "
                                   "give the step get=\"...${doc|url}...\", the page that shows "
                                   "the saved document (apbot runs follow-up steps on DOC alone).",
                                   x->e->index, r->ex[pg].e->index);
                }
            }
        }
        rec_step_named(pc->steps, pc->n_steps, s, x);
        if (r->n_followups < sizeof(r->followups) / sizeof(*r->followups))
            r->followups[r->n_followups++] = i;
        rec_note(r, "follow-up step '%s': entry %zu (%s %s) sends the document number", s->name,
                 x->e->index, x->e->method, x->path);
    }
}

/* The rule that reads the document number from the committing answer (its JSON, the
 * redirect's target or its text), into dr. */
static void rec_post_doc_rule(struct rec *r, const struct rec_doc *doc, struct apbot_buf *dr)
{
    const struct rec_ex *cx = &r->ex[r->commit];
    bool saved = r->n_followups > 0;
    const char *outcome = saved ? "saved" : "completed";
    const char *indent = saved ? "      " : "      ";
    if (cx->json) {
        char *val = rec_re_value(r->doc);
        rec_addf(r, dr, "%s<rule name=\"%s\" outcome=\"%s\" status=\"%d\">\n", indent,
                 saved ? "saved" : "posted", outcome, cx->ans->status);
        rec_addf(r, dr, "%s  <json pointer=\"", indent);
        rec_addx(r, dr, doc->pointer);
        rec_add(r, dr, "\">^(?&lt;doc&gt;");
        rec_addx(r, dr, val);
        rec_addf(r, dr, ")$</json>\n%s</rule>\n", indent);
        rec_note(r, "success: the answer's %s holds the document number (%s)", doc->pointer,
                 outcome);
        free(val);
    } else if (doc->in_url) {
        /* the redirect's target names it: the final URL, the number as its shape */
        const char *u = cx->ans->url + strlen(r->origin);
        const char *at = strstr(u, r->doc);
        char *pre = rec_re_literal(u, at ? (size_t)(at - u) : 0);
        char *val = rec_re_value(r->doc);
        char *post = at ? rec_re_literal(at + strlen(r->doc), strlen(at + strlen(r->doc)))
                        : apbot_xstrdup("");
        rec_addf(r, dr, "%s<rule name=\"%s\" outcome=\"%s\"", indent, saved ? "saved" : "posted",
                 outcome);
        if (cx->ans->status >= 200 && cx->ans->status < 300)
            rec_addf(r, dr, " status=\"%d\"", cx->ans->status);
        rec_add(r, dr, "\n");
        rec_addf(r, dr, "%s      url=\"", indent);
        rec_addx(r, dr, pre);
        rec_addx(r, dr, "(?<doc>");
        rec_addx(r, dr, val);
        rec_add(r, dr, ")");
        rec_addx(r, dr, post);
        rec_add(r, dr, "$\"/>\n");
        rec_note(
            r, "success: the redirect's target %s names the document (%s): url=\"%s(?<doc>%s)%s$\"",
            u, outcome, pre, val, post);
        free(pre);
        free(val);
        free(post);
    } else {
        const char *t = cx->html && cx->rule ? cx->rule : cx->ans->body;
        char *pat = rec_doc_pattern(t, strlen(t), doc->at, r->doc);
        rec_addf(r, dr, "%s<rule name=\"%s\" outcome=\"%s\"", indent, saved ? "saved" : "posted",
                 outcome);
        if (cx->ans->status >= 200 && cx->ans->status < 300)
            rec_addf(r, dr, " status=\"%d\"", cx->ans->status);
        rec_add(r, dr, "\n");
        rec_addf(r, dr, "%s  >", indent);
        rec_addx(r, dr, pat);
        rec_add(r, dr, "</rule>\n");
        rec_note(r, "success: %s (%s)", pat, outcome);
        free(pat);
    }
}

/* The rule that tells the last follow-up step worked: what only its answer shows (its JSON,
 * its redirect, a text of its page), or an open decision. */
static void rec_post_done_rule(struct rec *r)
{
    size_t last = r->followups[r->n_followups - 1];
    struct rec_ex *lx = &r->ex[last];
    if (lx->json && lx->jans) {
        rec_addf(r, &r->post,
                 "      <rule name=\"done\" outcome=\"completed\" "
                 "status=\"%d\">\n",
                 lx->ans->status);
        struct apbot_buf tmp;
        apbot_buf_init(&tmp, 64 * 1024);
        rec_json_success(r, &tmp, last);
        rec_add(r, &r->post, apbot_buf_str(&tmp));
        apbot_buf_done(&tmp);
        rec_add(r, &r->post, "      </rule>\n");
    } else {
        char *pat = lx->html ? rec_unique_text(r, last) : NULL;
        if (lx->hops > 0) {
            char url[1024];
            snprintf(url, sizeof(url), "%s", lx->ans->url + strlen(r->origin));
            char *lit = rec_re_literal(url, strlen(url));
            rec_addf(r, &r->post,
                     "      <rule name=\"done-redirect\" "
                     "outcome=\"completed\" status=\"%d\" url=\"",
                     lx->ans->status);
            rec_addx(r, &r->post, lit);
            rec_add(r, &r->post, "$\"/>\n");
            free(lit);
        }
        if (pat) {
            rec_addf(r, &r->post, "      <rule name=\"done\" outcome=\"completed\"");
            if (lx->ans->status >= 200 && lx->ans->status < 300)
                rec_addf(r, &r->post, " status=\"%d\"", lx->ans->status);
            rec_add(r, &r->post, "\n        >");
            rec_addx(r, &r->post, pat);
            rec_add(r, &r->post, "</rule>\n");
            rec_note(r, "finished: the answer to the last follow-up step shows %s", pat);
            free(pat);
        } else if (lx->hops == 0) {
            rec_todo(r, &r->post, "      ", "followup-success", lx->e->index,
                     "What does the answer to the last follow-up step (entry %zu) show when "
                     "it worked? Write <rule name=\"done\" outcome=\"completed\">PATTERN"
                     "</rule>.",
                     lx->e->index);
        }
    }
}

void rec_post(struct rec *r)
{
    struct rec_postctx pc = {.first_get = SIZE_MAX};
    struct rec_doc doc = {0};

    r->commit = SIZE_MAX;
    rec_learn_style(r);
    if (!rec_post_commit(r, &doc)) {
        rec_todo(r, &r->post, "  ", "post", 0,
                 "No request of the recording sent the sample's values and got a new document "
                 "number back (one that later requests or pages show again). Record the booking "
                 "of the sample invoice to the end (save, and approve where the ERP has that "
                 "step, then search for it), or write <post> by hand.");
        return;
    }
    struct rec_ex *cx = &r->ex[r->commit];
    cx->role = REC_ROLE_COMMIT;
    rec_note(r, "committing request: entry %zu (%s %s), its answer shows the new document %s",
             cx->e->index, cx->e->method, cx->path, r->doc);

    /* the document type, the reference the person typed */
    if (cx->jreq)
        rec_doctype_json(r, jdoc_root(cx->jreq), 0);

    rec_post_chain(r, &pc);
    rec_post_steps(r, &pc);
    rec_post_followups(r, &pc);

    /* the document number's rule */
    struct apbot_buf dr;
    apbot_buf_init(&dr, 64 * 1024);
    bool saved = r->n_followups > 0;
    rec_post_doc_rule(r, &doc, &dr);

    /* <post> */
    rec_add(r, &r->post, "  <post>\n");
    for (size_t i = 0; i < pc.n_steps; i++) {
        struct rec_step *s = &pc.steps[i];
        rec_write_step(r, s, i, pc.n_steps, s->commits && saved, apbot_buf_str(&dr));
    }
    rec_add(r, &r->post, "    <outcomes>\n");
    if (!saved)
        rec_add(r, &r->post, apbot_buf_str(&dr));
    else
        rec_post_done_rule(r); /* the last follow-up's answer: what only it shows */
    rec_errors_todo(r, &r->post, "      ", "outcomes",
                    r->ex[saved ? r->followups[r->n_followups - 1] : r->commit].e->index, !saved);
    rec_add(r, &r->post,
            "      <rule name=\"overload\" outcome=\"not-sent\" "
            "status=\"429,503\"/>\n");
    rec_add(r, &r->post, "    </outcomes>\n  </post>\n");
    apbot_buf_done(&dr);
    for (size_t i = 0; i < pc.n_steps; i++)
        rec_formref_done(&pc.steps[i].fr);
}
