/*  collectd_notify - collectd notifications (PUTNOTIF) from a series of
    metrics snapshots: a warning when something goes wrong, "okay" once
    it is over, each said once.

    Both routes to collectd use it: `fanhub collectd` (Exec) prints the
    lines after its PUTVAL lines, the hub's push sends them over the
    unixsock socket. Each keeps one fh_collectd_notify_t and feeds it
    every snapshot it sends. The conditions:

    - a consumer's backlog reaches queue.warn_at (warn_at in the
      snapshot): warning; okay once it is below half of warn_at again
      (the hub's own log line re-arms the same way), or warn_at is 0;
      type queue_length;
    - a consumer has stuck workers (stuck > 0): warning; okay at 0;
      type count, type instance stuck;
    - a consumer's plugin says it is down or halted (state 1 or 2, with
      its last error in the message): warning, again when it goes from one
      to the other; okay once it is up; type gauge, type instance state;
    - a bus.connect endpoint has had no connection for disconnected_after
      seconds (counted from the first snapshot that showed it
      disconnected): warning; okay once it is connected. A bind
      endpoint waits for publishers and never warns. Type bool, type
      instance connected.

    A consumer or endpoint that is gone from a snapshot (a reload removed
    it) is forgotten. Not thread-safe: one owner.
*/
#ifndef FH_COLLECTD_NOTIFY_H_INCLUDED
#define FH_COLLECTD_NOTIFY_H_INCLUDED

#include "metrics.h"

#define FH_COLLECTD_DISCONNECTED_AFTER_S 10.0 /* the default */

typedef struct fh_collectd_notify fh_collectd_notify_t;

/* NULL when out of memory. */
fh_collectd_notify_t *fh_collectd_notify_new (double disconnected_after_s);
void fh_collectd_notify_destroy (fh_collectd_notify_t **self_p);

/* The PUTNOTIF lines (each ending in '\n') for what changed since the
   last snapshot, "" when nothing did; NULL when out of memory (the
   state is then unchanged). host is named as in the PUTVAL lines (NULL
   or empty: "localhost"); now_s is a monotonic time in seconds (how
   long an endpoint has been down); when_s the wall-clock time written
   as time=, which collectd requires. */
char *fh_collectd_notify (fh_collectd_notify_t *self, const fh_metrics_snapshot_t *snapshot,
                          const char *host, double now_s, double when_s);

/* The last lines were not delivered: the next call says again the
   state (warning or okay) of every condition it has ever spoken of. */
void fh_collectd_notify_resend (fh_collectd_notify_t *self);

#endif
