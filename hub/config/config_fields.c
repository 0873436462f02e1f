/*  config_fields - the keys of the configuration and the walker of a
    section (a table of fields, config_internal.h).

    A typed key (a number, a duration, a size, a boolean, a word) is read
    by option_value.c, the reader of plugin options, so both say "expected
    WHAT, got GOT" alike; here it is only stored in its C type. The hooks
    (names, endpoints, topics, keys, ...) check one value each and store
    it at the field's address in the struct being filled; the type each
    stores is listed in config_internal.h, and config_reload.c compares
    by it.
*/
#include "config_internal.h"

#include "cidr.h"
#include "source_amqp.h"
#include "value.h"

#include <assert.h>
#include <fanhub/sdk_curve.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* [A-Za-z0-9_.-]{1,64}, not "." or "..": fh_config_name_valid but for
   the leading dot. */
static bool
s_name_valid (const char *text)
{
    size_t len = strlen (text);
    if (len < 1 || len > FH_CFG_NAME_MAX)
        return false;
    if (strcmp (text, ".") == 0 || strcmp (text, "..") == 0)
        return false;
    return strspn (text, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                         "0123456789_.-")
           == len;
}

bool
fh_config_hub_name_valid (const char *text)
{
    return s_name_valid (text);
}

bool
fh_config_name_valid (const char *text)
{
    /* A consumer's name is a directory under state_dir: not hidden. */
    return s_name_valid (text) && text[0] != '.';
}

int
fh_cfg_strlist_add (fh_strlist_t *list, const char *text)
{
    char *copy = strdup (text);
    char **items = copy ? realloc (list->items, (list->count + 1) * sizeof *items) : NULL;
    if (!items) {
        free (copy);
        return -1;
    }
    list->items = items;
    list->items[list->count++] = copy;
    return 0;
}

void
fh_cfg_strlist_clear (fh_strlist_t *list)
{
    for (size_t i = 0; i < list->count; i++)
        free (list->items[i]);
    free (list->items);
    list->items = NULL;
    list->count = 0;
}

bool
fh_cfg_strlist_has (const fh_strlist_t *list, const char *text)
{
    for (size_t i = 0; i < list->count; i++)
        if (strcmp (list->items[i], text) == 0)
            return true;
    return false;
}

/* ------------------------------------------------------------------ */
/* Field parsers                                                        */

/* A copy of text into the char * at target, replacing what was there. */
static int
s_store (fh_yaml_t *ctx, yaml_node_t *node, void *target, const char *text)
{
    char **slot = target;
    free (*slot);
    *slot = strdup (text);
    return *slot ? 0 : fh_yaml_oom (ctx, node->start_mark);
}

/* The place of a typed key's value, as the configuration keeps it
   (config_internal.h), and its size; 0 for no typed key. */
static size_t
s_typed_size (const fh_cfg_field_t *field)
{
    switch (field->opt.type) {
    case FANHUB_OPT_INT:
    case FANHUB_OPT_ENUM: return sizeof (int);
    case FANHUB_OPT_UINT:
    case FANHUB_OPT_SIZE: return sizeof (size_t);
    case FANHUB_OPT_DURATION: return sizeof (int64_t);
    case FANHUB_OPT_DOUBLE: return sizeof (double);
    case FANHUB_OPT_BOOL: return sizeof (bool);
    default: return 0;
    }
}

int
fh_cfg_parse_typed (fh_yaml_t *ctx, yaml_node_t *node, void *target, const fh_cfg_field_t *field)
{
    /* A scalar with a NUL byte in it is no scalar a key takes. */
    const char *text = node->type == YAML_SCALAR_NODE && !fh_yaml_is_null (node)
                               && strlen ((const char *) node->data.scalar.value)
                                      == node->data.scalar.length
                           ? (const char *) node->data.scalar.value
                           : NULL;
    fh_opt_value_t value;
    char what[512], got[FH_YAML_GOT_SIZE];
    if (!fh_opt_value_read (&field->opt, text, &value, what, sizeof what))
        return fh_yaml_error (ctx, node->start_mark, "expected %s, got %s", what,
                              fh_yaml_got (node, got, sizeof got));
    switch (field->opt.type) {
    case FANHUB_OPT_STRING:
    case FANHUB_OPT_FILE: return s_store (ctx, node, target, value.text);
    case FANHUB_OPT_INT: *(int *) target = (int) value.integer; break;
    case FANHUB_OPT_ENUM: *(int *) target = value.index; break;
    case FANHUB_OPT_UINT:
    case FANHUB_OPT_SIZE: *(size_t *) target = (size_t) value.integer; break;
    case FANHUB_OPT_DURATION: *(int64_t *) target = value.integer; break;
    case FANHUB_OPT_DOUBLE: *(double *) target = value.number; break;
    default: *(bool *) target = value.flag; break; /* BOOL */
    }
    return 0;
}

