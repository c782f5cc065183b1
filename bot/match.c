/*
 * match.c - PCRE2 patterns for outcome rules and page markers, and HTTP status specs.
 *
 * Patterns are compiled once (UTF, invalid UTF in subjects tolerated, since ERP pages are
 * untrusted bytes) and matched with a fresh match context per call whose match, depth and
 * heap limits bound the work a pathological pattern can do on a large page: hitting a limit
 * counts as "no match", which makes the caller fall through to `unknown`, never to success.
 * A match result owns copies of the named groups, so it outlives the subject. What a match
 * means is the flow's and the runner's business.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "apbot/match.h"

#include <pcre2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/mem.h"

/* Bounds on one match. A backtracking blow-up hits MATCH_LIMIT long before it costs a
 * second; real outcome patterns on a few hundred KiB of HTML stay far below it. */
#define MATCH_LIMIT 1000000u
#define MATCH_DEPTH_LIMIT 10000u
#define MATCH_HEAP_LIMIT_KIB 20480u

struct match_re {
    pcre2_code *code;
    char *pattern;
};

struct match_group {
    char *name;
    char *value; /* NULL when the group did not participate */
};

struct match_result {
    struct match_group *groups;
    size_t n;
};

int match_compile(const char *pattern, struct match_re **ret, char *err, size_t errlen)
{
    int errcode = 0;
    PCRE2_SIZE erroff = 0;
    pcre2_code *code;
    struct match_re *re;

    if (!pattern || !ret)
        return apbot_fail(err, errlen, APBOT_E_INVAL, "no pattern");
    code = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                         PCRE2_UTF | PCRE2_MATCH_INVALID_UTF, &errcode, &erroff, NULL);
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
    *ret = re;
    return APBOT_OK;
}

void match_free(struct match_re *re)
{
    if (!re)
        return;
    pcre2_code_free(re->code);
    free(re->pattern);
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

bool match_exec(const struct match_re *re, const char *subject, size_t len,
                struct match_result **ret)
{
    pcre2_match_context *mc;
    pcre2_match_data *md;
    int rc;
    bool ok = false;

    if (!re || (!subject && len))
        return false;
    if (!subject)
        subject = "";
    mc = pcre2_match_context_create(NULL);
    md = pcre2_match_data_create_from_pattern(re->code, NULL);
    if (!mc || !md)
        abort();
    pcre2_set_match_limit(mc, MATCH_LIMIT);
    pcre2_set_depth_limit(mc, MATCH_DEPTH_LIMIT);
    pcre2_set_heap_limit(mc, MATCH_HEAP_LIMIT_KIB);
    rc = pcre2_match(re->code, (PCRE2_SPTR)subject, len, 0, 0, md, mc);
    /* rc == 0 only when the ovector is too small, which _from_pattern rules out. */
    if (rc >= 0) {
        ok = true;
        if (ret)
            *ret = match_collect(re, subject, md);
    }
    pcre2_match_data_free(md);
    pcre2_match_context_free(mc);
    return ok;
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
            char digits[4];
            snprintf(digits, sizeof(digits), "%03ld", status);
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
