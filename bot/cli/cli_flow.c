/*
 * cli_flow.c - `apbot flow check FILE...` and `apbot flow trace FLOW --invoice FILE[#N]`.
 *
 * check loads each flow exactly as `apbot run` would (schema, then the semantic checks) and
 * prints "FILE: ok" or every problem found, one per line as "FILE:LINE: message". Exit 0 when
 * every file is fine, CLI_EXIT_ERROR otherwise. Needs no database and no ERP.
 *
 * trace runs one invoice through a flow against an ERP - the login, the lookup, then the post
 * steps (or the follow-up steps on a saved draft the lookup found) - and prints every exchange
 * for the flow's author (bot/trace.c). It reads the invoice as enqueue does and hands the post
 * the invoice as the queue would give it back (its canonical JSON), but never opens the queue.
 * --dry-run stops right before the committing request (hooks.before_commit); without it the
 * invoice is really posted.
 */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/erp.h"
#include "apbot/erp_post.h"
#include "apbot/flow.h"
#include "apbot/http.h"
#include "apbot/invoice.h"
#include "apbot/mem.h"
#include "apbot/money.h"
#include "apbot/reader.h"
#include "apbot/text.h"
#include "apbot/trace.h"
#include "apbot/vendors.h"

#define CLI_FLOW_ERR_LEN (32 * 1024)

static void cli_flow_usage(FILE *out)
{
    fprintf(out,
            "usage: apbot flow check FILE...\n"
            "       apbot flow trace FLOW --invoice FILE[#N] [--erp URL] [--dry-run]\n"
            "                        [--vendors MAP.csv] [--pages]\n"
            "\n"
            "check: "
            "Validates flow files against the schema (flows/flow.rng) and checks their meaning:\n"
            "${...} variables and formatters, PCRE2 patterns, XPath, status specs, a completed\n"
            "rule with a (?<doc>...) group, exactly one step with commits=\"true\", policy\n"
            "numbers. Prints \"FILE: ok\" or every problem as \"FILE:LINE: message\".\n"
            "\n"
            "exit codes: 0 every file is valid, 1 some file has problems, 2 usage error\n"
            "\n"
            "trace: runs one invoice through the flow against the ERP and explains every\n"
            "exchange (see apbot flow trace --help). Start with --dry-run.\n");
}

static int cli_flow_check(int argc, char **argv)
{
    char *err = apbot_xmalloc(CLI_FLOW_ERR_LEN);
    int status = CLI_EXIT_OK, files = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            cli_flow_usage(stdout);
            free(err);
            return CLI_EXIT_OK;
        }
    }
    for (int i = 1; i < argc; i++) {
        struct flow *f = NULL;
        const char *path = argv[i];

        if (strcmp(path, "--") == 0)
            continue;
        if (path[0] == '-' && path[1] != '\0') {
            fprintf(stderr, "apbot flow check: unknown option %s\n", path);
            cli_flow_usage(stderr);
            free(err);
            return CLI_EXIT_USAGE;
        }
        files++;
        err[0] = '\0';
        if (flow_load(path, &f, err, CLI_FLOW_ERR_LEN) == APBOT_OK) {
            printf("%s: ok\n", path);
            flow_free(f);
        } else {
            printf("%s\n", err[0] ? err : "invalid flow");
            status = CLI_EXIT_ERROR;
        }
    }
    free(err);
    if (files == 0) {
        cli_flow_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    fflush(stdout);
    return status;
}

/* ---- flow trace -------------------------------------------------------------------------- */

