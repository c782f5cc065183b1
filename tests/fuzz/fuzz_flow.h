/*
 * fuzz_flow.h - what the flow and template targets share: loading a flow from bytes (a memfd
 * named through /proc/self/fd, since flow_load takes a path), template variables read off the
 * input, and expanding every template of a loaded flow under the properties that must hold
 * whatever the templates and values are:
 *   - flow_expand returns one of its documented codes; on failure it leaves the result alone
 *     and says why; on success the text is at most 64 KiB; the same call gives the same text;
 *   - a template outside the login form's fields never yields a secret (the load-time check
 *     keeps ${secret.*} there): expanding it with and without the secrets gives the same;
 *   - the key is cut to the policy's key length; an expanded path ("/...") joined to the base
 *     URL as erp_url joins it (http_resolve_url) stays on the ERP's origin;
 *   - with well-formed values (a valid invoice, real dates, a key; FUZZ_GOOD_VALUES) a template
 *     the load accepted expands, or fails only with APBOT_E_DATA (a map: without a mapping for
 *     the invoice's value, a business exception) or APBOT_E_LIMIT: any other failure is one
 *     the load-time check should have refused, found by the first invoice instead.
 */
#ifndef APBOT_FUZZ_FLOW_H
#define APBOT_FUZZ_FLOW_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "apbot/flow.h"
#include "apbot/invoice.h"
#include "apbot/money.h"
#include "web/http.h"
#include "fuzz_input.h"

#define FUZZ_EXPAND_MAX (64 * 1024) /* flow_template.c's FLOW_EXPAND_MAX */

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond))                                                                               \
            abort();                                                                               \
    } while (0)

/*
 * What flow_load says about a refused flow (`apbot flow check` prints it as it is): one problem
 * per line, each "PATH:LINE: message" or "PATH: message", then perhaps a count of problems not
 * shown; nothing a terminal would act on (no C0 control, DEL or C1 control), so that a flow
 * file can neither forge a line of the report nor send escape sequences.
 */
static inline void fuzz_flow_err_check(const char *path, const char *err)
{
    size_t pl = strlen(path);
    const char *line = err;
    FUZZ_CHECK(err[0]);
    for (;;) {
        const char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        bool count = n > 1 && line[0] == '(' && strstr(line, "more problems not shown)");
        if (!count && (n <= pl || strncmp(line, path, pl) != 0 || line[pl] != ':')) {
            fprintf(stderr, "fuzz: a problem line without its file: '%.*s'\n", (int)n, line);
            abort();
        }
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)line[i];
            if (c < 0x20 || c == 0x7F ||
                (c == 0xC2 && i + 1 < n && (unsigned char)line[i + 1] >= 0x80 &&
                 (unsigned char)line[i + 1] <= 0x9F)) {
                fprintf(stderr, "fuzz: a control character in '%.*s'\n", (int)n, line);
                abort();
            }
        }
        if (!nl)
            break;
        line = nl + 1;
    }
}

/* flow_load on data[0..size): APBOT_OK and *ret, or flow_load's error (checked above). */
static inline int fuzz_flow_load(const void *data, size_t size, struct flow **ret, char *err,
                                 size_t errlen)
{
    int fd = memfd_create("fuzz-flow.xml", MFD_CLOEXEC);
    if (fd < 0)
        abort();
    if (size && write(fd, data, size) != (ssize_t)size)
        abort();
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    int rc = flow_load(path, ret, err, errlen);
    close(fd);
    if (rc != APBOT_OK)
        fuzz_flow_err_check(path, err);
    return rc;
}

/* The values templates are expanded with; strings owned here. */
struct fuzz_vars {
    struct flow_vars v;
    struct invoice inv;       /* built from the input, used when it validates */
    struct invoice sample;    /* a fixed valid invoice otherwise */
    struct invoice_line line; /* the line being filled */
    char *str[16];            /* every string read off the input */
    const char *cap_names[2], *cap_values[2];
    const char *row_names[3], *row_values[3];
};

static inline void fuzz_sample_invoice(struct invoice *inv)
{
    static const struct invoice_line lines[2] = {
        {.description = "Paper A4 & toner, 80 g/m²",
         .gl_account = "5700",
         .quantity = "3",
         .net = 123456,
         .tax = 23456},
        {.description = NULL, .gl_account = "4000", .quantity = NULL, .net = -500, .tax = 0},
    };
    invoice_init(inv);
    invoice_set_str(&inv->vendor_id, "100001");
    invoice_set_str(&inv->vendor_name, "Müller & Söhne GmbH");
    invoice_set_str(&inv->invoice_number, "INV 2026/0042");
    inv->doc_type = INVOICE_DOC_INVOICE;
    memcpy(inv->issue_date, "2026-11-03", 11);
    memcpy(inv->due_date, "2026-12-03", 11);
    memcpy(inv->currency, "EUR", 4);
    inv->exponent = 2;
    inv->net_total = 122956;
    inv->tax_total = 23456;
    inv->payable = 146412;
    invoice_add_line(inv, &lines[0]);
    invoice_add_line(inv, &lines[1]);
}