bool
fh_cfg_typed_equal (const fh_cfg_field_t *field, const void *a, const void *b)
{
    if (field->opt.type == FANHUB_OPT_STRING || field->opt.type == FANHUB_OPT_FILE) {
        const char *x = *(char *const *) a, *y = *(char *const *) b;
        return x == y || (x && y && strcmp (x, y) == 0);
    }
    size_t size = s_typed_size (field);
    assert (size > 0);
    return memcmp (a, b, size) == 0;
}

int
fh_cfg_parse_name (fh_yaml_t *ctx, yaml_node_t *node, void *target, const fh_cfg_field_t *field)
{
    (void) field;
    char buf[FH_YAML_GOT_SIZE];
    static const char what[] = "a name of 1 to 64 characters from A-Z a-z "
                               "0-9 _ . -, not . or ..";
    const char *text = fh_yaml_text (ctx, node, what);
    if (!text)
        return -1;
    if (!s_name_valid (text))
        return fh_yaml_error (ctx, node->start_mark, "expected %s, got %s", what,
                              fh_yaml_got (node, buf, sizeof buf));
    return s_store (ctx, node, target, text);
}

/* A consumer's name: a name, not "." or ".." or hidden: it names the
   consumer's directory in state_dir (lock, spool, dead letters). */
int
fh_cfg_parse_consumer_name (fh_yaml_t *ctx, yaml_node_t *node, void *target,
                            const fh_cfg_field_t *field)
{
    /* The leading dot first: its reason says more than the name rule. */
    const char *text = node->type == YAML_SCALAR_NODE ? (const char *) node->data.scalar.value
                                                      : NULL;
    if (text && text[0] == '.')
        return fh_yaml_error (ctx, node->start_mark,
                              "'%s': a consumer name may not start with '.' (it names the "
                              "consumer's directory in state_dir)",
                              text);
    return fh_cfg_parse_name (ctx, node, target, field);
}

int
fh_cfg_parse_plugin (fh_yaml_t *ctx, yaml_node_t *node, void *target, const fh_cfg_field_t *field)
{
    (void) field;
    static const char what[] = "a plugin name or path";
    const char *text = fh_yaml_text (ctx, node, what);
    if (!text)
        return -1;
    if (!*text)
        return fh_yaml_error (ctx, node->start_mark, "expected %s, got ''", what);
    return s_store (ctx, node, target, text);
}

int
fh_cfg_parse_control (fh_yaml_t *ctx, yaml_node_t *node, void *target, const fh_cfg_field_t *field)
{
    (void) field;
    const char *text = fh_yaml_text (ctx, node,
                                     "an endpoint (ipc://PATH or "
                                     "tcp://127.0.0.1:PORT)");
    if (!text)
        return -1;
    const char *why = fh_cfg_control_check (text);
    if (why)
        return fh_yaml_error (ctx, node->start_mark, "invalid control endpoint '%s': %s", text,
                              why);
    return s_store (ctx, node, target, text);
}

/* HOST:PORT to listen on (HTTP): HOST a name, an IPv4 address or an IPv6
   one in brackets; PORT 1..65535, or 0: one the kernel chooses (logged). */
