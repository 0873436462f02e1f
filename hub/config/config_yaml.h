/*  config_yaml - the hub's one YAML loader: the configuration (config.c)
    and a plugin's options file (options_yaml.c) are read by it.

    fh_yaml_load parses text with libyaml's document API (so anchors and
    aliases resolve) within bounds: at most FH_YAML_BYTES_MAX bytes, nested
    at most FH_YAML_DEPTH_MAX levels (checked on the parser's events before
    libyaml builds the document), and one document only. The helpers walk
    the nodes and write every error as one line,
    "SOURCE:LINE:COL: KEYPATH: message", keeping the key path of the node
    being read in the loader. fh_yaml_option_tree turns a map into a
    plugin's option tree (options.h): every node keeps its "FILE:LINE:COL",
    depth and size are bounded (aliases make a small file describe a huge
    tree), keys are checked as the configuration's are.
*/
#ifndef FH_CONFIG_YAML_H_INCLUDED
#define FH_CONFIG_YAML_H_INCLUDED

#include "options.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <yaml.h>

#define FH_YAML_BYTES_MAX (16 * 1024 * 1024) /* a file */
#define FH_YAML_DEPTH_MAX 128                /* nesting of a document */
#define FH_YAML_OPTION_DEPTH_MAX 64          /* nesting of an option tree */
/* Values of all the option trees of one load, aliases expanded. */
#define FH_YAML_OPTION_NODES_MAX 100000
#define FH_YAML_GOT_MAX 40                      /* bytes of a value quoted in errors */
#define FH_YAML_GOT_SIZE (FH_YAML_GOT_MAX + 48) /* room for fh_yaml_got's answer */

/* The state of one load. */
typedef struct {
    yaml_document_t doc;
    bool loaded;        /* doc holds a document to delete */
    const char *source; /* file name in errors and where strings */
    char *err;          /* the caller's buffer, or spare */
    size_t errlen;
    char spare[1];
    size_t option_nodes; /* option values built so far, for the cap */
    char path[512];      /* key path of the node being read */
    void *user;          /* the caller's: what the load fills in */
} fh_yaml_t;

/* Starts a load: source (NULL: "<string>") names it in errors; err may be
   NULL. The path starts empty. */
void fh_yaml_init (fh_yaml_t *self, const char *source, char *err, size_t errlen);

/* Parses text; what (e.g. "configuration") names it in errors.
   With empty_error, an empty document (nothing, or null) is refused with
   that message; else it loads with no root (fh_yaml_root answers NULL or
   a null scalar). A second document is refused. Returns 0, or -1 with
   the error written. */
int fh_yaml_load (fh_yaml_t *self, const char *text, size_t len, const char *what,
                  const char *empty_error);
/* The root node of the loaded document, or NULL. */
yaml_node_t *fh_yaml_root (fh_yaml_t *self);
/* Frees the document; safe twice. */
void fh_yaml_unload (fh_yaml_t *self);

/* The whole file at path (malloc'd, NUL-terminated, *len its length),
   read up to FH_YAML_BYTES_MAX + 1 bytes so the load can refuse more;
   else NULL with "PATH: cannot open: why" (or read) in err. */
char *fh_yaml_read_file (const char *path, size_t *len, char *err, size_t errlen);

/* Writes "SOURCE:LINE:COL: PATH: message" (no "PATH: " when the path is
   empty) as one line; answers -1. */
int fh_yaml_error (fh_yaml_t *self, yaml_mark_t mark, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
int fh_yaml_oom (fh_yaml_t *self, yaml_mark_t mark);
/* fh_yaml_error about key of the map node: at its value (at the map when
   it is absent), with key added to the path. */
int fh_yaml_key_error (fh_yaml_t *self, yaml_node_t *map, const char *key, const char *fmt, ...)
    __attribute__ ((format (printf, 4, 5)));
/* fh_yaml_error's line into buf (size bytes), for a warning. */
void fh_yaml_vformat (fh_yaml_t *self, char *buf, size_t size, yaml_mark_t mark, const char *fmt,
                      va_list args) __attribute__ ((format (printf, 5, 0)));

/* Append ".key" ("key" at the top) or "[index]" to the key path; each
   answers the length to restore with fh_yaml_path_pop. */
size_t fh_yaml_path_key (fh_yaml_t *self, const char *key);
size_t fh_yaml_path_index (fh_yaml_t *self, size_t index);
void fh_yaml_path_pop (fh_yaml_t *self, size_t len);

yaml_node_t *fh_yaml_node (fh_yaml_t *self, int id);
/* A plain empty, "~" or "null" scalar: `key:` with nothing after it. */
bool fh_yaml_is_null (const yaml_node_t *node);
/* Items of a list, pairs of a map; 0 for a scalar. */
size_t fh_yaml_count (const yaml_node_t *node);
/* What the file gave, for "expected X, got Y": "nothing", "a list",
   "a map" or the quoted (and maybe shortened) text of a scalar. buf
   holds FH_YAML_GOT_SIZE bytes. */
const char *fh_yaml_got (const yaml_node_t *node, char *buf, size_t len);
/* The text of a scalar that is not null and holds no NUL byte; else
   writes "expected WHAT, got ..." and answers NULL. */
const char *fh_yaml_text (fh_yaml_t *self, yaml_node_t *node, const char *what);
/* The value of key in a map node, or NULL. */
yaml_node_t *fh_yaml_map_find (fh_yaml_t *self, yaml_node_t *map, const char *key);
/* Each key of a map a non-null scalar without NUL, none twice; the
   first offence in file order is reported. */
int fh_yaml_check_keys (fh_yaml_t *self, yaml_node_t *map);
/* "SOURCE:LINE:COL" of mark, malloc'd (NULL when out of memory). */
char *fh_yaml_where (fh_yaml_t *self, yaml_mark_t mark);

/* The option tree of node: a null node is an empty map at its place.
   NULL with the error written (depth, size, keys, an alias to a value
   that contains it, out of memory). */
fanhub_option_t *fh_yaml_option_tree (fh_yaml_t *self, yaml_node_t *node);

#endif
