/*
 * xmlarena.c - libxml2's allocator, with an arena per parsed ERP page (xmlarena.h).
 *
 * Every block starts with a 16-byte header (its size and where it lives), so that free and
 * realloc know what they hold whatever the thread's mode is at that moment; 16 bytes keep
 * malloc's alignment for what follows. An arena's own struct is the start of its first
 * chunk. Arena blocks are carved from chunks, newest chunk first; a free or a realloc of the
 * block carved last on the active arena gives back or takes space in place (the parser's
 * buffers grow that way), any other arena free is left to xmlarena_free. A header that is
 * neither tag is a block this allocator never gave out: that is a bug (memory from another
 * allocator handed to libxml2), and it aborts.
 *
 * Out-of-memory: libxml2 is told (NULL) and fails the parse, as with malloc; xmlarena_begin
 * itself aborts (mem.h).
 */
#include "web/xmlarena.h"

#include <pthread.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/xmlmemory.h>

#include "base/unittest.h"

#if defined(__SANITIZE_ADDRESS__)
#define XA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define XA_ASAN 1
#endif
#endif
#ifdef XA_ASAN
#include <sanitizer/asan_interface.h>
#define XA_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define XA_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define XA_POISON(p, n) ((void)(p), (void)(n))
#define XA_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* A 4-5 KB entry form parses into 50-70 KB (the first chunk holds the arena too): one chunk
 * for it. With 64 KB the entry form took a 128 KB second chunk, and with two pages alive at
 * once (a step's form and its answer) the thread's kept chunks (XA_SPARE_MAX) could not hold
 * them all, so a 128 KB chunk went back to malloc and came again once per invoice. */
#define XA_CHUNK_FIRST (128 * 1024)
#define XA_CHUNK_MAX                                                                               \
    (1024 * 1024) /* later chunks grow twofold up to this (a block may be larger) */

enum xa_tag {
    XA_HEAP = 0x70616568u,  /* "heap": malloc'd, freed with free */
    XA_ARENA = 0x616e7261u, /* "arna": in an arena's chunk */
};

struct xa_hdr {
    size_t size;  /* bytes asked for */
    uint32_t tag; /* enum xa_tag */
    uint32_t pad;
};
_Static_assert(sizeof(struct xa_hdr) == 16, "the header keeps 16-byte alignment");

struct xa_chunk {
    struct xa_chunk *next;
    size_t cap;  /* bytes in data */
    size_t used; /* bytes carved */
    size_t pad;
    alignas(16) unsigned char data[];
};
_Static_assert(offsetof(struct xa_chunk, data) % 16 == 0, "chunk data is 16-byte aligned");

struct xmlarena {
    struct xa_chunk *head; /* the chunk blocks are carved from; older ones behind it */
    size_t bytes;          /* sum of the chunks' cap */
    void *last;            /* the block carved last from head (its user pointer), or NULL */
};

static _Thread_local struct xmlarena *xa_cur; /* the calling thread's active arena */
static int xa_on;                             /* the allocator is installed */

/* ---- released chunks, kept per thread for the next page ----------------------------------
 *
 * Freeing a page's chunks for every page made malloc hand the memory back to the system
 * (madvise) and fault it in again. Each thread keeps what its last pages released, up to
 * XA_SPARE_MAX bytes (two first chunks: the two pages a step has alive), newest first. */

#define XA_SPARE_MAX (256 * 1024)

static pthread_key_t xa_key;
static pthread_once_t xa_key_once = PTHREAD_ONCE_INIT;

static void xa_spare_drop(void *v)
{
    for (struct xa_chunk *c = v, *next; c; c = next) {
        next = c->next;
        free(c);
    }
}

static void xa_key_init(void)
{
    if (pthread_key_create(&xa_key, xa_spare_drop) != 0)
        abort(); /* only on resource exhaustion at the first page: mem.h's policy */
}

/* A kept chunk of at least need bytes (taken off the list), or NULL. */
static struct xa_chunk *xa_spare_take(size_t need)
{
    pthread_once(&xa_key_once, xa_key_init);
    struct xa_chunk *head = pthread_getspecific(xa_key);
    for (struct xa_chunk **pp = &head; *pp; pp = &(*pp)->next) {
        if ((*pp)->cap >= need) {
            struct xa_chunk *c = *pp;
            *pp = c->next;
            (void)pthread_setspecific(xa_key, head);
            return c;
        }
    }
    return NULL;
}

/* Keeps c for this thread's next pages, or frees it when the thread keeps enough. */
static void xa_spare_put(struct xa_chunk *c)
{
    pthread_once(&xa_key_once, xa_key_init);
    struct xa_chunk *head = pthread_getspecific(xa_key);
    size_t kept = 0;
    for (const struct xa_chunk *k = head; k; k = k->next)
        kept += k->cap;
    if (kept + c->cap <= XA_SPARE_MAX) {
        c->next = head;
        if (pthread_setspecific(xa_key, c) == 0)
            return;
    }
    free(c);
}

/* ---- blocks ------------------------------------------------------------------------------ */

static struct xa_hdr *xa_hdr_of(void *p)
{
    return (struct xa_hdr *)p - 1;
}

/* The bytes a block of n takes in a chunk, header included; 0 when n is absurd. */
static size_t xa_need(size_t n)
{
    if (n > SIZE_MAX / 2)
        return 0;
    return (sizeof(struct xa_hdr) + n + 15) & ~(size_t)15;
}

static struct xa_chunk *xa_chunk_add(struct xmlarena *a, size_t need)
{
    size_t cap = XA_CHUNK_FIRST;
    if (a->head)
        cap = a->head->cap >= XA_CHUNK_MAX / 2 ? XA_CHUNK_MAX : a->head->cap * 2;
    if (cap < need)
        cap = need;
    struct xa_chunk *c = xa_spare_take(cap);
    if (!c) {
        c = malloc(sizeof(*c) + cap);
        if (!c)
            return NULL;
        c->cap = cap;
        XA_POISON(c->data, cap);
    }
    cap = c->cap;
    c->used = 0;
    c->next = a->head;
    a->head = c;
    a->bytes += cap;
    a->last = NULL;
    return c;
}

/* Carves need bytes (xa_need(n)) for a block of n from c, the arena's head chunk. */
static inline void *xa_carve(struct xmlarena *a, struct xa_chunk *c, size_t n, size_t need)
{
    struct xa_hdr *h = (struct xa_hdr *)(void *)(c->data + c->used);
    XA_UNPOISON(h, need);
    c->used += need;
    h->size = n;
    h->tag = XA_ARENA;
    h->pad = 0;
    a->last = h + 1;
    return h + 1;
}

/* xa_malloc's slow half: a new chunk, then the carve. Out of line, as xa_heap_alloc, so that
 * the common case (a carve from the head chunk, ~2,000 per page) stays a leaf without a
 * stack frame. */
__attribute__((noinline)) static void *xa_arena_alloc_new(struct xmlarena *a, size_t n)
{
    size_t need = xa_need(n);
    if (!need)
        return NULL;
    struct xa_chunk *c = xa_chunk_add(a, need);
    if (!c)
        return NULL;
    return xa_carve(a, c, n, need);
}

__attribute__((noinline)) static void *xa_heap_alloc(size_t n)
{
    if (n > SIZE_MAX - sizeof(struct xa_hdr))
        return NULL;
    struct xa_hdr *h = malloc(sizeof(*h) + n);
    if (!h)
        return NULL;
    h->size = n;
    h->tag = XA_HEAP;
    h->pad = 0;
    return h + 1;
}

static void *xa_malloc(size_t n)
{
    struct xmlarena *a = xa_cur;
    if (!a)
        return xa_heap_alloc(n);
    size_t need = xa_need(n);
    struct xa_chunk *c = a->head;
    if (need && c && c->cap - c->used >= need)
        return xa_carve(a, c, n, need);
    return xa_arena_alloc_new(a, n);
}

/* Whether p is the block carved last from the active arena (it may shrink or grow there). */
static bool xa_is_last(const void *p)
{
    return xa_cur && xa_cur->last == p;
}

static void xa_free(void *p)
{
    if (!p)
        return;
    struct xa_hdr *h = xa_hdr_of(p);
    if (h->tag == XA_HEAP) {
        h->tag = 0;
        free(h);
        return;
    }
    if (h->tag != XA_ARENA)
        abort(); /* a block this allocator never gave out: see the file's comment */
    if (xa_is_last(p)) {
        struct xa_chunk *c = xa_cur->head;
        size_t need = xa_need(h->size);
        c->used -= need;
        xa_cur->last = NULL;
        XA_POISON(h, need);
    }
}

static void *xa_realloc(void *p, size_t n)
{
    if (!p)
        return xa_malloc(n);
    struct xa_hdr *h = xa_hdr_of(p);
    if (h->tag == XA_HEAP) {
        /* A heap block stays on the heap, arena or not: it may be one of libxml2's own
         * long-lived structures. */
        if (n > SIZE_MAX - sizeof(*h))
            return NULL;
        struct xa_hdr *g = realloc(h, sizeof(*g) + n);
        if (!g)
            return NULL;
        g->size = n;
        return g + 1;
    }
    if (h->tag != XA_ARENA)
        abort(); /* as in xa_free */
    if (xa_is_last(p)) {
        struct xa_chunk *c = xa_cur->head;
        size_t old = xa_need(h->size), need = xa_need(n);
        if (need && c->used - old + need <= c->cap) {
            XA_UNPOISON(h, need);
            c->used = c->used - old + need;
            h->size = n;
            return p;
        }
    }
    void *q = xa_malloc(n);
    if (!q)
        return NULL;
    memcpy(q, p, h->size < n ? h->size : n);
    xa_free(p);
    return q;
}

static char *xa_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *q = xa_malloc(n);
    if (q)
        memcpy(q, s, n);
    return q;
}

