/*
 * html.h - an HTML page as a libxml2 tree, for the review page (serve*.c) and the report's
 * HTML (report_render.c): the document with its head, elements, attributes and text nodes,
 * and the serialisation. Markup is escaped by libxml2's serialiser, never by hand: a value is
 * always a text node or an attribute value, so no text can become an element.
 *
 * Text comes in two kinds:
 *  - as given (html_text, html_el_text, html_attr): the serialiser escapes its markup and
 *    nothing else happens to it. The report's page writes its values this way.
 *  - cleaned (html_*_clean): one line of untrusted text (an invoice, the ERP, a form) with its
 *    control characters, DEL, C1 controls and bytes that are not UTF-8 written as \xNN and a
 *    backslash as \\ (text.h), at most HTML_TEXT_MAX bytes - so a text node never carries
 *    what the serialiser cannot write. The review page writes every text this way.
 *
 * libxml2 fails to make a node only when out of memory: these abort then (mem.h's policy).
 */
#ifndef APBOT_OFFICE_HTML_H
#define APBOT_OFFICE_HTML_H

#include <stddef.h>

#include <libxml/HTMLtree.h>
#include <libxml/tree.h>

#include "apbot/error.h"

#define HTML_TEXT_MAX 16384 /* bytes of one cleaned text on a page */

/* A page being built: <!DOCTYPE html>, <html lang="en"> and its <head>, which holds the
 * UTF-8 charset <meta> and whatever the caller adds; the caller adds <body> to html. */
struct html_doc {
    htmlDocPtr doc;
    xmlNodePtr html, head;
};

/* Starts a page. Cannot fail. */
void html_doc_new(struct html_doc *d);

/* Serialises the page (libxml2's HTML serialiser, formatted) and frees its tree. Returns the
 * bytes (free with xmlFree) and their number in *ret_len, or NULL when nothing was written. */
xmlChar *html_doc_dump(struct html_doc *d, size_t *ret_len);

/* A new element `name` at the end of parent, with class cls unless it is NULL. */
xmlNodePtr html_el(xmlNodePtr parent, const char *name, const char *cls);

/* ---- text as given ---------------------------------------------------------------------- */

/* A text node at the end of parent; nothing for NULL or "". */
void html_text(xmlNodePtr parent, const char *t);
/* html_el with the text t inside. */
xmlNodePtr html_el_text(xmlNodePtr parent, const char *name, const char *cls, const char *t);
/* An attribute. */
void html_attr(xmlNodePtr n, const char *name, const char *value);
/* The id attribute; returns n. */
xmlNodePtr html_id(xmlNodePtr n, const char *id);

/* ---- cleaned text ----------------------------------------------------------------------- */

/* One line of untrusted text cleaned (NULL as ""). Heap. */
char *html_clean(const char *s);
/* Several lines (an ERP page's text): each line cleaned, line breaks kept (TABs too). Heap. */
char *html_clean_lines(const char *s);

/* The same as above, with the text cleaned. */
void html_text_clean(xmlNodePtr parent, const char *t);
void html_textf_clean(xmlNodePtr parent, const char *fmt, ...) APBOT_PRINTF(2, 3);
xmlNodePtr html_el_clean(xmlNodePtr parent, const char *name, const char *cls, const char *t);
void html_attr_clean(xmlNodePtr n, const char *name, const char *value);

#endif
