/*  consumer_figures - what is read of a consumer from outside its
    threads, without locks but the pool's: its counters summed over its
    workers, consistent with each other, its histograms merged, the
    messages handled, each worker's busy time (the control actor's
    snapshot, a lineage keeping a gone instance's figures), their last
    reading; and the stuck check of the tick, which also ends PENDING
    tickets past consume_timeout. See consumer.h; consumer_internal.h
    says how the files share the work.
*/
#include "consumer_internal.h"

#include "metrics.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define COUNTS_TRIES 64 /* readings of a consumer's counters before one must do */

void
fh_consumer_figures_final (fh_consumer_t *self)
{
    fh_host_ctx_stale (self->ctx);
}

/* What a snapshot reads of the state of the consumer and of its parts
   (its plugin, spool, queue, scheduler): gauges and settings, no
   counter. */
static void
s_read_state (fh_consumer_t *self, fh_consumer_counts_t *out)
{
    out->plugin_state = atomic_load (&self->paused) ? FH_CONSUMER_PAUSED
                                                    : (uint64_t) atomic_load_explicit (
                                                        &self->plugin_state, memory_order_acquire);
    /* A reload's successor opens its spool while STATS may run: only
       once state_open says so is the pointer there to read. */
    if (atomic_load_explicit (&self->state_open, memory_order_acquire) && self->spool) {
        out->spool_bytes = fh_spool_bytes (self->spool);
        out->spool_handoff = fh_spool_writer_pending (self->spool_writer);
        /* The status page's on-disk share of the backlog. */
        out->spool_messages = fh_spool_records (self->spool);
    }
    out->capacity = fh_queue_capacity (self->queue);
    out->queue_bytes = atomic_load_explicit (&self->held_bytes, memory_order_relaxed);
    out->stuck = atomic_load_explicit (&self->stuck_workers, memory_order_relaxed);
    out->workers = self->worker_count;
    if (self->pool) {
        pthread_mutex_lock (&self->pool_lock);
        out->keys_active = fh_keyed_keys (self->keyed);
        out->key_backlog_max = fh_keyed_key_backlog_high (self->keyed);
        pthread_mutex_unlock (&self->pool_lock);
    }
}

/* Adds the workers' tallies to out, each worker's counters read under
   its sequence lock: consistent with each other. */
static void
s_read_workers (fh_consumer_t *self, fh_consumer_counts_t *out)
{
    for (size_t i = 0; i < self->worker_count; i++) {
        s_worker_t *worker = &self->workers[i];
        fh_consumer_counts_t seen;
        unsigned before, after;
        do {
            before = atomic_load_explicit (&worker->progress, memory_order_acquire);
            memset (&seen, 0, sizeof seen);
            fh_metrics_counts_add (&seen, &worker->tally, false);
            atomic_thread_fence (memory_order_acquire);
            after = atomic_load_explicit (&worker->progress, memory_order_relaxed);
        } while (before != after || (before & 1));
        fh_metrics_counts_add (out, &seen, false);
    }
}

void
fh_consumer_counts (fh_consumer_t *self, fh_consumer_counts_t *out)
{
    memset (out, 0, sizeof *out);
    /* Every tally is added in by the registry's rows (consumer_counts.h),
       in an order that keeps the figures consistent with each other.
       Spilled messages lost, read before enqueued: never a loss of a
       message not yet counted in. */
    fh_metrics_counts_add (out, &self->spill_tally, false);
    /* The enqueuer's tally is read before and after the workers'. When
       enqueued did not move in between, enqueued - dequeued is the backlog
       at one moment; read across pushes and pops it could show more than
       the queue ever held. After a few tries the last reading stands:
       enqueued, read after dequeued, is never behind it. */
    fh_consumer_counts_t offered, workers;
    for (int tries = 0;; tries++) {
        memset (&offered, 0, sizeof offered);
        memset (&workers, 0, sizeof workers);
        fh_metrics_counts_add (&offered, &self->offered, false);
        s_read_workers (self, &workers);
        uint64_t enqueued = fh_count_read (&self->offered.enqueued);
        if (enqueued == offered.enqueued)
            break;
        if (tries == COUNTS_TRIES) {
            offered.enqueued = enqueued;
            break;
        }
    }
    fh_metrics_counts_add (out, &offered, false);
    fh_metrics_counts_add (out, &workers, false);
    /* Read after the workers' counters: an abandoned ticket is in
       dequeued already. */
    fh_metrics_counts_add (out, &self->tally, false);
    /* The pool's read after the rest: a message replaced and not yet
       counted in coalesced shows as backlog for a moment, never below
       zero. */
    fh_metrics_counts_add (out, &self->pool_tally, false);
    if (atomic_load_explicit (&self->state_open, memory_order_acquire) && self->spool)
        fh_metrics_counts_add (out, fh_spool_tally (self->spool), false);
    if (self->publisher)
        fh_metrics_counts_add (out, fh_publisher_tally (self->publisher), false);
    uint64_t ended = out->completed + out->failed + out->tickets_abandoned;
    out->in_flight = out->dequeued > ended ? out->dequeued - ended : 0;
    uint64_t gone = out->dequeued + out->evicted + out->coalesced;
    out->backlog = out->enqueued > gone ? out->enqueued - gone : 0;
    if (out->backlog > out->backlog_max) {
        /* Seen before the enqueuer noted it: record it, so the maximum
           never goes down from one snapshot to the next. */
        fh_count_raise (&self->offered.backlog_max, out->backlog);
        out->backlog_max = out->backlog;
    }
    s_read_state (self, out);
}

