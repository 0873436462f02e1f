/*  option_table - options read against a plugin's table. See
    option_table.h; the types and their C fields are in fanhub/consumer.h.
*/
#include "option_table.h"

#include "config.h"
#include "option_value.h"

#include <fanhub/sdk.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* One value being read: the entry, its node (NULL for a default) and its
   text, with where it came from for messages. */
typedef struct {
    const fanhub_host_t *host;
    const fanhub_opt_t *opt;
    const fanhub_option_t *node;
    const char *text; /* the scalar, or NULL */
    const char *where;
    char *err;
    size_t errlen;
    const char *key; /* as messages name it: "tls.ca_file", "password_env" */
    bool env;        /* SECRET: given as KEY_env, not KEY_file */
    const fanhub_opt_t *table;
} s_value_t;

const fanhub_opt_t *
fh_option_table_of (const fanhub_consumer_desc_t *desc)
{
    /* An older descriptor ends before options: reading it would read past it. */
    if (!desc || desc->abi_minor < 2
        || desc->size < offsetof (fanhub_consumer_desc_t, options) + sizeof desc->options)
        return NULL;
    return desc->options;
}

const char *
fh_option_type_name (fanhub_opt_type_t type)
{
    switch (type) {
    case FANHUB_OPT_STRING: return "string";
    case FANHUB_OPT_FILE: return "file";
    case FANHUB_OPT_INT: return "integer";
    case FANHUB_OPT_UINT: return "unsigned";
    case FANHUB_OPT_DOUBLE: return "number";
    case FANHUB_OPT_BOOL: return "bool";
    case FANHUB_OPT_DURATION: return "duration";
    case FANHUB_OPT_SIZE: return "size";
    case FANHUB_OPT_ENUM: return "enum";
    case FANHUB_OPT_STRINGS: return "strings";
    case FANHUB_OPT_ANY: return "any";
    case FANHUB_OPT_MAPS: return "maps";
    case FANHUB_OPT_MAP: return "map";
    case FANHUB_OPT_STRING_OR_LIST: return "strings";
    case FANHUB_OPT_ENDPOINT: return "endpoint";
    case FANHUB_OPT_ENDPOINTS: return "endpoints";
    case FANHUB_OPT_SECRET: return "secret";
    }
    return "?";
}

/* The bytes a type's field takes, 0 for an unknown type. */
static size_t
s_field_size (fanhub_opt_type_t type)
{
    switch (type) {
    case FANHUB_OPT_STRING:
    case FANHUB_OPT_FILE:
    case FANHUB_OPT_ENDPOINT: return sizeof (const char *);
    case FANHUB_OPT_SECRET: return sizeof (char *);
    case FANHUB_OPT_INT:
    case FANHUB_OPT_DURATION: return sizeof (int64_t);
    case FANHUB_OPT_UINT:
    case FANHUB_OPT_SIZE: return sizeof (uint64_t);
    case FANHUB_OPT_DOUBLE: return sizeof (double);
    case FANHUB_OPT_BOOL: return sizeof (bool);
    case FANHUB_OPT_ENUM: return sizeof (int);
    case FANHUB_OPT_STRINGS:
    case FANHUB_OPT_ANY:
    case FANHUB_OPT_MAPS:
    case FANHUB_OPT_MAP:
    case FANHUB_OPT_STRING_OR_LIST:
    case FANHUB_OPT_ENDPOINTS: return sizeof (const fanhub_option_t *);
    }
    return 0;
}

static bool
s_ranged (const fanhub_opt_t *opt)
{
    return opt->min != opt->max;
}

/* "options.KEY: expected WHAT, got "TEXT" (WHERE)", or got a list/map. */
static int
s_expected (const s_value_t *v, const char *what)
{
    if (v->text)
        snprintf (v->err, v->errlen, "options.%s: expected %s, got \"%s\" (%s)", v->key, what,
                  v->text, v->where);
    else
        snprintf (v->err, v->errlen, "options.%s: expected %s, got %s (%s)", v->key, what,
                  fanhub_option_kind_name (v->host->option_kind (v->node)), v->where);
    return -1;
}

/* STRING, FILE, INT, UINT, DOUBLE, BOOL, DURATION, SIZE and ENUM: read
   by option_value.c, stored in the field's C type (fanhub/consumer.h). */
