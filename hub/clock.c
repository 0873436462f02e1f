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
