/*  store_db - what the two backends share. See store_db.h. Its own file so
    that the store's files call one way: store.c -> store_options.c ->
    the backends -> here (tests/integration/project/test_layout.py). */
#include "store_db.h"

#include <stdio.h>

void
store_db_why (char *why, size_t whylen, const char *prefix, const char *text)
{
    snprintf (why, whylen, "%s%s", prefix, text);
    /* libpq's messages span lines, indented: one space for each run of
       white space, none at the end. */
    char *out = why;
    bool space = false;
    for (const char *p = why; *p; p++) {
        if (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
            space = true;
        else {
            if (space && out > why)
                *out++ = ' ';
            space = false;
            *out++ = *p;
        }
    }
    *out = '\0';
}
