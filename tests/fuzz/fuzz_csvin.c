/*
 * fuzz_csvin.c - libFuzzer target: the CSV reader (libcsv driver, line counting with LF, CRLF
 * and CR, both passes, grouping, refusals) and, on the same bytes, the vendor-map loader, on a
 * memfd holding the input; every accepted invoice checked by fuzz_common.h's sink. Every line
 * number the reader reports (a row's line, "fuzz.csv:N" of an invoice or a refusal) is a line
 * of the input, counted as csvrow.h says ("\n", "\r\n" and a lone "\r" each end one).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "apbot/vendors.h"
#include "input/csvin.h"
#include "input/csvrow.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t lines; /* lines of the current input */

/* "fuzz.csv:N" names a line of the input; "fuzz.csv" alone (the file) is fine too. */
static void check_where(const char *where)
{
    const char *colon = strrchr(where, ':');
    if (!colon || strncmp(where, "fuzz.csv", 8) != 0)
        return;
    char *end = NULL;
    unsigned long long n = strtoull(colon + 1, &end, 10);
    if (end == colon + 1 || *end || n == 0 || n > lines)
        abort(); /* a line number the file does not have */
}

static int csv_accept(void *ctx, const struct invoice *inv, const char *where)
{
    check_where(where);
    return fuzz_accept(ctx, inv, where);
}

static void csv_refuse(void *ctx, const char *where, const char *reason)
{
    check_where(where);
    fuzz_refuse(ctx, where, reason);
}

static const struct invoice_sink csv_sink = {csv_accept, csv_refuse, NULL};

static int fuzz_count_row(void *ctx, char *const *fields, size_t n, size_t line)
{
    (void)fields;
    size_t *rows = ctx;
    if (line == 0 || line > lines || (n && !fields[0]))
        abort(); /* lines are 1-based and in the file; every field is a string */
    (*rows)++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("fuzz.csv", MFD_CLOEXEC);
    if (fd < 0)
        abort();
    if (size && write(fd, data, size) != (ssize_t)size)
        abort();
    lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n' || (data[i] == '\r' && (i + 1 == size || data[i + 1] != '\n'));
    char err[APBOT_ERR_LEN];
    (void)csvin_read_fd(fd, "fuzz.csv", NULL, &csv_sink, err, sizeof(err));
    size_t rows = 0;
    (void)csvrow_each_fd(fd, "fuzz.csv", 0, fuzz_count_row, &rows, err, sizeof(err));
    /* The same bytes as a vendor map, then as invoices mapped through it. */
    char path[64];
    struct vendor_map *vm = NULL;
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    if (vendor_map_load(path, &vm, err, sizeof(err)) == APBOT_OK) {
        (void)vendor_map_lookup(vm, "100001");
        (void)csvin_read_fd(fd, "fuzz.csv", vm, &csv_sink, err, sizeof(err));
        vendor_map_free(vm);
    }
    close(fd);
    return 0;
}
