/*
 * page_fast.c - the tree libxml2's HTML parser builds, for plain HTML, at a third of its cost.
 *
 * Callgrind put libxml2's HTML parser at ~45% of the bot's instructions per invoice: it reads
 * a page character by character through several layers (xmlNextChar, the auto-close and
 * implied-element checks, SAX2 callbacks), some 375 instructions per byte. Most ERP pages
 * are plain: a few kinds of element, some left open as HTML 4 allows (<p>, <li>, <td>,
 * <option>), quoted attributes, a few entities. For those, this file builds the same tree
 * directly, of libxml2's nodes made as its tree API makes them, and for anything else it
 * answers NULL and page.c runs libxml2 as before. Pages are untrusted, so the rule is the
 * one of the URL fast paths (http.c): the fast path answers only for a shape whose tree it
 * provably builds as libxml2 2.9 does (HTMLparser.c and SAX2.c read for it), and test_page_fast
 * checks that claim node by node against libxml2 itself on the canned pages of tests/data,
 * thousands of generated pages and mutations of the canned ones, and that it declines what
 * it should (fuzz_page_fast does the same under libFuzzer).
 *
 * The subset, and what libxml2 does there that made it so (anything else: NULL):
 * - the body is UTF-8 of tab, CR, LF and printable characters only (no control bytes, no byte
 *   order mark, no invalid sequence: libxml2 would switch to Latin-1; CR is kept as it is,
 *   as libxml2's HTML parser keeps it, in text, values, comments and scripts alike, and is a
 *   blank between names); a <meta> that names a charset names UTF-8 (another one re-decodes
 *   the page);
 * - blanks, comments and one DOCTYPE before <html>, comments after </html>; <html> holds an
 *   optional <head> and one <body>, each opened explicitly (libxml2 implies html, head, body
 *   and p elements, which we decline instead of imitating), text outside the body is blank
 *   (under 1000 bytes: libxml2 decides blankness per 1000-byte chunk), no element follows
 *   </body>;
 * - element names are HTML 4 names (htmlTagLookup) of letters and digits, attribute names of
 *   letters, digits, '_', '.', '-' (both lowered, as libxml2 does); void elements (the
 *   table's "empty") and "/>" close at once; a start tag closes the open elements libxml2's
 *   table lets it close, an end tag the elements above its own unless one of them has the
 *   higher end priority, and then, as when no such element is open, it is ignored (both
 *   asked of libxml2 itself, see pf_ask); the end of the page closes what is still open;
 *   script and style hold raw text up to their end tag (a CDATA node);
 * - references: a known entity with ';' and a well-formed character reference are decoded;
 *   any other '&' is text as written (what libxml2 makes of it too), except where libxml2
 *   would read on (a name going on in non-ASCII, a malformed character reference);
 * - a duplicate attribute is dropped, a value-less boolean attribute takes its name as
 *   value (both as xmlSAX2 does); ids are registered as xmlSAX2 registers them (during the
 *   parse, or after it: page_fast_ids).
 * Every loop moves forward through the body (a tag's duplicate check is quadratic in its
 * attributes, at most PF_ATTRS_MAX); the open elements are bounded (PF_MAX_DEPTH), and so
 * are the probe documents one page can make libxml2 parse (PF_PAGE_PROBES: a hostile page
 * asking about pair after pair goes to libxml2 instead) and the bytes text joined to the
 * text before it costs (PF_JOIN_BUDGET: each join copies the whole text so far, and a page
 * of text and ignored end tags would make that quadratic in time and in arena memory).
 */
#include "page-int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libxml/HTMLtree.h>
#include <libxml/encoding.h>
#include <libxml/globals.h>
#include <libxml/hash.h>
#include <libxml/parser.h>
#include <libxml/parserInternals.h>
#include <libxml/tree.h>
#include <libxml/uri.h>
#include <libxml/valid.h>

#include "base/unittest.h"

#define PF_MAX_DEPTH 128             /* deeper: libxml2 (which stops at 256) */
#define PF_NAME_MAX 16               /* longest element name taken (HTML 4's longest is 10) */
#define PF_ATTR_NAME_MAX 64          /* longest attribute name taken (libxml2 cuts at 100) */
#define PF_ATTRS_MAX 64              /* attributes of one element taken */
#define PF_BLANK_CHUNK 1000          /* libxml2's character chunk (HTML_PARSER_BIG_BUFFER_SIZE) */
#define PF_PROBES 16384              /* probe answers kept (pairs of names; a power of two) */
#define PF_PAGE_PROBES 64            /* probe parses one page may cause; then it goes to libxml2 */
#define PF_ID_BUCKETS 32             /* of a page's ID table (libxml2's default: 256) */
#define PF_JOIN_BUDGET (256u * 1024) /* bytes joins of text may copy on one page; then libxml2 */

#define PF_FAIL (-1)

struct pf {
    const unsigned char *s; /* where parsing stands */
    const unsigned char *end;
    htmlDocPtr doc;
    xmlNodePtr open[PF_MAX_DEPTH];          /* open elements, outermost first */
    const htmlElemDesc *tags[PF_MAX_DEPTH]; /* and what they are */
    int depth;
    bool seen_html, seen_head, seen_body, seen_encoding;
    int probes_left;    /* probe parses this page may still cause (PF_PAGE_PROBES) */
    size_t join_left;   /* bytes joins of text may still copy (PF_JOIN_BUDGET) */
    bool ids;           /* register ids as attributes are made (else page_fast_ids does) */
    unsigned char *buf; /* scratch for decoded text and values: never longer than the body */
};

static bool pf_blank(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r'; /* IS_BLANK_CH */
}