int
fh_cfg_parse_listen (fh_yaml_t *ctx, yaml_node_t *node, void *target, const fh_cfg_field_t *field)
{
    (void) field;
    static const char what[] = "HOST:PORT, e.g. 127.0.0.1:9464";
    const char *text = fh_yaml_text (ctx, node, what);
    if (!text)
        return -1;
    const char *colon = strrchr (text, ':');
    long long port = 0;
    bool ok = colon && colon > text && fh_value_integer (colon + 1, true, &port) && port >= 0
              && port <= 65535 && strcspn (text, " \t/") == strlen (text);
    if (ok && text[0] == '[')
        ok = colon[-1] == ']' && colon - text > 2;
    if (!ok)
        return fh_yaml_error (ctx, node->start_mark, "expected %s, got '%s'", what, text);
    return s_store (ctx, node, target, text);
}

/* An endpoint the hub binds to publish on (ipc:// or tcp://). */
int
fh_cfg_parse_bind_endpoint (fh_yaml_t *ctx, yaml_node_t *node, void *target,
                            const fh_cfg_field_t *field)
{
    (void) field;
    const char *text = fh_yaml_text (ctx, node, "an endpoint to bind");
    if (!text)
        return -1;
    const char *why = fh_endpoint_check (text, true);
    if (why)
        return fh_yaml_error (ctx, node->start_mark, "invalid endpoint '%s': %s", text, why);
    return s_store (ctx, node, target, text);
}

/* A share from 0 to 1 with at most three decimals, stored in permille. */
int
fh_cfg_parse_permille (fh_yaml_t *ctx, yaml_node_t *node, void *target, const fh_cfg_field_t *field)
{
    (void) field;
    const char *text = fh_yaml_text (ctx, node, "a number from 0 to 1");
    if (!text)
        return -1;
    long long permille = -1;
    if (strcmp (text, "1") == 0 || strcmp (text, "1.0") == 0)
        permille = 1000;
    else if (text[0] == '0' && (text[1] == '\0' || text[1] == '.')) {
        size_t digits = text[1] ? strspn (text + 2, "0123456789") : 0;
        if (!text[1])
            permille = 0;
        else if (digits >= 1 && digits <= 3 && text[2 + digits] == '\0') {
            permille = 0;
            for (size_t i = 0, scale = 100; i < digits; i++, scale /= 10)
                permille += (text[2 + i] - '0') * (long long) scale;
        }
    }
    if (permille < 0)
        return fh_yaml_error (ctx, node->start_mark,
                              "expected a number from 0 to 1 (at most 3 decimals), got '%s'", text);
    *(int64_t *) target = permille;
    return 0;
}

/* order_by: `topic`, or a map of one entry: topic_segment: K, frame: K or
   json: /pointer. Stored as the string form "KIND:ARG". */
int
fh_cfg_parse_order_by (fh_yaml_t *ctx, yaml_node_t *node, void *target, const fh_cfg_field_t *field)
{
    (void) field;
    char spec[1024];
    if (node->type == YAML_SCALAR_NODE && !fh_yaml_is_null (node)
        && strcmp ((const char *) node->data.scalar.value, "topic") == 0)
        snprintf (spec, sizeof spec, "topic");
    else if (node->type == YAML_MAPPING_NODE
             && node->data.mapping.pairs.top - node->data.mapping.pairs.start == 1) {
        yaml_node_pair_t *pair = node->data.mapping.pairs.start;
        const char *kind = (const char *) fh_yaml_node (ctx, pair->key)->data.scalar.value;
        yaml_node_t *value = fh_yaml_node (ctx, pair->value);
        const char *arg = value->type == YAML_SCALAR_NODE && !fh_yaml_is_null (value)
                              ? (const char *) value->data.scalar.value
                              : NULL;
        long long k;
        if ((strcmp (kind, "topic_segment") == 0 || strcmp (kind, "frame") == 0) && arg
            && fh_value_integer (arg, true, &k) && k >= 0 && k <= 1023)
            snprintf (spec, sizeof spec, "%s:%lld", kind, k);
        else if (strcmp (kind, "json") == 0 && arg && (arg[0] == '/' || arg[0] == '\0')
                 && strlen (arg) < sizeof spec - 8)
            snprintf (spec, sizeof spec, "json:%s", arg);
        else
            return fh_yaml_error (ctx, value->start_mark,
                                  "expected topic_segment: K or frame: K (K from 0 to 1023), "
                                  "or json: /pointer (RFC 6901), got %s: %s",
                                  kind, arg ? arg : "a non-scalar");
    }
    else {
        char buf[FH_YAML_GOT_SIZE];
        return fh_yaml_error (ctx, node->start_mark,
                              "expected topic, {topic_segment: K}, {frame: K} or "
                              "{json: /pointer}, got %s",
                              fh_yaml_got (node, buf, sizeof buf));
    }
    return s_store (ctx, node, target, spec);
}

