/*
 * fuzz_jtemplate.c - libFuzzer target: a JSON body template (<send><json>) at load and at
 * expansion. The fuzzed text becomes the body of a post step of a fixed JSON flow; when the
 * flow loads, the body is expanded with values read from the input (hostile strings for the
 * invoice, the session's captures and the resolved ids) under the properties that make a JSON
 * call safe to send:
 *   - flow_json_expand returns APBOT_OK, APBOT_E_DATA, APBOT_E_INVAL or APBOT_E_LIMIT, says why
 *     on failure and leaves the result alone, and gives the same text twice;
 *   - what it writes is one JSON value (web/jdoc reads it back) of at most FLOW_JSON_MAX bytes,
 *     whatever the values: no value can break out of its string or change the call's shape;
 *   - the secrets never reach a post step's body (the load refuses ${secret.*} there).
 *
 * Input: the template up to '\n', then the values (fuzz_flow.h's fuzz_vars_read).
 */
#include <stddef.h>
#include <stdint.h>

#include <libxml/parser.h>

#include "apbot/buf.h"
#include "web/jdoc.h"
#include "fuzz_flow.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char flow_head[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<flow xmlns=\"urn:apbot:flow:1\" name=\"fuzz\">\n"
    "  <erp base-url=\"http://127.0.0.1:8080\">\n"
    "    <json-values decimal=\"tagged\" date=\"tagged\"/>\n"
    "    <header name=\"Authorization\" prefix=\"Session \" encode=\"base64\""
    ">${secret.user}:${session.token}</header>\n"
    "    <session-expired status=\"401\"/>\n"
    "  </erp>\n"
    "  <login>\n"
    "    <send url=\"/rpc\"><json>{\"method\": \"login\", \"params\": [\"${secret.user}\", "
    "\"${secret.password}\"]}</json></send>\n"
    "    <success json=\"/result\">.</success>\n"
    "    <capture name=\"token\" json=\"/result\" secret=\"true\"/>\n"
    "    <then name=\"context\"><send url=\"/rpc\"><json>{\"method\": \"prefs\"}</json></send>"
    "<capture name=\"context\" json=\"/result\"/></then>\n"
    "  </login>\n"
    "  <lookup key-column=\"reference\">\n"
    "    <send url=\"/rpc\"><json>{\"method\": \"search\", \"params\": "
    "[\"${key}\"]}</json></send>\n"
    "    <table pointer=\"/result\" max-rows=\"100\">\n"
    "      <column name=\"doc\" pointer=\"/id\"/>\n"
    "      <column name=\"reference\" pointer=\"/reference\"/>\n"
    "      <column name=\"status\" pointer=\"/state\"/>\n"
    "    </table>\n"
    "    <finished column=\"status\">posted</finished>\n"
    "  </lookup>\n"
    "  <resolve name=\"party\" code=\"${vendor.id}\">\n"
    "    <send url=\"/rpc\"><json>{\"code\": \"${code}\"}</json></send>\n"
    "    <table pointer=\"/result\"><column name=\"code\" pointer=\"/code\"/>"
    "<column name=\"id\" pointer=\"/id\"/></table>\n"
    "  </resolve>\n"
    "  <resolve name=\"account\" code=\"${line.gl_account}\">\n"
    "    <send url=\"/rpc\"><json>{\"code\": \"${code}\"}</json></send>\n"
    "    <table pointer=\"/result\"><column name=\"code\" pointer=\"/code\"/>"
    "<column name=\"id\" pointer=\"/id\"/></table>\n"
    "  </resolve>\n"
    "  <post>\n"
    "    <step name=\"create\" commits=\"true\">\n"
    "      <send url=\"/rpc\"><json>";

static const char flow_tail[] =
    "</json></send>\n"
    "      <rule name=\"created\" outcome=\"saved\"><json pointer=\"/result/0\">"
    "^(?&lt;doc&gt;[0-9]+)$</json></rule>\n"
    "    </step>\n"
    "    <step name=\"post\">\n"
    "      <send url=\"/rpc\"><json>{\"params\": [\"${doc|json:int}\", \"${key}\"]}</json></send>\n"
    "    </step>\n"
    "    <outcomes>\n"
    "      <rule name=\"posted\" outcome=\"completed\"><json pointer=\"/result\">^null$</json>"
    "</rule>\n"
    "    </outcomes>\n"
    "  </post>\n"
    "  <list page-size=\"50\">\n"
    "    <send url=\"/rpc\"><json>{\"from\": \"${from|json:date}\", \"to\": \"${to|json:date}\", "
    "\"offset\": \"${offset|json:int}\"}</json></send>\n"
    "    <table pointer=\"/result\"><column name=\"doc\" pointer=\"/id\"/></table>\n"
    "  </list>\n"
    "</flow>\n";