static bool pf_alpha(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool pf_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* c lowered when it is an ASCII letter or digit (a tag name's characters), else 0. */
static unsigned char pf_name_char(unsigned char c)
{
    unsigned char l = c | 0x20; /* only A-Z land on a-z */
    if ((unsigned char)(l - 'a') < 26)
        return l;
    return (unsigned char)(c - '0') < 10 ? c : 0;
}

/* c lowered when it may be in an attribute name (also '_', '.', '-'), else 0. */
static unsigned char pf_attr_char(unsigned char c)
{
    unsigned char l = pf_name_char(c);
    return l ? l : c == '_' || c == '.' || c == '-' ? c : 0;
}

static void *pf_check(void *p)
{
    if (!p)
        abort(); /* libxml2's tree calls fail only on out-of-memory (mem.h's policy) */
    return p;
}

/* The whole body is UTF-8 of the characters libxml2 reads without a remark. */
static bool pf_valid(const unsigned char *s, size_t n)
{
    if (n >= 3 && s[0] == 0xEF && s[1] == 0xBB && s[2] == 0xBF)
        return false; /* a byte order mark: libxml2 skips it */
    size_t i = 0;
    while (i < n) {
        if (n - i >= 8) {
            /* Eight printable ASCII bytes at once: no byte below 0x20 nor above 0x7E. */
            uint64_t w;
            memcpy(&w, s + i, 8);
            const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
            if (!((((w - ones * 0x20) & ~w) | ((w + ones * (127 - 0x7E)) | w)) & highs)) {
                i += 8;
                continue;
            } /* else some byte needs a look of its own */
        }
        unsigned char c = s[i];
        if (c < 0x80) {
            if (c < 0x20 ? c != '\t' && c != '\n' && c != '\r' : c == 0x7F)
                return false;
            i++;
            continue;
        }
        unsigned cp;
        size_t k;
        if (c >= 0xC2 && c <= 0xDF) {
            cp = c & 0x1Fu;
            k = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            cp = c & 0x0Fu;
            k = 2;
        } else if (c >= 0xF0 && c <= 0xF4) {
            cp = c & 0x07u;
            k = 3;
        } else {
            return false;
        }
        if (n - i <= k)
            return false;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + j] & 0x3Fu);
        }
        bool shortest = (k == 1 && cp >= 0x80) || (k == 2 && cp >= 0x800) ||
                        (k == 3 && cp >= 0x10000 && cp <= 0x10FFFF);
        if (!shortest || cp < 0xA0 || (cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE ||
            cp == 0xFFFF)
            return false;
        i += k + 1;
    }
    return true;
}

static size_t pf_utf8(unsigned cp, unsigned char *out)
{
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* XML's Char production (IS_CHAR). */
static bool pf_is_char(unsigned cp)
{
    return cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) ||
           (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF);
}

/*
 * A reference at s ('&'): writes what it stands for to out and returns the bytes it takes;
 * 0 when the '&' is plain text (libxml2 then gives back exactly the characters it read);
 * PF_FAIL where libxml2 would read it in a way this file does not imitate.
 */
static int pf_ref(const unsigned char *s, const unsigned char *end, unsigned char *out,
                  size_t *out_len)
{
    const unsigned char *q = s + 1;
    if (q < end && *q == '#') {
        unsigned cp = 0;
        int digits = 0;
        q++;
        if (q < end && (*q == 'x' || *q == 'X')) {
            for (q++; q < end && digits < 6; q++, digits++) {
                unsigned char c = *q;
                if (pf_digit(c))
                    cp = cp * 16 + (unsigned)(c - '0');
                else if (c >= 'a' && c <= 'f')
                    cp = cp * 16 + (unsigned)(c - 'a' + 10);
                else if (c >= 'A' && c <= 'F')
                    cp = cp * 16 + (unsigned)(c - 'A' + 10);
                else
                    break;
            }
        } else {
            for (; q < end && digits < 7 && pf_digit(*q); q++, digits++)
                cp = cp * 10 + (unsigned)(*q - '0');
        }
        if (digits == 0 || q >= end || *q != ';' || cp == 0 || !pf_is_char(cp))
            return PF_FAIL; /* libxml2 stops short, drops it or writes a NUL */
        *out_len = pf_utf8(cp, out);
        return (int)(q + 1 - s);
    }
    if (q >= end || *q >= 0x80)
        return q >= end ? 0 : PF_FAIL; /* a name may begin with a non-ASCII letter */
    if (!pf_alpha(*q) && *q != '_' && *q != ':')
        return 0; /* no name: the '&' alone */
    const unsigned char *name = q;
    while (q < end &&
           (pf_alpha(*q) || pf_digit(*q) || *q == '_' || *q == ':' || *q == '.' || *q == '-'))
        q++;
    if (q < end && *q >= 0x80)
        return PF_FAIL; /* the name may go on */
    if (q >= end || *q != ';' || q - name > 31)
        return 0; /* "&name" as written: no entity, or no ';' */
    char key[32];
    memcpy(key, name, (size_t)(q - name));
    key[q - name] = '\0';
    const htmlEntityDesc *ent = htmlEntityLookup(BAD_CAST key);
    if (!ent || ent->value == 0)
        return 0;
    *out_len = pf_utf8(ent->value, out);
    return (int)(q + 1 - s);
}

/* The reference at p->s decoded onto p->buf + *n (both advanced): 1; 0 when the '&' is
 * text; PF_FAIL as pf_ref. */
static int pf_take_ref(struct pf *p, size_t *n)
{
    size_t k = 0;
    int used = pf_ref(p->s, p->end, p->buf + *n, &k);
    if (used <= 0)
        return used;
    p->s += used;
    *n += k;
    return 1;
}

/* ---- what libxml2 closes, asked of libxml2 ---- */

/*
 * Two questions decide how libxml2 2.9 nests elements, both by name only:
 * - does a start tag <a> close the open element <b> (htmlCheckAutoClose(a, b), its
 *   htmlStartClose table: <p> closes <p>, <li> closes <li>, <div> closes <p>, ...)? For two
 *   names htmlAutoCloseTag asks exactly that of an element without children; for one name it
 *   answers 0 unasked, so that is parsed: "<a><a>" nested or not;
 * - may an end tag </a> close the open element <b> above it (htmlAutoCloseOnClose: only if
 *   b's end priority is not higher than a's, else the end tag is ignored)? Parsed:
 *   "<a><b></a>x" with the x inside <b> or after <a>.
 * A parse answers once per process and pair, kept here; each thread keeps the answers it
 * last used in a small cache of its own. A probe whose tree is not one of the two expected
 * answers gives PF_UNKNOWN, and the page goes to libxml2.
 */
