/*  clock - the wall-clock offset of monotonic time, taken once. */
#include "clock.h"

#include <pthread.h>

static pthread_once_t s_once = PTHREAD_ONCE_INIT;
static int64_t s_offset_ns;

static void
s_measure (void)
{
    struct timespec wall;
    int64_t mono = fh_clock_mono_ns ();
    clock_gettime (CLOCK_REALTIME, &wall);
    s_offset_ns = (int64_t) wall.tv_sec * 1000000000 + wall.tv_nsec - mono;
}

int64_t
fh_clock_wall_offset_ns (void)
{
    pthread_once (&s_once, s_measure);
    return s_offset_ns;
}

static int64_t
s_real_now (void *arg)
{
    (void) arg;
    return fh_clock_mono_ns ();
}

static bool
s_real_sleep_until (void *arg, int64_t deadline_ns, atomic_bool *abort)
{
    (void) arg;
    const int64_t slice_ns = 50 * INT64_C (1000000);
    while (!atomic_load (abort)) {
        int64_t left = deadline_ns - fh_clock_mono_ns ();
        if (left <= 0)
            return true;
        if (left > slice_ns)
            left = slice_ns;
        struct timespec ts = {(time_t) (left / 1000000000), (long) (left % 1000000000)};
        nanosleep (&ts, NULL);
    }
    return false;
}

const fh_clock_ops_t fh_clock_real = {s_real_now, s_real_sleep_until, NULL};
