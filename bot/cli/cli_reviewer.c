/*
 * cli_reviewer.c - `apbot reviewer add|passwd|set|remove|list`: the reviewers file of the
 * review page (reviewers.h) managed without a text editor.
 *
 * The file is named by --file or APBOT_REVIEWERS. A password is read from the terminal (twice,
 * without echo) or, when standard input is not a terminal, as one line from it - never from the
 * command line, where `ps` and the shell's history would keep it. Every change takes the
 * file's lock, reads it, changes one line and writes it whole (reviewers_save). Exit codes: 0
 * done, 3 refused (the login is taken, or there is no such login), 1 error (the file, the
 * terminal), 2 usage.
 */
#include "cli.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "apbot/error.h"
#include "apbot/review.h"
#include "apbot/reviewers.h"
#include "apbot/text.h"

#define REVIEWER_LOCK_WAIT_MS 10000

static void reviewer_usage(FILE *out)
{
    fprintf(out,
            "usage: apbot reviewer add LOGIN --role viewer|reviewer [--name DISPLAY] "
            "[--no-password]\n"
            "       apbot reviewer passwd LOGIN [--no-password]\n"
            "       apbot reviewer set LOGIN [--role viewer|reviewer] [--name DISPLAY]\n"
            "       apbot reviewer remove LOGIN\n"
            "       apbot reviewer list [--json]\n"
            "  every command: [--file FILE] (default $APBOT_REVIEWERS)\n"
            "\n"
            "Who may sign in to the review page (apbot serve --reviewers FILE) and what they may\n"
            "do: a viewer sees every page and decides nothing, a reviewer decides. A password is\n"
            "read from the terminal (twice, not shown) or as one line from standard input, never\n"
            "from the command line; --no-password makes a person who signs in only through the\n"
            "company's login proxy (apbot serve --trusted-proxy). The file is rewritten whole,\n"
            "mode 0600; apbot serve reads it again when it changes.\n"
            "exit codes: 0 done, 3 refused (login taken or unknown), 1 error, 2 usage\n");
}

/* ---- reading a password ----------------------------------------------------------------- */

static struct termios saved_tty;
static volatile sig_atomic_t tty_changed;

static void restore_tty(void)
{
    if (tty_changed) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tty);
        tty_changed = 0;
    }
}

/* Ctrl-C while the echo is off: the terminal gets its echo back before apbot goes. */
static void on_signal(int sig)
{
    restore_tty();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Reads one line of at most max bytes from stdin into buf (max + 2 bytes); false at an empty
 * end of input or past the bound (the rest of a long line is left unread). The line break is
 * dropped. */
static bool read_line(char *buf, size_t max)
{
    size_t n = 0;
    bool any = false;

    for (;;) {
        char ch;
        ssize_t r = read(STDIN_FILENO, &ch, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (!any)
                return false;
            break;
        }
        any = true;
        if (ch == '\n')
            break;
        if (n > max)
            return false;
        buf[n++] = ch;
    }
    if (n > 0 && buf[n - 1] == '\r')
        n--;
    buf[n] = '\0';
    return n <= max;
}

/* Prompts on stderr and reads a line without echo from the terminal on stdin. */
static bool read_hidden(const char *prompt, char *buf, size_t max)
{
    struct termios quiet;
    struct sigaction sa, old_int, old_term;
    bool ok;

    if (tcgetattr(STDIN_FILENO, &saved_tty) != 0)
        return false;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    quiet = saved_tty;
    quiet.c_lflag &= ~(tcflag_t)(ECHO | ECHOE | ECHOK | ECHONL);
    fputs(prompt, stderr);
    fflush(stderr);
    tty_changed = 1;
    if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet) != 0) {
        tty_changed = 0;
        ok = false;
    } else {
        ok = read_line(buf, max);
    }
    restore_tty();
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    fputc('\n', stderr);
    return ok;
}

