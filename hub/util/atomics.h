/*  atomics - the counters with one writer and the cache-line layout that
    the hot path shares.

    FH_CACHE_LINE is the alignment that keeps data written by different
    threads on different cache lines (no false sharing); structs allocated
    with it use aligned_alloc (FH_CACHE_LINE, ...).

    fh_bump adds one to a counter that has a single writing thread: a plain
    load and store, no locked add. The release store orders it after the
    writer's earlier counters, so a reader that loads a later stage first
    (with acquire) never sees it ahead of an earlier one.
*/
#ifndef FH_ATOMICS_H_INCLUDED
#define FH_ATOMICS_H_INCLUDED

#include <stdatomic.h>
#include <stdint.h>

#define FH_CACHE_LINE 64

static inline void
fh_bump (atomic_uint_fast64_t *counter)
{
    atomic_store_explicit (counter, atomic_load_explicit (counter, memory_order_relaxed) + 1,
                           memory_order_release);
}

#endif