static int
s_read_scalar (const s_value_t *v, void *field)
{
    fh_opt_value_t value;
    char what[512];
    fanhub_opt_t opt = *v->opt;
    opt.flags &= ~FH_OPT_SECONDS; /* the hub's own flag, not a plugin's */
    if (!fh_opt_value_read (&opt, v->text, &value, what, sizeof what))
        return s_expected (v, what);
    switch (v->opt->type) {
    case FANHUB_OPT_STRING:
    case FANHUB_OPT_FILE: memcpy (field, &value.text, sizeof value.text); break;
    case FANHUB_OPT_INT:
    case FANHUB_OPT_DURATION: {
        int64_t out = value.integer;
        memcpy (field, &out, sizeof out);
        break;
    }
    case FANHUB_OPT_UINT:
    case FANHUB_OPT_SIZE: {
        uint64_t out = (uint64_t) value.integer;
        memcpy (field, &out, sizeof out);
        break;
    }
    case FANHUB_OPT_DOUBLE: memcpy (field, &value.number, sizeof value.number); break;
    case FANHUB_OPT_BOOL: memcpy (field, &value.flag, sizeof value.flag); break;
    default: memcpy (field, &value.index, sizeof value.index); break; /* ENUM */
    }
    return 0;
}

/* STRINGS and MAPS: a list of scalars, or of maps. */
static int
s_read_list (const s_value_t *v, void *field)
{
    const fanhub_host_t *host = v->host;
    bool maps = v->opt->type == FANHUB_OPT_MAPS;
    if (host->option_kind (v->node) != FANHUB_OPTION_LIST)
        return s_expected (v, maps ? "a list of maps" : "a list of strings");
    fanhub_option_kind_t want = maps ? FANHUB_OPTION_MAP : FANHUB_OPTION_SCALAR;
    for (size_t i = 0; i < host->option_count (v->node); i++) {
        const fanhub_option_t *item = host->option_at (v->node, i, NULL);
        if (host->option_kind (item) != want) {
            snprintf (v->err, v->errlen, "options.%s[%zu]: expected %s, got %s (%s)", v->key, i,
                      maps ? "a map" : "a string",
                      fanhub_option_kind_name (host->option_kind (item)),
                      host->option_where (item));
            return -1;
        }
    }
    memcpy (field, &v->node, sizeof v->node);
    return 0;
}

/* An endpoint's text, checked as the configuration checks bus endpoints;
   index is its place in a list, or -1. */
static int
s_check_endpoint (const s_value_t *v, const char *text, long index, const char *where)
{
    const char *why = fh_endpoint_check (text, (v->opt->flags & FANHUB_OPT_BIND) != 0);
    if (!why)
        return 0;
    char at[32] = "";
    if (index >= 0)
        snprintf (at, sizeof at, "[%ld]", index);
    snprintf (v->err, v->errlen, "options.%s%s: expected a ZeroMQ endpoint, got \"%s\": %s (%s)",
              v->key, at, text, why, where);
    return -1;
}

static int
s_read_endpoint (const s_value_t *v, void *field)
{
    if (!v->text)
        return s_expected (v, "an endpoint such as tcp://127.0.0.1:9941");
    if (s_check_endpoint (v, v->text, -1, v->where) != 0)
        return -1;
    memcpy (field, &v->text, sizeof v->text);
    return 0;
}

/* STRING_OR_LIST and ENDPOINTS: a scalar, or a list of scalars that is
   not empty. */
static int
s_read_items (const s_value_t *v, void *field)
{
    const fanhub_host_t *host = v->host;
    bool endpoints = v->opt->type == FANHUB_OPT_ENDPOINTS;
    fanhub_option_kind_t kind = host->option_kind (v->node);
    if (kind != FANHUB_OPTION_SCALAR && kind != FANHUB_OPTION_LIST)
        return s_expected (v, endpoints ? "an endpoint or a list of endpoints"
                                        : "a string or a list of strings");
    if (kind == FANHUB_OPTION_LIST && host->option_count (v->node) == 0) {
        snprintf (v->err, v->errlen, "options.%s: expected at least one %s, got an empty list (%s)",
                  v->key, endpoints ? "endpoint" : "string", v->where);
        return -1;
    }
    bool list = kind == FANHUB_OPTION_LIST;
    for (size_t i = 0; i < fanhub_option_items (host, v->node); i++) {
        const fanhub_option_t *item = list ? host->option_at (v->node, i, NULL) : v->node;
        const char *text = host->option_scalar (item);
        if (!text) {
            snprintf (v->err, v->errlen, "options.%s[%zu]: expected %s, got %s (%s)", v->key, i,
                      endpoints ? "an endpoint" : "a string",
                      fanhub_option_kind_name (host->option_kind (item)),
                      host->option_where (item));
            return -1;
        }
        if (endpoints
            && s_check_endpoint (v, text, list ? (long) i : -1, host->option_where (item)) != 0)
            return -1;
    }
    memcpy (field, &v->node, sizeof v->node);
    return 0;
}

