/*
 * invariants.c - checks the queue against the simulator's ground truth: the promise "no invoice
 * booked twice, no invoice lost" in countable form. Reads /_sim/ledger.csv, /_sim/lines.csv and
 * /_sim/stats through sim_client, walks every item with store_each, and compares references,
 * document numbers, amounts, approval and every line (account and amount) exactly (minor
 * units, never floating point).
 */
#include "invariants.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/invoice.h"
#include "apbot/linetax.h"
#include "apbot/machine.h"
#include "apbot/money.h"
#include "apbot/store.h"
#include "sim_client.h"

#define CSV_FIELDS_MAX 16

/* ledger.csv columns */
enum { L_DOC, L_VENDOR, L_INVNO, L_DATE, L_CURRENCY, L_AMOUNT, L_REF, L_BOOKED, L_STATUS };
/* lines.csv columns */
enum { N_DOC, N_LINE, N_GL, N_AMOUNT, N_TEXT };

struct csv_row {
    char *f[CSV_FIELDS_MAX];
};

struct csv_table {
    struct csv_row *rows;
    size_t n, cap;
};

static void problem(struct inv_report *r, const char *fmt, ...)
{
    if (r->first_problem[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->first_problem, sizeof(r->first_problem), fmt, ap);
    va_end(ap);
}

/* Splits one CSV record (RFC 4180 quotes) at *pp into row; advances *pp past the line. */
static void parse_record(const char **pp, struct csv_row *row)
{
    const char *p = *pp;
    for (int k = 0; k < CSV_FIELDS_MAX; k++) {
        size_t cap = 64, len = 0;
        char *v = malloc(cap);
        if (!v)
            abort();
        bool quoted = *p == '"';
        if (quoted)
            p++;
        for (; *p; p++) {
            if (quoted && *p == '"' && p[1] == '"') {
                p++;
            } else if (quoted && *p == '"') {
                quoted = false;
                continue;
            } else if (!quoted && (*p == ',' || *p == '\n' || *p == '\r')) {
                break;
            }
            if (len + 2 > cap) {
                cap *= 2;
                char *g = realloc(v, cap);
                if (!g)
                    abort();
                v = g;
            }
            v[len++] = *p;
        }
        v[len] = '\0';
        row->f[k] = v;
        if (*p == ',')
            p++;
        else
            break;
    }
    while (*p && *p != '\n')
        p++;
    if (*p == '\n')
        p++;
    *pp = p;
}

static void table_free(struct csv_table *t)
{
    for (size_t i = 0; i < t->n; i++)
        for (int k = 0; k < CSV_FIELDS_MAX; k++)
            free(t->rows[i].f[k]);
    free(t->rows);
    memset(t, 0, sizeof(*t));
}

/* Parses csv (header skipped) into t. */
static void table_parse(const char *csv, struct csv_table *t)
{
    memset(t, 0, sizeof(*t));
    const char *p = strchr(csv, '\n'); /* skip the header */
    p = p ? p + 1 : csv + strlen(csv);
    while (*p) {
        if (*p == '\n' || *p == '\r') {
            p++;
            continue;
        }
        if (t->n == t->cap) {
            t->cap = t->cap ? t->cap * 2 : 64;
            struct csv_row *g = realloc(t->rows, t->cap * sizeof(*g));
            if (!g)
                abort();
            t->rows = g;
        }
        struct csv_row *row = &t->rows[t->n++];
        memset(row, 0, sizeof(*row));
        parse_record(&p, row);
    }
}

static const char *fld(const struct csv_row *row, int k)
{
    return row->f[k] ? row->f[k] : "";
}

struct check {
    struct csv_table *ledger;
    struct csv_table *lines;
    enum inv_lines line_amounts; /* net or gross */
    int key_length;
    bool allow_pending;
    struct inv_report *r;
    /* allow_pending: the items already settled before the ledger was read, sorted */
    int64_t *settled;
    size_t n_settled, cap_settled;
    bool have_settled;
};

static int note_settled(void *ctx, const struct store_item *it)
{
    struct check *c = ctx;
    if (!machine_is_terminal(it->state))
        return 0;
    if (c->n_settled == c->cap_settled) {
        c->cap_settled = c->cap_settled ? 2 * c->cap_settled : 64;
        c->settled = realloc(c->settled, c->cap_settled * sizeof(*c->settled));
        if (!c->settled)
            abort();
    }
    c->settled[c->n_settled++] = it->id;
    return 0;
}

static int cmp_id(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Whether the item settled while the check ran (after the ledger was read, while another host
 * kept working): what it did is not in that ledger yet, so it is judged by the next check. */
static bool settled_during(const struct check *c, const struct store_item *it)
{
    return c->have_settled && machine_is_terminal(it->state) &&
           (c->n_settled == 0 ||
            !bsearch(&it->id, c->settled, c->n_settled, sizeof(*c->settled), cmp_id));
}

static int64_t abs64(int64_t v)
{
    return v < 0 ? -v : v;
}

/* The booking's lines in lines.csv against the invoice's lines: as many, in order, each with the
 * invoice line's G/L account (when it has one) and its net amount, or its gross (net + the tax
 * linetax.h gives it) for a flow that books lines gross (sign aside: a credit note may be
 * entered positive). Returns true when they agree; a first difference goes into why. */
static bool lines_agree(const struct check *c, const char *doc, const struct store_item *it,
                        char *why, size_t whylen)
{
    struct invoice inv;
    char err[APBOT_ERR_LEN];
    if (invoice_from_json(it->payload ? it->payload : "", &inv, err, sizeof(err)) != APBOT_OK) {
        snprintf(why, whylen, "payload unreadable: %.200s", err);
        invoice_done(&inv);
        return false;
    }
    size_t k = 0;
    bool ok = true;
    struct linetax taxes;
    linetax_init(&taxes, &inv);
    if (c->line_amounts == INV_LINES_GROSS && !taxes.ok) {
        snprintf(why, whylen, "booked gross, but its line taxes cannot be told: %.150s", taxes.why);
        ok = false;
    }
    for (size_t i = 0; i < c->lines->n && ok; i++) {
        const struct csv_row *row = &c->lines->rows[i];
        if (strcmp(fld(row, N_DOC), doc) != 0)
            continue;
        if (k >= inv.n_lines) {
            snprintf(why, whylen, "the ERP has line %s, the invoice %zu lines", fld(row, N_LINE),
                     inv.n_lines);
            ok = false;
            break;
        }
        const struct invoice_line *l = &inv.lines[k];
        int64_t amount = 0;
        int64_t want = c->line_amounts == INV_LINES_GROSS ? l->net + taxes.tax[k] : l->net;
        bool amount_ok = money_parse(fld(row, N_AMOUNT), it->currency, MONEY_PLAIN,
                                     MONEY_ROUND_REFUSE, &amount, NULL, 0) == APBOT_OK &&
                         abs64(amount) == abs64(want);
        bool gl_ok = !l->gl_account || strcmp(l->gl_account, fld(row, N_GL)) == 0;
        if (!amount_ok || !gl_ok) {
            char net[48];
            if (money_format_plain(want, it->exponent, net, sizeof(net)) != APBOT_OK)
                snprintf(net, sizeof(net), "%" PRId64 " minor units", want);
            snprintf(why, whylen, "line %zu: ERP %s %s, invoice %s %s", k + 1, fld(row, N_GL),
                     fld(row, N_AMOUNT), l->gl_account ? l->gl_account : "(any account)", net);
            ok = false;
        }
        k++;
    }
    if (ok && k != inv.n_lines) {
        snprintf(why, whylen, "the ERP has %zu lines, the invoice %zu", k, inv.n_lines);
        ok = false;
    }
    linetax_done(&taxes);
    invoice_done(&inv);
    return ok;
}

static int check_item(void *ctx, const struct store_item *it)
{
    struct check *c = ctx;
    struct inv_report *r = c->r;
    char ref[64], why[256];
    snprintf(ref, sizeof(ref), "%.*s", c->key_length, it->key);
    int booked = 0;
    const struct csv_row *hit = NULL;
    for (size_t i = 0; i < c->ledger->n; i++)
        if (strcmp(fld(&c->ledger->rows[i], L_REF), ref) == 0) {
            booked++;
            hit = &c->ledger->rows[i];
        }
    r->items++;
    if (settled_during(c, it)) {
        r->pending++;
        return 0;
    }
    switch (it->state) {
    case MACHINE_COMPLETED:
        r->completed++;
        if (booked == 0) {
            r->completed_unbooked++;
            problem(r, "item %" PRId64 " (%s) is completed but not booked", it->id, it->key);
        } else if (booked == 1) {
            int64_t amount = 0;
            bool amount_ok = money_parse(fld(hit, L_AMOUNT), it->currency, MONEY_PLAIN,
                                         MONEY_ROUND_REFUSE, &amount, NULL, 0) == APBOT_OK &&
                             abs64(amount) == abs64(it->total);
            if (!it->erp_doc || !simc_doc_same(fld(hit, L_DOC), it->erp_doc) || !amount_ok) {
                r->completed_mismatch++;
                problem(r,
                        "item %" PRId64 " (%s): queue says doc %s amount %" PRId64
                        ", ledger says %s %s",
                        it->id, it->key, it->erp_doc ? it->erp_doc : "(none)", it->total,
                        fld(hit, L_DOC), fld(hit, L_AMOUNT));
            }
            if (strcmp(fld(hit, L_STATUS), "posted") != 0) {
                r->completed_unposted++;
                problem(r, "item %" PRId64 " (%s) is completed but %s is %s, not posted", it->id,
                        it->key, fld(hit, L_DOC), fld(hit, L_STATUS));
            }
            if (!lines_agree(c, fld(hit, L_DOC), it, why, sizeof(why))) {
                r->completed_lines_mismatch++;
                problem(r, "item %" PRId64 " (%s) booked as %s with other lines: %s", it->id,
                        it->key, fld(hit, L_DOC), why);
            }
        }
        break;
    case MACHINE_BUSINESS_EXCEPTION:
        r->business_exception++;
        if (booked > 0) {
            r->exception_booked++;
            problem(r, "item %" PRId64 " (%s) is a business exception but booked as %s", it->id,
                    it->key, fld(hit, L_DOC));
        }
        break;
    case MACHINE_MANUAL_REVIEW:
        r->manual_review++;
        break;
    case MACHINE_NEW:
    case MACHINE_CHECKING:
    case MACHINE_POSTING:
    case MACHINE_RECONCILING:
    case MACHINE_FINISHING:
        r->pending++;
        if (!c->allow_pending) {
            r->pending_bad++;
            problem(r, "item %" PRId64 " (%s) is still %s", it->id, it->key,
                    machine_state_name(it->state));
        }
        break;
    case MACHINE_STATE__COUNT:
    case MACHINE_STATE_INVALID:
        r->pending_bad++;
        problem(r, "item %" PRId64 " is in an invalid state", it->id);
        break;
    }
    return 0;
}

/* Loads one admin CSV into t. Returns 0 or -1. */
static int load(unsigned short port, bool lines, struct csv_table *t)
{
    char *csv = NULL;
    memset(t, 0, sizeof(*t));
    if ((lines ? simc_lines(port, &csv) : simc_ledger(port, &csv)) != 0 || !csv) {
        free(csv);
        return -1;
    }
    table_parse(csv, t);
    free(csv);
    return 0;
}

int invariants_check(const char *db_path, unsigned short port, int key_length, bool allow_pending,
                     struct inv_report *ret)
{
    return invariants_check_lines(db_path, port, key_length, allow_pending, INV_LINES_NET, ret);
}

int invariants_check_lines(const char *db_path, unsigned short port, int key_length,
                           bool allow_pending, enum inv_lines lines_mode, struct inv_report *ret)
{
    struct inv_report local;
    struct inv_report *r = ret ? ret : &local;
    struct csv_table ledger, lines;
    struct store *st = NULL;
    char err[APBOT_ERR_LEN];
    memset(r, 0, sizeof(*r));
    struct check c = {.key_length = key_length,
                      .allow_pending = allow_pending,
                      .r = r,
                      .line_amounts = lines_mode};

    /* With other hosts still at work (allow_pending), the queue's settled items are noted
     * before the ledger is read: an item that settles after that, booked after the ledger
     * was read, would otherwise look completed but not booked. */
    if (allow_pending) {
        if (store_open(db_path, &st, err, sizeof(err)) != APBOT_OK ||
            store_each(st, MACHINE_STATE_INVALID, note_settled, &c, err, sizeof(err)) != APBOT_OK) {
            problem(r, "cannot walk the queue: %s", err);
            store_close(st);
            free(c.settled);
            return -1;
        }
        store_close(st);
        st = NULL;
        if (c.n_settled > 0)
            qsort(c.settled, c.n_settled, sizeof(*c.settled), cmp_id);
        c.have_settled = true;
    }
    if (load(port, false, &ledger) != 0) {
        problem(r, "cannot read the simulator's ledger");
        free(c.settled);
        return -1;
    }
    if (load(port, true, &lines) != 0) {
        problem(r, "cannot read the simulator's lines");
        table_free(&ledger);
        free(c.settled);
        return -1;
    }
    r->bookings = (int)ledger.n;
    /* No reference booked twice, whoever booked it. */
    for (size_t i = 0; i < ledger.n; i++) {
        const char *ref = fld(&ledger.rows[i], L_REF);
        if (!*ref)
            continue;
        bool first = true;
        int count = 0;
        for (size_t k = 0; k < ledger.n; k++)
            if (strcmp(fld(&ledger.rows[k], L_REF), ref) == 0) {
                if (k < i)
                    first = false;
                count++;
            }
        if (first && count > 1) {
            r->duplicated_refs++;
            problem(r, "reference %s is booked %d times", ref, count);
        }
    }
    /* No post of something the ERP already held, even one the ERP refused. */
    r->reposts_of_booked = simc_stat(port, "reposts_of_booked");
    if (r->reposts_of_booked != 0)
        problem(r, "%lld committing requests carried a reference the ERP already held",
                r->reposts_of_booked);
    if (store_open(db_path, &st, err, sizeof(err)) != APBOT_OK) {
        problem(r, "cannot open the queue: %s", err);
        table_free(&ledger);
        table_free(&lines);
        free(c.settled);
        return -1;
    }
    c.ledger = &ledger;
    c.lines = &lines;
    if (store_each(st, MACHINE_STATE_INVALID, check_item, &c, err, sizeof(err)) != APBOT_OK)
        problem(r, "cannot walk the queue: %s", err);
    store_close(st);
    table_free(&ledger);
    table_free(&lines);
    free(c.settled);
    return r->first_problem[0] ? -1 : 0;
}

void invariants_print(const struct inv_report *r)
{
    fprintf(stderr,
            "invariants: items %d (completed %d, business-exception %d, manual-review %d, "
            "pending %d); bookings %d; duplicated references %d; re-posts of booked %lld; "
            "completed unbooked %d; completed mismatched %d; completed not posted %d; "
            "completed with other lines %d; exceptions booked %d; pending where none may be "
            "%d%s%s\n",
            r->items, r->completed, r->business_exception, r->manual_review, r->pending,
            r->bookings, r->duplicated_refs, r->reposts_of_booked, r->completed_unbooked,
            r->completed_mismatch, r->completed_unposted, r->completed_lines_mismatch,
            r->exception_booked, r->pending_bad, r->first_problem[0] ? "; first: " : "",
            r->first_problem);
}
