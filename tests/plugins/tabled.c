/*  tabled - a test consumer with an option table (every type of ABI 1.4
    but ANY) whose init and check leave traces: init creates
    options.marker, check logs "tabled: check ran". The hub validates
    options against the table before either runs, so a value of the wrong
    form must leave no trace at all.
*/
#include <fanhub/consumer.h>

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const char *marker;
    int64_t count;
    const fanhub_option_t *maps, *map, *command, *peers;
    const char *map_name, *endpoint;
    char *secret;
} tabled_options_t;

#define T(name, type, field, flags, help)                                                          \
    {                                                                                              \
        name, type, offsetof (tabled_options_t, field), NULL, 0, 0, NULL, flags, help              \
    }
static const fanhub_opt_t s_options[] = {
    FANHUB_OPT_FIELD (tabled_options_t, "marker", FANHUB_OPT_FILE, marker, NULL, 0, 0,
                      "a file init creates"),
    FANHUB_OPT_FIELD (tabled_options_t, "count", FANHUB_OPT_INT, count, "1", 1, 10,
                      "a number from 1 to 10"),
    T ("maps", FANHUB_OPT_MAPS, maps, 0, "a list of maps"),
    T ("map", FANHUB_OPT_MAP, map, 0, "a map of name"),
    T ("map.name", FANHUB_OPT_STRING, map_name, FANHUB_OPT_REQUIRED, "a name"),
    T ("command", FANHUB_OPT_STRING_OR_LIST, command, 0, "a string or a list"),
    T ("endpoint", FANHUB_OPT_ENDPOINT, endpoint, 0, "an endpoint to connect to"),
    T ("peers", FANHUB_OPT_ENDPOINTS, peers, FANHUB_OPT_BIND, "endpoints to bind"),
    T ("secret", FANHUB_OPT_SECRET, secret, 0, "a secret"),
    FANHUB_OPT_END,
};

static int
s_read (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, char *err,
        size_t errlen)
{
    tabled_options_t o = {0};
    int rc = host->options_load (ctx, options, &o, sizeof o, err, errlen);
    if (o.secret) {
        memset (o.secret, 0, strlen (o.secret));
        free (o.secret);
    }
    return rc;
}

static int
s_check (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, char *err,
         size_t errlen)
{
    host->log (ctx, FANHUB_LOG_INFO, "tabled: check ran");
    return s_read (host, ctx, options, err, errlen);
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
    return s_read (host, ctx, options, err, errlen);
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    (void) state, (void) msg;
    return FANHUB_OK;
}

FANHUB_CONSUMER_DEFINE (s_desc, .name = "tabled", .version = "1.2", .init = s_init,
                        .consume = s_consume, .options = s_options, .check = s_check)
