/*
 * pdfin.c - the Factur-X / ZUGFeRD PDF reader: finds the CII XML a PDF/A-3 carries as an
 * embedded file and hands it to the CII reader.
 *
 * Why libqpdf (Debian libqpdf-dev) and not poppler-glib: apbot needs a PDF's object structure
 * (the catalog's /AF array and /Names /EmbeddedFiles name tree, one stream), never its pages.
 * qpdf is a structure library with a plain C API (qpdf-c.h), reads objects lazily from the file,
 * is fuzzed continuously upstream, and pulls in no rendering, font, GLib or cairo code; poppler-
 * glib would link the whole renderer (and GLib's main loop and error model) into an unattended
 * bot to read one attachment.
 *
 * How the cost is bounded: the file may be at most PDFIN_MAX_BYTES. qpdf runs in a child process
 * (fork) whose address space may grow by at most PDFIN_MAX_MEMORY (RLIMIT_AS; not under
 * AddressSanitizer, which reserves terabytes of shadow memory) and whose CPU time is capped
 * (RLIMIT_CPU); the parent kills it after PDFIN_MAX_SECONDS of wall-clock time. qpdf's own
 * recovery of damaged files (a scan of the whole file) is off: a damaged PDF is refused. The
 * embedded stream is taken raw and inflated here with zlib under PDFIN_MAX_XML, so a
 * decompression bomb stops at the bound with a clear reason; only /FlateDecode (or no filter) is
 * accepted, which is what Factur-X producers write. The name tree walk is bounded in nodes
 * (loops in it just use up the budget). The child talks to the parent only through a pipe; its
 * stdout and stderr go to /dev/null, so no library text reaches the terminal; a crash in it is a
 * refused file, never a crashed enqueue.
 *
 * Which file: every embedded file in /AF and /Names /EmbeddedFiles is looked at; the one whose
 * name ranks best (pdfin_invoice_rank: factur-x.xml, zugferd-invoice.xml, xrechnung.xml) wins.
 */
#include "input/pdfin.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <qpdf/qpdf-c.h>
#include <zlib.h>

#include "apbot/buf.h"
#include "apbot/invoice.h"
#include "apbot/mem.h"
#include "apbot/secret.h"
#include "base/unittest.h"
#include "input/ciiin.h"

#define PDFIN_MAX_TREE_NODES 10000 /* name-tree nodes and entries looked at */
#define PDFIN_MAX_TREE_DEPTH 32

#if defined(__SANITIZE_ADDRESS__)
#define PDFIN_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PDFIN_ASAN 1
#endif
#endif
#ifndef PDFIN_ASAN
#define PDFIN_ASAN 0
#endif

UNITTEST int pdfin_invoice_rank(const char *filename)
{
    static const char *const names[] = {"factur-x.xml", "zugferd-invoice.xml", "xrechnung.xml"};
    if (!filename)
        return 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcasecmp(filename, names[i]) == 0)
            return (int)i + 1;
    return 0;
}

/* ---- the child: qpdf ---------------------------------------------------------------------- */

/*
 * libqpdf is loaded in the child only, by the SONAME apbot was built against
 * (APBOT_QPDF_SONAME, from CMake): the parent - every apbot command, the runner above all -
 * never maps qpdf and the C++ runtime it brings (about 3 MB of each process's resident memory,
 * and their relocations at every start) for a reader only enqueue uses. The calls go through
 * qp, filled from the library in the child; the declarations still come from qpdf-c.h.
 */
/* clang-format off */
#define PDFIN_QPDF_FUNCS(X) \
    X(init) \
    X(silence_errors) \
    X(set_suppress_warnings) \
    X(set_attempt_recovery) \
    X(read) \
    X(get_error) \
    X(get_error_code) \
    X(get_error_message_detail) \
    X(has_error) \
    X(get_root) \
    X(oh_get_key) \
    X(oh_get_dict) \
    X(oh_get_name) \
    X(oh_get_int_value) \
    X(oh_get_utf8_value) \
    X(oh_get_array_item) \
    X(oh_get_array_n_items) \
    X(oh_get_stream_data) \
    X(oh_is_array) \
    X(oh_is_dictionary) \
    X(oh_is_integer) \
    X(oh_is_name) \
    X(oh_is_name_and_equals) \
    X(oh_is_null) \
    X(oh_is_stream) \
    X(oh_is_string)
