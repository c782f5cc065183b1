/*
 * record_form.c - which form of which recorded page a submitted request came from, and what the
 * person changed in it.
 *
 * A browser submits a form as its fields: the recorder finds, among the HTML answers before
 * the request, the latest page with a form whose action and method are the request's and whose
 * controls hold the fields sent (a script may have added some: the lines an "Add line" button
 * makes). The form is read with the web module's own form reader (page_find_form), the one
 * `apbot run` fills, so a field equal to what the page already holds is what the page will hold
 * again (a hidden token, a value the ERP echoed), and only what the person typed or chose
 * becomes a <field>.
 */
#include "record/record-int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/mem.h"
#include "web/http.h"
#include "web/page.h"

/* The URL without its query and fragment, into buf. */
static void rec_strip_query(const char *url, char *buf, size_t len)
{
    snprintf(buf, len, "%s", url ? url : "");
    har_url_drop_session(buf); /* as the entries' URLs are read */
    buf[strcspn(buf, "?#")] = '\0';
}

/* An XPath string literal of s ('s' or "s"); false when s holds both quotes. */
static bool rec_xpath_str(const char *s, char *buf, size_t len)
{
    char q = strchr(s, '\'') ? '"' : '\'';
    if (strchr(s, q))
        return false;
    return (size_t)snprintf(buf, len, "%c%s%c", q, s, q) < len;
}

/* How many of the request's fields the form has (controls and buttons, by name). */
static size_t rec_form_overlap(const struct page_form *f, const struct rec_ex *x, size_t *ret_n)
{
    const struct har_pair *p = x->n_form ? x->form : x->query;
    size_t n = x->n_form ? x->n_form : x->n_query, have = 0;

    for (size_t i = 0; i < n; i++) {
        bool found = page_form_has(f, p[i].name);
        for (size_t b = 0; !found && b < f->n_buttons; b++)
            found = strcmp(f->buttons[b], p[i].name) == 0;
        have += found;
    }
    *ret_n = n;
    return have;
}

void rec_formref_done(struct rec_formref *fr)
{
    page_form_done(&fr->form);
    memset(fr, 0, sizeof(*fr));
}

/* The form of page_ex's answer at index (from 1), with the xpath already chosen. */
static bool rec_form_again(struct rec *r, size_t page_ex, int index, const char *xpath,
                           struct rec_formref *ret)
{
    struct page *pg = rec_ex_page(&r->ex[page_ex]);
    char xp[64], err[256];
    snprintf(xp, sizeof(xp), "(//form)[%d]", index);
    if (!pg || page_find_form(pg, xp, &ret->form, err, sizeof(err)) != APBOT_OK)
        return false;
    ret->page_ex = page_ex;
    ret->index = index;
    ret->found = true;
    snprintf(ret->xpath, sizeof(ret->xpath), "%s", xpath);
    return true;
}

static bool rec_form_search(struct rec *r, size_t at, struct rec_formref *ret);

bool rec_form_find(struct rec *r, size_t at, struct rec_formref *ret)
{
    struct rec_ex *x = &r->ex[at];
    memset(ret, 0, sizeof(*ret));
    if (x->form_known)
        return x->form_found && rec_form_again(r, x->form_page, x->form_index, x->form_xpath, ret);
    bool found = rec_form_search(r, at, ret);
    x->form_known = true;
    x->form_found = found;
    if (found) {
        x->form_page = ret->page_ex;
        x->form_index = ret->index;
        x->form_xpath = apbot_xstrdup(ret->xpath);
    }
    return found;
}

