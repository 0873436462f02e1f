/*  option_table - options read against a plugin's table. See
    option_table.h; the types and their C fields are in fanhub/consumer.h.
*/
#include "option_table.h"

#include "value.h"

#include <fanhub/sdk.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* One value being read: the entry, its node (NULL for a default) and its
   text, with where it came from for messages. */
typedef struct {
    const fanhub_host_t *host;
    const fanhub_opt_t *opt;
    const fanhub_option_t *node;
    const char *text; /* the scalar, or NULL */
    const char *where;
    char *err;
    size_t errlen;
} s_value_t;

const char *
fh_option_type_name (fanhub_opt_type_t type)
{
    switch (type) {
    case FANHUB_OPT_STRING: return "string";
    case FANHUB_OPT_FILE: return "file";
    case FANHUB_OPT_INT: return "integer";
    case FANHUB_OPT_UINT: return "unsigned";
    case FANHUB_OPT_DOUBLE: return "number";
    case FANHUB_OPT_BOOL: return "bool";
    case FANHUB_OPT_DURATION: return "duration";
    case FANHUB_OPT_SIZE: return "size";
    case FANHUB_OPT_ENUM: return "enum";
    case FANHUB_OPT_STRINGS: return "strings";
    case FANHUB_OPT_ANY: return "any";
    }
    return "?";
}

/* The bytes a type's field takes, 0 for an unknown type. */
static size_t
s_field_size (fanhub_opt_type_t type)
{
    switch (type) {
    case FANHUB_OPT_STRING:
    case FANHUB_OPT_FILE: return sizeof (const char *);
    case FANHUB_OPT_INT:
    case FANHUB_OPT_DURATION: return sizeof (int64_t);
    case FANHUB_OPT_UINT:
    case FANHUB_OPT_SIZE: return sizeof (uint64_t);
    case FANHUB_OPT_DOUBLE: return sizeof (double);
    case FANHUB_OPT_BOOL: return sizeof (bool);
    case FANHUB_OPT_ENUM: return sizeof (int);
    case FANHUB_OPT_STRINGS:
    case FANHUB_OPT_ANY: return sizeof (const fanhub_option_t *);
    }
    return 0;
}

static bool
s_ranged (const fanhub_opt_t *opt)
{
    return opt->min != opt->max;
}

/* "options.KEY: expected WHAT, got "TEXT" (WHERE)", or got a list/map. */
static int
s_expected (const s_value_t *v, const char *what)
{
    if (v->text)
        snprintf (v->err, v->errlen, "options.%s: expected %s, got \"%s\" (%s)", v->opt->name, what,
                  v->text, v->where);
    else
        snprintf (v->err, v->errlen, "options.%s: expected %s, got %s (%s)", v->opt->name, what,
                  fanhub_option_kind_name (v->host->option_kind (v->node)), v->where);
    return -1;
}

/* INT, UINT, DURATION and SIZE: value.h's grammar (a bare duration is in
   milliseconds). */
static int
s_read_integer (const s_value_t *v, void *field)
{
    const fanhub_opt_t *o = v->opt;
    bool duration = o->type == FANHUB_OPT_DURATION, size = o->type == FANHUB_OPT_SIZE;
    bool is_signed = o->type == FANHUB_OPT_INT || duration;
    long long value = 0;
    bool ok = duration ? fh_value_duration_ms (v->text, 1, &value, NULL)
              : size   ? fh_value_size (v->text, &value)
                       : fh_value_integer (v->text, is_signed, &value);
    if (ok && s_ranged (o))
        ok = (double) value >= o->min && (double) value <= o->max;
    if (!ok) {
        char what[160];
        const char *kind = duration ? FH_VALUE_DURATION_HINT
                           : size   ? FH_VALUE_SIZE_HINT
                                    : "an integer";
        if (s_ranged (o))
            snprintf (what, sizeof what, "%s from %.0f to %.0f%s", kind, o->min, o->max,
                      duration ? " ms"
                      : size   ? " bytes"
                               : "");
        else
            snprintf (what, sizeof what, "%s%s", kind, is_signed ? "" : " from 0 up");
        return s_expected (v, what);
    }
    if (is_signed) {
        int64_t out = value;
        memcpy (field, &out, sizeof out);
    }
    else {
        uint64_t out = (uint64_t) value;
        memcpy (field, &out, sizeof out);
    }
    return 0;
}

