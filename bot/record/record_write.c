/*
 * record_write.c - the draft flow assembled from what the recorder decided: <erp> (the origin,
 * Basic, the JSON encodings, session headers and markers), <login>, <lookup>, the <resolve>s,
 * <post>, <list> and <policy>, in the schema's order, with a head comment that says where it
 * came from and what to do next. Each open decision is a <todo> where its answer goes.
 */
#include "record/record-int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/flow.h"
#include "apbot/mem.h"

static void rec_write_resolves(struct rec *r)
{
    struct apbot_buf *b = &r->resolves_x;
    for (size_t i = 0; i < r->n_resolves; i++) {
        struct rec_resolve *rs = &r->resolves[i];
        struct rec_ex *x = &r->ex[rs->ex];
        rec_addf(r, b, "  <resolve name=\"%s\" code=\"", rs->name);
        rec_addx(r, b, rs->code_tmpl);
        rec_add(r, b, "\"");
        if (strcmp(rs->cols[0].name, "code") != 0)
            rec_addf(r, b, " match-column=\"%s\"", rs->cols[0].name);
        if (x->jreq) {
            /* "${line.gl_account}": a per-line code, whose search may have listed every line's */
            char var[64] = "";
            if (rs->per_line && strncmp(rs->code_tmpl, "${", 2) == 0)
                snprintf(var, sizeof(var), "%.*s", (int)strcspn(rs->code_tmpl + 2, "|}"),
                         rs->code_tmpl + 2);
            struct rec_jctx jc = {.at = rs->ex,
                                  .code = true,
                                  .code_value = rs->code_value,
                                  .code_var = var[0] ? var : NULL};
            char *body = rec_json_body(r, x, &jc);
            rec_add(r, b, ">\n    <send url=\"");
            rec_addx(r, b, x->path);
            rec_add(r, b, "\">\n      <json>");
            rec_addx(r, b, body ? body : "{}");
            rec_add(r, b, "</json>\n    </send>\n");
            free(body);
        } else {
            struct rec_url_subst sub = {rs->code_value, "${code|url}"};
            char *get = rec_url_template(x->path, &sub, 1);
            rec_add(r, b, " get=\"");
            rec_addx(r, b, get);
            rec_add(r, b, "\">\n");
            free(get);
        }
        rec_add(r, b, "    <table pointer=\"");
        rec_addx(r, b, rs->pointer[0] ? rs->pointer : "");
        rec_add(r, b, "\">\n");
        for (size_t c = 0; c < rs->n_cols; c++) {
            rec_addf(r, b, "      <column name=\"%s\" pointer=\"", rs->cols[c].name);
            rec_addx(r, b, rs->cols[c].pointer);
            rec_add(r, b, "\"/>\n");
        }
        rec_add(r, b, "    </table>\n  </resolve>\n");
    }
}

char *rec_draft(struct rec *r, const char *name, size_t exchanges, size_t *ret_len)
{
    struct apbot_buf b;
    struct flow_policy pol = flow_policy_default();

    rec_write_resolves(r);
    apbot_buf_init(&b, REC_DRAFT_MAX);
    rec_add(r, &b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!--\n  ");
    rec_addx(r, &b, name);
    rec_addf(r, &b,
             ".xml - a DRAFT flow written by apbot flow record from a recorded "
             "browser session\n  (%zu of its requests were exchanges with the ERP) "
             "and the sample invoice typed into it.\n",
             exchanges);
    if (r->n_todos)
        rec_addf(r, &b,
                 "  It has %zu open decision%s: each <todo> below says what to "
                 "decide; put what you decide in its\n  place. apbot flow check, "
                 "flow trace and run refuse the draft until none is left.\n",
                 r->n_todos, r->n_todos == 1 ? "" : "s");
    rec_add(r, &b,
            "  Review every step before it books anything (docs/recording.md): "
            "check it with apbot flow check,\n  then trace the sample invoice "
            "with apbot flow trace, in a dry run first.\n-->\n");
    rec_add(r, &b, "<flow xmlns=\"urn:apbot:flow:1\" name=\"");
    rec_addx(r, &b, name);
    rec_add(r, &b, "\">\n\n");

    /* <erp> */
    rec_add(r, &b,
            "  <!-- Overridden by the erp option of apbot run, or APBOT_ERP_URL. -->\n"
            "  <erp base-url=\"");
    rec_addx(r, &b, r->origin[0] ? r->origin : "http://127.0.0.1");
    rec_add(r, &b, "\">\n");
    if (r->basic)
        rec_add(r, &b,
                "    <!-- APBOT_ERP_USER / APBOT_ERP_PASSWORD as HTTP Basic on "
                "every request, as the browser sent them -->\n"
                "    <http-basic/>\n");
    if (r->json_tagged_decimal || r->json_number_decimal || r->json_tagged_date) {
        rec_add(r, &b, "    <json-values");
        if (r->json_tagged_decimal)
            rec_add(r, &b, " decimal=\"tagged\"");
        else if (r->json_number_decimal)
            rec_add(r, &b, " decimal=\"number\"");
        if (r->json_tagged_date)
            rec_add(r, &b, " date=\"tagged\"");
        rec_add(r, &b, "/>\n");
    }
    rec_add(r, &b, apbot_buf_str(&r->erp));
    if (r->markers.len)
        rec_add(r, &b,
                "    <!-- The session is gone: nothing of the request was "
                "processed; log in again. -->\n");
    rec_add(r, &b, apbot_buf_str(&r->markers));
    rec_add(r, &b, "  </erp>\n\n");

    rec_add(r, &b, apbot_buf_str(&r->login_x));
    rec_add(r, &b, "\n");
    rec_add(r, &b, apbot_buf_str(&r->lookup));
    rec_add(r, &b, "\n");
    if (r->resolves_x.len) {
        rec_add(r, &b,
                "  <!-- Codes the booking sends as ids: found once per run "
                "(and per code), as the client searched them. -->\n");
        rec_add(r, &b, apbot_buf_str(&r->resolves_x));
        rec_add(r, &b, "\n");
    }
    rec_add(r, &b, apbot_buf_str(&r->post));
    rec_add(r, &b, "\n");
    rec_add(r, &b, apbot_buf_str(&r->list));
    rec_add(r, &b, "\n");

    /* <policy>: the defaults, and room for the largest page the recording saw grown with many
     * invoice lines */
    size_t body = (size_t)pol.max_body;
    if (r->max_answer > 0 && r->max_answer * 32 > body)
        body = r->max_answer * 32;
    if (body > 268435456)
        body = 268435456;
    rec_addf(r, &b,
             "  <!-- The defaults: a recording says nothing of the ERP's timing. "
             "settle-ms must outlast its late\n"
             "       commits and search lag (docs/writing-flows.md, Step 7); "
             "max-body-bytes leaves room for\n"
             "       the largest recorded answer (%zu bytes) with many more "
             "lines. -->\n"
             "  <policy connect-timeout-ms=\"%ld\" timeout-ms=\"%ld\" settle-ms=\"%ld\" "
             "max-posts=\"%d\"\n"
             "          max-body-bytes=\"%zu\"/>\n",
             r->max_answer, pol.connect_timeout_ms, pol.timeout_ms, pol.settle_ms, pol.max_posts,
             body);
    rec_add(r, &b, "</flow>\n");
    return apbot_buf_steal(&b, ret_len);
}
