/*
 * reader-int.h - what the dispatcher (reader.c) keeps to itself and its tests see: how it
 * tells a file's format by its first bytes, before any reader is chosen.
 */
#ifndef APBOT_READER_INT_H
#define APBOT_READER_INT_H

#include <stddef.h>

/* What a file is, judged by its first bytes (reader_sniff). */
enum reader_format {
    READER_CSV = 0,     /* anything not recognised below: the CSV reader decides */
    READER_XML,         /* UTF-8 (optional BOM), first non-blank byte '<' */
    READER_XML_UTF16LE, /* UTF-16 little-endian XML, with or without BOM */
    READER_XML_UTF16BE, /* UTF-16 big-endian XML, with or without BOM */
    READER_PDF,         /* "%PDF-" in the first 1024 bytes */
    READER_UTF16_TEXT,  /* UTF-16 that is not XML (a CSV saved as "Unicode"): refused */
    READER_EMPTY,       /* nothing but a BOM and blanks */
};

#ifdef APBOT_UNITTEST /* static in the product (base/unittest.h) */
/*
 * The format of a file from its first n bytes (up to 1024 are looked at). Pure; the table in
 * test_reader.c is its specification. The file name never matters.
 */
enum reader_format reader_sniff(const unsigned char *head, size_t n);
#endif

#endif