static int
s_read_double (const s_value_t *v, void *field)
{
    const fanhub_opt_t *o = v->opt;
    char *end = NULL;
    errno = 0;
    double value = v->text && *v->text ? strtod (v->text, &end) : NAN;
    bool ok = end && !*end && errno == 0 && isfinite (value)
              && (!s_ranged (o) || (value >= o->min && value <= o->max));
    if (!ok) {
        char what[96];
        if (s_ranged (o))
            snprintf (what, sizeof what, "a number from %g to %g", o->min, o->max);
        else
            snprintf (what, sizeof what, "a number");
        return s_expected (v, what);
    }
    memcpy (field, &value, sizeof value);
    return 0;
}

static int
s_read_enum (const s_value_t *v, void *field)
{
    const char *const *values = v->opt->values;
    size_t count = 0;
    while (values && values[count])
        count++;
    for (size_t i = 0; v->text && i < count; i++)
        if (strcmp (values[i], v->text) == 0) {
            int index = (int) i;
            memcpy (field, &index, sizeof index);
            return 0;
        }
    char what[512] = "";
    size_t len = 0;
    for (size_t i = 0; i < count && len < sizeof what; i++)
        len += (size_t) snprintf (what + len, sizeof what - len, "%s%s",
                                  i == 0           ? ""
                                  : i + 1 == count ? " or "
                                                   : ", ",
                                  values[i]);
    return s_expected (v, what);
}

/* STRING and FILE. */
static int
s_read_text (const s_value_t *v, void *field)
{
    const fanhub_opt_t *o = v->opt;
    bool file = o->type == FANHUB_OPT_FILE;
    if (!v->text)
        return s_expected (v, file ? "a file name" : "a string");
    size_t len = strlen (v->text);
    if (file && len == 0) {
        snprintf (v->err, v->errlen, "options.%s: must not be empty (%s)", o->name, v->where);
        return -1;
    }
    if (!file && s_ranged (o) && ((double) len < o->min || (double) len > o->max)) {
        char what[96];
        snprintf (what, sizeof what, "%.0f to %.0f characters", o->min, o->max);
        return s_expected (v, what);
    }
    memcpy (field, &v->text, sizeof v->text);
    return 0;
}

static int
s_read_strings (const s_value_t *v, void *field)
{
    const fanhub_host_t *host = v->host;
    if (host->option_kind (v->node) != FANHUB_OPTION_LIST)
        return s_expected (v, "a list of strings");
    for (size_t i = 0; i < host->option_count (v->node); i++) {
        const fanhub_option_t *item = host->option_at (v->node, i, NULL);
        if (!host->option_scalar (item)) {
            snprintf (v->err, v->errlen, "options.%s[%zu]: expected a string, got %s (%s)",
                      v->opt->name, i, fanhub_option_kind_name (host->option_kind (item)),
                      host->option_where (item));
            return -1;
        }
    }
    memcpy (field, &v->node, sizeof v->node);
    return 0;
}

static int
s_read_value (const s_value_t *v, void *field)
{
    switch (v->opt->type) {
    case FANHUB_OPT_STRING:
    case FANHUB_OPT_FILE: return s_read_text (v, field);
    case FANHUB_OPT_INT:
    case FANHUB_OPT_UINT:
    case FANHUB_OPT_DURATION:
    case FANHUB_OPT_SIZE: return s_read_integer (v, field);
    case FANHUB_OPT_DOUBLE: return s_read_double (v, field);
    case FANHUB_OPT_BOOL: {
        bool value;
        if (!fh_value_bool (v->text, &value))
            return s_expected (v, "true or false");
        memcpy (field, &value, sizeof value);
        return 0;
    }
    case FANHUB_OPT_ENUM: return s_read_enum (v, field);
    case FANHUB_OPT_STRINGS: return s_read_strings (v, field);
    case FANHUB_OPT_ANY: memcpy (field, &v->node, sizeof v->node); return 0;
    }
    return -1;
}

static const fanhub_opt_t *
s_find (const fanhub_opt_t *table, const char *key)
{
    for (const fanhub_opt_t *o = table; o && o->name; o++)
        if (strcmp (o->name, key) == 0)
            return o;
    return NULL;
}

/* "options.KEY: unknown option; PLUGIN takes a, b and c (WHERE)". */
static int
s_unknown (const char *plugin, const fanhub_opt_t *table, const char *key, const char *where,
           char *err, size_t errlen)
{
    int len = snprintf (err, errlen, "options.%s: unknown option; %s takes ", key, plugin);
    size_t count = 0;
    while (table && table[count].name)
        count++;
    if (count == 0)
        len += snprintf (err + len, errlen - (size_t) len, "no options");
    for (size_t i = 0; i < count && (size_t) len < errlen; i++)
        len += snprintf (err + len, errlen - (size_t) len, "%s%s",
                         i == 0           ? ""
                         : i + 1 == count ? " and "
                                          : ", ",
                         table[i].name);
    if ((size_t) len < errlen)
        snprintf (err + len, errlen - (size_t) len, " (%s)", where);
    return -1;
}

