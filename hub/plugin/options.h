/*  options - a parsed YAML subtree: the `options:` map handed to plugins.

    The config loader builds the tree from libyaml events; the plugin host
    exposes it read-only through fanhub_host_t's option_* functions. Every
    node remembers where it came from ("FILE:LINE:COL") so a plugin can say
    exactly which value it refuses. Nodes own their children; destroying the
    root frees the whole tree.
*/
#ifndef FH_OPTIONS_H_INCLUDED
#define FH_OPTIONS_H_INCLUDED

#include "fanhub/consumer.h"

#include <stdbool.h>
#include <stddef.h>

/* Creates a node. `where` is copied; `scalar` is copied for scalars and
   must be NULL otherwise. Returns NULL when out of memory. */
fanhub_option_t *fh_option_new (fanhub_option_kind_t kind, const char *scalar, const char *where);
/* Appends child to a list (key NULL) or a map (key copied). Takes ownership
   of child, also on failure (-1, out of memory). A duplicate map key is the
   caller's business to refuse (see fh_option_get). */
int fh_option_append (fanhub_option_t *parent, const char *key, fanhub_option_t *child);
/* Same kind, same values, same keys in the same order, recursively (where
   they came from aside). Two NULLs are equal. */
bool fh_option_equal (const fanhub_option_t *a, const fanhub_option_t *b);
/* Safe with NULL and twice; nulls *self_p. */
void fh_option_destroy (fanhub_option_t **self_p);

/* The accessors of fanhub_host_t; each is safe on a NULL node (answers
   NULL, 0 or 0-kind). */
fanhub_option_kind_t fh_option_kind (const fanhub_option_t *node);
const fanhub_option_t *fh_option_get (const fanhub_option_t *map, const char *key);
const char *fh_option_scalar (const fanhub_option_t *node);
size_t fh_option_count (const fanhub_option_t *node);
const fanhub_option_t *fh_option_at (const fanhub_option_t *node, size_t i, const char **key);
const char *fh_option_where (const fanhub_option_t *node);

#endif
