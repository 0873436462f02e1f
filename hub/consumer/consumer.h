/*  consumer - one configured consumer: its plugin, queue, thread, counters.

    fh_consumer_new loads the plugin and calls its init with the consumer's
    options; fh_consumer_start starts the consumer's thread, which takes
    messages from the queue in arrival order and calls the plugin's consume
    for each, and idle when the queue runs empty. The enqueuer offers
    messages with fh_consumer_offer, which applies queue.overflow to a full
    queue: drop the newest or the oldest (counted), spill to the spool, or,
    with `block`, answer FULL so that the enqueuer waits and offers again.
    fh_consumer_close means "no more": the thread consumes what is queued
    and ends; fh_consumer_destroy joins it and calls fini on the calling
    thread.

    Counters are monotonic, kept in tallies (fh_consumer_counts_t), each
    written by one thread (enqueued, dropped and backlog_max by the
    enqueuer, the rest by the consumer's threads) or by atomic adds, and
    read by anyone without a lock, by the registry's rows. The consumer
    thread's counters change under a sequence lock, so a snapshot always
    satisfies dequeued = completed + failed + in_flight exactly; and it
    reads them before enqueued, so enqueued >= dequeued. The consumer thread also
    records two latency histograms: queue wait (hub receive to consume
    start) and processing (consume start to end).
*/
#ifndef FH_CONSUMER_H_INCLUDED
#define FH_CONSUMER_H_INCLUDED

#include "clock.h"
#include "config.h"
#include "consumer_counts.h"
#include "histogram.h"
#include "message.h"

#include <stdbool.h>
#include <stdint.h>

/* The state stats show for a paused consumer (`fanhub pause`), beside
   the plugin's FANHUB_STATE_* 0 up, 1 down, 2 halted. */
#define FH_CONSUMER_PAUSED 3

typedef struct fh_consumer fh_consumer_t;

/* Loads the plugin and calls init with host, the host table its plugin
   keeps (the hub's fh_host, plugin/host.h: whoever makes an instance
   hands it, so the consumer never calls the table). On error NULL, with
   one line in err naming the consumer, e.g. "hub.yaml:9:5: consumer
   'archive': plugin 'log': options.path: /x: cannot open: No such file or
   directory". */
fh_consumer_t *fh_consumer_new (const fanhub_host_t *host, const fh_consumer_config_t *config,
                                size_t index, const char *plugin_dir, char *err, size_t errlen);
/* What fh_consumer_new refuses of a consumer's settings once its plugin is
   loaded (workers: N needs a thread-safe plugin; its options checked
   against its table through host): 0, or -1 with one line in err naming
   the consumer. Acquires nothing; `fanhub check` uses it. */
int fh_consumer_fits_plugin (const fanhub_host_t *host, const fh_consumer_config_t *config,
                             const fanhub_consumer_desc_t *desc, char *err, size_t errlen);
/* With a state_dir: opens the consumer's dead-letter store and spool
   (STATE_DIR/NAME); what the spool holds from the last run goes first.
   Before start. -1 with one line in err. */
int fh_consumer_open_state (fh_consumer_t *self, const fh_config_t *config, char *err,
                            size_t errlen);
/* About once a second, from one thread: spool fsync and cursor. */
void fh_consumer_tick (fh_consumer_t *self, int64_t now_ns);
/* Replaces the clock (tests: backoff without sleeping). Before start. */
void fh_consumer_set_clock (fh_consumer_t *self, const fh_clock_ops_t *clock);
/* Joins the thread if started (after fh_consumer_close), calls fini,
   releases queued messages, unloads the plugin. Safe with NULL, twice. */
void fh_consumer_destroy (fh_consumer_t **self_p);

int fh_consumer_start (fh_consumer_t *self, char *err, size_t errlen);
typedef enum {
    FH_OFFER_TAKEN,   /* in the queue, or handed to the spool's writer
                         (spill): the consumer holds it now */
    FH_OFFER_REFUSED, /* dropped (counted): the caller keeps its hold */
    FH_OFFER_FULL     /* wait and offer again later: overflow: block and the
                         queue is full; spill and the spool writer's
                         hand-off is full (the disk is behind); or a spill
                         consumer whose spool is not open yet (a reload's
                         successor) */
} fh_offer_t;

/* Enqueuer thread only. Applies queue.overflow when the queue is full;
   an evicted message is released with `handled`. A sleeping consumer may
   not be woken until fh_consumer_signal. */
fh_offer_t fh_consumer_offer (fh_consumer_t *self, fh_msg_t *msg, fh_handled_t *handled);
/* Enqueuer thread: false when msg is outside the consumer's `shard:`
   (shard.h) share of the keys; true without a shard. */
