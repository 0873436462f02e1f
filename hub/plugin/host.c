/*  host - the host table handed to plugins. See host.h. */
#include "host.h"

#include "log.h"
#include "message.h"
#include "options.h"
#include "clock.h"
#include "consumer.h"
#include "option_table.h"
#include "plugin_metrics.h"

#include "fanhub/sdk.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void s_log (fanhub_ctx_t *ctx, fanhub_log_level_t level, const char *fmt, ...)
    FANHUB_PRINTF (3, 4);

static void
s_log (fanhub_ctx_t *ctx, fanhub_log_level_t level, const char *fmt, ...)
{
    char line[1024];
    va_list args;
    va_start (args, fmt);
    fanhub_utf8_vformat (line, sizeof line, fmt, args);
    va_end (args);
    fh_log (level, "consumer '%s': %s", ctx ? ctx->consumer_name : "?", line);
}

/* Late completes counted by consumer name once its instance's figures
   are final: the instance's own counter is not read any more. */
struct s_host_gone {
    char *name;
    atomic_uint_fast64_t late;
    struct s_host_gone *next;
};

static pthread_mutex_t s_gone_lock = PTHREAD_MUTEX_INITIALIZER;
static struct s_host_gone *s_gone; /* one per name, never freed */
static fanhub_ctx_t *s_retired;    /* poisoned contexts, never freed */

/* The name's counter, made when missing; NULL when out of memory. */
static struct s_host_gone *
s_gone_of (const char *name)
{
    pthread_mutex_lock (&s_gone_lock);
    struct s_host_gone *gone = s_gone;
    while (gone && strcmp (gone->name, name) != 0)
        gone = gone->next;
    if (!gone && (gone = calloc (1, sizeof *gone))) {
        if ((gone->name = strdup (name))) {
            atomic_init (&gone->late, 0);
            gone->next = s_gone;
            s_gone = gone;
        }
        else {
            free (gone);
            gone = NULL;
        }
    }
    pthread_mutex_unlock (&s_gone_lock);
    return gone;
}

uint64_t
fh_host_late_gone (const char *name)
{
    uint64_t late = 0;
    pthread_mutex_lock (&s_gone_lock);
    for (struct s_host_gone *gone = s_gone; gone; gone = gone->next)
        if (strcmp (gone->name, name) == 0)
            late = atomic_load_explicit (&gone->late, memory_order_relaxed);
    pthread_mutex_unlock (&s_gone_lock);
    return late;
}

fanhub_ctx_t *
fh_host_ctx_new (fh_consumer_t *consumer, const char *name)
{
    fanhub_ctx_t *ctx = calloc (1, sizeof *ctx);
    char *copy = ctx ? strdup (name) : NULL;
    if (!copy) {
        free (ctx);
        return NULL;
    }
    ctx->consumer_name = copy;
    ctx->consumer = consumer;
    atomic_init (&ctx->users, 0);
    atomic_init (&ctx->stale, false);
    atomic_init (&ctx->retired, false);
    atomic_init (&ctx->late_said, false);
    return ctx;
}

void
fh_host_ctx_set_plugin (fanhub_ctx_t *ctx, const char *plugin)
{
    free (ctx->plugin);
    ctx->plugin = plugin ? strdup (plugin) : NULL;
}

void
fh_host_ctx_stale (fanhub_ctx_t *ctx)
{
    if (!ctx || atomic_load (&ctx->stale))
        return;
    ctx->gone = s_gone_of (ctx->consumer_name);
    atomic_store (&ctx->stale, true); /* after gone: a reader of stale sees it */
}

void
fh_host_ctx_retire (fanhub_ctx_t **ctx_p)
{
    fanhub_ctx_t *ctx = *ctx_p;
    if (!ctx)
        return;
    *ctx_p = NULL;
    fh_host_ctx_stale (ctx);
    /* Sequentially consistent with s_enter: a call either saw retired, or
       is counted in users, which is waited for. */
    atomic_store (&ctx->retired, true);
    while (atomic_load (&ctx->users))
        sched_yield ();
    pthread_mutex_lock (&s_gone_lock);
    ctx->next = s_retired;
    s_retired = ctx;
    pthread_mutex_unlock (&s_gone_lock);
}

/* The consumer behind ctx, counted as a call inside it (s_leave ends it),
   or NULL: none (a stack context), or retired. */
static fh_consumer_t *
s_enter (fanhub_ctx_t *ctx)
{
    if (!ctx || !ctx->consumer)
        return NULL;
    atomic_fetch_add (&ctx->users, 1);
    if (atomic_load (&ctx->retired)) {
        atomic_fetch_sub (&ctx->users, 1);
        return NULL;
    }
    return ctx->consumer;
}

static void
s_leave (fanhub_ctx_t *ctx)
{
    atomic_fetch_sub (&ctx->users, 1);
}

