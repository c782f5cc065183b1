/*
 * ciiin.c - the UN/CEFACT Cross Industry Invoice (CII D16B) reader: one rsm:CrossIndustryInvoice
 * per file, the syntax ZUGFeRD 2, Factur-X and XRechnung-CII carry.
 *
 * It mirrors the UBL reader (ublin.c) field for field, so the same invoice written in either
 * syntax gets the same identity key and totals; the parse, amounts, tax sums and the seller go
 * through the same helpers (xmlin-int.h). What differs is where CII keeps things:
 * - type: ExchangedDocument/TypeCode 380 -> invoice, 381 -> credit-note; any other code
 *   (384 corrected, 389 self-billed, 751 ...) is refused with the code named: those need a
 *   person, and CII has no separate credit-note root to fall back on.
 * - dates: udt:DateTimeString format 102 (YYYYMMDD, the only format EN 16931 allows here).
 * - seller: SellerTradeParty; candidates URIUniversalCommunication/URIID (the electronic address,
 *   UBL's EndpointID), ID and GlobalID (UBL's PartyIdentification), SpecifiedLegalOrganization/
 *   ID (PartyLegalEntity/CompanyID), SpecifiedTaxRegistration/ID (PartyTaxScheme/CompanyID);
 *   names TradingBusinessName (UBL PartyName) then Name (UBL RegistrationName).
 * - totals: SpecifiedTradeSettlementHeaderMonetarySummation: DuePayableAmount (required),
 *   TaxBasisTotalAmount else LineTotalAmount else payable - tax, TaxTotalAmount in the document
 *   currency (the one in the VAT accounting currency is skipped).
 * - lines: IncludedSupplyChainTradeLineItem, except sub-lines (with a ParentLineID, part of their
 *   parent as UBL's SubInvoiceLine) and INFORMATION lines (outside the totals by definition).
 *   LineTotalAmount is the net; a line tax is read when the line gives one (its summation's
 *   TaxTotalAmount, else its ApplicableTradeTax/CalculatedAmount), else 0.
 * - profiles without lines (Factur-X MINIMUM, BASIC WL): one line per VAT breakdown
 *   (ApplicableHeaderTradeSettlement/ApplicableTradeTax: BasisAmount net, CalculatedAmount tax,
 *   category and rate), which is how a clerk books a header-only invoice; the breakdowns must
 *   add up to the document's net and tax totals exactly. A document with neither lines nor a
 *   breakdown (MINIMUM) is refused: there is nothing to book the amount against.
 * Refusals say "file#/rsm:CrossIndustryInvoice/rsm:ExchangedDocument/ram:TypeCode" and why.
 */
#include "input/ciiin.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xmlin-int.h"

#include "apbot/invoice.h"
#include "apbot/mem.h"
#include "apbot/money.h"

#define CII_NS_RAM                                                                                 \
    "urn:un:unece:uncefact:data:standard:ReusableAggregateBusinessInformationEntity:100"
#define CII_NS_UDT "urn:un:unece:uncefact:data:standard:UnqualifiedDataType:100"

#define CII_MAX_LINES 100000
_Static_assert(CII_MAX_LINES <= INVOICE_MAX_LINES, "an invoice holds every line read");
#define CII_DOC "rsm:ExchangedDocument"
#define CII_TX "rsm:SupplyChainTradeTransaction"
#define CII_SELLER CII_TX "/ram:ApplicableHeaderTradeAgreement/ram:SellerTradeParty"
#define CII_SETTLE CII_TX "/ram:ApplicableHeaderTradeSettlement"
#define CII_SUM CII_SETTLE "/ram:SpecifiedTradeSettlementHeaderMonetarySummation"
#define CII_LINE CII_TX "/ram:IncludedSupplyChainTradeLineItem"
#define CII_LSUM                                                                                   \
    "ram:SpecifiedLineTradeSettlement/ram:SpecifiedTradeSettlementLineMonetarySummation"

