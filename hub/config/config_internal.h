/*  config_internal - what the files of the configuration loader share.

    The loader is split by job:
      config_yaml.c      the YAML loader, its errors and key paths (shared
                         with options_yaml.c)
      config_endpoint.c  the endpoint grammar (bus, publish, control)
      config_control.c   the default control endpoint, and what a control
                         client reads of a file that does not load
      config_fields.c    the field parsers and the section walker
      config.c           the schema: the tables of keys, the checks across
                         keys, defaults, loading and freeing
      config_consumer.c  a consumers: list (the main file's and each
                         drop-in's): the consumer's table and checks
      config_reload.c    comparing two configurations key by key
      config_include.c   include: and the drop-ins it names
      config_env.c       ${VAR} in values
      config_publish.c   a consumer's publish: section
      config_fedora.c    a consumer's fedora_messaging: config.toml
    Only these files include this header; the rest of the hub uses config.h.
*/
#ifndef FH_CONFIG_INTERNAL_H_INCLUDED
#define FH_CONFIG_INTERNAL_H_INCLUDED

#include "config.h"
#include "config_yaml.h"
#include "option_value.h"

#define FH_CFG_NAME_MAX 64 /* hub and consumer names */

typedef struct fh_cfg_field fh_cfg_field_t;
typedef struct fh_cfg_section fh_cfg_section_t;

/* Checks node and stores it at target (the field's address). On error
   writes the message to ctx and returns -1. ctx->user is the
   fh_config_t being filled. */
typedef int (fh_cfg_parse_fn) (fh_yaml_t *ctx, yaml_node_t *node, void *target,
                               const fh_cfg_field_t *field);

/* One key of a section: adding a key is adding a row to a table. A key
   is described as a plugin's option is (fanhub_opt_t, fanhub/consumer.h):
   opt.name is the key, opt.offset the value's place in the section's
   struct; opt.flags may hold FANHUB_OPT_REQUIRED, FANHUB_OPT_BIND (for
   fh_cfg_parse_endpoints) and FH_OPT_SECONDS (option_value.h). A typed
   key (opt.type FILE, INT, UINT, SIZE, DURATION, BOOL or ENUM, with
   opt.min, opt.max, opt.values) is read by option_value.c, the plugin
   options' reader, and stored as the configuration keeps it: FILE (and
   STRING) in a malloc'd char *, INT and ENUM in an int, UINT and SIZE in a size_t, DURATION in an int64_t of
   milliseconds, BOOL in a bool. A kind of the hub's own (endpoints,
   topics, names, a subsection, the consumers, an option tree, ...) has
   no type and a parse hook instead. */
struct fh_cfg_field {
    fanhub_opt_t opt;
    fh_cfg_parse_fn *parse;          /* NULL for a typed key */
    const fh_cfg_section_t *section; /* fh_cfg_parse_section: the subsection */
    /* A reload may change it in a running hub (fh_config_restart_keys).
       Unmarked keys need a restart, or, inside a consumer, a new
       instance of it: a new key is never silently ignored. */
    bool live;
};

struct fh_cfg_section {
    const fh_cfg_field_t *fields; /* ended by a row with key NULL */
    /* Optional: checks across fields once every key has been parsed. */
    int (*finish) (fh_yaml_t *ctx, yaml_node_t *node, void *target);
};

/* The schema's two roots (config.c, config_consumer.c). */
extern const fh_cfg_section_t fh_cfg_top_section;
extern const fh_cfg_section_t fh_cfg_consumer_section;
/* A consumer's publish: (config_publish.c), and freeing what it holds. */
extern const fh_cfg_section_t fh_cfg_publish_section;
void fh_cfg_publish_clear (fh_publish_config_t *publish);

/* A map whose keys are the rows of section; fills target. Refuses
   unknown, duplicate and missing required keys, then runs the finish
   hook. */
int fh_cfg_parse_map (fh_yaml_t *ctx, yaml_node_t *node, const fh_cfg_section_t *section,
                      void *target);

/* A typed key (field->opt.type) read by option_value.c and stored in its
   C type (above). */
int fh_cfg_parse_typed (fh_yaml_t *ctx, yaml_node_t *node, void *target,
                        const fh_cfg_field_t *field);
/* Whether a typed key holds the same value at a and b (config_reload.c). */
bool fh_cfg_typed_equal (const fh_cfg_field_t *field, const void *a, const void *b);

