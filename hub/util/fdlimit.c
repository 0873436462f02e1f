/*  fdlimit - the process's descriptor budget. See fdlimit.h. */
#include "fdlimit.h"

#include "log.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef RTLD_NEXT /* glibc shows it only under _GNU_SOURCE */
#define RTLD_NEXT ((void *) -1l)
#endif

#define RESERVE_MIN 64

/* The descriptor accept4 lets go of for a moment when the table is full. */
static atomic_int s_spare = -1;
static atomic_bool s_spare_wanted; /* fh_fdlimit_raise has run */

static void
s_keep_spare (void)
{
    int fd = open ("/dev/null", O_RDONLY | O_CLOEXEC);
    int old = atomic_exchange (&s_spare, fd);
    if (old >= 0)
        close (old);
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

/* libzmq 4.3.4 aborts when an accept on an ipc listener fails with
   EMFILE (ipc_listener.cpp:325 leaves it out of the errors it bears; its
   tcp listener has it). Its accepts run on its I/O thread, faster than
   any thread of ours can shed a flood, so no budget rules that out. This
   accept4, which libzmq's calls resolve to (the executable's symbols come
   first), never fails with EMFILE: the spare descriptor is let go, the
   waiting connection taken and closed at once, the spare taken back, and
   the caller told ECONNABORTED, which libzmq and libmicrohttpd take as a
   peer that left (libzmq's monitor says ACCEPT_FAILED with that errno). */
__attribute__ ((visibility ("default"))) int
accept4 (int fd, struct sockaddr *addr, socklen_t *size, int flags)
{
    int got = s_next_accept4 (fd, addr, size, flags);
    if (got >= 0 || errno != EMFILE) {
        /* A race below lost the spare: the next accept with room retakes it. */
        if (atomic_load_explicit (&s_spare_wanted, memory_order_relaxed)
            && atomic_load (&s_spare) < 0)
            s_keep_spare ();
        return got;
    }
    int spare = atomic_exchange (&s_spare, -1);
    if (spare < 0) {
        /* Another thread holds the spare a moment: the connection waits in
           the backlog for the next call, so nothing was refused. */
        errno = EAGAIN;
        return -1;
    }
    close (spare);
    got = s_next_accept4 (fd, NULL, NULL, flags | SOCK_CLOEXEC);
    int why = errno;
    if (got >= 0)
        close (got);
    s_keep_spare ();
    /* ECONNABORTED only when a connection was closed: nothing waited
       after all (EAGAIN), or another thread took the freed slot (EMFILE,
       the connection still waits), is not a refusal. */
    errno = got >= 0 ? ECONNABORTED : why == EMFILE ? EAGAIN : why;
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
    atomic_store (&s_spare_wanted, true);
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
