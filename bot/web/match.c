/*
 * match.c - PCRE2 patterns for outcome rules and page markers, run under a per-page work
 * budget, and HTTP status specs.
 *
 * Patterns are compiled once (UTF, invalid UTF in subjects tolerated, since ERP pages are
 * untrusted bytes) with PCRE2_AUTO_CALLOUT, and JIT-compiled when the platform allows. The
 * automatic callouts run match_on_step() before every pattern item, at every start position
 * and on every backtrack, and that is where the work is counted against the page's budget
 * (match.h) and the cancel flag is polled.
 *
 * Why callouts and not PCRE2's limits or a window (measured on 2 MB pages, 2 shared cores):
 *  - the interpreter's match limit counts per start position: `(?:a|.*.*.*[XY])` on a 2 MB
 *    page of 100-byte lines never reaches it at any one position and ran > 20 s (105 s seen);
 *  - the JIT's match limit is one count per call, but it does not count the backtracking of
 *    `.*` inside one group: the same pattern with a limit of 10^7 ran 0.3-2 s depending on the
 *    line length, so it bounds nothing one can state;
 *  - matching a bounded window changes what rules mean (a banner past the window is missed);
 *  - counted callouts are deterministic (with one PCRE2 build, the same page and rules always
 *    stop at the same step) and cover every backtrack. With JIT they cost less than the old
 *    interpreter did without them. Measured side by side on the 2 shared cores (ranges over
 *    runs, load 2-4): 8 ordinary acme/classic rules take 85-210 us on a 10 KB page (before:
 *    220-600 us) and 19-44 ms on a 2 MB page (before: 42-99 ms), spending 0.2-0.4 steps per
 *    byte each; the runaway pattern stops after its 68 M steps in 0.28-0.78 s on 2 MB
 *    (before: > 20 s, 105 s seen). `APBOT_MATCH_BENCH=1 tests/test_match` prints them.
 *
 * A step costs 1, plus how far the subject position moved since the previous step of the
 * same attempt (a greedy item that scans far is charged for the scan), plus the minimum of a
 * counted repeat about to run (`[^<]{5000}` may scan 5000 bytes and fail before the next
 * step), plus, for a backreference, the longest capture so far times its repeat minimum.
 * What stays uncharged is the skip from one start position to the next (PCRE2's start-up
 * search, linear in the page per call) and a failing literal or class of one character.
 *
 * Most rules do not match most pages, and a rule that cannot match still paid a callout per
 * item at every start position (~7% of the bot's CPU). So match_compile also derives a needle
 * set from the pattern text: one literal string per top-level alternative, the alternative's
 * leading run of literal characters, less the last one when `?`, `*` or `{` follows it (that
 * repeat may take it zero times). Every match is a match of one top-level alternative, which
 * consumes its run first and as written (no option can change a literal: a pattern with inline
 * options or (*...) gets no set), so on a page holding none of the needles there is no match,
 * and match_run answers MATCH_NONE without running PCRE2 or spending budget (a budget already
 * spent or cancelled still gives MATCH_ABORTED first). Literals are valid UTF-8 and PCRE2
 * matches them only on the same bytes, so memmem over the raw page is exact enough (invalid
 * UTF-8 near them can only make PCRE2 find less). Whatever the scanner does not model for
 * certain (\Q..\E, comments, verbs, inline options, branch reset, unclear classes or braces,
 * an alternative that does not start with a literal, more than MATCH_NEEDLES_MAX alternatives)
 * leaves the pattern without a set, to run as before: the check may miss a shortcut, never a
 * match. The search is linear per needle and not charged. On the bench's acme page (5 of its 8
 * rules have no needle there) the 8 rules went from 14,162 to 3,973 steps on 10 KB (64-98 us
 * to 29-43 us) and from 3.08 M to 0.76 M steps on 2 MB (13.2-14.6 ms to 5.7-8.1 ms), same 2
 * shared cores, load 2-4.
 *
 * A match result owns copies of the named groups, so it outlives the subject. What a match
 * means is the flow's and the caller's business.
 */
#define _GNU_SOURCE /* memmem */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "web/match.h"

#include <pcre2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/mem.h"