/* One endpoint of bus.connect or bus.bind; none may appear twice in
   either list. */
static int
s_parse_endpoint (fh_yaml_t *ctx, yaml_node_t *node, fh_strlist_t *list, bool for_bind)
{
    const fh_config_t *cfg = ctx->user;
    const char *text = fh_yaml_text (ctx, node, "an endpoint");
    if (!text)
        return -1;
    const char *why = fh_endpoint_check (text, for_bind);
    if (why)
        return fh_yaml_error (ctx, node->start_mark, "invalid endpoint '%s': %s", text, why);
    if (fh_cfg_strlist_has (&cfg->connect, text) || fh_cfg_strlist_has (&cfg->bind, text))
        return fh_yaml_error (ctx, node->start_mark, "duplicate endpoint '%s' (already in bus.%s)",
                              text, fh_cfg_strlist_has (&cfg->connect, text) ? "connect" : "bind");
    if (fh_cfg_strlist_add (list, text))
        return fh_yaml_oom (ctx, node->start_mark);
    return 0;
}

/* An endpoint, or a list of them. */
int
fh_cfg_parse_endpoints (fh_yaml_t *ctx, yaml_node_t *node, void *target,
                        const fh_cfg_field_t *field)
{
    fh_strlist_t *list = target;
    bool for_bind = field->opt.flags & FANHUB_OPT_BIND;
    if (node->type == YAML_SCALAR_NODE && !fh_yaml_is_null (node))
        return s_parse_endpoint (ctx, node, list, for_bind);
    if (node->type != YAML_SEQUENCE_NODE) {
        char buf[FH_YAML_GOT_SIZE];
        return fh_yaml_error (ctx, node->start_mark,
                              "expected an endpoint or a list of endpoints, got %s",
                              fh_yaml_got (node, buf, sizeof buf));
    }
    for (size_t i = 0; i < fh_yaml_count (node); i++) {
        size_t mark = fh_yaml_path_index (ctx, i);
        int rc = s_parse_endpoint (ctx, fh_yaml_node (ctx, node->data.sequence.items.start[i]),
                                   list, for_bind);
        if (rc)
            return rc;
        fh_yaml_path_pop (ctx, mark);
    }
    return 0;
}

/* Adds "FILE:LINE:COL: KEYPATH: message" to the configuration's warnings
   (ctx->user's): legal but likely wrong. 0, or -1 out of memory. */
int
fh_cfg_warn (fh_yaml_t *ctx, yaml_mark_t mark, const char *fmt, ...)
{
    fh_config_t *cfg = ctx->user;
    char line[1024];
    va_list args;
    va_start (args, fmt);
    fh_yaml_vformat (ctx, line, sizeof line, mark, fmt, args);
    va_end (args);
    return fh_cfg_strlist_add (&cfg->warnings, line) ? fh_yaml_oom (ctx, mark) : 0;
}

/* What a regular expression has and a topic never does: a pattern with
   it is legal but most likely never matches. */
static int
s_check_pattern (fh_yaml_t *ctx, yaml_node_t *node, const char *text)
{
    size_t at = strcspn (text, "^$\\[]()+ \t\n\r\v\f");
    if (!text[at])
        return 0;
    bool space = strchr (" \t\n\r\v\f", text[at]) != NULL;
    char what[8];
    snprintf (what, sizeof what, "'%c'", text[at]);
    return fh_cfg_warn (ctx, node->start_mark,
                        "'%s' has %s: topic patterns are not regular expressions (a prefix, "
                        "'*' for any run of characters, '=' for an exact topic); it will likely "
                        "never match",
                        text, space ? "whitespace" : what);
}

