/*  notify - tells systemd how the hub is (the sd_notify protocol).

    With Type=notify, systemd hands the service a datagram socket in
    $NOTIFY_SOCKET; a state change is one datagram of "KEY=VALUE" lines:
    READY=1, RELOADING=1 (with MONOTONIC_USEC), STOPPING=1, STATUS=...,
    WATCHDOG=1. Written here directly rather than with libsystemd's
    sd_notify: the protocol is a stable interface (sd_notify(3)), a dozen
    lines, and the hub then needs no systemd library where there is no
    systemd. Without $NOTIFY_SOCKET every call does nothing.
*/
#ifndef FH_NOTIFY_H_INCLUDED
#define FH_NOTIFY_H_INCLUDED

#include <stdint.h>

/* Sends one datagram (printf-style text, lines "KEY=VALUE"). Returns 0,
   also when there is no socket to tell; -1 when the send failed. Any
   thread. */
int fh_notify (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
/* How often systemd wants WATCHDOG=1 (WATCHDOG_USEC, for this process),
   in microseconds; 0 when it does not. */
uint64_t fh_notify_watchdog_usec (void);

#endif
