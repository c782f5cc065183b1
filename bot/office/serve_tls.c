/*
 * serve_tls.c - the review page over TLS without a proxy (serve-int.h): the certificate and
 * its key read from their files and checked before libmicrohttpd (built with GnuTLS on Debian)
 * is given them, so that a wrong file is a sentence naming it, not a daemon that will not
 * start.
 *
 * The key follows the rule of secret files (secret.h: a regular file group and others cannot
 * read); the certificate is public. Both are PEM, the key unencrypted (a service has nobody to
 * type a passphrase), the certificate's chain may follow it in the same file. The pair must
 * belong together (X509_check_private_key). The key's bytes are wiped when the server stops.
 */
#include "office/serve-int.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apbot/buf.h"
#include "apbot/secret.h"

#define TLS_FILE_MAX (256 * 1024) /* bytes of a certificate chain or a key file */

/* Reads all of fd (what, path name it in messages) into *ret (heap). */
static int read_pem(int fd, const char *what, const char *path, char **ret, char *err,
                    size_t errlen)
{
    struct apbot_buf b;
    char chunk[4096];
    int rc = APBOT_OK;

    apbot_buf_init(&b, TLS_FILE_MAX);
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = apbot_fail(err, errlen, APBOT_E_IO, "%s: %.200s: %s", what, path, strerror(errno));
            break;
        }
        if (n == 0)
            break;
        if (apbot_buf_add(&b, chunk, (size_t)n) != APBOT_OK) {
            rc = apbot_fail(err, errlen, APBOT_E_IO, "%s: %.200s: longer than %d bytes", what, path,
                            TLS_FILE_MAX);
            break;
        }
    }
    explicit_bzero(chunk, sizeof(chunk));
    if (rc == APBOT_OK && memchr(apbot_buf_str(&b), '\0', b.len))
        rc = apbot_fail(err, errlen, APBOT_E_IO, "%s: %.200s: not a PEM file", what, path);
    if (rc != APBOT_OK) {
        apbot_buf_wipe_done(&b);
        return rc;
    }
    *ret = apbot_buf_steal(&b, NULL);
    return APBOT_OK;
}

/* The certificate file: a regular file (anything else refused without reading). */
static int read_cert(const char *path, char **ret, char *err, size_t errlen)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK), rc;

    if (fd < 0)
        return apbot_fail(err, errlen, APBOT_E_IO, "--tls-cert: %.200s: %s", path, strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return apbot_fail(err, errlen, APBOT_E_IO, "--tls-cert: %.200s: not a regular file", path);
    }
    rc = read_pem(fd, "--tls-cert", path, ret, err, errlen);
    close(fd);
    return rc;
}

/* Does the pair belong together? A sentence on the certificate (subject, valid until) into
 * what when it does. */
static int check_pair(const struct serve_options *o, const char *cert, const char *key, char *what,
                      size_t whatlen, char *err, size_t errlen)
{
    BIO *cb = BIO_new_mem_buf(cert, -1), *kb = BIO_new_mem_buf(key, -1), *mem = NULL;
    X509 *x = NULL;
    EVP_PKEY *pkey = NULL;
    int rc = APBOT_E_IO;

    if (!cb || !kb)
        abort(); /* out of memory */
    if (!(x = PEM_read_bio_X509(cb, NULL, NULL, NULL))) {
        apbot_fail(err, errlen, rc, "--tls-cert: %.200s: not a PEM X.509 certificate",
                   o->tls_cert_path);
        goto out;
    }
    /* no passphrase callback: an encrypted key is refused, not asked for */
    if (!(pkey = PEM_read_bio_PrivateKey(kb, NULL, NULL, (void *)""))) {
        apbot_fail(err, errlen, rc, "--tls-key: %.200s: not an unencrypted PEM private key",
                   o->tls_key_path);
        goto out;
    }
    if (X509_check_private_key(x, pkey) != 1) {
        apbot_fail(err, errlen, rc,
                   "--tls-key %.200s does not belong to the certificate of --tls-cert %.200s",
                   o->tls_key_path, o->tls_cert_path);
        goto out;
    }
    mem = BIO_new(BIO_s_mem());
    if (mem) {
        char subject[160] = "?", until[64] = "?";
        int n;
        X509_NAME_oneline(X509_get_subject_name(x), subject, sizeof(subject));
        if (ASN1_TIME_print(mem, X509_get0_notAfter(x)) == 1 &&
            (n = BIO_read(mem, until, (int)sizeof(until) - 1)) > 0)
            until[n] = '\0';
        snprintf(what, whatlen, "certificate %s, valid until %s", subject, until);
    }
    rc = APBOT_OK;
out:
    ERR_clear_error();
    BIO_free(mem);
    EVP_PKEY_free(pkey);
    X509_free(x);
    BIO_free(cb);
    BIO_free(kb);
    return rc;
}

int serve_tls_load(struct serve_server *s, char *err, size_t errlen)
{
    const struct serve_options *o = s->opt;
    int fd = -1, rc;

    if (!o->tls_cert_path && !o->tls_key_path)
        return APBOT_OK;
    if (!o->tls_cert_path || !o->tls_key_path)
        return apbot_fail(err, errlen, APBOT_E_INVAL,
                          "--tls-cert and --tls-key go together: a certificate needs its key");
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
        return apbot_fail(err, errlen, APBOT_E_IO,
                          "this libmicrohttpd (%s) was built without TLS: put a TLS proxy in "
                          "front instead",
                          MHD_get_version());
    rc = read_cert(o->tls_cert_path, &s->tls_cert, err, errlen);
    if (rc == APBOT_OK)
        rc = secret_open_private(o->tls_key_path, false, "--tls-key", &fd, err, errlen) == APBOT_OK
                 ? APBOT_OK
                 : APBOT_E_IO;
    if (rc == APBOT_OK) {
        rc = read_pem(fd, "--tls-key", o->tls_key_path, &s->tls_key, err, errlen);
        close(fd);
    }
    if (rc == APBOT_OK)
        rc = check_pair(o, s->tls_cert, s->tls_key, s->tls_what, sizeof(s->tls_what), err, errlen);
    if (rc != APBOT_OK) {
        serve_tls_free(s);
        return rc;
    }
    s->tls = true;
    return APBOT_OK;
}

void serve_tls_free(struct serve_server *s)
{
    free(s->tls_cert);
    secret_free(s->tls_key);
    s->tls_cert = s->tls_key = NULL;
    s->tls = false;
}
