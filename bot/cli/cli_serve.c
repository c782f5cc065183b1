/*
 * cli_serve.c - `apbot serve --flow FILE [--listen 127.0.0.1:8470] [--erp URL] [--reviewers
 * FILE] [--trusted-proxy ADDR[,ADDR]] [--proxy-header NAME] [--session-idle S]
 * [--session-max S] [--tls-cert FILE --tls-key FILE]`: the review page over the queue
 * database (serve.c), over https with a certificate, until SIGINT or SIGTERM.
 *
 * The flow is what verifies a "posted as DOC" decision and reads the ERP's listing for the
 * report; APBOT_ERP_USER / APBOT_ERP_PASSWORD are its credentials. Who may sign in: the
 * reviewers file (--reviewers or APBOT_REVIEWERS), else the shared APBOT_REVIEW_PASSWORD, else
 * nobody (loopback only, read-only). The first line on stdout is "listening on
 * http://HOST:PORT" (--listen HOST:0 picks a free port); decisions, sign-ins and refusals are
 * logged on stderr, one line each. Exit codes: 0 stopped by a signal, 1 error (database, flow,
 * reviewers file, certificate or key, address in use), 2 usage (including an unsafe --listen).
 */
#include "cli.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apbot/error.h"
#include "apbot/flow.h"
#include "apbot/mem.h"
#include "apbot/secret.h"
#include "apbot/serve.h"

static atomic_int serve_stop;

static void on_signal(int sig)
{
    (void)sig;
    atomic_store(&serve_stop, 1);
}

static void serve_usage(FILE *out)
{
    fprintf(out,
            "usage: apbot serve --flow FILE [--listen HOST:PORT] [--erp URL]\n"
            "                   [--reviewers FILE] [--trusted-proxy ADDR[,ADDR...]]\n"
            "                   [--proxy-header NAME] [--session-idle SECONDS]\n"
            "                   [--session-max SECONDS] [--tls-cert FILE --tls-key FILE]\n"
            "                   [--log-format text|json]\n"
            "\n"
            "The review queue and the daily report as a local web page (default listen\n"
            "%s). Who may sign in and decide: the reviewers file (--reviewers, default\n"
            "$APBOT_REVIEWERS; apbot reviewer add), each person with their own password and\n"
            "role; behind the company's login proxy, the person named in its header (default\n"
            "%s), believed only from the --trusted-proxy addresses. Without a reviewers\n"
            "file, APBOT_REVIEW_PASSWORD (or its _FILE form, or the systemd credential\n"
            "review-password) is one shared password; with neither, the page is read-only\n"
            "and loopback only. Sessions end after --session-idle (default %d) and\n"
            "--session-max (default %d) seconds. --tls-cert and --tls-key (PEM; the key\n"
            "readable by its owner only) serve https itself, TLS 1.2 and 1.3, the cookies\n"
            "Secure. Sign-ins, refusals and decisions are logged on stderr, one line each\n"
            "(--log-format json: one JSON object each, as apbot run writes them).\n"
            "Stop with Ctrl-C or SIGTERM.\n"
            "exit codes: 0 stopped, 1 error (database, flow, reviewers file, address in use),\n"
            "2 usage\n",
            SERVE_DEFAULT_LISTEN, SERVE_PROXY_HEADER, SERVE_SESSION_IDLE_S, SERVE_SESSION_MAX_S);
}

/* A number of seconds for option name; false (with a message) when it is none. */
static bool seconds_arg(const char *name, const char *v, int *ret)
{
    char *end = NULL;
    long n = strtol(v, &end, 10);
    if (!end || *end || n <= 0 || n > 7 * 24 * 3600) {
        fprintf(stderr, "apbot serve: %s wants seconds (1 to a week)\n", name);
        return false;
    }
    *ret = (int)n;
    return true;
}

