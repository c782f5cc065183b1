/*
 * page_form.c - the form a browser would submit from a parsed page: page_find_form finds it
 * (by XPath) and reads its controls in document order as a browser's parser and a
 * script-less submission see them (disabled ones and fieldsets, checked radios, selects with
 * their options, buttons); page_form_set, _select, _press and _add change it as a user would,
 * refusing what a browser could not send; and the memory all of it lives in, carved from
 * chunks of the form's own, wiped before it goes back to the heap. Parsing the page and
 * evaluating the XPath are page.c's (and page_path.c's), resolving the action is
 * http_resolve_url's, and encoding and sending the fields is the caller's.
 */
#include "web/page.h"

#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libxml/tree.h>
#include <libxml/xpath.h>

#include "apbot/buf.h"
#include "apbot/mem.h"
#include "base/unittest.h"
#include "web/http.h"
#include "page-int.h"

#if defined(__SANITIZE_ADDRESS__)
#define PAGE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PAGE_ASAN 1
#endif
#endif
#ifdef PAGE_ASAN
#include <sanitizer/asan_interface.h>
#define PAGE_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define PAGE_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define PAGE_POISON(p, n) ((void)(p), (void)(n))
#define PAGE_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* ---- a control's attributes and text ---- */

/* s with white space runs collapsed to one space and trimmed (HTML's "strip and collapse
 * ASCII whitespace", used for option text): its length, and the text in out (with a NUL)
 * unless out is NULL. */
static size_t page_collapse(const char *s, char *out)
{
    size_t j = 0, sl;
    bool space = false;
    while (*s) {
        if (page_is_space(s, &sl)) {
            space = true;
            s += sl;
            continue;
        }
        if (space && j > 0) {
            if (out)
                out[j] = ' ';
            j++;
        }
        space = false;
        if (out)
            out[j] = *s;
        j++;
        s++;
    }
    if (out)
        out[j] = '\0';
    return j;
}

/* Heap copy of s collapsed (page_collapse). */
static char *page_collapse_dup(const char *s)
{
    char *out = apbot_xmalloc(page_collapse(s, NULL) + 1);
    (void)page_collapse(s, out);
    return out;
}

/* Whether doc declares attributes in a DTD, whose defaults xmlGetProp and xmlHasProp read for
 * an element without the attribute. libxml2's HTML parser never declares any (nor does
 * page_fast.c): this keeps the answers below libxml2's on any tree. */
static bool page_dtd_attrs(xmlDocPtr doc)
{
    return doc && ((doc->intSubset && doc->intSubset->attributes) ||
                   (doc->extSubset && doc->extSubset->attributes));
}

/* The attribute's value where it is one text node (or none), as xmlGetProp reads it: in
 * place, with *ok set; NULL with *ok set when there is no attribute of that name; *ok false
 * when xmlGetProp must be asked (several nodes, a namespace, a DTD's defaults). A form's walk
 * reads several attributes of every control, most of them absent: copying each twice
 * (xmlGetProp, then the heap) was ~2% of an invoice's instructions, asking xmlGetProp about
 * the absent ones half a percent. */
static const char *page_prop_plain(xmlNodePtr n, const char *name, bool *ok)
{
    bool named = false; /* an attribute of that name in a namespace */
    *ok = false;
    if (!n || n->type != XML_ELEMENT_NODE)
        return NULL;
    for (xmlAttrPtr a = n->properties; a; a = a->next) {
        /* xmlStrEqual's answer, the first letter first */
        if (!a->name || a->name[0] != (xmlChar)name[0] || strcmp((const char *)a->name, name) != 0)
            continue;
        if (a->ns) {
            named = true;
            continue;
        }
        xmlNodePtr c = a->children;
        if (!c) {
            *ok = true;
            return "";
        }
        if (!c->next && (c->type == XML_TEXT_NODE || c->type == XML_CDATA_SECTION_NODE)) {
            *ok = true;
            return (const char *)c->content; /* NULL: xmlGetProp's answer too */
        }
        return NULL;
    }
    *ok = !named && !page_dtd_attrs(n->doc); /* none: xmlGetProp's NULL */
    return NULL;
}

/* Attribute as a heap string (free()), NULL when absent. */
static char *page_prop(xmlNodePtr n, const char *name)
{
    bool ok;
    const char *plain = page_prop_plain(n, name, &ok);
    if (ok)
        return plain ? apbot_xstrdup(plain) : NULL;
    xmlChar *v = xmlGetProp(n, BAD_CAST name);
    if (!v)
        return NULL;
    char *out = apbot_xstrdup((const char *)v);
    xmlFree(v);
    return out;
}

/* Attribute as page_prop reads it, in place where it is one text node (valid while the page
 * is), else a heap copy left in *ret_own for the caller to free; NULL when absent. A form's
 * walk reads three or four attributes of every control. */
static const char *page_prop_ref(xmlNodePtr n, const char *name, char **ret_own)
{
    bool ok;
    const char *plain = page_prop_plain(n, name, &ok);
    *ret_own = NULL;
    if (ok)
        return plain;
    *ret_own = page_prop(n, name);
    return *ret_own;
}

/* xmlHasProp(n, name) != NULL: an attribute of that name in any namespace, or a DTD's default
 * (libxml2 is asked when the document declares any). A form's walk asks this four or five times
 * of every control. */
