/*  utf8 - strict UTF-8 validation (RFC 3629), for the hub's own code.

    The check itself is the plugin SDK's (include/fanhub/sdk.h), so the
    hub and every plugin judge a topic alike.
*/
#ifndef FH_UTF8_H_INCLUDED
#define FH_UTF8_H_INCLUDED

#include <fanhub/sdk.h>

static inline bool
fh_utf8_valid (const void *data, size_t size)
{
    return fanhub_utf8_valid (data, size);
}

#endif
