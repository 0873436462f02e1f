/*  fake_host - the host table a plugin test hands to a shipped plugin.

    A plugin is loaded with dlopen as the hub loads it, but its init gets
    this table instead of the hub's: options and messages are plain structs
    here and nothing of the hub is used. That is what the host-table ABI
    (fanhub/consumer.h) is for.

    Options: fanhub_option_t trees written as literals (kind, key when an
    entry of a map, text when a scalar, where for messages, items/count
    for lists and maps). Messages: fake_msg gives a topic and a body; set
    frames[2..3] and nframes for more frames. The context records what the
    plugin logged: the count of lines, the last one and all of them (under
    a lock: plugins may log from their own threads). Include it once, in
    the test's .c file, after <fanhub/consumer.h> and <cmocka.h>.
*/
#ifndef FAKE_HOST_H_INCLUDED
#define FAKE_HOST_H_INCLUDED

#include <fanhub/consumer.h>

#include "option_table.h" /* the hub's own reading of option tables */

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct fanhub_option {
    fanhub_option_kind_t kind;
    const char *key;  /* as an entry of a map */
    const char *text; /* scalars */
    const char *where;
    const struct fanhub_option *items; /* lists and maps */
    size_t count;
};

struct fanhub_msg {
    fanhub_bytes_t frames[4];
    size_t nframes;
    uint64_t seq;
    int64_t ns; /* received_ns */
};

struct fanhub_ctx {
    const char *name; /* consumer_name; NULL: "test" */
    bool skip_debug;  /* do not record FANHUB_LOG_DEBUG lines */
    pthread_mutex_t lock;
    int lines;                          /* lines logged */
    char last[1024];                    /* the last of them */
    char all[16384];                    /* all of them, each ending in '\n' (cut when full) */
    char reason[256];                   /* the last host->set_reason (under the lock) */
    const fanhub_consumer_desc_t *desc; /* options_load's table; NULL: the
                                           plugin fake_plugin_load loaded */
};

/* The descriptor of the plugin fake_plugin_load loaded last. */
static const fanhub_consumer_desc_t *fake_host_loaded;

/* A context that has logged nothing, named "test". */
static inline void
fake_ctx_init (fanhub_ctx_t *ctx)
{
    memset (ctx, 0, sizeof *ctx);
    pthread_mutex_init (&ctx->lock, NULL);
}

/* A message of two frames, topic and body. */
static inline fanhub_msg_t
fake_msg (const void *topic, size_t topic_size, const void *body, size_t body_size, uint64_t seq,
          int64_t ns)
{
    fanhub_msg_t msg = {.nframes = 2, .seq = seq, .ns = ns};
    msg.frames[0] = (fanhub_bytes_t){topic, topic_size};
    msg.frames[1] = (fanhub_bytes_t){body, body_size};
    return msg;
}

static void fake_host_log (fanhub_ctx_t *ctx, fanhub_log_level_t level, const char *fmt, ...)
    FANHUB_PRINTF (3, 4);

static void
fake_host_log (fanhub_ctx_t *ctx, fanhub_log_level_t level, const char *fmt, ...)
{
    if (ctx->skip_debug && level == FANHUB_LOG_DEBUG)
        return;
    pthread_mutex_lock (&ctx->lock);
    va_list args;
    va_start (args, fmt);
    vsnprintf (ctx->last, sizeof ctx->last, fmt, args);
    va_end (args);
    size_t len = strlen (ctx->all);
    snprintf (ctx->all + len, sizeof ctx->all - len, "%s\n", ctx->last);
    ctx->lines++;
    pthread_mutex_unlock (&ctx->lock);
}

static const char *
fake_host_consumer_name (fanhub_ctx_t *ctx)
{
    return ctx->name ? ctx->name : "test";
}

static fanhub_option_kind_t
fake_host_option_kind (const fanhub_option_t *node)
{
    return node ? node->kind : (fanhub_option_kind_t) 0;
}

static const fanhub_option_t *
fake_host_option_get (const fanhub_option_t *map, const char *key)
{
    if (!map || map->kind != FANHUB_OPTION_MAP)
        return NULL;
    for (size_t i = 0; i < map->count; i++)
        if (strcmp (map->items[i].key, key) == 0)
            return &map->items[i];
    return NULL;
}

static const char *
fake_host_option_scalar (const fanhub_option_t *node)
{
    return node && node->kind == FANHUB_OPTION_SCALAR ? node->text : NULL;
}

static size_t
fake_host_option_count (const fanhub_option_t *node)
{
    return node && node->kind != FANHUB_OPTION_SCALAR ? node->count : 0;
}

