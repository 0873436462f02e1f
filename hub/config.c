/*  config - the hub's configuration, loaded from one YAML file.

    The file is loaded with libyaml's document API (so anchors and aliases
    resolve) and then walked section by section. Each section is a table of
    fields: its key, the parser that checks and stores the value, where in
    the target struct the value goes, and its limits. A section parser
    refuses keys that are not in its table (listing the ones that are),
    duplicate keys and missing required keys, and hands each value to the
    field's parser; a hook then checks what involves several fields. Adding
    a key is adding a row to a table.

    Every error is one line, "FILE:LINE:COL: KEYPATH: message", with the
    1-based line and column of the offending node, and stops the load.
    See config.h.
*/
#include "config.h"

#include "source_amqp.h"

#include "control_path.h"
#include "curve.h"

#include <arpa/inet.h>
#include <assert.h>

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <yaml.h>

#define S_NAME_MAX 64                 /* hub and consumer names */
#define S_QUEUE_CAPACITY_MAX 1073741824
#define S_MAX_FRAMES_MIN 2
#define S_MAX_FRAMES_MAX 1024
#define S_MAX_MESSAGE_BYTES_MAX 2147483648LL /* 1 << 31 */
#define S_SHUTDOWN_TIMEOUT_MAX_S 3600
#define S_OPTION_DEPTH_MAX 64         /* nesting of a consumer's options */
#define S_OPTION_NODES_MAX 100000     /* values of one consumer's options,
                                         aliases expanded */
#define S_FILE_BYTES_MAX (16 * 1024 * 1024) /* a configuration file */
#define S_DEPTH_MAX 128               /* nesting of the whole document (a
                                         consumer's options: S_OPTION_DEPTH_MAX) */
#define S_CONSUMERS_MAX 1024          /* each is a thread or more */
#define S_GOT_MAX 40                  /* bytes of a value quoted in errors */
#define S_GOT_SIZE (S_GOT_MAX + 48)   /* room for s_got's answer */
#define S_IPC_PATH_MAX (sizeof (((struct sockaddr_un *) 0)->sun_path) - 1)

/* The state of one load. */
typedef struct {
    yaml_document_t *doc;
    const char *source;
    char *err;
    size_t errlen;
    fh_config_t *cfg;
    size_t option_nodes;  /* option values built in the whole file (aliases
                             expanded): one cap for all consumers together */
    char path[512];       /* key path of the node being parsed */
} s_ctx_t;

typedef struct s_field s_field_t;
typedef struct s_section s_section_t;

/* Checks node and stores it at target (the field's address). On error
   writes the message to ctx and returns -1. */
typedef int (s_parse_fn) (s_ctx_t *ctx, yaml_node_t *node, void *target,
                          const s_field_t *field);

#define S_FOR_BIND 0x1 /* s_parse_endpoints: bind endpoints */

struct s_field {
    const char *key;
    s_parse_fn *parse;
    size_t offset;              /* of the value in the section's struct */
    bool required;
    long long min, max;         /* s_parse_int, s_parse_size, s_parse_millis */
    int flags;                  /* S_FOR_BIND */
    const s_section_t *section; /* s_parse_section: the subsection */
    const char *const *choices; /* s_parse_enum: the words, NULL-ended */
    /* A reload may change it in a running hub (fh_config_restart_keys).
       Unmarked keys need a restart, or, inside a consumer, a new
       instance of it: a new key is never silently ignored. */
    bool live;
};

struct s_section {
    const s_field_t *fields; /* ended by a row with key NULL */
    /* Optional: checks across fields once every key has been parsed. */
    int (*finish) (s_ctx_t *ctx, yaml_node_t *node, void *target);
};

static int s_error (s_ctx_t *ctx, yaml_mark_t mark, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

/* ------------------------------------------------------------------ */
/* Errors and key paths                                                 */

/* Writes "SOURCE:LINE:COL: PATH: message" to ctx->err as one line. */
static int
s_error (s_ctx_t *ctx, yaml_mark_t mark, const char *fmt, ...)
{
    if (!ctx->err || ctx->errlen == 0)
        return -1;
    int len = snprintf (ctx->err, ctx->errlen, "%s:%zu:%zu: %s%s", ctx->source,
                        mark.line + 1, mark.column + 1, ctx->path,
                        ctx->path[0] ? ": " : "");
    if (len >= 0 && (size_t) len < ctx->errlen) {
        va_list args;
        va_start (args, fmt);
        vsnprintf (ctx->err + len, ctx->errlen - (size_t) len, fmt, args);
        va_end (args);
    }
    /* One line, whatever the file put in its keys and values. */
    for (char *c = ctx->err; *c; c++)
        if ((unsigned char) *c < 0x20 || *c == 0x7f)
            *c = '?';
    return -1;
}

static int
s_oom (s_ctx_t *ctx, yaml_mark_t mark)
{
    return s_error (ctx, mark, "out of memory");
}

/* Appends ".key" (or "key" at the top) to the key path; returns the
   length to restore with s_path_pop. */
static size_t
s_path_key (s_ctx_t *ctx, const char *key)
{
    size_t len = strlen (ctx->path);
    snprintf (ctx->path + len, sizeof ctx->path - len, "%s%s",
              len ? "." : "", key);
    return len;
}

static size_t
s_path_index (s_ctx_t *ctx, size_t index)
{
    size_t len = strlen (ctx->path);
    snprintf (ctx->path + len, sizeof ctx->path - len, "[%zu]", index);
    return len;
}

static void
s_path_pop (s_ctx_t *ctx, size_t len)
{
    ctx->path[len] = '\0';
}

/* ------------------------------------------------------------------ */
/* YAML nodes                                                           */

static yaml_node_t *
s_node (s_ctx_t *ctx, int id)
{
    return yaml_document_get_node (ctx->doc, id);
}

/* A plain empty, "~" or "null" scalar: `key:` with nothing after it. */
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
        return (size_t) (node->data.sequence.items.top
                         - node->data.sequence.items.start);
    if (node->type == YAML_MAPPING_NODE)
        return (size_t) (node->data.mapping.pairs.top
                         - node->data.mapping.pairs.start);
    return 0;
}

/* What the file gave, for "expected X, got Y": "nothing", "a list",
   "a map" or the quoted (and maybe shortened) text of a scalar. */
static const char *
s_got (const yaml_node_t *node, char *buf, size_t len)
{
    if (s_is_null (node)) {
        const char *text = (const char *) node->data.scalar.value;
        if (!*text || *text == '~')
            return "nothing";
        snprintf (buf, len, "null (YAML null; write \"%s\" for the word)",
                  text);
        return buf;
    }
    if (node->type == YAML_SEQUENCE_NODE)
        return s_count (node) ? "a list" : "an empty list";
    if (node->type == YAML_MAPPING_NODE)
        return s_count (node) ? "a map" : "an empty map";
    const char *text = (const char *) node->data.scalar.value;
    size_t size = node->data.scalar.length;
    if (size <= S_GOT_MAX) {
        snprintf (buf, len, "'%s'", text);
        return buf;
    }
    size = S_GOT_MAX;
    while (size > 0 && ((unsigned char) text[size] & 0xc0) == 0x80)
        size--; /* never cut a UTF-8 character */
    snprintf (buf, len, "'%.*s...'", (int) size, text);
    return buf;
}

/* The text of a scalar that is not null and holds no NUL byte; else
   writes "expected WHAT, got ..." and answers NULL. */
static const char *
s_text (s_ctx_t *ctx, yaml_node_t *node, const char *what)
{
    char buf[S_GOT_SIZE];
    if (node->type != YAML_SCALAR_NODE || s_is_null (node)) {
        s_error (ctx, node->start_mark, "expected %s, got %s", what,
                 s_got (node, buf, sizeof buf));
        return NULL;
    }
    const char *text = (const char *) node->data.scalar.value;
    if (strlen (text) != node->data.scalar.length) {
        s_error (ctx, node->start_mark, "expected %s, got a value with a NUL "
                 "character", what);
        return NULL;
    }
    return text;
}

