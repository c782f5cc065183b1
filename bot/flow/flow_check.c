/*
 * flow_check.c - the semantic checks of a built flow (what `apbot flow check` adds to the
 * schema): every template uses variables allowed in its place and only after they are
 * captured; XPath is short, shallow and compiles; status specs parse; the post's safety rules
 * hold (exactly one committing step; `completed` and `saved` rules that yield a document
 * number that cannot be empty and never match an empty page; `saved`, `repeat` and
 * `missing="skip"` only where they are safe; follow-up steps that can be re-run on the saved
 * document, with a <finished> lookup to tell a draft from a booking); tables name known
 * columns; the lookup compares what the post writes; the policy numbers agree with each
 * other. Each problem is recorded with its line; nothing here stops at the first one.
 * Building the struct and compiling patterns is flow_load.c's (which calls these checks); the
 * template grammar is flow_template.c's; the problem list is flow.c's.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/xmlerror.h>
#include <libxml/xpath.h>

#include "apbot/buf.h"
#include "apbot/mem.h"
#include "apbot/money.h"
#include "web/http.h"
#include "web/jdoc.h"
#include "web/match.h"
#include "flow-int.h"

/* ---- XPath -------------------------------------------------------------------------------- */

#if LIBXML_VERSION >= 21200
#define FLOW_XMLERR const xmlError
#else
#define FLOW_XMLERR xmlError
#endif

struct flow_xpath_err {
    char msg[256];
};

static void flow_xpath_error(void *ctx, FLOW_XMLERR *e)
{
    struct flow_xpath_err *x = ctx;
    size_t n;

    if (!e || x->msg[0])
        return;
    snprintf(x->msg, sizeof(x->msg), "%s", e->message ? e->message : "invalid expression");
    n = strlen(x->msg);
    while (n && (x->msg[n - 1] == '\n' || x->msg[n - 1] == ' '))
        x->msg[--n] = '\0';
}

/* True when xpath compiles as XPath 1.0; why gets libxml2's reason otherwise. */
static bool flow_xpath_ok(const char *xpath, char *why, size_t whylen)
{
    struct flow_xpath_err x = {{0}};
    xmlStructuredErrorFunc old = xmlStructuredError;
    void *old_ctx = xmlStructuredErrorContext;
    xmlXPathCompExprPtr comp;

    xmlSetStructuredErrorFunc(&x, flow_xpath_error);
    comp = xmlXPathCompile((const xmlChar *)xpath);
    xmlSetStructuredErrorFunc(old_ctx, old);
    if (comp) {
        xmlXPathFreeCompExpr(comp);
        return true;
    }
    snprintf(why, whylen, "%s", x.msg[0] ? x.msg : "invalid expression");
    return false;
}

/* Deepest nesting of parentheses and brackets outside string literals. */
static int flow_xpath_depth(const char *x)
{
    int depth = 0, max = 0;
    char quote = 0;

    for (; *x; x++) {
        if (quote) {
            if (*x == quote)
                quote = 0;
        } else if (*x == '\'' || *x == '"') {
            quote = *x;
        } else if (*x == '(' || *x == '[') {
            if (++depth > max)
                max = depth;
        } else if ((*x == ')' || *x == ']') && depth > 0) {
            depth--;
        }
    }
    return max;
}

/*
 * An XPath must be short and shallow before libxml2 sees it: its compiler recurses once per
 * nesting level, and 50,000 nested parentheses overflow the stack. Then it must compile.
 */
static void flow_check_xpath(struct flow_ctx *c, const char *xpath, long line, const char *what)
{
    char why[256];
    size_t len;

    if (!xpath)
        return;
    len = strlen(xpath);
    if (len > FLOW_XPATH_MAX_LEN)
        flow_problem(c, line, "%s: XPath longer than %d bytes (%zu): refused", what,
                     FLOW_XPATH_MAX_LEN, len);
    else if (flow_xpath_depth(xpath) > FLOW_XPATH_MAX_DEPTH)
        flow_problem(c, line, "%s: XPath nested deeper than %d levels: refused", what,
                     FLOW_XPATH_MAX_DEPTH);
    else if (!flow_xpath_ok(xpath, why, sizeof(why)))
        flow_problem(c, line, "%s: XPath '%s' does not compile: %s", what, xpath, why);
}

/* ---- does a named group always capture something? ------------------------------------------ */

/*
 * A `completed` or `saved` rule's (?<doc>...) group must not be able to capture the empty
 * string, or the run would learn an empty document number. The group's contents are found in
 * the pattern text (a small scanner that knows escapes, \Q..\E, classes and comments), their
 * assertions (lookahead, lookbehind) are removed, and what is left is compiled on its own and
 * asked for PCRE2's minimum match length (PCRE2_INFO_MINLENGTH: "every string that does match
 * is at least that long"). Assertions must go first because PCRE2 counts what a lookahead
 * needs to see: (?=\d) alone reports 1 yet captures nothing. Removing an assertion only lets
 * more strings match, so the length left is a lower bound of what the group captures; 0 means
 * it may capture "" (\b and the like count as nothing). When the pattern sets the x option
 * anywhere, the contents are compiled with and without it and every variant must need a
 * character. Contents whose meaning depends on the rest of the pattern (numbered or relative
 * references, recursion, conditions) or that do not compile alone are refused as unchecked.
 * The check is conservative: it may refuse a group that cannot really be empty, never the other
 * way round. PCRE2 is used directly because match.h has no such question; same library, same
 * UTF option.
 */
enum flow_group {
    FLOW_GROUP_NONEMPTY = 0, /* every occurrence of the group captures at least one character */
    FLOW_GROUP_EMPTY,        /* some occurrence can capture "" */
    FLOW_GROUP_UNCHECKED,    /* the group could not be checked on its own */
    FLOW_GROUP_ABSENT,       /* no such group */
};

#define FLOW_RE_SPANS 16 /* occurrences of one name checked (with (?J)) */
#define FLOW_RE_DEPTH 64 /* group nesting the scanner follows */

struct flow_span {
    size_t start, len;
};

/* Index after the character class that starts at pat[i] == '['. */
static size_t flow_re_skip_class(const char *pat, size_t i)
{
    size_t n = strlen(pat), j = i + 1;

    if (j < n && pat[j] == '^')
        j++;
    if (j < n && pat[j] == ']')
        j++; /* a ']' first is a literal */
    while (j < n) {
        if (pat[j] == '\\' && pat[j + 1] == 'Q') {
            const char *e = strstr(pat + j + 2, "\\E");
            j = e ? (size_t)(e - pat) + 2 : n;
        } else if (pat[j] == '\\') {
            j += j + 1 < n ? 2 : 1;
        } else if (pat[j] == '[' && pat[j + 1] == ':') {
            const char *e = strstr(pat + j + 2, ":]");
            j = e ? (size_t)(e - pat) + 2 : n;
        } else if (pat[j] == ']') {
            return j + 1;
        } else {
            j++;
        }
    }
    return n;
}

/* Index after the item at pat[i] that is not a group boundary: an escape (\Q...\E whole), a
 * class, a comment (?#...), or one character. pat[i] is not '(' starting a group nor ')'. */
static size_t flow_re_item_end(const char *pat, size_t i)
{
    size_t n = strlen(pat);

    if (pat[i] == '\\' && pat[i + 1] == 'Q') {
        const char *e = strstr(pat + i + 2, "\\E");
        return e ? (size_t)(e - pat) + 2 : n;
    }
    if (pat[i] == '\\')
        return i + 1 < n ? i + 2 : n;
    if (pat[i] == '[')
        return flow_re_skip_class(pat, i);
    if (strncmp(pat + i, "(?#", 3) == 0) {
        const char *e = strchr(pat + i, ')');
        return e ? (size_t)(e - pat) + 1 : n;
    }
    return i + 1;
}

/* True when pat[i] opens a group (a '(' that is not a comment). */
static bool flow_re_opens(const char *pat, size_t i)
{
    return pat[i] == '(' && strncmp(pat + i, "(?#", 3) != 0;
}

