/*  metered - a test consumer with figures of its own (ABI 1.6,
    host->metric_new, metric_add, metric_set).

    At init it registers a counter, `bodies`, and a gauge, `last_body_bytes`;
    with the option `bad: true` it first asks for a few metrics the host
    must refuse (a bad name, a duplicate) and fails init with the host's
    answers joined, so a test sees the refusals as a user would. Each
    consume adds one to `bodies` and sets `last_body_bytes` to the size of
    the message's body, and answers OK.
*/
#include <fanhub/consumer.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    bool bad;
} metered_options_t;

typedef struct {
    const fanhub_host_t *host;
    fanhub_metric_t *bodies;
    fanhub_metric_t *last_bytes;
} metered_t;

static const fanhub_opt_t s_options[] = {
    FANHUB_OPT_FIELD (metered_options_t, "bad", FANHUB_OPT_BOOL, bad, "false", 0, 0,
                      "ask for metrics the host refuses, and fail init with its answers"),
    FANHUB_OPT_END,
};

/* The refusals, "; " between them, into err: 0 when each was refused. */
static int
s_refusals (const fanhub_host_t *host, fanhub_ctx_t *ctx, char *err, size_t errlen)
{
    static const struct {
        const char *name;
        int kind;
        const char *help;
    } asks[] = {
        {"Bad-Name", FANHUB_METRIC_COUNTER, "a name with capitals"},
        {"seen_total", FANHUB_METRIC_COUNTER, "a name that ends in _total"},
        {"odd", 7, "a kind that is neither"},
        {"twice", FANHUB_METRIC_GAUGE, "registered twice"},
        {"twice", FANHUB_METRIC_COUNTER, "registered twice"},
    };
    size_t used = 0;
    err[0] = '\0';
    for (size_t i = 0; i < sizeof asks / sizeof asks[0]; i++) {
        char why[256] = "";
        fanhub_metric_t *m
            = host->metric_new (ctx, asks[i].name, asks[i].kind, asks[i].help, why, sizeof why);
        if (m && strcmp (asks[i].name, "twice") == 0 && i == 3)
            continue; /* the first of the two is taken */
        if (m)
            return -1;
        used += (size_t) snprintf (err + used, used < errlen ? errlen - used : 0, "%s%s",
                                   used ? "; " : "", why);
    }
    return 0;
}

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
{
    if (!FANHUB_HOST_HAS_1_6 (host)) {
        snprintf (err, errlen, "metered needs a hub with ABI 1.6 (metric_new)");
        return -1;
    }
    metered_options_t opts;
    if (host->options_load (ctx, options, &opts, sizeof opts, err, errlen) != 0)
        return -1;
    if (opts.bad) {
        if (s_refusals (host, ctx, err, errlen) != 0)
            snprintf (err, errlen, "metered: the host took a metric it should have refused");
        return -1;
    }
    metered_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "metered: out of memory");
        return -1;
    }
    self->host = host;
    self->bodies = host->metric_new (ctx, "bodies", FANHUB_METRIC_COUNTER,
                                     "Messages metered consumed.", err, errlen);
    if (self->bodies)
        self->last_bytes = host->metric_new (ctx, "last_body_bytes", FANHUB_METRIC_GAUGE,
                                             "Bytes of the last body metered consumed.", err,
                                             errlen);
    if (!self->bodies || !self->last_bytes) {
        free (self);
        return -1;
    }
    *state = self;
    return 0;
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    metered_t *self = state;
    self->host->metric_add (self->bodies, 1);
    self->host->metric_set (self->last_bytes, (int64_t) self->host->msg_body (msg).size);
    return FANHUB_OK;
}

static void
s_fini (void *state)
{
    free (state);
}

static const fanhub_consumer_desc_t s_desc = {
    FANHUB_CONSUMER_DESC_HEADER,
    .name = "metered",
    .version = "1.0",
    .flags = FANHUB_CONSUMER_THREAD_SAFE,
    .init = s_init,
    .consume = s_consume,
    .fini = s_fini,
    .options = s_options,
};

FANHUB_EXPORT const fanhub_consumer_desc_t *
fanhub_consumer_entry (void)
{
    return &s_desc;
}