/* The value of key in a map node, or NULL. */
static yaml_node_t *
s_map_find (s_ctx_t *ctx, yaml_node_t *map, const char *key)
{
    if (map->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *pair = map->data.mapping.pairs.start;
         pair < map->data.mapping.pairs.top; pair++) {
        yaml_node_t *k = s_node (ctx, pair->key);
        if (k->type == YAML_SCALAR_NODE
            && strcmp ((const char *) k->data.scalar.value, key) == 0)
            return s_node (ctx, pair->value);
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

/* Checks the keys of a map: each one a non-null scalar without NUL, and
   none twice. Reports the first offence in file order. */
static int
s_check_keys (s_ctx_t *ctx, yaml_node_t *map)
{
    size_t count = s_count (map);
    yaml_node_pair_t *pairs = map->data.mapping.pairs.start;
    for (size_t i = 0; i < count; i++)
        if (!s_text (ctx, s_node (ctx, pairs[i].key), "a key"))
            return -1;
    if (count < 2)
        return 0;

    s_key_ref_t *refs = malloc (count * sizeof *refs);
    if (!refs)
        return s_oom (ctx, map->start_mark);
    for (size_t i = 0; i < count; i++) {
        refs[i].key = (const char *) s_node (ctx, pairs[i].key)->data.scalar.value;
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

    yaml_node_t *key = s_node (ctx, pairs[dup].key);
    yaml_node_t *earlier = s_node (ctx, pairs[first].key);
    size_t mark = s_path_key (ctx, (const char *) key->data.scalar.value);
    s_error (ctx, key->start_mark, "duplicate key (first at line %zu)",
             earlier->start_mark.line + 1);
    s_path_pop (ctx, mark);
    return -1;
}

static char *
s_where (s_ctx_t *ctx, yaml_mark_t mark)
{
    char buf[1024];
    snprintf (buf, sizeof buf, "%s:%zu:%zu", ctx->source, mark.line + 1,
              mark.column + 1);
    return strdup (buf);
}

/* ------------------------------------------------------------------ */
/* Values                                                               */

/* Decimal integer: optional '-', digits, nothing else; no overflow. */
static bool
s_parse_integer (const char *text, long long *value)
{
    bool negative = *text == '-';
    if (negative)
        text++;
    if (!*text)
        return false;
    long long result = 0;
    for (; *text; text++) {
        if (*text < '0' || *text > '9')
            return false;
        int digit = *text - '0';
        if (result > (LLONG_MAX - digit) / 10)
            return false;
        result = result * 10 + digit;
    }
    *value = negative ? -result : result;
    return true;
}

static bool
s_name_valid (const char *text)
{
    size_t len = strlen (text);
    if (len < 1 || len > S_NAME_MAX)
        return false;
    return strspn (text, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                         "0123456789_.-")
           == len;
}

static int
s_strlist_add (fh_strlist_t *list, const char *text)
{
    char *copy = strdup (text);
    char **items = copy ? realloc (list->items,
                                   (list->count + 1) * sizeof *items)
                        : NULL;
    if (!items) {
        free (copy);
        return -1;
    }
    list->items = items;
    list->items[list->count++] = copy;
    return 0;
}

static void
s_strlist_clear (fh_strlist_t *list)
{
    for (size_t i = 0; i < list->count; i++)
        free (list->items[i]);
    free (list->items);
    list->items = NULL;
    list->count = 0;
}

static bool
s_strlist_has (const fh_strlist_t *list, const char *text)
{
    for (size_t i = 0; i < list->count; i++)
        if (strcmp (list->items[i], text) == 0)
            return true;
    return false;
}

/* ------------------------------------------------------------------ */
/* Endpoints                                                            */

/* The reason for an endpoint refused with details; one per thread. */
static _Thread_local char s_reason[160];

/* Splits the address of tcp://HOST:PORT. Answers NULL and sets host
   (without brackets) and port, or answers a reason. */
static const char *
s_tcp_split (const char *addr, const char **host, size_t *host_len,
             const char **port)
{
    if (*addr == '[') {
        const char *close = strchr (addr, ']');
        if (!close)
            return "missing ']' after the IPv6 address";
        *host = addr + 1;
        *host_len = (size_t) (close - addr - 1);
        if (*host_len == 0)
            return "empty IPv6 address in []";
        if (strcspn (*host, ":]") >= *host_len)
            return "expected an IPv6 address in [], e.g. tcp://[::1]:9940";
        if (close[1] != ':')
            return "expected ':PORT' after the IPv6 address";
        *port = close + 2;
        return NULL;
    }
    const char *colon = strrchr (addr, ':');
    if (!colon)
        return "expected tcp://HOST:PORT";
    *host = addr;
    *host_len = (size_t) (colon - addr);
    *port = colon + 1;
    if (*host_len == 0)
        return "empty host in tcp://HOST:PORT";
    if (memchr (addr, ':', *host_len))
        return "IPv6 addresses go in brackets, e.g. tcp://[::1]:9940";
    if (strcspn (addr, "/[]") < *host_len)
        return "invalid character in host";
    return NULL;
}

static const char *
s_tcp_check (const char *addr, bool for_bind)
{
    const char *host, *port;
    size_t host_len;
    const char *why = s_tcp_split (addr, &host, &host_len, &port);
    if (why)
        return why;
    if (host_len == 1 && *host == '*' && !for_bind)
        return "host '*' (every interface) is only for bind";
    if (strcmp (port, "*") == 0)
        return for_bind ? NULL : "port '*' (any free port) is only for bind";
    size_t digits = strspn (port, "0123456789");
    long long value;
    if (digits == 0 || digits > 5 || port[digits]
        || !s_parse_integer (port, &value) || value < 1 || value > 65535)
        return "expected a port from 1 to 65535";
    return NULL;
}

const char *
fh_endpoint_check (const char *endpoint, bool for_bind)
{
    if (!endpoint || !*endpoint)
        return "empty endpoint";
    for (const char *c = endpoint; *c; c++)
        if ((unsigned char) *c <= ' ' || *c == 0x7f)
            return "an endpoint cannot contain spaces or control characters";
    const char *sep = strstr (endpoint, "://");
    if (!sep)
        return "expected TRANSPORT://ADDRESS (tcp://HOST:PORT, ipc://PATH "
               "or inproc://NAME)";
    size_t transport = (size_t) (sep - endpoint);
    const char *addr = sep + 3;
    if (transport == 3 && strncmp (endpoint, "tcp", 3) == 0)
        return s_tcp_check (addr, for_bind);
    if (transport == 3 && strncmp (endpoint, "ipc", 3) == 0) {
        if (!*addr)
            return "expected ipc://PATH";
        if (strlen (addr) > S_IPC_PATH_MAX) {
            snprintf (s_reason, sizeof s_reason,
                      "ipc path is %zu bytes, more than the %zu a Unix "
                      "socket path allows",
                      strlen (addr), (size_t) S_IPC_PATH_MAX);
            return s_reason;
        }
        return NULL;
    }
    if (transport == 6 && strncmp (endpoint, "inproc", 6) == 0)
        return *addr ? NULL : "expected inproc://NAME";
    snprintf (s_reason, sizeof s_reason,
              "unsupported transport '%.*s' (use tcp://, ipc:// or inproc://)",
              (int) (transport < 32 ? transport : 32), endpoint);
    return s_reason;
}

/* 127.x.y.z, each part a decimal 0..255. */
static bool
s_is_ipv4_loopback (const char *host, size_t len)
{
    char buf[16];
    if (len >= sizeof buf)
        return false;
    memcpy (buf, host, len);
    buf[len] = '\0';
    unsigned parts[4];
    int used = 0;
    if (sscanf (buf, "%3u.%3u.%3u.%3u%n", &parts[0], &parts[1], &parts[2],
                &parts[3], &used)
            != 4
        || (size_t) used != len || strspn (buf, "0123456789.") != len)
        return false;
    return parts[0] == 127 && parts[1] < 256 && parts[2] < 256
           && parts[3] < 256;
}

/* The control endpoint: ipc://PATH, or tcp:// on loopback with a port. */
static const char *
s_control_check (const char *endpoint)
{
    const char *why = fh_endpoint_check (endpoint, true);
    if (why)
        return why;
    if (strncmp (endpoint, "ipc://@", 7) == 0)
        return "an abstract socket (ipc://@NAME) has no owner or mode: any user "
               "could take it; use ipc://PATH";
    if (strncmp (endpoint, "ipc://", 6) == 0)
        return NULL;
    if (strncmp (endpoint, "tcp://", 6) != 0)
        return "the control socket is served on ipc://PATH or on tcp:// on "
               "loopback";
    const char *host, *port;
    size_t host_len;
    why = s_tcp_split (endpoint + 6, &host, &host_len, &port);
    if (why)
        return why; /* not reached: fh_endpoint_check split it already */
    bool loopback = (host_len == 9 && strncmp (host, "localhost", 9) == 0)
                    || (host_len == 3 && strncmp (host, "::1", 3) == 0
                        && endpoint[6] == '[')
                    || s_is_ipv4_loopback (host, host_len);
    if (!loopback)
        return "the control socket is only served on loopback (127.0.0.1, "
               "localhost or [::1]) or on ipc://PATH";
    if (strcmp (port, "*") == 0)
        return "the control endpoint needs a fixed port, for clients to "
               "find it";
    return NULL;
}

/* ipc://DIR/fanhub[-NAME].sock, DIR being $RUNTIME_DIRECTORY (its first
   entry: systemd separates several with ':'), else $XDG_RUNTIME_DIR, else
   a private directory (control_path.h: /run/fanhub for root, else
   /tmp/fanhub-UID), never a path any user may create first. */
static int
s_control_default (s_ctx_t *ctx, yaml_node_t *root, fh_config_t *cfg)
{
    const char *dir = getenv ("RUNTIME_DIRECTORY");
    size_t len = dir ? strcspn (dir, ":") : 0;
    if (len == 0) {
        dir = getenv ("XDG_RUNTIME_DIR");
        len = dir ? strlen (dir) : 0;
    }
    char private_dir[64];
    if (len == 0) {
        fh_control_path_private_dir (private_dir, sizeof private_dir);
        dir = private_dir;
        len = strlen (dir);
    }
    while (len > 1 && dir[len - 1] == '/')
        len--;
    if (len == 1 && dir[0] == '/')
        len = 0; /* "/" + "/fanhub.sock" */
    const char *name = cfg->name;
    size_t size = len + (name ? strlen (name) : 0) + 32;
    char *endpoint = malloc (size);
    if (!endpoint)
        return s_oom (ctx, root->start_mark);
    snprintf (endpoint, size, "ipc://%.*s/fanhub%s%s.sock", (int) len, dir,
              name ? "-" : "", name ? name : "");
    cfg->control = endpoint;
    const char *why = s_control_check (endpoint);
    if (why) {
        size_t mark = s_path_key (ctx, "control");
        s_error (ctx, root->start_mark,
                 "the default endpoint '%s' is not usable: %s; set control:",
                 endpoint, why);
        s_path_pop (ctx, mark);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Field parsers                                                        */

/* An integer from field->min to field->max; else writes the error. */
static int
s_integer (s_ctx_t *ctx, yaml_node_t *node, const s_field_t *field,
           long long *value)
{
    char buf[S_GOT_SIZE];
    const char *text = node->type == YAML_SCALAR_NODE && !s_is_null (node)
                           ? (const char *) node->data.scalar.value
                           : NULL;
    if (!text || !s_parse_integer (text, value) || *value < field->min
        || *value > field->max)
        return s_error (ctx, node->start_mark,
                        "expected an integer from %lld to %lld, got %s",
                        field->min, field->max, s_got (node, buf, sizeof buf));
    return 0;
}

/* An int field; the table's limits must fit an int. */
static int
s_parse_int (s_ctx_t *ctx, yaml_node_t *node, void *target,
             const s_field_t *field)
{
    long long value = 0;
    if (s_integer (ctx, node, field, &value))
        return -1;
    *(int *) target = (int) value;
    return 0;
}

/* A size_t field; the table's limits must be >= 0. */
static int
s_parse_int64 (s_ctx_t *ctx, yaml_node_t *node, void *target, const s_field_t *field)
{
    long long value = 0;
    if (s_integer (ctx, node, field, &value))
        return -1;
    *(int64_t *) target = value;
    return 0;
}

static int
s_parse_size (s_ctx_t *ctx, yaml_node_t *node, void *target,
              const s_field_t *field)
{
    long long value = 0;
    if (s_integer (ctx, node, field, &value))
        return -1;
    *(size_t *) target = (size_t) value;
    return 0;
}

/* Seconds, integer or decimal ("2.5"), stored as int64_t milliseconds
   (digits past the millisecond are dropped). */
static int
s_parse_millis (s_ctx_t *ctx, yaml_node_t *node, void *target,
                const s_field_t *field)
{
    char buf[S_GOT_SIZE];
    const char *text = node->type == YAML_SCALAR_NODE && !s_is_null (node)
                           ? (const char *) node->data.scalar.value
                           : "";
    size_t whole = strspn (text, "0123456789");
    size_t frac = text[whole] == '.' ? strspn (text + whole + 1, "0123456789")
                                     : 0;
    size_t end = whole + (text[whole] == '.' ? 1 + frac : 0);
    long long ms = 0;
    bool ok = whole > 0 && whole <= 9 && text[end] == '\0'
              && (text[whole] != '.' || frac > 0);
    if (ok) {
        for (size_t i = 0; i < whole; i++)
            ms = ms * 10 + (text[i] - '0');
        ms *= 1000;
        long long scale = 100;
        for (size_t i = 0; i < frac && i < 3; i++, scale /= 10)
            ms += (text[whole + 1 + i] - '0') * scale;
        /* Below a millisecond only counts against the maximum. */
        bool more = frac > 3 && strspn (text + whole + 4, "0") < frac - 3;
        ok = ms >= field->min * 1000
             && (ms < field->max * 1000 || (ms == field->max * 1000 && !more));
    }
    if (!ok)
        return s_error (ctx, node->start_mark,
                        "expected a number of seconds from %lld to %lld, "
                        "got %s",
                        field->min, field->max, s_got (node, buf, sizeof buf));
    *(int64_t *) target = ms;
    return 0;
}

static int
s_parse_name (s_ctx_t *ctx, yaml_node_t *node, void *target,
              const s_field_t *field)
{
    (void) field;
    char buf[S_GOT_SIZE];
    static const char what[] = "a name of 1 to 64 characters from A-Z a-z "
                               "0-9 _ . -";
    const char *text = s_text (ctx, node, what);
    if (!text)
        return -1;
    if (!s_name_valid (text))
        return s_error (ctx, node->start_mark, "expected %s, got %s", what,
                        s_got (node, buf, sizeof buf));
    char **slot = target;
    free (*slot);
    *slot = strdup (text);
    return *slot ? 0 : s_oom (ctx, node->start_mark);
}

static int
s_parse_plugin (s_ctx_t *ctx, yaml_node_t *node, void *target,
                const s_field_t *field)
{
    (void) field;
    static const char what[] = "a plugin name or path";
    const char *text = s_text (ctx, node, what);
    if (!text)
        return -1;
    if (!*text)
        return s_error (ctx, node->start_mark, "expected %s, got ''", what);
    char **slot = target;
    free (*slot);
    *slot = strdup (text);
    return *slot ? 0 : s_oom (ctx, node->start_mark);
}

static int
s_parse_control (s_ctx_t *ctx, yaml_node_t *node, void *target,
                 const s_field_t *field)
{
    (void) field;
    const char *text = s_text (ctx, node,
                               "an endpoint (ipc://PATH or "
                               "tcp://127.0.0.1:PORT)");
    if (!text)
        return -1;
    const char *why = s_control_check (text);
    if (why)
        return s_error (ctx, node->start_mark,
                        "invalid control endpoint '%s': %s", text, why);
    char **slot = target;
    free (*slot);
    *slot = strdup (text);
    return *slot ? 0 : s_oom (ctx, node->start_mark);
}

/* One endpoint of bus.connect or bus.bind; none may appear twice in
   either list. */
/* A non-empty string (a file path, say). */
static int
s_parse_path (s_ctx_t *ctx, yaml_node_t *node, void *target,
              const s_field_t *field)
{
    (void) field;
    const char *text = s_text (ctx, node, "a path");
    if (!text)
        return -1;
    if (!*text)
        return s_error (ctx, node->start_mark, "expected a path, got ''");
    char **slot = target;
    free (*slot);
    *slot = strdup (text);
    return *slot ? 0 : s_oom (ctx, node->start_mark);
}

/* HOST:PORT to listen on (HTTP): HOST a name, an IPv4 address or an IPv6
   one in brackets; PORT 1..65535. */
static int
s_parse_listen (s_ctx_t *ctx, yaml_node_t *node, void *target,
                const s_field_t *field)
{
    (void) field;
    static const char what[] = "HOST:PORT, e.g. 127.0.0.1:9464";
    const char *text = s_text (ctx, node, what);
    if (!text)
        return -1;
    const char *colon = strrchr (text, ':');
    long long port = 0;
    bool ok = colon && colon > text && s_parse_integer (colon + 1, &port)
              && port >= 1 && port <= 65535
              && strcspn (text, " \t/") == strlen (text);
    if (ok && text[0] == '[')
        ok = colon[-1] == ']' && colon - text > 2;
    if (!ok)
        return s_error (ctx, node->start_mark, "expected %s, got '%s'", what, text);
    char **slot = target;
    free (*slot);
    *slot = strdup (text);
    return *slot ? 0 : s_oom (ctx, node->start_mark);
}

/* An endpoint the hub binds to publish on (ipc:// or tcp://). */
static int
s_parse_bind_endpoint (s_ctx_t *ctx, yaml_node_t *node, void *target,
                       const s_field_t *field)
{
    (void) field;
    const char *text = s_text (ctx, node, "an endpoint to bind");
    if (!text)
        return -1;
    const char *why = fh_endpoint_check (text, true);
    if (why)
        return s_error (ctx, node->start_mark, "invalid endpoint '%s': %s", text, why);
    char **slot = target;
    free (*slot);
    *slot = strdup (text);
    return *slot ? 0 : s_oom (ctx, node->start_mark);
}

/* One word of field->choices; stores its index as an int. */
static int
s_parse_enum (s_ctx_t *ctx, yaml_node_t *node, void *target, const s_field_t *field)
{
    char words[256] = "";
    size_t used = 0;
    for (const char *const *c = field->choices; *c && used < sizeof words; c++)
        used += (size_t) snprintf (words + used, sizeof words - used, "%s%s",
                                   c == field->choices ? "" : ", ", *c);
    char what[300];
    snprintf (what, sizeof what, "one of %s", words);
    const char *text = s_text (ctx, node, what);
    if (!text)
        return -1;
    for (const char *const *c = field->choices; *c; c++)
        if (strcmp (*c, text) == 0) {
            *(int *) target = (int) (c - field->choices);
            return 0;
        }
    return s_error (ctx, node->start_mark, "expected %s, got '%s'", what, text);
}

static int
s_parse_bool (s_ctx_t *ctx, yaml_node_t *node, void *target, const s_field_t *field)
{
    (void) field;
    const char *text = s_text (ctx, node, "true or false");
    if (!text)
        return -1;
    if (strcmp (text, "true") == 0 || strcmp (text, "false") == 0) {
        *(bool *) target = text[0] == 't';
        return 0;
    }
    return s_error (ctx, node->start_mark, "expected true or false, got '%s'", text);
}

/* A share from 0 to 1 with at most three decimals, stored in permille. */
static int
s_parse_permille (s_ctx_t *ctx, yaml_node_t *node, void *target, const s_field_t *field)
{
    (void) field;
    const char *text = s_text (ctx, node, "a number from 0 to 1");
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
        return s_error (ctx, node->start_mark,
                        "expected a number from 0 to 1 (at most 3 decimals), got '%s'", text);
    *(int64_t *) target = permille;
    return 0;
}

/* order_by: `topic`, or a map of one entry: topic_segment: K, frame: K or
   json: /pointer. Stored as the string form "KIND:ARG". */
static int
s_parse_order_by (s_ctx_t *ctx, yaml_node_t *node, void *target, const s_field_t *field)
{
    (void) field;
    char **slot = target;
    char spec[1024];
    if (node->type == YAML_SCALAR_NODE && !s_is_null (node)
        && strcmp ((const char *) node->data.scalar.value, "topic") == 0)
        snprintf (spec, sizeof spec, "topic");
    else if (node->type == YAML_MAPPING_NODE
             && node->data.mapping.pairs.top - node->data.mapping.pairs.start == 1) {
        yaml_node_pair_t *pair = node->data.mapping.pairs.start;
        const char *kind = (const char *) s_node (ctx, pair->key)->data.scalar.value;
        yaml_node_t *value = s_node (ctx, pair->value);
        const char *arg = value->type == YAML_SCALAR_NODE && !s_is_null (value)
                              ? (const char *) value->data.scalar.value
                              : NULL;
        long long k;
        if ((strcmp (kind, "topic_segment") == 0 || strcmp (kind, "frame") == 0) && arg
            && s_parse_integer (arg, &k) && k >= 0 && k <= 1023)
            snprintf (spec, sizeof spec, "%s:%lld", kind, k);
        else if (strcmp (kind, "json") == 0 && arg && (arg[0] == '/' || arg[0] == '\0')
                 && strlen (arg) < sizeof spec - 8)
            snprintf (spec, sizeof spec, "json:%s", arg);
        else
            return s_error (ctx, value->start_mark,
                            "expected topic_segment: K or frame: K (K from 0 to 1023), "
                            "or json: /pointer (RFC 6901), got %s: %s", kind,
                            arg ? arg : "a non-scalar");
    }
    else {
        char buf[S_GOT_SIZE];
        return s_error (ctx, node->start_mark,
                        "expected topic, {topic_segment: K}, {frame: K} or "
                        "{json: /pointer}, got %s", s_got (node, buf, sizeof buf));
    }
    free (*slot);
    *slot = strdup (spec);
    return *slot ? 0 : s_oom (ctx, node->start_mark);
}

static int
s_parse_endpoint (s_ctx_t *ctx, yaml_node_t *node, fh_strlist_t *list,
                  bool for_bind)
{
    const char *text = s_text (ctx, node, "an endpoint");
    if (!text)
        return -1;
    const char *why = fh_endpoint_check (text, for_bind);
    if (why)
        return s_error (ctx, node->start_mark, "invalid endpoint '%s': %s",
                        text, why);
    if (s_strlist_has (&ctx->cfg->connect, text)
        || s_strlist_has (&ctx->cfg->bind, text))
        return s_error (ctx, node->start_mark,
                        "duplicate endpoint '%s' (already in bus.%s)", text,
                        s_strlist_has (&ctx->cfg->connect, text) ? "connect"
                                                                 : "bind");
    if (s_strlist_add (list, text))
        return s_oom (ctx, node->start_mark);
    return 0;
}

/* An endpoint, or a list of them. */
static int
s_parse_endpoints (s_ctx_t *ctx, yaml_node_t *node, void *target,
                   const s_field_t *field)
{
    fh_strlist_t *list = target;
    bool for_bind = field->flags & S_FOR_BIND;
    if (node->type == YAML_SCALAR_NODE && !s_is_null (node))
        return s_parse_endpoint (ctx, node, list, for_bind);
    if (node->type != YAML_SEQUENCE_NODE) {
        char buf[S_GOT_SIZE];
        return s_error (ctx, node->start_mark,
                        "expected an endpoint or a list of endpoints, got %s",
                        s_got (node, buf, sizeof buf));
    }
    for (size_t i = 0; i < s_count (node); i++) {
        size_t mark = s_path_index (ctx, i);
        int rc = s_parse_endpoint (
            ctx, s_node (ctx, node->data.sequence.items.start[i]), list,
            for_bind);
        if (rc)
            return rc;
        s_path_pop (ctx, mark);
    }
    return 0;
}

static int
s_parse_topic (s_ctx_t *ctx, yaml_node_t *node, fh_strlist_t *topics)
{
    const char *text = s_text (ctx, node, "a topic pattern");
    if (!text)
        return -1;
    if (!*text)
        return s_error (ctx, node->start_mark,
                        "expected a topic pattern, got '' (omit topics: to "
                        "receive every message)");
    if (strcmp (text, "=") == 0)
        return s_error (ctx, node->start_mark,
                        "expected a topic after '=' (an exact match, e.g. "
                        "=org.fedoraproject.prod.git.receive), got '='");
    if (s_strlist_add (topics, text))
        return s_oom (ctx, node->start_mark);
    return 0;
}

/* A list of topic patterns (or one pattern); never empty. */
static int
s_parse_topics (s_ctx_t *ctx, yaml_node_t *node, void *target,
                const s_field_t *field)
{
    (void) field;
    fh_strlist_t *topics = target;
    if (node->type == YAML_SCALAR_NODE && !s_is_null (node))
        return s_parse_topic (ctx, node, topics);
    if (node->type != YAML_SEQUENCE_NODE || s_count (node) == 0) {
        char buf[S_GOT_SIZE];
        return s_error (ctx, node->start_mark,
                        "expected a list of topic patterns, got %s (omit "
                        "topics: to receive every message)",
                        s_got (node, buf, sizeof buf));
    }
    for (size_t i = 0; i < s_count (node); i++) {
        size_t mark = s_path_index (ctx, i);
        if (s_parse_topic (ctx, s_node (ctx, node->data.sequence.items.start[i]),
                           topics))
            return -1;
        s_path_pop (ctx, mark);
    }
    return 0;
}

/* Builds the option tree of node; stack holds the nodes being built above
   it, to refuse an alias to one of them (a tree that contains itself). */
static fanhub_option_t *
s_option_build (s_ctx_t *ctx, yaml_node_t *node, yaml_node_t **stack,
                size_t depth)
{
    for (size_t i = 0; i < depth; i++)
        if (stack[i] == node) {
            s_error (ctx, node->start_mark,
                     "an alias refers to a value that contains it");
            return NULL;
        }
    if (depth == S_OPTION_DEPTH_MAX) {
        s_error (ctx, node->start_mark, "options nest more than %d levels",
                 S_OPTION_DEPTH_MAX);
        return NULL;
    }
    if (++ctx->option_nodes > S_OPTION_NODES_MAX) {
        s_error (ctx, node->start_mark,
                 "more than %d option values (aliases expanded)",
                 S_OPTION_NODES_MAX);
        return NULL;
    }
    stack[depth] = node;

    char *where = s_where (ctx, node->start_mark);
    if (!where) {
        s_oom (ctx, node->start_mark);
        return NULL;
    }
    fanhub_option_t *option = NULL;
    if (node->type == YAML_SCALAR_NODE) {
        const char *text = (const char *) node->data.scalar.value;
        if (strlen (text) != node->data.scalar.length)
            s_error (ctx, node->start_mark,
                     "a value with a NUL character is not supported");
        else if (!(option = fh_option_new (FANHUB_OPTION_SCALAR, text, where)))
            s_oom (ctx, node->start_mark);
        free (where);
        return option;
    }

    bool is_map = node->type == YAML_MAPPING_NODE;
    if (is_map && s_check_keys (ctx, node)) {
        free (where);
        return NULL;
    }
    option = fh_option_new (is_map ? FANHUB_OPTION_MAP : FANHUB_OPTION_LIST,
                            NULL, where);
    free (where);
    if (!option) {
        s_oom (ctx, node->start_mark);
        return NULL;
    }
    for (size_t i = 0; i < s_count (node); i++) {
        const char *key = NULL;
        yaml_node_t *child;
        size_t mark;
        if (is_map) {
            yaml_node_pair_t *pair = &node->data.mapping.pairs.start[i];
            key = (const char *) s_node (ctx, pair->key)->data.scalar.value;
            child = s_node (ctx, pair->value);
            mark = s_path_key (ctx, key);
        }
        else {
            child = s_node (ctx, node->data.sequence.items.start[i]);
            mark = s_path_index (ctx, i);
        }
        fanhub_option_t *built = s_option_build (ctx, child, stack, depth + 1);
        if (!built) {
            fh_option_destroy (&option);
            return NULL;
        }
        s_path_pop (ctx, mark);
        if (fh_option_append (option, key, built)) {
            fh_option_destroy (&option);
            s_oom (ctx, child->start_mark);
            return NULL;
        }
    }
    return option;
}

/* Any YAML map, kept as an option tree for the plugin; nothing (`options:`
   with no value) is an empty map. */
static int
s_parse_options (s_ctx_t *ctx, yaml_node_t *node, void *target,
                 const s_field_t *field)
{
    (void) field;
    fanhub_option_t **slot = target;
    if (node->type != YAML_MAPPING_NODE && !s_is_null (node)) {
        char buf[S_GOT_SIZE];
        return s_error (ctx, node->start_mark,
                        "expected a map of plugin options, got %s",
                        s_got (node, buf, sizeof buf));
    }
    fh_option_destroy (slot);
    if (s_is_null (node)) {
        char *where = s_where (ctx, node->start_mark);
        *slot = where ? fh_option_new (FANHUB_OPTION_MAP, NULL, where) : NULL;
        free (where);
        return *slot ? 0 : s_oom (ctx, node->start_mark);
    }
    yaml_node_t *stack[S_OPTION_DEPTH_MAX];
    *slot = s_option_build (ctx, node, stack, 0);
    return *slot ? 0 : -1;
}

/* shard: {index: I, count: N}, 0 <= I < N (shard.h). */
static int
s_parse_shard (s_ctx_t *ctx, yaml_node_t *node, void *target, const s_field_t *field)
{
    (void) field;
    size_t *slot = target; /* index, then count */
    long long value[2] = { -1, -1 };
    for (yaml_node_pair_t *pair = node->type == YAML_MAPPING_NODE ? node->data.mapping.pairs.start
                                                                  : NULL;
         pair && pair < node->data.mapping.pairs.top; pair++) {
        yaml_node_t *key = s_node (ctx, pair->key), *item = s_node (ctx, pair->value);
        const char *name = key->type == YAML_SCALAR_NODE ? (const char *) key->data.scalar.value
                                                         : "";
        int k = strcmp (name, "index") == 0 ? 0 : strcmp (name, "count") == 0 ? 1 : -1;
        if (k < 0 || value[k] >= 0 || item->type != YAML_SCALAR_NODE
            || !s_parse_integer ((const char *) item->data.scalar.value, &value[k])
            || value[k] < k || value[k] > 65536)
            return s_error (ctx, k < 0 ? key->start_mark : item->start_mark,
                            "expected {index: I, count: N}, 1 <= N <= 65536, 0 <= I < N");
    }
    if (value[0] < 0 || value[1] < 1 || value[0] >= value[1])
        return s_error (ctx, node->start_mark,
                        "expected {index: I, count: N}, 1 <= N <= 65536, 0 <= I < N");
    slot[0] = (size_t) value[0];
    slot[1] = (size_t) value[1];
    return 0;
}

/* bus.amqp: kept as an option tree; source_amqp.h reads and checks it. */
static int
s_parse_amqp (s_ctx_t *ctx, yaml_node_t *node, void *target, const s_field_t *field)
{
    if (node->type != YAML_MAPPING_NODE) {
        char buf[S_GOT_SIZE];
        return s_error (ctx, node->start_mark, "expected a map (url:, queue:, ...), got %s",
                        s_got (node, buf, sizeof buf));
    }
    if (s_parse_options (ctx, node, target, field))
        return -1;
    const char *where = NULL;
    char why[512];
    fh_amqp_settings_t *settings
        = fh_amqp_settings_new (*(fanhub_option_t **) target, &where, why, sizeof why);
    if (!settings) {
        snprintf (ctx->err, ctx->errlen, "%s: bus.amqp.%s", where ? where : ctx->source, why);
        return -1;
    }
    fh_amqp_settings_destroy (&settings);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Sections                                                             */

static void
s_known (const s_field_t *fields, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (const s_field_t *field = fields; field->key && used < len; field++) {
        int n = snprintf (buf + used, len - used, "%s%s",
                          field == fields ? "" : ", ", field->key);
        if (n < 0)
            break;
        used += (size_t) n;
    }
}

/* A map whose keys are the rows of section; fills target. */
static int
s_parse_map (s_ctx_t *ctx, yaml_node_t *node, const s_section_t *section,
             void *target)
{
    char known[512];
    s_known (section->fields, known, sizeof known);
    if (node->type != YAML_MAPPING_NODE) {
        char buf[S_GOT_SIZE];
        return s_error (ctx, node->start_mark,
                        "expected a map (known: %s), got %s", known,
                        s_got (node, buf, sizeof buf));
    }
    if (s_check_keys (ctx, node))
        return -1;
    for (yaml_node_pair_t *pair = node->data.mapping.pairs.start;
         pair < node->data.mapping.pairs.top; pair++) {
        yaml_node_t *key = s_node (ctx, pair->key);
        const char *name = (const char *) key->data.scalar.value;
        const s_field_t *field = section->fields;
        while (field->key && strcmp (field->key, name) != 0)
            field++;
        size_t mark = s_path_key (ctx, name);
        if (!field->key)
            return s_error (ctx, key->start_mark,
                            "unknown key (known: %s)", known);
        if (field->parse (ctx, s_node (ctx, pair->value),
                          (char *) target + field->offset, field))
            return -1;
        s_path_pop (ctx, mark);
    }
    for (const s_field_t *field = section->fields; field->key; field++)
        if (field->required && !s_map_find (ctx, node, field->key)) {
            s_path_key (ctx, field->key);
            return s_error (ctx, node->start_mark, "required key is missing");
        }
    return section->finish ? section->finish (ctx, node, target) : 0;
}

static int
s_parse_section (s_ctx_t *ctx, yaml_node_t *node, void *target,
                 const s_field_t *field)
{
    return s_parse_map (ctx, node, field->section, target);
}

static int
s_bus_finish (s_ctx_t *ctx, yaml_node_t *node, void *target)
{
    fh_config_t *cfg = target;
    if (cfg->connect.count + cfg->bind.count == 0 && !cfg->amqp)
        return s_error (ctx, node->start_mark,
                        "expected at least one endpoint in connect: or bind:, or amqp:");
    yaml_node_t *curve = s_map_find (ctx, node, "curve");
    if (curve && cfg->connect.count && !cfg->curve.server_public_key) {
        s_path_key (ctx, "curve.server_public_key");
        return s_error (ctx, curve->start_mark, "missing: with curve, bus.connect needs the "
                        "publishers' public key");
    }
    if (curve && cfg->bind.count + cfg->publish.count && !cfg->curve.allow.count
        && !cfg->curve.allow_dir) {
        s_path_key (ctx, "curve.allow");
        return s_error (ctx, curve->start_mark, "missing: with curve, bus.bind and "
                        "bus.publish need the clients' keys (allow: or allow_dir:)");
    }
    return 0;
}

static int
s_consumer_finish (s_ctx_t *ctx, yaml_node_t *node, void *target)
{
    fh_consumer_config_t *consumer = target;
    if (!consumer->options) {
        consumer->options
            = fh_option_new (FANHUB_OPTION_MAP, NULL, consumer->where);
        if (!consumer->options)
            return s_oom (ctx, node->start_mark);
    }
    return 0;
}

/* producer: topic, topic_prefix:N (the first N dot-separated segments)
   or json:/pointer (RFC 6901, into the body). */
static int
s_parse_producer (s_ctx_t *ctx, yaml_node_t *node, void *target, const s_field_t *field)
{
    (void) field;
    static const char what[] = "topic, topic_prefix:N or json:/pointer";
    const char *text = s_text (ctx, node, what);
    if (!text)
        return -1;
    long long n = 0;
    bool ok = strcmp (text, "topic") == 0
              || (strncmp (text, "topic_prefix:", 13) == 0 && s_parse_integer (text + 13, &n)
                  && n >= 1 && n <= 64)
              || (strncmp (text, "json:", 5) == 0 && (text[5] == '/' || text[5] == '\0'));
    if (!ok)
        return s_error (ctx, node->start_mark, "expected %s, got '%s'", what, text);
    char **slot = target;
    free (*slot);
    *slot = strdup (text);
    return *slot ? 0 : s_oom (ctx, node->start_mark);
}

/* A CurveZMQ public key, 40 characters of Z85. */
static int
s_parse_key (s_ctx_t *ctx, yaml_node_t *node, void *target, const s_field_t *field)
{
    (void) field;
    static const char what[] = "a CurveZMQ public key (40 characters of Z85)";
    const char *text = s_text (ctx, node, what);
    if (!text)
        return -1;
    if (!fh_curve_key_valid (text))
        return s_error (ctx, node->start_mark, "expected %s, got a %zu-character value",
                        what, strlen (text));
    char **slot = target;
    free (*slot);
    *slot = strdup (text);
    return *slot ? 0 : s_oom (ctx, node->start_mark);
}

/* A list (or one) of keys, or of IP addresses: check tells which. */
static int
s_parse_list_of (s_ctx_t *ctx, yaml_node_t *node, fh_strlist_t *list, const char *what,
                 bool (*check) (const char *))
{
    size_t count = node->type == YAML_SEQUENCE_NODE ? s_count (node) : 1;
    if (node->type == YAML_MAPPING_NODE || s_is_null (node) || count == 0) {
        char buf[S_GOT_SIZE];
        return s_error (ctx, node->start_mark, "expected a list of %s, got %s", what,
                        s_got (node, buf, sizeof buf));
    }
    for (size_t i = 0; i < count; i++) {
        yaml_node_t *item = node->type == YAML_SEQUENCE_NODE
                                ? s_node (ctx, node->data.sequence.items.start[i])
                                : node;
        size_t mark = node->type == YAML_SEQUENCE_NODE ? s_path_index (ctx, i) : strlen (ctx->path);
        const char *text = s_text (ctx, item, what);
        if (!text)
            return -1;
        if (!check (text))
            return s_error (ctx, item->start_mark, "expected %s, got '%.*s'", what,
                            S_GOT_MAX, text);
        if (s_strlist_add (list, text))
            return s_oom (ctx, item->start_mark);
        s_path_pop (ctx, mark);
    }
    return 0;
}

static int
s_parse_keys (s_ctx_t *ctx, yaml_node_t *node, void *target, const s_field_t *field)
{
    (void) field;
    return s_parse_list_of (ctx, node, target, "CurveZMQ public keys (40 characters of Z85)",
                            fh_curve_key_valid);
}

static bool
s_ip_valid (const char *text)
{
    unsigned char addr[16];
    return inet_pton (AF_INET, text, addr) == 1 || inet_pton (AF_INET6, text, addr) == 1;
}

static int
s_parse_addresses (s_ctx_t *ctx, yaml_node_t *node, void *target, const s_field_t *field)
{
    (void) field;
    return s_parse_list_of (ctx, node, target, "IP addresses (192.0.2.7, 2001:db8::7)",
                            s_ip_valid);
}

/* bus.curve: the secret is read (and its file checked) at load, so that
   `check` refuses what `run` would. */
static int
s_curve_finish (s_ctx_t *ctx, yaml_node_t *node, void *target)
{
    fh_config_t *cfg = target;
    if (!cfg->curve.secret_key_file) {
        s_path_key (ctx, "secret_key_file");
        return s_error (ctx, node->start_mark, "missing required key (CURVE needs this "
                        "hub's key pair; fanhub keygen writes one)");
    }
    struct stat st;
    if (cfg->curve.allow_dir && (stat (cfg->curve.allow_dir, &st) != 0 || !S_ISDIR (st.st_mode))) {
        yaml_node_t *at = s_map_find (ctx, node, "allow_dir");
        s_path_key (ctx, "allow_dir");
        return s_error (ctx, at ? at->start_mark : node->start_mark,
                        "%s is not a directory (of zcert public key files)",
                        cfg->curve.allow_dir);
    }
    char why[512];
    if (fh_curve_load_secret (cfg->curve.secret_key_file, cfg->curve.public_key,
                              cfg->curve.secret_key, why, sizeof why) != 0) {
        yaml_node_t *at = s_map_find (ctx, node, "secret_key_file");
        s_path_key (ctx, "secret_key_file");
        return s_error (ctx, at ? at->start_mark : node->start_mark, "%s", why);
    }
    return 0;
}

static const s_field_t s_curve_fields[] = {
    { .key = "secret_key_file", .parse = s_parse_path,
      .offset = offsetof (fh_config_t, curve.secret_key_file) },
    { .key = "server_public_key", .parse = s_parse_key,
      .offset = offsetof (fh_config_t, curve.server_public_key) },
    { .key = "allow", .parse = s_parse_keys, .offset = offsetof (fh_config_t, curve.allow) },
    { .key = "allow_dir", .parse = s_parse_path,
      .offset = offsetof (fh_config_t, curve.allow_dir) },
    { .key = NULL },
};

static const s_section_t s_curve_section = { s_curve_fields, s_curve_finish };

static const s_field_t s_gaps_fields[] = {
    { .key = "counter", .parse = s_parse_path,
      .offset = offsetof (fh_config_t, gaps.counter), .required = true },
    { .key = "producer", .parse = s_parse_producer,
      .offset = offsetof (fh_config_t, gaps.producer) },
    { .key = "max_producers", .parse = s_parse_size,
      .offset = offsetof (fh_config_t, gaps.max_producers), .min = 1, .max = 10000000 },
    { .key = NULL },
};

static const s_section_t s_gaps_section = { s_gaps_fields, NULL };

static const s_field_t s_bus_fields[] = {
    { .key = "connect", .parse = s_parse_endpoints,
      .offset = offsetof (fh_config_t, connect) },
    { .key = "bind", .parse = s_parse_endpoints,
      .offset = offsetof (fh_config_t, bind), .flags = S_FOR_BIND },
    { .key = "rcvhwm", .parse = s_parse_int,
      .offset = offsetof (fh_config_t, rcvhwm), .min = 0, .max = INT_MAX },
    { .key = "max_frames", .parse = s_parse_size,
      .offset = offsetof (fh_config_t, max_frames), .min = S_MAX_FRAMES_MIN,
      .max = S_MAX_FRAMES_MAX },
    { .key = "max_message_bytes", .parse = s_parse_size,
      .offset = offsetof (fh_config_t, max_message_bytes), .min = 1,
      .max = S_MAX_MESSAGE_BYTES_MAX },
    { .key = "publish", .parse = s_parse_endpoints,
      .offset = offsetof (fh_config_t, publish), .flags = S_FOR_BIND },
    { .key = "gap_detection", .parse = s_parse_section, .offset = 0,
      .section = &s_gaps_section },
    { .key = "curve", .parse = s_parse_section, .offset = 0, .section = &s_curve_section },
    { .key = "allow_ip", .parse = s_parse_addresses, .offset = offsetof (fh_config_t, allow_ip) },
    { .key = "max_peers", .parse = s_parse_size, .offset = offsetof (fh_config_t, max_peers),
      .min = 1, .max = 1000000 },
    { .key = "amqp", .parse = s_parse_amqp, .offset = offsetof (fh_config_t, amqp) },
    { .key = NULL },
};

static const s_section_t s_bus_section = { s_bus_fields, s_bus_finish };

static const char *const s_overflow_words[] = {"block", "drop-newest", "drop-oldest",
                                               "spill", NULL};
static const char *const s_fsync_words[] = {"never", "interval", "always", NULL};
static const char *const s_log_level_words[] = {"error", "warning", "info", "debug", NULL};

static const s_field_t s_retry_fields[] = {
    { .key = "max_attempts", .parse = s_parse_size,
      .offset = offsetof (fh_retry_config_t, max_attempts), .min = 1, .max = 1000000 },
    { .key = "initial_ms", .parse = s_parse_int64,
      .offset = offsetof (fh_retry_config_t, initial_ms), .min = 0, .max = 3600000 },
    { .key = "max_ms", .parse = s_parse_int64,
      .offset = offsetof (fh_retry_config_t, max_ms), .min = 0, .max = 86400000 },
    { .key = "jitter", .parse = s_parse_permille,
      .offset = offsetof (fh_retry_config_t, jitter_permille) },
    { .key = NULL },
};

static const s_section_t s_retry_section = { s_retry_fields, NULL };

static const s_field_t s_spool_fields[] = {
    { .key = "fsync", .parse = s_parse_enum,
      .offset = offsetof (fh_config_t, spool.fsync), .choices = s_fsync_words },
    { .key = "fsync_interval", .parse = s_parse_millis,
      .offset = offsetof (fh_config_t, spool.fsync_interval_ms), .min = 0, .max = 3600 },
    { .key = "segment_bytes", .parse = s_parse_size,
      .offset = offsetof (fh_config_t, spool.segment_bytes), .min = 4096,
      .max = (long long) 1 << 40 },
    { .key = NULL },
};

static const s_section_t s_spool_section = { s_spool_fields, NULL };

static const s_field_t s_queue_fields[] = {
    { .key = "capacity", .parse = s_parse_size,
      .offset = offsetof (fh_consumer_config_t, queue_capacity), .min = 1,
      .max = S_QUEUE_CAPACITY_MAX },
    { .key = "warn_at", .parse = s_parse_size,
      .offset = offsetof (fh_consumer_config_t, warn_at), .min = 0,
      .max = S_QUEUE_CAPACITY_MAX, .live = true },
    { .key = "overflow", .parse = s_parse_enum,
      .offset = offsetof (fh_consumer_config_t, overflow), .choices = s_overflow_words },
    { .key = "spool_max_bytes", .parse = s_parse_size,
      .offset = offsetof (fh_consumer_config_t, spool_max_bytes), .min = 0,
      .max = LLONG_MAX },
    { .key = "write_ahead", .parse = s_parse_bool,
      .offset = offsetof (fh_consumer_config_t, write_ahead) },
    { .key = NULL },
};

static int
s_queue_finish (s_ctx_t *ctx, yaml_node_t *node, void *target)
{
    fh_consumer_config_t *consumer = target;
    if (consumer->warn_at > consumer->queue_capacity) {
        yaml_node_t *at = s_map_find (ctx, node, "warn_at");
        s_path_key (ctx, "warn_at");
        return s_error (ctx, at ? at->start_mark : node->start_mark,
                        "%zu is above queue.capacity (%zu): the warning could "
                        "never fire", consumer->warn_at, consumer->queue_capacity);
    }
    return 0;
}

static const s_section_t s_queue_section = { s_queue_fields, s_queue_finish };

static const s_field_t s_collectd_fields[] = {
    { .key = "socket", .parse = s_parse_path,
      .offset = offsetof (fh_metrics_config_t, collectd_socket) },
    { .key = "interval", .parse = s_parse_millis,
      .offset = offsetof (fh_metrics_config_t, collectd_interval_ms), .min = 1,
      .max = 3600 },
    { .key = NULL },
};

static const s_section_t s_collectd_section = { s_collectd_fields, NULL };

static const s_field_t s_prometheus_fields[] = {
    { .key = "listen", .parse = s_parse_listen,
      .offset = offsetof (fh_metrics_config_t, prometheus_listen) },
    { .key = NULL },
};

static const s_section_t s_prometheus_section = { s_prometheus_fields, NULL };

static const s_field_t s_metrics_fields[] = {
    { .key = "interval", .parse = s_parse_millis,
      .offset = offsetof (fh_metrics_config_t, interval_ms), .min = 1, .max = 3600 },
    { .key = "collectd", .parse = s_parse_section, .offset = 0,
      .section = &s_collectd_section },
    { .key = "prometheus", .parse = s_parse_section, .offset = 0,
      .section = &s_prometheus_section },
    { .key = "moksha_socket", .parse = s_parse_bind_endpoint,
      .offset = offsetof (fh_metrics_config_t, moksha_socket) },
    { .key = "moksha_interval", .parse = s_parse_millis,
      .offset = offsetof (fh_metrics_config_t, moksha_interval_ms), .min = 1,
      .max = 3600 },
    { .key = NULL },
};

static const s_section_t s_metrics_section = { s_metrics_fields, NULL };

static const s_field_t s_consumer_fields[] = {
    { .key = "name", .parse = s_parse_name,
      .offset = offsetof (fh_consumer_config_t, name), .required = true },
    { .key = "plugin", .parse = s_parse_plugin,
      .offset = offsetof (fh_consumer_config_t, plugin), .required = true },
    { .key = "topics", .parse = s_parse_topics,
      .offset = offsetof (fh_consumer_config_t, topics), .live = true },
    { .key = "queue", .parse = s_parse_section, .offset = 0,
      .section = &s_queue_section },
    { .key = "options", .parse = s_parse_options,
      .offset = offsetof (fh_consumer_config_t, options) },
    { .key = "retry", .parse = s_parse_section,
      .offset = offsetof (fh_consumer_config_t, retry), .section = &s_retry_section },
    { .key = "consume_timeout", .parse = s_parse_millis,
      .offset = offsetof (fh_consumer_config_t, consume_timeout_ms), .min = 0, .max = 86400 },
    { .key = "workers", .parse = s_parse_size,
      .offset = offsetof (fh_consumer_config_t, workers), .min = 1, .max = 256 },
    { .key = "order_by", .parse = s_parse_order_by,
      .offset = offsetof (fh_consumer_config_t, order_by) },
    { .key = "coalesce", .parse = s_parse_bool,
      .offset = offsetof (fh_consumer_config_t, coalesce) },
    { .key = "max_pending", .parse = s_parse_size,
      .offset = offsetof (fh_consumer_config_t, max_pending), .min = 1,
      .max = FH_MAX_MAX_PENDING },
    { .key = "shard", .parse = s_parse_shard,
      .offset = offsetof (fh_consumer_config_t, shard) },
    { .key = NULL },
};

static const s_section_t s_consumer_section = { s_consumer_fields,
                                                s_consumer_finish };

/* Consumer names seen so far: an open-addressed set of indices into
   cfg->consumers, so that 20,000 consumers are checked in linear time. */
typedef struct {
    size_t *slots; /* SIZE_MAX: empty */
    size_t mask;
} s_name_set_t;

static uint64_t
s_name_hash (const char *name)
{
    uint64_t hash = 14695981039346656037ULL; /* FNV-1a */
    for (; *name; name++)
        hash = (hash ^ (uint8_t) *name) * 1099511628211ULL;
    return hash;
}

/* The index of an earlier consumer named like consumers[index], or
   SIZE_MAX after adding index to the set. */
static size_t
s_name_set_find_or_add (s_name_set_t *set, const fh_consumer_config_t *consumers,
                        size_t index)
{
    size_t slot = (size_t) s_name_hash (consumers[index].name) & set->mask;
    while (set->slots[slot] != SIZE_MAX) {
        if (strcmp (consumers[set->slots[slot]].name, consumers[index].name) == 0)
            return set->slots[slot];
        slot = (slot + 1) & set->mask;
    }
    set->slots[slot] = index;
    return SIZE_MAX;
}

/* consumers[i], and its name checked against those before it. */
static int
s_parse_consumer (s_ctx_t *ctx, fh_config_t *cfg, yaml_node_t *node, size_t i,
                  s_name_set_t *names)
{
    yaml_node_t *item = s_node (ctx, node->data.sequence.items.start[i]);
    fh_consumer_config_t *consumer = &cfg->consumers[i];
    cfg->consumer_count = i + 1; /* destroy frees what is filled in */
    consumer->queue_capacity = FH_DEFAULT_QUEUE_CAPACITY;
    consumer->overflow = FH_OVERFLOW_UNSET;
    consumer->retry.max_attempts = FH_DEFAULT_RETRY_MAX_ATTEMPTS;
    consumer->retry.initial_ms = FH_DEFAULT_RETRY_INITIAL_MS;
    consumer->retry.max_ms = FH_DEFAULT_RETRY_MAX_MS;
    consumer->retry.jitter_permille = FH_DEFAULT_RETRY_JITTER_PERMILLE;
    consumer->consume_timeout_ms = FH_DEFAULT_CONSUME_TIMEOUT_MS;
    consumer->workers = 1;
    consumer->max_pending = FH_DEFAULT_MAX_PENDING;
    consumer->where = s_where (ctx, item->start_mark);
    if (!consumer->where)
        return s_oom (ctx, item->start_mark);
    size_t mark = s_path_index (ctx, i);
    if (s_parse_map (ctx, item, &s_consumer_section, consumer))
        return -1;
    size_t j = s_name_set_find_or_add (names, cfg->consumers, i);
    if (j != SIZE_MAX) {
        yaml_node_t *first = s_map_find (
            ctx, s_node (ctx, node->data.sequence.items.start[j]), "name");
        s_path_key (ctx, "name");
        return s_error (ctx, s_map_find (ctx, item, "name")->start_mark,
                        "duplicate consumer name '%s' (first used by "
                        "consumers[%zu] at line %zu)",
                        consumer->name, j, first->start_mark.line + 1);
    }
    s_path_pop (ctx, mark);
    return 0;
}

/* The consumers: list; every name used once. */
static int
s_parse_consumers (s_ctx_t *ctx, yaml_node_t *node, void *target,
                   const s_field_t *field)
{
    (void) field;
    fh_config_t *cfg = target;
    size_t count = s_count (node);
    if (node->type != YAML_SEQUENCE_NODE || count == 0) {
        char buf[S_GOT_SIZE];
        return s_error (ctx, node->start_mark,
                        "expected a list of at least one consumer, got %s",
                        s_got (node, buf, sizeof buf));
    }
    if (count > S_CONSUMERS_MAX)
        return s_error (ctx, node->start_mark,
                        "%zu consumers: a hub runs at most %d (each has a thread); "
                        "split them over several hubs", count, S_CONSUMERS_MAX);
    cfg->consumers = calloc (count, sizeof *cfg->consumers);
    if (!cfg->consumers)
        return s_oom (ctx, node->start_mark);
    s_name_set_t names = {NULL, 1};
    while (names.mask + 1 < 2 * count)
        names.mask = names.mask * 2 + 1;
    names.slots = malloc ((names.mask + 1) * sizeof *names.slots);
    if (!names.slots)
        return s_oom (ctx, node->start_mark);
    memset (names.slots, 0xff, (names.mask + 1) * sizeof *names.slots);
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++)
        rc = s_parse_consumer (ctx, cfg, node, i, &names);
    free (names.slots);
    return rc;
}

/* What depends on several sections: overflow defaults and needs, the
   consumers' worker settings, the log level. */
static int
s_top_finish (s_ctx_t *ctx, yaml_node_t *node, void *target)
{
    fh_config_t *cfg = target;
    static const fanhub_log_level_t levels[] = {FANHUB_LOG_ERROR, FANHUB_LOG_WARNING,
                                                FANHUB_LOG_INFO, FANHUB_LOG_DEBUG};
    cfg->log_level = (int) levels[cfg->log_level];
    yaml_node_t *list = s_map_find (ctx, node, "consumers");
    for (size_t i = 0; i < cfg->consumer_count; i++) {
        fh_consumer_config_t *consumer = &cfg->consumers[i];
        yaml_node_t *item = list ? s_node (ctx, list->data.sequence.items.start[i]) : node;
        if (consumer->overflow == FH_OVERFLOW_UNSET)
            consumer->overflow = cfg->state_dir ? FH_OVERFLOW_SPILL : FH_OVERFLOW_DROP_NEWEST;
        if (consumer->overflow == FH_OVERFLOW_SPILL && !cfg->state_dir) {
            snprintf (ctx->path, sizeof ctx->path, "consumers[%zu].queue.overflow", i);
            return s_error (ctx, item->start_mark,
                            "spill needs a state_dir: (where the spool is kept)");
        }
        if (consumer->coalesce && !consumer->order_by) {
            snprintf (ctx->path, sizeof ctx->path, "consumers[%zu].coalesce", i);
            return s_error (ctx, item->start_mark,
                            "coalescing replaces a queued message of the same key: "
                            "it needs order_by:");
        }
        if (consumer->retry.max_ms < consumer->retry.initial_ms) {
            snprintf (ctx->path, sizeof ctx->path, "consumers[%zu].retry.max_ms", i);
            return s_error (ctx, item->start_mark, "%lld is below retry.initial_ms (%lld)",
                            (long long) consumer->retry.max_ms,
                            (long long) consumer->retry.initial_ms);
        }
    }
    ctx->path[0] = '\0';
    return cfg->control ? 0 : s_control_default (ctx, node, cfg);
}

static const s_field_t s_top_fields[] = {
    { .key = "name", .parse = s_parse_name,
      .offset = offsetof (fh_config_t, name) },
    { .key = "bus", .parse = s_parse_section, .offset = 0,
      .section = &s_bus_section, .required = true },
    { .key = "control", .parse = s_parse_control,
      .offset = offsetof (fh_config_t, control) },
    { .key = "shutdown_timeout", .parse = s_parse_millis,
      .offset = offsetof (fh_config_t, shutdown_timeout_ms), .min = 0,
      .max = S_SHUTDOWN_TIMEOUT_MAX_S, .live = true },
    { .key = "consumers", .parse = s_parse_consumers, .offset = 0,
      .required = true, .live = true },
    { .key = "state_dir", .parse = s_parse_path,
      .offset = offsetof (fh_config_t, state_dir) },
    { .key = "spool", .parse = s_parse_section, .offset = 0, .section = &s_spool_section },
    { .key = "log_level", .parse = s_parse_enum,
      .offset = offsetof (fh_config_t, log_level), .choices = s_log_level_words,
      .live = true },
    { .key = "metrics", .parse = s_parse_section,
      .offset = offsetof (fh_config_t, metrics), .section = &s_metrics_section },
    { .key = NULL },
};

static const s_section_t s_top_section = { s_top_fields, s_top_finish };

/* ------------------------------------------------------------------ */
/* Comparing two configurations, key by key, from the same tables that
   parse them.                                                          */

static bool
s_string_equal (const char *a, const char *b)
{
    return a == b || (a && b && strcmp (a, b) == 0);
}

static bool
s_strlist_equal (const fh_strlist_t *a, const fh_strlist_t *b)
{
    if (a->count != b->count)
        return false;
    for (size_t i = 0; i < a->count; i++)
        if (strcmp (a->items[i], b->items[i]) != 0)
            return false;
    return true;
}

/* Whether a field holds the same value in a and b (the field's address
   in each). Every parse function stores one type: a function missing
   here is a programmer's error, caught by the unit test that compares
   every key. */
static bool
s_field_equal (const s_field_t *field, const void *a, const void *b)
{
    s_parse_fn *parse = field->parse;
    if (parse == s_parse_int || parse == s_parse_enum)
        return *(const int *) a == *(const int *) b;
    if (parse == s_parse_int64 || parse == s_parse_millis || parse == s_parse_permille)
        return *(const int64_t *) a == *(const int64_t *) b;
    if (parse == s_parse_size)
        return *(const size_t *) a == *(const size_t *) b;
    if (parse == s_parse_bool)
        return *(const bool *) a == *(const bool *) b;
    if (parse == s_parse_name || parse == s_parse_plugin || parse == s_parse_control
        || parse == s_parse_path || parse == s_parse_listen || parse == s_parse_bind_endpoint
        || parse == s_parse_order_by || parse == s_parse_producer || parse == s_parse_key)
        return s_string_equal (*(char *const *) a, *(char *const *) b);
    if (parse == s_parse_endpoints || parse == s_parse_topics || parse == s_parse_keys
        || parse == s_parse_addresses)
        return s_strlist_equal (a, b);
    if (parse == s_parse_shard)
        return memcmp (a, b, 2 * sizeof (size_t)) == 0;
    if (parse == s_parse_options || parse == s_parse_amqp)
        return fh_option_equal (*(fanhub_option_t *const *) a, *(fanhub_option_t *const *) b);
    assert (!"a configuration field without a comparison");
    return false;
}

/* Appends to out the keys of section (at a and b) that differ and are
   not live; returns how many. Consumers are compared by the hub. */
static size_t
s_diff_section (const s_section_t *section, const char *prefix, const void *a,
                const void *b, bool live_only, char *out, size_t outlen)
{
    size_t found = 0;
    for (const s_field_t *field = section->fields; field->key; field++) {
        const char *fa = (const char *) a + field->offset;
        const char *fb = (const char *) b + field->offset;
        char key[128];
        snprintf (key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", field->key);
        if (field->parse == s_parse_consumers)
            continue;
        if (field->parse == s_parse_section) {
            found += s_diff_section (field->section, key, fa, fb, live_only, out, outlen);
            continue;
        }
        if (field->live == live_only && !s_field_equal (field, fa, fb)) {
            size_t used = strlen (out);
            snprintf (out + used, outlen - used, "%s%s", used ? ", " : "", key);
            found++;
        }
    }
    return found;
}

size_t
fh_config_restart_keys (const fh_config_t *running, const fh_config_t *next, char *out,
                        size_t outlen)
{
    out[0] = '\0';
    return s_diff_section (&s_top_section, "", running, next, false, out, outlen);
}

bool
fh_config_consumer_same (const fh_consumer_config_t *a, const fh_consumer_config_t *b)
{
    char keys[512] = "";
    /* "where" is not a key: a consumer that moved in the file is the same. */
    return s_diff_section (&s_consumer_section, "", a, b, false, keys, sizeof keys) == 0;
}

/* ------------------------------------------------------------------ */
/* Loading                                                              */

/* Reports what libyaml refused. */
static void
s_yaml_error (s_ctx_t *ctx, yaml_parser_t *parser, const char *text,
              size_t len)
{
    if (parser->error == YAML_MEMORY_ERROR || !parser->problem) {
        if (ctx->err && ctx->errlen)
            snprintf (ctx->err, ctx->errlen, "%s: out of memory",
                      ctx->source);
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
            s_error (ctx, mark, "YAML syntax error: %s (byte 0x%02x at offset %zu)",
                     parser->problem, (unsigned) parser->problem_value,
                     parser->problem_offset);
        else
            s_error (ctx, mark, "YAML syntax error: %s (at offset %zu)",
                     parser->problem, parser->problem_offset);
        return;
    }
    static const char dup_anchor[] = "found duplicate anchor";
    if (parser->context
        && strncmp (parser->context, dup_anchor, strlen (dup_anchor)) == 0)
        /* libyaml's context here is "...; first occurrence". */
        s_error (ctx, mark, "YAML syntax error: %s (first occurrence at line "
                 "%zu)", dup_anchor, parser->context_mark.line + 1);
    else if (parser->context)
        s_error (ctx, mark, "YAML syntax error: %s (%s)", parser->problem,
                 parser->context);
    else
        s_error (ctx, mark, "YAML syntax error: %s", parser->problem);
}

static fh_config_t *
s_load_document (s_ctx_t *ctx, yaml_parser_t *parser, const char *text,
                 size_t len)
{
    yaml_document_t second;
    yaml_node_t *root = yaml_document_get_root_node (ctx->doc);
    if (!root || s_is_null (root)) {
        yaml_mark_t mark = root ? root->start_mark : ctx->doc->start_mark;
        s_error (ctx, mark, "empty configuration: expected a map with at "
                            "least bus: and consumers:");
        return NULL;
    }
    if (!yaml_parser_load (parser, &second)) {
        s_yaml_error (ctx, parser, text, len);
        return NULL;
    }
    bool more = yaml_document_get_root_node (&second) != NULL;
    yaml_mark_t mark = second.start_mark;
    yaml_document_delete (&second);
    if (more) {
        s_error (ctx, mark, "a second YAML document: the configuration is "
                            "one document");
        return NULL;
    }

    fh_config_t *cfg = calloc (1, sizeof *cfg);
    if (!cfg || !(cfg->source = strdup (ctx->source))) {
        free (cfg);
        s_oom (ctx, root->start_mark);
        return NULL;
    }
    cfg->rcvhwm = FH_DEFAULT_RCVHWM;
    cfg->max_frames = FH_DEFAULT_MAX_FRAMES;
    cfg->max_message_bytes = FH_DEFAULT_MAX_MESSAGE_BYTES;
    cfg->shutdown_timeout_ms = FH_DEFAULT_SHUTDOWN_TIMEOUT_MS;
    cfg->metrics.interval_ms = FH_DEFAULT_METRICS_INTERVAL_MS;
    cfg->metrics.moksha_interval_ms = FH_DEFAULT_MOKSHA_INTERVAL_MS;
    cfg->spool.fsync = FH_FSYNC_INTERVAL;
    cfg->gaps.max_producers = 10000;
    cfg->spool.fsync_interval_ms = FH_DEFAULT_SPOOL_FSYNC_INTERVAL_MS;
    cfg->spool.segment_bytes = FH_DEFAULT_SPOOL_SEGMENT_BYTES;
    cfg->log_level = 2; /* info: index in s_log_level_words */
    ctx->cfg = cfg;
    if (s_parse_map (ctx, root, &s_top_section, cfg))
        fh_config_destroy (&cfg);
    return cfg;
}

/* Reads the events of the text, without building anything, to refuse
   a document nested deeper than S_DEPTH_MAX before libyaml builds it
   (a deep one costs it time and memory out of proportion). Returns 0,
   or -1 with the error in ctx (a syntax error is left to the load). */
static int
s_check_depth (s_ctx_t *ctx, const char *text, size_t len)
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
            if (++depth > S_DEPTH_MAX) {
                ctx->path[0] = '\0';
                rc = s_error (ctx, event.start_mark, "nested deeper than %d levels",
                              S_DEPTH_MAX);
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

fh_config_t *
fh_config_load_string (const char *text, size_t len, const char *source,
                       char *err, size_t errlen)
{
    s_ctx_t ctx = { .source = source ? source : "<string>", .err = err,
                    .errlen = errlen };
    if (err && errlen)
        err[0] = '\0';
    if (!text)
        len = 0;
    if (len > S_FILE_BYTES_MAX) {
        if (err && errlen)
            snprintf (err, errlen, "%s: %zu bytes: a configuration is at most %d MiB",
                      ctx.source, len, S_FILE_BYTES_MAX / (1024 * 1024));
        return NULL;
    }
    if (text && s_check_depth (&ctx, text, len) != 0)
        return NULL;
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize (&parser)) {
        if (err && errlen)
            snprintf (err, errlen, "%s: out of memory", ctx.source);
        return NULL;
    }
    yaml_parser_set_input_string (&parser,
                                  (const unsigned char *) (text ? text : ""),
                                  len);
    fh_config_t *cfg = NULL;
    if (!yaml_parser_load (&parser, &doc))
        s_yaml_error (&ctx, &parser, text, len);
    else {
        ctx.doc = &doc;
        cfg = s_load_document (&ctx, &parser, text, len);
        yaml_document_delete (&doc);
    }
    yaml_parser_delete (&parser);
    return cfg;
}

fh_config_t *
fh_config_load_file (const char *path, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    FILE *file = fopen (path, "rb");
    struct stat st;
    int error = 0;
    if (!file)
        error = errno;
    else if (fstat (fileno (file), &st) == 0 && S_ISDIR (st.st_mode))
        error = EISDIR;
    if (error) {
        if (file)
            fclose (file);
        if (err && errlen)
            snprintf (err, errlen, "%s: cannot open: %s", path,
                      strerror (error));
        return NULL;
    }

    char *text = NULL;
    size_t len = 0, size = 0;
    for (;;) {
        if (len == size) {
            size = size ? size * 2 : 4096;
            char *grown = realloc (text, size);
            if (!grown) {
                error = ENOMEM;
                break;
            }
            text = grown;
        }
        size_t got = fread (text + len, 1, size - len, file);
        len += got;
        if (len > S_FILE_BYTES_MAX)
            break; /* refused by the load, without reading the rest */
        if (got == 0) {
            if (ferror (file))
                error = errno ? errno : EIO;
            break;
        }
    }
    fclose (file);
    fh_config_t *cfg = NULL;
    if (error) {
        if (err && errlen)
            snprintf (err, errlen, "%s: cannot read: %s", path,
                      strerror (error));
    }
    else
        cfg = fh_config_load_string (text, len, path, err, errlen);
    free (text);
    return cfg;
}

void
fh_config_destroy (fh_config_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    fh_config_t *self = *self_p;
    *self_p = NULL;
    for (size_t i = 0; i < self->consumer_count; i++) {
        fh_consumer_config_t *consumer = &self->consumers[i];
        free (consumer->name);
        free (consumer->plugin);
        s_strlist_clear (&consumer->topics);
        fh_option_destroy (&consumer->options);
        free (consumer->where);
        free (consumer->order_by);
    }
    free (self->consumers);
    s_strlist_clear (&self->connect);
    s_strlist_clear (&self->bind);
    free (self->source);
    free (self->name);
    free (self->control);
    free (self->metrics.collectd_socket);
    free (self->state_dir);
    free (self->gaps.counter);
    free (self->gaps.producer);
    s_strlist_clear (&self->publish);
    fh_option_destroy (&self->amqp);
    free (self->curve.secret_key_file);
    free (self->curve.server_public_key);
    s_strlist_clear (&self->curve.allow);
    free (self->curve.allow_dir);
    memset (self->curve.secret_key, 0, sizeof self->curve.secret_key);
    s_strlist_clear (&self->allow_ip);
    free (self->metrics.prometheus_listen);
    free (self->metrics.moksha_socket);
    free (self);
}
