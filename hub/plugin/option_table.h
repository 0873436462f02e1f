/*  option_table - a plugin's `options:` read against its option table
    (fanhub_opt_t, ABI 1.2; the contract is in fanhub/consumer.h).

    Written against the host table's option accessors, not the hub's own
    tree, so the same code serves the hub's host->options_read and a test's
    fake host: what a plugin is told about its options never depends on
    which host asked.
*/
#ifndef FH_OPTION_TABLE_H_INCLUDED
#define FH_OPTION_TABLE_H_INCLUDED

#include "fanhub/consumer.h"

#include <stddef.h>
#include <stdio.h>

/* The option table of a descriptor (ABI 1.2), or NULL when it has none
   or is too short to hold one (built against an older ABI). */
const fanhub_opt_t *fh_option_table_of (const fanhub_consumer_desc_t *desc);

/* Reads options (a map; NULL reads as an empty one) against table into
   values (values_size bytes), for the plugin called plugin (in the
   message about an unknown key). 0, or -1 with one line in err. */
int fh_option_table_read (const fanhub_host_t *host, const char *plugin, const fanhub_opt_t *table,
                          const fanhub_option_t *options, void *values, size_t values_size,
                          char *err, size_t errlen);

/* Checks options against table as fh_option_table_read would read them,
   into scratch memory of the table's own extent: what the host does
   before it calls a plugin's init or check, so that a plugin never sees
   options of the wrong form. 0, or -1 with one line in err. */
int fh_option_table_check (const fanhub_host_t *host, const char *plugin, const fanhub_opt_t *table,
                           const fanhub_option_t *options, char *err, size_t errlen);

/* "string", "integer", ... for a type; "?" for another value. */
const char *fh_option_type_name (fanhub_opt_type_t type);

/* Prints the table, one entry a row: name, type, default, range or
   values, required, description. */
void fh_option_table_print (FILE *out, const fanhub_opt_t *table);

#endif