/* The hooks (config_fields.c but where named), each storing one type:
   int64_t: permille
   char *: name, plugin, control, listen, bind_endpoint, order_by,
           producer, key
   fh_strlist_t: endpoints, topics, keys, addresses, include
   fanhub_option_t *: options
   section: a subsection (field->section) at the same target;
   consumers (config_consumer.c): the consumers: list into the
   fh_config_t. */
fh_cfg_parse_fn fh_cfg_parse_name, fh_cfg_parse_plugin, fh_cfg_parse_control, fh_cfg_parse_listen,
    fh_cfg_parse_bind_endpoint, fh_cfg_parse_permille, fh_cfg_parse_order_by,
    fh_cfg_parse_endpoints, fh_cfg_parse_topics, fh_cfg_parse_options, fh_cfg_parse_producer,
    fh_cfg_parse_key, fh_cfg_parse_keys, fh_cfg_parse_addresses, fh_cfg_parse_section,
    fh_cfg_parse_consumers, fh_cfg_parse_shard, fh_cfg_parse_amqp, fh_cfg_parse_include,
    fh_cfg_parse_consumer_name, fh_cfg_parse_signatures;
/* A section kept as an option tree (bus.amqp, bus.validate_signatures):
   a map, read into target, then checked by loading it once: check writes
   the whole error ("WHERE: SECTION.KEY: why"), `source` being the file
   for an error of no one value. keys names the first keys of the map for
   the error on a node that is no map. */
typedef int fh_cfg_tree_check_fn (const fanhub_option_t *tree, const char *source, char *err,
                                  size_t errlen);
int fh_cfg_parse_checked_tree (fh_yaml_t *ctx, yaml_node_t *node, void *target,
                               const fh_cfg_field_t *field, const char *keys,
                               fh_cfg_tree_check_fn *check);
/* Each item of a list, or the one scalar: its text checked (check answers
   NULL when good, else why, "" for nothing more than `what`), then added
   to list. */
int fh_cfg_parse_items (fh_yaml_t *ctx, yaml_node_t *node, fh_strlist_t *list, const char *what,
                        const char *(*check) (const char *) );

/* Checks of consumer i that involve the hub's settings
   (config_consumer.c); item is its node in its file's list, index its
   place there. */
int fh_cfg_consumer_cross_check (fh_yaml_t *ctx, fh_config_t *cfg, size_t i, yaml_node_t *item,
                                 size_t index);
/* Reads the drop-ins that root's include: names and appends their
   consumers to cfg (config_include.c). */
int fh_cfg_include_load (fh_yaml_t *ctx, yaml_node_t *root, fh_config_t *cfg);
/* fedora_messaging: FILE read through the runner's helper (config_fedora.c). */
int fh_cfg_parse_fedora_messaging (fh_yaml_t *ctx, yaml_node_t *node, void *target,
                                   const fh_cfg_field_t *field);
/* The consumer a fedora_messaging: file makes (plugin, options), or
   plugin: required without one. */
int fh_cfg_fedora_finish (fh_yaml_t *ctx, fh_consumer_config_t *consumer, yaml_node_t *item,
                          size_t index);
/* Replaces ${NAME}, ${NAME:-default} and $$ in the values of the loaded
   document (config_env.c). */
int fh_cfg_expand_env (fh_yaml_t *ctx);

/* The control endpoint: ipc://PATH, or tcp:// on loopback (a port '*'
   is chosen at bind and logged). NULL when valid, else a static reason
   (config_endpoint.c). */
const char *fh_cfg_control_check (const char *endpoint);
bool fh_cfg_control_on_loopback (const char *endpoint);
/* ipc://DIR/fanhub[-NAME].sock, DIR being $RUNTIME_DIRECTORY (its first
   entry: systemd separates several with ':'), else $XDG_RUNTIME_DIR, else
   a private directory (control_path.h: /run/fanhub-0 for root, else
   /tmp/fanhub-UID), never a path any user may create first. malloc'd;
   NULL when out of memory (config_control.c). */
char *fh_cfg_default_control (const char *name);

int fh_cfg_strlist_add (fh_strlist_t *list, const char *text);
/* config_fields.c: adds "FILE:LINE:COL: KEYPATH: message" to the
   configuration's warnings (ctx->user's): legal but likely wrong. 0, or
   -1 out of memory. */
int fh_cfg_warn (fh_yaml_t *ctx, yaml_mark_t mark, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
void fh_cfg_strlist_clear (fh_strlist_t *list);
bool fh_cfg_strlist_has (const fh_strlist_t *list, const char *text);

#endif
