/*  consumer - one configured consumer: its plugin, queue, thread, counters.

    fh_consumer_new loads the plugin and calls its init with the consumer's
    options; fh_consumer_start starts the consumer's thread, which takes
    messages from the queue in arrival order and calls the plugin's consume
    for each, and idle when the queue runs empty. The enqueuer offers
    messages with fh_consumer_offer (never blocking: a full queue drops the
    newest and counts it). fh_consumer_close means "no more": the thread
    consumes what is queued and ends; fh_consumer_destroy joins it and
    calls fini on the calling thread.

    Counters are monotonic, each written by one thread (enqueued, dropped
    and backlog_max by the enqueuer, the rest by the consumer's thread) and
    read by anyone without a lock. The consumer thread's counters change
    under a sequence lock, so a snapshot always satisfies
    dequeued = completed + failed + in_flight exactly; and it reads them
    before enqueued, so enqueued >= dequeued. The consumer thread also
    records two latency histograms: queue wait (hub receive to consume
    start) and processing (consume start to end).
*/
#ifndef FH_CONSUMER_H_INCLUDED
#define FH_CONSUMER_H_INCLUDED

#include "config.h"
#include "histogram.h"
#include "message.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct fh_consumer fh_consumer_t;

typedef struct {
    uint64_t enqueued;  /* accepted into the queue */
    uint64_t dropped;   /* lost before the queue: queue full, no memory */
    uint64_t dequeued;  /* taken from the queue (consume started) */
    uint64_t completed; /* consume answered FANHUB_OK */
    uint64_t failed;    /* consume answered FANHUB_FAIL or FANHUB_RETRY */
    uint64_t in_flight; /* dequeued - completed - failed: inside consume */
    uint64_t backlog;   /* enqueued - dequeued: accepted, not yet started */
    uint64_t backlog_max; /* the highest backlog since start */
    uint64_t capacity;  /* queue.capacity */
} fh_consumer_counts_t;

/* Loads the plugin and calls init. On error NULL, with one line in err
   naming the consumer, e.g. "hub.yaml:9:5: consumer 'archive': plugin
   'log': options.path: /x: cannot open: No such file or directory". */
fh_consumer_t *fh_consumer_new (const fh_consumer_config_t *config,
                                const char *plugin_dir, char *err, size_t errlen);
/* Joins the thread if started (after fh_consumer_close), calls fini,
   releases queued messages, unloads the plugin. Safe with NULL, twice. */
void fh_consumer_destroy (fh_consumer_t **self_p);

int fh_consumer_start (fh_consumer_t *self, char *err, size_t errlen);
/* Enqueuer thread only. Takes one holder of msg when accepted; false when
   the queue is full (counted as dropped; msg untouched). */
bool fh_consumer_offer (fh_consumer_t *self, fh_msg_t *msg);
/* Enqueuer thread only: counts a message this consumer lost before it
   could be offered (the hub ran out of memory). */
void fh_consumer_count_drop (fh_consumer_t *self);
/* No more offers: the thread drains the queue and ends. */
void fh_consumer_close (fh_consumer_t *self);
/* Gives up on the thread (the process is about to _exit with it still
   inside a plugin): detaches it, so destroy will not join it. */
void fh_consumer_abandon (fh_consumer_t *self);
/* True once the thread has consumed everything and ended. */
bool fh_consumer_done (fh_consumer_t *self);

const char *fh_consumer_name (const fh_consumer_t *self);
const char *fh_consumer_plugin_path (const fh_consumer_t *self);
void fh_consumer_counts (fh_consumer_t *self, fh_consumer_counts_t *out);
/* Whole-run latency histograms (either may be NULL). */
void fh_consumer_latency (fh_consumer_t *self, fh_histogram_snapshot_t *queue_wait,
                          fh_histogram_snapshot_t *processing);

#endif
