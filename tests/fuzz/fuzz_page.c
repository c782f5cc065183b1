/*
 * fuzz_page.c - libFuzzer target: an ERP page as the bot reads it. The input is the HTML:
 *   - page_parse, then every form the bundled flows look for (and "//form"): page_find_form,
 *     selecting each option by value, label and label prefix, page_form_set with option
 *     values and with values no option has, pressing every button (by name, by name and
 *     value), page_form_has/page_form_add; the lookup and list tables (page_rows), the
 *     marker XPaths (page_has, page_string), page_excerpt;
 *   - page_rule_text (what rules see), and every rule, marker, capture and success pattern of
 *     flows/acme.xml and flows/classic.xml run with match_run on it (raw ones on the page)
 *     under one match_budget for the page, as the bot does.
 *   - the input as a value a realistic page echoes (one of the seed pages, chosen by the
 *     input): HTML-escaped into a double- or single-quoted attribute, a comment, a textarea,
 *     JavaScript-escaped into a script string, or into a style comment, inserted before a start
 *     tag of the page.
 * Properties: the echoed value is blanked to the last byte and the rest of the page is blanked
 * exactly as without it (issue 10, item 6: rules match what the ERP said, not what it echoed);
 * a select accepts exactly its enabled options' values (page_form_set) and a value
 * chosen by value is that option; a press submits its button once and undoes the previous one;
 * the blanked text has the page's length and differs from it only by spaces; the budget never goes
 * negative and an aborted pattern says why; the excerpt stays within its bound and is
 * well-formed UTF-8 (evidence text).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>

#include <libxml/parser.h>

#include "apbot/flow.h"
#include "apbot/invoice.h"
#include "web/match.h"
#include "web/page.h"

#include "fuzz_input.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PAGE_URL "http://127.0.0.1:8080/erp/ap/invoice/new"
#define MAX_ITEMS 64

/* What the bundled flows use on a page, collected once. */
static struct flow *flows[2];
static struct {
    const struct match_re *re;
    bool raw;
} pats[MAX_ITEMS];
static size_t n_pats;
static const char *form_xpaths[MAX_ITEMS];
static size_t n_form_xpaths;
static const char *field_names[MAX_ITEMS];
static size_t n_field_names;
static const struct flow_table *tables[MAX_ITEMS];
static size_t n_tables;
static const char *xpaths[MAX_ITEMS]; /* empty, screen, next, detail columns */
static size_t n_xpaths;
static struct {
    const char *name, *value;
} presses[MAX_ITEMS];
static size_t n_presses;

/* Realistic pages the echo test inserts into: the seed pages (load_pages). */
#define MAX_PAGES 128
static struct {
    char *body, *blanked;
    size_t len;
    size_t *tags; /* offsets of start tags the echo may go before */
    size_t n_tags;
} pages[MAX_PAGES];
static size_t n_pages;

static void add_pat(const struct match_re *re, bool raw)
{
    if (re && n_pats < MAX_ITEMS) {
        pats[n_pats].re = re;
        pats[n_pats++].raw = raw;
    }
}

static void add_str(const char **arr, size_t *n, const char *s)
{
    if (!s || *n == MAX_ITEMS)
        return;
    for (size_t i = 0; i < *n; i++)
        if (strcmp(arr[i], s) == 0)
            return;
    arr[(*n)++] = s;
}

static void add_rules(const struct flow_rule *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        add_pat(r[i].body, r[i].raw);
        add_pat(r[i].url, true);
    }
}

static void add_form(const struct flow_form *fm)
{
    add_str(form_xpaths, &n_form_xpaths, fm->xpath);
    for (size_t i = 0; i < fm->n_fields; i++)
        if (!strstr(fm->fields[i].name, "${"))
            add_str(field_names, &n_field_names, fm->fields[i].name);
    if (fm->submit && n_presses < MAX_ITEMS) {
        presses[n_presses].name = fm->submit;
        presses[n_presses++].value = fm->submit_value;
    }
}

static void add_table(const struct flow_table *t)
{
    if (t->rows && n_tables < MAX_ITEMS)
        tables[n_tables++] = t;
    add_str(xpaths, &n_xpaths, t->empty);
    add_str(xpaths, &n_xpaths, t->screen);
    add_str(xpaths, &n_xpaths, t->next);
}

