/*
 * xmlin.c - the bounded, quiet XML parse the invoice readers share, and their XPath helpers.
 *
 * The parse is libxml2's SAX2 tree builder with a thin layer of our own callbacks in front:
 * they count what the tree will hold (nodes, kept text, depth) and stop the parser the moment a
 * XMLIN_MAX_* bound (xmlin-int.h) is passed, so memory is bounded while parsing, never checked
 * after; they skip the text of attachment elements (EmbeddedDocumentBinaryObject,
 * AttachmentBinaryObject: several MB of base64 no reader looks at), drop comments and
 * processing instructions, and refuse a DOCTYPE the moment it starts (no DTD is loaded, no
 * entity declared or expanded). Bytes come through our read callback, which counts them. Every
 * libxml2 message goes to our structured error handler (the parser's and, during the parse, the
 * thread's global ones), so nothing raw reaches stderr; the first error becomes the reason.
 *
 * The XPath helpers read what UBL and CII hold alike: trimmed texts, attributes, amounts in
 * the document currency (a currencyID must match), sums of tax amounts in that currency, and
 * the seller through an ordered list of identifier paths and the --vendors map.
 */
#include "xmlin-int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libxml/globals.h>
#include <libxml/parser.h>
#include <libxml/parserInternals.h>
#include <libxml/SAX2.h>
#include <libxml/xmlerror.h>
#include <libxml/xpathInternals.h>

#include "apbot/invoice.h"
#include "apbot/mem.h"
#include "apbot/money.h"
#include "apbot/vendors.h"

/* ---- the bounded parse ------------------------------------------------------------------- */

struct xmlin_parse {
    xmlParserCtxtPtr ctxt;
    const struct xmlin_src *src;
    size_t off;        /* memory source: next byte */
    size_t bytes;      /* bytes read so far */
    size_t nodes;      /* nodes counted so far */
    size_t text;       /* bytes of text and attribute values kept */
    size_t depth;      /* current element depth */
    size_t drop_depth; /* depth of the attachment element whose text is skipped, 0 none */
    int stop_rc;       /* why we stopped the parser (APBOT_OK: we did not) */
    char stop_reason[300];
    bool have_error; /* the first libxml2 error, for "not well-formed" */
    int error_line;
    char error_msg[300];
};

static void xmlin_stop(struct xmlin_parse *st, int rc, const char *fmt, ...) APBOT_PRINTF(3, 4);
static void xmlin_stop(struct xmlin_parse *st, int rc, const char *fmt, ...)
{
    if (st->stop_rc)
        return;
    st->stop_rc = rc;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->stop_reason, sizeof(st->stop_reason), fmt, ap);
    va_end(ap);
    if (st->ctxt)
        xmlStopParser(st->ctxt);
}

static int xmlin_line(const struct xmlin_parse *st)
{
    return st->ctxt && st->ctxt->input ? st->ctxt->input->line : 0;
}

/* Counts n more nodes and t more bytes of kept text; stops the parser past a bound. */
static bool xmlin_charge(struct xmlin_parse *st, size_t n, size_t t)
{
    st->nodes += n;
    st->text += t;
    if (st->nodes > XMLIN_MAX_NODES)
        xmlin_stop(st, APBOT_E_LIMIT,
                   "more than %d XML nodes (elements, attributes, texts, comments) near line "
                   "%d: apbot reads invoices up to that size",
                   XMLIN_MAX_NODES, xmlin_line(st));
    else if (st->text > XMLIN_MAX_TEXT)
        xmlin_stop(st, APBOT_E_LIMIT,
                   "more than %u MiB of text outside attachments near line %d: apbot reads "
                   "invoices up to that size",
                   XMLIN_MAX_TEXT >> 20, xmlin_line(st));
    return st->stop_rc == APBOT_OK;
}

/* Our state, from a SAX callback's ctx (the parser context: userData stays libxml2's default,
 * so the SAX2 tree builder functions we leave in place get what they expect). */
static struct xmlin_parse *xmlin_st(void *ctx)
{
    return ((xmlParserCtxtPtr)ctx)->_private;
}