/* Index of the ')' closing the group opened at pat[i], or (size_t)-1. */
static size_t flow_re_close(const char *pat, size_t i)
{
    size_t n = strlen(pat);
    int depth = 0;

    while (i < n) {
        if (flow_re_opens(pat, i)) {
            depth++;
            i++;
        } else if (pat[i] == ')') {
            if (--depth == 0)
                return i;
            i++;
        } else {
            i = flow_re_item_end(pat, i);
        }
    }
    return (size_t)-1;
}

/* Length of the opening of a group named `name` at pat[i] ("(?<name>", "(?'name'",
 * "(?P<name>"), or 0 when the parenthesis at pat[i] opens something else. */
static size_t flow_re_named_open(const char *pat, size_t i, const char *name)
{
    static const struct {
        const char *open;
        char close;
    } forms[] = {{"(?<", '>'}, {"(?'", '\''}, {"(?P<", '>'}};
    size_t nl = strlen(name);

    for (size_t f = 0; f < sizeof(forms) / sizeof(forms[0]); f++) {
        size_t ol = strlen(forms[f].open);
        if (strncmp(pat + i, forms[f].open, ol) == 0 && strncmp(pat + i + ol, name, nl) == 0 &&
            pat[i + ol + nl] == forms[f].close)
            return ol + nl + 1;
    }
    return 0;
}

/* The contents of every group called `name` in pat. Returns how many (at most max), or -1
 * when the pattern does not scan (unbalanced, too deep, too many). */
static int flow_re_group_spans(const char *pat, const char *name, struct flow_span *out, int max)
{
    struct {
        size_t content;
        bool named;
    } stack[FLOW_RE_DEPTH];
    size_t n = strlen(pat), i = 0;
    int sp = 0, found = 0;

    while (i < n) {
        if (flow_re_opens(pat, i)) {
            size_t open = flow_re_named_open(pat, i, name);
            if (sp == FLOW_RE_DEPTH)
                return -1;
            stack[sp].named = open > 0;
            stack[sp].content = i + (open ? open : 1);
            sp++;
            i += open ? open : 1;
        } else if (pat[i] == ')') {
            if (sp == 0)
                return -1;
            sp--;
            if (stack[sp].named) {
                if (found == max)
                    return -1;
                out[found].start = stack[sp].content;
                out[found].len = i - stack[sp].content;
                found++;
            }
            i++;
        } else {
            i = flow_re_item_end(pat, i);
        }
    }
    return sp == 0 ? found : -1;
}

/* True when the group opened at p is an assertion (it consumes nothing). */
static bool flow_re_is_assertion(const char *p)
{
    static const char *const opens[] = {
        "(?=",
        "(?!",
        "(?<=",
        "(?<!",
        "(?*",
        "(?<*",
        "(*pla:",
        "(*nla:",
        "(*plb:",
        "(*nlb:",
        "(*napla:",
        "(*naplb:",
        "(*positive_look",
        "(*negative_look",
        "(*non_atomic_positive_look",
    };
    for (size_t k = 0; k < sizeof(opens) / sizeof(opens[0]); k++)
        if (strncmp(p, opens[k], strlen(opens[k])) == 0)
            return true;
    return false;
}

/* True when the contents mean something else without the rest of the pattern: numbered or
 * relative back references and subroutine calls, recursion, conditions. */
static bool flow_re_depends(const char *sub)
{
    size_t n = strlen(sub);

    for (size_t i = 0; i < n;) {
        const char *p = sub + i;
        if (p[0] == '\\' && ((p[1] >= '1' && p[1] <= '9') || p[1] == 'g' || p[1] == 'k'))
            return true;
        if (p[0] == '(' && p[1] == '?' &&
            (p[2] == 'R' || p[2] == '&' || p[2] == '(' || (p[2] >= '0' && p[2] <= '9') ||
             ((p[2] == '+' || p[2] == '-') && p[3] >= '0' && p[3] <= '9') ||
             (p[2] == 'P' && (p[3] == '>' || p[3] == '='))))
            return true;
        i = flow_re_opens(sub, i) || sub[i] == ')' ? i + 1 : flow_re_item_end(sub, i);
    }
    return false;
}

/* A heap copy of sub without its assertion groups. NULL when it does not scan. */
static char *flow_re_strip_assertions(const char *sub)
{
    size_t n = strlen(sub), o = 0;
    char *out = apbot_xmalloc(n + 1);

    for (size_t i = 0; i < n;) {
        size_t end;
        if (flow_re_opens(sub, i) && flow_re_is_assertion(sub + i)) {
            end = flow_re_close(sub, i);
            if (end == (size_t)-1) {
                free(out);
                return NULL;
            }
            i = end + 1;
            continue;
        }
        end = flow_re_opens(sub, i) || sub[i] == ')' ? i + 1 : flow_re_item_end(sub, i);
        memcpy(out + o, sub + i, end - i);
        o += end - i;
        i = end;
    }
    out[o] = '\0';
    return out;
}

/* True when the pattern turns the x (extended) option on anywhere: (?x), (?ix:, (?xx) ... */
static bool flow_re_sets_x(const char *pat)
{
    for (const char *p = strstr(pat, "(?"); p; p = strstr(p + 2, "(?")) {
        const char *q = p + 2;
        bool x = false;
        while ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || *q == '^') {
            x = x || *q == 'x';
            q++;
        }
        while ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || *q == '-')
            q++; /* what follows a '-' is switched off */
        if (x && (*q == ')' || *q == ':'))
            return true;
    }
    return false;
}

/* The minimum length the contents can match when compiled alone with `options`; false when
 * they do not compile alone. */
static bool flow_re_minlength(const char *sub, uint32_t options, uint32_t *ret)
{
    /* In x mode a '#' comment runs to the end of the line: close the group on a new line. */
    bool x = options & PCRE2_EXTENDED;
    size_t n = strlen(sub) + 6;
    char *text = apbot_xmalloc(n);
    int errcode;
    PCRE2_SIZE erroff;
    pcre2_code *code;
    bool ok;

    snprintf(text, n, "(?:%s%s", sub, x ? "\n)" : ")");
    code = pcre2_compile((PCRE2_SPTR)text, PCRE2_ZERO_TERMINATED, PCRE2_UTF | options, &errcode,
                         &erroff, NULL);
    free(text);
    if (!code)
        return false;
    ok = pcre2_pattern_info(code, PCRE2_INFO_MINLENGTH, ret) == 0;
    pcre2_code_free(code);
    return ok;
}

/* Whether every occurrence of the group `name` in one occurrence's contents sub needs at
 * least one character. */
static enum flow_group flow_re_contents(const char *sub, bool x)
{
    static const uint32_t variants[] = {0, PCRE2_EXTENDED, PCRE2_EXTENDED | PCRE2_EXTENDED_MORE};
    enum flow_group g = FLOW_GROUP_NONEMPTY;
    char *stripped;

    if (flow_re_depends(sub))
        return FLOW_GROUP_UNCHECKED;
    stripped = flow_re_strip_assertions(sub);
    if (!stripped)
        return FLOW_GROUP_UNCHECKED;
    for (size_t v = 0; v < (x ? 3u : 1u) && g == FLOW_GROUP_NONEMPTY; v++) {
        uint32_t min = 0;
        if (!flow_re_minlength(stripped, variants[v], &min))
            g = FLOW_GROUP_UNCHECKED;
        else if (min == 0)
            g = FLOW_GROUP_EMPTY;
    }
    free(stripped);
    return g;
}

static enum flow_group flow_group_yield(const struct match_re *re, const char *name)
{
    struct flow_span spans[FLOW_RE_SPANS];
    const char *pat = match_pattern(re);
    bool x;
    int n;

    if (!re || !match_has_group(re, name))
        return FLOW_GROUP_ABSENT;
    n = flow_re_group_spans(pat, name, spans, FLOW_RE_SPANS);
    if (n <= 0)
        return FLOW_GROUP_UNCHECKED;
    x = flow_re_sets_x(pat);
    for (int i = 0; i < n; i++) {
        char *sub = apbot_xstrndup(pat + spans[i].start, spans[i].len);
        enum flow_group g = flow_re_contents(sub, x);
        free(sub);
        if (g != FLOW_GROUP_NONEMPTY)
            return g;
    }
    return FLOW_GROUP_NONEMPTY;
}