/* Backstops behind the budget. The match limit never decides for an ordinary rule (the
 * budget runs out long before). The heap limit bounds the interpreter's backtracking memory;
 * the depth limit is set high enough that the heap limit is the one that counts (a repeated
 * group over a 50 KB text needs ~10^5 frames with callouts). The JIT's machine stack is
 * PCRE2's default 32 KiB (enough for ~2,000 iterations of a repeated group): a pattern that
 * needs more is run again by the interpreter on what is left of the budget. */
#define MATCH_LIMIT 200000000u
#define MATCH_DEPTH_LIMIT 1000000u
#define MATCH_HEAP_LIMIT_KIB 20480u
#define MATCH_REPEAT_MAX 65535u /* PCRE2's largest repeat count */
#define MATCH_NEEDLES_MAX 16    /* top-level alternatives a needle set covers */

struct match_re {
    pcre2_code *code;
    char *pattern;
    char **needles; /* one per top-level alternative; NULL: the pattern always runs */
    size_t n_needles;
    bool jit; /* JIT-compiled: pcre2_match uses it unless told PCRE2_NO_JIT */
};

struct match_group {
    char *name;
    char *value; /* NULL when the group did not participate */
};

struct match_result {
    struct match_group *groups;
    size_t n;
};

/* One pattern run: the callout's view of the budget. */
struct match_walk {
    struct match_budget *b;
    const char *pattern;
    size_t start; /* start_match of the attempt under way; SIZE_MAX before the first step */
    size_t pos;   /* subject position at the previous step of that attempt */
};

const char *match_outcome_name(enum match_outcome o)
{
    switch (o) {
    case MATCH_NONE:
        return "none";
    case MATCH_FOUND:
        return "found";
    case MATCH_ABORTED:
        return "aborted";
    }
    return "aborted";
}

uint64_t match_budget_for(size_t len)
{
    uint64_t max_len = (MATCH_BUDGET_MAX - MATCH_BUDGET_BASE) / MATCH_BUDGET_PER_BYTE;
    if ((uint64_t)len >= max_len)
        return MATCH_BUDGET_MAX;
    return MATCH_BUDGET_BASE + (uint64_t)len * MATCH_BUDGET_PER_BYTE;
}

void match_budget_init(struct match_budget *b, uint64_t steps, const atomic_int *cancel)
{
    memset(b, 0, sizeof(*b));
    b->left = steps;
    b->cancel = cancel;
}

const char *match_budget_reason(const struct match_budget *b)
{
    if (!b)
        return NULL;
    if (b->cancelled)
        return "cancelled";
    if (b->exhausted)
        return "work budget exhausted";
    if (b->limited)
        return "PCRE2 limit";
    return NULL;
}

/* ---- the needle set (file comment) ------------------------------------------------------ */

