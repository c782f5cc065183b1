/*
 * apbot.c - the library's global set-up (apbot.h): the one place a program initialises the
 * libraries beneath apbot. It stands above every module folder because it reaches into the web
 * layer (libcurl); nothing in the modules calls it.
 */
#include "apbot/apbot.h"

#include "web/http.h"

int apbot_global_init(void)
{
    /* libxml2 needs no call here: the web layer installs its allocator and initialises the parser
     * before main (web/xmlarena.c), and once more under pthread_once (web/page.c). */
    return http_global_init();
}

void apbot_global_cleanup(void)
{
    http_global_cleanup();
}

const char *apbot_version(void)
{
    return APBOT_VERSION;
}
