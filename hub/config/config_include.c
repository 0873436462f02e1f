/*  config_include - drop-ins: `include:` in the main file.

    include: names files or globs, relative to the directory of the file
    that names them. Each file is a YAML document that holds consumers:
    only (or nothing at all): the hub's settings stay in the main file, so
    one file says how the hub runs and packages or operators add consumers
    beside it (fedmsg's /etc/fedmsg.d/). Their consumers are appended to
    the main file's, in the order of include: and, within a glob, of the
    sorted file names; a name used twice anywhere is an error naming both
    places. A glob that matches nothing is fine (an empty conf.d/); a file
    named without a wildcard must exist. A file matched twice is read
    once, and the main file is never read as its own drop-in (a glob
    beside it may match it). Drop-ins cannot include further files. ${VAR} works in them as
    in the main file. Errors name the drop-in, "FILE:LINE:COL: KEYPATH".
*/
#include "config_internal.h"

#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *
s_not_empty (const char *text)
{
    return *text ? NULL : "";
}

/* include: a path or a list of them, none empty. */
int
fh_cfg_parse_include (fh_yaml_t *ctx, yaml_node_t *node, void *target, const fh_cfg_field_t *field)
{
    (void) field;
    return fh_cfg_parse_items (ctx, node, target,
                               "a file or glob (relative to this file's directory)", s_not_empty);
}

/* pattern, relative to the directory of source; malloc'd. */
static char *
s_resolve (const char *source, const char *pattern)
{
    const char *slash = strrchr (source, '/');
    if (pattern[0] == '/' || !slash)
        return strdup (pattern);
    size_t dir = (size_t) (slash - source) + 1;
    size_t size = dir + strlen (pattern) + 1;
    char *path = malloc (size);
    if (path)
        snprintf (path, size, "%.*s%s", (int) dir, source, pattern);
    return path;
}

/* The top keys of a drop-in: consumers: only. */
static int
s_dropin_keys (fh_yaml_t *sub, yaml_node_t *root, const char *main_source)
{
    if (fh_yaml_check_keys (sub, root))
        return -1;
    for (yaml_node_pair_t *pair = root->data.mapping.pairs.start;
         pair < root->data.mapping.pairs.top; pair++) {
        yaml_node_t *key = fh_yaml_node (sub, pair->key);
        const char *name = (const char *) key->data.scalar.value;
        if (strcmp (name, "consumers") != 0) {
            fh_yaml_path_key (sub, name);
            return fh_yaml_error (sub, key->start_mark,
                                  "a drop-in holds consumers: only; hub settings stay in the "
                                  "main file (%s)",
                                  main_source);
        }
    }
    return 0;
}

/* Reads one drop-in and appends its consumers to cfg. */
static int
s_load_dropin (fh_yaml_t *ctx, fh_config_t *cfg, const char *path, yaml_mark_t at)
{
    /* A FIFO (or a device) would hold the load, and a reload, forever. */
    struct stat st;
    if (stat (path, &st) == 0 && !S_ISREG (st.st_mode) && !S_ISDIR (st.st_mode))
        return fh_yaml_error (ctx, at, "%s: not a regular file", path);
    char why[1024];
    size_t len = 0;
    char *text = fh_yaml_read_file (path, &len, why, sizeof why);
    if (!text)
        return fh_yaml_error (ctx, at, "%s", why);
    fh_yaml_t sub;
    fh_yaml_init (&sub, path, ctx->err, ctx->errlen);
    sub.user = cfg;
    int rc = fh_yaml_load (&sub, text, len, "drop-in", NULL);
    free (text);
    if (rc)
        return -1;
    yaml_node_t *root = fh_yaml_root (&sub);
    size_t first = cfg->consumer_count;
    if (root && !fh_yaml_is_null (root)) {
        if (root->type != YAML_MAPPING_NODE) {
            char buf[FH_YAML_GOT_SIZE];
            rc = fh_yaml_error (&sub, root->start_mark,
                                "expected a map with consumers: (a drop-in), got %s",
                                fh_yaml_got (root, buf, sizeof buf));
        }
        else
            rc = s_dropin_keys (&sub, root, ctx->source);
        yaml_node_t *list = rc == 0 ? fh_yaml_map_find (&sub, root, "consumers") : NULL;
        if (rc == 0)
            rc = fh_cfg_expand_env (&sub);
        if (rc == 0 && list) {
            size_t mark = fh_yaml_path_key (&sub, "consumers");
            rc = fh_cfg_parse_consumers (&sub, list, cfg, NULL);
            fh_yaml_path_pop (&sub, mark);
        }
        for (size_t i = first; rc == 0 && i < cfg->consumer_count; i++)
            rc = fh_cfg_consumer_cross_check (
                &sub, cfg, i, fh_yaml_node (&sub, list->data.sequence.items.start[i - first]),
                i - first);
    }
    fh_yaml_unload (&sub);
    return rc;
}

