/*
 * report_html.h - the report's HTML in pieces, for a page that embeds the report (the review
 * page, serve*.c): each is built into parent, an element of a page made with html.h, exactly
 * as the page report_write writes (report_render.c) has it. Every value is a text node or an
 * attribute; the day's chart is an inline <svg> (no script, no style attribute). The CSS the
 * pieces use is report_html_css().
 */
#ifndef APBOT_OFFICE_REPORT_HTML_H
#define APBOT_OFFICE_REPORT_HTML_H

#include <libxml/tree.h>

#include "apbot/report.h"

/* The whole body of the report's page. */
void report_html_body(const struct report *r, xmlNodePtr parent);
/* The balance in items: <table class="balance">, a row per bucket with the day's count and
 * the whole queue's (ids count-BUCKET-day and count-BUCKET-total); day_head and total_head
 * head the two columns. */
void report_html_balance(const struct report *r, xmlNodePtr parent, const char *day_head,
                         const char *total_head);
/* The money tables of the day. */
void report_html_money(const struct report *r, xmlNodePtr parent);
/* The day's chart. */
void report_html_chart(const struct report *r, xmlNodePtr parent);
/* The style sheet of the pieces. Static storage. */
const char *report_html_css(void);

#endif