/* The new password for login: twice from the terminal, or one line of standard input. Its
 * hash goes into hash. Returns an exit code (CLI_EXIT_OK when hashed). */
static int new_password(const char *login, char *hash, size_t hashlen)
{
    char pw[REVIEWERS_PASSWORD_MAX + 2], again[REVIEWERS_PASSWORD_MAX + 2], why[256];
    char err[APBOT_ERR_LEN];
    int status = CLI_EXIT_ERROR;

    if (isatty(STDIN_FILENO)) {
        char prompt[128];
        snprintf(prompt, sizeof(prompt), "New password for %s (%d characters at least): ", login,
                 REVIEWERS_PASSWORD_MIN);
        if (!read_hidden(prompt, pw, REVIEWERS_PASSWORD_MAX) ||
            !read_hidden("The same again: ", again, REVIEWERS_PASSWORD_MAX)) {
            fprintf(stderr, "apbot reviewer: no password read from the terminal\n");
            goto out;
        }
        if (strcmp(pw, again) != 0) {
            fprintf(stderr, "apbot reviewer: the two passwords differ; nothing was changed\n");
            status = CLI_EXIT_USAGE;
            goto out;
        }
    } else if (!read_line(pw, REVIEWERS_PASSWORD_MAX)) {
        fprintf(stderr,
                "apbot reviewer: no password on standard input (one line, at most %d bytes)\n",
                REVIEWERS_PASSWORD_MAX);
        status = CLI_EXIT_USAGE;
        goto out;
    }
    if (!reviewers_password_ok(pw, why, sizeof(why))) {
        fprintf(stderr, "apbot reviewer: %s; nothing was changed\n", why);
        status = CLI_EXIT_USAGE;
        goto out;
    }
    if (reviewers_hash_password(pw, hash, hashlen, err, sizeof(err)) != APBOT_OK) {
        fprintf(stderr, "apbot reviewer: %s\n", err);
        goto out;
    }
    status = CLI_EXIT_OK;
out:
    explicit_bzero(pw, sizeof(pw));
    explicit_bzero(again, sizeof(again));
    return status;
}

/* ---- the commands ----------------------------------------------------------------------- */

struct reviewer_args {
    const char *verb, *login, *file, *role, *name;
    bool no_password, json;
};

/* The kind of password a hash is, for list (never the hash). */
static const char *hash_kind(const char *hash)
{
    if (strcmp(hash, REVIEWERS_NO_PASSWORD) == 0)
        return "none";
    if (strncmp(hash, "$y$", 3) == 0)
        return "yescrypt";
    if (strncmp(hash, "$gy$", 4) == 0)
        return "gost-yescrypt";
    if (strncmp(hash, "$7$", 3) == 0)
        return "scrypt";
    return "bcrypt";
}

static int reviewer_list(const struct reviewer_args *a)
{
    struct reviewers rv;
    char err[APBOT_ERR_LEN], esc[4 * REVIEWERS_DISPLAY_MAX + 8];

    if (reviewers_load(a->file, false, &rv, err, sizeof(err)) != APBOT_OK) {
        fprintf(stderr, "apbot reviewer: %s\n", err);
        return CLI_EXIT_ERROR;
    }
    json_t *list = a->json ? json_array() : NULL;
    int bad = a->json && !list;
    for (size_t i = 0; i < rv.n && !bad; i++) {
        const struct reviewer *p = &rv.v[i];
        if (a->json) {
            json_t *o = json_pack("{s:s?, s:s?, s:s, s:s}", "login", p->login, "display_name",
                                  reviewer_display(p), "role", reviewers_role_name(p->role),
                                  "password", hash_kind(p->hash));
            bad = !o || json_array_append_new(list, o) != 0;
        } else {
            printf("%-20s %-9s %-14s %s\n", p->login, reviewers_role_name(p->role),
                   hash_kind(p->hash), text_escape_into(esc, sizeof(esc), reviewer_display(p), 0));
        }
    }
    if (a->json && !bad) /* jansson escapes what a display name may hold */
        bad = json_dumpf(list, stdout, JSON_PRESERVE_ORDER) != 0 || putchar('\n') == EOF;
    json_decref(list);
    if (bad) {
        fprintf(stderr, "apbot reviewer: cannot write the list as JSON\n");
        reviewers_done(&rv);
        return CLI_EXIT_ERROR;
    }
    reviewers_done(&rv);
    return CLI_EXIT_OK;
}

