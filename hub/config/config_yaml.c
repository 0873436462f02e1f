/*  config_yaml - the hub's one YAML loader; see config_yaml.h.

    Both the configuration and a plugin's options file come through here,
    so the limits (bytes, depth, option values), the error format and the
    rules for keys are the same for both.
*/
#include "config_yaml.h"

#include "fs.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void
fh_yaml_init (fh_yaml_t *self, const char *source, char *err, size_t errlen)
{
    memset (self, 0, sizeof *self);
    self->source = source ? source : "<string>";
    self->err = err && errlen ? err : self->spare;
    self->errlen = err && errlen ? errlen : sizeof self->spare;
    self->err[0] = '\0';
}

/* ------------------------------------------------------------------ */
/* Errors and key paths                                                 */

void
fh_yaml_vformat (fh_yaml_t *self, char *buf, size_t size, yaml_mark_t mark, const char *fmt,
                 va_list args)
{
    int len = snprintf (buf, size, "%s:%zu:%zu: %s%s", self->source, mark.line + 1, mark.column + 1,
                        self->path, self->path[0] ? ": " : "");
    if (len >= 0 && (size_t) len < size)
        vsnprintf (buf + len, size - (size_t) len, fmt, args);
    /* One line, whatever the file put in its keys and values. */
    for (char *c = buf; *c; c++)
        if ((unsigned char) *c < 0x20 || *c == 0x7f)
            *c = '?';
}

int
fh_yaml_error (fh_yaml_t *self, yaml_mark_t mark, const char *fmt, ...)
{
    va_list args;
    va_start (args, fmt);
    fh_yaml_vformat (self, self->err, self->errlen, mark, fmt, args);
    va_end (args);
    return -1;
}

int
fh_yaml_key_error (fh_yaml_t *self, yaml_node_t *map, const char *key, const char *fmt, ...)
{
    yaml_node_t *at = fh_yaml_map_find (self, map, key);
    fh_yaml_path_key (self, key);
    va_list args;
    va_start (args, fmt);
    fh_yaml_vformat (self, self->err, self->errlen, at ? at->start_mark : map->start_mark, fmt,
                     args);
    va_end (args);
    return -1;
}

int
fh_yaml_oom (fh_yaml_t *self, yaml_mark_t mark)
{
    return fh_yaml_error (self, mark, "out of memory");
}

size_t
fh_yaml_path_key (fh_yaml_t *self, const char *key)
{
    size_t len = strlen (self->path);
    snprintf (self->path + len, sizeof self->path - len, "%s%s", len ? "." : "", key);
    return len;
}

size_t
fh_yaml_path_index (fh_yaml_t *self, size_t index)
{
    size_t len = strlen (self->path);
    snprintf (self->path + len, sizeof self->path - len, "[%zu]", index);
    return len;
}

void
fh_yaml_path_pop (fh_yaml_t *self, size_t len)
{
    self->path[len] = '\0';
}

/* ------------------------------------------------------------------ */
/* Nodes                                                                */

yaml_node_t *
fh_yaml_node (fh_yaml_t *self, int id)
{
    return yaml_document_get_node (&self->doc, id);
}

