/*  options_yaml - a plugin's options read from a YAML file of their own.

    The file goes through the configuration's YAML loader (config_yaml.h),
    so the rules are those of a consumer's `options:`: anchors and aliases
    resolve, keys are non-null scalars and none appears twice in one map,
    a value may not contain a NUL byte, an alias may not refer to a value
    that contains it, and the size, the nesting and the number of values
    are bounded alike. Errors are one line,
    "FILE:LINE:COL: options.KEY: message", and stop the load.
    See options_yaml.h.
*/
#include "options_yaml.h"

#include "config_yaml.h"

#include <stdio.h>
#include <stdlib.h>

fanhub_option_t *
fh_options_yaml_load_string (const char *text, size_t len, const char *source, char *err,
                             size_t errlen)
{
    fh_yaml_t ctx;
    fh_yaml_init (&ctx, source, err, errlen);
    fh_yaml_path_key (&ctx, "options");
    if (fh_yaml_load (&ctx, text, len, "file of plugin options", NULL))
        return NULL;
    yaml_node_t *root = fh_yaml_root (&ctx);
    fanhub_option_t *options = NULL;
    if (!root) {
        char where[1024];
        snprintf (where, sizeof where, "%s:1:1", ctx.source);
        options = fh_option_new (FANHUB_OPTION_MAP, NULL, where);
        if (!options)
            snprintf (ctx.err, ctx.errlen, "%s: out of memory", ctx.source);
    }
    else if (root->type != YAML_MAPPING_NODE && !fh_yaml_is_null (root))
        fh_yaml_error (&ctx, root->start_mark,
                       "expected a map of plugin options (what a consumer's options: "
                       "holds), got %s",
                       root->type == YAML_SEQUENCE_NODE ? "a list" : "a single value");
    else
        options = fh_yaml_option_tree (&ctx, root);
    fh_yaml_unload (&ctx);
    return options;
}

fanhub_option_t *
fh_options_yaml_load_file (const char *path, char *err, size_t errlen)
{
    size_t len = 0;
    char *text = fh_yaml_read_file (path, &len, err, errlen);
    if (!text)
        return NULL;
    fanhub_option_t *options = fh_options_yaml_load_string (text, len, path, err, errlen);
    free (text);
    return options;
}
