/*
 * decide.c - what an ERP answer means for an item, and whether a lookup proves an absence
 * (see decide.h). Pure functions over plain facts: the drivers (erp_post.c, erp.c) gather
 * the facts, these decide, tests/test_decide.c holds the tables. Leaf module.
 */
#include "erp/decide.h"

static const char *const post_names[] = {
    [DECIDE_NEXT] = "next",
    [DECIDE_RESTART] = "restart",
    [DECIDE_RESTART_FOLLOWUPS] = "restart-followups",
    [DECIDE_SYSTEMIC] = "systemic",
    [DECIDE_CONFIRMED] = "confirmed",
    [DECIDE_SAVED] = "saved",
    [DECIDE_REJECTED] = "rejected",
    [DECIDE_NOT_SENT] = "not-sent",
    [DECIDE_UNKNOWN] = "unknown",
    [DECIDE_ALREADY_EXISTS] = "already-exists",
    [DECIDE_FOLLOWUP_FAILED] = "followup-failed",
};
_Static_assert(sizeof(post_names) / sizeof(post_names[0]) == DECIDE_POST__COUNT,
               "every post verdict needs a name");

static const char *const lookup_names[] = {
    [DECIDE_FOUND] = "found",
    [DECIDE_FOUND_UNFINISHED] = "found-unfinished",
    [DECIDE_NOT_FOUND] = "not-found",
    [DECIDE_LOOKUP_FAILED] = "failed",
};
_Static_assert(sizeof(lookup_names) / sizeof(lookup_names[0]) == DECIDE_LOOKUP__COUNT,
               "every lookup verdict needs a name");

const char *decide_post_verdict_name(enum decide_post_verdict v)
{
    if ((int)v < 0 || v >= DECIDE_POST__COUNT)
        return "invalid";
    return post_names[v];
}

const char *decide_lookup_verdict_name(enum decide_lookup_verdict v)
{
    if ((int)v < 0 || v >= DECIDE_LOOKUP__COUNT)
        return "invalid";
    return lookup_names[v];
}

static struct decide_post verdict(enum decide_post_verdict v, bool relogin, const char *why)
{
    struct decide_post d = {.verdict = v, .relogin = relogin, .why = why};
    return d;
}

/*
 * Before the committing step was submitted (its page fetch included): nothing of this post
 * can have booked, so every unclear answer is "not sent" and a lost session restarts it.
 */
static struct decide_post before_commit(const struct decide_post_facts *f)
{
    if (f->transport != DECIDE_TR_ANSWERED)
        return verdict(DECIDE_NOT_SENT, false,
                       "no answer before the committing step: nothing can have booked");
    if (f->match_aborted)
        return verdict(DECIDE_NOT_SENT, false,
                       "a rule exhausted the match budget before the committing step");
    switch (f->rule) {
    case DECIDE_RULE_REJECTED:
        return verdict(DECIDE_REJECTED, false, "the ERP's validation refused the invoice");
    case DECIDE_RULE_ALREADY_EXISTS:
        return verdict(DECIDE_ALREADY_EXISTS, false, "the ERP says it already holds the invoice");
    case DECIDE_RULE_SESSION_EXPIRED:
        return verdict(DECIDE_RESTART, true, "the session ended before the committing step");
    case DECIDE_RULE_NOT_SENT:
        return verdict(DECIDE_NOT_SENT, false, "the ERP did not process the step");
    case DECIDE_RULE_COMPLETED:
    case DECIDE_RULE_SAVED:
    case DECIDE_RULE_UNKNOWN:
        return verdict(DECIDE_NOT_SENT, false, "before the committing step nothing can book");
    case DECIDE_RULE_NONE:
        break;
    }
    if (f->session_gone)
        return verdict(DECIDE_RESTART, true, "the session ended before the committing step");
    if (!f->page_ok)
        return verdict(DECIDE_NOT_SENT, false,
                       "an error answer before the committing step: nothing can have booked");
    if (!f->captures_ok)
        return verdict(DECIDE_NOT_SENT, false,
                       "a capture of the step found nothing: not the expected page");
    if (f->amount_differs)
        return verdict(DECIDE_REJECTED, false,
                       "the ERP's own amount differs from the invoice's: nothing was booked");
    return verdict(DECIDE_NEXT, false, "the step was answered as expected");
}