static bool xmlin_is_attachment(const xmlChar *localname)
{
    return xmlStrEqual(localname, BAD_CAST "EmbeddedDocumentBinaryObject") ||
           xmlStrEqual(localname, BAD_CAST "AttachmentBinaryObject");
}

static void xmlin_sax_start(void *ctx, const xmlChar *localname, const xmlChar *prefix,
                            const xmlChar *uri, int nb_namespaces, const xmlChar **namespaces,
                            int nb_attributes, int nb_defaulted, const xmlChar **attributes)
{
    struct xmlin_parse *st = xmlin_st(ctx);
    size_t t = 0;
    for (int i = 0; i < nb_attributes; i++) /* 5 per attribute: name, prefix, URI, value, end */
        t += (size_t)(attributes[i * 5 + 4] - attributes[i * 5 + 3]);
    if (!xmlin_charge(st, 1 + (size_t)nb_attributes + (size_t)nb_namespaces, t))
        return;
    if (++st->depth > XMLIN_MAX_DEPTH) {
        xmlin_stop(st, APBOT_E_LIMIT, "elements nested deeper than %d near line %d",
                   XMLIN_MAX_DEPTH, xmlin_line(st));
        return;
    }
    if (!st->drop_depth && xmlin_is_attachment(localname))
        st->drop_depth = st->depth;
    xmlSAX2StartElementNs(ctx, localname, prefix, uri, nb_namespaces, namespaces, nb_attributes,
                          nb_defaulted, attributes);
}

static void xmlin_sax_end(void *ctx, const xmlChar *localname, const xmlChar *prefix,
                          const xmlChar *uri)
{
    struct xmlin_parse *st = xmlin_st(ctx);
    if (st->drop_depth == st->depth)
        st->drop_depth = 0;
    if (st->depth)
        st->depth--;
    xmlSAX2EndElementNs(ctx, localname, prefix, uri);
}

static void xmlin_sax_characters(void *ctx, const xmlChar *ch, int len)
{
    struct xmlin_parse *st = xmlin_st(ctx);
    if (st->drop_depth || len <= 0)
        return; /* an attachment's base64: nobody reads it, so it is never kept */
    /* A new text node, unless the tree builder appends to the one it made last. */
    xmlNodePtr parent = ((xmlParserCtxtPtr)ctx)->node;
    size_t n = parent && parent->last && parent->last->type == XML_TEXT_NODE ? 0 : 1;
    if (xmlin_charge(st, n, (size_t)len))
        xmlSAX2Characters(ctx, ch, len);
}

static void xmlin_sax_comment(void *ctx, const xmlChar *value)
{
    (void)value;
    (void)xmlin_charge(xmlin_st(ctx), 1, 0); /* counted (a million comments cost time), never
                                                 kept */
}

static void xmlin_sax_pi(void *ctx, const xmlChar *target, const xmlChar *data)
{
    (void)target;
    (void)data;
    (void)xmlin_charge(xmlin_st(ctx), 1, 0);
}

static void xmlin_sax_subset(void *ctx, const xmlChar *name, const xmlChar *external_id,
                             const xmlChar *system_id)
{
    (void)name;
    (void)external_id;
    (void)system_id;
    xmlin_stop(xmlin_st(ctx), APBOT_E_INVAL,
               "the document has a DOCTYPE; invoices must not declare DTDs or entities");
}

#if LIBXML_VERSION >= 21200
#define XMLIN_ERROR_T const xmlError
#else
#define XMLIN_ERROR_T xmlError
#endif

/* Keeps the first error as the reason; warnings are dropped. Never prints. */
static void xmlin_note_error(struct xmlin_parse *st, XMLIN_ERROR_T *e)
{
    if (!st || !e || e->level < XML_ERR_ERROR || st->have_error)
        return;
    st->have_error = true;
    st->error_line = e->line;
    snprintf(st->error_msg, sizeof(st->error_msg), "%s", e->message ? e->message : "parse error");
    size_t n = strlen(st->error_msg);
    while (n && (st->error_msg[n - 1] == '\n' || st->error_msg[n - 1] == ' '))
        st->error_msg[--n] = '\0';
}