static int
s_parse_topic (fh_yaml_t *ctx, yaml_node_t *node, fh_strlist_t *topics)
{
    const char *text = fh_yaml_text (ctx, node, "a topic pattern");
    if (!text)
        return -1;
    if (!*text)
        return fh_yaml_error (ctx, node->start_mark,
                              "expected a topic pattern, got '' (omit topics: to "
                              "receive every message)");
    if (strcmp (text, "=") == 0)
        return fh_yaml_error (ctx, node->start_mark,
                              "expected a topic after '=' (an exact match, e.g. "
                              "=org.fedoraproject.prod.git.receive), got '='");
    if (fh_cfg_strlist_add (topics, text))
        return fh_yaml_oom (ctx, node->start_mark);
    return s_check_pattern (ctx, node, text);
}

/* A list of topic patterns (or one pattern); never empty. */
int
fh_cfg_parse_topics (fh_yaml_t *ctx, yaml_node_t *node, void *target, const fh_cfg_field_t *field)
{
    (void) field;
    fh_strlist_t *topics = target;
    if (node->type == YAML_SCALAR_NODE && !fh_yaml_is_null (node))
        return s_parse_topic (ctx, node, topics);
    if (node->type != YAML_SEQUENCE_NODE || fh_yaml_count (node) == 0) {
        char buf[FH_YAML_GOT_SIZE];
        return fh_yaml_error (ctx, node->start_mark,
                              "expected a list of topic patterns, got %s (omit "
                              "topics: to receive every message)",
                              fh_yaml_got (node, buf, sizeof buf));
    }
    for (size_t i = 0; i < fh_yaml_count (node); i++) {
        size_t mark = fh_yaml_path_index (ctx, i);
        if (s_parse_topic (ctx, fh_yaml_node (ctx, node->data.sequence.items.start[i]), topics))
            return -1;
        fh_yaml_path_pop (ctx, mark);
    }
    return 0;
}
/* Any YAML map, kept as an option tree for the plugin; nothing (`options:`
   with no value) is an empty map. */
int
fh_cfg_parse_options (fh_yaml_t *ctx, yaml_node_t *node, void *target, const fh_cfg_field_t *field)
{
    (void) field;
    fanhub_option_t **slot = target;
    if (node->type != YAML_MAPPING_NODE && !fh_yaml_is_null (node)) {
        char buf[FH_YAML_GOT_SIZE];
        return fh_yaml_error (ctx, node->start_mark, "expected a map of plugin options, got %s",
                              fh_yaml_got (node, buf, sizeof buf));
    }
    fh_option_destroy (slot);
    *slot = fh_yaml_option_tree (ctx, node);
    return *slot ? 0 : -1;
}

/* shard: {index: I, count: N}, 0 <= I < N (shard.h). */
int
fh_cfg_parse_shard (fh_yaml_t *ctx, yaml_node_t *node, void *target, const fh_cfg_field_t *field)
{
    (void) field;
    size_t *slot = target; /* index, then count */
    long long value[2] = {-1, -1};
    for (yaml_node_pair_t *pair = node->type == YAML_MAPPING_NODE ? node->data.mapping.pairs.start
                                                                  : NULL;
         pair && pair < node->data.mapping.pairs.top; pair++) {
        yaml_node_t *key = fh_yaml_node (ctx, pair->key), *item = fh_yaml_node (ctx, pair->value);
        const char *name = key->type == YAML_SCALAR_NODE ? (const char *) key->data.scalar.value
                                                         : "";
        int k = strcmp (name, "index") == 0 ? 0 : strcmp (name, "count") == 0 ? 1 : -1;
        if (k < 0 || value[k] >= 0 || item->type != YAML_SCALAR_NODE
            || !fh_value_integer ((const char *) item->data.scalar.value, true, &value[k])
            || value[k] < k || value[k] > 65536)
            return fh_yaml_error (ctx, k < 0 ? key->start_mark : item->start_mark,
                                  "expected {index: I, count: N}, 1 <= N <= 65536, 0 <= I < N");
    }
    if (value[0] < 0 || value[1] < 1 || value[0] >= value[1])
        return fh_yaml_error (ctx, node->start_mark,
                              "expected {index: I, count: N}, 1 <= N <= 65536, 0 <= I < N");
    slot[0] = (size_t) value[0];
    slot[1] = (size_t) value[1];
    return 0;
}