/* add, passwd, set, remove: one change of the file under its lock. */
static int reviewer_change(const struct reviewer_args *a)
{
    const bool add = strcmp(a->verb, "add") == 0, passwd = strcmp(a->verb, "passwd") == 0;
    const bool set = strcmp(a->verb, "set") == 0;
    struct reviewers rv = {0};
    struct reviewer *p, one;
    char err[APBOT_ERR_LEN];
    int lock = -1, status = CLI_EXIT_ERROR, rc;

    memset(&one, 0, sizeof(one));
    if (reviewers_lock(a->file, REVIEWER_LOCK_WAIT_MS, &lock, err, sizeof(err)) != APBOT_OK ||
        reviewers_load(a->file, add, &rv, err, sizeof(err)) != APBOT_OK) {
        fprintf(stderr, "apbot reviewer: %s\n", err);
        goto out;
    }
    p = reviewers_find_mut(&rv, a->login);
    if (add && p) {
        fprintf(stderr, "apbot reviewer: %s is already in %s (apbot reviewer set or passwd)\n",
                p->login, a->file);
        status = CLI_EXIT_REFUSED;
        goto out;
    }
    if (!add && !p) {
        fprintf(stderr, "apbot reviewer: there is no %s in %s\n", a->login, a->file);
        status = CLI_EXIT_REFUSED;
        goto out;
    }
    if (add) {
        snprintf(one.login, sizeof(one.login), "%s", a->login);
        p = &one;
    }
    if (a->role)
        p->role = reviewers_role_from_name(a->role);
    if (a->name)
        snprintf(p->display, sizeof(p->display), "%s", a->name);
    if (add || passwd) {
        if (a->no_password) {
            snprintf(p->hash, sizeof(p->hash), "%s", REVIEWERS_NO_PASSWORD);
        } else {
            status = new_password(p->login, p->hash, sizeof(p->hash));
            if (status != CLI_EXIT_OK)
                goto out;
            status = CLI_EXIT_ERROR;
        }
    }
    if (strcmp(a->verb, "remove") == 0)
        rc = reviewers_remove(&rv, a->login);
    else if (add)
        rc = reviewers_add(&rv, &one, err, sizeof(err));
    else
        rc = APBOT_OK;
    if (rc != APBOT_OK) {
        fprintf(stderr, "apbot reviewer: %s\n", err);
        goto out;
    }
    if (reviewers_save(a->file, &rv, err, sizeof(err)) != APBOT_OK) {
        fprintf(stderr, "apbot reviewer: %s\n", err);
        goto out;
    }
    if (strcmp(a->verb, "remove") == 0)
        printf("removed %s\n", a->login);
    else
        printf("%s %s: %s%s\n",
               add      ? "added"
               : passwd ? "new password for"
               : set    ? "changed"
                        : "?",
               p->login, reviewers_role_name(p->role),
               strcmp(p->hash, REVIEWERS_NO_PASSWORD) == 0 ? ", no password (proxy only)" : "");
    status = CLI_EXIT_OK;
out:
    explicit_bzero(&one, sizeof(one));
    reviewers_done(&rv);
    reviewers_unlock(lock);
    return status;
}