/* The parser's structured handler (ctx is the parser context). */
static void xmlin_sax_error(void *ctx, XMLIN_ERROR_T *e)
{
    xmlin_note_error(ctx ? xmlin_st(ctx) : NULL, e);
}

/* The thread's global structured handler during a parse (ctx is our state). */
static void xmlin_global_error(void *ctx, XMLIN_ERROR_T *e)
{
    xmlin_note_error(ctx, e);
}

static void xmlin_generic_quiet(void *ctx, const char *msg, ...)
{
    (void)ctx;
    (void)msg;
}

static int xmlin_io_read(void *ctx, char *buf, int len)
{
    struct xmlin_parse *st = ctx;
    if (st->stop_rc || len <= 0)
        return st->stop_rc ? -1 : 0;
    size_t got;
    if (st->src->fd >= 0) {
        ssize_t r;
        do
            r = read(st->src->fd, buf, (size_t)len);
        while (r < 0 && errno == EINTR);
        if (r < 0) {
            xmlin_stop(st, APBOT_E_IO, "read error: %s", strerror(errno));
            return -1;
        }
        got = (size_t)r;
    } else {
        got = st->src->len - st->off;
        if (got > (size_t)len)
            got = (size_t)len;
        memcpy(buf, st->src->data + st->off, got);
        st->off += got;
    }
    st->bytes += got;
    if (st->bytes > XMLIN_MAX_BYTES) {
        xmlin_stop(st, APBOT_E_LIMIT,
                   "larger than %u MiB: apbot reads XML invoices up to that size",
                   XMLIN_MAX_BYTES >> 20);
        return -1;
    }
    return (int)got;
}

/*
 * Parses one document within the XMLIN_MAX_* bounds, with no network, no DTD
 * loading, no entity substitution, and every libxml2 message caught (nothing reaches stderr).
 * Returns APBOT_OK with *ret_doc (the caller frees it with xmlFreeDoc); APBOT_E_INVAL when the
 * document must be refused as a whole (a DOCTYPE: err holds the reason without a place);
 * APBOT_E_PARSE (not well-formed: "name:LINE: not well-formed XML: ..."), APBOT_E_LIMIT (a bound
 * passed) or APBOT_E_IO (read error) with err.
 */