static bool match_ascii_alnum(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

/* True when the pattern uses syntax whose effect on literals or on the structure the scanner
 * does not model: verbs and leading options ((*UTF), (*CR), (*ACCEPT)), \Q..\E, and any "(?"
 * that is not a plain group, assertion, named group, reference or call: (?#...), (?i), (?x),
 * (?s:...), (?-i), (?^), (?|...), (?C...), (?R). Looked for in the raw bytes, so an occurrence
 * that is escaped or inside a class gives up too. */
static bool match_unmodelled(const char *p)
{
    if (strstr(p, "(*") || strstr(p, "\\Q") || strstr(p, "\\E"))
        return true;
    for (const char *q = strstr(p, "(?"); q; q = strstr(q + 2, "(?")) {
        unsigned char c = (unsigned char)q[2];
        if (c == 'P' && (q[3] == '<' || q[3] == '=' || q[3] == '>'))
            continue; /* (?P<name>, (?P=name), (?P>name) */
        if (c == '\0' || !(strchr(":=!<>'(&+", c) || (c >= '0' && c <= '9')))
            return true;
    }
    return false;
}

/* Bytes of one escape at p (p[0] == '\\'), as one unit; 0 when the scanner cannot be sure.
 * \c takes the character after it too (\c| is one character, not an alternation). The braces
 * of \x{..}, \o{..}, \p{..}, \P{..}, \N{..}, \g{..} and \k{..} are taken with it unless they
 * hold a byte that means structure: then whether PCRE2 reads them as the escape's or as
 * literals (\N{2} is a repeat) would decide where alternatives end, and the scanner gives up. */
static size_t match_escape_len(const char *p)
{
    if (p[1] == '\0')
        return 0;
    if (p[1] == 'c')
        return p[2] ? 3 : 0;
    if (p[2] == '{' && strchr("xopPNgk", p[1])) {
        size_t n = 3;
        for (; p[n] != '}'; n++)
            if (p[n] == '\0' || strchr("|()[]{\\", p[n]))
                return 0;
        return n + 1;
    }
    return 2;
}

/* Bytes of a POSIX name in a class at p ("[:alpha:]", "[:^digit:]"); 0 for anything else that
 * starts "[:", "[." or "[=" (PCRE2's own reading of those is subtler than worth following). */
static size_t match_posix_len(const char *p)
{
    size_t n = 2, name;

    if (p[1] != ':')
        return 0;
    if (p[n] == '^')
        n++;
    for (name = n; (p[n] >= 'a' && p[n] <= 'z') || (p[n] >= 'A' && p[n] <= 'Z'); n++)
        ;
    if (n == name || p[n] != ':' || p[n + 1] != ']')
        return 0;
    return n + 2;
}

/* Bytes of the class at p (p[0] == '['), with its closing ']'; 0 when unterminated or unclear.
 * A ']' first (after an optional '^') is a literal. */
static size_t match_class_len(const char *p)
{
    size_t n = 1, unit;

    if (p[n] == '^')
        n++;
    if (p[n] == ']')
        n++;
    for (; p[n] != ']'; n += unit) {
        if (p[n] == '\0')
            return 0;
        if (p[n] == '\\')
            unit = match_escape_len(p + n);
        else if (p[n] == '[' && (p[n + 1] == ':' || p[n + 1] == '.' || p[n + 1] == '='))
            unit = match_posix_len(p + n);
        else
            unit = 1;
        if (unit == 0)
            return 0;
    }
    return n + 1;
}

/* Splits p at the '|' of depth 0 (not escaped, not in a class): alternative i is
 * p[from[i]..to[i]). Returns their count, or 0 when the structure is unclear (unbalanced,
 * an unclear escape or class) or there are more than MATCH_NEEDLES_MAX. */
static size_t match_split(const char *p, size_t *from, size_t *to)
{
    size_t n = 0, i = 0, begin = 0, unit;
    long depth = 0;

    for (;; i += unit) {
        unit = 1;
        if (p[i] == '\0' || (p[i] == '|' && depth == 0)) {
            if (n == MATCH_NEEDLES_MAX)
                return 0;
            from[n] = begin;
            to[n++] = i;
            if (p[i] == '\0')
                break;
            begin = i + 1;
        } else if (p[i] == '\\') {
            unit = match_escape_len(p + i);
        } else if (p[i] == '[') {
            unit = match_class_len(p + i);
        } else if (p[i] == '(') {
            depth++;
        } else if (p[i] == ')' && --depth < 0) {
            return 0;
        }
        if (unit == 0)
            return 0;
    }
    return depth == 0 ? n : 0;
}

/* The leading run of literal characters of the alternative p[0..n), as a heap string, or NULL
 * when it is empty. A literal is a byte that is not one of \^$.[]|()?*+{} or an escaped ASCII
 * non-alphanumeric (\. is '.'); a multibyte UTF-8 character is its bytes. When `?`, `*` or `{`
 * follows the run, the repeat is the last character's, which may then be absent: it is not
 * part of the needle. `+` needs it once. */
static char *match_literal_run(const char *p, size_t n)
{
    char *run = apbot_xmalloc(n + 1);
    size_t len = 0, last = 0, i = 0; /* last: where the last character starts in run */

    while (i < n) {
        unsigned char c = (unsigned char)p[i];
        if (c == '\\') {
            unsigned char e = (unsigned char)p[i + 1]; /* an escape lies within its alternative */
            if (e == '\0' || e >= 0x80 || match_ascii_alnum(e))
                break;
            last = len;
            run[len++] = (char)e;
            i += 2;
            continue;
        }
        if (strchr("^$.[]|()?*+{}", c))
            break; /* c != '\0' as i < n */
        if ((c & 0xc0) != 0x80)
            last = len;
        run[len++] = (char)c;
        i++;
    }
    if (i < n && (p[i] == '?' || p[i] == '*' || p[i] == '{'))
        len = last;
    if (len == 0) {
        free(run);
        return NULL;
    }
    run[len] = '\0';
    return run;
}

/* Sets re's needle set, or leaves it empty when it cannot be derived for certain. */
static void match_derive_needles(struct match_re *re)
{
    size_t from[MATCH_NEEDLES_MAX], to[MATCH_NEEDLES_MAX], n;
    char *needles[MATCH_NEEDLES_MAX];

    if (match_unmodelled(re->pattern))
        return;
    n = match_split(re->pattern, from, to);
    for (size_t i = 0; i < n; i++) {
        needles[i] = match_literal_run(re->pattern + from[i], to[i] - from[i]);
        if (!needles[i]) { /* this alternative may match without a literal: no set at all */
            for (size_t j = 0; j < i; j++)
                free(needles[j]);
            return;
        }
    }
    if (n == 0)
        return;
    re->needles = apbot_xmalloc(n * sizeof(*re->needles));
    memcpy(re->needles, needles, n * sizeof(*needles));
    re->n_needles = n;
}

size_t match_needles(const struct match_re *re, const char *const **ret)
{
    if (ret)
        *ret = re ? (const char *const *)re->needles : NULL;
    return re ? re->n_needles : 0;
}

/* True when subject[0..len) holds one of re's needles (NUL bytes in it are page bytes). */
static bool match_has_needle(const struct match_re *re, const char *subject, size_t len)
{
    for (size_t i = 0; i < re->n_needles; i++)
        if (memmem(subject, len, re->needles[i], strlen(re->needles[i])))
            return true;
    return false;
}

bool match_excludes(const struct match_re *re, const char *subject, size_t len, char fill)
{
    if (!re || re->n_needles == 0 || (!subject && len))
        return false;
    for (size_t i = 0; i < re->n_needles; i++) {
        /* the needle's longest run of bytes other than fill */
        const char *n = re->needles[i], *run = n;
        size_t run_len = 0;
        for (size_t at = 0, from = 0;; at++) {
            if (n[at] == fill || n[at] == '\0') {
                if (at - from > run_len) {
                    run = n + from;
                    run_len = at - from;
                }
                if (n[at] == '\0')
                    break;
                from = at + 1;
            }
        }
        if (run_len == 0 || (len > 0 && memmem(subject, len, run, run_len)))
            return false;
    }
    return true;
}

int match_compile(const char *pattern, struct match_re **ret, char *err, size_t errlen)
{
    int errcode = 0;
    PCRE2_SIZE erroff = 0;
    pcre2_code *code;
    struct match_re *re;

    if (!pattern || !ret)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "no pattern");
    code = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                         PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | PCRE2_AUTO_CALLOUT, &errcode,
                         &erroff, NULL);
    if (!code) {
        PCRE2_UCHAR msg[256];
        if (pcre2_get_error_message(errcode, msg, sizeof(msg)) < 0)
            snprintf((char *)msg, sizeof(msg), "PCRE2 error %d", errcode);
        return apbot_fail(err, errlen, APBOT_E_PARSE, "%s at offset %zu", (const char *)msg,
                          (size_t)erroff);
    }
    re = apbot_xmalloc(sizeof(*re));
    re->code = code;
    re->pattern = apbot_xstrndup(pattern, strlen(pattern));
    re->needles = NULL;
    re->n_needles = 0;
    match_derive_needles(re); /* on a pattern PCRE2 accepted: valid UTF-8, balanced */
    /* No JIT (not built in, no executable memory): the interpreter runs the same callouts. */
    re->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
    *ret = re;
    return APBOT_OK;
}