static void cli_trace_usage(FILE *out)
{
    fprintf(out,
            "usage: apbot [--erp URL] flow trace FLOW --invoice FILE[#N] [--erp URL] [--dry-run]\n"
            "                                   [--vendors MAP.csv] [--pages]\n"
            "\n"
            "Runs one invoice through the flow against the ERP and explains every exchange,\n"
            "grouped by step: method, URL, status, the form found, every control submitted\n"
            "with where its value came from (page default, the flow's template, an option\n"
            "chosen by value or label, a control added), the button pressed, the rule that\n"
            "matched and why, the values captured, the lookup's hits and verdict.\n"
            "Order: log in, look the key up, then - only when the lookup proves the invoice\n"
            "absent - the post steps (or, for a saved draft it finds, the follow-up steps).\n"
            "  --invoice FILE[#N]  CSV, UBL, CII or Factur-X PDF, as enqueue reads them; #N\n"
            "                      picks the N-th invoice of the file (default the first)\n"
            "  --erp URL           ERP base URL (default $APBOT_ERP_URL or the flow's)\n"
            "  --dry-run           stop right before the committing step's request: nothing\n"
            "                      is booked (the steps before it run: they cannot book)\n"
            "  --vendors MAP.csv   map seller identifiers to ERP vendor ids, as enqueue does\n"
            "  --pages             print the page text of every answer (default: only of\n"
            "                      answers that went wrong)\n"
            "WITHOUT --dry-run THE INVOICE IS REALLY POSTED into the ERP (use a test system).\n"
            "Never opens the queue database. Credentials: APBOT_ERP_USER, APBOT_ERP_PASSWORD\n"
            "(never printed).\n"
            "Exit: 0 completed (booked and confirmed, already in the ERP, or a dry run that\n"
            "reached the committing step), 3 rejected (a business exception: the ERP refused\n"
            "the invoice, or a value it cannot take), 1 anything else (not sent, unknown,\n"
            "lookup failed, login refused, ...), 2 usage.\n");
}

/* What reading the invoice file found. */
struct trace_pick {
    long want;        /* the N-th good invoice, from 1 */
    long seen;        /* good invoices read so far */
    long refused;     /* refused invoices or rows */
    char *json;       /* the wanted invoice's canonical payload, as the queue keeps it */
    char where[512];  /* "file:12" */
    char reason[512]; /* why it could not be keyed */
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
    fprintf(stderr, "refused: %s: %s\n", text_escape_into(w, sizeof(w), where, 0),
            text_escape_into(r, sizeof(r), reason, 0));
}

/* Splits "FILE#N": a trailing "#digits" picks the N-th invoice. Returns false for a bad N. */
static bool trace_split_invoice(const char *arg, char **ret_path, long *ret_n)
{
    const char *hash = strrchr(arg, '#');
    *ret_n = 1;
    if (hash && hash[1]) {
        char *end = NULL;
        errno = 0;
        long n = strtol(hash + 1, &end, 10);
        if (errno || !end || *end || hash[1] < '0' || hash[1] > '9')
            goto plain;
        if (n < 1 || n > 1000000)
            return false;
        *ret_n = n;
        *ret_path = apbot_xstrndup(arg, (size_t)(hash - arg));
        return **ret_path != '\0';
    }
plain:
    *ret_path = apbot_xstrdup(arg);
    return **ret_path != '\0';
}

/* State shared with the post's hooks. */
struct trace_run {
    struct trace_printer *pr;
    FILE *out;
    bool dry_run;
    bool saved;
    char doc[128];
};

static bool trace_hook_before_commit(void *ctx)
{
    const struct trace_run *tr = ctx;
    return !tr->dry_run;
}

static bool trace_hook_saved(void *ctx, const char *doc)
{
    struct trace_run *tr = ctx;
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
    const struct trace_run *tr = ctx;
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
    for (size_t i = 0; i < inv->n_lines; i++) {
        const struct invoice_line *l = &inv->lines[i];
        fprintf(out, "            line %zu: account %s, net %s, tax %s, \"%s\"\n", i + 1,
                l->gl_account ? text_escape_into(a, sizeof(a), l->gl_account, 0) : "-",
                money_text(l->net, inv->exponent, m1, sizeof(m1)),
                money_text(l->tax, inv->exponent, m2, sizeof(m2)),
                text_escape_into(b, sizeof(b), l->description ? l->description : "", 0));
    }
}

