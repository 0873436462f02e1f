/*  status - what the live status page shows beyond STATS: a small ring of
    each consumer's counts (every FH_STATUS_STEP_NS, 15 minutes of them)
    for the backlog chart and the rates, each consumer's state and time
    to drain, the configuration file, the last reload's result and the
    recent warnings.

    Owned by the control actor: fh_status_tick on its tick (one read of
    each consumer's counters every 10 s, nothing else), fh_status_answer
    when STATUS is asked (the page, /status.json), under the hub's lock.
    The ring survives reloads: it is keyed by consumer name and lineage
    (fh_hub_consumer_serial). A removed consumer's goes at the next tick;
    one added again under its name has another lineage and a new ring.
*/
#ifndef FH_STATUS_H_INCLUDED
#define FH_STATUS_H_INCLUDED

#include "hub.h"
#include "metrics.h"

#include <stdint.h>

#define FH_STATUS_STEP_NS (10 * INT64_C (1000000000))
#define FH_STATUS_SAMPLES 90 /* 15 minutes */

typedef struct fh_status fh_status_t;

fh_status_t *fh_status_new (void);
void fh_status_destroy (fh_status_t **self_p);
/* Samples every consumer's counts when a step has passed since the last
   sample (the first tick samples at once). */
void fh_status_tick (fh_status_t *self, fh_hub_t *hub, int64_t now_ns);
/* The STATUS answer, the caller's to free (NULL when out of memory): the
   STATS JSON of snapshot, with "status" objects added to the hub (config
   file, last reload, recent warnings) and to each consumer (state, rates,
   time to drain, backlog history). docs/status-page.md. */
char *fh_status_answer (fh_status_t *self, fh_hub_t *hub, const fh_metrics_snapshot_t *snapshot,
                        int64_t now_ns);

#endif