static bool rec_form_search(struct rec *r, size_t at, struct rec_formref *ret)
{
    const struct rec_ex *x = &r->ex[at];
    char want[HAR_TEXT_MAX + 1], err[256];
    bool post = strcmp(x->e->method, "POST") == 0;

    memset(ret, 0, sizeof(*ret));
    if (!post && strcmp(x->e->method, "GET") != 0)
        return false;
    if (!x->n_form && !x->n_query)
        return false;
    rec_strip_query(x->e->url, want, sizeof(want));
    /* the page is one of the last few the browser showed (bounded: a HAR may hold thousands) */
    size_t pages = 0;
    for (size_t k = at; k-- > 0 && pages < REC_FORM_LOOKBACK;) {
        struct rec_ex *p = &r->ex[k];
        if (p->role == REC_ROLE_SKIPPED || !p->html)
            continue;
        pages++;
        struct page *pg = rec_ex_page(p);
        if (!pg)
            continue;
        for (int i = 1; i <= 64; i++) {
            char xp[64], action[HAR_TEXT_MAX + 1];
            struct page_form f;
            size_t n = 0;
            snprintf(xp, sizeof(xp), "(//form)[%d]", i);
            if (page_find_form(pg, xp, &f, err, sizeof(err)) != APBOT_OK)
                break;
            rec_strip_query(f.action, action, sizeof(action));
            size_t have = rec_form_overlap(&f, x, &n);
            if (strcmp(action, want) != 0 || strcmp(f.method, x->e->method) != 0 || have == 0 ||
                have * 2 < n) {
                page_form_done(&f);
                continue;
            }
            ret->page_ex = k;
            ret->index = i;
            ret->form = f;
            ret->found = true;
            /* an XPath a person can read, if it finds this form first: its id, else its name */
            const char *attrs[] = {"id", "name", "action"};
            for (size_t a = 0; a < 3 && !ret->xpath[0]; a++) {
                char q[96], lit[512], try[600];
                snprintf(q, sizeof(q), "(//form)[%d]/@%s", i, attrs[a]);
                char *v = page_string(pg, q);
                if (v && rec_xpath_str(v, lit, sizeof(lit))) {
                    snprintf(try, sizeof(try), "//form[@%s=%s]", attrs[a], lit);
                    char pos[640];
                    snprintf(pos, sizeof(pos), "count(%s)", try);
                    char *cnt = page_string(pg, pos);
                    if (cnt && strcmp(cnt, "1") == 0)
                        snprintf(ret->xpath, sizeof(ret->xpath), "%s", try);
                    free(cnt);
                }
                free(v);
            }
            if (!ret->xpath[0])
                snprintf(ret->xpath, sizeof(ret->xpath), "(//form)[%d]", i);
            return true;
        }
    }
    return false;
}

const char *rec_form_default(const struct rec_formref *fr, const char *name)
{
    for (size_t i = 0; i < fr->form.n; i++)
        if (strcmp(fr->form.names[i], name) == 0)
            return fr->form.values[i];
    return NULL;
}

bool rec_form_is_button(const struct rec_formref *fr, const char *name, const char *value)
{
    for (size_t b = 0; b < fr->form.n_buttons; b++)
        if (strcmp(fr->form.buttons[b], name) == 0 &&
            (!value || strcmp(fr->form.button_values[b], value) == 0))
            return true;
    return false;
}

size_t rec_form_buttons_named(const struct rec_formref *fr, const char *name)
{
    size_t n = 0;
    for (size_t b = 0; b < fr->form.n_buttons; b++)
        n += strcmp(fr->form.buttons[b], name) == 0;
    return n;
}

const struct page_select *rec_form_select(const struct rec_formref *fr, const char *name)
{
    for (size_t i = 0; i < fr->form.n_selects; i++)
        if (strcmp(fr->form.selects[i].name, name) == 0)
            return &fr->form.selects[i];
    return NULL;
}

/* An attribute of the form's control `name` (an input, a textarea, a select). Heap or NULL. */
static char *rec_control_attr(struct rec *r, const struct rec_formref *fr, const char *name,
                              const char *attr)
{
    struct page *pg = rec_ex_page(&r->ex[fr->page_ex]);
    char lit[512], q[1024];
    if (!pg || !rec_xpath_str(name, lit, sizeof(lit)))
        return NULL;
    snprintf(q, sizeof(q), "(//form)[%d]//*[@name=%s]/@%s", fr->index, lit, attr);
    return page_string(pg, q);
}

void rec_form_control(struct rec *r, const struct rec_formref *fr, const char *name,
                      const char *value, struct rec_control *ret)
{
    memset(ret, 0, sizeof(*ret));
    ret->in_page = page_form_has(&fr->form, name);
    const struct page_select *s = rec_form_select(fr, name);
    if (s) {
        ret->sel.is_select = true;
        ret->select = s;
        for (size_t i = 0; i < s->n_options; i++)
            if (value && strcmp(s->options[i].value, value) == 0) {
                ret->sel.label = s->options[i].label;
                break;
            }
    }
    char *type = rec_control_attr(r, fr, name, "type");
    ret->password = type && strcasecmp(type, "password") == 0;
    ret->hidden = type && strcasecmp(type, "hidden") == 0;
    free(type);
    char *ml = rec_control_attr(r, fr, name, "maxlength");
    if (ml) {
        long v = strtol(ml, NULL, 10);
        ret->sel.maxlength = v > 0 && v < 100000 ? (int)v : 0;
        free(ml);
    }
    ret->page_value = rec_form_default(fr, name);
}
