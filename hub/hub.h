/*  hub - one running fanhub: its consumers, trigger table and enqueuer.

    fh_hub_new loads and initialises every consumer's plugin and builds the
    trigger table, touching no socket (this much is `fanhub check`).
    fh_hub_start starts the consumer threads, then the enqueuer. Shutdown
    is in steps so the caller can bound each: fh_hub_stop_receiving
    closes the bus and tells every consumer "no more", and fh_hub_drained
    says when all have consumed what was queued; then fh_hub_finish lets
    every instance go, each destroyed (its plugin's fini called) on a
    thread of its own, and fh_hub_step reaps them until fh_hub_instances
    is 0; then fh_hub_destroy frees the rest. A fini that never returns
    holds only its own thread: the caller gives up at its deadline.
*/
#ifndef FH_HUB_H_INCLUDED
#define FH_HUB_H_INCLUDED

#include "config.h"
#include "consumer.h"
#include "enqueuer.h"
#include "source_amqp.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

typedef struct fh_hub fh_hub_t;

/* config must outlive the hub. NULL on error, with one line in err. */
fh_hub_t *fh_hub_new (const fh_config_t *config, const char *plugin_dir, char *err, size_t errlen);
/* Joins consumer threads (the hub must be stopped and drained if it was
   started), calls fini, unloads plugins. Safe with NULL and twice. */
void fh_hub_destroy (fh_hub_t **self_p);

int fh_hub_start (fh_hub_t *self, char *err, size_t errlen);
void fh_hub_stop_receiving (fh_hub_t *self);
bool fh_hub_drained (fh_hub_t *self);

size_t fh_hub_consumer_count (const fh_hub_t *self);
fh_consumer_t *fh_hub_consumer (fh_hub_t *self, size_t index);
/* Hub-wide counters (zero before start). */
void fh_hub_counts (fh_hub_t *self, fh_enqueuer_counts_t *out);
/* The counter of the control socket's refused handshakes (control_curve),
   added to hub.auth_denied by fh_hub_counts. */
atomic_uint_fast64_t *fh_hub_control_denied (fh_hub_t *self);
/* Where the control socket counts the connections it sheds. */
atomic_uint_fast64_t *fh_hub_control_refused (fh_hub_t *self);
/* Where the control socket counts the answers it could not send. */
atomic_uint_fast64_t *fh_hub_control_unanswered (fh_hub_t *self);
/* bus.amqp's counts (source_amqp.h); false, with zeros, without one. */
bool fh_hub_amqp_counts (fh_hub_t *self, fh_source_amqp_counts_t *out);
/* Under the lock: messages handled over the hub's life (by the
   enqueuer, when no consumer took them, and by every consumer instance,
   removed ones included), with their latency (may be NULL). */
uint64_t fh_hub_handled (fh_hub_t *self, fh_histogram_snapshot_t *end_to_end);
/* Under the lock: consumer instances that reloads replaced or removed
   and that still consume what they hold, and how many messages that is. */
void fh_hub_draining (fh_hub_t *self, uint64_t *instances, uint64_t *backlog);
/* Reload: takes config (owned by the hub from now on, also on error;
   freed once nothing made from it is left). Every key that differs from
   the running configuration is applied, or the reload is refused and err
   names the keys that need a restart (fh_config_restart_keys). Consumers
   are matched by name: one whose settings are the same (topics and
   queue.warn_at may differ: applied live) keeps running, queue, spool
   and counters included; a removed one finishes its queue (or spools it)
   and is destroyed; a changed one gets a new instance that starts once
   the old one has consumed everything it holds (lineage.h). On error
   nothing changed (-1, err says why; -2 when the init of a consumer it
   added or changed did not return within shutdown_timeout, or a stop
   came meanwhile: that init is abandoned, reload_init.h). Otherwise returns how many of the
   consumers it added or changed are not up once their init returned (a
   worker plugin's init waits for each worker's first start) and lists
   them in down ("consumer 'x' is down: why; ..."; "" for none). Main
   thread only. */
int fh_hub_reload (fh_hub_t *self, fh_config_t *config, char *err, size_t errlen, char *down,
                   size_t downlen);
/* `fanhub restart NAME`: the consumer gets a new instance made from the
   running configuration, exactly as by a reload that changed it (the old
   one consumes what it holds, then the new one starts). As
   fh_hub_reload otherwise; -1 also when there is no such consumer. Main
   thread only. */
int fh_hub_restart (fh_hub_t *self, const char *name, char *err, size_t errlen, char *down,
                    size_t downlen);
/* Under the lock (the control actor): asks the main thread for a restart
   of name; its number, or 0 when one asked is not taken yet (or the name
   does not fit). */
