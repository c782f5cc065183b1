/*
 * csvrow.c - the RFC 4180 row driver both CSV readers use (the invoice CSV, csvin.c, and the
 * vendor map, vendors.c), and the one trim they apply to its fields.
 *
 * A small streaming driver around libcsv (strict quoting) that adds what libcsv lacks: BOM
 * handling, delimiter sniffing, physical line numbers for every row, and hard bounds on field
 * size and count. The file is read in chunks cut at line breaks, so every row knows the line it
 * starts on; memory is bounded by CSVROW_MAX_FIELDS fields of at most CSVROW_FIELD_MAX bytes.
 */
#include "input/csvrow.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <csv.h>

#include "apbot/mem.h"
#include "base/infile.h"

#define CSVROW_FIELD_MAX (64 * 1024) /* bytes in one field */
#define CSVROW_MAX_FIELDS 256        /* fields in one row */
#define CSVROW_CHUNK 65536           /* read size */

struct csvrow_driver {
    csvrow_fn fn;
    void *ctx;
    char **fields; /* CSVROW_MAX_FIELDS reusable buffers */
    size_t *caps;
    size_t n;
    bool too_many;   /* this row had more than CSVROW_MAX_FIELDS fields */
    bool nul_byte;   /* a field held a NUL byte */
    size_t line;     /* physical line being fed, 1-based */
    bool last_cr;    /* the last byte fed was '\r' (a '\n' right after it ends no new line) */
    size_t row_line; /* line the current row started on */
    bool at_boundary;
    int rc; /* first non-zero from fn */
    const char *path;
    char *err;
    size_t errlen;
};

/*
 * libcsv grows its field buffer through this; refusing past the bound bounds memory. libcsv
 * takes a NULL as realloc's failure (the old buffer stays its own), retries with smaller steps
 * and then reports CSV_ENOMEM, which csvrow_parse_error names as the field bound. So NULL is
 * kept for the bound alone; out-of-memory within it aborts (mem.h) instead of passing for a
 * field that is too long.
 */
static void *csvrow_realloc(void *p, size_t n)
{
    if (n > CSVROW_FIELD_MAX + 256)
        return NULL;
    return apbot_xrealloc(p, n);
}

static void csvrow_cb_field(void *s, size_t len, void *data)
{
    struct csvrow_driver *d = data;
    if (d->rc)
        return;
    if (d->at_boundary) {
        d->row_line = d->line;
        d->at_boundary = false;
    }
    if (d->n >= CSVROW_MAX_FIELDS) {
        d->too_many = true;
        return;
    }
    if (d->caps[d->n] < len + 1) { /* len is bounded by csvrow_realloc's refusal */
        size_t cap = len + 1 < 64 ? 64 : len + 1;
        d->fields[d->n] = apbot_xrealloc(d->fields[d->n], cap);
        d->caps[d->n] = cap;
    }
    if (len)
        memcpy(d->fields[d->n], s, len);
    d->fields[d->n][len] = '\0';
    if (len && memchr(s, '\0', len))
        d->nul_byte = true;
    d->n++;
}

static void csvrow_cb_row(int c, void *data)
{
    (void)c;
    struct csvrow_driver *d = data;
    if (d->at_boundary) /* a row of one empty field: libcsv skips true blank lines */
        d->row_line = d->line;
    if (!d->rc) {
        if (d->too_many)
            d->rc =
                apbot_fail(d->err, d->errlen, APBOT_E_LIMIT, "%s:%zu: more than %d fields in a row",
                           d->path, d->row_line, CSVROW_MAX_FIELDS);
        else if (d->nul_byte)
            d->rc = apbot_fail(d->err, d->errlen, APBOT_E_PARSE, "%s:%zu: NUL byte in a field",
                               d->path, d->row_line);
        else
            d->rc = d->fn(d->ctx, d->fields, d->n, d->row_line);
    }
    d->n = 0;
    d->too_many = false;
    d->nul_byte = false;
    d->at_boundary = true;
}

/* Counts ',' and ';' outside quoted fields on the first line. */
static int csvrow_sniff(const char *buf, size_t len)
{
    size_t commas = 0, semis = 0;
    bool q = false;
    for (size_t i = 0; i < len && (q || (buf[i] != '\n' && buf[i] != '\r')); i++) {
        if (buf[i] == '"')
            q = !q;
        else if (!q && buf[i] == ',')
            commas++;
        else if (!q && buf[i] == ';')
            semis++;
    }
    return semis > commas ? ';' : ',';
}