static int xmlin_parse(const char *name, const struct xmlin_src *src, xmlDocPtr *ret_doc, char *err,
                       size_t errlen)
{
    struct xmlin_parse st = {.src = src};
    xmlSAXHandler sax;
    memset(&sax, 0, sizeof(sax));
    xmlSAXVersion(&sax, 2);
    sax.startElementNs = xmlin_sax_start;
    sax.endElementNs = xmlin_sax_end;
    sax.characters = xmlin_sax_characters;
    sax.cdataBlock = NULL; /* CDATA arrives as characters */
    sax.comment = xmlin_sax_comment;
    sax.processingInstruction = xmlin_sax_pi;
    sax.internalSubset = xmlin_sax_subset;
    sax.externalSubset = NULL;
    sax.serror = xmlin_sax_error;
    sax.warning = NULL;
    sax.error = NULL;
    sax.fatalError = NULL;

    /* Messages raised outside the parser context (encoding conversion, I/O) use the thread's
     * global handlers: point them at us for the parse and restore them after. */
    xmlStructuredErrorFunc old_serror = xmlStructuredError;
    void *old_sctx = xmlStructuredErrorContext;
    xmlGenericErrorFunc old_generic = xmlGenericError;
    void *old_gctx = xmlGenericErrorContext;
    xmlSetStructuredErrorFunc(&st, xmlin_global_error);
    xmlSetGenericErrorFunc(&st, xmlin_generic_quiet);

    xmlCharEncoding enc = XML_CHAR_ENCODING_NONE;
    if (src->encoding && strcmp(src->encoding, "UTF-16LE") == 0)
        enc = XML_CHAR_ENCODING_UTF16LE;
    else if (src->encoding && strcmp(src->encoding, "UTF-16BE") == 0)
        enc = XML_CHAR_ENCODING_UTF16BE;
    xmlDocPtr doc = NULL;
    int rc = APBOT_OK;
    st.ctxt = xmlCreateIOParserCtxt(&sax, NULL, xmlin_io_read, NULL, &st, XML_CHAR_ENCODING_NONE);
    if (!st.ctxt)
        abort(); /* only out-of-memory lands here */
    st.ctxt->_private = &st;
    /* After the context holds its input: xmlCreateIOParserCtxt's own encoding argument is
     * applied before the input is pushed and is lost (libxml2 2.9). */
    if (enc != XML_CHAR_ENCODING_NONE && xmlSwitchEncoding(st.ctxt, enc) != 0)
        xmlin_stop(&st, APBOT_E_PARSE, "cannot decode %s", src->encoding);
    int opts = XML_PARSE_NONET | XML_PARSE_NOCDATA | XML_PARSE_NOBLANKS | XML_PARSE_NOERROR |
               XML_PARSE_NOWARNING;
#if LIBXML_VERSION >= 21300
    opts |= XML_PARSE_NO_XXE;
#endif
    (void)xmlCtxtUseOptions(st.ctxt, opts);
    (void)xmlParseDocument(st.ctxt);
    doc = st.ctxt->myDoc;
    st.ctxt->myDoc = NULL;
    bool well_formed = st.ctxt->wellFormed && !st.stop_rc;
    xmlFreeParserCtxt(st.ctxt);
    st.ctxt = NULL;

    xmlSetStructuredErrorFunc(old_sctx, old_serror);
    xmlSetGenericErrorFunc(old_gctx, old_generic);

    if (st.stop_rc == APBOT_E_INVAL) {
        rc = apbot_fail(err, errlen, APBOT_E_INVAL, "%s", st.stop_reason);
    } else if (st.stop_rc) {
        rc = apbot_fail(err, errlen, st.stop_rc, "%s: %s", name, st.stop_reason);
    } else if (!well_formed || !doc) {
        rc = apbot_fail(err, errlen, APBOT_E_PARSE, "%s:%d: not well-formed XML: %s", name,
                        st.have_error ? st.error_line : 0,
                        st.have_error ? st.error_msg : "parse error");
    } else if (!xmlDocGetRootElement(doc)) {
        rc = apbot_fail(err, errlen, APBOT_E_PARSE, "%s: no root element", name);
    }
    if (rc) {
        xmlFreeDoc(doc);
        return rc;
    }
    *ret_doc = doc;
    return APBOT_OK;
}

int xmlin_read(const char *name, const struct xmlin_src *src, xmlin_doc_fn fn,
               const struct vendor_map *vendors, const struct invoice_sink *sink, char *err,
               size_t errlen)
{
    xmlDocPtr doc = NULL;
    char perr[APBOT_ERR_LEN];
    int rc = xmlin_parse(name, src, &doc, perr, sizeof(perr));
    if (rc == APBOT_E_INVAL) {
        sink->refuse(sink->ctx, name, perr);
        return APBOT_OK;
    }
    if (rc)
        return apbot_fail(err, errlen, rc, "%s", perr);
    struct xmlin_result *r = apbot_xcalloc(1, sizeof(*r));
    invoice_init(&r->inv);
    fn(name, doc, vendors, r);
    xmlFreeDoc(doc);
    if (r->refused)
        sink->refuse(sink->ctx, r->where, r->reason);
    else
        rc = sink->accept(sink->ctx, &r->inv, r->where);
    invoice_done(&r->inv);
    free(r);
    return rc;
}

/* ---- reading a parsed document ----------------------------------------------------------- */

