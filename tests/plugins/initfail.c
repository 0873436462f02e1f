/*  initfail - a test consumer whose init always refuses.

    The refusal reads "initfail: refusing on purpose", or "initfail: REASON"
    when options.reason is given, so a test can check that the hub reports
    a plugin's own words. consume is never reached.
*/
#include <fanhub/consumer.h>

#include <stdio.h>

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
{
    (void) ctx;
    (void) state;
    const char *reason = NULL;
    if (options)
        reason = host->option_scalar (host->option_get (options, "reason"));
    snprintf (err, errlen, "initfail: %s", reason ? reason : "refusing on purpose");
    return -1;
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    (void) state;
    (void) msg;
    return FANHUB_OK;
}

FANHUB_CONSUMER_DEFINE (s_desc, .name = "initfail", .version = "1.0", .init = s_init,
                        .consume = s_consume)
