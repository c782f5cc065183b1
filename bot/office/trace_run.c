/*
 * trace_run.c - `apbot flow trace` from end to end (trace.h): load the flow, read the invoice as
 * enqueue does and hand it on as the queue would give it back (its canonical JSON), log in, look
 * the key up, then run the post steps (or the follow-up steps on a saved draft the lookup found),
 * every exchange printed by the printer of trace.c. It never opens the queue. --dry-run stops
 * right before the committing request (hooks.before_commit); without it the invoice is really
 * posted.
 */
#include "apbot/trace.h"

#include <stdlib.h>
#include <string.h>

#include "apbot/erp.h"
#include "apbot/flow.h"
#include "apbot/invoice.h"
#include "apbot/linetax.h"
#include "apbot/mem.h"
#include "apbot/money.h"
#include "apbot/reader.h"
#include "apbot/text.h"
#include "apbot/vendors.h"
#include "erp/erp_post.h"
#include "office/trace-int.h"

#define TRACE_ERR_LEN (32 * 1024)

/* What reading the invoice file found. */
struct trace_pick {
    long want;        /* the N-th good invoice, from 1 */
    long seen;        /* good invoices read so far */
    long refused;     /* refused invoices or rows */
    char *json;       /* the wanted invoice's canonical payload, as the queue keeps it */
    char where[512];  /* "file:12" */
    char reason[512]; /* why it could not be keyed */
    FILE *errout;     /* where refusals are told */
};

static int trace_accept(void *ctx, const struct invoice *inv, const char *where)
{
    struct trace_pick *pk = ctx;
    if (++pk->seen != pk->want)
        return 0;
    snprintf(pk->where, sizeof(pk->where), "%s", where ? where : "");
    pk->json = invoice_to_json(inv);
    if (!pk->json)
        snprintf(pk->reason, sizeof(pk->reason), "the invoice has no canonical form");
    return -1; /* found: stop reading */
}

static void trace_refuse(void *ctx, const char *where, const char *reason)
{
    struct trace_pick *pk = ctx;
    char w[512], r[512];
    pk->refused++;
    fprintf(pk->errout, "refused: %s: %s\n", text_escape_into(w, sizeof(w), where, 0),
            text_escape_into(r, sizeof(r), reason, 0));
}

/* State shared with the post's hooks. */
struct trace_hooks_ctx {
    struct trace_printer *pr;
    FILE *out;
    bool dry_run;
    bool saved;
    char doc[128];
};

static bool trace_hook_before_commit(void *ctx)
{
    const struct trace_hooks_ctx *tr = ctx;
    return !tr->dry_run;
}

static bool trace_hook_saved(void *ctx, const char *doc)
{
    struct trace_hooks_ctx *tr = ctx;
    char d[160];
    tr->saved = true;
    snprintf(tr->doc, sizeof(tr->doc), "%s", doc ? doc : "");
    fprintf(tr->out,
            "    saved     the ERP holds the document as %s: apbot run records it here (posting "
            "-> finishing), before any follow-up step, and never posts this invoice again\n",
            text_escape_into(d, sizeof(d), doc, 0));
    return true;
}

static void trace_hook_trace(void *ctx, const struct erp_trace *t)
{
    const struct trace_hooks_ctx *tr = ctx;
    trace_print(tr->pr, t);
}