/* A complete that came too late to count in its instance's figures:
   counted under the name; after retirement logged once per instance. */
static void
s_late_gone (fanhub_ctx_t *ctx, fanhub_ticket_t ticket, const char *call)
{
    if (ctx->gone)
        atomic_fetch_add_explicit (&ctx->gone->late, 1, memory_order_relaxed);
    if (atomic_load (&ctx->retired) && !atomic_exchange (&ctx->late_said, true))
        fh_warning ("%s: consumer '%s', plugin %s: ticket %llu completed after the instance "
                    "was torn down (its fini had returned): ignored, counted in "
                    "completions_late (later ones of this instance are counted only)",
                    call, ctx->consumer_name, ctx->plugin ? ctx->plugin : "?",
                    (unsigned long long) ticket);
}

/* The one path of complete and complete_reason. */
static void
s_finish (fanhub_ctx_t *ctx, fanhub_ticket_t ticket, fanhub_result_t result, const char *reason,
          const char *call)
{
    fh_consumer_t *consumer = s_enter (ctx);
    if (!consumer) {
        if (ctx && ctx->consumer)
            s_late_gone (ctx, ticket, call); /* retired */
        else
            fh_error ("%s: consumer '%s': no consumer to complete ticket %llu for", call,
                      ctx ? ctx->consumer_name : "?", (unsigned long long) ticket);
        return;
    }
    if (fh_consumer_complete_try (consumer, ticket, result, reason) != 0) {
        if (atomic_load (&ctx->stale))
            s_late_gone (ctx, ticket, call);
        else
            fh_consumer_count_late (consumer, ticket);
    }
    s_leave (ctx);
}

static const char *
s_consumer_name (fanhub_ctx_t *ctx)
{
    return ctx ? ctx->consumer_name : NULL;
}

static fanhub_bytes_t
s_msg_topic (const fanhub_msg_t *msg)
{
    return fh_msg_frame (msg, 0);
}

static fanhub_bytes_t
s_msg_body (const fanhub_msg_t *msg)
{
    return fh_msg_frame (msg, 1);
}

static size_t
s_msg_frame_count (const fanhub_msg_t *msg)
{
    return msg->frame_count;
}

static uint64_t
s_msg_seq (const fanhub_msg_t *msg)
{
    return msg->seq;
}

static int64_t
s_msg_received_ns (const fanhub_msg_t *msg)
{
    return msg->received_ns + fh_clock_wall_offset_ns ();
}

static fanhub_ticket_t
s_msg_ticket (const fanhub_msg_t *msg)
{
    return fh_consumer_msg_ticket (msg);
}

static void
s_complete (fanhub_ctx_t *ctx, fanhub_ticket_t ticket, fanhub_result_t result)
{
    s_finish (ctx, ticket, result, NULL, "complete");
}

const fanhub_opt_t *
fh_host_desc_options (const fanhub_consumer_desc_t *desc)
{
    /* An older descriptor ends before options: reading it would read past it. */
    if (!desc || desc->abi_minor < 2
        || desc->size < offsetof (fanhub_consumer_desc_t, options) + sizeof desc->options)
        return NULL;
    return desc->options;
}

static int
s_options_read (fanhub_ctx_t *ctx, const fanhub_consumer_desc_t *desc,
                const fanhub_option_t *options, void *values, size_t values_size, char *err,
                size_t errlen)
{
    (void) ctx;
    const fanhub_opt_t *table = fh_host_desc_options (desc);
    if (!table) {
        snprintf (err, errlen,
                  "options_read: the plugin's descriptor has no option table "
                  "(ABI 1.2 desc->options)");
        return -1;
    }
    return fh_option_table_read (&fh_host, desc->name, table, options, values, values_size, err,
                                 errlen);
}

/* ABI 1.4: options_read with the descriptor of ctx's plugin. */
static int
s_options_load (fanhub_ctx_t *ctx, const fanhub_option_t *options, void *values, size_t values_size,
                char *err, size_t errlen)
{
    if (!ctx || !ctx->desc || atomic_load (&ctx->retired)) {
        snprintf (err, errlen, "options_load: no plugin known for this context");
        return -1;
    }
    return s_options_read (ctx, ctx->desc, options, values, values_size, err, errlen);
}

/* The reason of the consume running on this thread (set_reason). */
static _Thread_local char s_reason[256];

static void s_set_reason (fanhub_ctx_t *ctx, const char *fmt, ...) FANHUB_PRINTF (2, 3);

static void
s_set_reason (fanhub_ctx_t *ctx, const char *fmt, ...)
{
    (void) ctx;
    va_list args;
    va_start (args, fmt);
    fanhub_utf8_vformat (s_reason, sizeof s_reason, fmt, args);
    va_end (args);
    s_reason[strcspn (s_reason, "\r\n")] = '\0'; /* one line */
}

