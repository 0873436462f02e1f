/*  options_yaml - a plugin's options read from a YAML file of their own.

    The file is loaded with libyaml's document API, so anchors and aliases
    resolve as they do in the hub's configuration, and walked into an
    option tree (options.h). The rules are the configuration loader's for
    a consumer's `options:`: keys are non-null scalars and none appears
    twice in one map, a value may not contain a NUL byte, an alias may not
    refer to a value that contains it, and the tree is bounded in depth
    and size (aliases make a small file describe a huge tree). Errors are
    one line, "FILE:LINE:COL: options.KEY: message", and stop the load.
    See options_yaml.h.
*/
#include "options_yaml.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#define S_DEPTH_MAX 64     /* as the configuration allows */
#define S_NODES_MAX 100000 /* values, aliases expanded */

typedef struct {
    yaml_document_t *doc;
    const char *source;
    char *err;
    size_t errlen;
    size_t nodes;
    char path[512]; /* key path of the node being built, "options.a[2]" */
} s_ctx_t;

static int s_error (s_ctx_t *ctx, yaml_mark_t mark, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

/* Writes "SOURCE:LINE:COL: PATH: message" to ctx->err; answers -1. */
static int
s_error (s_ctx_t *ctx, yaml_mark_t mark, const char *fmt, ...)
{
    int len = snprintf (ctx->err, ctx->errlen, "%s:%zu:%zu: %s: ", ctx->source,
                        mark.line + 1, mark.column + 1, ctx->path);
    if (len >= 0 && (size_t) len < ctx->errlen) {
        va_list args;
        va_start (args, fmt);
        vsnprintf (ctx->err + len, ctx->errlen - (size_t) len, fmt, args);
        va_end (args);
    }
    /* One line, whatever the file put in its keys. */
    for (char *c = ctx->err; *c; c++)
        if ((unsigned char) *c < 0x20 || *c == 0x7f)
            *c = '?';
    return -1;
}

static size_t
s_path_push (s_ctx_t *ctx, const char *key, size_t index)
{
    size_t len = strlen (ctx->path);
    if (key)
        snprintf (ctx->path + len, sizeof ctx->path - len, ".%s", key);
    else
        snprintf (ctx->path + len, sizeof ctx->path - len, "[%zu]", index);
    return len;
}

static bool
s_is_null (const yaml_node_t *node)
{
    if (node->type != YAML_SCALAR_NODE
        || node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    const char *text = (const char *) node->data.scalar.value;
    return !*text || strcmp (text, "~") == 0 || strcmp (text, "null") == 0
           || strcmp (text, "Null") == 0 || strcmp (text, "NULL") == 0;
}

static size_t
s_count (const yaml_node_t *node)
{
    if (node->type == YAML_SEQUENCE_NODE)
        return (size_t) (node->data.sequence.items.top - node->data.sequence.items.start);
    if (node->type == YAML_MAPPING_NODE)
        return (size_t) (node->data.mapping.pairs.top - node->data.mapping.pairs.start);
    return 0;
}

static yaml_node_t *
s_node (s_ctx_t *ctx, int id)
{
    return yaml_document_get_node (ctx->doc, id);
}

typedef struct {
    const char *key;
    size_t index;
} s_key_ref_t;

static int
s_key_ref_cmp (const void *a, const void *b)
{
    const s_key_ref_t *x = a, *y = b;
    int cmp = strcmp (x->key, y->key);
    if (cmp)
        return cmp;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Every key a non-null scalar without NUL, none twice; the first offence
   in file order is reported. Sorting keeps a map of many keys cheap. */
static int
s_check_keys (s_ctx_t *ctx, yaml_node_t *map)
{
    size_t count = s_count (map);
    yaml_node_pair_t *pairs = map->data.mapping.pairs.start;
    for (size_t i = 0; i < count; i++) {
        yaml_node_t *key = s_node (ctx, pairs[i].key);
        if (key->type != YAML_SCALAR_NODE || s_is_null (key))
            return s_error (ctx, key->start_mark, "expected a key (a text), got %s",
                            key->type == YAML_SEQUENCE_NODE  ? "a list"
                            : key->type == YAML_MAPPING_NODE ? "a map"
                                                             : "null");
        if (strlen ((const char *) key->data.scalar.value) != key->data.scalar.length)
            return s_error (ctx, key->start_mark, "a key with a NUL character");
    }
    if (count < 2)
        return 0;
    s_key_ref_t *refs = malloc (count * sizeof *refs);
    if (!refs)
        return s_error (ctx, map->start_mark, "out of memory");
    for (size_t i = 0; i < count; i++) {
        refs[i].key = (const char *) s_node (ctx, pairs[i].key)->data.scalar.value;
        refs[i].index = i;
    }
    qsort (refs, count, sizeof *refs, s_key_ref_cmp);
    size_t dup = count, first = 0, group = 0;
    for (size_t i = 1; i < count; i++) {
        if (strcmp (refs[i].key, refs[i - 1].key) != 0)
            group = i;
        else if (refs[i].index < dup) {
            dup = refs[i].index;
            first = refs[group].index;
        }
    }
    free (refs);
    if (dup == count)
        return 0;
    yaml_node_t *key = s_node (ctx, pairs[dup].key);
    s_path_push (ctx, (const char *) key->data.scalar.value, 0);
    return s_error (ctx, key->start_mark, "duplicate key (first at line %zu)",
                    s_node (ctx, pairs[first].key)->start_mark.line + 1);
}

/* The tree of node; stack holds the nodes being built above it. */
static fanhub_option_t *
s_build (s_ctx_t *ctx, yaml_node_t *node, yaml_node_t **stack, size_t depth)
{
    for (size_t i = 0; i < depth; i++)
        if (stack[i] == node) {
            s_error (ctx, node->start_mark, "an alias refers to a value that contains it");
            return NULL;
        }
    if (depth == S_DEPTH_MAX) {
        s_error (ctx, node->start_mark, "options nest more than %d levels", S_DEPTH_MAX);
        return NULL;
    }
    if (++ctx->nodes > S_NODES_MAX) {
        s_error (ctx, node->start_mark, "more than %d option values (aliases expanded)",
                 S_NODES_MAX);
        return NULL;
    }
    stack[depth] = node;

    char where[1024];
    snprintf (where, sizeof where, "%s:%zu:%zu", ctx->source, node->start_mark.line + 1,
              node->start_mark.column + 1);
    if (node->type == YAML_SCALAR_NODE) {
        const char *text = (const char *) node->data.scalar.value;
        fanhub_option_t *scalar = NULL;
        if (strlen (text) != node->data.scalar.length)
            s_error (ctx, node->start_mark, "a value with a NUL character is not supported");
        else if (!(scalar = fh_option_new (FANHUB_OPTION_SCALAR, text, where)))
            s_error (ctx, node->start_mark, "out of memory");
        return scalar;
    }
    bool is_map = node->type == YAML_MAPPING_NODE;
    if (is_map && s_check_keys (ctx, node))
        return NULL;
    fanhub_option_t *self
        = fh_option_new (is_map ? FANHUB_OPTION_MAP : FANHUB_OPTION_LIST, NULL, where);
    if (!self) {
        s_error (ctx, node->start_mark, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < s_count (node); i++) {
        const char *key = NULL;
        yaml_node_t *child;
        if (is_map) {
            yaml_node_pair_t *pair = &node->data.mapping.pairs.start[i];
            key = (const char *) s_node (ctx, pair->key)->data.scalar.value;
            child = s_node (ctx, pair->value);
        }
        else
            child = s_node (ctx, node->data.sequence.items.start[i]);
        size_t mark = s_path_push (ctx, key, i);
        fanhub_option_t *built = s_build (ctx, child, stack, depth + 1);
        if (!built) {
            fh_option_destroy (&self);
            return NULL;
        }
        ctx->path[mark] = '\0';
        if (fh_option_append (self, key, built)) {
            fh_option_destroy (&self);
            s_error (ctx, child->start_mark, "out of memory");
            return NULL;
        }
    }
    return self;
}

/* What libyaml refused, at its mark (a byte offset for reader errors). */
static void
s_yaml_error (s_ctx_t *ctx, const yaml_parser_t *parser, const char *text, size_t len)
{
    if (parser->error == YAML_MEMORY_ERROR || !parser->problem) {
        snprintf (ctx->err, ctx->errlen, "%s: out of memory", ctx->source);
        return;
    }
    yaml_mark_t mark = parser->problem_mark;
    if (parser->error == YAML_READER_ERROR) {
        memset (&mark, 0, sizeof mark);
        for (size_t i = 0; i < parser->problem_offset && i < len; i++) {
            if (text[i] == '\n') {
                mark.line++;
                mark.column = 0;
            }
            else
                mark.column++;
        }
    }
    if (parser->context)
        s_error (ctx, mark, "YAML syntax error: %s (%s)", parser->problem, parser->context);
    else
        s_error (ctx, mark, "YAML syntax error: %s", parser->problem);
}

static fanhub_option_t *
s_load_document (s_ctx_t *ctx, yaml_parser_t *parser, const char *text, size_t len)
{
    yaml_node_t *root = yaml_document_get_root_node (ctx->doc);
    yaml_document_t second;
    if (!yaml_parser_load (parser, &second)) {
        s_yaml_error (ctx, parser, text, len);
        return NULL;
    }
    bool more = yaml_document_get_root_node (&second) != NULL;
    yaml_mark_t second_mark = second.start_mark;
    yaml_document_delete (&second);
    if (more) {
        s_error (ctx, second_mark, "a second YAML document: the options are one map");
        return NULL;
    }
    if (!root || s_is_null (root)) {
        char where[1024];
        snprintf (where, sizeof where, "%s:1:1", ctx->source);
        fanhub_option_t *empty = fh_option_new (FANHUB_OPTION_MAP, NULL, where);
        if (!empty)
            snprintf (ctx->err, ctx->errlen, "%s: out of memory", ctx->source);
        return empty;
    }
    if (root->type != YAML_MAPPING_NODE) {
        s_error (ctx, root->start_mark,
                 "expected a map of plugin options (what a consumer's options: "
                 "holds), got %s",
                 root->type == YAML_SEQUENCE_NODE ? "a list" : "a single value");
        return NULL;
    }
    yaml_node_t *stack[S_DEPTH_MAX];
    return s_build (ctx, root, stack, 0);
}

fanhub_option_t *
fh_options_yaml_load_string (const char *text, size_t len, const char *source, char *err,
                             size_t errlen)
{
    char spare[1];
    s_ctx_t ctx = {
        .source = source ? source : "<string>",
        .err = err && errlen ? err : spare,
        .errlen = err && errlen ? errlen : sizeof spare,
        .path = "options",
    };
    ctx.err[0] = '\0';
    yaml_parser_t parser;
    if (!yaml_parser_initialize (&parser)) {
        snprintf (ctx.err, ctx.errlen, "%s: out of memory", ctx.source);
        return NULL;
    }
    yaml_parser_set_input_string (&parser, (const unsigned char *) (text ? text : ""),
                                  text ? len : 0);
    yaml_document_t doc;
    fanhub_option_t *options = NULL;
    if (!yaml_parser_load (&parser, &doc))
        s_yaml_error (&ctx, &parser, text, len);
    else {
        ctx.doc = &doc;
        options = s_load_document (&ctx, &parser, text, len);
        yaml_document_delete (&doc);
    }
    yaml_parser_delete (&parser);
    return options;
}

fanhub_option_t *
fh_options_yaml_load_file (const char *path, char *err, size_t errlen)
{
    FILE *file = fopen (path, "rb");
    struct stat st;
    int error = 0;
    if (!file)
        error = errno;
    else if (fstat (fileno (file), &st) == 0 && S_ISDIR (st.st_mode))
        error = EISDIR;
    const char *verb = error ? "open" : "read";
    char *text = NULL;
    size_t len = 0, size = 0;
    while (!error) {
        if (len == size) {
            char *grown = realloc (text, size = size ? size * 2 : 4096);
            if (!grown) {
                error = ENOMEM;
                break;
            }
            text = grown;
        }
        size_t got = fread (text + len, 1, size - len, file);
        len += got;
        if (got == 0) {
            if (ferror (file))
                error = errno ? errno : EIO;
            break;
        }
    }
    if (file)
        fclose (file);
    fanhub_option_t *options = NULL;
    if (error && err && errlen)
        snprintf (err, errlen, "%s: cannot %s: %s", path, verb, strerror (error));
    else if (!error)
        options = fh_options_yaml_load_string (text, len, path, err, errlen);
    free (text);
    return options;
}
