/*  probe - would creating this file or directory work? Asked without
    creating, opening or locking anything, for `fanhub check`.

    The probes are the plugin SDK's (include/fanhub/sdk.h), so the hub's
    check and a plugin's say the same; see there for what they can tell.
*/
#ifndef FH_PROBE_H_INCLUDED
#define FH_PROBE_H_INCLUDED

#include <fanhub/sdk.h>

static inline int
fh_probe_directory (const char *path, bool *exists, char *why, size_t whylen)
{
    return fanhub_probe_directory (path, exists, why, whylen);
}

#endif
