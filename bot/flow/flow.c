/*
 * flow.c - the flow's small data and its problem list, below the loader, the checks and the
 * templates (flow_load.c, flow_check.c, flow_template.c), which all use it and none of which
 * it calls.
 *
 * The names of the flow's enums both ways (outcomes, select options, missing line controls,
 * listing dates), the committing step, the policy defaults, flow_free(), and the problem list
 * every part records into: flow_problem() keeps "file:line: message" (escaped, one line each,
 * at most FLOW_PROBLEMS_MAX kept and the rest counted), and flow_problems_out() reports them
 * sorted by line.
 */
#include "apbot/flow.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "apbot/invoice.h"
#include "apbot/mem.h"
#include "apbot/text.h"
#include "base/unittest.h"
#include "web/match.h"
#include "flow-int.h"

/* ---- names and defaults ------------------------------------------------------------------ */

static const char *const flow_outcome_names[] = {
    [FLOW_OUT_COMPLETED] = "completed",
    [FLOW_OUT_REJECTED] = "rejected",
    [FLOW_OUT_ALREADY_EXISTS] = "already-exists",
    [FLOW_OUT_NOT_SENT] = "not-sent",
    [FLOW_OUT_SESSION_EXPIRED] = "session-expired",
    [FLOW_OUT_UNKNOWN] = "unknown",
    [FLOW_OUT_SAVED] = "saved",
};
_Static_assert(sizeof(flow_outcome_names) / sizeof(flow_outcome_names[0]) == FLOW_OUT__COUNT,
               "every flow_outcome needs a name");

const char *flow_outcome_name(enum flow_outcome o)
{
    if ((int)o < 0 || o >= FLOW_OUT__COUNT)
        return "invalid";
    return flow_outcome_names[o];
}

enum flow_outcome flow_outcome_from_name(const char *name)
{
    for (int i = 0; name && i < FLOW_OUT__COUNT; i++)
        if (strcmp(flow_outcome_names[i], name) == 0)
            return (enum flow_outcome)i;
    return FLOW_OUT__COUNT;
}

static const char *const flow_option_names[] = {
    [FLOW_OPTION_DEFAULT] = "default",
    [FLOW_OPTION_VALUE] = "value",
    [FLOW_OPTION_LABEL] = "label",
    [FLOW_OPTION_LABEL_PREFIX] = "label-prefix",
};
_Static_assert(sizeof(flow_option_names) / sizeof(flow_option_names[0]) == FLOW_OPTION__COUNT,
               "every flow_option needs a name");

const char *flow_option_name(enum flow_option o)
{
    if ((int)o < 0 || o >= FLOW_OPTION__COUNT)
        return "invalid";
    return flow_option_names[o];
}

enum flow_option flow_option_from_name(const char *name)
{
    for (int i = 0; name && i < FLOW_OPTION__COUNT; i++)
        if (strcmp(flow_option_names[i], name) == 0)
            return (enum flow_option)i;
    return FLOW_OPTION__COUNT;
}

static const char *const flow_missing_names[] = {
    [FLOW_MISSING_ERROR] = "error",
    [FLOW_MISSING_ADD] = "add",
    [FLOW_MISSING_SKIP] = "skip",
};
_Static_assert(sizeof(flow_missing_names) / sizeof(flow_missing_names[0]) == FLOW_MISSING__COUNT,
               "every flow_missing needs a name");

UNITTEST const char *flow_missing_name(enum flow_missing m)
{
    if ((int)m < 0 || m >= FLOW_MISSING__COUNT)
        return "invalid";
    return flow_missing_names[m];
}

enum flow_missing flow_missing_from_name(const char *name)
{
    for (int i = 0; name && i < FLOW_MISSING__COUNT; i++)
        if (strcmp(flow_missing_names[i], name) == 0)
            return (enum flow_missing)i;
    return FLOW_MISSING__COUNT;
}