static void collect(const struct flow *f)
{
    for (size_t i = 0; i < f->n_session_expired; i++) {
        add_pat(f->session_expired[i].body, f->session_expired[i].raw);
        add_pat(f->session_expired[i].redirect, true);
    }
    add_pat(f->login.success, f->login.success_raw);
    add_rules(f->login.rules, f->login.n_rules);
    if (f->login.has_form)
        add_form(&f->login.form);
    for (size_t i = 0; i < f->n_steps; i++) {
        add_rules(f->steps[i].rules, f->steps[i].n_rules);
        for (size_t k = 0; k < f->steps[i].n_captures; k++)
            add_pat(f->steps[i].captures[k].re, f->steps[i].captures[k].raw);
        add_form(&f->steps[i].form);
    }
    add_rules(f->outcomes, f->n_outcomes);
    add_table(&f->lookup.table);
    add_table(&f->list.table);
    if (f->lookup.detail.present)
        for (size_t i = 0; i < f->lookup.detail.table.n_cols; i++)
            add_str(xpaths, &n_xpaths, f->lookup.detail.table.cols[i].xpath);
}

/* Start tags an echo can go before: '<' kept by page_rule_text (not inside a comment, script
 * or value) and naming an element that cannot sit in title, textarea or script. */
static void find_tags(size_t k)
{
    static const char *const safe[] = {"<tr",    "<td",       "<div",   "<p>",   "<p ",
                                       "<table", "<form",     "<input", "<span", "<h1",
                                       "<h2",    "<fieldset", "<ul"};
    pages[k].tags = calloc(pages[k].len + 1, sizeof(size_t));
    if (!pages[k].tags)
        abort();
    for (size_t i = 0; i < pages[k].len; i++) {
        if (pages[k].blanked[i] != '<')
            continue;
        for (size_t t = 0; t < sizeof(safe) / sizeof(safe[0]); t++)
            if (strncmp(pages[k].body + i, safe[t], strlen(safe[t])) == 0) {
                pages[k].tags[pages[k].n_tags++] = i;
                break;
            }
    }
}

/* Loads the .html files of dir, in name order (an input picks the same page everywhere). */
static void load_dir(const char *dir)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    if (n < 0) {
        fprintf(stderr, "fuzz_page: cannot open %s\n", dir);
        abort();
    }
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        size_t nl = strlen(name);
        if (nl < 5 || strcmp(name + nl - 5, ".html") != 0)
            continue;
        if (n_pages == MAX_PAGES) {
            fprintf(stderr, "fuzz_page: more than %d seed pages\n", MAX_PAGES);
            abort();
        }
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        FILE *fp = fopen(path, "rb");
        if (!fp)
            abort();
        char *buf = malloc(1 << 20);
        if (!buf)
            abort();
        size_t len = fread(buf, 1, (1 << 20) - 1, fp);
        fclose(fp);
        pages[n_pages].body = buf;
        pages[n_pages].len = len;
        pages[n_pages].blanked = page_rule_text(buf, len);
        find_tags(n_pages);
        if (pages[n_pages].n_tags) {
            n_pages++;
        } else { /* nothing to insert before (the garbled page) */
            free(pages[n_pages].body);
            free(pages[n_pages].blanked);
            free(pages[n_pages].tags);
            memset(&pages[n_pages], 0, sizeof(pages[n_pages]));
        }
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* The seed pages: the corpus's own (the classic screens, the regression inputs) and the test
 * data's pages, or those of the directories APBOT_FUZZ_PAGES lists (separated by ':'). */
