/*  config_env - ${VAR} in the configuration's values.

    Run on a loaded document (the main file and each drop-in) before the
    schema reads it: in every scalar that is a value (never a key),
    ${NAME} becomes the environment variable NAME, ${NAME:-default} the
    default when NAME is unset or empty (as in the shell), and $${ a
    literal ${. Any other $ stays as written: a shell command in a
    plugin's options keeps its $1, $$ and $VAR, and writes $${VAR#x} for
    the shell's ${VAR#x}. The node keeps its style
    and its place, so the schema reads the result as if it had been
    written there, and later errors still point at it. An unset NAME
    without a default is an error at the value, "FILE:LINE:COL: KEYPATH".
    Each node is expanded once, however many aliases refer to it.
*/
#include "config_internal.h"

#include <stdlib.h>
#include <string.h>

#define S_WALK_DEPTH_MAX (2 * FH_YAML_DEPTH_MAX)

typedef struct {
    char *data;
    size_t len, size;
} s_buf_t;

static int
s_buf_add (s_buf_t *buf, const char *data, size_t len)
{
    if (buf->len + len + 1 > buf->size) {
        size_t size = 2 * (buf->len + len + 1);
        char *grown = realloc (buf->data, size);
        if (!grown)
            return -1;
        buf->data = grown;
        buf->size = size;
    }
    memcpy (buf->data + buf->len, data, len);
    buf->len += len;
    buf->data[buf->len] = '\0';
    return 0;
}

/* The ${...} at text (text[0] is '$', text[1] '{'), appended to buf;
   *used is how many bytes it took. 1 when it is no reference (the caller
   keeps it as written), 2 for an unset
   NAME, -1 out of memory; name gets NAME for the error. */
static int
s_expand_one (const char *text, size_t len, s_buf_t *buf, size_t *used, char *name, size_t namelen)
{
    size_t n = 2;
    if (n < len
        && (text[n] == '_' || (text[n] >= 'A' && text[n] <= 'Z')
            || (text[n] >= 'a' && text[n] <= 'z')))
        n += strspn (text + n, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_");
    size_t name_len = n - 2;
    if (name_len == 0 || name_len >= namelen || n > len)
        return 1;
    memcpy (name, text + 2, name_len);
    name[name_len] = '\0';
    const char *fallback = NULL;
    size_t fallback_len = 0;
    if (n + 1 < len && text[n] == ':' && text[n + 1] == '-') {
        fallback = text + n + 2;
        const char *close = memchr (fallback, '}', len - (n + 2));
        if (!close)
            return 1;
        fallback_len = (size_t) (close - fallback);
        n += 2 + fallback_len;
    }
    if (n >= len || text[n] != '}')
        return 1;
    *used = n + 1;
    const char *value = getenv (name);
    if (fallback && (!value || !*value))
        return s_buf_add (buf, fallback, fallback_len);
    if (!value)
        return 2;
    return s_buf_add (buf, value, strlen (value));
}

/* Expands one scalar in place. */
static int
s_expand_scalar (fh_yaml_t *ctx, yaml_node_t *node)
{
    const char *text = (const char *) node->data.scalar.value;
    size_t len = node->data.scalar.length;
    if (!memchr (text, '$', len))
        return 0;
    s_buf_t buf = {NULL, 0, 0};
    char name[256];
    int rc = s_buf_add (&buf, "", 0);
    for (size_t i = 0; i < len && rc == 0;) {
        const char *dollar = memchr (text + i, '$', len - i);
        size_t plain = dollar ? (size_t) (dollar - (text + i)) : len - i;
        rc = s_buf_add (&buf, text + i, plain);
        i += plain;
        if (rc || i == len)
            break;
        if (i + 2 < len && text[i + 1] == '$' && text[i + 2] == '{') {
            rc = s_buf_add (&buf, "${", 2);
            i += 3;
        }
        else if (i + 1 < len && text[i + 1] == '{') {
            size_t used = 0;
            rc = s_expand_one (text + i, len - i, &buf, &used, name, sizeof name);
            if (rc == 1) {
                /* Not a reference (a CURVE key's Z85 text may hold "${"):
                   kept as written. */
                rc = s_buf_add (&buf, "$", 1);
                used = 1;
            }
            i += used;
        }
        else {
            rc = s_buf_add (&buf, "$", 1);
            i++;
        }
    }
    if (rc == 0) {
        /* libyaml frees the value with free (its yaml_free). */
        free (node->data.scalar.value);
        node->data.scalar.value = (yaml_char_t *) buf.data;
        node->data.scalar.length = buf.len;
        return 0;
    }
    free (buf.data);
    if (rc == 2)
        return fh_yaml_error (ctx, node->start_mark,
                              "${%s}: the environment variable %s is not set (give a default, "
                              "${%s:-default}, or write $${%s} for the text)",
                              name, name, name, name);
    return fh_yaml_oom (ctx, node->start_mark);
}

static int
s_walk (fh_yaml_t *ctx, yaml_node_t *node, bool *seen, size_t depth)
{
    int id = (int) (node - ctx->doc.nodes.start) + 1;
    if (seen[id])
        return 0;
    seen[id] = true;
    if (depth > S_WALK_DEPTH_MAX)
        return fh_yaml_error (ctx, node->start_mark, "nested deeper than %d levels",
                              S_WALK_DEPTH_MAX);
    if (node->type == YAML_SCALAR_NODE)
        return s_expand_scalar (ctx, node);
    for (size_t i = 0; i < fh_yaml_count (node); i++) {
        yaml_node_t *child;
        size_t mark;
        if (node->type == YAML_SEQUENCE_NODE) {
            child = fh_yaml_node (ctx, node->data.sequence.items.start[i]);
            mark = fh_yaml_path_index (ctx, i);
        }
        else {
            yaml_node_pair_t *pair = &node->data.mapping.pairs.start[i];
            yaml_node_t *key = fh_yaml_node (ctx, pair->key);
            seen[pair->key] = true; /* keys are never expanded */
            mark = fh_yaml_path_key (
                ctx, key->type == YAML_SCALAR_NODE ? (const char *) key->data.scalar.value : "?");
            child = fh_yaml_node (ctx, pair->value);
        }
        if (s_walk (ctx, child, seen, depth + 1))
            return -1;
        fh_yaml_path_pop (ctx, mark);
    }
    return 0;
}

int
fh_cfg_expand_env (fh_yaml_t *ctx)
{
    yaml_node_t *root = fh_yaml_root (ctx);
    if (!root)
        return 0;
    size_t count = (size_t) (ctx->doc.nodes.top - ctx->doc.nodes.start);
    bool *seen = calloc (count + 1, sizeof *seen);
    if (!seen)
        return fh_yaml_oom (ctx, root->start_mark);
    size_t mark = strlen (ctx->path);
    int rc = s_walk (ctx, root, seen, 0);
    if (rc == 0)
        fh_yaml_path_pop (ctx, mark);
    free (seen);
    return rc;
}