static const char *const flow_when_names[] = {
    [FLOW_WHEN_ALWAYS] = "always",         [FLOW_WHEN_MISSING_ANY] = "any",
    [FLOW_WHEN_MISSING_FORM] = "form",     [FLOW_WHEN_MISSING_CONTROL] = "control",
    [FLOW_WHEN_MISSING_BUTTON] = "button",
};
_Static_assert(sizeof(flow_when_names) / sizeof(flow_when_names[0]) == FLOW_WHEN__COUNT,
               "every flow_when needs a name");

const char *flow_when_name(enum flow_when w)
{
    if ((int)w < 0 || w >= FLOW_WHEN__COUNT)
        return "invalid";
    return flow_when_names[w];
}

enum flow_when flow_when_from_name(const char *name)
{
    /* "always" is the absence of the attribute, not one of its values */
    for (int i = FLOW_WHEN_MISSING_ANY; name && i < FLOW_WHEN__COUNT; i++)
        if (strcmp(flow_when_names[i], name) == 0)
            return (enum flow_when)i;
    return FLOW_WHEN__COUNT;
}

static const char *const flow_list_by_names[] = {
    [FLOW_LIST_BY_BOOKED] = "booked",
    [FLOW_LIST_BY_INVOICE] = "invoice",
};
_Static_assert(sizeof(flow_list_by_names) / sizeof(flow_list_by_names[0]) == FLOW_LIST_BY__COUNT,
               "every flow_list_by needs a name");

UNITTEST const char *flow_list_by_name(enum flow_list_by b)
{
    if ((int)b < 0 || b >= FLOW_LIST_BY__COUNT)
        return "invalid";
    return flow_list_by_names[b];
}

enum flow_list_by flow_list_by_from_name(const char *name)
{
    for (int i = 0; name && i < FLOW_LIST_BY__COUNT; i++)
        if (strcmp(flow_list_by_names[i], name) == 0)
            return (enum flow_list_by)i;
    return FLOW_LIST_BY__COUNT;
}

size_t flow_commit_index(const struct flow *f)
{
    for (size_t i = 0; f && i < f->n_steps; i++)
        if (f->steps[i].commits)
            return i;
    return 0;
}

bool flow_has_lookup(const struct flow *f)
{
    return f && (f->lookup.get || f->lookup.send.present);
}

bool flow_has_list(const struct flow *f)
{
    return f && (f->list.get || f->list.send.present);
}

/* The one place of the policy defaults; each is explained at struct flow_policy. */
struct flow_policy flow_policy_default(void)
{
    struct flow_policy p = {
        .connect_timeout_ms = 5000,
        .timeout_ms = 30000,
        .settle_ms = 60000,
        .max_posts = 2,
        .max_cycles = 5,
        .max_attempts = 8,
        .max_sessions = 4,
        .key_length = INVOICE_KEY_LEN,
        .backoff_base_ms = 1000,
        .backoff_cap_ms = 60000,
        .lease_ms = 300000,
        .max_body = 4u * 1024u * 1024u,
        .max_redirects = 5,
    };
    return p;
}

/* ---- problems ---------------------------------------------------------------------------- */

void flow_problem(struct flow_ctx *c, long line, const char *fmt, ...)
{
    char raw[1024], msg[1024], text[1200];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(raw, sizeof(raw), fmt, ap);
    va_end(ap);
    /* One problem per line, and nothing a terminal acts on: messages quote the file (names,
     * templates, attribute values holding &#10; or C1 controls) and libxml2's own messages
     * span lines ("...indicate encoding !\nBytes: ..."). Line breaks and tabs become spaces,
     * other controls and bytes that are not UTF-8 \xNN; backslashes in patterns stay. */
    for (char *q = raw; *q; q++)
        if (*q == '\n' || *q == '\r' || *q == '\t')
            *q = ' ';
    text_escape_into(msg, sizeof(msg), raw, TEXT_KEEP_BACKSLASH);
    c->n_probs++;
    if (c->n_kept == FLOW_PROBLEMS_MAX)
        return;
    if (line > 0)
        snprintf(text, sizeof(text), "%s:%ld: %s", c->path, line, msg);
    else
        snprintf(text, sizeof(text), "%s: %s", c->path, msg);
    if (!c->probs)
        c->probs = apbot_xcalloc(FLOW_PROBLEMS_MAX, sizeof(*c->probs));
    c->probs[c->n_kept].line = line;
    c->probs[c->n_kept].text = apbot_xstrdup(text);
    c->n_kept++;
}