void
fh_host_take_reason (char *reason, size_t size)
{
    /* Most answers come without a reason: no formatting then (a snprintf
       per consume was a quarter of the K=1 path's instructions). */
    if (!s_reason[0]) {
        reason[0] = '\0';
        return;
    }
    fanhub_utf8_copy (reason, size, s_reason);
    s_reason[0] = '\0';
}

static void
s_complete_reason (fanhub_ctx_t *ctx, fanhub_ticket_t ticket, fanhub_result_t result,
                   const char *reason)
{
    s_finish (ctx, ticket, result, reason, "complete_reason");
}

static int64_t
s_consumer_setting (fanhub_ctx_t *ctx, const char *name)
{
    fh_consumer_t *consumer = s_enter (ctx);
    int64_t value = consumer ? fh_consumer_setting (consumer, name) : -1;
    if (consumer)
        s_leave (ctx);
    return value;
}

static void s_set_state (fanhub_ctx_t *ctx, int state, const char *fmt, ...) FANHUB_PRINTF (3, 4);

static void
s_set_state (fanhub_ctx_t *ctx, int state, const char *fmt, ...)
{
    fh_consumer_t *consumer = s_enter (ctx);
    if (!consumer)
        return;
    char error[256];
    if (fmt) {
        va_list args;
        va_start (args, fmt);
        fanhub_utf8_vformat (error, sizeof error, fmt, args);
        va_end (args);
    }
    fh_consumer_set_state (consumer, state, fmt ? error : NULL);
    s_leave (ctx);
}

static void
s_count (fanhub_ctx_t *ctx, int counter, uint64_t n)
{
    fh_consumer_t *consumer = s_enter (ctx);
    if (consumer) {
        fh_consumer_count (consumer, counter, n);
        s_leave (ctx);
    }
}

static uint32_t
s_msg_attempt (const fanhub_msg_t *msg)
{
    return fh_consumer_msg_attempt (msg);
}

static int
s_publish (fanhub_ctx_t *ctx, const char *topic, const void *body, size_t size)
{
    if (!topic || (!body && size))
        return -1;
    fh_consumer_t *consumer = s_enter (ctx);
    if (!consumer)
        return -1;
    int rc = fh_consumer_publish (consumer, topic, body, size);
    s_leave (ctx);
    return rc;
}

static void
s_set_window (fanhub_ctx_t *ctx, size_t n)
{
    fh_consumer_t *consumer = s_enter (ctx);
    if (consumer) {
        fh_consumer_set_window (consumer, n);
        s_leave (ctx);
    }
}

static void
s_ticket_started (fanhub_ctx_t *ctx, fanhub_ticket_t ticket)
{
    fh_consumer_t *consumer = s_enter (ctx);
    if (consumer) {
        fh_consumer_ticket_started (consumer, ticket);
        s_leave (ctx);
    }
}

static fanhub_metric_t *
s_metric_new (fanhub_ctx_t *ctx, const char *name, int kind, const char *help, char *err,
              size_t errlen)
{
    char why[256];
    fanhub_metric_t *metric = ctx ? fh_plugin_metric_new (&ctx->metrics,
                                                          ctx->desc ? ctx->desc->name : NULL, name,
                                                          kind, help, why, sizeof why)
                                  : NULL;
    if (!ctx)
        snprintf (why, sizeof why, "metric '%s': no consumer", name ? name : "(null)");
    if (!metric) {
        s_log (ctx, FANHUB_LOG_WARNING, "%s", why);
        if (err && errlen)
            snprintf (err, errlen, "%s", why);
    }
    return metric;
}

const fanhub_host_t fh_host = {
    .abi_major = FANHUB_ABI_MAJOR,
    .abi_minor = FANHUB_ABI_MINOR,
    .size = sizeof (fanhub_host_t),
    .log = s_log,
    .consumer_name = s_consumer_name,
    .option_kind = fh_option_kind,
    .option_get = fh_option_get,
    .option_scalar = fh_option_scalar,
    .option_count = fh_option_count,
    .option_at = fh_option_at,
    .option_where = fh_option_where,
    .msg_topic = s_msg_topic,
    .msg_body = s_msg_body,
    .msg_frame_count = s_msg_frame_count,
    .msg_frame = fh_msg_frame,
    .msg_seq = s_msg_seq,
    .msg_received_ns = s_msg_received_ns,
    .msg_ticket = s_msg_ticket,
    .complete = s_complete,
    .options_read = s_options_read,
    .set_reason = s_set_reason,
    .complete_reason = s_complete_reason,
    .consumer_setting = s_consumer_setting,
    .set_state = s_set_state,
    .count = s_count,
    .msg_attempt = s_msg_attempt,
    .options_load = s_options_load,
    .publish = s_publish,
    .set_window = s_set_window,
    .ticket_started = s_ticket_started,
    .metric_new = s_metric_new,
    .metric_add = fh_plugin_metric_add,
    .metric_set = fh_plugin_metric_set,
};