void xmlin_init(struct xmlin *x, const char *name, xmlDocPtr doc, const char *const *ns,
                size_t n_ns)
{
    memset(x, 0, sizeof(*x));
    x->name = name;
    x->doc = doc;
    x->root = xmlDocGetRootElement(doc);
    if (x->root && x->root->ns && x->root->ns->prefix)
        snprintf(x->rootname, sizeof(x->rootname), "%.20s:%.40s", x->root->ns->prefix,
                 x->root->name);
    else if (x->root)
        snprintf(x->rootname, sizeof(x->rootname), "%.60s", x->root->name);
    x->xp = xmlXPathNewContext(doc);
    if (!x->xp)
        abort(); /* libxml2 fails here only on out-of-memory (mem.h's policy) */
    for (size_t i = 0; i + 1 < n_ns * 2; i += 2)
        if (xmlXPathRegisterNs(x->xp, BAD_CAST ns[i], BAD_CAST ns[i + 1]))
            abort(); /* constant prefixes and URIs: fails only on out-of-memory */
}

void xmlin_done(struct xmlin *x)
{
    if (x->xp)
        xmlXPathFreeContext(x->xp);
    x->xp = NULL;
}

void xmlin_accepted(const struct xmlin *x, struct xmlin_result *ret)
{
    ret->refused = false;
    snprintf(ret->where, sizeof(ret->where), "%s#/%s", x->name, x->rootname);
}

void xmlin_refused(const struct xmlin *x, struct xmlin_result *ret)
{
    ret->refused = true;
    memcpy(ret->where, x->where, sizeof(ret->where));
    memcpy(ret->reason, x->reason, sizeof(ret->reason));
}

int xmlin_fail(struct xmlin *x, const char *rel, const char *fmt, ...)
{
    snprintf(x->where, sizeof(x->where), "%s#/%s%s%s", x->name, x->rootname, rel && *rel ? "/" : "",
             rel ? rel : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->reason, sizeof(x->reason), fmt, ap);
    va_end(ap);
    return APBOT_E_INVAL;
}

xmlXPathObjectPtr xmlin_eval(struct xmlin *x, xmlNodePtr node, const char *xpath)
{
    x->xp->node = node ? node : x->root;
    xmlXPathObjectPtr o = xmlXPathEvalExpression(BAD_CAST xpath, x->xp);
    if (!o)
        abort(); /* our expressions are constant and valid: only OOM lands here */
    return o;
}

size_t xmlin_count(xmlXPathObjectPtr o)
{
    return o && o->type == XPATH_NODESET && o->nodesetval ? (size_t)o->nodesetval->nodeNr : 0;
}

static bool xmlin_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Trimmed text content of a node, malloc'd. */
static char *xmlin_node_text(xmlNodePtr n)
{
    xmlChar *c = xmlNodeGetContent(n);
    const char *s = c ? (const char *)c : "";
    while (xmlin_blank(*s))
        s++;
    size_t len = strlen(s);
    while (len && xmlin_blank(s[len - 1]))
        len--;
    char *r = apbot_xstrndup(s, len);
    xmlFree(c);
    return r;
}

char *xmlin_text(struct xmlin *x, xmlNodePtr ctx, const char *xpath, xmlNodePtr *ret_node)
{
    xmlXPathObjectPtr o = xmlin_eval(x, ctx, xpath);
    char *r = NULL;
    if (xmlin_count(o)) {
        xmlNodePtr n = o->nodesetval->nodeTab[0];
        r = xmlin_node_text(n);
        if (!*r) {
            free(r);
            r = NULL;
        } else if (ret_node) {
            *ret_node = n;
        }
    }
    xmlXPathFreeObject(o);
    return r;
}

char *xmlin_attr(xmlNodePtr n, const char *name)
{
    xmlChar *v = xmlGetProp(n, BAD_CAST name);
    if (!v)
        return NULL;
    char *r = apbot_xstrdup((const char *)v);
    xmlFree(v);
    return r;
}

int xmlin_amount_node(struct xmlin *x, xmlNodePtr n, const char *rel, const char *ccy, int64_t *ret)
{
    char *text = xmlin_node_text(n);
    char *cid = xmlin_attr(n, "currencyID");
    char merr[APBOT_ERR_LEN];
    int rc = APBOT_OK;
    if (cid && strcmp(cid, ccy) != 0) {
        rc = xmlin_fail(x, rel, "currencyID '%.10s' differs from the document currency %s", cid,
                        ccy);
        goto out;
    }
    if (money_parse(text, ccy, MONEY_PLAIN, MONEY_ROUND_REFUSE, ret, merr, sizeof(merr)))
        rc = xmlin_fail(x, rel, "%s", merr);
out:
    free(text);
    free(cid);
    return rc;
}