/* clang-format on */

static struct {
#define PDFIN_QPDF_POINTER(n) __typeof__(&qpdf_##n) n;
    PDFIN_QPDF_FUNCS(PDFIN_QPDF_POINTER)
#undef PDFIN_QPDF_POINTER
} qp;

_Static_assert(sizeof(void *) == sizeof(void (*)(void)), "dlsym's pointers hold functions");

/* Fills qp; NULL, or why the library cannot be used. The handle stays open (the child exits). */
static const char *pdfin_load_qpdf(void)
{
    void *lib = dlopen(APBOT_QPDF_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return dlerror();
    void *sym;
#define PDFIN_QPDF_LOAD(n)                                                                         \
    if (!(sym = dlsym(lib, "qpdf_" #n)))                                                           \
        return dlerror();                                                                          \
    memcpy(&qp.n, &sym, sizeof(sym));
    PDFIN_QPDF_FUNCS(PDFIN_QPDF_LOAD)
#undef PDFIN_QPDF_LOAD
    return NULL;
}

/* What the child writes: one status byte, then for PDFIN_ST_OK the name (PDFIN_NAME_MAX bytes,
 * NUL-padded), the length (8 bytes, host order) and the XML; otherwise a message. */
enum pdfin_status {
    PDFIN_ST_OK = 'O',
    PDFIN_ST_NONE = 'N',  /* no invoice data */
    PDFIN_ST_PARSE = 'P', /* damaged, encrypted, unsupported */
    PDFIN_ST_LIMIT = 'L', /* a bound passed */
};

struct pdfin_best {
    int rank; /* 0 none yet */
    char name[PDFIN_NAME_MAX];
    qpdf_oh stream;
};

struct pdfin_walk {
    qpdf_data q;
    size_t visited;
    struct pdfin_best best;
};

static bool pdfin_write_all(int fd, const void *p, size_t n)
{
    const char *s = p;
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        s += w;
        n -= (size_t)w;
    }
    return true;
}

static void pdfin_child_say(int out, enum pdfin_status st, const char *fmt, ...) APBOT_PRINTF(3, 4);
static void pdfin_child_say(int out, enum pdfin_status st, const char *fmt, ...)
{
    char msg[400];
    msg[0] = (char)st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + 1, sizeof(msg) - 1, fmt, ap);
    va_end(ap);
    (void)pdfin_write_all(out, msg, strlen(msg));
    _exit(0);
}

/* A filespec dictionary: keeps its embedded stream when its name ranks best so far. */
static void pdfin_filespec(struct pdfin_walk *w, qpdf_oh spec)
{
    qpdf_data q = w->q;
    if (!qp.oh_is_dictionary(q, spec))
        return;
    const char *keys[] = {"/UF", "/F"};
    for (size_t k = 0; k < 2; k++) {
        qpdf_oh n = qp.oh_get_key(q, spec, keys[k]);
        if (!qp.oh_is_string(q, n))
            continue;
        const char *name = qp.oh_get_utf8_value(q, n);
        int rank = pdfin_invoice_rank(name);
        if (!rank || (w->best.rank && rank >= w->best.rank))
            continue;
        qpdf_oh ef = qp.oh_get_key(q, spec, "/EF");
        qpdf_oh stream = qp.oh_get_key(q, ef, "/UF");
        if (!qp.oh_is_stream(q, stream))
            stream = qp.oh_get_key(q, ef, "/F");
        if (!qp.oh_is_stream(q, stream))
            continue;
        w->best.rank = rank;
        snprintf(w->best.name, sizeof(w->best.name), "%s", name);
        w->best.stream = stream;
    }
}

/* A /Names /EmbeddedFiles name-tree node: its /Names pairs and /Kids, bounded. */
static void pdfin_tree(struct pdfin_walk *w, qpdf_oh node, int depth)
{
    qpdf_data q = w->q;
    if (depth > PDFIN_MAX_TREE_DEPTH || ++w->visited > PDFIN_MAX_TREE_NODES ||
        !qp.oh_is_dictionary(q, node))
        return;
    qpdf_oh names = qp.oh_get_key(q, node, "/Names");
    if (qp.oh_is_array(q, names)) {
        int n = qp.oh_get_array_n_items(q, names);
        for (int i = 1; i < n && w->visited <= PDFIN_MAX_TREE_NODES; i += 2, w->visited++)
            pdfin_filespec(w, qp.oh_get_array_item(q, names, i));
    }
    qpdf_oh kids = qp.oh_get_key(q, node, "/Kids");
    if (qp.oh_is_array(q, kids)) {
        int n = qp.oh_get_array_n_items(q, kids);
        for (int i = 0; i < n && w->visited <= PDFIN_MAX_TREE_NODES; i++)
            pdfin_tree(w, qp.oh_get_array_item(q, kids, i), depth + 1);
    }
}

/* The stream's filter must be none or /FlateDecode (a name or a one-element array), without a
 * predictor. Returns true for Flate, false for none; says PARSE and exits otherwise. */
static bool pdfin_check_filter(int out, qpdf_data q, qpdf_oh stream, const char *name)
{
    qpdf_oh dict = qp.oh_get_dict(q, stream);
    qpdf_oh f = qp.oh_get_key(q, dict, "/Filter");
    if (qp.oh_is_array(q, f)) {
        if (qp.oh_get_array_n_items(q, f) == 0)
            return false;
        if (qp.oh_get_array_n_items(q, f) != 1)
            pdfin_child_say(out, PDFIN_ST_PARSE,
                            "embedded file %.100s uses a chain of filters (apbot reads "
                            "/FlateDecode or unfiltered)",
                            name);
        f = qp.oh_get_array_item(q, f, 0);
    }
    if (qp.oh_is_null(q, f))
        return false;
    if (!qp.oh_is_name_and_equals(q, f, "/FlateDecode"))
        pdfin_child_say(out, PDFIN_ST_PARSE,
                        "embedded file %.100s uses filter %.40s (apbot reads /FlateDecode or "
                        "unfiltered)",
                        name, qp.oh_is_name(q, f) ? qp.oh_get_name(q, f) : "?");
    qpdf_oh parms = qp.oh_get_key(q, dict, "/DecodeParms");
    if (qp.oh_is_array(q, parms))
        parms = qp.oh_get_array_item(q, parms, 0);
    qpdf_oh pred = qp.oh_get_key(q, parms, "/Predictor");
    if (qp.oh_is_integer(q, pred) && qp.oh_get_int_value(q, pred) > 1)
        pdfin_child_say(out, PDFIN_ST_PARSE,
                        "embedded file %.100s uses a Flate predictor (not an XML stream)", name);
    return true;
}

/* Inflates raw into buf, never past PDFIN_MAX_XML. */
static void pdfin_inflate(int out, const unsigned char *raw, size_t len, struct apbot_buf *buf,
                          const char *name)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (inflateInit(&z) != Z_OK)
        pdfin_child_say(out, PDFIN_ST_PARSE, "zlib cannot start");
    z.next_in = (unsigned char *)raw;
    z.avail_in = len > UINT32_MAX ? UINT32_MAX : (uInt)len;
    unsigned char chunk[65536];
    int zr;
    do {
        z.next_out = chunk;
        z.avail_out = sizeof(chunk);
        zr = inflate(&z, Z_NO_FLUSH);
        if (zr != Z_OK && zr != Z_STREAM_END)
            pdfin_child_say(out, PDFIN_ST_PARSE, "embedded file %.100s: corrupt Flate data", name);
        if (apbot_buf_add(buf, chunk, sizeof(chunk) - z.avail_out))
            pdfin_child_say(out, PDFIN_ST_LIMIT,
                            "embedded file %.100s is larger than %u MiB decompressed: apbot "
                            "reads invoice XML up to that size",
                            name, PDFIN_MAX_XML >> 20);
    } while (zr != Z_STREAM_END && (z.avail_in > 0 || z.avail_out == 0));
    if (zr != Z_STREAM_END)
        pdfin_child_say(out, PDFIN_ST_PARSE, "embedded file %.100s: truncated Flate data", name);
    inflateEnd(&z);
}

static void pdfin_limit_child(void)
{
    struct rlimit cpu = {PDFIN_MAX_SECONDS, PDFIN_MAX_SECONDS + 1};
    (void)setrlimit(RLIMIT_CPU, &cpu);
    if (PDFIN_ASAN)
        return;
    /* The address space this process already has (libraries, heap) plus the allowance. */
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (f) {
        if (fscanf(f, "%lu", &pages) != 1)
            pages = 0;
        fclose(f);
    }
    long psz = sysconf(_SC_PAGESIZE);
    if (pages && psz > 0) {
        rlim_t lim = (rlim_t)pages * (rlim_t)psz + PDFIN_MAX_MEMORY;
        struct rlimit as = {lim, lim};
        (void)setrlimit(RLIMIT_AS, &as);
    }
}

static void pdfin_child(int fd, int out)
{
    /* The child parses an untrusted PDF: it holds no credential, not even in its environment. */
    secret_scrub_child();
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null >= 0) {
        (void)dup2(null, STDOUT_FILENO);
        (void)dup2(null, STDERR_FILENO);
    }
    pdfin_limit_child();
    const char *why = pdfin_load_qpdf();
    if (why)
        pdfin_child_say(out, PDFIN_ST_PARSE, "cannot read PDFs here: %.300s", why);
    qpdf_data q = qp.init();
    qp.silence_errors(q);
    qp.set_suppress_warnings(q, QPDF_TRUE);
    qp.set_attempt_recovery(q, QPDF_FALSE);
    /* qpdf opens by name: /proc/self/fd/N is the very file the parent checked (the user's
     * path is not looked up a second time). */
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    QPDF_ERROR_CODE qrc = qp.read(q, path, "");
    if (qrc & QPDF_ERRORS) {
        qpdf_error e = qp.get_error(q);
        bool pw = e && qp.get_error_code(q, e) == qpdf_e_password;
        const char *detail = e ? qp.get_error_message_detail(q, e) : NULL;
        pdfin_child_say(out, PDFIN_ST_PARSE, "%s%.300s",
                        pw ? "a password-protected PDF: " : "not a readable PDF: ",
                        detail && *detail ? detail : "damaged");
    }
    struct pdfin_walk w = {.q = q};
    qpdf_oh root = qp.get_root(q);
    qpdf_oh af = qp.oh_get_key(q, root, "/AF");
    if (qp.oh_is_array(q, af)) {
        int n = qp.oh_get_array_n_items(q, af);
        for (int i = 0; i < n && w.visited++ < PDFIN_MAX_TREE_NODES; i++)
            pdfin_filespec(&w, qp.oh_get_array_item(q, af, i));
    }
    qpdf_oh names = qp.oh_get_key(q, root, "/Names");
    pdfin_tree(&w, qp.oh_get_key(q, names, "/EmbeddedFiles"), 0);
    if (qp.has_error(q)) {
        qpdf_error e = qp.get_error(q);
        const char *detail = e ? qp.get_error_message_detail(q, e) : NULL;
        pdfin_child_say(out, PDFIN_ST_PARSE, "not a readable PDF: %.300s",
                        detail && *detail ? detail : "damaged");
    }
    if (!w.best.rank)
        pdfin_child_say(out, PDFIN_ST_NONE, "%s", PDFIN_NO_DATA);

    bool flate = pdfin_check_filter(out, q, w.best.stream, w.best.name);
    unsigned char *raw = NULL;
    size_t raw_len = 0;
    if (qp.oh_get_stream_data(q, w.best.stream, qpdf_dl_none, NULL, &raw, &raw_len) & QPDF_ERRORS)
        pdfin_child_say(out, PDFIN_ST_PARSE, "embedded file %.100s cannot be read", w.best.name);
    struct apbot_buf xml;
    apbot_buf_init(&xml, PDFIN_MAX_XML);
    if (flate) {
        pdfin_inflate(out, raw, raw_len, &xml, w.best.name);
    } else if (apbot_buf_add(&xml, raw, raw_len)) {
        pdfin_child_say(out, PDFIN_ST_LIMIT,
                        "embedded file %.100s is larger than %u MiB: apbot reads invoice XML up "
                        "to that size",
                        w.best.name, PDFIN_MAX_XML >> 20);
    }
    char head[1 + PDFIN_NAME_MAX + 8];
    memset(head, 0, sizeof(head));
    head[0] = (char)PDFIN_ST_OK;
    memcpy(head + 1, w.best.name, strlen(w.best.name));
    uint64_t len = xml.len;
    memcpy(head + 1 + PDFIN_NAME_MAX, &len, sizeof(len));
    if (pdfin_write_all(out, head, sizeof(head)))
        (void)pdfin_write_all(out, apbot_buf_str(&xml), xml.len);
    _exit(0);
}