static int ciiin_seller(struct xmlin *c, const struct vendor_map *vendors, struct invoice *inv)
{
    static const char *const ids[] = {
        CII_SELLER "/ram:URIUniversalCommunication/ram:URIID",
        CII_SELLER "/ram:ID",
        CII_SELLER "/ram:GlobalID",
        CII_SELLER "/ram:SpecifiedLegalOrganization/ram:ID",
        CII_SELLER "/ram:SpecifiedTaxRegistration/ram:ID",
    };
    static const char *const names[] = {
        CII_SELLER "/ram:SpecifiedLegalOrganization/ram:TradingBusinessName",
        CII_SELLER "/ram:Name",
    };
    static const struct xmlin_seller_paths paths = {
        .party = CII_SELLER,
        .ids = ids,
        .n_ids = sizeof(ids) / sizeof(ids[0]),
        .names = names,
        .n_names = sizeof(names) / sizeof(names[0]),
        .missing = "no seller identifier (URIUniversalCommunication/URIID, ID, GlobalID, "
                   "SpecifiedLegalOrganization/ID or SpecifiedTaxRegistration/ID) and no "
                   "--vendors mapping for the seller's name",
    };
    return xmlin_seller(c, &paths, vendors, inv);
}

/* A udt:DateTimeString of format 102 (YYYYMMDD) into YYYY-MM-DD. */
static int ciiin_date(struct xmlin *c, const char *xpath, bool required, char ret[11])
{
    xmlNodePtr n = NULL;
    char *d = xmlin_text(c, NULL, xpath, &n);
    char *fmt = n ? xmlin_attr(n, "format") : NULL;
    int rc = APBOT_OK;
    if (!d) {
        if (required)
            rc = xmlin_fail(c, xpath, "missing");
        goto out;
    }
    if (fmt && strcmp(fmt, "102") != 0) {
        rc = xmlin_fail(c, xpath,
                        "date format '%.10s' is not read (apbot reads format 102, YYYYMMDD)", fmt);
        goto out;
    }
    char iso[11] = "";
    bool digits = strlen(d) == 8;
    for (size_t i = 0; digits && i < 8; i++)
        digits = d[i] >= '0' && d[i] <= '9';
    if (digits)
        snprintf(iso, sizeof(iso), "%.4s-%.2s-%.2s", d, d + 4, d + 6);
    if (!digits || !invoice_date_valid(iso)) {
        rc = xmlin_fail(c, xpath, "'%.40s' is not a valid date (YYYYMMDD, format 102)", d);
        goto out;
    }
    memcpy(ret, iso, 11);
out:
    free(d);
    free(fmt);
    return rc;
}

/* "CAT:RATE" (or "CAT") from an ApplicableTradeTax node; NULL without a category. */
static char *ciiin_tax_category(struct xmlin *c, xmlNodePtr tax)
{
    char *cat = xmlin_text(c, tax, "ram:CategoryCode", NULL);
    char *pct = xmlin_text(c, tax, "ram:RateApplicablePercent", NULL);
    char *r = NULL;
    if (cat) {
        size_t len = strlen(cat) + 1 + (pct ? strlen(pct) : 0) + 1;
        r = apbot_xmalloc(len);
        snprintf(r, len, "%s%s%s", cat, pct ? ":" : "", pct ? pct : "");
    }
    free(cat);
    free(pct);
    return r;
}

/* A line's tax where the line gives one: its summation's TaxTotalAmount, else the sum of its
 * ApplicableTradeTax/CalculatedAmount, else 0. */
static int ciiin_line_tax(struct xmlin *c, xmlNodePtr ln, const char *rel, const char *ccy,
                          int64_t *ret)
{
    xmlNodePtr n = NULL;
    char *t = xmlin_text(c, ln, CII_LSUM "/ram:TaxTotalAmount", &n);
    free(t);
    *ret = 0;
    if (n)
        return xmlin_amount_node(c, n, rel, ccy, ret);
    xmlXPathObjectPtr o = xmlin_eval(
        c, ln, "ram:SpecifiedLineTradeSettlement/ram:ApplicableTradeTax/ram:CalculatedAmount");
    int rc = APBOT_OK;
    int64_t sum = 0;
    for (size_t i = 0; i < xmlin_count(o) && !rc; i++) {
        int64_t v = 0;
        if ((rc = xmlin_amount_node(c, o->nodesetval->nodeTab[i], rel, ccy, &v)) == APBOT_OK &&
            money_add(&sum, v))
            rc = xmlin_fail(c, rel, "line tax out of range");
    }
    xmlXPathFreeObject(o);
    if (rc == APBOT_OK)
        *ret = sum;
    return rc;
}

