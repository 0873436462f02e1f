/*  null - the shipped consumer that takes every message and does nothing.

    It measures the hub itself: with `plugin: null` the figures of a
    consumer are the cost of queueing and dispatch alone. It takes no
    options and refuses any, so that a typo does not pass unnoticed.
    Stateless, hence thread-safe.
*/
#include <fanhub/consumer.h>

#include <stdbool.h>

/* No options: the host refuses any key, naming none as known. */
static const fanhub_opt_t s_options[] = {FANHUB_OPT_END};

/* init and check alike: null acquires nothing. */
static int
s_check (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, char *err,
         size_t errlen)
{
    bool none; /* never written: no entry has a field */
    return host->options_load (ctx, options, &none, sizeof none, err, errlen);
}

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
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

FANHUB_CONSUMER_DEFINE (s_desc, .name = "null", .version = "1.0",
                        .flags = FANHUB_CONSUMER_THREAD_SAFE, .init = s_init, .consume = s_consume,
                        .check = s_check, .options = s_options)
