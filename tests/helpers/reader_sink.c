/*
 * reader_sink.c - the reader tests' collecting sink, the assertions on what it keeps, and the
 * file opening for a reader's fd or memory entry (see reader_sink.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "reader_sink.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apbot/linetax.h"

int got_accept(void *ctx, const struct invoice *inv, const char *where)
{
    struct got *g = ctx;
    assert_true(g->n_inv < MAX_GOT);
    struct got_inv *o = &g->inv[g->n_inv++];
    snprintf(o->vendor, sizeof(o->vendor), "%s", inv->vendor_id);
    snprintf(o->number, sizeof(o->number), "%s", inv->invoice_number);
    snprintf(o->doc, sizeof(o->doc), "%s", invoice_doc_type_name(inv->doc_type));
    memcpy(o->issue, inv->issue_date, 11);
    memcpy(o->due, inv->due_date, 11);
    memcpy(o->ccy, inv->currency, 4);
    snprintf(o->where, sizeof(o->where), "%s", where);
    o->payable = inv->payable;
    o->net = inv->net_total;
    o->tax = inv->tax_total;
    o->lines = inv->n_lines;
    assert_int_equal(invoice_identity_key(inv, o->key), APBOT_OK);
    assert_int_equal(invoice_fingerprint(inv, o->fp), APBOT_OK);
    struct linetax t;
    linetax_init(&t, inv);
    o->tax_ok = t.ok;
    o->tax_derived = t.derived;
    for (size_t i = 0; t.ok && i < t.n && i < GOT_LINE_TAXES; i++)
        o->line_tax[i] = t.tax[i];
    snprintf(o->tax_why, sizeof(o->tax_why), "%s", t.why);
    linetax_done(&t);
    return 0;
}

void got_refuse(void *ctx, const char *where, const char *reason)
{
    struct got *g = ctx;
    assert_true(g->n_ref < MAX_GOT);
    struct got_ref *r = &g->ref[g->n_ref++];
    snprintf(r->where, sizeof(r->where), "%s", where);
    snprintf(r->reason, sizeof(r->reason), "%s", reason);
}

/* Path of a file under $env/sub; fails the test when the variable is unset (ctest sets it: a
 * test that skips quietly could never fail). */
void env_path(char *buf, size_t len, const char *env, const char *sub)
{
    const char *base = getenv(env);
    if (!base)
        fail_msg("%s is not set (run the test through ctest)", env);
    snprintf(buf, len, "%s/%s", base, sub);
}

/* Ends with: where ends with `suffix` */
void assert_where(const char *where, const char *suffix)
{
    size_t a = strlen(where), b = strlen(suffix);
    if (a < b || strcmp(where + a - b, suffix) != 0)
        fail_msg("where '%s' does not end with '%s'", where, suffix);
}

void assert_has(const char *text, const char *needle)
{
    if (!strstr(text, needle))
        fail_msg("'%s' lacks '%s'", text, needle);
}

int read_path_fd(read_fd_fn fn, const char *path, const struct vendor_map *vendors,
                 const struct invoice_sink *sink, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        fail_msg("%s: cannot open", path);
    int rc = fn(fd, path, vendors, sink, err, errlen);
    close(fd);
    return rc;
}

int read_path_mem(read_mem_fn fn, const char *path, const struct vendor_map *vendors,
                  const struct invoice_sink *sink, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("%s: cannot open", path);
    size_t cap = 65536, len = 0, n;
    char *data = malloc(cap);
    assert_non_null(data);
    while ((n = fread(data + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            cap *= 2;
            data = realloc(data, cap);
            assert_non_null(data);
        }
    }
    assert_false(ferror(f));
    fclose(f);
    int rc = fn(path, data, len, vendors, sink, err, errlen);
    free(data);
    return rc;
}