/* SECRET: read through fanhub_secret_read, so a file open to others or
   an unset variable is refused here, before init. */
static int
s_read_secret (const s_value_t *v, void *field)
{
    if (!v->text)
        return s_expected (v, v->env ? "an environment variable name" : "a file name");
    if (!*v->text) {
        snprintf (v->err, v->errlen, "options.%s: must not be empty (%s)", v->key, v->where);
        return -1;
    }
    char why[512];
    char *secret
        = fanhub_secret_read (v->env ? NULL : v->text, v->env ? v->text : NULL, why, sizeof why);
    if (!secret) {
        snprintf (v->err, v->errlen, "options.%s: %s (%s)", v->key, why, v->where);
        return -1;
    }
    memcpy (field, &secret, sizeof secret);
    return 0;
}

static const char *s_sub (const fanhub_opt_t *table, const fanhub_opt_t *o);
static const fanhub_opt_t *s_parent (const fanhub_opt_t *table, const fanhub_opt_t *o);

/* MAP: a map; one with entries of its own is named with their keys. */
static int
s_read_map_value (const s_value_t *v, void *field)
{
    if (v->host->option_kind (v->node) == FANHUB_OPTION_MAP) {
        memcpy (field, &v->node, sizeof v->node);
        return 0;
    }
    char what[256] = "a map";
    size_t len = strlen (what);
    for (const fanhub_opt_t *o = v->table; o->name && len + 2 < sizeof what; o++)
        if (s_parent (v->table, o) == v->opt)
            len += (size_t) snprintf (what + len, sizeof what - len, "%s%s", len == 5 ? " {" : ", ",
                                      s_sub (v->table, o));
    if (len > 5 && len + 1 < sizeof what)
        snprintf (what + len, sizeof what - len, "}");
    return s_expected (v, what);
}

static int
s_read_value (const s_value_t *v, void *field)
{
    if (fh_opt_value_is_scalar (v->opt->type))
        return s_read_scalar (v, field);
    switch (v->opt->type) {
    case FANHUB_OPT_STRINGS:
    case FANHUB_OPT_MAPS: return s_read_list (v, field);
    case FANHUB_OPT_ANY: memcpy (field, &v->node, sizeof v->node); return 0;
    case FANHUB_OPT_MAP: return s_read_map_value (v, field);
    case FANHUB_OPT_STRING_OR_LIST:
    case FANHUB_OPT_ENDPOINTS: return s_read_items (v, field);
    case FANHUB_OPT_ENDPOINT: return s_read_endpoint (v, field);
    case FANHUB_OPT_SECRET: return s_read_secret (v, field);
    default: return -1; /* the scalars above; an unknown type: s_check_table */
    }
}

/* One read: the table, the plugin's struct and where a message goes. */
typedef struct {
    const fanhub_host_t *host;
    const char *plugin;
    const fanhub_opt_t *table;
    char *fields;
    char *err;
    size_t errlen;
} s_reader_t;

/* The MAP entry that an entry named "MAP.SUB" belongs to, or NULL: a
   name with a dot whose head names no MAP entry is a key of its own. */
static const fanhub_opt_t *
s_parent (const fanhub_opt_t *table, const fanhub_opt_t *o)
{
    const char *dot = strrchr (o->name, '.');
    if (!dot)
        return NULL;
    size_t len = (size_t) (dot - o->name);
    for (const fanhub_opt_t *p = table; p->name; p++)
        if (p->type == FANHUB_OPT_MAP && strlen (p->name) == len
            && strncmp (p->name, o->name, len) == 0)
            return p;
    return NULL;
}

