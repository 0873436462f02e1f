/*  abi11 - a test consumer built as ABI 1.1 plugins were: its descriptor
    ends at check, with no option table, and it finishes messages with the
    1.1 calls (msg_ticket, then complete from inside consume).

    Right behind the descriptor sits a pointer where ABI 1.2 has options:
    a table with one entry named "read_past_the_descriptor". A hub that read
    past the descriptor's size would show or use it. check refuses the
    option `refuse: true`, so a test sees that the hub calls it.
*/
#include <fanhub/consumer.h>

#include <stdio.h>
#include <string.h>

/* fanhub_consumer_desc_t as ABI 1.1 defined it. */
typedef struct {
    uint32_t abi_major, abi_minor;
    size_t size;
    const char *name, *version;
    uint32_t flags;
    int (*init) (const fanhub_host_t *, fanhub_ctx_t *, const fanhub_option_t *, void **, char *,
                 size_t);
    fanhub_result_t (*consume) (void *, const fanhub_msg_t *);
    void (*idle) (void *);
    void (*fini) (void *);
    int (*check) (const fanhub_host_t *, fanhub_ctx_t *, const fanhub_option_t *, char *, size_t);
} s_desc_v1_1_t;

typedef struct {
    const fanhub_host_t *host;
    fanhub_ctx_t *ctx;
} s_state_t;

static s_state_t s_self;

static int
s_check (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, char *err,
         size_t errlen)
{
    (void) ctx;
    const char *refuse = host->option_scalar (host->option_get (options, "refuse"));
    if (refuse && strcmp (refuse, "true") == 0) {
        snprintf (err, errlen, "abi11: refused by its own check (%s)",
                  host->option_where (host->option_get (options, "refuse")));
        return -1;
    }
    return 0;
}

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
{
    if (s_check (host, ctx, options, err, errlen) != 0)
        return -1;
    if (!FANHUB_HOST_HAS_COMPLETE (host)) {
        snprintf (err, errlen, "abi11: the host has no complete");
        return -1;
    }
    s_self.host = host;
    s_self.ctx = ctx;
    *state = &s_self;
    return 0;
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    s_state_t *self = state;
    fanhub_ticket_t ticket = self->host->msg_ticket (msg);
    self->host->complete (self->ctx, ticket, FANHUB_OK);
    return FANHUB_PENDING;
}

static const fanhub_opt_t s_trap_table[] = {
    {"read_past_the_descriptor", FANHUB_OPT_BOOL, 0, NULL, 0, 0, NULL, 0, "never shown"},
    FANHUB_OPT_END,
};

static const struct {
    s_desc_v1_1_t desc;
    const fanhub_opt_t *after;
} s_plugin = {
    .desc = {.abi_major = 1,
             .abi_minor = 1,
             .size = sizeof (s_desc_v1_1_t),
             .name = "abi11",
             .version = "1.1",
             .init = s_init,
             .consume = s_consume,
             .check = s_check},
    .after = s_trap_table,
};

FANHUB_EXPORT const fanhub_consumer_desc_t *
fanhub_consumer_entry (void)
{
    return (const fanhub_consumer_desc_t *) &s_plugin.desc;
}