static int csvrow_parse_error(struct csvrow_driver *d, struct csv_parser *p)
{
    if (csv_error(p) == CSV_ENOMEM)
        return apbot_fail(d->err, d->errlen, APBOT_E_LIMIT,
                          "%s:%zu: a field is longer than %d bytes", d->path, d->row_line,
                          CSVROW_FIELD_MAX);
    return apbot_fail(d->err, d->errlen, APBOT_E_PARSE,
                      "%s:%zu: malformed CSV quoting (a quote inside an unquoted field, text "
                      "after a closing quote, or an unterminated quoted field)",
                      d->path, d->at_boundary ? d->line : d->row_line);
}

/*
 * Feeds one segment that ends at most at a line break ('\n' or '\r'); counts physical lines
 * the way editors do: "\n", "\r\n" and a lone "\r" (old Mac files) each end one line, also when
 * a "\r\n" is split across two reads. Returns false on a libcsv error.
 */
static bool csvrow_feed(struct csvrow_driver *d, struct csv_parser *p, const char *s, size_t len)
{
    if (d->at_boundary) {
        for (size_t i = 0; i < len; i++) {
            if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') {
                d->row_line = d->line;
                d->at_boundary = false;
                break;
            }
        }
    }
    if (csv_parse(p, s, len, csvrow_cb_field, csvrow_cb_row, d) != len)
        return false;
    if (!len)
        return true;
    char last = s[len - 1];
    if (last == '\r' || (last == '\n' && !(len == 1 && d->last_cr)))
        d->line++;
    d->last_cr = last == '\r';
    return true;
}

/* Reads up to len bytes (fewer only at end of file); -1 on error. */
static ssize_t csvrow_read_full(int fd, char *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = read(fd, buf + got, len - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

int csvrow_each_fd(int fd, const char *path, int delim, csvrow_fn fn, void *ctx, char *err,
                   size_t errlen)
{
    struct csvrow_driver d = {.fn = fn,
                              .ctx = ctx,
                              .line = 1,
                              .row_line = 1,
                              .at_boundary = true,
                              .path = path,
                              .err = err,
                              .errlen = errlen};
    struct csv_parser p;
    int rc = APBOT_OK;
    if (lseek(fd, 0, SEEK_SET) != 0)
        return apbot_fail(err, errlen, APBOT_E_IO, "%s: cannot seek: %s", path, strerror(errno));

    d.fields = apbot_xcalloc(CSVROW_MAX_FIELDS, sizeof(*d.fields));
    d.caps = apbot_xcalloc(CSVROW_MAX_FIELDS, sizeof(*d.caps));
    char *buf = apbot_xmalloc(CSVROW_CHUNK);
    if (csv_init(&p, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL) != 0)
        abort(); /* csv_init fails only for a NULL parser: it allocates nothing */
    csv_set_realloc_func(&p, csvrow_realloc);

    bool first = true;
    for (;;) {
        ssize_t got = csvrow_read_full(fd, buf, CSVROW_CHUNK);
        if (got < 0) {
            rc = apbot_fail(err, errlen, APBOT_E_IO, "%s: read error: %s", path, strerror(errno));
            break;
        }
        if (got == 0)
            break;
        const char *s = buf;
        size_t len = (size_t)got;
        if (first) {
            first = false;
            if (len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) {
                s += 3;
                len -= 3;
            }
            csv_set_delim(&p, (unsigned char)(delim ? delim : csvrow_sniff(s, len)));
        }
        while (len) {
            size_t seg = 0;
            while (seg < len && s[seg] != '\n' && s[seg] != '\r')
                seg++;
            if (seg < len)
                seg++; /* the line break ends the segment */
            if (!csvrow_feed(&d, &p, s, seg)) {
                rc = d.rc ? d.rc : csvrow_parse_error(&d, &p);
                goto out;
            }
            if (d.rc) {
                rc = d.rc;
                goto out;
            }
            s += seg;
            len -= seg;
        }
    }
    if (rc)
        goto out;
    if (first) {
        rc = apbot_fail(err, errlen, APBOT_E_PARSE, "%s: empty file", path);
        goto out;
    }
    if (csv_fini(&p, csvrow_cb_field, csvrow_cb_row, &d) != 0) {
        rc = d.rc ? d.rc : csvrow_parse_error(&d, &p);
        goto out;
    }
    rc = d.rc;
out:
    csv_free(&p);
    for (size_t i = 0; i < CSVROW_MAX_FIELDS; i++)
        free(d.fields[i]);
    free(d.fields);
    free(d.caps);
    free(buf);
    return rc;
}

int csvrow_each(const char *path, int delim, csvrow_fn fn, void *ctx, char *err, size_t errlen)
{
    int fd = -1;
    int rc = infile_open(path, &fd, err, errlen);
    if (rc)
        return rc;
    rc = csvrow_each_fd(fd, path, delim, fn, ctx, err, errlen);
    close(fd);
    return rc;
}

char *csvrow_trim(char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
        s[--n] = '\0';
    return s;
}
