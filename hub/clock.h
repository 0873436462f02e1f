/*  clock - the hub's time: one monotonic reading per message.

    Message times are CLOCK_MONOTONIC nanoseconds, so latencies never jump
    when the wall clock is set. Wall time, where shown, is monotonic time
    plus an offset taken once per process (fh_clock_wall_offset_ns).
*/
#ifndef FH_CLOCK_H_INCLUDED
#define FH_CLOCK_H_INCLUDED

#include <stdint.h>
#include <time.h>

static inline int64_t
fh_clock_mono_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Wall time minus monotonic time, read once (thread-safe). */
int64_t fh_clock_wall_offset_ns (void);

#endif