/* A table entry whose field does not fit the plugin's struct, of an
   unknown type or with a default that is not of its type: the plugin's
   bug, said as such. */
static int
s_check_table (const char *plugin, const fanhub_opt_t *table, size_t values_size, char *err,
               size_t errlen)
{
    for (const fanhub_opt_t *o = table; o && o->name; o++) {
        size_t size = s_field_size (o->type);
        if (size == 0 || o->offset > values_size || values_size - o->offset < size
            || (o->def && (o->type == FANHUB_OPT_ANY || o->type == FANHUB_OPT_STRINGS))) {
            snprintf (err, errlen,
                      "plugin %s: its option table is wrong at %s (type %d, "
                      "offset %zu of %zu bytes)",
                      plugin, o->name, (int) o->type, o->offset, values_size);
            return -1;
        }
    }
    return 0;
}

int
fh_option_table_read (const fanhub_host_t *host, const char *plugin, const fanhub_opt_t *table,
                      const fanhub_option_t *options, void *values, size_t values_size, char *err,
                      size_t errlen)
{
    if (s_check_table (plugin, table, values_size, err, errlen) != 0)
        return -1;
    char *fields = values;
    size_t count = options ? host->option_count (options) : 0;
    for (size_t i = 0; i < count; i++) {
        const char *key = NULL;
        const fanhub_option_t *node = host->option_at (options, i, &key);
        const fanhub_opt_t *opt = s_find (table, key ? key : "");
        if (!opt)
            return s_unknown (plugin, table, key ? key : "?", host->option_where (node), err,
                              errlen);
        s_value_t v
            = {host, opt, node, host->option_scalar (node), host->option_where (node), err, errlen};
        if (s_read_value (&v, fields + opt->offset) != 0)
            return -1;
    }
    const char *where = options ? host->option_where (options) : "?";
    for (const fanhub_opt_t *o = table; o && o->name; o++) {
        if (options && host->option_get (options, o->name))
            continue;
        if (o->flags & FANHUB_OPT_REQUIRED) {
            snprintf (err, errlen, "options.%s: missing: %s (%s)", o->name,
                      o->help ? o->help : "required", where);
            return -1;
        }
        s_value_t v = {host, o, NULL, o->def, "the plugin's default", err, errlen};
        if (o->def && s_read_value (&v, fields + o->offset) != 0)
            return -1;
    }
    return 0;
}

/* The range or values column of a row. */
static void
s_range_text (const fanhub_opt_t *o, char *out, size_t size)
{
    out[0] = '\0';
    if (o->type == FANHUB_OPT_ENUM) {
        size_t len = 0;
        for (size_t i = 0; o->values && o->values[i] && len < size; i++)
            len += (size_t) snprintf (out + len, size - len, "%s%s", i ? "|" : "", o->values[i]);
    }
    else if (s_ranged (o))
        snprintf (out, size, o->type == FANHUB_OPT_DOUBLE ? "%g..%g" : "%.0f..%.0f", o->min,
                  o->max);
}

void
fh_option_table_print (FILE *out, const fanhub_opt_t *table)
{
    if (!table || !table->name) {
        fprintf (out, "(takes no options)\n");
        return;
    }
    fprintf (out, "%-20s %-9s %-10s %-22s %s\n", "OPTION", "TYPE", "DEFAULT", "RANGE",
             "DESCRIPTION");
    for (const fanhub_opt_t *o = table; o->name; o++) {
        char range[256];
        s_range_text (o, range, sizeof range);
        const char *def = o->flags & FANHUB_OPT_REQUIRED ? "(required)" : o->def ? o->def : "-";
        fprintf (out, "%-20s %-9s %-10s %-22s %s\n", o->name, fh_option_type_name (o->type), def,
                 range[0] ? range : "-", o->help ? o->help : "");
    }
}

int
fh_option_table_check (const fanhub_host_t *host, const char *plugin, const fanhub_opt_t *table,
                       const fanhub_option_t *options, char *err, size_t errlen)
{
    /* The plugin's struct ends no sooner than its last field. */
    size_t extent = 1;
    for (const fanhub_opt_t *o = table; o->name; o++) {
        size_t end = o->offset + s_field_size (o->type);
        extent = end > extent ? end : extent;
    }
    void *scratch = calloc (1, extent);
    if (!scratch) {
        snprintf (err, errlen, "out of memory");
        return -1;
    }
    int rc = fh_option_table_read (host, plugin, table, options, scratch, extent, err, errlen);
    free (scratch);
    return rc;
}