/* Why a group does not yield a document number, for messages. */
static const char *flow_group_why(enum flow_group g)
{
    switch (g) {
    case FLOW_GROUP_EMPTY:
        return "its (?<doc>...) group can match the empty string";
    case FLOW_GROUP_UNCHECKED:
        return "its (?<doc>...) group cannot be checked on its own (a back reference or "
               "subroutine call in it?)";
    case FLOW_GROUP_ABSENT:
        return "it has no (?<doc>...) group";
    case FLOW_GROUP_NONEMPTY:
        break;
    }
    return "";
}

/* ---- parts --------------------------------------------------------------------------------- */

/* when-missing is for the rules of a post step that fills a form: `refused` (NULL: allowed)
 * says why a rule list cannot have it. */
static void flow_check_when(struct flow_ctx *c, const struct flow_rule *rules, size_t n,
                            const char *refused)
{
    for (size_t i = 0; i < n && refused; i++)
        if (rules[i].when != FLOW_WHEN_ALWAYS)
            flow_problem(c, rules[i].line, "rule '%s': when-missing=\"%s\" is not for %s",
                         rules[i].name ? rules[i].name : "", flow_when_name(rules[i].when),
                         refused);
}

/* Outcomes allowed in a rule list, as bits. */
#define FLOW_RULES_ALL ((1u << FLOW_OUT__COUNT) - 1)
#define FLOW_RULES_LOGIN                                                                           \
    ((1u << FLOW_OUT_REJECTED) | (1u << FLOW_OUT_NOT_SENT) | (1u << FLOW_OUT_UNKNOWN))
#define FLOW_RULES_STEP (FLOW_RULES_ALL & ~(1u << FLOW_OUT_COMPLETED) & ~(1u << FLOW_OUT_SAVED))
#define FLOW_RULES_OUTCOMES (FLOW_RULES_ALL & ~(1u << FLOW_OUT_SAVED))

/* What the post knows while its steps are checked in order. */
struct flow_post_scan {
    size_t ci;             /* committing step */
    bool has_commit;       /* some step commits */
    bool doc_by_commit;    /* doc captured at or before the committing step */
    const char **captures; /* names captured so far, in step order (borrowed from the flow) */
    size_t *capture_step;  /* the step capturing captures[i] */
    size_t n_captures, cap;
};

/* Bound on captures in a flow: FLOW_LIST_MAX per step, and as many steps. */
#define FLOW_CAPTURES_MAX ((size_t)FLOW_LIST_MAX * (FLOW_LIST_MAX + 1))

static void flow_check_fields(struct flow_ctx *c, const struct flow_field *fd, size_t n,
                              const struct flow_scope *sc, const char *what)
{
    struct flow_scope names = *sc;
    char msg[160];

    names.name = true;
    for (size_t i = 0; i < n; i++) {
        snprintf(msg, sizeof(msg), "%s '%s'", what, fd[i].name ? fd[i].name : "");
        flow_tpl_check(c, fd[i].value, sc, fd[i].line, msg);
        if (fd[i].name && strstr(fd[i].name, "${"))
            flow_tpl_check(c, fd[i].name, &names, fd[i].line, msg);
    }
}

/* Field names set twice: among a[0..na) and b[0..nb) (b may be a's continuation). */
static void flow_check_unique_fields(struct flow_ctx *c, const struct flow_field *fd, size_t n,
                                     const struct flow_field *more, size_t n_more)
{
    for (size_t i = 0; i < n + n_more; i++) {
        const struct flow_field *a = i < n ? &fd[i] : &more[i - n];
        for (size_t j = 0; j < i; j++) {
            const struct flow_field *b = j < n ? &fd[j] : &more[j - n];
            if (a->name && b->name && strcmp(a->name, b->name) == 0) {
                flow_problem(c, a->line, "field '%s' is set twice in this form", a->name);
                break;
            }
        }
    }
}

static void flow_check_form(struct flow_ctx *c, const struct flow_form *fm,
                            const struct flow_scope *sc, const char *what)
{
    char msg[160];

    snprintf(msg, sizeof(msg), "%s form", what);
    flow_check_xpath(c, fm->xpath, fm->line, msg);
    if (fm->submit_value && !fm->submit)
        flow_problem(c, fm->line,
                     "%s: submit-value=\"%s\" without submit=\"NAME\" (which button has that "
                     "value?)",
                     msg, fm->submit_value);
    flow_check_fields(c, fm->fields, fm->n_fields, sc, "field");
    flow_check_unique_fields(c, fm->fields, fm->n_fields, fm->lines.fields, fm->lines.n_fields);
    if (fm->lines.present) {
        struct flow_scope ls = *sc;
        ls.place = FLOW_P_LINES;
        flow_check_fields(c, fm->lines.fields, fm->lines.n_fields, &ls, "lines field");
        for (size_t i = 0; i < fm->lines.n_fields; i++)
            if (fm->lines.fields[i].name && !flow_tpl_uses(fm->lines.fields[i].name, "line.n") &&
                !flow_tpl_uses(fm->lines.fields[i].name, "line.i"))
                flow_problem(c, fm->lines.fields[i].line,
                             "lines field '%s': its name must use ${line.n} or ${line.i} (one "
                             "control per invoice line)",
                             fm->lines.fields[i].name);
    }
}

/* `allowed` is a bit set of outcomes allowed in this rule list. */
static void flow_check_rules(struct flow_ctx *c, const struct flow_rule *rules, size_t n,
                             unsigned allowed, const char *where_name)
{
    for (size_t i = 0; i < n; i++) {
        const struct flow_rule *r = &rules[i];
        char what[160];

        snprintf(what, sizeof(what), "rule '%s'", r->name ? r->name : "");
        if (!(allowed & (1u << r->outcome))) {
            if (r->outcome == FLOW_OUT_SAVED)
                flow_problem(c, r->line,
                             "%s: outcome 'saved' only on the committing step, and only when "
                             "steps follow it (it means: the document exists, run the "
                             "follow-up steps on it)",
                             what);
            else
                flow_problem(c, r->line, "%s: outcome '%s' is not allowed in %s", what,
                             flow_outcome_name(r->outcome), where_name);
        }
        if (r->status && !match_status_valid(r->status))
            flow_problem(c, r->line, "%s: bad status spec '%s' (expected e.g. 200, 5xx, 429,503)",
                         what, r->status);
        if (r->outcome != FLOW_OUT_COMPLETED && r->outcome != FLOW_OUT_SAVED)
            continue;
        /* No catch-all success: a success pattern must need some text. */
        if (r->body && match_exec(r->body, "", 0, NULL))
            flow_problem(c, r->line,
                         "%s: a %s rule must not match an empty page (no catch-all success)", what,
                         flow_outcome_name(r->outcome));
        if (r->url && match_exec(r->url, "", 0, NULL))
            flow_problem(c, r->line,
                         "%s: a %s rule's url pattern must not match an empty URL (no catch-all "
                         "success)",
                         what, flow_outcome_name(r->outcome));
    }
}

static const char *const flow_column_names[] = {
    "doc",      "reference", "vendor",   "vendor_name", "invoice_number", "date",
    "due_date", "amount",    "currency", "doc_type",    "booked",         "status",
};

static bool flow_table_has(const struct flow_table *t, const char *name)
{
    for (size_t i = 0; name && i < t->n_cols; i++)
        if (t->cols[i].name && strcmp(t->cols[i].name, name) == 0)
            return true;
    return false;
}

/* The templates of a <send> at its place: the URL, and the JSON body or the fields. */
static void flow_check_send(struct flow_ctx *c, const struct flow_send *s,
                            const struct flow_scope *url, const struct flow_scope *body,
                            const char *what)
{
    char msg[160];

    if (!s->present)
        return;
    snprintf(msg, sizeof(msg), "%s send url", what);
    flow_tpl_check(c, s->url, url, s->line, msg);
    snprintf(msg, sizeof(msg), "%s send body", what);
    if (s->json)
        flow_json_check(c, s->json, body, s->line, msg);
    flow_check_fields(c, s->fields, s->n_fields, body, msg);
}

