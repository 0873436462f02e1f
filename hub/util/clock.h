/*  clock - the hub's time: one monotonic reading per message.

    Message times are CLOCK_MONOTONIC nanoseconds, so latencies never jump
    when the wall clock is set. Wall time, where shown, is monotonic time
    plus an offset taken once per process (fh_clock_wall_offset_ns).
*/
#ifndef FH_CLOCK_H_INCLUDED
#define FH_CLOCK_H_INCLUDED

#include <stdatomic.h>
#include <stdbool.h>
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

/* An RFC 3339 date-time, "2026-11-21T09:03:48.123456Z" or with an offset
   "+02:00", to nanoseconds since the epoch (digits below the nanosecond
   are dropped). Answers false when it is not one, or out of the range of
   int64_t nanoseconds (about 1677-09-21 to 2262-04-11). */
bool fh_clock_parse_rfc3339 (const char *text, int64_t *ns_out);

/* A clock that can be replaced in tests, so that waiting for time to pass
   (retry backoff) never sleeps there. */
typedef struct {
    int64_t (*now_ns) (void *arg);
    /* Waits until deadline_ns, or less if *abort turns true; answers
       false when aborted. */
    bool (*sleep_until) (void *arg, int64_t deadline_ns, atomic_bool *abort);
    void *arg;
} fh_clock_ops_t;

/* CLOCK_MONOTONIC and nanosleep (in slices, to notice an abort). */
extern const fh_clock_ops_t fh_clock_real;

#endif
