/*  oom - allocation failures, counted and logged. See oom.h. */
#include "oom.h"

#include "log.h"

#include <stdatomic.h>

static atomic_uint_fast64_t s_failures;

void
fh_oom_note (const char *where)
{
    uint64_t n = atomic_fetch_add_explicit (&s_failures, 1, memory_order_relaxed) + 1;
    if ((n & (n - 1)) == 0) /* 1st, 2nd, 4th, ...: a bounded number of lines */
        fh_error ("out of memory: %s (%llu so far, hub.alloc_failures)", where,
                  (unsigned long long) n);
}

uint64_t
fh_oom_count (void)
{
    return atomic_load_explicit (&s_failures, memory_order_relaxed);
}