/* Reads every variable's value off the input (one line each; amounts as 8 bytes). */
static inline void fuzz_vars_read(struct fuzz_vars *fv, struct fuzz_in *in)
{
    static const char *const ccys[] = {"EUR", "JPY", "KWD", "USD", "CHF", "XXX"};
    memset(fv, 0, sizeof(*fv));
    for (size_t i = 0; i < sizeof(fv->str) / sizeof(fv->str[0]); i++)
        fv->str[i] = fuzz_line(in, 256);
    fuzz_sample_invoice(&fv->sample);

    struct invoice *inv = &fv->inv;
    invoice_init(inv);
    invoice_set_str(&inv->vendor_id, fv->str[8]);
    invoice_set_str(&inv->vendor_name, fv->str[9][0] ? fv->str[9] : NULL);
    invoice_set_str(&inv->invoice_number, fv->str[10]);
    uint8_t sel = fuzz_byte(in);
    inv->doc_type = (enum invoice_doc_type)(sel & 1);
    snprintf(inv->issue_date, sizeof(inv->issue_date), "%s", fv->str[11]);
    snprintf(inv->due_date, sizeof(inv->due_date), "%s", fv->str[12]);
    const char *ccy = ccys[(sel >> 1) % (sizeof(ccys) / sizeof(ccys[0]))];
    memcpy(inv->currency, ccy, 4);
    inv->exponent = money_exponent(ccy);
    size_t n_lines = (sel >> 4) & 3;
    for (size_t i = 0; i < n_lines; i++) {
        struct invoice_line l = {
            .description = fv->str[13][0] ? fv->str[13] : NULL,
            .gl_account = fv->str[14][0] ? fv->str[14] : NULL,
            .quantity = fv->str[15][0] ? fv->str[15] : NULL,
            .net = (int64_t)fuzz_u64(in, 8) % (MONEY_MAX_MINOR + 1),
            .tax = (int64_t)fuzz_u64(in, 8) % (MONEY_MAX_MINOR + 1),
        };
        invoice_add_line(inv, &l);
        inv->net_total += l.net / 4; /* stays in range; sums are not the templates' business */
        inv->tax_total += l.tax / 4;
    }
    inv->payable = inv->net_total + inv->tax_total;
    if (sel & 0x40)
        inv->payable = -inv->payable;
    char err[APBOT_ERR_LEN];
    bool inv_ok = invoice_validate(inv, err, sizeof(err)) == APBOT_OK;

    fv->cap_names[0] = "token";
    fv->cap_names[1] = "receipt";
    fv->cap_values[0] = fv->str[5];
    fv->cap_values[1] = fv->str[6];
    fv->row_names[0] = "doc";
    fv->row_names[1] = "status";
    fv->row_names[2] = "reference";
    fv->row_values[0] = fv->str[7];
    fv->row_values[1] = fv->str[6];
    fv->row_values[2] = fv->str[0];

    const struct invoice *use = inv_ok ? inv : &fv->sample;
    fv->line = use->n_lines ? use->lines[0] : fv->sample.lines[0];
    fv->v = (struct flow_vars){
        .inv = use,
        .key = fv->str[0],
        .date = fv->str[1],
        .from = fv->str[2],
        .to = fv->str[1],
        .page = (int)(int8_t)fuzz_byte(in),
        .user = fv->str[3],
        .password = fv->str[4],
        .doc = fv->str[7],
        .capture_names = fv->cap_names,
        .capture_values = fv->cap_values,
        .n_captures = 2,
        .row_names = fv->row_names,
        .row_values = fv->row_values,
        .n_row = 3,
        .line = &fv->line,
        .line_n = 1 + (fuzz_byte(in) & 3),
    };
}

static inline void fuzz_vars_done(struct fuzz_vars *fv)
{
    invoice_done(&fv->inv);
    invoice_done(&fv->sample);
    for (size_t i = 0; i < sizeof(fv->str) / sizeof(fv->str[0]); i++)
        free(fv->str[i]);
}

/* Well-formed values for fuzz_vars_read: with them only a refused mapping may fail. */
static const uint8_t fuzz_good_values[] =
    "AP1-ABCDEFGHIJKLMNOPQRST\n2026-12-01\n2026-11-01\nap-bot\ns3cret\nf00d\nR17\n"
    "AP-2026-000042\n";

/* One template under the properties above; login = it is a login form field, strict = the
 * values are well-formed. */
