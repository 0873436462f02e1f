/*  republish - a test consumer that publishes every message it consumes
    (host->publish, ABI 1.5) on its consumer's publish: endpoints, as a
    fedmsg-hub consumer re-publishing what it saw.

    Options:
        prefix   default "": put before the message's topic
        suffix   default ".relayed": the topic published is the message's
                 topic with this appended
        repeat   integer 1 to 100000, default 1: publishes each message this
                 many times (a test fills a queue with few bus messages)

    The body goes as it came. consume answers OK whatever publish says;
    the hub counts published and publish_failed. Thread-safe.
*/
#include <fanhub/consumer.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const fanhub_host_t *host;
    fanhub_ctx_t *ctx;
    char prefix[256], suffix[256];
    unsigned long repeat;
} republish_state_t;

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
{
    if (!FANHUB_HOST_HAS_1_5 (host)) {
        snprintf (err, errlen, "republish needs a hub with ABI 1.5 (publish)");
        return -1;
    }
    republish_state_t *self = (republish_state_t *) calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "republish: out of memory");
        return -1;
    }
    self->host = host;
    self->ctx = ctx;
    self->repeat = 1;
    snprintf (self->suffix, sizeof self->suffix, ".relayed");
    size_t count = options ? host->option_count (options) : 0;
    for (size_t i = 0; i < count; i++) {
        const char *key = NULL;
        const char *text = host->option_scalar (host->option_at (options, i, &key));
        if (key && strcmp (key, "suffix") == 0 && text && strlen (text) < sizeof self->suffix)
            snprintf (self->suffix, sizeof self->suffix, "%s", text);
        else if (key && strcmp (key, "prefix") == 0 && text && strlen (text) < sizeof self->prefix)
            snprintf (self->prefix, sizeof self->prefix, "%s", text);
        else if (key && strcmp (key, "repeat") == 0 && text && *text && strlen (text) <= 6
                 && strspn (text, "0123456789") == strlen (text) && strtoul (text, NULL, 10) >= 1
                 && strtoul (text, NULL, 10) <= 100000)
            self->repeat = strtoul (text, NULL, 10);
        else {
            snprintf (err, errlen,
                      "options.%s: republish takes prefix, suffix and repeat (1 to 100000)",
                      key ? key : "?");
            free (self);
            return -1;
        }
    }
    *state = self;
    return 0;
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    republish_state_t *self = (republish_state_t *) state;
    fanhub_bytes_t topic = self->host->msg_topic (msg);
    fanhub_bytes_t body = self->host->msg_body (msg);
    char name[1024];
    snprintf (name, sizeof name, "%s%.*s%s", self->prefix, (int) topic.size,
              (const char *) topic.data, self->suffix);
    for (unsigned long i = 0; i < self->repeat; i++)
        self->host->publish (self->ctx, name, body.data, body.size);
    return FANHUB_OK;
}

static void
s_fini (void *state)
{
    free (state);
}

FANHUB_CONSUMER_DEFINE (s_desc, .name = "republish", .version = "1.0",
                        .flags = FANHUB_CONSUMER_THREAD_SAFE, .init = s_init, .consume = s_consume,
                        .fini = s_fini)
