/*
 * xmlin-int.h - what the XML invoice readers (ublin, ciiin) and the dispatcher (reader.c, pdfin)
 * share, inside the library only: the bounded, quiet libxml2 parse and the XPath helpers that
 * read amounts, dates, texts and the seller the same way in every syntax.
 *
 * xmlin.c owns the parse; the readers above it, ublin.c and ciiin.c, each turn a parsed
 * document into an invoice (an xmlin_doc_fn: ublin_doc, ciiin_doc, in their own headers), so
 * reader.c parses once and picks the reader by the root.
 */
#ifndef APBOT_XMLIN_INT_H
#define APBOT_XMLIN_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libxml/tree.h>
#include <libxml/xpath.h>

#include "apbot/error.h"
#include "apbot/invoice.h"

struct vendor_map;

/*
 * The bounds every XML reader applies (UBL, CII, the XML inside a PDF), checked while parsing,
 * never after: memory stays bounded whatever the file holds. Attachments (the text of any
 * EmbeddedDocumentBinaryObject or AttachmentBinaryObject element) are skipped as they stream by
 * and never kept, so they cost time, not memory.
 */
/* bytes in one XML file */
#define XMLIN_MAX_BYTES (64u * 1024 * 1024)
/* nodes in one document: elements, attributes, namespace declarations, texts, comments and PIs
 * (about 6,000 UBL invoice lines) */
#define XMLIN_MAX_NODES 200000
/* bytes of text and attribute values kept (attachments are not kept, so not counted) */
#define XMLIN_MAX_TEXT (4u * 1024 * 1024)
/* element nesting */
#define XMLIN_MAX_DEPTH 128

/* Where the bytes come from: an open file (fd >= 0) or memory. */
struct xmlin_src {
    int fd;                    /* read from here when >= 0 (from its current offset) */
    const unsigned char *data; /* else these len bytes */
    size_t len;
    const char *encoding; /* NULL (detect), "UTF-16LE" or "UTF-16BE" (BOM-less UTF-16) */
};

/* One document being read: the root, an XPath context and the refusal being built. */
struct xmlin {
    const char *name; /* file name for places */
    xmlDocPtr doc;
    xmlNodePtr root;
    xmlXPathContextPtr xp;
    char rootname[64]; /* "Invoice", "ubl:Invoice", "rsm:CrossIndustryInvoice" */
    char where[1400];
    char reason[APBOT_ERR_LEN];
};

/* Starts reading doc (not owned): an XPath context with the given prefix/URI pairs. Aborts on
 * out-of-memory. */
void xmlin_init(struct xmlin *x, const char *name, xmlDocPtr doc, const char *const *ns,
                size_t n_ns);
void xmlin_done(struct xmlin *x);

/* Sets where = "name#/<root>/<rel>" and the reason; returns APBOT_E_INVAL for chaining. */
int xmlin_fail(struct xmlin *x, const char *rel, const char *fmt, ...) APBOT_PRINTF(3, 4);

/* Nodes matching an XPath relative to node (the root when NULL). Caller frees the object. */
xmlXPathObjectPtr xmlin_eval(struct xmlin *x, xmlNodePtr node, const char *xpath);
size_t xmlin_count(xmlXPathObjectPtr o);
/* Text of the first match or NULL (absent or empty); optionally its node. */
char *xmlin_text(struct xmlin *x, xmlNodePtr ctx, const char *xpath, xmlNodePtr *ret_node);
/* An attribute as a malloc'd string, NULL when absent. */
char *xmlin_attr(xmlNodePtr n, const char *name);

/* An amount element's text in currency ccy; a currencyID attribute must equal ccy. */
int xmlin_amount_node(struct xmlin *x, xmlNodePtr n, const char *rel, const char *ccy,
                      int64_t *ret);
/* The first match of xpath as an amount; *ret_found false when absent. */
int xmlin_amount(struct xmlin *x, const char *xpath, const char *ccy, int64_t *ret,
                 bool *ret_found);
/* The sum of every match of xpath whose currencyID is ccy or absent (another currencyID is the
 * VAT accounting currency of BT-111: not this document's amount). rel_fmt names the i-th match
 * ("cac:TaxTotal[%zu]/cbc:TaxAmount"). */
int xmlin_sum_in_currency(struct xmlin *x, const char *xpath, const char *rel_fmt, const char *ccy,
                          int64_t *ret);

/* The seller: paths of identifier elements (with an optional schemeID) and of names, in
 * priority order; `missing` is the refusal text when none gives anything. See ublin.c. */
struct xmlin_seller_paths {
    const char *party;        /* the party element, for the refusal's place */
    const char *const *ids;   /* identifier paths, in priority order */
    size_t n_ids;             /*   */
    const char *const *names; /* name paths: vendor name and last map candidates */
    size_t n_names;           /*   */
    const char *missing;      /* refusal text when nothing identifies the seller */
};
int xmlin_seller(struct xmlin *x, const struct xmlin_seller_paths *p,
                 const struct vendor_map *vendors, struct invoice *inv);

/* What reading one parsed document gives: an invoice, or a refusal with its place. */
struct xmlin_result {
    struct invoice inv; /* the invoice when !refused (invoice_init'ed by xmlin_read) */
    bool refused;
    char where[1400]; /* "name#/Invoice" or the refused element's place */
    char reason[APBOT_ERR_LEN];
};

/* Ends a document: where = "name#/<root>" (accepted) or x's refusal into ret. */
void xmlin_accepted(const struct xmlin *x, struct xmlin_result *ret);
void xmlin_refused(const struct xmlin *x, struct xmlin_result *ret);

/* A reader's document-level entry: reads the parsed doc (not freed) into ret (ublin_doc in
 * ublin.h reads UBL 2.1, ciiin_doc in ciiin.h CII D16B; each refuses any other root). */
typedef void (*xmlin_doc_fn)(const char *name, xmlDocPtr doc, const struct vendor_map *vendors,
                             struct xmlin_result *ret);

/*
 * Parses src within the XMLIN_MAX_* bounds (no network, no DTD loading, no entity
 * substitution, every libxml2 message caught: nothing reaches stderr), reads the document with
 * fn, frees the tree and only then hands the invoice or the refusal to the sink (so the tree and
 * what the sink builds from the invoice are never in memory together). A DOCTYPE is a refusal
 * of the document (sink->refuse at name), not a file failure. Returns the sink's accept code or
 * APBOT_OK, or for the file as a whole APBOT_E_PARSE (not well-formed: "name:LINE: not
 * well-formed XML: ..."), APBOT_E_LIMIT (a bound passed) or APBOT_E_IO (read error) with err.
 */
int xmlin_read(const char *name, const struct xmlin_src *src, xmlin_doc_fn fn,
               const struct vendor_map *vendors, const struct invoice_sink *sink, char *err,
               size_t errlen) APBOT_MUST_USE;

#define XMLIN_NS_CII_RSM "urn:un:unece:uncefact:data:standard:CrossIndustryInvoice:100"
#define XMLIN_NS_UBL_INVOICE "urn:oasis:names:specification:ubl:schema:xsd:Invoice-2"
#define XMLIN_NS_UBL_CREDIT "urn:oasis:names:specification:ubl:schema:xsd:CreditNote-2"

#endif