int
fh_cfg_parse_checked_tree (fh_yaml_t *ctx, yaml_node_t *node, void *target,
                           const fh_cfg_field_t *field, const char *keys,
                           fh_cfg_tree_check_fn *check)
{
    if (node->type != YAML_MAPPING_NODE) {
        char buf[FH_YAML_GOT_SIZE];
        return fh_yaml_error (ctx, node->start_mark, "expected a map (%s, ...), got %s", keys,
                              fh_yaml_got (node, buf, sizeof buf));
    }
    if (fh_cfg_parse_options (ctx, node, target, field))
        return -1;
    return check (*(fanhub_option_t **) target, ctx->source, ctx->err, ctx->errlen);
}

static int
s_amqp_check (const fanhub_option_t *tree, const char *source, char *err, size_t errlen)
{
    (void) source; /* the settings' every error names its value's place */
    fh_amqp_settings_t *settings = fh_amqp_settings_new (tree, err, errlen);
    int rc = settings ? 0 : -1;
    fh_amqp_settings_destroy (&settings);
    return rc;
}

/* bus.amqp: kept as an option tree; source_amqp.h reads and checks it. */
int
fh_cfg_parse_amqp (fh_yaml_t *ctx, yaml_node_t *node, void *target, const fh_cfg_field_t *field)
{
    return fh_cfg_parse_checked_tree (ctx, node, target, field, "url:, queue:", s_amqp_check);
}

/* producer: topic, topic_prefix:N (the first N dot-separated segments)
   or json:/pointer (RFC 6901, into the body). */
int
fh_cfg_parse_producer (fh_yaml_t *ctx, yaml_node_t *node, void *target, const fh_cfg_field_t *field)
{
    (void) field;
    static const char what[] = "topic, topic_prefix:N or json:/pointer";
    const char *text = fh_yaml_text (ctx, node, what);
    if (!text)
        return -1;
    long long n = 0;
    bool ok = strcmp (text, "topic") == 0
              || (strncmp (text, "topic_prefix:", 13) == 0 && fh_value_integer (text + 13, true, &n)
                  && n >= 1 && n <= 64)
              || (strncmp (text, "json:", 5) == 0 && (text[5] == '/' || text[5] == '\0'));
    if (!ok)
        return fh_yaml_error (ctx, node->start_mark, "expected %s, got '%s'", what, text);
    return s_store (ctx, node, target, text);
}

/* A CurveZMQ public key, 40 characters of Z85. */
int
fh_cfg_parse_key (fh_yaml_t *ctx, yaml_node_t *node, void *target, const fh_cfg_field_t *field)
{
    (void) field;
    static const char what[] = "a CurveZMQ public key (40 characters of Z85)";
    const char *text = fh_yaml_text (ctx, node, what);
    if (!text)
        return -1;
    if (!fanhub_curve_key_valid (text))
        return fh_yaml_error (ctx, node->start_mark, "expected %s, got a %zu-character value", what,
                              strlen (text));
    return s_store (ctx, node, target, text);
}

/* A list (or one) of keys, or of IP networks: check tells which, and
   returns NULL for a good item, else why it is not (or "" for no more
   than `what`). */
static int
s_parse_list_of (fh_yaml_t *ctx, yaml_node_t *node, fh_strlist_t *list, const char *what,
                 const char *(*check) (const char *) )
{
    if (node->type == YAML_MAPPING_NODE || fh_yaml_is_null (node)
        || (node->type == YAML_SEQUENCE_NODE && fh_yaml_count (node) == 0)) {
        char buf[FH_YAML_GOT_SIZE];
        return fh_yaml_error (ctx, node->start_mark, "expected a list of %s, got %s", what,
                              fh_yaml_got (node, buf, sizeof buf));
    }
    return fh_cfg_parse_items (ctx, node, list, what, check);
}