static bool page_has_prop(xmlNodePtr n, const char *name)
{
    if (!n || n->type != XML_ELEMENT_NODE)
        return false;
    for (xmlAttrPtr a = n->properties; a; a = a->next)
        if (a->name && a->name[0] == (xmlChar)name[0] && strcmp((const char *)a->name, name) == 0)
            return true;
    return page_dtd_attrs(n->doc) && xmlHasProp(n, BAD_CAST name) != NULL;
}

static bool page_prop_is(xmlNodePtr n, const char *name, const char *value)
{
    bool ok;
    const char *plain = page_prop_plain(n, name, &ok);
    if (ok)
        return plain && strcasecmp(plain, value) == 0;
    xmlChar *v = xmlGetProp(n, BAD_CAST name);
    bool eq = v && strcasecmp((const char *)v, value) == 0;
    xmlFree(v);
    return eq;
}

/* ---- a form's memory ----
 *
 * A form's strings and arrays are carved from chunks of its own by the bump of a pointer and
 * go back to the heap together, in page_form_done: a heap block per string and per array was
 * ~200 mallocs and as many frees per invoice, in bursts of same-size blocks freed together
 * that overflow glibc's per-thread cache and take malloc's slow paths. Two blocks:
 * - fixed: action, method, the controls, buttons, selects and options, and every array.
 *   Nothing in it dies before page_form_done but an outgrown array (arrays double). A
 *   field's name is its control's or button's string, not a copy; an image button's name is
 *   followed by the names pressing it submits (form_add_button);
 * - vals: the values, the only strings that die before the form (replaced by a set, removed
 *   with their field). A value that dies is wiped at once, as before. When dead bytes
 *   outweigh the live ones and FM_VALS_SLACK, the live values move to a new chunk and the old
 *   chunks go (form_vals_settle): sets and presses without end keep a form bounded.
 * Every chunk is wiped whole before it goes back to the heap. Under AddressSanitizer, what is
 * not carved, has died or was outgrown is poisoned, and each carve is followed by a poisoned
 * gap: a stale pointer or an overrun is reported as with the heap blocks before.
 */

#define FM_FIXED_FIRST 4000 /* a form of twenty-five fields and two selects takes ~3.3 KB */
#define FM_VALS_FIRST 1000  /* its values, and what a flow sets: ~300 bytes */
#define FM_CHUNK_MAX 262144 /* later chunks grow twofold up to this (one carve may be larger) */
#define FM_VALS_SLACK 4096  /* dead value bytes a form keeps before it moves the live ones */
#ifdef PAGE_ASAN
#define FM_STR_ALIGN 8 /* ASan poisons 8-byte granules: each carve starts one */
#define FM_GAP 8       /* poisoned bytes after each carve */
#else
#define FM_STR_ALIGN 1
#define FM_GAP 0
#endif

struct fm_chunk {
    struct fm_chunk *next; /* the chunk carved before this one */
    size_t cap;            /* bytes in data */
    size_t used;           /* bytes carved, gaps included */
    size_t pad;
    alignas(16) unsigned char data[];
};

struct fm_block {
    struct fm_chunk *head; /* the chunk carves come from; older ones behind it */
    size_t first;          /* the size of its first chunk */
    size_t dead;           /* bytes of values that died in it (vals) */
};

/* What this file keeps of a form besides struct page_form: in the fixed block's first chunk. */
struct page_form_mem {
    struct fm_block fixed;
    struct fm_block vals;
    size_t fields_cap;   /* room of names, values, hidden */
    size_t controls_cap; /* of controls */
    size_t buttons_cap;  /* of buttons, button_values, button_image */
    size_t selects_cap;  /* of selects */
};

UNITTEST void (*page_test_wiped)(const void *p, size_t n);

/* A new head chunk for b, with room for need bytes. Aborts on out-of-memory (mem.h). */
static struct fm_chunk *fm_chunk_add(struct fm_block *b, size_t need)
{
    size_t cap = b->first;
    if (b->head)
        cap = b->head->cap >= FM_CHUNK_MAX / 2 ? FM_CHUNK_MAX : b->head->cap * 2;
    if (cap < need)
        cap = need;
    struct fm_chunk *c = apbot_xmalloc(sizeof(*c) + cap);
    c->next = b->head;
    c->cap = cap;
    c->used = 0;
    PAGE_POISON(c->data, cap);
    b->head = c;
    return c;
}

/* n bytes carved from b at a multiple of align (a power of two, at most 16). Never NULL. */
static void *fm_carve(struct fm_block *b, size_t n, size_t align)
{
    if (n > SIZE_MAX / 4)
        abort(); /* nothing a page or a flow holds comes near: a size gone wrong */
    if (align < FM_STR_ALIGN)
        align = FM_STR_ALIGN;
    struct fm_chunk *c = b->head;
    size_t at = c ? (c->used + align - 1) & ~(align - 1) : 0;
    if (!c || at > c->cap || c->cap - at < n + FM_GAP) {
        c = fm_chunk_add(b, n + FM_GAP);
        at = 0;
    }
    c->used = at + n + FM_GAP;
    PAGE_UNPOISON(c->data + at, n);
    return c->data + at;
}