/* True when the send's URL or body uses variable var. */
static bool flow_send_uses(const struct flow_send *s, const char *var)
{
    if (!s->present)
        return false;
    if (flow_tpl_uses(s->url, var) || (s->json && flow_json_uses(s->json, var)))
        return true;
    for (size_t i = 0; i < s->n_fields; i++)
        if (flow_tpl_uses(s->fields[i].value, var))
            return true;
    return false;
}

/* A table read from JSON has a rows pointer and pointer columns; one read from HTML rows and
 * XPath columns (an HTML lookup table also its empty marker). */
static bool flow_check_table_kind(struct flow_ctx *c, const struct flow_table *t, bool detail,
                                  bool need_empty, const char *what)
{
    bool ok = true;
    for (size_t i = 0; i < t->n_cols; i++)
        if ((t->json && !t->cols[i].pointer) || (!t->json && !t->cols[i].xpath)) {
            flow_problem(c, t->cols[i].line, "column '%s': %s (the %s is read from %s)",
                         t->cols[i].name ? t->cols[i].name : "",
                         t->json ? "give pointer=\"/...\", not xpath" : "give xpath=, not pointer",
                         what, t->json ? "a JSON answer" : "an HTML page");
            ok = false;
        }
    if (t->json && (t->empty || t->next || t->screen))
        flow_problem(c, t->line,
                     "%s: empty, next and screen are XPath for HTML pages; a JSON table's rows "
                     "are the array at pointer= (an empty array is no results, no array there "
                     "is no answer)",
                     what);
    if (!detail && !t->json && !t->rows)
        flow_problem(c, t->line, "%s: give rows=\"XPATH\" or pointer=\"/...\"", what);
    if (!t->json && need_empty && !t->empty)
        flow_problem(c, t->line,
                     "%s: an HTML lookup table needs empty=\"XPATH\" (what a results page without "
                     "hits shows: no rows alone never proves an absence)",
                     what);
    return ok;
}

static void flow_check_table_as(struct flow_ctx *c, const struct flow_table *t, const char *what,
                                bool known_names)
{
    char msg[128];

    if (t->amount_decimal == t->amount_group)
        flow_problem(c, t->line, "%s: amount-decimal and amount-group are both '%c'", what,
                     t->amount_decimal);
    if (!flow_date_pattern_ok(t->date_format, strlen(t->date_format)) ||
        !strstr(t->date_format, "%d") || !strstr(t->date_format, "%m") ||
        (!strstr(t->date_format, "%Y") && !strstr(t->date_format, "%y")))
        flow_problem(c, t->line, "%s: bad date-format '%s' (needs %%d, %%m and %%Y or %%y)", what,
                     t->date_format);
    snprintf(msg, sizeof(msg), "%s rows", what);
    flow_check_xpath(c, t->rows, t->line, msg);
    snprintf(msg, sizeof(msg), "%s empty", what);
    flow_check_xpath(c, t->empty, t->line, msg);
    snprintf(msg, sizeof(msg), "%s next", what);
    flow_check_xpath(c, t->next, t->line, msg);
    snprintf(msg, sizeof(msg), "%s screen", what);
    flow_check_xpath(c, t->screen, t->line, msg);
    for (size_t i = 0; i < t->n_cols; i++) {
        const struct flow_column *col = &t->cols[i];
        bool known = false, twice = false;

        for (size_t k = 0; col->name && k < sizeof(flow_column_names) / sizeof(*flow_column_names);
             k++)
            known = known || strcmp(flow_column_names[k], col->name) == 0;
        for (size_t j = 0; j < i; j++)
            twice =
                twice || (col->name && t->cols[j].name && strcmp(col->name, t->cols[j].name) == 0);
        if (!known && known_names)
            flow_problem(c, col->line,
                         "column '%s': unknown name (use doc, reference, vendor, vendor_name, "
                         "invoice_number, date, due_date, amount, currency, doc_type, booked, "
                         "status)",
                         col->name ? col->name : "");
        else if (twice)
            flow_problem(c, col->line, "column '%s' is listed twice", col->name);
        snprintf(msg, sizeof(msg), "column '%s'", col->name ? col->name : "");
        flow_check_xpath(c, col->xpath, col->line, msg);
    }
}

static void flow_check_table(struct flow_ctx *c, const struct flow_table *t, const char *what)
{
    flow_check_table_as(c, t, what, true);
}

/* True when base_url carries credentials: "scheme://user[:pass]@host...". */
static bool flow_url_has_userinfo(const char *url)
{
    const char *auth = strstr(url, "://");
    size_t n;

    if (!auth)
        return false;
    auth += 3;
    n = strcspn(auth, "/?#");
    return memchr(auth, '@', n) != NULL;
}

static void flow_check_erp(struct flow_ctx *c)
{
    const struct flow *f = c->f;

    if (f->base_url && strncmp(f->base_url, "http://", 7) != 0 &&
        strncmp(f->base_url, "https://", 8) != 0)
        flow_problem(c, f->erp_line, "erp: base-url '%s' must start with http:// or https://",
                     f->base_url);
    if (f->base_url && strstr(f->base_url, "${"))
        flow_problem(c, f->erp_line, "erp: base-url takes no ${...} variables");
    if (f->base_url && flow_url_has_userinfo(f->base_url))
        flow_problem(c, f->erp_line,
                     "erp: base-url must not carry user:password@ (credentials come from "
                     "APBOT_ERP_USER and APBOT_ERP_PASSWORD, never from a flow)");
    for (size_t i = 0; i < f->n_session_expired; i++)
        if (f->session_expired[i].status && !match_status_valid(f->session_expired[i].status))
            flow_problem(c, f->session_expired[i].line,
                         "session-expired: bad status spec '%s' (expected e.g. 401, 3xx)",
                         f->session_expired[i].status);
    if (f->login.present && f->n_session_expired == 0)
        flow_problem(c, f->line,
                     "erp: a flow with <login> needs <session-expired>, or a login page shown "
                     "instead of an answer cannot be told from an unknown answer");
    if (!f->login.present && !f->basic_auth)
        flow_problem(c, f->line,
                     "flow: no <login> and no <http-basic/>: how does apbot authenticate?");
    if (f->login.present && !f->login.has_form && !f->login.send.present && !f->basic_auth)
        flow_problem(c, f->login.line,
                     "login: a login without <form> sends no credentials: add <http-basic/> to "
                     "<erp> (or a <form> with ${secret.user} and ${secret.password})");
    if (f->login.send.present && !f->basic_auth &&
        !flow_send_uses(&f->login.send, "secret.password"))
        flow_problem(c, f->login.line,
                     "login: its <send> carries no ${secret.password} and the flow has no "
                     "<http-basic/>: how does it authenticate?");
}

/* The headers every request after the login carries (checked once the session's captures are
 * known). */
static void flow_check_headers(struct flow_ctx *c)
{
    const struct flow *f = c->f;

    for (size_t i = 0; i < f->n_headers; i++) {
        const struct flow_header *h = &f->headers[i];
        struct flow_scope sc = {
            .place = FLOW_P_HEADER, .sessions = c->sessions, .n_sessions = c->n_sessions};
        char msg[160];
        snprintf(msg, sizeof(msg), "header '%s'", h->name ? h->name : "");
        if (!h->name || !http_header_ok(h->name, "x"))
            flow_problem(c, h->line,
                         "%s: not a header apbot may set (a token name; Host, Content-Length, "
                         "Content-Type, Cookie and the like are the session's own)",
                         msg);
        if ((h->prefix && (strchr(h->prefix, '\r') || strchr(h->prefix, '\n'))))
            flow_problem(c, h->line, "%s: a prefix with a line break", msg);
        flow_tpl_check(c, h->value, &sc, h->line, msg);
    }
}

/* The session's captures (login, then calls): a group of their name where a pattern must find
 * it, each name once; they join c->sessions, usable after here. */