static int trace_exit(enum trace_end e)
{
    switch (e) {
    case TRACE_END_OK:
        return CLI_EXIT_OK;
    case TRACE_END_REJECTED:
        return CLI_EXIT_REFUSED;
    case TRACE_END_FAILED:
    case TRACE_END__COUNT:
        break;
    }
    return CLI_EXIT_ERROR;
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

static int cli_flow_trace(const struct cli_ctx *ctx, int argc, char **argv)
{
    const char *flow_path = NULL, *invoice_arg = NULL, *vendors_path = NULL;
    const char *erp_url = ctx->erp_url;
    bool dry_run = false, pages = false;
    char *err = NULL, *inv_path = NULL;
    long inv_n = 1;
    struct flow *f = NULL;
    struct vendor_map *vm = NULL;
    struct erp_session *s = NULL;
    struct trace_printer *pr = NULL;
    struct trace_pick pk;
    struct invoice inv;
    struct erp_lookup_result lres;
    bool http_inited = false;
    int status = CLI_EXIT_ERROR, rc;
    char key[INVOICE_KEY_LEN + 1] = "", t1[1024], t2[1024];

    memset(&pk, 0, sizeof(pk));
    memset(&lres, 0, sizeof(lres));
    invoice_init(&inv);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            cli_trace_usage(stdout);
            return CLI_EXIT_OK;
        } else if (strcmp(a, "--invoice") == 0 && v) {
            invoice_arg = v;
            i++;
        } else if (strncmp(a, "--invoice=", 10) == 0) {
            invoice_arg = a + 10;
        } else if (strcmp(a, "--erp") == 0 && v) {
            erp_url = v;
            i++;
        } else if (strncmp(a, "--erp=", 6) == 0) {
            erp_url = a + 6;
        } else if (strcmp(a, "--vendors") == 0 && v) {
            vendors_path = v;
            i++;
        } else if (strncmp(a, "--vendors=", 10) == 0) {
            vendors_path = a + 10;
        } else if (strcmp(a, "--dry-run") == 0) {
            dry_run = true;
        } else if (strcmp(a, "--pages") == 0) {
            pages = true;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "apbot flow trace: unknown or incomplete option '%s'\n",
                    text_escape_into(t1, sizeof(t1), a, 0));
            cli_trace_usage(stderr);
            return CLI_EXIT_USAGE;
        } else if (!flow_path) {
            flow_path = a;
        } else {
            fprintf(stderr, "apbot flow trace: one flow at a time ('%s' is extra)\n",
                    text_escape_into(t1, sizeof(t1), a, 0));
            return CLI_EXIT_USAGE;
        }
    }
    if (!flow_path || !invoice_arg) {
        fprintf(stderr, "apbot flow trace: %s\n",
                !flow_path ? "FLOW is required" : "--invoice FILE[#N] is required");
        cli_trace_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!trace_split_invoice(invoice_arg, &inv_path, &inv_n)) {
        fprintf(stderr, "apbot flow trace: --invoice wants FILE or FILE#N with N from 1\n");
        free(inv_path);
        return CLI_EXIT_USAGE;
    }

    err = apbot_xcalloc(1, CLI_FLOW_ERR_LEN);
    if (flow_load(flow_path, &f, err, CLI_FLOW_ERR_LEN) != APBOT_OK) {
        fprintf(stderr, "%s\napbot flow trace: the flow is not valid (see apbot flow check)\n",
                err[0] ? err : "invalid flow");
        goto out;
    }
    if (vendors_path && vendor_map_load(vendors_path, &vm, err, CLI_FLOW_ERR_LEN) != APBOT_OK) {
        fprintf(stderr, "apbot flow trace: %s\n", text_escape_into(t1, sizeof(t1), err, 0));
        goto out;
    }

    /* The invoice, as the queue would hold it: read, then its canonical payload read back. */
    pk.want = inv_n;
    struct invoice_sink sink = {.accept = trace_accept, .refuse = trace_refuse, .ctx = &pk};
    rc = reader_read_file(inv_path, vm, &sink, err, CLI_FLOW_ERR_LEN);
    if (pk.seen < pk.want) {
        if (rc != APBOT_OK)
            fprintf(stderr, "apbot flow trace: %s\n", text_escape_into(t1, sizeof(t1), err, 0));
        else
            fprintf(stderr,
                    "apbot flow trace: %s holds %ld readable invoice%s (%ld refused), not #%ld\n",
                    text_escape_into(t1, sizeof(t1), inv_path, 0), pk.seen, pk.seen == 1 ? "" : "s",
                    pk.refused, pk.want);
        goto out;
    }
    if (!pk.json || invoice_from_json(pk.json, &inv, err, CLI_FLOW_ERR_LEN) != APBOT_OK ||
        invoice_identity_key(&inv, key) != APBOT_OK) {
        fprintf(stderr, "apbot flow trace: %s: the invoice cannot be keyed: %s\n",
                text_escape_into(t1, sizeof(t1), pk.where, 0),
                text_escape_into(t2, sizeof(t2), pk.reason[0] ? pk.reason : err, 0));
        goto out;
    }

    if (http_global_init() != APBOT_OK) {
        fprintf(stderr, "apbot flow trace: cannot initialise libcurl\n");
        goto out;
    }
    http_inited = true;
    if (erp_open(f, erp_url, NULL, &s, err, CLI_FLOW_ERR_LEN) != APBOT_OK) {
        fprintf(stderr, "apbot flow trace: %s\n", text_escape_into(t1, sizeof(t1), err, 0));
        goto out;
    }

    /* ---- the header ---- */
    char *cut = flow_key_cut(f, key);
    size_t ci = flow_commit_index(f);
    printf("apbot flow trace: flow '%s' (%s)\n", text_escape_into(t1, sizeof(t1), f->name, 0),
           text_escape_into(t2, sizeof(t2), flow_path, 0));
    printf("  ERP       %s%s\n", text_escape_into(t1, sizeof(t1), erp_base_url(s), 0),
           f->basic_auth ? " (HTTP Basic on every request)" : "");
    trace_print_invoice(stdout, &inv, invoice_arg, pk.where);
    printf("  key       %s (written and compared: %s)\n", key, cut ? cut : key);
    free(cut);
    if (dry_run)
        printf("  mode      --dry-run: log in, look up, run the steps before the committing step "
               "'%s'; its request is shown, not sent. Nothing is booked.\n",
               text_escape_into(t1, sizeof(t1), f->steps[ci].name, 0));
    else
        printf("  mode      REAL: the invoice is posted into this ERP (the committing step '%s' "
               "is sent)\n",
               text_escape_into(t1, sizeof(t1), f->steps[ci].name, 0));
    fflush(stdout);

    pr = trace_printer_new(stdout, f, &inv, key);
    trace_printer_show_pages(pr, pages);
    erp_set_trace(s, trace_print, pr);

    /* ---- login ---- */
    if (f->login.present && erp_login(s, err, CLI_FLOW_ERR_LEN) != APBOT_OK) {
        trace_printer_section(pr, "result");
        printf("login %s: %s\n", erp_login_refused(s) ? "REFUSED" : "failed",
               text_escape_into(t1, sizeof(t1), err, 0));
        printf("apbot run would stop%s (exit 4); nothing was posted.\n",
               erp_login_refused(s) ? " after this one refusal" : "");
        goto out;
    }

    /* ---- lookup ---- */
    rc = erp_lookup(s, key, &inv, inv.currency, &lres, err, CLI_FLOW_ERR_LEN);
    if (rc != APBOT_OK) {
        trace_printer_section(pr, "result");
        printf("lookup: %s\nnothing was posted.\n", text_escape_into(t1, sizeof(t1), err, 0));
        goto out;
    }
    char hitwhy[512] = "";
    enum trace_hit hit = TRACE_HIT_NO_DOC;
    if (lres.answer == ERP_FOUND || lres.answer == ERP_FOUND_UNFINISHED) {
        trace_print_hits(pr, &lres.hits);
        hit = trace_check_hits(&lres.hits, &inv, hitwhy, sizeof(hitwhy));
        printf("    compare   %s\n", hitwhy);
    } else if (lres.answer == ERP_FAILED) {
        printf("    why       %s\n", text_escape_into(t1, sizeof(t1), lres.detail, 0));
    }
    enum trace_next next = trace_after_lookup(lres.answer, hit, dry_run);
    printf("    next      %s\n", trace_next_words(next));
    fflush(stdout);

    if (next != TRACE_NEXT_POST && next != TRACE_NEXT_FOLLOWUPS) {
        trace_printer_section(pr, "result");
        if (next == TRACE_NEXT_DONE || next == TRACE_NEXT_SKIP_FOLLOWUPS)
            printf("in the ERP as %s; nothing was posted.\n",
                   text_escape_into(t1, sizeof(t1), lres.hits.rows[0].doc, 0));
        else
            printf("nothing was posted: %s\n", trace_next_words(next));
        printf("exchanges %d, committing requests sent 0\n", trace_printer_exchanges(pr));
        status = trace_exit(trace_end_of_lookup(next));
        goto out;
    }

    /* ---- the post ---- */
    struct trace_run tr = {.pr = pr, .out = stdout, .dry_run = dry_run};
    struct erp_post_hooks hooks = {
        .ctx = &tr,
        .before_commit = trace_hook_before_commit,
        .saved = trace_hook_saved,
        .trace = trace_hook_trace,
    };
    struct erp_post_result res;
    const bool followups = next == TRACE_NEXT_FOLLOWUPS;
    rc =
        erp_post_run(s, &inv, key, followups ? ERP_POST_FROM_FOLLOWUPS : ERP_POST_FROM_START,
                     followups ? lres.hits.rows[0].doc : NULL, &hooks, &res, err, CLI_FLOW_ERR_LEN);
    trace_printer_section(pr, "result");
    if (rc != APBOT_OK) {
        printf("the post could not run: %s\n", text_escape_into(t1, sizeof(t1), err, 0));
        goto out;
    }
    enum trace_end end = trace_end_of_post(&res, dry_run);
    if (dry_run && res.released && !res.commit_sent)
        printf("dry run: stopped before the committing step '%s': [%d] shows the request it "
               "would have sent. Nothing was booked.\n",
               text_escape_into(t1, sizeof(t1), f->steps[ci].name, 0), trace_printer_exchanges(pr));
    else
        printf("%s\n", trace_run_meaning(&res, dry_run));
    if (res.doc[0])
        printf("document  %s\n", text_escape_into(t1, sizeof(t1), res.doc, 0));
    if (res.rule[0])
        printf("rule      %s\n", text_escape_into(t1, sizeof(t1), res.rule, 0));
    if (res.reason[0])
        printf("reason    %s\n", text_escape_into(t1, sizeof(t1), res.reason, 0));
    if (res.detail[0])
        printf("detail    %s\n", text_escape_into(t1, sizeof(t1), res.detail, 0));
    printf("exchanges %d, committing requests sent %d%s\n", trace_printer_exchanges(pr),
           trace_printer_commits(pr),
           dry_run && end == TRACE_END_OK ? " (run without --dry-run to book the invoice)" : "");
    status = trace_exit(end);
out:
    fflush(stdout);
    erp_lookup_result_done(&lres);
    trace_printer_free(pr);
    erp_close(s);
    if (http_inited)
        http_global_cleanup();
    invoice_done(&inv);
    vendor_map_free(vm);
    flow_free(f);
    free(pk.json);
    free(inv_path);
    free(err);
    return status;
}

int cli_flow(const struct cli_ctx *ctx, int argc, char **argv)
{
    if (argc < 2) {
        cli_flow_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        cli_flow_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(argv[1], "check") == 0)
        return cli_flow_check(argc - 1, argv + 1);
    if (strcmp(argv[1], "trace") == 0)
        return cli_flow_trace(ctx, argc - 1, argv + 1);
    fprintf(stderr, "apbot flow: unknown subcommand %s\n", argv[1]);
    cli_flow_usage(stderr);
    return CLI_EXIT_USAGE;
}
