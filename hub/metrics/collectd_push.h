/*  collectd_push - the hub pushes its figures to collectd's unixsock plugin.

    When metrics.collectd.socket is set, every metrics.collectd.interval
    (default: metrics.interval) the control actor makes a batch of the
    PUTVAL lines of the snapshot (fh_stats_format_collectd) under the
    hub's lock, then sends it over the Unix stream socket with the lock
    released and reads collectd's reply to each ("0 Success: ..." or
    "-1 ..."). It never blocks the message path or a reload: it runs on
    the control actor's thread, outside the hub's lock, with short socket
    timeouts. It reconnects after collectd restarts, sends
    with MSG_NOSIGNAL, and logs a refused value or a lost connection once
    (not every interval) until it works again.
*/
#ifndef FH_COLLECTD_PUSH_H_INCLUDED
#define FH_COLLECTD_PUSH_H_INCLUDED

#include "stats.h"

#include <stdint.h>

typedef struct fh_collectd_push fh_collectd_push_t;

/* NULL when metrics.collectd.socket is not set (or out of memory). Does
   not connect yet. */
fh_collectd_push_t *fh_collectd_push_new (const fh_config_t *config);
void fh_collectd_push_destroy (fh_collectd_push_t **self_p);
/* The batch due when its interval has passed since the last one: PUTVAL
   and PUTNOTIF lines of a new snapshot (malloc'd), else NULL (also when
   out of memory, logged). Takes a snapshot: under the hub's lock. */
char *fh_collectd_push_batch (fh_collectd_push_t *self, fh_stats_t *stats, int64_t now_ns);
/* Sends a batch of fh_collectd_push_batch (NULL: nothing) and frees it:
   the socket I/O, after the hub's lock is released (hub/README.md). */
void fh_collectd_push_flush (fh_collectd_push_t *self, char *batch);
/* Both at once, where no lock is held (tests). */
void fh_collectd_push_tick (fh_collectd_push_t *self, fh_stats_t *stats, int64_t now_ns);

/* For tests (tick's second half): sends ready PUTVAL lines, each ending in
   '\n', connecting first when not connected, and reads collectd's reply to
   each. Returns how many values collectd refused (0: it took them all), or
   -1 when the connection failed (it is then closed; the next call connects
   again). Logs as tick does: a failure or a refusal once, until it is
   over. */
int fh_collectd_push_send (fh_collectd_push_t *self, const char *lines);

/* For tests: how long a batch may wait without progress, and in all
   (defaults 1000 and 2000 ms), so a test on a loaded machine can allow
   more without depending on speed. */
void fh_collectd_push_set_limits (fh_collectd_push_t *self, int64_t idle_ms, int64_t batch_ms);
/* For tests: the same for the pushers made from now on (the control
   actor's own); set before the hub's control starts. */
void fh_collectd_push_set_default_limits (int64_t idle_ms, int64_t batch_ms);

#endif