bool fh_consumer_takes (const fh_consumer_t *self, const fh_msg_t *msg);
/* Enqueuer thread only: wakes the consumer for what was offered since the
   last signal. Call it when there is nothing more to offer for now. */
void fh_consumer_signal (fh_consumer_t *self);
/* Enqueuer thread only: counts a message this consumer lost before it
   could be offered (the hub ran out of memory). */
void fh_consumer_count_drop (fh_consumer_t *self, fh_msg_t *msg);
/* Enqueuer thread only, during a reload's swap: `from`, an instance that
   never started (nor opened its state), hands what it holds to `into`,
   its successor not yet offered anything, in order, each message counted
   enqueued by `into` too (its lineage takes them off `from`'s figures).
   False, nothing moved, when `into` could not hold all of it (a smaller
   queue.capacity or max_bytes) or takes nothing before its spool, or
   when `from` inherits a spool (its successor must get it). A message
   the queue cannot grow for is dropped and counted. */
bool fh_consumer_fold_into (fh_consumer_t *from, fh_consumer_t *into, fh_handled_t *handled);
/* A reload kept it with a new queue.warn_at (0: none). */
void fh_consumer_set_warn_at (fh_consumer_t *self, size_t warn_at);
/* Asks every consumer of the process to have its plugin reopen its files
   (ABI 1.3 reopen), each on its own thread before its next consume or
   idle call: what SIGHUP and a reload do, so that logrotate's create
   mode works. Any thread. */
void fh_consumer_reopen_all (void);
/* The hub was told to stop (SIGTERM, SIGINT): from now on every
   consumer's setting "stopping" answers 1, so that a plugin's init
   waiting for something gives up at once. Any thread; never undone. */
void fh_consumer_note_stopping (void);
bool fh_consumer_stopping (void);
/* A reload moved it to position index of the configuration. */
void fh_consumer_set_index (fh_consumer_t *self, size_t index);
/* A reload replaces it: no more offers; it consumes everything it holds,
   its spool included, and ends; a spilling one (with a state_dir) leaves
   its spool to its successor instead, as at a stop. */
void fh_consumer_retire (fh_consumer_t *self);
/* A reload's successor of a spilling instance: it takes its spool
   (its predecessor's) over, and until that spool is open what is offered
   to it goes onto the end of the predecessor's spool, so that order holds
   and the bus never waits for the predecessor to drain. */
void fh_consumer_inherit_spool (fh_consumer_t *self, fh_consumer_t *predecessor);
/* Main thread, before the predecessor's hand-over: offers no longer
   reach the predecessor's spool (a moment of FULL until this one's spool
   is open). */
void fh_consumer_forget_predecessor (fh_consumer_t *self);
/* Under the lineage's lock at its start: the records its spool held at
   open from its predecessor, now counted in its enqueued. */
uint64_t fh_consumer_take_inherited (fh_consumer_t *self);
/* Once its threads are done, before its figures are kept: writes what
   its spool writer still holds and lets go of the messages it spilled in
   this run (done for it: in its spool, for its successor). */
void fh_consumer_hand_over (fh_consumer_t *self);
/* memory.max_bytes for every consumer of the process (0: none). */
void fh_consumer_set_memory_max (uint64_t max_bytes);
/* Its queue.overflow (fh_overflow_t). */
int fh_consumer_overflow (const fh_consumer_t *self);
/* No more offers: the thread drains the queue and ends (see
   fh_consumer_bound_tickets). */
void fh_consumer_close (fh_consumer_t *self);
/* shutdown_timeout: how long a worker left with nothing but PENDING
   tickets waits for them (10 s until set). */
void fh_consumer_set_ticket_grace (fh_consumer_t *self, int64_t grace_ns);
/* Closing (a stop, or a removal): open tickets are waited for until 3/4
   of the grace from now at the latest, leaving time for fini. Once. */
void fh_consumer_bound_tickets (fh_consumer_t *self);
/* Gives up on the threads (the process is about to _exit with them
   still inside a plugin): stops retry waits, detaches the threads, so
   destroy will not join them. */
void fh_consumer_abandon (fh_consumer_t *self);
/* True once every thread it started has ended (drained, or given up);
   true when none was started. */
bool fh_consumer_ended (fh_consumer_t *self);

const char *fh_consumer_name (const fh_consumer_t *self);
const char *fh_consumer_plugin_path (const fh_consumer_t *self);
/* The version its plugin's descriptor gives, or "" without one. */
const char *fh_consumer_plugin_version (const fh_consumer_t *self);
void fh_consumer_counts (fh_consumer_t *self, fh_consumer_counts_t *out);
/* Messages this consumer was the last to release, and their receive to
   handled latency (may be NULL). */
