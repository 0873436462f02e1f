/*  fnv - FNV-1a, 64 bits: the hub's one hash of bytes (shard keys, order
    keys, gap detection's producers, the configuration's name set).

    Not for anything an attacker may aim at: it is chosen for speed and a
    stable value across runs (shard: and order_by: depend on it being the
    same in every hub), not for resistance to collisions made on purpose.
*/
#ifndef FH_FNV_H_INCLUDED
#define FH_FNV_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#define FH_FNV1A_OFFSET UINT64_C (14695981039346656037)
#define FH_FNV1A_PRIME UINT64_C (1099511628211)

/* hash with size bytes of data added: start from FH_FNV1A_OFFSET. */
static inline uint64_t
fh_fnv1a_add (uint64_t hash, const void *data, size_t size)
{
    const unsigned char *p = (const unsigned char *) data;
    for (size_t i = 0; i < size; i++)
        hash = (hash ^ p[i]) * FH_FNV1A_PRIME;
    return hash;
}

/* The FNV-1a hash of size bytes of data. */
static inline uint64_t
fh_fnv1a (const void *data, size_t size)
{
    return fh_fnv1a_add (FH_FNV1A_OFFSET, data, size);
}

#endif