static void trace_print_invoice(FILE *out, const struct invoice *inv, const char *arg,
                                const char *where)
{
    char a[512], b[512], c[512], m1[64], m2[64], m3[64];
    fprintf(out, "  invoice   %s (%s)\n", text_escape_into(a, sizeof(a), arg, 0),
            text_escape_into(b, sizeof(b), where, 0));
    fprintf(out, "            vendor %s%s%s%s, %s %s of %s, %s %s (net %s, tax %s), %zu line%s\n",
            text_escape_into(a, sizeof(a), inv->vendor_id, 0), inv->vendor_name ? " (" : "",
            inv->vendor_name ? text_escape_into(b, sizeof(b), inv->vendor_name, 0) : "",
            inv->vendor_name ? ")" : "", invoice_doc_type_name(inv->doc_type),
            text_escape_into(c, sizeof(c), inv->invoice_number, 0), inv->issue_date, inv->currency,
            money_text(inv->payable, inv->exponent, m1, sizeof(m1)),
            money_text(inv->net_total, inv->exponent, m2, sizeof(m2)),
            money_text(inv->tax_total, inv->exponent, m3, sizeof(m3)), inv->n_lines,
            inv->n_lines == 1 ? "" : "s");
    /* what ${line.tax} books where the lines state no tax: each line's share (linetax.h) */
    struct linetax t;
    linetax_init(&t, inv);
    for (size_t i = 0; i < inv->n_lines; i++) {
        const struct invoice_line *l = &inv->lines[i];
        char share[700] = "";
        if (t.derived)
            snprintf(share, sizeof(share), " (its share of the invoice's tax at %s: %s)",
                     text_escape_into(c, sizeof(c), l->tax_category ? l->tax_category : "-", 0),
                     money_text(t.tax[i], inv->exponent, m3, sizeof(m3)));
        fprintf(out, "            line %zu: account %s, net %s, tax %s%s, \"%s\"\n", i + 1,
                l->gl_account ? text_escape_into(a, sizeof(a), l->gl_account, 0) : "-",
                money_text(l->net, inv->exponent, m1, sizeof(m1)),
                money_text(l->tax, inv->exponent, m2, sizeof(m2)), share,
                text_escape_into(b, sizeof(b), l->description ? l->description : "", 0));
    }
    if (!t.ok && inv->n_lines > 0)
        fprintf(out, "            line taxes: %s (a flow that books them cannot)\n",
                text_escape_into(a, sizeof(a), t.why, 0));
    linetax_done(&t);
}

static const char *trace_next_words(enum trace_next n)
{
    switch (n) {
    case TRACE_NEXT_POST:
        return "not in the ERP (a proven absence): the post follows";
    case TRACE_NEXT_FOLLOWUPS:
        return "saved but not finished: the follow-up steps follow, on that document (never a "
               "new post)";
    case TRACE_NEXT_SKIP_FOLLOWUPS:
        return "saved but not finished: apbot run would run the follow-up steps on that "
               "document; not under --dry-run (they change the ERP)";
    case TRACE_NEXT_DONE:
        return "already in the ERP and finished: apbot run would adopt it (completed); nothing "
               "is posted";
    case TRACE_NEXT_CONFLICT:
        return "in the ERP, but not as this invoice: apbot run would put it in manual review; "
               "nothing is posted";
    case TRACE_NEXT_FAILED:
    case TRACE_NEXT__COUNT:
        break;
    }
    return "the lookup proved nothing: apbot run would look again later; nothing is posted";
}

enum trace_end trace_run(const struct trace_request *rq, FILE *out, FILE *errout)
{
    char *err = NULL;
    struct flow *f = NULL;
    struct vendor_map *vm = NULL;
    struct erp_session *s = NULL;
    struct trace_printer *pr = NULL;
    struct trace_pick pk;
    struct invoice inv;
    struct erp_lookup_result lres;
    enum trace_end status = TRACE_END_FAILED;
    int rc;
    char key[INVOICE_KEY_LEN + 1] = "", t1[1024], t2[1024];

    memset(&pk, 0, sizeof(pk));
    memset(&lres, 0, sizeof(lres));
    invoice_init(&inv);
    err = apbot_xcalloc(1, TRACE_ERR_LEN);
    if (flow_load(rq->flow_path, &f, err, TRACE_ERR_LEN) != APBOT_OK) {
        fprintf(errout, "%s\napbot flow trace: the flow is not valid (see apbot flow check)\n",
                err[0] ? err : "invalid flow");
        goto out;
    }
    if (rq->vendors_path &&
        vendor_map_load(rq->vendors_path, &vm, err, TRACE_ERR_LEN) != APBOT_OK) {
        fprintf(errout, "apbot flow trace: %s\n", text_escape_into(t1, sizeof(t1), err, 0));
        goto out;
    }

