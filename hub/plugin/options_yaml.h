/*  options_yaml - a plugin's options read from a YAML file of their own.

    `fanhub replay --options FILE` hands a plugin the map a consumer's
    `options:` would hold in the hub's configuration, without the rest of
    a configuration around it. The file's top level is that map; an empty
    file (or one that holds only null) is an empty map. The tree is built
    as the configuration loader builds a consumer's options: scalars keep
    their text as written, anchors and aliases resolve, and every node
    remembers "FILE:LINE:COL", so a plugin's refusals point into the file.
*/
#ifndef FH_OPTIONS_YAML_H_INCLUDED
#define FH_OPTIONS_YAML_H_INCLUDED

#include "options.h"

#include <stddef.h>

/* Loads path. On error returns NULL with one line in err,
   "FILE:LINE:COL: options.KEY: message" (or "FILE: cannot open: why"). */
fanhub_option_t *fh_options_yaml_load_file (const char *path, char *err, size_t errlen);
/* Loads YAML text; source names it in where strings and errors. */
fanhub_option_t *fh_options_yaml_load_string (const char *text, size_t len, const char *source,
                                              char *err, size_t errlen);

#endif