static void flow_check_session_captures(struct flow_ctx *c, const struct flow_capture *cp, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        if (!cp[k].name)
            continue;
        if (cp[k].re && flow_group_yield(cp[k].re, cp[k].name) == FLOW_GROUP_ABSENT &&
            !cp[k].pointer)
            flow_problem(c, cp[k].line, "capture '%s': the pattern needs a (?<%s>...) group",
                         cp[k].name, cp[k].name);
        bool twice = false;
        for (size_t j = 0; j < c->n_sessions; j++)
            twice = twice || strcmp(c->sessions[j], cp[k].name) == 0;
        if (twice) {
            flow_problem(c, cp[k].line, "capture '%s': the session captures it already",
                         cp[k].name);
            continue;
        }
        c->sessions = apbot_xrealloc(c->sessions, (c->n_sessions + 1) * sizeof(*c->sessions));
        c->sessions[c->n_sessions++] = cp[k].name;
    }
}

static void flow_check_login(struct flow_ctx *c)
{
    const struct flow_login *l = &c->f->login;
    struct flow_scope url = {.place = FLOW_P_LOGIN_URL};
    struct flow_scope field = {.place = FLOW_P_LOGIN_FIELD};

    if (!l->present)
        return;
    flow_tpl_check(c, l->get, &url, l->line, "login get");
    if (l->success_status && !match_status_valid(l->success_status))
        flow_problem(c, l->line, "login success: bad status spec '%s' (expected e.g. 200)",
                     l->success_status);
    if (l->has_form)
        flow_check_form(c, &l->form, &field, "login");
    flow_check_send(c, &l->send, &url, &field, "login");
    flow_check_rules(c, l->rules, l->n_rules, FLOW_RULES_LOGIN, "<login>");
    flow_check_when(c, l->rules, l->n_rules, "<login> (only post steps fill forms for a flow)");
    flow_check_session_captures(c, l->captures, l->n_captures);
    for (size_t i = 0; i < l->n_then; i++) {
        const struct flow_call *t = &l->then[i];
        struct flow_scope sc = {
            .place = FLOW_P_CALL, .sessions = c->sessions, .n_sessions = c->n_sessions};
        char msg[160];
        snprintf(msg, sizeof(msg), "then '%s'", t->name ? t->name : "");
        flow_check_send(c, &t->send, &sc, &sc, msg);
        if (t->success_status && !match_status_valid(t->success_status))
            flow_problem(c, t->line, "%s success: bad status spec '%s'", msg, t->success_status);
        flow_check_session_captures(c, t->captures, t->n_captures);
    }
}

/* True when the lookup can read column `name` from its table or its detail page. */
static bool flow_lookup_has(const struct flow_lookup *lk, const char *name)
{
    return flow_table_has(&lk->table, name) ||
           (lk->detail.present && flow_table_has(&lk->detail.table, name));
}

/* A declared default currency (currency="EUR" on a lookup or a list) must be one whose
 * amounts apbot can read exactly: an ISO 4217 code it knows the exponent of. */
static void flow_check_currency(struct flow_ctx *c, const char *currency, int line,
                                const char *what)
{
    if (currency && money_exponent(currency) < 0)
        flow_problem(c, line,
                     "%s: currency '%s' is not an ISO 4217 code apbot knows (three capital "
                     "letters, e.g. EUR): the ERP's amounts could not be read in it",
                     what, currency);
}

static void flow_check_lookup(struct flow_ctx *c)
{
    const struct flow_lookup *lk = &c->f->lookup;
    struct flow_scope sc = {.place = FLOW_P_LOOKUP};

    sc.sessions = c->sessions;
    sc.n_sessions = c->n_sessions;
    if (!lk->get == !lk->send.present)
        flow_problem(c, lk->line, "lookup: give get=\"URL\" or <send>, one of the two");
    flow_tpl_check(c, lk->get, &sc, lk->line, "lookup get");
    flow_check_send(c, &lk->send, &sc, &sc, "lookup");
    flow_check_table_kind(c, &lk->table, false, true, "lookup table");
    flow_check_table(c, &lk->table, "lookup table");
    flow_check_currency(c, lk->currency, lk->line, "lookup");
    if (!flow_table_has(&lk->table, "doc"))
        flow_problem(c, lk->table.line, "lookup table: needs a 'doc' column (the document number)");
    if (lk->detail.present) {
        struct flow_scope ds = {.place = FLOW_P_DETAIL_URL,
                                .rows = &lk->table,
                                .sessions = c->sessions,
                                .n_sessions = c->n_sessions};
        if (!lk->detail.get == !lk->detail.send.present)
            flow_problem(c, lk->detail.table.line,
                         "detail: give get=\"URL\" or <send>, one of the two");
        flow_tpl_check(c, lk->detail.get, &ds, lk->detail.table.line, "detail get");
        flow_check_send(c, &lk->detail.send, &ds, &ds, "detail");
        flow_check_table_kind(c, &lk->detail.table, true, false, "detail");
        if (lk->detail.send.present && !flow_send_uses(&lk->detail.send, "row."))
            flow_problem(c, lk->detail.table.line,
                         "detail send: use ${row.COLUMN} to ask for each candidate's own record");
        if (lk->detail.get && !flow_tpl_uses(lk->detail.get, "row."))
            flow_problem(c, lk->detail.table.line,
                         "detail get: use ${row.COLUMN} (e.g. ${row.doc|url}) to open each "
                         "candidate's own page");
        flow_check_table(c, &lk->detail.table, "detail");
    }
    flow_check_fields(c, lk->expect, lk->n_expect, &sc, "expect");
    if (lk->key_column && !flow_lookup_has(lk, lk->key_column))
        flow_problem(c, lk->line,
                     "lookup: key-column '%s' is not a column of its table or its detail",
                     lk->key_column);
    for (size_t i = 0; i < lk->n_expect; i++)
        if (!flow_lookup_has(lk, lk->expect[i].name))
            flow_problem(c, lk->expect[i].line,
                         "expect: '%s' is not a column of the table or the detail",
                         lk->expect[i].name ? lk->expect[i].name : "");
    if (!lk->key_column && lk->n_expect == 0)
        flow_problem(c, lk->line,
                     "lookup: give key-column or <expect> elements: a hit must be compared "
                     "exactly before it is believed");
    if (lk->has_finished) {
        flow_tpl_check(c, lk->finished.value, &sc, lk->finished.line, "finished");
        if (!flow_lookup_has(lk, lk->finished.name))
            flow_problem(c, lk->finished.line,
                         "finished: '%s' is not a column of the table or the detail",
                         lk->finished.name ? lk->finished.name : "");
    }
}

/* Records the names step i captures (its <capture>s, and "doc" for a saved rule). */
static void flow_scan_captures(struct flow_ctx *c, struct flow_post_scan *ps, size_t i)
{
    const struct flow_step *s = &c->f->steps[i];

    for (size_t k = 0; k <= s->n_captures; k++) {
        const char *name = NULL;
        if (k < s->n_captures) {
            name = s->captures[k].name;
        } else {
            for (size_t r = 0; r < s->n_rules && !name; r++)
                if (s->rules[r].outcome == FLOW_OUT_SAVED)
                    name = "doc";
        }
        if (!name)
            continue;
        if (apbot_grow((void **)&ps->captures, &ps->cap, ps->n_captures, sizeof(*ps->captures),
                       FLOW_CAPTURES_MAX) != APBOT_OK)
            abort(); /* the loader bounds both counts */
        ps->capture_step = apbot_xrealloc(ps->capture_step, ps->cap * sizeof(*ps->capture_step));
        ps->captures[ps->n_captures] = name;
        ps->capture_step[ps->n_captures++] = i;
    }
}

