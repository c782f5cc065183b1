/*
 * store_walvfs.c - the SQLite VFS the queue's files are opened through: SQLite's own default
 * VFS ("unix"), except that a WAL frame reaches the file system in one write instead of two.
 *
 * SQLite writes each frame of a commit as its 24-byte header, then its page, at the next
 * offset (walWriteOneFrame): 34 frames per invoice, so 68 pwrite calls, each dirtying the
 * WAL's inode (a journal handle in ext4) - a third of the bot's system calls. Here a 24-byte
 * write to a WAL file is held back and written together with the write that continues it;
 * any other operation on that file (a read, a write elsewhere, a sync, a size, a truncate, a
 * lock, a file control, the close) first writes what is held back. The header is therefore
 * never held past the next call SQLite makes on the file: the frame's page write, which
 * walWriteOneFrame issues next, with nothing in between. A commit's frames are all written
 * before SQLite publishes them in the WAL index (shared memory, after the frames' writes) and
 * before any sync, so what readers, checkpoints, fsync and a crash see is what SQLite wrote,
 * in SQLite's order - with one exception, which the queue's WAL hook closes: a commit that
 * rewrites the checksums of frames it wrote twice (a transaction that spilled its cache ends
 * so, walRewriteChecksums) ends on a header with no page after it. store_walvfs_flush writes
 * it; store_sqlite.c calls it first thing in its WAL hook, which SQLite runs after every commit
 * and before COMMIT returns, so no commit is reported while part of it is in this process's
 * memory only (a kill would lose it). If the write that would carry a held header fails, the header
 * is dropped with it and the write reports the error: SQLite then abandons that commit, whose
 * frames no reader can see (they are past the index's last valid frame).
 *
 * Every file other than a WAL is the default VFS's own file, untouched; so are the VFS's
 * other methods. The VFS is registered once, not as the default.
 */
#include "base/unittest.h"
#include "store-int.h"
#include "store-test.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#define WV_NAME "apbot-wal"
#define WV_FRAME_HEADER 24 /* a WAL frame's header (SQLite's file format) */

struct wv_file {
    sqlite3_file base;     /* wv_methods */
    sqlite3_file *real;    /* the default VFS's file, right after this struct */
    sqlite3_int64 held_at; /* where the held header goes */
    bool held;
    unsigned char header[WV_FRAME_HEADER];
    unsigned char *buf; /* header + page, for the joined write */
    int buf_len;
};

static sqlite3_vfs wv_vfs;
static sqlite3_vfs *wv_root;
static atomic_uint_fast64_t wv_writes, wv_joined;

/* Writes the held header, if any. */
static int wv_flush(struct wv_file *w)
{
    if (!w->held)
        return SQLITE_OK;
    w->held = false;
    atomic_fetch_add_explicit(&wv_writes, 1, memory_order_relaxed);
    return w->real->pMethods->xWrite(w->real, w->header, WV_FRAME_HEADER, w->held_at);
}

#define WV(f) ((struct wv_file *)(f))
#define REAL(f) (WV(f)->real)

static int wv_close(sqlite3_file *f)
{
    int rc = wv_flush(WV(f));
    int rc2 = REAL(f)->pMethods->xClose(REAL(f));
    sqlite3_free(WV(f)->buf);
    WV(f)->buf = NULL;
    return rc != SQLITE_OK ? rc : rc2;
}

static int wv_read(sqlite3_file *f, void *buf, int amt, sqlite3_int64 off)
{
    int rc = wv_flush(WV(f));
    return rc != SQLITE_OK ? rc : REAL(f)->pMethods->xRead(REAL(f), buf, amt, off);
}

static int wv_write(sqlite3_file *f, const void *buf, int amt, sqlite3_int64 off)
{
    struct wv_file *w = WV(f);
    if (w->held && amt > 0 && off == w->held_at + WV_FRAME_HEADER &&
        amt <= 65536) { /* a page: SQLite's largest is 64 KiB */
        int need = WV_FRAME_HEADER + amt;
        if (w->buf_len < need) {
            unsigned char *nb = sqlite3_realloc(w->buf, need);
            if (!nb) {
                int rc = wv_flush(w);
                return rc != SQLITE_OK ? rc : REAL(f)->pMethods->xWrite(REAL(f), buf, amt, off);
            }
            w->buf = nb;
            w->buf_len = need;
        }
        memcpy(w->buf, w->header, WV_FRAME_HEADER);
        memcpy(w->buf + WV_FRAME_HEADER, buf, (size_t)amt);
        w->held = false;
        atomic_fetch_add_explicit(&wv_writes, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&wv_joined, 1, memory_order_relaxed);
        return REAL(f)->pMethods->xWrite(REAL(f), w->buf, need, w->held_at);
    }
    int rc = wv_flush(w);
    if (rc != SQLITE_OK)
        return rc;
    if (amt == WV_FRAME_HEADER) {
        memcpy(w->header, buf, WV_FRAME_HEADER);
        w->held_at = off;
        w->held = true;
        return SQLITE_OK;
    }
    atomic_fetch_add_explicit(&wv_writes, 1, memory_order_relaxed);
    return REAL(f)->pMethods->xWrite(REAL(f), buf, amt, off);
}

/* The other methods: what is held goes first, then the default VFS's method. */
#define WV_PASS(call)                                                                              \
    do {                                                                                           \
        int rc_ = wv_flush(WV(f));                                                                 \
        return rc_ != SQLITE_OK ? rc_ : (call);                                                    \
    } while (0)

static int wv_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    WV_PASS(REAL(f)->pMethods->xTruncate(REAL(f), size));
}

