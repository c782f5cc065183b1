/*
 * ublin.c - the UBL 2.1 / Peppol BIS Billing 3 reader: one Invoice or CreditNote per file.
 *
 * The parse is xmlin's (xmlin-int.h): bounded while parsing, no network, no entity
 * substitution or DTD loading; a document that carries a DOCTYPE at all is refused (no invoice
 * needs one, and it is the door to entity tricks). Fields are read with XPath relative to the
 * root element, with the UBL namespaces registered, so the root's own prefix (`ubl:Invoice`)
 * does not matter. The helpers that read amounts, tax sums and the seller are shared with the
 * CII reader (ciiin.c), so both syntaxes follow one set of rules.
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
#include "input/ublin.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xmlin-int.h"

#include "apbot/invoice.h"
#include "apbot/mem.h"
#include "apbot/money.h"

#define UBL_NS_CAC "urn:oasis:names:specification:ubl:schema:xsd:CommonAggregateComponents-2"
#define UBL_NS_CBC "urn:oasis:names:specification:ubl:schema:xsd:CommonBasicComponents-2"

#define UBL_MAX_LINES 100000
_Static_assert(UBL_MAX_LINES <= INVOICE_MAX_LINES, "an invoice holds every line read");
#define UBL_SELLER "cac:AccountingSupplierParty/cac:Party"

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

static int ublin_seller(struct xmlin *u, const struct vendor_map *vendors, struct invoice *inv)
{
    static const char *const ids[] = {
        UBL_SELLER "/cbc:EndpointID",
        UBL_SELLER "/cac:PartyIdentification/cbc:ID",
        UBL_SELLER "/cac:PartyLegalEntity/cbc:CompanyID",
        UBL_SELLER "/cac:PartyTaxScheme/cbc:CompanyID",
    };
    static const char *const names[] = {
        UBL_SELLER "/cac:PartyName/cbc:Name",
        UBL_SELLER "/cac:PartyLegalEntity/cbc:RegistrationName",
    };
    static const struct xmlin_seller_paths paths = {
        .party = UBL_SELLER,
        .ids = ids,
        .n_ids = sizeof(ids) / sizeof(ids[0]),
        .names = names,
        .n_names = sizeof(names) / sizeof(names[0]),
        .missing = "no seller identifier (EndpointID, PartyIdentification/ID, "
                   "PartyLegalEntity/CompanyID or PartyTaxScheme/CompanyID) and no "
                   "--vendors mapping for the seller's name",
    };
    return xmlin_seller(u, &paths, vendors, inv);
}

static int ublin_date(struct xmlin *u, const char *xpath, bool required, char ret[11])
{
    char *d = xmlin_text(u, NULL, xpath, NULL);
    int rc = APBOT_OK;
    if (!d) {
        if (required)
            rc = xmlin_fail(u, xpath, "missing");
    } else if (!invoice_date_valid(d)) {
        rc = xmlin_fail(u, xpath, "'%.40s' is not a valid date (YYYY-MM-DD)", d);
    } else {
        memcpy(ret, d, 11);
    }
    free(d);
    return rc;
}

static int ublin_lines(struct xmlin *u, const char *line_el, struct invoice *inv)
{
    xmlXPathObjectPtr o = xmlin_eval(u, NULL, line_el);
    size_t n = xmlin_count(o);
    int rc = APBOT_OK;
    if (n > UBL_MAX_LINES) {
        rc = xmlin_fail(u, line_el, "more than %d lines", UBL_MAX_LINES);
        goto out;
    }
    const char *qty_el = strcmp(line_el, "cac:CreditNoteLine") == 0 ? "cbc:CreditedQuantity"
                                                                    : "cbc:InvoicedQuantity";
    for (size_t i = 0; i < n && !rc; i++) {
        xmlNodePtr ln = o->nodesetval->nodeTab[i];
        char rel[128];
        snprintf(rel, sizeof(rel), "%s[%zu]/cbc:LineExtensionAmount", line_el, i + 1);
        struct invoice_line l = {0};
        xmlNodePtr amt = NULL;
        char *text = xmlin_text(u, ln, "cbc:LineExtensionAmount", &amt);
        free(text);
        if (!amt) {
            rc = xmlin_fail(u, rel, "missing");
            break;
        }
        if ((rc = xmlin_amount_node(u, amt, rel, inv->currency, &l.net)))
            break;
        l.quantity = xmlin_text(u, ln, qty_el, NULL);
        l.unit_price = xmlin_text(u, ln, "cac:Price/cbc:PriceAmount", NULL);
        l.description = xmlin_text(u, ln, "cac:Item/cbc:Name", NULL);
        if (!l.description)
            l.description = xmlin_text(u, ln, "cac:Item/cbc:Description", NULL);
        l.gl_account = xmlin_text(u, ln, "cbc:AccountingCost", NULL);
        char *cat = xmlin_text(u, ln, "cac:Item/cac:ClassifiedTaxCategory/cbc:ID", NULL);
        char *pct = xmlin_text(u, ln, "cac:Item/cac:ClassifiedTaxCategory/cbc:Percent", NULL);
        if (cat) {
            size_t len = strlen(cat) + 1 + (pct ? strlen(pct) : 0) + 1;
            l.tax_category = apbot_xmalloc(len);
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
static int ublin_extract(struct xmlin *u, const char *line_el, const struct vendor_map *vendors,
                         struct invoice *inv)
{
    int rc;
    const char *tc_el =
        inv->doc_type == INVOICE_DOC_CREDIT_NOTE ? "cbc:CreditNoteTypeCode" : "cbc:InvoiceTypeCode";
    char *number = xmlin_text(u, NULL, "cbc:ID", NULL);
    if (!number)
        return xmlin_fail(u, "cbc:ID", "missing invoice number");
    invoice_set_str(&inv->invoice_number, number);
    free(number);

    char *code = xmlin_text(u, NULL, tc_el, NULL);
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
    char *ptext = xmlin_text(u, NULL, "cac:LegalMonetaryTotal/cbc:PayableAmount", &pay);
    free(ptext);
    if (!pay)
        return xmlin_fail(u, "cac:LegalMonetaryTotal/cbc:PayableAmount", "missing");
    char *ccy = xmlin_text(u, NULL, "cbc:DocumentCurrencyCode", NULL);
    const char *ccy_rel = "cbc:DocumentCurrencyCode";
    if (!ccy) {
        ccy = xmlin_attr(pay, "currencyID");
        ccy_rel = "cac:LegalMonetaryTotal/cbc:PayableAmount/@currencyID";
    }
    if (!ccy)
        return xmlin_fail(u, "cbc:DocumentCurrencyCode",
                          "no document currency (neither DocumentCurrencyCode nor a currencyID "
                          "on PayableAmount)");
    int e = money_exponent(ccy);
    if (e < 0) {
        rc = xmlin_fail(u, ccy_rel, "unknown currency '%.10s'", ccy);
        free(ccy);
        return rc;
    }
    memcpy(inv->currency, ccy, 4);
    inv->exponent = e;
    free(ccy);

    if ((rc = ublin_seller(u, vendors, inv)))
        return rc;

    if ((rc = xmlin_amount_node(u, pay, "cac:LegalMonetaryTotal/cbc:PayableAmount", inv->currency,
                                &inv->payable)))
        return rc;

    /* Tax: every TaxTotal/TaxAmount in the document currency; others (the VAT accounting
     * currency of BT-111) are not this document's amounts. */
    if ((rc = xmlin_sum_in_currency(u, "cac:TaxTotal/cbc:TaxAmount",
                                    "cac:TaxTotal[%zu]/cbc:TaxAmount", inv->currency,
                                    &inv->tax_total)))
        return rc;

    bool found = false;
    if ((rc = xmlin_amount(u, "cac:LegalMonetaryTotal/cbc:TaxExclusiveAmount", inv->currency,
                           &inv->net_total, &found)))
        return rc;
    if (!found && (rc = xmlin_amount(u, "cac:LegalMonetaryTotal/cbc:LineExtensionAmount",
                                     inv->currency, &inv->net_total, &found)))
        return rc;
    if (!found) {
        inv->net_total = inv->payable;
        if (money_add(&inv->net_total, -inv->tax_total))
            return xmlin_fail(u, "cac:LegalMonetaryTotal", "totals out of range");
    }

    if ((rc = ublin_lines(u, line_el, inv)))
        return rc;

    char verr[APBOT_ERR_LEN];
    if (invoice_validate(inv, verr, sizeof(verr)))
        return xmlin_fail(u, "", "%s", verr);
    return APBOT_OK;
}

