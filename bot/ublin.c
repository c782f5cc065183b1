/*
 * ublin.c - the UBL 2.1 / Peppol BIS Billing 3 reader: one Invoice or CreditNote per file.
 *
 * libxml2 parses with network access off and no entity substitution or DTD loading; a
 * document that carries a DOCTYPE at all is refused (no invoice needs one, and it is the door
 * to entity tricks). Fields are read with XPath relative to the root element, with the UBL
 * namespaces registered, so the root's own prefix (`ubl:Invoice`) does not matter.
 *
 * What is read (docs/input-formats.md has the table):
 * - document type: root CreditNote -> credit-note; root Invoice -> invoice, except the UNTDID
 *   1001 credit-note codes 381, 261, 262, 296, 308, 396, 420, 458, 532 in InvoiceTypeCode ->
 *   credit-note (the amounts are taken as written). 384 (corrected), 389 (self-billed), 877
 *   etc. stay invoices.
 * - seller: AccountingSupplierParty/Party; candidates in order EndpointID, PartyIdentification/
 *   ID, PartyLegalEntity/CompanyID, PartyTaxScheme/CompanyID, each as "scheme:value" (when a
 *   schemeID is given) and as "value". The first candidate the --vendors map knows wins (names,
 *   PartyName/Name and RegistrationName, are tried in the map last); without a mapping the
 *   vendor id is the first candidate's scheme:value form. No candidate at all -> refused.
 * - currency: DocumentCurrencyCode, else the currencyID of PayableAmount.
 * - totals: LegalMonetaryTotal/PayableAmount (required), TaxExclusiveAmount (else
 *   LineExtensionAmount, else payable - tax), the sum of TaxTotal/TaxAmount in the document
 *   currency (a TaxTotal in the VAT accounting currency is ignored). Never re-added lines.
 * - lines: top-level InvoiceLine / CreditNoteLine (SubInvoiceLine is not a line of its own):
 *   LineExtensionAmount, quantity and unit price as text (any number of decimals),
 *   Item/Name (else Item/Description) as description, AccountingCost as G/L account,
 *   Item/ClassifiedTaxCategory as "ID:Percent" (so vat-category-E and -Z, identical but for
 *   the category, get different fingerprints); line tax is 0 (UBL lines carry none in
 *   Peppol; totals come from the document).
 * Refusals say "file#/Invoice/cac:LegalMonetaryTotal/cbc:PayableAmount" and why.
 */
#include "apbot/reader.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>
#include <libxml/xpath.h>
#include <libxml/xpathInternals.h>

#include "apbot/invoice.h"
#include "apbot/money.h"
#include "apbot/vendors.h"

#define UBL_NS_INVOICE "urn:oasis:names:specification:ubl:schema:xsd:Invoice-2"
#define UBL_NS_CREDIT "urn:oasis:names:specification:ubl:schema:xsd:CreditNote-2"
#define UBL_NS_CAC "urn:oasis:names:specification:ubl:schema:xsd:CommonAggregateComponents-2"
#define UBL_NS_CBC "urn:oasis:names:specification:ubl:schema:xsd:CommonBasicComponents-2"

#define UBL_MAX_LINES 100000
#define UBL_SELLER "cac:AccountingSupplierParty/cac:Party"

struct ublin {
    const char *path;
    xmlDocPtr doc;
    xmlNodePtr root;
    xmlXPathContextPtr xp;
    char rootname[64];   /* "Invoice", "ubl:Invoice", "CreditNote" */
    const char *line_el; /* "cac:InvoiceLine" or "cac:CreditNoteLine" */
    char where[1400];
    char reason[APBOT_ERR_LEN];
};

