/*
 * page_text.c - the text of a page that people and outcome rules read: the bounded, readable
 * excerpt of a parsed page kept as evidence (title first, then the visible text, white space
 * collapsed, UTF-8 safe; a page without visible text shows its raw bytes cleaned), and the
 * rule text outcome patterns are matched against (the body as received with comments, raw
 * text nobody sees and echoed attribute values blanked, offsets kept). Both only read:
 * parsing the page and its tree is page.c's (and page_fast.c's), the tree's walk is
 * page-int.h's, and what a rule makes of the text is match's job, not this module's.
 */
#include "web/page.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/tree.h>

#include "apbot/mem.h"
#include "page-int.h"

/* ---- excerpt ---- */

/* What the excerpt makes of an element. */
enum page_elem_kind {
    PAGE_ELEM_BLOCK = 0, /* a word break before and after it */
    PAGE_ELEM_INLINE,    /* none: its text runs on with its neighbours' */
    PAGE_ELEM_SKIP,      /* its text is not shown (script, style, options, the head) */
};

/*
 * The kind of n (BLOCK for anything not an element), by its name in any case. The excerpt
 * asks this of every element and of its ancestors: a comparison per listed name, each a
 * strcasecmp, was most of the excerpt's cost. Here the name is lowered once (ASCII, as
 * strcasecmp folds it in the C locale, which apbot never changes) and compared with the
 * few names of its first letter. test_page's excerpt test holds this to the lists as first
 * written (a name added here goes there too).
 */
static enum page_elem_kind page_elem_kind(xmlNodePtr n)
{
    if (!n || n->type != XML_ELEMENT_NODE || !n->name)
        return PAGE_ELEM_BLOCK;
    char low[8]; /* the longest name listed below is 8 bytes */
    size_t len = 0;
    for (const xmlChar *c = n->name; *c; c++) {
        if (len == sizeof(low))
            return PAGE_ELEM_BLOCK;
        low[len++] = (char)(*c >= 'A' && *c <= 'Z' ? *c + ('a' - 'A') : *c);
    }
#define PAGE_IS(s) (len == sizeof(s) - 1 && memcmp(low, s, sizeof(s) - 1) == 0)
    bool in = false, skip = false;
    switch (len ? low[0] : '\0') {
    case 'a':
        in = PAGE_IS("a") || PAGE_IS("abbr");
        break;
    case 'b':
        in = PAGE_IS("b") || PAGE_IS("bdi") || PAGE_IS("bdo");
        break;
    case 'c':
        in = PAGE_IS("cite") || PAGE_IS("code");
        break;
    case 'e':
        in = PAGE_IS("em");
        break;
    case 'f':
        in = PAGE_IS("font");
        break;
    case 'h':
        skip = PAGE_IS("head");
        break;
    case 'i':
        in = PAGE_IS("i");
        break;
    case 'k':
        in = PAGE_IS("kbd");
        break;
    case 'l':
        in = PAGE_IS("label");
        break;
    case 'm':
        in = PAGE_IS("mark");
        break;
    case 'n':
        in = PAGE_IS("nobr");
        break;
    case 'q':
        in = PAGE_IS("q");
        break;
    case 's':
        skip = PAGE_IS("script") || PAGE_IS("style") || PAGE_IS("select");
        in = PAGE_IS("s") || PAGE_IS("samp") || PAGE_IS("small") || PAGE_IS("span") ||
             PAGE_IS("strong") || PAGE_IS("sub") || PAGE_IS("sup");
        break;
    case 't':
        skip = PAGE_IS("template") || PAGE_IS("title");
        in = PAGE_IS("tt");
        break;
    case 'u':
        in = PAGE_IS("u");
        break;
    case 'v':
        in = PAGE_IS("var");
        break;
    default:
        break;
    }
#undef PAGE_IS
    return skip ? PAGE_ELEM_SKIP : in ? PAGE_ELEM_INLINE : PAGE_ELEM_BLOCK;
}

struct page_text {
    char *buf;
    size_t len;
    size_t max;
    bool pending_space;
    bool full;
};

/* Length of the well-formed UTF-8 character at s (NUL-terminated), 0 when there is none:
 * RFC 3629's table, so overlong forms (E0 80..9F, F0 80..8F), surrogates (ED A0..BF) and
 * code points past U+10FFFF (F4 90..BF) are not characters either. */
