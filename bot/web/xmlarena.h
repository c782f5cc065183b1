/*
 * xmlarena.h - libxml2's allocator, with an arena per parsed ERP page.
 *
 * An ERP page is parsed into a tree of a thousand small allocations (nodes, attributes, text,
 * the parser's dictionary and buffers) that all die together when the page is dropped. While
 * an arena is active on a thread, every libxml2 allocation of that thread is a bump of a
 * pointer in the arena's chunks, a free inside it costs nothing, and the whole tree goes
 * back in one step (xmlarena_free) instead of a walk that frees node by node. Outside an
 * arena, libxml2 allocates from the C heap as before.
 *
 * The allocator is installed in libxml2 (xmlMemSetup) by a constructor that runs before
 * main, as libxml2 requires: before any other libxml2 call. Every block carries a small
 * header that says where it came from, so libxml2 may free or grow any block at any time:
 * an arena block freed outside its arena is left to the arena, a heap block grown inside an
 * arena stays on the heap (a long-lived libxml2 structure never moves into a page's arena).
 *
 * Rules for the code that uses an arena (page.c):
 * - between xmlarena_begin and xmlarena_end, the thread allocates only what belongs to the
 *   page (libxml2's per-thread "last error" copy is reset before the end, see page.c);
 * - nothing allocated in the arena is used after xmlarena_free: the document is dropped with
 *   its arena, never with xmlFreeDoc;
 * - an arena is used by one thread at a time.
 * Memory: an arena grows in chunks as the parser asks (the page's size is bounded by the
 * flow's max-body-bytes), and holds itself in its first; each thread keeps up to 256 KiB of
 * released chunks for its next pages, so that a page mostly costs no heap block at all. Under
 * AddressSanitizer, released arena memory is poisoned.
 */
#ifndef APBOT_XMLARENA_H
#define APBOT_XMLARENA_H

#include <stddef.h>

struct xmlarena;

/*
 * Starts an arena on the calling thread: libxml2's allocations of this thread go into it
 * until xmlarena_end. Returns NULL (and starts nothing) when the allocator is not installed
 * or the thread already has an active arena: the caller then frees what it parses the usual
 * way. Aborts on out-of-memory (mem.h).
 */
struct xmlarena *xmlarena_begin(void);

/* Ends the calling thread's arena: its allocations go to the heap again. The arena keeps
 * what was allocated in it. */
void xmlarena_end(struct xmlarena *a);

/* Releases everything allocated in the arena, and the arena. NULL does nothing. */
void xmlarena_free(struct xmlarena *a);

/*
 * n bytes (16-byte aligned) carved from a, active or not, released with it by xmlarena_free
 * (and only then: never pass them to free or xmlFree). For what lives exactly as long as the
 * page besides its tree (page.c's struct page). Never NULL: aborts on out-of-memory (mem.h).
 */
void *xmlarena_alloc(struct xmlarena *a, size_t n);

#ifdef APBOT_UNITTEST
/* Bytes the arena holds in chunks. */
size_t xmlarena_bytes(const struct xmlarena *a);

/* Whether the allocator is installed in libxml2 (it is unless libxml2 was set up before). */
int xmlarena_installed(void);
#endif

#endif