int cli_serve(const struct cli_ctx *ctx, int argc, char **argv)
{
    const char *flow_path = NULL, *listen = SERVE_DEFAULT_LISTEN, *erp_url = ctx->erp_url;
    const char *reviewers = getenv("APBOT_REVIEWERS"), *proxies = NULL, *proxy_header = NULL;
    const char *tls_cert = NULL, *tls_key = NULL;
    int idle_s = 0, max_s = 0;
    bool log_json = false;
    struct serve_options opt;
    struct serve_addr addr;
    struct flow *f = NULL;
    struct sigaction sa;
    char err[APBOT_ERR_LEN];
    char *flow_err = NULL, *review_password = NULL;
    int status = CLI_EXIT_ERROR;
    int rc;

    for (int i = 1; i < argc; i++) {
        const bool has = i + 1 < argc;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            serve_usage(stdout);
            return CLI_EXIT_OK;
        } else if (strcmp(argv[i], "--flow") == 0 && has) {
            flow_path = argv[++i];
        } else if (strcmp(argv[i], "--listen") == 0 && has) {
            listen = argv[++i];
        } else if (strcmp(argv[i], "--erp") == 0 && has) {
            erp_url = argv[++i];
        } else if (strcmp(argv[i], "--reviewers") == 0 && has) {
            reviewers = argv[++i];
        } else if (strcmp(argv[i], "--trusted-proxy") == 0 && has) {
            proxies = argv[++i];
        } else if (strcmp(argv[i], "--proxy-header") == 0 && has) {
            proxy_header = argv[++i];
        } else if (strcmp(argv[i], "--tls-cert") == 0 && has) {
            tls_cert = argv[++i];
        } else if (strcmp(argv[i], "--tls-key") == 0 && has) {
            tls_key = argv[++i];
        } else if (strcmp(argv[i], "--log-format") == 0 && has) {
            const char *v = argv[++i];
            if (strcmp(v, "json") != 0 && strcmp(v, "text") != 0) {
                fprintf(stderr, "apbot serve: --log-format wants text or json\n");
                return CLI_EXIT_USAGE;
            }
            log_json = strcmp(v, "json") == 0;
        } else if (strcmp(argv[i], "--session-idle") == 0 && has) {
            if (!seconds_arg(argv[i], argv[i + 1], &idle_s))
                return CLI_EXIT_USAGE;
            i++;
        } else if (strcmp(argv[i], "--session-max") == 0 && has) {
            if (!seconds_arg(argv[i], argv[i + 1], &max_s))
                return CLI_EXIT_USAGE;
            i++;
        } else {
            fprintf(stderr, "apbot serve: unknown or incomplete option '%s'\n", argv[i]);
            serve_usage(stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (!flow_path) {
        fprintf(stderr, "apbot serve: --flow FILE is required (it verifies decisions in the "
                        "ERP)\n");
        serve_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (reviewers && !*reviewers)
        reviewers = NULL;
    if (!tls_cert != !tls_key) {
        fprintf(stderr, "apbot serve: --tls-cert and --tls-key go together\n");
        return CLI_EXIT_USAGE;
    }
    review_password = secret_dup(SECRET_REVIEW_PASSWORD);
    if (reviewers && review_password) {
        /* the file says who may decide, each by name: one password for all is not used */
        fprintf(stderr,
                "apbot serve: APBOT_REVIEW_PASSWORD is not used: the reviewers file %s "
                "says who may sign in\n",
                reviewers);
        secret_free(review_password);
        review_password = NULL;
    }
    if (serve_parse_listen(listen, &addr, err, sizeof(err)) != APBOT_OK ||
        serve_exposure_ok(&addr, reviewers != NULL, review_password, err, sizeof(err)) !=
            APBOT_OK) {
        fprintf(stderr, "apbot serve: %s\n", err);
        secret_free(review_password);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(ctx->db_path, ":memory:") == 0 || access(ctx->db_path, F_OK) != 0) {
        fprintf(stderr, "apbot serve: no queue database at %s\n", ctx->db_path);
        secret_free(review_password);
        return CLI_EXIT_ERROR;
    }
    flow_err = apbot_xcalloc(1, 16 * 1024);
    if (flow_load(flow_path, &f, flow_err, 16 * 1024) != APBOT_OK) {
        fprintf(stderr, "apbot serve: %s\n", flow_err);
        goto out;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    memset(&opt, 0, sizeof(opt));
    opt.db_path = ctx->db_path;
    opt.flow = f;
    opt.erp_url = erp_url;
    opt.listen = listen;
    opt.password = review_password;
    opt.reviewers_path = reviewers;
    opt.trusted_proxies = proxies;
    opt.proxy_header = proxy_header;
    opt.session_idle_s = idle_s;
    opt.session_max_s = max_s;
    opt.tls_cert_path = tls_cert;
    opt.tls_key_path = tls_key;
    opt.stop = &serve_stop;
    opt.announce = stdout;
    opt.log = stderr;
    opt.log_json = log_json;
    rc = serve_run(&opt, err, sizeof(err));
    if (rc != APBOT_OK) {
        fprintf(stderr, "apbot serve: %s\n", err);
        status = rc == APBOT_E_INVAL ? CLI_EXIT_USAGE : CLI_EXIT_ERROR;
        goto out;
    }
    status = CLI_EXIT_OK;
out:
    flow_free(f);
    free(flow_err);
    secret_free(review_password);
    return status;
}