int xmlin_amount(struct xmlin *x, const char *xpath, const char *ccy, int64_t *ret, bool *ret_found)
{
    xmlXPathObjectPtr o = xmlin_eval(x, NULL, xpath);
    int rc = APBOT_OK;
    *ret_found = false;
    if (xmlin_count(o)) {
        rc = xmlin_amount_node(x, o->nodesetval->nodeTab[0], xpath, ccy, ret);
        *ret_found = rc == APBOT_OK;
    }
    xmlXPathFreeObject(o);
    return rc;
}

int xmlin_sum_in_currency(struct xmlin *x, const char *xpath, const char *rel_fmt, const char *ccy,
                          int64_t *ret)
{
    xmlXPathObjectPtr o = xmlin_eval(x, NULL, xpath);
    int64_t sum = 0;
    int rc = APBOT_OK;
    for (size_t i = 0; i < xmlin_count(o) && !rc; i++) {
        xmlNodePtr n = o->nodesetval->nodeTab[i];
        char *cid = xmlin_attr(n, "currencyID");
        bool ours = !cid || strcmp(cid, ccy) == 0;
        free(cid);
        if (!ours)
            continue;
        char rel[200];
        snprintf(rel, sizeof(rel), rel_fmt, i + 1);
        int64_t t = 0;
        if ((rc = xmlin_amount_node(x, n, rel, ccy, &t)))
            break;
        if (money_add(&sum, t))
            rc = xmlin_fail(x, rel, "tax total out of range");
    }
    xmlXPathFreeObject(o);
    if (rc == APBOT_OK)
        *ret = sum;
    return rc;
}

/*
 * Seller candidates in priority order: each identifier as "scheme:value" (when it has a
 * schemeID) and as "value"; the first one the --vendors map knows wins; names are tried in the
 * map last. Without a mapping the vendor id is the first candidate's scheme:value form. A SEPA
 * creditor id identifies a direct-debit mandate, not the seller, and is skipped.
 */
int xmlin_seller(struct xmlin *x, const struct xmlin_seller_paths *p,
                 const struct vendor_map *vendors, struct invoice *inv)
{
    char *first = NULL; /* unmapped fallback: the first candidate, scheme:value form */
    const char *mapped = NULL;
    for (size_t k = 0; k < p->n_ids && !mapped; k++) {
        xmlXPathObjectPtr o = xmlin_eval(x, NULL, p->ids[k]);
        for (size_t i = 0; i < xmlin_count(o) && !mapped; i++) {
            xmlNodePtr n = o->nodesetval->nodeTab[i];
            char *val = xmlin_node_text(n);
            char *scheme = xmlin_attr(n, "schemeID");
            if (*val && !(scheme && strcmp(scheme, "SEPA") == 0)) {
                char full[600];
                if (scheme && *scheme)
                    snprintf(full, sizeof(full), "%s:%s", scheme, val);
                else
                    snprintf(full, sizeof(full), "%s", val);
                mapped = vendor_map_lookup(vendors, full);
                if (!mapped)
                    mapped = vendor_map_lookup(vendors, val);
                if (!first)
                    first = apbot_xstrdup(full);
            }
            free(val);
            free(scheme);
        }
        xmlXPathFreeObject(o);
    }
    char *name = NULL;
    for (size_t k = 0; k < p->n_names; k++) {
        char *t = xmlin_text(x, NULL, p->names[k], NULL);
        if (!t)
            continue;
        if (!mapped)
            mapped = vendor_map_lookup(vendors, t);
        if (!name)
            name = t;
        else
            free(t);
    }
    int rc = APBOT_OK;
    if (mapped)
        invoice_set_str(&inv->vendor_id, mapped);
    else if (first)
        invoice_set_str(&inv->vendor_id, first);
    else
        rc = xmlin_fail(x, p->party, "%s", p->missing);
    invoice_set_str(&inv->vendor_name, name);
    free(first);
    free(name);
    return rc;
}
