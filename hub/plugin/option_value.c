/*  option_value - one typed scalar read as its entry says. See
    option_value.h. */
#include "option_value.h"

#include "value.h"

#include <stdio.h>
#include <string.h>

bool
fh_opt_value_is_scalar (fanhub_opt_type_t type)
{
    switch (type) {
    case FANHUB_OPT_STRING:
    case FANHUB_OPT_FILE:
    case FANHUB_OPT_INT:
    case FANHUB_OPT_UINT:
    case FANHUB_OPT_DOUBLE:
    case FANHUB_OPT_BOOL:
    case FANHUB_OPT_DURATION:
    case FANHUB_OPT_SIZE:
    case FANHUB_OPT_ENUM: return true;
    default: return false;
    }
}

static bool
s_ranged (const fanhub_opt_t *opt)
{
    return opt->min != opt->max;
}

/* WHAT for a number: kind, then its range in unit (" ms", " bytes", "")
   when it has one; unsigned without one, " from 0 up". */
static void
s_range (const fanhub_opt_t *opt, const char *kind, const char *unit, bool is_unsigned, char *out,
         size_t size)
{
    bool seconds = opt->flags & FH_OPT_SECONDS;
    const char *bare = seconds ? " (a bare number is seconds)" : "";
    if (!s_ranged (opt))
        snprintf (out, size, "%s%s%s", kind, is_unsigned ? " from 0 up" : "", bare);
    else
        snprintf (out, size, "%s from %.15g to %.15g%s%s", kind, opt->min, opt->max, unit, bare);
}

/* ENUM: the words, "a, b or c". */
static bool
s_enum (const fanhub_opt_t *opt, const char *text, fh_opt_value_t *out, char *what, size_t whatlen)
{
    const char *const *values = opt->values;
    size_t count = 0;
    while (values && values[count])
        count++;
    for (size_t i = 0; text && i < count; i++)
        if (strcmp (values[i], text) == 0) {
            out->index = (int) i;
            return true;
        }
    size_t len = 0;
    what[0] = '\0';
    for (size_t i = 0; i < count && len < whatlen; i++)
        len += (size_t) snprintf (what + len, whatlen - len, "%s%s",
                                  i == 0           ? ""
                                  : i + 1 == count ? " or "
                                                   : ", ",
                                  values[i]);
    return false;
}

/* DURATION: milliseconds, or seconds with FH_OPT_SECONDS. A fraction
   below the millisecond is dropped; it only counts against the maximum
   (1.0001 s is more than 1 s). */
static bool
s_duration (const fanhub_opt_t *opt, const char *text, fh_opt_value_t *out, char *what,
            size_t whatlen)
{
    bool seconds = opt->flags & FH_OPT_SECONDS;
    double unit = seconds ? 1000 : 1;
    long long ms = 0;
    bool below = false;
    bool ok = fh_value_duration_ms (text, seconds ? 1000 : 1, &ms, &below);
    if (ok && s_ranged (opt))
        ok = (double) ms >= opt->min * unit
             && ((double) ms < opt->max * unit || ((double) ms == opt->max * unit && !below));
    if (!ok) {
        s_range (opt, FH_VALUE_DURATION_HINT, seconds ? " s" : " ms", false, what, whatlen);
        return false;
    }
    out->integer = ms;
    return true;
}

/* STRING (within its range of characters) and FILE (not empty). */
static bool
s_text (const fanhub_opt_t *opt, const char *text, fh_opt_value_t *out, char *what, size_t whatlen)
{
    bool file = opt->type == FANHUB_OPT_FILE;
    size_t len = text ? strlen (text) : 0;
    bool ranged = !file && s_ranged (opt);
    bool ok
        = text
          && (file ? len > 0 : !ranged || ((double) len >= opt->min && (double) len <= opt->max));
    if (!ok && text && ranged)
        snprintf (what, whatlen, "%.0f to %.0f characters", opt->min, opt->max);
    else if (!ok)
        snprintf (what, whatlen, "%s", file ? "a file name" : "a string");
    out->text = text;
    return ok;
}

bool
fh_opt_value_read (const fanhub_opt_t *opt, const char *text, fh_opt_value_t *out, char *what,
                   size_t whatlen)
{
    long long integer = 0;
    bool ok = false;
    switch (opt->type) {
    case FANHUB_OPT_STRING:
    case FANHUB_OPT_FILE: return s_text (opt, text, out, what, whatlen);
    case FANHUB_OPT_INT:
    case FANHUB_OPT_UINT:
    case FANHUB_OPT_SIZE: {
        bool size = opt->type == FANHUB_OPT_SIZE;
        ok = size ? fh_value_size (text, &integer)
                  : fh_value_integer (text, opt->type == FANHUB_OPT_INT, &integer);
        if (ok && s_ranged (opt))
            ok = (double) integer >= opt->min && (double) integer <= opt->max;
        if (!ok)
            s_range (opt, size ? FH_VALUE_SIZE_HINT : "an integer", size ? " bytes" : "",
                     opt->type != FANHUB_OPT_INT, what, whatlen);
        out->integer = integer;
        return ok;
    }
    case FANHUB_OPT_DURATION: return s_duration (opt, text, out, what, whatlen);
    case FANHUB_OPT_DOUBLE:
        ok = fh_value_number (text, &out->number)
             && (!s_ranged (opt) || (out->number >= opt->min && out->number <= opt->max));
        if (!ok) {
            if (s_ranged (opt))
                snprintf (what, whatlen, "a number from %g to %g", opt->min, opt->max);
            else
                snprintf (what, whatlen, "a number");
        }
        return ok;
    case FANHUB_OPT_BOOL:
        ok = fh_value_bool (text, &out->flag);
        if (!ok)
            snprintf (what, whatlen, "true or false");
        return ok;
    case FANHUB_OPT_ENUM: return s_enum (opt, text, out, what, whatlen);
    default: snprintf (what, whatlen, "a value of type %d", (int) opt->type); return false;
    }
}