/* ---- the parent --------------------------------------------------------------------------- */

static int64_t pdfin_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Extracts the embedded invoice XML from the PDF open on fd (a regular file, at most
 * PDFIN_MAX_BYTES). The PDF is read by libqpdf in a child process limited in memory
 * (PDFIN_MAX_MEMORY more than this process, where the platform allows it) and in time
 * (PDFIN_MAX_SECONDS), so a hostile PDF costs at most that and cannot crash or hang the caller.
 * On success *ret_xml (malloc'd, the caller frees; NUL-terminated) holds *ret_len bytes and
 * ret_name the embedded file's name. Returns APBOT_E_NOTFOUND (no invoice data: refuse with
 * PDFIN_NO_DATA), APBOT_E_PARSE (damaged or password-protected PDF, unsupported filter),
 * APBOT_E_LIMIT (a bound passed) or APBOT_E_IO, with "name: reason" in err.
 */
static int pdfin_extract(int fd, const char *name, char **ret_xml, size_t *ret_len,
                         char ret_name[PDFIN_NAME_MAX], char *err, size_t errlen)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return apbot_fail(err, errlen, APBOT_E_IO, "%s: cannot stat: %s", name, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return apbot_fail(err, errlen, APBOT_E_IO, "%s: not a regular file", name);
    if ((unsigned long long)st.st_size > PDFIN_MAX_BYTES)
        return apbot_fail(err, errlen, APBOT_E_LIMIT,
                          "%s: larger than %u MiB: apbot reads PDF invoices up to that size", name,
                          PDFIN_MAX_BYTES >> 20);
    int p[2];
    if (pipe(p) != 0)
        return apbot_fail(err, errlen, APBOT_E_IO, "%s: pipe: %s", name, strerror(errno));
    (void)fcntl(p[0], F_SETFD, FD_CLOEXEC);
    (void)fcntl(p[1], F_SETFD, FD_CLOEXEC);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        return apbot_fail(err, errlen, APBOT_E_IO, "%s: fork: %s", name, strerror(e));
    }
    if (pid == 0) {
        close(p[0]);
        pdfin_child(fd, p[1]);
        _exit(0);
    }
    close(p[1]);

    struct apbot_buf got;
    apbot_buf_init(&got, 1 + PDFIN_NAME_MAX + 8 + (size_t)PDFIN_MAX_XML);
    int rc = APBOT_OK;
    bool killed = false;
    int64_t deadline = pdfin_now_ms() + (int64_t)PDFIN_MAX_SECONDS * 1000;
    char chunk[65536];
    for (;;) {
        int64_t left = deadline - pdfin_now_ms();
        if (left <= 0) {
            kill(pid, SIGKILL);
            killed = true;
            rc = apbot_fail(err, errlen, APBOT_E_LIMIT,
                            "%s: reading the PDF took longer than %d s: refused", name,
                            PDFIN_MAX_SECONDS);
            break;
        }
        struct pollfd pfd = {.fd = p[0], .events = POLLIN};
        int pr = poll(&pfd, 1, (int)(left > 1000 ? 1000 : left));
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            continue;
        ssize_t r = read(p[0], chunk, sizeof(chunk));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (apbot_buf_add(&got, chunk, (size_t)r)) {
            kill(pid, SIGKILL);
            killed = true;
            rc = apbot_fail(err, errlen, APBOT_E_LIMIT, "%s: embedded XML larger than %u MiB", name,
                            PDFIN_MAX_XML >> 20);
            break;
        }
    }
    close(p[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (rc)
        goto out;
    (void)killed;
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        rc = apbot_fail(err, errlen, sig == SIGXCPU ? APBOT_E_LIMIT : APBOT_E_PARSE,
                        "%s: the PDF could not be read within the bounds (%d s, %u MiB): the "
                        "reading process stopped on signal %d",
                        name, PDFIN_MAX_SECONDS, PDFIN_MAX_MEMORY >> 20, sig);
        goto out;
    }
    const char *d = apbot_buf_str(&got);
    if (got.len == 0) {
        rc = apbot_fail(err, errlen, APBOT_E_PARSE,
                        "%s: the PDF could not be read within the bounds (%d s, %u MiB)", name,
                        PDFIN_MAX_SECONDS, PDFIN_MAX_MEMORY >> 20);
        goto out;
    }
    switch (d[0]) {
    case PDFIN_ST_OK: {
        uint64_t len = 0;
        if (got.len < 1 + PDFIN_NAME_MAX + 8) {
            rc = apbot_fail(err, errlen, APBOT_E_PARSE, "%s: the PDF reader stopped early", name);
            break;
        }
        memcpy(&len, d + 1 + PDFIN_NAME_MAX, sizeof(len));
        if (len != got.len - (1 + PDFIN_NAME_MAX + 8)) {
            rc = apbot_fail(err, errlen, APBOT_E_PARSE, "%s: the PDF reader stopped early", name);
            break;
        }
        memcpy(ret_name, d + 1, PDFIN_NAME_MAX);
        ret_name[PDFIN_NAME_MAX - 1] = '\0';
        /* Take the buffer over and move the XML to its front: no second copy of up to 16 MiB. */
        char *all = apbot_buf_steal(&got, NULL);
        memmove(all, all + 1 + PDFIN_NAME_MAX + 8, (size_t)len);
        all[len] = '\0';
        *ret_xml = all;
        *ret_len = (size_t)len;
        break;
    }
    case PDFIN_ST_NONE:
        rc = apbot_fail(err, errlen, APBOT_E_NOTFOUND, "%s: %s", name, d + 1);
        break;
    case PDFIN_ST_LIMIT:
        rc = apbot_fail(err, errlen, APBOT_E_LIMIT, "%s: %s", name, d + 1);
        break;
    default:
        rc = apbot_fail(err, errlen, APBOT_E_PARSE, "%s: %s", name, d + 1);
        break;
    }
out:
    apbot_buf_done(&got);
    return rc;
}

int pdfin_read_fd(int fd, const char *name, const struct vendor_map *vendors,
                  const struct invoice_sink *sink, char *err, size_t errlen)
{
    char *xml = NULL;
    size_t len = 0;
    char att[PDFIN_NAME_MAX];
    int rc = pdfin_extract(fd, name, &xml, &len, att, err, errlen);
    if (rc == APBOT_E_NOTFOUND) {
        sink->refuse(sink->ctx, name, PDFIN_NO_DATA);
        return APBOT_OK;
    }
    if (rc)
        return rc;
    size_t wlen = strlen(name) + 1 + strlen(att) + 1;
    char *where = apbot_xmalloc(wlen);
    snprintf(where, wlen, "%s#%s", name, att);
    rc = ciiin_read_mem(where, xml, len, vendors, sink, err, errlen);
    free(where);
    free(xml);
    return rc;
}