uint64_t fh_consumer_handled (fh_consumer_t *self, fh_histogram_snapshot_t *end_to_end);
/* Nanoseconds worker i has spent inside consume since start. */
double fh_consumer_worker_busy (fh_consumer_t *self, size_t worker);
/* Called once a second by one thread: notes (and logs, once) workers
   inside a consume call older than consume_timeout, and ends the attempt
   of each PENDING ticket older than that (counted in tickets_expired,
   logged; retry settings apply). Returns the stuck workers. */
size_t fh_consumer_check_stuck (fh_consumer_t *self, int64_t now_ns);

/* host->msg_ticket (ABI 1.1): the ticket of msg when the calling thread
   is inside a consume call of it, reserved now if it was not yet (a
   plugin that never asks has none); 0 otherwise. */
fanhub_ticket_t fh_consumer_msg_ticket (const fh_msg_t *msg);
/* host->msg_attempt: that call's attempt number (1 for the first), 0
   outside it. */
uint32_t fh_consumer_msg_attempt (const fh_msg_t *msg);
/* host->complete (ABI 1.1), from any thread: finishes a message the plugin
   answered FANHUB_PENDING, as if consume had answered result. 0, or -1
   (logged, rate-limited) when the ticket is not pending. */
int fh_consumer_complete (fh_consumer_t *self, fanhub_ticket_t ticket, fanhub_result_t result);
/* The same with the plugin's reason (host->complete_reason, ABI 1.3). */
int fh_consumer_complete_reason (fh_consumer_t *self, fanhub_ticket_t ticket,
                                 fanhub_result_t result, const char *reason);
/* The same without counting a late one: 0, or -1 when the ticket is not
   pending; the caller counts it (fh_consumer_count_late, or under the
   name once the figures are final: plugin/host_ctx.c). */
int fh_consumer_complete_try (fh_consumer_t *self, fanhub_ticket_t ticket, fanhub_result_t result,
                              const char *reason);
/* A complete of a ticket that is not pending: counted in
   completions_late, logged (rate-limited). */
void fh_consumer_count_late (fh_consumer_t *self, fanhub_ticket_t ticket);
/* Its figures are read for the last time now (the lineage folds them):
   a late complete from now on is counted under its name instead. */
void fh_consumer_figures_final (fh_consumer_t *self);

/* ABI 1.3 (consumer.c): a setting as host->consumer_setting
   answers it; the plugin's state and last error; its counters. */
int64_t fh_consumer_setting (fh_consumer_t *self, const char *name);
void fh_consumer_set_state (fh_consumer_t *self, int state, const char *error);
void fh_consumer_count (fh_consumer_t *self, int counter, uint64_t n);
/* ABI 1.5 (consumer.c): the plugin's window of open tickets
   (host->set_window), a ticket's work started (host->ticket_started),
   and a message it publishes (host->publish: 0 queued, -1 dropped). */
void fh_consumer_set_window (fh_consumer_t *self, size_t n);
void fh_consumer_ticket_started (fh_consumer_t *self, fanhub_ticket_t ticket);
int fh_consumer_publish (fh_consumer_t *self, const char *topic, const void *body, size_t size);
/* Its publish: endpoints as opened ("" when none): publish.h. */
void fh_consumer_publish_endpoints (fh_consumer_t *self, char *buf, size_t size);
/* The figures its plugin registered of its own (ABI 1.6,
   plugin_metrics.h), or NULL when none. */
const struct fh_plugin_metrics *fh_consumer_plugin_metrics (const fh_consumer_t *self);
/* The last error the plugin reported ("" when none) into buf. */
void fh_consumer_last_error (fh_consumer_t *self, char *buf, size_t size);
/* Any thread: `fanhub pause` (true) and `fanhub resume` (false). Paused,
   its thread(s) take nothing from the queue or the spool: the queue
   fills under its overflow policy, consumes already started finish. A
   stop or a reload that retires it drains it as usual; a new instance
   (a reload that changed it, `fanhub restart`) starts unpaused. Stats
   show state FH_CONSUMER_PAUSED. */
void fh_consumer_set_paused (fh_consumer_t *self, bool paused);
bool fh_consumer_paused (fh_consumer_t *self);
/* Any thread: what the plugin says of itself now (FANHUB_STATE_*). */
int fh_consumer_plugin_state (fh_consumer_t *self);

/* After fh_consumer_open_state: the highest seq of the messages its spool
   holds from the last run, 0 when none. */
uint64_t fh_consumer_spool_max_seq (const fh_consumer_t *self);
/* Whole-run latency histograms (either may be NULL). */
void fh_consumer_latency (fh_consumer_t *self, fh_histogram_snapshot_t *queue_wait,
                          fh_histogram_snapshot_t *processing);

#endif