/*
 * The committing step's own submit: only an answer that proves nothing was processed is
 * "not sent"; a login page or overload answer reached through a redirect proves nothing
 * (the redirect may follow a booking), and anything unrecognised is "unknown".
 */
static struct decide_post at_commit(const struct decide_post_facts *f)
{
    if (f->transport == DECIDE_TR_NOT_SENT)
        return verdict(DECIDE_NOT_SENT, false, "the committing request was never sent");
    if (f->transport == DECIDE_TR_UNKNOWN)
        return verdict(DECIDE_UNKNOWN, false,
                       "the committing request got no complete answer: it may have booked");
    if (f->match_aborted)
        return verdict(DECIDE_UNKNOWN, false,
                       "a rule exhausted the match budget on the committing step's answer");
    switch (f->rule) {
    case DECIDE_RULE_COMPLETED:
        if (!f->doc)
            return verdict(DECIDE_UNKNOWN, false,
                           "success without a document number: reconcile to learn it");
        return verdict(DECIDE_CONFIRMED, false, "booked: the success rule matched");
    case DECIDE_RULE_SAVED:
        if (!f->doc)
            return verdict(DECIDE_UNKNOWN, false,
                           "saved without a document number: reconcile to learn it");
        if (f->last)
            return verdict(DECIDE_CONFIRMED, false, "saved, and no step follows");
        return verdict(DECIDE_SAVED, false, "saved: the follow-up steps are due");
    case DECIDE_RULE_REJECTED:
        return verdict(DECIDE_REJECTED, false, "the ERP's validation refused the invoice");
    case DECIDE_RULE_ALREADY_EXISTS:
        return verdict(DECIDE_ALREADY_EXISTS, false, "the ERP says it already holds the invoice");
    case DECIDE_RULE_NOT_SENT:
        if (f->via_redirect)
            return verdict(DECIDE_UNKNOWN, false,
                           "a not-processed answer reached through a redirect: it may have "
                           "booked");
        return verdict(DECIDE_NOT_SENT, false, "the ERP did not process the committing request");
    case DECIDE_RULE_SESSION_EXPIRED:
        if (f->via_redirect)
            return verdict(DECIDE_UNKNOWN, true,
                           "the login page reached through a redirect: it may have booked");
        return verdict(DECIDE_NOT_SENT, true,
                       "the ERP answered the committing request with its login page");
    case DECIDE_RULE_UNKNOWN:
        return verdict(DECIDE_UNKNOWN, false, "a rule calls the answer ambiguous");
    case DECIDE_RULE_NONE:
        break;
    }
    if (f->session_gone) {
        if (f->via_redirect)
            return verdict(DECIDE_UNKNOWN, true,
                           "the session marker reached through a redirect: it may have booked");
        return verdict(DECIDE_NOT_SENT, true,
                       "the ERP answered the committing request with its login page");
    }
    return verdict(DECIDE_UNKNOWN, false,
                   "no outcome rule recognises the committing step's answer: it may have "
                   "booked");
}

/*
 * After the commit: the document exists. Nothing here may lead to another post; a failure
 * is retried on the document, a provably unprocessed step after a lost session at once.
 */