static inline void fuzz_expand_one(const struct flow *f, const char *tmpl,
                                   const struct flow_vars *v, bool login, bool strict)
{
    if (!tmpl)
        return;
    char err[APBOT_ERR_LEN] = "";
    char *out = NULL;
    int rc = flow_expand(f, tmpl, v, &out, err, sizeof(err));
    if (rc != APBOT_OK) {
        FUZZ_CHECK(out == NULL && err[0]);
        FUZZ_CHECK(rc == APBOT_E_DATA || rc == APBOT_E_INVAL || rc == APBOT_E_LIMIT);
        if (strict && rc != APBOT_E_DATA && rc != APBOT_E_LIMIT) {
            fprintf(stderr, "fuzz: '%s' loaded but does not expand: %s\n", tmpl, err);
            abort();
        }
    } else {
        FUZZ_CHECK(out && strlen(out) <= FUZZ_EXPAND_MAX);
    }
    char *again = NULL;
    int rc2 = flow_expand(f, tmpl, v, &again, err, sizeof(err));
    FUZZ_CHECK(rc2 == rc && (rc != APBOT_OK || strcmp(out, again) == 0));
    free(again);
    if (!login) {
        struct flow_vars nosecret = *v;
        nosecret.user = NULL;
        nosecret.password = NULL;
        char *plain = NULL;
        int rc3 = flow_expand(f, tmpl, &nosecret, &plain, err, sizeof(err));
        FUZZ_CHECK(rc3 == rc && (rc != APBOT_OK || strcmp(out, plain) == 0));
        free(plain);
    }
    if (rc == APBOT_OK && f->base_url && http_same_origin(f->base_url, f->base_url)) {
        /* As erp_url joins it: a path-absolute result stays on the ERP's origin. */
        char *url = http_resolve_url(f->base_url, out);
        if (url && out[0] == '/' && out[1] != '/')
            FUZZ_CHECK(http_same_origin(f->base_url, url));
        free(url);
    }
    free(out);
}

static inline void fuzz_expand_fields(const struct flow *f, const struct flow_field *fd, size_t n,
                                      const struct flow_vars *v, bool login, bool strict)
{
    for (size_t i = 0; i < n; i++) {
        fuzz_expand_one(f, fd[i].name, v, false, strict); /* a field name is never a secret */
        fuzz_expand_one(f, fd[i].value, v, login, strict);
    }
}

static inline void fuzz_expand_form(const struct flow *f, const struct flow_form *fm,
                                    const struct flow_vars *v, bool login, bool strict)
{
    fuzz_expand_fields(f, fm->fields, fm->n_fields, v, login, strict);
    if (fm->lines.present)
        fuzz_expand_fields(f, fm->lines.fields, fm->lines.n_fields, v, login, strict);
}

/* Every template of a loaded flow, with the properties above (strict: v is well-formed). */
static inline void fuzz_expand_all(const struct flow *f, const struct flow_vars *v, bool strict)
{
    fuzz_expand_one(f, f->login.get, v, false, strict);
    if (f->login.present && f->login.has_form)
        fuzz_expand_form(f, &f->login.form, v, true, strict);
    fuzz_expand_one(f, f->lookup.get, v, false, strict);
    fuzz_expand_fields(f, f->lookup.expect, f->lookup.n_expect, v, false, strict);
    if (f->lookup.has_finished)
        fuzz_expand_one(f, f->lookup.finished.value, v, false, strict);
    if (f->lookup.detail.present)
        fuzz_expand_one(f, f->lookup.detail.get, v, false, strict);
    for (size_t i = 0; i < f->n_steps; i++) {
        fuzz_expand_one(f, f->steps[i].get, v, false, strict);
        fuzz_expand_form(f, &f->steps[i].form, v, false, strict);
    }
    fuzz_expand_one(f, f->list.get, v, false, strict);

    char *cut = flow_key_cut(f, v->key);
    FUZZ_CHECK(!v->key || (cut && strlen(cut) <= (size_t)f->policy.key_length &&
                           strncmp(cut, v->key, strlen(cut)) == 0));
    free(cut);
}

/* What every loaded flow has (flow.h's promises). */
static inline void fuzz_flow_invariants(const struct flow *f)
{
    FUZZ_CHECK(f->name && f->base_url);
    size_t commits = 0;
    for (size_t i = 0; i < f->n_steps; i++) {
        commits += f->steps[i].commits;
        for (size_t k = 0; k < f->steps[i].n_rules; k++) {
            const struct flow_rule *r = &f->steps[i].rules[k];
            FUZZ_CHECK(r->status || r->url || r->body);
            FUZZ_CHECK((int)r->outcome >= 0 && r->outcome < FLOW_OUT__COUNT);
        }
    }
    FUZZ_CHECK(f->n_steps == 0 || commits == 1);
    FUZZ_CHECK(f->n_steps == 0 || f->steps[flow_commit_index(f)].commits);
    for (size_t i = 0; i < f->n_outcomes; i++)
        FUZZ_CHECK(f->outcomes[i].status || f->outcomes[i].url || f->outcomes[i].body);
    for (size_t i = 0; i < f->n_session_expired; i++) {
        const struct flow_marker *m = &f->session_expired[i];
        FUZZ_CHECK(m->status || m->redirect || m->body);
    }
    /* No user:pass@ in the base URL's authority. */
    const char *auth = strstr(f->base_url, "://");
    auth = auth ? auth + 3 : f->base_url;
    size_t auth_len = strcspn(auth, "/?#");
    FUZZ_CHECK(!memchr(auth, '@', auth_len));
}

#endif
