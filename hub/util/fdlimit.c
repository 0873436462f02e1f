/*  fdlimit - the process's descriptor budget. See fdlimit.h. */
#include "fdlimit.h"

#include "log.h"

#include <dirent.h>
#include <sys/resource.h>

#define RESERVE_MIN 64

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