/* The key of an entry within its map: "ca_file" of "tls.ca_file". */
static const char *
s_sub (const fanhub_opt_t *table, const fanhub_opt_t *o)
{
    return s_parent (table, o) ? strrchr (o->name, '.') + 1 : o->name;
}

static bool
s_has_children (const fanhub_opt_t *table, const fanhub_opt_t *map)
{
    for (const fanhub_opt_t *o = table; o->name; o++)
        if (s_parent (table, o) == map)
            return true;
    return false;
}

/* The entry of parent's map (NULL: the options) that key names, and for
   a SECRET whether it came as KEY_env. */
static const fanhub_opt_t *
s_find (const fanhub_opt_t *table, const fanhub_opt_t *parent, const char *key, bool *env)
{
    for (const fanhub_opt_t *o = table; o->name; o++) {
        if (s_parent (table, o) != parent)
            continue;
        const char *sub = s_sub (table, o);
        size_t len = strlen (sub);
        if (o->type != FANHUB_OPT_SECRET && strcmp (sub, key) == 0)
            return o;
        if (o->type == FANHUB_OPT_SECRET && strncmp (sub, key, len) == 0
            && (strcmp (key + len, "_file") == 0 || strcmp (key + len, "_env") == 0)) {
            *env = key[len + 1] == 'e';
            return o;
        }
    }
    return NULL;
}

/* The keys an entry takes, as a message names them ("a", "k_file" SEP
   "k_env"). */
static int
s_keys_text (const fanhub_opt_t *table, const fanhub_opt_t *o, const char *sep, char *out,
             size_t size)
{
    const char *sub = s_sub (table, o);
    if (o->type == FANHUB_OPT_SECRET)
        return snprintf (out, size, "%s_file%s%s_env", sub, sep, sub);
    return snprintf (out, size, "%s", sub);
}

/* "options.KEY: unknown option; PLUGIN takes a, b and c (WHERE)"; in a
   map, "options.MAP.KEY: unknown key; MAP takes ...". */
static int
s_unknown (const s_reader_t *r, const fanhub_opt_t *parent, const char *key, const char *where)
{
    char *err = r->err;
    size_t errlen = r->errlen;
    int len = parent
                  ? snprintf (err, errlen, "options.%s.%s: unknown key; %s takes ", parent->name,
                              key, parent->name)
                  : snprintf (err, errlen, "options.%s: unknown option; %s takes ", key, r->plugin);
    size_t count = 0, i = 0;
    for (const fanhub_opt_t *o = r->table; o->name; o++)
        count += s_parent (r->table, o) == parent;
    if (len < 0 || (size_t) len >= errlen)
        return -1; /* a key as long as the buffer: what fits is said */
    if (count == 0)
        len += snprintf (err + len, errlen - (size_t) len, "no options");
    for (const fanhub_opt_t *o = r->table; o->name && (size_t) len < errlen; o++) {
        if (s_parent (r->table, o) != parent)
            continue;
        len += snprintf (err + len, errlen - (size_t) len, "%s",
                         i == 0           ? ""
                         : i + 1 == count ? " and "
                                          : ", ");
        if ((size_t) len < errlen)
            len += s_keys_text (r->table, o, ", ", err + len, errlen - (size_t) len);
        i++;
    }
    if ((size_t) len < errlen)
        snprintf (err + len, errlen - (size_t) len, " (%s)", where);
    return -1;
}

/* The first entry of o's group of alternatives (FANHUB_OPT_ALTERNATIVE). */
static const fanhub_opt_t *
s_group (const fanhub_opt_t *table, const fanhub_opt_t *o)
{
    while (o > table && (o->flags & FANHUB_OPT_ALTERNATIVE))
        o--;
    return o;
}

/* Refuses key i of map when a key before it is of the same group of
   alternatives (or the other half of the same SECRET). */