static void load_pages(void)
{
    const char *env = getenv("APBOT_FUZZ_PAGES");
    if (env) {
        char *dirs = strdup(env), *save = NULL;
        if (!dirs)
            abort();
        for (char *dir = strtok_r(dirs, ":", &save); dir; dir = strtok_r(NULL, ":", &save))
            load_dir(dir);
        free(dirs);
    } else {
        load_dir(APBOT_FUZZ_CORPUS "/page");
        load_dir(APBOT_FUZZ_DATA_PAGES);
    }
    if (n_pages == 0) {
        fprintf(stderr, "fuzz_page: no seed page\n");
        abort();
    }
    fprintf(stderr, "fuzz_page: echoes into %zu seed pages\n", n_pages);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    xmlInitParser();
    const char *dir = getenv("APBOT_FUZZ_FLOWS");
    if (!dir)
        dir = APBOT_FUZZ_FLOWS;
    static const char *const names[2] = {"acme.xml", "classic.xml"};
    for (size_t i = 0; i < 2; i++) {
        char path[4096], err[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        if (flow_load(path, &flows[i], err, sizeof(err)) != APBOT_OK) {
            fprintf(stderr, "fuzz_page: %s\n", err); /* the harness would test nothing */
            abort();
        }
        collect(flows[i]);
    }
    load_pages();
    add_str(form_xpaths, &n_form_xpaths, "//form");
    static const char *const line_fields[] = {"account_1", "amount_1", "description_1",
                                              "account_2"};
    for (size_t i = 0; i < sizeof(line_fields) / sizeof(line_fields[0]); i++)
        add_str(field_names, &n_field_names, line_fields[i]);
    return 0;
}

/* Fields of the submission named name with value value. */
static size_t count_field(const struct page_form *f, const char *name, const char *value)
{
    size_t n = 0;
    for (size_t i = 0; i < f->n; i++)
        n += strcmp(f->names[i], name) == 0 && strcmp(f->values[i], value) == 0;
    return n;
}

/* Fields of the submission named name. */
static size_t count_name(const struct page_form *f, const char *name)
{
    size_t n = 0;
    for (size_t i = 0; i < f->n; i++)
        n += strcmp(f->names[i], name) == 0;
    return n;
}

static size_t count_control(const struct page_form *f, const char *name)
{
    size_t n = 0;
    for (size_t i = 0; i < f->n_controls; i++)
        n += strcmp(f->controls[i], name) == 0;
    return n;
}

static void form_invariants(const struct page_form *f)
{
    CHECK(f->action && f->method);
    CHECK(strcmp(f->method, "GET") == 0 || strcmp(f->method, "POST") == 0);
    CHECK(f->pressed <= f->n_buttons);
    for (size_t i = 0; i < f->n; i++)
        CHECK(f->names[i] && f->values[i]);
    for (size_t i = 0; i < f->n_buttons; i++)
        CHECK(f->buttons[i] && f->button_values[i]);
}

/* True when an enabled option of sel submits value. */
static bool offered(const struct page_select *sel, const char *value)
{
    for (size_t k = 0; k < sel->n_options; k++)
        if (!sel->options[k].disabled && strcmp(sel->options[k].value, value) == 0)
            return true;
    return false;
}

/* True when the page has exactly one element named name (the form's controls list a name
 * once, however many controls carry it: ask the document). */
static bool one_element_named(const struct page *p, const char *name)
{
    char xp[512];
    if (strchr(name, '\'') || strlen(name) > 400)
        return false;
    snprintf(xp, sizeof(xp), "count(//*[@name='%s'])", name);
    char *n = page_string(p, xp);
    bool one = n && strcmp(n, "1") == 0;
    free(n);
    return one;
}

/* The selects: every enabled option's value is accepted, nothing else is. */
static void exercise_selects(const struct page *p, struct page_form *f)
{
    for (size_t s = 0; s < f->n_selects && s < 8; s++) {
        const struct page_select *sel = &f->selects[s];
        /* Only a name that is this select alone (not also another control or select). */
        bool alone = count_control(f, sel->name) == 1 && one_element_named(p, sel->name);
        for (size_t k = 0; k < s && alone; k++)
            alone = strcmp(f->selects[k].name, sel->name) != 0;
        /* As the page came: what the select submits is what a browser could (an enabled
         * option: not disabled itself nor in a disabled optgroup). */
        for (size_t i = 0; alone && i < f->n; i++)
            if (strcmp(f->names[i], sel->name) == 0)
                CHECK(offered(sel, f->values[i]));
        for (size_t o = 0; o < sel->n_options && o < 16; o++) {
            const struct page_option *opt = &sel->options[o];
            bool enabled = false;
            for (size_t k = 0; k < sel->n_options; k++)
                enabled |=
                    !sel->options[k].disabled && strcmp(sel->options[k].value, opt->value) == 0;
            int rc = page_form_set(f, sel->name, opt->value);
            if (alone)
                CHECK(enabled ? rc == APBOT_OK : rc == APBOT_E_DATA);
            if (alone && rc == APBOT_OK) /* one value per name after a set */
                CHECK(count_field(f, sel->name, opt->value) == 1 && count_name(f, sel->name) == 1);
            const struct page_option *chosen = NULL;
            rc = page_form_select(f, sel->name, opt->value, PAGE_OPTION_VALUE, &chosen);
            if (alone) {
                CHECK(enabled ? rc == APBOT_OK : rc == APBOT_E_DATA);
                if (rc == APBOT_OK)
                    CHECK(chosen && strcmp(chosen->value, opt->value) == 0 && !chosen->disabled);
            }
            chosen = NULL;
            rc = page_form_select(f, sel->name, opt->label, PAGE_OPTION_LABEL, &chosen);
            CHECK(rc == APBOT_OK || rc == APBOT_E_DATA || rc == APBOT_E_CONFLICT ||
                  rc == APBOT_E_INVAL);
            if (rc == APBOT_OK && alone)
                CHECK(chosen && !chosen->disabled && strcmp(chosen->label, opt->label) == 0);
            char prefix[4] = "";
            snprintf(prefix, sizeof(prefix), "%s", opt->label);
            rc = page_form_select(f, sel->name, prefix, PAGE_OPTION_LABEL_PREFIX, NULL);
            CHECK(rc == APBOT_OK || rc == APBOT_E_DATA || rc == APBOT_E_CONFLICT ||
                  rc == APBOT_E_INVAL);
        }
        if (alone) {
            /* A value no option has: refused, never another option. */
            static const char odd[] = "\x01no such option\x01";
            CHECK(page_form_set(f, sel->name, odd) == APBOT_E_DATA);
            CHECK(count_field(f, sel->name, odd) == 0);
        }
    }
}

/* Presses: a pressed button is submitted once; pressing another undoes it. */
static void exercise_buttons(struct page_form *f)
{
    for (size_t b = 0; b < f->n_buttons && b < 8; b++) {
        const char *name = f->buttons[b], *value = f->button_values[b];
        if (f->button_image[b])
            continue;
        size_t before = count_field(f, name, value);
        bool was_pressed = f->pressed && strcmp(f->buttons[f->pressed - 1], name) == 0 &&
                           strcmp(f->button_values[f->pressed - 1], value) == 0 &&
                           !f->button_image[f->pressed - 1];
        int rc = page_form_press(f, name, value);
        CHECK(rc == APBOT_OK || rc == APBOT_E_CONFLICT);
        if (rc == APBOT_OK) {
            CHECK(f->pressed > 0 && strcmp(f->buttons[f->pressed - 1], name) == 0 &&
                  strcmp(f->button_values[f->pressed - 1], value) == 0);
            CHECK(count_field(f, name, value) == before + !was_pressed);
        }
        rc = page_form_press(f, name, NULL);
        CHECK(rc == APBOT_OK || rc == APBOT_E_CONFLICT);
    }
    for (size_t i = 0; i < n_presses; i++) {
        int rc = page_form_press(f, presses[i].name, presses[i].value);
        CHECK(rc == APBOT_OK || rc == APBOT_E_CONFLICT || rc == APBOT_E_NOTFOUND);
    }
}

static void exercise_form(const struct page *p, const char *xpath)
{
    struct page_form f;
    char err[APBOT_ERR_LEN];
    memset(&f, 0, sizeof(f));
    int rc = page_find_form(p, xpath, &f, err, sizeof(err));
    if (rc != APBOT_OK)
        return;
    form_invariants(&f);
    CHECK(strstr(f.action, "://")); /* resolved to an absolute URL */
    /* The document-wide checks below cost an XPath per name: only where they can apply. */
    bool radios = page_has(p, "//input[translate(@type, 'ADIOR', 'adior') = 'radio']");
    bool fieldsets = page_has(p, "//fieldset[@disabled]");
    for (size_t i = 0; i < f.n_controls; i++) {
        CHECK(page_form_has(&f, f.controls[i]));
        if (!radios)
            continue;
        /* A radio group submits one value at most (the last checked, as a browser). */
        char xp[1024];
        const char *nm = f.controls[i];
        if (strchr(nm, '\'') || strlen(nm) > 400)
            continue;
        snprintf(xp, sizeof(xp),
                 "count(//*[@name='%s']) = count(//input[@name='%s']"
                 "[translate(@type, 'ADIOR', 'adior') = 'radio'])",
                 nm, nm);
        char *all_radios = page_string(p, xp);
        if (all_radios && strcmp(all_radios, "true") == 0)
            CHECK(count_name(&f, nm) <= 1);
        free(all_radios);
    }
    /* A control in a disabled fieldset (outside its legend) is disabled: never submitted. */
    for (size_t i = 0; fieldsets && i < f.n; i++) {
        char xp[1024];
        const char *nm = f.names[i];
        if (strchr(nm, '\'') || strlen(nm) > 400)
            continue;
        snprintf(xp, sizeof(xp),
                 "count(//*[@name='%s']) = "
                 "count(//fieldset[@disabled]//*[@name='%s'][not(ancestor::legend)])",
                 nm, nm);
        char *all_disabled = page_string(p, xp);
        CHECK(!all_disabled || strcmp(all_disabled, "true") != 0);
        free(all_disabled);
    }
    exercise_selects(p, &f);
    exercise_buttons(&f);
    for (size_t i = 0; i < n_field_names; i++) {
        rc = page_form_set(&f, field_names[i], "4711");
        CHECK(rc == APBOT_OK || rc == APBOT_E_NOTFOUND || rc == APBOT_E_DATA);
        if (rc == APBOT_E_NOTFOUND) {
            CHECK(!page_form_has(&f, field_names[i]));
            CHECK(page_form_add(&f, field_names[i], "added") == APBOT_OK);
            CHECK(page_form_has(&f, field_names[i]));
            CHECK(page_form_add(&f, field_names[i], "again") == APBOT_E_CONFLICT);
            CHECK(page_form_set(&f, field_names[i], "set") == APBOT_OK);
        }
    }
    form_invariants(&f);
    page_form_done(&f);
}

/* page.h's "trimmed": no white space (ASCII or U+00A0) at either end. */
static bool trimmed(const char *s)
{
    size_t n = strlen(s);
    static const char ws[] = " \t\n\r\f\v";
    if (n == 0)
        return true;
    if (strchr(ws, s[0]) || strchr(ws, s[n - 1]))
        return false;
    if ((unsigned char)s[0] == 0xC2 && (unsigned char)s[1] == 0xA0)
        return false;
    return !(n >= 2 && (unsigned char)s[n - 2] == 0xC2 && (unsigned char)s[n - 1] == 0xA0);
}

/* The cells a lookup compares with the key exactly: trimmed, or NULL. */
static int count_row(void *ctx, const char *const *cells, size_t n_cells)
{
    for (size_t i = 0; i < n_cells; i++)
        CHECK(!cells[i] || trimmed(cells[i]));
    (*(size_t *)ctx)++;
    return 0;
}

static void exercise_rules(const char *body, size_t len)
{
    char *text = page_rule_text(body, len);
    CHECK(text && text[len] == '\0');
    for (size_t i = 0; i < len; i++)
        CHECK(text[i] == body[i] || text[i] == ' ');
    /* Not a property: blanking twice gives the same. An unquoted value blanked to spaces
     * ("method=POST action=...") re-tokenises differently; the rules see the first pass,
     * which blanked by the page's own tokens. */

    struct match_budget b;
    uint64_t steps = match_budget_for(len);
    match_budget_init(&b, steps, NULL);
    for (size_t i = 0; i < n_pats; i++) {
        uint64_t used = b.used;
        struct match_result *m = NULL;
        enum match_outcome o = match_run(pats[i].re, pats[i].raw ? body : text, len, &b, &m);
        CHECK(b.used >= used && b.used <= steps && b.left <= steps);
        if (o == MATCH_FOUND) {
            CHECK(m);
            free(match_group(m, "doc"));
            free(match_group(m, "reason"));
            match_result_free(m);
        } else {
            CHECK(!m);
        }
        if (o == MATCH_ABORTED)
            CHECK(match_budget_reason(&b));
    }
    free(text);
}

/* Appends n bytes. */
static void put(char **out, size_t *len, const char *p, size_t n)
{
    memcpy(*out + *len, p, n);
    *len += n;
}

/* The value escaped as an ERP escapes it for HTML (mode 0) or a JavaScript string (mode 1). */
static void put_escaped(char **out, size_t *len, const uint8_t *v, size_t n, int mode)
{
    for (size_t i = 0; i < n; i++) {
        const char *e = NULL;
        char u[8];
        if (mode == 0) {
            switch (v[i]) {
            case '&':
                e = "&amp;";
                break;
            case '<':
                e = "&lt;";
                break;
            case '>':
                e = "&gt;";
                break;
            case '"':
                e = "&quot;";
                break;
            case '\'':
                e = "&#39;";
                break;
            default:
                break;
            }
        } else if (v[i] == '\\' || v[i] == '"' || v[i] == '\'' || v[i] == '<' || v[i] == '>' ||
                   v[i] == '&' || v[i] < 0x20) {
            snprintf(u, sizeof(u), "\\u%04x", v[i]);
            e = u;
        }
        if (e)
            put(out, len, e, strlen(e));
        else
            put(out, len, (const char *)v + i, 1);
    }
}

/*
 * The input echoed into a realistic page: every byte of the echo's value is blanked, and
 * the page around it is blanked exactly as without it.
 */
static void exercise_echo(const uint8_t *data, size_t size)
{
    static const char *const ctx[][2] = {
        {"<input type=\"text\" name=\"memo\" value=\"", "\">"},
        {"<input type=text name=memo value='", "'>"},
        {"<!-- memo: ", " -->"},
        {"<textarea name=\"memo\">", "</textarea>"},
        {"<script>var memo = \"", "\";</script>"},
        {"<style>/* ", " */</style>"},
        {"<div title=\"", "\">x</div>"},
    };
    size_t nctx = sizeof(ctx) / sizeof(ctx[0]);
    uint32_t h = 2166136261u; /* FNV-1a: which page, where, which context */
    for (size_t i = 0; i < size; i++)
        h = (h ^ data[i]) * 16777619u;
    const size_t k = h % n_pages;
    const size_t at = pages[k].tags[(h >> 8) % pages[k].n_tags];
    const size_t c = (h >> 20) % nctx;
    const int mode = c == 4 ? 1 : 0;

    char *page = malloc(pages[k].len + strlen(ctx[c][0]) + 6 * size + strlen(ctx[c][1]) + 1);
    if (!page)
        abort();
    size_t len = 0;
    put(&page, &len, pages[k].body, at);
    put(&page, &len, ctx[c][0], strlen(ctx[c][0]));
    size_t v0 = len;
    put_escaped(&page, &len, data, size, mode);
    size_t v1 = len;
    put(&page, &len, ctx[c][1], strlen(ctx[c][1]));
    size_t s1 = len;
    put(&page, &len, pages[k].body + at, pages[k].len - at);

    char *text = page_rule_text(page, len);
    for (size_t i = v0; i < v1; i++)
        CHECK(text[i] == ' '); /* an echoed byte a rule could see */
    CHECK(memcmp(text, pages[k].blanked, at) == 0);
    CHECK(memcmp(text + s1, pages[k].blanked + at, pages[k].len - at) == 0);
    free(text);
    free(page);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;
    struct page *p = NULL;
    char err[APBOT_ERR_LEN];
    if (page_parse(body, size, PAGE_URL, &p, err, sizeof(err)) == APBOT_OK) {
        for (size_t i = 0; i < n_form_xpaths; i++)
            exercise_form(p, form_xpaths[i]);
        for (size_t t = 0; t < n_tables; t++) {
            const char *cols[32];
            size_t n = 0;
            for (; n < tables[t]->n_cols && n < 32; n++)
                cols[n] = tables[t]->cols[n].xpath;
            size_t rows = 0, seen = 0;
            int rc =
                page_rows(p, tables[t]->rows, cols, n, count_row, &seen, &rows, err, sizeof(err));
            CHECK(rc != APBOT_OK || rows == seen);
        }
        for (size_t i = 0; i < n_xpaths; i++) {
            (void)page_has(p, xpaths[i]);
            char *v = page_string(p, xpaths[i]);
            CHECK(!v || (v[0] && trimmed(v))); /* trimmed, NULL when empty */
            free(v);
        }
        char *ex = page_excerpt(p, 200);
        CHECK(ex && strlen(ex) <= 200);
        CHECK(invoice_utf8_valid(ex)); /* evidence text: never a cut or invalid sequence */
        free(ex);
        page_free(p);
    }
    exercise_rules(body, size);
    exercise_echo(data, size);
    return 0;
}