bool flow_problem_at(const struct flow_ctx *c, long line)
{
    for (size_t i = 0; i < c->n_kept; i++)
        if (c->probs[i].line == line)
            return true;
    return false;
}

void flow_problems_free(struct flow_ctx *c)
{
    for (size_t i = 0; i < c->n_kept; i++)
        free(c->probs[i].text);
    free(c->probs);
    c->probs = NULL;
    c->n_kept = 0;
}

/* Copies the problems into err sorted by line (stable), whole lines only, with a count of
 * what did not fit. */
void flow_problems_out(struct flow_ctx *c, char *err, size_t errlen)
{
    size_t used = 0, hidden = c->n_probs - c->n_kept;
    char tail[80];

    if (!err || !errlen)
        return;
    err[0] = '\0';
    /* Insertion sort: a handful of problems, and it keeps equal lines in order found. */
    for (size_t i = 1; i < c->n_kept; i++) {
        struct flow_problem_rec r = c->probs[i];
        size_t j = i;
        while (j > 0 && c->probs[j - 1].line > r.line) {
            c->probs[j] = c->probs[j - 1];
            j--;
        }
        c->probs[j] = r;
    }
    for (size_t i = 0; i < c->n_kept; i++) {
        size_t n = strlen(c->probs[i].text);
        bool last = i + 1 == c->n_kept && hidden == 0;
        /* Leave room for the "(N more problems not shown)" note unless this is the last. */
        if (hidden == 0 && used + n + 1 + (last ? 0 : 48) < errlen) {
            if (used)
                err[used++] = '\n';
            memcpy(err + used, c->probs[i].text, n + 1);
            used += n;
        } else {
            hidden++;
        }
    }
    if (hidden) {
        if (used == 0 && c->n_kept) {
            snprintf(err, errlen, "%s", c->probs[0].text); /* its beginning, at least */
        } else {
            snprintf(tail, sizeof(tail), "%s(%zu more problems not shown)", used ? "\n" : "",
                     hidden);
            if (used + strlen(tail) < errlen)
                memcpy(err + used, tail, strlen(tail) + 1);
        }
    }
}

/* ---- freeing ----------------------------------------------------------------------------- */

static void flow_json_cond_done(struct flow_json_cond *j)
{
    free(j->pointer);
    match_free(j->re);
}

static void flow_rules_free(struct flow_rule *r, size_t n)
{
    for (size_t i = 0; r && i < n; i++) {
        free(r[i].name);
        free(r[i].status);
        match_free(r[i].url);
        match_free(r[i].body);
        for (size_t k = 0; r[i].json && k < r[i].n_json; k++)
            flow_json_cond_done(&r[i].json[k]);
        free(r[i].json);
        free(r[i].reason);
    }
    free(r);
}

static void flow_fields_free(struct flow_field *fd, size_t n)
{
    for (size_t i = 0; fd && i < n; i++) {
        free(fd[i].name);
        free(fd[i].value);
    }
    free(fd);
}

static void flow_captures_free(struct flow_capture *cp, size_t n)
{
    for (size_t i = 0; cp && i < n; i++) {
        free(cp[i].name);
        free(cp[i].pointer);
        match_free(cp[i].re);
    }
    free(cp);
}

