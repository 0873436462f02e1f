/*  stats - the hub's figures as one snapshot (metrics.h), and as the JSON
    of docs/stats-schema.md.

    fh_stats_t also keeps what "over the last interval" needs: the
    whole-run latency histograms of every consumer as they were at the
    last two interval boundaries. fh_stats_tick moves the boundary when
    metrics.interval has passed; the interval figures of a snapshot are
    the difference between the last two boundaries, so every reader in
    the same interval sees the same figures (as collectd expects).
    Owned by one thread (the control actor).
*/
#ifndef FH_STATS_H_INCLUDED
#define FH_STATS_H_INCLUDED

#include "hub.h"
#include "metrics.h"
#include "process_figures.h"

#include <stdint.h>

typedef struct fh_stats fh_stats_t;

fh_stats_t *fh_stats_new (fh_hub_t *hub);
void fh_stats_destroy (fh_stats_t **self_p);

/* Moves the interval boundary when metrics.interval has passed since the
   last one. Returns true when it did. */
bool fh_stats_tick (fh_stats_t *self, int64_t now_ns);
/* The process figures the next snapshots carry: read by the caller
   (fh_process_read) with no lock held, so that a snapshot, taken under
   the hub lock, does no I/O. Until the first, a snapshot has none. */
void fh_stats_set_process (fh_stats_t *self, const fh_process_t *reading);
/* A new snapshot, the caller's to destroy; NULL when out of memory. */
fh_metrics_snapshot_t *fh_stats_snapshot (fh_stats_t *self);

#endif
