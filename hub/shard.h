/*  shard - a consumer's broker-less share of the bus (`shard:`).

    `consumers[].shard: {index: I, count: N}` makes a consumer take only
    the messages whose order key falls in shard I of N, so that N hubs
    (or N consumers) that all subscribe to the same bus split the work
    between them without talking to each other. The key is the one
    `order_by` gives (order_key.h); a consumer without order_by shards by
    the whole topic. A key that cannot be extracted is the empty key "",
    as for order_by: all such messages fall in one shard.

    The hash is stable and the same on every machine and in every
    version: the 64-bit FNV-1a hash of the key's bytes (offset basis
    14695981039346656037, prime 1099511628211), and the shard is that
    hash modulo N. Keys that order_key.h shortens (over 256 bytes) are
    hashed in their shortened form, which is itself a function of the
    whole key.

    There is no failover: when the hub that owns shard I stops, shard I
    waits (or is lost, with ZeroMQ's publish/subscribe). For shards that
    move to a live hub, use RabbitMQ (docs/scaling.md).

    A shard is read-only once made: fh_shard_takes may run on several
    threads at once.
*/
#ifndef FH_SHARD_H_INCLUDED
#define FH_SHARD_H_INCLUDED

#include "message.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct fh_shard fh_shard_t;

/* index < count; order_by as order_key.h reads it, or NULL for the whole
   topic. NULL with one line in err when order_by does not compile or
   memory runs out. */
fh_shard_t *fh_shard_new (size_t index, size_t count, const char *order_by, char *err,
                          size_t errlen);
/* Safe with NULL and twice. */
void fh_shard_destroy (fh_shard_t **self_p);

/* The 64-bit FNV-1a hash of len bytes. */
uint64_t fh_shard_hash (const void *key, size_t len);
/* The shard, from 0 to count - 1, of a key. */
size_t fh_shard_of (const void *key, size_t len, size_t count);
/* True when msg's key falls in this shard. */
bool fh_shard_takes (const fh_shard_t *self, const fh_msg_t *msg);

#endif
