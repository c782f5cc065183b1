/*
 * canned.h - the canned ERP pages of tests/data/pages (found through APBOT_SRC, set by ctest),
 * for the tests that read one of them or run every one through something.
 */
#ifndef APBOT_TEST_CANNED_H
#define APBOT_TEST_CANNED_H

#include <stddef.h>

/* tests/data/pages/<name> in a zeroed 1 MiB heap buffer (the caller frees it): NUL-terminated
 * with zeros after it (PCRE2's JIT may load a few bytes past a subject's end); *ret_len its
 * length. Fails the test when the file cannot be read. */
char *canned_page_read(const char *name, size_t *ret_len);

/* Calls fn on every *.html page there, read as canned_page_read reads it; fails the test when
 * the directory cannot be read or holds fewer than 20 pages. Returns how many. */
int canned_pages_each(void (*fn)(const char *body, size_t len, const char *name, void *ctx),
                      void *ctx);

#endif