static size_t page_utf8_len(const unsigned char *s)
{
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range */
    if (s[0] < 0x80)
        return 1;
    else if (s[0] >= 0xC2 && s[0] <= 0xDF)
        need = 2;
    else if (s[0] >= 0xE0 && s[0] <= 0xEF)
        need = 3;
    else if (s[0] >= 0xF0 && s[0] <= 0xF4)
        need = 4;
    else
        return 0;
    if (s[0] == 0xE0)
        lo = 0xA0;
    else if (s[0] == 0xED)
        hi = 0x9F;
    else if (s[0] == 0xF0)
        lo = 0x90;
    else if (s[0] == 0xF4)
        hi = 0x8F;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < need; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return need;
}

/* Whether c is a byte page_text_add copies as it is: ASCII, not NUL and not white space. */
static bool page_ascii_kept(unsigned char c)
{
    return c > ' ' ? c < 0x80 : c != '\0' && c != ' ' && (c < '\t' || c > '\r');
}

static void page_text_add(struct page_text *t, const char *s)
{
    size_t sl;
    while (*s && !t->full) {
        if (page_ascii_kept((unsigned char)*s)) {
            /* A run of such bytes goes in at once, as far as it fits: most text is ASCII
             * words, and a call or two per byte was most of the excerpt's cost. What does not
             * fit is met by the next round, which finds the buffer full. */
            size_t lead = t->pending_space ? 1 : 0;
            if (t->len + lead + 1 > t->max) {
                t->full = true;
                break;
            }
            size_t cap = t->max - t->len - lead, run = 1;
            while (run < cap && page_ascii_kept((unsigned char)s[run]))
                run++;
            if (lead)
                t->buf[t->len++] = ' ';
            t->pending_space = false;
            memcpy(t->buf + t->len, s, run);
            t->len += run;
            s += run;
            continue;
        }
        if (*s == ' ' || (*s >= '\t' && *s <= '\r')) { /* a run of ASCII white space */
            if (t->len > 0)
                t->pending_space = true;
            while (*s == ' ' || (*s >= '\t' && *s <= '\r'))
                s++;
            continue;
        }
        if (page_is_space(s, &sl)) {
            if (t->len > 0)
                t->pending_space = true;
            s += sl;
            continue;
        }
        size_t cl = page_utf8_len((const unsigned char *)s);
        if (cl == 0) { /* not UTF-8 (libxml2 never hands us that): skip the byte */
            s++;
            continue;
        }
        size_t need = cl + (t->pending_space ? 1 : 0);
        if (t->len + need > t->max) {
            t->full = true;
            break;
        }
        if (t->pending_space)
            t->buf[t->len++] = ' ';
        t->pending_space = false;
        memcpy(t->buf + t->len, s, cl);
        t->len += cl;
        s += cl;
    }
}

char *page_excerpt(const struct page *p, size_t max)
{
    struct page_text t = {0};
    if (max > SIZE_MAX - 1)
        max = SIZE_MAX - 1;
    t.buf = apbot_xmalloc(max + 1);
    t.max = max;
    if (!p)
        goto out;

    /* The title first (what a browser shows in its tab), then the body's visible text. */
    xmlNodePtr root = xmlDocGetRootElement(p->doc);
    for (xmlNodePtr n = root; n && !t.full; n = page_walk_next(n, root, true)) {
        if (page_is_elem(n, "title")) {
            xmlChar *own;
            page_text_add(&t, page_content_ref(n, &own));
            if (own)
                xmlFree(own);
            t.pending_space = t.len > 0;
            break;
        }
    }
    xmlNodePtr n = root;
    while (n && !t.full) {
        bool descend = false;
        if (n->type == XML_ELEMENT_NODE) {
            enum page_elem_kind kind = page_elem_kind(n);
            if (kind != PAGE_ELEM_SKIP) {
                descend = true;
                if (kind != PAGE_ELEM_INLINE && t.len > 0)
                    t.pending_space = true;
            }
        } else if ((n->type == XML_TEXT_NODE || n->type == XML_CDATA_SECTION_NODE) && n->content) {
            page_text_add(&t, (const char *)n->content);
        }
        /* a block element's end separates words too */
        if (!descend || !n->children) {
            xmlNodePtr m = n;
            while (m && m != root && !m->next) {
                m = m->parent;
                if (m && t.len > 0 && !t.pending_space && page_elem_kind(m) != PAGE_ELEM_INLINE)
                    t.pending_space = true;
            }
        }
        n = page_walk_next(n, root, descend);
    }
    /* No visible text at all (a garbled or binary reply): show what came back instead, with
     * control bytes as spaces and bytes that are not UTF-8 as U+FFFD. */
    if (t.len == 0 && p->raw_len > 0) {
        char *clean = apbot_xmalloc(p->raw_len * 3 + 1);
        size_t j = 0;
        for (size_t i = 0; i < p->raw_len;) {
            unsigned char c = (unsigned char)p->raw[i];
            size_t cl = page_utf8_len((const unsigned char *)p->raw + i);
            if (cl == 1 && (c < 0x20 || c == 0x7F)) {
                clean[j++] = ' ';
            } else if (cl == 0 || i + cl > p->raw_len) {
                memcpy(clean + j, "\xEF\xBF\xBD", 3);
                j += 3;
                cl = 1;
            } else {
                memcpy(clean + j, p->raw + i, cl);
                j += cl;
            }
            i += cl ? cl : 1;
        }
        clean[j] = '\0';
        page_text_add(&t, clean);
        free(clean);
    }
out:
    t.buf[t.len] = '\0';
    return t.buf;
}