uint64_t fh_hub_restart_ask (fh_hub_t *self, const char *name);
/* Main thread: the restart asked, into name (true), or false. */
bool fh_hub_restart_take (fh_hub_t *self, char *name, size_t size);
/* Main thread: the outcome of the restart taken ("OK ...", "DOWN ...",
   "ERROR ..."). */
void fh_hub_note_restart (fh_hub_t *self, const char *result);
/* Under the lock: restarts ended so far, and the last one's word. */
uint64_t fh_hub_restart_result (fh_hub_t *self, char *result, size_t size);
/* Any thread: what fh_hub_reload is loading now ("consumer 'x', plugin
   P": its init has not returned), or "". */
void fh_hub_loading (fh_hub_t *self, char *what, size_t size);
/* Main thread, now and then after a reload and during shutdown: lets
   consumer instances that have finished leaving go (their fini on a
   thread of their own), reaps those torn down and starts successors.
   Returns how many instances are still leaving (beyond the current
   ones; all of them after fh_hub_finish). */
size_t fh_hub_step (fh_hub_t *self);
/* Shutdown, once drained (the control actor gone: it reads instances):
   the current instances leave too, at the next steps. */
void fh_hub_finish (fh_hub_t *self);
/* Instances alive or being torn down. */
size_t fh_hub_instances (fh_hub_t *self);
/* The process is about to _exit with consumer threads still busy: logs
   each (with why) and detaches them. */
void fh_hub_abandon (fh_hub_t *self, const char *why);
/* Under the lock: the figures of consumer `index` summed over all its
   instances, gone ones included (monotonic across reloads). */
void fh_hub_consumer_counts (fh_hub_t *self, size_t index, fh_consumer_counts_t *out);
void fh_hub_consumer_latency (fh_hub_t *self, size_t index, fh_histogram_snapshot_t *queue_wait,
                              fh_histogram_snapshot_t *processing);
/* Under the lock: consumer `index`'s lineage serial (fh_lineage_serial). */
uint64_t fh_hub_consumer_serial (fh_hub_t *self, size_t index);
/* Main thread (it owns the lineages: no lock), once a second: stuck
   checks and spool ticks (fsync) of every running instance, leaving ones
   included. Not on the control actor: a slow disk must not hold STATS. */
void fh_hub_tick (fh_hub_t *self, int64_t now_ns);
/* Other threads (the control actor) read the consumer list and the
   configuration under this lock; a reload changes them under it and
   moves the generation on. */
void fh_hub_lock (fh_hub_t *self);
void fh_hub_unlock (fh_hub_t *self);
uint64_t fh_hub_generation (fh_hub_t *self);
/* The main thread, as a reload attempt starts (before it reads the
   file), and its word when it ends ("OK ..." / "ERROR ..."). */
void fh_hub_note_reload_start (fh_hub_t *self);
void fh_hub_note_reload (fh_hub_t *self, const char *result);
/* Under the lock: reload attempts ended so far, and the last one's word
   ("OK ...", "DOWN ..." or "ERROR ..."). */
uint64_t fh_hub_reload_result (fh_hub_t *self, char *result, size_t size);
/* Under the lock: when the last reload attempt ended (Unix seconds; 0
   before the first). */
double fh_hub_reload_time (fh_hub_t *self);
/* Under the lock: reload attempts started so far. A request made now is
   answered by the attempt numbered one more: the first that reads the
   file after the request came (reloads that come meanwhile fold into it
   or the next). */
uint64_t fh_hub_reloads_started (fh_hub_t *self);
/* Where the control actor sends injected messages (enqueuer.h). */
const char *fh_hub_inject_endpoint (fh_hub_t *self);
const fh_config_t *fh_hub_config (const fh_hub_t *self);
/* Monotonic time the hub was created. */
int64_t fh_hub_started_ns (const fh_hub_t *self);
/* Connections up on a bus endpoint: index counts the bus.connect
   endpoints, then the bus.bind ones, as configured. */
int fh_hub_endpoint_peers (fh_hub_t *self, size_t index);
/* How long ago the enqueuer's loop last turned (ns); 0 when it is not
   running. */
int64_t fh_hub_enqueuer_age_ns (fh_hub_t *self);
/* A bus endpoint's state (endpoint_watch.h), numbered as above; zeros
   when the enqueuer is not running. */
void fh_hub_endpoint_status (fh_hub_t *self, size_t index, fh_endpoint_status_t *out);
/* Logs the counters of the hub and of every consumer, one line each. */
void fh_hub_log_counts (fh_hub_t *self);

#endif