static struct decide_post followup(const struct decide_post_facts *f)
{
    if (f->transport != DECIDE_TR_ANSWERED)
        return verdict(DECIDE_FOLLOWUP_FAILED, false, "a follow-up step got no complete answer");
    if (f->match_aborted)
        return verdict(DECIDE_FOLLOWUP_FAILED, false,
                       "a rule exhausted the match budget on a follow-up answer");
    switch (f->rule) {
    case DECIDE_RULE_COMPLETED:
        if (!f->doc)
            return verdict(DECIDE_FOLLOWUP_FAILED, false,
                           "success on a follow-up step but no document number known");
        return verdict(DECIDE_CONFIRMED, false, "every step done: the success rule matched");
    case DECIDE_RULE_REJECTED:
        return verdict(DECIDE_REJECTED, false, "the ERP refused a follow-up step");
    case DECIDE_RULE_SESSION_EXPIRED:
        if (f->via_redirect)
            return verdict(DECIDE_FOLLOWUP_FAILED, true,
                           "the login page reached through a redirect on a follow-up step");
        return verdict(DECIDE_RESTART_FOLLOWUPS, true,
                       "the session ended before a follow-up step was processed");
    case DECIDE_RULE_SAVED:
    case DECIDE_RULE_ALREADY_EXISTS:
    case DECIDE_RULE_NOT_SENT:
    case DECIDE_RULE_UNKNOWN:
        return verdict(DECIDE_FOLLOWUP_FAILED, false, "a follow-up step was not completed");
    case DECIDE_RULE_NONE:
        break;
    }
    if (f->session_gone) {
        if (f->via_redirect)
            return verdict(DECIDE_FOLLOWUP_FAILED, true,
                           "the session marker reached through a redirect on a follow-up step");
        return verdict(DECIDE_RESTART_FOLLOWUPS, true,
                       "the session ended before a follow-up step was processed");
    }
    if (!f->page_ok)
        return verdict(DECIDE_FOLLOWUP_FAILED, false, "a follow-up step got an error answer");
    if (!f->captures_ok)
        return verdict(DECIDE_FOLLOWUP_FAILED, false,
                       "a capture of a follow-up step found nothing");
    if (f->last && !f->fetch)
        return verdict(DECIDE_FOLLOWUP_FAILED, false,
                       "no outcome rule recognises the last step's answer");
    return verdict(DECIDE_NEXT, false, "the follow-up step was answered as expected");
}

/*
 * The page the step works on lacks its form, a control or its button, and one of the step's
 * rules matched that page. Nothing of the step was sent: before the commit (and at it) the
 * rule's word is read as on a page fetched before the submit, after it as on a follow-up's
 * page. Only a rule that says what the ERP means (refused, already held, finished, the session
 * gone) changes the course; any other leaves the step not done, never "the form changed".
 */
static struct decide_post missing_explained(const struct decide_post_facts *f)
{
    const bool after = f->phase == DECIDE_FOLLOWUP;
    if (f->match_aborted)
        return after ? verdict(DECIDE_FOLLOWUP_FAILED, false,
                               "a rule exhausted the match budget on the page that lacks the "
                               "follow-up step's control")
                     : verdict(DECIDE_NOT_SENT, false,
                               "a rule exhausted the match budget on the page that lacks the "
                               "step's control: nothing of the step was sent");
    switch (f->rule) {
    case DECIDE_RULE_REJECTED:
        return verdict(DECIDE_REJECTED, false,
                       after ? "the page lacks the follow-up step's control, and a rule says the "
                               "ERP refuses it"
                             : "the page lacks the step's control, and a rule says the ERP "
                               "will not take the invoice");
    case DECIDE_RULE_COMPLETED:
        if (after && f->doc)
            return verdict(DECIDE_CONFIRMED, false,
                           "the page lacks the follow-up step's control, and a rule says the "
                           "document is finished");
        break;
    case DECIDE_RULE_ALREADY_EXISTS:
        if (!after)
            return verdict(DECIDE_ALREADY_EXISTS, false,
                           "the page lacks the step's control, and a rule says the ERP already "
                           "holds the invoice");
        break;
    case DECIDE_RULE_SESSION_EXPIRED:
        return after ? verdict(DECIDE_RESTART_FOLLOWUPS, true,
                               "the page lacks the follow-up step's control, and a rule says "
                               "the session ended")
                     : verdict(DECIDE_RESTART, true,
                               "the page lacks the step's control, and a rule says the session "
                               "ended");
    case DECIDE_RULE_SAVED:
    case DECIDE_RULE_NOT_SENT:
    case DECIDE_RULE_UNKNOWN:
    case DECIDE_RULE_NONE:
        break;
    }
    return after ? verdict(DECIDE_FOLLOWUP_FAILED, false,
                           "the page lacks the follow-up step's control, and a rule says it is "
                           "not done yet")
                 : verdict(DECIDE_NOT_SENT, false,
                           "the page lacks the step's control, and a rule says the ERP did not "
                           "take it: nothing of the step was sent");
}