/* Checks step i's captures: a group of their name, names used once, doc never empty. */
static void flow_check_captures(struct flow_ctx *c, const struct flow_post_scan *ps, size_t i)
{
    const struct flow_step *s = &c->f->steps[i];

    for (size_t k = 0; k < s->n_captures; k++) {
        const struct flow_capture *cp = &s->captures[k];
        enum flow_group g;

        if (!cp->name || !cp->re)
            continue;
        g = flow_group_yield(cp->re, cp->name);
        if (g == FLOW_GROUP_ABSENT)
            flow_problem(c, cp->line, "capture '%s': the pattern needs a (?<%s>...) group",
                         cp->name, cp->name);
        else if (strcmp(cp->name, "doc") == 0 && g != FLOW_GROUP_NONEMPTY)
            flow_problem(c, cp->line, "capture 'doc': %s: the document number could be empty",
                         flow_group_why(g));
        for (size_t j = 0; j < ps->n_captures; j++)
            if (ps->capture_step[j] < i && strcmp(ps->captures[j], cp->name) == 0) {
                const struct flow_step *o = &c->f->steps[ps->capture_step[j]];
                flow_problem(c, cp->line, "capture '%s': step '%s' already captures it", cp->name,
                             o->name ? o->name : "");
                break;
            }
        for (size_t j = 0; j < k; j++)
            if (s->captures[j].name && strcmp(s->captures[j].name, cp->name) == 0) {
                flow_problem(c, cp->line, "capture '%s' is listed twice in this step", cp->name);
                break;
            }
    }
}

/* Checks step i's <compare-amount>s: before the committing step, a capture of this step or
 * an earlier one, one amount of the invoice to equal, two separators that differ. */
static void flow_check_compares(struct flow_ctx *c, const struct flow_post_scan *ps, size_t i,
                                const struct flow_scope *sc)
{
    const struct flow_step *s = &c->f->steps[i];

    for (size_t k = 0; k < s->n_compares; k++) {
        const struct flow_compare *cm = &s->compares[k];
        bool known = false;
        char what[160];

        snprintf(what, sizeof(what), "compare-amount '%s'", cm->capture ? cm->capture : "");
        if (ps->has_commit && i >= ps->ci)
            flow_problem(c, cm->line,
                         "%s: only on a step before the committing one (the ERP's amount is "
                         "compared before anything can be booked)",
                         what);
        for (size_t j = 0; j < s->n_captures; j++)
            known = known || (cm->capture && s->captures[j].name &&
                              strcmp(cm->capture, s->captures[j].name) == 0);
        for (size_t j = 0; j < ps->n_captures; j++)
            known = known || (cm->capture && strcmp(cm->capture, ps->captures[j]) == 0);
        if (!known)
            flow_problem(c, cm->line,
                         "%s: no <capture name=\"%s\"> on this step or an earlier one (it reads "
                         "the ERP's amount from the answer)",
                         what, cm->capture ? cm->capture : "");
        else if (cm->capture && strcmp(cm->capture, "doc") == 0)
            flow_problem(c, cm->line, "%s: the document number is no amount", what);
        if (cm->amount_decimal == cm->amount_group)
            flow_problem(c, cm->line, "%s: amount-decimal and amount-group are both '%c'", what,
                         cm->amount_decimal);
        flow_amount_tpl_check(c, cm->equals, sc, cm->line, what);
    }
}

/* True when step i has a <capture name="doc"> whose group is never empty. */
static bool flow_step_captures_doc(const struct flow_step *s)
{
    for (size_t k = 0; k < s->n_captures; k++)
        if (s->captures[k].name && strcmp(s->captures[k].name, "doc") == 0 && s->captures[k].re &&
            flow_group_yield(s->captures[k].re, "doc") == FLOW_GROUP_NONEMPTY)
            return true;
    return false;
}

/* A completed or saved rule must yield the document number. */
static void flow_check_doc_yield(struct flow_ctx *c, const struct flow_rule *r, bool doc_elsewhere,
                                 const char *elsewhere)
{
    enum flow_group g;

    if (r->outcome != FLOW_OUT_COMPLETED && r->outcome != FLOW_OUT_SAVED)
        return;
    if (doc_elsewhere || flow_problem_at(c, r->line)) /* a broken pattern said enough */
        return;
    g = r->body ? flow_group_yield(r->body, "doc") : FLOW_GROUP_ABSENT;
    for (size_t k = 0; k < r->n_json && g != FLOW_GROUP_NONEMPTY; k++)
        if (r->json[k].re && !r->json[k].absent) {
            enum flow_group gj = flow_group_yield(r->json[k].re, "doc");
            if (gj != FLOW_GROUP_ABSENT)
                g = gj;
        }
    if (g != FLOW_GROUP_NONEMPTY && r->url) {
        /* the final URL after a redirect may name it: /invoices/(?<doc>\d+)$ */
        enum flow_group gu = flow_group_yield(r->url, "doc");
        if (gu != FLOW_GROUP_ABSENT)
            g = gu;
    }
    if (g != FLOW_GROUP_NONEMPTY)
        flow_problem(c, r->line,
                     "rule '%s': a %s rule must yield the document number, but %s: give it a "
                     "(?<doc>...) group that cannot match the empty string, or %s",
                     r->name ? r->name : "", flow_outcome_name(r->outcome), flow_group_why(g),
                     elsewhere);
}

/* True when step s's templates use variable var. */
static bool flow_step_uses(const struct flow_step *s, const char *var)
{
    if (flow_tpl_uses(s->get, var) || flow_send_uses(&s->send, var))
        return true;
    for (size_t k = 0; k < s->form.n_fields; k++)
        if (flow_tpl_uses(s->form.fields[k].value, var))
            return true;
    for (size_t k = 0; k < s->form.lines.n_fields; k++)
        if (flow_tpl_uses(s->form.lines.fields[k].value, var) ||
            flow_tpl_uses(s->form.lines.fields[k].name, var))
            return true;
    return false;
}

/* Records which resolves step i uses (${ref.NAME.*}): the post resolves them before sending
 * anything of the step. */
static void flow_step_resolves(struct flow_ctx *c, size_t i)
{
    struct flow_step *s = &c->f->steps[i];

    for (size_t r = 0; r < c->f->n_resolves; r++) {
        char var[160];
        if (!c->f->resolves[r].name)
            continue;
        snprintf(var, sizeof(var), "ref.%s.", c->f->resolves[r].name);
        if (!flow_step_uses(s, var))
            continue;
        if (c->f->resolves[r].from_step) {
            flow_problem(c, s->line,
                         "step '%s': ${%s*} is learnt from step '%s' to skip it, not for "
                         "templates",
                         s->name ? s->name : "", var, c->f->resolves[r].from_step);
            continue;
        }
        s->resolves = apbot_xrealloc(s->resolves, (s->n_resolves + 1) * sizeof(*s->resolves));
        s->resolves[s->n_resolves++] = r;
    }
}

/* A resolve learnt from a step (from-step): the step exists, fills a form and comes before the
 * committing one; one code per invoice; controls named once. */
static void flow_check_resolve_learnt(struct flow_ctx *c, struct flow_resolve *r, const char *msg)
{
    const struct flow *f = c->f;
    size_t ci = flow_commit_index(f);

    r->from = f->n_steps;
    for (size_t k = 0; k < f->n_steps; k++)
        if (f->steps[k].name && strcmp(f->steps[k].name, r->from_step) == 0)
            r->from = k;
    if (r->from == f->n_steps)
        flow_problem(c, r->line, "%s: from-step '%s' is not a step of the post", msg, r->from_step);
    else if (f->steps[r->from].send.present)
        flow_problem(c, r->line,
                     "%s: from-step '%s' sends a <send>: values are learnt from a step's form", msg,
                     r->from_step);
    else if (r->from >= ci)
        flow_problem(c, r->line,
                     "%s: from-step '%s' must come before the committing step (only such a step "
                     "can be skipped)",
                     msg, r->from_step);
    if (r->per_line)
        flow_problem(c, r->line,
                     "%s: a resolve learnt from a step has one code per invoice (no line.*)", msg);
    for (size_t k = 0; k < r->table.n_cols; k++)
        for (size_t j = 0; j < k; j++)
            if (r->table.cols[k].name && r->table.cols[j].name &&
                strcmp(r->table.cols[k].name, r->table.cols[j].name) == 0) {
                flow_problem(c, r->table.cols[k].line, "%s: control '%s' is named twice", msg,
                             r->table.cols[k].name);
                break;
            }
}

/* skip="when-known" on step i: a step before the commit that fills a form, learnt from by a
 * resolve, without captures (a skipped step captures nothing), followed by a step that submits
 * the same form without fetching a page (it takes the skipped step's filled form). */