void match_free(struct match_re *re)
{
    if (!re)
        return;
    pcre2_code_free(re->code);
    free(re->pattern);
    for (size_t i = 0; i < re->n_needles; i++)
        free(re->needles[i]);
    free(re->needles);
    free(re);
}

const char *match_pattern(const struct match_re *re)
{
    return re ? re->pattern : NULL;
}

/* Copies every named group of a successful match into a result. */
static struct match_result *match_collect(const struct match_re *re, const char *subject,
                                          pcre2_match_data *md)
{
    struct match_result *m = apbot_xmalloc(sizeof(*m));
    uint32_t count = 0, entry = 0;
    PCRE2_SPTR table = NULL;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    uint32_t pairs = pcre2_get_ovector_count(md);

    m->groups = NULL;
    m->n = 0;
    if (pcre2_pattern_info(re->code, PCRE2_INFO_NAMECOUNT, &count) != 0 || count == 0)
        return m;
    if (pcre2_pattern_info(re->code, PCRE2_INFO_NAMEENTRYSIZE, &entry) != 0 ||
        pcre2_pattern_info(re->code, PCRE2_INFO_NAMETABLE, &table) != 0)
        return m;
    m->groups = apbot_xmalloc(count * sizeof(*m->groups));
    for (uint32_t i = 0; i < count; i++) {
        PCRE2_SPTR e = table + (size_t)i * entry;
        uint32_t num = ((uint32_t)e[0] << 8) | e[1];
        const char *name = (const char *)(e + 2);
        struct match_group *g;
        bool dup = false;

        /* With (?J) one name may occur twice: keep the first group that is set. */
        for (size_t j = 0; j < m->n; j++) {
            if (strcmp(m->groups[j].name, name) == 0) {
                dup = true;
                if (!m->groups[j].value && num < pairs && ov[2 * num] != PCRE2_UNSET)
                    m->groups[j].value =
                        apbot_xstrndup(subject + ov[2 * num], ov[2 * num + 1] - ov[2 * num]);
            }
        }
        if (dup)
            continue;
        g = &m->groups[m->n++];
        g->name = apbot_xstrndup(name, strlen(name));
        g->value = NULL;
        if (num < pairs && ov[2 * num] != PCRE2_UNSET && ov[2 * num + 1] >= ov[2 * num])
            g->value = apbot_xstrndup(subject + ov[2 * num], ov[2 * num + 1] - ov[2 * num]);
    }
    return m;
}