static void ciiin_add_line(struct invoice *inv, struct invoice_line *l)
{
    invoice_add_line(inv, l);
    free(l->tax_category);
    free(l->quantity);
    free(l->unit_price);
    free(l->description);
    free(l->gl_account);
}

static int ciiin_lines(struct xmlin *c, struct invoice *inv)
{
    xmlXPathObjectPtr o = xmlin_eval(c, NULL, CII_LINE);
    size_t n = xmlin_count(o);
    int rc = APBOT_OK;
    if (n > CII_MAX_LINES) {
        rc = xmlin_fail(c, CII_LINE, "more than %d lines", CII_MAX_LINES);
        goto out;
    }
    for (size_t i = 0; i < n && !rc; i++) {
        xmlNodePtr ln = o->nodesetval->nodeTab[i];
        char *parent =
            xmlin_text(c, ln, "ram:AssociatedDocumentLineDocument/ram:ParentLineID", NULL);
        char *status =
            xmlin_text(c, ln, "ram:AssociatedDocumentLineDocument/ram:LineStatusReasonCode", NULL);
        bool skip = parent || (status && strcmp(status, "INFORMATION") == 0);
        free(parent);
        free(status);
        if (skip)
            continue;
        char rel[200];
        snprintf(rel, sizeof(rel), "%s[%zu]/%s/ram:LineTotalAmount", CII_LINE, i + 1, CII_LSUM);
        struct invoice_line l = {0};
        xmlNodePtr amt = NULL;
        char *text = xmlin_text(c, ln, CII_LSUM "/ram:LineTotalAmount", &amt);
        free(text);
        if (!amt) {
            rc = xmlin_fail(c, rel, "missing");
            break;
        }
        if ((rc = xmlin_amount_node(c, amt, rel, inv->currency, &l.net)))
            break;
        snprintf(rel, sizeof(rel), "%s[%zu]/ram:SpecifiedLineTradeSettlement", CII_LINE, i + 1);
        if ((rc = ciiin_line_tax(c, ln, rel, inv->currency, &l.tax)))
            break;
        l.quantity = xmlin_text(c, ln, "ram:SpecifiedLineTradeDelivery/ram:BilledQuantity", NULL);
        l.unit_price = xmlin_text(
            c, ln, "ram:SpecifiedLineTradeAgreement/ram:NetPriceProductTradePrice/ram:ChargeAmount",
            NULL);
        l.description = xmlin_text(c, ln, "ram:SpecifiedTradeProduct/ram:Name", NULL);
        if (!l.description)
            l.description = xmlin_text(c, ln, "ram:SpecifiedTradeProduct/ram:Description", NULL);
        l.gl_account = xmlin_text(
            c, ln,
            "ram:SpecifiedLineTradeSettlement/ram:ReceivableSpecifiedTradeAccountingAccount/ram:ID",
            NULL);
        xmlXPathObjectPtr t =
            xmlin_eval(c, ln, "ram:SpecifiedLineTradeSettlement/ram:ApplicableTradeTax");
        if (xmlin_count(t))
            l.tax_category = ciiin_tax_category(c, t->nodesetval->nodeTab[0]);
        xmlXPathFreeObject(t);
        ciiin_add_line(inv, &l);
    }
out:
    xmlXPathFreeObject(o);
    return rc;
}

/*
 * No lines (Factur-X MINIMUM, BASIC WL): one line per VAT breakdown, which must add up to the
 * document's net and tax totals; no breakdown at all is refused.
 */
