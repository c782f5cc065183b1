/*
 * text.h - text from invoices and ERP pages made safe for a terminal or a log line.
 *
 * Input files and ERP pages are untrusted: a vendor name or an ERP message may carry ANSI/OSC
 * escape sequences that would repaint or retitle an operator's terminal, or line breaks that
 * would forge a log line. Every such text goes through text_escape() before it is printed.
 */
#ifndef APBOT_TEXT_H
#define APBOT_TEXT_H

#include <stddef.h>

/* Flags for text_escape's last argument (0: escape all that is listed below). */
#define TEXT_KEEP_TAB 1       /* a TAB is kept */
#define TEXT_KEEP_BACKSLASH 2 /* a backslash is kept as it is (messages quoting patterns) */

/*
 * Copies s with every C0 control (including ESC, CR and LF, but not TAB with TEXT_KEEP_TAB),
 * DEL, every C1 control (U+0080..U+009F) and every byte that is not part of valid UTF-8
 * written as \xNN, and a backslash as \\ (unless TEXT_KEEP_BACKSLASH). At most max bytes of
 * output (cut at a character boundary, "..." appended when cut; max >= 8). Heap result, never
 * NULL; NULL s gives "".
 */
char *text_escape(const char *s, size_t max, int flags);

/* The same into a caller's buffer of len bytes (always NUL-terminated when len > 0). Returns
 * dst. */
char *text_escape_into(char *dst, size_t len, const char *s, int flags);

/*
 * A copy of s with every occurrence of secret a or secret b (the ERP password and user, NULL
 * or "" for none) written as "***", scanning left to right; where both start at one place, a
 * wins. Heap result; NULL when s is NULL. For what goes into evidence, logs and reviews.
 */
char *text_mask(const char *s, const char *a, const char *b);

/* text_mask in place: buf (NUL-terminated, capacity len) masked, cut to fit (text_cut_utf8). */
void text_mask_into(char *buf, size_t len, const char *a, const char *b);

/* Cuts s in place to at most max bytes, never inside a UTF-8 sequence. */
void text_cut_utf8(char *s, size_t max);

/* The n bytes at s in standard base64 (RFC 4648, with padding). Heap, never NULL. */
char *text_base64(const void *s, size_t n);
/* The value of the hex digit c (either case), or -1. */
int text_hex_value(int c);
/* s[0..n) decoded as application/x-www-form-urlencoded: '+' a blank, %XX the byte it names,
 * a '%' without two hex digits after it kept as it is. Heap, NUL-terminated (a %00 decodes to
 * a NUL inside: callers that mind look at the length they need). Cannot fail (mem.h). */
char *text_form_decode(const char *s, size_t n);

#endif