/* libxml2 wants its allocator before any other call; a constructor runs before main. */
__attribute__((constructor)) static void xa_install(void)
{
    xa_on = xmlMemSetup(xa_free, xa_malloc, xa_realloc, xa_strdup) == 0;
    xmlInitParser();
}

/* ---- arenas ------------------------------------------------------------------------------ */

UNITTEST int xmlarena_installed(void)
{
    return xa_on;
}

/* The bytes of a chunk the arena's own struct takes (the first chunk's first bytes). */
#define XA_SELF ((sizeof(struct xmlarena) + 15) & ~(size_t)15)

struct xmlarena *xmlarena_begin(void)
{
    if (!xa_on || xa_cur)
        return NULL;
    /* The arena lives at the start of its first chunk, mostly one the thread kept: no heap
     * block of its own. */
    struct xmlarena self = {0};
    struct xa_chunk *c = xa_chunk_add(&self, XA_SELF);
    if (!c)
        abort(); /* mem.h's policy */
    XA_UNPOISON(c->data, XA_SELF);
    c->used = XA_SELF;
    struct xmlarena *a = (struct xmlarena *)(void *)c->data;
    *a = self;
    xa_cur = a;
    return a;
}

void xmlarena_end(struct xmlarena *a)
{
    if (a && xa_cur == a)
        xa_cur = NULL;
}

void xmlarena_free(struct xmlarena *a)
{
    if (!a)
        return;
    if (xa_cur == a)
        xa_cur = NULL;
    /* a is in the last chunk of the list (its first): not read once that one goes */
    for (struct xa_chunk *c = a->head, *next; c; c = next) {
        next = c->next;
        XA_POISON(c->data, c->cap);
        xa_spare_put(c);
    }
}

void *xmlarena_alloc(struct xmlarena *a, size_t n)
{
    size_t need = xa_need(n);
    if (!need)
        abort(); /* a size gone wrong */
    struct xa_chunk *c = a->head;
    if (c->cap - c->used < need && !(c = xa_chunk_add(a, need)))
        abort(); /* mem.h's policy */
    return xa_carve(a, c, n, need);
}

UNITTEST size_t xmlarena_bytes(const struct xmlarena *a)
{
    return a ? a->bytes : 0;
}