    /* The invoice, as the queue would hold it: read, then its canonical payload read back. */
    pk.want = rq->invoice_n;
    pk.errout = errout;
    struct invoice_sink sink = {.accept = trace_accept, .refuse = trace_refuse, .ctx = &pk};
    rc = reader_read_file(rq->invoice_path, vm, &sink, err, TRACE_ERR_LEN);
    if (pk.seen < pk.want) {
        if (rc != APBOT_OK)
            fprintf(errout, "apbot flow trace: %s\n", text_escape_into(t1, sizeof(t1), err, 0));
        else
            fprintf(errout,
                    "apbot flow trace: %s holds %ld readable invoice%s (%ld refused), not #%ld\n",
                    text_escape_into(t1, sizeof(t1), rq->invoice_path, 0), pk.seen,
                    pk.seen == 1 ? "" : "s", pk.refused, pk.want);
        goto out;
    }
    if (!pk.json || invoice_from_json(pk.json, &inv, err, TRACE_ERR_LEN) != APBOT_OK ||
        invoice_identity_key(&inv, key) != APBOT_OK) {
        fprintf(errout, "apbot flow trace: %s: the invoice cannot be keyed: %s\n",
                text_escape_into(t1, sizeof(t1), pk.where, 0),
                text_escape_into(t2, sizeof(t2), pk.reason[0] ? pk.reason : err, 0));
        goto out;
    }

    if (erp_open(f, rq->erp_url, NULL, &s, err, TRACE_ERR_LEN) != APBOT_OK) {
        fprintf(errout, "apbot flow trace: %s\n", text_escape_into(t1, sizeof(t1), err, 0));
        goto out;
    }

    /* ---- the header ---- */
    char *cut = flow_key_cut(f, key);
    size_t ci = flow_commit_index(f);
    fprintf(out, "apbot flow trace: flow '%s' (%s)\n", text_escape_into(t1, sizeof(t1), f->name, 0),
            text_escape_into(t2, sizeof(t2), rq->flow_path, 0));
    fprintf(out, "  ERP       %s%s\n", text_escape_into(t1, sizeof(t1), erp_base_url(s), 0),
            f->basic_auth ? " (HTTP Basic on every request)" : "");
    trace_print_invoice(out, &inv, rq->invoice_label, pk.where);
    fprintf(out, "  key       %s (written and compared: %s)\n", key, cut ? cut : key);
    free(cut);
    if (rq->dry_run)
        fprintf(out,
                "  mode      --dry-run: log in, look up, run the steps before the committing step "
                "'%s'; its request is shown, not sent. Nothing is booked.\n",
                text_escape_into(t1, sizeof(t1), f->steps[ci].name, 0));
    else
        fprintf(out,
                "  mode      REAL: the invoice is posted into this ERP (the committing step '%s' "
                "is sent)\n",
                text_escape_into(t1, sizeof(t1), f->steps[ci].name, 0));
    fflush(out);

    pr = trace_printer_new(out, f, &inv, key);
    trace_printer_show_pages(pr, rq->pages);
    erp_set_trace(s, trace_print, pr);

    /* ---- login ---- */
    if (f->login.present && erp_login(s, err, TRACE_ERR_LEN) != APBOT_OK) {
        trace_printer_section(pr, "result");
        fprintf(out, "login %s: %s\n", erp_login_refused(s) ? "REFUSED" : "failed",
                text_escape_into(t1, sizeof(t1), err, 0));
        fprintf(out, "apbot run would stop%s (exit 4); nothing was posted.\n",
                erp_login_refused(s) ? " after this one refusal" : "");
        goto out;
    }

