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

/* One option of a select, as a browser shows and submits it. */
struct page_option {
    char *value;   /* what is submitted: the value attribute, else the text collapsed */
    char *label;   /* what the user sees: the label attribute, else the text; white space
                    * collapsed and trimmed */
    bool disabled; /* cannot be chosen (disabled itself or in a disabled optgroup) */
};

/* A select control of the form with every option it offers. */
struct page_select {
    char *name;
    bool multiple;
    struct page_option *options;
    size_t n_options;
};

struct page_form_mem;

/*
 * A form as a browser would submit it: successful controls in document order.
 *
 * Ownership: every string and array here is the form's own, in memory page_form.c keeps for it
 * (f->mem) and releases, all of it at once, in page_form_done. Callers only read: never free,
 * change or keep a pointer past page_form_done (copy what must outlive the form). The arrays
 * and the values may move when the form changes (page_form_set, _select, _press, _add): read
 * them again after such a call. The other strings (names, action, method, buttons, controls,
 * selects and their options) stay where they are until page_form_done. A zeroed form is an
 * empty one.
 */
struct page_form {
    char *action;  /* resolved absolute URL */
    char *method;  /* "GET" or "POST" (upper case) */
    char **names;  /* field names (a control's or button's; name.x, name.y of an image) */
    char **values; /* field values; select = selected (else first) option */
    bool *hidden;  /* type=hidden */
    size_t n;
    /* Submit buttons (not submitted unless pressed): <input type=submit|image> and <button>
     * of type submit (the default, also for an unknown type). */
    char **buttons; /* names */
    char **button_values;
    bool *button_image; /* <input type=image>: pressing submits name.x=0 and name.y=0 */
    size_t n_buttons;
    size_t pressed; /* 1 + index in buttons of the pressed button, 0 = none */
    /* Every named non-button control the form has, submitted or not (an unchecked checkbox
     * or radio group, a select without options, a control added by page_form_add): the
     * names page_form_set accepts. */
    char **controls;
    size_t n_controls;
    struct page_select *selects; /* every select control, in document order */
    size_t n_selects;
    struct page_form_mem *mem; /* where all of the above lives (page_form.c's; hands off) */
};
/* Frees everything and zeroes *f; values are wiped first (a set value may be a password, and
 * a value replaced or removed earlier was wiped then). NULL, or a zeroed form, is fine. */
void page_form_done(struct page_form *f);

/* How page_form_select finds an option. */
enum page_option_mode {
    PAGE_OPTION_VALUE = 0,    /* the option's value equals the text */
    PAGE_OPTION_LABEL,        /* its visible label equals the text (white space collapsed) */
    PAGE_OPTION_LABEL_PREFIX, /* its visible label starts with the text (not empty) */
};

/* Parses body (not necessarily NUL-terminated) fetched from url (for resolving actions). */
int page_parse(const char *body, size_t len, const char *url, struct page **ret, char *err,
               size_t errlen) APBOT_MUST_USE;
void page_free(struct page *p); /* NULL is fine */

/* Finds the first form matching xpath; APBOT_E_NOTFOUND when none. */
int page_find_form(const struct page *p, const char *xpath, struct page_form *ret, char *err,
                   size_t errlen) APBOT_MUST_USE;
/*
 * Sets field name to value. APBOT_E_NOTFOUND if the form has no such control (a changed form
 * is a systemic failure, never silently extended); APBOT_E_DATA when the control is a select
 * and value is not the value of one of its enabled options (a browser could not submit it,
 * and the ERP might book another option: never a fallback). A name submitted several times
 * (a multi-select) keeps one value.
 */
int page_form_set(struct page_form *f, const char *name, const char *value) APBOT_MUST_USE;

/*
 * Chooses the option of select `name` that text designates (mode above; disabled options
 * never count) and sets the field to its value. APBOT_E_NOTFOUND when the form has no
 * control `name`, APBOT_E_INVAL when it is not a select, APBOT_E_DATA when no option
 * matches, APBOT_E_CONFLICT when options with different values match (options that submit
 * the same value are one choice). *ret_chosen (may be NULL) gets the chosen option, valid
 * until page_form_done; untouched on failure. The first select of that name is the one.
 */
int page_form_select(struct page_form *f, const char *name, const char *text,
                     enum page_option_mode mode,
                     const struct page_option **ret_chosen) APBOT_MUST_USE;

/*
 * Presses the submit button named `name` whose value is `value` (NULL: any value), so that
 * it is submitted with the form; a previous press is undone. APBOT_E_NOTFOUND when no button
 * matches, APBOT_E_CONFLICT when buttons that would submit different things match (the same
 * button at the top and the bottom of a form is one button) - never "the first one".
 */
int page_form_press(struct page_form *f, const char *name, const char *value) APBOT_MUST_USE;

/* True when the form has a non-button control `name` (submitted or not, or added). */
bool page_form_has(const struct page_form *f, const char *name);
/* Adds a control the page lacks (one its JavaScript would add) with value. APBOT_E_CONFLICT
 * when the form already has a control of that name. */
int page_form_add(struct page_form *f, const char *name, const char *value) APBOT_MUST_USE;

/*
 * What outcome patterns see (what the ERP said, not what it echoed): a copy of body[0..len)
 * of the same length, offsets kept, in which HTML comments (also <!...> and <?...>
 * declarations other than <!DOCTYPE>), the contents of script, style, textarea, noscript,
 * iframe, noembed and noframes, and the values of every attribute except id, class, name,
 * type and role are blanked to spaces. Tokenised as a browser does (HTML5 states: quoted and
 * unquoted values, '>' inside quotes, script comment escapes; an unterminated construct runs
 * to the end), in one pass, linear in len. Heap, NUL-terminated and zero-padded (mem.h; body
 * may hold NULs); NULL only when body is NULL and len > 0.
 */
char *page_rule_text(const char *body, size_t len);

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
              size_t n_cols, page_row_fn fn, void *ctx, size_t *ret_rows, char *err,
              size_t errlen) APBOT_MUST_USE;

/* Visible text of the page (title first; no script, style or select options), whitespace
 * collapsed, at most max bytes (UTF-8 safe). A page with no visible text at all (garbled,
 * binary) gives a cleaned prefix of its raw bytes instead. Never NULL; free(). */
char *page_excerpt(const struct page *p, size_t max);

#endif
