/*
 * fuzz_template.c - libFuzzer target: flow templates ("${var|formatter:arg|...}") at load and
 * at expansion. Templates are checked when a flow loads (unknown variables, a variable out of
 * its place, bad formatter arguments), and flow_expand relies on that; so the fuzzed template
 * goes into one place of a fixed valid flow (every place a template can sit: lookup and list
 * URLs, detail URL, step and <lines> field values and names, login fields, follow-up fields,
 * <expect>, <finished>), the flow is loaded, and every template of it is expanded with
 * variable values read from the input, under the properties of fuzz_flow.h.
 *
 * Input: one byte choosing the place, the template up to '\n', then the values (fuzz_flow.h's
 * fuzz_vars_read: key, date, from, user, password, captures, row cells, doc, invoice fields,
 * one line each, then amounts and selectors).
 */
#include <stddef.h>
#include <stdint.h>

#include <libxml/parser.h>

#include "apbot/buf.h"
#include "fuzz_flow.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The fixed flow; @N@ is place N, filled with the template or with defaults[N]. */
static const char flow_text[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<flow xmlns=\"urn:apbot:flow:1\" name=\"fuzz\">\n"
    "  <erp base-url=\"http://127.0.0.1:8080/erp\">\n"
    "    <session-expired status=\"401\"/>\n"
    "  </erp>\n"
    "  <login get=\"/login\">\n"
    "    <form xpath=\"//form[@id='login']\" submit=\"login\">\n"
    "      <field name=\"user\">${secret.user}</field>\n"
    "      <field name=\"password\">@6@</field>\n"
    "    </form>\n"
    "    <success>Welcome</success>\n"
    "  </login>\n"
    "  <lookup get=\"@0@\" key-column=\"reference\" max-pages=\"3\" max-candidates=\"4\">\n"
    "    <table rows=\"//table[@id='results']/tbody/tr\" empty=\"//p[@id='none']\"\n"
    "           screen=\"//form[@id='search']\" max-rows=\"50\">\n"
    "      <column name=\"doc\" xpath=\"td[1]\"/>\n"
    "      <column name=\"status\" xpath=\"td[2]\"/>\n"
    "    </table>\n"
    "    <detail get=\"@5@\" amount-decimal=\",\" amount-group=\".\">\n"
    "      <column name=\"reference\" xpath=\"//input[@name='ref']/@value\"/>\n"
    "      <column name=\"amount\" xpath=\"//span[@id='total']\"/>\n"
    "    </detail>\n"
    "    <expect column=\"amount\">@8@</expect>\n"
    "    <finished column=\"status\">@9@</finished>\n"
    "  </lookup>\n"
    "  <post>\n"
    "    <step name=\"enter\" get=\"/add\" repeat=\"until-lines\">\n"
    "      <form xpath=\"//form[@name='invoice']\" submit=\"action\" submit-value=\"update\">\n"
    "        <field name=\"vendor\">${vendor.id}</field>\n"
    "        <field name=\"ref\">${key}</field>\n"
    "        <lines missing=\"skip\">\n"
    "          <field name=\"account_${line.n}\" option=\"label-prefix\">"
    "${line.gl_account}--</field>\n"
    "          <field name=\"@3@\">@2@</field>\n"
    "        </lines>\n"
    "        <field name=\"memo\">@1@</field>\n"
    "      </form>\n"
    "      <capture name=\"token\">name=\"form_id\" value=\"(?&lt;token&gt;[0-9a-f]+)\"</capture>\n"
    "    </step>\n"
    "    <step name=\"save\" commits=\"true\">\n"
    "      <form xpath=\"//form[@name='invoice']\" submit=\"action\" submit-value=\"save\">\n"
    "        <field name=\"form_id\">${capture.token}</field>\n"
    "      </form>\n"
    "      <rule name=\"saved\" outcome=\"saved\" status=\"200\"\n"
    "        >&lt;p class=\"info\"&gt;Invoice (?&lt;doc&gt;AP-\\d+) saved</rule>\n"
    "    </step>\n"
    "    <step name=\"approve\" get=\"/edit?id=${doc|url}\">\n"
    "      <form xpath=\"//form[@name='invoice']\" submit=\"action\" submit-value=\"approve\"/>\n"
    "      <capture name=\"receipt\">Receipt (?&lt;receipt&gt;R\\d+)</capture>\n"
    "    </step>\n"
    "    <step name=\"confirm\" get=\"/receipt?r=${capture.receipt|url}\">\n"
    "      <form xpath=\"//form[@name='confirm']\" submit=\"ok\">\n"
    "        <field name=\"note\">@7@</field>\n"
    "      </form>\n"
    "    </step>\n"
    "    <outcomes>\n"
    "      <rule name=\"posted\" outcome=\"completed\" status=\"200\">Posted</rule>\n"
    "    </outcomes>\n"
    "  </post>\n"
    "  <list get=\"@4@\" by=\"invoice\" max-pages=\"1\">\n"
    "    <table rows=\"//tr[@class='row']\">\n"
    "      <column name=\"doc\" xpath=\"td[1]\"/>\n"
    "      <column name=\"reference\" xpath=\"td[2]\"/>\n"
    "    </table>\n"
    "  </list>\n"
    "</flow>\n";

#define PLACES 10
static const char *const defaults[PLACES] = {
    "/search?ref=${key|url}",
    "${invoice.description|trunc:60}",
    "${line.net|amount:.}",
    "amount_${line.n}",
    "/list?from=${from|date:%m/%d/%Y}&amp;to=${to|date:%m/%d/%Y}",
    "/edit?id=${row.doc|url}",
    "${secret.password}",
    "${doc} ${capture.receipt}",
    "${invoice.payable|amount:,.}",
    "posted",
};

/* Appends s escaped for XML text and attribute values. */
static void add_escaped(struct apbot_buf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *e = NULL;
        switch (s[i]) {
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
        default:
            break;
        }
        if ((e ? apbot_buf_add(b, e, strlen(e)) : apbot_buf_add(b, s + i, 1)) != APBOT_OK)
            abort();
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    xmlInitParser();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_in in = {data, size};
    int place = fuzz_byte(&in) % PLACES;
    char *tmpl = fuzz_line(&in, 4096);

    struct apbot_buf xml;
    apbot_buf_init(&xml, 64 * 1024);
    for (const char *p = flow_text; *p;) {
        if (p[0] == '@' && p[1] >= '0' && p[1] <= '9' && p[2] == '@') {
            int k = p[1] - '0';
            if (k == place)
                add_escaped(&xml, tmpl, strlen(tmpl));
            else if (apbot_buf_add(&xml, defaults[k], strlen(defaults[k])) != APBOT_OK)
                abort();
            p += 3;
        } else {
            if (apbot_buf_add(&xml, p, 1) != APBOT_OK)
                abort();
            p++;
        }
    }
    free(tmpl);

    struct flow *f = NULL;
    char err[4096] = "";
    int rc = fuzz_flow_load(apbot_buf_str(&xml), xml.len, &f, err, sizeof(err));
    apbot_buf_done(&xml);
    if (getenv("FUZZ_DEBUG"))
        fprintf(stderr, "place %d: rc %d: %s\n", place, rc, err);
    if (rc != APBOT_OK) {
        FUZZ_CHECK(f == NULL && err[0]);
        return 0;
    }
    fuzz_flow_invariants(f);
    struct fuzz_vars fv;
    fuzz_vars_read(&fv, &in);
    fuzz_expand_all(f, &fv.v, false);
    fuzz_vars_done(&fv);
    struct fuzz_in good = {fuzz_good_values, sizeof(fuzz_good_values) - 1};
    fuzz_vars_read(&fv, &good);
    fuzz_expand_all(f, &fv.v, true);
    fuzz_vars_done(&fv);
    flow_free(f);
    return 0;
}