enum pf_ask {
    PF_ASK_CLOSES,        /* the start tag a closes the open element b */
    PF_ASK_CLOSES_ITSELF, /* the same for a == b: what is probed */
    PF_ASK_END_CLOSES,    /* the end tag of the open a closes the open b above it */
};
#define PF_UNKNOWN (-1)

static pthread_mutex_t pf_probe_lock = PTHREAD_MUTEX_INITIALIZER;
/* Open addressing, room for every pair of HTML 4's ~90 names: a pair is parsed at most once
 * per process. */
static struct {
    const htmlElemDesc *a, *b; /* a NULL: an empty slot */
    enum pf_ask ask;
    int answer;
} pf_probe[PF_PROBES];
static atomic_ulong pf_probe_parses; /* for the tests */

static xmlNodePtr pf_first_element(xmlNodePtr n)
{
    xmlNodePtr c = n ? n->children : NULL;
    while (c && c->type != XML_ELEMENT_NODE)
        c = c->next;
    return c;
}

static bool pf_named(xmlNodePtr n, const char *name)
{
    return n && n->type == XML_ELEMENT_NODE && xmlStrEqual(n->name, BAD_CAST name);
}

/* Whether n has a text child "x". */
static bool pf_has_x(xmlNodePtr n)
{
    for (xmlNodePtr c = n ? n->children : NULL; c; c = c->next)
        if (c->type == XML_TEXT_NODE && xmlStrEqual(c->content, BAD_CAST "x"))
            return true;
    return false;
}

/* The first element named name in the subtree of n (document order), or NULL. */
static xmlNodePtr pf_find(xmlNodePtr n, const char *name)
{
    for (xmlNodePtr c = n ? n->children : NULL; c; c = c->next) {
        if (pf_named(c, name))
            return c;
        xmlNodePtr d = c->type == XML_ELEMENT_NODE ? pf_find(c, name) : NULL;
        if (d)
            return d;
    }
    return NULL;
}

/* Whether n has an ancestor element named name. */
static bool pf_inside(xmlNodePtr n, const char *name)
{
    for (xmlNodePtr a = n ? n->parent : NULL; a && a->type == XML_ELEMENT_NODE; a = a->parent)
        if (xmlStrEqual(a->name, BAD_CAST name))
            return true;
    return false;
}

/* The probe's answer: 1 yes, 0 no, PF_UNKNOWN. The probe documents are a few dozen bytes of
 * names from libxml2's own table: libxml2's parse is as deep as they are. */
static int pf_probe_parse(enum pf_ask ask, const char *a, const char *b)
{
    char src[200];
    int n;
    if (ask == PF_ASK_CLOSES_ITSELF) {
        n = snprintf(src, sizeof(src), "<html><body><%s><%s></%s></%s></body></html>", a, a, a, a);
    } else {
        /* a open below b (only the two names' end priorities matter, not what lies between),
         * then "</a>x": the x stays in b when the end tag was ignored. */
        const char *open_a = strcmp(a, "html") == 0   ? "<html>"
                             : strcmp(a, "head") == 0 ? "<html><head>"
                             : strcmp(a, "body") == 0 ? "<html><body>"
                                                      : NULL;
        if (open_a && strcmp(a, "html") == 0 && strcmp(b, "head") != 0 && strcmp(b, "body") != 0)
            open_a = "<html><body>";
        n = open_a ? snprintf(src, sizeof(src), "%s<%s></%s>x</%s>", open_a, b, a, b)
                   : snprintf(src, sizeof(src), "<html><body><%s><%s></%s>x</%s>", a, b, a, b);
    }
    htmlDocPtr d = htmlReadMemory(src, n, NULL, NULL, PAGE_HTML_OPTIONS);
    xmlNodePtr root = d ? xmlDocGetRootElement(d) : NULL;
    int answer = PF_UNKNOWN;
    if (ask == PF_ASK_CLOSES_ITSELF) {
        xmlNodePtr body = pf_first_element(root);
        xmlNodePtr outer = pf_named(body, "body") ? pf_first_element(body) : NULL;
        xmlNodePtr inner = pf_named(outer, a) ? pf_first_element(outer) : NULL;
        answer = pf_named(inner, a) ? 0 : pf_named(outer, a) ? 1 : PF_UNKNOWN;
    } else {
        xmlNodePtr top = pf_named(root, b) ? root : pf_find(root, b);
        if (top && pf_inside(top, a)) /* <b> did not close <a>: the stack asked about */
            answer = pf_has_x(top) ? 0 : 1;
    }
    if (d)
        xmlFreeDoc(d);
    return answer;
}

static size_t pf_pair_hash(enum pf_ask ask, const htmlElemDesc *a, const htmlElemDesc *b)
{
    uint64_t k = (uint64_t)(uintptr_t)a * 0x9E3779B97F4A7C15ull ^
                 (uint64_t)(uintptr_t)b * 0xC2B2AE3D27D4EB4Full ^ (uint64_t)ask;
    return (size_t)(k >> 32); /* the product's upper half: well mixed */
}

/* The process's answer for (a, b), parsed when it has none and *budget allows (one less
 * then); PF_UNKNOWN when the budget is spent. */
