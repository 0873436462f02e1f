/*  null - the shipped consumer that takes every message and does nothing.

    It measures the hub itself: with `plugin: null` the figures of a
    consumer are the cost of queueing and dispatch alone. It takes no
    options and refuses any, so that a typo does not pass unnoticed.
    Stateless, hence thread-safe.
*/
#include <fanhub/consumer.h>

#include <stdio.h>

/* init and check alike: null acquires nothing. */
static int
s_check (const fanhub_host_t *host, fanhub_ctx_t *ctx,
         const fanhub_option_t *options, char *err, size_t errlen)
{
    (void) ctx;
    if (options && host->option_count (options) > 0) {
        const char *key = NULL;
        const fanhub_option_t *node = host->option_at (options, 0, &key);
        snprintf (err, errlen,
                  "options.%s: unknown option; null takes no options (%s)",
                  key ? key : "?", host->option_where (node));
        return -1;
    }
    return 0;
}

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx,
        const fanhub_option_t *options, void **state, char *err,
        size_t errlen)
{
    (void) state;
    return s_check (host, ctx, options, err, errlen);
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    (void) state;
    (void) msg;
    return FANHUB_OK;
}

static const fanhub_consumer_desc_t s_desc = {
    FANHUB_CONSUMER_DESC_HEADER,
    .name = "null",
    .version = "1.0",
    .flags = FANHUB_CONSUMER_THREAD_SAFE,
    .init = s_init,
    .consume = s_consume,
    .check = s_check,
};

FANHUB_EXPORT const fanhub_consumer_desc_t *
fanhub_consumer_entry (void)
{
    return &s_desc;
}
