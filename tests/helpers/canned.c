/*
 * canned.c - the canned ERP pages (see canned.h).
 */
#include "canned.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CANNED_MAX (1 << 20)

static const char *canned_dir(char *buf, size_t len)
{
    const char *src = getenv("APBOT_SRC");
    snprintf(buf, len, "%s/tests/data/pages", src && *src ? src : ".");
    return buf;
}

char *canned_page_read(const char *name, size_t *ret_len)
{
    char dir[4096], path[8192];
    snprintf(path, sizeof(path), "%s/%s", canned_dir(dir, sizeof(dir)), name);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s (is APBOT_SRC set?)", path);
    char *buf = calloc(1, CANNED_MAX);
    assert_non_null(buf);
    *ret_len = fread(buf, 1, CANNED_MAX - 32, f);
    fclose(f);
    return buf;
}

int canned_pages_each(void (*fn)(const char *body, size_t len, const char *name, void *ctx),
                      void *ctx)
{
    char dir[4096];
    DIR *d = opendir(canned_dir(dir, sizeof(dir)));
    if (!d)
        fail_msg("cannot open %s (is APBOT_SRC set?)", dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name), len;
        if (l < 6 || strcmp(e->d_name + l - 5, ".html") != 0)
            continue;
        char *body = canned_page_read(e->d_name, &len);
        fn(body, len, e->d_name, ctx);
        free(body);
        n++;
    }
    closedir(d);
    assert_true(n >= 20);
    return n;
}