static int ciiin_breakdown_lines(struct xmlin *c, struct invoice *inv)
{
    xmlXPathObjectPtr o = xmlin_eval(c, NULL, CII_SETTLE "/ram:ApplicableTradeTax");
    size_t n = xmlin_count(o);
    int rc = APBOT_OK;
    int64_t net = 0, tax = 0;
    if (n == 0) {
        rc = xmlin_fail(c, CII_TX,
                        "no invoice lines and no VAT breakdown (a Factur-X MINIMUM document "
                        "carries totals only): nothing to book the amount against; ask the "
                        "vendor for a BASIC or EN 16931 invoice, or book it by hand");
        goto out;
    }
    if (n > CII_MAX_LINES) {
        rc = xmlin_fail(c, CII_SETTLE "/ram:ApplicableTradeTax", "more than %d VAT breakdowns",
                        CII_MAX_LINES);
        goto out;
    }
    for (size_t i = 0; i < n && !rc; i++) {
        xmlNodePtr bt = o->nodesetval->nodeTab[i];
        char rel[200];
        struct invoice_line l = {0};
        xmlNodePtr basis = NULL, calc = NULL;
        free(xmlin_text(c, bt, "ram:BasisAmount", &basis));
        free(xmlin_text(c, bt, "ram:CalculatedAmount", &calc));
        snprintf(rel, sizeof(rel), "%s/ram:ApplicableTradeTax[%zu]/ram:BasisAmount", CII_SETTLE,
                 i + 1);
        if (!basis) {
            rc = xmlin_fail(c, rel,
                            "missing (the document has no lines, so its VAT breakdown "
                            "is booked as its lines)");
            break;
        }
        if ((rc = xmlin_amount_node(c, basis, rel, inv->currency, &l.net)))
            break;
        snprintf(rel, sizeof(rel), "%s/ram:ApplicableTradeTax[%zu]/ram:CalculatedAmount",
                 CII_SETTLE, i + 1);
        if (calc && (rc = xmlin_amount_node(c, calc, rel, inv->currency, &l.tax)))
            break;
        if (money_add(&net, l.net) || money_add(&tax, l.tax)) {
            rc = xmlin_fail(c, rel, "VAT breakdown out of range");
            break;
        }
        l.tax_category = ciiin_tax_category(c, bt);
        size_t dlen = 64 + (l.tax_category ? strlen(l.tax_category) : 0);
        l.description = apbot_xmalloc(dlen);
        snprintf(l.description, dlen, "VAT breakdown %s (the invoice has no lines)",
                 l.tax_category ? l.tax_category : "?");
        ciiin_add_line(inv, &l);
    }
    if (rc == APBOT_OK && (net != inv->net_total || tax != inv->tax_total)) {
        char a[40], b[40], t1[40], t2[40];
        rc = xmlin_fail(c, CII_SETTLE,
                        "no invoice lines, and the VAT breakdown (net %s, tax %s) does not add "
                        "up to the totals (net %s, tax %s)",
                        money_text(net, inv->exponent, a, sizeof(a)),
                        money_text(tax, inv->exponent, t1, sizeof(t1)),
                        money_text(inv->net_total, inv->exponent, b, sizeof(b)),
                        money_text(inv->tax_total, inv->exponent, t2, sizeof(t2)));
    }
out:
    xmlXPathFreeObject(o);
    return rc;
}

