/*  option_value - one typed scalar, read as an option table entry
    (fanhub_opt_t) describes it.

    Both readers of typed keys call it: a plugin's options
    (option_table.c) and the hub's own configuration (config_fields.c,
    whose tables are made of the same entries). So a number, a duration,
    a size, a boolean or a word is parsed (util/value.c's grammar),
    range-checked and, when refused, worded in one way, whichever file
    it sits in:

        expected WHAT, got GOT

    WHAT comes from the entry: "a file name" (not empty), "an integer
    from 1 to 10", "a size such as
    4096, 64KiB or 1MiB from 0 up", "a duration such as 250ms, 2s or 1m
    from 0 to 3600 s (a bare number is seconds)", "never, interval or
    always". Each reader says GOT and where the value is in its own frame
    (the configuration: "FILE:LINE:COL: KEYPATH: ..."; plugin options:
    "options.KEY: ... (FILE:LINE:COL)", as the ABI documents).
*/
#ifndef FH_OPTION_VALUE_H_INCLUDED
#define FH_OPTION_VALUE_H_INCLUDED

#include "fanhub/consumer.h"

#include <stdbool.h>
#include <stddef.h>

/* fanhub_opt_t.flags, the hub's own (never in a plugin's table): a
   DURATION whose bare number, min and max count seconds, not
   milliseconds (the configuration's timeouts and intervals). */
#define FH_OPT_SECONDS 0x80000000u

/* What fh_opt_value_read makes of a scalar, by the entry's type. */
typedef union {
    long long integer; /* INT, UINT, SIZE (bytes), DURATION (milliseconds) */
    double number;     /* DOUBLE */
    bool flag;         /* BOOL */
    int index;         /* ENUM: the index of the word in values */
    const char *text;  /* STRING, FILE: the text itself */
} fh_opt_value_t;

/* Whether type is one fh_opt_value_read reads: STRING, FILE, INT, UINT,
   DOUBLE, BOOL, DURATION, SIZE, ENUM. */
bool fh_opt_value_is_scalar (fanhub_opt_type_t type);

/* Reads text (NULL: the value is no scalar) as opt describes, within its
   range (when opt->min != opt->max). True with *out set; else false with
   WHAT, the value expected, in what (whatlen bytes). */
bool fh_opt_value_read (const fanhub_opt_t *opt, const char *text, fh_opt_value_t *out, char *what,
                        size_t whatlen);

#endif