bool
fh_yaml_is_null (const yaml_node_t *node)
{
    if (node->type != YAML_SCALAR_NODE || node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    const char *text = (const char *) node->data.scalar.value;
    return !*text || strcmp (text, "~") == 0 || strcmp (text, "null") == 0
           || strcmp (text, "Null") == 0 || strcmp (text, "NULL") == 0;
}

size_t
fh_yaml_count (const yaml_node_t *node)
{
    if (node->type == YAML_SEQUENCE_NODE)
        return (size_t) (node->data.sequence.items.top - node->data.sequence.items.start);
    if (node->type == YAML_MAPPING_NODE)
        return (size_t) (node->data.mapping.pairs.top - node->data.mapping.pairs.start);
    return 0;
}

const char *
fh_yaml_got (const yaml_node_t *node, char *buf, size_t len)
{
    if (fh_yaml_is_null (node)) {
        const char *text = (const char *) node->data.scalar.value;
        if (!*text || *text == '~')
            return "nothing";
        snprintf (buf, len, "null (YAML null; write \"%s\" for the word)", text);
        return buf;
    }
    if (node->type == YAML_SEQUENCE_NODE)
        return fh_yaml_count (node) ? "a list" : "an empty list";
    if (node->type == YAML_MAPPING_NODE)
        return fh_yaml_count (node) ? "a map" : "an empty map";
    const char *text = (const char *) node->data.scalar.value;
    size_t size = node->data.scalar.length;
    if (size <= FH_YAML_GOT_MAX) {
        snprintf (buf, len, "'%s'", text);
        return buf;
    }
    size = FH_YAML_GOT_MAX;
    while (size > 0 && ((unsigned char) text[size] & 0xc0) == 0x80)
        size--; /* never cut a UTF-8 character */
    snprintf (buf, len, "'%.*s...'", (int) size, text);
    return buf;
}

const char *
fh_yaml_text (fh_yaml_t *self, yaml_node_t *node, const char *what)
{
    char buf[FH_YAML_GOT_SIZE];
    if (node->type != YAML_SCALAR_NODE || fh_yaml_is_null (node)) {
        fh_yaml_error (self, node->start_mark, "expected %s, got %s", what,
                       fh_yaml_got (node, buf, sizeof buf));
        return NULL;
    }
    const char *text = (const char *) node->data.scalar.value;
    if (strlen (text) != node->data.scalar.length) {
        fh_yaml_error (self, node->start_mark, "expected %s, got a value with a NUL character",
                       what);
        return NULL;
    }
    return text;
}

yaml_node_t *
fh_yaml_map_find (fh_yaml_t *self, yaml_node_t *map, const char *key)
{
    if (map->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *pair = map->data.mapping.pairs.start; pair < map->data.mapping.pairs.top;
         pair++) {
        yaml_node_t *k = fh_yaml_node (self, pair->key);
        if (k->type == YAML_SCALAR_NODE && strcmp ((const char *) k->data.scalar.value, key) == 0)
            return fh_yaml_node (self, pair->value);
    }
    return NULL;
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

/* Sorting keeps a map of many keys cheap to check. */
int
fh_yaml_check_keys (fh_yaml_t *self, yaml_node_t *map)
{
    size_t count = fh_yaml_count (map);
    yaml_node_pair_t *pairs = map->data.mapping.pairs.start;
    for (size_t i = 0; i < count; i++)
        if (!fh_yaml_text (self, fh_yaml_node (self, pairs[i].key), "a key"))
            return -1;
    if (count < 2)
        return 0;

    s_key_ref_t *refs = malloc (count * sizeof *refs);
    if (!refs)
        return fh_yaml_oom (self, map->start_mark);
    for (size_t i = 0; i < count; i++) {
        refs[i].key = (const char *) fh_yaml_node (self, pairs[i].key)->data.scalar.value;
        refs[i].index = i;
    }
    qsort (refs, count, sizeof *refs, s_key_ref_cmp);
    /* The duplicate that comes first in the file, and its first use. */
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

    yaml_node_t *key = fh_yaml_node (self, pairs[dup].key);
    yaml_node_t *earlier = fh_yaml_node (self, pairs[first].key);
    size_t mark = fh_yaml_path_key (self, (const char *) key->data.scalar.value);
    fh_yaml_error (self, key->start_mark, "duplicate key (first at line %zu)",
                   earlier->start_mark.line + 1);
    fh_yaml_path_pop (self, mark);
    return -1;
}

char *
fh_yaml_where (fh_yaml_t *self, yaml_mark_t mark)
{
    char buf[1024];
    snprintf (buf, sizeof buf, "%s:%zu:%zu", self->source, mark.line + 1, mark.column + 1);
    return strdup (buf);
}

/* ------------------------------------------------------------------ */
/* Option trees                                                         */

/* A node of the tree, checked against the caps; NULL with the error. */
static fanhub_option_t *
s_option_node (fh_yaml_t *self, yaml_node_t *node, yaml_node_t **stack, size_t depth)
{
    for (size_t i = 0; i < depth; i++)
        if (stack[i] == node) {
            fh_yaml_error (self, node->start_mark, "an alias refers to a value that contains it");
            return NULL;
        }
    if (depth == FH_YAML_OPTION_DEPTH_MAX) {
        fh_yaml_error (self, node->start_mark, "options nest more than %d levels",
                       FH_YAML_OPTION_DEPTH_MAX);
        return NULL;
    }
    if (++self->option_nodes > FH_YAML_OPTION_NODES_MAX) {
        fh_yaml_error (self, node->start_mark, "more than %d option values (aliases expanded)",
                       FH_YAML_OPTION_NODES_MAX);
        return NULL;
    }
    stack[depth] = node;
    bool is_map = node->type == YAML_MAPPING_NODE;
    if (is_map && fh_yaml_check_keys (self, node))
        return NULL;
    const char *text = node->type == YAML_SCALAR_NODE ? (const char *) node->data.scalar.value
                                                      : NULL;
    if (text && strlen (text) != node->data.scalar.length) {
        fh_yaml_error (self, node->start_mark, "a value with a NUL character is not supported");
        return NULL;
    }
    char *where = fh_yaml_where (self, node->start_mark);
    fanhub_option_t *option = NULL;
    if (text)
        option = where ? fh_option_new (FANHUB_OPTION_SCALAR, text, where) : NULL;
    else if (where)
        option = fh_option_new (is_map ? FANHUB_OPTION_MAP : FANHUB_OPTION_LIST, NULL, where);
    free (where);
    if (!option)
        fh_yaml_oom (self, node->start_mark);
    return option;
}

/* Builds the tree of node; stack holds the nodes being built above it,
   to refuse an alias to one of them (a tree that contains itself). */
static fanhub_option_t *
s_option_build (fh_yaml_t *self, yaml_node_t *node, yaml_node_t **stack, size_t depth)
{
    fanhub_option_t *option = s_option_node (self, node, stack, depth);
    if (!option || node->type == YAML_SCALAR_NODE)
        return option;
    bool is_map = node->type == YAML_MAPPING_NODE;
    for (size_t i = 0; i < fh_yaml_count (node); i++) {
        const char *key = NULL;
        yaml_node_t *child;
        size_t mark;
        if (is_map) {
            yaml_node_pair_t *pair = &node->data.mapping.pairs.start[i];
            key = (const char *) fh_yaml_node (self, pair->key)->data.scalar.value;
            child = fh_yaml_node (self, pair->value);
            mark = fh_yaml_path_key (self, key);
        }
        else {
            child = fh_yaml_node (self, node->data.sequence.items.start[i]);
            mark = fh_yaml_path_index (self, i);
        }
        fanhub_option_t *built = s_option_build (self, child, stack, depth + 1);
        if (!built) {
            fh_option_destroy (&option);
            return NULL;
        }
        fh_yaml_path_pop (self, mark);
        if (fh_option_append (option, key, built)) {
            fh_option_destroy (&option);
            fh_yaml_oom (self, child->start_mark);
            return NULL;
        }
    }
    return option;
}

fanhub_option_t *
fh_yaml_option_tree (fh_yaml_t *self, yaml_node_t *node)
{
    if (fh_yaml_is_null (node)) {
        char *where = fh_yaml_where (self, node->start_mark);
        fanhub_option_t *empty = where ? fh_option_new (FANHUB_OPTION_MAP, NULL, where) : NULL;
        free (where);
        if (!empty)
            fh_yaml_oom (self, node->start_mark);
        return empty;
    }
    yaml_node_t *stack[FH_YAML_OPTION_DEPTH_MAX];
    return s_option_build (self, node, stack, 0);
}

/* ------------------------------------------------------------------ */
/* Loading                                                              */

/* Reports what libyaml refused. */
static void
s_syntax_error (fh_yaml_t *self, yaml_parser_t *parser, const char *text, size_t len)
{
    if (parser->error == YAML_MEMORY_ERROR || !parser->problem) {
        snprintf (self->err, self->errlen, "%s: out of memory", self->source);
        return;
    }
    yaml_mark_t mark = parser->problem_mark;
    if (parser->error == YAML_READER_ERROR) {
        /* Reader errors carry a byte offset, not a mark. */
        memset (&mark, 0, sizeof mark);
        for (size_t i = 0; i < parser->problem_offset && i < len; i++) {
            if (text[i] == '\n') {
                mark.line++;
                mark.column = 0;
            }
            else
                mark.column++;
        }
        if (parser->problem_value >= 0)
            fh_yaml_error (self, mark, "YAML syntax error: %s (byte 0x%02x at offset %zu)",
                           parser->problem, (unsigned) parser->problem_value,
                           parser->problem_offset);
        else
            fh_yaml_error (self, mark, "YAML syntax error: %s (at offset %zu)", parser->problem,
                           parser->problem_offset);
        return;
    }
    static const char dup_anchor[] = "found duplicate anchor";
    if (parser->context && strncmp (parser->context, dup_anchor, strlen (dup_anchor)) == 0)
        /* libyaml's context here is "...; first occurrence". */
        fh_yaml_error (self, mark, "YAML syntax error: %s (first occurrence at line %zu)",
                       dup_anchor, parser->context_mark.line + 1);
    else if (parser->context && strcmp (parser->context, "while scanning an alias") == 0)
        /* `topics: *.build.*` (a glob) reads as an alias. */
        fh_yaml_error (self, mark,
                       "YAML syntax error: %s (%s): a value starting with * must be "
                       "quoted",
                       parser->problem, parser->context);
    else if (parser->context)
        fh_yaml_error (self, mark, "YAML syntax error: %s (%s)", parser->problem, parser->context);
    else
        fh_yaml_error (self, mark, "YAML syntax error: %s", parser->problem);
}

/* Reads the events of the text, without building anything, to refuse
   a document nested deeper than FH_YAML_DEPTH_MAX before libyaml builds
   it (a deep one costs it time and memory out of proportion). Returns 0,
   or -1 with the error (a syntax error is left to the load). */
static int
s_check_depth (fh_yaml_t *self, const char *text, size_t len)
{
    yaml_parser_t parser;
    if (!yaml_parser_initialize (&parser))
        return 0; /* the load reports it */
    yaml_parser_set_input_string (&parser, (const unsigned char *) text, len);
    int depth = 0, rc = 0;
    for (bool done = false; !done && rc == 0;) {
        yaml_event_t event;
        if (!yaml_parser_parse (&parser, &event))
            break;
        switch (event.type) {
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (++depth > FH_YAML_DEPTH_MAX) {
                self->path[0] = '\0';
                rc = fh_yaml_error (self, event.start_mark, "nested deeper than %d levels",
                                    FH_YAML_DEPTH_MAX);
            }
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT: depth--; break;
        case YAML_STREAM_END_EVENT: done = true; break;
        default: break;
        }
        yaml_event_delete (&event);
    }
    yaml_parser_delete (&parser);
    return rc;
}

/* After the first document: an empty one refused (with empty_error),
   then a second one. */
static int
s_check_document (fh_yaml_t *self, yaml_parser_t *parser, const char *text, size_t len,
                  const char *what, const char *empty_error)
{
    yaml_node_t *root = yaml_document_get_root_node (&self->doc);
    if (empty_error && (!root || fh_yaml_is_null (root)))
        return fh_yaml_error (self, root ? root->start_mark : self->doc.start_mark, "%s",
                              empty_error);
    yaml_document_t second;
    if (!yaml_parser_load (parser, &second)) {
        s_syntax_error (self, parser, text, len);
        return -1;
    }
    bool more = yaml_document_get_root_node (&second) != NULL;
    yaml_mark_t mark = second.start_mark;
    yaml_document_delete (&second);
    if (more)
        return fh_yaml_error (self, mark, "a second YAML document: the %s is one document", what);
    return 0;
}

int
fh_yaml_load (fh_yaml_t *self, const char *text, size_t len, const char *what,
              const char *empty_error)
{
    if (!text)
        len = 0;
    if (len > FH_YAML_BYTES_MAX) {
        snprintf (self->err, self->errlen, "%s: %zu bytes: a %s is at most %d MiB", self->source,
                  len, what, FH_YAML_BYTES_MAX / (1024 * 1024));
        return -1;
    }
    if (text && s_check_depth (self, text, len) != 0)
        return -1;
    yaml_parser_t parser;
    if (!yaml_parser_initialize (&parser)) {
        snprintf (self->err, self->errlen, "%s: out of memory", self->source);
        return -1;
    }
    yaml_parser_set_input_string (&parser, (const unsigned char *) (text ? text : ""), len);
    int rc = -1;
    if (!yaml_parser_load (&parser, &self->doc))
        s_syntax_error (self, &parser, text, len);
    else {
        self->loaded = true;
        rc = s_check_document (self, &parser, text, len, what, empty_error);
    }
    yaml_parser_delete (&parser);
    if (rc)
        fh_yaml_unload (self);
    return rc;
}

yaml_node_t *
fh_yaml_root (fh_yaml_t *self)
{
    return self->loaded ? yaml_document_get_root_node (&self->doc) : NULL;
}

void
fh_yaml_unload (fh_yaml_t *self)
{
    if (self->loaded)
        yaml_document_delete (&self->doc);
    self->loaded = false;
}

char *
fh_yaml_read_file (const char *path, size_t *len, char *err, size_t errlen)
{
    /* fopen opens a directory on Linux; say so rather than "cannot read". */
    struct stat st;
    if (stat (path, &st) == 0 && S_ISDIR (st.st_mode)) {
        snprintf (err, errlen, "%s: cannot open: %s", path, strerror (EISDIR));
        return NULL;
    }
    char *text = fh_fs_read_file (path, (size_t) FH_YAML_BYTES_MAX, len, err, errlen);
    if (!text && errno == EFBIG)
        snprintf (err, errlen, "%s: longer than %d MiB, the most a YAML file may be", path,
                  FH_YAML_BYTES_MAX / (1024 * 1024));
    return text;
}
