/*
 * page.h - an ERP's HTML page parsed with libxml2's HTML parser: forms with their fields
 * (hidden ones kept, as a browser would submit them), XPath queries and a bounded,
 * readable text excerpt for evidence. Pages are untrusted: parsing never fetches anything
 * and sizes are bounded by the caller (http max_body).
 */
#ifndef APBOT_PAGE_H
#define APBOT_PAGE_H

#include <stdbool.h>
#include <stddef.h>

#include "apbot/error.h"

struct page;

/* A form as a browser would submit it: successful controls in document order. */
struct page_form {
    char *action;  /* resolved absolute URL */
    char *method;  /* "GET" or "POST" (upper case) */
    char **names;  /* field names, heap */
    char **values; /* field values, heap; select = selected (else first) option */
    bool *hidden;  /* type=hidden */
    size_t n;
    char **buttons; /* names of submit buttons (not submitted unless chosen) */
    char **button_values;
    size_t n_buttons;
    /* Added: every named non-button control the form has, submitted or not (an unchecked
     * checkbox or radio group, a select without options): the names page_form_set accepts. */
    char **controls;
    size_t n_controls;
};
/* Frees everything and zeroes *f; values are wiped first (a set value may be a password). */
void page_form_done(struct page_form *f);

/* Parses body (not necessarily NUL-terminated) fetched from url (for resolving actions). */
int page_parse(const char *body, size_t len, const char *url, struct page **ret, char *err,
               size_t errlen) APBOT_MUST_USE;
void page_free(struct page *p); /* NULL is fine */

/* Finds the first form matching xpath; APBOT_E_NOTFOUND when none. */
int page_find_form(const struct page *p, const char *xpath, struct page_form *ret, char *err,
                   size_t errlen) APBOT_MUST_USE;
/* Sets field name to value; APBOT_E_NOTFOUND if the form has no such control (a changed
 * form is a systemic failure, never silently extended). */
int page_form_set(struct page_form *f, const char *name, const char *value) APBOT_MUST_USE;
/* Adds the submit button `name` (must exist) to the submitted fields. */
int page_form_press(struct page_form *f, const char *name) APBOT_MUST_USE;

/* True when the page has at least one node for xpath. */
bool page_has(const struct page *p, const char *xpath);
/* String value of an XPath expression (string(...)), trimmed; heap; NULL if empty/none. */
char *page_string(const struct page *p, const char *xpath);

/*
 * For each node of rows_xpath, evaluates each column XPath relative to it and calls fn with
 * the trimmed strings (NULL for no value). Returns the number of rows via ret_rows. A
 * non-zero return from fn stops the walk and is returned.
 */
typedef int (*page_row_fn)(void *ctx, const char *const *cells, size_t n_cells);
int page_rows(const struct page *p, const char *rows_xpath, const char *const *col_xpaths,
              size_t n_cols, page_row_fn fn, void *ctx, size_t *ret_rows, char *err, size_t errlen);

/* Visible text of the page (title first; no script, style or select options), whitespace
 * collapsed, at most max bytes (UTF-8 safe). A page with no visible text at all (garbled,
 * binary) gives a cleaned prefix of its raw bytes instead. Never NULL; free(). */
char *page_excerpt(const struct page *p, size_t max);

/* True when xpath compiles (for flow checks); err gets libxml2's reason. */
bool page_xpath_valid(const char *xpath, char *err, size_t errlen);

#endif
