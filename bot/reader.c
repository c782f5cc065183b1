/*
 * reader.c - picks the invoice reader by content: XML goes to ublin, everything else to csvin.
 *
 * Only the first bytes are looked at: after an optional UTF-8 BOM and whitespace, a '<' means
 * XML (a declaration, a comment or the root element). The file name and extension are not
 * trusted (samples come as .xml, .XML and with spaces and commas in the name).
 */
#include "apbot/reader.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int reader_read_file(const char *path, const struct vendor_map *vendors,
                     const struct invoice_sink *sink, char *err, size_t errlen)
{
    unsigned char head[512];
    FILE *f = fopen(path, "rb");
    if (!f)
        return apbot_fail(err, errlen, APBOT_E_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t n = fread(head, 1, sizeof(head), f);
    int bad = ferror(f);
    fclose(f);
    if (bad)
        return apbot_fail(err, errlen, APBOT_E_IO, "%s: read error", path);
    size_t i = 0;
    if (n >= 3 && head[0] == 0xEF && head[1] == 0xBB && head[2] == 0xBF)
        i = 3;
    while (i < n && (head[i] == ' ' || head[i] == '\t' || head[i] == '\r' || head[i] == '\n'))
        i++;
    if (i == n)
        return apbot_fail(err, errlen, APBOT_E_PARSE, "%s: empty file", path);
    if (head[i] == '<')
        return ublin_read(path, vendors, sink, err, errlen);
    return csvin_read(path, vendors, sink, err, errlen);
}