/* ---- what outcome rules see ---- */

/* Elements whose content is not markup (HTML's raw text and escapable raw text elements) and
 * whether rules see it. Script has its own comment-escape states (rt_script). */
enum rt_content {
    RT_MARKUP = 0, /* an ordinary element */
    RT_SCRIPT,     /* script data: blanked */
    RT_HIDDEN,     /* raw text nobody sees or the ERP echoes: blanked */
    RT_SHOWN,      /* raw text a browser shows (title, xmp): kept */
    RT_PLAINTEXT,  /* everything after it is text: kept */
};

/* Both lists are read for every tag of every page (~3,000 tags per invoice): the lengths
 * keep the comparisons to the names that can match. */
#define RT_NAME(s) s, sizeof(s) - 1

#define RT_ELEMENTS(X)                                                                             \
    X("script", RT_SCRIPT)                                                                         \
    X("style", RT_HIDDEN)                                                                          \
    X("textarea", RT_HIDDEN)                                                                       \
    X("noscript", RT_HIDDEN)                                                                       \
    X("iframe", RT_HIDDEN)                                                                         \
    X("noembed", RT_HIDDEN)                                                                        \
    X("noframes", RT_HIDDEN)                                                                       \
    X("title", RT_SHOWN)                                                                           \
    X("xmp", RT_SHOWN)                                                                             \
    X("plaintext", RT_PLAINTEXT)
#define RT_ELEMENT(s, content) {RT_NAME(s), content},
#define RT_ELEMENT_LEN(s, content) | (1u << (sizeof(s) - 1))

static const struct {
    const char *name;
    size_t len;
    enum rt_content content;
} rt_elements[] = {RT_ELEMENTS(RT_ELEMENT)};

/* The lengths of the names above, a bit each: most tag names have none of them. */
enum { RT_ELEMENT_LENGTHS = 0 RT_ELEMENTS(RT_ELEMENT_LEN) };

/* Attributes whose values rules may anchor on: markup the ERP writes, not data it echoes. */
static const struct {
    const char *name;
    size_t len;
} rt_kept_attrs[] = {
    {RT_NAME("id")}, {RT_NAME("class")}, {RT_NAME("name")}, {RT_NAME("type")}, {RT_NAME("role")}};

static bool rt_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

/* What ends a tag name, an attribute name or an unquoted value, as one table lookup. */
enum { RT_SP = 1, RT_SLASH = 2, RT_GT = 4, RT_EQ = 8 };
static const unsigned char rt_class[256] = {
    [' '] = RT_SP,  ['\t'] = RT_SP,   ['\n'] = RT_SP, ['\r'] = RT_SP,
    ['\f'] = RT_SP, ['/'] = RT_SLASH, ['>'] = RT_GT,  ['='] = RT_EQ,
};

static bool rt_is(char c, unsigned mask)
{
    return (rt_class[(unsigned char)c] & mask) != 0;
}

static bool rt_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static char rt_lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* True when body[at..) starts with the lower-case word w of n bytes, any case (NULs are bytes
 * too). */