static int wv_sync(sqlite3_file *f, int flags)
{
    WV_PASS(REAL(f)->pMethods->xSync(REAL(f), flags));
}

static int wv_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
    WV_PASS(REAL(f)->pMethods->xFileSize(REAL(f), size));
}

static int wv_lock(sqlite3_file *f, int level)
{
    WV_PASS(REAL(f)->pMethods->xLock(REAL(f), level));
}

static int wv_unlock(sqlite3_file *f, int level)
{
    WV_PASS(REAL(f)->pMethods->xUnlock(REAL(f), level));
}

static int wv_check_reserved(sqlite3_file *f, int *out)
{
    WV_PASS(REAL(f)->pMethods->xCheckReservedLock(REAL(f), out));
}

static int wv_file_control(sqlite3_file *f, int op, void *arg)
{
    WV_PASS(REAL(f)->pMethods->xFileControl(REAL(f), op, arg));
}

static int wv_sector_size(sqlite3_file *f)
{
    return REAL(f)->pMethods->xSectorSize(REAL(f));
}

static int wv_device_characteristics(sqlite3_file *f)
{
    return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}

/* A WAL has no shared memory and is never memory-mapped by SQLite; these pass on all the same
 * (after what is held) for whatever the default VFS answers. */
static int wv_shm_map(sqlite3_file *f, int pg, int pgsz, int extend, void volatile **pp)
{
    WV_PASS(REAL(f)->pMethods->xShmMap(REAL(f), pg, pgsz, extend, pp));
}

static int wv_shm_lock(sqlite3_file *f, int offset, int n, int flags)
{
    WV_PASS(REAL(f)->pMethods->xShmLock(REAL(f), offset, n, flags));
}

static void wv_shm_barrier(sqlite3_file *f)
{
    (void)wv_flush(WV(f));
    REAL(f)->pMethods->xShmBarrier(REAL(f));
}

static int wv_shm_unmap(sqlite3_file *f, int del)
{
    WV_PASS(REAL(f)->pMethods->xShmUnmap(REAL(f), del));
}

static int wv_fetch(sqlite3_file *f, sqlite3_int64 off, int amt, void **pp)
{
    (void)off;
    (void)amt;
    *pp = NULL; /* "not mapped": SQLite reads instead */
    return wv_flush(WV(f));
}

static int wv_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
    (void)f;
    (void)off;
    (void)p;
    return SQLITE_OK;
}

static const sqlite3_io_methods wv_methods = {
    .iVersion = 3,
    .xClose = wv_close,
    .xRead = wv_read,
    .xWrite = wv_write,
    .xTruncate = wv_truncate,
    .xSync = wv_sync,
    .xFileSize = wv_file_size,
    .xLock = wv_lock,
    .xUnlock = wv_unlock,
    .xCheckReservedLock = wv_check_reserved,
    .xFileControl = wv_file_control,
    .xSectorSize = wv_sector_size,
    .xDeviceCharacteristics = wv_device_characteristics,
    .xShmMap = wv_shm_map,
    .xShmLock = wv_shm_lock,
    .xShmBarrier = wv_shm_barrier,
    .xShmUnmap = wv_shm_unmap,
    .xFetch = wv_fetch,
    .xUnfetch = wv_unfetch,
};

/* A WAL opens behind a wv_file; every other file is the default VFS's, in place. */
static int wv_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out)
{
    (void)vfs;
    if (!(flags & SQLITE_OPEN_WAL))
        return wv_root->xOpen(wv_root, name, f, flags, out);
    struct wv_file *w = WV(f);
    memset(w, 0, sizeof(*w));
    w->real = (sqlite3_file *)(w + 1);
    int rc = wv_root->xOpen(wv_root, name, w->real, flags, out);
    if (rc != SQLITE_OK) {
        /* SQLite closes a file whose open failed only if pMethods is set: the default VFS's
         * methods, then, on its own file. */
        if (w->real->pMethods)
            w->real->pMethods->xClose(w->real);
        w->base.pMethods = NULL;
        return rc;
    }
    w->base.pMethods = &wv_methods;
    return SQLITE_OK;
}

static pthread_once_t wv_once = PTHREAD_ONCE_INIT;
static bool wv_ready;

static void wv_register(void)
{
    wv_root = sqlite3_vfs_find(NULL);
    /* Only over the default unix VFS, whose WAL files take the held header as described. */
    if (!wv_root || strcmp(wv_root->zName, "unix") != 0 || wv_root->iVersion < 2)
        return;
    wv_vfs = *wv_root; /* every other method, and their data, are the default VFS's */
    wv_vfs.zName = WV_NAME;
    wv_vfs.pNext = NULL;
    int root_size = wv_root->szOsFile;
    wv_vfs.szOsFile = (int)sizeof(struct wv_file) + root_size;
    wv_vfs.xOpen = wv_open;
    wv_ready = sqlite3_vfs_register(&wv_vfs, 0) == SQLITE_OK;
}

int store_walvfs_flush(sqlite3 *db)
{
    sqlite3_file *wal = NULL;
    if (sqlite3_file_control(db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal) != SQLITE_OK || !wal ||
        wal->pMethods != &wv_methods)
        return SQLITE_OK; /* no WAL of ours */
    return wv_flush(WV(wal));
}

const char *store_walvfs_name(void)
{
    pthread_once(&wv_once, wv_register);
    return wv_ready ? WV_NAME : NULL;
}

UNITTEST void store_walvfs_counts(uint64_t *ret_writes, uint64_t *ret_joined)
{
    *ret_writes = atomic_load(&wv_writes);
    *ret_joined = atomic_load(&wv_joined);
}