int
fh_cfg_parse_items (fh_yaml_t *ctx, yaml_node_t *node, fh_strlist_t *list, const char *what,
                    const char *(*check) (const char *) )
{
    size_t count = node->type == YAML_SEQUENCE_NODE ? fh_yaml_count (node) : 1;
    for (size_t i = 0; i < count; i++) {
        yaml_node_t *item = node->type == YAML_SEQUENCE_NODE
                                ? fh_yaml_node (ctx, node->data.sequence.items.start[i])
                                : node;
        size_t mark = node->type == YAML_SEQUENCE_NODE ? fh_yaml_path_index (ctx, i)
                                                       : strlen (ctx->path);
        const char *text = fh_yaml_text (ctx, item, what);
        if (!text)
            return -1;
        const char *why = check (text);
        if (why)
            return fh_yaml_error (ctx, item->start_mark, "expected %s, got '%.*s'%s%s", what,
                                  FH_YAML_GOT_MAX, text, *why ? ": " : "", why);
        if (fh_cfg_strlist_add (list, text))
            return fh_yaml_oom (ctx, item->start_mark);
        fh_yaml_path_pop (ctx, mark);
    }
    return 0;
}

static const char *
s_key_check (const char *text)
{
    return fanhub_curve_key_valid (text) ? NULL : "";
}

int
fh_cfg_parse_keys (fh_yaml_t *ctx, yaml_node_t *node, void *target, const fh_cfg_field_t *field)
{
    (void) field;
    return s_parse_list_of (ctx, node, target, "CurveZMQ public keys (40 characters of Z85)",
                            s_key_check);
}

static const char *
s_network_check (const char *text)
{
    fh_cidr_t net;
    const char *why = NULL;
    return fh_cidr_parse (text, &net, &why) == 0 ? NULL : why;
}

/* bus.allow_ip: addresses and networks (cidr.h). */
int
fh_cfg_parse_addresses (fh_yaml_t *ctx, yaml_node_t *node, void *target,
                        const fh_cfg_field_t *field)
{
    (void) field;
    return s_parse_list_of (ctx, node, target,
                            "IP addresses or networks (192.0.2.7, 10.0.0.0/8, 2001:db8::/32)",
                            s_network_check);
}

/* ------------------------------------------------------------------ */
/* Sections                                                             */

static void
s_known (const fh_cfg_field_t *fields, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (const fh_cfg_field_t *field = fields; field->opt.name && used < len; field++) {
        int n = snprintf (buf + used, len - used, "%s%s", field == fields ? "" : ", ",
                          field->opt.name);
        if (n < 0)
            break;
        used += (size_t) n;
    }
}

/* A map whose keys are the rows of section; fills target. */
int
fh_cfg_parse_map (fh_yaml_t *ctx, yaml_node_t *node, const fh_cfg_section_t *section, void *target)
{
    char known[512];
    s_known (section->fields, known, sizeof known);
    if (node->type != YAML_MAPPING_NODE) {
        char buf[FH_YAML_GOT_SIZE];
        return fh_yaml_error (ctx, node->start_mark, "expected a map (known: %s), got %s", known,
                              fh_yaml_got (node, buf, sizeof buf));
    }
    if (fh_yaml_check_keys (ctx, node))
        return -1;
    for (yaml_node_pair_t *pair = node->data.mapping.pairs.start;
         pair < node->data.mapping.pairs.top; pair++) {
        yaml_node_t *key = fh_yaml_node (ctx, pair->key);
        const char *name = (const char *) key->data.scalar.value;
        const fh_cfg_field_t *field = section->fields;
        while (field->opt.name && strcmp (field->opt.name, name) != 0)
            field++;
        size_t mark = fh_yaml_path_key (ctx, name);
        if (!field->opt.name)
            return fh_yaml_error (ctx, key->start_mark, "unknown key (known: %s)", known);
        fh_cfg_parse_fn *parse = field->parse ? field->parse : fh_cfg_parse_typed;
        if (parse (ctx, fh_yaml_node (ctx, pair->value), (char *) target + field->opt.offset,
                   field))
            return -1;
        fh_yaml_path_pop (ctx, mark);
    }
    for (const fh_cfg_field_t *field = section->fields; field->opt.name; field++)
        if ((field->opt.flags & FANHUB_OPT_REQUIRED)
            && !fh_yaml_map_find (ctx, node, field->opt.name)) {
            fh_yaml_path_key (ctx, field->opt.name);
            return fh_yaml_error (ctx, node->start_mark, "required key is missing");
        }
    return section->finish ? section->finish (ctx, node, target) : 0;
}

int
fh_cfg_parse_section (fh_yaml_t *ctx, yaml_node_t *node, void *target, const fh_cfg_field_t *field)
{
    return fh_cfg_parse_map (ctx, node, field->section, target);
}