struct decide_post decide_post(const struct decide_post_facts *f)
{
    /* Problems found while filling the form come before the step is submitted. */
    if (f->data_error)
        return verdict(DECIDE_REJECTED, false,
                       "the invoice carries a value the ERP's form does not offer");
    if (f->fill_error) {
        /* A rule over the page says what a missing control means; none: the form changed. */
        if (f->missing && f->transport == DECIDE_TR_ANSWERED &&
            (f->rule != DECIDE_RULE_NONE || f->match_aborted))
            return missing_explained(f);
        if (f->phase == DECIDE_FOLLOWUP)
            return verdict(DECIDE_FOLLOWUP_FAILED, false,
                           "the follow-up form is not as the flow describes");
        return verdict(DECIDE_SYSTEMIC, false, "the ERP's form is not as the flow describes");
    }
    switch (f->phase) {
    case DECIDE_BEFORE_COMMIT:
        return before_commit(f);
    case DECIDE_COMMIT:
        return f->fetch ? before_commit(f) : at_commit(f);
    case DECIDE_FOLLOWUP:
        return followup(f);
    }
    return verdict(DECIDE_UNKNOWN, false, "invalid phase");
}

struct decide_skip decide_skip(const struct decide_skip_facts *f)
{
    struct decide_skip d = {.skip = false, .why = ""};
    if (f->phase != DECIDE_BEFORE_COMMIT)
        d.why = "only a step before the committing one is ever skipped";
    else if (!f->known)
        d.why = "what its answer would tell is not known yet: submitted (and learnt from)";
    else if (!f->lines_present)
        d.why = "the page lacks a line's controls: the round trip brings the row";
    else if (!f->filled)
        d.why = "its fields could not be filled: submitted, so that the problem is met as usual";
    else if (!f->controls_set)
        d.why = "a learnt control is not on the form: submitted as usual";
    else {
        d.skip = true;
        d.why = "what its answer would tell is known: not sent, the filled form goes to the next "
                "step";
    }
    return d;
}

static struct decide_lookup lverdict(enum decide_lookup_verdict v, const char *why)
{
    struct decide_lookup d = {.verdict = v, .why = why};
    return d;
}

struct decide_lookup decide_lookup(const struct decide_lookup_facts *f)
{
    /* A row carrying the key exactly is the ERP's own word that it holds the invoice. */
    if (f->hits > 0) {
        if (f->unfinished >= f->hits)
            return lverdict(DECIDE_FOUND_UNFINISHED, "the ERP holds the key, not yet finished");
        return lverdict(DECIDE_FOUND, "the ERP holds the key");
    }
    /* An absence needs a complete, genuine results screen. */
    if (!f->answered)
        return lverdict(DECIDE_LOOKUP_FAILED, "a page of the lookup was not answered");
    if (f->match_aborted)
        return lverdict(DECIDE_LOOKUP_FAILED, "a pattern exhausted the page's match budget");
    if (!f->screen_ok)
        return lverdict(DECIDE_LOOKUP_FAILED, "the answer is not the complete results screen");
    if (f->more)
        return lverdict(DECIDE_LOOKUP_FAILED, "the results go on past the pages a lookup reads");
    if (f->cut)
        return lverdict(DECIDE_LOOKUP_FAILED,
                        "a page holds the screen's row maximum: the results may be cut");
    if (f->candidates > 0 && (f->max_candidates == 0 || f->candidates > f->max_candidates))
        return lverdict(DECIDE_LOOKUP_FAILED, "more candidates than the lookup may open");
    if (f->candidates > 0 && !f->details_ok)
        return lverdict(DECIDE_LOOKUP_FAILED, "a candidate's detail page was not read");
    if (f->rows == 0 && !f->empty_marker)
        return lverdict(DECIDE_LOOKUP_FAILED, "neither result rows nor the no-results marker");
    return lverdict(DECIDE_NOT_FOUND, "a complete results screen without the key");
}