static void flow_check_skip(struct flow_ctx *c, size_t i, const char *msg)
{
    const struct flow *f = c->f;
    const struct flow_step *s = &f->steps[i];
    bool learnt = false;

    if (!s->skip_known)
        return;
    for (size_t r = 0; r < f->n_resolves; r++)
        learnt = learnt || (f->resolves[r].from_step && f->resolves[r].from == i);
    if (!learnt)
        flow_problem(c, s->line,
                     "%s: skip=\"when-known\" needs a <resolve from-step=\"%s\"> that says what "
                     "its answer tells",
                     msg, s->name ? s->name : "");
    if (i >= flow_commit_index(f))
        flow_problem(c, s->line,
                     "%s: skip=\"when-known\" only before the committing step (a step that may "
                     "book is never skipped)",
                     msg);
    if (s->n_captures)
        flow_problem(c, s->line,
                     "%s: skip=\"when-known\" with a <capture>: a skipped step captures nothing",
                     msg);
    if (s->n_compares)
        flow_problem(c, s->line,
                     "%s: skip=\"when-known\" with a <compare-amount>: a skipped step has no "
                     "answer whose amount could be compared",
                     msg);
    const struct flow_step *next = i + 1 < f->n_steps ? &f->steps[i + 1] : NULL;
    if (!next || next->get || next->send.present || !next->form.xpath || !s->form.xpath ||
        strcmp(next->form.xpath, s->form.xpath) != 0)
        flow_problem(c, s->line,
                     "%s: skip=\"when-known\" needs a next step without get that submits the same "
                     "form (it takes the skipped step's filled form)",
                     msg);
}

/* Resolves: a unique name, a code that names what to look up, a request using ${code}, a
 * table with the match column. */
static void flow_check_resolves(struct flow_ctx *c)
{
    struct flow *f = c->f;

    for (size_t i = 0; i < f->n_resolves; i++) {
        struct flow_resolve *r = &f->resolves[i];
        struct flow_scope code = {.place = FLOW_P_STEP_FIELD};
        struct flow_scope req = {
            .place = FLOW_P_RESOLVE, .sessions = c->sessions, .n_sessions = c->n_sessions};
        char msg[160];

        snprintf(msg, sizeof(msg), "resolve '%s'", r->name ? r->name : "");
        for (size_t j = 0; j < i; j++)
            if (r->name && f->resolves[j].name && strcmp(r->name, f->resolves[j].name) == 0)
                flow_problem(c, r->line, "%s: the name is used twice", msg);
        r->per_line = r->code && flow_tpl_uses(r->code, "line.");
        if (r->per_line)
            code.place = FLOW_P_LINES;
        flow_tpl_check(c, r->code, &code, r->line, msg);
        if (r->from_step) {
            flow_check_resolve_learnt(c, r, msg);
            continue;
        }
        flow_tpl_check(c, r->get, &req, r->line, msg);
        flow_check_send(c, &r->send, &req, &req, msg);
        if (!(r->get && flow_tpl_uses(r->get, "code")) && !flow_send_uses(&r->send, "code"))
            flow_problem(c, r->line, "%s: its request must ask for ${code}", msg);
        flow_check_table_kind(c, &r->table, false, false, msg);
        flow_check_table_as(c, &r->table, msg, false);
        if (r->match_column && !flow_table_has(&r->table, r->match_column))
            flow_problem(c, r->line,
                         "%s: match-column '%s' is not a column of its table (a hit is believed "
                         "only when that column equals the code exactly)",
                         msg, r->match_column);
    }
}

static void flow_check_post(struct flow_ctx *c)
{
    const struct flow *f = c->f;
    struct flow_post_scan ps = {0};
    size_t commits = 0;
    bool have_completed = false, key_written = false, followers;

    for (size_t i = 0; i < f->n_steps; i++)
        commits += f->steps[i].commits;
    ps.has_commit = commits > 0;
    ps.ci = flow_commit_index(f);
    followers = ps.has_commit && ps.ci + 1 < f->n_steps;

    for (size_t i = 0; i < f->n_steps; i++) {
        const struct flow_step *s = &f->steps[i];
        bool after = ps.has_commit && i > ps.ci;
        const char **avail = apbot_xcalloc(ps.n_captures + 1, sizeof(*avail));
        struct flow_scope url = {.place = FLOW_P_STEP_URL}, field;
        char msg[160];

        /* What this step may use: values captured by earlier steps; a follow-up step only
         * those captured after the commit (it is re-run on DOC from a lookup) and ${doc}. */
        for (size_t j = 0; j < ps.n_captures; j++) {
            if (strcmp(ps.captures[j], "doc") == 0)
                url.doc = true;
            else if (!after || ps.capture_step[j] > ps.ci)
                avail[url.n_captures++] = ps.captures[j];
        }
        url.captures = avail;
        url.sessions = c->sessions;
        url.n_sessions = c->n_sessions;
        if (after)
            url.hint = " (a follow-up step is re-run on DOC after a lookup, where only ${doc} and "
                       "values captured after the committing step are known)";
        field = url;
        field.place = FLOW_P_STEP_FIELD;

        snprintf(msg, sizeof(msg), "step '%s'", s->name ? s->name : "");
        flow_tpl_check(c, s->get, &url, s->line, msg);
        if (i == 0 && !s->get && !s->send.present)
            flow_problem(c, s->line,
                         "%s: the first step needs get=\"URL\" to fetch the form (or a <send>)",
                         msg);
        if (followers && i == ps.ci + 1 && !(s->get && flow_tpl_uses(s->get, "doc")) &&
            !flow_send_uses(&s->send, "doc"))
            flow_problem(c, s->line,
                         "%s: the first step after the committing one must name the document: "
                         "get=\"...${doc}...\" or a <send> using ${doc} (follow-up steps are "
                         "re-run on the saved document, never by posting again)",
                         msg);
        for (size_t j = 0; j < i; j++)
            if (s->name && f->steps[j].name && strcmp(s->name, f->steps[j].name) == 0) {
                flow_problem(c, s->line, "step name '%s' is used twice", s->name);
                break;
            }
        if (s->send.present)
            flow_check_send(c, &s->send, &url, &field, msg);
        else
            flow_check_form(c, &s->form, &field, msg);
        for (size_t k = 0; k < s->form.n_fields; k++)
            key_written = key_written || flow_tpl_uses(s->form.fields[k].value, "key");
        for (size_t k = 0; k < s->form.lines.n_fields; k++)
            key_written = key_written || flow_tpl_uses(s->form.lines.fields[k].value, "key");
        key_written = key_written || flow_send_uses(&s->send, "key");
        flow_step_resolves(c, i);
        if (s->repeat_until_lines && s->send.present)
            flow_problem(c, s->line,
                         "%s: repeat=\"until-lines\" repeats a form's update; a <send> step "
                         "sends its body once, lines and all ({\"$each-line\": ...})",
                         msg);
        if (s->repeat_until_lines && ps.has_commit && i >= ps.ci)
            flow_problem(c, s->line,
                         "%s: repeat=\"until-lines\" only before the committing step (a "
                         "repeated submit there could book twice)",
                         msg);
        flow_check_skip(c, i, msg);
        if (s->repeat_until_lines && !s->form.lines.present)
            flow_problem(c, s->line,
                         "%s: repeat=\"until-lines\" needs a <lines> in its form (it repeats "
                         "until the page has every line's controls)",
                         msg);
        if (s->form.lines.present && s->form.lines.missing == FLOW_MISSING_SKIP && ps.has_commit &&
            i >= ps.ci)
            flow_problem(c, s->form.lines.line,
                         "%s: missing=\"skip\" only before the committing step (the document "
                         "would be booked without the skipped lines)",
                         msg);
        /* completed on a follow-up step: a page that shows the document finished (approved
         * by someone meanwhile) ends the post; before the commit nothing can be booked */
        flow_check_rules(c, s->rules, s->n_rules,
                         i == ps.ci && followers ? FLOW_RULES_STEP | (1u << FLOW_OUT_SAVED)
                         : after                 ? FLOW_RULES_STEP | (1u << FLOW_OUT_COMPLETED)
                                                 : FLOW_RULES_STEP,
                         "step rules before the committing one (completed only on follow-up "
                         "steps and in <outcomes>)");
        flow_check_when(c, s->rules, s->n_rules,
                        s->send.present ? "a <send> step (it fills no form, so nothing can be "
                                          "missing)"
                                        : NULL);
        flow_check_captures(c, &ps, i);
        flow_check_compares(c, &ps, i, &field);
        for (size_t r = 0; r < s->n_rules; r++)
            flow_check_doc_yield(c, &s->rules[r],
                                 flow_step_captures_doc(s) || (after && ps.doc_by_commit),
                                 "<capture name=\"doc\"> on this step");
        flow_scan_captures(c, &ps, i);
        if (!ps.has_commit || i <= ps.ci)
            for (size_t j = 0; j < ps.n_captures; j++)
                ps.doc_by_commit = ps.doc_by_commit || strcmp(ps.captures[j], "doc") == 0;
        free(avail);
    }
    flow_check_rules(c, f->outcomes, f->n_outcomes, FLOW_RULES_OUTCOMES, "<outcomes>");
    flow_check_when(c, f->outcomes, f->n_outcomes,
                    "<outcomes> (they are tried on the last step's answer; put the rule on the "
                    "step)");
    for (size_t i = 0; i < f->n_outcomes; i++) {
        have_completed = have_completed || f->outcomes[i].outcome == FLOW_OUT_COMPLETED;
        flow_check_doc_yield(c, &f->outcomes[i], ps.doc_by_commit,
                             "capture doc at or before the committing step (a saved rule or "
                             "<capture name=\"doc\">)");
    }
    if (!have_completed)
        flow_problem(c, f->outcomes_line,
                     "post: no rule with outcome=\"completed\" in <outcomes>: nothing could ever "
                     "be confirmed as booked");
    if (commits == 0)
        flow_problem(c, f->post_line,
                     "post: no step has commits=\"true\" (mark the step whose submit may book "
                     "the document)");
    else if (commits > 1)
        flow_problem(c, f->post_line,
                     "post: %zu steps have commits=\"true\"; exactly one step may book", commits);
    if (followers && !f->lookup.has_finished)
        flow_problem(c, f->lookup.line,
                     "lookup: steps follow the committing step '%s', so the lookup needs "
                     "<finished column=\"...\">: without it a saved draft would pass for a "
                     "finished booking",
                     f->steps[ps.ci].name ? f->steps[ps.ci].name : "");
    if (f->lookup.key_column && !key_written)
        flow_problem(c, f->line,
                     "lookup compares key-column '%s' but no post field writes ${key}: the "
                     "lookup could never find what apbot posted",
                     f->lookup.key_column);
    free(ps.captures);
    free(ps.capture_step);
}

