/*
 * record.h - `apbot flow record`: a draft flow from one session recorded in the browser.
 *
 * The person records, with the developer tools' Network tab, a session against the ERP: the
 * login, a search by a reference, one sample invoice entered by hand (its values typed in the
 * ERP's own formats), saved (and approved), the search again, the day's listing; saves it as a
 * HAR file; and gives apbot the sample invoice (any file enqueue reads, FILE#N). record_run()
 * reads both and writes a draft flow: what it could decide from the recording (the login and
 * the session, which values are which variables, the committing request and its document
 * number, the steps before and after it, the lookup and the listing) and a <todo> for every
 * decision it could not make, which `apbot flow check`, `flow trace` and `run` refuse until a
 * person has answered it. The HAR holds the password, cookies and tokens: none of them is
 * ever copied into the draft or the report. docs/recording.md is the guide.
 */
#ifndef APBOT_RECORD_H
#define APBOT_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* What to record from. Strings are borrowed for the call. */
struct record_request {
    const char *har_path;      /* the HAR file */
    const char *invoice_path;  /* the sample invoice (any format enqueue reads) */
    long invoice_n;            /* its N-th invoice, from 1 */
    const char *invoice_label; /* how the user named it ("sample.csv#1"), for the report */
    const char *vendors_path;  /* the vendor map, or NULL */
    const char *key_field;     /* the field the key goes into (--key-field), or NULL: found */
    const char *out_path;      /* the draft flow to write */
    const char *name;          /* the flow's name, or NULL (from the output file's name) */
    const char *user;          /* APBOT_ERP_USER, or NULL: told from the recording */
    const char *password;      /* APBOT_ERP_PASSWORD, or NULL: told from the recording */
    bool force;                /* overwrite out_path when it exists */
};

/* How a recording ended. */
struct record_result {
    bool written;     /* the draft was written */
    size_t open;      /* open decisions (<todo>s) in it */
    size_t exchanges; /* HAR entries read as exchanges with the ERP */
    size_t used;      /* of them, the ones the draft stands on */
};

/*
 * Reads the HAR and the sample, writes the draft to rq->out_path (never over an existing file
 * unless rq->force), and prints to out what it decided, each open decision with the HAR entry
 * it came from, and to errout the warning that the HAR is a secret and why it could not
 * record (a HAR or an invoice that cannot be read). Needs apbot_global_init(). Returns
 * APBOT_OK when the draft was written (with or without open decisions), else an apbot_rc;
 * *ret (may be NULL) says more.
 */
int record_run(const struct record_request *rq, struct record_result *ret, FILE *out, FILE *errout);

#endif
