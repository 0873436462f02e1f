/*  badabi - a test consumer built for the next major ABI version.

    Otherwise a valid plugin: the hub must refuse it at load, by the
    version check alone, with a clear error, and call nothing of it.
*/
#include <fanhub/consumer.h>

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    (void) state;
    (void) msg;
    return FANHUB_OK;
}

static const fanhub_consumer_desc_t s_desc = {
    .abi_major = FANHUB_ABI_MAJOR + 1,
    .abi_minor = 0,
    .size = sizeof (fanhub_consumer_desc_t),
    .name = "badabi",
    .version = "1.0",
    .consume = s_consume,
};

FANHUB_EXPORT const fanhub_consumer_desc_t *
fanhub_consumer_entry (void)
{
    return &s_desc;
}
