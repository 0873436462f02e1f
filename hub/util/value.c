/*  value - the one grammar of scalar values. See value.h. */
#include "value.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

bool
fh_value_bool (const char *text, bool *out)
{
    if (!text || (strcmp (text, "true") != 0 && strcmp (text, "false") != 0))
        return false;
    *out = text[0] == 't';
    return true;
}

/* Digits of text into *out; *end past them. False without digits or on
   overflow. */
static bool
s_digits (const char *text, long long *out, const char **end)
{
    long long value = 0;
    const char *p = text;
    for (; *p >= '0' && *p <= '9'; p++) {
        int digit = *p - '0';
        if (value > (LLONG_MAX - digit) / 10)
            return false;
        value = value * 10 + digit;
    }
    *out = value;
    *end = p;
    return p > text;
}

bool
fh_value_integer (const char *text, bool negative_ok, long long *out)
{
    if (!text)
        return false;
    bool negative = negative_ok && text[0] == '-';
    const char *end;
    long long value;
    if (!s_digits (text + negative, &value, &end) || *end)
        return false;
    *out = negative ? -value : value;
    return true;
}

/* The scale of a unit: 0 when text is none of units. */
static long long
s_unit (const char *text, const char *const *names, const long long *scales)
{
    for (size_t i = 0; names[i]; i++)
        if (strcmp (text, names[i]) == 0)
            return scales[i];
    return 0;
}

bool
fh_value_duration_ms (const char *text, long long bare_ms, long long *ms, bool *below_ms)
{
    static const char *const names[] = {"ms", "s", "m", "h", NULL};
    static const long long scales[] = {1, 1000, 60000, 3600000};
    long long whole;
    const char *p;
    if (!text || !s_digits (text, &whole, &p))
        return false;
    /* The fraction's digits, kept as an exact decimal below 1. */
    const char *frac = NULL;
    size_t nfrac = 0;
    if (*p == '.') {
        frac = p + 1;
        nfrac = strspn (frac, "0123456789");
        if (nfrac == 0)
            return false;
        p = frac + nfrac;
    }
    long long scale = *p ? s_unit (p, names, scales) : bare_ms;
    if (scale == 0 || whole > LLONG_MAX / scale)
        return false;
    long long result = whole * scale;
    /* fraction x scale, digit by digit: scale / 10^k for digit k. */
    long long step = scale;
    bool lost = false;
    for (size_t i = 0; i < nfrac; i++) {
        int digit = frac[i] - '0';
        if (step >= 10 && step % 10 == 0) {
            step /= 10;
            if (digit * step > LLONG_MAX - result)
                return false;
            result += digit * step;
        }
        else
            lost = lost || digit != 0;
    }
    if (result < 0)
        return false;
    *ms = result;
    if (below_ms)
        *below_ms = lost;
    return true;
}

bool
fh_value_size (const char *text, long long *bytes)
{
    static const char *const names[] = {"B", "K", "KiB", "M", "MiB", "G", "GiB", NULL};
    static const long long scales[] = {1, 1024, 1024, 1048576, 1048576, 1073741824, 1073741824};
    long long value;
    const char *p;
    if (!text || !s_digits (text, &value, &p))
        return false;
    long long scale = *p ? s_unit (p, names, scales) : 1;
    if (scale == 0 || value > LLONG_MAX / scale)
        return false;
    *bytes = value * scale;
    return true;
}

bool
fh_value_number (const char *text, double *out)
{
    if (!text)
        return false;
    char *end;
    errno = 0;
    double value = strtod (text, &end);
    if (errno || end == text || *end || !isfinite (value))
        return false;
    *out = value;
    return true;
}