static void flow_send_done(struct flow_send *s)
{
    free(s->url);
    json_decref(s->json);
    flow_fields_free(s->fields, s->n_fields);
}

static void flow_form_done(struct flow_form *fm)
{
    free(fm->xpath);
    flow_fields_free(fm->fields, fm->n_fields);
    free(fm->submit);
    free(fm->submit_value);
    flow_fields_free(fm->lines.fields, fm->lines.n_fields);
}

static void flow_table_done(struct flow_table *t)
{
    free(t->rows);
    free(t->pointer);
    for (size_t i = 0; t->cols && i < t->n_cols; i++) {
        free(t->cols[i].name);
        free(t->cols[i].xpath);
        free(t->cols[i].pointer);
    }
    free(t->cols);
    free(t->empty);
    free(t->next);
    free(t->screen);
    free(t->date_format);
}

static void flow_step_done(struct flow_step *s)
{
    free(s->name);
    free(s->get);
    flow_form_done(&s->form);
    flow_send_done(&s->send);
    flow_rules_free(s->rules, s->n_rules);
    flow_captures_free(s->captures, s->n_captures);
    for (size_t i = 0; i < s->n_compares; i++) {
        free(s->compares[i].capture);
        free(s->compares[i].equals);
    }
    free(s->compares);
    free(s->resolves);
}

void flow_free(struct flow *f)
{
    if (!f)
        return;
    free(f->path);
    free(f->name);
    free(f->base_url);
    free(f->ca_file);
    for (size_t i = 0; f->session_expired && i < f->n_session_expired; i++) {
        free(f->session_expired[i].status);
        match_free(f->session_expired[i].redirect);
        match_free(f->session_expired[i].body);
    }
    free(f->session_expired);
    for (size_t i = 0; f->headers && i < f->n_headers; i++) {
        free(f->headers[i].name);
        free(f->headers[i].prefix);
        free(f->headers[i].value);
    }
    free(f->headers);
    free(f->login.method);
    free(f->login.get);
    flow_form_done(&f->login.form);
    flow_send_done(&f->login.send);
    match_free(f->login.success);
    free(f->login.success_status);
    flow_json_cond_done(&f->login.success_json);
    flow_captures_free(f->login.captures, f->login.n_captures);
    flow_rules_free(f->login.rules, f->login.n_rules);
    for (size_t i = 0; f->login.then && i < f->login.n_then; i++) {
        struct flow_call *t = &f->login.then[i];
        free(t->name);
        flow_send_done(&t->send);
        free(t->success_status);
        flow_json_cond_done(&t->success_json);
        match_free(t->success);
        flow_captures_free(t->captures, t->n_captures);
    }
    free(f->login.then);
    free(f->lookup.get);
    flow_send_done(&f->lookup.send);
    flow_table_done(&f->lookup.table);
    free(f->lookup.key_column);
    free(f->lookup.currency);
    flow_fields_free(f->lookup.expect, f->lookup.n_expect);
    free(f->lookup.detail.get);
    flow_send_done(&f->lookup.detail.send);
    flow_table_done(&f->lookup.detail.table);
    free(f->lookup.finished.name);
    free(f->lookup.finished.value);
    for (size_t i = 0; f->steps && i < f->n_steps; i++)
        flow_step_done(&f->steps[i]);
    free(f->steps);
    flow_rules_free(f->outcomes, f->n_outcomes);
    free(f->list.get);
    free(f->list.currency);
    flow_send_done(&f->list.send);
    flow_table_done(&f->list.table);
    for (size_t i = 0; f->resolves && i < f->n_resolves; i++) {
        struct flow_resolve *r = &f->resolves[i];
        free(r->name);
        free(r->code);
        free(r->get);
        flow_send_done(&r->send);
        flow_table_done(&r->table);
        free(r->match_column);
        free(r->from_step);
    }
    free(f->resolves);
    free(f);
}