/* Parses argv into a; returns -1 when fine, else the exit code. */
static int reviewer_parse(int argc, char **argv, struct reviewer_args *a)
{
    static const char *const verbs[] = {"add", "passwd", "set", "remove", "list"};
    char esc[256];
    bool known = false;

    memset(a, 0, sizeof(*a));
    a->file = getenv("APBOT_REVIEWERS");
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        const bool has = i + 1 < argc;
        if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0) {
            reviewer_usage(stdout);
            return CLI_EXIT_OK;
        } else if (strcmp(s, "--file") == 0 && has) {
            a->file = argv[++i];
        } else if (strcmp(s, "--role") == 0 && has) {
            a->role = argv[++i];
        } else if (strcmp(s, "--name") == 0 && has) {
            a->name = argv[++i];
        } else if (strcmp(s, "--no-password") == 0) {
            a->no_password = true;
        } else if (strcmp(s, "--json") == 0) {
            a->json = true;
        } else if (strncmp(s, "--password", 10) == 0) {
            fprintf(stderr, "apbot reviewer: a password is never given on the command line (ps "
                            "and the shell's history would keep it): it is read from the "
                            "terminal or standard input\n");
            return CLI_EXIT_USAGE;
        } else if (s[0] != '-' && !a->verb) {
            a->verb = s;
        } else if (s[0] != '-' && !a->login) {
            a->login = s;
        } else {
            fprintf(stderr, "apbot reviewer: unknown or incomplete option '%s'\n",
                    text_escape_into(esc, sizeof(esc), s, 0));
            reviewer_usage(stderr);
            return CLI_EXIT_USAGE;
        }
    }
    for (size_t i = 0; a->verb && i < sizeof(verbs) / sizeof(verbs[0]); i++)
        known = known || strcmp(a->verb, verbs[i]) == 0;
    if (!known) {
        reviewer_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!a->file || !*a->file) {
        fprintf(stderr, "apbot reviewer: name the reviewers file: --file FILE or "
                        "APBOT_REVIEWERS\n");
        return CLI_EXIT_USAGE;
    }
    return -1;
}

/* The options each verb takes; a message and CLI_EXIT_USAGE for others, else -1. */
static int reviewer_check(const struct reviewer_args *a)
{
    const bool list = strcmp(a->verb, "list") == 0, add = strcmp(a->verb, "add") == 0;
    const bool passwd = strcmp(a->verb, "passwd") == 0, set = strcmp(a->verb, "set") == 0;
    const char *bad = NULL;
    char esc[256];

    if (list != !a->login)
        bad = list ? "list takes no LOGIN" : "give the LOGIN";
    else if (a->login && !review_name_ok(a->login))
        bad = "a LOGIN is 1..64 of letters, digits, . _ - @";
    else if (add && !a->role)
        bad = "add needs --role viewer or --role reviewer";
    else if (a->role && reviewers_role_from_name(a->role) == REVIEWERS_ROLE__COUNT)
        bad = "--role is viewer or reviewer";
    else if (a->role && !add && !set)
        bad = "--role goes with add or set";
    else if (a->name && !add && !set)
        bad = "--name goes with add or set";
    else if (a->name && !reviewers_display_ok(a->name))
        bad = "--name is at most 100 bytes of printable UTF-8";
    else if (a->no_password && !add && !passwd)
        bad = "--no-password goes with add or passwd";
    else if (a->json && !list)
        bad = "--json goes with list";
    else if (set && !a->role && !a->name)
        bad = "set changes --role or --name (a password: apbot reviewer passwd)";
    if (!bad)
        return -1;
    fprintf(stderr, "apbot reviewer %s: %s\n", text_escape_into(esc, sizeof(esc), a->verb, 0), bad);
    return CLI_EXIT_USAGE;
}

int cli_reviewer(const struct cli_ctx *ctx, int argc, char **argv)
{
    struct reviewer_args a;
    int rc;

    (void)ctx;
    rc = reviewer_parse(argc, argv, &a);
    if (rc >= 0)
        return rc;
    rc = reviewer_check(&a);
    if (rc >= 0)
        return rc;
    if (strcmp(a.verb, "list") == 0)
        return reviewer_list(&a);
    return reviewer_change(&a);
}