static int pf_probe_answer(enum pf_ask ask, const htmlElemDesc *a, const htmlElemDesc *b,
                           int *budget)
{
    size_t h = pf_pair_hash(ask, a, b) & (PF_PROBES - 1);
    pthread_mutex_lock(&pf_probe_lock);
    for (size_t i = h, n = 0; pf_probe[i].a && n < PF_PROBES; i = (i + 1) & (PF_PROBES - 1), n++) {
        if (pf_probe[i].ask == ask && pf_probe[i].a == a && pf_probe[i].b == b) {
            int answer = pf_probe[i].answer;
            pthread_mutex_unlock(&pf_probe_lock);
            return answer;
        }
    }
    pthread_mutex_unlock(&pf_probe_lock);
    if (*budget <= 0)
        return PF_UNKNOWN;
    (*budget)--;
    atomic_fetch_add(&pf_probe_parses, 1);
    int answer = pf_probe_parse(ask, a->name, b->name);
    pthread_mutex_lock(&pf_probe_lock);
    size_t used = 0, i = h;
    while (pf_probe[i].a && used < PF_PROBES / 2) { /* another thread's, or a collision */
        if (pf_probe[i].ask == ask && pf_probe[i].a == a && pf_probe[i].b == b)
            break;
        i = (i + 1) & (PF_PROBES - 1);
        used++;
    }
    if (!pf_probe[i].a) {
        pf_probe[i].ask = ask;
        pf_probe[i].a = a;
        pf_probe[i].b = b;
        pf_probe[i].answer = answer;
    }
    pthread_mutex_unlock(&pf_probe_lock);
    return answer;
}

UNITTEST unsigned long page_fast_probe_parses(void)
{
    return atomic_load(&pf_probe_parses);
}

#define PF_CACHE 256 /* per thread, a power of two */

static _Thread_local struct {
    const htmlElemDesc *a, *b;
    enum pf_ask ask;
    int answer;
} pf_ask_cache[PF_CACHE];

/* The answer to ask of (a, b), through the thread's cache: 1, 0 or PF_UNKNOWN (also when
 * the page's probe budget is spent: that answer is not kept). */
static int pf_ask(enum pf_ask ask, const htmlElemDesc *a, const htmlElemDesc *b, int *budget)
{
    size_t h = (pf_pair_hash(ask, a, b) >> 24) & (PF_CACHE - 1);
    if (pf_ask_cache[h].a == a && pf_ask_cache[h].b == b && pf_ask_cache[h].ask == ask)
        return pf_ask_cache[h].answer;
    int answer;
    if (ask == PF_ASK_CLOSES && a != b) {
        xmlNode probe; /* htmlAutoCloseTag reads the element's name and children only */
        memset(&probe, 0, sizeof(probe));
        probe.type = XML_ELEMENT_NODE;
        probe.name = BAD_CAST a->name;
        answer = htmlAutoCloseTag(NULL, BAD_CAST b->name, &probe) != 0;
    } else {
        int left = *budget;
        answer = pf_probe_answer(ask == PF_ASK_CLOSES ? PF_ASK_CLOSES_ITSELF : ask, a, b, budget);
        if (answer == PF_UNKNOWN && left <= 0)
            return answer;
    }
    pf_ask_cache[h].a = a;
    pf_ask_cache[h].b = b;
    pf_ask_cache[h].ask = ask;
    pf_ask_cache[h].answer = answer;
    return answer;
}

/* htmlTagLookup, remembered per thread by name (lower case, at most PF_NAME_MAX bytes). */
static _Thread_local struct {
    char name[PF_NAME_MAX + 1];
    const htmlElemDesc *tag;
} pf_tag_cache[PF_CACHE];

static const htmlElemDesc *pf_tag(const char *name, size_t n)
{
    size_t h = 5381;
    for (size_t i = 0; i < n; i++)
        h = h * 33 + (unsigned char)name[i];
    h &= PF_CACHE - 1;
    if (pf_tag_cache[h].tag && memcmp(pf_tag_cache[h].name, name, n + 1) == 0)
        return pf_tag_cache[h].tag;
    const htmlElemDesc *tag = htmlTagLookup(BAD_CAST name);
    if (tag) {
        memcpy(pf_tag_cache[h].name, name, n + 1);
        pf_tag_cache[h].tag = tag;
    }
    return tag;
}

/* ---- nodes, made as libxml2's tree functions make them ---- */

/*
 * The nodes are made here field by field, as xmlNewDocNode, xmlNewDocTextLen and xmlNewProp
 * make them in a document without a dictionary (tree.c of 2.9), and linked as xmlAddChild
 * links them: those calls cost the fast path about as much as reading the page (xmlNewProp
 * walks the attribute list to its end, asks xmlIsID by string compares, copies the value
 * twice). Every node is a block of its own from xmlMalloc and every string one from
 * xmlMallocAtomic, as there, so xmlFreeDoc frees this tree as it frees theirs. They call a
 * registered node callback (xmlRegisterNodeDefault), which apbot never sets: with one set,
 * page_fast_parse declines the page.
 */
