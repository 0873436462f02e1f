/*  host - the host table handed to plugins. See host.h. */
#include "host.h"

#include "host_ctx.h"

#include "log.h"
#include "message.h"
#include "options.h"
#include "clock.h"
#include "consumer.h"
#include "option_table.h"
#include "plugin_metrics.h"

#include "fanhub/sdk.h"

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

/* The one path of complete and complete_reason. */
static void
s_finish (fanhub_ctx_t *ctx, fanhub_ticket_t ticket, fanhub_result_t result, const char *reason,
          const char *call)
{
    fh_consumer_t *consumer = fh_host_ctx_enter (ctx);
    if (!consumer) {
        if (ctx && ctx->consumer)
            fh_host_ctx_late (ctx, ticket, call); /* retired */
        else
            fh_error ("%s: consumer '%s': no consumer to complete ticket %llu for", call,
                      ctx ? ctx->consumer_name : "?", (unsigned long long) ticket);
        return;
    }
    if (fh_consumer_complete_try (consumer, ticket, result, reason) != 0) {
        if (atomic_load (&ctx->stale))
            fh_host_ctx_late (ctx, ticket, call);
        else
            fh_consumer_count_late (consumer, ticket);
    }
    fh_host_ctx_leave (ctx);
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

static int
s_options_read (fanhub_ctx_t *ctx, const fanhub_consumer_desc_t *desc,
                const fanhub_option_t *options, void *values, size_t values_size, char *err,
                size_t errlen)
{
    (void) ctx;
    const fanhub_opt_t *table = fh_option_table_of (desc);
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

static void s_set_reason (fanhub_ctx_t *ctx, const char *fmt, ...) FANHUB_PRINTF (2, 3);

static void
s_set_reason (fanhub_ctx_t *ctx, const char *fmt, ...)
{
    (void) ctx;
    va_list args;
    va_start (args, fmt);
    fh_host_set_reason (fmt, args);
    va_end (args);
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
    fh_consumer_t *consumer = fh_host_ctx_enter (ctx);
    int64_t value = consumer ? fh_consumer_setting (consumer, name) : -1;
    if (consumer)
        fh_host_ctx_leave (ctx);
    return value;
}

static void s_set_state (fanhub_ctx_t *ctx, int state, const char *fmt, ...) FANHUB_PRINTF (3, 4);

static void
s_set_state (fanhub_ctx_t *ctx, int state, const char *fmt, ...)
{
    fh_consumer_t *consumer = fh_host_ctx_enter (ctx);
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
    fh_host_ctx_leave (ctx);
}

static void
s_count (fanhub_ctx_t *ctx, int counter, uint64_t n)
{
    fh_consumer_t *consumer = fh_host_ctx_enter (ctx);
    if (consumer) {
        fh_consumer_count (consumer, counter, n);
        fh_host_ctx_leave (ctx);
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
    fh_consumer_t *consumer = fh_host_ctx_enter (ctx);
    if (!consumer)
        return -1;
    int rc = fh_consumer_publish (consumer, topic, body, size);
    fh_host_ctx_leave (ctx);
    return rc;
}

static void
s_set_window (fanhub_ctx_t *ctx, size_t n)
{
    fh_consumer_t *consumer = fh_host_ctx_enter (ctx);
    if (consumer) {
        fh_consumer_set_window (consumer, n);
        fh_host_ctx_leave (ctx);
    }
}

static void
s_ticket_started (fanhub_ctx_t *ctx, fanhub_ticket_t ticket)
{
    fh_consumer_t *consumer = fh_host_ctx_enter (ctx);
    if (consumer) {
        fh_consumer_ticket_started (consumer, ticket);
        fh_host_ctx_leave (ctx);
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