/* Sums one histogram over the workers. */
static void
s_read_merged (fh_consumer_t *self, size_t offset, fh_histogram_snapshot_t *out)
{
    fh_histogram_snapshot_t *part = malloc (sizeof *part);
    memset (out, 0, sizeof *out);
    for (size_t i = 0; i < self->worker_count; i++) {
        fh_histogram_t *h = (fh_histogram_t *) ((char *) &self->workers[i] + offset);
        if (self->worker_count == 1 || !part) {
            fh_histogram_read (h, out);
            break;
        }
        fh_histogram_read (h, part);
        fh_histogram_add (out, part);
    }
    free (part);
}

void
fh_consumer_latency (fh_consumer_t *self, fh_histogram_snapshot_t *queue_wait,
                     fh_histogram_snapshot_t *processing)
{
    if (queue_wait)
        s_read_merged (self, offsetof (s_worker_t, queue_wait), queue_wait);
    if (processing)
        s_read_merged (self, offsetof (s_worker_t, processing), processing);
}

uint64_t
fh_consumer_handled (fh_consumer_t *self, fh_histogram_snapshot_t *end_to_end)
{
    uint64_t handled = 0;
    fh_histogram_snapshot_t *dispatcher = NULL;
    if (self->pool) {
        handled += atomic_load_explicit (&self->dispatcher_handled.handled, memory_order_acquire);
        dispatcher = end_to_end ? malloc (sizeof *dispatcher) : NULL;
    }
    for (size_t i = 0; i < self->worker_count; i++)
        handled += atomic_load_explicit (&self->workers[i].handled.handled, memory_order_acquire);
    handled += atomic_load_explicit (&self->spill_handled.handled, memory_order_acquire);
    if (end_to_end) {
        s_read_merged (self, offsetof (s_worker_t, handled.end_to_end), end_to_end);
        fh_histogram_snapshot_t *spilled = malloc (sizeof *spilled);
        if (spilled) {
            fh_histogram_read (&self->spill_handled.end_to_end, spilled);
            fh_histogram_add (end_to_end, spilled);
            free (spilled);
        }
    }
    if (dispatcher) {
        fh_histogram_read (&self->dispatcher_handled.end_to_end, dispatcher);
        fh_histogram_add (end_to_end, dispatcher);
        free (dispatcher);
    }
    return handled;
}

double
fh_consumer_worker_busy (fh_consumer_t *self, size_t worker)
{
    if (worker >= self->worker_count)
        return 0;
    return (double) atomic_load_explicit (&self->workers[worker].processing.sum_ns,
                                          memory_order_relaxed);
}

size_t
fh_consumer_check_stuck (fh_consumer_t *self, int64_t now_ns)
{
    if (self->consume_timeout_ns <= 0)
        return 0;
    size_t stuck = 0;
    for (size_t i = 0; i < self->worker_count; i++) {
        s_worker_t *worker = &self->workers[i];
        int64_t started = atomic_load_explicit (&worker->consume_started_ns, memory_order_acquire);
        bool now_stuck = started && now_ns - started > self->consume_timeout_ns;
        if (now_stuck && !worker->stuck)
            fh_warning ("consumer '%s': consume of message %llu has been running for "
                        "%.1f s (consume_timeout %.1f s): stuck; %s",
                        self->name, (unsigned long long) atomic_load (&worker->consume_seq),
                        (double) (now_ns - started) / 1e9, (double) self->consume_timeout_ns / 1e9,
                        self->overflow == FH_OVERFLOW_BLOCK
                            ? "once its queue is full the bus waits for it (overflow: block)"
                            : "the other consumers carry on");
        else if (!now_stuck && worker->stuck)
            fh_info ("consumer '%s': no longer stuck", self->name);
        worker->stuck = now_stuck;
        stuck += now_stuck;
    }
    /* A PENDING ticket past consume_timeout: its attempt fails (RETRY). */
    uint64_t oldest = 0;
    size_t expired = fh_pending_expire (self->pending, now_ns - self->consume_timeout_ns, &oldest);
    if (expired) {
        fh_count_add (&self->tally.tickets_expired, expired);
        fh_log_limited (&self->expire_log, FANHUB_LOG_WARNING,
                        "consumer '%s': %zu message%s pending for more than consume_timeout "
                        "%.1f s (the oldest is message %llu): the attempt fails, retry "
                        "settings apply; a late complete is ignored",
                        self->name, expired, expired == 1 ? "" : "s",
                        (double) self->consume_timeout_ns / 1e9, (unsigned long long) oldest);
    }
    atomic_store_explicit (&self->stuck_workers, (unsigned) stuck, memory_order_relaxed);
    return stuck;
}
