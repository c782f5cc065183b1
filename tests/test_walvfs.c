/*
 * test_walvfs - the VFS the queue's SQLite files open through (bot/store_walvfs.c): a WAL
 * frame's 24-byte header is held back and written with the page that continues it, and is
 * never held past the next call on the file. Checked on the file's own methods (what is on
 * disk after each call), then through SQLite: frames are joined, and a connection of the
 * default VFS reads every commit, before and after a checkpoint, on a sound file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "queue/store-int.h"
#include "queue/store-test.h"

struct fx {
    char dir[96];
    char db[160];
    char wal[168];
};

static int fx_setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    if (!f)
        return -1;
    const char *tmp = getenv("TMPDIR");
    snprintf(f->dir, sizeof(f->dir), "%s/apbot-walvfs-XXXXXX",
             tmp && *tmp && strlen(tmp) < 64 ? tmp : "/tmp");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->db, sizeof(f->db), "%s/q.db", f->dir);
    snprintf(f->wal, sizeof(f->wal), "%s-wal", f->db);
    *state = f;
    return 0;
}

static int fx_teardown(void **state)
{
    struct fx *f = *state;
    const char *suffix[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
        char p[200];
        snprintf(p, sizeof(p), "%s%s", f->db, suffix[i]);
        unlink(p);
    }
    rmdir(f->dir);
    free(f);
    return 0;
}

/* The file at path as it is on disk now: at most cap bytes into buf, the length. */
static size_t on_disk(const char *path, unsigned char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    ssize_t n = pread(fd, buf, cap, 0);
    close(fd);
    assert_true(n >= 0);
    return (size_t)n;
}

enum op { W, R, SZ, SYNC, TRUNC, CLOSE };
struct step {
    enum op op;
    int amt;     /* W, R: bytes; TRUNC: the size */
    int64_t off; /* W, R */
    bool held;   /* after it, the disk may lag the writes (a header is held) */
    const char *why;
};

/*
 * The file's own methods, one table: a WAL file opened through the VFS, a shadow of what was
 * written, and after every call that does not hold a header, the disk must equal the shadow.
 */
static void test_walvfs_holds_a_header_only_until_the_next_call(void **state)
{
    struct fx *f = *state;
    const char *name = store_walvfs_name();
    assert_non_null(name);
    sqlite3_vfs *vfs = sqlite3_vfs_find(name);
    assert_non_null(vfs);
    close(open(f->db, O_RDWR | O_CREAT, 0600)); /* the WAL's database (for its mode) */

    static const struct step steps[] = {
        {W, 32, 0, false, "the WAL header (32 bytes): written at once"},
        {W, 24, 32, true, "a frame header: held"},
        {W, 4096, 56, false, "its page: written with it"},
        {W, 24, 4152, true, "the next frame header: held"},
        {R, 24, 4152, false, "a read: the header goes first, the read sees it"},
        {W, 4096, 4176, false, "its page, after the read: written as it is"},
        {W, 24, 8272, true, "a header"},
        {W, 4096, 9000, false, "a write elsewhere: the header goes first"},
        {W, 24, 8272, true, "a header again"},
        {SZ, 0, 0, false, "the size: the header goes first"},
        {W, 24, 13096, true, "a header"},
        {SYNC, 0, 0, false, "a sync: the header goes first"},
        {W, 24, 13120, true, "a header"},
        {W, 24, 13144, false, "24 bytes at the next offset: written with the held header"},
        {TRUNC, 13168, 0, false, "a truncate: the header goes first"},
        {W, 24, 13168, true, "a header"},
        {CLOSE, 0, 0, false, "the close: the header goes first"},
    };
    enum { CAP = 16384 };
    unsigned char *shadow = calloc(1, CAP), *disk = calloc(1, CAP), *data = malloc(CAP);
    for (int i = 0; i < CAP; i++)
        data[i] = (unsigned char)(i * 7 + 3);
    size_t shadow_len = 0;

    sqlite3_filename fn = sqlite3_create_filename(f->db, "", f->wal, 0, NULL);
    assert_non_null(fn);
    sqlite3_file *file = calloc(1, (size_t)vfs->szOsFile);
    int out = 0;
    assert_int_equal(vfs->xOpen(vfs, sqlite3_filename_wal(fn), file,
                                SQLITE_OPEN_WAL | SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, &out),
                     SQLITE_OK);
    assert_non_null(file->pMethods);
    uint64_t w0, j0;
    store_walvfs_counts(&w0, &j0);
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        const struct step *s = &steps[i];
        const unsigned char *src = data + (i * 131) % 4096;
        switch (s->op) {
        case W:
            assert_int_equal(file->pMethods->xWrite(file, src, s->amt, s->off), SQLITE_OK);
            memcpy(shadow + s->off, src, (size_t)s->amt);
            if ((size_t)(s->off + s->amt) > shadow_len)
                shadow_len = (size_t)(s->off + s->amt);
            break;
        case R: {
            unsigned char got[64];
            assert_int_equal(file->pMethods->xRead(file, got, s->amt, s->off), SQLITE_OK);
            assert_memory_equal(got, shadow + s->off, (size_t)s->amt);
            break;
        }
        case SZ: {
            sqlite3_int64 size = 0;
            assert_int_equal(file->pMethods->xFileSize(file, &size), SQLITE_OK);
            assert_int_equal(size, (sqlite3_int64)shadow_len);
            break;
        }
        case SYNC:
            assert_int_equal(file->pMethods->xSync(file, SQLITE_SYNC_NORMAL), SQLITE_OK);
            break;
        case TRUNC:
            assert_int_equal(file->pMethods->xTruncate(file, s->amt), SQLITE_OK);
            shadow_len = (size_t)s->amt;
            break;
        case CLOSE:
            assert_int_equal(file->pMethods->xClose(file), SQLITE_OK);
            break;
        }
        if (!s->held) {
            size_t n = on_disk(f->wal, disk, CAP);
            if (n != shadow_len || memcmp(disk, shadow, n) != 0)
                fail_msg("step %zu (%s): the disk holds %zu bytes, the writes %zu", i, s->why, n,
                         shadow_len);
        }
    }
    uint64_t w1, j1;
    store_walvfs_counts(&w1, &j1);
    assert_int_equal(j1 - j0, 2); /* the two writes that continued a held header */
    sqlite3_free_filename(fn);
    free(file);
    free(shadow);
    free(disk);
    free(data);
}

