/*  testing - the fake host of <fanhub/testing.h> (libfanhub-testing.a).

    Options and messages are the plain structs of that header; options are
    read by the hub's own reader (hub/plugin/option_table.c, built into
    this library with the value and endpoint grammars it uses), so a
    plugin's test and the hub never disagree about an option.
*/
#include <fanhub/testing.h>

#include "option_table.h"
#include "plugin_metrics.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const fanhub_consumer_desc_t *fanhub_fake_host_loaded;

void
fanhub_fake_ctx_init (fanhub_ctx_t *ctx)
{
    memset (ctx, 0, sizeof *ctx);
    pthread_mutex_init (&ctx->lock, NULL);
}

fanhub_msg_t
fanhub_fake_msg (const void *topic, size_t topic_size, const void *body, size_t body_size,
                 uint64_t seq, int64_t ns)
{
    fanhub_msg_t msg = {.nframes = 2, .seq = seq, .ns = ns};
    msg.frames[0] = (fanhub_bytes_t){topic, topic_size};
    msg.frames[1] = (fanhub_bytes_t){body, body_size};
    return msg;
}

void
fanhub_fake_host_log (fanhub_ctx_t *ctx, fanhub_log_level_t level, const char *fmt, ...)
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

const char *
fanhub_fake_host_consumer_name (fanhub_ctx_t *ctx)
{
    return ctx->name ? ctx->name : "test";
}

fanhub_option_kind_t
fanhub_fake_host_option_kind (const fanhub_option_t *node)
{
    return node ? node->kind : (fanhub_option_kind_t) 0;
}

const fanhub_option_t *
fanhub_fake_host_option_get (const fanhub_option_t *map, const char *key)
{
    if (!map || map->kind != FANHUB_OPTION_MAP)
        return NULL;
    for (size_t i = 0; i < map->count; i++)
        if (strcmp (map->items[i].key, key) == 0)
            return &map->items[i];
    return NULL;
}

const char *
fanhub_fake_host_option_scalar (const fanhub_option_t *node)
{
    return node && node->kind == FANHUB_OPTION_SCALAR ? node->text : NULL;
}

size_t
fanhub_fake_host_option_count (const fanhub_option_t *node)
{
    return node && node->kind != FANHUB_OPTION_SCALAR ? node->count : 0;
}

const fanhub_option_t *
fanhub_fake_host_option_at (const fanhub_option_t *node, size_t i, const char **key)
{
    if (!node || node->kind == FANHUB_OPTION_SCALAR || i >= node->count)
        return NULL;
    if (key)
        *key = node->items[i].key;
    return &node->items[i];
}

const char *
fanhub_fake_host_option_where (const fanhub_option_t *node)
{
    return node && node->where ? node->where : "?";
}

fanhub_bytes_t
fanhub_fake_host_msg_frame (const fanhub_msg_t *msg, size_t i)
{
    return i < msg->nframes ? msg->frames[i] : (fanhub_bytes_t){NULL, 0};
}

fanhub_bytes_t
fanhub_fake_host_msg_topic (const fanhub_msg_t *msg)
{
    return msg->frames[0];
}

fanhub_bytes_t
fanhub_fake_host_msg_body (const fanhub_msg_t *msg)
{
    return msg->frames[1];
}

size_t
fanhub_fake_host_msg_frame_count (const fanhub_msg_t *msg)
{
    return msg->nframes;
}

uint64_t
fanhub_fake_host_msg_seq (const fanhub_msg_t *msg)
{
    return msg->seq;
}

int64_t
fanhub_fake_host_msg_received_ns (const fanhub_msg_t *msg)
{
    return msg->ns;
}

void
fanhub_fake_host_set_reason (fanhub_ctx_t *ctx, const char *fmt, ...)
{
    pthread_mutex_lock (&ctx->lock); /* plugins may answer on several threads */
    va_list args;
    va_start (args, fmt);
    vsnprintf (ctx->reason, sizeof ctx->reason, fmt, args);
    va_end (args);
    pthread_mutex_unlock (&ctx->lock);
}

int
fanhub_fake_host_publish (fanhub_ctx_t *ctx, const char *topic, const void *body, size_t size)
{
    (void) body;
    pthread_mutex_lock (&ctx->lock); /* plugins may publish from their own threads */
    ctx->published++;
    snprintf (ctx->published_topic, sizeof ctx->published_topic, "%s", topic ? topic : "");
    ctx->published_size = size;
    pthread_mutex_unlock (&ctx->lock);
    return 0;
}

