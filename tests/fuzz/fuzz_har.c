/*
 * fuzz_har.c - libFuzzer target: a HAR file, untrusted input to `apbot flow record`
 * (bot/record/). The input is read by the HAR reader (a refusal says why: APBOT_E_PARSE or
 * APBOT_E_LIMIT only); what it reads keeps the bounds har.h promises (entries, body sizes, every
 * body NUL-ended at its length). Then the whole recorder runs on it with a fixed sample invoice
 * and a password, as record_run does but without files: the draft it writes is well-formed XML
 * within its bound, and it holds the password only when the recorder's own check (which keeps
 * record_run from writing it) says so.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>

#include "apbot/invoice.h"
#include "apbot/record.h"
#include "record/har.h"
#include "record/record-int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_PASSWORD "acme-demo"

/* The sample of tests/data/har/sample.csv, built once. */
static struct invoice *sample(void)
{
    static struct invoice inv;
    static bool done;
    if (done)
        return &inv;
    static const char json[] =
        "{\"v\":1,\"vendor_id\":\"100001\",\"vendor_name\":\"Papier M\\u00fcller GmbH\","
        "\"invoice_number\":\"REC-4711\",\"doc_type\":\"invoice\",\"issue_date\":\"2026-11-16\","
        "\"due_date\":\"2026-12-16\",\"currency\":\"EUR\",\"exponent\":2,\"net_total\":123456,"
        "\"tax_total\":23457,\"payable\":146913,\"lines\":[{\"description\":\"Paper A4\","
        "\"gl_account\":\"5700\",\"net\":100000,\"tax\":19000},{\"description\":\"Toner "
        "cartridges\",\"gl_account\":\"6000\",\"net\":23456,\"tax\":4457}]}";
    char err[256];
    invoice_init(&inv);
    if (invoice_from_json(json, &inv, err, sizeof(err)) != APBOT_OK) {
        /* the payload's shape changed: build it from the CSV reader's fields instead */
        invoice_done(&inv);
        invoice_init(&inv);
        invoice_set_str(&inv.vendor_id, "100001");
        invoice_set_str(&inv.invoice_number, "REC-4711");
        memcpy(inv.issue_date, "2026-11-16", 11);
        memcpy(inv.currency, "EUR", 4);
        inv.exponent = 2;
        inv.payable = inv.net_total = 146913;
        struct invoice_line l = {.gl_account = (char *)"5700", .net = 146913};
        invoice_add_line(&inv, &l);
    }
    done = true;
    return &inv;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct har *h = NULL;
    char err[512] = "";

    if (size > (1u << 20))
        return 0;
    int rc = har_parse((const char *)data, size, &h, err, sizeof(err));
    if (rc != APBOT_OK) {
        if ((rc != APBOT_E_PARSE && rc != APBOT_E_LIMIT) || !err[0] || h)
            abort();
        return 0;
    }
    if (h->n > HAR_ENTRIES_MAX)
        abort();
    for (size_t i = 0; i < h->n; i++) {
        const struct har_entry *e = &h->entries[i];
        if (!e->method[0] || !e->url[0] || e->body_len > HAR_BODY_MAX || e->body[e->body_len] ||
            strlen(e->req_body) != e->req_len || e->n_req_headers > HAR_HEADERS_MAX ||
            (e->status != 0 && (e->status < 100 || e->status > 999)))
            abort();
    }

    /* the recorder, end to end, in memory */
    struct record_request rq = {.user = "clerk", .password = FUZZ_PASSWORD, .out_path = "x.xml"};
    struct rec r;
    rec_begin(&r, &rq, h, sample());
    rec_budget_reset(256u * 1024 * 1024); /* a fuzz input is small: a tighter bound */
    rec_ex_build(&r);
    if (r.origin[0]) {
        rec_analyse(&r);
        size_t len = 0;
        char *draft = rec_draft(&r, "fuzz", r.n_ex, &len);
        if (!r.full) {
            if (len > REC_DRAFT_MAX || strlen(draft) != len)
                abort();
            xmlDocPtr doc =
                xmlReadMemory(draft, (int)len, "draft.xml", NULL,
                              XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
            if (!doc)
                abort(); /* the draft is XML whatever the HAR held */
            xmlFreeDoc(doc);
            if (strstr(draft, FUZZ_PASSWORD) && !rec_secret_in(&r, draft, len))
                abort(); /* the check record_run makes would have let it through */
        }
        free(draft);
    }
    rec_end(&r);
    har_free(h);
    return 0;
}