static int exec(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK)
        fail_msg("%s: %s", sql, msg ? msg : sqlite3_errstr(rc));
    return rc;
}

static int64_t one_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *s = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

static int frames_seen; /* the WAL's size in frames at the last commit (the WAL hook's) */
static int count_frames(void *ctx, sqlite3 *db, const char *zdb, int frames)
{
    (void)ctx;
    (void)db;
    (void)zdb;
    frames_seen = frames;
    return SQLITE_OK;
}

/*
 * Through SQLite: 300 commits on a connection of the VFS (the queue's settings), each frame
 * one write; a connection of the default VFS reads every commit at once, and the file is
 * sound before and after a checkpoint.
 */
static void test_walvfs_commits_read_by_the_default_vfs(void **state)
{
    struct fx *f = *state;
    sqlite3 *db = NULL, *plain = NULL;
    assert_int_equal(sqlite3_open_v2(f->db, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                                     store_walvfs_name()),
                     SQLITE_OK);
    exec(db, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
             "CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, k TEXT UNIQUE, v BLOB);"
             "CREATE INDEX t_v ON t(v);");
    assert_int_equal(sqlite3_open_v2(f->db, &plain, SQLITE_OPEN_READWRITE, "unix"), SQLITE_OK);
    exec(db, "PRAGMA wal_checkpoint(TRUNCATE)"); /* the loop's frames from 0 */
    sqlite3_wal_hook(db, count_frames, NULL);    /* (and no auto-checkpoint) */
    uint64_t w0, j0;
    store_walvfs_counts(&w0, &j0);
    int frames = 0, start = 0;
    for (int i = 1; i <= 300; i++) {
        char sql[256];
        snprintf(sql, sizeof(sql),
                 "BEGIN IMMEDIATE; INSERT INTO t (k, v) VALUES ('k%d', randomblob(%d));"
                 "UPDATE t SET v = randomblob(900) WHERE id = %d; COMMIT;",
                 i, 200 + (i * 37) % 3000, 1 + (i * 13) % i);
        exec(db, sql);
        frames += frames_seen - start;
        start = frames_seen;
        assert_int_equal(one_int(plain, "SELECT count(*) FROM t"), i);
    }
    uint64_t w1, j1;
    store_walvfs_counts(&w1, &j1);
    /* every frame is one joined write; the rest are WAL headers after a restart */
    assert_true(frames > 300);
    assert_int_equal(j1 - j0, (uint64_t)frames);
    assert_true(w1 - w0 - (j1 - j0) <= 4);
    assert_int_equal(one_int(plain, "SELECT count(*) FROM pragma_integrity_check"
                                    " WHERE integrity_check <> 'ok'"),
                     0);
    exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
    assert_int_equal(one_int(plain, "SELECT count(*) FROM t"), 300);
    assert_int_equal(sqlite3_close(db), SQLITE_OK);
    assert_int_equal(one_int(plain, "SELECT count(*) FROM pragma_integrity_check"
                                    " WHERE integrity_check <> 'ok'"),
                     0);
    assert_int_equal(sqlite3_close(plain), SQLITE_OK);
}

