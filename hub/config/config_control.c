/*  config_control - the control endpoint's default, and what a control
    client reads of it from a file that does not load.
*/
#include "config_internal.h"

#include "control_path.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *
fh_cfg_default_control (const char *name)
{
    const char *dir = getenv ("RUNTIME_DIRECTORY");
    size_t len = dir ? strcspn (dir, ":") : 0;
    if (len == 0) {
        dir = getenv ("XDG_RUNTIME_DIR");
        len = dir ? strlen (dir) : 0;
    }
    char private_dir[64];
    if (len == 0) {
        fh_control_path_private_dir (private_dir, sizeof private_dir);
        dir = private_dir;
        len = strlen (dir);
    }
    while (len > 1 && dir[len - 1] == '/')
        len--;
    if (len == 1 && dir[0] == '/')
        len = 0; /* "/" + "/fanhub.sock" */
    size_t size = len + (name ? strlen (name) : 0) + 32;
    char *endpoint = malloc (size);
    if (endpoint)
        snprintf (endpoint, size, "ipc://%.*s/fanhub%s%s.sock", (int) len, dir, name ? "-" : "",
                  name ? name : "");
    return endpoint;
}

/* A top-level scalar of root as text in *text (NULL when the key is
   absent or null); false when it is there but not a plain text. */
static bool
s_top_scalar (fh_yaml_t *yaml, yaml_node_t *root, const char *key, const char **text)
{
    yaml_node_t *node = fh_yaml_map_find (yaml, root, key);
    *text = NULL;
    if (!node || fh_yaml_is_null (node))
        return true;
    if (node->type != YAML_SCALAR_NODE
        || strlen ((const char *) node->data.scalar.value) != node->data.scalar.length)
        return false;
    *text = (const char *) node->data.scalar.value;
    return true;
}

fh_config_t *
fh_config_control_only (const char *path)
{
    size_t len = 0;
    char *text = fh_yaml_read_file (path, &len, NULL, 0);
    if (!text)
        return NULL;
    fh_yaml_t yaml;
    fh_yaml_init (&yaml, path, NULL, 0);
    fh_config_t *cfg = NULL;
    yaml_node_t *root
        = fh_yaml_load (&yaml, text, len, "configuration", NULL) == 0 ? fh_yaml_root (&yaml) : NULL;
    const char *control = NULL, *name = NULL;
    if (root && root->type == YAML_MAPPING_NODE && !fh_yaml_map_find (&yaml, root, "control_curve")
        && fh_cfg_expand_env (&yaml) == 0 && s_top_scalar (&yaml, root, "control", &control)
        && s_top_scalar (&yaml, root, "name", &name) && (!name || fh_config_name_valid (name))) {
        cfg = calloc (1, sizeof *cfg);
        if (cfg) {
            cfg->source = strdup (path);
            cfg->control = control ? strdup (control) : fh_cfg_default_control (name);
        }
        if (cfg && (!cfg->source || !cfg->control || fh_cfg_control_check (cfg->control)))
            fh_config_destroy (&cfg);
    }
    fh_yaml_unload (&yaml);
    free (text);
    return cfg;
}
