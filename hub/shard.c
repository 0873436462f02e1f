/*  shard - a consumer's broker-less share of the bus. See shard.h. */
#include "shard.h"

#include "fnv.h"
#include "order_key.h"

#include <stdio.h>
#include <stdlib.h>

struct fh_shard {
    size_t index, count;
    fh_order_key_t *key;
};

fh_shard_t *
fh_shard_new (size_t index, size_t count, const char *order_by, char *err, size_t errlen)
{
    fh_shard_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "out of memory");
        return NULL;
    }
    self->index = index;
    self->count = count;
    self->key = fh_order_key_parse (order_by ? order_by : "topic", err, errlen);
    if (!self->key)
        fh_shard_destroy (&self);
    return self;
}

void
fh_shard_destroy (fh_shard_t **self_p)
{
    fh_shard_t *self = *self_p;
    if (!self)
        return;
    fh_order_key_destroy (&self->key);
    free (self);
    *self_p = NULL;
}

uint64_t
fh_shard_hash (const void *key, size_t len)
{
    return fh_fnv1a (key, len);
}

size_t
fh_shard_of (const void *key, size_t len, size_t count)
{
    return (size_t) (fh_shard_hash (key, len) % count);
}

bool
fh_shard_takes (const fh_shard_t *self, const fh_msg_t *msg)
{
    char key[FH_ORDER_KEY_MAX];
    size_t len = sizeof key;
    /* A key that cannot be read is "" (len 0), as order_by has it. */
    (void) fh_order_key_extract (self->key, msg, key, &len);
    return fh_shard_of (key, len, self->count) == self->index;
}