static int flush_hook(void *ctx, sqlite3 *db, const char *zdb, int frames)
{
    (void)ctx;
    (void)zdb;
    (void)frames;
    return store_walvfs_flush(db);
}

/* Copies the file at from to to, as it is on disk now. */
static void copy_file(const char *from, const char *to)
{
    enum { CAP = 16 << 20 };
    unsigned char *buf = malloc(CAP);
    size_t n = on_disk(from, buf, CAP);
    assert_true(n < CAP);
    int fd = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf, n), (ssize_t)n);
    close(fd);
    free(buf);
}

/* Rows in table t of the database at f->dir/copy.db, copied from the queue's files as they are
 * on disk now (as a kill of this process would leave them: without the shared memory, so the
 * copy's first reader recovers the WAL, checking every frame's checksum). */
static int64_t rows_after_a_kill(struct fx *f)
{
    char db[200], wal[210];
    snprintf(db, sizeof(db), "%s/copy.db", f->dir);
    snprintf(wal, sizeof(wal), "%s-wal", db);
    copy_file(f->db, db);
    copy_file(f->wal, wal);
    sqlite3 *c = NULL;
    assert_int_equal(sqlite3_open_v2(db, &c, SQLITE_OPEN_READWRITE, "unix"), SQLITE_OK);
    int64_t n = one_int(c, "SELECT count(*) FROM t");
    assert_int_equal(one_int(c, "SELECT count(*) FROM pragma_integrity_check"
                                " WHERE integrity_check <> 'ok'"),
                     0);
    sqlite3_close(c);
    unlink(db);
    unlink(wal);
    char shm[210];
    snprintf(shm, sizeof(shm), "%s-shm", db);
    unlink(shm);
    return n;
}

/*
 * A transaction larger than its connection's cache writes pages to the WAL before it commits,
 * some of them twice; its commit then rewrites the checksums of those frames and ends on a
 * header with no page after it, which the VFS holds. Without the flush in the WAL hook, the
 * commit is reported while that header is in memory only: a kill then loses the commit (the
 * first half of this test shows it happen, so the second half tests something).
 */
static void test_walvfs_a_spilled_commit_is_whole_in_the_file(void **state)
{
    struct fx *f = *state;
    for (int with_flush = 0; with_flush <= 1; with_flush++) {
        sqlite3 *db = NULL;
        assert_int_equal(sqlite3_open_v2(f->db, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                                         store_walvfs_name()),
                         SQLITE_OK);
        exec(db, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA cache_size = 8;"
                 "DROP TABLE IF EXISTS t; CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB);");
        exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
        sqlite3_wal_hook(db, with_flush ? flush_hook : count_frames, NULL);
        exec(db, "BEGIN; WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n"
                 " WHERE i < 200) INSERT INTO t SELECT i, randomblob(1000) FROM n;"
                 "UPDATE t SET v = randomblob(1000); UPDATE t SET v = randomblob(1000); COMMIT;");
        int64_t rows = rows_after_a_kill(f);
        if (with_flush)
            assert_int_equal(rows, 200);
        else
            assert_int_equal(rows, 0); /* the hazard is real: the last header was held */
        assert_int_equal(sqlite3_close(db), SQLITE_OK);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_walvfs_holds_a_header_only_until_the_next_call,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_walvfs_commits_read_by_the_default_vfs, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_walvfs_a_spilled_commit_is_whole_in_the_file, fx_setup,
                                        fx_teardown),
    };
    return cmocka_run_group_tests_name("walvfs", tests, NULL, NULL);
}
