/*
 * fuzz_flow.c - libFuzzer target: the flow loader on arbitrary bytes (XML parse without DTDs,
 * the embedded RelaxNG schema, building the flow, the semantic checks: variables in their
 * places, PCRE2 patterns, XPath limits, the safety rules of the post). A flow that loads must
 * keep flow.h's promises (fuzz_flow.h: one committing step, rules with a condition, no
 * credentials in the base URL) and every template in it must expand under the properties of
 * fuzz_flow.h with the sample values, and every XPath and pattern in it must run on a
 * realistic page (a seed page of fuzz_page) as the bot runs them: XPath through page_has and
 * page_rows, patterns through match_run under the page's budget, which must hold. A refused
 * flow must say why. Seeds: flows/ and tests/data/flows/; tests/fuzz/flow.dict holds the
 * language's names.
 */
#include <stddef.h>
#include <stdint.h>

#include <libxml/parser.h>

#include "web/match.h"
#include "web/page.h"
#include "fuzz_flow.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *page_text; /* a realistic page the flow's XPath and patterns run on */
static size_t page_len;
static struct page *page;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    xmlInitParser();
    const char *path = APBOT_FUZZ_CORPUS "/page/classic-update.html";
    FILE *fp = fopen(path, "rb");
    char err[APBOT_ERR_LEN];
    page_text = malloc(1 << 20);
    if (!fp || !page_text) {
        fprintf(stderr, "fuzz_flow: cannot read %s\n", path);
        abort();
    }
    page_len = fread(page_text, 1, (1 << 20) - 1, fp);
    fclose(fp);
    if (page_parse(page_text, page_len, "http://127.0.0.1:8080/ap.pl", &page, err, sizeof(err)))
        abort();
    return 0;
}

static int no_row(void *ctx, const char *const *cells, size_t n)
{
    (void)ctx;
    (void)cells;
    (void)n;
    return 0;
}

static void run_table(const struct flow_table *t)
{
    const char *cols[64];
    size_t n = 0, rows = 0;
    char err[APBOT_ERR_LEN];
    for (; n < t->n_cols && n < 64; n++)
        cols[n] = t->cols[n].xpath;
    err[0] = '\0';
    if (t->rows) /* an XPath may still fail at run time (rows="count(//tr)"): with a reason */
        FUZZ_CHECK(page_rows(page, t->rows, cols, n, no_row, NULL, &rows, err, sizeof(err)) ==
                       APBOT_OK ||
                   err[0]);
    else
        for (size_t i = 0; i < n; i++)
            free(page_string(page, cols[i]));
    const char *marks[] = {t->empty, t->next, t->screen};
    for (size_t i = 0; i < 3; i++)
        if (marks[i])
            (void)page_has(page, marks[i]);
}

/* What the bot runs on a page: the flow's XPath and patterns, under one budget. */
static void run_on_page(const struct flow *f)
{
    struct match_budget b;
    uint64_t steps = match_budget_for(page_len);
    match_budget_init(&b, steps, NULL);
    const struct match_re *res[4096];
    size_t n = 0;
#define ADD(re)                                                                                    \
    do {                                                                                           \
        if ((re) && n < 4096)                                                                      \
            res[n++] = (re);                                                                       \
    } while (0)
    for (size_t i = 0; i < f->n_session_expired; i++) {
        ADD(f->session_expired[i].body);
        ADD(f->session_expired[i].redirect);
    }
    ADD(f->login.success);
    for (size_t i = 0; i < f->login.n_rules; i++) {
        ADD(f->login.rules[i].body);
        ADD(f->login.rules[i].url);
    }
    for (size_t s = 0; s < f->n_steps; s++) {
        const struct flow_step *st = &f->steps[s];
        for (size_t i = 0; i < st->n_rules; i++) {
            ADD(st->rules[i].body);
            ADD(st->rules[i].url);
        }
        for (size_t i = 0; i < st->n_captures; i++)
            ADD(st->captures[i].re);
        struct page_form form;
        char err[APBOT_ERR_LEN];
        if (page_find_form(page, st->form.xpath, &form, err, sizeof(err)) == APBOT_OK)
            page_form_done(&form);
    }
    for (size_t i = 0; i < f->n_outcomes; i++) {
        ADD(f->outcomes[i].body);
        ADD(f->outcomes[i].url);
    }
#undef ADD
    for (size_t i = 0; i < n; i++) {
        struct match_result *m = NULL;
        enum match_outcome o = match_run(res[i], page_text, page_len, &b, &m);
        FUZZ_CHECK(b.used <= steps);
        FUZZ_CHECK(o != MATCH_ABORTED || match_budget_reason(&b));
        if (m) {
            free(match_group(m, "doc"));
            match_result_free(m);
        }
    }
    run_table(&f->lookup.table);
    run_table(&f->list.table);
    if (f->lookup.detail.present)
        run_table(&f->lookup.detail.table);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct flow *f = NULL;
    char err[4096] = "";
    int rc = fuzz_flow_load(data, size, &f, err, sizeof(err));
    if (rc != APBOT_OK) {
        FUZZ_CHECK(f == NULL && err[0]);
        return 0;
    }
    FUZZ_CHECK(f);
    fuzz_flow_invariants(f);
    /* Well-formed values: the templates are what is fuzzed here. */
    struct fuzz_in in = {fuzz_good_values, sizeof(fuzz_good_values) - 1};
    struct fuzz_vars fv;
    fuzz_vars_read(&fv, &in);
    fuzz_expand_all(f, &fv.v, true);
    fuzz_vars_done(&fv);
    run_on_page(f);
    flow_free(f);
    return 0;
}