static const fanhub_option_t *
fake_host_option_at (const fanhub_option_t *node, size_t i, const char **key)
{
    if (!node || node->kind == FANHUB_OPTION_SCALAR || i >= node->count)
        return NULL;
    if (key)
        *key = node->items[i].key;
    return &node->items[i];
}

static const char *
fake_host_option_where (const fanhub_option_t *node)
{
    return node ? node->where : "?";
}

static fanhub_bytes_t
fake_host_msg_frame (const fanhub_msg_t *msg, size_t i)
{
    return i < msg->nframes ? msg->frames[i] : (fanhub_bytes_t){NULL, 0};
}

static fanhub_bytes_t
fake_host_msg_topic (const fanhub_msg_t *msg)
{
    return msg->frames[0];
}

static fanhub_bytes_t
fake_host_msg_body (const fanhub_msg_t *msg)
{
    return msg->frames[1];
}

static size_t
fake_host_msg_frame_count (const fanhub_msg_t *msg)
{
    return msg->nframes;
}

static uint64_t
fake_host_msg_seq (const fanhub_msg_t *msg)
{
    return msg->seq;
}

static int64_t
fake_host_msg_received_ns (const fanhub_msg_t *msg)
{
    return msg->ns;
}

/* The hub's reader, over this host's accessors: a plugin's options are
   read the same way here as in the hub. */
static int fake_host_options_read (fanhub_ctx_t *ctx, const fanhub_consumer_desc_t *desc,
                                   const fanhub_option_t *options, void *values, size_t values_size,
                                   char *err, size_t errlen);

static int fake_host_options_load (fanhub_ctx_t *ctx, const fanhub_option_t *options, void *values,
                                   size_t values_size, char *err, size_t errlen);

static void fake_host_set_reason (fanhub_ctx_t *ctx, const char *fmt, ...) FANHUB_PRINTF (2, 3);

static void
fake_host_set_reason (fanhub_ctx_t *ctx, const char *fmt, ...)
{
    pthread_mutex_lock (&ctx->lock); /* plugins may answer on several threads */
    va_list args;
    va_start (args, fmt);
    vsnprintf (ctx->reason, sizeof ctx->reason, fmt, args);
    va_end (args);
    pthread_mutex_unlock (&ctx->lock);
}

static const fanhub_host_t fake_host = {
    .abi_major = FANHUB_ABI_MAJOR,
    .abi_minor = FANHUB_ABI_MINOR,
    .size = sizeof (fanhub_host_t),
    .log = fake_host_log,
    .consumer_name = fake_host_consumer_name,
    .option_kind = fake_host_option_kind,
    .option_get = fake_host_option_get,
    .option_scalar = fake_host_option_scalar,
    .option_count = fake_host_option_count,
    .option_at = fake_host_option_at,
    .option_where = fake_host_option_where,
    .msg_topic = fake_host_msg_topic,
    .msg_body = fake_host_msg_body,
    .msg_frame_count = fake_host_msg_frame_count,
    .msg_frame = fake_host_msg_frame,
    .msg_seq = fake_host_msg_seq,
    .msg_received_ns = fake_host_msg_received_ns,
    .options_read = fake_host_options_read,
    .set_reason = fake_host_set_reason,
    .options_load = fake_host_options_load,
};

static int
fake_host_options_read (fanhub_ctx_t *ctx, const fanhub_consumer_desc_t *desc,
                        const fanhub_option_t *options, void *values, size_t values_size, char *err,
                        size_t errlen)
{
    (void) ctx;
    return fh_option_table_read (&fake_host, desc->name, desc->options, options, values,
                                 values_size, err, errlen);
}

static int
fake_host_options_load (fanhub_ctx_t *ctx, const fanhub_option_t *options, void *values,
                        size_t values_size, char *err, size_t errlen)
{
    const fanhub_consumer_desc_t *desc = ctx && ctx->desc ? ctx->desc : fake_host_loaded;
    return fake_host_options_read (ctx, desc, options, values, values_size, err, errlen);
}

/* Loads a plugin as the hub does (dlopen, then its entry): its
   descriptor, with the handle in *dl (dlclose it); NULL with the reason
   printed. */
static inline const fanhub_consumer_desc_t *
fake_plugin_load (const char *path, void **dl)
{
    *dl = dlopen (path, RTLD_NOW | RTLD_LOCAL);
    if (!*dl) {
        print_error ("dlopen: %s\n", dlerror ());
        return NULL;
    }
    fanhub_consumer_entry_fn entry;
    *(void **) &entry = dlsym (*dl, FANHUB_CONSUMER_ENTRY_SYMBOL);
    if (!entry) {
        print_error ("dlsym: %s\n", dlerror ());
        return NULL;
    }
    fake_host_loaded = entry ();
    return fake_host_loaded;
}

#endif