static void flow_check_list(struct flow_ctx *c)
{
    const struct flow_list *ls = &c->f->list;
    struct flow_scope sc = {.place = FLOW_P_LIST_URL};
    bool day, from, to;

    sc.sessions = c->sessions;
    sc.n_sessions = c->n_sessions;
    if (!ls->get == !ls->send.present)
        flow_problem(c, ls->line, "list: give get=\"URL\" or <send>, one of the two");
    flow_tpl_check(c, ls->get, &sc, ls->line, "list get");
    flow_check_send(c, &ls->send, &sc, &sc, "list");
    day = flow_tpl_uses(ls->get, "date") || flow_send_uses(&ls->send, "date");
    from = flow_tpl_uses(ls->get, "from") || flow_send_uses(&ls->send, "from");
    to = flow_tpl_uses(ls->get, "to") || flow_send_uses(&ls->send, "to");
    bool paged = flow_tpl_uses(ls->get, "page") || flow_send_uses(&ls->send, "page") ||
                 flow_tpl_uses(ls->get, "offset") || flow_send_uses(&ls->send, "offset");
    c->f->list.paged = paged;
    c->f->list.range = from || to;
    if ((ls->get || ls->send.present) && !day && !(from && to))
        flow_problem(c, ls->line,
                     "list: its request must use ${date} (one day) or both ${from} and ${to} (a "
                     "range)");
    else if (day && (from || to))
        flow_problem(c, ls->line, "list: get uses ${date} and a range (${from}/${to}): pick one");
    flow_check_table_kind(c, &ls->table, false, false, "list table");
    flow_check_table(c, &ls->table, "list table");
    flow_check_currency(c, ls->currency, ls->line, "list");
    if (!flow_table_has(&ls->table, "doc"))
        flow_problem(c, ls->table.line, "list table: needs a 'doc' column (the document number)");
    if (ls->table.next == NULL && !paged && ls->max_pages > 1)
        flow_problem(c, ls->line,
                     "list: max-pages > 1 needs ${page} or ${offset} in its request, or a next "
                     "link in the table");
    if ((flow_tpl_uses(ls->get, "offset") || flow_send_uses(&ls->send, "offset") ||
         flow_tpl_uses(ls->get, "limit") || flow_send_uses(&ls->send, "limit")) &&
        ls->page_size <= 0)
        flow_problem(c, ls->line, "list: ${offset} and ${limit} need page-size=\"N\"");
}

/* Relations between policy numbers, checked on the final numbers (defaults included). */
static void flow_check_policy(struct flow_ctx *c)
{
    const struct flow_policy *p = &c->f->policy;
    long line = c->f->policy_line;

    if (p->settle_ms < p->timeout_ms)
        flow_problem(c, line,
                     "policy: settle-ms (%ld) is shorter than timeout-ms (%ld): a reconciliation "
                     "lookup could miss a record the ERP is still committing",
                     p->settle_ms, p->timeout_ms);
    if (p->connect_timeout_ms > p->timeout_ms)
        flow_problem(c, line, "policy: connect-timeout-ms (%ld) is longer than timeout-ms (%ld)",
                     p->connect_timeout_ms, p->timeout_ms);
    if (p->backoff_cap_ms < p->backoff_base_ms)
        flow_problem(c, line, "policy: backoff-cap-ms (%ld) is below backoff-base-ms (%ld)",
                     p->backoff_cap_ms, p->backoff_base_ms);
    if (p->lease_ms <= p->timeout_ms)
        flow_problem(c, line,
                     "policy: lease-ms (%ld) must be longer than timeout-ms (%ld), or another "
                     "process could take an item in the middle of its post",
                     p->lease_ms, p->timeout_ms);
}

/* Rule list k of the flow in file order: 0 login, 1..n_steps the steps, n_steps + 1 the
 * outcomes. */
static const struct flow_rule *flow_rule_list(const struct flow *f, size_t k, size_t *ret_n)
{
    if (k == 0) {
        *ret_n = f->login.n_rules;
        return f->login.rules;
    }
    if (k <= f->n_steps) {
        *ret_n = f->steps[k - 1].n_rules;
        return f->steps[k - 1].rules;
    }
    *ret_n = f->n_outcomes;
    return f->outcomes;
}

/* Every rule name names one rule in evidence: each is compared with every rule before it. */
static void flow_check_rule_names(struct flow_ctx *c)
{
    const struct flow *f = c->f;

    for (size_t a = 0; a <= f->n_steps + 1; a++) {
        size_t na, nb;
        const struct flow_rule *ra = flow_rule_list(f, a, &na);
        for (size_t i = 0; i < na; i++) {
            bool dup = false;
            for (size_t b = 0; b <= a && !dup; b++) {
                const struct flow_rule *rb = flow_rule_list(f, b, &nb);
                if (b == a)
                    nb = i;
                for (size_t j = 0; j < nb && !dup; j++)
                    if (ra[i].name && rb[j].name && strcmp(ra[i].name, rb[j].name) == 0) {
                        flow_problem(c, ra[i].line, "rule name '%s' is already used at line %d",
                                     ra[i].name, rb[j].line);
                        dup = true;
                    }
            }
        }
    }
}

void flow_check(struct flow_ctx *c)
{
    flow_check_erp(c);
    flow_check_login(c);
    flow_check_headers(c);
    flow_check_resolves(c);
    flow_check_lookup(c);
    flow_check_post(c);
    flow_check_list(c);
    flow_check_policy(c);
    flow_check_rule_names(c);
}