/* A copy of the n bytes at s, and a NUL, carved from b. */
static char *fm_dupn(struct fm_block *b, const char *s, size_t n)
{
    char *d = fm_carve(b, n + 1, 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static char *fm_dup(struct fm_block *b, const char *s)
{
    return fm_dupn(b, s, strlen(s));
}

/* s collapsed (page_collapse), carved from b. */
static char *fm_collapse(struct fm_block *b, const char *s)
{
    char *out = fm_carve(b, page_collapse(s, NULL) + 1, 1);
    (void)page_collapse(s, out);
    return out;
}

/* The room an array of room cap takes to hold element n: twice as much as needed, from 16. */
static size_t fm_room(size_t cap, size_t n)
{
    size_t c = cap ? cap : 16;
    while (c <= n)
        c *= 2;
    return c;
}

/* A copy of the first n elements of old (room old_cap) with room for cap, carved from b;
 * old dies. */
static void *fm_array(struct fm_block *b, void *old, size_t n, size_t old_cap, size_t cap,
                      size_t size)
{
    if (cap > SIZE_MAX / 4 / size)
        abort(); /* as in fm_carve */
    void *a = fm_carve(b, cap * size, 16);
    if (n)
        memcpy(a, old, n * size);
    if (old)
        PAGE_POISON(old, old_cap * size);
    return a;
}

/* apbot_grow for an array carved from b: arr, or its copy, with room for element n; NULL
 * when n reaches max. */
static void *fm_grow(struct fm_block *b, void *arr, size_t *cap, size_t n, size_t size, size_t max)
{
    if (n >= max)
        return NULL;
    if (n < *cap)
        return arr;
    size_t c = fm_room(*cap, n);
    if (c > max)
        c = max;
    arr = fm_array(b, arr, n, *cap, c, size);
    *cap = c;
    return arr;
}

/* Wipes every chunk of b and gives it back to the heap. b may be in one of them: pass a
 * copy. */
static void fm_block_free(const struct fm_block *b)
{
    for (struct fm_chunk *c = b->head, *next; c; c = next) {
        next = c->next;
        PAGE_UNPOISON(c->data, c->used);
        explicit_bzero(c->data, c->used);
        if (page_test_wiped)
            page_test_wiped(c->data, c->used);
        free(c);
    }
}

/* The memory of a form being built, or of a zeroed one that gets a control. */
static struct page_form_mem *fm_new(void)
{
    struct fm_block fixed = {.first = FM_FIXED_FIRST};
    struct page_form_mem *m = fm_carve(&fixed, sizeof(*m), 16);
    memset(m, 0, sizeof(*m));
    m->fixed = fixed;
    m->vals.first = FM_VALS_FIRST;
    return m;
}

UNITTEST size_t page_form_bytes(const struct page_form *f)
{
    size_t n = 0;
    if (f && f->mem) {
        for (const struct fm_chunk *c = f->mem->fixed.head; c; c = c->next)
            n += sizeof(*c) + c->cap;
        for (const struct fm_chunk *c = f->mem->vals.head; c; c = c->next)
            n += sizeof(*c) + c->cap;
    }
    return n;
}

/* ---- forms ---- */

/* Room for field f->n. */
static void form_room_fields(struct page_form *f)
{
    struct page_form_mem *m = f->mem;
    if (f->n < m->fields_cap)
        return;
    size_t c = fm_room(m->fields_cap, f->n);
    f->names = fm_array(&m->fixed, f->names, f->n, m->fields_cap, c, sizeof(*f->names));
    f->values = fm_array(&m->fixed, f->values, f->n, m->fields_cap, c, sizeof(*f->values));
    f->hidden = fm_array(&m->fixed, f->hidden, f->n, m->fields_cap, c, sizeof(*f->hidden));
    m->fields_cap = c;
}

/* Appends name=value: name is the form's own string for it (a control's or a button's),
 * value is copied. */
static void form_add(struct page_form *f, char *name, const char *value, bool hidden)
{
    form_room_fields(f);
    f->names[f->n] = name;
    f->values[f->n] = fm_dup(&f->mem->vals, value);
    f->hidden[f->n] = hidden;
    f->n++;
}

/* A value that dies (replaced, or removed with its field): wiped at once, as a set value may
 * be a password, and counted for form_vals_settle. */
static void form_value_die(struct page_form *f, char *v)
{
    size_t n = strlen(v);
    explicit_bzero(v, n);
    if (page_test_wiped)
        page_test_wiped(v, n);
    PAGE_POISON(v, n + 1);
    f->mem->vals.dead += n + 1;
}

/*
 * After a change of the values (page_form_set, _select, _press, and the end of a build, where
 * checked radios uncheck others): when the values that died outweigh the live ones and
 * FM_VALS_SLACK, the live ones move to a new chunk and the old chunks go back to the heap,
 * wiped. Memory stays within about twice the live values (and the slack) however many sets
 * and presses; each move is paid for by as many dead bytes. Only values move, and never in
 * the middle of a build (form_radio holds values).
 */
static void form_vals_settle(struct page_form *f)
{
    struct page_form_mem *m = f->mem;
    if (m->vals.dead <= FM_VALS_SLACK)
        return;
    size_t used = 0, live = 0;
    for (const struct fm_chunk *c = m->vals.head; c; c = c->next)
        used += c->used;
    if (m->vals.dead <= used - m->vals.dead)
        return;
    for (size_t i = 0; i < f->n; i++)
        live += strlen(f->values[i]) + FM_STR_ALIGN + FM_GAP; /* the NUL, the carve's rounding */
    struct fm_block old = m->vals;
    m->vals.head = NULL;
    m->vals.dead = 0;
    (void)fm_chunk_add(&m->vals, live);
    for (size_t i = 0; i < f->n; i++)
        f->values[i] = fm_dup(&m->vals, f->values[i]);
    fm_block_free(&old);
}

static void form_remove(struct page_form *f, size_t i)
{
    form_value_die(f, f->values[i]);
    memmove(f->names + i, f->names + i + 1, (f->n - i - 1) * sizeof(*f->names));
    memmove(f->values + i, f->values + i + 1, (f->n - i - 1) * sizeof(*f->values));
    memmove(f->hidden + i, f->hidden + i + 1, (f->n - i - 1) * sizeof(*f->hidden));
    f->n--;
}

/* The form's string of control name, NULL when it has no such control. */
static char *form_control_named(const struct page_form *f, const char *name)
{
    for (size_t i = 0; i < f->n_controls; i++)
        if (f->controls[i][0] == name[0] && strcmp(f->controls[i], name) == 0)
            return f->controls[i];
    return NULL;
}

/* Adds control name unless the form has it; the form's string of it. */
static char *form_add_control(struct page_form *f, const char *name)
{
    char *known = form_control_named(f, name);
    if (known)
        return known;
    if (!f->mem)
        f->mem = fm_new(); /* a zeroed form */
    struct page_form_mem *m = f->mem;
    if (f->n_controls == m->controls_cap) {
        size_t c = fm_room(m->controls_cap, f->n_controls);
        f->controls = fm_array(&m->fixed, f->controls, f->n_controls, m->controls_cap, c,
                               sizeof(*f->controls));
        m->controls_cap = c;
    }
    return f->controls[f->n_controls++] = fm_dup(&m->fixed, name);
}

/* Adds a submit button (while the form is built). An image button's string is its name, then
 * name.x and name.y, what pressing it submits (form_image_names). */
static void form_add_button(struct page_form *f, const char *name, const char *value, bool image)
{
    struct page_form_mem *m = f->mem;
    if (f->n_buttons == m->buttons_cap) {
        size_t c = fm_room(m->buttons_cap, f->n_buttons);
        f->buttons =
            fm_array(&m->fixed, f->buttons, f->n_buttons, m->buttons_cap, c, sizeof(*f->buttons));
        f->button_values = fm_array(&m->fixed, f->button_values, f->n_buttons, m->buttons_cap, c,
                                    sizeof(*f->button_values));
        f->button_image = fm_array(&m->fixed, f->button_image, f->n_buttons, m->buttons_cap, c,
                                   sizeof(*f->button_image));
        m->buttons_cap = c;
    }
    size_t len = strlen(name);
    char *s;
    if (image) {
        s = fm_carve(&m->fixed, 3 * len + 7, 1);
        memcpy(s, name, len);
        s[len] = '\0';
        memcpy(s + len + 1, name, len);
        memcpy(s + 2 * len + 1, ".x", 3);
        memcpy(s + 2 * len + 4, name, len);
        memcpy(s + 3 * len + 4, ".y", 3);
    } else {
        s = fm_dupn(&m->fixed, name, len);
    }
    f->buttons[f->n_buttons] = s;
    f->button_values[f->n_buttons] = fm_dup(&m->fixed, value);
    f->button_image[f->n_buttons] = image;
    f->n_buttons++;
}

/* The fields image button b submits when pressed: name.x=0 and name.y=0 (form_add_button). */
static void form_image_names(const struct page_form *f, size_t b, char **ret_x, char **ret_y)
{
    size_t len = strlen(f->buttons[b]);
    *ret_x = f->buttons[b] + len + 1;
    *ret_y = *ret_x + len + 3;
}

/* What a form may hold: far beyond any real screen, and a 4 MB page cannot reach them. */
#define PAGE_MAX_SELECTS 10000
#define PAGE_MAX_OPTIONS 200000 /* per select */

/* The value an option submits: its value attribute, else its text with white space
 * collapsed, as a browser does. Carved from b. */
static char *option_value(struct fm_block *b, xmlNodePtr opt)
{
    char *own;
    const char *v = page_prop_ref(opt, "value", &own);
    char *out;
    if (v) {
        out = fm_dup(b, v);
    } else {
        xmlChar *own_text;
        out = fm_collapse(b, page_content_ref(opt, &own_text));
        if (own_text)
            xmlFree(own_text);
    }
    if (own)
        free(own);
    return out;
}

/* The label a browser shows: the label attribute unless empty, else the text; collapsed.
 * Carved from b. */
static char *option_label(struct fm_block *b, xmlNodePtr opt)
{
    char *own;
    xmlChar *own_text = NULL;
    const char *l = page_prop_ref(opt, "label", &own);
    if (!l || !*l)
        l = page_content_ref(opt, &own_text);
    char *out = fm_collapse(b, l);
    if (own)
        free(own);
    if (own_text)
        xmlFree(own_text);
    return out;
}

/* Control elements one form may own: every step of building it is at most quadratic in
 * them (a name looked up among the controls, a checked radio's group among the groups), so a
 * page of hundreds of thousands of controls is refused instead of keeping the bot busy for
 * minutes. Far beyond any entry form (a 500-line journal of 10 fields each is half of it). */
#define PAGE_MAX_CONTROLS 10000

/* A group's checked radio: its control string (f.names[i]) and submitted value (f.values[i]). */
struct form_radio {
    const char *name, *value;
};

/* A form under construction. */
struct form_build {
    struct page_form f;
    struct form_radio *radios; /* one per group with a checked radio */
    size_t n_radios, radios_cap;
};

/* A checked radio, name the form's string of its control: as a browser's parser does, it
 * unchecks the one checked before it in its group (same name, so the same string), so that a
 * group submits one value, the last checked. */
static void form_radio(struct form_build *fb, char *name, const char *value)
{
    struct page_form *f = &fb->f;
    struct form_radio *group = NULL;
    for (size_t r = 0; r < fb->n_radios && !group; r++)
        if (fb->radios[r].name == name)
            group = &fb->radios[r];
    if (group) {
        for (size_t i = 0; i < f->n; i++)
            if (f->values[i] == group->value) {
                form_remove(f, i);
                break;
            }
    } else {
        /* at most one group per control (PAGE_MAX_CONTROLS) */
        if (apbot_grow((void **)&fb->radios, &fb->radios_cap, fb->n_radios, sizeof(*fb->radios),
                       PAGE_MAX_CONTROLS) != APBOT_OK)
            abort();
        group = &fb->radios[fb->n_radios++];
        group->name = name;
    }
    form_add(f, name, value, false);
    group->value = f->values[f->n - 1];
}

/* Select sel, control name (the form's string of it): its options, and the fields it
 * submits. */
static int form_select(struct form_build *fb, xmlNodePtr sel, char *name)
{
    struct page_form *f = &fb->f;
    struct page_form_mem *m = f->mem;
    bool multiple = page_has_prop(sel, "multiple");
    size_t chosen = SIZE_MAX, first = SIZE_MAX; /* options' indexes */
    bool chosen_disabled = false; /* itself or its optgroup: a browser does not submit it */
    struct page_select ps = {.name = name, .multiple = multiple};
    size_t cap = 0;
    int rc = APBOT_OK;
    struct page_select *selects = fm_grow(&m->fixed, f->selects, &m->selects_cap, f->n_selects,
                                          sizeof(*f->selects), PAGE_MAX_SELECTS);
    if (!selects)
        return APBOT_E_LIMIT;
    f->selects = selects;

    for (xmlNodePtr n = sel->children; n; n = page_walk_next(n, sel, true)) {
        if (!page_is_elem(n, "option"))
            continue;
        bool disabled = page_has_prop(n, "disabled") || (page_is_elem(n->parent, "optgroup") &&
                                                         page_has_prop(n->parent, "disabled"));
        struct page_option *options = fm_grow(&m->fixed, ps.options, &cap, ps.n_options,
                                              sizeof(*ps.options), PAGE_MAX_OPTIONS);
        if (!options) {
            rc = APBOT_E_LIMIT;
            break;
        }
        ps.options = options;
        struct page_option *o = &ps.options[ps.n_options++];
        o->value = option_value(&m->fixed, n);
        o->label = option_label(&m->fixed, n);
        o->disabled = disabled;
        if (first == SIZE_MAX && !disabled)
            first = ps.n_options - 1;
        if (!page_has_prop(n, "selected"))
            continue;
        if (multiple) {
            if (!disabled)
                form_add(f, name, o->value, false);
        } else {
            chosen = ps.n_options - 1; /* the last selected option wins, as in a browser */
            chosen_disabled = disabled;
        }
    }
    f->selects[f->n_selects++] = ps; /* kept even when cut */
    if (rc != APBOT_OK || multiple)
        return rc;
    if (chosen == SIZE_MAX)
        chosen = first;
    if (chosen == SIZE_MAX || chosen_disabled)
        return APBOT_OK;
    form_add(f, name, ps.options[chosen].value, false);
    return APBOT_OK;
}

/* True when n sits in a disabled fieldset and not in that fieldset's first legend child:
 * then n is disabled (HTML), neither submitted nor usable, as if it said so itself. */
static bool page_in_disabled_fieldset(xmlNodePtr n)
{
    for (xmlNodePtr child = n, a = n->parent; a && a->type == XML_ELEMENT_NODE;
         child = a, a = a->parent) {
        if (!page_is_elem(a, "fieldset") || !page_has_prop(a, "disabled"))
            continue;
        xmlNodePtr legend = a->children;
        while (legend && !page_is_elem(legend, "legend"))
            legend = legend->next;
        if (child != legend)
            return true;
    }
    return false;
}

/* The controls of a form (HTML's "listed" elements a form submits). */
enum page_control {
    PAGE_CONTROL_NONE = 0,
    PAGE_CONTROL_INPUT,
    PAGE_CONTROL_BUTTON,
    PAGE_CONTROL_SELECT,
    PAGE_CONTROL_TEXTAREA,
};

/* Whether the len lowered bytes of low are the name s (a literal). */
#define PAGE_LOW_IS(s) (len == sizeof(s) - 1 && memcmp(low, s, sizeof(s) - 1) == 0)

/* Which control n is, by its name in any case (as page_is_elem; one lowering for the four
 * names the walk asks of every element of the page). */
static enum page_control page_control_of(xmlNodePtr n)
{
    if (!n || n->type != XML_ELEMENT_NODE || !n->name)
        return PAGE_CONTROL_NONE;
    char low[8]; /* "textarea" */
    size_t len = 0;
    for (const xmlChar *c = n->name; *c; c++) {
        if (len == sizeof(low))
            return PAGE_CONTROL_NONE;
        low[len++] = (char)(*c >= 'A' && *c <= 'Z' ? *c + ('a' - 'A') : *c);
    }
    return PAGE_LOW_IS("input")      ? PAGE_CONTROL_INPUT
           : PAGE_LOW_IS("select")   ? PAGE_CONTROL_SELECT
           : PAGE_LOW_IS("textarea") ? PAGE_CONTROL_TEXTAREA
           : PAGE_LOW_IS("button")   ? PAGE_CONTROL_BUTTON
                                     : PAGE_CONTROL_NONE;
}

/* What an <input> of a type does in a form (any case; unknown types are text). */
enum page_input {
    PAGE_INPUT_TEXT = 0, /* submitted with its value: text, hidden, password, ... */
    PAGE_INPUT_HIDDEN,
    PAGE_INPUT_SUBMIT, /* submit, image: a button, submitted only when pressed */
    PAGE_INPUT_IMAGE,
    PAGE_INPUT_CHECKBOX, /* submitted when checked */
    PAGE_INPUT_RADIO,
    PAGE_INPUT_NONE, /* reset, button, file: not submitted by a script-less browser */
};

/* The kind of an input of type t (NULL: none), by one lowering of t (ASCII, as strcasecmp
 * folds in the C locale) instead of a strcasecmp per type. */
static enum page_input page_input_of(const char *t)
{
    char low[8]; /* "checkbox" */
    size_t len = 0;
    for (; t && *t; t++) {
        if (len == sizeof(low))
            return PAGE_INPUT_TEXT;
        low[len++] = (char)(*t >= 'A' && *t <= 'Z' ? *t + ('a' - 'A') : *t);
    }
    if (PAGE_LOW_IS("submit"))
        return PAGE_INPUT_SUBMIT;
    if (PAGE_LOW_IS("image"))
        return PAGE_INPUT_IMAGE;
    if (PAGE_LOW_IS("checkbox"))
        return PAGE_INPUT_CHECKBOX;
    if (PAGE_LOW_IS("radio"))
        return PAGE_INPUT_RADIO;
    if (PAGE_LOW_IS("reset") || PAGE_LOW_IS("button") || PAGE_LOW_IS("file"))
        return PAGE_INPUT_NONE;
    if (PAGE_LOW_IS("hidden"))
        return PAGE_INPUT_HIDDEN;
    return PAGE_INPUT_TEXT;
}

/* One control of the form, n, of kind (not NONE). Its attributes are read in place. */
static int form_control(struct form_build *fb, xmlNodePtr n, enum page_control kind)
{
    struct page_form *f = &fb->f;
    int rc = APBOT_OK;
    char *own_name, *own_type = NULL, *own_value = NULL, *cn;
    const char *name = page_prop_ref(n, "name", &own_name);
    if (!name || !*name || page_has_prop(n, "disabled") || page_in_disabled_fieldset(n))
        goto out;

    switch (kind) {
    case PAGE_CONTROL_INPUT: {
        enum page_input type = page_input_of(page_prop_ref(n, "type", &own_type));
        const char *value = page_prop_ref(n, "value", &own_value);
        switch (type) {
        case PAGE_INPUT_SUBMIT:
        case PAGE_INPUT_IMAGE:
            form_add_button(f, name, value ? value : "", type == PAGE_INPUT_IMAGE);
            break;
        case PAGE_INPUT_CHECKBOX:
            cn = form_add_control(f, name);
            if (page_has_prop(n, "checked"))
                form_add(f, cn, value ? value : "on", false);
            break;
        case PAGE_INPUT_RADIO:
            cn = form_add_control(f, name);
            if (page_has_prop(n, "checked"))
                form_radio(fb, cn, value ? value : "on");
            break;
        case PAGE_INPUT_NONE:
            break; /* not submitted by a script-less browser without a file */
        case PAGE_INPUT_TEXT:
        case PAGE_INPUT_HIDDEN:
            cn = form_add_control(f, name);
            form_add(f, cn, value ? value : "", type == PAGE_INPUT_HIDDEN);
            break;
        }
        break;
    }
    case PAGE_CONTROL_BUTTON:
        /* HTML: a button without a type, or with one the browser does not know, submits */
        if (!page_prop_is(n, "type", "reset") && !page_prop_is(n, "type", "button")) {
            const char *value = page_prop_ref(n, "value", &own_value);
            form_add_button(f, name, value ? value : "", false);
        }
        break;
    case PAGE_CONTROL_SELECT:
        cn = form_add_control(f, name);
        rc = form_select(fb, n, cn);
        break;
    case PAGE_CONTROL_TEXTAREA: {
        cn = form_add_control(f, name);
        xmlChar *own_text;
        const char *v = page_content_ref(n, &own_text);
        /* a newline right after <textarea> belongs to the markup, not the value */
        if (v[0] == '\r' && v[1] == '\n')
            v += 2;
        else if (v[0] == '\n')
            v++;
        form_add(f, cn, v, false);
        if (own_text)
            xmlFree(own_text);
        break;
    }
    case PAGE_CONTROL_NONE:
        break;
    }
out:
    /* mostly NULL (the attributes are read in place): three calls per control saved */
    if (own_name)
        free(own_name);
    if (own_type)
        free(own_type);
    if (own_value)
        free(own_value);
    return rc;
}

static bool form_owns(xmlNodePtr form, const char *form_id, xmlNodePtr n)
{
    char *own;
    const char *owner = page_prop_ref(n, "form", &own);
    if (owner) {
        bool mine = form_id && strcmp(owner, form_id) == 0;
        if (own)
            free(own);
        return mine;
    }
    for (xmlNodePtr a = n->parent; a; a = a->parent)
        if (a == form)
            return true;
    return false;
}

int page_find_form(const struct page *p, const char *xpath, struct page_form *ret, char *err,
                   size_t errlen)
{
    struct page_quiet q;
    struct page_xerr e;
    struct form_build fb;
    struct page_nodes ns;
    xmlNodePtr form = NULL;
    char *own_id = NULL;
    int rc = APBOT_OK;

    if (!p || !xpath || !ret)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "page_find_form: bad arguments");
    memset(&fb, 0, sizeof(fb));

    page_quiet_begin(&q);
    xmlXPathContextPtr x = page_xctx_of(p, &e);
    xmlXPathObjectPtr obj = page_eval(p, x, NULL, xpath, &e, &ns);
    if (!obj) {
        page_set_err(err, errlen, "form XPath", e.msg);
        rc = APBOT_E_INVAL;
        goto out;
    }
    if (obj->type == XPATH_NODESET && obj->nodesetval)
        for (int i = 0; i < obj->nodesetval->nodeNr && !form; i++)
            if (page_is_elem(obj->nodesetval->nodeTab[i], "form"))
                form = obj->nodesetval->nodeTab[i];
    if (!form) {
        rc = apbot_fail(err, errlen, APBOT_E_NOTFOUND, "no <form> on the page matches %s", xpath);
        goto out;
    }

    fb.f.mem = fm_new();
    char *own_action;
    const char *action = page_prop_ref(form, "action", &own_action);
    if (!action || !*action) {
        if (p->url)
            fb.f.action = fm_dup(&fb.f.mem->fixed, p->url);
    } else {
        /* without the page's URL: absolute already, or unusable */
        char *abs = http_resolve_url(p->url, action);
        if (abs)
            fb.f.action = fm_dup(&fb.f.mem->fixed, abs);
        free(abs);
    }
    if (own_action)
        free(own_action);
    if (!fb.f.action) {
        rc = apbot_fail(err, errlen, APBOT_E_PARSE, "form %s: action cannot be resolved", xpath);
        goto out;
    }
    fb.f.method = fm_dup(&fb.f.mem->fixed, page_prop_is(form, "method", "post") ? "POST" : "GET");

    /* Controls in document order; a control's owner is its form attribute if it has one,
     * else its nearest form ancestor (nested forms do not survive parsing). */
    const char *form_id = page_prop_ref(form, "id", &own_id);
    xmlNodePtr root = xmlDocGetRootElement(p->doc);
    size_t owned = 0;
    for (xmlNodePtr n = root; n; n = page_walk_next(n, root, true)) {
        if (n->type != XML_ELEMENT_NODE)
            continue;
        enum page_control kind = page_control_of(n);
        if (kind != PAGE_CONTROL_NONE) {
            if (form_owns(form, form_id, n)) {
                rc = ++owned > PAGE_MAX_CONTROLS ? APBOT_E_LIMIT : form_control(&fb, n, kind);
                if (rc != APBOT_OK) {
                    rc = apbot_fail(err, errlen, rc,
                                    "form %s has more controls, selects or options "
                                    "than apbot reads",
                                    xpath);
                    goto out;
                }
            }
        }
    }

    form_vals_settle(&fb.f); /* what radios unchecked (the radios' list goes now) */
    *ret = fb.f;
    memset(&fb.f, 0, sizeof(fb.f));
out:
    page_form_done(&fb.f);
    if (fb.radios)
        free(fb.radios);
    if (own_id)
        free(own_id);
    page_obj_free(obj, &ns);
    page_quiet_end(&q);
    return rc;
}

void page_form_done(struct page_form *f)
{
    if (!f)
        return;
    if (f->mem) {
        /* every value is wiped with its chunk (fm_block_free); f->mem is in a fixed chunk */
        struct fm_block vals = f->mem->vals, fixed = f->mem->fixed;
        fm_block_free(&vals);
        fm_block_free(&fixed);
    }
    memset(f, 0, sizeof(*f));
}

static const struct page_select *form_find_select(const struct page_form *f, const char *name)
{
    for (size_t i = 0; i < f->n_selects; i++)
        if (strcmp(f->selects[i].name, name) == 0)
            return &f->selects[i];
    return NULL;
}

bool page_form_has(const struct page_form *f, const char *name)
{
    return f && name && form_control_named(f, name);
}

/* Sets an existing control's value (no select check): the first submitted field of that name
 * gets it and later ones go; a control not submitted yet is added. */
static int form_set_value(struct page_form *f, const char *name, const char *value)
{
    size_t first = f->n;
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->names[i], name) == 0) {
            first = i;
            break;
        }
    if (first == f->n) {
        /* Not submitted yet, but the form has it (an unchecked box, an empty select)? */
        char *control = form_control_named(f, name);
        if (!control)
            return APBOT_E_NOTFOUND;
        form_add(f, control, value, false);
        return APBOT_OK;
    }
    char *old = f->values[first];
    f->values[first] = fm_dup(&f->mem->vals, value); /* before old dies: value may be it */
    form_value_die(f, old);
    /* One value per name after a set: drop later duplicates (a multi-select's others). */
    for (size_t i = f->n; i-- > first + 1;)
        if (strcmp(f->names[i], name) == 0)
            form_remove(f, i);
    form_vals_settle(f);
    return APBOT_OK;
}