static bool rt_word_at(const char *body, size_t len, size_t at, const char *w, size_t n)
{
    if (at > len || len - at < n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (rt_lower(body[at + i]) != w[i])
            return false;
    return true;
}

/* True when body[at..) is the tag name w followed by white space, '/' or '>' (HTML's
 * "appropriate end tag"; at the end of the body it is not one). */
static bool rt_name_at(const char *body, size_t len, size_t at, const char *w)
{
    size_t n = strlen(w);
    if (!rt_word_at(body, len, at, w, n) || at + n >= len)
        return false;
    char c = body[at + n];
    return rt_space(c) || c == '/' || c == '>';
}

static void rt_blank(char *out, size_t from, size_t to)
{
    if (to > from)
        memset(out + from, ' ', to - from);
}

/* Position after the first '>' at or after i, or len. */
static size_t rt_past_gt(const char *body, size_t len, size_t i)
{
    const char *gt = memchr(body + i, '>', len - i);
    return gt ? (size_t)(gt - body) + 1 : len;
}

/* A comment starting at i ("<!--"): its end (after "-->", "--!>", or the abrupt "<!-->" and
 * "<!--->"), or len when it never ends. */
static size_t rt_comment_end(const char *body, size_t len, size_t i)
{
    size_t k = i + 4;
    if (k < len && body[k] == '>')
        return k + 1;
    if (k + 1 < len && body[k] == '-' && body[k + 1] == '>')
        return k + 2;
    while (k < len) {
        const char *dash = memchr(body + k, '-', len - k);
        if (!dash)
            return len;
        k = (size_t)(dash - body);
        if (k + 2 < len && body[k + 1] == '-' && body[k + 2] == '>')
            return k + 3;
        if (k + 3 < len && body[k + 1] == '-' && body[k + 2] == '!' && body[k + 3] == '>')
            return k + 4;
        k++;
    }
    return len;
}

/*
 * Script data from k: the position of the '<' of its end tag, or len. Follows HTML's script
 * states: inside "<!--" a "<script>" opens a double-escaped part in which "</script>" does
 * not end the element - text a browser keeps inside the script, so it stays blanked here.
 */
static size_t rt_script_end(const char *body, size_t len, size_t k)
{
    enum { DATA, ESC, ESC_DASH, ESC_DASH_DASH, DESC, DESC_DASH, DESC_DASH_DASH } st = DATA;
    while (k < len) {
        char c = body[k];
        switch (st) {
        case DATA:
            if (c == '<') {
                if (k + 1 < len && body[k + 1] == '/' && rt_name_at(body, len, k + 2, "script"))
                    return k;
                if (k + 3 < len && body[k + 1] == '!' && body[k + 2] == '-' && body[k + 3] == '-') {
                    st = ESC_DASH_DASH;
                    k += 4;
                    continue;
                }
            }
            k++;
            continue;
        case ESC:
        case ESC_DASH:
        case ESC_DASH_DASH:
            if (c == '<') {
                if (k + 1 < len && body[k + 1] == '/' && rt_name_at(body, len, k + 2, "script"))
                    return k;
                if (rt_name_at(body, len, k + 1, "script")) {
                    st = DESC;
                    k += 7;
                    continue;
                }
                st = ESC;
            } else if (c == '-') {
                st = st == ESC ? ESC_DASH : ESC_DASH_DASH;
            } else if (c == '>' && st == ESC_DASH_DASH) {
                st = DATA;
            } else {
                st = ESC;
            }
            k++;
            continue;
        case DESC:
        case DESC_DASH:
        case DESC_DASH_DASH:
            if (c == '<') {
                if (k + 1 < len && body[k + 1] == '/' && rt_name_at(body, len, k + 2, "script")) {
                    st = ESC;
                    k += 8;
                    continue;
                }
                st = DESC;
            } else if (c == '-') {
                st = st == DESC ? DESC_DASH : DESC_DASH_DASH;
            } else if (c == '>' && st == DESC_DASH_DASH) {
                st = DATA;
            } else {
                st = DESC;
            }
            k++;
            continue;
        }
    }
    return len;
}

/* Raw text of element `name` from k: the position of the '<' of its end tag, or len. */
static size_t rt_raw_end(const char *body, size_t len, size_t k, const char *name)
{
    while (k < len) {
        const char *lt = memchr(body + k, '<', len - k);
        if (!lt)
            return len;
        k = (size_t)(lt - body);
        if (k + 1 < len && body[k + 1] == '/' && rt_name_at(body, len, k + 2, name))
            return k;
        k++;
    }
    return len;
}

/*
 * A start or end tag whose name begins at p (after "<" or "</"): blanks the values of the
 * attributes rules must not see and returns the position after the tag's '>' (len when the
 * tag never closes). *ret_elem gets the index in rt_elements of a start tag whose content is
 * not markup, else SIZE_MAX.
 */
static size_t rt_tag(const char *body, size_t len, size_t p, char *out, bool end_tag,
                     size_t *ret_elem)
{
    size_t start = p;
    *ret_elem = SIZE_MAX;
    while (p < len && !rt_is(body[p], RT_SP | RT_SLASH | RT_GT))
        p++;
    if (!end_tag && p - start < 32 && (RT_ELEMENT_LENGTHS >> (p - start) & 1)) {
        /* only a name of a listed length is compared, lowered as it is read */
        for (size_t e = 0; e < sizeof(rt_elements) / sizeof(rt_elements[0]); e++)
            if (p - start == rt_elements[e].len &&
                rt_lower(body[start]) == rt_elements[e].name[0] &&
                rt_word_at(body, len, start, rt_elements[e].name, rt_elements[e].len))
                *ret_elem = e;
    }
    for (;;) {
        while (p < len && rt_is(body[p], RT_SP | RT_SLASH))
            p++;
        if (p >= len)
            return len;
        if (body[p] == '>')
            return p + 1;
        /* an attribute name: up to white space, '/', '>' or '=' (a leading '=' belongs to it) */
        size_t a = p++;
        while (p < len && !rt_is(body[p], RT_SP | RT_SLASH | RT_GT | RT_EQ))
            p++;
        bool kept = false;
        for (size_t k = 0; k < sizeof(rt_kept_attrs) / sizeof(rt_kept_attrs[0]); k++)
            if (p - a == rt_kept_attrs[k].len && rt_lower(body[a]) == rt_kept_attrs[k].name[0] &&
                rt_word_at(body, len, a, rt_kept_attrs[k].name, rt_kept_attrs[k].len))
                kept = true;
        size_t q = p;
        while (q < len && rt_space(body[q]))
            q++;
        if (q >= len || body[q] != '=') {
            p = q; /* no value */
            continue;
        }
        q++;
        while (q < len && rt_space(body[q]))
            q++;
        if (q >= len)
            return len;
        if (body[q] == '"' || body[q] == '\'') {
            const char *close = memchr(body + q + 1, body[q], len - q - 1);
            size_t e = close ? (size_t)(close - body) : len;
            if (!kept)
                rt_blank(out, q + 1, e);
            if (!close)
                return len;
            p = e + 1;
        } else if (body[q] == '>') {
            return q + 1; /* "a=>": no value */
        } else {
            size_t e = q;
            while (e < len && !rt_is(body[e], RT_SP | RT_GT))
                e++;
            if (!kept)
                rt_blank(out, q, e);
            p = e;
        }
    }
}

char *page_rule_text(const char *body, size_t len)
{
    if (!body && len > 0)
        return NULL;
    char *out = apbot_xmalloc(len + 1 + APBOT_TEXT_PAD);
    if (len > 0)
        memcpy(out, body, len);
    memset(out + len, 0, 1 + APBOT_TEXT_PAD); /* the NUL, then zeros for matching (mem.h) */

    size_t i = 0;
    while (i < len) {
        const char *lt = memchr(body + i, '<', len - i);
        if (!lt)
            break;
        i = (size_t)(lt - body);
        if (i + 1 >= len)
            break; /* a lone '<' at the end is text */
        char c = body[i + 1];
        if (c == '!') {
            size_t e;
            if (i + 3 < len && body[i + 2] == '-' && body[i + 3] == '-') {
                e = rt_comment_end(body, len, i);
            } else if (rt_word_at(body, len, i + 2, RT_NAME("doctype"))) {
                i = rt_past_gt(body, len, i); /* markup, not echo: kept */
                continue;
            } else {
                e = rt_past_gt(body, len, i); /* <!...>, <![CDATA[...>: a bogus comment */
            }
            rt_blank(out, i, e);
            i = e;
        } else if (c == '?') {
            size_t e = rt_past_gt(body, len, i);
            rt_blank(out, i, e);
            i = e;
        } else if (c == '/') {
            if (i + 2 < len && rt_alpha(body[i + 2])) {
                size_t elem;
                i = rt_tag(body, len, i + 2, out, true, &elem);
            } else if (i + 2 < len && body[i + 2] == '>') {
                i += 3; /* "</>" is nothing */
            } else if (i + 2 >= len) {
                break; /* "</" at the end is text */
            } else {
                size_t e = rt_past_gt(body, len, i);
                rt_blank(out, i, e);
                i = e;
            }
        } else if (rt_alpha(c)) {
            size_t elem;
            i = rt_tag(body, len, i + 1, out, false, &elem);
            if (elem == SIZE_MAX || i >= len)
                continue;
            size_t e;
            switch (rt_elements[elem].content) {
            case RT_MARKUP:
                break;
            case RT_SCRIPT:
                e = rt_script_end(body, len, i);
                rt_blank(out, i, e);
                i = e;
                break;
            case RT_HIDDEN:
                e = rt_raw_end(body, len, i, rt_elements[elem].name);
                rt_blank(out, i, e);
                i = e;
                break;
            case RT_SHOWN:
                i = rt_raw_end(body, len, i, rt_elements[elem].name);
                break;
            case RT_PLAINTEXT:
                i = len;
                break;
            }
        } else {
            i++; /* '<' as text */
        }
    }
    return out;
}