/*
 * The minimum count of a counted repeat ending the pattern item item[0..n): "x{5}", "\d{4,}",
 * "[^<]{2,9}+", "){3}?"; 0 when the item has none. Braces of \x{..}, \o{..}, \p{..}, \P{..},
 * \g{..}, \k{..} and \N{..} are not repeats.
 */
static uint64_t match_repeat_min(const char *item, size_t n)
{
    if (n > 0 && (item[n - 1] == '+' || item[n - 1] == '?'))
        n--;
    if (n < 3 || item[n - 1] != '}')
        return 0;
    size_t open = n - 1;
    while (open > 0 && item[open - 1] != '{')
        open--;
    if (open == 0)
        return 0;
    open--; /* item[open] == '{' */
    if (open >= 2 && item[open - 2] == '\\' && strchr("xopPgkN", item[open - 1]))
        return 0;
    uint64_t min = 0;
    size_t i = open + 1, digits = 0;
    for (; i < n - 1 && item[i] >= '0' && item[i] <= '9'; i++, digits++)
        if (min <= MATCH_REPEAT_MAX)
            min = min * 10 + (uint64_t)(item[i] - '0');
    if (digits == 0 || (item[i] != ',' && item[i] != '}'))
        return 0;
    return min > MATCH_REPEAT_MAX ? MATCH_REPEAT_MAX : min;
}

/* True when the item is a backreference (\1, \g.., \k.., (?P=name)); a few subroutine calls
 * written \g<..> are counted too, which only costs them more. */
static bool match_is_backref(const char *item, size_t n)
{
    if (n >= 2 && item[0] == '\\')
        return (item[1] >= '1' && item[1] <= '9') || item[1] == 'g' || item[1] == 'k';
    return n >= 4 && memcmp(item, "(?P=", 4) == 0;
}

/* Runs before every pattern item: charges the step, polls the cancel flag. A negative return
 * makes pcre2_match stop with that value. */
