/*
 * serve-int.h - the inside of the review page (serve.h), shared by its files.
 */
#ifndef APBOT_OFFICE_SERVE_INT_H
#define APBOT_OFFICE_SERVE_INT_H

#include <stdbool.h>

#include "apbot/serve.h"

#ifdef APBOT_UNITTEST /* static in the product (base/unittest.h) */
/* Pure: does a request's Host header name the address a listens on (port = the bound port)?
 * Only checked on loopback, where it is what keeps a rebinding DNS name out. */
bool serve_host_ok(const char *host_header, const struct serve_addr *a, unsigned short port);

/* Pure: does an Authorization header carry HTTP Basic with this password (any user name)?
 * Compared in constant time. */
bool serve_basic_ok(const char *authorization, const char *password);

/* Pure: is a POST's Origin (or, without one, its Referer) the page's own origin
 * "http://HOST"? A request without either is accepted (the CSRF token still guards it). */
bool serve_origin_ok(const char *origin, const char *referer, const char *host_header);
#endif

#endif
