/*  control_tick - the control actor's once-a-second tick: the exporters.

    Each second, under the hub's lock, the figures move on (the stats
    interval, the status page's ring) and what the exporters send is made:
    moksha's consumer-state message, a collectd batch, systemd's STATUS
    line with the watchdog. It is sent once the lock is released
    (fh_tick_send), so a slow collectd never holds a reload or the hub's
    other users (hub/README.md). Owned by the control actor's thread.
*/
#ifndef FH_CONTROL_TICK_H_INCLUDED
#define FH_CONTROL_TICK_H_INCLUDED

#include "hub.h"
#include "stats.h"
#include "status.h"

#include <stddef.h>
#include <stdint.h>

#define FH_TICK_MS 1000

typedef struct fh_tick fh_tick_t;

/* The exporters of the hub's configuration. NULL with one line in err
   when out of memory or when moksha's socket cannot be had. */
fh_tick_t *fh_tick_new (fh_hub_t *hub, char *err, size_t errlen);
/* Sends nothing that is still unsent. Safe with NULL and twice. */
void fh_tick_destroy (fh_tick_t **self_p);
/* Under the hub's lock, after a reload: moksha's consumer list starts
   over with the new consumers. */
void fh_tick_follow_reload (fh_tick_t *self, fh_hub_t *hub);
/* The status page's ring, for STATUS answers. */
fh_status_t *fh_tick_status (fh_tick_t *self);
/* Under the hub's lock: the figures move on and what the exporters send
   is made, kept until fh_tick_send. */
void fh_tick_make (fh_tick_t *self, fh_hub_t *hub, fh_stats_t *stats, int64_t now_ns);
/* With the hub's lock released: the tick's socket I/O, if one was made. */
void fh_tick_send (fh_tick_t *self);

#endif
