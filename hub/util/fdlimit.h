/*  fdlimit - the process's descriptor budget.

    Every bus connection costs a descriptor, and libzmq aborts when it
    cannot get one where it needs it (an ipc accept, a new socket's
    signaller). So the hub raises its soft RLIMIT_NOFILE to the hard limit
    at start, and lets bus peers use the descriptors left over once a
    reserve is kept for the control socket, /metrics, spools, dead letters
    and plugins: a quarter of the limit, at least 64.

    The hub also defines accept4 (fdlimit.c): libzmq's ipc listener aborts
    when an accept finds the table full, and this one never fails so. It
    keeps a spare descriptor (from fh_fdlimit_raise on), lets it go to take
    the waiting connection, closes that at once and says ECONNABORTED.
    When even the spare cannot be had (or the system is out of
    descriptors or memory), the connection waits in the listen queue: it
    says EAGAIN after a millisecond's pause, so that a listener polled
    again at once does not spin, and logs why every 10 s.
*/
#ifndef FH_FDLIMIT_H_INCLUDED
#define FH_FDLIMIT_H_INCLUDED

#include <stddef.h>

/* Raises the soft limit to the hard one and keeps accept4's spare
   descriptor; returns the soft limit now (or -1 when it cannot be read),
   and logs it. */
long fh_fdlimit_raise (void);

/* Descriptors bus peers may use: the soft limit, less the reserve, less
   what is open now. At least 1. */
size_t fh_fdlimit_peer_budget (void);

/* Connections the control socket (and, apart, /metrics) may hold at once:
   an eighth of the soft limit, 4 to 1024, taken from the reserve, so
   that a flood of clients is shed long before an accept finds the table
   full (libzmq aborts then); control_curve.c also hides an ipc socket
   while it is full, since shedding lags libzmq's accepts. */
size_t fh_fdlimit_control_budget (void);

#endif