int page_form_set(struct page_form *f, const char *name, const char *value)
{
    if (!f || !name || !value)
        return APBOT_E_INVAL;
    if (!page_form_has(f, name))
        return APBOT_E_NOTFOUND;
    const struct page_select *sel = form_find_select(f, name);
    if (sel) {
        bool offered = false;
        for (size_t k = 0; k < sel->n_options && !offered; k++)
            offered = !sel->options[k].disabled && strcmp(sel->options[k].value, value) == 0;
        if (!offered)
            return APBOT_E_DATA; /* a browser could not send it; never another option */
    }
    return form_set_value(f, name, value);
}

/* True when the option's label (collapsed already) is designated by text (collapsed). */
static bool option_matches(const struct page_option *o, const char *text, const char *collapsed,
                           enum page_option_mode mode)
{
    switch (mode) {
    case PAGE_OPTION_VALUE:
        return strcmp(o->value, text) == 0;
    case PAGE_OPTION_LABEL:
        return strcmp(o->label, collapsed) == 0;
    case PAGE_OPTION_LABEL_PREFIX:
        return collapsed[0] && strncmp(o->label, collapsed, strlen(collapsed)) == 0;
    }
    return false;
}

int page_form_select(struct page_form *f, const char *name, const char *text,
                     enum page_option_mode mode, const struct page_option **ret_chosen)
{
    if (!f || !name || !text)
        return APBOT_E_INVAL;
    if (mode != PAGE_OPTION_VALUE && mode != PAGE_OPTION_LABEL && mode != PAGE_OPTION_LABEL_PREFIX)
        return APBOT_E_INVAL;
    if (!page_form_has(f, name))
        return APBOT_E_NOTFOUND;
    const struct page_select *sel = form_find_select(f, name);
    if (!sel)
        return APBOT_E_INVAL; /* the control is not a select: the form changed */