static int match_on_step(pcre2_callout_block *cb, void *data)
{
    struct match_walk *w = data;
    struct match_budget *b = w->b;
    uint64_t cost = 1;

    if (b->cancel && atomic_load_explicit(b->cancel, memory_order_relaxed)) {
        b->cancelled = true;
        return PCRE2_ERROR_CALLOUT;
    }
    if (cb->start_match != w->start) { /* a new attempt: the skip to it is PCRE2's search */
        w->start = cb->start_match;
        w->pos = cb->current_position;
    }
    cost += cb->current_position >= w->pos ? cb->current_position - w->pos
                                           : w->pos - cb->current_position;
    w->pos = cb->current_position;
    if (cb->next_item_length > 0) {
        const char *item = w->pattern + cb->pattern_position;
        size_t n = cb->next_item_length;
        uint64_t min = match_repeat_min(item, n);
        if (match_is_backref(item, n)) {
            PCRE2_SIZE longest = 0;
            for (uint32_t g = 1; g < cb->capture_top; g++) {
                PCRE2_SIZE s = cb->offset_vector[2 * g], e = cb->offset_vector[2 * g + 1];
                if (s != PCRE2_UNSET && e != PCRE2_UNSET && e > s && e - s > longest)
                    longest = e - s;
            }
            cost += (uint64_t)longest * (min ? min : 1);
        } else {
            cost += min;
        }
    }
    if (cost > b->left) {
        b->used += b->left;
        b->left = 0;
        b->exhausted = true;
        return PCRE2_ERROR_CALLOUT;
    }
    b->left -= cost;
    b->used += cost;
    return 0;
}

enum match_outcome match_run(const struct match_re *re, const char *subject, size_t len,
                             struct match_budget *b, struct match_result **ret)
{
    struct match_walk w;
    pcre2_match_context *mc;
    pcre2_match_data *md;
    enum match_outcome out = MATCH_ABORTED;
    int rc;

    if (!re || !b || (!subject && len))
        return MATCH_ABORTED;
    if (!subject)
        subject = "";
    if (b->cancel && atomic_load_explicit(b->cancel, memory_order_relaxed))
        b->cancelled = true;
    if (b->left == 0 && !b->cancelled)
        b->exhausted = true;
    if (b->cancelled || b->exhausted || b->limited)
        return MATCH_ABORTED;
    if (re->n_needles > 0 && !match_has_needle(re, subject, len))
        return MATCH_NONE; /* no literal every match needs is on the page (file comment) */

    mc = pcre2_match_context_create(NULL);
    md = pcre2_match_data_create_from_pattern(re->code, NULL);
    if (!mc || !md)
        abort(); /* PCRE2 fails here only on out-of-memory (mem.h's policy) */
    pcre2_set_match_limit(mc, MATCH_LIMIT);
    pcre2_set_depth_limit(mc, MATCH_DEPTH_LIMIT);
    pcre2_set_heap_limit(mc, MATCH_HEAP_LIMIT_KIB);
    pcre2_set_callout(mc, match_on_step, &w);
    w.b = b;
    w.pattern = re->pattern;
    w.start = SIZE_MAX;
    w.pos = 0;
    rc = pcre2_match(re->code, (PCRE2_SPTR)subject, len, 0, 0, md, mc);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && re->jit) {
        /* The JIT's machine stack is small and fixed; the interpreter keeps its frames on the
         * heap (bounded above). Same pattern, same callouts, what is left of the budget. */
        w.start = SIZE_MAX;
        w.pos = 0;
        rc = pcre2_match(re->code, (PCRE2_SPTR)subject, len, 0, PCRE2_NO_JIT, md, mc);
    }
    /* rc == 0 only when the ovector is too small, which _from_pattern rules out. */
    if (rc >= 0) {
        out = MATCH_FOUND;
        if (ret)
            *ret = match_collect(re, subject, md);
    } else if (rc == PCRE2_ERROR_NOMATCH) {
        out = MATCH_NONE;
    } else {
        /* PCRE2_ERROR_CALLOUT: match_on_step set exhausted or cancelled. Anything else
         * (match, depth, heap or JIT stack limit, no memory) stops this page as well: a
         * later rule must not decide on a page an earlier one could not read. */
        if (!b->exhausted && !b->cancelled)
            b->limited = true;
        out = MATCH_ABORTED;
    }
    pcre2_match_data_free(md);
    pcre2_match_context_free(mc);
    return out;
}

bool match_exec(const struct match_re *re, const char *subject, size_t len,
                struct match_result **ret)
{
    struct match_budget b;
    match_budget_init(&b, match_budget_for(len), NULL);
    return match_run(re, subject, len, &b, ret) == MATCH_FOUND;
}