static xmlChar *pf_strndup(const void *s, size_t n)
{
    xmlChar *d = pf_check(xmlMallocAtomic(n + 1));
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

/* A node of type, in the page's document and nowhere yet. */
static xmlNodePtr pf_node(const struct pf *p, xmlElementType type)
{
    xmlNodePtr n = pf_check(xmlMalloc(sizeof(*n)));
    memset(n, 0, sizeof(*n));
    n->type = type;
    n->doc = p->doc;
    return n;
}

/* node as the last child of parent (xmlAddChild for a node that is not text). */
static void pf_link(xmlNodePtr parent, xmlNodePtr node)
{
    node->parent = parent;
    if (parent->last) {
        parent->last->next = node;
        node->prev = parent->last;
    } else {
        parent->children = node;
    }
    parent->last = node;
}

/* Registers a as an id of doc when xmlIsID says it is one in an HTML document (id, or name on
 * an <a>, with a value), as xmlNewProp registers it. */
static void pf_id(xmlDocPtr doc, xmlNodePtr el, xmlAttrPtr a)
{
    const xmlChar *v = a->children ? a->children->content : NULL; /* a value: its one text */
    if (!v || !(xmlStrEqual(a->name, BAD_CAST "id") ||
                (xmlStrEqual(a->name, BAD_CAST "name") && xmlStrEqual(el->name, BAD_CAST "a"))))
        return;
    /* xmlAddID's first id makes a table of 256 buckets (12 KB cleared, a third of the ids'
     * cost) for the twenty ids of a page: the table is made here with fewer, and grows as any
     * of libxml2's tables grows. The same entries either way, and no one can rely on where
     * they lie (each table hashes with a seed of its own). */
    if (v[0] && !doc->ids)
        doc->ids = pf_check(xmlHashCreate(PF_ID_BUCKETS));
    (void)xmlAddID(NULL, doc, v, a); /* NULL for an empty or a repeated value */
}

/* An attribute of el after last (NULL: its first) with value[0..vl) (NULL: none; not
 * NUL-terminated), as xmlNewProp(el, name, value) makes it (its id registered when p->ids).
 * Returns the attribute. */
static xmlAttrPtr pf_attr(const struct pf *p, xmlNodePtr el, xmlAttrPtr last, const char *name,
                          size_t nl, const xmlChar *value, size_t vl)
{
    xmlAttrPtr a = pf_check(xmlMalloc(sizeof(*a)));
    memset(a, 0, sizeof(*a));
    a->type = XML_ATTRIBUTE_NODE;
    a->parent = el;
    a->doc = p->doc;
    a->name = pf_strndup(name, nl);
    if (value) {
        xmlNodePtr t = pf_node(p, XML_TEXT_NODE);
        t->name = xmlStringText;
        t->content = pf_strndup(value, vl);
        t->parent = (xmlNodePtr)a;
        a->children = a->last = t;
    }
    if (last) {
        last->next = a;
        a->prev = last;
    } else {
        el->properties = a;
    }
    if (p->ids)
        pf_id(p->doc, el, a);
    return a;
}

/* ---- the parts of a page ---- */

static xmlNodePtr pf_top(const struct pf *p)
{
    return p->depth ? p->open[p->depth - 1] : NULL;
}

static bool pf_top_is(const struct pf *p, const char *name)
{
    xmlNodePtr t = pf_top(p);
    return t && t->name[0] == (xmlChar)name[0] && strcmp((const char *)t->name, name) == 0;
}

/* node (not text) as the last child of the open element, or of the document. */
static void pf_add(struct pf *p, xmlNodePtr node)
{
    xmlNodePtr parent = pf_top(p);
    pf_link(parent ? parent : (xmlNodePtr)p->doc, node);
}

/* Character data up to the next '<'. Outside any element, in <html> and in <head> libxml2
 * keeps it only if blank (else it implies a <p>); outside any element it drops it. */
static int pf_text(struct pf *p)
{
    bool outer = p->depth == 0 || pf_top_is(p, "html") || pf_top_is(p, "head");
    const unsigned char *text = p->buf;
    size_t n = 0;
    if (!outer) {
        /* Text without a reference is taken from the body as it is (no copy to decode) */
        const unsigned char *lt = memchr(p->s, '<', (size_t)(p->end - p->s));
        if (!lt)
            lt = p->end;
        if (!memchr(p->s, '&', (size_t)(lt - p->s))) {
            text = p->s;
            n = (size_t)(lt - p->s);
            p->s = lt;
        }
    }
    while (text == p->buf && p->s < p->end && *p->s != '<') {
        if (*p->s == '&') {
            int r = outer ? PF_FAIL : pf_take_ref(p, &n);
            if (r < 0)
                return PF_FAIL;
            if (r > 0)
                continue;
        } else if (outer && !pf_blank(*p->s)) {
            return PF_FAIL;
        }
        p->buf[n++] = *p->s++;
    }
    if (outer && n >= PF_BLANK_CHUNK)
        return PF_FAIL;
    if (n == 0 || p->depth == 0)
        return 0;
    xmlNodePtr parent = pf_top(p), last = parent->last;
    if (last && last->type == XML_TEXT_NODE && last->name == xmlStringText) {
        /* after an ignored end tag: the text goes on (xmlAddChild joins the two), at the
         * cost of a copy of all of it (xmlStrncat) */
        size_t cost = (size_t)xmlStrlen(last->content) + n;
        if (cost > p->join_left)
            return PF_FAIL;
        p->join_left -= cost;
        xmlNodeAddContentLen(last, text, (int)n); /* out of memory: the arena aborts */
        return 0;
    }
    xmlNodePtr t = pf_node(p, XML_TEXT_NODE);
    t->name = xmlStringText;
    t->content = pf_strndup(text, n);
    pf_link(parent, t);
    return 0;
}

/* <!-- ... -->: the first "-->" from the fifth character on closes it ("--!>" too, which
 * libxml2 reports: declined). */
static int pf_comment(struct pf *p)
{
    const unsigned char *from = p->s + 4, *q = from;
    for (;; q++) {
        if (p->end - q < 3)
            return PF_FAIL;
        if (q[0] == '-' && q[1] == '-') {
            if (q[2] == '>')
                break;
            if (q[2] == '!' && p->end - q >= 4 && q[3] == '>')
                return PF_FAIL;
        }
    }
    size_t n = (size_t)(q - from);
    memcpy(p->buf, from, n);
    p->buf[n] = '\0';
    pf_add(p, pf_check(xmlNewDocComment(p->doc, p->buf)));
    p->s = q + 3;
    return 0;
}

static bool pf_at(const struct pf *p, const char *what)
{
    size_t n = strlen(what);
    return (size_t)(p->end - p->s) >= n && memcmp(p->s, what, n) == 0;
}

static bool pf_at_doctype(const struct pf *p)
{
    return p->end - p->s >= 9 && p->s[0] == '<' && p->s[1] == '!' &&
           strncasecmp((const char *)p->s + 2, "DOCTYPE", 7) == 0;
}

static void pf_skip_blanks(struct pf *p)
{
    while (p->s < p->end && pf_blank(*p->s))
        p->s++;
}

/* A quoted literal of the DOCTYPE into dst (NUL-terminated); pubid: only PubidChars. */
static int pf_literal(struct pf *p, char *dst, size_t cap, bool pubid)
{
    if (p->s >= p->end || (*p->s != '"' && *p->s != '\''))
        return PF_FAIL;
    unsigned char quote = *p->s++;
    size_t n = 0;
    while (p->s < p->end && *p->s != quote) {
        unsigned char c = *p->s;
        if (pubid && !(pf_alpha(c) || pf_digit(c) || c == ' ' || strchr("-'()+,./:=?;!*#@$_%", c)))
            return PF_FAIL;
        if (n + 1 >= cap)
            return PF_FAIL;
        dst[n++] = (char)c;
        p->s++;
    }
    if (p->s >= p->end)
        return PF_FAIL;
    p->s++;
    dst[n] = '\0';
    return 0;
}

/* The DOCTYPE's PUBLIC or SYSTEM (any case) and the blanks after it, which must be there. */
static bool pf_keyword(struct pf *p, const char *word)
{
    if (p->end - p->s < 7 || strncasecmp((const char *)p->s, word, 6) != 0 || !pf_blank(p->s[6]))
        return false;
    p->s += 6;
    pf_skip_blanks(p);
    return true;
}

/* <!DOCTYPE name [PUBLIC "pubid" ["system"] | SYSTEM "system"]> */
static int pf_doctype(struct pf *p)
{
    char name[32], pub[256], sys[512];
    bool has_pub = false, has_sys = false;
    size_t n = 0;

    p->s += 9;
    pf_skip_blanks(p);
    if (p->s >= p->end || !(pf_alpha(*p->s) || *p->s == '_' || *p->s == ':'))
        return PF_FAIL;
    while (p->s < p->end && (pf_alpha(*p->s) || pf_digit(*p->s) || *p->s == '_' || *p->s == ':' ||
                             *p->s == '.' || *p->s == '-')) {
        if (n + 1 >= sizeof(name))
            return PF_FAIL;
        name[n++] = (char)*p->s++;
    }
    name[n] = '\0';
    if (p->s >= p->end || !(pf_blank(*p->s) || *p->s == '>'))
        return PF_FAIL;
    pf_skip_blanks(p);
    bool public = pf_keyword(p, "PUBLIC");
    if (public || pf_keyword(p, "SYSTEM")) {
        if (public) {
            if (pf_literal(p, pub, sizeof(pub), true) < 0)
                return PF_FAIL;
            has_pub = true;
            pf_skip_blanks(p);
        }
        if (!public || (p->s < p->end && (*p->s == '"' || *p->s == '\''))) {
            if (pf_literal(p, sys, sizeof(sys), false) < 0)
                return PF_FAIL;
            has_sys = true;
        }
    }
    pf_skip_blanks(p);
    if (p->s >= p->end || *p->s != '>')
        return PF_FAIL;
    p->s++;
    (void)pf_check(xmlCreateIntSubset(p->doc, BAD_CAST name, has_pub ? BAD_CAST pub : NULL,
                                      has_sys ? BAD_CAST sys : NULL));
    return 0;
}

/* A charset named by a <meta> (htmlCheckEncodingDirect): the first one is the page's. */
static int pf_encoding(struct pf *p, const xmlChar *enc)
{
    if (p->seen_encoding || !enc)
        return 0;
    while (*enc == ' ' || *enc == '\t')
        enc++;
    p->seen_encoding = true;
    if (xmlParseCharEncoding((const char *)enc) != XML_CHAR_ENCODING_UTF8)
        return PF_FAIL; /* libxml2 would decode the rest of the page another way */
    p->doc->encoding = pf_check(xmlStrdup(enc));
    return 0;
}

/* htmlCheckMeta's reading of a <meta>'s http-equiv, charset and content, in order. */
static int pf_meta(struct pf *p, xmlNodePtr meta, const bool *valued)
{
    bool http = false;
    const xmlChar *content = NULL;
    int i = 0;
    for (xmlAttrPtr a = meta->properties; a; a = a->next, i++) {
        if (!valued[i])
            continue;
        const xmlChar *value = a->children ? a->children->content : BAD_CAST "";
        if (xmlStrcasecmp(a->name, BAD_CAST "http-equiv") == 0 &&
            xmlStrcasecmp(value, BAD_CAST "Content-Type") == 0)
            http = true;
        else if (xmlStrcasecmp(a->name, BAD_CAST "charset") == 0) {
            if (pf_encoding(p, value) < 0)
                return PF_FAIL;
        } else if (xmlStrcasecmp(a->name, BAD_CAST "content") == 0)
            content = value;
    }
    if (!http || !content)
        return 0;
    const xmlChar *enc = xmlStrcasestr(content, BAD_CAST "charset");
    if (enc) {
        enc += 7;
        if (pf_blank(*enc))
            enc = xmlStrcasestr(content, BAD_CAST "=");
    }
    if (enc && *enc == '=')
        return pf_encoding(p, enc + 1);
    return 0;
}

/* An attribute value at p->s: *ret_v gets it (*ret_len bytes, not NUL-terminated), in the
 * body itself when it is quoted and has no reference, else decoded into p->buf. */
static int pf_value(struct pf *p, const unsigned char **ret_v, size_t *ret_len)
{
    unsigned char quote = 0;
    size_t n = 0;
    if (p->s < p->end && (*p->s == '"' || *p->s == '\''))
        quote = *p->s++;
    if (quote) {
        /* a reference never runs over the quote: it ends the value there or nowhere */
        const unsigned char *close = memchr(p->s, quote, (size_t)(p->end - p->s));
        if (!close)
            return PF_FAIL; /* unterminated */
        if (!memchr(p->s, '&', (size_t)(close - p->s))) {
            *ret_v = p->s;
            *ret_len = (size_t)(close - p->s);
            p->s = close + 1;
            return 0;
        }
    }
    while (p->s < p->end) {
        unsigned char c = *p->s;
        if (quote ? c == quote : (c == '>' || pf_blank(c)))
            break;
        if (c == '&') {
            int r = pf_take_ref(p, &n);
            if (r < 0)
                return PF_FAIL;
            if (r > 0)
                continue;
        }
        p->buf[n++] = c;
        p->s++;
    }
    if (quote) {
        if (p->s >= p->end)
            return PF_FAIL; /* unterminated */
        p->s++;
    }
    *ret_v = p->buf;
    *ret_len = n;
    return 0;
}

/* The attributes of el, up to '>' or "/>" (left at p->s). */
static int pf_attributes(struct pf *p, xmlNodePtr el, bool meta)
{
    bool valued[PF_ATTRS_MAX];
    int count = 0;
    xmlAttrPtr last = NULL;
    for (;;) {
        pf_skip_blanks(p);
        if (p->s >= p->end)
            return PF_FAIL;
        if (*p->s == '>' || (*p->s == '/' && p->end - p->s >= 2 && p->s[1] == '>'))
            break;
        if (!pf_alpha(*p->s) && *p->s != '_')
            return PF_FAIL; /* libxml2 skips a bogus attribute */
        char name[PF_ATTR_NAME_MAX + 1];
        size_t n = 0;
        unsigned char c;
        while (p->s < p->end && (c = pf_attr_char(*p->s)) != 0) {
            if (n == PF_ATTR_NAME_MAX)
                return PF_FAIL;
            name[n++] = (char)c;
            p->s++;
        }
        name[n] = '\0';
        if (p->s >= p->end || !(pf_blank(*p->s) || *p->s == '=' || *p->s == '>' ||
                                (*p->s == '/' && p->end - p->s >= 2 && p->s[1] == '>')))
            return PF_FAIL;
        pf_skip_blanks(p);
        bool has_value = false;
        const unsigned char *v = NULL;
        size_t vl = 0;
        if (p->s < p->end && *p->s == '=') {
            p->s++;
            pf_skip_blanks(p);
            if (pf_value(p, &v, &vl) < 0)
                return PF_FAIL;
            has_value = true;
        }
        bool dup = false;
        for (xmlAttrPtr a = el->properties; a && !dup; a = a->next)
            dup = a->name[0] == (xmlChar)name[0] && strcmp((const char *)a->name, name) == 0;
        if (dup)
            continue; /* "Attribute redefined": the first one stays */
        if (count == PF_ATTRS_MAX)
            return PF_FAIL;
        /* The value has no NUL (pf_valid and pf_ref let none through): xmlStrdup's copy is
         * its vl bytes. */
        const xmlChar *value = has_value ? v : NULL;
        if (!value && htmlIsBooleanAttr(BAD_CAST name)) {
            value = BAD_CAST name;
            vl = n;
        }
        last = pf_attr(p, el, last, name, n, value, vl);
        valued[count++] = has_value;
    }
    return meta ? pf_meta(p, el, valued) : 0;
}

/* script and style: raw text up to "</name" (any case), which must close the tag there. */
static int pf_raw(struct pf *p, xmlNodePtr el)
{
    const char *name = (const char *)el->name;
    size_t nl = strlen(name);
    const unsigned char *from = p->s, *q;
    for (q = from;; q++) {
        if ((size_t)(p->end - q) < nl + 3)
            return PF_FAIL;
        if (q[0] == '<' && q[1] == '/' && strncasecmp((const char *)q + 2, name, nl) == 0)
            break;
    }
    if (q[2 + nl] != '>')
        return PF_FAIL;
    if (q > from && from[0] == '<' &&
        (from[1] == '/' || pf_alpha(from[1]) || from[1] == '_' || from[1] == ':'))
        return PF_FAIL; /* libxml2 reads that as a tag before the raw text */
    if (q > from)
        (void)xmlAddChild(el, pf_check(xmlNewCDataBlock(p->doc, from, (int)(q - from))));
    p->s = q + 3 + nl;
    p->depth--;
    return 0;
}

/* A tag name of letters and digits at s, lowered into name (PF_NAME_MAX + 1 bytes): its
 * length, and *end where it stops; 0 when there is none or it is too long for an HTML 4 name. */
static size_t pf_tag_name(const struct pf *p, const unsigned char *s, char *name,
                          const unsigned char **end)
{
    size_t n = 0;
    unsigned char c;
    while (s < p->end && (c = pf_name_char(*s)) != 0) {
        if (n == PF_NAME_MAX)
            return 0;
        name[n++] = (char)c;
        s++;
    }
    name[n] = '\0';
    *end = s;
    return n;
}

static int pf_start_tag(struct pf *p)
{
    char name[PF_NAME_MAX + 1];
    const unsigned char *s;
    size_t n = pf_tag_name(p, p->s + 1, name, &s);
    if (n == 0 || s >= p->end || !(pf_blank(*s) || *s == '>' || *s == '/'))
        return PF_FAIL;
    const htmlElemDesc *tag = pf_tag(name, n);
    if (!tag)
        return PF_FAIL;
    /* The open elements this start tag closes (htmlAutoClose), innermost first. */
    while (p->depth) {
        int closes = pf_ask(PF_ASK_CLOSES, tag, p->tags[p->depth - 1], &p->probes_left);
        if (closes < 0)
            return PF_FAIL;
        if (!closes)
            break;
        p->depth--;
    }
    if (strcmp(name, "html") == 0) {
        if (p->depth != 0 || p->seen_html)
            return PF_FAIL;
        p->seen_html = true;
    } else if (strcmp(name, "head") == 0) {
        if (p->depth != 1 || p->seen_head || p->seen_body)
            return PF_FAIL;
        p->seen_head = true;
    } else if (strcmp(name, "body") == 0) {
        if (p->depth != 1 || p->seen_body)
            return PF_FAIL;
        p->seen_body = true;
    } else if (p->depth < 2 || strncmp(name, "frame", 5) == 0 || strcmp(name, "noframes") == 0) {
        return PF_FAIL; /* libxml2 would imply <html>, <head> or <body>, or keep frames */
    }
    if (p->depth == PF_MAX_DEPTH)
        return PF_FAIL;

    xmlNodePtr el = pf_node(p, XML_ELEMENT_NODE);
    el->name = pf_strndup(name, n);
    pf_add(p, el);
    p->s = s;
    if (pf_attributes(p, el, strcmp(name, "meta") == 0) < 0)
        return PF_FAIL;
    if (*p->s == '/') {
        p->s += 2; /* "/>" closes any element */
        return 0;
    }
    p->s++;
    if (tag->empty)
        return 0;
    p->tags[p->depth] = tag;
    p->open[p->depth++] = el;
    if (strcmp(name, "script") == 0 || strcmp(name, "style") == 0)
        return pf_raw(p, el);
    return 0;
}

static int pf_end_tag(struct pf *p)
{
    char name[PF_NAME_MAX + 1];
    const unsigned char *s;
    if (p->end - p->s < 3 || !pf_alpha(p->s[2]))
        return PF_FAIL; /* "</1": libxml2 reads no end tag but text ("1...") */
    size_t n = pf_tag_name(p, p->s + 2, name, &s);
    if (n == 0 || s >= p->end || *s != '>')
        return PF_FAIL;
    p->s = s + 1;
    /* htmlParseEndTag: the innermost open element of that name closes, with every element
     * above it - unless one of those has the higher end priority: then, as when no element
     * of that name is open, the end tag is ignored. */
    int i = p->depth - 1;
    while (i >= 0 && (p->open[i]->name[0] != (xmlChar)name[0] ||
                      strcmp((const char *)p->open[i]->name, name) != 0))
        i--;
    if (i < 0)
        return 0;
    for (int k = p->depth - 1; k > i; k--) {
        int closes = pf_ask(PF_ASK_END_CLOSES, p->tags[i], p->tags[k], &p->probes_left);
        if (closes < 0)
            return PF_FAIL;
        if (!closes)
            return 0;
    }
    p->depth = i;
    return 0;
}

static int pf_content(struct pf *p)
{
    while (p->s < p->end) {
        int rc;
        if (*p->s != '<')
            rc = pf_text(p);
        else if (pf_at(p, "<!--"))
            rc = pf_comment(p);
        else if (p->end - p->s >= 2 && p->s[1] == '/')
            rc = pf_end_tag(p);
        else if (p->end - p->s >= 2 && pf_alpha(p->s[1]))
            rc = pf_start_tag(p);
        else
            rc = PF_FAIL; /* a misplaced DOCTYPE, a processing instruction, a lone '<' */
        if (rc < 0)
            return PF_FAIL;
    }
    /* At the end libxml2 closes whatever is open (htmlAutoCloseOnEnd): the tree as it is. */
    return p->seen_html ? 0 : PF_FAIL;
}

/* What htmlParseDocument reads before the content: blanks, comments, one DOCTYPE. */
static int pf_prolog(struct pf *p)
{
    for (int round = 0; round < 2; round++) {
        pf_skip_blanks(p);
        while (pf_at(p, "<!--") || pf_at(p, "<?")) {
            if (p->s[1] == '?' || pf_comment(p) < 0)
                return PF_FAIL;
            pf_skip_blanks(p);
        }
        if (round == 0 && pf_at_doctype(p) && pf_doctype(p) < 0)
            return PF_FAIL;
    }
    return 0;
}

/* The fast path was read against, and is tested with, libxml2 2.9 (Debian 12's 2.9.14).
 * Another release may build other trees (2.14 reads HTML as HTML5 does): there, every page
 * goes to libxml2. */
static pthread_once_t pf_version_once = PTHREAD_ONCE_INIT;
static bool pf_version_ok;

static void pf_version_check(void)
{
    int v = atoi(xmlParserVersion); /* the running library's, e.g. "20914" */
    pf_version_ok = v >= 20900 && v < 21000;
}

/* page_fast_parse, its ids registered (ids) or left to page_fast_ids. */
static htmlDocPtr pf_parse(const char *body, size_t len, const char *url, bool ids)
{
    pthread_once(&pf_version_once, pf_version_check);
    if (!pf_version_ok || !body || len == 0 || len > (size_t)1 << 30 ||
        xmlRegisterNodeDefaultValue || !pf_valid((const unsigned char *)body, len))
        return NULL; /* a node callback: libxml2 calls it for every node (see pf_node) */

    struct pf p = {.s = (const unsigned char *)body,
                   .end = (const unsigned char *)body + len,
                   .probes_left = PF_PAGE_PROBES,
                   .join_left = PF_JOIN_BUDGET,
                   .ids = ids};
    p.doc = pf_check(htmlNewDocNoDtD(NULL, NULL));
    p.doc->properties = XML_DOC_HTML;
    /* What htmlCtxtUseOptions keeps of page.c's options (recovery and NONET are not kept). */
    p.doc->parseFlags = PAGE_HTML_OPTIONS & (HTML_PARSE_NOERROR | HTML_PARSE_NOWARNING);
    if (url)
        p.doc->URL = xmlPathToURI(BAD_CAST url);
    p.buf = pf_check(xmlMalloc(len + 1));

    int rc = pf_prolog(&p);
    if (rc == 0)
        rc = pf_content(&p);
    xmlFree(p.buf);
    if (rc < 0) {
        xmlFreeDoc(p.doc);
        return NULL;
    }
    if (!p.doc->intSubset)
        (void)pf_check(xmlCreateIntSubset(p.doc, BAD_CAST "html",
                                          BAD_CAST "-//W3C//DTD HTML 4.0 Transitional//EN",
                                          BAD_CAST "http://www.w3.org/TR/REC-html40/loose.dtd"));
    return p.doc;
}

UNITTEST htmlDocPtr page_fast_parse(const char *body, size_t len, const char *url)
{
    return pf_parse(body, len, url, true);
}

htmlDocPtr page_fast_parse_ids_later(const char *body, size_t len, const char *url)
{
    return pf_parse(body, len, url, false);
}

void page_fast_ids(htmlDocPtr doc)
{
    /* The elements in document order, the order their start tags came in, and with them
     * their attributes: the order the parse would have registered them in. */
    xmlNodePtr n = doc->children;
    while (n) {
        if (n->type == XML_ELEMENT_NODE) {
            for (xmlAttrPtr a = n->properties; a; a = a->next)
                pf_id(doc, n, a);
            if (n->children) {
                n = n->children;
                continue;
            }
        }
        while (!n->next) {
            n = n->parent;
            if (!n || n == (xmlNodePtr)doc)
                return;
        }
        n = n->next;
    }
}