void
fanhub_fake_host_set_window (fanhub_ctx_t *ctx, size_t n)
{
    pthread_mutex_lock (&ctx->lock);
    ctx->window = n;
    pthread_mutex_unlock (&ctx->lock);
}

void
fanhub_fake_host_ticket_started (fanhub_ctx_t *ctx, fanhub_ticket_t ticket)
{
    (void) ticket;
    pthread_mutex_lock (&ctx->lock); /* from the plugin's own threads */
    ctx->started++;
    pthread_mutex_unlock (&ctx->lock);
}

/* The metric sets the fake contexts made: kept reachable, for a leak
   checker, as the hub keeps its contexts' (a test's ctx has no fini). */
static pthread_mutex_t s_sets_lock = PTHREAD_MUTEX_INITIALIZER;
static fh_plugin_metrics_t *s_sets[256];
static size_t s_set_count;

fanhub_metric_t *
fanhub_fake_host_metric_new (fanhub_ctx_t *ctx, const char *name, int kind, const char *help,
                             char *err, size_t errlen)
{
    const fanhub_consumer_desc_t *desc = ctx->desc ? ctx->desc : fanhub_fake_host_loaded;
    char why[256];
    fanhub_metric_t *metric = fh_plugin_metric_new (&ctx->metrics, desc ? desc->name : NULL, name,
                                                    kind, help, why, sizeof why);
    if (!metric && err && errlen)
        snprintf (err, errlen, "%s", why);
    pthread_mutex_lock (&s_sets_lock);
    bool known = false;
    for (size_t i = 0; i < s_set_count; i++)
        known = known || s_sets[i] == ctx->metrics;
    if (ctx->metrics && !known && s_set_count < sizeof s_sets / sizeof s_sets[0])
        s_sets[s_set_count++] = ctx->metrics;
    pthread_mutex_unlock (&s_sets_lock);
    return metric;
}

int64_t
fanhub_fake_host_metric (fanhub_ctx_t *ctx, const char *name)
{
    fh_plugin_metrics_t *set = fh_plugin_metrics_of (&ctx->metrics);
    for (size_t i = 0; i < fh_plugin_metrics_count (set); i++)
        if (strcmp (set->items[i].name, name) == 0)
            return fh_plugin_metric_value (&set->items[i]);
    return INT64_MIN;
}

const fanhub_host_t fanhub_fake_host = {
    .abi_major = FANHUB_ABI_MAJOR,
    .abi_minor = FANHUB_ABI_MINOR,
    .size = sizeof (fanhub_host_t),
    .log = fanhub_fake_host_log,
    .consumer_name = fanhub_fake_host_consumer_name,
    .option_kind = fanhub_fake_host_option_kind,
    .option_get = fanhub_fake_host_option_get,
    .option_scalar = fanhub_fake_host_option_scalar,
    .option_count = fanhub_fake_host_option_count,
    .option_at = fanhub_fake_host_option_at,
    .option_where = fanhub_fake_host_option_where,
    .msg_topic = fanhub_fake_host_msg_topic,
    .msg_body = fanhub_fake_host_msg_body,
    .msg_frame_count = fanhub_fake_host_msg_frame_count,
    .msg_frame = fanhub_fake_host_msg_frame,
    .msg_seq = fanhub_fake_host_msg_seq,
    .msg_received_ns = fanhub_fake_host_msg_received_ns,
    .options_read = fanhub_fake_host_options_read,
    .set_reason = fanhub_fake_host_set_reason,
    .options_load = fanhub_fake_host_options_load,
    .publish = fanhub_fake_host_publish,
    .set_window = fanhub_fake_host_set_window,
    .ticket_started = fanhub_fake_host_ticket_started,
    .metric_new = fanhub_fake_host_metric_new,
    .metric_add = fh_plugin_metric_add,
    .metric_set = fh_plugin_metric_set,
};

int
fanhub_fake_host_options_read (fanhub_ctx_t *ctx, const fanhub_consumer_desc_t *desc,
                               const fanhub_option_t *options, void *values, size_t values_size,
                               char *err, size_t errlen)
{
    (void) ctx;
    return fh_option_table_read (&fanhub_fake_host, desc->name, desc->options, options, values,
                                 values_size, err, errlen);
}