char *match_group(const struct match_result *m, const char *name)
{
    if (!m || !name)
        return NULL;
    for (size_t i = 0; i < m->n; i++) {
        if (strcmp(m->groups[i].name, name) == 0) {
            const char *v = m->groups[i].value;
            return v ? apbot_xstrndup(v, strlen(v)) : NULL;
        }
    }
    return NULL;
}

struct match_result *match_result_join(struct match_result *a, struct match_result *b)
{
    if (!b)
        return a;
    if (!a)
        return b;
    for (size_t i = 0; i < b->n; i++) {
        bool set = false;
        for (size_t k = 0; k < a->n && !set; k++)
            set = a->groups[k].value && strcmp(a->groups[k].name, b->groups[i].name) == 0;
        if (set || !b->groups[i].value)
            continue;
        a->groups = apbot_xrealloc(a->groups, (a->n + 1) * sizeof(*a->groups));
        a->groups[a->n].name = b->groups[i].name;
        a->groups[a->n].value = b->groups[i].value;
        a->n++;
        b->groups[i].name = NULL;
        b->groups[i].value = NULL;
    }
    for (size_t i = 0; i < b->n; i++) {
        free(b->groups[i].name);
        free(b->groups[i].value);
    }
    free(b->groups);
    free(b);
    /* a group a left unset and b set: a's unset one comes first, so say b's */
    for (size_t i = 0; i < a->n; i++) {
        if (a->groups[i].value)
            continue;
        for (size_t k = i + 1; k < a->n; k++)
            if (a->groups[k].value && strcmp(a->groups[k].name, a->groups[i].name) == 0) {
                a->groups[i].value = a->groups[k].value;
                a->groups[k].value = NULL;
                break;
            }
    }
    return a;
}

void match_result_free(struct match_result *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++) {
        free(m->groups[i].name);
        free(m->groups[i].value);
    }
    free(m->groups);
    free(m);
}

/*
 * Status specs: comma-separated items, each three characters: a digit 1-5, then digits, where
 * a trailing run of 'x' stands for any digit ("5xx", "50x", "503"). Spaces around items are
 * allowed. Returns true and walks every item; `status` < 0 only validates.
 */
static bool match_status_walk(const char *spec, long status, bool *ret_hit)
{
    const char *p = spec;
    bool hit = false;

    if (!spec)
        return false;
    for (;;) {
        char item[3];
        size_t n = 0;
        bool wild = false, item_hit = true;

        while (*p == ' ')
            p++;
        while (*p && *p != ',' && *p != ' ') {
            if (n == 3)
                return false;
            item[n++] = *p++;
        }
        while (*p == ' ')
            p++;
        if (n != 3 || item[0] < '1' || item[0] > '5')
            return false;
        for (size_t i = 0; i < 3; i++) {
            if (item[i] == 'x' || item[i] == 'X') {
                if (i == 0)
                    return false;
                wild = true;
            } else if (item[i] >= '0' && item[i] <= '9') {
                if (wild)
                    return false; /* "5x3": a wildcard only at the end */
            } else {
                return false;
            }
        }
        if (status >= 100 && status <= 599) {
            const char digits[3] = {(char)('0' + status / 100), (char)('0' + status / 10 % 10),
                                    (char)('0' + status % 10)};
            for (size_t i = 0; i < 3; i++)
                if (item[i] != 'x' && item[i] != 'X' && item[i] != digits[i])
                    item_hit = false;
        } else {
            item_hit = false;
        }
        hit = hit || item_hit;
        if (*p == '\0')
            break;
        if (*p != ',')
            return false;
        p++;
    }
    *ret_hit = hit;
    return true;
}

bool match_status(const char *spec, long status)
{
    bool hit = false;
    return match_status_walk(spec, status, &hit) && hit;
}

bool match_status_valid(const char *spec)
{
    bool hit = false;
    return match_status_walk(spec, -1, &hit);
}

bool match_has_group(const struct match_re *re, const char *name)
{
    if (!re || !name)
        return false;
    return pcre2_substring_number_from_name(re->code, (PCRE2_SPTR)name) >= 0;
}
