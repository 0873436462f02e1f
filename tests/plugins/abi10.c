/*  abi10 - a test consumer built as ABI 1.0 plugins were: its descriptor
    ends at fini, with no check callback.

    Right behind the descriptor sits a function pointer where ABI 1.1 has
    check: a hub that read past the descriptor's size would call it, and it
    aborts. `fanhub check` must check this plugin by init and fini, as
    before. init creates the file options.marker when given, so a test can
    see that it ran.
*/
#include <fanhub/consumer.h>

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

/* fanhub_consumer_desc_t as ABI 1.0 defined it. */
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
} s_desc_v1_0_t;

static int
s_trap (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, char *err,
        size_t errlen)
{
    (void) host, (void) ctx, (void) options, (void) err, (void) errlen;
    abort (); /* the hub read past the descriptor */
}

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
{
    (void) ctx, (void) state, (void) err, (void) errlen;
    const char *marker = options ? host->option_scalar (host->option_get (options, "marker"))
                                 : NULL;
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

static const struct {
    s_desc_v1_0_t desc;
    int (*after) (const fanhub_host_t *, fanhub_ctx_t *, const fanhub_option_t *, char *, size_t);
} s_plugin = {
    .desc = {.abi_major = 1,
             .abi_minor = 0,
             .size = sizeof (s_desc_v1_0_t),
             .name = "abi10",
             .version = "1.0",
             .init = s_init,
             .consume = s_consume},
    .after = s_trap,
};

FANHUB_EXPORT const fanhub_consumer_desc_t *
fanhub_consumer_entry (void)
{
    return (const fanhub_consumer_desc_t *) &s_plugin.desc;
}
