/*  options - a parsed YAML subtree: the `options:` map handed to plugins.

    A node is a scalar (its text), a list (items in file order) or a map
    (keys and values in file order). Each node owns its where string, its
    text and its children; destroying the root frees the whole tree. The
    tree is built once by the config loader and only read afterwards, from
    any thread, so it needs no lock. See options.h.
*/
#include "options.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct fanhub_option {
    fanhub_option_kind_t kind;
    char *scalar;            /* SCALAR only, never NULL there */
    char *where;             /* "FILE:LINE:COL", never NULL */
    size_t count;            /* items (LIST) or entries (MAP) */
    size_t capacity;         /* allocated slots of items and keys */
    fanhub_option_t **items; /* LIST and MAP */
    char **keys;             /* MAP only: keys[i] belongs to items[i] */
};

fanhub_option_t *
fh_option_new (fanhub_option_kind_t kind, const char *scalar, const char *where)
{
    if (kind != FANHUB_OPTION_SCALAR && kind != FANHUB_OPTION_LIST && kind != FANHUB_OPTION_MAP)
        return NULL;
    if ((kind == FANHUB_OPTION_SCALAR) != (scalar != NULL))
        return NULL;

    fanhub_option_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->kind = kind;
    self->where = strdup (where ? where : "");
    if (scalar)
        self->scalar = strdup (scalar);
    if (!self->where || (scalar && !self->scalar)) {
        fh_option_destroy (&self);
        return NULL;
    }
    return self;
}

int
fh_option_append (fanhub_option_t *parent, const char *key, fanhub_option_t *child)
{
    bool is_map = parent && parent->kind == FANHUB_OPTION_MAP;
    bool is_list = parent && parent->kind == FANHUB_OPTION_LIST;
    if (!child || !(is_map || is_list) || is_map != (key != NULL)) {
        fh_option_destroy (&child);
        return -1;
    }
    if (parent->count == parent->capacity) {
        size_t capacity = parent->capacity ? parent->capacity * 2 : 4;
        if (capacity > SIZE_MAX / sizeof (void *)) {
            fh_option_destroy (&child);
            return -1;
        }
        fanhub_option_t **items = realloc (parent->items, capacity * sizeof *items);
        if (!items) {
            fh_option_destroy (&child);
            return -1;
        }
        parent->items = items;
        if (is_map) {
            char **keys = realloc (parent->keys, capacity * sizeof *keys);
            if (!keys) {
                fh_option_destroy (&child);
                return -1;
            }
            parent->keys = keys;
        }
        parent->capacity = capacity;
    }
    if (is_map) {
        char *copy = strdup (key);
        if (!copy) {
            fh_option_destroy (&child);
            return -1;
        }
        parent->keys[parent->count] = copy;
    }
    parent->items[parent->count++] = child;
    return 0;
}

void
fh_option_destroy (fanhub_option_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    fanhub_option_t *self = *self_p;
    *self_p = NULL;
    for (size_t i = 0; i < self->count; i++) {
        fh_option_destroy (&self->items[i]);
        if (self->keys)
            free (self->keys[i]);
    }
    free (self->items);
    free (self->keys);
    free (self->scalar);
    free (self->where);
    free (self);
}

fanhub_option_kind_t
fh_option_kind (const fanhub_option_t *node)
{
    return node ? node->kind : (fanhub_option_kind_t) 0;
}

const fanhub_option_t *
fh_option_get (const fanhub_option_t *map, const char *key)
{
    if (!map || map->kind != FANHUB_OPTION_MAP || !key)
        return NULL;
    for (size_t i = 0; i < map->count; i++)
        if (strcmp (map->keys[i], key) == 0)
            return map->items[i];
    return NULL;
}

const char *
fh_option_scalar (const fanhub_option_t *node)
{
    return node && node->kind == FANHUB_OPTION_SCALAR ? node->scalar : NULL;
}

size_t
fh_option_count (const fanhub_option_t *node)
{
    return node && node->kind != FANHUB_OPTION_SCALAR ? node->count : 0;
}

const fanhub_option_t *
fh_option_at (const fanhub_option_t *node, size_t i, const char **key)
{
    if (key)
        *key = NULL;
    if (!node || node->kind == FANHUB_OPTION_SCALAR || i >= node->count)
        return NULL;
    if (key && node->kind == FANHUB_OPTION_MAP)
        *key = node->keys[i];
    return node->items[i];
}

const char *
fh_option_where (const fanhub_option_t *node)
{
    return node ? node->where : NULL;
}

bool
fh_option_equal (const fanhub_option_t *a, const fanhub_option_t *b)
{
    if (!a || !b)
        return a == b;
    if (a->kind != b->kind || a->count != b->count)
        return false;
    if (a->kind == FANHUB_OPTION_SCALAR)
        return strcmp (a->scalar, b->scalar) == 0;
    for (size_t i = 0; i < a->count; i++) {
        if (a->kind == FANHUB_OPTION_MAP && strcmp (a->keys[i], b->keys[i]) != 0)
            return false;
        if (!fh_option_equal (a->items[i], b->items[i]))
            return false;
    }
    return true;
}