static int
s_alternatives (const s_reader_t *r, const fanhub_opt_t *parent, const fanhub_option_t *map,
                size_t i, const fanhub_opt_t *o)
{
    const fanhub_host_t *host = r->host;
    for (size_t j = 0; j < i; j++) {
        const char *key = NULL;
        host->option_at (map, j, &key);
        bool env;
        const fanhub_opt_t *other = key ? s_find (r->table, parent, key, &env) : NULL;
        if (!other || s_group (r->table, other) != s_group (r->table, o))
            continue;
        const char *later = NULL;
        const fanhub_option_t *node = host->option_at (map, i, &later);
        char names[256] = "";
        size_t len = 0;
        const fanhub_opt_t *first = s_group (r->table, o);
        for (const fanhub_opt_t *g = first; g->name && len < sizeof names; g++) {
            if (g != first && !(g->flags & FANHUB_OPT_ALTERNATIVE))
                break;
            if (g != first)
                len += (size_t) snprintf (names + len, sizeof names - len, " or ");
            if (len < sizeof names)
                len += (size_t) s_keys_text (r->table, g, " or ", names + len, sizeof names - len);
        }
        snprintf (r->err, r->errlen, "options.%s%s%s: give %s, not both (%s)",
                  parent ? parent->name : "", parent ? "." : "", later ? later : "?", names,
                  host->option_where (node));
        return -1;
    }
    return 0;
}

static int s_read_map (const s_reader_t *r, const fanhub_opt_t *parent, const fanhub_option_t *map);

/* The default of each entry of parent's map that map (NULL when the map
   is not given) does not name; a REQUIRED one missing is refused, unless
   the map itself is absent. */
static int
s_defaults (const s_reader_t *r, const fanhub_opt_t *parent, const fanhub_option_t *map)
{
    const fanhub_host_t *host = r->host;
    const char *where = map ? host->option_where (map) : "?";
    for (const fanhub_opt_t *o = r->table; o->name; o++) {
        if (s_parent (r->table, o) != parent)
            continue;
        bool given = false;
        for (size_t i = 0; map && i < host->option_count (map) && !given; i++) {
            const char *key = NULL;
            host->option_at (map, i, &key);
            bool env;
            given = key && s_find (r->table, parent, key, &env) == o;
        }
        if (given)
            continue;
        if ((o->flags & FANHUB_OPT_REQUIRED) && (map || !parent)) {
            char keys[128];
            s_keys_text (r->table, o, " or ", keys, sizeof keys);
            snprintf (r->err, r->errlen, "options.%s%s%s: missing: %s (%s)",
                      parent ? parent->name : "", parent ? "." : "", keys,
                      o->help ? o->help : "required", where);
            return -1;
        }
        s_value_t v = {host,   o,         NULL,    o->def, "the plugin's default",
                       r->err, r->errlen, o->name, false,  r->table};
        if (o->def && s_read_value (&v, r->fields + o->offset) != 0)
            return -1;
        if (o->type == FANHUB_OPT_MAP && s_read_map (r, o, NULL) != 0)
            return -1;
    }
    return 0;
}

/* Reads map (NULL: not given) against the entries of parent (NULL: the
   options themselves). */
static int
s_read_map (const s_reader_t *r, const fanhub_opt_t *parent, const fanhub_option_t *map)
{
    const fanhub_host_t *host = r->host;
    size_t count = map ? host->option_count (map) : 0;
    for (size_t i = 0; i < count; i++) {
        const char *key = NULL;
        const fanhub_option_t *node = host->option_at (map, i, &key);
        bool env = false;
        const fanhub_opt_t *opt = s_find (r->table, parent, key ? key : "", &env);
        if (!opt)
            return s_unknown (r, parent, key ? key : "?", host->option_where (node));
        if (s_alternatives (r, parent, map, i, opt) != 0)
            return -1;
        char name[256];
        snprintf (name, sizeof name, "%s%s%s", parent ? parent->name : "", parent ? "." : "", key);
        s_value_t v = {host,
                       opt,
                       node,
                       host->option_scalar (node),
                       host->option_where (node),
                       r->err,
                       r->errlen,
                       name,
                       env,
                       r->table};
        if (s_read_value (&v, r->fields + opt->offset) != 0)
            return -1;
        if (opt->type == FANHUB_OPT_MAP && s_has_children (r->table, opt)
            && s_read_map (r, opt, node) != 0)
            return -1;
    }
    return s_defaults (r, parent, map);
}

/* A table entry whose field does not fit the plugin's struct, of an
   unknown type or with a default that is not of its type: the plugin's
   bug, said as such. */