/* The values the find callback answers: ref.* and cookie.* from the input's strings. */
struct finder {
    const char *values[4];
};

static const char *find(void *ctx, const char *var, size_t len, size_t line_n)
{
    const struct finder *fd = ctx;
    (void)var;
    return fd->values[(len + line_n) % 4];
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    xmlInitParser();
    return 0;
}

/* Appends s XML-escaped (the template goes into element text). */
static void xml_text(struct apbot_buf *b, const char *s)
{
    for (; *s; s++) {
        const char *e = *s == '<' ? "&lt;" : *s == '&' ? "&amp;" : *s == '>' ? "&gt;" : NULL;
        int rc = e ? apbot_buf_adds(b, e) : apbot_buf_add(b, s, 1);
        if (rc != APBOT_OK)
            return;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_in in = {.p = data, .n = size};
    char *tmpl = fuzz_line(&in, 4096);
    struct fuzz_vars fv;
    struct apbot_buf text;
    struct flow *f = NULL;
    char err[8192];

    fuzz_vars_read(&fv, &in);
    apbot_buf_init(&text, 1 << 16);
    if (apbot_buf_adds(&text, flow_head) != APBOT_OK)
        abort();
    xml_text(&text, tmpl);
    if (apbot_buf_adds(&text, flow_tail) != APBOT_OK)
        goto out;
    if (fuzz_flow_load(text.data, text.len, &f, err, sizeof(err)) != APBOT_OK)
        goto out;

    const char *snames[] = {"token", "context"};
    const char *svalues[] = {fv.str[5] ? fv.str[5] : "", fv.str[6] ? fv.str[6] : ""};
    struct finder fd = {{fv.str[7] ? fv.str[7] : "", fv.str[8] ? fv.str[8] : "", "17", "{}"}};
    struct flow_vars v = fv.v;
    v.session_names = snames;
    v.session_values = svalues;
    v.n_session = 2;
    v.find = find;
    v.find_ctx = &fd;
    const struct json_t *body = f->steps[0].send.json;
    FUZZ_CHECK(body);

    char *a = (char *)"untouched", *b = NULL, *c = NULL;
    size_t alen = 0, blen = 0, clen = 0;
    char e1[512] = "";
    int rc = flow_json_expand(f, body, &v, &a, &alen, e1, sizeof(e1));
    FUZZ_CHECK(rc == APBOT_OK || rc == APBOT_E_DATA || rc == APBOT_E_INVAL || rc == APBOT_E_LIMIT);
    if (rc != APBOT_OK) {
        FUZZ_CHECK(e1[0] && strcmp(a, "untouched") == 0);
    } else {
        FUZZ_CHECK(alen == strlen(a) && alen <= FLOW_JSON_MAX);
        struct jdoc_limits lim = {
            .max_bytes = FLOW_JSON_MAX, .max_nodes = 1u << 20, .max_depth = 256};
        struct jdoc *d = NULL;
        char je[256];
        if (jdoc_parse(a, alen, &lim, &d, je, sizeof(je)) != APBOT_OK) {
            fprintf(stderr, "fuzz: the body is not JSON (%s): %s\n", je, a);
            abort();
        }
        jdoc_free(d);
        /* the same call gives the same text; without the secrets too (none may be in it) */
        FUZZ_CHECK(flow_json_expand(f, body, &v, &b, &blen, e1, sizeof(e1)) == APBOT_OK);
        FUZZ_CHECK(blen == alen && memcmp(a, b, alen) == 0);
        struct flow_vars nosecret = v;
        nosecret.user = nosecret.password = NULL;
        FUZZ_CHECK(flow_json_expand(f, body, &nosecret, &c, &clen, e1, sizeof(e1)) == APBOT_OK);
        FUZZ_CHECK(clen == alen && memcmp(a, c, alen) == 0);
        free(a);
        free(b);
        free(c);
    }
    flow_free(f);
out:
    apbot_buf_done(&text);
    fuzz_vars_done(&fv);
    free(tmpl);
    return 0;
}