    /* ---- lookup ---- */
    rc = erp_lookup(s, key, &inv, inv.currency, &lres, err, TRACE_ERR_LEN);
    if (rc != APBOT_OK) {
        trace_printer_section(pr, "result");
        fprintf(out, "lookup: %s\nnothing was posted.\n", text_escape_into(t1, sizeof(t1), err, 0));
        goto out;
    }
    char hitwhy[512] = "";
    enum trace_hit hit = TRACE_HIT_NO_DOC;
    if (lres.answer == ERP_FOUND || lres.answer == ERP_FOUND_UNFINISHED) {
        trace_print_hits(pr, &lres.hits);
        hit = trace_check_hits(&lres.hits, &inv, hitwhy, sizeof(hitwhy));
        fprintf(out, "    compare   %s\n", hitwhy);
    } else if (lres.answer == ERP_FAILED) {
        fprintf(out, "    why       %s\n", text_escape_into(t1, sizeof(t1), lres.detail, 0));
    }
    enum trace_next next = trace_after_lookup(lres.answer, hit, rq->dry_run);
    fprintf(out, "    next      %s\n", trace_next_words(next));
    fflush(out);

    if (next != TRACE_NEXT_POST && next != TRACE_NEXT_FOLLOWUPS) {
        trace_printer_section(pr, "result");
        if (next == TRACE_NEXT_DONE || next == TRACE_NEXT_SKIP_FOLLOWUPS)
            fprintf(out, "in the ERP as %s; nothing was posted.\n",
                    text_escape_into(t1, sizeof(t1), lres.hits.rows[0].doc, 0));
        else
            fprintf(out, "nothing was posted: %s\n", trace_next_words(next));
        fprintf(out, "exchanges %d, committing requests sent 0\n", trace_printer_exchanges(pr));
        status = trace_end_of_lookup(next);
        goto out;
    }

    /* ---- the post ---- */
    struct trace_hooks_ctx tr = {.pr = pr, .out = out, .dry_run = rq->dry_run};
    struct erp_post_hooks hooks = {
        .ctx = &tr,
        .before_commit = trace_hook_before_commit,
        .saved = trace_hook_saved,
        .trace = trace_hook_trace,
    };
    struct erp_post_result res;
    const bool followups = next == TRACE_NEXT_FOLLOWUPS;
    rc = erp_post_run(s, &inv, key, followups ? ERP_POST_FROM_FOLLOWUPS : ERP_POST_FROM_START,
                      followups ? lres.hits.rows[0].doc : NULL, &hooks, &res, err, TRACE_ERR_LEN);
    trace_printer_section(pr, "result");
    if (rc != APBOT_OK) {
        fprintf(out, "the post could not run: %s\n", text_escape_into(t1, sizeof(t1), err, 0));
        goto out;
    }
    enum trace_end end = trace_end_of_post(&res, rq->dry_run);
    if (rq->dry_run && res.released && !res.commit_sent)
        fprintf(out,
                "dry run: stopped before the committing step '%s': [%d] shows the request it "
                "would have sent. Nothing was booked.\n",
                text_escape_into(t1, sizeof(t1), f->steps[ci].name, 0),
                trace_printer_exchanges(pr));
    else
        fprintf(out, "%s\n", trace_run_meaning(&res, rq->dry_run));
    if (res.doc[0])
        fprintf(out, "document  %s\n", text_escape_into(t1, sizeof(t1), res.doc, 0));
    if (res.rule[0])
        fprintf(out, "rule      %s\n", text_escape_into(t1, sizeof(t1), res.rule, 0));
    if (res.reason[0])
        fprintf(out, "reason    %s\n", text_escape_into(t1, sizeof(t1), res.reason, 0));
    if (res.detail[0])
        fprintf(out, "detail    %s\n", text_escape_into(t1, sizeof(t1), res.detail, 0));
    fprintf(out, "exchanges %d, committing requests sent %d%s\n", trace_printer_exchanges(pr),
            trace_printer_commits(pr),
            rq->dry_run && end == TRACE_END_OK ? " (run without --dry-run to book the invoice)"
                                               : "");
    status = end;
out:
    fflush(out);
    erp_lookup_result_done(&lres);
    trace_printer_free(pr);
    erp_close(s);
    invoice_done(&inv);
    vendor_map_free(vm);
    flow_free(f);
    free(pk.json);
    free(err);
    return status;
}