void ublin_doc(const char *name, xmlDocPtr doc, const struct vendor_map *vendors,
               struct xmlin_result *ret)
{
    static const char *const ns[] = {"cac", UBL_NS_CAC, "cbc", UBL_NS_CBC};
    struct xmlin u;
    xmlin_init(&u, name, doc, ns, 2);
    struct invoice *inv = &ret->inv;
    const char *href = u.root->ns ? (const char *)u.root->ns->href : "";
    const char *line_el = NULL;
    if (xmlStrEqual(u.root->name, BAD_CAST "Invoice") && strcmp(href, XMLIN_NS_UBL_INVOICE) == 0) {
        inv->doc_type = INVOICE_DOC_INVOICE;
        line_el = "cac:InvoiceLine";
    } else if (xmlStrEqual(u.root->name, BAD_CAST "CreditNote") &&
               strcmp(href, XMLIN_NS_UBL_CREDIT) == 0) {
        inv->doc_type = INVOICE_DOC_CREDIT_NOTE;
        line_el = "cac:CreditNoteLine";
    } else {
        xmlin_fail(&u, "",
                   "not a UBL 2.1 Invoice or CreditNote (root element '%.60s' in namespace "
                   "'%.120s')",
                   (const char *)u.root->name, href);
    }
    if (line_el && ublin_extract(&u, line_el, vendors, inv) == APBOT_OK)
        xmlin_accepted(&u, ret);
    else
        xmlin_refused(&u, ret);
    xmlin_done(&u);
}
