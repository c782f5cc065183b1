/*
 * tree_diff.h - compares two libxml2 HTML documents node by node: what test_page_fast and
 * fuzz_page_fast hold page_fast.c's trees to (libxml2's own tree for the same bytes).
 */
#ifndef APBOT_TEST_TREE_DIFF_H
#define APBOT_TEST_TREE_DIFF_H

#include <stddef.h>

#include <libxml/HTMLparser.h>

/* NULL when the documents are the same (node types, names, text, comments, CDATA, attributes
 * with their values and ID types, the DTD's identifiers, the document's encoding, charset,
 * properties, parse flags, URL, version and dictionary, its ID table entry by entry); each tree
 * also holds together on its own (every node's document, parent, prev and last links, the
 * name constants of text and comments, nothing in _private or psvi); else the first
 * difference, written to why (n bytes) and returned. Line numbers are not compared: libxml2's
 * parser records them, page_fast.c does not, and apbot never reads them. Iterative: deep
 * trees stay off the stack. */
const char *tree_diff(htmlDocPtr a, htmlDocPtr b, char *why, size_t n);

#endif