int
fanhub_fake_host_options_load (fanhub_ctx_t *ctx, const fanhub_option_t *options, void *values,
                               size_t values_size, char *err, size_t errlen)
{
    const fanhub_consumer_desc_t *desc = ctx && ctx->desc ? ctx->desc : fanhub_fake_host_loaded;
    if (!desc) {
        snprintf (err, errlen,
                  "fake host: no descriptor (set ctx->desc, or load the plugin "
                  "with fanhub_fake_plugin_load)");
        return -1;
    }
    return fanhub_fake_host_options_read (ctx, desc, options, values, values_size, err, errlen);
}

const fanhub_consumer_desc_t *
fanhub_fake_plugin_load (const char *path, void **dl)
{
    *dl = dlopen (path, RTLD_NOW | RTLD_LOCAL);
    if (!*dl) {
        fprintf (stderr, "dlopen: %s\n", dlerror ());
        return NULL;
    }
    fanhub_consumer_entry_fn entry;
    *(void **) &entry = dlsym (*dl, FANHUB_CONSUMER_ENTRY_SYMBOL);
    if (!entry) {
        fprintf (stderr, "dlsym: %s\n", dlerror ());
        return NULL;
    }
    fanhub_fake_host_loaded = entry ();
    return fanhub_fake_host_loaded;
}

int
fanhub_fake_plugin_open (fanhub_fake_plugin_t *plugin, const char *path, const char *name)
{
    memset (plugin, 0, sizeof *plugin);
    const char *tmp = getenv ("TMPDIR");
    int n = snprintf (plugin->dir, sizeof plugin->dir, "%s/%s-XXXXXX", tmp && *tmp ? tmp : "/tmp",
                      name);
    if (n < 0 || (size_t) n >= sizeof plugin->dir || !mkdtemp (plugin->dir)) {
        fprintf (stderr, "fake host: cannot make %s: %s\n", plugin->dir,
                 n < 0 || (size_t) n >= sizeof plugin->dir ? "too long" : strerror (errno));
        plugin->dir[0] = '\0';
        return -1;
    }
    plugin->desc = fanhub_fake_plugin_load (path, &plugin->dl);
    return plugin->desc ? 0 : -1;
}

/* rm -r path, never following a link. */
static void
s_remove_tree (const char *path)
{
    struct stat st;
    DIR *dir = lstat (path, &st) == 0 && S_ISDIR (st.st_mode) ? opendir (path) : NULL;
    if (dir) {
        struct dirent *entry;
        while ((entry = readdir (dir))) {
            if (strcmp (entry->d_name, ".") == 0 || strcmp (entry->d_name, "..") == 0)
                continue;
            char child[1024];
            int n = snprintf (child, sizeof child, "%s/%s", path, entry->d_name);
            if (n > 0 && (size_t) n < sizeof child)
                s_remove_tree (child);
        }
        closedir (dir);
    }
    if (remove (path) != 0)
        fprintf (stderr, "fake host: cannot remove %s: %s\n", path, strerror (errno));
}

void
fanhub_fake_plugin_close (fanhub_fake_plugin_t *plugin)
{
    if (plugin->dl)
        dlclose (plugin->dl);
    if (plugin->dir[0])
        s_remove_tree (plugin->dir);
    memset (plugin, 0, sizeof *plugin);
}

int
fanhub_fake_option_case (const fanhub_consumer_desc_t *desc, fanhub_ctx_t *ctx,
                         const fanhub_option_t *options, const char *expected, char *got,
                         size_t got_size)
{
    void *state = NULL;
    char err[1024] = "";
    int rc = desc->init (&fanhub_fake_host, ctx, options, &state, err, sizeof err);
    if (rc == 0 && desc->fini)
        desc->fini (state);
    if (expected ? rc == -1 && strcmp (err, expected) == 0 && !state : rc == 0)
        return 0;
    snprintf (got, got_size, "rc %d%s\n got: %s\nwant: %s", rc,
              rc != 0 && state ? " (and a state left set)" : "", rc == 0 ? "(accepted)" : err,
              expected ? expected : "(accepted)");
    return -1;
}