/* Sets where = "file#/<root>/<rel>" and the reason; returns APBOT_E_INVAL for chaining. */
static int ublin_fail(struct ublin *u, const char *rel, const char *fmt, ...) APBOT_PRINTF(3, 4);
static int ublin_fail(struct ublin *u, const char *rel, const char *fmt, ...)
{
    snprintf(u->where, sizeof(u->where), "%s#/%s%s%s", u->path, u->rootname, rel && *rel ? "/" : "",
             rel ? rel : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(u->reason, sizeof(u->reason), fmt, ap);
    va_end(ap);
    return APBOT_E_INVAL;
}

/* Nodes matching an XPath relative to `node` (the root when NULL). Caller frees the object. */
static xmlXPathObjectPtr ublin_eval(struct ublin *u, xmlNodePtr node, const char *xpath)
{
    u->xp->node = node ? node : u->root;
    xmlXPathObjectPtr o = xmlXPathEvalExpression((const xmlChar *)xpath, u->xp);
    if (!o)
        abort(); /* our expressions are constant and valid: only OOM lands here */
    return o;
}

static size_t ublin_count(xmlXPathObjectPtr o)
{
    return o && o->type == XPATH_NODESET && o->nodesetval ? (size_t)o->nodesetval->nodeNr : 0;
}

/* Trimmed text content of a node, malloc'd. */
static char *ublin_node_text(xmlNodePtr n)
{
    xmlChar *c = xmlNodeGetContent(n);
    const char *s = c ? (const char *)c : "";
    while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
        s++;
    size_t len = strlen(s);
    while (len &&
           (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\r' || s[len - 1] == '\n'))
        len--;
    char *r = malloc(len + 1);
    if (!r)
        abort();
    memcpy(r, s, len);
    r[len] = '\0';
    xmlFree(c);
    return r;
}

/* Text of the first match or NULL (absent or empty). Optionally its node. */
static char *ublin_text(struct ublin *u, xmlNodePtr ctx, const char *xpath, xmlNodePtr *ret_node)
{
    xmlXPathObjectPtr o = ublin_eval(u, ctx, xpath);
    char *r = NULL;
    if (ublin_count(o)) {
        xmlNodePtr n = o->nodesetval->nodeTab[0];
        r = ublin_node_text(n);
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

/* An attribute as a malloc'd string, NULL when absent. */
static char *ublin_attr(xmlNodePtr n, const char *name)
{
    xmlChar *v = xmlGetProp(n, (const xmlChar *)name);
    if (!v)
        return NULL;
    size_t len = strlen((const char *)v);
    char *r = malloc(len + 1);
    if (!r)
        abort();
    memcpy(r, v, len + 1);
    xmlFree(v);
    return r;
}

/* Parses an amount element's text in the document currency; checks its currencyID. */
static int ublin_amount_node(struct ublin *u, xmlNodePtr n, const char *rel, const char *ccy,
                             int64_t *ret)
{
    char *text = ublin_node_text(n);
    char *cid = ublin_attr(n, "currencyID");
    char merr[APBOT_ERR_LEN];
    int rc = APBOT_OK;
    if (cid && strcmp(cid, ccy) != 0) {
        rc = ublin_fail(u, rel, "currencyID '%.10s' differs from the document currency %s", cid,
                        ccy);
        goto out;
    }
    if (money_parse(text, ccy, MONEY_PLAIN, MONEY_ROUND_REFUSE, ret, merr, sizeof(merr)))
        rc = ublin_fail(u, rel, "%s", merr);
out:
    free(text);
    free(cid);
    return rc;
}

/* The first match of xpath as an amount; *ret_found false when absent. */
static int ublin_amount(struct ublin *u, const char *xpath, const char *ccy, int64_t *ret,
                        bool *ret_found)
{
    xmlXPathObjectPtr o = ublin_eval(u, NULL, xpath);
    int rc = APBOT_OK;
    *ret_found = false;
    if (ublin_count(o)) {
        rc = ublin_amount_node(u, o->nodesetval->nodeTab[0], xpath, ccy, ret);
        *ret_found = rc == APBOT_OK;
    }
    xmlXPathFreeObject(o);
    return rc;
}

static bool ublin_is_credit_code(const char *code)
{
    static const char *const codes[] = {"381", "261", "262", "296", "308",
                                        "396", "420", "458", "532"};
    if (!code)
        return false;
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
        if (strcmp(code, codes[i]) == 0)
            return true;
    return false;
}

/* Seller candidates in priority order; first mapped wins, else the first one. */
static int ublin_seller(struct ublin *u, const struct vendor_map *vendors, struct invoice *inv)
{
    static const char *const id_paths[] = {
        UBL_SELLER "/cbc:EndpointID",
        UBL_SELLER "/cac:PartyIdentification/cbc:ID",
        UBL_SELLER "/cac:PartyLegalEntity/cbc:CompanyID",
        UBL_SELLER "/cac:PartyTaxScheme/cbc:CompanyID",
    };
    static const char *const name_paths[] = {
        UBL_SELLER "/cac:PartyName/cbc:Name",
        UBL_SELLER "/cac:PartyLegalEntity/cbc:RegistrationName",
    };
    char *first = NULL; /* unmapped fallback: the first candidate, scheme:value form */
    const char *mapped = NULL;
    for (size_t p = 0; p < sizeof(id_paths) / sizeof(id_paths[0]) && !mapped; p++) {
        xmlXPathObjectPtr o = ublin_eval(u, NULL, id_paths[p]);
        for (size_t i = 0; i < ublin_count(o) && !mapped; i++) {
            xmlNodePtr n = o->nodesetval->nodeTab[i];
            char *val = ublin_node_text(n);
            char *scheme = ublin_attr(n, "schemeID");
            if (*val) {
                char full[600];
                if (scheme && *scheme)
                    snprintf(full, sizeof(full), "%s:%s", scheme, val);
                else
                    snprintf(full, sizeof(full), "%s", val);
                /* A SEPA creditor id identifies a direct-debit mandate, not the seller. */
                bool sepa = scheme && strcmp(scheme, "SEPA") == 0;
                if (!sepa) {
                    mapped = vendor_map_lookup(vendors, full);
                    if (!mapped)
                        mapped = vendor_map_lookup(vendors, val);
                    if (!first) {
                        first = malloc(strlen(full) + 1);
                        if (!first)
                            abort();
                        memcpy(first, full, strlen(full) + 1);
                    }
                }
            }
            free(val);
            free(scheme);
        }
        xmlXPathFreeObject(o);
    }
    char *name = NULL;
    for (size_t p = 0; p < sizeof(name_paths) / sizeof(name_paths[0]); p++) {
        char *t = ublin_text(u, NULL, name_paths[p], NULL);
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
        rc = ublin_fail(u, UBL_SELLER,
                        "no seller identifier (EndpointID, PartyIdentification/ID, "
                        "PartyLegalEntity/CompanyID or PartyTaxScheme/CompanyID) and no "
                        "--vendors mapping for the seller's name");
    invoice_set_str(&inv->vendor_name, name);
    free(first);
    free(name);
    return rc;
}

static int ublin_date(struct ublin *u, const char *xpath, bool required, char ret[11])
{
    char *d = ublin_text(u, NULL, xpath, NULL);
    int rc = APBOT_OK;
    if (!d) {
        if (required)
            rc = ublin_fail(u, xpath, "missing");
    } else if (!invoice_date_valid(d)) {
        rc = ublin_fail(u, xpath, "'%.40s' is not a valid date (YYYY-MM-DD)", d);
    } else {
        memcpy(ret, d, 11);
    }
    free(d);
    return rc;
}

static int ublin_lines(struct ublin *u, struct invoice *inv)
{
    xmlXPathObjectPtr o = ublin_eval(u, NULL, u->line_el);
    size_t n = ublin_count(o);
    int rc = APBOT_OK;
    if (n > UBL_MAX_LINES) {
        rc = ublin_fail(u, u->line_el, "more than %d lines", UBL_MAX_LINES);
        goto out;
    }
    const char *qty_el = strcmp(u->line_el, "cac:CreditNoteLine") == 0 ? "cbc:CreditedQuantity"
                                                                       : "cbc:InvoicedQuantity";
    for (size_t i = 0; i < n && !rc; i++) {
        xmlNodePtr ln = o->nodesetval->nodeTab[i];
        char rel[128];
        snprintf(rel, sizeof(rel), "%s[%zu]/cbc:LineExtensionAmount", u->line_el, i + 1);
        struct invoice_line l = {0};
        xmlNodePtr amt = NULL;
        char *text = ublin_text(u, ln, "cbc:LineExtensionAmount", &amt);
        free(text);
        if (!amt) {
            rc = ublin_fail(u, rel, "missing");
            break;
        }
        if ((rc = ublin_amount_node(u, amt, rel, inv->currency, &l.net)))
            break;
        l.quantity = ublin_text(u, ln, qty_el, NULL);
        l.unit_price = ublin_text(u, ln, "cac:Price/cbc:PriceAmount", NULL);
        l.description = ublin_text(u, ln, "cac:Item/cbc:Name", NULL);
        if (!l.description)
            l.description = ublin_text(u, ln, "cac:Item/cbc:Description", NULL);
        l.gl_account = ublin_text(u, ln, "cbc:AccountingCost", NULL);
        char *cat = ublin_text(u, ln, "cac:Item/cac:ClassifiedTaxCategory/cbc:ID", NULL);
        char *pct = ublin_text(u, ln, "cac:Item/cac:ClassifiedTaxCategory/cbc:Percent", NULL);
        if (cat) {
            size_t len = strlen(cat) + 1 + (pct ? strlen(pct) : 0) + 1;
            l.tax_category = malloc(len);
            if (!l.tax_category)
                abort();
            snprintf(l.tax_category, len, "%s%s%s", cat, pct ? ":" : "", pct ? pct : "");
        }
        free(cat);
        free(pct);
        invoice_add_line(inv, &l);
        free(l.tax_category);
        free(l.quantity);
        free(l.unit_price);
        free(l.description);
        free(l.gl_account);
    }
out:
    xmlXPathFreeObject(o);
    return rc;
}

/* Fills inv from the document; on failure u->where/u->reason say why. */
static int ublin_extract(struct ublin *u, const struct vendor_map *vendors, struct invoice *inv)
{
    int rc;
    const char *tc_el =
        inv->doc_type == INVOICE_DOC_CREDIT_NOTE ? "cbc:CreditNoteTypeCode" : "cbc:InvoiceTypeCode";
    char *number = ublin_text(u, NULL, "cbc:ID", NULL);
    if (!number)
        return ublin_fail(u, "cbc:ID", "missing invoice number");
    invoice_set_str(&inv->invoice_number, number);
    free(number);

    char *code = ublin_text(u, NULL, tc_el, NULL);
    if (inv->doc_type == INVOICE_DOC_INVOICE && ublin_is_credit_code(code))
        inv->doc_type = INVOICE_DOC_CREDIT_NOTE;
    free(code);

    if ((rc = ublin_date(u, "cbc:IssueDate", true, inv->issue_date)))
        return rc;
    if ((rc = ublin_date(u, "cbc:DueDate", false, inv->due_date)))
        return rc;
    if (!inv->due_date[0] &&
        (rc = ublin_date(u, "cac:PaymentMeans/cbc:PaymentDueDate", false, inv->due_date)))
        return rc;

    xmlNodePtr pay = NULL;
    char *ptext = ublin_text(u, NULL, "cac:LegalMonetaryTotal/cbc:PayableAmount", &pay);
    free(ptext);
    if (!pay)
        return ublin_fail(u, "cac:LegalMonetaryTotal/cbc:PayableAmount", "missing");
    char *ccy = ublin_text(u, NULL, "cbc:DocumentCurrencyCode", NULL);
    const char *ccy_rel = "cbc:DocumentCurrencyCode";
    if (!ccy) {
        ccy = ublin_attr(pay, "currencyID");
        ccy_rel = "cac:LegalMonetaryTotal/cbc:PayableAmount/@currencyID";
    }
    if (!ccy)
        return ublin_fail(u, "cbc:DocumentCurrencyCode",
                          "no document currency (neither DocumentCurrencyCode nor a currencyID "
                          "on PayableAmount)");
    int e = money_exponent(ccy);
    if (e < 0) {
        rc = ublin_fail(u, ccy_rel, "unknown currency '%.10s'", ccy);
        free(ccy);
        return rc;
    }
    memcpy(inv->currency, ccy, 4);
    inv->exponent = e;
    free(ccy);

    if ((rc = ublin_seller(u, vendors, inv)))
        return rc;

    if ((rc = ublin_amount_node(u, pay, "cac:LegalMonetaryTotal/cbc:PayableAmount", inv->currency,
                                &inv->payable)))
        return rc;

    /* Tax: every TaxTotal/TaxAmount in the document currency; others (the VAT accounting
     * currency of BT-111) are not this document's amounts. */
    xmlXPathObjectPtr o = ublin_eval(u, NULL, "cac:TaxTotal/cbc:TaxAmount");
    int64_t tax = 0;
    for (size_t i = 0; i < ublin_count(o) && !rc; i++) {
        xmlNodePtr n = o->nodesetval->nodeTab[i];
        char *cid = ublin_attr(n, "currencyID");
        bool ours = !cid || strcmp(cid, inv->currency) == 0;
        free(cid);
        if (!ours)
            continue;
        char rel[64];
        snprintf(rel, sizeof(rel), "cac:TaxTotal[%zu]/cbc:TaxAmount", i + 1);
        int64_t t = 0;
        if ((rc = ublin_amount_node(u, n, rel, inv->currency, &t)))
            break;
        if (money_add(&tax, t))
            rc = ublin_fail(u, rel, "tax total out of range");
    }
    xmlXPathFreeObject(o);
    if (rc)
        return rc;
    inv->tax_total = tax;

    bool found = false;
    if ((rc = ublin_amount(u, "cac:LegalMonetaryTotal/cbc:TaxExclusiveAmount", inv->currency,
                           &inv->net_total, &found)))
        return rc;
    if (!found && (rc = ublin_amount(u, "cac:LegalMonetaryTotal/cbc:LineExtensionAmount",
                                     inv->currency, &inv->net_total, &found)))
        return rc;
    if (!found) {
        inv->net_total = inv->payable;
        if (money_add(&inv->net_total, -inv->tax_total))
            return ublin_fail(u, "cac:LegalMonetaryTotal", "totals out of range");
    }

    if ((rc = ublin_lines(u, inv)))
        return rc;

    char verr[APBOT_ERR_LEN];
    if (invoice_validate(inv, verr, sizeof(verr)))
        return ublin_fail(u, "", "%s", verr);
    return APBOT_OK;
}

int ublin_read(const char *path, const struct vendor_map *vendors, const struct invoice_sink *sink,
               char *err, size_t errlen)
{
    struct ublin u = {.path = path};
    struct invoice inv;
    invoice_init(&inv);
    int rc = APBOT_OK;
    int opts = XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_NOCDATA;
#if LIBXML_VERSION >= 21300
    opts |= XML_PARSE_NO_XXE;
#endif
    xmlResetLastError();
    u.doc = xmlReadFile(path, NULL, opts);
    if (!u.doc) {
        const xmlError *xe = xmlGetLastError();
        rc = apbot_fail(err, errlen, APBOT_E_PARSE, "%s:%d: not well-formed XML: %s", path,
                        xe ? xe->line : 0, xe && xe->message ? xe->message : "parse error");
        /* libxml2 messages end in '\n' */
        size_t n = err ? strlen(err) : 0;
        if (n && err[n - 1] == '\n')
            err[n - 1] = '\0';
        goto out;
    }
    u.root = xmlDocGetRootElement(u.doc);
    if (!u.root) {
        rc = apbot_fail(err, errlen, APBOT_E_PARSE, "%s: no root element", path);
        goto out;
    }
    if (u.root->ns && u.root->ns->prefix)
        snprintf(u.rootname, sizeof(u.rootname), "%.20s:%.40s", u.root->ns->prefix, u.root->name);
    else
        snprintf(u.rootname, sizeof(u.rootname), "%.60s", u.root->name);

    const char *href = u.root->ns ? (const char *)u.root->ns->href : "";
    if (u.doc->intSubset || u.doc->extSubset) {
        ublin_fail(&u, "",
                   "the document has a DOCTYPE; invoices must not declare DTDs or "
                   "entities");
        goto refuse;
    }
    if (strcmp((const char *)u.root->name, "Invoice") == 0 && strcmp(href, UBL_NS_INVOICE) == 0) {
        inv.doc_type = INVOICE_DOC_INVOICE;
        u.line_el = "cac:InvoiceLine";
    } else if (strcmp((const char *)u.root->name, "CreditNote") == 0 &&
               strcmp(href, UBL_NS_CREDIT) == 0) {
        inv.doc_type = INVOICE_DOC_CREDIT_NOTE;
        u.line_el = "cac:CreditNoteLine";
    } else {
        ublin_fail(&u, "",
                   "not a UBL 2.1 Invoice or CreditNote (root element '%.60s' in namespace "
                   "'%.120s')",
                   (const char *)u.root->name, href);
        goto refuse;
    }

    u.xp = xmlXPathNewContext(u.doc);
    if (!u.xp)
        abort();
    if (xmlXPathRegisterNs(u.xp, (const xmlChar *)"cac", (const xmlChar *)UBL_NS_CAC) ||
        xmlXPathRegisterNs(u.xp, (const xmlChar *)"cbc", (const xmlChar *)UBL_NS_CBC))
        abort();
    if (ublin_extract(&u, vendors, &inv) != APBOT_OK)
        goto refuse;
    snprintf(u.where, sizeof(u.where), "%s#/%s", path, u.rootname);
    rc = sink->accept(sink->ctx, &inv, u.where);
    goto out;

refuse:
    sink->refuse(sink->ctx, u.where, u.reason);
out:
    invoice_done(&inv);
    if (u.xp)
        xmlXPathFreeContext(u.xp);
    if (u.doc)
        xmlFreeDoc(u.doc);
    return rc;
}