/* Whether path is a file read already: one of done, or the main file
   (`include: "*.yaml"` beside it matches it). */
static bool
s_seen (fh_yaml_t *ctx, const fh_strlist_t *done, const char *path)
{
    struct stat st, main_st;
    return fh_cfg_strlist_has (done, path)
           || (stat (ctx->source, &main_st) == 0 && stat (path, &st) == 0
               && st.st_dev == main_st.st_dev && st.st_ino == main_st.st_ino);
}

/* glob's complaint about a directory it could not read: a directory
   that does not exist is an empty one. */
static _Thread_local int s_glob_errno;

static int
s_glob_error (const char *path, int error)
{
    (void) path;
    if (error == ENOENT || error == ENOTDIR)
        return 0;
    s_glob_errno = error;
    return 1;
}

/* One entry of include:, a file or a glob; done lists the files read. */
static int
s_include_one (fh_yaml_t *ctx, fh_config_t *cfg, yaml_node_t *item, fh_strlist_t *done)
{
    const char *pattern = (const char *) item->data.scalar.value;
    char *path = s_resolve (ctx->source, pattern);
    if (!path)
        return fh_yaml_oom (ctx, item->start_mark);
    int rc = 0;
    if (!strpbrk (pattern, "*?[")) {
        if (!s_seen (ctx, done, path)) {
            rc = fh_cfg_strlist_add (done, path) ? fh_yaml_oom (ctx, item->start_mark)
                                                 : s_load_dropin (ctx, cfg, path, item->start_mark);
        }
        free (path);
        return rc;
    }
    glob_t found;
    s_glob_errno = EIO;
    int grc = glob (path, 0, s_glob_error, &found);
    if (grc == GLOB_NOSPACE)
        rc = fh_yaml_oom (ctx, item->start_mark);
    else if (grc == GLOB_ABORTED)
        rc = fh_yaml_error (ctx, item->start_mark, "%s: cannot read the directory: %s", path,
                            strerror (s_glob_errno));
    for (size_t i = 0; grc == 0 && rc == 0 && i < found.gl_pathc; i++) {
        const char *file = found.gl_pathv[i];
        if (s_seen (ctx, done, file))
            continue;
        rc = fh_cfg_strlist_add (done, file) ? fh_yaml_oom (ctx, item->start_mark)
                                             : s_load_dropin (ctx, cfg, file, item->start_mark);
    }
    if (grc == 0 || grc == GLOB_ABORTED)
        globfree (&found);
    free (path);
    return rc;
}

int
fh_cfg_include_load (fh_yaml_t *ctx, yaml_node_t *root, fh_config_t *cfg)
{
    yaml_node_t *node = fh_yaml_map_find (ctx, root, "include");
    if (!node)
        return 0;
    size_t count = node->type == YAML_SEQUENCE_NODE ? fh_yaml_count (node) : 1;
    size_t mark = fh_yaml_path_key (ctx, "include");
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++) {
        yaml_node_t *item = node->type == YAML_SEQUENCE_NODE
                                ? fh_yaml_node (ctx, node->data.sequence.items.start[i])
                                : node;
        size_t at = node->type == YAML_SEQUENCE_NODE ? fh_yaml_path_index (ctx, i)
                                                     : strlen (ctx->path);
        rc = s_include_one (ctx, cfg, item, &cfg->dropins);
        if (rc == 0)
            fh_yaml_path_pop (ctx, at);
    }
    if (rc == 0)
        fh_yaml_path_pop (ctx, mark);
    return rc;
}