    char *collapsed = page_collapse_dup(text);
    const struct page_option *chosen = NULL;
    int rc = APBOT_OK;
    for (size_t k = 0; k < sel->n_options; k++) {
        const struct page_option *o = &sel->options[k];
        if (o->disabled || !option_matches(o, text, collapsed, mode))
            continue;
        if (chosen && strcmp(chosen->value, o->value) != 0) {
            rc = APBOT_E_CONFLICT; /* two different submissions: which one is a guess */
            break;
        }
        if (!chosen)
            chosen = o;
    }
    free(collapsed);
    if (rc == APBOT_OK && !chosen)
        rc = APBOT_E_DATA;
    if (rc != APBOT_OK)
        return rc;
    rc = form_set_value(f, name, chosen->value);
    if (rc == APBOT_OK && ret_chosen)
        *ret_chosen = chosen;
    return rc;
}

int page_form_add(struct page_form *f, const char *name, const char *value)
{
    if (!f || !name || !*name || !value)
        return APBOT_E_INVAL;
    if (page_form_has(f, name))
        return APBOT_E_CONFLICT;
    form_add(f, form_add_control(f, name), value, false);
    return APBOT_OK;
}

/* Removes the last submitted field name=value, if any. */
static void form_remove_last(struct page_form *f, const char *name, const char *value)
{
    for (size_t i = f->n; i-- > 0;)
        if (strcmp(f->names[i], name) == 0 && strcmp(f->values[i], value) == 0) {
            form_remove(f, i);
            return;
        }
}

