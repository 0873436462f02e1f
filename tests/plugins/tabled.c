/*  tabled - a test consumer of ABI 1.2 with an option table whose init and
    check leave traces: init creates options.marker, check logs "tabled:
    check ran". The hub validates options against the table before either
    runs, so a value of the wrong form must leave no trace at all.
*/
#include <fanhub/consumer.h>

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

typedef struct {
    const char *marker;
    int64_t count;
} tabled_options_t;

static const fanhub_opt_t s_options[] = {
    FANHUB_OPT_FIELD (tabled_options_t, "marker", FANHUB_OPT_FILE, marker, NULL, 0, 0,
                      "a file init creates"),
    FANHUB_OPT_FIELD (tabled_options_t, "count", FANHUB_OPT_INT, count, "1", 1, 10,
                      "a number from 1 to 10"),
    FANHUB_OPT_END,
};

static const fanhub_consumer_desc_t s_desc;

static int
s_check (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, char *err,
         size_t errlen)
{
    (void) options, (void) err, (void) errlen;
    host->log (ctx, FANHUB_LOG_INFO, "tabled: check ran");
    return 0;
}

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
{
    (void) state;
    /* The trace first: it shows that init ran at all. */
    const char *marker = host->option_scalar (host->option_get (options, "marker"));
    if (marker) {
        int fd = open (marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0)
            close (fd);
    }
    tabled_options_t o = {0};
    return host->options_read (ctx, &s_desc, options, &o, sizeof o, err, errlen);
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    (void) state, (void) msg;
    return FANHUB_OK;
}

FANHUB_CONSUMER_DEFINE (s_desc, .name = "tabled", .version = "1.2", .init = s_init,
                        .consume = s_consume, .options = s_options, .check = s_check)
