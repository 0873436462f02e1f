/*  fdlimit - the process's descriptor budget. See fdlimit.h. */
#include "fdlimit.h"

#include "log.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef RTLD_NEXT /* glibc shows it only under _GNU_SOURCE */
#define RTLD_NEXT ((void *) -1l)
#endif

#define RESERVE_MIN 64

/* The spare descriptor accept4 lets go of when the table is full, and
   the accepts that use it: one thread at a time (only an accept that
   finds the table full takes the lock). */
static pthread_mutex_t s_lock = PTHREAD_MUTEX_INITIALIZER;
static int s_spare = -1;            /* under s_lock */
static fh_ratelimit_t s_waiting;    /* under s_lock */
static atomic_bool s_spare_missing; /* the last try found no room for it */

/* Under s_lock: takes the spare when there is none; false when no
   descriptor is free for it. */
static bool
s_keep_spare_locked (void)
{
    if (s_spare < 0)
        s_spare = open ("/dev/null", O_RDONLY | O_CLOEXEC);
    atomic_store (&s_spare_missing, s_spare < 0);
    return s_spare >= 0;
}

static void
s_keep_spare (void)
{
    int saved = errno;
    pthread_mutex_lock (&s_lock);
    s_keep_spare_locked ();
    pthread_mutex_unlock (&s_lock);
    errno = saved;
}

typedef int (*s_accept4_fn) (int, struct sockaddr *, socklen_t *, int);

/* libc's accept4 (or a sanitizer's, which calls libc's). */
static int
s_next_accept4 (int fd, struct sockaddr *addr, socklen_t *size, int flags)
{
    static _Atomic (s_accept4_fn) next;
    s_accept4_fn call = atomic_load_explicit (&next, memory_order_relaxed);
    if (!call) {
        call = (s_accept4_fn) dlsym (RTLD_NEXT, "accept4");
        if (!call)
            return (int) syscall (SYS_accept4, fd, addr, size, flags);
        atomic_store_explicit (&next, call, memory_order_relaxed);
    }
    return call (fd, addr, size, flags);
}

/* A connection that must wait in the listen queue: no descriptor for
   it, not even the spare's, or none the system can give. libzmq polls
   its listeners level-triggered and would ask again at once, for as long
   as it waits: a millisecond's pause bounds that to a thousand calls a
   second, and a line every 10 s says why. Told EAGAIN, which every
   caller bears (libzmq's ipc listener aborts on EMFILE, ENOBUFS and
   ENOMEM). */
static int
s_wait_in_queue (int why)
{
    pthread_mutex_lock (&s_lock);
    fh_log_limited (&s_waiting, FANHUB_LOG_WARNING,
                    "descriptors: a connection waits to be accepted: %s", strerror (why));
    pthread_mutex_unlock (&s_lock);
    struct timespec pause = {0, 1000000};
    nanosleep (&pause, NULL);
    errno = EAGAIN;
    return -1;
}

/* libzmq 4.3.4 aborts when an accept on an ipc listener fails with
   EMFILE (ipc_listener.cpp:325 leaves it out of the errors it bears; its
   tcp listener has it). Its accepts run on its I/O thread, faster than
   any thread of ours can shed a flood, so no budget rules that out. This
   accept4, which libzmq's calls resolve to (the executable's symbols come
   first), never fails with EMFILE: the spare descriptor is let go, the
   waiting connection taken and closed at once, the spare taken back, and
   the caller told ECONNABORTED, which libzmq and libmicrohttpd take as a
   peer that left (libzmq's monitor says ACCEPT_FAILED with that errno).
   ECONNABORTED means a connection was closed; one that waits is EAGAIN. */
__attribute__ ((visibility ("default"))) int
accept4 (int fd, struct sockaddr *addr, socklen_t *size, int flags)
{
    int got = s_next_accept4 (fd, addr, size, flags);
    if (got >= 0) {
        if (atomic_load_explicit (&s_spare_missing, memory_order_relaxed))
            s_keep_spare ();
        return got;
    }
    int why = errno;
    if (why == ENFILE || why == ENOBUFS || why == ENOMEM)
        return s_wait_in_queue (why);
    if (why != EMFILE)
        return -1;
    pthread_mutex_lock (&s_lock);
    if (!s_keep_spare_locked ()) {
        pthread_mutex_unlock (&s_lock);
        return s_wait_in_queue (EMFILE);
    }
    close (s_spare);
    s_spare = -1;
    got = s_next_accept4 (fd, NULL, NULL, flags | SOCK_CLOEXEC);
    why = errno;
    if (got >= 0)
        close (got);
    s_keep_spare_locked ();
    pthread_mutex_unlock (&s_lock);
    if (got >= 0) {
        errno = ECONNABORTED;
        return -1;
    }
    /* EMFILE: a thread that was not accepting took the freed slot. */
    if (why == EMFILE)
        return s_wait_in_queue (EMFILE);
    errno = why; /* EAGAIN: nothing waited after all */
    return -1;
}

long
fh_fdlimit_raise (void)
{
    struct rlimit limit;
    if (getrlimit (RLIMIT_NOFILE, &limit) != 0)
        return -1;
    if (limit.rlim_cur < limit.rlim_max) {
        rlim_t before = limit.rlim_cur;
        limit.rlim_cur = limit.rlim_max;
        if (setrlimit (RLIMIT_NOFILE, &limit) != 0)
            limit.rlim_cur = before;
    }
    s_keep_spare ();
    fh_info ("descriptors: the limit is %llu (RLIMIT_NOFILE, raised to the hard limit)",
             (unsigned long long) limit.rlim_cur);
    return (long) limit.rlim_cur;
}

/* Descriptors open now (Linux: /proc/self/fd; elsewhere 0). */
static size_t
s_open_now (void)
{
    DIR *dir = opendir ("/proc/self/fd");
    if (!dir)
        return 0;
    size_t count = 0;
    while (readdir (dir))
        count++;
    closedir (dir);
    return count > 3 ? count - 3 : 0; /* ".", ".." and the DIR's own */
}

size_t
fh_fdlimit_control_budget (void)
{
    struct rlimit limit;
    if (getrlimit (RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY)
        return 1024;
    size_t budget = (size_t) limit.rlim_cur / 8;
    return budget < 4 ? 4 : budget > 1024 ? 1024 : budget;
}

size_t
fh_fdlimit_peer_budget (void)
{
    struct rlimit limit;
    if (getrlimit (RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY)
        return 1000000;
    size_t soft = (size_t) limit.rlim_cur;
    size_t reserve = soft / 4 > RESERVE_MIN ? soft / 4 : RESERVE_MIN;
    size_t used = s_open_now () + reserve;
    return soft > used ? soft - used : 1;
}
