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

/* The text of root's `key` in *text: NULL when absent or null; false
   when it is there but not a text. */
static bool
s_top_text (fh_yaml_t *yaml, yaml_node_t *root, const char *key, const char **text)
{
    yaml_node_t *node = fh_yaml_map_find (yaml, root, key);
    *text = NULL;
    if (!node || fh_yaml_is_null (node))
        return true;
    *text = fh_yaml_text (yaml, node, key);
    return *text != NULL;
}

fh_config_t *
fh_config_control_only (const char *text, size_t len, const char *source)
{
    fh_yaml_t yaml;
    fh_yaml_init (&yaml, source, NULL, 0);
    fh_config_t *cfg = NULL;
    yaml_node_t *root
        = fh_yaml_load (&yaml, text, len, "configuration", NULL) == 0 ? fh_yaml_root (&yaml) : NULL;
    const char *control = NULL, *name = NULL;
    if (root && root->type == YAML_MAPPING_NODE && fh_yaml_check_keys (&yaml, root) == 0
        && !fh_yaml_map_find (&yaml, root, "control_curve") && fh_cfg_expand_env (&yaml) == 0
        && s_top_text (&yaml, root, "control", &control) && s_top_text (&yaml, root, "name", &name)
        && (control || !name || fh_config_hub_name_valid (name))) {
        cfg = calloc (1, sizeof *cfg);
        if (cfg) {
            cfg->source = strdup (source);
            cfg->control = control ? strdup (control) : fh_cfg_default_control (name);
        }
        /* Off loopback, a file that loads decides (control_insecure). */
        if (cfg
            && (!cfg->source || !cfg->control || fh_cfg_control_check (cfg->control)
                || (strncmp (cfg->control, "tcp://", 6) == 0
                    && !fh_cfg_control_on_loopback (cfg->control)))) {
            /* It holds these two only; freed here, not by config.c's
               fh_config_destroy, so that config.c calls this file one way. */
            free (cfg->source);
            free (cfg->control);
            free (cfg);
            cfg = NULL;
        }
    }
    fh_yaml_unload (&yaml);
    return cfg;
}