/* True when buttons a and b submit the same fields. */
static bool form_same_press(const struct page_form *f, size_t a, size_t b)
{
    return strcmp(f->buttons[a], f->buttons[b]) == 0 && f->button_image[a] == f->button_image[b] &&
           (f->button_image[a] || strcmp(f->button_values[a], f->button_values[b]) == 0);
}

int page_form_press(struct page_form *f, const char *name, const char *value)
{
    if (!f || !name)
        return APBOT_E_INVAL;
    size_t b = f->n_buttons;
    for (size_t i = 0; i < f->n_buttons; i++) {
        if (strcmp(f->buttons[i], name) != 0 || (value && strcmp(f->button_values[i], value) != 0))
            continue;
        if (b == f->n_buttons)
            b = i;
        else if (!form_same_press(f, b, i))
            return APBOT_E_CONFLICT; /* never "the first one" */
    }
    if (b == f->n_buttons)
        return APBOT_E_NOTFOUND;

    /* The fields a button submits: name=value, or name.x=0 and name.y=0 for an image. */
    char *x, *y;
    /* Only one button is ever pressed: undo an earlier press. */
    if (f->pressed > 0 && f->pressed <= f->n_buttons) {
        size_t old = f->pressed - 1;
        if (f->button_image[old]) {
            form_image_names(f, old, &x, &y);
            form_remove_last(f, x, "0");
            form_remove_last(f, y, "0");
        } else {
            form_remove_last(f, f->buttons[old], f->button_values[old]);
        }
    }
    if (f->button_image[b]) {
        form_image_names(f, b, &x, &y);
        form_add(f, x, "0", false);
        form_add(f, y, "0", false);
    } else {
        form_add(f, f->buttons[b], f->button_values[b], false);
    }
    f->pressed = b + 1;
    form_vals_settle(f);
    return APBOT_OK;
}
