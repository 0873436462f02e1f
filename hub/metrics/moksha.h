/*  moksha - monitoring in the shape of moksha.hub's monitoring producer.

    When metrics.moksha_socket is set, the hub binds a PUB socket there
    and, every metrics.moksha_interval, publishes one single-frame JSON
    message shaped like moksha.hub's monitor:
      {"consumers": [{"name", "module", "topic", "initialized",
                      "exceptions", "jsonify", "backlog", "headcount_in",
                      "headcount_out", "times"}], "producers": []}
    with per-interval deltas as moksha sends them, so fedmsg-check style
    health checks and dashboards keep working. "times" are histogram
    bucket midpoints, not exact times, at most FH_MOKSHA_MAX_TIMES of them;
    moksha.c says what each field holds. Runs on the control actor's
    thread.
*/
#ifndef FH_MOKSHA_H_INCLUDED
#define FH_MOKSHA_H_INCLUDED

#include "hub.h"

#include <stddef.h>
#include <stdint.h>

typedef struct fh_moksha fh_moksha_t;

/* NULL with err empty when metrics.moksha_socket is not set; NULL with one
   line in err when the socket cannot be bound. */
fh_moksha_t *fh_moksha_new (fh_hub_t *hub, char *err, size_t errlen);
void fh_moksha_destroy (fh_moksha_t **self_p);
/* The message due when metrics.moksha_interval has passed (malloc'd),
   else NULL; the readings move on. Reads the hub: under its lock. */
char *fh_moksha_message (fh_moksha_t *self, int64_t now_ns);
/* Publishes text from fh_moksha_message (NULL: nothing) and frees it:
   after the hub's lock is released. */
void fh_moksha_send (fh_moksha_t *self, char *text);
/* Both at once. */
void fh_moksha_tick (fh_moksha_t *self, int64_t now_ns);

/* For tests. */

/* moksha lists one processing time per message; at most this many here. */
#define FH_MOKSHA_MAX_TIMES 1024

/* The "times" of one interval from the difference of two processing
   histograms: each bucket in bucket order contributes its midpoint, in
   seconds, once per sample, until max values are written. Returns how
   many were written to out. */
size_t fh_moksha_times (const fh_histogram_snapshot_t *interval, double *out, size_t max);

#endif