static int
s_check_table (const char *plugin, const fanhub_opt_t *table, size_t values_size, char *err,
               size_t errlen)
{
    for (const fanhub_opt_t *o = table; o && o->name; o++) {
        size_t size = s_field_size (o->type);
        /* A node or a secret has no text default. */
        bool textual = o->type <= FANHUB_OPT_ENUM || o->type == FANHUB_OPT_ENDPOINT;
        if (size == 0 || o->offset > values_size || values_size - o->offset < size
            || (o->def && !textual)) {
            snprintf (err, errlen,
                      "plugin %s: its option table is wrong at %s (type %d, "
                      "offset %zu of %zu bytes)",
                      plugin, o->name, (int) o->type, o->offset, values_size);
            return -1;
        }
    }
    return 0;
}

/* Wipes and frees the secrets read into fields (and NULLs them). */
static void
s_free_secrets (const fanhub_opt_t *table, char *fields)
{
    for (const fanhub_opt_t *o = table; o && o->name; o++) {
        if (o->type != FANHUB_OPT_SECRET)
            continue;
        char *secret;
        memcpy (&secret, fields + o->offset, sizeof secret);
        if (secret) {
            memset (secret, 0, strlen (secret));
            free (secret);
        }
        secret = NULL;
        memcpy (fields + o->offset, &secret, sizeof secret);
    }
}

int
fh_option_table_read (const fanhub_host_t *host, const char *plugin, const fanhub_opt_t *table,
                      const fanhub_option_t *options, void *values, size_t values_size, char *err,
                      size_t errlen)
{
    static const fanhub_opt_t none[] = {FANHUB_OPT_END};
    table = table ? table : none;
    if (s_check_table (plugin, table, values_size, err, errlen) != 0)
        return -1;
    char *fields = values;
    static char *const no_secret = NULL;
    for (const fanhub_opt_t *o = table; o->name; o++)
        if (o->type == FANHUB_OPT_SECRET)
            memcpy (fields + o->offset, &no_secret, sizeof no_secret);
    s_reader_t r = {host, plugin, table, fields, err, errlen};
    if (s_read_map (&r, NULL, options) != 0) {
        s_free_secrets (table, fields);
        return -1;
    }
    return 0;
}

/* The range or values column of a row. */
static void
s_range_text (const fanhub_opt_t *o, char *out, size_t size)
{
    out[0] = '\0';
    if (o->type == FANHUB_OPT_ENUM) {
        size_t len = 0;
        for (size_t i = 0; o->values && o->values[i] && len < size; i++)
            len += (size_t) snprintf (out + len, size - len, "%s%s", i ? "|" : "", o->values[i]);
    }
    else if (s_ranged (o))
        snprintf (out, size, o->type == FANHUB_OPT_DOUBLE ? "%g..%g" : "%.0f..%.0f", o->min,
                  o->max);
}

void
fh_option_table_print (FILE *out, const fanhub_opt_t *table)
{
    if (!table || !table->name) {
        fprintf (out, "(takes no options)\n");
        return;
    }
    fprintf (out, "%-20s %-9s %-10s %-22s %s\n", "OPTION", "TYPE", "DEFAULT", "RANGE",
             "DESCRIPTION");
    for (const fanhub_opt_t *o = table; o->name; o++) {
        char range[256];
        s_range_text (o, range, sizeof range);
        const char *def = o->flags & FANHUB_OPT_REQUIRED ? "(required)" : o->def ? o->def : "-";
        char name[128];
        snprintf (name, sizeof name, "%s%s", o->name,
                  o->type == FANHUB_OPT_SECRET ? "_file|_env" : "");
        fprintf (out, "%-20s %-9s %-10s %-22s %s\n", name, fh_option_type_name (o->type), def,
                 range[0] ? range : "-", o->help ? o->help : "");
    }
}

int
fh_option_table_check (const fanhub_host_t *host, const char *plugin, const fanhub_opt_t *table,
                       const fanhub_option_t *options, char *err, size_t errlen)
{
    /* The plugin's struct ends no sooner than its last field. */
    size_t extent = 1;
    for (const fanhub_opt_t *o = table; o->name; o++) {
        size_t end = o->offset + s_field_size (o->type);
        extent = end > extent ? end : extent;
    }
    void *scratch = calloc (1, extent);
    if (!scratch) {
        snprintf (err, errlen, "out of memory");
        return -1;
    }
    int rc = fh_option_table_read (host, plugin, table, options, scratch, extent, err, errlen);
    s_free_secrets (table, scratch);
    free (scratch);
    return rc;
}
