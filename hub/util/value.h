/*  value - the one grammar of scalar values, for the configuration and for
    plugin options alike.

      boolean   true or false
      integer   decimal digits with an optional '-' (where allowed)
      duration  a number with a unit: ms, s, m or h ("250ms", "2s",
                "1.5s", "1m"); a bare number is in the unit its key names
                (seconds for the configuration's timeouts and intervals,
                milliseconds for a key ending in _ms and for plugin
                options), as those keys always were
      size      bytes: an integer with a unit, B, KiB (K), MiB (M) or
                GiB (G) ("4096", "64KiB", "1MiB"); bare: bytes
      number    a finite decimal number, "0.5", "10", "1e3" (a rate)

    Each parser says yes or no; the caller words the error, with the hints
    below, so that every message names the same forms.
*/
#ifndef FH_VALUE_H_INCLUDED
#define FH_VALUE_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>

#define FH_VALUE_DURATION_HINT "a duration such as 250ms, 2s or 1m"
#define FH_VALUE_SIZE_HINT "a size such as 4096, 64KiB or 1MiB"

/* "true" or "false". */
bool fh_value_bool (const char *text, bool *out);

/* Decimal digits, with a leading '-' when negative_ok; false on overflow. */
bool fh_value_integer (const char *text, bool negative_ok, long long *out);

/* A duration in milliseconds. bare_ms is what a bare number counts (1000
   for seconds, 1 for milliseconds); a fraction is allowed, digits past
   the millisecond are dropped, and *below_ms says whether any were not 0
   (so that a maximum can refuse 1.0001 s). Never negative. */
bool fh_value_duration_ms (const char *text, long long bare_ms, long long *ms, bool *below_ms);

/* A size in bytes. Never negative. */
bool fh_value_size (const char *text, long long *bytes);

/* A finite number (strtod's decimal forms, nothing after it). */
bool fh_value_number (const char *text, double *out);

#endif
