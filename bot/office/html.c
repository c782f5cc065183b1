/*
 * html.c - an HTML page as a libxml2 tree (html.h).
 */
#include "office/html.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apbot/buf.h"
#include "apbot/mem.h"
#include "apbot/text.h"

void html_doc_new(struct html_doc *d)
{
    xmlNodePtr meta;

    d->doc = htmlNewDocNoDtD(NULL, NULL);
    if (!d->doc)
        abort(); /* libxml2 fails here only on out-of-memory (mem.h's policy) */
    xmlCreateIntSubset(d->doc, BAD_CAST "html", NULL, NULL);
    d->html = xmlNewNode(NULL, BAD_CAST "html");
    if (!d->html)
        abort();
    xmlDocSetRootElement(d->doc, d->html);
    html_attr(d->html, "lang", "en");
    d->head = html_el(d->html, "head", NULL);
    meta = html_el(d->head, "meta", NULL);
    html_attr(meta, "http-equiv", "Content-Type");
    html_attr(meta, "content", "text/html; charset=UTF-8");
}

xmlChar *html_doc_dump(struct html_doc *d, size_t *ret_len)
{
    xmlChar *mem = NULL;
    int size = 0;

    htmlDocDumpMemoryFormat(d->doc, &mem, &size, 1);
    xmlFreeDoc(d->doc);
    d->doc = NULL;
    d->html = d->head = NULL;
    if (!mem || size <= 0) {
        xmlFree(mem);
        *ret_len = 0;
        return NULL;
    }
    *ret_len = (size_t)size;
    return mem;
}

xmlNodePtr html_el(xmlNodePtr parent, const char *name, const char *cls)
{
    xmlNodePtr n = xmlNewChild(parent, NULL, BAD_CAST name, NULL);
    if (!n)
        abort(); /* libxml2 fails here only on out-of-memory (mem.h's policy) */
    if (cls)
        html_attr(n, "class", cls);
    return n;
}

/* ---- text as given ---------------------------------------------------------------------- */

void html_text(xmlNodePtr parent, const char *t)
{
    if (t && *t)
        xmlAddChild(parent, xmlNewText(BAD_CAST t));
}

xmlNodePtr html_el_text(xmlNodePtr parent, const char *name, const char *cls, const char *t)
{
    xmlNodePtr n = html_el(parent, name, cls);
    html_text(n, t);
    return n;
}

void html_attr(xmlNodePtr n, const char *name, const char *value)
{
    xmlNewProp(n, BAD_CAST name, BAD_CAST value);
}

xmlNodePtr html_id(xmlNodePtr n, const char *id)
{
    html_attr(n, "id", id);
    return n;
}

/* ---- cleaned text ----------------------------------------------------------------------- */

char *html_clean(const char *s)
{
    return text_escape(s ? s : "", HTML_TEXT_MAX, 0);
}

char *html_clean_lines(const char *s)
{
    struct apbot_buf b;
    const char *p = s ? s : "";

    apbot_buf_init(&b, (size_t)HTML_TEXT_MAX * 8);
    while (*p) {
        size_t n = strcspn(p, "\n");
        char *line = apbot_xstrndup(p, n);
        char *c = text_escape(line, HTML_TEXT_MAX, TEXT_KEEP_TAB);
        int rc = apbot_buf_adds(&b, c);
        if (rc == APBOT_OK && p[n] == '\n')
            rc = apbot_buf_adds(&b, "\n");
        free(c);
        free(line);
        if (rc != APBOT_OK)
            break;
        p += n + (p[n] == '\n');
    }
    return apbot_buf_steal(&b, NULL);
}

void html_text_clean(xmlNodePtr parent, const char *t)
{
    char *c;
    if (!t || !*t)
        return;
    c = html_clean(t);
    html_text(parent, c);
    free(c);
}

void html_textf_clean(xmlNodePtr parent, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    html_text_clean(parent, buf);
}

xmlNodePtr html_el_clean(xmlNodePtr parent, const char *name, const char *cls, const char *t)
{
    xmlNodePtr n = html_el(parent, name, cls);
    html_text_clean(n, t);
    return n;
}

void html_attr_clean(xmlNodePtr n, const char *name, const char *value)
{
    char *c = html_clean(value);
    html_attr(n, name, c);
    free(c);
}