/* Fills inv from the document; on failure c->where/c->reason say why. */
static int ciiin_extract(struct xmlin *c, const struct vendor_map *vendors, struct invoice *inv)
{
    int rc;
    char *number = xmlin_text(c, NULL, CII_DOC "/ram:ID", NULL);
    if (!number)
        return xmlin_fail(c, CII_DOC "/ram:ID", "missing invoice number");
    invoice_set_str(&inv->invoice_number, number);
    free(number);

    char *code = xmlin_text(c, NULL, CII_DOC "/ram:TypeCode", NULL);
    if (!code)
        return xmlin_fail(c, CII_DOC "/ram:TypeCode",
                          "missing document type code (380 invoice or 381 credit note)");
    if (strcmp(code, "380") == 0) {
        inv->doc_type = INVOICE_DOC_INVOICE;
    } else if (strcmp(code, "381") == 0) {
        inv->doc_type = INVOICE_DOC_CREDIT_NOTE;
    } else {
        rc = xmlin_fail(c, CII_DOC "/ram:TypeCode",
                        "document type code '%.20s' is not read: apbot books 380 (commercial "
                        "invoice) and 381 (credit note); anything else needs a person",
                        code);
        free(code);
        return rc;
    }
    free(code);

    if ((rc =
             ciiin_date(c, CII_DOC "/ram:IssueDateTime/udt:DateTimeString", true, inv->issue_date)))
        return rc;
    if ((rc = ciiin_date(c,
                         CII_SETTLE "/ram:SpecifiedTradePaymentTerms/ram:DueDateDateTime/"
                                    "udt:DateTimeString",
                         false, inv->due_date)))
        return rc;

    char *ccy = xmlin_text(c, NULL, CII_SETTLE "/ram:InvoiceCurrencyCode", NULL);
    if (!ccy)
        return xmlin_fail(c, CII_SETTLE "/ram:InvoiceCurrencyCode", "missing document currency");
    int e = money_exponent(ccy);
    if (e < 0) {
        rc = xmlin_fail(c, CII_SETTLE "/ram:InvoiceCurrencyCode", "unknown currency '%.10s'", ccy);
        free(ccy);
        return rc;
    }
    memcpy(inv->currency, ccy, 4);
    inv->exponent = e;
    free(ccy);

    if ((rc = ciiin_seller(c, vendors, inv)))
        return rc;

    xmlNodePtr pay = NULL;
    free(xmlin_text(c, NULL, CII_SUM "/ram:DuePayableAmount", &pay));
    if (!pay)
        return xmlin_fail(c, CII_SUM "/ram:DuePayableAmount", "missing");
    if ((rc = xmlin_amount_node(c, pay, CII_SUM "/ram:DuePayableAmount", inv->currency,
                                &inv->payable)))
        return rc;

    if ((rc = xmlin_sum_in_currency(c, CII_SUM "/ram:TaxTotalAmount",
                                    CII_SUM "/ram:TaxTotalAmount[%zu]", inv->currency,
                                    &inv->tax_total)))
        return rc;

    bool found = false;
    if ((rc = xmlin_amount(c, CII_SUM "/ram:TaxBasisTotalAmount", inv->currency, &inv->net_total,
                           &found)))
        return rc;
    if (!found && (rc = xmlin_amount(c, CII_SUM "/ram:LineTotalAmount", inv->currency,
                                     &inv->net_total, &found)))
        return rc;
    if (!found) {
        inv->net_total = inv->payable;
        if (money_add(&inv->net_total, -inv->tax_total))
            return xmlin_fail(c, CII_SUM, "totals out of range");
    }

    if ((rc = ciiin_lines(c, inv)))
        return rc;
    if (inv->n_lines == 0 && (rc = ciiin_breakdown_lines(c, inv)))
        return rc;

    char verr[APBOT_ERR_LEN];
    if (invoice_validate(inv, verr, sizeof(verr)))
        return xmlin_fail(c, "", "%s", verr);
    return APBOT_OK;
}

void ciiin_doc(const char *name, xmlDocPtr doc, const struct vendor_map *vendors,
               struct xmlin_result *ret)
{
    static const char *const ns[] = {"rsm", XMLIN_NS_CII_RSM, "ram", CII_NS_RAM, "udt", CII_NS_UDT};
    struct xmlin c;
    xmlin_init(&c, name, doc, ns, 3);
    const char *href = c.root->ns ? (const char *)c.root->ns->href : "";
    bool cii = xmlStrEqual(c.root->name, BAD_CAST "CrossIndustryInvoice") &&
               strcmp(href, XMLIN_NS_CII_RSM) == 0;
    if (!cii)
        xmlin_fail(&c, "",
                   "not a CII D16B CrossIndustryInvoice (root element '%.60s' in namespace "
                   "'%.120s')",
                   (const char *)c.root->name, href);
    if (cii && ciiin_extract(&c, vendors, &ret->inv) == APBOT_OK)
        xmlin_accepted(&c, ret);
    else
        xmlin_refused(&c, ret);
    xmlin_done(&c);
}

int ciiin_read_mem(const char *name, const void *data, size_t len, const struct vendor_map *vendors,
                   const struct invoice_sink *sink, char *err, size_t errlen)
{
    struct xmlin_src src = {.fd = -1, .data = data, .len = len};
    return xmlin_read(name, &src, ciiin_doc, vendors, sink, err, errlen);
}
