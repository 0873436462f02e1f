/*  checked - a test consumer of ABI 1.1 with a check callback.

    check refuses with "checked: REASON" when options.refuse is REASON, and
    otherwise logs "checked: options look fine". init creates the file
    options.marker when given: `fanhub check` must never call it.
*/
#include <fanhub/consumer.h>

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

static const char *
s_option (const fanhub_host_t *host, const fanhub_option_t *options, const char *key)
{
    return options ? host->option_scalar (host->option_get (options, key)) : NULL;
}

static int
s_check (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, char *err,
         size_t errlen)
{
    const char *refuse = s_option (host, options, "refuse");
    if (refuse) {
        snprintf (err, errlen, "checked: %s", refuse);
        return -1;
    }
    host->log (ctx, FANHUB_LOG_INFO, "checked: options look fine");
    return 0;
}

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
{
    (void) ctx, (void) state, (void) err, (void) errlen;
    const char *marker = s_option (host, options, "marker");
    if (marker) {
        int fd = open (marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0)
            close (fd);
    }
    return 0;
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    (void) state, (void) msg;
    return FANHUB_OK;
}

FANHUB_CONSUMER_DEFINE (s_desc, .name = "checked", .version = "1.1", .init = s_init,
                        .consume = s_consume, .check = s_check)
