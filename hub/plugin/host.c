/*  host - the host table handed to plugins. See host.h. */
#include "host.h"

#include "log.h"
#include "message.h"
#include "options.h"
#include "clock.h"
#include "consumer.h"
#include "pending.h"
#include "option_table.h"

#include "fanhub/sdk.h"

#include <stdio.h>
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
    return fh_pending_current (msg);
}

static void
s_complete (fanhub_ctx_t *ctx, fanhub_ticket_t ticket, fanhub_result_t result)
{
    if (!ctx || !ctx->consumer) {
        fh_error ("complete: consumer '%s': no consumer to complete ticket %llu for",
                  ctx ? ctx->consumer_name : "?", (unsigned long long) ticket);
        return;
    }
    fh_consumer_complete (ctx->consumer, ticket, result);
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
    if (!ctx || !ctx->desc) {
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
    if (!ctx || !ctx->consumer) {
        fh_error ("complete_reason: consumer '%s': no consumer to complete ticket %llu for",
                  ctx ? ctx->consumer_name : "?", (unsigned long long) ticket);
        return;
    }
    fh_consumer_complete_reason (ctx->consumer, ticket, result, reason);
}

static int64_t
s_consumer_setting (fanhub_ctx_t *ctx, const char *name)
{
    return ctx && ctx->consumer ? fh_consumer_setting (ctx->consumer, name) : -1;
}

static void s_set_state (fanhub_ctx_t *ctx, int state, const char *fmt, ...) FANHUB_PRINTF (3, 4);

static void
s_set_state (fanhub_ctx_t *ctx, int state, const char *fmt, ...)
{
    if (!ctx || !ctx->consumer)
        return;
    char error[256];
    if (fmt) {
        va_list args;
        va_start (args, fmt);
        fanhub_utf8_vformat (error, sizeof error, fmt, args);
        va_end (args);
    }
    fh_consumer_set_state (ctx->consumer, state, fmt ? error : NULL);
}

static void
s_count (fanhub_ctx_t *ctx, int counter, uint64_t n)
{
    if (ctx && ctx->consumer)
        fh_consumer_count (ctx->consumer, counter, n);
}

static uint32_t
s_msg_attempt (const fanhub_msg_t *msg)
{
    return fh_pending_current_attempt (msg);
}

static int
s_publish (fanhub_ctx_t *ctx, const char *topic, const void *body, size_t size)
{
    if (!ctx || !ctx->consumer || !topic || (!body && size))
        return -1;
    return fh_consumer_publish (ctx->consumer, topic, body, size);
}

static void
s_set_window (fanhub_ctx_t *ctx, size_t n)
{
    if (ctx && ctx->consumer)
        fh_consumer_set_window (ctx->consumer, n);
}

static void
s_ticket_started (fanhub_ctx_t *ctx, fanhub_ticket_t ticket)
{
    if (ctx && ctx->consumer)
        fh_consumer_ticket_started (ctx->consumer, ticket);
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
};
