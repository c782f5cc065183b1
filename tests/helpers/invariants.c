/*
 * invariants.c - checks the queue against the simulator's ledger (ground truth): the promise
 * "no invoice booked twice, no invoice lost" in countable form. Reads /_sim/ledger.csv through
 * sim_client, walks every item with store_each, and compares references, document numbers
 * and amounts exactly (minor units, never floating point).
 */
#include "invariants.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/machine.h"
#include "apbot/money.h"
#include "apbot/store.h"
#include "sim_client.h"

#define INV_FIELDS                                                                                 \
    8 /* doc,vendor_id,invoice_number,invoice_date,currency,amount,reference,booked_at */

struct ledger_row {
    char *f[INV_FIELDS];
};

struct ledger {
    struct ledger_row *rows;
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
static void parse_record(const char **pp, struct ledger_row *row)
{
    const char *p = *pp;
    for (int k = 0; k < INV_FIELDS; k++) {
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

static void ledger_free(struct ledger *l)
{
    for (size_t i = 0; i < l->n; i++)
        for (int k = 0; k < INV_FIELDS; k++)
            free(l->rows[i].f[k]);
    free(l->rows);
    memset(l, 0, sizeof(*l));
}

static int ledger_load(unsigned short port, struct ledger *l)
{
    char *csv = NULL;
    memset(l, 0, sizeof(*l));
    if (simc_ledger(port, &csv) != 0 || !csv)
        return -1;
    const char *p = strchr(csv, '\n'); /* skip the header */
    p = p ? p + 1 : csv + strlen(csv);
    while (*p) {
        if (*p == '\n' || *p == '\r') {
            p++;
            continue;
        }
        if (l->n == l->cap) {
            l->cap = l->cap ? l->cap * 2 : 64;
            struct ledger_row *g = realloc(l->rows, l->cap * sizeof(*g));
            if (!g)
                abort();
            l->rows = g;
        }
        struct ledger_row *row = &l->rows[l->n++];
        memset(row, 0, sizeof(*row));
        parse_record(&p, row);
    }
    free(csv);
    return 0;
}

static const char *fld(const struct ledger_row *row, int k)
{
    return row->f[k] ? row->f[k] : "";
}

struct check {
    struct ledger *l;
    int key_length;
    bool allow_pending;
    struct inv_report *r;
};

static int64_t abs64(int64_t v)
{
    return v < 0 ? -v : v;
}

static int check_item(void *ctx, const struct store_item *it)
{
    struct check *c = ctx;
    struct inv_report *r = c->r;
    char ref[64];
    snprintf(ref, sizeof(ref), "%.*s", c->key_length, it->key);
    int booked = 0;
    const struct ledger_row *hit = NULL;
    for (size_t i = 0; i < c->l->n; i++)
        if (strcmp(fld(&c->l->rows[i], 6), ref) == 0) {
            booked++;
            hit = &c->l->rows[i];
        }
    r->items++;
    switch (it->state) {
    case MACHINE_COMPLETED:
        r->completed++;
        if (booked == 0) {
            r->completed_unbooked++;
            problem(r, "item %" PRId64 " (%s) is completed but not booked", it->id, it->key);
        } else if (booked == 1) {
            int64_t amount = 0;
            bool amount_ok = money_parse(fld(hit, 5), it->currency, MONEY_PLAIN, MONEY_ROUND_REFUSE,
                                         &amount, NULL, 0) == APBOT_OK &&
                             abs64(amount) == abs64(it->total);
            if (!it->erp_doc || strcmp(it->erp_doc, fld(hit, 0)) != 0 || !amount_ok) {
                r->completed_mismatch++;
                problem(r,
                        "item %" PRId64 " (%s): queue says doc %s amount %" PRId64
                        ", ledger says %s %s",
                        it->id, it->key, it->erp_doc ? it->erp_doc : "(none)", it->total,
                        fld(hit, 0), fld(hit, 5));
            }
        }
        break;
    case MACHINE_BUSINESS_EXCEPTION:
        r->business_exception++;
        if (booked > 0) {
            r->exception_booked++;
            problem(r, "item %" PRId64 " (%s) is a business exception but booked as %s", it->id,
                    it->key, fld(hit, 0));
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

int invariants_check(const char *db_path, unsigned short port, int key_length, bool allow_pending,
                     struct inv_report *ret)
{
    struct inv_report local;
    struct inv_report *r = ret ? ret : &local;
    struct ledger l;
    struct store *st = NULL;
    char err[APBOT_ERR_LEN];
    memset(r, 0, sizeof(*r));

    if (ledger_load(port, &l) != 0) {
        problem(r, "cannot read the simulator's ledger");
        return -1;
    }
    r->bookings = (int)l.n;
    /* No reference booked twice, whoever booked it. */
    for (size_t i = 0; i < l.n; i++) {
        const char *ref = fld(&l.rows[i], 6);
        if (!*ref)
            continue;
        bool first = true;
        int count = 0;
        for (size_t k = 0; k < l.n; k++)
            if (strcmp(fld(&l.rows[k], 6), ref) == 0) {
                if (k < i)
                    first = false;
                count++;
            }
        if (first && count > 1) {
            r->duplicated_refs++;
            problem(r, "reference %s is booked %d times", ref, count);
        }
    }
    if (store_open(db_path, &st, err, sizeof(err)) != APBOT_OK) {
        problem(r, "cannot open the queue: %s", err);
        ledger_free(&l);
        return -1;
    }
    struct check c = {.l = &l, .key_length = key_length, .allow_pending = allow_pending, .r = r};
    if (store_each(st, MACHINE_STATE_INVALID, check_item, &c, err, sizeof(err)) != APBOT_OK)
        problem(r, "cannot walk the queue: %s", err);
    store_close(st);
    ledger_free(&l);
    return r->first_problem[0] ? -1 : 0;
}

void invariants_print(const struct inv_report *r)
{
    fprintf(stderr,
            "invariants: items %d (completed %d, business-exception %d, manual-review %d, "
            "pending %d); bookings %d; duplicated references %d; completed unbooked %d; "
            "completed mismatched %d; exceptions booked %d; pending where none may be %d%s%s\n",
            r->items, r->completed, r->business_exception, r->manual_review, r->pending,
            r->bookings, r->duplicated_refs, r->completed_unbooked, r->completed_mismatch,
            r->exception_booked, r->pending_bad, r->first_problem[0] ? "; first: " : "",
            r->first_problem);
}
