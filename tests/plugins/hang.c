/*  hang - a test consumer that takes long, or forever, where the hub
    must not wait for it: in init, in consume or in fini.

    Options (each an integer of milliseconds, or `forever`; default 0):
        init_ms     init sleeps this long, then succeeds
        consume_ms  each consume sleeps this long, then answers FANHUB_OK
        fini_ms     fini sleeps this long

    The state is read-only after init, so it is thread-safe.
*/
#include <fanhub/consumer.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FOREVER (-1L)

typedef struct {
    long consume_ms;
    long fini_ms;
} hang_state_t;

static void
s_sleep_ms (long ms)
{
    if (ms == FOREVER) {
        for (;;) {
            struct timespec hour = {3600, 0};
            nanosleep (&hour, NULL);
        }
    }
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    while (nanosleep (&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int
s_ms (const fanhub_host_t *host, const fanhub_option_t *node, const char *key, long *out, char *err,
      size_t errlen)
{
    const char *text = host->option_scalar (node);
    char *end = NULL;
    if (text && strcmp (text, "forever") == 0) {
        *out = FOREVER;
        return 0;
    }
    long value = text ? strtol (text, &end, 10) : -1;
    if (!text || !*text || *end || value < 0 || value > 3600000) {
        snprintf (err, errlen, "options.%s: expected milliseconds (0 to 3600000) or forever (%s)",
                  key, host->option_where (node));
        return -1;
    }
    *out = value;
    return 0;
}

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
{
    (void) ctx;
    long init_ms = 0, consume_ms = 0, fini_ms = 0;
    size_t count = options ? host->option_count (options) : 0;
    for (size_t i = 0; i < count; i++) {
        const char *key = NULL;
        const fanhub_option_t *node = host->option_at (options, i, &key);
        long *slot = !key                              ? NULL
                     : strcmp (key, "init_ms") == 0    ? &init_ms
                     : strcmp (key, "consume_ms") == 0 ? &consume_ms
                     : strcmp (key, "fini_ms") == 0    ? &fini_ms
                                                       : NULL;
        if (!slot) {
            snprintf (err, errlen,
                      "options.%s: unknown option; hang takes init_ms, consume_ms "
                      "and fini_ms (%s)",
                      key ? key : "?", host->option_where (node));
            return -1;
        }
        if (s_ms (host, node, key, slot, err, errlen) != 0)
            return -1;
    }
    hang_state_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "hang: out of memory");
        return -1;
    }
    self->consume_ms = consume_ms;
    self->fini_ms = fini_ms;
    s_sleep_ms (init_ms);
    *state = self;
    return 0;
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    (void) msg;
    s_sleep_ms (((hang_state_t *) state)->consume_ms);
    return FANHUB_OK;
}

static void
s_fini (void *state)
{
    hang_state_t *self = state;
    s_sleep_ms (self->fini_ms);
    free (self);
}

FANHUB_CONSUMER_DEFINE (s_desc, .name = "hang", .version = "1.0",
                        .flags = FANHUB_CONSUMER_THREAD_SAFE, .init = s_init, .consume = s_consume,
                        .fini = s_fini)
