/*
 * fuzz_csvin.c - libFuzzer target: the CSV reader (libcsv driver, line counting with LF, CRLF
 * and CR, both passes, grouping, refusals) and, on the same bytes, the vendor-map loader, on a
 * memfd holding the input; every accepted invoice checked by fuzz_common.h's sink.
 */
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "apbot/csvin.h"
#include "apbot/vendors.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fuzz_count_row(void *ctx, char *const *fields, size_t n, size_t line)
{
    (void)fields;
    size_t *rows = ctx;
    if (line == 0 || (n && !fields[0]))
        abort(); /* lines are 1-based; every field is a string */
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
    char err[APBOT_ERR_LEN];
    (void)csvin_read_fd(fd, "fuzz.csv", NULL, &fuzz_sink, err, sizeof(err));
    size_t rows = 0;
    (void)csvin_each_row_fd(fd, "fuzz.csv", 0, fuzz_count_row, &rows, err, sizeof(err));
    close(fd);
    return 0;
}
